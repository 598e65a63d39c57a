// SPDX-License-Identifier: MIT OR Apache-2.0
//! Delivery queues through the C API (ctest capi_rust): closures run on the
//! thread calling Queue::run, stop of a due timer is exact, drop cancels.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tickwheel::{Error, Runtime};

/// Counts its drops: the closure's release.
struct DropCounter(Arc<AtomicUsize>);
impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn readable(fd: i32, ms: i32) -> bool {
    #[repr(C)]
    struct PollFd {
        fd: i32,
        events: i16,
        revents: i16,
    }
    extern "C" {
        fn poll(fds: *mut PollFd, n: u64, timeout: i32) -> i32;
    }
    let mut p = PollFd { fd, events: 1, revents: 0 }; // POLLIN
    unsafe { poll(&mut p, 1, ms) == 1 }
}

#[test]
fn callbacks_run_on_the_thread_calling_run() {
    let rt = Runtime::with_config(2, 2, Duration::ZERO).unwrap();
    let q = rt.queue().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let start = tickwheel::now_ns();
    for i in 0..20u64 {
        let seen = seen.clone();
        rt.start_on(&q, Duration::from_millis(i % 5), Duration::ZERO, move |_| {
            seen.lock().unwrap().push((std::thread::current().id(), tickwheel::now_ns()));
        })
        .unwrap();
    }
    let mut ran = 0;
    while ran < 20 {
        ran += q.run(64, Some(Duration::from_secs(10))).unwrap();
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 20);
    for (tid, at) in seen.iter() {
        assert_eq!(*tid, std::thread::current().id());
        assert!(*at >= start);
    }
    assert!(!readable(q.fd(), 0));
    assert_eq!(q.stats().unwrap().ran, 20);
}

#[test]
fn stop_of_a_due_timer_is_exact_and_drop_cancels() {
    let rt = Runtime::with_config(1, 1, Duration::ZERO).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let runs = Arc::new(AtomicUsize::new(0));
    {
        let q = rt.queue().unwrap();
        let (d, r) = (DropCounter(drops.clone()), runs.clone());
        let id = rt
            .start_on(&q, Duration::ZERO, Duration::ZERO, move |_| {
                let _ = &d;
                r.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        assert!(readable(q.fd(), 10_000));
        assert_eq!(rt.stop(id), Ok(true));
        assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped inside the stop");
        assert!(!readable(q.fd(), 0));
        assert_eq!(q.run(8, Some(Duration::ZERO)), Ok(0));
        assert_eq!(q.run(0, Some(Duration::ZERO)), Err(Error::INVALID));
        let d = DropCounter(drops.clone());
        rt.start_on(&q, Duration::from_secs(3600), Duration::ZERO, move |_| {
            let _ = &d;
        })
        .unwrap();
    } // dropping the queue cancels the hour-long one
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[test]
fn another_runtimes_queue_is_invalid_and_shutdown_ends_run() {
    let rt = Runtime::with_config(1, 1, Duration::ZERO).unwrap();
    let other = Runtime::with_config(1, 1, Duration::ZERO).unwrap();
    let q = other.queue().unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let d = DropCounter(drops.clone());
    assert_eq!(rt.start_on(&q, Duration::ZERO, Duration::ZERO, move |_| {
        let _ = &d;
    }), Err(Error::INVALID));
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the rejected closure is dropped once");
    std::thread::scope(|s| {
        let h = s.spawn(|| q.run(1, None));
        std::thread::sleep(Duration::from_millis(20));
        other.shutdown().unwrap();
        assert_eq!(h.join().unwrap(), Err(Error::SHUTDOWN));
    });
}
