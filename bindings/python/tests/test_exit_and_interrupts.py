# SPDX-License-Identifier: MIT OR Apache-2.0
"""Issue 33: the interpreter's exit in every order (atexit handlers registered
before and after ``import tickwheel``, daemon threads, open runtimes, running
callbacks), Ctrl-C during the waits, the window of a start, and callback
exceptions counted. ctest capi_python (and the wheel tests).

Each exit order runs in its own interpreter (a subprocess) and must end with
exit status 0 and nothing on stderr but what the script itself prints: no
"terminate called", no "Fatal Python error", no SIGABRT."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import unittest

import tickwheel
from tickwheel import Runtime, TickwheelError

WAIT = 10.0


def run_script(body, timeout=60, env=None):
    """Runs ``body`` in a fresh interpreter; returns (status, stdout, stderr)."""
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(body)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout, env=env if env is not None else dict(os.environ))
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


class TestExitOrders(unittest.TestCase):
    """No abort at exit, whatever runs when the interpreter ends."""

    def check(self, body, want_stdout=None, runs=1):
        for i in range(runs):
            status, out, err = run_script(body)
            for bad in ("terminate called", "Fatal Python error", "Aborted", "Segmentation fault"):
                self.assertNotIn(bad, err, "run %d" % i)
            self.assertEqual(status, 0, "run %d: exit status %d (%s)\nstdout:\n%s\nstderr:\n%s"
                             % (i, status, signal.Signals(-status).name if status < 0 else "", out, err))
            self.assertEqual(err, "", "run %d" % i)
            if want_stdout is not None:
                self.assertEqual(out, want_stdout, "run %d" % i)
        return out

    def test_runtime_opened_by_an_atexit_handler_registered_before_import(self):
        # The known crash: this handler runs after tickwheel's exit hook; a
        # Runtime it opened kept firing into a finalising interpreter (a worker
        # in PyEval_AcquireThread -> PyThread_exit_thread -> forced unwind
        # through noexcept -> std::terminate, SIGABRT). Now Runtime() refuses,
        # with the reason.
        out = self.check("""
            import atexit, threading
            def late():
                try:
                    rt = tickwheel.Runtime(shards=1, workers=1)
                except tickwheel.TickwheelError as e:
                    print("refused:", e.code == tickwheel.TW_ESHUTDOWN, "exit hook has run" in str(e))
                    return
                rt.start(0.0, lambda: None, period_s=0.001)  # would fire during finalisation
                rt.start(0.0, print)
                print("opened")
            atexit.register(late)
            import tickwheel
            rt = tickwheel.Runtime(shards=1, workers=1)
            rt.start(0.0, lambda: None, period_s=0.001)
        """, runs=3)
        self.assertEqual(out, "refused: True True\n")

    def test_atexit_handler_registered_after_import_leaves_a_runtime_open(self):
        # Runs before tickwheel's exit hook, which closes what it left open.
        self.check("""
            import atexit, threading, tickwheel
            ran = threading.Event()
            def early():
                rt = tickwheel.Runtime(shards=1, workers=1)
                rt.start(0.0, ran.set)
                rt.start(0.0, lambda: None, period_s=0.001)
                rt.start(60, lambda: None)
                ran.wait(10)
                print("ran", ran.is_set())
            atexit.register(early)
        """, want_stdout="ran True\n")

    def test_atexit_handler_before_import_uses_a_runtime_closed_by_the_exit_hook(self):
        self.check("""
            import atexit
            def late():
                try:
                    rt.start(0.0, print)
                except tickwheel.TickwheelError as e:
                    print("closed:", e.code == tickwheel.TW_ESHUTDOWN, rt.closed)
            atexit.register(late)
            import tickwheel
            rt = tickwheel.Runtime(shards=1, workers=1)
            rt.start(0.0, lambda: None, period_s=0.001)
        """, want_stdout="closed: True True\n")

    def test_daemon_threads_starting_stopping_and_opening_runtimes_at_exit(self):
        self.check("""
            import threading, time, tickwheel
            rt = tickwheel.Runtime(shards=2, workers=2)
            def churn():
                while True:
                    try:
                        rt.start(5, lambda: None).stop()
                        rt.start(0.0, lambda: None)
                    except tickwheel.TickwheelError:
                        time.sleep(0.001)  # closed by the exit hook
            def lifecycle():
                while True:
                    try:
                        with tickwheel.Runtime(shards=1, workers=1) as r:
                            r.start(0.0, lambda: None, period_s=0.001)
                            r.start(60, lambda: None)
                    except tickwheel.TickwheelError:
                        time.sleep(0.001)  # refused once the exit hook has run
            for f in (churn, churn, lifecycle):
                threading.Thread(target=f, daemon=True).start()
            time.sleep(0.1)
        """, runs=3)

    def test_daemon_thread_waiting_in_stop_sync_for_a_running_callback_at_exit(self):
        self.check("""
            import threading, time, tickwheel
            rt = tickwheel.Runtime(shards=1, workers=1)
            started = threading.Event()
            def slow():
                started.set()
                time.sleep(0.3)
            t = rt.start(0.0, slow, period_s=0.001)
            started.wait(10)
            threading.Thread(target=t.stop_sync, daemon=True).start()
            time.sleep(0.05)
            print("exiting")
        """, want_stdout="exiting\n")

    def test_callbacks_running_at_exit_and_one_opening_a_runtime(self):
        # A callback in progress when the exit hook runs finishes; one that
        # falls due after it does not run; a callback that opens a Runtime
        # while the exit hook is under way is refused (and reports it).
        out = self.check("""
            import threading, time, tickwheel
            rt = tickwheel.Runtime(shards=2, workers=2)
            started = threading.Event()
            def slow():
                started.set()
                time.sleep(0.2)
            def opener():
                try:
                    tickwheel.Runtime(shards=1, workers=1).close()
                except tickwheel.TickwheelError:
                    pass
            rt.start(0.0, slow, period_s=0.001)
            rt.start(0.0, opener, period_s=0.001)
            started.wait(10)
            print("exiting")
        """)
        self.assertEqual(out, "exiting\n")

    def test_everything_at_once(self):
        # The orders together, several interpreters at a time: an atexit
        # handler on each side of the import, daemon threads, open runtimes,
        # running callbacks, a runtime dropped by its own release hook.
        body = textwrap.dedent("""
            import atexit, threading, time
            def late():
                try:
                    tickwheel.Runtime().start(0.0, print, period_s=0.001)
                except tickwheel.TickwheelError:
                    pass
            atexit.register(late)
            import tickwheel
            def early():
                tickwheel.Runtime(shards=1, workers=1).start(0.0, lambda: None, period_s=0.001)
            atexit.register(early)
            rt = tickwheel.Runtime(shards=2, workers=2)
            def churn():
                while True:
                    try:
                        rt.start(0.0, lambda: None)
                        rt.start(5, lambda: None).stop_sync()
                    except tickwheel.TickwheelError:
                        time.sleep(0.001)
            for _ in range(2):
                threading.Thread(target=churn, daemon=True).start()
            for _ in range(3):
                tickwheel.Runtime(shards=1, workers=1).start(0, lambda: None)  # dropped by its release hook
            rt.start(0.0, lambda: time.sleep(0.01), period_s=0.001)
            time.sleep(0.05)
        """)
        for batch in range(4):
            procs = [subprocess.Popen([sys.executable, "-c", body], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                     for _ in range(3)]
            for p in procs:
                out, err = p.communicate(timeout=60)
                self.assertEqual((p.returncode, err.decode()), (0, ""), "batch %d" % batch)


INTERRUPT = """
import json, os, signal, threading, time, tickwheel
rt = tickwheel.Runtime(shards=1, workers=1)
started, release = threading.Event(), threading.Event()
runs = []
def slow():
    runs.append(1)
    started.set()
    release.wait(30)  # the wait Ctrl-C must not have to sit out
