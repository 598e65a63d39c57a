// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// The timer model of 1.3: period policies, leeway, groups (stopGroup),
// query() and resetAt().
const test = require('node:test');
const assert = require('node:assert/strict');
const { Runtime, Timer, TickwheelError, periodPolicies, now, MAX_DELAY_MS } = require('..');

const { sleep, until } = require('./support');
const MS = 1_000_000n;

// Blocks the JavaScript thread (and so the delivery of callbacks) for ms.
function busy(ms) {
  const end = process.hrtime.bigint() + BigInt(Math.round(ms * 1e6));
  while (process.hrtime.bigint() < end) { /* spin */ }
}

function einval(Ctor) {
  return (err) => err instanceof Ctor && err.code === 'TW_EINVAL';
}

let rt;
test.before(() => { rt = new Runtime({ shards: 2, workers: 1 }); });
test.after(() => rt.close());

// A 10 ms periodic timer with `policy` whose runs block for `work` ms (the
// first one only, unless everyRun); resolves with `count` runs: { start, end,
// info } (hrtime ns, and what query() said inside the run).
async function overrun(policy, work, everyRun, count) {
  const runs = [];
  const t = rt.startPeriodic(10, (timer) => {
    if (runs.length >= count) return;
    const start = process.hrtime.bigint();
    const info = timer.query();
    if (everyRun || runs.length === 0) busy(work);
    runs.push({ start, end: process.hrtime.bigint(), info });
  }, { policy });
  await until(() => runs.length >= count, 10000, `${count} runs`);
  assert.equal(t.stop(), true);
  assert.equal(t.query(), null);
  return runs;
}

test('skip counts the missed grid deadlines', async () => {
  const runs = await overrun('skip', 35, true, 4);
  assert.equal(runs[0].info.state, 'running');
  assert.equal(runs[0].info.runs, 1);
  assert.equal(runs[1].info.runs, 2);
  assert.ok(runs[1].info.missed >= runs[0].info.missed + 2, `missed: ${runs.map((r) => r.info.missed).join(', ')}`);
  for (let i = 1; i < runs.length; i++) assert.ok(runs[i].info.missed >= runs[i - 1].info.missed);
});

test('delay misses nothing and waits a period after each run', async () => {
  const runs = await overrun(periodPolicies.DELAY, 25, true, 4);
  runs.forEach((r, i) => {
    assert.equal(r.info.runs, i + 1);
    assert.equal(r.info.missed, 0);
  });
  for (let i = 1; i < runs.length; i++) {
    assert.ok(runs[i].start >= runs[i - 1].end + 10n * MS, `gap below one period before run ${i}`);
  }
});

test('burst catches up back to back', async () => {
  // The first run blocks 55 ms: the >= 4 grid deadlines it overran run right
  // after it (skip would start run 5 at least 30 ms later, delay 40 ms).
  const runs = await overrun('burst', 55, false, 6);
  runs.forEach((r, i) => {
    assert.equal(r.info.runs, i + 1);
    assert.equal(r.info.missed, 0);
  });
  assert.ok(runs[4].start - runs[0].end < 25n * MS, `not caught up: ${runs[4].start - runs[0].end} ns`);
});

test('query(): pending, due, running, then null', async () => {
  const before = now();
  const t = rt.start(10000, () => {}, { leeway: 250, group: 42, shard: 1 });
  const info = rt.query(t);
  assert.deepEqual(info, { ...t.query(), remaining: info.remaining });
  assert.equal(info.state, 'pending');
  assert.equal(info.shard, 1);
  assert.equal(typeof info.deadline, 'bigint');
  assert.ok(info.deadline >= before + 10000n * MS && info.deadline < before + 11000n * MS);
  assert.ok(info.remaining > 9000 && info.remaining <= 10001, `${info.remaining}`);
  assert.equal(info.period, 0);
  assert.equal(info.leeway, 250);
  assert.equal(info.group, 42);
  assert.equal(info.runs, 0);
  assert.equal(info.missed, 0);
  assert.equal(rt.query(t.id).state, 'pending');
  assert.equal(t.stop(), true);
  assert.equal(t.query(), null);
  assert.equal(rt.query(t.id), null);
  assert.equal(rt.query(0n), null);
  assert.equal(rt.query(0x123456789n), null);

  // Due: its deadline passed while the JavaScript thread was busy.
  let seen = null;
  const d = rt.start(0, (timer) => { seen = timer.query(); });
  busy(5);
  const due = d.query();
  assert.equal(due.state, 'due');
  assert.equal(due.remaining, 0);
  await until(() => seen !== null);
  // Running, from inside its own callback: a one-shot has no next deadline.
  assert.equal(seen.state, 'running');
  assert.equal(seen.runs, 1);
  assert.equal(seen.deadline, null);
  assert.equal(seen.remaining, null);
  await until(() => d.query() === null, 10000, 'the release');

  const p = rt.startPeriodic(5000, () => {});
  assert.equal(p.query().period, 5000);
  assert.equal(p.query().group, 0);
  p.stop();
});

