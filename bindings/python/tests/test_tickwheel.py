# SPDX-License-Identifier: MIT OR Apache-2.0
"""Tests of the binding (ctest capi_python; TICKWHEEL_LIB names the built library)."""

import errno
import gc
import os
import subprocess
import sys
import threading
import time
import unittest
import weakref

import tickwheel
from tickwheel import Runtime, TickwheelError

WAIT = 10.0  # seconds: generous limits for loaded CI machines


def wait_for(pred, timeout=WAIT):
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            return False
        time.sleep(0.001)
    return True


def assert_raises_each(test, fn, cases):
    """fn(arg) raises exc, for each (arg, exc) of cases, in order."""
    for arg, exc in cases:
        with test.subTest(arg=arg), test.assertRaises(exc):
            fn(arg)


class Recorder:
    """A callable that records when it ran (on which thread)."""

    def __init__(self):
        self.times = []
        self.threads = set()
        self.event = threading.Event()
        self.lock = threading.Lock()

    def __call__(self):
        with self.lock:
            self.times.append(time.monotonic())
            self.threads.add(threading.get_ident())
        self.event.set()

    @property
    def count(self):
        with self.lock:
            return len(self.times)


class Callable:
    """A callable that weak references can watch."""

    def __call__(self):
        pass


class ReleaseCounter:
    """Records every token the binding releases (tickwheel._release: the release
    hook's work, also done by the binding when the library did not take the arg)."""

    def __init__(self):
        self.calls = []
        self._orig = None

    def __enter__(self):
        self._orig = tickwheel._release

        def counting(token, _orig=self._orig, _calls=self.calls):
            _calls.append(token)
            _orig(token)

        tickwheel._release = counting
        return self

    def __exit__(self, *exc):
        tickwheel._release = self._orig


