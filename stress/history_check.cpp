// SPDX-License-Identifier: MIT OR Apache-2.0
// The history checker of tw_stress history (history.hpp): a sequential model
// of the C API's contract, judged only on what the record proves.
//
// Every event carries an interval: a call from its first to its last
// instruction around the library call ([t0, t1]), a callback from its first
// to its last instruction. A library step inside a call happened somewhere
// in that interval; a run "began" (the library's decision) at some time
// before its callback's first instruction and after the previous run's
// callback returned. Every rule below only concludes from orders that these
// intervals fix, so a correct library never fails it, however the threads
// were scheduled:
//
//  * never early: a run serves one of the armings (start, reset) that may be
//    the latest one to have taken effect when it began (the candidates: not
//    superseded by an arming that returned before the run could begin); its
//    callback's own-clock reading must reach the smallest deadline any
//    candidate allows (a fixed-rate timer's i-th run since the arming: the
//    deadline plus i periods; a DELAY timer's: the previous run's end plus
//    the period). Wall-clock steps widen the bound by the step (the reading
//    the library judged by may have used any shift in effect meanwhile).
//  * lateness: the same run must begin by the largest deadline a candidate
//    allows plus --late (a generous, load-proof bound); at the end, a timer
//    that could not have been stopped must have run by then (a lost timer).
//  * stop: after a stop returned TW_OK no run of a one-shot begins, and of a
//    periodic timer at most the run that was in progress; after a
//    stop_sync (not from its own callback) returned, no run begins and a
//    release hook that began before it returned has returned.
//  * stale ids: a call on the id of a released timer returns TW_ENOENT (or
//    TW_ESHUTDOWN); what it might have done to the slot's next timer shows
//    as that timer running early or late (the account prints the slot).
//  * group stop: a timer of the group armed before the group stop began,
//    whose deadline had not come when it returned and on which nothing else
//    acted meanwhile, is stopped by it: it never runs again; and the group
//    stop counts at least those (when no other group stop of the group
//    overlapped it).
//  * runs of one timer never overlap; a queue-bound timer runs only on a
//    thread inside tw_queue_run of its queue, a worker-bound one only on a
//    worker; every timer whose start returned TW_OK, TW_EAGAIN, TW_ENOMEM or
//    TW_ESHUTDOWN has its release hook run exactly once, after its last run,
//    never a queue-bound one on a worker outside a call; nothing runs after
//    tw_runtime_shutdown returned; every wait ends at shutdown.
#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>

#include "history.hpp"
#include "tickwheel/tickwheel.h"

namespace stress::history {

const char* kind_name(std::uint8_t k) {
    switch (k) {
        case kStart: return "start";
        case kStop: return "stop";
        case kReset: return "reset";
        case kGroupStop: return "group_stop";
        case kRun: return "RUN";
        case kRelease: return "RELEASE";
        case kShift: return "wall-clock step";
        case kShutdown: return "shutdown";
        case kNested: return "nested queue_run";
        case kQueueLeft: return "queue created during shutdown";
        case kQuery: return "query";
    }
    return "?";
}

namespace {

constexpr std::int64_t kInf = kNever;
constexpr std::int64_t kReclockNs = 100'000'000;  // a wall-clock step is noticed within one pass (<= 100 ms)

bool is_open(const Event& e) { return (e.flags & kOpen) != 0; }
// A start or reset that returned TW_OK, or one in flight for ever (it may
// have taken effect at any time since its call, or never).
bool is_arm(const Event& e) {
    return (e.kind == kStart || e.kind == kReset) && (e.result == TW_OK || is_open(e)) && (e.flags & kStaleId) == 0;
}

// The delays injected into the runtime's own threads (drivers, workers,
// queue runners): total(a, b) is the sum over those threads of the time each
// spent in an injected delay within [a, b] (each thread's delays are
// disjoint; threads add up). A piecewise-linear cumulative function: one
// binary search per query.
struct Injected {
    std::vector<std::int64_t> x;      // breakpoints
    std::vector<std::int64_t> f;      // F(x[i]): delay time before x[i]
    std::vector<std::int64_t> slope;  // delays in progress just after x[i]
    void build(const std::vector<Delay>& ds, bool machine, int cpu = -1) {
        std::vector<std::pair<std::int64_t, int>> pts;
        for (const Delay& d : ds) {
            if (d.cls == Delay::kCaller || (d.cls == Delay::kMachine) != machine || d.t1 <= d.t0) continue;
            if (cpu >= 0 && d.site != cpu) continue;
            pts.emplace_back(d.t0, +1);
            pts.emplace_back(std::min(d.t1, kInf), -1);
        }
        std::sort(pts.begin(), pts.end());
        std::int64_t cur = 0, acc = 0, last = 0;
        for (const auto& [t, dv] : pts) {
            if (!x.empty()) acc += cur * (t - last);
            if (x.empty() || x.back() != t) {
                x.push_back(t);
                f.push_back(acc);
                slope.push_back(0);
            }
            cur += dv;
            slope.back() = cur;
            last = t;
        }
    }
    std::int64_t at(std::int64_t t) const {
        const auto it = std::upper_bound(x.begin(), x.end(), t);
        if (it == x.begin()) return 0;
        const std::size_t i = static_cast<std::size_t>(it - x.begin()) - 1;
        return f[i] + slope[i] * (t - x[i]);
    }
    std::int64_t total(std::int64_t a, std::int64_t b) const { return b > a ? at(b) - at(a) : 0; }
};

struct Shifts {
    struct Change {
        std::int64_t t0, t1, old_v, new_v;
    };
    std::vector<Change> ch;  // one stepper thread: ordered, not overlapping
    // The range of shifts possibly in effect at some time in [a, b].
    void range(std::int64_t a, std::int64_t b, std::int64_t& lo, std::int64_t& hi) const {
        std::int64_t v = ch.empty() ? 0 : ch[0].old_v;
        lo = hi = kInf;
        bool any = false;
        auto take = [&](std::int64_t x) {
            if (!any) lo = hi = x, any = true;
            lo = std::min(lo, x);
            hi = std::max(hi, x);
        };
        // value v_i set by change i is visible from ch[i].t0 until ch[i+1].t1.
        for (std::size_t i = 0; i <= ch.size(); ++i) {
            const std::int64_t from = i == 0 ? -kInf : ch[i - 1].t0;
            const std::int64_t until = i == ch.size() ? kInf : ch[i].t1;
            const std::int64_t val = i == 0 ? v : ch[i - 1].new_v;
            if (from <= b && until >= a) take(val);
        }
        if (!any) lo = hi = 0;
    }
    // The first CLOCK_MONOTONIC time t >= from from which the wall clock
    // (mono + offset + shift) surely stays at or past `deadline` for `hold`
    // ns (each change counted only once its call returned, the smaller value
    // while it was in flight): a timer due then that the library did not fire
    // within `hold` is late. A step back before that restarts the wait, as it
    // may for the library (never early).
    std::int64_t first_reach(std::int64_t deadline, std::int64_t offset, std::int64_t from, std::int64_t hold) const {
        struct Seg {
            std::int64_t begin, value;
        };
        std::vector<Seg> segs;
        segs.push_back({-kInf, ch.empty() ? 0 : ch[0].old_v});
        for (const Change& c : ch) {
            segs.push_back({c.t0, std::min(c.old_v, c.new_v)});
            segs.push_back({c.t1, c.new_v});
        }
        std::int64_t since = -1;  // the wall clock has been past the deadline since then
        bool have = false;
        for (std::size_t i = 0; i < segs.size(); ++i) {
            const std::int64_t end = i + 1 < segs.size() ? segs[i + 1].begin : kInf;
            if (end <= from) continue;
            const std::int64_t b = std::max(from, segs[i].begin);
            const std::int64_t t = std::max(b, deadline - offset - segs[i].value);  // reached within this segment at t
            if (t > b) have = false;  // below the deadline at the segment's start: the wait (re)starts
            if (t < end && !have) since = t, have = true;
            if (have && (end == kInf || end - since >= hold)) return since;
        }
        return kInf;
    }
};

struct Checker {
    const Config& cfg;
    const std::vector<TimerInfo>& timers;
    std::vector<Event> ev;
    Shifts shifts;
    std::vector<std::vector<std::size_t>> by_key;  // event indexes per key, by t0
    std::int64_t shutdown_t0 = kInf, shutdown_t1 = kInf;
    std::int64_t base = 0;
    std::size_t found = 0;
    unsigned max_reports;
    std::map<std::uint64_t, std::vector<const Event*>> group_stops;  // by group, by t0 (result >= 0, or in flight)
    Injected inj;                      // the delays injected into the runtime's own threads
    // Per delivery queue: the calls of callers that may hold that queue's
    // transition mutex -- a stop or reset of a timer bound to it (its CAS
    // under the mutex: BoundTransition), or a group stop (it stops bound
    // timers one by one). A caller preempted or frozen there holds back that
    // queue's deliveries and runs (both need the mutex: the documented
    // exception of the progress rule, runtime.hpp "Progress"), never another
    // queue's nor a worker's timers.
    std::vector<Injected> qlock;
    // The machine's stalls: the late wake-ups of a heartbeat thread pinned to
    // each CPU (Delay::site); a run may be late by the worst CPU's.
    struct Stalls {
        std::vector<Injected> per_cpu;
        std::int64_t total(std::int64_t a, std::int64_t b) const {
            std::int64_t m = 0;
            for (const Injected& i : per_cpu) m = std::max(m, i.total(a, b));
            return m;
        }
    } stalls;
    std::vector<std::int64_t> excess;  // per judged run: its start past (due + injected), ns (the slack's measure)
    std::int64_t worst_inj = 0;        // the largest injected delay a judged run was allowed
    std::int64_t worst_late = 0, worst_at = 0;  // that run: how late (past due), when
    std::uint32_t worst_key = 0;
    struct ProbeLate {
        std::int64_t late, inj, stall;
    };
    std::vector<ProbeLate> probe_late;  // the quiet phases' probes: how late, what was injected meanwhile

