// SPDX-License-Identifier: MIT OR Apache-2.0
// A timer's callable as its record keeps it: the 24 inline bytes of the
// detail::Callback it was started with, and a 16-bit *kind* that names the
// Callback's ops table, instead of the Callback's 8-byte ops pointer. That
// is what makes the record 64 bytes, one cache line (timer_record.hpp).
//
// Kinds. A process-wide registry maps each distinct ops table a timer was
// started with (one per callable type: every C callback shares one, each
// C++ lambda type has its own) to a small index: an open-addressed table of
// kSlots pointers, probed linearly from the pointer's hash; a new pointer
// claims the first empty slot with one CAS, and the slot number is its
// kind. Entries are never removed (ops tables are static data), so a lookup
// is lock-free and, for a registered type, usually one load of a read-mostly
// line and a compare -- the first probe hits (measured: see README). Kind 0
// is "no callable" and kind 1 the library's box (below); both slots hold
// sentinels no Callback can carry, so probing passes over them.
//
// Full. A pointer that finds neither itself nor an empty slot within
// kMaxProbe slots of its hash (a program with thousands of callable types)
// is not registered: its Callback is moved whole (32 bytes) into a heap box,
// whose own ops table is kind 1 (kBoxOps). Boxing allocates once per start;
// if that fails, the start fails with no_memory and the callable is still
// the caller's (the release hook then runs exactly once, as for any failed
// start).
//
// Ownership: the kind and the bytes are written and read only by whoever
// owns the timer's current state (timer_state.hpp), like the Callback they
// replace; the registry's slots are atomics.
#pragma once

#include <atomic>
#include <cstdint>

#include "tickwheel/detail/callback.hpp"

namespace tickwheel::rt {

/// The library's access to a Callback's parts (declared a friend in
/// callback.hpp; the layout and the ops table stay frozen).
struct CallbackAccess {
    using Callback = detail::Callback;
    using Ops = Callback::Ops;
    static constexpr std::size_t kInline = Callback::kInline;
    static const Ops* ops(const Callback& cb) noexcept { return cb.ops_; }
    /// Moves cb's callable into `dst` (kInline bytes, 8-aligned) and leaves
    /// cb empty (no destructor runs). Precondition: cb is not empty.
    static void move_out(Callback& cb, void* dst) noexcept {
        cb.ops_->relocate(dst, cb.buf_);
        cb.ops_ = nullptr;
    }
    /// Moves the callable in `src`, of ops table `ops`, into the empty `cb`.
    static void move_in(Callback& cb, const Ops* ops, void* src) noexcept {
        ops->relocate(cb.buf_, src);
        cb.ops_ = ops;
    }
};

using CallbackOps = CallbackAccess::Ops;

class CallableKinds {
public:
    static constexpr unsigned kBits = 12;
    static constexpr std::uint32_t kSlots = 1u << kBits;  // 4096 kinds, 4094 of them for callable types
    static constexpr std::uint16_t kNone = 0;             // no callable
    static constexpr std::uint16_t kBoxed = 1;            // a heap box holding a whole Callback
    static constexpr unsigned kMaxProbe = 64;             // slots a pointer may look at: a bounded lookup

    /// The kind of ops table `ops`, registering it on first use; kNone if
    /// the registry has no room for it (box it). Any thread, lock-free.
    static std::uint16_t find(const CallbackOps* ops) noexcept {
        const std::uint32_t h = hash(ops);
        if (slots_[h].load(std::memory_order_acquire) == ops) return static_cast<std::uint16_t>(h);
        return find_slow(ops, h);
    }
    /// The ops table of a kind found above (or kBoxed). Any thread that
    /// learnt the kind from its finder (the record's publication orders it).
    static const CallbackOps* ops(std::uint16_t kind) noexcept {
        return slots_[kind].load(std::memory_order_relaxed);
    }
    /// Kinds registered so far, the two reserved ones included (tests).
    static std::uint32_t registered() noexcept;

    /// Moves `cb`, whole, into a new heap box and stores the box's pointer
    /// in `dst` (the kBoxed kind's bytes). False if there is no memory for
    /// it: then `cb` is unchanged.
    static bool box(detail::Callback& cb, void* dst) noexcept;

private:
    static std::uint16_t find_slow(const CallbackOps* ops, std::uint32_t h) noexcept;
    static std::uint32_t hash(const CallbackOps* ops) noexcept {
        // Fibonacci hashing of the address (ops tables are 8-aligned, 24 bytes apart at least).
        return static_cast<std::uint32_t>((reinterpret_cast<std::uintptr_t>(ops) * 0x9E3779B97F4A7C15ull) >>
                                          (64 - kBits));
    }
    static std::atomic<const CallbackOps*> slots_[kSlots];
};

}  // namespace tickwheel::rt
