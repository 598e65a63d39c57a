// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// Timers fire on time, on the JavaScript thread; stop, reset, periodic runs; the batch calls (1.4).
const test = require('node:test');
const assert = require('node:assert/strict');
const { isMainThread, threadId } = require('node:worker_threads');
const { Runtime, Timer, TickwheelError, now } = require('..');

const { sleep, until } = require('./support');
const hr = () => process.hrtime.bigint();

// Resolves once cond() is true (polled every 2 ms), rejects after limitMs.
let rt;
test.before(() => { rt = new Runtime({ shards: 2, workers: 2 }); });
test.after(() => rt.close());

test('now() is the clock of process.hrtime.bigint()', () => {
  const a = hr();
  const b = now();
  const c = hr();
  assert.ok(typeof b === 'bigint');
  assert.ok(a <= b && b <= c, `${a} <= ${b} <= ${c}`);
});

test('a one-shot timer fires once, never before its delay', async () => {
  const delays = [0, 1, 5, 20, 50, 2.5];
  const runs = delays.map(() => []);
  const started = [];
  const timers = delays.map((ms, i) => {
    started[i] = hr();
    return rt.start(ms, (t) => { runs[i].push({ at: hr(), t }); });
  });
  for (const t of timers) {
    assert.ok(t instanceof Timer);
    assert.equal(typeof t.id, 'bigint');
    assert.notEqual(t.id, 0n);
    assert.equal(t.periodic, false);
  }
  await until(() => runs.every((r) => r.length > 0), 10000, 'all timers');
  await sleep(80); // a second run would show up here
  delays.forEach((ms, i) => {
    assert.equal(runs[i].length, 1, `timer ${i} ran ${runs[i].length} times`);
    const elapsed = runs[i][0].at - started[i];
    assert.ok(elapsed >= BigInt(Math.ceil(ms * 1e6)), `${ms} ms timer fired after ${elapsed} ns`);
    assert.equal(runs[i][0].t, timers[i], 'the callback gets its Timer');
    assert.equal(timers[i].active, false);
  });
});

test('callbacks run on the main JavaScript thread, never during synchronous code', async () => {
  let counter = 0; // a plain, non-atomic counter shared with the main thread
  let inSync = false;
  let overlaps = 0;
  let offThread = 0;
  const n = 2000;
  for (let i = 0; i < n; i++) {
    rt.start(i % 10, () => {
      if (!isMainThread || threadId !== 0) offThread++;
      if (inSync) overlaps++;
      const v = counter; // read-modify-write: loses updates if two threads race
      counter = v + 1;
    });
  }
  // Synchronous main-thread work while the timers fall due.
  inSync = true;
  const end = Date.now() + 30;
  let mine = 0;
  while (Date.now() < end) { const v = counter; counter = v + 1; mine++; }
  inSync = false;
  await until(() => counter === n + mine, 20000, `counter ${n + mine}`);
  await sleep(30);
  assert.equal(counter, n + mine);
  assert.equal(offThread, 0);
  assert.equal(overlaps, 0);
});

test('periodic timers run repeatedly until stopped', async () => {
  const at = [];
  const t0 = hr();
  const p = rt.startPeriodic(5, () => { at.push(hr()); });
  assert.equal(p.periodic, true);
  await until(() => at.length >= 5, 10000, '5 runs');
  assert.ok(at[0] - t0 >= 5_000_000n, 'first run after one period by default');
  assert.equal(p.stop(), true);
  assert.equal(p.active, false);
  const count = at.length;
  await sleep(60);
  assert.equal(at.length, count, 'no run after stop() returned');
  assert.equal(p.stop(), false, 'a second stop prevents nothing');

  // start(ms, fn, { period }) and startPeriodic(period, fn, { delay })
  let a = 0;
  let b = 0;
  const q = rt.start(0, () => { a++; }, { period: 3 });
  const r = rt.startPeriodic(3, () => { b++; }, { delay: 0 });
  assert.equal(q.periodic, true);
  await until(() => a >= 3 && b >= 3, 10000, 'both periodic');
  assert.equal(rt.stop(q), true);
  assert.equal(rt.stop(r.id), true, 'stop by BigInt id');
});

test('a periodic timer stopped from its own callback runs no more', async () => {
  let runs = 0;
  let ret;
  rt.startPeriodic(2, (t) => { if (++runs === 3) ret = t.stop(); });
  await until(() => runs >= 3);
  await sleep(40);
  assert.equal(runs, 3);
  assert.equal(ret, true);
});

test('stop() returns true for a pending timer, false once it fired', async () => {
  let ran = 0;
  const pending = rt.start(10000, () => { ran++; });
  assert.equal(pending.active, true);
  assert.equal(rt.stop(pending), true);
  assert.equal(rt.stop(pending), false);
  assert.equal(pending.active, false);

  const fired = rt.start(1, () => { ran++; });
  await until(() => ran === 1);
  assert.equal(rt.stop(fired), false);
  assert.equal(rt.stop(fired.id), false);
  assert.equal(rt.stop(123456789n), false, 'an unknown id');
  await sleep(20);
  assert.equal(ran, 1);
});

