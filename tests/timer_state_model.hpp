// SPDX-License-Identifier: MIT OR Apache-2.0
// An interleaving explorer for one timer record (tests/timer_state_test.cpp).
//
// The model holds what the runtime keeps about one record -- its control word
// (the real Word layout, moved only by the real decide_* functions unless a
// test substitutes a broken one), its full 24-bit generation, its wheel
// membership and deadline, whether its callable is alive, whether it is on
// the free stack or quarantined, the stop_sync() waiter count, the hazard
// slots -- plus the shard's inbox (an unordered multiset of messages: the
// handlers act on the current word, not on message order, see inbox.hpp) and
// the dispatcher's queue of FireItems.
//
// Every thread is a small program of the runtime's code, cut at its atomic
// steps: each load, CAS, owner store of the word, load of the generation or
// of the period, hazard publication/retraction, waiter count change, wake,
// message post, release hook start/end, generation bump, free-stack push is
// one step; what a thread computes from values it already holds is not.
//   * caller threads: stop / stop_sync (with its waiting loop) / reset /
//     start (a new occupant of the recycled record), on the current id, a
//     stale id (the previous occupant's generation) or the id they started;
//   * the shard: handles one message (Insert / Refile / Cancel, the last one
//     recycling the record: unlink, generation + 1, FREE, free stack), or
//     pops the record from its wheel (time jumps to its wheel deadline) and
//     runs TimerState::expire's load/CAS loop, or reclaims a quarantined
//     record no hazard holds;
//   * a worker: takes a FireItem, begin_run under a hazard, the callback
//     (optionally an operation on its own id: reset re-arms, stop,
//     stop_sync), finish_run, then release + recycle (last run), release +
//     RELEASING, hook, finish_stopped + Cancel (stopped during the run), or wake + Insert;
//   * shutdown: flag, stop the shard (at an idle point), wait until no
//     FireItem is queued or running, then the sweep (try_cancel with the
//     record's own generation, release, finish_cancel);
//   * the recycler (ABA): takes the freed record through all the
//     recyclings up to the 10-bit wrap in one step (quarantined there unless
//     the rule is switched off), then through the rest in one more, ending
//     with a new occupant whose word equals the first timer's.
// A blocked stop_sync() waits in std::atomic::wait: it is woken only by a
// wake() (notify_all) issued while it is blocked -- a change of the word
// without a wake leaves it blocked (a lost wakeup shows up as a deadlock).
//
// Exploration: a depth-first search over ALL interleavings, memoised on the
// whole state (the model is small and copied at every step; the memo keys
// are exact, no hash compaction). Everything the checks need about the past
// is kept in the state (per-timer facts: runs started/in progress, hooks,
// stops that returned true, ...), so checking each distinct state and
// transition once checks every interleaving; the number of interleavings
// (complete schedules) is counted over the memoised graph (exact below
// 2^53). explore(sc, /*memo=*/false) enumerates them one by one instead
// (the tests cross-check the two counts on small scenarios).
//
// One reduction: a hazard slot is read only by the quarantine's reclaimer.
// In a scenario where no record can be quarantined (no recycler, and its few
// recyclings cannot reach a 10-bit wrap), publishing or retracting a hazard
// is invisible to every other thread, so it is folded into its thread's
// neighbouring step (the ABA scenarios keep it a step of its own).
//
// What the model does not cover: memory ordering (it is sequentially
// consistent: the acquire/release pairs and the hazard/waiter fences are
// assumed to do their job), spurious failures of compare_exchange_weak (a
// retry is a later load), the free stack's own ABA tag and links, a start()
// whose Insert cannot be queued (unpublish), callbacks that throw, more than
// one record.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "runtime/timer_record.hpp"
#include "runtime/timer_state.hpp"

