# SPDX-License-Identifier: MIT OR Apache-2.0
"""tickwheel.asyncio: tickwheel timers delivered on an asyncio loop (ctest capi_python)."""

import asyncio
import contextvars
import gc
import os
import random
import select
import subprocess
import sys
import threading
import time
import unittest
import weakref

import tickwheel
import tickwheel.asyncio as twa
from tickwheel import Runtime, TickwheelError

WAIT = 10.0  # seconds: generous limits for loaded CI machines


class Callable:
    def __init__(self):
        self.runs = 0

    def __call__(self, *args):
        self.runs += 1


def delivery(rt, loop=None):
    loop = loop or asyncio.get_running_loop()
    return twa._registry.get(loop, {}).get(rt._native)


def fd_closed(fd):
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


class AsyncioTest(unittest.TestCase):
    def setUp(self):
        self.rt = Runtime(shards=2, workers=2)
        self.worker_calls = []  # any user function found running off the loop thread

    def tearDown(self):
        self.rt.close()

    def run_loop(self, coro):
        return asyncio.run(asyncio.wait_for(coro, WAIT * 3))


class TestCallLater(AsyncioTest):
    def test_200_random_timers(self):
        rng = random.Random(11)

        async def main():
            loop_thread = threading.get_ident()
            ran = []
            done = asyncio.get_running_loop().create_future()
            handles = []

            def fn(i):
                ran.append((i, time.monotonic_ns(), threading.get_ident()))
                if len(ran) == 200:
                    done.set_result(None)

            for i in range(200):
                handles.append(twa.call_later(self.rt, rng.uniform(0, 0.3), fn, i))
            await done
            return loop_thread, ran, handles

        loop_thread, ran, handles = self.run_loop(main())
        self.assertEqual(sorted(i for i, _, _ in ran), list(range(200)))
        self.assertEqual({th for _, _, th in ran}, {loop_thread}, "a callback ran off the loop thread")
        for i, at, _ in ran:
            self.assertGreaterEqual(at, round(handles[i].when() * 1e9) - 16, "ran before when()")
        # Deadline order, give or take the tick (deadlines are rounded up to
        # 1 ms) and the shards' lag on a loaded machine (each shard delivers
        # its own timers): no callback runs after one due 50 ms after it.
        whens = [handles[i].when() for i, _, _ in ran]
        latest = whens[0]
        for w in whens:
            self.assertGreaterEqual(w, latest - 0.05)
            latest = max(latest, w)

    def test_never_early_against_the_callers_clock(self):
        async def main():
            late = []
            for i in range(50):
                before = time.monotonic_ns()
                delay = (i % 10) * 0.002
                twa.call_later(self.rt, delay, lambda due=before + round(delay * 1e9): late.append(
                    time.monotonic_ns() - due))
            while len(late) < 50:
                await asyncio.sleep(0.005)
            return late

        late = self.run_loop(main())
        self.assertGreaterEqual(min(late), 0)

    def test_call_at_and_when(self):
        async def main():
            at = tickwheel.now() + 0.02
            out = []
            h = twa.call_at(self.rt, at, lambda: out.append(tickwheel.now()))
            self.assertEqual(h.when(), at)
            self.assertIs(type(h.timer), tickwheel.Timer)
            past = twa.call_at(self.rt, 1.0, lambda: out.append("past"))  # long past: at once
            neg = twa.call_later(self.rt, -5, lambda: out.append("negative"))  # asyncio's rule: at once
            while len(out) < 3:
                await asyncio.sleep(0.002)
            self.assertFalse(h.cancelled())
            self.assertFalse(past.cancel())  # it ran
            self.assertTrue(past.cancelled())
            return at, out, neg

        at, out, neg = self.run_loop(main())
        self.assertIn("past", out)
        self.assertIn("negative", out)
        self.assertGreaterEqual([x for x in out if isinstance(x, float)][0], at)
        self.assertLess(neg.when(), tickwheel.now())

    def test_args_context_and_exceptions(self):
        var = contextvars.ContextVar("var", default="unset")

        async def main():
            seen, errors = [], []
            loop = asyncio.get_running_loop()
            loop.set_exception_handler(lambda loop, ctx: errors.append(ctx))
            var.set("caller")
            twa.call_later(self.rt, 0, lambda a, b: seen.append((a, b, var.get())), 1, b"x")
            ctx = contextvars.Context()
            twa.call_later(self.rt, 0, lambda: seen.append(var.get()), context=ctx)

            def boom():
                raise ValueError("boom")

            h = twa.call_later(self.rt, 0, boom)
            while len(seen) < 2 or not errors:
                await asyncio.sleep(0.002)
            return seen, errors, h

        seen, errors, h = self.run_loop(main())
        self.assertIn((1, b"x", "caller"), seen)
        self.assertIn("unset", seen)
        self.assertEqual(len(errors), 1)
        self.assertIsInstance(errors[0]["exception"], ValueError)
        self.assertIs(errors[0]["handle"], h)

    def test_periodic(self):
        async def main():
            fn = Callable()
            h = twa.call_later(self.rt, 0.002, fn, period=0.002)
            while fn.runs < 5:
                await asyncio.sleep(0.002)
            self.assertTrue(h.cancel())
            runs = fn.runs
            await asyncio.sleep(0.02)
            return runs, fn.runs

        runs, after = self.run_loop(main())
        self.assertEqual(runs, after, "ran after cancel() returned True")

    def test_bad_input(self):
        async def main():
            with self.assertRaises(TypeError):
                twa.call_later(object(), 1, print)
            with self.assertRaises(TypeError):
                twa.call_later(self.rt, 1, 42)
            with self.assertRaises(TypeError):
                twa.call_later(self.rt, "1", print)
            with self.assertRaises(TypeError):
                twa.timeout(object(), 1)
            other = asyncio.new_event_loop()
            try:
                with self.assertRaises(RuntimeError):  # not this thread's running loop
                    twa.call_later(self.rt, 1, print, loop=other)
            finally:
                other.close()

        self.run_loop(main())
        with self.assertRaises(RuntimeError):  # no running loop
            twa.call_later(self.rt, 1, print)
        closed = asyncio.new_event_loop()
        closed.close()
        with self.assertRaises(RuntimeError):
            twa.call_later(self.rt, 1, print, loop=closed)


