// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/test_hooks.hpp"

namespace tickwheel::rt::test_hooks {

std::atomic<void (*)(const void*, char)> in_window{nullptr};
std::atomic<std::uint32_t> first_generation{1};
std::atomic<std::int64_t> fail_inbox_posts{0};
std::atomic<void (*)(std::uint32_t)> freed{nullptr};

}  // namespace tickwheel::rt::test_hooks
