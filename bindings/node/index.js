// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
/**
 * tickwheel -- Node.js binding of the tickwheel timer runtime.
 *
 *     const { Runtime } = require('tickwheel');
 *     const rt = new Runtime();
 *     rt.start(50, () => console.log('50 ms later'));
 *     const tick = rt.startPeriodic(10, () => console.log('every 10 ms'));
 *     setTimeout(async () => { tick.stop(); await rt.close(); }, 100);
 *
 * The binding speaks the C ABI of libtickwheel.so.1 through koffi (no native
 * compile step). Times are milliseconds (fractions allowed), like Node's own
 * timers; deadlines are rounded up to the runtime's resolution and a callback
 * never runs before its delay has passed on CLOCK_MONOTONIC (the clock of
 * process.hrtime.bigint() and of now()).
 *
 * Threading. Every Runtime has one delivery queue of the C library
 * (tw_queue, issue 11) and starts all its timers on it: a timer that comes
 * due is handed to the queue, never to a worker thread. The queue's eventfd
 * is watched by the JavaScript thread's own event loop, through a
 * net.Socket that reads it (a libuv stream Node owns: no thread of the
 * libuv pool, no helper thread; see queueSocket()). The library writes the
 * eventfd for every batch it delivers; each read takes that count, and the
 * binding then runs the due callbacks on that thread with tw_queue_run(),
 * each in its own setImmediate() turn, so process.nextTick() callbacks and
 * promise reactions queued by one callback run before the next callback, as
 * with setTimeout; after the last turn the queue's due count says whether
 * more came meanwhile. So every callback runs on the JavaScript thread that
 * created the Runtime, between other event-loop work, never concurrently
 * with other JavaScript; runs of one timer never overlap, and no worker
 * thread ever waits for JavaScript: a busy event loop delays the callbacks
 * (as it delays setTimeout) and nothing else. One koffi trampoline (fire) is
 * registered per JavaScript thread and only ever called synchronously, from
 * tw_queue_run() (or tw_runtime_advance()) on this thread; each timer is an
 * integer key into a slot array holding its Timer, whose function runs.
 * Timers have no C release hook: the binding knows from each call's return
 * code when the C library releases a timer (a one-shot after its run unless
 * it re-armed itself, a stop that returned TW_OK -- at once, or after the
 * run in progress --, a failed start, the shutdown) and drops the key then.
 * So no JavaScript runs inside tw_timer_stop() or tw_runtime_shutdown(),
 * and the runtime can be freed by native code alone (Workers, below).
 *
 * Workers. A Runtime may be created on any worker_threads Worker; its
 * callbacks run on that Worker's thread. When the Worker ends -- its event
 * loop ran out of work, process.exit() in it, or worker.terminate() from
 * outside, which runs no JavaScript in it any more -- its open runtimes are
 * closed: the binding registers, per Runtime, two environment cleanup hooks
 * of Node-API (napi_add_env_cleanup_hook, called through koffi on
 * koffi.node.env) whose functions are the C library's tw_queue_destroy()
 * and tw_runtime_destroy() themselves, with the queue and the runtime as
 * their arguments: Node runs them when it tears the Worker's environment
 * down, without JavaScript; close() removes them. The socket is Node's own
 * handle and is closed by Node then too. (The binding used koffi.node.poll
 * before: koffi 3.3.4's poll callback aborts the process when the fd polls
 * readable while a Worker is being terminated -- it cannot call JavaScript
 * then and treats that as fatal -- and its handle, closed by a finalizer,
 * had its close callback run after Node unloaded koffi from the Worker:
 * SIGSEGV.) koffi 3.3.4 makes any failed Node-API call fatal, and on a
 * thread being terminated the calls that read or write JavaScript objects
 * fail: so on a Worker the binding does its one-time koffi setup (binding
 * the library's functions, the trampoline, native scratch memory) while
 * the package loads, and afterwards passes koffi numbers, pointers and
 * buffers only. A terminate() at any moment after require('tickwheel')
 * returned is safe; one during it -- koffi's own module initialisation
 * included -- can still abort the process (koffi's, not fixable here).
 *
 * Because callbacks run inside tw_queue_run() on this thread, stop() is
 * exact: a timer that is due but whose callback has not run yet is
 * cancelled by the C library itself and its callback never runs; stop()
 * and reset() never block, and close() frees the C runtime before it
 * returns (from inside one of the runtime's own callbacks: as soon as that
 * callback has returned).
 *
 * Timer model (library 1.3). start()/startPeriodic() take a period policy
 * ('skip', 'delay', 'burst'), a leeway (ms) and a group; query() reports a
 * live timer's state and counters, resetAt() re-arms it to an absolute
 * deadline on now()'s clock (BigInt nanoseconds), stopGroup() stops a whole
 * group. With a 1.2 library these throw (see requireModel).
 *
 * Clocks and a manual clock (library 1.3). start(ms, fn, { clock }) puts a
 * timer on 'monotonic' (default), 'boottime' or 'realtime' (the wall
 * clock); now(clock) reads the machine's clocks. new Runtime({ manualClock:
 * true }) is a runtime for tests: its clocks stand still until
 * rt.advance(ms) moves them, and the callbacks that fall due run inside
 * advance(), synchronously, on this thread. Such a runtime starts its
 * timers without the delivery queue: the C library runs them itself, inside
 * tw_runtime_advance() called on this thread, in deadline order with the
 * clocks stepped to each deadline -- exactly as in the other bindings
 * (timers started by callbacks run in the same advance() when due inside
 * its window; periodic skip/burst/delay as the C library defines them). A
 * manual runtime never keeps the process alive (nothing fires without
 * advance()).
 *
 * Batches (library 1.4). startMany(delays, fn, options), stopMany(timers)
 * and resetMany(timers, ms) start, stop or re-arm many timers with one call
 * into the library each (tw_timer_start_n, ...), every element as the
 * single call would; with an older library they throw (see requireBatch).
 *
 * Errors. A failed call throws a TickwheelError (code 'TW_ESHUTDOWN',
 * 'TW_EAGAIN', ...); bad arguments throw TypeError or RangeError with code
 * 'TW_EINVAL'. An exception thrown by a timer callback is emitted as an
 * 'error' event on the Runtime (listener args: error, timer) when it has
 * listeners, else rethrown asynchronously as an uncaught exception (like an
 * exception in a setTimeout callback). Either way the runtime and the timer
 * go on (a periodic timer keeps running), and the exception is counted in
 * stats().callbackExceptions and the metric tickwheel_callback_exceptions_total
 * (tw_runtime_count_callback_exception(), library 1.6; not counted with an
 * older library).
 *
 * Process lifetime. Like Node's timers, a Runtime keeps the process alive
 * while it has live ref'd timers (started and not yet released; every
 * timer is ref'd unless timer.unref() was called, as Node's Timeout);
 * rt.unref() stops that for the whole runtime, rt.ref() restores it (the
 * queue's poll handle is ref'd or unref'd accordingly). A Runtime without live timers never keeps the
 * process alive. When the event loop runs out of work ('beforeExit') every
 * Runtime still open is closed: its pending timers are cancelled, no
 * callback runs. On process.exit() (or a fatal exception) the open runtimes
 * are cancelled the same way and freed, except one whose callback called
 * process.exit(): its timers are cancelled and it is left to the end of the
 * process.
 *
 * Promises. rt.promises.setTimeout(ms, value, { signal, ref }) and
 * rt.promises.setInterval(...) (an async iterator) work as
 * node:timers/promises, with AbortSignal; require('tickwheel/promises') has
 * the same on a runtime the package makes on first use.
 *
 * Ids. Calls that take a timer take a Timer, its id (a BigInt), or a Number
 * that is a safe integer (exactly the id); another Number is a TypeError.
 *
 * The shared library is found through the TICKWHEEL_LIB environment
 * variable (a path; nothing else is tried when it is set), else this
 * package's prebuilt library prebuilds/<platform>-<arch>/libtickwheel.so.1
 * (scripts/build-npm.sh puts it there with the oneTBB runtime it needs,
 * found through its RUNPATH $ORIGIN), else "libtickwheel.so.1" through the
 * dynamic loader's search path (LD_LIBRARY_PATH, the ldconfig cache), else
 * in the libdir that `pkg-config tickwheel` reports. Its major version must
 * equal this package's major version; 1.2 or later (the delivery queues).
 * When none loads, LibraryLoadError lists every place tried and why. With
 * library 1.5, a failed call's TickwheelError carries the library's detail
 * (tw_last_error_message()) in `detail` and at the end of its message.
 */

const { EventEmitter } = require('node:events');
const childProcess = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const net = require('node:net');
const { isMainThread } = require('node:worker_threads');
const koffi = require('koffi');

const PACKAGE_VERSION = require('./package.json').version;
const PACKAGE_MAJOR = Number(PACKAGE_VERSION.split('.')[0]);
const MIN_MINOR = 2; // the library's minor version must be at least this: 1.2 has the delivery queues
const ABI_VERSION = 1; // the N of libtickwheel.so.N this binding speaks

// ---- the C API's constants (include/tickwheel/tickwheel.h) --------------------
const errorCodes = Object.freeze({
  TW_OK: 0,
  TW_EINVAL: -22,
  TW_ENOMEM: -12,
  TW_ENOENT: -2,
  TW_EAGAIN: -11,
  TW_ESHUTDOWN: -108,
  TW_EDEADLK: -35,
  TW_EFORKED: -1001,
});
const CODE_NAMES = new Map(Object.entries(errorCodes).map(([k, v]) => [v, k]));
const { TW_OK, TW_ENOMEM, TW_ENOENT, TW_ESHUTDOWN } = errorCodes;
const TW_PIN_SHARDS = 0x1;
const TW_CONFIG_MANUAL_CLOCK = 0x2; // tw_config.flags (since 1.3)
const TW_MAX_DELAY_NS = 1n << 60n;
const INT64_MAX = (1n << 63n) - 1n;
const U64_MAX = (1n << 64n) - 1n;
/** Period policies (tw_timer_spec.period_policy, since 1.3), by their names in this binding. */
const periodPolicies = Object.freeze({ SKIP: 'skip', DELAY: 'delay', BURST: 'burst' });
const POLICY_CODES = new Map([['skip', 0], ['delay', 1], ['burst', 2]]);
/** Clocks (tw_timer_spec.clock, since 1.3), by their names in this binding. */
const clocks = Object.freeze({ MONOTONIC: 'monotonic', BOOTTIME: 'boottime', REALTIME: 'realtime' });
const CLOCK_CODES = new Map([['monotonic', 0], ['boottime', 1], ['realtime', 2]]);
const CLOCK_NAMES = ['monotonic', 'boottime', 'realtime'];
/** tw_timer_info.state (since 1.3) -> the name query() reports. */
const TIMER_STATES = new Map([[1, 'pending'], [2, 'due'], [3, 'running']]);
/** The longest delay or period accepted, in milliseconds (2^60 ns, about 36.5 years). */
const MAX_DELAY_MS = Number(TW_MAX_DELAY_NS) / 1e6;
const MAX_SHARDS = 256;
const MAX_WORKERS = 4096;

// ---- errors ------------------------------------------------------------------
/** A failed tickwheel call: `code` is the TW_* name, `errno` the (negative) C code. */
class TickwheelError extends Error {
  /** `detail`: what the library said about the failure
   *  (tw_last_error_message(), library 1.5), '' if nothing. */
  constructor(errno, what, detail = '') {
    const code = CODE_NAMES.get(errno) || 'TW_EUNKNOWN';
    const text = lib ? lib.tw_strerror(errno) : code;
    const head = what ? `${what}: ${text} (${code})` : `${text} (${code})`;
    super(detail ? `${head}: ${detail}` : head);
    this.name = 'TickwheelError';
    this.code = code;
    this.errno = errno;
    this.detail = detail;
  }
}

/** The detail of the last failed tw_* call on this thread
 *  (tw_last_error_message(), library 1.5; '' with an older library). Read
 *  right after the failed call, before any other tw_* call. */
function lastErrorDetail() {
  if (lib === null || lib.tw_last_error_message === null) return '';
  try {
    return lib.tw_last_error_message() || '';
  } catch {
    return '';
  }
}

/** A TickwheelError for the code a C call just returned, with the library's
 *  detail when it has one. */
function cError(errno, what) {
  const detail = lastErrorDetail(); // before tw_strerror() (another tw_* call)
  return new TickwheelError(errno, what, detail);
}

/** Node's AbortError (the promise API's rejection when its signal aborts):
 *  name 'AbortError', code 'ABORT_ERR', `cause` the signal's reason. */
class AbortError extends Error {
  constructor(message = 'The operation was aborted', options = undefined) {
    super(message, options);
    this.name = 'AbortError';
    this.code = 'ABORT_ERR';
  }
}

/** The shared library could not be found or loaded, or has the wrong major
 *  version. `tried` lists each candidate with the reason it was refused. */
class LibraryLoadError extends Error {
  constructor(message, tried) {
    super(message);
    this.name = 'LibraryLoadError';
    this.code = 'ERR_TICKWHEEL_LIBRARY';
    this.tried = tried;
  }
}

