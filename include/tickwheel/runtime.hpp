// SPDX-License-Identifier: MIT OR Apache-2.0
/// @file
/// tickwheel/runtime.hpp -- the thread-safe timer runtime (C++ API).
///
/// A Runtime owns N shards (default: one per online CPU). Each shard is a
/// hierarchical timing wheel (tickwheel/wheel.hpp) driven by its own thread,
/// which sleeps until the wheel's next deadline. Any thread may start, stop or
/// re-arm a timer: the request goes to the owning shard through a lock-free
/// MPSC queue (moodycamel::ConcurrentQueue). Expired timers are handed in
/// batches to a oneTBB task_arena, whose worker threads run the callbacks;
/// shard threads never run user code.
///
/// THE CONTRACT, in one place (each function repeats its part):
///
///  * Thread safety. Every member function of Runtime and Timer may be called
///    from any thread, concurrently, including from inside a callback.
///  * Never early. A callback never starts before its deadline, as read by
///    std::chrono::steady_clock (CLOCK_MONOTONIC) by the caller of start()
///    -- or by the timer's clock (StartOptions::clock), or by a manual
///    runtime's virtual clocks.
///    Deadlines are rounded UP to the runtime's resolution (a tick, default
///    1 ms); a timer fires within about one tick plus scheduling noise after
///    its deadline. A relative delay counts from a reading taken during the
///    call: where the kernel clocks on the TSC, an upper bound of
///    CLOCK_MONOTONIC at most ~3 us above it (never below), which spares
///    the call the ordered clock read (environment TICKWHEEL_TSC=0: the
///    exact clock_gettime() reading instead).
///  * Progress (since 1.7). The runtime's own threads -- the shards' drivers
///    and the workers -- never wait for a thread of yours, whatever its
///    priority or state: a caller preempted, at nice 19 or SCHED_IDLE,
///    stopped at a breakpoint or inside a signal handler, at any
///    instruction of any call here, delays no other timer; at most its own
///    call in progress (a start not yet filed: its id was never returned).
///    What does delay a timer: every worker busy in callbacks (a blocking
///    callback holds its worker: with W workers, W blocking callbacks hold
///    back every other callback -- size Config::workers for them, or run
///    blocking work on a delivery queue's thread); a delivery queue whose
///    thread does not call run() (its timers only); the runtime's threads
///    starved of CPU (a CPU hog, a too-low priority of the whole process).
///    Only shutdown() and a queue's destroy wait for calls in progress. Two
///    exceptions, both about one resource a caller holds for a few
///    instructions: a caller inside a stop or reset of a timer bound to a
///    delivery queue holds that queue's lock (that queue's runs wait for
///    it; no other timer does), and a reset of a boot-time or wall-clock
///    timer waits while another reset of THE SAME timer holds its deadline
///    lock (between its clock readings and its CAS) -- also when it is a
///    callback resetting its own timer, on a worker.
///  * Callback context. Callbacks run on the runtime's TBB worker threads,
///    never on the caller's thread and never on a shard thread. Runs of one
///    timer never overlap. A callback may call any function here, on its own
///    timer or others, except the runtime's destructor/shutdown (reported as
///    an error, see shutdown()). A release hook that runs on a worker (after
///    the last run) counts as inside the callback for this purpose.
///  * Stop. stop() never blocks and tells, exactly, whether it prevented the
///    callback from running (again). A one-shot timer ends in exactly one of
///    three ways: its callback runs, or one stop()/stop_sync() returns true
///    (the callback never runs), or shutdown() cancels it while it is
///    pending. A periodic timer runs until one stop()/stop_sync() returns
///    true or shutdown() cancels it; a stop that lands during a run returns
///    true and that run is the last (no run starts after the stop returns).
///  * Release. The callable passed to start() is destroyed exactly once, when
///    the runtime is done with the timer: after its last run, inside the
///    stop() that cancelled it (or, if a run was in progress, right after that
///    run), or at shutdown. Its destructor is the timer's release hook: free
///    what the callback uses there, or in the callback's last run.
///  * Ids. A timer is named by a 64-bit id carrying a 24-bit generation: a
///    stale id (timer fired, stopped, or its slot reused, any number of
///    times, in any interleaving with the call) is answered "not found",
///    never acted on. Id 0 is never valid. A slot whose generation reaches
///    2^24 - 1 is retired rather than reused (64 bytes per 16.7 million
///    timers started on one slot).
///  * Fork. In a child process created by fork() the runtime's threads do
///    not exist. Every operation on a runtime created before the fork fails
///    there with errc::forked (stop/stop_sync return false, stats() throws)
///    and no callback or release hook of it runs there; destroying it frees
///    its memory without running any. A runtime created in the child works
///    normally, whatever instant the parent forked at: with other threads
///    inside any tickwheel function, the process's first runtime creation
///    included (1.6.0 and earlier: a child forked then could hang in its
///    own first creation). fork() from a signal handler is outside this (POSIX
///    does not make fork() async-signal-safe). The parent is unaffected.
///  * oneTBB. Callbacks run in a tbb::task_arena per runtime; the workers of
///    all runtimes come from oneTBB's process-wide pool. worker_count() is
///    what this runtime can run at once (see there). In a fork() child of a
///    process that had more than one thread (at any depth), oneTBB is not
///    used: the runtime runs callbacks on up to Config::workers threads of
///    its own (oneTBB is not fork-safe).
///  * Errors. Functions that can fail for a reason the caller must handle
///    return bool (stop/reset: false = no such pending timer). Invalid
///    arguments, shutdown and the pending limit throw tickwheel::Error from
///    the throwing overloads; every operation also has a noexcept overload
///    taking std::error_code&. Since 1.5 Error::what() names the argument
///    and the limit ("delay -5 ns is negative: ...: invalid argument").
///
/// LINKING AND THE C++ ABI. This API works with the static library
/// (tickwheel::tickwheel_static) and with the shared libtickwheel.so.1
/// (tickwheel::tickwheel, pkg-config tickwheel), which exports the
/// non-template entry points marked TW_CXX_API under the symbol version
/// TICKWHEEL_CXX_1 (the C API's is TICKWHEEL_1). Within 1.x:
///
///  * Runtime is a pointer to a private implementation: its size never
///    changes. Timer (a Runtime* and an id) and detail::Callback (an ops
///    table pointer and 24 inline bytes; the table's three functions and
///    their meaning) are frozen: they are compiled into programs.
///  * Config, StartOptions and Stats only grow, at their end, and so that
///    their sizeof grows (no tail padding: the library checks it). The
///    inline functions here pass sizeof(T) as this header defines it to the
///    library, which reads/writes only the fields within that size: a field
///    a program's (older) header lacks takes its default. A struct larger
///    than the library knows (a program built against a newer 1.y header
///    than the installed library) is refused: Error(invalid_argument) from
///    the constructor and start(); stats() fills the fields it knows.
///  * No exported function is removed or changes its meaning; errc values
///    stay. tickwheel::Error's type information lives in the library (catch
///    it by type anywhere) and error_category() is one object per process.
///  * The C++ ABI is that of libstdc++'s C++11 ABI (_GLIBCXX_USE_CXX11_ABI=1,
///    the default of g++ >= 5 and of clang with libstdc++): std::function,
///    std::vector, std::error_code and std::chrono::duration cross the
///    boundary. Build with another standard library (libc++) or ABI and use
///    the static library or the C API (tickwheel.h) instead.
///  * A break of any of this is a new SONAME (libtickwheel.so.2) and a new
///    major version, never a silent change; capi_abi_check (abidiff against
///    abi/) catches an accidental one.
#pragma once

