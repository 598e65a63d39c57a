// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// The process exits when it should and cleanly (child processes).
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { runChild } = require('./support');

const CHILD = path.join(__dirname, '..', 'fixtures', 'child.js');

// Runs fixtures/child.js NAME; resolves with { status, signal, stdout, stderr, ms }.
async function run(name, env = {}) {
  const r = await runChild(CHILD, [name], { env: { ...process.env, ...env }, killAfterMs: 30000 });
  if (r.signal !== null) throw new Error(`${name} was killed by ${r.signal} (stderr: ${r.stderr})`);
  return r;
}

// The child exited with status 0, having printed `stdout`.
function assertExitedWith(r, stdout, message) {
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, stdout, message);
}

// Runs the scenario n times at once (an exit that races with runs queued by
// the worker threads goes wrong only some of the time).
const runs = (name, n) => Promise.all(Array.from({ length: n }, () => run(name)));

// Scenarios that end by themselves with status 0, printing what they say:
// [test, scenario, how many at once, stdout].
const cleanExits = [
  ['a pending timer keeps the process alive until it fired', 'ref', 1, 'fired true\n'],
  ['an open runtime without timers does not keep the process alive', 'open', 1, 'open true\n'],
  ['an unref()ed runtime whose callbacks are due all the time lets the process exit', 'unrefBusy', 2, 'ran true\n'],
  ['close() with runs queued, then the end of the script: a clean exit', 'closed', 3, 'closed\n'],
  // Per-timer ref()/unref(), as Node's Timeout: a pending unref'd timer (60 s)
  // must not keep the process alive (else run() kills it at 30 s: a failure).
  ["a timer's unref() lets the process exit while it is pending; it never runs", 'timerUnref', 2, 'timer false runtime true active true\n'],
  ["a ref'd timer beside an unref'd one keeps the process alive until it fired", 'timerRefBeside', 1, 'ref fired true\n'],
  ['unref() then ref() keeps the process alive again; the re-armed timer fires', 'timerReref', 1, 'hasRef true\nfired\n'],
  ["an unref'd timer fires while something else keeps the process alive; reset() keeps it unref'd", 'timerUnrefFires', 1, 'hasRef false\nunref fired\n'],
];
for (const [title, scenario, n, stdout] of cleanExits) {
  test(title, async () => {
    for (const r of await runs(scenario, n)) assertExitedWith(r, stdout);
  });
}

test('an unref()ed runtime lets the process exit; its timers are cancelled', async () => {
  for (const r of await runs('unref', 6)) {
    assertExitedWith(r, 'hasRef false\n');
    assert.ok(r.ms < 15000, `took ${r.ms} ms`);
  }
});

test('process.exit() from a callback exits with its code', async () => {
  for (const r of await runs('exitInCallback', 3)) {
    assert.equal(r.status, 7, r.stderr);
  }
});

test('without an error listener, a callback exception is an uncaught exception', async () => {
  const [r, f] = await Promise.all([run('uncaught'), run('fatal')]);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), { errors: true, runs: true });
  assert.equal(f.status, 1);
  assert.match(f.stderr, /fatal boom/);
});

test("the promise API: { ref: false } lets the process exit with the promise pending; the default keeps it alive", async () => {
  const [u, k] = await Promise.all([run('promiseUnref'), run('promiseRef')]);
  assertExitedWith(u, '', 'neither settled nor an unhandled rejection');
  assertExitedWith(k, 'resolved x true\n');
});

test('a missing TICKWHEEL_LIB is a clear LibraryLoadError', async () => {
  const r = await run('missingLibrary', { TICKWHEEL_LIB: '/nonexistent/libtickwheel.so.1' });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.equal(out.isLoadError, true);
  assert.equal(out.code, 'ERR_TICKWHEEL_LIBRARY');
  assert.equal(out.tried.length, 1, 'nothing else is tried when TICKWHEEL_LIB is set');
  assert.match(out.message, /\/nonexistent\/libtickwheel\.so\.1/);
});