function invalid(Ctor, message) {
  const err = new Ctor(message);
  err.code = 'TW_EINVAL';
  return err;
}

function describe(value) {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'function') return 'a function';
  if (value === null || typeof value !== 'object') return String(value);
  return Array.isArray(value) ? 'an array' : 'an object';
}

const MS_PER_YEAR = 365.25 * 86400e3;
const MAX_DELAY_NS_NUM = 2 ** 60;

/** `ms` milliseconds in years, for error messages: "31,688 years". */
function yearsText(ms) {
  const y = ms / MS_PER_YEAR;
  if (y < 100) return `${y.toPrecision(3)} years`;
  return `${String(Math.round(y)).replace(/\B(?=(\d{3})+(?!\d))/g, ',')} years`;
}

/** Throws the TypeError/RangeError (code 'TW_EINVAL') for a bad duration
 *  `ms` named `name`: the message names the value as passed, in
 *  milliseconds, and the limit in milliseconds and years. */
function badMs(ms, name) {
  if (typeof ms !== 'number') {
    return invalid(TypeError, `${name} must be a number of milliseconds, got ${describe(ms)}`);
  }
  if (Number.isNaN(ms)) return invalid(RangeError, `${name} must be a number of milliseconds, got NaN`);
  if (ms < 0) return invalid(RangeError, `${name} is ${ms} ms: it cannot be negative`);
  return invalid(RangeError, `${name} is ${ms} ms (${Number.isFinite(ms) ? yearsText(ms) : 'infinite'}): the ` +
    `longest is ${MAX_DELAY_MS} ms (about ${yearsText(MAX_DELAY_MS)})`);
}

/** Milliseconds (a finite number >= 0, at most MAX_DELAY_MS) to nanoseconds,
 *  rounded up (never early), as a Number: an integer (exact as such: a
 *  double above 2^53 is still an integer), at most 2^60. koffi passes it to
 *  a uint64_t parameter exactly; splitNs() writes it as two 32-bit halves. */
function msToNs(ms, name) {
  if (typeof ms !== 'number' || !(ms >= 0 && ms <= MAX_DELAY_MS)) throw badMs(ms, name);
  const ns = Math.ceil(ms * 1e6);
  return ns > MAX_DELAY_NS_NUM ? MAX_DELAY_NS_NUM : ns;
}

const TWO32 = 4294967296;

function checkInteger(value, name, min, max) {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw invalid(TypeError, `${name} must be an integer, got ${describe(value)}`);
  }
  if (value < min || value > max) {
    throw invalid(RangeError, `${name} must be between ${min} and ${max}, got ${value}`);
  }
  return value;
}

function checkOptions(options, allowed, what) {
  if (options === undefined) return {};
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw invalid(TypeError, `${what} must be an object, got ${describe(options)}`);
  }
  for (const key of Object.keys(options)) {
    if (!allowed.includes(key)) {
      throw invalid(TypeError, `${what}: unknown option ${JSON.stringify(key)} (known: ${allowed.join(', ')})`);
    }
  }
  return options;
}

// ---- the C types ----------------------------------------------------------------
// Named with this package's version (koffi's type names are per thread): a
// second copy of the same version reuses them. (Anonymous koffi types are not
// used: koffi 3.3 sometimes refuses an object for a pointer to one.)
const TYPE_PREFIX = `tickwheel_node_${PACKAGE_VERSION.replace(/[^A-Za-z0-9]/g, '_')}_`;
function defineType(name, make) {
  const full = TYPE_PREFIX + name;
  try {
    return koffi.type(full);
  } catch {
    return make(full);
  }
}

const Config = defineType('tw_config', (n) => koffi.struct(n, {
  size: 'uint32_t',
  shards: 'uint32_t',
  workers: 'uint32_t',
  flags: 'uint32_t',
  resolution_ns: 'uint64_t',
  max_timers: 'uint64_t',
}));
// tw_callback(void *arg, tw_timer id): the binding passes an integer key as
// arg, so it is declared uintptr_t (same ABI class). No release hook is used.
const Callback = defineType('tw_callback', (n) => koffi.proto(n, 'void', ['uintptr_t', 'uint64_t']));
// The 1.3 layout (88 bytes): the delivery queue (1.2), then the timer
// model's fields. Only its size and offsets are used: start() fills native
// memory with it through a Uint32Array (see specScratch). (A 1.2 library
// accepts it while the 1.3 fields are 0.)
const Spec = defineType('tw_timer_spec_1_3', (n) => koffi.struct(n, {
  size: 'uint32_t',
  shard: 'int32_t',
  deadline_ns: 'uint64_t',
  delay_ns: 'uint64_t',
  period_ns: 'uint64_t',
  callback: koffi.pointer(Callback),
  arg: 'uintptr_t',
  release: 'void *',
  queue: 'void *',
  period_policy: 'uint32_t',
  clock: 'int32_t',
  leeway_ns: 'uint64_t',
  group: 'uint64_t',
}));
const SPEC_SIZE = koffi.sizeof(Spec);
const SPEC_AT = Object.fromEntries(['shard', 'delay_ns', 'period_ns', 'callback', 'arg', 'release', 'queue',
  'period_policy', 'clock', 'leeway_ns', 'group'].map((k) => [k, koffi.offsetof(Spec, k)]));
// tw_timer_info (1.3, 64 bytes), read from a Buffer by offset.
const INFO_SIZE = 64;
const INFO_AT = {
  state: 4, shard: 8, clock: 12, deadline_ns: 16, period_ns: 24, leeway_ns: 32, group: 40, runs: 48, missed: 56,
};
const STAT_FIELDS = {
  size: 'uint32_t',
  shards: 'uint32_t',
  workers: 'uint32_t',
  shut_down: 'uint32_t',
  resolution_ns: 'uint64_t',
  pending: 'uint64_t',
  inbox: 'uint64_t',
  live: 'uint64_t',
  started: 'uint64_t',
  fired: 'uint64_t',
  stopped: 'uint64_t',
  reset: 'uint64_t',
  callback_exceptions: 'uint64_t',
  cancelled_at_shutdown: 'uint64_t',
  lateness_p50_ns: 'uint64_t',
  lateness_p99_ns: 'uint64_t',
  lateness_p999_ns: 'uint64_t',
  lateness_max_ns: 'uint64_t',
  lateness_samples: 'uint64_t',
  // 1.7 (issue 34): lateness by stage, the callbacks' duration, saturation, memory.
  driver_lateness_p50_ns: 'uint64_t',
  driver_lateness_p99_ns: 'uint64_t',
  driver_lateness_p999_ns: 'uint64_t',
  driver_lateness_max_ns: 'uint64_t',
  wait_lateness_p50_ns: 'uint64_t',
  wait_lateness_p99_ns: 'uint64_t',
  wait_lateness_p999_ns: 'uint64_t',
  wait_lateness_max_ns: 'uint64_t',
  run_duration_p50_ns: 'uint64_t',
  run_duration_p99_ns: 'uint64_t',
  run_duration_p999_ns: 'uint64_t',
  run_duration_max_ns: 'uint64_t',
  run_duration_samples: 'uint64_t',
  workers_busy: 'uint64_t',
  waiting_for_worker: 'uint64_t',
  callbacks_running: 'uint64_t',
  oldest_run_age_ns: 'uint64_t',
  slots: 'uint64_t',
  resident_bytes: 'uint64_t',
};
const Stats = defineType('tw_stats', (n) => koffi.struct(n, STAT_FIELDS));
const STATS_SIZE = koffi.sizeof(Stats);
// Byte offsets of tw_stats' fields (read from a Buffer: see bind()).
const STATS_AT = Object.fromEntries(Object.keys(STAT_FIELDS).map((k) => [k, koffi.offsetof(Stats, k)]));
const CONFIG_SIZE = koffi.sizeof(Config);
// tw_queue_stats (1.2), read from a Buffer: the binding asks for `due` on
// every wake-up, so no object is built for it.
const QUEUE_STAT_FIELDS = [
  'due', 'delivered', 'ran',
  'signal_p50_ns', 'signal_p99_ns', 'signal_p999_ns', 'signal_max_ns', 'signal_samples',
  'run_p50_ns', 'run_p99_ns', 'run_p999_ns', 'run_max_ns', 'run_samples',
];
const QUEUE_STATS_SIZE = 8 + 8 * QUEUE_STAT_FIELDS.length; // size, runners, then uint64_t fields
const QUEUE_DUE_OFFSET = 8;

// ---- loading the library ------------------------------------------------------
let lib = null; // { path, tw_*: functions }

/** Throws unless the encoded version v (major << 16 | minor << 8 | patch) has
 *  this package's major version and a minor version of at least MIN_MINOR. */
function checkVersion(v, where) {
  const major = v >>> 16;
  const minor = (v >>> 8) & 0xff;
  const text = `${major}.${minor}.${v & 0xff}`;
  if (major !== PACKAGE_MAJOR) {
    throw new Error(`${where} is tickwheel ${text}; this binding (tickwheel ${PACKAGE_VERSION}) needs ${PACKAGE_MAJOR}.x`);
  }
  if (minor < MIN_MINOR) {
    throw new Error(`${where} is tickwheel ${text}; this binding (tickwheel ${PACKAGE_VERSION}) needs ` +
      `${PACKAGE_MAJOR}.${MIN_MINOR} or later (delivery queues)`);
  }
  return text;
}

/** `pkg-config --variable=libdir tickwheel` ($PKG_CONFIG, else pkg-config):
 *  { libdir } or { why } it gave none. Never throws. */
function pkgConfigLibdir() {
  const tool = process.env.PKG_CONFIG || 'pkg-config';
  const cmd = `${tool} --variable=libdir tickwheel`;
  try {
    const out = childProcess.execFileSync(tool, ['--variable=libdir', 'tickwheel'], {
      encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 10000,
    });
    return out.trim() ? { libdir: out.trim() } : { why: `\`${cmd}\` gave an empty libdir` };
  } catch (err) {
    if (err.code === 'ENOENT') return { why: `${tool} is not on PATH` };
    const stderr = err.stderr ? String(err.stderr).trim() : '';
    const status = typeof err.status === 'number' ? ` (exit ${err.status})` : '';
    return { why: `\`${cmd}\` failed${status}: ${stderr || 'package tickwheel not found'}` };
  }
}

function bind(handle, where) {
  const f = (name, ret, args) => handle.func(name, ret, args);
  const rtPtr = 'void *';
  // The version first: an older library lacks the later functions.
  const ver = checkVersion(f('tw_version', 'uint32_t', [])(), where);
  const fns = {
    // Structs and out-parameters pass as native memory or Buffers, never as
    // JavaScript objects koffi would read and write property by property:
    // on a Worker being terminated those property accesses fail, and koffi
    // 3.3.4 makes such a failure a fatal error of the process (see Workers).
    tw_runtime_create: f('tw_runtime_create', 'int', ['void *', 'void *']),
    tw_runtime_shutdown: f('tw_runtime_shutdown', 'int', [rtPtr]),
    tw_runtime_destroy: f('tw_runtime_destroy', 'int', [rtPtr]),
    // The spec and the id are native memory written and read through typed
    // arrays (see specScratch): a koffi struct built from an object per
    // start costs several times more, a Buffer argument ~25 ns more.
    tw_timer_start_ex: f('tw_timer_start_ex', 'int', [rtPtr, 'void *', 'void *']),
    tw_timer_stop: f('tw_timer_stop', 'int', [rtPtr, 'uint64_t']),
    tw_timer_reset: f('tw_timer_reset', 'int', [rtPtr, 'uint64_t', 'uint64_t']),
    tw_runtime_stats: f('tw_runtime_stats', 'int', [rtPtr, 'uint8_t *']),
    tw_queue_create: f('tw_queue_create', 'int', [rtPtr, 'void *']),
    tw_queue_fd: f('tw_queue_fd', 'int', ['void *']),
    tw_queue_run: f('tw_queue_run', 'int', ['void *', 'size_t', 'int64_t']),
    tw_queue_destroy: f('tw_queue_destroy', 'int', ['void *']),
    tw_queue_get_stats: f('tw_queue_get_stats', 'int', ['void *', 'uint8_t *']),
    tw_now_ns: f('tw_now_ns', 'uint64_t', []),
    tw_strerror: f('tw_strerror', 'const char *', [ 'int' ]),
  };
  // The timer model (1.3): bound only if the library has it (see requireModel).
  const optional = (name, ret, args) => {
    try {
      return f(name, ret, args);
    } catch {
      return null;
    }
  };
  fns.tw_timer_query = optional('tw_timer_query', 'int', [rtPtr, 'uint64_t', 'uint8_t *']);
  fns.tw_timer_reset_at = optional('tw_timer_reset_at', 'int', [rtPtr, 'uint64_t', 'uint64_t']);
  fns.tw_group_stop = optional('tw_group_stop', 'int64_t', [rtPtr, 'uint64_t', 'unsigned int']);
  fns.hasModel = fns.tw_timer_query !== null && fns.tw_timer_reset_at !== null && fns.tw_group_stop !== null;
  // Clocks and the manual clock (1.3), likewise (see requireClocks).
  fns.tw_now_ns_clock = optional('tw_now_ns_clock', 'uint64_t', ['int']);
  fns.tw_runtime_now_ns = optional('tw_runtime_now_ns', 'uint64_t', [rtPtr, 'int']);
  fns.tw_runtime_advance = optional('tw_runtime_advance', 'int', [rtPtr, 'uint64_t']);
  fns.hasClocks = fns.tw_now_ns_clock !== null && fns.tw_runtime_now_ns !== null && fns.tw_runtime_advance !== null;
  // Batches (1.4), likewise (see requireBatch). Arrays pass as Buffers.
  fns.tw_timer_start_n = optional('tw_timer_start_n', 'int', [rtPtr, 'void *', 'size_t', 'void *']);
  fns.tw_timer_stop_n = optional('tw_timer_stop_n', 'int', [rtPtr, 'void *', 'size_t', 'void *']);
  fns.tw_timer_reset_n = optional('tw_timer_reset_n', 'int', [rtPtr, 'void *', 'size_t', 'uint64_t', 'void *']);
  fns.hasBatch = fns.tw_timer_start_n !== null && fns.tw_timer_stop_n !== null && fns.tw_timer_reset_n !== null;
  // The detail of the last failed call on this thread (1.5): thrown errors
  // carry it when the library has it (see cError).
  fns.tw_last_error_message = optional('tw_last_error_message', 'const char *', []);
  // Counting a callback's exception in tw_stats.callback_exceptions (1.6):
  // with an older library a callback's exception is not counted.
  fns.tw_runtime_count_callback_exception = optional('tw_runtime_count_callback_exception', 'int', [rtPtr]);
  // The cleanup hooks of Workers (see workerSupport): the addresses of the
  // two C functions a Worker's teardown calls itself.
  fns.destroyAddr = { queue: handle.symbol('tw_queue_destroy'), runtime: handle.symbol('tw_runtime_destroy') };
  fns.path = where;
  fns.version = ver;
  return fns;
}

