// SPDX-License-Identifier: MIT OR Apache-2.0
// The batch calls (issue 14): tw_timer_start_n / tw_timer_stop_n /
// tw_timer_reset_n and the C++ span overloads of Runtime::start/stop/reset.
// Every precise point of tickwheel.h's "Batches": the call's own errors,
// n == 0, per-element codes equal to the single calls' (a differential test
// on two manual-clock runtimes), the release hook of every element exactly
// once, the spec stride, never early from one clock reading, the limit,
// shutdown, failed inbox posts, batches over every shard, and batches racing
// single calls, fires and shutdown (run under TSan in the tsan preset).
// Suites: CApiBatch* (C), RuntimeBatch* (C++). The forced race of a batch
// parked between lookup and CAS is in correctness_test.cpp (StaleWindow),
// the fork child's TW_EFORKED in fork_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "runtime/test_hooks.hpp"
#include "test_support.hpp"
#include "test_support/capi.hpp"
#include "tickwheel/runtime.hpp"
#include "tickwheel/tickwheel.h"

namespace tw = tickwheel;
using namespace std::chrono_literals;
using tw_test::wait_until;

namespace {

using namespace tw_test::capi;

RtPtr make_runtime(std::uint32_t shards = 2, std::uint64_t max_timers = 0, std::uint32_t flags = 0) {
    tw_config cfg = c_config(shards, 2);
    cfg.max_timers = max_timers;
    cfg.flags = flags;
    return RtPtr(create_runtime(cfg));
}

/// One timer's observable life.
struct Probe {
    std::atomic<int> runs{0};
    std::atomic<int> released{0};
    std::atomic<std::uint64_t> first_run_ns{0};
};

void probe_cb(void* arg, tw_timer) {
    auto* p = static_cast<Probe*>(arg);
    std::uint64_t zero = 0;
    p->first_run_ns.compare_exchange_strong(zero, tw_now_ns());
    p->runs.fetch_add(1);
}
void probe_release(void* arg) { static_cast<Probe*>(arg)->released.fetch_add(1); }

tw_timer_spec spec_of(Probe& p, std::uint64_t delay_ns, std::uint64_t period_ns = 0, std::int32_t shard = -1) {
    tw_timer_spec s = c_spec(probe_cb, &p, probe_release, delay_ns, period_ns);
    s.shard = shard;
    return s;
}

/// Arms test_hooks::fail_inbox_posts for its life.
struct FailPosts {
    explicit FailPosts(std::int64_t n) { tw::rt::test_hooks::fail_inbox_posts.store(n); }
    ~FailPosts() { tw::rt::test_hooks::fail_inbox_posts.store(0); }
};

int released_total(const std::deque<Probe>& ps) {
    int n = 0;
    for (const Probe& p : ps) n += p.released.load();
    return n;
}

}  // namespace

// =============================================================================
// The call's own errors, n == 0
// =============================================================================
TEST(CApiBatch, BadArgumentsAreTheCallsEinvalAndTouchNothing) {
    RtPtr rt = make_runtime();
    Probe p;
    tw_timer_spec s = spec_of(p, 10000 * kMs);
    tw_timer ids[2] = {7, 8};
    int results[2] = {5, 5};
    EXPECT_EQ(tw_timer_start_n(nullptr, &s, 1, ids), TW_EINVAL);
    EXPECT_EQ(tw_timer_start_n(rt.get(), nullptr, 1, ids), TW_EINVAL);
    EXPECT_EQ(tw_timer_start_n(rt.get(), &s, 1, nullptr), TW_EINVAL);
    EXPECT_EQ(tw_timer_start_n(rt.get(), &s, static_cast<std::size_t>(INT_MAX) + 1, ids), TW_EINVAL);
    EXPECT_EQ(tw_timer_stop_n(nullptr, ids, 2, results), TW_EINVAL);
    EXPECT_EQ(tw_timer_stop_n(rt.get(), nullptr, 2, results), TW_EINVAL);
    EXPECT_EQ(tw_timer_stop_n(rt.get(), ids, static_cast<std::size_t>(INT_MAX) + 1, results), TW_EINVAL);
    EXPECT_EQ(tw_timer_reset_n(nullptr, ids, 2, 0, results), TW_EINVAL);
    EXPECT_EQ(tw_timer_reset_n(rt.get(), nullptr, 2, 0, results), TW_EINVAL);
    EXPECT_EQ(tw_timer_reset_n(rt.get(), ids, 2, TW_MAX_DELAY_NS + 1, results), TW_EINVAL);
    EXPECT_EQ(ids[0], 7u);
    EXPECT_EQ(ids[1], 8u);
    EXPECT_EQ(results[0], 5) << "a refused call writes nothing";
    // A first spec whose size is no tw_timer_spec layout, or breaks the
    // array's alignment: the stride is unknown, the whole call is refused.
    for (const std::uint32_t size : {0u, 8u, 55u, 57u, 60u, 63u, 80u, 92u, 100u, 4097u, 8192u}) {
        tw_timer_spec bad = s;
        bad.size = size;
        EXPECT_EQ(tw_timer_start_n(rt.get(), &bad, 1, ids), TW_EINVAL) << size;
    }
    EXPECT_EQ(p.released.load(), 0) << "TW_EINVAL never calls a hook";
    tw_stats st;
    st.size = sizeof st;
    ASSERT_EQ(tw_runtime_stats(rt.get(), &st), TW_OK);
    EXPECT_EQ(st.started, 0u);
}

