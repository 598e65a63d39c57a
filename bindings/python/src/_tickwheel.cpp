// SPDX-License-Identifier: MIT OR Apache-2.0
// tickwheel._tickwheel: the compiled core of the Python binding (pybind11 over
// the C++ API of include/tickwheel/runtime.hpp, linked against the shared
// libtickwheel.so.1). The public API is tickwheel/__init__.py's; this module is
// private (its names may change in any release).
//
// The GIL. Every call keeps the GIL, except the ones that may wait for another
// thread (a callback in progress, a worker, a thread join), which release it
// for the wait: Runtime.stop_sync, stop_group(sync), advance, shutdown,
// destroy and Queue.close. A call that keeps the GIL never waits for a thread
// that needs it (the core holds none of its locks while it runs a callback or a
// release hook, and start/stop/reset/query/the batches/Queue.run_nowait never
// wait), so keeping it is safe -- and it is what makes a start or a stop cost
// a few hundred ns with another Python thread busy (ctypes released and
// re-took the GIL at every call, handing it to that thread).
//
// Callbacks and release hooks run on worker threads (or inside advance() and
// Queue.run_nowait() on the caller's): they take the GIL (pybind11's
// gil_scoped_acquire) and call the Python functions tickwheel/__init__.py
// registers with set_hooks(): on_fire(token, timer_id) and on_release(token).
// A thread keeps its Python thread state after its first hook (inc_ref): none
// is created per hook, so a fork() never catches CPython's runtime lock held
// by a worker creating one (CPython gh-112275), and later hooks cost less.
//
// Lifetime. A Runtime's native runtime is freed by destroy(), which first
// waits (GIL released) until no call of this module on it is in flight: every
// call enters a Busy guard (two atomic operations), so a release hook that runs
// Python code inside a stop() -- and so lets another thread run -- never sees
// the runtime freed under it. Calls after destroy() raise ESHUTDOWN.
//
// fork(). In a fork() child a runtime of the parent is never touched except
// by destroy() (which frees the child's copy; the core runs no hook there) or
// forget() (which leaks it): every other call raises EFORKED before reaching
// the core (the epoch is bumped by a pthread_atfork child handler).

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "tickwheel/runtime.hpp"
#include "tickwheel/tickwheel.h"

namespace py = pybind11;
namespace tw = tickwheel;

