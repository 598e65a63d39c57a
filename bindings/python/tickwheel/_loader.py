# SPDX-License-Identifier: MIT OR Apache-2.0
"""Finding and loading the C library libtickwheel.so.N for the tickwheel package.

The places searched, in this order (the first library that loads, has every
function the binding calls and has the right major version is used):

1. ``TICKWHEEL_LIB``: the path of the library file. When it is set (and not
   empty) it is the only place tried: a wrong path is an error, never a reason
   to quietly load some other copy.
2. The dynamic loader, by SONAME (``dlopen("libtickwheel.so.1")``): the
   directories of ``LD_LIBRARY_PATH``, then the ldconfig cache
   (``/etc/ld.so.conf``: ``/usr/local/lib`` and the system's library
   directories once ``ldconfig`` has run), then ``/lib`` and ``/usr/lib`` --
   the same library a C program linked with ``-ltickwheel`` would get.
3. pkg-config: ``<libdir>/libtickwheel.so.1`` with libdir from
   ``pkg-config --variable=libdir tickwheel`` (``$PKG_CONFIG``, else
   ``pkg-config`` or ``pkgconf`` on PATH; ``PKG_CONFIG_PATH`` and
   ``PKG_CONFIG_LIBDIR`` are honoured as pkg-config always does). This finds
   a prefix the loader does not know, e.g. ``cmake --install build --prefix
   ~/.local`` with ``PKG_CONFIG_PATH=~/.local/lib/pkgconfig``.

A library is refused when its ``tw_version()`` major differs from the
binding's (the package version's major), or when it lacks a function the
binding calls (an older library). When nothing is usable, ImportError says
what was tried, in order, and why each failed.

Nothing here imports the rest of the package: the functions take the
environment and the ways to open a library and to ask pkg-config as
parameters, so the search can be tested without the library.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from typing import Callable, List, Mapping, Optional, Tuple

__all__ = ["load", "soname", "pkg_config_libdir", "PKG_CONFIG_TIMEOUT_S"]

#: pkg-config gets this long to answer before the search goes on without it.
PKG_CONFIG_TIMEOUT_S = 10.0


def soname(abi_major: int) -> str:
    """The file name (and SONAME) of the library of ABI ``abi_major``."""
    return "libtickwheel.so.%d" % abi_major


def pkg_config_libdir(environ: Mapping[str, str],
                      run: Callable[..., "subprocess.CompletedProcess"] = subprocess.run
                      ) -> Tuple[Optional[str], str]:
    """``pkg-config --variable=libdir tickwheel`` in ``environ``.

    Returns (libdir, "") on success, else (None, why it gave none). Never
    raises for a missing or failing pkg-config.
    """
    tool = environ.get("PKG_CONFIG") or ""
    if tool:
        tool = shutil.which(tool, path=environ.get("PATH")) or tool
    else:
        tool = (shutil.which("pkg-config", path=environ.get("PATH"))
                or shutil.which("pkgconf", path=environ.get("PATH")) or "")
    if not tool:
        return None, "pkg-config (or pkgconf) is not on PATH"
    cmd = [tool, "--variable=libdir", "tickwheel"]
    try:
        p = run(cmd, env=dict(environ), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, timeout=PKG_CONFIG_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return None, "`%s` did not answer within %g s" % (" ".join(cmd), PKG_CONFIG_TIMEOUT_S)
    except OSError as e:
        return None, "cannot run `%s`: %s" % (" ".join(cmd), e)
    out = p.stdout.decode(errors="replace").strip() if p.stdout else ""
    if p.returncode != 0 or not out:
        err = p.stderr.decode(errors="replace").strip() if p.stderr else ""
        if p.returncode == 0:
            err = "an empty libdir"
        return None, "`%s` failed (exit %d): %s" % (" ".join(cmd), p.returncode,
                                                    err or "package tickwheel not found")
    return out, ""


def _dlclose(lib: ctypes.CDLL) -> None:
    try:
        import _ctypes
        _ctypes.dlclose(lib._handle)
    except Exception:  # noqa: BLE001 -- best effort: a refused library may stay mapped
        pass


def _check_version(lib: ctypes.CDLL, major: int) -> Optional[str]:
    fn = lib.tw_version
    fn.restype = ctypes.c_uint32
    fn.argtypes = []
    v = fn()
    found = (v >> 16, (v >> 8) & 0xFF, v & 0xFF)
    if found[0] != major:
        return "its tw_version() is %d.%d.%d: major %d, this binding needs major %d" % (
            found + (found[0], major))
    return None


def load(abi_major: int, version_major: int, prepare: Callable[[ctypes.CDLL], None],
         environ: Optional[Mapping[str, str]] = None,
         open_lib: Callable[[str], ctypes.CDLL] = ctypes.CDLL,
         find_libdir: Optional[Callable[[Mapping[str, str]], Tuple[Optional[str], str]]] = None,
         close_lib: Callable[[ctypes.CDLL], None] = _dlclose) -> Tuple[ctypes.CDLL, str, List[str]]:
    """Find, open and check the library (see the module's documentation for the order).

    ``prepare(lib)`` sets the binding's function signatures; an AttributeError
    from it (a missing function) refuses the library. Returns (the library,
    its path -- TICKWHEEL_LIB's value, the file the loader chose for the
    SONAME, or pkg-config's libdir joined with the SONAME --, the refused
    candidates). Raises ImportError listing every candidate tried and why it
    failed when none is usable.
    """
    env = os.environ if environ is None else environ
    name = soname(abi_major)
    tried: List[str] = []

    def attempt(how: str, what: str) -> Optional[ctypes.CDLL]:
        try:
            lib = open_lib(what)
        except OSError as e:
            tried.append("%s: %s" % (how, e))
            return None
        try:
            problem = _check_version(lib, version_major)
            if problem is None:
                prepare(lib)
        except AttributeError as e:
            problem = "it lacks a function this binding calls, it is older than the binding (%s)" % e
        if problem is None:
            return lib
        tried.append("%s: %s refused: %s" % (how, what, problem))
        close_lib(lib)
        return None

    path = env.get("TICKWHEEL_LIB")
    if path:
        lib = attempt("TICKWHEEL_LIB=%s" % path, path)
        if lib is not None:
            return lib, path, tried
        raise ImportError(_message(name, tried, "TICKWHEEL_LIB is set, so nothing else was tried: "
                                   "correct it, or unset it to search the loader's paths and pkg-config."))

    lib = attempt("the dynamic loader (LD_LIBRARY_PATH=%s, the ldconfig cache, /lib, /usr/lib)"
                  % (env.get("LD_LIBRARY_PATH") or "<unset>"), name)
    if lib is not None:
        return lib, loaded_path(lib, name), tried

    libdir, why = (find_libdir or pkg_config_libdir)(env)
    how = "pkg-config (PKG_CONFIG_PATH=%s)" % (env.get("PKG_CONFIG_PATH") or "<unset>")
    if libdir is None:
        tried.append("%s: %s" % (how, why))
    else:
        candidate = os.path.join(libdir, name)
        lib = attempt("%s libdir %s" % (how, libdir), candidate)
        if lib is not None:
            return lib, candidate, tried

    raise ImportError(_message(name, tried, "Install libtickwheel (e.g. `cmake --install build/release`, "
                               "then `ldconfig`), or set TICKWHEEL_LIB to the library's path, or "
                               "LD_LIBRARY_PATH or PKG_CONFIG_PATH to where it is installed."))


def _message(name: str, tried: List[str], advice: str) -> str:
    lines = ["tickwheel: cannot load the C library %s. Tried, in order:" % name]
    lines += ["  %d. %s" % (i, t) for i, t in enumerate(tried, 1)]
    lines.append(advice)
    return "\n".join(lines)


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def loaded_path(lib: ctypes.CDLL, default: str) -> str:
    """The file the loader mapped for ``lib`` (dladdr of tw_version), else ``default``."""
    try:
        dladdr = ctypes.CDLL(None).dladdr
        dladdr.restype = ctypes.c_int
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        info = _DlInfo()
        if dladdr(ctypes.cast(lib.tw_version, ctypes.c_void_p), ctypes.byref(info)) and info.dli_fname:
            return os.fsdecode(info.dli_fname)
    except Exception:  # noqa: BLE001 -- no dladdr, or not a real library: keep the default
        pass
    return default
