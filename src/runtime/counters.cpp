// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/counters.hpp"

#include <algorithm>
#include <iterator>

#include "runtime/fork.hpp"

namespace tickwheel::rt {

namespace {
std::atomic<bool> g_leased[kLeases];  // process-wide: which stripe indices a live thread holds

// Gives the lease back when its thread exits. t_stripe and t_exited are
// trivially destructible, so a count made after this destructor (by another
// thread_local's destructor) still works: it uses the shared stripe.
using stripe_detail::kNone;
using stripe_detail::t_stripe;
thread_local bool t_exited = false;
struct LeaseReturn {
    bool armed = false;
    ~LeaseReturn() {
        t_exited = true;
        if (!armed) return;
        const unsigned s = t_stripe;
        t_stripe = kShared;
        if (s < kLeases) g_leased[s].store(false, std::memory_order_release);
    }
};
thread_local LeaseReturn t_lease_return;

unsigned lease() noexcept {
    if (t_exited) return kShared;
    for (unsigned i = 0; i < kLeases; ++i) {
        bool expected = false;
        // Acquire: the previous holder's last counts (released with its lease)
        // are what this thread adds to.
        if (!g_leased[i].load(std::memory_order_relaxed) &&
            g_leased[i].compare_exchange_strong(expected, true, std::memory_order_acquire)) {
            t_lease_return.armed = true;  // first use in this thread: its destructor runs at exit
            return i;
        }
    }
    return kShared;
}
}  // namespace

// fork.cpp, rule 3: in the child's only thread, every lease but its own is
// given back (their threads are gone).
void fork_detail::stripes_in_child() noexcept {
    for (unsigned i = 0; i < kLeases; ++i) g_leased[i].store(i == t_stripe, std::memory_order_relaxed);
}

unsigned stripe_detail::take_lease() noexcept {
    unsigned s = t_stripe;
    if (s == kNone) s = t_stripe = lease();
    return s;
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

unsigned LatencyHistogram::export_bucket_of(std::uint64_t ns) noexcept {
    return static_cast<unsigned>(std::lower_bound(std::begin(kExportBoundsNs), std::end(kExportBoundsNs), ns) -
                                 std::begin(kExportBoundsNs));
}

namespace {
/// The smallest value of log-linear bucket b (UINT64_MAX past the last).
constexpr std::uint64_t bucket_low(unsigned b) noexcept {
    constexpr unsigned kSub = LatencyHistogram::kSub;
    if (b < kSub) return b;
    const unsigned log2 = b / kSub + 2;
    if (log2 >= 64) return ~std::uint64_t{0};
    return (std::uint64_t{kSub} + (b % kSub)) << (log2 - 3);
}
/// For each log-linear bucket: the export bucket of its smallest value.
struct ExportOfBucket {
    std::uint8_t of[LatencyHistogram::kBuckets] = {};
    constexpr ExportOfBucket() {
        for (unsigned b = 0; b < LatencyHistogram::kBuckets; ++b) {
            const std::uint64_t lo = bucket_low(b);
            unsigned e = 0;
            while (e < LatencyHistogram::kExportBounds && LatencyHistogram::kExportBoundsNs[e] < lo) ++e;
            of[b] = static_cast<std::uint8_t>(e);
        }
    }
};
constexpr ExportOfBucket kExportOfBucket{};
}  // namespace

unsigned LatencyHistogram::export_bucket_of(std::uint64_t ns, unsigned b) noexcept {
    const unsigned e = kExportOfBucket.of[b];
    return e + static_cast<unsigned>(e < kExportBounds && ns > kExportBoundsNs[e]);
}

void LatencyHistogram::record_on(unsigned si, std::uint64_t ns) noexcept {
    Stripe& s = stripes_[si];
    const unsigned b = bucket_of(ns);
    stripe_add(s.bucket[b], si, 1);
    stripe_add(s.exported[export_bucket_of(ns, b)], si, 1);
    stripe_add(s.sum, si, ns);
    std::uint64_t m = s.max.load(std::memory_order_relaxed);
    if (si != kShared) {
        if (ns > m) s.max.store(ns, std::memory_order_relaxed);
    } else {
        while (ns > m && !s.max.compare_exchange_weak(m, ns, std::memory_order_relaxed)) {
        }
    }
}

LatencyHistogram::Summary LatencyHistogram::summarize() const noexcept {
    std::uint64_t local[kBuckets] = {};
    std::uint64_t max = 0;
    for (const Stripe& s : stripes_) {
        for (unsigned b = 0; b < kBuckets; ++b) local[b] += s.bucket[b].load(std::memory_order_relaxed);
        const std::uint64_t m = s.max.load(std::memory_order_relaxed);
        if (m > max) max = m;
    }
    return summarize_buckets(local, max);
}

LatencyHistogram::Summary LatencyHistogram::summarize_buckets(const std::uint64_t* counts, std::uint64_t max) noexcept {
    Summary out;
    out.max = max;
    for (unsigned b = 0; b < kBuckets; ++b) out.count += counts[b];
    if (out.count == 0) return out;
    auto quantile = [&](double q) {
        const auto rank = static_cast<std::uint64_t>(q * static_cast<double>(out.count - 1));
        std::uint64_t seen = 0;
        for (unsigned b = 0; b < kBuckets; ++b) {
            seen += counts[b];
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

LatencyHistogram::Export LatencyHistogram::export_snapshot() const noexcept {
    constexpr std::uint64_t kNsPerS = 1'000'000'000;
    Export out;
    for (const Stripe& s : stripes_) {
        for (unsigned b = 0; b < kExportBuckets; ++b) out.bucket[b] += s.exported[b].load(std::memory_order_relaxed);
        const std::uint64_t sum = s.sum.load(std::memory_order_relaxed);
        out.sum_s += sum / kNsPerS;
        out.sum_ns += sum % kNsPerS;
        if (out.sum_ns >= kNsPerS) {
            out.sum_ns -= kNsPerS;
            ++out.sum_s;
        }
        const std::uint64_t m = s.max.load(std::memory_order_relaxed);
        if (m > out.max) out.max = m;
    }
    for (const std::uint64_t n : out.bucket) out.count += n;
    return out;
}

LatencyHistogram::Export LockedExportHistogram::snapshot() const noexcept {
    constexpr std::uint64_t kNsPerS = 1'000'000'000;
    LatencyHistogram::Export out;
    for (unsigned b = 0; b < LatencyHistogram::kExportBuckets; ++b) {
        out.bucket[b] = bucket_[b];
        out.count += bucket_[b];
    }
    out.sum_s = sum_ / kNsPerS;
    out.sum_ns = sum_ % kNsPerS;
    out.max = max_;
    return out;
}

RunBoard::Reading RunBoard::read() const noexcept {
    Reading r;
    for (const Stripe& st : stripes_) {
        if (st.depth.load(std::memory_order_acquire) == 0) continue;
        ++r.running;
        if (st.worker.load(std::memory_order_relaxed) != 0) ++r.workers_busy;
        const std::int64_t since = st.since.load(std::memory_order_relaxed);
        if (since != 0 && (r.oldest_since_ns == 0 || since < r.oldest_since_ns)) r.oldest_since_ns = since;
    }
    const std::int64_t shared = shared_running_.load(std::memory_order_relaxed);
    const std::int64_t shared_workers = shared_workers_.load(std::memory_order_relaxed);
    if (shared > 0) r.running += static_cast<std::uint64_t>(shared);
    if (shared_workers > 0) r.workers_busy += static_cast<std::uint64_t>(shared_workers);
    return r;
}

}  // namespace tickwheel::rt
