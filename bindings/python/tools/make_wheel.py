#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Packs the staged Python package (<build>/python/tickwheel: the .py files and
the compiled extension) into a self-contained wheel: libtickwheel.so.1 and
every library it needs beyond the C/C++ runtime of the base system (oneTBB's
libtbb.so.12, as `ldd` lists them) are copied next to the extension, and the
extension and those libraries get RUNPATH $ORIGIN (Debian's patchelf), so the
installed package needs no LD_LIBRARY_PATH and no installed tickwheel.
Called by scripts/build-wheel.sh (which builds the stage first).

    make_wheel.py --stage <build>/python/tickwheel --lib <build>/capi/libtickwheel.so.1
                  --source <repo> --out dist
"""

import argparse
import base64
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

# Provided by every Linux system a CPython extension runs on (glibc, the
# compiler runtime): never bundled.
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
    """The Debian copyright file of the package that ships ``path``, if any."""
    try:
        pkg = run(["dpkg", "-S", os.path.realpath(path)], stderr=subprocess.DEVNULL).split(":")[0]
    except (OSError, subprocess.CalledProcessError):
        return None, None
    f = "/usr/share/doc/%s/copyright" % pkg
    return (pkg, f) if os.path.isfile(f) else (pkg, None)


def metadata(source, version):
    readme = open(os.path.join(source, "bindings", "python", "README.md"), encoding="utf-8").read()
    lines = [
        "Metadata-Version: 2.1",
        "Name: tickwheel",
        "Version: %s" % version,
        "Summary: Python binding of tickwheel, a sharded hierarchical timing-wheel timer runtime "
        "(compiled extension; carries libtickwheel.so.1 and oneTBB)",
        "License: MIT OR Apache-2.0",
        "Keywords: timer,timing wheel,scheduler",
        "Requires-Python: ==%d.%d.*" % sys.version_info[:2],
        "Classifier: Development Status :: 5 - Production/Stable",
        "Classifier: Intended Audience :: Developers",
        "Classifier: Operating System :: POSIX :: Linux",
        "Classifier: Programming Language :: Python :: 3",
        "Classifier: Programming Language :: Python :: Implementation :: CPython",
        "Classifier: Programming Language :: C++",
        "Classifier: Topic :: Software Development :: Libraries",
        "Description-Content-Type: text/markdown",
        "",
        readme,
    ]
    return "\n".join(lines)


def record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stage", required=True, help="the staged package directory (<build>/python/tickwheel)")
    ap.add_argument("--lib", required=True, help="the built libtickwheel.so.1")
    ap.add_argument("--source", required=True, help="the repository root")
    ap.add_argument("--out", required=True, help="where the wheel goes")
    a = ap.parse_args()
    if shutil.which("patchelf") is None:
        sys.exit("make_wheel: patchelf not found (Debian: apt-get install patchelf)")

    init = open(os.path.join(a.stage, "__init__.py"), encoding="utf-8").read()
    version = re.search(r'^__version__ = "([^"]+)"', init, re.M).group(1)
    ext = glob.glob(os.path.join(a.stage, "_tickwheel.*.so"))
    if len(ext) != 1:
        sys.exit("make_wheel: expected one built extension in %s, found %r" % (a.stage, ext))
    ext = ext[0]
    # The tag of the interpreter the extension was built for (its suffix says so).
    suffix = os.path.basename(ext)[len("_tickwheel"):]
    if suffix != sysconfig.get_config_var("EXT_SUFFIX"):
        sys.exit("make_wheel: the extension %s is not for this interpreter (%s): run with the python it was "
                 "built for" % (ext, sysconfig.get_config_var("EXT_SUFFIX")))
    py = "cp%d%d" % sys.version_info[:2]
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    tag = "%s-%s-%s" % (py, py, plat)
    name = "tickwheel-%s-%s.whl" % (version, tag)
    distinfo = "tickwheel-%s.dist-info" % version

    with tempfile.TemporaryDirectory() as tmp:
        pkg = os.path.join(tmp, "tickwheel")
        os.makedirs(pkg)
        for f in sorted(os.listdir(a.stage)):
            src = os.path.join(a.stage, f)
            if os.path.isfile(src) and (f.endswith((".py", ".pyi", ".so")) or f == "py.typed"):
                shutil.copyfile(src, os.path.join(pkg, f))
        # The library and what it needs beyond the base system, by SONAME.
        bundled = {"libtickwheel.so.1": os.path.realpath(a.lib)}
        for soname, path in needed(a.lib):
            if not SYSTEM.match(soname):
                bundled[soname] = os.path.realpath(path)
        licenses = {}
        for soname, path in sorted(bundled.items()):
            dst = os.path.join(pkg, soname)
            shutil.copyfile(path, dst)
            os.chmod(dst, 0o755)
            run(["patchelf", "--set-rpath", "$ORIGIN", dst])
            if soname != "libtickwheel.so.1":
                deb, f = debian_copyright(path)
                if f:
                    licenses["%s.copyright" % deb] = f
        pkg_ext = os.path.join(pkg, os.path.basename(ext))
        run(["patchelf", "--set-rpath", "$ORIGIN", pkg_ext])
        # Every dependency of the extension now resolves inside the package or the base system.
        for soname, path in needed(pkg_ext):
            if not SYSTEM.match(soname) and os.path.dirname(path) != pkg:
                sys.exit("make_wheel: %s resolves %s outside the package (%s)" % (pkg_ext, soname, path))

        files = []  # (arcname, bytes)
        for f in sorted(os.listdir(pkg)):
            files.append(("tickwheel/%s" % f, open(os.path.join(pkg, f), "rb").read()))
        files.append(("%s/METADATA" % distinfo, metadata(a.source, version).encode()))
        files.append(("%s/WHEEL" % distinfo, ("Wheel-Version: 1.0\nGenerator: tickwheel make_wheel.py\n"
                                               "Root-Is-Purelib: false\nTag: %s\n" % tag).encode()))
        files.append(("%s/top_level.txt" % distinfo, b"tickwheel\n"))
        for lic in ("LICENSE-MIT", "LICENSE-APACHE"):
            files.append(("%s/licenses/%s" % (distinfo, lic), open(os.path.join(a.source, lic), "rb").read()))
        for arc, f in sorted(licenses.items()):
            files.append(("%s/licenses/%s" % (distinfo, arc), open(f, "rb").read()))
        record = [record_line(arc, data) for arc, data in files] + ["%s/RECORD,," % distinfo]
        files.append(("%s/RECORD" % distinfo, ("\n".join(record) + "\n").encode()))

        os.makedirs(a.out, exist_ok=True)
        out = os.path.join(a.out, name)
        tmp_out = out + ".part"
        with zipfile.ZipFile(tmp_out, "w", zipfile.ZIP_DEFLATED) as z:
            for arc, data in files:
                info = zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = (0o755 if arc.endswith(".so") or ".so." in arc else 0o644) << 16
                z.writestr(info, data)
        os.replace(tmp_out, out)
    print(out)


if __name__ == "__main__":
    main()
