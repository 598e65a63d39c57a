// SPDX-License-Identifier: MIT OR Apache-2.0
// Statistics that many threads update: striped counters and a lateness
// histogram, with no locked instruction on the hot paths.
//
// A thread leases a stripe index for its lifetime (process-wide, the first
// time it counts; given back when it exits), so in every Counters and
// histogram it is the only writer of its stripe and adds with a relaxed load
// and store: no lock prefix, no cache-line bouncing. Readers sum the stripes
// with relaxed loads (a snapshot, not a linearizable one). When more than
// kLeases threads count at once, the others share stripe kShared and use
// fetch_add. A lease passes to a later thread with release/acquire, so that
// thread continues from the last value.
#pragma once

#include <atomic>
#include <cstdint>

namespace tickwheel::rt {

inline constexpr unsigned kLeases = 64;
inline constexpr unsigned kShared = kLeases;       // the stripe of threads without a lease
inline constexpr unsigned kStripes = kLeases + 1;

namespace stripe_detail {
inline constexpr unsigned kNone = ~0u;  // no lease asked for yet
/// This thread's stripe once known (constant-initialised: a plain TLS load,
/// no wrapper call); set by take_lease() and by the lease's return at exit.
/// Hidden: not part of the shared library's ABI (a program that includes
/// this header gets a copy of its own, always kNone: it takes the call).
/// Initial-exec: a plain %fs-relative load in the shared library too (no
/// __tls_get_addr); 4 bytes of the static TLS block, which a library loaded
/// by dlopen (Python, Node) takes from glibc's surplus.
[[gnu::visibility("hidden"), gnu::tls_model("initial-exec")]] inline thread_local unsigned t_stripe = kNone;
/// First use in a thread: takes a lease (or kShared) and records it.
unsigned take_lease() noexcept;
}  // namespace stripe_detail

/// This thread's stripe: its lease (0..kLeases-1), taken on first use, or
/// kShared if every lease is held. Inline: the hot paths count 3-4 times
/// per start+stop pair.
inline unsigned this_thread_stripe() noexcept {
    const unsigned s = stripe_detail::t_stripe;
    if (s != stripe_detail::kNone) [[likely]]
        return s;
    return stripe_detail::take_lease();
}

/// Adds n to a striped counter cell of stripe s (see above).
inline void stripe_add(std::atomic<std::uint64_t>& cell, unsigned s, std::uint64_t n) noexcept {
    if (s != kShared)
        cell.store(cell.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    else
        cell.fetch_add(n, std::memory_order_relaxed);
}

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
        const unsigned s = this_thread_stripe();
        stripe_add(stripes_[s].v[c], s, n);
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
///
/// For export (Prometheus, runtime/metrics.hpp) it also keeps the sum of the
/// values and exact counts per fixed bucket of kExportBoundsNs ("value <=
/// bound", as Prometheus' `le` means): the log-linear buckets do not line up
/// with decimal bounds. Both are counted by the same record(), so at
/// quiescence the export buckets add up to summarize().count.
class LatencyHistogram {
public:
    static constexpr unsigned kSub = 8;
    static constexpr unsigned kBuckets = 64 * kSub;
    /// The export buckets' upper bounds (inclusive), in ns: 5 us .. 10 s.
    static constexpr std::uint64_t kExportBoundsNs[] = {
        5'000,       10'000,      25'000,        50'000,        100'000,       250'000,       500'000,
        1'000'000,   2'500'000,   5'000'000,     10'000'000,    25'000'000,    50'000'000,    100'000'000,
        250'000'000, 500'000'000, 1'000'000'000, 2'500'000'000, 5'000'000'000, 10'000'000'000};
    static constexpr unsigned kExportBounds = sizeof kExportBoundsNs / sizeof kExportBoundsNs[0];
    /// One bucket per bound, plus the last one: above the largest bound.
    static constexpr unsigned kExportBuckets = kExportBounds + 1;

    void record(std::uint64_t ns) noexcept { record_on(this_thread_stripe(), ns); }
    /// record() on stripe `si` (this_thread_stripe(), looked up once by a
    /// caller that records into several histograms: a run's stages).
    void record_on(unsigned si, std::uint64_t ns) noexcept;
    struct Summary {
        std::uint64_t count = 0, p50 = 0, p99 = 0, p999 = 0, max = 0;
    };
    Summary summarize() const noexcept;
    /// The summary of kBuckets log-linear bucket counts and their maximum.
    static Summary summarize_buckets(const std::uint64_t* counts, std::uint64_t max) noexcept;

    /// The export buckets (NOT cumulative: bucket[i] counts the values in
    /// (bound[i-1], bound[i]]; the last one those above every bound), their
    /// total, and the values' sum as whole seconds + nanoseconds (exact; a
    /// stripe's uint64 share of it wraps after 2^64 ns, 584 years).
    struct Export {
        std::uint64_t bucket[kExportBuckets] = {};
        std::uint64_t count = 0;
        std::uint64_t sum_s = 0, sum_ns = 0;  // sum_ns < 1e9
        std::uint64_t max = 0;
    };
    Export export_snapshot() const noexcept;

    static unsigned bucket_of(std::uint64_t ns) noexcept;
    static std::uint64_t bucket_mid(unsigned b) noexcept;
    /// The export bucket a value falls in: the first bound >= ns, or
    /// kExportBounds above them all.
    static unsigned export_bucket_of(std::uint64_t ns) noexcept;
    /// The same, knowing its log-linear bucket `b` (bucket_of(ns)): a table
    /// and one compare (a log-linear bucket spans < 12.5%, the export bounds
    /// are >= 2x apart: it straddles at most one bound).
    static unsigned export_bucket_of(std::uint64_t ns, unsigned b) noexcept;

private:
    struct alignas(64) Stripe {
        std::atomic<std::uint64_t> bucket[kBuckets] = {};
        std::atomic<std::uint64_t> max{0};
        std::atomic<std::uint64_t> sum{0};
        std::atomic<std::uint64_t> exported[kExportBuckets] = {};
    };
    Stripe stripes_[kStripes];
};

/// The export buckets of LatencyHistogram alone (no percentiles), for
/// values recorded under a lock the owner holds anyway: a delivery queue's
/// lateness by stage (issue 34). Not thread-safe: the owner serialises
/// record() and snapshot().
class LockedExportHistogram {
public:
    void record(std::uint64_t ns) noexcept {
        ++bucket_[LatencyHistogram::export_bucket_of(ns)];
        sum_ += ns;
        if (ns > max_) max_ = ns;
    }
    LatencyHistogram::Export snapshot() const noexcept;

private:
    std::uint64_t bucket_[LatencyHistogram::kExportBuckets] = {};
    std::uint64_t sum_ = 0;  // wraps after 2^64 ns (584 years)
    std::uint64_t max_ = 0;
};

/// The stages of a run's lateness (issue 34), in the order the exports use.
enum Stage : unsigned {
    kStageDriver,  // deadline -> its shard's driver handed it over (to the workers or its queue)
    kStageWait,    // handed over -> the callback's start (a worker, or the queue's run)
    kStageRun,     // the callback's duration
    kStageCount
};
/// The `stage` label of each Stage.
inline constexpr const char* kStageNames[kStageCount] = {"driver", "wait", "run"};

/// Which threads run a callback of one runtime now, and since when (issue
/// 34: the busy-worker gauge and the age of the longest-running callback).
/// Striped like Counters: a thread with a lease writes only its own stripe
/// (plain stores, no locked instruction); threads on the shared stripe
/// (more than kLeases counting at once) are counted with fetch_add, and
/// their runs' ages are not tracked. A thread that runs a callback inside
/// another (a callback running a delivery queue) counts once, from its
/// outermost run.
class RunBoard {
public:
    /// This thread begins a callback at `since_ns` (monotonic); `worker`:
    /// on one of the runtime's workers (not a queue's thread, not an advance).
    void begin(std::int64_t since_ns, bool worker) noexcept { begin_on(this_thread_stripe(), since_ns, worker); }
    void begin_on(unsigned s, std::int64_t since_ns, bool worker) noexcept {
        if (s == kShared) [[unlikely]] {
            shared_running_.fetch_add(1, std::memory_order_relaxed);
            if (worker) shared_workers_.fetch_add(1, std::memory_order_relaxed);
            return;
        }
        Stripe& st = stripes_[s];
        const std::uint32_t d = st.depth.load(std::memory_order_relaxed);
        if (d == 0) {
            st.worker.store(worker ? 1 : 0, std::memory_order_relaxed);
            st.since.store(since_ns, std::memory_order_relaxed);
        }
        st.depth.store(d + 1, std::memory_order_release);
    }
    /// The callback begun last on this thread returned.
    void end(bool worker) noexcept { end_on(this_thread_stripe(), worker); }
    void end_on(unsigned s, bool worker) noexcept {
        if (s == kShared) [[unlikely]] {
            shared_running_.fetch_sub(1, std::memory_order_relaxed);
            if (worker) shared_workers_.fetch_sub(1, std::memory_order_relaxed);
            return;
        }
        Stripe& st = stripes_[s];
        st.depth.store(st.depth.load(std::memory_order_relaxed) - 1, std::memory_order_release);
    }
    struct Reading {
        std::uint64_t running = 0;       // callbacks in progress (outermost runs), any thread
        std::uint64_t workers_busy = 0;  // ... of them on the runtime's workers
        std::int64_t oldest_since_ns = 0;  // the earliest start among them (leased threads); 0: none
    };
    /// A recent reading (relaxed loads; not one instant). Any thread.
    Reading read() const noexcept;

private:
    struct alignas(64) Stripe {
        std::atomic<std::uint32_t> depth{0};   // runs of this runtime nested on the thread
        std::atomic<std::uint32_t> worker{0};  // the outermost one is on a worker
        std::atomic<std::int64_t> since{0};    // the outermost one's start
    };
    Stripe stripes_[kLeases];
    alignas(64) std::atomic<std::int64_t> shared_running_{0};
    std::atomic<std::int64_t> shared_workers_{0};
};

/// One striped count (as Counters, a single counter).
class StripedCount {
public:
    void add(std::uint64_t n = 1) noexcept {
        const unsigned s = this_thread_stripe();
        stripe_add(stripes_[s].v, s, n);
    }
    std::uint64_t sum() const noexcept {
        std::uint64_t t = 0;
        for (const auto& st : stripes_) t += st.v.load(std::memory_order_relaxed);
        return t;
    }

private:
    struct alignas(64) Stripe {
        std::atomic<std::uint64_t> v{0};
    };
    Stripe stripes_[kStripes];
};

/// The log-linear buckets of LatencyHistogram without the stripes (4 KB):
/// for values recorded under a lock the owner holds anyway (a delivery
/// queue's). Not thread-safe: the owner serialises record() and summarize().
class LockedHistogram {
public:
    void record(std::uint64_t ns) noexcept {
        ++bucket_[LatencyHistogram::bucket_of(ns)];
        if (ns > max_) max_ = ns;
    }
    LatencyHistogram::Summary summarize() const noexcept {
        return LatencyHistogram::summarize_buckets(bucket_, max_);
    }

private:
    std::uint64_t bucket_[LatencyHistogram::kBuckets] = {};
    std::uint64_t max_ = 0;
};

}  // namespace tickwheel::rt
