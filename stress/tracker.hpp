// SPDX-License-Identifier: MIT OR Apache-2.0
// Per-timer bookkeeping shared by the stress programs: every timer the
// harness starts gets a Track, and the callable it hands to the runtime
// updates it. At the end, verify() checks the runtime's promises exactly:
//   * every callable was released (destroyed) exactly once;
//   * one-shot: at most one run; exactly one of {ran, a stop returned true,
//     cancelled by shutdown}; periodic: exactly one of {a stop returned
//     true, cancelled by shutdown};
//   * no run started before the deadline the caller last set;
//   * runs of one timer never overlapped;
//   * no run after stop_sync returned;
//   * the number cancelled by shutdown equals stats().cancelled_at_shutdown.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"
#include "tickwheel/runtime.hpp"

namespace stress {

using Clock = tickwheel::Clock;
using namespace std::chrono;

inline std::int64_t now_ns() { return duration_cast<nanoseconds>(Clock::now().time_since_epoch()).count(); }

/// Polls `pred` every 100 us until it holds or `timeout` passes; returns
/// whether it held. The timeout is reached only when a check fails.
template <class Pred>
bool wait_for(Pred pred, nanoseconds timeout) {
    return tw_test::wait_until(pred, timeout);
}

/// Shut until open()ed (tests/test_support.hpp): a callback blocks in
/// wait() until the harness has seen what it wanted to see while the
/// callback was blocked.
using tw_test::Gate;

struct Track {
    bool periodic = false;
    std::int64_t period_ns = 0;
    std::atomic<std::int64_t> deadline_ns{0};  // earliest allowed start of the next run
    std::atomic<int> runs{0};
    std::atomic<int> in_callback{0};
    std::atomic<int> overlaps{0};
    std::atomic<int> early{0};
    std::atomic<int> stop_true{0};
    std::atomic<int> released{0};
    std::atomic<bool> synced{false};  // a stop_sync returned true or the timer is done
    std::atomic<int> after_sync{0};   // runs that started after a stop_sync returned
    std::atomic<bool> refused{false};  // start() failed: released at once, never ran
    std::uint64_t id = 0;
    std::uint64_t seq = 0;  // creation order
};

/// Lateness samples, sharded by thread to avoid contention.
class Lateness {
public:
    void add(std::int64_t ns) {
        thread_local unsigned slot = next_.fetch_add(1) % kShards;
        std::lock_guard<std::mutex> g(shards_[slot].m);
        shards_[slot].v.push_back(ns);
    }
    /// The p-quantile in ns (0 if no samples).
    std::int64_t quantile(double p) {
        std::vector<std::int64_t> all;
        for (auto& s : shards_) all.insert(all.end(), s.v.begin(), s.v.end());
        if (all.empty()) return 0;
        std::sort(all.begin(), all.end());
        return all[static_cast<std::size_t>(p * static_cast<double>(all.size() - 1))];
    }
    std::string summary() {
        std::vector<std::int64_t> all;
        for (auto& s : shards_) all.insert(all.end(), s.v.begin(), s.v.end());
        if (all.empty()) return "no samples";
        std::sort(all.begin(), all.end());
        auto q = [&](double p) { return all[static_cast<std::size_t>(p * static_cast<double>(all.size() - 1))] / 1000; };
        char buf[160];
        std::snprintf(buf, sizeof buf, "n=%zu p50=%lld us p99=%lld us p99.9=%lld us max=%lld us", all.size(),
                      static_cast<long long>(q(0.5)), static_cast<long long>(q(0.99)),
                      static_cast<long long>(q(0.999)), static_cast<long long>(q(1.0)));
        return buf;
    }

private:
    static constexpr unsigned kShards = 16;
    struct Shard {
        std::mutex m;
        std::vector<std::int64_t> v;
    };
    Shard shards_[kShards];
    std::atomic<unsigned> next_{0};
};

/// Owns every Track (stable addresses) and checks them at the end.
class Tracker {
public:
    Track& make(bool periodic, std::int64_t deadline_ns, std::int64_t period_ns) {
        std::lock_guard<std::mutex> g(m_);
        Track& t = tracks_.emplace_back();
        t.seq = tracks_.size();
        t.periodic = periodic;
        t.period_ns = period_ns;
        t.deadline_ns.store(deadline_ns, std::memory_order_relaxed);
        return t;
    }

