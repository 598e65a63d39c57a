// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
/**
 * tickwheel -- Node.js binding of the tickwheel timer runtime.
 *
 *     const { Runtime } = require('tickwheel');
 *     const rt = new Runtime({ workers: 2 });
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
 * Threading. The C library fires timers on its worker threads; koffi queues
 * each call to the JavaScript thread that created the Runtime (a thread-safe
 * function on that thread's event loop) and the worker waits until the
 * JavaScript callback has returned. So every callback runs on the JavaScript
 * thread, between other event-loop work, never concurrently with other
 * JavaScript; runs of one timer never overlap. A busy event loop delays
 * callbacks (as it delays setTimeout) and holds the runtime's workers while
 * they wait. One pair of koffi trampolines (fire, release) is registered for
 * the whole process; each timer is an integer key into a Map holding its
 * JavaScript function, dropped when the C library's release hook reports the
 * timer released: no koffi registration per timer.
 *
 * Because a worker that fires a timer waits for the JavaScript thread, the
 * binding never makes that thread wait for a worker: stop() and reset() do
 * not block, and close() shuts the C runtime down on a koffi worker thread
 * (returning a Promise) whenever a callback might be in flight.
 *
 * Errors. A failed call throws a TickwheelError (code 'TW_ESHUTDOWN',
 * 'TW_EAGAIN', ...); bad arguments throw TypeError or RangeError with code
 * 'TW_EINVAL'. An exception thrown by a timer callback is emitted as an
 * 'error' event on the Runtime (listener args: error, timer) when it has
 * listeners, else rethrown asynchronously as an uncaught exception (like an
 * exception in a setTimeout callback). Either way the runtime and the timer
 * go on (a periodic timer keeps running).
 *
 * Process lifetime. Like Node's timers, a Runtime keeps the process alive
 * while it has live timers (pending, or released but not yet reported);
 * rt.unref() stops that, rt.ref() restores it. A Runtime without live timers
 * never keeps the process alive, and a closing one keeps it alive until it
 * is freed. When the event loop runs out of work ('beforeExit') every
 * Runtime still open is closed: its pending timers are cancelled, no
 * callback runs. On process.exit() (or a fatal exception) the open runtimes
 * are cancelled the same way and freed unless a run is queued to the (now
 * gone) event loop; then they are left to the end of the process.
 *
 * The shared library is found through the TICKWHEEL_LIB environment
 * variable (a path; nothing else is tried when it is set), else
 * "libtickwheel.so.1" through the dynamic loader's search path, else in the
 * libdir that `pkg-config tickwheel` reports. Its major version must equal
 * this package's major version.
 */

const { EventEmitter } = require('node:events');
const childProcess = require('node:child_process');
const path = require('node:path');
const koffi = require('koffi');

const PACKAGE_VERSION = require('./package.json').version;
const PACKAGE_MAJOR = Number(PACKAGE_VERSION.split('.')[0]);
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
const { TW_OK, TW_EINVAL, TW_ENOENT, TW_ESHUTDOWN } = errorCodes;
const TW_PIN_SHARDS = 0x1;
const TW_MAX_DELAY_NS = 1n << 60n;
/** The longest delay or period accepted, in milliseconds (2^60 ns, about 36.5 years). */
const MAX_DELAY_MS = Number(TW_MAX_DELAY_NS) / 1e6;
const MAX_SHARDS = 256;
const MAX_WORKERS = 4096;

