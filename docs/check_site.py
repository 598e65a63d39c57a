#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""ctest docs_site_screenshot: opens the built documentation site in headless
Chromium and checks that its front page and a guide page render.

For each page: a screenshot (`chromium --headless=new --screenshot`) must be a
PNG of exactly the window's size that is not blank (decoded here: at least 2%
of its pixels differ from the background colour, and it has at least 32
colours: text, code, the sidebar), and the DOM Chromium builds
(`--dump-dom`) must have the sidebar navigation (furo's `sidebar-tree` with
links to the other pages), the search box (`sidebar-search`), the page's
own heading, and no Sphinx "problematic" node. The screenshots stay in --out
for people to look at.

Prints "TW-SKIP: ..." (ctest then marks the test skipped) when Chromium is
missing, or sphinx-build or doxygen (then ctest docs_site skipped building the
site).

Usage: check_site.py --html DIR --out DIR [--chromium PATH] [--sphinx-build PATH] [--doxygen PATH]
"""
import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

WIDTH, HEIGHT = 1280, 900
PAGES = [
    # (file under the site, a heading text it must contain)
    ("index.html", "tickwheel"),
    ("guide/concepts.html", "Concepts"),
]


def decode_png(path):
    """(width, height, rows of RGBA/RGB tuples) of a non-interlaced 8-bit PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        length, ctype = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if ctype == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", chunk)
        elif ctype == b"IDAT":
            idat += chunk
        pos += 12 + length
    width, height, depth, color, _, _, interlace = ihdr
    if depth != 8 or color not in (2, 6) or interlace:
        raise ValueError(f"unexpected PNG format depth={depth} color={color} interlace={interlace}")
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 255
            elif ftype == 2:
                line[x] = (line[x] + b) & 255
            elif ftype == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[x] = (line[x] + pred) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def check_png(path):
    width, height, bpp, rows = decode_png(path)
    problems = []
    if (width, height) != (WIDTH, HEIGHT):
        problems.append(f"size {width}x{height}, expected {WIDTH}x{HEIGHT}")
    counts = {}
    for row in rows[::3]:  # every third row, every pixel: enough to judge
        for x in range(0, len(row), bpp):
            px = row[x:x + 3]
            counts[px] = counts.get(px, 0) + 1
    total = sum(counts.values())
    background = max(counts.values())
    other = 1 - background / total
    if other < 0.02:
        problems.append(f"blank: {other:.2%} of the pixels differ from the background")
    if len(counts) < 32:
        problems.append(f"only {len(counts)} colours")
    return problems, f"{width}x{height}, {len(counts)} colours, {other:.1%} non-background"


def check_dom(dom, heading):
    problems = []
    for what, needle in (("sidebar navigation", 'class="sidebar-tree"'),
                         ("search box", 'class="sidebar-search"'),
                         ("page heading", heading)):
        if needle not in dom:
            problems.append(f"no {what} ({needle!r}) in the DOM")
    if dom.count('class="reference internal"') < 10:
        problems.append("fewer than 10 internal links: the navigation is missing")
    if 'class="problematic"' in dom:
        problems.append("a Sphinx 'problematic' node (a broken reference) is on the page")
    return problems


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--html", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--chromium", default=None)
    p.add_argument("--sphinx-build", default=None,
                   help="as the build found it: without it the site is not built (docs_site skips), nor checked")
    p.add_argument("--doxygen", default=None, help="likewise")
    a = p.parse_args()
    for tool, name, pkgs in ((a.sphinx_build, "sphinx-build", "python3-sphinx python3-myst-parser python3-breathe furo"),
                             (a.doxygen, "doxygen", "doxygen")):
        if tool is not None and (not tool or tool.endswith("NOTFOUND") or not os.path.exists(tool)):
            print(f"TW-SKIP: {name} not found (apt-get install {pkgs}): the site is not built, nor checked")
            return 0
    if a.chromium and a.chromium.endswith("NOTFOUND"):  # CMake's "<VAR>-NOTFOUND"
        a.chromium = None
    chromium = a.chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium or not os.path.exists(chromium):
        print("TW-SKIP: chromium not found (apt-get install chromium): the site's screenshot test is skipped")
        return 0
    os.makedirs(a.out, exist_ok=True)
    failed = False
    with tempfile.TemporaryDirectory(prefix="tw-chromium-") as profile:
        base = [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                "--no-first-run", "--disable-extensions", "--disable-sync", "--mute-audio",
                f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}",
                "--run-all-compositor-stages-before-draw", "--virtual-time-budget=5000"]
        for page, heading in PAGES:
            path = os.path.join(os.path.abspath(a.html), page)
            if not os.path.exists(path):
                print(f"FAIL {page}: {path} does not exist (build the site: target docs)")
                failed = True
                continue
            url = "file://" + path
            png = os.path.join(a.out, page.replace("/", "_").replace(".html", ".png"))
            if os.path.exists(png):
                os.remove(png)
            env = dict(os.environ, HOME=profile)
            try:
                shot = subprocess.run(base + [f"--screenshot={png}", url], env=env, timeout=120,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                dom = subprocess.run(base + ["--dump-dom", url], env=env, timeout=120,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            except subprocess.TimeoutExpired:
                print(f"FAIL {page}: chromium did not finish in 120 s")
                failed = True
                continue
            problems = []
            if shot.returncode != 0 or not os.path.exists(png):
                problems.append(f"no screenshot (exit {shot.returncode}): {shot.stdout[-2000:]}")
                summary = ""
            else:
                pp, summary = check_png(png)
                problems += pp
            if dom.returncode != 0:
                problems.append(f"--dump-dom failed (exit {dom.returncode}): {dom.stderr[-2000:]}")
            else:
                problems += check_dom(dom.stdout, heading)
                with open(png[:-4] + ".dom.html", "w") as f:
                    f.write(dom.stdout)
            if problems:
                failed = True
                print(f"FAIL {page}: " + "; ".join(problems))
            else:
                print(f"ok   {page}: {png} ({summary}); DOM has the sidebar, the search box and '{heading}'")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
