// SPDX-License-Identifier: MIT OR Apache-2.0
/// @file
/// tickwheel/coro.hpp -- C++20 coroutines over the runtime (header-only, over
/// the public API of runtime.hpp; no C ABI involved).
///
///     auto r = co_await tickwheel::sleep_for(rt, 30s, tickwheel::on_queue(q), stop_token);
///     auto r = co_await tickwheel::sleep_until(rt, deadline);
///     auto r = co_await tickwheel::with_deadline(rt, 5s, ev.wait(rt, tickwheel::on_queue(q)));
///
/// Each co_await yields a tickwheel::wake: why the coroutine was resumed --
/// expired (the sleep's deadline passed), timed_out (the deadline of a
/// with_deadline()/cancel_after() passed first), notified (event::notify()),
/// stopped (its std::stop_token was stopped), shutdown (the runtime shut
/// down, or the delivery queue was closed, while it waited).
///
/// THE CONTRACT, in one place:
///
///  * Exactly once. A co_await resumes its coroutine exactly once, whatever
///    happens and in whatever order: a stop requested before the co_await,
///    during it, while the wake-up is due in a queue or while the coroutine
///    is being resumed, a notify, shutdown. Never lost, never twice. (Or
///    never, if the coroutine's frame is destroyed while it waits: see
///    "Lifetimes".)
///  * Why. The reason is decided by one CAS, made by the thread that resumes
///    (below), over the bits set so far: notified if a notify arrived (a
///    notify is never lost), else stopped if a stop arrived, else shutdown /
///    timed_out / expired as the case may be. So a stop requested before the
///    wake-up is decided -- also while it is due in a delivery queue -- is
///    reported as stopped, never as expired (the bug of chriskohlhoff/asio
///    #878); a stop requested after it is decided changes nothing.
///  * Never early. expired and timed_out are only reported once the deadline
///    has passed on the timer's clock (a manual runtime's virtual clock:
///    advance() resumes sleeping coroutines in deadline order, ties in the
///    order they slept, deterministically).
///  * Clocks. sleep_for() and sleep_until(rt, TimePoint) count on the
///    monotonic clock (steady_clock; a manual runtime's virtual one),
///    sleep_until(rt, TimerClock, ns) on the clock it names. with_deadline()
///    and cancel_after() with a Duration count it, from the co_await, on the
///    inner wait's clock (as StartOptions::delay counts on the timer's
///    clock). with_deadline() with a TimePoint (steady_clock) is a deadline on
///    the monotonic clock, so it takes only waits on that clock: over a
///    sleep_until() on TimerClock::boottime or realtime (its own type,
///    clock_sleep_awaiter) it is REFUSED AT COMPILE TIME (no conversion
///    between two clocks is never early on both: the wall clock steps, the
///    boot-time clock jumps by a suspend). Use the Duration form, or compute
///    the deadline on the wait's clock.
///  * Where it resumes (a resume_on): on_queue(q) -- inside q.run() on the
///    thread that calls it (tw_queue_run; an epoll/libuv loop); on_worker()
///    (the default) -- on one of the runtime's worker threads (on a manual
///    runtime, inside advance()); on_executor(obj, post) -- the wake-up is
///    handed to post(obj, handle) from a worker (tickwheel/coro_asio.hpp
///    adapts an Asio io_context, strand or any Asio executor). Never inline
///    inside the caller's co_await: a 0 ns sleep, a stop requested before the
///    co_await and a notify all go through the timer and resume on the
///    context (so a loop of 0 ns sleeps does not starve the queue's other
///    work; corosio#135). A stop or notify resumes the coroutine within about
///    one tick (Config::resolution; the timer is made due at once, at the
///    shard's next pass); on a manual runtime, at the very next advance(),
///    whatever its size -- advance(0) included, also when virtual time is
///    off the tick grid (for on_queue: that advance delivers it, the queue's
///    next run() resumes it). A 0 ns sleep is a deadline "now", rounded up
///    to the tick like every deadline.
///    Two exceptions, both at the end of the runtime's (or the queue's)
///    life: when the runtime is shut down (or the queue closed) while a
///    coroutine waits, it is resumed with shutdown on the thread running
///    shutdown()/~Runtime/
///    Queue::close()/~Queue (inside its release hook: it may not shut the
///    runtime down from there) -- or posted, for
///    on_executor; and a co_await that starts after shutdown, or whose timer
///    the shutdown or the queue's close() cancels while the co_await is still
///    arming it (between the start and the end of await_suspend), resumes at
///    once (inline) with shutdown -- never with an exception.
///  * Errors. A co_await whose timer cannot be started for another reason
///    (errc::limit_reached, no_memory, invalid_argument -- e.g. a queue
///    closed before the co_await started its timer, or a queue of another
///    runtime --, forked) throws tickwheel::Error into the coroutine at the
///    co_await (the coroutine is not suspended). An event wait that throws
///    gives back what it took: the event's set state (a notify is never lost,
///    also when the wait fails).
///  * No allocation per wait. The wait's state (the `wait_node`) lives in the
///    awaiter, i.e. in the coroutine frame; the timer's callable is one
///    pointer (inline in the runtime's callable, never boxed); the stop
///    callback is a std::stop_callback member of the awaiter (no allocation).
///    (tests/coro_alloc_test.cpp counts operator new calls: 0 per wait.)
///    on_executor: what the executor's post does (Asio's recycling allocator).
///  * Lifetimes. The Runtime (and the Queue, the event, the executor) must
///    outlive every co_await on it that has not resumed yet. The coroutine
///    frame may be destroyed by the resumed coroutine at once: nothing of
///    tickwheel touches the awaiter after the resumption (a stop callback or
///    a notify running at that moment on another thread is waited for in
///    await_resume, before the co_await returns). An executor (on_executor)
///    must outlive more: the post() calls, which a worker may still be
///    returning from when the coroutine already runs on the executor's
///    thread -- keep it alive until the Runtime is shut down or destroyed.
///  * Destroying a waiting coroutine cancels its wait. A coroutine suspended
///    in a co_await on these awaitables may be destroyed (its handle's
///    destroy(), a task type's destructor, a scope torn down): the awaiter's
///    destructor takes the wait back -- the timer is stopped (its release
///    hook still runs, once: inside the destructor, or, if the timer's
///    callback is running on another thread at that moment, there, and the
///    destructor waits for it), the event registration is removed (a notify
///    the wait had taken goes back to the event), the stop callback is
///    deregistered -- and when the destructor returns nothing of tickwheel
///    touches the frame again and the coroutine is never resumed. It waits
///    only for library code in progress on another thread (a timer callback
///    or release hook of this wait that lost the race, a stop callback, a
///    notify: a few instructions each); never for user code, a queue's run()
///    or an advance(), and never for itself: it may run on any thread,
///    inside a callback (another coroutine's body), inside q.run() or
///    advance(), inside a release hook at shutdown. The destroyer must, as
///    with any coroutine, not race with the coroutine's own resumption: the
///    frame may be destroyed while no wake-up of it is on its way -- the
///    destructor wins against a timer callback, stop or notify that has not
///    decided the wake-up yet; once one has (the coroutine is being resumed,
///    or its handle was posted to an executor), destroying the frame is the
///    caller's race, as it is for every coroutine library. In practice:
///    destroy an on_queue(q) wait on the thread running q (outside that
///    wait's own resumption: between runs, or from another coroutine that q
///    runs), a manual runtime's waits on the thread calling advance() (and
///    running its queues), an executor's handle that the executor destroys
///    instead of running it (a decided wake-up: only the registration and the
///    stop callback are taken back), or a wait that cannot be decided
///    meanwhile (no stop, notify, deadline, close or shutdown can come). The
///    Runtime must be alive when a frame whose wait has not resumed is
///    destroyed. (tests/coro_destroy_test.cpp CoroDestroy.*; stress: tw_stress
///    coro-history destroys frames at random moments.)
///  * Task types. The awaitables follow the standard protocol
///    (await_ready/await_suspend(std::coroutine_handle<>)/await_resume) and
///    work with any coroutine type that lets its body co_await arbitrary
///    awaitables (cppcoro/folly/libcoro-style tasks, the tickwheel::detached
///    below). asio::awaitable<> does not (its await_transform admits only
///    Asio operations): use on_executor to resume tickwheel's coroutines on
///    an Asio thread instead.
///  * g++ 12 (12.2, Debian 12's): write each co_await as a statement of its
///    own (`auto why = co_await sleep_for(...);`). A co_await on a temporary
///    awaitable inside an `if` or `while` condition (`if (co_await
///    sleep_for(...) == ...)`) is miscompiled by g++ 12 in common shapes: the
///    coroutine frame's resume pointer is clobbered and resuming crashes, on
///    any thread. And do not co_await a braced aggregate temporary (`co_await
///    Wrapper{sleep_for(...)}`): g++ 12 destroys its members twice (name it
///    in a variable first). clang has neither bug. tests/coro_gcc12_test.cpp
///    shows both (and fails once a g++ 12 build no longer has them, so that
///    this note goes when they go).
///
/// THE WAIT NODE'S OWNER RULES (in the style of src/runtime/timer_state.hpp's
/// ground rules). A wait_node has one atomic state word, `state_`, of bits:
///
///   PUBLISHED  set by await_suspend (the arming thread, A) after the timer
///              started and id_ was stored. A publication over a word without
///              FIRED is FINAL: from then on other threads may read id_; A
///              touches the node no more (the frame may be gone the next
///              instant). One over a word with FIRED is VOID (T ran first):
///              A clears both bits and arms again; nobody reads id_ on its
///              strength (rule 2).
///   FIRED      set by the timer's callback or release hook (T) that found
///              PUBLISHED clear: T ran before A finished arming (a 0 ns timer
///              on another core, a shutdown, the queue's close). T then
///              touches the node no more and A owns the resumption: A re-arms
///              an at-once timer (the wake-up is posted again, never run
///              inline) or, if that start fails with shutting_down (or
///              invalid_argument: the queue closed meanwhile), resumes inline
///              with shutdown.
///   CANCELLED  set with FIRED when T was a release hook without a run (the
///              shutdown's or the queue close's sweep): the wait ends with
///              shutdown, inline on A (c5: never an exception).
///   STOP       set by the stop callback (any thread, with fetch_or).
///   NOTIFY     set by event::notify, or by A when it takes the event's set
///              state (any thread, with fetch_or).
///   DONE       the decision, set once per co_await with ONE CAS over an
///              observed word: by T over a word with a final publication
///              (the decision to resume, and the reason, read from the same
///              word), or by the frame's destructor (D), with GONE, over a
///              word with a final publication and without DONE. Exactly one T
///              per armed timer runs (the runtime's contract: a one-shot's
///              callback runs, or its release hook runs without a run at
///              shutdown/close/stop; the callable forgets the node in its
///              first run, so its hook after a run does nothing), and A arms
///              the next timer only after T set FIRED.
///   GONE       set by D with DONE: the wait was taken back; a T that finds
///              DONE set without having set it returns at once, touching
///              nothing more (and never resumes).
///
///   THE OWNER TABLE: every field of the node, who writes it, when; who
///   reads it. (A = the arming thread, inside await_suspend; T = the timer's
///   callback or release hook; S = a stop callback or a notify (setter);
///   R = the resumed coroutine, in await_resume; D = the destructor of a
///   suspended coroutine's awaiter.)
///
///    field              | written by                        | read by
///    -------------------+-----------------------------------+---------------------------------
///    config (rt_,       | the constructor, with_deadline    | A; T (where_, timed_out_wins_);
///    where_, deadlines, | (before the co_await); A          | S (rt_, clock_); D (rt_): all
///    timed_out_wins_)   | (timed_out_wins_, before PUBLISHED)| after PUBLISHED (acquire)
///    state_             | A, T, S, D: atomic RMWs only      | all
///    id_                | A, before each publication        | S and D, after a FINAL one (rule 2)
///    h_                 | A, before PUBLISHED               | T, after it won DONE
///    result_            | T after it won DONE; A (inline)   | R; D (only if T won: rule 6)
///    stop_cb_           | A (emplace, before the start);    | S runs it; its destruction waits
///                       | R / D / the failure path (reset)  | for a running one (rule 4)
///    ev_                | the constructor                   | A, R, D, the failure path
///    registered_        | A (before its registering CAS);   | R, D, the failure path (A's own
///                       | unregister() (R, D, failure path) | thread, or one after R/D's handoff)
///    finished_          | R, the failure path               | D (the coroutine's owner, after
///                       |                                   | the suspension)
///   After a FINAL publication A touches no field; after T won DONE it
///   touches none past h_/where_ (the resumption); after R and D nobody does
///   (rules 4 and 6). The event's word names the node only between A's
///   registering CAS and unregister()/a notify's taking it off.
///
///   Ground rules:
///   1. `result_` is written only by the DONE setter T (or by A when it
///      resumes inline), before the resumption; read by await_resume after
///      (and by D, for a decided wake-up whose handle an executor destroyed).
///   2. `id_` is written only by A, before PUBLISHED (release), and read only
///      by a thread that observed a FINAL publication (PUBLISHED without
///      FIRED, acquire): the STOP/NOTIFY setters (rule 3) and D. A writes it
///      again only after a VOID publication, which no reader acts on, so no
///      read of id_ races with a write (the re-arm data race of issue 32,
///      fixed: a setter that saw the void publication used to read id_
///      while A stored the next timer's).
///   3. A STOP/NOTIFY setter that observed a final publication and not DONE
///      hurries the timer: rt.reset_at(id_, a past deadline) (a stale id is
///      answered not_found: harmless; a due or running one runs anyway), so T
///      runs at once -- on a manual runtime at the next advance(), whatever
///      its size (a reset to "now + 0" would round up to the next tick of the
///      grid: c4). One that observed no final publication does nothing more:
///      A sees the bit in the word its PUBLISHED fetch_or returns and hurries
///      the timer itself, with its local copy of the id (or re-arms an
///      at-once timer anyway).
///   4. A STOP/NOTIFY setter may run concurrently with the resumption (or
///      with D): the node stays alive until it returns, because await_resume
///      (and D), before the node goes, destroys the std::stop_callback (which
///      waits for a running callback on another thread) and unregisters from
///      the event (which waits for a notify in progress).
///   5. No user code runs while a node is inside an operation other than the
///      resumption itself, which is the last thing its thread does with it.
///   6. D (the awaiter's destructor, while the coroutine is suspended and
///      await_resume has not run): wins DONE|GONE by CAS unless DONE is set.
///      Having won, no T will touch the node after its first load (it sees
///      DONE), so D then (a) deregisters the stop callback and unregisters
///      from the event (rule 4's waits), (b) stop_sync(id_): a pending or due
///      timer is cancelled inside the call (its release hook, T, runs there
///      and returns at once); a T running on another thread (it lost: a few
///      instructions) is waited for; a recycled record answers at once -- so
///      when D returns, no T, setter or registration refers to the node, and
///      (c) gives back a notify the wait had taken. stop_sync never waits for
///      D itself (D never runs inside this wait's own T: T runs no user code
///      before it wins DONE), and the T it may wait for waits for nothing.
///      Having lost (DONE was set by T: a decided wake-up, handed to an
///      executor that destroyed the handle instead of resuming it), D only
///      does (a), and gives back a notified wake-up that never reached the
///      coroutine.
#pragma once

