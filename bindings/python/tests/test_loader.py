# SPDX-License-Identifier: MIT OR Apache-2.0
"""How the package finds libtickwheel.so.1 (tickwheel/_loader.py), its version, and
(under ctest capi_python_pip) that the installed package is the one tested.

The search order is tested with fakes (no library, no pkg-config needed) and,
where it can be, with the real dynamic loader and pkg-config. Variables the
ctest drivers set:
  TICKWHEEL_TEST_EXPECT_VERSION  the project's version (tickwheel.h / CMake)
  TICKWHEEL_TEST_EXPECT_LIB      the library file the import must have loaded
  TICKWHEEL_TEST_INSTALLED       1: tickwheel must come from sys.prefix (a venv),
                                 not from the source tree beside this file
"""

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import tickwheel
from tickwheel import _loader

HERE = os.path.dirname(os.path.abspath(__file__))
SONAME = "libtickwheel.so.1"


def _version_number(major, minor=0, patch=0):
    return (major << 16) | (minor << 8) | patch


class FakeFunction:
    def __init__(self, result=0):
        self.result = result
        self.restype = None
        self.argtypes = None

    def __call__(self, *args):
        return self.result


class FakeLib:
    """Stands for a ctypes.CDLL: tw_version answers ``version``; ``missing`` names
    functions it lacks (getattr raises AttributeError as ctypes does)."""

    def __init__(self, name, version, missing=()):
        self.name = name
        self.missing = set(missing)
        self.tw_version = FakeFunction(version)

    def __getattr__(self, attr):
        if attr.startswith("tw_") and attr not in self.missing:
            fn = FakeFunction()
            setattr(self, attr, fn)
            return fn
        raise AttributeError("%s: undefined symbol: %s" % (self.name, attr))


class FakeSystem:
    """The libraries that "exist" (name or path -> FakeLib) and pkg-config's answer;
    records every open, close and pkg-config call in ``calls``."""

    def __init__(self, libs=None, libdir=None, why="package tickwheel was not found"):
        self.libs = libs or {}
        self.libdir = libdir
        self.why = why
        self.calls = []

    def open_lib(self, name):
        self.calls.append(("open", name))
        if name not in self.libs:
            raise OSError("%s: cannot open shared object file: No such file or directory" % name)
        return self.libs[name]

    def close_lib(self, lib):
        self.calls.append(("close", lib.name))

    def find_libdir(self, environ):
        self.calls.append(("pkg-config", environ.get("PKG_CONFIG_PATH")))
        return (self.libdir, "") if self.libdir else (None, self.why)

    def load(self, environ, version_major=1, prepare=None):
        def default_prepare(lib):
            for name in ("tw_runtime_create", "tw_timer_start_ex"):
                getattr(lib, name)
        return _loader.load(1, version_major, prepare or default_prepare, environ=environ,
                            open_lib=self.open_lib, find_libdir=self.find_libdir,
                            close_lib=self.close_lib)


V1 = _version_number(1, 2, 3)


