// The C++ API: Runtime's public functions, and the callers' half of the timer
// state machine (timer_record.hpp): start, stop, stop_sync, reset, shutdown.
#include "tickwheel/runtime.hpp"

#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>

#include "runtime/runtime_core.hpp"

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
        }
        return "unknown tickwheel error";
    }
};
}  // namespace

const std::error_category& error_category() noexcept {
    static const Category c;
    return c;
}
std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }

namespace rt {

namespace {
unsigned online_cpus() noexcept {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? static_cast<unsigned>(n) : 1u;
}

Config validated(Config c) {
    using namespace std::chrono;
    if (c.shards == 0) c.shards = online_cpus();
    if (c.workers == 0) c.workers = online_cpus();
    if (c.shards > Id::kMaxShards || c.workers > 4096 || c.resolution < microseconds(1) ||
        c.resolution > seconds(1))
        throw Error(errc::invalid_argument);
    return c;
}
}  // namespace

RuntimeCore::RuntimeCore(Runtime* rt, Config cfg)
    : owner(rt),
      config(validated(std::move(cfg))),
      clock(monotonic_ns(), static_cast<std::uint64_t>(config.resolution.count())),
      max_timers(config.max_timers) {
    dispatcher = std::make_unique<Dispatcher>(*this, config.workers);
    shards.reserve(config.shards);
    for (unsigned i = 0; i < config.shards; ++i) shards.push_back(std::make_unique<Shard>(*this, i));
    const unsigned cpus = online_cpus();
    for (unsigned i = 0; i < config.shards; ++i)
        shards[i]->start(config.pin_shards ? static_cast<int>(i % cpus) : -1);
}

RuntimeCore::~RuntimeCore() {
    for (auto& s : shards) s->stop_and_join();
    dispatcher->wait_idle();
}

Record* RuntimeCore::lookup(std::uint64_t id, Shard** shard_out) noexcept {
    const std::uint32_t s = Id::shard(id);
    if (id == 0 || s >= shards.size()) return nullptr;
    Record* r = shards[s]->table().find(Id::index(id));
    if (r == nullptr || r->gen() != Id::gen(id)) return nullptr;
    *shard_out = shards[s].get();
    return r;
}

}  // namespace rt

using rt::Ctl;
using rt::Id;
using rt::Msg;
using rt::MsgType;
using rt::Record;
using rt::State;

struct Runtime::Impl {
    Impl(Runtime* rt, Config c) : core(rt, std::move(c)) {}
    rt::RuntimeCore core;
};

Runtime::Runtime(Config config) : impl_(std::make_unique<Impl>(this, std::move(config))) {}

Runtime::~Runtime() {
    if (!impl_) return;
    if (rt::t_current.core == &impl_->core) {
        std::fputs("tickwheel: a Runtime was destroyed from inside one of its own callbacks "
                   "(use shutdown(), which reports would_deadlock)\n",
                   stderr);
        std::terminate();
    }
    std::error_code ec;
    shutdown(ec);
}

// ---- start -----------------------------------------------------------------
namespace {
std::atomic<std::uint32_t> next_thread_seq{0};
}  // namespace

Timer Runtime::start(const StartOptions& o, detail::Callback&& cb, std::error_code& ec) noexcept {
    rt::RuntimeCore& core = impl_->core;
    ec.clear();
    auto fail = [&](errc e) {
        cb.reset();  // the callable's destructor is the release hook: it runs even on failure
        ec = make_error_code(e);
        return Timer{};
    };
    if (!cb) return fail(errc::invalid_argument);
    const std::int64_t now = rt::monotonic_ns();
    std::int64_t deadline;
    if (o.deadline != TimePoint{}) {
        deadline = std::chrono::duration_cast<Duration>(o.deadline.time_since_epoch()).count();
        if (deadline > now && deadline - now > kMaxDelay.count()) return fail(errc::invalid_argument);
    } else {
        if (o.delay < Duration::zero() || o.delay > kMaxDelay) return fail(errc::invalid_argument);
        deadline = now + o.delay.count();
    }
    if (o.period < Duration::zero() || o.period > kMaxDelay) return fail(errc::invalid_argument);
    const tick_t tick = core.clock.deadline_tick(deadline);
    if (tick > Ctl::kMaxDeadline) return fail(errc::invalid_argument);
    const std::uint64_t period =
        o.period > Duration::zero() ? core.clock.period_ticks(static_cast<std::uint64_t>(o.period.count())) : 0;

    // Register as an in-flight start, then check for shutdown (see RuntimeCore).
    auto& guard = core.starting[rt::this_thread_stripe()].n;
    guard.fetch_add(1, std::memory_order_seq_cst);
    struct Leave {
        std::atomic<std::int64_t>& g;
        ~Leave() { g.fetch_sub(1, std::memory_order_release); }
    } leave{guard};
    if (core.shutting_down.load(std::memory_order_seq_cst)) return fail(errc::shutting_down);

    if (core.max_timers != 0 &&
        core.live.fetch_add(1, std::memory_order_relaxed) >= static_cast<std::int64_t>(core.max_timers)) {
        core.live.fetch_sub(1, std::memory_order_relaxed);
        return fail(errc::limit_reached);
    }
    const auto nshards = static_cast<std::uint32_t>(core.shards.size());
    // Default placement: the calling thread's own shard, assigned round-robin
    // on its first start (measured against CPU-local, round-robin-per-call
    // and single-shard placement in bench/shard_choice.cpp: see README).
    thread_local const std::uint32_t t_thread_seq = next_thread_seq.fetch_add(1, std::memory_order_relaxed);
    const std::uint32_t si = o.shard >= 0 ? static_cast<std::uint32_t>(o.shard) % nshards : t_thread_seq % nshards;
    rt::Shard& shard = core.shard(si);
    std::uint32_t index;
    if (!shard.table().allocate(index)) {
        if (core.max_timers != 0) core.live.fetch_sub(1, std::memory_order_relaxed);
        return fail(errc::no_memory);
    }
    Record& r = shard.table().at(index);
    std::uint32_t gen = r.gen();
    if (gen == 0) {  // a fresh slot
        gen = 1;
        r.set_gen(gen);
    }
    r.period.store(period, std::memory_order_relaxed);
    r.cb = std::move(cb);
    r.ctl.store(Ctl::make(gen, State::Pending, tick), std::memory_order_release);
    core.counters.add(rt::kStarted);
    shard.post_and_wake(Msg::make(MsgType::Insert, gen, index), tick);
    return Timer(this, Id::make(gen, si, index));
}