namespace {

// ---- errors --------------------------------------------------------------------------
// Raised to Python as _tickwheel.Error(code, message): code the negative TW_*
// code, message the core's text (tickwheel::Error::what(), which carries the
// detail where the core gives one). tickwheel/__init__.py turns it into
// TickwheelError (or a subclass) with the name of the call.
struct Failure {
    int code;  // negative TW_* code
    std::string message;
};

Failure failure_of(int code) { return {code, tw_strerror(code)}; }

PyObject* g_error_type = nullptr;  // _tickwheel.Error (kept for the process's life)

std::int64_t to_i64(std::uint64_t ns) {
    // Beyond INT64_MAX: still beyond the core's limit, so still refused (EINVAL).
    return ns > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
               ? std::numeric_limits<std::int64_t>::max()
               : static_cast<std::int64_t>(ns);
}

// ---- releasing the GIL ----------------------------------------------------------------
// Every place that releases the GIL goes through NoGil, which counts it
// (gil_releases(): how the tests check that only the waiting calls release it).
std::atomic<std::uint64_t> g_gil_releases{0};
struct NoGil {
    NoGil() { g_gil_releases.fetch_add(1, std::memory_order_relaxed); }
    py::gil_scoped_release release;
};

// ---- fork epoch ----------------------------------------------------------------------
std::atomic<unsigned> g_epoch{0};
void after_fork_in_child() noexcept { g_epoch.fetch_add(1, std::memory_order_relaxed); }

// ---- the Python hooks ----------------------------------------------------------------
// Set once by set_hooks() and kept for the process's life (never decref'd:
// worker threads may call them until the runtimes are closed at exit):
// tickwheel's _on_fire(token, timer_id), and its module dict, where the
// release hook looks up _release(token) at each call (tests replace it).
PyObject* g_on_fire = nullptr;
PyObject* g_globals = nullptr;
PyObject* g_release_name = nullptr;
PyObject* g_release = nullptr;  // tickwheel._release as registered
PyObject* g_live = nullptr;     // tickwheel._live: token -> (fn, runtime, queued)

thread_local bool t_kept_state = false;
// Hooks in progress on this thread (hook_depth()): code that runs inside one
// (a finalizer dropping a Runtime) must not wait for a runtime.
thread_local int t_hook_depth = 0;

// The GIL for a hook, on any thread; the thread keeps its thread state after
// its first hook.
struct HookGil {
    py::gil_scoped_acquire gil;
    HookGil() {
        if (!t_kept_state) {
            t_kept_state = true;
            gil.inc_ref();  // never dec_ref'd: the thread state lives as long as the thread
        }
        ++t_hook_depth;
    }
    ~HookGil() { --t_hook_depth; }
    HookGil(const HookGil&) = delete;
    HookGil& operator=(const HookGil&) = delete;
};

void fire_hook(std::uint64_t token, std::uint64_t id) noexcept {
    HookGil gil;
    try {
        py::handle hook(g_on_fire);
        hook(token, id);
    } catch (py::error_already_set& e) {
        // _on_fire catches everything itself; this is a last resort.
        e.discard_as_unraisable(py::reinterpret_borrow<py::object>(g_on_fire));
    } catch (...) {
    }
}

void release_hook(std::uint64_t token) noexcept {
    HookGil gil;
    try {
        py::handle hook(PyDict_GetItemWithError(g_globals, g_release_name));  // borrowed
        if (hook.ptr() == g_release) {
            // tickwheel._release itself (not replaced, as tests do to count
            // releases): its work, _live.pop(token, None), without the call.
            py::object key = py::int_(token);
            py::object entry = py::reinterpret_borrow<py::object>(PyDict_GetItemWithError(g_live, key.ptr()));
            if (entry && PyDict_DelItem(g_live, key.ptr()) != 0) throw py::error_already_set();
            // `entry` goes out of scope here, with the GIL held: it may drop
            // the last reference to the callable or its Runtime.
        } else if (hook) {
            hook(token);
        }
    } catch (...) {
        // Nothing may unwind into the core; a failed release only keeps the callable.
    }
    if (PyErr_Occurred() != nullptr) PyErr_Clear();
}

// The callable stored in the core for a Python timer: a token of
// tickwheel/__init__.py's _live table (8 bytes: stored inline, no
// allocation). Its destructor is the release hook.
struct PyCallback {
    std::uint64_t token;
    explicit PyCallback(std::uint64_t t) noexcept : token(t) {}
    PyCallback(PyCallback&& o) noexcept : token(o.token) { o.token = 0; }
    PyCallback(const PyCallback&) = delete;
    PyCallback& operator=(const PyCallback&) = delete;
    PyCallback& operator=(PyCallback&&) = delete;
    ~PyCallback() {
        if (token != 0) release_hook(token);
    }
    void operator()(tw::Timer t) const noexcept { fire_hook(token, t.id()); }
};

// ---- the runtime ---------------------------------------------------------------------
class Runtime {
public:
    Runtime(unsigned shards, unsigned workers, std::uint64_t resolution_ns, std::uint64_t max_timers,
            bool pin_shards, bool manual_clock) {
        tw::Config cfg;
        cfg.shards = shards;
        cfg.workers = workers;
        if (resolution_ns != 0) cfg.resolution = tw::Duration(to_i64(resolution_ns));
        cfg.max_timers = static_cast<std::size_t>(max_timers);
        cfg.pin_shards = pin_shards;
        cfg.manual_clock = manual_clock;
        rt_ = std::make_unique<tw::Runtime>(cfg);  // tickwheel::Error: translated
        epoch_ = g_epoch.load(std::memory_order_relaxed);
    }
    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;
    ~Runtime() {
        // Reached only when Python drops the object; __init__.py destroys (or,
        // in a fork child, forgets) it first. Never wait here.
        if (rt_ && epoch_ != g_epoch.load()) (void)rt_.release();
    }

