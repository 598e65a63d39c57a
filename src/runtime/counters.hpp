// Statistics that many threads update: striped counters and a lateness
// histogram. Each thread adds to its own cache-line stripe (chosen once per
// thread), so counting costs one uncontended relaxed add; reading sums the
// stripes (a snapshot, not a linearizable one).
#pragma once

#include <atomic>
#include <cstdint>

namespace tickwheel::rt {

inline constexpr unsigned kStripes = 16;

/// This thread's stripe, 0..kStripes-1 (assigned round-robin on first use).
unsigned this_thread_stripe() noexcept;

enum Counter : unsigned {
    kStarted,
    kFired,
    kStopped,
    kReset,
    kCallbackExceptions,
    kCancelledAtShutdown,
    kReleased,  // callables destroyed (timers the runtime is done with)
    kCounterCount
};

class Counters {
public:
    void add(Counter c, std::uint64_t n = 1) noexcept {
        stripes_[this_thread_stripe()].v[c].fetch_add(n, std::memory_order_relaxed);
    }
    std::uint64_t sum(Counter c) const noexcept {
        std::uint64_t s = 0;
        for (const auto& st : stripes_) s += st.v[c].load(std::memory_order_relaxed);
        return s;
    }

private:
    struct alignas(64) Stripe {
        std::atomic<std::uint64_t> v[kCounterCount] = {};
    };
    Stripe stripes_[kStripes];
};

/// Log-linear histogram of nanosecond values: 8 sub-buckets per power of two
/// (relative error <= 12.5%, reported at the bucket midpoint: ~6%), up to
/// 2^63 ns. Striped like Counters.
class LatencyHistogram {
public:
    static constexpr unsigned kSub = 8;
    static constexpr unsigned kBuckets = 64 * kSub;

    void record(std::uint64_t ns) noexcept;
    struct Summary {
        std::uint64_t count = 0, p50 = 0, p99 = 0, p999 = 0, max = 0;
    };
    Summary summarize() const noexcept;

    static unsigned bucket_of(std::uint64_t ns) noexcept;
    static std::uint64_t bucket_mid(unsigned b) noexcept;

private:
    struct alignas(64) Stripe {
        std::atomic<std::uint64_t> bucket[kBuckets] = {};
        std::atomic<std::uint64_t> max{0};
    };
    Stripe stripes_[kStripes];
};

}  // namespace tickwheel::rt