// C++20 or nothing: below it (or from C) this header stops with this one
// error instead of a wall of them (the rest of the file is skipped; the
// #endif is the file's last line). ctest cxx20_header_guard checks it.
#if !defined(__cplusplus) || __cplusplus < 202002L
#error "tickwheel/coro.hpp is part of tickwheel's C++ API and needs C++20: compile with -std=c++20 (or later); from C or older C++ use the C API, <tickwheel/tickwheel.h>"
#else

#include <algorithm>
#include <atomic>
#include <chrono>
#include <concepts>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <optional>
#include <stop_token>
#include <thread>
#include <type_traits>
#include <utility>

#include "tickwheel/runtime.hpp"

// Test hooks (tests define them before including this header; each is
// called with the node's state word): TICKWHEEL_CORO_TEST_HOOK -- the arming
// thread between the timer's start and PUBLISHED; ..._DECIDED -- T right
// after it set DONE; ..._TIMER -- T as it enters (before it reads the word);
// ..._REPOST -- the arming thread after a void publication, before it arms
// again; ..._GONE -- the destructor after it won DONE|GONE, before it takes
// the timer back.

namespace tickwheel {

/// Why a co_await on a tickwheel awaitable resumed (see the contract above).
enum class wake : std::uint8_t {
    expired = 0,    ///< the sleep's deadline passed
    stopped = 1,    ///< the std::stop_token given to the wait was stopped
    shutdown = 2,   ///< the runtime shut down (or the queue was closed) while it waited
    timed_out = 3,  ///< with_deadline()/cancel_after(): its deadline passed first
    notified = 4,   ///< event::notify()
};

/// A name for a wake ("expired", ...), for logs and tests.
constexpr const char* to_string(wake w) noexcept {
    switch (w) {
        case wake::expired: return "expired";
        case wake::stopped: return "stopped";
        case wake::shutdown: return "shutdown";
        case wake::timed_out: return "timed_out";
        case wake::notified: return "notified";
    }
    return "?";
}

/// Where a coroutine resumes after a co_await (see "Where it resumes").
/// Trivially copyable, two words and a pointer; the Queue must outlive the
/// waits that name it, an executor object the runtime (see "Lifetimes").
struct resume_on {
    /// Called on a worker with the coroutine to resume; must not throw.
    using post_fn = void (*)(void* obj, std::coroutine_handle<> h) noexcept;
    Queue* queue = nullptr;      ///< on_queue: inside this queue's run()
    void* obj = nullptr;         ///< on_executor: the first argument of post
    post_fn post = nullptr;      ///< on_executor: hands the coroutine to the executor
};

/// Resume inside `q.run()`, on the thread that calls it (the queue must be
/// of the runtime the wait is on).
inline resume_on on_queue(Queue& q) noexcept { return resume_on{&q, nullptr, nullptr}; }
/// Resume on one of the runtime's worker threads (the default).
inline resume_on on_worker() noexcept { return resume_on{}; }
/// Resume wherever post(obj, h) runs h.resume() (post is called on a worker,
/// or at shutdown on the thread shutting down; it must eventually resume h
/// exactly once, or destroy the frame deliberately: then the awaiter's
/// destructor takes back the wait's registrations, see "Lifetimes").
inline resume_on on_executor(void* obj, resume_on::post_fn post) noexcept { return resume_on{nullptr, obj, post}; }

class event;

namespace detail {

/// The state of one wait, in the awaiter (see THE WAIT NODE'S OWNER RULES).
class wait_node {
public:
    static constexpr std::uint32_t kPublished = 1u << 0;
    static constexpr std::uint32_t kFired = 1u << 1;
    static constexpr std::uint32_t kStop = 1u << 2;
    static constexpr std::uint32_t kNotify = 1u << 3;
    static constexpr std::uint32_t kDone = 1u << 4;
    static constexpr std::uint32_t kGone = 1u << 5;
    static constexpr std::uint32_t kCancelled = 1u << 6;

