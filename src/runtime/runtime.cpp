// SPDX-License-Identifier: MIT OR Apache-2.0
// A Runtime's life and what it shows: the errors (error_category, Error's
// key function), the 1.x C++ ABI (the caller's sizeof of Config and Stats;
// the layout asserts), RuntimeCore's construction and destruction, Runtime's
// constructor and destructor, shutdown(), query() and stats().
//
// Threads: any thread that holds the Runtime. shutdown() is refused
// (would_deadlock) inside one of its callbacks or a release hook: it waits
// for every run and hook. ~Runtime is shutdown() (then terminate() on
// would_deadlock). In a fork() child everything here answers `forked` or
// frees memory only (fork.hpp).
// Rules relied on: shutdown's handshake with the starts in flight
// (StartGuard and RuntimeCore::wait_for_starts, timer_ops.hpp); its sweep
// ends a pending timer by the same CAS as stop() (timer_state.hpp: a
// concurrent stop wins or loses it whole); query() reads a record's fields
// as a seqlock ("the query's seqlock" in timer_state.hpp's owner table).
// (The C++ API's rooms, one idea each, are listed in runtime_core.hpp.)
#include "tickwheel/runtime.hpp"

#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <mutex>
#include <string>
#include <type_traits>

#include "runtime/abi_sizes.hpp"
#include "runtime/error_detail.hpp"
#include "runtime/hazard.hpp"
#include "runtime/runtime_core.hpp"
#include "runtime/timer_ops.hpp"
#include "runtime/timer_state.hpp"

namespace tickwheel {

// ---- errors ----------------------------------------------------------------
namespace {
class Category final : public std::error_category {
public:
    const char* name() const noexcept override { return "tickwheel"; }
    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
            case errc::invalid_argument: return "invalid argument";
            case errc::no_memory: return "out of memory";
            case errc::not_found: return "no such pending timer";
            case errc::limit_reached: return "pending timer limit reached";
            case errc::shutting_down: return "runtime is shutting down";
            case errc::would_deadlock: return "operation would deadlock";
            case errc::forked: return "runtime was created in the parent of this fork() child";
        }
        return "unknown tickwheel error";
    }
};
}  // namespace

const std::error_category& error_category() noexcept {
    static const Category c;
    return c;
}

Error::~Error() = default;  // the key function: Error's vtable and typeinfo live here

