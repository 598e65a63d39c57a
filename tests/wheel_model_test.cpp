// SPDX-License-Identifier: MIT OR Apache-2.0
// Randomized model test for tickwheel::Wheel: long random sequences of
// insert / remove / rearm (earlier, later, to the past) / advance (by 0, by
// single ticks, to slot and epoch boundaries, to exact deadlines, to
// next_expiry(), backwards, and by huge jumps) / partial pops, checked step
// by step against a plain reference model (an ordered set of (deadline, id)
// for pending timers plus a per-id state). After every advance(t) the nodes
// that expire must be EXACTLY the reference timers with deadline <= t (none
// early, none late, none twice), and size(), now(), has_expired(),
// earliest_deadline() and next_expiry() must agree with the reference.
// After every operation Wheel::check() must also pass: the wheel's internal
// invariants (bitmaps, slot placement, list links, overflow hint, size),
// verified by its own slow scan, so a broken invariant is reported at the
// operation that broke it, not when a later expiry goes wrong.
//
// Seeds: four fixed ones, plus TICKWHEEL_SEED (decimal or 0x-hex) if set.
// TICKWHEEL_MODEL_OPS multiplies the per-seed operation count (default 1.0,
// e.g. TICKWHEEL_MODEL_OPS=20 for a long soak). Every failure message carries
// the seed, the operation index and the last operations.
#include "tickwheel/wheel.hpp"
#include "test_support/wheel.hpp"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace wheel_test;


// Operations per seed at multiplier 1.0 (4 fixed seeds -> ~1.6 M ops).
constexpr double kDefaultOpsPerSeed = 400'000;

constexpr tick_t sat_add(tick_t a, tick_t b) { return a > kMax - b ? kMax : a + b; }
constexpr tick_t sat_sub(tick_t a, tick_t b) { return a < b ? 0 : a - b; }
constexpr tick_t pow64(unsigned k) { return tick_t{1} << (Wheel::kSlotBits * k); }

double env_multiplier() {
    const char* s = std::getenv("TICKWHEEL_MODEL_OPS");
    if (s == nullptr || *s == '\0') return 1.0;
    char* end = nullptr;
    const double m = std::strtod(s, &end);
    return (end != s && m > 0) ? m : 1.0;
}

class Model {
public:
    Model(std::uint64_t seed, std::uint64_t ops) : seed_(seed), ops_(ops), rng_{seed} {}

    void run() {
        reset();
        for (op_ = 0; op_ < ops_; ++op_) {
            step();
            if (::testing::Test::HasFatalFailure()) return;
            check_invariants();
            if (::testing::Test::HasFatalFailure()) return;
        }
        teardown();
        std::cout << "[ model ] seed " << hex(seed_) << ": " << ops_ << " ops, " << advances_ << " advances, " << expirations_
                  << " expirations (" << far_expirations_ << " of timers filed beyond the level range; "
                  << overflow_inserts_ << " such inserts), " << epoch_crossings_ << " advances across a 2^48 boundary, "
                  << resets_ << " wheels, " << checks_ << " check() passes\n";
    }

private:
    enum class State : std::uint8_t { Unlinked, Pending, Expired };
    struct Hist {
        char op;
        std::uint32_t id;
        tick_t arg;
        tick_t now;
    };

    // ---- reference bookkeeping ------------------------------------------------
    void ref_track(std::uint32_t id, tick_t d) {
        deadline_[id] = d;
        far_[id] = d > w_->now() && (d ^ w_->now()) >= kRange;
        if (d <= w_->now()) {
            state_[id] = State::Expired;
            ++expired_count_;
        } else {
            state_[id] = State::Pending;
            pending_.emplace(d, id);
        }
    }
    void ref_untrack(std::uint32_t id) {
        if (state_[id] == State::Pending)
            pending_.erase({deadline_[id], id});
        else if (state_[id] == State::Expired)
            --expired_count_;
        state_[id] = State::Unlinked;
    }
    std::size_t ref_size() const { return pending_.size() + expired_count_; }

