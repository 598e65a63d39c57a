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
///    is being resumed, a notify, shutdown. Never lost, never twice.
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
///  * Where it resumes (a resume_on): on_queue(q) -- inside q.run() on the
///    thread that calls it (tw_queue_run; an epoll/libuv loop); on_worker()
///    (the default) -- on one of the runtime's worker threads (on a manual
///    runtime, inside advance()); on_executor(obj, post) -- the wake-up is
///    handed to post(obj, handle) from a worker (tickwheel/coro_asio.hpp
///    adapts an Asio io_context, strand or any Asio executor). Never inline
///    inside the caller's co_await: a 0 ns sleep, a stop requested before the
///    co_await and a notify all go through the timer and resume on the
///    context, at the next tick (so a loop of 0 ns sleeps does not starve the
///    queue's other work; corosio#135). A stop or notify resumes the
///    coroutine within about one tick (Config::resolution); on a manual
///    runtime, at the next advance().
///    Two exceptions, both at the end of the runtime's life: when the
///    runtime is shut down (or the queue closed) while a coroutine waits, it
///    is resumed with shutdown on the thread running shutdown()/~Runtime/
///    Queue::close()/~Queue (inside its release hook: it may not shut the
///    runtime down from there) -- or posted, for on_executor; and a co_await
///    that starts after shutdown resumes at once (inline) with shutdown.
///  * Errors. A co_await whose timer cannot be started for another reason
///    (errc::limit_reached, no_memory, invalid_argument -- e.g. a closed
///    queue or a queue of another runtime --, forked) throws tickwheel::Error
///    into the coroutine at the co_await (the coroutine is not suspended).
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
///  * Task types. The awaitables follow the standard protocol
///    (await_ready/await_suspend(std::coroutine_handle<>)/await_resume) and
///    work with any coroutine type that lets its body co_await arbitrary
///    awaitables (cppcoro/folly/libcoro-style tasks, the tickwheel::detached
///    below). asio::awaitable<> does not (its await_transform admits only
///    Asio operations): use on_executor to resume tickwheel's coroutines on
///    an Asio thread instead.
///  * g++ 12: write each co_await as a statement of its own (`auto why =
///    co_await sleep_for(...);`). g++ 12 keeps the awaiter of a co_await
///    inside an if/while condition on the stack, not in the frame (a crash
///    once it resumes elsewhere), and destroys the members of a braced
///    aggregate temporary awaiter twice. clang has neither bug.
///
/// THE WAIT NODE'S OWNER RULES (in the style of src/runtime/timer_state.hpp's
/// ground rules). A wait_node has one atomic state word, `state_`, of bits:
///
///   PUBLISHED  set once by await_suspend (the arming thread, A), after the
///              timer started and id_ was stored: from then on other threads
///              may read id_; A touches the node no more (the frame may be
///              gone the next instant).
///   FIRED      set by the timer's callback or release hook (T) that found
///              PUBLISHED clear: T ran before A finished arming (a 0 ns timer
///              on another core, a shutdown). T then touches the node no more
///              and A owns the resumption: A re-arms a 0 ns timer (the
///              wake-up is posted again, never run inline) or, if that start
///              fails, resumes inline with shutdown.
///   STOP       set by the stop callback (any thread, with fetch_or).
///   NOTIFY     set by event::notify (any thread, with fetch_or).
///   DONE       set by T with ONE CAS, over an observed word with PUBLISHED:
///              the decision to resume, and the reason, read from the same
///              word. Exactly one T per armed timer runs (the runtime's
///              contract: a one-shot's callback runs, or its release hook
///              runs without a run at shutdown; the callable forgets the node
///              in its first run, so its hook after a run does nothing), and
///              A arms the next timer only after T set FIRED: so DONE is set
///              once per co_await.
///
///   Ground rules:
///   1. `result_` is written only by the DONE setter (or by A when it
///      resumes inline), before the resumption; read by await_resume after.
///   2. `id_` is written only by A, before PUBLISHED (release); read by
///      STOP/NOTIFY setters after observing PUBLISHED (acquire).
///   3. A STOP/NOTIFY setter that observed PUBLISHED and not DONE hurries the
///      timer: rt.reset(id_, 0) (a stale id is answered not_found: harmless),
///      so T runs at the next tick; one that observed PUBLISHED clear does
///      nothing more: A sees the bit in the word its PUBLISHED fetch_or
///      returns and hurries the timer itself, with its local copy of the id.
///   4. A STOP/NOTIFY setter may run concurrently with the resumption: the
///      node stays alive until it returns, because await_resume, before the
///      co_await returns, destroys the std::stop_callback (which waits for a
///      running callback on another thread) and unregisters from the event
///      (which waits for a notify in progress).
///   5. No user code runs while a node is inside an operation other than the
///      resumption itself, which is the last thing its thread does with it.
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
#include <coroutine>
#include <cstdint>
#include <exception>
#include <optional>
#include <stop_token>
#include <thread>
#include <utility>

