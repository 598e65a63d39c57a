// SPDX-License-Identifier: MIT OR Apache-2.0
// Type declarations of the tickwheel Node.js binding (index.js; index.d.mts
// re-exports them for `import`). They need no @types/node and no DOM lib:
// the few Node shapes used (AbortSignal, the EventEmitter methods,
// Symbol.asyncDispose) are declared here, structurally. TypeScript 4.7 or
// later, lib es2018 or later (AsyncGenerator).

/** The C API's error codes (tickwheel.h), by name. */
export declare const errorCodes: Readonly<{
  TW_OK: 0;
  TW_EINVAL: -22;
  TW_ENOMEM: -12;
  TW_ENOENT: -2;
  TW_EAGAIN: -11;
  TW_ESHUTDOWN: -108;
  TW_EDEADLK: -35;
  TW_EFORKED: -1001;
}>;

/** A TW_* code name, or 'TW_EUNKNOWN' for a code this binding does not know. */
export type TickwheelErrorCode = Exclude<keyof typeof errorCodes, 'TW_OK'> | 'TW_EUNKNOWN';

/** The longest delay or period accepted, in milliseconds (2^60 ns, about 36.5 years). */
export declare const MAX_DELAY_MS: number;

/** A failed tickwheel call. */
export declare class TickwheelError extends Error {
  readonly name: 'TickwheelError';
  /** The TW_* name of the C code, e.g. 'TW_ESHUTDOWN'. */
  readonly code: TickwheelErrorCode;
  /** The (negative) C code, e.g. -108. */
  readonly errno: number;
  /** What the library said about this failure (tw_last_error_message(),
   *  library 1.5: the argument and the limit), also appended to `message`;
   *  '' when it said nothing or is older than 1.5. */
  readonly detail: string;
}

/** The rejection of the promise API when its AbortSignal aborts (as Node's
 *  timers/promises): `cause` is the signal's reason. */
export declare class AbortError extends Error {
  readonly name: 'AbortError';
  readonly code: 'ABORT_ERR';
  constructor(message?: string, options?: { cause?: unknown });
}

/** The shared library could not be found or loaded, or has another major
 *  version than this package. The search: TICKWHEEL_LIB (only it, when
 *  set); else the package's prebuilds/<platform>-<arch>/libtickwheel.so.1,
 *  the dynamic loader (LD_LIBRARY_PATH, the ldconfig cache), pkg-config's
 *  libdir. The message lists each place tried and why it failed. */
export declare class LibraryLoadError extends Error {
  readonly name: 'LibraryLoadError';
  readonly code: 'ERR_TICKWHEEL_LIBRARY';
  /** Each candidate tried, with the reason it was refused. */
  readonly tried: string[];
}

/** Options of `new Runtime()`; each mirrors a field of tw_config. */
export interface RuntimeOptions {
  /** Timing wheels, one driver thread each; 0 (default) = one per CPU; at most 256. */
  shards?: number;
  /** Worker threads of the C runtime: 1 (default); 0 = one per CPU; at most
   *  4096. This binding runs no callback on them (every timer is delivered
   *  to the JavaScript thread through the runtime's delivery queue). */
  workers?: number;
  /** The tick in milliseconds, 0.001 .. 1000; 0 (default) = 1 ms. */
  resolution?: number;
  /** Live (started, not yet released) timers allowed at once; 0 (default) = unlimited. */
  maxTimers?: number | bigint;
  /** Pin shard i's driver thread to CPU i % online CPUs (TW_PIN_SHARDS). */
  pinShards?: boolean;
  /** A manual clock, for tests (TW_CONFIG_MANUAL_CLOCK, library 1.3): the
   *  runtime's clocks stand still (starting at the machine's values) until
   *  advance() moves them; callbacks run only inside advance(), synchronously.
   *  Such a runtime never keeps the process alive. Default false. */
  manualClock?: boolean;
}

/** The clock a timer's delay and deadlines are on (library 1.3):
 *  'monotonic' (default) -- CLOCK_MONOTONIC, stops while the machine is
 *  suspended; 'boottime' -- counts the time the machine was suspended (a 30 s
 *  keepalive fires 30 s of real time later, asleep or not); 'realtime' -- the
 *  wall clock: a timer follows changes of it (set forward past its deadline it
 *  fires then; set back, it waits for the wall clock to reach it again). */
export type ClockName = 'monotonic' | 'boottime' | 'realtime';

