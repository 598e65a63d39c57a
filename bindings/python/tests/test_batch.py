# SPDX-License-Identifier: MIT OR Apache-2.0
"""The batch calls of library 1.4: Runtime.start_many / stop_many / reset_many
(tw_timer_start_n / tw_timer_stop_n / tw_timer_reset_n), one FFI call per list."""

import threading
import time
import unittest

import tickwheel
from tickwheel import Runtime, TickwheelError
from test_tickwheel import WAIT, wait_for


class Counter:
    def __init__(self):
        self.lock = threading.Lock()
        self.times = []

    def __call__(self):
        with self.lock:
            self.times.append(time.monotonic())

    @property
    def count(self):
        with self.lock:
            return len(self.times)


class RuntimeCase(unittest.TestCase):
    """A test with a fresh 2-shard, 2-worker runtime (self.rt)."""

    def setUp(self):
        self.rt = Runtime(shards=2, workers=2)

    def tearDown(self):
        self.rt.close()


class TestStartMany(RuntimeCase):
    def test_starts_one_timer_per_delay_never_early(self):
        c = Counter()
        delays = [0.001 * (i % 10) for i in range(50)]
        before = time.monotonic()
        timers = self.rt.start_many(delays, c)
        self.assertEqual(len(timers), 50)
        self.assertTrue(all(isinstance(t, tickwheel.Timer) for t in timers))
        self.assertEqual(len({t.id for t in timers}), 50)
        self.assertTrue(wait_for(lambda: c.count == 50))
        # Each ran once, none before its delay from a reading taken before the call.
        self.assertGreaterEqual(min(c.times), before)
        self.assertEqual(self.rt.stats()["started"], 50)

    def test_one_callable_per_delay(self):
        got = []
        fns = [lambda i=i: got.append(i) for i in range(8)]
        timers = self.rt.start_many([0.0] * 8, fns)
        self.assertTrue(all(timers))
        self.assertTrue(wait_for(lambda: len(got) == 8))
        self.assertEqual(sorted(got), list(range(8)))

    def test_bad_arguments_raise_before_anything_starts(self):
        base = len(tickwheel._live)
        with self.assertRaises(ValueError):
            self.rt.start_many([0.1, 0.2], [Counter()])  # 1 callable for 2 delays
        with self.assertRaises(TypeError):
            self.rt.start_many([0.1], [42])
        with self.assertRaises(ValueError):
            self.rt.start_many([0.1, -1], Counter())
        with self.assertRaises(TypeError):
            self.rt.start_many(["1"], Counter())
        with self.assertRaises(TickwheelError):
            self.rt.start_many([0.1], Counter(), shard=-2)
        with self.assertRaises(ValueError):
            self.rt.start_many([0.1], Counter(), policy="sometimes")
        self.assertEqual(self.rt.start_many([], Counter()), [])
        self.assertEqual(self.rt.stats()["started"], 0)
        self.assertEqual(len(tickwheel._live), base, "a refused batch kept a callable")

    def test_elements_that_cannot_start_are_none_and_released(self):
        rt = Runtime(shards=1, workers=1, max_timers=3)
        base = len(tickwheel._live)
        try:
            c = Counter()
            far = tickwheel.MAX_DELAY_S * 2  # beyond the limit: that element is refused
            timers = rt.start_many([60, far, 60, 60, 60], c)
            self.assertIsNone(timers[1])
            self.assertEqual([t is not None for t in timers], [True, False, True, True, False])
            self.assertEqual(rt.stats()["live"], 3)
            self.assertEqual(len(tickwheel._live), base + 3, "a failed element's callable was kept")
            self.assertEqual(rt.stop_many([t for t in timers if t]), [True, True, True])
            self.assertEqual(len(tickwheel._live), base)
        finally:
            rt.close()

    def test_after_shutdown_every_element_is_none(self):
        self.rt.shutdown()
        base = len(tickwheel._live)
        self.assertEqual(self.rt.start_many([0.1, 0.2], Counter()), [None, None])
        self.assertEqual(len(tickwheel._live), base)

    def test_options_apply_to_every_timer(self):
        c = Counter()
        timers = self.rt.start_many([0.001, 0.001], c, 0.002, group=7, policy="delay", leeway=0.0005)
        for t in timers:
            info = t.query()
            self.assertEqual(info.group, 7)
            self.assertGreater(info.period, 0)
        self.assertTrue(wait_for(lambda: c.count >= 4))
        self.assertEqual(self.rt.stop_group(7), 2)

    def test_on_a_queue(self):
        q = self.rt.queue()
        c = Counter()
        timers = self.rt.start_many([0.0, 0.0, 0.0], c, queue=q)
        self.assertTrue(all(timers))
        ran = 0
        end = time.monotonic() + WAIT
        while ran < 3 and time.monotonic() < end:
            ran += q.run(10, timeout=0.01)
        self.assertEqual(ran, 3)
        self.assertEqual(c.count, 3)
        q.close()


