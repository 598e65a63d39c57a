// SPDX-License-Identifier: MIT OR Apache-2.0
//! An example Rust binding of tickwheel's C API (`tickwheel/tickwheel.h`),
//! written with `extern "C"` declarations only -- no bindgen, no crates.
//!
//! ```no_run
//! use std::time::Duration;
//! let rt = tickwheel::Runtime::new().unwrap();
//! let id = rt.start(Duration::from_millis(10), Duration::ZERO, |id| println!("timer {id:?} fired")).unwrap();
//! rt.stop_sync(id).unwrap();
//! ```
//!
//! A closure is boxed and handed to the C library as the timer's `arg`; the
//! C release hook drops the box exactly once, when the runtime is done with
//! the timer (after the last run, when stopped, at shutdown, or inside a
//! start that fails with `SHUTDOWN`, `LIMIT` or `NO_MEMORY`). A start that
//! fails with `INVALID` or `FORKED` was rejected before the library took the
//! box: the binding drops it itself. Either way a failed `start` has dropped
//! the closure exactly once when it returns. Runs of one timer never overlap,
//! so an `FnMut` is fine; it runs on the runtime's worker threads, hence
//! `Send + 'static`.
//!
//! fork(): in a child process, every method of a `Runtime` created before
//! the fork returns `Err(Error::FORKED)`; none of its callbacks runs and none
//! of its closures is dropped there (the child's copies are leaked).
//! Dropping it in the child only frees the child's copy of the C runtime.
//! A `Runtime` created in the child is independent of the parent's and works
//! normally (tests/fork.rs).

use std::ffi::{c_void, CStr};
use std::fmt;
use std::os::raw::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

/// The raw C API, declared by hand from `tickwheel/tickwheel.h`.
#[allow(non_camel_case_types)]
pub mod ffi {
    use std::ffi::c_void;
    use std::os::raw::{c_char, c_int};

    /// Opaque.
    #[repr(C)]
    pub struct tw_runtime {
        _private: [u8; 0],
    }
    pub type tw_timer = u64;
    /// Opaque (since 1.2).
    #[repr(C)]
    pub struct tw_queue {
        _private: [u8; 0],
    }
    pub type tw_callback = Option<unsafe extern "C" fn(arg: *mut c_void, id: tw_timer)>;
    pub type tw_release = Option<unsafe extern "C" fn(arg: *mut c_void)>;

    pub const TW_OK: c_int = 0;
    pub const TW_EINVAL: c_int = -22;
    pub const TW_ENOMEM: c_int = -12;
    pub const TW_ENOENT: c_int = -2;
    pub const TW_EAGAIN: c_int = -11;
    pub const TW_ESHUTDOWN: c_int = -108;
    pub const TW_EDEADLK: c_int = -35;
    pub const TW_EFORKED: c_int = -1001;
    pub const TW_PIN_SHARDS: u32 = 0x1;
    pub const TW_MAX_DELAY_NS: u64 = 1 << 60;

    #[repr(C)]
    #[derive(Debug, Default, Clone, Copy)]
    pub struct tw_config {
        pub size: u32,
        pub shards: u32,
        pub workers: u32,
        pub flags: u32,
        pub resolution_ns: u64,
        pub max_timers: u64,
    }

    #[repr(C)]
    #[derive(Debug, Clone, Copy)]
    pub struct tw_timer_spec {
        pub size: u32,
        pub shard: i32,
        pub deadline_ns: u64,
        pub delay_ns: u64,
        pub period_ns: u64,
        pub callback: tw_callback,
        pub arg: *mut c_void,
        pub release: tw_release,
        /// Since 1.2 (`size` 64): NULL = the workers.
        pub queue: *mut tw_queue,
    }