// ---- the 1.x C++ ABI (see runtime.hpp, "LINKING AND THE C++ ABI") -----------
// The exported functions take the caller's sizeof of Config, StartOptions
// and Stats. A caller built against an older 1.x header passes a smaller
// size: only the fields within it are read/written, the others take their
// defaults. Growing a struct: append the field, add it to the field list of
// its read/write function below, and keep the asserts true (no tail padding,
// so that every growth changes sizeof; the 1.0 size stays the minimum).
// The released sizes: abi_sizes.hpp.
namespace {
static_assert(sizeof(Config) == kConfigSizeV17, "a new Config size: add it to read_config");
static_assert(sizeof(Stats) == kStatsSizeV17, "a new Stats size: add its fields to write_stats");
static_assert(sizeof(StartOptions) == kStartOptionsSizeV13, "a new StartOptions size: add it to read_start_options");
static_assert(sizeof(TimerInfo) == kTimerInfoSizeV13 && std::is_trivially_copyable_v<TimerInfo>);
static_assert(sizeof(Config) >= kConfigSizeV1 && sizeof(StartOptions) >= kStartOptionsSizeV1 &&
                  sizeof(Stats) >= kStatsSizeV1,
              "Config/StartOptions/Stats only grow within ABI major 1");
static_assert(std::is_trivially_copyable_v<StartOptions>);

/// True if T has no tail padding (an appended field then grows sizeof(T)):
/// a derived class's first member goes into its base's tail padding, if any
/// (Itanium C++ ABI; T is not POD for the purpose of layout).
template <class T>
struct TailProbe : T {
    char c;
};
template <class T>
constexpr bool no_tail_padding = sizeof(TailProbe<T>) > sizeof(T);
static_assert(no_tail_padding<Config> && no_tail_padding<StartOptions> && no_tail_padding<Stats> &&
                  no_tail_padding<TimerInfo>,
              "a 1.x struct must end without tail padding (pad the new field explicitly)");
static_assert(sizeof(Runtime) == sizeof(void*), "Runtime is a pimpl in 1.x");

// The 1.0 layouts (LP64), including the members of standard library types
// that the ABI dump (abi/, capi/abi.suppr) leaves out. A failure here is a
// C++ ABI break: fields are only ever appended.
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"  // not standard-layout (std::function, std::vector)
#endif
static_assert(offsetof(Config, shards) == 0 && offsetof(Config, workers) == 4 && offsetof(Config, resolution) == 8 &&
              offsetof(Config, pin_shards) == 16 && offsetof(Config, max_timers) == 24 &&
              offsetof(Config, on_callback_error) == 32);
static_assert(offsetof(StartOptions, deadline) == 0 && offsetof(StartOptions, delay) == 8 &&
              offsetof(StartOptions, period) == 16 && offsetof(StartOptions, shard) == 24 &&
              offsetof(StartOptions, policy) == 28 && offsetof(StartOptions, queue) == 32 &&
              offsetof(StartOptions, leeway) == 40 && offsetof(StartOptions, group) == 48 &&
              offsetof(StartOptions, clock) == 56 && offsetof(StartOptions, reserved) == 60);
static_assert(offsetof(Config, manual_clock) == 64 && offsetof(Config, name) == 72 &&
              offsetof(Config, slot_reserve) == 104);
static_assert(offsetof(TimerInfo, state) == 0 && offsetof(TimerInfo, shard) == 4 &&
              offsetof(TimerInfo, deadline) == 8 && offsetof(TimerInfo, period) == 16 &&
              offsetof(TimerInfo, leeway) == 24 && offsetof(TimerInfo, group) == 32 &&
              offsetof(TimerInfo, runs) == 40 && offsetof(TimerInfo, missed) == 48 &&
              offsetof(TimerInfo, clock) == 56);
static_assert(offsetof(Stats, pending_per_shard) == 0 && offsetof(Stats, inbox_per_shard) == 24 &&
              offsetof(Stats, live) == 48 && offsetof(Stats, slots) == 56 && offsetof(Stats, started) == 64 &&
              offsetof(Stats, fired) == 72 && offsetof(Stats, stopped) == 80 && offsetof(Stats, reset) == 88 &&
              offsetof(Stats, callback_exceptions) == 96 && offsetof(Stats, cancelled_at_shutdown) == 104 &&
              offsetof(Stats, lateness_p50) == 112 && offsetof(Stats, lateness_p99) == 120 &&
              offsetof(Stats, lateness_p999) == 128 && offsetof(Stats, lateness_max) == 136 &&
              offsetof(Stats, lateness_samples) == 144);
static_assert(offsetof(Stats, driver_lateness_p50) == 152 && offsetof(Stats, wait_lateness_p50) == 184 &&
              offsetof(Stats, run_duration_p50) == 216 && offsetof(Stats, run_duration_samples) == 248 &&
              offsetof(Stats, workers_busy) == 256 && offsetof(Stats, waiting_for_worker) == 264 &&
              offsetof(Stats, callbacks_running) == 272 && offsetof(Stats, oldest_run_age) == 280 &&
              offsetof(Stats, resident_bytes) == 288);  // 1.7
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

/// One past the last byte of member `m` in an object like `obj`.
template <class T, class M>
std::size_t end_of(const T& obj, M T::*m) noexcept {
    return static_cast<std::size_t>(reinterpret_cast<const char*>(&(obj.*m)) - reinterpret_cast<const char*>(&obj)) +
           sizeof(M);
}

/// Copies the listed members of `from` that end within `size` bytes.
template <class T, class... M>
void copy_within(T& to, const T& from, std::size_t size, M T::*... members) {
    ((end_of(from, members) <= size ? void(to.*members = from.*members) : void()), ...);
}

Config read_config(const Config* p, std::size_t size) {
    if (p == nullptr ||
        (size != kConfigSizeV1 && size != kConfigSizeV13 && size != kConfigSizeV15 && size != kConfigSizeV17)) {
        rt::set_error_detail(errc::invalid_argument,
                             "Config of %zu bytes: not a size of a released 1.x layout (64, 72, 104, 112; a "
                             "header newer than the library?)",
                             size);
        throw Error(errc::invalid_argument);
    }
    if (size >= kConfigSizeV13)
        for (const std::uint8_t b : p->reserved)
            if (b != 0) {
                rt::set_error_detail(errc::invalid_argument, "Config::reserved is not all zero");
                throw Error(errc::invalid_argument);
            }
    if (size == sizeof(Config)) return *p;
    Config c;  // a caller built against an older 1.x header: its fields, then our defaults
    copy_within(c, *p, size, &Config::shards, &Config::workers, &Config::resolution, &Config::pin_shards,
                &Config::max_timers, &Config::on_callback_error, &Config::manual_clock, &Config::name,
                &Config::slot_reserve);
    return c;
}

void write_stats(Stats& to, Stats&& from, std::size_t size) {
    if (size == sizeof(Stats)) {
        to = std::move(from);
        return;
    }
    // An older caller gets its fields; a newer one (larger size) all of ours,
    // its own newer fields keep their defaults.
    copy_within(to, from, size, &Stats::pending_per_shard, &Stats::inbox_per_shard, &Stats::live, &Stats::slots,
                &Stats::started, &Stats::fired, &Stats::stopped, &Stats::reset, &Stats::callback_exceptions,
                &Stats::cancelled_at_shutdown, &Stats::lateness_p50, &Stats::lateness_p99, &Stats::lateness_p999,
                &Stats::lateness_max, &Stats::lateness_samples, &Stats::driver_lateness_p50,
                &Stats::driver_lateness_p99, &Stats::driver_lateness_p999, &Stats::driver_lateness_max,
                &Stats::wait_lateness_p50, &Stats::wait_lateness_p99, &Stats::wait_lateness_p999,
                &Stats::wait_lateness_max, &Stats::run_duration_p50, &Stats::run_duration_p99,
                &Stats::run_duration_p999, &Stats::run_duration_max, &Stats::run_duration_samples,
                &Stats::workers_busy, &Stats::waiting_for_worker, &Stats::callbacks_running, &Stats::oldest_run_age,
                &Stats::resident_bytes);
}
}  // namespace

