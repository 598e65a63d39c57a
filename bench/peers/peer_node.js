#!/usr/bin/env node
// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// The per-call cost of the Node.js binding against Node's own timers, in the
// same process (scripts/bench.sh node; issue 33: "a start+stop pair <= 3x
// clearTimeout(setTimeout(...))"):
//
//   tickwheel   rt.start(10000, f).stop()          (bindings/node, the binding)
//   node        clearTimeout(setTimeout(f, 10000))  (Node's timers)
//   floor       the same two koffi calls as the binding's start() and stop()
//               (tw_timer_start_ex, tw_timer_stop), without its JavaScript
//   start/stop  --ops timers started in one loop, then stopped in another:
//               where a pair's time goes
//
// Each round times --ops pairs of each (tickwheel and node alternate which
// goes first); --rounds rounds after --warmup discarded ones. A figure is
// the median of the rounds' ns per pair, with min and max; the ratio is
// tickwheel's median over node's, and per round (min-max). Wall-clock time,
// and the JavaScript thread's own CPU time (CLOCK_THREAD_CPUTIME_ID: time
// the thread was preempted by other processes does not count, so it holds
// better on a loaded machine; the runtime's shard threads' work is not in
// it). Prints a table and writes the JSON data file --out
// (docs/bench/node.json): every figure with the date, the machine, Node's
// and koffi's versions and the command.
//
//   TICKWHEEL_LIB=build/release/capi/libtickwheel.so.1 \
//     node bench/peers/peer_node.js --binding <folder with the package and koffi> \
//       [--ops N] [--rounds R] [--warmup W] [--out docs/bench/node.json] [--command TEXT]
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

function args() {
  const a = { binding: null, ops: 200000, rounds: 15, warmup: 3, out: null, command: null, goal: 3 };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = argv[i + 1];
    if (k === '--binding') a.binding = v;
    else if (k === '--ops') a.ops = Number(v);
    else if (k === '--rounds') a.rounds = Number(v);
    else if (k === '--warmup') a.warmup = Number(v);
    else if (k === '--out') a.out = v;
    else if (k === '--command') a.command = v;
    else throw new Error(`peer_node: unknown argument ${k}`);
    i++;
  }
  if (a.binding === null) throw new Error('peer_node: --binding <folder> is required');
  return a;
}

const hr = () => process.hrtime.bigint();
const median = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const summary = (xs) => ({ median: median(xs), min: Math.min(...xs), max: Math.max(...xs), samples: xs });
const r1 = (x) => Math.round(x * 10) / 10;

function machine() {
  const cpus = os.cpus();
  return {
    cpu_model: cpus.length ? cpus[0].model.trim() : 'unknown',
    nproc: os.availableParallelism ? os.availableParallelism() : cpus.length,
    kernel: os.release(),
    memory_gib: r1(os.totalmem() / 2 ** 30),
    load_before: os.loadavg().map(r1),
  };
}

