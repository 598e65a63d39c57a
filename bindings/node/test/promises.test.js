// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// The promise API (like node:timers/promises): rt.promises.setTimeout /
// setInterval and require('tickwheel/promises'), with AbortSignal. Most
// run on a manual runtime, so every step is exact.
const test = require('node:test');
const assert = require('node:assert/strict');
const { getEventListeners } = require('node:events');
const { Runtime, TickwheelError, AbortError } = require('..');
const promises = require('../promises');

// Lets every settled promise's reactions run.
const flush = () => new Promise((resolve) => setImmediate(resolve));

function manual(t) {
  const rt = new Runtime({ manualClock: true, shards: 1 });
  t.after(() => rt.close());
  return rt;
}

// Tracks a promise: state() is 'pending', ['resolved', value] or ['rejected', error].
function track(p) {
  let st = 'pending';
  p.then((v) => { st = ['resolved', v]; }, (e) => { st = ['rejected', e]; });
  return () => st;
}

function isAbort(reason) {
  return (err) => err instanceof AbortError && err.name === 'AbortError' && err.code === 'ABORT_ERR' &&
    err.cause === reason;
}

test('setTimeout resolves with its value once ms have passed, not before', async (t) => {
  const rt = manual(t);
  const st = track(rt.promises.setTimeout(30_000, 'done'));
  const st2 = track(rt.promises.setTimeout(5));
  assert.equal(rt.liveTimers, 2);
  rt.advance(29_999);
  await flush();
  assert.equal(st(), 'pending');
  assert.deepEqual(st2(), ['resolved', undefined]);
  rt.advance(1);
  await flush();
  assert.deepEqual(st(), ['resolved', 'done']);
  assert.equal(rt.liveTimers, 0);
});

test('aborting rejects with an AbortError, stops the timer and leaves no listener', async (t) => {
  const rt = manual(t);
  const ac = new AbortController();
  const st = track(rt.promises.setTimeout(100, 'v', { signal: ac.signal }));
  const other = track(rt.promises.setTimeout(100, 'w', { signal: ac.signal }));
  assert.equal(getEventListeners(ac.signal, 'abort').length, 2);
  assert.equal(rt.liveTimers, 2);
  const reason = new Error('no longer needed');
  ac.abort(reason);
  assert.equal(rt.liveTimers, 0, 'both timers stopped by abort()');
  assert.equal(getEventListeners(ac.signal, 'abort').length, 0);
  await flush();
  for (const s of [st, other]) {
    assert.equal(s()[0], 'rejected');
    assert.ok(isAbort(reason)(s()[1]), String(s()[1]));
  }
  assert.equal(rt.advance(200), 0, 'nothing runs');
  assert.equal(rt.stats().stopped, 2);
});

test('an already-aborted signal rejects at once and starts no timer', async (t) => {
  const rt = manual(t);
  const before = rt.stats().started;
  const signal = AbortSignal.abort('early');
  await assert.rejects(rt.promises.setTimeout(10, 1, { signal }), isAbort('early'));
  assert.equal(rt.stats().started, before);
  assert.equal(getEventListeners(signal, 'abort').length, 0);
  const it = rt.promises.setInterval(10, 1, { signal });
  await assert.rejects(it.next(), isAbort('early'));
  assert.equal(rt.stats().started, before);
});

test('a fired timer removes its abort listener; a later abort changes nothing', async (t) => {
  const rt = manual(t);
  const ac = new AbortController();
  const st = track(rt.promises.setTimeout(10, 'v', { signal: ac.signal }));
  rt.advance(10);
  assert.equal(getEventListeners(ac.signal, 'abort').length, 0);
  ac.abort();
  await flush();
  assert.deepEqual(st(), ['resolved', 'v']);
});

test('close() rejects a pending promise with TW_ESHUTDOWN; a closed runtime rejects new ones', async () => {
  const rt = new Runtime({ manualClock: true, shards: 1 });
  const ac = new AbortController();
  const p = rt.promises.setTimeout(10, 'v', { signal: ac.signal });
  const it = rt.promises.setInterval(10);
  const next = it.next();
  await flush(); // the generator has started its timer
  assert.equal(rt.liveTimers, 2);
  await rt.close();
  const shutdown = (err) => err instanceof TickwheelError && err.code === 'TW_ESHUTDOWN';
  await assert.rejects(p, shutdown);
  await assert.rejects(next, shutdown);
  assert.equal(getEventListeners(ac.signal, 'abort').length, 0);
  await assert.rejects(rt.promises.setTimeout(1), shutdown);
});