namespace rt {

namespace {
unsigned online_cpus() noexcept {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? static_cast<unsigned>(n) : 1u;
}

std::atomic<std::uint64_t> runtimes_named{0};

Config validated(Config c) {
    using namespace std::chrono;
    if (c.shards > Id::kMaxShards) {
        set_error_detail(errc::invalid_argument, "shards %u is above %u", c.shards, unsigned{Id::kMaxShards});
        throw Error(errc::invalid_argument);
    }
    if (c.workers > 4096) {
        set_error_detail(errc::invalid_argument, "workers %u is above 4096", c.workers);
        throw Error(errc::invalid_argument);
    }
    if (c.resolution < microseconds(1) || c.resolution > seconds(1)) {
        set_error_detail(errc::invalid_argument, "resolution %lld ns is outside 1 us .. 1 s (1000 .. 1000000000 ns)",
                         static_cast<long long>(c.resolution.count()));
        throw Error(errc::invalid_argument);
    }
    if (c.shards == 0) c.shards = online_cpus();
    if (c.workers == 0) c.workers = online_cpus();
    // Made-up names count every unnamed runtime of the process: unique. (The
    // C API's "" is kept: NameAsGiven, issue 34.)
    if (c.name.empty() && !NameAsGiven::active())
        c.name = "tickwheel-" + std::to_string(runtimes_named.fetch_add(1, std::memory_order_relaxed) + 1);
    return c;
}
}  // namespace

namespace {
thread_local int t_name_as_given = 0;
}  // namespace
NameAsGiven::NameAsGiven() noexcept { ++t_name_as_given; }
NameAsGiven::~NameAsGiven() { --t_name_as_given; }
bool NameAsGiven::active() noexcept { return t_name_as_given != 0; }

namespace {
std::uint64_t next_uid() noexcept {
    static std::atomic<std::uint64_t> n{0};
    return n.fetch_add(1, std::memory_order_relaxed) + 1;
}
}  // namespace

RuntimeCore::RuntimeCore(Runtime* rt, Config cfg)
    : owner(rt),
      config(validated(std::move(cfg))),
      clocks(config.manual_clock),
      clock(clocks.mono(), static_cast<std::uint64_t>(config.resolution.count())),
      max_timers(config.max_timers),
      created_in_epoch(fork_epoch()),
      uid(next_uid()) {
    (void)hazard_detail::asymmetric();  // decided before this runtime's threads fence (hazard.hpp)
    if (!config.manual_clock) fast_clock::prepare();  // the start path's clock (clock.hpp)
    dispatcher = std::make_unique<Dispatcher>(config.workers, &RuntimeCore::drain, this);
    shards.reserve(config.shards);
    for (unsigned i = 0; i < config.shards; ++i)
        shards.push_back(std::make_unique<Shard>(i, clock, clocks, *dispatcher, queues, config.name.c_str(),
                                                 config.slot_reserve == 0 ? kDefaultSlotReserve : config.slot_reserve));
    if (config.manual_clock) return;  // no driver threads: advance() drives the wheels
    const unsigned cpus = online_cpus();
    for (unsigned i = 0; i < config.shards; ++i)
        shards[i]->start(config.pin_shards ? static_cast<int>(i % cpus) : -1);
}

RuntimeCore::~RuntimeCore() {
    if (forked()) {
        abandon();
        queues.drop_all();  // no lock taken: a parent's thread may have held one at the fork
        return;             // members free only memory now
    }
    for (auto& s : shards) s->stop_and_join();
    dispatcher->wait_idle();
    // Queues still alive (a tickwheel::Queue may outlive its Runtime): they
    // are closed already (shutdown) and now forget the runtime.
    queues.for_each([](DeliveryQueue& q) { q.detach(); });
    queues.drop_all();
}

Saturation RuntimeCore::saturation() const noexcept {
    Saturation s;
    const RunBoard::Reading r = runs.read();
    s.callbacks_running = r.running;
    s.workers_busy = r.workers_busy;
    s.waiting_for_worker = dispatcher->waiting();
    if (r.oldest_since_ns != 0) {
        // The runs' starts are the machine's clock (a manual runtime's too;
        // its upper bound: fast_clock, a few us at most above it).
        const std::int64_t now = monotonic_ns();
        s.oldest_run_age_ns = now > r.oldest_since_ns ? static_cast<std::uint64_t>(now - r.oldest_since_ns) : 0;
    }
    return s;
}

void RuntimeCore::abandon() noexcept {
    for (auto& s : shards) s->abandon();
    dispatcher->abandon();
}

}  // namespace rt

