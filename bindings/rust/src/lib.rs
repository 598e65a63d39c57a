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
//! Panics never cross into C (an unwind out of an `extern "C"` hook would
//! abort the process): a panic in a closure's call, or in its `Drop` --
//! wherever the drop happens: inside `stop()`, `stop_sync()` or a failed
//! start on the caller's thread, on a worker after the last run, inside
//! the `Runtime`'s or a `Queue`'s drop -- is caught, logged on stderr (after
//! the panic hook's message), and counted in `stats().callback_exceptions`
//! and the metric `tickwheel_callback_exceptions_total`
//! (`tw_runtime_count_callback_exception`, library 1.6). The call that ran
//! the hook returns normally, and a periodic timer whose call panicked goes
//! on. A panic in [`Runtime::start_many`]'s `make(i)` unwinds to the caller
//! with nothing started and the closures already made dropped.
//!
//! Since 1.3 a timer can be started from a [`TimerSpec`] (period policy,
//! leeway, group, absolute deadline), inspected with [`Runtime::query`],
//! re-armed to an absolute deadline with [`Runtime::reset_at`], and stopped
//! with the rest of its group by [`Runtime::stop_group`]:
//!
//! ```no_run
//! use std::time::Duration;
//! use tickwheel::{PeriodPolicy, Runtime, TimerSpec};
//! let rt = Runtime::new().unwrap();
//! let spec = TimerSpec::after(Duration::from_millis(10))
//!     .every(Duration::from_millis(10))
//!     .policy(PeriodPolicy::Delay)
//!     .leeway(Duration::from_millis(2))
//!     .group(7);
//! let id = rt.start_with(&spec, |_| { /* ... */ }).unwrap();
//! if let Some(info) = rt.query(id).unwrap() {
//!     println!("{:?}, {} runs, next in {:?}", info.state, info.runs, info.remaining());
//! }
//! rt.reset_at(id, tickwheel::now_ns() + 50_000_000).unwrap();
//! assert_eq!(rt.stop_group(7, true), Ok(1));
//! ```
//!
//! Since 1.3 a timer can also be on the boot-time or the wall clock
//! ([`TimerSpec::clock`], [`Clock`]), and a runtime can have a manual clock
//! for tests ([`Config::manual_clock`], [`Runtime::new_manual`]): its clocks
//! stand still until [`Runtime::advance`] moves them, and the callbacks that
//! fall due run inside that call, on the calling thread, in deadline order:
//!
//! ```no_run
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//! use tickwheel::{Clock, Runtime};
//! let rt = Runtime::new_manual().unwrap();
//! let closed = Arc::new(Mutex::new(None));
//! let c = closed.clone();
//! rt.start(Duration::from_secs(30), Duration::ZERO, move |_| *c.lock().unwrap() = Some(())).unwrap();
//! let t0 = rt.now(Clock::Monotonic);
//! assert_eq!(rt.advance(Duration::from_millis(29_999)), Ok(0));
//! assert_eq!(rt.advance(Duration::from_millis(1)), Ok(1)); // ran here, on this thread
//! assert_eq!(rt.now(Clock::Monotonic) - t0, 30_000_000_000);
//! assert!(closed.lock().unwrap().is_some());
//! ```
//!
//! Since 1.4, batches: [`Runtime::start_many`], [`Runtime::stop_many`] and
//! [`Runtime::reset_many`] start, stop or re-arm a slice of timers with one
//! call into the library, each element as the single call would:
//!
//! ```no_run
//! use std::time::Duration;
//! use tickwheel::{Runtime, TimerSpec};
//! let rt = Runtime::new().unwrap();
//! let specs = vec![TimerSpec::after(Duration::from_secs(30)); 64];
//! let ids: Vec<_> = rt.start_many(&specs, |i| move |_| println!("timer {i}")).unwrap().into_iter().flatten().collect();
//! rt.reset_many(&ids, Duration::from_secs(60)).unwrap(); // keepalives
//! assert!(rt.stop_many(&ids).unwrap().iter().all(|&stopped| stopped));
//! ```
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
    use std::os::raw::{c_char, c_int, c_uint};

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
    /// `tw_config.flags` (since 1.3): a manual clock.
    pub const TW_CONFIG_MANUAL_CLOCK: u32 = 0x2;
    /// `tw_timer_spec.clock`, `tw_now_ns_clock()`, `tw_runtime_now_ns()` (since 1.3).
    pub const TW_CLOCK_MONOTONIC: i32 = 0;
    pub const TW_CLOCK_BOOTTIME: i32 = 1;
    pub const TW_CLOCK_REALTIME: i32 = 2;
    pub const TW_MAX_DELAY_NS: u64 = 1 << 60;
    /// `tw_timer_spec.period_policy` (since 1.3).
    pub const TW_PERIOD_SKIP: u32 = 0;
    pub const TW_PERIOD_DELAY: u32 = 1;
    pub const TW_PERIOD_BURST: u32 = 2;
    /// `tw_timer_info.state` (since 1.3).
    pub const TW_TIMER_PENDING: i32 = 1;
    pub const TW_TIMER_DUE: i32 = 2;
    pub const TW_TIMER_RUNNING: i32 = 3;
    /// `tw_group_stop()` flag (since 1.3).
    pub const TW_SYNC: c_uint = 1;

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
        /// Since 1.3 (`size` 88): TW_PERIOD_SKIP (0), _DELAY or _BURST.
        pub period_policy: u32,
        /// Since 1.3: TW_CLOCK_MONOTONIC (0), _BOOTTIME or _REALTIME.
        pub clock: i32,
        /// Since 1.3: how late the callback may run, in ns.
        pub leeway_ns: u64,
        /// Since 1.3: the timer's group for `tw_group_stop()`; 0 = none.
        pub group: u64,
    }

    /// `tw_timer_info` (since 1.3, 64 bytes): what `tw_timer_query()` fills.
    #[repr(C)]
    #[derive(Debug, Default, Clone, Copy)]
    pub struct tw_timer_info {
        pub size: u32,
        pub state: i32,
        pub shard: i32,
        pub clock: i32,  // the timer's clock (TW_CLOCK_*)
        pub deadline_ns: u64,
        pub period_ns: u64,
        pub leeway_ns: u64,
        pub group: u64,
        pub runs: u64,
        pub missed: u64,
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
        // Since 1.4 (TICKWHEEL_1.4): batches.
        pub fn tw_timer_start_n(rt: *mut tw_runtime, specs: *const tw_timer_spec, n: usize, out: *mut tw_timer) -> c_int;
        pub fn tw_timer_stop_n(rt: *mut tw_runtime, ids: *const tw_timer, n: usize, results: *mut c_int) -> c_int;
        pub fn tw_timer_reset_n(
            rt: *mut tw_runtime,
            ids: *const tw_timer,
            n: usize,
            delay_ns: u64,
            results: *mut c_int,
        ) -> c_int;
        pub fn tw_timer_stop_sync(rt: *mut tw_runtime, id: tw_timer) -> c_int;
        pub fn tw_timer_reset(rt: *mut tw_runtime, id: tw_timer, delay_ns: u64) -> c_int;
        /// Since 1.3.
        pub fn tw_timer_reset_at(rt: *mut tw_runtime, id: tw_timer, deadline_ns: u64) -> c_int;
        /// Since 1.3.
        pub fn tw_timer_query(rt: *mut tw_runtime, id: tw_timer, out: *mut tw_timer_info) -> c_int;
        /// Since 1.3.
        pub fn tw_group_stop(rt: *mut tw_runtime, group: u64, flags: c_uint) -> i64;
        pub fn tw_now_ns() -> u64;
        /// Since 1.3.
        pub fn tw_now_ns_clock(clock: c_int) -> u64;
        /// Since 1.3.
        pub fn tw_runtime_now_ns(rt: *mut tw_runtime, clock: c_int) -> u64;
        /// Since 1.3.
        pub fn tw_runtime_advance(rt: *mut tw_runtime, ns: u64) -> c_int;
        pub fn tw_runtime_stats(rt: *mut tw_runtime, out: *mut tw_stats) -> c_int;
        /// Since 1.6 (TICKWHEEL_1.6): counts a callback's exception (a panic
        /// the binding caught) in `tw_stats.callback_exceptions`.
        pub fn tw_runtime_count_callback_exception(rt: *mut tw_runtime) -> c_int;
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

/// A timer's id (never 0). The layout of the C `tw_timer` (a slice of them
/// is passed to the batch calls as it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct TimerId(pub u64);

/// The library's version as (major, minor, patch).
pub fn version() -> (u32, u32, u32) {
    let v = unsafe { ffi::tw_version() };
    (v >> 16, (v >> 8) & 0xff, v & 0xff)
}

/// The machine's CLOCK_MONOTONIC in nanoseconds: the clock of delays and
/// deadlines of a timer on [`Clock::Monotonic`] (the default).
pub fn now_ns() -> u64 {
    unsafe { ffi::tw_now_ns() }
}

/// The machine's clock `clock` in nanoseconds (`tw_now_ns_clock`). A manual
/// runtime's virtual clocks are read with [`Runtime::now`] instead.
pub fn now_ns_clock(clock: Clock) -> u64 {
    unsafe { ffi::tw_now_ns_clock(clock as i32) }
}

/// The clock a timer's delay and deadlines are on ([`TimerSpec::clock`],
/// `tw_timer_spec.clock`, since 1.3), and the clock [`now_ns_clock`] and
/// [`Runtime::now`] read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(i32)]
pub enum Clock {
    /// CLOCK_MONOTONIC (the default): stops while the machine is suspended, never jumps.
    #[default]
    Monotonic = ffi::TW_CLOCK_MONOTONIC,
    /// CLOCK_BOOTTIME: as monotonic, but counts the time the machine was
    /// suspended (a 30 s keepalive fires 30 s of real time later, asleep or not).
    Boottime = ffi::TW_CLOCK_BOOTTIME,
    /// CLOCK_REALTIME, the wall clock: a timer follows changes of it -- set
    /// forward past its deadline it fires then; set back, it waits for the
    /// wall clock to reach its deadline again (noticed within 100 ms).
    Realtime = ffi::TW_CLOCK_REALTIME,
}

impl TryFrom<i32> for Clock {
    type Error = Error;
    /// The C value (`TW_CLOCK_*`); any other is `Error::INVALID`. (Not the
    /// libc `CLOCK_*` numbers, which differ.)
    fn try_from(v: i32) -> Result<Self, Error> {
        match v {
            ffi::TW_CLOCK_MONOTONIC => Ok(Clock::Monotonic),
            ffi::TW_CLOCK_BOOTTIME => Ok(Clock::Boottime),
            ffi::TW_CLOCK_REALTIME => Ok(Clock::Realtime),
            _ => Err(Error::INVALID),
        }
    }
}

impl std::str::FromStr for Clock {
    type Err = Error;
    /// `"monotonic"`, `"boottime"` or `"realtime"`; anything else is `Error::INVALID`.
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "monotonic" => Ok(Clock::Monotonic),
            "boottime" => Ok(Clock::Boottime),
            "realtime" => Ok(Clock::Realtime),
            _ => Err(Error::INVALID),
        }
    }
}

