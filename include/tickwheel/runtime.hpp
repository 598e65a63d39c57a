// tickwheel/runtime.hpp -- the thread-safe timer runtime (C++ API).
//
// A Runtime owns N shards (default: one per online CPU). Each shard is a
// hierarchical timing wheel (tickwheel/wheel.hpp) driven by its own thread,
// which sleeps until the wheel's next deadline. Any thread may start, stop or
// re-arm a timer: the request goes to the owning shard through a lock-free
// MPSC queue (moodycamel::ConcurrentQueue). Expired timers are handed in
// batches to a oneTBB task_arena, whose worker threads run the callbacks;
// shard threads never run user code.
//
// THE CONTRACT, in one place (each function repeats its part):
//
//  * Thread safety. Every member function of Runtime and Timer may be called
//    from any thread, concurrently, including from inside a callback.
//  * Never early. A callback never starts before its deadline, as read by
//    std::chrono::steady_clock (CLOCK_MONOTONIC) by the caller of start().
//    Deadlines are rounded UP to the runtime's resolution (a tick, default
//    1 ms); a timer fires within about one tick plus scheduling noise after
//    its deadline.
//  * Callback context. Callbacks run on the runtime's TBB worker threads,
//    never on the caller's thread and never on a shard thread. Runs of one
//    timer never overlap. A callback may call any function here, on its own
//    timer or others, except the runtime's destructor/shutdown (reported as
//    an error, see shutdown()). A release hook that runs on a worker (after
//    the last run) counts as inside the callback for this purpose.
//  * Stop. stop() never blocks and tells, exactly, whether it prevented the
//    callback from running (again). A one-shot timer ends in exactly one of
//    three ways: its callback runs, or one stop()/stop_sync() returns true
//    (the callback never runs), or shutdown() cancels it while it is
//    pending. A periodic timer runs until one stop()/stop_sync() returns
//    true or shutdown() cancels it; a stop that lands during a run returns
//    true and that run is the last (no run starts after the stop returns).
//  * Release. The callable passed to start() is destroyed exactly once, when
//    the runtime is done with the timer: after its last run, inside the
//    stop() that cancelled it (or, if a run was in progress, right after that
//    run), or at shutdown. Its destructor is the timer's release hook: free
//    what the callback uses there, or in the callback's last run.
//  * Ids. A timer is named by a 64-bit id carrying a 24-bit generation: a
//    stale id (timer fired, stopped, or its slot reused, any number of
//    times, in any interleaving with the call) is answered "not found",
//    never acted on. Id 0 is never valid. A slot whose generation reaches
//    2^24 - 1 is retired rather than reused (80 bytes per 16.7 million
//    timers started on one slot).
//  * Fork. In a child process created by fork() the runtime's threads do
//    not exist. Every operation on a runtime created before the fork fails
//    there with errc::forked (stop/stop_sync return false, stats() throws)
//    and no callback or release hook of it runs there; destroying it frees
//    its memory without running any. A runtime created in the child works
//    normally. The parent is unaffected.
//  * oneTBB. Callbacks run in a tbb::task_arena per runtime; the workers of
//    all runtimes come from oneTBB's process-wide pool. worker_count() is
//    what this runtime can run at once (see there). In a fork() child of a
//    process that had more than one thread (at any depth), oneTBB is not
//    used: the runtime runs callbacks on up to Config::workers threads of
//    its own (oneTBB is not fork-safe).
//  * Errors. Functions that can fail for a reason the caller must handle
//    return bool (stop/reset: false = no such pending timer). Invalid
//    arguments, shutdown and the pending limit throw tickwheel::Error from
//    the throwing overloads; every operation also has a noexcept overload
//    taking std::error_code&.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <system_error>
#include <vector>

#include "tickwheel/detail/callback.hpp"

namespace tickwheel {

namespace rt {
struct RuntimeCore;
}

using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC on Linux
using Duration = std::chrono::nanoseconds;
using TimePoint = Clock::time_point;

/// Error codes; the values are the (positive) errno numbers the C API
/// returns negated.
enum class errc : int {
    invalid_argument = 22,  // bad delay/period/config, empty callback
    no_memory = 12,         // allocation failed
    not_found = 2,          // no such pending timer (fired, stopped, stale, never existed)
    limit_reached = 11,     // Config::max_timers timers are alive
    shutting_down = 108,    // the runtime is shutting down or shut down
    would_deadlock = 35,    // shutdown() from one of the runtime's callbacks or from a release hook
    forked = 1001,          // the runtime was created in the parent of this fork() child
};
const std::error_category& error_category() noexcept;
std::error_code make_error_code(errc e) noexcept;

}  // namespace tickwheel

// errc converts to std::error_code (and compares with one).
template <>
struct std::is_error_code_enum<tickwheel::errc> : std::true_type {};

