# SPDX-License-Identifier: MIT OR Apache-2.0
"""Delivery queues in the Python binding: Runtime.queue(), Queue, start(queue=) (ctest capi_python)."""

import gc
import os
import select
import threading
import time
import unittest
import weakref

import tickwheel
from tickwheel import Queue, Runtime, TickwheelError
from test_tickwheel import assert_raises_each

WAIT = 10.0  # seconds: generous limits for loaded CI machines


def readable(q, timeout=WAIT):
    return bool(select.select([q.fd()], [], [], timeout)[0])


def run_until(q, pred, timeout=WAIT):
    """Runs q on this thread until pred() (or the timeout); True if pred()."""
    end = time.monotonic() + timeout
    while not pred():
        left = end - time.monotonic()
        if left <= 0:
            return False
        q.run(64, min(left, 0.1))
    return True


class Callable:
    """A callable that weak references can watch and that counts its runs."""

    def __init__(self):
        self.runs = 0
        self.threads = set()

    def __call__(self):
        self.runs += 1
        self.threads.add(threading.get_ident())


class QueueTest(unittest.TestCase):
    def setUp(self):
        self.rt = Runtime(shards=2, workers=2)
        self.q = self.rt.queue()

    def tearDown(self):
        self.q.close()
        self.rt.close()


class TestQueueBasics(QueueTest):
    def test_queue_object(self):
        q = self.q
        self.assertIsInstance(q, Queue)
        self.assertIs(q.runtime, self.rt)
        self.assertGreaterEqual(q.fd(), 0)
        self.assertEqual(q.fileno(), q.fd())
        self.assertFalse(q.closed)
        self.assertIn("open", repr(q))
        st = q.stats()
        for key in ("due", "delivered", "ran", "runners", "signal_p50_ns", "run_p99_ns", "run_samples"):
            self.assertEqual(st[key], 0, key)
        # tickwheel.Queue(rt) is the same as rt.queue()
        with Queue(self.rt) as q2:
            self.assertNotEqual(q2.fd(), q.fd())
        self.assertTrue(q2.closed)

    def test_callbacks_run_on_the_thread_calling_run(self):
        # Another Python thread runs the queue: every callback runs there,
        # none on a worker and none on this (the starting) thread.
        fns = [Callable() for _ in range(20)]
        for i, fn in enumerate(fns):
            self.rt.start(0.001 * i, fn, queue=self.q)
        runner = {}

        def run():
            runner["id"] = threading.get_ident()
            runner["ok"] = run_until(self.q, lambda: all(f.runs for f in fns))

        th = threading.Thread(target=run)
        th.start()
        th.join(WAIT * 2)
        self.assertTrue(runner.get("ok"))
        self.assertNotEqual(runner["id"], threading.get_ident())
        for fn in fns:
            self.assertEqual(fn.runs, 1)
            self.assertEqual(fn.threads, {runner["id"]})
        self.assertEqual(self.q.stats()["ran"], 20)

    def test_never_early(self):
        # Against the caller's clock (time.monotonic_ns = CLOCK_MONOTONIC), read before the start.
        late = []
        for i in range(40):
            delay_ns = (i % 8) * 3_000_000
            before = time.monotonic_ns()

            def fn(due=before + delay_ns):
                late.append(time.monotonic_ns() - due)

            self.rt.start(delay_ns / 1e9, fn, queue=self.q)
        self.assertTrue(run_until(self.q, lambda: len(late) == 40))
        self.assertGreaterEqual(min(late), 0, "a callback ran before its deadline")

    def test_deadline_order_and_max(self):
        # All due before the first run: max bounds each batch, deadline order across batches.
        order = []
        now = tickwheel.now()
        deadlines = [now + 0.001 * k for k in (5, 1, 4, 2, 3)]
        for d in deadlines:
            self.rt.start_at(d, lambda d=d: order.append(d), queue=self.q)
        time.sleep(0.02)
        self.assertTrue(readable(self.q))
        self.assertTrue(wait_due(self.q, 5))
        self.assertEqual(self.q.run(max=2), 2)
        self.assertEqual(self.q.run(max=64), 3)
        self.assertEqual(order, sorted(deadlines))
        self.assertFalse(readable(self.q, 0))

    def test_fd_is_level_triggered(self):
        self.assertFalse(readable(self.q, 0), "readable while empty")
        fn = Callable()
        t0 = time.monotonic()
        self.rt.start(0.1, fn, queue=self.q)
        early = readable(self.q, 0)
        if time.monotonic() - t0 < 0.1:  # (a loaded machine may have taken longer to get here)
            self.assertFalse(early, "readable before the deadline")
        self.assertTrue(readable(self.q))
        self.assertTrue(readable(self.q, 0), "level-triggered: still readable until run")
        self.assertEqual(fn.runs, 0, "ran without run()")
        self.assertEqual(self.q.run(), 1)
        self.assertEqual(fn.runs, 1)
        self.assertFalse(readable(self.q, 0), "readable after everything due ran")

    def test_run_timeout(self):
        t0 = time.monotonic()
        self.assertEqual(self.q.run(timeout=0.05), 0)
        self.assertGreaterEqual(time.monotonic() - t0, 0.05)
        t0 = time.monotonic()
        self.assertEqual(self.q.run(), 0)  # the default: don't wait
        self.assertLess(time.monotonic() - t0, 1.0)
        fn = Callable()
        self.rt.start(0.03, fn, queue=self.q)
        self.assertEqual(self.q.run(timeout=None), 1)  # waits until due
        self.assertEqual(fn.runs, 1)
        self.rt.start(0.03, fn, queue=self.q)
        self.assertEqual(self.q.run(timeout=WAIT), 1)  # returns once due, not after the timeout
        self.assertEqual(fn.runs, 2)

    def test_periodic(self):
        fn = Callable()
        t = self.rt.start(0.002, fn, period_s=0.002, queue=self.q)
        self.assertTrue(run_until(self.q, lambda: fn.runs >= 5))
        self.assertTrue(t.stop())
        runs = fn.runs
        self.q.run(64, 0.02)
        self.assertEqual(fn.runs, runs)
        self.assertEqual(fn.threads, {threading.get_ident()})