// C++20 or nothing: below it (or from C) this header stops with this one
// error instead of a wall of them (the rest of the file is skipped; the
// #endif is the file's last line). ctest cxx20_header_guard checks it.
#if !defined(__cplusplus) || __cplusplus < 202002L
#error "tickwheel/runtime.hpp is part of tickwheel's C++ API and needs C++20: compile with -std=c++20 (or later); from C or older C++ use the C API, <tickwheel/tickwheel.h>"
#else

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "tickwheel/detail/callback.hpp"

/// Marks what libtickwheel.so.1 exports of the C++ API (default
/// visibility; the library is built with hidden visibility, and its version
/// script admits these under TICKWHEEL_CXX_1). Empty for other compilers.
#if defined(__GNUC__) && __GNUC__ >= 4
#  define TW_CXX_API __attribute__((visibility("default")))
#else
#  define TW_CXX_API
#endif

namespace tickwheel {

namespace rt {
struct RuntimeCore;
class DeliveryQueue;
}
class Queue;

using Clock = std::chrono::steady_clock;  ///< the runtime's clock: CLOCK_MONOTONIC on Linux
/// Delays, periods and the resolution, in nanoseconds.
using Duration = std::chrono::nanoseconds;
/// A Clock time: an absolute deadline (StartOptions::deadline, Runtime::now()).
using TimePoint = Clock::time_point;

/// Error codes; the values are the (positive) errno numbers the C API
/// returns negated.
enum class errc : int {
    invalid_argument = 22,  ///< bad delay/period/config, empty callback
    no_memory = 12,         ///< allocation failed
    not_found = 2,          ///< no such pending timer (fired, stopped, stale, never existed)
    limit_reached = 11,     ///< Config::max_timers timers are alive
    shutting_down = 108,    ///< the runtime is shutting down or shut down
    would_deadlock = 35,    ///< shutdown() from one of the runtime's callbacks or from a release hook
    forked = 1001,          ///< the runtime was created in the parent of this fork() child
};
/// The error category of errc (name() "tickwheel"): one instance per
/// process (it lives in the library), so codes compare equal wherever they
/// were made, on either side of the shared library. Any thread.
TW_CXX_API const std::error_category& error_category() noexcept;
/// `e` as a std::error_code of error_category(); what makes errc convert to
/// std::error_code.
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }

}  // namespace tickwheel

/// Makes tickwheel::errc convert to std::error_code (and compare with one).
template <>
struct std::is_error_code_enum<tickwheel::errc> : std::true_type {};

namespace tickwheel {

namespace detail {
/// The detail the library recorded on this thread for its most recent
/// failure, if that failure's code is `ec` (then it is taken: a second call
/// returns ""); "" otherwise. What Error(ec) puts in what(). Any thread.
/// Since 1.5 (TICKWHEEL_CXX_1.5).
TW_CXX_API std::string take_error_detail(const std::error_code& ec);
}  // namespace detail

/// Thrown by the throwing overloads. Its vtable and type information are
/// defined in the library (the destructor is the key function), so it is
/// caught by type on either side of the shared library.
///
/// what() names the argument and the limit (since 1.5): e.g. "delay
/// 1000000000000000000000 ns is above kMaxDelay (1152921504606846976 ns):
/// invalid argument", "max_timers (100) timers are alive: pending timer
/// limit reached" -- the detail the failing call recorded on this thread,
/// then the code's message. code() is the errc, as before.
class TW_CXX_API Error : public std::system_error {
public:
    /// An Error carrying make_error_code(e) (and the detail the library's
    /// last failure on this thread recorded for e, if any).
    explicit Error(errc e) : Error(make_error_code(e)) {}
    /// An Error carrying `ec` (as a non-throwing overload reported it), with
    /// the detail the library recorded for that failure on this thread, if
    /// any (detail::take_error_detail()).
    explicit Error(std::error_code ec) : Error(ec, detail::take_error_detail(ec)) {}
    /// An Error carrying `ec` whose what() is "<detail>: <ec.message()>"
    /// (just the message for an empty detail). Since 1.5.
    Error(std::error_code ec, const std::string& detail)
        : std::system_error(detail.empty() ? std::system_error(ec) : std::system_error(ec, detail)) {}
    /// Copyable, as exceptions are.
    Error(const Error&) = default;
    /// Copyable, as exceptions are.
    Error& operator=(const Error&) = default;
    /// Defined in the library: the key function of Error's vtable.
    ~Error() override;
};

/// The longest delay (or deadline distance) accepted: 2^60 ns, about 36.5
/// years. Longer ones are errc::invalid_argument.
inline constexpr Duration kMaxDelay{std::int64_t{1} << 60};

/// The most grid deadlines a PeriodPolicy::burst timer owes (since 1.7;
/// the C API's TW_BURST_MAX_OWED): when a run finds more passed and not yet
/// run, the oldest beyond this many are skipped and counted in
/// TimerInfo::missed; the catch-up serves the latest ones.
inline constexpr std::uint64_t kBurstMaxOwed = 1000;

/// The clock a timer counts on (StartOptions::clock); the C API's
/// TW_CLOCK_*. Since 1.3. (Not named `Clock`: that is the runtime's
/// std::chrono clock type, steady_clock, since 1.0.)
enum class TimerClock : std::uint32_t {
    /// CLOCK_MONOTONIC (steady_clock; the default): stops while the machine
    /// is suspended, never jumps.
    monotonic = 0,
    /// CLOCK_BOOTTIME: as monotonic, but counts the time the machine was
    /// suspended: a 30 s keepalive fires 30 s of real time later, asleep or not.
    boottime = 1,
    /// CLOCK_REALTIME (the wall clock): follows clock changes -- set forward
    /// past a deadline, the timer fires then; set back, pending timers wait
    /// for the wall clock to reach their deadline again.
    realtime = 2,
};

/// Runtime configuration, given to Runtime's constructor; the defaults are
/// the C API's tw_config_init() ones.
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
    /// A manual clock (for tests): the runtime's three clocks stand still
    /// (starting at the machine's values) until advance() moves them, and
    /// advance() runs what falls due on its caller's thread; no driver
    /// thread, no worker runs a callback. Since 1.3 (TW_CONFIG_MANUAL_CLOCK).
    bool manual_clock = false;
    /// Padding; must stay 0. (Keeps the struct free of tail padding.)
    std::uint8_t reserved[7] = {};
    /// The runtime's name: the `runtime="<name>"` label of every series of
    /// metrics() (and name() returns it). Empty (default) = a name made up
    /// at construction, unique in the process: "tickwheel-1",
    /// "tickwheel-2", ... in creation order (C++ cannot tell "" from unset;
    /// the C API keeps an empty tw_config.name, since 1.7). Any bytes:
    /// label values are escaped, and bytes that are not valid UTF-8 are
    /// each replaced by U+FFFD in the metrics (since 1.7; name() and error
    /// messages keep them); copied. Two runtimes may be given the same name
    /// (their metrics then collide: don't). Since 1.5 (tw_config.name).
    std::string name;
    /// Free timer records (64 bytes each) every shard keeps resident when it
    /// gives memory back after a peak (since 1.7, tw_config.slot_reserve).
    /// A shard whose free records exceed what its live timers need by more
    /// than this gives the surplus back to the kernel (MADV_DONTNEED of the
    /// records' pages) once it has been quiet for about 200 ms -- from its
    /// own driver thread, never on a start or stop -- so RSS returns to
    /// near its pre-peak figure within a second or two of the peak's end.
    /// Memory comes back in whole pages (64 records) whose records are all
    /// free; a page holding a live timer, or a record a thread keeps for its
    /// next start, stays. 0 (default) = kDefaultSlotReserve (32767, one
    /// 2 MiB chunk per shard); kKeepAllSlots = never give memory back (as
    /// before 1.7). Records given back are made again, on a start that finds
    /// no free one, at the cost of the first touch of their pages.
    std::size_t slot_reserve = 0;
};
/// Config::slot_reserve's default (0): one 2 MiB chunk of records per shard.
inline constexpr std::size_t kDefaultSlotReserve = 32767;
/// Config::slot_reserve: never give timer records back to the kernel.
inline constexpr std::size_t kKeepAllSlots = static_cast<std::size_t>(-1);