using rt::Ctl;
using rt::Id;
using rt::Record;
using rt::State;
using rt::TimerState;

Runtime::Runtime(const Config* config, std::size_t config_size)
    : core_(std::make_unique<rt::RuntimeCore>(this, read_config(config, config_size))) {}

Runtime::~Runtime() {
    if (!core_) return;
    if (core_->forked()) return;  // ~RuntimeCore frees memory only: no hook, no thread
    std::error_code ec;
    shutdown(ec);
    if (ec == errc::would_deadlock) {
        std::fputs("tickwheel: a Runtime was destroyed from inside one of its own callbacks or from a "
                   "release hook (use shutdown(), which reports would_deadlock)\n",
                   stderr);
        std::terminate();
    }
}

// ---- query ---------------------------------------------------------------------
bool Runtime::query_sized(std::uint64_t id, TimerInfo* out, std::size_t out_size) const noexcept {
    const rt::RuntimeCore& core = *core_;
    if (out == nullptr || out_size != sizeof(TimerInfo) || core.forked()) return false;
    const std::uint32_t si = Id::shard(id);
    if (id == 0 || si >= core.shards.size()) return false;
    const rt::HandleTable& table = core.shards[si]->table();
    const Record* r = table.find(Id::index(id));
    if (r == nullptr) return false;
    const std::uint32_t gen = Id::gen(id);
    // A seqlock-style read: the word (acquire), then the fields, then the
    // generation again. The record is recycled (generation + 1) before a
    // new occupant writes its fields, so an unchanged generation after the
    // reads means they were this timer's.
    // A boot-time or wall-clock timer's word and its own-clock deadline
    // change together under its deadline lock (a reset: reset.cpp); read
    // apart, a reset between the two would give its old state with its new
    // deadline (seen: DUE with a deadline 25 ms ahead of the clock, TSan,
    // stress.history). So the word is read again after the deadline, and
    // both again if it moved: a bounded number of times (a query never
    // waits), then the latest reading.
    rt::Word c;
    State s;
    std::uint16_t flags;
    std::uint64_t period, runs, missed;
    bool clocked;
    std::int64_t own_deadline;  // a boot-time or wall-clock timer: its exact deadline on its clock
    TimerInfo info;
    info.shard = static_cast<int>(si);
    constexpr unsigned kQueryTries = 16;
    for (unsigned tries = 0;; ++tries) {
        c = TimerState::load(*r);
        if (r->gen() != gen || Ctl::gen10(c) != (gen & Ctl::kGenMask)) return false;
        s = Ctl::state(c);
        flags = r->flags();
        period = (flags & Record::kPeriodic) != 0 ? rt::HandleTable::period_ticks_of(*r) : 0;
        runs = missed = 0;
        clocked = (flags & Record::kClockMask) != 0;
        own_deadline = 0;
        if (clocked) rt::test_hooks::window(r, 'Q');  // between the word and the deadline
        if ((flags & Record::kHasExtra) != 0) {
            const rt::Extra& x = table.extra(Id::index(id));
            // (Seqlock-style under its deadline lock: a reset's new deadline
            // with its new tick, never one without the other.)
            if (clocked && !rt::OwnDeadline::read(x, gen, own_deadline)) return false;
            runs = x.runs.load(std::memory_order_relaxed);
            missed = x.missed.load(std::memory_order_relaxed);
            info.group = x.group.load(std::memory_order_relaxed);
            info.leeway = Duration(static_cast<std::int64_t>(x.leeway_ns.load(std::memory_order_relaxed)));
        } else {
            runs = Ctl::running(s) ? 1 : 0;  // a one-shot that never re-armed itself
        }
        std::atomic_thread_fence(std::memory_order_acquire);
        if (r->gen() != gen) return false;
        if (!clocked || tries >= kQueryTries || TimerState::load(*r) == c) break;
    }
    const bool delay = period != 0 && ((flags & Record::kPolicyMask) >> Record::kPolicyShift) ==
                                           static_cast<std::uint16_t>(rt::Policy::Delay);
    const std::int64_t d_ns = clocked ? own_deadline : core.clock.tick_start_ns(Ctl::deadline(c));
    const auto cid = static_cast<rt::ClockId>((flags & Record::kClockMask) >> Record::kClockShift);
    switch (s) {
        case State::Pending:
            info.state = d_ns <= core.clocks.now(cid) ? TimerStatus::due : TimerStatus::pending;
            info.deadline = TimePoint(Duration(d_ns));
            break;
        case State::Dispatched:
            info.state = TimerStatus::due;
            info.deadline = TimePoint(Duration(d_ns));
            break;
        case State::Running:
        case State::RunningStopped:
            info.state = TimerStatus::running;
            // A fixed-rate timer's word holds its next grid deadline; a
            // one-shot's and a DELAY timer's the one being served.
            if (period != 0 && !delay && s == State::Running) info.deadline = TimePoint(Duration(d_ns));
            break;
        case State::RunningRearmed:
            info.state = TimerStatus::running;
            info.deadline = TimePoint(Duration(d_ns));
            break;
        default: return false;  // free, cancelled, releasing: not live
    }
    info.period = Duration(static_cast<std::int64_t>(period * core.clock.resolution_ns()));
    info.runs = runs;
    info.missed = delay ? 0 : missed;
    info.clock = static_cast<TimerClock>(cid);
    *out = info;
    return true;
}

