#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Every published benchmark figure from one file: docs/bench/figures.json.

scripts/bench.sh writes one data file per mode into docs/bench/:

  mode     command                  data file      generated report
  full     scripts/bench.sh         results.json   README.md + the plots startstop, producers, expiry, lateness_*
  capi     scripts/bench.sh capi    capi.json      capi.md
  scaling  scripts/bench.sh scaling scaling.json   scaling.md + the plots scaling_*
  python   scripts/bench.sh python  python.json    -
  node     scripts/bench.sh node    node.json      -
  delay    scripts/bench.sh delay   delay.json     -   (bench/delay_sources: what can delay a timer)
  model    scripts/bench.sh model   model.json     -   (bench/model_bench: leeway, stop_group, query, advance)

This script reads them and writes docs/bench/figures.json: each published
figure (a key such as "capi.c.pair.1k") with its value, unit, text, the
run it comes from (the run's id, date, machine: CPU model, cores, kernel; the
command; the git commit), and the goals the runs were checked against. The
pages quote the figures through markers that keep the Markdown readable:

  inline, in prose or a table cell (never at the start of a line: CommonMark
  would take the line for an HTML block):
      ... costs <!-- fig:capi.c.pair.1k -->58.8 ns<!-- /fig --> with ...
      <!-- fig:KEY|num -->58.8<!-- /fig -->     the number without its unit
      <!-- fig:run.capi.date -->2026-11-27<!-- /fig -->   a run's date, commit, machine, command, id
  a whole table, rendered here (on lines of their own, blank lines around):
      <!-- figtable:per-language -->
      | ... |
      <!-- /figtable -->

  scripts/figures.py --write   rebuilds figures.json from the data files and
                               rewrites every marked figure and table in the
                               pages (README.md, docs/site/**/*.md)
  scripts/figures.py --check   changes nothing; fails (exit 1, one line per
                               problem) when figures.json differs from what the
                               data files give, a marked figure or table differs
                               from figures.json, a marker names an unknown
                               figure or starts a line, a plot on a page is not
                               stamped with the current run of its mode or sits
                               beside a table of another run, a generated report
                               (README.md, capi.md, scaling.md) differs from what
                               bench/suite/report.py renders from its data file,
                               a run is a --quick one, or a user page quotes a
                               figure outside a marker (ctest docs_figures)
  scripts/figures.py --list    the figures, one a line: key, text, run
  scripts/figures.py --stamp FILE --mode MODE --command CMD
                               records the run's command, commit and machine in
                               a data file (scripts/bench.sh, after each mode)
  scripts/figures.py --collect RAW --mode delay|model|probes --meta JSON --out FILE
                               writes the data file of a delay, model or probes
                               run from its programs' output (scripts/bench.sh)

