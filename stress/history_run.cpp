// SPDX-License-Identifier: MIT OR Apache-2.0
// tw_stress history: a schedule fuzzer and a history checker.
//
//   tw_stress history [--seconds S] [--seed X] [--threads T] [--features LIST]
//                     [--fuzz N] [--late MS]
//
// Longer than 30 s, the run is a sequence of 20 s rounds, seeds S, S+1, ...
// (a fresh runtime and record each), ending at the first round with a
// violation: run it for as long as you like.
//
// T producer threads (default 3) drive one runtime through its C API with a
// seeded random mix of every feature: timers on CLOCK_MONOTONIC, BOOTTIME
// and REALTIME (with wall-clock steps every 0.1 .. 0.6 s, mostly forward by
// 0.5 .. 6 s, sometimes back by 0.2 .. 3 s, through
// test_hooks::realtime_shift_ns while they run), one-shot and periodic with
// every period policy (SKIP, DELAY, BURST), leeway, groups and
// tw_group_stop (also TW_SYNC), delivery queues (each run by its own
// thread), the batch calls,
// stop / stop_sync / reset / reset_at of live timers, and the same calls on
// stale ids (of timers whose release hook already ran). Callbacks re-arm,
// reset and stop themselves. After S seconds (default 10) the load stops,
// the runtime is shut down (under a watchdog), and the whole record -- every
// call's call and return (CLOCK_MONOTONIC, thread, result), every callback
// run and release hook with the timer's own-clock reading -- is checked
// against the contract's sequential model (history_check.cpp lists the
// rules). Exit status 0 iff no rule was broken; otherwise each violation is
// printed with the calls on the offending timer's slot, in order.
//
// --fuzz N (default 64; 0 = off) installs the schedule fuzzer
// (test_hooks::schedule_point): at every test-hook point, every clock
// reading the library makes, every parker sleep and wake and every eventfd
// write and read, the calling thread yields with probability N/1024, sleeps
// 1..50 us with probability N/8192 and parks for 0.2..2 ms with
// probability N/65536 (8 times these in the lookup-to-CAS windows, at
// boot-time and wall-clock readings and in queue creation, where 1 in 8
// also sleeps 1..50 ms), by a per-thread random stream seeded from --seed.
// The producers' operations are a function of --seed and the thread too;
// the interleaving is not (threads), so a seed that found a violation finds
// it again often, not always: run it a few times (or longer).
//
// TW_HISTORY_REPORTS=N in the environment prints N violations in full (default 4).
//
// --features picks what is mixed: "all" (default) or a comma list of
//   boottime realtime steps periodic delay groups rearm queues batch stale
//   nest qcreate qwait qdestroy far   (in "all")
//   gstop1                            (not in "all")
// each prefixed by '-' to remove it from what came before ("all,-steps").
// "queues": a third of the timers are bound to one of 3 queues, each run by
// its own thread with timeouts <= 5 ms; "qwait": those threads also wait in
// tw_queue_run(q, n, -1) (a due timer must end that wait: a lost wake-up
// shows as LATE runs of that queue's timers).
// "nest": at the end a callback waits in tw_queue_run(q, 1, -1) on a worker
// while the runtime shuts down (shutdown must end the wait); "qcreate":
// queues are created while the runtime shuts down (each must then say
// TW_ESHUTDOWN); "qdestroy": a destroyer thread destroys queues while a
// start bound to them is held in flight (after it read the queue), then runs
// the queue created next in the slot (the start fails, or its timer is
// cancelled by the destroy: it never runs there). "gstop1": group stops
// from producer 0 only; "far" (with steps): a quarter of the wall-clock
// timers are due in 2 .. 8 s (they must follow every step). --late MS (default
// 2500; 4000 under sanitizers) is how late a run may be before it is
// reported (a load-proof bound, not a latency goal).
//
// Replaying a race: revert the fix, rebuild tw_stress, and run
//   stress/history_hunt.sh -f FEATURES -s 6 -n 10
// which runs seeds 1..10 and names the first that fails with its first
// complaint (the full report, with the calls on the offending timer's slot,
// stays in /tmp). Issue 20's eight fixes, each reverted alone on 4dfd216
// (1.5.0 with every fix; -s 6, seeds 1..10, the mix of the race, then
// "all"; docs/site/development.md has the table with the forced tests):
//   1 shutdown closes queues only    -f nest, all: seed 1, 1: "tw_runtime_shutdown
//     after the workers are idle     did not return within 30 s (a callback waits in
//                                    tw_queue_run(q, 1, -1): shutdown must end that wait)"
//   2 a re-armed grouped one-shot    -f groups,rearm, all: seed 1, 1: "GROUP: run at ..
//     is not indexed again           after tw_group_stop(g) [..] that had to stop it"
//   3 a DELAY run overwrites the     -f boottime,realtime,delay, all: seed 1, 1: "LOST:
//     own-clock deadline a reset     due by .. at the latest, it had not run by the end of
//     set during the run             the load"; all: "LATE: run at .., 4998.076 ms after
//                                    the latest time it was due" (the timer's 5 s period)
//   4 a reset stores the own-clock   -f boottime,realtime,stale,steps, all: seed 1, 1:
//     deadline before its CAS, no    "LOST: due by .., it had not run by the end of the
//     deadline lock (stale ids)      load" (the slot shows a reset by 1 h that returned
//                                    TW_ENOENT, overlapping its start); all: "EARLY: run
//                                    at .. before the earliest deadline it may serve
//                                    .. (120.359 ms early)"
//   5 a run accepts an item whose    -f queues,periodic,delay,rearm: not caught in 10;
//     episode a reset ended          all: not caught in 10 (the order of a queue's runs
//                                    needs delivery times the record does not have)
//   6 queue create not ordered       -f qcreate, all: seed 1, 1: "a queue created (TW_OK
//     against shutdown               at ..) while the runtime shut down was never closed"
//   7 a clocked start files by the   -f realtime,steps,batch, all: not caught in 10
//     readings taken before it is    (a later re-clock pass re-files the timer when the
//     indexed for clock steps        offset jitters by a tick; a short timer that misses a
//                                    step is late by less than --late)
//   8 destroy neither retires the    -f qdestroy, all: seed 1, 1: "run at .. on the wrong
//     slot nor waits for starts      thread (thread kind 2, inside queue 17; expected
//                                    queue 16)"
//   (qwait) a runner in tw_queue_run(q, n, -1) that sleeps while a timer of
//     q is due (seen once on 1.4.0, seed 33 of periodic,delay,rearm,queues,
//     batch,stale before qwait was split off: "LATE" runs of one queue only;
//     the undue()-after-reset item of issue 20 is the likely cause)
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "history.hpp"
#include "runtime/test_hooks.hpp"
#include "tickwheel/tickwheel.h"