    std::string history() const {
        std::ostringstream os;
        os << "\n  seed " << hex(seed_) << " (rerun: TICKWHEEL_SEED=" << hex(seed_) << "), op " << op_ << ", pool " << pool_
           << ", pending " << pending_.size() << ", expired " << expired_count_ << "; last ops (oldest first):";
        for (std::size_t i = 0; i < hist_.size(); ++i) {
            const Hist& h = hist_[(hist_pos_ + i) % hist_.size()];
            if (h.op == 0) continue;
            os << "\n    " << h.op << " id=" << h.id << " arg=" << hex(h.arg) << " now=" << hex(h.now);
        }
        return os.str();
    }
    void log(char op, std::uint32_t id, tick_t arg) {
        hist_[hist_pos_] = Hist{op, id, arg, w_->now()};
        hist_pos_ = (hist_pos_ + 1) % hist_.size();
    }

    // ---- wheel lifecycle ------------------------------------------------------
    // A fresh wheel with a random starting clock and a random "profile":
    // pool size and how far deadlines may reach.
    void reset() {
        if (w_) teardown();
        if (::testing::Test::HasFatalFailure()) return;
        ++resets_;
        static constexpr std::uint32_t kPools[] = {8, 64, 512, 2048};
        pool_ = kPools[rng_.below(4)];
        nodes_ = std::make_unique<WheelNode[]>(pool_);
        state_.assign(pool_, State::Unlinked);
        deadline_.assign(pool_, 0);
        far_.assign(pool_, false);
        pending_.clear();
        expired_count_ = 0;
        // 0: anything; 1: levels 0-2 only (dense slots); 2: levels 0-5.
        max_level_ = rng_.one_in(3) ? (rng_.one_in(2) ? 2u : 5u) : 9u;
        tick_t start = 0;
        switch (rng_.below(6)) {
            case 0: start = 0; break;
            case 1: start = rng_.in(0, 1u << 20); break;
            case 2: start = pow64(static_cast<unsigned>(rng_.in(1, 7))) * rng_.in(1, 63) - rng_.in(0, 70); break;
            case 3: start = rng_.in(1, 0xFFFF) * kRange - rng_.in(1, 5000); break;  // just before an epoch
            case 4: start = rng_.next() >> rng_.in(1, 20); break;
            default: start = kMax - kRange * rng_.in(0, 3) - rng_.in(0, pow64(4)); break;
        }
        w_ = std::make_unique<Wheel>(start);
        ASSERT_EQ(w_->now(), start);
        ASSERT_TRUE(w_->empty());
        ASSERT_EQ(w_->next_expiry(), kNever);
    }

    // Removes everything still linked (checking remove()'s answer), then
    // drops the wheel.
    void teardown() {
        for (std::uint32_t id = 0; id < pool_; ++id) {
            const bool linked = state_[id] != State::Unlinked;
            ASSERT_EQ(nodes_[id].linked(), linked) << "id " << id << history();
            ASSERT_EQ(w_->remove(&nodes_[id]), linked) << "id " << id << history();
            ref_untrack(id);
        }
        ASSERT_TRUE(w_->empty()) << history();
        ASSERT_EQ(w_->next_expiry(), kNever) << history();
        ASSERT_EQ(w_->earliest_deadline(), kNever) << history();
        w_.reset();
    }

    // ---- random choices ------------------------------------------------------
    tick_t random_deadline() {
        const tick_t now = w_->now();
        const unsigned top = max_level_ > 8 ? 8 : max_level_;
        switch (rng_.below(20)) {
            case 0: return rng_.in(sat_sub(now, 1000), now);  // recent past / now
            case 1: return rng_.in(0, now);                   // anywhere in the past, incl. 0
            case 2:
            case 3:
            case 4: return sat_add(now, rng_.in(1, 64));  // level 0 / first carry
            case 5:
            case 6:
            case 7:
            case 8: {  // within a random level
                const unsigned level = static_cast<unsigned>(rng_.in(0, top));
                return sat_add(now, rng_.in(1, pow64(level) * 64 - 1));
            }
            case 9:
            case 10: {  // on / next to a slot boundary of a random level (carries)
                const unsigned level = static_cast<unsigned>(rng_.in(1, top));
                const tick_t span = pow64(level);
                const tick_t k = rng_.in(1, 3);
                const tick_t base = now & ~(span - 1);
                if (base > kMax - k * span) return kMax;
                return sat_add(base + k * span - 1, rng_.in(0, 2));
            }
            case 11:  // the same tick as an existing pending timer
                if (!pending_.empty()) {
                    auto it = pending_.lower_bound({rng_.in(now, sat_add(now, pow64(top))), 0});
                    if (it == pending_.end()) --it;
                    return it->first;
                }
                return sat_add(now, 1);
            case 12:
                if (max_level_ <= 8) return sat_add(now, rng_.in(1, 64));
                return sat_add(now, kRange - 3 + rng_.in(0, 6));  // the top of the level range
            case 13: {  // around the next epoch boundaries
                if (max_level_ <= 8) return sat_add(now, rng_.in(1, pow64(2)));
                const tick_t epoch = now & ~(kRange - 1);
                const tick_t k = rng_.in(1, 2);
                if (epoch > kMax - k * kRange) return kMax - rng_.in(0, 1);
                return epoch + k * kRange - 2 + rng_.in(0, 4);
            }
            case 14:  // far beyond the level range
                if (max_level_ <= 8) return sat_add(now, rng_.in(1, pow64(top)));
                switch (rng_.below(4)) {
                    case 0: return kMax - rng_.in(0, 1);
                    case 1: return rng_.next();
                    default: return sat_add(now, rng_.in(kRange, kRange << rng_.in(0, 6)));
                }
            default: return sat_add(now, rng_.in(1, rng_.one_in(2) ? 300 : 20000));  // near
        }
    }