#include "tickwheel/runtime.hpp"

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
/// exactly once, or destroy the frame deliberately).
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

    wait_node(Runtime& rt, resume_on where, std::stop_token st) noexcept
        : rt_(&rt), where_(where), st_(std::move(st)) {}
    // Movable only before the co_await (with_deadline takes its inner
    // awaitable by value): nothing is armed yet.
    wait_node(wait_node&& o) noexcept
        : rt_(o.rt_), where_(o.where_), st_(std::move(o.st_)), deadline_(o.deadline_),
          limit_(o.limit_), delay_(o.delay_), clock_(o.clock_), has_deadline_(o.has_deadline_),
          has_limit_(o.has_limit_), has_delay_(o.has_delay_), has_limit_delay_(o.has_limit_delay_),
          limit_delay_(o.limit_delay_) {}
    wait_node& operator=(wait_node&&) = delete;

    Runtime& runtime() const noexcept { return *rt_; }

    /// Sets a deadline (ns since the epoch of `clock`) after which the wait
    /// ends with timed_out (with_deadline). The earlier of two limits wins.
    /// The limit is on the inner wait's clock.
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
    /// As limit(), `d` after the co_await begins.
    void limit_after(Duration d) noexcept {
        if (!has_limit_delay_ || d < limit_delay_) limit_delay_ = d;
        has_limit_delay_ = true;
    }

    /// STOP or NOTIFY from any thread (rules 3, 4). Returns false if the
    /// decision was already made (the bit came too late to matter).
    bool signal(std::uint32_t bit) noexcept {
        const std::uint32_t old = state_.fetch_or(bit, std::memory_order_acq_rel);
        if ((old & kDone) != 0) return false;
        if ((old & kPublished) != 0) hurry(id_);
        return true;
    }

    /// await_suspend's part: arms the timer. Returns false when the
    /// coroutine must go on inline (the runtime is shut down: result_ =
    /// shutdown). Throws Error for other start failures.
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
        bool post_now = false;
        for (;;) {
            const std::uint32_t seen = state_.load(std::memory_order_acquire);
            const bool signalled = (seen & (kStop | kNotify)) != 0;
            StartOptions o;
            o.clock = clock_;
            o.queue = where_.queue;
            // A stop/notify before arming, or a re-post: a 0 ns timer (the
            // next tick, on the context; never inline).
            if (relative)
                o.delay = post_now || signalled ? Duration::zero() : std::clamp(delay_, Duration::zero(), kMaxDelay);
            else
                o.deadline = TimePoint(post_now || signalled ? now : at);
            std::error_code ec;
            const Timer t = rt_->start(o, detail::Callback(fire_fn{this}), ec);
            if (ec) {
                if (ec == make_error_code(errc::shutting_down)) {
                    result_ = decide(state_.load(std::memory_order_acquire), wake::shutdown);
                    return false;  // inline: there is no context left to resume on
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
                // Rule 3: a signal set after `seen` and before PUBLISHED was
                // not acted on: hurry, with the local id (the node may be gone).
                if ((old & (kStop | kNotify)) != 0 && !signalled && !post_now) hurry_id(*rt, id);
                return true;  // the node is not touched again here
            }
            // T ran before we published (a 0 ns timer on another core; a
            // shutdown): we own the resumption. Post it again.
            state_.fetch_and(~(kFired | kPublished), std::memory_order_acq_rel);
            post_now = true;
        }
    }

    /// await_resume's part (rule 4): after this, no other thread touches the node.
    wake finish() noexcept {
        stop_cb_.reset();  // waits for a stop callback running on another thread
        if (ev_ != nullptr) unregister();
        return result_;
    }

    void attach(event* ev) noexcept { ev_ = ev; }