    /// `tw_queue_stats` (since 1.2).
    #[repr(C)]
    #[derive(Debug, Default, Clone, Copy)]
    pub struct tw_queue_stats {
        pub size: u32,
        pub runners: u32,
        pub due: u64,
        pub delivered: u64,
        pub ran: u64,
        pub signal_p50_ns: u64,
        pub signal_p99_ns: u64,
        pub signal_p999_ns: u64,
        pub signal_max_ns: u64,
        pub signal_samples: u64,
        pub run_p50_ns: u64,
        pub run_p99_ns: u64,
        pub run_p999_ns: u64,
        pub run_max_ns: u64,
        pub run_samples: u64,
    }

    #[repr(C)]
    #[derive(Debug, Default, Clone, Copy)]
    pub struct tw_stats {
        pub size: u32,
        pub shards: u32,
        pub workers: u32,
        pub shut_down: u32,
        pub resolution_ns: u64,
        pub pending: u64,
        pub inbox: u64,
        pub live: u64,
        pub started: u64,
        pub fired: u64,
        pub stopped: u64,
        pub reset: u64,
        pub callback_exceptions: u64,
        pub cancelled_at_shutdown: u64,
        pub lateness_p50_ns: u64,
        pub lateness_p99_ns: u64,
        pub lateness_p999_ns: u64,
        pub lateness_max_ns: u64,
        pub lateness_samples: u64,
    }

    extern "C" {
        pub fn tw_config_init(cfg: *mut tw_config);
        pub fn tw_runtime_create(cfg: *const tw_config, out: *mut *mut tw_runtime) -> c_int;
        pub fn tw_runtime_shutdown(rt: *mut tw_runtime) -> c_int;
        pub fn tw_runtime_destroy(rt: *mut tw_runtime) -> c_int;
        pub fn tw_timer_start(
            rt: *mut tw_runtime,
            delay_ns: u64,
            period_ns: u64,
            cb: tw_callback,
            arg: *mut c_void,
            out: *mut tw_timer,
        ) -> c_int;
        pub fn tw_timer_spec_init(spec: *mut tw_timer_spec);
        pub fn tw_timer_start_ex(rt: *mut tw_runtime, spec: *const tw_timer_spec, out: *mut tw_timer) -> c_int;
        pub fn tw_timer_stop(rt: *mut tw_runtime, id: tw_timer) -> c_int;
        pub fn tw_timer_stop_sync(rt: *mut tw_runtime, id: tw_timer) -> c_int;
        pub fn tw_timer_reset(rt: *mut tw_runtime, id: tw_timer, delay_ns: u64) -> c_int;
        pub fn tw_now_ns() -> u64;
        pub fn tw_runtime_stats(rt: *mut tw_runtime, out: *mut tw_stats) -> c_int;
        pub fn tw_strerror(err: c_int) -> *const c_char;
        pub fn tw_version() -> u32;
        pub fn tw_queue_create(rt: *mut tw_runtime, out: *mut *mut tw_queue) -> c_int;
        pub fn tw_queue_fd(q: *const tw_queue) -> c_int;
        pub fn tw_queue_run(q: *mut tw_queue, max: usize, timeout_ns: i64) -> c_int;
        pub fn tw_queue_destroy(q: *mut tw_queue) -> c_int;
        pub fn tw_queue_get_stats(q: *mut tw_queue, out: *mut tw_queue_stats) -> c_int;
    }
}

/// A failed call: the (negative) TW_* code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Error(pub c_int);

impl Error {
    pub const INVALID: Error = Error(ffi::TW_EINVAL);
    pub const NO_MEMORY: Error = Error(ffi::TW_ENOMEM);
    pub const LIMIT: Error = Error(ffi::TW_EAGAIN);
    pub const SHUTDOWN: Error = Error(ffi::TW_ESHUTDOWN);
    pub const DEADLOCK: Error = Error(ffi::TW_EDEADLK);
    /// The runtime was created before fork() and this is the child process:
    /// it cannot be used here (create a new one in the child).
    pub const FORKED: Error = Error(ffi::TW_EFORKED);
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Error::FORKED {
            // The binding's own text: clear whatever the loaded library says.
            return write!(
                f,
                "runtime was created in the parent of this fork() child and cannot be used here; \
                 create a new runtime in the child ({})",
                self.0
            );
        }
        // SAFETY: tw_strerror returns a static NUL-terminated string, never NULL.
        let text: *const c_char = unsafe { ffi::tw_strerror(self.0) };
        write!(f, "{} ({})", unsafe { CStr::from_ptr(text) }.to_string_lossy(), self.0)
    }
}