type BoxedFn = Box<dyn FnMut(TimerId) + Send + 'static>;

/// A timer's `arg`: its closure, and the runtime it was started on (whose
/// `callback_exceptions` counts the closure's panics).
struct Slot {
    rt: *mut ffi::tw_runtime,
    f: BoxedFn,
}

impl Slot {
    fn boxed(rt: *mut ffi::tw_runtime, f: BoxedFn) -> Box<Slot> {
        Box::new(Slot { rt, f })
    }
}

/// Counts a panic the binding caught in `rt`'s `callback_exceptions` (and
/// `tickwheel_callback_exceptions_total`), as the runtime counts a C++
/// exception. (Does nothing in a fork() child: TW_EFORKED.)
fn count_panic(rt: *mut ffi::tw_runtime) {
    // SAFETY: rt is alive: callbacks and release hooks run before
    // tw_runtime_destroy() returns, and the binding's own drops happen
    // inside a method of the Runtime.
    unsafe { ffi::tw_runtime_count_callback_exception(rt) };
}

unsafe extern "C" fn on_fire(arg: *mut c_void, id: ffi::tw_timer) {
    // SAFETY: `arg` is the Box<Slot> leaked in start(); it lives until
    // on_release, which the runtime calls after the last run, and runs of one
    // timer never overlap, so this is the only reference now.
    let slot = &mut *(arg as *mut Slot);
    // A panic must not unwind into C: caught, logged (the panic hook has
    // printed its message), counted; the timer goes on.
    if catch_unwind(AssertUnwindSafe(|| (slot.f)(TimerId(id)))).is_err() {
        eprintln!("tickwheel: a timer callback panicked (timer {id:#x}); counted in callback_exceptions");
        count_panic(slot.rt);
    }
}

