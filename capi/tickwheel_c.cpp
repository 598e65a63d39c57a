// SPDX-License-Identifier: MIT OR Apache-2.0
// The C API (include/tickwheel/tickwheel.h), on top of tickwheel::Runtime.
// The exported tw_* symbols are defined in exports.cpp and call these.
//
// Every function is noexcept and catches everything at the boundary:
// std::bad_alloc -> TW_ENOMEM, tickwheel::Error -> its code negated, a
// std::system_error from thread creation -> TW_ENOMEM, anything else ->
// TW_EINVAL. A C callback + arg + release hook travel as CFunctor, three
// pointers that fit the 24 inline bytes of detail::Callback (no heap
// allocation per timer); its destructor is the release hook.
#include "capi_impl.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <limits>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "runtime/clock.hpp"
#include "runtime/error_detail.hpp"
#include "tickwheel/runtime.hpp"

/// Records the detail of error `code` (printf format) and evaluates to code.
#define TW_FAIL(code, ...) (::tickwheel::capi::set_detail((code), __VA_ARGS__), (code))

namespace {

// tw_runtime.state: live or shut down (TW_ESHUTDOWN). A destroyed runtime
// is freed memory: calls on it are undefined, and nothing here pretends to
// detect them.
constexpr std::uint32_t kAlive = 0x74774c56u;  // "twLV"
constexpr std::uint32_t kShut = 0x74775344u;   // "twSD"

/// What a tw_runtime* points to. `struct tw_runtime` itself stays incomplete
/// (as in the header), even here: the ABI dump (abidw) of the tw_* functions
/// then shows an opaque pointer, and the runtime's private layout can change
/// without touching the ABI baseline.
struct CQueue;

struct Handle {
    explicit Handle(tickwheel::Config c) : rt(std::move(c)) {}
    std::atomic<std::uint32_t> state{kAlive};
    tickwheel::Runtime rt;
    // The queues tw_queue_create() made and tw_queue_destroy() has not freed:
    // tw_runtime_destroy() frees them.
    std::mutex queues_mu;
    std::unordered_set<CQueue*> queues;
};

/// What a tw_queue* points to (incomplete in the header, as tw_runtime).
struct CQueue {
    CQueue(Handle* h) : owner(h), q(h->rt) {}
    Handle* const owner;
    tickwheel::Queue q;
};

Handle* handle(tw_runtime* p) noexcept { return reinterpret_cast<Handle*>(p); }
const Handle* handle(const tw_runtime* p) noexcept { return reinterpret_cast<const Handle*>(p); }
CQueue* cqueue(tw_queue* p) noexcept { return reinterpret_cast<CQueue*>(p); }
const CQueue* cqueue(const tw_queue* p) noexcept { return reinterpret_cast<const CQueue*>(p); }

}  // namespace

