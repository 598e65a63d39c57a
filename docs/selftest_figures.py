#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""The figures check can fail (ctest docs_figures_selftest): on a copy of
the README, the site's pages and docs/bench, each hand edit below must make
`scripts/figures.py --check` fail and name the edit, and `--write` must
repair what it owns (figures.json and the marked figures). Without this, a
check that silently matched nothing would pass forever.

  selftest_figures.py --source <repo> --work <scratch dir>
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys


def copy_tree(src, dst):
    if os.path.exists(dst):
        shutil.rmtree(dst)
    os.makedirs(dst)
    shutil.copy2(os.path.join(src, "README.md"), dst)
    shutil.copytree(os.path.join(src, "docs", "site"), os.path.join(dst, "docs", "site"),
                    ignore=shutil.ignore_patterns("_build", "__pycache__"))
    shutil.copytree(os.path.join(src, "docs", "bench"), os.path.join(dst, "docs", "bench"))


def run(figures, root, *args):
    p = subprocess.run([sys.executable, figures, "--root", root] + list(args), capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def edit(path, fn):
    with open(path, encoding="utf-8") as f:
        s = f.read()
    t = fn(s)
    assert t != s, "the edit of %s changed nothing" % path
    with open(path, "w", encoding="utf-8") as f:
        f.write(t)


def edit_json(path, fn):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    fn(doc)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)


def bump_first_marker(s):
    """The number inside the first inline figure marker, plus one in its last digit."""
    m = re.search(r"(<!-- fig:[^ ]+ -->)([^<]*?)(\d)([^<\d]*<!-- /fig -->)", s)
    return s[:m.start()] + m.group(1) + m.group(2) + str((int(m.group(3)) + 1) % 10) + m.group(4) + s[m.end():]


