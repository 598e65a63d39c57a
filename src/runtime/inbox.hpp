// SPDX-License-Identifier: MIT OR Apache-2.0
// Inbox: a shard's MPSC queue of 64-bit messages (messages.hpp), with a
// reserve so that no message a caller cannot take back is ever lost.
//
// The queue is a moodycamel::ConcurrentQueue (lock-free, bulk dequeue). Its
// enqueue allocates (a block per 32 messages per producer thread, and a
// producer record on a thread's first post) and fails if allocation fails.
// What happens then depends on the message:
//   * start()'s Insert: try_post() reports the failure; start() takes the
//     timer back and fails with no_memory (nobody else knows its id yet).
//     A batch start posts its Inserts as one block (try_post_bulk); if that
//     fails, one by one, and takes back exactly the starts whose Insert
//     could not be queued.
//   * everything else (Cancel after a stop, Refile after an earlier reset,
//     Insert after a reset of a due one-shot or a re-arm from its own
//     callback): post() never fails: the message goes to a fixed reserve of
//     kReserve slots allocated with the shard; if even that is full, the
//     caller wakes the shard and yields until the shard has drained it.
//     That wait happens only while the process is out of memory. A batch
//     posts these as one block (post_bulk), falling back to post() each.
// The shard drains the reserve before the queue (one relaxed load when it
// is empty). Message order does not matter: each handler acts on the
// record's current word, not on the message's history.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>

#include "concurrentqueue.h"
#include "runtime/test_hooks.hpp"

namespace tickwheel::rt {

class Inbox {
public:
    static constexpr std::size_t kReserve = 1024;

    /// Queues `m`; false if the queue could not allocate (nothing queued).
    /// Any thread.
    bool try_post(std::uint64_t m) noexcept {
        if (test_hooks::fail_inbox_posts.load(std::memory_order_relaxed) > 0 &&
            test_hooks::fail_inbox_posts.fetch_sub(1, std::memory_order_relaxed) > 0)
            return false;
        return queue_.enqueue(m);
    }

    /// Queues `m`, never losing it (see above); `wake()` wakes the drainer.
    /// Any thread.
    template <class Wake>
    void post(std::uint64_t m, Wake&& wake) noexcept {
        if (try_post(m)) return;
        for (;;) {
            {
                std::lock_guard<std::mutex> lock(reserve_mutex_);
                test_hooks::window(nullptr, 'R');  // a poster holding the reserve's lock
                const std::uint32_t n = reserve_n_.load(std::memory_order_relaxed);
                if (n < kReserve) {
                    reserve_[n] = m;
                    reserve_n_.store(n + 1, std::memory_order_release);
                    reserve_used_.fetch_add(1, std::memory_order_relaxed);
                    return;
                }
            }
            wake();
            std::this_thread::yield();
        }
    }

    /// Queues `n` messages as one block (all or none); false if the queue
    /// could not allocate. While the test hook fail_inbox_posts is armed it
    /// fails without consuming it: the caller then posts one by one, and
    /// each of those takes one failure. Any thread.
    bool try_post_bulk(const std::uint64_t* m, std::size_t n) noexcept {
        if (test_hooks::fail_inbox_posts.load(std::memory_order_relaxed) > 0) return false;
        return queue_.enqueue_bulk(m, n);
    }

    /// Queues `n` messages, never losing one: as one block, or else each
    /// through post(). Any thread.
    template <class Wake>
    void post_bulk(const std::uint64_t* m, std::size_t n, Wake&& wake) noexcept {
        if (try_post_bulk(m, n)) return;
        for (std::size_t i = 0; i < n; ++i) post(m[i], wake);
    }

    /// Takes up to `max` messages (the reserve's first). The shard only.
    /// Never waits for a poster: if one holds the reserve's lock, the
    /// reserve is left for the next drain and `reserve_busy` is set (the
    /// driver then comes back at its next tick).
    std::size_t drain(std::uint64_t* out, std::size_t max, bool& reserve_busy) noexcept {
        std::size_t n = 0;
        if (reserve_n_.load(std::memory_order_acquire) != 0) {
            std::unique_lock<std::mutex> lock(reserve_mutex_, std::try_to_lock);
            if (!lock.owns_lock()) {
                reserve_busy = true;
            } else {
                const std::uint32_t have = reserve_n_.load(std::memory_order_relaxed);
                n = have < max ? have : max;
                for (std::size_t i = 0; i < n; ++i) out[i] = reserve_[have - n + i];
                reserve_n_.store(static_cast<std::uint32_t>(have - n), std::memory_order_relaxed);
                if (n == max) return n;
            }
        }
        return n + queue_.try_dequeue_bulk(out + n, max - n);
    }

    std::size_t size_approx() const noexcept {
        return queue_.size_approx() + reserve_n_.load(std::memory_order_relaxed);
    }
    /// Messages that went through the reserve since creation.
    std::uint64_t reserve_used() const noexcept { return reserve_used_.load(std::memory_order_relaxed); }

private:
    moodycamel::ConcurrentQueue<std::uint64_t> queue_;
    std::atomic<std::uint32_t> reserve_n_{0};
    std::atomic<std::uint64_t> reserve_used_{0};
    std::mutex reserve_mutex_;  // taken only when the queue failed to allocate; the drainer only tries it
    std::uint64_t reserve_[kReserve];
};

}  // namespace tickwheel::rt