/** The folder of this package's prebuilt library for this platform
 *  (scripts/build-npm.sh fills prebuilds/linux-x64: libtickwheel.so.1 and the
 *  oneTBB runtime it needs, found through its RUNPATH $ORIGIN). */
const PREBUILD_DIR = path.join(__dirname, 'prebuilds', `${process.platform}-${process.arch}`);

/** Where to look, in order: [{ how, what }] (what: a path or a name for
 *  dlopen), or a string (a place with nothing to load, and why). */
function candidates() {
  const soname = `libtickwheel.so.${ABI_VERSION}`;
  const env = process.env.TICKWHEEL_LIB;
  if (env) return [{ how: `TICKWHEEL_LIB=${env}`, what: env }];
  const list = [];
  const prebuilt = path.join(PREBUILD_DIR, soname);
  if (fs.existsSync(prebuilt)) {
    list.push({ how: 'the package\'s prebuilt library', what: prebuilt });
  } else {
    list.push(`the package's prebuilt library: ${prebuilt} does not exist (no prebuild for ` +
      `${process.platform}-${process.arch} in this package)`);
  }
  list.push({
    how: `the dynamic loader (LD_LIBRARY_PATH=${process.env.LD_LIBRARY_PATH || '<unset>'}, the ldconfig cache, /lib, /usr/lib)`,
    what: soname,
  });
  const pc = pkgConfigLibdir();
  const how = `pkg-config (PKG_CONFIG_PATH=${process.env.PKG_CONFIG_PATH || '<unset>'})`;
  if (pc.libdir) list.push({ how: `${how} libdir ${pc.libdir}`, what: path.join(pc.libdir, soname) });
  else list.push(`${how}: ${pc.why}`);
  return list;
}

/** Loads the library (once) and returns its bound functions. */
function load() {
  if (lib) return lib;
  const tried = [];
  for (const c of candidates()) {
    if (typeof c === 'string') {
      tried.push(c);
      continue;
    }
    let handle;
    try {
      handle = koffi.load(c.what);
    } catch (err) {
      tried.push(`${c.how}: ${c.what}: ${err.message}`);
      continue;
    }
    try {
      lib = bind(handle, c.what);
      return lib;
    } catch (err) {
      tried.push(`${c.how}: ${c.what} refused: ${err.message}`);
      try { handle.unload(); } catch { /* keep it mapped */ }
    }
  }
  const soname = `libtickwheel.so.${ABI_VERSION}`;
  const advice = process.env.TICKWHEEL_LIB
    ? 'TICKWHEEL_LIB is set, so nothing else was tried: correct it, or unset it to search this ' +
      'package\'s prebuilds folder, the loader\'s paths and pkg-config.'
    : `Install a tickwheel package that carries its prebuilt library (dist/tickwheel-<version>.tgz ` +
      `from scripts/build-npm.sh has prebuilds/linux-x64), or install libtickwheel (e.g. \`cmake --install ` +
      `build/release\`, then \`ldconfig\`), or set TICKWHEEL_LIB to the library's path, or LD_LIBRARY_PATH ` +
      'or PKG_CONFIG_PATH to where it is installed.';
  const lines = [`tickwheel: cannot load the C library ${soname}. Tried, in order:`,
    ...tried.map((t, i) => `  ${i + 1}. ${t}`), advice];
  throw new LibraryLoadError(lines.join('\n'), tried);
}

// ---- Workers: the runtimes of a Worker are closed when it ends -------------------
// See "Workers" at the top. Looked up on the first Runtime of this thread.
let envHooks; // undefined: not looked up yet; else { add, remove, env } or { error }

// ---- watching the queue's eventfd from the event loop --------------------------------
// See "Threading" at the top: a net.Socket reads the eventfd.
let libcFns = null;
function libc() {
  if (libcFns === null) {
    const c = koffi.load('libc.so.6');
    libcFns = {
      pipe2: c.func('int pipe2(int *fds, int flags)'), // fds: an Int32Array (see bind())
      dup3: c.func('int dup3(int oldfd, int newfd, int flags)'),
      close: c.func('int close(int fd)'),
      handle: c,
    };
  }
  return libcFns;
}
const O_CLOEXEC = 0o2000000;

/** A readable (flowing) net.Socket on a duplicate of `fd` (the queue's
 *  eventfd): made on a pipe (net.Socket takes pipes and sockets only), whose
 *  read end is then replaced by the duplicate with dup3() in the same
 *  synchronous step -- libuv registers a stream's fd in epoll only in its
 *  next poll phase, so it registers the eventfd. Node owns the socket (and
 *  the duplicate): destroy() closes it, and so does the end of the thread's
 *  environment, without JavaScript. */
function queueSocket(fd) {
  const c = libc();
  const fds = new Int32Array([-1, -1]);
  if (c.pipe2(fds, O_CLOEXEC) !== 0) throw new Error(`tickwheel: pipe2() failed (errno ${koffi.errno()})`);
  // Only the read end's type matters (to net.Socket): the write end goes at
  // once. (A worker.terminate() landing inside the net.Socket constructor
  // below leaves the read end open: one fd, in that race only.)
  c.close(fds[1]);
  let sock;
  try {
    sock = new net.Socket({ fd: fds[0], readable: true, writable: false });
  } catch (err) {
    c.close(fds[0]);
    throw err;
  }
  const rc = c.dup3(fd, fds[0], O_CLOEXEC); // closes the pipe's read end, in place
  const errno = koffi.errno();
  if (rc < 0) {
    sock.destroy();
    throw new Error(`tickwheel: dup3() of the queue's eventfd failed (errno ${errno})`);
  }
  return sock;
}

/** The Node-API environment cleanup hooks, or { error } saying why they
 *  are not available. */
function envCleanupHooks() {
  if (envHooks !== undefined) return envHooks;
  try {
    if (!koffi.node || typeof koffi.node.env !== 'bigint') throw new Error(`koffi ${koffi.version} has no koffi.node.env`);
    const self = koffi.load(null); // the node executable: it exports Node-API
    const hooks = {
      add: self.func('int napi_add_env_cleanup_hook(void *env, void *fun, void *arg)'),
      remove: self.func('int napi_remove_env_cleanup_hook(void *env, void *fun, void *arg)'),
      env: koffi.node.env,
      self,
    };
    envHooks = hooks;
  } catch (err) {
    envHooks = { error: err.message };
  }
  return envHooks;
}

/** The loaded library's version, "major.minor.patch". */
function version() {
  return load().version;
}

/** The path (or loader name) the library was loaded from. */
function libraryPath() {
  return load().path;
}

/** The MACHINE's clock `clock` in nanoseconds (a BigInt): 'monotonic' (the
 *  default: CLOCK_MONOTONIC, the clock of process.hrtime.bigint() on Linux
 *  and of delays), 'boottime' or 'realtime' (the wall clock, Date.now() * 1e6).
 *  Not a runtime's clock: a manual Runtime's virtual clocks are read with
 *  rt.now(clock), and a deadline for resetAt() is best computed as
 *  rt.now(timer.clock) + delay, right on a real and a manual runtime alike. */
function now(clock) {
  const l = load();
  if (clock === undefined || clock === 'monotonic') return BigInt(l.tw_now_ns());
  const code = clockCode(clock);
  requireClocks('now(clock)');
  return BigInt(l.tw_now_ns_clock(code));
}

/** A clock name to its C value. */
function clockCode(clock) {
  if (typeof clock !== 'string') {
    throw invalid(TypeError, `clock must be 'monotonic', 'boottime' or 'realtime', got ${describe(clock)}`);
  }
  const code = CLOCK_CODES.get(clock);
  if (code === undefined) {
    throw invalid(RangeError, `unknown clock ${JSON.stringify(clock)} (known: monotonic, boottime, realtime)`);
  }
  return code;
}

/** Throws unless the loaded library has the clocks of 1.3 (clock option,
 *  now(clock), manualClock, advance()). */
function requireClocks(what) {
  const l = load();
  if (!l.hasClocks) {
    const err = new Error(`tickwheel: ${what} needs libtickwheel 1.3 or later; ${l.path} is ${l.version}`);
    err.code = 'ERR_TICKWHEEL_LIBRARY';
    throw err;
  }
}

/** Throws unless the loaded library has the timer model of 1.3 (query,
 *  resetAt, stopGroup, the policy/leeway/group options). */
function requireModel(what) {
  if (!lib.hasModel) {
    const err = new Error(`tickwheel: ${what} needs libtickwheel 1.3 or later; ${lib.path} is ${lib.version}`);
    err.code = 'ERR_TICKWHEEL_LIBRARY';
    throw err;
  }
}

function requireBatch(what) {
  if (!lib.hasBatch) {
    const err = new Error(`tickwheel: ${what} needs libtickwheel 1.4 or later; ${lib.path} is ${lib.version}`);
    err.code = 'ERR_TICKWHEEL_LIBRARY';
    throw err;
  }
}

/** A period policy name to its C value. */
function policyCode(policy) {
  if (typeof policy !== 'string') {
    throw invalid(TypeError, `policy must be 'skip', 'delay' or 'burst', got ${describe(policy)}`);
  }
  const code = POLICY_CODES.get(policy);
  if (code === undefined) {
    throw invalid(RangeError, `unknown period policy ${JSON.stringify(policy)} (known: skip, delay, burst)`);
  }
  return code;
}

/** A group (a safe integer Number or a BigInt, 0 .. 2^64-1; 0 only if
 *  allowZero) as a BigInt. */
function groupId(group, allowZero) {
  const min = allowZero ? 0n : 1n;
  let g;
  if (typeof group === 'bigint') {
    g = group;
  } else if (typeof group === 'number' && Number.isSafeInteger(group)) {
    g = BigInt(group);
  } else {
    throw invalid(TypeError, `group must be an integer (a Number or a BigInt), got ${describe(group)}`);
  }
  if (g < min || g > U64_MAX) {
    throw invalid(RangeError, `group must be between ${min} and 2^64-1${allowZero ? '' : ' (0 is no group)'}, got ${g}`);
  }
  return g;
}

/** A group option as a Timer keeps it: 0 for none, else the BigInt. */
function groupOrZero(group) {
  const g = groupId(group, true);
  return g === 0n ? 0 : g;
}

/** A timer id given as a Number: accepted where it is exact (a safe integer
 *  >= 0: BigInt(n) is the very id, and Number(id) gives n back), else a
 *  TypeError (code 'TW_EINVAL') -- an id above 2^53-1 cannot be a Number
 *  without rounding to another id, so it must be a BigInt (timer.id). */
function numberId(n, what) {
  if (!Number.isSafeInteger(n) || n < 0) {
    throw invalid(TypeError, `${what}: a Number timer id must be a safe integer >= 0 (at most ` +
      `Number.MAX_SAFE_INTEGER = 2^53-1, where it equals the 64-bit id exactly), got ${n}; pass ` +
      'a larger id as a BigInt (timer.id)');
  }
  return BigInt(n);
}

/** A group as query() reports it: a Number while it is a safe integer, else a BigInt. */
function groupValue(g) {
  return g <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(g) : g;
}

