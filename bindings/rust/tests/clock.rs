// SPDX-License-Identifier: MIT OR Apache-2.0
//! Clocks and the manual clock (1.3) in the Rust binding: `TimerSpec::clock`,
//! `now_ns_clock`, `Config::manual_clock`, `Runtime::advance`, `Runtime::now`.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};
use tickwheel::{ffi, now_ns_clock, Clock, Config, Error, PeriodPolicy, Runtime, TimerSpec};

const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
const CLOCKS: [Clock; 3] = [Clock::Monotonic, Clock::Boottime, Clock::Realtime];

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A manual runtime and its clock at creation.
fn manual() -> (Arc<Runtime>, u64) {
    let rt = Arc::new(Runtime::new_manual().unwrap());
    let t0 = rt.now(Clock::Monotonic);
    (rt, t0)
}

type Log<T> = Arc<Mutex<Vec<T>>>;

fn log<T>() -> Log<T> {
    Arc::new(Mutex::new(Vec::new()))
}

#[test]
fn thirty_second_timer_fires_only_after_advance() {
    let (rt, t0) = manual();
    let fired: Log<(u64, std::thread::ThreadId)> = log();
    let (f, r) = (fired.clone(), rt.clone());
    rt.start(secs(30), Duration::ZERO, move |_| {
        f.lock().unwrap().push((r.now(Clock::Monotonic) - t0, std::thread::current().id()))
    })
    .unwrap();
    std::thread::sleep(ms(30)); // no driver thread: real time does nothing
    assert!(fired.lock().unwrap().is_empty());
    assert_eq!(rt.now(Clock::Monotonic), t0);
    assert_eq!(rt.advance(ms(29_999)), Ok(0));
    assert!(fired.lock().unwrap().is_empty());
    assert_eq!(rt.advance(ms(1)), Ok(1));
    assert_eq!(*fired.lock().unwrap(), vec![(30 * S, std::thread::current().id())]);
    assert_eq!(rt.advance(secs(100)), Ok(0));
}

#[test]
fn virtual_now_moves_by_exactly_the_step() {
    let (rt, _) = manual();
    let before: Vec<u64> = CLOCKS.iter().map(|&c| rt.now(c)).collect();
    for (i, &c) in CLOCKS.iter().enumerate() {
        let machine = now_ns_clock(c);
        assert!(machine.abs_diff(before[i]) < 5 * S, "{c:?} starts at the machine's value");
    }
    std::thread::sleep(ms(20));
    assert_eq!(CLOCKS.iter().map(|&c| rt.now(c)).collect::<Vec<_>>(), before);
    assert_eq!(rt.advance(Duration::from_nanos(1_500_000_001)), Ok(0));
    assert_eq!(rt.advance(Duration::ZERO), Ok(0));
    for (i, &c) in CLOCKS.iter().enumerate() {
        assert_eq!(rt.now(c) - before[i], 1_500_000_001, "{c:?}");
    }
}

