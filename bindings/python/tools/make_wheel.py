#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Packs a staged wheel extension (<build>/python-wheel/cp<XY>/tickwheel: the .py
files and _tickwheel.cpython-<XY>-<arch>-linux-gnu.so, built by the CMake
target tickwheel_python_cp<XY> with the library's objects and libstdc++
linked in) into a wheel a package index accepts:

* oneTBB's libtbb.so.12 -- the one shared library the extension needs beyond
  the system's -- is copied next to the extension, and both get RUNPATH
  $ORIGIN (Debian's patchelf): nothing to install, no LD_LIBRARY_PATH;
* the platform tag is the manylinux policy the files truly satisfy, as
  check_manylinux.py finds it from their ELF contents (every needed library
  bundled or on the policy's list, every GLIBC_/GLIBCXX_/CXXABI_/GCC_ version
  within it): manylinux_2_34_x86_64 for a g++ 12 / glibc 2.36 build; a build
  that satisfies none stops here (--allow-linux-tag: tag it linux_<arch>);
* the wheel is tagged cp<XY>-cp<XY>-<platform>, with Requires-Python
  ==<X>.<Y>.* and a RECORD of every file's sha256; oneTBB's Debian copyright
  file goes into its licenses/; the finished wheel is checked again
  (check_manylinux.py: ELF files and metadata).

Called by scripts/build-wheel.sh once per interpreter:

    make_wheel.py --stage <build>/python-wheel/cp38/tickwheel --source <repo> --out dist
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_manylinux  # noqa: E402
import tickwheel_build  # noqa: E402

# Never bundled: the C library and its loader, and what every manylinux
# policy lists (check_manylinux.py decides whether the versions fit).
SYSTEM = re.compile(r"^(linux-vdso|linux-gate|ld-linux.*|libc|libm|libdl|libpthread|librt|libutil|libresolv|"
                    r"libstdc\+\+|libgcc_s)\.so")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, universal_newlines=True, **kw).stdout


def needed(path):
    """(soname, resolved path) of what ldd lists for ``path`` (transitively)."""
    out = []
    for line in run(["ldd", path]).splitlines():
        m = re.match(r"\s*(\S+) => (\S+) \(", line)
        if m:
            out.append((m.group(1), m.group(2)))
        elif "not found" in line:
            sys.exit("make_wheel: %s: a library is not found: %s" % (path, line.strip()))
    return out


def debian_copyright(path):
    """The Debian package shipping ``path`` and its copyright file, if any."""
    try:
        pkg = run(["dpkg", "-S", os.path.realpath(path)], stderr=subprocess.DEVNULL).split(":")[0]
    except (OSError, subprocess.CalledProcessError):
        return None, None
    f = "/usr/share/doc/%s/copyright" % pkg
    return (pkg, f) if os.path.isfile(f) else (pkg, None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stage", required=True, help="the staged package (<build>/python-wheel/cp<XY>/tickwheel)")
    ap.add_argument("--source", required=True, help="the repository root")
    ap.add_argument("--out", required=True, help="where the wheel goes")
    ap.add_argument("--allow-linux-tag", action="store_true",
                    help="tag linux_<arch> when no manylinux policy is satisfied (default: fail)")
    a = ap.parse_args()
    if shutil.which("patchelf") is None:
        sys.exit("make_wheel: patchelf not found (Debian: apt-get install patchelf)")

    ver = tickwheel_build.version(a.source)
    exts = glob.glob(os.path.join(a.stage, "_tickwheel.cpython-*.so"))
    if len(exts) != 1:
        sys.exit("make_wheel: expected one built extension in %s, found %r" % (a.stage, exts))
    ext_name = os.path.basename(exts[0])
    m = re.match(r"^_tickwheel\.cpython-(\d)(\d+)-", ext_name)
    if not m:
        sys.exit("make_wheel: %s is not a CPython extension's name" % ext_name)
    major, minor = int(m.group(1)), int(m.group(2))
    py = "cp%d%d" % (major, minor)

    with tempfile.TemporaryDirectory() as tmp:
        pkg = os.path.join(tmp, "tickwheel")
        os.makedirs(pkg)
        for f in tickwheel_build.PACKAGE_FILES + (ext_name,):
            shutil.copyfile(os.path.join(a.stage, f), os.path.join(pkg, f))
        ext = os.path.join(pkg, ext_name)
        os.chmod(ext, 0o755)
        # What the extension needs beyond the base system, by SONAME: oneTBB.
        bundled = {soname: os.path.realpath(path) for soname, path in needed(exts[0]) if not SYSTEM.match(soname)}
        licenses = []
        for soname, path in sorted(bundled.items()):
            dst = os.path.join(pkg, soname)
            shutil.copyfile(path, dst)
            os.chmod(dst, 0o755)
            run(["patchelf", "--set-rpath", "$ORIGIN", dst])
            deb, f = debian_copyright(path)
            if f:
                with open(f, "rb") as fh:
                    licenses.append(("%s.copyright" % deb, fh.read()))
        run(["patchelf", "--set-rpath", "$ORIGIN", ext])
        for soname, path in needed(ext):
            if not SYSTEM.match(soname) and os.path.dirname(path) != pkg:
                sys.exit("make_wheel: %s resolves %s outside the package (%s)" % (ext, soname, path))

        # The tag the binaries satisfy.
        report = check_manylinux.check([tmp])
        plat = report["tag"]
        if plat.startswith("linux_") and not a.allow_linux_tag:
            lines = ["make_wheel: the binaries satisfy no manylinux policy:"]
            for policy, bad in report["violations"].items():
                lines += ["  %s: %s" % (policy, v) for v in bad]
            sys.exit("\n".join(lines))
        tag = "%s-%s-%s" % (py, py, plat)

        files = []
        for f in sorted(os.listdir(pkg)):
            with open(os.path.join(pkg, f), "rb") as fh:
                files.append(("tickwheel/%s" % f, fh.read()))
        out = tickwheel_build.write_wheel(a.out, ver, tag, files, "==%d.%d.*" % (major, minor), licenses,
                                          root=a.source, generator="tickwheel make_wheel.py")

    final = check_manylinux.check([out], tag=plat if not plat.startswith("linux_") else None)
    bad = final["metadata"] + final.get("requested_violations", [])
    if bad:
        sys.exit("make_wheel: %s fails its own check:\n  %s" % (out, "\n  ".join(bad)))
    print("%s  (%s; needs %s)" % (out, plat, ", ".join("%s_%s" % kv for kv in
                                                        final["summary"]["greatest_versions"].items())))


if __name__ == "__main__":
    main()
