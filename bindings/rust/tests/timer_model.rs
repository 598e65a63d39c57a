// SPDX-License-Identifier: MIT OR Apache-2.0
//! The timer model of 1.3 through the binding (ctest capi_rust): period
//! policies, leeway, groups (stop_group), query() and reset_at().
mod common;
use common::{wait_until, WAIT};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tickwheel::{ffi, Error, PeriodPolicy, Runtime, TimerId, TimerInfo, TimerSpec, TimerStatus};

const MS: u64 = 1_000_000;

fn runtime() -> Arc<Runtime> {
    Arc::new(Runtime::with_config(2, 2, Duration::ZERO).unwrap())
}

/// One run of a periodic timer: start, end (now_ns) and what query() said inside it.
#[derive(Debug, Clone, Copy)]
struct Run {
    start: u64,
    end: u64,
    info: TimerInfo,
}

/// Starts a 10 ms periodic timer with `policy` whose runs take `work` (the
/// first one only, unless `every_run`), lets it run `count` times, stops it.
fn overrun(policy: PeriodPolicy, work: Duration, every_run: bool, count: usize) -> Vec<Run> {
    let rt = runtime();
    let runs: Arc<Mutex<Vec<Run>>> = Arc::new(Mutex::new(Vec::new()));
    let (rt2, runs2) = (rt.clone(), runs.clone());
    let (tx, rx) = mpsc::channel();
    let spec = TimerSpec::after(Duration::from_millis(10)).every(Duration::from_millis(10)).policy(policy);
    let id = rt
        .start_with(&spec, move |id| {
            let start = tickwheel::now_ns();
            let info = rt2.query(id).unwrap().expect("live inside its own callback");
            let n = runs2.lock().unwrap().len();
            if every_run || n == 0 {
                std::thread::sleep(work);
            }
            let mut v = runs2.lock().unwrap();
            v.push(Run { start, end: tickwheel::now_ns(), info });
            if v.len() == count {
                let _ = tx.send(());
            }
        })
        .unwrap();
    rx.recv_timeout(WAIT).expect("the periodic timer ran");
    assert_eq!(rt.stop_sync(id), Ok(true));
    assert_eq!(rt.query(id), Ok(None));
    let v = runs.lock().unwrap();
    v.clone()
}

#[test]
fn spec_layouts_match_the_header() {
    assert_eq!(std::mem::size_of::<ffi::tw_timer_spec>(), 88);
    assert_eq!(std::mem::offset_of!(ffi::tw_timer_spec, period_policy), 64);
    assert_eq!(std::mem::offset_of!(ffi::tw_timer_spec, leeway_ns), 72);
    assert_eq!(std::mem::offset_of!(ffi::tw_timer_spec, group), 80);
    assert_eq!(std::mem::size_of::<ffi::tw_timer_info>(), 64);
    assert_eq!(std::mem::offset_of!(ffi::tw_timer_info, missed), 56);
    assert_eq!(PeriodPolicy::default(), PeriodPolicy::Skip);
    assert_eq!(PeriodPolicy::Burst as u32, ffi::TW_PERIOD_BURST);
}

/// Every run counted and none missed (delay and burst skip no deadline).
fn assert_none_missed(runs: &[Run]) {
    for (k, r) in runs.iter().enumerate() {
        assert_eq!((r.info.runs, r.info.missed), (k as u64 + 1, 0), "{runs:?}");
    }
}

/// Each run began at least `gap` ns after the one before it ended.
fn assert_gaps_at_least(runs: &[Run], gap: u64, what: &str) {
    for w in runs.windows(2) {
        assert!(w[1].start >= w[0].end + gap, "{what}: {runs:?}");
    }
}

#[test]
fn skip_counts_missed_deadlines() {
    let runs = overrun(PeriodPolicy::Skip, Duration::from_millis(35), true, 4);
    assert_eq!(runs[0].info.state, TimerStatus::Running);
    assert_eq!(runs[0].info.runs, 1);
    // 35 ms runs on a 10 ms grid: at least 2 deadlines pass during each run.
    assert_eq!(runs[1].info.runs, 2);
    assert!(runs[1].info.missed >= runs[0].info.missed + 2, "{runs:?}");
    for w in runs.windows(2) {
        assert!(w[1].start >= w[0].end, "overlapping runs");
        assert!(w[1].info.missed >= w[0].info.missed);
    }
}

