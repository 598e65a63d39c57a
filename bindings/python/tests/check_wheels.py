#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""ctest capi_python_wheels_build, capi_python_wheel_cp3X, capi_python_sdist,
capi_python_readme: the Python packages as users get them (issue 33).

  check_wheels.py build  --source S --build B --work W --pythons "py1;py2..."
      scripts/build-wheel.sh --sdist with PYTHONS=... (one wheel per CPython
      3.8 .. 3.13 found at configure time; WHEEL_BUILD_DIR=B, the build tree,
      whose libtickwheel.a it reuses), into W/dist; each wheel is checked
      (check_manylinux.py: a manylinux tag its ELF files satisfy, WHEEL tags,
      RECORD hashes, Requires-Python).
  check_wheels.py wheel  --version 3.X --python PY --work W --source S [--suite full|subset]
      the cp3X wheel from W/dist installed offline (pip --no-index) into a
      fresh venv of PY under env -i (PATH=/usr/bin:/bin, HOME a temp dir, no
      LD_LIBRARY_PATH, TICKWHEEL_LIB, PYTHONPATH), then the binding's tests
      (a copy, run from outside the source and build trees) with the venv's
      python: the whole suite, or a representative subset (SUBSET). It must
      load the copy of the library inside the installed package.
      "TW-SKIP: ..." without PY (no CPython 3.X with its headers here).
  check_wheels.py sdist  --python PY --work W --source S
      W/dist/tickwheel-<v>.tar.gz pip-installed offline into a fresh venv
      under env -i, with no tickwheel library installed anywhere: pip builds
      it with the in-tree backend (CMake; ccache's settings are passed
      through when set); then imported and smoke-tested. Then with a
      prerequisite missing (cmake and the compiler off PATH; oneTBB's header
      shadowed by an #error): pip must stop at once -- before compiling --
      with tickwheel's one line naming what to install.
  check_wheels.py readme --python PY --work W --source S
      the README's install commands, verbatim (read from README.md), run by
      bash in a fresh copy of the source tree (git's tracked and untracked,
      not ignored files: the working tree as a clone would have it,
      uncommitted changes included), in a fresh venv's environment (its bin
      first on PATH, env -i otherwise); then the installed package is
      imported from elsewhere and starts a timer.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import check_support
from check_support import fail, log, skip

SUBSET = ["test_tickwheel", "test_extension", "test_asyncio", "test_queue", "test_loader",
          "test_exit_and_interrupts.TestExitOrders.test_runtime_opened_by_an_atexit_handler_registered_before_import",
          "test_exit_and_interrupts.TestCtrlC.test_stop_sync", "test_exit_and_interrupts.TestStartWindow",
          "test_exit_and_interrupts.TestExceptionsCounted"]
# Passed through to builds when set: a compiler cache makes the from-source
# builds (sdist, README route) fast on a machine that built tickwheel before.
# A program that starts a timer with the installed package and sees it fire
# (its `with` block open: a caller may add lines indented by four).
FIRES = ("import threading, tickwheel\n"
         "e = threading.Event()\n"
         "with tickwheel.Runtime(shards=1, workers=1) as rt:\n"
         "    rt.start(0.01, e.set)\n"
         "    assert e.wait(10)\n")
PASS_THROUGH = ("CMAKE_C_COMPILER_LAUNCHER", "CMAKE_CXX_COMPILER_LAUNCHER", "CCACHE_DIR", "CCACHE_BASEDIR",
                "CCACHE_NOHASHDIR", "CCACHE_MAXSIZE")


def run(cmd, env=None, cwd=None, timeout=1200, check=True):
    return check_support.run(cmd, check, env=env, cwd=cwd, timeout=timeout)


def bare_env(home, **extra):
    env = {"PATH": "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8", "PYTHONNOUSERSITE": "1",
           "PYTHONDONTWRITEBYTECODE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1",
           "PIP_NO_INDEX": "1"}
    for k in PASS_THROUGH:
        if os.environ.get(k):
            env[k] = os.environ[k]
    env.update(extra)
    return env


def make_venv(python, where, env):
    rc, out = run([python, "-m", "venv", where], env=env, check=False, timeout=600)
    vpy = os.path.join(where, "bin", "python")
    if rc != 0 or not os.path.exists(vpy):
        skip("`%s -m venv` failed (Debian: python3-venv): %s" % (python, out[-400:]))
    rc, _ = run([vpy, "-m", "pip", "--version"], env=env, check=False)
    if rc != 0:
        skip("the venv of %s has no pip (ensurepip missing; Debian: python3-venv)" % python)
    return vpy


def check_package(vpy, env, cwd, venv):
    """The installed package loads the library inside itself (the wheel's extension)."""
    _, out = run([vpy, "-c", "import os, tickwheel; print(os.path.realpath(tickwheel.library_path)); "
                 "print(os.path.realpath(tickwheel.__file__)); print(tickwheel._ext.STATIC)"], env=env, cwd=cwd)
    lib, init, static = out.strip().splitlines()[-3:]
    pkg = os.path.dirname(init)
    if not lib.startswith(os.path.realpath(venv) + os.sep) or os.path.dirname(lib) != pkg or static != "True":
        fail("the installed package uses %s (static: %s), not the library inside it (%s)" % (lib, static, pkg))
    return lib


