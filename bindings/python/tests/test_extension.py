# SPDX-License-Identifier: MIT OR Apache-2.0
"""The compiled binding (library 1.5): the GIL is kept across a call, bad
arguments are refused with the library's words, and the manual clock's "now"
(issues 22 and 23), errors in the caller's units (issue 33). ctest
capi_python, capi_python_wheel_cp3X."""

import datetime
import sys
import threading
import time
import unittest

import tickwheel
from tickwheel import Runtime, TickwheelError

WAIT = 10.0  # seconds: generous limits for loaded CI machines


def nop():
    pass


class Spinner:
    """A CPU-bound Python thread: it takes the GIL whenever another thread lets it go."""

    def __enter__(self):
        self.stop = False
        self.spins = 0

        def spin():
            while not self.stop:
                self.spins += 1
        self.thread = threading.Thread(target=spin, daemon=True)
        self.thread.start()
        while self.spins == 0:  # running (and competing for the GIL) before we measure
            time.sleep(0.001)
        return self

    def __exit__(self, *exc):
        self.stop = True
        self.thread.join()


class TestGil(unittest.TestCase):
    def setUp(self):
        self.interval = sys.getswitchinterval()
        sys.setswitchinterval(0.005)  # CPython's default: what a busy thread gets per turn

    def tearDown(self):
        sys.setswitchinterval(self.interval)

    def test_only_the_waiting_calls_release_the_gil(self):
        # The extension counts each time it lets the GIL go (src/_tickwheel.cpp,
        # NoGil). The calls that never wait keep it -- so a busy Python thread
        # cannot take it in the middle of a start or a stop, as it could at
        # every ctypes call --; the ones that wait for a callback release it.
        releases = tickwheel._ext.gil_releases
        with Runtime(shards=1, workers=1) as rt:
            q = rt.queue()
            before = releases()
            t = rt.start(10.0, nop)
            u = rt.start(10.0, nop, period_s=1.0, group=3, leeway=0.001, clock="boottime")
            v = rt.start(0.0, nop, queue=q)
            t.reset(5.0)
            t.reset_at(rt.now() + 5.0)
            t.query()
            many = rt.start_many([10.0, 10.0], nop)
            rt.reset_many(many, 3.0)
            rt.stop_many(many)
            t.stop()
            rt.stop_group(3)
            self.assertIsNone(u.query())
            rt.stats()
            rt.metrics()
            rt.now("realtime")
            deadline = time.monotonic() + WAIT
            while q.run() == 0 and time.monotonic() < deadline:  # timeout 0: never waits
                time.sleep(0.001)  # (time.sleep releases the GIL, not the binding)
            self.assertFalse(v.stop())
            self.assertEqual(releases(), before, "a call that never waits released the GIL")
            w = rt.start(10.0, nop)
            # stop_sync() waits (and lets the GIL go) only while a run is in progress.
            started, release = threading.Event(), threading.Event()

            def slow():
                started.set()
                release.wait(WAIT)
            w2 = rt.start(0.0, slow)
            self.assertTrue(started.wait(WAIT))
            threading.Timer(0.05, release.set).start()
            for name, call in (("stop_sync", lambda: w2.stop_sync()), ("stop_group(sync)", lambda: rt.stop_group(9, True)),
                               ("Queue.close", q.close), ("shutdown", rt.shutdown)):
                n = releases()
                call()
                self.assertGreater(releases(), n, "%s did not release the GIL while it waited" % name)
        with Runtime(shards=1, workers=1, manual_clock=True) as m:
            n = releases()
            m.advance(1.0)
            self.assertGreater(releases(), n, "advance did not release the GIL")

    def test_callbacks_and_waits_beside_a_busy_thread(self):
        # Callbacks take the GIL on the worker, stop_sync() and close() release
        # it while they wait for one: nothing deadlocks with a busy thread.
        with Runtime(shards=1, workers=1) as rt, Spinner():
            ran = threading.Event()
            t = rt.start(0.001, ran.set)
            self.assertTrue(ran.wait(WAIT))
            started, release = threading.Event(), threading.Event()

            def slow():
                started.set()
                release.wait(WAIT)
            p = rt.start(0.0, slow, period_s=0.001)
            self.assertTrue(started.wait(WAIT))
            threading.Timer(0.05, release.set).start()
            self.assertTrue(p.stop_sync())  # waits (GIL released) for slow() to return
            self.assertTrue(release.is_set())
            self.assertFalse(t.stop())