class SearchOrderTest(unittest.TestCase):
    def test_tickwheel_lib_is_used_alone(self):
        lib = FakeLib("/x/libtw.so", V1)
        fs = FakeSystem({"/x/libtw.so": lib, SONAME: FakeLib(SONAME, V1)}, libdir="/p")
        got, path, tried = fs.load({"TICKWHEEL_LIB": "/x/libtw.so"})
        self.assertIs(got, lib)
        self.assertEqual(path, "/x/libtw.so")
        self.assertEqual(tried, [])
        self.assertEqual(fs.calls, [("open", "/x/libtw.so")])

    def test_bad_tickwheel_lib_is_an_error_not_a_fallback(self):
        fs = FakeSystem({SONAME: FakeLib(SONAME, V1)}, libdir="/p")
        with self.assertRaises(ImportError) as cm:
            fs.load({"TICKWHEEL_LIB": "/nowhere/libtickwheel.so.1"})
        msg = str(cm.exception)
        self.assertIn("TICKWHEEL_LIB=/nowhere/libtickwheel.so.1", msg)
        self.assertIn("No such file", msg)
        self.assertIn("nothing else was tried", msg)
        self.assertEqual(fs.calls, [("open", "/nowhere/libtickwheel.so.1")])

    def test_empty_tickwheel_lib_means_unset(self):
        fs = FakeSystem({SONAME: FakeLib(SONAME, V1)})
        _, path, _ = fs.load({"TICKWHEEL_LIB": ""})
        self.assertEqual(fs.calls, [("open", SONAME)])

    def test_loader_before_pkg_config(self):
        lib = FakeLib(SONAME, V1)
        fs = FakeSystem({SONAME: lib, "/p/" + SONAME: FakeLib("/p", V1)}, libdir="/p")
        got, _, tried = fs.load({})
        self.assertIs(got, lib)
        self.assertEqual(fs.calls, [("open", SONAME)])  # pkg-config not even asked
        self.assertEqual(tried, [])

    def test_pkg_config_libdir_when_the_loader_fails(self):
        lib = FakeLib("/p/lib/" + SONAME, V1)
        fs = FakeSystem({"/p/lib/" + SONAME: lib}, libdir="/p/lib")
        got, path, tried = fs.load({"PKG_CONFIG_PATH": "/p/lib/pkgconfig"})
        self.assertIs(got, lib)
        self.assertEqual(path, "/p/lib/" + SONAME)
        self.assertEqual(fs.calls, [("open", SONAME), ("pkg-config", "/p/lib/pkgconfig"),
                                    ("open", "/p/lib/" + SONAME)])
        self.assertEqual(len(tried), 1)
        self.assertIn("dynamic loader", tried[0])

    def test_wrong_major_is_refused_and_closed(self):
        old = FakeLib(SONAME, _version_number(0, 9, 0))
        good = FakeLib("/p/" + SONAME, V1)
        fs = FakeSystem({SONAME: old, "/p/" + SONAME: good}, libdir="/p")
        got, _, tried = fs.load({})
        self.assertIs(got, good)
        self.assertIn(("close", SONAME), fs.calls)
        self.assertIn("0.9.0", tried[0])
        self.assertIn("needs major 1", tried[0])

    def test_newer_major_is_refused_too(self):
        fs = FakeSystem({"/l": FakeLib("/l", _version_number(2, 0, 0))})
        with self.assertRaisesRegex(ImportError, r"2\.0\.0: major 2, this binding needs major 1"):
            fs.load({"TICKWHEEL_LIB": "/l"})
        self.assertEqual(fs.calls, [("open", "/l"), ("close", "/l")])

    def test_library_lacking_a_function_is_refused(self):
        fs = FakeSystem({SONAME: FakeLib(SONAME, V1, missing={"tw_timer_start_ex"})})
        with self.assertRaises(ImportError) as cm:
            fs.load({})
        self.assertIn("tw_timer_start_ex", str(cm.exception))
        self.assertIn("older than the binding", str(cm.exception))
        self.assertIn(("close", SONAME), fs.calls)

    def test_nothing_found_lists_every_attempt_in_order(self):
        fs = FakeSystem(why="`pkg-config --variable=libdir tickwheel` failed (exit 1): no tickwheel.pc")
        with self.assertRaises(ImportError) as cm:
            fs.load({"LD_LIBRARY_PATH": "/ld/path", "PKG_CONFIG_PATH": "/pc/path"})
        lines = str(cm.exception).splitlines()
        self.assertIn("cannot load the C library libtickwheel.so.1", lines[0])
        self.assertTrue(lines[1].startswith("  1. the dynamic loader (LD_LIBRARY_PATH=/ld/path"), lines)
        self.assertIn("No such file", lines[1])
        self.assertTrue(lines[2].startswith("  2. pkg-config (PKG_CONFIG_PATH=/pc/path)"), lines)
        self.assertIn("no tickwheel.pc", lines[2])
        self.assertIn("TICKWHEEL_LIB", lines[3])  # the advice names every way to point at it
        self.assertIn("PKG_CONFIG_PATH", lines[3])
        self.assertIn("LD_LIBRARY_PATH", lines[3])

    def test_pkg_config_libdir_without_the_library(self):
        fs = FakeSystem(libdir="/empty/lib")
        with self.assertRaises(ImportError) as cm:
            fs.load({})
        self.assertIn("libdir /empty/lib: /empty/lib/libtickwheel.so.1: cannot open", str(cm.exception))


class Completed:
    def __init__(self, returncode, stdout=b"", stderr=b""):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


class PkgConfigTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.tool = os.path.join(self.tmp, "pkg-config")
        with open(self.tool, "w") as f:
            f.write("#!/bin/sh\nexit 1\n")
        os.chmod(self.tool, 0o755)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_asks_for_libdir_with_the_callers_environment(self):
        seen = {}

        def run(cmd, **kw):
            seen["cmd"], seen["env"], seen["timeout"] = cmd, kw["env"], kw["timeout"]
            return Completed(0, b"/opt/tw/lib\n")

        env = {"PATH": self.tmp, "PKG_CONFIG_PATH": "/opt/tw/lib/pkgconfig"}
        self.assertEqual(_loader.pkg_config_libdir(env, run), ("/opt/tw/lib", ""))
        self.assertEqual(seen["cmd"], [self.tool, "--variable=libdir", "tickwheel"])
        self.assertEqual(seen["env"]["PKG_CONFIG_PATH"], "/opt/tw/lib/pkgconfig")
        self.assertIsNotNone(seen["timeout"])

    def test_pkg_config_variable_names_the_tool(self):
        seen = []
        env = {"PATH": self.tmp, "PKG_CONFIG": "/somewhere/x86_64-linux-gnu-pkg-config"}
        _loader.pkg_config_libdir(env, lambda cmd, **kw: seen.append(cmd) or Completed(0, b"/l"))
        self.assertEqual(seen[0][0], "/somewhere/x86_64-linux-gnu-pkg-config")

    def test_failure_reports_pkg_configs_error(self):
        env = {"PATH": self.tmp}
        libdir, why = _loader.pkg_config_libdir(
            env, lambda cmd, **kw: Completed(1, b"", b"Package tickwheel was not found"))
        self.assertIsNone(libdir)
        self.assertIn("exit 1", why)
        self.assertIn("Package tickwheel was not found", why)
        libdir, why = _loader.pkg_config_libdir(env, lambda cmd, **kw: Completed(0, b"\n"))
        self.assertIsNone(libdir)
        self.assertIn("empty libdir", why)

    def test_missing_tool_hung_tool_and_unrunnable_tool(self):
        empty = os.path.join(self.tmp, "empty")
        os.mkdir(empty)
        self.assertEqual(_loader.pkg_config_libdir({"PATH": empty}),
                         (None, "pkg-config (or pkgconf) is not on PATH"))

        def hang(cmd, **kw):
            raise subprocess.TimeoutExpired(cmd, kw["timeout"])

        libdir, why = _loader.pkg_config_libdir({"PATH": self.tmp}, hang)
        self.assertIsNone(libdir)
        self.assertIn("did not answer", why)

        def broken(cmd, **kw):
            raise PermissionError(13, "Permission denied")

        libdir, why = _loader.pkg_config_libdir({"PATH": self.tmp}, broken)
        self.assertIsNone(libdir)
        self.assertIn("Permission denied", why)


def _real_pkg_config():
    return shutil.which("pkg-config") or shutil.which("pkgconf")