    tick_t random_advance_target() {
        const tick_t now = w_->now();
        switch (rng_.below(24)) {
            case 0: return now;
            case 1: return sat_sub(now, rng_.in(1, 1000));  // backwards: a no-op
            case 2:
            case 3:
            case 4: return sat_add(now, 1);
            case 5:
            case 6: return sat_add(now, rng_.in(1, 64));
            case 7:
            case 8: return sat_add(now, rng_.in(1, 5000));
            case 9: return sat_add(now, rng_.in(1, pow64(static_cast<unsigned>(rng_.in(1, 5)))));
            case 10:
            case 11:
            case 12: {  // exactly at (or just before) the earliest pending deadline
                if (pending_.empty()) return sat_add(now, 1);
                const tick_t d = pending_.begin()->first;
                return rng_.one_in(3) ? d - 1 : d;
            }
            case 13:
            case 14: {  // at / around a random pending deadline
                if (pending_.empty()) return sat_add(now, 1);
                auto it = pending_.lower_bound({rng_.in(now, sat_add(now, pow64(4))), 0});
                if (it == pending_.end()) --it;
                return sat_add(it->first - 1, rng_.in(0, 2));
            }
            case 15:
            case 16: {  // a tickless driver step
                const tick_t ne = w_->next_expiry();
                return ne == kNever ? sat_add(now, 1) : ne;
            }
            case 17: {  // a slot boundary of a random level
                const unsigned level = static_cast<unsigned>(rng_.in(1, 8));
                const tick_t span = pow64(level);
                const tick_t base = now & ~(span - 1);
                if (base > kMax - span) return kMax;
                return sat_add(base + span - 1, rng_.in(0, 2));
            }
            case 18:  // a medium jump (levels 4..7)
                return sat_add(now, rng_.in(1, pow64(static_cast<unsigned>(rng_.in(4, 8)))));
            case 19:  // huge jumps are rare: they use up the clock
                if (rng_.one_in(8)) return sat_add(now, rng_.in(kRange, kRange << rng_.in(0, 8)));
                return sat_add(now, rng_.in(1, 64));
            default: return sat_add(now, rng_.in(0, 3));
        }
    }

    std::uint32_t random_id() { return static_cast<std::uint32_t>(rng_.below(pool_)); }

    // ---- checks ---------------------------------------------------------------
    void check_queries() {
        ASSERT_EQ(w_->size(), ref_size()) << history();
        ASSERT_EQ(w_->empty(), ref_size() == 0) << history();
        ASSERT_EQ(w_->has_expired(), expired_count_ != 0) << history();
        const tick_t earliest = pending_.empty() ? kNever : pending_.begin()->first;
        ASSERT_EQ(w_->earliest_deadline(), earliest) << history();
        const tick_t ne = w_->next_expiry();
        const tick_t now = w_->now();
        if (expired_count_ != 0) {
            ASSERT_EQ(ne, now) << "next_expiry() with expired nodes waiting" << history();
        } else if (pending_.empty()) {
            ASSERT_EQ(ne, kNever) << history();
        } else if ((earliest ^ now) < kRange) {
            // On the levels: the start of the earliest deadline's slot, at
            // the level of the highest bit where it differs from now.
            const unsigned level = (63u - static_cast<unsigned>(__builtin_clzll(earliest ^ now))) / Wheel::kSlotBits;
            ASSERT_EQ(ne, earliest & ~(pow64(level) - 1))
                << "earliest " << hex(earliest) << " now " << hex(now) << history();
            ASSERT_GT(ne, now) << history();
        } else {
            // Only overflow timers: a lower bound, no later than the start of
            // the earliest deadline's 2^48-epoch. (That it is also >= now() is
            // checked by WheelTest.NextExpiryIsNeverBeforeNow.)
            ASSERT_LE(ne, earliest & ~(kRange - 1)) << "earliest " << hex(earliest) << history();
        }
    }