/// The release hook: drops the closure. Called exactly once per timer, after
/// its last run -- by the C library (inside a stop, a shutdown, a failed
/// start, or on a worker after the last run), or by the binding itself for
/// a start the library refused. A panic in the closure's Drop is contained
/// as one in its call is: caught, logged, counted, never an abort (an unwind
/// out of this `extern "C"` function would abort the process).
unsafe extern "C" fn on_release(arg: *mut c_void) {
    // SAFETY: `arg` is a Box<Slot> from Box::into_raw, released once.
    let slot = Box::from_raw(arg as *mut Slot);
    let rt = slot.rt;
    if catch_unwind(AssertUnwindSafe(move || drop(slot))).is_err() {
        eprintln!("tickwheel: dropping a timer's closure panicked; counted in callback_exceptions");
        count_panic(rt);
    }
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
    /// A manual clock, for tests (`TW_CONFIG_MANUAL_CLOCK`, since 1.3): the
    /// runtime's three clocks stand still (starting at the machine's values)
    /// until [`Runtime::advance`] moves them; callbacks run only inside
    /// `advance()`, on its caller's thread; no driver thread is started.
    pub manual_clock: bool,
}

/// What a periodic timer does when a run overruns its period
/// (`tw_timer_spec.period_policy`, since 1.3). Ignored for a one-shot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u32)]
pub enum PeriodPolicy {
    /// Fixed rate (the default): runs stay on the grid first + k * period; a
    /// grid deadline that passes while a run is in progress (or waits to
    /// start) is skipped and counted in [`TimerInfo::missed`].
    #[default]
    Skip = ffi::TW_PERIOD_SKIP,
    /// Fixed delay: the next deadline is the end of this run plus the period.
    Delay = ffi::TW_PERIOD_DELAY,
    /// Fixed rate with catch-up: the grid deadlines that passed during a run
    /// are run after it, back to back (never overlapping), until caught up.
    Burst = ffi::TW_PERIOD_BURST,
}