test('stop() while the run is queued to the event loop prevents it', async () => {
  let ran = 0;
  const t = rt.start(0, () => { ran++; });
  // Keep the thread busy until the timer is due (its callback waits for the
  // event loop; test/queue.test.js checks the C side of this exactly).
  const end = Date.now() + 50;
  while (Date.now() < end) { /* busy */ }
  assert.equal(rt.stop(t), true);
  await sleep(30);
  assert.equal(ran, 0);
});

test('reset() moves a pending timer', async () => {
  // Earlier.
  let at = null;
  let t0 = hr();
  const early = rt.start(5000, () => { at = hr(); });
  assert.equal(rt.reset(early, 20), true);
  await until(() => at !== null, 4000, 'the reset timer');
  assert.ok(at - t0 >= 20_000_000n, `fired ${at - t0} ns after start`);

  // Later.
  let ran = 0;
  t0 = hr();
  const late = rt.start(20, () => { ran++; at = hr(); });
  assert.equal(late.reset(150), true);
  await sleep(80);
  assert.equal(ran, 0, 'not at its old deadline');
  await until(() => ran === 1, 10000, 'the postponed timer');
  assert.ok(at - t0 >= 150_000_000n, `fired ${at - t0} ns after start`);
  assert.equal(rt.reset(late, 10), false, 'fired: not pending');
  assert.equal(rt.reset(77n, 10), false, 'unknown id');
});

test('reset() from a one-shot timer\'s own callback re-arms it', async () => {
  let runs = 0;
  const ids = new Set();
  let activeInside = null;
  const t = rt.start(1, (timer) => {
    ids.add(timer.id);
    if (++runs < 3) {
      assert.equal(timer.reset(2), true);
      activeInside = timer.active;
    }
  });
  await until(() => runs >= 3);
  await sleep(30);
  assert.equal(runs, 3);
  assert.equal(activeInside, true);
  assert.equal(ids.size, 1, 'the same C timer is re-armed');
  assert.equal(t.active, false);
  assert.equal(t.reset(1), false, 'ran its last run');
});

test('reset() of a periodic timer, also from its own callback, moves its next run', async () => {
  const at = [];
  let resetAt = 0n;
  let ret;
  const p = rt.startPeriodic(5, (t) => {
    at.push(hr());
    if (at.length === 2) { resetAt = hr(); ret = t.reset(60); }
  });
  await until(() => at.length >= 3, 10000, '3 runs');
  assert.equal(ret, true);
  assert.ok(at[2] - resetAt >= 60_000_000n, `next run ${at[2] - resetAt} ns after the reset`);
  const before = hr();
  assert.equal(p.reset(80), true, 'from outside the callback');
  const count = at.length;
  await until(() => at.length > count, 10000, 'the run after the reset');
  assert.ok(at[count] - before >= 80_000_000n);
  assert.equal(p.stop(), true);
});

test('many timers each fire exactly once; nothing stays registered', async () => {
  const koffi = require('koffi');
  const { liveTimers } = require('..')._internal;
  const n = 10000;
  const local = new Runtime({ workers: 2 });
  const before = local.stats().fired;
  const counts = new Uint8Array(n);
  let total = 0;
  for (let i = 0; i < n; i++) {
    local.start((i * 7) % 50, () => { counts[i]++; total++; });
  }
  assert.equal(koffi.stats().callbacks, 1, 'one registered trampoline (fire; no release hook), not one per timer');
  await until(() => total >= n, 60000, `${n} timers`);
  await sleep(50);
  assert.equal(total, n);
  for (let i = 0; i < n; i++) assert.equal(counts[i], 1, `timer ${i}`);
  await until(() => local.liveTimers === 0, 10000, 'all released');
  assert.equal(local.stats().fired - before, n);
  await local.close();
  assert.equal(koffi.stats().callbacks, 1);
  for (const t of liveTimers()) assert.notEqual(t._rt, local, 'a timer of the closed runtime is left');
});

// ---- batches (library 1.4): startMany / stopMany / resetMany, one call into
// the library per array, each element as the single call.
test('startMany starts one timer per delay, each fires once, never early', async () => {
  const delays = [0, 1, 2, 5, 10, 0.5, 3, 7];
  const fired = [];
  const before = hr();
  const timers = rt.startMany(delays, (t) => { fired.push({ t, at: hr() }); });
  assert.equal(timers.length, delays.length);
  assert.ok(timers.every((t) => t instanceof Timer));
  assert.equal(new Set(timers.map((t) => t.id)).size, delays.length);
  await until(() => fired.length === delays.length, 10000, 'every timer to fire');
  for (const { t, at } of fired) {
    const i = timers.indexOf(t);
    assert.ok(at - before >= BigInt(Math.ceil(delays[i] * 1e6)), `timer ${i} fired early`);
  }
  assert.equal(rt.liveTimers, 0);
});