    wait_node(Runtime& rt, resume_on where, std::stop_token st, event* ev = nullptr) noexcept
        : rt_(&rt), where_(where), st_(std::move(st)), ev_(ev) {}
    // Movable only before the co_await (with_deadline takes its inner
    // awaitable by value): nothing is armed yet.
    wait_node(wait_node&& o) noexcept
        : rt_(o.rt_), where_(o.where_), st_(std::move(o.st_)), deadline_(o.deadline_),
          limit_(o.limit_), delay_(o.delay_), clock_(o.clock_), has_deadline_(o.has_deadline_),
          has_limit_(o.has_limit_), has_delay_(o.has_delay_), has_limit_delay_(o.has_limit_delay_),
          limit_delay_(o.limit_delay_), ev_(o.ev_) {}
    wait_node& operator=(wait_node&&) = delete;
    /// Rule 6: a frame destroyed while it waits takes its wait back.
    ~wait_node() {
        if (!finished_) [[unlikely]]
            abandon();
    }

    Runtime& runtime() const noexcept { return *rt_; }
    /// The clock the wait's deadlines count on.
    TimerClock clock() const noexcept { return clock_; }

    /// Sets a deadline (ns since the epoch of the inner wait's clock) after
    /// which the wait ends with timed_out (with_deadline). The earlier of two
    /// limits wins.
    void limit(Duration at) noexcept {
        if (!has_limit_ || at < limit_) limit_ = at;
        has_limit_ = true;
    }
    void set_deadline(Duration at, TimerClock clock) noexcept {
        deadline_ = at;
        clock_ = clock;
        has_deadline_ = true;
    }
    void set_delay(Duration d) noexcept { delay_ = d; has_delay_ = true; }
    /// As limit(), `d` after the co_await begins (on the wait's clock).
    void limit_after(Duration d) noexcept {
        if (!has_limit_delay_ || d < limit_delay_) limit_delay_ = d;
        has_limit_delay_ = true;
    }

