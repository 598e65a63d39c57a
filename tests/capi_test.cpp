// SPDX-License-Identifier: MIT OR Apache-2.0
// The C API (include/tickwheel/tickwheel.h) from C++: every function with
// every bad input, the release hook on every path, stop_sync, never early,
// stats. Suites are named CApi* (ctest -R CApi).
#include "tickwheel/tickwheel.h"

#include "test_support.hpp"  // the documented id layout; forcing a slot's reuse
#include "test_support/capi.hpp"

#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace tw_test::capi;

RtPtr make_runtime(std::uint32_t shards = 2, std::uint32_t workers = 2, std::uint64_t max_timers = 0) {
    tw_config cfg = c_config(shards, workers);
    cfg.max_timers = max_timers;
    return RtPtr(create_runtime(cfg));
}

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    const auto give_up = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > give_up) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return true;
}

std::uint64_t clock_monotonic_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

// A timer's observable life: runs, releases, and what the release saw.
struct Probe {
    std::atomic<int> runs{0};
    std::atomic<int> released{0};
    std::atomic<int> runs_at_release{-1};
    std::atomic<std::uint64_t> last_run_ns{0};
    std::atomic<tw_timer> id_seen{0};
    std::atomic<std::thread::id> release_thread{};  // atomic: timers may share a Probe and release concurrently
};

void probe_cb(void* arg, tw_timer id) {
    auto* p = static_cast<Probe*>(arg);
    p->last_run_ns.store(tw_now_ns());
    p->id_seen.store(id);
    p->runs.fetch_add(1);
}

void probe_release(void* arg) {
    auto* p = static_cast<Probe*>(arg);
    p->release_thread.store(std::this_thread::get_id());
    p->runs_at_release.store(p->runs.load());
    p->released.fetch_add(1);
}

tw_timer_spec probe_spec(Probe& p, std::uint64_t delay_ns, std::uint64_t period_ns = 0) {
    return c_spec(probe_cb, &p, probe_release, delay_ns, period_ns);
}

// Ids that name no timer of a fresh 2-shard runtime with a few timers.
std::vector<tw_timer> bogus_ids() {
    return {0,
            1,
            0xFFFFFFFFFFFFFFFFull,
            0x0000FF0000000000ull,            // gen 255, shard 0, index 0
            (std::uint64_t{7} << 40) | 5,     // gen 7, index 5
            (std::uint64_t{1} << 40) | (std::uint64_t{200} << 32),  // shard 200 of 2
            (std::uint64_t{1} << 40) | 0xFFFFFFFFull,               // index never allocated
            0xDEADBEEFCAFEF00Dull};
}

}  // namespace

// =============================================================================
// Configuration and creation
// =============================================================================
TEST(CApiConfig, InitSetsSizeAndDefaults) {
    tw_config cfg;
    std::memset(&cfg, 0xAB, sizeof cfg);
    tw_config_init(&cfg);
    EXPECT_EQ(cfg.size, sizeof(tw_config));
    EXPECT_EQ(cfg.shards, 0u);
    EXPECT_EQ(cfg.workers, 0u);
    EXPECT_EQ(cfg.flags, 0u);
    EXPECT_EQ(cfg.resolution_ns, 0u);
    EXPECT_EQ(cfg.max_timers, 0u);
    tw_config_init(nullptr);  // no crash

    tw_timer_spec s;
    std::memset(&s, 0xAB, sizeof s);
    tw_timer_spec_init(&s);
    EXPECT_EQ(s.size, sizeof(tw_timer_spec));
    EXPECT_EQ(s.shard, -1);
    EXPECT_EQ(s.deadline_ns, 0u);
    EXPECT_EQ(s.delay_ns, 0u);
    EXPECT_EQ(s.period_ns, 0u);
    EXPECT_EQ(s.callback, nullptr);
    EXPECT_EQ(s.arg, nullptr);
    EXPECT_EQ(s.release, nullptr);
    tw_timer_spec_init(nullptr);
}

TEST(CApiConfig, CreateNullOutIsEinval) {
    tw_config cfg;
    tw_config_init(&cfg);
    EXPECT_EQ(tw_runtime_create(&cfg, nullptr), TW_EINVAL);
    EXPECT_EQ(tw_runtime_create(nullptr, nullptr), TW_EINVAL);
}

TEST(CApiConfig, CreateNullConfigMeansDefaults) {
    tw_runtime* rt = nullptr;
    ASSERT_EQ(tw_runtime_create(nullptr, &rt), TW_OK);
    RtPtr guard(rt);
    tw_stats st;
    st.size = sizeof st;
    ASSERT_EQ(tw_runtime_stats(rt, &st), TW_OK);
    const auto cpus = std::max(1u, std::thread::hardware_concurrency());
    EXPECT_EQ(st.shards, cpus);
    EXPECT_EQ(st.workers, cpus);
    EXPECT_EQ(st.resolution_ns, 1 * kMs);
    EXPECT_EQ(st.shut_down, 0u);
}

TEST(CApiConfig, CreateWrongSizeIsEinval) {
    // Below the 1.0 size (32), inside 1.5's `name` (33 .. 39), above 4096.
    for (std::uint32_t size : {0u, 4u, 8u, 31u, 33u, static_cast<std::uint32_t>(sizeof(tw_config) - 4),
                               static_cast<std::uint32_t>(sizeof(tw_config) - 1), 4097u, 0xFFFFFFFFu}) {
        tw_config cfg;
        tw_config_init(&cfg);
        cfg.size = size;
        tw_runtime* rt = reinterpret_cast<tw_runtime*>(0x1);
        EXPECT_EQ(tw_runtime_create(&cfg, &rt), TW_EINVAL) << size;
        EXPECT_EQ(rt, nullptr) << "*out is NULL on failure";
    }
}

TEST(CApiConfig, CreateFromANewerCallerNeedsZeroTail) {
    // A caller built against a future header passes a larger struct: fine if
    // the fields this library does not know are zero, TW_EINVAL otherwise.
    struct Future {
        tw_config base;
        std::uint64_t future_field;
    } f;
    std::memset(&f, 0, sizeof f);
    tw_config_init(&f.base);
    f.base.size = sizeof f;
    f.base.shards = 1;
    f.base.workers = 1;
    tw_runtime* rt = nullptr;
    ASSERT_EQ(tw_runtime_create(&f.base, &rt), TW_OK);
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
    f.future_field = 1;
    EXPECT_EQ(tw_runtime_create(&f.base, &rt), TW_EINVAL);
    EXPECT_EQ(rt, nullptr);
}

TEST(CApiConfig, CreateBadValuesAreEinval) {
    auto create = [](void (*edit)(tw_config&)) {
        tw_config cfg;
        tw_config_init(&cfg);
        cfg.shards = 1;
        cfg.workers = 1;
        edit(cfg);
        tw_runtime* rt = nullptr;
        const int rc = tw_runtime_create(&cfg, &rt);
        if (rc == TW_OK) {
            EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
        }
        return rc;
    };
    EXPECT_EQ(create([](tw_config& c) { c.flags = 0x4; }), TW_EINVAL);  // 0x2: TW_CONFIG_MANUAL_CLOCK since 1.3
    EXPECT_EQ(create([](tw_config& c) { c.flags = 0x80000000u; }), TW_EINVAL);
    EXPECT_EQ(create([](tw_config& c) { c.shards = 257; }), TW_EINVAL);
    EXPECT_EQ(create([](tw_config& c) { c.workers = 4097; }), TW_EINVAL);
    EXPECT_EQ(create([](tw_config& c) { c.resolution_ns = 999; }), TW_EINVAL);
    EXPECT_EQ(create([](tw_config& c) { c.resolution_ns = 1000000001; }), TW_EINVAL);
    EXPECT_EQ(create([](tw_config& c) { c.resolution_ns = UINT64_MAX; }), TW_EINVAL);
    // The limits themselves are fine.
    EXPECT_EQ(create([](tw_config& c) { c.resolution_ns = 1000; }), TW_OK);
    EXPECT_EQ(create([](tw_config& c) { c.resolution_ns = 1000000000; }), TW_OK);
    EXPECT_EQ(create([](tw_config& c) { c.flags = TW_PIN_SHARDS; }), TW_OK);
    EXPECT_EQ(create([](tw_config& c) { c.max_timers = 1; }), TW_OK);
}