    // Every call: the runtime stays allocated until it returns.
    class Busy {
    public:
        // `after_shutdown`: the call works on a shut-down runtime (stats,
        // metrics, now, stop_group, shutdown); the others raise ESHUTDOWN
        // then, as the C API's calls return TW_ESHUTDOWN.
        explicit Busy(Runtime& r, bool after_shutdown = false) : r_(r) {
            if (r.epoch_ != g_epoch.load(std::memory_order_relaxed)) throw failure_of(TW_EFORKED);
            r.busy_.fetch_add(1);  // seq_cst, as destroy()'s closing_ store and busy_ load
            if (r.closing_.load() || (!after_shutdown && r.shut_.load(std::memory_order_acquire))) {
                leave();
                throw failure_of(TW_ESHUTDOWN);
            }
        }
        ~Busy() { leave(); }
        Busy(const Busy&) = delete;
        Busy& operator=(const Busy&) = delete;
        tw::Runtime& rt() const { return *r_.rt_; }

    private:
        void leave() {
            if (r_.busy_.fetch_sub(1) == 1 && r_.closing_.load()) {
                std::lock_guard<std::mutex> lk(r_.m_);
                r_.cv_.notify_all();
            }
        }
        Runtime& r_;
    };

    std::uint64_t start(std::uint64_t token, std::uint64_t delay_ns, std::uint64_t deadline_ns,
                        std::uint64_t period_ns, int shard, py::object queue, std::uint32_t policy,
                        std::uint32_t clock, std::uint64_t leeway_ns, std::uint64_t group);
    std::uint64_t start_delay(std::uint64_t token, std::uint64_t delay_ns) {
        PyCallback cb(token);  // released (its destructor) on every path that does not hand it over
        Busy b(*this);
        tw::StartOptions o;
        o.delay = tw::Duration(to_i64(delay_ns));
        return do_start(b, o, std::move(cb));
    }
    bool stop(std::uint64_t id) {
        Busy b(*this);
        return b.rt().stop(id);
    }
    bool stop_sync(std::uint64_t id) {
        Busy b(*this);
        NoGil nogil;  // waits for a run in progress, which takes the GIL
        return b.rt().stop_sync(id);
    }
    bool reset(std::uint64_t id, std::uint64_t delay_ns) {
        Busy b(*this);
        std::error_code ec;
        const bool ok = b.rt().reset(id, tw::Duration(to_i64(delay_ns)), ec);
        if (ec && ec != tw::make_error_code(tw::errc::not_found)) throw tw::Error(ec);
        return ok;
    }
    bool reset_at(std::uint64_t id, std::uint64_t deadline_ns) {
        Busy b(*this);
        std::error_code ec;
        const bool ok = b.rt().reset_at(id, tw::TimePoint(tw::Duration(to_i64(deadline_ns))), ec);
        if (ec && ec != tw::make_error_code(tw::errc::not_found)) throw tw::Error(ec);
        return ok;
    }
    py::object query(std::uint64_t id) {
        Busy b(*this);
        const auto info = b.rt().query(id);
        if (!info) return py::none();
        return py::make_tuple(static_cast<int>(info->state), info->shard, static_cast<int>(info->clock),
                              static_cast<std::uint64_t>(info->deadline.time_since_epoch().count()),
                              static_cast<std::uint64_t>(info->period.count()),
                              static_cast<std::uint64_t>(info->leeway.count()), info->group, info->runs,
                              info->missed);
    }
    std::size_t stop_group(std::uint64_t group, bool sync) {
        Busy b(*this, true);
        std::error_code ec;
        std::size_t n;
        if (sync) {
            NoGil nogil;  // waits for the group's runs in progress
            n = b.rt().stop_group(group, true, ec);
        } else {
            n = b.rt().stop_group(group, false, ec);
        }
        if (ec) throw tw::Error(ec);
        return n;
    }
    std::uint64_t now_ns(int clock) {
        Busy b(*this, true);
        return static_cast<std::uint64_t>(b.rt().now(static_cast<tw::TimerClock>(clock)).count());
    }
    bool manual_clock() {
        Busy b(*this, true);
        return b.rt().is_manual_clock();
    }
    std::size_t advance(std::uint64_t ns) {
        Busy b(*this);
        std::error_code ec;
        std::size_t n;
        {
            NoGil nogil;  // runs callbacks here, each taking the GIL
            n = b.rt().advance(tw::Duration(to_i64(ns)), ec);
        }
        if (ec) throw tw::Error(ec);
        return n;
    }
    void shutdown() {
        Busy b(*this, true);
        std::error_code ec;
        {
            NoGil nogil;  // waits for callbacks and joins threads
            b.rt().shutdown(ec);
        }
        if (ec) throw tw::Error(ec);
        shut_.store(true, std::memory_order_release);
    }
    // Frees the native runtime (shutdown() first, which tickwheel/__init__.py
    // has done): waits, GIL released, for the calls in flight. The first
    // caller frees it; a concurrent one returns once it is freed.
    void destroy() {
        if (epoch_ != g_epoch.load()) {
            // A fork() child: the runtime's threads do not exist here; the core
            // frees the child's copy without running any hook.
            std::unique_ptr<tw::Runtime> rt = std::move(rt_);
            closing_.store(true);
            return;
        }
        std::unique_ptr<tw::Runtime> rt;
        {
            NoGil nogil;
            std::unique_lock<std::mutex> lk(m_);
            if (closing_.exchange(true)) {
                cv_.wait(lk, [&] { return freed_; });
                return;
            }
            cv_.wait(lk, [&] { return busy_.load() == 0; });
            rt = std::move(rt_);
            lk.unlock();
            rt.reset();  // shutdown (done) and free: may run release hooks of late starts
            lk.lock();
            freed_ = true;
            cv_.notify_all();
        }
    }
    // A fork() child, where a parent thread was inside a call on the runtime
    // at the fork: its copy may be mid-update; leave it (the parent owns it).
    void forget() {
        closing_.store(true);
        (void)rt_.release();
    }
    py::dict stats() {
        Busy b(*this, true);
        const tw::Stats st = b.rt().stats();
        std::uint64_t pending = 0, inbox = 0;
        for (auto n : st.pending_per_shard) pending += n;
        for (auto n : st.inbox_per_shard) inbox += n;
        py::dict d;
        d["shards"] = b.rt().shard_count();
        d["workers"] = b.rt().worker_count();
        d["shut_down"] = b.rt().is_shut_down();
        d["resolution_ns"] = static_cast<std::uint64_t>(b.rt().resolution().count());
        d["pending"] = pending;
        d["inbox"] = inbox;
        d["live"] = st.live;
        d["started"] = st.started;
        d["fired"] = st.fired;
        d["stopped"] = st.stopped;
        d["reset"] = st.reset;
        d["callback_exceptions"] = st.callback_exceptions;
        d["cancelled_at_shutdown"] = st.cancelled_at_shutdown;
        d["lateness_p50_ns"] = static_cast<std::uint64_t>(st.lateness_p50.count());
        d["lateness_p99_ns"] = static_cast<std::uint64_t>(st.lateness_p99.count());
        d["lateness_p999_ns"] = static_cast<std::uint64_t>(st.lateness_p999.count());
        d["lateness_max_ns"] = static_cast<std::uint64_t>(st.lateness_max.count());
        d["lateness_samples"] = st.lateness_samples;
        // Since 1.6 (issue 34): lateness by stage, the callbacks' duration,
        // saturation and memory (the C tw_stats fields of the same names).
        const auto ns = [](tw::Duration v) { return static_cast<std::uint64_t>(v.count()); };
        d["driver_lateness_p50_ns"] = ns(st.driver_lateness_p50);
        d["driver_lateness_p99_ns"] = ns(st.driver_lateness_p99);
        d["driver_lateness_p999_ns"] = ns(st.driver_lateness_p999);
        d["driver_lateness_max_ns"] = ns(st.driver_lateness_max);
        d["wait_lateness_p50_ns"] = ns(st.wait_lateness_p50);
        d["wait_lateness_p99_ns"] = ns(st.wait_lateness_p99);
        d["wait_lateness_p999_ns"] = ns(st.wait_lateness_p999);
        d["wait_lateness_max_ns"] = ns(st.wait_lateness_max);
        d["run_duration_p50_ns"] = ns(st.run_duration_p50);
        d["run_duration_p99_ns"] = ns(st.run_duration_p99);
        d["run_duration_p999_ns"] = ns(st.run_duration_p999);
        d["run_duration_max_ns"] = ns(st.run_duration_max);
        d["run_duration_samples"] = st.run_duration_samples;
        d["workers_busy"] = st.workers_busy;
        d["waiting_for_worker"] = st.waiting_for_worker;
        d["callbacks_running"] = st.callbacks_running;
        d["oldest_run_age_ns"] = ns(st.oldest_run_age);
        d["slots"] = static_cast<std::uint64_t>(st.slots);
        d["resident_bytes"] = st.resident_bytes;
        return d;
    }
    std::string metrics() {
        Busy b(*this, true);
        return b.rt().metrics();
    }
    py::list start_many(const std::vector<std::uint64_t>& tokens, const std::vector<std::uint64_t>& delays,
                        std::uint64_t period_ns, int shard, py::object queue, std::uint32_t policy,
                        std::uint32_t clock, std::uint64_t leeway_ns, std::uint64_t group);
    py::list stop_many(const std::vector<std::uint64_t>& ids) {
        Busy b(*this);
        std::vector<std::error_code> results(ids.size());
        std::error_code ec;
        b.rt().stop(std::span<const std::uint64_t>(ids), std::span<std::error_code>(results), ec);
        if (ec) throw tw::Error(ec);
        return codes(results);
    }
    py::list reset_many(const std::vector<std::uint64_t>& ids, std::uint64_t delay_ns) {
        Busy b(*this);
        std::vector<std::error_code> results(ids.size());
        std::error_code ec;
        b.rt().reset(std::span<const std::uint64_t>(ids), tw::Duration(to_i64(delay_ns)),
                     std::span<std::error_code>(results), ec);
        if (ec) throw tw::Error(ec);
        return codes(results);
    }