    /// STOP or NOTIFY from any thread (rules 2-4). Returns false if the
    /// decision was already made (the bit came too late to matter).
    bool signal(std::uint32_t bit) noexcept {
        const std::uint32_t old = state_.fetch_or(bit, std::memory_order_acq_rel);
        if ((old & kDone) != 0) return false;
        // Only a final publication lets us read id_ (rule 2).
        if ((old & (kPublished | kFired)) == kPublished) hurry(id_);
        return true;
    }

    /// await_suspend's part: arms the timer. Returns false when the
    /// coroutine must go on inline (result_ = shutdown, or what the bits
    /// say). Throws Error for other start failures.
    bool arm(std::coroutine_handle<> h) {
        h_ = h;
        if (st_.stop_possible()) stop_cb_.emplace(st_, stop_fn{this});  // before arming (capy#233)
        // A plain sleep_for needs no clock reading of its own: start() takes
        // the delay (one reading fewer per wait).
        const bool relative = has_delay_ && !has_limit_ && !has_limit_delay_;
        const Duration now = relative ? Duration::zero() : rt_->now(clock_);
        const Duration far = now + kMaxDelay;
        Duration at = far;  // an event wait without a limit: only notify/stop/shutdown end it
        if (has_delay_)
            at = now + std::clamp(delay_, Duration::zero(), kMaxDelay);
        else if (has_deadline_)
            at = std::min(deadline_, far);
        if (has_limit_delay_) limit(now + std::clamp(limit_delay_, Duration::zero(), kMaxDelay));
        timed_out_wins_ = has_limit_ && limit_ < at;
        if (timed_out_wins_) at = limit_;
        bool repost = false;
        for (;;) {
            const std::uint32_t seen = state_.load(std::memory_order_acquire);
            const bool signalled = (seen & (kStop | kNotify)) != 0;
            StartOptions o;
            o.clock = clock_;
            o.queue = where_.queue;
            // A stop/notify before arming, or a re-post: a timer due at once
            // (a past deadline: the shard's next pass; on a manual runtime
            // the next advance(), whatever its size -- c4), on the context;
            // never inline.
            if (repost || signalled)
                o.deadline = kAtOnce;
            else if (relative)
                o.delay = std::clamp(delay_, Duration::zero(), kMaxDelay);
            else
                o.deadline = TimePoint(at);
            std::error_code ec;
            const Timer t = rt_->start(o, detail::Callback(fire_fn{this}), ec);
            if (ec) {
                // (The callable was destroyed: its hook set FIRED, harmless.)
                // shutting_down: no context left to resume on. A re-post's
                // invalid_argument: the queue, valid for the first start,
                // was closed since (c5).
                if (ec == make_error_code(errc::shutting_down) ||
                    (repost && ec == make_error_code(errc::invalid_argument))) {
                    result_ = decide(state_.load(std::memory_order_acquire), wake::shutdown);
                    return false;  // inline
                }
                throw Error(ec);
            }
            const std::uint64_t id = t.id();
            id_ = id;
            // Read before PUBLISHED: once it is set, the timer may fire on
            // another thread and resume the coroutine, which frees or
            // reuses this node (the runtime itself outlives every wait).
            Runtime* const rt = rt_;
#ifdef TICKWHEEL_CORO_TEST_HOOK
            TICKWHEEL_CORO_TEST_HOOK(state_);  // tests park the arming thread here
#endif
            const std::uint32_t old = state_.fetch_or(kPublished, std::memory_order_acq_rel);
            if ((old & kFired) == 0) {
                // A final publication. Rule 3: a signal set after `seen` and
                // before it was not acted on: hurry, with the local id (the
                // node may be gone).
                if ((old & (kStop | kNotify)) != 0 && !signalled && !repost) hurry_id(*rt, id);
                return true;  // the node is not touched again here
            }
            // A void publication: T ran before it (a timer due at once on
            // another core; a shutdown or the queue's close cancelling it).
            // We own the resumption; no setter acts on this publication.
#ifdef TICKWHEEL_CORO_TEST_HOOK_REPOST
            TICKWHEEL_CORO_TEST_HOOK_REPOST(state_);
#endif
            const std::uint32_t was =
                state_.fetch_and(~(kFired | kCancelled | kPublished), std::memory_order_acq_rel);
            if ((was & kCancelled) != 0) {
                // Cancelled by the shutdown's or the queue close's sweep
                // while we armed (c5): the wait ends with shutdown.
                result_ = decide(was, wake::shutdown);
                return false;  // inline, as a co_await after shutdown
            }
            repost = true;  // it fired: post the wake-up again
        }
    }

