// SPDX-License-Identifier: MIT OR Apache-2.0
// CallerCells: where a thread's own timers wait for their shard.
//
// Why. A thread that starts timers and stops them again before they are due
// -- a request's timeout, a retransmit that the answer cancels; the kernel's
// wheel was designed around "~99% of timers are cancelled before expiry" --
// should not make the shard's driver file each timer into the wheel and
// unlink it again: that moves every record's cache line to the driver's core
// and back (measured: a pair 115 ns at 1 K pending, against 55 ns for
// libuv's single-threaded heap, when every start and stop went to the
// driver). 1.5 kept the work on the caller's core with a token: a caller
// took the driver's token and applied its message to the wheel itself. But
// a token is a lock: a caller preempted, at nice 19, stopped in a debugger
// or in a signal handler while it held the token stalled every timer of its
// shard (issue 31). A cell keeps the work on the caller's core without a
// lock, much as Go keeps timers per P.
//
// What. Each shard has kCells cells; a thread claims one in its default
// shard on its first plain start there (a monotonic one-shot with no
// options: start_plain) and keeps it until it exits (then another thread may
// claim it, with what it holds). A cell holds up to kMaxChunks x kChunkSlots
// of its owner's timers as (index, generation) entries, each with the tick
// it is due at, in chunks it allocates as it grows (never moved or freed
// before the shard), and up to kFreeMax FREE records for its owner's next
// starts. The owner's start fills a record, publishes its word PENDING and
// places it in a free position of its cell instead of posting an Insert
// (writing the position into the record's side slot first:
// HandleTable::set_cell_slot); its stop, after the word's CAS made it
// CANCELLED, finds the position through the side slot and takes the entry
// back with one CAS, and keeps the record for its next start. Neither
// touches a line of another core. The shard's driver never needs the owner:
//   * its view of a cell's earliest due tick is min(driver_min, owner_min):
//     owner_min is lowered by the owner's places (a CAS-min), driver_min is
//     the driver's own result of its last scan; before it parks, the driver
//     reads owner_min of every claimed cell and sleeps no later than the
//     earliest (the owner, after placing, wakes a driver that sleeps past
//     its entry: the same fence pairing as an inbox post);
//   * when a cell's earliest tick is due, the driver scans it: it exchanges
//     owner_min for kNever first (entries placed after that lower it
//     again), takes (by CAS) every entry due within kTakeAheadNs and files
//     it into the wheel by its word's deadline, like an Insert, and keeps
//     the minimum of the rest as driver_min. Cost: a chunk (kChunkSlots
//     positions) is read only when its min_due is due, and min_due is
//     exact after each read (the rest's minimum) or lowered by a place; so
//     every read is paid for by an entry due by then that it takes (or
//     that its owner took back): at most kChunkSlots loads per timer,
//     amortized, and one sequential pass per 1,024 positions. Entries not
//     yet due stay in the cell however often their chunk is read -- that
//     is what keeps a stop of a long timer on its owner's core. (Taking
//     a sparse chunk's entries all at once was tried: at 100 K pending with
//     deadlines in [1 ms, 100 s] it moved the long timers into the wheel
//     and their stops to the driver: 665 ns of process CPU a pair, against
//     307 without it and 315-325 for 1.5.0 in the same rounds;
//     `scripts/bench.sh capi` with BENCH_BASE_BUILD_DIR, 2026-11-28.) A position it empties is
//     marked in its chunk's `emptied` bitmap, which the owner harvests
//     when it runs out of free positions;
//   * a Refile (a reset to an earlier deadline) of a record the driver finds
//     in no list of the wheel looks at the record's side slot: if that
//     position still holds the record's entry, the driver takes it (its
//     word's deadline is now earlier than the entry says);
//   * a Cancel of a record that a stop by another thread (not the owner)
//     ended takes its entry too, before the record is recycled.
// An entry is owned by whoever holds it: the owner, from its place until a
// successful take-back or the driver's CAS; the driver from its CAS. A full
// cell is not evicted: the owner's next starts post their Inserts as any
// other until positions free up (its stops, or the driver's takes, which
// it harvests). A start marks its record placed (Record::kInCell, beside
// the callable's kind) before it publishes it, so a stop tries a take-back
// only for a record that was placed; a stop whose take-back fails (the
// driver took the entry) posts a Cancel, as for a timer in the wheel.
//
// Only while it pays: a start places and a stop takes back only while the
// shard's wheel holds fewer than Shard::kCellMaxPending timers; beyond, the
// lines a take-back touches are cold, and the driver takes them better on
// its own core (a placed record's stop then posts its Cancel, which takes
// the entry on the driver's side).
//
// Frozen owners. An owner stopped at any instruction holds nothing the
// driver waits for: its entries are taken by CAS when due, its free records
// and positions are its own. What a frozen owner can delay is only its own
// call in progress (a start not yet placed: its id was never returned).
//
// Lifetime. A thread's claims are released when it exits (its free records
// go back to the shard's free stack; its entries and positions stay with the
// cell for the driver and the cell's next owner), under the cells' Control
// mutex, which the shard also takes once, when it is destroyed. Neither the
// driver nor a worker ever takes it. In a fork() child a parent's cells are
// never touched (the runtime is unusable there).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/timer_record.hpp"

