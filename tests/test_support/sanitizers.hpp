// SPDX-License-Identifier: MIT OR Apache-2.0
// Which sanitizer this translation unit is built with (g++ defines
// __SANITIZE_*__, clang answers __has_feature): bounds are looser under a
// sanitizer, and a few checks that a sanitizer cannot run are skipped.
// Shared by the tests (through test_support.hpp) and the stress programs.
#pragma once

namespace tw_test {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAsan = true;
#else
inline constexpr bool kAsan = false;
#endif
#else
inline constexpr bool kAsan = false;
#endif

#if defined(__SANITIZE_THREAD__)
inline constexpr bool kTsan = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kTsan = true;
#else
inline constexpr bool kTsan = false;
#endif
#else
inline constexpr bool kTsan = false;
#endif

inline constexpr bool kSanitized = kAsan || kTsan;

}  // namespace tw_test
