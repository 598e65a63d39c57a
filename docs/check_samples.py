#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""ctest docs_samples: every code sample of the guide (docs/site/**/*.md) and
of README.md is compiled or run.

A fenced code block in C, C++, Python, JavaScript or Rust must be preceded by
a marker line (an HTML comment: invisible on GitHub and on the site):

    <!-- sample: run -->        a whole program: compiled and run (exit 0, bounded)
    <!-- sample: compile -->    a whole program that is only compiled (C, C++,
                                Rust), byte-compiled (Python) or `node --check`ed
    <!-- sample: fragment -->   not a program (a few lines of a larger one):
                                excluded; say why after a colon if it helps

A block of those languages without a marker fails the test, so no sample
slips through untested. Other languages (sh, cmake, text, ...) are not checked.

C is compiled as C11 and C++ as C++20 with -Wall -Wextra -Werror against the
build tree's headers and libtickwheel.so; Python runs with the source tree's
binding (PYTHONPATH: --python-path, a build's staged package) and TICKWHEEL_LIB; Node runs with the build tree's copy
of the binding (the one ctest capi_node installs koffi into; without it, and
without node, a Node sample is only `node --check`ed, and says so); Rust
builds a scratch crate with a path dependency on bindings/rust (offline).

In the sanitizer builds (ctest --preset asan / tsan) only the C and C++
samples are checked, built with the build's -fsanitize flags against its
instrumented library: a sample that leaks, races or has UB fails there.

Usage: check_samples.py --source DIR --work DIR --lib LIBTICKWHEEL_SO
           --cc CC --cxx CXX [--cflags FLAGS] [--langs c,cpp,...] [--python PY]
           [--node NODE] [--node-binding DIR] [--cargo CARGO] [--list] [--only TEXT]
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys

LANGS = {
    "c": "c", "cpp": "cpp", "c++": "cpp", "python": "python", "py": "python",
    "js": "node", "javascript": "node", "rust": "rust",
}
MODES = ("run", "compile", "fragment")
MARKER = re.compile(r"^\s*<!--\s*sample:\s*([a-z]+)\s*(?::\s*(.*?))?\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*\{?([A-Za-z0-9+_-]*)\}?\s*(.*)$")
RUN_TIMEOUT = 30      # seconds per program: every sample finishes in well under 1 s
BUILD_TIMEOUT = 300   # seconds per compile (a loaded 2-core machine)


class Sample:
    def __init__(self, path, line, lang, mode, why, code):
        self.path, self.line, self.lang, self.mode, self.why, self.code = path, line, lang, mode, why, code

    def name(self, root):
        return f"{os.path.relpath(self.path, root)}:{self.line}"


def extract(path):
    """The fenced blocks of `path` in LANGS: (samples, problems)."""
    samples, problems = [], []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    last_marker = None  # (line index, mode, why) of the last non-blank line if it was a marker
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            mm = MARKER.match(lines[i])
            if mm:
                last_marker = (i, mm.group(1), mm.group(2) or "")
            elif lines[i].strip():
                last_marker = None
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        start = i
        body = []
        i += 1
        while i < len(lines) and not (lines[i].strip().startswith(fence[0] * len(fence))
                                       and lines[i].strip().strip(fence[0]) == ""):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1  # the closing fence
        marker, last_marker = last_marker, None
        if lang not in LANGS:
            continue
        if marker is None:
            problems.append(f"{path}:{start + 1}: a ```{lang} block without a "
                            f"'<!-- sample: run|compile|fragment -->' line before it")
            continue
        if marker[1] not in MODES:
            problems.append(f"{path}:{marker[0] + 1}: unknown sample mode '{marker[1]}'")
            continue
        samples.append(Sample(path, start + 1, LANGS[lang], marker[1], marker[2], "\n".join(body) + "\n"))
    return samples, problems


def sources(root):
    files = [os.path.join(root, "README.md")]
    for d, _, names in os.walk(os.path.join(root, "docs", "site")):
        if "_build" in d:
            continue
        files += [os.path.join(d, n) for n in sorted(names) if n.endswith(".md")]
    return sorted(files)


def run(cmd, cwd, env=None, timeout=RUN_TIMEOUT, stdin=None):
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, timeout=timeout, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return "timeout", out + f"\n(killed after {timeout} s)"


def check(sample, idx, a, env):
    """Compiles/runs one sample. Returns (ok, what it did, output)."""
    d = os.path.join(a.work, f"{idx:03d}-{sample.lang}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    libdir = os.path.dirname(os.path.abspath(a.lib))
    inc = os.path.join(a.source, "include")
    if sample.lang in ("c", "cpp"):
        src = os.path.join(d, "sample.c" if sample.lang == "c" else "sample.cpp")
        with open(src, "w") as f:
            f.write(sample.code)
        exe = os.path.join(d, "sample")
        if sample.lang == "c" and a.c_with_cxx_driver:
            # compiled as C, linked by the C++ driver: a sanitized C++ library
            # needs the C++ parts of the sanitizer runtimes (UBSan's vptr checks)
            cmd, src_args = [a.cxx], ["-x", "c", src, "-x", "none"]
        elif sample.lang == "c":
            cmd, src_args = [a.cc], [src]  # the compiler's default dialect, as `cc first.c` gets
        else:
            cmd, src_args = [a.cxx, "-std=c++20"], [src]
        cmd += ["-Wall", "-Wextra", "-Werror"] + shlex.split(a.cflags) + [
                "-I", inc] + src_args + ["-o", exe, a.lib, f"-Wl,-rpath,{libdir}", "-pthread"]
        rc, out = run(cmd, d, timeout=BUILD_TIMEOUT)
        if rc != 0:
            return False, "compile", " ".join(cmd) + "\n" + out
        if sample.mode == "compile":
            return True, "compiled", out
        rc, out = run([exe], d, env=env)
        return rc == 0, "compiled, ran", out if rc == 0 else f"exit {rc}\n{out}"
    if sample.lang == "python":
        src = os.path.join(d, "sample.py")
        with open(src, "w") as f:
            f.write(sample.code)
        if sample.mode == "compile":
            rc, out = run([a.python, "-m", "py_compile", src], d, env=env)
            return rc == 0, "byte-compiled", out
        rc, out = run([a.python, src], d, env=env)
        return rc == 0, "ran", out if rc == 0 else f"exit {rc}\n{out}"
    if sample.lang == "node":
        # An ES module sample (top-level import) runs as one: sample.mjs.
        esm = re.search(r"^import\s", sample.code, re.M) is not None
        src = os.path.join(d, "sample.mjs" if esm else "sample.js")
        with open(src, "w") as f:
            f.write(sample.code)
        if not a.node:
            return None, "node not found", ""
        rc, out = run([a.node, "--check", src], d, env=env)
        if rc != 0 or sample.mode == "compile":
            return rc == 0, "node --check", out
        koffi = a.node_binding and os.path.isdir(os.path.join(a.node_binding, "node_modules", "koffi"))
        if not koffi:
            return True, "node --check only (no koffi in the build tree's binding: ctest capi_node installs it)", out
        mods = os.path.join(d, "node_modules")
        os.makedirs(mods)
        os.symlink(os.path.abspath(a.node_binding), os.path.join(mods, "tickwheel"))
        rc, out = run([a.node, src], d, env=env)
        return rc == 0, "ran", out if rc == 0 else f"exit {rc}\n{out}"
    if sample.lang == "rust":
        if not a.cargo:
            return None, "cargo not found", ""
        os.makedirs(os.path.join(d, "src"))
        with open(os.path.join(d, "src", "main.rs"), "w") as f:
            f.write(sample.code)
        with open(os.path.join(d, "Cargo.toml"), "w") as f:
            f.write('[package]\nname = "sample"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n'
                    f'[dependencies]\ntickwheel = {{ path = "{os.path.join(a.source, "bindings", "rust")}" }}\n')
        renv = dict(env, TICKWHEEL_LIB_DIR=libdir, CARGO_TARGET_DIR=os.path.join(a.work, "rust-target"),
                    # the crate's RPATH covers its own targets only, not a crate that depends on it
                    RUSTFLAGS=f"-C link-arg=-Wl,-rpath,{libdir}")
        verb = "build" if sample.mode == "compile" else "run"
        rc, out = run([a.cargo, verb, "--offline", "--quiet"], d, env=renv, timeout=BUILD_TIMEOUT)
        return rc == 0, f"cargo {verb}", out if rc == 0 else f"exit {rc}\n{out}"
    return False, "unknown language", ""


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--source", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--lib", required=True)
    p.add_argument("--cc", default="cc")
    p.add_argument("--cxx", default="c++")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--python-path", default=None,
                   help="where `import tickwheel` finds the binding with its compiled extension "
                        "(a build's <build>/python; default: <source>/bindings/python)")
    p.add_argument("--node", default=shutil.which("node"))
    p.add_argument("--node-binding", default=None)
    p.add_argument("--cargo", default=shutil.which("cargo"))
    p.add_argument("--cflags", default="",
                   help="more C/C++ compile and link flags, e.g. the sanitizer build's -fsanitize=...")
    p.add_argument("--c-with-cxx-driver", action="store_true",
                   help="link the C samples with the C++ compiler (sanitizer builds)")
    p.add_argument("--langs", default="c,cpp,python,node,rust",
                   help="the languages to check (others are skipped: e.g. c,cpp in a sanitizer build, "
                        "whose library only instrumented programs can load)")
    p.add_argument("--list", action="store_true", help="list the samples and their modes, run nothing")
    p.add_argument("--only", default=None, help="check only the samples whose file:line contains this")
    a = p.parse_args()
    for tool in ("node", "cargo"):  # CMake passes "<VAR>-NOTFOUND" for a tool it did not find
        if getattr(a, tool) and getattr(a, tool).endswith("NOTFOUND"):
            setattr(a, tool, None)
    a.source = os.path.abspath(a.source)
    a.lib = os.path.abspath(a.lib)
    a.work = os.path.abspath(a.work)

    samples, problems = [], []
    for path in sources(a.source):
        s, pr = extract(path)
        samples += s
        problems += pr
    if a.only:
        problems = [pr for pr in problems if a.only in pr]
    if problems:
        print("untagged or badly tagged code samples:\n  " + "\n  ".join(problems))
        return 1
    if a.list:
        for s in samples:
            print(f"{s.name(a.source)}: {s.lang} {s.mode}{' (' + s.why + ')' if s.why else ''}")
        return 0

    env = dict(os.environ, TICKWHEEL_LIB=os.path.abspath(a.lib),
               PYTHONPATH=a.python_path or os.path.join(a.source, "bindings", "python"),
               PYTHONDONTWRITEBYTECODE="1")
    os.makedirs(a.work, exist_ok=True)
    failed, counts = [], {}
    for idx, s in enumerate(samples):
        name = s.name(a.source)
        if a.only and a.only not in name:
            continue
        if s.mode == "fragment":
            counts["fragment"] = counts.get("fragment", 0) + 1
            continue
        if s.lang not in a.langs.split(","):
            counts[f"{s.lang} not checked here"] = counts.get(f"{s.lang} not checked here", 0) + 1
            continue
        ok, what, out = check(s, idx, a, env)
        if ok is None:
            print(f"skip {name} ({s.lang}): {what}")
            counts["skipped"] = counts.get("skipped", 0) + 1
            continue
        print(f"{'ok  ' if ok else 'FAIL'} {name} ({s.lang} {s.mode}): {what}")
        if not ok:
            failed.append(name)
            print("    " + out.strip().replace("\n", "\n    "))
        key = f"{s.lang} {s.mode}"
        counts[key] = counts.get(key, 0) + 1
    print("samples: " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    if failed:
        print(f"{len(failed)} sample(s) failed: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