namespace tickwheel::rt {

class HandleTable;

class CallerCells {
public:
    static constexpr unsigned kCells = 32;              // per shard: threads beyond this post to the inbox
    static constexpr std::uint32_t kChunkSlots = 1024;  // entries per chunk (16 KiB)
    static constexpr std::uint32_t kMaxChunks = 128;    // 131,072 timers per cell at most
    static constexpr unsigned kPosBits = 17;
    static_assert(kChunkSlots * kMaxChunks == (1u << kPosBits));
    static constexpr std::uint32_t kFreeMax = 64;  // FREE records kept per cell

    /// An entry: occupied bit, the record's 24-bit generation, its index.
    static constexpr std::uint64_t kOccupied = std::uint64_t{1} << 63;
    static constexpr std::uint64_t entry(std::uint32_t index, std::uint32_t gen) noexcept {
        return kOccupied | (std::uint64_t{gen & 0xFFFFFFu} << 32) | index;
    }
    static constexpr std::uint32_t index_of(std::uint64_t e) noexcept { return static_cast<std::uint32_t>(e); }
    static constexpr std::uint32_t gen_of(std::uint64_t e) noexcept {
        return static_cast<std::uint32_t>(e >> 32) & 0xFFFFFFu;
    }
    /// A record's side slot (HandleTable::cell_slot): its cell and position.
    static constexpr std::uint32_t slot_code(unsigned cell, std::uint32_t pos) noexcept {
        return ((cell + 1) << kPosBits) | pos;
    }
    static constexpr unsigned code_cell(std::uint32_t code) noexcept { return (code >> kPosBits) - 1; }
    static constexpr std::uint32_t code_pos(std::uint32_t code) noexcept { return code & ((1u << kPosBits) - 1); }

    struct Slot {
        std::atomic<std::uint64_t> e{0};  // 0 = empty, else entry()
        std::atomic<tick_t> due{0};       // written before e (release)
    };
    struct Chunk {
        // <= every due tick in the chunk: lowered by the owner's places (a
        // CAS-min), taken (exchange) and put back by the driver's scan, so
        // that a scan skips the chunks with nothing due.
        alignas(64) std::atomic<tick_t> min_due{~tick_t{0}};
        std::atomic<std::uint64_t> emptied[kChunkSlots / 64] = {};  // positions the driver took, not yet harvested
        Slot slot[kChunkSlots];
    };

    struct alignas(64) Cell {
        // Shared: the driver reads these at every park and scan.
        std::atomic<tick_t> owner_min{~tick_t{0}};  // <= every entry placed since the driver's last scan began
        std::atomic<std::uint32_t> chunks{0};       // chunk[0 .. chunks) exist (release)
        std::atomic<std::uint32_t> claimed{0};      // 1 while a thread owns the cell
        std::atomic<std::uint64_t> placed{0}, removed{0};  // the owner's counts (single writer)
        std::atomic<std::uint64_t> taken{0};               // the driver's count (single writer)
        std::atomic<std::uint64_t> emptied_n{0};           // positions the driver marked in `emptied` (single writer)
        std::atomic<Chunk*> chunk[kMaxChunks] = {};
        unsigned id = 0;
        // The driver's alone.
        tick_t driver_min = ~tick_t{0};  // the earliest due among the entries its last scan left
        // The owner's alone (handed from one owner to the next by `claimed`).
        std::vector<std::uint32_t> free_pos;  // positions known empty
        std::uint64_t harvested = 0;          // emptied_n when the owner last harvested
        std::uint32_t free_top = 0;           // top index + 1 of the FREE records kept (linked as on the free stack)
        std::uint32_t free_n = 0;
    };

