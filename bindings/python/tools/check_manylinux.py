#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""The check auditwheel would make of a wheel's ELF files (auditwheel itself is
not installable here): which manylinux tag they truly satisfy.

For every ELF file of the wheel (or of a directory, or given files) it reads
the DT_NEEDED libraries, the DT_RUNPATH/DT_RPATH, the machine, and the symbol
versions it needs from each library (.gnu.version_r: GLIBC_2.34,
GLIBCXX_3.4.21, CXXABI_1.3.13, GCC_4.2.0 ...), with pyelftools when it can be
imported (Debian: python3-pyelftools; also found in /usr/lib/python3/
dist-packages by other interpreters) and readelf otherwise. Then, per
manylinux policy (PEP 600 names; the table below), a file is within the
policy when:

  * every library it needs is either in the wheel (bundled: found through a
    RUNPATH of $ORIGIN, or the wheel's own directory) or on the policy's list
    of system libraries (the C library, libm, libstdc++, libgcc_s, ...) -- the
    dynamic linker (ld-linux-*.so.*) is the C library's and always allowed;
  * every symbol version it needs from those system libraries is one the
    policy allows: GLIBC_ up to the policy's glibc, GLIBCXX_/CXXABI_/GCC_ up
    to what the policy's reference distribution's g++ runtime provides;
  * its RUNPATH names no directory outside the wheel (only $ORIGIN-relative
    ones), and its machine is the policy's architecture.

The wheel's tag is the oldest (most widely installable) policy every file
satisfies; ``linux_<arch>`` when none does. With --tag the given tag must be
satisfied (exit 1 otherwise, listing each violation). For a .whl it also
checks the wheel's own metadata: the WHEEL file's Tag lines are the file
name's tags, RECORD lists every file with its sha256 and size (and itself
without), and METADATA's Requires-Python admits exactly the interpreter of
a cpXY tag.

  check_manylinux.py dist/tickwheel-1.6.0-cp38-cp38-manylinux_2_34_x86_64.whl
  check_manylinux.py --tag manylinux_2_34_x86_64 <dir-or-files...>
  check_manylinux.py --json ...       (the report as JSON)
  check_manylinux.py --backend readelf|pyelftools ...
