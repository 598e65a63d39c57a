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
//
// Memory after a peak (issue 34). A moodycamel queue never frees a block
// before it is destroyed: a burst that queued millions of messages (a 10 M
// start or stop burst faster than the driver drains) kept ~10 bytes per
// message of that backlog for the queue's life. So the queue lives in a
// Box with an arena of its own (mmap'd regions, InboxArena: every
// allocation the queue makes, a bump; freed only with the box), and after
// a pass that drained kRetireAfter messages or more, once the inbox is
// quiet, the driver retires the box: posters find a new, empty one; the
// driver drains the old one, and frees it -- arena and all, straight back
// to the kernel -- once no poster can be inside it: each post names the
// inbox, then the box it loaded, in its thread's hazard slot
// (HazardSlot::inbox) around its enqueue, and the driver looks, after a
// heavy fence, for a slot naming either (hazard.hpp). It never waits for
// one: a slot still naming them is looked at again at the next pass.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>

#include "concurrentqueue.h"
#include "runtime/hazard.hpp"
#include "runtime/test_hooks.hpp"

namespace tickwheel::rt {

/// The memory of one inbox queue: a chain of mmap'd regions handed out by
/// a bump pointer (any thread, lock-free), freed whole with the arena.
/// moodycamel frees only in its destructor, so nothing is ever freed one by
/// one. (inbox.cpp)
class InboxArena {
public:
    InboxArena() noexcept = default;
    ~InboxArena();
    InboxArena(const InboxArena&) = delete;
    InboxArena& operator=(const InboxArena&) = delete;
    /// `size` bytes, 16-aligned; nullptr if no memory.
    void* allocate(std::size_t size) noexcept;
    /// Bytes mapped (stats).
    std::size_t mapped() const noexcept { return mapped_.load(std::memory_order_relaxed); }

private:
    struct Region;
    std::atomic<Region*> current_{nullptr};
    std::atomic<std::size_t> mapped_{0};
};

/// moodycamel's allocation hooks for the inbox's queues: from the arena of
/// the box the calling thread constructs or destroys (t_arena), or the box
/// it is posting to (its hazard slot names the box by its arena's address:
/// Inbox::Posting), else the heap; a 16-byte prefix says which,
/// for free(). (moodycamel allocates only when a post needs a block or a
/// new producer: nothing to set per post but the slot.)
struct InboxTraits : moodycamel::ConcurrentQueueDefaultTraits {
    static void* malloc(std::size_t size);
    static void free(void* p);
    /// The arena the calling thread allocates from outside a post (making
    /// and freeing a box), or a post without a hazard slot.
    [[gnu::tls_model("initial-exec")]] static constinit thread_local InboxArena* t_arena;
    struct Scope {
        explicit Scope(InboxArena* a) noexcept : saved(t_arena) { t_arena = a; }
        ~Scope() { t_arena = saved; }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;
        InboxArena* saved;
    };
};

class Inbox {
public:
    static constexpr std::size_t kReserve = 1024;
    /// A pass that drained this many messages or more leaves its queue
    /// retired once the inbox is quiet (~10 bytes a message of backlog: the
    /// burst left some MiB behind).
    static constexpr std::size_t kRetireAfter = 65536;

    Inbox();
    ~Inbox();
    Inbox(const Inbox&) = delete;
    Inbox& operator=(const Inbox&) = delete;

    /// Queues `m`; false if the queue could not allocate (nothing queued).
    /// Any thread.
    bool try_post(std::uint64_t m) noexcept {
        if (test_hooks::fail_inbox_posts.load(std::memory_order_relaxed) > 0 &&
            test_hooks::fail_inbox_posts.fetch_sub(1, std::memory_order_relaxed) > 0)
            return false;
        Posting in(*this);
        return in.box().queue().enqueue(m);
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
        Posting in(*this);
        return in.box().queue().enqueue_bulk(m, n);
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
        // A retired box first (its messages are older), until it is empty;
        // once no poster can be inside it (housekeep) and it is empty, it is
        // freed here.
        if (old_ != nullptr && n < max) {
            const std::size_t got = old_->queue().try_dequeue_bulk(out + n, max - n);
            n += got;
            if (got == 0 && old_quiet_) free_old();
        }
        if (n == max) return n;
        return n + current_.load(std::memory_order_relaxed)->queue().try_dequeue_bulk(out + n, max - n);
    }

