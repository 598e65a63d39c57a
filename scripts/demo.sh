#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# The README's first command: install what is missing, build Release, run the
# demo (a simulated server). Arguments go to the demo: [seconds] [threads] [connections per thread],
# or --simulate HOURS [threads] [connections per thread] (the same server on a manual clock, fast).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset demo >/dev/null
cmake --build --preset demo --target demo
exec build/demo/examples/demo "$@"
