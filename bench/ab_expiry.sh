#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# A/B of the expiry throughput of two builds through their shared libraries:
#   bench/ab_expiry.sh <peer_tickwheel_c of A> <peer_tickwheel_c of B> [rounds]
# Each round runs 1 M one-shots due in the same tick (a 1 s resolution) once
# with each build, back to back, in alternating order; prints each round's
# callbacks/s of A and B, then the medians and the median of the rounds'
# A/B ratios. That last figure is the one to quote: on a 2-vCPU VM the rate
# jumps between two levels (~8 and ~14 M/s) from one run to the next in
# either build, and the ratio of two back-to-back runs is steadier than the
# ratio of the medians. Used for the A/B of f3af1f4 (21 rounds).
set -euo pipefail
a=${1:?usage: bench/ab_expiry.sh PEER_A PEER_B [ROUNDS]}
b=${2:?usage: bench/ab_expiry.sh PEER_A PEER_B [ROUNDS]}
rounds=${3:-21}
one() {
  "$1" --workload expiry --pending 1000000 --window-ms 1000 --resolution-us 1000000 --reps 1 2>/dev/null |
    python3 -c 'import json, sys
for line in sys.stdin:
    r = json.loads(line)
    if r.get("metric") == "callbacks_per_s": print(r["median"])'
}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((i = 1; i <= rounds; i++)); do
  if ((i % 2)); then x=$(one "$a"); y=$(one "$b"); else y=$(one "$b"); x=$(one "$a"); fi
  echo "$x $y" | tee -a "$out"
done
python3 - "$out" <<'PY'
import statistics as st, sys
xs = [tuple(map(float, line.split())) for line in open(sys.argv[1])]
print("A median %.2f M/s, B median %.2f M/s, median of the rounds' A/B ratios %.3f (%d rounds)" % (
    st.median(a for a, _ in xs) / 1e6, st.median(b for _, b in xs) / 1e6, st.median(a / b for a, b in xs), len(xs)))
PY
