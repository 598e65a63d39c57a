// SPDX-License-Identifier: MIT OR Apache-2.0
// tw_stress coro-history: the checker. It holds the record of a run
// (coro_history.hpp) against a sequential model of tickwheel/coro.hpp's
// contract, one wait at a time, concluding only from orders the recorded
// times fix (a call's interval, a resumption's time):
//
//  ONCE      a co_await resumes exactly once -- or never, if its frame was
//            destroyed while it waited (then no resumption at all: RESUMED
//            AFTER DESTRUCTION); LOST if never; TWICE if more.
//  REASON    the wake the model allows: expired only for a sleep, never
//            early on its own clock (the resumption's reading of that clock
//            is not below the deadline), not after a stop requested before
//            the co_await; timed_out only once one of its with_deadline /
//            cancel_after deadlines passed on that deadline's clock (a
//            Duration on the wait's clock, a TimePoint on the monotonic
//            one), and for a sleep_for exactly when a deadline is shorter
//            than the sleep; stopped only after a request_stop began;
//            notified only for an event wait after a notify began; shutdown
//            only after the shutdown (or the close of its queue) began.
//  THREW     an exception only for a start that could fail: limit_reached
//            while the ballast held the runtime at max_timers;
//            invalid_argument for a queue whose close began first -- never
//            once the timer had started (a close during arming resumes with
//            shutdown: issue 32 c5); nothing else.
//  CONTEXT   resumed where it asked (inside run() of its queue, on a worker
//            -- a manual runtime's: inside advance() --, inside the
//            executor's drain or io_context's run); also on the thread
//            shutting down or closing its queue (that sweep resumes with
//            shutdown, or stopped/notified if one came first); inline
//            (inside its own co_await) only after a shutdown or its queue's
//            close began.
//  NOTIFY    a notify is never lost: per event (one waiter at a time), a
//            wait that begins while the event is surely set (a notify began
//            after the previous wait ended and returned before this one
//            began) resumes notified -- or throws / is destroyed, which
//            hands the duty to the next wait; at the end, a notify no wait
//            took leaves the event set.
//  LATE      (manual runtime) a stop, a notify, a deadline resume the wait
//            at the first advance() after them -- any size, advance(0) off
//            the tick grid included -- and the queue runs that follow it
//            (issue 32 c4); (real runtime) a wait that was due (its
//            deadline, its stop) more than late_ns (2.5 s; 4 s under the
//            sanitizers) before the shutdown or its queue's close ended it
//            is LOST.
//  And what the driver saw (run_complaints): a write into a destroyed
//  coroutine frame (the frames are quarantined, zero-filled, and checked),
//  timers still alive after the shutdown (a release hook that never ran).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "coro_history.hpp"

namespace stress::coro_history {
namespace {

const char* why_name(unsigned w) {
    static const char* const n[] = {"expired", "stopped", "shutdown", "timed_out", "notified"};
    return w < 5 ? n[w] : "?";
}
const char* ctx_name(unsigned c) {
    static const char* const n[] = {"on_worker", "on_queue", "on_executor", "on_asio"};
    return c < 4 ? n[c] : "?";
}
const char* kind_name(unsigned k) {
    static const char* const n[] = {"sleep_for", "sleep_until", "event.wait"};
    return k < 3 ? n[k] : "?";
}
const char* clock_name(unsigned c) {
    static const char* const n[] = {"monotonic", "boottime", "realtime"};
    return c < 3 ? n[c] : "?";
}
const char* stop_name(unsigned s) {
    static const char* const n[] = {"none", "before the co_await", "during arming", "later"};
    return s < 4 ? n[s] : "?";
}

enum Why : unsigned { kExpired = 0, kStopped = 1, kShutdown = 2, kTimedOut = 3, kNotified = 4 };
constexpr std::int32_t kErrInvalid = 22, kErrLimit = 11;

class Checker {
public:
    Checker(const History& h, unsigned max_reports) : h_(h), max_(max_reports) {
        for (const Close& c : h.closes) closes_[c.queue].push_back(c);
    }

    std::size_t run() {
        for (std::size_t i = 0; i < h_.waits.size(); ++i) one(i);
        notify_duty();
        for (const std::string& s : h_.run_complaints) report("RUN", s, nullptr, 0);
        std::size_t total = 0;
        for (auto& [tag, n] : counts_) {
            std::printf("  %-8s %zu\n", tag.c_str(), n);
            total += n;
        }
        return total;
    }

private:
    // Time as printed: ms since the first call (real), or the step (manual).
    std::string t(std::int64_t v) const {
        char b[64];
        if (v == kNone) return "never";
        if (h_.manual)
            std::snprintf(b, sizeof b, "step %" PRId64, v);
        else
            std::snprintf(b, sizeof b, "%.3f ms", double(v - base()) / 1e6);
        return b;
    }
    std::int64_t base() const { return h_.waits.empty() ? 0 : h_.waits.front().t_call; }