def wait_due(q, n, timeout=WAIT):
    end = time.monotonic() + timeout
    while q.stats()["due"] < n:
        if time.monotonic() > end:
            return False
        time.sleep(0.001)
    return True


class TestExactness(QueueTest):
    def test_stop_of_a_due_timer(self):
        fn = Callable()
        ref = weakref.ref(fn)
        t = self.rt.start(0.01, fn, queue=self.q)
        del fn
        self.assertTrue(readable(self.q), "never became due")
        self.assertTrue(t.stop(), "stop of a due, not-yet-run timer must prevent the run")
        self.assertFalse(readable(self.q, 0), "the stop took back the only due timer")
        self.assertEqual(self.q.run(), 0)
        gc.collect()
        self.assertIsNone(ref(), "the callable was not released by the stop")
        self.assertEqual(self.q.stats()["ran"], 0)
        self.assertFalse(t.stop())

    def test_stop_sync_of_a_due_timer(self):
        fn = Callable()
        t = self.rt.start(0.0, fn, queue=self.q)
        self.assertTrue(readable(self.q))
        self.assertTrue(t.stop_sync())
        self.assertEqual(self.q.run(timeout=0.02), 0)
        self.assertEqual(fn.runs, 0)

    def test_reset_of_a_due_timer(self):
        runs = []
        t = self.rt.start(0.005, lambda: runs.append(time.monotonic_ns()), queue=self.q)
        self.assertTrue(readable(self.q))
        t0 = time.monotonic_ns()
        self.assertTrue(t.reset(0.2), "reset of a due timer re-arms it")
        still_due = readable(self.q, 0)
        ran = self.q.run()
        if time.monotonic_ns() - t0 < 200_000_000:  # (unless a loaded machine took that long)
            self.assertFalse(still_due, "the reset did not take the due timer back")
            self.assertEqual(ran, 0)
        self.assertTrue(run_until(self.q, lambda: runs))
        self.assertEqual(len(runs), 1)
        self.assertGreaterEqual(runs[0] - t0, 200_000_000, "ran before the reset's deadline")

    def test_stop_from_its_own_callback(self):
        box = {}

        def fn():
            box["stop"] = box["t"].stop()
            box["sync"] = box["t"].stop_sync()  # from its own callback: does not wait

        box["t"] = self.rt.start(0.0, fn, period_s=0.001, queue=self.q)
        self.assertEqual(self.q.run(timeout=WAIT), 1)
        self.assertTrue(box["stop"])
        self.assertFalse(box["sync"])
        self.assertEqual(self.q.run(timeout=0.02), 0)


