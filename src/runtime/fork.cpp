// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/fork.hpp"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/hazard.hpp"

namespace tickwheel::rt {

namespace fork_detail {

std::atomic<std::uint32_t> g_epoch{0};

namespace {
void in_child() noexcept {
    g_epoch.fetch_add(1, std::memory_order_relaxed);
    // The child has one thread now, so the hazard protocol may change sides
    // safely: keep the asymmetric fences only if the child's registration
    // for membarrier holds.
    if (hazard_detail::g_asymmetric.load(std::memory_order_relaxed) &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) != 0)
        hazard_detail::g_asymmetric.store(false, std::memory_order_relaxed);
}

[[maybe_unused]] const int registered = pthread_atfork(nullptr, nullptr, in_child);
}  // namespace

}  // namespace fork_detail

}  // namespace tickwheel::rt