// ---- lifecycle ---------------------------------------------------------------
void Runtime::shutdown() {
    std::error_code ec;
    shutdown(ec);
    if (ec) throw Error(ec);
}

void Runtime::shutdown(std::error_code& ec) noexcept {
    rt::RuntimeCore& core = *core_;
    ec.clear();
    if (core.forked()) {
        rt::set_forked(ec);
        return;
    }
    if (rt::inside_callback_of(&core) || rt::t_release_depth != 0) {
        rt::set_error_detail(errc::would_deadlock, "shutdown called from inside %s: it would wait for itself",
                             rt::t_release_depth != 0 ? "a release hook" : "one of the runtime's callbacks");
        ec = make_error_code(errc::would_deadlock);
        return;
    }
    std::lock_guard<std::mutex> lock(core.shutdown_mutex);
    if (core.shut_down.load(std::memory_order_acquire)) return;
    core.shutting_down.store(true, std::memory_order_seq_cst);
    // 1. No start() or queue create is in flight any more, and none can
    //    begin: each sees the flag inside its StartGuard (timer_ops.hpp).
    core.wait_for_starts();
    // 2. Every queue is closed before anything is waited for (issue 20,
    //    race 1): threads waiting in run() return TW_ESHUTDOWN -- among them
    //    a callback on a worker, of another queue or of an advance that
    //    waits in tw_queue_run(q, n, -1), which the waits below would
    //    otherwise wait for forever. (Create is ordered by step 1: the table
    //    holds every queue that will ever exist.)
    core.queues.for_each([](rt::DeliveryQueue& q) { q.close_begin(); });
    // 3. Drivers stop: nothing new is dispatched (a manual runtime's driver
    //    is an advance in progress: it sees the flag and ends first; its
    //    callback's queue runs were just woken).
    std::unique_lock<std::mutex> no_advance(core.advance_mutex, std::defer_lock);
    if (core.clocks.manual()) no_advance.lock();
    for (auto& s : core.shards) s->stop_and_join();
    // 4. Runs in progress finish: on the workers, then on the threads that
    //    run delivery queues (which start no run any more).
    core.dispatcher->wait_idle();
    core.queues.for_each([](rt::DeliveryQueue& q) { q.close_wait(); });
    // 5. Every timer still pending is cancelled and released here, by the
    //    same transition as stop() (nothing recycles records any more, and a
    //    concurrent stop() loses or wins the same CAS).
    for (auto& s : core.shards) {
        const std::uint32_t hw = s->table().high_water();
        for (std::uint32_t i = 0; i < hw; ++i) {
            Record* r = s->table().find(i);
            if (r == nullptr) continue;
            if (TimerState::try_cancel(*r, r->gen()) != rt::CancelOutcome::Cancelled) continue;
            core.release(*r);
            core.counters.add(rt::kCancelledAtShutdown);
            TimerState::finish_cancel(*r);
        }
        s->clear_pending_after_sweep();
    }
    core.shut_down.store(true, std::memory_order_release);
}

