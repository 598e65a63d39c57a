#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""What delivery queues (issue 11) do to the Python binding's costs.

Two costs, each measured with three ways of delivering the callbacks:

  workers   today's default: callbacks on the runtime's worker threads,
            each taking the GIL (rt.start(delay, fn))
  asyncio   tickwheel.asyncio: a queue read by the loop (call_later / call_at)
  queue     a plain Queue polled by the main thread (select.select + q.run)

  start+stop  one start and one stop of a pending timer (delay 10 s), per pair
  start+fire  N timers due at the same deadline: the start cost per timer, and
              the fire cost per timer = (when the last callback ran - the
              deadline) / N, i.e. the delivery throughput once all are due

With the compiled binding (tickwheel._tickwheel, since 1.5) every call but
the waiting ones keeps the GIL. Run against the ctypes binding of 1.4 and
earlier (--binding pointing at a copy of it), the batch call tw_queue_run(q,
n, 0) of asyncio and queue is also made a second way: through ctypes.CDLL
(the GIL is released and taken back around the call, and taken again by
every callback) instead of that binding's ctypes.PyDLL -- rows "(CDLL)".
Uncontended they cost about the same; with another Python thread busy
(--busy-thread) each GIL release under CDLL lets that thread run for up to
the switch interval (5 ms), and CDLL delivery becomes orders of magnitude
slower (its CPU columns then include the busy thread: read the wall ones).

Each figure is the best of --reps repetitions, in ns per timer, both as
elapsed (wall) time and as the process's CPU time (all its threads: on a
loaded machine the CPU figures stay meaningful when the wall ones do not).
Usage:

  TICKWHEEL_LIB=build/release/capi/libtickwheel.so.1 \\
    python3 bench/python_queue_bench.py [--binding build/release/python] [--timers N] [--pairs N] [--reps R]
  ... --quick        # a smoke run of a second or two

Not a test: it measures and prints, it asserts only that every callback ran.
"""

import argparse
import asyncio
import os
import select
import sys
import threading
import time


def parse_args():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binding", default=os.path.join(here, "..", "build", "release", "python"),
                    help="directory holding the tickwheel package (default: the release build's staged copy)")
    ap.add_argument("--timers", type=int, default=20000, help="timers due at once (start+fire)")
    ap.add_argument("--pairs", type=int, default=50000, help="start+stop pairs")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workers", type=int, default=0, help="the runtime's workers (0 = one per CPU)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 1000 timers, 2000 pairs, 1 rep")
    ap.add_argument("--busy-thread", action="store_true",
                    help="run a busy Python thread meanwhile (contention for the GIL; slow with CDLL: "
                         "use small --timers)")
    a = ap.parse_args()
    if a.quick:
        a.timers, a.pairs, a.reps = 1000, 2000, 1
    return a


class Delivery:
    """Swaps the binding's non-waiting tw_queue_run between PyDLL and CDLL."""

    def __init__(self, tw, cdll):
        self.tw, self.cdll, self.saved = tw, cdll, None

    def __enter__(self):
        if self.cdll:
            self.saved = self.tw._queue_run_nowait
            self.tw._queue_run_nowait = self.tw._lib.tw_queue_run  # CDLL: releases the GIL
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            self.tw._queue_run_nowait = self.saved


def nop():
    pass


# ---- start+stop -------------------------------------------------------------------------------
def timed(fn, n):
    """(wall, CPU) ns per iteration of fn() run n times."""
    now, cpu = time.perf_counter_ns, time.process_time_ns
    t0, c0 = now(), cpu()
    for _ in range(n):
        fn()
    return (now() - t0) / n, (cpu() - c0) / n


def pairs_workers(tw, rt, n):
    start = rt.start
    return timed(lambda: start(10.0, nop).stop(), n)


def pairs_queue(tw, rt, n):
    with rt.queue() as q:
        start = rt.start
        return timed(lambda: start(10.0, nop, queue=q).stop(), n)


def pairs_asyncio(tw, rt, n):
    twa = tw.asyncio

    async def run():
        twa.call_later(rt, 10.0, nop).cancel()  # the delivery is made on first use: not timed
        call_later = twa.call_later
        return timed(lambda: call_later(rt, 10.0, nop).cancel(), n)

    return asyncio.run(run())


# ---- start+fire -------------------------------------------------------------------------------
def margin_s(n):
    return 0.2 + n * 20e-6  # room for the starts (~20 us each on a loaded machine) before the deadline


class Counter:
    def __init__(self, n):
        self.left, self.done_ns, self.done_cpu, self.lock = n, 0, 0, threading.Lock()
        self.event = threading.Event()

    def hit_locked(self):  # callbacks on several workers
        with self.lock:
            self.left -= 1
            if self.left == 0:
                self.done_ns, self.done_cpu = time.monotonic_ns(), time.process_time_ns()
                self.event.set()

    def hit(self):  # callbacks on one thread
        self.left -= 1
        if self.left == 0:
            self.done_ns, self.done_cpu = time.monotonic_ns(), time.process_time_ns()


def start_all(n, start_one):
    t0, c0 = time.monotonic_ns(), time.process_time_ns()
    for _ in range(n):
        start_one()
    return t0, c0, time.monotonic_ns(), time.process_time_ns()


