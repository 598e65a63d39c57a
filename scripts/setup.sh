#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Installs what tickwheel needs from Debian 12 packages, and only what is
# missing. As root it runs apt-get; otherwise it prints the command to run.
#   scripts/setup.sh          build + demo dependencies
#   scripts/setup.sh --test   also the test, sanitizer and ABI tools
set -euo pipefail

# systemtap-sdt-dev: <sys/sdt.h>, the library's USDT probes (TICKWHEEL_PROBES)
want=(g++ cmake ninja-build pkg-config libtbb-dev libconcurrentqueue-dev systemtap-sdt-dev)
if [[ "${1:-}" == "--test" ]]; then
  want+=(clang libclang-rt-14-dev libgtest-dev libbenchmark-dev abigail-tools python3 dpkg-dev
        python3-venv python3-setuptools python3-pip python3-wheel python3-wheel-whl nodejs doxygen
        debhelper fakeroot lintian libuv1-dev man-db python3-prometheus-client)
  # the Python binding's compiled extension and its wheels (ctest capi_python*,
  # scripts/build-wheel.sh): pybind11's headers, CPython's headers, patchelf;
  # pyelftools for the wheels' manylinux check (bindings/python/tools/
  # check_manylinux.py; it falls back to readelf without it)
  want+=(pybind11-dev python3-dev patchelf python3-pyelftools)
  # the C peers of the benchmark suite, smoke-run by ctest bench_peer_*_smoke
  # (dpdk-dev pulls in every DPDK driver: ~225 packages, ~100 MB)
  want+=(libevent-dev dpdk-dev)
  # the documentation site (ctest docs_site, docs_site_screenshot): Sphinx with
  # MyST Markdown, Breathe over Doxygen's XML, the furo theme; headless Chromium
  want+=(python3-sphinx python3-myst-parser python3-breathe furo chromium)
  # tickwheel/coro_asio.hpp's tests (coro_asio_test, coro_boost_asio_test) and
  # bench/coro_bench's Asio steady_timer peer: standalone Asio and Boost.Asio
  want+=(libasio-dev libboost-dev)
  # the probes' scripts (tools/*.bt; ctest probes_bpftrace attaches them where
  # the kernel lets it) and the A/B instruction counts of the probes
  want+=(bpftrace linux-perf)
fi

# Node.js from NodeSource ships npm inside its nodejs package (and conflicts
# with Debian's npm); Debian's own nodejs needs the separate npm package.
if [[ "${1:-}" == "--test" ]] && ! command -v npm >/dev/null 2>&1; then
  want+=(npm)
fi

missing=()
for pkg in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#want[@]} Debian packages present" >&2
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "setup: missing Debian packages: ${missing[*]}" >&2
  echo "setup: run: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi

echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
