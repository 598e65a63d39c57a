// SPDX-License-Identifier: MIT OR Apache-2.0
// libFuzzer target for the bare wheel (include/tickwheel/wheel.hpp): decodes
// its input into a sequence of insert / remove / rearm / advance / pop /
// tickless-step operations on a Wheel over a pool of up to 64 nodes, with
// deadlines and clock jumps aimed at slot, level and 2^48-epoch boundaries,
// huge jumps and the end of time, and after EVERY operation
//   - runs Wheel::check() (the wheel's own invariants, by a slow scan), and
//   - compares the wheel with a plain reference model (per node: unlinked,
//     pending with a deadline, or expired): remove()'s answer, advance()'s
//     count, the exact set of popped nodes (none early, none late, none
//     twice), now(), size(), has_expired(), linked() and deadline() of
//     every node, earliest_deadline() and the next_expiry() contract.
// Any mismatch prints the operation, the last operations and aborts;
// FUZZ_WHEEL_TRACE=1 prints every operation as it runs.
//
// Build: the `asan` preset (clang) builds it with -fsanitize=fuzzer,address,undefined.
// Run:   build/asan/fuzz/fuzz_wheel build/asan/fuzz/corpus_wheel fuzz/corpus_wheel -max_total_time=600
// Input: byte 0 = pool size, then the start clock, then operations; see
// decode_* below (fuzz/make_wheel_seeds.py writes the seed corpus).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>

#include "test_support/fuzz_input.hpp"
#include "tickwheel/wheel.hpp"

namespace {

using tickwheel::tick_t;
using tickwheel::Wheel;
using tickwheel::WheelNode;

constexpr tick_t kMax = ~tick_t{0};
constexpr tick_t kNever = Wheel::kNever;
constexpr tick_t kRange = Wheel::kLevelRange;
constexpr unsigned kMaxPool = 64;
constexpr int kMaxOps = 4096;

using Input = tw_test::FuzzInput;

// Clamps an exact (128-bit) result into tick_t.
tick_t sat(__int128 v) { return v < 0 ? 0 : v > static_cast<__int128>(kMax) ? kMax : static_cast<tick_t>(v); }
tick_t sat_add(tick_t a, __int128 b) { return sat(static_cast<__int128>(a) + b); }

enum class State : std::uint8_t { Unlinked, Pending, Expired };

struct Fuzz {
    Input in;
    std::unique_ptr<Wheel> w;
    unsigned pool = 1;
    WheelNode nodes[kMaxPool];
    State state[kMaxPool] = {};
    tick_t deadline[kMaxPool] = {};
    tick_t now = 0;  // the reference clock
    int op = 0;

    struct Hist {
        char code;
        unsigned id;
        tick_t arg, now;
    } hist[16] = {};

    // FUZZ_WHEEL_TRACE=1 prints every operation (to see what an input does).
    const bool trace = std::getenv("FUZZ_WHEEL_TRACE") != nullptr;
    void log(char code, unsigned id, tick_t arg) {
        hist[op % 16] = Hist{code, id, arg, now};
        if (trace)
            std::fprintf(stderr, "#%d %c id=%u arg=0x%llx now=0x%llx size=%zu\n", op, code, id,
                         static_cast<unsigned long long>(arg), static_cast<unsigned long long>(now), w->size());
    }

    [[noreturn]] void fail(const std::string& what) {
        std::fprintf(stderr, "fuzz_wheel: op %d: %s\n  last ops (oldest first):\n", op, what.c_str());
        for (int i = op - 15; i <= op; ++i) {
            if (i < 0 || hist[i % 16].code == 0) continue;
            const Hist& h = hist[i % 16];
            std::fprintf(stderr, "    #%d %c id=%u arg=0x%llx now=0x%llx\n", i, h.code, h.id,
                         static_cast<unsigned long long>(h.arg), static_cast<unsigned long long>(h.now));
        }
        std::abort();
    }
    static std::string hex(tick_t v) {
        std::ostringstream os;
        os << "0x" << std::hex << v;
        return os.str();
    }