private:
    friend class tickwheel::event;

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
            if (n != nullptr) n->on_timer(true);  // cancelled without a run: shutdown / queue closed
        }
    };

    static void hurry_id(Runtime& rt, std::uint64_t id) noexcept {
        std::error_code ec;
        rt.reset(id, Duration::zero(), ec);  // not pending (due, running, gone): T runs anyway
    }
    void hurry(std::uint64_t id) noexcept {
        // Due (in a queue, or handed to a worker): it runs anyway; a reset
        // would take it back for a tick.
        const auto info = rt_->query(id);
        if (info && info->state == TimerStatus::pending) hurry_id(*rt_, id);
    }

    wake decide(std::uint32_t bits, wake natural) const noexcept {
        if ((bits & kNotify) != 0) return wake::notified;
        if ((bits & kStop) != 0) return wake::stopped;
        return natural;
    }

    // T: the timer's callback (cancelled == false) or its release hook
    // without a run (cancelled == true).
    void on_timer(bool cancelled) noexcept {
        std::uint32_t old = state_.load(std::memory_order_acquire);
        for (;;) {
            if ((old & kPublished) == 0) {
                if (state_.compare_exchange_weak(old, old | kFired, std::memory_order_acq_rel,
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
    Duration limit_delay_{0};
    std::atomic<std::uint32_t> state_{0};
    std::uint64_t id_ = 0;
    std::coroutine_handle<> h_{};
    wake result_ = wake::expired;
    event* ev_ = nullptr;
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
/// stopped, shutdown) is kept for the next wait: never lost.
/// At most one coroutine waits at a time (a second concurrent wait() throws
/// Error(invalid_argument) at its co_await). The event must outlive its
/// waits. Any thread; lock-free (a notify in progress is waited for, for a
/// few instructions, by a waiter resuming at that moment).
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
        break;  // 0 or set: a notify took us off
    }
    ev_ = nullptr;
}

/// The awaitables built on wait_node (sleep, event wait) expose it.
template <class A>
concept node_awaitable = requires(A& a) {
    { a.node() } -> std::same_as<wait_node&>;
};
}  // namespace detail

/// The awaitable of sleep_for/sleep_until: co_await it once.
class sleep_awaiter {
public:
    /// Use sleep_for()/sleep_until() to make one.
    sleep_awaiter(Runtime& rt, resume_on where, std::stop_token st) noexcept : node_(rt, where, std::move(st)) {}
    /// Movable until co_awaited (with_deadline() takes it by value).
    sleep_awaiter(sleep_awaiter&&) noexcept = default;
    /// Always false: the wake-up is never inline, even for a 0 ns sleep.
    bool await_ready() const noexcept { return false; }
    /// Arms the timer; false (resume at once, with shutdown) only when the
    /// runtime is shut down; throws Error for other start failures.
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
    /// Use event::wait() to make one.
    awaiter(event& ev, Runtime& rt, resume_on where, std::stop_token st) noexcept
        : ev_(&ev), node_(rt, where, std::move(st)) {}
    /// Movable until co_awaited (with_deadline() takes it by value).
    awaiter(awaiter&&) noexcept = default;
    /// Always false: a set event resumes the coroutine posted, not inline.
    bool await_ready() const noexcept { return false; }
    /// Registers as the event's waiter (Error(invalid_argument) if another
    /// coroutine waits) and arms the timer, as sleep_awaiter does.
    bool await_suspend(std::coroutine_handle<> h) {
        const auto me = reinterpret_cast<std::uintptr_t>(&node_);
        std::uintptr_t w = ev_->word_.load(std::memory_order_acquire);
        for (;;) {
            if (w == kSet) {  // consume it: a notified wake-up, posted
                if (ev_->word_.compare_exchange_weak(w, 0, std::memory_order_acq_rel, std::memory_order_acquire)) {
                    node_.signal(detail::wait_node::kNotify);
                    break;
                }
                continue;
            }
            if (w != 0) throw Error(errc::invalid_argument);  // someone else waits
            if (ev_->word_.compare_exchange_weak(w, me, std::memory_order_acq_rel, std::memory_order_acquire)) {
                node_.attach(ev_);
                break;
            }
        }
        try {
            return node_.arm(h);
        } catch (...) {
            node_.finish();  // unregisters
            throw;
        }
    }
    /// Why the coroutine was resumed (unregisters from the event first).
    wake await_resume() noexcept { return node_.finish(); }
    /// The wait's state (for with_deadline()); not an API.
    detail::wait_node& node() noexcept { return node_; }

private:
    event* ev_;
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
/// Runtime::now(clock) reads it); a past one resumes at the next tick.
inline sleep_awaiter sleep_until(Runtime& rt, TimerClock clock, Duration tp, resume_on where = {},
                                 std::stop_token st = {}) noexcept {
    sleep_awaiter a(rt, where, std::move(st));
    a.node().set_deadline(tp, clock);
    return a;
}
/// Sleeps until `tp` (steady_clock; a manual runtime's virtual monotonic
/// clock: rt.now(TimerClock::monotonic)).
inline sleep_awaiter sleep_until(Runtime& rt, TimePoint tp, resume_on where = {}, std::stop_token st = {}) noexcept {
    return sleep_until(rt, TimerClock::monotonic, tp.time_since_epoch(), where, std::move(st));
}
/// sleep_until(rt, tp, on_worker(), st).
inline sleep_awaiter sleep_until(Runtime& rt, TimePoint tp, std::stop_token st) noexcept {
    return sleep_until(rt, tp, on_worker(), std::move(st));
}

/// co_await with_deadline(rt, d, inner): `inner` (a tickwheel awaitable:
/// sleep_for(), sleep_until(), event.wait()) resumes with timed_out once `d` (from
/// the co_await) has passed, if nothing ended it first; its own wake-ups
/// (expired, notified, stopped, shutdown) are unchanged, and it resumes on
/// the context it names. No second timer: the inner wait's timer takes the
/// earlier deadline. Nesting keeps the earliest. `rt` must be the runtime
/// of `inner` (otherwise Error(invalid_argument) at the co_await).
template <detail::node_awaitable Inner>
class deadline_awaiter {
public:
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

/// See deadline_awaiter: `d` from the co_await.
template <detail::node_awaitable Inner>
deadline_awaiter<std::remove_cvref_t<Inner>> with_deadline(Runtime& rt, Duration d, Inner&& inner) noexcept {
    deadline_awaiter<std::remove_cvref_t<Inner>> a(rt, std::forward<Inner>(inner));
    a.node().limit_after(d);
    return a;
}
/// See deadline_awaiter: at `tp` (steady_clock; a manual runtime's virtual clock).
template <detail::node_awaitable Inner>
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
