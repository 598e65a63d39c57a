// SPDX-License-Identifier: MIT OR Apache-2.0
// Helpers shared by the wheel test programs: tick constants, a deterministic
// PRNG, hex formatting of ticks for failure messages, and the wheel's names
// (a test brings them all in with `using namespace wheel_test;`).
#pragma once

#include <cstdint>
#include <sstream>
#include <string>

#include "tickwheel/wheel.hpp"

namespace wheel_test {

using tickwheel::tick_t;
using tickwheel::Wheel;
using tickwheel::WheelNode;

inline constexpr tickwheel::tick_t kNever = tickwheel::Wheel::kNever;
inline constexpr tickwheel::tick_t kRange = tickwheel::Wheel::kLevelRange;  // 2^48
inline constexpr tickwheel::tick_t kMax = ~tickwheel::tick_t{0};

inline std::string hex(tickwheel::tick_t v) {
    std::ostringstream os;
    os << "0x" << std::hex << v;
    return os.str();
}

/// Deterministic PRNG (splitmix64): the same sequence under every compiler
/// and standard library, so a seed reproduces a failure anywhere.
struct Rng {
    std::uint64_t s;
    std::uint64_t next() {
        std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    std::uint64_t below(std::uint64_t n) { return next() % n; }  // n > 0
    /// Uniform in [lo, hi], inclusive (modulo bias is irrelevant here).
    std::uint64_t in(std::uint64_t lo, std::uint64_t hi) {
        const std::uint64_t span = hi - lo;
        return span == ~std::uint64_t{0} ? next() : lo + next() % (span + 1);
    }
    bool one_in(std::uint64_t n) { return below(n) == 0; }
};

}  // namespace wheel_test
