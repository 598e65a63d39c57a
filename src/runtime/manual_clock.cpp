// SPDX-License-Identifier: MIT OR Apache-2.0
// A manual clock (Config::manual_clock): advance() and now().
//
// A manual runtime has no driver threads: the thread that calls advance()
// is every shard's driver for the call (Shard::manual_step, serialised by
// advance_mutex) and runs what falls due itself, in (deadline, start
// order), through the worker's half (begin_run, run_begun: worker.cpp).
// Its clocks are virtual (Clocks, clock.hpp): they move only here, to each
// deadline served, then to the end of the window.
//
// Threads: any thread but one inside a callback of this runtime (it runs
// them itself: would_deadlock); advances are serialised by advance_mutex,
// which shutdown also takes (ordered against shutdown: an advance that
// takes it after a shutdown began does nothing; one in progress stops
// before its next callback). Owner rules: the owner table in
// timer_state.hpp (the advancing thread is the driver-token holder).
// (The C++ API's rooms, one idea each, are listed in runtime_core.hpp.)
#include "tickwheel/runtime.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <vector>

#include "runtime/error_detail.hpp"
#include "runtime/runtime_core.hpp"

namespace tickwheel {
namespace rt {

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

}  // namespace rt

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

}  // namespace tickwheel