    /// The lock a thread's exit and the shard's destruction take, and
    /// whether the cells still exist. Shared by the cells and every thread
    /// holding a claim.
    struct Control {
        std::mutex mu;
        bool alive = true;
    };

    explicit CallerCells(HandleTable& table);
    ~CallerCells();
    CallerCells(const CallerCells&) = delete;
    CallerCells& operator=(const CallerCells&) = delete;

    /// The calling thread's cell, claimed on first use if `claim` (a
    /// start), or nullptr: none yet (a stop), or all kCells are owned by
    /// other threads (the caller then posts to the inbox). `runtime_uid`
    /// names the runtime for the thread's cache. Any caller.
    Cell* mine(std::uint64_t runtime_uid, std::uint32_t shard, bool claim) noexcept;

    // ---- the owner ----
    /// A free position of `c` for the next start (the owner, before it
    /// publishes the record): a known one, one the driver emptied, or a new
    /// chunk's; kNoPosition if the cell is full (or no memory): the start
    /// then posts its Insert as any other (a full cell is not evicted: the
    /// timers it holds stay until due or stopped).
    static constexpr std::uint32_t kNoPosition = UINT32_MAX;
    std::uint32_t reserve(Cell& c) noexcept { return free_position(c); }
    /// Gives back a reserved position that was not used.
    static void unreserve(Cell& c, std::uint32_t pos) noexcept { c.free_pos.push_back(pos); }
    /// Places a published PENDING record at reserved position `pos` of `c`,
    /// due at `due`. False: no memory for the record's side slot (the
    /// position is given back; the caller posts the Insert itself).
    bool place(Cell& c, std::uint32_t pos, std::uint32_t index, std::uint32_t gen, tick_t due) noexcept;
    /// Takes the entry of (index, gen) back if `c` still holds it. True: the
    /// record was never seen by the driver (it is in no wheel); the caller
    /// owns its recycling.
    bool take_back(Cell& c, std::uint32_t index, std::uint32_t gen) noexcept;
    /// Pops a FREE record kept in `c` (as HandleTable::allocate), or nullptr.
    Record* allocate(Cell& c, std::uint32_t& index, std::uint32_t& gen) noexcept;
    /// Keeps the FREE records of a chain (top .. bottom, linked as on the
    /// free stack; FreeChain) in `c` if there is room for all; false
    /// otherwise (nothing taken).
    bool keep(Cell& c, std::uint32_t top, std::uint32_t bottom, std::uint32_t bottom_gen, std::uint32_t count) noexcept;

    // ---- the shard's driver ----
    /// Cells ever claimed: the driver looks at [0, high_water()).
    unsigned high_water() const noexcept { return hw_.load(std::memory_order_acquire); }
    Cell& cell(unsigned i) noexcept { return cells_[i]; }
    const Cell& cell(unsigned i) const noexcept { return cells_[i]; }
    /// The earliest tick any entry of `c` may be due at (the driver).
    static tick_t earliest(const Cell& c) noexcept {
        const tick_t o = c.owner_min.load(std::memory_order_acquire);
        return o < c.driver_min ? o : c.driver_min;
    }
    /// Scans `c` (the driver, when earliest(c) is due): takes every entry due
    /// by `horizon` and calls take(entry) for each, leaving driver_min the
    /// earliest due tick of the rest.
    template <class Take>
    void scan(Cell& c, tick_t horizon, Take&& take) noexcept;
    /// Takes the entry at `code` if it still holds `e` (the driver: a Refile
    /// or a Cancel of that record). True if taken.
    bool take_at(std::uint32_t code, std::uint64_t e) noexcept;
    /// The due tick of the entry at `code` (valid while it holds the entry).
    tick_t due_at(std::uint32_t code) const noexcept;
    /// Timers waiting in the cells now (recent counts). Any thread.
    std::size_t waiting() const noexcept;