class TestBasics(unittest.TestCase):
    def setUp(self):
        self.rt = Runtime(shards=2, workers=2)

    def tearDown(self):
        self.rt.close()

    def test_version_and_clock(self):
        self.assertEqual(tickwheel.version(), (1, 7, 0))
        self.assertEqual(tickwheel.__version__, "%d.%d.%d" % tickwheel.version())
        a = time.monotonic()
        n = tickwheel.now()
        b = time.monotonic()
        self.assertLessEqual(a, n + 1e-6)  # same clock (CLOCK_MONOTONIC)
        self.assertLessEqual(n, b + 1e-6)

    def test_one_shot_fires_once_never_early_on_a_worker(self):
        rec = Recorder()
        before = time.monotonic()
        t = self.rt.start(0.02, rec)
        self.assertIsInstance(t, tickwheel.Timer)
        self.assertNotEqual(t.id, 0)
        self.assertTrue(rec.event.wait(WAIT))
        time.sleep(0.03)
        self.assertEqual(rec.count, 1)
        self.assertGreaterEqual(rec.times[0], before + 0.02 - 1e-6)
        self.assertNotIn(threading.get_ident(), rec.threads)
        self.assertFalse(t.stop())  # fired: nothing to stop
        self.assertFalse(t.reset(0.01))

    def test_periodic_then_stop_sync(self):
        rec = Recorder()
        t = self.rt.start(0.005, rec, period_s=0.005)
        self.assertTrue(wait_for(lambda: rec.count >= 3))
        self.assertTrue(t.stop_sync())
        n = rec.count
        time.sleep(0.03)
        self.assertEqual(rec.count, n)
        self.assertFalse(t.stop())

    def test_stop_before_it_fires(self):
        rec = Recorder()
        t = self.rt.start(10, rec)
        self.assertTrue(t.stop())
        self.assertFalse(t.stop())
        self.assertFalse(t.stop_sync())
        self.assertEqual(rec.count, 0)

    def test_reset_moves_the_deadline(self):
        rec = Recorder()
        t = self.rt.start(10, rec)
        before = time.monotonic()
        self.assertTrue(t.reset(0.03))
        self.assertTrue(rec.event.wait(WAIT))
        self.assertGreaterEqual(rec.times[0], before + 0.03 - 1e-6)

    def test_timedelta_and_start_at(self):
        import datetime

        rec = Recorder()
        self.rt.start(datetime.timedelta(milliseconds=5), rec)
        deadline = tickwheel.now() + 0.02
        rec2 = Recorder()
        self.rt.start_at(deadline, rec2)
        self.assertTrue(rec.event.wait(WAIT))
        self.assertTrue(rec2.event.wait(WAIT))
        self.assertGreaterEqual(rec2.times[0], deadline - 1e-6)
        rec3 = Recorder()
        self.rt.start_at(0.0, rec3)  # in the past: fires at once
        self.assertTrue(rec3.event.wait(WAIT))

    def test_shard_hint(self):
        rec = Recorder()
        self.rt.start(0, rec, shard=1)
        self.assertTrue(rec.event.wait(WAIT))

    def test_bad_arguments(self):
        with self.assertRaises(ValueError):
            self.rt.start(-1, lambda: None)
        with self.assertRaises(ValueError):
            self.rt.start(1, lambda: None, period_s=-0.5)
        with self.assertRaises(TypeError):
            self.rt.start(1, "not callable")
        with self.assertRaises(TickwheelError) as cm:
            self.rt.start(tickwheel.MAX_DELAY_S * 2, lambda: None)
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        self.assertEqual(cm.exception.code, tickwheel.TW_EINVAL)
        with self.assertRaises(TickwheelError):
            self.rt.start(1e30, lambda: None)  # beyond uint64 nanoseconds
        with self.assertRaises(TickwheelError):
            self.rt.start(1, lambda: None, shard=-2)
        t = self.rt.start(10, lambda: None)
        with self.assertRaises(ValueError):
            t.reset(-1)
        with self.assertRaises(TickwheelError):
            t.reset(tickwheel.MAX_DELAY_S * 2)
        self.assertTrue(t.stop())
        self.assertEqual(tickwheel._live.get(0), None)

    def test_stats(self):
        rec = Recorder()
        self.rt.start(0, rec)
        t = self.rt.start(10, lambda: None)
        t.stop()
        self.assertTrue(rec.event.wait(WAIT))
        st = self.rt.stats()
        self.assertEqual(st["shards"], 2)
        self.assertEqual(st["workers"], 2)
        self.assertEqual(st["resolution_ns"], 1000000)
        self.assertEqual(st["started"], 2)
        self.assertEqual(st["stopped"], 1)
        self.assertTrue(wait_for(lambda: self.rt.stats()["fired"] == 1))
        self.assertFalse(st["shut_down"])