// ---- the shared trampoline ---------------------------------------------------------
// One registered function per JavaScript thread (on first use); the C arg of
// every timer is its key. Only ever called on this thread, synchronously,
// from inside tw_queue_run() or tw_runtime_advance().
//
// Keys: generation * 2^32 + slot, where slots[slot] is the live Timer (an
// array and a free list: a Map's set and delete cost ~100 ns a pair more).
// A slot's generation moves on when its timer is released, so a key never
// names the next timer of its slot.
const slots = []; // slot -> Timer, or undefined while free
const slotGen = []; // slot -> its generation, below 2^21 (keys stay below 2^53)
const freeSlots = [];
let fireTrampoline = null;

/** A key for a timer about to start (the C arg). */
function takeKey() {
  let slot;
  if (freeSlots.length > 0) {
    slot = freeSlots.pop();
  } else {
    slot = slots.length;
    slots.push(undefined);
    slotGen.push(0);
  }
  return slotGen[slot] * TWO32 + slot;
}

/** Gives key's slot back (its timer was released or never started). */
function dropKey(key) {
  const slot = key >>> 0; // key mod 2^32
  slots[slot] = undefined;
  slotGen[slot] = (slotGen[slot] + 1) & 0x1fffff;
  freeSlots.push(slot);
}

/** The live Timer key names, or undefined. */
function timerOf(key) {
  const t = slots[key >>> 0];
  return t !== undefined && t._key === key ? t : undefined;
}

/** Every live timer of this thread's runtimes. */
function liveTimers() {
  return slots.filter((t) => t !== undefined);
}

function onFire(key) {
  const t = timerOf(key);
  if (t === undefined) return;
  const rt = t._rt;
  if (!t._cancelled && !rt._closed) {
    t._running = true;
    t._rearmed = false;
    try {
      t._fn.call(t, t);
    } catch (err) {
      rt._callbackError(err, t);
    }
    t._running = false;
  }
  // The C library releases the timer when this returns: a one-shot that did
  // not re-arm itself (or did, then was stopped), a timer stopped during
  // its run.
  if (t._releaseAfterRun || (!t.periodic && !t._rearmed)) {
    if (!t.periodic) t._ran = true;
    try {
      rt._release(t);
    } catch (err) {
      process.nextTick(() => { throw err; }); // never into koffi
    }
  }
}

let fireAddress = 0n; // its address, for the specs
function getFireTrampoline() {
  if (fireTrampoline === null) {
    fireTrampoline = koffi.register(onFire, koffi.pointer(Callback));
    fireAddress = koffi.address(fireTrampoline);
  }
  return fireTrampoline;
}

// The binding's one-time setup of this thread (after load()): everything a
// Runtime's constructor would otherwise make through koffi the first time.
function prepareThread() {
  getFireTrampoline();
  getSpecScratch();
  getCreateScratch();
  libc();
  envCleanupHooks();
}

// The spec of every start of this thread: native memory (fixed address,
// passed to tw_timer_start_ex as a pointer) written through typed arrays;
// the id comes back in the same way. `owner` is the runtime whose template
// (callback, queue, zero options) it holds; `dirty` means a start wrote
// non-default options since.
let specScratch = null;
function getSpecScratch() {
  if (specScratch === null) {
    // Never freed: one per thread (a Worker that ends leaves its 96 bytes).
    const mem = koffi.alloc('uint8_t', SPEC_SIZE + 8); // koffi 3: the address, a BigInt
    const ab = koffi.view(mem, SPEC_SIZE + 8);
    specScratch = {
      mem,
      idMem: mem + BigInt(SPEC_SIZE), // the tw_timer the start writes, after the spec
      u32: new Uint32Array(ab, 0, SPEC_SIZE / 4),
      i32: new Int32Array(ab, 0, SPEC_SIZE / 4),
      id: new Uint32Array(ab, SPEC_SIZE, 2),
      owner: null,
      dirty: false,
    };
  }
  return specScratch;
}
// tw_config and a pointer-sized out-parameter for tw_runtime_create() and
// tw_queue_create(), in native memory (see bind()): one per thread, never freed.
let createScratch = null;
function getCreateScratch() {
  if (createScratch === null) {
    const size = CONFIG_SIZE + 8;
    const mem = koffi.alloc('uint8_t', size);
    const ab = koffi.view(mem, size);
    createScratch = {
      cfg: mem,
      out: mem + BigInt(CONFIG_SIZE),
      u32: new Uint32Array(ab, 0, CONFIG_SIZE / 4),
      ptr: new BigUint64Array(ab, CONFIG_SIZE, 1),
    };
  }
  return createScratch;
}

// tw_timer_spec field offsets as indices of 32-bit words.
const W = Object.fromEntries(Object.entries(SPEC_AT).map(([k, v]) => [k, v / 4]));
const W_DELAY = W.delay_ns;
const W_ARG = W.arg;

// Writes the 64-bit value `v` (a Number: an integer below 2^64, or a
// BigInt) at word index `w` of `u32`, little-endian.
function put64(u32, w, v) {
  if (typeof v === 'bigint') {
    u32[w] = Number(v & 0xffffffffn);
    u32[w + 1] = Number(v >> 32n);
  } else if (v < TWO32) {
    u32[w] = v;
    u32[w + 1] = 0;
  } else {
    const hi = Math.floor(v / TWO32);
    u32[w] = v - hi * TWO32;
    u32[w + 1] = hi;
  }
}

// For bench/peers/peer_node.js (not part of the API): n start+stop pairs of
// timers due in 10 s through the very koffi calls start() and stop() make
// -- tw_timer_start_ex with the spec scratch, tw_timer_stop with the id as
// a Number or BigInt -- without the binding's JavaScript around them: the
// floor of a pair's cost from JavaScript. The key names no timer (none can
// fire: each is stopped at once).
function rawPairs(rt, n) {
  rt._prepareSpec();
  const sc = specScratch;
  const u = sc.u32;
  put64(u, W_DELAY, 10e9);
  put64(u, W_ARG, 2 ** 52); // a key no slot matches
  const start = lib.tw_timer_start_ex;
  const stop = lib.tw_timer_stop;
  for (let i = 0; i < n; i++) {
    if (start(rt._ptr, sc.mem, sc.idMem) !== TW_OK) throw new Error('rawPairs: start failed');
    const hi = sc.id[1];
    stop(rt._ptr, hi < 0x200000 ? hi * TWO32 + sc.id[0] : (BigInt(hi) << 32n) | BigInt(sc.id[0]));
  }
  sc.dirty = true; // the template's key and delay are this function's
  return n;
}

// ---- open runtimes and process exit ------------------------------------------------
const openRuntimes = new Set();
let exitHookInstalled = false;

// The event loop is about to end (nothing keeps it alive): close the open
// runtimes (they have no live timers, or are unref()ed).
function onBeforeExit() {
  for (const rt of [...openRuntimes]) {
    if (rt._closePromise === null) {
      rt._exiting = true;
      rt.close().catch((err) => process.emitWarning(err));
    }
  }
}

// process.exit() or a fatal exception: the loop is gone, nothing may wait for it.
function onProcessExit() {
  for (const rt of [...openRuntimes]) {
    rt._exiting = true;
    rt._closeForExit();
  }
}

// ---- Timer ---------------------------------------------------------------------
/** A started timer. `id` is its C id (a BigInt). Holds the binding's state
 *  of the timer too (one object per start; no other allocation). */
class Timer {
  constructor(rt, key, fn, periodic, clock, group) {
    this._rt = rt;
    this._key = key; // the C arg: the key in `timers`
    this._fn = fn;
    this._lo = 0; // the C id's two 32-bit halves (set once started)
    this._hi = 0;
    this._id = null; // the id as a BigInt, made on first use
    /** True for a periodic timer. */
    this.periodic = periodic;
    this._clock = clock; // C code
    this._group = group; // 0 (none) or a BigInt
    this._live = false; // started and not yet released by the C library
    this._cancelled = false; // stopped (or closed): no run is delivered any more
    this._ran = false; // a one-shot whose run has ended
    this._running = false; // its callback runs now
    this._rearmed = false; // re-armed during the run in progress
    this._releaseAfterRun = false; // stopped during its run: released when it ends
    this._refed = true; // keeps the process alive while live (Timer.ref())
    this._onRelease = null; // the promise API's: called once when released
  }

  /** The C timer id (BigInt, never 0n). */
  get id() {
    if (this._id === null) this._id = (BigInt(this._hi) << 32n) | BigInt(this._lo);
    return this._id;
  }

  /** The id as koffi takes it for a uint64_t: a Number while exact (below
   *  2^53), else the BigInt. */
  _cid() {
    return this._hi < 0x200000 ? this._hi * TWO32 + this._lo : this.id;
  }

  /** True until the timer has run its last run, was stopped or was released. */
  get active() {
    return this._live && !this._cancelled && !this._ran && !this._rt._closed;
  }

  /** Same as runtime.stop(timer). */
  stop() {
    return this._rt.stop(this);
  }

  /** Same as runtime.reset(timer, ms). */
  reset(ms) {
    return this._rt.reset(this, ms);
  }

  /** Same as runtime.resetAt(timer, deadlineNs). */
  resetAt(deadlineNs) {
    return this._rt.resetAt(this, deadlineNs);
  }

  /** Same as runtime.query(timer). */
  query() {
    return this._rt.query(this);
  }

  /**
   * Makes this timer keep the process alive while it is live (the
   * default), as Node's Timeout.ref(): the event loop goes on while a live
   * ref'd timer of a ref'd Runtime exists. Returns this. Harmless on a timer
   * that is no longer live.
   */
  ref() {
    this._rt._setTimerRef(this, true);
    return this;
  }

  /**
   * Lets the process exit while this timer is pending, as Node's
   * Timeout.unref(): if nothing else keeps the event loop alive, the
   * process ends and the timer is cancelled (its callback never runs). It
   * still fires while something else keeps the process alive. Survives
   * reset() and resetAt(). Returns this.
   */
  unref() {
    this._rt._setTimerRef(this, false);
    return this;
  }

  /** True unless unref() was called (and ref() not since): whether this
   *  timer keeps the process alive while it is live (and its Runtime is
   *  ref'd: runtime.unref() overrides every timer's ref). */
  hasRef() {
    return this._refed;
  }

  /** The clock its delay and deadlines are on: 'monotonic', 'boottime' or 'realtime'. */
  get clock() {
    return CLOCK_NAMES[this._clock];
  }
}

// ---- Runtime ---------------------------------------------------------------------
const RUNTIME_OPTIONS = ['shards', 'workers', 'resolution', 'maxTimers', 'pinShards', 'manualClock'];
const MODEL_OPTIONS = ['policy', 'leeway', 'group', 'clock'];
const START_OPTIONS = ['period', 'shard', ...MODEL_OPTIONS];
const PERIODIC_OPTIONS = ['delay', 'shard', ...MODEL_OPTIONS];
// Callbacks run per wake-up of the queue's poll handle, at most; more due
// ones are run on the next turns of the event loop (the fd stays readable).
const MAX_BATCH = 1024;

// tw_queue_stats field names in camelCase: signal_p50_ns -> signalP50Ns.
const QUEUE_STAT_NAMES = QUEUE_STAT_FIELDS.map((f) => f.replace(/_([a-z0-9])/g, (m, c) => c.toUpperCase()));

function queueStatsFrom(buf) {
  const out = {};
  for (let i = 0; i < QUEUE_STAT_NAMES.length; i++) out[QUEUE_STAT_NAMES[i]] = Number(buf.readBigUInt64LE(8 + 8 * i));
  return out;
}

