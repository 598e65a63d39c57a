// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// Runtimes on worker_threads Workers are closed when the Worker ends --
// worker.terminate() included -- and the process survives (child processes:
// a crash must fail the test, not end the test runner).
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { runChild } = require('./support');

const SCRIPT = path.join(__dirname, '..', 'fixtures', 'workers.js');

// Runs fixtures/workers.js NAME; resolves with its exit status, signal and
// the JSON it printed.
async function run(name) {
  const r = await runChild(SCRIPT, [name], { killAfterMs: 60000 });
  let out = null;
  try { out = JSON.parse(r.stdout); } catch { /* reported below */ }
  return { status: r.status, signal: r.signal, out, stdout: r.stdout, stderr: r.stderr };
}

function ok(r) {
  assert.equal(r.signal, null, `the process was killed by ${r.signal} (before the fix: SIGSEGV or SIGABRT): ${r.stderr}`);
  assert.equal(r.status, 0, r.stderr);
  assert.notEqual(r.out, null, `no JSON line: ${r.stdout} ${r.stderr}`);
  assert.equal(r.out.threads, 0, "the runtimes' threads (tw-shard-N, tw-worker) are gone: every runtime was closed");
  return r.out;
}

test('terminate() of Workers whose runtimes have live timers (pending, due, running): the process goes on', async () => {
  const out = ok(await run('terminate'));
  assert.equal(out.readies, 5, 'callbacks ran on each Worker before its terminate()');
  assert.deepEqual(out.codes, [1, 1, 1, 1, 1], 'terminate() ends a Worker with exit code 1');
});

test('many Workers in sequence, terminated at any moment: no crash, no thread and no fd left', async () => {
  const out = ok(await run('many'));
  assert.equal(out.workers, 24);
  assert.ok(out.codes.every((c) => c === 0 || c === 1), `exit codes ${out.codes}`);
  // A terminate() that lands inside the net.Socket constructor of a
  // Runtime leaves that socket's pipe fd open (see queueSocket); of the 12
  // blind terminations few can (measured: 0-1 fds in all, Node's own
  // included). A leak per Worker would be 22 (or 10).
  assert.ok(out.fds <= 6, `${out.fds} more fds open than after the first 2 of the 24 Workers`);
});

test('runtimes closed before the terminate() are not freed again (their hooks were removed)', async () => {
  const out = ok(await run('closed'));
  assert.equal(out.code, 1);
  assert.deepEqual(out.messages, [{ closed: true, ready: true }]);
});

test('a Worker whose event loop ends by itself closes its runtime', async () => {
  const out = ok(await run('natural'));
  assert.equal(out.code, 0);
  assert.deepEqual(out.messages, [{ fired: 10 }]);
});

test('process.exit() inside a Worker callback: the Worker exits with its code, the runtime is freed', async () => {
  const out = ok(await run('exit'));
  assert.equal(out.code, 3);
});

test("an unref'd runtime does not keep a Worker alive", async () => {
  const out = ok(await run('unref'));
  assert.equal(out.code, 0);
  assert.equal(out.quick, true);
});