    Checker(const Config& c, const std::vector<TimerInfo>& t, std::vector<Event> e, unsigned m)
        : cfg(c), timers(t), ev(std::move(e)), max_reports(m) {}

    const TimerInfo& info(std::uint32_t key) const { return timers[key - 1]; }
    bool realtime(std::uint32_t key) const { return info(key).clock == TW_CLOCK_REALTIME; }
    std::int64_t offset(std::uint32_t key) const {
        const int c = info(key).clock;
        return c == TW_CLOCK_BOOTTIME ? cfg.boot_offset : c == TW_CLOCK_REALTIME ? cfg.real_offset : 0;
    }

    // ---- reporting -----------------------------------------------------------------
    double ms(std::int64_t t) const { return static_cast<double>(t - base) / 1e6; }
    void print_event(const Event& e, std::uint32_t focus) const {
        std::string fl;
        if (e.flags & kAbs) fl += " abs";
        if (e.flags & kSync) fl += " sync";
        if (e.flags & kStaleId) fl += " STALE-ID";
        if (e.flags & kInCb) fl += " from-own-callback";
        if (e.flags & kInBatch) fl += " batch";
        if (is_open(e)) {
            std::printf("    [%10.3f ..   (never) ] thread %2u %-9s %-8s key %-6u id %016" PRIx64 "%s IN FLIGHT FOR EVER (its thread froze or hung)",
                        ms(e.t0), e.thread, e.tkind == kWorker ? "(worker)" : "", kind_name(e.kind), e.key, e.id, fl.c_str());
            if (e.kind == kStart || e.kind == kReset) {
                if (e.flags & kAbs) std::printf(" deadline %" PRId64 " (own clock)", e.arg);
                else std::printf(" delay %.3f ms", static_cast<double>(e.arg) / 1e6);
            }
            std::printf("\n");
            return;
        }
        std::printf("    [%10.3f .. %10.3f ms] thread %2u %-9s %-8s key %-6u id %016" PRIx64 "%s", ms(e.t0), ms(e.t1),
                    e.thread, e.tkind == kWorker ? "(worker)" : e.tkind == kRunner ? "(runner)" : e.tkind == kMain ? "(main)" : "",
                    kind_name(e.kind), e.key, e.id, fl.c_str());
        if (e.key != focus && e.key != 0) std::printf(" (another timer of this slot)");
        switch (e.kind) {
            case kStart:
            case kReset:
                if (e.flags & kAbs) std::printf(" deadline %" PRId64 " (own clock)", e.arg);
                else std::printf(" delay %.3f ms", static_cast<double>(e.arg) / 1e6);
                std::printf(" -> %d", e.result);
                break;
            case kStop:
            case kNested:
            case kQueueLeft: std::printf(" -> %d", e.result); break;
            case kGroupStop: std::printf(" group %" PRId64 " -> %d", e.arg, e.result); break;
            case kRun:
                std::printf(" own clock at entry %" PRId64 "%s", e.own0, e.queue >= 0 ? "" : "");
                if (e.queue >= 0) std::printf(" in queue %d", e.queue);
                break;
            case kRelease:
                if (e.queue >= 0) std::printf(" in queue %d", e.queue);
                if (e.in_op) std::printf(" inside %s", kind_name(static_cast<std::uint8_t>(e.in_op - 1)));
                break;
            case kShift:
                std::printf(" shift %.3f -> %.3f ms", static_cast<double>(e.own0) / 1e6, static_cast<double>(e.arg) / 1e6);
                break;
            case kQuery:
                std::printf(" -> %d", e.result);
                if (e.result == TW_OK)
                    std::printf(" state %d deadline %" PRIu64 " (own clock; read %" PRId64 "..%" PRId64 ") runs %u missed %u period %" PRIu64
                                " leeway %" PRIu64 " group %" PRIu64 " clock %d",
                                e.q_state, e.q_deadline, e.own0, e.own1, e.q_runs, e.q_missed, e.q_period, e.q_leeway, e.q_group,
                                e.q_clock);
                break;
            default: break;
        }
        std::printf("\n");
    }
    void report(std::uint32_t key, const char* fmt, ...) __attribute__((format(printf, 3, 4))) {
        ++found;
        if (found > max_reports) return;
        std::printf("VIOLATION %zu: ", found);
        va_list ap;
        va_start(ap, fmt);
        std::vprintf(fmt, ap);
        va_end(ap);
        std::printf("\n");
        if (key == 0) return;
        const TimerInfo& ti = info(key);
        std::printf("  timer key %u: clock %s, %s%s, group %" PRIu64 ", %s%s, leeway %" PRIu64 " ns\n", key,
                    ti.clock == 0 ? "MONOTONIC" : ti.clock == 1 ? "BOOTTIME" : "REALTIME",
                    ti.period == 0 ? "one-shot" : ti.policy == 0 ? "SKIP" : ti.policy == 1 ? "DELAY" : "BURST",
                    ti.period == 0 ? "" : (" period " + std::to_string(ti.period / 1000) + " us").c_str(), ti.group,
                    ti.queue >= 0 ? "queue " : "workers", ti.queue >= 0 ? std::to_string(ti.queue).c_str() : "", ti.leeway);
        // The slot (shard + index) of its ids: every call on any id of it, in call order.
        std::uint64_t slot = 0;
        for (const std::size_t i : by_key[key])
            if (ev[i].id != 0) slot = ev[i].id & 0xFFFFFFFFFFull;
        // The timer's life (its own events), widened a little, bounds what else is shown.
        std::int64_t from = kInf, until = -kInf;
        for (const std::size_t i : by_key[key])
            if ((ev[i].flags & kStaleId) == 0)
                from = std::min(from, ev[i].t0), until = std::max(until, is_open(ev[i]) ? ev[i].t0 : ev[i].t1);
        from -= 20'000'000;
        until += 20'000'000;
        // Its group's stops: those within 1 ms of one of its own events, and the
        // first one after each of its armings.
        std::vector<std::pair<std::int64_t, std::int64_t>> own;
        for (const std::size_t i : by_key[key])
            if ((ev[i].flags & kStaleId) == 0) own.emplace_back(ev[i].t0, is_open(ev[i]) ? ev[i].t0 : ev[i].t1);
        std::vector<const Event*> firsts;
        if (ti.group != 0)
            if (const auto it = group_stops.find(ti.group); it != group_stops.end())
                for (const std::size_t i : by_key[key])
                    if (is_arm(ev[i]))
                        for (const Event* g : it->second)
                            if (g->t0 > ev[i].t1) {
                                firsts.push_back(g);
                                break;
                            }
        auto relevant_group_stop = [&](const Event& e) {
            if (ti.group == 0 || static_cast<std::uint64_t>(e.arg) != ti.group) return false;
            if (std::find(firsts.begin(), firsts.end(), &e) != firsts.end()) return true;
            for (const auto& [a, b] : own)
                if (e.t1 >= a - 1'000'000 && e.t0 <= b + 1'000'000) return true;
            return false;
        };
        std::vector<std::size_t> idx;
        for (std::size_t i = 0; i < ev.size(); ++i) {
            const Event& e = ev[i];
            const bool near = e.t1 >= from && e.t0 <= until;
            if ((e.key == key && (e.flags & kStaleId) == 0) ||
                (near && ((slot != 0 && e.id != 0 && (e.id & 0xFFFFFFFFFFull) == slot) ||
                          (e.kind == kGroupStop && relevant_group_stop(e)) || (e.kind == kShift && realtime(key)))))
                idx.push_back(i);
        }
        std::printf("  its history (times from the run's start; the slot's other timers and its group's stops included):\n");
        std::size_t shown = 0;
        for (const std::size_t i : idx) {
            if (++shown > 80) {
                std::printf("    ... %zu more\n", idx.size() - 80);
                break;
            }
            print_event(ev[i], key);
        }
    }

    // ---- the model ----------------------------------------------------------------
    // The own-clock deadline bounds an arming allows.
    void arm_bounds(const Event& a, std::int64_t& lb, std::int64_t& ub) const {
        const TimerInfo& ti = info(a.key);
        std::int64_t slo = 0, shi = 0;
        if (realtime(a.key)) shifts.range(a.t0, a.t1, slo, shi);
        const std::int64_t slack = cfg.resolution_ns + static_cast<std::int64_t>(ti.leeway);
        if (a.flags & kAbs) {
            lb = a.arg;
            ub = a.arg + slack;
        } else {
            lb = a.own0 + slo + a.arg;
            ub = a.own1 + shi + a.arg + slack;
        }
        if (is_open(a)) ub = kInf;  // it may take effect at any time, or never
    }

    struct Runs {
        std::vector<std::size_t> runs, arms, stops;
    };

    // begin_lb(run j): the run began after this (the previous run's callback returned).
    static std::int64_t begin_lb(const std::vector<const Event*>& runs, std::size_t j, std::int64_t start_t0) {
        return j == 0 ? start_t0 : runs[j - 1]->t1;
    }

    struct Bound {
        bool any = false;
        std::int64_t lb = kInf;   // own clock: the run may not begin before (library's reading)
        std::int64_t ub_mono = 0; // mono: the run must begin by (before --late)
        const Event* from = nullptr;
        // Given the run's own-clock reading (bounds()' own0): how early it is
        // against the arming it is least early for, each arming judged with
        // the wall-clock steps since its own call (a run judged due before a
        // step back, its arming's deadline then reached, and a reset in
        // flight whose deadline is earlier but came after the step, is not
        // early: the reset's shift allowance alone said it was). > 0: early
        // against every arming it may serve.
        std::int64_t early = -kInf;
        std::int64_t early_lb = 0, early_shi = 0;
    };

