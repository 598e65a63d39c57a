// SPDX-License-Identifier: MIT OR Apache-2.0
// An out-of-tree C++ program using an installed tickwheel through its C++ API
// (tickwheel/runtime.hpp), linked with the shared libtickwheel.so.1 or the
// static libtickwheel.a. Prints "consumer_cxx: OK ..." and exits 0 when one-shot,
// periodic, stop, stop_sync, reset, an exception thrown inside the library
// (caught here by type) and stats all behaved.
#include <atomic>
#include <string>
#include <chrono>
#include <cstdio>
#include <system_error>
#include <thread>
#include <vector>

#include <tickwheel/runtime.hpp>
#include <tickwheel/tickwheel.h>

using namespace std::chrono_literals;

namespace {

int failures = 0;

void check(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "consumer_cxx: FAILED: %s\n", what);
        ++failures;
    }
}

template <class Pred>
bool wait_for(Pred pred, std::chrono::seconds limit = std::chrono::seconds(10)) {
    const auto give_up = tickwheel::Runtime::now() + limit;
    while (!pred()) {
        if (tickwheel::Runtime::now() > give_up) return false;
        std::this_thread::sleep_for(1ms);
    }
    return true;
}

/// Counts its destruction: the timer's release hook.
struct Released {
    std::atomic<int>* n;
    explicit Released(std::atomic<int>* p) noexcept : n(p) {}
    Released(Released&& o) noexcept : n(o.n) { o.n = nullptr; }
    Released(const Released&) = delete;
    Released& operator=(const Released&) = delete;
    Released& operator=(Released&&) = delete;
    ~Released() {
        if (n != nullptr) n->fetch_add(1);
    }
};

}  // namespace

