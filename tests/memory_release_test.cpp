// SPDX-License-Identifier: MIT OR Apache-2.0
// Memory given back after a peak (issue 34): free timer records beyond what
// the live timers need (and Config::slot_reserve) go back to the kernel once
// a shard is quiet, from its driver; the inbox's queue after a big backlog
// too. Forced here:
//   * a burst of 10 M timers started and stopped: RSS back within 10% of the
//     pre-burst figure within 2 s of the last stop (1 M under the
//     sanitizers, whose allocators and shadow memory make 10 M slow and RSS
//     meaningless: there only the gauges are checked);
//   * ids of records given back stay stale when their chunk is made again:
//     a stale stop or query acts on nothing, the new timers in those slots
//     are untouched, and their generations are above the old ones;
//   * a page with a live timer, or a record a thread is acting on (its
//     hazard: parked between its load and its CAS), stays resident;
//   * kKeepAllSlots keeps everything (1.5's behaviour).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "runtime/caller_cells.hpp"
#include "runtime/handle_table.hpp"
#include "runtime/runtime_core.hpp"
#include "runtime/test_hooks.hpp"
#include "test_support.hpp"
#include "tickwheel/runtime.hpp"

using namespace std::chrono;
using tickwheel::Runtime;
using tw_test::wait_until;
namespace hooks = tickwheel::rt::test_hooks;

// ---- access to the runtime's shards (an explicit instantiation may name a
// private member) ---------------------------------------------------------------
namespace {
struct CoreOf {
    using type = std::unique_ptr<tickwheel::rt::RuntimeCore> Runtime::*;
    friend type member(CoreOf);
};
template <class Tag, typename Tag::type M>
struct Expose {
    friend typename Tag::type member(Tag) { return M; }
};
template struct Expose<CoreOf, &Runtime::core_>;
tickwheel::rt::HandleTable& table_of(Runtime& rt, unsigned shard) { return (rt.*member(CoreOf{}))->shard(shard).table(); }

long rss_kb() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return -1;
}

/// Whether the page holding `p` is resident (mincore).
bool resident(const void* p) {
    const long page = sysconf(_SC_PAGESIZE);
    auto* at = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) & ~static_cast<std::uintptr_t>(page - 1));
    unsigned char v = 0;
    EXPECT_EQ(mincore(at, static_cast<std::size_t>(page), &v), 0);
    return (v & 1) != 0;
}

/// The record an id names (tests: its address only).
const void* record_of(Runtime& rt, std::uint64_t id) {
    return table_of(rt, tw_test::id_shard(id)).find(tw_test::id_index(id));
}

