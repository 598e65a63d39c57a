#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Builds the Python wheel: dist/tickwheel-<version>-cpXY-cpXY-linux_<arch>.whl,
# self-contained (the compiled extension, libtickwheel.so.1 and the oneTBB
# runtime it needs, found through RUNPATH $ORIGIN). Then:
#
#   scripts/build-wheel.sh
#   pip install dist/tickwheel-*.whl
#
# The wheel is for the interpreter that builds it ($PYTHON, default python3)
# and for machines with this machine's glibc or newer (a linux_<arch> tag:
# built against the distribution's libraries, not manylinux).
#
# Environment:
#   PYTHON=<python>           the interpreter to build for (default: python3)
#   WHEEL_BUILD_DIR=<dir>     the CMake build directory (default: build/wheel, a
#                             library-only Release build; an existing build
#                             directory, e.g. build/release, is reused as is)
#   WHEEL_OUT=<dir>           where the wheel goes (default: dist)
# Needs: cmake, a C++20 compiler, oneTBB (libtbb-dev), pybind11-dev, python3-dev,
# patchelf (all in scripts/setup.sh).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=$(command -v "${PYTHON:-python3}")
build=${WHEEL_BUILD_DIR:-$root/build/wheel}
out=${WHEEL_OUT:-$root/dist}

if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTICKWHEEL_WERROR=OFF \
        -DTICKWHEEL_BUILD_TESTS=OFF -DTICKWHEEL_BUILD_BENCH=OFF -DTICKWHEEL_BUILD_STRESS=OFF \
        -DTICKWHEEL_BUILD_EXAMPLES=OFF -DPython3_EXECUTABLE="$python"
fi
cmake --build "$build" --target tickwheel_python tickwheel_shared -j"${WHEEL_JOBS:-$(nproc)}"
stage=$build/python/tickwheel
if [[ ! -d $stage ]]; then
  echo "build-wheel.sh: $stage missing: the extension was not configured (see the cmake output:" \
       "pybind11-dev and python3-dev are needed)" >&2
  exit 1
fi
lib=$(ls "$build"/capi/libtickwheel.so.1)
"$python" "$root/bindings/python/tools/make_wheel.py" --stage "$stage" --lib "$lib" --source "$root" --out "$out"
