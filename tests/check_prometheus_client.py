#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""ctest metrics_prometheus_client: two runtimes' metrics, parsed by a real
Prometheus parser (Debian's python3-prometheus-client,
prometheus_client.parser.text_string_to_metric_families).

  concat:    tw_runtime_metrics(app) + tw_runtime_metrics(lib), concatenated
             (each text repeats its families' HELP/TYPE lines: the parser
             takes the repetition)
  combined:  tw_runtimes_metrics({app, lib}): each family's HELP/TYPE once

Both must parse; every sample is typed (no 'unknown' family), carries a
runtime label naming one of the two runtimes (the second name has a quote,
a backslash and a newline: escaped and read back exactly), no series
(name + labels) appears twice, and the values are the runtimes' own.
Usage: check_prometheus_client.py <metrics_emit>
"""
import collections
import subprocess
import sys

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("TW-SKIP: python3-prometheus-client is not installed (scripts/setup.sh --test)")
    sys.exit(0)

LIB = 'lib "q" \\ x\nnl'
NAMES = {"app", LIB}


def check(mode, text):
    families = list(text_string_to_metric_families(text))
    assert families, f"{mode}: no family parsed"
    seen = set()
    types = {}
    values = collections.defaultdict(dict)  # runtime -> {(sample name, other labels): value}
    per_family = collections.Counter()
    for f in families:
        per_family[f.name] += 1
        assert f.type != "unknown", f"{mode}: family {f.name} parsed without a type (a sample outside its HELP/TYPE group?)"
        assert types.setdefault(f.name, f.type) == f.type, f"{mode}: {f.name} typed {types[f.name]} and {f.type}"
        for s in f.samples:
            assert "runtime" in s.labels, f"{mode}: {s.name}{s.labels} has no runtime label"
            rt = s.labels["runtime"]
            assert rt in NAMES, f"{mode}: unknown runtime label {rt!r}"
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in seen, f"{mode}: duplicate series {key}"
            seen.add(key)
            rest = tuple(sorted((k, v) for k, v in s.labels.items() if k != "runtime"))
            values[rt][(s.name, rest)] = s.value
    assert set(values) == NAMES, f"{mode}: runtimes seen {set(values)}"
    for rt, fired in (("app", 3), (LIB, 3)):
        v = values[rt]
        assert v[("tickwheel_timers_fired_total", ())] == fired, f"{mode}: {rt!r} fired {v.get(('tickwheel_timers_fired_total', ()))}"
        assert v[("tickwheel_callback_lateness_seconds_count", ())] == fired, f"{mode}: {rt!r} lateness count"
        assert v[("tickwheel_build_info", (("version", EXPECTED_VERSION),))] == 1, f"{mode}: {rt!r} build_info"
    app_started = values["app"][("tickwheel_timers_started_total", ())]
    assert app_started == 3, f"{mode}: app started {app_started}"
    # The queue's statistics, per queue (lib has one live queue; app none).
    lib_queues = [k for k in values[LIB] if k[0] == "tickwheel_queue_ran_total"]
    assert len(lib_queues) == 1 and dict(lib_queues[0][1]).get("queue"), f"{mode}: lib's queue series {lib_queues}"
    assert values[LIB][lib_queues[0]] == 1, f"{mode}: lib's queue ran {values[LIB][lib_queues[0]]}"
    assert not any(k[0].startswith("tickwheel_queue_") for k in values["app"]), f"{mode}: app has no queue"
    if mode == "combined":
        twice = [n for n, c in per_family.items() if c != 1]
        assert not twice, f"combined: families parsed more than once: {twice}"
        for kind in ("HELP", "TYPE"):
            lines = collections.Counter(l.split(" ")[2] for l in text.splitlines() if l.startswith(f"# {kind} "))
            assert len(lines) == len(per_family), f"combined: {len(lines)} families with # {kind}, {len(per_family)} parsed"
            repeated = [n for n, c in lines.items() if c != 1]
            assert not repeated, f"combined: # {kind} more than once for {repeated}"
    else:
        # The concatenation: each family once per text (the queue families
        # only in lib's: app has no queue).
        assert all(c == (1 if n.startswith("tickwheel_queue_") else 2) for n, c in per_family.items()), \
            f"concat: families {per_family}"
    return len(families), len(seen)


def main():
    global EXPECTED_VERSION
    emit = sys.argv[1]
    EXPECTED_VERSION = sys.argv[2]
    for mode in ("concat", "combined"):
        text = subprocess.run([emit, mode], check=True, capture_output=True, text=True, timeout=60).stdout
        fams, series = check(mode, text)
        print(f"{mode}: OK, {fams} families, {series} series from 2 runtimes ({len(text)} bytes)")


EXPECTED_VERSION = None
if __name__ == "__main__":
    main()