impl TryFrom<u32> for PeriodPolicy {
    type Error = Error;
    /// The C value (`TW_PERIOD_*`); any other is `Error::INVALID`.
    fn try_from(v: u32) -> Result<Self, Error> {
        match v {
            ffi::TW_PERIOD_SKIP => Ok(PeriodPolicy::Skip),
            ffi::TW_PERIOD_DELAY => Ok(PeriodPolicy::Delay),
            ffi::TW_PERIOD_BURST => Ok(PeriodPolicy::Burst),
            _ => Err(Error::INVALID),
        }
    }
}

impl std::str::FromStr for PeriodPolicy {
    type Err = Error;
    /// `"skip"`, `"delay"` or `"burst"`; anything else is `Error::INVALID`.
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "skip" => Ok(PeriodPolicy::Skip),
            "delay" => Ok(PeriodPolicy::Delay),
            "burst" => Ok(PeriodPolicy::Burst),
            _ => Err(Error::INVALID),
        }
    }
}

/// Everything a timer can be started with ([`Runtime::start_with`]), the
/// safe side of `tw_timer_spec`. `TimerSpec::default()` fires as soon as
/// possible, once. Build it with the public fields or the chained setters:
/// `TimerSpec::after(d).every(p).policy(PeriodPolicy::Burst).group(3)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimerSpec {
    /// First run this long from now (used when `deadline_ns` is 0).
    pub delay: Duration,
    /// Absolute deadline of the first run, in ns on the timer's `clock`
    /// ([`now_ns_clock`]; on a manual runtime [`Runtime::now`]; a past one
    /// fires at once); 0 = use `delay`.
    /// Above `i64::MAX`, or more than `TW_MAX_DELAY_NS` ahead, is `Error::INVALID`.
    pub deadline_ns: u64,
    /// Zero = one-shot; else the period (see `policy`).
    pub period: Duration,
    /// A periodic timer's overrun policy.
    pub policy: PeriodPolicy,
    /// How late the callback may run: in [deadline, deadline + leeway + the
    /// usual lateness], never before the deadline. Timers whose windows
    /// overlap share a wake-up. Zero = exact to the tick; at most
    /// `TW_MAX_DELAY_NS` (else `Error::INVALID`).
    pub leeway: Duration,
    /// The timer's group for [`Runtime::stop_group`]; 0 = none.
    pub group: u64,
    /// The clock `delay`, `deadline_ns` and [`Runtime::reset_at`] are on,
    /// and "never early" is judged against (since 1.3).
    pub clock: Clock,
    /// Shard hint: `None` = the calling thread's own shard; `Some(n)`: shard
    /// n modulo the count (n above `i32::MAX` is `Error::INVALID`).
    pub shard: Option<u32>,
}

impl TimerSpec {
    /// A one-shot timer firing `delay` from now.
    pub fn after(delay: Duration) -> TimerSpec {
        TimerSpec { delay, ..TimerSpec::default() }
    }

    /// A one-shot timer firing at the absolute `deadline_ns` (on the
    /// monotonic clock, [`now_ns`]'s, unless `.clock()` says otherwise).
    pub fn at(deadline_ns: u64) -> TimerSpec {
        TimerSpec { deadline_ns, ..TimerSpec::default() }
    }

    /// Makes it periodic: every `period` after the first run (zero: one-shot).
    pub fn every(mut self, period: Duration) -> TimerSpec {
        self.period = period;
        self
    }

    /// Sets the overrun policy of a periodic timer.
    pub fn policy(mut self, policy: PeriodPolicy) -> TimerSpec {
        self.policy = policy;
        self
    }

    /// Sets the leeway.
    pub fn leeway(mut self, leeway: Duration) -> TimerSpec {
        self.leeway = leeway;
        self
    }

    /// Sets the group (0 = none).
    pub fn group(mut self, group: u64) -> TimerSpec {
        self.group = group;
        self
    }

    /// Puts the timer on `clock` (its delay, deadline and re-arms).
    pub fn clock(mut self, clock: Clock) -> TimerSpec {
        self.clock = clock;
        self
    }

