// SPDX-License-Identifier: MIT OR Apache-2.0
// The inbox's boxes: a queue with an arena of its own, retired after a big
// backlog and freed whole (inbox.hpp, "Memory after a peak"; issue 34).
#include "runtime/inbox.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>

namespace tickwheel::rt {

// ---- the arena ---------------------------------------------------------------------
struct InboxArena::Region {
    Region* prev;
    std::size_t size;               // bytes mapped, this header included
    std::atomic<std::size_t> used;  // bytes handed out (may run past size: then full)
};

namespace {
constexpr std::size_t kRegionBytes = std::size_t{1} << 20;  // 1 MiB: ~100,000 messages of backlog
constexpr std::size_t kHeader = (sizeof(std::max_align_t) + 15) & ~std::size_t{15};
constexpr std::size_t round16(std::size_t n) noexcept { return (n + 15) & ~std::size_t{15}; }
}  // namespace

InboxArena::~InboxArena() {
    for (Region* r = current_.load(std::memory_order_relaxed); r != nullptr;) {
        Region* prev = r->prev;
        munmap(r, r->size);
        r = prev;
    }
}

void* InboxArena::allocate(std::size_t size) noexcept {
    size = round16(size);
    const std::size_t start = round16(sizeof(Region));
    for (;;) {
        Region* r = current_.load(std::memory_order_acquire);
        if (r != nullptr) {
            const std::size_t at = r->used.fetch_add(size, std::memory_order_relaxed);
            if (at + size <= r->size) return reinterpret_cast<char*>(r) + at;
        }
        // A new region: at least kRegionBytes, or the request (a big block index).
        const std::size_t bytes = std::max(kRegionBytes, start + size);
        void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return nullptr;
        auto* fresh = ::new (m) Region{r, bytes, {start + size}};
        if (current_.compare_exchange_strong(r, fresh, std::memory_order_acq_rel, std::memory_order_acquire)) {
            mapped_.fetch_add(bytes, std::memory_order_relaxed);
            return reinterpret_cast<char*>(fresh) + start;
        }
        munmap(m, bytes);  // another thread installed one first: take from it
    }
}

// ---- moodycamel's hooks ---------------------------------------------------------------
constinit thread_local InboxArena* InboxTraits::t_arena = nullptr;

namespace {
// The prefix before every block: where it came from.
constexpr std::uint64_t kFromArena = 0x61726e61;  // "arna"
constexpr std::uint64_t kFromHeap = 0x68656170;   // "heap"
}  // namespace

void* InboxTraits::malloc(std::size_t size) {
    InboxArena* a = t_arena;
    if (a == nullptr) {
        // A post: its slot names the box it posts to by its arena's address
        // (Inbox::Posting).
        if (HazardSlot* slot = hazard_detail::t_slot)
            a = static_cast<InboxArena*>(const_cast<void*>(slot->inbox.load(std::memory_order_relaxed)));
    }
    if (a != nullptr) {
        auto* p = static_cast<char*>(a->allocate(size + kHeader));
        if (p == nullptr) return nullptr;
        *reinterpret_cast<std::uint64_t*>(p) = kFromArena;
        return p + kHeader;
    }
    auto* p = static_cast<char*>(std::malloc(size + kHeader));  // (no box in scope: never, in practice)
    if (p == nullptr) return nullptr;
    *reinterpret_cast<std::uint64_t*>(p) = kFromHeap;
    return p + kHeader;
}

void InboxTraits::free(void* p) {
    if (p == nullptr) return;
    char* start = static_cast<char*>(p) - kHeader;
    if (*reinterpret_cast<std::uint64_t*>(start) == kFromHeap) std::free(start);
    // (From an arena: freed with it.)
}

// ---- boxes ---------------------------------------------------------------------------------
Inbox::Box* Inbox::make_box() noexcept {
    auto* b = new (std::nothrow) Box;
    if (b == nullptr) return nullptr;
    try {
        InboxTraits::Scope in(&b->arena);  // the queue's first blocks, in its arena
        b->q.emplace(6 * InboxTraits::BLOCK_SIZE);
    } catch (...) {
        delete b;
        return nullptr;
    }
    return b;
}

void Inbox::free_box(Box* b) noexcept {
    if (b == nullptr) return;
    {
        InboxTraits::Scope in(&b->arena);  // (its frees: into the arena, i.e. nothing)
        b->q.reset();
    }
    delete b;  // the arena's regions go back to the kernel
}

Inbox::Inbox() : current_(make_box()) {
    if (current_.load(std::memory_order_relaxed) == nullptr) throw std::bad_alloc();
}

Inbox::~Inbox() {
    free_box(current_.load(std::memory_order_relaxed));
    free_box(old_);
}

void Inbox::free_old() noexcept {
    Box* done = old_;
    old_ = nullptr;
    old_quiet_ = false;
    old_published_.store(nullptr, std::memory_order_release);
    free_box(done);
    retired_.fetch_add(1, std::memory_order_relaxed);
}

void Inbox::Posting::enter_unguarded() noexcept {
    hazard_detail::g_unguarded.fetch_add(1, std::memory_order_relaxed);
}

void Inbox::Posting::leave_unguarded() noexcept {
    InboxTraits::t_arena = saved_arena_;
    hazard_detail::g_unguarded.fetch_sub(1, std::memory_order_release);
}

std::size_t Inbox::size_approx() const noexcept {
    const Posting in(*this, /*reader=*/true);
    std::size_t n = in.box().queue().size_approx();
    if (const Box* o = old_published_.load(std::memory_order_acquire)) n += o->queue().size_approx();
    return n + reserve_n_.load(std::memory_order_relaxed);
}

bool Inbox::housekeep(std::size_t drained) noexcept {
    if (old_ != nullptr) {
        // Once no poster or reader can be inside the retired box (one heavy
        // fence per look, only while one is pending), the drain empties it
        // and frees it.
        if (!old_quiet_) {
            heavy_fence();
            old_quiet_ = !inbox_held(this, &old_->arena);  // (a poster names a box by its arena)
        }
        return true;
    }
    if (drained >= kRetireAfter) big_pass_ = true;
    if (!big_pass_ || drained != 0) return big_pass_;
    // Quiet after a big backlog: new posts go to a new box.
    Box* fresh = make_box();
    if (fresh == nullptr) return true;  // no memory: later
    big_pass_ = false;
    old_ = current_.exchange(fresh, std::memory_order_acq_rel);
    old_published_.store(old_, std::memory_order_release);
    return true;
}

}  // namespace tickwheel::rt