namespace tickwheel {

/// Thrown by the throwing overloads.
class Error : public std::system_error {
public:
    explicit Error(errc e) : std::system_error(make_error_code(e)) {}
    explicit Error(std::error_code ec) : std::system_error(ec) {}
};

/// The longest delay (or deadline distance) accepted: 2^60 ns, about 36.5
/// years. Longer ones are errc::invalid_argument.
inline constexpr Duration kMaxDelay{std::int64_t{1} << 60};

struct Config {
    /// Number of shards (wheel + driver thread each); 0 = one per online CPU.
    /// At most 256.
    unsigned shards = 0;
    /// TBB arena concurrency (callback worker threads); 0 = one per online CPU.
    unsigned workers = 0;
    /// The tick. Deadlines are rounded up to it. 1 us .. 1 s.
    Duration resolution = std::chrono::milliseconds(1);
    /// Pin shard i's driver thread to CPU i % online CPUs.
    bool pin_shards = false;
    /// Maximum number of live timers (started and not yet released); 0 =
    /// unlimited. start() beyond it fails with errc::limit_reached.
    std::size_t max_timers = 0;
    /// Called (on the worker thread) when a callback throws. The exception
    /// is otherwise swallowed and counted in Stats::callback_exceptions; the
    /// timer behaves as if the callback had returned. Must not throw.
    std::function<void(std::exception_ptr, std::uint64_t timer_id)> on_callback_error;
};

/// A snapshot of counters. Counters are totals since creation.
struct Stats {
    std::vector<std::size_t> pending_per_shard;  // timers filed in each shard's wheel
    std::vector<std::size_t> inbox_per_shard;    // requests queued to each shard (approx.)
    std::uint64_t live = 0;              // started and not yet released (callable not yet destroyed)
    std::size_t slots = 0;               // timer records ever allocated (80 bytes each): the memory high-water mark
    std::uint64_t started = 0;
    std::uint64_t fired = 0;             // callback runs
    std::uint64_t stopped = 0;           // stop() calls that returned true
    std::uint64_t reset = 0;             // reset() calls that returned true
    std::uint64_t callback_exceptions = 0;
    std::uint64_t cancelled_at_shutdown = 0;
    /// Lateness = callback start minus deadline (rounded up to the tick).
    /// Percentiles from a log-linear histogram (about 3% relative error).
    Duration lateness_p50{0}, lateness_p99{0}, lateness_p999{0}, lateness_max{0};
    std::uint64_t lateness_samples = 0;
};

/// Options for Runtime::start(const StartOptions&, F&&).
struct StartOptions {
    /// Absolute deadline of the first run (steady_clock). Overrides `delay`
    /// when set (non-default).
    TimePoint deadline{};
    /// Delay of the first run from now, used when `deadline` is not set.
    Duration delay{0};
    /// 0 = one-shot; otherwise fixed-rate period (runs at first + k*period;
    /// overrun periods are skipped, never run in a burst). Must be >= 1 ns;
    /// rounded up to the resolution.
    Duration period{0};
    /// Shard to place the timer on (taken modulo the shard count); -1 = the
    /// calling thread's own shard: each thread is given one, round-robin over
    /// the shards, on its first start (locality without depending on which
    /// CPU it runs on; measured in bench/shard_choice.cpp).
    int shard = -1;
};

class Runtime {
public:
    /// Starts the shard threads and the TBB arena. Throws Error
    /// (invalid_argument) for a bad Config, std::system_error if a thread
    /// cannot be started.
    explicit Runtime(Config config = {});

    /// shutdown(), then frees everything. Calling it from one of this
    /// runtime's callbacks or from a release hook is a programming error: it
    /// prints a message and calls std::terminate (the C API returns
    /// TW_EDEADLK instead); call shutdown() yourself to get the error as an
    /// exception. In a fork() child it frees the memory only: no callback,
    /// release hook or thread join.
    ~Runtime();

    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;

    // ---- start ---------------------------------------------------------
    /// Starts a one-shot timer that calls `f` once, `delay` from now (a
    /// fresh steady_clock reading), rounded up to the tick. `f` is any
    /// move-constructible callable taking `tickwheel::Timer` or nothing;
    /// captures up to 24 bytes are stored without a heap allocation.
    /// Returns the timer's handle. Throws Error: invalid_argument (negative
    /// delay or delay > kMaxDelay), limit_reached, shutting_down. Cost: O(1),
    /// lock-free: one slot allocation and one queue push.
    template <class F>
    Timer start(Duration delay, F&& f) {
        StartOptions o;
        o.delay = delay;
        return start(o, std::forward<F>(f));
    }
    /// As start(), at an absolute steady_clock deadline (a past one fires
    /// at once).
    template <class F>
    Timer start_at(TimePoint deadline, F&& f) {
        StartOptions o;
        o.deadline = deadline;
        return start(o, std::forward<F>(f));
    }
    /// A fixed-rate periodic timer: first run after `period`, then every
    /// `period`. Throws as start(), and invalid_argument for period <= 0.
    template <class F>
    Timer start_periodic(Duration period, F&& f) {
        if (period <= Duration::zero()) {
            detail::Callback released(std::forward<F>(f));  // released on failure, as by start()
            throw Error(errc::invalid_argument);
        }
        StartOptions o;
        o.delay = period;
        o.period = period;
        return start(o, std::forward<F>(f));
    }
    template <class F>
    Timer start(const StartOptions& opts, F&& f) {
        std::error_code ec;
        Timer t = start(opts, detail::Callback(std::forward<F>(f)), ec);
        if (ec) throw Error(ec);
        return t;
    }
    /// The non-throwing start: on failure returns an empty Timer, sets `ec`,
    /// and destroys `cb` (running its release hook) before returning, outside
    /// any internal lock or guard (the hook may block or call into the
    /// runtime; shutdown from it reports would_deadlock). Errors:
    /// invalid_argument, shutting_down, limit_reached, no_memory (no slot,
    /// or no memory to queue the request), forked.
    Timer start(const StartOptions& opts, detail::Callback&& cb, std::error_code& ec) noexcept;

