// SPDX-License-Identifier: MIT OR Apache-2.0
// Which sanitizer this translation unit is built with (g++ defines
// __SANITIZE_*__, clang answers __has_feature): bounds are looser under a
// sanitizer, and a few checks that a sanitizer cannot run are skipped.
// Shared by the tests (through test_support.hpp) and the stress programs;
// the macros TW_TEST_ASAN and TW_TEST_TSAN (0 or 1) serve #if.
#pragma once

#if defined(__has_feature)
#define TW_TEST_HAS_FEATURE(x) __has_feature(x)
#else
#define TW_TEST_HAS_FEATURE(x) 0
#endif

#if defined(__SANITIZE_ADDRESS__) || TW_TEST_HAS_FEATURE(address_sanitizer)
#define TW_TEST_ASAN 1
#else
#define TW_TEST_ASAN 0
#endif
#if defined(__SANITIZE_THREAD__) || TW_TEST_HAS_FEATURE(thread_sanitizer)
#define TW_TEST_TSAN 1
#else
#define TW_TEST_TSAN 0
#endif

namespace tw_test {

inline constexpr bool kAsan = TW_TEST_ASAN != 0;
inline constexpr bool kTsan = TW_TEST_TSAN != 0;
inline constexpr bool kSanitized = kAsan || kTsan;

}  // namespace tw_test
