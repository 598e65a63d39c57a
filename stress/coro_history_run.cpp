// SPDX-License-Identifier: MIT OR Apache-2.0
// tw_stress coro-history: a model-based checker for the coroutine waits of
// tickwheel/coro.hpp (issue 32), in the style of `tw_stress history`.
//
//   tw_stress coro-history [--runtime real|manual|both] [--seconds S] [--seed X]
//                          [--fuzz N] [--slots K]
//   tw_stress coro-history-selftest
//
// A random program of many coroutines (K at once, default 192 on a real
// runtime, 96 on a manual one), each a loop of co_awaits drawn from its own
// seeded stream: sleep_for (0 .. 20 ms), sleep_until on the monotonic, boot-
// time and wall clocks (some in the past), event.wait (each coroutine slot
// has its event, so one waiter at a time), each under 0 .. 2 nested
// with_deadline/cancel_after (a Duration on the wait's clock, or a
// steady_clock TimePoint where the API takes one -- also over a wall-clock
// sleep if a build lets that compile: issue 32 c2), with a std::stop_token
// stopped before the co_await, during its arming (from the test hook between
// the timer's start and the publication), later (by other threads) or
// never; resumed on a worker, on one of two delivery queues, on a user
// executor (a thread draining a deque) or on an Asio io_context thread
// (through a post function of the checker's own, as tickwheel::asio_resumer
// does). Meanwhile:
//  * frames are DESTROYED at random moments where the contract allows it
//    (coro.hpp, "Destroying a waiting coroutine cancels its wait"): on a
//    queue's thread, between runs and from inside a run (another coroutine
//    of that queue), and, on a real runtime, far "victim" sleeps that
//    nothing else can end, from any thread; on the manual runtime any
//    suspended coroutine, from the one thread -- inside advance(), inside a
//    queue's run, inside the executor's drain (a handle already posted there
//    is taken out and destroyed: the executor destroying it);
//  * queues are closed (and replaced) from their thread, and from the
//    arming hook of a wait bound to them (a close during arming: c5);
//  * a ballast thread fills the runtime up to Config::max_timers and holds
//    it there for a few ms, so that starts fail with limit_reached (c3);
//  * notifies and stops come from other threads (real) or between
//    advances of random sizes, most off the tick grid, advance(0) among
//    them (manual: one thread, deterministic for a seed: c4);
//  * the schedule fuzzer (--fuzz N, default 64; 0 = off) yields or sleeps at
//    the awaiters' test hooks (the arming window, the timer's entry, the
//    decision, a re-post, a destructor's win), widening their windows;
//  * at the end the runtime is shut down with coroutines still waiting.
// Every co_await is recorded -- its call, the start of its timer, every
// stop, notify, close, hold, advance, the frame's destruction, the
// resumption with its reason, the resuming thread's context and its
// own-clock reading -- and checked (coro_history_check.cpp) against a
// sequential model: exactly once (never for a destroyed frame), the reason
// the model allows, never early on the wait's own clock, on the requested
// context, a notify never lost, on a manual runtime resumed by the first
// advance after its stop/notify/deadline. Destroyed frames are quarantined
// (zero-filled, not freed) and checked for writes: the library must not
// touch a frame after its destruction. After the shutdown no timer may be
// left alive (every release hook ran).
//
// ctest runs `--runtime real --seconds 3` on seeds 1, 2 and `--runtime
// manual --seconds 2` on seed 1 (stress.coro_history.*), in release, asan
// and tsan. Reverting each of issue 32's fixes, the complaint that catches
// it: docs/site/guide/coroutines.md ("Testing").
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <coroutine>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "coro_history.hpp"

namespace stress::coro_history {
void hook_armed(const std::atomic<std::uint32_t>& state);
void hook_fuzz(char site);
}  // namespace stress::coro_history
#define TICKWHEEL_CORO_TEST_HOOK(state) ::stress::coro_history::hook_armed(state)
#define TICKWHEEL_CORO_TEST_HOOK_TIMER(state) ::stress::coro_history::hook_fuzz('t')
#define TICKWHEEL_CORO_TEST_HOOK_DECIDED(state) ::stress::coro_history::hook_fuzz('d')
#define TICKWHEEL_CORO_TEST_HOOK_REPOST(state) ::stress::coro_history::hook_fuzz('r')
#define TICKWHEEL_CORO_TEST_HOOK_GONE(state) ::stress::coro_history::hook_fuzz('g')
#include "handle_queue.hpp"
#include "test_support/sanitizers.hpp"
#include "tickwheel/coro.hpp"

#if TW_CORO_HISTORY_ASIO
#include <asio.hpp>
#endif


using namespace std::chrono_literals;

