# SPDX-License-Identifier: MIT OR Apache-2.0
"""ctest capi_python_pip: pip-install bindings/python offline into a fresh venv and
run the Python test suite against the installed package.

  python3 check_pip_install.py --source bindings/python --work DIR --lib BUILT_LIB
                               --prefix INSTALL_PREFIX --libdir lib --version X.Y.Z

1. Copy the package's sources (not its tests) to DIR/src -- setuptools writes
   build/ and *.egg-info beside pyproject.toml, which must not land in the
   source tree -- and create DIR/venv with this interpreter (python -m venv).
2. Give the venv a build backend without any index: setuptools comes with the
   venv (ensurepip); setuptools before 70.1 also needs `wheel` to build a
   wheel, installed from Debian's /usr/share/python-wheels (python3-wheel-whl)
   when it is there. Only when that does not do, the venv is made again with
   --system-site-packages so that the interpreter's own setuptools and wheel
   (Debian: python3-setuptools, python3-wheel) build the package.
3. pip install --no-index --no-build-isolation DIR/src (compiling the extension
   against the library at INSTALL_PREFIX, found through pkg-config; its RUNPATH
   records that directory); check the metadata.
4. Run bindings/python/tests with the venv's python from DIR (so neither the
   source tree nor PYTHONPATH provides tickwheel), finding the library
   (a) through TICKWHEEL_LIB (the built library): the whole suite;
   (b) through pkg-config with PKG_CONFIG_PATH at INSTALL_PREFIX (the ctest
       fixture tw_installed installs there), and (c) through LD_LIBRARY_PATH
       at INSTALL_PREFIX: test_loader and the basic tests of test_tickwheel.
   Each run checks that the expected file was loaded (test_loader.py), except
   (b) when the system's loader already finds a libtickwheel.so.1 (which the
   search puts before pkg-config).

Prints "TW-SKIP: ..." (ctest then reports the test skipped) when the
interpreter cannot make a venv or no build backend can be had offline.
"""

import argparse
import glob
import os
import shutil
import sys

import check_support
from check_support import fail, log, skip

DEBIAN_WHEELS = "/usr/share/python-wheels"
SONAME = "libtickwheel.so.1"


def run(cmd, check=True, **kw):
    return check_support.run(cmd, check, ["<backend probe>" if c == BACKEND_PROBE else c for c in cmd], **kw)


def clean_env(**extra):
    """This process's environment without anything that could point Python or the
    loader at the source tree or another library, plus ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "TICKWHEEL_LIB",
                        "LD_LIBRARY_PATH", "PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR", "VIRTUAL_ENV")
           and not k.startswith("PIP_")}
    env.update(PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_NO_INPUT="1")
    env.update(extra)
    return env


BACKEND_PROBE = r"""
import sys
try:
    import setuptools
except ImportError:
    sys.exit("no setuptools")
v = tuple(int(x) for x in setuptools.__version__.split(".")[:2] if x.isdigit())
if v < (61, 0):
    sys.exit("setuptools %s is older than 61" % setuptools.__version__)
if v < (70, 1):
    try:
        import wheel  # noqa: F401 -- bdist_wheel, which setuptools < 70.1 lacks
    except ImportError:
        sys.exit("setuptools %s without the wheel package" % setuptools.__version__)
