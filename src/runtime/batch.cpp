// SPDX-License-Identifier: MIT OR Apache-2.0
// The batch calls (issue 14): start, stop and re-arm many timers in one call,
// each element exactly as the single call (start.cpp, stop.cpp, reset.cpp)
// would treat it, in order, through the same steps (timer_ops.hpp). What a
// batch saves is what the single calls pay once per timer:
//   * memory latency: the records of up to kWindow elements are located and
//     prefetched (both lines, for writing) before the window's first locked
//     instruction, so their cache misses overlap instead of each one being
//     exposed behind the previous CAS; a start pops its free records with
//     one CAS, prefetching them as it walks the free stack;
//   * the inbox: one message block per shard (moodycamel enqueue_bulk), one
//     wake-up check per shard, per Outbox::kCapacity messages;
//   * per call, not per timer: one clock reading (start, reset), one
//     registration in the shutdown guard (start), one update of each counter.
#include <algorithm>
#include <cstring>

#include "runtime/hazard.hpp"
#include "runtime/probes.hpp"
#include "runtime/timer_ops.hpp"
#include "runtime/timer_state.hpp"

namespace tickwheel {

namespace rt {

namespace {
/// Elements whose records are located and prefetched together.
constexpr std::size_t kWindow = 64;

/// The records ids[0..m) name, nullptr where none can (0, a shard or an
/// index out of range), each prefetched. Touches no record: the generation
/// is checked when the element's turn comes (and again at its CAS).
void locate(const RuntimeCore& core, const std::uint64_t* ids, std::size_t m, Record** recs) noexcept {
    const std::size_t nshards = core.shards.size();
    for (std::size_t j = 0; j < m; ++j) {
        const std::uint64_t id = ids[j];
        const std::uint32_t s = Id::shard(id);
        Record* r = id != 0 && s < nshards ? core.shards[s]->table().find(Id::index(id)) : nullptr;
        recs[j] = r;
        if (r != nullptr) HandleTable::prefetch(r);
    }
}

std::error_code code_of(errc e) noexcept { return e == errc{} ? std::error_code{} : make_error_code(e); }
}  // namespace

// ---- the outbox ------------------------------------------------------------------
void Outbox::flush_into(std::uint32_t* failed_tags, std::size_t& nfailed) noexcept {
    // Group by shard (usually one: a thread's starts go to its own shard).
    bool one_shard = true;
    for (std::size_t i = 1; i < n_ && one_shard; ++i) one_shard = items_[i].shard == items_[0].shard;
    if (!one_shard)
        std::sort(items_, items_ + n_, [](const Item& a, const Item& b) { return a.shard < b.shard; });
    std::uint64_t msgs[kCapacity];
    bool ok[kCapacity];
    for (std::size_t i = 0; i < n_;) {
        const std::uint32_t s = items_[i].shard;
        std::size_t j = i;
        tick_t due = items_[i].due;
        for (; j < n_ && items_[j].shard == s; ++j) {
            msgs[j - i] = items_[j].msg;
            due = std::min(due, items_[j].due);
        }
        Shard& shard = core_.shard(s);
        switch (kind_) {
            case Kind::Cancel: shard.post_cancels(msgs, j - i); break;
            case Kind::Deadline: shard.post_bulk_and_wake(msgs, j - i, due); break;
            case Kind::Insert:
                if (shard.try_post_inserts(msgs, j - i, due, ok) != j - i)
                    for (std::size_t k = i; k < j; ++k)
                        if (!ok[k - i]) failed_tags[nfailed++] = items_[k].tag;
                break;
        }
        i = j;
    }
    n_ = 0;
}

// ---- stop --------------------------------------------------------------------------
std::size_t stop_batch(RuntimeCore& core, const std::uint64_t* ids, std::size_t n, std::error_code* results) noexcept {
    Outbox box(core, Outbox::Kind::Cancel);
    HazardSlot* const slot = hazard_detail::this_thread_slot();
    std::uint64_t stopped = 0, released = 0;
    Record* recs[kWindow];
    for (std::size_t base = 0; base < n; base += kWindow) {
        const std::size_t m = std::min(kWindow, n - base);
        locate(core, ids + base, m, recs);
        for (std::size_t j = 0; j < m; ++j) {
            const std::uint64_t id = ids[base + j];
            const std::uint32_t gen = Id::gen(id);
            Record* r = recs[j];
            bool ok = false;
            if (r != nullptr && r->gen() == gen) {
                switch (try_stop(core, *r, gen, slot)) {
                    case CancelOutcome::Cancelled:
                        // Its release hook, here, before the next element; then
                        // its stop_sync() waiters are woken at once, before the
                        // next element's hook runs (one of those may wait for
                        // such a waiter: issue 20) and before its Cancel is
                        // posted (which recycles it). The wake costs a load
                        // where nobody waits (TimerState::wake).
                        settle_cancelled(core, *r);
                        ++released;
                        box.add(Id::shard(id), Msg::make(MsgType::Cancel, gen, Id::index(id)), 0);
                        ok = true;
                        break;
                    case CancelOutcome::StoppedDuringRun: ok = true; break;
                    default: break;
                }
            }
            stopped += ok;
            if (results != nullptr) results[base + j] = ok ? std::error_code{} : make_error_code(errc::not_found);
            TW_PROBE(stop, core.config.name.c_str(), id, ok ? 1 : 0);
        }
    }
    box.flush();
    if (released != 0) core.count_released(released);
    if (stopped != 0) core.counters.add(kStopped, stopped);
    return stopped;
}

// ---- reset -------------------------------------------------------------------------
std::size_t reset_batch(RuntimeCore& core, const std::uint64_t* ids, std::size_t n, std::int64_t delay_ns,
                        std::error_code* results) noexcept {
    Readings now(core.clocks);
    (void)now.mono_upper();  // the call's one reading of the wheels' clock (its upper bound: clock.hpp), before any element
    Outbox box(core, Outbox::Kind::Deadline);
    HazardSlot* const slot = hazard_detail::this_thread_slot();
    std::uint64_t rearmed = 0;
    Record* recs[kWindow];
    for (std::size_t base = 0; base < n; base += kWindow) {
        const std::size_t m = std::min(kWindow, n - base);
        locate(core, ids + base, m, recs);
        for (std::size_t j = 0; j < m; ++j) {
            const std::uint64_t id = ids[base + j];
            std::error_code ec;
            const bool ok = recs[j] != nullptr ? reset_record(core, core.shard(Id::shard(id)), *recs[j], id, delay_ns,
                                                              false, now, &box, slot, ec)
                                               : reset_to(core, id, delay_ns, false, now, &box, ec);  // (answers it)
            if (ok)
                ++rearmed;
            else if (!ec)
                ec = make_error_code(errc::not_found);
            if (results != nullptr) results[base + j] = ec;
            TW_PROBE(reset, core.config.name.c_str(), id, ok ? 1 : 0);
        }
    }
    box.flush();
    if (rearmed != 0) core.counters.add(kReset, rearmed);
    return rearmed;
}

// ---- start -------------------------------------------------------------------------
namespace {
/// One element of a start batch on its way.
struct Pending {
    StartPlan plan;
    Record* r = nullptr;
    std::uint32_t index = 0, gen = 0;
    errc e = errc{};
};

/// Takes records for the elements of `p` still without an error, from each
/// shard's table with one allocate_n(); those left without one get
/// no_memory (and give back their live count).
void allocate_all(RuntimeCore& core, Pending* p, std::size_t m) noexcept {
    bool done[kWindow] = {};
    std::uint32_t pick[kWindow];
    Record* recs[kWindow];
    std::uint32_t index[kWindow], gen[kWindow];
    for (std::size_t j = 0; j < m; ++j) {
        if (done[j] || p[j].e != errc{}) continue;
        const std::uint32_t s = p[j].plan.shard;
        std::size_t c = 0;
        for (std::size_t k = j; k < m; ++k)
            if (!done[k] && p[k].e == errc{} && p[k].plan.shard == s) {
                done[k] = true;
                pick[c++] = static_cast<std::uint32_t>(k);
            }
        const std::size_t got = core.shard(s).table().allocate_n(c, recs, index, gen);
        for (std::size_t k = 0; k < c; ++k) {
            Pending& e = p[pick[k]];
            if (k < got) {
                e.r = recs[k];
                e.index = index[k];
                e.gen = gen[k];
            } else {
                e.e = errc::no_memory;
                if (core.max_timers != 0) core.live.fetch_sub(1, std::memory_order_relaxed);
            }
        }
    }
}

/// Reserves live-count room for the elements of `p` without an error (one
/// fetch_add); those beyond the room, in order, get limit_reached.
void reserve_live(RuntimeCore& core, Pending* p, std::size_t m) noexcept {
    std::int64_t want = 0;
    for (std::size_t j = 0; j < m; ++j) want += p[j].e == errc{};
    if (want == 0) return;
    const auto max = static_cast<std::int64_t>(core.max_timers);
    const std::int64_t before = core.live.fetch_add(want, std::memory_order_relaxed);
    const std::int64_t room = std::clamp<std::int64_t>(max - before, 0, want);
    if (room == want) return;
    core.live.fetch_sub(want - room, std::memory_order_relaxed);
    std::int64_t granted = 0;
    for (std::size_t j = 0; j < m; ++j) {
        if (p[j].e != errc{}) continue;
        if (granted < room)
            ++granted;
        else
            p[j].e = errc::limit_reached;
    }
}
}  // namespace

std::size_t start_batch(RuntimeCore& core, Runtime* self, const StartOptions* opts, std::size_t opts_size,
                        std::size_t n, detail::Callback* cbs, Timer* out, std::error_code* results) noexcept {
    Readings now(core.clocks);
    (void)now.mono_upper();  // the call's one reading of the wheels' clock (its upper bound: clock.hpp), before any element
    std::uint64_t started = 0;
    {
        const StartGuard guard(core);
        const bool down = guard.shutting_down();
        Outbox box(core, Outbox::Kind::Insert);
        static_assert(kWindow <= Outbox::kCapacity);
        Pending p[kWindow];
        for (std::size_t base = 0; base < n; base += kWindow) {
            const std::size_t m = std::min(kWindow, n - base);
            const auto element = [&](std::size_t j, StartOptions& copy) -> const StartOptions* {
                const auto* at = reinterpret_cast<const StartOptions*>(reinterpret_cast<const char*>(opts) +
                                                                       (base + j) * opts_size);
                if (opts_size == sizeof(StartOptions)) return at;
                copy = StartOptions{};
                return read_start_options(at, opts_size, copy) ? &copy : nullptr;
            };
            // 1. Check and plan each element: as start() before its guard.
            for (std::size_t j = 0; j < m; ++j) {
                p[j] = Pending{};
                StartOptions copy;
                const StartOptions* o = element(j, copy);
                p[j].e = o == nullptr ? errc::invalid_argument : plan_start(core, *o, cbs[base + j], now, p[j].plan);
                if (p[j].e == errc{} && down) p[j].e = errc::shutting_down;
                // Bound to a queue whose destroy began: as in start().
                if (p[j].e == errc{} && !queue_still_bindable(core, p[j].plan)) p[j].e = errc::invalid_argument;
            }
            // 2. The limit, then the records.
            if (core.max_timers != 0) reserve_live(core, p, m);
            allocate_all(core, p, m);
            // 3. Each record becomes its timer; its Insert goes to the outbox.
            for (std::size_t j = 0; j < m; ++j) {
                Pending& e = p[j];
                if (e.e != errc{}) continue;
                StartOptions copy;
                const StartOptions& o = *element(j, copy);
                Shard& shard = core.shard(e.plan.shard);
                tick_t file_at;
                if (fill_record(core, shard, *e.r, e.index, e.gen, o, e.plan, cbs[base + j], file_at) != errc{}) {
                    take_back(core, shard, *e.r);
                    e.e = errc::no_memory;
                    continue;
                }
                box.add(e.plan.shard, Msg::make(MsgType::Insert, e.gen, e.index), file_at, static_cast<std::uint32_t>(j));
            }
            // 4. One block per shard; a start whose Insert was not queued is
            //    taken back whole (nobody knows its id yet).
            box.flush([&](std::uint32_t j) {
                Pending& e = p[j];
                // (Unless a group stop found it in its group and ended it.)
                if (take_back_published(core, core.shard(e.plan.shard), *e.r, e.gen, cbs[base + j]))
                    e.e = errc::no_memory;
            });
            for (std::size_t j = 0; j < m; ++j) {
                const Pending& e = p[j];
                if (e.e == errc{}) {
                    out[base + j] = Timer(self, Id::make(e.gen, e.plan.shard, e.index));
                    ++started;
                } else {
                    out[base + j] = Timer{};
                }
                if (results != nullptr) results[base + j] = code_of(e.e);
            }
        }
        if (started != 0) core.counters.add(kStarted, started);
    }
    // Outside the guard, in order: the failed elements' release hooks.
    for (std::size_t i = 0; i < n; ++i)
        if (cbs[i]) RuntimeCore::release_unstarted(cbs[i]);
    return started;
}

}  // namespace rt

// ---- the exported entry points (runtime.hpp) ---------------------------------------
std::size_t Runtime::stop_n(const std::uint64_t* ids, std::size_t n, std::error_code* results,
                            std::error_code& ec) noexcept {
    ec.clear();
    if (n != 0 && ids == nullptr) {
        ec = make_error_code(errc::invalid_argument);
        return 0;
    }
    if (core_->forked()) {
        ec = make_error_code(errc::forked);
        return 0;
    }
    return rt::stop_batch(*core_, ids, n, results);
}

std::size_t Runtime::reset_n(const std::uint64_t* ids, std::size_t n, Duration delay, std::error_code* results,
                             std::error_code& ec) noexcept {
    ec.clear();
    if ((n != 0 && ids == nullptr) || delay < Duration::zero() || delay > kMaxDelay) {
        ec = make_error_code(errc::invalid_argument);
        return 0;
    }
    if (core_->forked()) {
        ec = make_error_code(errc::forked);
        return 0;
    }
    return rt::reset_batch(*core_, ids, n, delay.count(), results);
}

std::size_t Runtime::start_n_sized(const StartOptions* opts, std::size_t opts_size, std::size_t n,
                                   detail::Callback* cbs, Timer* out, std::error_code* results,
                                   std::error_code& ec) noexcept {
    ec.clear();
    StartOptions probe;  // the stride is a released layout's size (the first element tells)
    if (n != 0 && (opts == nullptr || cbs == nullptr || out == nullptr ||
                   (opts_size != sizeof(StartOptions) && !rt::read_start_options(opts, opts_size, probe)))) {
        ec = make_error_code(errc::invalid_argument);
        return 0;
    }
    if (core_->forked()) {
        ec = make_error_code(errc::forked);
        return 0;
    }
    const std::size_t started = rt::start_batch(*core_, this, opts, opts_size, n, cbs, out, results);
    if (TW_PROBE_ENABLED(start)) {
        for (std::size_t i = 0; i < n; ++i) {
            if (!out[i]) continue;
            StartOptions o;
            const auto* at = reinterpret_cast<const StartOptions*>(reinterpret_cast<const char*>(opts) + i * opts_size);
            if (opts_size == sizeof(StartOptions) || rt::read_start_options(at, opts_size, o)) {
                if (opts_size == sizeof(StartOptions)) std::memcpy(&o, at, sizeof o);
                rt::probe_start(*core_, o, out[i].id(), __builtin_return_address(0));
            }
        }
    }
    return started;
}

}  // namespace tickwheel
