// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// require('tickwheel/promises'): setTimeout and setInterval like
// node:timers/promises (and sleep, the same function as setTimeout), on a
// runtime the package makes on first use (one shard). For another runtime
// (a manual clock in tests, your own options), use rt.promises. See
// README.md, "The promise API". ES modules: promises.mjs.
module.exports = require('./index.js').promises;