    /// The driver, after a pass that drained `drained` messages: retires the
    /// queue after a big backlog once the inbox is quiet, and frees a
    /// retired one once it is empty and no poster can be inside it. Never
    /// waits. Returns whether a retired box is still pending (the driver
    /// then keeps its housekeeping rhythm).
    bool housekeep(std::size_t drained) noexcept;

    /// Messages queued (approx.). Any thread: it names the inbox in its
    /// hazard slot meanwhile, so neither box is freed under it.
    std::size_t size_approx() const noexcept;
    /// Messages that went through the reserve since creation.
    std::uint64_t reserve_used() const noexcept { return reserve_used_.load(std::memory_order_relaxed); }
    /// Queues retired and freed since creation (tests).
    std::uint64_t retired() const noexcept { return retired_.load(std::memory_order_relaxed); }

private:
    /// A queue and the arena it allocates from (see the top of the file).
    struct Box {
        InboxArena arena;  // a poster's slot names the box by its arena's address (InboxTraits::malloc)
        // Made (and destroyed) with t_arena pointing at `arena`: make_box, free_box.
        std::optional<moodycamel::ConcurrentQueue<std::uint64_t, InboxTraits>> q;
        moodycamel::ConcurrentQueue<std::uint64_t, InboxTraits>& queue() noexcept { return *q; }
        const moodycamel::ConcurrentQueue<std::uint64_t, InboxTraits>& queue() const noexcept { return *q; }
    };
    static Box* make_box() noexcept;
    static void free_box(Box* b) noexcept;
    /// A post's scope: names this inbox, then the box it posts to, in the
    /// thread's hazard slot, and points the queue's allocations at the box's
    /// arena (see the top of the file).
    class Posting {
    public:
        /// `reader`: size_approx(), which reads both boxes: its slot keeps
        /// naming the inbox (no box is freed meanwhile).
        explicit Posting(const Inbox& in, bool reader = false) noexcept
            : slot_(hazard_detail::this_thread_slot_inline()) {
            // Names the inbox first, then (a poster) the box it loaded: a
            // driver that retired the box and looks after its heavy fence
            // sees either name, or this post saw the new box (see the top).
            if (slot_ != nullptr) [[likely]]
                slot_->inbox.store(&in, std::memory_order_relaxed);
            else
                enter_unguarded();
            light_fence();
            box_ = in.current_.load(std::memory_order_acquire);
            if (slot_ != nullptr) [[likely]] {
                if (!reader) slot_->inbox.store(&box_->arena, std::memory_order_relaxed);  // (names the box)
            } else {
                saved_arena_ = InboxTraits::t_arena;
                InboxTraits::t_arena = &box_->arena;
            }
        }
        ~Posting() {
            // Release: the driver that sees the slot empty sees the enqueue.
            if (slot_ != nullptr) [[likely]]
                slot_->inbox.store(nullptr, std::memory_order_release);
            else
                leave_unguarded();
        }
        Box& box() const noexcept { return *box_; }
        Posting(const Posting&) = delete;
        Posting& operator=(const Posting&) = delete;

    private:
        void enter_unguarded() noexcept;
        void leave_unguarded() noexcept;
        HazardSlot* slot_;
        Box* box_ = nullptr;
        InboxArena* saved_arena_ = nullptr;  // (no slot only)
    };

    void free_old() noexcept;

    std::atomic<Box*> current_;
    Box* old_ = nullptr;                        // the driver's: retired, not yet freed
    bool old_quiet_ = false;                    // the driver's: no poster can be inside old_ any more
    std::atomic<const Box*> old_published_{nullptr};  // old_ for size_approx() (readers, any thread)
    bool big_pass_ = false;                     // the driver's: a pass drained kRetireAfter or more
    std::atomic<std::uint64_t> retired_{0};
    std::atomic<std::uint32_t> reserve_n_{0};
    std::atomic<std::uint64_t> reserve_used_{0};
    std::mutex reserve_mutex_;  // taken only when the queue failed to allocate; the drainer only tries it
    std::uint64_t reserve_[kReserve];
};

}  // namespace tickwheel::rt
