// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/stage_trace.hpp"

#ifdef TICKWHEEL_STAGE_TRACE
#include <atomic>
#include <cstdio>

namespace tickwheel::rt::stage_trace {

namespace {
constexpr std::size_t kBuckets = 20001;  // 1 us each; the last one holds everything >= 20 ms

struct Histograms {
    std::atomic<std::uint64_t> b[kStages][kBuckets] = {};
    ~Histograms() { print(); }
    void print() const noexcept {
        static const char* const names[kStages] = {"deadline->wake", "wake->submit", "submit->task", "task->take",
                                                   "deadline->take",
                                                   "wheel advance"};
        std::fprintf(stderr, "tickwheel stage trace (us; per item handed to the dispatcher, wheel advance per pass):\n");
        for (unsigned s = 0; s < kStages; ++s) {
            std::uint64_t n = 0;
            for (std::size_t i = 0; i < kBuckets; ++i) n += b[s][i].load(std::memory_order_relaxed);
            if (n == 0) continue;
            const double qs[] = {0.5, 0.9, 0.99, 0.999, 1.0};
            std::size_t out[5] = {};
            std::uint64_t acc = 0;
            unsigned q = 0;
            for (std::size_t i = 0; i < kBuckets && q < 5; ++i) {
                acc += b[s][i].load(std::memory_order_relaxed);
                while (q < 5 && static_cast<double>(acc) >= qs[q] * static_cast<double>(n)) out[q++] = i;
            }
            std::fprintf(stderr, "  %-15s n=%-9llu p50=%zu p90=%zu p99=%zu p99.9=%zu max=%zu%s\n", names[s],
                         static_cast<unsigned long long>(n), out[0], out[1], out[2], out[3], out[4],
                         out[4] + 1 == kBuckets ? "+" : "");
        }
    }
};
Histograms g_histograms;
}  // namespace

thread_local Pass t_pass;

void record(Stage s, std::int64_t ns) noexcept {
    std::size_t us = ns <= 0 ? 0 : static_cast<std::size_t>(ns / 1000);
    if (us >= kBuckets) us = kBuckets - 1;
    g_histograms.b[s][us].fetch_add(1, std::memory_order_relaxed);
}

}  // namespace tickwheel::rt::stage_trace
#endif
