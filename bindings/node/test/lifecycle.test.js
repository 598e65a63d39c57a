// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// close(), errors from callbacks, argument errors, library loading.
const test = require('node:test');
const assert = require('node:assert/strict');
const { Runtime, TickwheelError, LibraryLoadError, errorCodes, version, libraryPath, MAX_DELAY_MS } = require('..');
const { checkVersion, liveTimers } = require('..')._internal;
const pkg = require('../package.json');

const { sleep, until } = require('./support');
test('the library has this package\'s major version', () => {
  assert.match(version(), /^\d+\.\d+\.\d+$/);
  assert.equal(Number(version().split('.')[0]), Number(pkg.version.split('.')[0]));
  assert.ok(libraryPath().length > 0);
  const major = Number(pkg.version.split('.')[0]);
  assert.equal(checkVersion((major << 16) | (7 << 8) | 3, 'x'), `${major}.7.3`);
  assert.throws(() => checkVersion(((major + 1) << 16), 'libx.so'),
    { message: new RegExp(`libx.so is tickwheel ${major + 1}\\.0\\.0; this binding \\(tickwheel ${pkg.version.replace(/\./g, '\\.')}\\) needs ${major}\\.x`) });
  assert.throws(() => checkVersion(0x000200, 'liby.so'), /liby.so is tickwheel 0\.2\.0/);
  // The delivery queues came with 1.2: an older 1.x library is refused.
  assert.throws(() => checkVersion((1 << 16) | (1 << 8) | 4, 'libz.so'),
    /libz.so is tickwheel 1\.1\.4; this binding .* needs 1\.2 or later \(delivery queues\)/);
  assert.equal(checkVersion((1 << 16) | (2 << 8), 'x'), '1.2.0');
});

test('close() cancels and releases pending timers; it is idempotent', async () => {
  const rt = new Runtime({ workers: 2 });
  let ran = 0;
  for (let i = 0; i < 100; i++) rt.start(5000 + i, () => { ran++; });
  const p = rt.startPeriodic(10000, () => { ran++; });
  assert.equal(rt.liveTimers, 101);
  const closing = rt.close();
  assert.equal(rt.closed, true);
  assert.equal(rt.close(), closing, 'the same Promise');
  await closing;
  assert.equal(rt.liveTimers, 0);
  assert.equal(p.active, false);
  for (const t of liveTimers()) assert.notEqual(t._rt, rt);
  const st = rt.stats();
  assert.equal(st.shutDown, true);
  assert.equal(st.live, 0);
  assert.equal(st.started, 101);
  assert.equal(ran, 0);
  await rt.close();
  // After close: start throws, stop/reset report "not pending".
  assert.throws(() => rt.start(1, () => {}), (err) => err instanceof TickwheelError &&
    err.code === 'TW_ESHUTDOWN' && err.errno === errorCodes.TW_ESHUTDOWN && /shut down/i.test(err.message));
  assert.equal(rt.stop(p), false);
  assert.equal(rt.reset(p, 1), false);
});

test('close() from inside a callback does not hang', async () => {
  const rt = new Runtime({ workers: 2 });
  let closing = null;
  let after = 0;
  rt.startPeriodic(1, () => { after++; });
  rt.start(2, () => { closing = rt.close(); });
  await until(() => closing !== null, 10000, 'the closing callback');
  const runs = after;
  await closing;
  await sleep(20);
  assert.equal(after, runs, 'no callback after close()');
  assert.equal(rt.liveTimers, 0);
  assert.equal(rt.stats().shutDown, true);
});

test('closing a runtime while another one\'s runs are queued does not hang', async () => {
  const busy = new Runtime({ workers: 2 });
  let runs = 0;
  for (let i = 0; i < 20; i++) busy.startPeriodic(0.1, () => { runs++; });
  await until(() => runs > 0);
  const end = Date.now() + 30;
  while (Date.now() < end) { /* busy's workers now wait for this thread */ }
  const idle = new Runtime({ workers: 2 });
  idle.start(10000, () => {});
  await idle.close();
  await busy.close();
  assert.equal(busy.liveTimers, 0);
});