    /// Sets the shard hint.
    pub fn shard(mut self, shard: u32) -> TimerSpec {
        self.shard = Some(shard);
        self
    }
}

/// Where a live timer is in its life ([`TimerInfo::state`], `tw_timer_info.state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimerStatus {
    /// Waiting for its deadline.
    Pending,
    /// Its deadline has passed; the callback has not started yet.
    Due,
    /// Its callback is running now.
    Running,
}

/// What [`Runtime::query`] tells about a live timer (`tw_timer_info`): a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerInfo {
    /// Pending, due or running (from inside its own callback: running).
    pub state: TimerStatus,
    /// The shard it lives on.
    pub shard: u32,
    /// The next deadline in ns on the timer's clock ([`now_ns`]'s for the
    /// default, [`Clock::Monotonic`]), rounded up to the resolution,
    /// without the leeway; `None` when none is set (a one-shot whose
    /// callback is running, a `Delay` timer until its run ends). For a due
    /// or running fixed-rate timer: the grid deadline after the one being
    /// served (while a `Burst` timer runs the deadlines it owes: the grid
    /// deadline after the owed ones, the same for each of those runs).
    pub deadline_ns: Option<u64>,
    /// Zero for a one-shot; rounded up to the resolution.
    pub period: Duration,
    /// As started.
    pub leeway: Duration,
    /// As started; 0 = none.
    pub group: u64,
    /// Runs started so far, the one in progress included.
    pub runs: u64,
    /// Grid deadlines skipped so far (`Skip`; 0 for the other policies):
    /// `runs + missed - 1` is the index of the grid deadline the current
    /// (or last) run serves.
    pub missed: u64,
}

impl TimerInfo {
    /// The time from now to `deadline_ns` (zero once it has passed), or
    /// `None` without a deadline. Reads the machine's monotonic clock: for a
    /// timer on another clock, or on a manual runtime, use
    /// [`remaining_from`](TimerInfo::remaining_from)`(rt.now(clock))`.
    pub fn remaining(&self) -> Option<Duration> {
        self.remaining_from(now_ns())
    }

    /// The time from `now_ns` (a reading of the timer's clock, e.g.
    /// [`Runtime::now`]) to `deadline_ns`, zero once it has passed; `None`
    /// without a deadline.
    pub fn remaining_from(&self, now_ns: u64) -> Option<Duration> {
        self.deadline_ns.map(|d| Duration::from_nanos(d.saturating_sub(now_ns)))
    }

    fn from_raw(raw: &ffi::tw_timer_info) -> TimerInfo {
        TimerInfo {
            state: match raw.state {
                ffi::TW_TIMER_DUE => TimerStatus::Due,
                ffi::TW_TIMER_RUNNING => TimerStatus::Running,
                _ => TimerStatus::Pending, // TW_TIMER_PENDING (the library reports only these three)
            },
            shard: u32::try_from(raw.shard).unwrap_or(0),
            deadline_ns: if raw.deadline_ns == 0 { None } else { Some(raw.deadline_ns) },
            period: Duration::from_nanos(raw.period_ns),
            leeway: Duration::from_nanos(raw.leeway_ns),
            group: raw.group,
            runs: raw.runs,
            missed: raw.missed,
        }
    }
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

    /// A runtime with a manual clock, for tests (see [`Config::manual_clock`]):
    /// one shard, one worker, 1 ms tick.
    pub fn new_manual() -> Result<Runtime, Error> {
        Self::from_config(&Config { shards: 1, workers: 1, manual_clock: true, ..Config::default() })
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
            cfg.flags = if config.pin_shards { ffi::TW_PIN_SHARDS } else { 0 }
                | if config.manual_clock { ffi::TW_CONFIG_MANUAL_CLOCK } else { 0 };
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
        self.start_spec(&TimerSpec { delay, period, ..TimerSpec::default() }, std::ptr::null_mut(), Box::new(f))
    }

    /// Starts the timer `spec` describes (delay or absolute deadline, period
    /// and policy, leeway, group, shard): calls `f` at its deadline, then,
    /// if periodic, every period until stopped. Never early. Errors:
    /// `INVALID` (a delay, period or leeway above `TW_MAX_DELAY_NS`, a
    /// deadline above `i64::MAX` or too far ahead, a shard above `i32::MAX`;
    /// the closure is dropped before returning), `SHUTDOWN`, `LIMIT`,
    /// `NO_MEMORY`, `FORKED`.
    pub fn start_with<F>(&self, spec: &TimerSpec, f: F) -> Result<TimerId, Error>
    where
        F: FnMut(TimerId) + Send + 'static,
    {
        self.start_spec(spec, std::ptr::null_mut(), Box::new(f))
    }