    /// await_resume's part (rule 4): after this, no other thread touches the node.
    wake finish() noexcept {
        stop_cb_.reset();  // waits for a stop callback running on another thread
        if (registered_) unregister();
        finished_ = true;
        return result_;
    }

    /// The event of an event wait (null for a sleep).
    event* event_of() const noexcept { return ev_; }
    /// A's own record of its registration as the event's waiter (set before
    /// the registering CAS, cleared if it fails; unregister() clears it).
    void set_registered(bool r) noexcept { registered_ = r; }
    /// The event awaiter's failure path (the co_await throws): unregisters and
    /// gives back a notify the wait took (c3). The node was never published.
    void fail() noexcept {
        stop_cb_.reset();
        if (registered_) unregister();
        finished_ = true;
        if (ev_ != nullptr && (state_.load(std::memory_order_acquire) & kNotify) != 0) give_back();
    }

private:
    friend class tickwheel::event;

    // A deadline in the past on every clock (1 ns after each one's epoch;
    // 0 would mean "no deadline, use the delay").
    static constexpr TimePoint kAtOnce{Duration(1)};

    struct stop_fn {
        wait_node* n;
        void operator()() noexcept { n->signal(kStop); }
    };

    // The timer's callable: one pointer (stored inline by the runtime).
    struct fire_fn {
        wait_node* n;
        explicit fire_fn(wait_node* node) noexcept : n(node) {}
        fire_fn(fire_fn&& o) noexcept : n(std::exchange(o.n, nullptr)) {}
        fire_fn& operator=(fire_fn&&) = delete;
        void operator()() noexcept {
            wait_node* node = std::exchange(n, nullptr);  // the hook after this run does nothing
            if (node != nullptr) node->on_timer(false);
        }
        ~fire_fn() {
            if (n != nullptr) n->on_timer(true);  // released without a run: shutdown / queue closed / D's stop
        }
    };

    static void hurry_id(Runtime& rt, std::uint64_t id) noexcept {
        std::error_code ec;
        rt.reset_at(id, kAtOnce, ec);  // not pending (due, running, gone): T runs anyway
    }
    void hurry(std::uint64_t id) noexcept {
        // Due (in a queue, or handed to a worker): it runs anyway; a reset
        // would take it back for a pass. But query() calls a boot-time or
        // wall-clock timer due once its exact deadline passed, while in the
        // wheel it still waits for the tick its deadline rounds up to (on a
        // manual runtime off the grid, past the next advance(0)): hurried as
        // well (if it was in fact due in a queue, the reset takes it back
        // and the next pass -- the next advance() -- delivers it again).
        const auto info = rt_->query(id);
        if (info && (info->state == TimerStatus::pending ||
                     (info->state == TimerStatus::due && clock_ != TimerClock::monotonic)))
            hurry_id(*rt_, id);
    }

    wake decide(std::uint32_t bits, wake natural) const noexcept {
        if ((bits & kNotify) != 0) return wake::notified;
        if ((bits & kStop) != 0) return wake::stopped;
        return natural;
    }

    // T: the timer's callback (cancelled == false) or its release hook
    // without a run (cancelled == true).
    void on_timer(bool cancelled) noexcept {
#ifdef TICKWHEEL_CORO_TEST_HOOK_TIMER
        TICKWHEEL_CORO_TEST_HOOK_TIMER(state_);  // tests park T here
#endif
        std::uint32_t old = state_.load(std::memory_order_acquire);
        for (;;) {
            if ((old & kDone) != 0) return;  // rule 6: the destructor took the wait back
            if ((old & kPublished) == 0) {
                const std::uint32_t mark = kFired | (cancelled ? kCancelled : 0u);
                if (state_.compare_exchange_weak(old, old | mark, std::memory_order_acq_rel,
                                                 std::memory_order_acquire))
                    return;  // A owns the resumption now
                continue;
            }
            if (state_.compare_exchange_weak(old, old | kDone, std::memory_order_acq_rel,
                                             std::memory_order_acquire))
                break;
        }
#ifdef TICKWHEEL_CORO_TEST_HOOK_DECIDED
        TICKWHEEL_CORO_TEST_HOOK_DECIDED(state_);  // tests park the resuming thread here
#endif
        result_ = decide(old, cancelled ? wake::shutdown : (timed_out_wins_ ? wake::timed_out : wake::expired));
        const std::coroutine_handle<> h = h_;
        if (where_.post != nullptr)
            where_.post(where_.obj, h);
        else
            h.resume();  // the last touch of the node: the frame may be destroyed inside
    }

    void unregister() noexcept;
    void give_back() noexcept;

