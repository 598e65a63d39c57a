// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// Timers have no C release hook: the binding decides from each call's
// return code when the library released a timer. These tests check that
// decision against the library's own account after every step of seeded
// random sequences -- from outside callbacks and from inside them (stop,
// reset, stopGroup of the timer running, close) -- on a manual clock
// (deterministic) and through the delivery queue:
//   rt.liveTimers === rt.stats().live, and a timer the binding holds live
//   is one query() finds (the library's record of it), one it let go is not.
const test = require('node:test');
const assert = require('node:assert/strict');
const { Runtime } = require('..');
const { liveTimers } = require('..')._internal;
const { until } = require('./support');

// A small deterministic generator (mulberry32).
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// The binding's view and the library's agree.
function agree(rt, all, where) {
  const st = rt.stats();
  assert.equal(rt.liveTimers, st.live, `${where}: liveTimers ${rt.liveTimers}, the library's live ${st.live}`);
  const mine = liveTimers().filter((t) => t._rt === rt);
  assert.equal(mine.length, rt.liveTimers, `${where}: the slot table`);
  for (const t of all) {
    const info = rt.query(t);
    if (t._live) assert.notEqual(info, null, `${where}: timer ${t.id} is live here, unknown to the library`);
    else assert.equal(info, null, `${where}: timer ${t.id} was let go here, live in the library`);
  }
}

// One random action on a random timer of `all` (or a new one).
function act(rt, all, r, inCallback, groups) {
  const pick = () => all[Math.floor(r() * all.length)];
  const x = r();
  if (all.length === 0 || x < 0.3) {
    const periodic = r() < 0.3;
    const group = r() < 0.4 ? groups[Math.floor(r() * groups.length)] : 0;
    const delay = Math.floor(r() * 50);
    const fn = (timer) => callback(rt, all, r, groups, timer);
    const opts = group ? { group } : undefined;
    all.push(periodic ? rt.startPeriodic(1 + Math.floor(r() * 20), fn, opts) : rt.start(delay, fn, opts));
  } else if (x < 0.5) {
    pick().stop();
  } else if (x < 0.65) {
    pick().reset(Math.floor(r() * 40));
  } else if (x < 0.72) {
    const t = pick();
    t.resetAt(rt.now(t.clock) + BigInt(Math.floor(r() * 30e6)));
  } else if (x < 0.8) {
    rt.stopGroup(groups[Math.floor(r() * groups.length)]);
  } else if (x < 0.86) {
    rt.stopMany([pick(), pick(), pick()]);
  } else if (x < 0.9) {
    rt.resetMany([pick(), pick()], Math.floor(r() * 40));
  } else if (x < 0.95) {
    for (const t of rt.startMany([1, 5, 9].map((d) => d + Math.floor(r() * 20)),
      (timer) => callback(rt, all, r, groups, timer))) {
      if (t !== null) all.push(t);
    }
  } else if (!inCallback && rt.manualClock) {
    rt.advance(Math.floor(r() * 25));
  }
}

let ran = 0; // callbacks run, all tests

// Inside a callback: sometimes acts on its own timer (stop, reset, stop of
// its group, reset then stop), sometimes on others.
function callback(rt, all, r, groups, timer) {
  if (rt._finished) return;
  ran++;
  const x = r();
  if (x < 0.15) timer.stop();
  else if (x < 0.3) timer.reset(Math.floor(r() * 20));
  else if (x < 0.38) {
    timer.reset(Math.floor(r() * 20));
    timer.stop();
  } else if (x < 0.48) {
    timer.reset(5);
    rt.stopGroup(groups[Math.floor(r() * groups.length)]);
  } else if (x < 0.7) act(rt, all, r, true, groups);
}

for (const seed of [1, 2, 3, 4, 5, 6]) {
  test(`manual clock, seed ${seed}: the binding's releases match the library's`, async () => {
    const rt = new Runtime({ manualClock: true });
    rt.on('error', (err) => { throw err; });
    ran = 0;
    const r = rng(seed);
    const all = [];
    const groups = [1, 2, 3];
    for (let step = 0; step < 400; step++) {
      act(rt, all, r, false, groups);
      if (r() < 0.3) rt.advance(Math.floor(r() * 15));
      if (step % 10 === 0) agree(rt, all, `seed ${seed} step ${step}`);
      if (all.length > 300) all.splice(0, 100);
    }
    agree(rt, all, `seed ${seed} end`);
    assert.ok(ran > 50, `only ${ran} callbacks ran`);
    if (process.env.TW_RELEASE_TRACE) console.log(`seed ${seed}: ${ran} callbacks, ${rt.stats().started} started`);
    // close() from inside a callback lets every timer go.
    rt.start(0, () => { rt._finished = true; rt.close(); });
    rt.advance(1);
    await rt.close();
    assert.equal(rt.liveTimers, 0);
    assert.equal(liveTimers().filter((t) => t._rt === rt).length, 0);
  });
}

test('through the delivery queue: the releases match the library\'s', async () => {
  const rt = new Runtime({ shards: 2, workers: 1 });
  const r = rng(99);
  const all = [];
  const groups = [7, 8];
  for (let step = 0; step < 300; step++) {
    act(rt, all, r, false, groups);
    if (step % 20 === 0) {
      await new Promise((resolve) => setTimeout(resolve, 3)); // let callbacks run
      agree(rt, all, `queue step ${step}`);
    }
  }
  // Let the one-shots run out, stop the periodic ones.
  for (const t of all) if (t.periodic) t.stop();
  await until(() => rt.liveTimers === rt.stats().live && all.every((t) => t.periodic || !t.active), 10000,
    'the one-shots');
  agree(rt, all, 'queue end');
  rt._finished = true;
  await rt.close();
  assert.equal(rt.liveTimers, 0);
});