Options: --root DIR (the source tree, default this script's), --bench DIR
(the data files, default ROOT/docs/bench), --figures FILE (default
BENCH/figures.json), --partial (a mode's data file may be missing: its
figures are left out), --allow-quick (publish a --quick run: machinery
tests only), --no-pages (figures.json only). Python 3 standard library only.
"""

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "bench", "suite"))
import report  # noqa: E402  (bench/suite/report.py: run ids, PNG stamps, the report itself)

MODES = [  # mode, data file, the command that writes it, its generated reports
    ("full", "results.json", "scripts/bench.sh", ["README.md"]),
    ("capi", "capi.json", "scripts/bench.sh capi", ["capi.md"]),
    ("scaling", "scaling.json", "scripts/bench.sh scaling", ["scaling.md"]),
    ("python", "python.json", "scripts/bench.sh python", []),
    ("node", "node.json", "scripts/bench.sh node", []),
    ("delay", "delay.json", "scripts/bench.sh delay", []),
    ("model", "model.json", "scripts/bench.sh model", []),
    ("probes", "probes.json", "scripts/bench.sh probes", []),
]
# Pages whose marked figures are checked and rewritten: the README and every
# page of the site. Pages where a figure must not appear unmarked (the lint):
# the user pages -- all but the development pages (development.md, design/,
# the changelog), which keep their A/B measurements with commits and dates.
DEV_PAGES = ("docs/site/development.md", "docs/site/changelog.md", "docs/site/design/")


def user_page(page):
    return not page.startswith(DEV_PAGES)
# the peers' short names in the figure keys
PEER_KEY = {"tickwheel": "cxx", "tickwheel-capi": "c", "tickwheel-wheel": "wheel", "asio-1t": "asio1",
            "asio-2t": "asio2", "libuv": "libuv", "libevent": "libevent", "dpdk-timer": "dpdk",
            "mutex-map": "mutex", "mutex-map-2w": "mutex2w", "python-binding": "binding",
            "python-binding-batch": "binding_batch", "python-ctypes": "ctypes"}
PEER_NAME = {"tickwheel": "tickwheel, C++ API", "tickwheel-capi": "tickwheel, C ABI (libtickwheel.so.1)",
             "tickwheel-wheel": "tickwheel's bare wheel (one thread)", "asio-1t": "Boost.Asio, 1 io thread",
             "asio-2t": "Boost.Asio, 2 io threads", "libuv": "libuv", "libevent": "libevent (threads enabled)",
             "dpdk-timer": "DPDK rte_timer", "mutex-map": "mutex + std::map service",
             "mutex-map-2w": "mutex + std::map service, 2 workers"}


def nkey(n):
    return report.short_n(n).lower()


# ---- formatting -------------------------------------------------------------------------------
RATES = ("pairs/s", "callbacks/s")


def sig(x):
    if abs(x) >= 1000:
        return "{:,.0f}".format(x)
    return report.plain(x)


def number(v, unit):
    """The value as the pages print it, without the unit."""
    if unit in RATES:
        m = v / 1e6
        return ("%.2f" % m if m < 1 else sig(m)) + " M"
    if unit == "×":
        return ("%.2f" if v < 10 else "%.1f" if v < 100 else "%.0f") % v
    if unit == "%":
        return ("%.2g" % v) if v < 1 else "%.1f" % v
    if unit == "count":
        return "{:,d}".format(int(v))
    return sig(v)


def text(v, unit):
    n = number(v, unit)
    if unit in ("×", "%"):
        return n + unit
    if unit == "count":
        return n
    return "%s %s" % (n, unit)


# ---- the runs -----------------------------------------------------------------------------------
def iso(ts):
    return report.utc(ts, "%Y-%m-%dT%H:%M:%SZ")


def from_iso(s):
    s = s.rstrip("Z").split(".")[0]
    return int(datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S").replace(
        tzinfo=datetime.timezone.utc).timestamp())


def describe_run(mode, doc, default_command):
    """The run of one data file: id, date, machine, command, commit, quick.
    A data file stamped by scripts/bench.sh (--stamp) carries its command,
    commit and machine in "run"; older ones say what they recorded."""
    stamp = doc.get("run") or {}
    if mode in ("full", "capi", "scaling"):
        meta, env = doc.get("meta", {}), doc.get("environment", {})
        started = int(meta.get("started_unix", 0))
        quick = bool(meta.get("quick"))
        command = meta.get("command") or default_command + (" --quick" if quick else "")
        if not meta.get("command") and mode == "capi" and not quick and meta.get("reps", 5) != 5:
            command = "BENCH_REPS=%d %s" % (meta["reps"], command)  # a run from before the command was recorded
        machine = {"cpu": env.get("cpu_model"), "cores": env.get("nproc"), "kernel": env.get("kernel")}
        commit, duration = env.get("git"), meta.get("total_s")
        load = meta.get("load_before")
    elif mode == "python":
        started = from_iso(doc["date"])
        command = doc.get("command") or default_command
        quick = "--quick" in command
        m = doc.get("machine", {})
        machine = {"cpu": m.get("cpu"), "cores": m.get("cores"), "kernel": m.get("kernel")}
        commit, duration = doc.get("commit"), None
        load = " ".join("%.2f" % x for x in m.get("load_average_before", []))
    elif mode in ("delay", "model", "probes"):  # scripts/figures.py --collect
        meta = doc.get("meta", {})
        started = int(meta.get("started_unix", 0))
        quick = bool(meta.get("quick"))
        command = meta.get("command") or default_command + (" --quick" if quick else "")
        machine = {"cpu": None, "cores": None, "kernel": None}
        commit, duration, load = None, meta.get("total_s"), meta.get("load_before")
    else:  # node: every figure carries the run's date, machine and command
        f0 = doc["figures"][0]
        started = from_iso(f0["date"])
        command = f0.get("command") or default_command
        quick = "--quick" in command
        m = f0.get("machine", {})
        machine = {"cpu": m.get("cpu_model"), "cores": m.get("nproc"), "kernel": m.get("kernel")}
        commit, duration = f0.get("commit"), None
        load = " ".join("%.2f" % x for x in m.get("load_before", []))
    machine = {k: stamp.get("machine", {}).get(k) or v for k, v in machine.items()}
    return {
        "id": report.run_id(mode, started), "mode": mode, "date": iso(started),
        "command": stamp.get("command") or command, "commit": stamp.get("commit") or commit,
        "machine": machine, "quick": quick, "duration_s": duration, "load_before": load or None,
    }


def stamp(path, mode, command):
    """scripts/bench.sh --stamp: the run's command, commit and machine into the data file."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    cpu = None
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
    except OSError:
        pass
    doc["run"] = {"mode": mode, "command": command, "commit": report.git_commit(),
                  "machine": {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release()}}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")


# ---- the figures -----------------------------------------------------------------------------------
class Figures:
    def __init__(self):
        self.figs = {}

    def add(self, key, run, value, unit, what, lo=None, hi=None, txt=None):
        if value is None:
            return
        self.figs[key] = {"value": round(float(value), 6), "unit": unit, "text": txt or text(value, unit),
                          "min": None if lo is None else round(float(lo), 6),
                          "max": None if hi is None else round(float(hi), 6),
                          "what": what, "run": run["id"]}

    def rec(self, key, run, r, unit, what, scale=1.0):
        """A record of the suite's format (median, min, max)."""
        if r is not None:
            self.add(key, run, r["median"] * scale, unit, what, r["min"] * scale, r["max"] * scale)

    def ratio(self, key, run, a, b, what):
        """a / b of two figures of the same run (keys), as ×."""
        fa, fb = self.figs.get(a), self.figs.get(b)
        if fa and fb and fb["value"]:
            self.add(key, run, fa["value"] / fb["value"], "×", what)


def full_figures(F, run, doc):
    R = report.Results(report.merge_rounds(doc["results"]))
    reps = doc.get("meta", {}).get("reps", 5)
    med = "median of %d repetitions" % reps
    for p in R.peers("startstop"):
        if p not in PEER_KEY:
            continue
        for n in R.values("startstop", "pending"):
            F.rec("full.startstop.%s.%s" % (PEER_KEY[p], nkey(n)), run,
                  R.get("startstop", p, "wall_ns_per_pair", pending=n), "ns",
                  "%s: start+stop pair with %s timers pending, wall time until every request is processed, %s" % (
                      PEER_NAME.get(p, p), report.short_n(n), med))
        ns = R.values("startstop", "pending")
        if len(ns) > 1:
            F.ratio("full.startstop.%s.growth" % PEER_KEY[p], run, "full.startstop.%s.%s" % (PEER_KEY[p], nkey(ns[-1])),
                    "full.startstop.%s.%s" % (PEER_KEY[p], nkey(ns[0])),
                    "%s: the pair's cost at %s pending over its cost at %s" % (
                        PEER_NAME.get(p, p), report.short_n(ns[-1]), report.short_n(ns[0])))
    for p in ("tickwheel", "tickwheel-capi"):
        for other in ("libuv", "asio-1t"):
            for n in R.values("startstop", "pending"):
                mine, theirs = "full.startstop.%s.%s" % (PEER_KEY[p], nkey(n)), "full.startstop.%s.%s" % (
                    PEER_KEY[other], nkey(n))
                F.ratio("full.startstop.%s.vs_%s.%s" % (PEER_KEY[p], PEER_KEY[other], nkey(n)), run, mine, theirs,
                        "%s's pair over %s's, %s pending, same run" % (
                            PEER_NAME[p], PEER_NAME[other], report.short_n(n)))
    others = [F.figs[k]["value"] for k in ("full.startstop.%s.growth" % PEER_KEY[p] for p in R.peers("startstop")
                                           if p not in ("tickwheel", "tickwheel-capi", "tickwheel-wheel"))
              if k in F.figs]
    if others:
        F.add("full.startstop.others.growth", run, min(others), "×",
              "the other libraries' growth of the pair's cost from the fewest to the most pending timers (range)",
              min(others), max(others), txt="%.0f–%.0f×" % (min(others), max(others)))
    for p in R.peers("memory"):
        for n in R.values("memory", "pending"):
            F.rec("full.memory.%s.%s" % (PEER_KEY.get(p, p), nkey(n)), run,
                  R.get("memory", p, "rss_bytes_per_timer", pending=n), "B",
                  "%s: resident memory per pending timer with %s pending, %s" % (
                      PEER_NAME.get(p, p), report.short_n(n), med))
    for p in R.peers("mt"):
        for t in R.values("mt", "threads"):
            F.rec("full.mt.%s.%d" % (PEER_KEY.get(p, p), t), run, R.get("mt", p, "pairs_per_s", threads=t), "pairs/s",
                  "%s: start+stop pairs per second from %d producer thread(s), 100 K pending, %s" % (
                      PEER_NAME.get(p, p), t, med))
    for p in R.peers("expiry"):
        F.rec("full.expiry.%s" % PEER_KEY.get(p, p), run, R.get("expiry", p, "callbacks_per_s"), "callbacks/s",
              "%s: callbacks per second delivering a backlog of 1 M due timers, %s" % (PEER_NAME.get(p, p), med))
    for p in R.peers("rearm"):
        F.rec("full.rearm.%s" % PEER_KEY.get(p, p), run, R.get("rearm", p, "caller_ns_per_rearm"), "ns",
              "%s: re-arming a pending timer to a later deadline, 1 M pending, the caller's time, %s" % (
                  PEER_NAME.get(p, p), med))
    for p in R.peers("idle"):
        F.rec("full.idle.%s" % PEER_KEY.get(p, p), run, R.get("idle", p, "cpu_percent_whole"), "%",
              "%s: CPU time with 1 M timers pending and none due, percent of one core" % PEER_NAME.get(p, p))
    bs = R.get("startstop_batch", "tickwheel", "wall_ns_per_pair")
    F.rec("full.batch.startstop", run, bs, "ns", "tickwheel, C++ API: start+stop pairs in batches of 64, 1 M "
          "pending, wall time per pair until processed, %s" % med)
    F.rec("full.batch.rearm", run, R.get("rearm_batch", "tickwheel", "caller_ns_per_rearm"), "ns",
          "tickwheel, C++ API: re-arms in batches of 64, 1 M pending, the caller's time per timer, %s" % med)
    for p in R.peers("lateness"):
        for r in [x for x in R.records if x["workload"] == "lateness" and x["peer"] == p
                  and x["metric"] == "lateness_p50"]:
            res = r["params"].get("resolution_us")
            cfg = PEER_KEY.get(p, p) + ("" if p != "tickwheel" else "_1ms" if res == 1000 else "_%dus" % res)
            label = PEER_NAME.get(p, p) + ("" if p != "tickwheel" else ", %s tick" % (
                "1 ms" if res == 1000 else "%d µs" % res))
            rate = r["params"]["rate"]
            sel = {"rate": rate} if p != "tickwheel" else {"rate": rate, "resolution_us": res}
            for metric, short, what in [("lateness_p50", "p50", "median"), ("lateness_p99", "p99", "99th percentile"),
                                        ("lateness_p999", "p999", "99.9th percentile")]:
                F.rec("full.lateness.%s.%s.%s" % (cfg, nkey(rate), short), run, R.get("lateness", p, metric, **sel),
                      "µs", "%s: lateness (callback start - deadline), %s, at %s timers/s, median over the stream's "
                      "slices" % (label, what, report.short_n(rate)))
            early = R.get("lateness", p, "early_total", **sel)
            if early:
                F.add("full.lateness.%s.%s.early" % (cfg, nkey(rate)), run, early["median"], "count",
                      "%s: callbacks that ran before their deadline, whole stream of %s timers/s" % (
                          label, report.short_n(rate)))
    for p in R.peers("ffi"):
        F.rec("full.ffi.%s" % PEER_KEY.get(p, p), run, R.get("ffi", p, "wall_ns_per_pair"), "ns",
              "%s, 100 K pending, wall time per pair, %s" % (report.PEER_TEXT.get(p, p), med))


def capi_figures(F, run, doc):
    R = report.Results(report.merge_rounds(doc["results"]))
    rounds = "median of %s interleaved rounds" % doc.get("meta", {}).get("reps", "?")
    for p in ("libuv", "tickwheel-capi", "tickwheel"):  # libuv first: the others' ratios need it
        for n in R.values("startstop", "pending"):
            k = "capi.%s.pair.%s" % (PEER_KEY[p], nkey(n))
            F.rec(k, run, R.get("startstop", p, "wall_ns_per_pair", pending=n), "ns",
                  "%s: start+stop pair with %s timers pending, wall time until processed, %s" % (
                      PEER_NAME[p], report.short_n(n), rounds))
            F.rec("capi.%s.cpu.%s" % (PEER_KEY[p], nkey(n)), run, R.get("startstop", p, "cpu_ns_per_pair", pending=n),
                  "ns", "%s: start+stop pair with %s timers pending, process CPU time (all threads), %s" % (
                      PEER_NAME[p], report.short_n(n), rounds))
            if p != "libuv":
                F.ratio("capi.%s.vs_libuv.%s" % (PEER_KEY[p], nkey(n)), run, k, "capi.libuv.pair.%s" % nkey(n),
                        "%s's pair over libuv's, %s pending, same rounds" % (PEER_NAME[p], report.short_n(n)))
    for p in ("tickwheel-capi", "tickwheel"):
        for t in R.values("mt", "threads"):
            F.rec("capi.%s.mt.%d" % (PEER_KEY[p], t), run, R.get("mt", p, "pairs_per_s", threads=t), "pairs/s",
                  "%s: start+stop pairs per second from %d producer thread(s), 100 K pending, %s" % (
                      PEER_NAME[p], t, rounds))


def scaling_figures(F, run, doc):
    R = report.Results(doc["mt"])
    reps = "median of %s repetitions" % doc.get("meta", {}).get("reps", "?")
    for p in R.peers("mt"):
        for t in R.values("mt", "threads"):
            F.rec("scaling.mt.%s.%d" % (PEER_KEY.get(p, p), t), run, R.get("mt", p, "pairs_per_s", threads=t),
                  "pairs/s", "%s: start+stop pairs per second from %d producer thread(s), 100 K pending, %s" % (
                      PEER_NAME.get(p, p), t, reps))
            F.rec("scaling.mt_cpu.%s.%d" % (PEER_KEY.get(p, p), t), run, R.get("mt", p, "cpu_ns_per_pair", threads=t),
                  "ns", "%s: process CPU per pair from %d producer thread(s), %s" % (PEER_NAME.get(p, p), t, reps))
    early = runs = 0
    for e in doc.get("expiry", []):
        k = "scaling.expiry.p%dw%d" % (e["producers"], e["workers"])
        where = "%s one-shots due in the same millisecond, started from %d thread(s), run on %d worker(s), " \
                "%s shards, median of %d runs" % (report.short_n(e["timers"]), e["producers"], e["workers"],
                                                  e["shards"], e["runs"])
        F.rec(k + ".rate", run, e.get("callbacks_per_s"), "callbacks/s",
              "tickwheel, C ABI: callbacks per second, " + where)
        F.rec(k + ".driver", run, e.get("driver_cpu_ns_per_timer"), "ns",
              "tickwheel, C ABI: the shard drivers' CPU per expired timer, " + where)
        F.rec(k + ".process", run, e.get("process_cpu_ns_per_callback"), "ns",
              "tickwheel, C ABI: the process's CPU per callback, " + where)
        early += e.get("early", 0)
        runs += e.get("runs", 0)
    if runs:
        F.add("scaling.expiry.early", run, early, "count", "callbacks that ran before their deadline in all %d "
              "expiry runs" % runs)


PY_NAMES = {"tickwheel pair: rt.start(10.0, fn).stop()": "pair",
            "asyncio pair: loop.call_later(10.0, fn).cancel()": "asyncio_pair",
            "tickwheel.asyncio pair: call_later(rt, 10.0, fn).cancel()": "twasyncio_pair",
            "tickwheel.asyncio / asyncio": "twasyncio_ratio",
            "tickwheel pair beside a busy Python thread": "busy_pair"}


def python_figures(F, run, doc):
    ver = doc.get("python", {}).get("version", "?")
    for f in doc.get("figures", []):
        k = PY_NAMES.get(f["name"])
        if not k:
            continue
        unit = "×" if f["unit"] == "ratio" else "ns"
        F.add("python." + k, run, f["best"], unit, "CPython %s: %s, best of %d repetitions (%s)" % (
            ver, f["name"], f.get("reps", 0), f["unit"]), f["best"], f.get("worst"))
        if unit == "ns" and f.get("cpu_best") is not None:
            F.add("python.%s.cpu" % k, run, f["cpu_best"], "ns", "CPython %s: %s, the thread's CPU time, best of %d "
                  "repetitions" % (ver, f["name"], f.get("reps", 0)))
    F.ratio("python.pair.vs_asyncio", run, "python.pair", "python.asyncio_pair",
            "the binding's start+stop pair over asyncio's call_later + cancel, same run")


NODE_NAMES = {"tickwheel_pair": "pair", "node_pair": "settimeout_pair", "ratio": "ratio",
              "tickwheel_pair_cpu": "pair.cpu", "node_pair_cpu": "settimeout_pair.cpu", "ratio_cpu": "ratio.cpu",
              "ffi_floor_pair_cpu": "floor.cpu", "tickwheel_start_cpu": "start.cpu", "tickwheel_stop_cpu": "stop.cpu"}


def node_figures(F, run, doc):
    for f in doc.get("figures", []):
        k = NODE_NAMES.get(f["name"])
        if not k:
            continue
        unit = "×" if f["unit"] == "x" else "ns"
        F.add("node." + k, run, f["median"], unit, "Node.js %s: %s (%s), median of %s rounds" % (
            f.get("node", "?"), f["what"], f["unit"], f.get("rounds", "?")), f.get("min"), f.get("max"))


def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    return None if not n else xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def delay_figures(F, run, doc):
    """bench/delay_sources: what can delay a timer (the concepts guide)."""
    cases = doc.get("cases", [])
    rounds = doc.get("meta", {}).get("rounds", "?")
    by_b = {}
    for c in cases:
        if c["case"] == "blocking":
            by_b.setdefault((c["blockers"], c["workers"]), []).append(c["late_ms"])
    for (b, w), xs in sorted(by_b.items()):
        F.add("delay.blocking.%d" % b, run, _median(xs), "ms",
              "lateness of a 20 ms timer started behind %d callback(s) that block for 500 ms each, %d workers, "
              "median of %d round(s)" % (b, w, len(xs)), min(xs), max(xs))
        F.add("delay.workers", run, w, "count", "the workers of the runtime in the blocking cases")
    what = {"frozen": "a thread that starts and stops timers in a loop held in a signal handler for 400 ms",
            "nice19": "a thread that starts and stops timers in a loop at nice 19, pinned beside a spinning thread, "
                      "windows of 400 ms",
            "idle": "a thread that starts and stops timers in a loop at SCHED_IDLE, pinned beside a spinning thread, "
                    "windows of 400 ms"}
    for how, text_ in what.items():
        cs = [c for c in cases if c["case"] == how]
        if not cs:
            continue
        gaps = [c["max_gap_ms"] for c in cs]
        F.add("delay.%s.gap" % how, run, max(gaps), "ms", "%s: the largest gap between runs of a 5 ms periodic "
              "timer of its shard, worst of %d round(s) (%s)" % (text_, len(cs), rounds), min(gaps), max(gaps))
        F.add("delay.%s.held" % how, run, sum(c["stalled_over_100ms"] for c in cs), "count",
              "%s: windows in which the periodic timer was held back more than 100 ms" % text_)
        F.add("delay.%s.windows" % how, run, sum(c["windows"] for c in cs), "count",
              "%s: windows measured, all rounds" % text_)


def model_figures(F, run, doc):
    """bench/model_bench: what the timer model costs and buys (the timer-model and clocks guides)."""
    recs = doc.get("records", [])
    for r in [x for x in recs if x["kind"] == "wakeups"]:
        F.add("model.wakeups.leeway%d" % r["leeway_ms"], run, r["wakeups_per_s"], "wake-ups/s",
              "%s timers spread over %d ms, %d ms of leeway, %d shards: the shard drivers' wake-ups per second" % (
                  "{:,d}".format(r["timers"]), r["spread_ms"], r["leeway_ms"], r["shards"]))
    w = [x for x in recs if x["kind"] == "wakeups"]
    if w:
        F.add("model.wakeups.early", run, sum(x["early"] for x in w), "count",
              "callbacks that ran before their deadline in the wake-up runs")
        F.add("model.wakeups.timers", run, w[0]["timers"], "count", "timers of each wake-up run")
    sizes = sorted({x["size"] for x in recs if x["kind"] == "group"})
    for n in sizes:
        g = [x for x in recs if x["kind"] == "group" and x["size"] == n]
        later = g[1:] or g  # the first call of each size pays the index's first touch
        what = "stop_group of a group of %s timer(s) with %s others pending" % (
            "{:,d}".format(n), "{:,d}".format(g[0]["pending"]))
        per, us = [x["ns_per_timer"] for x in later], [x["us"] for x in later]
        F.add("model.group.%s" % nkey(n), run, _median(per), "ns", "%s: time per timer stopped, median of the %d "
              "calls after the first" % (what, len(later)), min(per), max(per))
        F.add("model.group.%s.us" % nkey(n), run, _median(us), "µs", "%s: the call, median of the %d calls after "
              "the first" % (what, len(later)), min(us), max(us))
        F.add("model.group.%s.first_us" % nkey(n), run, g[0]["us"], "µs", "%s: the first call (the group index's "
              "first touch)" % what)
    g = [x for x in recs if x["kind"] == "group"]
    if g:
        F.add("model.group.pending", run, g[0]["pending"], "count", "the other timers pending during stop_group")
    for n in sorted({x["pending"] for x in recs if x["kind"] == "query"}):
        q = [x["ns"] for x in recs if x["kind"] == "query" and x["pending"] == n]
        F.add("model.query.%s" % nkey(n), run, _median(q), "ns", "query() of a random pending timer with %s pending, "
              "one thread, median of %d passes of 1,000,000 queries" % ("{:,d}".format(n), len(q)), min(q), max(q))
    for r in [x for x in recs if x["kind"] == "advance"]:
        F.add("model.advance", run, r["ns_per_fired"], "ns", "a manual-clock runtime: wall time of advance() per "
              "timer fired, %s timers over one simulated hour in 1 s steps" % "{:,d}".format(r["timers"]))


MODEL_LINES = [  # bench/model_bench's lines -> records
    ("wakeups", re.compile(r"wakeups: (?P<timers>\d+) timers over (?P<spread_ms>\d+) ms, leeway +(?P<leeway_ms>\d+) ms, "
                           r"(?P<shards>\d+) shards: +(?P<wakeups_per_s>[\d.]+) driver wake-ups/s .*; lateness p50 "
                           r"(?P<p50_ms>[\d.]+) ms p99 (?P<p99_ms>[\d.]+) ms max (?P<max_ms>[\d.]+) ms; early "
                           r"(?P<early>\d+)")),
    ("group", re.compile(r"group: stop_group of +(?P<size>\d+) timers \((?P<pending>\d+) others pending\): +"
                         r"(?P<us>[\d.]+) us, +(?P<ns_per_timer>[\d.]+) ns per timer")),
    ("query", re.compile(r"query: (?P<pending>\d+) pending, random ids: (?P<ns>[\d.]+) ns per query")),
    ("advance", re.compile(r"advance: (?P<timers>\d+) timers over 1 simulated hour .*: (?P<wall_s>[\d.]+) s wall, "
                           r"(?P<ns_per_fired>[\d.]+) ns per timer fired")),
]


# scripts/bench.sh probes: (workload, pending, metric, unit, larger is better, what)
PROBES_CASES = [
    ("startstop", 1000, "wall_ns_per_pair", "ns", False, "start+stop pair, 1 K pending"),
    ("startstop", 1000000, "wall_ns_per_pair", "ns", False, "start+stop pair, 1 M pending"),
    ("expiry", 1000000, "callbacks_per_s", "callbacks/s", True, "expiry, 1 M due in the same tick"),
]
PROBES_GOAL_PCT = 2.0  # issue 34: unattached probes cost at most 2%


def probes_summary(lines, rounds):
    """The A/B of scripts/bench.sh probes: per case, each build's samples
    (one per round, in round order), their medians, and how much slower the
    build with the probes is, in % (positive: slower): the median over the
    rounds of the two builds' ratio in that round (the runs of a round are
    back to back; on a machine whose speed drifts or jumps between modes --
    the expiry case runs at ~8 or ~14 M callbacks/s here, in either build --
    a round's ratio is steadier than the ratio of the two medians)."""
    out = []
    for wl, n, metric, unit, higher, what in PROBES_CASES:
        on, off = [], []
        for r in lines:
            p = r.get("params", {})
            if r["workload"] != wl or r["metric"] != metric or p.get("pending", p.get("timers")) != n:
                continue
            (off if r["peer"].endswith("-noprobes") else on).append(r["median"])
        if not on or not off or len(on) != len(off):
            continue
        mon, moff = _median(on), _median(off)
        slower = (_median([b / a if higher else a / b for a, b in zip(on, off)]) - 1) * 100
        out.append({"name": "%s.%s" % (wl, nkey(n)), "what": what, "metric": metric, "unit": unit,
                    "with_probes": on, "without_probes": off, "median_with": mon, "median_without": moff,
                    "slower_pct": round(slower, 3), "rounds": rounds,
                    "goal": "the build with unattached probes at most %g%% slower than the build without them"
                            % PROBES_GOAL_PCT,
                    "met": slower <= PROBES_GOAL_PCT})
    return out


def probes_figures(F, run, doc):
    """scripts/bench.sh probes: the USDT probes unattached against a build without them (issue 34)."""
    for c in doc.get("figures", []):
        k = "probes.%s" % c["name"]
        F.add(k + ".with", run, c["median_with"], c["unit"], "%s, the library with its USDT probes (none attached), "
              "median of %d interleaved rounds" % (c["what"], c["rounds"]), min(c["with_probes"]), max(c["with_probes"]))
        F.add(k + ".without", run, c["median_without"], c["unit"], "%s, the same commit built with "
              "-DTICKWHEEL_PROBES=OFF, median of %d interleaved rounds" % (c["what"], c["rounds"]),
              min(c["without_probes"]), max(c["without_probes"]))
        F.add(k + ".cost", run, c["slower_pct"], "%", "%s: how much slower the build with unattached probes is "
              "(negative: faster): the median of the %d rounds' ratios" % (c["what"], c["rounds"]),
              txt=("%+.1f%%" % c["slower_pct"]))
    spreads = [(max(xs) - min(xs)) / _median(xs) * 100 for c in doc.get("figures", [])
               for xs in (c["with_probes"], c["without_probes"])]
    if spreads:
        F.add("probes.spread", run, max(spreads), "%", "the largest spread (max - min over the median) of one build's "
              "rounds in one case of the probes A/B: the noise a single round carries")


def collect(raw, mode, meta, out):
    """scripts/bench.sh delay|model|probes: the data file from the programs'
    output (delay_sources, peer_tickwheel_c: JSON lines; model_bench: its
    text lines, parsed here)."""
    with open(raw, encoding="utf-8") as f:
        lines = [x.rstrip("\n") for x in f if x.strip()]
    doc = {"meta": json.loads(meta)}
    if mode == "delay":
        doc["cases"] = [json.loads(x) for x in lines]
    elif mode == "probes":
        doc["lines"] = [json.loads(x) for x in lines]
        doc["figures"] = probes_summary(doc["lines"], doc["meta"].get("rounds", 0))
    else:
        recs = []
        for x in lines:
            for kind, pat in MODEL_LINES:
                m = pat.match(x)
                if m:
                    r = {"kind": kind}
                    r.update({k: (float(v) if "." in v else int(v)) for k, v in m.groupdict().items()})
                    recs.append(r)
                    break
            else:
                if not x.startswith("group: stop_group of an unknown group"):
                    raise SystemExit("figures: --collect model: a line of model_bench not understood: %r" % x)
        doc["records"], doc["output"] = recs, lines
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")


EXTRACT = {"full": full_figures, "capi": capi_figures, "scaling": scaling_figures, "python": python_figures,
           "node": node_figures, "delay": delay_figures, "model": model_figures, "probes": probes_figures}


def goals_of(mode, run, doc):
    """The goals a run was checked against, for the development page."""
    out = []
    if mode in ("full", "capi", "scaling"):
        for g in doc.get("goals", []):
            if g.get("verdict") in ("met", "not met"):
                out.append({"run": run["id"], "goal": g["goal"], "figure": g["figure"], "verdict": g["verdict"]})
    else:
        for f in doc.get("figures", []):
            if f.get("goal") and f.get("met") is not None:
                if "slower_pct" in f:  # probes: the A/B's difference
                    figure = "%+.1f%% (%s against %s %s)" % (f["slower_pct"], number(f["median_with"], f["unit"]),
                                                             number(f["median_without"], f["unit"]), f["unit"])
                else:
                    v = f.get("best", f.get("median"))
                    figure = number(v, "×" if f["unit"] in ("x", "ratio") else "ns") + \
                        ("×" if f["unit"] in ("x", "ratio") else " ns")
                out.append({"run": run["id"], "goal": "%s: %s" % (f.get("what") or f["name"], f["goal"]),
                            "figure": figure, "verdict": "met" if f["met"] else "not met"})
    return out


def load(bench, partial):
    """(runs, docs) of the data files in bench; a missing one is an error
    unless partial."""
    runs, docs, problems = {}, {}, []
    for mode, name, command, _ in MODES:
        path = os.path.join(bench, name)
        if not os.path.exists(path):
            if not partial:
                problems.append("%s: missing (scripts/bench.sh%s writes it)" % (path, "" if mode == "full" else
                                                                               " " + mode))
            continue
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        runs[mode] = describe_run(mode, doc, command)
        runs[mode]["file"] = name
        docs[mode] = doc
    return runs, docs, problems


def build(bench, partial=False):
    """The content of figures.json, and the problems found on the way."""
    runs, docs, problems = load(bench, partial)
    F = Figures()
    goals = []
    for mode, _, _, _ in MODES:
        if mode in docs:
            EXTRACT[mode](F, runs[mode], docs[mode])
            goals += goals_of(mode, runs[mode], docs[mode])
    by_id = {r["id"]: r for r in runs.values()}
    figs = {}
    for k in sorted(F.figs):
        f = dict(F.figs[k])
        r = by_id[f["run"]]
        f.update(date=r["date"], machine=r["machine"], command=r["command"], commit=r["commit"])
        figs[k] = f
    doc = {
        "about": "Every published benchmark figure, from the data files of scripts/bench.sh's runs (docs/bench). "
                 "Written by scripts/figures.py --write (scripts/bench.sh runs it); the pages quote these figures "
                 "through <!-- fig:KEY --> markers and <!-- figtable:NAME --> tables, and the ctest docs_figures "
                 "(scripts/figures.py --check) fails on any difference.",
        "runs": {m: runs[m] for m, _, _, _ in MODES if m in runs},
        "figures": figs,
        "goals": goals,
    }
    return doc, problems


# ---- tables ---------------------------------------------------------------------------------------------
class Missing(Exception):
    pass


def md_table(header, rows, align=None):
    """align: one letter per column, l or r (default: the first left, the rest right)."""
    align = align or "l" + "r" * (len(header) - 1)
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


class Tables:
    """Each table: a function of figures.json -> Markdown, and the modes it reads."""

    def __init__(self, doc):
        self.doc = doc
        self.f = doc["figures"]

    def n(self, key, dash=None):
        f = self.f.get(key)
        if f is None:
            if dash is not None:
                return dash
            raise Missing(key)
        return number(f["value"], f["unit"])

    def has(self, key):
        return key in self.f

    def run(self, mode):
        r = self.doc["runs"].get(mode)
        if r is None:
            raise Missing("run." + mode)
        return r

    # the user pages ---------------------------------------------------------------------
    def per_language(self):
        """The pair from each language against that language's own timers."""
        rows = []
        if self.has("capi.c.pair.1k"):
            rows.append(["C", "`tw_timer_start` + `tw_timer_stop`", self.n("capi.c.pair.1k"),
                         "libuv: `uv_timer_start` + `uv_timer_stop`", self.n("capi.libuv.pair.1k"),
                         self.n("capi.c.vs_libuv.1k") + "×", "capi"])
        if self.has("capi.cxx.pair.1k"):
            rows.append(["C++", "`Runtime::start` + `Runtime::stop`", self.n("capi.cxx.pair.1k"), "libuv (as above)",
                         self.n("capi.libuv.pair.1k"), self.n("capi.cxx.vs_libuv.1k") + "×", "capi"])
        if self.has("full.startstop.cxx.vs_asio1.1k"):
            rows.append(["C++", "`Runtime::start` + `Runtime::stop`", self.n("full.startstop.cxx.1k"),
                         "Boost.Asio: `steady_timer::async_wait` + `cancel`", self.n("full.startstop.asio1.1k"),
                         self.n("full.startstop.cxx.vs_asio1.1k") + "×", "full"])
        if self.has("python.pair"):
            rows.append(["Python", "`rt.start(10.0, fn).stop()`", self.n("python.pair"),
                         "asyncio: `loop.call_later(10.0, fn).cancel()`", self.n("python.asyncio_pair"),
                         self.n("python.pair.vs_asyncio") + "×", "python"])
        if self.has("node.pair"):
            rows.append(["Node.js", "`rt.start(10000, f).stop()`", self.n("node.pair"),
                         "`clearTimeout(setTimeout(f, 10000))`", self.n("node.settimeout_pair"),
                         self.n("node.ratio") + "×", "node"])
        return md_table(["from", "tickwheel's call", "ns per pair", "the language's own timers", "ns per pair",
                         "tickwheel ÷ own", "run"], rows, "llrlrrl")

    def capi_by_pending(self):
        rows = []
        for n in ("1k", "100k", "1m"):
            if not self.has("capi.c.pair." + n):
                continue
            label = {"1k": "1,000", "100k": "100,000", "1m": "1,000,000"}[n]
            rows.append([label, "**%s**" % self.n("capi.c.pair." + n), self.n("capi.cxx.pair." + n, "–"),
                         self.n("capi.libuv.pair." + n), self.n("capi.c.vs_libuv." + n) + "×"])
        return md_table(["timers pending", "C ABI, ns per pair", "C++ API, ns per pair", "libuv, ns per pair",
                         "C ABI ÷ libuv"], rows)

    def _peers(self, prefix, suffixes):
        """(peer, key part) of the peers with a figure prefix.<key>.<suffix> for some suffix, in report order."""
        out = []
        for p in report.PEERS:
            k = PEER_KEY.get(p)
            if k and any(self.has("%s.%s.%s" % (prefix, k, s)) for s in suffixes):
                out.append((p, k))
        return out

    def _pending(self, prefix):
        """The pending counts of the suite (1 K, 100 K, 1 M, 10 M) with figures prefix.<peer>.<n>."""
        found = {k.rsplit(".", 1)[1] for k in self.f if k.startswith(prefix + ".")}
        return [nkey(n) for n in report.STARTSTOP_N if nkey(n) in found]  # 1 K .. 10 M: the suite's own sizes

    @staticmethod
    def _bold(cells):
        return ["**%s**" % c if c != "–" else c for c in cells]

    def startstop_vs_pending(self):
        ns = self._pending("full.startstop")
        rows = []
        for p, k in self._peers("full.startstop", ns):
            cells = [self.n("full.startstop.%s.%s" % (k, n), "–") for n in ns]
            if p in ("tickwheel", "tickwheel-capi"):
                cells = self._bold(cells)
            rows.append([PEER_NAME[p]] + cells + [self.n("full.startstop.%s.growth" % k, "–") + "×"])
        label = {n: n.upper().replace("K", " K").replace("M", " M") for n in ns}
        return md_table(["ns per start+stop pair", "%s pending" % label[ns[0]]] + [label[n] for n in ns[1:]] +
                        ["growth %s → %s" % (label[ns[0]], label[ns[-1]])], rows)

    def memory(self):
        ns = self._pending("full.memory")
        rows = []
        for p, k in self._peers("full.memory", ns):
            cells = [self.n("full.memory.%s.%s" % (k, n), "–") for n in ns]
            if p in ("tickwheel", "tickwheel-capi"):
                cells = self._bold(cells)
            rows.append([PEER_NAME[p]] + cells)
        label = {n: n.upper().replace("K", " K").replace("M", " M") for n in ns}
        return md_table(["bytes per pending timer", "%s pending" % label[ns[0]]] + [label[n] for n in ns[1:]], rows)

    def scaling_producers(self):
        ts = sorted({int(k.rsplit(".", 1)[1]) for k in self.f if k.startswith("scaling.mt.")})
        rows = []
        for p, k in self._peers("scaling.mt", [str(t) for t in ts]):
            cells = [self.n("scaling.mt.%s.%d" % (k, t), "–") for t in ts]
            if p == "tickwheel-capi":
                cells = ["**%s**" % c for c in cells]
            rows.append([PEER_NAME[p]] + cells)
        return md_table(["start+stop pairs per second"] + ["%d thread%s" % (t, "" if t == 1 else "s") for t in ts],
                        rows)

    def scaling_expiry(self):
        keys = sorted({tuple(int(x) for x in re.match(r"scaling\.expiry\.p(\d+)w(\d+)\.", k).groups())
                       for k in self.f if re.match(r"scaling\.expiry\.p\d+w\d+\.", k)})
        rows = []
        for p, w in keys:
            b = "scaling.expiry.p%dw%d." % (p, w)
            rows.append(["%d" % p, "%d" % w, "**%s**" % self.n(b + "rate"), self.n(b + "driver", "–"),
                         self.n(b + "process", "–")])
        return md_table(["started from threads", "workers", "callbacks per second", "drivers' CPU per timer, ns",
                         "process CPU per callback, ns"], rows)

    def expiry_peers(self):
        rows = []
        for p in report.PEERS:
            k = "full.expiry.%s" % PEER_KEY.get(p, p)
            if self.has(k):
                c = self.n(k)
                rows.append([PEER_NAME[p], "**%s**" % c if p in ("tickwheel", "tickwheel-capi") else c])
        return md_table(["1 M due timers delivered", "callbacks per second"], rows)

    def lateness(self):
        rows = []
        order = ["cxx_1ms", "cxx_100us"] + [PEER_KEY[p] for p in report.PEERS if p != "tickwheel"]
        found = {k.split(".")[2] for k in self.f if k.startswith("full.lateness.") and ".100k." in k}
        cfgs = [c for c in order if c in found] + sorted(found - set(order))
        names = {v: PEER_NAME[p] for p, v in PEER_KEY.items() if p in PEER_NAME}
        names.update({"cxx_1ms": "tickwheel, 1 ms tick (the default)", "cxx_100us": "tickwheel, 100 µs tick"})
        for c in cfgs:
            b = "full.lateness.%s.100k." % c
            rows.append([names.get(c, c), self.n(b + "p50"), self.n(b + "p99"), self.n(b + "p999"),
                         self.n(b + "early", "0")])
        return md_table(["100,000 timers/s", "p50, µs late", "p99, µs", "p99.9, µs", "fired early"], rows)

    def idle(self):
        rows = []
        for p in report.PEERS:
            k = "full.idle.%s" % PEER_KEY.get(p, p)
            if self.has(k):
                rows.append([PEER_NAME[p], self.n(k) + "%"])
        return md_table(["1 M timers pending, none due", "CPU, % of one core"], rows)

    def runs(self, commits=False):
        """The runs: command, what, date, machine (and, for the development
        page, the commit: the user pages name none)."""
        what = {"full": "the full suite", "capi": "C and C++ against libuv, interleaved rounds",
                "scaling": "threads and cores", "python": "per call from Python", "node": "per call from Node.js",
                "delay": "what can delay a timer", "model": "leeway, groups, query, manual clock",
                "probes": "USDT probes unattached against a build without them"}
        rows = []
        for mode, _, _, _ in MODES:
            r = self.doc["runs"].get(mode)
            if not r:
                continue
            m = r["machine"]
            c = (r.get("commit") or "").split(" ", 1)
            rows.append(["`%s`" % r["command"], what[mode], r["date"][:16].replace("T", " ") + " UTC",
                         "%s × %s%s" % (m.get("cores") or "?", m.get("cpu") or "?",
                                        ", Linux %s" % m["kernel"] if m.get("kernel") else "")] +
                        (["`%s`%s" % (c[0], " " + c[1] if len(c) > 1 else "") if c[0] else "not recorded"]
                         if commits else []) + ["`%s`" % r["id"]])
        return md_table(["command", "what", "date", "machine (CPUs, model, kernel)"] + (["commit"] if commits else []) +
                        ["run"], rows, "l" * (6 if commits else 5))

    def runs_dev(self):
        return self.runs(commits=True)

    def delay_sources(self):
        """The concepts guide's "What can delay a timer": bench/delay_sources."""
        w = int(self.f["delay.workers"]["value"]) if self.has("delay.workers") else None
        if w is None:
            raise Missing("delay.workers")

        def ms(k):
            return self.n(k) + " ms"
        rows = [["0 / 1 blocking callbacks", "%s / %s late" % (self.n("delay.blocking.0"), ms("delay.blocking.1"))],
                ["%d blocking callbacks (= workers)" % w, ms("delay.blocking.%d" % w) + " late"],
                ["%d blocking callbacks" % (2 * w), ms("delay.blocking.%d" % (2 * w)) + " late"]]
        for how, label, tail in [
                ("frozen", "a caller held in a signal handler for 400 ms (%s times)",
                 "%s of %s held the periodic timer back more than 100 ms; largest gap %s"),
                ("nice19", "a caller at nice 19 pinned beside a spinning thread (%s × 400 ms)",
                 "%s of %s; largest gap %s"),
                ("idle", "a caller at `SCHED_IDLE`, the same (%s × 400 ms)", "%s of %s; largest gap %s")]:
            n = self.n("delay.%s.windows" % how)
            rows.append([label % n, tail % (self.n("delay.%s.held" % how), n, ms("delay.%s.gap" % how))])
        return md_table(["case", "measured"], rows, "ll")

    # the development page -------------------------------------------------------------------
    def goals(self):
        ids = {r["id"]: r for r in self.doc["runs"].values()}
        rows = [["`%s`" % g["run"], g["goal"].replace("|", "\\|"), g["figure"].replace("|", "\\|"),
                 "**%s**" % g["verdict"]] for g in self.doc.get("goals", []) if g["run"] in ids]
        return md_table(["run", "goal", "figure", "verdict"], rows, "llll")


TABLES = {  # name -> (method, the modes whose runs it shows; a plot beside it must be of one of them)
    "per-language": ("per_language", ["capi", "full", "python", "node"]),
    "capi-by-pending": ("capi_by_pending", ["capi"]),
    "startstop-vs-pending": ("startstop_vs_pending", ["full"]),
    "memory": ("memory", ["full"]),
    "scaling-producers": ("scaling_producers", ["scaling"]),
    "scaling-expiry": ("scaling_expiry", ["scaling"]),
    "expiry-peers": ("expiry_peers", ["full"]),
    "lateness": ("lateness", ["full"]),
    "idle": ("idle", ["full"]),
    "delay-sources": ("delay_sources", ["delay"]),
    "runs": ("runs", ["full", "capi", "scaling", "python", "node", "delay", "model", "probes"]),
    "runs-dev": ("runs_dev", ["full", "capi", "scaling", "python", "node", "delay", "model", "probes"]),
    "goals": ("goals", ["full", "capi", "scaling", "python", "node", "delay", "model", "probes"]),
}


def run_field(doc, key):
    """run.<mode>.<field>: a run's id, date (YYYY-MM-DD), datetime, command, commit, machine, cpu, cores, kernel."""
    _, mode, field = key.split(".", 2)
    r = doc["runs"].get(mode)
    if r is None:
        return None
    m = r["machine"]
    return {"id": r["id"], "date": r["date"][:10], "datetime": r["date"][:16].replace("T", " ") + " UTC",
            "command": r["command"], "commit": r["commit"] or "not recorded",
            "machine": "%s × %s" % (m.get("cores") or "?", m.get("cpu") or "?"),
            "cpu": m.get("cpu"), "cores": str(m.get("cores")), "kernel": m.get("kernel"),
            "duration": None if r.get("duration_s") is None else "%d s" % r["duration_s"]}.get(field)


# ---- the pages ---------------------------------------------------------------------------------------------
INLINE = re.compile(r"<!-- fig:([A-Za-z0-9_.\-]+)(?:\|(num))? -->(.*?)<!-- /fig -->", re.S)
INLINE_OPEN = re.compile(r"<!-- fig:")
BLOCK = re.compile(r"^<!-- figtable:([a-z0-9\-]+) -->\n(.*?)^<!-- /figtable -->$", re.S | re.M)
BLOCK_OPEN = re.compile(r"<!-- figtable:")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+\.png)\)")
HEADING = re.compile(r"^#{1,6} ", re.M)