class TestRelease(unittest.TestCase):
    def test_the_extensions_own_release_drops_each_callable_once(self):
        # With tickwheel._release not replaced, the extension pops _live itself
        # (src/_tickwheel.cpp, release_hook): every way a timer ends drops the
        # callable, exactly once, and a Runtime whose last reference goes with
        # it is closed from another thread (the hook depth is counted).
        import gc
        import weakref
        self.assertIs(tickwheel._release, tickwheel.__dict__["_release"])

        class Fn:
            def __call__(self):
                pass
        live = set(tickwheel._live)
        refs = []
        with Runtime(shards=1, workers=1) as rt:
            fns = [Fn() for _ in range(6)]
            refs = [weakref.ref(f) for f in fns]
            a = rt.start(10.0, fns[0])
            b = rt.start(10.0, fns[1], period_s=1.0)
            c = rt.start(0.0, fns[2])
            many = rt.start_many([10.0, 10.0], fns[3:5])
            rt.start(10.0, fns[5])  # cancelled by close
            del fns
            self.assertTrue(a.stop())
            self.assertTrue(b.stop_sync())
            self.assertTrue(all(rt.stop_many(many)))
            end = time.monotonic() + WAIT
            while c.query() is not None and time.monotonic() < end:
                time.sleep(0.001)
        gc.collect()
        self.assertEqual([r() for r in refs], [None] * 6)
        self.assertEqual(set(tickwheel._live), live)

        # The last reference to a Runtime held by a callable, dropped by the release hook.
        rt = Runtime(shards=1, workers=1)
        native = rt._native
        done = threading.Event()
        rt.start(0.0, lambda rt=rt: done.set())
        del rt
        self.assertTrue(done.wait(WAIT))
        end = time.monotonic() + WAIT
        while native.handle is not None and time.monotonic() < end:
            time.sleep(0.001)
        self.assertIsNone(native.handle, "the Runtime dropped inside its release hook was not closed")