    void describe(const Wait& w, std::size_t i) const {
        std::printf("    wait #%zu: slot %u coroutine %u, co_await %s%s%s on %s (queue %d), stop %s%s\n", i, w.slot,
                    w.coro, kind_name(w.kind), w.kind == kEventWait ? "" : " on the ", w.kind == kEventWait ? "" : clock_name(w.clock),
                    ctx_name(w.ctx), w.queue, stop_name(w.stop_mode), w.victim ? ", a victim (far, destroyable)" : "");
        std::printf("      called at %s (own clocks %" PRId64 " / %" PRId64 " / %" PRId64 "), timer started %s\n",
                    t(w.t_call).c_str(), w.own_before[0], w.own_before[1], w.own_before[2],
                    w.t_armed != 0 ? t(w.t_armed).c_str() : "never");
        std::printf("      deadline %s%s, sleep_for %" PRId64 " ns, limits %" PRId64 " / %" PRId64 " ns (Duration), %s (TimePoint)\n",
                    w.natural == kNone ? "none" : std::to_string(w.natural).c_str(),
                    w.kind == kSleepFor ? " (lower bound)" : "", w.delay, w.limit_d[0], w.limit_d[1],
                    w.limit_tp == kNone ? "none" : std::to_string(w.limit_tp).c_str());
        std::printf("      stop requested [%s, %s], frame destroyed [%s, %s]\n", t(w.stop_t0).c_str(), t(w.stop_t1).c_str(),
                    t(w.destroy_t0).c_str(), t(w.destroy_t1).c_str());
        const char* oc[] = {"never resumed", "resumed", "threw", "destroyed"};
        std::printf("      %s x%d at %s: %s (error %d), own clock %" PRId64 ", monotonic %" PRId64 "; where: run_queue %d, "
                    "closing_queue %d, advance %d, executor %d, asio %d, shutdown %d, inline %d, checker thread %d\n",
                    oc[w.outcome], w.resumed, t(w.t_resume).c_str(), w.outcome == kWoke ? why_name(w.why) : "-", w.err,
                    w.own_resume, w.own_resume_mono, w.where.run_queue, w.where.closing_queue, w.where.in_advance,
                    w.where.in_executor, w.where.in_asio, w.where.in_shutdown, w.where.inline_, w.where.ours);
    }

    void report(const char* tag, const std::string& what, const Wait* w, std::size_t i) {
        const std::size_t n = counts_[tag]++;
        if (reported_ >= max_ && n > 0) return;
        if (reported_ >= max_ + 8) return;
        ++reported_;
        std::printf("%s: %s\n", tag, what.c_str());
        if (w != nullptr) describe(*w, i);
    }

    bool shutdown_before(std::int64_t at) const { return h_.shutdown.t0 != kNone && h_.shutdown.t0 < at; }
    const Close* close_before(std::int32_t q, std::int64_t at) const {
        auto it = closes_.find(q);
        if (it == closes_.end()) return nullptr;
        for (const Close& c : it->second)
            if (c.t0 < at) return &c;
        return nullptr;
    }
    bool notify_before(std::uint32_t slot, std::int64_t at) const {
        for (const Notify& n : h_.notifies)
            if (n.slot == slot && n.t0 < at) return true;
        return false;
    }
    bool held_during(std::int64_t a, std::int64_t b) const {
        for (const Span& s : h_.holds)
            if (s.t0 < b && s.t1 > a) return true;
        return false;
    }
    // A deadline on clock c, as a monotonic value (the clocks move together
    // between the readings taken before the co_await and the resumption:
    // the checker steps none of them).
    std::int64_t to_mono(const Wait& w, std::int64_t v) const { return v - (w.own_before[w.clock] - w.own_before[0]); }
    // The earliest the wait may end on its own (deadline or limit), as a
    // monotonic value (own-clock reading); kNone if none.
    std::int64_t earliest_mono(const Wait& w) const {
        std::int64_t e = kNone;
        if (w.natural != kNone) e = std::min(e, to_mono(w, w.natural));
        for (std::int64_t d : w.limit_d)
            if (d >= 0) e = std::min(e, w.own_before[0] + d);
        if (w.limit_tp != kNone) e = std::min(e, w.limit_tp);
        return e;
    }
    bool in_ctx(const Wait& w) const {
        const Where& x = w.where;
        switch (w.ctx) {
            case kOnQueue: return x.run_queue == w.queue;
            case kOnExecutor: return x.in_executor;
            case kOnAsio: return x.in_asio;
            default:
                if (x.run_queue != -1 || x.in_executor || x.in_asio) return false;
                return h_.manual ? x.in_advance : !x.ours;
        }
    }

