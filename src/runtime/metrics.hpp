// SPDX-License-Identifier: MIT OR Apache-2.0
// The runtime's counters, gauges and lateness histogram in the Prometheus
// text exposition format 0.0.4 (Runtime::metrics(), tw_runtime_metrics()).
//
// Taking a snapshot reads atomics (relaxed loads of the striped counters
// and histograms, the shards' pending counts and inbox sizes; the worker
// count takes oneTBB's brief internal lock): it takes no lock of the runtime, never waits for a shard or a worker and
// never delays one, so it may be called from any thread, from a callback,
// and after shutdown (the shards and counters outlive their threads). Like
// Stats it is not linearizable: each value is a recent one. Within one
// snapshot the histogram is self-consistent: its `+Inf` bucket and `_count`
// are the sum of the buckets read.
//
// Formatting is separate from reading, so that the text grammar can be
// tested with made-up snapshots.
#pragma once

#include <cstdint>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/counters.hpp"

namespace tickwheel::rt {

struct RuntimeCore;

/// One delivery queue's share of the exposition.
struct QueueSnapshot {
    std::uint32_t slot = 0;  // the `queue` label: unique among the runtime's live queues
    std::uint64_t due = 0, delivered = 0, ran = 0, runners = 0;
    std::uint64_t signal_p99_ns = 0, signal_max_ns = 0, run_p99_ns = 0, run_max_ns = 0;
    LatencyHistogram::Export stage[kStageCount];  // its runs' lateness by stage (issue 34)
};

/// Everything the exposition shows of one runtime, read once.
struct MetricsSnapshot {
    std::string name;  // the `runtime` label (unescaped)
    std::uint32_t shards = 0;
    std::uint32_t workers = 0;
    bool shut_down = false;
    std::uint64_t resolution_ns = 0;
    std::vector<std::uint64_t> pending_per_shard;  // size == shards
    std::vector<std::uint64_t> inbox_per_shard;    // size == shards
    std::uint64_t live = 0;
    std::uint64_t slots = 0;
    std::uint64_t started = 0;
    std::uint64_t fired = 0;
    std::uint64_t stopped = 0;
    std::uint64_t reset = 0;
    std::uint64_t callback_exceptions = 0;
    std::uint64_t cancelled_at_shutdown = 0;
    LatencyHistogram::Export lateness;
    LatencyHistogram::Export stage[kStageCount];  // lateness by stage, and the runs' duration (issue 34)
    std::uint64_t workers_busy = 0, waiting_for_worker = 0, callbacks_running = 0, oldest_run_age_ns = 0;
    std::uint64_t resident_bytes = 0;
    std::vector<QueueSnapshot> queues;  // the live delivery queues, by slot
};

/// Reads a snapshot of `core` (see above). Allocates the per-shard and
/// per-queue vectors (std::bad_alloc). Each live queue's counters are read
/// under that queue's own brief lock.
MetricsSnapshot take_metrics_snapshot(const RuntimeCore& core);

/// The exposition text of one or more runtimes' snapshots: each family
/// once -- its `# HELP` and `# TYPE` lines, then the samples of every
/// snapshot in order, each labelled `runtime="<name>"` first --, metric
/// names prefixed `tickwheel_`, counters ending in `_total`, durations in
/// seconds, no timestamps, '\n' line ends (the last line too). Allocates
/// the string (std::bad_alloc).
std::string format_metrics(const MetricsSnapshot* const* s, std::size_t n);
inline std::string format_metrics(const MetricsSnapshot& s) {
    const MetricsSnapshot* one = &s;
    return format_metrics(&one, 1);
}

/// `v` escaped as a label value of the text format 0.0.4: backslash,
/// double quote and line feed as \\, \" and \n; and, since the format is
/// UTF-8, each byte that is not part of a valid UTF-8 sequence (RFC 3629:
/// no overlong forms, surrogates or code points above U+10FFFF) replaced by
/// U+FFFD (issue 34). Exposed for the tests.
std::string escape_label_value(std::string_view v);

/// Exact decimal seconds of `s` + `ns` / 1e9 (ns < 1e9), without trailing
/// zeros: "0", "0.000005", "2.5", "12.000345001". Exposed for the tests.
std::string format_seconds(std::uint64_t s, std::uint64_t ns);

}  // namespace tickwheel::rt