// ---- stop ------------------------------------------------------------------
namespace {
enum class StopResult { Stopped, NotPending, Running };

// One attempt to stop; `c` is the caller's latest view of ctl.
StopResult try_stop(rt::RuntimeCore& core, rt::Shard& shard, Record& r, std::uint32_t gen) noexcept {
    const std::uint32_t gen10 = gen & Ctl::kGenMask;
    std::uint64_t c = r.ctl.load(std::memory_order_acquire);
    for (;;) {
        if (Ctl::gen(c) != gen10) return StopResult::NotPending;
        const State s = Ctl::state(c);
        if (s == State::Pending || s == State::Dispatched) {
            if (!r.ctl.compare_exchange_weak(c, Ctl::with(c, State::Cancelled), std::memory_order_acq_rel,
                                             std::memory_order_acquire))
                continue;
            // The timer is ours now: release (the callable's destructor),
            // then ask the shard to unlink it and recycle the slot.
            core.release(r);
            core.counters.add(rt::kStopped);
            shard.post_cancel(Msg::make(MsgType::Cancel, gen, rt::HandleTable::index_of(&r)));
            return StopResult::Stopped;
        }
        if ((s == State::Running && r.period_ticks() != 0) || s == State::RunningRearmed) {
            // A run is in progress and another was due to follow: prevent it.
            if (!r.ctl.compare_exchange_weak(c, Ctl::with(c, State::RunningStopped), std::memory_order_acq_rel,
                                             std::memory_order_acquire))
                continue;
            core.counters.add(rt::kStopped);
            return StopResult::Stopped;
        }
        if (s == State::Running || s == State::RunningStopped || s == State::Done) return StopResult::Running;
        return StopResult::NotPending;
    }
}
}  // namespace

bool Runtime::stop(std::uint64_t id) noexcept {
    rt::Shard* shard = nullptr;
    Record* r = impl_->core.lookup(id, &shard);
    return r != nullptr && try_stop(impl_->core, *shard, *r, Id::gen(id)) == StopResult::Stopped;
}

bool Runtime::stop_sync(std::uint64_t id) noexcept {
    rt::RuntimeCore& core = impl_->core;
    rt::Shard* shard = nullptr;
    Record* r = core.lookup(id, &shard);
    if (r == nullptr) return false;
    const std::uint32_t gen10 = Id::gen(id) & Ctl::kGenMask;
    const bool own_callback = rt::t_current.rec == r;
    bool stopped = false;
    for (;;) {
        const StopResult res = try_stop(core, *shard, *r, Id::gen(id));
        stopped |= res == StopResult::Stopped;
        if (own_callback) return stopped;  // never wait for ourselves
        // Wait while a run (or the release after the last run) is in
        // progress; then look again: the run may have re-armed the timer.
        auto busy = [gen10](std::uint64_t v) {
            return Ctl::gen(v) == gen10 && (Ctl::running(Ctl::state(v)) || Ctl::state(v) == State::Done);
        };
        std::uint64_t c = r->ctl.load(std::memory_order_acquire);
        bool waited = false;
        if (busy(c)) {
            waited = true;  // a run was in progress: afterwards, look again
            // Announce the wait, then look again (pairs with the fence in
            // wake_ctl_waiters): a change after this load is notified.
            core.ctl_waiters.fetch_add(1, std::memory_order_relaxed);
            std::atomic_thread_fence(std::memory_order_seq_cst);
            c = r->ctl.load(std::memory_order_acquire);
            while (busy(c)) {
                r->ctl.wait(c, std::memory_order_acquire);
                c = r->ctl.load(std::memory_order_acquire);
            }
            core.ctl_waiters.fetch_sub(1, std::memory_order_relaxed);
        }
        if (!waited || Ctl::gen(c) != gen10 || Ctl::state(c) != State::Pending) return stopped;
    }
}