bool Runtime::is_shut_down() const noexcept { return core_->shut_down.load(std::memory_order_acquire); }
bool Runtime::is_forked() const noexcept { return core_->forked(); }

// ---- observation ---------------------------------------------------------------
void Runtime::stats_sized(Stats* out, std::size_t out_size) const {
    const rt::RuntimeCore& core = *core_;
    if (out == nullptr || out_size < kStatsSizeV1) throw Error(errc::invalid_argument);
    if (core.forked()) throw Error(errc::forked);
    Stats st;
    for (const auto& s : core.shards) {
        st.pending_per_shard.push_back(s->pending());
        st.inbox_per_shard.push_back(s->inbox_size());
        st.slots += s->table().resident_slots();
        st.resident_bytes += s->table().resident_bytes();
    }
    const auto& c = core.counters;
    st.started = c.sum(rt::kStarted);
    st.fired = c.sum(rt::kFired);
    st.stopped = c.sum(rt::kStopped);
    st.reset = c.sum(rt::kReset);
    st.callback_exceptions = c.sum(rt::kCallbackExceptions);
    st.cancelled_at_shutdown = c.sum(rt::kCancelledAtShutdown);
    const std::uint64_t released = c.sum(rt::kReleased);
    st.live = st.started > released ? st.started - released : 0;
    const auto lat = core.lateness.summarize();
    st.lateness_samples = lat.count;
    st.lateness_p50 = Duration(lat.p50);
    st.lateness_p99 = Duration(lat.p99);
    st.lateness_p999 = Duration(lat.p999);
    st.lateness_max = Duration(lat.max);
    // The stages' histograms (issue 34): p50, p99, p99.9 and max of each.
    const auto quantiles = [](const auto& h, Duration& p50, Duration& p99, Duration& p999, Duration& max) {
        const auto q = h.summarize();
        p50 = Duration(q.p50);
        p99 = Duration(q.p99);
        p999 = Duration(q.p999);
        max = Duration(q.max);
        return q.count;
    };
    (void)quantiles(core.driver_lateness, st.driver_lateness_p50, st.driver_lateness_p99, st.driver_lateness_p999,
                    st.driver_lateness_max);
    (void)quantiles(core.wait_lateness, st.wait_lateness_p50, st.wait_lateness_p99, st.wait_lateness_p999,
                    st.wait_lateness_max);
    st.run_duration_samples = quantiles(core.run_duration, st.run_duration_p50, st.run_duration_p99,
                                        st.run_duration_p999, st.run_duration_max);
    const rt::Saturation sat = core.saturation();
    st.workers_busy = sat.workers_busy;
    st.waiting_for_worker = sat.waiting_for_worker;
    st.callbacks_running = sat.callbacks_running;
    st.oldest_run_age = Duration(static_cast<std::int64_t>(sat.oldest_run_age_ns));
    write_stats(*out, std::move(st), out_size);
}

unsigned Runtime::shard_count() const noexcept { return static_cast<unsigned>(core_->shards.size()); }
unsigned Runtime::worker_count() const noexcept { return core_->dispatcher->concurrency(); }
Duration Runtime::resolution() const noexcept { return core_->config.resolution; }

}  // namespace tickwheel