namespace tsm {

using tickwheel::tick_t;
using tickwheel::rt::CancelOutcome;
using tickwheel::rt::CancelStep;
using tickwheel::rt::Ctl;
using tickwheel::rt::ExpireOutcome;
using tickwheel::rt::ExpireStep;
using tickwheel::rt::FinishOutcome;
using tickwheel::rt::FinishStep;
using tickwheel::rt::Id;
using tickwheel::rt::Post;
using tickwheel::rt::ResetStep;
using tickwheel::rt::State;
using tickwheel::rt::Word;

/// The decisions the model moves the word with: the real ones, unless a test
/// substitutes a broken one to show that the checks catch it.
struct Decisions {
    CancelStep (*cancel)(Word, std::uint32_t, bool) = [](Word c, std::uint32_t g, bool p) {
        return tickwheel::rt::decide_cancel(c, g, p);
    };
    ResetStep (*reset)(Word, std::uint32_t, tick_t, bool, bool) = [](Word c, std::uint32_t g, tick_t t, bool p,
                                                                      bool own) {
        return tickwheel::rt::decide_reset(c, g, t, p, own);
    };
    ExpireStep (*expire)(Word, tick_t, std::uint64_t) = [](Word c, tick_t now, std::uint64_t period) {
        return tickwheel::rt::decide_expire(c, now, period);
    };
    bool (*begin_run)(Word, std::uint32_t) = [](Word c, std::uint32_t g) {
        return tickwheel::rt::decide_begin_run(c, g);
    };
    FinishStep (*finish_run)(Word, bool) = [](Word c, bool p) { return tickwheel::rt::decide_finish_run(c, p); };
    bool (*must_wait)(Word, std::uint32_t) = [](Word c, std::uint32_t g) { return tickwheel::rt::must_wait(c, g); };
};

/// Departures of the model from the runtime's code, for tests that show a
/// check failing (all false = the code as written).
struct Mutations {
    bool no_quarantine = false;       // the ABA rule off: a record whose 10-bit generation wraps is reused at once
    bool hazard_late = false;         // the hazard is published just before the CAS (after the generation check)
    bool no_wake_finish_run = false;  // finish_run does not wake waiters (Periodic / Rearmed)
    bool no_wake_finish_cancel = false;  // stop's finish_cancel does not wake waiters
    bool cancel_keeps_link = false;      // the shard's Cancel handler recycles without unlinking the record
    bool stop_sync_no_retry = false;     // stop_sync returns after its wait even if the timer is pending again
};

enum class OpK : std::uint8_t { None, Stop, StopSync, Reset, Start };
/// Which id an operation uses.
enum class Who : std::uint8_t {
    Cur,    // the first timer's id
    Stale,  // the previous occupant's id (generation - 1)
    Mine,   // the id this thread's own start() returned
    Own,    // (callback) the id of the running timer (the FireItem's)
};
struct Op {
    OpK k = OpK::None;
    Who who = Who::Cur;
    tick_t tick = 0;        // reset: the new deadline; start: the first deadline
    bool periodic = false;  // start
};
inline Op stop(Who w = Who::Cur) { return {OpK::Stop, w, 0, false}; }
inline Op stop_sync(Who w = Who::Cur) { return {OpK::StopSync, w, 0, false}; }
inline Op reset(tick_t t, Who w = Who::Cur) { return {OpK::Reset, w, t, false}; }
inline Op start(tick_t t, bool periodic) { return {OpK::Start, Who::Mine, t, periodic}; }

struct Scenario {
    std::string name;
    bool periodic = false;          // the first timer
    std::uint32_t gen = 5;          // its full generation
    tick_t deadline = 100;          // its deadline (filed in the wheel there)
    std::uint64_t period = 10;      // its period in ticks if periodic
    bool linked = true;             // false: its start()'s Insert is still queued
    std::vector<std::vector<Op>> callers;  // up to 3 caller threads, each a short program
    int shard_budget = 2;           // pops of the record the shard may make (-1: no shard)
    bool worker = true;
    Op callback{};                  // what the callback does (on Who::Own)
    bool shutdown = false;
    bool recycler = false;          // the ABA recycler (needs a shard)
    Decisions dec{};
    Mutations mut{};
};

struct Result {
    std::uint64_t states = 0;       // distinct states visited (memo) / steps executed (plain)
    std::uint64_t transitions = 0;  // transitions taken
    std::uint64_t terminals = 0;    // distinct terminal states (memo) / interleavings (plain)
    long double interleavings = 0;  // complete schedules
    bool aborted = false;           // plain mode: the cap was hit
    double seconds = 0;
    std::string violation;          // the first violation found, with its interleaving
};

// ---------------------------------------------------------------------------------
namespace detail {

constexpr int kMaxThreads = 6;
constexpr int kMaxMsgs = 8;
constexpr int kMaxItems = 6;
constexpr int kMaxFacts = 4;

enum class MsgT : std::uint8_t { Insert, Refile, Cancel };
struct Msg {
    MsgT type;
    std::uint32_t gen;
};
struct Item {
    std::uint32_t gen;
    tick_t due;
};

/// What happened to one timer (one occupant of the record), for the checks.
struct Facts {
    std::uint32_t gen = 0;
    std::uint8_t periodic = 0;
    std::uint8_t running = 0;  // from begin_run's CAS until the callback returned
    std::uint8_t hook_calls = 0;
    std::uint8_t hook_running = 0;
    std::uint8_t hook_done = 0;
    std::uint8_t stop_true = 0;  // stop()/stop_sync() calls that returned true
    std::uint8_t arms = 1;       // one-shot: its start, plus each re-arm from its own running callback
    std::uint8_t runs = 0;       // runs started (begin_run's CAS)
    std::uint8_t shutdown_cancels = 0;
    std::uint8_t recycled = 0;
    std::uint8_t sync_returned = 0;  // a stop_sync() (not from its own callback) returned
};

enum class Kind : std::uint8_t { Caller, Shard, Worker, Shutdown, Recycler };

/// An operation in progress (a caller's, a callback's, the shutdown sweep's).
struct OpRun {
    std::uint8_t pc = 0;
    std::uint8_t p = 0;    // periodic, as read
    std::uint8_t out = 0;  // CancelOutcome / reset: rearmed
    std::uint8_t post = 0;
    std::uint8_t stopped = 0;
    std::uint8_t blocked = 0;
    std::uint8_t woken = 0;
    std::uint32_t G = 0;  // the generation of the id in hand
    Word c = 0;           // the word last loaded
};

struct Thread {
    Kind kind = Kind::Caller;
    std::uint8_t op = 0;    // caller: index of its current operation
    std::uint8_t done = 0;
    std::uint8_t pc = 0;    // shard/worker/shutdown/recycler
    std::uint8_t budget = 0;
    std::uint8_t stopped = 0;  // shard: stopped by shutdown
    std::uint8_t fin = 0;      // worker: FinishOutcome; shard: message type; recycle: wake then flush?
    std::uint8_t failed = 0;   // worker: begin_run said no
    std::uint8_t retire = 0;   // recycle: retired (no flush)
    std::uint32_t mine = 0;    // caller: id from start(); worker: the item's gen; shard: the message's gen
    OpRun o;
};

struct World {
    // the record
    Word ctl = 0;
    std::uint32_t gen = 0;
    std::uint8_t periodic = 0;
    std::uint8_t linked = 0;
    tick_t wheel_at = 0;
    std::uint8_t cb_alive = 0;
    std::uint8_t on_free = 0;
    std::uint8_t quarantined = 0;
    // the rest of the process
    tick_t now = 0;
    std::uint8_t waiters = 0;      // g_waiters
    std::uint8_t hazards = 0;      // bit i: thread i is inside a HazardScope on the record
    std::uint8_t shutting_down = 0;
    std::uint8_t nmsgs = 0, nitems = 0, nfacts = 0, nth = 0;
    std::array<Msg, kMaxMsgs> msgs{};
    std::array<Item, kMaxItems> items{};
    std::array<Facts, kMaxFacts> facts{};
    std::array<Thread, kMaxThreads> th{};
};

// ---- the memo key: the whole state, packed into 64-bit words -----------------------
// Exact (no hash compaction). Ticks in the model stay below 2^20, generations
// below 2^24; a word packs into 33 bits: gen10 | state | deadline.
constexpr tick_t kTickLimit = tick_t{1} << 20;

inline std::uint64_t cw(Word c) {
    return Ctl::gen10(c) | (std::uint64_t{static_cast<std::uint32_t>(Ctl::state(c))} << 10) |
           (std::uint64_t{Ctl::deadline(c) & (kTickLimit - 1)} << 13);
}
inline std::uint64_t sat3(std::uint8_t v) { return v > 3 ? 3 : v; }

/// Appends the key of `w` to `out`; false if a value does not fit the packing.
inline bool pack(const World& w, std::vector<std::uint64_t>& out) {
    bool ok = Ctl::deadline(w.ctl) < kTickLimit && w.wheel_at < kTickLimit && w.now < kTickLimit;
    out.push_back(cw(w.ctl) | std::uint64_t{w.gen} << 33 | std::uint64_t{w.periodic} << 57 |
                  std::uint64_t{w.linked} << 58 | std::uint64_t{w.cb_alive} << 59 | std::uint64_t{w.on_free} << 60 |
                  std::uint64_t{w.quarantined} << 61 | std::uint64_t{w.shutting_down} << 62);
    out.push_back(w.wheel_at | w.now << 20 | std::uint64_t{w.waiters & 7u} << 40 | std::uint64_t{w.hazards} << 43 |
                  std::uint64_t{w.nmsgs} << 51 | std::uint64_t{w.nitems} << 55);
    // The inbox and the dispatcher queue are unordered: canonical order.
    std::array<std::uint64_t, kMaxMsgs> m{};
    for (int i = 0; i < w.nmsgs; ++i) m[i] = std::uint64_t{static_cast<std::uint8_t>(w.msgs[i].type)} << 24 | w.msgs[i].gen;
    std::sort(m.begin(), m.begin() + w.nmsgs);
    for (int i = 0; i < w.nmsgs; i += 2) out.push_back(m[i] | (i + 1 < w.nmsgs ? m[i + 1] << 32 : 0));
    std::array<std::uint64_t, kMaxItems> it{};
    for (int i = 0; i < w.nitems; ++i) {
        ok &= w.items[i].due < kTickLimit;
        it[i] = w.items[i].gen | w.items[i].due << 24;
    }
    std::sort(it.begin(), it.begin() + w.nitems);
    for (int i = 0; i < w.nitems; ++i) out.push_back(it[i]);
    for (int i = 0; i < w.nfacts; ++i) {
        const Facts& f = w.facts[i];
        out.push_back(f.gen | std::uint64_t{f.periodic} << 24 | std::uint64_t{f.running} << 25 |
                      sat3(f.hook_calls) << 26 | std::uint64_t{f.hook_running} << 28 |
                      std::uint64_t{f.hook_done} << 29 | sat3(f.stop_true) << 30 | sat3(f.arms) << 32 | sat3(f.runs) << 40 |
                      sat3(f.shutdown_cancels) << 34 | sat3(f.recycled) << 36 | std::uint64_t{f.sync_returned} << 38);
    }
    for (int i = 0; i < w.nth; ++i) {
        const Thread& t = w.th[i];
        const OpRun& o = t.o;
        ok &= Ctl::deadline(o.c) < kTickLimit && t.op < 8 && t.budget < 8;
        out.push_back(std::uint64_t{t.op} | std::uint64_t{t.done} << 3 | std::uint64_t{t.pc} << 4 |
                      std::uint64_t{t.budget} << 11 | std::uint64_t{t.stopped} << 14 | std::uint64_t{t.fin} << 15 |
                      std::uint64_t{t.failed} << 18 | std::uint64_t{t.retire} << 19 | std::uint64_t{t.mine} << 20 |
                      std::uint64_t{o.pc} << 44 | std::uint64_t{o.p} << 51 | std::uint64_t{o.out} << 52 |
                      std::uint64_t{o.post} << 55 | std::uint64_t{o.stopped} << 57 | std::uint64_t{o.blocked} << 58 |
                      std::uint64_t{o.woken} << 59);
        out.push_back(o.G | cw(o.c) << 24);
    }
    return ok;
}

/// The memo: every key once (an arena of packed keys, open addressing over
/// their indices), with a value per key.
class Memo {
public:
    Memo() : slots_(1u << 16, 0) {}
    /// The value slot of `key` (inserted with `init` if new) and whether it was new.
    std::pair<double*, bool> find_or_insert(const std::uint64_t* key, std::uint32_t n, double init) {
        if ((count_ + 1) * 4 > slots_.size() * 3) grow();
        const std::uint64_t h = hash(key, n);
        const std::size_t mask = slots_.size() - 1;
        for (std::size_t i = h & mask;; i = (i + 1) & mask) {
            const std::uint32_t s = slots_[i];
            if (s == 0) {
                start_.push_back(static_cast<std::uint32_t>(arena_.size()));
                arena_.insert(arena_.end(), key, key + n);
                values_.push_back(init);
                ++count_;
                slots_[i] = static_cast<std::uint32_t>(count_);
                return {&values_[count_ - 1], true};
            }
            const std::uint32_t k = s - 1;
            const std::uint32_t b = start_[k];
            const std::uint32_t e = k + 1 < start_.size() ? start_[k + 1] : static_cast<std::uint32_t>(arena_.size());
            if (e - b == n && std::equal(key, key + n, arena_.begin() + b)) return {&values_[k], false};
        }
    }
    double& value(std::size_t k) { return values_[k]; }
    std::size_t size() const { return count_; }

private:
    static std::uint64_t hash(const std::uint64_t* key, std::uint32_t n) {
        std::uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
        for (std::uint32_t i = 0; i < n; ++i) {
            h ^= key[i];
            h *= 0xBF58476D1CE4E5B9ull;
            h ^= h >> 31;
        }
        h *= 0x94D049BB133111EBull;
        return h ^ (h >> 29);
    }
    void grow() {
        std::vector<std::uint32_t> bigger(slots_.size() * 2, 0);
        const std::size_t mask = bigger.size() - 1;
        for (std::uint32_t k = 0; k < count_; ++k) {
            const std::uint32_t b = start_[k];
            const std::uint32_t e = k + 1 < start_.size() ? start_[k + 1] : static_cast<std::uint32_t>(arena_.size());
            std::size_t i = hash(&arena_[b], e - b) & mask;
            while (bigger[i] != 0) i = (i + 1) & mask;
            bigger[i] = k + 1;
        }
        slots_.swap(bigger);
    }
    std::vector<std::uint32_t> slots_;
    std::vector<std::uint64_t> arena_;
    std::vector<std::uint32_t> start_;
    std::vector<double> values_;
    std::size_t count_ = 0;
};

inline const char* state_name(State s) {
    switch (s) {
        case State::Free: return "FREE";
        case State::Pending: return "PENDING";
        case State::Dispatched: return "DISPATCHED";
        case State::Running: return "RUNNING";
        case State::RunningStopped: return "RUNNING_STOPPED";
        case State::RunningRearmed: return "RUNNING_REARMED";
        case State::Cancelled: return "CANCELLED";
        case State::Releasing: return "RELEASING";
    }
    return "?";
}

inline std::string word_str(Word c) {
    char buf[80];
    std::snprintf(buf, sizeof buf, "%s(g10=%u,d=%llu)", state_name(Ctl::state(c)), Ctl::gen10(c),
                  static_cast<unsigned long long>(Ctl::deadline(c)));
    return buf;
}

// Program counters. One enum for every thread kind (names for traces).
enum Pc : std::uint8_t {
    // operations (OpRun::pc)
    kShutFlag, kLookup, kHzOn, kLoad, kGen, kPer, kHzLate, kCas, kHzOff,
    kHookBegin, kHookEnd, kFinCancel, kWake, kPost,
    kWLoad, kWGen1, kWInc, kWLoad2, kWGen2, kWWait, kWLoad3, kWDec, kZGen,
    kAlloc, kPeriod, kPublish, kStartPost,
    // worker (Thread::pc)
    kWorkIdle, kBHzOn, kBLoad, kBGen, kBHzLate, kBCas, kBHzOff, kCallback, kFLoad, kFCas, kFWake, kFPost,
    kFsRel, kRHookB, kRHookE, kFsStore, kFsWake, kFsPost,
    // recycle (worker after a last run, shard on a Cancel)
    kRcGen, kRcMark, kRcWake, kRcFlush,
    // shard
    kShardIdle, kSHLoad, kSECas,
    // shutdown
    kDFlag, kDStop, kDIdle, kDGen0, kDLoad, kDGen, kDPer, kDCas, kDHookB, kDHookE, kDFin, kDWake, kDDone,
    // recycler
    kXWrap, kXRest, kXPost, kXDone,
    kPcCount
};
inline const char* pc_name(int pc) {
    static const char* const names[kPcCount] = {
        "shutting_down?", "lookup(gen)", "hazard on", "load", "gen check", "load period + decide",
        "hazard on (late)", "CAS", "hazard off", "release hook begins", "release hook returns",
        "finish_cancel store", "wake", "post", "wait: load", "wait: gen check", "waiters++", "wait: load",
        "wait: gen check", "atomic wait", "wait: load", "waiters--", "gen check after wait",
        "allocate", "store period", "publish", "post Insert",
        "idle", "hazard on", "load", "gen check", "hazard on (late)", "begin_run CAS", "hazard off",
        "callback", "callback returns; finish_run load", "finish_run CAS", "wake", "post Insert",
        "releasing store (stopped during the run)", "release hook begins", "release hook returns",
        "finish_stopped store", "wake", "post Cancel",
        "recycle: generation + 1", "recycle: mark FREE", "wake", "free-stack push",
        "idle", "handle: load", "expire CAS",
        "shutting_down = true", "stop shard", "dispatcher idle", "sweep: read gen", "sweep: load",
        "sweep: gen check", "sweep: period + decide", "sweep: CAS", "release hook begins",
        "release hook returns", "finish_cancel store", "wake", "done",
        "recycle to the 10-bit wrap", "recycle on + new occupant", "post Insert", "done"};
    return pc >= 0 && pc < kPcCount ? names[pc] : "?";
}

class Explorer {
public:
    explicit Explorer(const Scenario& sc) : sc_(sc), dec_(sc.dec), mut_(sc.mut) { build(); }