class TestCancel(AsyncioTest):
    def test_cancel_is_exact(self):
        async def main():
            fn = Callable()
            ref = weakref.ref(fn)
            h = twa.call_later(self.rt, 0.005, fn)
            d = delivery(self.rt)
            # Block the loop until the timer is due (its fd readable) but not run.
            self.assertTrue(select.select([d.fd], [], [], WAIT)[0])
            self.assertEqual(fn.runs, 0)
            self.assertTrue(h.cancel(), "cancel() of a due, not-yet-run handle must prevent the run")
            self.assertTrue(h.cancelled())
            self.assertFalse(h.cancel())
            del fn
            await asyncio.sleep(0.02)
            gc.collect()
            self.assertIsNone(ref(), "the callable was not released")
            # And once it ran, cancel() says False.
            fn2 = Callable()
            h2 = twa.call_later(self.rt, 0, fn2)
            while not fn2.runs:
                await asyncio.sleep(0.001)
            self.assertFalse(h2.cancel())
            return d

        d = self.run_loop(main())
        self.assertEqual(d.queue.closed, True)

    def test_cancel_after_shutdown_does_not_raise(self):
        async def main():
            h = twa.call_later(self.rt, 60, print)
            self.rt.shutdown()
            self.assertFalse(h.cancel())

        self.run_loop(main())