/// A snapshot of counters. Counters are totals since creation.
struct Stats {
    std::vector<std::size_t> pending_per_shard;  ///< timers pending in each shard: in its wheel or waiting in a caller's cell
    std::vector<std::size_t> inbox_per_shard;    ///< requests queued to each shard (approx.)
    std::uint64_t live = 0;              ///< started and not yet released (callable not yet destroyed)
    /// timer records resident now, 64 bytes each: those ever allocated,
    /// less those given back to the kernel after a peak (since 1.7; before,
    /// the high-water mark)
    std::size_t slots = 0;
    /// timers started (start calls that succeeded)
    std::uint64_t started = 0;
    std::uint64_t fired = 0;             ///< callback runs
    std::uint64_t stopped = 0;           ///< stop() calls that returned true
    std::uint64_t reset = 0;             ///< reset() calls that returned true
    /// exceptions thrown by callbacks (see Config::on_callback_error)
    std::uint64_t callback_exceptions = 0;
    /// timers still pending when shutdown() cancelled them
    std::uint64_t cancelled_at_shutdown = 0;
    /// @name Lateness
    /// Lateness = callback start minus deadline (rounded up to the tick).
    /// Percentiles from a log-linear histogram (8 buckets per power of two, each reported at its midpoint: at most 6.25% relative error).
    /// @{

    Duration lateness_p50{0}, lateness_p99{0}, lateness_p999{0}, lateness_max{0};
    /// @var Stats::lateness_p50
    /// Median lateness (callback start minus deadline).
    /// @var Stats::lateness_p99
    /// 99th percentile of the lateness (callback start minus deadline).
    /// @var Stats::lateness_p999
    /// 99.9th percentile of the lateness (callback start minus deadline).
    /// @var Stats::lateness_max
    /// The largest lateness seen (callback start minus deadline).

    /// callback runs measured (the lateness histogram's sample count)
    std::uint64_t lateness_samples = 0;
    /// @}

    /// @name Lateness by stage (since 1.7)
    /// Where each run's lateness comes from, in two stages that add up to
    /// it: *driver* = deadline (rounded up to the tick) to the moment the
    /// timer's shard handed it over -- to the workers, or to its Queue --
    /// (a starved or sleeping shard driver: a busy CPU, a clock step);
    /// *wait* = handed over to the callback's start (every worker busy, the
    /// workers' backlog; for a Queue's timer, the wait for its owner to call
    /// run()). And the callbacks' duration, *run* (the callback alone, not
    /// its release hook). Every run counts once in each: their samples are
    /// lateness_samples (driver, wait) and run_duration_samples (run: the
    /// runs that returned). Histograms as the lateness's (at most 6.25%
    /// relative error). A manual runtime's driver stage is 0 (its advance
    /// steps the clocks to each deadline). See the operations guide
    /// (docs/site/guide/operations.md) for what each stage's growth means.
    /// @{

    Duration driver_lateness_p50{0}, driver_lateness_p99{0}, driver_lateness_p999{0}, driver_lateness_max{0};
    /// @var Stats::driver_lateness_p50
    /// Median of the driver stage (deadline to hand-over).
    /// @var Stats::driver_lateness_p99
    /// 99th percentile of the driver stage.
    /// @var Stats::driver_lateness_p999
    /// 99.9th percentile of the driver stage.
    /// @var Stats::driver_lateness_max
    /// The largest driver stage seen.
    Duration wait_lateness_p50{0}, wait_lateness_p99{0}, wait_lateness_p999{0}, wait_lateness_max{0};
    /// @var Stats::wait_lateness_p50
    /// Median of the wait stage (hand-over to the callback's start).
    /// @var Stats::wait_lateness_p99
    /// 99th percentile of the wait stage.
    /// @var Stats::wait_lateness_p999
    /// 99.9th percentile of the wait stage.
    /// @var Stats::wait_lateness_max
    /// The largest wait stage seen.
    Duration run_duration_p50{0}, run_duration_p99{0}, run_duration_p999{0}, run_duration_max{0};
    /// @var Stats::run_duration_p50
    /// Median callback duration.
    /// @var Stats::run_duration_p99
    /// 99th percentile of the callbacks' duration.
    /// @var Stats::run_duration_p999
    /// 99.9th percentile of the callbacks' duration.
    /// @var Stats::run_duration_max
    /// The longest callback seen.

    /// callbacks that returned (the run stage's sample count)
    std::uint64_t run_duration_samples = 0;
    /// @}

    /// @name Saturation (since 1.7)
    /// Gauges, read now (each a recent value, not one instant).
    /// @{

    /// callbacks running now on the runtime's workers (at most worker_count())
    std::uint64_t workers_busy = 0;
    /// due timers handed to the workers that no worker has taken yet
    std::uint64_t waiting_for_worker = 0;
    /// callbacks running now on any thread: workers, threads inside a
    /// Queue's run(), an advance (a callback running another's, nested,
    /// counts once)
    std::uint64_t callbacks_running = 0;
    /// how long the longest-running callback now has been running (0: none;
    /// not tracked for the threads beyond the first 64 that count at once)
    Duration oldest_run_age{0};
    /// @}

    /// @name Memory (since 1.7)
    /// @{

    /// bytes of the timer records and their side arrays resident now (an
    /// upper bound: the pages the runtime has not given back to the kernel).
    /// After a peak, free records beyond what live timers need (and
    /// Config::slot_reserve) are given back within a few hundred ms of the
    /// shard going quiet (see Config::slot_reserve).
    std::uint64_t resident_bytes = 0;
    /// @}
};

/// What a periodic timer does when a run overruns its period (or the timer
/// is otherwise late). Since 1.3; the C API's TW_PERIOD_*.
enum class PeriodPolicy : std::uint32_t {
    /// Fixed rate (the default, and the only policy before 1.3): runs stay on
    /// the grid first + k*period; a grid deadline that passes while a run is
    /// in progress (or before a due run started) is skipped and counted in
    /// TimerInfo::missed.
    skip = 0,
    /// Fixed delay: the next deadline is the end of this run plus the period
    /// (never a skip: TimerInfo::missed stays 0).
    delay = 1,
    /// Fixed rate with catch-up: grid deadlines that passed during a run are
    /// run afterwards, back to back (never overlapping), until caught up.
    /// What bounds a burst: it owes at most kBurstMaxOwed deadlines when a
    /// run looks (older ones are skipped, counted in TimerInfo::missed); on
    /// the workers it runs on one worker until caught up (a callback slower
    /// than its period never catches up and keeps that worker: use skip);
    /// on a Queue each catch-up run counts against run()'s `max`, and the
    /// runs past it stay owed (the timer stays due) for the next run()
    /// (since 1.7).
    burst = 2,
};