/** The clocks by name: clocks.REALTIME === 'realtime'. */
export declare const clocks: Readonly<{ MONOTONIC: 'monotonic'; BOOTTIME: 'boottime'; REALTIME: 'realtime' }>;

/** What a periodic timer does when a run overruns its period (library 1.3):
 *  'skip' (default) -- fixed rate, the grid deadlines that pass during a run
 *  are skipped and counted in TimerInfo.missed; 'delay' -- the next run is one
 *  period after the end of this one; 'burst' -- fixed rate, the overrun grid
 *  deadlines run after it, back to back, until caught up. */
export type PeriodPolicy = 'skip' | 'delay' | 'burst';

/** The period policies by name: periodPolicies.BURST === 'burst'. */
export declare const periodPolicies: Readonly<{ SKIP: 'skip'; DELAY: 'delay'; BURST: 'burst' }>;

/** The options of the timer model (library 1.3), shared by start() and startPeriodic(). */
export interface TimerModelOptions {
  /** A periodic timer's overrun policy (ignored for a one-shot); default 'skip'.
   *  Another string is a RangeError, a non-string a TypeError (code 'TW_EINVAL'). */
  policy?: PeriodPolicy;
  /** How late the callback may run, in ms (default 0): it runs in [deadline,
   *  deadline + leeway + the usual lateness], never before the deadline;
   *  timers whose windows overlap share a wake-up. */
  leeway?: number;
  /** The timer's group for stopGroup(): a safe integer or a BigInt up to
   *  2^64-1; 0 (default) = none. */
  group?: number | bigint;
  /** The clock the delay, resetAt() and query().deadline are on; default
   *  'monotonic'. Another string is a RangeError, a non-string a TypeError
   *  (code 'TW_EINVAL'). Library 1.3. */
  clock?: ClockName;
}

export interface StartOptions extends TimerModelOptions {
  /** If > 0: run every `period` ms after the first run (see `policy`). */
  period?: number;
  /** Shard hint: -1 (default) = the calling thread's shard; >= 0: that shard modulo the count. */
  shard?: number;
}

export interface StartPeriodicOptions extends TimerModelOptions {
  /** Delay of the first run in ms; default: one period. */
  delay?: number;
  /** Shard hint, as in StartOptions. */
  shard?: number;
}

export interface StopGroupOptions {
  /** Accepted for parity with the other bindings; changes nothing here:
   *  every callback runs on the JavaScript thread, so when stopGroup()
   *  returns none of the group's callbacks is running (except the caller's
   *  own) and the stopped timers are released. The event loop never blocks. */
  sync?: boolean;
}

/** What runtime.query() tells about a live timer (tw_timer_info): a snapshot
 *  taken at the call. */
export interface TimerInfo {
  /** 'pending' (waiting for its deadline), 'due' (deadline passed, callback
   *  waiting for the event loop) or 'running' (its callback runs now). */
  state: 'pending' | 'due' | 'running';
  /** The shard it lives on. */
  shard: number;
  /** The next deadline in ns on the timer's clock (`clock`: for 'monotonic',
   *  now()'s; on a manual runtime, rt.now(clock)'s), rounded up to the resolution,
   *  without the leeway; null when none is set (a one-shot whose callback is
   *  running, a 'delay' timer until its run ends). For a due or running
   *  fixed-rate timer: the grid deadline after the one being served (while a
   *  'burst' timer runs the deadlines it owes: the grid deadline after the
   *  owed ones, the same for each of those runs). */
  deadline: bigint | null;
  /** Milliseconds from the query to `deadline` (0 once it has passed), on the
   *  timer's clock of its runtime (virtual on a manual one); null without a deadline. */
  remaining: number | null;
  /** The period in ms (0 for a one-shot), rounded up to the resolution. */
  period: number;
  /** The leeway in ms, as started. */
  leeway: number;
  /** The group as started (0 = none): a Number, or a BigInt above Number.MAX_SAFE_INTEGER. */
  group: number | bigint;
  /** Runs started so far, the one in progress included. */
  runs: number;
  /** Grid deadlines skipped so far ('skip' policy; 0 for the others). */
  missed: number;
  /** The clock it was started on. */
  clock: ClockName;
}