#[test]
fn delay_misses_nothing_and_waits_a_period_after_each_run() {
    let runs = overrun(PeriodPolicy::Delay, Duration::from_millis(25), true, 4);
    assert_none_missed(&runs);
    assert_gaps_at_least(&runs, 10 * MS, "gap below one period");
}

#[test]
fn burst_catches_up_back_to_back() {
    // The first run takes 55 ms: the >= 4 grid deadlines it overran run right
    // after it (skip would start run 5 at least 30 ms later, delay 40 ms).
    let runs = overrun(PeriodPolicy::Burst, Duration::from_millis(55), false, 6);
    assert_none_missed(&runs);
    assert_gaps_at_least(&runs, 0, "overlapping runs");
    assert!(runs[4].start - runs[0].end < 25 * MS, "not caught up back to back: {runs:?}");
}

#[test]
fn query_a_pending_timer_then_none_after_stop() {
    let rt = runtime();
    let before = tickwheel::now_ns();
    let spec = TimerSpec::after(Duration::from_secs(10)).leeway(Duration::from_millis(250)).group(42).shard(1);
    let id = rt.start_with(&spec, |_| {}).unwrap();
    let info = rt.query(id).unwrap().unwrap();
    assert_eq!(info.state, TimerStatus::Pending);
    assert_eq!(info.shard, 1);
    let d = info.deadline_ns.unwrap();
    assert!(d >= before + 10_000 * MS && d < before + 11_000 * MS, "{info:?}");
    let left = info.remaining().unwrap();
    assert!(left > Duration::from_secs(9) && left <= Duration::from_millis(10_001), "{left:?}");
    assert_eq!(info.period, Duration::ZERO);
    assert_eq!(info.leeway, Duration::from_millis(250));
    assert_eq!((info.group, info.runs, info.missed), (42, 0, 0));
    assert_eq!(rt.stop(id), Ok(true));
    assert_eq!(rt.query(id), Ok(None));
    assert_eq!(rt.query(TimerId(0)), Ok(None));
    assert_eq!(rt.query(TimerId(0x1234_5678_9abc)), Ok(None));
}

#[test]
fn query_running_from_inside_and_due_on_a_queue() {
    let rt = runtime();
    let (tx, rx) = mpsc::channel();
    let rt2 = rt.clone();
    let id = rt
        .start(Duration::from_millis(2), Duration::ZERO, move |id| {
            tx.send(rt2.query(id)).unwrap();
        })
        .unwrap();
    let info = rx.recv_timeout(WAIT).unwrap().unwrap().unwrap();
    assert_eq!((info.state, info.runs, info.missed), (TimerStatus::Running, 1, 0));
    assert_eq!(info.deadline_ns, None, "a running one-shot has no next deadline");
    assert_eq!(info.remaining(), None);
    assert!(wait_until(|| rt.query(id) == Ok(None)), "released after its run");

    // Due: on a queue nobody runs yet.
    let q = rt.queue().unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    let id = rt
        .start_on_with(&q, &TimerSpec::default().group(5), move |_| r.store(true, Ordering::SeqCst))
        .unwrap();
    assert!(wait_until(|| q.stats().unwrap().due == 1));
    let info = rt.query(id).unwrap().unwrap();
    assert_eq!((info.state, info.group), (TimerStatus::Due, 5));
    assert_eq!(info.remaining(), Some(Duration::ZERO));
    assert_eq!(q.run(16, Some(Duration::ZERO)), Ok(1));
    assert!(ran.load(Ordering::SeqCst));
    assert_eq!(rt.query(id), Ok(None));
}

#[test]
fn reset_at_fires_not_before_the_deadline() {
    let rt = runtime();
    let (tx, rx) = mpsc::channel();
    let id = rt
        .start(Duration::from_secs(10), Duration::ZERO, move |_| {
            tx.send(tickwheel::now_ns()).unwrap();
        })
        .unwrap();
    let deadline = tickwheel::now_ns() + 40 * MS;
    assert_eq!(rt.reset_at(id, deadline), Ok(true));
    let d = rt.query(id).unwrap().unwrap().deadline_ns.unwrap();
    assert!(d >= deadline && d < deadline + 10 * MS, "{d} vs {deadline}");
    let at = rx.recv_timeout(WAIT).unwrap();
    assert!(at >= deadline, "fired {} ns early", deadline - at);
    assert!(wait_until(|| rt.query(id) == Ok(None)));
    assert_eq!(rt.reset_at(id, tickwheel::now_ns() + MS), Ok(false), "not pending any more");
    assert_eq!(rt.reset_at(TimerId(0), 1), Ok(false));
}