TEST(CApiBatch, ZeroCountReturnsZeroAlsoWithNullArrays) {
    RtPtr rt = make_runtime();
    EXPECT_EQ(tw_timer_start_n(rt.get(), nullptr, 0, nullptr), 0);
    EXPECT_EQ(tw_timer_stop_n(rt.get(), nullptr, 0, nullptr), 0);
    EXPECT_EQ(tw_timer_reset_n(rt.get(), nullptr, 0, 5 * kMs, nullptr), 0);
    // ... but still not with a NULL runtime or an impossible delay.
    EXPECT_EQ(tw_timer_start_n(nullptr, nullptr, 0, nullptr), TW_EINVAL);
    EXPECT_EQ(tw_timer_reset_n(rt.get(), nullptr, 0, TW_MAX_DELAY_NS + 1, nullptr), TW_EINVAL);
}

// =============================================================================
// tw_timer_start_n
// =============================================================================
TEST(CApiBatch, StartNStartsEveryValidSpecAndSkipsTheRefusedOnesWithoutTheirHooks) {
    constexpr int kN = 40;
    std::deque<Probe> probes(kN);  // (outlives the runtime)
    RtPtr rt = make_runtime(4);
    std::vector<tw_timer_spec> specs;
    std::set<int> refused;
    for (int i = 0; i < kN; ++i) {
        tw_timer_spec s = spec_of(probes[static_cast<std::size_t>(i)], 10000 * kMs, 0, i % 5 == 0 ? i % 4 : -1);
        switch (i % 9) {  // refused specs in the middle, each for its own reason
            case 3: s.callback = nullptr; break;
            case 5: s.delay_ns = TW_MAX_DELAY_NS + 1; break;
            case 7: s.shard = -2; break;
            case 8: s.period_policy = 3; break;
            default: break;
        }
        if (i % 9 == 3 || i % 9 == 5 || i % 9 == 7 || i % 9 == 8) refused.insert(i);
        specs.push_back(s);
    }
    std::vector<tw_timer> out(kN, 12345);
    const int started = tw_timer_start_n(rt.get(), specs.data(), kN, out.data());
    EXPECT_EQ(started, kN - static_cast<int>(refused.size()));
    std::set<tw_timer> distinct;
    for (int i = 0; i < kN; ++i) {
        const auto u = static_cast<std::size_t>(i);
        if (refused.count(i) != 0) {
            EXPECT_EQ(out[u], 0u) << i;
            EXPECT_EQ(probes[u].released.load(), 0) << i << ": a TW_EINVAL element's hook was called";
        } else {
            EXPECT_NE(out[u], 0u) << i;
            distinct.insert(out[u]);
            if (specs[u].shard >= 0) {
                EXPECT_EQ(tw_test::id_shard(out[u]), static_cast<std::uint32_t>(specs[u].shard));
            }
        }
    }
    EXPECT_EQ(distinct.size(), static_cast<std::size_t>(started));
    // Every started timer is live and stoppable exactly once.
    for (int i = 0; i < kN; ++i)
        if (refused.count(i) == 0) {
            EXPECT_EQ(tw_timer_stop(rt.get(), out[static_cast<std::size_t>(i)]), TW_OK) << i;
        }
    for (int i = 0; i < kN; ++i)
        EXPECT_EQ(probes[static_cast<std::size_t>(i)].released.load(), refused.count(i) != 0 ? 0 : 1) << i;
}

TEST(CApiBatch, StartNIsNeverEarlyAgainstAReadingTakenBeforeTheCall) {
    constexpr int kN = 64;
    std::deque<Probe> probes(kN);
    RtPtr rt = make_runtime();
    std::vector<tw_timer_spec> specs;
    for (int i = 0; i < kN; ++i)
        specs.push_back(spec_of(probes[static_cast<std::size_t>(i)], static_cast<std::uint64_t>(i % 16) * kMs));
    std::vector<tw_timer> out(kN);
    const std::uint64_t before = tw_now_ns();
    ASSERT_EQ(tw_timer_start_n(rt.get(), specs.data(), kN, out.data()), kN);
    ASSERT_TRUE(wait_until([&] { return released_total(probes) == kN; }));
    for (int i = 0; i < kN; ++i) {
        const Probe& p = probes[static_cast<std::size_t>(i)];
        EXPECT_EQ(p.runs.load(), 1) << i;
        EXPECT_GE(p.first_run_ns.load(), before + specs[static_cast<std::size_t>(i)].delay_ns) << i << ": early";
    }
}

namespace {
/// Starts one timer per probe with one tw_timer_start_n, due `delay_ns` from
/// now, spread round-robin over `shards` shards; their ids in `ids`.
/// Returns what tw_timer_start_n returned.
int start_spread(tw_runtime* rt, std::deque<Probe>& probes, std::uint64_t delay_ns, int shards,
                 std::vector<tw_timer>& ids) {
    std::vector<tw_timer_spec> specs;
    for (std::size_t i = 0; i < probes.size(); ++i)
        specs.push_back(spec_of(probes[i], delay_ns, 0, static_cast<std::int32_t>(i % static_cast<std::size_t>(shards))));
    ids.assign(probes.size(), 0);
    return tw_timer_start_n(rt, specs.data(), specs.size(), ids.data());
}

/// n specs of `stride` bytes (a multiple of 8) in an aligned buffer, each
/// the first `stride` bytes of a spec for probes[i] (zero beyond ours).
std::vector<std::uint64_t> specs_of_stride(std::deque<Probe>& probes, std::uint32_t stride) {
    std::vector<std::uint64_t> buf(probes.size() * stride / 8, 0);
    for (std::size_t i = 0; i < probes.size(); ++i) {
        tw_timer_spec s = spec_of(probes[i], 10000 * kMs);
        s.size = stride;
        std::memcpy(reinterpret_cast<char*>(buf.data()) + i * stride, &s, std::min<std::size_t>(stride, sizeof s));
    }
    return buf;
}
}  // namespace

