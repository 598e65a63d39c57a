// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// The batch calls of library 1.4: startMany / stopMany / resetMany, one call
// into the library per array, each element as the single call.
const test = require('node:test');
const assert = require('node:assert/strict');
const { Runtime, Timer, TickwheelError } = require('..');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const hr = () => process.hrtime.bigint();

async function until(cond, limitMs = 10000, what = 'condition') {
  const end = Date.now() + limitMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
}

let rt;
test.before(() => { rt = new Runtime({ shards: 2, workers: 2 }); });
test.after(() => rt.close());

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
  assert.throws(() => rt.stopMany([1]), TypeError);
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
