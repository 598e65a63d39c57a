// SPDX-License-Identifier: MIT OR Apache-2.0
// Stage trace (a debug build option, TICKWHEEL_STAGE_TRACE=ON; compiled out
// otherwise): where a due timer's lateness comes from. For every item a
// shard hands to the dispatcher it records, in process-wide histograms of
// 1 us buckets:
//   deadline -> wake     the tick the item came due at, to the moment its
//                        shard's futex sleep returned (timer expiry and the
//                        driver's wake-up and scheduling)
//   wake -> submit       the shard's pass: inbox, wheel, decisions
//   submit -> task       the hand-off: arena enqueue to a drain task
//                        starting on a worker (the worker's wake-up)
//   task -> take         waiting behind the items before it in its batch
//   deadline -> take     the whole of it (the callback starts right after)
// and, per pass of a shard (not per item):
//   wheel advance        the time Wheel::advance() took (cascading included)
// and prints their percentiles to stderr when the process exits. Each
// record is a relaxed fetch_add on a shared bucket: not for production.
#pragma once

#include <cstdint>

namespace tickwheel::rt::stage_trace {

enum Stage : unsigned { kDueToWake, kWakeToSubmit, kSubmitToTask, kTaskToTake, kDueToTake, kAdvance, kStages };

#ifdef TICKWHEEL_STAGE_TRACE
inline constexpr bool kEnabled = true;
/// Adds one sample (ns; negative counts as 0) to a stage's histogram.
void record(Stage s, std::int64_t ns) noexcept;
/// The shard thread's current pass: when its sleep ended, and its tick
/// clock (set by the shard, read by Dispatcher::submit on the same thread).
struct Pass {
    std::int64_t wake_ns = 0;
    std::int64_t epoch_ns = 0;
    std::uint64_t res_ns = 1;
};
extern thread_local Pass t_pass;
#else
inline constexpr bool kEnabled = false;
#endif

}  // namespace tickwheel::rt::stage_trace
