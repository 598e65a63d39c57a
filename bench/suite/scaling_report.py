#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""The report of `scripts/bench.sh scaling` (issue 21), into the output folder:

  scaling.json           {"meta", "environment", "goals", "mt": [the peers' JSON lines],
                          "expiry": [per (producers, workers): median, min, max of each figure],
                          "expiry_runs": [expiry_probe's JSON lines]}
  scaling.md             the tables, issue 21's goals met / not met, and the plots
  scaling_producers.png  aggregate start+stop pairs/s vs producer threads
  scaling_expiry.png     expiry callbacks/s vs workers, 1 producer and N
  scaling_expiry_cpu.png the drivers' CPU per expired timer and the process's CPU per callback vs workers
                         (each plot stamped with the run's id, as report.py's)

Inputs: --mt, the JSON lines of the peers' workload mt (common.hpp's format);
--probe, bench/expiry_probe's lines (one object per run: timers, producers,
workers, shards, callbacks_per_s, driver_cpu_ns_per_timer,
process_cpu_ns_per_callback, burst_wall_ms, early); the run's metadata in
SC_* environment variables (scripts/bench.sh). Re-render from a previous
scaling.json:  scaling_report.py --results docs/bench/scaling.json --out docs/bench
(--no-plots: the Markdown only; scripts/figures.py --check compares it with the committed scaling.md)
Standard library only; the formatting and gnuplot helpers are report.py's.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402
from report import (CAPI_MT2_PAIRS, PROBE_FIGURES, Results, cell, environment, expiry_goals, num, plot_lines,
                    probe_groups, read_json_lines, run_id, table, utc, write_report)  # noqa: E402



def meta_from_env():
    e = os.environ
    ints = lambda k, d=0: int(e.get(k) or d)  # noqa: E731
    return {
        "quick": e.get("SC_QUICK") == "1", "reps": ints("SC_REPS", 5), "threads": ints("SC_THREADS", os.cpu_count()),
        "counts": [int(x) for x in e.get("SC_COUNTS", "").split()], "build_dir": e.get("SC_BUILD", ""),
        "ops_per_producer": ints("SC_OPS"), "pending": ints("SC_PENDING"), "timers": ints("SC_TIMERS"),
        "command": e.get("SC_COMMAND") or "scripts/bench.sh scaling", "started_unix": ints("SC_START"), "build_s": ints("SC_BUILD_S"), "total_s": ints("SC_TOTAL_S"),
        "load_before": e.get("SC_LOAD_BEFORE", "?"), "load_after": e.get("SC_LOAD_AFTER", "?"),
        "failures": e.get("SC_FAILURES", "").split(),
        "skipped": [x for x in e.get("SC_SKIPPED", "").splitlines() if x.strip()],
    }


def build(R, expiry, meta, env, out_dir):
    goals = []

    def goal(text, figure, ok):
        goals.append((text, figure, "not measured" if ok is None else "**met**" if ok else "**not met**"))

    sec = []
    # ---- (a) producers --------------------------------------------------------------------
    mp = R.peers("mt")
    ts = R.values("mt", "threads")
    sec.append("## (a) producers\n\n")
    if mp:
        any_r = next(r for r in R.records if r["workload"] == "mt")
        ops = {p: R.get("mt", p, "pairs_per_s", threads=ts[0])["params"]["ops"] for p in mp
               if R.get("mt", p, "pairs_per_s", threads=ts[0])}
        other = sorted({o for p, o in ops.items() if p != "tickwheel-capi" and o != any_r["params"]["ops"]})
        sec.append("T producer threads, each doing %s start+stop pairs per repetition%s on its own share of %s pending "
                   "timers (driver.hpp, workload mt). Aggregate pairs per second until every producer is done and "
                   "the peer has drained, median [min–max] of %s repetitions. tickwheel runs through its C ABI and "
                   "the shared library (`peer_tickwheel_c`, default configuration: one shard and one worker per "
                   "CPU); libuv is not thread-safe and is not run.\n\n" % (
                       num(ops.get("tickwheel-capi", any_r["params"]["ops"])),
                       " (the other peers %s: their figure is a rate)" % "/".join(num(o) for o in other) if other else "",
                       num(any_r["params"]["pending"]), meta.get("reps", 5)))
        rows = [[p] + [cell(R.get("mt", p, "pairs_per_s", threads=t), bold=p == "tickwheel-capi") for t in ts]
                for p in mp]
        sec.append(table(["peer"] + ["T = %d" % t for t in ts], rows))
        rows = [[p] + [cell(R.get("mt", p, "cpu_ns_per_pair", threads=t)) for t in ts] for p in mp]
        sec.append("\n**process CPU ns per pair**\n\n")
        sec.append(table(["peer"] + ["T = %d" % t for t in ts], rows))
        png = plot_lines(out_dir, "scaling_producers.png", "start+stop pairs/s vs producer threads (%s pending)" % num(
            any_r["params"]["pending"]), "producer threads", "million pairs/s",
                         [(p, [(t, r["median"] / 1e6, r["min"] / 1e6, r["max"] / 1e6) for t in ts
                               for r in [R.get("mt", p, "pairs_per_s", threads=t)] if r]) for p in mp],
                         logx=False, logy=False, xtics=[(str(t), t) for t in ts])
        if png:
            sec.append("\n![pairs/s vs producers](%s)\n" % png)
    else:
        sec.append("Not run (no peer program built).\n")
    m2 = R.get("mt", "tickwheel-capi", "pairs_per_s", threads=2)
    pend2 = m2 and m2["params"].get("pending") == 100000
    goal("2 producers through the C ABI (shared library), 100K pending: ≥ 8 M pairs/s", cell(m2) + " pairs/s",
         None if not pend2 else m2["median"] >= CAPI_MT2_PAIRS)

    # ---- (b) expiry -------------------------------------------------------------------------
    sec.append("\n## (b) expiry\n\n")
    if expiry:
        e0 = expiry[0]
        sec.append("`bench/expiry_probe`: %s one-shots with one absolute deadline (all due in the same millisecond), "
                   "started from P producer threads (through `tw_timer_start_n`, the shared library), on a runtime "
                   "with W workers and %s shards; trivial callbacks. **callbacks/s**: timers ÷ (last callback − "
                   "first); **driver CPU**: the shard driver threads' CPU from just before the deadline to the last "
                   "callback ÷ timers (what the drivers do per expired timer: the serial part, which bounds "
                   "scaling); **process CPU**: the whole process's CPU over the same span ÷ timers (idle workers "
                   "that spin through the burst show here). Median [min–max] of %s runs, a fresh runtime each; "
                   "**early**: callbacks before the deadline, all runs (must be 0).\n\n" % (
                       num(e0["timers"]), e0["shards"], e0["runs"]))
        rows = []
        for e in expiry:
            rows.append(["%d" % e["producers"], "%d" % e["workers"]] +
                        [cell(e[k], bold=k == "callbacks_per_s") for k, _ in PROBE_FIGURES] + ["%d" % e["early"]])
        sec.append(table(["producers", "workers"] + [t for _, t in PROBE_FIGURES] + ["early"], rows))
        prods = sorted({e["producers"] for e in expiry})

        def series(key, scale, label):
            return [(label % p, [(e["workers"], e[key]["median"] * scale, e[key]["min"] * scale, e[key]["max"] * scale)
                                 for e in expiry if e["producers"] == p and e[key]]) for p in prods]

        ws = sorted({e["workers"] for e in expiry})
        png = plot_lines(out_dir, "scaling_expiry.png", "expiry: callbacks/s vs workers (%s due in the same ms)" % num(
            e0["timers"]), "workers", "million callbacks/s", series("callbacks_per_s", 1e-6, "from %d producer(s)"),
                         logx=False, logy=False, xtics=[(str(w), w) for w in ws])
        if png:
            sec.append("\n![callbacks/s vs workers](%s)\n" % png)
        png = plot_lines(out_dir, "scaling_expiry_cpu.png", "expiry: CPU per expired timer vs workers", "workers",
                         "ns per timer", series("driver_cpu_ns_per_timer", 1, "drivers, from %d producer(s)") +
                         series("process_cpu_ns_per_callback", 1, "process, from %d producer(s)"),
                         logx=False, logy=False, xtics=[(str(w), w) for w in ws])
        if png:
            sec.append("\n![CPU per timer vs workers](%s)\n" % png)
    else:
        sec.append("Not run: %s.\n" % ("; ".join(s for s in meta.get("skipped", []) if "expiry_probe" in s)
                                      or "expiry_probe printed nothing"))
    expiry_goals(expiry, goal)

    # ---- assemble -------------------------------------------------------------------------------
    when = utc(meta.get("started_unix", 0))
    head = ["# tickwheel scaling\n\n",
            "Generated by `scripts/bench.sh scaling` (sources: `bench/peers/`, `bench/expiry_probe.cpp`, "
            "`bench/suite/scaling_report.py`) for issue 21: how start+stop from 1..N producers and the expiry of a "
            "burst on 1..N workers scale with cores. Raw figures: [`scaling.json`](scaling.json).\n\n",
            "Run `%s` (`%s`): %s on %s CPUs (%s), thread counts %s; %s s in all. Load average (1, 5, 15 min) "
            "before: %s; after: %s.\n" % (run_id("scaling", meta.get("started_unix", 0)),
                                          meta.get("command", "scripts/bench.sh scaling"), when, env.get("nproc"), env.get("cpu_model", "?"),
                              ", ".join(str(c) for c in meta.get("counts", [])) or "?", meta.get("total_s", "?"),
                              meta.get("load_before", "?"), meta.get("load_after", "?"))]
    if meta.get("quick"):
        head.append("\n> **--quick run:** small sizes and 2 repetitions; the figures are not valid.\n")
    if meta.get("failures"):
        head.append("\n> Runs that failed or timed out: %s.\n" % ", ".join(meta["failures"]))
    if meta.get("skipped"):
        head.append("\n> Skipped: %s.\n" % ", ".join(meta["skipped"]))
    head.append("\n## Goals (issue 21)\n\n")
    head.append(table(["goal", "figure", "verdict"], goals))
    head.append("\nMachine: %s CPUs, %s, %s, tickwheel %s.\n\n" % (
        env.get("nproc"), env.get("memory", "?"), env.get("compiler", "?"), env.get("git", "?")))
    return "".join(head) + "".join(sec), goals


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mt", help="the peers' JSON lines (workload mt)")
    ap.add_argument("--probe", help="expiry_probe's JSON lines")
    ap.add_argument("--results", help="re-render from an existing scaling.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--no-plots", action="store_true", help="the Markdown only (as if every plot had been drawn)")
    a = ap.parse_args()
    report.DRAW_PLOTS = not a.no_plots
    os.makedirs(a.out, exist_ok=True)
    if a.results:
        doc = json.load(open(a.results))
        records, runs, meta, env = doc["mt"], doc["expiry_runs"], doc["meta"], doc.get("environment", {})
    else:
        records = read_json_lines(a.mt, "scaling_report")
        runs, meta, env = read_json_lines(a.probe, "scaling_report"), meta_from_env(), environment()
    records = [r for r in records if r.get("workload") == "mt"]
    expiry = probe_groups(runs)
    report.RUN_ID = run_id("scaling", meta.get("started_unix", 0))
    md, goals = build(Results(records), expiry, meta, env, a.out)
    met = write_report(a.out, "scaling.json", {"meta": meta, "environment": env, "mt": records, "expiry": expiry,
                                               "expiry_runs": runs}, "scaling.md", md, goals)
    print("scaling_report: %d producer results, %d expiry runs, %d goals (%d met) -> %s" % (
        len(records), len(runs), len(goals), met, a.out), file=sys.stderr)


if __name__ == "__main__":
    main()
