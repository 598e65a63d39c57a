# SPDX-License-Identifier: MIT OR Apache-2.0
"""The timer model of 1.3 in the Python binding (ctest capi_python): period
policies, leeway, groups (stop_group), query() and reset_at()."""

import select
import threading
import time
import unittest

import tickwheel
from tickwheel import PeriodPolicy, Runtime, TickwheelError, TimerInfo, TimerState

from test_tickwheel import WAIT, assert_raises_each, wait_for
EPS = 1e-6  # float rounding of ns -> s


class Overrunner:
    """A periodic callback whose first run (or every run) takes ``sleep_s``;
    records, per run, its start and end (time.monotonic()) and what query()
    said from inside it."""

    def __init__(self, sleep_s, every_run=True, stop_after=6):
        self.sleep_s = sleep_s
        self.every_run = every_run
        self.stop_after = stop_after
        self.timer = None
        self.runs = []  # (start, end, TimerInfo)
        self.lock = threading.Lock()
        self.ready = threading.Event()  # self.timer is set
        self.done = threading.Event()

    def __call__(self):
        self.ready.wait(WAIT)
        start = time.monotonic()
        info = self.timer.query()
        if self.every_run or not self.runs:
            time.sleep(self.sleep_s)
        with self.lock:
            self.runs.append((start, time.monotonic(), info))
            if len(self.runs) >= self.stop_after:
                self.done.set()


class ModelTest(unittest.TestCase):
    def setUp(self):
        self.rt = Runtime(shards=2, workers=2)

    def tearDown(self):
        self.rt.close()

    def start_overrunner(self, cb, period_s, policy):
        cb.timer = self.rt.start(period_s, cb, period_s=period_s, policy=policy)
        cb.ready.set()
        self.assertTrue(cb.done.wait(WAIT), "the periodic timer did not run %d times" % cb.stop_after)
        self.assertTrue(cb.timer.stop_sync())
        return list(cb.runs)


class TestLayout(unittest.TestCase):
    def test_policy_names(self):
        self.assertEqual(PeriodPolicy("delay"), tickwheel.PERIOD_DELAY)
        self.assertEqual(tickwheel.PERIOD_SKIP, "skip")
        self.assertEqual(tickwheel.PERIOD_BURST, "burst")
        self.assertEqual(TimerState.RUNNING, "running")


class TestPolicies(ModelTest):
    def test_skip_counts_missed_runs(self):
        cb = Overrunner(0.035, every_run=True, stop_after=4)
        runs = self.start_overrunner(cb, 0.01, "skip")
        first = runs[0][2]
        # (first.missed is 0 unless a loaded machine started the run a period late.)
        self.assertEqual((first.state, first.runs), (TimerState.RUNNING, 1))
        # Each run takes 3.5 periods: the grid deadlines passed meanwhile are skipped.
        later = runs[1][2]
        self.assertEqual(later.runs, 2)
        self.assertGreaterEqual(later.missed, first.missed + 2)
        for (start, _, info), (_, prev_end, _) in zip(runs[1:], runs):
            self.assertGreaterEqual(start, prev_end - EPS)  # runs never overlap
        self.assertGreaterEqual(runs[-1][2].missed, later.missed)

    def test_delay_runs_one_period_after_the_end_and_misses_nothing(self):
        cb = Overrunner(0.025, every_run=True, stop_after=4)
        runs = self.start_overrunner(cb, 0.01, PeriodPolicy.DELAY)
        for k, (start, _, info) in enumerate(runs):
            self.assertEqual(info.runs, k + 1)
            self.assertEqual(info.missed, 0)
            self.assertEqual(info.state, TimerState.RUNNING)
        for (start, _, _), (_, prev_end, _) in zip(runs[1:], runs):
            # The next deadline is the end of the run plus the period (the
            # recorded end is a little before the real one): never sooner.
            self.assertGreaterEqual(start, prev_end + 0.01 - EPS)

    def test_burst_catches_up(self):
        # The first run takes 5.5 periods: the grid deadlines it overran (at
        # least 4) run after it, back to back, so run 5 starts right after
        # run 1 ends. (Skip would start it 3 periods later at the earliest,
        # delay 4.) Nothing is missed.
        cb = Overrunner(0.055, every_run=False, stop_after=6)
        runs = self.start_overrunner(cb, 0.01, tickwheel.PERIOD_BURST)
        for k, (_, _, info) in enumerate(runs):
            self.assertEqual((info.state, info.runs, info.missed), (TimerState.RUNNING, k + 1, 0))
        for (start, _, _), (_, prev_end, _) in zip(runs[1:], runs):
            self.assertGreaterEqual(start, prev_end - EPS)  # never overlapping
        self.assertLess(runs[4][0] - runs[0][1], 0.025, "the owed runs did not run back to back")

    def test_policy_is_ignored_for_a_one_shot_and_works_on_a_queue(self):
        ran = threading.Event()
        self.rt.start(0.001, ran.set, policy="burst", group=3)
        self.assertTrue(ran.wait(WAIT))
        with self.rt.queue() as q:
            seen = []
            t = self.rt.start(0.001, lambda: seen.append(t.query()), period_s=0.002, queue=q, policy="delay",
                              group=4)
            end = time.monotonic() + WAIT
            while not seen and time.monotonic() < end:
                q.run(1, 0.1)
            self.assertTrue(seen)
            self.assertEqual((seen[0].state, seen[0].group, seen[0].missed), (TimerState.RUNNING, 4, 0))
            self.assertEqual(self.rt.stop_group(4), 1)


