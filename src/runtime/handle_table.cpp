// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/handle_table.hpp"

#include <sys/mman.h>

#include <ctime>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

#include "runtime/hazard.hpp"
#include "runtime/test_hooks.hpp"

namespace tickwheel::rt {

namespace {
constexpr std::size_t meta_bytes(std::size_t entries, std::size_t each) noexcept { return entries * each; }
}  // namespace

HandleTable::HandleTable() : chunks_(new std::atomic<Record*>[kMaxChunks]()) {
    // Zeroed, and resident only where touched (the entries of chunks in use):
    // zero bytes are a valid ChunkMeta (atomics of integers and pointers).
    static_assert(std::is_trivially_destructible_v<ChunkMeta>);
    void* m = mmap(nullptr, meta_bytes(kMaxChunks, sizeof(ChunkMeta)), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    meta_ = static_cast<ChunkMeta*>(m);
}

HandleTable::~HandleTable() {
    for (std::uint32_t c = 0; c < kMaxChunks; ++c) free_chunk(c, chunks_[c].load(std::memory_order_relaxed));
    std::free(mirror_.load(std::memory_order_relaxed));
    munmap(meta_, meta_bytes(kMaxChunks, sizeof(ChunkMeta)));
}

Extra& HandleTable::no_extra() noexcept {
    static Extra none;  // only ever read (a racing reader): its CASes find tag 0
    return none;
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
T* side_array(std::atomic<T*>& published, std::atomic<T*>& copy, std::atomic<std::uint64_t>& bytes) noexcept {
    T* arr = published.load(std::memory_order_acquire);
    if (arr != nullptr) return arr;
    void* m = mmap(nullptr, side_bytes<T>(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    auto* fresh = static_cast<T*>(m);
    if (published.compare_exchange_strong(arr, fresh, std::memory_order_acq_rel, std::memory_order_acquire)) {
        // The table's copy (racing readers, trim, revive), before any record
        // of the chunk can say it has one: its start publishes after this.
        copy.store(fresh, std::memory_order_release);
        bytes.fetch_add(side_bytes<T>(), std::memory_order_relaxed);
        return fresh;
    }
    munmap(m, side_bytes<T>());  // another thread published this chunk's first
    return arr;
}

template <class T>
void free_side_array(std::atomic<T*>& published) noexcept {
    if (T* arr = published.load(std::memory_order_relaxed)) munmap(arr, side_bytes<T>());
}

/// A chunk's 2 MiB, aligned to 2 MiB, straight from the kernel: no
/// allocator's header beside it (aligned_alloc's is written on the page
/// before the block, which stays resident while the chunk is mapped: 8 KiB a
/// chunk that trim() could never give back, 2.4 MiB after a burst of 10 M).
void* map_block() noexcept {
    constexpr std::size_t align = std::size_t{2} << 20;
    void* m = mmap(nullptr, 2 * align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    const auto at = reinterpret_cast<std::uintptr_t>(m);
    const std::uintptr_t aligned = (at + align - 1) & ~(align - 1);
    if (aligned != at) munmap(m, aligned - at);
    if (const std::uintptr_t tail = at + 2 * align - (aligned + align); tail != 0)
        munmap(reinterpret_cast<void*>(aligned + align), tail);
    return reinterpret_cast<void*>(aligned);
}
void unmap_block(void* block) noexcept { munmap(block, std::size_t{2} << 20); }

/// Gives `len` bytes at `p` (page-aligned) back to the kernel: the pages
/// read as zeros afterwards, their first write faults a zeroed page in.
bool dontneed(void* p, std::size_t len) noexcept { return madvise(p, len, MADV_DONTNEED) == 0; }
}  // namespace

Extra* HandleTable::make_extra(std::uint32_t index) noexcept {
    Record& r = at(index);
    auto& head = *const_cast<ChunkHeader*>(header_of(&r));
    Extra* arr = side_array(head.extras, meta_[index / kChunkSize].extras, resident_bytes_);
    return arr == nullptr ? nullptr : arr + (&r - first_of(&head));
}

bool HandleTable::set_period_word(std::uint32_t index, std::uint64_t word) noexcept {
    Record& r = at(index);
    auto& head = *const_cast<ChunkHeader*>(header_of(&r));
    std::atomic<std::uint64_t>* arr = side_array(head.period_words, meta_[index / kChunkSize].period_words, resident_bytes_);
    if (arr == nullptr) return false;
    arr[&r - first_of(&head)].store(word, std::memory_order_relaxed);
    return true;
}

bool HandleTable::set_cell_slot(std::uint32_t index, std::uint32_t code) noexcept {
    Record& r = at(index);
    auto& head = *const_cast<ChunkHeader*>(header_of(&r));
    std::atomic<std::uint32_t>* arr = side_array(head.cell_slots, meta_[index / kChunkSize].cell_slots, resident_bytes_);
    if (arr == nullptr) return false;
    arr[&r - first_of(&head)].store(code, std::memory_order_relaxed);
    return true;
}

void HandleTable::free_chunk(std::uint32_t c, Record* first) noexcept {
    if (first == nullptr) return;
    static_assert(std::is_trivially_destructible_v<Record>, "a chunk's records need no destructor");
    auto* head = reinterpret_cast<ChunkHeader*>(first) - 1;
    // (Through the table's copies: a chunk given back whole has a zeroed header.)
    free_side_array(meta_[c].extras);
    free_side_array(meta_[c].period_words);
    free_side_array(meta_[c].cell_slots);
    head->~ChunkHeader();
    unmap_block(head);
}


Record* HandleTable::make_chunk(std::uint32_t c) noexcept {
    Record* chunk = chunks_[c].load(std::memory_order_acquire);
    if (chunk != nullptr) return chunk;
    void* block = map_block();
    if (block == nullptr) return nullptr;
    // One 2 MiB chunk = one huge page where THP is in "madvise" mode (Debian's
    // default): a random record access then costs no TLB walk of 4 KiB pages.
    madvise(block, kChunkAlign, MADV_HUGEPAGE);
    auto* head = ::new (block) ChunkHeader{c};
    auto* fresh = reinterpret_cast<Record*>(head + 1);
    for (std::uint32_t i = 0; i < kChunkSize; ++i) ::new (static_cast<void*>(fresh + i)) Record();
    if (chunks_[c].compare_exchange_strong(chunk, fresh, std::memory_order_acq_rel, std::memory_order_acquire)) {
        resident_bytes_.fetch_add(kChunkAlign, std::memory_order_relaxed);
        grew();
        return fresh;
    }
    head->~ChunkHeader();
    unmap_block(head);  // another thread published this chunk first (no side arrays yet)
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
    // Chunks given back to the kernel after a peak come back before fresh
    // indices are taken (issue 34): one load where none was given back.
    if (has_released()) [[unlikely]] {
        if (Record* r = revive(index, gen)) return r;
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
    for (;;) {
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
    // A chunk given back after a peak comes back before fresh indices
    // (issue 34): one record now, the rest on the stack for the walk above.
    std::uint32_t ri, rg;
    Record* revived = has_released() ? revive(ri, rg) : nullptr;
    if (revived == nullptr) break;
    recs[got] = revived;
    index[got] = ri;
    gen[got] = rg;
    ++got;
    head = free_head_.load(std::memory_order_acquire);
    at = 0;  // (the mirror does not know the revived chain: no prefetch hint)
    }
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

// ---- giving memory back after a peak (issue 34; owner rules: timer_state.hpp,
// "Giving memory back") ------------------------------------------------------------
namespace {
/// The page (of kPages) of the chunk that holds record `k` of it: records
/// follow the 64-byte header, one line each.
constexpr std::uint32_t page_of(std::uint32_t k) noexcept { return (k + 1) / (4096 / sizeof(Record)); }
/// The records of page p: [first, last] (page 0 holds the header and 63).
constexpr std::uint32_t page_first(std::uint32_t p) noexcept { return p == 0 ? 0 : p * (4096 / sizeof(Record)) - 1; }
constexpr std::uint32_t page_end(std::uint32_t p, std::uint32_t chunk_size) noexcept {
    const std::uint32_t e = (p + 1) * (4096 / sizeof(Record)) - 1;
    return e < chunk_size ? e : chunk_size;
}
/// A Record as constructed (unlinked, no callable), whose wheel part revive()
/// copies into a record given back: its memory reads as zeros, and a zeroed
/// node reads as linked.
const Record& fresh_record() noexcept {
    static const Record r{};
    return r;
}
}  // namespace

Record* HandleTable::revive(std::uint32_t& out_index, std::uint32_t& out_gen) noexcept {
    std::uint64_t head = released_head_.load(std::memory_order_acquire);
    std::uint32_t c;
    for (;;) {
        const auto top = static_cast<std::uint32_t>(head);
        if (top == 0) return nullptr;
        c = top - 1;
        // (A stale `next` read of a chunk popped meanwhile: the tag moved on.)
        const std::uint64_t next = ((head >> 32) + 1) << 32 | meta_[c].next;
        if (released_head_.compare_exchange_weak(head, next, std::memory_order_acquire, std::memory_order_acquire))
            break;
    }
    // The chunk's meta is ours now (trim() wrote it before its push).
    ChunkMeta& m = meta_[c];
    Record* const first = chunks_[c].load(std::memory_order_acquire);
    if (m.whole) {
        // Its header's page was given back too: rewrite it before any record
        // of the chunk is used (a record's owner finds its index and side
        // arrays through it).
        auto* h = reinterpret_cast<ChunkHeader*>(first) - 1;
        h->number.store(c, std::memory_order_relaxed);
        h->extras.store(m.extras.load(std::memory_order_relaxed), std::memory_order_relaxed);
        h->cell_slots.store(m.cell_slots.load(std::memory_order_relaxed), std::memory_order_relaxed);
        h->period_words.store(m.period_words.load(std::memory_order_relaxed), std::memory_order_release);
    }
    // Every record of its given-back pages, FREE at the floor (above every
    // generation any of them had: a stale id stays stale), linked as a chain.
    const std::uint32_t floor = m.floor;
    const std::size_t node_bytes = static_cast<std::size_t>(reinterpret_cast<const char*>(&fresh_record().user16) -
                                                            reinterpret_cast<const char*>(&fresh_record()));
    std::uint32_t top = 0, bottom = 0, count = 0;  // top: index + 1
    for (std::uint32_t p = 0; p < kPages; ++p) {
        if ((m.pages[p / 64] & (std::uint64_t{1} << (p % 64))) == 0) continue;
        for (std::uint32_t k = page_first(p); k < page_end(p, kChunkSize); ++k) {
            Record& r = first[k];
            // The wheel's part (links, deadline, "unlinked"): only the driver
            // reads it, and only for a record whose generation it validated.
            std::memcpy(static_cast<void*>(&r), static_cast<const void*>(&fresh_record()), node_bytes);
            r.user16 = CallableKinds::kNone;
            r.set_gen(floor);
            const std::uint32_t index = c * kChunkSize + k;
            TimerState::mark_free(r, floor, top);
            if (top == 0) bottom = index;
            top = index + 1;
            ++count;
        }
    }
    released_records_.fetch_sub(m.released, std::memory_order_relaxed);
    std::uint64_t bytes = 0;
    if (m.whole) {
        bytes = kChunkAlign + (m.extras.load(std::memory_order_relaxed) != nullptr ? side_bytes<Extra>() : 0) +
                (m.period_words.load(std::memory_order_relaxed) != nullptr ? side_bytes<std::atomic<std::uint64_t>>() : 0) +
                (m.cell_slots.load(std::memory_order_relaxed) != nullptr ? side_bytes<std::atomic<std::uint32_t>>() : 0);
    } else {
        for (const std::uint64_t w : m.pages) bytes += std::uint64_t(__builtin_popcountll(w)) * 4096;
    }
    resident_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    grew();
    m.whole = false;
    m.released = 0;
    for (std::uint64_t& w : m.pages) w = 0;
    m.state.store(kResident, std::memory_order_release);  // a later trim may take it again
    if (count == 0) return nullptr;  // (never: a released chunk has a page)
    // The caller's: the top; the rest go on the free stack.
    out_index = top - 1;
    out_gen = floor;
    Record& mine = at(out_index);
    const std::uint32_t rest_top = TimerState::free_link(TimerState::load(mine));
    if (rest_top != 0) release_chain(rest_top - 1, bottom, floor, count - 1, /*notify=*/false);
    return &mine;
}

std::uint64_t HandleTable::trim(std::uint64_t keep_free) noexcept {
    // 1. The whole free stack becomes ours (a CAS that bumps the tag: a pop
    //    that read the old head fails). Records freed meanwhile go onto the
    //    new, empty stack; starts meanwhile take those, or fresh indices.
    std::uint64_t head = free_head_.load(std::memory_order_acquire);
    do {
        if (static_cast<std::uint32_t>(head) == 0) return 0;
    } while (!free_head_.compare_exchange_weak(head, ((head >> 32) + 1) << 32, std::memory_order_acquire,
                                               std::memory_order_acquire));
    const std::uint32_t chain_top = static_cast<std::uint32_t>(head);  // index + 1
    const std::uint32_t hw = high_water();  // every record on the chain is below it
    const std::uint32_t chunks = (hw + kChunkSize - 1) / kChunkSize;
    // Gives the chain back unchanged (no memory for the bookkeeping).
    const auto give_back_all = [&] {
        std::uint32_t bottom = chain_top - 1, n = 0;
        for (std::uint32_t i = chain_top; i != 0; i = TimerState::free_link(TimerState::load(at(i - 1)))) {
            bottom = i - 1;
            ++n;
        }
        release_chain(chain_top - 1, bottom, at(bottom).gen(), n, /*notify=*/false);
    };
    std::vector<std::uint8_t> free_in_page;  // per page of the chunks in use: free records on the chain
    std::vector<std::uint32_t> max_gen;      // per chunk: the largest generation on the chain
    std::vector<std::uint8_t> release;       // per chunk: 0 keep, 1 some pages, 2 whole
    try {
        free_in_page.assign(std::size_t{chunks} * kPages, 0);
        max_gen.assign(chunks, 0);
        release.assign(chunks, 0);
    } catch (...) {
        give_back_all();
        return 0;
    }
    // 2. Count the chain's records by page (a walk: ~6 ns a record in the
    //    order a burst of stops freed them).
    std::uint64_t on_chain = 0;
    for (std::uint32_t i = chain_top; i != 0;) {
        const std::uint32_t index = i - 1;
        const Record& r = at(index);
        const std::uint32_t c = index / kChunkSize;
        ++free_in_page[std::size_t{c} * kPages + page_of(index % kChunkSize)];
        max_gen[c] = std::max(max_gen[c], r.gen());
        ++on_chain;
        i = TimerState::free_link(TimerState::load(r));
    }
    // 3. No thread may be inside an operation on a record given back: after
    //    a barrier every scope entered before it shows (its page stays), and
    //    every one entered after it reads the record FREE (or zeroed) under a
    //    generation no id it holds has: it acts on nothing (hazard.hpp).
    hazard_barrier();
    std::vector<const void*> held;
    bool guarded = false;
    try {
        guarded = hazard_records(held);
    } catch (...) {  // no memory for the list: as unguarded
    }
    if (!guarded) {  // a thread acting without a slot: nothing goes this time
        give_back_all();
        return 0;
    }
    for (const void* p : held) {
        const auto h = reinterpret_cast<std::uintptr_t>(p) & ~(kChunkAlign - 1);
        for (std::uint32_t c = 0; c < chunks; ++c) {
            Record* first = chunks_[c].load(std::memory_order_relaxed);
            if (first == nullptr || reinterpret_cast<std::uintptr_t>(first) - sizeof(ChunkHeader) != h) continue;
            const auto k = static_cast<std::uint32_t>(static_cast<const Record*>(p) - first);
            if (k < kChunkSize) free_in_page[std::size_t{c} * kPages + page_of(k)] = 0;  // stays
        }
    }
    // 4. Decide, from the highest chunk down, while at least `keep_free`
    //    free records stay resident: each page that holds only records on
    //    the chain; a chunk all of whose pages go goes whole (page 0, with
    //    the header, only then). The last chunk's tail, never handed out,
    //    is claimed first (next_fresh_ moves to the chunk's end) when every
    //    record it handed out is on the chain, so that it too can go whole.
    std::uint64_t left = on_chain, released = 0;
    std::vector<std::uint64_t> pages(std::size_t{chunks} * 8, 0);  // (small: 64 bytes a chunk)
    std::uint32_t tail_from = 0, tail_to = 0;  // a claimed tail: [tail_from, tail_to)
    for (std::uint32_t c = chunks; c-- > 0 && left > keep_free;) {
        if (meta_[c].state.load(std::memory_order_acquire) != kResident) continue;  // some given back: revive first
        Record* first = chunks_[c].load(std::memory_order_relaxed);
        if (first == nullptr) continue;
        const std::uint32_t base = c * kChunkSize;
        const std::uint32_t allocated = std::min(hw - base, kChunkSize);  // handed out in this chunk
        std::uint8_t* counts = &free_in_page[std::size_t{c} * kPages];
        bool tail = false;
        if (allocated < kChunkSize) {
            // The last chunk: its never-handed-out tail (resident since the
            // chunk was made) is ours if no start took a fresh index since
            // `hw`; its records that do not go are pushed as fresh ones (5.).
            std::uint64_t expect = hw;
            tail = next_fresh_.compare_exchange_strong(expect, std::uint64_t{base} + kChunkSize, std::memory_order_relaxed);
            if (tail) {
                tail_from = base + allocated;
                tail_to = base + kChunkSize;
            }
        }
        Extra* extras = meta_[c].extras.load(std::memory_order_acquire);
        // Whether page p may go: every record on it that was handed out is
        // on the chain, and no thread holds its deadline lock (taken from
        // any stale holder first: tag 0, so a stale try_lock sees another
        // generation's lock and stops, OwnDeadline::try_lock).
        const auto page_free = [&](std::uint32_t p) {
            const std::uint32_t lo = page_first(p), end = page_end(p, kChunkSize);
            if (!tail && end > allocated) return false;
            const std::uint32_t hi = std::min(end, allocated);
            if (counts[p] != (hi > lo ? hi - lo : 0)) return false;
            if (extras == nullptr) return true;
            for (std::uint32_t k = lo; k < hi; ++k) {
                std::uint64_t l = extras[k].own_lock.load(std::memory_order_acquire);
                if (OwnDeadline::held(l) ||
                    !extras[k].own_lock.compare_exchange_strong(l, 0, std::memory_order_acq_rel))
                    return false;
            }
            return true;
        };
        std::uint64_t* bits = &pages[std::size_t{c} * 8];
        std::uint32_t n = 0, all_records = 0;
        bool all = true;
        for (std::uint32_t p = 0; p < kPages; ++p) {
            if (!page_free(p)) {
                all = false;
                continue;
            }
            if (p == 0) continue;  // (with the chunk, below)
            const std::uint32_t on_page = counts[p];  // free records on the chain it takes
            if (left - n - on_page < keep_free) {
                all = false;
                break;
            }
            bits[p / 64] |= std::uint64_t{1} << (p % 64);
            n += on_page;
            all_records += page_end(p, kChunkSize) - page_first(p);
        }
        if (all && left - n - counts[0] >= keep_free) {
            bits[0] |= 1;  // the header's page: the chunk goes whole
            n += counts[0];
            all_records += page_end(0, kChunkSize);
            release[c] = 2;
        } else if (all_records != 0) {
            release[c] = 1;
        }
        left -= n;
        released += all_records;
        meta_[c].released = all_records;
    }
    if (released == 0 && tail_to == 0) {
        give_back_all();
        return 0;
    }
    // 5. The rest goes back on the free stack (relinked: each keeps its
    //    generation), before any page is given back: the walk reads links.
    //    A claimed tail's records that stay are made as fresh ones are.
    {
        std::uint32_t top = 0, bottom = 0, bottom_gen = 0, n = 0;
        const auto keep = [&](Record& r, std::uint32_t index, std::uint32_t gen) {
            TimerState::mark_free(r, gen, top);
            if (top == 0) {
                bottom = index;
                bottom_gen = gen;
            }
            top = index + 1;
            ++n;
        };
        const auto goes = [&](std::uint32_t index) {
            const std::uint32_t c = index / kChunkSize, p = page_of(index % kChunkSize);
            return release[c] != 0 && (pages[std::size_t{c} * 8 + p / 64] & (std::uint64_t{1} << (p % 64))) != 0;
        };
        for (std::uint32_t i = chain_top; i != 0;) {
            const std::uint32_t index = i - 1;
            Record& r = at(index);
            i = TimerState::free_link(TimerState::load(r));
            if (!goes(index)) keep(r, index, r.gen());
        }
        for (std::uint32_t index = tail_from; index < tail_to; ++index) {
            if (goes(index)) continue;
            std::uint32_t g = test_hooks::first_generation.load(std::memory_order_relaxed);
            if (g == 0 || g > Id::kMaxGen) g = 1;
            Record& r = at(index);
            r.set_gen(g);
            keep(r, index, g);
        }
        if (top != 0) release_chain(top - 1, bottom, bottom_gen, n, /*notify=*/false);
    }
    // 6. Give the pages back, and keep the chunks on the released list.
    std::uint64_t bytes = 0;
    for (std::uint32_t c = 0; c < chunks; ++c) {
        if (release[c] == 0) continue;
        Record* first = chunks_[c].load(std::memory_order_relaxed);
        auto* block = reinterpret_cast<char*>(first) - sizeof(ChunkHeader);
        ChunkMeta& m = meta_[c];
        m.floor = std::max(m.floor, max_gen[c] + 1);
        m.whole = release[c] == 2;
        const std::uint64_t* bits = &pages[std::size_t{c} * 8];
        for (unsigned w = 0; w < 8; ++w) m.pages[w] = bits[w];
        if (m.whole) {
            (void)dontneed(block, kChunkAlign);
            bytes += kChunkAlign;
            if (Extra* x = m.extras.load(std::memory_order_relaxed)) {
                (void)dontneed(x, side_bytes<Extra>());
                bytes += side_bytes<Extra>();
            }
            if (auto* w = m.period_words.load(std::memory_order_relaxed)) {
                (void)dontneed(w, side_bytes<std::atomic<std::uint64_t>>());
                bytes += side_bytes<std::atomic<std::uint64_t>>();
            }
            // (Its records' cell slots: none is in a cell, each reads "never
            // placed" until its next place writes it.)
            if (auto* w = m.cell_slots.load(std::memory_order_relaxed)) {
                (void)dontneed(w, side_bytes<std::atomic<std::uint32_t>>());
                bytes += side_bytes<std::atomic<std::uint32_t>>();
            }
        } else {
            // Runs of adjacent pages, one call each.
            for (std::uint32_t p = 1; p < kPages;) {
                if ((bits[p / 64] & (std::uint64_t{1} << (p % 64))) == 0) {
                    ++p;
                    continue;
                }
                std::uint32_t q = p;
                while (q < kPages && (bits[q / 64] & (std::uint64_t{1} << (q % 64))) != 0) ++q;
                (void)dontneed(block + std::size_t{p} * 4096, std::size_t{q - p} * 4096);
                bytes += std::uint64_t{q - p} * 4096;
                p = q;
            }
        }
        m.state.store(kReleased, std::memory_order_relaxed);
        std::uint64_t list = released_head_.load(std::memory_order_relaxed);
        do {
            m.next = static_cast<std::uint32_t>(list);
        } while (!released_head_.compare_exchange_weak(list, ((list >> 32) + 1) << 32 | (std::uint64_t{c} + 1),
                                                       std::memory_order_release, std::memory_order_relaxed));
    }
    released_records_.fetch_add(released, std::memory_order_relaxed);
    resident_bytes_.fetch_sub(std::min(bytes, resident_bytes_.load(std::memory_order_relaxed)), std::memory_order_relaxed);
    return released;
}

std::uint32_t HandleTable::high_water() const noexcept {
    const std::uint64_t n = next_fresh_.load(std::memory_order_acquire);
    return static_cast<std::uint32_t>(n < kCapacity ? n : kCapacity);
}

}  // namespace tickwheel::rt