    // How long the wall clock must stay past a wall-clock timer's deadline
    // before a run is owed: the re-clock pass and the slack, and every delay
    // the run is allowed (injected into the runtime's threads, the machine's
    // stalls) over [from, t]. A step back within that time restarts the wait,
    // as it may for the library: a driver held back by an injected delay
    // until after the step finds the deadline not reached (before, the hold
    // was the pass and the slack alone, and such a run was reported LATE by
    // the delays it was allowed: seed 3 at load 14, 4 timers).
    std::int64_t reach_hold(std::int64_t from, std::int64_t t) const {
        const std::int64_t to = t >= kInf ? from + 60'000'000'000 : t;
        return cfg.slack_ns + kReclockNs + inj.total(from, to) + stalls.total(from, to);
    }

    // The bounds for a run (or, for the final check, a virtual run) at
    // entry time `t`, given runs[0..j) before it.
    Bound bounds(std::uint32_t key, const std::vector<const Event*>& arms, const std::vector<const Event*>& runs,
                 std::size_t j, std::int64_t t, std::int64_t start_t0, const std::int64_t* own0 = nullptr) const {
        const TimerInfo& ti = info(key);
        const bool periodic = ti.period != 0;
        const std::int64_t P = static_cast<std::int64_t>(ti.period);
        const std::int64_t blb = begin_lb(runs, j, start_t0);
        Bound b;
        // Arms are in call order (t0); walk back from the last one called before
        // the run's entry. An arming is superseded when a later one returned before
        // the run could begin (and was called after this one returned); once even
        // the longest arming call ends before such a later call began, all earlier
        // ones are superseded too.
        std::size_t end = static_cast<std::size_t>(
            std::lower_bound(arms.begin(), arms.end(), t, [](const Event* e, std::int64_t v) { return e->t0 < v; }) -
            arms.begin());
        std::int64_t longest = 0;
        for (const Event* e : arms) longest = std::max(longest, e->t1 - e->t0);
        std::int64_t max_b0 = -kInf;  // the latest call of an arming that returned before blb
        for (std::size_t ai = end; ai-- > 0;) {
            const Event& a = *arms[ai];
            if (a.t0 + longest < max_b0) break;
            const bool superseded = a.t1 < max_b0;
            if (a.t1 < blb) max_b0 = std::max(max_b0, a.t0);
            if (superseded) continue;
            // Runs definitely begun after this arming returned (begin_lb grows with m).
            std::size_t lo = 0, hi = j;
            while (lo < hi) {
                const std::size_t mid = (lo + hi) / 2;
                if (begin_lb(runs, mid, start_t0) > a.t1) hi = mid;
                else lo = mid + 1;
            }
            // Every run of a timer began after its start published it.
            const std::size_t i_min = a.kind == kStart ? j : j - lo;
            // Runs whose callback began after the arming's call did: they may have begun after it.
            const std::size_t first_may = static_cast<std::size_t>(
                std::upper_bound(runs.begin(), runs.begin() + static_cast<std::ptrdiff_t>(j), a.t0,
                                 [](std::int64_t v, const Event* e) { return v < e->t0; }) -
                runs.begin());
            const std::size_t i_max = j - first_may;
            if (!periodic && i_min > 0) continue;  // a one-shot's arming is consumed by its run
            std::int64_t lb0, ub0;
            arm_bounds(a, lb0, ub0);
            std::int64_t slo = 0, shi = 0;
            if (realtime(key)) shifts.range(a.t0, t, slo, shi);
            const std::int64_t off = offset(key);
            std::int64_t lb = kInf, ub_mono = -kInf;
            if (i_min == 0) {  // it may be the arming's first run
                lb = lb0;
                ub_mono = ub0 >= kInf ? kInf
                          : std::max(a.t1, realtime(key) ? shifts.first_reach(ub0, off, a.t0, reach_hold(a.t0, t)) + kReclockNs
                                                         : ub0 - off);
            }
            if (periodic && i_max >= 1) {  // it may be a later one
                const Event& prev = *runs[j - 1];
                if (ti.policy == TW_PERIOD_DELAY) {
                    // the previous run's end (the library reads after it) plus the period
                    std::int64_t plo = 0, phi = 0;
                    if (realtime(key)) shifts.range(prev.t1, t, plo, phi);
                    lb = std::min(lb, prev.own1 + plo + P);
                } else {
                    lb = std::min(lb, lb0 + static_cast<std::int64_t>(std::max<std::size_t>(i_min, 1)) * P);
                }
                ub_mono = std::max(ub_mono, prev.t1 + P + cfg.resolution_ns + (realtime(key) ? (shi - slo) + kReclockNs : 0));
            }
            if (own0 != nullptr && lb != kInf) {
                const std::int64_t e = lb - (*own0 + shi);
                if (b.early == -kInf || e < b.early) b.early = e, b.early_lb = lb, b.early_shi = shi;
            }
            if (!b.any || lb < b.lb) b.lb = lb, b.from = &a;
            b.ub_mono = b.any ? std::max(b.ub_mono, ub_mono) : ub_mono;
            b.any = true;
        }
        return b;
    }