    void one(std::size_t i) {
        const Wait& w = h_.waits[i];
        char b[512];
        if (w.outcome == kDestroyed) {
            if (w.resumed != 0) report("ONCE", "RESUMED AFTER DESTRUCTION: its frame was destroyed while it waited, yet it resumed", &w, i);
            return;
        }
        if (w.outcome == kPending || w.resumed == 0) {
            report("LOST", "LOST: the co_await never resumed (not even by the shutdown)", &w, i);
            return;
        }
        if (w.resumed > 1) {
            std::snprintf(b, sizeof b, "TWICE: the co_await resumed %d times", w.resumed);
            report("ONCE", b, &w, i);
        }
        if (w.outcome == kThrew) {
            if (w.err == kErrLimit) {
                if (!held_during(w.t_call, w.t_resume))
                    report("THREW", "THREW limit_reached while the ballast did not hold the runtime at max_timers", &w, i);
            } else if (w.err == kErrInvalid) {
                const Close* c = w.ctx == kOnQueue ? close_before(w.queue, w.t_resume) : nullptr;
                if (c == nullptr) {
                    report("THREW", w.kind == kEventWait
                                        ? "THREW invalid_argument: the event names another waiter (a destroyed one?) and no close explains it"
                                        : "THREW invalid_argument with no close of its queue before it",
                           &w, i);
                } else if (w.t_armed != 0) {
                    std::snprintf(b, sizeof b,
                                  "THREW invalid_argument after its timer had started (at %s): the close of its queue [%s, %s] "
                                  "cancelled it during arming; it must resume with shutdown",
                                  t(w.t_armed).c_str(), t(c->t0).c_str(), t(c->t1).c_str());
                    report("THREW", b, &w, i);
                }
            } else {
                std::snprintf(b, sizeof b, "THREW error %d (the model allows limit_reached and invalid_argument only)", w.err);
                report("THREW", b, &w, i);
            }
            return;
        }
        // ---- the reason --------------------------------------------------
        const bool stop_first = w.stop_mode == kStopBefore;
        switch (w.why) {
            case kExpired:
                if (w.kind == kEventWait) report("REASON", "EXPIRED: an event wait has no deadline of its own", &w, i);
                else if (w.own_resume < w.natural) {
                    std::snprintf(b, sizeof b, "EARLY: expired with its clock (%s) at %" PRId64 ", %" PRId64 " ns before its deadline %" PRId64,
                                  clock_name(w.clock), w.own_resume, w.natural - w.own_resume, w.natural);
                    report("EARLY", b, &w, i);
                }
                if (stop_first) report("REASON", "REASON: expired, although stopped before the co_await (stopped wins)", &w, i);
                if (w.kind == kSleepFor && w.limit_tp == kNone)
                    for (std::int64_t d : w.limit_d)
                        if (d >= 0 && d < w.delay) {
                            std::snprintf(b, sizeof b, "REASON: expired, although its deadline %" PRId64 " ns is shorter than its sleep %" PRId64 " ns", d, w.delay);
                            report("REASON", b, &w, i);
                        }
                break;
            case kTimedOut: {
                bool passed = false, any = false;
                for (std::int64_t d : w.limit_d)
                    if (d >= 0) {
                        any = true;
                        passed = passed || w.own_resume >= w.own_before[w.clock] + d;
                    }
                if (w.limit_tp != kNone) {
                    any = true;
                    passed = passed || w.own_resume_mono >= w.limit_tp;
                }
                if (!any) report("REASON", "REASON: timed_out without a with_deadline/cancel_after", &w, i);
                else if (!passed) report("EARLY", "EARLY: timed_out before any of its deadlines passed on its clock", &w, i);
                if (stop_first) report("REASON", "REASON: timed_out, although stopped before the co_await (stopped wins)", &w, i);
                if (w.kind == kSleepFor && w.limit_tp == kNone) {
                    bool shorter = false;
                    for (std::int64_t d : w.limit_d) shorter = shorter || (d >= 0 && d < w.delay);
                    if (!shorter) report("REASON", "REASON: timed_out, although its sleep is not longer than its deadlines", &w, i);
                }
                break;
            }
            case kStopped:
                if (w.stop_t0 == kNone || w.stop_t0 >= w.t_resume)
                    report("REASON", "REASON: stopped without a request_stop before the resumption", &w, i);
                break;
            case kNotified:
                if (w.kind != kEventWait) report("REASON", "REASON: notified, but it is not an event wait", &w, i);
                else if (!notify_before(w.slot, w.t_resume))
                    report("REASON", "REASON: notified without a notify of its event before the resumption", &w, i);
                break;
            case kShutdown:
                if (!shutdown_before(w.t_resume) && !(w.ctx == kOnQueue && close_before(w.queue, w.t_resume) != nullptr))
                    report("REASON", "REASON: shutdown without a shutdown or a close of its queue before the resumption", &w, i);
                if (stop_first) report("REASON", "REASON: shutdown, although stopped before the co_await (stopped wins)", &w, i);
                break;
            default: report("REASON", "REASON: an unknown wake", &w, i);
        }
        // ---- the context -------------------------------------------------
        const bool ended_by_close = w.ctx == kOnQueue && close_before(w.queue, w.t_resume) != nullptr;
        if (w.where.inline_) {
            if (!shutdown_before(w.t_resume) && !ended_by_close)
                report("CONTEXT", "CONTEXT: resumed inline, inside its own co_await, without a shutdown or a close of its queue", &w, i);
        } else if (!in_ctx(w)) {
            // The shutdown's (or the queue close's) sweep resumes on its own
            // thread -- with shutdown, or stopped/notified if a stop or a
            // notify came first.
            const bool allowed = (w.why == kShutdown || w.why == kStopped || w.why == kNotified) &&
                                 (w.where.in_shutdown || (w.ctx == kOnQueue && w.where.closing_queue == w.queue));
            if (!allowed) {
                std::snprintf(b, sizeof b, "CONTEXT: %s resumed outside the context it asked for (%s)", why_name(w.why), ctx_name(w.ctx));
                report("CONTEXT", b, &w, i);
            }
        }
        // ---- late / lost -------------------------------------------------
        if (h_.manual) manual_late(w, i);
        else real_lost(w, i);
    }