/// Options for Runtime::start(const StartOptions&, F&&).
struct StartOptions {
    /// Absolute deadline of the first run (steady_clock). Overrides `delay`
    /// when set (non-default).
    TimePoint deadline{};
    /// Delay of the first run from now, used when `deadline` is not set.
    Duration delay{0};
    /// 0 = one-shot; otherwise the period (runs at first + k*period with
    /// the default `policy`, skip). Must be >= 1 ns; rounded up to the
    /// resolution.
    Duration period{0};
    /// Shard to place the timer on (taken modulo the shard count); -1 = the
    /// calling thread's own shard: each thread is given one, round-robin over
    /// the shards, on its first start (locality without depending on which
    /// CPU it runs on; measured in bench/shard_choice.cpp).
    int shard = -1;
    /// A periodic timer's policy (ignored for a one-shot). A value outside
    /// PeriodPolicy is errc::invalid_argument. Since 1.3 (in 1.0-1.2 this
    /// was `reserved`, which had to be 0: skip).
    PeriodPolicy policy = PeriodPolicy::skip;
    /// The delivery queue whose run() runs the callback (and, after the last
    /// run, destroys the callable) on the thread that calls it; nullptr
    /// (default) = the runtime's workers. It must be a live (not closed)
    /// Queue of this runtime: another runtime's, or a closed one, is
    /// errc::invalid_argument -- also when the queue's close() begins while
    /// the start is in flight (since 1.5: the start then fails, its callable
    /// destroyed, or it returns a timer that close() waits for and cancels;
    /// it never runs in a queue created later). Since 1.2.
    Queue* queue = nullptr;
    /// How late the callback may run: it runs in [deadline, deadline + leeway
    /// + the usual lateness], never before the deadline. Timers whose windows
    /// overlap are filed in one slot of the wheel and share a wake-up (the
    /// deadline is rounded up to the coarsest aligned tick boundary inside
    /// the window). 0 (default) = exact to the tick. 0 .. kMaxDelay. Since 1.3.
    Duration leeway{0};
    /// The timer's group, for stop_group(); 0 (default) = none. Since 1.3.
    std::uint64_t group = 0;
    /// The clock `deadline` (its time_since_epoch(): ns on that clock, as
    /// now(clock) reads it) and `delay` count on; never early holds against
    /// it. A value outside TimerClock is errc::invalid_argument. Since 1.3.
    TimerClock clock = TimerClock::monotonic;
    /// Must be 0 (otherwise errc::invalid_argument); reserved.
    std::uint32_t reserved = 0;
};

/// Where a timer is in its life (TimerInfo::state). Since 1.3.
enum class TimerStatus : std::uint32_t {
    pending = 1,  ///< waiting for its deadline
    due = 2,      ///< its deadline has passed; the callback has not started yet
    running = 3,  ///< its callback is running now
};

/// What Runtime::query() tells about a live timer. Since 1.3.
struct TimerInfo {
    TimerStatus state = TimerStatus::pending;  ///< see TimerStatus
    int shard = 0;                             ///< the shard it lives on (< shard_count())
    /// The next deadline (steady_clock), rounded up to the resolution (on
    /// the timer's clock, exact, for a boot-time or wall-clock timer),
    /// without the leeway; TimePoint{} (0) if none is set: a one-shot whose
    /// callback is running (unless it re-armed itself), a delay-policy timer
    /// until its run ends. For a due or running fixed-rate timer: the next
    /// grid deadline it is filed for (after the one being served; while a
    /// burst timer runs the deadlines it owes, after all of them). On the
    /// timer's clock (StartOptions::clock): ns since that clock's epoch.
    TimePoint deadline{};
    Duration period{0};       ///< 0 for a one-shot; rounded up to the resolution
    Duration leeway{0};       ///< as started
    std::uint64_t group = 0;  ///< as started; 0 = none
    /// Runs begun so far, the one in progress included.
    std::uint64_t runs = 0;
    /// Grid deadlines skipped so far (PeriodPolicy::skip; burst: the owed
    /// ones beyond kBurstMaxOwed, since 1.7; 0 for delay): runs + missed -
    /// 1 is the index, from 0, of the grid deadline the current (or last)
    /// run serves.
    std::uint64_t missed = 0;
    /// The timer's clock: the one `deadline` is on.
    TimerClock clock = TimerClock::monotonic;
    /// Padding (0).
    std::uint32_t reserved = 0;
};