t = rt.start(0.0, slow, period_s=0.001)
started.wait(10)
def ctrl_c():
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGINT)
threading.Thread(target=ctrl_c, daemon=True).start()
t0 = time.monotonic()
result = {}
try:
    %s
    result["interrupted"] = False
except KeyboardInterrupt:
    result["interrupted"] = True
result["after_s"] = time.monotonic() - t0
%s
release.set()
print(json.dumps(result))
"""


class TestCtrlC(unittest.TestCase):
    """Ctrl-C (SIGINT) interrupts the waits for a running callback, as it
    interrupts Event.wait(), with the documented state afterwards."""

    def interrupt(self, call, after):
        status, out, err = run_script(INTERRUPT % (call, textwrap.indent(textwrap.dedent(after), "")))
        self.assertEqual((status, err), (0, ""), out)
        result = json.loads(out.splitlines()[-1])
        self.assertTrue(result["interrupted"], result)
        # 0.2 s until the signal, then at most a slice (20 ms) and a loaded machine's delay.
        self.assertLess(result["after_s"], 5.0, result)
        return result

    def test_stop_sync(self):
        r = self.interrupt("t.stop_sync()", """
n = len(runs)
time.sleep(0.05)
result["stopped"] = len(runs) == n and t.query() is not None  # no new run; the one in progress goes on
release.set()
result["second_wait"] = t.stop_sync() is False  # waits for the run to end (already stopped)
result["released"] = t._token not in tickwheel._live  # its callable was released
rt.close()
""")
        self.assertEqual((r["stopped"], r["second_wait"], r["released"]), (True, True, True), r)

    def test_close(self):
        r = self.interrupt("rt.close()", """
