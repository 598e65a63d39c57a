#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Prints what each failed test of a ctest run printed (its last lines).

Usage: scripts/ctest-failures.py BUILD_DIR [--lines N]

scripts/test.sh calls it after a preset's ctest failed, so that the end of
the suite's output -- what a CI log keeps when it keeps only a part -- names
every failed test with the tail of its output, not only a summary line.
Reads BUILD_DIR/Testing/Temporary/LastTestsFailed.log and LastTest.log.
"""
import argparse
import re
import pathlib
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--lines", type=int, default=60)
    a = ap.parse_args()
    tmp = pathlib.Path(a.build_dir) / "Testing" / "Temporary"
    failed_log, last_log = tmp / "LastTestsFailed.log", tmp / "LastTest.log"
    if not failed_log.exists() or not last_log.exists():
        print(f"(no ctest logs under {tmp})")
        return 0
    failed = [ln.split(":", 1)[1] for ln in failed_log.read_text(errors="replace").splitlines() if ":" in ln]
    # LastTest.log: per test, "N/M Test: NAME" ... "Output:" / dashes / the
    # output / "<end of output>" / "Test time = ..." / dashes / the verdict.
    outputs, name, buf, inside = {}, None, [], False
    verdicts = {}
    for ln in last_log.read_text(errors="replace").splitlines():
        if not inside and " Test: " in ln and ln.split(" Test: ", 1)[0].replace("/", "").strip().isdigit():
            name = ln.split(" Test: ", 1)[1]
        elif ln == "Output:" and name is not None:
            inside, buf = True, []
        elif inside and ln == "<end of output>":
            inside = False
            outputs[name] = buf[1:]  # (the dashes under "Output:")
        elif inside:
            buf.append(ln)
        elif name is not None and ln.startswith("Test ") and ln.endswith("."):
            verdicts[name] = ln
    for n in failed:
        out = outputs.get(n, [])
        print(f"----- FAILED: {n} ({verdicts.get(n, 'verdict not found')}; {len(out)} lines of output)")
        for ln in pick(out, a.lines):
            print("  " + ln[:400])
    return 0


# What says why: a gtest failure and its values, a checker's violation, a
# sanitizer's report, a CMake script's error.
WHY = re.compile(r"Failure|VIOLATION|Expected|Which is|WARNING: \w+Sanitizer|ERROR: \w+Sanitizer|runtime error:|"
                 r"CMake Error|FATAL|Assertion|terminate called|Timeout|differs|failed")


def pick(out, budget):
    """The lines that say why (each with the 5 after it), then the last
    10 lines, within `budget` lines; '...' marks what was left out."""
    keep = set()
    for i, ln in enumerate(out):
        if WHY.search(ln):
            keep.update(range(i, min(i + 6, len(out))))
        if len(keep) >= budget - 10:
            break
    keep.update(range(max(0, len(out) - 10), len(out)))
    lines, last = [], -1
    for i in sorted(keep):
        if i != last + 1:
            lines.append("...")
        lines.append(out[i])
        last = i
    return lines


if __name__ == "__main__":
    sys.exit(main())