impl std::error::Error for Error {}

fn check(rc: c_int) -> Result<(), Error> {
    if rc == ffi::TW_OK {
        Ok(())
    } else {
        Err(Error(rc))
    }
}

/// TW_OK -> true, TW_ENOENT -> false, anything else -> Err.
fn found(rc: c_int) -> Result<bool, Error> {
    match rc {
        ffi::TW_OK => Ok(true),
        ffi::TW_ENOENT => Ok(false),
        e => Err(Error(e)),
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX) // beyond the range: the C side says TW_EINVAL
}

/// A timer's id (never 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimerId(pub u64);

/// The library's version as (major, minor, patch).
pub fn version() -> (u32, u32, u32) {
    let v = unsafe { ffi::tw_version() };
    (v >> 16, (v >> 8) & 0xff, v & 0xff)
}

/// The runtime's clock (CLOCK_MONOTONIC), in nanoseconds.
pub fn now_ns() -> u64 {
    unsafe { ffi::tw_now_ns() }
}

type BoxedFn = Box<dyn FnMut(TimerId) + Send + 'static>;

unsafe extern "C" fn on_fire(arg: *mut c_void, id: ffi::tw_timer) {
    // SAFETY: `arg` is the Box<BoxedFn> leaked in start(); it lives until
    // on_release, which the runtime calls after the last run, and runs of one
    // timer never overlap, so this is the only reference now.
    let f = &mut *(arg as *mut BoxedFn);
    // A panic must not unwind into C.
    if catch_unwind(AssertUnwindSafe(|| f(TimerId(id)))).is_err() {
        eprintln!("tickwheel: a timer callback panicked (timer {id:#x})");
    }
}

unsafe extern "C" fn on_release(arg: *mut c_void) {
    // SAFETY: called exactly once per timer, after its last run.
    drop(Box::from_raw(arg as *mut BoxedFn));
}

/// A runtime's configuration (`tw_config`). `Config::default()` is the C default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Config {
    /// 0 = one per online CPU; at most 256.
    pub shards: u32,
    /// Callback worker threads; 0 = one per online CPU.
    pub workers: u32,
    /// The tick; zero = 1 ms; else 1 us .. 1 s.
    pub resolution: Duration,
    /// Live (started, not yet released) timers; 0 = unlimited. A start
    /// beyond it fails with `Error::LIMIT`.
    pub max_timers: u64,
    /// Pin shard i's driver thread to CPU i % online CPUs.
    pub pin_shards: bool,
}

/// A tickwheel runtime. Thread-safe: share it with `Arc` to use it from
/// callbacks. Dropping it cancels pending timers (dropping their closures)
/// and waits for running callbacks.
pub struct Runtime {
    ptr: *mut ffi::tw_runtime,
}

// SAFETY: every function of the C API may be called from any thread.
unsafe impl Send for Runtime {}
unsafe impl Sync for Runtime {}

impl Runtime {
    /// A runtime with the default configuration (one shard and one worker per CPU, 1 ms tick).
    pub fn new() -> Result<Runtime, Error> {
        Self::with_config(0, 0, Duration::ZERO)
    }

    /// `shards`/`workers`: 0 = one per CPU; `resolution`: the tick (zero = 1 ms).
    pub fn with_config(shards: u32, workers: u32, resolution: Duration) -> Result<Runtime, Error> {
        Self::from_config(&Config { shards, workers, resolution, ..Config::default() })
    }

