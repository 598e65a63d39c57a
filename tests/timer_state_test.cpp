// SPDX-License-Identifier: MIT OR Apache-2.0
// Exhaustive tests of the timer state machine (src/runtime/timer_state.hpp).
//
//  1. Table: every State x {periodic, one-shot} x {matching, other
//     generation} x every decision (decide_cancel, decide_reset with own_run
//     true/false and an earlier/later/equal tick, decide_expire with d < now,
//     d == now, d > now, decide_begin_run, decide_finish_run, must_wait),
//     against an expected table written out by hand; then the ground rules
//     as properties over a sweep of words (no decision touches the
//     generation bits, a non-owner's decision never takes a busy state out of
//     busy, every state change is a documented edge, ...); then the
//     TimerState load/CAS loops on a real Record, single-threaded.
//  2. Interleavings (tests/timer_state_model.hpp): stop / stop_sync / reset
//     / start on a recycled record / fire (shard + worker) / shutdown, up to
//     three callers besides the shard and a worker, periodic and one-shot,
//     current and stale ids; ALL interleavings of their atomic steps, with
//     the contract's invariants checked at every step. Each scenario prints
//     the number of interleavings it covers.
//  3. ABA: with the hazard + quarantine rule switched off, the explorer
//     finds the interleaving in which a stale stop/reset CAS succeeds on the
//     record's occupant 1024 recyclings later; with the rule, none exists.
//  4. The checks can fail: broken decisions and broken runtime steps are
//     each caught.
#include "timer_state_model.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/timer_record.hpp"
#include "runtime/timer_state.hpp"