/** A snapshot of the counters of a runtime's delivery queue (tw_queue_stats). */
export interface QueueStats {
  /** Callbacks due and not yet run now. */
  due: number;
  /** Due timers handed to the queue (a stop or reset may take one back before it runs). */
  delivered: number;
  /** Callbacks run on the JavaScript thread. */
  ran: number;
  /** From the deadline to the queue's fd polling readable (the C runtime's part), ns. */
  signalP50Ns: number;
  signalP99Ns: number;
  signalP999Ns: number;
  signalMaxNs: number;
  signalSamples: number;
  /** From the deadline to the callback's start on the JavaScript thread, ns. */
  runP50Ns: number;
  runP99Ns: number;
  runP999Ns: number;
  runMaxNs: number;
  runSamples: number;
}

/** A snapshot of a runtime's counters (tw_stats), totals since creation. */
export interface RuntimeStats {
  shards: number;
  /** Worker threads of the C runtime (no callback of this binding runs on them). */
  workers: number;
  shutDown: boolean;
  resolutionNs: number;
  /** Timers filed in the shards' wheels. */
  pending: number;
  /** Requests queued to the shards (approximate). */
  inbox: number;
  /** Started and not yet released. */
  live: number;
  started: number;
  /** Callback runs. */
  fired: number;
  /** Stop calls that cancelled a timer. */
  stopped: number;
  /** Reset calls that re-armed a timer. */
  reset: number;
  /** Exceptions thrown by callbacks: a JavaScript callback's (counted by the
   *  binding, library 1.6 or later; with an older library they are not
   *  counted) and C++ ones the runtime caught. The metric
   *  tickwheel_callback_exceptions_total. */
  callbackExceptions: number;
  cancelledAtShutdown: number;
  /** Callback start minus deadline (C side), log-linear histogram, about 3% error. */
  latenessP50Ns: number;
  latenessP99Ns: number;
  latenessP999Ns: number;
  latenessMaxNs: number;
  latenessSamples: number;
  /**
   * Since 1.7: where the lateness comes from. Driver stage: deadline to the
   * shard's hand-over (a starved shard thread). Wait stage: hand-over to the
   * callback's start -- with this binding, the wait for the JavaScript
   * thread to run its queue (a busy event loop shows here). driver + wait =
   * lateness, run by run.
   */
  driverLatenessP50Ns: number;
  driverLatenessP99Ns: number;
  driverLatenessP999Ns: number;
  driverLatenessMaxNs: number;
  waitLatenessP50Ns: number;
  waitLatenessP99Ns: number;
  waitLatenessP999Ns: number;
  waitLatenessMaxNs: number;
  /** Since 1.7: the callbacks' duration (on the JavaScript thread). */
  runDurationP50Ns: number;
  runDurationP99Ns: number;
  runDurationP999Ns: number;
  runDurationMaxNs: number;
  runDurationSamples: number;
  /** Since 1.7: callbacks running now on the C runtime's workers (none of this binding's). */
  workersBusy: number;
  /** Since 1.7: due timers handed to the workers and not taken yet. */
  waitingForWorker: number;
  /** Since 1.7: callbacks running now on any thread. */
  callbacksRunning: number;
  /** Since 1.7: how long the longest-running callback now has run (0: none). */
  oldestRunAgeNs: number;
  /** Since 1.7: timer records resident (64 bytes each). */
  slots: number;
  /** Since 1.7: bytes of timer records resident (an upper bound). */
  residentBytes: number;
  /** The runtime's delivery queue, through which every callback runs. */
  queue: QueueStats;
}

/** The callback of a timer: called on the JavaScript thread with its Timer. */
export type TimerCallback = (this: Timer, timer: Timer) => void;

/** A timer id where one is accepted: a Timer's `id` (a BigInt), or a Number
 *  that is a safe integer (it then equals the 64-bit id exactly); another
 *  Number is a TypeError (code 'TW_EINVAL'). */
export type TimerId = bigint | number;

/** What the promise API uses of an AbortSignal (Node's, or the DOM's, is
 *  one): declared here so that these types need neither @types/node nor
 *  the DOM lib. */