def bump_table_cell(s):
    """A number in the first row of the first generated table."""
    m = re.search(r"<!-- figtable:[a-z\-]+ -->\n\n\|[^\n]*\n\|[^\n]*\n(\|[^\n]*?\| )(\*\*)?(\d)", s)
    return s[:m.start(3)] + str((int(m.group(3)) + 1) % 10) + s[m.end(3):]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    figures = os.path.join(a.source, "scripts", "figures.py")
    root = os.path.join(a.work, "tree")
    bench = os.path.join(root, "docs", "bench")
    sys.path.insert(0, os.path.join(a.source, "bench", "suite"))
    import report  # noqa: E402,PLC0415

    copy_tree(a.source, root)
    rc, out = run(figures, root, "--check")
    if rc != 0:
        print("the unedited copy must pass, it did not:\n" + out)
        return 1

    def first_plot():
        return sorted(f for f in os.listdir(bench) if f.endswith(".png") and not f.startswith("scaling"))[0]

    cases = [  # (what, edit, text the failure must contain)
        ("a figure in the README edited by hand",
         lambda: edit(os.path.join(root, "README.md"), bump_first_marker), "README.md:"),
        ("a cell of a generated table on the benchmarks page edited by hand",
         lambda: edit(os.path.join(root, "docs", "site", "benchmarks.md"), bump_table_cell),
         "docs/site/benchmarks.md:"),
        ("a figure's value in figures.json edited by hand",
         lambda: edit_json(os.path.join(bench, "figures.json"),
                           lambda d: d["figures"]["capi.c.pair.1k"].update(value=1.0)),
         "capi.c.pair.1k differs from the data files"),
        ("a measurement in a data file edited by hand (figures.json no longer matches it)",
         lambda: edit_json(os.path.join(bench, "capi.json"),
                           lambda d: [r.update(median=r["median"] * 2, samples=[x * 2 for x in r["samples"]])
                                      for r in d["results"] if r["peer"] == "tickwheel-capi"]),
         "figures.json: figures capi.c"),
        ("a figure in the generated report (docs/bench/README.md) edited by hand",
         lambda: edit(os.path.join(bench, "README.md"), lambda s: re.sub(
             r"\*\*(\d)", lambda m: "**%d" % ((int(m.group(1)) + 1) % 10), s, count=1)),
         "docs/bench/README.md:"),
        ("a plot stamped with another run than its tables'",
         lambda: report.stamp_png(os.path.join(bench, first_plot()), "full-19700101T000000Z"),
         "drawn from run full-19700101T000000Z"),
        ("a plot drawn without a run id",
         lambda: open(os.path.join(bench, first_plot()), "wb").write(
             open(os.path.join(a.source, "docs", "bench", first_plot()), "rb").read().replace(
                 report.PNG_KEY, b"other-key----")),
         "not stamped with a run id"),
        ("a plot of one run beside a table of another",
         lambda: edit(os.path.join(root, "docs", "site", "benchmarks.md"),
                      lambda s: s.replace("](../bench/startstop.png)", "](../bench/scaling_expiry.png)", 1)),
         "a plot must come from the run of the table beside it"),
        ("a figure marker at the start of a line",
         lambda: edit(os.path.join(root, "docs", "site", "index.md"),
                      lambda s: s.replace("  about <!-- fig:", "  <!-- fig:", 1)),
         "a figure marker starts the line"),
        ("a marker naming a figure that does not exist",
         lambda: edit(os.path.join(root, "docs", "site", "index.md"),
                      lambda s: s.replace("<!-- fig:capi.c.pair.1m -->", "<!-- fig:capi.c.pair.2m -->", 1)),
         "no figure capi.c.pair.2m"),
        ("a figure quoted on a user page without a marker",
         lambda: edit(os.path.join(root, "docs", "site", "index.md"),
                      lambda s: s.replace("## Start here", "It costs 12.5 ns per pair.\n\n## Start here", 1)),
         "'12.5 ns' is a figure outside a marker"),
        ("a figure in a guide edited by hand (the timer model's costs)",
         lambda: edit(os.path.join(root, "docs", "site", "guide", "timer-model.md"), bump_first_marker),
         "docs/site/guide/timer-model.md:"),
        ("a cell of the concepts guide's delay table edited by hand",
         lambda: edit(os.path.join(root, "docs", "site", "guide", "concepts.md"), lambda s: re.sub(
             r"(\| 2 blocking callbacks \(= workers\) \| )(\d)",
             lambda m: m.group(1) + str((int(m.group(2)) + 1) % 10), s, count=1)),
         "docs/site/guide/concepts.md:"),
        ("a measurement in delay.json edited by hand",
         lambda: edit_json(os.path.join(bench, "delay.json"),
                           lambda d: [c.update(max_gap_ms=c["max_gap_ms"] + 500) for c in d["cases"]
                                      if c["case"] == "frozen"]),
         "figures delay.frozen.gap differs from the data files"),
        ("a figure quoted in a getting-started page without a marker",
         lambda: edit(os.path.join(root, "docs", "site", "start", "node.md"),
                      lambda s: s.replace("\n## ", "\nA pair costs 540 ns from Node.\n\n## ", 1)),
         "'540 ns' is a figure outside a marker"),
        ("a --quick run in the data files",
         lambda: edit_json(os.path.join(bench, "scaling.json"), lambda d: d["meta"].update(quick=True)),
         "is a --quick run"),
    ]
    failed = 0
    for what, do, expect in cases:
        copy_tree(a.source, root)
        do()
        rc, out = run(figures, root, "--check")
        if rc == 0 or expect not in out:
            print("NOT CAUGHT: %s (exit %d; expected %r in):\n%s" % (what, rc, expect, out))
            failed += 1
        else:
            line = next(x for x in out.splitlines() if expect in x)
            print("caught: %s\n    %s" % (what, line.strip()))
    # --write repairs what it owns: a hand-edited figure in a page, and figures.json
    copy_tree(a.source, root)
    edit(os.path.join(root, "README.md"), bump_first_marker)
    edit_json(os.path.join(bench, "figures.json"), lambda d: d["figures"]["capi.c.pair.1k"].update(value=1.0))
    rc, out = run(figures, root, "--write")
    rc2, out2 = run(figures, root, "--check")
    if rc != 0 or rc2 != 0:
        print("NOT REPAIRED by --write (exit %d, then --check %d):\n%s\n%s" % (rc, rc2, out, out2))
        failed += 1
    else:
        print("repaired by --write: a figure in the README and one in figures.json")
    print("%d of %d edits not caught" % (failed, len(cases) + 1) if failed else
          "every edit caught (%d) and repaired by --write" % len(cases))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