    void check_timer(std::uint32_t key) {
        const TimerInfo& ti = info(key);
        const bool periodic = ti.period != 0;
        std::vector<const Event*> arms, runs, releases, stops, queries, all;
        const Event* start = nullptr;
        bool open_any = false;  // a call on it never returned (a frozen or hung caller)
        for (const std::size_t i : by_key[key]) {
            const Event& e = ev[i];
            if (e.flags & kStaleId) continue;  // the old timer of a stale id: judged on the slot's new timer
            all.push_back(&e);
            open_any = open_any || is_open(e);
            if (e.kind == kStart) start = &e;
            if (is_arm(e)) arms.push_back(&e);
            if (e.kind == kRun) runs.push_back(&e);
            if (e.kind == kRelease) releases.push_back(&e);
            if (e.kind == kStop) stops.push_back(&e);
            if (e.kind == kQuery) queries.push_back(&e);
        }
        if (start == nullptr) return;
        // (A group stop of its group in flight for ever may have stopped it, its release hook held back.)
        if (ti.group != 0)
            if (const auto it = group_stops.find(ti.group); it != group_stops.end())
                for (const Event* g : it->second) open_any = open_any || is_open(*g);
        // Release exactly once (start failures other than EINVAL/EFORKED too).
        // A start in flight for ever may or may not have made the timer; a
        // call in flight for ever may hold its release back (a stop frozen
        // after its CAS), and a record whose shutdown never returned has no
        // releases of the timers still pending: at most once, then.
        const bool started = start->result == TW_OK || is_open(*start);
        const bool hooked = started || start->result == TW_ESHUTDOWN || start->result == TW_EAGAIN ||
                            start->result == TW_ENOMEM || start->result == -1;
        if (open_any || !cfg.complete) {
            if (releases.size() > 1) {
                report(key, "release hook ran %zu times: at most once (a call on it is in flight for ever, or the"
                            " record ends before shutdown returned)", releases.size());
                return;
            }
        } else if (hooked && releases.size() != 1) {
            report(key, "release hook ran %zu times (start returned %d): exactly once is the contract", releases.size(),
                   start->result);
            return;
        }
        if (!hooked && !releases.empty()) {
            report(key, "release hook ran although start returned %d", start->result);
            return;
        }
        if (!started) {
            // (a query on it: ENOENT, judged with the stale ids: the producers query published timers only)
            if (!runs.empty()) report(key, "a timer whose start failed (%d) ran", start->result);
            else if (!releases.empty() && releases[0]->t0 > start->t1)
                report(key, "the release hook of a failed start ran after start returned");
            return;
        }
        Event none;  // no release (yet): see above
        none.t0 = none.t1 = kInf;
        const Event& rel = releases.empty() ? none : *releases[0];
        const bool has_rel = !releases.empty();
        // Runs never overlap; release after the last run; nothing after shutdown.
        for (std::size_t j = 0; j < runs.size(); ++j) {
            if (j > 0 && runs[j]->t0 < runs[j - 1]->t1) {
                report(key, "two runs overlap (entries at %.3f and %.3f ms)", ms(runs[j - 1]->t0), ms(runs[j]->t0));
                return;
            }
            if (runs[j]->t1 > rel.t0) {
                report(key, "a run at %.3f ms ended after the release hook began (%.3f ms)", ms(runs[j]->t0), ms(rel.t0));
                return;
            }
            if (runs[j]->t0 > shutdown_t1) {
                report(key, "a run at %.3f ms began after tw_runtime_shutdown returned", ms(runs[j]->t0));
                return;
            }
            // Context: a queue's timers on a runner inside its queue, the others on workers.
            // (oneTBB may lend a waiting shutdown thread to the arena: accepted there.)
            const bool worker = runs[j]->tkind == kWorker || (runs[j]->tkind == kMain && runs[j]->in_op == kShutdown + 1);
            if (ti.queue >= 0 ? runs[j]->queue != ti.queue : !worker) {
                report(key, "run at %.3f ms on the wrong thread (thread kind %u, inside queue %d; expected %s %d)",
                       ms(runs[j]->t0), runs[j]->tkind, runs[j]->queue, ti.queue >= 0 ? "queue" : "a worker", ti.queue);
                return;
            }
        }
        if (has_rel && rel.t0 > shutdown_t1) {
            report(key, "release hook after tw_runtime_shutdown returned");
            return;
        }
        if (has_rel && ti.queue >= 0 && rel.tkind == kWorker && rel.in_op == 0 && rel.queue < 0) {
            report(key, "a queue-bound timer's release hook ran on a worker, outside any call");
            return;
        }
        if (has_rel && ti.queue >= 0 && rel.queue >= 0 && rel.queue != ti.queue && rel.in_op == 0) {
            report(key, "a queue-bound timer's release hook ran inside another queue's run (%d)", rel.queue);
            return;
        }
        // A one-shot runs once per arming at most (a reset of a pending one
        // arms without adding a run).
        if (!periodic && runs.size() > arms.size()) {
            report(key, "a one-shot ran %zu times with %zu armings (start and resets that returned TW_OK)", runs.size(),
                   arms.size());
            return;
        }
        // Never early, and lateness.
        std::vector<std::int64_t> begin_lo(runs.size());  // each run began after this (CLOCK_MONOTONIC)
        for (std::size_t j = 0; j < runs.size(); ++j) {
            const Event& r = *runs[j];
            const Bound b = bounds(key, arms, runs, j, r.t0, start->t0, &r.own0);
            begin_lo[j] = begin_lb(runs, j, start->t0);
            if (b.any && !realtime(key) && b.lb < kInf) begin_lo[j] = std::max(begin_lo[j], b.lb - offset(key) - cfg.resolution_ns);
            if (!b.any) {
                report(key, "run at %.3f ms serves no arming: a one-shot ran twice, or after a stop", ms(r.t0));
                return;
            }
            if (b.early > 0) {
                report(key, "EARLY: run at %.3f ms read its clock at %" PRId64 " (+ shift <= %" PRId64
                            "), before the earliest deadline it may serve, %" PRId64 " (%.3f ms early)",
                       ms(r.t0), r.own0, b.early_shi, b.early_lb, static_cast<double>(b.early) / 1e6);
                return;
            }
            // Timeliness: by the latest time it was due (deadline, tick, leeway), plus
            // the delays injected into the runtime's own threads since then, plus
            // the machine's slack. Never the callers' delays.
            if (b.ub_mono < kInf && r.t0 > b.ub_mono) {
                const int q = ti.queue;
                const std::int64_t d = inj.total(b.ub_mono, r.t0) +
                                       (q >= 0 && static_cast<std::size_t>(q) < qlock.size()
                                            ? qlock[static_cast<std::size_t>(q)].total(b.ub_mono, r.t0)
                                            : 0);
                const std::int64_t m = stalls.total(b.ub_mono, r.t0);
                excess.push_back(r.t0 - b.ub_mono - d - m);
                if (d > worst_inj) worst_inj = d, worst_late = r.t0 - b.ub_mono, worst_key = key, worst_at = r.t0;
                if (ti.probe) probe_late.push_back({r.t0 - b.ub_mono, d, m});
                if (r.t0 > b.ub_mono + d + m + cfg.slack_ns) {
                    report(key, "LATE: run at %.3f ms, %.3f ms after the latest time it was due (%.3f ms): past the bound"
                                " by %.3f ms (bound: due + %.3f ms injected into the runtime's threads meanwhile, and for a"
                                " queue's timer callers' calls holding its mutex, + %.3f ms the machine stalled + slack %.0f ms)",
                           ms(r.t0), static_cast<double>(r.t0 - b.ub_mono) / 1e6, ms(b.ub_mono),
                           static_cast<double>(r.t0 - b.ub_mono - d - m - cfg.slack_ns) / 1e6, static_cast<double>(d) / 1e6,
                           static_cast<double>(m) / 1e6, static_cast<double>(cfg.slack_ns) / 1e6);
                    return;
                }
            } else if (b.ub_mono < kInf) {
                excess.push_back(r.t0 - b.ub_mono);
            }
        }
        // Stops.
        for (const Event* s : stops) {
            const bool own = (s->flags & kInCb) != 0;
            if (s->result == TW_OK || ((s->flags & kSync) && s->result == TW_ENOENT && !own)) {
                const bool sync = (s->flags & kSync) != 0 && !own;  // from its own callback it does not wait
                for (std::size_t j = 0; j < runs.size(); ++j) {
                    const Event& r = *runs[j];
                    if (r.t0 <= s->t1) continue;
                    // stop_sync: nothing runs after it returns. stop: a one-shot never
                    // again; a periodic timer's run in progress (begun before the stop,
                    // its callback's entry possibly after) is the last: a run whose
                    // predecessor ended after the stop returned began after it.
                    const bool bad = sync || !periodic || (j > 0 && runs[j - 1]->t1 > s->t1);
                    if (bad) {
                        report(key, "run at %.3f ms after %s returned %d at %.3f ms", ms(r.t0),
                               (s->flags & kSync) ? "stop_sync" : "stop", s->result, ms(s->t1));
                        return;
                    }
                }
                for (const Event* a : arms)
                    if (a->t0 > s->t1 && s->result == TW_OK && !is_open(*a)) {
                        report(key, "reset returned TW_OK at %.3f ms after a stop returned TW_OK at %.3f ms", ms(a->t1),
                               ms(s->t1));
                        return;
                    }
                if ((s->flags & kSync) && !own && (s->result == TW_OK || rel.t0 < s->t0) && rel.t1 > s->t1) {
                    report(key, "stop_sync returned %d at %.3f ms before the release hook returned (%.3f ms)", s->result,
                           ms(s->t1), ms(rel.t1));
                    return;
                }
            }
        }
        // Missed: a one-shot ended (its release hook ran) with nothing that could
        // stop it, so its last arming must have been served -- by a run whose
        // callback began after that arming was called and whose clock reading
        // reached that arming's deadline. (A claim that runs an item whose
        // reset moved it later runs it early for the reset and never again:
        // the early run is the start's, and the reset's run is missing.)
        if (!periodic && has_rel && !open_any && ti.queue < 16) {
            const Event* last = nullptr;
            for (const Event* a : arms)
                if (last == nullptr || a->t0 > last->t0) last = a;
            bool overlapped = false, ended_by_other = rel.t0 > shutdown_t0;
            for (const Event* a : arms)
                if (a != last && a->t1 > last->t0) overlapped = true;
            for (const Event* s : stops)
                if (s->t0 < rel.t1 && (s->result == TW_OK || is_open(*s))) ended_by_other = true;
            if (ti.group != 0)
                if (const auto it = group_stops.find(ti.group); it != group_stops.end())
                    for (const Event* g : it->second)
                        if (g->t0 < rel.t1) ended_by_other = true;
            if (last != nullptr && !overlapped && !ended_by_other) {
                std::int64_t lb, ub;
                arm_bounds(*last, lb, ub);
                bool served = false;
                for (const Event* r : runs) {
                    if (r->t0 <= last->t0) continue;
                    std::int64_t slo = 0, shi = 0;
                    if (realtime(key)) shifts.range(last->t0, r->t0, slo, shi);
                    if (r->own0 + shi >= lb) served = true;
                }
                if (!served) {
                    report(key, "MISSED: its last arming (%s at [%.3f .. %.3f ms], TW_OK, deadline >= %" PRId64
                                " on its clock) was never served -- no run that began after it was called reached that"
                                " deadline -- yet its release hook ran at %.3f ms with no stop, group stop or shutdown",
                           kind_name(last->kind), ms(last->t0), ms(last->t1), lb, ms(rel.t0));
                    return;
                }
            }
        }
        // Lost: no stop could have ended it, its deadline passed long before the end, and it never ran.
        bool maybe_stopped = false;
        for (const Event* s : stops)
            if (s->result == TW_OK || is_open(*s)) maybe_stopped = true;
        if (ti.group != 0)
            if (const auto it = group_stops.find(ti.group); it != group_stops.end())
                for (const Event* g : it->second)
                    if (g->t1 > start->t0) maybe_stopped = true;
        if (!maybe_stopped && rel.t0 > cfg.final_ns && (runs.empty() || runs.back()->t1 < cfg.final_ns)) {
            const Bound b = bounds(key, arms, runs, runs.size(), cfg.final_ns, start->t0);
            const std::int64_t d = b.any && b.ub_mono < cfg.final_ns ? inj.total(b.ub_mono, cfg.final_ns) : 0;
            const std::int64_t m = b.any && b.ub_mono < cfg.final_ns ? stalls.total(b.ub_mono, cfg.final_ns) : 0;
            // A queue's timer: also the callers' calls holding its mutex (a frozen
            // bound stop holds that queue's runs back: documented).
            const int qi = ti.queue;
            const std::int64_t ql = b.any && b.ub_mono < cfg.final_ns && qi >= 0 && static_cast<std::size_t>(qi) < qlock.size()
                                        ? qlock[static_cast<std::size_t>(qi)].total(b.ub_mono, cfg.final_ns)
                                        : 0;
            if (b.any && b.ub_mono < kInf && cfg.final_ns > b.ub_mono + d + m + ql + cfg.slack_ns)
                report(key, "LOST: due by %.3f ms at the latest, it had not run by the end of the load (%.3f ms): past the"
                            " bound by %.3f ms (bound: due + %.3f ms injected into the runtime's threads meanwhile + %.3f ms"
                            " callers held its queue's mutex + %.3f ms the machine stalled + slack %.0f ms)",
                       ms(b.ub_mono), ms(cfg.final_ns),
                       static_cast<double>(cfg.final_ns - b.ub_mono - d - m - ql - cfg.slack_ns) / 1e6,
                       static_cast<double>(d) / 1e6, static_cast<double>(ql) / 1e6, static_cast<double>(m) / 1e6,
                       static_cast<double>(cfg.slack_ns) / 1e6);
        }
        check_queries(key, start, arms, runs, begin_lo, stops, queries, rel);
    }

    void check_stale() {
        for (const Event& e : ev)
            if ((e.flags & kStaleId) && (e.kind == kStop || e.kind == kReset || e.kind == kQuery) && !is_open(e) &&
                e.result != TW_ENOENT && (e.result != TW_ESHUTDOWN || e.kind == kQuery))
                report(e.key, "a %s on a stale id returned %d (TW_ENOENT expected)", kind_name(e.kind), e.result);
    }