TEST(CApiBatch, StartNStrideIsTheFirstSpecsSize) {
    std::deque<std::deque<Probe>> all;
    RtPtr rt = make_runtime();
    // The 1.0 layout (56), 1.2's (64), ours, and a newer caller's zero-padded one.
    for (const std::uint32_t stride : {56u, 64u, static_cast<std::uint32_t>(sizeof(tw_timer_spec)), 96u, 256u}) {
        SCOPED_TRACE(stride);
        std::deque<Probe>& probes = all.emplace_back(6);
        std::vector<std::uint64_t> buf = specs_of_stride(probes, stride);
        char* bytes = reinterpret_cast<char*>(buf.data());
        // Element 2 says another size: refused (its hook is not called), the
        // batch goes on at the array's stride.
        const std::uint32_t other = stride == 56 ? 64 : 56;
        std::memcpy(bytes + 2 * stride, &other, sizeof other);
        // Element 4 of a wider layout has a non-zero byte this library does
        // not know: refused, as by tw_timer_start_ex().
        if (stride > sizeof(tw_timer_spec)) bytes[4 * stride + stride - 1] = 1;
        std::vector<tw_timer> out(probes.size());
        const int want = stride > sizeof(tw_timer_spec) ? 4 : 5;
        EXPECT_EQ(tw_timer_start_n(rt.get(), reinterpret_cast<const tw_timer_spec*>(bytes), probes.size(), out.data()),
                  want);
        for (std::size_t i = 0; i < probes.size(); ++i) {
            const bool refused = i == 2 || (i == 4 && stride > sizeof(tw_timer_spec));
            EXPECT_EQ(out[i] == 0, refused) << i;
            if (!refused) {
                EXPECT_EQ(tw_timer_stop(rt.get(), out[i]), TW_OK) << i;
            }
            EXPECT_EQ(probes[i].released.load(), refused ? 0 : 1) << i;
        }
    }
}

TEST(CApiBatch, StartNBeyondTheLimitIsEagainAndThoseHooksRunBeforeItReturns) {
    std::deque<Probe> probes(8);
    Probe extra;  // (both outlive the runtime: its destruction releases the timers still pending)
    RtPtr rt = make_runtime(2, /*max_timers=*/5);
    std::vector<tw_timer_spec> specs;
    for (Probe& p : probes) specs.push_back(spec_of(p, 10000 * kMs));
    specs[1].callback = nullptr;  // refused: takes no room, no hook
    std::vector<tw_timer> out(specs.size());
    EXPECT_EQ(tw_timer_start_n(rt.get(), specs.data(), specs.size(), out.data()), 5);
    // In order: 0, 2, 3, 4, 5 got the room; 6 and 7 are TW_EAGAIN.
    for (std::size_t i = 0; i < specs.size(); ++i) {
        const bool started = i != 1 && i <= 5;
        EXPECT_EQ(out[i] != 0, started) << i;
        EXPECT_EQ(probes[i].released.load(), i >= 6 ? 1 : 0) << i;
    }
    // The room comes back as timers end.
    EXPECT_EQ(tw_timer_stop(rt.get(), out[0]), TW_OK);
    tw_timer more = 0;
    tw_timer_spec s = spec_of(extra, 10000 * kMs);
    EXPECT_EQ(tw_timer_start_n(rt.get(), &s, 1, &more), 1);
    EXPECT_NE(more, 0u);
}

TEST(CApiBatch, StartNWhoseInsertCannotBeQueuedReleasesExactlyThoseStarts) {
    std::deque<Probe> probes(10);
    RtPtr rt = make_runtime(1);
    std::vector<tw_timer_spec> specs;
    for (Probe& p : probes) specs.push_back(spec_of(p, 60000 * kMs));
    std::vector<tw_timer> out(specs.size(), 99);
    {
        FailPosts fail(3);  // the block fails; then each Insert alone: the first three fail
        EXPECT_EQ(tw_timer_start_n(rt.get(), specs.data(), specs.size(), out.data()), 7);
    }
    for (std::size_t i = 0; i < specs.size(); ++i) {
        EXPECT_EQ(out[i] == 0, i < 3) << i;
        EXPECT_EQ(probes[i].released.load(), i < 3 ? 1 : 0) << i << ": released before the call returned";
    }
    // The others are pending (filed by their shard); the taken-back ones are gone.
    tw_stats st;
    st.size = sizeof st;
    ASSERT_TRUE(wait_until([&] { return tw_runtime_stats(rt.get(), &st) == TW_OK && st.pending == 7; }));
    EXPECT_EQ(st.started, 7u);
    EXPECT_EQ(st.live, 7u);
    EXPECT_EQ(tw_timer_stop_n(rt.get(), out.data(), out.size(), nullptr), 7);
    for (std::size_t i = 0; i < specs.size(); ++i) {
        EXPECT_EQ(probes[i].released.load(), 1) << i;
        EXPECT_EQ(probes[i].runs.load(), 0) << i;
    }
}

