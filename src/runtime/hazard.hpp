// SPDX-License-Identifier: MIT OR Apache-2.0
// Hazard slots: which record each thread is acting on through an id.
//
// A thread that does not own a record (a caller with an id, a worker with a
// FireItem) loads the record's word, checks the generation, and CASes the
// word. If, between that load and that CAS, the record were recycled 1024
// times, its 10-bit generation would be back and the CAS could hit the new
// occupant (ABA). To rule that out in every interleaving, such a thread
// publishes the record in its hazard slot for the length of the operation
// (HazardScope), and the handle table never lets a record's 10-bit
// generation wrap (every 1024th recycling) while any slot holds it
// (HandleTable's quarantine, which asks hazard_held()).
//
// Cost on the operation's side: one store to a thread-private line and a
// compiler barrier on entry, one store on exit. The matching full barrier is
// paid by the reclaimer instead (an asymmetric fence: membarrier(2)
// MEMBARRIER_CMD_PRIVATE_EXPEDITED makes every running thread of the process
// execute a full barrier), once per quarantine pass, i.e. at most once per
// 1024 recyclings of a record and in practice once per many records. Where
// the kernel refuses membarrier (old kernels, seccomp), both sides use a
// seq_cst fence instead.
//
// Slots are per thread, process-wide (a record's address names it across
// runtimes), taken from a lock-free list on a thread's first operation and
// given back when it exits; the list only grows (one slot per thread alive
// at once).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

namespace tickwheel::rt {

struct HazardSlot {
    std::atomic<const void*> rec{nullptr};
    // The inbox (then its queue) this thread is posting to (inbox.hpp: a
    // shard frees a retired queue only once no slot names it or its inbox).
    std::atomic<const void*> inbox{nullptr};
    std::atomic<bool> taken{false};
    HazardSlot* next = nullptr;  // immutable once the slot is on the list
};

namespace hazard_detail {
/// This thread's slot (taken on first use; nullptr if no memory for one,
/// then the thread counts itself in `unguarded` instead).
HazardSlot* this_thread_slot() noexcept;
/// The same, inline (a post to an inbox, on every start and stop that posts):
/// the thread's slot once taken (initial-exec TLS: a plain %fs-relative
/// load), else the slow path.
[[gnu::tls_model("initial-exec")]] extern constinit thread_local HazardSlot* t_slot;
[[gnu::cold]] HazardSlot* first_slot() noexcept;
inline HazardSlot* this_thread_slot_inline() noexcept {
    if (HazardSlot* s = t_slot) [[likely]]
        return s;
    return first_slot();
}
/// Whether membarrier is available and registered: kUndecided until a
/// runtime is created or a heavy fence is made (decide_asymmetric()), then
/// fixed (only a fork() child, single-threaded then, may turn it off).
/// Constant-initialised, so that no dynamic initialiser can flip it under a
/// runtime that a user's static constructor started earlier (issue 20).
/// The two sides read it so that every pairing holds: a light side takes
/// the cheap barrier only once it reads "yes" (light_asymmetric(); while
/// undecided it pays a full fence, which pairs with either heavy side), and
/// a heavy side decides before it acts (asymmetric()), so it never pairs
/// a plain fence with a light side that saw "yes".
inline constexpr int kUndecided = -1;
extern constinit std::atomic<int> g_asymmetric;
bool decide_asymmetric() noexcept;
inline bool asymmetric() noexcept {
    const int a = g_asymmetric.load(std::memory_order_relaxed);
    if (a != kUndecided) [[likely]]
        return a != 0;
    return decide_asymmetric();
}
/// The light sides' reading of asymmetric(): undecided counts as "no".
inline bool light_asymmetric() noexcept { return g_asymmetric.load(std::memory_order_relaxed) > 0; }
extern std::atomic<std::int64_t> g_unguarded;  // threads acting without a slot
/// A scope without a slot (no memory for one) counts itself in g_unguarded
/// (and in this thread's own count, which a fork child keeps: fork.cpp).
void enter_unguarded() noexcept;
void leave_unguarded() noexcept;
}  // namespace hazard_detail

/// The two sides of an asymmetric fence, for any Dekker-style handshake
/// ("I write X then read Y; you write Y then read X; one of us sees the
/// other") whose one side is hot and the other rare: the hot side calls
/// light_fence() (a compiler barrier where membarrier is registered, else
/// a seq_cst fence), the rare side heavy_fence() (membarrier, else a seq_cst
/// fence). The light side asks hazard_detail::light_asymmetric(), the heavy
/// one asymmetric(): decided once (it changes only in a fork() child,
/// single-threaded then).
inline void light_fence() noexcept {
    if (hazard_detail::light_asymmetric())
        std::atomic_signal_fence(std::memory_order_seq_cst);
    else
        std::atomic_thread_fence(std::memory_order_seq_cst);
}
/// The rare side (see light_fence()): a system call where membarrier is
/// used, which interrupts every CPU that runs a thread of this process.
void heavy_fence() noexcept;

/// Publishes `rec` as being acted on by this thread, for the scope's life.
/// Scopes do not nest (rule 4 of timer_state.hpp: no user code inside one).
class HazardScope {
public:
    explicit HazardScope(const void* rec) noexcept : HazardScope(rec, hazard_detail::this_thread_slot()) {}
    /// With this thread's slot looked up once by the caller (a batch acts on
    /// its records one after the other: one lookup per call).
    HazardScope(const void* rec, HazardSlot* slot) noexcept : slot_(slot) {
        if (slot_ != nullptr) {
            slot_->rec.store(rec, std::memory_order_relaxed);
        } else {
            hazard_detail::enter_unguarded();
        }
        // Orders the store before the operation's loads of the record
        // (pairs with the reclaimer's heavy fence in hazard_held_any()).
        if (hazard_detail::light_asymmetric())
            std::atomic_signal_fence(std::memory_order_seq_cst);
        else
            std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    ~HazardScope() {
        if (slot_ != nullptr)
            slot_->rec.store(nullptr, std::memory_order_release);
        else
            hazard_detail::leave_unguarded();
    }
    HazardScope(const HazardScope&) = delete;
    HazardScope& operator=(const HazardScope&) = delete;

private:
    HazardSlot* slot_;
};

/// The reclaimer's side: a full barrier on every thread of the process
/// (membarrier), so that every HazardScope entered before it is visible to
/// the scans that follow and every one entered after it sees what was
/// written before it. Then hazard_held() may be asked, for many records.
void hazard_barrier() noexcept;
/// Whether some thread is inside a HazardScope on `rec` (or some thread acts
/// without a slot: then every record counts as held). After hazard_barrier().
bool hazard_held(const void* rec) noexcept;
/// Every record some thread is inside a HazardScope on, appended to `out`
/// (after hazard_barrier()); false if some thread acts without a slot
/// (then every record counts as held). May throw std::bad_alloc (push_back).
bool hazard_records(std::vector<const void*>& out);
/// Whether some thread's slot names `a` or `b` as the inbox it posts to (or
/// some thread posts without a slot). After heavy_fence().
bool inbox_held(const void* a, const void* b) noexcept;

}  // namespace tickwheel::rt
