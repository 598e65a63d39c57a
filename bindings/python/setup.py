# SPDX-License-Identifier: MIT OR Apache-2.0
"""Builds the compiled extension tickwheel._tickwheel from source, against an
installed libtickwheel (headers and libtickwheel.so.1) -- the from-source path
of `pip install bindings/python`. The metadata is in pyproject.toml.

Where the library comes from: pkg-config's `tickwheel` package (honouring
PKG_CONFIG_PATH: e.g. PKG_CONFIG_PATH=~/.local/lib/pkgconfig after `cmake
--install build --prefix ~/.local`), else the compiler's default paths (a
system install, /usr/local after `ldconfig`). A library outside the system's
directories is recorded in the extension's RUNPATH, so the installed package
finds it without LD_LIBRARY_PATH. pybind11's headers: the pybind11 Python
package when it is importable, else the system's (Debian: pybind11-dev).

For a self-contained wheel that carries the library, use
scripts/build-wheel.sh instead.
"""

import os
import shlex
import shutil
import subprocess

from setuptools import Extension, setup

SYSTEM_LIBDIRS = {"/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/local/lib",
                  "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                  "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu"}


def pkg_config(*args):
    tool = os.environ.get("PKG_CONFIG") or shutil.which("pkg-config") or shutil.which("pkgconf")
    if not tool:
        return None
    try:
        out = subprocess.run([tool, *args, "tickwheel"], check=True, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, timeout=30).stdout.decode()
    except (OSError, subprocess.SubprocessError):
        return None
    return shlex.split(out)


def pybind11_include():
    try:
        import pybind11  # noqa: PLC0415 -- optional: the Debian headers otherwise
        return [pybind11.get_include()]
    except ImportError:
        return []  # /usr/include/pybind11 (pybind11-dev), on the default path


cflags = pkg_config("--cflags") or []
libs = pkg_config("--libs")
libdir = (pkg_config("--variable=libdir") or [None])[0]
include_dirs = [f[2:] for f in cflags if f.startswith("-I")] + pybind11_include()
library_dirs = [f[2:] for f in (libs or []) if f.startswith("-L")]
runtime_dirs = [libdir] if libdir and os.path.realpath(libdir) not in SYSTEM_LIBDIRS else []
if libs is None:
    print("tickwheel setup.py: pkg-config does not know tickwheel: building against the compiler's default "
          "paths (set PKG_CONFIG_PATH to <prefix>/lib/pkgconfig for a library installed elsewhere)")

ext = Extension(
    "tickwheel._tickwheel",
    sources=["src/_tickwheel.cpp"],
    include_dirs=include_dirs,
    library_dirs=library_dirs,
    libraries=["tickwheel"],
    runtime_library_dirs=runtime_dirs,
    extra_compile_args=["-std=c++20", "-fvisibility=hidden", "-O2"],
    language="c++",
)

setup(ext_modules=[ext])
