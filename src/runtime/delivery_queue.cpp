// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/delivery_queue.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <new>
#include <cstdio>
#include <cstdlib>
#include <system_error>
#include <thread>

#include "runtime/clock.hpp"
#include "runtime/runtime_core.hpp"
#include "runtime/test_hooks.hpp"
#include "runtime/timer_state.hpp"

namespace tickwheel::rt {

void queue_owner_rule_broken(const char* what, const char* file, int line) noexcept {
    std::fprintf(stderr, "tickwheel: owner rule broken (%s) at %s:%d\n", what, file, line);
    std::abort();
}

// ---- DeliveryQueue -----------------------------------------------------------------
DeliveryQueue::DeliveryQueue(RuntimeCore& core, std::uint16_t slot, std::uint32_t slot_gen)
    : core_(&core), slot_(slot), slot_gen_(slot_gen), epoch_(fork_epoch()) {
    fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    // EMFILE, ENFILE, ENOMEM: out of a resource, as the C API reports it.
    if (fd_ < 0) throw Error(errc::no_memory);
}

DeliveryQueue::~DeliveryQueue() {
    if (fd_ >= 0) ::close(fd_);
}

void DeliveryQueue::unref() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

RuntimeCore* DeliveryQueue::core() const noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    return core_;
}

bool DeliveryQueue::closed() const noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_;
}

void DeliveryQueue::signal_locked() noexcept {
    const std::uint64_t one = 1;
    // Non-blocking: fails only when the counter would overflow (never: it
    // is drained whenever nothing is due).
    test_hooks::perturb('e');  // a schedule point (test_hooks.hpp)
    [[maybe_unused]] const ssize_t n = ::write(fd_, &one, sizeof one);
    signalled_ = true;
}

void DeliveryQueue::drain_fd_locked() noexcept {
    if (!signalled_) return;
    std::uint64_t v;
    test_hooks::perturb('E');  // a schedule point (test_hooks.hpp)
    [[maybe_unused]] const ssize_t n = ::read(fd_, &v, sizeof v);  // EAGAIN if already 0
    signalled_ = false;
}