try:
    rt.start(1, print)
    result["refused"] = False
except tickwheel.TickwheelError as e:
    result["refused"] = e.code == tickwheel.TW_ESHUTDOWN
result["closed"] = rt.closed
release.set()
rt.close()
result["closed_after"] = rt.closed
""")
        self.assertEqual((r["refused"], r["closed"], r["closed_after"]), (True, False, True), r)

    def test_leaving_with(self):
        r = self.interrupt("""with rt:
        pass""", """
result["closed"] = rt.closed
release.set()
rt.close()
result["closed_after"] = rt.closed
""")
        self.assertEqual((r["closed"], r["closed_after"]), (False, True), r)

    def test_shutdown(self):
        r = self.interrupt("rt.shutdown()", """
release.set()
rt.shutdown()
result["shut_down"] = rt.stats()["shut_down"]
rt.close()
""")
        self.assertTrue(r["shut_down"], r)

    def test_exit_is_not_cut_short_by_ctrl_c(self):
        # Ctrl-C while the exit hook waits for a running callback: the hook
        # takes its wait up again; the interpreter still exits cleanly.
        status, out, err = run_script("""
            import os, signal, threading, time, tickwheel
            rt = tickwheel.Runtime(shards=1, workers=1)
            started = threading.Event()
            def slow():
                started.set()
                time.sleep(0.4)
            rt.start(0.0, slow)
            started.wait(10)
            def ctrl_c():
                time.sleep(0.1)
                os.kill(os.getpid(), signal.SIGINT)
            threading.Thread(target=ctrl_c, daemon=True).start()
            print("exiting")
        """)
        self.assertEqual((status, out, err), (0, "exiting\n", ""))


class TestStartWindow(unittest.TestCase):
    """A KeyboardInterrupt at any point of a start: either the timer was not
    started (and nothing is kept), or it was and its callable is kept until
    its run -- never a live timer whose callable is gone (it would fire and
    silently do nothing). Forced: a trace function raises KeyboardInterrupt
    at the k-th bytecode executed inside tickwheel's Python code during the
    start, for every k."""

    def injected(self, start, k):
        """Runs start() with a KeyboardInterrupt at the k-th opcode; True if it was raised."""
        count = [0]
        code_file = tickwheel.__file__

        def tracer(frame, event, arg):
            if frame.f_code.co_filename != code_file:
                return None
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
            if event == "opcode":
                count[0] += 1
                if count[0] == k:
                    raise KeyboardInterrupt("injected")
            return tracer

        sys.settrace(tracer)
        try:
            start()
        except KeyboardInterrupt:
            return True
        finally:
            sys.settrace(None)
        return False

    def check_every_point(self, make_start, deliver):
        with Runtime(shards=1, workers=1, manual_clock=True) as rt:
            q = rt.queue()
            k = 1
            while True:
                self.assertLess(k, 1000, "the start never completed")
                calls = []
                before_started = rt.stats()["started"]
                before_live = set(tickwheel._live)
                raised = self.injected(make_start(rt, q, lambda: calls.append(1)), k)
                started = rt.stats()["started"] - before_started
                filed = set(tickwheel._live) - before_live
                deliver(rt, q)
                where = "KeyboardInterrupt at opcode %d of the start (raised: %s, started: %d)" % (k, raised, started)
                if started:
                    self.assertEqual(len(filed), 1, "a live timer without its callable: " + where)
                    self.assertEqual(calls, [1], "the started timer did not run its callable: " + where)
                else:
                    self.assertEqual(filed, set(), "a refused start kept its callable: " + where)
                    self.assertEqual(calls, [], where)
                if not raised:
                    return k
                k += 1

    @staticmethod
    def deliver(rt, q):
        rt.advance(0.01)
        while q.run() > 0:
            pass

    @unittest.skipIf(sys.gettrace() is not None, "under a tracer (coverage, debugger)")
    def test_plain_start(self):
        self.check_every_point(lambda rt, q, fn: lambda: rt.start(0.001, fn), self.deliver)

    @unittest.skipIf(sys.gettrace() is not None, "under a tracer (coverage, debugger)")
    def test_start_with_options_and_a_queue(self):
        # The checked path (Runtime._start), bound to a Queue: the window the
        # issue found (a KeyboardInterrupt inside the queue's bookkeeping).
        n = self.check_every_point(
            lambda rt, q, fn: lambda: rt.start(0.001, fn, queue=q, leeway=0.0, group=3), self.deliver)
        self.assertGreater(n, 10)  # the checks ran in Python, and were interrupted at each step

    @unittest.skipIf(sys.gettrace() is not None, "under a tracer (coverage, debugger)")
    def test_start_at_and_start_many(self):
        def start_at(rt, q, fn):
            deadline = rt.now() + 0.001  # read before: only the start is interrupted
            return lambda: rt.start_at(deadline, fn, clock="monotonic")
        self.check_every_point(start_at, self.deliver)
        self.check_every_point(lambda rt, q, fn: lambda: rt.start_many([0.001], fn, queue=q), self.deliver)


class TestExceptionsCounted(unittest.TestCase):
    """A Python callback that raises is counted in stats()["callback_exceptions"]
    and tickwheel_callback_exceptions_total, as the library counts C++ ones."""

    @staticmethod
    def total(rt):
        for line in rt.metrics().splitlines():
            if line.startswith("tickwheel_callback_exceptions_total"):
                return float(line.rsplit(" ", 1)[1])
        raise AssertionError("no tickwheel_callback_exceptions_total in the metrics")

    def test_on_a_worker(self):
        errors = []
        done = threading.Event()

        def boom():
            raise ValueError("boom")

        def on_error(exc, timer):
            errors.append(exc)
            if len(errors) == 3:
                done.set()
        with Runtime(shards=1, workers=1, on_error=on_error) as rt:
            rt.start(0.0, boom)
            p = rt.start(0.0, boom, period_s=0.001)
            self.assertTrue(done.wait(WAIT))
            p.stop_sync()
            n = rt.stats()["callback_exceptions"]
            self.assertGreaterEqual(n, 3)
            self.assertEqual(n, len(errors))
            self.assertEqual(self.total(rt), n)
            ok = threading.Event()
            rt.start(0.0, ok.set)  # one that returns is not counted
            self.assertTrue(ok.wait(WAIT))
            self.assertEqual(rt.stats()["callback_exceptions"], n)

    def test_on_the_callers_thread(self):
        # advance() and Queue.run() run callbacks here; KeyboardInterrupt is
        # re-raised by the call that ran it, and counted too.
        with Runtime(shards=1, workers=1, manual_clock=True, on_error=lambda exc, t: None) as rt:
            rt.start(0.001, lambda: 1 / 0)
            self.assertEqual(rt.advance(0.01), 1)
            self.assertEqual(rt.stats()["callback_exceptions"], 1)

            def interrupt():
                raise KeyboardInterrupt
            rt.start(0.001, interrupt)
            with self.assertRaises(KeyboardInterrupt):
                rt.advance(0.01)
            q = rt.queue()
            rt.start(0.001, lambda: [][1], queue=q)
            rt.advance(0.01)
            self.assertEqual(q.run(), 1)
            self.assertEqual(rt.stats()["callback_exceptions"], 3)
            self.assertEqual(self.total(rt), 3)


if __name__ == "__main__":
    unittest.main()
