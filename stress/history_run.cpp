// SPDX-License-Identifier: MIT OR Apache-2.0
// tw_stress history: a schedule fuzzer and a history checker.
//
//   tw_stress history [--seconds S] [--seed X] [--threads T] [--features LIST]
//                     [--fuzz N] [--slack MS] [--freeze-site C] [--quiet-ms N]
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
// Timeliness (issue 31): a run must begin by
//     due + injected + stalls + slack
// where `due` is the latest time the model allows it to be due (the
// deadline of an arming that may be in force, rounded up to the tick, plus
// its leeway; a fixed-rate timer's next grid deadline; a DELAY timer's
// previous run's end plus the period; a wall-clock timer's deadline once
// the stepped clock surely stays past it, plus the 100 ms re-clock pass),
// `injected` is the sum of the delays the fuzzer injected into the
// runtime's own threads within [due, run] -- shard drivers ("tw-shard-N"),
// workers (oneTBB's "tw-tbb-worker", the pool's "tw-worker") and the
// queue runners (this program's threads inside tw_queue_run, and every
// callback's own slow part) -- never a caller's (producers, the destroyer,
// the main thread), `stalls` is how late the heartbeats woke within [due,
// run] (a thread pinned to each CPU sleeps 1 ms at a time; a wake-up over
// 0.5 ms late is the machine's load on that CPU; the worst CPU counts), and
// `slack` is --slack (50 ms in release, 100 ms under the sanitizers:
// measured on the loaded 2-core machine, load average 20..26, the largest
// lateness past due + injected + stalls over 10 seeds per preset of
// "all,-freeze,-lowprio,-query,spin" was 31.4 ms in release, 4.6 ms under
// ASan, 6.1 ms under TSan). Every injected delay is recorded
// with its thread's kind and interval in per-thread buffers (a sleep's or
// a park's measured length; a yield that gave the CPU away for over 20 us);
// the summary line "timeliness:" shows how far past due + injected the runs
// began (p50 .. max) -- the slack's measure. A timer that was due by the
// end of the load by that bound and never ran is LOST.
//
// Faults on the callers (the producers; never the runtime's threads):
//   freeze   one producer, from a random time in 15..60 % of the load, picks
//            a schedule point among those it has passed so far (by the seed;
//            --freeze-site C forces one: 'u' a caller holding a queue's
//            mutex, 'E' an eventfd read, ... site_name()
//            lists them) and parks there for good at its next passage: a
//            caller preempted for ever, stopped at a breakpoint or inside a
//            signal handler, whatever it holds. Its call never returns: the
//            record has it "in flight for ever" (kOpen), and the checker
//            lets it have acted or not (a start may or may not have made its
//            timer; a stop may or may not have stopped it; its release hook
//            may be missing) -- but every other timer is held to the bound.
//            Shutdown runs with the caller still frozen (the runtime's
//            threads never wait for a caller); as tw_runtime_shutdown may
//            wait for a start in flight (documented), a caller frozen inside
//            a start is thawed after shutdown waited 2 s. Otherwise the
//            frozen caller is thawed only after the checker ran (its call
//            then returns into a shut-down runtime), and joined.
//   lowprio  one producer at nice 19 or SCHED_IDLE (by the seed), pinned to
//            one CPU where a spinner thread is busy 200 ms in every 300 ms.
//            "spin" (not in "all"): the same spinner beside a producer at
//            its normal priority (what the spinner alone costs).
//   fork     three times, a producer fork()s at its next schedule point
//            after a random time (inside a library call, whatever other
//            threads hold); the child creates a runtime, starts a 1 ms
//            timer, must see it fire within 1 s, shuts down and exits 0; the
//            parent reports a child that exits otherwise or is still running
//            after 5 s ("VIOLATION (fork)" with the child's last step). Off
//            under the sanitizers (their allocators are not fork-safe while
//            other threads allocate: fork_test.cpp).
// And three more, also in "all":
//   query    tw_timer_query on live and stale ids (and from a timer's own
//            callback), its answer checked against the model: TW_ENOENT
//            only once something could have ended the timer, never found
//            after its release hook began, clock/period/leeway/group as
//            started, runs no more than may have begun, RUNNING iff a run
//            may be in progress (always, from its own callback), PENDING's
//            deadline not yet reached, DUE's reached (a one-shot or DELAY
//            timer), the deadline one an arming in force allows.
//   quiet    every 1.5 .. 2.5 s the load pauses for 600 ms (--quiet-ms): a
//            producer stops the fast periodic timers, waits 330 ms for the
//            short ones to fire, and then starts single short timers (some
//            as a far one reset short), 20 .. 90 ms apart, into a sparse
//            wheel: its driver sleeps long, and a message that files an
//            earlier deadline must wake it (the dense load hides a lost
//            wake-up: something else wakes the driver within a tick).
//   resets   a plain one-shot due in 1 .. 3 ms is reset 150 .. 250 ms
//            later just as its shard hands it to a worker (the worker finds
//            it later and re-files it; test hook 'L', where 1 in 4 parks),
//            then at once to 0 (3 % of the load's operations, and half of
//            the quiet phases' probes): it must run now.
// The checker also has a rule for one-shots ("MISSED"): a one-shot released
// with no stop, group stop or shutdown must have had a run, begun after its
// last arming was called, that reached that arming's deadline (a claim that
// runs an item a reset moved later ran it early for the reset, and the
// reset's own run never came).
//
// TW_HISTORY_REPORTS=N in the environment prints N violations in full (default 4).
//
// --features picks what is mixed: "all" (default) or a comma list of
//   boottime realtime steps periodic delay groups rearm queues batch stale
//   nest qcreate qwait qdestroy far freeze lowprio fork query quiet resets   (in "all")
//   gstop1 spin                                                             (not in "all")
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
// timers are due in 2 .. 8 s (they must follow every step). (--late, the
// flat, load-proof allowance of 2.5 s before issue 31, is gone: see
// "Timeliness" above.)
//
// Issue 31's experiments on 10eb9ed (release, -s 6; stress/history_hunt.sh
// -p PRESET; docs/site/development.md has the table):
//   a  bug 1, a caller frozen holding its shard's token: -p token, seeds 1
//      and 2: "LATE: run at 10512.052 ms, 5259.431 ms after the latest time
//      it was due .. past the bound by 2734.341 ms"; "tw_runtime_shutdown did
//      not return within 15 s while a caller was frozen at 'T' .. inside stop"
//      -p lowprio: seed 3 of 1..4: "LATE: .. 131.921 ms after .. past the
//      bound by 11.077 ms" (a SCHED_IDLE caller beside the spinner)
//   b  no wake-up from a token holder's earlier deadline: -p wakeup, 6 of 6
//      seeds: "LATE: run at 6923.697 ms, 98.124 ms after the latest time it
//      was due .. past the bound by 43.896 ms" (seed 3); a fork child's timer
//      that never fired (seed 1)
//      a claim that ignores a reset to a later deadline: -p claim, 6 of 6:
//      "MISSED: its last arming (reset at [720.828 .. 720.829 ms], TW_OK ..)
//      was never served"
//   c  bug 3 (a reset to 0 while a worker re-files a claim): -p refile: not
//      caught (the window is narrow; a forced test shows it)
//   found: a caller frozen inside a stop or reset of a queue-bound timer
//      holds the queue's mutex, which the driver's deliver() takes ("all",
//      seed 1: "tw_runtime_shutdown did not return within 15 s while a caller
//      was frozen at 'E' .. inside group_stop"); a query overlapping a reset
//      of a due clocked timer says DUE with the reset's future deadline.
//
// Replaying a race: revert the fix, rebuild tw_stress, and run
//   stress/history_hunt.sh -f FEATURES -s 6 -n 10
// which runs seeds 1..10 and names the first that fails with its first
// complaint (the full report, with the calls on the offending timer's slot,
// stays in /tmp). Issue 20's eight fixes, each reverted alone on 4dfd216
// (1.5.0 with every fix; -s 6, seeds 1..10, the mix of the race, then
// "all"; docs/site/development.md has the table with the forced tests;
// these were measured with the flat --late of 2.5 s):
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
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
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
                            {"freeze", kFFreeze},     {"lowprio", kFLowPrio},   {"fork", kFFork},
                            {"query", kFQuery},       {"quiet", kFQuiet},       {"resets", kFResets},
                            {"gstop1", kFGroupStopsOneThread}, {"far", kFFar}, {"spin", kFSpin}};
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
/// An event of `kind` on timer `key` (its id and flags if known); the
/// caller fills in the rest.
Event event_of(std::uint8_t kind, std::uint32_t key, std::uint64_t id = 0, std::uint8_t flags = 0) {
    Event e;
    e.kind = kind;
    e.key = key;
    e.id = id;
    e.flags = flags;
    return e;
}
std::int64_t own_raw(int clock) {
    return clock_raw(clock == TW_CLOCK_BOOTTIME ? CLOCK_BOOTTIME : clock == TW_CLOCK_REALTIME ? CLOCK_REALTIME : CLOCK_MONOTONIC);
}
void sleep_for_ns(std::int64_t ns) {
    if (ns <= 0) return;
    const timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    nanosleep(&ts, nullptr);
}