/// The timer runtime: shards (a timing wheel and a driver thread each) and
/// a oneTBB arena whose workers run the callbacks. Every member function may
/// be called from any thread; see the contract at the top of runtime.hpp.
class TW_CXX_API Runtime {
public:
    /// Starts the shard threads and the TBB arena. Throws Error
    /// (invalid_argument) for a bad Config, std::system_error if a thread
    /// cannot be started.
    explicit Runtime(const Config& config = {}) : Runtime(&config, sizeof(Config)) {}

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
    /// steady_clock reading taken during the call, or an upper bound of it
    /// at most ~3 us above where the kernel clocks on the TSC: never below
    /// it, so never early; TICKWHEEL_TSC=0 turns it off), rounded up to the
    /// tick. `f` is any
    /// move-constructible callable taking `tickwheel::Timer` or nothing;
    /// captures up to 24 bytes are stored without a heap allocation.
    /// Returns the timer's handle. Throws Error: invalid_argument (negative
    /// delay or delay > kMaxDelay), limit_reached, shutting_down. Cost: O(1),
    /// never waits, and holds nothing any other thread waits for: one clock
    /// read; then the timer waits in this thread's cell of the shard (its
    /// newest timers, in a record the thread's last stop freed) until it is
    /// due or this thread stops it -- a start+stop pair touches no line of
    /// another core; otherwise one slot allocation and one queue push to
    /// the shard.
    template <class F>
    Timer start(Duration delay, F&& f) {
        StartOptions o;
        o.delay = delay;
        return start(o, std::forward<F>(f));
    }
    /// As start(), at an absolute steady_clock deadline (a past one fires
    /// at once). Reads no clock (a deadline up to kMaxDelay after the
    /// clock's zero -- every one in practice -- needs none): a caller
    /// starting many timers from one "now" pays one reading for all.
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
            throw Error(make_error_code(errc::invalid_argument),
                        "period " + std::to_string(period.count()) + " ns: a periodic timer needs a period >= 1 ns");
        }
        StartOptions o;
        o.delay = period;
        o.period = period;
        return start(o, std::forward<F>(f));
    }
    /// As start(), with every option of StartOptions: an absolute deadline or
    /// a delay, a period, a shard. Throws Error with the code the
    /// non-throwing overload below reports.
    template <class F>
    Timer start(const StartOptions& opts, F&& f) {
        std::error_code ec;
        Timer t = start(opts, detail::Callback(std::forward<F>(f)), ec);
        if (ec) throw Error(ec);
        return t;
    }
    /// The non-throwing start (`cb`: any callable start() takes, converted
    /// implicitly): on failure returns an empty Timer, sets `ec`,
    /// and destroys `cb` (running its release hook) before returning, outside
    /// any internal lock or guard (the hook may block or call into the
    /// runtime; shutdown from it reports would_deadlock). Errors:
    /// invalid_argument, shutting_down, limit_reached, no_memory (no slot,
    /// or no memory to queue the request), forked.
    Timer start(const StartOptions& opts, detail::Callback&& cb, std::error_code& ec) noexcept {
        return start_sized(&opts, sizeof(StartOptions), std::move(cb), ec);
    }

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
    /// stop(t.id()).
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
    /// stop_sync(t.id()).
    bool stop_sync(Timer t) noexcept { return stop_sync(t.id()); }

    // ---- reset ---------------------------------------------------------
    /// Re-arms a pending timer to fire `delay` from now (a periodic timer:
    /// next run then, then every period; "now" as in start(delay, f): never
    /// before the call). Returns true on success, false if
    /// the timer is not pending (already fired -- unless called from its own
    /// running callback, which re-arms a one-shot timer --, stopped, stale).
    /// A stale id changes nothing: no timer's state or deadline (also not
    /// the one now in its slot). A boot-time or wall-clock timer's new
    /// deadline on its clock and its place in the wheel change together
    /// (query(), the end of a run, a clock step never see one without the
    /// other), and its clock is read inside the call: a clock step during
    /// the call is followed.
    /// Cost: a later deadline is one CAS on the caller's side (the shard
    /// re-files the timer lazily when its old slot comes due); an earlier one
    /// adds a queue push. Throws Error(invalid_argument) for delay < 0 or >
    /// kMaxDelay; the noexcept overload reports that, and shutting_down, in
    /// `ec` (returning false).
    bool reset(std::uint64_t id, Duration delay);
    /// reset(t.id(), delay).
    bool reset(Timer t, Duration delay) { return reset(t.id(), delay); }
    /// As reset(id, delay), without exceptions: `ec` is cleared, or set
    /// (returning false) to invalid_argument, shutting_down or forked.
    bool reset(std::uint64_t id, Duration delay, std::error_code& ec) noexcept;

    /// As reset(), to an absolute steady_clock deadline (a past one fires at
    /// once, rounded up to the tick). Throws Error(invalid_argument) for a
    /// deadline more than kMaxDelay away. Since 1.3.
    bool reset_at(std::uint64_t id, TimePoint deadline) {
        std::error_code ec;
        const bool ok = reset_at(id, deadline, ec);
        if (ec && ec != make_error_code(errc::shutting_down)) throw Error(ec);
        return ok;
    }
    /// As reset_at(), without exceptions (see reset(id, delay, ec)). Since 1.3.
    bool reset_at(std::uint64_t id, TimePoint deadline, std::error_code& ec) noexcept;

    // ---- batches (since 1.4) ---------------------------------------------
    /// Batch calls act as the single call on every element, in order, with
    /// the same guarantees (never early, stale ids answered not_found and
    /// never acted on, each release hook exactly once), and report what
    /// the single call would have: `results`, if not empty, must have one
    /// std::error_code per element and receives each element's outcome
    /// ({} for success). A failing element never stops the batch. Any
    /// thread, also from callbacks. What they save, per call instead of
    /// per timer: every record of up to 64 elements is prefetched before
    /// the first locked instruction, so their cache misses overlap; one
    /// inbox message block and at most one wake-up per shard (per 256
    /// messages); one clock reading (start, reset); one update of each
    /// counter. Measured in README ("Batches").

    /// Stops every timer of `ids` as stop() would, in order, and returns how
    /// many stop() calls would have returned true. results[i]: {} or
    /// errc::not_found. Each release hook runs as stop()'s does (inside this
    /// call, before the next element is stopped, or after a run in
    /// progress); a stop_sync() of that element waiting for its hook
    /// returns as soon as the hook did, before the next element's hook runs
    /// (which may wait for it). Never blocks. `ec`: invalid_argument (`results` neither
    /// empty nor ids.size() long), forked (nothing done, 0 returned). Cost:
    /// one CAS per timer, one message block per shard.
    std::size_t stop(std::span<const std::uint64_t> ids, std::span<std::error_code> results,
                     std::error_code& ec) noexcept {
        if (!results.empty() && results.size() != ids.size()) {
            ec = make_error_code(errc::invalid_argument);
            return 0;
        }
        return stop_n(ids.data(), ids.size(), results.empty() ? nullptr : results.data(), ec);
    }
    /// As stop(ids, results, ec); throws Error for invalid_argument and forked.
    std::size_t stop(std::span<const std::uint64_t> ids, std::span<std::error_code> results = {}) {
        std::error_code ec;
        const std::size_t n = stop(ids, results, ec);
        if (ec) throw Error(ec);
        return n;
    }

    /// Re-arms every timer of `ids` to fire `delay` from now, as reset()
    /// would, in order, and returns how many were re-armed. "Now" is one
    /// steady_clock reading taken when the call begins, for all of them
    /// (never early: it is taken after the call began); a boot-time or
    /// wall-clock timer's is a reading of its clock taken for it, as
    /// reset() does (1.4 read it once per call). results[i]: {},
    /// errc::not_found (not pending, stale, 0) or errc::shutting_down.
    /// `ec`: invalid_argument (delay < 0 or > kMaxDelay: nothing re-armed;
    /// `results` of the wrong size), forked. Cost: a later deadline is one
    /// CAS per timer on this thread; earlier ones add one message block per
    /// shard.
    std::size_t reset(std::span<const std::uint64_t> ids, Duration delay, std::span<std::error_code> results,
                      std::error_code& ec) noexcept {
        if (!results.empty() && results.size() != ids.size()) {
            ec = make_error_code(errc::invalid_argument);
            return 0;
        }
        return reset_n(ids.data(), ids.size(), delay, results.empty() ? nullptr : results.data(), ec);
    }
    /// As reset(ids, delay, results, ec); throws Error for invalid_argument
    /// and forked (not for shutting_down, which results[] reports).
    std::size_t reset(std::span<const std::uint64_t> ids, Duration delay, std::span<std::error_code> results = {}) {
        std::error_code ec;
        const std::size_t n = reset(ids, delay, results, ec);
        if (ec) throw Error(ec);
        return n;
    }

    /// Starts one timer per element of `opts`, as start(opts[i], cbs[i], ec)
    /// would, in order, and returns how many started: out[i] is the Timer,
    /// or an empty one; results[i] (if not empty) {} or the error start()
    /// would report (invalid_argument, shutting_down, limit_reached,
    /// no_memory). A started element's callable is moved out of cbs[i];
    /// a failed element's is destroyed (its release hook) before this
    /// returns, after every element was tried, in order, outside any
    /// internal guard. Delays count from one steady_clock reading taken
    /// when the call begins (never early); one registration in the shutdown
    /// guard; records are popped from the shard's free stack several at a
    /// time. `ec` (0 returned, nothing started, `cbs` left untouched):
    /// invalid_argument (cbs, out or a non-empty results not opts.size()
    /// long), forked.
    std::size_t start(std::span<const StartOptions> opts, std::span<detail::Callback> cbs, std::span<Timer> out,
                      std::span<std::error_code> results, std::error_code& ec) noexcept {
        if (cbs.size() != opts.size() || out.size() != opts.size() ||
            (!results.empty() && results.size() != opts.size())) {
            ec = make_error_code(errc::invalid_argument);
            return 0;
        }
        return start_n_sized(opts.data(), sizeof(StartOptions), opts.size(), cbs.data(), out.data(),
                             results.empty() ? nullptr : results.data(), ec);
    }
    /// Starts one timer per element of `opts` whose callable is
    /// `make(i)` (i = 0 .. opts.size() - 1: any callable start() takes), as
    /// the start() above; returns the Timers (an empty one where element i
    /// failed, its callable destroyed; `results`, if not empty, tells why).
    /// Throws Error(invalid_argument) for `results` of the wrong size,
    /// Error(forked) (the callables made are destroyed), std::bad_alloc, and
    /// what `make` throws (the callables made so far are destroyed, nothing
    /// started).
    template <class Make>
    std::vector<Timer> start(std::span<const StartOptions> opts, Make&& make, std::span<std::error_code> results = {}) {
        std::vector<Timer> out(opts.size());
        std::vector<detail::Callback> cbs;
        cbs.reserve(opts.size());
        for (std::size_t i = 0; i < opts.size(); ++i) cbs.emplace_back(make(i));
        std::error_code ec;
        start(opts, cbs, out, results, ec);
        if (ec) throw Error(ec);
        return out;
    }

    // ---- a manual clock ------------------------------------------------
    /// A manual runtime (Config::manual_clock): moves its three clocks
    /// forward by `d` and runs, on this thread, every callback that falls
    /// due, in deadline order (deadlines rounded up to the resolution; ties
    /// in start order), stepping the clocks to each deadline as it goes --
    /// including timers that callbacks start, stop or re-arm during the
    /// advance (a deadline inside the window, even one already past, runs
    /// in this advance). A periodic timer crossed k times: skip runs once
    /// (missed += k - 1, judged against the end of the window), burst k
    /// times, delay as its runs fall. Queue-bound timers are delivered to
    /// their queue instead (run by Queue::run()). The clocks stop where any
    /// reading plus 2 x kMaxDelay still fits in an int64 (the wall clock at
    /// 2^63 - 2^61 ns after 1970, in 2189): an advance past it runs what is
    /// due up to there and leaves them there (since 1.7; before, they
    /// saturated at INT64_MAX, and a timer started then fired at once). Returns when those
    /// callbacks have returned, with how many it ran. One advance at a time
    /// (concurrent callers take turns); any thread may start/stop/reset
    /// meanwhile. Throws Error: invalid_argument (not a manual runtime, d < 0
    /// or > kMaxDelay), would_deadlock (from one of this runtime's
    /// callbacks), shutting_down, forked. Since 1.3.
    std::size_t advance(Duration d) {
        std::error_code ec;
        const std::size_t n = advance(d, ec);
        if (ec) throw Error(ec);
        return n;
    }
    /// As advance(), without exceptions (0 and `ec` set on error). Since 1.3.
    std::size_t advance(Duration d, std::error_code& ec) noexcept;
    /// Clock `c` now, as ns since that clock's epoch: the machine's clock,
    /// or a manual runtime's virtual one. Zero for a value outside
    /// TimerClock. Any thread. Since 1.3. (clock_now() gives it as a
    /// TimePoint, the form deadlines take.)
    Duration now(TimerClock c) const noexcept;
    /// THE "now" to compute deadlines from: this runtime's clock `c` (by
    /// default the monotonic one, the clock of StartOptions::deadline and
    /// start_at()) as a TimePoint -- the machine's clock for a real
    /// runtime, the virtual one for a manual runtime (Config::manual_clock).
    /// So
    ///
    ///     rt.start_at(rt.clock_now() + 30s, f);
    ///
    /// fires 30 s from now on either kind of runtime: on a manual one, at
    /// the advance() that crosses 30 s of virtual time. (The static
    /// Runtime::now() reads the machine's clock, which a manual runtime's
    /// virtual clock does not follow: a deadline computed from it is wrong
    /// there.) For a timer on another clock (StartOptions::clock), pass that
    /// clock. Any thread; a vDSO read (or an atomic load on a manual
    /// runtime). Since 1.5 (inline: no new symbol).
    TimePoint clock_now(TimerClock c = TimerClock::monotonic) const noexcept { return TimePoint(now(c)); }
    /// True for a runtime created with Config::manual_clock. Since 1.3.
    bool is_manual_clock() const noexcept;

    // ---- groups ----------------------------------------------------------
    /// Stops every live timer started with StartOptions::group == `group`,
    /// as stop() (sync: stop_sync()) called on each, and returns how many it
    /// stopped (how many of those calls would have returned true). With
    /// `sync` it also waits, as stop_sync() does, for a running callback of
    /// the group and its release hook (a running periodic timer counts as
    /// stopped; a running one-shot, already on its last run, does not; if
    /// its callback re-arms it, the re-armed timer stays in its group, for a
    /// later call).
    /// A timer whose start() returned before this call began is stopped; one
    /// started concurrently is either stopped or left running for a later
    /// call, never lost. Two group stops of one group at once each return
    /// only once every timer they must stop is stopped (the later also stops
    /// what the earlier took and has not reached; each timer counted once);
    /// neither waits for the other. Cost: O(shards + the group's timers) -- per-shard
    /// indexes, one short lock per shard; never a scan of all timers.
    /// Throws Error(invalid_argument) for group 0, Error(forked) in a fork()
    /// child. Since 1.3.
    std::size_t stop_group(std::uint64_t group, bool sync = false) {
        std::error_code ec;
        const std::size_t n = stop_group(group, sync, ec);
        if (ec) throw Error(ec);
        return n;
    }
    /// As stop_group(), without exceptions: `ec` is cleared, or set to
    /// invalid_argument or forked (returning 0). Since 1.3.
    std::size_t stop_group(std::uint64_t group, bool sync, std::error_code& ec) noexcept;

    // ---- query -----------------------------------------------------------
    /// A live timer's state, next deadline, period, leeway, group and run
    /// counters; std::nullopt for a stale, 0 or released id (and in a fork()
    /// child). From inside the timer's own callback it reports running, with
    /// runs and missed current (the skips before this run counted), so a
    /// callback knows what it missed. The state and the deadline are of one
    /// moment: a reset during the call is wholly in the answer or not at
    /// all (since 1.7). Never blocks; lock-free: a few atomic loads and a
    /// clock read (read again a bounded number of times while a reset moves
    /// them). Any thread. Since 1.3.
    std::optional<TimerInfo> query(std::uint64_t id) const noexcept {
        TimerInfo info;
        if (!query_sized(id, &info, sizeof(TimerInfo))) return std::nullopt;
        return info;
    }
    /// query(t.id()).
    std::optional<TimerInfo> query(Timer t) const noexcept { return query(t.id()); }

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
    /// Order (since 1.5): starts and Queue constructions in flight end
    /// (later ones fail with shutting_down); every Queue is closed, so that
    /// threads waiting in Queue::run() -- a callback on a worker, of another
    /// queue or of an advance() among them -- return shutting_down before
    /// anything is waited for; an advance() in progress stops before its
    /// next callback (later ones fail with shutting_down); then workers and
    /// queue callbacks in progress are waited for; then the sweep.
    void shutdown();
    /// As shutdown(), without exceptions: `ec` is cleared, or set to
    /// would_deadlock or forked (nothing done).
    void shutdown(std::error_code& ec) noexcept;
    /// True once shutdown() has finished (not while it is in progress). Any thread.
    bool is_shut_down() const noexcept;

    // ---- observation ---------------------------------------------------
    /// A snapshot of the counters (see Stats); works after shutdown() too
    /// (the final counters). Any thread; O(shards). Allocates the per-shard
    /// vectors (may throw std::bad_alloc); throws Error(forked) in a fork()
    /// child.
    Stats stats() const {
        Stats st;
        stats_sized(&st, sizeof(Stats));
        return st;
    }
    /// The runtime's counters, gauges and callback-lateness histogram in the
    /// Prometheus text exposition format 0.0.4, for a /metrics endpoint:
    /// metric names prefixed `tickwheel_` (counters end in `_total`,
    /// durations are in seconds), one `# HELP` and one `# TYPE` line before
    /// each family's samples, per-shard gauges labelled `{shard="i"}`, no
    /// timestamps, every line ending in '\n'. The histogram
    /// `tickwheel_callback_lateness_seconds` has fixed buckets from 5 us to
    /// 10 s (exact counts, not interpolated); its `_count` is
    /// Stats::lateness_samples and its `_sum` the total lateness.
    ///
    /// Since 1.5: every series carries the label `runtime="<name()>"`
    /// (first; the value escaped as the format says: backslash, double
    /// quote and newline), so the series of several runtimes in one process
    /// never collide; each live delivery queue's statistics are exported
    /// (tickwheel_queue_*, labelled `queue="<n>"`, n the queue's slot: unique
    /// among the runtime's live queues); and `tickwheel_build_info{runtime=
    /// "...",version="1.5.0"} 1`. Two runtimes' texts concatenated form one
    /// exposition (each text repeats the `# HELP`/`# TYPE` lines of its
    /// families: Prometheus and prometheus_client's parser take the
    /// repetition, with the same help and type; the series stay distinct).
    /// For one text where each family appears once, use
    /// metrics(std::span<const Runtime* const>).
    ///
    /// Since 1.7 (issue 34): the histogram family
    /// `tickwheel_callback_stage_seconds{stage="driver"|"wait"|"run"}` (the
    /// lateness's two stages and the callbacks' duration, as Stats has
    /// them), and `tickwheel_queue_callback_stage_seconds{queue,stage}` per
    /// live delivery queue; the gauges `tickwheel_workers_busy`,
    /// `tickwheel_waiting_for_worker`, `tickwheel_callbacks_running`,
    /// `tickwheel_oldest_callback_age_seconds` and
    /// `tickwheel_timer_resident_bytes` (`tickwheel_timer_slots` counts the
    /// records resident: those given back after a peak no longer count). A
    /// name that is not valid UTF-8 has each offending byte replaced by
    /// U+FFFD in the label (the format is UTF-8).
    ///
    /// Any thread, concurrently, also from inside a callback or release hook,
    /// and after shutdown() (the final values). Reads atomics: it takes no
    /// lock of the runtime (only oneTBB's brief internal one, for the worker
    /// count) and never blocks or delays a shard or a worker.
    /// Each value is a recent one (not one linearizable snapshot); read at
    /// quiescence they equal stats(). Cost: O(shards + queues + 65 stripes x
    /// (7 counters + 4 x 21 buckets)), about 12 KB of text plus 120 bytes per
    /// shard and 8 KB per live delivery queue (read under that queue's own
    /// brief lock), allocated.
    /// Throws std::bad_alloc, and Error(forked) in a fork() child.
    std::string metrics() const;
    /// The metrics of several runtimes as ONE exposition: each family's
    /// `# HELP` and `# TYPE` lines once, then the samples of every runtime
    /// (in the order given, each labelled with its own `runtime`), as
    /// metrics() writes them for one -- the text for a /metrics endpoint of
    /// a process with a library's runtime and the application's. Give each
    /// runtime once, with distinct names (or else their series collide).
    /// Any thread, as metrics(). Throws Error(invalid_argument) for a null
    /// pointer, Error(forked) if one of them was created before a fork()
    /// (in the child), std::bad_alloc. Since 1.5 (TICKWHEEL_CXX_1.5).
    static std::string metrics(std::span<const Runtime* const> runtimes);
    /// The number of shards (Config::shards, or the online CPUs for 0). Any thread.
    unsigned shard_count() const noexcept;
    /// The callbacks that can run at once: Config::workers, whatever other
    /// runtimes exist, or fewer while the application's own
    /// tbb::global_control(max_allowed_parallelism) is lower (that limit
    /// counts the application's thread: limit - 1, at least 1, shared by
    /// all runtimes). Read at each call. On a runtime's own threads (a fork
    /// child, see "oneTBB" above): Config::workers, or fewer once the system
    /// refused a thread.
    unsigned worker_count() const noexcept;
    /// The tick (Config::resolution): deadlines are rounded up to it. Any thread.
    Duration resolution() const noexcept;
    /// The MACHINE's CLOCK_MONOTONIC: steady_clock::now(), whatever the
    /// runtime. Not the runtime's clock: on a manual runtime
    /// (Config::manual_clock) `start_at(Runtime::now() + 30s, f)` fires at
    /// the next advance(), 30 s early in virtual time. Compute deadlines from
    /// rt.clock_now() (the runtime's clock, real or manual) instead.
    static TimePoint now() noexcept { return Clock::now(); }
    /// The runtime's name (Config::name, or the one made up for it: see
    /// there): the value of the `runtime` label of its metrics. Any
    /// thread. Since 1.5 (TICKWHEEL_CXX_1.5).
    const std::string& name() const noexcept;
    /// Counts one exception that a callback or release hook raised where the
    /// runtime could not see it: a language binding's own catch (a Python
    /// exception, a JavaScript throw, a Rust panic), or an application's
    /// wrapper that swallows its own errors. Adds 1 to
    /// Stats::callback_exceptions and `tickwheel_callback_exceptions_total`,
    /// exactly as a C++ exception escaping a callback does (the runtime
    /// counts those itself: do not count them again). Does not call
    /// Config::on_callback_error. Any thread, also from inside a callback
    /// or a release hook, concurrently, and after shutdown() (the final
    /// stats then include it). Lock-free, O(1): one relaxed add on this
    /// thread's stripe of the counters. In a fork() child of the process
    /// that created the runtime it does nothing. Since 1.6
    /// (TICKWHEEL_CXX_1.6).
    void count_callback_exception() const noexcept;

    /// True in a child process created by fork() after this runtime was
    /// created (see "Fork" above). Any thread.
    bool is_forked() const noexcept;