class TestLifecycle(QueueTest):
    def test_close_cancels_and_releases(self):
        fns = [Callable() for _ in range(10)]
        refs = [weakref.ref(f) for f in fns]
        for i, f in enumerate(fns):
            self.rt.start(0.0 if i < 5 else 60.0, f, queue=self.q)
        self.assertTrue(wait_due(self.q, 5))
        stopped = self.rt.stats()["stopped"]
        runs = [f.runs for f in fns]
        del fns, f
        self.q.close()
        gc.collect()
        self.assertEqual(runs, [0] * 10)
        self.assertEqual([r() for r in refs], [None] * 10, "close() did not release the callables")
        self.assertEqual(self.rt.stats()["stopped"], stopped + 10)
        self.assertEqual(self.rt.stats()["live"], 0)
        self.assertTrue(self.q.closed)
        self.q.close()  # idempotent
        for call in (self.q.run, self.q.fd, self.q.stats):
            with self.assertRaises(TickwheelError) as cm:
                call()
            self.assertEqual(cm.exception.code, tickwheel.TW_ESHUTDOWN)
        with self.assertRaises(TickwheelError) as cm:
            self.rt.start(1, Callable(), queue=self.q)
        self.assertEqual(cm.exception.code, tickwheel.TW_ESHUTDOWN)

    def test_dropping_the_queue_releases(self):
        fn = Callable()
        ref = weakref.ref(fn)
        q = self.rt.queue()
        self.rt.start(60, fn, queue=q)
        del fn, q
        gc.collect()
        self.assertIsNone(ref(), "a dropped Queue did not release its timers' callables")
        self.assertEqual(self.rt.stats()["live"], 0)

    def test_queue_dropped_inside_a_worker_callback(self):
        # The finalizer runs on a worker thread: the queue is closed from
        # another thread, never inside the hook.
        fn = Callable()
        ref = weakref.ref(fn)
        box = {"q": self.rt.queue()}
        self.rt.start(60, fn, queue=box["q"])
        del fn
        done = threading.Event()

        def drop():
            box.clear()
            done.set()

        self.rt.start(0, drop)
        self.assertTrue(done.wait(WAIT))
        end = time.monotonic() + WAIT
        while ref() is not None and time.monotonic() < end:
            time.sleep(0.005)
            gc.collect()
        self.assertIsNone(ref())

    def run_blocked(self):
        """Starts a thread blocked in self.q.run(timeout=None); returns it and
        a dict whose "code" is the TickwheelError code that ended the run."""
        out = {}

        def run():
            try:
                self.q.run(timeout=None)
            except TickwheelError as e:
                out["code"] = e.code

        th = threading.Thread(target=run)
        th.start()
        return th, out

    def test_close_wakes_a_blocked_run(self):
        th, out = self.run_blocked()
        time.sleep(0.05)
        self.q.close()
        th.join(WAIT)
        self.assertFalse(th.is_alive())
        self.assertEqual(out.get("code"), tickwheel.TW_ESHUTDOWN)

    def test_shutdown(self):
        fn = Callable()
        ref = weakref.ref(fn)
        self.rt.start(60, fn, queue=self.q)
        del fn
        th, out = self.run_blocked()
        time.sleep(0.05)
        self.rt.shutdown()  # wakes the blocked run, cancels the pending timer
        th.join(WAIT)
        self.assertFalse(th.is_alive())
        self.assertEqual(out.get("code"), tickwheel.TW_ESHUTDOWN)
        gc.collect()
        self.assertIsNone(ref())
        self.assertTrue(readable(self.q, 0), "the fd stays readable after shutdown")
        with self.assertRaises(TickwheelError) as cm:
            self.q.run()
        self.assertEqual(cm.exception.code, tickwheel.TW_ESHUTDOWN)
        self.assertIn("ran", self.q.stats())  # final values
        self.q.close()

    def test_runtime_close_ends_its_queues(self):
        q2 = self.rt.queue()
        self.rt.close()
        self.assertTrue(self.q.closed)
        with self.assertRaises(TickwheelError) as cm:
            self.q.run()
        self.assertEqual(cm.exception.code, tickwheel.TW_ESHUTDOWN)
        q2.close()  # freed by the runtime: nothing to do
        del q2
        gc.collect()

    def test_queue_keeps_its_runtime_alive(self):
        rt = Runtime(shards=1, workers=1)
        q = rt.queue()
        ref = weakref.ref(rt)
        del rt
        gc.collect()
        self.assertIsNotNone(ref())
        fn = Callable()
        q.runtime.start(0, fn, queue=q)
        self.assertEqual(q.run(timeout=WAIT), 1)
        q.runtime.close()

    def test_fork_child(self):
        fn = Callable()
        self.rt.start(60, fn, queue=self.q)
        pid = os.fork()
        if pid == 0:  # the child: no call on the parent's queue works, none crashes
            code = 0
            try:
                try:
                    self.q.run()
                    code = 2
                except tickwheel.ForkedError:
                    pass
                try:
                    self.rt.start(1, fn, queue=self.q)
                    code = 3
                except tickwheel.ForkedError:
                    pass
                self.q.close()
                self.rt.close()
            except BaseException:  # noqa: BLE001
                code = 4
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        self.assertTrue(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status)  # (3.8: no waitstatus_to_exitcode)
        self.assertEqual(fn.runs, 0)
        self.assertFalse(self.q.closed)


