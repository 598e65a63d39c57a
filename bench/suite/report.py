#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Turns the benchmark suite's raw JSON lines into docs/bench/:

  results.json   {"meta": {...}, "environment": {...}, "goals": [...],
                 "results": [one object per (run, metric)]}
  README.md      the report for users: the run, the machine and package
                 versions, one table per workload (median [min-max] and
                 ratios against tickwheel) and the plots. The goals (met /
                 not met) stay in results.json; the development page
                 docs/site/design/performance.md shows them (scripts/figures.py)
  *.png          plots drawn with gnuplot (pngcairo), each stamped with the
                 run's id (a PNG tEXt chunk "tickwheel-run", read back by
                 scripts/figures.py --check: a plot must come from the run of
                 the tables beside it)

Standard library only. Called by scripts/bench.sh:
  report.py --raw <json lines> --meta <meta json> --out docs/bench
Re-render from a previous results.json (the plots too, from the same data):
  report.py --results docs/bench/results.json --out docs/bench
--no-plots renders the Markdown only (as if the plots had been drawn):
scripts/figures.py --check compares it with the committed report.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import struct
import subprocess
import sys
import zlib

PEERS = ["tickwheel", "tickwheel-capi", "tickwheel-wheel", "asio-1t", "asio-2t", "libuv", "libevent", "dpdk-timer", "mutex-map",
         "mutex-map-2w"]
# scripts/bench.sh's program -> peer name (meta["unavailable"] is keyed by program)
PROGRAM_PEER = {"peer_event": "libevent", "peer_dpdk": "dpdk-timer", "peer_uv": "libuv", "peer_asio": "asio-1t"}
PEER_TEXT = {
    "tickwheel": "tickwheel runtime (C++ API, static library)",
    "tickwheel-capi": "tickwheel runtime through its C ABI (tickwheel.h) and the shared library libtickwheel.so.1, "
                      "as C, Python, Node and Rust users drive it",
    "tickwheel-wheel": "tickwheel's single-shard wheel, used directly",
    "asio-1t": "Boost.Asio steady_timer, io_context run by 1 thread",
    "asio-2t": "Boost.Asio steady_timer, io_context run by 2 threads",
    "libuv": "libuv timers, one loop thread",
    "libevent": "libevent 2.1 with evthread_use_pthreads(): callers add/delete, one loop thread dispatches",
    "dpdk-timer": "DPDK rte_timer: callers reset/stop on one manager lcore's list, which polls "
                  "rte_timer_manage() every 1 ms (EAL without NIC or hugepages)",
    "mutex-map": "mutex + std::map + condition variable, 1 worker",
    "mutex-map-2w": "mutex + std::map + condition variable, 2 workers",
    "python-binding": "Python binding (bindings/python): rt.start() + Timer.stop()",
    "python-ctypes": "bare ctypes: tw_timer_start() + tw_timer_stop()",
    "python-binding-batch": "Python binding, batch calls: rt.start_many() + rt.stop_many(), 64 pairs per call",
}
ASIO = ["asio-1t", "asio-2t"]
STARTSTOP_N = [1000, 100000, 1000000, 10000000]


# ---- the run's id, and the plots stamped with it ---------------------------------------------
def utc(ts, fmt="%Y-%m-%d %H:%M UTC"):
    return datetime.datetime.fromtimestamp(int(ts or 0), datetime.timezone.utc).strftime(fmt)


def run_id(mode, started_unix):
    """The id of one run of scripts/bench.sh: its mode (full, capi, scaling,
    python, node) and the second it started, e.g. full-20261124T220442Z.
    scripts/figures.py computes the same from each data file."""
    return "%s-%s" % (mode, utc(started_unix, "%Y%m%dT%H%M%SZ"))


RUN_ID = None       # set by main(): every plot drawn is stamped with it
DRAW_PLOTS = True   # --no-plots: the Markdown only, every plot taken as drawn
PNG_KEY = b"tickwheel-run"


def png_chunks(data):
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    at = 8
    while at + 8 <= len(data):
        n, kind = struct.unpack(">I4s", data[at:at + 8])
        yield at, kind, data[at + 8:at + 8 + n]
        at += 12 + n


def png_run(path):
    """The run id a plot was stamped with (None: no stamp)."""
    with open(path, "rb") as f:
        data = f.read()
    for _, kind, body in png_chunks(data):
        if kind == b"tEXt" and body.startswith(PNG_KEY + b"\0"):
            return body[len(PNG_KEY) + 1:].decode("latin-1")
    return None


def stamp_png(path, rid):
    """Writes rid into the PNG as a tEXt chunk "tickwheel-run" (replacing one
    there), before IEND."""
    with open(path, "rb") as f:
        data = f.read()
    out = bytearray(data[:8])
    for at, kind, body in png_chunks(data):
        if kind == b"tEXt" and body.startswith(PNG_KEY + b"\0"):
            continue
        if kind == b"IEND":
            text = PNG_KEY + b"\0" + rid.encode("latin-1")
            out += struct.pack(">I", len(text)) + b"tEXt" + text + struct.pack(">I", zlib.crc32(b"tEXt" + text))
        out += data[at:at + 12 + len(body)]
    with open(path, "wb") as f:
        f.write(out)


# ---- loading and looking up ------------------------------------------------------------
class Results:
    def __init__(self, records):
        self.records = records

    def get(self, workload, peer, metric, **params):
        for r in self.records:
            if r["workload"] == workload and r["peer"] == peer and r["metric"] == metric and all(
                    r["params"].get(k) == v for k, v in params.items()):
                return r
        return None

    def values(self, workload, key):
        return sorted({r["params"][key] for r in self.records if r["workload"] == workload and key in r["params"]})

    def peers(self, workload):
        found = {r["peer"] for r in self.records if r["workload"] == workload}
        return [p for p in PEERS if p in found] + sorted(found - set(PEERS))


# ---- formatting -----------------------------------------------------------------------------
def num(x, digits=3):
    if x is None:
        return "–"
    ax = abs(x)
    if ax >= 1e9:
        return "%.*g G" % (digits, x / 1e9)
    if ax >= 1e6:
        return "%.*g M" % (digits, x / 1e6)
    if ax >= 1000:
        return "%.0f" % x
    if ax >= 100:
        return "%.0f" % x
    if ax >= 10:
        return "%.1f" % x
    if ax >= 1:
        return "%.2f" % x
    if ax == 0:
        return "0"
    return "%.2g" % x


def cell(r, scale=1.0, bold=False):
    if r is None:
        return "n/a"
    m = num(r["median"] * scale)
    if bold:
        m = "**%s**" % m
    if r.get("reps", 1) > 1 and r["min"] != r["max"]:
        return "%s [%s–%s]" % (m, num(r["min"] * scale), num(r["max"] * scale))
    return m


def ratio(a, b):
    """a / b of two records' medians, as text."""
    if a is None or b is None or not b["median"]:
        return "n/a"
    q = a["median"] / b["median"]
    return ("%.1f×" if q >= 0.95 else "%.2g×") % q


def ratio_value(a, b):
    if a is None or b is None or not b["median"]:
        return None
    return a["median"] / b["median"]


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        out.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(out) + "\n"


