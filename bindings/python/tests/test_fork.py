# SPDX-License-Identifier: MIT OR Apache-2.0
"""fork(): a runtime of the parent is unusable in the child (ForkedError), none of
its callbacks or release hooks runs there, exiting the child neither hangs nor
releases anything of the parent, a runtime created in the child works, and the
parent is unaffected (ctest capi_python).

A runtime created in a fork child works even when the parent's oneTBB workers
had run callbacks, or another thread of the parent was creating or closing a
runtime at the fork: the library then runs the child's callbacks on threads of
the runtime's own instead of oneTBB's (test_child_runtime_fires_after_the_
parents_callbacks_ran; phase A of test_exit_hook_of_fork_children).
"""

import errno
import json
import multiprocessing
import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time
import traceback
import unittest
import warnings
import weakref

import tickwheel
from tickwheel import ForkedError, Runtime, TickwheelError

from test_tickwheel import WAIT, Callable, ReleaseCounter, wait_for

_INHERITED = None  # a parent runtime, reached by multiprocessing children through fork


def _fork():
    with warnings.catch_warnings():  # Python >= 3.12 warns about fork() with threads
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


def _run_in_fork_child(body, timeout=60):
    """Runs body() in an os.fork() child; returns the list of failures it reports."""
    r, w = os.pipe()
    pid = _fork()
    if pid == 0:  # the child: never return into unittest
        try:
            os.close(r)
            try:
                failures = body()
            except BaseException:  # noqa: BLE001
                failures = ["exception in the child:\n" + traceback.format_exc()]
            os.write(w, json.dumps(failures).encode())
        finally:
            os._exit(0)
    os.close(w)
    data, end = b"", time.monotonic() + timeout
    try:
        while True:
            left = end - time.monotonic()
            if left <= 0 or not select.select([r], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return ["the child hung (killed after %d s)" % timeout]
            chunk = os.read(r, 65536)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(r)
    _, status = os.waitpid(pid, 0)
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        return ["the child ended with status %#x" % status]
    return json.loads(data) if data else ["the child reported nothing"]


class Check:
    """Collects failed expectations of a fork child (it cannot use unittest asserts)."""

    def __init__(self):
        self.failures = []

    def __call__(self, cond, what):
        if not cond:
            self.failures.append(what)

    def raises_forked(self, fn, what):
        try:
            fn()
        except ForkedError as exc:
            self(exc.code == tickwheel.TW_EFORKED and exc.errno == 1001, "%s: code %r" % (what, exc.code))
            self(isinstance(exc, TickwheelError), "%s: ForkedError is a TickwheelError" % what)
            self("fork" in str(exc), "%s: message does not name fork: %s" % (what, exc))
        except BaseException as exc:  # noqa: BLE001
            self(False, "%s raised %r, not ForkedError" % (what, exc))
        else:
            self(False, "%s did not raise in the child" % what)


class TestFork(unittest.TestCase):
    def setUp(self):
        self.rt = Runtime(shards=2, workers=2)

    def tearDown(self):
        self.rt.close()

    def test_os_fork_child(self):
        rt = self.rt
        runs = []  # the pid of every run of the parent's timers, in this process's memory
        runs_lock = threading.Lock()

        def tick():
            with runs_lock:
                runs.append(os.getpid())

        with ReleaseCounter() as releases:
            before = set(tickwheel._live)
            periodic = rt.start(0.002, tick, period_s=0.002)
            pending_fn = Callable()
            pending_ref = weakref.ref(pending_fn)
            pending = rt.start(0.1, pending_fn)  # due while the child runs
            del pending_fn
            parent_tokens = set(tickwheel._live) - before
            self.assertEqual(len(parent_tokens), 2)
            self.assertTrue(wait_for(lambda: len(runs) >= 2))

            def child():
                check = Check()
                me = os.getpid()
                released_at_fork = len(releases.calls)
                # Every call on the parent's runtime raises ForkedError.
                fn = Callable()
                ref = weakref.ref(fn)
                check.raises_forked(lambda: rt.start(0, fn), "start")
                check.raises_forked(lambda: rt.start_at(0, fn), "start_at")
                del fn
                fresh = releases.calls[released_at_fork:]
                # Refused before the library: never filed, nothing to release.
                check(fresh == [], "a refused start ran a release hook: %r" % fresh)
                check(ref() is None, "the refused callable is freed")
                # The same through C (as if the binding's own check were raced):
                # EFORKED from the extension, which files nothing.
                native = rt._native
                native.epoch, epoch = tickwheel._fork_epoch, native.epoch
                fn = Callable()
                ref = weakref.ref(fn)
                n = len(releases.calls)
                live = set(tickwheel._live)
                check.raises_forked(lambda: rt.start(0, fn, period_s=1), "start through C")
                native.epoch = epoch
                del fn
                check(len(releases.calls) == n, "TW_EFORKED: a release hook ran")
                check(set(tickwheel._live) == live, "TW_EFORKED: the callable was filed")
                check(ref() is None, "TW_EFORKED: the callable is freed")
                check.raises_forked(periodic.stop, "stop")
                check.raises_forked(periodic.stop_sync, "stop_sync")
                check.raises_forked(lambda: pending.reset(1), "reset")
                check.raises_forked(rt.stats, "stats")
                check.raises_forked(rt.shutdown, "shutdown")
                # No callback of the parent's runs here (the one-shot is due now).
                time.sleep(0.2)
                with runs_lock:
                    check(me not in runs, "a parent callback ran in the child")
                # close() frees the child's copy: at once, without a hook.
                t0 = time.monotonic()
                rt.close()
                check(time.monotonic() - t0 < 2, "close() in the child is quick")
                check(rt.closed, "closed after close()")
                rt.close()  # idempotent
                check.raises_forked(lambda: rt.start(0, Callable()), "start after close")
                parent_released = [t for t in releases.calls if t in parent_tokens]
                check(not parent_released, "a parent release hook ran in the child: %r" % parent_released)
                check(parent_tokens <= set(tickwheel._live), "the parent's callables stay referenced")
                check(pending_ref() is not None, "the parent's pending callable is not released")
                # A runtime created in the child takes, stops and releases timers,
                # and fires them (the parent's workers have run callbacks).
                with Runtime(shards=1, workers=1) as own:
                    fn = Callable()
                    ref = weakref.ref(fn)
                    t = own.start(10, fn)
                    del fn
                    check(t.stop(), "stop in the child's runtime")
                    check(ref() is None, "released by the child's runtime")
                    fired = threading.Event()
                    own.start(0.001, fired.set)
                    check(fired.wait(WAIT), "a timer of the child's runtime fires")
                return check.failures

            self.assertEqual(_run_in_fork_child(child), [])
            # The parent is unaffected: its timers still fire, then release exactly once.
            n = len(runs)
            self.assertTrue(wait_for(lambda: len(runs) >= n + 3))
            self.assertTrue(wait_for(lambda: pending_ref() is None))  # fired, released
            self.assertTrue(periodic.stop_sync())
            self.assertEqual(set(runs), {os.getpid()})
            for token in parent_tokens:
                self.assertEqual(releases.calls.count(token), 1)
            self.assertFalse(parent_tokens & set(tickwheel._live))

    def test_exit_hook_of_fork_children(self):
        # Fork children exit normally (sys.exit: the exit hooks run). Phase A:
        # forked while other threads start/stop timers and create/close runtimes
        # and callbacks run, so calls and closes are in flight and locks held at
        # the fork: the exit hook frees the inherited runtimes without hanging or
        # releasing anything of the parent. Phase B: forked with only callbacks
        # running. In phase B and in every other child of phase A, the child
        # has a runtime of its own, fires a timer of it (a child of phase A was
        # forked while another thread created or closed a runtime) and has a
        # timer pending at exit: the exit hook closes it (releasing that timer
        # once) too.
        # An atexit handler registered before tickwheel's runs after it and
        # reports by exit code; each child writes to a pipe as soon as os.fork()
        # returns in it, so a hang inside os.fork() itself (CPython gh-112275,
        # before 3.11.10 / 3.12) is told apart from one in the exit path.
        script = textwrap.dedent("""
            import atexit, os, sys, threading, time, warnings
            warnings.simplefilter("ignore", DeprecationWarning)
            PARENT = os.getpid()
            state = {}

            def after_tickwheel_exit_hook():
                if os.getpid() == PARENT:
                    return
                released = state["released"]
                bad = [t for t in released if t in state["parent_tokens"]]
                code = 0
                if bad:
                    code |= 1  # a parent release hook ran in the child
                own = state.get("own_token")
                if own is not None and released.count(own) != 1:
                    code |= 2  # the child's own timer was not released exactly once
                if tickwheel._natives:
                    code |= 4  # a C runtime was left open
                os._exit(code)

            atexit.register(after_tickwheel_exit_hook)
            import tickwheel

            released = []
            _orig = tickwheel._release
            def counting(token):
                released.append(token)
                _orig(token)
            tickwheel._release = counting

            rt = tickwheel.Runtime(shards=2, workers=2)
            stop = threading.Event()
            def churn():
                while not stop.is_set():
                    rt.start(5, lambda: None).stop()
            def lifecycle():
                while not stop.is_set():
                    with tickwheel.Runtime(shards=1, workers=1) as r:
                        r.start(10, lambda: None)
            threads = [threading.Thread(target=churn, daemon=True),
                       threading.Thread(target=lifecycle, daemon=True)]
            for th in threads:
                th.start()
            before = set(tickwheel._live)
            periodic = rt.start(0, lambda: None, period_s=0.001)
            rt.start(30, lambda: None)
            time.sleep(0.05)
            failures = 0

            def fork_child(i, own_runtime):
                state["parent_tokens"] = set(tickwheel._live) - before
                state["released"] = released
                r, w = os.pipe()
                pid = os.fork()
                if pid == 0:
                    os.write(w, b"1")  # out of os.fork()
                    del released[:]
                    if own_runtime:
                        own = tickwheel.Runtime(shards=1, workers=1)
                        fired = threading.Event()
                        own.start(0.001, fired.set)
                        if not fired.wait(10):
                            os._exit(8)  # the child's own runtime did not fire
                        own.start(30, lambda: None)  # pending at exit
                        state["own_token"] = max(tickwheel._live)
                    sys.exit(0)  # runs the exit hooks
                os.close(w)
                end = time.monotonic() + 30
                while True:
                    done, status = os.waitpid(pid, os.WNOHANG)
                    if done:
                        break
                    if time.monotonic() > end:
                        os.set_blocking(r, False)
                        try:
                            out_of_fork = os.read(r, 1) == b"1"
                        except BlockingIOError:
                            out_of_fork = False
                        print("child %d hung %s" % (i, "in its exit path" if out_of_fork else
                              "inside os.fork() (CPython gh-112275?)"), file=sys.stderr)
                        os.kill(pid, 9)
                        os.waitpid(pid, 0)
                        status = -1
                        break
                    time.sleep(0.005)
                os.close(r)
                if status not in (0, -1):
                    print("child %d: status %#x" % (i, status), file=sys.stderr)
                return status == 0

            for i in range(12):  # phase A
                failures += not fork_child(i, own_runtime=i % 2 == 1)
                time.sleep(0.01)
            stop.set()
            for th in threads:
                th.join()
            for i in range(12, 16):  # phase B
                failures += not fork_child(i, own_runtime=True)
            if not periodic.stop_sync():
                print("the parent's periodic timer was not pending", file=sys.stderr)
                failures += 1
            rt.close()
            sys.exit(1 if failures else 0)
            """)
        p = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=240)
        self.assertEqual((p.returncode, p.stderr.decode()), (0, ""))

    def test_multiprocessing_fork_children_get_forked_error(self):
        global _INHERITED
        ctx = multiprocessing.get_context("fork")
        rec_runs = []
        fired = threading.Event()

        def tick():
            rec_runs.append(1)
            fired.set()

        with ReleaseCounter() as releases:
            fn = Callable()
            ref = weakref.ref(fn)
            periodic = self.rt.start(0.002, tick, period_s=0.002)
            pending = self.rt.start(0.2, fn)
            del fn
            self.assertTrue(fired.wait(WAIT))
            _INHERITED = (self.rt, periodic)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    # A Pool worker's ForkedError comes back to the parent as one.
                    with ctx.Pool(1) as pool:
                        with self.assertRaises(ForkedError) as cm:
                            pool.apply(_mp_start_on_inherited)
                        self.assertIn("fork", str(cm.exception))
                        self.assertEqual(cm.exception.code, tickwheel.TW_EFORKED)
                        self.assertEqual(pool.apply_async(_mp_runtime_of_its_own).get(WAIT * 3), True)
                    # A Process reports every call, and its own runtime.
                    recv, send = ctx.Pipe(duplex=False)
                    proc = ctx.Process(target=_mp_report, args=(send,))
                    proc.start()
                    send.close()
                    self.assertTrue(recv.poll(WAIT * 3), "the child reported nothing")
                    report = recv.recv()
                    proc.join(WAIT * 3)
                    self.assertEqual(proc.exitcode, 0)
            finally:
                _INHERITED = None
            for call in ("start", "stop", "reset", "stats", "shutdown"):
                self.assertEqual(report[call][:2], ("ForkedError", tickwheel.TW_EFORKED), call)
                self.assertIn("fork", report[call][2])
            self.assertEqual(report["close"], "ok")
            self.assertEqual(report["own"], True)
            # The parent's timers still fire, then release exactly once.
            n = len(rec_runs)
            self.assertTrue(wait_for(lambda: len(rec_runs) >= n + 3))
            self.assertTrue(wait_for(lambda: ref() is None))  # the one-shot fired in the parent
            self.assertFalse(pending.stop())
            self.assertTrue(periodic.stop_sync())
            self.assertEqual(len(releases.calls), len(set(releases.calls)), "a token released twice")
            self.assertEqual(len(releases.calls), 2)


