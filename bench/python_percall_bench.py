#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Per-call cost from Python (issue 33): a start+stop pair of the Python
binding against asyncio's own timers, measured in the same run.

  tickwheel pair        rt.start(10.0, nop).stop()            (callbacks on workers)
  asyncio pair          loop.call_later(10.0, nop).cancel()   (inside a running loop)
  tickwheel.asyncio     tickwheel.asyncio.call_later(rt, 10.0, nop).cancel()  (same loop)
  tickwheel pair, busy  the first pair while another Python thread spins on the CPU
                        (it takes the GIL whenever this thread lets it go or its
                        switch interval, 5 ms, runs out)

Each repetition times --pairs pairs of each (interleaved: tickwheel, asyncio,
tickwheel.asyncio, busy) in a plain ``for`` loop (its overhead, ~15 ns, is in
every figure alike); a figure is the best of --reps repetitions, with the
median, the worst and the spread ((worst - best) / best). 1000 timers are
pending in the runtime throughout (as in the C benchmarks' smallest case);
asyncio's loop runs one iteration every 1000 pairs (asyncio drops cancelled
handles from its heap only when it iterates; the tickwheel.asyncio pairs get
the same iterations).

The goals (issue 33): the tickwheel pair <= 0.8 us; tickwheel.asyncio <= 1.5x
asyncio's own pair; <= 5 us per pair beside the busy thread.