class TestBadInput(QueueTest):
    def test_queue_of_another_runtime(self):
        with Runtime(shards=1, workers=1) as other:
            with self.assertRaises(ValueError):
                other.start(1, Callable(), queue=self.q)
            with self.assertRaises(ValueError):
                other.start_at(tickwheel.now() + 1, Callable(), queue=self.q)
            self.assertEqual(other.stats()["live"], 0)
        with self.assertRaises(TypeError):
            self.rt.start(1, Callable(), queue=object())
        with self.assertRaises(TypeError):
            Queue(object())

    def test_run_arguments(self):
        assert_raises_each(self, self.q.run, [(0, ValueError), (-1, ValueError), ("1", TypeError), (True, TypeError)])
        with self.assertRaises(ValueError):
            self.q.run(1, -0.5)
        self.assertEqual(self.q.run(10**30), 0)  # huge max: clamped

    def test_bad_times(self):
        fn = Callable()
        for bad in ("1", [1], b"1"):  # never multiplied: "1" * 10**9 would take seconds and a GB
            t0 = time.monotonic()
            with self.assertRaises(TypeError):
                self.rt.start(bad, fn, queue=self.q)
            with self.assertRaises(TypeError):
                self.q.run(1, bad)
            self.assertLess(time.monotonic() - t0, 2.0)
        for bad in (float("nan"), float("inf"), -1):
            with self.assertRaises(ValueError):
                self.rt.start(bad, fn, queue=self.q)
        self.assertEqual(self.rt.stats()["live"], 0)

    def test_run_and_close_from_its_own_callback(self):
        out = {}

        def fn():
            for name, call in (("run", self.q.run), ("close", self.q.close)):
                try:
                    call()
                except TickwheelError as e:
                    out[name] = e.code

        self.rt.start(0, fn, queue=self.q)
        self.assertEqual(self.q.run(timeout=WAIT), 1)
        self.assertEqual(out, {"run": tickwheel.TW_EDEADLK, "close": tickwheel.TW_EDEADLK})
        self.assertFalse(self.q.closed)

    def test_a_callback_may_run_another_queue(self):
        with self.rt.queue() as inner:
            seen = []
            self.rt.start(0, lambda: seen.append("inner"), queue=inner)
            self.assertTrue(readable(inner))
            self.rt.start(0, lambda: seen.append(inner.run()), queue=self.q)
            self.assertEqual(self.q.run(timeout=WAIT), 1)
            self.assertEqual(seen, ["inner", 1])


class TestExceptions(QueueTest):
    def test_exception_goes_to_on_error(self):
        errors = []
        with Runtime(shards=1, workers=1, on_error=lambda e, t: errors.append((e, threading.get_ident()))) as rt:
            q = rt.queue()

            def boom():
                raise RuntimeError("boom")

            rt.start(0, boom, queue=q)
            self.assertEqual(q.run(timeout=WAIT), 1)
            self.assertEqual(len(errors), 1)
            self.assertIsInstance(errors[0][0], RuntimeError)
            self.assertEqual(errors[0][1], threading.get_ident())

    def test_keyboard_interrupt_propagates_after_the_batch(self):
        later = Callable()

        def interrupt():
            raise KeyboardInterrupt

        now = tickwheel.now()
        self.rt.start_at(now, interrupt, queue=self.q)
        self.rt.start_at(now + 0.001, later, queue=self.q)
        self.assertTrue(wait_due(self.q, 2))
        with self.assertRaises(KeyboardInterrupt):
            self.q.run()
        self.assertEqual(later.runs, 1, "the rest of the batch ran")
        self.assertEqual(self.q.run(), 0)  # nothing left over


if __name__ == "__main__":
    unittest.main()