private:
    // The exported entry points behind the inline constructor, start() and
    // stats(): they take the caller's sizeof of the struct (see "LINKING AND
    // THE C++ ABI" above). Sizes outside what the library accepts are
    // errc::invalid_argument.
    Runtime(const Config* config, std::size_t config_size);
    Timer start_sized(const StartOptions* opts, std::size_t opts_size, detail::Callback&& cb,
                      std::error_code& ec) noexcept;
    void stats_sized(Stats* out, std::size_t out_size) const;
    bool query_sized(std::uint64_t id, TimerInfo* out, std::size_t out_size) const noexcept;
    // Behind the batch calls (since 1.4): arrays of n elements; `results`
    // null or n long; `opts` n StartOptions of `opts_size` bytes each.
    std::size_t stop_n(const std::uint64_t* ids, std::size_t n, std::error_code* results,
                       std::error_code& ec) noexcept;
    std::size_t reset_n(const std::uint64_t* ids, std::size_t n, Duration delay, std::error_code* results,
                        std::error_code& ec) noexcept;
    std::size_t start_n_sized(const StartOptions* opts, std::size_t opts_size, std::size_t n, detail::Callback* cbs,
                              Timer* out, std::error_code* results, std::error_code& ec) noexcept;

    friend class Queue;
    std::unique_ptr<rt::RuntimeCore> core_;
};

