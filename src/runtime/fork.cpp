// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/fork.hpp"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#if __has_include(<sys/single_threaded.h>)  // glibc >= 2.32
#include <sys/single_threaded.h>
#define TW_HAVE_LIBC_SINGLE_THREADED 1
#endif

#include "runtime/hazard.hpp"

namespace tickwheel::rt {

namespace fork_detail {

std::atomic<std::uint32_t> g_epoch{0};
std::atomic<bool> g_onetbb_unusable{false};

namespace {
// Set in the forking thread just before fork(), read in the child (by the
// same thread: the child's only one).
std::atomic<bool> g_threaded_at_fork{true};

bool single_threaded() noexcept {
#ifdef TW_HAVE_LIBC_SINGLE_THREADED
    // glibc sets it false when the process creates its first thread and (as
    // of 2.36) never sets it back: true means no other thread ever existed,
    // so none can be a oneTBB worker or hold a lock. Conservative, as it
    // must be.
    return __libc_single_threaded != 0;
#else
    return false;  // unknown: assume threads
#endif
}

void before_fork() noexcept { g_threaded_at_fork.store(!single_threaded(), std::memory_order_relaxed); }

void in_child() noexcept {
    g_epoch.fetch_add(1, std::memory_order_relaxed);
    if (g_threaded_at_fork.load(std::memory_order_relaxed)) g_onetbb_unusable.store(true, std::memory_order_relaxed);
    // The child has one thread now, so the hazard protocol may change sides
    // safely: keep the asymmetric fences only if the child's registration
    // for membarrier holds.
    if (hazard_detail::g_asymmetric.load(std::memory_order_relaxed) == 1 &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) != 0)
        hazard_detail::g_asymmetric.store(0, std::memory_order_relaxed);
}

[[maybe_unused]] const int registered = pthread_atfork(before_fork, nullptr, in_child);
}  // namespace

}  // namespace fork_detail

}  // namespace tickwheel::rt