class RealSearchTest(unittest.TestCase):
    """The real dynamic loader and pkg-config, with directories made for the test."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    @property
    def real(self):
        """A real libtickwheel.so.1: the one in use. A wheel's extension has the
        library's code inside it and exports none of its functions: there is no
        library file to load (issue 33's wheels)."""
        if tickwheel._ext.STATIC:
            self.skipTest("the installed wheel carries no libtickwheel.so.1 (the library is inside its extension)")
        return os.path.realpath(tickwheel.library_path)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def _env(self, **extra):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "PKG_CONFIG_PATH": self.tmp, "PKG_CONFIG_LIBDIR": self.tmp}
        env.update(extra)
        return env

    def test_nothing_found_real(self):
        # No libtickwheel.so.999 exists anywhere, and pkg-config searches only an
        # empty directory: both steps fail, with the loader's and pkg-config's words.
        with self.assertRaises(ImportError) as cm:
            _loader.load(999, 1, lambda lib: None, environ=self._env())
        msg = str(cm.exception)
        self.assertIn("libtickwheel.so.999", msg)
        self.assertRegex(msg, r"1\. the dynamic loader .*libtickwheel\.so\.999")
        self.assertRegex(msg, r"2\. pkg-config \(PKG_CONFIG_PATH=%s\)" % self.tmp)

    @unittest.skipUnless(_real_pkg_config(), "pkg-config is not installed")
    def test_pkg_config_prefix_real(self):
        libdir = os.path.join(self.tmp, "lib")
        os.makedirs(os.path.join(libdir, "pkgconfig"))
        os.symlink(self.real, os.path.join(libdir, SONAME))
        with open(os.path.join(libdir, "pkgconfig", "tickwheel.pc"), "w") as f:
            f.write("prefix=%s\nlibdir=${prefix}/lib\n\nName: tickwheel\nDescription: test\n"
                    "Version: %s\nLibs: -L${libdir} -ltickwheel\n" % (self.tmp, tickwheel.__version__))

        def no_loader(name):  # as if the loader's paths had no libtickwheel.so.1
            if "/" not in name:
                raise OSError("%s: cannot open shared object file" % name)
            return ctypes.CDLL(name)

        env = self._env(PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
        env.pop("PKG_CONFIG_LIBDIR")
        lib, path, tried = _loader.load(1, tickwheel.version()[0], lambda lib: None,
                                        environ=env, open_lib=no_loader)
        self.assertEqual(path, os.path.join(libdir, SONAME))
        self.assertEqual(lib.tw_version(), _version_number(*tickwheel.version()))
        self.assertEqual(len(tried), 1)

    def test_wrong_major_real(self):
        wrong = tickwheel.version()[0] + 1
        with self.assertRaisesRegex(ImportError, "this binding needs major %d" % wrong):
            _loader.load(1, wrong, lambda lib: None, environ={"TICKWHEEL_LIB": self.real})

    def test_import_error_when_tickwheel_lib_is_wrong(self):
        env = dict(os.environ, TICKWHEEL_LIB=os.path.join(self.tmp, "missing.so"))
        p = subprocess.run([sys.executable, "-c", "import tickwheel"], env=env, cwd=self.tmp,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        err = p.stderr.decode()
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("ImportError: tickwheel: cannot load the C library libtickwheel.so.1", err)
        self.assertIn("TICKWHEEL_LIB=%s" % env["TICKWHEEL_LIB"], err)

    def test_library_path_is_the_loaded_file(self):
        self.assertTrue(os.path.isfile(tickwheel.library_path), tickwheel.library_path)
        # The file the compiled extension is bound to (dladdr of a tw_* symbol):
        # TICKWHEEL_LIB's when set (loaded before the extension), else the one
        # the dynamic loader found (a wheel's copy beside the extension).
        self.assertEqual(os.path.realpath(tickwheel._ext.library_path()), os.path.realpath(tickwheel.library_path))
        if tickwheel._lib is not None:
            self.assertEqual(_loader.loaded_path(tickwheel._lib, "?"), tickwheel.library_path)


class PackageTest(unittest.TestCase):
    def test_version(self):
        v = tickwheel.__version__
        self.assertRegex(v, r"^\d+\.\d+\.\d+$")
        # The package is released with the library: the same major (else the
        # import had failed), and with the project's version when ctest says it.
        self.assertEqual(tickwheel.version()[0], int(v.split(".")[0]))
        expected = os.environ.get("TICKWHEEL_TEST_EXPECT_VERSION")
        if expected:
            self.assertEqual(v, expected, "bindings/python/tickwheel/__init__.py's __version__ "
                             "must equal the project's version")
            self.assertEqual(".".join(map(str, tickwheel.version())), expected)

    @unittest.skipUnless(os.environ.get("TICKWHEEL_TEST_EXPECT_LIB"), "no expected library given")
    def test_loaded_the_expected_library(self):
        self.assertEqual(os.path.realpath(tickwheel.library_path),
                         os.path.realpath(os.environ["TICKWHEEL_TEST_EXPECT_LIB"]))

    @unittest.skipUnless(os.environ.get("TICKWHEEL_TEST_INSTALLED") == "1", "not the installed package")
    def test_installed_package_is_tested(self):
        import importlib.metadata
        pkg = os.path.realpath(os.path.dirname(tickwheel.__file__))
        source = os.path.realpath(os.path.join(HERE, os.pardir, "tickwheel"))
        self.assertNotEqual(pkg, source, "the source tree's tickwheel was imported")
        self.assertTrue(pkg.startswith(os.path.realpath(sys.prefix) + os.sep), (pkg, sys.prefix))
        self.assertNotEqual(sys.prefix, sys.base_prefix, "not run in a venv")
        self.assertEqual(importlib.metadata.version("tickwheel"), tickwheel.__version__)
        meta = importlib.metadata.metadata("tickwheel")
        self.assertEqual(meta["Name"], "tickwheel")
        self.assertEqual(meta["License"], "MIT OR Apache-2.0")
        self.assertTrue(meta["Requires-Python"])
        self.assertTrue(meta["Summary"])


if __name__ == "__main__":
    unittest.main()