print("build backend: setuptools %s from %s" % (setuptools.__version__, setuptools.__file__))
"""


def make_venv(venv, system_site):
    shutil.rmtree(venv, ignore_errors=True)
    cmd = [sys.executable, "-m", "venv"] + (["--system-site-packages"] if system_site else []) + [venv]
    rc, out = run(cmd, check=False, env=clean_env())
    if rc != 0:
        skip("`%s -m venv` failed: the interpreter cannot make a venv with pip "
             "(Debian: apt-get install python3-venv)" % sys.executable)
    vpy = os.path.join(venv, "bin", "python")
    rc, _ = run([vpy, "-m", "pip", "--version"], check=False, env=clean_env())
    if rc != 0:
        skip("the venv of %s has no pip (Debian: apt-get install python3-venv)" % sys.executable)
    return vpy


def backend_ok(vpy):
    rc, out = run([vpy, "-c", BACKEND_PROBE], check=False, env=clean_env())
    return rc == 0, out.strip()


def venv_with_backend(venv):
    vpy = make_venv(venv, system_site=False)
    ok, why = backend_ok(vpy)
    if ok:
        return vpy
    wheels = sorted(glob.glob(os.path.join(DEBIAN_WHEELS, "wheel-*.whl")) +
                    glob.glob(os.path.join(DEBIAN_WHEELS, "setuptools-*.whl")))
    if wheels:
        log("the venv's build backend is incomplete (%s): installing %s from %s" % (
            why, " and ".join(os.path.basename(w).split("-")[0] for w in wheels), DEBIAN_WHEELS))
        run([vpy, "-m", "pip", "install", "--no-index", "--find-links", DEBIAN_WHEELS,
             "setuptools", "wheel"], check=False, env=clean_env())
        ok, why2 = backend_ok(vpy)
        if ok:
            return vpy
    log("the venv cannot build the package (%s): making it again with --system-site-packages, "
        "for the interpreter's own setuptools and wheel" % why)
    vpy = make_venv(venv, system_site=True)
    ok, why = backend_ok(vpy)
    if ok:
        return vpy
    skip("no build backend for an offline install with %s: %s (Debian: apt-get install "
         "python3-wheel-whl, or python3-setuptools python3-wheel for /usr/bin/python3)"
         % (sys.executable, why))


def loader_finds_soname(vpy):
    """Does the dynamic loader find libtickwheel.so.1 without LD_LIBRARY_PATH (a system install)?"""
    rc, _ = run([vpy, "-c", "import ctypes; ctypes.CDLL(%r)" % SONAME], check=False, env=clean_env())
    return rc == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--libdir", required=True)
    ap.add_argument("--version", required=True)
    a = ap.parse_args()
    source = os.path.abspath(a.source)
    tests = os.path.join(source, "tests")
    work = os.path.abspath(a.work)
    a.lib, a.prefix = os.path.abspath(a.lib), os.path.abspath(a.prefix)  # the tests run in work

    log("interpreter: %s (%s)" % (sys.executable, sys.version.split()[0]))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    src = os.path.join(work, "src")
    shutil.copytree(source, src, ignore=shutil.ignore_patterns(
        "tests", "__pycache__", "build", "*.egg-info", "dist", "*.pyc"))

    vpy = venv_with_backend(os.path.join(work, "venv"))
    # The extension is compiled against the installed library, found by setup.py
    # through pkg-config (the prefix of the fixture tw_installed).
    libdir = os.path.join(a.prefix, a.libdir)
    installed = os.path.join(libdir, SONAME)
    if not os.path.exists(installed):
        fail("%s does not exist: the fixture tw_installed (ctest capi_install) must run first" % installed)
    run([vpy, "-m", "pip", "install", "--no-index", "--no-build-isolation", "--no-cache-dir", src],
        env=clean_env(PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig")), cwd=work)
    _, out = run([vpy, "-m", "pip", "show", "tickwheel"], env=clean_env(), cwd=work)
    if "Version: %s\n" % a.version not in out:
        fail("the installed tickwheel's version is not %s (tickwheel/__init__.py's __version__ "
             "must equal the project's version)" % a.version)
    if "License: MIT OR Apache-2.0\n" not in out:
        fail("the installed tickwheel's License is not MIT OR Apache-2.0")

    unittest_cmd = [vpy, "-m", "unittest", "discover", "-s", tests, "-t", tests]
    # (b) and (c) only change where the library comes from: the loader's tests
    # (which check the file loaded) and the basic calls, not the whole suite again
    # (its process-spawning tests take most of its time on a busy machine).
    short_cmd = [vpy, "-m", "unittest", "test_loader", "test_tickwheel.TestBasics",
                 "test_tickwheel.TestCallbacks"]
    common = dict(TICKWHEEL_TEST_INSTALLED="1", TICKWHEEL_TEST_EXPECT_VERSION=a.version)
    empty = os.path.join(work, "empty")
    os.makedirs(empty)

    log("(a) the library through TICKWHEEL_LIB=%s" % a.lib)
    run(unittest_cmd, cwd=work, env=clean_env(TICKWHEEL_LIB=a.lib, TICKWHEEL_TEST_EXPECT_LIB=a.lib,
                                              **common))

    system_lib = loader_finds_soname(vpy)

    if shutil.which("pkg-config") or shutil.which("pkgconf"):
        expect = {}
        if system_lib:
            log("NOTE: the dynamic loader finds a %s of the system, which comes before pkg-config: "
                "(b) runs without checking which library was loaded" % SONAME)
        else:
            expect = dict(TICKWHEEL_TEST_EXPECT_LIB=installed)
        log("(b) the library through pkg-config, PKG_CONFIG_PATH=%s/pkgconfig" % libdir)
        run(short_cmd, cwd=work, env=clean_env(PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"),
                                               PYTHONPATH=tests, **expect, **common))
    else:
        log("NOTE: pkg-config is not installed: (b) is not run (Debian: apt-get install pkg-config)")

    log("(c) the library through LD_LIBRARY_PATH=%s" % libdir)
    run(short_cmd, cwd=work, env=clean_env(LD_LIBRARY_PATH=libdir, PKG_CONFIG_PATH=empty,
                                           PKG_CONFIG_LIBDIR=empty, TICKWHEEL_TEST_EXPECT_LIB=installed,
                                           PYTHONPATH=tests, **common))
    log("OK: pip-installed tickwheel %s passed with TICKWHEEL_LIB, %sLD_LIBRARY_PATH"
        % (a.version, "pkg-config and " if (shutil.which("pkg-config") or shutil.which("pkgconf")) else ""))


if __name__ == "__main__":
    main()