namespace stress::coro_history {
namespace {

using tickwheel::Duration;
using tickwheel::TimerClock;
using tickwheel::wake;

std::int64_t mono_ns() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

// c2: does with_deadline(rt, TimePoint, x) compile for awaitable X? (A
// template, so that a refused call is "false", not an error.)
template <class R, class X>
constexpr bool kTimePointOk = requires(R& rt, X&& x) {
    tickwheel::with_deadline(rt, tickwheel::TimePoint{}, std::move(x));
};
constexpr bool kMixedClockCompiles = kTimePointOk<tickwheel::Runtime, tickwheel::clock_sleep_awaiter>;

// ---- the thread's context (what a resumption records) --------------------
thread_local Where t_where;
thread_local std::minstd_rand t_fuzz{1};

// ---- one record per co_await ---------------------------------------------
struct Rec {
    Wait w;
    std::stop_source ss{std::nostopstate};
    std::atomic<bool> ready{false};
    std::atomic<bool> stop_claimed{false};
    std::atomic<bool> destroyed{false};
    std::atomic<int> resumed{0};
    std::atomic<bool> armed_seen{false};
};

struct Slot {
    std::atomic<std::uint64_t> phase{0};  // (wait index + 1) << 2 | 0 running, 1 arming, 2 suspended, 3 destroying
    std::atomic<void*> frame{nullptr};    // the coroutine's handle address while alive
    std::atomic<bool> alive{false};
    std::atomic<std::uint32_t> coro{0};
    tickwheel::event ev;
};

// A queue and its id, read together (a slot's queue is replaced after a close).
struct QRef {
    tickwheel::Queue* q = nullptr;
    std::int32_t id = -1;
};
struct QSlot {
    std::mutex m;  // closes, and destroys of its waits, under it (real runtime)
    std::atomic<QRef*> ref{nullptr};  // null once the runtime is shut down
    tickwheel::Queue* q() const noexcept {
        const QRef* r = ref.load(std::memory_order_acquire);
        return r != nullptr ? r->q : nullptr;
    }
    std::int32_t id() const noexcept {
        const QRef* r = ref.load(std::memory_order_acquire);
        return r != nullptr ? r->id : -1;
    }
};

struct Run;
Run* g = nullptr;  // the run in progress (hooks and coroutines reach it here)

// ---- frames: from a quarantine -------------------------------------------
// Every frame, when freed, is zero-filled and kept: a frame destroyed while
// it waited (the destroyer marks its header) until the end of the run, the
// others (coroutines that finished) in a ring of the last kKeep. Each is
// checked for writes when it is let go.
struct Quarantine {
    std::mutex m;
    std::deque<std::pair<unsigned char*, std::size_t>> dead;       // finished: the last kKeep
    std::vector<std::pair<unsigned char*, std::size_t>> destroyed;  // destroyed while waiting: all
    std::vector<std::string> complaints;
    static constexpr std::size_t kHeader = 16, kKeep = 2000;
    static constexpr std::size_t kMarkAt = 12;  // header byte: 1 = destroyed while waiting
    void check_one(const std::pair<unsigned char*, std::size_t>& d) {
        for (std::size_t i = kHeader; i < d.second; ++i)
            if (d.first[i] != 0) {
                std::uint32_t coro = 0;
                std::memcpy(&coro, d.first + 8, sizeof coro);
                char b[240];
                std::snprintf(b, sizeof b,
                              "WRITE AFTER DESTRUCTION: the frame of coroutine %u (%s) was written after it was freed "
                              "(byte %zu of %zu is 0x%02x)",
                              coro, d.first[kMarkAt] != 0 ? "destroyed while it waited" : "finished", i - kHeader,
                              d.second - kHeader, d.first[i]);
                complaints.emplace_back(b);
                break;
            }
        std::free(d.first);
    }
    void put(unsigned char* p, std::size_t n) {
        std::lock_guard<std::mutex> lk(m);
        if (p[kMarkAt] != 0) {
            destroyed.emplace_back(p, n);
            return;
        }
        dead.emplace_back(p, n);
        if (dead.size() > kKeep) {
            check_one(dead.front());
            dead.pop_front();
        }
    }
    void drain() {
        std::lock_guard<std::mutex> lk(m);
        for (auto& d : dead) check_one(d);
        for (auto& d : destroyed) check_one(d);
        dead.clear();
        destroyed.clear();
    }
};
Quarantine* g_quarantine = nullptr;

// g++ 12 warns about the class operator new/delete of coroutine frames
// (-Wmismatched-new-delete, a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
struct task {
    struct promise_type {
        promise_type(std::uint32_t slot, std::uint32_t coro, std::uint64_t) noexcept;
        static void* operator new(std::size_t n) {
            auto* p = static_cast<unsigned char*>(std::malloc(n + Quarantine::kHeader));
            if (p == nullptr) throw std::bad_alloc();
            std::memset(p, 0, Quarantine::kHeader);
            std::memcpy(p, &n, sizeof n);
            return p + Quarantine::kHeader;
        }
        static void operator delete(void* frame) noexcept {
            auto* p = static_cast<unsigned char*>(frame) - Quarantine::kHeader;
            std::size_t n = 0;
            std::memcpy(&n, p, sizeof n);
            std::memset(frame, 0, n);
            g_quarantine->put(p, n + Quarantine::kHeader);
        }
        task get_return_object() noexcept { return {}; }
        std::suspend_never initial_suspend() noexcept { return {}; }
        std::suspend_never final_suspend() noexcept { return {}; }
        void return_void() noexcept {}
        [[noreturn]] void unhandled_exception() noexcept { std::terminate(); }
    };
};

// ---- the awaitable: any shape, tracked ------------------------------------
using S = tickwheel::sleep_awaiter;
using C = tickwheel::clock_sleep_awaiter;
using E = tickwheel::event::awaiter;
template <class X>
using D = tickwheel::deadline_awaiter<X>;
using AnyAw = std::variant<std::monostate, S, C, E, D<S>, D<C>, D<E>, D<D<S>>, D<D<C>>, D<D<E>>>;

thread_local Rec* t_arming = nullptr;  // the wait this thread is arming (for the hook)
// This thread holds a queue slot's lock (real runtime): it takes no other
// (a close under one resumes coroutines inline, whose arming would take
// another: two such threads would wait for each other).
thread_local bool t_holding_qlock = false;
struct QLock {
    std::unique_lock<std::mutex> lk;
    explicit QLock(std::mutex& m) : lk(m) { t_holding_qlock = true; }
    QLock(std::mutex& m, std::try_to_lock_t) : lk(m, std::try_to_lock) { t_holding_qlock = lk.owns_lock(); }
    ~QLock() {
        if (lk.owns_lock()) t_holding_qlock = false;
    }
};

// A named local of the coroutine (in its frame). await_suspend keeps the
// slot's phase: arming, then suspended once the inner await_suspend
// returned true -- unless the coroutine already moved on (a CAS on the
// wait's own value: the frame is not touched after the inner call).
struct Tracked {
    AnyAw aw;
    Slot* slot = nullptr;
    Rec* rec = nullptr;
    std::uint64_t w = 0;  // wait index + 1
    bool went_inline = false;
    Tracked() noexcept {}
    bool await_ready() noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> h) {
        Slot* const s = slot;
        Rec* const r = rec;
        const std::uint64_t me = w << 2;
        s->phase.store(me | 1, std::memory_order_release);
        Rec* const outer = t_arming;
        t_arming = r;
        bool suspended = false;
        try {
            suspended = std::visit(
                [&](auto& a) -> bool {
                    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(a)>, std::monostate>) return false;
                    else return a.await_suspend(h);
                },
                aw);
        } catch (...) {
            t_arming = outer;
            s->phase.store(me, std::memory_order_release);
            throw;
        }
        t_arming = outer;
        if (!suspended) {
            went_inline = true;  // not suspended: the frame is ours
            s->phase.store(me, std::memory_order_release);
            return false;
        }
        std::uint64_t expect = me | 1;
        s->phase.compare_exchange_strong(expect, me | 2, std::memory_order_acq_rel);
        return true;
    }
    wake await_resume() noexcept {
        slot->phase.store(w << 2, std::memory_order_release);
        return std::visit(
            [](auto& a) -> wake {
                if constexpr (std::is_same_v<std::remove_cvref_t<decltype(a)>, std::monostate>) return wake::shutdown;
                else return a.await_resume();
            },
            aw);
    }
};