// ---- reset -----------------------------------------------------------------
bool Runtime::reset(std::uint64_t id, Duration delay) {
    std::error_code ec;
    const bool ok = reset(id, delay, ec);
    if (ec && ec != make_error_code(errc::shutting_down)) throw Error(ec);
    return ok;
}

bool Runtime::reset(std::uint64_t id, Duration delay, std::error_code& ec) noexcept {
    rt::RuntimeCore& core = impl_->core;
    ec.clear();
    if (delay < Duration::zero() || delay > kMaxDelay) {
        ec = make_error_code(errc::invalid_argument);
        return false;
    }
    if (core.shutting_down.load(std::memory_order_relaxed)) {
        ec = make_error_code(errc::shutting_down);
        return false;
    }
    rt::Shard* shard = nullptr;
    Record* r = core.lookup(id, &shard);
    if (r == nullptr) return false;
    const tick_t tick = core.clock.deadline_tick(rt::monotonic_ns() + delay.count());
    const std::uint32_t gen = Id::gen(id);
    const std::uint32_t index = Id::index(id);
    std::uint64_t c = r->ctl.load(std::memory_order_acquire);
    for (;;) {
        if (Ctl::gen(c) != (gen & Ctl::kGenMask)) return false;
        const State s = Ctl::state(c);
        const tick_t old = Ctl::deadline(c);
        State to;
        MsgType msg = MsgType::Refile;
        bool post = tick < old;  // later: lazily re-filed by the shard, no message
        switch (s) {
            case State::Pending:
                to = State::Pending;
                break;
            case State::Dispatched:  // due, not started: take it back
                to = State::Pending;
                if (r->period_ticks() == 0) {  // a dispatched one-shot is out of the wheel
                    msg = MsgType::Insert;
                    post = true;
                }
                break;
            case State::Running:
                if (r->period_ticks() != 0) {
                    to = State::Running;  // sets the next run
                } else if (rt::t_current.rec == r) {
                    to = State::RunningRearmed;  // a one-shot re-arming itself
                    post = false;                // the worker files it after the run
                } else {
                    return false;  // fired, and it is not re-arming itself
                }
                break;
            case State::RunningRearmed:
                to = State::RunningRearmed;
                post = false;
                break;
            default:
                return false;
        }
        if (!r->ctl.compare_exchange_weak(c, Ctl::with(c, to, tick), std::memory_order_acq_rel,
                                          std::memory_order_acquire))
            continue;
        if (post) shard->post_and_wake(Msg::make(msg, gen, index), tick);
        core.counters.add(rt::kReset);
        return true;
    }
}

// ---- lifecycle ---------------------------------------------------------------
void Runtime::shutdown() {
    std::error_code ec;
    shutdown(ec);
    if (ec) throw Error(ec);
}

void Runtime::shutdown(std::error_code& ec) noexcept {
    rt::RuntimeCore& core = impl_->core;
    ec.clear();
    if (rt::t_current.core == &core) {
        ec = make_error_code(errc::would_deadlock);
        return;
    }
    std::lock_guard<std::mutex> lock(core.shutdown_mutex);
    if (core.shut_down.load(std::memory_order_acquire)) return;
    core.shutting_down.store(true, std::memory_order_seq_cst);
    // 1. No start() is in flight any more, and none can begin.
    for (auto& g : core.starting)
        while (g.n.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
    // 2. Drivers stop: nothing new is dispatched.
    for (auto& s : core.shards) s->stop_and_join();
    // 3. Runs in progress finish.
    core.dispatcher->wait_idle();
    // 4. Every timer still pending is cancelled and released here.
    for (auto& s : core.shards) {
        const std::uint32_t hw = s->table().high_water();
        for (std::uint32_t i = 0; i < hw; ++i) {
            Record* r = s->table().find(i);
            if (r == nullptr) continue;
            std::uint64_t c = r->ctl.load(std::memory_order_acquire);
            for (;;) {
                const State st = Ctl::state(c);
                if (st != State::Pending && st != State::Dispatched) break;
                if (r->ctl.compare_exchange_weak(c, Ctl::with(c, State::Cancelled), std::memory_order_acq_rel,
                                                 std::memory_order_acquire)) {
                    core.release(*r);
                    core.counters.add(rt::kCancelledAtShutdown);
                    break;
                }
            }
        }
    }
    core.shut_down.store(true, std::memory_order_release);
}

bool Runtime::is_shut_down() const noexcept { return impl_->core.shut_down.load(std::memory_order_acquire); }

// ---- observation ---------------------------------------------------------------
Stats Runtime::stats() const {
    const rt::RuntimeCore& core = impl_->core;
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
    return st;
}

unsigned Runtime::shard_count() const noexcept { return static_cast<unsigned>(impl_->core.shards.size()); }
unsigned Runtime::worker_count() const noexcept { return impl_->core.dispatcher->concurrency(); }
Duration Runtime::resolution() const noexcept { return impl_->core.config.resolution; }

}  // namespace tickwheel
