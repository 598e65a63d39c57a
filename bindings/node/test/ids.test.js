// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// Timer ids given as Numbers: accepted by every call taking an id where the
// Number is exact (a safe integer >= 0, so BigInt(n) is the very 64-bit id),
// a TypeError (code 'TW_EINVAL') otherwise; and the library's error detail.
const test = require('node:test');
const assert = require('node:assert/strict');
const { Runtime, TickwheelError, now } = require('..');

function inexact(err) {
  return err instanceof TypeError && err.code === 'TW_EINVAL' && /safe integer/.test(err.message) &&
    /BigInt/.test(err.message);
}

function manual(t) {
  const rt = new Runtime({ manualClock: true, shards: 1 });
  t.after(() => rt.close());
  return rt;
}

test('a Number id acts as its BigInt id: stop, reset, resetAt, query, stopMany, resetMany', (t) => {
  const rt = manual(t);
  const ran = [];
  const mk = (name, ms) => rt.start(ms, () => ran.push(name));
  const a = mk('a', 10);
  const b = mk('b', 10);
  const c = mk('c', 10);
  const d = mk('d', 10);
  const e = mk('e', 10);
  for (const x of [a, b, c, d, e]) assert.ok(Number.isSafeInteger(Number(x.id)), `id ${x.id} is a safe integer`);
  const num = (x) => Number(x.id);

  assert.equal(rt.query(num(a)).state, 'pending');
  assert.equal(rt.query(num(a)).deadline, a.query().deadline);
  assert.equal(rt.reset(num(b), 50), true); // b: 50 ms
  assert.equal(rt.resetAt(num(c), rt.now() + 30_000_000n), true); // c: 30 ms
  assert.deepEqual(rt.resetMany([num(d)], 40), [true]); // d: 40 ms
  assert.equal(rt.stop(num(a)), true);
  assert.equal(rt.stop(num(a)), false, 'stopped already');
  assert.equal(rt.query(num(a)), null);
  assert.deepEqual(rt.stopMany([num(e), e.id, num(a)]), [true, false, false]);

  rt.advance(29);
  assert.deepEqual(ran, []);
  rt.advance(1);
  assert.deepEqual(ran, ['c']);
  rt.advance(10);
  assert.deepEqual(ran, ['c', 'd']);
  rt.advance(10);
  assert.deepEqual(ran, ['c', 'd', 'b']);
  assert.equal(rt.liveTimers, 0);
  // An exact Number that is no live timer is answered like the BigInt: no.
  assert.equal(rt.stop(num(b)), false);
  assert.equal(rt.reset(0, 5), false);
  assert.equal(rt.query(Number.MAX_SAFE_INTEGER), null);
  assert.deepEqual(rt.stopMany([0, Number.MAX_SAFE_INTEGER]), [false, false]);
});

test('an inexact Number id is a TypeError naming the limit and the BigInt way', (t) => {
  const rt = manual(t);
  const x = rt.start(10, () => {});
  const bad = [2 ** 53, 2 ** 60, Number(x.id) + 0.5, 1.5, -1, -0.5, NaN, Infinity, -Infinity];
  for (const n of bad) {
    assert.throws(() => rt.stop(n), inexact, `stop(${n})`);
    assert.throws(() => rt.reset(n, 1), inexact, `reset(${n})`);
    assert.throws(() => rt.resetAt(n, now()), inexact, `resetAt(${n})`);
    assert.throws(() => rt.query(n), inexact, `query(${n})`);
    assert.throws(() => rt.stopMany([x.id, n]), inexact, `stopMany([.., ${n}])`);
    assert.throws(() => rt.resetMany([n], 1), inexact, `resetMany([${n}])`);
  }
  // Nothing was acted on: the batch was refused before the call.
  assert.equal(x.query().state, 'pending');
  assert.equal(rt.advance(10), 1);
  // Other types still say what an id is.
  assert.throws(() => rt.stop('1'), (err) => err instanceof TypeError && /a BigInt, or a Number/.test(err.message));
});

test("a failed library call's error carries tw_last_error_message() when the library has it", async () => {
  const rt = new Runtime({ workers: 1, shards: 1 });
  try {
    let err;
    try {
      rt.advance(1); // TW_EINVAL from the library: the runtime has no manual clock
    } catch (e) {
      err = e;
    }
    assert.ok(err instanceof TickwheelError);
    assert.equal(err.code, 'TW_EINVAL');
    assert.equal(typeof err.detail, 'string');
    const [major, minor] = require('..').version().split('.').map(Number);
    if (major > 1 || minor >= 5) {
      // 1.5 names the call and why: the detail is appended to the message.
      assert.notEqual(err.detail, '', 'a 1.5 library gives a detail');
      assert.ok(err.message.endsWith(`: ${err.detail}`), err.message);
    } else {
      assert.equal(err.detail, '', 'an older library has no tw_last_error_message');
      assert.match(err.message, /manual clock.*\(TW_EINVAL\)$/);
    }
  } finally {
    await rt.close();
  }
});