class TestQuery(ModelTest):
    def test_pending_timer(self):
        before = tickwheel.now()
        t = self.rt.start(10, lambda: None, leeway=0.25, group=42, shard=1)
        info = self.rt.query(t)
        self.assertIsInstance(info, TimerInfo)
        self.assertEqual(info, t.query())
        self.assertEqual(info, self.rt.query(t.id))
        self.assertEqual(info.state, TimerState.PENDING)
        self.assertEqual(info.state, "pending")
        self.assertEqual(info.shard, 1)
        self.assertGreaterEqual(info.deadline, before + 10 - EPS)
        self.assertLess(info.deadline, before + 11)
        self.assertTrue(9 < info.remaining <= 10.001 + EPS)  # rounded up to the 1 ms tick
        self.assertEqual((info.period, info.leeway, info.group, info.runs, info.missed), (0.0, 0.25, 42, 0, 0))
        with self.assertRaises(dataclass_frozen_error()):
            info.runs = 5  # a frozen snapshot
        self.assertTrue(t.stop())
        self.assertIsNone(t.query())
        self.assertIsNone(self.rt.query(t.id))

    def test_periodic_reports_its_period(self):
        t = self.rt.start(10, lambda: None, period_s=2)
        info = t.query()
        self.assertEqual((info.period, info.group, info.leeway), (2.0, 0, 0.0))
        t.stop()

    def test_running_from_its_own_callback_then_released(self):
        seen = []
        done = threading.Event()
        ready = threading.Event()
        box = []

        def cb():
            ready.wait(WAIT)  # box holds the Timer
            seen.append(box[0].query())
            done.set()

        box.append(self.rt.start(0.005, cb))
        ready.set()
        t = box[0]
        self.assertTrue(done.wait(WAIT))
        info = seen[0]
        self.assertEqual((info.state, info.runs, info.missed), (TimerState.RUNNING, 1, 0))
        self.assertIsNone(info.deadline)  # a running one-shot has no next deadline
        self.assertIsNone(info.remaining)
        # Released after its (only) run: None.
        self.assertTrue(wait_for(lambda: t.query() is None))

    def test_due_on_a_queue(self):
        with self.rt.queue() as q:
            t = self.rt.start(0, lambda: None, queue=q)
            self.assertTrue(select.select([q], [], [], WAIT)[0])
            info = t.query()
            self.assertEqual(info.state, TimerState.DUE)
            self.assertEqual(info.remaining, 0.0)
            self.assertEqual(q.run(), 1)
            self.assertIsNone(t.query())

    def test_unknown_ids_and_bad_arguments(self):
        self.assertIsNone(self.rt.query(0))
        self.assertIsNone(self.rt.query(0x123456789))
        self.assertIsNone(self.rt.query(2**64 - 1))
        assert_raises_each(self, self.rt.query, [(-1, ValueError), (2**64, ValueError), ("1", TypeError),
                                                 (True, TypeError)])
        with Runtime(shards=1, workers=1) as other:
            t = other.start(10, lambda: None)
            with self.assertRaises(ValueError):
                self.rt.query(t)
            with self.assertRaises(ValueError):
                self.rt.reset_at(t, tickwheel.now() + 1)

    def test_after_close(self):
        rt = Runtime(shards=1, workers=1)
        t = rt.start(10, lambda: None)
        rt.close()
        with self.assertRaises(TickwheelError) as cm:
            t.query()
        self.assertEqual(cm.exception.code, tickwheel.TW_ESHUTDOWN)


