// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/worker_pool.hpp"

#include <algorithm>
#include <system_error>

#include "runtime/parker.hpp"

namespace tickwheel::rt {

WorkerPool::WorkerPool(unsigned max_threads) : limit_(std::max(1u, max_threads)) {
    handles_.reserve(limit_.load(std::memory_order_relaxed));  // so that adding a started thread cannot throw
    threads_ = 1;
    handles_.emplace_back([this] { run(); });
}

WorkerPool::~WorkerPool() {
    std::vector<std::thread> threads;
    {
        std::lock_guard<std::mutex> lock(m_);
        stop_ = true;
        threads.swap(handles_);
    }
    cv_.notify_all();
    for (auto& t : threads) t.join();
}

unsigned WorkerPool::post(Task task, void* arg, unsigned copies) noexcept {
    unsigned queued = 0;
    unsigned start = 0;
    {
        std::lock_guard<std::mutex> lock(m_);
        try {
            for (; queued < copies; ++queued) queue_.emplace_back(task, arg);
        } catch (...) {  // std::bad_alloc: the caller learns how many were queued
        }
        // Every thread not running a task takes one queued task (it is
        // asleep and gets notified, or will look before sleeping): start
        // one more thread for each queued task beyond those.
        const std::size_t free_threads = threads_ - busy_;
        if (queue_.size() > free_threads) {
            const unsigned room = limit_.load(std::memory_order_relaxed) - threads_;
            start = static_cast<unsigned>(std::min<std::size_t>(queue_.size() - free_threads, room));
            threads_ += start;  // counted now: a concurrent post() does not start them again
        }
    }
    if (queued == 1)
        cv_.notify_one();
    else if (queued > 1)
        cv_.notify_all();
    if (start != 0) start_threads(start);
    return queued;
}

void WorkerPool::start_threads(unsigned n) noexcept {
    for (unsigned started = 0; started < n; ++started) {
        try {
            std::thread t([this] { run(); });
            std::lock_guard<std::mutex> lock(m_);
            handles_.push_back(std::move(t));  // within the reserved capacity: no throw
        } catch (...) {  // std::system_error (no more threads) or std::bad_alloc
            // Run with the threads there are: each queued task is still taken
            // by one of them (there is always at least one), only later.
            std::lock_guard<std::mutex> lock(m_);
            threads_ -= n - started;
            limit_.store(threads_, std::memory_order_relaxed);
            return;
        }
    }
}

void WorkerPool::run() noexcept {
    set_thread_name("tw-worker");
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
        cv_.wait(lock, [this] { return !queue_.empty() || stop_; });
        if (queue_.empty()) return;  // stopping, and nothing left to run
        const auto [task, arg] = queue_.front();
        queue_.pop_front();
        ++busy_;
        lock.unlock();
        task(arg);
        lock.lock();
        --busy_;
    }
}

}  // namespace tickwheel::rt