    Result run(bool memo, std::uint64_t cap) {
        const auto t0 = std::chrono::steady_clock::now();
        cap_ = cap;
        World w = init_;
        check_state(w);
        if (violation_.empty()) res_.interleavings = memo ? dfs_memo(w) : dfs_plain(w);
        if (!violation_.empty()) res_.violation = violation_;
        res_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return res_;
    }

private:
    // ---- setup --------------------------------------------------------------------
    void build() {
        World& w = init_;
        const std::uint32_t G = sc_.gen;
        w.ctl = Ctl::make(G, State::Pending, sc_.deadline);
        w.gen = G;
        w.periodic = sc_.periodic;
        w.linked = sc_.linked;
        w.wheel_at = sc_.linked ? sc_.deadline : 0;
        w.cb_alive = 1;
        if (!sc_.linked) w.msgs[w.nmsgs++] = {MsgT::Insert, G};
        // The previous occupant (the stale id's timer): long done.
        Facts prev;
        prev.gen = G - 1;
        prev.hook_calls = 1;
        prev.hook_done = 1;
        prev.recycled = 1;
        prev.runs = 1;
        w.facts[w.nfacts++] = prev;
        Facts f;
        f.gen = G;
        f.periodic = sc_.periodic;
        w.facts[w.nfacts++] = f;
        for (std::size_t i = 0; i < sc_.callers.size(); ++i) add_thread(w, Kind::Caller);
        if (sc_.shard_budget >= 0) {
            shard_ = add_thread(w, Kind::Shard);
            w.th[shard_].pc = kShardIdle;
            w.th[shard_].budget = static_cast<std::uint8_t>(sc_.shard_budget);
        }
        if (sc_.worker) {
            worker_ = add_thread(w, Kind::Worker);
            w.th[worker_].pc = kWorkIdle;
        }
        if (sc_.shutdown) w.th[add_thread(w, Kind::Shutdown)].pc = kDFlag;
        if (sc_.recycler) w.th[add_thread(w, Kind::Recycler)].pc = kXWrap;
        for (int i = 0; i < w.nth; ++i)
            if (w.th[i].kind == Kind::Caller) begin_op(w, i);
        // Hazard slots are read only by the quarantine's reclaimer. Where no
        // record can be quarantined (no recycler, and the few recyclings a
        // scenario makes cannot reach a 10-bit wrap), publishing and
        // retracting one is invisible to every other thread: it commutes
        // with every step, and is folded into its thread's neighbouring step.
        const bool wrap_reachable = ((sc_.gen + 8) & ~Ctl::kGenMask) != (sc_.gen & ~Ctl::kGenMask) ||
                                    sc_.gen + 8 > Id::kMaxGen;
        fold_ = !sc_.recycler && !wrap_reachable && !sc_.mut.hazard_late;
    }
    int add_thread(World& w, Kind k) {
        if (w.nth == kMaxThreads) fail_setup("too many threads");
        w.th[w.nth].kind = k;
        return w.nth++;
    }
    void fail_setup(const char* m) {
        if (violation_.empty()) violation_ = std::string("scenario: ") + m;
    }

    const Op& cur_op(const World& w, int ti) const {
        static const Op none{};
        const Thread& t = w.th[ti];
        if (t.kind == Kind::Worker) return sc_.callback;
        if (t.kind != Kind::Caller || t.done) return none;
        return sc_.callers[static_cast<std::size_t>(ti)][t.op];
    }

    std::uint32_t id_gen(const World& w, int ti, Who who) const {
        switch (who) {
            case Who::Cur: return sc_.gen;
            case Who::Stale: return sc_.gen - 1;
            case Who::Mine: return w.th[ti].mine;
            case Who::Own: return w.th[ti].mine;  // the worker's FireItem
        }
        return 0;
    }