// =============================================================================
// tw_timer_start / tw_timer_start_ex: bad input
// =============================================================================
TEST(CApiStart, NullArgumentsAreEinval) {
    RtPtr rt = make_runtime();
    Probe p;
    tw_timer id = 77;
    EXPECT_EQ(tw_timer_start(nullptr, kMs, 0, probe_cb, &p, &id), TW_EINVAL);
    EXPECT_EQ(id, 0u) << "*out is 0 on failure";
    id = 77;
    EXPECT_EQ(tw_timer_start(rt.get(), kMs, 0, nullptr, &p, &id), TW_EINVAL);
    EXPECT_EQ(id, 0u);
    EXPECT_EQ(tw_timer_start(rt.get(), kMs, 0, probe_cb, &p, nullptr), TW_EINVAL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(p.runs.load(), 0);
    // A NULL arg is fine: it is only passed through.
    ASSERT_EQ(tw_timer_start(rt.get(), kMs, 0, [](void* a, tw_timer) { EXPECT_EQ(a, nullptr); }, nullptr, &id),
              TW_OK);
    EXPECT_NE(id, 0u);
}

TEST(CApiStart, DelayAndPeriodRange) {
    RtPtr rt = make_runtime();
    Probe p;
    tw_timer id = 0;
    EXPECT_EQ(tw_timer_start(rt.get(), TW_MAX_DELAY_NS + 1, 0, probe_cb, &p, &id), TW_EINVAL);
    EXPECT_EQ(tw_timer_start(rt.get(), UINT64_MAX, 0, probe_cb, &p, &id), TW_EINVAL);
    EXPECT_EQ(tw_timer_start(rt.get(), kMs, TW_MAX_DELAY_NS + 1, probe_cb, &p, &id), TW_EINVAL);
    EXPECT_EQ(tw_timer_start(rt.get(), kMs, UINT64_MAX, probe_cb, &p, &id), TW_EINVAL);
    // The limits are accepted.
    ASSERT_EQ(tw_timer_start(rt.get(), TW_MAX_DELAY_NS, 0, probe_cb, &p, &id), TW_OK);
    EXPECT_EQ(tw_timer_stop(rt.get(), id), TW_OK);
    ASSERT_EQ(tw_timer_start(rt.get(), TW_MAX_DELAY_NS, TW_MAX_DELAY_NS, probe_cb, &p, &id), TW_OK);
    EXPECT_EQ(tw_timer_stop(rt.get(), id), TW_OK);
    // period 1 ns: rounded up to the tick.
    ASSERT_EQ(tw_timer_start(rt.get(), 0, 1, probe_cb, &p, &id), TW_OK);
    EXPECT_TRUE(wait_until([&] { return p.runs.load() >= 3; }));
    EXPECT_EQ(tw_timer_stop_sync(rt.get(), id), TW_OK);
}

TEST(CApiStart, StartExNullOrBadSizeSpecIsEinvalWithoutRelease) {
    RtPtr rt = make_runtime();
    tw_timer id = 5;
    EXPECT_EQ(tw_timer_start_ex(rt.get(), nullptr, &id), TW_EINVAL);
    EXPECT_EQ(id, 0u);
    // Below the 1.0 size (56), or between released sizes (56, 64): a field cut in two.
    for (std::uint32_t size : {0u, 4u, 55u, 57u, 60u, static_cast<std::uint32_t>(sizeof(tw_timer_spec) - 1), 4097u,
                               0xFFFFFFFFu}) {
        Probe p;
        tw_timer_spec s = probe_spec(p, kMs);
        s.size = size;
        EXPECT_EQ(tw_timer_start_ex(rt.get(), &s, &id), TW_EINVAL) << size;
        EXPECT_EQ(p.released.load(), 0) << "the hook cannot be trusted to exist: not called";
    }
    // A newer caller's larger spec: accepted iff its unknown tail is zero.
    struct Future {
        tw_timer_spec base;
        std::uint64_t future_field;
    } f;
    std::memset(&f, 0, sizeof f);
    Probe p;
    f.base = probe_spec(p, kMs);
    f.base.size = sizeof f;
    f.future_field = 3;
    EXPECT_EQ(tw_timer_start_ex(rt.get(), &f.base, &id), TW_EINVAL);
    EXPECT_EQ(p.released.load(), 0);
    f.future_field = 0;
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &f.base, &id), TW_OK);
    EXPECT_TRUE(wait_until([&] { return p.released.load() == 1; }));
    EXPECT_EQ(p.runs.load(), 1);
}

// The rule of tickwheel.h: a rejected call (TW_EINVAL) never calls the
// release hook -- arg is still the caller's. (The failures that do call it:
// MaxTimersIsEagain, EveryCallAfterShutdownIsEshutdown, and the TW_ENOMEM
// case in correctness_test.cpp.)
TEST(CApiStart, StartExRejectedArgumentsNeverCallTheHook) {
    RtPtr rt = make_runtime();
    struct Case {
        const char* what;
        void (*edit)(tw_timer_spec&);
        bool null_rt, null_out;
        int want;
    };
    const Case cases[] = {
        {"NULL rt", [](tw_timer_spec&) {}, true, false, TW_EINVAL},
        {"NULL out", [](tw_timer_spec&) {}, false, true, TW_EINVAL},
        {"NULL callback", [](tw_timer_spec& s) { s.callback = nullptr; }, false, false, TW_EINVAL},
        {"shard -2", [](tw_timer_spec& s) { s.shard = -2; }, false, false, TW_EINVAL},
        {"shard INT32_MIN", [](tw_timer_spec& s) { s.shard = INT32_MIN; }, false, false, TW_EINVAL},
        {"delay > max", [](tw_timer_spec& s) { s.delay_ns = TW_MAX_DELAY_NS + 1; }, false, false, TW_EINVAL},
        {"period > max", [](tw_timer_spec& s) { s.period_ns = TW_MAX_DELAY_NS + 1; }, false, false, TW_EINVAL},
        {"deadline > INT64_MAX", [](tw_timer_spec& s) { s.deadline_ns = std::uint64_t{INT64_MAX} + 1; }, false,
         false, TW_EINVAL},
        {"deadline too far", [](tw_timer_spec& s) { s.deadline_ns = tw_now_ns() + TW_MAX_DELAY_NS + 1000 * kMs; },
         false, false, TW_EINVAL},
    };
    for (const Case& c : cases) {
        Probe p;
        tw_timer_spec s = probe_spec(p, kMs);
        c.edit(s);
        tw_timer id = 9;
        EXPECT_EQ(tw_timer_start_ex(c.null_rt ? nullptr : rt.get(), &s, c.null_out ? nullptr : &id), c.want)
            << c.what;
        EXPECT_EQ(p.released.load(), 0) << c.what << ": TW_EINVAL must leave arg to the caller";
        if (!c.null_out) {
            EXPECT_EQ(id, 0u) << c.what;
        }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

TEST(CApiStart, MaxTimersIsEagain) {
    RtPtr rt = make_runtime(1, 1, /*max_timers=*/2);
    Probe a, b, c;
    tw_timer ia = 0, ib = 0, ic = 7;
    ASSERT_EQ(tw_timer_start(rt.get(), 10000 * kMs, 0, probe_cb, &a, &ia), TW_OK);
    ASSERT_EQ(tw_timer_start(rt.get(), 10000 * kMs, 0, probe_cb, &b, &ib), TW_OK);
    EXPECT_EQ(tw_timer_start(rt.get(), kMs, 0, probe_cb, &c, &ic), TW_EAGAIN);
    EXPECT_EQ(ic, 0u);
    tw_timer_spec s = probe_spec(c, kMs);
    EXPECT_EQ(tw_timer_start_ex(rt.get(), &s, &ic), TW_EAGAIN);
    EXPECT_EQ(c.released.load(), 1);
    // A stopped timer's slot is recycled by its shard soon after: room again.
    EXPECT_EQ(tw_timer_stop(rt.get(), ia), TW_OK);
    Probe d;
    tw_timer id = 0;
    EXPECT_TRUE(wait_until([&] { return tw_timer_start(rt.get(), kMs, 0, probe_cb, &d, &id) == TW_OK; }));
    EXPECT_TRUE(wait_until([&] { return d.runs.load() == 1; }));
}

TEST(CApiStart, IdsAreNonZeroAndDistinct) {
    RtPtr rt = make_runtime();
    Probe p;
    std::set<tw_timer> ids;
    for (int i = 0; i < 1000; ++i) {
        tw_timer id = 0;
        ASSERT_EQ(tw_timer_start(rt.get(), 10000 * kMs, 0, probe_cb, &p, &id), TW_OK);
        ASSERT_NE(id, 0u);
        ids.insert(id);
    }
    EXPECT_EQ(ids.size(), 1000u);
    for (tw_timer id : ids) EXPECT_EQ(tw_timer_stop(rt.get(), id), TW_OK);
}

TEST(CApiStart, CallbackGetsArgAndId) {
    RtPtr rt = make_runtime();
    Probe p;
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start(rt.get(), 0, 0, probe_cb, &p, &id), TW_OK);
    ASSERT_TRUE(wait_until([&] { return p.runs.load() == 1; }));
    EXPECT_EQ(p.id_seen.load(), id);
}

TEST(CApiStart, ShardHint) {
    RtPtr rt = make_runtime(2, 1);
    Probe p;
    tw_timer_spec s = probe_spec(p, 10000 * kMs);
    s.shard = 1;
    tw_timer a = 0, b = 0;
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &a), TW_OK);
    s.shard = 5;  // modulo 2 = shard 1
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &b), TW_OK);
    std::uint64_t pending0 = 99, pending1 = 0;
    EXPECT_TRUE(wait_until([&] {
        EXPECT_EQ(tw_runtime_shard_stats(rt.get(), 1, &pending1, nullptr), TW_OK);
        return pending1 == 2;
    }));
    EXPECT_EQ(tw_runtime_shard_stats(rt.get(), 0, &pending0, nullptr), TW_OK);
    EXPECT_EQ(pending0, 0u);
    EXPECT_EQ(tw_timer_stop(rt.get(), a), TW_OK);
    EXPECT_EQ(tw_timer_stop(rt.get(), b), TW_OK);
    EXPECT_EQ(p.released.load(), 2);
}