// ---- errors ------------------------------------------------------------------
/** A failed tickwheel call: `code` is the TW_* name, `errno` the (negative) C code. */
class TickwheelError extends Error {
  constructor(errno, what) {
    const code = CODE_NAMES.get(errno) || 'TW_EUNKNOWN';
    const text = lib ? lib.tw_strerror(errno) : code;
    super(what ? `${what}: ${text} (${code})` : `${text} (${code})`);
    this.name = 'TickwheelError';
    this.code = code;
    this.errno = errno;
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

/** Milliseconds (a finite number >= 0, at most MAX_DELAY_MS) to nanoseconds
 *  as a BigInt, rounded up (never early). */
function msToNs(ms, name) {
  if (typeof ms !== 'number') {
    throw invalid(TypeError, `${name} must be a number of milliseconds, got ${describe(ms)}`);
  }
  if (!Number.isFinite(ms) || ms < 0 || ms > MAX_DELAY_MS) {
    throw invalid(RangeError, `${name} must be between 0 and ${MAX_DELAY_MS} ms, got ${ms}`);
  }
  const ns = BigInt(Math.ceil(ms * 1e6));
  return ns > TW_MAX_DELAY_NS ? TW_MAX_DELAY_NS : ns;
}

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
// tw_callback(void *arg, tw_timer id) and tw_release(void *arg): the binding
// passes an integer key as arg, so it is declared uintptr_t (same ABI class).
const Callback = defineType('tw_callback', (n) => koffi.proto(n, 'void', ['uintptr_t', 'uint64_t']));
const Release = defineType('tw_release', (n) => koffi.proto(n, 'void', ['uintptr_t']));
const Spec = defineType('tw_timer_spec', (n) => koffi.struct(n, {
  size: 'uint32_t',
  shard: 'int32_t',
  deadline_ns: 'uint64_t',
  delay_ns: 'uint64_t',
  period_ns: 'uint64_t',
  callback: koffi.pointer(Callback),
  arg: 'uintptr_t',
  release: koffi.pointer(Release),
}));
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
};
const Stats = defineType('tw_stats', (n) => koffi.struct(n, STAT_FIELDS));

// ---- loading the library ------------------------------------------------------
let lib = null; // { path, tw_*: functions }

/** Throws unless the encoded version v (major << 16 | minor << 8 | patch) has
 *  this package's major version. */
function checkVersion(v, where) {
  const major = v >>> 16;
  const text = `${major}.${(v >>> 8) & 0xff}.${v & 0xff}`;
  if (major !== PACKAGE_MAJOR) {
    throw new Error(`${where} is tickwheel ${text}; this binding (tickwheel ${PACKAGE_VERSION}) needs ${PACKAGE_MAJOR}.x`);
  }
  return text;
}

function pkgConfigLibdir() {
  try {
    const out = childProcess.execFileSync('pkg-config', ['--variable=libdir', 'tickwheel'], {
      encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 10000,
    });
    return out.trim() || null;
  } catch {
    return null;
  }
}

function bind(handle, where) {
  const f = (name, ret, args) => handle.func(name, ret, args);
  const rtPtr = 'void *';
  const fns = {
    tw_version: f('tw_version', 'uint32_t', []),
    tw_runtime_create: f('tw_runtime_create', 'int', [koffi.pointer(Config), koffi.out(koffi.pointer(rtPtr))]),
    tw_runtime_shutdown: f('tw_runtime_shutdown', 'int', [rtPtr]),
    tw_runtime_destroy: f('tw_runtime_destroy', 'int', [rtPtr]),
    tw_timer_start_ex: f('tw_timer_start_ex', 'int', [rtPtr, koffi.pointer(Spec), koffi.out(koffi.pointer('uint64_t'))]),
    tw_timer_stop: f('tw_timer_stop', 'int', [rtPtr, 'uint64_t']),
    tw_timer_reset: f('tw_timer_reset', 'int', [rtPtr, 'uint64_t', 'uint64_t']),
    tw_runtime_stats: f('tw_runtime_stats', 'int', [rtPtr, koffi.inout(koffi.pointer(Stats))]),
    tw_now_ns: f('tw_now_ns', 'uint64_t', []),
    tw_strerror: f('tw_strerror', 'const char *', [ 'int' ]),
  };
  fns.path = where;
  fns.version = checkVersion(fns.tw_version(), where);
  return fns;
}

function candidates() {
  const env = process.env.TICKWHEEL_LIB;
  if (env) return [env];
  const list = [`libtickwheel.so.${ABI_VERSION}`];
  const libdir = pkgConfigLibdir();
  if (libdir) list.push(path.join(libdir, `libtickwheel.so.${ABI_VERSION}`));
  return list;
}

function raiseAsyncLimit() {
  // Each callback in flight holds one koffi "async call" slot while its
  // worker waits for the JavaScript thread (256 by default, 4096 at most).
  // Raise the limit to the C library's worker maximum; this is only possible
  // before koffi loads any library in this thread, so it may fail harmlessly.
  try {
    if (koffi.config().max_async_calls < MAX_WORKERS) koffi.config({ max_async_calls: MAX_WORKERS });
  } catch {
    // another koffi user loaded a library first: keep its limit
  }
}

/** Loads the library (once) and returns its bound functions. */
function load() {
  if (lib) return lib;
  raiseAsyncLimit();
  const tried = [];
  for (const where of candidates()) {
    let handle;
    try {
      handle = koffi.load(where);
    } catch (err) {
      tried.push(`${where}: ${err.message}`);
      continue;
    }
    try {
      lib = bind(handle, where);
      return lib;
    } catch (err) {
      tried.push(`${where}: ${err.message}`);
      try { handle.unload(); } catch { /* keep it mapped */ }
    }
  }
  const hint = process.env.TICKWHEEL_LIB ? '' : ' (set TICKWHEEL_LIB to its path)';
  throw new LibraryLoadError(`tickwheel: cannot load libtickwheel.so.${ABI_VERSION}${hint}:\n  ${tried.join('\n  ')}`, tried);
}

/** The loaded library's version, "major.minor.patch". */
function version() {
  return load().version;
}

/** The path (or loader name) the library was loaded from. */
function libraryPath() {
  return load().path;
}

/** The runtime's clock: CLOCK_MONOTONIC in nanoseconds (the clock of
 *  process.hrtime.bigint() on Linux). */
function now() {
  return BigInt(load().tw_now_ns());
}

// ---- the shared trampolines ------------------------------------------------------
// One registered pair for the whole process (registered on first use); the C
// arg of every timer is a key into `entries`.
const entries = new Map(); // key -> Entry
let nextKey = 1;
let trampolines = null;

function onFire(key) {
  const e = entries.get(key);
  if (e === undefined || e.cancelled || e.rt._closed) return;
  e.running = true;
  try {
    e.fn.call(e.timer, e.timer);
  } catch (err) {
    e.rt._callbackError(err, e.timer);
  } finally {
    e.running = false;
    if (!e.periodic) e.ran = true;
  }
}

function onRelease(key) {
  const e = entries.get(key);
  if (e === undefined) return;
  entries.delete(key);
  e.rt._released(e);
}

function getTrampolines() {
  if (trampolines === null) {
    // Exceptions never escape into koffi: both functions catch everything.
    const guard = (fn) => (...args) => {
      try { fn(...args); } catch (err) { process.nextTick(() => { throw err; }); }
    };
    trampolines = {
      fire: koffi.register(guard(onFire), koffi.pointer(Callback)),
      release: koffi.register(guard(onRelease), koffi.pointer(Release)),
    };
  }
  return trampolines;
}

// ---- open runtimes, the async-slot budget and process exit -------------------------
const openRuntimes = new Set();
let workersInUse = 0; // sum of tw_stats.workers of the open runtimes
let exitHookInstalled = false;

function asyncBudget() {
  // A few slots stay free for the koffi calls close() makes.
  return koffi.config().max_async_calls - 8;
}

// The event loop is about to end (nothing keeps it alive): close the open
// runtimes. A close() that has to wait for callbacks queued to the loop keeps
// it alive until they are drained (koffi must not find calls queued when the
// environment is torn down), then 'beforeExit' comes again with none open.
function onBeforeExit() {
  for (const rt of [...openRuntimes]) {
    if (rt._closePromise === null) rt.close().catch((err) => process.emitWarning(err));
  }
}

// process.exit() or a fatal exception: the loop is gone, nothing may wait for it.
function onProcessExit() {
  for (const rt of [...openRuntimes]) rt._closeForExit();
}

// ---- Timer ---------------------------------------------------------------------
/** A started timer. `id` is its current C id (a BigInt); one-shot timers
 *  re-armed by reset() from their own callback get a new id. */
class Timer {
  constructor(rt, periodic) {
    this._rt = rt;
    this._entry = null;
    this._lastId = 0n;
    /** True for a periodic timer. */
    this.periodic = periodic;
  }