# ---- build -----------------------------------------------------------------------------------
def cmd_build(a):
    dist = os.path.join(a.work, "dist")
    shutil.rmtree(dist, ignore_errors=True)
    pythons = [p for p in a.pythons.split(";") if p]
    if not pythons:
        skip("no CPython 3.8 .. 3.13 with its headers on this machine")
    env = dict(os.environ, WHEEL_BUILD_DIR=a.build, WHEEL_OUT=dist, PYTHONS=" ".join(pythons),
               WHEEL_JOBS=os.environ.get("WHEEL_JOBS", "2"))
    run([os.path.join(a.source, "scripts", "build-wheel.sh"), "--sdist"], env=env, cwd=a.source, timeout=3000)
    sys.path.insert(0, os.path.join(a.source, "bindings", "python", "tools"))
    import check_manylinux  # noqa: PLC0415
    report = {}
    for whl in sorted(glob.glob(os.path.join(dist, "*.whl"))):
        r = check_manylinux.check([whl])
        if r["metadata"] or not r["tag"].startswith("manylinux_"):
            fail("%s: tag %s, metadata %s, violations %s" % (whl, r["tag"], r["metadata"], r["violations"]))
        if not os.path.basename(whl).endswith("-%s.whl" % r["tag"]):
            fail("%s is not tagged %s, the tag its binaries satisfy" % (whl, r["tag"]))
        report[os.path.basename(whl)] = {"tag": r["tag"], "needs": r["summary"]}
    if len(report) != len(pythons):
        fail("%d interpreters, %d wheels: %r" % (len(pythons), len(report), sorted(report)))
    if not glob.glob(os.path.join(dist, "tickwheel-*.tar.gz")):
        fail("no sdist in %s" % dist)
    print(json.dumps(report, indent=1, sort_keys=True))
    log("OK: %d wheels and the sdist in %s" % (len(report), dist))