Usage (scripts/bench.sh python runs it with the release build's package):

  python3 bench/python_percall_bench.py [--binding build/release/python] [--reps 7]
         [--pairs 100000] [--json docs/bench/python.json] [--quick]

Prints a table and, with --json, writes the figures with the date, the machine
(uname -m, CPU model, cores), the Python version and the command.
Not a test: it measures and prints.
"""

import argparse
import asyncio
import datetime
import json
import os
import platform
import shlex
import statistics
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOAL_PAIR_NS = 800.0
GOAL_ASYNCIO_RATIO = 1.5
GOAL_BUSY_NS = 5000.0


def parse_args():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binding", default=os.path.join(here, "..", "build", "release", "python"),
                    help="directory holding the tickwheel package (default: the release build's staged "
                         "copy); 'installed' = import the installed one")
    ap.add_argument("--pairs", type=int, default=100000, help="pairs per repetition and figure")
    ap.add_argument("--busy-pairs", type=int, default=20000, help="pairs per repetition beside the busy thread")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--pending", type=int, default=1000, help="timers pending in the runtime meanwhile")
    ap.add_argument("--json", help="write the figures there (docs/bench/python.json)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 2000 pairs, 2 repetitions")
    ap.add_argument("--command", help="the command to record (default: this one; scripts/bench.sh python says its own)")
    a = ap.parse_args()
    if a.quick:
        a.pairs, a.busy_pairs, a.reps = 2000, 1000, 2
    return a


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


def pairs_tickwheel(rt, n):
    """(wall ns, this thread's CPU ns) per pair."""
    start = rt.start
    now, cpu = time.perf_counter_ns, time.thread_time_ns
    c0, t0 = cpu(), now()
    for _ in range(n):
        start(10.0, nop).stop()
    t1, c1 = now(), cpu()
    return (t1 - t0) / n, (c1 - c0) / n


def pairs_busy(rt, n):
    with Spinner():
        return pairs_tickwheel(rt, n)  # (its CPU figure: this thread's only)


async def _chunks(one_chunk, n):
    # Timed chunks of 1000 pairs; one loop iteration between them (not timed).
    wall = cpu = 0
    left = n
    while left > 0:
        k = min(1000, left)
        w, c = one_chunk(k)
        wall += w
        cpu += c
        left -= k
        await asyncio.sleep(0)
    return wall / n, cpu / n


def pairs_asyncio(n):
    async def run():
        loop = asyncio.get_running_loop()
        call_later = loop.call_later
        now, cpu = time.perf_counter_ns, time.thread_time_ns

        def chunk(k):
            c0, t0 = cpu(), now()
            for _ in range(k):
                call_later(10.0, nop).cancel()
            t1, c1 = now(), cpu()
            return t1 - t0, c1 - c0
        return await _chunks(chunk, n)
    return asyncio.run(run())


def pairs_tickwheel_asyncio(tw, rt, n):
    twa = tw.asyncio

    async def run():
        twa.call_later(rt, 10.0, nop).cancel()  # the delivery is made on first use: not timed
        call_later = twa.call_later
        now, cpu = time.perf_counter_ns, time.thread_time_ns

        def chunk(k):
            c0, t0 = cpu(), now()
            for _ in range(k):
                call_later(rt, 10.0, nop).cancel()
            t1, c1 = now(), cpu()
            return t1 - t0, c1 - c0
        return await _chunks(chunk, n)
    return asyncio.run(run())


def cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def figure(name, samples, cpu=None, unit="ns per pair", goal=None, met=None, note=""):
    best, worst = min(samples), max(samples)
    f = {"name": name, "unit": unit, "best": round(best, 2 if unit == "ratio" else 1),
         "median": round(statistics.median(samples), 2 if unit == "ratio" else 1),
         "worst": round(worst, 2 if unit == "ratio" else 1),
         "spread": round((worst - best) / best, 3) if best else 0.0, "reps": len(samples),
         "samples": [round(x, 3 if unit == "ratio" else 1) for x in samples], "goal": goal, "met": met, "note": note}
    if cpu is not None:
        digits = 3 if unit == "ratio" else 1
        f["cpu_best"] = round(min(cpu), digits)
        f["cpu_median"] = round(statistics.median(cpu), digits)
        f["cpu_samples"] = [round(x, digits) for x in cpu]
    return f


def main():
    a = parse_args()
    if a.binding != "installed":
        sys.path.insert(0, os.path.abspath(a.binding))
    import tickwheel as tw  # noqa: E402 -- the binding under test
    import tickwheel.asyncio  # noqa: E402,F401

    wall = {"tw": [], "asyncio": [], "twa": [], "busy": []}
    cpu = {"tw": [], "asyncio": [], "twa": [], "busy": []}
    load_before = list(os.getloadavg())
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.005)  # CPython's default: what the busy thread gets per turn
    with tw.Runtime() as rt:
        keep = [rt.start(10.0 + i * 1e-3, nop) for i in range(a.pending)]
        pairs_tickwheel(rt, min(a.pairs, 10000))  # warm-up: worker threads, thread states, caches
        pairs_asyncio(min(a.pairs, 10000))
        pairs_tickwheel_asyncio(tw, rt, min(a.pairs, 10000))
        for rep in range(a.reps):
            for key, run in (("tw", lambda: pairs_tickwheel(rt, a.pairs)), ("asyncio", lambda: pairs_asyncio(a.pairs)),
                             ("twa", lambda: pairs_tickwheel_asyncio(tw, rt, a.pairs)),
                             ("busy", lambda: pairs_busy(rt, a.busy_pairs))):
                w, c = run()
                wall[key].append(w)
                cpu[key].append(c)
            print("rep %d/%d (wall / this thread's CPU, ns per pair): tickwheel %.0f / %.0f, asyncio %.0f / %.0f, "
                  "tickwheel.asyncio %.0f / %.0f, busy %.0f / %.0f"
                  % ((rep + 1, a.reps) + tuple(x for k in ("tw", "asyncio", "twa", "busy")
                                              for x in (wall[k][-1], cpu[k][-1]))), file=sys.stderr, flush=True)
        for t in keep:
            t.stop()
    sys.setswitchinterval(interval)

    best_asyncio = min(wall["asyncio"])
    ratio = [t / best_asyncio for t in wall["twa"]]
    best_asyncio_cpu = min(cpu["asyncio"])
    ratio_cpu = [t / best_asyncio_cpu for t in cpu["twa"]]
    figures = [
        figure("tickwheel pair: rt.start(10.0, fn).stop()", wall["tw"], cpu["tw"], goal="<= %.0f ns" % GOAL_PAIR_NS,
               met=min(wall["tw"]) <= GOAL_PAIR_NS),
        figure("asyncio pair: loop.call_later(10.0, fn).cancel()", wall["asyncio"], cpu["asyncio"],
               note="the reference, same run"),
        figure("tickwheel.asyncio pair: call_later(rt, 10.0, fn).cancel()", wall["twa"], cpu["twa"]),
        figure("tickwheel.asyncio / asyncio", ratio, ratio_cpu, unit="ratio", goal="<= %.1f" % GOAL_ASYNCIO_RATIO,
               met=min(ratio) <= GOAL_ASYNCIO_RATIO,
               note="each repetition's tickwheel.asyncio pair over the best asyncio pair"),
        figure("tickwheel pair beside a busy Python thread", wall["busy"], cpu["busy"],
               goal="<= %.0f ns" % GOAL_BUSY_NS, met=min(wall["busy"]) <= GOAL_BUSY_NS,
               note="wall time per pair; the busy thread holds the GIL about half of it"),
    ]
    print("\n%-58s %9s %9s %9s %7s %9s  %s" % ("per-call cost from Python (wall)", "best", "median", "worst",
                                               "spread", "CPU best", "goal"))
    for f in figures:
        goal = "" if f["goal"] is None else "%s: %s" % (f["goal"], "met" if f["met"] else "NOT met")
        fmt = ("%-58s %9.2f %9.2f %9.2f %6.1f%% %9.2f  %s" if f["unit"] == "ratio" else
               "%-58s %9.0f %9.0f %9.0f %6.1f%% %9.0f  %s")
        print(fmt % (f["name"], f["best"], f["median"], f["worst"], f["spread"] * 100, f.get("cpu_best", 0), goal))
    if a.json:
        doc = {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "machine": {"arch": platform.machine(), "cpu": cpu_model(), "cores": os.cpu_count(),
                        "load_average_before": load_before, "load_average_after": list(os.getloadavg())},
            "python": {"version": platform.python_version(), "implementation": platform.python_implementation(),
                       "executable": sys.executable},
            "tickwheel": {"version": tw.__version__, "library": os.path.relpath(tw.library_path, ROOT)},
            "command": a.command or " ".join(shlex.quote(os.path.relpath(x, ROOT) if x.startswith(ROOT + os.sep) else x)
                                             for x in [os.path.basename(sys.executable)] + sys.argv),
            "method": "best of %d repetitions of %d pairs each (%d beside the busy thread), %d timers pending; "
                      "wall time (perf_counter_ns) and this thread's CPU time (thread_time_ns)"
                      % (a.reps, a.pairs, a.busy_pairs, a.pending),
            "figures": figures,
        }
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        print("wrote %s" % a.json, file=sys.stderr)


if __name__ == "__main__":
    main()