def dataclass_frozen_error():
    import dataclasses
    return dataclasses.FrozenInstanceError


class TestResetAt(ModelTest):
    def test_fires_not_before_the_new_deadline(self):
        fired = []
        ev = threading.Event()
        t = self.rt.start(10, lambda: (fired.append(time.monotonic()), ev.set()))
        deadline = tickwheel.now() + 0.04
        self.assertTrue(self.rt.reset_at(t, deadline))
        info = t.query()
        self.assertGreaterEqual(info.deadline, deadline - EPS)  # rounded up to the tick
        self.assertLess(info.deadline, deadline + 0.01)
        self.assertTrue(ev.wait(WAIT))
        self.assertGreaterEqual(fired[0], deadline - EPS)
        # Fired and released: nothing to re-arm.
        self.assertTrue(wait_for(lambda: t.query() is None))
        self.assertFalse(t.reset_at(tickwheel.now() + 1))
        self.assertFalse(self.rt.reset_at(t.id, tickwheel.now() + 1))

    def test_timer_method_and_past_deadline(self):
        ev = threading.Event()
        t = self.rt.start(10, ev.set)
        self.assertTrue(t.reset_at(tickwheel.now() - 1))  # a past one fires at once
        self.assertTrue(ev.wait(WAIT))

    def test_periodic_continues_every_period(self):
        times = []
        t = self.rt.start(10, lambda: times.append(time.monotonic()), period_s=0.01)
        deadline = tickwheel.now() + 0.02
        self.assertTrue(t.reset_at(deadline))
        self.assertTrue(wait_for(lambda: len(times) >= 3))
        t.stop_sync()
        self.assertGreaterEqual(times[0], deadline - EPS)
        self.assertGreaterEqual(times[2], deadline + 0.02 - EPS)

    def test_bad_deadlines(self):
        t = self.rt.start(10, lambda: None)
        with self.assertRaises(ValueError):
            t.reset_at(-1)
        with self.assertRaises(TypeError):
            t.reset_at("soon")
        with self.assertRaises(TickwheelError) as cm:
            t.reset_at(2**63 / 1e9 * 2)  # beyond INT64_MAX ns
        self.assertEqual(cm.exception.code, tickwheel.TW_EINVAL)
        with self.assertRaises(TickwheelError) as cm:
            t.reset_at(tickwheel.now() + tickwheel.MAX_DELAY_S * 2)  # too far ahead
        self.assertEqual(cm.exception.code, tickwheel.TW_EINVAL)
        self.assertEqual(t.query().state, TimerState.PENDING)  # untouched
        self.assertTrue(t.stop())