TEST(CApiBatch, EveryBatchAfterShutdownIsEshutdownPerElement) {
    Probe kept;
    std::deque<Probe> probes(3);
    RtPtr rt = make_runtime();
    tw_timer_spec s0 = spec_of(kept, 10000 * kMs);
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start_n(rt.get(), &s0, 1, &id), 1);
    ASSERT_EQ(tw_runtime_shutdown(rt.get()), TW_OK);
    EXPECT_EQ(kept.released.load(), 1);
    std::vector<tw_timer_spec> specs;
    for (Probe& p : probes) specs.push_back(spec_of(p, 1 * kMs));
    std::vector<tw_timer> out(3, 1);
    EXPECT_EQ(tw_timer_start_n(rt.get(), specs.data(), specs.size(), out.data()), 0);
    for (std::size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(out[i], 0u);
        EXPECT_EQ(probes[i].released.load(), 1) << "TW_ESHUTDOWN calls the hook, as tw_timer_start_ex()";
    }
    const tw_timer ids[3] = {id, 0, 12345};
    int results[3] = {1, 1, 1};
    EXPECT_EQ(tw_timer_stop_n(rt.get(), ids, 3, results), 0);
    for (int r : results) EXPECT_EQ(r, TW_ESHUTDOWN);
    std::fill(results, results + 3, 1);
    EXPECT_EQ(tw_timer_reset_n(rt.get(), ids, 3, kMs, results), 0);
    for (int r : results) EXPECT_EQ(r, TW_ESHUTDOWN);
    EXPECT_EQ(tw_timer_stop_n(rt.get(), ids, 3, nullptr), 0);
}

// =============================================================================
// tw_timer_stop_n
// =============================================================================
TEST(CApiBatch, StopNOfAMixedBatchOverEveryShardGivesEachElementTheSingleCallsCode) {
    std::deque<Probe> pending(12);
    Probe fired_p, stopped_p;
    RtPtr rt = make_runtime(4);
    std::vector<tw_timer> p;
    ASSERT_EQ(start_spread(rt.get(), pending, 10000 * kMs, 4, p), 12);
    tw_timer fired = 0, stopped = 0;
    tw_timer_spec s = spec_of(fired_p, 0);
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &fired), TW_OK);
    s = spec_of(stopped_p, 10000 * kMs);
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &stopped), TW_OK);
    ASSERT_EQ(tw_timer_stop(rt.get(), stopped), TW_OK);
    ASSERT_TRUE(wait_until([&] { return fired_p.released.load() == 1; }));
    const tw_timer random_id = 0xDEADBEEFCAFEF00Dull;
    const tw_timer no_shard = (std::uint64_t{1} << 40) | (std::uint64_t{200} << 32);
    const tw_timer no_index = (std::uint64_t{1} << 40) | 0xFFFFFFF0ull;
    std::vector<tw_timer> ids;
    std::vector<int> want;
    auto add = [&](tw_timer id, int code) {
        ids.push_back(id);
        want.push_back(code);
    };
    add(p[0], TW_OK);
    add(0, TW_ENOENT);
    add(fired, TW_ENOENT);
    add(p[1], TW_OK);
    add(stopped, TW_ENOENT);
    add(random_id, TW_ENOENT);
    add(p[2], TW_OK);
    add(p[0], TW_ENOENT);  // stopped by this very batch, above
    add(no_shard, TW_ENOENT);
    for (std::size_t i = 3; i < p.size(); ++i) add(p[i], TW_OK);
    add(no_index, TW_ENOENT);
    add(p[11], TW_ENOENT);
    std::vector<int> results(ids.size(), 77);
    EXPECT_EQ(tw_timer_stop_n(rt.get(), ids.data(), ids.size(), results.data()), 12);
    EXPECT_EQ(results, want);
    // Each release hook ran inside the call, exactly once; nothing ran.
    for (std::size_t i = 0; i < pending.size(); ++i) {
        EXPECT_EQ(pending[i].released.load(), 1) << i;
        EXPECT_EQ(pending[i].runs.load(), 0) << i;
    }
    EXPECT_EQ(fired_p.released.load(), 1);
    EXPECT_EQ(stopped_p.released.load(), 1);
    // Without results: the same count, again as single calls would.
    EXPECT_EQ(tw_timer_stop_n(rt.get(), ids.data(), ids.size(), nullptr), 0);
    tw_stats st;
    st.size = sizeof st;
    ASSERT_EQ(tw_runtime_stats(rt.get(), &st), TW_OK);
    EXPECT_EQ(st.stopped, 13u);
    EXPECT_EQ(st.live, 0u);
    // Every shard's stopped records come back (the Cancels reached them).
    ASSERT_TRUE(wait_until([&] { return tw_runtime_stats(rt.get(), &st) == TW_OK && st.pending == 0; }));
}

namespace {
struct Gated {
    tw_test::Gate in, go;
    std::atomic<int> runs{0};
    std::atomic<int> released{0};
};
void gated_cb(void* arg, tw_timer) {
    auto* g = static_cast<Gated*>(arg);
    g->runs.fetch_add(1);
    g->in.open();
    EXPECT_TRUE(g->go.wait(tw_test::kWait));
}
void gated_release(void* arg) { static_cast<Gated*>(arg)->released.fetch_add(1); }
}  // namespace

