// SPDX-License-Identifier: MIT OR Apache-2.0
// The load/CAS loops around the decisions of timer_state.hpp. Each validates
// the full generation after every load of the word (a stale id or FireItem
// is never acted on) and offers the test hook of the lookup-to-CAS window.
#include "runtime/timer_state.hpp"

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "runtime/fork.hpp"
#include "runtime/hazard.hpp"
#include "runtime/test_hooks.hpp"

namespace tickwheel::rt {

namespace {
/// stop_sync() callers currently waiting on some record's word (process-wide).
std::atomic<std::uint32_t> g_waiters{0};
/// Whether this thread is counted in g_waiters (what a fork child keeps).
constinit thread_local bool t_waiting = false;

constexpr auto kAcq = std::memory_order_acquire;
constexpr auto kAcqRel = std::memory_order_acq_rel;

/// One step of a short wait for another thread's short critical section.
void relax(unsigned spins) noexcept {
    if (spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        asm volatile("yield");
#endif
    } else {
        std::this_thread::yield();
    }
}
}  // namespace

CancelOutcome TimerState::try_cancel(Record& r, std::uint32_t gen, State* from) noexcept {
    Word c = r.ctl.load(kAcq);
    bool hooked = false;
    for (;;) {
        if (r.gen() != gen) return CancelOutcome::NotPending;
        const CancelStep s = decide_cancel(c, gen, r.periodic());
        if (s.next == c) return s.out;  // nothing to write
        if (!hooked) {
            hooked = true;
            test_hooks::window(&r, 'c');
        }
        if (r.ctl.compare_exchange_weak(c, s.next, kAcqRel, kAcq)) {
            if (from != nullptr) *from = Ctl::state(c);
            return s.out;
        }
    }
}

void TimerState::finish_cancel(Record& r, bool wake_now) noexcept {
    r.ctl.store(Ctl::with(r.ctl.load(std::memory_order_relaxed), State::Cancelled), std::memory_order_release);
    if (wake_now) wake(r);
}

ResetStep TimerState::reset(Record& r, std::uint32_t gen, tick_t tick, bool own_run) noexcept {
    Word c = r.ctl.load(kAcq);
    bool hooked = false;
    for (;;) {
        if (r.gen() != gen) return {false, c, Post::None};
        // A DELAY timer is reset as a one-shot re-arming itself (its next
        // run is set after this one ends), whoever calls.
        const bool delay = r.periodic() && r.policy() == Policy::Delay;
        ResetStep s = decide_reset(c, gen, tick, r.periodic() && !delay, own_run || delay);
        if (!s.rearmed) return s;
        if (!hooked) {
            hooked = true;
            test_hooks::window(&r, 'r');
        }
        if (r.ctl.compare_exchange_weak(c, s.next, kAcqRel, kAcq)) {
            s.from = Ctl::state(c);
            return s;
        }
    }
}

ExpireStep TimerState::expire(Record& r, tick_t now, tick_t grid_now, std::uint64_t grid_period,
                              tick_t grid_cap) noexcept {
    Word c = r.ctl.load(kAcq);
    for (;;) {
        const ExpireStep s = decide_expire(c, now, grid_period, grid_now, grid_cap);
        if (s.next == c || r.ctl.compare_exchange_weak(c, s.next, kAcqRel, kAcq)) return s;
    }
}

bool TimerState::begin_run(Record& r, std::uint32_t gen) noexcept {
    Word c = r.ctl.load(kAcq);
    bool hooked = false;
    for (;;) {
        if (r.gen() != gen || !decide_begin_run(c, gen)) return false;
        if (!hooked) {
            hooked = true;
            test_hooks::window(&r, 'b');
        }
        if (r.ctl.compare_exchange_weak(c, Ctl::with(c, State::Running), kAcqRel, kAcq)) return true;
    }
}

ClaimStep TimerState::claim_run(Record& r, std::uint32_t gen, tick_t now) noexcept {
    Word c = r.ctl.load(kAcq);
    bool hooked = false;
    for (;;) {
        if (r.gen() != gen) return {ClaimOutcome::Drop, c, 0};
        const ClaimStep s = decide_claim_run(c, gen, now);
        if (s.out == ClaimOutcome::Later) test_hooks::window(&r, 'L');  // about to re-file it (test_hooks.hpp)
        if (s.out != ClaimOutcome::Run) return s;
        if (!hooked) {
            hooked = true;
            test_hooks::window(&r, 'b');
        }
        if (r.ctl.compare_exchange_weak(c, s.next, kAcqRel, kAcq)) return s;
    }
}

FinishStep TimerState::finish_run(Record& r, tick_t delay_next) noexcept {
    Word c = r.ctl.load(kAcq);
    for (;;) {
        const FinishStep s = decide_finish_run(c, r.periodic(), delay_next);
        if (s.out == FinishOutcome::Stopped) return s;  // RUNNING_STOPPED: the worker's, moved after the release
        if (r.ctl.compare_exchange_weak(c, s.next, kAcqRel, kAcq)) {
            if (s.out != FinishOutcome::Last) wake(r);  // Last: woken when retired
            return s;
        }
    }
}

bool TimerState::yield_run(Record& r, std::uint32_t gen) noexcept {
    Word c = r.ctl.load(kAcq);
    for (;;) {
        if (r.gen() != gen || !decide_yield_run(c, gen)) return false;
        if (r.ctl.compare_exchange_weak(c, Ctl::with(c, State::Dispatched), kAcqRel, kAcq)) {
            wake(r);
            return true;
        }
    }
}

void TimerState::begin_stopped_release(Record& r) noexcept {
    r.ctl.store(Ctl::with(r.ctl.load(std::memory_order_relaxed), State::Releasing), std::memory_order_release);
}

void TimerState::finish_stopped(Record& r) noexcept {
    r.ctl.store(Ctl::with(r.ctl.load(std::memory_order_relaxed), State::Cancelled), std::memory_order_release);
    wake(r);
}

void TimerState::mark_free(Record& r, std::uint32_t gen, std::uint32_t link) noexcept {
    const State was = Ctl::state(r.ctl.load(std::memory_order_relaxed));
    r.ctl.store(Ctl::make(gen, State::Free, link), std::memory_order_release);
    if (was == State::Releasing) wake(r);  // a worker retiring after a last run; CANCELLED has no waiters
}

Word TimerState::wait_while_busy(Record& r, std::uint32_t gen) noexcept {
    Word c = r.ctl.load(kAcq);
    if (r.gen() != gen || !must_wait(c, gen)) return c;
    // Announce the wait, then look again (pairs with the fence in wake()):
    // either the waker sees the waiter, or the waiter sees the new word.
    // The waiter pays the heavy side of that asymmetric fence (hazard.hpp:
    // membarrier, once per wait that may block), so that every stop and
    // every run, which wake, pay only a compiler barrier.
    test_hooks::window(&r, 'W');  // about to wait
    t_waiting = true;
    g_waiters.fetch_add(1, std::memory_order_relaxed);
    heavy_fence();
    c = r.ctl.load(kAcq);
    while (r.gen() == gen && must_wait(c, gen)) {
        r.ctl.wait(c, kAcq);
        c = r.ctl.load(kAcq);
    }
    g_waiters.fetch_sub(1, std::memory_order_relaxed);
    t_waiting = false;
    // The wait is over (or the run ended before it began): the caller looks
    // at the record again. Tests park here whether or not the thread slept.
    test_hooks::window(&r, 'w');
    return c;
}

// fork.cpp, rule 4: in the child's only thread, the waiters are its own.
void fork_detail::waiters_in_child() noexcept {
    g_waiters.store(t_waiting ? 1 : 0, std::memory_order_relaxed);
}

void TimerState::wake(Record& r) noexcept {
    light_fence();  // the word's change before the load of g_waiters (see wait_while_busy)
    if (g_waiters.load(std::memory_order_relaxed) != 0) r.ctl.notify_all();
}

void TimerState::wake_all(Record* const* rs, std::size_t n) noexcept {
    if (n == 0) return;
    light_fence();
    if (g_waiters.load(std::memory_order_relaxed) == 0) return;
    for (std::size_t i = 0; i < n; ++i) rs[i]->ctl.notify_all();
}

void owner_violation(const char* field, const char* rule, Word seen) noexcept {
    std::fprintf(stderr, "tickwheel: owner rule broken: %s is %s (saw 0x%016llx)\n", field, rule,
                 static_cast<unsigned long long>(seen));
    std::abort();
}

OwnDeadline::Try OwnDeadline::try_lock(Record& r, Extra& x, std::uint32_t gen, std::uint64_t& held_out) noexcept {
    std::uint64_t l = x.own_lock.load(kAcq);
    for (;;) {
        if ((l & ~kCountMask) != tag(gen)) return Try::Stale;
        if (held(l)) return Try::Busy;
        if (x.own_lock.compare_exchange_weak(l, bump(l, gen), std::memory_order_seq_cst, kAcq)) break;
    }
    held_out = bump(l, gen);
    // The handshake with recycle(), which moves the generation on and then
    // looks at the lock: one of the two sees the other's write.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (r.gen() != gen) {
        unlock(x, held_out);
        return Try::Stale;
    }
    return Try::Locked;
}