    // Rule 6: the destructor of a node whose await_resume never ran.
    void abandon() noexcept {
        std::uint32_t old = state_.load(std::memory_order_acquire);
        // Not suspended here: never co_awaited, or the co_await threw or went
        // on inline (then await_resume ran, or the failure path cleaned up).
        if ((old & (kPublished | kFired)) != kPublished) return;
        bool won = false;
        for (;;) {
            if ((old & kDone) != 0) break;  // decided: the handle was posted and destroyed unrun
            if (state_.compare_exchange_weak(old, old | kDone | kGone, std::memory_order_acq_rel,
                                             std::memory_order_acquire)) {
                won = true;
                break;
            }
        }
        stop_cb_.reset();  // (a) waits for a stop callback running on another thread
        if (registered_) unregister();  // (a) waits for a notify in progress
        if (won) {
#ifdef TICKWHEEL_CORO_TEST_HOOK_GONE
            TICKWHEEL_CORO_TEST_HOOK_GONE(state_);
#endif
            rt_->stop_sync(id_);  // (b) T released here, or waited for; then nobody refers to the node
            if ((old & kNotify) != 0 && ev_ != nullptr) give_back();  // (c)
        } else if (result_ == wake::notified && ev_ != nullptr) {
            give_back();  // a notified wake-up that never reached the coroutine
        }
    }

    Runtime* rt_;
    resume_on where_;
    std::stop_token st_;
    Duration deadline_{0};
    Duration limit_{0};
    Duration delay_{0};
    TimerClock clock_ = TimerClock::monotonic;
    bool has_deadline_ = false;
    bool has_limit_ = false;
    bool has_delay_ = false;
    bool has_limit_delay_ = false;
    bool timed_out_wins_ = false;
    bool registered_ = false;  // the event's word names this node (A sets it; unregister clears it)
    bool finished_ = false;    // await_resume (or the failure path) ran: the destructor has nothing to do
    Duration limit_delay_{0};
    std::atomic<std::uint32_t> state_{0};
    std::uint64_t id_ = 0;
    std::coroutine_handle<> h_{};
    wake result_ = wake::expired;
    event* ev_ = nullptr;  // the event of an event wait (null for a sleep)
    std::optional<std::stop_callback<stop_fn>> stop_cb_;
};

}  // namespace detail

/// A single-waiter, auto-reset event built on the wait machinery: notify()
/// (any thread, never blocks, never resumes inline) wakes the coroutine
/// co_awaiting wait() -- on the context that wait named, with
/// wake::notified, within about one tick -- or, with nobody waiting, leaves
/// the event set so that the next wait() resumes (posted, not inline) with
/// notified. Notifies that come before a wake-up coalesce into one. A
/// notify that arrives after the wait was decided otherwise (timed_out,
/// stopped, shutdown) is kept for the next wait: never lost. So is one that
/// a wait took and then could not deliver: a wait that throws (its timer
/// could not start) or whose frame is destroyed gives it back (the event is
/// set again, or its next waiter notified).
/// At most one coroutine waits at a time (a second concurrent wait() throws
/// Error(invalid_argument) at its co_await). The event must outlive its
/// waits. Any thread; lock-free (a notify in progress is waited for, for a
/// few instructions, by a waiter resuming -- or destroyed -- at that moment).
class event {
public:
    event() noexcept = default;
    event(const event&) = delete;
    event& operator=(const event&) = delete;

    /// Wakes the waiter, or sets the event.
    void notify() noexcept {
        std::uintptr_t w = word_.load(std::memory_order_acquire);
        for (;;) {
            if (w == kSet) return;
            if (w == 0) {
                if (word_.compare_exchange_weak(w, kSet, std::memory_order_acq_rel, std::memory_order_acquire)) return;
                continue;
            }
            if ((w & kBusy) != 0) return;  // a notify is delivering to this waiter: coalesced
            if (word_.compare_exchange_weak(w, w | kBusy, std::memory_order_acq_rel, std::memory_order_acquire)) {
                const bool won = reinterpret_cast<detail::wait_node*>(w)->signal(detail::wait_node::kNotify);
                word_.store(won ? 0 : kSet, std::memory_order_release);  // the waiter may be gone now
                return;
            }
        }
    }
    /// True while the event is set (notified with nobody waiting).
    bool is_set() const noexcept { return word_.load(std::memory_order_acquire) == kSet; }

