#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Runs tw_stress history over seeds until one fails, and names it: the tool
# for "revert fix X (or make mutant X), run the fuzzer, name the seed"
# (issues 20 and 31).
#
#   stress/history_hunt.sh [-b BUILD_DIR] [-f FEATURES] [-p PRESET] [-s SECONDS] [-n SEEDS] [-S FIRST]
#                          [-z FUZZ] [-k] [-- extra tw_stress args]
#
#   -b  build directory holding stress/tw_stress (default build/release)
#   -f  --features (default all); per race of issue 20:
#         1 nest   2 groups,rearm   3 boottime,realtime,delay   4 boottime,realtime,stale,steps
#         5 queues,periodic,delay,rearm   6 qcreate   7 realtime,steps,batch   8 qdestroy
#   -p  an issue-31 experiment (sets -f and the extra args; docs/site/development.md has the table):
#         token     a caller frozen holding its shard's driver token  (all,-lowprio,-query --freeze-site T)
#         freeze    a caller frozen at a site it passed, by the seed  (all,-lowprio,-query)
#         lowprio   a caller at nice 19 / SCHED_IDLE beside a spinner (all,-freeze,-query)
#         wakeup    no wake-up from a token holder's earlier deadline (all,-freeze,-lowprio,-query,-resets)
#         claim     a claim that ignores a reset to a later deadline  (all,-freeze,-lowprio,-query)
#         refile    a reset landing while a worker re-files a claim   (resets,quiet --quiet-ms 3000)
#         query     tw_timer_query against the model                  (all,-freeze,-lowprio)
#         fork      fork at a caller's schedule point                 (fork)
#   -s  --seconds per seed (default 10)   -n  seeds FIRST..FIRST+N-1 (default 10)   -S  FIRST (default 1)
#   -z  --fuzz (default 64)               -k  keep going after a failure
# Prints one line per seed (PASS, or FAIL with the first violation) and exits 1
# if any seed failed. Each failing seed's whole report is kept in
# /tmp/tw_history_<features>_seed_<seed>.log.
set -uo pipefail
build=build/release features=all seconds=10 seeds=10 first=1 fuzz=64 keep=0 preset=""
while getopts "b:f:p:s:n:S:z:k" o; do
  case $o in
    b) build=$OPTARG ;; f) features=$OPTARG ;; p) preset=$OPTARG ;; s) seconds=$OPTARG ;;
    n) seeds=$OPTARG ;; S) first=$OPTARG ;; z) fuzz=$OPTARG ;; k) keep=1 ;;
    *) sed -n '3,28p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
extra=("$@")
case $preset in
  "") ;;
  token) features=all,-lowprio,-query extra+=(--freeze-site T) ;;
  freeze) features=all,-lowprio,-query ;;
  lowprio) features=all,-freeze,-query ;;
  wakeup) features=all,-freeze,-lowprio,-query,-resets ;;
  claim) features=all,-freeze,-lowprio,-query ;;
  refile) features=resets,quiet extra+=(--quiet-ms 3000) ;;
  query) features=all,-freeze,-lowprio ;;
  fork) features=fork ;;
  *) echo "unknown -p $preset" >&2; exit 2 ;;
esac
bin=$build/stress/tw_stress
[[ -x $bin ]] || { echo "no $bin: build the tw_stress target first" >&2; exit 2; }
status=0
for seed in $(seq "$first" $((first + seeds - 1))); do
  log=/tmp/tw_history_${features//[^a-z0-9]/_}${preset:+_$preset}_seed_$seed.log
  start=$SECONDS
  if timeout $((${seconds%.*} * 3 + 120)) "$bin" history --seconds "$seconds" --seed "$seed" --features "$features" \
      --fuzz "$fuzz" "${extra[@]}" >"$log" 2>&1; then
    echo "seed $seed: PASS ($((SECONDS - start)) s)$(grep -m1 -o 'freeze: producer [0-9]* frozen at [0-9.]* ms at .[^ ]*' "$log" | sed 's/^/  [/;s/$/]/')"
    rm -f "$log"
  else
    status=1
    first_v=$(grep -m1 '^VIOLATION' "$log" || tail -n1 "$log")
    echo "seed $seed: FAIL ($((SECONDS - start)) s): $first_v   [full report: $log]"
    ((keep)) || break
  fi
done
exit $status