std::uint64_t splitmix(std::uint64_t& x) {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// ---- the record ----------------------------------------------------------------------
// Per-thread buffers: each thread appends to its own Log under the Log's
// mutex (uncontended; a watchdog that finds the end hung reads a snapshot
// under it while threads still run).
struct Log {
    std::mutex mu;
    std::vector<Event> ev;
    std::vector<Event> open;     // the calls this thread is inside now (kOpen if they never return)
    std::vector<Delay> delays;   // the delays the fuzzer injected into this thread
    std::uint16_t ordinal = 0;
};
std::mutex g_logs_mu;
std::vector<std::unique_ptr<Log>> g_logs;

thread_local Log* t_log = nullptr;
thread_local std::uint8_t t_kind = kWorker;  // set by the harness's threads; kWorker: a library thread
thread_local int t_queue = -1;       // inside tw_queue_run of this queue
thread_local std::uint8_t t_op = 0;  // 1 + Kind of the call this thread is inside
thread_local int t_producer = -1;    // a producer's index (the callers the faults pick from)
thread_local bool t_in_cb = false;   // inside one of the fuzzer's callbacks (a worker's or a runner's work)

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
    std::lock_guard<std::mutex> lock(l.mu);
    l.ev.push_back(e);
}

// The calls a producer is about to make (t0, own0 and the arguments set):
// if the thread never returns (frozen, or hung), the record has them as
// calls in flight for ever (kOpen). close_calls() when the call returned.
void open_calls(const Event* es, std::size_t n) {
    Log& l = log();
    std::lock_guard<std::mutex> lock(l.mu);
    l.open.clear();
    for (std::size_t i = 0; i < n; ++i) {
        Event e = es[i];
        e.thread = l.ordinal;
        e.tkind = t_kind;
        e.flags |= kOpen;
        e.t1 = e.own1 = kNever;
        e.result = INT32_MIN;
        l.open.push_back(e);
    }
}
void close_calls() {
    Log& l = log();
    std::lock_guard<std::mutex> lock(l.mu);
    l.open.clear();
}

// What kind of thread this is, for the timeliness bound: the runtime's own
// threads (its shard drivers "tw-shard-N", its workers -- oneTBB's, named
// "tw-tbb-worker" once they ran a task of ours, or the pool's "tw-worker" --
// and the queue runners, which run callbacks) against the callers. A
// library thread never sets t_kind; its name tells a driver from a worker
// (read each time: a oneTBB worker carries its creator's name, "tw-shard-N",
// until it names itself; both count).
std::uint8_t thread_class() {
    if (t_in_cb) return t_kind == kRunner ? Delay::kRunnerThread : Delay::kLibWorker;
    switch (t_kind) {
        case kRunner: return Delay::kRunnerThread;
        case kProducer:
        case kMain:
        case kStepper: return Delay::kCaller;
        default: break;
    }
    char name[17] = {};
    prctl(PR_GET_NAME, name, 0, 0, 0);
    return std::strncmp(name, "tw-shard-", 9) == 0 ? Delay::kDriver : Delay::kLibWorker;
}
void note_delay(std::int64_t t0, std::int64_t t1, char site, char what) {
    Delay d;
    d.t0 = t0;
    d.t1 = t1;
    d.cls = thread_class();
    d.site = site;
    d.what = what;
    Log& l = log();
    d.thread = l.ordinal;
    std::lock_guard<std::mutex> lock(l.mu);
    l.delays.push_back(d);
}
void injected_sleep(std::int64_t ns, char site, char what) {
    const std::int64_t t0 = mono();
    sleep_for_ns(ns);
    note_delay(t0, mono(), site, what);
}

// ---- the schedule fuzzer ---------------------------------------------------------
std::atomic<unsigned> g_fuzz{0};  // N of --fuzz
std::atomic<std::uint64_t> g_fuzz_seed{1};
std::atomic<unsigned> g_fuzz_threads{0};

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
    const std::int64_t t0 = mono();
    g_hold.store(1);
    const std::int64_t until = mono() + 20'000'000;
    while (g_hold.load() != 2 && mono() < until) sched_yield();
    sleep_for_ns(mono() % 200'000);  // into destroy's steps
    note_delay(t0, mono(), 'm', 'h');  // (a caller's: never counted)
}

// ---- the faults on callers (freeze, lowprio, fork) -------------------------------
// freeze: producer `freeze_who`, from time `freeze_at` on, picks a site
// among the schedule points it has passed so far (by the seed, or
// --freeze-site) and parks for good at its next passage there: a caller
// stopped at a breakpoint, in a signal handler, or preempted for ever --
// inside whatever window that point is in (a token held, a lock, a hazard,
// a registration). It is thawed only after the checker ran.
// fork: producers fork_who[i] fork() at their first schedule point after
// fork_at[i]; the child creates a runtime and must fire a timer within 1 s.
struct Faults {
    int freeze_who = -1;
    std::int64_t freeze_at = kNever;
    char freeze_forced = 0;
    std::atomic<bool> frozen{false};
    std::int64_t frozen_t = 0;  // written by the frozen thread before `frozen`
    char frozen_site = 0;
    std::string sites_seen;     // the sites the freezer had passed when it picked (written before freeze_pick)
    std::atomic<char> freeze_pick{0};  // the site it picked
    Log* frozen_log = nullptr;
    std::string frozen_call;    // what it was inside (written before `frozen`)
    std::mutex mu;
    std::condition_variable cv;
    bool thaw = false;
    std::atomic<bool> thawed{false};

    static constexpr unsigned kMaxForks = 8;
    unsigned forks = 0;
    int fork_who[kMaxForks] = {};
    std::int64_t fork_at[kMaxForks] = {};
    std::atomic<unsigned> fork_next{0};

    int lowprio_who = -1;
    int lowprio_mode = 0;  // 1 nice 19, 2 SCHED_IDLE, 0 (spin) none
    int lowprio_cpu = -1;
};
Faults* g_faults = nullptr;
cpu_set_t g_all_cpus;

thread_local std::uint64_t t_sites[4] = {};  // the schedule points this producer passed (a bit per site)
thread_local unsigned t_points = 0;
thread_local char t_freeze_site = 0;         // the site this producer freezes at the next passage of
thread_local bool t_freeze_armed = false;

std::string open_calls_of(Log* l);

void freeze_here(char site) {
    Faults& f = *g_faults;
    t_freeze_site = 0;
    const std::int64_t t = mono();
    note_delay(t, kNever, site, 'F');  // (a caller's: never counted)
    f.frozen_t = t;
    f.frozen_site = site;
    f.frozen_log = &log();
    f.frozen_call = open_calls_of(f.frozen_log);
    f.frozen.store(true);
    std::unique_lock<std::mutex> lock(f.mu);
    f.cv.wait(lock, [&] { return f.thaw; });
}

// ---- fork: the child ----
std::atomic<int> g_child_fired{0};
void child_callback(void*, tw_timer) { g_child_fired.store(1); }