    // tw_timer_query against the model, as far as the record fixes it.
    void check_queries(std::uint32_t key, const Event* start, const std::vector<const Event*>& arms,
                       const std::vector<const Event*>& runs, const std::vector<std::int64_t>& begin_lo,
                       const std::vector<const Event*>& stops,
                       const std::vector<const Event*>& queries, const Event& rel) {
        if (queries.empty()) return;
        const TimerInfo& ti = info(key);
        const bool periodic = ti.period != 0;
        const std::int64_t res = cfg.resolution_ns;
        constexpr std::int64_t kTol = 100'000;  // the library's clock readings against ours (its fast clock reads ahead)
        // Whether something could have ended the timer (its word out of the live
        // states) before time x: a stop (TW_OK or in flight), a group stop of
        // its group, the shutdown, a one-shot's run that ended, a failed start.
        auto may_have_ended = [&](std::int64_t x) {
            if (start->t0 >= x) return true;  // (not started yet: not found)
            if (shutdown_t0 < x) return true;
            for (const Event* s : stops)
                if (s->t0 < x && (s->result == TW_OK || is_open(*s))) return true;
            if (ti.group != 0)
                if (const auto it = group_stops.find(ti.group); it != group_stops.end())
                    for (const Event* g : it->second)
                        if (g->t0 < x) return true;
            if (!periodic)
                for (const Event* r : runs)
                    if (r->t1 < x) return true;
            if (!is_open(*start) && start->result != TW_OK) return true;
            return false;
        };
        for (const Event* q : queries) {
            if (is_open(*q)) continue;
            const bool own_cb = (q->flags & kInCb) != 0;
            if (q->result != TW_OK) {
                if (own_cb && q->result == TW_ENOENT)
                    report(key, "QUERY: tw_timer_query from the timer's own callback [%.3f .. %.3f ms] returned %d: a"
                                " timer is live while its callback runs", ms(q->t0), ms(q->t1), q->result);
                else if (q->result != TW_ENOENT)
                    report(key, "QUERY: tw_timer_query [%.3f .. %.3f ms] returned %d (TW_OK or TW_ENOENT expected)", ms(q->t0),
                           ms(q->t1), q->result);
                else if (!may_have_ended(q->t1))
                    report(key, "QUERY: tw_timer_query [%.3f .. %.3f ms] said TW_ENOENT (not found) of a live timer: started"
                                " at %.3f ms, and no stop, group stop, run or shutdown could have ended it before the query returned",
                           ms(q->t0), ms(q->t1), ms(start->t1));
                else continue;
                return;
            }
            // Found: it was not released yet.
            if (rel.t0 < q->t0) {
                report(key, "QUERY: tw_timer_query [%.3f .. %.3f ms] found the timer after its release hook began (%.3f ms)",
                       ms(q->t0), ms(q->t1), ms(rel.t0));
                return;
            }
            // What it was started as.
            const std::uint64_t period = ti.period == 0 ? 0 : (ti.period + static_cast<std::uint64_t>(res) - 1) / static_cast<std::uint64_t>(res) * static_cast<std::uint64_t>(res);
            // missed: any count for a SKIP timer; for a BURST one only once more
            // than TW_BURST_MAX_OWED grid deadlines could be owed: the query's
            // own clock (+ the largest shift meanwhile) at least that many
            // periods past the earliest first deadline any of its armings
            // allows (a wall-clock step forward makes a burst owe the whole
            // jump: seen, 148 skipped after a +5.3 s step of a 3 ms timer);
            // none otherwise.
            bool missed_ok = q->q_missed == 0;
            if (periodic && ti.policy == TW_PERIOD_SKIP) missed_ok = true;
            if (periodic && ti.policy == TW_PERIOD_BURST && !missed_ok) {
                std::int64_t first = kInf;
                for (const Event* a : arms) {
                    if (a->t0 >= q->t1) break;
                    std::int64_t lb, ub;
                    arm_bounds(*a, lb, ub);
                    first = std::min(first, lb);
                }
                std::int64_t qlo = 0, qhi = 0;
                if (realtime(key)) shifts.range(start->t0, q->t1, qlo, qhi);
                const std::int64_t passed = q->own1 + qhi + kTol - first;
                missed_ok = first < kInf && passed >= 0 &&
                            static_cast<std::uint64_t>(passed) / period >= TW_BURST_MAX_OWED + q->q_missed;
            }
            if (q->q_clock != ti.clock || q->q_period != period || q->q_leeway != ti.leeway || q->q_group != ti.group ||
                !missed_ok) {
                report(key, "QUERY: tw_timer_query [%.3f .. %.3f ms] said clock %d period %" PRIu64 " leeway %" PRIu64
                            " group %" PRIu64 " missed %u; started as clock %d period %" PRIu64 " (rounded up: %" PRIu64
                            ") leeway %" PRIu64 " group %" PRIu64,
                       ms(q->t0), ms(q->t1), q->q_clock, q->q_period, q->q_leeway, q->q_group, q->q_missed, ti.clock, ti.period,
                       period, ti.leeway, ti.group);
                return;
            }
            if (q->q_state != TW_TIMER_PENDING && q->q_state != TW_TIMER_DUE && q->q_state != TW_TIMER_RUNNING) {
                report(key, "QUERY: tw_timer_query [%.3f .. %.3f ms] said state %d", ms(q->t0), ms(q->t1), q->q_state);
                return;
            }
            // Runs: those that may have begun before it returned (the previous one
            // had ended), and the one in progress.
            std::size_t may_begun = 0;
            bool may_run = false, surely_running = false;
            for (std::size_t j = 0; j < runs.size(); ++j) {
                const std::int64_t blb = j < begin_lo.size() ? begin_lo[j] : j == 0 ? start->t0 : runs[j - 1]->t1;
                if (blb < q->t1) ++may_begun;
                // (Its word leaves RUNNING after the callback returned: before the
                // next run begins, or its release hook.)
                const std::int64_t left = j + 1 < runs.size() ? runs[j + 1]->t0 : rel.t1;
                if (blb < q->t1 && left > q->t0) may_run = true;
                if (runs[j]->t0 <= q->t0 && runs[j]->t1 >= q->t1) surely_running = true;
            }
            if (cfg.complete && q->q_runs > may_begun) {
                report(key, "QUERY: tw_timer_query [%.3f .. %.3f ms] said %u runs; at most %zu could have begun by then",
                       ms(q->t0), ms(q->t1), q->q_runs, may_begun);
                return;
            }
            if (q->q_state == TW_TIMER_RUNNING && cfg.complete && (!may_run || q->q_runs == 0)) {
                report(key, "QUERY: tw_timer_query [%.3f .. %.3f ms] said RUNNING (runs %u), but no run of it was in"
                            " progress then", ms(q->t0), ms(q->t1), q->q_runs);
                return;
            }
            if (q->q_state != TW_TIMER_RUNNING && (surely_running || own_cb)) {
                report(key, "QUERY: tw_timer_query [%.3f .. %.3f ms]%s said state %d while its callback was running",
                       ms(q->t0), ms(q->t1), own_cb ? " from its own callback" : "", q->q_state);
                return;
            }
            if (q->q_state == TW_TIMER_RUNNING) continue;
            // Pending or due: the deadline against the query's own clock readings...
            const auto d = static_cast<std::int64_t>(q->q_deadline);
            std::int64_t slo = 0, shi = 0;
            if (realtime(key)) shifts.range(q->t0, q->t1, slo, shi);
            if (q->q_state == TW_TIMER_PENDING && d + kTol <= q->own0 + slo) {
                report(key, "QUERY: tw_timer_query [%.3f .. %.3f ms] said PENDING with deadline %" PRId64
                            ", which its clock had passed (%" PRId64 " + shift >= %" PRId64 ") when the query began",
                       ms(q->t0), ms(q->t1), d, q->own0, slo);
                return;
            }
            // (A due fixed-rate timer shows the next grid deadline, past the one it is due for.)
            const bool fixed_rate = periodic && ti.policy != TW_PERIOD_DELAY;
            // DUE: the clock reached the deadline at some time since the start
            // (then the driver may have handed it to the workers, and a handed
            // timer runs even if a wall-clock step back came after: the query
            // reads DISPATCHED as due). Seen: a wall-clock one-shot due, not run
            // for 46 ms (delays injected into the runtime's threads), the clock
            // stepped back 2.19 s, a query 1 ms later said DUE.
            std::int64_t since_lo = 0, since_hi = 0;
            if (realtime(key)) shifts.range(start->t0, q->t1, since_lo, since_hi);
            if (q->q_state == TW_TIMER_DUE && !fixed_rate && d > q->own1 + std::max(shi, since_hi) + kTol) {
                report(key, "QUERY: tw_timer_query [%.3f .. %.3f ms] said DUE with deadline %" PRId64
                            ", which its clock had not reached (%" PRId64 " + shift <= %" PRId64 ") when the query returned",
                       ms(q->t0), ms(q->t1), d, q->own1, shi);
                return;
            }
            // ...and against the armings that may be in force: not superseded (by
            // one called after it returned and that returned before the query
            // began), called before the query returned. A one-shot's deadline is
            // its arming's (rounded up to the tick, without the leeway); a
            // periodic timer's is never before its arming's first deadline.
            std::int64_t lo = kInf, hi = -kInf;
            bool any = false;
            // a is superseded iff some b returned before the query began and was called after a returned.
            std::int64_t sup = -kInf;
            for (const Event* b : arms)
                if (b->t1 < q->t0) sup = std::max(sup, b->t0);
            for (const Event* a : arms) {
                if (a->t0 >= q->t1) break;
                if (a->t1 < sup) continue;
                std::int64_t lb, ub;
                arm_bounds(*a, lb, ub);
                any = true;
                lo = std::min(lo, lb);
                if (ub >= kInf) hi = kInf;
                else if (hi < kInf) hi = std::max(hi, ub - static_cast<std::int64_t>(ti.leeway) + kTol);
            }
            if (!any) continue;
            if (d + kTol < lo || (!periodic && d > hi)) {
                report(key, "QUERY: tw_timer_query [%.3f .. %.3f ms] said %s with deadline %" PRId64 " (own clock); the armings"
                            " that may be in force allow %" PRId64 " .. %s",
                       ms(q->t0), ms(q->t1), q->q_state == TW_TIMER_PENDING ? "PENDING" : "DUE", d, lo,
                       periodic ? "(any later grid deadline)" : std::to_string(hi).c_str());
                return;
            }
            (void)res;
        }
    }