TEST(CApiBatch, StopNOfRunningTimersIsTheSingleStopsAnswerAndReleasesAfterTheRun) {
    Gated periodic, oneshot;
    RtPtr rt = make_runtime(2);
    tw_timer_spec s = c_spec(gated_cb, &periodic, gated_release, 0, 1 * kMs);
    tw_timer ids[2] = {0, 0};
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &ids[0]), TW_OK);
    s.arg = &oneshot;
    s.period_ns = 0;
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &ids[1]), TW_OK);
    struct OpenOnExit {
        Gated& a;
        Gated& b;
        ~OpenOnExit() {
            a.go.open();
            b.go.open();
        }
    } open_on_exit{periodic, oneshot};
    ASSERT_TRUE(periodic.in.wait(tw_test::kWait));
    ASSERT_TRUE(oneshot.in.wait(tw_test::kWait));
    int results[2] = {0, 0};
    // A running periodic timer: stopped (no further run); a running one-shot
    // is on its last run: TW_ENOENT.
    EXPECT_EQ(tw_timer_stop_n(rt.get(), ids, 2, results), 1);
    EXPECT_EQ(results[0], TW_OK);
    EXPECT_EQ(results[1], TW_ENOENT);
    EXPECT_EQ(periodic.released.load(), 0) << "released only after its run";
    periodic.go.open();
    oneshot.go.open();
    ASSERT_TRUE(wait_until([&] { return periodic.released.load() == 1 && oneshot.released.load() == 1; }));
    EXPECT_EQ(periodic.runs.load(), 1);
    EXPECT_EQ(oneshot.runs.load(), 1);
}

