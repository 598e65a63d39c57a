# SPDX-License-Identifier: MIT OR Apache-2.0
"""Clocks and the manual clock of 1.3 in the Python binding (ctest capi_python):
start(..., clock=), tickwheel.now(clock) / now_ns(clock), Runtime(manual_clock=True),
rt.advance(), rt.now(clock) / rt.now_ns(clock)."""

import datetime
import threading
import time
import unittest

import tickwheel
from tickwheel import Clock, Runtime, TickwheelError

from test_tickwheel import WAIT, wait_for
S = 10**9  # ns per second
MS = 10**6


class ManualClockTest(unittest.TestCase):
    def setUp(self):
        self.rt = Runtime(manual_clock=True)
        self.t0 = self.rt.now_ns()

    def tearDown(self):
        self.rt.close()

    def at(self):
        """Virtual ns since setUp on the runtime's monotonic clock."""
        return self.rt.now_ns() - self.t0

    def test_flag(self):
        self.assertTrue(self.rt.manual_clock)
        with Runtime(shards=1, workers=1) as real:
            self.assertFalse(real.manual_clock)

    def test_30s_timer_fires_only_after_advance_30s(self):
        fired = []
        self.rt.start(30, lambda: fired.append((self.at(), threading.get_ident())))
        time.sleep(0.05)  # real time passing does nothing: no driver thread, the clock stands still
        self.assertEqual(fired, [])
        self.assertEqual(self.at(), 0)
        self.assertEqual(self.rt.advance(29.999), 0)
        self.assertEqual(fired, [])
        self.assertEqual(self.rt.advance(0.001), 1)
        # On this thread, inside advance(), with the clock at its deadline.
        self.assertEqual(fired, [(30 * S, threading.get_ident())])
        self.assertEqual(self.rt.advance(60), 0)
        self.assertEqual(len(fired), 1)

    def test_now_moves_by_exactly_the_step_on_every_clock(self):
        before = {c: self.rt.now_ns(c) for c in Clock}
        for c in Clock:  # starts at the machine's values
            self.assertLess(abs(before[c] - tickwheel.now_ns(c)), 5 * S, c)
        time.sleep(0.02)
        self.assertEqual({c: self.rt.now_ns(c) for c in Clock}, before)
        self.assertEqual(self.rt.advance(1.5), 0)
        self.assertEqual(self.rt.advance(datetime.timedelta(milliseconds=250)), 0)
        self.assertEqual(self.rt.advance(0.000000001), 0)
        for c in Clock:
            self.assertEqual(self.rt.now_ns(c) - before[c], 1_750_000_001, c)
        self.assertEqual(self.rt.now("boottime"), self.rt.now_ns(tickwheel.CLOCK_BOOTTIME) / 1e9)
        self.assertEqual(self.rt.advance(0), 0)
        self.assertEqual(self.rt.now_ns(), before[Clock.MONOTONIC] + 1_750_000_001)

    def test_deadline_order_ties_in_start_order(self):
        order = []
        for name, delay in (("c", 3), ("a", 1), ("b1", 2), ("b2", 2), ("b3", 2)):
            self.rt.start(delay, lambda name=name: order.append((name, self.at())))
        self.assertEqual(self.rt.advance(10), 5)
        self.assertEqual(order, [("a", 1 * S), ("b1", 2 * S), ("b2", 2 * S), ("b3", 2 * S), ("c", 3 * S)])

    def test_chains_started_from_callbacks_run_in_the_same_advance(self):
        seen = []

        def step(n):
            seen.append((n, self.at()))
            if n < 5:
                self.rt.start(1, lambda: step(n + 1))

        self.rt.start(1, lambda: step(1))
        self.assertEqual(self.rt.advance(3.5), 3)  # 1 s, 2 s, 3 s; the 4th is due at 4 s
        self.assertEqual(seen, [(1, 1 * S), (2, 2 * S), (3, 3 * S)])
        self.assertEqual(self.rt.advance(10), 2)
        self.assertEqual(seen[3:], [(4, 4 * S), (5, 5 * S)])
        # A callback's 0-delay timer runs in the same advance, after it.
        late = []
        self.rt.start(0.5, lambda: self.rt.start(0, lambda: late.append(self.at())))
        self.assertEqual(self.rt.advance(1), 2)
        self.assertEqual(late, [14 * S])  # 13.5 s + 0.5 s, then + 0

    def test_reset_and_stop_from_callbacks_are_honoured(self):
        fired = []
        victim = self.rt.start(2, lambda: fired.append("victim"))
        moved = self.rt.start(3, lambda: fired.append(("moved", self.at())))
        self.rt.start(1, lambda: (victim.stop(), moved.reset(5)))  # moved: now 1 s + 5 s
        self.assertEqual(self.rt.advance(5), 1)
        self.assertEqual(fired, [])
        self.assertEqual(self.rt.advance(1), 1)
        self.assertEqual(fired, [("moved", 6 * S)])

    def test_periodic_skip_runs_once_per_window_with_missed(self):
        infos = []
        t = self.rt.start(0.010, lambda: infos.append((self.at(), t.query())), 0.010)
        self.assertEqual(self.rt.advance(0.035), 1)  # crosses 10, 20, 30 ms
        self.assertEqual(len(infos), 1)
        at, info = infos[0]
        self.assertEqual(at, 10 * MS)  # served at the first deadline it crossed
        self.assertEqual((info.runs, info.missed), (1, 2))
        self.assertEqual(t.query().deadline, (self.t0 + 40 * MS) / 1e9)  # still on its grid
        self.assertEqual(self.rt.advance(0.005), 1)  # 40 ms: one deadline, no miss
        self.assertEqual((infos[1][0], infos[1][1].missed), (40 * MS, 2))
        self.assertEqual(self.rt.advance(0.010), 1)
        self.assertTrue(t.stop())
        self.assertEqual(self.rt.advance(1), 0)

    def test_periodic_burst_runs_every_crossed_deadline(self):
        ats = []
        t = self.rt.start(0.010, lambda: ats.append(self.at()), 0.010, policy="burst")
        self.assertEqual(self.rt.advance(0.035), 3)
        self.assertEqual(ats, [10 * MS, 20 * MS, 30 * MS])
        info = t.query()
        self.assertEqual((info.runs, info.missed), (3, 0))
        self.assertEqual(self.rt.advance(0.005), 1)
        self.assertEqual(ats[-1], 40 * MS)

    def test_periodic_delay_runs_as_its_runs_fall(self):
        ats = []
        self.rt.start(0.010, lambda: ats.append(self.at()), 0.010, policy="delay")
        self.assertEqual(self.rt.advance(0.035), 3)
        self.assertEqual(ats, [10 * MS, 20 * MS, 30 * MS])

    def test_start_at_and_reset_at_and_query_on_the_virtual_clock(self):
        fired = []
        t = self.rt.start_at(self.rt.now() + 5, lambda: fired.append(self.at()))
        info = t.query()
        self.assertAlmostEqual(info.remaining, 5.0, delta=0.002)  # the deadline is rounded up to the tick
        self.rt.advance(2)
        self.assertAlmostEqual(t.query().remaining, 3.0, delta=0.002)
        self.assertTrue(t.reset_at((self.t0 + 4 * S) / 1e9))
        self.rt.advance(1.9)
        self.assertEqual(fired, [])
        self.rt.advance(0.1)
        self.assertEqual(len(fired), 1)
        self.assertAlmostEqual(fired[0], 4 * S, delta=2 * MS)
        self.assertIsNone(t.query())

    def test_timers_on_the_other_clocks(self):
        fired = []
        for c in (Clock.BOOTTIME, Clock.REALTIME):
            t = self.rt.start(7, lambda c=c: fired.append((c, self.rt.now_ns(c))), clock=c)
            self.assertIs(t.clock, c)
            info = t.query()
            self.assertAlmostEqual(info.deadline, self.rt.now(c) + 7, delta=0.002)
            self.assertAlmostEqual(info.remaining, 7.0, delta=0.002)
        self.assertEqual(self.rt.advance(6.9), 0)
        self.assertEqual(self.rt.advance(0.1), 2)
        self.assertEqual([c for c, _ in fired], [Clock.BOOTTIME, Clock.REALTIME])

    def test_thousands_of_virtual_seconds_in_little_real_time(self):
        n = []
        self.rt.start(1, lambda: n.append(1), 1, policy="burst")  # every virtual second
        start = time.monotonic()
        self.assertEqual(self.rt.advance(3600), 3600)
        self.assertEqual(len(n), 3600)
        self.assertLess(time.monotonic() - start, 5.0)

    def test_queue_bound_timers_are_delivered_to_their_queue(self):
        fired = []
        with self.rt.queue() as q:
            self.rt.start(1, lambda: fired.append(("q", threading.get_ident())), queue=q)
            self.rt.start(1, lambda: fired.append(("inline", threading.get_ident())))
            self.assertEqual(self.rt.advance(1), 1)  # the inline one; the other goes to q
            self.assertEqual(fired, [("inline", threading.get_ident())])
            self.assertEqual(q.stats()["due"], 1)
            self.assertEqual(q.run(), 1)
            self.assertEqual(fired[1], ("q", threading.get_ident()))

    def test_advance_from_another_thread(self):
        fired = []
        self.rt.start(1, lambda: fired.append(threading.get_ident()))
        results = []
        th = threading.Thread(target=lambda: results.append(self.rt.advance(2)))
        th.start()
        th.join(WAIT)
        self.assertEqual(results, [1])
        self.assertEqual(fired, [th.ident])

    def test_concurrent_advances_take_turns(self):
        count = []
        self.rt.start(0.001, lambda: count.append(1), 0.001, policy="burst")
        threads = [threading.Thread(target=self.rt.advance, args=(0.5,)) for _ in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(WAIT)
        self.assertEqual(len(count), 2000)
        self.assertEqual(self.at(), 2 * S)

    def test_advance_from_a_callback_is_edeadlk(self):
        errors = []

        def cb():
            try:
                self.rt.advance(1)
            except TickwheelError as exc:
                errors.append(exc)

        self.rt.start(1, cb)
        self.assertEqual(self.rt.advance(1), 1)
        self.assertEqual(len(errors), 1)
        self.assertEqual(errors[0].code, tickwheel.TW_EDEADLK)
        self.assertIn("callbacks", str(errors[0]))
        self.assertEqual(self.at(), 1 * S)  # nothing done by the inner call
        # Another manual runtime may be advanced from a callback.
        with Runtime(manual_clock=True) as other:
            inner = []
            other.start(1, lambda: inner.append(1))
            self.rt.start(1, lambda: inner.append(other.advance(1)))
            self.rt.advance(1)
            self.assertEqual(inner, [1, 1])

    def test_callback_exceptions(self):
        seen = []
        rt = Runtime(manual_clock=True, on_error=lambda exc, timer: seen.append(type(exc)))
        try:
            rt.start(1, lambda: 1 / 0)
            after = []
            rt.start(2, lambda: after.append(1))
            self.assertEqual(rt.advance(3), 2)
            self.assertEqual((seen, after), ([ZeroDivisionError], [1]))

            def interrupt():
                raise KeyboardInterrupt

            rt.start(1, interrupt)
            rt.start(2, lambda: after.append(2))
            with self.assertRaises(KeyboardInterrupt):  # re-raised once the window is done
                rt.advance(3)
            self.assertEqual(after, [1, 2])
        finally:
            rt.close()

    def test_bad_steps(self):
        with self.assertRaises(ValueError):
            self.rt.advance(-1)
        with self.assertRaises(TypeError):
            self.rt.advance("1")
        with self.assertRaises(TickwheelError) as cm:
            self.rt.advance(tickwheel.MAX_DELAY_S * 2)
        self.assertEqual(cm.exception.code, tickwheel.TW_EINVAL)
        self.assertEqual(self.at(), 0)

    def test_after_shutdown_and_close(self):
        self.rt.start(1, lambda: None)
        self.rt.shutdown()
        with self.assertRaises(TickwheelError) as cm:
            self.rt.advance(1)
        self.assertEqual(cm.exception.code, tickwheel.TW_ESHUTDOWN)
        self.assertGreater(self.rt.now_ns(), 0)  # still readable after shutdown
        self.rt.close()
        with self.assertRaises(TickwheelError) as cm:
            self.rt.advance(1)
        self.assertEqual(cm.exception.code, tickwheel.TW_ESHUTDOWN)
        with self.assertRaises(TickwheelError):
            self.rt.now()

    def test_callables_released(self):
        before = len(tickwheel._live)
        self.rt.start(1, lambda: None)
        self.rt.start(5, lambda: None, 1)
        self.assertEqual(len(tickwheel._live), before + 2)
        self.rt.advance(1)
        self.assertEqual(len(tickwheel._live), before + 1)  # the one-shot, released inside advance()
        self.rt.close()
        self.assertEqual(len(tickwheel._live), before)


class RealClockTest(unittest.TestCase):
    def setUp(self):
        self.rt = Runtime(shards=1, workers=1)

    def tearDown(self):
        self.rt.close()

    def test_module_now(self):
        self.assertAlmostEqual(tickwheel.now(), time.monotonic(), delta=0.5)
        self.assertAlmostEqual(tickwheel.now("realtime"), time.time(), delta=0.5)
        self.assertAlmostEqual(tickwheel.now(Clock.BOOTTIME), time.clock_gettime(time.CLOCK_BOOTTIME), delta=0.5)
        self.assertAlmostEqual(tickwheel.now_ns("monotonic") / 1e9, time.monotonic(), delta=0.5)
        self.assertAlmostEqual(tickwheel.now_ns(tickwheel.CLOCK_REALTIME) / 1e9, time.time(), delta=0.5)
        self.assertAlmostEqual(self.rt.now("realtime"), time.time(), delta=0.5)
        self.assertAlmostEqual(self.rt.now(), time.monotonic(), delta=0.5)
        self.assertIsInstance(tickwheel.now_ns(), int)

    def test_realtime_timer_of_50ms_is_not_early(self):
        done = threading.Event()
        fired = []
        start = tickwheel.now_ns("realtime")
        t = self.rt.start(0.050, lambda: (fired.append(tickwheel.now_ns("realtime")), done.set()),
                          clock="realtime")
        self.assertIs(t.clock, Clock.REALTIME)
        info = t.query()
        self.assertGreaterEqual(info.deadline, (start + 50 * MS) / 1e9 - 1e-6)  # on the wall clock
        self.assertLess(info.deadline, (start + 5 * S) / 1e9)
        self.assertTrue(done.wait(WAIT))
        self.assertGreaterEqual(fired[0] - start, 50 * MS)

    def test_boottime_timer_fires(self):
        done = threading.Event()
        fired = []
        start = tickwheel.now_ns("boottime")
        deadline = start + 30 * MS
        self.rt.start_at(deadline / 1e9, lambda: (fired.append(tickwheel.now_ns("boottime")), done.set()),
                         clock=Clock.BOOTTIME)
        self.assertTrue(done.wait(WAIT))
        self.assertGreaterEqual(fired[0], deadline - 1000)  # float seconds -> ns: within a microsecond
        done.clear()
        self.rt.start(0.020, done.set, clock="boottime")
        self.assertTrue(done.wait(WAIT))

    def test_unknown_clock_is_refused(self):
        before = len(tickwheel._live)
        for bad in ("utc", "MONOTONIC", ""):
            with self.assertRaises(ValueError):
                self.rt.start(1, lambda: None, clock=bad)
            with self.assertRaises(ValueError):
                self.rt.start_at(1, lambda: None, clock=bad)
            with self.assertRaises(ValueError):
                tickwheel.now(bad)
            with self.assertRaises(ValueError):
                tickwheel.now_ns(bad)
            with self.assertRaises(ValueError):
                self.rt.now(bad)
        for bad in (0, 1, time.CLOCK_REALTIME, None, 2.0):  # numbers are refused: time.CLOCK_* differ
            with self.assertRaises(TypeError):
                self.rt.start(1, lambda: None, clock=bad)
            with self.assertRaises(TypeError):
                tickwheel.now(bad)
        self.assertEqual(len(tickwheel._live), before)  # nothing kept
        self.assertEqual(self.rt.stats()["started"], 0)

    def test_unknown_clock_in_the_spec_is_einval_from_the_library(self):
        # Below the binding: the library refuses an unknown clock (the
        # extension's start, with clock code 3), and nothing is kept.
        before = len(tickwheel._live)
        with self.assertRaises(tickwheel.InvalidArgumentError) as cm:
            tickwheel._ext.start_full(self.rt._fast, self.rt, lambda: None, False, 0, 0, 0, -1, None, 0, 3, 0, 0,
                                      tickwheel.Clock.MONOTONIC)
        self.assertEqual(cm.exception.code, tickwheel.TW_EINVAL)
        self.assertEqual(len(tickwheel._live), before)
        self.assertEqual(tickwheel._ext.now_ns(3), 0)

    def test_advance_on_a_real_runtime_is_einval(self):
        with self.assertRaises(TickwheelError) as cm:
            self.rt.advance(1)
        self.assertEqual(cm.exception.code, tickwheel.TW_EINVAL)
        self.assertIn("manual_clock=True", str(cm.exception))
        with self.assertRaises(TickwheelError) as cm:
            self.rt.advance(0)
        self.assertEqual(cm.exception.code, tickwheel.TW_EINVAL)


if __name__ == "__main__":
    unittest.main()