  /** The C timer id (BigInt, never 0n). */
  get id() {
    return this._entry ? this._entry.id : this._lastId;
  }

  /** True until the timer has run its last run, was stopped or was released. */
  get active() {
    const e = this._entry;
    return e !== null && !e.cancelled && !e.ran && !this._rt._closed;
  }

  /** Same as runtime.stop(timer). */
  stop() {
    return this._rt.stop(this);
  }

  /** Same as runtime.reset(timer, ms). */
  reset(ms) {
    return this._rt.reset(this, ms);
  }
}

// ---- Runtime ---------------------------------------------------------------------
const RUNTIME_OPTIONS = ['shards', 'workers', 'resolution', 'maxTimers', 'pinShards'];
const START_OPTIONS = ['period', 'shard'];
const PERIODIC_OPTIONS = ['delay', 'shard'];

class Runtime extends EventEmitter {
  /**
   * @param {object} [options]
   * @param {number} [options.shards=0] timing wheels (one driver thread each); 0 = one per CPU; at most 256
   * @param {number} [options.workers=0] callback worker threads; 0 = one per CPU; at most 4096
   * @param {number} [options.resolution=1] the tick in milliseconds, 0.001 .. 1000 (0 = 1 ms)
   * @param {number|bigint} [options.maxTimers=0] live timers allowed at once; 0 = unlimited
   * @param {boolean} [options.pinShards=false] pin shard i's driver thread to CPU i
   */
  constructor(options) {
    super();
    const o = checkOptions(options, RUNTIME_OPTIONS, 'Runtime options');
    const cfg = { size: koffi.sizeof(Config), shards: 0, workers: 0, flags: 0, resolution_ns: 0, max_timers: 0 };
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

    const l = load();
    getTrampolines();
    const out = [null];
    const rc = l.tw_runtime_create(cfg, out);
    if (rc !== TW_OK) throw new TickwheelError(rc, 'tw_runtime_create');
    this._ptr = out[0];
    this._entries = new Map(); // key -> Entry, this runtime's live timers
    this._byId = new Map(); // id (BigInt) -> Entry
    this._closed = false;
    this._closePromise = null;
    this._finalStats = null;
    this._refed = true;
    this._keepAlive = setInterval(() => {}, 0x7fffffff);
    this._keepAlive.unref();

    const workers = this._rawStats().workers;
    if (workersInUse + workers > asyncBudget()) {
      l.tw_runtime_destroy(this._ptr);
      this._ptr = null;
      this._closed = true;
      clearInterval(this._keepAlive);
      throw invalid(RangeError, `workers: the open runtimes would have ${workersInUse + workers} callback workers, ` +
        `more than koffi's ${asyncBudget()} callbacks in flight (koffi.config().max_async_calls - 8)`);
    }
    this._workers = workers;
    workersInUse += workers;
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

  /** Timers started and not yet released (the C library's view may lag by
   *  the release notices queued to the event loop). */
  get liveTimers() {
    return this._entries.size;
  }

  /**
   * Starts a timer: fn(timer) runs once, ms milliseconds from now (rounded up
   * to the resolution), on the JavaScript thread. With options.period > 0 it
   * then runs every period ms (fixed rate; overrun periods are skipped).
   * @returns {Timer}
   */
  start(ms, fn, options) {
    const delay = msToNs(ms, 'ms');
    const o = checkOptions(options, START_OPTIONS, 'start options');
    const period = o.period === undefined ? 0n : msToNs(o.period, 'period');
    return this._start(delay, period, fn, o.shard, period > 0n);
  }

  /**
   * Starts a periodic timer: fn(timer) runs every period ms, the first time
   * after options.delay ms (default: period). period must be > 0.
   * @returns {Timer}
   */
  startPeriodic(period, fn, options) {
    const p = msToNs(period, 'period');
    if (p === 0n) throw invalid(RangeError, 'period must be > 0 ms');
    const o = checkOptions(options, PERIODIC_OPTIONS, 'startPeriodic options');
    const delay = o.delay === undefined ? p : msToNs(o.delay, 'delay');
    return this._start(delay, p, fn, o.shard, true);
  }

  _start(delayNs, periodNs, fn, shard, periodic) {
    if (typeof fn !== 'function') throw invalid(TypeError, `fn must be a function, got ${describe(fn)}`);
    const s = shard === undefined ? -1 : checkInteger(shard, 'shard', -1, 0x7fffffff);
    if (this._closed) throw new TickwheelError(TW_ESHUTDOWN, 'start');
    const timer = new Timer(this, periodic);
    this._arm(timer, fn, delayNs, periodNs, s);
    return timer;
  }

  // Starts a C timer for `timer` and makes it the timer's current entry.
  _arm(timer, fn, delayNs, periodNs, shard) {
    const key = nextKey++;
    const e = { key, id: 0n, rt: this, timer, fn, periodic: periodNs > 0n, shard, running: false, ran: false, cancelled: false };
    entries.set(key, e);
    this._entries.set(key, e);
    const t = getTrampolines();
    const spec = {
      size: koffi.sizeof(Spec), shard, deadline_ns: 0, delay_ns: delayNs, period_ns: periodNs,
      callback: t.fire, arg: key, release: t.release,
    };
    const out = [0];
    const rc = lib.tw_timer_start_ex(this._ptr, spec, out);
    if (rc !== TW_OK) {
      // EINVAL/EFORKED: the hook was not called; otherwise it already ran.
      entries.delete(key);
      this._entries.delete(key);
      throw new TickwheelError(rc, 'start');
    }
    e.id = BigInt(out[0]);
    this._byId.set(e.id, e);
    if (timer._entry !== null) timer._entry.moved = true;
    timer._entry = e;
    timer._lastId = e.id;
    this._syncRef();
    return e;
  }

  _lookup(timer, what) {
    if (timer instanceof Timer) {
      if (timer._rt !== this) throw invalid(TypeError, `${what}: the timer belongs to another Runtime`);
      return timer._entry;
    }
    if (typeof timer === 'bigint') return this._byId.get(timer) || null;
    throw invalid(TypeError, `${what}: expected a Timer or a BigInt id, got ${describe(timer)}`);
  }

  /**
   * Cancels a timer (a Timer or its BigInt id). Never blocks. Returns true if
   * this call prevented a run: the callback of a one-shot timer will not run,
   * a periodic timer will not run again. Returns false if it already ran (or
   * is running now, for a one-shot timer), was already stopped, is unknown, or
   * the runtime is closed. When stop() returns, the callback will not start
   * again either way.
   */
  stop(timer) {
    const e = this._lookup(timer, 'stop');
    if (this._closed || e === null || e.moved || e.cancelled || e.ran) return false;
    e.cancelled = true; // no run is delivered to JavaScript any more
    const rc = lib.tw_timer_stop(this._ptr, e.id);
    if (rc === TW_OK) return true;
    if (rc === TW_ENOENT) {
      // A one-shot timer whose run is queued to the event loop (the C run has
      // started, the JavaScript one not): cancelling it here prevents it.
      // Called from its own callback: it is running, nothing was prevented.
      return !e.periodic && !e.running;
    }
    throw new TickwheelError(rc, 'stop');
  }

  /**
   * Re-arms a timer to fire ms from now (a periodic one: its next run then,
   * then every period). Returns true if re-armed, false if the timer is not
   * pending (ran, stopped, unknown, or the runtime is closed). From a
   * one-shot timer's own callback (or while its run is queued) it re-arms it
   * as a new C timer: timer.id changes.
   */
  reset(timer, ms) {
    const ns = msToNs(ms, 'ms');
    const e = this._lookup(timer, 'reset');
    if (this._closed || e === null || e.moved || e.cancelled || e.ran) return false;
    const rc = lib.tw_timer_reset(this._ptr, e.id, ns);
    if (rc === TW_OK) return true;
    if (rc === TW_ENOENT && !e.periodic) {
      // Its C run has started: it is running now, or queued to the event loop.
      // Re-arm it as a new C timer (and drop the queued run, if any).
      e.cancelled = true;
      this._arm(e.timer, e.fn, ns, 0n, e.shard);
      return true;
    }
    if (rc === TW_ENOENT) return false;
    throw new TickwheelError(rc, 'reset');
  }

  _rawStats() {
    const st = { size: koffi.sizeof(Stats) };
    for (const k of Object.keys(STAT_FIELDS)) if (k !== 'size') st[k] = 0;
    const rc = lib.tw_runtime_stats(this._ptr, st);
    if (rc !== TW_OK) throw new TickwheelError(rc, 'stats');
    return st;
  }

  /**
   * A snapshot of the runtime's counters (totals since creation). After
   * close() has finished: the final counters.
   */
  stats() {
    if (this._finalStats !== null) return { ...this._finalStats };
    if (this._ptr === null) throw new TickwheelError(TW_ESHUTDOWN, 'stats');
    const s = this._rawStats();
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
    };
  }

