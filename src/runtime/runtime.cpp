// SPDX-License-Identifier: MIT OR Apache-2.0
// The C++ API: Runtime's public functions (the callers' half of the timer
// state machine: start, stop, stop_sync, reset, shutdown), and RuntimeCore
// (its construction and the worker's half: run a due timer, settle after).
// Every change of a timer's word is a TimerState call (timer_state.hpp).
#include "tickwheel/runtime.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>

#include "runtime/error_detail.hpp"
#include "runtime/hazard.hpp"
#include "runtime/runtime_core.hpp"
#include "runtime/timer_ops.hpp"
#include "runtime/test_hooks.hpp"
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
namespace {
constexpr std::size_t kConfigSizeV1 = 64;
constexpr std::size_t kConfigSizeV13 = 72;  // 1.3 appended `manual_clock` (+ padding)
constexpr std::size_t kConfigSizeV15 = 104;  // 1.5 appended `name`
static_assert(sizeof(Config) == kConfigSizeV15, "a new Config size: add it to read_config");
constexpr std::size_t kStartOptionsSizeV1 = 32;
constexpr std::size_t kStartOptionsSizeV12 = 40;  // 1.2 appended `queue`
constexpr std::size_t kStartOptionsSizeV13 = 64;  // 1.3 appended `leeway`, `group`, `clock`, `reserved`
static_assert(sizeof(StartOptions) == kStartOptionsSizeV13, "a new StartOptions size: add it to read_start_options");
constexpr std::size_t kTimerInfoSizeV13 = 64;
static_assert(sizeof(TimerInfo) == kTimerInfoSizeV13 && std::is_trivially_copyable_v<TimerInfo>);
constexpr std::size_t kStatsSizeV1 = 152;
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
static_assert(offsetof(Config, manual_clock) == 64 && offsetof(Config, name) == 72);
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
    if (p == nullptr || (size != kConfigSizeV1 && size != kConfigSizeV13 && size != kConfigSizeV15)) {
        rt::set_error_detail(errc::invalid_argument,
                             "Config of %zu bytes: not a size of a released 1.x layout (64, 72, 104; a header "
                             "newer than the library?)",
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
                &Config::max_timers, &Config::on_callback_error, &Config::manual_clock, &Config::name);
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
                &Stats::lateness_max, &Stats::lateness_samples);
}
}  // namespace

namespace rt {

bool read_start_options(const StartOptions* p, std::size_t size, StartOptions& to) noexcept {
    // Only the sizes of released layouts: any other one would cut a field.
    if (p == nullptr || (size != kStartOptionsSizeV1 && size != kStartOptionsSizeV12 && size != kStartOptionsSizeV13))
        return false;
    std::memcpy(&to, p, size);  // trivially copyable; the fields past `size` keep their defaults
    return true;
}

[[gnu::tls_model("initial-exec")]] constinit thread_local CurrentRun t_current;
[[gnu::tls_model("initial-exec")]] constinit thread_local int t_release_depth = 0;

bool inside_callback_of(const RuntimeCore* core) noexcept {
    for (const CurrentRun* f = &t_current; f != nullptr; f = f->prev)
        if (f->core == core) return true;
    return false;
}

bool inside_callback_of(const Record* r) noexcept {
    for (const CurrentRun* f = &t_current; f != nullptr; f = f->prev)
        if (f->rec == r) return true;
    return false;
}

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
    // Made-up names count every unnamed runtime of the process: unique.
    if (c.name.empty())
        c.name = "tickwheel-" + std::to_string(runtimes_named.fetch_add(1, std::memory_order_relaxed) + 1);
    return c;
}

/// Marks this thread as inside a release hook for the scope's life.
struct ReleaseScope {
    ReleaseScope() noexcept { ++t_release_depth; }
    ~ReleaseScope() { --t_release_depth; }
    ReleaseScope(const ReleaseScope&) = delete;
    ReleaseScope& operator=(const ReleaseScope&) = delete;
};
}  // namespace