class TestAwaitables(AsyncioTest):
    def test_sleep(self):
        async def main():
            t0 = time.monotonic()
            r = await twa.sleep(self.rt, 0.03, "result")
            return r, time.monotonic() - t0

        r, elapsed = self.run_loop(main())
        self.assertEqual(r, "result")
        self.assertGreaterEqual(elapsed, 0.03)

    def test_cancelled_sleep_stops_its_timer(self):
        async def main():
            task = asyncio.ensure_future(twa.sleep(self.rt, 60))
            await asyncio.sleep(0.01)
            self.assertEqual(self.rt.stats()["live"], 1)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
            self.assertEqual(self.rt.stats()["live"], 0)

        self.run_loop(main())

    def test_timeout(self):
        async def main():
            with self.assertRaises(asyncio.TimeoutError):
                async with twa.timeout(self.rt, 0.02) as to:
                    await asyncio.sleep(WAIT)
            self.assertTrue(to.expired())
            async with twa.timeout(self.rt, WAIT) as to:
                await asyncio.sleep(0.005)
            self.assertFalse(to.expired())
            async with twa.timeout(self.rt, None) as to:
                await asyncio.sleep(0.005)
            self.assertFalse(to.expired())
            # Exact: leaving the body once the timeout is due, but before it ran, is in time.
            async with twa.timeout(self.rt, 0.005) as to:
                time.sleep(0.05)  # blocks the loop past the deadline
            self.assertFalse(to.expired())
            await asyncio.sleep(0.02)  # the task is not cancelled later either
            return "done"

        self.assertEqual(self.run_loop(main()), "done")


