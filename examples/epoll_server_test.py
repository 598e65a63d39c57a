#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""ctest example_epoll_server: drives examples/epoll_server.c with real clients.

    epoll_server_test.py PATH/TO/epoll_server

Four runs of the server, each bounded (the whole test takes about 2 s, and
gives up after 10 s per step):

1. idle timeouts (--idle-ms 300), 20 concurrent clients:
   * 8 "echo" clients send three messages (one larger than the server's
     4 KB buffer), read each echo back and close;
   * 6 "idle" clients connect (half of them send one message) and then
     wait, and must be closed by the server -- never before 300 ms after
     the last bytes they sent that the server read (measured here, on
     CLOCK_MONOTONIC like the server; only lateness is tolerated, never
     earliness);
   * 6 "keepalive" clients send five messages 100 ms apart (500 ms in all,
     more than the timeout: the server's reset on each read keeps them
     open), then go idle and are closed as above.
   Then SIGTERM: exit status 0 and a summary that adds up exactly with
   what the clients saw (accepted, echoed bytes, closed by whom, timer
   fired/stopped counts, no callback off the loop thread, none early).
2. shutdown with connections open (--idle-ms 60000): 3 clients echo once
   and stay; SIGTERM closes them (the timers' release hooks, run by
   tw_queue_destroy on the loop thread) and the clients see EOF.
3. --max-conns 2 --idle-ms 100: one client closes, one is idle-closed, and
   the server exits by itself.
4. bad arguments: exit status 2 and a usage message, no hang.