    /// A runtime with every setting of `tw_config`.
    pub fn from_config(config: &Config) -> Result<Runtime, Error> {
        let mut cfg = ffi::tw_config::default();
        let mut ptr = std::ptr::null_mut();
        unsafe {
            ffi::tw_config_init(&mut cfg);
            cfg.shards = config.shards;
            cfg.workers = config.workers;
            cfg.resolution_ns = nanos(config.resolution);
            cfg.max_timers = config.max_timers;
            cfg.flags = if config.pin_shards { ffi::TW_PIN_SHARDS } else { 0 };
            check(ffi::tw_runtime_create(&cfg, &mut ptr))?;
        }
        Ok(Runtime { ptr })
    }

    /// Calls `f` once after `delay`, then (if `period` is not zero) every
    /// `period` until stopped. Never early.
    pub fn start<F>(&self, delay: Duration, period: Duration, f: F) -> Result<TimerId, Error>
    where
        F: FnMut(TimerId) + Send + 'static,
    {
        self.start_spec(delay, period, std::ptr::null_mut(), Box::new(f))
    }

    /// As start(), but the closure runs only inside `queue.run()`, on the
    /// thread calling it (a delivery queue of this runtime; another
    /// runtime's is `Error::INVALID`). The closure is still `Send`: a stop
    /// from another thread drops it there.
    pub fn start_on<F>(&self, queue: &Queue<'_>, delay: Duration, period: Duration, f: F) -> Result<TimerId, Error>
    where
        F: FnMut(TimerId) + Send + 'static,
    {
        self.start_spec(delay, period, queue.ptr, Box::new(f))
    }

    fn start_spec(&self, delay: Duration, period: Duration, queue: *mut ffi::tw_queue, f: BoxedFn) -> Result<TimerId, Error> {
        let boxed: Box<BoxedFn> = Box::new(f);
        // The 1.2 layout: tw_timer_spec_init (the exported one) writes the
        // 1.0 fields and size; the queue field is ours.
        let mut spec = unsafe {
            let mut s = std::mem::MaybeUninit::<ffi::tw_timer_spec>::zeroed();
            ffi::tw_timer_spec_init(s.as_mut_ptr());
            s.assume_init()
        };
        spec.size = std::mem::size_of::<ffi::tw_timer_spec>() as u32;
        spec.queue = queue;
        spec.delay_ns = nanos(delay);
        spec.period_ns = nanos(period);
        spec.callback = Some(on_fire);
        spec.arg = Box::into_raw(boxed) as *mut c_void;
        spec.release = Some(on_release);
        let mut id: ffi::tw_timer = 0;
        // The release rule, from the return code alone (tickwheel.h, "Release").
        match unsafe { ffi::tw_timer_start_ex(self.ptr, &spec, &mut id) } {
            ffi::TW_OK => Ok(TimerId(id)), // on_release runs later, exactly once
            rc @ (ffi::TW_EINVAL | ffi::TW_EFORKED) => {
                // Rejected: the library never took the box, so it is still ours.
                // SAFETY: spec.arg is the Box::into_raw above, released by no one.
                drop(unsafe { Box::from_raw(spec.arg as *mut BoxedFn) });
                Err(Error(rc))
            }
            // TW_ESHUTDOWN, TW_EAGAIN, TW_ENOMEM: on_release has run inside the call.
            rc => Err(Error(rc)),
        }
    }

    /// Cancels without blocking. Ok(true) iff this call prevented a run.
    pub fn stop(&self, id: TimerId) -> Result<bool, Error> {
        found(unsafe { ffi::tw_timer_stop(self.ptr, id.0) })
    }

    /// As stop(), then waits until the callback is not running (and its
    /// closure has been dropped), unless called from that timer's own callback.
    pub fn stop_sync(&self, id: TimerId) -> Result<bool, Error> {
        found(unsafe { ffi::tw_timer_stop_sync(self.ptr, id.0) })
    }

    /// Re-arms a pending timer to fire `delay` from now. Ok(false) if it is not pending.
    pub fn reset(&self, id: TimerId, delay: Duration) -> Result<bool, Error> {
        found(unsafe { ffi::tw_timer_reset(self.ptr, id.0, nanos(delay)) })
    }

    /// Cancels pending timers, waits for running callbacks, stops the threads.
    /// Err(Error::DEADLOCK) from one of this runtime's callbacks.
    pub fn shutdown(&self) -> Result<(), Error> {
        check(unsafe { ffi::tw_runtime_shutdown(self.ptr) })
    }

    pub fn stats(&self) -> Result<ffi::tw_stats, Error> {
        let mut st = ffi::tw_stats {
            size: std::mem::size_of::<ffi::tw_stats>() as u32,
            ..Default::default()
        };
        check(unsafe { ffi::tw_runtime_stats(self.ptr, &mut st) })?;
        Ok(st)
    }
}

impl Runtime {
    /// A delivery queue of this runtime: see `Queue`.
    pub fn queue(&self) -> Result<Queue<'_>, Error> {
        let mut ptr = std::ptr::null_mut();
        check(unsafe { ffi::tw_queue_create(self.ptr, &mut ptr) })?;
        Ok(Queue { ptr, _rt: std::marker::PhantomData })
    }
}

