# SPDX-License-Identifier: MIT OR Apache-2.0
"""The sdist's build backend (PEP 517, in-tree: ``backend-path``) and the wheel
writing both it and make_wheel.py use. No dependency beyond the standard
library: pip builds the sdist offline, with build isolation and an empty
``requires``.

The sdist (tools/make_sdist.py; ``scripts/build-wheel.sh --sdist``) carries
the library's source -- the top-level CMakeLists.txt, cmake/, include/, src/,
capi/ -- and this binding. ``pip install tickwheel-<version>.tar.gz`` then:

1. get_requires_for_build_wheel(): checks what the build needs, at once, and
   stops with one line naming what to install when something is missing --
   CMake 3.25 or newer, a C++20 compiler, oneTBB's headers (libtbb-dev),
   moodycamel's concurrentqueue.h (libconcurrentqueue-dev), pybind11's
   headers (pybind11-dev, or the pybind11 package) and the interpreter's
   Python.h (python3-dev) -- never failing later inside the compiler;
2. build_wheel(): configures the library alone with CMake (no tests, docs,
   examples, install rules), builds the extension for the running
   interpreter with the library's objects linked in
   (tickwheel_python_cp<XY>, bindings/python/CMakeLists.txt), and packs the
   wheel: tagged cp<XY>-cp<XY>-linux_<arch> (built against this machine's
   libraries: libtbb.so.12 and libstdc++ from the system, not bundled).

CMake's options can be added with the environment variable
TICKWHEEL_CMAKE_ARGS (split like a shell command line); TICKWHEEL_BUILD_JOBS
sets the build's parallelism (default: the CPU count).
"""

import base64
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
BINDING = os.path.dirname(HERE)  # bindings/python
ROOT = os.path.dirname(os.path.dirname(BINDING))  # the source tree (the sdist's root)
PACKAGE_FILES = ("__init__.py", "asyncio.py", "_loader.py", "_tickwheel.pyi", "py.typed")
SUMMARY = ("Python binding of tickwheel, a sharded hierarchical timing-wheel timer runtime "
           "(a compiled extension carrying the library)")
CLASSIFIERS = [
    "Development Status :: 5 - Production/Stable",
    "Intended Audience :: Developers",
    "Operating System :: POSIX :: Linux",
    "Programming Language :: Python :: 3",
    "Programming Language :: Python :: 3 :: Only",
    "Programming Language :: Python :: 3.8",
    "Programming Language :: Python :: 3.9",
    "Programming Language :: Python :: 3.10",
    "Programming Language :: Python :: 3.11",
    "Programming Language :: Python :: 3.12",
    "Programming Language :: Python :: 3.13",
    "Programming Language :: Python :: Implementation :: CPython",
    "Programming Language :: C++",
    "Topic :: Software Development :: Libraries",
]
INSTALL_LINE = ("on Debian/Ubuntu: apt-get install cmake g++ libtbb-dev libconcurrentqueue-dev pybind11-dev "
                "python3-dev")