class TestLifetimes(unittest.TestCase):
    def test_callable_kept_alive_until_released(self):
        with Runtime(shards=1, workers=1) as rt:
            live_before = len(tickwheel._live)
            fired = threading.Event()

            class Fn:
                def __call__(self):
                    fired.set()

            fn = Fn()
            ref = weakref.ref(fn)
            t = rt.start(10, fn)  # far off: pending however slow this thread is
            del fn
            gc.collect()
            self.assertIsNotNone(ref(), "the binding keeps the callable alive while pending")
            self.assertTrue(t.reset(0))
            self.assertTrue(fired.wait(WAIT))
            # Released after its last run: the binding drops it.
            self.assertTrue(wait_for(lambda: ref() is None))
            self.assertEqual(len(tickwheel._live), live_before)

            fn2 = Fn()
            ref2 = weakref.ref(fn2)
            t = rt.start(10, fn2)
            del fn2
            self.assertTrue(t.stop())  # released inside stop
            gc.collect()
            self.assertIsNone(ref2())

    def test_context_manager_cancels_and_releases_pending(self):
        recs = [Recorder() for _ in range(20)]
        refs = [weakref.ref(r) for r in recs]
        with Runtime() as rt:
            timers = [rt.start(10, r, period_s=i % 2) for i, r in enumerate(recs)]
        self.assertTrue(rt.closed)
        del recs
        gc.collect()
        self.assertTrue(all(r() is None for r in refs))
        # Every call on a closed runtime raises ESHUTDOWN.
        for call in (timers[0].stop, timers[0].stop_sync, lambda: timers[0].reset(1),
                     lambda: rt.start(1, lambda: None), rt.stats):
            with self.assertRaises(TickwheelError) as cm:
                call()
            self.assertEqual(cm.exception.errno, errno.ESHUTDOWN)
        rt.close()  # idempotent

    def test_calls_after_shutdown(self):
        rt = Runtime()
        t = rt.start(10, lambda: None)
        rt.shutdown()
        with self.assertRaises(TickwheelError) as cm:
            t.stop()
        self.assertEqual(cm.exception.code, tickwheel.TW_ESHUTDOWN)
        with self.assertRaises(TickwheelError):
            rt.start(1, lambda: None)
        st = rt.stats()
        self.assertTrue(st["shut_down"])
        self.assertEqual(st["cancelled_at_shutdown"], 1)
        rt.close()

    def test_failed_start_releases(self):
        with Runtime(max_timers=1) as rt:
            n = len(tickwheel._live)
            rt.start(10, lambda: None)
            with self.assertRaises(TickwheelError) as cm:
                rt.start(10, lambda: None)
            self.assertEqual(cm.exception.errno, errno.EAGAIN)
            self.assertEqual(len(tickwheel._live), n + 1)

    def test_failed_start_releases_exactly_once(self):
        # A refused start keeps nothing: no _live entry, no reference to the
        # callable. EINVAL, ESHUTDOWN -- refused by the binding's checks
        # before the library: the callable was never filed, nothing to
        # release; EAGAIN -- the library took it and its release hook ran
        # once before the call returned (for a token that was never filed).
        def eagain(rt):
            rt.start(10, lambda: None)  # max_timers=1: the next start is EAGAIN
            return errno.EAGAIN

        def eshutdown(rt):
            rt.shutdown()  # still open: the extension says ESHUTDOWN before the library
            return errno.ESHUTDOWN

        cases = [
            ("EINVAL delay", lambda rt: errno.EINVAL, dict(delay=tickwheel.MAX_DELAY_S * 2), 0),
            ("EINVAL period", lambda rt: errno.EINVAL, dict(period=tickwheel.MAX_DELAY_S * 2), 0),
            ("EINVAL shard", lambda rt: errno.EINVAL, dict(shard=-2), 0),
            ("EAGAIN", eagain, {}, 1),
            ("ESHUTDOWN", eshutdown, {}, 0),
        ]
        for name, prepare, kw, hooks in cases:
            with self.subTest(name), Runtime(shards=1, workers=1, max_timers=1) as rt:
                want = prepare(rt)
                with ReleaseCounter() as releases:
                    fn = Callable()
                    ref = weakref.ref(fn)
                    refs_before = sys.getrefcount(fn)
                    live_before = set(tickwheel._live)
                    with self.assertRaises(TickwheelError) as cm:
                        rt.start(kw.get("delay", 10), fn, kw.get("period", 0), shard=kw.get("shard", -1))
                    self.assertEqual(cm.exception.errno, want)
                    # Released before start() raised, exactly once where the library took it.
                    self.assertEqual(len(releases.calls), hooks, releases.calls)
                    self.assertFalse(set(releases.calls) & live_before)
                    self.assertEqual(set(tickwheel._live), live_before)
                    del cm
                    self.assertEqual(sys.getrefcount(fn), refs_before)
                    del fn
                    self.assertIsNone(ref(), "the callable is freed")

    def test_start_on_a_closed_runtime_releases_exactly_once(self):
        rt = Runtime(shards=1, workers=1)
        rt.close()
        with ReleaseCounter() as releases:
            fn = Callable()
            ref = weakref.ref(fn)
            with self.assertRaises(TickwheelError) as cm:
                rt.start(1, fn)  # refused by the binding before C
            self.assertEqual(cm.exception.code, tickwheel.TW_ESHUTDOWN)
            del cm, fn
            self.assertEqual(len(releases.calls), 0)  # never filed, never given to the library
            self.assertIsNone(ref())

    def test_runtime_kept_alive_by_pending_timers(self):
        rec = Recorder()
        Runtime().start(0.02, rec)  # no reference kept to the runtime
        gc.collect()
        self.assertTrue(rec.event.wait(WAIT))


    def test_exit_while_a_hook_drops_the_last_runtime(self):
        # A runtime whose only reference is its pending timer is dropped by the
        # release hook on a worker thread, racing the interpreter's exit hook,
        # which must close or wait for every C runtime before Python finalises.
        # Regression: the exit hook joined a thread not yet started (an error
        # every few runs) and a worker then entered a finalising interpreter
        # (abort). Many short processes, several at once, so that the race is
        # hit on a quiet machine too.
        script = (
            "import threading, tickwheel\n"
            "ev = threading.Event()\n"
            "for _ in range(3):\n"
            "    tickwheel.Runtime(shards=1, workers=1).start(0, ev.set)\n"
            "ev.wait(10)\n"
        )
        env = dict(os.environ)
        for batch in range(16):
            procs = [subprocess.Popen([sys.executable, "-c", script], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                     for _ in range(4)]
            for p in procs:
                out, err = p.communicate(timeout=60)
                self.assertEqual((p.returncode, err.decode()), (0, ""), "batch %d" % batch)


class TestCallbacks(unittest.TestCase):
    def test_exception_goes_to_on_error_and_periodic_continues(self):
        errors = []

        def boom():
            raise RuntimeError("boom")

        with Runtime(on_error=lambda exc, timer: errors.append((exc, timer))) as rt:
            t = rt.start(0, boom, period_s=0.002)
            self.assertTrue(wait_for(lambda: len(errors) >= 3))
            t.stop_sync()
        exc, timer = errors[0]
        self.assertIsInstance(exc, RuntimeError)
        self.assertEqual(timer, t)

    def test_close_from_a_callback_is_edeadlk(self):
        result = {}
        done = threading.Event()
        with Runtime() as rt:
            def cb():
                try:
                    rt.close()
                except TickwheelError as e:
                    result["errno"] = e.errno
                # The runtime still works.
                result["timer"] = rt.start(10, lambda: None)
                done.set()

            rt.start(0, cb)
            self.assertTrue(done.wait(WAIT))
            self.assertEqual(result["errno"], errno.EDEADLK)
            self.assertFalse(rt.closed)

    def test_a_periodic_timer_stops_itself(self):
        with Runtime() as rt:
            rec = Recorder()
            holder = {}

            def cb():
                rec()
                if rec.count == 3:
                    holder["rc"] = holder["timer"].stop_sync()  # own callback: does not wait

            holder["timer"] = rt.start(0.01, cb, period_s=0.002)
            self.assertTrue(wait_for(lambda: "rc" in holder))
            self.assertTrue(holder["rc"])
            time.sleep(0.02)
            self.assertEqual(rec.count, 3)

    def test_stop_sync_waits_for_a_running_callback(self):
        started = threading.Event()
        state = {"finished": False}

        def slow():
            started.set()
            time.sleep(0.1)
            state["finished"] = True

        with Runtime() as rt:
            t = rt.start(0, slow, period_s=0.001)
            self.assertTrue(started.wait(WAIT))
            t.stop_sync()  # releases the GIL while waiting: the callback can finish
            self.assertTrue(state["finished"])

    def test_many_threads_and_callbacks(self):
        """Python threads start/stop timers while TBB workers run callbacks: GIL safety."""
        counter = {"n": 0}
        lock = threading.Lock()

        def cb():
            with lock:
                counter["n"] += 1

        with Runtime(shards=2, workers=2) as rt:
            fired_expected = []

            def worker(k):
                mine = 0
                for i in range(300):
                    t = rt.start((i % 5) * 0.001, cb)
                    if i % 3 == 0 and t.stop():
                        continue
                    mine += 1
                fired_expected.append(mine)

            threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            total = sum(fired_expected)
            self.assertTrue(wait_for(lambda: counter["n"] == total), (counter["n"], total))
        self.assertEqual(counter["n"], total)


if __name__ == "__main__":
    unittest.main()