test('an exception in a callback goes to the error event; the runtime goes on', async () => {
  const rt = new Runtime({ workers: 2 });
  const errors = [];
  rt.on('error', (err, timer) => errors.push({ err, timer }));
  let periodicRuns = 0;
  const p = rt.startPeriodic(2, () => { periodicRuns++; throw new Error(`periodic ${periodicRuns}`); });
  const once = rt.start(1, () => { throw new TypeError('once'); });
  let fine = 0;
  rt.start(5, () => { fine++; });
  await until(() => periodicRuns >= 3 && fine === 1 && errors.length >= 4, 10000, 'errors');
  assert.ok(errors.some((e) => e.err instanceof TypeError && e.timer === once));
  assert.ok(errors.some((e) => e.err.message === 'periodic 2' && e.timer === p));
  p.stop();
  await rt.close();
});

test('bad arguments throw TypeError or RangeError with code TW_EINVAL', async () => {
  const einval = (Ctor) => (err) => err instanceof Ctor && err.code === 'TW_EINVAL';
  assert.throws(() => new Runtime({ shards: 257 }), einval(RangeError));
  assert.throws(() => new Runtime({ workers: -1 }), einval(RangeError));
  assert.throws(() => new Runtime({ workers: 1.5 }), einval(TypeError));
  assert.throws(() => new Runtime({ resolution: 0.0001 }), einval(RangeError));
  assert.throws(() => new Runtime({ resolution: '1' }), einval(TypeError));
  assert.throws(() => new Runtime({ maxTimers: -1 }), einval(RangeError));
  assert.throws(() => new Runtime({ pinShards: 1 }), einval(TypeError));
  assert.throws(() => new Runtime({ shard: 1 }), /unknown option "shard"/);
  assert.throws(() => new Runtime(5), einval(TypeError));

  const rt = new Runtime({ workers: 1, resolution: 0.5, maxTimers: 3 });
  assert.equal(rt.stats().resolutionNs, 500000);
  const fn = () => {};
  assert.throws(() => rt.start('10', fn), einval(TypeError));
  assert.throws(() => rt.start(10n, fn), einval(TypeError));
  assert.throws(() => rt.start(-1, fn), einval(RangeError));
  assert.throws(() => rt.start(NaN, fn), einval(RangeError));
  assert.throws(() => rt.start(Infinity, fn), einval(RangeError));
  assert.throws(() => rt.start(MAX_DELAY_MS * 2, fn), einval(RangeError));
  assert.throws(() => rt.start(1, 'fn'), einval(TypeError));
  assert.throws(() => rt.start(1, fn, { period: -1 }), einval(RangeError));
  assert.throws(() => rt.start(1, fn, { every: 1 }), einval(TypeError));
  assert.throws(() => rt.start(1, fn, { shard: -2 }), einval(RangeError));
  assert.throws(() => rt.startPeriodic(0, fn), einval(RangeError));
  assert.throws(() => rt.stop(5.5), einval(TypeError)); // a Number id must be exact (ids.test.js)
  assert.throws(() => rt.reset('x', 1), einval(TypeError));
  const other = new Runtime({ workers: 1 });
  const foreign = other.start(10000, fn);
  assert.throws(() => rt.stop(foreign), /another Runtime/);
  await other.close();

  // The longest delay is accepted; maxTimers is enforced with TW_EAGAIN.
  const far = rt.start(MAX_DELAY_MS, fn);
  rt.start(10000, fn, { shard: 0 });
  rt.start(10000, fn);
  assert.throws(() => rt.start(1, fn), (err) => err instanceof TickwheelError && err.code === 'TW_EAGAIN');
  assert.equal(rt.liveTimers, 3, 'the refused timer left nothing behind');
  assert.equal(rt.stop(far), true);
  await until(() => rt.liveTimers === 2);
  rt.start(1, fn);
  await rt.close();
});