class Runtime extends EventEmitter {
  /**
   * @param {object} [options]
   * @param {number} [options.shards=0] timing wheels (one driver thread each); 0 = one per CPU; at most 256
   * @param {number} [options.workers=1] worker threads of the C runtime (this binding runs no callback
   *   on them); 0 = one per CPU; at most 4096
   * @param {number} [options.resolution=1] the tick in milliseconds, 0.001 .. 1000 (0 = 1 ms)
   * @param {number|bigint} [options.maxTimers=0] live timers allowed at once; 0 = unlimited
   * @param {boolean} [options.pinShards=false] pin shard i's driver thread to CPU i
   * @param {boolean} [options.manualClock=false] a manual clock, for tests: see advance()
   */
  constructor(options) {
    super();
    const o = checkOptions(options, RUNTIME_OPTIONS, 'Runtime options');
    const cfg = { size: CONFIG_SIZE, shards: 0, workers: 1, flags: 0, resolution_ns: 0, max_timers: 0 };
    if (o.shards !== undefined) cfg.shards = checkInteger(o.shards, 'shards', 0, MAX_SHARDS);
    if (o.workers !== undefined) cfg.workers = checkInteger(o.workers, 'workers', 0, MAX_WORKERS);
    if (o.resolution !== undefined && o.resolution !== 0) {
      if (typeof o.resolution !== 'number') {
        throw invalid(TypeError, `resolution must be a number of milliseconds, got ${describe(o.resolution)}`);
      }
      if (!(o.resolution >= 0.001 && o.resolution <= 1000)) {
        throw invalid(RangeError, `resolution must be 0 or between 0.001 and 1000 ms, got ${o.resolution}`);
      }
      cfg.resolution_ns = Math.round(o.resolution * 1e6);
    }
    if (o.maxTimers !== undefined) {
      const m = o.maxTimers;
      if (typeof m === 'bigint') {
        if (m < 0n || m >= 1n << 64n) throw invalid(RangeError, `maxTimers must be between 0 and 2^64-1, got ${m}`);
        cfg.max_timers = m;
      } else {
        cfg.max_timers = checkInteger(m, 'maxTimers', 0, Number.MAX_SAFE_INTEGER);
      }
    }
    if (o.pinShards !== undefined) {
      if (typeof o.pinShards !== 'boolean') {
        throw invalid(TypeError, `pinShards must be a boolean, got ${describe(o.pinShards)}`);
      }
      if (o.pinShards) cfg.flags |= TW_PIN_SHARDS;
    }
    let manual = false;
    if (o.manualClock !== undefined) {
      if (typeof o.manualClock !== 'boolean') {
        throw invalid(TypeError, `manualClock must be a boolean, got ${describe(o.manualClock)}`);
      }
      manual = o.manualClock;
    }

    const l = load();
    if (manual) {
      requireClocks('manualClock');
      cfg.flags |= TW_CONFIG_MANUAL_CLOCK;
    }
    const hooks = envCleanupHooks();
    if (hooks.error !== undefined && !isMainThread) {
      const err = new Error('tickwheel: a Runtime on a worker thread needs the Node-API cleanup hooks, to close ' +
        `it when the Worker ends (also by worker.terminate()), and they are not available: ${hooks.error}`);
      err.code = 'ERR_TICKWHEEL_WORKER';
      throw err;
    }
    prepareThread();
    const hooked = hooks.error === undefined;
    const cs = createScratch;
    cs.u32.fill(0);
    cs.u32[0] = cfg.size;
    cs.u32[1] = cfg.shards;
    cs.u32[2] = cfg.workers;
    cs.u32[3] = cfg.flags;
    put64(cs.u32, 4, cfg.resolution_ns);
    put64(cs.u32, 6, cfg.max_timers);
    cs.ptr[0] = 0n;
    let rc = l.tw_runtime_create(cs.cfg, cs.out);
    if (rc !== TW_OK) throw cError(rc, 'tw_runtime_create');
    const out = [cs.ptr[0]];
    // The end of this thread's environment -- a Worker's end, terminate()
    // included -- frees the runtime in native code (and the queue, below:
    // hooks run last-registered first). Registered right after the create,
    // with no JavaScript function call in between: V8 stops a terminated
    // thread's JavaScript at a function entry or a loop, never inside or
    // between these native calls. close() removes them (see _finish).
    this._hookRt = hooked && hooks.add(hooks.env, l.destroyAddr.runtime, out[0]) === 0;
    this._hookQueue = false;
    this._ptr = out[0];
    this._live = 0; // timers started and not yet released
    this._refedLive = 0; // how many of them are ref'd (Timer.ref(), the default)
    this._exiting = false; // closed by the end of the event loop or process.exit(), not by close()
    this._byId = null; // id (BigInt) -> Timer, made by the first call given an id (see _byIdMap)
    this._groups = new Map(); // group (BigInt, not 0) -> Set of Timer, live timers started with it
    this._unrefQueued = false; // a deferred unref of the poll handle is queued (see _syncRef)
    this._info = Buffer.alloc(INFO_SIZE); // tw_timer_info, read by offset
    this._closed = false;
    this._closePromise = null;
    this._settle = null; // { resolve, reject } of _closePromise
    this._finalStats = null;
    this._refed = true;
    this._queue = null; // the tw_queue every timer of this runtime is started on
    this._poll = null; // the net.Socket reading the queue's eventfd (see queueSocket)
    this._pollRefed = false;
    this._turns = 0; // setImmediate turns scheduled to run a due callback, not yet taken
    this._inRun = 0; // > 0 while tw_queue_run() runs on this runtime's queue
    this._qbuf = Buffer.alloc(QUEUE_STATS_SIZE); // tw_queue_stats, read by offset
    this._manual = manual;
    this._advanceErrors = null; // callback errors of the advance() in progress (no 'error' listener)

    cs.ptr[0] = 0n;
    rc = l.tw_queue_create(this._ptr, cs.out);
    const qout = [cs.ptr[0]];
    if (rc === TW_OK) {
      this._hookQueue = this._hookRt && hooks.add(hooks.env, l.destroyAddr.queue, qout[0]) === 0;
      this._queue = qout[0];
    }
    if (rc === TW_OK && !isMainThread && !(this._hookRt && this._hookQueue)) {
      this._destroyNative();
      throw new Error('tickwheel: napi_add_env_cleanup_hook failed: a Runtime on this worker thread could not ' +
        'be made to close when the Worker ends');
    }
    if (rc === TW_OK && manual) {
      // A manual runtime's timers are not bound to the queue (the C library
      // runs them inside advance() on this thread); it is kept for stats().
    } else if (rc === TW_OK) {
      try {
        this._poll = queueSocket(l.tw_queue_fd(this._queue));
      } catch (err) {
        this._poll = null;
        this._destroyNative();
        throw err;
      }
      this._poll.on('data', () => this._onReadable());
      this._poll.on('error', (err) => process.emitWarning(err)); // not expected: an eventfd read fails only with EAGAIN
    }
    if (rc !== TW_OK) {
      const err = cError(rc, 'tw_queue_create'); // its detail, before the calls below
      this._destroyNative();
      throw err;
    }
    if (this._poll !== null) this._poll.unref(); // ref'd while live timers are (see _syncRef)
    // The template of this runtime's specs (see _prepareSpec): the
    // trampoline, the queue (none on a manual runtime), no release hook.
    this._fireAddr = fireAddress;
    this._queueAddr = manual ? 0n : this._queue;
    this._runTurn = () => this._turn();
    this._unrefLater = () => {
      this._unrefQueued = false;
      this._syncRef(true);
    };
    openRuntimes.add(this);
    if (!exitHookInstalled) {
      process.on('beforeExit', onBeforeExit);
      process.on('exit', onProcessExit);
      exitHookInstalled = true;
    }
  }

  /** True once close() was called (or the process is exiting). */
  get closed() {
    return this._closed;
  }

  /** Timers started and not yet released. */
  get liveTimers() {
    return this._live;
  }

  // The queue's eventfd was read (the socket's 'data'): callbacks are due.
  // Each runs in its own setImmediate() turn (Node drains
  // process.nextTick() and the microtask queue between immediates, as it
  // does between setTimeout callbacks). The turns run in this loop
  // iteration's check phase. The read took the eventfd's count: the
  // library writes it again for each batch it delivers, and when the last
  // turn is taken the queue's due count says whether more are waiting
  // (delivered while turns were pending: their 'data' came then).
  _onReadable() {
    if (this._turns === 0 && !this._closed) this._scheduleTurns(this._queueDue());
  }

  // Callbacks due on the queue now (0 if it cannot say).
  _queueDue() {
    if (this._queueStatsRaw() !== TW_OK) return 0;
    return Number(this._qbuf.readBigUInt64LE(QUEUE_DUE_OFFSET));
  }

  _scheduleTurns(due) {
    const n = Math.max(1, Math.min(due, MAX_BATCH));
    this._turns = n;
    for (let i = 0; i < n; i++) setImmediate(this._runTurn);
  }

  _turn() {
    this._turns--;
    if (this._closed) return;
    this._inRun++;
    try {
      lib.tw_queue_run(this._queue, 1, 0); // the earliest due callback, if any is still due
    } finally {
      this._inRun--;
    }
    // close() from inside that callback (or its error listener) left the
    // C side to us: the queue could not be destroyed from inside its run.
    if (this._closed) {
      if (this._inRun === 0 && this._ptr !== null && this._settle !== null) this._finishClose();
    } else if (this._turns === 0) {
      const due = this._queueDue();
      if (due > 0) this._scheduleTurns(due);
    }
  }

  /**
   * Starts a timer: fn(timer) runs once, ms milliseconds from now (rounded up
   * to the resolution), on the JavaScript thread. With options.period > 0 it
   * then runs every period ms (by options.policy: 'skip' (default) = fixed
   * rate, overrun periods are skipped and counted in query().missed;
   * 'delay' = each run one period after the end of the previous one;
   * 'burst' = fixed rate, overrun periods run back to back to catch up).
   * options.leeway (ms, default 0): the callback may run that much late
   * (never early), so that nearby timers share a wake-up. options.group (a
   * Number or BigInt, 0 = none): a tag for stopGroup(). options.clock:
   * 'monotonic' (default), 'boottime' (counts the time the machine was
   * suspended) or 'realtime' (the wall clock: the timer follows changes of
   * it); the delay, resetAt() and query().deadline are on it.
   * @returns {Timer}
   */
  start(ms, fn, options) {
    if (typeof ms !== 'number' || !(ms >= 0 && ms <= MAX_DELAY_MS)) throw badMs(ms, 'ms');
    if (options === undefined && typeof fn === 'function') return this._startPlain(ms, fn);
    const o = checkOptions(options, START_OPTIONS, 'start options');
    const period = o.period === undefined ? 0 : msToNs(o.period, 'period');
    return this._start(msToNs(ms, 'ms'), period, fn, o);
  }

  /**
   * Starts a periodic timer: fn(timer) runs every period ms, the first time
   * after options.delay ms (default: period). period must be > 0. The
   * options policy, leeway, group and clock are those of start().
   * @returns {Timer}
   */
  startPeriodic(period, fn, options) {
    const p = msToNs(period, 'period');
    if (p === 0) throw invalid(RangeError, `period is ${period} ms: it must be above 0`);
    const o = checkOptions(options, PERIODIC_OPTIONS, 'startPeriodic options');
    const delay = o.delay === undefined ? p : msToNs(o.delay, 'delay');
    return this._start(delay, p, fn, o);
  }

  // The spec scratch holds this runtime's template: the trampoline, the
  // queue (none on a manual runtime), no release hook, zero options.
  _prepareSpec() {
    const sc = specScratch;
    sc.u32.fill(0);
    sc.u32[0] = SPEC_SIZE;
    sc.i32[W.shard] = -1;
    put64(sc.u32, W.callback, this._fireAddr);
    put64(sc.u32, W.queue, this._queueAddr);
    sc.owner = this;
    sc.dirty = false;
  }

  // start(ms, fn) without options: the per-call path kept short (no option
  // object, no BigInt; the spec template's other fields stay as they are).
  _startPlain(ms, fn) {
    if (this._closed) throw new TickwheelError(TW_ESHUTDOWN, 'start');
    const sc = specScratch;
    if (sc.owner !== this || sc.dirty) this._prepareSpec();
    const u = sc.u32;
    const ns = Math.ceil(ms * 1e6);
    if (ns < TWO32) {
      u[W_DELAY] = ns;
      u[W_DELAY + 1] = 0;
    } else {
      put64(u, W_DELAY, ns > MAX_DELAY_NS_NUM ? MAX_DELAY_NS_NUM : ns);
    }
    const key = takeKey();
    put64(u, W_ARG, key);
    const rc = lib.tw_timer_start_ex(this._ptr, sc.mem, sc.idMem);
    if (rc !== TW_OK) {
      dropKey(key);
      throw cError(rc, 'start');
    }
    const t = new Timer(this, key, fn, false, 0, 0);
    t._lo = sc.id[0];
    t._hi = sc.id[1];
    this._adopt(t);
    return t;
  }

  _start(delayNs, periodNs, fn, o) {
    if (typeof fn !== 'function') throw invalid(TypeError, `fn must be a function, got ${describe(fn)}`);
    const s = o.shard === undefined ? -1 : checkInteger(o.shard, 'shard', -1, 0x7fffffff);
    const policy = o.policy === undefined ? 0 : policyCode(o.policy);
    const leeway = o.leeway === undefined ? 0 : msToNs(o.leeway, 'leeway');
    const group = o.group === undefined ? 0 : groupOrZero(o.group);
    const clock = o.clock === undefined ? 0 : clockCode(o.clock);
    if ((policy !== 0 || leeway !== 0 || group !== 0) && !lib.hasModel) requireModel('policy, leeway and group');
    if (clock !== 0 && !lib.hasClocks) requireClocks('the clock option');
    if (this._closed) throw new TickwheelError(TW_ESHUTDOWN, 'start');
    const sc = specScratch;
    if (sc.owner !== this || sc.dirty) this._prepareSpec();
    const u = sc.u32;
    sc.i32[W.shard] = s;
    put64(u, W_DELAY, delayNs);
    put64(u, W.period_ns, periodNs);
    u[W.period_policy] = policy;
    put64(u, W.leeway_ns, leeway);
    put64(u, W.group, group);
    sc.i32[W.clock] = clock;
    sc.dirty = s !== -1 || periodNs !== 0 || policy !== 0 || leeway !== 0 || group !== 0 || clock !== 0;
    const key = takeKey();
    put64(u, W_ARG, key);
    const rc = lib.tw_timer_start_ex(this._ptr, sc.mem, sc.idMem);
    if (rc !== TW_OK) {
      dropKey(key);
      throw cError(rc, 'start');
    }
    const t = new Timer(this, key, fn, periodNs > 0, clock, group);
    t._lo = sc.id[0];
    t._hi = sc.id[1];
    this._adopt(t);
    return t;
  }

