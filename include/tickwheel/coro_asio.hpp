// SPDX-License-Identifier: MIT OR Apache-2.0
/// @file
/// tickwheel/coro_asio.hpp -- resume tickwheel's coroutines on an Asio
/// executor (standalone Asio, Debian libasio-dev, or Boost.Asio).
///
/// Include Asio (<asio.hpp> or <boost/asio.hpp>) before this header. Then
///
///     asio::io_context io;
///     tickwheel::asio_resumer on_io(io.get_executor());     // or a strand
///     auto r = co_await tickwheel::sleep_for(rt, 10ms, on_io.where(), token);
///
/// resumes the coroutine inside io.run() (on the strand, if it is one):
/// the timer fires on a tickwheel worker, which decides the wake-up (exactly
/// once, with its reason: see tickwheel/coro.hpp) and hands the coroutine to
/// `post(executor, ...)` (found by argument-dependent lookup: asio::post or
/// boost::asio::post). At shutdown the wake-up (wake::shutdown) is posted the
/// same way, from the thread shutting the runtime down.
///
/// Contract: the asio_resumer (it holds the executor) must outlive every wait
/// that names it; the io_context must keep running (not be stopped,
/// restarted without running, or destroyed) until those waits have resumed:
/// a handler Asio destroys without running leaves its coroutine suspended
/// forever (its frame leaks). The executor's context must also outlive the
/// Runtime (create the io_context first): the worker that posts may still be
/// inside post() when the coroutine already runs on the Asio thread. post() allocates as Asio does (its recycling
/// allocator, per thread); an allocation failure there is fatal
/// (std::terminate: the wake-up cannot be lost silently).
///
/// This resumes tickwheel's awaitables in any coroutine type on an Asio
/// thread; asio::awaitable<> bodies themselves cannot co_await them (Asio's
/// await_transform admits only Asio operations).
#pragma once

// C++20 or nothing: below it (or from C) this header stops with this one
// error instead of a wall of them (the rest of the file is skipped; the
// #endif is the file's last line). ctest cxx20_header_guard checks it.
#if !defined(__cplusplus) || __cplusplus < 202002L
#error "tickwheel/coro_asio.hpp is part of tickwheel's C++ API and needs C++20: compile with -std=c++20 (or later); from C or older C++ use the C API, <tickwheel/tickwheel.h>"
#else

#include <coroutine>
#include <utility>

#include "tickwheel/coro.hpp"

namespace tickwheel {

/// Adapts an Asio executor (io_context::executor_type, strand<...>,
/// any_io_executor, thread_pool::executor_type; Boost's as well) to a
/// resume_on. Not copyable or movable: waits hold its address.
template <class Executor>
class asio_resumer {
public:
    /// Resumes coroutines through `ex` (a copy is kept).
    explicit asio_resumer(Executor ex) : ex_(std::move(ex)) {}
    asio_resumer(const asio_resumer&) = delete;
    asio_resumer& operator=(const asio_resumer&) = delete;

    /// The resume_on to pass to sleep_for(), sleep_until(), event.wait().
    resume_on where() noexcept { return on_executor(this, &post_fn); }
    /// The executor.
    const Executor& executor() const noexcept { return ex_; }

private:
    static void post_fn(void* self, std::coroutine_handle<> h) noexcept {
        post(static_cast<asio_resumer*>(self)->ex_, [h] { h.resume(); });  // asio::post / boost::asio::post (ADL)
    }
    Executor ex_;
};

}  // namespace tickwheel

#endif  // C++20 (the check after #pragma once)