// ---- executors ---------------------------------------------------------------
struct DequeExecutor : HandleQueue {  // a user executor: one thread (real) or the main thread (manual) drains it
    static void post(void* self, std::coroutine_handle<> h) noexcept { static_cast<DequeExecutor*>(self)->push(h); }
    // Runs what is queued, one at a time (a handle stays in the deque until
    // it runs, so that a destroyer can take it out); false if nothing was.
    bool drain_once() {
        bool ran = false;
        t_where.in_executor = true;
        for (;;) {
            std::coroutine_handle<> h;
            {
                std::lock_guard<std::mutex> lk(m);
                if (q.empty()) break;
                h = q.front();
                q.pop_front();
            }
            ran = true;
            h.resume();
        }
        t_where.in_executor = false;
        return ran;
    }
    // Manual: takes a posted handle out (to destroy it instead).
    bool take(void* frame) {
        std::lock_guard<std::mutex> lk(m);
        for (auto it = q.begin(); it != q.end(); ++it)
            if (it->address() == frame) {
                q.erase(it);
                return true;
            }
        return false;
    }
};

#if TW_CORO_HISTORY_ASIO
struct AsioExec {
    asio::io_context io;
    std::mutex m;
    std::set<void*> posted;  // handles posted and not yet run (manual: not to be destroyed)
    static void post(void* self, std::coroutine_handle<> h) noexcept {
        auto* a = static_cast<AsioExec*>(self);
        {
            std::lock_guard<std::mutex> lk(a->m);
            a->posted.insert(h.address());
        }
        asio::post(a->io, [a, h] {
            {
                std::lock_guard<std::mutex> lk(a->m);
                a->posted.erase(h.address());
            }
            h.resume();
        });
    }
    bool is_posted(void* f) {
        std::lock_guard<std::mutex> lk(m);
        return posted.count(f) != 0;
    }
};
#endif

// ---- the run -----------------------------------------------------------------
struct Run {
    Options opt;
    bool manual = false;
    std::unique_ptr<tickwheel::Runtime> rt;
    std::int64_t res_ns = 0;
    std::size_t max_timers = 0;
    std::vector<std::unique_ptr<Slot>> slots;
    static constexpr int kQueues = 2;
    QSlot qs[kQueues];
    std::mutex old_m;
    std::vector<std::unique_ptr<tickwheel::Queue>> queues;  // every queue made (kept until the end)
    std::vector<std::unique_ptr<QRef>> refs;
    std::atomic<std::int32_t> next_qid{0};
    DequeExecutor exec;
#if TW_CORO_HISTORY_ASIO
    AsioExec asio_exec;
#endif
    std::unique_ptr<Rec[]> recs;
    std::size_t cap = 0;
    std::atomic<std::size_t> nrec{0};
    std::atomic<std::uint32_t> next_coro{1};
    std::atomic<bool> ending{false};
    std::atomic<std::int64_t> step{0};  // manual: the time
    std::mutex ev_m;                    // the shared event lists
    std::vector<Notify> notifies;
    std::vector<Close> closes;
    std::vector<Span> holds;
    std::vector<Advance> advances;
    Span shutdown{kNone, kNone};
    std::atomic<long> destroys{0}, closes_n{0}, arming_closes{0};
    std::atomic<int> in_destroy{0};  // destroys in progress (the end waits for them: seq_cst with `ending`)

    std::int64_t now() { return manual ? step.fetch_add(1) + 1 : mono_ns(); }

    Rec* new_rec() {
        const std::size_t i = nrec.fetch_add(1);
        if (i >= cap) return nullptr;
        return &recs[i];
    }

    // ---- queues
    tickwheel::Queue* make_queue(int k) {
        try {
            auto q = std::make_unique<tickwheel::Queue>(*rt);
            auto ref = std::make_unique<QRef>();
            ref->q = q.get();
            ref->id = next_qid.fetch_add(1);
            QRef* r = ref.get();
            {
                std::lock_guard<std::mutex> lk(old_m);
                queues.push_back(std::move(q));
                refs.push_back(std::move(ref));
            }
            qs[k].ref.store(r, std::memory_order_release);
            return r->q;
        } catch (const tickwheel::Error&) {  // shut down
            qs[k].ref.store(nullptr, std::memory_order_release);
            return nullptr;
        }
    }
    // Closes slot k's queue and puts a new one there; the caller holds qs[k].m
    // (real) and is not inside a run of that queue.
    void close_queue(int k) {
        const QRef* ref = qs[k].ref.load(std::memory_order_acquire);
        if (ref == nullptr) return;
        tickwheel::Queue* q = ref->q;
        const std::int32_t id = ref->id;
        Close c;
        c.queue = id;
        const std::int32_t outer = t_where.closing_queue;
        t_where.closing_queue = id;
        c.t0 = now();
        std::error_code ec;
        q->close(ec);
        c.t1 = now();
        t_where.closing_queue = outer;
        if (ec) return;  // would_deadlock: not from inside its own run (not taken)
        {
            std::lock_guard<std::mutex> lk(ev_m);
            closes.push_back(c);
        }
        closes_n.fetch_add(1);
        make_queue(k);
    }