namespace {

using tickwheel::tick_t;
using namespace tickwheel::rt;

// ============================================================================
// 1. The decisions, state by state
// ============================================================================

using CO = CancelOutcome;
using EO = ExpireOutcome;
using FO = FinishOutcome;
constexpr State Fr = State::Free, Pe = State::Pending, Di = State::Dispatched, Ru = State::Running,
                RS = State::RunningStopped, RR = State::RunningRearmed, Ca = State::Cancelled,
                Rl = State::Releasing;
constexpr State kAllStates[] = {Fr, Pe, Di, Ru, RS, RR, Ca, Rl};

constexpr std::uint32_t kGen = 0x2A5;    // the acting thread's (and the word's) 10-bit generation
constexpr std::uint32_t kOther = 0x2A6;  // another generation's word
constexpr tick_t kD = 1000;              // the word's deadline
constexpr tick_t kEarlier = 500, kLater = 2000;
constexpr std::uint64_t kPeriod = 4;
constexpr tick_t kNowPast = 1009, kNowAt = 1000, kNowBefore = 999;

struct CancelX {
    CO out;
    State next;  // deadline unchanged
};
struct ResetX {
    bool rearmed;
    State next;
    tick_t d;
    Post post;
};
struct ExpireX {
    EO out;
    State next;
    tick_t d;
    tick_t file_at;
    tick_t due;
};
struct FinishX {
    FO out;
    State next;  // deadline unchanged
};
struct Row {
    State s;
    bool periodic;
    CancelX cancel;
    ResetX reset[2][2];  // [own_run][0: kEarlier, 1: kLater]
    ExpireX past, at, before;  // now = 1009, 1000, 999 (d = 1000)
    bool begin_run;
    FinishX finish;
    bool must_wait;
};

constexpr ResetX kNoReset{false, Fr, 0, Post::None};  // "unchanged" (next/d ignored: the word itself)
constexpr ExpireX kDrop{EO::Drop, Fr, 0, 0, 0};       // Drop: the word itself, nothing filed

// The expected table. Written out by hand from the transition list in
// timer_state.hpp; one row per (state, periodic).
const Row kTable[] = {
    // FREE: nothing acts on it.
    {Fr, false, {CO::NotPending, Fr}, {{kNoReset, kNoReset}, {kNoReset, kNoReset}}, kDrop, kDrop, kDrop, false,
     {FO::Stopped, Ca}, false},
    {Fr, true, {CO::NotPending, Fr}, {{kNoReset, kNoReset}, {kNoReset, kNoReset}}, kDrop, kDrop, kDrop, false,
     {FO::Stopped, Ca}, false},
    // PENDING
    {Pe, false, {CO::Cancelled, Rl},
     {{{true, Pe, kEarlier, Post::Refile}, {true, Pe, kLater, Post::None}},
      {{true, Pe, kEarlier, Post::Refile}, {true, Pe, kLater, Post::None}}},
     {EO::Fire, Di, 1000, 1000, 1000}, {EO::Fire, Di, 1000, 1000, 1000}, {EO::Later, Pe, 1000, 1000, 0}, false,
     {FO::Stopped, Ca}, false},
    {Pe, true, {CO::Cancelled, Rl},
     {{{true, Pe, kEarlier, Post::Refile}, {true, Pe, kLater, Post::None}},
      {{true, Pe, kEarlier, Post::Refile}, {true, Pe, kLater, Post::None}}},
     {EO::Fire, Di, 1012, 1012, 1000}, {EO::Fire, Di, 1004, 1004, 1000}, {EO::Later, Pe, 1000, 1000, 0}, false,
     {FO::Stopped, Ca}, false},
    // DISPATCHED: due, not started.
    {Di, false, {CO::Cancelled, Rl},
     {{{true, Pe, kEarlier, Post::Insert}, {true, Pe, kLater, Post::Insert}},
      {{true, Pe, kEarlier, Post::Insert}, {true, Pe, kLater, Post::Insert}}},
     kDrop, kDrop, kDrop, true, {FO::Stopped, Ca}, false},
    {Di, true, {CO::Cancelled, Rl},
     {{{true, Pe, kEarlier, Post::Refile}, {true, Pe, kLater, Post::None}},
      {{true, Pe, kEarlier, Post::Refile}, {true, Pe, kLater, Post::None}}},
     {EO::Skip, Di, 1012, 1012, 0}, {EO::Skip, Di, 1004, 1004, 0}, {EO::Later, Di, 1000, 1000, 0}, true,
     {FO::Stopped, Ca}, false},
    // RUNNING
    {Ru, false, {CO::Busy, Ru},
     {{kNoReset, kNoReset}, {{true, RR, kEarlier, Post::None}, {true, RR, kLater, Post::None}}}, kDrop, kDrop,
     kDrop, false, {FO::Last, Rl}, true},
    {Ru, true, {CO::StoppedDuringRun, RS},
     {{{true, Ru, kEarlier, Post::Refile}, {true, Ru, kLater, Post::None}},
      {{true, Ru, kEarlier, Post::Refile}, {true, Ru, kLater, Post::None}}},
     {EO::Skip, Ru, 1012, 1012, 0}, {EO::Skip, Ru, 1004, 1004, 0}, {EO::Later, Ru, 1000, 1000, 0}, false,
     {FO::Periodic, Pe}, true},
    // RUNNING_STOPPED
    {RS, false, {CO::Busy, RS}, {{kNoReset, kNoReset}, {kNoReset, kNoReset}}, kDrop, kDrop, kDrop, false,
     {FO::Stopped, Ca}, true},
    {RS, true, {CO::Busy, RS}, {{kNoReset, kNoReset}, {kNoReset, kNoReset}}, kDrop, kDrop, kDrop, false,
     {FO::Stopped, Ca}, true},
    // RUNNING_REARMED
    {RR, false, {CO::StoppedDuringRun, RS},
     {{{true, RR, kEarlier, Post::None}, {true, RR, kLater, Post::None}},
      {{true, RR, kEarlier, Post::None}, {true, RR, kLater, Post::None}}},
     kDrop, kDrop, kDrop, false, {FO::Rearmed, Pe}, true},
    {RR, true, {CO::StoppedDuringRun, RS},
     {{{true, RR, kEarlier, Post::None}, {true, RR, kLater, Post::None}},
      {{true, RR, kEarlier, Post::None}, {true, RR, kLater, Post::None}}},
     kDrop, kDrop, kDrop, false, {FO::Rearmed, Pe}, true},
    // CANCELLED
    {Ca, false, {CO::NotPending, Ca}, {{kNoReset, kNoReset}, {kNoReset, kNoReset}}, kDrop, kDrop, kDrop, false,
     {FO::Stopped, Ca}, false},
    {Ca, true, {CO::NotPending, Ca}, {{kNoReset, kNoReset}, {kNoReset, kNoReset}}, kDrop, kDrop, kDrop, false,
     {FO::Stopped, Ca}, false},
    // RELEASING
    {Rl, false, {CO::Busy, Rl}, {{kNoReset, kNoReset}, {kNoReset, kNoReset}}, kDrop, kDrop, kDrop, false,
     {FO::Stopped, Ca}, true},
    {Rl, true, {CO::Busy, Rl}, {{kNoReset, kNoReset}, {kNoReset, kNoReset}}, kDrop, kDrop, kDrop, false,
     {FO::Stopped, Ca}, true},
};

std::string where(const Row& r, bool match) {
    return std::string(tsm::detail::state_name(r.s)) + (r.periodic ? " periodic" : " one-shot") +
           (match ? " (matching gen)" : " (other gen)");
}

TEST(TimerStateTable, WordLayoutIsPinned) {
    // gen 0x2A5 << 54 | PENDING (1) << 51 | 1000
    EXPECT_EQ(Ctl::make(0x2A5, Pe, 1000), 0xA948'0000'0000'03E8ull);
    EXPECT_EQ(Ctl::make(0x3FF, Rl, Ctl::kMaxDeadline), 0xFFFF'FFFF'FFFF'FFFFull);
    EXPECT_EQ(Ctl::make(1, Fr, 5), 0x0040'0000'0000'0005ull);
    EXPECT_EQ(Ctl::make(0x400, Fr, 0), 0u) << "only the low 10 bits of the generation are kept";
    EXPECT_EQ(Ctl::make(0, Fr, Ctl::kMaxDeadline + 1), 0u) << "the deadline is masked to 51 bits";
    EXPECT_EQ(Ctl::kMaxDeadline, (tick_t{1} << 51) - 1);
    for (State s : kAllStates) {
        const Word c = Ctl::make(0x155, s, 12345);
        EXPECT_EQ(Ctl::state(c), s);
        EXPECT_EQ(Ctl::gen10(c), 0x155u);
        EXPECT_EQ(Ctl::deadline(c), 12345u);
    }
    // busy = a run or a release hook in progress
    const bool busy[] = {false, false, false, true, true, true, false, true};
    const bool running[] = {false, false, false, true, true, true, false, false};
    for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(Ctl::busy(kAllStates[i]), busy[i]) << i;
        EXPECT_EQ(Ctl::running(kAllStates[i]), running[i]) << i;
    }
}

TEST(TimerStateTable, EveryStateTimesEveryEvent) {
    ASSERT_EQ(std::size(kTable), 16u);
    int checked = 0;
    for (const Row& r : kTable) {
        for (bool match : {true, false}) {
            SCOPED_TRACE(where(r, match));
            const std::uint32_t wg = match ? kGen : kOther;  // the word's generation; the actor expects kGen
            const Word c = Ctl::make(wg, r.s, kD);
            auto same_gen = [&](State s, tick_t d) { return Ctl::make(wg, s, d); };

            // decide_cancel
            const CancelStep cs = decide_cancel(c, kGen, r.periodic);
            if (match) {
                EXPECT_EQ(cs.out, r.cancel.out);
                EXPECT_EQ(cs.next, same_gen(r.cancel.next, kD));
            } else {
                EXPECT_EQ(cs.out, CO::NotPending);
                EXPECT_EQ(cs.next, c);
            }
            // decide_reset: own_run x earlier/later, and a tick equal to the deadline
            for (int own = 0; own < 2; ++own) {
                for (int later = 0; later < 2; ++later) {
                    SCOPED_TRACE(std::string(own ? "own_run " : "not own_run ") + (later ? "later" : "earlier"));
                    const ResetStep rs = decide_reset(c, kGen, later ? kLater : kEarlier, r.periodic, own != 0);
                    const ResetX& x = r.reset[own][later];
                    if (match && x.rearmed) {
                        EXPECT_TRUE(rs.rearmed);
                        EXPECT_EQ(rs.next, same_gen(x.next, x.d));
                        EXPECT_EQ(rs.post, x.post);
                    } else {
                        EXPECT_FALSE(rs.rearmed);
                        EXPECT_EQ(rs.next, c);
                        EXPECT_EQ(rs.post, Post::None);
                    }
                    ++checked;
                }
            }
            // decide_expire: the shard does not look at the generation (it owns the links)
            const std::uint64_t period = r.periodic ? kPeriod : 0;
            const struct {
                tick_t now;
                const ExpireX& x;
                const char* what;
            } cases[] = {{kNowPast, r.past, "d < now"}, {kNowAt, r.at, "d == now"}, {kNowBefore, r.before, "d > now"}};
            for (const auto& k : cases) {
                SCOPED_TRACE(k.what);
                const ExpireStep es = decide_expire(c, k.now, period);
                EXPECT_EQ(es.out, k.x.out);
                if (k.x.out == EO::Drop) {
                    EXPECT_EQ(es.next, c);
                } else {
                    EXPECT_EQ(es.next, same_gen(k.x.next, k.x.d));
                    EXPECT_EQ(es.file_at, k.x.file_at);
                    EXPECT_EQ(es.due, k.x.due);
                }
            }
            // decide_begin_run, must_wait: generation-checked
            EXPECT_EQ(decide_begin_run(c, kGen), match && r.begin_run);
            EXPECT_EQ(must_wait(c, kGen), match && r.must_wait);
            // decide_finish_run: the worker owns RUNNING*, no generation
            const FinishStep fs = decide_finish_run(c, r.periodic);
            EXPECT_EQ(fs.out, r.finish.out);
            EXPECT_EQ(fs.next, same_gen(r.finish.next, kD));
            ++checked;
        }
    }
    EXPECT_EQ(checked, 16 * 2 * 5);
}

TEST(TimerStateTable, EqualTickAndFullGenerations) {
    const Word pe = Ctl::make(kGen, Pe, kD);
    // reset to the same tick: re-armed, nothing to post
    EXPECT_EQ(decide_reset(pe, kGen, kD, false, false).rearmed, true);
    EXPECT_EQ(decide_reset(pe, kGen, kD, false, false).next, pe);
    EXPECT_EQ(decide_reset(pe, kGen, kD, false, false).post, Post::None);
    const Word di = Ctl::make(kGen, Di, kD);
    EXPECT_EQ(decide_reset(di, kGen, kD, false, false).post, Post::Insert);  // out of the wheel: always Insert
    EXPECT_EQ(decide_reset(di, kGen, kD, true, false).post, Post::None);
    const Word ru = Ctl::make(kGen, Ru, kD);
    EXPECT_EQ(decide_reset(ru, kGen, kD, true, false).post, Post::None);
    // The decisions compare only the low 10 bits of the generation they are
    // given (TimerState passes the full 24-bit one and checks it itself).
    for (std::uint32_t k : {1u, 7u, 0x3FFFu}) {
        const std::uint32_t full = kGen + (k << 10);
        EXPECT_EQ(decide_cancel(pe, full, false).out, CO::Cancelled);
        EXPECT_TRUE(decide_reset(pe, full, kEarlier, false, false).rearmed);
        EXPECT_TRUE(decide_begin_run(di, full));
        EXPECT_TRUE(must_wait(ru, full));
        EXPECT_EQ(decide_cancel(pe, full + 1, false).out, CO::NotPending);
    }
}

// ---- ground rules, as properties over a sweep of words -------------------------------

struct Edge {
    State from, to;
};
// Every state change a decision may make (timer_state.hpp's transition list).
const std::vector<Edge> kCancelEdges = {{Pe, Rl}, {Di, Rl}, {Ru, RS}, {RR, RS}};
const std::vector<Edge> kResetEdges = {{Di, Pe}, {Ru, RR}};
const std::vector<Edge> kExpireEdges = {{Pe, Di}};
const std::vector<Edge> kFinishEdges = {{Ru, Pe}, {Ru, Rl}, {RR, Pe}};  // RS -> CANCELLED: its owner's store

bool documented(const std::vector<Edge>& es, State from, State to) {
    if (from == to) return true;
    for (const Edge& e : es)
        if (e.from == from && e.to == to) return true;
    return false;
}

TEST(TimerStateTable, GroundRulesHoldForEveryWord) {
    const std::uint32_t gens[] = {0, 1, 0x155, 0x2A5, 0x3FE, 0x3FF};
    const tick_t deadlines[] = {0, 1, 7, 999, 1000, 1001, 1 << 20};
    const tick_t ticks[] = {0, 1, 999, 1000, 1001, 5000};
    const tick_t nows[] = {0, 1, 998, 999, 1000, 1001, 1003, 1004, 1005, 100000};
    const std::uint64_t periods[] = {1, 3, 4, 1000};
    std::uint64_t n = 0;
    for (std::uint32_t wg : gens) {
        for (std::uint32_t ag : gens) {
            const bool match = wg == ag;
            for (State s : kAllStates) {
                for (tick_t d : deadlines) {
                    const Word c = Ctl::make(wg, s, d);
                    for (bool periodic : {false, true}) {
                        SCOPED_TRACE(tsm::detail::word_str(c) + " actor gen " + std::to_string(ag) +
                                     (periodic ? " periodic" : " one-shot"));
                        // decide_cancel (a caller, or the shutdown sweep)
                        const CancelStep cs = decide_cancel(c, ag, periodic);
                        const State cn = Ctl::state(cs.next);
                        ASSERT_EQ(Ctl::gen10(cs.next), wg) << "cancel touched the generation";
                        ASSERT_EQ(Ctl::deadline(cs.next), d);
                        ASSERT_TRUE(documented(kCancelEdges, s, cn));
                        if (Ctl::busy(s)) {
                            ASSERT_TRUE(Ctl::busy(cn)) << "cancel took a busy state out of busy";
                        }
                        if (cs.out == CO::NotPending || cs.out == CO::Busy) {
                            ASSERT_EQ(cs.next, c);
                        }
                        if (cs.out == CO::Cancelled) {
                            ASSERT_TRUE(match && (s == Pe || s == Di) && cn == Rl);
                        }
                        if (cs.out == CO::StoppedDuringRun) {
                            ASSERT_TRUE(match && Ctl::running(s) && cn == RS);
                        }
                        if (!match) {
                            ASSERT_EQ(cs.out, CO::NotPending);
                        }
                        // decide_reset (a caller; own_run: its callback)
                        for (tick_t t : ticks) {
                            for (bool own : {false, true}) {
                                const ResetStep rs = decide_reset(c, ag, t, periodic, own);
                                const State rn = Ctl::state(rs.next);
                                ASSERT_EQ(Ctl::gen10(rs.next), wg) << "reset touched the generation";
                                ASSERT_TRUE(documented(kResetEdges, s, rn));
                                if (!rs.rearmed) {
                                    ASSERT_EQ(rs.next, c);
                                    ASSERT_EQ(rs.post, Post::None);
                                    continue;
                                }
                                ASSERT_TRUE(match);
                                ASSERT_EQ(Ctl::deadline(rs.next), t);
                                ASSERT_TRUE(s == Pe || s == Di || s == Ru || s == RR) << "reset re-armed a dead state";
                                ASSERT_EQ(Ctl::running(s), Ctl::running(rn)) << "reset started or ended a run";
                                if (rs.post == Post::Insert) {
                                    ASSERT_TRUE(s == Di && !periodic);
                                }
                                if (rs.post == Post::Refile) {
                                    ASSERT_TRUE(t < d && s != RR);
                                }
                                if (s == RR || (s == Ru && !periodic)) {
                                    ASSERT_EQ(rs.post, Post::None);
                                }
                                if (s == Ru && !periodic) {
                                    ASSERT_TRUE(own) << "a one-shot run re-armed by another thread";
                                }
                                if (s == Di && !periodic) {
                                    ASSERT_EQ(rs.post, Post::Insert) << "a due one-shot is in no wheel";
                                }
                                if ((s == Pe || (s == Di && periodic) || (s == Ru && periodic)) && t < d) {
                                    ASSERT_EQ(rs.post, Post::Refile) << "an earlier deadline must reach the shard";
                                }
                            }
                        }
                        // decide_begin_run, must_wait
                        ASSERT_EQ(decide_begin_run(c, ag), match && s == Di);
                        ASSERT_EQ(must_wait(c, ag), match && Ctl::busy(s));
                        // decide_finish_run (the worker, owner of RUNNING*)
                        if (Ctl::running(s)) {
                            const FinishStep fs = decide_finish_run(c, periodic);
                            const State fn = Ctl::state(fs.next);
                            ASSERT_EQ(Ctl::gen10(fs.next), wg);
                            ASSERT_EQ(Ctl::deadline(fs.next), d);
                            if (fs.out == FO::Stopped) {
                                ASSERT_EQ(s, RS);  // the worker releases, then its own store
                            } else {
                                ASSERT_TRUE(documented(kFinishEdges, s, fn));
                                ASSERT_FALSE(Ctl::running(fn)) << "finish_run left the run in progress";
                                if (fs.out == FO::Last) {
                                    ASSERT_TRUE(s == Ru && !periodic && fn == Rl);
                                }
                                if (fs.out == FO::Periodic) {
                                    ASSERT_TRUE(s == Ru && periodic && fn == Pe);
                                }
                                if (fs.out == FO::Rearmed) {
                                    ASSERT_TRUE(s == RR && fn == Pe);
                                }
                            }
                        }
                        ++n;
                    }
                    // decide_expire (the shard)
                    for (tick_t now : nows) {
                        for (std::uint64_t p : periods) {
                            for (bool periodic : {false, true}) {
                                const std::uint64_t period = periodic ? p : 0;
                                const ExpireStep es = decide_expire(c, now, period);
                                const State en = Ctl::state(es.next);
                                ASSERT_EQ(Ctl::gen10(es.next), wg) << "expire touched the generation";
                                ASSERT_TRUE(documented(kExpireEdges, s, en));
                                switch (es.out) {
                                    case EO::Drop:
                                        ASSERT_EQ(es.next, c);
                                        ASSERT_TRUE(s != Pe && !(periodic && (s == Di || s == Ru)));
                                        break;
                                    case EO::Later:
                                        ASSERT_EQ(es.next, c);
                                        ASSERT_TRUE(d > now && es.file_at == d);
                                        break;
                                    case EO::Fire:
                                        ASSERT_TRUE(s == Pe && en == Di && d <= now && es.due == d);
                                        if (periodic) {
                                            ASSERT_GT(es.file_at, now);
                                            ASSERT_LE(es.file_at, now + period) << "a burst: more than one period late";
                                            ASSERT_EQ((es.file_at - d) % period, 0u);
                                            ASSERT_EQ(Ctl::deadline(es.next), es.file_at);
                                        } else {
                                            ASSERT_EQ(Ctl::deadline(es.next), d);
                                        }
                                        break;
                                    case EO::Skip:
                                        ASSERT_TRUE(periodic && (s == Di || s == Ru) && en == s && d <= now);
                                        ASSERT_GT(es.file_at, now);
                                        ASSERT_LE(es.file_at, now + period);
                                        ASSERT_EQ((es.file_at - d) % period, 0u);
                                        ASSERT_EQ(Ctl::deadline(es.next), es.file_at);
                                        break;
                                }
                                if (Ctl::busy(s)) {
                                    ASSERT_EQ(en, s) << "the shard changed a busy state";
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    EXPECT_GT(n, 1000u);
}

// ---- the TimerState loops on a real record, single-threaded -------------------------------

TEST(TimerStateLoops, ApplyTheDecisionsAndCheckTheFullGeneration) {
    Record r;
    const std::uint32_t G = 0x12345;  // full 24-bit generation; gen10 = 0x345
    r.set_gen(G);
    ASSERT_FALSE(r.periodic()) << "set_gen clears the flags: a one-shot";
    TimerState::publish(r, G, 100);
    EXPECT_EQ(TimerState::load(r), Ctl::make(G, Pe, 100));

    // A stale id with the same 10-bit generation (1024 recyclings ago) is
    // refused by the full-generation check, and the word is left alone.
    EXPECT_EQ(TimerState::try_cancel(r, G - 1024), CO::NotPending);
    EXPECT_FALSE(TimerState::reset(r, G - 1024, 50, false).rearmed);
    EXPECT_FALSE(TimerState::begin_run(r, G + 1024));
    EXPECT_EQ(TimerState::load(r), Ctl::make(G, Pe, 100));

    // reset earlier: Refile; the shard fires it; the worker runs it
    const ResetStep rs = TimerState::reset(r, G, 50, false);
    EXPECT_TRUE(rs.rearmed);
    EXPECT_EQ(rs.post, Post::Refile);
    EXPECT_EQ(TimerState::load(r), Ctl::make(G, Pe, 50));
    const ExpireStep es = TimerState::expire(r, 60, 0, 0);
    EXPECT_EQ(es.out, EO::Fire);
    EXPECT_EQ(TimerState::load(r), Ctl::make(G, Di, 50));
    EXPECT_TRUE(TimerState::begin_run(r, G));
    EXPECT_FALSE(TimerState::begin_run(r, G)) << "a second FireItem of the same timer";
    EXPECT_EQ(TimerState::try_cancel(r, G), CO::Busy) << "one-shot: its last run";
    const FinishStep fs = TimerState::finish_run(r);
    EXPECT_EQ(fs.out, FO::Last);
    EXPECT_EQ(TimerState::load(r), Ctl::make(G, Rl, 50));
    EXPECT_EQ(TimerState::wait_while_busy(r, G + 1), Ctl::make(G, Rl, 50)) << "another generation: no wait";
    TimerState::mark_free(r, G + 1, 7);
    EXPECT_EQ(Ctl::state(TimerState::load(r)), Fr);
    EXPECT_EQ(TimerState::free_link(TimerState::load(r)), 7u);

    // periodic: stop during the run, the worker finishes it
    r.set_gen(G + 1);
    r.set_flags(Record::kHasExtra | Record::kPeriodic);  // SKIP; its period (10) is the shard's to pass
    ASSERT_TRUE(r.periodic() && r.fixed_rate());
    ASSERT_EQ(r.gen(), G + 1) << "the flags keep the generation";
    TimerState::publish(r, G + 1, 200);
    EXPECT_EQ(TimerState::expire(r, 205, 0, 10).out, EO::Fire);
    EXPECT_EQ(TimerState::load(r), Ctl::make(G + 1, Di, 210));
    EXPECT_TRUE(TimerState::begin_run(r, G + 1));
    EXPECT_EQ(TimerState::try_cancel(r, G + 1), CO::StoppedDuringRun);
    EXPECT_EQ(TimerState::try_cancel(r, G + 1), CO::Busy);
    EXPECT_EQ(TimerState::finish_run(r).out, FO::Stopped);
    EXPECT_EQ(Ctl::state(TimerState::load(r)), RS) << "Stopped: the worker's own stores come around the release";
    TimerState::begin_stopped_release(r);
    EXPECT_EQ(Ctl::state(TimerState::load(r)), State::Releasing);
    EXPECT_EQ(TimerState::try_cancel(r, G + 1), CO::Busy);
    TimerState::finish_stopped(r);
    EXPECT_EQ(TimerState::load(r), Ctl::make(G + 1, Ca, 210));
    EXPECT_EQ(TimerState::wait_while_busy(r, G + 1), Ctl::make(G + 1, Ca, 210));

    // stop of a pending timer: RELEASING (the canceller owns it), then CANCELLED
    r.set_gen(G + 2);
    TimerState::publish(r, G + 2, 300);
    EXPECT_EQ(TimerState::try_cancel(r, G + 2), CO::Cancelled);
    EXPECT_EQ(TimerState::load(r), Ctl::make(G + 2, Rl, 300));
    EXPECT_EQ(TimerState::try_cancel(r, G + 2), CO::Busy);
    TimerState::finish_cancel(r);
    EXPECT_EQ(TimerState::load(r), Ctl::make(G + 2, Ca, 300));
    EXPECT_EQ(TimerState::try_cancel(r, G + 2), CO::NotPending);
}

// ============================================================================
// 2. All interleavings
// ============================================================================

using tsm::Op;
using tsm::Scenario;
using tsm::Who;

constexpr tick_t kEarly = 50;   // before the first deadline (100)
constexpr tick_t kLate = 150;   // after it
constexpr tick_t kRearm = 200;  // a callback re-arming its own timer

std::string fmt_count(long double v) {
    char buf[64];
    if (v < 1e15L) std::snprintf(buf, sizeof buf, "%.0Lf", v);
    else std::snprintf(buf, sizeof buf, "%.3Le", v);
    return buf;
}

tsm::Result run(const Scenario& sc, bool memo = true) {
    const tsm::Result r = tsm::explore(sc, memo);
    std::printf("  %-58s %9llu states %10llu transitions %16s interleavings %7.3f s\n", sc.name.c_str(),
                static_cast<unsigned long long>(r.states), static_cast<unsigned long long>(r.transitions),
                fmt_count(r.interleavings).c_str(), r.seconds);
    std::fflush(stdout);
    return r;
}

Scenario make(std::string name, bool periodic, std::vector<std::vector<Op>> callers, int budget = 2) {
    Scenario sc;
    sc.name = std::move(name);
    sc.periodic = periodic;
    sc.callers = std::move(callers);
    sc.shard_budget = budget;
    return sc;
}

std::vector<Scenario> contract_scenarios() {
    using tsm::reset;
    using tsm::start;
    using tsm::stop;
    using tsm::stop_sync;
    std::vector<Scenario> v;
    for (bool p : {false, true}) {
        const std::string k = p ? "periodic: " : "one-shot: ";
        v.push_back(make(k + "stop | fire", p, {{stop()}}));
        v.push_back(make(k + "stop_sync | fire", p, {{stop_sync()}}));
        v.push_back(make(k + "stop | stop_sync | fire", p, {{stop()}, {stop_sync()}}));
        v.push_back(make(k + "stop_sync | stop_sync | fire", p, {{stop_sync()}, {stop_sync()}}));
        v.push_back(make(k + "reset(earlier) | stop_sync | fire", p, {{reset(kEarly)}, {stop_sync()}}));
        v.push_back(make(k + "reset(later) | stop | fire", p, {{reset(kLate)}, {stop()}}));
        v.push_back(make(k + "reset(earlier) | reset(later) | fire", p, {{reset(kEarly)}, {reset(kLate)}}));
        v.push_back(make(k + "reset(later) | stop | stop_sync | fire", p, {{reset(kLate)}, {stop()}, {stop_sync()}}, 1));
        v.push_back(make(k + "reset(earlier) | stop_sync | stop_sync | fire", p,
                         {{reset(kEarly)}, {stop_sync()}, {stop_sync()}}, 1));
        v.push_back(make(k + "reset;stop_sync | reset(later) | fire", p, {{reset(kEarly), stop_sync()}, {reset(kLate)}}));
        {
            Scenario sc = make(k + "Insert queued: reset(earlier) | stop | fire", p, {{reset(kEarly)}, {stop()}});
            sc.linked = false;
            v.push_back(sc);
        }
        // The callback acting on its own timer.
        {
            Scenario sc = make(k + "callback reset(own) | stop_sync | stop | fire", p, {{stop_sync()}, {stop()}});
            sc.callback = reset(kRearm, Who::Own);
            v.push_back(sc);
        }
        {
            Scenario sc = make(k + "callback reset(own) | reset(earlier) | fire", p, {{reset(kEarly)}}, 3);
            sc.callback = reset(kRearm, Who::Own);
            v.push_back(sc);
        }
        {
            Scenario sc = make(k + "callback stop_sync(own) | stop_sync | fire", p, {{stop_sync()}});
            sc.callback = stop_sync(Who::Own);
            v.push_back(sc);
        }
        {
            Scenario sc = make(k + "callback stop(own) | reset(later) | fire", p, {{reset(kLate)}});
            sc.callback = stop(Who::Own);
            v.push_back(sc);
        }
        // Recycling: the record is freed (by the shard on a Cancel, or by the
        // worker after a last run) and started again by another caller, while
        // others still act on the first timer's (now stale) id.
        v.push_back(make(k + "stop | start(new);stop_sync(new) | stop_sync(stale)", p,
                         {{stop()}, {start(kLate, p), stop_sync(Who::Mine)}, {stop_sync()}}, 1));
        v.push_back(make(k + "stop | start(new);reset(new) | reset(stale);stop(stale)", p,
                         {{stop()}, {start(kLate, p), reset(kEarly, Who::Mine)}, {reset(kEarly), stop()}}, 1));
        v.push_back(make(k + "fire + recycle | start(new) | stop(stale);reset(stale)", p,
                         {{start(kLate, !p)}, {stop(), reset(kEarly)}}, 1));
        v.push_back(make(k + "id of the previous occupant: stop_sync | reset | stop", p,
                         {{stop_sync(Who::Stale)}, {reset(kEarly, Who::Stale)}, {stop()}}, 1));
        // Shutdown racing the callers.
        {
            Scenario sc = make(k + "shutdown | stop | stop_sync | fire", p, {{stop()}, {stop_sync()}}, 1);
            sc.shutdown = true;
            v.push_back(sc);
        }
        {
            Scenario sc = make(k + "shutdown | reset(earlier) | stop_sync | fire", p, {{reset(kEarly)}, {stop_sync()}}, 1);
            sc.shutdown = true;
            v.push_back(sc);
        }
        // Retirement at the last 24-bit generation: never reused.
        {
            Scenario sc = make(k + "last generation: stop | stop_sync | start(new) | fire", p,
                               {{stop()}, {stop_sync()}, {start(kLate, p)}}, 1);
            sc.gen = Id::kMaxGen;
            v.push_back(sc);
        }
    }
    return v;
}

TEST(TimerStateInterleavings, ContractHoldsInEveryInterleaving) {
    const auto t0 = std::chrono::steady_clock::now();
    long double total = 0;
    std::uint64_t states = 0;
    for (const Scenario& sc : contract_scenarios()) {
        const tsm::Result r = run(sc);
        EXPECT_TRUE(r.violation.empty()) << sc.name << ":\n" << r.violation;
        EXPECT_GT(r.interleavings, 0);
        total += r.interleavings;
        states += r.states;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("  total: %llu states, %s interleavings, %.2f s\n", static_cast<unsigned long long>(states),
                fmt_count(total).c_str(), s);
}

// The memoised search counts exactly the interleavings that plain
// enumeration walks one by one, and reaches the same verdict.
TEST(TimerStateInterleavings, MemoisedCountEqualsPlainEnumeration) {
    using tsm::reset;
    using tsm::stop;
    using tsm::stop_sync;
    std::vector<Scenario> small = {
        make("one-shot: stop | fire (budget 1)", false, {{stop()}}, 1),
        make("periodic: stop | fire (budget 1)", true, {{stop()}}, 1),
        make("one-shot: reset(earlier) | stop | shard", false, {{reset(kEarly)}, {stop()}}, 0),
        make("periodic: reset(later) | stop_sync | shard", true, {{reset(kLate)}, {stop_sync()}}, 0),
    };
    for (std::size_t i = 2; i < small.size(); ++i) small[i].worker = false;
    for (const Scenario& sc : small) {
        const tsm::Result m = run(sc, true);
        ASSERT_LE(m.interleavings, 5e6L) << sc.name << ": too big to enumerate one by one";
        const tsm::Result p = run(sc, false);
        EXPECT_TRUE(m.violation.empty()) << m.violation;
        EXPECT_TRUE(p.violation.empty()) << p.violation;
        EXPECT_EQ(m.interleavings, p.interleavings) << sc.name;
        EXPECT_EQ(static_cast<long double>(p.terminals), p.interleavings);
    }
}

// ============================================================================
// 3. ABA: the hazard + quarantine rule
// ============================================================================

// A victim loads the word of timer G and is preempted before its CAS;
// another stop cancels G, the shard recycles the record, and the recycler
// takes it through the 1024 recyclings that bring the same 10-bit
// generation back, with a new occupant started exactly like G.
Scenario aba(const char* name, Op victim, bool rule, bool hazard_late = false) {
    Scenario sc;
    sc.name = name;
    sc.callers = {{victim}, {tsm::stop()}};
    sc.shard_budget = 0;  // the shard only handles messages (and reclaims the quarantine)
    sc.worker = false;
    sc.recycler = true;
    sc.gen = 0x1000 + 0x155;  // wraps (to 0x1400) in the middle of the recycler's run
    sc.mut.no_quarantine = !rule;
    sc.mut.hazard_late = hazard_late;
    return sc;
}

TEST(TimerStateAba, WithoutTheRuleAStaleCasHitsTheNewOccupant) {
    for (const Scenario& sc : {aba("ABA, rule off: stale stop", tsm::stop(), false),
                               aba("ABA, rule off: stale reset(earlier)", tsm::reset(kEarly), false),
                               aba("ABA, rule off: stale stop_sync", tsm::stop_sync(), false)}) {
        const tsm::Result r = run(sc);
        ASSERT_FALSE(r.violation.empty()) << sc.name << ": the explorer missed the ABA";
        EXPECT_NE(r.violation.find("stale"), std::string::npos) << r.violation;
        EXPECT_NE(r.violation.find("generation " + std::to_string(sc.gen + 1024)), std::string::npos) << r.violation;
        std::printf("%s\n", r.violation.c_str());
    }
}

TEST(TimerStateAba, WithTheRuleNoInterleavingDoes) {
    for (const Scenario& sc : {aba("ABA, rule on: stale stop", tsm::stop(), true),
                               aba("ABA, rule on: stale reset(earlier)", tsm::reset(kEarly), true),
                               aba("ABA, rule on: stale stop_sync", tsm::stop_sync(), true)}) {
        const tsm::Result r = run(sc);
        EXPECT_TRUE(r.violation.empty()) << sc.name << ":\n" << r.violation;
    }
}

// The rule needs the hazard published BEFORE the generation check that
// precedes the CAS: published only just before the CAS, the quarantine can
// be reclaimed in between.
TEST(TimerStateAba, HazardPublishedTooLateIsCaught) {
    const Scenario sc = aba("ABA, rule on, hazard after the gen check: stale stop", tsm::stop(), true, true);
    const tsm::Result r = run(sc);
    ASSERT_FALSE(r.violation.empty());
    EXPECT_NE(r.violation.find("stale"), std::string::npos) << r.violation;
}

// ============================================================================
// 4. The checks catch broken decisions and broken steps
// ============================================================================

struct Mutant {
    const char* what;
    Scenario sc;
    const char* expect;  // a phrase of the violation
};

std::vector<Mutant> mutants() {
    using tsm::reset;
    using tsm::stop;
    using tsm::stop_sync;
    std::vector<Mutant> v;
    {
        Scenario sc = make("mutant: decide_cancel cancels a RUNNING one-shot", false, {{stop()}}, 1);
        sc.dec.cancel = [](Word c, std::uint32_t g, bool p) {
            if (!p && Ctl::state(c) == State::Running && Ctl::gen10(c) == (g & Ctl::kGenMask))
                return CancelStep{CancelOutcome::Cancelled, Ctl::with(c, State::Releasing)};
            return decide_cancel(c, g, p);
        };
        v.push_back({"decide_cancel: RUNNING one-shot -> RELEASING", sc, "in progress"});
    }
    {
        Scenario sc = make("mutant: decide_cancel stops a running one-shot", false, {{stop()}}, 1);
        sc.dec.cancel = [](Word c, std::uint32_t g, bool) { return decide_cancel(c, g, true); };
        v.push_back({"decide_cancel: a one-shot run stopped like a periodic one", sc, "ended twice"});
    }
    {
        Scenario sc = make("mutant: must_wait ignores RELEASING", false, {{stop()}, {stop_sync()}}, 0);
        sc.dec.must_wait = [](Word c, std::uint32_t g) {
            return Ctl::state(c) != State::Releasing && must_wait(c, g);
        };
        v.push_back({"must_wait: not while RELEASING", sc, "stop_sync returned before the release hook"});
    }
    {
        Scenario sc = make("mutant: must_wait ignores RUNNING", false, {{stop_sync()}}, 1);
        sc.dec.must_wait = [](Word c, std::uint32_t g) { return Ctl::state(c) != State::Running && must_wait(c, g); };
        v.push_back({"must_wait: not while RUNNING", sc, "stop_sync returned while a run"});
    }
    {
        Scenario sc = make("mutant: decide_begin_run accepts PENDING", false, {{reset(kLate)}}, 1);
        sc.dec.begin_run = [](Word c, std::uint32_t g) {
            return (Ctl::state(c) == State::Pending && Ctl::gen10(c) == (g & Ctl::kGenMask)) ||
                   decide_begin_run(c, g);
        };
        v.push_back({"decide_begin_run: PENDING too", sc, "still in the wheel"});
    }
    {
        Scenario sc = make("mutant: reset of a due one-shot posts no Insert", false, {{reset(kLate)}}, 1);
        sc.dec.reset = [](Word c, std::uint32_t g, tick_t t, bool p, bool own) {
            ResetStep s = decide_reset(c, g, t, p, own);
            if (s.post == Post::Insert) s.post = Post::None;
            return s;
        };
        v.push_back({"decide_reset: DISPATCHED one-shot without Insert", sc, "stranded"});
    }
    {
        Scenario sc = make("mutant: decide_reset re-arms RELEASING", false, {{stop()}, {reset(kLate)}}, 0);
        sc.dec.reset = [](Word c, std::uint32_t g, tick_t t, bool p, bool own) {
            if (Ctl::state(c) == State::Releasing && Ctl::gen10(c) == (g & Ctl::kGenMask))
                return ResetStep{true, Ctl::with(c, State::Pending, t), Post::Refile};
            return decide_reset(c, g, t, p, own);
        };
        v.push_back({"decide_reset: RELEASING -> PENDING", sc, ""});
    }
    {
        Scenario sc = make("mutant: finish_run treats RUNNING_REARMED as periodic", false, {}, 1);
        sc.callback = reset(kRearm, Who::Own);
        sc.dec.finish_run = [](Word c, bool p) {
            FinishStep s = decide_finish_run(c, p);
            if (s.out == FinishOutcome::Rearmed) s.out = FinishOutcome::Periodic;  // no Insert posted
            return s;
        };
        v.push_back({"decide_finish_run: re-armed one-shot without Insert", sc, "stranded"});
    }
    {
        Scenario sc = make("mutant: decide_expire fires a RUNNING periodic timer", true, {}, 2);
        sc.dec.expire = [](Word c, tick_t now, std::uint64_t period) {
            if (Ctl::state(c) == State::Running && Ctl::deadline(c) <= now)
                return ExpireStep{ExpireOutcome::Fire, Ctl::with(c, State::Dispatched), Ctl::deadline(c) + period,
                                  Ctl::deadline(c)};
            return decide_expire(c, now, period);
        };
        v.push_back({"decide_expire: fire while the previous run is in progress", sc, "RUNNING"});
    }
    {
        // A stop_sync that found a one-shot run (Busy) waits; the callback
        // re-arms (no wake inside busy states); the finish must wake it.
        Scenario sc = make("mutant: finish_run wakes nobody", false, {{stop_sync()}}, 1);
        sc.callback = reset(kRearm, Who::Own);
        sc.mut.no_wake_finish_run = true;
        v.push_back({"finish_run without wake()", sc, "lost wakeup"});
    }
    {
        Scenario sc = make("mutant: finish_cancel wakes nobody", false, {{stop()}, {stop_sync()}}, 0);
        sc.mut.no_wake_finish_cancel = true;
        v.push_back({"stop's finish_cancel without wake()", sc, "lost wakeup"});
    }
    {
        Scenario sc = make("mutant: Cancel handler does not unlink", true, {{stop()}}, 1);
        sc.mut.cancel_keeps_link = true;
        v.push_back({"Cancel handler without wheel_.remove", sc, "still in the wheel"});
    }
    {
        Scenario sc = make("mutant: stop_sync does not retry a pending timer", false, {{stop_sync()}}, 1);
        sc.mut.stop_sync_no_retry = true;
        sc.callback = reset(kRearm, Who::Own);
        v.push_back({"stop_sync without its loop", sc, "stop_sync returned before the release hook"});
    }
    return v;
}

TEST(TimerStateMutants, EveryBrokenRuleIsCaught) {
    for (const Mutant& m : mutants()) {
        const tsm::Result r = run(m.sc);
        EXPECT_FALSE(r.violation.empty()) << m.what << ": not caught";
        if (r.violation.empty()) continue;
        EXPECT_NE(r.violation.find(m.expect), std::string::npos) << m.what << ":\n" << r.violation;
        std::printf("    caught (%s): %s\n", m.what, r.violation.substr(0, r.violation.find('\n')).c_str());
    }
}

}  // namespace
