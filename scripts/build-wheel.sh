#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Builds the Python wheels (and the sdist) into dist/:
#
#   scripts/build-wheel.sh            the wheel for python3 ($PYTHON to choose another):
#                                     dist/tickwheel-<version>-cp3XY-cp3XY-manylinux_2_34_x86_64.whl
#   scripts/build-wheel.sh --all      one wheel per CPython 3.8 .. 3.13 found on the machine
#                                     (python3.X on PATH, ~/.pyenv/versions/3.X.*); a version
#                                     not found is named and skipped
#   scripts/build-wheel.sh --sdist    also the sdist, dist/tickwheel-<version>.tar.gz (pip
#                                     builds it from source, offline: CMake, g++, libtbb-dev,
#                                     libconcurrentqueue-dev, pybind11-dev, python3-dev)
#   scripts/build-wheel.sh --sdist-only
#
#   pip install dist/tickwheel-*.whl
#
# A wheel carries the extension, which has the library's code and libstdc++
# linked in, and oneTBB's libtbb.so.12 beside it (RUNPATH $ORIGIN): nothing
# else to install. Its platform tag is the manylinux policy its binaries
# truly satisfy (bindings/python/tools/check_manylinux.py reads them:
# manylinux_2_34_x86_64 when built with g++ 12 on Debian 12, i.e. glibc 2.34
# or newer); Requires-Python is the interpreter's version. pybind11 uses
# CPython's full API, not the limited one: no abi3 wheel, one per version.
#
# Environment:
#   PYTHON=<python>           the interpreter of the default wheel (default: python3)
#   PYTHONS="<py> <py> ..."   the interpreters to build wheels for (instead of PYTHON / --all)
#   WHEEL_BUILD_DIR=<dir>     the CMake build directory (default: build/wheel, a
#                             library-only Release build; an existing one is reused,
#                             reconfigured only to add interpreters)
#   WHEEL_OUT=<dir>           where the wheels go (default: dist)
#   WHEEL_JOBS=<n>            build parallelism (default: nproc)
# Needs: cmake, a C++20 compiler, oneTBB (libtbb-dev), libconcurrentqueue-dev,
# pybind11-dev, the interpreters' headers (python3-dev), patchelf (all in
# scripts/setup.sh --test).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${WHEEL_BUILD_DIR:-$root/build/wheel}
out=${WHEEL_OUT:-$root/dist}
jobs=${WHEEL_JOBS:-$(nproc)}
all=0 sdist=0 wheels=1
for arg in "$@"; do
  case $arg in
    --all) all=1 ;;
    --sdist) sdist=1 ;;
    --sdist-only) sdist=1 wheels=0 ;;
    -h|--help) sed -n '3,33p' "$0"; exit 0 ;;
    *) echo "build-wheel.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
tool_python=$(command -v "${PYTHON:-python3}" || command -v python3 || true)
[[ -n $tool_python ]] || { echo "build-wheel.sh: no python3 on PATH" >&2; exit 1; }

if ((sdist)); then
  "$tool_python" "$root/bindings/python/tools/make_sdist.py" --source "$root" --out "$out"
fi
((wheels)) || exit 0

# ---- the interpreters ------------------------------------------------------------------
# An interpreter fits if it runs and has its Python.h (the extension compiles against it).
fits() {
  "$1" -c 'import os, sys, sysconfig; sys.exit(0 if sys.version_info >= (3, 8) and os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)' \
    2>/dev/null
}
pythons=()
if [[ -n ${PYTHONS:-} ]]; then
  read -r -a pythons <<<"$PYTHONS"
elif ((all)); then
  for minor in 8 9 10 11 12 13; do
    found=
    for cand in $(command -v "python3.$minor" 2>/dev/null || true) \
                $(ls -d "$HOME"/.pyenv/versions/3."$minor".*/bin/python3."$minor" 2>/dev/null | sort -V -r); do
      if fits "$cand"; then found=$cand; break; fi
    done
    if [[ -n $found ]]; then pythons+=("$found"); else echo "build-wheel.sh: skip 3.$minor: no interpreter with its headers found" >&2; fi
  done
else
  pythons=("$(command -v "${PYTHON:-python3}")")
fi
((${#pythons[@]})) || { echo "build-wheel.sh: no interpreter to build for" >&2; exit 1; }
resolved=()
for py in "${pythons[@]}"; do
  real=$("$py" -c 'import sys; print(sys.executable)')  # a pyenv shim or a venv's link: the interpreter itself
  if ! fits "$real"; then
    echo "build-wheel.sh: $py cannot build the extension: Python 3.8 or newer with its headers (Debian: python3-dev) needed" >&2
    exit 1
  fi
  resolved+=("$real")
done
list=$(IFS=';'; echo "${resolved[*]}")

# ---- configure (once; again only to add interpreters) and build ----------------------------
have=
[[ -f $build/CMakeCache.txt ]] && have=$(sed -n 's/^TICKWHEEL_PYTHON_WHEEL_PYTHONS:STRING=//p' "$build/CMakeCache.txt")
if [[ ! -f $build/CMakeCache.txt ]]; then
  gen=()
  command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
  cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DTICKWHEEL_WERROR=OFF \
        -DTICKWHEEL_BUILD_TESTS=OFF -DTICKWHEEL_BUILD_BENCH=OFF -DTICKWHEEL_BUILD_STRESS=OFF \
        -DTICKWHEEL_BUILD_EXAMPLES=OFF -DTICKWHEEL_BUILD_MAN=OFF \
        "-DTICKWHEEL_PYTHON_WHEEL_PYTHONS=$list" -DPython3_EXECUTABLE="${resolved[0]}"
else
  missing=0
  for py in "${resolved[@]}"; do [[ ";$have;" == *";$py;"* ]] || missing=1; done
  if ((missing)); then
    merged=$have
    for py in "${resolved[@]}"; do [[ ";$merged;" == *";$py;"* ]] || merged=${merged:+$merged;}$py; done
    cmake "-DTICKWHEEL_PYTHON_WHEEL_PYTHONS=$merged" "$build"
  fi
fi
tags=()
for py in "${resolved[@]}"; do tags+=("$("$py" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')"); done
targets=()
for tag in "${tags[@]}"; do targets+=("tickwheel_python_$tag"); done
cmake --build "$build" --target "${targets[@]}" -j"$jobs"

# ---- pack ------------------------------------------------------------------------------------
for tag in "${tags[@]}"; do
  "$tool_python" "$root/bindings/python/tools/make_wheel.py" --stage "$build/python-wheel/$tag/tickwheel" \
    --source "$root" --out "$out"
done