    // ---- stops and notifies
    void stop(Rec& r) {
        if (!r.ready.load(std::memory_order_acquire) || r.w.stop_mode != kStopLater) return;
        if (r.stop_claimed.exchange(true, std::memory_order_acq_rel)) return;
        r.w.stop_t0 = now();
        r.ss.request_stop();
        r.w.stop_t1 = now();
    }
    void notify(std::uint32_t slot) {
        Notify n;
        n.slot = slot;
        n.t0 = now();
        slots[slot]->ev.notify();
        n.t1 = now();
        std::lock_guard<std::mutex> lk(ev_m);
        notifies.push_back(n);
    }
    Rec* current(std::uint32_t slot) {
        const std::uint64_t ph = slots[slot]->phase.load(std::memory_order_acquire);
        if ((ph >> 2) == 0) return nullptr;
        return &recs[(ph >> 2) - 1];
    }

    // ---- destruction: the caller has checked that nothing can decide the
    // wait meanwhile (the contract's condition). Returns true if destroyed.
    bool destroy(std::uint32_t slot_i, bool (*may)(Run&, const Rec&, void* frame)) {
        in_destroy.fetch_add(1);
        const bool done = !ending.load() && destroy_now(slot_i, may);
        in_destroy.fetch_sub(1);
        return done;
    }
    bool destroy_now(std::uint32_t slot_i, bool (*may)(Run&, const Rec&, void* frame)) {
        Slot& s = *slots[slot_i];
        std::uint64_t ph = s.phase.load(std::memory_order_acquire);
        if ((ph & 3) != 2) return false;
        Rec& r = recs[(ph >> 2) - 1];
        if (!r.ready.load(std::memory_order_acquire)) return false;
        void* frame = s.frame.load(std::memory_order_acquire);
        if (frame == nullptr || !may(*this, r, frame)) return false;
        if (!s.phase.compare_exchange_strong(ph, (ph & ~std::uint64_t{3}) | 3, std::memory_order_acq_rel)) return false;
        r.w.destroy_t0 = now();
        r.destroyed.store(true, std::memory_order_release);
        static_cast<unsigned char*>(frame)[-std::ptrdiff_t(Quarantine::kHeader) + std::ptrdiff_t(Quarantine::kMarkAt)] = 1;
        std::coroutine_handle<>::from_address(frame).destroy();
        r.w.destroy_t1 = now();
        s.frame.store(nullptr, std::memory_order_release);
        s.alive.store(false, std::memory_order_release);
        destroys.fetch_add(1);
        return true;
    }

    void spawn(std::uint32_t slot);
};


task::promise_type::promise_type(std::uint32_t slot, std::uint32_t coro, std::uint64_t) noexcept {
    Slot& s = *g->slots[slot];
    s.frame.store(std::coroutine_handle<promise_type>::from_promise(*this).address(), std::memory_order_release);
    auto* hdr = static_cast<unsigned char*>(std::coroutine_handle<promise_type>::from_promise(*this).address()) -
                Quarantine::kHeader;
    std::memcpy(hdr + 8, &coro, sizeof coro);
}

// ---- building one wait ---------------------------------------------------------
struct Spec {
    std::uint8_t kind = kSleepFor, clock = 0, ctx = kOnWorker, stop_mode = kNoStop;
    bool victim = false;
    int qslot = -1;
    tickwheel::Queue* queue = nullptr;
    std::int32_t queue_id = -1;
    std::int64_t d = 0;     // sleep_for delay, or sleep_until's offset from now
    int nlim = 0;
    bool lim_tp[2] = {false, false};
    std::int64_t lim[2] = {0, 0};  // Duration, or the TimePoint's offset from now (monotonic)
};

template <class R, class X>
void wrap(R& rt, AnyAw& out, X&& x, const Spec& sp, int level, Rec& rec) {
    using T = std::remove_cvref_t<X>;
    if (level == sp.nlim) {
        if constexpr (std::is_constructible_v<AnyAw, std::in_place_type_t<T>, T&&>) out.template emplace<T>(std::move(x));
        return;
    } else if constexpr (!std::is_same_v<T, D<D<S>>> && !std::is_same_v<T, D<D<C>>> && !std::is_same_v<T, D<D<E>>>) {
        if constexpr (kTimePointOk<R, T>) {
            if (sp.lim_tp[level]) {
                const std::int64_t at = rec.w.own_before[0] + sp.lim[level];
                rec.w.limit_tp = std::min(rec.w.limit_tp, at);
                wrap(rt, out, tickwheel::with_deadline(rt, tickwheel::TimePoint(Duration(at)), std::move(x)), sp, level + 1, rec);
                return;
            }
        }
        {
            rec.w.limit_d[level] = sp.lim[level];
            wrap(rt, out, tickwheel::cancel_after(rt, Duration(sp.lim[level]), std::move(x)), sp, level + 1, rec);
        }
    }
}

Spec draw(Run& run, std::mt19937_64& rng, std::uint32_t slot) {
    Spec sp;
    auto pct = [&] { return unsigned(rng() % 100); };
    const unsigned c = pct();
    sp.ctx = c < 35 ? kOnWorker : c < 70 ? kOnQueue : c < 85 ? kOnExecutor : kOnAsio;
#if !TW_CORO_HISTORY_ASIO
    if (sp.ctx == kOnAsio) sp.ctx = kOnExecutor;
#endif
    if (sp.ctx == kOnQueue) {
        sp.qslot = int(rng() % Run::kQueues);
        const QRef* ref = run.qs[sp.qslot].ref.load(std::memory_order_acquire);
        if (ref == nullptr) {
            sp.ctx = kOnWorker;
        } else {
            sp.queue = ref->q;
            sp.queue_id = ref->id;
        }
    }
    const unsigned k = pct();
    sp.kind = k < 40 ? kSleepFor : k < 70 ? kSleepUntil : kEventWait;
    if (sp.kind == kSleepUntil) sp.clock = std::uint8_t(rng() % 3);
    const unsigned dd = pct();
    sp.d = dd < 10 ? 0 : dd < 15 ? -std::int64_t(rng() % 5'000'000) : std::int64_t(rng() % 20'000'000);
    const unsigned s = pct();
    sp.stop_mode = s < 40 ? kNoStop : s < 50 ? kStopBefore : s < 60 ? kStopArming : kStopLater;
    const unsigned l = pct();
    sp.nlim = l < 50 ? 0 : l < 85 ? 1 : 2;
    for (int i = 0; i < sp.nlim; ++i) {
        const bool steady = sp.kind != kSleepUntil || kMixedClockCompiles;
        sp.lim_tp[i] = steady && rng() % 3 == 0;
        sp.lim[i] = std::int64_t(rng() % 25'000'000);
    }
    // A victim: a far sleep that only a destruction (or the shutdown) ends.
    if (!run.manual && sp.ctx != kOnQueue && pct() < 6) {
        sp.victim = true;
        sp.kind = kSleepFor;
        sp.clock = 0;
        sp.d = std::int64_t(3600) * 1'000'000'000;
        sp.nlim = 0;
        sp.stop_mode = kNoStop;
    }
    (void)slot;
    return sp;
}