    /// The callable for a Track: checks each run, and its destructor is the
    /// release hook. `extra` runs inside the callback (may use the API).
    template <class Extra>
    auto callback(Track& t, Extra extra) {
        struct Releaser {
            Track* t;
            explicit Releaser(Track* x) : t(x) {}
            Releaser(Releaser&& o) noexcept : t(o.t) { o.t = nullptr; }
            Releaser& operator=(Releaser&&) = delete;
            ~Releaser() {
                if (t != nullptr) t->released.fetch_add(1, std::memory_order_acq_rel);
            }
        };
        return [this, rel = Releaser(&t), extra](tickwheel::Timer self) mutable {
            Track& tr = *rel.t;
            const std::int64_t start = now_ns();
            if (tr.in_callback.fetch_add(1, std::memory_order_acq_rel) != 0) tr.overlaps++;
            struct Leave {
                Track& t;
                ~Leave() { t.in_callback.fetch_sub(1, std::memory_order_acq_rel); }
            } leave{tr};
            if (tr.synced.load(std::memory_order_acquire)) tr.after_sync++;
            const int run = tr.runs.fetch_add(1, std::memory_order_acq_rel);
            std::int64_t due = tr.deadline_ns.load(std::memory_order_acquire);
            if (tr.periodic) due += static_cast<std::int64_t>(run) * tr.period_ns;
            if (start < due) tr.early++;
            // Lateness only for one-shot runs: for a periodic timer `due` is a
            // lower bound (skipped periods make run j later than first + j*period).
            if (!tr.periodic) lateness.add(start - due);
            extra(self, tr);  // may throw: Leave still runs
        };
    }

    struct Report {
        std::size_t timers = 0, refused = 0, ran_last = 0, stopped = 0, shutdown_cancelled = 0, runs = 0;
        std::size_t bad_release = 0, double_end = 0, early = 0, overlaps = 0, after_sync = 0;
        bool ok = false;
    };

    /// Call after the runtime has been shut down.
    Report verify(std::uint64_t runtime_cancelled_at_shutdown) {
        Report r;
        for (Track& t : tracks_) {
            ++r.timers;
            if (t.refused.load()) {
                ++r.refused;
                if (t.released.load() != 1 || t.runs.load() != 0) ++r.bad_release;
                continue;
            }
            const int runs = t.runs.load(), stops = t.stop_true.load();
            r.runs += static_cast<std::size_t>(runs);
            if (t.released.load() != 1) ++r.bad_release;
            r.early += static_cast<std::size_t>(t.early.load());
            r.overlaps += static_cast<std::size_t>(t.overlaps.load());
            r.after_sync += static_cast<std::size_t>(t.after_sync.load());
            const int last_run = (!t.periodic && runs > 0) ? 1 : 0;
            if (!t.periodic && runs > 1) ++r.double_end;
            if (last_run + stops > 1) ++r.double_end;
            if (last_run + stops == 0) ++r.shutdown_cancelled;
            r.ran_last += static_cast<std::size_t>(last_run);
            r.stopped += static_cast<std::size_t>(stops);
        }
        r.ok = r.bad_release == 0 && r.double_end == 0 && r.early == 0 && r.overlaps == 0 && r.after_sync == 0 &&
               r.shutdown_cancelled == runtime_cancelled_at_shutdown;
        return r;
    }

    static void print(const char* name, const Report& r, std::uint64_t runtime_cancelled) {
        std::printf(
            "%s: timers=%zu refused=%zu last-run=%zu stopped=%zu cancelled-at-shutdown=%zu (runtime says %llu) runs=%zu\n"
            "%s: release!=1: %zu, ended twice: %zu, early: %zu, overlapping runs: %zu, runs after stop_sync: %zu -> %s\n",
            name, r.timers, r.refused, r.ran_last, r.stopped, r.shutdown_cancelled, static_cast<unsigned long long>(runtime_cancelled),
            r.runs, name, r.bad_release, r.double_end, r.early, r.overlaps, r.after_sync, r.ok ? "OK" : "FAILED");
    }

    Lateness lateness;

private:
    std::mutex m_;
    std::deque<Track> tracks_;
};

}  // namespace stress
