#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# The benchmark suite: tickwheel against Boost.Asio, libuv, libevent (with
# evthread_use_pthreads), DPDK rte_timer (EAL without NIC or hugepages), a
# mutex + std::map + condition-variable timer service and its own bare wheel,
# on the workloads of docs/bench/README.md; tickwheel both through its C++
# API (static library, peer_tickwheel) and through its C ABI and the shared
# library (peer_tickwheel_c: what C, Python, Node and Rust users run). One
# command:
#
#   scripts/bench.sh all        every mode below in turn (the full suite,
#                               capi, scaling, python, node, delay, model,
#                               probes):
#                               what the published figures come from. About
#                               15 minutes on 2 cores (the full suite's last
#                               run took 654 s, the others 13-60 s each)
#   scripts/bench.sh            install what is missing (Debian packages, as
#                               root), build Release (the `release` preset),
#                               run everything, write docs/bench/results.json,
#                               docs/bench/README.md and the PNG plots
#   scripts/bench.sh --quick    the same with small sizes and 2 repetitions,
#                               to check the machinery (figures not valid),
#                               into build/bench-quick (not docs/bench) unless
#                               BENCH_OUT says otherwise
#
# Every mode ends by recording its command, commit and machine in its data
# file (scripts/figures.py --stamp) and, when it wrote docs/bench and was
# not --quick, by publishing: scripts/figures.py --write rebuilds
# docs/bench/figures.json from the eight data files and rewrites every
# figure and table the README and the site quote (docs/site/development.md,
# "Publishing figures"). Into another folder (BENCH_OUT, --quick) it writes
# that folder's figures.json only.
#   scripts/bench.sh scaling [--quick] [--threads N]
#                               the scaling workload only (issue 21), for
#                               machines of any size: (a) 1..N producer
#                               threads doing start+stop pairs at 100 K
#                               pending (tickwheel through its C ABI and the
#                               shared library, Boost.Asio, libevent, the
#                               mutex service); (b) expiry of 1 M one-shots
#                               due in the same millisecond (bench/
#                               expiry_probe), from 1 producer and from N, on
#                               1..N workers. N = nproc unless --threads N
#                               (or BENCH_THREADS=N); thread counts 1..8, then
#                               12, 16, 24, 32, 48, ... and N. Writes
#                               scaling.json, scaling.md and the plots
#                               scaling_producers.png, scaling_expiry.png into
#                               the output folder; 30-50 s on 2 cores after the
#                               build (--quick: 4 s), about 10 minutes on 16
#                               (estimated).
#   scripts/bench.sh python [--quick]
#                               issue 33's per-call cost from Python: a
#                               start+stop pair of the binding, asyncio's
#                               loop.call_later(...).cancel() and
#                               tickwheel.asyncio's in the same run, and the
#                               pair beside a busy Python thread
#                               (bench/python_percall_bench.py, best of 7
#                               repetitions; the release build's staged
#                               package and its interpreter); writes
#                               python.json (each figure with its goal, met
#                               or not; the date, the machine, the Python
#                               version, the command). About a minute on 2
#                               cores after the build.
#   scripts/bench.sh capi [--quick]
#                               issue 21's start+stop goals only: tickwheel
#                               through the C ABI and the shared library,
#                               the C++ API (static) and libuv at 1 K, 100 K
#                               and 1 M pending, and 1 and 2 producers of
#                               the first two at 100 K, each program once
#                               per round, 5 rounds interleaved (BENCH_REPS
#                               rounds; --quick: 2); writes capi.json and
#                               capi.md (goals met / not met). 28 s on 2
#                               cores after the build. A/B: with
#                               BENCH_BASE_BUILD_DIR=<release build of the
#                               base commit>, its peer_tickwheel_c runs
#                               next to this build's in every round (before
#                               it in every other round).
#   scripts/bench.sh node [--quick]
#                               issue 33's Node.js goal only: a start+stop
#                               pair of the Node binding (bindings/node,
#                               through koffi and the shared library)
#                               against Node's clearTimeout(setTimeout())
#                               in the same process, 15 rounds of 200,000
#                               pairs each (--quick: 3 of 20,000), plus the
#                               bare koffi calls' floor and the start and
#                               stop halves (bench/peers/peer_node.js);
#                               writes node.json (every figure with its
#                               date, machine, Node version and command)
#                               and prints the table. Needs node and npm
#                               (koffi from the npm registry or cache);
#                               about 30 s on 2 cores after the build.
#                               BENCH_NODE_BASE=<commit>: that commit's
#                               binding too, on the same library
#                               (node-base.json), for an A/B.
#   scripts/bench.sh delay [--quick]
#                               what can delay a timer (the concepts guide):
#                               bench/delay_sources with 2 workers, 3 rounds
#                               (BENCH_REPS; --quick: 1) of 0, 1, 2 and 4
#                               callbacks blocking 500 ms before a 20 ms
#                               timer, and a 5 ms periodic timer's largest
#                               gap while a start/stop thread of its shard
#                               is frozen in a signal handler (10 x 400 ms),
#                               at nice 19 or SCHED_IDLE beside a spinning
#                               thread (5 x 400 ms each); writes delay.json.
#                               39 s on 2 cores after the build.
#   scripts/bench.sh model [--quick]
#                               the timer model's costs (the timer-model and
#                               clocks guides): bench/model_bench wakeups
#                               (100 K timers over 1 s, without and with
#                               10 ms of leeway), group and query (1 M
#                               pending; query also at 1 K), advance (1 M
#                               timers over a simulated hour); --quick: 20 K
#                               and 100 K (MODEL_TIMERS, MODEL_PENDING
#                               override); writes model.json. 13 s on 2
#                               cores after the build.
#   scripts/bench.sh probes [--quick]
#                               issue 34's cost of the USDT probes while
#                               none is attached: this commit's release
#                               build against the same commit built with
#                               -DTICKWHEEL_PROBES=OFF (build/release-
#                               noprobes, or BENCH_NOPROBES_BUILD_DIR), both
#                               through peer_tickwheel_c and their shared
#                               library: start+stop at 1 K and 1 M pending
#                               and the expiry of 1 M one-shots, 21 rounds
#                               (BENCH_REPS; --quick: 2), the two builds in
#                               alternating order; writes probes.json (each
#                               case's medians, the difference and the 2%
#                               goal, met or not). About 70 s on 2 cores
#                               after the builds (a single round varies by
#                               5-17% here: 7 rounds once put 1 K at +2.5%,
#                               21 at +0.7%).
#
# Environment: BENCH_BUILD_DIR=<dir> builds there (same settings as the
# release preset) instead of build/release; BENCH_OUT=<dir> writes there
# instead of docs/bench; BENCH_OPS=<n> pairs (re-arms) per repetition of
# workloads 1-3 (default 500000). For the scaling workload: SCALING_REPS,
# SCALING_OPS (pairs per producer and repetition), SCALING_PENDING,
# SCALING_TIMERS (the expiry burst) override the sizes; BENCH_NO_BUILD=1
# runs the programs already built in BENCH_BUILD_DIR (no package check, no
# configure, no build: the ctest bench_scaling_smoke does this).
#
# Every figure is the median of 5 repetitions with min and max; every ratio
# compares figures of this run. Each repetition of workloads 1-3 times
# 500,000 operations, so every figure covers 2.5 million (the issue's
# 1,000,000 pairs, covered 2.5 times): 1,000,000 per repetition takes the
# suite past 10 minutes on 2 cores, the peers being slow at 10 million
# pending (Boost.Asio ~10 us per pair: 5 million pairs take ~50 s per Asio
# variant). With the default, a run took about 7-8 minutes on 2 cores before
# libevent and DPDK joined; they add an estimated 4 minutes (DPDK's skip
# list at 1-10 million pending and its spinlock under 2-4 producers are most
# of it); the batch workloads (10) about 15 s more; peer_tickwheel_c (the C
# ABI, issue 21) about a minute more (estimated). A --quick run took 103 s
# after the build on 2 loaded cores (2026-11-26).
# The machine should be otherwise idle: load averages before and after are
# recorded in the results.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
quick=0
mode=full
threads=${BENCH_THREADS:-}
while (($#)); do
  case $1 in
    --quick) quick=1 ;;
    scaling) mode=scaling ;;
    capi) mode=capi ;;
    node) mode=node ;;
    python) mode=python ;;
    delay) mode=delay ;;
    model) mode=model ;;
    probes) mode=probes ;;
    all) mode=all ;;
    --threads) threads=${2:?--threads needs a number}; shift ;;
    --threads=*) threads=${1#--threads=} ;;
    *) echo "usage: scripts/bench.sh [all|scaling|capi|node|python|delay|model|probes] [--quick] [--threads N]" >&2; exit 2 ;;
  esac
  shift
