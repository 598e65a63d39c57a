// SPDX-License-Identifier: MIT OR Apache-2.0
//! fork(): in the child every method of a runtime created before the fork
//! returns Err(Error::FORKED), none of its callbacks runs, none of its
//! closures is dropped, dropping it there does not hang; the parent is
//! unaffected (ctest capi_rust).
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{in_fork_child, wait_until, Check, DropCounter, FORK_LOCK, WAIT};
use tickwheel::{Error, Runtime, TimerId};

#[test]
fn inherited_runtime_in_a_fork_child() {
    let _one_fork_at_a_time = FORK_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut rt = Some(Runtime::with_config(2, 2, Duration::ZERO).unwrap());
    let r = rt.as_ref().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let periodic_drops = Arc::new(AtomicUsize::new(0));
    let pending_runs = Arc::new(AtomicUsize::new(0));
    let pending_drops = Arc::new(AtomicUsize::new(0));
    let periodic = {
        let (runs, guard) = (runs.clone(), DropCounter(periodic_drops.clone()));
        r.start(Duration::from_millis(2), Duration::from_millis(2), move |_| {
            let _keep = &guard;
            runs.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap()
    };
    let pending = {
        let (runs, guard) = (pending_runs.clone(), DropCounter(pending_drops.clone()));
        // Due while the child runs.
        r.start(Duration::from_millis(100), Duration::ZERO, move |_| {
            let _keep = &guard;
            runs.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap()
    };
    assert!(wait_until(|| runs.load(Ordering::SeqCst) >= 2));

    let failures = in_fork_child(Duration::from_secs(60), || {
        let mut c = Check::default();
        let r = rt.as_ref().unwrap();
        // The counters below are the child's copies: only a callback or a
        // release in the child could change them.
        let runs_at_fork = runs.load(Ordering::SeqCst);
        let drops = Arc::new(AtomicUsize::new(0));
        let guard = DropCounter(drops.clone());
        let res = r.start(Duration::ZERO, Duration::ZERO, move |_| {
            let _keep = &guard;
        });
        c.that(res == Err(Error::FORKED), format!("start: {res:?}"));
        c.that(drops.load(Ordering::SeqCst) == 1, "the rejected closure is dropped exactly once (by the binding)");
        c.that(Arc::strong_count(&drops) == 1, "nothing holds the rejected closure");
        c.that(r.stop(periodic) == Err(Error::FORKED), "stop");
        c.that(r.stop_sync(periodic) == Err(Error::FORKED), "stop_sync");
        c.that(r.reset(pending, Duration::ZERO) == Err(Error::FORKED), "reset");
        c.that(r.stats().err() == Some(Error::FORKED), "stats");
        c.that(r.shutdown() == Err(Error::FORKED), "shutdown");
        c.that(r.stop(TimerId(0)) == Err(Error::FORKED), "stop of id 0");
        std::thread::sleep(Duration::from_millis(200)); // the one-shot is due meanwhile
        c.that(runs.load(Ordering::SeqCst) == runs_at_fork, "a parent callback ran in the child");
        c.that(pending_runs.load(Ordering::SeqCst) == 0, "the parent's one-shot ran in the child");
        // Dropping it frees the child's copy: at once, releasing nothing.
        let t0 = Instant::now();
        drop(rt.take());
        c.that(t0.elapsed() < Duration::from_secs(2), "drop in the child is quick");
        c.that(periodic_drops.load(Ordering::SeqCst) == 0, "a parent closure was dropped in the child");
        c.that(pending_drops.load(Ordering::SeqCst) == 0, "a parent closure was dropped in the child");
        // A runtime of the child's own takes, stops and releases timers
        // (firing: child_runtime_fires_after_the_parents_callbacks_ran).
        match Runtime::with_config(1, 1, Duration::ZERO) {
            Ok(own) => {
                let drops = Arc::new(AtomicUsize::new(0));
                let guard = DropCounter(drops.clone());
                let id = own.start(Duration::from_secs(10), Duration::ZERO, move |_| {
                    let _keep = &guard;
                });
                c.that(id.is_ok(), "start in the child's runtime");
                if let Ok(id) = id {
                    c.that(own.stop(id) == Ok(true), "stop in the child's runtime");
                }
                c.that(drops.load(Ordering::SeqCst) == 1, "released by the child's runtime");
            }
            Err(e) => c.that(false, format!("create in the child: {e}")),
        }
        c.0
    });
    assert!(failures.is_empty(), "{failures:#?}");

    // The parent is unaffected: its timers still fire, then release once.
    let n = runs.load(Ordering::SeqCst);
    assert!(wait_until(|| runs.load(Ordering::SeqCst) >= n + 3));
    assert!(wait_until(|| pending_drops.load(Ordering::SeqCst) == 1));
    assert_eq!(pending_runs.load(Ordering::SeqCst), 1);
    let r = rt.as_ref().unwrap();
    assert_eq!(r.stop_sync(periodic), Ok(true));
    assert_eq!(periodic_drops.load(Ordering::SeqCst), 1);
    drop(rt);
    assert_eq!(pending_drops.load(Ordering::SeqCst), 1);
    assert_eq!(periodic_drops.load(Ordering::SeqCst), 1);
}

/// A runtime created in a fork child works normally, also once oneTBB's
/// workers have run a callback in the parent (oneTBB is unusable in such a
/// child: its worker pool is copied without its threads; the library then
/// runs the child's callbacks on threads of the runtime's own).
#[test]
fn child_runtime_fires_after_the_parents_callbacks_ran() {
    let _one_fork_at_a_time = FORK_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let rt = Runtime::with_config(2, 2, Duration::ZERO).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    rt.start(Duration::ZERO, Duration::ZERO, move |_| tx.send(()).unwrap()).unwrap();
    rx.recv_timeout(WAIT).unwrap();
    // The workers go to sleep (forked while they spun, the library bug hid).
    std::thread::sleep(Duration::from_millis(200));
    let failures = in_fork_child(Duration::from_secs(60), || {
        let own = Runtime::with_config(1, 1, Duration::ZERO).unwrap();
        let fired = Arc::new(AtomicUsize::new(0));
        let f = fired.clone();
        own.start(Duration::from_millis(5), Duration::ZERO, move |_| {
            f.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        let end = Instant::now() + WAIT;
        while fired.load(Ordering::SeqCst) == 0 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
        }
        if fired.load(Ordering::SeqCst) == 0 {
            std::mem::forget(own); // in case it is stuck: dropping it could hang
            return vec!["the child's own runtime did not fire".to_string()];
        }
        vec![]
    });
    assert!(failures.is_empty(), "{}", failures.join("; "));
}