    /// Starts the caller's current operation (or marks the thread done).
    void begin_op(World& w, int ti) {
        Thread& t = w.th[ti];
        const auto& prog = sc_.callers[static_cast<std::size_t>(ti)];
        if (t.op >= prog.size()) {
            t.done = 1;
            t.o = OpRun{};
            return;
        }
        init_op(w, ti, prog[t.op]);
    }
    void init_op(World& w, int ti, const Op& op) {
        OpRun& o = w.th[ti].o;
        o = OpRun{};
        o.G = id_gen(w, ti, op.who);
        if (op.k == OpK::Start) o.pc = kAlloc;
        else if (op.k == OpK::Reset && sc_.shutdown) o.pc = kShutFlag;
        else o.pc = kLookup;
    }

    // ---- checks -------------------------------------------------------------------
    void fail(const World&, const std::string& m) {
        if (!violation_.empty()) return;
        violation_ = m;
    }
    Facts* facts(World& w, std::uint32_t gen) {
        for (int i = 0; i < w.nfacts; ++i)
            if (w.facts[i].gen == gen) return &w.facts[i];
        return nullptr;
    }
    Facts& must_facts(World& w, std::uint32_t gen) {
        Facts* f = facts(w, gen);
        if (f == nullptr) {
            fail(w, "no facts for generation " + std::to_string(gen));
            static Facts dummy;
            dummy = Facts{};
            return dummy;
        }
        return *f;
    }
    std::string tname(const World& w, int ti) const {
        const char* k = "caller";
        switch (w.th[ti].kind) {
            case Kind::Caller: k = "caller"; break;
            case Kind::Shard: k = "shard"; break;
            case Kind::Worker: k = "worker"; break;
            case Kind::Shutdown: k = "shutdown"; break;
            case Kind::Recycler: k = "recycler"; break;
        }
        char buf[32];
        std::snprintf(buf, sizeof buf, "T%d(%s)", ti, k);
        return buf;
    }
    /// A thread that holds id generation G CASes the word successfully: the
    /// record must still be that timer (a stale id never acts on a newer one).
    void check_stale_cas(World& w, int ti, std::uint32_t G, const char* what) {
        if (w.gen != G)
            fail(w, tname(w, ti) + ": stale " + what + " CAS with generation " + std::to_string(G) +
                        " succeeded on generation " + std::to_string(w.gen) + " (word " + word_str(w.ctl) + ")");
    }
    /// Exactly one of, per arming of a one-shot timer (its start, or a re-arm
    /// from its own running callback): its run starts / a stop returns true /
    /// shutdown cancels it. A periodic timer: at most one stop true or
    /// shutdown cancel.
    static int ends(const Facts& f) {
        return f.stop_true + f.shutdown_cancels + (f.periodic ? 0 : f.runs);
    }
    static int arms(const Facts& f) { return f.periodic ? 1 : f.arms; }
    void check_exactly_one(World& w, const Facts& f, const char* when) {
        if (ends(f) > arms(f))
            fail(w, std::string("timer gen ") + std::to_string(f.gen) + ": ended twice (" + when +
                        "): runs=" + std::to_string(f.runs) + " stop_true=" + std::to_string(f.stop_true) +
                        " shutdown=" + std::to_string(f.shutdown_cancels) + " arms=" + std::to_string(f.arms));
    }
    void hook_begin(World& w, int ti, std::uint32_t G) {
        Facts& f = must_facts(w, G);
        if (w.hazards & (1u << ti)) fail(w, tname(w, ti) + ": release hook inside a HazardScope");
        if (w.gen != G) fail(w, tname(w, ti) + ": release hook of gen " + std::to_string(G) + " on a recycled record");
        if (f.hook_calls != 0) fail(w, tname(w, ti) + ": release hook of gen " + std::to_string(G) + " called twice");
        if (f.running) fail(w, tname(w, ti) + ": release hook while a run of gen " + std::to_string(G) + " is in progress");
        if (!w.cb_alive) fail(w, tname(w, ti) + ": release hook of a destroyed callable");
        f.hook_calls++;
        f.hook_running = 1;
        w.cb_alive = 0;
    }
    void hook_end(World& w, std::uint32_t G) {
        Facts& f = must_facts(w, G);
        f.hook_running = 0;
        f.hook_done = 1;
    }
    void notify(World& w) {
        for (int i = 0; i < w.nth; ++i)
            if (w.th[i].o.blocked) w.th[i].o.woken = 1;
    }
    void wake(World& w) {
        if (w.waiters != 0) notify(w);
    }
    void post(World& w, MsgT t, std::uint32_t gen) {
        if (w.nmsgs == kMaxMsgs) {
            fail(w, "model: inbox bound exceeded");
            return;
        }
        w.msgs[w.nmsgs++] = {t, gen};
    }
    void wheel_insert(World& w, tick_t at, const char* why) {
        if (w.linked) fail(w, std::string("shard: wheel insert of a linked record (") + why + ")");
        w.linked = 1;
        w.wheel_at = at;
    }

    /// State invariants, after every step.
    void check_state(World& w) {
        int running = 0;
        for (int i = 0; i < w.nfacts; ++i) {
            const Facts& f = w.facts[i];
            if (f.running) {
                ++running;
                if (w.gen != f.gen || !Ctl::running(Ctl::state(w.ctl)))
                    fail(w, "run of gen " + std::to_string(f.gen) + " in progress but the word is " +
                                word_str(w.ctl) + " (record gen " + std::to_string(w.gen) + ")");
                if (f.hook_calls) fail(w, "run in progress after the release hook of gen " + std::to_string(f.gen));
            }
            if (f.hook_calls > 1) fail(w, "release hook called twice");
        }
        if (running > 1) fail(w, "two runs in progress");
        // The current occupant's callable is alive exactly while it can still run.
        const State s = Ctl::state(w.ctl);
        Facts* cur = facts(w, w.gen);
        // (RUNNING_STOPPED: the worker releases before its store to CANCELLED.)
        if (cur != nullptr &&
            (s == State::Pending || s == State::Dispatched || s == State::Running || s == State::RunningRearmed) &&
            Ctl::gen10(w.ctl) == (w.gen & Ctl::kGenMask) && !w.cb_alive)
            fail(w, "live timer (" + word_str(w.ctl) + ") without its callable");
        if (w.on_free && s != State::Free) fail(w, "record on the free stack but its word is " + word_str(w.ctl));
        if (w.on_free && (w.linked || w.cb_alive)) fail(w, "record on the free stack while linked or holding a callable");
    }

    /// Checks at a state where no thread can move.
    void check_terminal(World& w) {
        for (int i = 0; i < w.nth; ++i) {
            const Thread& t = w.th[i];
            switch (t.kind) {
                case Kind::Caller:
                    if (t.done) break;
                    if (t.o.pc == kAlloc) break;  // start() found no free record here: it took another
                    fail(w, "deadlock: " + tname(w, i) + " never returns, blocked at '" + pc_name(t.o.pc) +
                                "' (word " + word_str(w.ctl) + (t.o.blocked ? ", in atomic wait: lost wakeup)" : ")"));
                    break;
                case Kind::Shutdown:
                    if (t.pc != kDDone) fail(w, "deadlock: shutdown blocked at '" + std::string(pc_name(t.pc)) + "'");
                    break;
                case Kind::Recycler:
                    if (t.pc != kXDone && !(t.pc == kXWrap && !w.on_free))
                        fail(w, "recycler starved at '" + std::string(pc_name(t.pc)) + "' (quarantine never reclaimed?)");
                    break;
                default: break;
            }
        }
        bool shard_stopped = shard_ < 0 || w.th[shard_].stopped;
        if (shard_ >= 0 && !shard_stopped && w.nmsgs != 0) fail(w, "terminal with messages queued");
        if (w.waiters != 0) fail(w, "waiter count left at " + std::to_string(w.waiters));
        if (w.hazards != 0) fail(w, "hazard left published");
        const State s = Ctl::state(w.ctl);
        if (Ctl::busy(s)) fail(w, "terminal with a busy word " + word_str(w.ctl));
        if (s == State::Dispatched && worker_ >= 0)
            fail(w, "stranded: DISPATCHED at the end with no FireItem left (" + word_str(w.ctl) + ")");
        if (s == State::Pending && !w.linked && !shard_stopped && shard_ >= 0)
            fail(w, "stranded: PENDING but in no wheel and no Insert queued (" + word_str(w.ctl) + ")");
        if (s == State::Cancelled && !shard_stopped)
            fail(w, "leak: CANCELLED at the end but never recycled (" + word_str(w.ctl) + ")");
        for (int i = 0; i < w.nfacts; ++i) {
            Facts& f = w.facts[i];
            const bool gone = w.gen != f.gen || s == State::Cancelled || s == State::Free;
            if (f.running || f.hook_running) fail(w, "terminal with a run or a hook in progress");
            if (gone && !f.hook_done)
                fail(w, "timer gen " + std::to_string(f.gen) + " ended without its release hook");
            if (!gone && f.hook_calls)
                fail(w, "timer gen " + std::to_string(f.gen) + " still live after its release hook");
            if (gone && f.gen != sc_.gen - 1 && ends(f) != arms(f))
                fail(w, "timer gen " + std::to_string(f.gen) + ": " + std::to_string(arms(f)) + " arming(s) ended " +
                            std::to_string(ends(f)) + " time(s) (exactly one of: run / stop true / shutdown)");
        }
    }