def short_n(n):
    n = int(n)
    if n >= 1000000 and n % 1000000 == 0:
        return "%dM" % (n // 1000000)
    if n >= 1000 and n % 1000 == 0:
        return "%dK" % (n // 1000)
    return str(n)


# ---- environment ----------------------------------------------------------------------------
def git_commit():
    """HEAD's short hash, "(with uncommitted changes)" where the tree differs
    from it outside docs/ (the suite's own output lands in docs/bench)."""
    here = os.path.dirname(os.path.abspath(__file__))
    head = sh("git -C '%s' rev-parse --short HEAD 2>/dev/null" % here)
    if not head:
        return None
    dirty = sh("git -C '%s' status --porcelain -- ':/' ':(exclude,top)docs' 2>/dev/null" % here)
    return head + (" (with uncommitted changes)" if dirty else "")


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:  # noqa: BLE001
        return ""


def environment():
    cpu = ""
    mem = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = "%.1f GiB" % (int(line.split()[1]) / 1024 / 1024)
                break
    except OSError:
        pass
    pkgs = {}
    for p in ["libboost-dev", "libboost1.74-dev", "libuv1-dev", "libevent-dev", "dpdk-dev", "libdpdk-dev",
              "libtbb-dev", "libconcurrentqueue-dev",
              "libbenchmark-dev", "gnuplot-nox", "python3", "g++", "cmake"]:
        v = sh("dpkg-query -W -f='${Version}' %s 2>/dev/null" % p)
        if v:
            pkgs[p] = v
    return {
        "nproc": os.cpu_count(),
        "cpu_model": cpu,
        "memory": mem,
        "kernel": platform.release(),
        "compiler": sh("g++ --version | head -1"),
        "packages": pkgs,
        "git": git_commit(),
    }


# ---- plots (gnuplot) --------------------------------------------------------------------------
def gnuplot(script, out_dir, png=None):
    """Runs the script (it writes png into out_dir) and stamps png with
    RUN_ID; with DRAW_PLOTS off, draws nothing and answers as if drawn."""
    if not DRAW_PLOTS:
        return True
    if RUN_ID:  # the run, small, in the bottom right corner
        script = script.replace("\nset title ", "\nset label 'run %s' at screen 0.99, screen 0.015 right font ',8' "
                                "textcolor rgb '#777777'\nset title " % RUN_ID, 1)
    if not shutil.which("gnuplot"):
        print("report: gnuplot not found, no plots", file=sys.stderr)
        return False
    p = subprocess.run(["gnuplot"], input=script, text=True, cwd=out_dir, capture_output=True)
    if p.returncode != 0:
        print("report: gnuplot failed:\n" + p.stderr, file=sys.stderr)
        return False
    if png and RUN_ID:
        stamp_png(os.path.join(out_dir, png), RUN_ID)
    return True


def datablock(name, rows):
    return "$%s << EOD\n%s\nEOD\n" % (name, "\n".join(" ".join(str(x) for x in r) for r in rows) or "nan nan nan nan")


def gp_id(s):
    return "".join(c if c.isalnum() else "_" for c in s)


def plot_lines(out_dir, png, title, xlabel, ylabel, series, logx=True, logy=True, xtics=None):
    """series: list of (label, [(x, median, min, max)])"""
    series = [(label, pts) for label, pts in series if pts]
    if not series:
        return None
    s = "set terminal pngcairo size 900,560 font ',10'\nset output '%s'\n" % png
    s += "set title '%s'\nset xlabel '%s'\nset ylabel '%s'\nset grid\nset key outside right top\n" % (title, xlabel, ylabel)
    xs = [pt[0] for _, pts in series for pt in pts]
    if logx:
        s += "set logscale x\nset format x '%%.0s%%c'\nset xrange [%g:%g]\n" % (min(xs) / 1.6, max(xs) * 1.6)
    else:
        s += "set xrange [%g:%g]\n" % (min(xs) - 0.3, max(xs) + 0.3)
    if logy:
        s += "set logscale y\nset format y '%.0s%c'\n"
    else:
        s += "set yrange [0:*]\n"
    if xtics:
        s += "set xtics (%s)\n" % ", ".join("'%s' %s" % (lab, x) for lab, x in xtics)
    for label, pts in series:
        s += datablock(gp_id(label), pts)
    s += "plot " + ", \\\n     ".join(
        "$%s using 1:2:3:4 with yerrorlines lw 2 title '%s'" % (gp_id(label), label) for label, _ in series) + "\n"
    return png if gnuplot(s, out_dir, png) else None


def plot_bars(out_dir, png, title, ylabel, bars, logy=False):
    """bars: list of (label, median, min, max)"""
    bars = [b for b in bars if b[1] is not None]
    if not bars:
        return None
    s = "set terminal pngcairo size 900,480 font ',10'\nset output '%s'\n" % png
    s += "set title '%s'\nset ylabel '%s'\nset grid y\nset style fill solid 0.6\nset boxwidth 0.6\n" % (title, ylabel)
    s += "set xtics rotate by -25\nunset key\nset yrange [%s:*]\nset xrange [-0.6:%g]\n" % (
        "1" if logy else "0", len(bars) - 0.4)
    if logy:
        s += "set logscale y\n"
    s += datablock("bars", [(i, b[1], b[2], b[3], '"%s"' % b[0]) for i, b in enumerate(bars)])
    # 5 columns: x y ylow yhigh xdelta (with 4, gnuplot reads the 4th as the box's half-width)
    s += "plot $bars using 1:2:3:4:(0.3):xtic(5) with boxerrorbars lc rgb '#4472c4'\n"
    return png if gnuplot(s, out_dir, png) else None


# Issue 21 states its start+stop goals as tickwheel through the C ABI and
# the shared library against libuv in the same run: at most this many times
# libuv's wall ns per pair, per pending count.
CAPI_VS_LIBUV = {1000: 1.5, 100000: 0.5, 1000000: 0.4}
CAPI_MT2_PAIRS = 8e6
# bench/expiry_probe's figures, and issue 21's expiry goals on 2 cores (1 M
# due in the same millisecond, one producer, every worker)
PROBE_FIGURES = [("callbacks_per_s", "callbacks/s"), ("driver_cpu_ns_per_timer", "driver CPU ns/timer"),
                 ("process_cpu_ns_per_callback", "process CPU ns/callback"), ("burst_wall_ms", "burst ms")]
EXPIRY_GOALS = [("callbacks_per_s", "expiry, 1 M due in the same ms: ≥ 15 M callbacks/s", 15e6, True),
                ("driver_cpu_ns_per_timer", "same: the drivers' CPU per expired timer ≤ 25 ns", 25, False),
                ("process_cpu_ns_per_callback", "same: process CPU per callback ≤ 150 ns", 150, False)]


def probe_groups(runs):
    """bench/expiry_probe's runs (one JSON object each) -> one entry per
    (producers, workers): median, min, max of each figure, runs, early."""
    groups = {}
    for r in runs:
        groups.setdefault((r["producers"], r["workers"]), []).append(r)
    out = []
    for (p, w), rs in sorted(groups.items()):
        rec = {"producers": p, "workers": w, "shards": rs[0].get("shards"), "timers": rs[0].get("timers"),
               "runs": len(rs), "early": sum(int(r.get("early", 0)) for r in rs)}
        for key, _ in PROBE_FIGURES:
            v = sorted(float(r[key]) for r in rs if r.get(key) is not None)
            rec[key] = {"median": v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2,
                        "min": v[0], "max": v[-1], "reps": len(v), "samples": v} if v else None
        out.append(rec)
    return out


def probe_records(runs):
    """bench/expiry_probe's runs as the suite's records (workload
    "expiry_burst", peer "tickwheel-capi"), one per (producers, workers) and
    figure, and one "early" record (the sum over the runs)."""
    out = []
    for g in probe_groups(runs):
        params = {k: g[k] for k in ("timers", "producers", "workers", "shards")}
        base = {"workload": "expiry_burst", "peer": "tickwheel-capi", "params": params}
        for key, unit in PROBE_FIGURES:
            if g[key]:
                out.append(dict(base, metric=key, unit=unit, **g[key]))
        out.append(dict(base, metric="early", unit="callbacks", median=g["early"], min=g["early"], max=g["early"],
                        reps=g["runs"], samples=[g["early"]]))
    return out


def burst_groups(R):
    """probe_records() back into probe_groups()' entries."""
    out = []
    for r in R.records:
        if r["workload"] == "expiry_burst" and r["metric"] == "early":
            g = dict(r["params"], early=int(r["median"]), runs=r["reps"])
            for key, _ in PROBE_FIGURES:
                g[key] = R.get("expiry_burst", "tickwheel-capi", key, **r["params"])
            out.append(g)
    return sorted(out, key=lambda g: (g["producers"], g["workers"]))


def expiry_goals(groups, goal):
    """Issue 21's expiry goals from probe_groups(): the burst of one
    producer (one shard holds it) on the most workers; never early."""
    one = [e for e in groups if e["producers"] == 1]
    top = max(one, key=lambda e: e["workers"]) if one else None
    valid = top is not None and top["timers"] == 1000000
    where = " (1 producer, %d workers)" % top["workers"] if top else ""
    for key, text, limit, ge in EXPIRY_GOALS:
        r = top and top[key]
        ok = None if not (valid and r) else (r["median"] >= limit if ge else r["median"] <= limit)
        goal(text + where, cell(r) if r else "n/a", ok)
    early, runs = sum(e["early"] for e in groups), sum(e["runs"] for e in groups)
    goal("expiry burst: never early (every run)", "%d early in %d runs" % (early, runs),
         None if not groups else early == 0)


def capi_section(R, md, goal, users=False):
    """Section 1a and issue 21's goals: tickwheel through the C ABI and the
    shared library next to the static C++ peer and libuv. users: the full
    report's section (no goal or verdict columns, no A/B against a base
    build: those are for capi.md and the development pages)."""
    rows = []
    for n, limit in CAPI_VS_LIBUV.items():
        c = R.get("startstop", "tickwheel-capi", "wall_ns_per_pair", pending=n)
        t = R.get("startstop", "tickwheel", "wall_ns_per_pair", pending=n)
        u = R.get("startstop", "libuv", "wall_ns_per_pair", pending=n)
        q = ratio_value(c, u)
        qs = "n/a" if q is None else "%.2f×" % q
        rows.append([short_n(n), cell(c, bold=True), cell(t), cell(u), qs] + ([] if users else [
            "≤ %g×" % limit, "not measured" if q is None else ("**met**" if q <= limit else "**not met**")]))
        goal("start+stop through the C ABI (shared library), %s pending: ≤ %g× libuv's wall ns/pair (issue 21)" % (
            short_n(n), limit), "%s ns vs libuv %s ns: %s" % (cell(c), cell(u), qs), None if q is None else q <= limit)
    mt = []
    for t in R.values("mt", "threads"):
        c = R.get("mt", "tickwheel-capi", "pairs_per_s", threads=t)
        s = R.get("mt", "tickwheel", "pairs_per_s", threads=t)
        if c or s:
            mt.append(["%d" % t, cell(c, bold=True), cell(s), ratio(c, s)])
    m2 = R.get("mt", "tickwheel-capi", "pairs_per_s", threads=2)
    goal("2 producers through the C ABI (shared library), 100K pending: ≥ 8 M pairs/s (issue 21)",
         cell(m2) + " pairs/s", None if m2 is None else m2["median"] >= CAPI_MT2_PAIRS)
    if "tickwheel-capi" not in R.peers("startstop") + R.peers("mt"):
        return  # a run without the C ABI peer (an older results.json): the goals say "not measured"
    sec = ["## 1a. tickwheel through the C ABI and the shared library\n\n",
           "Workload 1 (and 3) with tickwheel driven through `tickwheel.h` (`tw_timer_start` / `tw_timer_stop`) and "
           "linked to `libtickwheel.so.1` (`bench/peers/peer_tickwheel_c`), as C, Python, Node and Rust users "
           "run it, next to the C++ API of the static library and libuv, same run. Wall ns per pair until "
           "drained, median [min–max]; ×: the C ABI's median ÷ libuv's (below 1: cheaper than libuv)%s.\n\n" % (
               "" if users else "; the limits are issue 21's goals")]
    sec.append(table(["pending", "C ABI, shared", "C++ API, static", "libuv", "C ABI ÷ libuv"] +
                     ([] if users else ["goal", "verdict"]), rows))
    # Process CPU (all threads): what a pair costs whatever else the machine
    # runs (a preempted caller's wall time grows, its CPU time does not).
    cpu = [[short_n(n)] + [cell(R.get("startstop", p, "cpu_ns_per_pair", pending=n))
                           for p in ("tickwheel-capi", "tickwheel", "libuv")] +
           [ratio(R.get("startstop", "tickwheel-capi", "cpu_ns_per_pair", pending=n),
                  R.get("startstop", "libuv", "cpu_ns_per_pair", pending=n))] for n in CAPI_VS_LIBUV]
    sec.append("\n**Process CPU ns per pair** (all threads; less sensitive to a loaded machine than wall time)\n\n")
    sec.append(table(["pending", "C ABI, shared", "C++ API, static", "libuv", "C ABI ÷ libuv"], cpu))
    if mt:
        sec.append("\n**Producers (workload 3), 100K pending: aggregate pairs/s until drained** (×: C ABI ÷ "
                   "C++ static%s)\n\n" % ("" if users else "; issue 21's goal for 2 producers: ≥ 8 M"))
        sec.append(table(["producers", "C ABI, shared", "C++ API, static", "×"], mt))
    if "tickwheel-capi-base" in R.peers("startstop") + R.peers("mt") and not users:
        base = []
        for n in CAPI_VS_LIBUV:
            for metric, what in [("wall_ns_per_pair", "wall ns/pair"), ("cpu_ns_per_pair", "process CPU ns/pair")]:
                c = R.get("startstop", "tickwheel-capi", metric, pending=n)
                b = R.get("startstop", "tickwheel-capi-base", metric, pending=n)
                base.append(["start+stop, %s pending: %s" % (short_n(n), what), cell(c, bold=True), cell(b),
                             ratio(b, c)])
        for t in R.values("mt", "threads"):
            c = R.get("mt", "tickwheel-capi", "pairs_per_s", threads=t)
            b = R.get("mt", "tickwheel-capi-base", "pairs_per_s", threads=t)
            base.append(["%d producer(s), 100K pending: pairs/s" % t, cell(c, bold=True), cell(b), ratio(c, b)])
        sec.append("\n**This build against the base build** (`BENCH_BASE_BUILD_DIR`, its `peer_tickwheel_c` run "
                   "in the same rounds, next to this build's, before it in every other round); ×: how many times "
                   "better this build's median is (base ÷ this for costs, this ÷ base for rates)\n\n")
        sec.append(table(["figure", "this build", "base build", "×"], base))
    md.append((1.5, "".join(sec) + "\n"))


# ---- the report ---------------------------------------------------------------------------------
def verdict(ok):
    if ok is None:
        return "not measured"
    return "**met**" if ok else "**not met**"


def merge_rounds(records):
    """One record per (workload, peer, metric, params): the samples of the
    same measurement run several times (scripts/bench.sh capi runs each
    program once per round, interleaved) are pooled, median/min/max anew."""
    merged, order = {}, []
    for r in records:
        key = (r["workload"], r["peer"], r["metric"], json.dumps(r["params"], sort_keys=True))
        if key not in merged:
            merged[key] = dict(r, samples=list(r.get("samples", [])))
            order.append(key)
            continue
        m = merged[key]
        m["samples"] += r.get("samples", [])
        v = sorted(m["samples"])
        if v:
            m.update(median=v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2,
                     min=v[0], max=v[-1], reps=len(v))
    return [merged[k] for k in order]


def build_capi(R, meta, env):
    """`scripts/bench.sh capi`: issue 21's start+stop goals only (section 1a)."""
    md, goals = [], []
    capi_section(R, md, lambda text, figure, ok: goals.append((text, figure, verdict(ok))))
    when = utc(meta.get("started_unix", 0))
    head = ["# tickwheel through the C ABI: issue 21's start+stop goals\n\n",
            "Generated by `scripts/bench.sh capi`: each program run once per round, %s rounds, interleaved "
            "(C ABI, C++ static, libuv; then the producers); figures pooled over the rounds, median [min–max]. "
            "Raw figures: [`capi.json`](capi.json).\n\n" % meta.get("reps", "?"),
            "Run `%s` (`%s`): %s, %s s, %s CPUs, tickwheel %s. Load average (1, 5, 15 min) before: %s; after: "
            "%s.\n" % (run_id("capi", meta.get("started_unix", 0)), meta.get("command", "scripts/bench.sh capi"),
                      when, meta.get("total_s", "?"), env.get("nproc"), env.get("git", "?"), meta.get("load_before", "?"),
                meta.get("load_after", "?"))]
    if meta.get("quick"):
        head.append("\n> **--quick run:** small sizes and 2 rounds; the figures are not valid.\n")
    fails = meta.get("failures") or []
    if fails:
        head.append("\n> Runs that failed or timed out: %s.\n" % ", ".join(
            fails.split() if isinstance(fails, str) else fails))
    head.append("\n## Goals\n\n")
    head.append(table(["goal", "figure", "verdict"], goals))
    return "".join(head) + "\n" + "".join(text for _, text in md), goals


def build(res, meta, env, out_dir):
    R = res
    md = []  # (section number, markdown)
    goals = []  # (goal, figure, verdict)

    def goal(text, figure, ok):
        goals.append((text, figure, verdict(ok)))

    # ---- 1. start+stop ------------------------------------------------------------------------
    ns = [n for n in R.values("startstop", "pending") if sum(
        1 for p in R.peers("startstop") if R.get("startstop", p, "wall_ns_per_pair", pending=n)) >= 2] or \
        R.values("startstop", "pending")
    ss_peers = R.peers("startstop")
    sec = ["## 1. start+stop pair at N pending\n\n",
           "Preload N timers due in [1 s, 100 s]; each repetition times %s pairs of (start one with a random "
           "delay in [1 ms, 100 s], stop a random pending one). **wall** runs until the peer has processed every "
           "request (tickwheel: every shard inbox empty; Asio: every cancelled handler has run; libevent: its loop "
           "thread has run a marker event; libuv and DPDK do everything in the caller); **CPU** is the "
           "process's CPU time (all threads) over the same interval. ns per pair, median [min–max] of %s "
           "repetitions; ×: the peer's median ÷ tickwheel's, same N.\n\n" % (
               num(R.get("startstop", "tickwheel", "wall_ns_per_pair", pending=ns[0])["params"]["ops"])
               if ns and R.get("startstop", "tickwheel", "wall_ns_per_pair", pending=ns[0]) else "the",
               meta.get("reps", 5))]
    for metric, what in [("wall_ns_per_pair", "wall ns per pair (until drained)"),
                         ("cpu_ns_per_pair", "process CPU ns per pair (all threads)"),
                         ("caller_ns_per_pair", "caller-side ns per pair (the timed loop only)")]:
        rows = []
        for p in ss_peers:
            row = [p]
            for n in ns:
                r = R.get("startstop", p, metric, pending=n)
                t = R.get("startstop", "tickwheel", metric, pending=n)
                c = cell(r, bold=(p == "tickwheel"))
                if r is not None and p != "tickwheel" and t is not None:
                    c += " (%s)" % ratio(r, t)
                row.append(c)
            lo = R.get("startstop", p, metric, pending=ns[0]) if ns else None
            hi = R.get("startstop", p, metric, pending=ns[-1]) if ns else None
            row.append(ratio(hi, lo))
            rows.append(row)
        sec.append("**%s**\n\n" % what)
        sec.append(table(["peer"] + ["N = %s" % short_n(n) for n in ns] +
                         ["growth %s→%s" % (short_n(ns[0]), short_n(ns[-1])) if ns else "growth"], rows))
        sec.append("\n")
    drain_rows = []
    for p in ss_peers:
        r = [R.get("startstop", p, "drain_us", pending=n) for n in ns]
        if any(x and x["median"] > 1 for x in r):
            drain_rows.append([p] + [cell(x) for x in r])
    if drain_rows:
        sec.append("Time from the end of the timed loop until drained (µs), included in the wall figures. "
                   "tickwheel's shards take stops lazily: a sleeping shard is woken by an earlier deadline, by every "
                   "4096th stop a thread posts, or by its 100 ms housekeeping wake-up, so when the shard keeps up "
                   "and sleeps, the last requests of a repetition can wait up to 100 ms:\n\n")
        sec.append(table(["peer"] + ["N = %s" % short_n(n) for n in ns], drain_rows))
        sec.append("\n")
    png = plot_lines(out_dir, "startstop.png", "start+stop pair vs pending timers (wall, until drained)",
                     "pending timers", "ns per pair",
                     [(p, [(n, r["median"], r["min"], r["max"]) for n in ns
                           for r in [R.get("startstop", p, "wall_ns_per_pair", pending=n)] if r]) for p in ss_peers])
    if png:
        sec.append("![start+stop vs pending](%s)\n\n" % png)
    md.append((1, "".join(sec)))

    tw1 = R.get("startstop", "tickwheel", "wall_ns_per_pair", pending=1000000)
    tw1c = R.get("startstop", "tickwheel", "cpu_ns_per_pair", pending=1000000)
    tw10 = R.get("startstop", "tickwheel", "wall_ns_per_pair", pending=10000000)
    goal("start+stop, 1 caller, 1M pending, until drained: wall ≤ 120 ns/pair", cell(tw1) + " ns",
         tw1 and tw1["median"] <= 120)
    goal("same: process CPU (all threads) ≤ 200 ns/pair", cell(tw1c) + " ns", tw1c and tw1c["median"] <= 200)
    uv1 = R.get("startstop", "libuv", "wall_ns_per_pair", pending=1000000)
    q = ratio_value(uv1, tw1)
    goal("same: ≥ 3× faster than libuv (same run; issue 6 asked 5×)",
         "%s (libuv %s ns)" % (ratio(uv1, tw1), cell(uv1)), None if q is None else q >= 3)
    # Issue 14: with everything in cache, at most 1.5× libuv's cost.
    tw1k = R.get("startstop", "tickwheel", "wall_ns_per_pair", pending=1000)
    uv1k = R.get("startstop", "libuv", "wall_ns_per_pair", pending=1000)
    q1k = ratio_value(tw1k, uv1k)
    goal("start+stop, 1 caller, 1K pending (in cache): ≤ 1.5× libuv's cost (wall, same run)",
         "%s ns vs libuv %s ns: %s" % (cell(tw1k), cell(uv1k), "n/a" if q1k is None else "%.1f×" % q1k),
         None if q1k is None else q1k <= 1.5)
    ev1 = R.get("startstop", "libevent", "wall_ns_per_pair", pending=1000000)
    q = ratio_value(ev1, tw1)
    dp1 = R.get("startstop", "dpdk-timer", "wall_ns_per_pair", pending=1000000)
    goal("same: ≥ 3× cheaper than libevent (same run)",
         "%s (libevent %s ns)%s" % (ratio(ev1, tw1), cell(ev1), "; for reference DPDK rte_timer: %s (%s ns)" % (
             ratio(dp1, tw1), cell(dp1)) if dp1 else ""),
         None if q is None else q >= 3)
    qa = [(a, ratio_value(R.get("startstop", a, "wall_ns_per_pair", pending=1000000), tw1)) for a in ASIO]
    qa = [(a, v) for a, v in qa if v is not None]
    goal("same: ≥ 8× faster than Boost.Asio (1 and 2 io threads)",
         ", ".join("%s %.1f×" % (a, v) for a, v in qa) or "n/a", min(v for _, v in qa) >= 8 if qa else None)
    g = ratio_value(tw10, tw1)
    tw10c = R.get("startstop", "tickwheel", "cpu_ns_per_pair", pending=10000000)
    goal("10M pending: ≤ 2× tickwheel's own cost at 1M (wall)",
         "%s (%s ns at 10M; CPU %s)" % (ratio(tw10, tw1), cell(tw10), ratio(tw10c, tw1c)),
         None if g is None else g <= 2)

    # ---- 1a. the C ABI through the shared library ------------------------------------------------
    capi_section(R, md, goal, users=True)

    # ---- 2. re-arm ---------------------------------------------------------------------------------
    rp = R.peers("rearm")
    if rp:
        n = R.values("rearm", "pending")[-1]
        sec = ["## 2. re-arm later (keepalive) at %s pending\n\n" % short_n(n),
               "Preload %s timers due in [20 s, 30 s]; each repetition re-arms %s random timers to a delay rising "
               "from 30 s to 60 s over the run (so every re-arm moves a deadline later). **caller**: the timed loop "
               "on the calling thread; **drained** and **CPU** as in 1. ns per re-arm; ×: the peer over tickwheel "
               "(caller side).\n\n" % (short_n(n), num(R.get("rearm", rp[0], "caller_ns_per_rearm")["params"]["ops"]))]
        tc = R.get("rearm", "tickwheel", "caller_ns_per_rearm")
        rows = []
        for p in rp:
            c = R.get("rearm", p, "caller_ns_per_rearm")
            rows.append([p, cell(c, bold=p == "tickwheel"), cell(R.get("rearm", p, "wall_ns_per_rearm")),
                         cell(R.get("rearm", p, "cpu_ns_per_rearm")), "" if p == "tickwheel" else ratio(c, tc)])
        sec.append(table(["peer", "caller ns", "wall ns (drained)", "CPU ns", "× tickwheel (caller)"], rows))
        md.append((2, "".join(sec) + "\n"))
    tc = R.get("rearm", "tickwheel", "caller_ns_per_rearm")
    goal("re-arm later, 1M pending: ≤ 30 ns on the caller's side", cell(tc) + " ns", tc and tc["median"] <= 30)
    qs = [(p, ratio_value(R.get("rearm", p, "caller_ns_per_rearm"), tc)) for p in ["libuv"] + ASIO]
    qs = [(p, v) for p, v in qs if v is not None]
    goal("re-arm: ≥ 20× cheaper than libuv and Boost.Asio (caller side)",
         ", ".join("%s %.1f×" % (p, v) for p, v in qs) or "n/a", min(v for _, v in qs) >= 20 if qs else None)

    # ---- 10. batches ---------------------------------------------------------------------------------
    bs = R.get("startstop_batch", "tickwheel", "wall_ns_per_pair")
    br = R.get("rearm_batch", "tickwheel", "caller_ns_per_rearm")
    if bs or br:
        n = (bs or br)["params"]["pending"]
        b = (bs or br)["params"].get("batch", 64)
        sec = ["## 10. batches (tickwheel only)\n\n",
               "Workloads 1 and 2 at %s pending, %s operations per call: `Runtime::start`/`stop`/`reset` over spans "
               "(`tw_timer_start_n`/`stop_n`/`reset_n` in C), against the single calls of workloads 1 and 2 in this "
               "run. The other peers have no batch calls (not applicable). ns per pair (start+stop) or per timer "
               "(re-arm), median [min–max]; **caller CPU** is the calling thread's own CPU time in its loop (it does "
               "not grow when the thread is preempted); ×: single ÷ batch.\n\n" % (short_n(n), int(b))]
        rows = []
        for metric, what in [("wall_ns_per_pair", "start+stop: wall (until drained)"),
                             ("cpu_ns_per_pair", "start+stop: process CPU"),
                             ("caller_ns_per_pair", "start+stop: caller (loop)"),
                             ("caller_cpu_ns_per_pair", "start+stop: caller CPU")]:
            single = R.get("startstop", "tickwheel", metric, pending=n)
            batch = R.get("startstop_batch", "tickwheel", metric)
            rows.append([what, cell(single), cell(batch, bold=True), ratio(single, batch)])
        for metric, what in [("caller_ns_per_rearm", "re-arm later: caller"),
                             ("caller_cpu_ns_per_rearm", "re-arm later: caller CPU"),
                             ("wall_ns_per_rearm", "re-arm later: wall (until drained)")]:
            single = R.get("rearm", "tickwheel", metric)
            batch = R.get("rearm_batch", "tickwheel", metric)
            rows.append([what, cell(single), cell(batch, bold=True), ratio(single, batch)])
        sec.append(table(["figure", "single calls", "batches of %d" % int(b), "× cheaper"], rows))
        md.append((10, "".join(sec) + "\n"))
    s1 = R.get("startstop", "tickwheel", "wall_ns_per_pair", pending=(bs or {}).get("params", {}).get("pending", 1000000))
    goal("batched start+stop (batches of 64), 1M pending, until drained: wall ≤ 100 ns/pair", cell(bs) + " ns",
         bs and bs["median"] <= 100)
    q = ratio_value(s1, bs)
    goal("same: ≥ 4× cheaper than tickwheel's single start+stop (same run, wall)",
         "%s (single %s ns)" % (ratio(s1, bs), cell(s1)), None if q is None else q >= 4)
    goal("batched re-arm later (batches of 64), 1M pending: ≤ 30 ns per timer on the caller's side",
         cell(br) + " ns", br and br["median"] <= 30)

    # ---- 3. producers ----------------------------------------------------------------------------------
    mp = R.peers("mt")
    ts = R.values("mt", "threads")
    if mp:
        ops = R.get("mt", mp[0], "pairs_per_s", threads=ts[0])["params"]["ops"]
        other_ops = sorted({(p, r["params"]["ops"]) for p in mp for t in ts
                            for r in [R.get("mt", p, "pairs_per_s", threads=t)] if r and r["params"]["ops"] != ops})
        sec = ["## 3. producer threads\n\n",
               "T producer threads, each doing %s start+stop pairs per repetition on its own share of %s pending timers "
               "(100K/T each). Aggregate pairs per second, wall time from the common start until every producer "
               "is done and the peer has drained (caller-only figure below it); ×: tickwheel over the peer. "
               "libuv and the bare wheel are not thread-safe (n/a). libevent's producers share the base's lock; "
               "DPDK's producers are registered lcores (rte_thread_register) sharing the manager lcore's "
               "spinlock.%s\n\n" % (
                   num(ops), short_n(R.get("mt", mp[0], "pairs_per_s", threads=ts[0])["params"]["pending"]),
                   "".join(" %s does %s pairs per thread and repetition (its rate is what counts)." % (p, num(o))
                           for p, o in other_ops))]
        rows = []
        for p in mp:
            row = [p]
            for t in ts:
                r = R.get("mt", p, "pairs_per_s", threads=t)
                tw = R.get("mt", "tickwheel", "pairs_per_s", threads=t)
                c = cell(r, bold=p == "tickwheel")
                if p != "tickwheel" and r:
                    c += " (%s)" % ratio(tw, r)
                row.append(c)
            rows.append(row)
        sec.append("**pairs/s, until drained**\n\n")
        sec.append(table(["peer"] + ["T = %d" % t for t in ts], rows))
        rows = [[p] + [cell(R.get("mt", p, "caller_pairs_per_s", threads=t)) for t in ts] for p in mp]
        sec.append("\n**pairs/s, callers only**\n\n")
        sec.append(table(["peer"] + ["T = %d" % t for t in ts], rows))
        rows = [[p] + [cell(R.get("mt", p, "cpu_ns_per_pair", threads=t)) for t in ts] for p in mp]
        sec.append("\n**process CPU ns per pair**\n\n")
        sec.append(table(["peer"] + ["T = %d" % t for t in ts], rows))
        png = plot_lines(out_dir, "producers.png", "aggregate start+stop pairs/s vs producer threads (100K pending)",
                         "producer threads", "million pairs/s",
                         [(p, [(t, r["median"] / 1e6, r["min"] / 1e6, r["max"] / 1e6) for t in ts
                               for r in [R.get("mt", p, "pairs_per_s", threads=t)] if r]) for p in mp],
                         logx=False, logy=False, xtics=[(str(t), t) for t in ts])
        if png:
            sec.append("\n![pairs/s vs producers](%s)\n" % png)
        md.append((3, "".join(sec) + "\n"))
    m2 = R.get("mt", "tickwheel", "pairs_per_s", threads=2)
    m1 = R.get("mt", "tickwheel", "pairs_per_s", threads=1)
    goal("2 producers, 100K pending: ≥ 12 M pairs/s aggregate", cell(m2) + " pairs/s", m2 and m2["median"] >= 12e6)
    goal("1 → 2 producers does not lower the aggregate", "%s → %s pairs/s" % (cell(m1), cell(m2)),
         None if not (m1 and m2) else m2["median"] >= m1["median"])

    # ---- 4. expiry ------------------------------------------------------------------------------------
    ep = R.peers("expiry")
    if ep:
        n = R.get("expiry", ep[0], "callbacks_per_s")["params"]["timers"]
        sec = ["## 4. expiry throughput\n\n",
               "%s timers with deadlines spread over 1 s and a trivial callback (an atomic increment); "
               "callbacks per second from the moment all of them are due to the last callback. tickwheel runs at a "
               "1 s tick here, so the window is one tick and the whole backlog comes due at its boundary (the "
               "callbacks go through the TBB arena); the peers' event loops / workers are started once the window "
               "has passed and deliver the backlog (DPDK: the paused manager lcore is woken); the bare wheel is "
               "advanced once past the window and popped. "
               "×: tickwheel over the peer.\n\n" % short_n(n)]
        tw = R.get("expiry", "tickwheel", "callbacks_per_s")
        rows = []
        for p in ep:
            r = R.get("expiry", p, "callbacks_per_s")
            rows.append([p, cell(r, bold=p == "tickwheel"), cell(R.get("expiry", p, "delivery_ms")),
                         cell(R.get("expiry", p, "load_ns_per_timer")), "" if p == "tickwheel" else ratio(tw, r)])
        sec.append(table(["peer", "callbacks/s", "delivery ms", "load ns/timer", "tickwheel ×"], rows))
        png = plot_bars(out_dir, "expiry.png", "expiry throughput (backlog of %s due timers)" % short_n(n),
                        "million callbacks/s",
                        [(p, r["median"] / 1e6, r["min"] / 1e6, r["max"] / 1e6) for p in ep
                         for r in [R.get("expiry", p, "callbacks_per_s")] if r])
        if png:
            sec.append("\n![expiry](%s)\n" % png)
        md.append((4, "".join(sec) + "\n"))
    ex = R.get("expiry", "tickwheel", "callbacks_per_s")
    goal("expiry through the TBB arena, trivial callbacks: ≥ 12 M callbacks/s", cell(ex) + " callbacks/s",
         ex and ex["median"] >= 12e6)

    # ---- 4b. expiry burst (bench/expiry_probe, issue 21) -----------------------------------------
    bursts = burst_groups(R)
    if bursts:
        rows = [["%d" % g["producers"], "%d" % g["workers"]] + [cell(g[k], bold=k == "callbacks_per_s")
                                                              for k, _ in PROBE_FIGURES] + ["%d" % g["early"]]
                for g in bursts]
        md.append((4.5, "## 4b. expiry burst\n\n"
                        "`bench/expiry_probe`: %s one-shots with one absolute deadline (all due in the same "
                        "millisecond), started from one thread through the C ABI and the shared library, on the "
                        "default runtime (one shard and one worker per CPU), trivial callbacks: callbacks/s from the "
                        "first callback to the last; the shard drivers' CPU per expired timer; the process's CPU per "
                        "callback (median [min–max] of %d runs, a fresh runtime each). `scripts/bench.sh scaling` "
                        "runs it on 1..N workers and from N producers.\n\n" % (num(bursts[0]["timers"]),
                                                                                 bursts[0]["runs"]) +
                   table(["producers", "workers"] + [t for _, t in PROBE_FIGURES] + ["early"], rows) + "\n"))
    expiry_goals(bursts, goal)

    # ---- 5. lateness -------------------------------------------------------------------------------
    lp = R.peers("lateness")
    rates = R.values("lateness", "rate")
    configs = []  # (label, peer, resolution_us)
    for p in lp:
        for res_us in sorted({r["params"]["resolution_us"] for r in R.records
                              if r["workload"] == "lateness" and r["peer"] == p}, reverse=True):
            label = p if p != "tickwheel" else "tickwheel %s" % ("1 ms" if res_us == 1000 else "%d µs" % res_us)
            configs.append((label, p, res_us))

    def lat(p, res_us, rate, metric, workload="lateness"):
        if p == "tickwheel":
            return R.get(workload, p, metric, rate=rate, resolution_us=res_us)
        return R.get(workload, p, metric, rate=rate)

    if lp:
        any_r = next(r for r in R.records if r["workload"] == "lateness")
        sec = ["## 5. lateness\n\n",
               "Steady streams of timers with random delays in [0, %s ms]; lateness = callback start − the deadline "
               "the caller computed (CLOCK_MONOTONIC read just before the start call). A repetition is the timers "
               "started in one %s s slice of the stream (%s slices). µs, median [min–max] over slices; **early**: "
               "callbacks that started before their deadline, whole stream. tickwheel at its default 1 ms tick "
               "and at 100 µs; Asio and the mutex service use the clock's nanoseconds; libuv rounds to "
               "milliseconds of its cached loop time; libevent to microseconds of its cached loop time "
               "(CLOCK_MONOTONIC, EVENT_BASE_FLAG_PRECISE_TIMER: a caller that adds a timer while the loop runs "
               "callbacks computes its deadline from that cache, hence some early callbacks); DPDK counts TSC "
               "cycles and its manager polls every 1 ms (rte_timer cannot be woken for an earlier timer).\n\n" % (
                   num(any_r["params"]["max_delay_ms"]), any_r["params"]["segment_s"], meta.get("reps", 5))]
        for rate in rates:
            rows = []
            for label, p, res_us in configs:
                if lat(p, res_us, rate, "lateness_p50") is None:
                    continue
                rows.append([label] + [cell(lat(p, res_us, rate, m)) for m in
                                       ["lateness_p50", "lateness_p99", "lateness_p999", "lateness_max"]] +
                            [cell(lat(p, res_us, rate, "early_total")), cell(lat(p, res_us, rate, "unfired")),
                             num((lat(p, res_us, rate, "achieved_rate") or {}).get("median"))])
            sec.append("**%s timers/s**\n\n" % num(rate))
            sec.append(table(["peer", "p50 µs", "p99 µs", "p99.9 µs", "max µs", "early", "unfired", "achieved /s"], rows))
            sec.append("\n")
        pngs = []
        for metric, what in [("lateness_p50", "p50"), ("lateness_p99", "p99"), ("lateness_p999", "p99.9")]:
            png = plot_lines(out_dir, "lateness_%s.png" % what.replace(".", ""), "lateness %s vs stream rate" % what,
                             "timers per second", "µs",
                             [(label, [(rate, r["median"], r["min"], r["max"]) for rate in rates
                                       for r in [lat(p, res_us, rate, metric)] if r and r["median"] > 0])
                              for label, p, res_us in configs])
            if png:
                pngs.append(png)
        for png in pngs:
            sec.append("![%s](%s)\n" % (png[:-4], png))
        md.append((5, "".join(sec) + "\n"))
    early_runs = [r for r in R.records if r["peer"] == "tickwheel" and r["metric"] == "early_total"
                  and r["workload"] in ("lateness", "slow")]
    early = sum(r["median"] for r in early_runs)
    goal("never early against CLOCK_MONOTONIC read by the caller (every tickwheel stream)",
         "%d early of %d streams" % (early, len(early_runs)), None if not early_runs else early == 0)
    p99 = lat("tickwheel", 100, 100000, "lateness_p99")
    p999 = lat("tickwheel", 100, 100000, "lateness_p999")
    a99 = lat("asio-1t", 0, 100000, "lateness_p99")
    goal("100 µs tick, 100K timers/s: p99 ≤ Asio-1t's p99 + 1 tick (same run)",
         "%s µs (Asio-1t %s µs)" % (cell(p99), cell(a99)),
         None if not (p99 and a99) else p99["median"] <= a99["median"] + 100)
    goal("100 µs tick, 100K timers/s: p99.9 ≤ 1 ms", cell(p999) + " µs", p999 and p999["median"] <= 1000)
    for rate in rates:
        r = lat("tickwheel", 1000, rate, "lateness_p99")
        goal("1 ms tick (default), %s timers/s: p99 ≤ 1 tick + 150 µs" % num(rate), cell(r) + " µs",
             r and r["median"] <= 1150)

    # ---- 8. slow callbacks -----------------------------------------------------------------------------
    sp = R.peers("slow")
    if sp:
        any_r = next(r for r in R.records if r["workload"] == "slow")
        sec = ["## 8. slow callbacks\n\n",
               "2 workers; a periodic timer every 10 ms whose callback blocks 100 ms, plus a stream of %s timers/s "
               "(delays in [0, %s ms]) whose lateness is measured as in 5. tickwheel: 2 TBB workers, 1 ms tick; "
               "Asio: 2 io threads; the mutex service: 2 worker threads. Single-threaded loops (libuv, Asio on one "
               "thread, the 1-worker service, libevent's loop, DPDK's manager lcore) are blocked by such a "
               "callback by construction and are not run.\n\n" % (
                   num(any_r["params"]["rate"]), num(any_r["params"]["max_delay_ms"]))]
        rows = []
        for p in sp:
            g_ = lambda m: R.get("slow", p, m)  # noqa: E731
            rows.append([p] + [cell(g_(m)) for m in ["lateness_p50", "lateness_p99", "lateness_p999", "lateness_max"]] +
                        [cell(g_("early_total")), cell(g_("unfired"))])
        sec.append(table(["peer", "p50 µs", "p99 µs", "p99.9 µs", "max µs", "early", "unfired"], rows))
        md.append((8, "".join(sec) + "\n"))
    sl = R.get("slow", "tickwheel", "lateness_p99")
    goal("slow callbacks (2 workers, one blocks 100 ms every 10 ms): others' p99 ≤ 1 tick + 200 µs",
         cell(sl) + " µs", sl and sl["median"] <= 1200)

    # ---- 6. idle -----------------------------------------------------------------------------------------
    ip = R.peers("idle")
    if ip:
        any_r = next(r for r in R.records if r["workload"] == "idle")
        sec = ["## 6. idle CPU\n\n",
               "%s timers pending, none due for a minute; process CPU time (all threads) over %s s of wall time, "
               "as %% of one core: median [min–max] of %s equal windows, and over the whole time. The peers ran "
               "side by side (each measures its own process).\n\n" % (
                   short_n(any_r["params"]["pending"]), num(any_r["params"]["seconds"]), meta.get("reps", 5))]
        rows = [[p, cell(R.get("idle", p, "cpu_percent")), cell(R.get("idle", p, "cpu_percent_whole"))] for p in ip]
        sec.append(table(["peer", "CPU % (windows)", "CPU % (whole)"], rows))
        md.append((6, "".join(sec) + "\n"))
    idl = R.get("idle", "tickwheel", "cpu_percent_whole")
    goal("idle, 1M pending: ≤ 0.01% of one core", cell(idl) + " %", idl and idl["median"] <= 0.01)

    # ---- 7. memory ---------------------------------------------------------------------------------------
    mp_ = R.peers("memory")
    mns = R.values("memory", "pending")
    if mp_:
        sec = ["## 7. memory\n\n",
               "RSS growth of the process per pending timer, from before the preload of workload 1 (the benchmark's "
               "own handle array excluded) to after each of its repetitions (median [min–max]), and right after "
               "the preload of the most timers. Everything the peer needs per timer counts: timer objects, handler "
               "allocations, queues, records, and what the process maps once (at %s pending that is most of "
               "it).\n\n" % short_n(mns[0])]
        rows = []
        for p in mp_:
            row = [p]
            for n in mns:
                row.append(cell(R.get("memory", p, "rss_bytes_per_timer", pending=n), bold=p == "tickwheel"))
            row.append(cell(R.get("memory", p, "rss_bytes_per_timer_after_preload", pending=mns[-1])))
            rows.append(row)
        hdr = ["peer"] + ["B/timer at %s" % short_n(n) for n in mns] + ["after the preload of %s" % short_n(mns[-1])]
        sec.append(table(hdr, rows))
        md.append((7, "".join(sec) + "\n"))
    for n in [1000000, 10000000]:
        r = R.get("memory", "tickwheel", "rss_bytes_per_timer", pending=n)
        goal("memory: ≤ 64 B of RSS per pending timer at %s" % short_n(n), cell(r) + " B", r and r["median"] <= 64)

    # ---- 9. FFI --------------------------------------------------------------------------------------------
    fp = R.peers("ffi")
    sec = ["## 9. From Python (the binding and bare ctypes → C ABI)\n\n"]
    if fp:
        fr = R.get("ffi", fp[0], "wall_ns_per_pair")
        n = fr["params"]["pending"]
        cxx = R.get("startstop", "tickwheel", "wall_ns_per_pair", pending=n)
        sec.append("The start+stop pair of workload 1 at %s pending, from Python 3 through libtickwheel.so.1: "
                   "wall until drained, ns per pair; ×: over the C++ API's pair at the same pending count "
                   "(workload 1, this run).\n\n" % short_n(n))
        rows = [["tickwheel (C++ API)", cell(cxx), cell(R.get("startstop", "tickwheel", "cpu_ns_per_pair", pending=n)), ""]]
        for p in fp:
            r = R.get("ffi", p, "wall_ns_per_pair")
            rows.append([PEER_TEXT.get(p, p), cell(r), cell(R.get("ffi", p, "cpu_ns_per_pair")), ratio(r, cxx)])
        sec.append(table(["path", "wall ns/pair", "CPU ns/pair", "× C++"], rows))
    else:
        sec.append(table(["path", "wall ns/pair"],
                         [["Python → C ABI", meta.get("ffi_status", "not measured")]]))
    md.append((9, "".join(sec) + "\n"))

    # ---- assemble --------------------------------------------------------------------------------------------
    head = ["# tickwheel benchmarks\n\n",
            "Generated by `scripts/bench.sh` (sources: `bench/peers/`, `bench/suite/report.py`). Every figure is the "
            "median of %s repetitions with [min–max]; every ratio (×) compares medians measured in the same run and says "
            "how many times better tickwheel's figure is (the peer's cost ÷ tickwheel's, or tickwheel's rate ÷ the "
            "peer's): below 1× the peer is better. Raw figures: [`results.json`](results.json).\n" % meta.get("reps", 5)]
    head.append("\nRun `%s` (`%s`): %s, %s s in all (build %s s). Load average (1, 5, 15 min) "
                "before: %s; after: %s. The commit it measured: `results.json` (environment) and the development "
                "page.\n" % (
                    run_id("full", meta.get("started_unix", 0)), meta.get("command", "scripts/bench.sh"),
                    utc(meta.get("started_unix", 0)), meta.get("total_s", "?"),
                    meta.get("build_s", "?"), meta.get("load_before", "?"), meta.get("load_after", "?")))
    try:
        lb = float(str(meta.get("load_before", "0")).split()[0])
        la = float(str(meta.get("load_after", "0")).split()[0])
    except ValueError:
        lb = la = 0
    if lb > 0.5 or la > 2.5 or meta.get("shared_machine"):
        head.append("\n> **Caveat:** the machine was not idle during this run (see the load averages); "
                    "figures that depend on the cores being free (wall times, lateness, producers) are pessimistic. "
                    "Re-run on a quiet machine for reference figures.\n")
    ss = next((r for r in R.records if r["workload"] == "startstop"), None)
    if ss and ss["params"].get("ops", 1000000) < 1000000 and not meta.get("quick"):
        head.append("\nWorkloads 1–3 time %s operations per repetition, so each figure covers %s; "
                    "1,000,000 per repetition would take the suite past 10 minutes on 2 cores "
                    "(`BENCH_OPS=1000000 scripts/bench.sh` does it).\n" % (
                        "{:,}".format(int(ss["params"]["ops"])), "{:,}".format(int(ss["params"]["ops"]) * int(meta.get("reps", 5)))))
    if meta.get("quick"):
        head.append("\n> **--quick run:** small sizes and 2 repetitions; the figures are not valid.\n")
    if meta.get("failures"):
        head.append("\n> Runs that failed or timed out: %s.\n" % ", ".join(meta["failures"]))
    head.append("\n## Machine\n\n")
    rows = [["CPUs (nproc)", env.get("nproc")], ["CPU model", env.get("cpu_model")], ["memory", env.get("memory")],
            ["kernel", env.get("kernel")], ["compiler", env.get("compiler")]]
    rows += [["package %s" % k, v] for k, v in sorted(env.get("packages", {}).items())]
    head.append(table(["", ""], rows))
    head.append("\n## Peers\n\n")
    unavailable = {PROGRAM_PEER.get(k, k): v for k, v in (meta.get("unavailable") or {}).items()}
    head.append(table(["peer", "what"], [[p, PEER_TEXT[p]] for p in PEERS if any(
        r["peer"] == p for r in R.records)] + [[p, "**not run: cannot run on this machine:** %s" % why.replace(
            "|", "\\|")] for p, why in sorted(unavailable.items())]))
    head.append("\nEach peer is driven through its own API (programs in `bench/peers/`): tickwheel "
                "`Runtime::start/stop/reset` (static library), tickwheel-capi `tw_timer_start/stop/reset` and "
                "`tw_timer_start_n/stop_n/reset_n` (shared library); the bare wheel `Wheel::insert/remove/rearm` with a free list of "
                "nodes; Asio `steady_timer::expires_after` + `async_wait`, `cancel()` (the cancelled handler "
                "then runs with `operation_aborted` on an io thread; that work is counted), timer objects reused "
                "from a per-thread free list; libuv `uv_timer_start/uv_timer_stop` on the loop thread, handles "
                "initialised once and reused; libevent (2.1, `evthread_use_pthreads()`, `EVENT_BASE_FLAG_PRECISE_TIMER`) "
                "`evtimer_add`/`event_del` from the callers' threads on one `event_base` whose loop thread runs "
                "`event_base_loop`, events made once with `evtimer_new` and reused; DPDK (`rte_eal_init` with "
                "`--no-huge --no-pci --no-shconf`, both lcores free to run on every CPU) "
                "`rte_timer_reset`/`rte_timer_stop` onto the skip list of one manager lcore that polls "
                "`rte_timer_manage()` every 1 ms and sleeps in between (DPDK's own examples spin, which would take "
                "one of the two cores), timers reused; the mutex service `std::map<(deadline, seq), std::function>` under "
                "one `std::mutex`, stop = `erase(key)`. Preloads are filed in deadline order (so that the "
                "ordered containers load ten million timers in seconds; for `std::map` at 10M the timed pairs cost "
                "the same as after a random-order preload, within noise); the timed phases use random delays and "
                "victims generated before the clock starts. Micro-benchmarks (workloads 1 and 2) run under Google "
                "Benchmark (one benchmark iteration = one repetition, manual time); the others are plain "
                "programs with threads and real time.\n")
    return "".join(head) + "\n" + "\n".join(text for _, text in sorted(md, key=lambda x: x[0])), goals


def read_json_lines(path, who="report"):
    """The JSON objects of a file of lines (other lines are passed over)."""
    out = []
    if not path or not os.path.exists(path):
        return out
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                print("%s: skipping bad line: %s" % (who, line[:120]), file=sys.stderr)
    return out


def write_report(out_dir, json_name, doc, md_name, md, goals):
    """Writes the results document and the markdown report; doc gets the goals."""
    doc["goals"] = [{"goal": g, "figure": f, "verdict": v.strip("*")} for g, f, v in goals]
    with open(os.path.join(out_dir, json_name), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    with open(os.path.join(out_dir, md_name), "w") as f:
        f.write(md)
    return sum(1 for g in goals if g[2] == "**met**")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", help="JSON lines from the peers")
    ap.add_argument("--meta", help="run metadata (JSON) from scripts/bench.sh")
    ap.add_argument("--results", help="re-render from an existing results.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--probe", help="bench/expiry_probe's JSON lines (section 4b)")
    ap.add_argument("--capi", action="store_true",
                    help="issue 21's start+stop goals only (scripts/bench.sh capi): capi.json, capi.md")
    ap.add_argument("--no-plots", action="store_true", help="the Markdown only (as if every plot had been drawn)")
    a = ap.parse_args()
    global RUN_ID, DRAW_PLOTS
    DRAW_PLOTS = not a.no_plots
    os.makedirs(a.out, exist_ok=True)
    if a.results:
        doc = json.load(open(a.results))
        records, meta, env = doc["results"], doc["meta"], doc.get("environment", {})
    else:
        records = read_json_lines(a.raw) + probe_records(read_json_lines(a.probe))
        meta = json.load(open(a.meta)) if a.meta else {}
        env = environment()
    records = merge_rounds(records)
    RUN_ID = run_id("capi" if a.capi else "full", meta.get("started_unix", 0))
    if a.capi:
        md, goals = build_capi(Results(records), meta, env)
        names = ("capi.json", "capi.md")
    else:
        md, goals = build(Results(records), meta, env, a.out)
        names = ("results.json", "README.md")
    met = write_report(a.out, names[0], {"meta": meta, "environment": env, "results": records}, names[1], md, goals)
    print("report: %d results, %d goals (%d met) -> %s" % (len(records), len(goals), met, a.out), file=sys.stderr)


if __name__ == "__main__":
    main()