/// A snapshot of a Queue's counters (Queue::stats()).
struct QueueStats {
    /// Timers due and not yet run now (a burst timer owing several catch-up
    /// runs counts once). While the queue is open its fd is readable iff
    /// due > 0; once it is closed (close(), the runtime's shutdown) due is 0
    /// and the fd stays readable for good (see Queue::fd()).
    std::uint64_t due = 0;
    std::uint64_t delivered = 0;  ///< due timers handed to the queue (one per due deadline; a stop or reset may then take one back)
    std::uint64_t ran = 0;        ///< callbacks run by run()
    std::uint64_t runners = 0;    ///< threads inside run() now
    /// @name Lateness
    /// Deadline (rounded up to the tick) to the fd becoming readable
    /// (`signal_*`: the shard's delivery) and to the callback's start
    /// (`run_*`: includes the time the owner took to call run()). Log-linear
    /// histograms as in Stats (at most 6.25% relative error).
    /// @{

    Duration signal_p50{0};   ///< deadline to readable: median
    Duration signal_p99{0};   ///< deadline to readable: 99th percentile
    Duration signal_p999{0};  ///< deadline to readable: 99.9th percentile
    Duration signal_max{0};   ///< deadline to readable: the largest
    std::uint64_t signal_samples = 0;  ///< deliveries measured
    Duration run_p50{0};      ///< deadline to callback start: median
    Duration run_p99{0};      ///< deadline to callback start: 99th percentile
    Duration run_p999{0};     ///< deadline to callback start: 99.9th percentile
    Duration run_max{0};      ///< deadline to callback start: the largest
    std::uint64_t run_samples = 0;  ///< runs measured
    /// @}
};

