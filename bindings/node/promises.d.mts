// SPDX-License-Identifier: MIT OR Apache-2.0
// Types of promises.mjs (import ... from 'tickwheel/promises'): those of
// promises.d.ts; the default export is the CommonJS module object.
import promises from './promises.js';

export * from './promises.js';
export default promises;