bool DeliveryQueue::deliver(const FireItem* items, std::size_t n, std::int64_t now_ns, bool may_wait) noexcept {
    std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
    if (may_wait) {
        lock.lock();
    } else {
        // The driver: a holder of mu_ is a caller (a stop or reset of a bound
        // timer, the queue's run between its callbacks) that may be preempted
        // or stopped there; the driver never waits for it (issue 31).
        for (unsigned spins = 0; !lock.try_lock(); ++spins) {
            if (spins == 64) return false;  // (as for no memory: again next tick)
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
    }
    if (closed_ || core_ == nullptr) return true;  // being cancelled: dropped
    // Which items are live: their timer is still DISPATCHED under their
    // generation. Every way out of DISPATCHED of a timer bound to an open
    // queue is taken under mu_ (held here), and the shard hands its items
    // over in the order it made them: so DISPATCHED now means "in the
    // episode of this item, or of a later item of its record in this very
    // batch" (the later one wins below).
    const auto is_live = [](const FireItem& f) noexcept {
        const Word c = TimerState::load(*f.rec);
        return Ctl::state(c) == State::Dispatched && Ctl::gen10(c) == (f.gen & Ctl::kGenMask) &&
               f.rec->gen() == f.gen;
    };
    std::size_t taken = 0;
    for (std::size_t i = 0; i < n; ++i) taken += is_live(items[i]) ? 1 : 0;
    if (taken == 0) return true;
    try {
        heap_.reserve(heap_.size() + taken);
        live_.reserve(live_.size() + taken);
    } catch (...) {
        return false;
    }
    // One live item per bound record: a record may come twice when an item
    // waited in its shard (the queue's mutex was held by a caller, or no
    // memory) while a reset ended its episode and the shard dispatched it
    // again (issue 31: the driver only tries the mutex). Both look live --
    // DISPATCHED, one generation -- and the later one is this episode's:
    // it replaces the earlier in live_, whose heap entry is then never run.
    std::size_t inserted = 0;
    try {
        for (std::size_t i = 0; i < n; ++i) {
            if (!is_live(items[i])) continue;
            TW_OWNER_ASSERT(bound_here(*items[i].rec));
            live_.insert_or_assign(items[i].rec, Live{items[i].gen, seq_ + inserted});
            ++inserted;
        }
    } catch (...) {
        for (std::size_t i = 0, k = 0; i < n && k < inserted; ++i)
            if (is_live(items[i])) {
                live_.erase(items[i].rec);
                ++k;
            }
        return false;
    }
    taken = 0;
    for (std::size_t i = 0, k = 0; i < n; ++i) {
        if (!is_live(items[i])) continue;
        const std::uint64_t seq = seq_ + k++;
        if (live_.find(items[i].rec)->second.seq != seq) continue;  // replaced by a later item of its record
        heap_.push_back(Item{items[i], seq});
        std::push_heap(heap_.begin(), heap_.end(), Later{});
        const std::int64_t due_ns = core_->clock.tick_start_ns(items[i].due);
        signal_lateness_.record(now_ns > due_ns ? static_cast<std::uint64_t>(now_ns - due_ns) : 0);
        ++taken;
    }
    seq_ += inserted;
    delivered_ += taken;
    // One new edge per batch (EPOLLET users), and readable while an item is live.
    signal_locked();
    if (waiting_ != 0) cv_.notify_all();
    return true;
}

bool DeliveryQueue::bound_here(const Record& r) const noexcept {
    return (r.flags() & Record::kHasQueue) != 0 && HandleTable::queue_slot_of(r) == slot_;
}

void DeliveryQueue::undue_locked(const Record& r) noexcept {
    if (closed_) return;
    const auto it = live_.find(&r);
    if (it == live_.end()) return;  // not delivered yet: deliver() drops it
    TW_OWNER_ASSERT(it->second.gen == r.gen() && bound_here(r));
    live_.erase(it);
    if (live_.empty()) drain_fd_locked();
}

bool DeliveryQueue::running_on_this_thread() const noexcept {
    for (const CurrentRun* f = &t_current; f != nullptr; f = f->prev)
        if (f->queue == this) return true;
    return false;
}

std::int64_t DeliveryQueue::run(std::size_t max, std::int64_t timeout_ns) noexcept {
    using Steady = std::chrono::steady_clock;
    std::unique_lock<std::mutex> lock(mu_);
    if (destroyed()) return -static_cast<std::int64_t>(errc::invalid_argument);
    if (closed_ || core_ == nullptr) return -static_cast<std::int64_t>(errc::shutting_down);
    RuntimeCore& core = *core_;
    ++runners_;
    // The deadline of the wait: now + timeout, saturated (issue 31: INT64_MAX
    // ns added to the steady clock's reading overflowed into the past, and
    // the call returned at once). A timeout that reaches past the clock's
    // range (~292 years after boot) waits without limit, as one < 0 does.
    bool forever = timeout_ns < 0;
    Steady::time_point until = Steady::time_point::max();
    if (timeout_ns > 0) {
        const Steady::time_point now = Steady::now();
        if (timeout_ns < (Steady::time_point::max() - now).count())
            until = now + std::chrono::nanoseconds(timeout_ns);
        else
            forever = true;
    }
    std::size_t ran = 0;
    while (!closed_ && ran < max) {
        if (heap_.empty()) {
            if (ran > 0 || timeout_ns == 0) break;
            ++waiting_;
            if (forever) {
                cv_.wait(lock);
            } else if (cv_.wait_until(lock, until) == std::cv_status::timeout && heap_.empty()) {
                --waiting_;
                break;
            }
            --waiting_;
            continue;
        }
        std::pop_heap(heap_.begin(), heap_.end(), Later{});
        const Item top = heap_.back();
        heap_.pop_back();
        const FireItem& item = top.fire;
        // Live only if it is its record's live item: a stop or a reset that
        // took the timer back (under mu_) removed that; a later episode's
        // item replaced it.
        const auto it = live_.find(item.rec);
        if (it == live_.end() || it->second.seq != top.seq) continue;  // stale: never runs
        live_.erase(it);
        if (live_.empty()) drain_fd_locked();
        // DISPATCHED -> RUNNING under mu_, like every other way out of
        // DISPATCHED of a bound timer: the episode cannot end and start
        // again between the check above and this CAS.
        if (!core.begin_run(item)) continue;
        TW_OWNER_ASSERT(bound_here(*item.rec));  // RUNNING: the run owns the record now
        ++running_;
        lock.unlock();
        std::size_t calls;
        {
            // Each callback it runs records its lateness here (RuntimeCore::
            // call: record_run_start). More than 1: a BURST timer's
            // catch-up, at most max - ran (the rest go back to this queue:
            // requeue_owed).
            FreeChain freed(core.shard(item.shard).table());
            calls = core.run_begun(item, freed, this, max - ran);
        }
        lock.lock();
        --running_;
        ran_ += calls;
        ran += calls;
        if (closed_ && running_ == 0) cv_.notify_all();  // close() waits for the runs in progress
    }
    --runners_;
    if (closed_ && runners_ == 0) cv_.notify_all();
    if (ran == 0 && closed_) return -static_cast<std::int64_t>(errc::shutting_down);
    return static_cast<std::int64_t>(ran);
}

bool DeliveryQueue::requeue_owed(Record& r, Extra& x, const FireItem& next) noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || core_ == nullptr) return false;  // closing: nothing more runs
    // Owed runs of this timer (only the shard adds to them meanwhile; a
    // reset clears them under mu_, which we hold, and nothing else takes
    // them but this run).
    const std::uint64_t tag = Extra::owed_tag(next.gen);
    const std::uint64_t o = x.owed.load(std::memory_order_relaxed);
    if ((o & ~Extra::kOwedCountMask) != tag || (o & Extra::kOwedCountMask) == 0) return false;
    try {
        heap_.reserve(heap_.size() + 1);
        live_.reserve(live_.size() + 1);
        live_.insert_or_assign(&r, Live{next.gen, seq_});
    } catch (...) {
        return false;  // no memory: the caller runs the rest now
    }
    // RUNNING -> DISPATCHED under mu_, like every way into a live item's
    // episode a run can see; only a stop or a reset made first (before we
    // took mu_) keeps it RUNNING_*: then the run settles as usual.
    if (!TimerState::yield_run(r, next.gen)) {
        live_.erase(&r);
        return false;
    }
    // The item stands for the next owed deadline: take it from the count
    // (the shard only adds to it).
    x.owed.fetch_sub(1, std::memory_order_relaxed);
    TW_OWNER_ASSERT(bound_here(r));
    heap_.push_back(Item{next, seq_++});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
    signal_locked();  // readable again (the run drained it if this was the last live item)
    if (waiting_ != 0) cv_.notify_all();
    return true;
}

