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

module.exports = { sleep, until };