    // A wait that the shutdown (or its queue's close) ended at t_resume, yet
    // was due -- a deadline, a stop -- more than late_ns before: lost.
    void real_lost(const Wait& w, std::size_t i) {
        if (w.why != kShutdown || w.outcome != kWoke) return;
        char b[300];
        const std::int64_t e = earliest_mono(w);
        if (e != kNone) {
            const std::int64_t due = w.t_call + (e - w.own_before[0]);  // on the machine's clock
            if (due + h_.late_ns < w.t_resume) {
                std::snprintf(b, sizeof b, "LOST: due at %s, still waiting when the shutdown or close ended it at %s",
                              t(due).c_str(), t(w.t_resume).c_str());
                report("LOST", b, &w, i);
                return;
            }
        }
        if (w.stop_t1 != kNone && w.stop_t1 >= w.t_call && w.stop_t1 + h_.late_ns < w.t_resume) {
            std::snprintf(b, sizeof b, "LOST: stopped at %s, still waiting when the shutdown or close ended it at %s",
                          t(w.stop_t1).c_str(), t(w.t_resume).c_str());
            report("LOST", b, &w, i);
        }
    }

    // The first advance that begins after `at`: its index, or -1.
    long advance_after(std::int64_t at) const {
        auto it = std::upper_bound(h_.advances.begin(), h_.advances.end(), at,
                                   [](std::int64_t v, const Advance& a) { return v < a.t0; });
        return it == h_.advances.end() ? -1 : long(it - h_.advances.begin());
    }
    void manual_late(const Wait& w, std::size_t i) {
        if (w.outcome != kWoke || w.where.inline_) return;
        char b[400];
        const auto check = [&](std::int64_t from, const char* what) {
            const long k = advance_after(std::max(from, w.t_call));
            if (k < 0) return;
            const Advance& a = h_.advances[std::size_t(k)];
            if (w.t_resume <= a.drained) return;
            if (shutdown_before(a.drained)) return;
            std::snprintf(b, sizeof b,
                          "LATE: %s at %s; the next advance (#%ld, of %" PRId64 " ns, to virtual %" PRId64
                          ", off the %" PRId64 " ns grid by %" PRId64 " ns) and the runs after it (to %s) did not resume it "
                          "(resumed at %s)",
                          what, t(from).c_str(), k, a.size_ns, a.vt_end, h_.resolution_ns, a.vt_end % h_.resolution_ns,
                          t(a.drained).c_str(), t(w.t_resume).c_str());
            report("LATE", b, &w, i);
        };
        if (w.stop_t1 != kNone) check(w.stop_t1, "stopped");
        if (w.kind == kEventWait)
            for (const Notify& n : h_.notifies)
                if (n.slot == w.slot && n.t0 > w.t_call && n.t0 < w.t_resume) {
                    check(n.t1, "notified");
                    break;
                }
        // A deadline: the first advance after the call whose end is a tick past it.
        const std::int64_t e = earliest_mono(w);
        if (e == kNone) return;
        for (std::size_t k = 0; k < h_.advances.size(); ++k) {
            const Advance& a = h_.advances[k];
            if (a.t0 <= w.t_call || a.vt_end < e + h_.resolution_ns) continue;
            if (w.t_resume > a.drained && !shutdown_before(a.drained)) {
                std::snprintf(b, sizeof b,
                              "LATE: due at virtual %" PRId64 "; advance #%zu (to virtual %" PRId64 ") and the runs after it did "
                              "not resume it (resumed at %s)",
                              e, k, a.vt_end, t(w.t_resume).c_str());
                report("LATE", b, &w, i);
            }
            break;
        }
    }