TEST(CApiBatch, StopNCancelsAreNeverLost) {
    constexpr std::size_t kN = 3000;  // > the inbox's reserve
    std::deque<Probe> probes(kN);
    RtPtr rt = make_runtime(1);
    std::vector<tw_timer_spec> specs;
    for (Probe& p : probes) specs.push_back(spec_of(p, 10000 * kMs));
    std::vector<tw_timer> ids(kN);
    ASSERT_EQ(tw_timer_start_n(rt.get(), specs.data(), kN, ids.data()), static_cast<int>(kN));
    tw_stats st;
    st.size = sizeof st;
    ASSERT_TRUE(wait_until([&] { return tw_runtime_stats(rt.get(), &st) == TW_OK && st.pending == kN; }));
    {
        FailPosts fail(1'000'000'000);
        EXPECT_EQ(tw_timer_stop_n(rt.get(), ids.data(), kN, nullptr), static_cast<int>(kN));
    }
    // Every record comes back to the shard, which unlinks it.
    EXPECT_TRUE(wait_until([&] { return tw_runtime_stats(rt.get(), &st) == TW_OK && st.pending == 0; }))
        << st.pending << " stopped timers still filed: a Cancel was lost";
    EXPECT_EQ(released_total(probes), static_cast<int>(kN));
}

// =============================================================================
// tw_timer_reset_n
// =============================================================================
TEST(CApiBatch, ResetNMovesEveryDeadlineNeverEarlyAndAnswersTheOthersEnoent) {
    std::deque<Probe> probes(9);
    RtPtr rt = make_runtime(3);
    std::vector<tw_timer> ids;
    ASSERT_EQ(start_spread(rt.get(), probes, 60000 * kMs, 3, ids), 9);
    tw_stats st;
    st.size = sizeof st;
    ASSERT_TRUE(wait_until([&] { return tw_runtime_stats(rt.get(), &st) == TW_OK && st.pending == 9; }));
    ASSERT_EQ(tw_timer_stop(rt.get(), ids[4]), TW_OK);
    std::vector<tw_timer> batch = ids;
    batch.push_back(0);
    batch.push_back(0xDEADBEEFCAFEF00Dull);
    std::vector<int> results(batch.size(), 7);
    const std::uint64_t before = tw_now_ns();
    // Earlier than every deadline: each shard must be woken (a Refile each).
    EXPECT_EQ(tw_timer_reset_n(rt.get(), batch.data(), batch.size(), 30 * kMs, results.data()), 8);
    for (std::size_t i = 0; i < batch.size(); ++i)
        EXPECT_EQ(results[i], i == 4 || i >= 9 ? TW_ENOENT : TW_OK) << i;
    ASSERT_TRUE(wait_until([&] { return released_total(probes) == 9; })) << "an earlier deadline was not honoured";
    for (std::size_t i = 0; i < probes.size(); ++i) {
        if (i == 4) continue;
        EXPECT_EQ(probes[i].runs.load(), 1) << i;
        EXPECT_GE(probes[i].first_run_ns.load(), before + 30 * kMs) << i << ": early";
    }
    ASSERT_EQ(tw_runtime_stats(rt.get(), &st), TW_OK);
    EXPECT_EQ(st.reset, 8u);
}

TEST(CApiBatch, ResetNLaterDeadlinesAreKeptAndEarlierOnesAreNeverLost) {
    std::deque<Probe> probes(4);
    RtPtr rt = make_runtime(1);
    std::vector<tw_timer_spec> specs;
    // (400 ms: a loaded machine may take 40 ms to file them; the later reset
    // must still keep them from firing at their first deadline.)
    for (std::size_t i = 0; i < probes.size(); ++i) specs.push_back(spec_of(probes[i], i < 2 ? 400 * kMs : 60000 * kMs));
    std::vector<tw_timer> ids(probes.size());
    ASSERT_EQ(tw_timer_start_n(rt.get(), specs.data(), specs.size(), ids.data()), 4);
    tw_stats st;
    st.size = sizeof st;
    ASSERT_TRUE(wait_until([&] { return tw_runtime_stats(rt.get(), &st) == TW_OK && st.pending == 4; }));
    const std::uint64_t before = tw_now_ns();
    EXPECT_EQ(tw_timer_reset_n(rt.get(), ids.data(), 2, 500 * kMs, nullptr), 2);  // later: re-filed lazily
    {
        FailPosts fail(1'000'000'000);  // the Refiles go through the inbox's reserve
        EXPECT_EQ(tw_timer_reset_n(rt.get(), ids.data() + 2, 2, 1 * kMs, nullptr), 2);
    }
    ASSERT_TRUE(wait_until([&] { return probes[2].runs.load() == 1 && probes[3].runs.load() == 1; }))
        << "an earlier deadline was lost";
    ASSERT_TRUE(wait_until([&] { return released_total(probes) == 4; }));
    EXPECT_GE(probes[0].first_run_ns.load(), before + 500 * kMs) << "fired at its old deadline";
    EXPECT_GE(probes[1].first_run_ns.load(), before + 500 * kMs) << "fired at its old deadline";
}

// =============================================================================
// The single calls' answers, element for element: a differential test on two
// manual-clock runtimes driven in lockstep, one with batches, one with the
// single calls (on a manual clock both see the same time and the same ids).
// =============================================================================
namespace {
struct Twin {
    std::deque<Probe> probes;  // (declared first: outlives the runtime)
    RtPtr rt = make_runtime(3, 40, TW_CONFIG_MANUAL_CLOCK);
};
}  // namespace

TEST(CApiBatch, BatchesAnswerEveryElementAsTheSingleCallsDo) {
    Twin a, b;  // a: batches; b: single calls
    std::mt19937_64 rng(14);
    std::vector<tw_timer> known;  // ids started so far (the same on both)
    for (int round = 0; round < 60; ++round) {
        SCOPED_TRACE(round);
        // Starts: valid, refused and periodic specs, some shard hints.
        const std::size_t n = rng() % 12;
        std::vector<tw_timer_spec> sa, sb;
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint64_t delay = (rng() % 30) * kMs;
            const std::uint64_t period = rng() % 5 == 0 ? (1 + rng() % 10) * kMs : 0;
            const std::int32_t shard = rng() % 3 == 0 ? static_cast<std::int32_t>(rng() % 3) : -1;
            sa.push_back(spec_of(a.probes.emplace_back(), delay, period, shard));
            sb.push_back(spec_of(b.probes.emplace_back(), delay, period, shard));
            if (rng() % 7 == 0) sa.back().callback = sb.back().callback = nullptr;
            if (rng() % 11 == 0) sa.back().delay_ns = sb.back().delay_ns = TW_MAX_DELAY_NS + 1;
        }
        std::vector<tw_timer> oa(n), ob(n);
        const int started = tw_timer_start_n(a.rt.get(), sa.data(), n, oa.data());
        int started_b = 0;
        for (std::size_t i = 0; i < n; ++i) started_b += tw_timer_start_ex(b.rt.get(), &sb[i], &ob[i]) == TW_OK;
        EXPECT_EQ(started, started_b);
        EXPECT_EQ(oa, ob);
        for (tw_timer id : oa)
            if (id != 0) known.push_back(id);
        // Stops and re-arms of known (live or stale), duplicate and bogus ids.
        for (int op = 0; op < 2; ++op) {
            std::vector<tw_timer> ids;
            const std::size_t m = rng() % 16;
            for (std::size_t i = 0; i < m; ++i) {
                switch (rng() % 6) {
                    case 0: ids.push_back(rng() % 3 == 0 ? 0 : rng()); break;
                    case 1:
                        if (!ids.empty()) {
                            ids.push_back(ids[rng() % ids.size()]);
                            break;
                        }
                        [[fallthrough]];
                    default:
                        if (!known.empty()) ids.push_back(known[rng() % known.size()]);
                }
            }
            std::vector<int> ra(ids.size(), 1), rb(ids.size(), 1);
            const std::uint64_t delay = (rng() % 40) * kMs;
            int ok = 0;
            if (op == 0) {
                ok = tw_timer_stop_n(a.rt.get(), ids.data(), ids.size(), ra.data());
                for (std::size_t i = 0; i < ids.size(); ++i) rb[i] = tw_timer_stop(b.rt.get(), ids[i]);
            } else {
                ok = tw_timer_reset_n(a.rt.get(), ids.data(), ids.size(), delay, ra.data());
                for (std::size_t i = 0; i < ids.size(); ++i) rb[i] = tw_timer_reset(b.rt.get(), ids[i], delay);
            }
            EXPECT_EQ(ra, rb) << (op == 0 ? "stop" : "reset");
            EXPECT_EQ(ok, static_cast<int>(std::count(rb.begin(), rb.end(), TW_OK)));
        }
        const std::uint64_t step = (rng() % 25) * kMs;
        EXPECT_EQ(tw_runtime_advance(a.rt.get(), step), tw_runtime_advance(b.rt.get(), step));
        for (std::size_t i = 0; i < a.probes.size(); ++i) {
            ASSERT_EQ(a.probes[i].runs.load(), b.probes[i].runs.load()) << i;
            ASSERT_EQ(a.probes[i].released.load(), b.probes[i].released.load()) << i;
        }
    }
    tw_stats x, y;
    x.size = y.size = sizeof x;
    ASSERT_EQ(tw_runtime_stats(a.rt.get(), &x), TW_OK);
    ASSERT_EQ(tw_runtime_stats(b.rt.get(), &y), TW_OK);
    EXPECT_EQ(x.started, y.started);
    EXPECT_EQ(x.stopped, y.stopped);
    EXPECT_EQ(x.reset, y.reset);
    EXPECT_EQ(x.fired, y.fired);
    EXPECT_EQ(x.live, y.live);
    EXPECT_GT(x.started, 100u);
    EXPECT_GT(x.stopped, 20u);
    EXPECT_GT(x.reset, 20u);
    a.rt.reset();
    b.rt.reset();
    for (std::size_t i = 0; i < a.probes.size(); ++i) {
        const bool had_hook = a.probes[i].released.load() + b.probes[i].released.load() > 0;
        if (had_hook) {
            EXPECT_EQ(a.probes[i].released.load(), 1) << i;
        }
        EXPECT_EQ(a.probes[i].released.load(), b.probes[i].released.load()) << i;
    }
}

// =============================================================================
// Batches racing single calls, fires and shutdown (TSan in the tsan preset):
// every spec handed to a batch ends with its hook run exactly once, and the
// counters add up.
// =============================================================================
TEST(CApiBatch, BatchesRaceSingleCallsFiresAndShutdownWithExactAccounting) {
    std::mutex mu;
    std::deque<Probe> probes;   // under mu; never shrinks (addresses stay); outlives the runtime
    RtPtr rt = make_runtime(2);
    std::vector<tw_timer> ids;  // under mu: ids started so far
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> started{0}, ok_stops{0};
    auto worker = [&](unsigned seed) {
        std::mt19937_64 rng(seed);
        while (!stop.load()) {
            std::vector<tw_timer_spec> specs(1 + rng() % 24);
            {
                std::lock_guard<std::mutex> lk(mu);
                for (tw_timer_spec& s : specs)
                    s = spec_of(probes.emplace_back(), (rng() % 4) * kMs, rng() % 8 == 0 ? kMs : 0);
            }
            std::vector<tw_timer> out(specs.size());
            const int n = tw_timer_start_n(rt.get(), specs.data(), specs.size(), out.data());
            if (n < 0) break;
            started.fetch_add(static_cast<std::uint64_t>(n));
            std::vector<tw_timer> pick;
            {
                std::lock_guard<std::mutex> lk(mu);
                for (tw_timer id : out)
                    if (id != 0) ids.push_back(id);
                for (std::size_t i = 0; i < 16 && !ids.empty(); ++i) pick.push_back(ids[rng() % ids.size()]);
            }
            switch (rng() % 4) {
                case 0: {
                    const int k = tw_timer_stop_n(rt.get(), pick.data(), pick.size(), nullptr);
                    if (k > 0) ok_stops.fetch_add(static_cast<std::uint64_t>(k));
                    break;
                }
                case 1: tw_timer_reset_n(rt.get(), pick.data(), pick.size(), (rng() % 3) * kMs, nullptr); break;
                case 2:
                    for (tw_timer id : pick)
                        if (tw_timer_stop(rt.get(), id) == TW_OK) ok_stops.fetch_add(1);
                    break;
                default:
                    for (tw_timer id : pick) tw_timer_reset(rt.get(), id, (rng() % 3) * kMs);
            }
        }
    };
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < 3; ++t) threads.emplace_back(worker, 100 + t);
    std::this_thread::sleep_for(tw_test::kSanitized ? 600ms : 300ms);  // let them race; not a synchronisation
    EXPECT_EQ(tw_runtime_shutdown(rt.get()), TW_OK);  // while the batches go on
    stop.store(true);
    for (std::thread& t : threads) t.join();
    tw_stats st;
    st.size = sizeof st;
    ASSERT_EQ(tw_runtime_stats(rt.get(), &st), TW_OK);
    EXPECT_EQ(st.started, started.load());
    EXPECT_EQ(st.stopped, ok_stops.load());
    EXPECT_EQ(st.live, 0u);
    rt.reset();
    std::lock_guard<std::mutex> lk(mu);
    EXPECT_GT(probes.size(), 100u);
    for (std::size_t i = 0; i < probes.size(); ++i) ASSERT_EQ(probes[i].released.load(), 1) << i;
}