[[noreturn]] void fork_child(int fd) {
    // One thread (this one, inside a library call at a schedule point), a
    // copy of the parent's memory. An ordinary program: no fuzzer.
    tickwheel::rt::test_hooks::schedule_point.store(nullptr);
    auto say = [fd](char c) { (void)!write(fd, &c, 1); };
    alarm(30);  // never outlive the parent's watch
    say('c');
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.shards = 1;
    cfg.workers = 1;
    tw_runtime* rt = nullptr;
    if (tw_runtime_create(&cfg, &rt) != TW_OK) {
        say('x');
        _exit(10);
    }
    say('C');
    tw_timer id = 0;
    const std::int64_t t0 = mono();
    if (tw_timer_start(rt, 1'000'000, 0, child_callback, nullptr, &id) != TW_OK) {
        say('y');
        _exit(11);
    }
    say('S');
    while (g_child_fired.load() == 0 && mono() - t0 < 1'000'000'000) sleep_for_ns(1'000'000);
    if (g_child_fired.load() == 0) {
        say('z');
        _exit(12);
    }
    say('F');
    if (tw_runtime_shutdown(rt) != TW_OK) _exit(13);
    say('D');
    _exit(0);
}

struct Child {
    pid_t pid = 0;
    int fd = -1;
    std::int64_t t = 0;
    char site = 0;
    int producer = -1;
    std::string stages;
    int status = 0;
    bool done = false, killed = false;
};
std::mutex g_children_mu;
std::vector<Child> g_children;
std::atomic<unsigned> g_fork_failed{0};

void fork_here(char site) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        g_fork_failed.fetch_add(1);
        return;
    }
    const std::int64_t t0 = mono();
    const pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        fork_child(fds[1]);
    }
    close(fds[1]);
    note_delay(t0, mono(), site, 'f');  // (a caller's: never counted)
    if (pid < 0) {
        close(fds[0]);
        g_fork_failed.fetch_add(1);
        return;
    }
    (void)fcntl(fds[0], F_SETFL, O_NONBLOCK);
    Child c;
    c.pid = pid;
    c.fd = fds[0];
    c.t = t0;
    c.site = site;
    c.producer = t_producer;
    std::lock_guard<std::mutex> lock(g_children_mu);
    g_children.push_back(c);
}

// A producer at a schedule point: the faults' triggers.
void caller_point(char site) {
    const auto c = static_cast<unsigned char>(site);
    t_sites[c >> 6] |= std::uint64_t{1} << (c & 63);
    Faults& f = *g_faults;
    if (t_freeze_site != 0 && site == t_freeze_site) {
        freeze_here(site);
        return;
    }
    if ((++t_points & 15) != 0) return;  // the clock every 16th point
    const std::int64_t now = mono();
    if (t_producer == f.freeze_who && !t_freeze_armed && now >= f.freeze_at) {
        t_freeze_armed = true;
        std::string seen;
        for (unsigned i = 1; i < 256; ++i)
            if (t_sites[i >> 6] & (std::uint64_t{1} << (i & 63))) seen.push_back(static_cast<char>(i));
        f.sites_seen = seen;
        if (f.freeze_forced != 0) {
            t_freeze_site = f.freeze_forced;
        } else {
            // Not 'o' by the seed's pick: a reset holding a boot-time or
            // wall-clock timer's deadline lock is the one place where a
            // caller may wait for another caller of the same timer (its
            // reset, from any thread -- a callback's too: runtime.hpp,
            // "Progress"), so a freeze there hangs what resets that timer
            // next, and shutdown with it, as documented. --freeze-site o
            // shows it.
            seen.erase(std::remove(seen.begin(), seen.end(), 'o'), seen.end());
            if (!seen.empty()) {
                std::uint64_t x = g_fuzz_seed.load() ^ 0xF2EE2Eull;
                t_freeze_site = seen[splitmix(x) % seen.size()];
            }
        }
        f.freeze_pick.store(t_freeze_site);
    }
    const unsigned i = f.fork_next.load(std::memory_order_relaxed);
    if (i < f.forks && f.fork_who[i] == t_producer && now >= f.fork_at[i]) {
        unsigned expect = i;
        if (f.fork_next.compare_exchange_strong(expect, i + 1)) fork_here(site);
    }
}

std::atomic<unsigned> g_claims_later{0};  // passages of 'L' (a claim found its timer's deadline moved later)