test('bad arguments reject (not throw) with TypeError/RangeError code TW_EINVAL', async (t) => {
  const rt = manual(t);
  const einval = (Ctor) => (err) => err instanceof Ctor && err.code === 'TW_EINVAL';
  const cases = [
    [() => rt.promises.setTimeout(-1), RangeError],
    [() => rt.promises.setTimeout('5'), TypeError],
    [() => rt.promises.setTimeout(5, 1, { signal: {} }), TypeError],
    [() => rt.promises.setTimeout(5, 1, { ref: 1 }), TypeError],
    [() => rt.promises.setTimeout(5, 1, { every: 1 }), TypeError],
    [() => rt.promises.setTimeout(5, 1, null), TypeError],
    [() => promises.setTimeout(NaN), RangeError],
  ];
  for (const [call, Ctor] of cases) {
    let p;
    assert.doesNotThrow(() => { p = call(); });
    await assert.rejects(p, einval(Ctor));
  }
  await assert.rejects(rt.promises.setInterval(0).next(), einval(RangeError));
  await assert.rejects(rt.promises.setInterval(5, 1, { signal: 'x' }).next(), einval(TypeError));
  assert.equal(rt.liveTimers, 0);
});

test('setInterval yields every ms, counts the runs not taken yet, stops on break', async (t) => {
  const rt = manual(t);
  const it = rt.promises.setInterval(10, 'tick');
  const first = track(it.next());
  await flush();
  assert.equal(rt.liveTimers, 1);
  assert.equal(first(), 'pending');
  rt.advance(10);
  await flush();
  assert.deepEqual(first(), ['resolved', { value: 'tick', done: false }]);
  for (let i = 0; i < 3; i++) rt.advance(10); // three runs while nobody iterates
  await flush();
  const got = [];
  for await (const v of it) {
    got.push(v);
    if (got.length === 3) break; // the three counted runs, without any further advance()
  }
  assert.deepEqual(got, ['tick', 'tick', 'tick']);
  assert.equal(rt.liveTimers, 0, 'break stopped the timer');
  assert.deepEqual(await it.next(), { value: undefined, done: true });
});

test('setInterval: aborting while it waits rejects with an AbortError and stops it', async (t) => {
  const rt = manual(t);
  const ac = new AbortController();
  const it = rt.promises.setInterval(10, 'x', { signal: ac.signal });
  const a = await (async () => { rt.advance(0); const p = it.next(); await flush(); rt.advance(10); return p; })();
  assert.deepEqual(a, { value: 'x', done: false });
  const pending = it.next();
  await flush();
  ac.abort('stop it');
  await assert.rejects(pending, isAbort('stop it'));
  assert.equal(rt.liveTimers, 0);
  assert.equal(getEventListeners(ac.signal, 'abort').length, 0);
  assert.deepEqual(await it.next(), { value: undefined, done: true });
});

test("require('tickwheel/promises'): real time, never early", async () => {
  const t0 = process.hrtime.bigint();
  assert.equal(await promises.setTimeout(20, 'real'), 'real');
  assert.ok(process.hrtime.bigint() - t0 >= 20_000_000n);
  const ac = new AbortController();
  let n = 0;
  const t1 = process.hrtime.bigint();
  for await (const v of promises.setInterval(5, 7, { signal: ac.signal })) {
    assert.equal(v, 7);
    if (++n === 3) break;
  }
  assert.ok(process.hrtime.bigint() - t1 >= 15_000_000n);
  assert.equal(getEventListeners(ac.signal, 'abort').length, 0);
  const rt = require('..')._internal.defaultRuntime();
  assert.equal(rt.liveTimers, 0);
  assert.equal(rt.manualClock, false);
  assert.strictEqual(require('..').promises, promises);
  await rt.close(); // the next use makes a new one
  assert.equal(await promises.setTimeout(1, 'again'), 'again');
  assert.notStrictEqual(require('..')._internal.defaultRuntime(), rt);
  await require('..')._internal.defaultRuntime().close();
});