// =============================================================================
// Never early; absolute deadlines
// =============================================================================
TEST(CApiTiming, NowIsClockMonotonic) {
    const std::uint64_t a = clock_monotonic_ns();
    const std::uint64_t n = tw_now_ns();
    const std::uint64_t b = clock_monotonic_ns();
    EXPECT_LE(a, n);
    EXPECT_LE(n, b);
}

namespace {
struct Early {
    std::uint64_t earliest;
    std::atomic<std::uint64_t> ran{0};
};
void early_cb(void* arg, tw_timer) { static_cast<Early*>(arg)->ran.store(tw_now_ns()); }
}  // namespace

TEST(CApiTiming, NeverEarly) {
    RtPtr rt = make_runtime();
    std::vector<std::unique_ptr<Early>> timers;
    for (int i = 0; i < 200; ++i) {
        const std::uint64_t delay = static_cast<std::uint64_t>(i % 25) * kMs + static_cast<std::uint64_t>(i) * 997;
        auto e = std::make_unique<Early>();
        e->earliest = tw_now_ns() + delay;  // read before start(): start's own clock reading is later
        tw_timer id = 0;
        ASSERT_EQ(tw_timer_start(rt.get(), delay, 0, early_cb, e.get(), &id), TW_OK);
        timers.push_back(std::move(e));
    }
    // Absolute deadlines: in the future, and in the past (fires at once).
    for (int i = 0; i < 50; ++i) {
        auto e = std::make_unique<Early>();
        tw_timer_spec s;
        tw_timer_spec_init(&s);
        e->earliest = tw_now_ns() + static_cast<std::uint64_t>(i) * 300000;
        s.deadline_ns = i % 10 == 0 ? 1 : e->earliest;
        if (i % 10 == 0) e->earliest = 0;
        s.callback = early_cb;
        s.arg = e.get();
        tw_timer id = 0;
        ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &id), TW_OK);
        timers.push_back(std::move(e));
    }
    for (auto& e : timers) {
        ASSERT_TRUE(wait_until([&] { return e->ran.load() != 0; }));
        EXPECT_GE(e->ran.load(), e->earliest);
    }
}

TEST(CApiTiming, PeriodicIsFixedRateAndNeverEarly) {
    RtPtr rt = make_runtime();
    struct Runs {
        std::mutex m;
        std::vector<std::uint64_t> at;
    } runs;
    const std::uint64_t before = tw_now_ns();
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start(
                  rt.get(), 5 * kMs, 3 * kMs,
                  [](void* a, tw_timer) {
                      auto* r = static_cast<Runs*>(a);
                      std::lock_guard<std::mutex> l(r->m);
                      r->at.push_back(tw_now_ns());
                  },
                  &runs, &id),
              TW_OK);
    ASSERT_TRUE(wait_until([&] {
        std::lock_guard<std::mutex> l(runs.m);
        return runs.at.size() >= 5;
    }));
    ASSERT_EQ(tw_timer_stop_sync(rt.get(), id), TW_OK);
    std::lock_guard<std::mutex> l(runs.m);
    // Run k (0-based) is never before first + k * period (periods may be
    // skipped under load, never run early).
    std::uint64_t k = 0;
    for (std::uint64_t t : runs.at) {
        EXPECT_GE(t, before + 5 * kMs + k * 3 * kMs) << "run " << k;
        ++k;
    }
}

// =============================================================================
// tw_timer_stop / tw_timer_stop_sync
// =============================================================================
TEST(CApiStop, NullRuntimeIsEinval) {
    EXPECT_EQ(tw_timer_stop(nullptr, 1), TW_EINVAL);
    EXPECT_EQ(tw_timer_stop_sync(nullptr, 1), TW_EINVAL);
}

TEST(CApiStop, ZeroRandomAndStaleIdsAreEnoent) {
    RtPtr rt = make_runtime();
    Probe live;
    tw_timer keep = 0;
    ASSERT_EQ(tw_timer_start(rt.get(), 10000 * kMs, 0, probe_cb, &live, &keep), TW_OK);
    for (tw_timer id : bogus_ids()) {
        EXPECT_EQ(tw_timer_stop(rt.get(), id), TW_ENOENT) << std::hex << id;
        EXPECT_EQ(tw_timer_stop_sync(rt.get(), id), TW_ENOENT) << std::hex << id;
    }
    // Stale: fired.
    Probe p;
    tw_timer fired = 0;
    ASSERT_EQ(tw_timer_start(rt.get(), 0, 0, probe_cb, &p, &fired), TW_OK);
    ASSERT_TRUE(wait_until([&] { return p.runs.load() == 1; }));
    EXPECT_EQ(tw_timer_stop(rt.get(), fired), TW_ENOENT);
    EXPECT_EQ(tw_timer_stop_sync(rt.get(), fired), TW_ENOENT);
    // Stale: stopped (twice).
    tw_timer stopped = 0;
    ASSERT_EQ(tw_timer_start(rt.get(), 10000 * kMs, 0, probe_cb, &p, &stopped), TW_OK);
    EXPECT_EQ(tw_timer_stop(rt.get(), stopped), TW_OK);
    EXPECT_EQ(tw_timer_stop(rt.get(), stopped), TW_ENOENT);
    EXPECT_EQ(tw_timer_stop_sync(rt.get(), stopped), TW_ENOENT);
    // Stale because its slot was reused: CApiStop.StaleIdsOfAReusedSlot* below.
    EXPECT_EQ(tw_timer_stop(rt.get(), keep), TW_OK);
    EXPECT_EQ(live.runs.load(), 0);
}