  // A timer the library started: live until the library releases it.
  _adopt(t) {
    t._live = true;
    slots[t._key >>> 0] = t;
    this._live++;
    if (this._byId !== null) this._byId.set(t.id, t);
    if (t._group !== 0) {
      let set = this._groups.get(t._group);
      if (set === undefined) this._groups.set(t._group, (set = new Set()));
      set.add(t);
    }
    if (++this._refedLive === 1) this._syncRef();
  }

  // The library released t (see the rules at the top): forget it.
  _release(t) {
    if (!t._live) return;
    t._live = false;
    dropKey(t._key);
    this._live--;
    if (this._byId !== null && this._byId.get(t.id) === t) this._byId.delete(t.id);
    if (t._group !== 0) {
      const set = this._groups.get(t._group);
      if (set !== undefined && set.delete(t) && set.size === 0) this._groups.delete(t._group);
    }
    if (t._refed && --this._refedLive === 0) this._syncRef();
    if (t._onRelease !== null) {
      const f = t._onRelease; // the promise API's: settles its promise if the timer never fired
      t._onRelease = null;
      f(t);
    }
  }

  // What a stop returned for live timer t (already marked cancelled):
  // TW_OK released it, now or when its run in progress ends.
  _stopped(t, rc) {
    if (rc === TW_OK || (rc === TW_ENOENT && !t._running)) {
      // (TW_ENOENT for a timer that is not running: it was not pending in
      // the library any more, whatever this binding believed.)
      if (t._running) t._releaseAfterRun = true;
      else this._release(t);
    }
  }

  /**
   * Starts one timer per delay of `delays` (milliseconds, as start()'s ms)
   * with one call into the library (tw_timer_start_n), each as start()
   * would: `fn` is every timer's function, or an array of functions, one per
   * delay; the options (those of start()) apply to all. Returns an array
   * with, for each delay, its Timer -- or null where the library could not
   * start that one (maxTimers reached, out of memory). Delays count from one
   * clock reading taken as the call begins (never early). Bad arguments
   * throw as start() does, before anything starts. Needs library 1.4.
   * @returns {Array<Timer|null>}
   */
  startMany(delays, fn, options) {
    requireBatch('startMany()');
    if (!Array.isArray(delays)) throw invalid(TypeError, `delays must be an Array of milliseconds, got ${describe(delays)}`);
    const n = delays.length;
    const fns = typeof fn === 'function' ? null : fn;
    if (fns !== null) {
      if (!Array.isArray(fns) || fns.length !== n || !fns.every((f) => typeof f === 'function')) {
        throw invalid(TypeError, `fn must be a function, or an Array of ${n} functions`);
      }
    }
    const ns = delays.map((ms, i) => msToNs(ms, `delays[${i}]`));
    const o = checkOptions(options, START_OPTIONS, 'startMany options');
    const periodNs = o.period === undefined ? 0 : msToNs(o.period, 'period');
    const s = o.shard === undefined ? -1 : checkInteger(o.shard, 'shard', -1, 0x7fffffff);
    const policy = o.policy === undefined ? 0 : policyCode(o.policy);
    const leeway = o.leeway === undefined ? 0 : msToNs(o.leeway, 'leeway');
    const group = o.group === undefined ? 0 : groupOrZero(o.group);
    const clock = o.clock === undefined ? 0 : clockCode(o.clock);
    if (this._closed) throw new TickwheelError(TW_ESHUTDOWN, 'startMany');
    if (n === 0) return [];
    // One spec per delay: this runtime's template, then its own fields.
    const words = SPEC_SIZE / 4;
    const u = new Uint32Array(n * words);
    const i32 = new Int32Array(u.buffer);
    const keys = new Array(n);
    for (let i = 0; i < n; i++) {
      const w = i * words;
      u[w] = SPEC_SIZE;
      i32[w + W.shard] = s;
      put64(u, w + W.callback, this._fireAddr);
      put64(u, w + W.queue, this._queueAddr);
      put64(u, w + W_DELAY, ns[i]);
      put64(u, w + W.period_ns, periodNs);
      u[w + W.period_policy] = policy;
      put64(u, w + W.leeway_ns, leeway);
      put64(u, w + W.group, group);
      i32[w + W.clock] = clock;
      keys[i] = takeKey();
      put64(u, w + W_ARG, keys[i]);
    }
    const out = new Uint32Array(2 * n);
    const rc = lib.tw_timer_start_n(this._ptr, u, n, out);
    const started = new Array(n);
    for (let i = 0; i < n; i++) {
      const lo = out[2 * i];
      const hi = out[2 * i + 1];
      if (rc < 0 || (lo === 0 && hi === 0)) {
        dropKey(keys[i]);
        started[i] = null; // not started: the library already released it (or never took it)
        continue;
      }
      const t = new Timer(this, keys[i], fns === null ? fn : fns[i], periodNs > 0, clock, group);
      t._lo = lo;
      t._hi = hi;
      this._adopt(t);
      started[i] = t;
    }
    if (rc < 0) throw cError(rc, 'startMany');
    return started;
  }

  /** The Timers of `timers` (an Array of Timers or ids: BigInts, or
   *  Numbers that are safe integers), null for an unknown id. */
  _batchOf(timers, what) {
    if (!Array.isArray(timers)) throw invalid(TypeError, `${what}: expected an Array of Timers or ids`);
    return timers.map((t) => this._lookup(t, what));
  }

  // Calls call(ids, n, results) with the ids of the pending ones of `ts`;
  // returns { out: booleans per element (TW_OK), live: their indices, codes }.
  _batchCall(what, ts, call) {
    const live = [];
    for (let i = 0; i < ts.length; i++) {
      const t = ts[i];
      if (!this._closed && t !== null && t._live && !t._cancelled && !t._ran) live.push(i);
    }
    const out = new Array(ts.length).fill(false);
    if (live.length === 0) return { out, live, codes: null };
    const ids = new Uint32Array(2 * live.length);
    for (let k = 0; k < live.length; k++) {
      ids[2 * k] = ts[live[k]]._lo;
      ids[2 * k + 1] = ts[live[k]]._hi;
    }
    const codes = new Int32Array(live.length);
    const rc = call(ids, live.length, codes, live);
    if (rc < 0) throw cError(rc, what);
    for (let k = 0; k < live.length; k++) {
      const r = codes[k];
      if (r === TW_OK) out[live[k]] = true;
      else if (r !== TW_ENOENT) throw new TickwheelError(r, what);
    }
    return { out, live, codes };
  }

  /**
   * Stops every timer of `timers` (an Array of Timers or ids), as
   * stop() on each, in order, with one call into the library
   * (tw_timer_stop_n): returns an Array of booleans, true where that stop
   * prevented a run. Never blocks. Needs library 1.4.
   * @returns {boolean[]}
   */
  stopMany(timers) {
    requireBatch('stopMany()');
    const ts = this._batchOf(timers, 'stopMany');
    const { out, live, codes } = this._batchCall('stopMany', ts, (ids, n, results, pending) => {
      // As stop(): no run is delivered to JavaScript any more. A repeated
      // timer is passed once more: the library answers TW_ENOENT for it.
      for (const i of pending) ts[i]._cancelled = true;
      return lib.tw_timer_stop_n(this._ptr, ids, n, results);
    });
    if (codes !== null) for (let k = 0; k < live.length; k++) this._stopped(ts[live[k]], codes[k]);
    return out;
  }

  /**
   * Re-arms every timer of `timers` (an Array of Timers or ids) to
   * fire ms from now, as reset() on each, in order, with one call into the
   * library (tw_timer_reset_n); "now" is one clock reading taken as the call
   * begins (never early). Returns an Array of booleans, false where the
   * timer was not pending. Needs library 1.4.
   * @returns {boolean[]}
   */
  resetMany(timers, ms) {
    requireBatch('resetMany()');
    const ns = msToNs(ms, 'ms');
    const ts = this._batchOf(timers, 'resetMany');
    const { out, live } = this._batchCall('resetMany', ts, (ids, n, results) =>
      lib.tw_timer_reset_n(this._ptr, ids, n, ns, results));
    for (const i of live) if (out[i] && ts[i]._running) ts[i]._rearmed = true; // a one-shot stays alive past this run
    return out;
  }

  // id (BigInt) -> Timer of this runtime's live timers: made on the first
  // call given an id rather than a Timer, then kept (a start costs a BigInt
  // and a Map entry more from then on).
  _byIdMap() {
    if (this._byId === null) {
      this._byId = new Map();
      for (const t of slots) if (t !== undefined && t._rt === this) this._byId.set(t.id, t);
    }
    return this._byId;
  }

  _lookup(timer, what) {
    if (timer instanceof Timer) {
      if (timer._rt !== this) throw invalid(TypeError, `${what}: the timer belongs to another Runtime`);
      return timer;
    }
    if (typeof timer === 'bigint') return this._byIdMap().get(timer) || null;
    if (typeof timer === 'number') return this._byIdMap().get(numberId(timer, what)) || null;
    throw invalid(TypeError, `${what}: expected a Timer or an id (a BigInt, or a Number that is a safe integer), ` +
      `got ${describe(timer)}`);
  }

  /**
   * Cancels a timer (a Timer or its id: a BigInt, or a Number that is a
   * safe integer). Never blocks. Returns true if this call prevented a
   * run: the callback of a one-shot timer will not run (also when it is due
   * and only waits for the event loop), a periodic timer will not run again. Returns false if it already ran (or is running
   * now, for a one-shot timer), was already stopped, is unknown, or the
   * runtime is closed. When stop() returns, the callback will not start
   * again either way.
   */
  stop(timer) {
    let t;
    if (timer instanceof Timer && timer._rt === this) t = timer;
    else t = this._lookup(timer, 'stop');
    if (this._closed || t === null || !t._live || t._cancelled || t._ran) return false;
    t._cancelled = true; // no run is delivered to JavaScript any more
    const rc = lib.tw_timer_stop(this._ptr, t._hi < 0x200000 ? t._hi * TWO32 + t._lo : t.id);
    if (rc === TW_OK) {
      // Released in this call, or when the run in progress (its own) ends.
      if (t._running) t._releaseAfterRun = true;
      else this._release(t);
      return true;
    }
    if (rc === TW_ENOENT) {
      // A one-shot timer stopped from its own callback (released when it returns).
      if (!t._running) this._release(t);
      return false;
    }
    throw cError(rc, 'stop');
  }

  /**
   * Re-arms a timer to fire ms from now (a periodic one: its next run then,
   * then every period). Returns true if re-armed, false if the timer is not
   * pending (ran, stopped, unknown, or the runtime is closed). A timer that
   * is due but has not run yet is pending; so is a one-shot timer inside its
   * own callback (it is re-armed, with the same id).
   */
  reset(timer, ms) {
    const ns = msToNs(ms, 'ms');
    const t = this._lookup(timer, 'reset');
    if (this._closed || t === null || !t._live || t._cancelled || t._ran) return false;
    const rc = lib.tw_timer_reset(this._ptr, t._cid(), ns);
    if (rc === TW_OK) {
      if (t._running) t._rearmed = true; // a one-shot timer stays alive past this run
      return true;
    }
    if (rc === TW_ENOENT) return false;
    throw cError(rc, 'reset');
  }

  /**
   * Re-arms a timer (a Timer or its id) to fire at the absolute
   * deadline deadlineNs: a BigInt of nanoseconds on the timer's clock,
   * rt.now(timer.clock) (for the default, 'monotonic', now() and
   * process.hrtime.bigint()), e.g. rt.now() + 50_000_000n; a past one fires
   * as soon as possible, never before it. A periodic timer then runs every
   * period from there. Returns true if re-armed, false if the timer is not
   * pending, as reset(). Throws TypeError (not a BigInt) or RangeError
   * (negative, above 2^63-1, or more than MAX_DELAY_MS ahead), code 'TW_EINVAL'.
   */
  resetAt(timer, deadlineNs) {
    if (typeof deadlineNs !== 'bigint') {
      throw invalid(TypeError, `deadlineNs must be a BigInt of nanoseconds on now()'s clock, got ${describe(deadlineNs)}`);
    }
    if (deadlineNs < 0n) throw invalid(RangeError, `deadlineNs is ${deadlineNs}n: it cannot be negative`);
    if (deadlineNs > INT64_MAX) {
      throw invalid(RangeError, `deadlineNs is ${deadlineNs}n: the largest is 2^63-1 (${INT64_MAX}n)`);
    }
    const t = this._lookup(timer, 'resetAt');
    requireModel('resetAt()');
    const clock = t === null ? 0 : t._clock;
    const ahead = deadlineNs - (this._ptr === null ? now() : this._clockNow(clock));
    if (ahead > TW_MAX_DELAY_NS) {
      const ms = Number(ahead) / 1e6;
      throw invalid(RangeError, `deadlineNs is ${deadlineNs}n, ${ms} ms (${yearsText(ms)}) ahead of the timer's ` +
        `clock: the longest is ${MAX_DELAY_MS} ms (about ${yearsText(MAX_DELAY_MS)})`);
    }
    if (this._closed || t === null || !t._live || t._cancelled || t._ran) return false;
    const rc = lib.tw_timer_reset_at(this._ptr, t._cid(), deadlineNs);
    if (rc === TW_OK) {
      if (t._running) t._rearmed = true; // a one-shot timer stays alive past this run
      return true;
    }
    if (rc === TW_ENOENT) return false;
    throw cError(rc, 'resetAt');
  }