#[test]
fn deadline_order_and_ties_in_start_order() {
    let (rt, t0) = manual();
    let order: Log<(&'static str, u64)> = log();
    for (name, d) in [("c", 3), ("a", 1), ("b1", 2), ("b2", 2), ("b3", 2)] {
        let (o, r) = (order.clone(), rt.clone());
        rt.start(secs(d), Duration::ZERO, move |_| o.lock().unwrap().push((name, r.now(Clock::Monotonic) - t0)))
            .unwrap();
    }
    assert_eq!(rt.advance(secs(10)), Ok(5));
    assert_eq!(*order.lock().unwrap(), vec![("a", S), ("b1", 2 * S), ("b2", 2 * S), ("b3", 2 * S), ("c", 3 * S)]);
}

fn chain(rt: Arc<Runtime>, t0: u64, n: u32, seen: Log<(u32, u64)>) {
    let r = rt.clone();
    rt.start(secs(1), Duration::ZERO, move |_| {
        seen.lock().unwrap().push((n, r.now(Clock::Monotonic) - t0));
        if n < 5 {
            chain(r.clone(), t0, n + 1, seen.clone());
        }
    })
    .unwrap();
}

#[test]
fn chains_started_from_callbacks_run_in_the_same_advance() {
    let (rt, t0) = manual();
    let seen: Log<(u32, u64)> = log();
    chain(rt.clone(), t0, 1, seen.clone());
    assert_eq!(rt.advance(ms(3500)), Ok(3));
    assert_eq!(*seen.lock().unwrap(), vec![(1, S), (2, 2 * S), (3, 3 * S)]);
    assert_eq!(rt.advance(secs(10)), Ok(2));
    assert_eq!(seen.lock().unwrap()[3..], [(4, 4 * S), (5, 5 * S)]);
}

#[test]
fn periodic_skip_and_burst_in_manual_time() {
    let (rt, t0) = manual();
    let skip_runs: Log<(u64, u64)> = log(); // (at, missed)
    let (l, r) = (skip_runs.clone(), rt.clone());
    let skip = rt
        .start_with(&TimerSpec::after(ms(10)).every(ms(10)), move |id| {
            let info = r.query(id).unwrap().unwrap();
            l.lock().unwrap().push((r.now(Clock::Monotonic) - t0, info.missed));
        })
        .unwrap();
    let burst_runs: Log<u64> = log();
    let (l, r) = (burst_runs.clone(), rt.clone());
    let burst = rt
        .start_with(&TimerSpec::after(ms(10)).every(ms(10)).policy(PeriodPolicy::Burst), move |_| {
            l.lock().unwrap().push(r.now(Clock::Monotonic) - t0)
        })
        .unwrap();
    assert_eq!(rt.advance(ms(35)), Ok(4)); // skip once, burst 3 times
    assert_eq!(*skip_runs.lock().unwrap(), vec![(10 * MS, 2)]);
    assert_eq!(*burst_runs.lock().unwrap(), vec![10 * MS, 20 * MS, 30 * MS]);
    let info = rt.query(skip).unwrap().unwrap();
    assert_eq!((info.runs, info.missed, info.deadline_ns), (1, 2, Some(t0 + 40 * MS))); // on its grid
    assert_eq!(info.remaining_from(rt.now(Clock::Monotonic)), Some(ms(5)));
    assert_eq!(rt.advance(ms(5)), Ok(2)); // 40 ms: each once
    assert_eq!(rt.stop(skip), Ok(true));
    assert_eq!(rt.stop(burst), Ok(true));
    assert_eq!(rt.advance(secs(1)), Ok(0));
}

#[test]
fn timers_on_other_clocks_in_manual_time() {
    let (rt, _) = manual();
    let fired = Arc::new(AtomicUsize::new(0));
    for c in [Clock::Boottime, Clock::Realtime] {
        let f = fired.clone();
        let id = rt
            .start_with(&TimerSpec::after(secs(7)).clock(c), move |_| {
                f.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        let info = rt.query(id).unwrap().unwrap();
        let d = info.deadline_ns.unwrap();
        assert!(d >= rt.now(c) + 7 * S && d < rt.now(c) + 7 * S + 2 * MS, "{c:?}: deadline on its clock");
        // At an absolute deadline on that clock:
        let f = fired.clone();
        rt.start_with(&TimerSpec::at(rt.now(c) + 7 * S).clock(c), move |_| {
            f.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    }
    assert_eq!(rt.advance(ms(6_990)), Ok(0));
    assert_eq!(rt.advance(ms(10)), Ok(4));
    assert_eq!(fired.load(Ordering::SeqCst), 4);
}

#[test]
fn queue_bound_timers_are_delivered_to_the_queue() {
    let rt = Runtime::new_manual().unwrap();
    let q = rt.queue().unwrap();
    let fired = Arc::new(AtomicUsize::new(0));
    let f = fired.clone();
    rt.start_on(&q, secs(1), Duration::ZERO, move |_| {
        f.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    assert_eq!(rt.advance(secs(1)), Ok(0)); // delivered, not run
    assert_eq!(q.stats().unwrap().due, 1);
    assert_eq!(q.run(16, Some(Duration::ZERO)), Ok(1));
    assert_eq!(fired.load(Ordering::SeqCst), 1);
}

#[test]
fn advance_from_a_callback_is_deadlock() {
    let (rt, t0) = manual();
    let (tx, rx) = mpsc::channel();
    let r = rt.clone();
    rt.start(secs(1), Duration::ZERO, move |_| tx.send(r.advance(secs(1))).unwrap()).unwrap();
    assert_eq!(rt.advance(secs(1)), Ok(1));
    assert_eq!(rx.recv().unwrap(), Err(Error::DEADLOCK));
    assert_eq!(rt.now(Clock::Monotonic) - t0, S); // the inner call did nothing
}

#[test]
fn advance_on_a_real_runtime_is_invalid() {
    let rt = Runtime::with_config(1, 1, Duration::ZERO).unwrap();
    assert_eq!(rt.advance(secs(1)), Err(Error::INVALID));
    assert_eq!(rt.advance(Duration::ZERO), Err(Error::INVALID));
    let m = Runtime::from_config(&Config { manual_clock: true, ..Config::default() }).unwrap();
    assert_eq!(m.advance(Duration::from_nanos(ffi::TW_MAX_DELAY_NS + 1)), Err(Error::INVALID));
    assert_eq!(m.advance(Duration::MAX), Err(Error::INVALID));
    m.shutdown().unwrap();
    assert_eq!(m.advance(secs(1)), Err(Error::SHUTDOWN));
}

#[test]
fn an_hour_of_virtual_time_is_quick() {
    let (rt, _) = manual();
    let n = Arc::new(AtomicUsize::new(0));
    let f = n.clone();
    rt.start_with(&TimerSpec::after(secs(1)).every(secs(1)).policy(PeriodPolicy::Burst), move |_| {
        f.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    let start = Instant::now();
    assert_eq!(rt.advance(secs(3600)), Ok(3600));
    assert_eq!(n.load(Ordering::SeqCst), 3600);
    assert!(start.elapsed() < secs(5));
}

#[test]
fn closures_are_dropped_inside_advance() {
    let (rt, _) = manual();
    let drops = Arc::new(AtomicUsize::new(0));
    let d = common::DropCounter(drops.clone());
    rt.start(secs(1), Duration::ZERO, move |_| {
        let _keep = &d;
    })
    .unwrap();
    assert_eq!(rt.advance(secs(1)), Ok(1));
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn realtime_timer_of_50ms_is_not_early() {
    let rt = Runtime::with_config(1, 1, Duration::ZERO).unwrap();
    let start = now_ns_clock(Clock::Realtime);
    let (tx, rx) = mpsc::channel();
    let id = rt
        .start_with(&TimerSpec::after(ms(50)).clock(Clock::Realtime), move |_| {
            tx.send(now_ns_clock(Clock::Realtime)).unwrap()
        })
        .unwrap();
    let d = rt.query(id).unwrap().unwrap().deadline_ns.unwrap();
    assert!(d >= start + 50 * MS && d < start + 5 * S, "deadline on the wall clock");
    let fired = rx.recv_timeout(common::WAIT).unwrap();
    assert!(fired >= start + 50 * MS, "early by {} ns", start + 50 * MS - fired);
}

#[test]
fn boottime_timer_fires() {
    let rt = Runtime::with_config(1, 1, Duration::ZERO).unwrap();
    let deadline = now_ns_clock(Clock::Boottime) + 30 * MS;
    let (tx, rx) = mpsc::channel();
    rt.start_with(&TimerSpec::at(deadline).clock(Clock::Boottime), move |_| {
        tx.send(now_ns_clock(Clock::Boottime)).unwrap()
    })
    .unwrap();
    assert!(rx.recv_timeout(common::WAIT).unwrap() >= deadline);
    assert!(rt.now(Clock::Boottime).abs_diff(now_ns_clock(Clock::Boottime)) < S);
}

#[test]
fn unknown_clock_is_invalid() {
    assert_eq!(Clock::try_from(3), Err(Error::INVALID));
    assert_eq!(Clock::try_from(-1), Err(Error::INVALID));
    assert_eq!("utc".parse::<Clock>(), Err(Error::INVALID));
    assert_eq!("realtime".parse::<Clock>(), Ok(Clock::Realtime));
    assert_eq!(Clock::try_from(ffi::TW_CLOCK_BOOTTIME), Ok(Clock::Boottime));
    assert_eq!(Clock::default(), Clock::Monotonic);
    assert_eq!(unsafe { ffi::tw_now_ns_clock(3) }, 0);
    // Below the safe API: the library refuses an unknown tw_timer_spec.clock
    // without calling the release hook (the arg stays the caller's).
    unsafe extern "C" fn cb(_: *mut std::ffi::c_void, _: u64) {}
    unsafe extern "C" fn release(arg: *mut std::ffi::c_void) {
        (*(arg as *const AtomicUsize)).fetch_add(1, Ordering::SeqCst);
    }
    let released = AtomicUsize::new(0);
    let mut spec = common::raw_spec();
    spec.callback = Some(cb);
    spec.release = Some(release);
    spec.arg = &released as *const AtomicUsize as *mut std::ffi::c_void;
    spec.clock = 3;
    let mut id = 0;
    // The runtime's pointer is private: a fresh one through the raw API.
    let mut raw = std::ptr::null_mut();
    let mut cfg = ffi::tw_config::default();
    unsafe {
        ffi::tw_config_init(&mut cfg);
        cfg.shards = 1;
        cfg.workers = 1;
        assert_eq!(ffi::tw_runtime_create(&cfg, &mut raw), ffi::TW_OK);
        assert_eq!(ffi::tw_timer_start_ex(raw, &spec, &mut id), ffi::TW_EINVAL);
        assert_eq!(ffi::tw_runtime_now_ns(raw, 3), 0);
        assert_eq!(ffi::tw_runtime_destroy(raw), ffi::TW_OK);
    }
    assert_eq!(released.load(Ordering::SeqCst), 0);
}

#[test]
fn spec_layout() {
    // tw_timer_spec.clock: an int32 at offset 68 of the 88-byte spec.
    assert_eq!(std::mem::size_of::<ffi::tw_timer_spec>(), 88);
    let s = std::mem::MaybeUninit::<ffi::tw_timer_spec>::uninit();
    let base = s.as_ptr() as usize;
    let at = unsafe { std::ptr::addr_of!((*s.as_ptr()).clock) } as usize;
    assert_eq!(at - base, 68);
}