    tw::Runtime* native() const { return rt_.get(); }

private:
    friend class Queue;
    static py::list codes(const std::vector<std::error_code>& results) {
        py::list out(results.size());
        for (std::size_t i = 0; i < results.size(); ++i) out[i] = py::int_(-results[i].value());
        return out;
    }
    static void fill(tw::StartOptions& o, std::uint64_t period_ns, int shard, std::uint32_t policy,
                     std::uint32_t clock, std::uint64_t leeway_ns, std::uint64_t group) {
        o.period = tw::Duration(to_i64(period_ns));
        o.shard = shard;
        o.policy = static_cast<tw::PeriodPolicy>(policy);
        o.clock = static_cast<tw::TimerClock>(clock);
        o.leeway = tw::Duration(to_i64(leeway_ns));
        o.group = group;
    }
    tw::Queue* queue_of(py::object queue);
    std::uint64_t do_start(Busy& b, const tw::StartOptions& o, PyCallback&& cb) {
        std::error_code ec;
        tw::Timer t = b.rt().start(o, tw::detail::Callback(std::move(cb)), ec);
        if (ec) throw tw::Error(ec);  // the callable was released inside start()
        return t.id();
    }

    std::unique_ptr<tw::Runtime> rt_;
    unsigned epoch_ = 0;
    std::atomic<int> busy_{0};
    std::atomic<bool> closing_{false};
    std::atomic<bool> shut_{false};  // shutdown() has returned
    std::mutex m_;
    std::condition_variable cv_;
    bool freed_ = false;
};

// ---- delivery queues -------------------------------------------------------------------
// tickwheel/__init__.py counts the calls on a Queue and frees it (close) only
// when none is in flight; the object itself (its tickwheel::Queue) is freed
// when Python drops it, after close().
class Queue {
public:
    explicit Queue(Runtime& rt) {
        Runtime::Busy b(rt);
        q_ = std::make_unique<tw::Queue>(b.rt());
        fd_ = q_->fd();
        epoch_ = g_epoch.load();
    }
    ~Queue() {
        // A fork() child: leave the parent's copy. Otherwise ~tickwheel::Queue
        // closes it if __init__.py has not (its runtime was closed first: then
        // nothing is left to wait for).
        if (q_ && epoch_ != g_epoch.load()) (void)q_.release();
    }
    Queue(const Queue&) = delete;
    Queue& operator=(const Queue&) = delete;
    int fd() const { return fd_; }
    // Never waits (timeout 0): keeps the GIL, so the callbacks it runs on this
    // thread find it held. Returns how many ran, or a negative TW_* code.
    long long run_nowait(std::size_t max) {
        if (epoch_ != g_epoch.load()) return TW_EFORKED;
        std::error_code ec;
        const std::size_t n = q_->run(max, tw::Duration::zero(), ec);
        if (ec) return -ec.value();
        return static_cast<long long>(n);
    }
    // Returns 0 or a negative TW_* code (EDEADLK from inside its own callback:
    // nothing done).
    int close() {
        if (epoch_ != g_epoch.load()) return TW_EFORKED;
        std::error_code ec;
        {
            NoGil nogil;  // waits for callbacks of it in progress on other threads
            q_->close(ec);
        }
        return ec ? -ec.value() : 0;
    }
    py::dict stats() const {
        const tw::QueueStats st = q_->stats();
        py::dict d;
        d["runners"] = st.runners;
        d["due"] = st.due;
        d["delivered"] = st.delivered;
        d["ran"] = st.ran;
        d["signal_p50_ns"] = static_cast<std::uint64_t>(st.signal_p50.count());
        d["signal_p99_ns"] = static_cast<std::uint64_t>(st.signal_p99.count());
        d["signal_p999_ns"] = static_cast<std::uint64_t>(st.signal_p999.count());
        d["signal_max_ns"] = static_cast<std::uint64_t>(st.signal_max.count());
        d["signal_samples"] = st.signal_samples;
        d["run_p50_ns"] = static_cast<std::uint64_t>(st.run_p50.count());
        d["run_p99_ns"] = static_cast<std::uint64_t>(st.run_p99.count());
        d["run_p999_ns"] = static_cast<std::uint64_t>(st.run_p999.count());
        d["run_max_ns"] = static_cast<std::uint64_t>(st.run_max.count());
        d["run_samples"] = st.run_samples;
        return d;
    }
    tw::Queue* native() const { return q_.get(); }

private:
    std::unique_ptr<tw::Queue> q_;
    int fd_ = -1;
    unsigned epoch_ = 0;
};

tw::Queue* Runtime::queue_of(py::object queue) {
    if (queue.is_none()) return nullptr;
    return queue.cast<Queue&>().native();
}

std::uint64_t Runtime::start(std::uint64_t token, std::uint64_t delay_ns, std::uint64_t deadline_ns,
                             std::uint64_t period_ns, int shard, py::object queue, std::uint32_t policy,
                             std::uint32_t clock, std::uint64_t leeway_ns, std::uint64_t group) {
    PyCallback cb(token);
    Busy b(*this);
    tw::StartOptions o;
    if (deadline_ns != 0)
        o.deadline = tw::TimePoint(tw::Duration(to_i64(deadline_ns)));
    else
        o.delay = tw::Duration(to_i64(delay_ns));
    fill(o, period_ns, shard, policy, clock, leeway_ns, group);
    o.queue = queue_of(queue);
    return do_start(b, o, std::move(cb));
}

py::list Runtime::start_many(const std::vector<std::uint64_t>& tokens, const std::vector<std::uint64_t>& delays,
                             std::uint64_t period_ns, int shard, py::object queue, std::uint32_t policy,
                             std::uint32_t clock, std::uint64_t leeway_ns, std::uint64_t group) {
    const std::size_t n = tokens.size();
    std::vector<tw::detail::Callback> cbs;
    cbs.reserve(n);
    for (std::size_t i = 0; i < n; ++i) cbs.emplace_back(PyCallback(tokens[i]));  // released by ~vector if not taken
    Busy b(*this, true);  // after shutdown: every element fails (ids 0), as tw_timer_start_n reports
    if (delays.size() != n) throw failure_of(TW_EINVAL);
    std::vector<tw::StartOptions> opts(n);
    tw::Queue* q = queue_of(queue);
    for (std::size_t i = 0; i < n; ++i) {
        opts[i].delay = tw::Duration(to_i64(delays[i]));
        fill(opts[i], period_ns, shard, policy, clock, leeway_ns, group);
        opts[i].queue = q;
    }
    std::vector<tw::Timer> out(n);
    std::error_code ec;
    b.rt().start(std::span<const tw::StartOptions>(opts), std::span<tw::detail::Callback>(cbs),
                 std::span<tw::Timer>(out), std::span<std::error_code>(), ec);
    if (ec && ec != tw::make_error_code(tw::errc::shutting_down)) throw tw::Error(ec);
    py::list ids(n);
    for (std::size_t i = 0; i < n; ++i) ids[i] = py::int_(out[i].id());
    return ids;
}

std::string library_path() {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&tw_version), &info) != 0 && info.dli_fname != nullptr)
        return info.dli_fname;
    return "";
}

}  // namespace