    // ---- stop ----------------------------------------------------------
    /// Cancels the timer. Never blocks (no lock, no wait for a running
    /// callback). Returns true iff this call prevented the callback from
    /// running (one-shot: it had not started; periodic: no run will start
    /// after this returns). Returns false for a timer that already ran its
    /// last run, is running it now, was already stopped, or a stale/0 id.
    /// If true and no run is in progress, the callable is destroyed (release
    /// hook) inside this call; if a periodic run is in progress, right after
    /// that run on its worker thread. O(1): one CAS, one queue push.
    bool stop(std::uint64_t id) noexcept;
    bool stop(Timer t) noexcept { return stop(t.id()); }

    /// As stop(), and in addition, when it returns, the callback is not
    /// running and will never run again, and the timer's release hook (its
    /// callable's destructor) has returned -- whoever runs it: a worker after
    /// the last run, a concurrent stop(), or shutdown() --, so the caller may
    /// free what they use. Waits for a run or a release in progress (even if
    /// it then returns false). Called from inside the same timer's callback
    /// it does not wait for itself. Two callbacks that stop_sync each other
    /// wait for each other forever (as with Linux's del_timer_sync): don't.
    bool stop_sync(std::uint64_t id) noexcept;
    bool stop_sync(Timer t) noexcept { return stop_sync(t.id()); }

    // ---- reset ---------------------------------------------------------
    /// Re-arms a pending timer to fire `delay` from now (a periodic timer:
    /// next run then, then every period). Returns true on success, false if
    /// the timer is not pending (already fired -- unless called from its own
    /// running callback, which re-arms a one-shot timer --, stopped, stale).
    /// Cost: a later deadline is one CAS on the caller's side (the shard
    /// re-files the timer lazily when its old slot comes due); an earlier one
    /// adds a queue push. Throws Error(invalid_argument) for delay < 0 or >
    /// kMaxDelay; the noexcept overload reports that, and shutting_down, in
    /// `ec` (returning false).
    bool reset(std::uint64_t id, Duration delay);
    bool reset(Timer t, Duration delay) { return reset(t.id(), delay); }
    bool reset(std::uint64_t id, Duration delay, std::error_code& ec) noexcept;

    // ---- lifecycle -----------------------------------------------------
    /// Shuts down: from now on start() fails with shutting_down; pending
    /// timers are cancelled (their callables destroyed on this thread);
    /// callbacks in progress are waited for; all threads are joined.
    /// stop()/stop_sync()/reset() stay safe to call during and after it
    /// (they return false). Idempotent; concurrent callers all wait for the
    /// end. Called from one of this runtime's callbacks, or from inside any
    /// release hook (a callable's destructor run by a runtime: on a worker,
    /// inside a stop, inside a shutdown, or when a start fails), it throws
    /// Error(would_deadlock) and does nothing. In a fork() child: forked.
    void shutdown();
    void shutdown(std::error_code& ec) noexcept;
    bool is_shut_down() const noexcept;

    // ---- observation ---------------------------------------------------
    Stats stats() const;
    unsigned shard_count() const noexcept;
    /// The callbacks that can run at once: Config::workers, whatever other
    /// runtimes exist, or fewer while the application's own
    /// tbb::global_control(max_allowed_parallelism) is lower (that limit
    /// counts the application's thread: limit - 1, at least 1, shared by
    /// all runtimes). Read at each call. On a runtime's own threads (a fork
    /// child, see "oneTBB" above): Config::workers, or fewer once the system
    /// refused a thread.
    unsigned worker_count() const noexcept;
    Duration resolution() const noexcept;
    /// The runtime's clock: steady_clock::now().
    static TimePoint now() noexcept { return Clock::now(); }

    /// True in a child process created by fork() after this runtime was
    /// created (see "Fork" above). Any thread.
    bool is_forked() const noexcept;

private:
    std::unique_ptr<rt::RuntimeCore> core_;
};

inline bool Timer::stop() noexcept { return rt_ != nullptr && rt_->stop(id_); }
inline bool Timer::stop_sync() { return rt_ != nullptr && rt_->stop_sync(id_); }
inline bool Timer::reset(Duration delay) { return rt_ != nullptr && rt_->reset(id_, delay); }

}  // namespace tickwheel