test('startMany with one function per delay, and start options for all', async () => {
  const got = [];
  const fns = [0, 1, 2].map((i) => () => got.push(i));
  const timers = rt.startMany([1, 1, 1], fns, { group: 9 });
  await until(() => got.length === 3);
  assert.deepEqual(got.sort(), [0, 1, 2]);
  assert.ok(timers.every((t) => !t.active));
  assert.throws(() => rt.startMany([1, 2], [() => {}]), TypeError);
  assert.throws(() => rt.startMany([1, -1], () => {}), RangeError);
  assert.throws(() => rt.startMany('x', () => {}), TypeError);
  assert.deepEqual(rt.startMany([], () => {}), []);
});

test('stopMany and resetMany answer each element as stop() and reset()', async () => {
  let ran = 0;
  const timers = rt.startMany([60000, 60000, 60000, 60000], () => { ran++; });
  const batch = [timers[0], timers[1], timers[0], 12345n, timers[2].id];
  assert.deepEqual(rt.stopMany(batch), [true, true, false, false, true]);
  assert.equal(rt.liveTimers, 1);
  assert.deepEqual(rt.resetMany(timers, 5), [false, false, false, true]);
  await until(() => ran === 1, 10000, 'the re-armed timer');
  assert.deepEqual(rt.stopMany(timers), [false, false, false, false]);
  assert.deepEqual(rt.stopMany([]), []);
  assert.throws(() => rt.stopMany([1.5]), TypeError); // a Number id must be exact (ids.test.js)
  assert.throws(() => rt.resetMany(timers, -1), RangeError);
  assert.equal(rt.liveTimers, 0);
});

test('startMany beyond maxTimers gives null for those, and they are released', () => {
  const small = new Runtime({ shards: 1, maxTimers: 2 });
  try {
    const timers = small.startMany([60000, 60000, 60000], () => {});
    assert.deepEqual(timers.map((t) => t !== null), [true, true, false]);
    assert.equal(small.liveTimers, 2);
    assert.deepEqual(small.stopMany(timers.filter((t) => t !== null)), [true, true]);
    assert.equal(small.liveTimers, 0);
  } finally {
    small.close();
  }
});

test('on a manual clock, batches run inside advance()', () => {
  const m = new Runtime({ manualClock: true, shards: 1 });
  try {
    const order = [];
    const timers = m.startMany([30, 10, 20], [() => order.push('a'), () => order.push('b'), () => order.push('c')]);
    assert.deepEqual(m.resetMany([timers[0]], 5), [true]);
    assert.equal(m.advance(25), 3);
    assert.deepEqual(order, ['a', 'b', 'c']);
  } finally {
    m.close();
  }
});

test('after close() every batch call is TW_ESHUTDOWN or false', async () => {
  const c = new Runtime({ shards: 1 });
  const timers = c.startMany([60000], () => {});
  await c.close();
  assert.throws(() => c.startMany([1], () => {}), TickwheelError);
  assert.deepEqual(c.stopMany(timers), [false]);
  assert.deepEqual(c.resetMany(timers, 1), [false]);
});

test('stats() shows lateness by stage and a busy loop as wait (since 1.7)', async () => {
  const rt = new Runtime({ workers: 1 });
  let ran = 0;
  for (let i = 0; i < 5; i++) rt.start(1, () => { ran++; });
  // The JavaScript thread is busy for 100 ms: the due callbacks wait for it.
  const busyUntil = Date.now() + 100;
  while (Date.now() < busyUntil) { /* a busy loop */ }
  await until(() => ran === 5 && rt.stats().runDurationSamples === 5, 10000, 'the runs');
  const st = rt.stats();
  assert.equal(st.latenessSamples, 5);
  assert.ok(st.waitLatenessMaxNs >= 50e6, `wait max ${st.waitLatenessMaxNs} ns: the busy loop`);
  assert.ok(st.driverLatenessMaxNs <= st.latenessMaxNs);
  for (const k of ['driverLatenessP50Ns', 'driverLatenessP99Ns', 'driverLatenessP999Ns', 'waitLatenessP50Ns',
    'waitLatenessP99Ns', 'waitLatenessP999Ns', 'runDurationP50Ns', 'runDurationP99Ns', 'runDurationP999Ns',
    'runDurationMaxNs', 'workersBusy', 'waitingForWorker', 'callbacksRunning', 'oldestRunAgeNs', 'slots',
    'residentBytes']) {
    assert.equal(typeof st[k], 'number', k);
  }
  assert.equal(st.workersBusy, 0);
  assert.ok(st.residentBytes > 0);
  await rt.close();
});