"""

import argparse
import base64
import csv
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

# ---- the policies ------------------------------------------------------------------------
# Source: PEP 600 (manylinux_x_y: "glibc x.y or newer", the tag's promise) and
# the policy table auditwheel enforces, pypa/auditwheel
# src/auditwheel/policy/manylinux-policy.json (read 2026-11; only the x86_64
# entries we may need, as the greatest version of each family -- auditwheel
# lists every version, and every listed one up to the greatest is allowed:
# glibc 2.19 .. 2.21 added no symbol version on x86_64, hence no gap).
#   glibc:   the newest GLIBC_ version the reference distribution's C library has.
#   GLIBCXX / CXXABI / GCC: the newest versions of libstdc++.so.6 and
#            libgcc_s.so.1 of that distribution's g++ (manylinux_2_28:
#            AlmaLinux 8, g++ 8; 2_31: Ubuntu 20.04, g++ 10; 2_34: AlmaLinux
#            9, g++ 11; 2_35: Ubuntu 22.04, g++ 12; 2_36: Debian 12, g++ 12).
#   extra:   the other versions of those families the policy lists (e.g.
#            CXXABI_TM_1, the transactional memory ABI; CXXABI_FLOAT128).
#   libs:    the system libraries a wheel may need without bundling them.
_LIBS_2_5 = ["libgcc_s.so.1", "libstdc++.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libc.so.6",
             "libnsl.so.1", "libutil.so.1", "libpthread.so.0", "libresolv.so.2", "libX11.so.6", "libXext.so.6",
             "libXrender.so.1", "libICE.so.6", "libSM.so.6", "libGL.so.1", "libgobject-2.0.so.0",
             "libgthread-2.0.so.0", "libglib-2.0.so.0", "libz.so.1", "libatomic.so.1", "libanl.so.1"]
_LIBS_2_12 = _LIBS_2_5 + ["libexpat.so.1"]
_LIBS_2_28 = _LIBS_2_12 + ["libmvec.so.1"]
POLICIES = [  # oldest first
    {"name": "manylinux_2_17", "aliases": ["manylinux2014"], "arch": "x86_64", "libs": _LIBS_2_12,
     "max": {"GLIBC": "2.17", "GLIBCXX": "3.4.19", "CXXABI": "1.3.7", "GCC": "4.8.0"},
     "extra": {"CXXABI": ["TM_1"]}},
    {"name": "manylinux_2_28", "aliases": [], "arch": "x86_64", "libs": _LIBS_2_28,
     "max": {"GLIBC": "2.28", "GLIBCXX": "3.4.24", "CXXABI": "1.3.11", "GCC": "7.0.0"},
     "extra": {"CXXABI": ["FLOAT128", "TM_1"]}},
    {"name": "manylinux_2_31", "aliases": [], "arch": "x86_64", "libs": _LIBS_2_28,
     "max": {"GLIBC": "2.31", "GLIBCXX": "3.4.28", "CXXABI": "1.3.12", "GCC": "7.0.0"},
     "extra": {"CXXABI": ["FLOAT128", "TM_1"]}},
    {"name": "manylinux_2_34", "aliases": [], "arch": "x86_64", "libs": _LIBS_2_28,
     "max": {"GLIBC": "2.34", "GLIBCXX": "3.4.29", "CXXABI": "1.3.13", "GCC": "7.0.0"},
     "extra": {"CXXABI": ["FLOAT128", "TM_1"]}},
    {"name": "manylinux_2_35", "aliases": [], "arch": "x86_64", "libs": _LIBS_2_28,
     "max": {"GLIBC": "2.35", "GLIBCXX": "3.4.30", "CXXABI": "1.3.13", "GCC": "12.0.0"},
     "extra": {"CXXABI": ["FLOAT128", "TM_1"]}},
    {"name": "manylinux_2_36", "aliases": [], "arch": "x86_64", "libs": _LIBS_2_28,
     "max": {"GLIBC": "2.36", "GLIBCXX": "3.4.30", "CXXABI": "1.3.13", "GCC": "12.0.0"},
     "extra": {"CXXABI": ["FLOAT128", "TM_1"], "GLIBC": ["ABI_DT_RELR"]}},
]
# The libraries whose symbol versions are policed, by family (what auditwheel
# checks: the versions a file needs from these libraries).
FAMILIES = ("GLIBC", "GLIBCXX", "CXXABI", "GCC")
MACHINES = {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64", "EM_386": "i686", "EM_PPC64": "ppc64le",
            "EM_S390": "s390x", "EM_ARM": "armv7l", "EM_RISCV": "riscv64"}
LOADER = re.compile(r"^ld-linux[-\w.]*\.so\.\d+$|^ld64\.so\.\d+$")


def vkey(v):
    return tuple(int(x) for x in v.split("."))


# ---- reading ELF files ----------------------------------------------------------------------
def _elftools():
    try:
        import elftools.elf.elffile  # noqa: F401
        return True
    except ImportError:
        pass
    # Debian's python3-pyelftools, from another interpreter (pure Python).
    for d in ("/usr/lib/python3/dist-packages",):
        if os.path.isdir(os.path.join(d, "elftools")):
            sys.path.append(d)
            try:
                import elftools.elf.elffile  # noqa: F401,F811
                return True
            except ImportError:
                sys.path.remove(d)
    return False


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def read_pyelftools(path):
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection
    info = {"path": path, "needed": [], "runpath": [], "soname": None, "versions": {}, "machine": None}
    with open(path, "rb") as f:
        elf = ELFFile(f)
        info["machine"] = MACHINES.get(elf["e_machine"], elf["e_machine"])
        info["class"] = elf.elfclass
        for sec in elf.iter_sections():
            if isinstance(sec, DynamicSection):
                for tag in sec.iter_tags():
                    if tag.entry.d_tag == "DT_NEEDED":
                        info["needed"].append(tag.needed)
                    elif tag.entry.d_tag in ("DT_RUNPATH", "DT_RPATH"):
                        info["runpath"] += (tag.runpath if tag.entry.d_tag == "DT_RUNPATH" else tag.rpath).split(":")
                    elif tag.entry.d_tag == "DT_SONAME":
                        info["soname"] = tag.soname
            elif isinstance(sec, GNUVerNeedSection):
                for verneed, auxs in sec.iter_versions():
                    info["versions"].setdefault(verneed.name, set()).update(a.name for a in auxs)
    return info


def read_readelf(path):
    readelf = shutil.which("readelf") or "readelf"
    info = {"path": path, "needed": [], "runpath": [], "soname": None, "versions": {}, "machine": None}
    out = subprocess.run([readelf, "-h", "-d", "-V", "--wide", path], check=True, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, env=dict(os.environ, LC_ALL="C")).stdout
    lib = None
    for line in out.splitlines():
        m = re.search(r"Machine:\s+(.*)", line)
        if m:
            name = m.group(1).strip()
            info["machine"] = {"Advanced Micro Devices X86-64": "x86_64", "AArch64": "aarch64",
                               "Intel 80386": "i686"}.get(name, name)
            continue
        m = re.search(r"Class:\s+ELF(\d+)", line)
        if m:
            info["class"] = int(m.group(1))
            continue
        m = re.search(r"\((NEEDED|RUNPATH|RPATH|SONAME)\)\s+\S.*?\[(.*)\]", line)
        if m:
            kind, value = m.groups()
            if kind == "NEEDED":
                info["needed"].append(value)
            elif kind == "SONAME":
                info["soname"] = value
            else:
                info["runpath"] += value.split(":")
            continue
        m = re.search(r"File:\s+(\S+)\s+Cnt:", line)
        if m:
            lib = m.group(1)
            info["versions"].setdefault(lib, set())
            continue
        m = re.search(r"Name:\s+(\S+)\s+Flags:", line)
        if m and lib is not None:
            info["versions"][lib].add(m.group(1))
    return info


def read_elf(path, backend):
    return read_pyelftools(path) if backend == "pyelftools" else read_readelf(path)


# ---- judging ------------------------------------------------------------------------------------
def needs(files):
    """Over every file: the system libraries needed (not bundled) and the
    symbol versions needed from them, by family -- plus the bundled ones."""
    bundled = {}
    for f in files:
        bundled[os.path.basename(f["path"])] = f
        if f["soname"]:
            bundled[f["soname"]] = f
    return bundled


def violations(files, policy, root):
    """What keeps ``files`` (read_elf() results, all of one wheel) from ``policy``."""
    bad = []
    bundled = needs(files)
    allowed = set(policy["libs"])
    for f in files:
        rel = os.path.relpath(f["path"], root)
        if f["machine"] != policy["arch"]:
            bad.append("%s: machine %s, not %s" % (rel, f["machine"], policy["arch"]))
        for d in f["runpath"]:
            if d and not d.startswith("$ORIGIN"):
                bad.append("%s: RUNPATH %s points outside the wheel" % (rel, d))
        external = set()
        for lib in f["needed"]:
            if lib in bundled:
                here = os.path.dirname(f["path"]) == os.path.dirname(bundled[lib]["path"])
                if not here or not any(d.startswith("$ORIGIN") for d in f["runpath"]):
                    bad.append("%s: needs the bundled %s without a RUNPATH of $ORIGIN beside it" % (rel, lib))
            elif LOADER.match(lib):
                external.add(lib)
            elif lib not in allowed:
                bad.append("%s: needs %s, which %s does not allow (bundle it)" % (rel, lib, policy["name"]))
            else:
                external.add(lib)
        for lib, versions in sorted(f["versions"].items()):
            if lib in bundled:
                continue  # the wheel's own library: its versions travel with it
            for v in sorted(versions):
                fam, _, num = v.partition("_")
                if fam not in FAMILIES:
                    continue
                if num in policy.get("extra", {}).get(fam, []):
                    continue
                if not re.match(r"^\d+(\.\d+)*$", num) or vkey(num) > vkey(policy["max"][fam]):
                    bad.append("%s: needs %s (from %s); %s allows %s_%s at most"
                               % (rel, v, lib, policy["name"], fam, policy["max"][fam]))
    return bad


def summary(files):
    """The greatest version of each family the files need from outside the wheel."""
    bundled = needs(files)
    most = {}
    libs = set()
    for f in files:
        libs.update(lib for lib in f["needed"] if lib not in bundled)
        for lib, versions in f["versions"].items():
            if lib in bundled:
                continue
            for v in versions:
                fam, _, num = v.partition("_")
                if fam in FAMILIES and re.match(r"^\d+(\.\d+)*$", num):
                    if fam not in most or vkey(num) > vkey(most[fam]):
                        most[fam] = num
    return {"system_libraries": sorted(libs), "greatest_versions": {k: most[k] for k in sorted(most)}}


def best_tag(files, root):
    """(the tag, {policy: its violations}) -- the oldest policy with none."""
    report = {}
    arch = files[0]["machine"] if files else "x86_64"
    for policy in POLICIES:
        report[policy["name"]] = violations(files, policy, root)
        if not report[policy["name"]]:
            return "%s_%s" % (policy["name"], policy["arch"]), report
    return "linux_%s" % arch, report


# ---- the wheel's metadata ----------------------------------------------------------------------
def check_wheel_metadata(whl):
    """Violations of the wheel's own files (WHEEL tags, RECORD, Requires-Python)."""
    bad = []
    name = os.path.basename(whl)
    m = re.match(r"^(?P<dist>[^-]+)-(?P<ver>[^-]+)(-\d[^-]*)?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$",
                 name)
    if not m:
        return ["%s: not a wheel file name" % name]
    tags = {"%s-%s-%s" % (py, abi, plat) for py in m["py"].split(".") for abi in m["abi"].split(".")
            for plat in m["plat"].split(".")}
    distinfo = "%s-%s.dist-info" % (m["dist"], m["ver"])
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        for need in ("WHEEL", "METADATA", "RECORD"):
            if "%s/%s" % (distinfo, need) not in names:
                bad.append("%s: no %s/%s" % (name, distinfo, need))
        if bad:
            return bad
        wheel = z.read(distinfo + "/WHEEL").decode()
        got = {line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")}
        if got != tags:
            bad.append("%s: WHEEL's Tag lines %s are not the file name's %s" % (name, sorted(got), sorted(tags)))
        if "Root-Is-Purelib: false" not in wheel:
            bad.append("%s: WHEEL does not say Root-Is-Purelib: false (a platform wheel)" % name)
        meta = z.read(distinfo + "/METADATA").decode()
        req = re.search(r"^Requires-Python: (.*)$", meta, re.M)
        pys = {t.split("-")[0] for t in tags}
        for py in pys:
            cp = re.match(r"^cp(\d)(\d+)$", py)
            if cp:
                want = "==%s.%s.*" % cp.groups()
                if not req or req.group(1).strip() != want:
                    bad.append("%s: Requires-Python is %r, not %r (the %s tag)"
                               % (name, req.group(1) if req else None, want, py))
        rows = list(csv.reader(io.StringIO(z.read(distinfo + "/RECORD").decode())))
        listed = {}
        for row in rows:
            if len(row) != 3:
                bad.append("%s: RECORD row %r" % (name, row))
                continue
            listed[row[0]] = row
        for n in names:
            if n.endswith("/"):
                continue
            row = listed.pop(n, None)
            if row is None:
                bad.append("%s: %s is not in RECORD" % (name, n))
                continue
            if n == distinfo + "/RECORD":
                if row[1] or row[2]:
                    bad.append("%s: RECORD lists itself with a hash" % name)
                continue
            data = z.read(n)
            digest = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            if row[1] != digest or row[2] != str(len(data)):
                bad.append("%s: RECORD's hash or size of %s is wrong" % (name, n))
        for n in listed:
            bad.append("%s: RECORD lists %s, which is not in the wheel" % (name, n))
    return bad


# ---- main ---------------------------------------------------------------------------------
def collect(paths, backend):
    """(root, [read_elf(f) for every ELF file under paths])."""
    files = []
    root = None
    for p in paths:
        if os.path.isdir(p):
            root = root or p
            for d, _, names in os.walk(p):
                for n in sorted(names):
                    f = os.path.join(d, n)
                    if not os.path.islink(f) and is_elf(f):
                        files.append(read_elf(f, backend))
        elif is_elf(p):
            root = root or os.path.dirname(p)
            files.append(read_elf(p, backend))
    return root or ".", files


def check(paths, tag=None, backend=None):
    """The report: {"tag", "files", "violations", "summary", "metadata"}."""
    if backend is None:
        backend = "pyelftools" if _elftools() else "readelf"
    elif backend == "pyelftools" and not _elftools():
        raise SystemExit("check_manylinux: pyelftools cannot be imported (Debian: python3-pyelftools)")
    tmp = None
    metadata = []
    try:
        if len(paths) == 1 and paths[0].endswith(".whl"):
            metadata = check_wheel_metadata(paths[0])
            tmp = tempfile.mkdtemp(prefix="check-manylinux-")
            with zipfile.ZipFile(paths[0]) as z:
                z.extractall(tmp)
            root, files = collect([tmp], backend)
        else:
            root, files = collect(paths, backend)
        best, report = best_tag(files, root)
        out = {"backend": backend, "tag": best, "files": [os.path.relpath(f["path"], root) for f in files],
               "summary": summary(files), "metadata": metadata,
               "violations": {k: v for k, v in report.items()}}
        if tag is not None:
            policy = next((p for p in POLICIES if "%s_%s" % (p["name"], p["arch"]) == tag or
                           any("%s_%s" % (a, p["arch"]) == tag for a in p["aliases"])), None)
            if policy is None:
                raise SystemExit("check_manylinux: no policy for tag %s" % tag)
            out["requested"] = tag
            out["requested_violations"] = violations(files, policy, root)
        return out
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="a .whl, or directories / ELF files")
    ap.add_argument("--tag", help="the platform tag they must satisfy, e.g. manylinux_2_34_x86_64")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ap.add_argument("--backend", choices=["pyelftools", "readelf"], help="default: pyelftools when importable")
    a = ap.parse_args(argv)
    out = check(a.paths, a.tag, a.backend)
    bad = list(out["metadata"]) + list(out.get("requested_violations", []))
    if a.json:
        print(json.dumps(out, indent=2, sort_keys=True))
    else:
        print("files (%s): %s" % (out["backend"], ", ".join(out["files"]) or "none"))
        print("needs: %s; versions: %s" % (", ".join(out["summary"]["system_libraries"]) or "nothing",
                                          ", ".join("%s_%s" % kv for kv in out["summary"]["greatest_versions"].items())))
        print("tag: %s" % out["tag"])
        for line in bad:
            print("VIOLATION: %s" % line)
    if not out["files"]:
        print("check_manylinux: no ELF file found", file=sys.stderr)
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