void fuzz_point(char site) {
    if (site == 'L') g_claims_later.fetch_add(1, std::memory_order_relaxed);
    if (t_hold_after_q && site == 'm') [[unlikely]] {
        hold_after_q();
        return;
    }
    if (t_producer >= 0 && g_faults != nullptr) caller_point(site);
    thread_local std::uint64_t state =
        g_fuzz_seed.load(std::memory_order_relaxed) * 0x100000001B3ull + g_fuzz_threads.fetch_add(1) + 1;
    const std::uint64_t r = splitmix(state) ^ static_cast<unsigned char>(site);
    // The windows between a lookup and its CAS ('c' 'r' 'b' 'i' 'W' 'w'), a
    // claim's re-file ('L'), the own-clock readings ('k', rarer than the
    // monotonic ones) and queue creation ('q') get 8 times the rate.
    const unsigned n = g_fuzz.load(std::memory_order_relaxed) * (std::strchr("crbiWwkqL", site) != nullptr ? 8 : 1);
    if (n == 0) return;
    // Queue creation is rare: 1 in 8 sleeps 1..50 ms (a shutdown's length).
    // ('q' is also a bound stop's or reset's window: those get the rate of a window.)
    if (site == 'q' && (r & 7) == 0 && t_op == 0 && !t_in_cb && (t_kind == kProducer || t_kind == kMain)) {
        injected_sleep(static_cast<std::int64_t>(1'000'000 + (r >> 16) % 49'000'000), site, 'q');
        return;
    }
    // A claim that found its timer moved later by a reset is rare (a few
    // hundred a run) and the window before its re-file is where a second
    // reset must still win (issue 31, bug 3): 1 in 4 parks there.
    if (site == 'L' && (r & 3) == 0) {
        injected_sleep(static_cast<std::int64_t>(200'000 + (r >> 16) % 1'800'000), site, 'p');
        return;
    }
    const std::uint64_t u = r & 0xFFFF;  // 1/65536 units
    if (u < n) {  // park
        injected_sleep(static_cast<std::int64_t>(200'000 + (r >> 16) % 1'800'000), site, 'p');
    } else if (u < 9 * n) {  // sleep briefly
        injected_sleep(static_cast<std::int64_t>(1'000 + (r >> 16) % 49'000), site, 's');
    } else if (u < 73 * n) {
        // A yield costs nothing unless another thread takes the CPU: such a
        // yield (over 20 us) is an injected delay too.
        const std::int64_t t0 = mono();
        sched_yield();
        const std::int64_t t1 = mono();
        if (t1 - t0 > 20'000) note_delay(t0, t1, site, 'y');
    }
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
    unsigned threads = 0;
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
    // quiet: until then the load pauses; the prober probes a sparse wheel.
    std::atomic<std::int64_t> quiet_until{0};
    std::atomic<int> prober{-1};
    std::atomic<unsigned> probes{0}, quiet_phases{0};
    std::atomic<bool> heartbeat_off{false};
    std::int64_t quiet_ns = 600'000'000;  // a quiet phase's length (--quiet-ms)
    static constexpr unsigned kMaxThreads = 64;
    std::atomic<Log*> plog[kMaxThreads] = {};  // the producers' logs (what a stuck one is inside)
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
    Event e = event_of(kRelease, t->key);
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

// tw_timer_query on `id` (of timer t), recorded with its answer.
void do_query(World& w, TM* t, std::uint64_t id, std::uint8_t flags) {
    Event e = event_of(kQuery, t->key, id, flags);
    tw_timer_info info;
    tw_timer_info_init(&info);
    e.own0 = own_raw(t->info.clock);
    e.t0 = mono();
    const bool caller = t_producer >= 0;
    if (caller) open_calls(&e, 1);
    e.result = tw_timer_query(w.rt, id, &info);
    if (caller) close_calls();
    e.t1 = mono();
    e.own1 = own_raw(t->info.clock);
    if (e.result == TW_OK) {
        e.q_state = static_cast<std::int8_t>(info.state);
        e.q_clock = static_cast<std::int8_t>(info.clock);
        e.q_deadline = info.deadline_ns;
        e.q_runs = static_cast<std::uint32_t>(info.runs);
        e.q_missed = static_cast<std::uint32_t>(info.missed);
        e.q_period = info.period_ns;
        e.q_leeway = info.leeway_ns;
        e.q_group = info.group;
    }
    record(e);
}

/// A reset of `t` (`id`) by its own callback, `delay_ns` from now, recorded.
void reset_in_callback(World& w, TM* t, std::uint64_t id, std::int64_t delay_ns) {
    Event a = event_of(kReset, t->key, id, kInCb);
    a.arg = delay_ns;
    a.own0 = own_raw(t->info.clock);
    a.t0 = mono();
    a.result = tw_timer_reset(w.rt, id, static_cast<std::uint64_t>(a.arg));
    a.t1 = mono();
    a.own1 = own_raw(t->info.clock);
    record(a);
}

void on_run(void* arg, tw_timer id) {
    TM* t = static_cast<TM*>(arg);
    World& w = *g_world;
    const bool saved_cb = t_in_cb;
    t_in_cb = true;
    Event e = event_of(kRun, t->key, id);
    e.t0 = mono();
    e.own0 = own_raw(t->info.clock);
    std::mt19937_64& r = rng();
    const std::uint8_t saved_op = t_op;
    t_op = 0;
    if ((w.features & kFQuery) && r() % 16 == 0) do_query(w, t, id, kInCb);
    if (t->info.period == 0 && t->rearms > 0) {
        --t->rearms;  // runs of one timer never overlap: no race on rearms
        reset_in_callback(w, t, id, static_cast<std::int64_t>(r() % 3 == 0 ? r() % 2'000'000 : r() % 40'000'000));
    } else if (t->self_reset && r() % 2 == 0) {
        reset_in_callback(w, t, id, 1'000'000);
    } else if (t->self_stop && r() % 8 == 0) {
        Event a = event_of(kStop, t->key, id, static_cast<std::uint8_t>(kInCb | (r() % 2 ? kSync : 0)));
        a.t0 = mono();
        {
            InOp in(kStop);
            a.result = (a.flags & kSync) ? tw_timer_stop_sync(w.rt, id) : tw_timer_stop(w.rt, id);
        }
        a.t1 = mono();
        record(a);
    }
    if (r() % 16 == 0)  // a longer callback: stops and group stops land during runs (a delay of a runtime thread)
        injected_sleep(static_cast<std::int64_t>(r() % 300'000), 'C', 'c');
    t_op = saved_op;
    e.in_op = saved_op;
    e.own1 = own_raw(t->info.clock);
    e.t1 = mono();
    t_in_cb = saved_cb;
    record(e);
}

/// A spec for `t` with the harness's callback and release hook.
tw_timer_spec spec_of(TM* t) {
    tw_timer_spec spec;
    tw_timer_spec_init(&spec);
    spec.callback = on_run;
    spec.release = on_release;
    spec.arg = t;
    return spec;
}


// A callback that waits in tw_queue_run(q, 1, -1) of a queue nothing is due on
// (nest): its worker is held (a delay of a runtime thread) until shutdown ends the wait.
void on_nest(void* arg, tw_timer) {
    const bool saved_cb = t_in_cb;
    t_in_cb = true;
    Event e;
    e.kind = kNested;
    e.t0 = mono();
    e.result = tw_queue_run(static_cast<tw_queue*>(arg), 1, -1);
    e.t1 = mono();
    note_delay(e.t0, e.t1, 'N', 'c');
    t_in_cb = saved_cb;
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
    // the step and its re-clock pass: issue 20, race 7) runs seconds late.
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

void op_stop_of(World& w, TM* t, std::uint8_t flags = 0) {
    Event e = event_of(kStop, t->key, t->id.load(), flags);
    e.t0 = mono();
    open_calls(&e, 1);
    {
        InOp in(kStop);
        e.result = tw_timer_stop(w.rt, e.id);
    }
    close_calls();
    e.t1 = mono();
    record(e);
}

void publish(World& w, std::mt19937_64& r, TM* t, std::uint64_t id) {
    t->id.store(id);
    TM* old = w.pool[r() % World::kPool].exchange(t);
    // evicted: stop it, so fast periodic timers do not pile up (slow ones live on:
    // their late runs are what the lateness rule watches)
    if (old != nullptr && old->released.load() == 0 && old->info.period != 0 && old->info.period < 1'000'000'000)
        op_stop_of(w, old);
}

// Starts the timer of `spec` (filled by make_spec, or by hand), records it, publishes it.
std::uint64_t start_one(World& w, std::mt19937_64& r, TM* t, tw_timer_spec& spec, Event& e) {
    tw_timer id = 0;
    e.own0 = own_raw(t->info.clock);
    e.t0 = mono();
    open_calls(&e, 1);
    {
        InOp in(kStart);
        e.result = tw_timer_start_ex(w.rt, &spec, &id);
    }
    close_calls();
    e.t1 = mono();
    e.own1 = own_raw(t->info.clock);
    e.id = id;
    record(e);
    if (e.result == TW_OK) publish(w, r, t, id);
    return e.result == TW_OK ? id : 0;
}

void op_start(World& w, std::mt19937_64& r) {
    tw_timer_spec spec;
    Event e;
    TM* t = make_spec(w, r, spec, e);
    (void)start_one(w, r, t, spec, e);
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
    for (Event& e : evs) e.t0 = t0;
    open_calls(evs.data(), n);
    {
        InOp in(kStart);
        (void)tw_timer_start_n(w.rt, specs.data(), n, out.data());
    }
    close_calls();
    const std::int64_t t1 = mono();
    for (std::size_t i = 0; i < n; ++i) {
        Event& e = evs[i];
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
    const unsigned what = static_cast<unsigned>(r() % ((w.features & kFQuery) ? 7 : 6));
    if (what == 6) {
        do_query(w, t, id, stale ? kStaleId : 0);
        return;
    }
    Event e;
    e.key = t->key;
    e.id = id;
    if (stale) e.flags |= kStaleId;
    e.own0 = own_raw(t->info.clock);
    switch (what) {
        case 0:
        case 1: e.kind = kStop; break;
        case 2:
            e.kind = kStop;
            e.flags |= kSync;
            break;
        case 3:
        case 4:
            e.kind = kReset;
            // Sometimes far in the future: if a reset (on a stale id, or on one that
            // goes stale during the call) moved the slot's next timer, that one is lost.
            e.arg = r() % (stale ? 2 : 10) == 0 ? 3'600'000'000'000 : pick_delay(r);
            break;
        default:
            e.kind = kReset;
            e.flags |= kAbs;
            e.arg = static_cast<std::int64_t>(tw_now_ns_clock(t->info.clock)) + pick_delay(r);
            break;
    }
    e.t0 = mono();
    open_calls(&e, 1);
    switch (what) {
        case 0:
        case 1: {
            InOp in(kStop);
            e.result = tw_timer_stop(w.rt, id);
            break;
        }
        case 2: {
            InOp in(kStop);
            e.result = tw_timer_stop_sync(w.rt, id);
            break;
        }
        case 3:
        case 4: {
            InOp in(kReset);
            e.result = tw_timer_reset(w.rt, id, static_cast<std::uint64_t>(e.arg));
            break;
        }
        default: {
            InOp in(kReset);
            e.result = tw_timer_reset_at(w.rt, id, static_cast<std::uint64_t>(e.arg));
            break;
        }
    }
    close_calls();
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
    std::vector<Event> evs(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
        Event& e = evs[i];
        e.kind = stop ? kStop : kReset;
        e.flags = kInBatch;
        e.key = tms[i]->key;
        e.id = ids[i];
        e.arg = stop ? 0 : delay;
        e.own0 = own_raw(tms[i]->info.clock);
    }
    const std::int64_t t0 = mono();
    for (Event& e : evs) e.t0 = t0;
    open_calls(evs.data(), evs.size());
    if (stop) {
        InOp in(kStop);
        (void)tw_timer_stop_n(w.rt, ids.data(), ids.size(), res.data());
    } else {
        InOp in(kReset);
        (void)tw_timer_reset_n(w.rt, ids.data(), ids.size(), static_cast<std::uint64_t>(delay), res.data());
    }
    close_calls();
    const std::int64_t t1 = mono();
    for (std::size_t i = 0; i < ids.size(); ++i) {
        Event& e = evs[i];
        e.t1 = t1;
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
    open_calls(&e, 1);
    {
        InOp in(kGroupStop);
        e.result = static_cast<std::int32_t>(tw_group_stop(w.rt, static_cast<std::uint64_t>(e.arg), (e.flags & kSync) ? TW_SYNC : 0));
    }
    close_calls();
    e.t1 = mono();
    record(e);
}

// quiet: the prober's part of a quiet phase. The other producers pause; it
// stops the fast periodic timers it can see, waits until the short timers
// of the load have fired (their delays are <= 300 ms), and then starts a few
// short one-shots on the sparse wheel -- some directly, some as a far timer
// reset to a short delay -- spaced out: a shard driver then sleeps long (up
// to its housekeeping cap, 100 ms, or until a far deadline), and a message
// that files an earlier deadline must wake it (a lost wake-up makes the
// probe late by the rest of that sleep; the load's dense wheel hides it).
void op_reset_race(World& w, std::mt19937_64& r, bool probe = false);

void probe(World& w, std::mt19937_64& r, std::int64_t until) {
    for (unsigned i = 0; i < World::kPool; ++i) {
        TM* t = w.pool[i].load();
        if (t != nullptr && t->id.load() != 0 && t->released.load() == 0 && t->info.period != 0 &&
            t->info.period < 1'000'000'000)
            op_stop_of(w, t);
    }
    sleep_for_ns(std::min<std::int64_t>(330'000'000, until - 270'000'000 - mono()));  // the load's short timers fire (delays <= 300 ms)
    while (mono() < until - 20'000'000 && !w.stop.load(std::memory_order_relaxed)) {
        w.probes.fetch_add(1);
        if ((w.features & kFResets) && r() % 2 == 0) {
            // (spaced out: a late run shows only while nothing else wakes the driver,
            // up to its 100 ms housekeeping sleep)
            op_reset_race(w, r, true);
            sleep_for_ns(static_cast<std::int64_t>(130'000'000 + r() % 40'000'000));
            continue;
        }
        TM* t = new_tm(w);
        t->info.probe = true;
        tw_timer_spec spec = spec_of(t);
        Event e = event_of(kStart, t->key);
        const std::int64_t d = static_cast<std::int64_t>(1'000'000 + r() % 7'000'000);
        const bool via_reset = r() % 2 == 0;
        e.arg = via_reset ? 10'000'000'000 : d;
        spec.delay_ns = static_cast<std::uint64_t>(e.arg);
        const std::uint64_t id = start_one(w, r, t, spec, e);
        if (id != 0 && via_reset) {
            Event a = event_of(kReset, t->key, id);
            a.arg = d;
            a.own0 = own_raw(TW_CLOCK_MONOTONIC);
            a.t0 = mono();
            open_calls(&a, 1);
            InOp in(kReset);
            a.result = tw_timer_reset(w.rt, id, static_cast<std::uint64_t>(d));
            close_calls();
            a.t1 = mono();
            a.own1 = own_raw(TW_CLOCK_MONOTONIC);
            record(a);
        }
        sleep_for_ns(static_cast<std::int64_t>(20'000'000 + r() % 15'000'000));
    }
}

// resets: a plain one-shot due in 1 .. 3 ms; just as it comes due (0 ..
// 0.3 ms past the start of its deadline's tick, when its shard hands it
// over) it is reset 150 .. 250 ms later (past a driver's 100 ms
// housekeeping sleep), and 0 .. 150 us later reset to 0. The first reset often lands while the shard hands the
// timer to a worker (a claim item): the worker finds it later and re-files
// it; the second lands then, and must make it run now -- not at the first
// reset's deadline (issue 31, bug 3: the re-file carried the stale later
// deadline and the Refile was dropped: the run came ~100 ms late).
void op_reset_race(World& w, std::mt19937_64& r, bool probe) {
    TM* t = new_tm(w);
    t->info.probe = probe;
    tw_timer_spec spec = spec_of(t);
    Event e = event_of(kStart, t->key);
    e.arg = static_cast<std::int64_t>(1'000'000 + r() % 2'000'000);
    spec.delay_ns = static_cast<std::uint64_t>(e.arg);
    const std::uint64_t id = start_one(w, r, t, spec, e);
    if (id == 0) return;
    // The shard pops it at the start of its deadline's tick (the deadline
    // rounded up to the resolution, which tw_timer_query tells): aim just after.
    std::int64_t when = e.t1 + e.arg;
    tw_timer_info info;
    tw_timer_info_init(&info);
    if (tw_timer_query(w.rt, id, &info) == TW_OK && info.deadline_ns != 0) when = static_cast<std::int64_t>(info.deadline_ns);
    when += static_cast<std::int64_t>(r() % 300'000);
    while (mono() < when) {
    }
    for (int i = 0; i < 2; ++i) {
        if (i == 1) {  // the second reset spread over the worker's claim and re-file
            const std::int64_t gap = mono() + static_cast<std::int64_t>(r() % 150'000);
            while (mono() < gap) {
            }
        }
        Event a = event_of(kReset, t->key, id);
        a.arg = i == 0 ? static_cast<std::int64_t>(150'000'000 + r() % 100'000'000) : 0;
        a.own0 = own_raw(TW_CLOCK_MONOTONIC);
        a.t0 = mono();
        open_calls(&a, 1);
        {
            InOp in(kReset);
            a.result = tw_timer_reset(w.rt, id, static_cast<std::uint64_t>(a.arg));
        }
        close_calls();
        a.t1 = mono();
        a.own1 = own_raw(TW_CLOCK_MONOTONIC);
        record(a);
    }
}

// lowprio / spin: this thread at nice 19 or SCHED_IDLE (mode 1, 2; 0: as it
// is), pinned to `cpu`, where a spinner runs.
void demote_self(int mode, int cpu) {
    const auto tid = static_cast<pid_t>(syscall(SYS_gettid));
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    (void)sched_setaffinity(tid, sizeof s, &s);
    if (mode == 1) (void)setpriority(PRIO_PROCESS, static_cast<id_t>(tid), 19);
    if (mode == 2) {
        sched_param p{};
        (void)sched_setscheduler(tid, SCHED_IDLE, &p);
    }
}
void spinner(World& w, int cpu) {
    t_kind = kStepper;
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    (void)sched_setaffinity(0, sizeof s, &s);
    while (!w.stop.load(std::memory_order_relaxed)) {
        const std::int64_t until = mono() + 200'000'000;  // busy 200 ms, then 100 ms off
        while (mono() < until && !w.stop.load(std::memory_order_relaxed)) {
        }
        sleep_for_ns(100'000'000);
    }
}

void producer(World& w, unsigned index, unsigned long seed, std::atomic<bool>* done) {
    t_kind = kProducer;
    t_producer = static_cast<int>(index);
    w.plog[index].store(&log());
    std::mt19937_64 r(seed * 1000003ull + index);
    t_rng = &r;
    const unsigned f = w.features;
    if (g_faults != nullptr && g_faults->lowprio_who == static_cast<int>(index))
        demote_self(g_faults->lowprio_mode, g_faults->lowprio_cpu);
    while (!w.stop.load(std::memory_order_relaxed)) {
        if (const std::int64_t q = w.quiet_until.load(std::memory_order_relaxed); q != 0) {
            const std::int64_t now = mono();
            if (now < q) {
                if (w.prober.load() == static_cast<int>(index)) {
                    w.prober.store(-1);
                    probe(w, r, q);
                } else {
                    sleep_for_ns(std::min<std::int64_t>(q - now, 20'000'000));
                }
                continue;
            }
        }
        const unsigned x = static_cast<unsigned>(r() % 100);
        if (x < 30) op_start(w, r);
        else if (x < 36 && (f & kFBatch)) op_start_n(w, r);
        else if (x < 42 && (f & kFBatch)) op_batch(w, r);
        else if (x < 48 && (f & kFGroups) && (index == 0 || !(f & kFGroupStopsOneThread))) op_group_stop(w, r);
        else if (x < 51 && (f & kFResets)) op_reset_race(w, r);
        else if (x < 58 && (f & kFStale)) {
            TM* t = w.dead[r() % World::kDead].load();
            if (t != nullptr) op_on_id(w, r, t, t->id.load(), true);
        } else if (TM* t = pick_live(w, r)) {
            op_on_id(w, r, t, t->id.load(), false);
        }
        if (r() % 4 == 0) sleep_for_ns(static_cast<std::int64_t>(r() % 500'000));
    }
    done->store(true);
}

// quiet: every 1.5 .. 2.5 s a quiet phase of 600 ms, probed by a producer.
void quieter(World& w, unsigned long seed) {
    t_kind = kStepper;
    std::mt19937_64 r(seed ^ 0x9017E7);
    while (!w.stop.load(std::memory_order_relaxed)) {
        const std::int64_t until = mono() + 1'500'000'000 + static_cast<std::int64_t>(r() % 1'000'000'000);
        while (mono() < until && !w.stop.load(std::memory_order_relaxed)) sleep_for_ns(10'000'000);
        if (w.stop.load()) break;
        w.prober.store(static_cast<int>(r() % w.threads));
        const std::int64_t q = mono() + w.quiet_ns;
        w.quiet_until.store(q);
        w.quiet_phases.fetch_add(1);
        while (mono() < q && !w.stop.load(std::memory_order_relaxed)) sleep_for_ns(10'000'000);
    }
}

// The machine's share: a harness thread per CPU (pinned to it) that sleeps
// 1 ms at a time and notes each wake-up later than 0.5 ms past its time. On
// a loaded machine (other processes, a sanitizer's threads, the lowprio
// spinner) a thread queued on that CPU waits as long; the bound adds the
// worst CPU's stalls (Delay::kMachine, site = the CPU's number). A library
// thread that sleeps through a deadline does not delay them.
void heartbeat(World& w, int cpu, int index) {
    t_kind = kStepper;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)sched_setaffinity(0, sizeof set, &set);
    while (!w.stop.load(std::memory_order_relaxed) || !w.heartbeat_off.load(std::memory_order_relaxed)) {
        const std::int64_t t0 = mono();
        sleep_for_ns(1'000'000);
        const std::int64_t t1 = mono();
        if (t1 - t0 > 1'500'000) {
            Delay d;
            d.t0 = t0 + 1'000'000;
            d.t1 = t1;
            d.cls = Delay::kMachine;
            d.site = static_cast<char>(index);
            d.what = 'M';
            Log& l = log();
            d.thread = l.ordinal;
            std::lock_guard<std::mutex> lock(l.mu);
            l.delays.push_back(d);
        }
    }
}

void stepper(World& w, unsigned long seed) {
    t_kind = kStepper;
    std::mt19937_64 r(seed ^ 0x5EED);
    auto& shift = tickwheel::rt::test_hooks::realtime_shift_ns;
    while (!w.stop.load(std::memory_order_relaxed)) {
        sleep_for_ns(static_cast<std::int64_t>(100'000'000 + r() % 500'000'000));
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
void destroyer(World& w, unsigned long seed, std::atomic<bool>* done) {
    t_kind = kProducer;
    std::mt19937_64 r(seed ^ 0xDE57);
    int next = 16;
    while (!w.stop.load(std::memory_order_relaxed)) {
        if (const std::int64_t q = w.quiet_until.load(std::memory_order_relaxed); q != 0 && mono() < q) {
            sleep_for_ns(std::min<std::int64_t>(q - mono(), 20'000'000));
            continue;
        }
        tw_queue* d = nullptr;
        if (tw_queue_create(w.rt, &d) != TW_OK) break;
        const int di = next;
        next = next >= 30000 ? 16 : next + 2;
        TM* t = new_tm(w);
        t->info.queue = di;
        tw_timer_spec spec = spec_of(t);
        spec.delay_ns = r() % 3'000'000;
        spec.queue = d;
        g_hold.store(0);
        std::thread starter([&w, t, &spec] {
            t_kind = kProducer;
            Event e = event_of(kStart, t->key);
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
        if (tw_queue_create(w.rt, &e) != TW_OK) break;
        t_kind = kRunner;
        t_queue = di + 1;
        const std::int64_t run_until = mono() + 20'000'000;
        while (mono() < run_until)
            if (tw_queue_run(e, 16, 5'000'000) < 0) break;
        t_queue = -1;
        t_kind = kProducer;
        tw_queue_destroy(e);
    }
    done->store(true);
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

// The fork children: each must exit 0 (it created a runtime and fired a
// timer within 1 s of starting it, then shut it down); one still running
// after `limit_ns` is killed and reported hung.
void reap_children(std::int64_t limit_ns, bool wait_all) {
    for (;;) {
        bool all = true;
        {
            std::lock_guard<std::mutex> lock(g_children_mu);
            for (Child& c : g_children) {
                if (c.done) continue;
                char buf[32];
                ssize_t n;
                while ((n = read(c.fd, buf, sizeof buf)) > 0) c.stages.append(buf, static_cast<std::size_t>(n));
                int st = 0;
                if (waitpid(c.pid, &st, WNOHANG) == c.pid) {
                    while ((n = read(c.fd, buf, sizeof buf)) > 0) c.stages.append(buf, static_cast<std::size_t>(n));
                    c.status = st;
                    c.done = true;
                } else if (mono() - c.t > limit_ns) {
                    kill(c.pid, SIGKILL);
                    (void)waitpid(c.pid, &st, 0);
                    c.status = st;
                    c.done = c.killed = true;
                } else {
                    all = false;
                }
                if (c.done) close(c.fd);
            }
        }
        if (all || !wait_all) return;
        sleep_for_ns(5'000'000);
    }
}

const char* stage_name(const std::string& s) {
    if (s.empty()) return "before its first step (fork's child handlers?)";
    switch (s.back()) {
        case 'c': return "inside tw_runtime_create";
        case 'x': return "tw_runtime_create failed";
        case 'C': return "inside tw_timer_start";
        case 'y': return "tw_timer_start failed";
        case 'S': return "waiting for its timer";
        case 'z': return "its timer did not fire within 1 s";
        case 'F': return "inside tw_runtime_shutdown";
        case 'D': return "done";
    }
    return "?";
}

// The record so far: every thread's events, and the calls in flight now (kOpen).
void gather(std::vector<Event>& all, std::vector<Delay>& delays) {
    std::lock_guard<std::mutex> lock(g_logs_mu);
    for (auto& l : g_logs) {
        std::lock_guard<std::mutex> ll(l->mu);
        all.insert(all.end(), l->ev.begin(), l->ev.end());
        all.insert(all.end(), l->open.begin(), l->open.end());
        delays.insert(delays.end(), l->delays.begin(), l->delays.end());
    }
}

std::string open_calls_of(Log* l) {
    std::string s;
    if (l == nullptr) return s;
    std::lock_guard<std::mutex> lock(l->mu);
    for (const Event& e : l->open) {
        if (!s.empty()) s += ", ";
        s += kind_name(e.kind);
        if (e.flags & kInBatch) s += " (batch)";
        if (e.flags & kStaleId) s += " (stale id)";
    }
    return s.empty() ? "no call of the API (between calls)" : s;
}
bool open_start_of(Log* l) {
    if (l == nullptr) return false;
    std::lock_guard<std::mutex> lock(l->mu);
    for (const Event& e : l->open)
        if (e.kind == kStart) return true;
    return false;
}

const char* site_name(char c) {
    switch (c) {
        case 'm': return "a CLOCK_MONOTONIC reading";
        case 'k': return "a boot-time or wall-clock reading";
        case 'c': return "a stop's lookup-to-CAS window";
        case 'r': return "a reset's lookup-to-CAS window";
        case 'W': return "stop_sync about to wait";
        case 'w': return "stop_sync's wait over";
        case 'i': return "a start with the timer indexed, its Insert not queued";
        case 'q': return "a bound stop/reset before the queue's mutex, or a queue create";
        case 'u': return "a bound stop/reset holding the queue's mutex, or a parker's wake";
        case 'T': return "a caller holding its shard's driver token (1.5; no such point since 1.7)";
        case 'p': return "a parker about to sleep";
        case 'e': return "an eventfd write";
        case 'E': return "an eventfd read";
    }
    return "a schedule point";
}

}  // namespace

int run(const RunOptions& o) {
    const double seconds = o.seconds;
    const unsigned long seed = o.seed;
    const unsigned threads = std::min(std::max(1u, o.threads), World::kMaxThreads);
    unsigned features = o.features;
    if (o.sanitized && (features & kFFork)) {
        std::printf("tw_stress history: fork is off under the sanitizers (their allocators are not fork-safe while"
                    " other threads allocate: fork_test.cpp); the release build runs it\n");
        features &= ~kFFork;
    }
    const std::int64_t slack_ns = o.slack_ns;
    std::printf("tw_stress history: --seed %lu --seconds %g --threads %u --features %s --fuzz %u --slack %" PRId64 "%s%c\n", seed,
                seconds, threads, feature_names(features).c_str(), o.fuzz, slack_ns / 1'000'000,
                o.freeze_site != 0 ? " --freeze-site " : "", o.freeze_site != 0 ? o.freeze_site : ' ');
    std::fflush(stdout);
    t_kind = kMain;
    {
        // A new record (the logs of an earlier round stay allocated: threads of
        // oneTBB's pool outlive runtimes and keep pointing at theirs).
        std::lock_guard<std::mutex> lock(g_logs_mu);
        for (auto& l : g_logs) {
            std::lock_guard<std::mutex> ll(l->mu);
            std::vector<Event>().swap(l->ev);
            std::vector<Event>().swap(l->open);
            std::vector<Delay>().swap(l->delays);
        }
    }
    {
        std::lock_guard<std::mutex> lock(g_children_mu);
        g_children.clear();
    }
    g_fuzz_seed.store(seed);
    g_fuzz.store(o.fuzz);
    g_held.store(0);
    g_held_ok.store(0);
    // A long hang is a violation; how long a hang is (a loaded machine, a sanitizer).
    const std::int64_t hang_ns = o.sanitized ? 30'000'000'000 : 15'000'000'000;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.shards = 2;
    cfg.workers = 4;
    World w;
    w.features = features;
    w.threads = threads;
    if (o.quiet_ms > 0) w.quiet_ns = std::int64_t{o.quiet_ms} * 1'000'000;
    g_world = &w;
    if (tw_runtime_create(&cfg, &w.rt) != TW_OK) {
        std::printf("tw_runtime_create failed\n");
        return 2;
    }
    Config cc;
    cc.slack_ns = slack_ns;
    cc.summary = true;
    cc.boot_offset = clock_raw(CLOCK_BOOTTIME) - mono();
    cc.real_offset = clock_raw(CLOCK_REALTIME) - mono();
    if (features & kFQueues)
        for (int i = 0; i < 3; ++i) {
            tw_queue* q = nullptr;
            if (tw_queue_create(w.rt, &q) == TW_OK) w.queues.push_back(q);
        }
    // The faults on callers, by the seed.
    auto faults = std::make_unique<Faults>();
    Faults& f = *faults;
    std::mt19937_64 fr(seed ^ 0xFA17ull);
    const std::int64_t load_t0 = mono();
    const auto at = [&](double lo, double hi) {
        const double u = static_cast<double>(fr() % 1'000'000) / 1e6;
        return load_t0 + static_cast<std::int64_t>((lo + (hi - lo) * u) * seconds * 1e9);
    };
    if (features & kFFreeze) {
        f.freeze_who = static_cast<int>(fr() % threads);
        f.freeze_at = at(0.15, 0.6);
        f.freeze_forced = o.freeze_site;
    }
    sched_getaffinity(0, sizeof g_all_cpus, &g_all_cpus);
    if (features & (kFLowPrio | kFSpin)) {
        f.lowprio_who = threads > 1 && f.freeze_who >= 0 ? (f.freeze_who + 1) % static_cast<int>(threads) : static_cast<int>(fr() % threads);
        f.lowprio_mode = (features & kFLowPrio) ? 1 + static_cast<int>(fr() % 2) : 0;
        std::vector<int> cpus;
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &g_all_cpus)) cpus.push_back(c);
        f.lowprio_cpu = cpus.empty() ? 0 : cpus[fr() % cpus.size()];
    }
    if (features & kFFork) {
        f.forks = 3;
        for (unsigned i = 0; i < f.forks; ++i) {
            int who = static_cast<int>(fr() % threads);
            if (who == f.lowprio_who && threads > 1) who = (who + 1) % static_cast<int>(threads);  // (its nice is the child's)
            f.fork_who[i] = who;
        }
        std::vector<std::int64_t> ts;
        for (unsigned i = 0; i < f.forks; ++i) ts.push_back(at(0.05, 0.9));
        std::sort(ts.begin(), ts.end());
        for (unsigned i = 0; i < f.forks; ++i) f.fork_at[i] = ts[i];
    }
    g_faults = &f;
    if (o.fuzz != 0 || (features & (kFQdestroy | kFFreeze | kFFork))) tickwheel::rt::test_hooks::schedule_point.store(&fuzz_point);
    std::vector<std::thread> hbs;
    for (int c = 0; c < CPU_SETSIZE && hbs.size() < 16; ++c)
        if (CPU_ISSET(c, &g_all_cpus)) {
            const int index = static_cast<int>(hbs.size());
            hbs.emplace_back([&w, c, index] { heartbeat(w, c, index); });
        }
    std::vector<std::thread> ts;
    for (std::size_t q = 0; q < w.queues.size(); ++q) ts.emplace_back(runner, std::ref(w), static_cast<int>(q));
    // The load's threads, each with a flag it sets when it returns.
    std::vector<std::thread> load;
    std::vector<std::unique_ptr<std::atomic<bool>>> done;
    std::vector<std::string> names;
    auto flag = [&] {
        done.push_back(std::make_unique<std::atomic<bool>>(false));
        return done.back().get();
    };
    for (unsigned i = 0; i < threads; ++i) {
        std::atomic<bool>* d = flag();
        load.emplace_back(producer, std::ref(w), i, seed, d);
        names.push_back("producer " + std::to_string(i));
    }
    if (features & kFQdestroy) {
        std::atomic<bool>* d = flag();
        load.emplace_back(destroyer, std::ref(w), seed, d);
        names.push_back("the queue destroyer");
    }
    auto simple = [&](auto fn, const char* name) {
        std::atomic<bool>* d = flag();
        load.emplace_back([fn, d] {
            fn();
            d->store(true);
        });
        names.push_back(name);
    };
    if (features & kFSteps) simple([&w, seed] { stepper(w, seed); }, "the wall-clock stepper");
    if (features & kFQuiet) simple([&w, seed] { quieter(w, seed); }, "the quiet-phase clock");
    if (f.lowprio_who >= 0) {
        const int cpu = f.lowprio_cpu;
        simple([&w, cpu] { spinner(w, cpu); }, "the spinner");
    }
    std::atomic<bool> reaping{true};
    std::thread reaper;
    if (features & kFFork)
        reaper = std::thread([&reaping] {
            while (reaping.load()) {
                reap_children(5'000'000'000, false);
                sleep_for_ns(10'000'000);
            }
        });

    sleep_for_ns(static_cast<std::int64_t>(seconds * 1e9));
    w.stop.store(true);
    const std::int64_t load_end = mono();
    cc.final_ns = load_end;
    // A frozen caller, and callers that wait for it, are left where they are.
    std::vector<bool> joined(load.size(), false);
    std::string stuck;
    bool hung = false;
    {
        const std::int64_t until = mono() + hang_ns;
        for (;;) {
            bool left = false;
            for (std::size_t i = 0; i < load.size(); ++i) {
                if (joined[i]) continue;
                if (done[i]->load()) {
                    load[i].join();
                    joined[i] = true;
                } else if (!(f.frozen.load() && static_cast<int>(i) == f.freeze_who)) {
                    left = true;
                }
            }
            if (!left) break;
            // With a caller frozen, 2 s: the others may wait for it (a queue destroy for a start in flight).
            if (mono() > (f.frozen.load() ? std::min(until, load_end + 2'000'000'000) : until)) {
                for (std::size_t i = 0; i < load.size(); ++i)
                    if (!joined[i] && !(f.frozen.load() && static_cast<int>(i) == f.freeze_who)) {
                        if (!stuck.empty()) stuck += "; ";
                        stuck += names[i];
                        if (i < threads) stuck += " (inside " + open_calls_of(w.plog[i].load()) + ")";
                    }
                hung = !f.frozen.load();
                break;
            }
            sleep_for_ns(5'000'000);
        }
    }
    auto fail_hung = [&](const std::string& what) {
        std::printf("VIOLATION: %s\n", what.c_str());
        std::printf("tw_stress history: the record up to now, judged without the rules of the end (release hooks, shutdown):\n");
        std::fflush(stdout);
        std::vector<Event> all;
        gather(all, cc.delays);
        cc.complete = false;
        cc.final_ns = std::min(cc.final_ns, mono() - slack_ns);
        std::vector<TimerInfo> infos;
        {
            std::lock_guard<std::mutex> lock(w.tm_mu);
            for (auto& t : w.tms) infos.push_back(t->info);
        }
        const char* reports = std::getenv("TW_HISTORY_REPORTS");
        const std::size_t bad = check(cc, infos, std::move(all), reports != nullptr ? static_cast<unsigned>(std::atoi(reports)) : 4);
        std::printf("tw_stress history: %zu more violation(s) (seed %lu)\n", bad, seed);
        std::fflush(stdout);
        std::_Exit(1);
    };
    if (hung) fail_hung("a caller thread did not return within " + std::to_string(hang_ns / 1'000'000'000) + " s of the load's end (no caller was frozen): " + stuck);
    // Give the last short timers their time (and a stepped wall clock its last pass).
    sleep_for_ns(slack_ns + 400'000'000);
    cc.final_ns = std::max(load_end, mono() - 100'000'000);
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
    // Shutdown, on its own thread, with the frozen caller (if any) still frozen:
    // the runtime's threads never wait for a caller. Shutdown itself may wait
    // for a start in flight (documented): a caller frozen inside a start is
    // thawed after 2 s of waiting.
    std::atomic<bool> sd_done{false};
    std::string notes;
    std::thread sd_thread([&] {
        t_kind = kMain;
        Event sd;
        sd.kind = kShutdown;
        sd.t0 = mono();
        {
            InOp in(kShutdown);
            sd.result = tw_runtime_shutdown(w.rt);
        }
        sd.t1 = mono();
        record(sd);
        sd_done.store(true);
    });
    auto thaw = [&] {
        {
            std::lock_guard<std::mutex> lock(f.mu);
            f.thaw = true;
        }
        f.cv.notify_all();
        f.thawed.store(true);
    };
    {
        const std::int64_t t0 = mono();
        bool thawed = false;
        while (!sd_done.load()) {
            const std::int64_t waited = mono() - t0;
            if (!thawed && f.frozen.load() && waited > 2'000'000'000 && open_start_of(f.frozen_log)) {
                notes += "  note: tw_runtime_shutdown waited 2 s for the frozen caller's start in flight (documented: it"
                         " waits for starts in flight); the caller was thawed then\n";
                thaw();
                thawed = true;
            }
            if (waited > hang_ns) {
                std::string what = "tw_runtime_shutdown did not return within " + std::to_string(hang_ns / 1'000'000'000) + " s";
                if ((features & kFNest) && !f.frozen.load())
                    what += " (a callback waits in tw_queue_run(q, 1, -1): shutdown must end that wait)";
                if (f.frozen.load())
                    what += std::string(" while a caller was frozen at '") + f.frozen_site + "' (" + site_name(f.frozen_site) +
                            ") inside " + f.frozen_call + (thawed ? ", thawed after 2 s" : "") +
                            ": the runtime's threads must not wait for a caller";
                fail_hung(what);
            }
            sleep_for_ns(2'000'000);
        }
    }
    sd_thread.join();
    creating.store(false);
    if (creator.joinable()) creator.join();
    {
        std::atomic<bool> runners_done{false};
        std::thread watchdog([&] {
            const std::int64_t until = mono() + hang_ns;
            while (!runners_done.load()) {
                if (mono() > until)
                    fail_hung("a queue runner's tw_queue_run did not return within " + std::to_string(hang_ns / 1'000'000'000) +
                              " s of the shutdown (shutdown must end every wait with TW_ESHUTDOWN)");
                sleep_for_ns(20'000'000);
            }
        });
        for (auto& t : ts) t.join();  // runners: TW_ESHUTDOWN ends every wait
        runners_done.store(true);
        watchdog.join();
    }
    w.heartbeat_off.store(true);
    for (auto& t : hbs) t.join();
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
    // The record (a frozen caller's calls in flight for ever).
    std::vector<Event> all;
    gather(all, cc.delays);
    std::size_t nstart = 0, nrun = 0, nevents = all.size();
    for (const Event& e : all) {
        nstart += e.kind == kStart;
        nrun += e.kind == kRun;
    }
    std::vector<TimerInfo> infos;
    {
        std::lock_guard<std::mutex> lock(w.tm_mu);
        for (auto& t : w.tms) infos.push_back(t->info);
    }
    const char* reports = std::getenv("TW_HISTORY_REPORTS");  // how many violations to print in full (default 4)
    std::size_t bad = check(cc, infos, std::move(all), reports != nullptr ? static_cast<unsigned>(std::atoi(reports)) : 4);
    // The faults: what happened.
    if (features & kFFreeze) {
        if (f.frozen.load())
            std::printf("tw_stress history: freeze: producer %d frozen at %.3f ms at '%c' (%s), inside %s; it had passed"
                        " \"%s\"%s\n",
                        f.freeze_who, static_cast<double>(f.frozen_t - load_t0) / 1e6, f.frozen_site, site_name(f.frozen_site),
                        f.frozen_call.c_str(), f.sites_seen.c_str(), f.thawed.load() ? " (thawed for shutdown)" : "");
        else
            std::printf("tw_stress history: freeze: producer %d did not freeze (site '%c' not passed after %.3f ms; it had passed \"%s\")\n",
                        f.freeze_who, f.freeze_pick.load() != 0 ? f.freeze_pick.load() : '-', static_cast<double>(f.freeze_at - load_t0) / 1e6,
                        f.sites_seen.c_str());
    }
    if (!stuck.empty()) std::printf("tw_stress history: note: still inside a call 2 s after the load ended, with a caller frozen: %s\n", stuck.c_str());
    std::printf("%s", notes.c_str());
    if (f.lowprio_who >= 0)
        std::printf("tw_stress history: %s: producer %d %s, pinned to CPU %d beside a spinner (busy 200 ms in 300)\n",
                    f.lowprio_mode != 0 ? "lowprio" : "spin", f.lowprio_who,
                    f.lowprio_mode == 1 ? "at nice 19" : f.lowprio_mode == 2 ? "at SCHED_IDLE" : "at its priority", f.lowprio_cpu);
    if (features & kFQuiet)
        std::printf("tw_stress history: quiet: %u quiet phases, %u probes\n", w.quiet_phases.load(), w.probes.load());
    std::printf("tw_stress history: %u claims found their timer's deadline moved later by a reset (test hook 'L')\n",
                g_claims_later.exchange(0));
    if (features & kFFork) {
        reaping.store(false);
        reaper.join();
        reap_children(5'000'000'000, true);
        std::lock_guard<std::mutex> lock(g_children_mu);
        unsigned ok = 0;
        for (const Child& c : g_children) {
            if (!c.killed && WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0) {
                ++ok;
                continue;
            }
            ++bad;
            std::printf("VIOLATION (fork): producer %d forked at %.3f ms at '%c' (%s); the child %s (%s; its steps \"%s\")\n",
                        c.producer, static_cast<double>(c.t - load_t0) / 1e6, c.site, site_name(c.site),
                        c.killed ? "was killed after 5 s" : WIFEXITED(c.status) ? ("exited " + std::to_string(WEXITSTATUS(c.status))).c_str()
                                                                               : ("died of signal " + std::to_string(WTERMSIG(c.status))).c_str(),
                        stage_name(c.stages), c.stages.c_str());
        }
        std::printf("tw_stress history: fork: %zu forks (%u failed to fork), %u children created a runtime and fired a timer within 1 s\n",
                    g_children.size(), g_fork_failed.load(), ok);
    }
    if (features & kFQdestroy)
        std::printf("tw_stress history: qdestroy: %u queue destroys with a bound start held in flight (%u of those starts returned TW_OK)\n",
                    g_held.load(), g_held_ok.load());
    std::printf("tw_stress history: %zu timers started, %zu runs, %zu events; %zu violation(s) (seed %lu)\n", nstart, nrun, nevents,
                bad, seed);
    std::fflush(stdout);
    // The frozen caller goes on now (its call returns into a shut-down runtime),
    // and so do the callers that waited for it.
    thaw();
    {
        const std::int64_t until = mono() + hang_ns;
        for (std::size_t i = 0; i < load.size(); ++i) {
            while (!done[i]->load() && mono() < until) sleep_for_ns(5'000'000);
            if (!done[i]->load()) {
                std::printf("tw_stress history: note: %s did not return within %" PRId64 " s of its thaw; exiting without"
                            " destroying the runtime\n", names[i].c_str(), hang_ns / 1'000'000'000);
                std::fflush(stdout);
                std::_Exit(bad == 0 ? 0 : 1);
            }
            if (!joined[i]) load[i].join();
        }
    }
    tickwheel::rt::test_hooks::schedule_point.store(nullptr);
    g_faults = nullptr;
    for (tw_queue* q : w.queues) tw_queue_destroy(q);
    for (auto& [q, t0] : created) tw_queue_destroy(q);
    if (w.nest_q != nullptr) tw_queue_destroy(w.nest_q);
    tw_runtime_destroy(w.rt);
    return bad == 0 ? 0 : 1;
}

}  // namespace stress::history