    // The wheel's own slow-scan invariant check (Wheel::check()).
    void check_invariants() {
        const Wheel::CheckResult r = w_->check();
        ASSERT_TRUE(r.ok()) << r << history();
        ++checks_;
    }

    // Pops up to `limit` nodes, each of which must be expired in the model.
    void pop(std::size_t limit) {
        for (std::size_t i = 0; i < limit; ++i) {
            WheelNode* n = w_->pop_expired();
            if (n == nullptr) {
                ASSERT_EQ(expired_count_, 0u) << "pop_expired() returned nullptr with expired nodes waiting" << history();
                return;
            }
            ASSERT_TRUE(n >= &nodes_[0] && n < &nodes_[0] + pool_) << "foreign node" << history();
            const auto id = static_cast<std::uint32_t>(n - &nodes_[0]);
            ASSERT_EQ(state_[id], State::Expired)
                << "popped id " << id << " deadline " << hex(deadline_[id]) << " at now " << hex(w_->now())
                << (state_[id] == State::Pending ? " (EARLY)" : " (not in the wheel)") << history();
            ASSERT_FALSE(n->linked()) << history();
            ASSERT_EQ(n->deadline(), deadline_[id]) << history();
            ASSERT_LE(n->deadline(), w_->now()) << history();
            state_[id] = State::Unlinked;
            --expired_count_;
            ++expirations_;
            far_expirations_ += far_[id];
        }
    }

    // ---- one random operation ---------------------------------------------------
    void step() {
        if (rng_.one_in(40000) || (w_->now() > kMax - kRange && rng_.one_in(200))) {
            reset();
            return;
        }
        const std::uint64_t r = rng_.below(100);
        if (r < 30) {  // insert (rearm if already linked)
            const std::uint32_t id = random_id();
            const tick_t d = random_deadline();
            log('i', id, d);
            if ((d ^ w_->now()) >= kRange && d > w_->now()) ++overflow_inserts_;
            const bool was = state_[id] != State::Unlinked;
            ASSERT_EQ(nodes_[id].linked(), was) << history();
            ref_untrack(id);
            if (was)
                w_->rearm(&nodes_[id], d);
            else
                w_->insert(&nodes_[id], d);
            ref_track(id, d);
            ASSERT_TRUE(nodes_[id].linked()) << history();
            ASSERT_EQ(nodes_[id].deadline(), d) << history();
        } else if (r < 42) {  // remove (linked or not)
            const std::uint32_t id = random_id();
            log('r', id, 0);
            const bool was = state_[id] != State::Unlinked;
            ASSERT_EQ(w_->remove(&nodes_[id]), was) << history();
            ASSERT_FALSE(nodes_[id].linked()) << history();
            ref_untrack(id);
        } else if (r < 55) {  // rearm earlier / later / to the past
            const std::uint32_t id = random_id();
            const tick_t now = w_->now();
            const tick_t old = state_[id] == State::Unlinked ? now : deadline_[id];
            tick_t d;
            switch (rng_.below(4)) {
                case 0: d = old > now ? rng_.in(now + 1, old) : sat_add(now, 1); break;           // earlier
                case 1: d = sat_add(old, rng_.in(1, rng_.one_in(2) ? 64 : pow64(4))); break;     // later
                case 2: d = rng_.in(sat_sub(now, 100), now); break;                              // due
                default: d = random_deadline(); break;
            }
            log('a', id, d);
            ref_untrack(id);
            w_->rearm(&nodes_[id], d);
            ref_track(id, d);
            ASSERT_TRUE(nodes_[id].linked()) << history();
        } else if (r < 90) {  // advance
            const tick_t t = random_advance_target();
            const tick_t now = w_->now();
            const tick_t eff = t < now ? now : t;
            // Half the advances are advance_uncounted(): due level-0 slots
            // join the expired lists whole (the pops below and check() see
            // the same wheel; only the count is not returned).
            const bool uncounted = rng_.one_in(2);
            log(uncounted ? 'u' : 't', 0, t);
            std::size_t due = 0;
            auto end = pending_.upper_bound({eff, UINT32_MAX});
            for (auto it = pending_.begin(); it != end; ++it, ++due) {
                state_[it->second] = State::Expired;
                ++expired_count_;
            }
            pending_.erase(pending_.begin(), end);
            ++advances_;
            epoch_crossings_ += (eff >> 48) != (now >> 48);
            if (uncounted)
                w_->advance_uncounted(t);
            else
                ASSERT_EQ(w_->advance(t), due) << "advance(" << hex(t) << ") from " << hex(now) << history();
            ASSERT_EQ(w_->now(), eff) << history();
            check_queries();
            if (::testing::Test::HasFatalFailure()) return;
            // Usually drain; sometimes leave expired nodes for later.
            if (!rng_.one_in(5)) {
                pop(kMax);
                if (::testing::Test::HasFatalFailure()) return;
                ASSERT_EQ(expired_count_, 0u) << history();
                ASSERT_FALSE(w_->has_expired()) << history();
            }
        } else if (r < 95) {  // partial pop
            log('p', 0, 0);
            pop(rng_.in(0, 4));
        } else {  // spot-check one node's state
            const std::uint32_t id = random_id();
            ASSERT_EQ(nodes_[id].linked(), state_[id] != State::Unlinked) << "id " << id << history();
            if (state_[id] != State::Unlinked) {
                ASSERT_EQ(nodes_[id].deadline(), deadline_[id]) << history();
            }
        }
        if (::testing::Test::HasFatalFailure()) return;
        ASSERT_EQ(w_->size(), ref_size()) << history();
        if (rng_.one_in(8)) check_queries();
    }

