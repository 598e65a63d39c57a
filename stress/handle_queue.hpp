// SPDX-License-Identifier: MIT OR Apache-2.0
// A user executor's queue of coroutine handles, what the coroutine stress
// programs' executors are built on (coro_stress.cpp's Executor, one thread
// draining it; coro_history_run.cpp's DequeExecutor, drained by a thread or
// by the manual loop): a deque under a mutex, a condition variable that
// wakes a waiting drainer, and a quit flag for it.
#pragma once

#include <condition_variable>
#include <coroutine>
#include <deque>
#include <mutex>

namespace stress {

struct HandleQueue {
    std::mutex m;
    std::condition_variable cv;
    std::deque<std::coroutine_handle<>> q;
    bool quit = false;
    /// Queues `h` and wakes a waiting drainer. Any thread (the executor's
    /// post function, which the runtime calls).
    void push(std::coroutine_handle<> h) noexcept {
        {
            std::lock_guard<std::mutex> lk(m);
            q.push_back(h);
        }
        cv.notify_one();
    }
};

}  // namespace stress