    // ---- the operations ---------------------------------------------------------------
    /// The caller's operation returned `r`: bookkeeping and checks.
    void op_return(World& w, int ti, const Op& op, bool own, bool r) {
        OpRun& o = w.th[ti].o;
        if (op.who == Who::Stale && r) fail(w, tname(w, ti) + ": an operation on a stale id returned true");
        switch (op.k) {
            case OpK::Stop:
            case OpK::StopSync:
                if (r) {
                    Facts& f = must_facts(w, o.G);
                    f.stop_true++;
                    if (f.periodic && f.stop_true > 1) fail(w, "two stops returned true for one periodic timer");
                    check_exactly_one(w, f, "stop returned true");
                }
                if (op.k == OpK::StopSync && !own) {
                    Facts* f = facts(w, o.G);
                    if (f != nullptr) {
                        if (f->running) fail(w, tname(w, ti) + ": stop_sync returned while a run is in progress");
                        if (!f->hook_done)
                            fail(w, tname(w, ti) + ": stop_sync returned before the release hook returned (word " +
                                        word_str(w.ctl) + ")");
                        f->sync_returned = 1;
                    }
                }
                break;
            case OpK::Reset: break;  // checked at its CAS
            case OpK::Start: w.th[ti].mine = o.G; break;
            case OpK::None: break;
        }
        if (w.th[ti].kind == Kind::Caller) {
            w.th[ti].op++;
            begin_op(w, ti);
        } else {
            o = OpRun{};
        }
    }

    bool op_enabled(const World& w, const OpRun& o) const {
        if (o.blocked && !o.woken) return false;
        if (o.pc == kAlloc) return w.on_free && Ctl::state(w.ctl) == State::Free;
        return true;
    }

    /// One atomic step of operation `op` of thread ti. True once it returned.
    bool op_step(World& w, int ti, const Op& op, bool own) {
        OpRun& o = w.th[ti].o;
        const std::uint8_t bit = static_cast<std::uint8_t>(1u << ti);
        const bool is_reset = op.k == OpK::Reset;
        switch (o.pc) {
            case kShutFlag:
                if (w.shutting_down) {
                    op_return(w, ti, op, own, false);
                    return true;
                }
                o.pc = kLookup;
                return false;
            case kLookup:
                if (w.gen != o.G) {
                    op_return(w, ti, op, own, false);
                    return true;
                }
                o.pc = mut_.hazard_late ? kLoad : kHzOn;
                return false;
            case kHzOn:
                w.hazards |= bit;
                o.pc = kLoad;
                return false;
            case kLoad:
                o.c = w.ctl;
                o.pc = kGen;
                return false;
            case kGen:
                if (w.gen != o.G) {
                    o.out = is_reset ? 0 : static_cast<std::uint8_t>(CancelOutcome::NotPending);
                    o.pc = kHzOff;
                    return false;
                }
                o.pc = kPer;
                return false;
            case kPer: {
                o.p = w.periodic;
                bool act;
                if (is_reset) {
                    act = dec_.reset(o.c, o.G, op.tick, o.p, own).rearmed;
                    if (!act) o.out = 0;
                } else {
                    const CancelStep s = dec_.cancel(o.c, o.G, o.p);
                    act = s.next != o.c;
                    if (!act) o.out = static_cast<std::uint8_t>(s.out);
                }
                o.pc = !act ? kHzOff : (mut_.hazard_late && !(w.hazards & bit)) ? kHzLate : kCas;
                return false;
            }
            case kHzLate:
                w.hazards |= bit;
                o.pc = kCas;
                return false;
            case kCas:
                if (w.ctl != o.c) {
                    o.c = w.ctl;
                    o.pc = kGen;
                    return false;
                }
                check_stale_cas(w, ti, o.G, is_reset ? "reset" : "cancel");
                if (is_reset) {
                    const ResetStep s = dec_.reset(o.c, o.G, op.tick, o.p, own);
                    // The reset takes effect here: the timer must still be live.
                    Facts& f = must_facts(w, o.G);
                    if (f.stop_true) fail(w, tname(w, ti) + ": reset re-armed a timer a stop had stopped");
                    if (f.hook_calls) fail(w, tname(w, ti) + ": reset re-armed a released timer");
                    if (Ctl::state(o.c) == State::Running && Ctl::state(s.next) == State::RunningRearmed) f.arms++;
                    w.ctl = s.next;
                    o.out = 1;
                    o.post = static_cast<std::uint8_t>(s.post);
                } else {
                    const CancelStep s = dec_.cancel(o.c, o.G, o.p);
                    w.ctl = s.next;
                    o.out = static_cast<std::uint8_t>(s.out);
                }
                o.pc = kHzOff;
                return false;
            case kHzOff:
                w.hazards &= static_cast<std::uint8_t>(~bit);
                if (is_reset) {
                    if (o.out && static_cast<Post>(o.post) != Post::None) {
                        o.pc = kPost;
                        return false;
                    }
                    op_return(w, ti, op, own, o.out != 0);
                    return true;
                }
                switch (static_cast<CancelOutcome>(o.out)) {
                    case CancelOutcome::Cancelled: o.pc = kHookBegin; return false;
                    case CancelOutcome::StoppedDuringRun: o.stopped = 1; break;
                    default: break;
                }
                if (op.k == OpK::Stop || own) {
                    op_return(w, ti, op, own, o.stopped != 0);
                    return true;
                }
                o.pc = kWLoad;
                return false;
            case kHookBegin:
                hook_begin(w, ti, o.G);
                o.pc = kHookEnd;
                return false;
            case kHookEnd:
                hook_end(w, o.G);
                o.pc = kFinCancel;
                return false;
            case kFinCancel:
                if (Ctl::state(w.ctl) != State::Releasing || w.gen != o.G)
                    fail(w, tname(w, ti) + ": finish_cancel (owner store) over " + word_str(w.ctl));
                w.ctl = Ctl::with(w.ctl, State::Cancelled);
                o.pc = mut_.no_wake_finish_cancel ? kPost : kWake;
                return false;
            case kWake:
                wake(w);
                o.pc = kPost;
                return false;
            case kPost:
                if (is_reset) {
                    post(w, static_cast<Post>(o.post) == Post::Insert ? MsgT::Insert : MsgT::Refile, o.G);
                    op_return(w, ti, op, own, true);
                } else {
                    post(w, MsgT::Cancel, o.G);
                    op_return(w, ti, op, own, true);  // stop_cancelled: true
                }
                return true;
            // stop_sync: TimerState::wait_while_busy, then the loop's tail
            case kWLoad:
                o.c = w.ctl;
                o.pc = kWGen1;
                return false;
            case kWGen1:
                o.pc = (w.gen != o.G || !dec_.must_wait(o.c, o.G)) ? kZGen : kWInc;
                return false;
            case kWInc:
                w.waiters++;
                o.pc = kWLoad2;
                return false;
            case kWLoad2:
            case kWLoad3:
                o.c = w.ctl;
                o.pc = kWGen2;
                return false;
            case kWGen2:
                o.pc = (w.gen != o.G || !dec_.must_wait(o.c, o.G)) ? kWDec : kWWait;
                return false;
            case kWWait:
                // std::atomic::wait(c): returns once the word differs, but
                // only looks again when notified.
                o.blocked = 0;
                o.woken = 0;
                if (w.ctl != o.c) o.pc = kWLoad3;
                else o.blocked = 1;
                return false;
            case kWDec:
                w.waiters--;
                o.pc = kZGen;
                return false;
            case kZGen: {
                if (w.gen != o.G) {
                    op_return(w, ti, op, own, o.stopped != 0);
                    return true;
                }
                const State s = Ctl::state(o.c);
                if ((s == State::Pending || s == State::Dispatched) && !mut_.stop_sync_no_retry) {
                    o.pc = mut_.hazard_late ? kLoad : kHzOn;  // try_stop again
                    return false;
                }
                op_return(w, ti, op, own, o.stopped != 0);
                return true;
            }
            // start(): a new occupant of the record
            case kAlloc:
                if (!w.on_free || Ctl::state(w.ctl) != State::Free || w.linked || w.cb_alive)
                    fail(w, tname(w, ti) + ": allocated a record that is not free");
                w.on_free = 0;
                o.G = w.gen;
                o.pc = kPeriod;
                return false;
            case kPeriod:
                w.periodic = op.periodic;
                o.pc = kPublish;
                return false;
            case kPublish: {
                w.cb_alive = 1;
                w.ctl = Ctl::make(o.G, State::Pending, op.tick);
                if (facts(w, o.G) != nullptr) fail(w, "a generation was handed out twice");
                if (w.nfacts == kMaxFacts) fail(w, "model: facts bound exceeded");
                else {
                    Facts f;
                    f.gen = o.G;
                    f.periodic = op.periodic;
                    w.facts[w.nfacts++] = f;
                }
                o.pc = kStartPost;
                return false;
            }
            case kStartPost:
                post(w, MsgT::Insert, o.G);
                op_return(w, ti, op, own, true);
                return true;
            default: fail(w, "model: bad op pc"); return true;
        }
    }