test('resetAt() fires not before the new deadline', async () => {
  let at = null;
  const t = rt.start(10000, () => { at = process.hrtime.bigint(); });
  const deadline = now() + 40n * MS;
  assert.equal(rt.resetAt(t, deadline), true);
  const d = t.query().deadline;
  assert.ok(d >= deadline && d < deadline + 10n * MS, `${d} vs ${deadline}`);
  await until(() => at !== null);
  assert.ok(at >= deadline, `fired ${deadline - at} ns early`);
  assert.equal(t.resetAt(now() + MS), false, 'fired: not pending');
  assert.equal(rt.resetAt(12345n, now()), false, 'unknown id');

  // A past deadline fires at once; a periodic timer continues from the new deadline.
  const times = [];
  const p = rt.startPeriodic(10, () => { times.push(process.hrtime.bigint()); }, { delay: 10000 });
  const start = now() + 20n * MS;
  assert.equal(p.resetAt(start), true);
  await until(() => times.length >= 3);
  p.stop();
  assert.ok(times[0] >= start);
  assert.ok(times[2] >= start + 20n * MS);
  let fired = false;
  const q = rt.start(10000, () => { fired = true; });
  assert.equal(q.resetAt(1n), true);
  await until(() => fired);
});

test('stopGroup() stops the group only, also due timers', async () => {
  const fired = [];
  const rec = (tag) => () => { fired.push(tag); };
  const members = [1, 2, 3].map(() => rt.start(300, rec('g7'), { group: 7 }));
  members.push(rt.startPeriodic(10, rec('g7p'), { delay: 300, group: 7 }));
  // Due (0 ms, the thread stays busy) but not yet run: stopped all the same.
  members.push(rt.start(0, rec('g7due'), { group: 7n }));
  const other = rt.start(20, rec('g8'), { group: 8 });
  rt.start(20, rec('none'));
  busy(5);
  assert.equal(members[4].query().state, 'due');
  assert.equal(rt.stopGroup(7), 5);
  for (const t of members) {
    assert.equal(t.query(), null);
    assert.equal(t.active, false);
  }
  assert.notEqual(other.query(), null);
  await sleep(400);
  assert.deepEqual(fired.sort(), ['g8', 'none']);
  assert.equal(rt.stopGroup(7), 0);
  assert.equal(rt.stopGroup(12345n, { sync: true }), 0);
  assert.equal(rt.stopGroup((1n << 64n) - 1n), 0);
  assert.equal(rt.liveTimers, 0);
});

test('stopGroup() from inside a callback of the group', async () => {
  const victims = [1, 2].map(() => rt.start(10000, () => {}, { group: 11 }));
  let result = null;
  let activeInside = null;
  const self = rt.start(1, (t) => {
    result = rt.stopGroup(11, { sync: true }); // does not wait for itself
    activeInside = t.active;
  }, { group: 11 });
  await until(() => result !== null);
  assert.equal(result, 2, 'the running one-shot is on its last run: not counted');
  assert.equal(activeInside, false);
  for (const t of victims) assert.equal(t.query(), null);
  await until(() => self.query() === null);

  // A periodic timer stopping its own group: counted, and it runs no more.
  let runs = 0;
  let n = null;
  const p = rt.startPeriodic(2, () => { runs++; n = rt.stopGroup(12); }, { group: 12 });
  await until(() => n !== null);
  await sleep(20);
  assert.equal(n, 1);
  assert.equal(runs, 1);
  assert.equal(p.active, false);
  assert.equal(p.query(), null);
});

