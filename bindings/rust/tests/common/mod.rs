// SPDX-License-Identifier: MIT OR Apache-2.0
//! fork() for the tests: runs a closure in a child process and returns the
//! failures it reports through a pipe. libc is declared by hand (no crates).
//! Also what several tests share: a raw tw_timer_spec, drop counting, waiting.
#![allow(dead_code)]
use std::os::raw::{c_int, c_short};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[repr(C)]
struct PollFd {
    fd: c_int,
    events: c_short,
    revents: c_short,
}

extern "C" {
    fn fork() -> c_int;
    fn _exit(code: c_int) -> !;
    fn waitpid(pid: c_int, status: *mut c_int, options: c_int) -> c_int;
    fn pipe(fds: *mut c_int) -> c_int;
    fn read(fd: c_int, buf: *mut u8, n: usize) -> isize;
    fn write(fd: c_int, buf: *const u8, n: usize) -> isize;
    fn close(fd: c_int) -> c_int;
    fn kill(pid: c_int, sig: c_int) -> c_int;
    fn poll(fds: *mut PollFd, n: u64, timeout_ms: c_int) -> c_int;
    fn getpid() -> c_int;
}

pub const WAIT: Duration = Duration::from_secs(10);

/// A tw_timer_spec as tw_timer_spec_init() leaves it (size set, the rest
/// zero), for tests below the safe API.
pub fn raw_spec() -> tickwheel::ffi::tw_timer_spec {
    // SAFETY: tw_timer_spec_init writes every byte of the zeroed struct.
    let mut spec = unsafe {
        let mut s = std::mem::MaybeUninit::<tickwheel::ffi::tw_timer_spec>::zeroed();
        tickwheel::ffi::tw_timer_spec_init(s.as_mut_ptr());
        s.assume_init()
    };
    spec.size = std::mem::size_of::<tickwheel::ffi::tw_timer_spec>() as u32;
    spec
}

/// One fork at a time within a test binary (its tests run on several threads).
pub static FORK_LOCK: Mutex<()> = Mutex::new(());

/// Counts its drops: the closure's release.
pub struct DropCounter(pub Arc<AtomicUsize>);
impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

pub fn pid() -> i32 {
    unsafe { getpid() }
}

pub fn wait_until(mut pred: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + WAIT;
    while !pred() {
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

/// Failed expectations of a child (it must not panic into the test harness).
#[derive(Default)]
pub struct Check(pub Vec<String>);
impl Check {
    pub fn that(&mut self, ok: bool, what: impl Into<String>) {
        if !ok {
            self.0.push(what.into());
        }
    }
}

/// Runs `body` in a fork() child, which then `_exit`s (never returning into the
/// harness). Returns the child's failures, or why it failed to report them: a
/// panic, another exit status, or a hang (killed after `timeout`).
pub fn in_fork_child(timeout: Duration, body: impl FnOnce() -> Vec<String>) -> Vec<String> {
    let mut fds = [0 as c_int; 2];
    assert_eq!(unsafe { pipe(fds.as_mut_ptr()) }, 0);
    let pid = unsafe { fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        unsafe { close(fds[0]) };
        let failures = match catch_unwind(AssertUnwindSafe(body)) {
            Ok(f) => f,
            Err(_) => vec!["the child panicked".to_string()],
        };
        let text = failures.join("\n");
        let mut at = 0;
        while at < text.len() {
            let n = unsafe { write(fds[1], text.as_ptr().add(at), text.len() - at) };
            if n <= 0 {
                break;
            }
            at += n as usize;
        }
        unsafe { _exit(0) }
    }
    unsafe { close(fds[1]) };
    let end = Instant::now() + timeout;
    let mut out = Vec::new();
    let mut hung = false;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let mut p = PollFd { fd: fds[0], events: 1, revents: 0 }; // POLLIN
        if left.is_zero() || unsafe { poll(&mut p, 1, left.as_millis() as c_int) } <= 0 {
            hung = true;
            break;
        }
        let mut buf = [0u8; 4096];
        let n = unsafe { read(fds[0], buf.as_mut_ptr(), buf.len()) };
        if n <= 0 {
            break;
        }
        out.extend_from_slice(&buf[..n as usize]);
    }
    unsafe { close(fds[0]) };
    if hung {
        unsafe { kill(pid, 9) };
    }
    let mut status: c_int = 0;
    assert_eq!(unsafe { waitpid(pid, &mut status, 0) }, pid);
    if hung {
        return vec![format!("the child hung (killed after {timeout:?})")];
    }
    if status != 0 {
        return vec![format!("the child ended with status {status:#x}")];
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    text.lines().filter(|l| !l.is_empty()).map(str::to_string).collect()
}
