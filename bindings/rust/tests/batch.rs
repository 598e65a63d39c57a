// SPDX-License-Identifier: MIT OR Apache-2.0
//! The batch calls of library 1.4 (ctest capi_rust): Runtime::start_many /
//! stop_many / reset_many over slices, one call into the library each.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{wait_until, DropCounter};
use tickwheel::{Config, Error, Runtime, TimerId, TimerSpec};

#[test]
fn start_many_starts_each_spec_never_early() {
    let rt = Runtime::with_config(2, 2, Duration::ZERO).unwrap();
    let fired = Arc::new(Mutex::new(Vec::new()));
    let specs: Vec<TimerSpec> = (0..32).map(|i| TimerSpec::after(Duration::from_millis(i % 8))).collect();
    let before = tickwheel::now_ns();
    let ids = rt
        .start_many(&specs, |i| {
            let fired = fired.clone();
            move |_| fired.lock().unwrap().push((i, tickwheel::now_ns()))
        })
        .unwrap();
    assert_eq!(ids.len(), 32);
    assert!(ids.iter().all(|id| id.is_some()));
    assert!(wait_until(|| fired.lock().unwrap().len() == 32));
    for &(i, at) in fired.lock().unwrap().iter() {
        assert!(at >= before + (i as u64 % 8) * 1_000_000, "timer {i} fired early");
    }
}

#[test]
fn stop_many_and_reset_many_answer_per_element() {
    let rt = Runtime::with_config(3, 2, Duration::ZERO).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let specs: Vec<TimerSpec> = (0..6).map(|i| TimerSpec::after(Duration::from_secs(60)).shard(i)).collect();
    let ids: Vec<TimerId> = rt
        .start_many(&specs, |_| {
            let d = DropCounter(drops.clone());
            move |_| {
                let _ = &d;
            }
        })
        .unwrap()
        .into_iter()
        .map(Option::unwrap)
        .collect();
    let mut batch = ids[..3].to_vec();
    batch.extend([TimerId(0), TimerId(0xDEAD_BEEF), ids[0]]);
    assert_eq!(rt.stop_many(&batch).unwrap(), vec![true, true, true, false, false, false]);
    assert_eq!(drops.load(Ordering::SeqCst), 3, "each stopped closure dropped inside the call");
    assert_eq!(rt.reset_many(&ids, Duration::from_secs(120)).unwrap(), vec![false, false, false, true, true, true]);
    assert_eq!(rt.reset_many(&ids, Duration::from_nanos(u64::MAX)), Err(Error::INVALID));
    assert_eq!(rt.stop_many(&ids[3..]).unwrap(), vec![true; 3]);
    assert_eq!(drops.load(Ordering::SeqCst), 6);
    assert_eq!(rt.stop_many(&[]).unwrap(), Vec::<bool>::new());
    let st = rt.stats().unwrap();
    assert_eq!((st.started, st.stopped, st.reset), (6, 6, 3));
}

#[test]
fn start_many_refuses_a_bad_spec_before_starting_anything() {
    let rt = Runtime::with_config(1, 1, Duration::ZERO).unwrap();
    let made = Arc::new(AtomicUsize::new(0));
    let specs = [TimerSpec::after(Duration::from_millis(1)), TimerSpec::after(Duration::from_nanos(u64::MAX))];
    let m = made.clone();
    let r = rt.start_many(&specs, move |_| {
        m.fetch_add(1, Ordering::SeqCst);
        |_| {}
    });
    assert_eq!(r, Err(Error::INVALID));
    assert_eq!(made.load(Ordering::SeqCst), 0, "make was called for a refused batch");
    assert_eq!(rt.stats().unwrap().started, 0);
}

#[test]
fn start_many_beyond_the_limit_gives_none_and_drops_those_closures() {
    let rt = Runtime::from_config(&Config { shards: 1, workers: 1, max_timers: 2, ..Config::default() }).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let specs = [TimerSpec::after(Duration::from_secs(60)); 4];
    let ids = rt
        .start_many(&specs, |_| {
            let d = DropCounter(drops.clone());
            move |_| {
                let _ = &d;
            }
        })
        .unwrap();
    assert_eq!(ids.iter().map(Option::is_some).collect::<Vec<_>>(), vec![true, true, false, false]);
    assert_eq!(drops.load(Ordering::SeqCst), 2, "the two not started were dropped before start_many returned");
    rt.shutdown().unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 4);
    assert_eq!(rt.stop_many(&[TimerId(1)]), Err(Error::SHUTDOWN));
    let after = rt.start_many(&specs[..1], |_| |_| {}).unwrap();
    assert_eq!(after, vec![None]);
}
