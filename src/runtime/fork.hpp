// SPDX-License-Identifier: MIT OR Apache-2.0
// fork(): a child process has none of its parent's threads, so a runtime
// created before the fork has no shard drivers and no workers there. Every
// runtime remembers the process's fork epoch at creation; a pthread_atfork
// child handler bumps the epoch, and every operation compares (one relaxed
// load of a read-mostly global): in the child, operations on an inherited
// runtime fail with errc::forked, and destroying it frees what can be freed
// without running any callback or release hook (runtime.cpp).
#pragma once

#include <atomic>
#include <cstdint>

namespace tickwheel::rt {

namespace fork_detail {
extern std::atomic<std::uint32_t> g_epoch;
}

/// The number of fork() children this process descends from (0 in the
/// original process).
inline std::uint32_t fork_epoch() noexcept { return fork_detail::g_epoch.load(std::memory_order_relaxed); }

}  // namespace tickwheel::rt