    const std::uint64_t seed_;
    const std::uint64_t ops_;
    Rng rng_;
    std::uint64_t op_ = 0;

    std::unique_ptr<Wheel> w_;
    std::uint32_t pool_ = 0;
    std::unique_ptr<WheelNode[]> nodes_;
    unsigned max_level_ = 9;

    std::vector<State> state_;
    std::vector<tick_t> deadline_;
    std::vector<bool> far_;  // filed beyond the level range when inserted
    std::set<std::pair<tick_t, std::uint32_t>> pending_;  // (deadline, id)
    std::size_t expired_count_ = 0;

    std::array<Hist, 12> hist_{};
    std::size_t hist_pos_ = 0;

    std::uint64_t advances_ = 0, expirations_ = 0, overflow_inserts_ = 0, resets_ = 0;
    std::uint64_t far_expirations_ = 0, epoch_crossings_ = 0, checks_ = 0;
};

void run_seed(std::uint64_t seed) {
    const auto ops = static_cast<std::uint64_t>(kDefaultOpsPerSeed * env_multiplier());
    SCOPED_TRACE("seed " + hex(seed) + " (rerun: TICKWHEEL_SEED=" + hex(seed) + ")");
    const auto t0 = std::chrono::steady_clock::now();
    Model(seed, ops).run();
    std::cout << "[ model ] seed " << hex(seed) << " took "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
}

class WheelModel : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(WheelModel, RandomOperationsMatchReference) { run_seed(GetParam()); }

INSTANTIATE_TEST_SUITE_P(FixedSeeds, WheelModel,
                         ::testing::Values(std::uint64_t{1}, std::uint64_t{0x9E3779B97F4A7C15ull}, std::uint64_t{20240611},
                                           std::uint64_t{0xDEADBEEFCAFEF00Dull}),
                         [](const ::testing::TestParamInfo<std::uint64_t>& p) { return "seed_" + hex(p.param); });

// TICKWHEEL_SEED=<n> runs one more seed (e.g. from a CI failure or a soak).
TEST(WheelModelEnv, SeedFromEnvironment) {
    const char* s = std::getenv("TICKWHEEL_SEED");
    if (s == nullptr || *s == '\0') GTEST_SKIP() << "TICKWHEEL_SEED not set";
    char* end = nullptr;
    const std::uint64_t seed = std::strtoull(s, &end, 0);
    ASSERT_TRUE(end != s && *end == '\0') << "TICKWHEEL_SEED is not a number: " << s;
    run_seed(seed);
}

}  // namespace