// Fills `t.aw` for the spec and the record's description of it.
void build(Run& run, Tracked& t, const Spec& sp, Rec& r, std::uint32_t slot) {
    tickwheel::Runtime& rt = *run.rt;
    Wait& w = r.w;
    w.kind = sp.kind;
    w.clock = sp.clock;
    w.ctx = sp.ctx;
    w.stop_mode = sp.stop_mode;
    w.victim = sp.victim;
    for (int c = 0; c < 3; ++c) w.own_before[c] = rt.now(TimerClock(c)).count();
    tickwheel::resume_on where = tickwheel::on_worker();
    if (sp.ctx == kOnQueue) {
        where = tickwheel::on_queue(*sp.queue);
        w.queue = sp.queue_id;
    } else if (sp.ctx == kOnExecutor) {
        where = tickwheel::on_executor(&run.exec, &DequeExecutor::post);
#if TW_CORO_HISTORY_ASIO
    } else if (sp.ctx == kOnAsio) {
        where = tickwheel::on_executor(&run.asio_exec, &AsioExec::post);
#endif
    }
    std::stop_token st;
    if (sp.stop_mode != kNoStop) {
        r.ss = std::stop_source();
        st = r.ss.get_token();
    }
    if (sp.kind == kSleepFor) {
        w.delay = std::max<std::int64_t>(sp.d, 0);
        w.natural = w.own_before[0] + w.delay;
        wrap(rt, t.aw, tickwheel::sleep_for(rt, Duration(sp.d), where, st), sp, 0, r);
    } else if (sp.kind == kSleepUntil) {
        w.natural = w.own_before[sp.clock] + sp.d;
        wrap(rt, t.aw, tickwheel::sleep_until(rt, TimerClock(sp.clock), Duration(w.natural), where, st), sp, 0, r);
    } else {
        wrap(rt, t.aw, run.slots[slot]->ev.wait(rt, where, st), sp, 0, r);
    }
}

// In-run destruction (real runtime): a coroutine resumed inside q.run()
// destroys another wait of the same queue, if its queue slot's lock is free.
bool may_destroy_queue_mate(Run&, const Rec& r, void*) {
    return r.w.ctx == kOnQueue && r.w.queue == t_where.run_queue && !r.w.victim;
}
// Manual runtime: anything suspended, except a wake-up posted to Asio (a
// handle posted to the deque executor is taken out and destroyed instead).
bool may_destroy_manual(Run& run, const Rec& r, void* frame) {
    (void)r;
#if TW_CORO_HISTORY_ASIO
    if (run.asio_exec.is_posted(frame)) return false;
#endif
    run.exec.take(frame);
    return true;
}

task body(std::uint32_t slot, std::uint32_t coro, std::uint64_t seed) {
    Run& run = *g;
    Slot& s = *run.slots[slot];
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + coro);
    for (;;) {
        if (run.ending.load(std::memory_order_acquire)) break;
        Rec* r = run.new_rec();
        if (r == nullptr) break;
        const std::uint64_t idx = std::uint64_t(r - &run.recs[0]);
        Tracked t;
        const Spec sp = draw(run, rng, slot);
        r->w.slot = slot;
        r->w.coro = coro;
        build(run, t, sp, *r, slot);
        t.slot = &s;
        t.rec = r;
        t.w = idx + 1;
        r->w.t_call = run.now();
        r->ready.store(true, std::memory_order_release);
        s.phase.store((idx + 1) << 2, std::memory_order_release);
        if (sp.stop_mode == kStopBefore && !r->stop_claimed.exchange(true)) {
            r->w.stop_t0 = run.now();
            r->ss.request_stop();
            r->w.stop_t1 = run.now();
        }
        try {
            const wake why = co_await t;
            r->w.t_resume = run.now();
            r->w.own_resume = run.rt->now(TimerClock(r->w.clock)).count();
            r->w.own_resume_mono = run.rt->now(TimerClock::monotonic).count();
            r->w.where = t_where;
            r->w.where.inline_ = t.went_inline;
            r->w.why = std::uint8_t(why);
            r->w.outcome = kWoke;
        } catch (const tickwheel::Error& e) {
            r->w.t_resume = run.now();
            r->w.err = e.code().value();
            r->w.where = t_where;
            r->w.outcome = kThrew;
        }
        r->resumed.fetch_add(1, std::memory_order_acq_rel);
        if (r->w.outcome == kThrew) break;  // (a failed start would fail again at once: end, a new one comes)
        // Now and then destroy another coroutine from in here.
        if (rng() % 64 == 0 && !run.ending.load()) {
            const std::uint32_t victim = std::uint32_t(rng() % run.slots.size());
            if (victim != slot) {
                if (run.manual) {
                    run.destroy(victim, &may_destroy_manual);
                } else if (t_where.run_queue >= 0 && !t_holding_qlock) {
                    for (auto& q : run.qs)
                        if (q.id() == t_where.run_queue) {
                            const QLock lk(q.m, std::try_to_lock);
                            if (lk.lk.owns_lock()) run.destroy(victim, &may_destroy_queue_mate);
                        }
                }
            }
        }
    }
    s.phase.store(0, std::memory_order_release);
    s.frame.store(nullptr, std::memory_order_release);
    s.alive.store(false, std::memory_order_release);
}