bool OwnDeadline::lock(Record& r, Extra& x, std::uint32_t gen, std::uint64_t& held_out) noexcept {
    for (unsigned spins = 0;; ++spins) {
        switch (try_lock(r, x, gen, held_out)) {
            case Try::Locked: return true;
            case Try::Stale: return false;
            case Try::Busy: break;
        }
        relax(spins);
    }
}

std::uint64_t OwnDeadline::take_new(Extra& x, std::uint32_t gen) noexcept {
    std::uint64_t l = x.own_lock.load(kAcq);
    for (unsigned spins = 0;; ++spins) {
        if (!held(l) && x.own_lock.compare_exchange_weak(l, bump(l, gen), kAcqRel, kAcq)) {
            std::atomic_thread_fence(std::memory_order_release);  // the lock's odd value before what it guards (read())
            return bump(l, gen);
        }
        if (held(l)) {
            // A thread with a stale id took it and is about to see that the
            // record moved on (try_lock): it lets go without writing.
            relax(spins);
            l = x.own_lock.load(kAcq);
        }
    }
}

bool OwnDeadline::read(const Extra& x, std::uint32_t gen, std::int64_t& ns) noexcept {
    for (unsigned tries = 0; tries < 64; ++tries) {
        const std::uint64_t before = x.own_lock.load(kAcq);
        if ((before & ~kCountMask) != tag(gen)) return false;
        if (!held(before)) {
            ns = x.deadline_ns.load(std::memory_order_relaxed);
            std::atomic_thread_fence(std::memory_order_acquire);
            if (x.own_lock.load(std::memory_order_relaxed) == before) return true;
        }
        if (tries >= 8) std::this_thread::yield();
    }
    ns = x.deadline_ns.load(std::memory_order_relaxed);  // a writer is in the middle: its old or new value
    return true;
}

}  // namespace tickwheel::rt