# ---- metadata and wheel files --------------------------------------------------------------
def version(root=ROOT):
    """The package's version: tickwheel/__init__.py's __version__ (the library's)."""
    path = os.path.join(root, "bindings", "python", "tickwheel", "__init__.py")
    with open(path, encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if not m:
        raise SystemExit("tickwheel: no __version__ in %s" % path)
    return m.group(1)


def python_tag(version_info=None):
    v = version_info or sys.version_info
    return "cp%d%d" % (v[0], v[1])


def metadata(ver, requires_python, root=ROOT):
    """The METADATA (or PKG-INFO) text: Metadata-Version 2.1, the README as description."""
    with open(os.path.join(root, "bindings", "python", "README.md"), encoding="utf-8") as f:
        readme = f.read()
    lines = ["Metadata-Version: 2.1", "Name: tickwheel", "Version: %s" % ver, "Summary: %s" % SUMMARY,
             "License: MIT OR Apache-2.0", "Keywords: timer,timing wheel,scheduler",
             "Requires-Python: %s" % requires_python]
    lines += ["Classifier: %s" % c for c in CLASSIFIERS]
    lines += ["Description-Content-Type: text/markdown", "", readme]
    return "\n".join(lines)


def record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def write_wheel(out_dir, ver, tag, files, requires_python, licenses=(), root=ROOT, generator="tickwheel_build"):
    """Writes tickwheel-<ver>-<tag>.whl into out_dir and returns its path.
    ``files``: [(arcname, bytes)] of the package; ``licenses``: [(name, bytes)]
    for the dist-info's licenses/. The WHEEL file says the tag, RECORD the
    sha256 and size of every file."""
    distinfo = "tickwheel-%s.dist-info" % ver
    files = list(files)
    files.append(("%s/METADATA" % distinfo, metadata(ver, requires_python, root).encode()))
    files.append(("%s/WHEEL" % distinfo, ("Wheel-Version: 1.0\nGenerator: %s\nRoot-Is-Purelib: false\nTag: %s\n"
                                          % (generator, tag)).encode()))
    files.append(("%s/top_level.txt" % distinfo, b"tickwheel\n"))
    for lic in ("LICENSE-MIT", "LICENSE-APACHE"):
        with open(os.path.join(root, lic), "rb") as f:
            files.append(("%s/licenses/%s" % (distinfo, lic), f.read()))
    for name, data in licenses:
        files.append(("%s/licenses/%s" % (distinfo, name), data))
    record = [record_line(arc, data) for arc, data in files] + ["%s/RECORD,," % distinfo]
    files.append(("%s/RECORD" % distinfo, ("\n".join(record) + "\n").encode()))
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, "tickwheel-%s-%s.whl" % (ver, tag))
    part = out + ".part"
    with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files:
            info = zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o755 if arc.endswith(".so") or ".so." in arc else 0o644) << 16
            z.writestr(info, data)
    os.replace(part, out)
    return out


# ---- what a build from source needs -----------------------------------------------------------
def _compiler():
    for c in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if c:
            path = shutil.which(shlex.split(c)[0])
            if path:
                return shlex.split(c)
    return None


def _pybind11_include():
    try:
        import pybind11  # noqa: PLC0415 -- optional: the system's headers otherwise
        return pybind11.get_include()
    except ImportError:
        return None


def _probe(cxx, code, flags=()):
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "probe.cpp")
        with open(src, "w", encoding="utf-8") as f:
            f.write(code)
        p = subprocess.run(cxx + ["-std=c++20", "-fsyntax-only", *flags, src], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=300)
        return p.returncode == 0