class TestStopAndResetMany(RuntimeCase):
    def test_each_element_answers_as_the_single_call(self):
        c = Counter()
        timers = self.rt.start_many([60] * 6, c)
        fired = self.rt.start(0, c)
        self.assertTrue(wait_for(lambda: c.count == 1))
        batch = timers[:3] + [fired, 0, 0xDEADBEEF, timers[0], timers[3].id] + timers[4:]
        self.assertEqual(self.rt.stop_many(batch), [True, True, True, False, False, False, False, True, True, True])
        self.assertEqual(self.rt.stop_many(timers), [False] * 6)
        self.assertEqual(self.rt.stats()["stopped"], 6)
        self.assertEqual(c.count, 1)

    def test_reset_many_moves_deadlines_never_early(self):
        c = Counter()
        timers = self.rt.start_many([60] * 4, c)
        before = time.monotonic()
        self.assertEqual(self.rt.reset_many(timers + [0], 0.02), [True] * 4 + [False])
        self.assertTrue(wait_for(lambda: c.count == 4))
        self.assertGreaterEqual(min(c.times), before + 0.02)
        self.assertEqual(self.rt.reset_many(timers, 1), [False] * 4)

    def test_reset_many_beyond_the_maximum_re_arms_nothing(self):
        timers = self.rt.start_many([60], Counter())
        with self.assertRaises(TickwheelError) as cm:
            self.rt.reset_many(timers, tickwheel.MAX_DELAY_S * 2)
        self.assertEqual(cm.exception.code, tickwheel.TW_EINVAL)
        self.assertEqual(self.rt.stats()["reset"], 0)

    def test_ids_of_another_runtime_or_bad_ids_raise(self):
        with Runtime(shards=1) as other:
            t = other.start(60, Counter())
            with self.assertRaises(ValueError):
                self.rt.stop_many([t])
            with self.assertRaises(TypeError):
                self.rt.stop_many(["x"])
            with self.assertRaises(ValueError):
                self.rt.reset_many([-1], 1)

    def test_after_shutdown_and_close(self):
        timers = self.rt.start_many([60, 60], Counter())
        self.rt.shutdown()
        with self.assertRaises(TickwheelError) as cm:
            self.rt.stop_many(timers)
        self.assertEqual(cm.exception.code, tickwheel.TW_ESHUTDOWN)
        with self.assertRaises(TickwheelError):
            self.rt.reset_many(timers, 1)
        self.rt.close()
        with self.assertRaises(TickwheelError):
            self.rt.stop_many([])
        with self.assertRaises(TickwheelError):
            self.rt.start_many([], Counter())

    def test_empty_lists(self):
        self.assertEqual(self.rt.stop_many([]), [])
        self.assertEqual(self.rt.reset_many([], 1), [])


if __name__ == "__main__":
    unittest.main()