export interface AbortSignalLike {
  readonly aborted: boolean;
  readonly reason?: unknown;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/** Options of the promise API. */
export interface TimerPromiseOptions {
  /** Aborting it rejects the promise (or the pending iteration) with an
   *  AbortError and stops the timer; an already-aborted signal rejects at
   *  once and starts nothing. The listener is removed when the promise settles. */
  signal?: AbortSignalLike;
  /** false: the pending timer does not keep the process alive (as
   *  Timer.unref(); the promise then stays pending if the process ends
   *  first). Default true. */
  ref?: boolean;
}

/** The promise API (rt.promises; require('tickwheel/promises') on a
 *  runtime of its own), as node:timers/promises. Bad arguments reject
 *  (TypeError/RangeError, code 'TW_EINVAL'); close() of the runtime rejects
 *  a pending one with TickwheelError 'TW_ESHUTDOWN'. */
export interface TimerPromises {
  /** Resolves with `value` once `ms` ms have passed (never earlier, rounded
   *  up to the resolution). On a manual runtime: inside the advance() that
   *  reaches it. */
  setTimeout<T = void>(ms: number, value?: T, options?: TimerPromiseOptions): Promise<T>;
  /** An async iterator yielding `value` every `ms` ms (> 0); runs the loop
   *  has not taken yet are counted and yielded one after the other. The
   *  timer starts at the first next() and stops on break/return, on abort
   *  (the pending next() rejects with an AbortError) or close(). */
  setInterval<T = void>(ms: number, value?: T, options?: TimerPromiseOptions): AsyncGenerator<T, void, unknown>;
  /** The same function as setTimeout, by a name that does not hide the
   *  global setTimeout: `import { sleep } from 'tickwheel/promises'`. */
  sleep<T = void>(ms: number, value?: T, options?: TimerPromiseOptions): Promise<T>;
}

/** A started timer. */
export declare class Timer {
  private constructor();
  /** The C timer id (never 0n); reset() keeps it. */
  readonly id: bigint;
  /** True for a periodic timer. */
  readonly periodic: boolean;
  /** True until it ran its last run, was stopped, or its runtime was closed. */
  readonly active: boolean;
  /** The clock its delay and deadlines are on. */
  readonly clock: ClockName;
  /** Same as runtime.stop(timer). */
  stop(): boolean;
  /** Same as runtime.reset(timer, ms). */
  reset(ms: number): boolean;
  /** Same as runtime.resetAt(timer, deadlineNs). */
  resetAt(deadlineNs: bigint): boolean;
  /** Same as runtime.query(timer). */
  query(): TimerInfo | null;
  /** This timer keeps the process alive while it is live (the default), as
   *  Node's Timeout.ref(). Returns this. */
  ref(): this;
  /** This timer does not keep the process alive: if nothing else does, the
   *  process exits and the timer is cancelled (its callback never runs).
   *  It still fires while something else keeps the process alive; survives
   *  reset(). Returns this. */
  unref(): this;
  /** False after unref() (until ref()). Runtime.unref() overrides it. */
  hasRef(): boolean;
}

/**
 * A tickwheel runtime: shards (timing wheels with a driver thread each) and
 * a delivery queue watched by the event loop of the JavaScript thread that
 * created the Runtime: every callback runs on that thread, in its own
 * setImmediate() turn (process.nextTick() callbacks and promise reactions
 * queued by one callback run before the next one), never on another thread;
 * no thread ever waits for JavaScript.
 *
 * With { manualClock: true } (for tests) nothing fires by itself: the
 * clocks stand still until advance(ms), which runs the callbacks that fall
 * due synchronously, on this thread, before it returns (the C library runs
 * them inside tw_runtime_advance(); the delivery queue is not used).
 *
 * Events: 'error' (error: unknown, timer: Timer) -- a callback threw. Without
 * a listener the exception is rethrown asynchronously (an uncaught
 * exception), like an exception in a setTimeout callback -- or, inside
 * advance(), thrown by advance() once its window is done. Either way it is
 * counted in stats().callbackExceptions (library 1.6).
 *
 * A Runtime is an EventEmitter (node:events); the methods below are those
 * of EventEmitter that these types declare.
 *
 * On a worker_threads Worker: the callbacks run on the Worker's thread, and
 * the runtime is closed when the Worker ends, worker.terminate() included.
 */
export declare class Runtime {
  /** @throws {RangeError|TypeError} bad options (code 'TW_EINVAL');
   *  {TickwheelError} the C runtime could not be created;
   *  {LibraryLoadError} no usable libtickwheel.so.1. */
  constructor(options?: RuntimeOptions);

  /** True once close() was called (or the process is exiting). */
  readonly closed: boolean;
  /** Timers started and not yet released. */
  readonly liveTimers: number;