    void check_groups() {
        // Per group stop: how many of the group's timers it had to stop.
        std::unordered_map<const Event*, std::int64_t> covered;
        for (std::uint32_t k = 1; k <= timers.size(); ++k) {
            const TimerInfo& ti = info(k);
            if (ti.group == 0 || ti.clock == TW_CLOCK_REALTIME) continue;
            const auto it = group_stops.find(ti.group);
            if (it == group_stops.end()) continue;
            const std::vector<const Event*>& gs = it->second;
            std::vector<const Event*> arms, runs, ops;
            for (const std::size_t i : by_key[k]) {
                const Event& e = ev[i];
                if (e.flags & kStaleId) continue;
                if (is_arm(e)) arms.push_back(&e);
                if (e.kind == kRun) runs.push_back(&e);
                if (e.kind == kStart || e.kind == kStop || e.kind == kReset) ops.push_back(&e);
            }
            for (std::size_t ai = 0; ai < arms.size(); ++ai) {
                const Event* a = arms[ai];
                // The first group stop of the group that ends after the arming began: it
                // must begin after the arming returned (else it may not see it).
                const auto first = std::find_if(gs.begin(), gs.end(), [&](const Event* g) { return g->t1 > a->t0; });
                if (first == gs.end() || (*first)->t0 <= a->t1) continue;
                const Event* s = *first;
                // Nothing else acted on the timer from the arming to the group stop's end.
                bool busy = false;
                for (const Event* o : ops)
                    if (o != a && o->t1 > a->t0 && o->t0 < s->t1) busy = true;
                if (busy) continue;
                // Its deadline had not come when the group stop returned: no run of
                // it could have begun (never early), so it was pending throughout.
                std::int64_t lb, ub;
                arm_bounds(*a, lb, ub);
                if (lb - offset(k) <= s->t1 + 2'000'000) continue;
                ++covered[s];
                for (std::size_t j = 0; j < runs.size(); ++j) {
                    const std::int64_t blb = j == 0 ? -kInf : runs[j - 1]->t1;
                    if ((a->kind == kStart || blb > a->t1) && runs[j]->t0 > s->t1) {
                        report(k, "GROUP: run at %.3f ms after tw_group_stop(%" PRIu64 ") [%.3f .. %.3f ms] that had to"
                                  " stop it (armed at %.3f ms, not yet due, nothing else acted on it)",
                               ms(runs[j]->t0), ti.group, ms(s->t0), ms(s->t1), ms(a->t1));
                        break;
                    }
                }
            }
        }
        for (auto& [g, gs] : group_stops)
            for (const Event* s : gs) {
                const auto c = covered.find(s);
                if (c == covered.end() || is_open(*s)) continue;
                bool overlapped = false;
                for (const Event* o : gs)
                    if (o != s && o->t0 < s->t1 && o->t1 > s->t0) overlapped = true;
                if (!overlapped && s->result < c->second)
                    report(0, "GROUP: tw_group_stop(%" PRIu64 ") [%.3f .. %.3f ms] returned %d, but %" PRId64
                              " timers of the group were pending throughout it",
                           g, ms(s->t0), ms(s->t1), s->result, c->second);
            }
    }

    // The timeliness margin: how far past (due + injected delays) the runs
    // began, against the slack (what the machine needed, measured).
    void summarize() {
        std::size_t rt_delays = 0, caller_delays = 0, machine = 0;
        std::int64_t rt_ns = 0, caller_ns = 0, machine_ns = 0, machine_max = 0;
        for (const Delay& d : cfg.delays) {
            const std::int64_t len = std::max<std::int64_t>(std::min(d.t1, cfg.final_ns) - d.t0, 0);
            if (d.cls == Delay::kCaller) ++caller_delays, caller_ns += len;
            else if (d.cls == Delay::kMachine) ++machine, machine_ns += len, machine_max = std::max(machine_max, len);
            else ++rt_delays, rt_ns += len;
        }
        std::sort(excess.begin(), excess.end());
        auto pct = [&](double p) {
            if (excess.empty()) return 0.0;
            const std::size_t i = std::min(excess.size() - 1, static_cast<std::size_t>(p * static_cast<double>(excess.size())));
            return static_cast<double>(excess[i]) / 1e6;
        };
        std::printf("tw_stress history: timeliness: %zu runs judged; begun past (due + injected delays) by p50 %.3f, p99 %.3f,"
                    " p99.9 %.3f, max %.3f ms (slack %.0f ms); the most injected delay a run was allowed: %.3f ms (key %u,"
                    " run at %.3f ms, %.3f ms past due)\n",
                    excess.size(), pct(0.5), pct(0.99), pct(0.999), excess.empty() ? 0.0 : static_cast<double>(excess.back()) / 1e6,
                    static_cast<double>(cfg.slack_ns) / 1e6, static_cast<double>(worst_inj) / 1e6, worst_key, ms(worst_at),
                    static_cast<double>(worst_late) / 1e6);
        std::printf("tw_stress history: injected delays: %zu into the runtime's threads (%.1f ms, counted), %zu into callers"
                    " (%.1f ms up to the end of the load, never counted)\n",
                    rt_delays, static_cast<double>(rt_ns) / 1e6, caller_delays, static_cast<double>(caller_ns) / 1e6);
        {
            std::int64_t by_cls[3] = {}, by_what[128] = {};
            for (const Delay& d : cfg.delays)
                if (d.cls < Delay::kCaller) {
                    const std::int64_t len = std::max<std::int64_t>(std::min(d.t1, cfg.final_ns) - d.t0, 0);
                    by_cls[d.cls] += len;
                    by_what[static_cast<unsigned char>(d.what) & 127] += len;
                }
            std::printf("tw_stress history: injected into the runtime's threads: drivers %.1f, workers %.1f, runners %.1f ms;"
                        " parks %.1f, sleeps %.1f, yields %.1f, slow callbacks %.1f ms\n",
                        static_cast<double>(by_cls[0]) / 1e6, static_cast<double>(by_cls[1]) / 1e6, static_cast<double>(by_cls[2]) / 1e6,
                        static_cast<double>(by_what[static_cast<unsigned char>('p')]) / 1e6,
                        static_cast<double>(by_what[static_cast<unsigned char>('s')]) / 1e6,
                        static_cast<double>(by_what[static_cast<unsigned char>('y')]) / 1e6,
                        static_cast<double>(by_what[static_cast<unsigned char>('c')]) / 1e6);
        }
        if (std::getenv("TW_HISTORY_DEBUG_WORST") != nullptr)
            for (const Delay& d : cfg.delays)
                if (d.cls < Delay::kCaller && d.t1 > worst_at - worst_late && d.t0 < worst_at)
                    std::printf("  delay [%.3f .. %.3f] thread %u cls %u site %c what %c\n", ms(d.t0), ms(d.t1), d.thread, d.cls,
                                d.site ? d.site : '-', d.what);
        std::printf("tw_stress history: the machine: the heartbeats (one per CPU, %zu) woke late (by over 0.5 ms) %zu times, %.1f ms in"
                    " all, at most %.3f ms\n",
                    stalls.per_cpu.size(), machine, static_cast<double>(machine_ns) / 1e6, static_cast<double>(machine_max) / 1e6);
        if (!probe_late.empty()) {
            std::sort(probe_late.begin(), probe_late.end(), [](const ProbeLate& a, const ProbeLate& b) { return a.late < b.late; });
            std::string s;
            for (const ProbeLate& p : probe_late) {
                char buf[64];
                std::snprintf(buf, sizeof buf, " %.1f(%.1f+%.1f)", static_cast<double>(p.late) / 1e6, static_cast<double>(p.inj) / 1e6,
                              static_cast<double>(p.stall) / 1e6);
                s += buf;
            }
            std::printf("tw_stress history: quiet: the probes' runs past due, ms (injected + machine stalls):%s\n", s.c_str());
        }
    }