    std::int64_t end_of(const Wait& w) const {
        if (w.outcome == kDestroyed) return w.destroy_t1;
        return w.t_resume;
    }
    void notify_duty() {
        std::map<std::uint32_t, std::vector<std::size_t>> per;
        for (std::size_t i = 0; i < h_.waits.size(); ++i)
            if (h_.waits[i].kind == kEventWait && h_.waits[i].outcome != kPending) per[h_.waits[i].slot].push_back(i);
        std::map<std::uint32_t, std::vector<const Notify*>> ns;
        for (const Notify& n : h_.notifies) ns[n.slot].push_back(&n);
        char b[300];
        for (auto& [slot, list] : per) {
            std::sort(list.begin(), list.end(), [&](std::size_t a, std::size_t c) { return h_.waits[a].t_call < h_.waits[c].t_call; });
            const auto& nl = ns[slot];
            std::int64_t prev_end = std::numeric_limits<std::int64_t>::min();
            bool duty = false;
            const Notify* owed = nullptr;
            for (std::size_t i : list) {
                const Wait& w = h_.waits[i];
                for (const Notify* n : nl)
                    if (n->t0 > prev_end && n->t1 < w.t_call) {
                        duty = true;
                        owed = n;
                    }
                if (w.outcome == kWoke) {
                    if (w.why == kNotified) {
                        duty = false;
                    } else if (duty) {
                        std::snprintf(b, sizeof b,
                                      "LOST NOTIFY: the event of slot %u was set when this wait began (a notify [%s, %s] after "
                                      "the previous wait ended), yet it resumed with %s",
                                      slot, t(owed->t0).c_str(), t(owed->t1).c_str(), why_name(w.why));
                        report("NOTIFY", b, &w, i);
                        duty = false;
                    }
                }
                prev_end = std::max(prev_end, end_of(w));
            }
            for (const Notify* n : nl)
                if (n->t0 > prev_end) {
                    duty = true;
                    owed = n;
                }
            if (duty && slot < h_.event_set_at_end.size() && h_.event_set_at_end[slot] == 0) {
                std::snprintf(b, sizeof b,
                              "LOST NOTIFY: the notify [%s, %s] of slot %u's event (after its last wait ended, or handed on "
                              "by waits that failed or were destroyed) left the event unset at the end",
                              t(owed->t0).c_str(), t(owed->t1).c_str(), slot);
                report("NOTIFY", b, nullptr, 0);
            }
        }
    }

