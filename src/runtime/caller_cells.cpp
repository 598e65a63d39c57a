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

CallerCells::CallerCells(HandleTable& table) : table_(table), control_(std::make_shared<Control>()) {}

CallerCells::~CallerCells() {
    std::lock_guard<std::mutex> lock(control_->mu);
    control_->alive = false;  // a thread exiting later leaves these cells alone
}

CallerCells::Cell* CallerCells::mine(std::uint64_t runtime_uid, std::uint32_t shard, bool claim) noexcept {
    const Last last = t_last;
    if (last.runtime_uid == runtime_uid && last.shard == shard) [[likely]] {
        if (last.cell != nullptr) return last.cell;
        if (!claim || ++t_no_cell_skips % kRetryEvery != 0) return nullptr;
    }
    // Slow path: this thread's claim in this shard, or a new one.
    std::vector<Claim>& list = t_claims.list;
    for (Claim& c : list) {
        if (c.runtime_uid != runtime_uid || c.shard != shard) continue;
        if (c.cell == nullptr && claim) {
            // Looked again after kRetryEvery starts without a cell.
            for (unsigned i = 0; i < kCells && c.cell == nullptr; ++i) {
                std::uint32_t free = 0;
                if (cells_[i].claimed.load(std::memory_order_relaxed) == 0 &&
                    cells_[i].claimed.compare_exchange_strong(free, 1, std::memory_order_acq_rel)) {
                    c.cell = &cells_[i];
                    unsigned hw = hw_.load(std::memory_order_relaxed);
                    while (hw < i + 1 && !hw_.compare_exchange_weak(hw, i + 1, std::memory_order_release)) {
                    }
                }
            }
        }
        t_last = Last{runtime_uid, shard, c.cell};
        return c.cell;
    }
    if (!claim) return nullptr;
    prune(list);
    Cell* got = nullptr;
    for (unsigned i = 0; i < kCells && got == nullptr; ++i) {
        std::uint32_t free = 0;
        if (cells_[i].claimed.load(std::memory_order_relaxed) == 0 &&
            cells_[i].claimed.compare_exchange_strong(free, 1, std::memory_order_acq_rel)) {
            got = &cells_[i];
            unsigned hw = hw_.load(std::memory_order_relaxed);
            while (hw < i + 1 && !hw_.compare_exchange_weak(hw, i + 1, std::memory_order_release)) {
            }
        }
    }
    try {
        list.push_back(Claim{runtime_uid, shard, this, got, control_, fork_epoch()});
    } catch (...) {
        if (got != nullptr) got->claimed.store(0, std::memory_order_release);  // no memory to remember it
        return nullptr;
    }
    t_last = Last{runtime_uid, shard, got};
    return got;
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
    c.next_evict = 0;
    // Entries still placed stay: the driver takes them when due, or the
    // cell's next owner evicts them (an Insert each).
    c.claimed.store(0, std::memory_order_release);
}

}  // namespace tickwheel::rt