function main() {
  const a = args();
  const tw = require(path.resolve(a.binding));
  const { Runtime } = tw;
  const { rawPairs } = tw._internal;
  const koffiVersion = require(require.resolve('koffi', { paths: [path.resolve(a.binding)] })).version;
  const env = machine();
  const rt = new Runtime(); // the default configuration, as an application makes it
  const f = () => {};
  const n = a.ops;
  // This thread's CPU time in ns (clock_gettime(CLOCK_THREAD_CPUTIME_ID)).
  const koffi = require(require.resolve('koffi', { paths: [path.resolve(a.binding)] }));
  const clockGettime = koffi.load('libc.so.6').func('int clock_gettime(int clk, _Out_ void *ts)');
  const ts = new BigInt64Array(2);
  const cpu = () => {
    clockGettime(3, ts); // CLOCK_THREAD_CPUTIME_ID
    return Number(ts[0]) * 1e9 + Number(ts[1]);
  };

  // One sample: [wall, cpu] ns per pair over n pairs.
  const twPairs = () => {
    const c0 = cpu();
    const t0 = hr();
    for (let i = 0; i < n; i++) rt.start(10000, f).stop();
    return [Number(hr() - t0) / n, (cpu() - c0) / n];
  };
  const nodePairs = () => {
    const c0 = cpu();
    const t0 = hr();
    for (let i = 0; i < n; i++) clearTimeout(setTimeout(f, 10000));
    return [Number(hr() - t0) / n, (cpu() - c0) / n];
  };
  // (A binding before 1.6's rework has no rawPairs: no floor then, for an A/B run.)
  const floorPairs = () => {
    if (typeof rawPairs !== 'function') return [NaN, NaN];
    const c0 = cpu();
    const t0 = hr();
    rawPairs(rt, n);
    return [Number(hr() - t0) / n, (cpu() - c0) / n];
  };
  const timers = new Array(n);
  const startThenStop = () => {
    const c0 = cpu();
    const t0 = hr();
    for (let i = 0; i < n; i++) timers[i] = rt.start(10000, f);
    const c1 = cpu();
    const t1 = hr();
    for (let i = 0; i < n; i++) timers[i].stop();
    const t2 = hr();
    const c2 = cpu();
    timers.fill(null);
    return [[Number(t1 - t0) / n, (c1 - c0) / n], [Number(t2 - t1) / n, (c2 - c1) / n]];
  };

  const s = {
    tickwheel: [], node: [], ratio: [], twCpu: [], nodeCpu: [], ratioCpu: [],
    floor: [], floorCpu: [], start: [], startCpu: [], stop: [], stopCpu: [],
  };
  for (let round = 0; round < a.warmup + a.rounds; round++) {
    let t;
    let nd;
    if (round % 2 === 0) {
      t = twPairs();
      nd = nodePairs();
    } else {
      nd = nodePairs();
      t = twPairs();
    }
    const fl = floorPairs();
    const [st, sp] = startThenStop();
    if (round < a.warmup) continue;
    s.tickwheel.push(r1(t[0]));
    s.node.push(r1(nd[0]));
    s.ratio.push(Math.round((t[0] / nd[0]) * 100) / 100);
    s.twCpu.push(r1(t[1]));
    s.nodeCpu.push(r1(nd[1]));
    s.ratioCpu.push(Math.round((t[1] / nd[1]) * 100) / 100);
    s.floor.push(r1(fl[0]));
    s.floorCpu.push(r1(fl[1]));
    s.start.push(r1(st[0]));
    s.startCpu.push(r1(st[1]));
    s.stop.push(r1(sp[0]));
    s.stopCpu.push(r1(sp[1]));
  }
  const stats = rt.stats();
  rt.close();
  env.load_after = os.loadavg().map(r1);

  const tick = summary(s.tickwheel);
  const nodeS = summary(s.node);
  const ratio = Math.round((tick.median / nodeS.median) * 100) / 100;
  const tickCpu = summary(s.twCpu);
  const nodeCpu = summary(s.nodeCpu);
  const ratioCpu = Math.round((tickCpu.median / nodeCpu.median) * 100) / 100;
  const common = {
    date: new Date().toISOString(),
    machine: env,
    node: process.version,
    koffi: koffiVersion,
    tickwheel: tw.version(),
    command: a.command || `node ${path.relative(process.cwd(), __filename)} ${process.argv.slice(2).join(' ')}`,
    pairs_per_round: n,
    rounds: a.rounds,
    warmup_rounds: a.warmup,
    runtime: `new Runtime() (${stats.shards} shards, ${stats.workers} worker)`,
  };
  const figures = [
    { name: 'tickwheel_pair', what: 'rt.start(10000, f).stop()', unit: 'ns per pair', ...tick },
    { name: 'node_pair', what: 'clearTimeout(setTimeout(f, 10000))', unit: 'ns per pair', ...nodeS },
    {
      name: 'ratio', what: 'tickwheel_pair median / node_pair median (per round: min-max)', unit: 'x',
      median: ratio, min: Math.min(...s.ratio), max: Math.max(...s.ratio), samples: s.ratio,
      goal: `<= ${a.goal}`, met: ratio <= a.goal,
    },
    { name: 'tickwheel_pair_cpu', what: 'rt.start(10000, f).stop(), the thread\'s CPU time', unit: 'ns per pair', ...tickCpu },
    { name: 'node_pair_cpu', what: 'clearTimeout(setTimeout(f, 10000)), the thread\'s CPU time', unit: 'ns per pair', ...nodeCpu },
    {
      name: 'ratio_cpu', what: 'tickwheel_pair_cpu median / node_pair_cpu median (per round: min-max)', unit: 'x',
      median: ratioCpu, min: Math.min(...s.ratioCpu), max: Math.max(...s.ratioCpu), samples: s.ratioCpu,
      goal: `<= ${a.goal}`, met: ratioCpu <= a.goal,
    },
    { name: 'ffi_floor_pair', what: 'tw_timer_start_ex + tw_timer_stop through koffi, no binding JavaScript', unit: 'ns per pair', ...summary(s.floor) },
    { name: 'ffi_floor_pair_cpu', what: 'the same, the thread\'s CPU time', unit: 'ns per pair', ...summary(s.floorCpu) },
    { name: 'tickwheel_start', what: `rt.start(10000, f) x ${n} (then stopped)`, unit: 'ns per call', ...summary(s.start) },
    { name: 'tickwheel_start_cpu', what: 'the same, the thread\'s CPU time', unit: 'ns per call', ...summary(s.startCpu) },
    { name: 'tickwheel_stop', what: `timer.stop() x ${n} (started before)`, unit: 'ns per call', ...summary(s.stop) },
    { name: 'tickwheel_stop_cpu', what: 'the same, the thread\'s CPU time', unit: 'ns per call', ...summary(s.stopCpu) },
  ].filter((fig) => !Number.isNaN(fig.median)).map((fig) => ({ ...fig, ...common }));

  const row = (fig) => `${fig.name.padEnd(20)} ${String(fig.median).padStart(8)} ` +
    `${String(fig.min).padStart(8)} ${String(fig.max).padStart(8)}  ${fig.unit.padEnd(12)} ${fig.what}`;
  console.log(`tickwheel ${common.tickwheel}, Node ${common.node}, koffi ${common.koffi}; ${env.cpu_model}, ` +
    `${env.nproc} CPUs, load ${env.load_before.join(' ')} -> ${env.load_after.join(' ')}`);
  console.log(`${a.rounds} rounds of ${n} pairs (${a.warmup} warm-up rounds discarded); median, min, max:`);
  for (const fig of figures) console.log(row(fig));
  const r = figures.find((fig) => fig.name === 'ratio');
  const rc = figures.find((fig) => fig.name === 'ratio_cpu');
  console.log(`goal: a pair <= ${a.goal}x Node's: ${r.met ? 'met' : 'NOT met'} (wall clock ${r.median}x, rounds ` +
    `${r.min}-${r.max}x; thread CPU time ${rc.median}x, rounds ${rc.min}-${rc.max}x)`);
  if (a.out) {
    fs.mkdirSync(path.dirname(a.out), { recursive: true });
    fs.writeFileSync(a.out, `${JSON.stringify({ figures }, null, 1)}\n`);
    console.log(`wrote ${a.out}`);
  }
}

main();
