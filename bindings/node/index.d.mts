// SPDX-License-Identifier: MIT OR Apache-2.0
// Types of index.mjs (import ... from 'tickwheel'): those of index.d.ts; the
// default export is the CommonJS module object.
import tickwheel from './index.js';

export * from './index.js';
export default tickwheel;
