// SPDX-License-Identifier: MIT OR Apache-2.0
// stop(), stop_sync() and stop_group(): a caller ends a timer early; and the
// release every end of a timer takes (its callable's release hook, counted
// once).
//
// A stop is one CAS (try_stop: TimerState::try_cancel in a HazardScope, the
// bound queue's transition mutex around it, BoundTransition in
// timer_ops.hpp). PENDING or DISPATCHED -> RELEASING makes the stopping
// thread the owner: it runs the release hook, makes the word CANCELLED and
// posts the Cancel the shard unlinks and recycles by. RUNNING ->
// RUNNING_STOPPED leaves the release to the worker (finish_run,
// worker.cpp). stop_sync() waits while a run or a release hook of the timer
// is in progress (TimerState::wait_while_busy), never for itself (inside its
// own callback). stop_group() claims each shard's list of the group
// (group_index.hpp) and stops every entry.
//
// Threads: any thread, including callbacks and release hooks. stop_sync()
// from inside another timer's callback waits for that one's run (two
// callbacks that stop_sync each other wait forever: runtime.hpp), and a
// group stop nested in a callback or hook does not wait for earlier group
// stops (GroupIndex::Claim::wait_earlier). Who owns what after each CAS:
// the owner table in timer_state.hpp; release() runs exactly once per
// started timer, by the owner of its terminal transition.
// (The C++ API's rooms, one idea each, are listed in runtime_core.hpp.)
#include "tickwheel/runtime.hpp"

#include <cstddef>
#include <cstdint>

#include "runtime/error_detail.hpp"
#include "runtime/probes.hpp"
#include "runtime/hazard.hpp"
#include "runtime/runtime_core.hpp"
#include "runtime/timer_ops.hpp"
#include "runtime/timer_state.hpp"

namespace tickwheel {

using rt::Ctl;
using rt::Id;
using rt::Msg;
using rt::MsgType;
using rt::Record;
using rt::State;
using rt::TimerState;

// ---- stop ------------------------------------------------------------------
namespace rt {
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
    const bool placed = r.placed_in_cell();  // (before the release clears it with the callable)
    rt::settle_cancelled(core, r);
    core.count_released(1);
    core.counters.add(rt::kStopped);
    // Still in this thread's cell (started here, not yet due): taken back
    // and recycled here -- the shard never saw it. Otherwise the shard
    // unlinks and recycles it (caller_cells.hpp).
    if (placed && shard.cells_pay()) {  // (else its Cancel takes the entry, on the driver's core)
        if (rt::CallerCells::Cell* cell = shard.my_cell(core.uid, false);
            cell != nullptr && shard.take_back_and_recycle(*cell, r, gen))
            return;
    }
    shard.post_cancel(Msg::make(MsgType::Cancel, gen, rt::HandleTable::index_of(&r)));
}
}  // namespace

namespace {
/// The stop probe (probes.hpp), out of the hot path: only while a tracer is attached.
[[maybe_unused, gnu::cold, gnu::noinline]] void probe_stop(const rt::RuntimeCore& core, std::uint64_t id, bool stopped) noexcept {
    TW_PROBE(stop, core.config.name.c_str(), id, stopped ? 1 : 0);
}

[[gnu::always_inline]] inline bool stop_id(rt::RuntimeCore& core, std::uint64_t id) noexcept {
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

[[gnu::always_inline]] inline bool stop_sync_id(rt::RuntimeCore& core, std::uint64_t id) noexcept {
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
}  // namespace

namespace {
// A stop while a tracer is attached to the stop probe: the same stop, then
// the probe. Out of line, so that the untraced path is the plain stop
// behind one load and branch (measured: keeping `id` live across the stop
// for a probe after it cost ~16 instructions a stop).
[[gnu::cold, gnu::noinline, maybe_unused]] bool stop_traced(rt::RuntimeCore& core, std::uint64_t id,
                                                            bool sync) noexcept {
    const bool stopped = sync ? stop_sync_id(core, id) : stop_id(core, id);
    probe_stop(core, id, stopped);
    return stopped;
}
}  // namespace

bool Runtime::stop(std::uint64_t id) noexcept {
    if (TW_PROBE_ENABLED(stop)) [[unlikely]]
        return stop_traced(*core_, id, false);
    return stop_id(*core_, id);
}

bool Runtime::stop_sync(std::uint64_t id) noexcept {
    if (TW_PROBE_ENABLED(stop)) [[unlikely]]
        return stop_traced(*core_, id, true);
    return stop_sync_id(*core_, id);
}

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

}  // namespace tickwheel
