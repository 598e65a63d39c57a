#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# The README's second command: install what is missing, then build and run the
# whole test suite through ctest in three configurations:
#   release  g++ -O2                       (unit, integration, stress short mode)
#   asan     clang ASan + LSan + UBSan
#   tsan     clang ThreadSanitizer, linked against oneTBB rebuilt with TSan
# Usage: scripts/test.sh [preset ...]   (default: release asan tsan)
set -euo pipefail
cd "$(dirname "$0")/.."
presets=("$@")
((${#presets[@]})) || presets=(release asan tsan)

scripts/setup.sh --test
for p in "${presets[@]}"; do
  if [[ $p == tsan ]]; then scripts/build-tbb-tsan.sh >/dev/null; fi
done

jobs=$(nproc)
status=0
summary=()
failed=()
for p in "${presets[@]}"; do
  echo "=== [$p] configure + build" >&2
  cmake --preset "$p" >/dev/null
  cmake --build --preset "$p" -j "$jobs"
  echo "=== [$p] ctest" >&2
  start=$SECONDS
  if ctest --preset "$p" -j "$jobs"; then r=pass; else r=FAIL; status=1; failed+=("$p"); fi
  summary+=("$p: $r ($((SECONDS - start)) s)")
done
# Last, where a log cut to its end still shows them: each failed test of
# each failed preset, with the lines of its output that say why.
for p in "${failed[@]}"; do
  echo "=== [$p] failed tests" >&2
  python3 scripts/ctest-failures.py "build/$p" >&2 || true
done
printf '=== %s\n' "${summary[@]}" >&2
exit $status