PYBIND11_MODULE(_tickwheel, m) {
    m.doc() = "The compiled core of the tickwheel binding (private: use the tickwheel package).";
    static py::exception<Failure> error(m, "Error");
    g_error_type = error.ptr();
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const Failure& f) {
            PyErr_SetObject(g_error_type, py::make_tuple(f.code, f.message).ptr());
        } catch (const tw::Error& e) {
            PyErr_SetObject(g_error_type, py::make_tuple(-e.code().value(), std::string(e.what())).ptr());
        }
    });
    pthread_atfork(nullptr, nullptr, after_fork_in_child);

    m.def("set_hooks", [](py::object on_fire, py::dict globals) {
        if (g_on_fire != nullptr) throw failure_of(TW_EINVAL);  // once per process
        py::object release = globals["_release"];
        py::object live = globals["_live"];
        if (!PyDict_CheckExact(live.ptr())) throw failure_of(TW_EINVAL);
        g_on_fire = on_fire.release().ptr();
        g_release = release.release().ptr();
        g_live = live.release().ptr();
        g_globals = globals.release().ptr();
        g_release_name = py::str("_release").release().ptr();
    });
    m.def("hook_depth", [] { return t_hook_depth; },
          "The callbacks and release hooks in progress on this thread (0 outside any).");
    m.def("gil_releases", [] { return g_gil_releases.load(); },
          "How many times this module released the GIL (for the tests).");
    m.def("version", [] { return tw_version(); });
    m.def("now_ns", [](int clock) { return tw_now_ns_clock(clock); });
    m.def("monotonic_ns", [] { return tw_now_ns(); });
    m.def("strerror", [](int code) { return std::string(tw_strerror(code)); });
    m.def("library_path", &library_path);
    m.attr("TW_MAX_DELAY_NS") = py::int_(static_cast<std::uint64_t>(TW_MAX_DELAY_NS));

    py::class_<Runtime>(m, "Runtime")
        .def(py::init<unsigned, unsigned, std::uint64_t, std::uint64_t, bool, bool>())
        .def("start", &Runtime::start)
        .def("start_delay", &Runtime::start_delay)
        .def("stop", &Runtime::stop)
        .def("stop_sync", &Runtime::stop_sync)
        .def("reset", &Runtime::reset)
        .def("reset_at", &Runtime::reset_at)
        .def("query", &Runtime::query)
        .def("stop_group", &Runtime::stop_group)
        .def("now_ns", &Runtime::now_ns)
        .def("manual_clock", &Runtime::manual_clock)
        .def("advance", &Runtime::advance)
        .def("shutdown", &Runtime::shutdown)
        .def("destroy", &Runtime::destroy)
        .def("forget", &Runtime::forget)
        .def("stats", &Runtime::stats)
        .def("metrics", &Runtime::metrics)
        .def("start_many", &Runtime::start_many)
        .def("stop_many", &Runtime::stop_many)
        .def("reset_many", &Runtime::reset_many);

    py::class_<Queue>(m, "Queue")
        .def(py::init<Runtime&>())
        .def("fd", &Queue::fd)
        .def("run_nowait", &Queue::run_nowait)
        .def("close", &Queue::close)
        .def("stats", &Queue::stats);
}
