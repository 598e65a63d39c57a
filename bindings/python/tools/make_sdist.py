#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Makes the Python sdist, tickwheel-<version>.tar.gz: the library's source
(the top-level CMakeLists.txt, cmake/, include/, src/, capi/), this binding
(bindings/python without its tests) and the licenses, with a pyproject.toml
naming the in-tree build backend (tools/tickwheel_build.py: no build
requirement to download) and PKG-INFO. ``pip install`` of it builds the
library and the extension with CMake (see tickwheel_build.py), offline.
Reproducible: sorted members, fixed owner, mode and time (SOURCE_DATE_EPOCH
when set). Called by scripts/build-wheel.sh --sdist.

    make_sdist.py --source <repo> --out dist
"""

import argparse
import gzip
import io
import os
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tickwheel_build  # noqa: E402

# What the sdist carries, relative to the source root (directories: all their files).
INCLUDE = [
    "CMakeLists.txt", "LICENSE-MIT", "LICENSE-APACHE", "cmake", "include", "src", "capi",
    "bindings/python/CMakeLists.txt", "bindings/python/README.md", "bindings/python/src",
    "bindings/python/tickwheel", "bindings/python/tools",
]
SKIP_DIRS = {"__pycache__", "build", ".git"}

PYPROJECT = """\
# SPDX-License-Identifier: MIT OR Apache-2.0
# The tickwheel sdist: pip builds it with the in-tree backend
# bindings/python/tools/tickwheel_build.py (CMake builds the library and the
# extension; nothing to download: no build requirement).
[build-system]
requires = []
build-backend = "tickwheel_build"
backend-path = ["bindings/python/tools"]

[project]
name = "tickwheel"
version = "%(version)s"
description = "%(summary)s"
readme = "bindings/python/README.md"
requires-python = ">=3.8"
license = { text = "MIT OR Apache-2.0" }
"""


def files(root):
    out = []
    for rel in INCLUDE:
        path = os.path.join(root, rel)
        if os.path.isfile(path):
            out.append(rel)
            continue
        if not os.path.isdir(path):
            raise SystemExit("make_sdist: %s is missing" % path)
        for d, dirs, names in os.walk(path):
            dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS)
            for n in sorted(names):
                if n.endswith((".pyc", ".pyo")):
                    continue
                out.append(os.path.relpath(os.path.join(d, n), root))
    return sorted(set(out))


def make_sdist(root, out_dir):
    """Writes <out_dir>/tickwheel-<version>.tar.gz from the tree at ``root``; returns its path."""
    ver = tickwheel_build.version(root)
    base = "tickwheel-%s" % ver
    mtime = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))  # 1980-01-01 by default
    generated = {
        "pyproject.toml": (PYPROJECT % {"version": ver, "summary": tickwheel_build.SUMMARY}).encode(),
        "PKG-INFO": tickwheel_build.metadata(ver, ">=3.8", root).encode(),
    }
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, base + ".tar.gz")
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        def add(name, data, mode):
            info = tarfile.TarInfo("%s/%s" % (base, name))
            info.size, info.mode, info.mtime = len(data), mode, mtime
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(data))
        for name in sorted(set(generated) | set(files(root))):
            if name in generated:
                add(name, generated[name], 0o644)
                continue
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                data = f.read()
            add(name, data, 0o755 if os.access(path, os.X_OK) else 0o644)
    part = out + ".part"
    with open(part, "wb") as f, gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=mtime) as gz:
        gz.write(raw.getvalue())
    os.replace(part, out)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", required=True, help="the repository root")
    ap.add_argument("--out", required=True, help="where the sdist goes")
    a = ap.parse_args()
    print(make_sdist(os.path.abspath(a.source), a.out))


if __name__ == "__main__":
    main()
