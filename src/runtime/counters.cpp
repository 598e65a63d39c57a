#include "runtime/counters.hpp"

namespace tickwheel::rt {

unsigned this_thread_stripe() noexcept {
    static std::atomic<unsigned> next{0};
    thread_local const unsigned mine = next.fetch_add(1, std::memory_order_relaxed) % kStripes;
    return mine;
}

unsigned LatencyHistogram::bucket_of(std::uint64_t ns) noexcept {
    if (ns < kSub) return static_cast<unsigned>(ns);  // exact below 8 ns
    const unsigned log2 = 63u - static_cast<unsigned>(__builtin_clzll(ns));  // >= 3
    const unsigned sub = static_cast<unsigned>(ns >> (log2 - 3)) & (kSub - 1);
    return (log2 - 2) * kSub + sub;
}

std::uint64_t LatencyHistogram::bucket_mid(unsigned b) noexcept {
    if (b < kSub) return b;
    const unsigned log2 = b / kSub + 2;
    const std::uint64_t lo = (std::uint64_t{kSub} + (b % kSub)) << (log2 - 3);
    const std::uint64_t width = std::uint64_t{1} << (log2 - 3);
    return lo + width / 2;
}

void LatencyHistogram::record(std::uint64_t ns) noexcept {
    Stripe& s = stripes_[this_thread_stripe()];
    s.bucket[bucket_of(ns)].fetch_add(1, std::memory_order_relaxed);
    std::uint64_t m = s.max.load(std::memory_order_relaxed);
    while (ns > m && !s.max.compare_exchange_weak(m, ns, std::memory_order_relaxed)) {
    }
}

LatencyHistogram::Summary LatencyHistogram::summarize() const noexcept {
    Summary out;
    std::uint64_t local[kBuckets] = {};
    for (const Stripe& s : stripes_) {
        for (unsigned b = 0; b < kBuckets; ++b) local[b] += s.bucket[b].load(std::memory_order_relaxed);
        const std::uint64_t m = s.max.load(std::memory_order_relaxed);
        if (m > out.max) out.max = m;
    }
    for (unsigned b = 0; b < kBuckets; ++b) out.count += local[b];
    if (out.count == 0) return out;
    auto quantile = [&](double q) {
        const auto rank = static_cast<std::uint64_t>(q * static_cast<double>(out.count - 1));
        std::uint64_t seen = 0;
        for (unsigned b = 0; b < kBuckets; ++b) {
            seen += local[b];
            if (seen > rank) {
                const std::uint64_t mid = bucket_mid(b);
                return mid < out.max ? mid : out.max;
            }
        }
        return out.max;
    };
    out.p50 = quantile(0.50);
    out.p99 = quantile(0.99);
    out.p999 = quantile(0.999);
    return out;
}

}  // namespace tickwheel::rt