test('bad input: unknown policy, group 0, bad leeway and deadlines', async () => {
  const fn = () => {};
  const live = rt.liveTimers;
  assert.throws(() => rt.start(1, fn, { period: 1, policy: 'sometimes' }), einval(RangeError));
  assert.throws(() => rt.start(1, fn, { policy: 'SKIP' }), einval(RangeError));
  assert.throws(() => rt.startPeriodic(1, fn, { policy: 1 }), einval(TypeError));
  assert.throws(() => rt.start(1, fn, { leeway: -1 }), einval(RangeError));
  assert.throws(() => rt.start(1, fn, { leeway: '1' }), einval(TypeError));
  assert.throws(() => rt.start(1, fn, { leeway: MAX_DELAY_MS * 2 }), einval(RangeError));
  assert.throws(() => rt.start(1, fn, { group: -1 }), einval(RangeError));
  assert.throws(() => rt.start(1, fn, { group: 1.5 }), einval(TypeError));
  assert.throws(() => rt.start(1, fn, { group: 1n << 64n }), einval(RangeError));
  assert.equal(rt.liveTimers, live, 'nothing left behind');

  assert.throws(() => rt.stopGroup(0), einval(RangeError));
  assert.throws(() => rt.stopGroup(0n), einval(RangeError));
  assert.throws(() => rt.stopGroup('7'), einval(TypeError));
  assert.throws(() => rt.stopGroup(7, { sync: 1 }), einval(TypeError));
  assert.throws(() => rt.stopGroup(7, { wait: true }), einval(TypeError));

  const t = rt.start(10000, fn);
  assert.throws(() => t.resetAt(5), einval(TypeError));
  assert.throws(() => t.resetAt(-1n), einval(RangeError));
  assert.throws(() => t.resetAt(1n << 63n), einval(RangeError));
  assert.throws(() => t.resetAt(now() + (1n << 61n)), einval(RangeError));
  assert.equal(t.query().state, 'pending', 'untouched');
  assert.throws(() => rt.query(5.5), einval(TypeError)); // a Number id must be exact (ids.test.js)
  assert.throws(() => rt.query(-1n), einval(RangeError));
  const other = new Runtime({ workers: 1 });
  const foreign = other.start(10000, fn);
  assert.throws(() => rt.query(foreign), /another Runtime/);
  assert.throws(() => rt.resetAt(foreign, now()), /another Runtime/);
  await other.close();
  assert.equal(t.stop(), true);
});

test('after close(): query() is null, stopGroup() 0, resetAt() false', async () => {
  const r = new Runtime({ workers: 1 });
  const t = r.start(10000, () => {}, { group: 3, policy: 'burst', leeway: 1 });
  assert.ok(t instanceof Timer);
  await r.close();
  assert.equal(t.query(), null);
  assert.equal(r.stopGroup(3), 0);
  assert.equal(t.resetAt(now()), false);
  assert.throws(() => r.start(1, () => {}, { group: 3 }), (err) => err instanceof TickwheelError && err.code === 'TW_ESHUTDOWN');
});

test('with a 1.2 library (no timer model) the new calls say so', () => {
  const l = require('..')._internal.load();
  const t = rt.start(10000, () => {});
  const needs = (err) => err.code === 'ERR_TICKWHEEL_LIBRARY' && /needs libtickwheel 1\.3 or later/.test(err.message);
  l.hasModel = false;
  try {
    assert.throws(() => rt.query(t), needs);
    assert.throws(() => t.resetAt(now()), needs);
    assert.throws(() => rt.stopGroup(1), needs);
    assert.throws(() => rt.start(1, () => {}, { group: 1 }), needs);
    assert.throws(() => rt.start(1, () => {}, { period: 1, policy: 'delay' }), needs);
    // The defaults still work (a 1.2 library accepts the 1.3 spec while its new fields are 0).
    const plain = rt.start(10000, () => {}, { policy: 'skip', leeway: 0, group: 0 });
    assert.equal(plain.stop(), true);
  } finally {
    l.hasModel = true;
  }
  assert.equal(t.stop(), true);
});