done
no_build=${BENCH_NO_BUILD:-0}
N=${threads:-$(nproc)}  # scaling: the most producers and workers
[[ $N =~ ^[1-9][0-9]*$ ]] || { echo "bench: --threads wants a positive number, got '$N'" >&2; exit 2; }
base_bin=${BENCH_BASE_BUILD_DIR:+$BENCH_BASE_BUILD_DIR/bench/peers/peer_tickwheel_c}  # capi: A/B
if [[ $mode == capi && -n $base_bin && ! -x $base_bin ]]; then
  echo "bench: BENCH_BASE_BUILD_DIR has no bench/peers/peer_tickwheel_c (build it there first)" >&2
  exit 2
fi

# ---- all: every mode in turn (each publishes its figures as it ends) -----------------------
if [[ $mode == all ]]; then
  pass=()
  ((quick)) && pass+=(--quick)
  [[ -n $threads ]] && pass+=(--threads "$threads")
  failed=()
  t0=$(date +%s)
  for m in full capi scaling python node delay model probes; do
    printf '[bench all] %s\n' "$m" >&2
    if [[ $m == full ]]; then "$0" "${pass[@]}" || failed+=("$m")
    else "$0" "$m" "${pass[@]}" || failed+=("$m"); fi
  done
  printf '[bench all] done in %d s%s\n' $(( $(date +%s) - t0 )) "${failed[*]:+; failed: ${failed[*]}}" >&2
  ((${#failed[@]} == 0))
  exit
fi

if ((quick)); then out=${BENCH_OUT:-$root/build/bench-quick}; else out=${BENCH_OUT:-$root/docs/bench}; fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
# The command that reproduces this run, as the data files record it: the
# variables that change what is measured, then the script and its arguments.
bench_cmd=""
for v in BENCH_OPS BENCH_REPS BENCH_THREADS SCALING_REPS SCALING_OPS SCALING_PENDING SCALING_TIMERS \
         MODEL_TIMERS MODEL_PENDING BENCH_BASE_BUILD_DIR BENCH_NOPROBES_BUILD_DIR; do
  [[ -n ${!v:-} ]] && bench_cmd+="$v=${!v} "
done
bench_cmd+="scripts/bench.sh"
[[ $mode != full ]] && bench_cmd+=" $mode"
((quick)) && bench_cmd+=" --quick"
[[ $mode == scaling && -n $threads && -z ${BENCH_THREADS:-} ]] && bench_cmd+=" --threads $threads"
# publish <mode> <data file>: its run's command, commit and machine into it,
# then figures.json (and, into docs/bench unless --quick, the pages)
publish() {
  python3 "$root/scripts/figures.py" --stamp "$2" --mode "$1" --command "$bench_cmd" || return 1
  if [[ $out == "$root/docs/bench" ]] && ((!quick)); then
    log "publishing: scripts/figures.py --write (docs/bench/figures.json, the README and the site's figures)"
    if ! python3 "$root/scripts/figures.py" --write; then
      log "scripts/figures.py --write found the problems above: the docs are not consistent yet"
      return 1
    fi
  else
    python3 "$root/scripts/figures.py" --write --bench "$out" --partial --no-pages $( ((quick)) && echo --allow-quick)
  fi
}
t_start=$(date +%s)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
log() { printf '[bench %4ds] %s\n' $(( $(date +%s) - t_start )) "$*" >&2; }

# ---- node (issue 33): the Node binding's pair against Node's own timers -------------------
# Needs only the shared library, node and npm: handled before the peers'
# packages and build.
if [[ $mode == node ]]; then
  for tool in node npm; do
    command -v "$tool" >/dev/null 2>&1 || { echo "bench: $tool not found (scripts/setup.sh --test)" >&2; exit 1; }
  done
  if ((no_build)); then
    build=${BENCH_BUILD_DIR:?BENCH_NO_BUILD=1 needs BENCH_BUILD_DIR}
  else
    build=${BENCH_BUILD_DIR:-$root/build/release}
    if [[ -z "${BENCH_BUILD_DIR:-}" ]]; then
      log "configuring the release preset"
      cmake --preset release >/dev/null
    elif [[ ! -f "$build/CMakeCache.txt" ]]; then
      cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTICKWHEEL_BUILD_TESTS=OFF >/dev/null
    fi
    log "building the shared library"
    cmake --build "$build" --target tickwheel_shared >&2
  fi
  lib=$build/capi/libtickwheel.so.1
  [[ -f $lib ]] || { echo "bench: no $lib" >&2; exit 1; }
  # The package with its locked koffi, in the build tree (npm ci skipped
  # while the lock is unchanged).
  pkg=$build/bench-node
  mkdir -p "$pkg"
  cp bindings/node/package.json bindings/node/package-lock.json bindings/node/index.js bindings/node/promises.js "$pkg/"
  stamp=$pkg/node_modules/.tickwheel-lock
  want=$(sha256sum bindings/node/package-lock.json | cut -d' ' -f1)
  if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
    log "npm ci in $pkg"
    (cd "$pkg" && npm ci --no-audit --no-fund --prefer-offline >&2)
    echo "$want" >"$stamp"
  fi
  if ((quick)); then nargs=(--ops 20000 --rounds 3 --warmup 1); else nargs=(--ops "${BENCH_OPS:-200000}" --rounds "${BENCH_REPS:-15}" --warmup 3); fi
  cmd=$bench_cmd
  log "bench/peers/peer_node.js ${nargs[*]}"
  TICKWHEEL_LIB=$lib node bench/peers/peer_node.js --binding "$pkg" "${nargs[@]}" --out "$out/node.json" --command "$cmd"
  # A/B: BENCH_NODE_BASE=<commit> also runs that commit's binding (its
  # bindings/node/index.js, same library, same koffi) -> node-base.json.
  if [[ -n ${BENCH_NODE_BASE:-} ]]; then
    base=$build/bench-node-base
    rm -rf "$base"
    mkdir -p "$base"
    for f in package.json index.js promises.js; do
      git show "$BENCH_NODE_BASE:bindings/node/$f" >"$base/$f"
    done
    ln -s "$pkg/node_modules" "$base/node_modules"
    log "the base binding ($BENCH_NODE_BASE)"
    TICKWHEEL_LIB=$lib node bench/peers/peer_node.js --binding "$base" "${nargs[@]}" --out "$out/node-base.json" \
      --command "BENCH_NODE_BASE=$BENCH_NODE_BASE $cmd"
  fi
  publish node "$out/node.json" || exit 1
  log "done in $(( $(date +%s) - t_start )) s"
  exit 0
fi

# The build of a mode that needs one release target (python, delay, model), in $build:
# with BENCH_NO_BUILD=1, BENCH_BUILD_DIR as it is (nothing is built); else BENCH_BUILD_DIR
# configured without tests, or the release preset; then TARGET is built.
#   build_one_target TARGET WHAT   (WHAT: how the log names the target)
build_one_target() {
  if ((no_build)); then
    build=${BENCH_BUILD_DIR:?BENCH_NO_BUILD=1 needs BENCH_BUILD_DIR}
    return 0
  fi
  if [[ -n "${BENCH_BUILD_DIR:-}" ]]; then
    build=$BENCH_BUILD_DIR
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=gcc \
          -DCMAKE_CXX_COMPILER=g++ -DTICKWHEEL_BUILD_TESTS=OFF >&2
  else
    build=$root/build/release
    log "configuring the release preset"
    cmake --preset release >/dev/null
  fi
  log "building $2"
  cmake --build "$build" --target "$1" >&2
}

# ---- python (issue 33): the per-call cost from Python against asyncio's own ------------
if [[ $mode == python ]]; then
  build_one_target tickwheel_python "the Python extension (tickwheel_python)"
  py=$(sed -n 's/^Python3_EXECUTABLE:[A-Z]*=//p' "$build/CMakeCache.txt")
  args=(--binding "$build/python" --json "$out/python.json" --command "$bench_cmd")
  ((quick)) && args+=(--quick)
  log "bench/python_percall_bench.py ${args[*]}"
  "${py:-python3}" "$root/bench/python_percall_bench.py" "${args[@]}"
  publish python "$out/python.json" || exit 1
  log "done: $out/python.json (load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg))"
  exit 0
fi

# ---- delay, model: the guides' figures (bench/delay_sources, bench/model_bench) ----------
# Only the release build of one program each; no peers.
if [[ $mode == delay || $mode == model ]]; then
  prog=$([[ $mode == delay ]] && echo delay_sources || echo model_bench)
  build_one_target "$prog" "bench/$prog"
  raw=$(mktemp)
  trap 'rm -f "$raw"' EXIT
  if [[ $mode == delay ]]; then
    # each round: 0, 1, W and 2W callbacks blocking 500 ms before a 20 ms
    # timer (W = 2 workers), then a start/stop thread frozen 10 x 400 ms, at
    # nice 19 and at SCHED_IDLE beside a spinning thread 5 x 400 ms each
    rounds=$( ((quick)) && echo 1 || echo "${BENCH_REPS:-3}")
    params="\"rounds\": $rounds, \"workers\": 2"
    log "bench/delay_sources --workers 2 --rounds $rounds"
    timeout --kill-after=5 600 "$build/bench/delay_sources" --workers 2 --rounds "$rounds" >"$raw"
  else
    # the timer model's costs: leeway's wake-ups (100 K timers over 1 s),
    # stop_group and query at 1 M pending, advance() of a manual clock
    if ((quick)); then n=20000; pend=100000; else n=100000; pend=1000000; fi
    n=${MODEL_TIMERS:-$n}; pend=${MODEL_PENDING:-$pend}
    params="\"timers\": $n, \"pending\": $pend"
    for args in "wakeups $n" "group $pend" "query 1000" "query $pend" "advance $pend"; do
      log "bench/model_bench $args"
      # shellcheck disable=SC2086  # (the arguments, split)
      timeout --kill-after=5 300 "$build/bench/model_bench" $args >>"$raw"
    done
  fi
  t_end=$(date +%s)
  load_after=$(cut -d' ' -f1-3 /proc/loadavg)
  meta=$(printf '{"quick": %s, %s, "started_unix": %d, "total_s": %d, "load_before": "%s", "load_after": "%s", "command": "%s"}' \
    "$( ((quick)) && echo true || echo false)" "$params" "$t_start" $((t_end - t_start)) "$load_before" "$load_after" \
    "$bench_cmd")
  python3 "$root/scripts/figures.py" --collect "$raw" --mode "$mode" --meta "$meta" --out "$out/$mode.json"
  publish "$mode" "$out/$mode.json" || exit 1
  log "done: $out/$mode.json in $(( t_end - t_start )) s (load average before: $load_before, after: $load_after)"
  exit 0
fi

# ---- probes (issue 34): unattached USDT probes against a build without them ---------------
# The same commit twice: the release preset (probes in) and the release
# preset configured with -DTICKWHEEL_PROBES=OFF in its own folder; each
# round runs every case with both builds' peer_tickwheel_c (each through its
# own libtickwheel.so.1, found by its RUNPATH), in alternating order.
if [[ $mode == probes ]]; then
  if ((no_build)); then
    build=${BENCH_BUILD_DIR:?BENCH_NO_BUILD=1 needs BENCH_BUILD_DIR}
    nb=${BENCH_NOPROBES_BUILD_DIR:?BENCH_NO_BUILD=1 needs BENCH_NOPROBES_BUILD_DIR}
  else
    build=${BENCH_BUILD_DIR:-$root/build/release}
    nb=${BENCH_NOPROBES_BUILD_DIR:-$root/build/release-noprobes}
    log "configuring $build (release preset) and $nb (release preset, -DTICKWHEEL_PROBES=OFF)"
    cmake --preset release -B "$build" -DTICKWHEEL_PROBES=ON >/dev/null
    cmake --preset release -B "$nb" -DTICKWHEEL_PROBES=OFF >/dev/null
    for b in "$build" "$nb"; do
      log "building peer_tickwheel_c in $b"
      cmake --build "$b" --target peer_tickwheel_c >&2
    done
  fi
  with_bin=$build/bench/peers/peer_tickwheel_c
  without_bin=$nb/bench/peers/peer_tickwheel_c
  for b in "$with_bin" "$without_bin"; do [[ -x $b ]] || { echo "bench: no $b" >&2; exit 1; }; done
  # The two libraries must differ in the probes: notes in one, none in the other.
  notes() { readelf -n "$1" 2>/dev/null | grep -c 'stapsdt' || true; }
  n_with=$(notes "$build/capi/libtickwheel.so.1"); n_without=$(notes "$nb/capi/libtickwheel.so.1")
  if ((n_with == 0 || n_without != 0)); then
    echo "bench: expected USDT notes in $build's library and none in $nb's (found $n_with and $n_without)" >&2
    exit 1
  fi
  log "USDT notes: $n_with in $build/capi/libtickwheel.so.1, none in $nb's"
  raw=$(mktemp)
  logs=$build/bench-logs
  mkdir -p "$logs"
  trap 'rm -f "$raw"' EXIT
  one() {  # one <with|without> <label> <args...>: one run, JSON lines to $raw
    local which=$1 label=$2 rc=0; shift 2
    local prog=$with_bin peer=tickwheel-capi
    [[ $which == without ]] && prog=$without_bin peer=tickwheel-capi-noprobes
    log "$label ($which probes)"
    timeout --kill-after=5 300 "$prog" "$@" 2>"$logs/probes-$label-$which.log" \
      | sed "s/\"peer\":\"tickwheel-capi\"/\"peer\":\"$peer\"/" >>"$raw" || rc=$?
    ((rc == 0)) || { log "FAILED or timed out: $label (see $logs/probes-$label-$which.log)"; exit 1; }
  }
  if ((quick)); then PR=2; POPS=100000; PEXP=200000; else PR=${BENCH_REPS:-21}; POPS=${BENCH_OPS:-500000}; PEXP=1000000; fi
  for ((round = 1; round <= PR; round++)); do
    for c in "startstop-1000" "startstop-1000000" "expiry"; do
      if [[ $c == expiry ]]; then
        a=(--workload expiry --pending "$PEXP" --window-ms 1000 --resolution-us 1000000 --reps 1)
      else
        a=(--workload startstop --pending "${c#startstop-}" --ops "$POPS" --reps 1 --warmup 1)
      fi
      if ((round % 2)); then order=(with without); else order=(without with); fi
      for w in "${order[@]}"; do one "$w" "$c-$round" "${a[@]}"; done
    done
  done
  t_end=$(date +%s)
  load_after=$(cut -d' ' -f1-3 /proc/loadavg)
  meta=$(printf '{"quick": %s, "rounds": %d, "notes": %d, "started_unix": %d, "total_s": %d, "load_before": "%s", "load_after": "%s", "command": "%s"}' \
    "$( ((quick)) && echo true || echo false)" "$PR" "$n_with" "$t_start" $((t_end - t_start)) "$load_before" \
    "$load_after" "$bench_cmd")
  python3 "$root/scripts/figures.py" --collect "$raw" --mode probes --meta "$meta" --out "$out/probes.json"
  python3 - "$out/probes.json" <<'PY' >&2
import json, sys
for f in json.load(open(sys.argv[1]))["figures"]:
    print("  %-34s with %-12.4g without %-12.4g %+6.2f%%  %s" % (f["what"], f["median_with"], f["median_without"],
                                                                f["slower_pct"], "met" if f["met"] else "NOT MET"))
PY
  publish probes "$out/probes.json" || exit 1
  log "done: $out/probes.json in $(( t_end - t_start )) s (load average before: $load_before, after: $load_after)"
  exit 0
fi

# ---- 1. Debian packages: only what is missing ---------------------------------------
want=(g++ cmake ninja-build pkg-config libtbb-dev libconcurrentqueue-dev libbenchmark-dev libgtest-dev
      libboost-dev libuv1-dev libevent-dev dpdk-dev gnuplot-nox python3)
missing=()
((no_build)) && want=()
for pkg in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "bench: missing Debian packages: ${missing[*]}; run: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# ---- 2. build (Release) ---------------------------------------------------------------
if ((no_build)); then
  build=${BENCH_BUILD_DIR:?BENCH_NO_BUILD=1 needs BENCH_BUILD_DIR}
  log "using the programs built in $build"
elif [[ -n "${BENCH_BUILD_DIR:-}" ]]; then
  build=$BENCH_BUILD_DIR
  log "configuring $build (Release, g++)"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=gcc \
        -DCMAKE_CXX_COMPILER=g++ -DTICKWHEEL_BUILD_TESTS=OFF >"$out/.configure.log" 2>&1 \
    || { cat "$out/.configure.log" >&2; exit 1; }
else
  build=$root/build/release
  log "configuring the release preset"
  cmake --preset release >"$out/.configure.log" 2>&1 || { cat "$out/.configure.log" >&2; exit 1; }
fi
if ((!no_build)); then
  grep -E "^-- tickwheel bench:" "$out/.configure.log" >&2 || true
  rm -f "$out/.configure.log"
  log "building the benchmark programs"
  cmake --build "$build" --target bench_peers >&2
  # bench/expiry_probe (issue 21): the scaling workload's expiry burst
  cmake --build "$build" --target expiry_probe >&2 || log "expiry_probe did not build: scaling (b) is skipped"
fi
have_capi=0
if ((no_build)) && ls "$build"/capi/libtickwheel.so.[0-9]* >/dev/null 2>&1; then have_capi=1
elif ((!no_build)) && cmake --build "$build" --target tickwheel_shared >/dev/null 2>&1; then have_capi=1; fi
bin=$build/bench/peers
t_built=$(date +%s)

# ---- 3. run -------------------------------------------------------------------------------
raw=$(mktemp)
probe_raw=$(mktemp)  # bench/expiry_probe's lines (not the peers' format)
logs=$build/bench-logs
mkdir -p "$logs"
trap 'rm -f "$raw" "$probe_raw"' EXIT
failures=()
skipped=()
# A peer that cannot run on this machine exits with status 77 and says why on
# stderr (peer_dpdk when DPDK's EAL cannot start): it is skipped from then on
# and the reason goes into the report.
declare -A unavailable=()
unavailable_why() {  # the peer's stderr without stack frames, on one line
  grep -v -E '^[0-9]+: ' "$1" | tr '\n' ' ' | sed 's/ *$//'
}
# run <timeout s> <label> <program> <args...>: JSON lines to $raw (or to
# $run_out where set), stderr to $logs; <program> in bench/peers or bench/
run() {
  local limit=$1 label=$2 prog=$3 rc=0 path; shift 3
  path=$bin/$prog
  [[ -x "$path" ]] || path=$build/bench/$prog
  if [[ ! -x "$path" ]]; then
    log "skip $label ($prog not built)"
    skipped+=("$prog not built")
    return 0
  fi
  if [[ -n "${unavailable[$prog]:-}" ]]; then
    log "skip $label ($prog cannot run here)"
    return 0
  fi
  log "$label"
  timeout --kill-after=5 "$limit" "$path" "$@" >>"${run_out:-$raw}" 2>"$logs/$label.log" || rc=$?
  if ((rc == 77)); then
    unavailable[$prog]=$(unavailable_why "$logs/$label.log")
    log "$prog cannot run on this machine: ${unavailable[$prog]}"
  elif ((rc != 0)); then
    failures+=("$label")
    log "FAILED or timed out: $label (see $logs/$label.log)"
  fi
}

# ---- scaling (issue 21): producers and expiry against cores -----------------------------
if [[ $mode == scaling ]]; then
  # every count up to 8, then 12, 16, 24, 32, 48, 64, ... (2^k and 3*2^k), and N
  counts=()
  for ((t = 1; t <= N; t++)); do
    if ((t <= 8 || t == N || (t & (t - 1)) == 0 || (t % 3 == 0 && ((t / 3) & (t / 3 - 1)) == 0))); then
      counts+=("$t")
    fi
  done
  if ((quick)); then SR=2; SOPS=100000; STIMERS=100000; else SR=5; SOPS=500000; STIMERS=1000000; fi
  SR=${SCALING_REPS:-$SR}; SOPS=${SCALING_OPS:-$SOPS}; STIMERS=${SCALING_TIMERS:-$STIMERS}
  SPENDING=${SCALING_PENDING:-100000}
  # (a) producers: each does SOPS pairs per repetition on its share of
  #     SPENDING pending timers (driver.hpp, workload mt) -- the peers a fifth
  #     of that (the figure is a rate; they are 5-50x slower per pair, and
  #     tickwheel needs the length: a repetition ends when its shards drained)
  for t in "${counts[@]}"; do
    c=(--workload mt --threads "$t" --pending "$SPENDING" --reps "$SR" --warmup 0)
    run 600 "scaling-mt-capi-$t" peer_tickwheel_c "${c[@]}" --ops "$SOPS"
    run 600 "scaling-mt-asio1-$t" peer_asio --io-threads 1 "${c[@]}" --ops $((SOPS / 5))
    run 600 "scaling-mt-event-$t" peer_event "${c[@]}" --ops $((SOPS / 5))
    run 600 "scaling-mt-mutex-$t" peer_mutex "${c[@]}" --ops $((SOPS / 5))
  done
  # (b) expiry: STIMERS one-shots due in the same millisecond, from 1
  #     producer (one shard holds them all) and from N, on 1..N workers, N shards
  producers=(1)
  ((N > 1)) && producers+=("$N")
  for p in "${producers[@]}"; do
    for w in "${counts[@]}"; do
      run_out=$probe_raw run 600 "scaling-expiry-p$p-w$w" expiry_probe --timers "$STIMERS" --producers "$p" \
        --workers "$w" --shards "$N" --reps "$SR"
    done
  done
  t_end=$(date +%s)
  load_after=$(cut -d' ' -f1-3 /proc/loadavg)
  skipped_list=$(printf '%s\n' "${skipped[@]:-}" | sort -u)
  # the run's metadata, for scaling_report.py
  export SC_QUICK=$quick SC_REPS=$SR SC_THREADS=$N SC_COUNTS="${counts[*]}" SC_BUILD=$build SC_OPS=$SOPS \
         SC_PENDING=$SPENDING SC_TIMERS=$STIMERS SC_START=$t_start SC_BUILD_S=$((t_built - t_start)) \
         SC_TOTAL_S=$((t_end - t_start)) SC_LOAD_BEFORE=$load_before SC_LOAD_AFTER=$load_after \
         SC_FAILURES="${failures[*]:-}" SC_SKIPPED=$skipped_list SC_COMMAND=$bench_cmd
  log "writing $out (scaling)"
  python3 bench/suite/scaling_report.py --mt "$raw" --probe "$probe_raw" --out "$out"
  publish scaling "$out/scaling.json" || exit 1
  log "done in $(( $(date +%s) - t_start )) s (load before: $load_before, after: $load_after)"
  if ((${#failures[@]})); then
    log "failed: ${failures[*]}"
    exit 1
  fi
  exit 0
fi

# ---- capi (issue 21's start+stop goals): interleaved rounds -------------------------------
if [[ $mode == capi ]]; then
  # A/B: BENCH_BASE_BUILD_DIR=<a release build of the base commit> runs its
  # peer_tickwheel_c next to this build's in every round, as the peer
  # "tickwheel-capi-base" (its libtickwheel.so.1 found through its RUNPATH)
  run_base() {  # run_base <timeout s> <label> <args...>
    [[ -n $base_bin ]] || return 0
    local limit=$1 label=$2 rc=0; shift 2
    log "$label"
    timeout --kill-after=5 "$limit" "$base_bin" "$@" 2>"$logs/$label.log" \
      | sed 's/"peer":"tickwheel-capi"/"peer":"tickwheel-capi-base"/' >>"$raw" || rc=$?
    ((rc == 0)) || { failures+=("$label"); log "FAILED or timed out: $label (see $logs/$label.log)"; }
  }
  ab() {  # ab <timeout s> <label> <base label> <args...>: this build's peer_tickwheel_c and the base's,
          # in alternating order from round to round
    local limit=$1 label=$2 blabel=$3; shift 3
    if ((round % 2)); then
      run "$limit" "$label" peer_tickwheel_c "$@"
      run_base "$limit" "$blabel" "$@"
    else
      run_base "$limit" "$blabel" "$@"
      run "$limit" "$label" peer_tickwheel_c "$@"
    fi
  }
  if ((quick)); then CR=2; COPS=100000; else CR=${BENCH_REPS:-5}; COPS=${BENCH_OPS:-500000}; fi
  for ((round = 1; round <= CR; round++)); do
    for n in 1000 100000 1000000; do
      c=(--workload startstop --pending "$n" --ops "$COPS" --reps 1 --warmup 1)
      ab 300 "capi-startstop-capi-$n-$round" "capi-startstop-base-$n-$round" "${c[@]}"
      run 300 "capi-startstop-tickwheel-$n-$round" peer_tickwheel "${c[@]}"
      run 300 "capi-startstop-uv-$n-$round" peer_uv "${c[@]}"
    done
    for t in 1 2; do
      c=(--workload mt --threads "$t" --pending 100000 --ops "$COPS" --reps 1 --warmup 1)
      ab 300 "capi-mt-capi-$t-$round" "capi-mt-base-$t-$round" "${c[@]}"
      run 300 "capi-mt-tickwheel-$t-$round" peer_tickwheel "${c[@]}"
    done
  done
  t_end=$(date +%s)
  load_after=$(cut -d' ' -f1-3 /proc/loadavg)
  meta=$(mktemp)
  printf '{"quick": %s, "reps": %d, "started_unix": %d, "total_s": %d, "load_before": "%s", "load_after": "%s", "failures": "%s", "command": "%s"}\n' \
    "$( ((quick)) && echo true || echo false)" "$CR" "$t_start" $((t_end - t_start)) "$load_before" "$load_after" \
    "${failures[*]:-}" "$bench_cmd" >"$meta"
  python3 bench/suite/report.py --capi --raw "$raw" --meta "$meta" --out "$out"
  rm -f "$meta"
  publish capi "$out/capi.json" || exit 1
  log "done in $(( $(date +%s) - t_start )) s (load before: $load_before, after: $load_after)"
  ((${#failures[@]} == 0)) || { log "failed: ${failures[*]}"; exit 1; }
  exit 0
fi

if ((quick)); then
  R=2; OPS=100000; PENDINGS=(1000 100000 1000000); MT_OPS=100000; RATES=(10000 100000); SEG=0.2
  IDLE_S=2; EXP_N=200000; FFI_OPS=20000; FFI_PENDING=20000; SLOW_RATE=10000
else
  R=5; OPS=${BENCH_OPS:-500000}; PENDINGS=(1000 100000 1000000 10000000); MT_OPS=$OPS; RATES=(10000 100000 1000000); SEG=0.5
  IDLE_S=10; EXP_N=1000000; FFI_OPS=100000; FFI_PENDING=100000; SLOW_RATE=100000
fi
asio1=(peer_asio --io-threads 1)
asio2=(peer_asio --io-threads 2)

# 1 + 7. start+stop at N pending (and RSS per pending timer)
for n in "${PENDINGS[@]}"; do
  c=(--workload startstop --pending "$n" --ops "$OPS" --reps "$R" --warmup 0)
  run 300 "startstop-tickwheel-$n" peer_tickwheel "${c[@]}"
  run 300 "startstop-capi-$n" peer_tickwheel_c "${c[@]}"
  run 300 "startstop-wheel-$n" peer_wheel "${c[@]}"
  run 300 "startstop-asio1-$n" "${asio1[@]}" "${c[@]}"
  run 300 "startstop-asio2-$n" "${asio2[@]}" "${c[@]}"
  run 300 "startstop-uv-$n" peer_uv "${c[@]}"
  run 300 "startstop-mutex-$n" peer_mutex "${c[@]}"
  run 300 "startstop-event-$n" peer_event "${c[@]}"
  run 300 "startstop-dpdk-$n" peer_dpdk "${c[@]}"
done

# 2. re-arm later, 1 million pending
c=(--workload rearm --pending "${PENDINGS[2]}" --ops "$OPS" --reps "$R")
run 200 rearm-tickwheel peer_tickwheel "${c[@]}"
run 200 rearm-capi peer_tickwheel_c "${c[@]}"
run 200 rearm-wheel peer_wheel "${c[@]}"
run 200 rearm-asio1 "${asio1[@]}" "${c[@]}"
run 200 rearm-asio2 "${asio2[@]}" "${c[@]}"
run 200 rearm-uv peer_uv "${c[@]}"
run 200 rearm-mutex peer_mutex "${c[@]}"
run 200 rearm-event peer_event "${c[@]}"
run 200 rearm-dpdk peer_dpdk "${c[@]}"

# 10. batches (tickwheel only; every other peer prints "not applicable"):
#     start+stop pairs and re-arms later, 64 per call, at 1 million pending
c=(--workload startstop_batch --pending "${PENDINGS[2]}" --ops "$OPS" --reps "$R" --warmup 0 --batch 64)
run 200 startstop-batch-tickwheel peer_tickwheel "${c[@]}"
run 200 startstop-batch-capi peer_tickwheel_c "${c[@]}"
c=(--workload rearm_batch --pending "${PENDINGS[2]}" --ops "$OPS" --reps "$R" --batch 64)
run 200 rearm-batch-tickwheel peer_tickwheel "${c[@]}"
run 200 rearm-batch-capi peer_tickwheel_c "${c[@]}"

# 3. producers
for t in 1 2 4; do
  c=(--workload mt --threads "$t" --pending 100000 --ops "$MT_OPS" --reps "$R" --warmup 0)
  run 300 "mt-tickwheel-$t" peer_tickwheel "${c[@]}"
  run 300 "mt-capi-$t" peer_tickwheel_c "${c[@]}"
  run 300 "mt-asio1-$t" "${asio1[@]}" "${c[@]}"
  run 300 "mt-asio2-$t" "${asio2[@]}" "${c[@]}"
  run 300 "mt-mutex-$t" peer_mutex "${c[@]}"
  run 300 "mt-event-$t" peer_event "${c[@]}"
  # DPDK: a fifth of the pairs (the figure is a rate): its producers share one
  # spinlock and cost 10-50x the others' per pair on 2 cores (a preempted
  # holder stalls the rest), so equal work would add ~5 minutes to the run
  run 300 "mt-dpdk-$t" peer_dpdk "${c[@]}" --ops $((MT_OPS / 5))
done

# 4. expiry: the window is one tick of a 1 s runtime for tickwheel; the
#    peers' loops start when the window has passed
c=(--workload expiry --pending "$EXP_N" --window-ms 1000 --reps "$R")
run 120 expiry-tickwheel peer_tickwheel "${c[@]}" --resolution-us 1000000
run 120 expiry-capi peer_tickwheel_c "${c[@]}" --resolution-us 1000000
run 120 expiry-wheel peer_wheel "${c[@]}"
run 120 expiry-asio1 "${asio1[@]}" "${c[@]}"
run 120 expiry-asio2 "${asio2[@]}" "${c[@]}"
run 120 expiry-uv peer_uv "${c[@]}"
run 120 expiry-mutex peer_mutex "${c[@]}"
run 120 expiry-event peer_event "${c[@]}"
run 120 expiry-dpdk peer_dpdk "${c[@]}"

# 4b. expiry burst (issue 21): EXP_N one-shots due in the same millisecond
#     from one thread, through the shared library (bench/expiry_probe)
run_out=$probe_raw run 200 expiry-burst expiry_probe --timers "$EXP_N" --producers 1 --reps "$R"

# 5. lateness of steady streams
for rate in "${RATES[@]}"; do
  c=(--workload lateness --rate "$rate" --max-delay-ms 2000 --segment-s "$SEG" --reps "$R")
  run 60 "lateness-tickwheel-1ms-$rate" peer_tickwheel "${c[@]}" --resolution-us 1000
  run 60 "lateness-tickwheel-100us-$rate" peer_tickwheel "${c[@]}" --resolution-us 100
  run 60 "lateness-asio1-$rate" "${asio1[@]}" "${c[@]}"
  run 60 "lateness-asio2-$rate" "${asio2[@]}" "${c[@]}"
  run 60 "lateness-uv-$rate" peer_uv "${c[@]}"
  run 60 "lateness-mutex-$rate" peer_mutex "${c[@]}"
  run 60 "lateness-event-$rate" peer_event "${c[@]}"
  run 60 "lateness-dpdk-$rate" peer_dpdk "${c[@]}"  # its manager polls every 1 ms (--resolution-us)
done

# 8. slow callbacks: 2 workers, one callback blocks 100 ms every 10 ms (not
#    the single-dispatcher peers: libuv, Asio on 1 thread, libevent's loop,
#    DPDK's manager lcore -- such a callback blocks them by construction)
c=(--workload lateness --slow --rate "$SLOW_RATE" --max-delay-ms 2000 --segment-s "$SEG" --reps "$R" --workers 2)
run 60 slow-tickwheel peer_tickwheel "${c[@]}"
run 60 slow-asio2 "${asio2[@]}" "${c[@]}"
run 60 slow-mutex2 peer_mutex "${c[@]}"

# 6. idle CPU: the peers idle side by side (each measures its own process)
log "idle CPU (${IDLE_S} s, peers in parallel)"
c=(--workload idle --pending "${PENDINGS[2]}" --seconds "$IDLE_S" --reps "$R")
pids=()
for spec in "tickwheel:peer_tickwheel" "asio1:peer_asio --io-threads 1" "asio2:peer_asio --io-threads 2" \
            "uv:peer_uv" "mutex:peer_mutex" "event:peer_event" "dpdk:peer_dpdk"; do
  label=idle-${spec%%:*}
  read -r -a cmd <<<"${spec#*:}"
  [[ -x "$bin/${cmd[0]}" && -z "${unavailable[${cmd[0]}]:-}" ]] || continue
  timeout --kill-after=5 60 "$bin/${cmd[0]}" "${cmd[@]:1}" "${c[@]}" >"$logs/$label.json" 2>"$logs/$label.log" &
  pids+=("$!:$label:${cmd[0]}")
done
for pl in "${pids[@]}"; do
  IFS=: read -r pid label prog <<<"$pl"
  rc=0
  wait "$pid" || rc=$?
  if ((rc == 77)); then
    unavailable[$prog]=$(unavailable_why "$logs/$label.log")
    log "$prog cannot run on this machine: ${unavailable[$prog]}"
  elif ((rc != 0)); then
    failures+=("$label")
  fi
  cat "$logs/$label.json" >>"$raw"
done

# 9. FFI: the start+stop pair from Python through the C ABI
ffi_status="not measured: "
# The binding is a compiled extension (since 1.5): the build stages it in $build/python.
if ! cmake --build "$build" --target tickwheel_python >/dev/null 2>&1 \
     || [[ ! -f $build/python/tickwheel/__init__.py ]]; then
  ffi_status+="the Python extension (target tickwheel_python: pybind11-dev, python3-dev) did not build"
elif ((!have_capi)); then
  ffi_status+="the shared library (target tickwheel_shared) did not build"
else
  lib=$(ls "$build"/capi/libtickwheel.so.[0-9]* 2>/dev/null | head -1 || true)
  log "ffi-python"
  if TICKWHEEL_LIB=$lib timeout 200 python3 bench/peers/peer_python.py --binding "$build/python" \
       --pending "$FFI_PENDING" --ops "$FFI_OPS" --reps "$R" >>"$raw" 2>"$logs/ffi-python.log"; then
    ffi_status=measured
  else
    failures+=(ffi-python)
    ffi_status+="the Python run failed (see $logs/ffi-python.log)"
  fi
  # the C++ pair at the same pending count, for the ratio
  if [[ ! " ${PENDINGS[*]} " =~ " $FFI_PENDING " ]]; then
    run 120 "ffi-cxx" peer_tickwheel --workload startstop --pending "$FFI_PENDING" --ops "$FFI_OPS" --reps "$R" --warmup 0
  fi
fi

# ---- 4. report ----------------------------------------------------------------------------
t_end=$(date +%s)
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
meta=$(mktemp)
unav=$(mktemp)
for prog in "${!unavailable[@]}"; do printf '%s\t%s\n' "$prog" "${unavailable[$prog]}"; done >"$unav"
python3 - "$meta" "$unav" <<EOF
import json, sys
unavailable = dict(l.rstrip("\n").split("\t", 1) for l in open(sys.argv[2]) if "\t" in l)
json.dump({
  "quick": bool($quick), "reps": $R, "build_dir": "$build",
  "started_unix": $t_start, "build_s": $((t_built - t_start)), "total_s": $((t_end - t_start)),
  "load_before": "$load_before", "load_after": "$load_after",
  "ffi_status": "$ffi_status", "failures": "${failures[*]:-}".split(),
  "ffi_pending": $FFI_PENDING, "ffi_ops": $FFI_OPS, "unavailable": unavailable, "command": "$bench_cmd",
}, open(sys.argv[1], "w"))
EOF
rm -f "$unav"
log "writing $out"
python3 bench/suite/report.py --raw "$raw" --probe "$probe_raw" --meta "$meta" --out "$out"
rm -f "$meta"
publish full "$out/results.json" || failures+=("publishing the figures")
log "done in $(( $(date +%s) - t_start )) s (load before: $load_before, after: $load_after)"
if ((${#failures[@]})); then
  log "failed: ${failures[*]}"
  exit 1
fi