void DeliveryQueue::record_run_start(std::uint64_t late, std::uint64_t driver, std::uint64_t wait) const noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    run_lateness_.record(late);
    stage_[kStageDriver].record(driver);
    stage_[kStageWait].record(wait);
}

void DeliveryQueue::record_run_end(std::uint64_t ns) const noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    stage_[kStageRun].record(ns);
}

void DeliveryQueue::close_begin() noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    closed_ = true;
    heap_.clear();
    heap_.shrink_to_fit();
    live_.clear();
    signal_locked();  // readable for good: a loop polling it learns of the end
    cv_.notify_all();
}

void DeliveryQueue::close_wait() noexcept {
    std::unique_lock<std::mutex> lock(mu_);
    // Callbacks in progress, and threads still inside run() (they leave at
    // once: nothing more runs), unless this thread is one of them.
    if (running_on_this_thread()) return;
    cv_.wait(lock, [this] { return running_ == 0 && runners_ == 0; });
}

void DeliveryQueue::detach() noexcept {
    close();
    std::lock_guard<std::mutex> lock(mu_);
    core_ = nullptr;
}

QueueCounters DeliveryQueue::counters() const noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    QueueCounters c;
    c.due = live_.size();
    c.delivered = delivered_;
    c.ran = ran_;
    c.runners = runners_;
    c.signal = signal_lateness_.summarize();
    c.run = run_lateness_.summarize();
    for (unsigned k = 0; k < kStageCount; ++k) c.stage[k] = stage_[k].snapshot();
    return c;
}