void Run::spawn(std::uint32_t slot) {
    Slot& s = *slots[slot];
    if (s.alive.load(std::memory_order_acquire) || ending.load()) return;
    s.alive.store(true, std::memory_order_release);
    const std::uint32_t coro = next_coro.fetch_add(1);
    s.coro.store(coro);
    body(slot, coro, opt.seed);
}

// ---- the hooks ---------------------------------------------------------------
}  // namespace

void hook_fuzz(char site) {
    if (g == nullptr || g->opt.fuzz == 0 || g->manual) return;
    const unsigned f = g->opt.fuzz;
    const unsigned x = unsigned(t_fuzz() % 65536);
    const bool window = site == 'a' || site == 'r';  // the arming window, a re-post: wider
    if (x < (window ? 8u : 1u) * f / 1) {
        std::this_thread::sleep_for(std::chrono::microseconds(1 + t_fuzz() % (window ? 400 : 50)));
    } else if (x < 64u * f) {
        std::this_thread::yield();
    }
}

void hook_armed(const std::atomic<std::uint32_t>&) {
    Rec* r = t_arming;
    if (g == nullptr || r == nullptr) return;
    Run& run = *g;
    if (r->armed_seen.exchange(true)) {  // a re-post: only the fuzz
        hook_fuzz('a');
        return;
    }
    r->w.t_armed = run.now();
    if (r->w.stop_mode == kStopArming && !r->stop_claimed.exchange(true)) {
        r->w.stop_t0 = run.now();
        r->ss.request_stop();
        r->w.stop_t1 = run.now();
    }
    const unsigned x = unsigned(t_fuzz() % 1000);
    if (r->w.kind == kEventWait && x < 150) run.notify(r->w.slot);
    // A close of its queue during arming (c5): not from inside a run (two
    // closes inside each other's runs would wait for each other).
    if (r->w.ctx == kOnQueue && x >= 900 && x < (run.manual ? 960u : 925u) && t_where.run_queue == -1 &&
        !t_holding_qlock && !run.ending.load()) {
        for (int k = 0; k < Run::kQueues; ++k)
            if (run.qs[k].id() == r->w.queue) {
                if (run.manual) {
                    run.close_queue(k);
                } else {
                    const QLock lk(run.qs[k].m);
                    if (run.qs[k].id() == r->w.queue) run.close_queue(k);
                }
                run.arming_closes.fetch_add(1);
            }
    }
    hook_fuzz('a');
}

namespace {

// ---- the real runtime ------------------------------------------------------
thread_local std::int32_t t_my_queue = -1;
bool may_destroy_mine(Run&, const Rec& r, void*) { return r.w.ctx == kOnQueue && !r.w.victim && r.w.queue == t_my_queue; }
bool may_destroy_victim(Run&, const Rec& r, void*) { return r.w.victim; }

// A queue's thread: its only runner. Between runs, under the queue slot's
// lock, it destroys suspended waits of its queue (nothing can decide them
// meanwhile: they are decided inside this thread's runs, by a close -- under
// the same lock -- or by the shutdown, which comes after the destroys end)
// and now and then closes the queue and puts a new one in its place.
void real_runner(Run& run, int k, std::atomic<bool>& quit, std::uint64_t seed) {
    t_where = Where{};
    t_where.ours = true;
    t_fuzz.seed(std::uint32_t(seed * 31 + 7 + unsigned(k)));
    std::mt19937_64 rng(seed * 1000003u + 77u + unsigned(k));
    auto last_close = std::chrono::steady_clock::now();
    while (!quit.load()) {
        if (!run.ending.load()) {
            const QLock lk(run.qs[k].m);
            t_my_queue = run.qs[k].id();
            for (int tries = 0; tries < 4; ++tries) run.destroy(std::uint32_t(rng() % run.slots.size()), &may_destroy_mine);
            if (std::chrono::steady_clock::now() - last_close > 250ms && rng() % 8 == 0) {
                run.close_queue(k);
                last_close = std::chrono::steady_clock::now();
            }
        }
        const QRef* ref = run.qs[k].ref.load(std::memory_order_acquire);
        if (ref == nullptr) {
            std::this_thread::sleep_for(1ms);
            continue;
        }
        tickwheel::Queue* q = ref->q;
        t_where.run_queue = ref->id;
        std::error_code ec;
        q->run(64, 1ms, ec);
        t_where.run_queue = -1;
        if (ec && run.rt->is_shut_down()) break;
    }
}

// Spawns coroutines into free slots, stops waits (those that asked for a
// later stop; some already resumed), notifies events, destroys victims.
void real_driver(Run& run, int d, std::atomic<bool>& quit, std::uint64_t seed) {
    t_where = Where{};
    t_where.ours = true;
    t_fuzz.seed(std::uint32_t(seed * 131 + 3 + unsigned(d)));
    std::mt19937_64 rng(seed * 7919u + 11u + unsigned(d));
    const std::uint32_t n = std::uint32_t(run.slots.size());
    while (!quit.load()) {
        if (!run.ending.load()) {
            for (std::uint32_t i = unsigned(d); i < n; i += 2) run.spawn(i);
            for (int j = 0; j < 6; ++j)
                if (Rec* r = run.current(std::uint32_t(rng() % n))) run.stop(*r);
            for (int j = 0; j < 3; ++j) run.notify(std::uint32_t(rng() % n));
            if (rng() % 4 == 0) run.destroy(std::uint32_t(rng() % n), &may_destroy_victim);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50 + rng() % 400));
    }
}

// Starts hour-long timers (held) until the runtime refuses one: its
// max_timers are all taken.
void hold_every_slot(Run& run, std::vector<tickwheel::Timer>& held) {
    std::error_code ec;
    for (;;) {
        tickwheel::StartOptions o;
        o.delay = 1h;
        const tickwheel::Timer t = run.rt->start(o, tickwheel::detail::Callback([] {}), ec);
        if (ec) break;
        held.push_back(t);
    }
}