int main() {
    if (tw_version() != TW_VERSION) {
        std::fprintf(stderr, "consumer_cxx: header %#x, library %#x\n", unsigned{TW_VERSION}, tw_version());
        return 1;
    }

    // An exception thrown inside the library, caught by type here.
    try {
        tickwheel::Config bad;
        bad.resolution = 0ns;  // outside 1 us .. 1 s
        tickwheel::Runtime never(bad);
        check(false, "a bad Config was accepted");
    } catch (const tickwheel::Error& e) {
        check(e.code() == tickwheel::errc::invalid_argument, "bad Config: errc::invalid_argument");
        check(&e.code().category() == &tickwheel::error_category(), "one error category");
    }

    tickwheel::Config cfg;
    cfg.shards = 2;
    cfg.workers = 2;
    tickwheel::Runtime rt(cfg);
    check(rt.shard_count() == 2, "shard_count");

    // One-shot.
    std::atomic<int> fired{0};
    std::atomic<int> released{0};
    rt.start(1ms, [&fired, r = Released(&released)] { fired.fetch_add(1); });
    check(wait_for([&] { return fired.load() == 1 && released.load() == 1; }), "one-shot fired and released");

    // Periodic, ended by stop_sync: no run after it returns, hook has returned.
    std::atomic<int> runs{0};
    std::atomic<int> periodic_released{0};
    const tickwheel::Timer periodic =
        rt.start_periodic(2ms, [&runs, r = Released(&periodic_released)](tickwheel::Timer) { runs.fetch_add(1); });
    check(wait_for([&] { return runs.load() >= 3; }), "periodic ran 3 times");
    check(rt.stop_sync(periodic), "stop_sync stopped the periodic timer");
    const int after_stop = runs.load();
    check(periodic_released.load() == 1, "stop_sync: release hook has returned");
    std::this_thread::sleep_for(10ms);
    check(runs.load() == after_stop, "no run after stop_sync");

    // stop: a far timer never runs; its callable is released inside stop.
    std::atomic<int> far_released{0};
    tickwheel::Timer far = rt.start(1h, [r = Released(&far_released)] {});
    check(far.stop(), "stop() of a pending timer");
    check(far_released.load() == 1, "stop() released the callable");
    check(!rt.stop(far), "a second stop() finds nothing");

    // reset: an hour becomes a millisecond.
    std::atomic<int> reset_fired{0};
    const tickwheel::Timer moved = rt.start(1h, [&reset_fired] { reset_fired.fetch_add(1); });
    check(rt.reset(moved, 1ms), "reset of a pending timer");
    check(wait_for([&] { return reset_fired.load() == 1; }), "the reset timer fired");

    // A bad call inside the library throws tickwheel::Error (reset's throwing
    // overload is exported by libtickwheel.so.1).
    try {
        rt.reset(moved.id(), -1ms);
        check(false, "reset with a negative delay was accepted");
    } catch (const tickwheel::Error& e) {
        check(e.code() == tickwheel::errc::invalid_argument, "reset(-1ms): errc::invalid_argument");
        // 1.5: what() names the argument and the limit.
        const std::string what = e.what();
        check(what.find("delay -1000000 ns") != std::string::npos && what.find("kMaxDelay") != std::string::npos,
              "reset(-1ms): what() names the delay and kMaxDelay");
    }
    // 1.5: a start_at() deadline from the runtime's own clock, and its name.
    check(rt.clock_now() >= tickwheel::Runtime::now() - 1s, "clock_now() of a real runtime is the machine's");
    check(rt.name().rfind("tickwheel-", 0) == 0, "a made-up name");

    // The last callable is released right after its run.
    check(wait_for([&] { return rt.stats().live == 0; }), "stats: nothing live");
    const tickwheel::Stats st = rt.stats();
    check(st.pending_per_shard.size() == 2, "stats: one entry per shard");
    check(st.started == 4 && st.stopped == 2 && st.reset == 1 && st.fired >= 5, "stats counters");

    // The timer model (TICKWHEEL_CXX_1.3): query, reset_at, a group stopped whole.
    {
        tickwheel::StartOptions o;
        o.delay = 1h;
        o.period = 10ms;
        o.policy = tickwheel::PeriodPolicy::burst;
        o.leeway = 1ms;
        o.group = 9;
        const tickwheel::Timer g = rt.start(o, [] {});
        const auto info = rt.query(g);
        check(info && info->state == tickwheel::TimerStatus::pending && info->group == 9 && info->period == 10ms,
              "query() of a pending grouped timer");
        check(rt.reset_at(g.id(), tickwheel::Runtime::now() + 2h), "reset_at() of a pending timer");
        check(rt.stop_group(9, true) == 1, "stop_group() stopped the group's one timer");
        check(!rt.query(g), "query() of a stopped timer: nullopt");
    }

    // The batches (TICKWHEEL_CXX_1.4): one callable per element from a
    // factory, re-armed and stopped over spans, per-element results.
    {
        std::atomic<int> released{0};
        std::vector<tickwheel::StartOptions> opts(3);
        for (auto& o : opts) o.delay = 1h;
        opts[1].delay = -1ms;  // refused: its callable is destroyed inside start()
        std::vector<std::error_code> results(3);
        const std::vector<tickwheel::Timer> ts =
            rt.start(opts, [&](std::size_t) { return [r = Released(&released)] {}; }, results);
        check(ts.size() == 3 && ts[0] && !ts[1] && ts[2] && results[1] == tickwheel::errc::invalid_argument &&
                  released == 1,
              "start(span, factory): two started, the refused one released");
        const std::uint64_t ids[3] = {ts[0].id(), ts[2].id(), 0};
        check(rt.reset(ids, 2h, results) == 2 && results[2] == tickwheel::errc::not_found, "reset(span)");
        check(rt.stop(ids, results) == 2 && !results[0] && results[2] == tickwheel::errc::not_found && released == 3,
              "stop(span)");
    }

    rt.shutdown();
    check(rt.is_shut_down(), "is_shut_down");
    try {
        rt.start(1ms, [] {});
        check(false, "start after shutdown was accepted");
    } catch (const tickwheel::Error& e) {
        check(e.code() == tickwheel::errc::shutting_down, "start after shutdown: errc::shutting_down");
    }

    if (failures != 0) return 1;
    std::printf("consumer_cxx: OK (tickwheel %u.%u.%u; started %llu, fired %llu, stopped %llu, reset %llu)\n",
                tw_version() >> 16, (tw_version() >> 8) & 0xffu, tw_version() & 0xffu,
                static_cast<unsigned long long>(st.started), static_cast<unsigned long long>(st.fired),
                static_cast<unsigned long long>(st.stopped), static_cast<unsigned long long>(st.reset));
    return 0;
}