    /// As start_with(), on a delivery queue of this runtime (see start_on()).
    pub fn start_on_with<F>(&self, queue: &Queue<'_>, spec: &TimerSpec, f: F) -> Result<TimerId, Error>
    where
        F: FnMut(TimerId) + Send + 'static,
    {
        self.start_spec(spec, queue.ptr, Box::new(f))
    }

    /// As start(), but the closure runs only inside `queue.run()`, on the
    /// thread calling it (a delivery queue of this runtime; another
    /// runtime's is `Error::INVALID`). The closure is still `Send`: a stop
    /// from another thread drops it there.
    pub fn start_on<F>(&self, queue: &Queue<'_>, delay: Duration, period: Duration, f: F) -> Result<TimerId, Error>
    where
        F: FnMut(TimerId) + Send + 'static,
    {
        self.start_spec(&TimerSpec { delay, period, ..TimerSpec::default() }, queue.ptr, Box::new(f))
    }

    /// The C spec of `ts` (without its arg), or INVALID for a shard above i32::MAX.
    fn raw_spec(ts: &TimerSpec, queue: *mut ffi::tw_queue) -> Result<ffi::tw_timer_spec, Error> {
        let shard = match ts.shard {
            None => -1,
            Some(n) => i32::try_from(n).map_err(|_| Error::INVALID)?,
        };
        // The 1.3 layout: tw_timer_spec_init (the exported one) writes the
        // 1.0 fields and size; the later fields (zeroed) and the size are ours.
        let mut spec = unsafe {
            let mut s = std::mem::MaybeUninit::<ffi::tw_timer_spec>::zeroed();
            ffi::tw_timer_spec_init(s.as_mut_ptr());
            s.assume_init()
        };
        spec.size = std::mem::size_of::<ffi::tw_timer_spec>() as u32;
        spec.shard = shard;
        spec.queue = queue;
        spec.deadline_ns = ts.deadline_ns;
        spec.delay_ns = nanos(ts.delay);
        spec.period_ns = nanos(ts.period);
        spec.period_policy = ts.policy as u32;
        spec.leeway_ns = nanos(ts.leeway);
        spec.group = ts.group;
        spec.clock = ts.clock as i32;
        spec.callback = Some(on_fire);
        spec.release = Some(on_release);
        Ok(spec)
    }

    fn start_spec(&self, ts: &TimerSpec, queue: *mut ffi::tw_queue, f: BoxedFn) -> Result<TimerId, Error> {
        let arg = Box::into_raw(Slot::boxed(self.ptr, f)) as *mut c_void;
        let mut spec = match Self::raw_spec(ts, queue) {
            Ok(spec) => spec,
            Err(e) => {
                // SAFETY: arg is the Box::into_raw above, taken by no one.
                unsafe { on_release(arg) };
                return Err(e);
            }
        };
        spec.arg = arg;
        let mut id: ffi::tw_timer = 0;
        // The release rule, from the return code alone (tickwheel.h, "Release").
        match unsafe { ffi::tw_timer_start_ex(self.ptr, &spec, &mut id) } {
            ffi::TW_OK => Ok(TimerId(id)), // on_release runs later, exactly once
            rc @ (ffi::TW_EINVAL | ffi::TW_EFORKED) => {
                // Rejected: the library never took the box, so it is still ours.
                // SAFETY: spec.arg is the Box::into_raw above, released by no one.
                unsafe { on_release(spec.arg) };
                Err(Error(rc))
            }
            // TW_ESHUTDOWN, TW_EAGAIN, TW_ENOMEM: on_release has run inside the call.
            rc => Err(Error(rc)),
        }
    }

    /// Starts one timer per spec with one call into the library
    /// (`tw_timer_start_n`), each as [`Runtime::start_with`] would, the
    /// closure of timer `i` being `make(i)`. Returns, per spec, its
    /// [`TimerId`] -- or `None` where the library could not start that one
    /// (`LIMIT`, `NO_MEMORY`, `SHUTDOWN`: its closure is dropped before this
    /// returns). Delays count from one clock reading taken as the call
    /// begins (never early). Every spec is checked first: one the library
    /// would refuse (a delay, period or leeway above `TW_MAX_DELAY_NS`, a
    /// deadline above `i64::MAX` or more than `TW_MAX_DELAY_NS` ahead of
    /// [`Runtime::now`], a shard above `i32::MAX`) makes the whole call
    /// `Err(Error::INVALID)` with nothing started and `make` never called.
    /// `Err(FORKED)` in a fork child. Every closure is made before any is
    /// started: a panic in `make(i)` unwinds out of this call with nothing
    /// started and the closures `make` returned before it dropped. One call for the slice: the per-call
    /// costs (an FFI call, a clock reading, the inbox wake-ups) are paid
    /// once, and the records are prefetched together (README, "Batches").
    pub fn start_many<F, G>(&self, specs: &[TimerSpec], mut make: G) -> Result<Vec<Option<TimerId>>, Error>
    where
        G: FnMut(usize) -> F,
        F: FnMut(TimerId) + Send + 'static,
    {
        // What tw_timer_start_n would refuse without calling the hook: refused
        // here, so that every spec it does not start has had its hook (the
        // closure dropped) -- out[i] == 0 says nothing more.
        let max = ffi::TW_MAX_DELAY_NS;
        let mut raw = Vec::with_capacity(specs.len());
        for ts in specs {
            let spec = Self::raw_spec(ts, std::ptr::null_mut())?;
            if spec.delay_ns > max || spec.period_ns > max || spec.leeway_ns > max || spec.deadline_ns > i64::MAX as u64 {
                return Err(Error::INVALID);
            }
            if spec.deadline_ns != 0 && spec.deadline_ns > self.now(ts.clock).saturating_add(max) {
                return Err(Error::INVALID);
            }
            raw.push(spec);
        }
        // Every closure is made (and owned here) before any is handed over:
        // if make(i) panics, the ones already made are dropped as the panic
        // unwinds out of this call (none leaks, none was started).
        let mut slots: Vec<Box<Slot>> = Vec::with_capacity(raw.len());
        for i in 0..raw.len() {
            slots.push(Slot::boxed(self.ptr, Box::new(make(i))));
        }
        for (spec, slot) in raw.iter_mut().zip(slots) {
            spec.arg = Box::into_raw(slot) as *mut c_void;
        }
        let mut out = vec![0 as ffi::tw_timer; raw.len()];
        let rc = unsafe { ffi::tw_timer_start_n(self.ptr, raw.as_ptr(), raw.len(), out.as_mut_ptr()) };
        if rc < 0 {
            // The call was refused (FORKED): no hook ran, the boxes are ours.
            for spec in &raw {
                // SAFETY: each arg is a Box::into_raw above, taken by no one.
                unsafe { on_release(spec.arg) };
            }
            return Err(Error(rc));
        }
        Ok(out.into_iter().map(|id| if id == 0 { None } else { Some(TimerId(id)) }).collect())
    }

    /// Stops every timer of `ids` as [`Runtime::stop`] would, in order, with
    /// one call (`tw_timer_stop_n`): `Ok(v)` with `v[i]` true where that stop
    /// prevented a run. Never blocks. Errors: `SHUTDOWN`, `FORKED`.
    pub fn stop_many(&self, ids: &[TimerId]) -> Result<Vec<bool>, Error> {
        let mut results = vec![0 as c_int; ids.len()];
        // SAFETY: TimerId is repr(transparent) over tw_timer.
        let rc = unsafe {
            ffi::tw_timer_stop_n(self.ptr, ids.as_ptr() as *const ffi::tw_timer, ids.len(), results.as_mut_ptr())
        };
        Self::batch_results(rc, results)
    }

    /// Re-arms every timer of `ids` to fire `delay` from now, as
    /// [`Runtime::reset`] would, in order, with one call
    /// (`tw_timer_reset_n`); "now" is one clock reading taken as the call
    /// begins (never early). `v[i]` is false where the timer was not
    /// pending. Errors: `INVALID` (`delay` above `TW_MAX_DELAY_NS`: none
    /// re-armed), `SHUTDOWN`, `FORKED`.
    pub fn reset_many(&self, ids: &[TimerId], delay: Duration) -> Result<Vec<bool>, Error> {
        let mut results = vec![0 as c_int; ids.len()];
        // SAFETY: as stop_many.
        let rc = unsafe {
            ffi::tw_timer_reset_n(
                self.ptr,
                ids.as_ptr() as *const ffi::tw_timer,
                ids.len(),
                nanos(delay),
                results.as_mut_ptr(),
            )
        };
        Self::batch_results(rc, results)
    }

    fn batch_results(rc: c_int, results: Vec<c_int>) -> Result<Vec<bool>, Error> {
        if rc < 0 {
            return Err(Error(rc));
        }
        results.into_iter().map(found).collect()
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

    /// Re-arms a pending timer to fire at the absolute `deadline_ns` on the
    /// timer's clock ([`now_ns`]'s for the default; a past one fires at once; never before it); a
    /// periodic one then runs every period from there. Ok(false) if it is
    /// not pending (fired, stopped, stale). `Error::INVALID` for a deadline
    /// above `i64::MAX` or more than `TW_MAX_DELAY_NS` ahead.
    pub fn reset_at(&self, id: TimerId, deadline_ns: u64) -> Result<bool, Error> {
        found(unsafe { ffi::tw_timer_reset_at(self.ptr, id.0, deadline_ns) })
    }

    /// A live timer's state, next deadline, period, leeway, group and run
    /// counters; `Ok(None)` once it is released (ran its last run, stopped,
    /// cancelled by shutdown) or for a stale, random or 0 id. From inside
    /// its own callback it reports `TimerStatus::Running` with `runs` and
    /// `missed` current. Never blocks. Errors: `FORKED`.
    pub fn query(&self, id: TimerId) -> Result<Option<TimerInfo>, Error> {
        let mut raw = ffi::tw_timer_info {
            size: std::mem::size_of::<ffi::tw_timer_info>() as u32,
            ..Default::default()
        };
        match unsafe { ffi::tw_timer_query(self.ptr, id.0, &mut raw) } {
            ffi::TW_OK => Ok(Some(TimerInfo::from_raw(&raw))),
            ffi::TW_ENOENT => Ok(None),
            e => Err(Error(e)),
        }
    }

    /// Stops every live timer started with `TimerSpec::group == group`, as
    /// stop() on each, and returns how many it stopped (a one-shot already
    /// running its callback is not counted; a running periodic one is).
    /// With `sync` it also waits, as stop_sync() does, for the group's
    /// callbacks in progress and their closures' drop (from inside a
    /// callback, not for that callback's own timer). Timers started before
    /// the call are all stopped; one started concurrently is stopped or
    /// left, never lost. Ok(0) after shutdown. Errors: `INVALID` (group
    /// 0), `FORKED`.
    pub fn stop_group(&self, group: u64, sync: bool) -> Result<u64, Error> {
        let n = unsafe { ffi::tw_group_stop(self.ptr, group, if sync { ffi::TW_SYNC } else { 0 }) };
        if n < 0 {
            Err(Error(c_int::try_from(n).unwrap_or(ffi::TW_EINVAL)))
        } else {
            Ok(n as u64)
        }
    }

    /// The runtime's clock `clock` in ns (`tw_runtime_now_ns`): the machine's
    /// for a real runtime, the virtual one for a manual runtime. Also after
    /// shutdown. 0 in a fork() child.
    pub fn now(&self, clock: Clock) -> u64 {
        unsafe { ffi::tw_runtime_now_ns(self.ptr, clock as i32) }
    }

    /// A manual runtime ([`Config::manual_clock`]): moves its three clocks
    /// forward by exactly `step` and runs, on this thread, every callback
    /// that falls due, in deadline order (deadlines rounded up to the
    /// resolution; ties in start order), the clocks stepped to each deadline
    /// as it goes: [`Runtime::now`] inside a callback reads its deadline,
    /// and timers that callbacks start (or re-arm) due inside the window run
    /// in this call too. A periodic timer crossed k times: `Skip` runs once
    /// with `missed` += k - 1 (judged at the end of the window), `Burst` k
    /// times, `Delay` as its runs fall. Timers on a [`Queue`] are delivered
    /// to it (`queue.run()` runs them). Returns the number of callbacks run.
    /// Concurrent calls take turns; other threads may start, stop and reset
    /// meanwhile. Errors: `INVALID` (not a manual runtime; `step` above
    /// `TW_MAX_DELAY_NS`), `DEADLOCK` (from inside one of this runtime's
    /// callbacks: nothing done), `SHUTDOWN`, `FORKED`.
    pub fn advance(&self, step: Duration) -> Result<usize, Error> {
        let rc = unsafe { ffi::tw_runtime_advance(self.ptr, nanos(step)) };
        if rc < 0 {
            Err(Error(rc))
        } else {
            Ok(rc as usize)
        }
    }

    /// Cancels pending timers, waits for running callbacks, stops the threads.
    /// Err(Error::DEADLOCK) from one of this runtime's callbacks.
    pub fn shutdown(&self) -> Result<(), Error> {
        check(unsafe { ffi::tw_runtime_shutdown(self.ptr) })
    }

    /// The runtime's counters (`tw_stats`): `callback_exceptions` counts the
    /// panics of closures (in their call or their `Drop`) as well as C++
    /// exceptions.
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
    /// all; `None`: until one is due or the runtime shuts down). A timeout
    /// of `TW_MAX_DELAY_NS` (2^60 ns, about 36.5 years) or more, up to
    /// `Duration::MAX`, waits as `None` does: a long timeout means long.
    /// Errors: `INVALID` (max 0), `DEADLOCK` (from one of its own
    /// callbacks), `SHUTDOWN` (nothing ran, runtime shut down), `FORKED`.
    pub fn run(&self, max: usize, timeout: Option<Duration>) -> Result<usize, Error> {
        let t = match timeout {
            None => -1,
            // (Passed on, a timeout near i64::MAX ns overflowed the deadline
            // the C run computes from its clock: it returned at once.)
            Some(d) if d.as_nanos() >= u128::from(ffi::TW_MAX_DELAY_NS) => -1,
            Some(d) => d.as_nanos() as i64, // below 2^60: exact
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