    // ---- recycle (HandleTable::recycle + the FreeChain flush) -------------------------------
    /// One step of recycling gen t.mine's record; true when done.
    bool recycle_step(World& w, int ti) {
        Thread& t = w.th[ti];
        switch (t.pc) {
            case kRcGen:
                if (w.gen >= Id::kMaxGen) {
                    t.retire = 1;  // the last generation: FREE, on no list, never reused
                    return mark_free(w, ti);
                }
                w.gen = w.gen + 1;  // set_gen before the word changes
                t.pc = kRcMark;
                return false;
            case kRcMark: return mark_free(w, ti);
            case kRcWake:
                wake(w);
                if (t.retire) return true;
                t.pc = kRcFlush;
                return false;
            case kRcFlush:
                w.on_free = 1;
                return true;
            default: fail(w, "model: bad recycle pc"); return true;
        }
    }
    bool mark_free(World& w, int ti) {
        Thread& t = w.th[ti];
        const State was = Ctl::state(w.ctl);
        Facts& f = must_facts(w, t.mine);
        if (was != State::Cancelled && was != State::Releasing)
            fail(w, tname(w, ti) + ": recycled a record that is not terminal (" + word_str(w.ctl) + ")");
        if (w.linked) fail(w, tname(w, ti) + ": recycled a record still in the wheel");
        if (w.cb_alive || !f.hook_done) fail(w, tname(w, ti) + ": recycled before the release hook returned");
        if (f.recycled) fail(w, tname(w, ti) + ": recycled twice");
        f.recycled = 1;
        w.ctl = Ctl::make(w.gen, State::Free, 0);
        const bool wraps = !t.retire && (w.gen & Ctl::kGenMask) == 0 && !mut_.no_quarantine;
        if (wraps) {
            w.quarantined = 1;
            t.retire = 1;  // no flush: the shard frees it once no hazard holds it
        }
        if (was == State::Releasing) {
            t.pc = kRcWake;
            return false;
        }
        if (t.retire) return true;
        t.pc = kRcFlush;
        return false;
    }

    // ---- threads ---------------------------------------------------------------------------
    /// The choices thread ti has now (0 = not enabled).
    int choices(const World& w, int ti) const {
        const Thread& t = w.th[ti];
        switch (t.kind) {
            case Kind::Caller:
                if (t.done) return 0;
                return op_enabled(w, t.o) ? 1 : 0;
            case Kind::Shard:
                if (t.pc != kShardIdle) return 1;
                if (t.stopped) return 0;
                return distinct_msgs(w) + (w.linked && t.budget > 0 ? 1 : 0) + (can_reclaim(w) ? 1 : 0);
            case Kind::Worker:
                if (t.pc == kWorkIdle) return distinct_items(w);
                if (t.pc == kCallback) return op_enabled(w, t.o) ? 1 : 0;
                return 1;
            case Kind::Shutdown:
                switch (t.pc) {
                    case kDDone: return 0;
                    case kDStop: return (shard_ < 0 || w.th[shard_].pc == kShardIdle) ? 1 : 0;
                    case kDIdle: return (worker_ < 0 || (w.th[worker_].pc == kWorkIdle && w.nitems == 0)) ? 1 : 0;
                    default: return 1;
                }
            case Kind::Recycler:
                switch (t.pc) {
                    case kXWrap:
                    case kXRest: return w.on_free && Ctl::state(w.ctl) == State::Free ? 1 : 0;
                    case kXPost: return 1;
                    default: return 0;
                }
        }
        return 0;
    }
    bool can_reclaim(const World& w) const { return w.quarantined && w.hazards == 0; }
    // Distinct messages/items (identical ones lead to identical states).
    int distinct_msgs(const World& w) const {
        int n = 0;
        for (int i = 0; i < w.nmsgs; ++i) n += first_of_kind(w, i) ? 1 : 0;
        return n;
    }
    bool first_of_kind(const World& w, int i) const {
        for (int j = 0; j < i; ++j)
            if (w.msgs[j].type == w.msgs[i].type && w.msgs[j].gen == w.msgs[i].gen) return false;
        return true;
    }
    int distinct_items(const World& w) const {
        int n = 0;
        for (int i = 0; i < w.nitems; ++i) n += first_item(w, i) ? 1 : 0;
        return n;
    }
    bool first_item(const World& w, int i) const {
        for (int j = 0; j < i; ++j)
            if (w.items[j].gen == w.items[i].gen && w.items[j].due == w.items[i].due) return false;
        return true;
    }

    /// Runs one step of thread ti, taking choice `ch`; then, where hazard
    /// slots are invisible (see fold_), the thread's hazard publication or
    /// retraction that follows, as part of the same step.
    void step(World& w, int ti, int ch) {
        exec(w, ti, ch);
        while (fold_ && hazard_step_next(w.th[ti])) exec(w, ti, 0);
    }
    static bool hazard_step_next(const Thread& t) {
        if (t.kind == Kind::Caller || (t.kind == Kind::Worker && t.pc == kCallback))
            return !t.done && (t.o.pc == kHzOn || t.o.pc == kHzOff);
        return t.kind == Kind::Worker && (t.pc == kBHzOn || t.pc == kBHzOff);
    }
    void exec(World& w, int ti, int ch) {
        Thread& t = w.th[ti];
        switch (t.kind) {
            case Kind::Caller: op_step(w, ti, cur_op(w, ti), false); return;
            case Kind::Shard: shard_step(w, ti, ch); return;
            case Kind::Worker: worker_step(w, ti, ch); return;
            case Kind::Shutdown: shutdown_step(w, ti); return;
            case Kind::Recycler: recycler_step(w, ti); return;
        }
    }