// =============================================================================
// The C++ overloads
// =============================================================================
using tw_test::Counted;

TEST(RuntimeBatch, SpansStartStopAndResetWithPerElementResults) {
    tw::Runtime rt(tw_test::small_config(3));
    std::atomic<int> released{0}, ran{0};
    std::vector<tw::StartOptions> opts(10);
    for (std::size_t i = 0; i < opts.size(); ++i) {
        opts[i].delay = 1h;
        opts[i].shard = static_cast<int>(i % 3);
    }
    opts[4].delay = -1ms;  // refused: its callable is destroyed before start() returns
    std::vector<std::error_code> results(opts.size());
    const std::vector<tw::Timer> timers =
        rt.start(opts, [&](std::size_t) { return Counted(&released, &ran); }, results);
    ASSERT_EQ(timers.size(), opts.size());
    for (std::size_t i = 0; i < timers.size(); ++i) {
        EXPECT_EQ(static_cast<bool>(timers[i]), i != 4) << i;
        EXPECT_EQ(results[i], i == 4 ? std::error_code(tw::errc::invalid_argument) : std::error_code()) << i;
    }
    EXPECT_EQ(released.load(), 1);
    std::vector<std::uint64_t> ids;
    for (const tw::Timer& t : timers) ids.push_back(t.id());
    EXPECT_EQ(rt.reset(ids, 2h, results), 9u);
    EXPECT_EQ(results[4], tw::errc::not_found);
    EXPECT_EQ(rt.stop(std::span(ids).first(5), std::span(results).first(5)), 4u);
    EXPECT_EQ(released.load(), 5);
    EXPECT_EQ(rt.stop(ids), 5u);  // no results wanted
    EXPECT_EQ(released.load(), 10);
    EXPECT_EQ(ran.load(), 0);
    const tw::Stats st = rt.stats();
    EXPECT_EQ(st.started, 9u);
    EXPECT_EQ(st.stopped, 9u);
    EXPECT_EQ(st.reset, 9u);
}

