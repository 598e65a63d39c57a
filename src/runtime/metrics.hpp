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
#include <string>
#include <vector>

#include "runtime/counters.hpp"

namespace tickwheel::rt {

struct RuntimeCore;

/// Everything the exposition shows, read once.
struct MetricsSnapshot {
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
};

/// Reads a snapshot of `core` (see above). Allocates the two per-shard
/// vectors (std::bad_alloc).
MetricsSnapshot take_metrics_snapshot(const RuntimeCore& core);

/// The exposition text of a snapshot: `# HELP` and `# TYPE` lines before
/// each family's samples, metric names prefixed `tickwheel_`, counters
/// ending in `_total`, durations in seconds, no timestamps, '\n' line ends
/// (the last line too). Allocates the string (std::bad_alloc).
std::string format_metrics(const MetricsSnapshot& s);

/// Exact decimal seconds of `s` + `ns` / 1e9 (ns < 1e9), without trailing
/// zeros: "0", "0.000005", "2.5", "12.000345001". Exposed for the tests.
std::string format_seconds(std::uint64_t s, std::uint64_t ns);

}  // namespace tickwheel::rt