    void shard_step(World& w, int ti, int ch) {
        Thread& t = w.th[ti];
        switch (t.pc) {
            case kShardIdle: {
                // choice: a message, or the expiry, or a quarantine pass
                for (int i = 0; i < w.nmsgs; ++i) {
                    if (!first_of_kind(w, i)) continue;
                    if (ch-- != 0) continue;
                    const Msg m = w.msgs[i];
                    w.msgs[i] = w.msgs[--w.nmsgs];
                    if (w.gen != m.gen) return;  // stale: slot recycled since (the shard stays idle)
                    t.fin = static_cast<std::uint8_t>(m.type);
                    t.mine = m.gen;
                    t.pc = kSHLoad;
                    return;
                }
                if (w.linked && t.budget > 0 && ch-- == 0) {
                    // pop_expired at the record's wheel deadline, then TimerState::expire's load
                    w.linked = 0;
                    w.now = std::max(w.now, w.wheel_at);
                    t.budget--;
                    t.mine = w.gen;
                    t.o.c = w.ctl;
                    expire_decide(w, ti);
                    return;
                }
                if (can_reclaim(w) && ch-- == 0) {
                    // reclaim_quarantine: no hazard holds it -> free stack
                    w.quarantined = 0;
                    w.on_free = 1;
                    return;
                }
                fail(w, "model: bad shard choice");
                return;
            }
            case kSHLoad: {
                const Word c = w.ctl;
                const State s = Ctl::state(c);
                const MsgT type = static_cast<MsgT>(t.fin);
                const std::uint32_t mgen = t.mine;
                shard_idle(t);
                switch (type) {
                    case MsgT::Insert:
                        if (s == State::Pending && !w.linked) wheel_insert(w, Ctl::deadline(c), "Insert");
                        break;
                    case MsgT::Refile:
                        if (w.linked && (s == State::Pending || s == State::Dispatched || s == State::Running) &&
                            Ctl::deadline(c) < w.wheel_at)
                            w.wheel_at = Ctl::deadline(c);
                        break;
                    case MsgT::Cancel:
                        if (s == State::Cancelled) {
                            if (!mut_.cancel_keeps_link) w.linked = 0;
                            t.mine = mgen;
                            t.pc = kRcGen;
                        }
                        break;
                }
                return;
            }
            case kSECas:
                if (w.ctl != t.o.c) {
                    t.o.c = w.ctl;
                    expire_decide(w, ti);
                    return;
                }
                w.ctl = dec_.expire(t.o.c, w.now, w.periodic ? sc_.period : 0).next;
                expire_act(w, ti);
                return;
            case kRcGen:
            case kRcMark:
            case kRcWake:
            case kRcFlush:
                if (recycle_step(w, ti)) shard_idle(t);
                return;
            default: fail(w, "model: bad shard pc"); return;
        }
    }
    void expire_decide(World& w, int ti) {
        Thread& t = w.th[ti];
        const ExpireStep s = dec_.expire(t.o.c, w.now, w.periodic ? sc_.period : 0);
        if (s.next == t.o.c) {
            expire_act(w, ti);
            return;
        }
        t.pc = kSECas;
    }
    void expire_act(World& w, int ti) {
        Thread& t = w.th[ti];
        const ExpireStep s = dec_.expire(t.o.c, w.now, w.periodic ? sc_.period : 0);
        const std::uint32_t gen = t.mine;
        shard_idle(t);
        switch (s.out) {
            case ExpireOutcome::Fire:
                if (w.periodic) wheel_insert(w, s.file_at, "periodic fire");
                if (w.nitems == kMaxItems) {
                    fail(w, "model: dispatcher bound exceeded");
                    return;
                }
                w.items[w.nitems++] = {gen, s.due};
                break;
            case ExpireOutcome::Skip:
            case ExpireOutcome::Later: wheel_insert(w, s.file_at, "skip/later"); break;
            case ExpireOutcome::Drop: break;
        }
    }

    void worker_step(World& w, int ti, int ch) {
        Thread& t = w.th[ti];
        const std::uint8_t bit = static_cast<std::uint8_t>(1u << ti);
        switch (t.pc) {
            case kWorkIdle:
                for (int i = 0; i < w.nitems; ++i) {
                    if (!first_item(w, i)) continue;
                    if (ch-- != 0) continue;
                    t.mine = w.items[i].gen;
                    w.items[i] = w.items[--w.nitems];
                    t.failed = 0;
                    t.pc = mut_.hazard_late ? kBLoad : kBHzOn;
                    return;
                }
                fail(w, "model: bad worker choice");
                return;
            case kBHzOn:
                w.hazards |= bit;
                t.pc = kBLoad;
                return;
            case kBLoad:
                t.o.c = w.ctl;
                t.pc = kBGen;
                return;
            case kBGen:
                if (w.gen != t.mine || !dec_.begin_run(t.o.c, t.mine)) {
                    t.failed = 1;
                    t.pc = kBHzOff;
                    return;
                }
                t.pc = (mut_.hazard_late && !(w.hazards & bit)) ? kBHzLate : kBCas;
                return;
            case kBHzLate:
                w.hazards |= bit;
                t.pc = kBCas;
                return;
            case kBCas: {
                if (w.ctl != t.o.c) {
                    t.o.c = w.ctl;
                    t.pc = kBGen;
                    return;
                }
                check_stale_cas(w, ti, t.mine, "begin_run");
                Facts& f = must_facts(w, t.mine);
                if (f.running) fail(w, tname(w, ti) + ": a second run started while one is in progress");
                if (f.stop_true) fail(w, tname(w, ti) + ": a run started after a stop returned true");
                if (f.sync_returned) fail(w, tname(w, ti) + ": a run started after stop_sync returned");
                if (f.hook_calls) fail(w, tname(w, ti) + ": a run started after the release hook");
                f.running = 1;
                f.runs++;
                check_exactly_one(w, f, "run started");
                w.ctl = Ctl::with(t.o.c, State::Running);
                t.pc = kBHzOff;
                return;
            }
            case kBHzOff:
                w.hazards &= static_cast<std::uint8_t>(~bit);
                if (t.failed) {
                    worker_idle(t);
                    return;
                }
                if (sc_.callback.k != OpK::None) {
                    init_op(w, ti, sc_.callback);
                    t.pc = kCallback;
                } else {
                    t.pc = kFLoad;
                }
                return;
            case kCallback:
                if (op_step(w, ti, sc_.callback, true)) t.pc = kFLoad;
                return;
            case kFLoad: {
                Facts& f = must_facts(w, t.mine);
                f.running = 0;  // the callback returned
                t.o.c = w.ctl;
                t.o.p = w.periodic;
                finish_decide(w, ti);
                return;
            }
            case kFCas: {
                if (w.ctl != t.o.c) {
                    t.o.c = w.ctl;
                    finish_decide(w, ti);
                    return;
                }
                const FinishStep s = dec_.finish_run(t.o.c, t.o.p);
                w.ctl = s.next;
                t.fin = static_cast<std::uint8_t>(s.out);
                switch (s.out) {
                    case FinishOutcome::Periodic:
                        if (mut_.no_wake_finish_run) worker_idle(t);
                        else t.pc = kFWake;
                        break;
                    case FinishOutcome::Rearmed: t.pc = mut_.no_wake_finish_run ? kFPost : kFWake; break;
                    case FinishOutcome::Last: t.pc = kRHookB; break;
                    case FinishOutcome::Stopped: t.pc = kFsRel; break;
                }
                return;
            }
            case kFWake:
                wake(w);
                if (static_cast<FinishOutcome>(t.fin) == FinishOutcome::Rearmed) t.pc = kFPost;
                else worker_idle(t);
                return;
            case kFPost:
                post(w, MsgT::Insert, t.mine);
                worker_idle(t);
                return;
            case kFsRel:
                // RUNNING_STOPPED -> RELEASING (owner store) before the hook:
                // a query after the hook began answers "not found".
                if (Ctl::state(w.ctl) != State::RunningStopped || w.gen != t.mine)
                    fail(w, tname(w, ti) + ": releasing store (owner) over " + word_str(w.ctl));
                w.ctl = Ctl::with(w.ctl, State::Releasing);
                t.pc = kRHookB;
                return;
            case kRHookB:
                hook_begin(w, ti, t.mine);
                t.pc = kRHookE;
                return;
            case kRHookE:
                hook_end(w, t.mine);
                if (static_cast<FinishOutcome>(t.fin) == FinishOutcome::Last) {
                    t.retire = 0;
                    t.pc = kRcGen;
                } else {
                    t.pc = kFsStore;
                }
                return;
            case kFsStore:
                if (Ctl::state(w.ctl) != State::Releasing || w.gen != t.mine)
                    fail(w, tname(w, ti) + ": finish_stopped (owner store) over " + word_str(w.ctl));
                w.ctl = Ctl::with(w.ctl, State::Cancelled);
                t.pc = kFsWake;
                return;
            case kFsWake:
                wake(w);
                t.pc = kFsPost;
                return;
            case kFsPost:
                post(w, MsgT::Cancel, t.mine);
                worker_idle(t);
                return;
            case kRcGen:
            case kRcMark:
            case kRcWake:
            case kRcFlush:
                if (recycle_step(w, ti)) worker_idle(t);
                return;
            default: fail(w, "model: bad worker pc"); return;
        }
    }
    /// Back to idle, with no trace of the last item (fewer distinct states).
    static void worker_idle(Thread& t) {
        t.pc = kWorkIdle;
        t.fin = t.failed = t.retire = 0;
        t.mine = 0;
        t.o = OpRun{};
    }
    static void shard_idle(Thread& t) {
        t.pc = kShardIdle;
        t.fin = t.retire = 0;
        t.mine = 0;
        t.o = OpRun{};
    }
    void finish_decide(World& w, int ti) {
        Thread& t = w.th[ti];
        if (!Ctl::running(Ctl::state(t.o.c)) || w.gen != t.mine)
            fail(w, tname(w, ti) + ": the word left RUNNING* while the worker owned it: " + word_str(t.o.c));
        const FinishStep s = dec_.finish_run(t.o.c, t.o.p);
        if (s.out == FinishOutcome::Stopped) {
            t.fin = static_cast<std::uint8_t>(s.out);
            t.pc = kFsRel;
        } else {
            t.pc = kFCas;
        }
    }