class TestLifetime(AsyncioTest):
    def test_loop_closed_cleanly(self):
        fn = Callable()
        ref = weakref.ref(fn)

        async def main():
            twa.call_later(self.rt, 60, fn)
            d = delivery(self.rt)
            self.assertIsNotNone(d)
            return d, asyncio.get_running_loop()

        d, loop = self.run_loop(main())
        # Ended by asyncio.run's shutdown_asyncgens(), not by the loop's
        # garbage collection: the loop is still referenced here.
        self.assertTrue(loop.is_closed())
        self.assertTrue(d.closed)
        self.assertTrue(d.queue.closed)
        self.assertTrue(fd_closed(d.fd))
        self.assertEqual(self.rt.stats()["live"], 0)
        self.assertEqual(len(twa._registry), 0)
        del fn
        self.assertIsNone(ref(), "the pending callback was not released at loop shutdown")
        loop_ref = weakref.ref(loop)
        del loop
        gc.collect()
        self.assertIsNone(loop_ref(), "the loop is kept alive")

    def test_loop_closed_without_asyncio_run(self):
        fn = Callable()
        ref = weakref.ref(fn)
        loop = asyncio.new_event_loop()
        try:
            twa.call_later(self.rt, 60, fn, loop=loop)  # before the loop runs
            loop.run_until_complete(asyncio.sleep(0.01))
        finally:
            loop.close()
        del fn, loop
        gc.collect()
        self.assertIsNone(ref(), "the loop's queue was not closed when the loop went away")
        self.assertEqual(self.rt.stats()["live"], 0)

    def test_runtime_shutdown_ends_the_delivery(self):
        async def main():
            sleeper = asyncio.ensure_future(twa.sleep(self.rt, 60))
            fn = Callable()
            twa.call_later(self.rt, 60, fn)
            d = delivery(self.rt)
            await asyncio.sleep(0.01)
            threading.Thread(target=self.rt.shutdown).start()
            with self.assertRaises(TickwheelError) as cm:
                await asyncio.wait_for(sleeper, WAIT)
            self.assertEqual(cm.exception.code, tickwheel.TW_ESHUTDOWN)
            self.assertTrue(d.closed)
            self.assertTrue(fd_closed(d.fd))
            self.assertIsNone(delivery(self.rt))
            with self.assertRaises(TickwheelError):
                twa.call_later(self.rt, 1, fn)
            self.assertEqual(fn.runs, 0)

        self.run_loop(main())

    def test_runtime_closed_inside_the_loop(self):
        async def main():
            twa.call_later(self.rt, 60, print)
            d = delivery(self.rt)
            self.rt.close()  # frees the queue and its fd: the loop watches its own duplicate
            r, w = os.pipe()  # may reuse the freed fd number
            try:
                await asyncio.sleep(0.02)
                self.assertTrue(d.closed)
                loop = asyncio.get_running_loop()
                loop.add_reader(r, lambda: None)  # would fail on a stale registration
                loop.remove_reader(r)
            finally:
                os.close(r)
                os.close(w)

        self.run_loop(main())

    def test_detach(self):
        async def main():
            fn = Callable()
            twa.call_later(self.rt, 0.01, fn)
            self.assertIsNotNone(twa.queue_stats(self.rt))
            self.assertTrue(twa.detach(self.rt))
            self.assertFalse(twa.detach(self.rt))
            self.assertIsNone(twa.queue_stats(self.rt))
            await asyncio.sleep(0.03)
            self.assertEqual(fn.runs, 0)
            twa.call_later(self.rt, 0, fn)  # a new delivery
            while not fn.runs:
                await asyncio.sleep(0.001)
            self.assertEqual(twa.queue_stats(self.rt)["ran"], 1)

        self.run_loop(main())

    def test_two_loops_in_two_threads(self):
        results = {}

        def thread_main(name):
            async def main():
                seen = set()
                for _ in range(20):
                    twa.call_later(self.rt, 0.001, lambda: seen.add(threading.get_ident()))
                await twa.sleep(self.rt, 0.05)
                return seen

            results[name] = (threading.get_ident(), asyncio.run(main()))

        ths = [threading.Thread(target=thread_main, args=(n,)) for n in "ab"]
        for th in ths:
            th.start()
        for th in ths:
            th.join(WAIT * 3)
        for ident, seen in results.values():
            self.assertEqual(seen, {ident})
        self.assertEqual(len(results), 2)

    def test_no_worker_thread_runs_user_code(self):
        # Callbacks, periodic ones, and the wakeups of sleep() and timeout():
        # all on the loop thread, none on a worker.
        async def main():
            loop_thread = threading.get_ident()
            threads = set()
            record = lambda: threads.add(threading.get_ident())  # noqa: E731
            for _ in range(50):
                twa.call_later(self.rt, random.uniform(0, 0.02), record)
            h = twa.call_later(self.rt, 0, record, period=0.003)
            await twa.sleep(self.rt, 0.05)
            h.cancel()
            with self.assertRaises(asyncio.TimeoutError):
                async with twa.timeout(self.rt, 0.001):
                    await asyncio.sleep(WAIT)
            return loop_thread, threads

        loop_thread, threads = self.run_loop(main())
        self.assertEqual(threads, {loop_thread})
        self.assertEqual(self.rt.stats()["live"], 0)


class TestImport(unittest.TestCase):
    def test_stdlib_asyncio_not_shadowed(self):
        code = ("import tickwheel, asyncio, sys; import tickwheel.asyncio as twa; "
                "assert asyncio.__name__ == 'asyncio' and hasattr(asyncio, 'get_running_loop'); "
                "assert twa.__name__ == 'tickwheel.asyncio'; "
                "assert sys.modules['asyncio'] is asyncio; print('ok')")
        out = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             timeout=120, env=os.environ.copy())
        self.assertEqual(out.returncode, 0, out.stderr.decode())
        # tickwheel.asyncio after a plain ``import tickwheel``, and asyncio not imported before.
        code = ("import sys, tickwheel; assert 'tickwheel.asyncio' not in sys.modules; "
                "m = tickwheel.asyncio; assert m.call_later and sys.modules['asyncio'].__file__ != m.__file__; "
                "print('ok')")
        out = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             timeout=120, env=os.environ.copy())
        self.assertEqual(out.returncode, 0, out.stderr.decode())


if __name__ == "__main__":
    unittest.main()
