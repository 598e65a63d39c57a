// SPDX-License-Identifier: MIT OR Apache-2.0
// tw_stress: hammer a tickwheel runtime from many threads and check exact
// invariants with independent bookkeeping (stress/tracker.hpp).
//
//   tw_stress MODE [--ops N] [--seconds S] [--threads T] [--queues Q] [--seed X]
//
// Modes:
//   accounting  T producers (default 2 x CPUs) run a random mix of start
//               (one-shot and periodic, delays 0 .. 2 s), stop, stop_sync,
//               reset earlier and later, and stale-id calls; then shutdown and
//               account for every timer exactly once.
//   deadline    timers stopped or reset by other threads at the very moment
//               they become due, many thousands of times.
//   callbacks   callbacks that start new timers (chains), stop themselves,
//               reset siblings and stop_sync others.
//   shutdown    create a runtime, load it from several threads, shut it down
//               while producers and callbacks are active; repeat. Each cycle
//               must finish within a bound; every release hook runs once.
//   slow        some callbacks block or throw; other due timers still fire
//               while a worker is blocked, and the runtime keeps working.
//   limit       with max_timers set, a dam of timers fills the limit (the next
//               start must be refused), producers race at the limit while it
//               drains, and the runtime recovers.
//   soak        a steady rate of starts and stops for --seconds; RSS and the
//               live count must stay bounded.
//   queue       T producers (default 3) start timers on Q delivery queues
//               (default 4, each run by its own epoll / poll / blocking
//               poller thread) and on the workers, and stop / stop_sync /
//               reset them, also while due; a queue is destroyed and
//               re-created mid-run; shutdown under pollers blocked in
//               run(n, forever). Exact accounting, thread and context of
//               every callback and release hook.
//   groups      T producers (default 2) start timers into G groups (one-shot
//               and periodic with every period policy, some with leeway, some
//               in no group) and stop, stop_sync and reset single ones, while
//               S stopper threads (default 2) stop whole groups (half with
//               TW_SYNC); at the end every group is stopped once more. Exact
//               accounting: every timer is released once and either ran its
//               last run, or was stopped by exactly one stop call or one group
//               stop -- the group stops' return values add up to the timers
//               that ended neither way; no run early, none overlapping.
//   batch       T producers (default 2 x CPUs) run a random mix of the batch
//               calls (issue 14) -- starts of 1..64 timers (one-shot and
//               periodic, delays 0 .. 2 s, some shard hints), stops and
//               re-arms of 1..64 of their timers with stale, garbage and
//               repeated ids among them -- interleaved with single stop,
//               stop_sync and reset; then shutdown. Exact accounting of every
//               timer as in accounting, and the runtime's counters must equal
//               the batches' per-element results: started, stopped, reset.
//   history     a schedule fuzzer and a history checker (issues 20, 31):
//               every feature mixed, faults on callers (freeze, lowprio,
//               fork), every call, run and release hook recorded and checked
//               against the contract's sequential model, timeliness against
//               a bound computed from the history. Options --features LIST,
//               --fuzz N, --slack MS, --freeze-site C, --quiet-ms N; see
//               history_run.cpp.
//               (history-selftest: the checker on small known histories.)
//   coro-history  the same for the coroutine awaiters (issue 32): random
//               programs of many coroutines over sleeps, events, nested
//               deadlines, stops, frame destruction, queue closes, failed
//               starts and shutdown, on a real and a manual runtime, checked
//               against a sequential model. --runtime real|manual|both,
//               --threads K (coroutines at once); see coro_history_run.cpp.
//               (coro-history-selftest: its checker on known histories.)
// Exit status 0 iff every invariant held.
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "coro_history.hpp"
#include "history.hpp"
#include "test_support/sanitizers.hpp"
#include "tracker.hpp"

using namespace std::chrono;
using stress::now_ns;
using stress::Track;
using stress::Tracker;

namespace {

using tw_test::kAsan;
using tw_test::kSanitized;
// tw_stress history: the machine's slack of the timeliness bound (measured:
// history_run.cpp's header, docs/site/development.md).
constexpr long kHistorySlackMs = 50;
constexpr long kHistorySlackSanitizedMs = 100;

struct Options {
    std::string mode;
    long ops = 200000;
    double seconds = 10;
    unsigned threads = 0;
    unsigned queues = 4;  // queue mode: delivery queues (1..16)
    unsigned long seed = 1;
    bool seconds_set = false;
    std::string features = "all";  // history mode
    std::string runtime = "both";  // coro-history mode: real, manual or both
    unsigned fuzz = 64;            // history mode: the schedule fuzzer's rate (0 = off)
    long slack_ms = 0;             // history mode: the timeliness bound's slack; 0 = the default for the build
    char freeze_site = 0;          // history mode: --freeze-site C
    long quiet_ms = 0;             // history mode: --quiet-ms N
};

unsigned cpus() {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? static_cast<unsigned>(n) : 1u;
}

long rss_kib() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
    return -1;
}

// Starts a tracked timer; returns nullptr if the runtime refused.
Track* start_tracked(tickwheel::Runtime& rt, Tracker& tr, std::int64_t delay_ns, std::int64_t period_ns,
                     int shard = -1) {
    const std::int64_t deadline = now_ns() + delay_ns;
    Track& t = tr.make(period_ns > 0, deadline, period_ns);
    tickwheel::StartOptions o;
    o.delay = nanoseconds(delay_ns);
    o.period = nanoseconds(period_ns);
    o.shard = shard;
    std::error_code ec;
    const tickwheel::Timer timer = rt.start(o, tr.callback(t, [](tickwheel::Timer, Track&) {}), ec);
    if (ec) {  // the callable was released by start (Track.released == 1, never ran)
        t.refused = true;
        return nullptr;
    }
    t.id = timer.id();
    return &t;
}