namespace {
// `stale` names a timer that is done (fired or stopped) on the 1-shard
// runtime `rt`. Forces a new timer onto its slot (tw_test::
// start_on_the_slot_of: starts pending timers until one gets the slot) and
// FAILS if none does; then stop, stop_sync and reset with the stale id must
// be TW_ENOENT and leave the new timer alone: not released by them, and
// firing exactly once at the deadline its own id set.
void stale_id_of_a_reused_slot(tw_runtime* rt, tw_timer stale) {
    std::deque<Probe> probes;  // one per timer started; the last one got the slot
    std::vector<std::uint64_t> held;
    tw_timer newer = 0;
    // On every path out (an ASSERT too), nothing may still use `probes`.
    struct StopAllOnExit {
        tw_runtime* rt;
        const std::vector<std::uint64_t>& held;
        const tw_timer& newer;
        ~StopAllOnExit() {
            for (std::uint64_t id : held) tw_timer_stop_sync(rt, id);
            tw_timer_stop_sync(rt, newer);
        }
    } stop_all_on_exit{rt, held, newer};
    newer = tw_test::start_on_the_slot_of(
        stale,
        [&]() -> std::uint64_t {
            tw_timer_spec s = probe_spec(probes.emplace_back(), 10000 * kMs);
            tw_timer id = 0;
            EXPECT_EQ(tw_timer_start_ex(rt, &s, &id), TW_OK);
            return id;
        },
        held);
    ASSERT_NE(newer, 0u) << "no new timer got the slot of the stale id " << std::hex << stale << std::dec << " ("
                         << held.size() << " tried): the slot was never reused";
    Probe& np = probes.back();
    // The documented id layout (README, "Handles"): low 32 bits the slot
    // index, bits 32..39 the shard, bits 40..63 the generation.
    ASSERT_EQ(tw_test::id_index(newer), tw_test::id_index(stale));
    EXPECT_NE(tw_test::id_gen(newer), tw_test::id_gen(stale)) << "same slot, same generation";

    EXPECT_EQ(tw_timer_stop(rt, stale), TW_ENOENT);
    EXPECT_EQ(tw_timer_stop_sync(rt, stale), TW_ENOENT);
    EXPECT_EQ(np.released.load(), 0) << "a stale stop cancelled the slot's new timer";
    // Bring the new timer's deadline near with its own id; a stale reset(0)
    // acted on would fire it early, a stale reset(10000 s) never.
    const std::uint64_t own_deadline = tw_now_ns() + 20 * kMs;
    ASSERT_EQ(tw_timer_reset(rt, newer, 20 * kMs), TW_OK);
    EXPECT_EQ(tw_timer_reset(rt, stale, 0), TW_ENOENT);
    EXPECT_EQ(tw_timer_reset(rt, stale, 10000 * kMs), TW_ENOENT);
    ASSERT_TRUE(wait_until([&] { return np.released.load() == 1; }))
        << "the slot's new timer never fired: a stale reset moved it";
    EXPECT_EQ(np.runs.load(), 1);
    EXPECT_EQ(np.runs_at_release.load(), 1);
    EXPECT_EQ(np.id_seen.load(), newer);
    EXPECT_GE(np.last_run_ns.load(), own_deadline) << "the slot's new timer fired early: a stale reset moved it";
    EXPECT_EQ(tw_timer_stop(rt, stale), TW_ENOENT);
    // The timers started on the way were untouched too: all still pending.
    for (std::uint64_t id : held) EXPECT_EQ(tw_timer_stop(rt, id), TW_OK) << std::hex << id;
    for (std::size_t i = 0; i + 1 < probes.size(); ++i) {
        EXPECT_EQ(probes[i].runs.load(), 0) << i;
        EXPECT_EQ(probes[i].released.load(), 1) << i;
    }
}
}  // namespace

TEST(CApiStop, StaleIdsOfAReusedSlotAreEnoentAndLeaveItsNewTimerAlone) {
    RtPtr rt = make_runtime(/*shards=*/1);  // one shard: every start competes for the recycled slot
    // Stale because it fired.
    Probe f;
    tw_timer_spec s = probe_spec(f, 0);
    tw_timer fired = 0;
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &fired), TW_OK);
    ASSERT_TRUE(wait_until([&] { return f.released.load() == 1; }));
    {
        SCOPED_TRACE("stale because it fired");
        stale_id_of_a_reused_slot(rt.get(), fired);
    }
    // Stale because it was stopped.
    Probe p;
    s = probe_spec(p, 10000 * kMs);
    tw_timer stopped = 0;
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &stopped), TW_OK);
    ASSERT_EQ(tw_timer_stop(rt.get(), stopped), TW_OK);
    {
        SCOPED_TRACE("stale because it was stopped");
        stale_id_of_a_reused_slot(rt.get(), stopped);
    }
    EXPECT_EQ(f.runs.load(), 1);
    EXPECT_EQ(p.runs.load(), 0);
    EXPECT_EQ(p.released.load(), 1);
}

TEST(CApiStop, StopPendingReleasesInsideTheCall) {
    RtPtr rt = make_runtime();
    Probe p;
    tw_timer_spec s = probe_spec(p, 10000 * kMs);
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &id), TW_OK);
    EXPECT_EQ(p.released.load(), 0);
    EXPECT_EQ(tw_timer_stop(rt.get(), id), TW_OK);
    EXPECT_EQ(p.released.load(), 1);
    EXPECT_EQ(p.release_thread.load(), std::this_thread::get_id());
    EXPECT_EQ(p.runs.load(), 0);
}

TEST(CApiStop, StopSyncPendingReleasesInsideTheCall) {
    RtPtr rt = make_runtime();
    Probe p;
    tw_timer_spec s = probe_spec(p, 10000 * kMs, 10000 * kMs);
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &id), TW_OK);
    EXPECT_EQ(tw_timer_stop_sync(rt.get(), id), TW_OK);
    EXPECT_EQ(p.released.load(), 1);
    EXPECT_EQ(p.runs.load(), 0);
}

namespace {
struct Slow {
    std::atomic<int> started{0};
    std::atomic<int> finished{0};
    std::atomic<int> released{0};
    std::atomic<int> finished_at_release{-1};
    std::atomic<int> stop_rc{1};
    tw_runtime* rt = nullptr;
    std::atomic<tw_timer> id{0};
};
void slow_cb(void* arg, tw_timer) {
    auto* s = static_cast<Slow*>(arg);
    s->started.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    s->finished.fetch_add(1);
}
void slow_release(void* arg) {
    auto* s = static_cast<Slow*>(arg);
    s->finished_at_release.store(s->finished.load());
    s->released.fetch_add(1);
}
}  // namespace

TEST(CApiStop, StopSyncWaitsForTheRunningCallback) {
    RtPtr rt = make_runtime();
    Slow s;
    tw_timer_spec spec = c_spec(slow_cb, &s, slow_release, 0, 1 * kMs);
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &spec, &id), TW_OK);
    ASSERT_TRUE(wait_until([&] { return s.started.load() >= 1; }));
    EXPECT_EQ(tw_timer_stop_sync(rt.get(), id), TW_OK);
    // Returned: the run is over, no other will start, the hook has run once.
    EXPECT_EQ(s.started.load(), s.finished.load());
    EXPECT_EQ(s.released.load(), 1);
    EXPECT_EQ(s.finished_at_release.load(), s.finished.load()) << "released after the last run";
    const int runs = s.started.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_EQ(s.started.load(), runs);
}

namespace {
struct Held {
    Slow s;
    std::atomic<bool> go{false};  // the callback returns only once this is set
};
void held_cb(void* arg, tw_timer) {
    auto* h = static_cast<Held*>(arg);
    h->s.started.fetch_add(1);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!h->go.load() && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    h->s.finished.fetch_add(1);
}
void held_release(void* arg) { slow_release(&static_cast<Held*>(arg)->s); }
}  // namespace