def missing_prerequisites():
    """What a build from source lacks: [] or a list of 'what (package)'."""
    missing = []
    cmake = shutil.which("cmake")
    if cmake is None:
        missing.append("cmake (>= 3.25)")
    else:
        out = subprocess.run([cmake, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             universal_newlines=True).stdout
        m = re.search(r"version (\d+)\.(\d+)", out)
        if not m or (int(m.group(1)), int(m.group(2))) < (3, 25):
            missing.append("cmake >= 3.25 (found %s)" % (m.group(0) if m else "an unknown version"))
    cxx = _compiler()
    if cxx is None:
        return missing + ["a C++20 compiler (g++ >= 11 or clang++ >= 14)"]
    if not _probe(cxx, "#include <span>\n#include <concepts>\n#include <atomic>\nint main() {}\n"):
        return missing + ["a C++20 compiler (g++ >= 11 or clang++ >= 14; %s cannot -std=c++20)" % cxx[0]]
    if not _probe(cxx, "#include <oneapi/tbb/task_arena.h>\n"):
        missing.append("oneTBB's headers (libtbb-dev)")
    if not (_probe(cxx, "#include <concurrentqueue/concurrentqueue.h>\n")
            or _probe(cxx, "#include <concurrentqueue.h>\n")):
        missing.append("moodycamel's concurrentqueue.h (libconcurrentqueue-dev)")
    inc = sysconfig.get_paths()["include"]
    if not os.path.isfile(os.path.join(inc, "Python.h")):
        missing.append("Python.h of %s (python3-dev, or python%d.%d-dev)" % ((sys.executable,) + sys.version_info[:2]))
    else:
        pyb = _pybind11_include()
        flags = ["-I" + inc] + (["-I" + pyb] if pyb else [])
        if not _probe(cxx, "#include <pybind11/pybind11.h>\n", flags):
            missing.append("pybind11's headers (pybind11-dev)")
    return missing


def check_prerequisites():
    missing = missing_prerequisites()
    if missing:
        print("tickwheel: cannot build from source: missing %s; %s" % (", ".join(missing), INSTALL_LINE),
              file=sys.stderr, flush=True)
        raise SystemExit(1)


# ---- PEP 517 ------------------------------------------------------------------------------------
def get_requires_for_build_wheel(config_settings=None):
    check_prerequisites()  # at once, before anything is compiled
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def _local_tag():
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "%s-%s-%s" % (python_tag(), python_tag(), plat)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    ver = version()
    distinfo = os.path.join(metadata_directory, "tickwheel-%s.dist-info" % ver)
    os.makedirs(distinfo, exist_ok=True)
    with open(os.path.join(distinfo, "METADATA"), "w", encoding="utf-8") as f:
        f.write(metadata(ver, "==%d.%d.*" % sys.version_info[:2]))
    with open(os.path.join(distinfo, "WHEEL"), "w", encoding="utf-8") as f:
        f.write("Wheel-Version: 1.0\nGenerator: tickwheel_build\nRoot-Is-Purelib: false\nTag: %s\n" % _local_tag())
    return os.path.basename(distinfo)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    check_prerequisites()
    tag = python_tag()
    build = os.path.join(ROOT, "build", "sdist-" + tag)
    cmake = shutil.which("cmake")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    args = [cmake, "-S", ROOT, "-B", build, *gen, "-DCMAKE_BUILD_TYPE=Release", "-DTICKWHEEL_WERROR=OFF",
            "-DTICKWHEEL_BUILD_TESTS=OFF", "-DTICKWHEEL_BUILD_BENCH=OFF", "-DTICKWHEEL_BUILD_STRESS=OFF",
            "-DTICKWHEEL_BUILD_EXAMPLES=OFF", "-DTICKWHEEL_BUILD_MAN=OFF", "-DTICKWHEEL_INSTALL=OFF",
            "-DTICKWHEEL_PYTHON_WHEEL_PYTHONS=" + sys.executable,
            "-DTICKWHEEL_PYTHON_WHEEL_STATIC_RUNTIME=OFF", "-DPython3_EXECUTABLE=" + sys.executable]
    cxx = _compiler()
    if cxx:
        args.append("-DCMAKE_CXX_COMPILER=" + shutil.which(cxx[0]))
    pyb = _pybind11_include()
    if pyb:
        args.append("-DTICKWHEEL_PYBIND11_INCLUDE=" + pyb)
    args += shlex.split(os.environ.get("TICKWHEEL_CMAKE_ARGS", ""))
    subprocess.run(args, check=True)
    jobs = os.environ.get("TICKWHEEL_BUILD_JOBS") or str(os.cpu_count() or 2)
    subprocess.run([cmake, "--build", build, "--target", "tickwheel_python_" + tag, "-j", jobs], check=True)
    stage = os.path.join(build, "python-wheel", tag, "tickwheel")
    ext = [n for n in os.listdir(stage) if n.startswith("_tickwheel.") and n.endswith(".so")]
    if len(ext) != 1:
        raise SystemExit("tickwheel: expected one built extension in %s, found %r" % (stage, ext))
    files = []
    for name in sorted(PACKAGE_FILES + tuple(ext)):
        with open(os.path.join(stage, name), "rb") as f:
            files.append(("tickwheel/" + name, f.read()))
    out = write_wheel(wheel_directory, version(), _local_tag(), files, "==%d.%d.*" % sys.version_info[:2])
    return os.path.basename(out)


def build_sdist(sdist_directory, config_settings=None):
    """An sdist of this tree (which is an sdist's, or the repository's)."""
    sys.path.insert(0, HERE)
    import make_sdist  # noqa: PLC0415

    return os.path.basename(make_sdist.make_sdist(ROOT, sdist_directory))


__all__ = ["get_requires_for_build_wheel", "get_requires_for_build_sdist", "prepare_metadata_for_build_wheel",
           "build_wheel", "build_sdist", "write_wheel", "metadata", "version"]