// Fills the runtime up to max_timers, holds it there 1..4 ms, lets go.
void real_ballast(Run& run, std::atomic<bool>& quit, std::uint64_t seed) {
    t_where = Where{};
    t_where.ours = true;
    std::mt19937_64 rng(seed * 104729u + 5u);
    std::vector<tickwheel::Timer> held;
    while (!quit.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 60));
        if (run.ending.load()) continue;
        Span s;
        s.t0 = run.now();
        hold_every_slot(run, held);
        std::this_thread::sleep_for(std::chrono::microseconds(1000 + rng() % 3000));
        for (auto& t : held) run.rt->stop(t);
        held.clear();
        s.t1 = run.now();
        std::lock_guard<std::mutex> lk(run.ev_m);
        run.holds.push_back(s);
    }
}

void run_real(Run& run) {
    tickwheel::Config c;
    c.resolution = std::chrono::microseconds(250);
    c.max_timers = run.slots.size() * 2 + 64;
    run.max_timers = c.max_timers;
    run.res_ns = c.resolution.count();
    run.rt = std::make_unique<tickwheel::Runtime>(c);
    for (int k = 0; k < Run::kQueues; ++k) run.make_queue(k);
    std::atomic<bool> quit_runners{false}, quit_drivers{false}, quit_exec{false};
    std::thread exec_thread([&] {
        t_where = Where{};
        t_where.ours = true;
        std::unique_lock<std::mutex> lk(run.exec.m);
        for (;;) {
            run.exec.cv.wait_for(lk, 5ms, [&] { return !run.exec.q.empty() || quit_exec.load(); });
            if (run.exec.q.empty() && quit_exec.load()) return;
            lk.unlock();
            run.exec.drain_once();
            lk.lock();
        }
    });
#if TW_CORO_HISTORY_ASIO
    auto guard = asio::make_work_guard(run.asio_exec.io);
    std::thread asio_thread([&] {
        t_where = Where{};
        t_where.ours = true;
        t_where.in_asio = true;
        run.asio_exec.io.run();
    });
#endif
    std::vector<std::thread> threads;
    for (int k = 0; k < Run::kQueues; ++k) threads.emplace_back(real_runner, std::ref(run), k, std::ref(quit_runners), run.opt.seed);
    std::vector<std::thread> drivers;
    for (int d = 0; d < 2; ++d) drivers.emplace_back(real_driver, std::ref(run), d, std::ref(quit_drivers), run.opt.seed);
    drivers.emplace_back(real_ballast, std::ref(run), std::ref(quit_drivers), run.opt.seed);

    t_where = Where{};
    t_where.ours = true;
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(run.opt.seconds);
    while (std::chrono::steady_clock::now() < end && run.nrec.load() < run.cap) std::this_thread::sleep_for(5ms);
    // The end: no new waits, no destroys; the short waits end; then the
    // shutdown finds the others (victims, events, queue waits) waiting.
    run.ending.store(true);
    while (run.in_destroy.load() != 0) std::this_thread::yield();
    quit_drivers.store(true);
    for (auto& t : drivers) t.join();
    std::this_thread::sleep_for(30ms);
    t_where.in_shutdown = true;
    run.shutdown.t0 = run.now();
    run.rt->shutdown();
    run.shutdown.t1 = run.now();
    t_where.in_shutdown = false;
    quit_runners.store(true);
    for (auto& t : threads) t.join();
    // Posted wake-ups (executor, Asio) run; then every coroutine has ended.
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    for (;;) {
        bool alive = false;
        for (auto& s : run.slots) alive = alive || s->alive.load();
        if (!alive || std::chrono::steady_clock::now() > give_up) break;
        std::this_thread::sleep_for(1ms);
    }
    quit_exec.store(true);
    run.exec.cv.notify_all();
    exec_thread.join();
#if TW_CORO_HISTORY_ASIO
    guard.reset();
    asio_thread.join();
#endif
}

// ---- the manual runtime: one thread, deterministic ---------------------------
void manual_drain(Run& run) {
    for (bool more = true; more;) {
        more = false;
        for (int k = 0; k < Run::kQueues; ++k) {
            const QRef* ref = run.qs[k].ref.load(std::memory_order_acquire);
            if (ref == nullptr) continue;
            tickwheel::Queue* q = ref->q;
            t_where.run_queue = ref->id;
            std::error_code ec;
            const std::size_t n = q->run(1024, Duration::zero(), ec);
            t_where.run_queue = -1;
            more = more || n > 0;
        }
        more = run.exec.drain_once() || more;
#if TW_CORO_HISTORY_ASIO
        t_where.in_asio = true;
        run.asio_exec.io.restart();
        more = run.asio_exec.io.poll() > 0 || more;
        t_where.in_asio = false;
#endif
    }
}

// One manual advance by `size_ns` and the drain of what it made due,
// recorded (run.advances) for the checker.
void advance_recorded(Run& run, std::int64_t size_ns) {
    Advance a;
    a.size_ns = size_ns;
    t_where.in_advance = true;
    a.t0 = run.now();
    run.rt->advance(Duration(a.size_ns));
    a.t1 = run.now();
    t_where.in_advance = false;
    manual_drain(run);
    a.drained = run.now();
    a.vt_end = run.rt->now(TimerClock::monotonic).count();
    run.advances.push_back(a);
}