Only "never early" depends on time, and only in one direction; where a
heavily loaded machine could stall a client for longer than the timeout
(a keepalive gap, an echo client between its sends), the server may
legitimately close that client: the client then checks the close was not
early, and the accounting allows it.
"""
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time

STEP_TIMEOUT = 10.0  # s: any single wait
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg, flush=True)


def now_ns():
    return time.monotonic_ns()  # CLOCK_MONOTONIC, as the server's tw_now_ns()


class Server:
    def __init__(self, exe, *args):
        self.args = [exe, *args]
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.port = None
        ready, _, _ = select.select([self.proc.stdout], [], [], STEP_TIMEOUT)
        line = self.proc.stdout.readline() if ready else ""
        m = re.fullmatch(r"port (\d+)\n", line)
        if not m:
            self.proc.kill()
            out, err = self.proc.communicate()
            raise RuntimeError(f"{self.args}: no 'port N' first line (got {line!r}); stdout {out!r} stderr {err!r}")
        self.port = int(m.group(1))

    def finish(self, send_sigterm):
        """Stops the server (SIGTERM) or waits for it to exit; returns (rc, summary dict)."""
        if send_sigterm:
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, err = self.proc.communicate(timeout=STEP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            fail(f"{self.args}: did not exit within {STEP_TIMEOUT} s")
        sys.stdout.write(out)
        sys.stdout.write(err)
        m = re.search(r"^summary: (.*)$", out, re.M)
        if not m:
            fail(f"{self.args}: no summary line")
            return self.proc.returncode, {}
        summary = {}
        for kv in m.group(1).split():
            k, v = kv.split("=", 1)
            summary[k] = int(v) if v.isdigit() else v
        return self.proc.returncode, summary


class Client:
    """One connection; records what it saw.

    last_activity_ns is the time just before the client last did something
    the server surely saw: connecting, or sending bytes of which at least
    some came back. The server's idle timer was (re-)armed after it, so the
    server may not close the connection before last_activity_ns + timeout.
    (A send that got nothing back does not count: the server may have
    closed the connection before it, legitimately, when this client was
    stalled between two sends for longer than the timeout.)"""

    def __init__(self, port, name):
        self.name = name
        self.received = 0          # echoed bytes received
        self.last_activity_ns = now_ns()  # before connect: the server's timer starts later
        self.closed_by = None      # "client" or "server"
        self.idle_before_close_ns = None
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=STEP_TIMEOUT)

    def echo(self, payload):
        """Sends payload and reads it back. False if the server closed the connection."""
        sent_at = now_ns()  # before sending: the server reads it later
        got = b""
        try:
            self.sock.sendall(payload)
            got = b""
            while len(got) < len(payload):
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                got += chunk
        except (ConnectionResetError, BrokenPipeError):
            pass  # got holds what came back before the reset
        self.received += len(got)
        if got:
            self.last_activity_ns = sent_at  # the server read (some of) it
        if got == payload:
            return True
        if len(got) == len(payload):
            fail(f"{self.name}: echo differs from what was sent")
        self.saw_server_close(now_ns())
        return False

    def wait_server_close(self):
        """Waits (without sending) until the server closes the connection."""
        try:
            chunk = self.sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        except socket.timeout:
            fail(f"{self.name}: not closed by the server within {STEP_TIMEOUT} s")
            self.close()
            return
        t = now_ns()
        if chunk:
            fail(f"{self.name}: unexpected data {chunk!r}")
        self.saw_server_close(t)

    def saw_server_close(self, t):
        self.closed_by = "server"
        self.idle_before_close_ns = t - self.last_activity_ns
        self.sock.close()

    def close(self):
        self.idle_before_close_ns = now_ns() - self.last_activity_ns
        self.closed_by = "client"
        self.sock.close()


def run_clients(targets):
    """Runs each target (a no-argument function) on its own thread; returns when all are done."""
    errors = []

    def wrap(fn):
        try:
            fn()
        except Exception as e:  # a client's failure must not hang the test
            errors.append(repr(e))

    threads = [threading.Thread(target=wrap, args=(fn,), daemon=True) for fn in targets]
    for t in threads:
        t.start()
    give_up = time.monotonic() + 3 * STEP_TIMEOUT
    for t in threads:
        t.join(max(0.0, give_up - time.monotonic()))
        if t.is_alive():
            fail("a client thread did not finish in time")
    for e in errors:
        fail("client raised " + e)


def expect(summary, key, want, what, desc=None):
    """Checks summary[key] == want, or want(summary[key]) if want is a function (described by desc)."""
    got = summary.get(key)
    ok = want(got) if callable(want) else got == want
    if not ok:
        fail(f"{what}: summary {key}={got}, expected {desc if callable(want) else want}")


def common_checks(rc, summary, what):
    if rc != 0:
        fail(f"{what}: exit status {rc}, expected 0")
    for key in ("thread_violations", "early", "errors"):
        expect(summary, key, 0, what)


def run_idle_timeouts(exe):
    what = "run 1 (idle timeouts)"
    idle_ms = 300
    idle_ns = idle_ms * 1_000_000
    srv = Server(exe, "--idle-ms", str(idle_ms))
    clients = []
    lock = threading.Lock()

    def new_client(name):
        c = Client(srv.port, name)
        with lock:
            clients.append(c)
        return c

    def echo_client(i):
        c = new_client(f"echo{i}")
        for payload in (b"hello %d\n" % i, bytes(range(256)) * 20, b"bye\n"):  # 5120 bytes > 4 KB
            if not c.echo(payload):
                return  # closed by the server: only possible after a stall longer than the timeout
        c.close()

    def idle_client(i):
        c = new_client(f"idle{i}")
        if i % 2 == 0 and not c.echo(b"just once\n"):
            return
        c.wait_server_close()

    def keepalive_client(i):
        c = new_client(f"keepalive{i}")
        for k in range(5):
            if not c.echo(b"ping %d.%d\n" % (i, k)):
                return
            time.sleep(idle_ms / 1000 / 3)
        c.wait_server_close()

    run_clients([lambda i=i: echo_client(i) for i in range(8)] + [lambda i=i: idle_client(i) for i in range(6)] +
                [lambda i=i: keepalive_client(i) for i in range(6)])
    rc, summary = srv.finish(send_sigterm=True)
    common_checks(rc, summary, what)

    by_server = [c for c in clients if c.closed_by == "server"]
    by_client = [c for c in clients if c.closed_by == "client"]
    # A client that closed less than the timeout after its last activity was
    # certainly seen closing by the server (its timer was not due yet).
    surely_peer = [c for c in by_client if c.idle_before_close_ns < idle_ns]
    for c in by_server:
        if c.idle_before_close_ns < idle_ns:
            fail(f"{c.name}: closed by the server {c.idle_before_close_ns / 1e6:.3f} ms after its last activity, "
                 f"before the {idle_ms} ms timeout")
    if len(clients) != 20 or len(by_server) + len(by_client) != 20:
        fail(f"{what}: {len(clients)} clients, {len(by_server)} closed by the server, {len(by_client)} by themselves")
    for c in clients:
        if c.name.startswith(("idle", "keepalive")) and c.closed_by != "server":
            fail(f"{c.name}: not closed by the server")
    # Keepalive clients outlived the timeout thanks to the resets (else the check above failed).
    lat = sorted(c.idle_before_close_ns / 1e6 for c in by_server)
    if lat:
        print(f"{what}: {len(by_server)} idle-closed after {lat[0]:.1f} .. {lat[-1]:.1f} ms of silence "
              f"(timeout {idle_ms} ms); {len(by_client)} closed by the client", flush=True)

    expect(summary, "exit", "signal", what)
    expect(summary, "accepted", 20, what)
    expect(summary, "echoed_bytes", sum(c.received for c in clients), what)
    expect(summary, "shutdown_closed", 0, what)
    n_idle = summary.get("idle_closed", -1)
    n_peer = summary.get("peer_closed", -1)
    ambiguous = len(by_client) - len(surely_peer)
    if not (n_idle + n_peer == 20 and len(by_server) <= n_idle <= len(by_server) + ambiguous):
        fail(f"{what}: idle_closed={n_idle} peer_closed={n_peer}, but {len(by_server)} clients were closed by "
             f"the server and {len(by_client)} closed themselves ({ambiguous} of them after the timeout)")
    # Each idle close is one callback run by tw_queue_run; each client close one stop.
    expect(summary, "tw_fired", n_idle, what)
    expect(summary, "queue_ran", n_idle, what)
    expect(summary, "tw_stopped", n_peer, what)
    # One reset per message read (at least: a large message may take two reads).
    expect(summary, "tw_reset", lambda v: isinstance(v, int) and v >= 8 * 3 + 3 + 6 * 5, what, ">= 57")


def run_shutdown(exe):
    what = "run 2 (shutdown with open connections)"
    srv = Server(exe, "--idle-ms", "60000")
    clients = [Client(srv.port, f"open{i}") for i in range(3)]
    for c in clients:
        if not c.echo(b"still here\n"):  # the echo proves the server accepted it
            fail(f"{c.name}: no echo")
    rc, summary = srv.finish(send_sigterm=True)
    for c in clients:
        c.sock.settimeout(STEP_TIMEOUT)
        c.wait_server_close()  # closed by the release hooks run in tw_queue_destroy
    common_checks(rc, summary, what)
    expect(summary, "exit", "signal", what)
    expect(summary, "accepted", 3, what)
    expect(summary, "shutdown_closed", 3, what)
    expect(summary, "idle_closed", 0, what)
    expect(summary, "peer_closed", 0, what)
    expect(summary, "tw_fired", 0, what)
    expect(summary, "tw_stopped", 3, what)  # tw_queue_destroy cancels as tw_timer_stop does
    expect(summary, "echoed_bytes", 3 * len(b"still here\n"), what)


def run_max_conns(exe):
    what = "run 3 (--max-conns 2)"
    srv = Server(exe, "--idle-ms", "100", "--max-conns", "2")
    a = Client(srv.port, "max-a")
    b = Client(srv.port, "max-b")
    if a.echo(b"a\n"):
        a.close()
    b.wait_server_close()
    rc, summary = srv.finish(send_sigterm=False)  # it exits by itself
    common_checks(rc, summary, what)
    expect(summary, "exit", "max-conns", what)
    expect(summary, "accepted", 2, what)
    expect(summary, "shutdown_closed", 0, what)
    if b.closed_by != "server" or b.idle_before_close_ns < 100_000_000:
        fail(f"{what}: the idle client was not closed by the server after 100 ms")
    if a.closed_by == "client" and a.idle_before_close_ns < 100_000_000:
        expect(summary, "peer_closed", 1, what)  # it closed before its timer was due
        expect(summary, "idle_closed", 1, what)
    else:  # stalled longer than the timeout: either may have closed it
        expect(summary, "idle_closed", lambda v: v in (1, 2) and v + summary.get("peer_closed", -1) == 2, what,
               "1 or 2, with peer_closed, 2 in all")
    expect(summary, "tw_fired", summary.get("idle_closed"), what)


def run_bad_usage(exe):
    for args in (["--idle-ms", "0"], ["--idle-ms"], ["--max-conns", "-1"], ["70000"], ["--bogus"]):
        try:
            p = subprocess.run([exe, *args], capture_output=True, text=True, timeout=STEP_TIMEOUT)
        except subprocess.TimeoutExpired:
            fail(f"epoll_server {' '.join(args)}: hung")
            continue
        if p.returncode != 2 or "usage:" not in p.stderr or p.stdout:
            fail(f"epoll_server {' '.join(args)}: exit {p.returncode}, stdout {p.stdout!r}, stderr {p.stderr!r}")


def main():
    if len(sys.argv) != 2:
        print("usage: epoll_server_test.py PATH/TO/epoll_server", file=sys.stderr)
        return 2
    exe = sys.argv[1]
    start = time.monotonic()
    for step in (run_idle_timeouts, run_shutdown, run_max_conns, run_bad_usage):
        t = time.monotonic()
        try:
            step(exe)
        except Exception as e:
            fail(f"{step.__name__}: {e!r}")
        print(f"{step.__name__}: {time.monotonic() - t:.2f} s", flush=True)
    print(f"epoll_server_test: {time.monotonic() - start:.2f} s, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
