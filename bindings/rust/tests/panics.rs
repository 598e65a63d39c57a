// SPDX-License-Identifier: MIT OR Apache-2.0
//! Panics in a timer's closure -- in its call and in its Drop -- are
//! contained (logged, counted in `callback_exceptions`, never an abort), and
//! a panic in `start_many`'s maker leaks nothing (ctest capi_rust).
//!
//! The Drop cases run in a child process (this test binary run again on
//! one test, `drop_panics_child`): a panic unwinding out of the release hook
//! aborts the whole process ("panic in a function that cannot unwind", exit
//! 134), which must fail a test, not end the test binary.
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tickwheel::{Error, Runtime, TimerSpec};

const CHILD_ENV: &str = "TICKWHEEL_TEST_DROP_PANICS_CHILD";

/// Panics when dropped (once armed).
struct PanicOnDrop(&'static str);
impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("PanicOnDrop: {}", self.0);
    }
}

/// Counts its drops.
struct DropCounter(Arc<AtomicUsize>);
impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn exceptions(rt: &Runtime) -> u64 {
    rt.stats().unwrap().callback_exceptions
}

fn wait_until(mut pred: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(10);
    while !pred() {
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

#[test]
fn a_panicking_callback_is_counted_and_the_timer_goes_on() {
    let rt = Runtime::with_config(1, 1, Duration::ZERO).unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let id = rt
        .start(Duration::from_millis(1), Duration::from_millis(1), move |_| {
            if r.fetch_add(1, Ordering::SeqCst) < 3 {
                panic!("callback panic (expected by the test)");
            }
        })
        .unwrap();
    assert!(wait_until(|| runs.load(Ordering::SeqCst) >= 5), "the periodic timer kept running");
    assert_eq!(rt.stop_sync(id), Ok(true));
    assert_eq!(exceptions(&rt), 3);
}

#[test]
fn a_panicking_maker_in_start_many_drops_the_closures_already_made() {
    let rt = Runtime::with_config(1, 1, Duration::ZERO).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let specs = vec![TimerSpec::after(Duration::from_secs(60)); 8];
    let d = drops.clone();
    let res = catch_unwind(AssertUnwindSafe(|| {
        rt.start_many(&specs, |i| {
            if i == 3 {
                panic!("maker panic (expected by the test)");
            }
            let guard = DropCounter(d.clone());
            move |_| {
                let _keep = &guard;
            }
        })
    }));
    assert!(res.is_err(), "the maker's panic reaches the caller");
    drop(d);
    assert_eq!(drops.load(Ordering::SeqCst), 3, "the three closures made before the panic were dropped");
    assert_eq!(Arc::strong_count(&drops), 1, "nothing else holds them");
    let st = rt.stats().unwrap();
    assert_eq!((st.started, st.live), (0, 0), "nothing was started");
}

#[test]
fn a_duration_max_timeout_waits_for_a_due_callback() {
    let rt = Runtime::with_config(1, 1, Duration::ZERO).unwrap();
    let q = rt.queue().unwrap();
    for timeout in [Duration::MAX, Duration::from_nanos(i64::MAX as u64), Duration::from_nanos(1 << 60)] {
        rt.start_on(&q, Duration::from_millis(60), Duration::ZERO, |_| {}).unwrap();
        let t0 = Instant::now();
        // Before: Ok(0) within microseconds (i64::MAX ns overflowed the C run's deadline).
        assert_eq!(q.run(1, Some(timeout)), Ok(1), "{timeout:?}");
        assert!(t0.elapsed() >= Duration::from_millis(50), "{timeout:?} returned after {:?}", t0.elapsed());
    }
    // Nothing due at all: it waits until the runtime shuts down.
    std::thread::scope(|s| {
        let t0 = Instant::now();
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(60));
            rt.shutdown().unwrap();
        });
        assert_eq!(q.run(1, Some(Duration::MAX)), Err(Error::SHUTDOWN));
        assert!(t0.elapsed() >= Duration::from_millis(50), "returned after {:?}", t0.elapsed());
    });
}

/// The parent of `drop_panics_child`: runs it alone in a child process and
/// requires a clean exit after every scenario.
#[test]
fn panics_in_a_closures_drop_are_contained() {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args(["--exact", "drop_panics_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the child process failed ({}; before the fix: SIGABRT, \"panic in a function that cannot unwind\")\n\
         stdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(stdout.contains("drop-panics-child: all contained"), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stderr.contains("dropping a timer's closure panicked"), "logged; stderr:\n{stderr}");
}

/// Run only by `panics_in_a_closures_drop_are_contained`, in a child process.
#[test]
fn drop_panics_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return; // in the normal run: nothing (the parent test runs it)
    }
    let rt = Runtime::with_config(1, 1, Duration::ZERO).unwrap();

    // 1. stop() runs the release hook inside the call, on this thread --
    //    also inside catch_unwind, the panic does not get out.
    let guard = PanicOnDrop("stop");
    let id = rt.start(Duration::from_secs(60), Duration::ZERO, move |_| {
        let _keep = &guard;
    });
    let stopped = catch_unwind(AssertUnwindSafe(|| rt.stop(id.unwrap())));
    assert_eq!(stopped.ok(), Some(Ok(true)), "stop returned normally");
    assert_eq!(exceptions(&rt), 1);

    // 2. After a one-shot's last run, on a worker thread.
    let ran = Arc::new(AtomicUsize::new(0));
    let (r, guard) = (ran.clone(), PanicOnDrop("last run"));
    rt.start(Duration::from_millis(1), Duration::ZERO, move |_| {
        let _keep = &guard;
        r.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    assert!(wait_until(|| exceptions(&rt) == 2), "counted after the run ({} runs)", ran.load(Ordering::SeqCst));

    // 3. A start the library refuses (INVALID: the binding drops the closure).
    let guard = PanicOnDrop("refused start");
    let spec = TimerSpec::after(Duration::from_secs(1u64 << 40)); // above TW_MAX_DELAY_NS
    let res = rt.start_with(&spec, move |_| {
        let _keep = &guard;
    });
    assert_eq!(res, Err(Error::INVALID));
    assert_eq!(exceptions(&rt), 3);

    // 4. A stop_sync() from inside catch_unwind, and a queue's timer dropped
    //    with its queue.
    let guard = PanicOnDrop("stop_sync");
    let id = rt
        .start(Duration::from_secs(60), Duration::ZERO, move |_| {
            let _keep = &guard;
        })
        .unwrap();
    assert_eq!(catch_unwind(AssertUnwindSafe(|| rt.stop_sync(id))).ok(), Some(Ok(true)));
    {
        let q = rt.queue().unwrap();
        let guard = PanicOnDrop("queue drop");
        rt.start_on(&q, Duration::from_secs(60), Duration::ZERO, move |_| {
            let _keep = &guard;
        })
        .unwrap();
    }
    assert_eq!(exceptions(&rt), 5);

    // 5. The runtime's own drop cancels a pending timer: its hook runs
    //    inside tw_runtime_destroy().
    let guard = PanicOnDrop("runtime drop");
    rt.start(Duration::from_secs(60), Duration::ZERO, move |_| {
        let _keep = &guard;
    })
    .unwrap();
    drop(rt);
    println!("drop-panics-child: all contained");
}
