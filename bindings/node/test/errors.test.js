// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// Errors speak milliseconds and name the value passed; callback exceptions
// are counted in stats().callbackExceptions (library 1.6).
const test = require('node:test');
const assert = require('node:assert/strict');
const { Runtime, MAX_DELAY_MS } = require('..');
const { load } = require('..')._internal;
const { until } = require('./support');

// A RangeError/TypeError with code TW_EINVAL whose message matches every regex.
const einval = (Ctor, ...res) => (err) => {
  assert.ok(err instanceof Ctor, `${err.name}: ${err.message}`);
  assert.equal(err.code, 'TW_EINVAL');
  for (const re of res) assert.match(err.message, re);
  assert.doesNotMatch(err.message, /\bns\b|kMaxDelay|9223372036854775807|1152921504606846976/,
    'no nanoseconds, no clamped value, no C++ constant');
  return true;
};

test('a delay above the longest names the value passed and the limit, in ms and years', async () => {
  const rt = new Runtime({ shards: 1, workers: 1 });
  try {
    const f = () => {};
    assert.throws(() => rt.start(1e15, f),
      einval(RangeError, /^ms is 1000000000000000 ms \(31,688 years\)/, /the longest is 1152921504606\.847 ms/, /36\.5 years/));
    assert.throws(() => rt.startPeriodic(2e12, f), einval(RangeError, /^period is 2000000000000 ms \(63\.4 years\)/));
    assert.throws(() => rt.start(1, f, { leeway: Infinity }), einval(RangeError, /^leeway is Infinity ms \(infinite\)/));
    assert.throws(() => rt.startMany([1, 5e12], f), einval(RangeError, /^delays\[1\] is 5000000000000 ms/));
    const t = rt.start(1000, f);
    assert.throws(() => rt.reset(t, 1e13), einval(RangeError, /^ms is 10000000000000 ms/));
    assert.throws(() => t.resetAt(rt.now() + 2n ** 61n), einval(RangeError, /ahead of the timer's clock: the longest is/));
    // The longest itself is accepted.
    assert.equal(rt.start(MAX_DELAY_MS, f).active, true);
  } finally {
    await rt.close();
  }
});

test('negative values are refused as negative, not wrapped', async () => {
  const rt = new Runtime({ shards: 1, workers: 1 });
  try {
    const f = () => {};
    assert.throws(() => rt.start(-1, f), einval(RangeError, /^ms is -1 ms: it cannot be negative$/));
    assert.throws(() => rt.startPeriodic(-0.5, f), einval(RangeError, /^period is -0\.5 ms: it cannot be negative$/));
    assert.throws(() => rt.start(1, f, { period: -3 }), einval(RangeError, /^period is -3 ms/));
    assert.throws(() => rt.start(NaN, f), einval(RangeError, /^ms must be a number of milliseconds, got NaN$/));
    assert.throws(() => rt.startPeriodic(0, f), einval(RangeError, /^period is 0 ms: it must be above 0$/));
    const t = rt.start(1000, f);
    assert.throws(() => t.resetAt(-5n), einval(RangeError, /^deadlineNs is -5n: it cannot be negative$/));
    assert.throws(() => new Runtime({ workers: -1 }), einval(RangeError, /workers must be between 0 and 4096, got -1$/));
    assert.throws(() => new Runtime({ shards: -2 }), einval(RangeError, /got -2$/));
    assert.throws(() => new Runtime({ maxTimers: -1n }), einval(RangeError, /got -1$/));
    assert.throws(() => new Runtime({ maxTimers: -1 }), einval(RangeError, /got -1$/));
    assert.throws(() => rt.start(1, f, { shard: -2 }), einval(RangeError, /shard must be between -1 and \d+, got -2$/));
    assert.throws(() => rt.stop(-1), einval(TypeError, /got -1;/));
  } finally {
    await rt.close();
  }
});

const counts = () => load().tw_runtime_count_callback_exception !== null;

test('a callback that throws is counted in stats().callbackExceptions', { skip: !counts() && 'library < 1.6' }, async () => {
  const rt = new Runtime({ shards: 1, workers: 1 });
  const seen = [];
  rt.on('error', (err) => seen.push(err.message));
  let periodic = 0;
  const p = rt.startPeriodic(1, () => {
    if (++periodic <= 3) throw new Error(`periodic ${periodic}`);
  });
  rt.start(1, () => { throw new TypeError('once'); });
  rt.start(2, () => { throw 'not an Error'; }); // eslint-disable-line no-throw-literal
  let fine = 0;
  rt.start(3, () => { fine++; });
  await until(() => seen.length === 5 && periodic > 3 && fine === 1, 10000, 'the throwing callbacks');
  p.stop();
  assert.equal(rt.stats().callbackExceptions, 5);
  await rt.close();
  assert.equal(rt.stats().callbackExceptions, 5, 'in the final counters too');
});

test('a manual runtime counts the exceptions thrown inside advance()', { skip: !counts() && 'library < 1.6' }, async () => {
  const rt = new Runtime({ manualClock: true });
  rt.start(10, () => { throw new Error('a'); });
  rt.start(20, () => { throw new Error('b'); });
  rt.start(30, () => {});
  assert.throws(() => rt.advance(50), AggregateError);
  assert.equal(rt.stats().callbackExceptions, 2);
  await rt.close();
});

test('without the 1.6 function, exceptions are still reported, only not counted', async () => {
  const l = load();
  const saved = l.tw_runtime_count_callback_exception;
  l.tw_runtime_count_callback_exception = null; // as a 1.5 library binds
  const rt = new Runtime({ manualClock: true });
  try {
    rt.start(10, () => { throw new Error('old'); });
    assert.throws(() => rt.advance(10), /old/);
    assert.equal(rt.stats().callbackExceptions, 0);
  } finally {
    l.tw_runtime_count_callback_exception = saved;
    await rt.close();
  }
});