TEST(CApiStop, StopDoesNotWaitAndReleasesAfterTheRun) {
    RtPtr rt = make_runtime();
    Held h;
    tw_timer_spec spec = c_spec(held_cb, &h, held_release, 0, 1 * kMs);
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &spec, &id), TW_OK);
    ASSERT_TRUE(wait_until([&] { return h.s.started.load() >= 1; }));
    // The run cannot end before `go`: had stop() waited for it, this would
    // hang for 10 s and then see finished == 1.
    EXPECT_EQ(tw_timer_stop(rt.get(), id), TW_OK);  // periodic, running: no further run
    EXPECT_EQ(h.s.finished.load(), 0) << "stop never blocks";
    EXPECT_EQ(h.s.released.load(), 0) << "released after the run, not during it";
    h.go.store(true);
    ASSERT_TRUE(wait_until([&] { return h.s.released.load() == 1; }));
    EXPECT_EQ(h.s.finished_at_release.load(), 1);
    EXPECT_EQ(h.s.started.load(), 1);
}

TEST(CApiStop, StopOfARunningOneShotIsEnoentAndItStillReleases) {
    RtPtr rt = make_runtime();
    Slow s;
    tw_timer_spec spec = c_spec(slow_cb, &s, slow_release);
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &spec, &id), TW_OK);
    ASSERT_TRUE(wait_until([&] { return s.started.load() == 1; }));
    EXPECT_EQ(tw_timer_stop(rt.get(), id), TW_ENOENT);       // its last run is in progress
    EXPECT_EQ(tw_timer_stop_sync(rt.get(), id), TW_ENOENT);  // ... but stop_sync waits for it
    EXPECT_EQ(s.finished.load(), 1);
    EXPECT_EQ(s.released.load(), 1);
}

TEST(CApiStop, StopSyncFromItsOwnCallbackDoesNotWaitForItself) {
    RtPtr rt = make_runtime();
    Slow s;
    s.rt = rt.get();
    tw_timer_spec spec;
    tw_timer_spec_init(&spec);
    spec.period_ns = 2 * kMs;
    spec.callback = [](void* arg, tw_timer id) {
        auto* self = static_cast<Slow*>(arg);
        self->started.fetch_add(1);
        self->stop_rc.store(tw_timer_stop_sync(self->rt, id));
        self->finished.fetch_add(1);
    };
    spec.arg = &s;
    spec.release = slow_release;
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &spec, &id), TW_OK);
    ASSERT_TRUE(wait_until([&] { return s.released.load() == 1; }));
    EXPECT_EQ(s.stop_rc.load(), TW_OK);
    EXPECT_EQ(s.started.load(), 1);
}

// =============================================================================
// tw_timer_reset
// =============================================================================
TEST(CApiReset, BadInput) {
    RtPtr rt = make_runtime();
    Probe p;
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start(rt.get(), 10000 * kMs, 0, probe_cb, &p, &id), TW_OK);
    EXPECT_EQ(tw_timer_reset(nullptr, id, kMs), TW_EINVAL);
    EXPECT_EQ(tw_timer_reset(rt.get(), id, TW_MAX_DELAY_NS + 1), TW_EINVAL);
    EXPECT_EQ(tw_timer_reset(rt.get(), id, UINT64_MAX), TW_EINVAL);
    EXPECT_EQ(tw_timer_reset(rt.get(), id, TW_MAX_DELAY_NS), TW_OK);
    for (tw_timer bogus : bogus_ids()) EXPECT_EQ(tw_timer_reset(rt.get(), bogus, kMs), TW_ENOENT) << bogus;
    EXPECT_EQ(tw_timer_stop(rt.get(), id), TW_OK);
    EXPECT_EQ(tw_timer_reset(rt.get(), id, kMs), TW_ENOENT) << "stopped";
    ASSERT_EQ(tw_timer_start(rt.get(), 0, 0, probe_cb, &p, &id), TW_OK);
    ASSERT_TRUE(wait_until([&] { return p.runs.load() == 1; }));
    EXPECT_TRUE(wait_until([&] { return tw_timer_reset(rt.get(), id, kMs) == TW_ENOENT; })) << "fired";
    EXPECT_EQ(p.runs.load(), 1);
}

TEST(CApiReset, MovesTheDeadlineNeverEarly) {
    std::deque<Early> lates;  // outlive the runtime
    RtPtr rt = make_runtime();
    // Later: the reset moves a pending timer past its old deadline, so it must
    // land before that deadline. If the machine stalled past it, the timer has
    // fired and the reset is TW_ENOENT: no failure of the runtime, only no
    // test; try again with a longer first delay (bounded; the test fails if
    // no attempt got to test the move).
    bool moved = false;
    for (std::uint64_t first = 5 * kMs; !moved && first <= 1280 * kMs; first *= 2) {
        Early& late = lates.emplace_back();
        tw_timer a = 0;
        ASSERT_EQ(tw_timer_start(rt.get(), first, 0, early_cb, &late, &a), TW_OK);
        late.earliest = tw_now_ns() + 8 * first;
        const int rc = tw_timer_reset(rt.get(), a, 8 * first);
        ASSERT_TRUE(rc == TW_OK || rc == TW_ENOENT) << rc;
        ASSERT_TRUE(wait_until([&] { return late.ran.load() != 0; }))
            << (rc == TW_OK ? "never fired after the reset" : "reset said TW_ENOENT (not pending), but it never fired");
        if (rc != TW_OK) continue;
        EXPECT_GE(late.ran.load(), late.earliest) << "fired before the later deadline (first delay " << first << " ns)";
        moved = true;
    }
    EXPECT_TRUE(moved) << "every reset came after the old deadline: the later move was never tested";
    // Earlier.
    Early soon;
    tw_timer b = 0;
    ASSERT_EQ(tw_timer_start(rt.get(), 10000 * kMs, 0, early_cb, &soon, &b), TW_OK);
    soon.earliest = tw_now_ns() + 10 * kMs;
    ASSERT_EQ(tw_timer_reset(rt.get(), b, 10 * kMs), TW_OK);  // earlier
    ASSERT_TRUE(wait_until([&] { return soon.ran.load() != 0; }));
    EXPECT_GE(soon.ran.load(), soon.earliest);
}

TEST(CApiReset, FromItsOwnOneShotCallbackRearms) {
    RtPtr rt = make_runtime();
    struct Ctx {
        tw_runtime* rt;
        Probe p;
        std::atomic<int> reset_rc{1};
    } ctx;
    ctx.rt = rt.get();
    tw_timer_spec s;
    tw_timer_spec_init(&s);
    s.callback = [](void* arg, tw_timer id) {
        auto* c = static_cast<Ctx*>(arg);
        if (c->p.runs.fetch_add(1) == 0) c->reset_rc.store(tw_timer_reset(c->rt, id, 2 * kMs));
    };
    s.arg = &ctx;
    s.release = [](void* arg) { probe_release(&static_cast<Ctx*>(arg)->p); };
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &id), TW_OK);
    ASSERT_TRUE(wait_until([&] { return ctx.p.released.load() == 1; }));
    EXPECT_EQ(ctx.reset_rc.load(), TW_OK);
    EXPECT_EQ(ctx.p.runs.load(), 2);
    EXPECT_EQ(ctx.p.runs_at_release.load(), 2);
}

// =============================================================================
// Release hook: exactly once on every path
// =============================================================================
TEST(CApiRelease, OnFireAfterTheLastRunOnAWorker) {
    RtPtr rt = make_runtime();
    Probe p;
    tw_timer_spec s = probe_spec(p, kMs);
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &id), TW_OK);
    ASSERT_TRUE(wait_until([&] { return p.released.load() == 1; }));
    EXPECT_EQ(p.runs_at_release.load(), 1);
    EXPECT_NE(p.release_thread.load(), std::this_thread::get_id());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(p.released.load(), 1);
    EXPECT_EQ(p.runs.load(), 1);
}