/// Ids in an anonymous mapping, unmapped when done (a vector's buffer would
/// stay in the heap and count in RSS).
struct Ids {
    explicit Ids(std::size_t n) : n_(n) {
        void* m = mmap(nullptr, n * sizeof(std::uint64_t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        EXPECT_NE(m, MAP_FAILED);
        p_ = static_cast<std::uint64_t*>(m);
    }
    ~Ids() { release(); }
    void release() {
        if (p_ != nullptr) munmap(p_, n_ * sizeof(std::uint64_t));
        p_ = nullptr;
    }
    std::uint64_t& operator[](std::size_t i) { return p_[i]; }
    std::size_t n_;
    std::uint64_t* p_;
};

/// Waits until the runtime's records are back to at most `slots` (the
/// driver gives them back once its shard is quiet), or `timeout`.
bool slots_back_to(Runtime& rt, std::size_t slots, tickwheel::Duration timeout) {
    return wait_until([&] { return rt.stats().slots <= slots; }, timeout);
}

constexpr std::uint64_t kChunk = tickwheel::rt::HandleTable::kChunkSize;

}  // namespace

TEST(MemoryRelease, ABurstOfTenMillionGivesItsMemoryBackWithinTwoSeconds) {
    const std::size_t n = tw_test::kSanitized ? 1'000'000 : 10'000'000;
    tickwheel::Config cfg = tw_test::small_config(2, 2);
    cfg.slot_reserve = 1;  // keep (almost) nothing: the figure to compare is the process before the burst
    Runtime rt(cfg);
    // Warm: the threads, the caller's cell grown to its capacity and a first
    // chunk exist. (A cell's positions -- 16 bytes per timer it holds, at
    // most CallerCells::kMaxChunks x kChunkSlots, 2 MiB -- stay with the
    // shard: a fixed cost per thread, not proportional to a burst.)
    {
        constexpr std::size_t kCell = tickwheel::rt::CallerCells::kMaxChunks * tickwheel::rt::CallerCells::kChunkSlots;
        std::vector<std::uint64_t> warm(kCell);
        for (auto& id : warm) id = rt.start(hours(1), [] {}).id();
        for (const std::uint64_t id : warm) rt.stop(id);
    }
    ASSERT_TRUE(slots_back_to(rt, 4096, seconds(tw_test::kSanitized ? 30 : 5))) << "slots " << rt.stats().slots;
    std::this_thread::sleep_for(milliseconds(300));
    const long pre = rss_kb();
    {
        Ids ids(n);
        for (std::size_t i = 0; i < n; ++i) ids[i] = rt.start(hours(1), [] {}).id();
        const tickwheel::Stats peak = rt.stats();
        EXPECT_GE(peak.slots, n);
        EXPECT_GE(peak.resident_bytes, n * 64);
        std::printf("pre-burst RSS %ld KB, after %zu starts %ld KB (slots %zu, resident %llu bytes)\n", pre, n,
                    rss_kb(), peak.slots, static_cast<unsigned long long>(peak.resident_bytes));
        for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(rt.stop(ids[i]));
    }
    const auto stopped = steady_clock::now();
    // The records, then (kernel permitting) the process's RSS.
    EXPECT_TRUE(slots_back_to(rt, 4096, seconds(tw_test::kSanitized ? 30 : 2))) << "slots " << rt.stats().slots;
    const tickwheel::Stats after = rt.stats();
    EXPECT_LE(after.resident_bytes, 4096u * 64 + (std::size_t{2} << 20)) << "records resident";
    if (tw_test::kSanitized) return;  // (their allocators keep what they were given: RSS says nothing)
    long rss = rss_kb();
    while (rss > pre + pre / 10 && steady_clock::now() - stopped < seconds(2)) {
        std::this_thread::sleep_for(milliseconds(10));
        rss = rss_kb();
    }
    const double took = duration<double>(steady_clock::now() - stopped).count();
    std::printf("RSS %ld KB %.2f s after the last stop (pre-burst %ld KB: %+.1f%%); slots %zu, resident %llu bytes\n",
                rss, took, pre, 100.0 * static_cast<double>(rss - pre) / static_cast<double>(pre), after.slots,
                static_cast<unsigned long long>(after.resident_bytes));
    EXPECT_LE(rss, pre + pre / 10) << "RSS not back within 10% of the pre-burst figure within 2 s";
    RecordProperty("rss_pre_kb", std::to_string(pre));
    RecordProperty("rss_after_kb", std::to_string(rss));
}

namespace {
/// One shard, one worker, a reserve of one record: everything beyond what
/// the live timers need may go back.
tickwheel::Config reserve_one() {
    tickwheel::Config cfg = tw_test::small_config(1, 1);
    cfg.slot_reserve = 1;
    return cfg;
}
/// `n` timers due in an hour, their ids.
std::vector<std::uint64_t> start_for_an_hour(Runtime& rt, std::size_t n) {
    std::vector<std::uint64_t> ids(n);
    for (std::size_t i = 0; i < n; ++i) ids[i] = rt.start(hours(1), [] {}).id();
    return ids;
}
}  // namespace

TEST(MemoryRelease, IdsOfRecordsGivenBackStayStaleWhenTheirChunkComesBack) {
    Runtime rt(reserve_one());
    const std::size_t n = 3 * kChunk;
    const std::vector<std::uint64_t> old = start_for_an_hour(rt, n);
    for (const std::uint64_t id : old) ASSERT_TRUE(rt.stop(id));
    ASSERT_TRUE(slots_back_to(rt, 4096, tw_test::kWait)) << rt.stats().slots;
    // Made again: the same slots, new timers (pending an hour).
    std::vector<std::uint64_t> fresh(n);
    for (std::size_t i = 0; i < n; ++i) fresh[i] = rt.start(hours(1), [] {}).id();
    std::size_t reused = 0;
    std::vector<std::uint32_t> old_gen(4 * kChunk, 0);
    for (const std::uint64_t id : old) old_gen[tw_test::id_index(id)] = tw_test::id_gen(id);
    for (const std::uint64_t id : fresh) {
        const std::uint32_t i = tw_test::id_index(id);
        if (i < old_gen.size() && old_gen[i] != 0) {
            ++reused;
            EXPECT_GT(tw_test::id_gen(id), old_gen[i]) << "slot " << i << ": a generation at or below an old one";
        }
    }
    EXPECT_GT(reused, n / 2) << "the slots given back were made again";
    // Every old id is stale: it stops nothing, finds nothing.
    for (const std::uint64_t id : old) {
        ASSERT_FALSE(rt.stop(id));
        ASSERT_FALSE(rt.query(id).has_value());
        ASSERT_FALSE(rt.reset(id, milliseconds(1)));
    }
    // ...and touched none of the new timers.
    EXPECT_EQ(rt.stats().live, n);
    EXPECT_TRUE(wait_until([&] { return rt.stats().pending_per_shard[0] == n; })) << rt.stats().pending_per_shard[0];
    for (const std::uint64_t id : fresh) {
        const auto info = rt.query(id);
        ASSERT_TRUE(info.has_value());
        ASSERT_EQ(info->state, tickwheel::TimerStatus::pending);
    }
    for (const std::uint64_t id : fresh) ASSERT_TRUE(rt.stop(id));
}

TEST(MemoryRelease, APageWithALiveTimerStaysAndItsTimerRuns) {
    tickwheel::Config cfg = tw_test::small_config(1, 1);
    cfg.slot_reserve = 1;
    Runtime rt(cfg);
    const std::size_t n = 3 * kChunk;  // (a trim needs kTrimMinRecords free: 2 chunks)
    std::vector<std::uint64_t> ids(n);
    for (std::size_t i = 0; i < n; ++i) ids[i] = rt.start(hours(1), [] {}).id();
    // Every 1000th stays live; its page (and its chunk's header page) stays.
    std::vector<std::uint64_t> live;
    for (std::size_t i = 0; i < n; ++i)
        if (i % 1000 == 500)
            live.push_back(ids[i]);
        else
            ASSERT_TRUE(rt.stop(ids[i]));
    ASSERT_TRUE(slots_back_to(rt, live.size() * 64 + 4 * 64, tw_test::kWait)) << rt.stats().slots;
    for (const std::uint64_t id : live) {
        EXPECT_TRUE(resident(record_of(rt, id)));
        ASSERT_TRUE(rt.reset(id, milliseconds(1)));
    }
    ASSERT_TRUE(wait_until([&] { return rt.stats().fired == live.size(); }));
}

namespace {
// A stop parked between its load of the word and its CAS ('c'), on a timer
// another thread then stops and the shard recycles: its record is FREE, on
// the free stack, and a thread still acts on it.
struct Park {
    tw_test::Gate parked, go;
};
Park* g_park = nullptr;
thread_local bool t_park_me = false;
void park_hook(const void*, char what) {
    if (!t_park_me || what != 'c' || g_park == nullptr) return;
    t_park_me = false;
    g_park->parked.open();
    EXPECT_TRUE(g_park->go.wait(seconds(60)));
}
}  // namespace

TEST(MemoryRelease, ARecordAThreadActsOnKeepsItsPage) {
    Runtime rt(reserve_one());
    const std::size_t n = 3 * kChunk;
    const std::vector<std::uint64_t> ids = start_for_an_hour(rt, n);
    const std::uint64_t victim = ids[kChunk + 100];  // in the second chunk
    Park park;
    g_park = &park;
    hooks::in_window.store(&park_hook);
    std::thread parked([&] {
        t_park_me = true;
        EXPECT_FALSE(rt.stop(victim));  // its CAS fails: the timer was stopped under it
    });
    ASSERT_TRUE(park.parked.wait(seconds(30)));
    for (const std::uint64_t id : ids) ASSERT_TRUE(rt.stop(id));
    // Everything but the victim's page (and its chunk's header page, and
    // the pages of the records the stopping thread's cell keeps) goes back.
    const bool back = slots_back_to(rt, 4 * 64, tw_test::kWait);
    const tickwheel::Stats st = rt.stats();
    const bool kept = resident(record_of(rt, victim));
    park.go.open();
    parked.join();
    hooks::in_window.store(nullptr);
    g_park = nullptr;
    EXPECT_TRUE(back) << "slots " << st.slots;
    EXPECT_TRUE(kept) << "the page of a record a thread acts on was given back";
    EXPECT_GE(st.slots, 63u) << "its page's records";
    EXPECT_EQ(rt.stats().live, 0u);  // the parked stop acted on nothing
}

TEST(MemoryRelease, NothingGoesBackWhileDueTimersWaitForAWorker) {
    // An expiry burst's callbacks still running: a trim then would take the
    // driver's core from them (and the next burst would fault its pages in
    // again). The free records wait until no due timer waits for a worker.
    tickwheel::Config cfg = tw_test::small_config(1, 1);
    cfg.slot_reserve = 1;
    Runtime rt(cfg);
    tw_test::Gate gate;
    tw_test::OpenOnExit open_on_exit{gate};
    const std::size_t n = 3 * kChunk;
    std::vector<std::uint64_t> ids(n);
    for (std::size_t i = 0; i < n; ++i) ids[i] = rt.start(hours(1), [] {}).id();
    // The one worker blocked in a callback; the second due timer waits for it.
    std::atomic<int> ran{0};
    rt.start(milliseconds(1), [&] {
        ran.fetch_add(1);
        EXPECT_TRUE(gate.wait(seconds(60)));
    });
    ASSERT_TRUE(wait_until([&] { return ran.load() == 1; }));
    rt.start(milliseconds(1), [&] { ran.fetch_add(1); });
    ASSERT_TRUE(wait_until([&] { return rt.stats().waiting_for_worker == 1; }));
    for (const std::uint64_t id : ids) ASSERT_TRUE(rt.stop(id));  // a surplus of 3 chunks
    std::this_thread::sleep_for(milliseconds(800));  // several quiet periods
    EXPECT_EQ(table_of(rt, 0).released_records(), 0u) << "records given back while a due timer waited for a worker";
    gate.open();
    EXPECT_TRUE(wait_until([&] { return ran.load() == 2; }));
    EXPECT_TRUE(slots_back_to(rt, 4096, tw_test::kWait)) << "slots " << rt.stats().slots;
}

TEST(MemoryRelease, KeepAllSlotsGivesNothingBack) {
    tickwheel::Config cfg = tw_test::small_config(1, 1);
    cfg.slot_reserve = tickwheel::kKeepAllSlots;
    Runtime rt(cfg);
    const std::size_t n = 3 * kChunk;
    std::vector<std::uint64_t> ids(n);
    for (std::size_t i = 0; i < n; ++i) ids[i] = rt.start(hours(1), [] {}).id();
    for (const std::uint64_t id : ids) ASSERT_TRUE(rt.stop(id));
    std::this_thread::sleep_for(milliseconds(800));  // several quiet periods: a trim would have come
    EXPECT_GE(rt.stats().slots, n);
    EXPECT_EQ(table_of(rt, 0).released_records(), 0u);
}

namespace {
// The driver held in its pass ('P', its inbox just drained) while armed: a
// backlog builds up, and its next pass drains it whole.
std::atomic<bool> g_hold_driver{false};
std::atomic<bool> g_driver_held{false};
void hold_hook(const void*, char what) {
    if (what != 'P') return;
    while (g_hold_driver.load()) {
        g_driver_held.store(true);
        std::this_thread::sleep_for(milliseconds(1));
    }
}
}  // namespace

TEST(MemoryRelease, TheInboxQueueIsFreedAfterABigBacklog) {
    tickwheel::Config cfg = tw_test::small_config(1, 1);
    Runtime rt(cfg);
    const std::size_t n = 4 * kChunk;
    std::vector<std::uint64_t> ids(n);
    for (std::size_t i = 0; i < n; ++i) ids[i] = rt.start(hours(1), [] {}).id();
    auto& shard = (rt.*member(CoreOf{}))->shard(0);
    ASSERT_TRUE(wait_until([&] { return shard.inbox_size() == 0; }));
    g_hold_driver = true;
    g_driver_held = false;
    hooks::in_window.store(&hold_hook);
    struct Unhook {
        ~Unhook() {
            g_hold_driver = false;
            hooks::in_window.store(nullptr);
        }
    } unhook;
    // (A message: the driver passes, and is held. From a thread other than
    // the starter: the starter's own stop takes its timer back from its
    // cell and posts nothing.)
    std::thread([&] { rt.stop(ids[0]); }).join();
    ASSERT_TRUE(wait_until([&] { return g_driver_held.load(); }));
    // Stops from a thread that is not the starter (no cell): a Cancel each,
    // queued while the driver is held: a backlog of n messages.
    std::thread other([&] {
        std::vector<std::error_code> results(n);
        std::error_code ec;
        EXPECT_EQ(rt.stop(std::span<const std::uint64_t>(ids), std::span<std::error_code>(results), ec), n - 1);
    });
    other.join();
    EXPECT_GE(shard.inbox_size(), n - 1);
    EXPECT_EQ(shard.inbox_retired(), 0u);
    g_hold_driver = false;
    EXPECT_TRUE(wait_until([&] { return shard.inbox_retired() >= 1; })) << "the inbox kept its backlog's queue";
    EXPECT_EQ(rt.stats().live, 0u);
    // Still a working inbox.
    std::atomic<int> ran{0};
    rt.start(milliseconds(1), [&] { ran.fetch_add(1); });
    EXPECT_TRUE(wait_until([&] { return ran.load() == 1; }));
}
