// SPDX-License-Identifier: MIT OR Apache-2.0
// The byte reader both libFuzzer targets (fuzz/fuzz_capi.cpp,
// fuzz/fuzz_wheel.cpp) decode their input with: past the end every read
// gives 0, so any input, however short, decodes to a whole run.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tw_test {

struct FuzzInput {
    const std::uint8_t* p;
    std::size_t n;
    bool empty() const { return n == 0; }
    std::uint8_t u8() {
        if (n == 0) return 0;
        --n;
        return *p++;
    }
    std::uint64_t u16() {
        const std::uint64_t hi = u8();
        return hi << 8 | u8();
    }
    std::uint64_t u64() {
        std::uint64_t v = 0;
        for (int i = 0; i < 8; ++i) v = v << 8 | u8();
        return v;
    }
};

}  // namespace tw_test