    class awaiter;
    /// The awaitable: resumes with notified, stopped, shutdown or (inside
    /// with_deadline/cancel_after) timed_out; on `where`.
    awaiter wait(Runtime& rt, resume_on where = {}, std::stop_token st = {}) noexcept;
    /// wait(rt, on_worker(), st).
    awaiter wait(Runtime& rt, std::stop_token st) noexcept;

private:
    friend class detail::wait_node;
    static constexpr std::uintptr_t kSet = 1;
    static constexpr std::uintptr_t kBusy = 2;
    std::atomic<std::uintptr_t> word_{0};
};

namespace detail {
inline void wait_node::unregister() noexcept {
    const auto me = reinterpret_cast<std::uintptr_t>(this);
    std::uintptr_t w = ev_->word_.load(std::memory_order_acquire);
    for (;;) {
        if (w == me) {
            if (ev_->word_.compare_exchange_weak(w, 0, std::memory_order_acq_rel, std::memory_order_acquire)) break;
            continue;
        }
        if (w == (me | event::kBusy)) {  // rule 4: a notify is inside signal() on this node
            std::this_thread::yield();
            w = ev_->word_.load(std::memory_order_acquire);
            continue;
        }
        break;  // 0, set or another waiter: a notify took us off
    }
    registered_ = false;
}

// A notify this wait took and could not deliver goes back to the event: as
// notify() (the next waiter is woken, or the event is set).
inline void wait_node::give_back() noexcept { ev_->notify(); }

/// The awaitables built on wait_node (sleep, event wait) expose it.
template <class A>
concept node_awaitable = requires(A& a) {
    { a.node() } -> std::same_as<wait_node&>;
};
/// An awaitable whose deadlines count on the monotonic clock (steady_clock):
/// what with_deadline(rt, TimePoint, inner) accepts. sleep_for(),
/// sleep_until(rt, TimePoint), event::wait() and deadline_awaiters of them
/// are; a clock_sleep_awaiter (sleep_until on a TimerClock) is not.
template <class A>
concept steady_wait = node_awaitable<A> && A::kSteadyClock;
}  // namespace detail

/// The awaitable of sleep_for/sleep_until: co_await it once.
class sleep_awaiter {
public:
    /// Its deadline counts on the monotonic clock (see detail::steady_wait).
    static constexpr bool kSteadyClock = true;
    /// Use sleep_for()/sleep_until() to make one.
    sleep_awaiter(Runtime& rt, resume_on where, std::stop_token st) noexcept : node_(rt, where, std::move(st)) {}
    /// Movable until co_awaited (with_deadline() takes it by value).
    sleep_awaiter(sleep_awaiter&&) noexcept = default;
    /// Always false: the wake-up is never inline, even for a 0 ns sleep.
    bool await_ready() const noexcept { return false; }
    /// Arms the timer; false (resume at once, with shutdown) only when the
    /// runtime is shut down (or the timer was cancelled by the shutdown or
    /// the queue's close while it was being armed); throws Error for other
    /// start failures.
    bool await_suspend(std::coroutine_handle<> h) { return node_.arm(h); }
    /// Why the coroutine was resumed.
    wake await_resume() noexcept { return node_.finish(); }
    /// The wait's state (for with_deadline()); not an API.
    detail::wait_node& node() noexcept { return node_; }

private:
    detail::wait_node node_;
};

/// The awaitable of sleep_until(rt, TimerClock, ns): a sleep on a clock
/// chosen at run time (boot-time, wall clock or monotonic). As
/// sleep_awaiter; a type of its own so that with_deadline(rt, TimePoint, ...)
/// -- a steady_clock deadline -- refuses it at compile time (see "Clocks").
class clock_sleep_awaiter {
public:
    /// Its clock is chosen at run time: not a steady_clock wait.
    static constexpr bool kSteadyClock = false;
    /// Use sleep_until(rt, TimerClock, ns) to make one.
    clock_sleep_awaiter(Runtime& rt, resume_on where, std::stop_token st) noexcept
        : node_(rt, where, std::move(st)) {}
    /// Movable until co_awaited (with_deadline() takes it by value).
    clock_sleep_awaiter(clock_sleep_awaiter&&) noexcept = default;
    /// Always false.
    bool await_ready() const noexcept { return false; }
    /// As sleep_awaiter::await_suspend.
    bool await_suspend(std::coroutine_handle<> h) { return node_.arm(h); }
    /// Why the coroutine was resumed.
    wake await_resume() noexcept { return node_.finish(); }
    /// The wait's state (for with_deadline()); not an API.
    detail::wait_node& node() noexcept { return node_; }

private:
    detail::wait_node node_;
};

/// The awaitable of event::wait(): co_await it once.
class event::awaiter {
public:
    /// Its deadlines (with_deadline) count on the monotonic clock.
    static constexpr bool kSteadyClock = true;
    /// Use event::wait() to make one.
    awaiter(event& ev, Runtime& rt, resume_on where, std::stop_token st) noexcept
        : node_(rt, where, std::move(st), &ev) {}
    /// Movable until co_awaited (with_deadline() takes it by value).
    awaiter(awaiter&&) noexcept = default;
    /// Always false: a set event resumes the coroutine posted, not inline.
    bool await_ready() const noexcept { return false; }
    /// Registers as the event's waiter (Error(invalid_argument) if another
    /// coroutine waits) and arms the timer, as sleep_awaiter does. If the
    /// timer cannot be started (it throws), the event's set state it took
    /// (or a notify that came meanwhile) is given back.
    bool await_suspend(std::coroutine_handle<> h) {
        event& ev = *node_.event_of();
        const auto me = reinterpret_cast<std::uintptr_t>(&node_);
        std::uintptr_t w = ev.word_.load(std::memory_order_acquire);
        for (;;) {
            if (w == kSet) {  // consume it: a notified wake-up, posted
                if (ev.word_.compare_exchange_weak(w, 0, std::memory_order_acq_rel, std::memory_order_acquire)) {
                    node_.signal(detail::wait_node::kNotify);
                    break;
                }
                continue;
            }
            if (w != 0) throw Error(errc::invalid_argument);  // someone else waits
            node_.set_registered(true);  // (before the CAS: a notify may take us off at once)
            if (ev.word_.compare_exchange_weak(w, me, std::memory_order_acq_rel, std::memory_order_acquire)) break;
            node_.set_registered(false);
        }
        try {
            return node_.arm(h);
        } catch (...) {
            node_.fail();  // unregisters; gives the notify back (c3)
            throw;
        }
    }
    /// Why the coroutine was resumed (unregisters from the event first).
    wake await_resume() noexcept { return node_.finish(); }
    /// The wait's state (for with_deadline()); not an API.
    detail::wait_node& node() noexcept { return node_; }

private:
    detail::wait_node node_;
};

inline event::awaiter event::wait(Runtime& rt, resume_on where, std::stop_token st) noexcept {
    return awaiter(*this, rt, where, std::move(st));
}
inline event::awaiter event::wait(Runtime& rt, std::stop_token st) noexcept {
    return awaiter(*this, rt, on_worker(), std::move(st));
}

/// Sleeps `d` (from the co_await, on the runtime's monotonic clock: a manual
/// runtime's virtual one), rounded up to the tick; resumes on `where` with
/// expired, or stopped/shutdown. A 0 or negative `d` resumes at the next
/// tick, posted (never inline). Any thread.
inline sleep_awaiter sleep_for(Runtime& rt, Duration d, resume_on where = {}, std::stop_token st = {}) noexcept {
    sleep_awaiter a(rt, where, std::move(st));
    a.node().set_delay(d);
    return a;
}
/// sleep_for(rt, d, on_worker(), st).
inline sleep_awaiter sleep_for(Runtime& rt, Duration d, std::stop_token st) noexcept {
    return sleep_for(rt, d, on_worker(), std::move(st));
}
/// Sleeps until `tp` on clock `clock` (ns since that clock's epoch, as
/// Runtime::now(clock) reads it); a past one resumes at the next tick. Never
/// early on that clock (a wall-clock step forward past `tp` ends it then; a
/// step back makes it wait for the wall clock to reach `tp` again). Its own
/// type, clock_sleep_awaiter: with_deadline(rt, d, ...) with a Duration
/// takes it (d counts on this clock), with a TimePoint does not compile.
inline clock_sleep_awaiter sleep_until(Runtime& rt, TimerClock clock, Duration tp, resume_on where = {},
                                       std::stop_token st = {}) noexcept {
    clock_sleep_awaiter a(rt, where, std::move(st));
    a.node().set_deadline(tp, clock);
    return a;
}
/// Sleeps until `tp` (steady_clock; a manual runtime's virtual monotonic
/// clock: rt.now(TimerClock::monotonic)).
inline sleep_awaiter sleep_until(Runtime& rt, TimePoint tp, resume_on where = {}, std::stop_token st = {}) noexcept {
    sleep_awaiter a(rt, where, std::move(st));
    a.node().set_deadline(tp.time_since_epoch(), TimerClock::monotonic);
    return a;
}
/// sleep_until(rt, tp, on_worker(), st).
inline sleep_awaiter sleep_until(Runtime& rt, TimePoint tp, std::stop_token st) noexcept {
    return sleep_until(rt, tp, on_worker(), std::move(st));
}

/// co_await with_deadline(rt, d, inner): `inner` (a tickwheel awaitable:
/// sleep_for(), sleep_until(), event.wait()) resumes with timed_out once `d` (from
/// the co_await, on the inner wait's clock) has passed, if nothing ended it
/// first; its own wake-ups (expired, notified, stopped, shutdown) are
/// unchanged, and it resumes on the context it names. No second timer: the
/// inner wait's timer takes the earlier deadline. Nesting keeps the
/// earliest. `rt` must be the runtime of `inner` (otherwise
/// Error(invalid_argument) at the co_await). The TimePoint form only over
/// monotonic-clock waits (see "Clocks"; a compile-time error otherwise).
template <detail::node_awaitable Inner>
class deadline_awaiter {
public:
    /// A steady_clock wait iff the inner one is.
    static constexpr bool kSteadyClock = Inner::kSteadyClock;
    /// Use with_deadline()/cancel_after() to make one.
    deadline_awaiter(Runtime& rt, Inner inner) noexcept : rt_(&rt), inner_(std::move(inner)) {}
    /// Movable until co_awaited (deadlines nest).
    deadline_awaiter(deadline_awaiter&&) noexcept = default;
    /// Always false.
    bool await_ready() const noexcept { return false; }
    /// Arms the inner wait with the earlier deadline; Error(invalid_argument)
    /// if `rt` is not the inner wait's runtime.
    bool await_suspend(std::coroutine_handle<> h) {
        if (&inner_.node().runtime() != rt_) throw Error(errc::invalid_argument);
        return inner_.await_suspend(h);
    }
    /// Why the coroutine was resumed (timed_out: this deadline passed first).
    wake await_resume() noexcept { return inner_.await_resume(); }
    /// The wait's state (for nesting); not an API.
    detail::wait_node& node() noexcept { return inner_.node(); }

private:
    Runtime* rt_;
    Inner inner_;
};

/// See deadline_awaiter: `d` from the co_await, on the inner wait's clock.
template <detail::node_awaitable Inner>
deadline_awaiter<std::remove_cvref_t<Inner>> with_deadline(Runtime& rt, Duration d, Inner&& inner) noexcept {
    deadline_awaiter<std::remove_cvref_t<Inner>> a(rt, std::forward<Inner>(inner));
    a.node().limit_after(d);
    return a;
}
/// See deadline_awaiter: at `tp` (steady_clock; a manual runtime's virtual
/// clock). Only over a wait on the monotonic clock: over a sleep_until(rt,
/// TimerClock, ns) -- a clock_sleep_awaiter, possibly on the boot-time or the
/// wall clock -- it does not compile (the constraint
/// detail::steady_wait<...> is not satisfied): a steady_clock deadline
/// converted to another clock could come early on one of the two (issue 32,
/// c2: a realtime wait took the steady nanoseconds as a 1970 wall-clock
/// deadline and timed out at once). Use with_deadline(rt, Duration, ...),
/// which counts on the wait's own clock.
template <detail::node_awaitable Inner>
    requires detail::steady_wait<std::remove_cvref_t<Inner>>
deadline_awaiter<std::remove_cvref_t<Inner>> with_deadline(Runtime& rt, TimePoint tp, Inner&& inner) noexcept {
    deadline_awaiter<std::remove_cvref_t<Inner>> a(rt, std::forward<Inner>(inner));
    a.node().limit(tp.time_since_epoch());
    return a;
}
/// with_deadline(rt, d, inner): cancels `inner` after `d` (wake::timed_out).
template <detail::node_awaitable Inner>
deadline_awaiter<std::remove_cvref_t<Inner>> cancel_after(Runtime& rt, Duration d, Inner&& inner) noexcept {
    return with_deadline(rt, d, std::forward<Inner>(inner));
}

/// A minimal coroutine type for examples and tests: starts at once (eager),
/// runs until its first co_await, and frees its frame when it finishes
/// (fire and forget; nothing to join: signal completion yourself). An
/// exception escaping the body calls std::terminate. Any coroutine type
/// that lets its body co_await standard awaitables works as well.
struct detached {
    /// The promise: eager, frees the frame at the end, terminates on an exception.
    struct promise_type {
        /// An empty detached (nothing to join).
        detached get_return_object() noexcept { return {}; }
        /// Runs at once, up to the first co_await.
        std::suspend_never initial_suspend() noexcept { return {}; }
        /// Frees the frame when the body ends.
        std::suspend_never final_suspend() noexcept { return {}; }
        /// co_return; (no value).
        void return_void() noexcept {}
        /// An exception escaping the body: std::terminate().
        [[noreturn]] void unhandled_exception() noexcept { std::terminate(); }
    };
};

}  // namespace tickwheel

#endif  // C++20 (the check after #pragma once)