namespace stress::history {

namespace {

// ---- features ------------------------------------------------------------------
struct Named {
    const char* name;
    unsigned bit;
};
constexpr Named kNames[] = {{"boottime", kFBoottime}, {"realtime", kFRealtime}, {"steps", kFSteps},
                            {"periodic", kFPeriodic}, {"delay", kFDelay},       {"groups", kFGroups},
                            {"rearm", kFRearm},       {"queues", kFQueues},     {"batch", kFBatch},
                            {"stale", kFStale},       {"nest", kFNest},         {"qcreate", kFQcreate},
                            {"qwait", kFQwait},       {"qdestroy", kFQdestroy},
                            {"gstop1", kFGroupStopsOneThread}, {"far", kFFar}};
}  // namespace

bool parse_features(const std::string& s, unsigned& out) {
    out = 0;
    std::size_t p = 0;
    while (p <= s.size()) {
        std::size_t q = s.find(',', p);
        if (q == std::string::npos) q = s.size();
        std::string w = s.substr(p, q - p);
        p = q + 1;
        if (w.empty()) continue;
        const bool minus = w[0] == '-';
        if (minus) w.erase(0, 1);
        unsigned bit = 0;
        if (w == "all") bit = kFAll;
        else if (w == "none") bit = 0;
        else {
            for (const Named& n : kNames)
                if (w == n.name) bit = n.bit;
            if (bit == 0) return false;
        }
        out = minus ? out & ~bit : out | bit;
    }
    return true;
}

std::string feature_names(unsigned f) {
    std::string s;
    for (const Named& n : kNames)
        if (f & n.bit) {
            if (!s.empty()) s.push_back(',');
            s.append(n.name);
        }
    return s.empty() ? "none" : s;
}

namespace {

std::int64_t clock_raw(clockid_t c) {
    timespec ts;
    clock_gettime(c, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}
std::int64_t mono() { return clock_raw(CLOCK_MONOTONIC); }
std::int64_t own_raw(int clock) {
    return clock_raw(clock == TW_CLOCK_BOOTTIME ? CLOCK_BOOTTIME : clock == TW_CLOCK_REALTIME ? CLOCK_REALTIME : CLOCK_MONOTONIC);
}

// ---- the schedule fuzzer ---------------------------------------------------------
std::atomic<unsigned> g_fuzz{0};  // N of --fuzz
std::atomic<std::uint64_t> g_fuzz_seed{1};
std::atomic<unsigned> g_fuzz_threads{0};

std::uint64_t splitmix(std::uint64_t& x) {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// qdestroy: a start bound to a queue that is about to be destroyed parks at
// its first CLOCK_MONOTONIC reading (start_args: the start has read its
// queue by then -- plan_start -- and has not yet registered against
// destroy) until the destroyer has called tw_queue_destroy (or 20 ms), then
// goes on a moment later: a start "in flight when destroy is called, that
// read q before", which tw_queue_destroy's contract orders against it.
thread_local bool t_hold_after_q = false;
std::atomic<int> g_hold{0};  // 1: the start read q and waits; 2: tw_queue_destroy is being called
std::atomic<unsigned> g_held{0}, g_held_ok{0};  // destroys with a held start; of those, starts that returned TW_OK

void hold_after_q() {
    t_hold_after_q = false;
    g_hold.store(1);
    const std::int64_t until = mono() + 20'000'000;
    while (g_hold.load() != 2 && mono() < until) sched_yield();
    const timespec ts{0, static_cast<long>(mono() % 200'000)};  // into destroy's steps
    nanosleep(&ts, nullptr);
}

void fuzz_point(char site) {
    if (t_hold_after_q && site == 'm') [[unlikely]] {
        hold_after_q();
        return;
    }
    thread_local std::uint64_t state =
        g_fuzz_seed.load(std::memory_order_relaxed) * 0x100000001B3ull + g_fuzz_threads.fetch_add(1) + 1;
    const std::uint64_t r = splitmix(state) ^ static_cast<unsigned char>(site);
    // The windows between a lookup and its CAS ('c' 'r' 'b' 'i' 'W' 'w'), the
    // own-clock readings ('k', rarer than the monotonic ones) and queue creation
    // ('q') get 8 times the rate.
    const unsigned n = g_fuzz.load(std::memory_order_relaxed) * (std::strchr("crbiWwkq", site) != nullptr ? 8 : 1);
    if (site == 'q' && n != 0 && (r & 7) == 0) {  // queue creation is rare: 1 in 8 sleeps 1..50 ms (a shutdown's length)
        const timespec ts{0, static_cast<long>(1'000'000 + (r >> 16) % 49'000'000)};
        nanosleep(&ts, nullptr);
        return;
    }
    const std::uint64_t u = r & 0xFFFF;  // 1/65536 units
    if (u < n) {  // park
        const timespec ts{0, static_cast<long>(200'000 + (r >> 16) % 1'800'000)};
        nanosleep(&ts, nullptr);
    } else if (u < 9 * n) {  // sleep briefly
        const timespec ts{0, static_cast<long>(1'000 + (r >> 16) % 49'000)};
        nanosleep(&ts, nullptr);
    } else if (u < 73 * n) {
        sched_yield();
    }
}

// ---- the record ----------------------------------------------------------------------
struct Log {
    std::vector<Event> ev;
    std::uint16_t ordinal;
};
std::mutex g_logs_mu;
std::vector<std::unique_ptr<Log>> g_logs;

thread_local Log* t_log = nullptr;
thread_local std::uint8_t t_kind = kWorker;
thread_local int t_queue = -1;       // inside tw_queue_run of this queue
thread_local std::uint8_t t_op = 0;  // 1 + Kind of the call this thread is inside

Log& log() {
    if (t_log == nullptr) {
        std::lock_guard<std::mutex> lock(g_logs_mu);
        g_logs.push_back(std::make_unique<Log>());
        g_logs.back()->ordinal = static_cast<std::uint16_t>(g_logs.size());
        t_log = g_logs.back().get();
    }
    return *t_log;
}
void record(Event e) {
    Log& l = log();
    e.thread = l.ordinal;
    e.tkind = t_kind;
    if (e.queue < 0) e.queue = static_cast<std::int16_t>(t_queue);
    l.ev.push_back(e);
}

// ---- timers ------------------------------------------------------------------------
struct TM {
    std::uint32_t key = 0;
    TimerInfo info;
    std::atomic<std::uint64_t> id{0};
    std::atomic<int> released{0};
    int rearms = 0;  // one-shot: times its callback re-arms it
    bool self_reset = false;  // DELAY: its callback resets it (1 ms)
    bool self_stop = false;   // periodic: its callback stops it sometimes
};

struct World {
    tw_runtime* rt = nullptr;
    unsigned features = 0;
    std::vector<tw_queue*> queues;
    std::mutex tm_mu;
    std::vector<std::unique_ptr<TM>> tms;  // by key - 1
    static constexpr unsigned kPool = 256;
    std::atomic<TM*> pool[kPool] = {};
    static constexpr unsigned kDead = 64;
    std::atomic<TM*> dead[kDead] = {};
    std::atomic<unsigned> dead_next{0};
    std::atomic<bool> stop{false};
    tw_queue* nest_q = nullptr;
};
World* g_world = nullptr;

TM* new_tm(World& w) {
    std::lock_guard<std::mutex> lock(w.tm_mu);
    w.tms.push_back(std::make_unique<TM>());
    TM* t = w.tms.back().get();
    t->key = static_cast<std::uint32_t>(w.tms.size());
    return t;
}

thread_local std::mt19937_64* t_rng = nullptr;
std::mt19937_64& rng() {
    if (t_rng == nullptr) {
        thread_local std::mt19937_64 r(g_fuzz_seed.load() ^ 0xC0FFEE ^ reinterpret_cast<std::uintptr_t>(&r));
        t_rng = &r;
    }
    return *t_rng;
}

void on_release(void* arg) {
    TM* t = static_cast<TM*>(arg);
    Event e;
    e.kind = kRelease;
    e.key = t->key;
    e.t0 = mono();
    e.in_op = t_op;
    t->released.fetch_add(1);
    World& w = *g_world;
    w.dead[w.dead_next.fetch_add(1) % World::kDead].store(t);
    e.t1 = mono();
    record(e);
}

struct InOp {
    std::uint8_t saved;
    explicit InOp(Kind k) : saved(t_op) { t_op = static_cast<std::uint8_t>(k + 1); }
    ~InOp() { t_op = saved; }
};

void on_run(void* arg, tw_timer id) {
    TM* t = static_cast<TM*>(arg);
    World& w = *g_world;
    Event e;
    e.kind = kRun;
    e.key = t->key;
    e.id = id;
    e.t0 = mono();
    e.own0 = own_raw(t->info.clock);
    std::mt19937_64& r = rng();
    const std::uint8_t saved_op = t_op;
    t_op = 0;
    if (t->info.period == 0 && t->rearms > 0) {
        --t->rearms;  // runs of one timer never overlap: no race on rearms
        Event a;
        a.kind = kReset;
        a.key = t->key;
        a.id = id;
        a.flags = kInCb;
        a.arg = static_cast<std::int64_t>(r() % 3 == 0 ? r() % 2'000'000 : r() % 40'000'000);
        a.own0 = own_raw(t->info.clock);
        a.t0 = mono();
        a.result = tw_timer_reset(w.rt, id, static_cast<std::uint64_t>(a.arg));
        a.t1 = mono();
        a.own1 = own_raw(t->info.clock);
        record(a);
    } else if (t->self_reset && r() % 2 == 0) {
        Event a;
        a.kind = kReset;
        a.key = t->key;
        a.id = id;
        a.flags = kInCb;
        a.arg = 1'000'000;
        a.own0 = own_raw(t->info.clock);
        a.t0 = mono();
        a.result = tw_timer_reset(w.rt, id, 1'000'000);
        a.t1 = mono();
        a.own1 = own_raw(t->info.clock);
        record(a);
    } else if (t->self_stop && r() % 8 == 0) {
        Event a;
        a.kind = kStop;
        a.key = t->key;
        a.id = id;
        a.flags = static_cast<std::uint8_t>(kInCb | (r() % 2 ? kSync : 0));
        a.t0 = mono();
        {
            InOp in(kStop);
            a.result = (a.flags & kSync) ? tw_timer_stop_sync(w.rt, id) : tw_timer_stop(w.rt, id);
        }
        a.t1 = mono();
        record(a);
    }
    if (r() % 16 == 0) {  // a longer callback: stops and group stops land during runs
        const timespec ts{0, static_cast<long>(r() % 300'000)};
        nanosleep(&ts, nullptr);
    }
    t_op = saved_op;
    e.in_op = saved_op;
    e.own1 = own_raw(t->info.clock);
    e.t1 = mono();
    record(e);
}

// A callback that waits in tw_queue_run(q, 1, -1) of a queue nothing is due on (nest).
void on_nest(void* arg, tw_timer) {
    Event e;
    e.kind = kNested;
    e.t0 = mono();
    e.result = tw_queue_run(static_cast<tw_queue*>(arg), 1, -1);
    e.t1 = mono();
    record(e);
}

// ---- the producers -------------------------------------------------------------------
std::int64_t pick_delay(std::mt19937_64& r) {
    switch (r() % 10) {
        case 0: return 0;
        case 1:
        case 2:
        case 3: return static_cast<std::int64_t>(r() % 2'000'000);
        case 4:
        case 5:
        case 6:
        case 7: return static_cast<std::int64_t>(r() % 30'000'000);
        default: return static_cast<std::int64_t>(r() % 300'000'000);
    }
}

// Fills a spec for a new timer of a random kind; returns its TM.
TM* make_spec(World& w, std::mt19937_64& r, tw_timer_spec& spec, Event& e) {
    TM* t = new_tm(w);
    tw_timer_spec_init(&spec);
    TimerInfo& ti = t->info;
    const unsigned f = w.features;
    std::vector<int> clocks{TW_CLOCK_MONOTONIC};
    if (f & kFBoottime) clocks.push_back(TW_CLOCK_BOOTTIME);
    if (f & kFRealtime) clocks.push_back(TW_CLOCK_REALTIME);
    ti.clock = clocks[r() % clocks.size()];
    const unsigned kind = static_cast<unsigned>(r() % 10);
    if (kind < 3 && (f & kFPeriodic)) {
        ti.period = 2'000'000 + r() % 30'000'000;
        ti.policy = r() % 2 ? TW_PERIOD_SKIP : TW_PERIOD_BURST;
        t->self_stop = true;
    } else if (kind < 5 && (f & kFDelay)) {
        ti.period = r() % 4 == 0 ? 5'000'000'000ull : 2'000'000 + r() % 20'000'000;
        ti.policy = TW_PERIOD_DELAY;
        t->self_reset = true;
        t->self_stop = true;
    } else if ((f & kFRearm) && r() % 3 == 0) {
        t->rearms = static_cast<int>(1 + r() % 6);
    }
    if ((f & kFGroups) && r() % 2) ti.group = 1 + r() % 4;
    if (r() % 8 == 0) ti.leeway = r() % 5'000'000;
    if ((f & kFQueues) && !w.queues.empty() && r() % 3 == 0) ti.queue = static_cast<int>(r() % w.queues.size());
    spec.clock = ti.clock;
    spec.period_ns = ti.period;
    spec.period_policy = ti.policy;
    spec.group = ti.group;
    spec.leeway_ns = ti.leeway;
    spec.queue = ti.queue >= 0 ? w.queues[static_cast<std::size_t>(ti.queue)] : nullptr;
    spec.callback = on_run;
    spec.release = on_release;
    spec.arg = t;
    e.kind = kStart;
    e.key = t->key;
    // far (with steps): a quarter of the wall-clock timers are due in 2 .. 8 s: a
    // forward step crosses them, and one that misses it (a start overlapping
    // the step and its re-clock pass: issue 20, race 7) runs seconds late
    // (one that misses a step is late by at most its delay: a short one
    // stays under --late).
    const bool far = ti.clock == TW_CLOCK_REALTIME && (f & kFSteps) && (f & kFFar) && r() % 4 == 0;
    const auto delay = [&] { return far ? static_cast<std::int64_t>(2'000'000'000 + r() % 6'000'000'000) : pick_delay(r); };
    if (r() % 6 == 0) {
        e.flags |= kAbs;
        e.arg = static_cast<std::int64_t>(tw_now_ns_clock(ti.clock)) + delay();
        spec.deadline_ns = static_cast<std::uint64_t>(e.arg);
    } else {
        e.arg = delay();
        spec.delay_ns = static_cast<std::uint64_t>(e.arg);
    }
    return t;
}

void publish(World& w, std::mt19937_64& r, TM* t, std::uint64_t id) {
    t->id.store(id);
    TM* old = w.pool[r() % World::kPool].exchange(t);
    if (old != nullptr && old->released.load() == 0 && old->info.period != 0 && old->info.period < 1'000'000'000) {
        // evicted: stop it, so fast periodic timers do not pile up (slow ones live on:
        // their late runs are what the lateness rule watches)
        Event e;
        e.kind = kStop;
        e.key = old->key;
        e.id = old->id.load();
        e.t0 = mono();
        {
            InOp in(kStop);
            e.result = tw_timer_stop(w.rt, e.id);
        }
        e.t1 = mono();
        record(e);
    }
}

void op_start(World& w, std::mt19937_64& r) {
    tw_timer_spec spec;
    Event e;
    TM* t = make_spec(w, r, spec, e);
    tw_timer id = 0;
    e.own0 = own_raw(t->info.clock);
    e.t0 = mono();
    {
        InOp in(kStart);
        e.result = tw_timer_start_ex(w.rt, &spec, &id);
    }
    e.t1 = mono();
    e.own1 = own_raw(t->info.clock);
    e.id = id;
    record(e);
    if (e.result == TW_OK) publish(w, r, t, id);
}

void op_start_n(World& w, std::mt19937_64& r) {
    const std::size_t n = 1 + r() % 8;
    std::vector<tw_timer_spec> specs(n);
    std::vector<Event> evs(n);
    std::vector<TM*> tms(n);
    std::vector<tw_timer> out(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
        tms[i] = make_spec(w, r, specs[i], evs[i]);
        evs[i].flags |= kInBatch;
        evs[i].own0 = own_raw(tms[i]->info.clock);
    }
    const std::int64_t t0 = mono();
    {
        InOp in(kStart);
        (void)tw_timer_start_n(w.rt, specs.data(), n, out.data());
    }
    const std::int64_t t1 = mono();
    for (std::size_t i = 0; i < n; ++i) {
        Event& e = evs[i];
        e.t0 = t0;
        e.t1 = t1;
        e.own1 = own_raw(tms[i]->info.clock);
        e.id = out[i];
        e.result = out[i] != 0 ? TW_OK : -1;  // -1: failed, the hook ran (not EINVAL: the specs are valid)
        record(e);
        if (out[i] != 0) publish(w, r, tms[i], out[i]);
    }
}

TM* pick_live(World& w, std::mt19937_64& r) {
    for (int tries = 0; tries < 4; ++tries) {
        TM* t = w.pool[r() % World::kPool].load();
        if (t != nullptr && t->id.load() != 0) return t;
    }
    return nullptr;
}

void op_on_id(World& w, std::mt19937_64& r, TM* t, std::uint64_t id, bool stale) {
    Event e;
    e.key = t->key;
    e.id = id;
    if (stale) e.flags |= kStaleId;
    const unsigned what = static_cast<unsigned>(r() % 6);
    e.own0 = own_raw(t->info.clock);
    e.t0 = mono();
    switch (what) {
        case 0:
        case 1: {
            e.kind = kStop;
            InOp in(kStop);
            e.result = tw_timer_stop(w.rt, id);
            break;
        }
        case 2: {
            e.kind = kStop;
            e.flags |= kSync;
            InOp in(kStop);
            e.result = tw_timer_stop_sync(w.rt, id);
            break;
        }
        case 3:
        case 4: {
            e.kind = kReset;
            // Sometimes far in the future: if a reset (on a stale id, or on one that
            // goes stale during the call) moved the slot's next timer, that one is lost.
            e.arg = r() % (stale ? 2 : 10) == 0 ? 3'600'000'000'000 : pick_delay(r);
            e.result = tw_timer_reset(w.rt, id, static_cast<std::uint64_t>(e.arg));
            break;
        }
        default: {
            e.kind = kReset;
            e.flags |= kAbs;
            e.arg = static_cast<std::int64_t>(tw_now_ns_clock(t->info.clock)) + pick_delay(r);
            e.t0 = mono();
            e.result = tw_timer_reset_at(w.rt, id, static_cast<std::uint64_t>(e.arg));
            break;
        }
    }
    e.t1 = mono();
    e.own1 = own_raw(t->info.clock);
    record(e);
}

void op_batch(World& w, std::mt19937_64& r) {
    const std::size_t n = 1 + r() % 8;
    std::vector<TM*> tms;
    std::vector<tw_timer> ids;
    for (std::size_t i = 0; i < n; ++i)
        if (TM* t = pick_live(w, r)) {
            tms.push_back(t);
            ids.push_back(t->id.load());
        }
    if (ids.empty()) return;
    std::vector<int> res(ids.size(), 1);
    const bool stop = r() % 2 == 0;
    const std::int64_t delay = pick_delay(r);
    std::vector<std::int64_t> own0(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) own0[i] = own_raw(tms[i]->info.clock);
    const std::int64_t t0 = mono();
    if (stop) {
        InOp in(kStop);
        (void)tw_timer_stop_n(w.rt, ids.data(), ids.size(), res.data());
    } else {
        (void)tw_timer_reset_n(w.rt, ids.data(), ids.size(), static_cast<std::uint64_t>(delay), res.data());
    }
    const std::int64_t t1 = mono();
    for (std::size_t i = 0; i < ids.size(); ++i) {
        Event e;
        e.kind = stop ? kStop : kReset;
        e.flags = kInBatch;
        e.key = tms[i]->key;
        e.id = ids[i];
        e.arg = stop ? 0 : delay;
        e.t0 = t0;
        e.t1 = t1;
        e.own0 = own0[i];
        e.own1 = own_raw(tms[i]->info.clock);
        e.result = res[i];
        record(e);
    }
}

void op_group_stop(World& w, std::mt19937_64& r) {
    Event e;
    e.kind = kGroupStop;
    e.arg = static_cast<std::int64_t>(1 + r() % 4);
    if (r() % 2) e.flags |= kSync;
    e.t0 = mono();
    {
        InOp in(kGroupStop);
        e.result = static_cast<std::int32_t>(tw_group_stop(w.rt, static_cast<std::uint64_t>(e.arg), (e.flags & kSync) ? TW_SYNC : 0));
    }
    e.t1 = mono();
    record(e);
}

void producer(World& w, unsigned index, unsigned long seed) {
    t_kind = kProducer;
    std::mt19937_64 r(seed * 1000003ull + index);
    t_rng = &r;
    const unsigned f = w.features;
    while (!w.stop.load(std::memory_order_relaxed)) {
        const unsigned x = static_cast<unsigned>(r() % 100);
        if (x < 30) op_start(w, r);
        else if (x < 36 && (f & kFBatch)) op_start_n(w, r);
        else if (x < 42 && (f & kFBatch)) op_batch(w, r);
        else if (x < 48 && (f & kFGroups) && (index == 0 || !(f & kFGroupStopsOneThread))) op_group_stop(w, r);
        else if (x < 58 && (f & kFStale)) {
            TM* t = w.dead[r() % World::kDead].load();
            if (t != nullptr) op_on_id(w, r, t, t->id.load(), true);
        } else if (TM* t = pick_live(w, r)) {
            op_on_id(w, r, t, t->id.load(), false);
        }
        if (r() % 4 == 0) {
            const timespec ts{0, static_cast<long>(r() % 500'000)};
            nanosleep(&ts, nullptr);
        }
    }
}

void stepper(World& w, unsigned long seed) {
    t_kind = kStepper;
    std::mt19937_64 r(seed ^ 0x5EED);
    auto& shift = tickwheel::rt::test_hooks::realtime_shift_ns;
    while (!w.stop.load(std::memory_order_relaxed)) {
        const timespec ts{0, static_cast<long>(100'000'000 + r() % 500'000'000)};
        nanosleep(&ts, nullptr);
        Event e;
        e.kind = kShift;
        // Mostly forward (0.5 .. 6 s: a timer that misses one is seconds late), sometimes
        // back (0.2 .. 3 s: the timers wait).
        const std::int64_t cur = shift.load();
        e.arg = r() % 4 != 0 ? cur + static_cast<std::int64_t>(500'000'000 + r() % 5'500'000'000)
                             : cur - static_cast<std::int64_t>(200'000'000 + r() % 2'800'000'000);
        e.t0 = mono();
        e.own0 = shift.exchange(e.arg);
        e.t1 = mono();
        record(e);
    }
}

// qdestroy (issue 20, race 8): over and over, a queue D is created, a start
// of a one-shot bound to D (due in 0 .. 3 ms) is held by the fuzzer's hook
// after it read D (hold_after_q) while this thread calls
// tw_queue_destroy(D); then a queue E is created -- in D's slot, the table
// reuses it -- and run here for 20 ms, and destroyed. The contract: the start
// fails (TW_ESHUTDOWN, hook once, no run) or returns TW_OK with a timer the
// destroy cancels (hook once, on this thread); it never runs in E (the
// checker: "run ... on the wrong thread ... expected queue D"), and it is
// not left due with no hook until shutdown (LOST). Queue indices from 16 on
// (the record's queue numbers; 0 .. 2 are the runners' queues).
void destroyer(World& w, unsigned long seed) {
    t_kind = kProducer;
    std::mt19937_64 r(seed ^ 0xDE57);
    int next = 16;
    while (!w.stop.load(std::memory_order_relaxed)) {
        tw_queue* d = nullptr;
        if (tw_queue_create(w.rt, &d) != TW_OK) return;
        const int di = next;
        next = next >= 30000 ? 16 : next + 2;
        TM* t = new_tm(w);
        t->info.queue = di;
        tw_timer_spec spec;
        tw_timer_spec_init(&spec);
        spec.delay_ns = r() % 3'000'000;
        spec.queue = d;
        spec.callback = on_run;
        spec.release = on_release;
        spec.arg = t;
        g_hold.store(0);
        std::thread starter([&w, t, &spec] {
            t_kind = kProducer;
            Event e;
            e.kind = kStart;
            e.key = t->key;
            e.arg = static_cast<std::int64_t>(spec.delay_ns);
            tw_timer id = 0;
            e.own0 = own_raw(TW_CLOCK_MONOTONIC);
            e.t0 = mono();
            {
                InOp in(kStart);
                t_hold_after_q = true;
                e.result = tw_timer_start_ex(w.rt, &spec, &id);
                t_hold_after_q = false;
            }
            e.t1 = mono();
            e.own1 = own_raw(TW_CLOCK_MONOTONIC);
            e.id = id;
            t->id.store(id);
            record(e);
        });
        const std::int64_t until = mono() + 20'000'000;
        while (g_hold.load() != 1 && mono() < until) sched_yield();
        int held = 1;
        if (g_hold.compare_exchange_strong(held, 2)) {
            g_held.fetch_add(1);
            tw_queue_destroy(d);  // the start read d and has not returned (or just did)
            starter.join();
        } else {
            // The start did not get to its hold in 20 ms (a slow thread start
            // on a loaded machine): it may not have read d yet, and destroying
            // d now would free it under the start. It ends first.
            starter.join();
            tw_queue_destroy(d);
        }
        if (t->id.load() != 0) g_held_ok.fetch_add(1);
        tw_queue* e = nullptr;
        if (tw_queue_create(w.rt, &e) != TW_OK) return;
        t_kind = kRunner;
        t_queue = di + 1;
        const std::int64_t run_until = mono() + 20'000'000;
        while (mono() < run_until)
            if (tw_queue_run(e, 16, 5'000'000) < 0) break;
        t_queue = -1;
        t_kind = kProducer;
        tw_queue_destroy(e);
    }
}

void runner(World& w, int q) {
    t_kind = kRunner;
    std::mt19937_64 r(static_cast<std::uint64_t>(q) * 7919);
    for (;;) {
        t_queue = q;
        const bool forever = (w.features & kFQwait) != 0 && r() % 2 == 0;
        const int n = tw_queue_run(w.queues[static_cast<std::size_t>(q)], 1 + r() % 16,
                                   forever ? -1 : static_cast<std::int64_t>(r() % 5'000'000));
        t_queue = -1;
        if (n == TW_ESHUTDOWN) return;
        if (n < 0) {
            std::printf("VIOLATION: tw_queue_run of queue %d returned %d\n", q, n);
            std::fflush(stdout);
            std::_Exit(1);
        }
    }
}

}  // namespace

int run(double seconds, unsigned long seed, unsigned threads, unsigned features, unsigned fuzz, std::int64_t late_ns) {
    std::printf("tw_stress history: --seed %lu --seconds %g --threads %u --features %s --fuzz %u --late %" PRId64 "\n", seed,
                seconds, threads, feature_names(features).c_str(), fuzz, late_ns / 1'000'000);
    std::fflush(stdout);
    t_kind = kMain;
    {
        // A new record (the logs of an earlier round stay allocated: threads of
        // oneTBB's pool outlive runtimes and keep pointing at theirs).
        std::lock_guard<std::mutex> lock(g_logs_mu);
        for (auto& l : g_logs) std::vector<Event>().swap(l->ev);
    }
    g_fuzz_seed.store(seed);
    g_fuzz.store(fuzz);
    g_held.store(0);
    g_held_ok.store(0);
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.shards = 2;
    cfg.workers = 4;
    World w;
    w.features = features;
    g_world = &w;
    if (tw_runtime_create(&cfg, &w.rt) != TW_OK) {
        std::printf("tw_runtime_create failed\n");
        return 2;
    }
    Config cc;
    cc.late_ns = late_ns;
    cc.boot_offset = clock_raw(CLOCK_BOOTTIME) - mono();
    cc.real_offset = clock_raw(CLOCK_REALTIME) - mono();
    if (features & kFQueues)
        for (int i = 0; i < 3; ++i) {
            tw_queue* q = nullptr;
            if (tw_queue_create(w.rt, &q) == TW_OK) w.queues.push_back(q);
        }
    if (fuzz != 0 || (features & kFQdestroy)) tickwheel::rt::test_hooks::schedule_point.store(&fuzz_point);
    std::vector<std::thread> ts;
    for (std::size_t q = 0; q < w.queues.size(); ++q) ts.emplace_back(runner, std::ref(w), static_cast<int>(q));
    std::vector<std::thread> load;
    for (unsigned i = 0; i < threads; ++i) load.emplace_back(producer, std::ref(w), i, seed);
    if (features & kFSteps) load.emplace_back(stepper, std::ref(w), seed);
    if (features & kFQdestroy) load.emplace_back(destroyer, std::ref(w), seed);
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    w.stop.store(true);
    for (auto& t : load) t.join();
    cc.final_ns = mono();
    // Give the last short timers their time (and a stepped wall clock its last pass).
    std::this_thread::sleep_for(std::chrono::nanoseconds(late_ns + 400'000'000));
    cc.final_ns = std::max(cc.final_ns, mono() - late_ns / 2);
    // The end: a callback waiting in a nested run, queues being created, then shutdown.
    if (features & kFNest) {
        tw_queue* q = nullptr;
        if (tw_queue_create(w.rt, &q) == TW_OK) {
            w.nest_q = q;
            tw_timer id = 0;
            (void)tw_timer_start(w.rt, 0, 0, on_nest, q, &id);
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }
    std::atomic<bool> creating{true};
    std::atomic<int> creates{0};
    std::vector<std::pair<tw_queue*, std::int64_t>> created;
    std::thread creator;
    if (features & kFQcreate) {
        creator = std::thread([&] {
            t_kind = kProducer;
            while (creating.load()) {
                tw_queue* q = nullptr;
                const std::int64_t t0 = mono();
                creates.fetch_add(1);
                const int rc = tw_queue_create(w.rt, &q);
                if (rc == TW_OK) created.emplace_back(q, t0);
                if (rc == TW_ESHUTDOWN) break;
                if (created.size() > 100) {
                    tw_queue_destroy(created.front().first);
                    created.erase(created.begin());
                }
            }
        });
        // The shutdown begins while the creator is well into its loop (a
        // create in flight, often held 1 .. 50 ms by the fuzzer between its
        // shutdown check and the queue table: issue 20, race 6), not before
        // its first create.
        const std::int64_t until = mono() + 100'000'000;
        while (creates.load() < 2 && mono() < until) std::this_thread::sleep_for(std::chrono::microseconds(200));
        std::this_thread::sleep_for(std::chrono::microseconds(static_cast<long>(seed % 7) * 1000));
    }
    std::atomic<bool> done{false};
    std::atomic<int> stage{0};  // 0: in tw_runtime_shutdown; 1: joining the queue runners
    std::thread watchdog([&] {
        const std::int64_t until = mono() + 30'000'000'000;
        while (!done.load()) {
            if (mono() > until) {
                if (stage.load() == 0)
                    std::printf("VIOLATION: tw_runtime_shutdown did not return within 30 s%s\n",
                                (features & kFNest) ? " (a callback waits in tw_queue_run(q, 1, -1): shutdown must end that wait)" : "");
                else
                    std::printf("VIOLATION: a queue runner's tw_queue_run did not return within 30 s of the shutdown"
                                " (shutdown must end every wait with TW_ESHUTDOWN)\n");
                std::fflush(stdout);
                std::_Exit(1);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    });
    Event sd;
    sd.kind = kShutdown;
    sd.t0 = mono();
    {
        InOp in(kShutdown);
        sd.result = tw_runtime_shutdown(w.rt);
    }
    sd.t1 = mono();
    record(sd);
    stage.store(1);
    creating.store(false);
    if (creator.joinable()) creator.join();
    for (auto& t : ts) t.join();  // runners: TW_ESHUTDOWN ends every wait
    done.store(true);
    watchdog.join();
    tickwheel::rt::test_hooks::schedule_point.store(nullptr);
    tickwheel::rt::test_hooks::realtime_shift_ns.store(0);
    for (auto& [q, t0] : created) {
        Event e;
        e.kind = kQueueLeft;
        e.t1 = t0;
        e.t0 = mono();
        e.result = tw_queue_run(q, 1, 0);
        if (e.result == TW_ESHUTDOWN) continue;  // keep the record small: only the bad ones
        record(e);
    }
    // The record.
    std::vector<Event> all;
    std::size_t nstart = 0, nrun = 0;
    {
        std::lock_guard<std::mutex> lock(g_logs_mu);
        for (auto& l : g_logs) all.insert(all.end(), l->ev.begin(), l->ev.end());
    }
    for (const Event& e : all) {
        nstart += e.kind == kStart;
        nrun += e.kind == kRun;
    }
    std::vector<TimerInfo> infos;
    for (auto& t : w.tms) infos.push_back(t->info);
    const char* reports = std::getenv("TW_HISTORY_REPORTS");  // how many violations to print in full (default 4)
    const std::size_t bad = check(cc, infos, std::move(all), reports != nullptr ? static_cast<unsigned>(std::atoi(reports)) : 4);
    if (features & kFQdestroy)
        std::printf("tw_stress history: qdestroy: %u queue destroys with a bound start held in flight (%u of those starts returned TW_OK)\n",
                    g_held.load(), g_held_ok.load());
    std::printf("tw_stress history: %zu timers started, %zu runs, %zu events; %zu violation(s) (seed %lu)\n", nstart, nrun,
                [&] {
                    std::size_t n = 0;
                    for (auto& l : g_logs) n += l->ev.size();
                    return n;
                }(),
                bad, seed);
    for (tw_queue* q : w.queues) tw_queue_destroy(q);
    for (auto& [q, t0] : created) tw_queue_destroy(q);
    if (w.nest_q != nullptr) tw_queue_destroy(w.nest_q);
    tw_runtime_destroy(w.rt);
    return bad == 0 ? 0 : 1;
}

}  // namespace stress::history