    // ---- reference model ------------------------------------------------------
    void track(unsigned id, tick_t d) {
        deadline[id] = d;
        state[id] = d <= now ? State::Expired : State::Pending;
    }
    std::size_t count(State s) const {
        return static_cast<std::size_t>(std::count(state, state + pool, s));
    }
    tick_t earliest_pending() const {
        tick_t best = kNever;
        bool any = false;
        for (unsigned i = 0; i < pool; ++i)
            if (state[i] == State::Pending && (!any || deadline[i] < best)) {
                best = deadline[i];
                any = true;
            }
        return best;
    }

    // ---- decoding ---------------------------------------------------------------
    unsigned id() { return in.u8() % pool; }

    // A tick near a boundary of `level` (level 8: a 2^48 epoch) k blocks after now.
    tick_t boundary(unsigned level, unsigned k, int delta) const {
        const unsigned shift = 6 * level;
        const __int128 base = (static_cast<__int128>(now >> shift) + k) << shift;
        return sat(base + delta);
    }

    // Every input byte is read in its own statement (argument evaluation
    // order is unspecified), so an input means the same under any compiler
    // and fuzz/make_wheel_seeds.py can write it.
    tick_t decode_deadline() {
        switch (in.u8() % 12) {
            case 0: return now - std::min<tick_t>(now, in.u8());  // now or just before
            case 1: {  // 0, or anywhere in the past
                if (in.u8() % 2) return 0;
                const tick_t v = in.u64();
                return now == kMax ? v : v % (now + 1);
            }
            case 2:
            case 3: return sat_add(now, 1 + in.u8());  // levels 0 / 1
            case 4: {  // at / next to a slot boundary of a level
                const unsigned level = in.u8() % 8;
                const unsigned k = 1 + in.u8() % 4;
                const int delta = static_cast<int>(in.u8() % 5) - 2;
                return boundary(level, k, delta);
            }
            case 5: {  // within a level
                const std::uint64_t x = 1 + in.u16();
                const unsigned level = in.u8() % 8;
                return sat_add(now, static_cast<__int128>(x) << (6 * level));
            }
            case 6: {  // around an epoch boundary
                const unsigned k = 1 + in.u8() % 3;
                const int delta = static_cast<int>(in.u8() % 5) - 2;
                return boundary(8, k, delta);
            }
            case 7: return in.u64();              // anything
            case 8: return kMax - in.u8() % 4;    // the end of time
            case 9: return deadline[id()];        // the same tick as another node
            case 10: return sat_add(now, kRange + in.u64() % (kRange * 16));  // beyond the levels
            default: {  // log-uniform distance
                const std::uint64_t x = in.u64();
                return sat_add(now, x >> (in.u8() % 64));
            }
        }
    }

    tick_t decode_advance() {
        switch (in.u8() % 10) {
            case 0: return now - std::min<tick_t>(now, in.u8());  // now or backwards: a no-op
            case 1: return sat_add(now, 1);
            case 2: return sat_add(now, in.u8());
            case 3: {  // a pending node's deadline, or one tick before / after
                const unsigned i = id();
                const tick_t d = state[i] == State::Pending ? deadline[i] : now;
                return sat_add(d, static_cast<int>(in.u8() % 3) - 1);
            }
            case 4: {  // a slot boundary of a level
                const unsigned level = in.u8() % 8;
                const unsigned k = 1 + in.u8() % 2;
                const int delta = static_cast<int>(in.u8() % 3) - 1;
                return boundary(level, k, delta);
            }
            case 5: {  // an epoch boundary
                const unsigned k = 1 + in.u8() % 2;
                const int delta = static_cast<int>(in.u8() % 5) - 2;
                return boundary(8, k, delta);
            }
            case 6: {  // any jump, often huge
                const std::uint64_t x = in.u64();
                return sat_add(now, x >> (in.u8() % 64));
            }
            case 7: return in.u64();
            case 8: return in.u8() == 0xFF ? kMax : sat_add(now, in.u16());
            default: return w->next_expiry();  // a tickless driver's step (kNever: the end of time)
        }
    }