/// A delivery queue (`tw_queue`): the closures of the timers started with
/// `Runtime::start_on(&queue, ..)` run only inside `run()`, on the thread
/// that calls it -- an event loop polling `fd()` (an eventfd, readable while
/// a callback is due), or any thread of yours. Stop stays exact: stopping a
/// due timer that has not run yet returns `Ok(true)` and it never runs.
/// Dropping the queue cancels its timers (their closures are dropped on the
/// dropping thread). It borrows its runtime, which therefore outlives it.
pub struct Queue<'rt> {
    ptr: *mut ffi::tw_queue,
    _rt: std::marker::PhantomData<&'rt Runtime>,
}

// SAFETY: every tw_queue_* function may be called from any thread.
unsafe impl Send for Queue<'_> {}
unsafe impl Sync for Queue<'_> {}

impl Queue<'_> {
    /// The eventfd to poll (POLLIN): readable while a callback is due. Owned by the queue.
    pub fn fd(&self) -> std::os::raw::c_int {
        unsafe { ffi::tw_queue_fd(self.ptr) }
    }

    /// Runs up to `max` due callbacks here, in deadline order; returns how
    /// many ran. With none due, waits up to `timeout` (`Some(ZERO)`: not at
    /// all; `None`: until one is due or the runtime shuts down).
    /// Errors: `INVALID` (max 0), `DEADLOCK` (from one of its own
    /// callbacks), `SHUTDOWN` (nothing ran, runtime shut down), `FORKED`.
    pub fn run(&self, max: usize, timeout: Option<Duration>) -> Result<usize, Error> {
        let t = match timeout {
            None => -1,
            Some(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        };
        let rc = unsafe { ffi::tw_queue_run(self.ptr, max, t) };
        if rc < 0 {
            Err(Error(rc))
        } else {
            Ok(rc as usize)
        }
    }

    /// The queue's counters and lateness (`tw_queue_stats`).
    pub fn stats(&self) -> Result<ffi::tw_queue_stats, Error> {
        let mut st = ffi::tw_queue_stats {
            size: std::mem::size_of::<ffi::tw_queue_stats>() as u32,
            ..Default::default()
        };
        check(unsafe { ffi::tw_queue_get_stats(self.ptr, &mut st) })?;
        Ok(st)
    }
}

impl Drop for Queue<'_> {
    fn drop(&mut self) {
        // TW_EDEADLK if dropped inside one of its own callbacks: leaked then.
        let rc = unsafe { ffi::tw_queue_destroy(self.ptr) };
        if rc != ffi::TW_OK {
            eprintln!("tickwheel: tw_queue_destroy: {}", Error(rc));
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // TW_EDEADLK if dropped inside one of its own callbacks: the runtime
        // is then leaked rather than freed under a running callback. In a
        // fork() child, for a runtime of the parent, it only frees the
        // child's copy (no callback, no closure dropped) and returns TW_OK.
        let rc = unsafe { ffi::tw_runtime_destroy(self.ptr) };
        if rc != ffi::TW_OK {
            eprintln!("tickwheel: tw_runtime_destroy: {}", Error(rc));
        }
    }
}