// A delay of the accounting mix: 0, < 2 ms, < 50 ms or < 2 s, equally often.
std::int64_t mixed_delay(std::mt19937_64& rng) {
    switch (rng() % 4) {
        case 0: return 0;
        case 1: return static_cast<std::int64_t>(rng() % 2'000'000);       // < 2 ms
        case 2: return static_cast<std::int64_t>(rng() % 50'000'000);      // < 50 ms
        default: return static_cast<std::int64_t>(rng() % 2'000'000'000);  // < 2 s
    }
}

// reset with bookkeeping that keeps the early check sound: an earlier
// deadline is recorded before the call, a later one after it succeeded.
bool reset_tracked(tickwheel::Runtime& rt, Track& t, std::int64_t delay_ns) {
    const std::int64_t d = now_ns() + delay_ns;
    if (d < t.deadline_ns.load()) t.deadline_ns.store(d);
    std::error_code ec;
    const bool ok = rt.reset(t.id, nanoseconds(delay_ns), ec);
    if (ok && d > t.deadline_ns.load()) t.deadline_ns.store(d);
    return ok;
}

bool stop_tracked(tickwheel::Runtime& rt, Track& t, bool sync) {
    const bool ok = sync ? rt.stop_sync(t.id) : rt.stop(t.id);
    if (ok) t.stop_true++;
    if (sync) {
        if (t.in_callback.load() != 0) t.after_sync++;  // stop_sync returned while a run was in progress
        t.synced.store(true);
    }
    return ok;
}

bool finish(const char* name, tickwheel::Runtime& rt, Tracker& tr, double secs) {
    rt.shutdown();
    const auto st = rt.stats();
    const auto rep = tr.verify(st.cancelled_at_shutdown);
    Tracker::print(name, rep, st.cancelled_at_shutdown);
    std::printf("%s: lateness %s\n", name, tr.lateness.summary().c_str());
    std::printf("%s: %.2f s, runtime stats: started=%llu fired=%llu stopped=%llu reset=%llu exceptions=%llu\n", name, secs,
                static_cast<unsigned long long>(st.started), static_cast<unsigned long long>(st.fired),
                static_cast<unsigned long long>(st.stopped), static_cast<unsigned long long>(st.reset),
                static_cast<unsigned long long>(st.callback_exceptions));
    return rep.ok;
}

/// Runs body(p) on `threads` producer threads, p = 0..threads-1, and joins them;
/// then lets short timers fire for 100 ms (the rest are cancelled by shutdown).
template <class Body>
void run_producers(unsigned threads, Body body) {
    std::vector<std::thread> producers;
    producers.reserve(threads);
    for (unsigned p = 0; p < threads; ++p) producers.emplace_back([&body, p] { body(p); });
    for (auto& th : producers) th.join();
    std::this_thread::sleep_for(milliseconds(100));
}

/// A default runtime configuration with the tick `resolution`.
tickwheel::Config with_resolution(microseconds resolution) {
    tickwheel::Config cfg;
    cfg.resolution = resolution;
    return cfg;
}

// ---- accounting ---------------------------------------------------------------
bool run_accounting(const Options& opt) {
    tickwheel::Runtime rt(with_resolution(microseconds(500)));
    Tracker tr;
    const unsigned threads = opt.threads ? opt.threads : 2 * cpus();
    std::atomic<long> stale_ok{0}, stale_wrong{0};
    const auto t0 = steady_clock::now();
    std::vector<std::thread> producers;
    producers.reserve(threads);
    for (unsigned p = 0; p < threads; ++p) {
        producers.emplace_back([&, p] {
            std::mt19937_64 rng(opt.seed * 7919 + p);
            std::vector<Track*> mine;
            auto delay = [&] { return mixed_delay(rng); };
            for (long i = 0; i < opt.ops / static_cast<long>(threads); ++i) {
                const unsigned op = static_cast<unsigned>(rng() % 100);
                if (op < 35 || mine.empty()) {
                    const bool periodic = rng() % 10 == 0;
                    Track* t = start_tracked(rt, tr, delay(), periodic ? 1'000'000 + static_cast<std::int64_t>(rng() % 20'000'000) : 0);
                    if (t != nullptr) mine.push_back(t);
                    continue;
                }
                Track& t = *mine[rng() % mine.size()];
                if (op < 55) {
                    stop_tracked(rt, t, false);
                } else if (op < 62) {
                    stop_tracked(rt, t, true);
                } else if (op < 85) {
                    if (!t.periodic) reset_tracked(rt, t, delay());
                } else {
                    // A stale id: a finished timer's id, or garbage. Must never be acted on.
                    const std::uint64_t id = rng() % 2 ? t.id : rng();
                    const bool done = t.released.load() == 1;
                    const bool stopped = rt.stop(id);
                    if (done && stopped) stale_wrong++; else stale_ok++;
                    if (stopped) {
                        // A garbage id that happened to name a live timer of ours: count it.
                        for (Track* m : mine)
                            if (m->id == id) m->stop_true++;
                    }
                }
            }
        });
    }
    for (auto& th : producers) th.join();
    std::this_thread::sleep_for(milliseconds(100));  // let short timers fire; the rest are cancelled by shutdown
    const double secs = duration<double>(steady_clock::now() - t0).count();
    std::printf("accounting: %u threads, %ld ops, stale-id calls %ld (acted on a dead timer: %ld)\n", threads, opt.ops,
                stale_ok.load(), stale_wrong.load());
    return finish("accounting", rt, tr, secs) && stale_wrong == 0;
}

// ---- batch ------------------------------------------------------------------------
bool run_batch(const Options& opt) {
    tickwheel::Runtime rt(with_resolution(microseconds(500)));
    Tracker tr;
    const unsigned threads = opt.threads ? opt.threads : 2 * cpus();
    std::atomic<long> started{0}, stopped{0}, single_stopped{0}, rearmed{0}, stale_ok{0}, stale_wrong{0}, batches{0};
    const auto t0 = steady_clock::now();
    run_producers(threads, [&](unsigned p) {
        std::mt19937_64 rng(opt.seed * 104729 + p);
        std::vector<Track*> mine;
        auto delay = [&] { return mixed_delay(rng); };
        long done = 0;
        const long quota = opt.ops / static_cast<long>(threads);
        while (done < quota) {
            const unsigned op = static_cast<unsigned>(rng() % 100);
            const std::size_t n = 1 + rng() % 64;
            batches++;
            if (op < 30 || mine.size() < 64) {
                // A batch of starts: each deadline is recorded before the
                // call (the batch reads the clock once, later: never early).
                std::vector<tickwheel::StartOptions> opts(n);
                std::vector<tickwheel::detail::Callback> cbs;
                std::vector<Track*> tracks;
                for (std::size_t i = 0; i < n; ++i) {
                    const bool periodic = rng() % 10 == 0;
                    opts[i].delay = nanoseconds(delay());
                    opts[i].period = periodic ? nanoseconds(1'000'000 + static_cast<std::int64_t>(rng() % 20'000'000))
                                              : nanoseconds(0);
                    opts[i].shard = rng() % 4 == 0 ? static_cast<int>(rng() % 8) : -1;
                    Track& t = tr.make(periodic, now_ns() + opts[i].delay.count(), opts[i].period.count());
                    tracks.push_back(&t);
                    cbs.emplace_back(tr.callback(t, [](tickwheel::Timer, Track&) {}));
                }
                std::vector<tickwheel::Timer> out(n);
                std::vector<std::error_code> res(n);
                std::error_code ec;
                const std::size_t k = rt.start(opts, cbs, out, res, ec);
                started += static_cast<long>(k);
                for (std::size_t i = 0; i < n; ++i) {
                    if (res[i]) {
                        tracks[i]->refused = true;  // released inside the call, never runs
                        continue;
                    }
                    tracks[i]->id = out[i].id();
                    mine.push_back(tracks[i]);
                }
                done += static_cast<long>(n);
                continue;
            }
            // n of my timers, some repeated, some stale or garbage.
            std::vector<std::uint64_t> ids;
            std::vector<Track*> of;  // the Track an id names (nullptr: garbage)
            for (std::size_t i = 0; i < n; ++i) {
                if (rng() % 16 == 0) {
                    ids.push_back(rng());
                    of.push_back(nullptr);
                } else if (i > 0 && rng() % 16 == 0) {
                    ids.push_back(ids.back());
                    of.push_back(of.back());
                } else {
                    Track* t = mine[rng() % mine.size()];
                    ids.push_back(t->id);
                    of.push_back(t);
                }
            }
            std::vector<std::error_code> res(n);
            if (op < 55) {
                std::vector<bool> done_before(n);
                for (std::size_t i = 0; i < n; ++i) done_before[i] = of[i] != nullptr && of[i]->released.load() == 1;
                stopped += static_cast<long>(rt.stop(ids, res));
                for (std::size_t i = 0; i < n; ++i) {
                    if (res[i]) continue;
                    if (of[i] == nullptr) {  // garbage that named a live timer of ours
                        for (Track* m : mine)
                            if (m->id == ids[i]) m->stop_true++;
                        continue;
                    }
                    of[i]->stop_true++;
                    if (done_before[i]) stale_wrong++; else stale_ok++;
                }
            } else if (op < 75) {
                // One delay for the batch: an earlier deadline recorded
                // before the call, a later one after it succeeded (the
                // early check stays sound). Periodic timers are left alone
                // (their grid is the tracker's reference).
                const std::int64_t d = delay();
                const std::int64_t deadline = now_ns() + d;
                std::vector<std::uint64_t> one_shots;
                std::vector<Track*> ts;
                for (std::size_t i = 0; i < n; ++i) {
                    if (of[i] == nullptr || of[i]->periodic) continue;
                    one_shots.push_back(ids[i]);
                    ts.push_back(of[i]);
                    if (deadline < of[i]->deadline_ns.load()) of[i]->deadline_ns.store(deadline);
                }
                std::vector<std::error_code> r2(one_shots.size());
                rearmed += static_cast<long>(rt.reset(one_shots, nanoseconds(d), r2));
                for (std::size_t i = 0; i < ts.size(); ++i)
                    if (!r2[i] && deadline > ts[i]->deadline_ns.load()) ts[i]->deadline_ns.store(deadline);
            } else if (op < 88) {
                for (std::size_t i = 0; i < n && i < 8; ++i)
                    if (of[i] != nullptr && stop_tracked(rt, *of[i], op < 80)) single_stopped++;
            } else {
                for (std::size_t i = 0; i < n && i < 8; ++i)
                    if (of[i] != nullptr && !of[i]->periodic && reset_tracked(rt, *of[i], delay())) rearmed++;
            }
            done += static_cast<long>(n);
        }
    });
    const double secs = duration<double>(steady_clock::now() - t0).count();
    std::printf("batch: %u threads, %ld ops in %ld batches; stops of live timers %ld, of finished ones acting: %ld\n",
                threads, opt.ops, batches.load(), stale_ok.load(), stale_wrong.load());
    const bool ok = finish("batch", rt, tr, secs);
    // Each batch counts once per call: the counters still add up per element.
    const auto st = rt.stats();
    const bool counted = st.started == static_cast<std::uint64_t>(started.load()) &&
                         st.stopped == static_cast<std::uint64_t>(stopped.load() + single_stopped.load()) &&
                         st.reset == static_cast<std::uint64_t>(rearmed.load());
    std::printf("batch: counters started %llu/%ld stopped %llu/%ld reset %llu/%ld -> %s\n",
                static_cast<unsigned long long>(st.started), started.load(), static_cast<unsigned long long>(st.stopped),
                stopped.load() + single_stopped.load(), static_cast<unsigned long long>(st.reset), rearmed.load(),
                counted ? "OK" : "FAILED");
    return ok && stale_wrong == 0 && counted;
}

// ---- groups ---------------------------------------------------------------------
bool run_groups(const Options& opt) {
    tickwheel::Runtime rt(with_resolution(microseconds(200)));
    Tracker tr;
    constexpr std::uint64_t kGroups = 8;
    const unsigned threads = opt.threads ? opt.threads : 2;
    std::atomic<bool> producing{true};
    std::atomic<std::uint64_t> group_stopped{0}, group_calls{0};
    const auto t0 = steady_clock::now();
    std::vector<std::thread> stoppers;
    for (unsigned k = 0; k < 2; ++k) {
        stoppers.emplace_back([&, k] {
            std::mt19937_64 rng(opt.seed * 31 + k);
            while (producing.load()) {
                const std::uint64_t g = 1 + rng() % kGroups;
                group_stopped.fetch_add(rt.stop_group(g, rng() % 2 == 0));
                group_calls.fetch_add(1);
                std::this_thread::sleep_for(microseconds(rng() % 300));
            }
        });
    }
    std::vector<std::thread> producers;
    for (unsigned p = 0; p < threads; ++p) {
        producers.emplace_back([&, p] {
            std::mt19937_64 rng(opt.seed * 7919 + p);
            std::vector<Track*> mine;
            for (long i = 0; i < opt.ops / static_cast<long>(threads); ++i) {
                const unsigned op = static_cast<unsigned>(rng() % 100);
                if (op < 60 || mine.empty()) {
                    const bool periodic = rng() % 8 == 0;
                    const std::int64_t delay = static_cast<std::int64_t>(rng() % 20'000'000);
                    const std::int64_t period = periodic ? 1'000'000 + static_cast<std::int64_t>(rng() % 4'000'000) : 0;
                    Track& t = tr.make(periodic, now_ns() + delay, period);
                    tickwheel::StartOptions o;
                    o.delay = nanoseconds(delay);
                    o.period = nanoseconds(period);
                    o.policy = static_cast<tickwheel::PeriodPolicy>(rng() % 3);
                    o.group = rng() % 5 == 0 ? 0 : 1 + rng() % kGroups;
                    if (rng() % 4 == 0) o.leeway = microseconds(rng() % 3000);
                    std::error_code ec;
                    const tickwheel::Timer timer = rt.start(o, tr.callback(t, [](tickwheel::Timer, Track&) {}), ec);
                    if (ec) {
                        t.refused = true;
                        continue;
                    }
                    t.id = timer.id();
                    mine.push_back(&t);
                    continue;
                }
                Track& t = *mine[rng() % mine.size()];
                if (op < 80) {
                    stop_tracked(rt, t, op < 70);
                } else if (!t.periodic) {
                    reset_tracked(rt, t, static_cast<std::int64_t>(rng() % 10'000'000));
                } else {
                    (void)rt.query(t.id);  // races with fire, stop and the group stops
                }
            }
            // Periodic timers in no group never end on their own: stop them.
            for (Track* t : mine)
                if (t->periodic) stop_tracked(rt, *t, true);
        });
    }
    for (auto& th : producers) th.join();
    producing = false;
    for (auto& th : stoppers) th.join();
    // Every group once more, then wait for the one-shots still pending.
    for (std::uint64_t g = 1; g <= kGroups; ++g) group_stopped.fetch_add(rt.stop_group(g, true));
    const bool drained = stress::wait_for([&] { return rt.stats().live == 0; }, seconds(30));
    const double secs = duration<double>(steady_clock::now() - t0).count();
    rt.shutdown();
    const auto st = rt.stats();
    // Timers that neither ran their last run nor were stopped by a single
    // stop call: exactly those the group stops counted (plus any shutdown
    // cancelled, which must be none: all drained before it).
    const auto rep = tr.verify(group_stopped.load() + st.cancelled_at_shutdown);
    Tracker::print("groups", rep, group_stopped.load() + st.cancelled_at_shutdown);
    std::printf("groups: %u producers, %llu group stops returned %llu in total; drained=%d; cancelled at shutdown %llu; "
                "stats.stopped %llu = single stops %zu + group %llu\n",
                threads, static_cast<unsigned long long>(group_calls.load()),
                static_cast<unsigned long long>(group_stopped.load()), drained ? 1 : 0,
                static_cast<unsigned long long>(st.cancelled_at_shutdown), static_cast<unsigned long long>(st.stopped),
                rep.stopped, static_cast<unsigned long long>(group_stopped.load()));
    std::printf("groups: %.2f s\n", secs);
    return rep.ok && drained && st.cancelled_at_shutdown == 0 && st.stopped == rep.stopped + group_stopped.load() &&
           group_stopped.load() > 0;
}

// ---- deadline races -------------------------------------------------------------
bool run_deadline(const Options& opt) {
    tickwheel::Runtime rt(with_resolution(microseconds(100)));
    Tracker tr;
    const unsigned threads = opt.threads ? opt.threads : cpus();
    const long rounds = opt.ops / 100;
    const auto t0 = steady_clock::now();
    std::mt19937_64 rng(opt.seed);
    for (long round = 0; round < rounds; ++round) {
        // 100 timers due together ~1 ms from now; threads stop or reset them
        // spinning until their deadline, so the calls land right at it.
        std::vector<Track*> batch;
        const std::int64_t delay = 1'000'000 + static_cast<std::int64_t>(rng() % 200'000);
        for (int i = 0; i < 100; ++i) {
            Track* t = start_tracked(rt, tr, delay, 0);
            if (t) batch.push_back(t);
        }
        std::vector<std::thread> racers;
        racers.reserve(threads);
        for (unsigned p = 0; p < threads; ++p) {
            racers.emplace_back([&, p] {
                std::mt19937_64 r(opt.seed + static_cast<unsigned long>(round) * 31 + p);
                for (std::size_t i = p; i < batch.size(); i += threads) {
                    Track& t = *batch[i];
                    const std::int64_t target = t.deadline_ns.load() - static_cast<std::int64_t>(r() % 300'000);
                    while (now_ns() < target) {
                    }
                    switch (r() % 3) {
                        case 0: stop_tracked(rt, t, false); break;
                        case 1: stop_tracked(rt, t, true); break;
                        default: reset_tracked(rt, t, static_cast<std::int64_t>(r() % 500'000)); break;
                    }
                }
            });
        }
        for (auto& th : racers) th.join();
    }
    std::this_thread::sleep_for(milliseconds(50));
    return finish("deadline", rt, tr, duration<double>(steady_clock::now() - t0).count());
}

// ---- callbacks that use the API ----------------------------------------------------
bool run_callbacks(const Options& opt) {
    tickwheel::Runtime rt;
    Tracker tr;
    std::atomic<long> budget{opt.ops};
    std::atomic<long> chains_done{0};
    const auto t0 = steady_clock::now();

    // Each chain link starts the next; every third link also resets a
    // sibling (later), stops itself if periodic, or stop_syncs a sibling.
    struct Chain {
        tickwheel::Runtime* rt;
        Tracker* tr;
        std::atomic<long>* budget;
        std::atomic<long>* done;
        std::vector<Track*> siblings;
        std::mutex m;
    };
    Chain chain{&rt, &tr, &budget, &chains_done, {}, {}};
    std::function<void(int)> link = [&](int depth) {
        if (budget.fetch_sub(1) <= 0) return;
        const bool periodic = depth % 5 == 4;
        Track& t = tr.make(periodic, now_ns() + 200'000, periodic ? 300'000 : 0);
        tickwheel::StartOptions o;
        o.delay = microseconds(200);
        o.period = periodic ? microseconds(300) : microseconds(0);
        std::error_code ec;
        auto timer = rt.start(o,
                              tr.callback(t, [&, depth](tickwheel::Timer self, Track& me) {
                                  const int run = me.runs.load();
                                  if (me.periodic) {
                                      if (run >= 3 && self.stop()) me.stop_true++;  // stops itself
                                      if (run != 1) return;
                                  }
                                  Track* sib = nullptr;
                                  {
                                      std::lock_guard<std::mutex> g(chain.m);
                                      if (!chain.siblings.empty())
                                          sib = chain.siblings[static_cast<std::size_t>(depth) % chain.siblings.size()];
                                  }
                                  // stop_sync only older timers: a strict order, so two
                                  // callbacks never wait for each other (see runtime.hpp).
                                  if (sib != nullptr && sib->seq < me.seq) {
                                      if (depth % 3 == 0 && !sib->periodic) reset_tracked(rt, *sib, 100'000);
                                      if (depth % 3 == 1) stop_tracked(rt, *sib, true);  // stop_sync from a callback
                                  }
                                  link(depth + 1);  // start the next link from inside the callback
                                  if (depth % 7 == 0) link(depth + 1);  // and sometimes fork
                              }),
                              ec);
        if (ec) {
            t.refused = true;
            return;
        }
        t.id = timer.id();
        std::lock_guard<std::mutex> g(chain.m);
        chain.siblings.push_back(&t);
        if (chain.siblings.size() > 64) chain.siblings.erase(chain.siblings.begin());
    };
    for (int i = 0; i < 8; ++i) link(0);
    while (budget.load() > 0 && steady_clock::now() - t0 < seconds(120)) std::this_thread::sleep_for(milliseconds(5));
    std::this_thread::sleep_for(milliseconds(50));
    return finish("callbacks", rt, tr, duration<double>(steady_clock::now() - t0).count()) && budget.load() <= 0;
}

// ---- shutdown under load --------------------------------------------------------------
bool run_shutdown(const Options& opt) {
    const long cycles = std::max(1L, opt.ops / 10000);
    bool ok = true;
    double worst = 0;
    for (long c = 0; c < cycles; ++c) {
        Tracker tr;
        auto rt = std::make_unique<tickwheel::Runtime>();
        std::atomic<bool> stop{false};
        std::vector<std::thread> producers;
        const unsigned threads = opt.threads ? opt.threads : 2 * cpus();
        producers.reserve(threads);
        for (unsigned p = 0; p < threads; ++p) {
            producers.emplace_back([&, p] {
                std::mt19937_64 rng(opt.seed + static_cast<unsigned long>(c) * 131 + p);
                std::vector<Track*> mine;
                while (!stop.load()) {
                    if (mine.empty() || rng() % 2) {
                        Track* t = start_tracked(*rt, tr, static_cast<std::int64_t>(rng() % 5'000'000),
                                                 rng() % 8 == 0 ? 500'000 : 0);
                        if (t == nullptr) return;  // shutting down
                        mine.push_back(t);
                    } else {
                        stop_tracked(*rt, *mine[rng() % mine.size()], rng() % 4 == 0);
                    }
                }
            });
        }
        std::this_thread::sleep_for(milliseconds(10 + static_cast<int>(c % 40)));
        const auto s0 = steady_clock::now();
        rt->shutdown();  // producers are still running: they get shutting_down and leave
        const double took = duration<double>(steady_clock::now() - s0).count();
        worst = std::max(worst, took);
        stop = true;
        for (auto& th : producers) th.join();
        const auto st = rt->stats();
        const auto rep = tr.verify(st.cancelled_at_shutdown);
        rt.reset();
        if (!rep.ok || took > 10.0) {
            Tracker::print("shutdown", rep, st.cancelled_at_shutdown);
            ok = false;
            break;
        }
    }
    std::printf("shutdown: %ld cycles, slowest shutdown %.3f s -> %s\n", cycles, worst, ok ? "OK" : "FAILED");
    return ok;
}

// ---- slow and throwing callbacks ---------------------------------------------------------
// A callback blocked on one worker must not hold back the other due timers:
// they run on the other worker WHILE it is blocked. Asserted by construction,
// not by lateness (a p99 bound holds only if the machine is not too busy):
// each blocker blocks on a gate that the harness opens only after kBeside
// normal timers, due after the blocker blocked, have run beside it. If they
// queued behind the blocker, they never run and the round fails after kStall
// (reached only on failure). Lateness is printed, not asserted.
bool run_slow(const Options& opt) {
    tickwheel::Config cfg;
    cfg.workers = 2;
    std::atomic<long> errors{0};
    cfg.on_callback_error = [&](std::exception_ptr, std::uint64_t) { errors++; };
    tickwheel::Runtime rt(cfg);
    Tracker tr;
    Tracker normal;
    const long n = std::max(100L, opt.ops / 100);  // normal (and throwing) timers, at least
    const long rounds = std::max(4L, n / 20);      // blockers, one at a time
    constexpr long kBeside = 50;
    const auto kStall = seconds(30);
    std::atomic<std::int64_t> blocked_since{0};  // when the current blocker blocked; 0 = none blocked
    std::atomic<long> beside{0};  // normal runs due after the current blocker blocked, run while it was
    std::atomic<long> stalled{0}, gave_up{0};
    std::atomic<bool> blockers_done{false};
    std::atomic<long> rounds_done{0};
    std::atomic<long> throws{0};
    const auto t0 = steady_clock::now();
    std::vector<std::thread> threads;
    threads.reserve(2);  // (also avoids g++ 12's -Warray-bounds false positive on vector growth)
    threads.emplace_back([&] {
        for (long r = 0; r < rounds; ++r) {
            auto gate = std::make_shared<stress::Gate>();
            const long before = beside.load();
            Track& t = tr.make(false, now_ns(), 0);
            t.id = rt.start(microseconds(0), tr.callback(t, [&, gate](tickwheel::Timer, Track&) {
                               blocked_since.store(now_ns());
                               if (!gate->wait(2 * kStall)) gave_up++;
                               blocked_since.store(0);
                           })).id();
            const bool blocked = stress::wait_for([&] { return blocked_since.load() != 0; }, kStall);
            const bool progressed = blocked && stress::wait_for([&] { return beside.load() - before >= kBeside; }, kStall);
            gate->open();  // only now
            if (!blocked || !progressed) {
                std::printf("slow: round %ld: %s\n", r,
                            !blocked ? "the blocker never started"
                                     : "normal timers queued behind the blocked worker (fewer than kBeside ran beside it)");
                stalled++;
            }
            if (!stress::wait_for([&] { return t.released.load() == 1; }, kStall)) stalled++;
            rounds_done++;
            if (stalled.load() != 0) break;  // one stalled round is the verdict; don't wait out the others
        }
        blockers_done = true;
    });
    threads.emplace_back([&] {
        std::mt19937_64 rng(opt.seed);
        // At least n timers, and on until the last blocker is done (each waits for normal timers).
        for (long i = 0; i < n || !blockers_done.load(); ++i) {
            if (i % 10 == 0) {
                Track& t = tr.make(false, now_ns() + 1'000'000, 0);
                t.id = rt.start(milliseconds(1), tr.callback(t, [&](tickwheel::Timer, Track&) {
                                   throws++;
                                   throw std::runtime_error("callback failure");
                               })).id();
            } else {
                const std::int64_t delay = static_cast<std::int64_t>(rng() % 20'000'000);
                Track& t = normal.make(false, now_ns() + delay, 0);
                t.id = rt.start(nanoseconds(delay), normal.callback(t, [&](tickwheel::Timer, Track& me) {
                                   const std::int64_t since = blocked_since.load();
                                   if (since != 0 && me.deadline_ns.load() >= since) beside++;
                               })).id();
            }
            std::this_thread::sleep_for(microseconds(200));
        }
    });
    for (auto& th : threads) th.join();
    std::this_thread::sleep_for(milliseconds(300));
    rt.shutdown();
    const auto st = rt.stats();
    const auto rep = tr.verify(0);
    const auto rep_normal = normal.verify(st.cancelled_at_shutdown);
    Tracker::print("slow(blockers+throwers)", rep, 0);
    Tracker::print("slow(normal)", rep_normal, st.cancelled_at_shutdown);
    std::printf("slow: normal timers' lateness (not asserted): %s\n", normal.lateness.summary().c_str());
    std::printf("slow: exceptions thrown %ld, counted %llu, error hook %ld, %.1f s\n", throws.load(),
                static_cast<unsigned long long>(st.callback_exceptions), errors.load(),
                duration<double>(steady_clock::now() - t0).count());
    std::printf("slow: %ld of %ld blockers; each stayed blocked until %ld normal timers due after it blocked had "
                "run beside it: %s (stalled rounds %ld, blockers that gave up %ld)\n",
                rounds_done.load(), rounds, kBeside, stalled.load() == 0 && gave_up.load() == 0 ? "yes" : "NO", stalled.load(),
                gave_up.load());
    return rep.ok && rep_normal.ok && stalled.load() == 0 && gave_up.load() == 0 && rounds_done.load() == rounds &&
           throws.load() == static_cast<long>(st.callback_exceptions) && errors.load() == throws.load();
}

// ---- pending limit -------------------------------------------------------------------------
// Reaching the limit is made certain, not left to the producers outpacing
// the 2..5 ms timers (under a sanitizer or on a busy machine they may not):
// first a dam of max_timers timers due in a minute fills it, and the next
// start must be refused; then the producers race at the limit while a
// harness thread resets the dam timers, one by one, to fire within 5 ms.
bool run_limit(const Options& opt) {
    constexpr std::size_t kMax = 5000;
    tickwheel::Config cfg;
    cfg.max_timers = kMax;
    tickwheel::Runtime rt(cfg);
    Tracker tr;
    std::atomic<long> refused{0}, accepted{0};
    const auto t0 = steady_clock::now();
    std::vector<Track*> dam;
    dam.reserve(kMax);
    for (std::size_t i = 0; i < kMax; ++i) {
        Track* t = start_tracked(rt, tr, 60'000'000'000, 0);
        if (t == nullptr) break;
        dam.push_back(t);
    }
    bool dam_refused = false;
    {
        Track& t = tr.make(false, now_ns() + 60'000'000'000, 0);
        tickwheel::StartOptions o;
        o.delay = seconds(60);
        std::error_code ec;
        const auto timer = rt.start(o, tr.callback(t, [](tickwheel::Timer, Track&) {}), ec);
        if (ec) t.refused = true;
        else t.id = timer.id();
        dam_refused = ec == tickwheel::errc::limit_reached;
        if (dam_refused) refused++;
    }
    std::printf("limit: a dam of %zu timers due in 60 s (of max_timers=%zu), then one more start: %s\n", dam.size(),
                kMax, dam_refused ? "limit_reached" : "NOT refused");
    const unsigned threads = opt.threads ? opt.threads : 2 * cpus();
    std::vector<std::thread> producers;
    producers.reserve(threads + 1);
    producers.emplace_back([&] {  // drains the dam while the producers race at the limit
        std::mt19937_64 rng(opt.seed);
        for (Track* t : dam) {
            reset_tracked(rt, *t, 2'000'000 + static_cast<std::int64_t>(rng() % 3'000'000));
            if (rng() % 16 == 0) std::this_thread::sleep_for(microseconds(50));
        }
    });
    for (unsigned p = 0; p < threads; ++p) {
        producers.emplace_back([&, p] {
            std::mt19937_64 rng(opt.seed + p);
            for (long i = 0; i < opt.ops / static_cast<long>(threads); ++i) {
                const std::int64_t d = now_ns();
                Track& t = tr.make(false, d + 2'000'000, 0);
                tickwheel::StartOptions o;
                o.delay = microseconds(2000 + static_cast<long>(rng() % 3000));
                t.deadline_ns.store(d + nanoseconds(o.delay).count());
                std::error_code ec;
                auto timer = rt.start(o, tr.callback(t, [](tickwheel::Timer, Track&) {}), ec);
                if (ec) t.refused = true;
                if (ec == tickwheel::errc::limit_reached) {
                    refused++;
                    std::this_thread::sleep_for(microseconds(100));
                } else if (!ec) {
                    t.id = timer.id();
                    accepted++;
                }
            }
        });
    }
    for (auto& th : producers) th.join();
    // Recovery: once drained, starts succeed again.
    const auto until = steady_clock::now() + seconds(20);
    while (rt.stats().live > 0 && steady_clock::now() < until) std::this_thread::sleep_for(milliseconds(5));
    bool recovered = true;
    for (int i = 0; i < 100; ++i) recovered &= start_tracked(rt, tr, 0, 0) != nullptr;
    std::this_thread::sleep_for(milliseconds(20));
    std::printf("limit: max_timers=5000, accepted %ld, refused %ld (limit_reached), recovered after drain: %s\n",
                accepted.load(), refused.load(), recovered ? "yes" : "NO");
    return finish("limit", rt, tr, duration<double>(steady_clock::now() - t0).count()) && dam.size() == kMax &&
           dam_refused && recovered;
}

// ---- soak ------------------------------------------------------------------------------------
bool run_soak(const Options& opt) {
    tickwheel::Runtime rt;
    Tracker tr;
    const unsigned threads = opt.threads ? opt.threads : cpus();
    std::atomic<bool> stop{false};
    std::vector<std::thread> producers;
    producers.reserve(threads);
    for (unsigned p = 0; p < threads; ++p) {
        producers.emplace_back([&, p] {
            std::mt19937_64 rng(opt.seed + p);
            std::vector<std::uint64_t> ring(20000, 0);
            std::size_t k = 0;
            while (!stop.load()) {
                for (int i = 0; i < 200; ++i) {  // ~200 starts + ~200 stops per ms per thread
                    rt.stop(ring[k]);
                    ring[k] = rt.start(microseconds(static_cast<long>(rng() % 2'000'000)), [] {}).id();
                    k = (k + 1) % ring.size();
                }
                std::this_thread::sleep_for(milliseconds(1));
            }
        });
    }
    const auto t0 = steady_clock::now();
    long rss_first = -1, rss_max = 0, rss_last = 0;
    std::uint64_t live_max = 0;
    std::size_t slots_max = 0;
    while (steady_clock::now() - t0 < duration<double>(opt.seconds)) {
        std::this_thread::sleep_for(seconds(1));
        const auto st = rt.stats();
        rss_last = rss_kib();
        if (rss_first < 0 && steady_clock::now() - t0 > seconds(2)) rss_first = rss_last;  // after warm-up
        rss_max = std::max(rss_max, rss_last);
        live_max = std::max(live_max, st.live);
        slots_max = std::max(slots_max, st.slots);
        std::printf("soak: t=%4.0f s live=%8llu slots=%8zu rss=%7ld KiB started=%llu fired=%llu p99=%lld us\n",
                    duration<double>(steady_clock::now() - t0).count(), static_cast<unsigned long long>(st.live),
                    st.slots, rss_last, static_cast<unsigned long long>(st.started),
                    static_cast<unsigned long long>(st.fired),
                    static_cast<long long>(duration_cast<microseconds>(st.lateness_p99).count()));
        std::fflush(stdout);
    }
    stop = true;
    for (auto& th : producers) th.join();
    rt.shutdown();
    // Bounded: live never above the producers' rings; timer slots (the
    // runtime's memory high-water mark) within 4x that; RSS not growing after
    // warm-up (20% slack). Under AddressSanitizer RSS is not asserted: its
    // quarantine keeps up to 256 MiB of freed memory resident by design.
    const std::uint64_t live_bound = threads * 20000ull + 1000;
    const bool live_ok = live_max <= live_bound;
    const bool slots_ok = slots_max <= 4 * live_bound;
    const bool rss_ok = kAsan || rss_first < 0 || rss_last <= rss_first + rss_first / 5 + 16384;
    std::printf("soak: %.0f s, live max %llu (bound %llu), slots max %zu (bound %llu), RSS after warm-up %ld KiB, "
                "at end %ld KiB, max %ld KiB%s -> %s\n",
                opt.seconds, static_cast<unsigned long long>(live_max), static_cast<unsigned long long>(live_bound),
                slots_max, static_cast<unsigned long long>(4 * live_bound), rss_first, rss_last, rss_max,
                kAsan ? " (not asserted under ASan)" : "", live_ok && slots_ok && rss_ok ? "OK" : "FAILED");
    return live_ok && slots_ok && rss_ok;
}

// ---- delivery queues -----------------------------------------------------------------------
// Producers start timers bound to 1..4 delivery queues (each run by its own
// poller thread: epoll + run(n, 0), poll + run(n, 0), or run(n, timeout > 0)
// blocking), mixed with worker-delivered ones, and stop / stop_sync / reset
// them at random -- mostly recently started short ones, while pollers
// sometimes sit on a readable fd before running it, so that many stops and
// resets land on timers that are due but not yet run; and a probe thread
// owns one more queue that nobody else runs, where "due and not yet run" is
// certain (stats().due counts them), and checks that stop of such a timer
// returns true and releases it inside the call, reset re-arms it, and the fd
// stops being readable once every due timer was taken back. Callbacks stop and
// reset siblings, periodic ones stop themselves, and each checks that it
// runs on its queue's poller (pthread id) or, for worker-delivered timers,
// on none of the harness's threads. Meanwhile the harness destroys a queue
// and creates a new one in its place (close() while its producers are held
// off and its poller is inside run() or out of the loop): every timer bound
// to it must be released once, the pending ones inside close() on the
// harness's thread. At the end the pollers block in run(n, forever) and the
// runtime is shut down under them: they must return a count or
// shutting_down, and the fd must stay readable. Accounting: every timer
// ends in exactly one of {ran (one-shot), stop returned true, cancelled by
// a queue's destruction, cancelled by shutdown}; each release hook runs
// once, in a context that the end allows (after a run on its queue's
// poller or a worker, inside the stop call that cancelled it, inside the
// destruction of its queue, inside the shutdown); no run early, none
// overlapping, none after stop_sync returned, none after its queue closed.
namespace q {

struct Gen;

enum Ctx : int { kNone = 0, kAfterRunQueue, kAfterRunWorker, kInStop, kInDestroy, kInShutdown, kInStart, kBad };

struct QTrack {
    Track* t = nullptr;
    Gen* gen = nullptr;  // nullptr: worker-delivered
    std::atomic<int> ctx{kNone};
    unsigned behaviour = 0;
    std::atomic<int> cb_resets{0}, resets{0};
    std::atomic<bool> resetting{false};
};

// reset_tracked's bookkeeping of the deadline (store an earlier one before
// the call, a later one after it) is sound for one caller at a time only:
// two concurrent resets could leave the later of the two deadlines recorded
// while the runtime keeps the earlier (a false "early"). So one at a time;
// a thread that finds one in progress skips its reset.
bool reset_q(tickwheel::Runtime& rt, QTrack& qt, std::int64_t delay_ns) {
    if (qt.resetting.exchange(true, std::memory_order_acquire)) return false;
    const bool ok = reset_tracked(rt, *qt.t, delay_ns);
    qt.resetting.store(false, std::memory_order_release);
    return ok;
}

// Who the current thread is (harness threads; the runtime's workers have
// all defaults).
thread_local bool t_harness = false;
thread_local const Gen* t_poller = nullptr;      // this thread polls that queue
thread_local const Gen* t_destroying = nullptr;  // this thread is inside that queue's close()
thread_local bool t_shutting_down = false;       // inside Runtime::shutdown()
thread_local bool t_starting = false;            // inside Runtime::start()
thread_local std::uint64_t t_stopping = 0;       // inside stop/stop_sync of that id

struct Gen {
    unsigned slot = 0, number = 0, mode = 0;  // mode: 0 epoll, 1 poll, 2 run(n, timeout > 0), 3 probe
    std::unique_ptr<tickwheel::Queue> q;
    std::thread poller;
    pthread_t tid{};
    std::atomic<bool> ready{false}, retire{false}, inside{false}, closed{false}, in_final{false};
    std::mutex m;
    std::vector<QTrack*> tracks;  // every timer started on this queue
    // Results of the poller (read after it was joined).
    long loops = 0, ran = 0, readable_empty = 0, held = 0;
    long final_counts = 0, final_shutdown = 0;  // returns of run(n, forever) at the end
    long probes = 0, probe_stops = 0, probe_resets = 0;  // the probe's rounds
    bool retired_ok = false, final_ok = false, fd_readable_at_end = false;
};

struct Shared {
    tickwheel::Runtime* rt = nullptr;
    std::atomic<bool> final_phase{false};
    std::atomic<long> wrong_thread{0}, bad_ctx{0}, after_close{0}, deadlk_wrong{0}, deadlk_checked{0};
    std::atomic<long> poller_errors{0}, refused{0}, probe_errors{0};
    Tracker* tr = nullptr;
    std::mutex reg_m;
    std::deque<QTrack> reg;
    std::mutex ring_m;  // recent timers, for callbacks that act on siblings
    std::vector<std::pair<Track*, QTrack*>> ring;
    std::size_t ring_next = 0;
};

void on_release(QTrack& qt) {
    int c;
    if (t_stopping != 0 && t_stopping == qt.t->id) c = kInStop;
    else if (qt.gen != nullptr && t_poller == qt.gen) c = kAfterRunQueue;
    else if (qt.gen == nullptr && !t_harness) c = kAfterRunWorker;
    else if (qt.gen != nullptr && t_destroying == qt.gen) c = kInDestroy;
    else if (t_shutting_down) c = kInShutdown;
    else if (t_starting) c = kInStart;
    else c = kBad;
    qt.ctx.store(c, std::memory_order_release);
}

struct Guard {  // the callable's extra member: its destruction is the release
    QTrack* q;
    Shared* sh;
    explicit Guard(QTrack* x, Shared* s) : q(x), sh(s) {}
    Guard(Guard&& o) noexcept : q(o.q), sh(o.sh) { o.q = nullptr; }
    Guard& operator=(Guard&&) = delete;
    ~Guard() {
        if (q == nullptr) return;
        on_release(*q);
        if (q->ctx.load() == kBad) sh->bad_ctx++;
    }
};

void stop_q(tickwheel::Runtime& rt, Track& t, bool sync) {
    const std::uint64_t outer = t_stopping;
    t_stopping = t.id;
    stop_tracked(rt, t, sync);
    t_stopping = outer;
}

// The callback's own work (besides the Tracker's checks): where it runs, and
// some API calls from inside it.
void in_callback(Shared& sh, QTrack& me, tickwheel::Timer self, Track& t) {
    if (me.gen != nullptr) {
        if (t_poller != me.gen || !pthread_equal(pthread_self(), me.gen->tid)) sh.wrong_thread++;
        if (me.gen->closed.load()) sh.after_close++;
        if (me.behaviour % 8 == 0) {  // running our own queue from its callback: would_deadlock
            std::error_code ec;
            me.gen->q->run(1, tickwheel::Duration::zero(), ec);
            sh.deadlk_checked++;
            if (ec != tickwheel::errc::would_deadlock) sh.deadlk_wrong++;
        }
    } else if (t_harness) {
        sh.wrong_thread++;  // a worker-delivered timer on a harness thread
    }
    if (t.periodic && t.runs.load() >= 2 + static_cast<int>(me.behaviour % 4) && me.behaviour % 3 == 0) {
        const std::uint64_t outer = t_stopping;
        t_stopping = t.id;
        if (self.stop()) t.stop_true++;  // stops itself: this run is the last
        t_stopping = outer;
        return;
    }
    const unsigned b = (me.behaviour / 8) % 8;
    if (b >= 2) return;
    std::pair<Track*, QTrack*> sib{nullptr, nullptr};
    {
        std::lock_guard<std::mutex> g(sh.ring_m);
        if (!sh.ring.empty()) sib = sh.ring[(me.behaviour + static_cast<unsigned>(t.runs.load())) % sh.ring.size()];
    }
    if (sib.first == nullptr || sib.first == &t) return;
    if (b == 0) stop_q(*sh.rt, *sib.first, false);  // non-blocking stop: no callback waits for another
    else if (!sib.first->periodic) {
        sib.second->cb_resets++;
        reset_q(*sh.rt, *sib.second, 100'000);
    }
}

// Starts a tracked timer on `gen`'s queue (nullptr: the workers).
QTrack* start_q(Shared& sh, Tracker& tr, Gen* gen, std::int64_t delay_ns, std::int64_t period_ns, unsigned behaviour,
                bool siblings = true) {
    QTrack* qt;
    {
        std::lock_guard<std::mutex> g(sh.reg_m);
        qt = &sh.reg.emplace_back();
    }
    qt->gen = gen;
    qt->behaviour = behaviour;
    const std::int64_t deadline = now_ns() + delay_ns;
    Track& t = tr.make(period_ns > 0, deadline, period_ns);
    qt->t = &t;
    tickwheel::StartOptions o;
    o.delay = nanoseconds(delay_ns);
    o.period = nanoseconds(period_ns);
    o.queue = gen != nullptr ? gen->q.get() : nullptr;
    Shared* shp = &sh;
    auto inner = tr.callback(t, [shp, qt](tickwheel::Timer self, Track& me) { in_callback(*shp, *qt, self, me); });
    std::error_code ec;
    t_starting = true;
    const tickwheel::Timer timer =
        sh.rt->start(o, [inner = std::move(inner), g = Guard(qt, shp)](tickwheel::Timer self) mutable { inner(self); }, ec);
    t_starting = false;
    if (ec) {
        t.refused = true;
        sh.refused++;
        std::printf("queue: start refused: %s\n", ec.message().c_str());
        return nullptr;
    }
    t.id = timer.id();
    if (gen != nullptr) {
        std::lock_guard<std::mutex> g(gen->m);
        gen->tracks.push_back(qt);
    }
    if (!siblings) return qt;  // (the probe's timers: nobody else may touch them)
    std::lock_guard<std::mutex> g(sh.ring_m);
    if (sh.ring.size() < 64) sh.ring.emplace_back(&t, qt);
    else sh.ring[sh.ring_next++ % 64] = {&t, qt};
    return qt;
}

bool fd_readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

// One round of the probe: its queue is run by nobody else, so "due and not
// yet run" is certain once stats().due counts them all. Stopping such a
// timer must return true and release it inside the stop, and it never runs;
// resetting it must return true and it then runs once (not early); taking
// back every due timer makes the fd not readable (level-triggered).
void probe_round(Shared& sh, Gen& g, std::mt19937_64& rng) {
    auto fail = [&](const char* what) {
        std::printf("queue: probe round %ld: %s\n", g.probes, what);
        sh.probe_errors++;
    };
    const unsigned k = 1 + static_cast<unsigned>(rng() % 8);
    std::vector<QTrack*> v;
    for (unsigned i = 0; i < k; ++i) {
        const std::int64_t delay = static_cast<std::int64_t>(rng() % 300'000);
        if (QTrack* qt = start_q(sh, *sh.tr, &g, delay, 0, static_cast<unsigned>(rng()), false)) v.push_back(qt);
    }
    ++g.probes;
    if (v.size() != k) return fail("start failed");
    if (!stress::wait_for([&] { return g.q->stats().due == k; }, seconds(20))) return fail("timers never all due");
    if (!fd_readable(g.q->fd())) return fail("fd not readable with due timers");
    std::vector<QTrack*> rearmed;
    for (QTrack* qt : v) {
        Track& t = *qt->t;
        if (rng() % 3 != 0) {
            stop_q(*sh.rt, t, rng() % 2 == 0);
            ++g.probe_stops;
            if (t.stop_true.load() != 1) fail("stop of a due timer did not return true");
            else if (t.released.load() != 1 || qt->ctx.load() != kInStop) fail("stop of a due timer: not released inside it");
        } else {
            ++g.probe_resets;
            if (!reset_q(*sh.rt, *qt, static_cast<std::int64_t>(rng() % 500'000)))
                fail("reset of a due timer did not return true");
            rearmed.push_back(qt);
        }
    }
    if (rearmed.empty() && (g.q->stats().due != 0 || fd_readable(g.q->fd())))
        fail("fd readable (or due > 0) after every due timer was stopped");
    const bool all_ran = stress::wait_for(
        [&] {
            std::error_code ec;
            g.ran += static_cast<long>(g.q->run(64, milliseconds(1), ec));
            if (ec) fail("run");
            for (QTrack* qt : rearmed)
                if (qt->t->released.load() != 1) return false;
            return true;
        },
        seconds(20));
    if (!all_ran) fail("a reset due timer never ran");
    for (QTrack* qt : v)
        if (qt->t->runs.load() != (qt->t->stop_true.load() == 1 ? 0 : 1)) fail("a probe timer ran wrongly");
}

void poller(Shared& sh, Gen& g, unsigned long seed) {
    t_harness = true;
    t_poller = &g;
    g.tid = pthread_self();
    std::mt19937_64 rng(seed);
    const int fd = g.q->fd();
    int ep = -1;
    if (g.mode == 0) {
        ep = ::epoll_create1(EPOLL_CLOEXEC);
        epoll_event ev{};
        ev.events = EPOLLIN;  // level-triggered
        ev.data.fd = fd;
        if (ep < 0 || ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
            std::printf("queue: epoll: %s\n", std::strerror(errno));
            sh.poller_errors++;
        }
    }
    g.ready.store(true);
    bool retired = false;
    while (!sh.final_phase.load()) {
        if (g.retire.load()) {
            retired = true;
            break;
        }
        ++g.loops;
        std::int64_t timeout = 0;
        bool readable = true;
        if (g.mode == 3) {
            probe_round(sh, g, rng);
            continue;
        }
        if (g.mode == 0) {
            epoll_event ev{};
            readable = ::epoll_wait(ep, &ev, 1, 2) == 1;
        } else if (g.mode == 1) {
            pollfd p{fd, POLLIN, 0};
            readable = ::poll(&p, 1, 2) == 1 && (p.revents & POLLIN) != 0;
        } else {
            timeout = 100'000 + static_cast<std::int64_t>(rng() % 3'000'000);
        }
        if (!readable) continue;
        if (g.mode != 2 && rng() % 4 == 0) {  // a busy loop: due timers wait a while (stops and resets land on them)
            ++g.held;
            std::this_thread::sleep_for(microseconds(100 + static_cast<long>(rng() % 700)));
        }
        g.inside.store(true);
        if (g.retire.load()) {  // (after `inside`: the harness's close() never races with our entry)
            g.inside.store(false);
            retired = true;
            break;
        }
        std::error_code ec;
        const std::size_t n = g.q->run(1 + rng() % 32, tickwheel::Duration(timeout), ec);
        g.inside.store(false);
        if (ec) {
            // Only a close() that reached us inside run() ends it (as shutting_down).
            if (g.retire.load() && (ec == tickwheel::errc::shutting_down || ec == tickwheel::errc::invalid_argument)) {
                retired = true;
                break;
            }
            std::printf("queue: poller %u.%u: run: %s\n", g.slot, g.number, ec.message().c_str());
            sh.poller_errors++;
            break;
        }
        g.ran += static_cast<long>(n);
        if (n == 0 && g.mode != 2) ++g.readable_empty;  // readable, but a stop or reset took it back
    }
    if (retired) {
        g.retired_ok = true;
    } else {
        // The end: block until due or shut down, until the runtime's shutdown.
        g.in_final.store(true);
        for (;;) {
            std::error_code ec;
            const std::size_t n = g.q->run(64, tickwheel::Queue::kForever, ec);
            if (!ec) {
                ++g.final_counts;
                g.ran += static_cast<long>(n);
                continue;
            }
            if (ec == tickwheel::errc::shutting_down) {
                ++g.final_shutdown;
                g.final_ok = true;
            } else {
                std::printf("queue: poller %u.%u: final run: %s\n", g.slot, g.number, ec.message().c_str());
                sh.poller_errors++;
            }
            break;
        }
        g.fd_readable_at_end = fd_readable(fd);  // readable for good after shutdown
    }
    if (ep >= 0) ::close(ep);
}

struct Slot {
    std::mutex m;  // held by producers while they start on its queue, and by close()
    Gen* gen = nullptr;
};

}  // namespace q

// Ends the process if the mode has not finished within `limit` (a stuck
// poller, close() or shutdown would otherwise wait for ctest's timeout).
class Watchdog {
public:
    Watchdog(const char* name, seconds limit) : name_(name), th_([this, limit] {
        std::unique_lock<std::mutex> lk(m_);
        if (cv_.wait_for(lk, limit, [this] { return done_; })) return;
        std::printf("%s: watchdog: no end after %lld s (phase: %s) -> FAILED\n", name_,
                    static_cast<long long>(limit.count()), phase.load());
        std::fflush(stdout);
        std::_Exit(1);
    }) {}
    ~Watchdog() {
        {
            std::lock_guard<std::mutex> lk(m_);
            done_ = true;
        }
        cv_.notify_all();
        th_.join();
    }
    std::atomic<const char*> phase{"start"};

private:
    const char* name_;
    std::mutex m_;
    std::condition_variable cv_;
    bool done_ = false;
    std::thread th_;
};

bool run_queue(const Options& opt) {
    using namespace q;
    Watchdog watchdog("queue", seconds(300));
    tickwheel::Runtime rt(with_resolution(microseconds(200)));
    Tracker tr;
    Shared sh;
    sh.rt = &rt;
    t_harness = true;
    const unsigned nq = std::clamp(opt.queues, 1u, 16u);
    const unsigned threads = opt.threads ? opt.threads : 3;
    const unsigned destroys = 3;
    std::vector<std::unique_ptr<Gen>> gens;  // every queue ever (freed at the end)
    std::vector<Slot> slots(nq);
    sh.tr = &tr;
    unsigned long gen_seed = opt.seed * 104729;
    auto make_gen = [&](unsigned slot, unsigned number, unsigned mode) {
        auto g = std::make_unique<Gen>();
        g->slot = slot;
        g->number = number;
        g->mode = mode;
        g->q = std::make_unique<tickwheel::Queue>(rt);
        Gen& ref = *g;
        g->poller = std::thread([&sh, &ref, s = ++gen_seed] { poller(sh, ref, s); });
        while (!ref.ready.load()) std::this_thread::yield();
        gens.push_back(std::move(g));
        return &ref;
    };
    for (unsigned s = 0; s < nq; ++s) slots[s].gen = make_gen(s, 0, s % 3);
    Gen* probe = make_gen(nq, 0, 3);  // its own queue, run by nobody else

    const long per_thread = std::max(1L, opt.ops / static_cast<long>(threads));
    std::atomic<long> progress{0};
    const auto t0 = steady_clock::now();
    std::vector<std::thread> producers;
    producers.reserve(threads);
    for (unsigned p = 0; p < threads; ++p) {
        producers.emplace_back([&, p] {
            t_harness = true;
            std::mt19937_64 rng(opt.seed * 7919 + p);
            std::vector<QTrack*> mine;
            auto delay = [&]() -> std::int64_t {
                switch (rng() % 10) {
                    case 0:
                    case 1:
                    case 2: return 0;
                    case 3:
                    case 4:
                    case 5:
                    case 6: return static_cast<std::int64_t>(rng() % 1'000'000);  // < 1 ms
                    case 7:
                    case 8: return static_cast<std::int64_t>(rng() % 20'000'000);  // < 20 ms
                    default: return static_cast<std::int64_t>(rng() % 2'000'000'000);  // < 2 s
                }
            };
            for (long i = 0; i < per_thread; ++i, progress++) {
                const unsigned op = static_cast<unsigned>(rng() % 100);
                if (op < 35 || mine.empty()) {
                    const bool periodic = rng() % 10 == 0;
                    const std::int64_t period = periodic ? 300'000 + static_cast<std::int64_t>(rng() % 3'000'000) : 0;
                    const unsigned behaviour = static_cast<unsigned>(rng());
                    QTrack* qt;
                    if (rng() % 4 == 0) {
                        qt = start_q(sh, tr, nullptr, delay(), period, behaviour);
                    } else {
                        Slot& s = slots[rng() % nq];
                        std::lock_guard<std::mutex> g(s.m);  // close() waits; we never start on a closing queue
                        qt = start_q(sh, tr, s.gen, delay(), period, behaviour);
                    }
                    if (qt != nullptr) mine.push_back(qt);
                    continue;
                }
                // Mostly one of the last few started (short ones: often due, not yet run).
                const std::size_t k = rng() % 4 != 0 ? mine.size() - 1 - rng() % std::min<std::size_t>(mine.size(), 8)
                                                     : rng() % mine.size();
                Track& t = *mine[k]->t;
                if (op < 60) stop_q(rt, t, false);
                else if (op < 68) stop_q(rt, t, true);
                else if (op < 90) {
                    if (!t.periodic) {
                        mine[k]->resets++;
                        reset_q(rt, *mine[k], rng() % 2 ? 0 : static_cast<std::int64_t>(rng() % 1'000'000));
                    }
                } else {
                    std::this_thread::sleep_for(microseconds(static_cast<long>(rng() % 300)));  // let some come due
                }
            }
        });
    }

    // Destroy a queue and create a new one in its slot, `destroys` times, spread over the run.
    long destroyed_pending = 0, destroy_bad = 0, destroy_late = 0;
    unsigned done_destroys = 0;
    watchdog.phase = "load, destroying queues";
    for (unsigned d = 0; d < destroys; ++d) {
        const long at = static_cast<long>(threads) * per_thread * (d + 1) / (destroys + 1);
        while (progress.load() < at) std::this_thread::sleep_for(milliseconds(1));
        Slot& s = slots[d % nq];
        Gen& g = *s.gen;
        g.retire.store(true);
        // The poller never enters run() again; wait until it is inside (then
        // close() wakes it) or out of it.
        if (!stress::wait_for([&] { return !g.inside.load() || g.q->stats().runners > 0; }, seconds(30))) {
            std::printf("queue: the poller of queue %u.%u neither left nor entered run()\n", g.slot, g.number);
            ++destroy_bad;
        }
        {
            std::lock_guard<std::mutex> lk(s.m);
            std::error_code ec;
            t_destroying = &g;
            g.q->close(ec);
            t_destroying = nullptr;
            g.closed.store(true);
            if (ec) {
                std::printf("queue: close: %s\n", ec.message().c_str());
                ++destroy_bad;
            }
            // Every timer bound to it has ended: the pending ones inside close(),
            // on this thread; one that a concurrent stop won ends inside that stop.
            std::lock_guard<std::mutex> gm(g.m);
            std::vector<QTrack*> late;
            for (QTrack* qt : g.tracks) {
                if (qt->t->released.load() != 1) late.push_back(qt);
                else if (qt->ctx.load() == kInDestroy) ++destroyed_pending;
            }
            stress::wait_for(
                [&] {
                    for (QTrack* qt : late)
                        if (qt->t->released.load() != 1) return false;
                    return true;
                },
                seconds(10));
            for (QTrack* qt : late) {
                if (qt->t->released.load() == 1 && qt->ctx.load() == kInStop) {
                    ++destroy_late;
                    continue;
                }
                if (++destroy_bad <= 5)
                    std::printf("queue: timer %llu of destroyed queue %u.%u: released %d times (ctx %d) after close()\n",
                            static_cast<unsigned long long>(qt->t->id), g.slot, g.number, qt->t->released.load(),
                            qt->ctx.load());
            }
            if (!fd_readable(g.q->fd())) {
                std::printf("queue: fd of closed queue %u.%u not readable\n", g.slot, g.number);
                ++destroy_bad;
            }
            s.gen = make_gen(g.slot, g.number + 1, (g.slot + g.number + 1) % 3);
        }
        g.poller.join();
        if (!g.retired_ok) {
            std::printf("queue: poller of destroyed queue %u.%u did not end as expected\n", g.slot, g.number);
            ++destroy_bad;
        }
        ++done_destroys;
    }
    watchdog.phase = "load";
    for (auto& th : producers) th.join();
    const double load_secs = duration<double>(steady_clock::now() - t0).count();
    std::this_thread::sleep_for(milliseconds(20));  // let short timers come due

    // The end: every poller blocked in run(n, forever), then shutdown under them.
    watchdog.phase = "pollers into run(n, forever)";
    sh.final_phase.store(true);
    bool all_blocked = stress::wait_for(
        [&] {
            for (Slot& s : slots)
                if (!s.gen->in_final.load() || s.gen->q->stats().runners == 0) return false;
            return probe->in_final.load() && probe->q->stats().runners != 0;
        },
        seconds(30));
    if (!all_blocked) std::printf("queue: not every poller got into run(n, forever)\n");
    watchdog.phase = "shutdown under the pollers";
    const auto s0 = steady_clock::now();
    t_shutting_down = true;
    rt.shutdown();
    t_shutting_down = false;
    const double shutdown_secs = duration<double>(steady_clock::now() - s0).count();
    for (Slot& s : slots) s.gen->poller.join();
    probe->poller.join();
    watchdog.phase = "verdict";

    // ---- verdict
    const auto st = rt.stats();
    long in_shutdown = 0, in_destroy = 0, end_bad = 0, ctx_counts[kBad + 1] = {};
    std::size_t queue_bound = 0;
    std::uint64_t stop_true = 0;
    for (QTrack& qt : sh.reg) {
        const Track& t = *qt.t;
        const int c = qt.ctx.load();
        ctx_counts[std::clamp(c, 0, static_cast<int>(kBad))]++;
        if (qt.gen != nullptr) ++queue_bound;
        stop_true += static_cast<std::uint64_t>(t.stop_true.load());
        if (t.refused.load()) continue;
        const bool ran_last = !t.periodic && t.runs.load() > 0;
        const bool cancelled = !ran_last && t.stop_true.load() == 0;
        if (c == kInShutdown) ++in_shutdown;
        if (c == kInDestroy) ++in_destroy;
        // Cancelled (not run, not stopped) iff released inside a queue's destruction or the shutdown.
        if (cancelled != (c == kInShutdown || c == kInDestroy)) ++end_bad;
        if (c == kInDestroy && (qt.gen == nullptr || !qt.gen->closed.load())) ++end_bad;
        if (t.early.load() != 0)
            std::printf("queue: EARLY: timer %llu (%s, %s, queue %d.%d), runs %d, stop true %d, deadline %lld, resets %d + %d from callbacks\n",
                        static_cast<unsigned long long>(t.id), t.periodic ? "periodic" : "one-shot",
                        qt.gen == nullptr ? "workers" : "queue", qt.gen ? static_cast<int>(qt.gen->slot) : -1,
                        qt.gen ? static_cast<int>(qt.gen->number) : -1, t.runs.load(), t.stop_true.load(),
                        static_cast<long long>(t.deadline_ns.load()), qt.resets.load(), qt.cb_resets.load());
    }
    // (Tracker's "cancelled at shutdown": by the shutdown or by a queue's destruction.)
    const auto rep = tr.verify(st.cancelled_at_shutdown + static_cast<std::uint64_t>(in_destroy));
    Tracker::print("queue", rep, st.cancelled_at_shutdown + static_cast<std::uint64_t>(in_destroy));
    std::printf("queue: lateness %s\n", tr.lateness.summary().c_str());
    std::printf("queue: %u producers, %u queues, %zu of %zu timers queue-bound, %.2f s; runtime stats: started=%llu "
                "fired=%llu stopped=%llu reset=%llu cancelled-at-shutdown=%llu\n",
                threads, nq, queue_bound, sh.reg.size(), load_secs, static_cast<unsigned long long>(st.started),
                static_cast<unsigned long long>(st.fired), static_cast<unsigned long long>(st.stopped),
                static_cast<unsigned long long>(st.reset), static_cast<unsigned long long>(st.cancelled_at_shutdown));
    std::printf("queue: releases: after a run on its queue %ld, on a worker %ld, inside a stop %ld, inside a queue's "
                "destruction %ld, inside shutdown %ld, inside start %ld, elsewhere %ld, never %ld\n",
                ctx_counts[kAfterRunQueue], ctx_counts[kAfterRunWorker], ctx_counts[kInStop], ctx_counts[kInDestroy],
                ctx_counts[kInShutdown], ctx_counts[kInStart], ctx_counts[kBad], ctx_counts[kNone]);
    std::uint64_t delivered = 0, ran = 0;
    long held = 0, readable_empty = 0, final_counts = 0, final_shutdown = 0, not_readable = 0, final_bad = 0;
    for (auto& gp : gens) {
        Gen& g = *gp;
        const auto qs = g.q->stats();
        delivered += qs.delivered;
        ran += qs.ran;
        held += g.held;
        readable_empty += g.readable_empty;
        if (!g.retired_ok) {
            final_counts += g.final_counts;
            final_shutdown += g.final_shutdown;
            if (!g.fd_readable_at_end) ++not_readable;
            if (!g.final_ok) ++final_bad;
        }
        std::printf("queue: queue %u.%u (%s%s): delivered %llu, ran %llu (poller: %ld), run lateness p50 %lld us p99 "
                    "%lld us max %lld us\n",
                    g.slot, g.number, g.mode == 0 ? "epoll" : g.mode == 1 ? "poll" : g.mode == 2 ? "run(timeout)" : "probe",
                    g.retired_ok ? ", destroyed mid-run" : "", static_cast<unsigned long long>(qs.delivered),
                    static_cast<unsigned long long>(qs.ran), g.ran,
                    static_cast<long long>(duration_cast<microseconds>(qs.run_p50).count()),
                    static_cast<long long>(duration_cast<microseconds>(qs.run_p99).count()),
                    static_cast<long long>(duration_cast<microseconds>(qs.run_max).count()));
    }
    std::printf("queue: due timers taken back before their run (stop/reset while due, or dropped by a destroy): %lld; "
                "polls that found the fd readable and ran nothing: %ld; held readable fds: %ld\n",
                static_cast<long long>(delivered - ran), readable_empty, held);
    std::printf("queue: probe (a queue nobody else runs): %ld rounds, %ld stops and %ld resets of timers certainly "
                "due and not yet run, errors %ld\n",
                probe->probes, probe->probe_stops, probe->probe_resets, sh.probe_errors.load());
    std::printf("queue: %u queues destroyed mid-run: %ld pending timers cancelled inside close() on the destroying "
                "thread, %ld ended by a concurrent stop, problems %ld\n",
                done_destroys, destroyed_pending, destroy_late, destroy_bad);
    std::printf("queue: shutdown under blocked pollers (all blocked: %s) took %.3f s; their run(n, forever) returned "
                "counts %ld times, shutting_down %ld times; fd readable after: %s; poller errors %ld\n",
                all_blocked ? "yes" : "NO", shutdown_secs, final_counts, final_shutdown, not_readable == 0 ? "yes" : "NO",
                sh.poller_errors.load());
    std::printf("queue: callbacks on a wrong thread %ld, after their queue closed %ld; releases in a wrong context %ld, "
                "endings that disagree with the release %ld; own-queue run from a callback: %ld checked, %ld not "
                "would_deadlock; refused starts %ld; stopped: runtime %llu, stop calls %llu + destroyed %ld\n",
                sh.wrong_thread.load(), sh.after_close.load(), sh.bad_ctx.load(), end_bad, sh.deadlk_checked.load(),
                sh.deadlk_wrong.load(), sh.refused.load(), static_cast<unsigned long long>(st.stopped),
                static_cast<unsigned long long>(stop_true), in_destroy);
    const bool ok = rep.ok && sh.wrong_thread == 0 && sh.after_close == 0 && sh.bad_ctx == 0 && end_bad == 0 &&
                    ctx_counts[kNone] == 0 && sh.deadlk_wrong == 0 && sh.poller_errors == 0 && sh.refused == 0 &&
                    sh.probe_errors == 0 && probe->probes > 0 &&
                    destroy_bad == 0 && done_destroys >= 1 && all_blocked && not_readable == 0 && final_bad == 0 &&
                    static_cast<std::uint64_t>(in_shutdown) == st.cancelled_at_shutdown &&
                    st.stopped == stop_true + static_cast<std::uint64_t>(in_destroy) && shutdown_secs < 10.0;
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    Options opt;
    for (int i = 1; i < argc; ++i) {
        auto arg = [&](const char* name) { return std::strcmp(argv[i], name) == 0 && i + 1 < argc; };
        if (arg("--ops")) opt.ops = std::atol(argv[++i]);
        else if (arg("--seconds")) opt.seconds = std::atof(argv[++i]), opt.seconds_set = true;
        else if (arg("--features")) opt.features = argv[++i];
        else if (arg("--runtime")) opt.runtime = argv[++i];
        else if (arg("--fuzz")) opt.fuzz = static_cast<unsigned>(std::atoi(argv[++i]));
        else if (arg("--slack")) opt.slack_ms = std::atol(argv[++i]);
        else if (arg("--freeze-site")) opt.freeze_site = argv[++i][0];
        else if (arg("--quiet-ms")) opt.quiet_ms = std::atol(argv[++i]);
        else if (std::strcmp(argv[i], "--late") == 0) {
            std::fprintf(stderr, "--late is gone (issue 31): lateness is judged against a bound computed from the history"
                                 " (--slack MS is its machine slack); see history_run.cpp\n");
            return 2;
        }
        else if (arg("--threads")) opt.threads = static_cast<unsigned>(std::atoi(argv[++i]));
        else if (arg("--queues")) opt.queues = static_cast<unsigned>(std::atoi(argv[++i]));
        else if (arg("--seed")) opt.seed = std::strtoul(argv[++i], nullptr, 10);
        else if (opt.mode.empty() && argv[i][0] != '-') opt.mode = argv[i];
        else {
            std::fprintf(stderr, "unknown argument: %s\n", argv[i]);
            return 2;
        }
    }
    if (const char* s = std::getenv("TICKWHEEL_SEED")) opt.seed = std::strtoul(s, nullptr, 10);
    if (opt.mode == "history-selftest") return stress::history::selftest();
    if (opt.mode == "coro-history-selftest") return stress::coro_history::selftest();
    if (opt.mode == "coro-history") {
        if (opt.runtime != "real" && opt.runtime != "manual" && opt.runtime != "both") {
            std::fprintf(stderr, "--runtime is real, manual or both, not %s\n", opt.runtime.c_str());
            return 2;
        }
        stress::coro_history::Options co;
        co.seconds = opt.seconds_set ? opt.seconds : 3;
        co.seed = opt.seed;
        co.fuzz = opt.fuzz;
        co.slots = opt.threads;  // --threads: coroutines at once
        int rc = 0;
        if (opt.runtime != "manual") rc |= stress::coro_history::run(co);
        if (opt.runtime != "real") {
            co.manual = true;
            rc |= stress::coro_history::run(co);
        }
        return rc;
    }
    if (opt.mode == "history") {
        unsigned features = 0;
        if (!stress::history::parse_features(opt.features, features)) {
            std::fprintf(stderr, "unknown --features: %s\n", opt.features.c_str());
            return 2;
        }
        stress::history::RunOptions ro;
        ro.threads = opt.threads != 0 ? opt.threads : 3;
        ro.features = features;
        ro.fuzz = opt.fuzz;
        ro.slack_ns = std::int64_t{opt.slack_ms > 0 ? opt.slack_ms : kSanitized ? kHistorySlackSanitizedMs : kHistorySlackMs} * 1'000'000;
        ro.freeze_site = opt.freeze_site;
        ro.quiet_ms = opt.quiet_ms;
        ro.sanitized = kSanitized;
        // A long run is a sequence of 20 s rounds (a fresh runtime and record
        // each, seeds S, S+1, ...) so the record stays small; the first round
        // with a violation ends it (its seed is printed).
        double left = opt.seconds_set ? opt.seconds : 10;
        for (unsigned long seed = opt.seed;; ++seed) {
            const double secs = left > 30 ? 20 : left;
            ro.seconds = secs;
            ro.seed = seed;
            const int rc = stress::history::run(ro);
            left -= secs;
            if (rc != 0 || left <= 0) return rc;
        }
    }
    std::printf("tw_stress %s: ops=%ld seconds=%.0f threads=%u seed=%lu\n", opt.mode.c_str(), opt.ops, opt.seconds,
                opt.threads, opt.seed);
    bool ok;
    if (opt.mode == "accounting") ok = run_accounting(opt);
    else if (opt.mode == "deadline") ok = run_deadline(opt);
    else if (opt.mode == "callbacks") ok = run_callbacks(opt);
    else if (opt.mode == "shutdown") ok = run_shutdown(opt);
    else if (opt.mode == "slow") ok = run_slow(opt);
    else if (opt.mode == "limit") ok = run_limit(opt);
    else if (opt.mode == "soak") ok = run_soak(opt);
    else if (opt.mode == "queue") ok = run_queue(opt);
    else if (opt.mode == "groups") ok = run_groups(opt);
    else if (opt.mode == "batch") ok = run_batch(opt);
    else {
        std::fprintf(stderr, "usage: tw_stress accounting|deadline|callbacks|shutdown|slow|limit|soak|queue|groups|batch|history "
                             "[--ops N] [--seconds S] [--threads T] [--queues Q] [--seed X]\n");
        return 2;
    }
    std::printf("tw_stress %s: %s\n", opt.mode.c_str(), ok ? "PASSED" : "FAILED");
    return ok ? 0 : 1;
}