def fire_result(n, starts, deadline_ns, c):
    """(start wall, start CPU, fire wall, fire CPU) per timer, and whether the
    starts ran past the deadline (the fire figures then include some starts).
    Fire CPU: the process's CPU time from the end of the starts to the last
    callback -- the waiting thread sleeps meanwhile, so it is the delivery's
    cost (runtime threads included), which a loaded machine inflates less
    than it does wall times."""
    t0, c0, t1, c1 = starts
    return ((t1 - t0) / n, (c1 - c0) / n, max(0, c.done_ns - max(deadline_ns, t1)) / n,
            (c.done_cpu - c1) / n, t1 > deadline_ns)


def fire_workers(tw, rt, n):
    c = Counter(n)
    deadline_ns = time.monotonic_ns() + int(margin_s(n) * 1e9)
    deadline_s, start_at, cb = deadline_ns / 1e9, rt.start_at, c.hit_locked
    starts = start_all(n, lambda: start_at(deadline_s, cb))
    if not c.event.wait(60):
        raise SystemExit("workers: only %d of %d callbacks ran" % (n - c.left, n))
    return fire_result(n, starts, deadline_ns, c)


def fire_queue(tw, rt, n):
    c = Counter(n)
    with rt.queue() as q:
        deadline_ns = time.monotonic_ns() + int(margin_s(n) * 1e9)
        deadline_s, start_at, cb = deadline_ns / 1e9, rt.start_at, c.hit
        starts = start_all(n, lambda: start_at(deadline_s, cb, queue=q))
        end = time.monotonic() + 60
        while c.left and time.monotonic() < end:
            if select.select([q], [], [], 1.0)[0]:
                q.run(256)
    if c.left:
        raise SystemExit("queue: only %d of %d callbacks ran" % (n - c.left, n))
    return fire_result(n, starts, deadline_ns, c)


def fire_asyncio(tw, rt, n):
    twa = tw.asyncio

    async def run():
        c = Counter(n)
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def cb():
            c.hit()
            if c.left == 0:
                done.set_result(None)

        twa.call_later(rt, 10.0, nop).cancel()  # the delivery is made on first use: not timed
        deadline_ns = time.monotonic_ns() + int(margin_s(n) * 1e9)
        deadline_s, call_at = deadline_ns / 1e9, twa.call_at
        starts = start_all(n, lambda: call_at(rt, deadline_s, cb))
        await asyncio.wait_for(done, 60)
        return fire_result(n, starts, deadline_ns, c)

    return asyncio.run(run())


def best(fn, reps):
    """The element-wise minimum over ``reps`` runs (any() for the flag)."""
    results = [fn() for _ in range(reps)]
    return tuple(any(col) if isinstance(col[0], bool) else min(col) for col in zip(*results))


def main():
    a = parse_args()
    sys.path.insert(0, os.path.abspath(a.binding))
    import tickwheel as tw  # noqa: E402 -- the binding under test
    import tickwheel.asyncio  # noqa: E402,F401

    print("tickwheel %s (%s), Python %s; %d timers due at once, %d start+stop pairs, best of %d%s"
          % (tw.__version__, tw.library_path, sys.version.split()[0], a.timers, a.pairs, a.reps,
             "; a busy Python thread runs meanwhile" if a.busy_thread else ""))
    busy = {"stop": False}

    def spin():
        x = 0
        while not busy["stop"]:
            x += 1

    spinner = threading.Thread(target=spin, daemon=True)
    if a.busy_thread:
        spinner.start()
    rows = []
    with tw.Runtime(workers=a.workers) as rt:
        rows.append(("workers", best(lambda: pairs_workers(tw, rt, a.pairs), a.reps),
                     best(lambda: fire_workers(tw, rt, a.timers), a.reps)))
        ctypes_binding = hasattr(tw, "_queue_run_nowait")  # 1.4's ctypes binding: also the CDLL rows
        for cdll in ((False, True) if ctypes_binding else (False,)):
            suffix = " (CDLL)" if cdll else ""
            with Delivery(tw, cdll):
                rows.append(("asyncio" + suffix, best(lambda: pairs_asyncio(tw, rt, a.pairs), a.reps),
                             best(lambda: fire_asyncio(tw, rt, a.timers), a.reps)))
                rows.append(("queue" + suffix, best(lambda: pairs_queue(tw, rt, a.pairs), a.reps),
                             best(lambda: fire_queue(tw, rt, a.timers), a.reps)))
    busy["stop"] = True
    if a.busy_thread:
        spinner.join()
    print("ns per timer; wall = elapsed time, cpu = the process's CPU time (all threads)")
    print("%-16s %21s %21s %21s" % ("", "start+stop pair", "start (N at once)", "fire (N at once)"))
    print("%-16s %10s %10s %10s %10s %10s %10s" % ("delivery", "wall", "cpu", "wall", "cpu", "wall", "cpu"))
    for name, (pair_wall, pair_cpu), (start_wall, start_cpu, fire_wall, fire_cpu, late) in rows:
        print("%-16s %10.0f %10.0f %10.0f %10.0f %10.0f %10.0f%s" % (
            name, pair_wall, pair_cpu, start_wall, start_cpu, fire_wall, fire_cpu,
            "  (starts ran past the deadline)" if late else ""))


if __name__ == "__main__":
    main()