  /** Starts a timer: fn runs once, ms milliseconds from now (rounded up to
   *  the resolution; never earlier), then every options.period ms if given.
   *  @throws {TypeError|RangeError} bad arguments (code 'TW_EINVAL');
   *  {TickwheelError} 'TW_ESHUTDOWN' after close(), 'TW_EAGAIN' at maxTimers,
   *  'TW_ENOMEM'. */
  start(ms: number, fn: TimerCallback, options?: StartOptions): Timer;
  /** Starts a periodic timer: fn runs every `period` ms (> 0), the first
   *  time after options.delay ms (default: one period). Throws as start(). */
  startPeriodic(period: number, fn: TimerCallback, options?: StartPeriodicOptions): Timer;
  /** Cancels a timer; never blocks. True if this call prevented a run (the
   *  one run of a one-shot timer, also one already due whose callback waits
   *  for the event loop, or every further run of a periodic one); false if
   *  it already ran (or is running), was stopped, is unknown, or the runtime
   *  is closed. Either way no run starts after it returns. */
  stop(timer: Timer | TimerId): boolean;
  /** Re-arms a timer to fire ms from now (a periodic one: its next run, then
   *  every period). True if re-armed; false if it is not pending (ran,
   *  stopped, unknown, runtime closed). A due timer whose callback has not
   *  run yet is pending, and so is a one-shot timer inside its own callback
   *  (re-armed with the same id). Never blocks. */
  reset(timer: Timer | TimerId, ms: number): boolean;
  /** Batches (library 1.4; ERR_TICKWHEEL_LIBRARY with an older one): one
   *  call into the library per array, each element as the single call.
   *  startMany: one timer per delay (ms), `fn` every timer's function or one
   *  per delay, the options for all; null where that timer could not start
   *  (maxTimers, out of memory). Delays count from one clock reading taken
   *  as the call begins. Throws as start() for bad arguments. */
  startMany(delays: number[], fn: TimerCallback | TimerCallback[], options?: StartOptions): Array<Timer | null>;
  /** stop() of every timer, in order: true where that stop prevented a run. */
  stopMany(timers: Array<Timer | TimerId>): boolean[];
  /** reset() of every timer to ms from one clock reading taken as the call
   *  begins: true where re-armed. */
  resetMany(timers: Array<Timer | TimerId>, ms: number): boolean[];
  /** Re-arms a timer to fire at the absolute deadline `deadlineNs`: BigInt
   *  nanoseconds on the timer's clock, rt.now(timer.clock) (for 'monotonic',
   *  now()'s; e.g. `rt.now() + 50_000_000n`); a past
   *  one fires as soon as possible, never before it. A periodic timer then
   *  runs every period from there. True if re-armed; false if it is not
   *  pending, as reset(). Never blocks.
   *  @throws {TypeError|RangeError} not a BigInt; negative, above 2^63-1 or
   *  more than MAX_DELAY_MS ahead (code 'TW_EINVAL'). */
  resetAt(timer: Timer | TimerId, deadlineNs: bigint): boolean;
  /** A live timer's state, next deadline, period, leeway, group and run
   *  counters; null once it is released (ran its last run, stopped,
   *  cancelled), for an unknown id, or after close(). From inside its own
   *  callback a timer is 'running'. Never blocks. */
  query(timer: Timer | TimerId): TimerInfo | null;
  /** Stops every live timer started with `group` (not 0) and returns how
   *  many it stopped (a one-shot running its callback -- the caller -- is not
   *  counted; a periodic one is). Due timers waiting for the event loop are
   *  stopped too: none of the group's callbacks starts after it returns.
   *  0 after close(). Never blocks (see StopGroupOptions.sync).
   *  @throws {TypeError|RangeError} group not an integer, 0 or above 2^64-1 (code 'TW_EINVAL'). */
  stopGroup(group: number | bigint, options?: StopGroupOptions): number;
  /** The runtime's counters (and its queue's, in `queue`); after close() has
   *  finished, the final ones. */
  stats(): RuntimeStats;

  /** The promise API on this runtime (setTimeout, setInterval with AbortSignal). */
  readonly promises: TimerPromises;