namespace {

// ---- the contract's numbers, checked against the C++ side ------------------
static_assert(TW_EINVAL == -static_cast<int>(tickwheel::errc::invalid_argument));
static_assert(TW_ENOMEM == -static_cast<int>(tickwheel::errc::no_memory));
static_assert(TW_ENOENT == -static_cast<int>(tickwheel::errc::not_found));
static_assert(TW_EAGAIN == -static_cast<int>(tickwheel::errc::limit_reached));
static_assert(TW_ESHUTDOWN == -static_cast<int>(tickwheel::errc::shutting_down));
static_assert(TW_EDEADLK == -static_cast<int>(tickwheel::errc::would_deadlock));
static_assert(TW_EFORKED == -static_cast<int>(tickwheel::errc::forked));
static_assert(TW_MAX_DELAY_NS == static_cast<std::uint64_t>(tickwheel::kMaxDelay.count()));
static_assert(TW_BURST_MAX_OWED == tickwheel::kBurstMaxOwed);

// ABI 1 layouts (LP64). A change here is an ABI break: structs only grow at
// their end, and these sizes (the minimum a caller may pass) never change.
constexpr std::uint32_t kConfigSizeV1 = 32;
constexpr std::uint32_t kConfigSizeV15 = 40;  // 1.5 appended `name`
constexpr std::uint32_t kConfigSizeV17 = 48;  // 1.7 appended `slot_reserve`
constexpr std::uint32_t kSpecSizeV1 = 56;
constexpr std::uint32_t kStatsSizeV1 = 136;
constexpr std::uint32_t kStatsSizeV17 = 288;  // 1.7 appended the stages, saturation and memory
constexpr std::uint32_t kQueueStatsSizeV12 = 112;  // tw_queue_stats, new in 1.2
constexpr std::uint32_t kSpecSizeV12 = 64;
constexpr std::uint32_t kSpecSizeV13 = 88;
constexpr std::uint32_t kTimerInfoSizeV13 = 64;  // tw_timer_info, new in 1.3
constexpr std::uint32_t kMaxStructSize = 4096;
#if UINTPTR_MAX == UINT64_MAX
static_assert(offsetof(tw_config, max_timers) == 24 && offsetof(tw_config, name) == 32 &&
              kConfigSizeV15 == 40);  // 1.5
static_assert(offsetof(tw_config, slot_reserve) == 40 && sizeof(tw_config) == kConfigSizeV17);  // 1.7
static_assert(offsetof(tw_timer_spec, release) == 48 && kSpecSizeV1 == 56);
static_assert(offsetof(tw_timer_spec, queue) == 56 && kSpecSizeV12 == 64);  // 1.2
static_assert(sizeof(tw_timer_spec) == kSpecSizeV13 && offsetof(tw_timer_spec, period_policy) == 64 &&
              offsetof(tw_timer_spec, clock) == 68 && offsetof(tw_timer_spec, leeway_ns) == 72 &&
              offsetof(tw_timer_spec, group) == 80);  // 1.3
static_assert(sizeof(tw_timer_info) == kTimerInfoSizeV13 && offsetof(tw_timer_info, clock) == 12 &&
              offsetof(tw_timer_info, deadline_ns) == 16 &&
              offsetof(tw_timer_info, missed) == 56);
static_assert(TW_PERIOD_SKIP == static_cast<unsigned>(tickwheel::PeriodPolicy::skip) &&
              TW_PERIOD_DELAY == static_cast<unsigned>(tickwheel::PeriodPolicy::delay) &&
              TW_PERIOD_BURST == static_cast<unsigned>(tickwheel::PeriodPolicy::burst));
static_assert(TW_TIMER_PENDING == static_cast<int>(tickwheel::TimerStatus::pending) &&
              TW_TIMER_DUE == static_cast<int>(tickwheel::TimerStatus::due) &&
              TW_TIMER_RUNNING == static_cast<int>(tickwheel::TimerStatus::running));
static_assert(sizeof(tw_queue_stats) == kQueueStatsSizeV12 && offsetof(tw_queue_stats, run_samples) == 104);
static_assert(offsetof(tw_stats, lateness_samples) == 128 && kStatsSizeV1 == 136);
static_assert(sizeof(tw_stats) == kStatsSizeV17 && offsetof(tw_stats, driver_lateness_p50_ns) == 136 &&
              offsetof(tw_stats, run_duration_samples) == 232 && offsetof(tw_stats, workers_busy) == 240 &&
              offsetof(tw_stats, resident_bytes) == 280);  // 1.7
#endif

/// The C callback, argument and release hook as a timer callable.
class CFunctor {
public:
    CFunctor(tw_callback cb, void* arg, tw_release release) noexcept : cb_(cb), arg_(arg), release_(release) {}
    CFunctor(CFunctor&& o) noexcept
        : cb_(o.cb_), arg_(o.arg_), release_(std::exchange(o.release_, nullptr)) {}
    CFunctor(const CFunctor&) = delete;
    CFunctor& operator=(const CFunctor&) = delete;
    CFunctor& operator=(CFunctor&&) = delete;
    // Destroyed by the runtime (as a release hook: see RuntimeCore::release)
    // exactly once, or never if the start is rejected before it is built.
    ~CFunctor() {
        if (release_ != nullptr) release_(arg_);
    }
    void operator()(tickwheel::Timer t) const { cb_(arg_, t.id()); }

private:
    tw_callback cb_;
    void* arg_;
    tw_release release_;  // nullptr once moved from: released exactly once
};
static_assert(sizeof(CFunctor) <= tickwheel::detail::Callback::kInline,
              "the C callable must be stored inline (no allocation per timer)");
static_assert(std::is_nothrow_move_constructible_v<CFunctor>);

int from_error_code(const std::error_code& ec) noexcept {
    if (!ec) return TW_OK;
    if (ec.category() == tickwheel::error_category()) return -ec.value();
    if (ec == std::errc::not_enough_memory || ec == std::errc::resource_unavailable_try_again) return TW_ENOMEM;
    return TW_EINVAL;
}

/// Maps the exception being handled to a TW_* code. Call only in a catch.
int from_current_exception() noexcept {
    try {
        throw;
    } catch (const std::bad_alloc&) {
        return TW_FAIL(TW_ENOMEM, "out of memory");
    } catch (const tickwheel::Error& e) {
        // what() carries the C++ runtime's detail (taken by Error's constructor).
        const int rc = from_error_code(e.code());
        return TW_FAIL(rc, "%s", e.what());
    } catch (const std::system_error& e) {  // e.g. a thread could not be started
        const int rc = from_error_code(e.code());
        return TW_FAIL(rc == TW_EINVAL ? TW_ENOMEM : rc, "could not start a thread: %s", e.what());
    } catch (...) {
        return TW_FAIL(TW_EINVAL, "an unexpected exception");
    }
}

/// TW_OK for a live runtime; TW_EINVAL for NULL; TW_EFORKED in a fork()
/// child of its creator; TW_ESHUTDOWN for a shut-down one.
int check_runtime(const tw_runtime* p) noexcept {
    if (p == nullptr) return TW_FAIL(TW_EINVAL, "rt is NULL");
    if (handle(p)->rt.is_forked()) [[unlikely]]
        return TW_FAIL(TW_EFORKED, "the runtime \"%s\" was created in the parent of this fork() child",
                       handle(p)->rt.name().c_str());
    const std::uint32_t s = handle(p)->state.load(std::memory_order_acquire);
    if (s == kShut) [[unlikely]]
        return TW_FAIL(TW_ESHUTDOWN, "the runtime \"%s\" is shut down", handle(p)->rt.name().c_str());
    return TW_OK;
}

/// A size-prefixed input struct: at least the ABI-1 size, at most
/// kMaxStructSize, and any bytes past what this library knows are zero.
/// `sizes`: the sizes of the released layouts below `known`, if any; a size
/// between two of them (or between the last and `known`) would cut a field
/// in two and is refused.
/// (in_size_ok(): the size alone, without looking at the bytes.)
bool in_size_ok(std::uint32_t size, std::uint32_t v1, std::size_t known,
                std::initializer_list<std::uint32_t> sizes = {}) noexcept {
    if (size < v1 || size > kMaxStructSize) return false;
    return size >= known || size == v1 || std::find(sizes.begin(), sizes.end(), size) != sizes.end();
}

int check_in_size(const void* p, std::uint32_t size, std::uint32_t v1, std::size_t known,
                  std::initializer_list<std::uint32_t> sizes = {}, const char* what = "size") noexcept {
    if (!in_size_ok(size, v1, known, sizes))
        return TW_FAIL(TW_EINVAL, "%s %u is not a size of this struct (%u, a later release's, or up to 4096 with a zeroed tail)",
                       what, size, v1);
    const auto* bytes = static_cast<const unsigned char*>(p);
    for (std::size_t i = known; i < size; ++i)
        if (bytes[i] != 0)
            return TW_FAIL(TW_EINVAL, "%s is %u: byte %zu, past the %zu this library knows, is not zero (a newer "
                           "header's field this library cannot honour)",
                           what, size, i, known);
    return TW_OK;
}

template <class T>
T copy_in(const T* p) noexcept {
    T v;
    std::memset(&v, 0, sizeof v);
    std::memcpy(&v, p, std::min<std::size_t>(p->size, sizeof v));
    return v;
}

/// std::system_category(), looked up once (a default std::error_code calls
/// it through libstdc++'s PLT on every construction).
const std::error_category& g_system_category = std::system_category();

tickwheel::Duration ns(std::uint64_t v) noexcept {
    return tickwheel::Duration(static_cast<tickwheel::Duration::rep>(v));
}

bool max_delay_ok(std::uint64_t v, const char* what) noexcept {
    if (v <= TW_MAX_DELAY_NS) [[likely]]
        return true;
    tickwheel::capi::set_detail(TW_EINVAL, "%s %llu is above TW_MAX_DELAY_NS (%llu)", what,
                                static_cast<unsigned long long>(v), static_cast<unsigned long long>(TW_MAX_DELAY_NS));
    return false;
}

int stop_impl(tw_runtime* rt, tw_timer id, bool sync) noexcept {
    if (const int rc = check_runtime(rt); rc != TW_OK) return rc;
    const bool stopped = sync ? handle(rt)->rt.stop_sync(id) : handle(rt)->rt.stop(id);
    return stopped ? TW_OK : TW_ENOENT;
}

}  // namespace