class TestBadInput(unittest.TestCase):
    def setUp(self):
        self.rt = Runtime(shards=1, workers=1, manual_clock=True)

    def tearDown(self):
        self.rt.close()

    def test_bool_is_not_a_delay(self):
        live = set(tickwheel._live)
        for call in (lambda: self.rt.start(True, nop), lambda: self.rt.start(False, nop),
                     lambda: self.rt.start(1.0, nop, period_s=True), lambda: self.rt.start_at(True, nop),
                     lambda: self.rt.start(1.0, nop, leeway=True), lambda: self.rt.start_many([True], nop),
                     lambda: self.rt.advance(True)):
            with self.assertRaisesRegex(TypeError, "not bool"):
                call()
        t = self.rt.start(1.0, nop)
        with self.assertRaisesRegex(TypeError, "not bool"):
            t.reset(True)
        with self.assertRaisesRegex(TypeError, "not bool"):
            t.reset_at(True)
        t.stop()
        self.assertEqual(set(tickwheel._live), live, "a refused start kept its callable")

    def test_a_positive_period_below_1_ns_is_one_tick_not_a_one_shot(self):
        # 1e-10 s rounds to 0 ns, which is a one-shot: the binding counts it as
        # 1 ns, which the runtime rounds up to its tick (1 ms), as Node does.
        runs = []
        t = self.rt.start(0.001, lambda: runs.append(self.rt.now_ns()), period_s=1e-10)
        info = t.query()
        self.assertEqual(info.period, 0.001)
        for _ in range(3):  # one run per tick ("skip" runs once per advance() however many it crosses)
            self.assertEqual(self.rt.advance(0.001), 1)
        self.assertEqual(len(runs), 3, runs)
        self.assertTrue(t.stop())
        self.assertEqual(self.rt.start(0.001, nop, period_s=0).query().period, 0.0)  # 0 stays a one-shot
        self.assertEqual(self.rt.start(0.001, nop, period_s=datetime.timedelta(0)).query().period, 0.0)

    def test_too_large_is_a_value_error_in_seconds(self):
        # Issue 33: the message names the argument as the caller wrote it, with
        # the value given and the limit in seconds -- not a clamped value in ns
        # or a C++ constant's name.
        too_far = tickwheel.MAX_DELAY_S * 2
        t = self.rt.start(1.0, nop)
        limit = "the maximum delay (about 36.5 years, 1152921504.6 s)"
        cases = [
            ("start", lambda: self.rt.start(1e12, nop), "delay_s=1e+12 is above " + limit),
            ("start", lambda: self.rt.start(too_far, nop), "delay_s=%.12g is above %s" % (too_far, limit)),
            ("start", lambda: self.rt.start(10**10, nop), "delay_s=10000000000 is above " + limit),
            ("start", lambda: self.rt.start(datetime.timedelta(days=20000), nop),
             "delay_s=datetime.timedelta(days=20000) is above " + limit),
            ("start", lambda: self.rt.start(1.0, nop, period_s=too_far), "period_s=%.12g is above %s"
             % (too_far, limit)),
            ("start", lambda: self.rt.start(1.0, nop, leeway=2e9), "leeway=2000000000 is above " + limit),
            ("reset", lambda: t.reset(1e12), "delay_s=1e+12 is above " + limit),
            ("reset_many", lambda: self.rt.reset_many([t], 1e12), "delay_s=1e+12 is above " + limit),
            ("advance", lambda: self.rt.advance(1e12), "seconds=1e+12 is above " + limit),
            ("start_at", lambda: self.rt.start_at(1e12, nop), None),
            ("reset_at", lambda: t.reset_at(1e12), None),
            ("start_at", lambda: self.rt.start_at(1e10, nop), "deadline_s=10000000000 is beyond the clocks' range"),
            ("start", lambda: self.rt.start(float("nan"), nop), "delay_s=nan is not a number of seconds"),
            ("start", lambda: self.rt.start(float("inf"), nop), "delay_s=inf is not a finite number of seconds"),
            ("start", lambda: self.rt.start(-0.5, nop), "delay_s=-0.5 is negative"),
            ("start", lambda: self.rt.start(1.0, nop, period_s=-1), "period_s=-1 is negative"),
            ("start", lambda: self.rt.start(1.0, nop, leeway=-0.001), "leeway=-0.001 is negative"),
            ("start", lambda: self.rt.start(1.0, nop, shard=-2), "shard=-2 is neither -1"),
            ("start", lambda: self.rt.start(1.0, nop, group=-1), "group=-1 is not 0 (none) or a group id"),
            ("stop_group", lambda: self.rt.stop_group(0), "group=0 is not a group id"),
            ("query", lambda: self.rt.query(-1), "timer=-1 is not a timer id"),
            ("Runtime", lambda: Runtime(workers=-1), "workers=-1 is negative"),
            ("Runtime", lambda: Runtime(shards=-3), "shards=-3 is negative"),
            ("Runtime", lambda: Runtime(shards=257), "shards=257 is above 256"),
            ("Runtime", lambda: Runtime(workers=5000), "workers=5000 is above 4096"),
            ("Runtime", lambda: Runtime(max_timers=-1), "max_timers=-1 is negative"),
            ("Runtime", lambda: Runtime(resolution_s=2), "resolution_s=2 is outside 1e-06 .. 1 s"),
            ("Runtime", lambda: Runtime(resolution_s=1e-7), "resolution_s=1e-07 is outside 1e-06 .. 1 s"),
            ("Runtime", lambda: Runtime(resolution_s=-1.0), "resolution_s=-1 is negative"),
            ("run", lambda: self.rt.queue().run(0), "max=0 is below 1"),
            ("run", lambda: self.rt.queue().run(1, -0.5), "timeout=-0.5 is negative"),
        ]
        live = set(tickwheel._live)
        for what, call, text in cases:
            with self.subTest(what=what, text=text), self.assertRaises(ValueError) as cm:
                call()
            e = cm.exception
            self.assertIsInstance(e, TickwheelError)  # also what 1.4 raised: code and errno kept
            self.assertIsInstance(e, tickwheel.InvalidArgumentError)
            self.assertEqual(e.code, tickwheel.TW_EINVAL)
            self.assertEqual(e.errno, 22)
            self.assertTrue(str(e).startswith("[Errno 22] %s: " % what), str(e))
            if text is not None:
                self.assertTrue(e.strerror.startswith("%s: %s" % (what, text)), e.strerror)
            self.assertNotIn("kMaxDelay", str(e))
            self.assertNotIn("4294967295", str(e))
            self.assertNotIn("9223372036854775807", str(e))
        self.assertEqual(set(tickwheel._live), live, "a refused start kept its callable")
        self.assertTrue(t.stop())

    def test_asyncio_errors_in_seconds(self):
        import asyncio
        import tickwheel.asyncio as twa
        loop = asyncio.new_event_loop()
        try:
            with Runtime(shards=1, workers=1) as rt:
                limit = "the maximum delay (about 36.5 years, 1152921504.6 s)"
                far = rt.now() + 2e9
                cases = [
                    ("call_later", lambda: twa.call_later(rt, float("nan"), nop, loop=loop),
                     "delay=nan is not a finite number of seconds"),
                    ("call_later", lambda: twa.call_later(rt, 1e12, nop, loop=loop), "delay=1e+12 is above " + limit),
                    ("call_later", lambda: twa.call_later(rt, 1.0, nop, period=1e12, loop=loop),
                     "period=1e+12 is above " + limit),
                    ("call_at", lambda: twa.call_at(rt, far, nop, loop=loop),
                     "when=%.12g is more than %s after now" % (far, limit)),
                ]
                for what, call, text in cases:
                    with self.subTest(what=what, text=text), self.assertRaises(tickwheel.InvalidArgumentError) as cm:
                        call()
                    self.assertTrue(cm.exception.strerror.startswith("%s: %s" % (what, text)),
                                    cm.exception.strerror)
                twa.detach(rt, loop=loop)
        finally:
            loop.close()

    def test_a_deadline_too_far_ahead_is_told_in_seconds(self):
        # More than the maximum delay after the clock's now: the library's
        # check, reported with the value given and now, in seconds.
        t = self.rt.start(1.0, nop)
        far = self.rt.now() + tickwheel.MAX_DELAY_S + 10.0
        for what, call in (("start_at", lambda: self.rt.start_at(far, nop)), ("reset_at", lambda: t.reset_at(far)),
                           ("reset_at", lambda: self.rt.reset_at(t.id, far))):
            with self.subTest(what), self.assertRaises(tickwheel.InvalidArgumentError) as cm:
                call()
            msg = cm.exception.strerror
            self.assertTrue(msg.startswith("%s: deadline_s=%.12g is more than the maximum delay (about 36.5 years, "
                                           "1152921504.6 s) after now (" % (what, far)), msg)
        self.assertTrue(t.stop())

    def test_the_binding_checks_stay_value_errors(self):
        with self.assertRaises(ValueError):
            self.rt.start(-1.0, nop)
        with self.assertRaises(ValueError):
            self.rt.start(float("nan"), nop)


