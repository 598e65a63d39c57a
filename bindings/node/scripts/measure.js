// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// A small measurement of the binding (not a test, not part of the package):
//
//   TICKWHEEL_LIB=.../libtickwheel.so.1 node scripts/measure.js [binding dir] [n]
//
// 0. start and stop cost of n timers that stay pending (10 s);
// 1. start cost: n one-shot timers (delay 0) started in one synchronous
//    loop, ns per start() (the shards deliver them meanwhile);
// 2. fire cost: from the end of that loop until the n-th callback ran, ns
//    per callback (all due at once: the binding's delivery throughput);
// 3. lateness: n / 10 timers with delays spread over 1 s, started at once,
//    callback time minus (time before start() + delay): p50/p99/p99.9/max;
// 4. the JavaScript thread's CPU time (user + system) per timer of 3.
// Run it against two versions of the binding (e.g. a checkout before the
// delivery queue) on a quiet machine; it takes a few seconds.
const dir = process.argv[2] || '..';
const n = Number(process.argv[3] || 20000);
const { Runtime } = require(require('node:path').resolve(__dirname, dir));

const hr = () => process.hrtime.bigint();
const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
const us = (ns) => (Number(ns) / 1000).toFixed(1);

async function main() {
  const rt = new Runtime({ shards: 1, workers: 1 });
  // warm-up (JIT, first-use registrations)
  await new Promise((resolve) => {
    let left = 2000;
    for (let i = 0; i < 2000; i++) rt.start(0, () => { if (--left === 0) resolve(); });
  });

  // 0: start and stop of pending timers (10 s: none comes due)
  {
    const ts = new Array(n);
    const a = hr();
    for (let i = 0; i < n; i++) ts[i] = rt.start(10000, () => {});
    const b = hr();
    for (let i = 0; i < n; i++) ts[i].stop();
    const c = hr();
    console.log(`start (pending): ${(Number(b - a) / n).toFixed(0)} ns/timer; stop: ${(Number(c - b) / n).toFixed(0)} ns/timer`);
  }

  // 1 + 2
  let fired = 0;
  let done;
  const allFired = new Promise((resolve) => { done = resolve; });
  const t0 = hr();
  for (let i = 0; i < n; i++) rt.start(0, () => { if (++fired === n) done(hr()); });
  const t1 = hr();
  const t2 = await allFired;
  console.log(`start (delay 0): ${(Number(t1 - t0) / n).toFixed(0)} ns/timer; fire (all due at once): ${(Number(t2 - t1) / n).toFixed(0)} ns/timer`);

  // 3 + 4
  const m = Math.max(100, Math.floor(n / 10));
  const late = new Array(m);
  let left = m;
  const cpu0 = process.cpuUsage();
  const lateDone = new Promise((resolve) => {
    for (let i = 0; i < m; i++) {
      const delay = (i * 997) % 1000; // ms, spread over 1 s
      const from = hr();
      rt.start(delay, () => {
        late[i] = hr() - from - BigInt(delay) * 1_000_000n;
        if (--left === 0) resolve();
      });
    }
  });
  await lateDone;
  const cpu = process.cpuUsage(cpu0);
  const sorted = late.slice().sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  if (sorted[0] < 0n) console.log(`EARLY: ${sorted[0]} ns`);
  console.log(`lateness (${m} timers over 1 s, resolution 1 ms): p50 ${us(pct(sorted, 0.5))} us, ` +
    `p99 ${us(pct(sorted, 0.99))} us, p99.9 ${us(pct(sorted, 0.999))} us, max ${us(sorted[m - 1])} us`);
  console.log(`CPU of the process while they fired: ${((cpu.user + cpu.system) * 1000 / m).toFixed(0)} ns/timer`);
  const st = rt.stats();
  if (st.queue) {
    console.log(`queue: deadline -> fd readable p50 ${us(st.queue.signalP50Ns)} us p99 ${us(st.queue.signalP99Ns)} us; ` +
      `deadline -> callback p50 ${us(st.queue.runP50Ns)} us p99 ${us(st.queue.runP99Ns)} us`);
  }
  await rt.close();
}

main().catch((err) => { console.error(err); process.exit(1); });
