// SPDX-License-Identifier: MIT OR Apache-2.0
//! A runtime created in a fork child fires its timers (ctest capi_rust). Its
//! own test binary: no callback may have run in this process before the fork
//! (see child_runtime_fires_after_the_parents_callbacks_ran in fork.rs).
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{in_fork_child, Check, DropCounter, WAIT};
use tickwheel::{Error, Runtime};

#[test]
fn runtime_created_in_a_fork_child_fires() {
    let mut parent = Some(Runtime::with_config(2, 2, Duration::ZERO).unwrap());
    let failures = in_fork_child(Duration::from_secs(60), || {
        let mut c = Check::default();
        let r = parent.as_ref().unwrap();
        c.that(r.start(Duration::ZERO, Duration::ZERO, |_| {}) == Err(Error::FORKED), "start on the parent's runtime");
        drop(parent.take());
        let own = Runtime::with_config(1, 1, Duration::ZERO).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let drops = Arc::new(AtomicUsize::new(0));
        let guard = DropCounter(drops.clone());
        own.start(Duration::from_millis(5), Duration::ZERO, move |_| {
            let _keep = &guard;
            tx.send(()).unwrap();
        })
        .unwrap();
        let fired = rx.recv_timeout(WAIT).is_ok();
        c.that(fired, "the child's own runtime fires");
        if !fired {
            std::mem::forget(own); // dropping it would hang on the stuck callback
            return c.0;
        }
        drop(own);
        c.that(drops.load(Ordering::SeqCst) == 1, "its closure is dropped exactly once");
        c.0
    });
    assert!(failures.is_empty(), "{failures:#?}");
    // The parent still works.
    let (tx, rx) = std::sync::mpsc::channel();
    parent.as_ref().unwrap().start(Duration::ZERO, Duration::ZERO, move |_| tx.send(()).unwrap()).unwrap();
    rx.recv_timeout(WAIT).unwrap();
}