TEST(CApiRelease, OnShutdownForPendingTimers) {
    tw_runtime* rt = nullptr;
    ASSERT_EQ(tw_runtime_create(nullptr, &rt), TW_OK);
    std::vector<std::unique_ptr<Probe>> probes;
    for (int i = 0; i < 100; ++i) {
        probes.push_back(std::make_unique<Probe>());
        tw_timer_spec s = probe_spec(*probes.back(), 10000 * kMs, i % 2 ? 10000 * kMs : 0);
        tw_timer id = 0;
        ASSERT_EQ(tw_timer_start_ex(rt, &s, &id), TW_OK);
    }
    ASSERT_EQ(tw_runtime_shutdown(rt), TW_OK);
    for (auto& p : probes) {
        EXPECT_EQ(p->released.load(), 1);
        EXPECT_EQ(p->runs.load(), 0);
        EXPECT_EQ(p->release_thread.load(), std::this_thread::get_id());
    }
    tw_stats st;
    st.size = sizeof st;
    ASSERT_EQ(tw_runtime_stats(rt, &st), TW_OK);
    EXPECT_EQ(st.cancelled_at_shutdown, 100u);
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
    for (auto& p : probes) EXPECT_EQ(p->released.load(), 1);
}

TEST(CApiRelease, OnDestroyWithoutShutdown) {
    tw_runtime* rt = nullptr;
    ASSERT_EQ(tw_runtime_create(nullptr, &rt), TW_OK);
    Probe p;
    tw_timer_spec s = probe_spec(p, 10000 * kMs);
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start_ex(rt, &s, &id), TW_OK);
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
    EXPECT_EQ(p.released.load(), 1);
    EXPECT_EQ(p.runs.load(), 0);
}

TEST(CApiRelease, NullReleaseIsFine) {
    RtPtr rt = make_runtime();
    Probe p;
    tw_timer_spec s = probe_spec(p, 0);
    s.release = nullptr;
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &id), TW_OK);
    ASSERT_TRUE(wait_until([&] { return p.runs.load() == 1; }));
    s.delay_ns = 10000 * kMs;
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &id), TW_OK);
    EXPECT_EQ(tw_timer_stop(rt.get(), id), TW_OK);
    s.callback = nullptr;
    EXPECT_EQ(tw_timer_start_ex(rt.get(), &s, &id), TW_EINVAL);
    EXPECT_EQ(p.released.load(), 0);
}

namespace {
void nop_cb(void*, tw_timer) {}

// One timer's own counters (CApiRelease.ExactlyOnceUnderConcurrentStartStopAndShutdown).
struct Life {
    std::atomic<int> released{0};
    std::atomic<int> runs{0};
    std::atomic<int> stop_ok{0};  // stop/stop_sync calls that returned TW_OK
    bool periodic = false;
    bool started = false;  // tw_timer_start_ex returned TW_OK
};
void life_cb(void* arg, tw_timer) { static_cast<Life*>(arg)->runs.fetch_add(1); }
void life_release(void* arg) { static_cast<Life*>(arg)->released.fetch_add(1); }
}  // namespace

// Every start -- successful or refused by the shutdown -- is released exactly
// once, checked per timer (each has its own counter: a total would let a
// double release of one timer hide a missing release of another). Also per
// timer, the "Stop" contract: exactly one of {its last run (one-shot), a stop
// returned TW_OK, cancelled by the shutdown}, the last counted by the
// runtime as cancelled_at_shutdown.
TEST(CApiRelease, ExactlyOnceUnderConcurrentStartStopAndShutdown) {
    constexpr int kThreads = 4;
    constexpr int kPerThread = 2000;
    std::vector<std::deque<Life>> lives(kThreads);  // stable addresses, one deque per thread
    tw_runtime* rt = nullptr;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.shards = 2;
    cfg.workers = 2;
    cfg.resolution_ns = 100000;  // 100 us
    ASSERT_EQ(tw_runtime_create(&cfg, &rt), TW_OK);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([rt, t, &lives] {
            std::deque<Life>& my_lives = lives[static_cast<std::size_t>(t)];
            std::vector<std::pair<tw_timer, Life*>> mine;
            for (int i = 0; i < kPerThread; ++i) {
                Life& life = my_lives.emplace_back();
                life.periodic = i % 3 == 0;
                const std::uint64_t delay_ns = static_cast<std::uint64_t>((i * 7 + t) % 5) * 100000;
                tw_timer_spec s = c_spec(life_cb, &life, life_release, delay_ns, life.periodic ? 200000 : 0);
                tw_timer id = 0;
                const int rc = tw_timer_start_ex(rt, &s, &id);
                if (rc == TW_OK) {
                    life.started = true;
                    mine.emplace_back(id, &life);
                } else {
                    EXPECT_EQ(rc, TW_ESHUTDOWN);
                }
                if (i % 2 == 0 && !mine.empty()) {
                    const auto [victim, vlife] = mine.back();
                    const int s_rc = (i % 4 == 0) ? tw_timer_stop_sync(rt, victim) : tw_timer_stop(rt, victim);
                    EXPECT_TRUE(s_rc == TW_OK || s_rc == TW_ENOENT || s_rc == TW_ESHUTDOWN) << s_rc;
                    if (s_rc == TW_OK) vlife->stop_ok.fetch_add(1);
                    mine.pop_back();
                }
                if (i % 5 == 0 && !mine.empty()) {
                    const int r_rc = tw_timer_reset(rt, mine.front().first, 100000);
                    EXPECT_TRUE(r_rc == TW_OK || r_rc == TW_ENOENT || r_rc == TW_ESHUTDOWN) << r_rc;
                }
            }
        });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // let the threads get going (no race hidden)
    EXPECT_EQ(tw_runtime_shutdown(rt), TW_OK);  // while the threads are still going
    for (auto& th : threads) th.join();
    tw_stats st;
    st.size = sizeof st;
    ASSERT_EQ(tw_runtime_stats(rt, &st), TW_OK);
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
    std::uint64_t started = 0, cancelled = 0;
    int bad = 0;
    for (int t = 0; t < kThreads; ++t) {
        const std::deque<Life>& my_lives = lives[static_cast<std::size_t>(t)];
        ASSERT_EQ(my_lives.size(), static_cast<std::size_t>(kPerThread));
        for (std::size_t i = 0; i < my_lives.size(); ++i) {
            const Life& l = my_lives[i];
            const int released = l.released.load(), runs = l.runs.load(), stops = l.stop_ok.load();
            const int last_run = !l.periodic && runs > 0 ? 1 : 0;
            const bool ok = l.started ? released == 1 && (l.periodic || runs <= 1) && last_run + stops <= 1
                                      : released == 1 && runs == 0 && stops == 0;
            if (!ok && ++bad <= 10)
                ADD_FAILURE() << "thread " << t << " timer " << i << (l.started ? " started" : " refused")
                              << (l.periodic ? " periodic" : " one-shot") << ": released " << released
                              << " times, ran " << runs << " times, stopped (TW_OK) " << stops << " times";
            if (l.started) {
                ++started;
                if (last_run + stops == 0) ++cancelled;
            }
        }
    }
    EXPECT_EQ(bad, 0) << "timers not released exactly once, or ended twice";
    EXPECT_EQ(started, st.started);
    EXPECT_EQ(cancelled, st.cancelled_at_shutdown) << "timers that neither ran their last run nor were stopped";
}

// =============================================================================
// Shutdown, destroy, and calls after them
// =============================================================================
TEST(CApiShutdown, NullRuntimeIsEinval) {
    EXPECT_EQ(tw_runtime_shutdown(nullptr), TW_EINVAL);
    EXPECT_EQ(tw_runtime_destroy(nullptr), TW_EINVAL);
    EXPECT_EQ(tw_runtime_stats(nullptr, nullptr), TW_EINVAL);
    std::uint64_t x = 0;
    EXPECT_EQ(tw_runtime_shard_stats(nullptr, 0, &x, &x), TW_EINVAL);
}

