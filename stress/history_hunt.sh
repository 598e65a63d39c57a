#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Runs tw_stress history over seeds until one fails, and names it: the tool
# for "revert fix X, run the fuzzer, name the seed" (issue 20).
#
#   stress/history_hunt.sh [-b BUILD_DIR] [-f FEATURES] [-s SECONDS] [-n SEEDS] [-z FUZZ] [-k] [-- extra args]
#
#   -b  build directory holding stress/tw_stress (default build/release)
#   -f  --features (default all); per race of issue 20:
#         1 nest   2 groups,rearm   3 boottime,realtime,delay   4 boottime,realtime,stale,steps
#         5 queues,periodic,delay,rearm   6 qcreate   7 realtime,steps,batch   8 qdestroy
#   -s  --seconds per seed (default 10)   -n  seeds 1..N (default 10)
#   -z  --fuzz (default 64)               -k  keep going after a failure
# Prints one line per seed (PASS, or FAIL with the first violation) and exits 1
# if any seed failed. Each failing seed's whole report is kept in
# /tmp/tw_history_<features>_seed_<seed>.log.
set -uo pipefail
build=build/release features=all seconds=10 seeds=10 fuzz=64 keep=0
while getopts "b:f:s:n:z:k" o; do
  case $o in
    b) build=$OPTARG ;; f) features=$OPTARG ;; s) seconds=$OPTARG ;;
    n) seeds=$OPTARG ;; z) fuzz=$OPTARG ;; k) keep=1 ;;
    *) sed -n '3,17p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
bin=$build/stress/tw_stress
[[ -x $bin ]] || { echo "no $bin: build the tw_stress target first" >&2; exit 2; }
status=0
for seed in $(seq 1 "$seeds"); do
  log=/tmp/tw_history_${features//[^a-z0-9]/_}_seed_$seed.log
  start=$SECONDS
  if timeout $((${seconds%.*} * 3 + 120)) "$bin" history --seconds "$seconds" --seed "$seed" --features "$features" \
      --fuzz "$fuzz" "$@" >"$log" 2>&1; then
    echo "seed $seed: PASS ($((SECONDS - start)) s)"
    rm -f "$log"
  else
    status=1
    first=$(grep -m1 '^VIOLATION' "$log" || tail -n1 "$log")
    echo "seed $seed: FAIL ($((SECONDS - start)) s): $first   [full report: $log]"
    ((keep)) || break
  fi
done
exit $status
