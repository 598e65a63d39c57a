// SPDX-License-Identifier: MIT OR Apache-2.0
//! Starts, stops and fires timers through the C API (ctest capi_rust).
mod common;
use common::{wait_until, DropCounter, WAIT};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use tickwheel::{Config, Error, Runtime, TimerId};

/// Starts a timer whose closure counts its runs and its drop (its release);
/// returns the id and the two counts.
fn start_counted(
    rt: &Runtime,
    delay: Duration,
    period: Duration,
) -> (TimerId, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = DropCounter(drops.clone());
    let r = runs.clone();
    let id = rt
        .start(delay, period, move |_| {
            let _keep = &guard;
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    (id, runs, drops)
}

#[test]
fn version_matches() {
    assert_eq!(tickwheel::version(), (1, 7, 0));
    assert_eq!(env!("CARGO_PKG_VERSION"), "1.7.0");
}

#[test]
fn one_shot_fires_once_never_early() {
    let rt = Runtime::with_config(2, 2, Duration::ZERO).unwrap();
    let (tx, rx) = mpsc::channel();
    let before = tickwheel::now_ns();
    let id = rt
        .start(Duration::from_millis(20), Duration::ZERO, move |id| {
            tx.send((id, tickwheel::now_ns())).unwrap();
        })
        .unwrap();
    assert_ne!(id.0, 0);
    let (seen, at) = rx.recv_timeout(WAIT).unwrap();
    assert_eq!(seen, id);
    assert!(at >= before + 20_000_000, "fired early");
    // Fired: its closure (and the sender) is dropped, nothing to stop.
    assert!(rx.recv_timeout(Duration::from_millis(30)).is_err());
    assert_eq!(rt.stop(id), Ok(false));
}

#[test]
fn stop_before_it_fires_drops_the_closure() {
    let rt = Runtime::new().unwrap();
    let (id, runs, drops) = start_counted(&rt, Duration::from_secs(10), Duration::ZERO);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    assert_eq!(rt.stop(id), Ok(true));
    assert_eq!(drops.load(Ordering::SeqCst), 1, "released inside stop");
    assert_eq!(rt.stop(id), Ok(false));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[test]
fn periodic_fires_until_stop_sync() {
    let rt = Runtime::new().unwrap();
    let (id, runs, drops) = start_counted(&rt, Duration::from_millis(2), Duration::from_millis(2));
    assert!(wait_until(|| runs.load(Ordering::SeqCst) >= 5));
    assert_eq!(rt.stop_sync(id), Ok(true));
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    let n = runs.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(runs.load(Ordering::SeqCst), n);
}

#[test]
fn reset_and_callbacks_using_the_runtime() {
    let rt = Arc::new(Runtime::new().unwrap());
    let (tx, rx) = mpsc::channel();
    // A one-shot timer re-arming itself once from its own callback.
    let rt2 = rt.clone();
    let mut runs = 0;
    rt.start(Duration::ZERO, Duration::ZERO, move |id: TimerId| {
        runs += 1;
        if runs == 1 {
            assert_eq!(rt2.reset(id, Duration::from_millis(5)), Ok(true));
        }
        tx.send(runs).unwrap();
    })
    .unwrap();
    assert_eq!(rx.recv_timeout(WAIT), Ok(1));
    assert_eq!(rx.recv_timeout(WAIT), Ok(2));
    // Dropping the last Arc inside a callback would be TW_EDEADLK: keep ours.
    assert!(rx.recv_timeout(Duration::from_millis(20)).is_err());
}

#[test]
fn errors_are_codes() {
    let rt = Runtime::new().unwrap();
    let too_long = Duration::from_nanos(tickwheel::ffi::TW_MAX_DELAY_NS + 1);
    assert_eq!(rt.start(too_long, Duration::ZERO, |_| {}), Err(Error::INVALID));
    assert_eq!(rt.start(Duration::ZERO, too_long, |_| {}), Err(Error::INVALID));
    assert_eq!(rt.stop(TimerId(0)), Ok(false));
    assert_eq!(rt.stop(TimerId(0xdead_beef)), Ok(false));
    assert_eq!(rt.reset(TimerId(0), Duration::ZERO), Ok(false));
    assert!(Error::SHUTDOWN.to_string().contains("shut down"));
}

/// A closure that counts its drops, for a start expected to fail.
fn counted(drops: &Arc<AtomicUsize>) -> impl FnMut(TimerId) + Send + 'static {
    let guard = DropCounter(drops.clone());
    move |_| {
        let _keep = &guard;
    }
}

#[test]
fn failed_start_releases_the_closure() {
    // TW_EINVAL: the library rejects the call without taking the closure (no
    // release hook); the binding drops it, exactly once, before returning.
    let rt = Runtime::new().unwrap();
    let too_long = Duration::from_nanos(tickwheel::ffi::TW_MAX_DELAY_NS + 1);
    for (delay, period) in [(too_long, Duration::ZERO), (Duration::ZERO, too_long)] {
        let drops = Arc::new(AtomicUsize::new(0));
        assert_eq!(rt.start(delay, period, counted(&drops)), Err(Error::INVALID));
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }
    assert_eq!(rt.stats().unwrap().live, 0);
}

#[test]
fn start_beyond_max_timers_releases_the_closure_once() {
    // TW_EAGAIN: the library's release hook drops the closure inside the
    // failed call; the binding must not drop it again.
    let rt = Runtime::from_config(&Config { shards: 1, workers: 1, max_timers: 1, ..Config::default() }).unwrap();
    let first = Arc::new(AtomicUsize::new(0));
    let id = rt.start(Duration::from_secs(10), Duration::ZERO, counted(&first)).unwrap();
    for _ in 0..3 {
        let drops = Arc::new(AtomicUsize::new(0));
        assert_eq!(rt.start(Duration::ZERO, Duration::ZERO, counted(&drops)), Err(Error::LIMIT));
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert_eq!(Arc::strong_count(&drops), 1, "nothing else holds the closure");
    }
    assert_eq!(first.load(Ordering::SeqCst), 0, "the pending timer keeps its closure");
    assert_eq!(rt.stop(id), Ok(true));
    assert_eq!(first.load(Ordering::SeqCst), 1);
    // A slot is free again.
    let drops = Arc::new(AtomicUsize::new(0));
    let id = rt.start(Duration::from_secs(10), Duration::ZERO, counted(&drops)).unwrap();
    assert_eq!(rt.stop(id), Ok(true));
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn start_after_shutdown_releases_the_closure_once() {
    // TW_ESHUTDOWN: released by the library's hook inside the call.
    let rt = Runtime::new().unwrap();
    rt.shutdown().unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    assert_eq!(rt.start(Duration::ZERO, Duration::ZERO, counted(&drops)), Err(Error::SHUTDOWN));
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn forked_error_is_distinct_and_says_fork() {
    assert_eq!(Error::FORKED, Error(tickwheel::ffi::TW_EFORKED));
    assert_eq!(Error::FORKED.0, -1001);
    let text = Error::FORKED.to_string();
    assert!(text.contains("fork()"), "{text}");
    assert!(text.contains("-1001"), "{text}");
}

#[test]
fn shutdown_cancels_pending_and_refuses_more() {
    let rt = Runtime::new().unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    for _ in 0..10 {
        let guard = DropCounter(drops.clone());
        rt.start(Duration::from_secs(10), Duration::ZERO, move |_| {
            let _keep = &guard;
        })
        .unwrap();
    }
    rt.shutdown().unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 10);
    assert_eq!(rt.start(Duration::ZERO, Duration::ZERO, |_| {}), Err(Error::SHUTDOWN));
    assert_eq!(rt.stop(TimerId(1)), Err(Error::SHUTDOWN));
    let st = rt.stats().unwrap();
    assert_eq!(st.shut_down, 1);
    assert_eq!(st.cancelled_at_shutdown, 10);
}

#[test]
fn many_timers_from_many_threads() {
    let rt = Arc::new(Runtime::with_config(2, 2, Duration::ZERO).unwrap());
    let fired = Arc::new(AtomicUsize::new(0));
    let expected = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (rt, fired, expected) = (rt.clone(), fired.clone(), expected.clone());
            std::thread::spawn(move || {
                for i in 0..500u64 {
                    let f = fired.clone();
                    let id = rt
                        .start(Duration::from_micros((i % 7) * 300), Duration::ZERO, move |_| {
                            f.fetch_add(1, Ordering::SeqCst);
                        })
                        .unwrap();
                    if i % 3 == 0 && rt.stop(id).unwrap() {
                        continue;
                    }
                    expected.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let want = expected.load(Ordering::SeqCst);
    assert!(wait_until(|| fired.load(Ordering::SeqCst) == want));
}
