// SPDX-License-Identifier: MIT OR Apache-2.0
// require('tickwheel/promises') / import { setTimeout, sleep } from 'tickwheel/promises':
// the promise API of index.d.ts (TimerPromises) on a runtime the package
// makes on first use (one shard). For another runtime, use rt.promises.
import type { TimerPromiseOptions } from './index.js';

export type { TimerPromiseOptions };
/** Resolves with `value` once `ms` milliseconds have passed (never earlier). See TimerPromises.setTimeout. */
export declare function setTimeout<T = void>(ms: number, value?: T, options?: TimerPromiseOptions): Promise<T>;
/** The same function as setTimeout, by a name that does not hide the global setTimeout. */
export declare function sleep<T = void>(ms: number, value?: T, options?: TimerPromiseOptions): Promise<T>;
/** Yields `value` every `ms` milliseconds. See TimerPromises.setInterval. */
export declare function setInterval<T = void>(ms: number, value?: T, options?: TimerPromiseOptions): AsyncGenerator<T, void, unknown>;
