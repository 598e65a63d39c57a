// SPDX-License-Identifier: MIT OR Apache-2.0
// The registry of callable kinds and the library's box (callable.hpp).
#include "runtime/callable.hpp"

#include <new>

#include "runtime/test_hooks.hpp"

namespace tickwheel::rt {

namespace {
using detail::Callback;

// Kind 0's sentinel: an ops table no Callback carries (never called).
constexpr CallbackOps kNoneOps = {nullptr, nullptr, nullptr};

// Kind 1: the box. Its bytes hold a pointer to a heap Callback; destroying
// the box destroys that Callback (its callable's destructor: the release hook).
constexpr CallbackOps kBoxOps = {
    [](void* buf, Timer t) { (**std::launder(static_cast<Callback**>(buf)))(t); },
    [](void* dst, void* src) noexcept { ::new (dst) Callback*(*std::launder(static_cast<Callback**>(src))); },
    [](void* buf) noexcept { delete *std::launder(static_cast<Callback**>(buf)); },
};

std::atomic<std::uint32_t> g_registered{2};  // the two reserved kinds
}  // namespace

constinit std::atomic<const CallbackOps*> CallableKinds::slots_[kSlots] = {&kNoneOps, &kBoxOps};

std::uint16_t CallableKinds::find_slow(const CallbackOps* ops, std::uint32_t h) noexcept {
    // Linear probing. A pointer is only ever written into the first empty
    // slot of its probe sequence, and a slot never changes once written, so
    // every thread registering the same pointer meets at that same slot:
    // the CAS's loser reads the winner's pointer there.
    for (unsigned i = 0; i < kMaxProbe; ++i) {
        const auto s = static_cast<std::uint16_t>((h + i) & (kSlots - 1));
        const CallbackOps* cur = slots_[s].load(std::memory_order_acquire);
        if (cur == nullptr) {
            if (slots_[s].compare_exchange_strong(cur, ops, std::memory_order_acq_rel, std::memory_order_acquire)) {
                g_registered.fetch_add(1, std::memory_order_relaxed);
                return s;
            }
        }
        if (cur == ops) return s;
    }
    return kNone;  // full around its hash: the caller boxes it
}

std::uint32_t CallableKinds::registered() noexcept { return g_registered.load(std::memory_order_relaxed); }

bool CallableKinds::box(Callback& cb, void* dst) noexcept {
    if (test_hooks::fail_box_allocs.load(std::memory_order_relaxed) > 0 &&
        test_hooks::fail_box_allocs.fetch_sub(1, std::memory_order_relaxed) > 0)
        return false;
    auto* boxed = new (std::nothrow) Callback(std::move(cb));
    if (boxed == nullptr) return false;
    ::new (dst) Callback*(boxed);
    return true;
}

}  // namespace tickwheel::rt