RuntimeCore::RuntimeCore(Runtime* rt, Config cfg)
    : owner(rt),
      config(validated(std::move(cfg))),
      clocks(config.manual_clock),
      clock(clocks.mono(), static_cast<std::uint64_t>(config.resolution.count())),
      max_timers(config.max_timers),
      created_in_epoch(fork_epoch()) {
    (void)hazard_detail::asymmetric();  // decided before this runtime's threads fence (hazard.hpp)
    if (!config.manual_clock) fast_clock::prepare();  // the start path's clock (clock.hpp)
    dispatcher = std::make_unique<Dispatcher>(config.workers, &RuntimeCore::drain, this);
    shards.reserve(config.shards);
    for (unsigned i = 0; i < config.shards; ++i)
        shards.push_back(std::make_unique<Shard>(i, clock, clocks, *dispatcher, queues));
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

void RuntimeCore::abandon() noexcept {
    for (auto& s : shards) s->abandon();
    dispatcher->abandon();
}

Record* RuntimeCore::lookup(std::uint64_t id, Shard** shard_out) noexcept {
    const std::uint32_t s = Id::shard(id);
    if (id == 0 || s >= shards.size()) return nullptr;
    Record* r = shards[s]->table().find(Id::index(id));
    if (r == nullptr || r->gen() != Id::gen(id)) return nullptr;
    *shard_out = shards[s].get();
    return r;
}

void RuntimeCore::release(Record& r) noexcept {
    release_hook(r);
    count_released(1);
}

void RuntimeCore::release_hook(Record& r) noexcept {
    ReleaseScope in_hook;
    r.destroy_callable();
}

void RuntimeCore::count_released(std::uint64_t n) noexcept {
    counters.add(kReleased, n);
    if (max_timers != 0) live.fetch_sub(static_cast<std::int64_t>(n), std::memory_order_relaxed);
}

void RuntimeCore::release_unstarted(detail::Callback& cb) noexcept {
    ReleaseScope in_hook;
    cb.reset();
}

// ---- the worker's half -------------------------------------------------------
void RuntimeCore::drain(void* self, Dispatcher::Cursor& items) noexcept {
    auto& core = *static_cast<RuntimeCore*>(self);
    const FireItem* item = items.next();
    if (item == nullptr) return;
    // A batch comes from one shard; its one-shot records are freed with one
    // CAS when this drain task leaves it (before the batch counts as done).
    FreeChain freed(core.shard(item->shard).table());
    do {
        core.run_one(*item, freed);
    } while ((item = items.next()) != nullptr);
}

void RuntimeCore::run_one(const FireItem& item, FreeChain& freed) noexcept {
    if ((item.gen & FireItem::kClaim) != 0) {
        // A claim item: the shard only found it due; expiry's transition is
        // ours (PENDING -> RUNNING, judged at the shard's tick: never early).
        const FireItem own{item.rec, item.gen & ~FireItem::kClaim, item.shard, item.due};
        ClaimStep step;
        {
            HazardScope acting_on(own.rec);
            step = TimerState::claim_run(*own.rec, own.gen, own.due);
        }
        switch (step.out) {
            case ClaimOutcome::Run:
                run_begun(FireItem{own.rec, own.gen, own.shard, step.due}, freed, nullptr);
                return;
            case ClaimOutcome::Later:
                // A reset moved it later after the shard looked: back to the
                // wheel, which only its shard touches (it files it at the
                // word's deadline; a stale Insert is dropped there).
                shard(own.shard).post_and_wake(Msg::make(MsgType::Insert, own.gen, HandleTable::index_of(own.rec)),
                                               step.due);
                return;
            case ClaimOutcome::Drop: return;  // stopped: its canceller ends it
        }
        return;
    }
    if (begin_run(item)) run_begun(item, freed, nullptr);
}

bool RuntimeCore::begin_run(const FireItem& item) noexcept {
    // DISPATCHED -> RUNNING, unless a stop or reset got there first.
    HazardScope acting_on(item.rec);
    return TimerState::begin_run(*item.rec, item.gen);
}

void RuntimeCore::call(Record& r, std::uint64_t id, tick_t due) noexcept {
    const std::int64_t due_ns = clock.tick_start_ns(due);
    if (clocks.manual()) clocks.advance_to(due_ns);  // an advance steps the clocks to each deadline it serves
    const std::int64_t start_ns = clocks.mono();
    const std::uint64_t late = start_ns > due_ns ? static_cast<std::uint64_t>(start_ns - due_ns) : 0;
    lateness.record(late);
    // Every run gives its queue a sample too, against the deadline it
    // serves (a BURST catch-up's own; issue 31).
    if (t_current.queue != nullptr) t_current.queue->record_run_lateness(late);
    try {
        r.invoke(Timer(owner, id));
    } catch (...) {
        counters.add(kCallbackExceptions);
        if (config.on_callback_error) {
            try {
                config.on_callback_error(std::current_exception(), id);
            } catch (...) {
                // The error hook must not throw; if it does, we drop it.
            }
        }
    }
    counters.add(kFired);
}

std::size_t RuntimeCore::run_begun(const FireItem& item, FreeChain& freed, DeliveryQueue* queue,
                                   std::size_t budget) noexcept {
    Record& r = *item.rec;
    const std::uint32_t index = HandleTable::index_of(&r);
    Extra* x = r.has_extra() ? &shard(item.shard).table().extra(index) : nullptr;
    if (x != nullptr) {
        owner::running(r, "Extra::runs");
        x->runs.fetch_add(1, std::memory_order_relaxed);
    }

    const CurrentRun saved = t_current;
    t_current = CurrentRun{this, &r, queue, &saved};
    const std::uint64_t id = Id::make(item.gen, item.shard, index);
    call(r, id, item.due);
    std::size_t calls = 1;
    if (x != nullptr && r.policy() == Policy::Burst) {
        // Catch up: the grid deadlines that passed meanwhile (owed, counted
        // by the shard) run now, back to back, while the word stays RUNNING
        // (a stop makes it RUNNING_STOPPED, a reset clears owed: either ends
        // the burst). They serve due + period, due + 2 period, ... At most
        // Extra::kMaxOwed are owed when the loop looks: older ones are
        // skipped (missed; issue 31). On a queue, at most `budget` calls in
        // all: the rest stay owed, the timer due again (requeue_owed).
        const std::uint64_t period = HandleTable::period_ticks_of(r);
        tick_t due = item.due;
        for (;;) {
            std::uint64_t o = x->owed.load(std::memory_order_relaxed);
            const std::uint64_t n = o & Extra::kOwedCountMask;
            if (n == 0 || Ctl::state(TimerState::load(r)) != State::Running) break;
            if (n > Extra::kMaxOwed) {
                if (!x->owed.compare_exchange_weak(o, (o & ~Extra::kOwedCountMask) | Extra::kMaxOwed,
                                                   std::memory_order_relaxed))
                    continue;
                owner::running(r, "Extra::missed (a BURST timer's owed runs past kMaxOwed)");
                x->missed.fetch_add(n - Extra::kMaxOwed, std::memory_order_relaxed);
                due += (n - Extra::kMaxOwed) * period;
                continue;
            }
            if (calls >= budget && queue != nullptr) {
                if (queue->requeue_owed(r, *x, FireItem{item.rec, item.gen, item.shard, due + period})) {
                    t_current = saved;  // not settled: due again on its queue (the word is not ours any more)
                    return calls;
                }
                // Not handed back (a reset cleared what was owed, a stop, a
                // closing queue, no memory): look again, and catch up now
                // rather than leave owed runs behind for a later episode
                // (they would serve deadlines after its own: early).
                budget = static_cast<std::size_t>(-1);
                continue;
            }
            if (!x->owed.compare_exchange_weak(o, o - 1, std::memory_order_relaxed)) continue;
            x->runs.fetch_add(1, std::memory_order_relaxed);
            due += period;
            call(r, id, due);
            ++calls;
        }
    }
    if (x == nullptr && Ctl::state(TimerState::load(r)) == State::RunningRearmed) {
        // A one-shot that re-armed itself lives on: from now on it counts
        // its runs (only its own callback could re-arm it, and that has
        // returned, so the word stays RUNNING_REARMED or goes
        // RUNNING_STOPPED meanwhile: the worker owns the record).
        if (Extra* e = shard(item.shard).table().make_extra(index)) {
            owner::running(r, "Extra (a one-shot that re-armed itself)");
            e->runs.store(1, std::memory_order_relaxed);
            e->missed.store(0, std::memory_order_relaxed);
            e->owed.store(Extra::owed_tag(item.gen), std::memory_order_relaxed);
            e->group.store(0, std::memory_order_relaxed);
            e->leeway_ns.store(0, std::memory_order_relaxed);
            r.set_flags(static_cast<std::uint16_t>(r.flags() | Record::kHasExtra));
        }
    }
    // Still "inside" the timer while settling: the release hook may run here,
    // and from it shutdown() must report would_deadlock and stop_sync() on
    // this timer must not wait for itself.
    finish_run(r, item, freed);
    t_current = saved;
    return calls;
}

void RuntimeCore::finish_run(Record& r, const FireItem& item, FreeChain& freed) noexcept {
    // Messages are built from the item: once the word leaves RUNNING*, the
    // record may be recycled and its generation move on.
    const std::uint32_t index = HandleTable::index_of(&r);
    Shard& s = shard(item.shard);
    // A DELAY timer's next run: the end of this one plus the period.
    const std::uint64_t delay_period =
        r.periodic() && r.policy() == Policy::Delay ? HandleTable::period_ticks_of(r) : 0;
    // A boot-time or wall-clock DELAY timer: its next deadline on its clock
    // and the word's tick are set together under its deadline lock, and
    // only if the word takes this run's "end + period" -- not when a reset
    // during the run set the next deadline already (RUNNING_REARMED: the
    // reset wrote its own; issue 20, race 3).
    Extra* own = delay_period != 0 && r.clock() != rt::ClockId::Monotonic ? &HandleTable::extra_of(r) : nullptr;
    std::uint64_t held = 0;
    if (own != nullptr && !OwnDeadline::lock(r, *own, item.gen, held)) own = nullptr;  // (the worker owns the record)
    const tick_t delay_next = delay_period != 0 ? clock.deadline_tick(clocks.mono()) + delay_period : 0;
    const std::int64_t own_next =
        own != nullptr ? clocks.now(r.clock()) + static_cast<std::int64_t>(delay_period * clock.resolution_ns()) : 0;
    // A grouped one-shot that re-armed itself begins a new pending episode:
    // it is indexed again before the word makes it PENDING, so a group stop
    // that took its entry while it ran (and could not stop a run in
    // progress) does not lose it (issue 20, race 2). The index drops the
    // duplicate this leaves when no group stop came (GroupIndex::compact).
    if (!r.periodic() && r.has_extra() && Ctl::state(TimerState::load(r)) == State::RunningRearmed) {
        if (const std::uint64_t group = HandleTable::extra_of(r).group.load(std::memory_order_relaxed); group != 0) {
            try {
                s.groups().add(group, item.gen, index);
            } catch (...) {
                // No memory for the entry: the timer is left out of its
                // group's index (a later group stop does not find it).
            }
        }
    }
    const FinishStep step = TimerState::finish_run(r, delay_next);
    if (own != nullptr) {
        if (step.out == FinishOutcome::Rearmed && step.from == State::Running) OwnDeadline::store(*own, held, own_next);
        OwnDeadline::unlock(*own, held);
    }
    switch (step.out) {
        case FinishOutcome::Periodic: return;  // pending again, already in the wheel
        case FinishOutcome::Last:
            release(r);
            s.recycle_ended(r, freed);  // FREE at once (waiters woken); reused after the chain's flush
            return;
        case FinishOutcome::Rearmed:
            s.post_and_wake(Msg::make(MsgType::Insert, item.gen, index), Ctl::deadline(step.next));
            return;
        case FinishOutcome::Stopped:
            // A stop() returned true during the run; release, then let the
            // shard unlink and recycle it.
            release(r);
            TimerState::finish_stopped(r);
            s.post_cancel(Msg::make(MsgType::Cancel, item.gen, index));
            return;
    }
}

// ---- a manual clock --------------------------------------------------------------
// The advancing thread is every shard's driver: it drains the inboxes, moves
// the wheels, and runs what comes due itself, one callback at a time in
// (deadline tick, start order), stepping the clocks to each deadline it
// serves. After each callback it looks again (the callback may have started,
// stopped or re-armed timers, due in the window, even in the past), so the
// order holds for timers started during the advance too. Periodic skips are
// judged against the end of the window (decide_expire's grid_now): SKIP runs
// once per advance with missed += k - 1, BURST k times (its catch-up).
std::size_t RuntimeCore::advance(std::int64_t ns) {
    std::lock_guard<std::mutex> serial(advance_mutex);
    // Ordered against shutdown (issue 20): shutdown sets the flag before it
    // takes advance_mutex. An advance that takes the mutex after a shutdown
    // began does nothing (Runtime::advance reports shutting_down); one in
    // progress stops before its next callback (shutdown waits for it, and
    // closed the queues its callbacks may wait in first).
    if (shutting_down.load(std::memory_order_seq_cst)) return kAdvanceShutDown;
    const std::int64_t from = clocks.mono();
    const std::int64_t target_ns = clocks.mono_after(from, ns);  // capped: Clocks::max_mono() (issue 31)
    const tick_t target = clock.now_tick(target_ns);
    struct Due {
        FireItem item;
        std::uint64_t seq;
    };
    const auto later = [](const Due& a, const Due& b) {
        return a.item.due != b.item.due ? a.item.due > b.item.due : a.seq > b.seq;
    };
    std::vector<Due> heap;  // a min-heap by (due, seq)
    std::vector<FireItem> fired;
    std::size_t ran = 0;
    for (;;) {
        const tick_t now = clock.now_tick(clocks.mono());
        for (auto& s : shards) s->manual_step(now, target, fired);
        for (const FireItem& f : fired) {
            const std::uint32_t index = HandleTable::index_of(f.rec);
            const Record& r = *f.rec;
            const std::uint64_t seq =
                r.has_extra() ? shard(f.shard).table().extra(index).seq.load(std::memory_order_relaxed) : 0;
            heap.push_back({f, seq});
            std::push_heap(heap.begin(), heap.end(), later);
        }
        fired.clear();
        if (shutting_down.load(std::memory_order_relaxed)) break;  // the sweep cancels the rest
        if (!heap.empty()) {
            std::pop_heap(heap.begin(), heap.end(), later);
            const FireItem f = heap.back().item;
            heap.pop_back();
            if (begin_run(f)) {
                FreeChain freed(shard(f.shard).table());
                ran += run_begun(f, freed, nullptr);
            }
            continue;
        }
        tick_t next = Wheel::kNever;
        for (auto& s : shards) next = std::min(next, s->manual_next_expiry());
        if (next > target) break;
        clocks.advance_to(clock.tick_start_ns(next));  // the clocks step to the next deadline
    }
    clocks.advance_to(target_ns);
    return ran;
}

// ---- delivery queues (delivery_queue.hpp) ---------------------------------------
DeliveryQueue* RuntimeCore::create_queue() {
    if (forked()) throw Error(errc::forked);
    // Ordered against shutdown as a start is (issue 20, race 6): registered
    // while it checks the flag and puts the queue in its slot, so shutdown,
    // which waits for every registration before it closes the queues, either
    // finds the queue in the table or made this call fail. No user code runs
    // meanwhile (an eventfd and two allocations).
    const StartGuard guard(*this);
    if (guard.shutting_down()) throw Error(errc::shutting_down);
    return queues.create(*this);
}

void RuntimeCore::wait_for_starts() noexcept {
    // The heavy side of StartGuard's fence: a start whose registration this
    // misses sees what the caller stored before (timer_ops.hpp).
    heavy_fence();
    for (auto& g : starting)
        while (g.n.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
}

void RuntimeCore::destroy_queue(DeliveryQueue& q) noexcept {
    // 0. The caller claimed it (claim_destroy), and the slot's generation
    //    moves on: a start bound to q that checks it from now on (inside
    //    its StartGuard: queue_still_bindable) fails. The starts in flight that checked
    //    before finish first (issue 20, race 8): each start holds a
    //    StartGuard from its check until its timer is published, so once
    //    the stripes drain, every start bound to q that returned (or will
    //    return) 0 has a published record that step 3 finds.
    queues.retire_slot(q.slot());
    wait_for_starts();
    // 1. Nothing runs on it any more (runs in progress end, waiting runners return).
    q.close();
    // 2. Nobody finds it by its slot any more...
    const std::uint16_t slot = q.slot();
    queues.clear(slot);
    // 3. ...and every timer bound to it is cancelled, as by stop(): the
    //    generation first, then the word (acquire: start() wrote the slot
    //    before publishing it), then the slot; try_cancel re-validates the
    //    generation, so a recycled record is never acted on. Runs after a
    //    shutdown find none (its sweep cancelled them all).
    for (auto& sp : shards) {
        Shard& s = *sp;
        const std::uint32_t hw = s.table().high_water();
        for (std::uint32_t i = 0; i < hw; ++i) {
            Record* r = s.table().find(i);
            if (r == nullptr) continue;
            const std::uint32_t gen = r->gen();
            const Word c = TimerState::load(*r);
            if (Ctl::gen10(c) != (gen & Ctl::kGenMask) || (r->flags() & Record::kHasQueue) == 0 ||
                HandleTable::queue_slot_of(*r) != slot)
                continue;
            CancelOutcome out;
            {
                HazardScope acting_on(r);
                out = TimerState::try_cancel(*r, gen);
            }
            if (out != CancelOutcome::Cancelled) continue;  // not pending, or a concurrent stop owns it
            release(*r);
            counters.add(kStopped);
            TimerState::finish_cancel(*r);
            s.post_cancel(Msg::make(MsgType::Cancel, gen, i));
        }
    }
    // 4. No thread that may have found it by its slot is still using it.
    queues.quiesce();
    queues.release_slot(slot);
    q.unref();  // the slot's reference
}

}  // namespace rt

using rt::Ctl;
using rt::HazardScope;
using rt::Id;
using rt::Msg;
using rt::MsgType;
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

// ---- start -----------------------------------------------------------------
namespace rt {
namespace {
std::atomic<std::uint32_t> next_thread_seq{0};

/// Checks start()'s times against the call's readings; the first
/// deadline's tick (on the monotonic wheel), the period in ticks, and the
/// first deadline on the timer's own clock on success.
errc start_args(const RuntimeCore& core, const StartOptions& o, Readings& readings, tick_t& tick,
                std::uint64_t& period, std::int64_t& own_deadline) noexcept {
    const TickClock& clock = core.clock;
    if (static_cast<std::uint32_t>(o.clock) >= kClocks) {
        set_error_detail(errc::invalid_argument, "clock %u is not a TimerClock (0 .. 2)", static_cast<unsigned>(o.clock));
        return errc::invalid_argument;
    }
    if (o.reserved != 0) {
        set_error_detail(errc::invalid_argument, "StartOptions::reserved is %u, not 0", o.reserved);
        return errc::invalid_argument;
    }
    const auto cid = static_cast<ClockId>(o.clock);
    // "now + delay" on the monotonic clock: the upper bound (clock.hpp).
    const bool upper = cid == ClockId::Monotonic && o.deadline == TimePoint{};
    const std::int64_t mono = upper ? readings.mono_upper() : readings.mono();
    const std::int64_t now = upper ? mono : readings.now(cid);
    const std::int64_t offset = now - mono;  // the timer's clock minus the monotonic one
    std::int64_t deadline;
    if (o.deadline != TimePoint{}) {
        deadline = std::chrono::duration_cast<Duration>(o.deadline.time_since_epoch()).count();
        if (deadline > now && deadline - now > kMaxDelay.count()) {
            set_error_detail(errc::invalid_argument,
                             "deadline %lld ns is %lld ns after the runtime's clock reads now (%lld): above kMaxDelay "
                             "(%lld ns)",
                             static_cast<long long>(deadline), static_cast<long long>(deadline - now),
                             static_cast<long long>(now), static_cast<long long>(kMaxDelay.count()));
            return errc::invalid_argument;
        }
    } else {
        if (o.delay < Duration::zero() || o.delay > kMaxDelay) {
            set_error_detail(errc::invalid_argument, "delay %lld ns is %s kMaxDelay (%lld ns)",
                             static_cast<long long>(o.delay.count()),
                             o.delay < Duration::zero() ? "negative: not within 0 .." : "above",
                             static_cast<long long>(kMaxDelay.count()));
            return errc::invalid_argument;
        }
        deadline = now + o.delay.count();
    }
    if (o.period < Duration::zero() || o.period > kMaxDelay) {
        set_error_detail(errc::invalid_argument, "period %lld ns is %s kMaxDelay (%lld ns)",
                         static_cast<long long>(o.period.count()),
                         o.period < Duration::zero() ? "negative: not within 0 .." : "above",
                         static_cast<long long>(kMaxDelay.count()));
        return errc::invalid_argument;
    }
    tick = readings.deadline_tick(clock, deadline - offset);
    own_deadline = deadline;
    if (tick > Ctl::kMaxDeadline) {
        set_error_detail(errc::invalid_argument, "deadline %lld ns is beyond the wheel's range",
                         static_cast<long long>(deadline));
        return errc::invalid_argument;
    }
    period = o.period > Duration::zero() ? clock.period_ticks(static_cast<std::uint64_t>(o.period.count())) : 0;
    return errc{};
}
}  // namespace

bool RuntimeCore::queue_slot(const Queue* q, std::uint16_t& slot, std::uint32_t& slot_gen) const noexcept {
    // Another runtime's queue, or one closed by its owner: refused. (Checked
    // again inside the start's guard, by the slot's generation.)
    if (q->rt_ != owner || q->impl_->destroyed()) return false;
    slot = q->impl_->slot();
    slot_gen = q->impl_->slot_gen();
    return true;
}

namespace {
/// The shard a start goes to: StartOptions::shard, or by default the
/// calling thread's own shard.
std::uint32_t pick_shard(const RuntimeCore& core, const StartOptions& o) noexcept {
    // Default placement: the calling thread's own shard, assigned
    // round-robin on its first start (measured against CPU-local,
    // round-robin-per-call and single-shard placement in
    // bench/shard_choice.cpp: see README).
    // (Initial-exec and constant-initialised: a plain load in the shared
    // library too, no __tls_get_addr and no guard; 0 = not assigned yet.)
    [[gnu::tls_model("initial-exec")]] constinit thread_local std::uint32_t t_thread_seq1 = 0;
    std::uint32_t seq1 = t_thread_seq1;
    if (seq1 == 0) [[unlikely]]
        t_thread_seq1 = seq1 = next_thread_seq.fetch_add(1, std::memory_order_relaxed) + 1;
    const auto nshards = static_cast<std::uint32_t>(core.shards.size());
    return o.shard >= 0 ? static_cast<std::uint32_t>(o.shard) % nshards : (seq1 - 1) % nshards;
}
}  // namespace

errc plan_start(const RuntimeCore& core, const StartOptions& o, const detail::Callback& cb, Readings& now,
                StartPlan& plan) noexcept {
    if (!cb) {
        set_error_detail(errc::invalid_argument, "the callback is empty");
        return errc::invalid_argument;
    }
    if (static_cast<std::uint32_t>(o.policy) > static_cast<std::uint32_t>(PeriodPolicy::burst)) {
        set_error_detail(errc::invalid_argument, "policy %u is not a PeriodPolicy (0 .. 2)",
                         static_cast<unsigned>(o.policy));
        return errc::invalid_argument;
    }
    if (o.leeway < Duration::zero() || o.leeway > kMaxDelay) {
        set_error_detail(errc::invalid_argument, "leeway %lld ns is %s kMaxDelay (%lld ns)",
                         static_cast<long long>(o.leeway.count()),
                         o.leeway < Duration::zero() ? "negative: not within 0 .." : "above",
                         static_cast<long long>(kMaxDelay.count()));
        return errc::invalid_argument;
    }
    plan.queue_slot = 0;
    plan.queue_gen = 0;
    if (o.queue != nullptr && !core.queue_slot(o.queue, plan.queue_slot, plan.queue_gen)) {
        set_error_detail(errc::invalid_argument, "the queue belongs to another runtime or was closed");
        return errc::invalid_argument;
    }
    if (const errc bad = start_args(core, o, now, plan.tick, plan.period, plan.own_deadline); bad != errc{}) return bad;
    plan.shard = pick_shard(core, o);
    return errc{};
}

// StartGuard (timer_ops.hpp): register as an in-flight start, then check
// for shutdown (see RuntimeCore). Nothing runs user code while registered:
// a failed start's callable is destroyed after leaving (a release hook that
// waits for a thread that is shutting down would deadlock here).

void take_back(RuntimeCore& core, Shard& shard, Record& r) noexcept {
    TimerState::unpublish(r);
    FreeChain freed(shard.table());
    // (A record that goes into quarantine wakes a shard in a long sleep:
    // only the shard reclaims it.)
    shard.recycle_ended(r, freed);
    if (core.max_timers != 0) core.live.fetch_sub(1, std::memory_order_relaxed);
}

bool take_back_published(RuntimeCore& core, Shard& shard, Record& r, std::uint32_t gen,
                         detail::Callback& cb) noexcept {
    if (!TimerState::try_unpublish(r, gen)) return false;  // a group stop ended it
    r.return_callable(cb);
    take_back(core, shard, r);
    return true;
}

namespace {
/// fill_record()'s publish of a boot-time or wall-clock timer: its deadline
/// on its clock and the word's tick are set under its deadline lock
/// (OwnDeadline). It is indexed for clock steps first, then its tick is
/// computed from clock readings taken after that: a re-clock pass that does
/// not find it in the index read its clock offsets before these readings
/// (it moved nothing this timer depends on); one that finds it waits for
/// the lock (looks again next pass) and re-files it from its exact deadline
/// (issue 20, race 7). `tick` gets the word's tick. False: no memory for
/// the index entry (nothing published). Out of line: only such timers pay.
[[gnu::noinline]] bool publish_clocked(RuntimeCore& core, Shard& shard, Record& r, Extra& x, std::uint32_t index,
                                       std::uint32_t gen, const StartOptions& o, const StartPlan& plan,
                                       tick_t& tick) noexcept {
    const std::uint64_t held = OwnDeadline::take_new(x, gen);
    OwnDeadline::store(x, held, plan.own_deadline);
    if (!core.clocks.manual()) {
        try {
            shard.clocked().add(static_cast<std::uint64_t>(o.clock), gen, index);
        } catch (...) {
            OwnDeadline::unlock(x, held);
            return false;  // (a stale index entry at most: dropped when seen)
        }
        Readings fresh(core.clocks);
        const std::int64_t mono = fresh.mono();
        const std::int64_t offset = fresh.now(static_cast<ClockId>(o.clock)) - mono;
        tick = std::min(core.clock.deadline_tick(plan.own_deadline - offset), Ctl::kMaxDeadline);
    }
    TimerState::publish(r, gen, tick);
    OwnDeadline::unlock(x, held);
    return true;
}
}  // namespace

errc fill_record(RuntimeCore& core, Shard& shard, Record& r, std::uint32_t index, std::uint32_t gen,
                 const StartOptions& o, const StartPlan& plan, detail::Callback& cb, tick_t& file_at) noexcept {
    // What the common timer (one-shot, no leeway, no group) does not
    // have goes to the side record (timer_record.hpp, Extra). Every field
    // below is written by this start, the record's owner, while its word is
    // FREE (the owner table, timer_state.hpp), after the release fence that
    // orders them after the generation's move (HandleTable::recycle): a
    // query holding a stale id that reads one of them sees the new
    // generation when it checks again, and discards what it read.
    std::atomic_thread_fence(std::memory_order_release);
    const std::uint64_t leeway_ticks =
        o.leeway > Duration::zero() ? static_cast<std::uint64_t>(o.leeway.count()) / core.clock.resolution_ns() : 0;
    file_at = plan.tick;
    const bool clocked = o.clock != TimerClock::monotonic;
    Extra* x = nullptr;
    std::uint16_t f = 0;  // the record's flags
    if (plan.period != 0 || leeway_ticks != 0 || o.group != 0 || o.leeway > Duration::zero() || clocked ||
        core.clocks.manual()) {
        x = shard.table().make_extra(index);
        if (x == nullptr) return errc::no_memory;  // (the callable is still in `cb`)
        owner::unpublished(r, gen, "Extra (start)");
        x->runs.store(0, std::memory_order_relaxed);
        x->missed.store(0, std::memory_order_relaxed);
        x->owed.store(Extra::owed_tag(gen), std::memory_order_relaxed);
        x->group.store(o.group, std::memory_order_relaxed);
        x->leeway_ns.store(static_cast<std::uint64_t>(o.leeway.count()), std::memory_order_relaxed);
        x->seq.store(core.clocks.manual() ? core.start_seq.fetch_add(1, std::memory_order_relaxed) : 0,
                     std::memory_order_relaxed);
        f |= Record::kHasExtra;
        f |= static_cast<std::uint16_t>(static_cast<std::uint16_t>(o.clock) << Record::kClockShift);
        if (plan.period != 0) {
            f |= Record::kPeriodic;
            f |= static_cast<std::uint16_t>(static_cast<std::uint16_t>(o.policy) << Record::kPolicyShift);
        }
        if (leeway_ticks != 0) f |= Record::kHasLeeway;
    }
    if (plan.period != 0 || plan.queue_slot != 0) {
        owner::unpublished(r, gen, "the period word");
        if (!shard.table().set_period_word(index, PeriodWord::make(plan.period, plan.queue_slot)))
            return errc::no_memory;
        if (plan.queue_slot != 0) f |= Record::kHasQueue;
    }
    if (f != 0) r.set_flags(f);
    // (No memory for the box of a callable the registry of kinds has no
    // room for: the callable is still in `cb`.)
    if (!r.store_callable(cb)) return errc::no_memory;
    tick_t tick = plan.tick;
    if (clocked) [[unlikely]] {
        if (!publish_clocked(core, shard, r, *x, index, gen, o, plan, tick)) {
            r.return_callable(cb);
            return errc::no_memory;
        }
    } else {
        TimerState::publish(r, gen, tick);
    }
    file_at = leeway_ticks != 0 ? coalesce(tick, leeway_ticks) : tick;
    if (o.group != 0) {
        // Indexed before start() returns: a group stop that begins after
        // it finds the timer (group_index.hpp).
        try {
            shard.groups().add(o.group, gen, index);
        } catch (...) {
            // No memory for the group's entry.
            if (!TimerState::try_unpublish(r, gen)) return errc{};  // (cannot happen: nobody found it)
            r.return_callable(cb);
            return errc::no_memory;
        }
    }
    if (o.group != 0 || (clocked && !core.clocks.manual())) test_hooks::window(&r, 'i');
    return errc{};
}
}  // namespace rt

namespace rt {
namespace {
/// The common timer: a one-shot on the monotonic clock (from a delay or at
/// a deadline), with no queue, leeway, group or period, on a runtime with
/// the machine's clock. Its start (start_plain) skips the planning the
/// options need: it checks what it uses and reads the monotonic clock once.
/// Anything else -- and every bad value -- takes plan_start(), which also
/// words the errors.
bool is_plain(const RuntimeCore& core, const StartOptions& o) noexcept {
    return o.period == Duration::zero() && o.queue == nullptr &&
           o.leeway == Duration::zero() && o.group == 0 && o.clock == TimerClock::monotonic && o.reserved == 0 &&
           o.policy == PeriodPolicy::skip && !core.clocks.manual();
}

/// Counts a starting timer against max_timers: false (nothing counted) if
/// max_timers are alive. uncount_live() undoes it.
bool count_live(RuntimeCore& core) noexcept {
    if (core.max_timers != 0 &&
        core.live.fetch_add(1, std::memory_order_relaxed) >= static_cast<std::int64_t>(core.max_timers)) {
        core.live.fetch_sub(1, std::memory_order_relaxed);
        return false;
    }
    return true;
}
void uncount_live(RuntimeCore& core) noexcept {
    if (core.max_timers != 0) core.live.fetch_sub(1, std::memory_order_relaxed);
}

/// A StartGuard'ed start's record: max_timers counted, then a record of
/// `shard` taken (errc{}, `r` set), or limit_reached / no_memory with
/// nothing taken.
errc take_record(RuntimeCore& core, Shard& shard, Record*& r, std::uint32_t& index, std::uint32_t& gen) noexcept {
    if (!count_live(core)) return errc::limit_reached;
    r = shard.table().allocate(index, gen);
    if (r == nullptr) {
        uncount_live(core);
        return errc::no_memory;
    }
    return errc{};
}

/// Files a filled, published record: its Insert to the shard (applied at
/// once under the driver token when it is free). errc{} and `id`, or
/// no_memory with the timer taken back whole (its callable back in `cb`).
errc file_started(RuntimeCore& core, Shard& shard, Record& r, std::uint32_t shard_index, std::uint32_t index,
                  std::uint32_t gen, tick_t file_at, detail::Callback& cb, std::uint64_t& id) noexcept {
    if (!shard.try_post_insert(Msg::make(MsgType::Insert, gen, index), file_at)) {
        // No memory to queue the Insert: nobody knows this id yet, so the
        // timer is taken back whole (its callable returns to `cb`).
        // (Unless a group stop found it in its group and ended it: then
        // the start succeeded, and the timer was stopped at once.)
        if (take_back_published(core, shard, r, gen, cb)) return errc::no_memory;
    }
    core.counters.add(kStarted);
    id = Id::make(gen, shard_index, index);
    return errc{};
}

/// start() of any timer (and of a plain one with a bad value: it words
/// the error).
errc start_general(RuntimeCore& core, const StartOptions& o, detail::Callback& cb, std::uint64_t& id) noexcept {
    if (core.forked()) return errc::forked;
    Readings now(core.clocks);
    StartPlan plan;
    if (const errc bad = plan_start(core, o, cb, now, plan); bad != errc{}) return bad;

    const StartGuard guard(core);
    if (guard.shutting_down()) return errc::shutting_down;
    // Bound to a queue whose destroy began: refused (inside the guard, so
    // destroy_queue's sweep finds every bound start that gets past here).
    if (plan.queue_slot != 0 && !queue_still_bindable(core, plan)) [[unlikely]]
        return errc::invalid_argument;
    Shard& shard = core.shard(plan.shard);
    Record* r;
    std::uint32_t index, gen;
    if (const errc e = take_record(core, shard, r, index, gen); e != errc{}) return e;
    // A start that fails after taking the record gives it back whole
    // (take_back(); the callable is back in `cb`).
    tick_t file_at;
    if (fill_record(core, shard, *r, index, gen, o, plan, cb, file_at) != errc{}) {
        take_back(core, shard, *r);
        return errc::no_memory;
    }
    return file_started(core, shard, *r, plan.shard, index, gen, file_at, cb, id);
}

/// start() of a plain timer (is_plain): the general path below without
/// plan_start()'s option checks or fill_record()'s side records.
errc start_plain(RuntimeCore& core, const StartOptions& o, detail::Callback& cb, std::uint64_t& id) noexcept {
    if (core.forked()) [[unlikely]]
        return errc::forked;
    std::int64_t due;
    bool ok = static_cast<bool>(cb);
    if (o.deadline == TimePoint{}) {
        ok = ok && o.delay >= Duration::zero() && o.delay <= kMaxDelay;
        due = core.clocks.mono_upper() + o.delay.count();  // the start's one clock read: an upper bound (clock.hpp)
    } else {
        // An absolute deadline needs no reading: CLOCK_MONOTONIC is never
        // negative, so a deadline within kMaxDelay of 0 is within kMaxDelay
        // of now. Only a later one is checked against a reading.
        due = std::chrono::duration_cast<Duration>(o.deadline.time_since_epoch()).count();
        if (due > kMaxDelay.count()) {
            const std::int64_t now = core.clocks.mono();
            ok = ok && (due <= now || due - now <= kMaxDelay.count());
        }
    }
    const tick_t tick = core.clock.deadline_tick(due);
    if (!ok || tick > Ctl::kMaxDeadline) [[unlikely]]
        return start_general(core, o, cb, id);  // (words the error)
    const std::uint32_t si = pick_shard(core, o);
    const StartGuard guard(core);
    if (guard.shutting_down()) return errc::shutting_down;
    Shard& shard = core.shard(si);
    // With the shard's driver token free (its driver parked), a spare
    // record (one the token holders' stops freed) and a callable stored
    // without a heap allocation, the whole start is made on this core
    // under the token: the spare is filled and filed at once
    // (Shard::take_token_and_record). Otherwise: a record from the free
    // stack, then the Insert (applied under the token if it is free).
    const std::uint16_t kind = Record::kind_of(cb);
    Record* r = nullptr;
    std::uint32_t index, gen;
    if (!count_live(core)) return errc::limit_reached;
    if (kind != CallableKinds::kNone) r = shard.take_token_and_record(index, gen);
    const bool held = r != nullptr;
    if (r == nullptr) r = shard.table().allocate(index, gen);
    if (r == nullptr) [[unlikely]] {
        uncount_live(core);
        return errc::no_memory;
    }
    // The record's fields are written by this start, its owner, while its
    // word is FREE, after the fence that orders them after the generation's
    // move (as in fill_record()).
    std::atomic_thread_fence(std::memory_order_release);
    if (!r->store_callable(cb, kind)) [[unlikely]] {  // (never when held: no box to allocate)
        take_back(core, shard, *r);
        return errc::no_memory;
    }
    TimerState::publish(*r, gen, tick);
    if (held) {
        shard.file_with_token(Msg::make(MsgType::Insert, gen, index), tick);
        core.counters.add(kStarted);
        id = Id::make(gen, si, index);
        return errc{};
    }
    return file_started(core, shard, *r, si, index, gen, tick, cb, id);
}

/// The error detail of a failed start (those plan_start() did not word)
/// and the release of its callable (cold).
[[gnu::noinline, gnu::cold]] void start_failed(RuntimeCore& core, errc e, detail::Callback& cb,
                                                std::error_code& ec) noexcept {
    if (e == errc::limit_reached)
        set_error_detail(e, "max_timers (%zu) timers are alive", core.max_timers);
    else if (e == errc::shutting_down)
        set_error_detail(e, "the runtime \"%s\" is shut down or shutting down", core.config.name.c_str());
    else if (e == errc::forked)
        set_error_detail(e, "the runtime \"%s\" was created in the parent of this fork() child",
                         core.config.name.c_str());
    else if (e == errc::no_memory)
        set_error_detail(e, "no memory for a timer record or its start request");
    RuntimeCore::release_unstarted(cb);  // the release hook runs even on failure, outside the guard
    ec = make_error_code(e);
}

/// std::system_category(), looked up once (error_code::clear() calls it
/// through libstdc++'s PLT on every start otherwise).
const std::error_category& g_system_category = std::system_category();
}  // namespace
}  // namespace rt

Timer Runtime::start_sized(const StartOptions* opts, std::size_t opts_size, detail::Callback&& cb,
                           std::error_code& ec) noexcept {
    if (opts_size != sizeof(StartOptions)) [[unlikely]] {
        // A caller built against another 1.x header (the hot path is the
        // single compare above).
        StartOptions ours;
        if (rt::read_start_options(opts, opts_size, ours))
            return start_sized(&ours, sizeof(StartOptions), std::move(cb), ec);
        rt::RuntimeCore::release_unstarted(cb);
        rt::set_error_detail(errc::invalid_argument, "StartOptions of %zu bytes: not a size of a released 1.x layout",
                             opts_size);
        ec = make_error_code(errc::invalid_argument);
        return Timer{};
    }
    rt::RuntimeCore& core = *core_;
    std::uint64_t id = 0;
    errc e;
    if (opts == nullptr) [[unlikely]]
        e = core.forked() ? errc::forked : errc::invalid_argument;
    else if (rt::is_plain(core, *opts)) [[likely]]
        e = rt::start_plain(core, *opts, cb, id);
    else
        e = rt::start_general(core, *opts, cb, id);
    if (e != errc{}) [[unlikely]] {
        rt::start_failed(core, e, cb, ec);
        return Timer{};
    }
    ec.assign(0, rt::g_system_category);
    return Timer(this, id);
}

// ---- stop ------------------------------------------------------------------
namespace rt {
/// A stop or a reset of a timer bound to a delivery queue takes the queue's
/// transition mutex around its CAS (delivery_queue.hpp: every way out of
/// DISPATCHED of a bound timer is taken under it), inside a section (the
/// queue cannot go away). The queue is found BEFORE the CAS, from the
/// record's flags and slot: they are the id's timer's if the CAS then
/// succeeds on its generation (a record is recycled -- generation + 1 --
/// before a new occupant writes them), so a thread that no longer owns the
/// record never reads them (issue 20: undue() after a reset). A timer not
/// bound to a queue costs one flags test.
class BoundTransition {
public:
    BoundTransition(const RuntimeCore& core, const Record& r, std::uint32_t gen) noexcept {
        if ((r.flags() & Record::kHasQueue) == 0) [[likely]]
            return;
        section_.emplace(core.queues);
        if (r.gen() != gen) return;  // stale id: its CAS fails; no queue to tell
        q_ = core.queues.get(HandleTable::queue_slot_of(r));
        if (q_ == nullptr) return;
        test_hooks::window(&r, 'q');
        lock_ = std::unique_lock<std::mutex>(q_->transition_mutex());
    }
    /// The CAS took the timer out of DISPATCHED: its item is no longer live.
    void left_dispatched(const Record& r) noexcept {
        if (q_ == nullptr) return;
        TW_OWNER_ASSERT(lock_.owns_lock());  // the CAS out of DISPATCHED was made under q's mutex
        test_hooks::window(&r, 'u');
        q_->undue_locked(r);
    }

private:
    std::optional<QueueTable::Section> section_;
    DeliveryQueue* q_ = nullptr;
    std::unique_lock<std::mutex> lock_;
};

CancelOutcome try_stop(RuntimeCore& core, Record& r, std::uint32_t gen, HazardSlot* slot) noexcept {
    BoundTransition bound(core, r, gen);
    State from = State::Free;
    CancelOutcome out;
    {
        HazardScope acting_on(&r, slot);
        out = TimerState::try_cancel(r, gen, &from);
    }
    if (out == CancelOutcome::Cancelled && from == State::Dispatched) bound.left_dispatched(r);
    return out;
}

void settle_cancelled(RuntimeCore& core, Record& r, bool wake) noexcept {
    core.release_hook(r);
    TimerState::finish_cancel(r, wake);
}
}  // namespace rt

namespace {
/// After a successful try_cancel: release (the hook), CANCELLED, and ask the
/// shard to unlink and recycle the record.
void stop_cancelled(rt::RuntimeCore& core, rt::Shard& shard, Record& r, std::uint32_t gen) noexcept {
    rt::settle_cancelled(core, r);
    core.count_released(1);
    core.counters.add(rt::kStopped);
    shard.post_cancel(Msg::make(MsgType::Cancel, gen, rt::HandleTable::index_of(&r)));
}
}  // namespace

bool Runtime::stop(std::uint64_t id) noexcept {
    rt::RuntimeCore& core = *core_;
    if (core.forked()) return false;
    rt::Shard* shard = nullptr;
    Record* r = core.lookup(id, &shard);
    if (r == nullptr) return false;
    switch (rt::try_stop(core, *r, Id::gen(id), rt::hazard_detail::this_thread_slot())) {
        case rt::CancelOutcome::Cancelled: stop_cancelled(core, *shard, *r, Id::gen(id)); return true;
        case rt::CancelOutcome::StoppedDuringRun: core.counters.add(rt::kStopped); return true;
        default: return false;
    }
}

bool Runtime::stop_sync(std::uint64_t id) noexcept {
    rt::RuntimeCore& core = *core_;
    if (core.forked()) return false;
    rt::Shard* shard = nullptr;
    Record* r = core.lookup(id, &shard);
    if (r == nullptr) return false;
    const std::uint32_t gen = Id::gen(id);
    const bool own_callback = rt::inside_callback_of(r);
    bool stopped = false;
    for (;;) {
        switch (rt::try_stop(core, *r, gen, rt::hazard_detail::this_thread_slot())) {
            case rt::CancelOutcome::Cancelled:
                stop_cancelled(core, *shard, *r, gen);  // no run was in progress; the hook has returned
                return true;
            case rt::CancelOutcome::StoppedDuringRun:
                core.counters.add(rt::kStopped);
                stopped = true;
                break;
            default: break;
        }
        if (own_callback) return stopped;  // never wait for ourselves
        // Wait while a run, or a release hook, of this timer is in progress
        // (a waiter holds no hazard: it only loads). Then look again: the run
        // may have re-armed the timer.
        const rt::Word c = TimerState::wait_while_busy(*r, gen);
        if (r->gen() != gen) return stopped;  // done and recycled
        const State s = Ctl::state(c);
        if (s != State::Pending && s != State::Dispatched) return stopped;
    }
}

// ---- reset -----------------------------------------------------------------
bool Runtime::reset(std::uint64_t id, Duration delay) {
    std::error_code ec;
    const bool ok = reset(id, delay, ec);
    if (ec && ec != make_error_code(errc::shutting_down)) throw Error(ec);
    return ok;
}

namespace rt {
bool reset_to(RuntimeCore& core, std::uint64_t id, std::int64_t value, bool absolute, Readings& readings, Outbox* box,
              std::error_code& ec) noexcept {
    const std::uint32_t s = Id::shard(id);
    Record* r = id != 0 && s < core.shards.size() ? core.shards[s]->table().find(Id::index(id)) : nullptr;
    if (r == nullptr) {
        if (core.shutting_down.load(std::memory_order_relaxed)) ec = make_error_code(errc::shutting_down);
        return false;
    }
    return reset_record(core, *core.shards[s], *r, id, value, absolute, readings, box, hazard_detail::this_thread_slot(),
                        ec);
}

bool reset_record(RuntimeCore& core, Shard& shard, Record& r, std::uint64_t id, std::int64_t value, bool absolute,
                  Readings& readings, Outbox* box, HazardSlot* slot, std::error_code& ec) noexcept {
    if (core.shutting_down.load(std::memory_order_relaxed)) {
        ec = make_error_code(errc::shutting_down);
        return false;
    }
    if (r.gen() != Id::gen(id)) return false;
    // The timer's clock (its flags are valid for our generation if the CAS
    // below succeeds on it; a recycled record's answer is never used).
    const rt::ClockId cid = r.clock();
    // A boot-time or wall-clock timer: its deadline on its clock and the
    // word's tick change together, under its deadline lock (OwnDeadline,
    // timer_state.hpp), taken for this id's generation -- a stale id never
    // takes it, so never writes another timer's deadline (issue 20, race 4)
    // -- and the clocks are read inside it, so that a clock step the shard
    // re-files its timers for either came before the reading or finds the
    // lock held and is applied again after it (race 7 for resets).
    rt::Extra* own = cid != rt::ClockId::Monotonic && r.has_extra() ? &shard.table().extra(Id::index(id)) : nullptr;
    std::uint64_t held = 0;
    rt::Readings fresh(core.clocks);
    // Hook 'O' (test_hooks.hpp): after the generation check above, before
    // the lock checks it again (issue 31: a stale reset parked here while
    // the slot is reused must not take the next timer's lock).
    if (own != nullptr) test_hooks::window(&r, 'O');
    if (own != nullptr && !rt::OwnDeadline::lock(r, *own, Id::gen(id), held)) return false;  // stale
    struct Unlock {
        rt::Extra* x;
        std::uint64_t held;
        ~Unlock() {
            if (x != nullptr) rt::OwnDeadline::unlock(*x, held);
        }
    } unlock_own{own, held};  // (on every return until it is let go below)
    rt::Readings& at = own != nullptr ? fresh : readings;
    // "now + delay" on the monotonic clock: the upper bound (clock.hpp).
    const bool upper = !absolute && cid == rt::ClockId::Monotonic;
    const std::int64_t mono = upper ? at.mono_upper() : at.mono();
    const std::int64_t now = upper ? mono : at.now(cid);
    if (absolute && value > now && value - now > kMaxDelay.count()) {
        set_error_detail(errc::invalid_argument,
                         "deadline %lld ns is %lld ns after the timer's clock reads now (%lld): above kMaxDelay (%lld ns)",
                         static_cast<long long>(value), static_cast<long long>(value - now), static_cast<long long>(now),
                         static_cast<long long>(kMaxDelay.count()));
        ec = make_error_code(errc::invalid_argument);
        return false;
    }
    const std::int64_t deadline_ns = absolute ? value : now + value;
    const tick_t tick = at.deadline_tick(core.clock, deadline_ns - (now - mono));
    if (tick > Ctl::kMaxDeadline) {
        set_error_detail(errc::invalid_argument, "deadline %lld ns is beyond the wheel's range",
                         static_cast<long long>(deadline_ns));
        ec = make_error_code(errc::invalid_argument);
        return false;
    }
    rt::ResetStep step;
    {
        BoundTransition bound(core, r, Id::gen(id));  // as in try_stop()
        {
            HazardScope acting_on(&r, slot);
            step = TimerState::reset(r, Id::gen(id), tick, rt::t_current.rec == &r);
        }
        if (own != nullptr) {
            // The word took the tick: its deadline with it. Let go before
            // telling the queue (the queue's mutex, taken by `bound` above,
            // is the one lock held around a deadline lock: no thread waits
            // for a deadline lock while it holds a queue's mutex).
            if (step.rearmed) rt::OwnDeadline::store(*own, held, deadline_ns);
            rt::OwnDeadline::unlock(*own, held);
            unlock_own.x = nullptr;
        }
        if (step.rearmed && step.from == State::Dispatched) bound.left_dispatched(r);
        if (step.rearmed && (r.flags() & Record::kHasExtra) != 0 && r.policy() == rt::Policy::Burst) {
            // A new phase: nothing owed. Only this timer's count (the tag is
            // its generation): the record may have been recycled since the
            // CAS. Still under a bound timer's queue mutex (`bound`): a queue
            // run that hands owed runs back to its queue (requeue_owed, under
            // that mutex) sees the word and the count of one side of this
            // reset, never the new word with the old count (issue 31).
            rt::Extra& x = shard.table().extra(Id::index(id));
            const std::uint64_t tag = rt::Extra::owed_tag(Id::gen(id));
            std::uint64_t o = x.owed.load(std::memory_order_relaxed);
            while ((o & ~rt::Extra::kOwedCountMask) == tag && (o & rt::Extra::kOwedCountMask) != 0 &&
                   !x.owed.compare_exchange_weak(o, tag, std::memory_order_relaxed)) {
            }
        }
    }
    if (!step.rearmed) return false;
    const std::uint16_t flags = r.flags();
    tick_t file_at = tick;
    if ((flags & Record::kHasExtra) != 0) {
        // Valid for our generation: the CAS above succeeded on it, and the
        // record cannot be recycled before the timer ends (a reader of a
        // recycled one would at worst move nothing: the word checks again).
        rt::Extra& x = shard.table().extra(Id::index(id));
        if ((flags & Record::kHasLeeway) != 0) file_at = rt::coalesce(tick, x.leeway_ticks(core.clock.resolution_ns()));
    }
    if (step.post != rt::Post::None) {
        const std::uint64_t msg =
            Msg::make(step.post == rt::Post::Insert ? MsgType::Insert : MsgType::Refile, Id::gen(id), Id::index(id));
        if (box != nullptr)
            box->add(Id::shard(id), msg, file_at);
        else
            shard.post_and_wake(msg, file_at);
    }
    return true;
}
}  // namespace rt

namespace {
/// reset() and reset_at() of one timer: reset_to() against fresh readings,
/// counted.
bool reset_one(rt::RuntimeCore& core, std::uint64_t id, std::int64_t value, bool absolute, std::error_code& ec) noexcept {
    rt::Readings now(core.clocks);
    if (!rt::reset_to(core, id, value, absolute, now, nullptr, ec)) return false;
    core.counters.add(rt::kReset);
    return true;
}
}  // namespace

bool Runtime::reset(std::uint64_t id, Duration delay, std::error_code& ec) noexcept {
    rt::RuntimeCore& core = *core_;
    ec.clear();
    if (core.forked()) {
        rt::set_forked(ec);
        return false;
    }
    if (delay < Duration::zero() || delay > kMaxDelay) {
        rt::set_error_detail(errc::invalid_argument, "delay %lld ns is %s kMaxDelay (%lld ns)",
                             static_cast<long long>(delay.count()),
                             delay < Duration::zero() ? "negative: not within 0 .." : "above",
                             static_cast<long long>(kMaxDelay.count()));
        ec = make_error_code(errc::invalid_argument);
        return false;
    }
    return reset_one(core, id, delay.count(), false, ec);
}

bool Runtime::reset_at(std::uint64_t id, TimePoint deadline, std::error_code& ec) noexcept {
    rt::RuntimeCore& core = *core_;
    ec.clear();
    if (core.forked()) {
        rt::set_forked(ec);
        return false;
    }
    return reset_one(core, id, std::chrono::duration_cast<Duration>(deadline.time_since_epoch()).count(), true, ec);
}

// ---- a manual clock ------------------------------------------------------------
std::size_t Runtime::advance(Duration d, std::error_code& ec) noexcept {
    rt::RuntimeCore& core = *core_;
    ec.clear();
    if (core.forked()) {
        rt::set_forked(ec);
        return 0;
    }
    if (!core.clocks.manual()) {
        rt::set_error_detail(errc::invalid_argument,
                             "advance on the runtime \"%s\", which has no manual clock (Config::manual_clock, "
                             "TW_CONFIG_MANUAL_CLOCK)",
                             core.config.name.c_str());
        ec = make_error_code(errc::invalid_argument);
        return 0;
    }
    if (d < Duration::zero() || d > kMaxDelay) {
        rt::set_error_detail(errc::invalid_argument, "advance of %lld ns is %s kMaxDelay (%lld ns)",
                             static_cast<long long>(d.count()),
                             d < Duration::zero() ? "negative: not within 0 .." : "above",
                             static_cast<long long>(kMaxDelay.count()));
        ec = make_error_code(errc::invalid_argument);
        return 0;
    }
    if (rt::inside_callback_of(&core)) {
        rt::set_error_detail(errc::would_deadlock,
                             "advance called from inside one of the runtime's callbacks (it runs them itself)");
        ec = make_error_code(errc::would_deadlock);
        return 0;
    }
    const std::size_t ran = core.advance(d.count());
    if (ran == rt::RuntimeCore::kAdvanceShutDown) {
        rt::set_error_detail(errc::shutting_down, "the runtime \"%s\" is shut down or shutting down",
                             core.config.name.c_str());
        ec = make_error_code(errc::shutting_down);
        return 0;
    }
    return ran;
}

Duration Runtime::now(TimerClock c) const noexcept {
    if (static_cast<std::uint32_t>(c) >= rt::kClocks) return Duration::zero();
    return Duration(core_->clocks.now(static_cast<rt::ClockId>(c)));
}

bool Runtime::is_manual_clock() const noexcept { return core_->clocks.manual(); }

// ---- groups ------------------------------------------------------------------
std::size_t Runtime::stop_group(std::uint64_t group, bool sync, std::error_code& ec) noexcept {
    rt::RuntimeCore& core = *core_;
    ec.clear();
    if (core.forked()) {
        rt::set_forked(ec);
        return 0;
    }
    if (group == 0) {
        rt::set_error_detail(errc::invalid_argument, "group 0 names no group (groups are 1 .. 2^64 - 1)");
        ec = make_error_code(errc::invalid_argument);
        return 0;
    }
    // Each shard's list is claimed, not just taken: a concurrent group stop
    // of the same group stops what this one took too, so that neither
    // returns while a timer of the list it saw is still pending
    // (group_index.hpp).
    std::size_t stopped = 0;
    const bool nested = rt::t_current.rec != nullptr || rt::t_release_depth != 0;
    for (std::uint32_t si = 0; si < core.shards.size(); ++si) {
        rt::GroupIndex::Claim claim;
        core.shard(si).groups().claim(group, claim);
        const auto stop_entry = [&](std::uint64_t e) {
            const std::uint64_t id = Id::make(rt::GroupIndex::gen_of(e), si, rt::GroupIndex::index_of(e));
            if (sync ? stop_sync(id) : stop(id)) ++stopped;
        };
        for (const std::uint64_t e : claim.mine) stop_entry(e);
        for (const std::uint64_t e : claim.others) stop_entry(e);
        if (!claim.others_complete && !nested) claim.wait_earlier();
    }
    return stopped;
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
    const rt::Word c = TimerState::load(*r);
    if (r->gen() != gen || Ctl::gen10(c) != (gen & Ctl::kGenMask)) return false;
    const State s = Ctl::state(c);
    const std::uint16_t flags = r->flags();
    const std::uint64_t period = (flags & Record::kPeriodic) != 0 ? rt::HandleTable::period_ticks_of(*r) : 0;
    TimerInfo info;
    info.shard = static_cast<int>(si);
    std::uint64_t runs = 0, missed = 0;
    const bool clocked = (flags & Record::kClockMask) != 0;
    std::int64_t own_deadline = 0;  // a boot-time or wall-clock timer: its exact deadline on its clock
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
        st.slots += s->table().high_water();
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
    write_stats(*out, std::move(st), out_size);
}

unsigned Runtime::shard_count() const noexcept { return static_cast<unsigned>(core_->shards.size()); }
unsigned Runtime::worker_count() const noexcept { return core_->dispatcher->concurrency(); }
Duration Runtime::resolution() const noexcept { return core_->config.resolution; }

}  // namespace tickwheel
