#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Builds the npm package of the Node.js binding with its prebuilt library:
#
#   scripts/build-npm.sh                 -> dist/tickwheel-<version>.tgz
#
# 1. builds libtickwheel.so.1 (Release, the library only: no tests,
#    benchmarks, stress programs or examples) in build/npm-lib;
# 2. fills bindings/node/prebuilds/<platform>-<arch>/ (linux-x64 on x86-64
#    Linux) with libtickwheel.so.1 and the oneTBB runtime it links
#    (libtbb.so.12), stripped, libtickwheel's RUNPATH set to $ORIGIN (patchelf)
#    so that it finds that libtbb next to it and nothing of the build tree;
# 3. `npm pack`s a staging copy of the package (the files of package.json's
#    "files", the README, the licences, the prebuilds) into dist/.
#
# `npm install dist/tickwheel-<version>.tgz` in an application folder then
# brings koffi from the npm registry and needs nothing else: the binding
# loads prebuilds/<platform>-<arch>/libtickwheel.so.1 before any system
# library (bindings/node/README.md, "Install").
#
# Options (for tests and CI):
#   --lib PATH    package this already built libtickwheel.so.1 instead of
#                 building one (step 1 skipped)
#   --work DIR    staging folder (default build/npm); with --lib or --work,
#                 bindings/node/prebuilds is left alone (only the staging
#                 copy gets the prebuilds)
#   --dist DIR    where the .tgz goes (default dist/)
# Needs: cmake, ninja or make, a C++20 compiler and libtbb-dev (step 1),
# patchelf, binutils (strip, readelf), node and npm (scripts/setup.sh --test).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lib=""
work=""
dist="$root/dist"
while (($#)); do
  case "$1" in
    --lib) lib=$(realpath "$2"); shift 2 ;;
    --work) work=$(realpath -m "$2"); shift 2 ;;
    --dist) dist=$(realpath -m "$2"); shift 2 ;;
    -h|--help) sed -n '3,29p' "$0"; exit 0 ;;
    *) echo "build-npm: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
fill_source_prebuilds=1
if [[ -n "$lib" || -n "$work" ]]; then
  fill_source_prebuilds=0
fi
work=${work:-$root/build/npm}

for tool in node npm patchelf strip readelf; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "build-npm: '$tool' not found (scripts/setup.sh --test installs it)" >&2
    exit 1
  fi
done

pkgdir="$root/bindings/node"
version=$(node -p "require('$pkgdir/package.json').version")
platform=$(node -p "process.platform + '-' + process.arch")

# ---- 1. the library ------------------------------------------------------------
if [[ -z "$lib" ]]; then
  build="$root/build/npm-lib"
  gen=()
  if [[ ! -f "$build/CMakeCache.txt" ]] && command -v ninja >/dev/null 2>&1; then
    gen=(-G Ninja)
  fi
  cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DTICKWHEEL_BUILD_TESTS=OFF -DTICKWHEEL_BUILD_BENCH=OFF -DTICKWHEEL_BUILD_STRESS=OFF \
    -DTICKWHEEL_BUILD_EXAMPLES=OFF -DTICKWHEEL_WERROR=OFF >/dev/null
  cmake --build "$build" --target tickwheel_shared -j "$(nproc)"
  lib="$build/capi/libtickwheel.so.1"
fi
if [[ ! -f "$lib" ]]; then
  echo "build-npm: no library at $lib" >&2
  exit 1
fi
lib=$(realpath "$lib")

# ---- 2. the prebuilds folder ---------------------------------------------------------
stage="$work/package"
rm -rf "$stage"
pre="$stage/prebuilds/$platform"
mkdir -p "$pre"
install -m 0644 "$lib" "$pre/libtickwheel.so.1"
# The oneTBB runtime the library links, as the loader resolves it here.
tbb=$(ldd "$lib" | awk '$1 == "libtbb.so.12" { print $3 }')
if [[ -z "$tbb" || ! -f "$tbb" ]]; then
  echo "build-npm: $lib does not resolve libtbb.so.12 (ldd: $(ldd "$lib" | tr '\n' ' '))" >&2
  exit 1
fi
install -m 0644 "$(realpath "$tbb")" "$pre/libtbb.so.12"
strip --strip-unneeded "$pre/libtickwheel.so.1" "$pre/libtbb.so.12"
patchelf --set-rpath '$ORIGIN' "$pre/libtickwheel.so.1"
# Everything else either library needs must be part of every Linux system
# Node runs on (glibc, libstdc++, libgcc_s): anything more would be missing
# on the user's machine, so refuse to package it.
for f in "$pre"/*.so*; do
  for need in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    case "$need" in
      libtbb.so.12|libc.so.6|libm.so.6|libstdc++.so.6|libgcc_s.so.1|libpthread.so.0|libdl.so.2|librt.so.1|ld-linux*) ;;
      *) echo "build-npm: $(basename "$f") needs $need, which the package does not carry" >&2; exit 1 ;;
    esac
  done
done
runpath=$(readelf -d "$pre/libtickwheel.so.1" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
if [[ "$runpath" != '$ORIGIN' ]]; then
  echo "build-npm: RUNPATH of the packaged library is '$runpath', not \$ORIGIN" >&2
  exit 1
fi

# ---- 3. the package ---------------------------------------------------------------
# The files package.json's "files" names (README and package.json are
# always packed), the licences from the top of the repository.
files=$(node -p "require('$pkgdir/package.json').files.filter((f) => !/^(prebuilds|LICENSE)/.test(f)).join('\n')")
for f in $files package.json README.md; do
  install -m 0644 "$pkgdir/$f" "$stage/$f"
done
install -m 0644 "$root/LICENSE-MIT" "$root/LICENSE-APACHE" "$stage/"
if ((fill_source_prebuilds)); then
  rm -rf "$pkgdir/prebuilds/$platform"
  mkdir -p "$pkgdir/prebuilds"
  cp -a "$pre" "$pkgdir/prebuilds/"
fi
mkdir -p "$dist"
rm -f "$dist/tickwheel-$version.tgz"
(cd "$stage" && npm pack --silent --pack-destination "$dist" >/dev/null)
tgz="$dist/tickwheel-$version.tgz"
if [[ ! -f "$tgz" ]]; then
  echo "build-npm: npm pack did not write $tgz" >&2
  exit 1
fi
echo "build-npm: $tgz ($(du -k "$tgz" | cut -f1) KiB; prebuilds/$platform: libtickwheel.so.1, libtbb.so.12)"