void run_manual(Run& run) {
    tickwheel::Config c;
    c.manual_clock = true;
    c.resolution = 1ms;
    c.max_timers = run.slots.size() * 2 + 16;
    run.max_timers = c.max_timers;
    run.res_ns = c.resolution.count();
    run.rt = std::make_unique<tickwheel::Runtime>(c);
    for (int k = 0; k < Run::kQueues; ++k) run.make_queue(k);
    t_where = Where{};
    t_where.ours = true;
    std::mt19937_64 rng(run.opt.seed * 6364136223846793005ull + 1442695040888963407ull);
    const std::uint32_t n = std::uint32_t(run.slots.size());
    std::vector<tickwheel::Timer> held;
    Span hold;
    static const std::int64_t sizes[] = {0, 0, 100'000, 300'000, 500'000, 999'999, 1'000'000, 1'700'000, 5'000'000, 20'000'000};
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(run.opt.seconds);
    for (long it = 0; run.nrec.load() < run.cap; ++it) {
        if ((it & 63) == 0 && std::chrono::steady_clock::now() > end) break;
        const unsigned x = unsigned(rng() % 100);
        if (x < 30) {
            advance_recorded(run, sizes[rng() % (sizeof sizes / sizeof sizes[0])]);
        } else if (x < 45) {
            if (Rec* r = run.current(std::uint32_t(rng() % n))) run.stop(*r);
        } else if (x < 60) {
            run.notify(std::uint32_t(rng() % n));
        } else if (x < 70) {
            run.destroy(std::uint32_t(rng() % n), &may_destroy_manual);
        } else if (x < 73) {
            run.close_queue(int(rng() % Run::kQueues));
        } else if (x < 78) {
            if (held.empty()) {
                hold.t0 = run.now();
                hold_every_slot(run, held);
            } else {
                for (auto& t : held) run.rt->stop(t);
                held.clear();
                hold.t1 = run.now();
                run.holds.push_back(hold);
            }
        } else {
            for (std::uint32_t i = 0; i < n; ++i)
                if (rng() % 4 == 0) run.spawn(i);
        }
    }
    if (!held.empty()) {
        for (auto& t : held) run.rt->stop(t);
        held.clear();
        hold.t1 = run.now();
        run.holds.push_back(hold);
    }
    run.ending.store(true);
    // Let the short waits end (a few advances), then shut down.
    for (int i = 0; i < 5; ++i) {
        advance_recorded(run, 10'000'000);
    }
    t_where.in_shutdown = true;
    run.shutdown.t0 = run.now();
    run.rt->shutdown();
    run.shutdown.t1 = run.now();
    t_where.in_shutdown = false;
    manual_drain(run);
}

int run_one(const Options& opt) {
    Run run;
    Quarantine quarantine;
    g_quarantine = &quarantine;
    run.opt = opt;
    run.manual = opt.manual;
    const unsigned slots = opt.slots != 0 ? opt.slots : (opt.manual ? 96u : 192u);
    for (unsigned i = 0; i < slots; ++i) run.slots.push_back(std::make_unique<Slot>());
    run.cap = opt.manual ? 150'000 : (tw_test::kSanitized ? 100'000 : 250'000);
    run.recs = std::make_unique<Rec[]>(run.cap);
    g = &run;
    t_fuzz.seed(std::uint32_t(opt.seed));
    const auto t0 = std::chrono::steady_clock::now();
    std::printf("coro-history: %s runtime, seed %lu, %.1f s, %u coroutines at once, fuzz %u; with_deadline(TimePoint) over "
                "a wall-clock sleep %s\n",
                opt.manual ? "manual" : "real", opt.seed, opt.seconds, slots, opt.fuzz,
                kMixedClockCompiles ? "COMPILES (exercised)" : "is refused at compile time");
    std::fflush(stdout);
    if (opt.manual) run_manual(run);
    else run_real(run);

    History h;
    h.manual = opt.manual;
    h.resolution_ns = run.res_ns;
    h.late_ns = tw_test::kSanitized ? 4'000'000'000 : 2'500'000'000;
    // Coroutines still suspended now were never resumed: destroy them (the
    // checker reports them LOST) so that the run ends clean.
    long stuck = 0;
    for (std::uint32_t i = 0; i < run.slots.size(); ++i)
        if (run.slots[i]->alive.load()) {
            Rec* r = run.current(i);
            void* frame = run.slots[i]->frame.load();
            if (frame != nullptr && r != nullptr && r->resumed.load() == 0) {
                ++stuck;
                std::coroutine_handle<>::from_address(frame).destroy();
            }
        }
    const std::size_t n = std::min(run.nrec.load(), run.cap);
    h.waits.reserve(n);
    std::size_t woke = 0, threw = 0, destroyed = 0, counts[5] = {0, 0, 0, 0, 0};
    for (std::size_t i = 0; i < n; ++i) {
        Rec& r = run.recs[i];
        if (!r.ready.load()) continue;
        Wait w = r.w;
        w.resumed = r.resumed.load();
        if (r.destroyed.load()) w.outcome = kDestroyed;
        if (w.outcome == kWoke) ++woke, ++counts[w.why % 5];
        if (w.outcome == kThrew) ++threw;
        if (w.outcome == kDestroyed) ++destroyed;
        h.waits.push_back(w);
    }
    h.notifies = run.notifies;
    h.closes = run.closes;
    h.holds = run.holds;
    h.advances = run.advances;
    h.shutdown = run.shutdown;
    for (auto& s : run.slots) h.event_set_at_end.push_back(s->ev.is_set() ? 1 : 0);
    const auto st = run.rt->stats();
    if (st.live != 0) {
        char b[160];
        std::snprintf(b, sizeof b, "LEAK: %llu timers still alive after the shutdown (a release hook never ran)",
                      static_cast<unsigned long long>(st.live));
        h.run_complaints.emplace_back(b);
    }
    run.rt.reset();
    {
        std::lock_guard<std::mutex> lk(run.old_m);
        run.queues.clear();
    }
    quarantine.drain();
    for (auto& c : quarantine.complaints) h.run_complaints.push_back(c);
    g = nullptr;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("coro-history: %zu waits in %.2f s: %zu resumed (expired %zu, stopped %zu, shutdown %zu, timed_out %zu, "
                "notified %zu), %zu threw, %zu frames destroyed while waiting; %zu notifies, %zu queue closes (%ld during "
                "arming), %zu limit holds, %zu advances, %ld never resumed\n",
                h.waits.size(), secs, woke, counts[0], counts[1], counts[2], counts[3], counts[4], threw, destroyed,
                h.notifies.size(), h.closes.size(), run.arming_closes.load(), h.holds.size(), h.advances.size(), stuck);
    unsigned reports = 4;
    if (const char* e = std::getenv("TW_HISTORY_REPORTS")) reports = unsigned(std::atoi(e));
    const std::size_t bad = check(h, reports);
    std::printf("coro-history: %s (%zu violation%s)\n", bad == 0 ? "OK" : "FAILED", bad, bad == 1 ? "" : "s");
    return bad == 0 ? 0 : 1;
}
}  // namespace

int run(const Options& opt) { return run_one(opt); }

}  // namespace stress::coro_history
