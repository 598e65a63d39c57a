// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/hazard.hpp"

#include "runtime/fork.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <new>

namespace tickwheel::rt {

namespace hazard_detail {

std::atomic<std::int64_t> g_unguarded{0};

namespace {
bool register_membarrier() noexcept {
    // Only where the private expedited command is offered: it interrupts
    // just this process's running threads (no global RCU grace period).
    const long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0);
    if (cmds < 0 || (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
    return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) == 0;
}
}  // namespace

// Decided once, by the first runtime or heavy fence (asymmetric()), never by
// a dynamic initialiser: both sides must agree on which barrier pairs with
// which, and a runtime may be running before this file's initialisers do.
constinit std::atomic<int> g_asymmetric{kUndecided};

bool decide_asymmetric() noexcept {
    // Registering twice is harmless; the first decision stands for all.
    int expected = kUndecided;
    const int mine = register_membarrier() ? 1 : 0;
    if (g_asymmetric.compare_exchange_strong(expected, mine, std::memory_order_relaxed)) return mine != 0;
    return expected != 0;
}

namespace {
std::atomic<HazardSlot*> g_slots{nullptr};

HazardSlot* take_slot() noexcept {
    for (HazardSlot* s = g_slots.load(std::memory_order_acquire); s != nullptr; s = s->next) {
        bool expected = false;
        if (!s->taken.load(std::memory_order_relaxed) &&
            s->taken.compare_exchange_strong(expected, true, std::memory_order_acq_rel))
            return s;
    }
    auto* s = new (std::nothrow) HazardSlot;
    if (s == nullptr) return nullptr;
    s->taken.store(true, std::memory_order_relaxed);
    HazardSlot* head = g_slots.load(std::memory_order_relaxed);
    do {
        s->next = head;
    } while (!g_slots.compare_exchange_weak(head, s, std::memory_order_release, std::memory_order_relaxed));
    return s;
}

// This thread's slot, read on every stop and reset: initial-exec (a plain
// %fs-relative load in the shared library too, no __tls_get_addr; 8 bytes of
// the static TLS block, which a library loaded by dlopen takes from glibc's
// surplus), constant-initialised. The object that gives the slot back at
// thread exit is touched once per thread (the general-dynamic model).
}  // namespace
[[gnu::tls_model("initial-exec")]] constinit thread_local HazardSlot* t_slot = nullptr;
namespace {
[[gnu::tls_model("initial-exec")]] constinit thread_local bool t_slot_returned = false;
struct ThreadSlot {
    HazardSlot* slot = nullptr;
    ~ThreadSlot() {
        t_slot = nullptr;
        t_slot_returned = true;  // a later scope in this thread goes unguarded (HazardScope)
        if (slot != nullptr) {
            slot->rec.store(nullptr, std::memory_order_relaxed);
            slot->inbox.store(nullptr, std::memory_order_relaxed);
            slot->taken.store(false, std::memory_order_release);
        }
    }
};
thread_local ThreadSlot t_slot_owner;

}  // namespace

HazardSlot* first_slot() noexcept {
    if (t_slot_returned) return nullptr;
    t_slot_owner.slot = take_slot();
    t_slot = t_slot_owner.slot;
    return t_slot;
}

HazardSlot* this_thread_slot() noexcept { return this_thread_slot_inline(); }

namespace {
// This thread's scopes without a slot (fork_detail::hazard_in_child).
constinit thread_local std::int64_t t_unguarded = 0;
}  // namespace

void enter_unguarded() noexcept {
    ++t_unguarded;
    g_unguarded.fetch_add(1, std::memory_order_relaxed);
}

void leave_unguarded() noexcept {
    --t_unguarded;
    g_unguarded.fetch_sub(1, std::memory_order_release);
}

}  // namespace hazard_detail

// fork.cpp, rule 2: in the child's only thread, every slot but its own is
// free and clear (their threads are gone), and the unguarded count is its own.
void fork_detail::hazard_in_child() noexcept {
    using namespace hazard_detail;
    for (HazardSlot* s = g_slots.load(std::memory_order_relaxed); s != nullptr; s = s->next) {
        if (s == t_slot) continue;
        s->rec.store(nullptr, std::memory_order_relaxed);
        s->taken.store(false, std::memory_order_relaxed);
    }
    g_unguarded.store(t_unguarded, std::memory_order_relaxed);
}

void hazard_barrier() noexcept { heavy_fence(); }

void heavy_fence() noexcept {
    if (hazard_detail::asymmetric() && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) == 0)
        return;
    // Without membarrier the scopes use a seq_cst fence; so does this side.
    // (If membarrier failed after registration, which the kernel does not
    // do, the seq_cst fence alone would not pair with a signal fence.)
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

bool hazard_held(const void* rec) noexcept {
    if (hazard_detail::g_unguarded.load(std::memory_order_acquire) != 0) return true;
    for (HazardSlot* s = hazard_detail::g_slots.load(std::memory_order_acquire); s != nullptr; s = s->next)
        if (s->rec.load(std::memory_order_acquire) == rec) return true;
    return false;
}

bool inbox_held(const void* a, const void* b) noexcept {
    if (hazard_detail::g_unguarded.load(std::memory_order_acquire) != 0) return true;
    for (HazardSlot* s = hazard_detail::g_slots.load(std::memory_order_acquire); s != nullptr; s = s->next) {
        const void* v = s->inbox.load(std::memory_order_acquire);
        if (v != nullptr && (v == a || v == b)) return true;
    }
    return false;
}

bool hazard_records(std::vector<const void*>& out) {
    if (hazard_detail::g_unguarded.load(std::memory_order_acquire) != 0) return false;
    for (HazardSlot* s = hazard_detail::g_slots.load(std::memory_order_acquire); s != nullptr; s = s->next)
        if (const void* r = s->rec.load(std::memory_order_acquire)) out.push_back(r);
    return true;
}

}  // namespace tickwheel::rt