    /// Releases a claim (a thread's exit). Under the control's lock, only
    /// while the cells are alive.
    void release(Cell& c) noexcept;
    const std::shared_ptr<Control>& control() const noexcept { return control_; }
    HandleTable& table() noexcept { return table_; }

private:
    /// A free position of `c` (the owner): a known one, a harvested one, a
    /// new chunk's, or none (full, or no memory): UINT32_MAX.
    std::uint32_t free_position(Cell& c) noexcept;
    static Slot& slot(const Cell& c, std::uint32_t pos) noexcept {
        return c.chunk[pos / kChunkSlots].load(std::memory_order_acquire)->slot[pos % kChunkSlots];
    }
    static void mark_emptied(Cell& c, std::uint32_t pos) noexcept {
        Chunk* ch = c.chunk[pos / kChunkSlots].load(std::memory_order_relaxed);
        const std::uint32_t p = pos % kChunkSlots;
        ch->emptied[p / 64].fetch_or(std::uint64_t{1} << (p % 64), std::memory_order_release);
        c.emptied_n.store(c.emptied_n.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }
    bool set_side(std::uint32_t index, std::uint32_t code) noexcept;
    /// m = min(m, due) (a CAS-min; release: after the entry it covers).
    static void lower(std::atomic<tick_t>& m, tick_t due) noexcept {
        tick_t v = m.load(std::memory_order_relaxed);
        while (due < v && !m.compare_exchange_weak(v, due, std::memory_order_release, std::memory_order_relaxed)) {
        }
    }

    HandleTable& table_;
    std::shared_ptr<Control> control_;
    std::atomic<unsigned> hw_{0};
    Cell cells_[kCells];
};

// ---- inline: the owner's place and the driver's scan ---------------------------
inline bool CallerCells::place(Cell& c, std::uint32_t pos, std::uint32_t index, std::uint32_t gen,
                               tick_t due) noexcept {
    if (!set_side(index, slot_code(c.id, pos))) {
        unreserve(c, pos);  // (its capacity is reserved: cannot throw)
        return false;
    }
    Slot& s = slot(c, pos);
    s.due.store(due, std::memory_order_relaxed);
    s.e.store(entry(index, gen), std::memory_order_release);
    c.placed.store(c.placed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    lower(c.chunk[pos / kChunkSlots].load(std::memory_order_relaxed)->min_due, due);
    lower(c.owner_min, due);
    return true;
}

template <class Take>
void CallerCells::scan(Cell& c, tick_t horizon, Take&& take) noexcept {
    // Entries placed from here on lower owner_min again; those placed before
    // are seen below (placed, then owner_min's RMW, then our exchange). The
    // same, per chunk, for the chunk's min_due: a chunk with nothing due by
    // `horizon` is not read.
    (void)c.owner_min.exchange(~tick_t{0}, std::memory_order_acq_rel);
    tick_t rest = ~tick_t{0};
    const std::uint32_t n = c.chunks.load(std::memory_order_acquire);
    std::uint64_t taken = 0;
    for (std::uint32_t k = 0; k < n; ++k) {
        Chunk* ch = c.chunk[k].load(std::memory_order_acquire);
        const tick_t cm = ch->min_due.load(std::memory_order_acquire);
        if (cm > horizon) {
            if (cm < rest) rest = cm;
            continue;
        }
        (void)ch->min_due.exchange(~tick_t{0}, std::memory_order_acq_rel);
        tick_t chunk_rest = ~tick_t{0};
        for (std::uint32_t i = 0; i < kChunkSlots; ++i) {
            Slot& s = ch->slot[i];
            std::uint64_t e = s.e.load(std::memory_order_acquire);
            if (e == 0) continue;
            const tick_t d = s.due.load(std::memory_order_relaxed);
            if (d > horizon) {
                if (d < chunk_rest) chunk_rest = d;
                continue;
            }
            if (!s.e.compare_exchange_strong(e, 0, std::memory_order_acq_rel, std::memory_order_relaxed)) continue;
            ch->emptied[i / 64].fetch_or(std::uint64_t{1} << (i % 64), std::memory_order_release);
            ++taken;
            take(e);
        }
        lower(ch->min_due, chunk_rest);  // (with what the owner placed meanwhile)
        if (chunk_rest < rest) rest = chunk_rest;
    }
    c.driver_min = rest;
    if (taken != 0) {
        c.taken.store(c.taken.load(std::memory_order_relaxed) + taken, std::memory_order_relaxed);
        c.emptied_n.store(c.emptied_n.load(std::memory_order_relaxed) + taken, std::memory_order_release);
    }
}

}  // namespace tickwheel::rt