    // ---- operations -------------------------------------------------------------
    void insert_or_rearm(char code, unsigned i, tick_t d) {
        log(code, i, d);
        const bool linked = state[i] != State::Unlinked;
        if (nodes[i].linked() != linked) fail("linked() of id " + std::to_string(i) + " disagrees before insert");
        if (linked || code == 'a')
            w->rearm(&nodes[i], d);
        else
            w->insert(&nodes[i], d);
        track(i, d);
    }

    void advance(tick_t t) {
        log('t', 0, t);
        const tick_t eff = std::max(t, now);
        std::size_t due = 0;
        for (unsigned i = 0; i < pool; ++i)
            if (state[i] == State::Pending && deadline[i] <= eff) {
                state[i] = State::Expired;
                ++due;
            }
        now = eff;
        // Odd targets advance through advance_uncounted() (due level-0 slots
        // join the expired lists whole): the pops and check() judge it.
        if ((t & 1) != 0) {
            w->advance_uncounted(t);
            return;
        }
        const std::size_t got = w->advance(t);
        if (got != due)
            fail("advance(" + hex(t) + ") returned " + std::to_string(got) + ", expected " + std::to_string(due));
    }

    void pop(unsigned limit) {
        log('p', limit, 0);
        // Even limits pop through pop_expired_n() (issue 21: both ends of
        // every expired list at once), odd ones one node at a time.
        WheelNode* batch[kMaxPool];
        std::size_t batch_n = 0;
        if (limit % 2 == 0) {
            const std::size_t waiting = count(State::Expired);
            batch_n = w->pop_expired_n(batch, std::min<std::size_t>(limit, kMaxPool));
            if (batch_n != std::min<std::size_t>({waiting, limit, kMaxPool}))
                fail("pop_expired_n(" + std::to_string(limit) + ") returned " + std::to_string(batch_n) + " with " +
                     std::to_string(waiting) + " expired nodes waiting");
        }
        for (unsigned k = 0; k < limit; ++k) {
            WheelNode* n = nullptr;
            if (limit % 2 == 0) {
                if (k == batch_n) return;
                n = batch[k];
            } else {
                n = w->pop_expired();
            }
            if (n == nullptr) {
                if (count(State::Expired) != 0) fail("pop_expired() returned nullptr with expired nodes waiting");
                return;
            }
            if (n < nodes || n >= nodes + pool) fail("pop_expired() returned a foreign node");
            const auto i = static_cast<unsigned>(n - nodes);
            if (state[i] != State::Expired)
                fail("popped id " + std::to_string(i) + " deadline " + hex(deadline[i]) + " at now " + hex(now) +
                     (state[i] == State::Pending ? " (EARLY)" : " (not in the wheel: popped twice?)"));
            if (n->linked()) fail("a popped node reports linked()");
            state[i] = State::Unlinked;
        }
    }

    // ---- the checks after every operation ----------------------------------------
    void verify() {
        const Wheel::CheckResult r = w->check();
        if (!r) {
            std::ostringstream os;
            os << "check(): " << r;
            fail(os.str());
        }
        if (w->now() != now) fail("now() " + hex(w->now()) + ", expected " + hex(now));
        const std::size_t expired = count(State::Expired), pending = count(State::Pending);
        if (w->size() != expired + pending)
            fail("size() " + std::to_string(w->size()) + ", expected " + std::to_string(expired + pending));
        if (w->empty() != (expired + pending == 0)) fail("empty() disagrees");
        if (w->has_expired() != (expired != 0)) fail("has_expired() disagrees");
        for (unsigned i = 0; i < pool; ++i) {
            if (nodes[i].linked() != (state[i] != State::Unlinked)) fail("linked() of id " + std::to_string(i));
            if (state[i] != State::Unlinked && nodes[i].deadline() != deadline[i])
                fail("deadline() of id " + std::to_string(i));
        }
        const tick_t earliest = earliest_pending();
        if (w->earliest_deadline() != earliest)
            fail("earliest_deadline() " + hex(w->earliest_deadline()) + ", expected " + hex(earliest));
        // next_expiry(): now() if expired nodes wait; kNever if nothing is
        // pending; else the start of the earliest deadline's slot (level: the
        // highest bit of deadline ^ now) or, on the overflow list, a tick in
        // (now, the earliest deadline's 2^48-epoch].
        const tick_t ne = w->next_expiry();
        tick_t want_lo = 0, want_hi = 0;
        if (expired != 0) {
            want_lo = want_hi = now;
        } else if (pending == 0) {
            want_lo = want_hi = kNever;
        } else if ((earliest ^ now) < kRange) {
            const unsigned level = (63u - static_cast<unsigned>(__builtin_clzll(earliest ^ now))) / Wheel::kSlotBits;
            want_lo = want_hi = earliest & ~((tick_t{1} << (Wheel::kSlotBits * level)) - 1);
            if (want_lo <= now) fail("the reference's slot start is not after now");
        } else {
            want_lo = now + 1;
            want_hi = earliest & ~(kRange - 1);
        }
        if (ne < want_lo || ne > want_hi)
            fail("next_expiry() " + hex(ne) + ", expected in [" + hex(want_lo) + ", " + hex(want_hi) + "] (earliest " +
                 hex(earliest) + ")");
    }