def pages(root):
    out = ["README.md"]
    site = os.path.join(root, "docs", "site")
    for d, _, files in os.walk(site):
        out += [os.path.relpath(os.path.join(d, f), root) for f in files if f.endswith(".md")]
    return sorted(p for p in out if os.path.exists(os.path.join(root, p)))


def line_of(s, at):
    return s.count("\n", 0, at) + 1


def mask_code(s):
    """s with its fenced code blocks and inline code spans blanked out (same
    length, newlines kept): markers shown as examples there are not markers."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    s = re.sub(r"^(```|~~~).*?^\1[ \t]*$", blank, s, flags=re.S | re.M)
    return re.sub(r"`[^`\n]+`", blank, s)


def sub_outside_code(pattern, fn, s):
    """pattern.sub(fn, s), matching only outside code (mask_code)."""
    out, at = [], 0
    for m in pattern.finditer(mask_code(s)):
        out.append(s[at:m.start()])
        out.append(fn(pattern.match(s, m.start()) or m))
        at = m.end()
    return "".join(out) + s[at:]


def render_page(path, s, doc, problems):
    """The page with every marked figure and table rendered from doc; each
    problem found appended to problems as 'path:line: ...'."""
    def inline(m):
        key, fmt = m.group(1), m.group(2)
        if key.startswith("run."):
            val = run_field(doc, key)
        else:
            f = doc["figures"].get(key)
            val = None if f is None else (number(f["value"], f["unit"]) if fmt == "num" else f["text"])
        if val is None:
            problems.append("%s:%d: no figure %s in figures.json" % (path, line_of(s, m.start()), key))
            return m.group(0)
        return "<!-- fig:%s%s -->%s<!-- /fig -->" % (key, "|" + fmt if fmt else "", val)

    def block(m):
        name = m.group(1)
        if name not in TABLES:
            problems.append("%s:%d: no table %s (scripts/figures.py TABLES)" % (path, line_of(s, m.start()), name))
            return m.group(0)
        try:
            t = getattr(Tables(doc), TABLES[name][0])()
        except Missing as e:
            problems.append("%s:%d: table %s: no figure %s in figures.json" % (path, line_of(s, m.start()), name, e))
            return m.group(0)
        return "<!-- figtable:%s -->\n\n%s\n\n<!-- /figtable -->" % (name, t)

    masked = mask_code(s)
    for m in re.finditer(r"^[ \t>]*<!-- fig:", s, re.M):
        if masked[m.end() - 9:m.end()] != "<!-- fig:":
            continue  # inside code
        problems.append("%s:%d: a figure marker starts the line (CommonMark reads it as an HTML block): "
                        "put text before it" % (path, line_of(s, m.start())))
    n_open = len(INLINE_OPEN.findall(masked))
    if n_open != len(INLINE.findall(masked)):
        problems.append("%s: %d '<!-- fig:' markers, %d well-formed '<!-- fig:KEY -->...<!-- /fig -->'" % (
            path, n_open, len(INLINE.findall(masked))))
    if len(BLOCK_OPEN.findall(masked)) != len(BLOCK.findall(masked)):
        problems.append("%s: a '<!-- figtable:NAME -->' without its '<!-- /figtable -->' on a line of its own" % path)
    s = sub_outside_code(BLOCK, block, s)
    return sub_outside_code(INLINE, inline, s)


def bare_figures(path, s):
    """Figures a user page quotes outside a marker: a number with a unit of
    measured cost (ns, ×, M pairs/s, M callbacks/s, bytes per timer)."""
    out = []
    t = BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), s)
    t = INLINE.sub("FIG", t)
    t = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), t, flags=re.S)
    t = re.sub(r"`[^`\n]*`", "CODE", t)
    t = re.sub(r"<!--.*?-->", lambda m: "\n" * m.group(0).count("\n"), t, flags=re.S)
    # (not an exponent's digits, 2^60 ns, nor a product, 5 × 400 ms)
    pat = re.compile(r"(?<![\^\d.,])\d[\d,.]*(?:\s|&nbsp;)?(?:ns\b|×(?!\s*\d)|M (?:pairs|callbacks)/s|"
                     r"(?:B|bytes) per (?:pending )?timer)")
    for m in pat.finditer(t):
        out.append("%s:%d: '%s' is a figure outside a marker: quote it with <!-- fig:KEY -->...<!-- /fig --> "
                   "(scripts/figures.py --list)" % (path, line_of(t, m.start()), m.group(0)))
    return out


def plot_problems(root, path, s, doc):
    """Every plot of docs/bench on the page: stamped with the current run of
    its mode, and of the run of the table above it in the same section."""
    out = []
    bench = os.path.realpath(os.path.join(root, "docs", "bench"))
    current = {r["id"]: m for m, r in doc["runs"].items()}
    for m in IMAGE.finditer(s):
        png = os.path.realpath(os.path.join(root, os.path.dirname(path), m.group(1)))
        if os.path.dirname(png) != bench:
            continue
        where = "%s:%d: %s" % (path, line_of(s, m.start()), os.path.basename(png))
        if not os.path.exists(png):
            out.append("%s: no such plot" % where)
            continue
        rid = report.png_run(png)
        if rid is None:
            out.append("%s: not stamped with a run id (drawn before scripts/figures.py; regenerate it: "
                       "bench/suite/report.py --results ...)" % where)
            continue
        mode = rid.split("-", 1)[0]
        if current.get(rid) != mode:
            r = doc["runs"].get(mode)
            out.append("%s: drawn from run %s, but the %s figures come from run %s: regenerate the plots with "
                       "the tables (bench/suite/%s --results docs/bench/%s --out docs/bench)" % (
                           where, rid, mode, r["id"] if r else "(none)",
                           "scaling_report.py" if mode == "scaling" else "report.py" + (
                               " --capi" if mode == "capi" else ""), r["file"] if r else "?"))
            continue
        # the table above it, in the same section
        before = s[:m.start()]
        h = [x.end() for x in HEADING.finditer(before)]
        section = before[h[-1]:] if h else before
        tables = BLOCK.findall(section)
        if tables:
            name = tables[-1][0]
            modes = TABLES.get(name, (None, []))[1]
            if mode not in modes:
                out.append("%s: drawn from run %s (%s) beside the table %s of the %s run(s): a plot must come "
                           "from the run of the table beside it" % (where, rid, mode, name, "/".join(modes)))
    return out


def report_problems(root, bench, docs_present, doc):
    """The generated reports re-rendered from their data files (no plots):
    any difference is a hand edit or a stale report."""
    out = []
    suite = os.path.join(os.path.dirname(HERE), "bench", "suite")
    with tempfile.TemporaryDirectory() as tmp:
        for mode, name, _, reports in MODES:
            if mode not in docs_present or not reports:
                continue
            prog = "scaling_report.py" if mode == "scaling" else "report.py"
            cmd = [sys.executable, os.path.join(suite, prog), "--results", os.path.join(bench, name), "--out", tmp,
                   "--no-plots"] + (["--capi"] if mode == "capi" else [])
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                out.append("%s: re-rendering %s failed: %s" % (os.path.join(bench, name), reports[0], p.stderr[-500:]))
                continue
            for rep in reports:
                mine = os.path.join(bench, rep)
                if not os.path.exists(mine):
                    out.append("%s: missing (scripts/bench.sh writes it)" % mine)
                    continue
                with open(mine, encoding="utf-8") as f:
                    a = f.read().splitlines()
                with open(os.path.join(tmp, rep), encoding="utf-8") as f:
                    b = f.read().splitlines()
                if a != b:
                    i = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
                    out.append("%s:%d: differs from what %s renders from %s (a hand edit, or a report older than its "
                               "data): has %r, expected %r" % (
                                   os.path.relpath(mine, root), i + 1, prog, name, (a[i] if i < len(a) else "")[:120],
                                   (b[i] if i < len(b) else "")[:120]))
            # the report's own plots
            s = open(os.path.join(bench, reports[0]), encoding="utf-8").read()
            out += plot_problems(root, os.path.relpath(os.path.join(bench, reports[0]), root), s, doc)
    return out


def compare(old, new):
    """Differences between figures.json on disk and the one the data give."""
    out = []
    for section in ("runs", "figures"):
        a, b = old.get(section, {}), new.get(section, {})
        for k in sorted(set(a) | set(b)):
            if k not in b:
                out.append("figures.json: %s %s is not in the data files any more" % (section, k))
            elif k not in a:
                out.append("figures.json: %s %s missing (the data files have it)" % (section, k))
            elif a[k] != b[k]:
                diff = [f for f in sorted(set(a[k]) | set(b[k])) if a[k].get(f) != b[k].get(f)]
                out.append("figures.json: %s %s differs from the data files in %s (%s: has %r, the data give %r)" % (
                    section, k, ", ".join(diff), diff[0], a[k].get(diff[0]), b[k].get(diff[0])))
    if old.get("goals") != new.get("goals"):
        out.append("figures.json: the goals differ from the data files'")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true")
    g.add_argument("--check", action="store_true")
    g.add_argument("--list", action="store_true")
    g.add_argument("--stamp", metavar="FILE")
    g.add_argument("--collect", metavar="RAW")
    ap.add_argument("--meta")
    ap.add_argument("--out")
    ap.add_argument("--mode", choices=[m for m, _, _, _ in MODES])
    ap.add_argument("--command")
    ap.add_argument("--root", default=os.path.dirname(HERE))
    ap.add_argument("--bench")
    ap.add_argument("--figures")
    ap.add_argument("--partial", action="store_true")
    ap.add_argument("--allow-quick", action="store_true")
    ap.add_argument("--no-pages", action="store_true")
    a = ap.parse_args()
    if a.stamp:
        if not (a.mode and a.command):
            ap.error("--stamp needs --mode and --command")
        stamp(a.stamp, a.mode, a.command)
        return 0
    if a.collect:
        if not (a.mode in ("delay", "model", "probes") and a.meta and a.out):
            ap.error("--collect needs --mode delay|model|probes, --meta and --out")
        collect(a.collect, a.mode, a.meta, a.out)
        return 0
    root = os.path.abspath(a.root)
    bench = os.path.abspath(a.bench or os.path.join(root, "docs", "bench"))
    fig_path = os.path.abspath(a.figures or os.path.join(bench, "figures.json"))
    new, problems = build(bench, a.partial)
    if not a.allow_quick:
        problems += ["%s: run %s is a --quick run (small sizes, 2 repetitions): its figures are not "
                     "publishable" % (os.path.join(bench, r["file"]), r["id"]) for r in new["runs"].values()
                     if r["quick"]]
    if a.list:
        for k, f in new["figures"].items():
            print("%-40s %-22s %s" % (k, f["text"], f["run"]))
        return 0
    if a.write:
        with open(fig_path, "w", encoding="utf-8") as f:
            json.dump(new, f, indent=1, ensure_ascii=False)
            f.write("\n")
        print("figures: %d figures of %d runs -> %s" % (len(new["figures"]), len(new["runs"]), fig_path),
              file=sys.stderr)
        old = new
    else:
        try:
            with open(fig_path, encoding="utf-8") as f:
                old = json.load(f)
        except (OSError, ValueError) as e:
            problems.append("%s: %s (scripts/figures.py --write writes it)" % (fig_path, e))
            old = None
        if old is not None:
            problems += compare(old, new)
    if not a.no_pages and old is not None:
        written = 0
        for page in pages(root):
            path = os.path.join(root, page)
            with open(path, encoding="utf-8") as f:
                s = f.read()
            mine = []
            out = render_page(page, s, old, mine)
            problems += mine
            if out != s:
                if a.write:
                    with open(path, "w", encoding="utf-8") as f:
                        f.write(out)
                    written += 1
                else:
                    a_lines, b_lines = s.splitlines(), out.splitlines()
                    for i, (x, y) in enumerate(zip(a_lines, b_lines)):
                        if x != y:
                            problems.append("%s:%d: differs from figures.json: has %r, figures.json gives %r "
                                            "(scripts/figures.py --write)" % (page, i + 1, x.strip()[:160],
                                                                              y.strip()[:160]))
                            break
                    else:
                        problems.append("%s: differs from figures.json (scripts/figures.py --write)" % page)
            if user_page(page):
                problems += bare_figures(page, out)
            problems += plot_problems(root, page, out, old)
        if a.write:
            print("figures: %d page(s) rewritten" % written, file=sys.stderr)
        problems += report_problems(root, bench, set(new["runs"]), old)
    for p in problems:
        print("figures: " + p, file=sys.stderr)
    if problems:
        print("figures: %d problem(s)%s" % (len(problems), "" if a.write else "; the data files are in %s, "
                                           "scripts/figures.py --write rebuilds figures.json and the pages" % bench),
              file=sys.stderr)
        return 1
    if a.check:
        print("figures: %d figures of %d runs, %d pages: consistent" % (
            len(new["figures"]), len(new["runs"]), len(pages(root))), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
