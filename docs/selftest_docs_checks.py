#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""ctest docs_checks_selftest: the documentation's checkers can fail.

- check_samples.py over a scratch source tree must fail on an untagged C
  block, on a C sample that exits 1, on one that does not compile, on a
  Python sample that raises, and pass on a good one;
- the site's build (build_site.cmake) must fail on a page with a broken
  reference (Sphinx's warnings are errors) and pass without it;
- check_site.py's PNG check must call a blank PNG of the right size blank
  and a PNG of the wrong size wrong, and pass a busy one; its DOM check must
  miss the sidebar and the search box on a page without them.

Usage: selftest_docs_checks.py --lib LIBTICKWHEEL_SO --cc CC --cxx CXX --work DIR
           [--cmake CMAKE --doxygen DOXYGEN --doxyfile DOXYFILE --sphinx-build SPHINX_BUILD]
"""
import argparse
import os
import shutil
import struct
import subprocess
import sys
import zlib

here = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, here)
import check_site  # noqa: E402

GOOD_C = "#include <tickwheel/tickwheel.h>\nint main(void) { return tw_version() ? 0 : 1; }\n"


def tree(work, readme):
    root = os.path.join(work, "src")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "docs", "site"))
    os.symlink(os.path.join(os.path.dirname(here), "include"), os.path.join(root, "include"))
    os.symlink(os.path.join(os.path.dirname(here), "bindings"), os.path.join(root, "bindings"))
    with open(os.path.join(root, "README.md"), "w") as f:
        f.write(readme)
    return root


def samples(a, readme):
    root = tree(a.work, readme)
    p = subprocess.run([sys.executable, os.path.join(here, "check_samples.py"), "--source", root,
                        "--work", os.path.join(a.work, "samples"), "--lib", a.lib, "--cc", a.cc,
                        "--cxx", a.cxx, "--node", "", "--cargo", ""]
                       + (["--python-path", a.python_path] if a.python_path else []),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    return p.returncode, p.stdout


def png(path, width, height, pixel):
    rows = []
    for y in range(height):
        row = bytearray(b"\x00")
        for x in range(width):
            row += bytes(pixel(x, y))
        rows.append(bytes(row))
    raw = b"".join(rows)

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lib", required=True)
    p.add_argument("--cc", default="cc")
    p.add_argument("--cxx", default="c++")
    p.add_argument("--work", required=True)
    p.add_argument("--cmake", default="cmake")
    p.add_argument("--doxygen", default="")
    p.add_argument("--doxyfile", default="")
    p.add_argument("--sphinx-build", default="")
    p.add_argument("--python-path", default="", help="a build's staged Python package (<build>/python)")
    a = p.parse_args()
    a.lib = os.path.abspath(a.lib)
    a.work = os.path.abspath(a.work)
    os.makedirs(a.work, exist_ok=True)
    failures = []

    def expect(name, cond, detail=""):
        print(f"{'ok  ' if cond else 'FAIL'} {name}")
        if not cond:
            failures.append(name)
            if detail:
                print("    " + detail.strip().replace("\n", "\n    "))

    fence = "```"
    cases = [
        ("an untagged C block fails", f"{fence}c\n{GOOD_C}{fence}\n", "without a '<!-- sample"),
        ("a C sample exiting 1 fails", f"<!-- sample: run -->\n{fence}c\nint main(void) {{ return 1; }}\n{fence}\n",
         "exit 1"),
        ("a C sample that does not compile fails",
         f"<!-- sample: run -->\n{fence}c\nint main(void) {{ return tw_nonexistent(); }}\n{fence}\n", "compile"),
        ("a C++ sample with a warning fails (-Werror)",
         f"<!-- sample: compile -->\n{fence}cpp\nint main() {{ int unused; return 0; }}\n{fence}\n", "compile"),
        ("a Python sample that raises fails",
         f"<!-- sample: run -->\n{fence}python\nimport tickwheel\nraise SystemExit(tickwheel.version() and 3)\n{fence}\n",
         "exit 3"),
    ]
    for name, readme, needle in cases:
        rc, out = samples(a, readme)
        expect(name, rc != 0 and needle in out, out)
    rc, out = samples(a, f"<!-- sample: run -->\n{fence}c\n{GOOD_C}{fence}\n<!-- sample: fragment -->\n"
                         f"{fence}cpp\nnot a program\n{fence}\n")
    expect("a good C sample and a fragment pass", rc == 0 and "c run: 1" in out and "fragment: 1" in out, out)

    tools = [a.doxygen, a.doxyfile, a.sphinx_build]
    if all(t and not t.endswith("NOTFOUND") and os.path.exists(t) for t in tools):
        for broken in (True, False):
            root = os.path.join(a.work, "site-src")
            shutil.rmtree(root, ignore_errors=True)
            site = os.path.join(root, "docs", "site")
            shutil.copytree(os.path.join(here, "site", "_static"), os.path.join(site, "_static"))
            shutil.copy(os.path.join(here, "site", "conf.py"), site)
            with open(os.path.join(site, "index.md"), "w") as f:
                f.write("# Selftest\n\nSee {doc}`no-such-page`.\n" if broken else "# Selftest\n\nFine.\n")
            r = subprocess.run([a.cmake, f"-DDOXYGEN={a.doxygen}", f"-DDOXYFILE={a.doxyfile}",
                                f"-DSPHINX_BUILD={a.sphinx_build}", f"-DSOURCE_DIR={root}",
                                f"-DOUT={os.path.join(a.work, 'site-out')}", "-DVERSION=0.0.0",
                                "-P", os.path.join(here, "build_site.cmake")],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
            if broken:
                expect("the site's build fails on a broken reference",
                       r.returncode != 0 and "no-such-page" in r.stdout, r.stdout)
            else:
                expect("the site's build passes without it", r.returncode == 0, r.stdout)
    else:
        print("skip the site's build selftest: doxygen or sphinx-build not given or not found")

    W, H = check_site.WIDTH, check_site.HEIGHT
    blank = os.path.join(a.work, "blank.png")
    png(blank, W, H, lambda x, y: (255, 255, 255))
    problems, _ = check_site.check_png(blank)
    expect("a blank PNG is blank", any("blank" in p for p in problems), str(problems))
    small = os.path.join(a.work, "small.png")
    png(small, 64, 48, lambda x, y: ((x * 7) % 256, (y * 13) % 256, (x * y) % 256))
    problems, _ = check_site.check_png(small)
    expect("a PNG of the wrong size is refused", any("size 64x48" in p for p in problems), str(problems))
    busy = os.path.join(a.work, "busy.png")
    png(busy, W, H, lambda x, y: ((x * 7) % 256, (y * 13) % 256, (x ^ y) % 256))
    problems, _ = check_site.check_png(busy)
    expect("a busy PNG of the right size passes", not problems, str(problems))
    problems = check_site.check_dom("<html><body><h1>Concepts</h1></body></html>", "Concepts")
    expect("a DOM without the sidebar and the search box is refused",
           any("sidebar navigation" in p for p in problems) and any("search box" in p for p in problems),
           str(problems))
    if failures:
        print(f"{len(failures)} selftest(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