TEST(CApiShutdown, EveryCallAfterShutdownIsEshutdown) {
    tw_runtime* rt = nullptr;
    ASSERT_EQ(tw_runtime_create(nullptr, &rt), TW_OK);
    Probe pending;
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start(rt, 10000 * kMs, 0, probe_cb, &pending, &id), TW_OK);
    ASSERT_EQ(tw_runtime_shutdown(rt), TW_OK);

    Probe p;
    tw_timer out = 3;
    EXPECT_EQ(tw_timer_start(rt, kMs, 0, probe_cb, &p, &out), TW_ESHUTDOWN);
    EXPECT_EQ(out, 0u);
    tw_timer_spec s = probe_spec(p, kMs);
    EXPECT_EQ(tw_timer_start_ex(rt, &s, &out), TW_ESHUTDOWN);
    EXPECT_EQ(p.released.load(), 1) << "released by the failed start";
    EXPECT_EQ(tw_timer_stop(rt, id), TW_ESHUTDOWN);
    EXPECT_EQ(tw_timer_stop_sync(rt, id), TW_ESHUTDOWN);
    EXPECT_EQ(tw_timer_reset(rt, id, kMs), TW_ESHUTDOWN);
    EXPECT_EQ(tw_timer_stop(rt, 0), TW_ESHUTDOWN);
    // Argument errors still come first.
    EXPECT_EQ(tw_timer_start(rt, kMs, 0, nullptr, &p, &out), TW_EINVAL);
    EXPECT_EQ(tw_timer_reset(rt, id, TW_MAX_DELAY_NS + 1), TW_EINVAL);
    // Stats keep working (final counters); shutdown is idempotent.
    tw_stats st;
    st.size = sizeof st;
    EXPECT_EQ(tw_runtime_stats(rt, &st), TW_OK);
    EXPECT_EQ(st.shut_down, 1u);
    EXPECT_EQ(st.cancelled_at_shutdown, 1u);
    EXPECT_EQ(st.live, 0u);
    std::uint64_t pend = 9;
    EXPECT_EQ(tw_runtime_shard_stats(rt, 0, &pend, nullptr), TW_OK);
    EXPECT_EQ(tw_runtime_shutdown(rt), TW_OK);
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
    EXPECT_EQ(pending.runs.load(), 0);
}

TEST(CApiShutdown, ConcurrentShutdownsAllReturnOk) {
    tw_runtime* rt = nullptr;
    ASSERT_EQ(tw_runtime_create(nullptr, &rt), TW_OK);
    Probe p;
    for (int i = 0; i < 100; ++i) {
        tw_timer_spec s = probe_spec(p, static_cast<std::uint64_t>(i) * 100000);
        tw_timer id = 0;
        ASSERT_EQ(tw_timer_start_ex(rt, &s, &id), TW_OK);
    }
    std::vector<std::thread> threads;
    std::atomic<int> ok{0};
    for (int t = 0; t < 3; ++t)
        threads.emplace_back([&] { ok.fetch_add(tw_runtime_shutdown(rt) == TW_OK ? 1 : 0); });
    for (auto& th : threads) th.join();
    EXPECT_EQ(ok.load(), 3);
    EXPECT_EQ(p.released.load(), 100);
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
}

namespace {
struct SelfKill {
    tw_runtime* rt = nullptr;
    std::atomic<int> destroy_rc{1};
    std::atomic<int> shutdown_rc{1};
    std::atomic<int> start_rc{1};
    std::atomic<int> done{0};
};
void self_kill_cb(void* arg, tw_timer) {
    auto* s = static_cast<SelfKill*>(arg);
    s->destroy_rc.store(tw_runtime_destroy(s->rt));
    s->shutdown_rc.store(tw_runtime_shutdown(s->rt));
    // Nothing was done: the runtime still works from here.
    tw_timer id = 0;
    s->start_rc.store(tw_timer_start(s->rt, 10000 * kMs, 0, nop_cb, nullptr, &id));
    s->done.store(1);
}
}  // namespace

TEST(CApiShutdown, DestroyOrShutdownFromACallbackIsEdeadlk) {
    tw_runtime* rt = nullptr;
    ASSERT_EQ(tw_runtime_create(nullptr, &rt), TW_OK);
    SelfKill s;
    s.rt = rt;
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start(rt, 0, 0, self_kill_cb, &s, &id), TW_OK);
    ASSERT_TRUE(wait_until([&] { return s.done.load() == 1; }));
    EXPECT_EQ(s.destroy_rc.load(), TW_EDEADLK);
    EXPECT_EQ(s.shutdown_rc.load(), TW_EDEADLK);
    EXPECT_EQ(s.start_rc.load(), TW_OK);
    tw_stats st;
    st.size = sizeof st;
    EXPECT_EQ(tw_runtime_stats(rt, &st), TW_OK);
    EXPECT_EQ(st.shut_down, 0u);
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);  // from a normal thread: fine
}

namespace {
struct ReleaseKill {
    tw_runtime* rt = nullptr;
    std::atomic<int> rc{1};
    std::atomic<int> released{0};
};
void release_kill(void* arg) {
    auto* r = static_cast<ReleaseKill*>(arg);
    r->rc.store(tw_runtime_destroy(r->rt));
    r->released.fetch_add(1);
}
}  // namespace

TEST(CApiShutdown, DestroyFromAReleaseHookIsEdeadlk) {
    tw_runtime* rt = nullptr;
    ASSERT_EQ(tw_runtime_create(nullptr, &rt), TW_OK);
    // Released inside tw_timer_stop on this thread ...
    ReleaseKill a;
    a.rt = rt;
    tw_timer_spec s = c_spec(nop_cb, &a, release_kill, 10000 * kMs);
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start_ex(rt, &s, &id), TW_OK);
    EXPECT_EQ(tw_timer_stop(rt, id), TW_OK);
    EXPECT_EQ(a.rc.load(), TW_EDEADLK);
    // ... on a worker after the last run ...
    ReleaseKill b;
    b.rt = rt;
    s.delay_ns = 0;
    s.arg = &b;
    ASSERT_EQ(tw_timer_start_ex(rt, &s, &id), TW_OK);
    ASSERT_TRUE(wait_until([&] { return b.released.load() == 1; }));
    EXPECT_EQ(b.rc.load(), TW_EDEADLK);
    // ... and inside shutdown.
    ReleaseKill c;
    c.rt = rt;
    s.delay_ns = 10000 * kMs;
    s.arg = &c;
    ASSERT_EQ(tw_timer_start_ex(rt, &s, &id), TW_OK);
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
    EXPECT_EQ(c.rc.load(), TW_EDEADLK);
    EXPECT_EQ(c.released.load(), 1);
}

TEST(CApiShutdown, OneRuntimesCallbackMayDestroyAnother) {
    tw_runtime* a = nullptr;
    tw_runtime* b = nullptr;
    ASSERT_EQ(tw_runtime_create(nullptr, &a), TW_OK);
    ASSERT_EQ(tw_runtime_create(nullptr, &b), TW_OK);
    SelfKill s;
    s.rt = b;  // a's callback destroys b
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start(a, 0, 0,
                             [](void* arg, tw_timer) {
                                 auto* k = static_cast<SelfKill*>(arg);
                                 k->destroy_rc.store(tw_runtime_destroy(k->rt));
                                 k->done.store(1);
                             },
                             &s, &id),
              TW_OK);
    ASSERT_TRUE(wait_until([&] { return s.done.load() == 1; }));
    EXPECT_EQ(s.destroy_rc.load(), TW_OK);
    EXPECT_EQ(tw_runtime_destroy(a), TW_OK);
}

// =============================================================================
// Stats
// =============================================================================
TEST(CApiStats, BadInput) {
    RtPtr rt = make_runtime();
    EXPECT_EQ(tw_runtime_stats(rt.get(), nullptr), TW_EINVAL);
    // (128: below the ABI-1 size, 136; since 1.7 tw_stats is larger.)
    for (std::uint32_t size : {0u, 4u, 128u, 4097u, 0xFFFFFFFFu}) {
        tw_stats st;
        std::memset(&st, 0xCD, sizeof st);
        st.size = size;
        EXPECT_EQ(tw_runtime_stats(rt.get(), &st), TW_EINVAL) << size;
        EXPECT_EQ(st.size, size) << "untouched on failure";
    }
    std::uint64_t x = 0;
    EXPECT_EQ(tw_runtime_shard_stats(rt.get(), 2, &x, &x), TW_EINVAL);
    EXPECT_EQ(tw_runtime_shard_stats(rt.get(), UINT32_MAX, &x, &x), TW_EINVAL);
    EXPECT_EQ(tw_runtime_shard_stats(rt.get(), 1, nullptr, nullptr), TW_OK);
}