    std::size_t run() {
        std::stable_sort(ev.begin(), ev.end(), [](const Event& a, const Event& b) { return a.t0 < b.t0; });
        base = ev.empty() ? 0 : ev.front().t0;
        by_key.assign(timers.size() + 1, {});
        for (std::size_t i = 0; i < ev.size(); ++i) {
            const Event& e = ev[i];
            if (e.key != 0 && e.key <= timers.size()) by_key[e.key].push_back(i);
            if (e.kind == kShift) shifts.ch.push_back({e.t0, e.t1, e.own0, e.arg});
            if (e.kind == kShutdown) shutdown_t0 = e.t0, shutdown_t1 = e.t1;
            if (e.kind == kGroupStop && (e.result >= 0 || is_open(e))) group_stops[static_cast<std::uint64_t>(e.arg)].push_back(&e);
        }
        for (const Event& e : ev) {
            if (e.kind == kNested && e.result != TW_ESHUTDOWN && e.result < 0)
                report(0, "a callback's tw_queue_run(q, 1, -1) returned %d", e.result);
            if (e.kind == kQueueLeft && e.result != TW_ESHUTDOWN)
                report(0, "a queue created (TW_OK at %.3f ms) while the runtime shut down was never closed: its"
                          " tw_queue_run returned %d after shutdown, not TW_ESHUTDOWN",
                       ms(e.t1), e.result);
        }
        inj.build(cfg.delays, false);
        {
            int queues = 0;
            for (const TimerInfo& t : timers) queues = std::max(queues, t.queue + 1);
            std::vector<std::vector<Delay>> held(static_cast<std::size_t>(queues));
            for (const Event& e : ev) {
                if (e.tkind != kProducer && e.tkind != kMain) continue;
                if (e.kind != kStop && e.kind != kReset && e.kind != kGroupStop) continue;
                Delay d;
                d.t0 = e.t0;
                d.t1 = is_open(e) ? kNever : e.t1;
                d.cls = Delay::kDriver;  // (counted, in this per-queue measure)
                const int q = e.kind == kGroupStop || e.key == 0 || e.key > timers.size() ? -1 : timers[e.key - 1].queue;
                for (int i = 0; i < queues; ++i)
                    if (q == i || (q == -1 && e.kind == kGroupStop)) held[static_cast<std::size_t>(i)].push_back(d);
            }
            qlock.resize(static_cast<std::size_t>(queues));
            for (int i = 0; i < queues; ++i) qlock[static_cast<std::size_t>(i)].build(held[static_cast<std::size_t>(i)], false);
        }
        {
            int cpus = 0;
            for (const Delay& d : cfg.delays)
                if (d.cls == Delay::kMachine) cpus = std::max(cpus, d.site + 1);
            stalls.per_cpu.resize(static_cast<std::size_t>(cpus));
            for (int c = 0; c < cpus; ++c) stalls.per_cpu[static_cast<std::size_t>(c)].build(cfg.delays, true, c);
        }
        check_stale();
        for (std::uint32_t k = 1; k <= timers.size(); ++k) check_timer(k);
        check_groups();
        if (found > max_reports && max_reports > 0) std::printf("(%zu more violations not shown)\n", found - max_reports);
        if (cfg.summary) summarize();
        return found;
    }
};

}  // namespace

std::size_t check(const Config& cfg, const std::vector<TimerInfo>& timers, std::vector<Event> events,
                  unsigned max_reports) {
    Checker c(cfg, timers, std::move(events), max_reports);
    return c.run();
}

}  // namespace stress::history

