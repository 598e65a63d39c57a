// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// Helpers the test files share (node --test runs this file too: it has no
// tests of its own).
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Resolves once cond() is true; throws after limitMs.
async function until(cond, limitMs = 10000, what = 'condition') {
  const end = Date.now() + limitMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
}

// Runs `node script ...args` in a child process (env: its environment, by
// default this process's; killed with SIGKILL after killAfterMs); resolves
// with { status, signal, stdout, stderr, ms } once it ended, whatever its
// status (rejects only when it cannot be spawned).
function runChild(script, args, { env, killAfterMs }) {
  const { spawn } = require('node:child_process');
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d) => { stdout += d; });
    child.stderr.setEncoding('utf8').on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    child.on('error', reject);
    child.on('close', (status, signal) => {
      clearTimeout(timer);
      resolve({ status, signal, stdout, stderr, ms: Date.now() - t0 });
    });
  });
}

module.exports = { sleep, until, runChild };
