// Shard: one hierarchical wheel, its handle table, its inbox and the driver
// thread that owns them.
//
// Only the driver thread touches the wheel and the records' wheel links.
// Other threads reach it through the inbox, a moodycamel ConcurrentQueue of
// 64-bit messages (insert / refile earlier / cancel), drained in bulk. The
// driver sleeps on a futex until the wheel's next expiry, or until a request
// that needs an earlier wake-up arrives, or at most kHousekeepingNs. Cancels
// need no early wake-up, but every kCancelWakeEvery-th cancel a thread posts
// wakes a sleeping driver, so stopped timers are reclaimed promptly (memory
// stays flat) without a system call per stop.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "concurrentqueue.h"
#include "runtime/handle_table.hpp"
#include "runtime/parker.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel::rt {

struct RuntimeCore;

// ---- inbox messages ----------------------------------------------------------
//   63 62 | 61..56 unused | 55..32 generation | 31..0 index
enum class MsgType : std::uint64_t {
    Insert = 0,  // file a PENDING record that is not in the wheel
    Refile = 1,  // a PENDING/RUNNING record's deadline moved earlier
    Cancel = 2,  // a CANCELLED record: unlink it and recycle the slot
};
struct Msg {
    static constexpr std::uint64_t make(MsgType t, std::uint32_t gen, std::uint32_t index) noexcept {
        return (static_cast<std::uint64_t>(t) << 62) | (std::uint64_t{gen} << 32) | index;
    }
    static constexpr MsgType type(std::uint64_t m) noexcept { return static_cast<MsgType>(m >> 62); }
    static constexpr std::uint32_t gen(std::uint64_t m) noexcept {
        return static_cast<std::uint32_t>(m >> 32) & 0xFFFFFF;
    }
    static constexpr std::uint32_t index(std::uint64_t m) noexcept { return static_cast<std::uint32_t>(m); }
};

/// One item the shard hands to the dispatcher: the record, the generation
/// (low 10 bits) it was dispatched under, and the deadline that came due.
struct FireItem {
    Record* rec;
    std::uint32_t gen10;
    std::uint32_t shard;
    tick_t due;
};

class Shard {
public:
    /// Upper bound of a driver's sleep: reclaims cancelled timers and
    /// refreshes stats at least this often while idle (10 wake-ups/s).
    static constexpr std::int64_t kHousekeepingNs = 100'000'000;
    static constexpr unsigned kCancelWakeEvery = 4096;
    static constexpr std::size_t kDrainBatch = 512;
    static constexpr std::size_t kFireBatch = 256;

    Shard(RuntimeCore& core, unsigned index);
    ~Shard();
    Shard(const Shard&) = delete;
    Shard& operator=(const Shard&) = delete;

    /// Starts the driver thread (pinned to `cpu` if cpu >= 0).
    void start(int cpu);
    /// Stops the driver thread and joins it. Messages still queued stay
    /// queued (shutdown's sweep takes care of their records).
    void stop_and_join();

    HandleTable& table() noexcept { return table_; }
    unsigned index() const noexcept { return index_; }

    /// Queues a cancel: no early wake-up, except every kCancelWakeEvery-th
    /// cancel from this thread wakes a sleeping driver. Any thread.
    void post_cancel(std::uint64_t msg);
    /// Queues a message about a deadline `due`, waking the driver if it
    /// sleeps past `due`. Any thread.
    void post_and_wake(std::uint64_t msg, tick_t due);

    std::size_t pending() const noexcept { return pending_.load(std::memory_order_relaxed); }
    std::size_t inbox_size() const noexcept { return inbox_.size_approx(); }

    /// Recycles a record this thread owns in a terminal state (CANCELLED or
    /// DONE), not linked in any wheel, callable already destroyed: bumps the
    /// generation, marks it FREE, and frees the index through `chain` (a
    /// FreeChain on this shard's table; its flush, by the caller at the end
    /// of its burst, wakes stop_sync waiters). Any thread.
    void recycle(Record& r, FreeChain& chain) noexcept;

private:
    void run(int cpu);
    bool drain_inbox();
    void handle(std::uint64_t msg, FreeChain& freed);
    void expire(tick_t now);
    void flush(FireItem* items, std::size_t& n);

    RuntimeCore& core_;
    const unsigned index_;
    HandleTable table_;
    Wheel wheel_;
    moodycamel::ConcurrentQueue<std::uint64_t> inbox_;
    Parker parker_;
    // The tick the driver sleeps until, 0 while it is awake (it re-checks the
    // inbox before sleeping). A poster whose deadline is earlier claims the
    // wake-up by CAS-ing this to 0, so one wake-up costs one futex call.
    alignas(64) std::atomic<tick_t> sleep_until_{0};
    std::atomic<bool> stopping_{false};
    std::atomic<std::size_t> pending_{0};
    std::thread thread_;
};

}  // namespace tickwheel::rt