/// A delivery queue: callbacks of the timers started with
/// StartOptions::queue = &queue run on the thread that calls run() -- an
/// epoll/poll loop (fd()), an asyncio or libuv loop, any thread of the
/// owner's -- and never on a worker. The timer rules are unchanged: never
/// early, runs of one timer never overlap, stop() is exact (a due callback
/// not yet run is stopped: it never runs, its callable is destroyed inside
/// the stop), stop_sync() from another thread waits for a run in progress on
/// the queue's thread, reset() of a due one re-arms it.
///
/// Lifetime: RAII. The destructor cancels every timer still bound to the
/// queue (their callables are destroyed on the destroying thread) and frees
/// the queue; no thread may start timers on it or call run() once it has
/// begun (threads already waiting in run() return). A Queue may outlive its
/// Runtime (after the Runtime's destruction run() reports shutting_down);
/// the Runtime's shutdown() cancels the queue's timers like all others.
/// Not copyable or movable (timers hold its address). Several queues per
/// runtime (up to 8191 at once).
class TW_CXX_API Queue {
public:
    /// A queue of `rt`. Throws Error(shutting_down), Error(forked),
    /// Error(no_memory) (8191 queues alive, or no eventfd: EMFILE/ENFILE),
    /// std::bad_alloc.
    explicit Queue(Runtime& rt);
    /// close(); a failure (would_deadlock: from inside one of this queue's
    /// own callbacks) prints a message and calls std::terminate.
    ~Queue();
    Queue(const Queue&) = delete;
    Queue& operator=(const Queue&) = delete;

    /// Waits without limit (run()'s timeout).
    static constexpr Duration kForever{-1};

    /// A Linux eventfd that, while the queue is open, polls readable
    /// (POLLIN/EPOLLIN, level-triggered) iff at least one callback of the
    /// queue is due and not yet run (QueueStats::due > 0; a burst timer
    /// whose catch-up a run() left owed, past its `max`, keeps it
    /// readable); each batch of newly due timers is a new edge for EPOLLET
    /// users. It stays readable for good once the runtime is shut down
    /// (run() then reports shutting_down), and after close() -- while
    /// QueueStats::due is 0. Owned by the queue: never close
    /// it; it is closed by ~Queue. Any thread; O(1).
    int fd() const noexcept;

    /// Runs up to `max` due callbacks on this thread, in deadline order
    /// (ties: the order they became due), and returns how many ran. `max`
    /// bounds the callbacks, whatever the timers: each run of a burst
    /// timer's catch-up counts as one, and those past `max` stay owed (the
    /// timer stays due, the fd readable) for the next calls, in their
    /// deadline order (since 1.7). Each callback gives one lateness sample
    /// (QueueStats::run_*, Stats::lateness_*), from the deadline it serves.
    /// With none due it waits up to `timeout` (0: not at all; > 0: that
    /// long, up to Duration::max() -- one that reaches past the steady
    /// clock's range, ~292 years from boot, waits as kForever does; since
    /// 1.6: before, a timeout above about Duration::max() - now overflowed
    /// and returned 0 at once; kForever or any negative value: until one is
    /// due -- also one started later by another thread -- or the runtime
    /// shuts down); once one is due it runs those due (up to `max`) and
    /// returns without waiting for more. Several
    /// threads may call it at once (callbacks then run on all of them, runs
    /// of one timer still never overlap). Throws Error: invalid_argument (max
    /// 0, queue closed), would_deadlock (from inside one of this queue's own
    /// callbacks, at any depth), shutting_down (the runtime is shut down and
    /// nothing ran), forked.
    std::size_t run(std::size_t max, Duration timeout = Duration::zero());
    /// As run(), without exceptions: `ec` is cleared or set, returning 0.
    std::size_t run(std::size_t max, Duration timeout, std::error_code& ec) noexcept;

    /// Destroys the queue now: cancels every timer still bound to it (as
    /// stop() would; each counts in Stats::stopped; the callables are
    /// destroyed on this thread), waits for callbacks in progress on other
    /// threads and wakes the threads waiting in run(). Afterwards fd() stays
    /// readable, run() reports invalid_argument and starting a timer on it
    /// too; stats() keeps the final values. Idempotent. `ec`:
    /// would_deadlock from inside one of this queue's callbacks (nothing
    /// done). Cost: O(timer slots of the runtime).
    void close(std::error_code& ec) noexcept;

    /// The queue's counters (see QueueStats). Any thread, also after close()
    /// (the final values; `due` 0).
    QueueStats stats() const {
        QueueStats st;
        stats_sized(&st, sizeof(QueueStats));
        return st;
    }
    /// The runtime the queue belongs to (it may have been destroyed since).
    Runtime& runtime() const noexcept { return *rt_; }

private:
    friend class Runtime;
    friend struct rt::RuntimeCore;
    void stats_sized(QueueStats* out, std::size_t out_size) const noexcept;
    // Frozen within 1.x (programs hold Queues): two pointers.
    Runtime* rt_;
    rt::DeliveryQueue* impl_;  // holds a reference until ~Queue, also after close()
};

inline bool Timer::stop() noexcept { return rt_ != nullptr && rt_->stop(id_); }
inline bool Timer::stop_sync() { return rt_ != nullptr && rt_->stop_sync(id_); }
inline bool Timer::reset(Duration delay) { return rt_ != nullptr && rt_->reset(id_, delay); }
inline bool Timer::reset_at(TimePoint deadline) { return rt_ != nullptr && rt_->reset_at(id_, deadline); }
inline std::optional<TimerInfo> Timer::query() const noexcept {
    return rt_ != nullptr ? rt_->query(id_) : std::nullopt;
}

}  // namespace tickwheel

#endif  // C++20 (the check after #pragma once)