namespace tickwheel::capi {

// The exported initialisers serve programs built before they became inline
// in tickwheel.h: those know the ABI-1 layouts only, so these write the
// ABI-1 sizes, whatever sizeof is today (never past an older caller's struct).
void config_init(tw_config* cfg) noexcept {
    if (cfg == nullptr) return;
    std::memset(cfg, 0, kConfigSizeV1);
    cfg->size = kConfigSizeV1;
}

int runtime_create(const tw_config* cfg, tw_runtime** out) noexcept {
    if (out == nullptr) return TW_FAIL(TW_EINVAL, "out is NULL");
    *out = nullptr;
    tw_config c;
    tw_config_init(&c);
    if (cfg != nullptr) {
        if (const int rc = check_in_size(cfg, cfg->size, kConfigSizeV1, sizeof(tw_config), {kConfigSizeV15}, "cfg->size");
            rc != TW_OK)
            return rc;
        c = copy_in(cfg);
    }
    if (const std::uint32_t unknown = c.flags & ~(TW_PIN_SHARDS | TW_CONFIG_MANUAL_CLOCK); unknown != 0)
        return TW_FAIL(TW_EINVAL, "flags 0x%x has unknown bits 0x%x (known: TW_PIN_SHARDS, TW_CONFIG_MANUAL_CLOCK)",
                       c.flags, unknown);
    if (c.shards > 256) return TW_FAIL(TW_EINVAL, "shards %u is above 256", c.shards);
    if (c.workers > 4096) return TW_FAIL(TW_EINVAL, "workers %u is above 4096", c.workers);
    if (c.resolution_ns != 0 && (c.resolution_ns < 1000 || c.resolution_ns > 1000000000))
        return TW_FAIL(TW_EINVAL, "resolution_ns %llu is outside 1000 .. 1000000000 (1 us .. 1 s; 0 = 1 ms)",
                       static_cast<unsigned long long>(c.resolution_ns));
    if (c.max_timers > std::numeric_limits<std::size_t>::max())
        return TW_FAIL(TW_EINVAL, "max_timers %llu is above SIZE_MAX", static_cast<unsigned long long>(c.max_timers));
    try {
        tickwheel::Config config;
        if (c.name != nullptr) config.name = c.name;  // copied
        config.slot_reserve = c.slot_reserve >= std::numeric_limits<std::size_t>::max()
                                  ? tickwheel::kKeepAllSlots
                                  : static_cast<std::size_t>(c.slot_reserve);
        config.shards = c.shards;
        config.workers = c.workers;
        if (c.resolution_ns != 0) config.resolution = ns(c.resolution_ns);
        config.pin_shards = (c.flags & TW_PIN_SHARDS) != 0;
        config.manual_clock = (c.flags & TW_CONFIG_MANUAL_CLOCK) != 0;
        config.max_timers = static_cast<std::size_t>(c.max_timers);
        // "" is a name (kept), NULL asks for a made-up one (issue 34).
        std::optional<tickwheel::rt::NameAsGiven> as_given;
        if (c.name != nullptr && c.name[0] == '\0') as_given.emplace();
        *out = reinterpret_cast<tw_runtime*>(new Handle(std::move(config)));
        return TW_OK;
    } catch (...) {
        return from_current_exception();
    }
}

int runtime_shutdown(tw_runtime* rt) noexcept {
    const int rc = check_runtime(rt);
    if (rc != TW_OK && rc != TW_ESHUTDOWN) return rc;
    std::error_code ec;
    handle(rt)->rt.shutdown(ec);  // would_deadlock from a callback or a release hook: nothing done
    if (ec) return from_error_code(ec);
    handle(rt)->state.store(kShut, std::memory_order_release);
    return TW_OK;
}

/// Frees the queues tw_queue_destroy() did not (the runtime is shut down,
/// or this is a fork() child: ~Queue then cancels nothing and runs no hook).
void free_queues(Handle* h) noexcept {
    for (CQueue* q : h->queues) delete q;
    h->queues.clear();
}

int runtime_destroy(tw_runtime* rt) noexcept {
    if (rt == nullptr) return TW_FAIL(TW_EINVAL, "rt is NULL");
    if (handle(rt)->rt.is_forked()) {  // a fork() child: free the memory only (~Runtime runs nothing)
        free_queues(handle(rt));
        delete handle(rt);
        return TW_OK;
    }
    // Shut down first: from a callback this fails and nothing is freed.
    if (const int rc = runtime_shutdown(rt); rc != TW_OK) return rc;
    Handle* h = handle(rt);
    free_queues(h);
    delete h;
    return TW_OK;
}

int queue_create(tw_runtime* rt, tw_queue** out) noexcept {
    if (out != nullptr) *out = nullptr;
    if (rt == nullptr) return TW_FAIL(TW_EINVAL, "rt is NULL");
    if (out == nullptr) return TW_FAIL(TW_EINVAL, "out is NULL");
    if (const int rc = check_runtime(rt); rc != TW_OK) return rc;
    Handle* h = handle(rt);
    try {
        auto q = std::make_unique<CQueue>(h);
        {
            std::lock_guard<std::mutex> lock(h->queues_mu);
            h->queues.insert(q.get());
        }
        *out = reinterpret_cast<tw_queue*>(q.release());
        return TW_OK;
    } catch (...) {
        return from_current_exception();
    }
}

int queue_fd(const tw_queue* q) noexcept { return q == nullptr ? TW_FAIL(TW_EINVAL, "q is NULL") : cqueue(q)->q.fd(); }

int queue_run(tw_queue* q, std::size_t max, std::int64_t timeout_ns) noexcept {
    if (q == nullptr) return TW_FAIL(TW_EINVAL, "q is NULL");
    if (max == 0) return TW_FAIL(TW_EINVAL, "max is 0 (run at least one callback)");
    max = std::min<std::size_t>(max, static_cast<std::size_t>(std::numeric_limits<int>::max()));
    std::error_code ec;
    const std::size_t n = cqueue(q)->q.run(max, tickwheel::Duration(timeout_ns), ec);
    if (!ec) return static_cast<int>(n);
    const int rc = from_error_code(ec);
    if (rc == TW_EDEADLK)
        return TW_FAIL(rc, "called from inside one of the queue's own callbacks or release hooks (it would wait "
                           "for itself)");
    if (rc == TW_ESHUTDOWN)
        return TW_FAIL(rc, "the runtime is shut down, or the queue was destroyed, and no callback ran");
    if (rc == TW_EFORKED) return TW_FAIL(rc, "the queue was created in the parent of this fork() child");
    return rc;
}

int queue_destroy(tw_queue* q) noexcept {
    if (q == nullptr) return TW_FAIL(TW_EINVAL, "q is NULL");
    CQueue* cq = cqueue(q);
    std::error_code ec;
    cq->q.close(ec);  // would_deadlock from one of its callbacks: nothing done
    if (ec) {
        const int rc = from_error_code(ec);
        if (rc == TW_EDEADLK)
            return TW_FAIL(rc, "called from inside one of the queue's own callbacks or release hooks: nothing done");
        return rc;
    }
    {
        std::lock_guard<std::mutex> lock(cq->owner->queues_mu);
        cq->owner->queues.erase(cq);
    }
    delete cq;
    return TW_OK;
}

int queue_get_stats(tw_queue* q, tw_queue_stats* out) noexcept {
    if (q == nullptr) return TW_FAIL(TW_EINVAL, "q is NULL");
    if (out == nullptr) return TW_FAIL(TW_EINVAL, "out is NULL");
    const std::uint32_t size = out->size;
    if (size < kQueueStatsSizeV12 || size > kMaxStructSize)
        return TW_FAIL(TW_EINVAL, "out->size %u is outside %u .. 4096 (use tw_queue_stats_init())", size,
                       kQueueStatsSizeV12);
    if (cqueue(q)->owner->rt.is_forked())
        return TW_FAIL(TW_EFORKED, "the queue was created in the parent of this fork() child");
    const tickwheel::QueueStats st = cqueue(q)->q.stats();
    tw_queue_stats v;
    std::memset(&v, 0, sizeof v);
    v.runners = static_cast<std::uint32_t>(st.runners);
    v.due = st.due;
    v.delivered = st.delivered;
    v.ran = st.ran;
    v.signal_p50_ns = static_cast<std::uint64_t>(st.signal_p50.count());
    v.signal_p99_ns = static_cast<std::uint64_t>(st.signal_p99.count());
    v.signal_p999_ns = static_cast<std::uint64_t>(st.signal_p999.count());
    v.signal_max_ns = static_cast<std::uint64_t>(st.signal_max.count());
    v.signal_samples = st.signal_samples;
    v.run_p50_ns = static_cast<std::uint64_t>(st.run_p50.count());
    v.run_p99_ns = static_cast<std::uint64_t>(st.run_p99.count());
    v.run_p999_ns = static_cast<std::uint64_t>(st.run_p999.count());
    v.run_max_ns = static_cast<std::uint64_t>(st.run_max.count());
    v.run_samples = st.run_samples;
    const std::uint32_t filled = std::min<std::uint32_t>(size, sizeof v);
    v.size = filled;
    std::memcpy(out, &v, filled);
    if (size > filled) std::memset(reinterpret_cast<unsigned char*>(out) + filled, 0, size - filled);
    return TW_OK;
}

}  // namespace tickwheel::capi

