#!/usr/bin/env bash
# The README's first command: install what is missing, build Release, run the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release -DTICKWHEEL_BUILD_TESTS=OFF -DTICKWHEEL_BUILD_BENCH=OFF -DTICKWHEEL_BUILD_STRESS=OFF >/dev/null
cmake --build --preset release --target demo
exec build/release/examples/demo "$@"
