// SPDX-License-Identifier: MIT OR Apache-2.0
// CallerCells (caller_cells.hpp): claiming a cell, its free records, and
// giving a thread's claims back when it exits.
#include "runtime/caller_cells.hpp"

#include <new>
#include <vector>

#include "runtime/fork.hpp"
#include "runtime/handle_table.hpp"
#include "runtime/test_hooks.hpp"

namespace tickwheel::rt {

namespace {

/// One claim of this thread.
struct Claim {
    std::uint64_t runtime_uid;
    std::uint32_t shard;
    CallerCells* cells;
    CallerCells::Cell* cell;  // nullptr: every cell was taken (do not look again for a while)
    std::shared_ptr<CallerCells::Control> control;
    std::uint32_t fork_epoch;
};

/// This thread's claims, given back at its exit (only the slow path and the
/// exit touch it: the fast path reads t_last).
struct Claims {
    std::vector<Claim> list;
    ~Claims() {
        for (Claim& c : list) {
            if (c.cell == nullptr || c.fork_epoch != fork_epoch()) continue;  // (a fork child: the parent's)
            std::lock_guard<std::mutex> lock(c.control->mu);
            if (c.control->alive) c.cells->release(*c.cell);
        }
    }
};
thread_local Claims t_claims;

/// Forgets the claims of runtimes that are gone (a thread that used many).
void prune(std::vector<Claim>& list) noexcept {
    if (list.size() < 8) return;
    std::size_t keep = 0;
    for (std::size_t i = 0; i < list.size(); ++i) {
        bool alive;
        {
            std::lock_guard<std::mutex> lock(list[i].control->mu);
            alive = list[i].control->alive;
        }
        if (alive) list[keep++] = std::move(list[i]);
    }
    list.resize(keep, Claim{0, 0, nullptr, nullptr, nullptr, 0});
}

/// The last claim looked up (plain loads on the fast path).
struct Last {
    std::uint64_t runtime_uid;
    std::uint32_t shard;
    CallerCells::Cell* cell;
};
[[gnu::tls_model("initial-exec")]] constinit thread_local Last t_last{0, 0, nullptr};
/// A thread that found no free cell looks again only every kRetryEvery starts.
constexpr std::uint32_t kRetryEvery = 1024;
[[gnu::tls_model("initial-exec")]] constinit thread_local std::uint32_t t_no_cell_skips = 0;

}  // namespace

CallerCells::CallerCells(HandleTable& table) : table_(table), control_(std::make_shared<Control>()) {
    for (unsigned i = 0; i < kCells; ++i) cells_[i].id = i;
}

CallerCells::~CallerCells() {
    {
        std::lock_guard<std::mutex> lock(control_->mu);
        control_->alive = false;  // a thread exiting later leaves these cells alone
    }
    for (Cell& c : cells_)
        for (auto& ch : c.chunk) delete ch.load(std::memory_order_relaxed);
}

CallerCells::Cell* CallerCells::mine(std::uint64_t runtime_uid, std::uint32_t shard, bool claim) noexcept {
    const Last last = t_last;
    if (last.runtime_uid == runtime_uid && last.shard == shard) [[likely]] {
        if (last.cell != nullptr) return last.cell;
        if (!claim || ++t_no_cell_skips % kRetryEvery != 0) return nullptr;
    }
    // Slow path: this thread's claim in this shard, or a new one.
    const auto try_claim = [this]() -> Cell* {
        for (unsigned i = 0; i < kCells; ++i) {
            std::uint32_t free = 0;
            if (cells_[i].claimed.load(std::memory_order_relaxed) == 0 &&
                cells_[i].claimed.compare_exchange_strong(free, 1, std::memory_order_acq_rel)) {
                unsigned hw = hw_.load(std::memory_order_relaxed);
                while (hw < i + 1 && !hw_.compare_exchange_weak(hw, i + 1, std::memory_order_release)) {
                }
                return &cells_[i];
            }
        }
        return nullptr;
    };
    std::vector<Claim>& list = t_claims.list;
    for (Claim& c : list) {
        if (c.runtime_uid != runtime_uid || c.shard != shard) continue;
        if (c.cell == nullptr && claim) c.cell = try_claim();  // (looked again after kRetryEvery starts without one)
        t_last = Last{runtime_uid, shard, c.cell};
        return c.cell;
    }
    if (!claim) return nullptr;
    prune(list);
    Cell* got = try_claim();
    try {
        list.push_back(Claim{runtime_uid, shard, this, got, control_, fork_epoch()});
    } catch (...) {
        if (got != nullptr) got->claimed.store(0, std::memory_order_release);  // no memory to remember it
        return nullptr;
    }
    t_last = Last{runtime_uid, shard, got};
    return got;
}

bool CallerCells::set_side(std::uint32_t index, std::uint32_t code) noexcept { return table_.set_cell_slot(index, code); }

std::uint32_t CallerCells::free_position(Cell& c) noexcept {
    if (!c.free_pos.empty()) {
        const std::uint32_t p = c.free_pos.back();
        c.free_pos.pop_back();
        return p;
    }
    // The positions the driver emptied since the last harvest (only when it
    // says it emptied some: a full cell's starts would otherwise scan every
    // chunk's bitmap each time).
    const std::uint32_t n = c.chunks.load(std::memory_order_relaxed);
    const std::uint64_t emptied = c.emptied_n.load(std::memory_order_acquire);
    const bool harvest = emptied != c.harvested;
    c.harvested = emptied;
    for (std::uint32_t k = 0; harvest && k < n; ++k) {
        Chunk* ch = c.chunk[k].load(std::memory_order_relaxed);
        for (std::uint32_t w = 0; w < kChunkSlots / 64; ++w) {
            if (ch->emptied[w].load(std::memory_order_relaxed) == 0) continue;
            std::uint64_t bits = ch->emptied[w].exchange(0, std::memory_order_acquire);
            while (bits != 0) {
                const unsigned b = static_cast<unsigned>(__builtin_ctzll(bits));
                bits &= bits - 1;
                c.free_pos.push_back(k * kChunkSlots + w * 64 + b);  // (capacity reserved: cannot throw)
            }
        }
    }
    if (c.free_pos.empty() && n < kMaxChunks) {
        // A new chunk (never moved or freed before the shard: the driver
        // reads it without a lock), its positions free.
        try {
            c.free_pos.reserve(static_cast<std::size_t>(n + 1) * kChunkSlots);
        } catch (...) {
            return UINT32_MAX;
        }
        Chunk* ch = new (std::nothrow) Chunk;
        if (ch == nullptr) return UINT32_MAX;
        c.chunk[n].store(ch, std::memory_order_release);
        c.chunks.store(n + 1, std::memory_order_release);
        for (std::uint32_t i = kChunkSlots; i-- > 0;) c.free_pos.push_back(n * kChunkSlots + i);
    }
    if (c.free_pos.empty()) return UINT32_MAX;
    const std::uint32_t p = c.free_pos.back();
    c.free_pos.pop_back();
    return p;
}

bool CallerCells::take_back(Cell& c, std::uint32_t index, std::uint32_t gen) noexcept {
    const std::uint32_t code = table_.cell_slot(index);
    if (code == 0 || code_cell(code) != c.id) return false;
    const std::uint32_t pos = code_pos(code);
    if (pos >= c.chunks.load(std::memory_order_relaxed) * kChunkSlots) return false;
    std::uint64_t e = entry(index, gen);
    if (!slot(c, pos).e.compare_exchange_strong(e, 0, std::memory_order_acq_rel, std::memory_order_relaxed))
        return false;  // the driver took it, or it was evicted
    c.free_pos.push_back(pos);
    c.removed.store(c.removed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return true;
}

bool CallerCells::take_at(std::uint32_t code, std::uint64_t e) noexcept {
    if (code == 0) return false;
    const unsigned ci = code_cell(code);
    if (ci >= high_water()) return false;
    Cell& c = cells_[ci];
    const std::uint32_t pos = code_pos(code);
    if (pos >= c.chunks.load(std::memory_order_acquire) * kChunkSlots) return false;
    if (!slot(c, pos).e.compare_exchange_strong(e, 0, std::memory_order_acq_rel, std::memory_order_relaxed))
        return false;
    mark_emptied(c, pos);
    c.taken.store(c.taken.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return true;
}

tick_t CallerCells::due_at(std::uint32_t code) const noexcept {
    const Cell& c = cells_[code_cell(code)];
    return slot(c, code_pos(code)).due.load(std::memory_order_relaxed);
}

std::size_t CallerCells::waiting() const noexcept {
    std::size_t n = 0;
    const unsigned hw = high_water();
    for (unsigned i = 0; i < hw; ++i) {
        const Cell& c = cells_[i];
        const std::uint64_t in = c.placed.load(std::memory_order_relaxed);
        const std::uint64_t out = c.removed.load(std::memory_order_relaxed) + c.taken.load(std::memory_order_relaxed);
        if (in > out) n += static_cast<std::size_t>(in - out);
    }
    return n;
}

Record* CallerCells::allocate(Cell& c, std::uint32_t& index, std::uint32_t& gen) noexcept {
    if (c.free_top == 0) return nullptr;
    index = c.free_top - 1;
    Record& r = table_.at(index);
    c.free_top = TimerState::free_link(TimerState::load(r));
    --c.free_n;
    gen = r.gen();
    return &r;
}

bool CallerCells::keep(Cell& c, std::uint32_t top, std::uint32_t bottom, std::uint32_t bottom_gen,
                       std::uint32_t count) noexcept {
    if (c.free_n + count > kFreeMax) return false;
    TimerState::mark_free(table_.at(bottom), bottom_gen, c.free_top);
    c.free_top = top + 1;
    c.free_n += count;
    if (auto* f = test_hooks::freed.load(std::memory_order_relaxed)) f(top, count);
    return true;
}

void CallerCells::release(Cell& c) noexcept {
    {
        FreeChain chain(table_);
        std::uint32_t index, gen;
        while (allocate(c, index, gen) != nullptr) chain.add(index, gen);
        chain.flush(false);  // (counted free when the cell kept them)
    }
    // Entries and positions stay with the cell: the driver takes the
    // entries when due, or the cell's next owner evicts them (an Insert
    // each) or lets them be.
    c.claimed.store(0, std::memory_order_release);
}

}  // namespace tickwheel::rt