    void run() {
        pool = 1 + in.u8() % kMaxPool;
        switch (in.u8() % 8) {
            case 0: now = 0; break;
            case 1: now = in.u16(); break;
            case 2: {  // just before an epoch
                const tick_t epoch = (tick_t{1} + in.u8() % 16) << 48;
                now = epoch - 1 - in.u8();
                break;
            }
            case 3: now = kMax - in.u16(); break;  // near the end of time
            case 4: now = in.u64(); break;
            case 5: {  // just before a carry into a level
                const unsigned level = 1 + in.u8() % 7;
                now = boundary(level, 1, -1 - static_cast<int>(in.u8() % 4));
                break;
            }
            default: {
                const std::uint64_t x = in.u64();
                now = x >> (in.u8() % 64);
                break;
            }
        }
        w = std::make_unique<Wheel>(now);
        verify();
        for (op = 1; !in.empty() && op <= kMaxOps; ++op) {
            switch (in.u8() % 10) {
                case 0:
                case 1: {
                    const unsigned i = id();
                    insert_or_rearm('i', i, decode_deadline());
                    break;
                }
                case 2: {
                    const unsigned i = id();
                    log('r', i, 0);
                    const bool linked = state[i] != State::Unlinked;
                    if (w->remove(&nodes[i]) != linked) fail("remove() of id " + std::to_string(i) + " answered wrong");
                    state[i] = State::Unlinked;
                    break;
                }
                case 3: {
                    const unsigned i = id();
                    insert_or_rearm('a', i, decode_deadline());
                    break;
                }
                case 4:
                case 5: advance(decode_advance()); break;
                case 6: pop(1 + in.u8() % 4); break;
                case 7: pop(kMaxPool); break;
                case 8: {  // a tickless driver's loop: sleep to next_expiry(), advance, pop all
                    for (unsigned k = 1 + in.u8() % 8; k > 0; --k) {
                        const tick_t ne = w->next_expiry();
                        if (ne == kNever) break;
                        advance(ne);
                        verify();
                        pop(kMaxPool);
                        verify();
                    }
                    break;
                }
                default: {  // rearm many nodes at once to one deadline (a crowded slot)
                    const tick_t d = decode_deadline();
                    const unsigned from = id();
                    const unsigned n = 1 + in.u8() % 16;
                    for (unsigned k = 0; k < n && from + k < pool; ++k) insert_or_rearm('a', from + k, d);
                    break;
                }
            }
            verify();
        }
        // Teardown: remove() answers per the model, and the wheel ends empty.
        for (unsigned i = 0; i < pool; ++i) {
            log('r', i, 0);
            if (w->remove(&nodes[i]) != (state[i] != State::Unlinked)) fail("teardown remove() of id " + std::to_string(i));
            state[i] = State::Unlinked;
        }
        verify();
        if (!w->empty() || w->next_expiry() != kNever) fail("not empty after teardown");
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    auto f = std::make_unique<Fuzz>();
    f->in = Input{data, size};
    f->run();
    return 0;
}
