#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""ctest capi_python_manylinux_check: the manylinux checker
(bindings/python/tools/check_manylinux.py) can fail, and its two ways of
reading ELF files agree.

Built from the build tree's own files -- the extension linked against the
shared libtickwheel.so.1 (RUNPATH into the build tree; GLIBCXX_3.4.30 through
libstdc++.so.6) and the library (which needs libtbb.so.12) --, each case must
give exactly the verdict it is made for:

  1. the extension alone: libtickwheel.so.1 neither bundled nor allowed, a
     RUNPATH outside the wheel;
  2. extension, library and libtbb.so.12 side by side, RUNPATHs untouched:
     bundled libraries found without $ORIGIN;
  3. the same with RUNPATH $ORIGIN everywhere: only GLIBCXX_3.4.30 is left,
     which manylinux_2_34 refuses and manylinux_2_35 allows -- the tag chosen
     is manylinux_2_35_x86_64;
  4. wheels written by tools/tickwheel_build.py: a good one passes; a wrong
     RECORD hash, a file missing from RECORD, a WHEEL Tag that is not the file
     name's and a Requires-Python that is not the cpXY tag's are each found.

pyelftools and readelf must read every file alike (skipped for pyelftools
where it cannot be imported, with a note).
"""

import argparse
import os
import shutil
import subprocess
import sys
import zipfile


def fail(msg):
    print("FAILED: %s" % msg, flush=True)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tools", required=True)
    ap.add_argument("--ext", required=True, help="the build tree's extension (linked against libtickwheel.so.1)")
    ap.add_argument("--lib", required=True, help="the built libtickwheel.so.1")
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    if shutil.which("patchelf") is None:
        print("TW-SKIP: patchelf not found (Debian: apt-get install patchelf)")
        return
    sys.path.insert(0, a.tools)
    import check_manylinux as cm  # noqa: PLC0415
    import tickwheel_build  # noqa: PLC0415

    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    tbb = subprocess.run(["ldd", os.path.realpath(a.lib)], check=True, stdout=subprocess.PIPE,
                         universal_newlines=True).stdout
    tbb = next(line.split("=>")[1].split("(")[0].strip() for line in tbb.splitlines() if "libtbb.so" in line)

    backends = ["readelf"] + (["pyelftools"] if cm._elftools() else [])
    if len(backends) == 1:
        print("note: pyelftools cannot be imported here: readelf only (Debian: python3-pyelftools)")

    def verdict(paths, tag="manylinux_2_34_x86_64"):
        results = [cm.check(paths, tag=tag, backend=b) for b in backends]
        first = results[0]
        for r in results[1:]:
            for key in ("tag", "summary", "violations", "requested_violations"):
                if r[key] != first[key]:
                    fail("readelf and pyelftools disagree on %s: %r vs %r" % (key, first[key], r[key]))
        return first

    def expect(name, report, contains, tag=None):
        bad = report["requested_violations"]
        for c in contains:
            if not any(c in v for v in bad):
                fail("%s: no violation mentioning %r in %r" % (name, c, bad))
        if tag is not None and report["tag"] != tag:
            fail("%s: tag %s, not %s" % (name, report["tag"], tag))
        print("OK %s: %d violations for manylinux_2_34, tag %s" % (name, len(bad), report["tag"]))

    # 1. the extension alone
    one = os.path.join(a.work, "one")
    os.makedirs(one)
    shutil.copy(a.ext, one)
    expect("extension alone", verdict([one]),
           ["needs libtickwheel.so.1, which manylinux_2_34 does not allow", "points outside the wheel",
            "GLIBCXX_3.4.30"], tag="linux_x86_64")
    # 2. side by side, RUNPATHs untouched
    two = os.path.join(a.work, "two")
    os.makedirs(two)
    shutil.copy(a.ext, two)
    shutil.copy(os.path.realpath(a.lib), os.path.join(two, "libtickwheel.so.1"))
    shutil.copy(os.path.realpath(tbb), os.path.join(two, "libtbb.so.12"))
    expect("bundled without $ORIGIN", verdict([two]),
           ["needs the bundled libtickwheel.so.1 without a RUNPATH of $ORIGIN",
            "needs the bundled libtbb.so.12 without a RUNPATH of $ORIGIN"], tag="linux_x86_64")
    # 3. RUNPATH $ORIGIN everywhere
    for f in os.listdir(two):
        subprocess.run(["patchelf", "--set-rpath", "$ORIGIN", os.path.join(two, f)], check=True)
    r = verdict([two])
    expect("bundled with $ORIGIN", r, ["needs GLIBCXX_3.4.30 (from libstdc++.so.6); manylinux_2_34 allows "
                                       "GLIBCXX_3.4.29 at most"], tag="manylinux_2_35_x86_64")
    if len(r["requested_violations"]) != 2:  # the extension's and the library's GLIBCXX_3.4.30, nothing else
        fail("bundled with $ORIGIN: unexpected violations %r" % r["requested_violations"])
    # 4. wheel metadata
    files = [("tickwheel/libtbb.so.12", open(os.path.realpath(tbb), "rb").read()),
             ("tickwheel/__init__.py", b"")]
    good = tickwheel_build.write_wheel(os.path.join(a.work, "good"), "1.0.0", "cp38-cp38-manylinux_2_34_x86_64",
                                       files, "==3.8.*", root=os.path.dirname(os.path.dirname(os.path.dirname(a.tools))))
    if cm.check([good])["metadata"]:
        fail("a good wheel has metadata violations: %r" % cm.check([good])["metadata"])

    def corrupt(name, edit, want):
        out = os.path.join(a.work, name)
        os.makedirs(out)
        dst = os.path.join(out, os.path.basename(good))
        with zipfile.ZipFile(good) as zin, zipfile.ZipFile(dst, "w") as zout:
            items = {i.filename: zin.read(i.filename) for i in zin.infolist()}
            for n, data in edit(items).items():
                zout.writestr(n, data)
        meta = cm.check([dst])["metadata"]
        if not any(want in m for m in meta):
            fail("%s: no metadata violation mentioning %r in %r" % (name, want, meta))
        print("OK %s: %s" % (name, [m for m in meta if want in m][0]))

    di = "tickwheel-1.0.0.dist-info"
    corrupt("bad-hash", lambda it: dict(it, **{"tickwheel/__init__.py": b"changed"}), "RECORD's hash or size")
    corrupt("unlisted", lambda it: dict(it, **{"tickwheel/extra.py": b""}), "is not in RECORD")
    corrupt("bad-tag", lambda it: dict(it, **{di + "/WHEEL": it[di + "/WHEEL"].replace(b"cp38-cp38", b"cp39-cp39")}),
            "WHEEL's Tag lines")
    corrupt("bad-requires", lambda it: dict(it, **{di + "/METADATA": it[di + "/METADATA"].replace(
        b"Requires-Python: ==3.8.*", b"Requires-Python: >=3.8")}), "Requires-Python is")
    print("OK: the checker finds every violation it is shown (%s)" % ", ".join(backends))


if __name__ == "__main__":
    main()
