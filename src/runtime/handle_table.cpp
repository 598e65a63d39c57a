// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/handle_table.hpp"

#include <sys/mman.h>

#include <ctime>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <type_traits>

#include "runtime/hazard.hpp"
#include "runtime/test_hooks.hpp"

namespace tickwheel::rt {

HandleTable::HandleTable() : chunks_(new std::atomic<Record*>[kMaxChunks]()) {}

HandleTable::~HandleTable() {
    for (std::uint32_t c = 0; c < kMaxChunks; ++c) free_chunk(chunks_[c].load(std::memory_order_relaxed));
    std::free(mirror_.load(std::memory_order_relaxed));
}

namespace {
// A chunk's side array of T (Extra, period words): one anonymous mapping per
// records chunk, made on first use. Zeroed memory is a valid array of T
// (atomics of integers, all 0); its pages stay unresident until touched, and
// its page alignment puts each 64-byte Extra on a line of its own.
template <class T>
constexpr std::size_t side_bytes() noexcept {
    static_assert(std::is_trivially_destructible_v<T>);
    return sizeof(T) * HandleTable::kChunkSize;
}

template <class T>
T* side_array(std::atomic<T*>& published) noexcept {
    T* arr = published.load(std::memory_order_acquire);
    if (arr != nullptr) return arr;
    void* m = mmap(nullptr, side_bytes<T>(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    auto* fresh = static_cast<T*>(m);
    if (published.compare_exchange_strong(arr, fresh, std::memory_order_acq_rel, std::memory_order_acquire))
        return fresh;
    munmap(m, side_bytes<T>());  // another thread published this chunk's first
    return arr;
}

template <class T>
void free_side_array(std::atomic<T*>& published) noexcept {
    if (T* arr = published.load(std::memory_order_relaxed)) munmap(arr, side_bytes<T>());
}
}  // namespace

Extra* HandleTable::make_extra(std::uint32_t index) noexcept {
    Record& r = at(index);
    auto& head = *const_cast<ChunkHeader*>(header_of(&r));
    Extra* arr = side_array(head.extras);
    return arr == nullptr ? nullptr : arr + (&r - first_of(&head));
}

bool HandleTable::set_period_word(std::uint32_t index, std::uint64_t word) noexcept {
    Record& r = at(index);
    auto& head = *const_cast<ChunkHeader*>(header_of(&r));
    std::atomic<std::uint64_t>* arr = side_array(head.period_words);
    if (arr == nullptr) return false;
    arr[&r - first_of(&head)].store(word, std::memory_order_relaxed);
    return true;
}

bool HandleTable::set_cell_slot(std::uint32_t index, std::uint32_t code) noexcept {
    Record& r = at(index);
    auto& head = *const_cast<ChunkHeader*>(header_of(&r));
    std::atomic<std::uint32_t>* arr = side_array(head.cell_slots);
    if (arr == nullptr) return false;
    arr[&r - first_of(&head)].store(code, std::memory_order_relaxed);
    return true;
}

void HandleTable::free_chunk(Record* first) noexcept {
    if (first == nullptr) return;
    static_assert(std::is_trivially_destructible_v<Record>, "a chunk's records need no destructor");
    auto* head = reinterpret_cast<ChunkHeader*>(first) - 1;
    free_side_array(head->extras);
    free_side_array(head->period_words);
    free_side_array(head->cell_slots);
    head->~ChunkHeader();
    std::free(head);
}

Record* HandleTable::make_chunk(std::uint32_t c) noexcept {
    Record* chunk = chunks_[c].load(std::memory_order_acquire);
    if (chunk != nullptr) return chunk;
    void* block = std::aligned_alloc(kChunkAlign, kChunkAlign);
    if (block == nullptr) return nullptr;
    // One 2 MiB chunk = one huge page where THP is in "madvise" mode (Debian's
    // default): a random record access then costs no TLB walk of 4 KiB pages.
    madvise(block, kChunkAlign, MADV_HUGEPAGE);
    auto* head = ::new (block) ChunkHeader{c};
    auto* fresh = reinterpret_cast<Record*>(head + 1);
    for (std::uint32_t i = 0; i < kChunkSize; ++i) ::new (static_cast<void*>(fresh + i)) Record();
    if (chunks_[c].compare_exchange_strong(chunk, fresh, std::memory_order_acq_rel, std::memory_order_acquire))
        return fresh;
    free_chunk(fresh);  // another thread published this chunk first
    return chunk;
}

void HandleTable::release_chain(std::uint32_t top, std::uint32_t bottom, std::uint32_t bottom_gen,
                                std::uint32_t count, bool notify) noexcept {
    Record& last = at(bottom);
    std::uint64_t head = free_head_.load(std::memory_order_relaxed);
    std::uint64_t next;
    do {
        // The bottom record links to the current top; nobody can reach the
        // chain before the CAS publishes it, so this store races with no pop.
        TimerState::mark_free(last, bottom_gen, static_cast<std::uint32_t>(head));
        next = ((head >> 32) + 1) << 32 | (std::uint64_t{top} + 1);
    } while (!free_head_.compare_exchange_weak(head, next, std::memory_order_release, std::memory_order_relaxed));
    if (!notify) return;
    if (auto* f = test_hooks::freed.load(std::memory_order_relaxed)) f(top, count);
}

Record* HandleTable::allocate(std::uint32_t& index, std::uint32_t& gen) noexcept {
    std::uint64_t head = free_head_.load(std::memory_order_acquire);
    while ((head & 0xFFFFFFFFu) != 0) {
        const auto top = static_cast<std::uint32_t>(head) - 1;
        // The link may be stale if `top` was popped meanwhile; then the tag
        // has moved on and the CAS fails.
        const std::uint64_t link = TimerState::free_link(TimerState::load(at(top)));
        const std::uint64_t next = ((head >> 32) + 1) << 32 | (link & 0xFFFFFFFFu);
        if (free_head_.compare_exchange_weak(head, next, std::memory_order_acquire, std::memory_order_acquire)) {
            index = top;
            Record& r = at(top);
            gen = r.gen();
            // The next start pops the record below, most likely: a record the
            // shard (or a worker) freed, whose line is in that core's cache,
            // modified. Fetched now, for writing, it arrives while this start
            // and what the caller does next go on, instead of stalling the
            // next allocate() on its link (a cross-core transfer; measured:
            // most of allocate()'s time). Only a hint: if another thread pops
            // it first, the fetch is wasted; the index was allocated (it was
            // on the stack), so its chunk exists.
            if (const std::uint32_t below = static_cast<std::uint32_t>(link); below != 0) prefetch(&at(below - 1));
            return &r;
        }
    }
    const std::uint64_t fresh = next_fresh_.fetch_add(1, std::memory_order_relaxed);
    if (fresh >= kCapacity) {
        next_fresh_.store(kCapacity, std::memory_order_relaxed);  // keep it from wrapping
        return nullptr;
    }
    index = static_cast<std::uint32_t>(fresh);
    Record* r = init_fresh(index);
    if (r != nullptr) gen = r->gen();
    return r;
}

Record* HandleTable::init_fresh(std::uint32_t index) noexcept {
    if (make_chunk(index / kChunkSize) == nullptr) {
        // No memory for the chunk: this index can never be used; that is fine.
        return nullptr;
    }
    Record& r = at(index);
    std::uint32_t first = test_hooks::first_generation.load(std::memory_order_relaxed);
    if (first == 0 || first > Id::kMaxGen) first = 1;
    r.set_gen(first);
    return &r;
}

void HandleTable::mirror_push(const std::uint32_t* bottom_first, std::uint32_t n) noexcept {
    std::atomic<std::uint32_t>* const mirror = mirror_.load(std::memory_order_acquire);
    if (mirror == nullptr) return;
    // Concurrent pushers (the shard, workers) reserve disjoint ranges.
    const std::uint32_t at = mirror_top_.fetch_add(n, std::memory_order_relaxed);
    for (std::uint32_t i = 0; i < n; ++i)
        mirror[(at + i) % kMirror].store(bottom_first[i], std::memory_order_relaxed);
}

std::size_t HandleTable::allocate_n(std::size_t n, Record** recs, std::uint32_t* index, std::uint32_t* gen) noexcept {
    // The walk below is a chain of dependent loads (each record holds the
    // next one's index), each a cache miss -- the records were last written
    // by the thread that freed them, or freed long ago. Find the top in the
    // mirror (at its end, or below it after single pops and racing pushes) and fetch
    // the n records from there down all at once: the walk then mostly finds
    // its lines arriving.
    std::atomic<std::uint32_t>* mirror = mirror_.load(std::memory_order_acquire);
    if (mirror == nullptr) {
        // Zeroed memory is a valid array of atomics (as Extra's, make_extra()).
        static_assert(std::is_trivially_destructible_v<std::atomic<std::uint32_t>>);
        auto* fresh = static_cast<std::atomic<std::uint32_t>*>(std::calloc(kMirror, sizeof(std::atomic<std::uint32_t>)));
        if (fresh != nullptr &&
            !mirror_.compare_exchange_strong(mirror, fresh, std::memory_order_acq_rel, std::memory_order_acquire))
            std::free(fresh);  // another thread made it first (`mirror` holds its)
        else
            mirror = fresh;  // ours, or none (no memory: no hint)
    }
    std::uint64_t head = free_head_.load(std::memory_order_acquire);
    std::uint32_t mirrored = mirror_top_.load(std::memory_order_relaxed);
    std::uint32_t at = 0;  // the top's mirror position + 1; 0 = not found
    if ((head & 0xFFFFFFFFu) != 0 && mirror != nullptr) {
        const auto top = static_cast<std::uint32_t>(head) - 1;
        constexpr std::uint32_t kLook = 1024;
        for (std::uint32_t j = 0; j < kLook && j < mirrored && at == 0; ++j)
            if (mirror[(mirrored - 1 - j) % kMirror].load(std::memory_order_relaxed) == top) at = mirrored - j;
        const std::uint32_t depth = static_cast<std::uint32_t>(std::min<std::size_t>(n, std::min(at, kMirror - kLook)));
        for (std::uint32_t i = 0; i < depth; ++i)
            if (const Record* r = find(mirror[(at - 1 - i) % kMirror].load(std::memory_order_relaxed))) prefetch(r);
    }
    std::size_t got = 0;
    while (got < n && (head & 0xFFFFFFFFu) != 0) {
        // Walk down from the top. Each link is read from a record that was on
        // the stack when `head` was loaded; if the stack changed since (then
        // a link may be anything, even an index never allocated), the tag
        // has moved on and the CAS fails: nothing read is used.
        std::size_t k = 0;
        std::uint32_t cur = static_cast<std::uint32_t>(head) - 1;
        std::uint64_t link = 0;
        bool torn = false;
        for (;;) {
            Record* r = find(cur);
            if (r == nullptr) {
                torn = true;
                break;
            }
            prefetch(r);  // the start writes both lines: fetched while the walk goes on
            recs[got + k] = r;
            index[got + k] = cur;
            ++k;
            link = TimerState::free_link(TimerState::load(*r)) & 0xFFFFFFFFu;
            if (k == n - got || link == 0) break;
            cur = static_cast<std::uint32_t>(link) - 1;
        }
        if (torn) {
            head = free_head_.load(std::memory_order_acquire);
            continue;
        }
        const std::uint64_t next = ((head >> 32) + 1) << 32 | link;
        if (free_head_.compare_exchange_strong(head, next, std::memory_order_acquire, std::memory_order_acquire)) {
            for (std::size_t j = got; j < got + k; ++j) gen[j] = recs[j]->gen();
            got += k;
            if (at >= k) {
                // What is left on top, unless a push came meanwhile (its
                // chain is on top then: the mirror's end stays).
                std::uint32_t seen = mirrored;
                at -= static_cast<std::uint32_t>(k);
                mirror_top_.compare_exchange_strong(seen, at, std::memory_order_relaxed);
                mirrored = at;
            }
        }
    }
    if (got == n) return got;
    const std::uint64_t want = n - got;
    const std::uint64_t fresh = next_fresh_.fetch_add(want, std::memory_order_relaxed);
    const std::uint64_t end = fresh + want < kCapacity ? fresh + want : kCapacity;
    if (fresh + want > kCapacity) next_fresh_.store(kCapacity, std::memory_order_relaxed);  // keep it from wrapping
    for (std::uint64_t f = fresh; f < end; ++f) {
        Record* r = init_fresh(static_cast<std::uint32_t>(f));
        if (r == nullptr) continue;
        recs[got] = r;
        index[got] = static_cast<std::uint32_t>(f);
        gen[got] = r->gen();
        ++got;
    }
    return got;
}

bool HandleTable::recycle(Record& r, FreeChain& chain) noexcept {
    const std::uint32_t g = r.gen();
    // Read before set_gen() clears the flags: a boot-time or wall-clock
    // timer has an own-clock deadline lock (timer_state.hpp, OwnDeadline).
    const bool clocked = r.clock() != ClockId::Monotonic;
    if (g >= Id::kMaxGen) {
        // The last generation: an id with any generation could name a later
        // occupant, so this record is never used again (FREE, on no list:
        // the last id is answered "not found" forever).
        TimerState::mark_free(r, g, 0);
        retired_.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    const std::uint32_t next = g + 1;
    // Before the word changes: a thread that sees the new word sees the new
    // generation. The same store clears the flags (they share user32), so
    // the next occupant starts as a common timer, and a query of the ending
    // timer that reads the cleared flags reads the new generation with them
    // and discards what it read. (A retired record keeps its flags: it is
    // never reused.)
    r.set_gen(next);
    const std::uint32_t index = index_of(&r);
    if (clocked && own_lock_taken(r)) [[unlikely]] {
        quarantine(r, index, next);
        return true;
    }
    if ((next & Ctl::kGenMask) == 0) {
        quarantine(r, index, next);  // the word's 10-bit generation wraps: wait for hazards
        return true;
    }
    chain.add(index, next);
    return false;
}

bool HandleTable::own_lock_taken(const Record& r) noexcept {
    // The other half of OwnDeadline::try_lock's handshake: a thread that
    // took the lock before it could see the new generation may still write
    // the deadline: the record then waits in quarantine until it lets go.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return OwnDeadline::held_now(extra_of(r));
}

bool HandleTable::own_lock_held(const Record& r) const noexcept {
    const ChunkHeader* head = header_of(&r);
    const Extra* arr = head->extras.load(std::memory_order_acquire);
    return arr != nullptr && OwnDeadline::held_now(arr[&r - first_of(head)]);
}

void HandleTable::quarantine(Record& r, std::uint32_t index, std::uint32_t gen) noexcept {
    std::uint32_t head = quarantine_head_.load(std::memory_order_relaxed);
    do {
        TimerState::mark_free(r, gen, head);
    } while (!quarantine_head_.compare_exchange_weak(head, index + 1, std::memory_order_release,
                                                     std::memory_order_relaxed));
    quarantined_.fetch_add(1, std::memory_order_relaxed);
}

void HandleTable::reclaim_quarantine() noexcept {
    std::uint32_t link = quarantine_head_.exchange(0, std::memory_order_acquire);
    if (link == 0) return;
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    last_reclaim_ns_ = std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
    // Every HazardScope entered before this barrier is visible to the scan
    // below; every one entered after it loads words written before it, so it
    // sees these records FREE under their new generation and acts on nothing.
    hazard_barrier();
    FreeChain freed(*this);
    std::uint64_t n = 0;
    while (link != 0) {
        const std::uint32_t index = link - 1;
        Record& r = at(index);
        link = TimerState::free_link(TimerState::load(r));
        if (hazard_held(&r) || own_lock_held(r)) {
            // Still in some thread's window, or its own-clock deadline's
            // lock still held: next pass (counted again).
            quarantine(r, index, r.gen());
        } else {
            freed.add(index, r.gen());
        }
        ++n;
    }
    quarantined_.fetch_sub(n, std::memory_order_relaxed);  // every record taken off the list above
}

std::uint32_t HandleTable::high_water() const noexcept {
    const std::uint64_t n = next_fresh_.load(std::memory_order_acquire);
    return static_cast<std::uint32_t>(n < kCapacity ? n : kCapacity);
}

}  // namespace tickwheel::rt