TEST(CApiStats, ALargerCallerStructIsFilledAndZeroPadded) {
    RtPtr rt = make_runtime();
    struct Future {
        tw_stats base;
        std::uint64_t future[4];
    } f;
    std::memset(&f, 0xCD, sizeof f);
    f.base.size = sizeof f;
    ASSERT_EQ(tw_runtime_stats(rt.get(), &f.base), TW_OK);
    EXPECT_EQ(f.base.size, sizeof(tw_stats)) << "bytes filled";
    for (std::uint64_t v : f.future) EXPECT_EQ(v, 0u);
    EXPECT_EQ(f.base.shards, 2u);
}

TEST(CApiStats, Counters) {
    RtPtr rt = make_runtime();
    Probe fire, stop, keep;
    tw_timer a = 0, b = 0, c = 0;
    ASSERT_EQ(tw_timer_start(rt.get(), 0, 0, probe_cb, &fire, &a), TW_OK);
    ASSERT_EQ(tw_timer_start(rt.get(), 10000 * kMs, 0, probe_cb, &stop, &b), TW_OK);
    ASSERT_EQ(tw_timer_start(rt.get(), 10000 * kMs, 0, probe_cb, &keep, &c), TW_OK);
    ASSERT_EQ(tw_timer_reset(rt.get(), c, 20000 * kMs), TW_OK);
    ASSERT_EQ(tw_timer_stop(rt.get(), b), TW_OK);
    ASSERT_TRUE(wait_until([&] { return fire.runs.load() == 1; }));
    tw_stats st;
    st.size = sizeof st;
    ASSERT_TRUE(wait_until([&] {
        EXPECT_EQ(tw_runtime_stats(rt.get(), &st), TW_OK);
        return st.live == 1 && st.pending == 1;
    }));
    EXPECT_EQ(st.size, sizeof st);
    EXPECT_EQ(st.started, 3u);
    EXPECT_EQ(st.fired, 1u);
    EXPECT_EQ(st.stopped, 1u);
    EXPECT_EQ(st.reset, 1u);
    EXPECT_EQ(st.callback_exceptions, 0u);
    EXPECT_EQ(st.cancelled_at_shutdown, 0u);
    EXPECT_EQ(st.lateness_samples, 1u);
    EXPECT_LE(st.lateness_p50_ns, st.lateness_max_ns);
    std::uint64_t p0 = 0, p1 = 0, i0 = 0, i1 = 0;
    ASSERT_EQ(tw_runtime_shard_stats(rt.get(), 0, &p0, &i0), TW_OK);
    ASSERT_EQ(tw_runtime_shard_stats(rt.get(), 1, &p1, &i1), TW_OK);
    EXPECT_EQ(p0 + p1, 1u);
}

namespace {
void throwing_cb(void*, tw_timer) { throw std::runtime_error("from a C++ callback"); }
}  // namespace

TEST(CApiStats, AThrowingCallbackIsCountedNotFatal) {
    RtPtr rt = make_runtime();
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start(rt.get(), 0, 0, throwing_cb, nullptr, &id), TW_OK);
    tw_stats st;
    st.size = sizeof st;
    EXPECT_TRUE(wait_until([&] {
        EXPECT_EQ(tw_runtime_stats(rt.get(), &st), TW_OK);
        return st.callback_exceptions == 1;
    }));
}

// A binding's own catch (Python, Node.js, Rust) counts beside the C++ ones:
// from a callback, from another thread, after shutdown (fork_test: a child's call).
namespace {
struct CountFromCallback {
    tw_runtime* rt = nullptr;
    std::atomic<int> rc{1};
};
void counting_cb(void* arg, tw_timer) {
    auto* c = static_cast<CountFromCallback*>(arg);
    c->rc.store(tw_runtime_count_callback_exception(c->rt));
}
}  // namespace

TEST(CApiStats, ExceptionsCountedByABindingAddToTheCppOnes) {
    RtPtr rt = make_runtime();
    EXPECT_EQ(tw_runtime_count_callback_exception(nullptr), TW_EINVAL);
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start(rt.get(), 0, 0, throwing_cb, nullptr, &id), TW_OK);  // the runtime counts it
    CountFromCallback c;
    c.rt = rt.get();
    ASSERT_EQ(tw_timer_start(rt.get(), 0, 0, counting_cb, &c, &id), TW_OK);  // the "binding" counts it
    ASSERT_TRUE(wait_until([&] { return c.rc.load() == TW_OK; }));
    ASSERT_EQ(tw_runtime_count_callback_exception(rt.get()), TW_OK);  // any thread
    tw_stats st;
    tw_stats_init(&st);
    EXPECT_TRUE(wait_until([&] {
        EXPECT_EQ(tw_runtime_stats(rt.get(), &st), TW_OK);
        return st.callback_exceptions == 3;
    }));
    std::string text(1 << 16, '\0');
    const int n = tw_runtime_metrics(rt.get(), text.data(), text.size());
    ASSERT_GT(n, 0);
    text.resize(static_cast<std::size_t>(n));
    const std::size_t at = text.find("\ntickwheel_callback_exceptions_total{runtime=\"");
    ASSERT_NE(at, std::string::npos);
    const std::size_t eol = text.find('\n', at + 1);
    EXPECT_EQ(text.substr(eol - 2, 2), " 3") << text.substr(at + 1, eol - at - 1);
    ASSERT_EQ(tw_runtime_shutdown(rt.get()), TW_OK);
    EXPECT_EQ(tw_runtime_count_callback_exception(rt.get()), TW_OK);  // after shutdown: still counted
    ASSERT_EQ(tw_runtime_stats(rt.get(), &st), TW_OK);
    EXPECT_EQ(st.callback_exceptions, 4u);
}

// =============================================================================
// Errors and version
// =============================================================================
TEST(CApiMisc, StrerrorForEveryCode) {
    const int codes[] = {TW_OK, TW_EINVAL, TW_ENOMEM, TW_ENOENT, TW_EAGAIN, TW_ESHUTDOWN, TW_EDEADLK};
    std::set<std::string> texts;
    for (int c : codes) {
        const char* s = tw_strerror(c);
        ASSERT_NE(s, nullptr) << c;
        EXPECT_GT(std::strlen(s), 0u) << c;
        EXPECT_STRNE(s, "unknown error") << c;
        texts.insert(s);
    }
    EXPECT_EQ(texts.size(), std::size(codes)) << "distinct texts";
    for (int unknown : {1, -1, 22, -9999, INT_MIN, INT_MAX}) {
        ASSERT_NE(tw_strerror(unknown), nullptr) << unknown;
        EXPECT_STREQ(tw_strerror(unknown), "unknown error") << unknown;
    }
}

TEST(CApiMisc, CodesAreNegatedErrno) {
    EXPECT_EQ(TW_EINVAL, -EINVAL);
    EXPECT_EQ(TW_ENOMEM, -ENOMEM);
    EXPECT_EQ(TW_ENOENT, -ENOENT);
    EXPECT_EQ(TW_EAGAIN, -EAGAIN);
    EXPECT_EQ(TW_ESHUTDOWN, -ESHUTDOWN);
    EXPECT_EQ(TW_EDEADLK, -EDEADLK);
}

TEST(CApiMisc, Version) {
    EXPECT_EQ(tw_version(), static_cast<std::uint32_t>(TW_VERSION));
    EXPECT_EQ(tw_version(), (1u << 16) | (7u << 8) | 0u);
    EXPECT_EQ(TW_ABI_VERSION, 1);
}