  /**
   * What the C runtime knows about a live timer (a Timer of this runtime or
   * an id, a BigInt or a safe-integer Number): an object { state, shard, deadline, remaining, period,
   * leeway, group, runs, missed } -- see TimerInfo in index.d.ts -- or null
   * once the timer is released (ran its last run, stopped, cancelled), for
   * an unknown id, or after close(). From inside its own callback a timer
   * is 'running', with runs and missed current. Never blocks.
   */
  query(timer) {
    let id;
    if (timer instanceof Timer) {
      if (timer._rt !== this) throw invalid(TypeError, 'query: the timer belongs to another Runtime');
      id = timer.id;
    } else if (typeof timer === 'bigint') {
      if (timer < 0n || timer > U64_MAX) throw invalid(RangeError, `query: a timer id is between 0n and 2^64-1, got ${timer}n`);
      id = timer;
    } else if (typeof timer === 'number') {
      id = numberId(timer, 'query');
    } else {
      throw invalid(TypeError, `query: expected a Timer or an id (a BigInt, or a Number that is a safe integer), ` +
        `got ${describe(timer)}`);
    }
    requireModel('query()');
    if (this._closed || this._ptr === null) return null;
    const b = this._info;
    b.fill(0);
    b.writeUInt32LE(INFO_SIZE, 0);
    const rc = lib.tw_timer_query(this._ptr, id, b);
    if (rc === TW_ENOENT) return null;
    if (rc !== TW_OK) throw cError(rc, 'query');
    const deadline = b.readBigUInt64LE(INFO_AT.deadline_ns);
    const state = b.readInt32LE(INFO_AT.state);
    const clock = timer instanceof Timer ? timer._clock : b.readInt32LE(INFO_AT.clock);
    return {
      state: TIMER_STATES.get(state) || 'pending', // the library reports only these three
      shard: b.readInt32LE(INFO_AT.shard),
      deadline: deadline === 0n ? null : deadline,
      remaining: deadline === 0n ? null : Math.max(0, Number(deadline - this._clockNow(clock)) / 1e6),
      period: Number(b.readBigUInt64LE(INFO_AT.period_ns)) / 1e6,
      leeway: Number(b.readBigUInt64LE(INFO_AT.leeway_ns)) / 1e6,
      group: groupValue(b.readBigUInt64LE(INFO_AT.group)),
      runs: Number(b.readBigUInt64LE(INFO_AT.runs)),
      missed: Number(b.readBigUInt64LE(INFO_AT.missed)),
      clock: CLOCK_NAMES[clock],
    };
  }

  // ---- clocks ------------------------------------------------------------------
  /**
   * The promise API on this runtime, like node:timers/promises:
   * `await rt.promises.setTimeout(ms, value, { signal, ref })` resolves with
   * value once ms have passed; `for await (const v of
   * rt.promises.setInterval(ms, value, { signal, ref }))` yields value every
   * ms. An AbortSignal that aborts rejects with an AbortError (code
   * 'ABORT_ERR', cause: the signal's reason) and stops the timer; an
   * already-aborted one rejects at once. ref: false lets the process exit
   * while the timer is pending (the promise then stays pending). close()
   * rejects a pending one with TickwheelError 'TW_ESHUTDOWN'. On a manual
   * runtime they fire inside advance().
   */
  get promises() {
    if (this._promises === undefined) this._promises = makePromises(() => this);
    return this._promises;
  }

  /** True for a runtime created with { manualClock: true }. */
  get manualClock() {
    return this._manual;
  }

  // The clock of C code `code` (BigInt ns): this runtime's (virtual when manual).
  _clockNow(code) {
    if (this._manual) return BigInt(lib.tw_runtime_now_ns(this._ptr, code));
    return code === 0 ? BigInt(lib.tw_now_ns()) : BigInt(lib.tw_now_ns_clock(code));
  }

  /**
   * The runtime's clock `clock` ('monotonic' (default), 'boottime' or
   * 'realtime') in nanoseconds, a BigInt: the machine's for a real runtime
   * (as now(clock)), the virtual one for a manual runtime. The way to
   * compute a deadline: timer.resetAt(rt.now(timer.clock) + 30_000_000_000n)
   * is 30 s from now on either kind of runtime. Throws
   * TickwheelError 'TW_ESHUTDOWN' after close(); RangeError/TypeError
   * (code 'TW_EINVAL') for an unknown clock.
   */
  now(clock) {
    const code = clock === undefined ? 0 : clockCode(clock);
    requireClocks('rt.now()');
    if (this._ptr === null) throw new TickwheelError(TW_ESHUTDOWN, 'now');
    return BigInt(lib.tw_runtime_now_ns(this._ptr, code));
  }

  /**
   * A manual runtime ({ manualClock: true }): moves its three clocks forward
   * by exactly ms milliseconds (fractions allowed, rounded up to the
   * nanosecond) and runs, synchronously on this thread before it returns,
   * every callback that falls due, in deadline order (deadlines rounded up
   * to the resolution; ties in start order), with the clocks stepped to
   * each deadline as it goes: rt.now() inside a callback reads its
   * deadline, and a timer that a callback starts (or re-arms) due inside
   * the window runs in this same call. A periodic timer crossed k times:
   * 'skip' runs once with missed += k - 1 (judged at the end of the
   * window), 'burst' k times, 'delay' as its runs fall. advance(0) runs
   * what is due now. Returns the number of callbacks run.
   *
   * A callback's exception goes to the 'error' listeners, if any; without
   * one, advance() throws it once the window is done (the other callbacks
   * still run; several: an AggregateError of them all).
   *
   * Throws TickwheelError 'TW_EINVAL' on a runtime without a manual clock,
   * 'TW_EDEADLK' from inside one of this runtime's callbacks (nothing
   * done), 'TW_ESHUTDOWN' after close(); RangeError/TypeError (code
   * 'TW_EINVAL') for a bad ms.
   * @returns {number}
   */
  advance(ms) {
    const ns = msToNs(ms, 'ms');
    requireClocks('advance()');
    if (this._closed || this._ptr === null) throw new TickwheelError(TW_ESHUTDOWN, 'advance');
    const outermost = this._advanceErrors === null;
    if (outermost) this._advanceErrors = [];
    let rc;
    this._inRun++;
    let detail = '';
    try {
      rc = lib.tw_runtime_advance(this._ptr, ns);
      if (rc < 0) detail = lastErrorDetail(); // before any other tw_* call
    } finally {
      this._inRun--;
    }
    const errors = this._advanceErrors;
    if (outermost) this._advanceErrors = null;
    // close() from inside one of those callbacks left the C side to us.
    if (this._closed && this._inRun === 0 && this._ptr !== null && this._settle !== null) this._finishClose();
    if (rc < 0) {
      if (rc === errorCodes.TW_EINVAL && !this._manual) {
        throw new TickwheelError(rc, 'advance (the Runtime has no manual clock: create it with { manualClock: true })', detail);
      }
      if (rc === errorCodes.TW_EDEADLK) {
        throw new TickwheelError(rc, "advance (called from inside one of this Runtime's callbacks)", detail);
      }
      throw new TickwheelError(rc, 'advance', detail);
    }
    if (outermost && errors.length === 1) throw errors[0];
    if (outermost && errors.length > 1) {
      throw new AggregateError(errors, `${errors.length} timer callbacks threw during advance()`);
    }
    return rc;
  }

  /**
   * Stops every live timer started with options.group === group (a Number
   * or BigInt, not 0), as stop() on each, and returns how many it stopped (a
   * one-shot timer running its callback now -- the caller itself -- is not
   * counted; a periodic one is). Due timers whose callbacks wait for the
   * event loop are stopped too: none of the group's callbacks starts after
   * this returns. options.sync (boolean) is accepted for parity with the
   * other bindings and changes nothing: every callback of this runtime runs
   * on this thread, so when stopGroup() returns no callback of the group is
   * running (except the caller's own, when called from one) and every
   * stopped timer is already released -- what sync would wait for. The
   * binding never makes the C library wait (the event loop is never
   * blocked). Returns 0 after close().
   */
  stopGroup(group, options) {
    const g = groupId(group, false);
    const o = checkOptions(options, ['sync'], 'stopGroup options');
    if (o.sync !== undefined && typeof o.sync !== 'boolean') {
      throw invalid(TypeError, `sync must be a boolean, got ${describe(o.sync)}`);
    }
    requireModel('stopGroup()');
    if (this._closed) return 0;
    // No run of the group is delivered to JavaScript any more. (Only the
    // callback in progress, if it is of the group, is still running: a
    // one-shot one is on its last run anyway.)
    const set = this._groups.get(g);
    const members = set === undefined ? [] : [...set];
    for (const t of members) t._cancelled = true;
    const n = lib.tw_group_stop(this._ptr, g, 0);
    if (n < 0) throw cError(Number(n), 'stopGroup');
    // What the library released: every member not running, now; a running
    // periodic one when its run ends. A running one-shot is on its last run
    // (released when it returns) -- unless it re-armed itself in this run:
    // the library stopped that re-arm or left it (its query says which).
    for (const t of members) {
      if (!t._running) this._release(t);
      else if (t.periodic) t._releaseAfterRun = true;
      else if (t._rearmed) {
        if (this._deadlineOf(t) !== 0n) t._cancelled = false;
        else t._releaseAfterRun = true;
      }
    }
    return Number(n);
  }

  // The next deadline the library has for live timer t (0n: none).
  _deadlineOf(t) {
    const b = this._info;
    b.fill(0);
    b.writeUInt32LE(INFO_SIZE, 0);
    if (lib.tw_timer_query(this._ptr, t._cid(), b) !== TW_OK) return 0n;
    return b.readBigUInt64LE(INFO_AT.deadline_ns);
  }

  _rawStats() {
    const b = Buffer.alloc(STATS_SIZE);
    b.writeUInt32LE(STATS_SIZE, 0);
    const rc = lib.tw_runtime_stats(this._ptr, b);
    if (rc !== TW_OK) throw cError(rc, 'stats');
    const st = {};
    for (const [k, type] of Object.entries(STAT_FIELDS)) {
      st[k] = type === 'uint32_t' ? b.readUInt32LE(STATS_AT[k]) : b.readBigUInt64LE(STATS_AT[k]);
    }
    return st;
  }

  _queueStatsRaw() {
    this._qbuf.writeUInt32LE(QUEUE_STATS_SIZE, 0);
    return lib.tw_queue_get_stats(this._queue, this._qbuf);
  }

  _snapshot() {
    const s = this._rawStats();
    const rc = this._queueStatsRaw();
    if (rc !== TW_OK) throw cError(rc, 'stats');
    const n = (v) => Number(v);
    return {
      shards: s.shards,
      workers: s.workers,
      shutDown: s.shut_down !== 0,
      resolutionNs: n(s.resolution_ns),
      pending: n(s.pending),
      inbox: n(s.inbox),
      live: n(s.live),
      started: n(s.started),
      fired: n(s.fired),
      stopped: n(s.stopped),
      reset: n(s.reset),
      callbackExceptions: n(s.callback_exceptions),
      cancelledAtShutdown: n(s.cancelled_at_shutdown),
      latenessP50Ns: n(s.lateness_p50_ns),
      latenessP99Ns: n(s.lateness_p99_ns),
      latenessP999Ns: n(s.lateness_p999_ns),
      latenessMaxNs: n(s.lateness_max_ns),
      latenessSamples: n(s.lateness_samples),
      driverLatenessP50Ns: n(s.driver_lateness_p50_ns),
      driverLatenessP99Ns: n(s.driver_lateness_p99_ns),
      driverLatenessP999Ns: n(s.driver_lateness_p999_ns),
      driverLatenessMaxNs: n(s.driver_lateness_max_ns),
      waitLatenessP50Ns: n(s.wait_lateness_p50_ns),
      waitLatenessP99Ns: n(s.wait_lateness_p99_ns),
      waitLatenessP999Ns: n(s.wait_lateness_p999_ns),
      waitLatenessMaxNs: n(s.wait_lateness_max_ns),
      runDurationP50Ns: n(s.run_duration_p50_ns),
      runDurationP99Ns: n(s.run_duration_p99_ns),
      runDurationP999Ns: n(s.run_duration_p999_ns),
      runDurationMaxNs: n(s.run_duration_max_ns),
      runDurationSamples: n(s.run_duration_samples),
      workersBusy: n(s.workers_busy),
      waitingForWorker: n(s.waiting_for_worker),
      callbacksRunning: n(s.callbacks_running),
      oldestRunAgeNs: n(s.oldest_run_age_ns),
      slots: n(s.slots),
      residentBytes: n(s.resident_bytes),
      queue: queueStatsFrom(this._qbuf),
    };
  }