  /** True for a runtime created with { manualClock: true }. */
  readonly manualClock: boolean;
  /** The runtime's clock `clock` (default 'monotonic') in ns: the machine's
   *  for a real runtime, the virtual one for a manual runtime. Compute
   *  deadlines with it: `t.resetAt(rt.now(t.clock) + 30_000_000_000n)` is 30 s
   *  from now on either kind (the module-level now() is the machine's clock:
   *  on a manual runtime it is not the runtime's time).
   *  @throws {TickwheelError} 'TW_ESHUTDOWN' after close();
   *  {RangeError|TypeError} unknown clock (code 'TW_EINVAL'). */
  now(clock?: ClockName): bigint;
  /** A manual runtime: moves its three clocks forward by exactly `ms`
   *  milliseconds and runs, synchronously before it returns, every callback
   *  that falls due, in deadline order (ties in start order), the clocks
   *  stepped to each deadline (rt.now() inside a callback reads its
   *  deadline). Timers that callbacks start or re-arm due inside the window
   *  run in this same call. A periodic timer crossed k times: 'skip' runs
   *  once with missed += k - 1, 'burst' k times, 'delay' as its runs fall.
   *  advance(0) runs what is due now. Returns the number of callbacks run.
   *  Without an 'error' listener, a callback's exception is thrown by
   *  advance() once the window is done (several: an AggregateError).
   *  @throws {TickwheelError} 'TW_EINVAL' (no manual clock), 'TW_EDEADLK'
   *  (from inside one of this runtime's callbacks), 'TW_ESHUTDOWN' (closed);
   *  {RangeError|TypeError} bad ms (code 'TW_EINVAL'). */
  advance(ms: number): number;

  /** Live timers keep the process alive (the default), each unless its own
   *  Timer.unref() was called. */
  ref(): this;
  /** No timer of this runtime keeps the process alive, whatever its own
   *  ref; at exit they are cancelled. */
  unref(): this;
  /** True unless unref() was called. */
  hasRef(): boolean;

  /** Shuts the runtime down and frees it. Pending timers, also due ones, are
   *  cancelled and released (their callbacks never run) and no callback
   *  starts after this call. The C runtime is freed before close() returns
   *  or, called from one of this runtime's callbacks, as soon as that
   *  callback has returned; the Promise then resolves (rejects if the C
   *  calls failed). Idempotent (same Promise). */
  close(): Promise<void>;
  on(event: 'error', listener: (error: unknown, timer: Timer) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
  once(event: 'error', listener: (error: unknown, timer: Timer) => void): this;
  once(event: string | symbol, listener: (...args: any[]) => void): this;
  addListener(event: 'error', listener: (error: unknown, timer: Timer) => void): this;
  addListener(event: string | symbol, listener: (...args: any[]) => void): this;
  prependListener(event: 'error', listener: (error: unknown, timer: Timer) => void): this;
  prependListener(event: string | symbol, listener: (...args: any[]) => void): this;
  off(event: string | symbol, listener: (...args: any[]) => void): this;
  removeListener(event: string | symbol, listener: (...args: any[]) => void): this;
  removeAllListeners(event?: string | symbol): this;
  emit(event: string | symbol, ...args: any[]): boolean;
  listenerCount(event: string | symbol): number;
  prependOnceListener(event: 'error', listener: (error: unknown, timer: Timer) => void): this;
  prependOnceListener(event: string | symbol, listener: (...args: any[]) => void): this;
  listeners(event: string | symbol): Function[];
  rawListeners(event: string | symbol): Function[];
  eventNames(): Array<string | symbol>;
  setMaxListeners(n: number): this;
  getMaxListeners(): number;
}

/** `[Symbol.asyncDispose]()`, same as close() (for `await using rt = new
 *  Runtime()`), where the TypeScript lib in use declares Symbol.asyncDispose
 *  (lib esnext.disposable or es2024+, or @types/node); without it, nothing:
 *  these types then compile all the same. */
type AsyncDisposableRuntime = SymbolConstructor extends { readonly asyncDispose: infer S extends symbol }
  ? { [K in S]: () => Promise<void> }
  : {};

export interface Runtime extends AsyncDisposableRuntime {}

/** The promise API on a runtime the package makes on first use (one shard;
 *  made anew after it was closed). Also require('tickwheel/promises'). */
export declare const promises: TimerPromises;

/** The loaded library's version, "major.minor.patch" (loads it if needed). */
export declare function version(): string;
/** The path (or loader name) the library was loaded from. */
export declare function libraryPath(): string;
/** The MACHINE's clock `clock` in nanoseconds: 'monotonic' (default) is
 *  CLOCK_MONOTONIC, the clock of delays and of process.hrtime.bigint() on
 *  Linux; 'boottime'; 'realtime' (the wall clock). Not a runtime's clock:
 *  a manual runtime's virtual clocks are read with rt.now(clock), and
 *  deadlines for resetAt() are best computed from rt.now(timer.clock) on
 *  any runtime.
 *  @throws {RangeError|TypeError} unknown clock (code 'TW_EINVAL'). */
export declare function now(clock?: ClockName): bigint;
