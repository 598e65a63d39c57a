#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""ctest capi_python_wheel: the wheel as a user gets it.

Builds the wheel with scripts/build-wheel.sh (reusing the build directory
given), copies it to a fresh directory, makes a venv there and installs it
offline (pip --no-index, nothing but the wheel), then runs the binding's
suite (a copy of bindings/python/tests and examples) with the venv's python,
in a clean environment: env -i with PATH=/usr/bin:/bin, HOME the temp dir,
no LD_LIBRARY_PATH, TICKWHEEL_LIB, PYTHONPATH or PKG_CONFIG_PATH, the working
directory outside the source and build trees. The package must load the
library the wheel carries (tickwheel.library_path inside the venv), and every
library the extension needs must resolve inside the package or the base system.
Prints "TW-SKIP: ..." and exits 0 where the machine cannot run it (no venv/pip,
no patchelf).
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile


def log(msg):
    print("check_wheel: %s" % msg, flush=True)


def skip(msg):
    print("TW-SKIP: %s" % msg, flush=True)
    sys.exit(0)


def run(cmd, env, cwd, timeout=600):
    log("$ %s" % " ".join(cmd))
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    out = p.stdout.decode(errors="replace")
    if out.strip():
        print(out.rstrip(), flush=True)
    if p.returncode != 0:
        sys.exit("check_wheel: FAILED: exit %d: %s" % (p.returncode, " ".join(cmd)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True, help="the repository root")
    ap.add_argument("--build", required=True, help="the CMake build directory holding the extension")
    ap.add_argument("--work", required=True, help="a scratch directory for the built wheel (emptied)")
    ap.add_argument("--version", required=True)
    a = ap.parse_args()
    source, build, work = (os.path.abspath(p) for p in (a.source, a.build, a.work))
    if shutil.which("patchelf") is None:
        skip("patchelf not found (Debian: apt-get install patchelf)")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    # 1. The wheel, built by the script the README shows.
    dist = os.path.join(work, "dist")
    env = dict(os.environ, WHEEL_BUILD_DIR=build, WHEEL_OUT=dist, PYTHON=sys.executable, WHEEL_JOBS="2")
    run([os.path.join(source, "scripts", "build-wheel.sh")], env=env, cwd=source)
    wheels = glob.glob(os.path.join(dist, "tickwheel-%s-*.whl" % a.version))
    if len(wheels) != 1:
        sys.exit("check_wheel: FAILED: expected one tickwheel-%s wheel in %s: %r" % (a.version, dist, wheels))

    # 2. A clean place outside the source and build trees: the wheel, the tests
    #    and the examples, nothing else (removed after a pass).
    clean = tempfile.mkdtemp(prefix="tickwheel-wheel-test-")
    wheel = shutil.copy(wheels[0], clean)
    shutil.copytree(os.path.join(source, "bindings", "python", "tests"), os.path.join(clean, "tests"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copytree(os.path.join(source, "bindings", "python", "examples"), os.path.join(clean, "examples"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    bare = {"PATH": "/usr/bin:/bin", "HOME": clean, "LANG": "C.UTF-8", "PYTHONNOUSERSITE": "1",
            "PYTHONDONTWRITEBYTECODE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    venv = os.path.join(clean, "venv")
    p = subprocess.run([sys.executable, "-m", "venv", venv], env=bare, cwd=clean,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    vpy = os.path.join(venv, "bin", "python")
    if p.returncode != 0 or not os.path.exists(vpy):
        skip("`%s -m venv` failed (Debian: python3-venv): %s" % (sys.executable, p.stdout.decode()[-400:]))
    run([vpy, "-m", "pip", "install", "--no-index", "--no-cache-dir", wheel], env=bare, cwd=clean)

    # 3. It loads the library it carries, and nothing resolves outside the package but the base system.
    out = run([vpy, "-c", "import tickwheel, os; print(os.path.realpath(tickwheel.library_path)); "
               "print(tickwheel._ext.__file__); print(tickwheel.version())"], env=bare, cwd=clean)
    lib_path, ext_path = out.splitlines()[:2]
    pkg = os.path.realpath(os.path.dirname(ext_path))
    if not lib_path.startswith(os.path.realpath(venv) + os.sep) or os.path.dirname(lib_path) != pkg:
        sys.exit("check_wheel: FAILED: the installed package loaded %s, not the library it carries (in %s)"
                 % (lib_path, pkg))
    ldd = run(["ldd", ext_path], env=bare, cwd=clean)
    for line in ldd.splitlines():
        if "=>" not in line:
            continue
        name, _, where = line.strip().partition(" => ")
        where = where.split(" (")[0]
        if "not found" in line:
            sys.exit("check_wheel: FAILED: %s not found" % name)
        if name.startswith(("libtickwheel", "libtbb")) and os.path.dirname(os.path.realpath(where)) != pkg:
            sys.exit("check_wheel: FAILED: %s resolves to %s, outside the package" % (name, where))

    # 4. The binding's suite, against the installed wheel.
    env = dict(bare, TICKWHEEL_TEST_INSTALLED="1", TICKWHEEL_TEST_EXPECT_VERSION=a.version,
               TICKWHEEL_TEST_EXPECT_LIB=lib_path)
    tests = os.path.join(clean, "tests")
    run([vpy, "-m", "unittest", "discover", "-s", tests, "-t", tests], env=env, cwd=clean, timeout=900)
    log("OK: the wheel %s installed in a clean venv passed the suite, loading %s"
        % (os.path.basename(wheel), lib_path))
    shutil.rmtree(clean, ignore_errors=True)


if __name__ == "__main__":
    main()