#[test]
fn reset_at_a_past_deadline_fires_at_once_and_periodic_continues() {
    let rt = runtime();
    let (tx, rx) = mpsc::channel();
    let id = rt
        .start_with(&TimerSpec::after(Duration::from_secs(10)).every(Duration::from_millis(10)), move |_| {
            let _ = tx.send(tickwheel::now_ns());
        })
        .unwrap();
    let deadline = tickwheel::now_ns() + 20 * MS;
    assert_eq!(rt.reset_at(id, deadline), Ok(true));
    let first = rx.recv_timeout(WAIT).unwrap();
    let _ = rx.recv_timeout(WAIT).unwrap();
    let third = rx.recv_timeout(WAIT).unwrap();
    assert!(first >= deadline);
    assert!(third >= deadline + 20 * MS, "the grid restarts at the new deadline");
    assert_eq!(rt.reset_at(id, 1), Ok(true), "a past deadline");
    assert_eq!(rt.stop_sync(id), Ok(true));
}

#[test]
fn start_at_an_absolute_deadline_with_leeway() {
    let rt = runtime();
    let (tx, rx) = mpsc::channel();
    let deadline = tickwheel::now_ns() + 20 * MS;
    let spec = TimerSpec::at(deadline).leeway(Duration::from_millis(10));
    rt.start_with(&spec, move |_| tx.send(tickwheel::now_ns()).unwrap()).unwrap();
    assert!(rx.recv_timeout(WAIT).unwrap() >= deadline, "never early, leeway or not");
}

#[test]
fn stop_group_stops_the_group_only() {
    let rt = runtime();
    let fired = Arc::new(Mutex::new(Vec::new()));
    let rec = |tag: &'static str| {
        let f = fired.clone();
        move |_| f.lock().unwrap().push(tag)
    };
    let t0 = Instant::now();
    let soon = Duration::from_millis(300);
    let mut members = Vec::new();
    for _ in 0..3 {
        members.push(rt.start_with(&TimerSpec::after(soon).group(7), rec("g7")).unwrap());
    }
    members.push(rt.start_with(&TimerSpec::after(soon).every(Duration::from_millis(10)).group(7), rec("g7p")).unwrap());
    let other = rt.start_with(&TimerSpec::after(Duration::from_millis(50)).group(8), rec("g8")).unwrap();
    rt.start(Duration::from_millis(50), Duration::ZERO, rec("none")).unwrap();
    assert_eq!(rt.stop_group(7, false), Ok(4));
    for id in &members {
        assert_eq!(rt.query(*id), Ok(None));
    }
    assert!(rt.query(other).unwrap().is_some());
    assert!(wait_until(|| fired.lock().unwrap().len() >= 2));
    std::thread::sleep((t0 + Duration::from_millis(400)).saturating_duration_since(Instant::now()));
    let mut seen = fired.lock().unwrap().clone();
    seen.sort();
    assert_eq!(seen, ["g8", "none"]);
    assert_eq!(rt.stop_group(7, false), Ok(0));
    assert_eq!(rt.stop_group(u64::MAX, true), Ok(0));
}

#[test]
fn stop_group_sync_waits_for_a_running_callback() {
    let rt = runtime();
    let running = Arc::new(AtomicBool::new(false));
    let runs = Arc::new(AtomicUsize::new(0));
    let (r, n) = (running.clone(), runs.clone());
    let spec = TimerSpec::after(Duration::from_millis(1)).every(Duration::from_millis(1)).group(9);
    rt.start_with(&spec, move |_| {
        r.store(true, Ordering::SeqCst);
        n.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(50));
        r.store(false, Ordering::SeqCst);
    })
    .unwrap();
    assert!(wait_until(|| running.load(Ordering::SeqCst)));
    assert_eq!(rt.stop_group(9, true), Ok(1), "a running periodic timer counts");
    assert!(!running.load(Ordering::SeqCst), "sync returned during a run");
    let k = runs.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(runs.load(Ordering::SeqCst), k);
}