class TestStopGroup(ModelTest):
    def test_stops_the_group_only(self):
        fired = []
        lock = threading.Lock()

        def rec(tag):
            def cb():
                with lock:
                    fired.append(tag)
            return cb

        start = time.monotonic()
        members = [self.rt.start(0.3, rec("g7"), group=7) for _ in range(3)]
        periodic = self.rt.start(0.3, rec("g7p"), period_s=0.01, group=7)
        other = self.rt.start(0.05, rec("g8"), group=8)
        loose = self.rt.start(0.05, rec("none"))
        self.assertEqual(self.rt.stop_group(7), 4)
        for t in members + [periodic]:
            self.assertIsNone(t.query())
        self.assertIsNotNone(other.query())
        self.assertTrue(wait_for(lambda: len(fired) >= 2))
        time.sleep(max(0.0, start + 0.4 - time.monotonic()))  # past the group's deadline
        with lock:
            self.assertEqual(sorted(fired), ["g8", "none"])
        self.assertIsNone(loose.query())
        self.assertEqual(self.rt.stop_group(7), 0)
        self.assertEqual(self.rt.stop_group(12345), 0)
        self.assertEqual(self.rt.stop_group(2**64 - 1), 0)

    def test_sync_waits_for_a_running_callback(self):
        inside = threading.Event()
        state = {"running": False, "runs": 0}

        def slow():
            state["running"] = True
            state["runs"] += 1
            inside.set()
            time.sleep(0.05)
            state["running"] = False

        self.rt.start(0.001, slow, period_s=0.001, group=9)
        self.assertTrue(inside.wait(WAIT))
        self.assertEqual(self.rt.stop_group(9, sync=True), 1)  # a running periodic one counts
        self.assertFalse(state["running"])
        n = state["runs"]
        time.sleep(0.03)
        self.assertEqual(state["runs"], n)

    def test_from_inside_a_callback_of_the_group(self):
        result = []
        done = threading.Event()
        victims = [self.rt.start(10, lambda: None, group=11) for _ in range(2)]

        def cb():
            result.append(self.rt.stop_group(11, sync=True))  # does not wait for itself
            done.set()

        self.rt.start(0.001, cb, group=11)
        self.assertTrue(done.wait(WAIT))
        self.assertEqual(result, [2])  # the running one-shot is on its last run: not counted
        for t in victims:
            self.assertIsNone(t.query())

    def test_after_shutdown_and_close(self):
        rt = Runtime(shards=1, workers=1)
        rt.start(10, lambda: None, group=5)
        rt.shutdown()
        self.assertEqual(rt.stop_group(5), 0)
        rt.close()
        with self.assertRaises(TickwheelError) as cm:
            rt.stop_group(5)
        self.assertEqual(cm.exception.code, tickwheel.TW_ESHUTDOWN)


class TestBadInput(ModelTest):
    def test_unknown_policy(self):
        live = len(tickwheel._live)
        with self.assertRaises(ValueError):
            self.rt.start(0.01, lambda: None, period_s=0.01, policy="sometimes")
        with self.assertRaises(ValueError):
            self.rt.start(0.01, lambda: None, policy="SKIP")
        with self.assertRaises(TypeError):
            self.rt.start(0.01, lambda: None, policy=1)
        with self.assertRaises(TypeError):
            self.rt.start_at(tickwheel.now(), lambda: None, policy=None)
        self.assertEqual(len(tickwheel._live), live)  # no callable kept

    def test_group_zero_and_out_of_range(self):
        assert_raises_each(self, self.rt.stop_group, [(0, ValueError), (-3, ValueError), (2**64, ValueError),
                                                      ("7", TypeError), (1.0, TypeError)])
        with self.assertRaises(ValueError):
            self.rt.start(1, lambda: None, group=-1)
        with self.assertRaises(TypeError):
            self.rt.start(1, lambda: None, group=True)
        # The library's own check, below the binding's: group 0 is EINVAL.
        with self.assertRaises(tickwheel._NativeError) as cm:
            self.rt._h.stop_group(0, False)
        self.assertEqual(cm.exception.args[0], tickwheel.TW_EINVAL)

    def test_bad_leeway(self):
        live = len(tickwheel._live)
        with self.assertRaises(ValueError):
            self.rt.start(1, lambda: None, leeway=-0.5)
        with self.assertRaises(TypeError):
            self.rt.start(1, lambda: None, leeway="1")
        with self.assertRaises(TickwheelError) as cm:
            self.rt.start(1, lambda: None, leeway=tickwheel.MAX_DELAY_S * 2)
        self.assertEqual(cm.exception.code, tickwheel.TW_EINVAL)
        self.assertEqual(len(tickwheel._live), live)

    def test_leeway_is_never_early(self):
        fired = []
        ev = threading.Event()
        before = time.monotonic()
        t = self.rt.start(0.02, lambda: (fired.append(time.monotonic()), ev.set()), leeway=0.01)
        self.assertEqual(t.query().leeway, 0.01)
        self.assertTrue(ev.wait(WAIT))
        self.assertGreaterEqual(fired[0], before + 0.02 - EPS)


if __name__ == "__main__":
    unittest.main()