class TestManualClockNow(unittest.TestCase):
    """The documented way to compute a deadline: rt.now(clock) + seconds, the
    runtime's own clock (virtual on a manual runtime); tickwheel.now() is the
    machine's clock."""

    def test_manual_runtime(self):
        with Runtime(shards=1, workers=1, manual_clock=True) as rt:
            fired = []
            t = rt.start(30.0, lambda: fired.append(rt.now()))
            rt.advance(5.0)
            # The machine's clock and the runtime's differ once advance() moved it.
            self.assertGreater(rt.now() - tickwheel.now(), 4.0)
            deadline = rt.now() + 2.0  # the README's form
            self.assertTrue(t.reset_at(deadline))
            self.assertEqual(rt.advance(1.999), 0)
            self.assertEqual(fired, [])
            self.assertEqual(rt.advance(0.001), 1)
            self.assertEqual(len(fired), 1)
            self.assertGreaterEqual(fired[0], deadline)
            # start_at and Runtime.reset_at alike, on another clock too.
            fired.clear()
            b = rt.start_at(rt.now("boottime") + 1.0, lambda: fired.append(1), clock="boottime")
            self.assertEqual(rt.advance(0.999), 0)
            self.assertEqual(rt.advance(0.001), 1)
            u = rt.start(100.0, lambda: fired.append(2))
            self.assertTrue(rt.reset_at(u, rt.now() + 0.5))
            self.assertEqual(rt.advance(0.5), 1)
            self.assertEqual(fired, [1, 2])
            self.assertIsNone(b.query())

    def test_real_runtime(self):
        with Runtime(shards=1, workers=1) as rt:
            ran = threading.Event()
            at = []
            t = rt.start(100.0, lambda: (at.append(time.monotonic()), ran.set()))
            deadline = rt.now() + 0.05  # the same form; here rt.now() is the machine's clock
            self.assertAlmostEqual(rt.now(), tickwheel.now(), delta=1.0)
            self.assertTrue(t.reset_at(deadline))
            self.assertTrue(ran.wait(WAIT))
            self.assertGreaterEqual(at[0], deadline)  # never early


if __name__ == "__main__":
    unittest.main()