  /**
   * A snapshot of the runtime's counters (totals since creation), with those
   * of its delivery queue in `queue`. After close() has finished: the final
   * counters.
   */
  stats() {
    if (this._finalStats !== null) return { ...this._finalStats, queue: { ...this._finalStats.queue } };
    if (this._ptr === null) throw new TickwheelError(TW_ESHUTDOWN, 'stats');
    return this._snapshot();
  }

  /** Makes live timers keep the process alive (the default). Returns this. */
  ref() {
    this._refed = true;
    this._syncRef(true);
    return this;
  }

  /** Lets the process exit even with live timers (they are cancelled at
   *  exit). Returns this. */
  unref() {
    this._refed = false;
    this._syncRef(true);
    return this;
  }

  /** True if live timers keep the process alive. */
  hasRef() {
    return this._refed;
  }

  // The poll handle keeps the event loop alive iff live timers should. It
  // is ref'd at once; an unref is deferred to a process.nextTick() (unless
  // `now`), so that a start and stop in a loop do not ref and unref it (two
  // native calls) every time: the event loop cannot end before the tick.
  _syncRef(now) {
    if (this._poll === null) return;
    const keep = this._refed && this._refedLive > 0;
    if (keep === this._pollRefed) return;
    if (keep) {
      this._pollRefed = true;
      this._poll.ref();
    } else if (now === true) {
      this._pollRefed = false;
      this._poll.unref();
    } else if (!this._unrefQueued) {
      this._unrefQueued = true;
      process.nextTick(this._unrefLater);
    }
  }

  // Timer.ref()/unref(): whether this timer keeps the process alive.
  _setTimerRef(t, refed) {
    if (t._refed === refed) return;
    t._refed = refed;
    if (t._live) {
      this._refedLive += refed ? 1 : -1;
      this._syncRef();
    }
  }

  _callbackError(err, timer) {
    // Counted with the C++ exceptions the runtime catches (library 1.6).
    const count = lib.tw_runtime_count_callback_exception;
    if (count !== null && this._ptr !== null) count(this._ptr);
    if (this._advanceErrors !== null && this.listenerCount('error') === 0) {
      this._advanceErrors.push(err); // thrown by advance() once its window is done
      return;
    }
    if (this.listenerCount('error') > 0) {
      try {
        this.emit('error', err, timer);
      } catch (err2) {
        process.nextTick(() => { throw err2; });
      }
    } else {
      process.nextTick(() => { throw err; });
    }
  }

  // This runtime's live timers.
  _liveTimers() {
    return slots.filter((t) => t !== undefined && t._rt === this);
  }

  // Cancels every timer this runtime knows; each is released inside its
  // stop call, except one whose run is in progress (a callback that called
  // close()): released when it returns.
  _stopAll() {
    for (const t of this._liveTimers()) {
      t._cancelled = true;
      this._stopped(t, lib.tw_timer_stop(this._ptr, t._cid()));
    }
  }

  // Frees the queue, then the runtime (never from inside a run of the
  // queue), each right after its environment cleanup hook is removed (see
  // the constructor): no JavaScript function call in between, so a
  // terminate() cannot leave an object without its hook. Returns the two
  // codes.
  _destroyNow() {
    const h = envHooks;
    if (this._hookQueue) h.remove(h.env, lib.destroyAddr.queue, this._queue);
    const rcQueue = this._queue === null ? TW_OK : lib.tw_queue_destroy(this._queue);
    this._hookQueue = false;
    this._queue = null;
    if (this._hookRt) h.remove(h.env, lib.destroyAddr.runtime, this._ptr);
    const rc = this._ptr === null ? TW_OK : lib.tw_runtime_destroy(this._ptr);
    this._hookRt = false;
    this._ptr = null;
    return [rcQueue, rc];
  }

  // Removes the environment cleanup hooks, leaving the C objects as they
  // are (see _closeForExit).
  _removeHooks() {
    const h = envHooks;
    if (this._hookQueue) h.remove(h.env, lib.destroyAddr.queue, this._queue);
    if (this._hookRt) h.remove(h.env, lib.destroyAddr.runtime, this._ptr);
    this._hookQueue = false;
    this._hookRt = false;
  }

  // Frees the C side (never from inside a run of the queue). Order: the poll
  // handle stops watching the fd; the shutdown cancels what is left; the
  // final counters; the queue (and its fd) and the runtime are freed.
  _finish() {
    if (this._poll !== null) {
      this._poll.destroy();
      this._poll = null;
    }
    const rcShutdown = this._ptr === null ? TW_OK : lib.tw_runtime_shutdown(this._ptr);
    for (const t of this._liveTimers()) this._release(t); // the shutdown released them
    try {
      this._finalStats = this._snapshot();
    } catch {
      this._finalStats = null;
    }
    const [rcQueue, rc] = this._destroyNow();
    openRuntimes.delete(this);
    if (rcShutdown !== TW_OK) throw new TickwheelError(rcShutdown, 'close');
    if (rcQueue !== TW_OK) throw new TickwheelError(rcQueue, 'tw_queue_destroy');
    if (rc !== TW_OK) throw new TickwheelError(rc, 'tw_runtime_destroy');
  }

  // The constructor failed half-way.
  _destroyNative() {
    this._closed = true;
    if (this._poll !== null) {
      this._poll.destroy();
      this._poll = null;
    }
    this._destroyNow();
  }

  _finishClose() {
    const { resolve, reject } = this._settle;
    try {
      this._finish();
    } catch (err) {
      reject(err);
      return;
    }
    resolve();
  }

  /**
   * Shuts the runtime down and frees it: pending timers are cancelled and
   * released (their callbacks never run, also those already due), no
   * callback starts after this call returns. Returns a Promise that
   * resolves when the C runtime is freed: at once, or, when called from
   * inside one of this runtime's callbacks, as soon as that callback has
   * returned. Idempotent: later calls return the same Promise. Never blocks
   * the JavaScript thread for more than the C shutdown (joining its
   * threads; no callback can be in flight on them).
   * @returns {Promise<void>}
   */
  close() {
    if (this._closePromise !== null) return this._closePromise;
    this._closed = true;
    this._closePromise = new Promise((resolve, reject) => {
      this._settle = { resolve, reject };
    });
    this._stopAll();
    if (this._inRun === 0) this._finishClose();
    // else: _turn() finishes once the callback in progress has returned.
    return this._closePromise;
  }

  // process 'exit': the event loop is gone, nothing may wait for it.
  _closeForExit() {
    if (this._ptr === null) return;
    this._closed = true;
    this._stopAll();
    if (this._inRun > 0) {
      // process.exit() from one of this runtime's callbacks: its queue
      // cannot be destroyed from inside its own run. Nothing is left to
      // fire; the runtime is left to the end of the process -- on the
      // main thread. On a Worker the stack unwinds before the Worker's
      // environment is torn down: the cleanup hooks free it then.
      if (this._poll !== null) {
        this._poll.destroy();
        this._poll = null;
      }
      if (isMainThread) this._removeHooks();
      return;
    }
    try { this._finish(); } catch { /* exiting anyway */ }
  }
}

// ---- the promise API (like node:timers/promises) --------------------------------
const PROMISE_OPTIONS = ['signal', 'ref'];

// The options of setTimeout()/setInterval(): { signal, ref }, checked.
function promiseOptions(options, what) {
  const o = checkOptions(options, PROMISE_OPTIONS, `${what} options`);
  const signal = o.signal;
  if (signal !== undefined && (signal === null || typeof signal !== 'object' || typeof signal.aborted !== 'boolean' ||
      typeof signal.addEventListener !== 'function' || typeof signal.removeEventListener !== 'function')) {
    throw invalid(TypeError, `${what}: options.signal must be an AbortSignal, got ${describe(signal)}`);
  }
  if (o.ref !== undefined && typeof o.ref !== 'boolean') {
    throw invalid(TypeError, `${what}: options.ref must be a boolean, got ${describe(o.ref)}`);
  }
  return { signal, ref: o.ref !== false };
}

const abortError = (signal) => new AbortError(undefined, { cause: signal.reason });

// The rejection of a promise whose timer was cancelled without firing: its
// runtime was closed (or, by its id, stopped).
function cancelledError(rt, what) {
  if (rt._closed) return new TickwheelError(TW_ESHUTDOWN, `${what} (the Runtime was closed before the timer fired)`);
  return new AbortError(`${what}: the timer was stopped before it fired`);
}

// setTimeout(ms, value, { signal, ref }) on runtime rt (a function: the
// runtime is obtained only once the arguments are checked).
function promiseTimeout(getRt, ms, value, options) {
  let rt;
  let o;
  try {
    msToNs(ms, 'ms');
    o = promiseOptions(options, 'setTimeout');
    if (o.signal !== undefined && o.signal.aborted) return Promise.reject(abortError(o.signal));
    rt = getRt();
  } catch (err) {
    return Promise.reject(err);
  }
  const { signal } = o;
  return new Promise((resolve, reject) => {
    let timer = null;
    let settled = false;
    const onAbort = () => {
      if (settled) return;
      settled = true;
      timer.stop(); // released in this call: no callback, no live timer left
      reject(abortError(signal));
    };
    const done = () => {
      settled = true;
      if (signal !== undefined) signal.removeEventListener('abort', onAbort);
    };
    try {
      timer = rt.start(ms, () => {
        done();
        resolve(value);
      });
    } catch (err) {
      reject(err);
      return;
    }
    timer._onRelease = () => {
      if (settled) return;
      done();
      // The end of the event loop or process.exit() cancelled it: like a
      // Node timer that did not fire then, the promise stays pending.
      if (!rt._exiting) reject(cancelledError(rt, 'setTimeout'));
    };
    if (!o.ref) timer.unref();
    if (signal !== undefined) signal.addEventListener('abort', onAbort, { once: true });
  });
}

// setInterval(ms, value, { signal, ref }): an async iterator yielding value
// every ms; runs the iteration did not take yet are counted and yielded one
// after the other (as node:timers/promises does).
async function* promiseInterval(getRt, ms, value, options) {
  const p = msToNs(ms, 'ms');
  if (p === 0n) throw invalid(RangeError, 'setInterval: ms must be > 0');
  const o = promiseOptions(options, 'setInterval');
  const { signal } = o;
  if (signal !== undefined && signal.aborted) throw abortError(signal);
  const rt = getRt();
  let notYielded = 0;
  let wake = null;
  let failure = null;
  const wakeUp = () => {
    if (wake !== null) {
      const w = wake;
      wake = null;
      w();
    }
  };
  const timer = rt.startPeriodic(ms, () => {
    notYielded++;
    wakeUp();
  });
  timer._onRelease = () => {
    if (!rt._exiting) failure = cancelledError(rt, 'setInterval');
    wakeUp();
  };
  if (!o.ref) timer.unref();
  if (signal !== undefined) signal.addEventListener('abort', wakeUp, { once: true });
  try {
    while (signal === undefined || !signal.aborted) {
      if (notYielded === 0) {
        if (failure !== null) throw failure;
        await new Promise((resolve) => { wake = resolve; });
        continue;
      }
      notYielded--;
      yield value;
    }
    throw abortError(signal);
  } finally {
    timer.stop();
    if (signal !== undefined) signal.removeEventListener('abort', wakeUp);
  }
}

/** The promise API bound to a runtime (rt.promises): see TimerPromises in index.d.ts. */
function makePromises(getRt) {
  const setTimeout = (ms, value, options) => promiseTimeout(getRt, ms, value, options);
  return Object.freeze({
    setTimeout,
    setInterval: (ms, value, options) => promiseInterval(getRt, ms, value, options),
    sleep: setTimeout, // the same function, by a name that does not hide the global setTimeout
  });
}

// The runtime of the module-level promise API (require('tickwheel/promises')):
// made on first use, one shard; made anew if it was closed (at the end of
// the event loop every open runtime is).
let defaultRt = null;
function defaultRuntime() {
  if (defaultRt === null || defaultRt._closed) defaultRt = new Runtime({ shards: 1 });
  return defaultRt;
}
const promises = makePromises(defaultRuntime);

// On a Worker, the one-time setup happens now, while the package loads:
// koffi's calls that define functions and types read JavaScript objects, and
// a worker.terminate() landing inside one aborts the process (koffi 3.3.4
// turns the failed Node-API call into a fatal error). After require() has
// returned, a Runtime's constructor and methods make only calls with
// numbers, pointers and buffers, which a terminate() cannot break. A
// failure here (no library found, ...) is reported by new Runtime().
if (!isMainThread) {
  try {
    load();
    prepareThread();
  } catch { /* thrown again, with its full message, by new Runtime() */ }
}

if (typeof Symbol.asyncDispose === 'symbol') {
  Runtime.prototype[Symbol.asyncDispose] = function asyncDispose() {
    return this.close();
  };
}

module.exports = {
  Runtime,
  Timer,
  TickwheelError,
  LibraryLoadError,
  AbortError,
  promises,
  errorCodes,
  periodPolicies,
  clocks,
  MAX_DELAY_MS,
  version,
  libraryPath,
  now,
  // for the tests; not part of the API
  _internal: { checkVersion, msToNs, load, liveTimers, rawPairs, PREBUILD_DIR, defaultRuntime: () => defaultRt },
};