// ---- QueueTable ------------------------------------------------------------------
QueueTable::~QueueTable() {
    for (auto& c : chunks_) delete[] c.load(std::memory_order_relaxed);
    for (auto& c : gen_chunks_) delete[] c.load(std::memory_order_relaxed);
}

DeliveryQueue* QueueTable::get(std::uint16_t slot) const noexcept {
    const std::atomic<DeliveryQueue*>* c = chunk(slot / kChunk);
    return c == nullptr ? nullptr : c[slot % kChunk].load(std::memory_order_seq_cst);
}

DeliveryQueue* QueueTable::create(RuntimeCore& core) {
    test_hooks::perturb('q');  // a schedule point (test_hooks.hpp): after create's shutdown check, before the table
    std::lock_guard<std::mutex> lock(mu_);
    std::uint32_t slot;
    if (!free_.empty()) {
        slot = free_.back();
    } else {
        slot = next_.load(std::memory_order_relaxed);
        if (slot > kMaxQueues) throw Error(errc::no_memory);
    }
    std::atomic<DeliveryQueue*>* c = chunk(slot / kChunk);
    if (c == nullptr) {
        auto* g = new std::atomic<std::uint32_t>[kChunk]();
        c = new (std::nothrow) std::atomic<DeliveryQueue*>[kChunk]();
        if (c == nullptr) {
            delete[] g;
            throw std::bad_alloc();
        }
        gen_chunks_[slot / kChunk].store(g, std::memory_order_release);
        chunks_[slot / kChunk].store(c, std::memory_order_release);
    }
    auto* q = new DeliveryQueue(core, static_cast<std::uint16_t>(slot), slot_gen(static_cast<std::uint16_t>(slot)));
    q->ref();  // the caller's
    if (!free_.empty())
        free_.pop_back();
    else
        next_.store(slot + 1, std::memory_order_release);
    in_use_.store(true, std::memory_order_seq_cst);
    c[slot % kChunk].store(q, std::memory_order_seq_cst);
    return q;
}

void QueueTable::clear(std::uint16_t slot) noexcept {
    std::atomic<DeliveryQueue*>* c = chunk(slot / kChunk);
    if (c != nullptr) c[slot % kChunk].store(nullptr, std::memory_order_seq_cst);
}

void QueueTable::release_slot(std::uint16_t slot) noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    try {
        free_.push_back(slot);
    } catch (...) {
        // No memory to remember it: the slot is not reused (one of 8191).
    }
}

void QueueTable::drop_all() noexcept {
    const std::uint32_t n = next_.load(std::memory_order_acquire);
    for (std::uint32_t s = 1; s < n; ++s) {
        std::atomic<DeliveryQueue*>* c = chunk(s / kChunk);
        if (c == nullptr) continue;
        if (DeliveryQueue* q = c[s % kChunk].exchange(nullptr, std::memory_order_acq_rel)) q->unref();
    }
}

QueueTable::Section::Section(const QueueTable& t) noexcept {
    if (!t.in_use()) return;
    const unsigned s = this_thread_stripe();
    cell_ = &t.sections_[s].v;
    shared_ = s == kShared;
    cell_->fetch_add(1, std::memory_order_seq_cst);  // before every load of a slot in the section
}

QueueTable::Section::Section(const QueueTable& t, Shared) noexcept {
    if (!t.in_use()) return;
    cell_ = &t.sections_[kShared].v;
    shared_ = true;
    cell_->fetch_add(1, std::memory_order_seq_cst);  // before every load of a slot in the section
}

QueueTable::Section::~Section() {
    if (cell_ == nullptr) return;
    if (shared_)
        cell_->fetch_sub(1, std::memory_order_release);
    else
        cell_->fetch_add(1, std::memory_order_release);  // even again: outside
}

void QueueTable::quiesce() const noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);  // after clear(): pairs with a Section's entry
    for (unsigned s = 0; s < kStripes; ++s) {
        const std::atomic<std::uint64_t>& cell = sections_[s].v;
        const std::uint64_t v = cell.load(std::memory_order_seq_cst);
        if (s == kShared) {
            while (cell.load(std::memory_order_acquire) != 0) std::this_thread::yield();
        } else if (v % 2 != 0) {
            while (cell.load(std::memory_order_acquire) == v) std::this_thread::yield();
        }
    }
}

}  // namespace tickwheel::rt