namespace {
/// A runtime's clocks as a start call reads them to check absolute
/// deadlines: each clock once per call, when first needed.
class OwnClocks {
public:
    explicit OwnClocks(tw_runtime* rt) noexcept : rt_(rt) {}
    std::uint64_t now(int clock) noexcept {
        const auto c = static_cast<unsigned>(clock);
        if (value_[c] == 0)
            value_[c] = static_cast<std::uint64_t>(handle(rt_)->rt.now(static_cast<tickwheel::TimerClock>(c)).count());
        return value_[c];
    }

private:
    tw_runtime* rt_;
    std::uint64_t value_[3] = {};
};

/// The StartOptions of spec `s` (copied in) for a start on rt, or TW_EINVAL
/// for anything tw_timer_start_ex() refuses without calling the hook
/// (besides the size, the runtime and `out`, which its callers check).
int options_from_spec(tw_runtime* rt, const tw_timer_spec& s, OwnClocks& own, tickwheel::StartOptions& o) noexcept {
    if (s.callback == nullptr) return TW_FAIL(TW_EINVAL, "callback is NULL");
    if (s.shard < -1) return TW_FAIL(TW_EINVAL, "shard %d is below -1", s.shard);
    if (s.deadline_ns > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        return TW_FAIL(TW_EINVAL, "deadline_ns %llu is above INT64_MAX", static_cast<unsigned long long>(s.deadline_ns));
    if (!max_delay_ok(s.delay_ns, "delay_ns") || !max_delay_ok(s.period_ns, "period_ns") ||
        !max_delay_ok(s.leeway_ns, "leeway_ns"))
        return TW_EINVAL;
    if (s.period_policy > TW_PERIOD_BURST)
        return TW_FAIL(TW_EINVAL, "period_policy %u is not TW_PERIOD_SKIP (0), TW_PERIOD_DELAY (1) or TW_PERIOD_BURST (2)",
                       s.period_policy);
    if (s.clock != TW_CLOCK_MONOTONIC && s.clock != TW_CLOCK_BOOTTIME && s.clock != TW_CLOCK_REALTIME)
        return TW_FAIL(TW_EINVAL,
                       "clock %d is not TW_CLOCK_MONOTONIC (0), TW_CLOCK_BOOTTIME (1) or TW_CLOCK_REALTIME (2)", s.clock);
    if (s.queue != nullptr && cqueue(s.queue)->owner != handle(rt))  // another runtime's
        return TW_FAIL(TW_EINVAL, "queue belongs to another runtime (\"%s\", not \"%s\")",
                       cqueue(s.queue)->owner->rt.name().c_str(), handle(rt)->rt.name().c_str());
    o = tickwheel::StartOptions{};
    if (s.deadline_ns != 0) {
        // On the timer's own clock (the machine's: a manual runtime's clocks
        // are never ahead of it by more than what advance() added). A
        // monotonic deadline up to TW_MAX_DELAY_NS needs no reading: the
        // clock is never negative (the start reads none then either).
        const bool in_range_anyway = s.clock == TW_CLOCK_MONOTONIC && s.deadline_ns <= TW_MAX_DELAY_NS;
        if (const std::uint64_t now = in_range_anyway ? 0 : own.now(s.clock);
            !in_range_anyway && s.deadline_ns > now + TW_MAX_DELAY_NS)
            return TW_FAIL(TW_EINVAL,
                           "deadline_ns %llu is %llu ns after the runtime's clock %d reads now (%llu): above "
                           "TW_MAX_DELAY_NS (%llu)",
                           static_cast<unsigned long long>(s.deadline_ns),
                           static_cast<unsigned long long>(s.deadline_ns - now), s.clock,
                           static_cast<unsigned long long>(now), static_cast<unsigned long long>(TW_MAX_DELAY_NS));
        o.deadline = tickwheel::TimePoint(ns(s.deadline_ns));
    } else {
        o.delay = ns(s.delay_ns);
    }
    o.period = ns(s.period_ns);
    o.shard = s.shard;
    o.policy = static_cast<tickwheel::PeriodPolicy>(s.period_policy);
    o.leeway = ns(s.leeway_ns);
    o.group = s.group;
    o.clock = static_cast<tickwheel::TimerClock>(s.clock);
    if (s.queue != nullptr) o.queue = &cqueue(s.queue)->q;
    return TW_OK;
}

/// The start of tw_timer_start() and tw_timer_start_ex() once every
/// argument is checked (`o` built from them): from here on the release hook
/// runs exactly once: when the callable is destroyed -- inside a failed
/// start (TW_ESHUTDOWN, TW_EAGAIN, TW_ENOMEM), or when the runtime is done
/// with the timer.
int start_checked(tw_runtime* rt, const tickwheel::StartOptions& o, tw_callback cb, void* arg, tw_release release,
                  tw_timer* out) noexcept {
    std::error_code ec(0, g_system_category);
    const tickwheel::Timer t = handle(rt)->rt.start(o, tickwheel::detail::Callback(CFunctor(cb, arg, release)), ec);
    if (ec.value() != 0) [[unlikely]] {
        // The callable was released inside start(). Its arguments were all
        // checked above, so the error is one of the hook-running ones; an
        // invalid_argument then says that o.queue's destroy began while this
        // start was in flight (its queue is closing): TW_ESHUTDOWN.
        const int rc = from_error_code(ec);
        return rc == TW_EINVAL ? (o.queue != nullptr ? TW_ESHUTDOWN : TW_ENOMEM) : rc;
    }
    *out = t.id();
    return TW_OK;
}
}  // namespace

namespace tickwheel::capi {

int timer_start(tw_runtime* rt, std::uint64_t delay_ns, std::uint64_t period_ns, tw_callback cb, void* arg,
                   tw_timer* out) noexcept {
    // tw_timer_start_ex() of a spec with these four fields, without building
    // and copying one: the same checks, in the same order.
    if (out != nullptr) *out = 0;
    const int state = check_runtime(rt);
    if (state == TW_EINVAL) return state;
    if (out == nullptr) return TW_FAIL(TW_EINVAL, "out is NULL");
    if (cb == nullptr) return TW_FAIL(TW_EINVAL, "callback is NULL");
    if (!max_delay_ok(delay_ns, "delay_ns") || !max_delay_ok(period_ns, "period_ns")) return TW_EINVAL;
    if (state == TW_EFORKED) return state;
    tickwheel::StartOptions o;
    o.delay = ns(delay_ns);
    o.period = ns(period_ns);
    return start_checked(rt, o, cb, arg, nullptr, out);
}

void timer_spec_init(tw_timer_spec* spec) noexcept {
    if (spec == nullptr) return;
    std::memset(spec, 0, kSpecSizeV1);
    spec->size = kSpecSizeV1;
    spec->shard = -1;
}

int timer_start_ex(tw_runtime* rt, const tw_timer_spec* spec, tw_timer* out) noexcept {
    if (out != nullptr) *out = 0;
    if (spec == nullptr) return TW_FAIL(TW_EINVAL, "spec is NULL");
    if (const int rc =
            check_in_size(spec, spec->size, kSpecSizeV1, sizeof(tw_timer_spec), {kSpecSizeV12}, "spec->size");
        rc != TW_OK)
        return rc;
    const tw_timer_spec s = copy_in(spec);
    // Every argument is checked before the timer takes arg over: TW_EINVAL
    // and TW_EFORKED leave it to the caller (no hook), see tickwheel.h.
    const int state = check_runtime(rt);
    if (state == TW_EINVAL) return state;
    if (out == nullptr) return TW_FAIL(TW_EINVAL, "out is NULL");
    OwnClocks own(rt);
    tickwheel::StartOptions o;
    if (options_from_spec(rt, s, own, o) != TW_OK) return TW_EINVAL;
    if (state == TW_EFORKED) return state;
    return start_checked(rt, o, s.callback, s.arg, s.release, out);
}

/// tw_timer_start_n() of specs[first .. first + count), with scratch for
/// `count` elements (tw_timer_start_n's arguments are checked).
int start_run(tw_runtime* rt, const unsigned char* specs, std::uint32_t stride, std::size_t first, std::size_t count,
              tw_timer* out, tickwheel::StartOptions* opts, tickwheel::detail::Callback* cbs, tickwheel::Timer* timers,
              std::size_t* where) noexcept {
    OwnClocks own(rt);
    std::size_t m = 0;
    for (std::size_t i = first; i < first + count; ++i) {
        out[i] = 0;
        const unsigned char* at = specs + i * stride;
        std::uint32_t size;
        std::memcpy(&size, at, sizeof size);  // the stride's multiple of 8 keeps it aligned; copied all the same
        // A spec of another size than the array's layout: refused, without its hook.
        if (size != stride || check_in_size(at, size, kSpecSizeV1, sizeof(tw_timer_spec), {kSpecSizeV12}) != TW_OK)
            continue;
        const tw_timer_spec s = copy_in(reinterpret_cast<const tw_timer_spec*>(at));
        if (options_from_spec(rt, s, own, opts[m]) != TW_OK) continue;
        cbs[m] = tickwheel::detail::Callback(CFunctor(s.callback, s.arg, s.release));
        where[m++] = i;
    }
    std::error_code ec;
    const std::size_t started = handle(rt)->rt.start(std::span(opts, m), std::span(cbs, m), std::span(timers, m), {}, ec);
    if (ec) {
        // Not for arguments checked above, nor a fork (checked by the
        // caller): unreachable. The callables are still here; release them.
        for (std::size_t k = 0; k < m; ++k) cbs[k] = tickwheel::detail::Callback();
        return 0;
    }
    for (std::size_t k = 0; k < m; ++k) out[where[k]] = timers[k].id();
    return static_cast<int>(started);
}

}  // namespace tickwheel::capi

namespace {
/// Space for n elements of a batch: on the stack up to N, else on the heap
/// (ok() false if there is no memory for it).
template <class T, std::size_t N>
class Scratch {
public:
    explicit Scratch(std::size_t n) : n_(n) {
        if (n > N) heap_.reset(new (std::nothrow) T[n]);
    }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    bool ok() const noexcept { return n_ <= N || heap_ != nullptr; }
    T* data() noexcept { return n_ <= N ? local_ : heap_.get(); }

private:
    std::size_t n_;
    T local_[N];
    std::unique_ptr<T[]> heap_;
};

/// The elements a batch call converts on the stack (beyond: the heap).
constexpr std::size_t kBatchStack = 64;

/// Runs fn(first, count, scratch) over [0, n) in as few runs as scratch
/// memory allows: one run of n when it can be had (the batch's per-call
/// savings then hold for the whole call), else -- out of memory -- runs of
/// kBatchStack. Returns the sum of what the runs return.
template <class T, class Fn>
int in_runs(std::size_t n, Fn&& fn) noexcept {
    {
        Scratch<T, kBatchStack> all(n);
        if (all.ok()) return fn(std::size_t{0}, n, all.data());
    }
    int total = 0;
    Scratch<T, kBatchStack> some(kBatchStack);
    for (std::size_t first = 0; first < n; first += kBatchStack)
        total += fn(first, std::min(kBatchStack, n - first), some.data());
    return total;
}

/// What tw_timer_start_n() converts its valid specs into (see start_run()).
template <std::size_t N>
struct StartScratch {
    explicit StartScratch(std::size_t n) : opts(n), cbs(n), timers(n), where(n) {}
    bool ok() const noexcept { return opts.ok() && cbs.ok() && timers.ok() && where.ok(); }
    Scratch<tickwheel::StartOptions, N> opts;
    Scratch<tickwheel::detail::Callback, N> cbs;
    Scratch<tickwheel::Timer, N> timers;
    Scratch<std::size_t, N> where;
};

/// A batch call's arguments, as tickwheel.h lists them: TW_OK to go on.
int check_batch(const tw_runtime* rt, const void* array, std::size_t n, const void* array2 = "") noexcept {
    if (rt == nullptr) return TW_FAIL(TW_EINVAL, "rt is NULL");
    if (n != 0 && (array == nullptr || array2 == nullptr))
        return TW_FAIL(TW_EINVAL, "an array is NULL while n is %zu", n);
    if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
        return TW_FAIL(TW_EINVAL, "n %zu is above INT_MAX", n);
    return TW_OK;
}

/// tw_timer_stop_n() and tw_timer_reset_n() past their own arguments' checks:
/// the runtime's state, then call(ids, errs, ec) -- the C++ batch over a
/// span of ids -- with the C++ outcomes turned into the C codes of results.
template <class Call>
int ids_batch(tw_runtime* rt, const tw_timer* ids, std::size_t n, int* results, Call&& call) noexcept {
    const int state = check_runtime(rt);
    if (state != TW_OK) {  // TW_EFORKED (the call's) or TW_ESHUTDOWN (each element's)
        if (results != nullptr) std::fill(results, results + n, state);
        return state == TW_ESHUTDOWN ? 0 : state;
    }
    if (n == 0) return 0;
    std::error_code ec;
    if (results == nullptr) return static_cast<int>(call(std::span(ids, n), {}, ec));
    return in_runs<std::error_code>(n, [&](std::size_t first, std::size_t count, std::error_code* errs) {
        const std::size_t k = call(std::span(ids + first, count), std::span(errs, count), ec);
        for (std::size_t i = 0; i < count; ++i) results[first + i] = from_error_code(errs[i]);
        return static_cast<int>(k);
    });
}
}  // namespace

namespace tickwheel::capi {

int timer_start_n(tw_runtime* rt, const tw_timer_spec* specs, std::size_t n, tw_timer* out) noexcept {
    if (check_batch(rt, specs, n, out) != TW_OK) return TW_EINVAL;
    std::uint32_t stride = 0;
    if (n != 0) {
        std::memcpy(&stride, specs, sizeof stride);
        // The layout of the whole array (each spec's bytes are checked with it).
        if (stride % alignof(tw_timer_spec) != 0 || !in_size_ok(stride, kSpecSizeV1, sizeof(tw_timer_spec), {kSpecSizeV12}))
            return TW_FAIL(TW_EINVAL,
                           "specs[0].size %u is not a tw_timer_spec size (56, 64, %zu, or larger with zeroed tails, "
                           "a multiple of 8)",
                           stride, sizeof(tw_timer_spec));
    }
    if (check_runtime(rt) == TW_EFORKED) {
        std::fill(out, out + n, tw_timer{0});
        return TW_EFORKED;
    }
    if (n == 0) return 0;
    const auto* bytes = reinterpret_cast<const unsigned char*>(specs);
    const auto run = [&](std::size_t first, std::size_t count, auto& x) {
        return start_run(rt, bytes, stride, first, count, out, x.opts.data(), x.cbs.data(), x.timers.data(),
                         x.where.data());
    };
    {
        StartScratch<kBatchStack> all(n);
        if (all.ok()) return run(0, n, all);
    }
    int total = 0;  // out of memory for n elements: runs of kBatchStack
    StartScratch<kBatchStack> some(kBatchStack);
    for (std::size_t first = 0; first < n; first += kBatchStack)
        total += run(first, std::min(kBatchStack, n - first), some);
    return total;
}

int timer_stop(tw_runtime* rt, tw_timer id) noexcept { return stop_impl(rt, id, false); }

int timer_stop_n(tw_runtime* rt, const tw_timer* ids, std::size_t n, int* results) noexcept {
    if (check_batch(rt, ids, n) != TW_OK) return TW_EINVAL;
    return ids_batch(rt, ids, n, results, [rt](std::span<const tw_timer> part, std::span<std::error_code> errs,
                                               std::error_code& ec) { return handle(rt)->rt.stop(part, errs, ec); });
}

int timer_stop_sync(tw_runtime* rt, tw_timer id) noexcept { return stop_impl(rt, id, true); }

int timer_reset(tw_runtime* rt, tw_timer id, std::uint64_t delay_ns) noexcept {
    const int rc = check_runtime(rt);
    if (rc == TW_EINVAL) return rc;
    if (!max_delay_ok(delay_ns, "delay_ns")) return TW_EINVAL;
    if (rc != TW_OK) return rc;
    std::error_code ec;
    if (handle(rt)->rt.reset(id, ns(delay_ns), ec)) return TW_OK;
    return ec ? from_error_code(ec) : TW_ENOENT;
}

int timer_reset_n(tw_runtime* rt, const tw_timer* ids, std::size_t n, std::uint64_t delay_ns, int* results) noexcept {
    if (check_batch(rt, ids, n) != TW_OK || !max_delay_ok(delay_ns, "delay_ns")) return TW_EINVAL;
    return ids_batch(rt, ids, n, results,
                     [rt, d = ns(delay_ns)](std::span<const tw_timer> part, std::span<std::error_code> errs,
                                            std::error_code& ec) { return handle(rt)->rt.reset(part, d, errs, ec); });
}

int timer_reset_at(tw_runtime* rt, tw_timer id, std::uint64_t deadline_ns) noexcept {
    const int rc = check_runtime(rt);
    if (rc == TW_EINVAL) return rc;
    if (deadline_ns > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        return TW_FAIL(TW_EINVAL, "deadline_ns %llu is above INT64_MAX", static_cast<unsigned long long>(deadline_ns));
    if (rc != TW_OK) return rc;
    std::error_code ec;
    if (handle(rt)->rt.reset_at(id, tickwheel::TimePoint(ns(deadline_ns)), ec)) return TW_OK;
    return ec ? from_error_code(ec) : TW_ENOENT;
}

int timer_query(tw_runtime* rt, tw_timer id, tw_timer_info* out) noexcept {
    if (rt == nullptr) return TW_FAIL(TW_EINVAL, "rt is NULL");
    if (out == nullptr) return TW_FAIL(TW_EINVAL, "out is NULL");
    const std::uint32_t size = out->size;
    if (size < kTimerInfoSizeV13 || size > kMaxStructSize)
        return TW_FAIL(TW_EINVAL, "out->size %u is outside %u .. 4096 (use tw_timer_info_init())", size,
                       kTimerInfoSizeV13);
    const int rc = check_runtime(rt);
    if (rc != TW_OK && rc != TW_ESHUTDOWN) return rc;
    const std::optional<tickwheel::TimerInfo> info = handle(rt)->rt.query(id);
    if (!info) return TW_ENOENT;
    tw_timer_info v;
    std::memset(&v, 0, sizeof v);
    v.state = static_cast<std::int32_t>(info->state);
    v.shard = info->shard;
    v.deadline_ns = static_cast<std::uint64_t>(info->deadline.time_since_epoch().count());
    v.period_ns = static_cast<std::uint64_t>(info->period.count());
    v.leeway_ns = static_cast<std::uint64_t>(info->leeway.count());
    v.group = info->group;
    v.runs = info->runs;
    v.missed = info->missed;
    v.clock = static_cast<std::int32_t>(info->clock);
    const std::uint32_t filled = std::min<std::uint32_t>(size, sizeof v);
    v.size = filled;
    std::memcpy(out, &v, filled);
    if (size > filled) std::memset(reinterpret_cast<unsigned char*>(out) + filled, 0, size - filled);
    return TW_OK;
}

std::int64_t group_stop(tw_runtime* rt, std::uint64_t group, unsigned flags) noexcept {
    if (rt == nullptr) return TW_FAIL(TW_EINVAL, "rt is NULL");
    if (group == 0) return TW_FAIL(TW_EINVAL, "group 0 names no group (groups are 1 .. UINT64_MAX)");
    if ((flags & ~TW_SYNC) != 0) return TW_FAIL(TW_EINVAL, "flags 0x%x has bits other than TW_SYNC", flags);
    const int rc = check_runtime(rt);
    if (rc == TW_ESHUTDOWN) return 0;  // nothing is live after shutdown
    if (rc != TW_OK) return rc;
    std::error_code ec;
    const std::size_t n = handle(rt)->rt.stop_group(group, (flags & TW_SYNC) != 0, ec);
    if (ec) return from_error_code(ec);
    return static_cast<std::int64_t>(n);
}

std::uint64_t now_ns_clock(int clock) noexcept {
    if (clock != TW_CLOCK_MONOTONIC && clock != TW_CLOCK_BOOTTIME && clock != TW_CLOCK_REALTIME) return 0;
    const std::int64_t v = tickwheel::rt::system_clock_ns(static_cast<tickwheel::rt::ClockId>(clock));
    return v > 0 ? static_cast<std::uint64_t>(v) : 0;
}

std::uint64_t runtime_now_ns(tw_runtime* rt, int clock) noexcept {
    if (rt == nullptr || clock < TW_CLOCK_MONOTONIC || clock > TW_CLOCK_REALTIME) return 0;
    if (handle(rt)->rt.is_forked()) return 0;
    const auto v = handle(rt)->rt.now(static_cast<tickwheel::TimerClock>(clock)).count();
    return v > 0 ? static_cast<std::uint64_t>(v) : 0;
}

int runtime_advance(tw_runtime* rt, std::uint64_t ns_) noexcept {
    const int rc = check_runtime(rt);
    if (rc != TW_OK) return rc;
    if (!handle(rt)->rt.is_manual_clock())
        return TW_FAIL(TW_EINVAL,
                       "the runtime \"%s\" has no manual clock (create it with TW_CONFIG_MANUAL_CLOCK in "
                       "tw_config.flags)",
                       handle(rt)->rt.name().c_str());
    if (!max_delay_ok(ns_, "ns")) return TW_EINVAL;
    std::error_code ec;
    const std::size_t ran = handle(rt)->rt.advance(ns(ns_), ec);
    if (ec) return from_error_code(ec);
    return ran > static_cast<std::size_t>(std::numeric_limits<int>::max()) ? std::numeric_limits<int>::max()
                                                                           : static_cast<int>(ran);
}

std::uint64_t now_ns(void) noexcept {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<tickwheel::Duration>(tickwheel::Runtime::now().time_since_epoch()).count());
}

int runtime_stats(tw_runtime* rt, tw_stats* out) noexcept {
    if (rt == nullptr) return TW_FAIL(TW_EINVAL, "rt is NULL");
    if (out == nullptr) return TW_FAIL(TW_EINVAL, "out is NULL");
    const int rc = check_runtime(rt);
    if (rc != TW_OK && rc != TW_ESHUTDOWN) return rc;
    const std::uint32_t size = out->size;
    if (size < kStatsSizeV1 || size > kMaxStructSize)
        return TW_FAIL(TW_EINVAL, "out->size %u is outside %u .. 4096 (use tw_stats_init())", size, kStatsSizeV1);
    try {
        const tickwheel::Stats st = handle(rt)->rt.stats();
        tw_stats v;
        std::memset(&v, 0, sizeof v);
        v.shards = handle(rt)->rt.shard_count();
        v.workers = handle(rt)->rt.worker_count();
        v.shut_down = handle(rt)->rt.is_shut_down() ? 1 : 0;
        v.resolution_ns = static_cast<std::uint64_t>(handle(rt)->rt.resolution().count());
        for (const std::size_t n : st.pending_per_shard) v.pending += n;
        for (const std::size_t n : st.inbox_per_shard) v.inbox += n;
        v.live = st.live;
        v.started = st.started;
        v.fired = st.fired;
        v.stopped = st.stopped;
        v.reset = st.reset;
        v.callback_exceptions = st.callback_exceptions;
        v.cancelled_at_shutdown = st.cancelled_at_shutdown;
        v.lateness_p50_ns = static_cast<std::uint64_t>(st.lateness_p50.count());
        v.lateness_p99_ns = static_cast<std::uint64_t>(st.lateness_p99.count());
        v.lateness_p999_ns = static_cast<std::uint64_t>(st.lateness_p999.count());
        v.lateness_max_ns = static_cast<std::uint64_t>(st.lateness_max.count());
        v.lateness_samples = st.lateness_samples;
        // A stage's four quantiles, in nanoseconds.
        const auto ns_of = [](tickwheel::Duration d) { return static_cast<std::uint64_t>(d.count()); };
        const auto ns4 = [&ns_of](std::uint64_t* q4, tickwheel::Duration p50, tickwheel::Duration p99,
                                  tickwheel::Duration p999, tickwheel::Duration max) {
            for (const tickwheel::Duration d : {p50, p99, p999, max}) *q4++ = ns_of(d);
        };
        std::uint64_t q[4];
        ns4(q, st.driver_lateness_p50, st.driver_lateness_p99, st.driver_lateness_p999, st.driver_lateness_max);
        v.driver_lateness_p50_ns = q[0], v.driver_lateness_p99_ns = q[1], v.driver_lateness_p999_ns = q[2],
        v.driver_lateness_max_ns = q[3];
        ns4(q, st.wait_lateness_p50, st.wait_lateness_p99, st.wait_lateness_p999, st.wait_lateness_max);
        v.wait_lateness_p50_ns = q[0], v.wait_lateness_p99_ns = q[1], v.wait_lateness_p999_ns = q[2],
        v.wait_lateness_max_ns = q[3];
        ns4(q, st.run_duration_p50, st.run_duration_p99, st.run_duration_p999, st.run_duration_max);
        v.run_duration_p50_ns = q[0], v.run_duration_p99_ns = q[1], v.run_duration_p999_ns = q[2],
        v.run_duration_max_ns = q[3];
        v.run_duration_samples = st.run_duration_samples;
        v.workers_busy = st.workers_busy;
        v.waiting_for_worker = st.waiting_for_worker;
        v.callbacks_running = st.callbacks_running;
        v.oldest_run_age_ns = ns_of(st.oldest_run_age);
        v.slots = st.slots;
        v.resident_bytes = st.resident_bytes;
        const std::uint32_t filled = std::min<std::uint32_t>(size, sizeof v);
        v.size = filled;
        std::memcpy(out, &v, filled);
        if (size > filled) std::memset(reinterpret_cast<unsigned char*>(out) + filled, 0, size - filled);
        return TW_OK;
    } catch (...) {
        return from_current_exception();
    }
}

int runtime_shard_stats(tw_runtime* rt, std::uint32_t shard, std::uint64_t* pending,
                           std::uint64_t* inbox) noexcept {
    const int rc = check_runtime(rt);
    if (rc != TW_OK && rc != TW_ESHUTDOWN) return rc;
    if (shard >= handle(rt)->rt.shard_count())
        return TW_FAIL(TW_EINVAL, "shard %u is not below the shard count (%u)", shard, handle(rt)->rt.shard_count());
    try {
        const tickwheel::Stats st = handle(rt)->rt.stats();
        if (pending != nullptr) *pending = st.pending_per_shard.at(shard);
        if (inbox != nullptr) *inbox = st.inbox_per_shard.at(shard);
        return TW_OK;
    } catch (...) {
        return from_current_exception();
    }
}

int runtime_count_callback_exception(tw_runtime* rt) noexcept {
    if (rt == nullptr) return TW_FAIL(TW_EINVAL, "rt is NULL");
    const int rc = check_runtime(rt);
    if (rc != TW_OK && rc != TW_ESHUTDOWN) return rc;
    handle(rt)->rt.count_callback_exception();
    return TW_OK;
}

/// Copies `text` into buf as snprintf() would; its length, or TW_ENOMEM.
int copy_text(const std::string& text, char* buf, std::size_t cap) noexcept {
    if (text.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
        return TW_FAIL(TW_ENOMEM, "the text is %zu bytes: longer than INT_MAX", text.size());
    if (cap > 0) {
        const std::size_t n = std::min(text.size(), cap - 1);
        std::memcpy(buf, text.data(), n);
        buf[n] = '\0';
    }
    return static_cast<int>(text.size());
}

int runtime_metrics(tw_runtime* rt, char* buf, std::size_t cap) noexcept {
    if (buf == nullptr && cap > 0) return TW_FAIL(TW_EINVAL, "buf is NULL while cap is %zu", cap);
    if (cap > 0) buf[0] = '\0';  // what an error leaves
    const int rc = check_runtime(rt);
    if (rc != TW_OK && rc != TW_ESHUTDOWN) return rc;
    try {
        return copy_text(handle(rt)->rt.metrics(), buf, cap);
    } catch (...) {
        return from_current_exception();
    }
}

int runtimes_metrics(tw_runtime* const* rts, std::size_t n, char* buf, std::size_t cap) noexcept {
    if (buf == nullptr && cap > 0) return TW_FAIL(TW_EINVAL, "buf is NULL while cap is %zu", cap);
    if (cap > 0) buf[0] = '\0';  // what an error leaves
    if (rts == nullptr && n > 0) return TW_FAIL(TW_EINVAL, "rts is NULL while n is %zu", n);
    try {
        std::vector<const tickwheel::Runtime*> list;
        list.reserve(n);
        for (std::size_t i = 0; i < n; ++i) {
            if (rts[i] == nullptr) return TW_FAIL(TW_EINVAL, "rts[%zu] is NULL", i);
            const int rc = check_runtime(rts[i]);
            if (rc != TW_OK && rc != TW_ESHUTDOWN) return rc;
            list.push_back(&handle(rts[i])->rt);
        }
        return copy_text(tickwheel::Runtime::metrics(list), buf, cap);
    } catch (...) {
        return from_current_exception();
    }
}

bool core_detail(int code, char* out, std::size_t cap) noexcept {
    return tickwheel::rt::take_error_detail(-code, out, cap);
}

const char* error_text(int err) noexcept {
    switch (err) {
        case TW_OK: return "success";
        case TW_EINVAL: return "invalid argument";
        case TW_ENOMEM: return "out of memory";
        case TW_ENOENT: return "no such pending timer";
        case TW_EAGAIN: return "timer limit (max_timers) reached";
        case TW_ESHUTDOWN: return "runtime is shut down";
        case TW_EDEADLK:
            return "operation would deadlock (shutdown from a callback or release hook, or a queue run or "
                   "destroyed from inside one of its own callbacks)";
        case TW_EFORKED: return "runtime was created in the parent of this fork() child";
        default: return "unknown error";
    }
}

std::uint32_t version(void) noexcept { return TW_VERSION; }

}  // namespace tickwheel::capi