def _mp_start_on_inherited():
    rt, _ = _INHERITED
    rt.start(0, lambda: None)  # raises ForkedError in the child


def _mp_runtime_of_its_own():
    # Starts, stops (releasing), fires and closes (the parent's workers have run).
    with Runtime(shards=1, workers=1) as rt:
        fn = Callable()
        ref = weakref.ref(fn)
        t = rt.start(10, fn)
        del fn
        fired = threading.Event()
        rt.start(0.001, fired.set)
        return t.stop() and ref() is None and fired.wait(WAIT) and rt.stats()["started"] == 2


def _mp_report(conn):
    rt, timer = _INHERITED
    report = {}
    calls = {
        "start": lambda: rt.start(0, lambda: None),
        "stop": timer.stop,
        "reset": lambda: timer.reset(1),
        "stats": rt.stats,
        "shutdown": rt.shutdown,
        "close": rt.close,
    }
    for name, call in calls.items():
        try:
            call()
            report[name] = "ok"
        except BaseException as exc:  # noqa: BLE001
            report[name] = (type(exc).__name__, getattr(exc, "code", None), str(exc))
    report["own"] = _mp_runtime_of_its_own()
    conn.send(report)
    conn.close()


_CHILD_RUNTIME_SCRIPT = textwrap.dedent("""
    import os, sys, threading, time, warnings
    warnings.simplefilter("ignore", DeprecationWarning)
    import tickwheel
    parent = tickwheel.Runtime(shards=2, workers=2)
    if sys.argv[1] == "warm":  # the parent's workers run a callback before the fork
        ev = threading.Event()
        parent.start(0, ev.set)
        ev.wait(10)
        time.sleep(0.2)  # the workers go to sleep (forked while they spun, the bug hid)
    pid = os.fork()
    if pid == 0:
        own = tickwheel.Runtime(shards=1, workers=1)
        fired = threading.Event()
        own.start(0.005, fired.set)
        if not fired.wait(3):
            os._exit(7)  # without closing: closing would hang on the stuck callback
        own.close()
        sys.exit(0)  # the exit hook frees the parent's runtime
    _, status = os.waitpid(pid, 0)
    parent.close()
    sys.exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 9)
    """)


class TestRuntimeCreatedInAForkChild(unittest.TestCase):
    """Fresh interpreters: this process's oneTBB workers have run callbacks already."""

    def run_script(self, mode):
        p = subprocess.run([sys.executable, "-c", _CHILD_RUNTIME_SCRIPT, mode],
                           capture_output=True, timeout=120)
        return p.returncode, p.stderr.decode()

    def test_child_runtime_fires(self):
        self.assertEqual(self.run_script("cold"), (0, ""))

    def test_child_runtime_fires_after_the_parents_callbacks_ran(self):
        # oneTBB's workers exist in the parent: oneTBB is unusable in the child
        # (its pool is copied without its threads), so the child's runtime runs
        # its callbacks on threads of its own.
        self.assertEqual(self.run_script("warm"), (0, ""))


if __name__ == "__main__":
    unittest.main()