#[test]
fn stop_group_from_inside_a_callback_of_the_group() {
    let rt = runtime();
    let victims: Vec<_> = (0..2)
        .map(|_| rt.start_with(&TimerSpec::after(Duration::from_secs(10)).group(11), |_| {}).unwrap())
        .collect();
    let (tx, rx) = mpsc::channel();
    let rt2 = rt.clone();
    rt.start_with(&TimerSpec::after(Duration::from_millis(1)).group(11), move |_| {
        tx.send(rt2.stop_group(11, true)).unwrap(); // does not wait for itself
    })
    .unwrap();
    assert_eq!(rx.recv_timeout(WAIT).unwrap(), Ok(2), "the running one-shot is on its last run");
    for id in victims {
        assert_eq!(rt.query(id), Ok(None));
    }
}

#[test]
fn bad_input_is_invalid() {
    let rt = runtime();
    // Unknown policies: the safe API cannot name one; converting is INVALID.
    assert_eq!("sometimes".parse::<PeriodPolicy>(), Err(Error::INVALID));
    assert_eq!("Skip".parse::<PeriodPolicy>(), Err(Error::INVALID));
    assert_eq!("burst".parse::<PeriodPolicy>(), Ok(PeriodPolicy::Burst));
    assert_eq!(PeriodPolicy::try_from(3u32), Err(Error::INVALID));
    assert_eq!(PeriodPolicy::try_from(1u32), Ok(PeriodPolicy::Delay));
    // Group 0 is no group.
    assert_eq!(rt.stop_group(0, false), Err(Error::INVALID));
    assert_eq!(rt.stop_group(0, true), Err(Error::INVALID));
    // Out-of-range durations and deadlines; every closure dropped exactly once.
    let too_long = Duration::from_nanos(ffi::TW_MAX_DELAY_NS + 1);
    let drops = Arc::new(AtomicUsize::new(0));
    for spec in [
        TimerSpec::after(Duration::ZERO).leeway(too_long),
        TimerSpec::at(i64::MAX as u64 + 1),
        TimerSpec::at(tickwheel::now_ns() + 2 * ffi::TW_MAX_DELAY_NS),
        TimerSpec::default().shard(i32::MAX as u32 + 1),
    ] {
        let guard = Dropped(drops.clone());
        assert_eq!(rt.start_with(&spec, move |_| { let _keep = &guard; }), Err(Error::INVALID), "{spec:?}");
    }
    assert_eq!(drops.load(Ordering::SeqCst), 4);
    let id = rt.start(Duration::from_secs(10), Duration::ZERO, |_| {}).unwrap();
    assert_eq!(rt.reset_at(id, i64::MAX as u64 + 1), Err(Error::INVALID));
    assert_eq!(rt.reset_at(id, tickwheel::now_ns() + 2 * ffi::TW_MAX_DELAY_NS), Err(Error::INVALID));
    assert_eq!(rt.query(id).unwrap().unwrap().state, TimerStatus::Pending, "untouched");
    // The raw layout: an unknown policy and an unknown clock are refused by
    // the library itself (the ffi struct's offsets are right).
    let mut raw = std::ptr::null_mut();
    assert_eq!(unsafe { ffi::tw_runtime_create(std::ptr::null(), &mut raw) }, ffi::TW_OK);
    for (policy, clock) in [(7u32, 0i32), (0, 3), (0, -1)] {
        let mut spec = common::raw_spec();
        spec.callback = Some(noop);
        spec.period_ns = MS;
        spec.period_policy = policy;
        spec.clock = clock;
        let mut out = 1;
        // SAFETY: the spec is initialised; no arg, no release hook.
        let rc = unsafe { ffi::tw_timer_start_ex(raw, &spec, &mut out) };
        assert_eq!((rc, out), (ffi::TW_EINVAL, 0));
    }
    assert_eq!(unsafe { ffi::tw_group_stop(raw, 0, 0) }, ffi::TW_EINVAL as i64);
    assert_eq!(unsafe { ffi::tw_group_stop(raw, 1, 2) }, ffi::TW_EINVAL as i64, "unknown flag");
    assert_eq!(unsafe { ffi::tw_runtime_destroy(raw) }, ffi::TW_OK);
    rt.shutdown().unwrap();
    assert_eq!(rt.stop_group(7, false), Ok(0), "0 after shutdown");
    assert_eq!(rt.reset_at(id, 1), Err(Error::SHUTDOWN));
}

struct Dropped(Arc<AtomicUsize>);
impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

unsafe extern "C" fn noop(_: *mut std::ffi::c_void, _: ffi::tw_timer) {}