// ---- the checker's own test ---------------------------------------------------------
namespace stress::history {
namespace {
constexpr std::int64_t kMs = 1'000'000;
struct Case {
    const char* name;
    std::size_t expect;  // violations expected (0 = a correct history)
    std::vector<TimerInfo> timers;
    std::vector<Event> ev;
    std::vector<Delay> delays = {};
};
Event op(Kind k, std::uint32_t key, std::int64_t t0, std::int64_t t1, int result, std::int64_t arg = 0, std::uint8_t flags = 0) {
    Event e;
    e.kind = k;
    e.key = key;
    e.id = key == 0 ? 0 : (std::uint64_t{key} << 40) | key;
    e.t0 = t0 * kMs;
    e.t1 = t1 * kMs;
    e.own0 = e.t0;  // MONOTONIC: the own clock is CLOCK_MONOTONIC
    e.own1 = e.t1;
    e.result = result;
    e.arg = arg * kMs;
    e.flags = flags;
    e.tkind = kProducer;
    return e;
}
Event run_ev(std::uint32_t key, std::int64_t t0, std::int64_t t1) {
    Event e = op(kRun, key, t0, t1, 0);
    e.tkind = kWorker;
    return e;
}
// A call that never returned (its thread froze).
Event open_ev(Kind k, std::uint32_t key, std::int64_t t0, std::int64_t arg = 0) {
    Event e = op(k, key, t0, t0, 0, arg);
    e.flags |= kOpen;
    e.t1 = e.own1 = kNever;
    e.result = INT32_MIN;
    return e;
}
// A query's answer (a MONOTONIC one-shot: period, leeway, group 0).
Event query_ev(std::uint32_t key, std::int64_t t0, std::int64_t t1, int result, int state = 0, std::int64_t deadline_ms = 0,
               unsigned runs = 0, std::uint8_t flags = 0) {
    Event e = op(kQuery, key, t0, t1, result, 0, flags);
    e.q_state = static_cast<std::int8_t>(state);
    e.q_deadline = static_cast<std::uint64_t>(deadline_ms * kMs);
    e.q_runs = runs;
    if (flags & kInCb) e.tkind = kWorker;
    return e;
}
Delay delay_of(Delay::Cls cls, std::int64_t t0, std::int64_t t1) {
    Delay d;
    d.cls = cls;
    d.t0 = t0 * kMs;
    d.t1 = t1 * kMs;
    d.what = 'p';
    return d;
}
Event rel_ev(std::uint32_t key, std::int64_t t) {
    Event e = op(kRelease, key, t, t, 0);
    e.tkind = kWorker;
    return e;
}
}  // namespace

int selftest() {
    const TimerInfo once{};
    TimerInfo periodic{};
    periodic.period = 10 * kMs;
    TimerInfo grouped{};
    grouped.group = 7;
    const Event sd = op(kShutdown, 0, 900, 901, 0);
    auto gstop = [](std::int64_t t0, std::int64_t t1, int result) {
        Event e = op(kGroupStop, 0, t0, t1, result);
        e.arg = 7;
        return e;
    };
    std::vector<Case> cases = {
        {"a correct one-shot", 0, {once}, {op(kStart, 1, 0, 1, 0, 10), run_ev(1, 12, 13), rel_ev(1, 13), sd}},
        {"a run before its deadline", 1, {once}, {op(kStart, 1, 0, 1, 0, 10), run_ev(1, 9, 10), rel_ev(1, 10), sd}},
        {"a run far past its deadline", 1, {once}, {op(kStart, 1, 0, 1, 0, 10), run_ev(1, 700, 701), rel_ev(1, 701), sd}},
        {"a one-shot that never ran", 1, {once}, {op(kStart, 1, 0, 1, 0, 10), rel_ev(1, 900), sd}},
        {"a run after stop returned TW_OK", 1, {once},
         {op(kStart, 1, 0, 1, 0, 10), op(kStop, 1, 2, 3, 0), run_ev(1, 12, 13), rel_ev(1, 13), sd}},
        {"a stopped one-shot", 0, {once}, {op(kStart, 1, 0, 1, 0, 10), op(kStop, 1, 2, 3, 0), rel_ev(1, 3), sd}},
        {"a release hook run twice", 1, {once}, {op(kStart, 1, 0, 1, 0, 10), run_ev(1, 12, 13), rel_ev(1, 13), rel_ev(1, 14), sd}},
        {"a reset from the callback, run again", 0, {once},
         {op(kStart, 1, 0, 1, 0, 10), run_ev(1, 12, 14), op(kReset, 1, 13, 13, 0, 20, kInCb), run_ev(1, 34, 35), rel_ev(1, 35), sd}},
        {"a one-shot run twice", 1, {once},
         {op(kStart, 1, 0, 1, 0, 10), run_ev(1, 12, 14), run_ev(1, 34, 35), rel_ev(1, 35), sd}},
        {"a periodic run in progress across its stop", 0, {periodic},
         {op(kStart, 1, 0, 1, 0, 10), run_ev(1, 11, 12), run_ev(1, 23, 24), op(kStop, 1, 22, 22, 0), rel_ev(1, 24), sd}},
        {"a periodic run after the one in progress at its stop", 1, {periodic},
         {op(kStart, 1, 0, 1, 0, 10), run_ev(1, 11, 12), run_ev(1, 23, 24), op(kStop, 1, 22, 22, 0), run_ev(1, 33, 34),
          rel_ev(1, 34), sd}},
        {"a periodic run a period early", 1, {periodic},
         {op(kStart, 1, 0, 1, 0, 10), run_ev(1, 11, 12), run_ev(1, 15, 16), op(kStop, 1, 30, 30, 0), rel_ev(1, 30), sd}},
        {"stop_sync returned before the hook did", 1, {once},
         {op(kStart, 1, 0, 1, 0, 10), op(kStop, 1, 2, 3, 0, 0, kSync), rel_ev(1, 4), sd}},
        {"a stale id acted on", 1, {once, once},
         {op(kStart, 1, 0, 1, 0, 10), run_ev(1, 12, 13), rel_ev(1, 13), op(kStop, 1, 20, 21, 0, 0, kStaleId),
          op(kStart, 2, 30, 31, 0, 10), run_ev(2, 42, 43), rel_ev(2, 43), sd}},
        {"a group stop that missed a pending member", 2, {grouped},
         {op(kStart, 1, 0, 1, 0, 100), gstop(10, 11, 0), run_ev(1, 101, 102), rel_ev(1, 102), sd}},
        {"a group stop that stopped its member", 0, {grouped},
         {op(kStart, 1, 0, 1, 0, 100), gstop(10, 11, 1), rel_ev(1, 11), sd}},
        {"a run after shutdown", 1, {once}, {op(kStart, 1, 0, 1, 0, 10), sd, run_ev(1, 950, 951), rel_ev(1, 951)}},
    };
    // A wall-clock timer whose clock is stepped back before its deadline waits (correct);
    // one stepped forward past its deadline that does not fire is late.
    TimerInfo wall{};
    wall.clock = TW_CLOCK_REALTIME;
    auto shift = [](std::int64_t t, std::int64_t old_ms, std::int64_t new_ms) {
        Event e = op(kShift, 0, t, t, 0, new_ms);
        e.own0 = old_ms * kMs;
        return e;
    };
    cases.push_back({"a wall-clock timer waits out a step back", 0, {wall},
                     {op(kStart, 1, 0, 1, 0, 100), shift(50, 0, -1000), run_ev(1, 1101, 1102), rel_ev(1, 1102),
                      op(kShutdown, 0, 1900, 1901, 0)}});
    cases.push_back({"a wall-clock timer that missed a step forward", 1, {wall},
                     {op(kStart, 1, 0, 1, 0, 3000), shift(50, 0, 2000), run_ev(1, 3001, 3002), rel_ev(1, 3002),
                      op(kShutdown, 0, 3900, 3901, 0)}});
    // Due before a step back, run after it while a reset to an earlier
    // deadline (on the stepped clock) is in flight: the run serves the start
    // (judged with the steps since the start), not the reset; then the
    // reset's run. (The checker once judged it by the reset's allowance
    // alone: EARLY.)
    cases.push_back({"a run due before a step back, a reset in flight", 0, {wall},
                     {op(kStart, 1, 0, 1, 0, 100), shift(150, 0, -1000), op(kReset, 1, 180, 250, 0, -750, kAbs),
                      run_ev(1, 200, 201), run_ev(1, 260, 261), rel_ev(1, 261), op(kShutdown, 0, 1900, 1901, 0)}});
    cases.push_back({"a run after a step back before either deadline", 1, {wall},
                     {op(kStart, 1, 0, 1, 0, 400), shift(150, 0, -1000), op(kReset, 1, 180, 250, 0, -750, kAbs),
                      run_ev(1, 200, 201), run_ev(1, 260, 261), rel_ev(1, 261), op(kShutdown, 0, 1900, 1901, 0)}});
    // Timeliness (issue 31): a run may be late by what was injected into the
    // runtime's own threads meanwhile, and by the machine's stalls, plus the
    // slack (50 ms here) -- never by a caller's delay.
    const Event start10 = op(kStart, 1, 0, 1, 0, 10);
    cases.push_back({"a run 290 ms late, its driver parked 280 ms meanwhile", 0, {once},
                     {start10, run_ev(1, 302, 303), rel_ev(1, 303), sd}, {delay_of(Delay::kDriver, 15, 295)}});
    cases.push_back({"a run 290 ms late, a worker parked 200 ms and a runner 80 ms meanwhile", 0, {once},
                     {start10, run_ev(1, 302, 303), rel_ev(1, 303), sd},
                     {delay_of(Delay::kLibWorker, 15, 215), delay_of(Delay::kRunnerThread, 100, 180)}});
    cases.push_back({"a run 290 ms late, a caller parked 280 ms meanwhile", 1, {once},
                     {start10, run_ev(1, 302, 303), rel_ev(1, 303), sd}, {delay_of(Delay::kCaller, 15, 295)}});
    cases.push_back({"a run 290 ms late, the driver parked 280 ms before it was due", 1, {once},
                     {start10, run_ev(1, 302, 303), rel_ev(1, 303), sd}, {delay_of(Delay::kDriver, -280, 0)}});
    cases.push_back({"a run 290 ms late, the machine stalled 280 ms meanwhile", 0, {once},
                     {start10, run_ev(1, 302, 303), rel_ev(1, 303), sd}, {delay_of(Delay::kMachine, 15, 295)}});
    // Calls in flight for ever (a frozen caller): they may have acted or not;
    // no other timer may be late.
    cases.push_back({"a start in flight for ever: no run, no release", 0, {once}, {open_ev(kStart, 1, 0, 10), sd}});
    cases.push_back({"a start in flight for ever whose timer ran", 0, {once}, {open_ev(kStart, 1, 0, 10), run_ev(1, 12, 13), sd}});
    cases.push_back({"a stop in flight for ever: no run, no release", 0, {once},
                     {op(kStart, 1, 0, 1, 0, 100), open_ev(kStop, 1, 50), sd}});
    cases.push_back({"another timer lost while a caller is frozen", 1, {once, once},
                     {open_ev(kStart, 1, 0, 10), op(kStart, 2, 0, 1, 0, 10), sd, rel_ev(2, 900)}});
    cases.push_back({"a group stop in flight for ever: its member not run", 0, {grouped},
                     {op(kStart, 1, 0, 1, 0, 100), [] {
                          Event e = open_ev(kGroupStop, 0, 50);
                          e.arg = 7;
                          return e;
                      }(), sd}});
    // Queries.
    cases.push_back({"a query of a pending one-shot", 0, {once},
                     {op(kStart, 1, 0, 1, 0, 100), query_ev(1, 50, 51, 0, TW_TIMER_PENDING, 101), run_ev(1, 101, 102), rel_ev(1, 102), sd}});
    cases.push_back({"a query that says not found of a live timer", 1, {once},
                     {op(kStart, 1, 0, 1, 0, 100), query_ev(1, 50, 51, TW_ENOENT), run_ev(1, 101, 102), rel_ev(1, 102), sd}});
    cases.push_back({"a query that says RUNNING with no run in progress", 1, {once},
                     {op(kStart, 1, 0, 1, 0, 100), query_ev(1, 50, 51, 0, TW_TIMER_RUNNING, 0, 1), run_ev(1, 101, 102), rel_ev(1, 102), sd}});
    cases.push_back({"a query from its own callback that says PENDING", 1, {once},
                     {op(kStart, 1, 0, 1, 0, 100), run_ev(1, 101, 104), query_ev(1, 102, 103, 0, TW_TIMER_PENDING, 101, 1, kInCb),
                      rel_ev(1, 104), sd}});
    cases.push_back({"a query that found a released timer", 1, {once},
                     {op(kStart, 1, 0, 1, 0, 100), run_ev(1, 101, 102), rel_ev(1, 102), query_ev(1, 110, 111, 0, TW_TIMER_PENDING, 101), sd}});
    cases.push_back({"a query that says PENDING with a deadline no arming allows", 1, {once},
                     {op(kStart, 1, 0, 1, 0, 100), query_ev(1, 50, 51, 0, TW_TIMER_PENDING, 150), run_ev(1, 101, 102), rel_ev(1, 102), sd}});
    // A BURST timer skips (counts in missed) only what it owes beyond
    // TW_BURST_MAX_OWED: after a +2 s step of its wall clock a 1 ms timer
    // owes ~2040 deadlines, so 1000 may be missed, not 1100; a monotonic one
    // 40 ms after its start owes a few and misses none.
    TimerInfo burst_wall{};
    burst_wall.clock = TW_CLOCK_REALTIME;
    burst_wall.policy = TW_PERIOD_BURST;
    burst_wall.period = kMs;
    auto burst_query = [](std::int64_t t0, std::int64_t t1, unsigned runs, std::uint32_t missed) {
        Event q = query_ev(1, t0, t1, 0, TW_TIMER_RUNNING, 0, runs, kInCb);
        q.q_clock = TW_CLOCK_REALTIME;
        q.q_period = static_cast<std::uint64_t>(kMs);
        q.q_missed = missed;
        return q;
    };
    for (const std::uint32_t missed : {1000u, 1100u})
        cases.push_back({missed == 1000 ? "a BURST timer that skipped what it owed past 1000 after a step forward"
                                        : "a BURST timer that skipped more than it could owe",
                         missed == 1000 ? 0u : 1u, {burst_wall},
                         {op(kStart, 1, 0, 1, 0, 10), run_ev(1, 11, 12), shift(50, 0, 2000), run_ev(1, 60, 63),
                          burst_query(61, 62, 2, missed), op(kStop, 1, 70, 71, 0), rel_ev(1, 71),
                          op(kShutdown, 0, 3900, 3901, 0)}});
    TimerInfo burst{};
    burst.policy = TW_PERIOD_BURST;
    burst.period = 10 * kMs;
    {
        Event q = query_ev(1, 41, 42, 0, TW_TIMER_RUNNING, 0, 3, kInCb);
        q.q_period = static_cast<std::uint64_t>(10 * kMs);
        q.q_missed = 1;
        cases.push_back({"a BURST timer that said it skipped a deadline 40 ms after its start", 1, {burst},
                         {op(kStart, 1, 0, 1, 0, 10), run_ev(1, 11, 12), run_ev(1, 21, 22), run_ev(1, 40, 43), q,
                          op(kStop, 1, 50, 51, 0), rel_ev(1, 51), sd}});
    }
    // Missed: a reset's run that never came.
    cases.push_back({"a one-shot run once, before the deadline of a reset that returned before the run", 1, {once},
                     {start10, op(kReset, 1, 5, 6, 0, 100), run_ev(1, 12, 13), rel_ev(1, 13), sd}});
    cases.push_back({"a reset that came after the run began (TW_ENOENT)", 0, {once},
                     {start10, run_ev(1, 11, 13), op(kReset, 1, 12, 12, TW_ENOENT, 100), rel_ev(1, 13), sd}});
    cases.push_back({"a reset to later served by its run", 0, {once},
                     {start10, op(kReset, 1, 5, 6, 0, 100), run_ev(1, 106, 107), rel_ev(1, 107), sd}});
    int bad = 0;
    for (Case& c : cases) {
        for (Event& e : c.ev)
            if (e.kind == kRun || e.kind == kRelease) e.own0 = e.t0, e.own1 = e.t1;
        Config cfg;
        cfg.final_ns = 800 * kMs;
        cfg.slack_ns = 50 * kMs;
        cfg.delays = c.delays;
        if (c.timers[0].clock == TW_CLOCK_REALTIME) cfg.final_ns = 3800 * kMs;
        std::printf("-- %s (expect %zu)\n", c.name, c.expect);
        const std::size_t got = check(cfg, c.timers, c.ev, 0);
        if (got != c.expect) {
            std::printf("SELFTEST FAILED: %s: %zu violation(s), expected %zu\n", c.name, got, c.expect);
            check(cfg, c.timers, c.ev, 4);
            ++bad;
        }
    }
    std::printf("history checker selftest: %zu cases, %d failed\n", cases.size(), bad);
    return bad == 0 ? 0 : 1;
}

}  // namespace stress::history
