// SPDX-License-Identifier: MIT OR Apache-2.0
// tickwheel/detail/callback.hpp -- the move-only, type-erased callable a timer
// carries. Not part of the stable API; use Runtime::start with any callable.
//
// 24 bytes of inline storage: a lambda capturing up to three pointers (or a
// C function pointer, its argument and its release hook) is stored without a
// heap allocation. Larger or throwing-move callables are boxed on the heap.
//
// FROZEN LAYOUT (1.x ABI). A Callback is built by inline code in the program
// and moved, called and destroyed by the library (libtickwheel.so.1), so its
// layout -- the ops table pointer, then 24 bytes aligned to 8; 32 bytes in
// all -- and the ops table -- invoke, relocate, destroy, in this order, with
// these signatures and meanings -- never change within ABI major 1.
#pragma once

// C++20 or nothing: below it (or from C) this header stops with this one
// error instead of a wall of them (the rest of the file is skipped; the
// #endif is the file's last line). ctest cxx20_header_guard checks it.
#if !defined(__cplusplus) || __cplusplus < 202002L
#error "tickwheel/detail/callback.hpp is part of tickwheel's C++ API and needs C++20: compile with -std=c++20 (or later); from C or older C++ use the C API, <tickwheel/tickwheel.h>"
#else

#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>

#include "tickwheel/timer.hpp"

namespace tickwheel {

namespace rt {
/// libtickwheel's access to a Callback's parts (its ops table and inline
/// bytes): a timer record keeps the 24 bytes and a small index of the ops
/// table instead of a whole Callback. Defined inside the library only; not
/// an API. (A friend: no change to the layout or the ops.)
struct CallbackAccess;
}  // namespace rt

namespace detail {

class Callback {
public:
    static constexpr std::size_t kInline = 24;

    Callback() noexcept = default;

    template <class F, class D = std::decay_t<F>,
              class = std::enable_if_t<!std::is_same_v<D, Callback>>>
    Callback(F&& f) {  // NOLINT(google-explicit-constructor): implicit by design
        static_assert(std::is_invocable_v<D&, Timer> || std::is_invocable_v<D&>,
                      "a timer callback must be callable as f(tickwheel::Timer) or f()");
        if constexpr (fits_inline<D>()) {
            ::new (static_cast<void*>(buf_)) D(std::forward<F>(f));
            ops_ = &kInlineOps<D>;
        } else {
            D* boxed = new D(std::forward<F>(f));
            ::new (static_cast<void*>(buf_)) D*(boxed);
            ops_ = &kBoxedOps<D>;
        }
    }

    Callback(Callback&& other) noexcept { take(other); }
    Callback& operator=(Callback&& other) noexcept {
        if (this != &other) {
            reset();
            take(other);
        }
        return *this;
    }
    Callback(const Callback&) = delete;
    Callback& operator=(const Callback&) = delete;
    ~Callback() { reset(); }

    explicit operator bool() const noexcept { return ops_ != nullptr; }

    /// Calls the callable. Precondition: *this is not empty.
    void operator()(Timer t) { ops_->invoke(buf_, t); }

    /// Destroys the callable (running its destructor: the timer's release
    /// hook) and leaves *this empty.
    void reset() noexcept {
        if (ops_ != nullptr) {
            const Ops* ops = ops_;
            ops_ = nullptr;
            ops->destroy(buf_);
        }
    }

    /// Leaves *this empty WITHOUT destroying the callable (no release hook;
    /// a heap-boxed callable leaks). Only for a fork() child discarding its
    /// parent's timers, whose hooks must not run there.
    void forget() noexcept { ops_ = nullptr; }

private:
    friend struct rt::CallbackAccess;

    struct Ops {
        void (*invoke)(void* buf, Timer t);
        void (*relocate)(void* dst, void* src) noexcept;  // move-construct dst, destroy src
        void (*destroy)(void* buf) noexcept;
    };

    template <class D>
    static constexpr bool fits_inline() {
        return sizeof(D) <= kInline && alignof(D) <= alignof(std::max_align_t) &&
               alignof(D) <= 8 && std::is_nothrow_move_constructible_v<D>;
    }

    template <class D>
    static void call(D& f, Timer t) {
        if constexpr (std::is_invocable_v<D&, Timer>)
            f(t);
        else
            f();
    }

    template <class D>
    static constexpr Ops kInlineOps = {
        [](void* buf, Timer t) { call(*std::launder(static_cast<D*>(buf)), t); },
        [](void* dst, void* src) noexcept {
            D* s = std::launder(static_cast<D*>(src));
            ::new (dst) D(std::move(*s));
            s->~D();
        },
        [](void* buf) noexcept { std::launder(static_cast<D*>(buf))->~D(); },
    };

    template <class D>
    static constexpr Ops kBoxedOps = {
        [](void* buf, Timer t) { call(**std::launder(static_cast<D**>(buf)), t); },
        [](void* dst, void* src) noexcept { ::new (dst) D*(*std::launder(static_cast<D**>(src))); },
        [](void* buf) noexcept { delete *std::launder(static_cast<D**>(buf)); },
    };

    void take(Callback& other) noexcept {
        if (other.ops_ != nullptr) {
            other.ops_->relocate(buf_, other.buf_);
            ops_ = other.ops_;
            other.ops_ = nullptr;
        }
    }

    const Ops* ops_ = nullptr;
    alignas(8) unsigned char buf_[kInline];
};

static_assert(sizeof(Callback) == 32 && alignof(Callback) == 8, "detail::Callback's layout is part of the 1.x ABI");

}  // namespace detail
}  // namespace tickwheel

#endif  // C++20 (the check after #pragma once)