    void shutdown_step(World& w, int ti) {
        Thread& t = w.th[ti];
        OpRun& o = t.o;
        switch (t.pc) {
            case kDFlag:
                w.shutting_down = 1;
                t.pc = kDStop;
                return;
            case kDStop:
                if (shard_ >= 0) w.th[shard_].stopped = 1;
                t.pc = kDIdle;
                return;
            case kDIdle: t.pc = kDGen0; return;
            case kDGen0:
                o.G = w.gen;
                t.pc = kDLoad;
                return;
            case kDLoad:
                o.c = w.ctl;
                t.pc = kDGen;
                return;
            case kDGen:
                t.pc = w.gen != o.G ? kDDone : kDPer;
                return;
            case kDPer: {
                o.p = w.periodic;
                const CancelStep s = dec_.cancel(o.c, o.G, o.p);
                t.pc = s.next == o.c ? kDDone : kDCas;
                return;
            }
            case kDCas: {
                if (w.ctl != o.c) {
                    o.c = w.ctl;
                    t.pc = kDGen;
                    return;
                }
                const CancelStep s = dec_.cancel(o.c, o.G, o.p);
                w.ctl = s.next;
                if (s.out != CancelOutcome::Cancelled) {
                    t.pc = kDDone;
                    return;
                }
                Facts& f = must_facts(w, o.G);
                f.shutdown_cancels++;
                check_exactly_one(w, f, "shutdown cancel");
                t.pc = kDHookB;
                return;
            }
            case kDHookB:
                hook_begin(w, ti, o.G);
                t.pc = kDHookE;
                return;
            case kDHookE:
                hook_end(w, o.G);
                t.pc = kDFin;
                return;
            case kDFin:
                if (Ctl::state(w.ctl) != State::Releasing)
                    fail(w, "shutdown: finish_cancel (owner store) over " + word_str(w.ctl));
                w.ctl = Ctl::with(w.ctl, State::Cancelled);
                t.pc = kDWake;
                return;
            case kDWake:
                wake(w);
                t.pc = kDDone;
                return;
            default: fail(w, "model: bad shutdown pc"); return;
        }
    }

    void recycler_step(World& w, int ti) {
        Thread& t = w.th[ti];
        const std::uint32_t target = sc_.gen + 1024;  // same 10-bit generation as the first timer
        switch (t.pc) {
            case kXWrap: {
                // Allocate, start, stop, recycle ... up to the recycling that
                // brings the 10-bit generation to 0: quarantined there.
                std::uint32_t g = w.gen;
                while ((g & Ctl::kGenMask) != 0) ++g;
                if (g > target) fail(w, "model: recycler past its target");
                w.on_free = 0;
                w.gen = g;
                w.ctl = Ctl::make(g, State::Free, 0);
                if (mut_.no_quarantine) w.on_free = 1;
                else w.quarantined = 1;
                t.pc = kXRest;
                return;
            }
            case kXRest: {
                // From the wrap to `target`, then a new occupant started
                // exactly like the first timer (same deadline, same kind).
                w.on_free = 0;
                w.gen = target;
                w.periodic = sc_.periodic;
                w.cb_alive = 1;
                w.ctl = Ctl::make(target, State::Pending, sc_.deadline);
                if (w.nfacts == kMaxFacts) {
                    fail(w, "model: facts bound exceeded");
                    return;
                }
                Facts f;
                f.gen = target;
                f.periodic = sc_.periodic;
                w.facts[w.nfacts++] = f;
                t.pc = kXPost;
                return;
            }
            case kXPost:
                post(w, MsgT::Insert, target);
                t.pc = kXDone;
                return;
            default: fail(w, "model: bad recycler pc"); return;
        }
    }

    // ---- search -------------------------------------------------------------------------
    struct Move {
        std::int8_t ti;
        std::int8_t ch;
    };

    long double dfs_memo(World& w) {
        key_.clear();
        if (!pack(w, key_)) {
            fail(w, "model: a value does not fit the memo key");
            on_violation(w, "");
            return 0;
        }
        const auto [slot0, fresh] = memo_.find_or_insert(key_.data(), static_cast<std::uint32_t>(key_.size()), -1.0);
        if (!fresh) {
            if (*slot0 < 0) on_violation(w, "livelock: a cycle in the state graph");
            return *slot0 < 0 ? 0 : *slot0;
        }
        const std::size_t index = memo_.size() - 1;  // values_ may move as the memo grows: keep the index
        ++res_.states;
        long double sum = 0;
        bool any = false;
        for (int ti = 0; ti < w.nth && violation_.empty(); ++ti) {
            const int n = choices(w, ti);
            for (int ch = 0; ch < n && violation_.empty(); ++ch) {
                any = true;
                World next = w;
                trace_.push_back({static_cast<std::int8_t>(ti), static_cast<std::int8_t>(ch)});
                step(next, ti, ch);
                ++res_.transitions;
                if (violation_.empty()) check_state(next);
                if (!violation_.empty()) {
                    on_violation(next, "");
                    return 0;
                }
                sum += dfs_memo(next);
                trace_.pop_back();
            }
        }
        if (!violation_.empty()) return 0;
        if (!any) {
            ++res_.terminals;
            check_terminal(w);
            if (!violation_.empty()) {
                on_violation(w, "");
                return 0;
            }
            sum = 1;
        }
        memo_.value(index) = static_cast<double>(sum);
        return sum;
    }

    long double dfs_plain(World& w) {
        if (res_.aborted) return 0;
        long double sum = 0;
        bool any = false;
        for (int ti = 0; ti < w.nth && violation_.empty() && !res_.aborted; ++ti) {
            const int n = choices(w, ti);
            for (int ch = 0; ch < n && violation_.empty(); ++ch) {
                any = true;
                World next = w;
                trace_.push_back({static_cast<std::int8_t>(ti), static_cast<std::int8_t>(ch)});
                step(next, ti, ch);
                ++res_.transitions;
                ++res_.states;
                if (violation_.empty()) check_state(next);
                if (!violation_.empty()) {
                    on_violation(next, "");
                    return 0;
                }
                sum += dfs_plain(next);
                trace_.pop_back();
            }
        }
        if (!any) {
            ++res_.terminals;
            if (cap_ != 0 && res_.terminals >= cap_) res_.aborted = true;
            check_terminal(w);
            if (!violation_.empty()) {
                on_violation(w, "");
                return 0;
            }
            return 1;
        }
        return sum;
    }

    /// Records the violation with the interleaving that led to it.
    void on_violation(const World&, const char* extra) {
        if (violation_.empty()) violation_ = extra;
        if (traced_) return;
        traced_ = true;
        std::string out = violation_ + "\n  interleaving (" + std::to_string(trace_.size()) + " steps):\n";
        World w = init_;
        for (std::size_t i = 0; i < trace_.size(); ++i) {
            const Move m = trace_[i];
            const Thread& t = w.th[m.ti];
            const int pc = (t.kind == Kind::Caller || (t.kind == Kind::Worker && t.pc == kCallback)) ? t.o.pc : t.pc;
            const Word before = w.ctl;
            const std::uint32_t gbefore = w.gen;
            step(w, m.ti, m.ch);
            char line[64];
            std::snprintf(line, sizeof line, "  %3zu. ", i + 1);
            out += line + tname(w, m.ti) + " " + pc_name(pc);
            if (m.ch != 0) out += " [choice " + std::to_string(m.ch) + "]";
            if (before != w.ctl || gbefore != w.gen)
                out += "   word " + word_str(before) + " -> " + word_str(w.ctl) + ", gen " + std::to_string(gbefore) +
                       " -> " + std::to_string(w.gen);
            out += "\n";
        }
        violation_ = out;
    }

    const Scenario& sc_;
    const Decisions& dec_;
    const Mutations& mut_;
    World init_{};
    int shard_ = -1;
    int worker_ = -1;
    bool fold_ = false;
    std::uint64_t cap_ = 0;
    Memo memo_;
    std::vector<std::uint64_t> key_;
    std::vector<Move> trace_;
    std::string violation_;
    bool traced_ = false;
    Result res_;
};

}  // namespace detail

/// Explores every interleaving of `sc` (memo: over the memoised state graph;
/// plain: one by one, stopping after `cap` complete interleavings if cap != 0).
inline Result explore(const Scenario& sc, bool memo = true, std::uint64_t cap = 0) {
    detail::Explorer e(sc);
    return e.run(memo, cap);
}

}  // namespace tsm