    const History& h_;
    unsigned max_;
    unsigned reported_ = 0;
    std::map<std::string, std::size_t> counts_;
    std::map<std::int32_t, std::vector<Close>> closes_;
};

}  // namespace

std::size_t check(const History& h, unsigned max_reports) {
    Checker c(h, max_reports);
    return c.run();
}

// ---- the selftest: histories with known violations ---------------------------
namespace {
Wait sleep_wait(std::int64_t t_call, std::int64_t d) {
    Wait w;
    w.kind = kSleepFor;
    w.t_call = t_call;
    w.delay = d;
    w.own_before[0] = 1000 + t_call;
    w.natural = w.own_before[0] + d;
    w.outcome = kWoke;
    w.resumed = 1;
    w.why = kExpired;
    w.t_resume = t_call + d + 10;
    w.own_resume = w.natural + 10;
    w.own_resume_mono = w.own_resume;
    w.where.in_advance = true;
    w.where.ours = true;
    return w;
}
int expect(const char* name, const History& h, bool bad) {
    std::printf("-- %s (expect %s)\n", name, bad ? "a violation" : "none");
    const std::size_t n = check(h, 2);
    const bool ok = bad ? n > 0 : n == 0;
    std::printf("   %s: %zu violation(s)\n", ok ? "ok" : "WRONG", n);
    return ok ? 0 : 1;
}
}  // namespace

int selftest() {
    int fails = 0;
    History base;
    base.manual = true;
    base.waits.push_back(sleep_wait(1, 5000));
    fails += expect("a sleep that expired after its deadline", base, false);
    {
        History h = base;
        h.waits[0].own_resume = h.waits[0].natural - 1;
        fails += expect("EARLY: expired 1 ns before its deadline", h, true);
    }
    {
        History h = base;
        h.waits[0].resumed = 2;
        fails += expect("TWICE", h, true);
    }
    {
        History h = base;
        h.waits[0].outcome = kDestroyed;
        h.waits[0].destroy_t0 = h.waits[0].destroy_t1 = 3;
        fails += expect("RESUMED AFTER DESTRUCTION", h, true);
        h.waits[0].resumed = 0;
        fails += expect("destroyed, never resumed", h, false);
    }
    {
        History h = base;
        h.waits[0].why = kStopped;
        fails += expect("stopped without a stop", h, true);
        h.waits[0].stop_t0 = h.waits[0].stop_t1 = 2;
        fails += expect("stopped after a stop", h, false);
    }
    {
        History h = base;
        h.waits[0].where.in_advance = false;
        h.waits[0].where.run_queue = 3;
        fails += expect("CONTEXT: an on_worker wait resumed in a queue", h, true);
    }
    {
        History h = base;  // c4: stopped at step 2, the advance at step 3 (off the grid) did not resume it
        h.waits[0].why = kStopped;
        h.waits[0].stop_t0 = h.waits[0].stop_t1 = 2;
        h.waits[0].t_resume = 20;
        h.advances.push_back({3, 4, 5, 0, 1'500'000});
        h.advances.push_back({19, 20, 21, 1'000'000, 2'500'000});
        fails += expect("LATE: a stop not acted on by the next advance(0)", h, true);
        h.waits[0].t_resume = 4;
        fails += expect("a stop acted on by the next advance", h, false);
    }
    {
        History h = base;  // c5
        h.waits[0].ctx = kOnQueue;
        h.waits[0].queue = 7;
        h.waits[0].outcome = kThrew;
        h.waits[0].err = kErrInvalid;
        h.waits[0].t_armed = 2;
        h.waits[0].t_resume = 4;
        h.closes.push_back({7, 3, 3});
        fails += expect("THREW invalid_argument after the timer started", h, true);
        h.waits[0].t_armed = 0;
        h.closes[0] = {7, 1, 1};
        fails += expect("THREW invalid_argument, the queue closed before", h, false);
    }
    {
        History h;  // c3: notify, a wait that threw, the next wait timed out
        h.manual = true;
        Wait a = sleep_wait(10, 0);
        a.kind = kEventWait;
        a.natural = kNone;
        a.delay = -1;
        a.outcome = kThrew;
        a.err = kErrLimit;
        a.t_resume = 11;
        Wait c = a;
        c.t_call = 20;
        c.outcome = kWoke;
        c.why = kTimedOut;
        c.limit_d[0] = 5;
        c.own_before[0] = 0;
        c.own_resume = c.own_resume_mono = 100;
        c.t_resume = 30;
        h.waits = {a, c};
        h.notifies.push_back({0, 5, 5});
        h.holds.push_back({9, 12});
        h.event_set_at_end = {0};
        fails += expect("LOST NOTIFY: a failed wait kept the event's set state", h, true);
        h.waits[1].why = kNotified;
        fails += expect("the next wait was notified", h, false);
    }
    std::printf("coro-history-selftest: %s\n", fails == 0 ? "OK" : "FAILED");
    return fails == 0 ? 0 : 1;
}

}  // namespace stress::coro_history