# ---- one wheel in its interpreter's venv ------------------------------------------------------------
def cmd_wheel(a):
    if not a.python:
        skip("no CPython %s with its headers on this machine (pyenv or python%s on PATH): its wheel is not "
             "built or tested" % (a.version, a.version))
    tag = "cp" + a.version.replace(".", "")
    wheels = glob.glob(os.path.join(a.work, "dist", "tickwheel-*-%s-%s-manylinux_*.whl" % (tag, tag)))
    if len(wheels) != 1:
        fail("expected one %s manylinux wheel in %s/dist, found %r (did capi_python_wheels_build run?)"
             % (tag, a.work, wheels))
    clean = tempfile.mkdtemp(prefix="tickwheel-%s-" % tag)
    try:
        wheel = shutil.copy(wheels[0], clean)
        for d in ("tests", "examples"):
            shutil.copytree(os.path.join(a.source, "bindings", "python", d), os.path.join(clean, d),
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        env = bare_env(clean)
        venv = os.path.join(clean, "venv")
        vpy = make_venv(a.python, venv, env)
        run([vpy, "-m", "pip", "install", "--no-index", "--no-cache-dir", wheel], env=env, cwd=clean)
        lib = check_package(vpy, env, clean, venv)
        tests = os.path.join(clean, "tests")
        tenv = dict(env, TICKWHEEL_TEST_INSTALLED="1", TICKWHEEL_TEST_EXPECT_VERSION=a.expect_version,
                    TICKWHEEL_TEST_EXPECT_LIB=lib)
        if a.suite == "full":
            run([vpy, "-m", "unittest", "discover", "-s", tests, "-t", tests], env=tenv, cwd=tests, timeout=1500)
        else:
            run([vpy, "-m", "unittest"] + SUBSET, env=tenv, cwd=tests, timeout=1500)
        log("OK: %s installed in a fresh venv of %s passed the %s suite" % (os.path.basename(wheel), a.python, a.suite))
    finally:
        shutil.rmtree(clean, ignore_errors=True)


# ---- the sdist -------------------------------------------------------------------------------------
def cmd_sdist(a):
    sdists = glob.glob(os.path.join(a.work, "dist", "tickwheel-*.tar.gz"))
    if len(sdists) != 1:
        fail("expected one sdist in %s/dist, found %r (did capi_python_wheels_build run?)" % (a.work, sdists))
    clean = tempfile.mkdtemp(prefix="tickwheel-sdist-")
    try:
        sdist = shutil.copy(sdists[0], clean)
        env = bare_env(clean, CCACHE_BASEDIR=clean) if os.environ.get("CMAKE_CXX_COMPILER_LAUNCHER") else bare_env(clean)
        # 1. Something missing: pip stops before compiling, with one line.
        venv = os.path.join(clean, "venv")
        vpy = make_venv(a.python, venv, env)
        shadow = os.path.join(clean, "shadow")
        os.makedirs(os.path.join(shadow, "oneapi", "tbb"))
        with open(os.path.join(shadow, "oneapi", "tbb", "task_arena.h"), "w") as f:
            f.write("#error oneTBB is not installed\n")
        cxx = os.path.join(clean, "c++-without-tbb")
        with open(cxx, "w") as f:
            f.write("#!/bin/sh\nexec g++ -isystem %s \"$@\"\n" % shadow)
        os.chmod(cxx, 0o755)
        nothing = os.path.join(clean, "empty-bin")
        os.makedirs(nothing)
        for what, extra, want in (
                ("no oneTBB", {"CXX": cxx}, "missing oneTBB's headers (libtbb-dev)"),
                ("no cmake, no compiler", {"PATH": nothing}, "missing cmake (>= 3.25), a C++20 compiler")):
            t0 = time.monotonic()
            rc, out = run([vpy, "-m", "pip", "install", "--no-index", "--no-cache-dir", sdist],
                          env=dict(env, **extra), cwd=clean, check=False, timeout=600)
            lines = [l for l in out.splitlines() if "tickwheel: cannot build from source" in l]
            if rc == 0 or not lines or want not in lines[0]:
                fail("%s: pip did not stop with tickwheel's line naming %r" % (what, want))
            if "apt-get install cmake g++ libtbb-dev libconcurrentqueue-dev pybind11-dev python3-dev" not in lines[0]:
                fail("%s: the line does not say what to install: %s" % (what, lines[0]))
            if re.search(r"fatal error:|error: #error|CMake Error", out):
                fail("%s: the build went on into CMake or the compiler" % what)
            log("OK: %s -> one line after %.1f s: %s" % (what, time.monotonic() - t0, lines[0].strip()))
        # 2. Everything there: pip builds and installs it (no library installed anywhere).
        rc, _ = run(["pkg-config", "--exists", "tickwheel"], env=env, check=False)
        if rc == 0:
            log("note: pkg-config knows an installed tickwheel; the sdist does not use it")
        run([vpy, "-m", "pip", "install", "--no-index", "--no-cache-dir", sdist], env=env, cwd=clean, timeout=2400)
        check_package(vpy, env, clean, venv)
        run([vpy, "-c", FIRES + "    t = rt.start(10, print); assert t.stop()\n"
             "print('sdist OK', tickwheel.__version__)\n"], env=env, cwd=clean)
        log("OK: the sdist builds offline with no library installed, and refuses at once when something is missing")
    finally:
        shutil.rmtree(clean, ignore_errors=True)


# ---- the README's route --------------------------------------------------------------------------------
def readme_command(source):
    """The Python install command of README.md's Install section, verbatim."""
    with open(os.path.join(source, "README.md"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^\d+\. Python: `([^`]+)`", text, re.M)
    if not m:
        fail("README.md has no '<n>. Python: `...`' line in its Install section")
    return m.group(1)


def copy_tree(source, dest):
    """The working tree as a clone has it: git's tracked files and the untracked ones not ignored."""
    out = subprocess.run(["git", "-C", source, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         check=True, stdout=subprocess.PIPE).stdout.decode()
    n = 0
    for rel in out.split("\0"):
        if not rel:
            continue
        src = os.path.join(source, rel)
        if not os.path.lexists(src) or os.path.isdir(src):
            continue  # deleted in the working tree; or a submodule
        dst = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.islink(src):
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copy2(src, dst)
        n += 1
    return n


def cmd_readme(a):
    if shutil.which("git") is None:
        skip("git not found")
    command = readme_command(a.source)
    clean = tempfile.mkdtemp(prefix="tickwheel-readme-")
    try:
        clone = os.path.join(clean, "tickwheel")
        log("copied %d files of the working tree" % copy_tree(a.source, clone))
        env = bare_env(clean)
        if os.environ.get("CMAKE_CXX_COMPILER_LAUNCHER"):
            env["CCACHE_BASEDIR"] = clean
        venv = os.path.join(clean, "venv")
        vpy = make_venv(a.python, venv, env)
        # As a user with the venv active: its bin first on PATH.
        uenv = dict(env, PATH=os.path.join(venv, "bin") + ":/usr/bin:/bin", VIRTUAL_ENV=venv)
        log("the README's command: %s" % command)
        run(["bash", "-c", command], env=uenv, cwd=clone, timeout=3000)
        check_package(vpy, env, clean, venv)
        run([vpy, "-c", FIRES + "print('README route OK', tickwheel.__version__)\n"], env=env, cwd=clean)
        log("OK: `%s` worked verbatim in a fresh copy of the tree" % command)
    finally:
        shutil.rmtree(clean, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["build", "wheel", "sdist", "readme"])
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--build")
    ap.add_argument("--pythons", default="")
    ap.add_argument("--python", default="")
    ap.add_argument("--version", default="")
    ap.add_argument("--expect-version", default="")
    ap.add_argument("--suite", choices=["full", "subset"], default="subset")
    a = ap.parse_args()
    a.source, a.work = os.path.abspath(a.source), os.path.abspath(a.work)
    os.makedirs(a.work, exist_ok=True)
    {"build": cmd_build, "wheel": cmd_wheel, "sdist": cmd_sdist, "readme": cmd_readme}[a.mode](a)


if __name__ == "__main__":
    main()
