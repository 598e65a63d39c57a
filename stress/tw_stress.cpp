// SPDX-License-Identifier: MIT OR Apache-2.0
// tw_stress: hammer a tickwheel runtime from many threads and check exact
// invariants with independent bookkeeping (stress/tracker.hpp).
//
//   tw_stress MODE [--ops N] [--seconds S] [--threads T] [--seed X]
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
// Exit status 0 iff every invariant held.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tracker.hpp"

using namespace std::chrono;
using stress::now_ns;
using stress::Track;
using stress::Tracker;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

struct Options {
    std::string mode;
    long ops = 200000;
    double seconds = 10;
    unsigned threads = 0;
    unsigned long seed = 1;
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

void stop_tracked(tickwheel::Runtime& rt, Track& t, bool sync) {
    const bool ok = sync ? rt.stop_sync(t.id) : rt.stop(t.id);
    if (ok) t.stop_true++;
    if (sync) {
        if (t.in_callback.load() != 0) t.after_sync++;  // stop_sync returned while a run was in progress
        t.synced.store(true);
    }
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

// ---- accounting ---------------------------------------------------------------
bool run_accounting(const Options& opt) {
    tickwheel::Config cfg;
    cfg.resolution = microseconds(500);
    tickwheel::Runtime rt(cfg);
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
            auto delay = [&]() -> std::int64_t {
                switch (rng() % 4) {
                    case 0: return 0;
                    case 1: return static_cast<std::int64_t>(rng() % 2'000'000);        // < 2 ms
                    case 2: return static_cast<std::int64_t>(rng() % 50'000'000);       // < 50 ms
                    default: return static_cast<std::int64_t>(rng() % 2'000'000'000);   // < 2 s
                }
            };
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

// ---- deadline races -------------------------------------------------------------
bool run_deadline(const Options& opt) {
    tickwheel::Config cfg;
    cfg.resolution = microseconds(100);
    tickwheel::Runtime rt(cfg);
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

}  // namespace

int main(int argc, char** argv) {
    Options opt;
    for (int i = 1; i < argc; ++i) {
        auto arg = [&](const char* name) { return std::strcmp(argv[i], name) == 0 && i + 1 < argc; };
        if (arg("--ops")) opt.ops = std::atol(argv[++i]);
        else if (arg("--seconds")) opt.seconds = std::atof(argv[++i]);
        else if (arg("--threads")) opt.threads = static_cast<unsigned>(std::atoi(argv[++i]));
        else if (arg("--seed")) opt.seed = std::strtoul(argv[++i], nullptr, 10);
        else if (opt.mode.empty() && argv[i][0] != '-') opt.mode = argv[i];
        else {
            std::fprintf(stderr, "unknown argument: %s\n", argv[i]);
            return 2;
        }
    }
    if (const char* s = std::getenv("TICKWHEEL_SEED")) opt.seed = std::strtoul(s, nullptr, 10);
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
    else {
        std::fprintf(stderr, "usage: tw_stress accounting|deadline|callbacks|shutdown|slow|limit|soak "
                             "[--ops N] [--seconds S] [--threads T] [--seed X]\n");
        return 2;
    }
    std::printf("tw_stress %s: %s\n", opt.mode.c_str(), ok ? "PASSED" : "FAILED");
    return ok ? 0 : 1;
}
