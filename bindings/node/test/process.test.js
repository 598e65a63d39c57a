'use strict';
// The process exits when it should and cleanly (child processes).
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const CHILD = path.join(__dirname, '..', 'fixtures', 'child.js');

function run(name, env = {}) {
  const t0 = Date.now();
  const r = spawnSync(process.execPath, [CHILD, name], {
    encoding: 'utf8', timeout: 30000, env: { ...process.env, ...env },
  });
  r.ms = Date.now() - t0;
  assert.equal(r.error, undefined, `${name}: ${r.error}`);
  assert.equal(r.signal, null, `${name} was killed by ${r.signal} (stderr: ${r.stderr})`);
  return r;
}

test('a pending timer keeps the process alive until it fired', () => {
  const r = run('ref');
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, 'fired true\n');
});

// Repeated: the exit races with runs queued by the worker threads.
test('an unref()ed runtime lets the process exit; its timers are cancelled', () => {
  for (let i = 0; i < 3; i++) {
    const r = run('unref');
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, 'hasRef false\n');
    assert.ok(r.ms < 8000, `took ${r.ms} ms`);
  }
});

test('an open runtime without timers does not keep the process alive', () => {
  const r = run('open');
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, 'open true\n');
});

test('close() with runs queued, then the end of the script: a clean exit', () => {
  for (let i = 0; i < 3; i++) {
    const r = run('closed');
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, 'closed\n');
  }
});

test('process.exit() from a callback exits with its code', () => {
  for (let i = 0; i < 3; i++) {
    const r = run('exitInCallback');
    assert.equal(r.status, 7, r.stderr);
  }
});

test('without an error listener, a callback exception is an uncaught exception', () => {
  const r = run('uncaught');
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), { errors: true, runs: true });
  const f = run('fatal');
  assert.equal(f.status, 1);
  assert.match(f.stderr, /fatal boom/);
});

test('a missing TICKWHEEL_LIB is a clear LibraryLoadError', () => {
  const r = run('missingLibrary', { TICKWHEEL_LIB: '/nonexistent/libtickwheel.so.1' });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.equal(out.isLoadError, true);
  assert.equal(out.code, 'ERR_TICKWHEEL_LIBRARY');
  assert.equal(out.tried.length, 1, 'nothing else is tried when TICKWHEEL_LIB is set');
  assert.match(out.message, /\/nonexistent\/libtickwheel\.so\.1/);
});
