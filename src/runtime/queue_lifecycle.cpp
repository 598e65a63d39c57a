// SPDX-License-Identifier: MIT OR Apache-2.0
// A delivery queue's life in its runtime (delivery_queue.hpp has the queue
// itself, queue.cpp tickwheel::Queue): its creation, ordered against
// shutdown like a start, and its destruction, which cancels every timer
// bound to it.
//
// Threads: create_queue from any thread (tickwheel::Queue, tw_queue_create);
// destroy_queue from the one thread that claimed the queue's destroy
// (DeliveryQueue::claim_destroy), never from inside one of its callbacks
// (the caller checks: would_deadlock). destroy_queue waits: for the starts
// in flight (wait_for_starts), for the runs on the queue (close), and for
// every thread that may have found it by its slot (quiesce).
// Rules relied on: "Queue binding and delivery items: owner rules" and the
// owner table in timer_state.hpp; the sweep ends a bound timer by the same
// CAS as stop() (try_cancel re-validates the generation).
// (The C++ API's rooms, one idea each, are listed in runtime_core.hpp.)
#include <cstdint>

#include "runtime/hazard.hpp"
#include "runtime/runtime_core.hpp"
#include "runtime/timer_ops.hpp"
#include "runtime/timer_state.hpp"

namespace tickwheel {
namespace rt {

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

}  // namespace tickwheel