  /** Makes live timers keep the process alive (the default). Returns this. */
  ref() {
    this._refed = true;
    this._syncRef();
    return this;
  }

  /** Lets the process exit even with live timers (they are cancelled at
   *  exit). Returns this. */
  unref() {
    this._refed = false;
    this._syncRef();
    return this;
  }

  /** True if live timers keep the process alive. */
  hasRef() {
    return this._refed;
  }

  _syncRef() {
    if (this._keepAlive === null) return;
    const keep = this._closePromise !== null || (this._refed && this._entries.size > 0);
    if (keep) this._keepAlive.ref();
    else this._keepAlive.unref();
  }

  _released(e) {
    this._entries.delete(e.key);
    if (this._byId.get(e.id) === e) this._byId.delete(e.id);
    if (e.timer._entry === e) e.timer._entry = null;
    this._syncRef();
  }

  _callbackError(err, timer) {
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

  // Cancels every timer this runtime knows; their release hooks run inside
  // the stop calls, except for runs in progress (queued to the event loop).
  _stopAll() {
    for (const e of [...this._entries.values()]) {
      e.cancelled = true;
      lib.tw_timer_stop(this._ptr, e.id);
    }
  }

  _finish() {
    try {
      this._finalStats = this.stats();
    } catch {
      this._finalStats = null;
    }
    const rc = lib.tw_runtime_destroy(this._ptr);
    this._ptr = null;
    openRuntimes.delete(this);
    workersInUse -= this._workers;
    if (this._keepAlive !== null) {
      clearInterval(this._keepAlive);
      this._keepAlive = null;
    }
    if (rc !== TW_OK) throw new TickwheelError(rc, 'tw_runtime_destroy');
  }

  /**
   * Shuts the runtime down and frees it: pending timers are cancelled and
   * released (their callbacks never run), no callback starts after this call
   * returns. Returns a Promise that resolves when the C runtime is freed.
   * Idempotent: later calls return the same Promise. Never blocks the
   * JavaScript thread on a worker: when a callback may be in flight (e.g.
   * close() is called from a callback) the C shutdown runs on a koffi worker
   * thread and the Promise resolves after it.
   * @returns {Promise<void>}
   */
  close() {
    if (this._closePromise !== null) return this._closePromise;
    this._closed = true;
    this._closePromise = new Promise((resolve, reject) => {
      this._stopAll();
      if (this._entries.size === 0) {
        // Nothing in flight: no worker waits for this thread.
        const rc = lib.tw_runtime_shutdown(this._ptr);
        try {
          this._finish();
        } catch (err) {
          reject(err);
          return;
        }
        if (rc !== TW_OK) reject(new TickwheelError(rc, 'close'));
        else resolve();
        return;
      }
      lib.tw_runtime_shutdown.async(this._ptr, (err, rc) => {
        try {
          this._finish();
        } catch (err2) {
          reject(err || err2);
          return;
        }
        if (err) reject(err);
        else if (rc !== TW_OK) reject(new TickwheelError(rc, 'close'));
        else resolve();
      });
    });
    this._syncRef();
    return this._closePromise;
  }

  // process 'exit': the event loop is gone, so nothing may wait for it.
  _closeForExit() {
    if (this._ptr === null) return;
    this._closed = true;
    this._stopAll();
    if (this._closePromise === null && this._entries.size === 0) {
      lib.tw_runtime_shutdown(this._ptr);
      try { this._finish(); } catch { /* exiting anyway */ }
    }
    // Otherwise a run is queued to the event loop that will never run it:
    // its worker waits until the process ends; nothing else fires.
  }
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
  errorCodes,
  MAX_DELAY_MS,
  version,
  libraryPath,
  now,
  // for the tests; not part of the API
  _internal: { checkVersion, msToNs, load, entries },
};