TEST(RuntimeBatch, SpansOfTheWrongSizeAreInvalidArgumentAndChangeNothing) {
    tw::Runtime rt(tw_test::small_config());
    std::atomic<int> released{0}, ran{0};
    const tw::Timer t = rt.start(1h, [] {});
    std::vector<std::uint64_t> ids{t.id()};
    std::vector<std::error_code> two(2);
    std::error_code ec;
    EXPECT_EQ(rt.stop(ids, two, ec), 0u);
    EXPECT_EQ(ec, tw::errc::invalid_argument);
    EXPECT_THROW(rt.stop(ids, two), tw::Error);
    EXPECT_EQ(rt.reset(ids, 1ms, two, ec), 0u);
    EXPECT_EQ(ec, tw::errc::invalid_argument);
    EXPECT_EQ(rt.reset(ids, -1ms, {}, ec), 0u) << "a negative delay is the call's error";
    EXPECT_EQ(ec, tw::errc::invalid_argument);
    EXPECT_THROW(rt.reset(ids, tw::kMaxDelay + 1ns), tw::Error);
    std::vector<tw::StartOptions> opts(2);
    std::vector<tw::detail::Callback> cbs;
    cbs.emplace_back(Counted(&released, &ran));
    std::vector<tw::Timer> out(2);
    EXPECT_EQ(rt.start(opts, cbs, out, {}, ec), 0u);
    EXPECT_EQ(ec, tw::errc::invalid_argument);
    EXPECT_TRUE(static_cast<bool>(cbs[0])) << "a refused call leaves the callables to the caller";
    EXPECT_EQ(released.load(), 0);
    EXPECT_THROW(rt.start(opts, [&](std::size_t) { return Counted(&released, &ran); }, std::span(two).first(1)),
                 tw::Error);
    EXPECT_EQ(released.load(), 2) << "the callables made are destroyed when it throws";
    EXPECT_TRUE(rt.stop(t)) << "untouched by the refused calls";
    // Empty spans: nothing to do.
    EXPECT_EQ(rt.stop(std::span<const std::uint64_t>()), 0u);
    EXPECT_EQ(rt.reset(std::span<const std::uint64_t>(), 1ms), 0u);
}

TEST(RuntimeBatch, StartAtTheSameTimeAsShutdownReleasesEveryCallableOnce) {
    std::atomic<int> released{0}, ran{0};
    std::atomic<std::uint64_t> started{0};
    {
        tw::Runtime rt(tw_test::small_config());
        std::vector<tw::StartOptions> opts(32);
        for (std::size_t i = 0; i < opts.size(); ++i) opts[i].delay = std::chrono::microseconds(i * 50);
        std::atomic<bool> go{true};
        std::thread t([&] {
            while (go.load()) {
                std::vector<std::error_code> res(opts.size());
                const auto timers = rt.start(opts, [&](std::size_t) { return Counted(&released, &ran); }, res);
                for (std::size_t i = 0; i < timers.size(); ++i) {
                    if (timers[i]) started.fetch_add(1);
                    else
                        EXPECT_EQ(res[i], tw::errc::shutting_down);
                }
            }
        });
        std::this_thread::sleep_for(50ms);
        rt.shutdown();
        go.store(false);
        t.join();
        EXPECT_EQ(rt.stats().started, started.load());
    }
    EXPECT_EQ(released.load() % 32, 0);
    EXPECT_GT(released.load(), 0);
    EXPECT_LE(ran.load(), static_cast<int>(started.load()));
}

// Through the exported entry point with an older caller's layout (1.2's
// StartOptions, 40 bytes): the array's stride is the caller's size.
namespace {
struct StartNSized {
    using type = std::size_t (tw::Runtime::*)(const tw::StartOptions*, std::size_t, std::size_t, tw::detail::Callback*,
                                              tw::Timer*, std::error_code*, std::error_code&) noexcept;
    friend type member(StartNSized);
};
template <class Tag, typename Tag::type M>
struct Expose {
    friend typename Tag::type member(Tag) { return M; }
};
template struct Expose<StartNSized, &tw::Runtime::start_n_sized>;
}  // namespace

TEST(RuntimeBatch, AnOlderCallersLayoutIsReadAtItsOwnStride) {
    tw::Runtime rt(tw_test::small_config());
    std::atomic<int> released{0}, ran{0};
    constexpr std::size_t kOld = 40;  // 1.2: deadline, delay, period, shard, policy, queue
    alignas(8) unsigned char buf[3 * kOld] = {};
    for (std::size_t i = 0; i < 3; ++i) {
        tw::StartOptions o;
        o.delay = std::chrono::milliseconds(1 + i);
        std::memcpy(buf + i * kOld, &o, kOld);
    }
    std::vector<tw::detail::Callback> cbs;
    for (int i = 0; i < 3; ++i) cbs.emplace_back(Counted(&released, &ran));
    tw::Timer out[3];
    std::error_code res[3], ec;
    const auto* opts = reinterpret_cast<const tw::StartOptions*>(buf);
    EXPECT_EQ((rt.*member(StartNSized{}))(opts, kOld, 3, cbs.data(), out, res, ec), 3u);
    EXPECT_FALSE(ec);
    ASSERT_TRUE(wait_until([&] { return ran.load() == 3 && released.load() == 3; }));
    // A size between released layouts would cut a field: the call's error.
    EXPECT_EQ((rt.*member(StartNSized{}))(opts, 36, 3, cbs.data(), out, res, ec), 0u);
    EXPECT_EQ(ec, tw::errc::invalid_argument);
}
