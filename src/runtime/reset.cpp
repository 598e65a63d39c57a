// SPDX-License-Identifier: MIT OR Apache-2.0
// reset() and reset_at(): a caller re-arms a timer to a new deadline.
//
// A reset is one CAS on the word (TimerState::reset, decide_reset in
// timer_state.hpp; in a HazardScope, the bound queue's transition mutex
// around it: BoundTransition, timer_ops.hpp). PENDING takes the new tick (a
// message to the shard only if it is earlier: a later one is re-filed
// lazily when the old one comes); DISPATCHED is taken back to PENDING; a
// running periodic timer's next run moves; a running one-shot re-arms only
// from its own callback (RUNNING_REARMED: its worker files it after the
// run). A boot-time or wall-clock timer's deadline on its own clock changes
// with the word's tick, under its deadline lock (OwnDeadline), taken for
// the id's generation only: a stale id never writes another timer's
// deadline. A BURST timer's owed runs are dropped (a new phase).
//
// Threads: any thread, including callbacks and release hooks. Who may
// write which field after the CAS: the owner table in timer_state.hpp.
// (The C++ API's rooms, one idea each, are listed in runtime_core.hpp.)
#include "tickwheel/runtime.hpp"

#include <cstdint>
#include <system_error>

#include "runtime/error_detail.hpp"
#include "runtime/hazard.hpp"
#include "runtime/probes.hpp"
#include "runtime/runtime_core.hpp"
#include "runtime/timer_ops.hpp"
#include "runtime/timer_state.hpp"

namespace tickwheel {

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
    if (own != nullptr) test_hooks::window(&r, 'o');  // holding the timer's deadline lock
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
/// The reset probe (probes.hpp), out of the hot path: only while a tracer is attached.
[[maybe_unused, gnu::cold, gnu::noinline]] void probe_reset(const rt::RuntimeCore& core, std::uint64_t id,
                                                            bool rearmed) noexcept {
    TW_PROBE(reset, core.config.name.c_str(), id, rearmed ? 1 : 0);
}

[[gnu::always_inline]] inline bool reset_plain(rt::RuntimeCore& core, std::uint64_t id, std::int64_t value, bool absolute,
                                               std::error_code& ec) noexcept {
    rt::Readings now(core.clocks);
    if (!rt::reset_to(core, id, value, absolute, now, nullptr, ec)) return false;
    core.counters.add(rt::kReset);
    return true;
}

/// A reset while a tracer is attached to the reset probe: the same reset,
/// then the probe (out of line: the untraced path stays the plain reset).
[[gnu::cold, gnu::noinline, maybe_unused]] bool reset_traced(rt::RuntimeCore& core, std::uint64_t id,
                                                             std::int64_t value, bool absolute,
                                                             std::error_code& ec) noexcept {
    const bool rearmed = reset_plain(core, id, value, absolute, ec);
    probe_reset(core, id, rearmed);
    return rearmed;
}

bool reset_one(rt::RuntimeCore& core, std::uint64_t id, std::int64_t value, bool absolute, std::error_code& ec) noexcept {
    if (TW_PROBE_ENABLED(reset)) [[unlikely]]
        return reset_traced(core, id, value, absolute, ec);
    return reset_plain(core, id, value, absolute, ec);
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

}  // namespace tickwheel
