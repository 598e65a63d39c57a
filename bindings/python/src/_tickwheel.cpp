// SPDX-License-Identifier: MIT OR Apache-2.0
// tickwheel._tickwheel: the compiled core of the Python binding (pybind11 over
// the C++ API of include/tickwheel/runtime.hpp; linked against the shared
// libtickwheel.so.1 in a build tree, or with the library's objects, libstdc++
// and libgcc inside it in a wheel -- see bindings/python/CMakeLists.txt). The
// public API is tickwheel/__init__.py's; this module is private (its names
// may change in any release).
//
// The hot paths are plain CPython C API (no pybind11 dispatch, no keyword
// parsing): the TimerBase type behind tickwheel.Timer (stop, stop_sync), and
// the Fast object every tickwheel.Runtime keeps (Runtime.start's common case
// and tickwheel.asyncio's queued start). The rest goes through pybind11.
//
// The GIL. Every call keeps the GIL, except the ones that may wait for another
// thread (a callback in progress, a worker, a thread join), which release it
// for the wait: stop_sync, stop_group(sync), advance, shutdown, destroy and
// Queue.close. A call that keeps the GIL never waits for a thread that needs
// it (the core holds none of its locks while it runs a callback or a release
// hook, and start/stop/reset/query/the batches/Queue.run_nowait never wait),
// so keeping it is safe -- and it is what makes a start or a stop cost a few
// hundred ns with another Python thread busy (ctypes released and re-took the
// GIL at every call, handing it to that thread). The GIL is taken back by an
// explicit call, never by a destructor: a daemon thread that takes it back
// while the interpreter finalises is ended by CPython (PyThread_exit_thread:
// a forced unwind), which must not meet a noexcept frame (std::terminate).
//
// Ctrl-C. The waits for a callback in progress that a user starts from Python
// -- stop_sync() and the shutdown inside close() / leaving `with` -- wait in
// slices of kSlice with the GIL released and call PyErr_CheckSignals() between
// slices, as Event.wait() can be interrupted: a KeyboardInterrupt (or any
// exception a signal handler raises) ends the wait. stop_sync() has then
// stopped the timer (no new run starts) but its run in progress may still be
// going on; the shutdown goes on in a helper thread (see Runtime::shutdown).
//
// Callbacks and release hooks run on worker threads (or inside advance() and
// Queue.run_nowait() on the caller's): they take the GIL and call the Python
// callable themselves (the _live entry of the timer's token); an exception is
// handed to tickwheel._callback_raised (which reports it) and counted in the
// runtime's callback_exceptions (Runtime::count_callback_exception). A thread
// keeps its Python thread state after its first hook: none is created per
// hook, so a fork() never catches CPython's runtime lock held by a worker
// creating one (CPython gh-112275), and later hooks cost less.
//
// Exit. tickwheel's atexit hook calls begin_exit() before it closes the
// runtimes: from then on no hook enters Python (a callback that falls due is
// skipped, a release leaves its callable to the interpreter's teardown), and
// begin_exit() waits until the hooks already inside have left. A worker never
// takes the GIL once CPython may finalise (it would be ended there, inside a
// noexcept frame of the library: std::terminate). Runtime() raises afterwards.
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
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#if PY_VERSION_HEX < 0x030C0000
#include <structmember.h>
#endif

#include "tickwheel/runtime.hpp"
#include "tickwheel/tickwheel.h"

namespace py = pybind11;
namespace tw = tickwheel;

namespace {

#if PY_VERSION_HEX >= 0x030C0000
constexpr int kMemberU64 = Py_T_ULONGLONG;
constexpr int kMemberSsize = Py_T_PYSSIZET;
constexpr int kMemberObject = Py_T_OBJECT_EX;
constexpr int kMemberReadonly = Py_READONLY;
#else
constexpr int kMemberU64 = T_ULONGLONG;
constexpr int kMemberSsize = T_PYSSIZET;
constexpr int kMemberObject = T_OBJECT_EX;
constexpr int kMemberReadonly = READONLY;
#endif

// How long a wait that Ctrl-C may interrupt sleeps between two checks for a
// signal (PyErr_CheckSignals, with the GIL): the latency of the interrupt.
constexpr auto kSlice = std::chrono::milliseconds(20);

bool interpreter_finalizing() noexcept {
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing() != 0;
#else
    return _Py_IsFinalizing() != 0;
#endif
}

// The error indicator, saved around a hook's Python code (a hook may run
// inside a call that has one set, e.g. a release during a failed start).
class SavedError {
public:
    SavedError() noexcept {
#if PY_VERSION_HEX >= 0x030C0000
        exc_ = PyErr_GetRaisedException();
#else
        PyErr_Fetch(&type_, &exc_, &tb_);
#endif
    }
    ~SavedError() {
#if PY_VERSION_HEX >= 0x030C0000
        if (exc_ != nullptr) PyErr_SetRaisedException(exc_);
#else
        if (type_ != nullptr) PyErr_Restore(type_, exc_, tb_);
#endif
    }
    SavedError(const SavedError&) = delete;
    SavedError& operator=(const SavedError&) = delete;

private:
#if PY_VERSION_HEX < 0x030C0000
    PyObject* type_ = nullptr;
    PyObject* tb_ = nullptr;
#endif
    PyObject* exc_ = nullptr;
};

// The exception now raised (a new reference, normalised), the indicator cleared.
PyObject* take_exception() noexcept {
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
    PyErr_Fetch(&type, &value, &tb);
    if (type == nullptr) return nullptr;
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != nullptr && value != nullptr) PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return value;
#endif
}

// ---- errors --------------------------------------------------------------------------
// Raised to Python as _tickwheel.Error(code, message) by the pybind11 calls
// (tickwheel/__init__.py turns it into TickwheelError, or a subclass, with the
// name of the call), or directly as that TickwheelError by the C calls (through
// tickwheel._make_error).
struct Failure {
    int code;  // negative TW_* code
    std::string message;
};

Failure failure_of(int code) { return {code, tw_strerror(code)}; }
Failure failure_of(const std::error_code& ec) {
    const tw::Error e(ec);
    return {-ec.value(), e.what()};
}

PyObject* g_error_type = nullptr;  // _tickwheel.Error (kept for the process's life)
PyObject* g_make_error = nullptr;  // tickwheel._make_error(code, what, text) -> the exception to raise

// Raises tickwheel's exception for `f` (as a C call's result: returns nullptr).
PyObject* raise_failure(const Failure& f, const char* what) noexcept {
    if (g_make_error == nullptr) {
        PyErr_SetString(PyExc_RuntimeError, f.message.c_str());
        return nullptr;
    }
    PyObject* exc = PyObject_CallFunction(g_make_error, "iss", f.code, what, f.message.c_str());
    if (exc != nullptr) {
        PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc)), exc);
        Py_DECREF(exc);
    }
    return nullptr;
}

std::int64_t to_i64(std::uint64_t ns) {
    // Beyond INT64_MAX: still beyond the core's limit, so still refused (EINVAL).
    return ns > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
               ? std::numeric_limits<std::int64_t>::max()
               : static_cast<std::int64_t>(ns);
}

// ---- releasing the GIL ----------------------------------------------------------------
// Every place that releases the GIL goes through Released, which counts it
// (gil_releases(): how the tests check that only the waiting calls release it).
// restore() takes the GIL back; the destructor does so only on a C++ exception
// path (none of the code run without the GIL throws).
std::atomic<std::uint64_t> g_gil_releases{0};
class Released {
public:
    Released() noexcept : state_(PyEval_SaveThread()) { g_gil_releases.fetch_add(1, std::memory_order_relaxed); }
    void restore() {
        if (state_ != nullptr) PyEval_RestoreThread(std::exchange(state_, nullptr));
    }
    ~Released() {
        if (state_ != nullptr) PyEval_RestoreThread(state_);
    }
    Released(const Released&) = delete;
    Released& operator=(const Released&) = delete;

private:
    PyThreadState* state_;
};

// ---- exit ------------------------------------------------------------------------------
// g_hooks_in counts the hooks between their admission and their end. A hook
// counts itself in before it reads g_exiting (both sequentially consistent),
// so begin_exit() -- which sets g_exiting, then waits for the count to reach
// 0 -- either sees it and waits for it, or the hook sees g_exiting and leaves.
std::atomic<bool> g_exiting{false};
std::atomic<long> g_hooks_in{0};
std::mutex g_exit_m;
std::condition_variable g_exit_cv;

class Admission {
public:
    Admission() noexcept {
        g_hooks_in.fetch_add(1);
        ok_ = !g_exiting.load() && !interpreter_finalizing();
        if (!ok_) leave();
    }
    ~Admission() {
        if (ok_) leave();
    }
    explicit operator bool() const noexcept { return ok_; }
    Admission(const Admission&) = delete;
    Admission& operator=(const Admission&) = delete;

private:
    static void leave() noexcept {
        if (g_hooks_in.fetch_sub(1) == 1 && g_exiting.load()) {
            std::lock_guard<std::mutex> lk(g_exit_m);
            g_exit_cv.notify_all();
        }
    }
    bool ok_;
};

// ---- the Python side ---------------------------------------------------------------------
// Set once by set_hooks() and kept for the process's life (never decref'd:
// worker threads may use them until the runtimes are closed at exit).
PyObject* g_globals = nullptr;          // tickwheel's module dict
PyObject* g_release_name = nullptr;     // "_release"
PyObject* g_release = nullptr;          // tickwheel._release as registered (tests replace it)
PyObject* g_live = nullptr;             // tickwheel._live: token -> (fn, runtime, queued)
PyObject* g_callback_raised = nullptr;  // tickwheel._callback_raised(entry, timer_id, token, exc)
PyTypeObject* g_timer_type = nullptr;   // tickwheel.Timer (a subclass of TimerBase)
PyObject* g_clock_monotonic = nullptr;  // tickwheel.Clock.MONOTONIC
std::atomic<std::uint64_t> g_next_token{1};

// The thread's hooks: the depth (hook_depth(): code that runs inside one, e.g.
// a finalizer dropping a Runtime, must not wait for a runtime) and the tokens
// whose callback runs here (stop_sync of one of them does not wait for itself).
thread_local bool t_kept_state = false;
thread_local int t_hook_depth = 0;
struct RunFrame {
    std::uint64_t token;
    RunFrame* prev;
};
thread_local RunFrame* t_running = nullptr;

bool running_here(std::uint64_t token) noexcept {
    for (const RunFrame* f = t_running; f != nullptr; f = f->prev)
        if (f->token == token) return true;
    return false;
}

// The GIL for a hook, on any thread (also one that holds it: then only a
// counter moves). The thread keeps its thread state after its first hook: the
// first one takes an extra PyGILState reference it never gives back.
class HookGil {
public:
    HookGil() noexcept : state_(PyGILState_Ensure()) {
        if (!t_kept_state) {
            t_kept_state = true;
            (void)PyGILState_Ensure();
        }
        ++t_hook_depth;
    }
    ~HookGil() {
        --t_hook_depth;
        PyGILState_Release(state_);
    }
    HookGil(const HookGil&) = delete;
    HookGil& operator=(const HookGil&) = delete;

private:
    PyGILState_STATE state_;
};

// A thread of the extension's own that ends (Runtime::shutdown's helper) gives
// back the thread state its hooks kept: PyGILState's count of it drops to 0
// with the GIL held, which deletes it. Not once the interpreter exits (its
// teardown frees it).
void drop_kept_state() noexcept {
    if (!t_kept_state) return;
    Admission admitted;
    if (!admitted) return;
    (void)PyGILState_Ensure();               // the GIL; the count goes to 2
    PyGILState_Release(PyGILState_LOCKED);   // 1, the GIL kept
    PyGILState_Release(PyGILState_UNLOCKED); // 0: the thread state is deleted, the GIL released
    t_kept_state = false;
}

// Threads waiting in stop_sync() for a token's release: the release hook
// bumps g_rel_gen and wakes them (only when some wait: one relaxed load).
std::mutex g_rel_m;
std::condition_variable g_rel_cv;
std::uint64_t g_rel_gen = 0;  // under g_rel_m
std::atomic<int> g_rel_waiters{0};

// ---- fork -------------------------------------------------------------------------------
// The epoch is bumped in a fork() child (pthread_atfork): a runtime of another
// epoch is the parent's. The child has only the forking thread: the counts of
// hooks in progress and of waiters are the other threads', and a lock they
// held stays held -- all start afresh.
std::atomic<unsigned> g_epoch{0};
void after_fork_in_child() noexcept {
    g_epoch.fetch_add(1, std::memory_order_relaxed);
    g_hooks_in.store(0);
    g_rel_waiters.store(0);
    new (&g_exit_m) std::mutex();
    new (&g_exit_cv) std::condition_variable();
    new (&g_rel_m) std::mutex();
    new (&g_rel_cv) std::condition_variable();
}

void notify_released() noexcept {
    if (g_rel_waiters.load() == 0) return;
    {
        std::lock_guard<std::mutex> lk(g_rel_m);
        ++g_rel_gen;
    }
    g_rel_cv.notify_all();
}

void fire_hook(std::uint64_t token, tw::Timer t) noexcept {
    Admission admitted;
    if (!admitted) return;  // the interpreter is exiting: no thread but its own may enter Python
    HookGil gil;
    SavedError saved;
    RunFrame frame{token, t_running};
    t_running = &frame;
    PyObject* key = PyLong_FromUnsignedLongLong(token);
    PyObject* entry = key != nullptr ? PyDict_GetItemWithError(g_live, key) : nullptr;  // borrowed
    if (entry != nullptr && PyTuple_CheckExact(entry) && PyTuple_GET_SIZE(entry) == 3) {
        Py_INCREF(entry);
        PyObject* r = PyObject_CallObject(PyTuple_GET_ITEM(entry, 0), nullptr);
        if (r != nullptr) {
            Py_DECREF(r);
        } else {
            // Counted with the runtime's C++ ones (stats, metrics), then reported
            // by tickwheel._callback_raised (on_error, stderr, or re-raised by the
            // Queue.run()/advance() that ran it).
            t.runtime()->count_callback_exception();
            PyObject* exc = take_exception();
            PyObject* id = PyLong_FromUnsignedLongLong(t.id());
            PyObject* rr = exc != nullptr && id != nullptr
                               ? PyObject_CallFunctionObjArgs(g_callback_raised, entry, id, key, exc, nullptr)
                               : nullptr;
            if (rr == nullptr) PyErr_WriteUnraisable(g_callback_raised);
            Py_XDECREF(rr);
            Py_XDECREF(id);
            Py_XDECREF(exc);
        }
        Py_DECREF(entry);  // may drop the last reference to the callable (a release during its run)
    }
    // No entry: cannot happen (the release comes after the last run).
    if (PyErr_Occurred() != nullptr) PyErr_WriteUnraisable(g_live);
    Py_XDECREF(key);
    t_running = frame.prev;
}

void release_hook(std::uint64_t token) noexcept {
    Admission admitted;
    if (!admitted) return;  // exiting: the callable stays in _live, dropped by the interpreter's teardown
    {
        HookGil gil;
        SavedError saved;
        PyObject* key = PyLong_FromUnsignedLongLong(token);
        PyObject* hook = PyDict_GetItemWithError(g_globals, g_release_name);  // borrowed
        if (key != nullptr && hook == g_release) {
            // tickwheel._release itself (not replaced, as tests do to count
            // releases): its work, _live.pop(token, None), without the call.
            PyObject* entry = PyDict_GetItemWithError(g_live, key);  // borrowed
            if (entry != nullptr) {
                Py_INCREF(entry);
                (void)PyDict_DelItem(g_live, key);
                Py_DECREF(entry);  // may drop the last reference to the callable or its Runtime
            }
        } else if (key != nullptr && hook != nullptr) {
            PyObject* r = PyObject_CallFunctionObjArgs(hook, key, nullptr);
            Py_XDECREF(r);
        }
        Py_XDECREF(key);
        if (PyErr_Occurred() != nullptr) PyErr_Clear();  // a failed release only keeps the callable
    }
    notify_released();
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
    void operator()(tw::Timer t) const noexcept { fire_hook(token, t); }
};

// True while the token's callable is in _live (GIL held).
bool live(std::uint64_t token) {
    PyObject* key = PyLong_FromUnsignedLongLong(token);
    if (key == nullptr) {
        PyErr_Clear();
        return false;
    }
    const int r = PyDict_Contains(g_live, key);
    Py_DECREF(key);
    if (r < 0) PyErr_Clear();
    return r > 0;
}

// Waits, GIL released, until `token` has been released (false: a signal
// handler raised, its exception is set). `until_exit`: also ends at exit.
bool wait_released(std::uint64_t token) {
    while (live(token) && !g_exiting.load()) {
        g_rel_waiters.fetch_add(1);
        std::uint64_t gen;
        {
            std::lock_guard<std::mutex> lk(g_rel_m);
            gen = g_rel_gen;
        }
        // A release after the check above needs the GIL, which is held until
        // here: it bumps the generation after `gen` was read.
        Released nogil;
        {
            std::unique_lock<std::mutex> lk(g_rel_m);
            g_rel_cv.wait_for(lk, kSlice, [&] { return g_rel_gen != gen || g_exiting.load(); });
        }
        nogil.restore();
        g_rel_waiters.fetch_sub(1);
        if (PyErr_CheckSignals() != 0) return false;
    }
    return true;
}

// ---- the runtime ---------------------------------------------------------------------
// The state of a shutdown run by a helper thread (Runtime::shutdown): shared
// with it, so that it outlives both.
struct ShutdownTask {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    std::error_code ec;
};

class Runtime {
public:
    Runtime(unsigned shards, unsigned workers, std::uint64_t resolution_ns, std::uint64_t max_timers,
            bool pin_shards, bool manual_clock) {
        if (g_exiting.load())
            throw Failure{TW_ESHUTDOWN,
                          "the interpreter is exiting: tickwheel's exit hook has run (it closed every Runtime), so "
                          "no Runtime can be created any more -- e.g. by an atexit handler registered before "
                          "`import tickwheel`, which runs after tickwheel's own"};
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

    bool stop(std::uint64_t id) {
        Busy b(*this);
        return b.rt().stop(id);
    }
    // stop_sync() of a timer whose token is not known (0): the core's own
    // wait, not interruptible. With the token see Timer.stop_sync.
    bool stop_sync(std::uint64_t id) {
        Busy b(*this);
        Released nogil;  // waits for a run in progress, which takes the GIL
        const bool r = b.rt().stop_sync(id);
        nogil.restore();
        return r;
    }
    bool reset(std::uint64_t id, std::uint64_t delay_ns) {
        Busy b(*this);
        std::error_code ec;
        const bool ok = b.rt().reset(id, tw::Duration(to_i64(delay_ns)), ec);
        if (ec && ec != tw::make_error_code(tw::errc::not_found)) throw failure_of(ec);
        return ok;
    }
    bool reset_at(std::uint64_t id, std::uint64_t deadline_ns) {
        Busy b(*this);
        std::error_code ec;
        const bool ok = b.rt().reset_at(id, tw::TimePoint(tw::Duration(to_i64(deadline_ns))), ec);
        if (ec && ec != tw::make_error_code(tw::errc::not_found)) throw failure_of(ec);
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
            Released nogil;  // waits for the group's runs in progress
            n = b.rt().stop_group(group, true, ec);
            nogil.restore();
        } else {
            n = b.rt().stop_group(group, false, ec);
        }
        if (ec) throw failure_of(ec);
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
        Released nogil;  // runs callbacks here, each taking the GIL
        const std::size_t n = b.rt().advance(tw::Duration(to_i64(ns)), ec);
        nogil.restore();
        if (ec) throw failure_of(ec);
        return n;
    }
    // Shuts the runtime down: cancels the pending timers, waits for the
    // callbacks in progress, joins the threads. `interruptible` (a call from
    // Python: close(), leaving `with`, shutdown()): the core's shutdown runs
    // in a helper thread and this one waits for it in slices, so that Ctrl-C
    // can end the wait (KeyboardInterrupt raised here; the shutdown goes on,
    // and the next call waits for the rest). Inside a hook (where the core
    // reports EDEADLK for the runtime's own callbacks) and at exit it runs on
    // this thread.
    void shutdown(bool interruptible) {
        Busy b(*this, true);
        std::shared_ptr<ShutdownTask> task;
        {
            std::lock_guard<std::mutex> lk(m_);
            task = sd_;
            if (!task && interruptible && t_hook_depth == 0) {
                task = sd_ = std::make_shared<ShutdownTask>();
                tw::Runtime* rt = rt_.get();
                try {
                    // Detached: it touches only the task (which it shares) and
                    // the runtime, which destroy() frees only once it is done.
                    std::thread([task, rt] {
                        std::error_code ec;
                        rt->shutdown(ec);  // release hooks of the cancelled timers may run here
                        drop_kept_state();
                        {
                            std::lock_guard<std::mutex> tl(task->m);
                            task->ec = ec;
                            task->done = true;
                        }
                        task->cv.notify_all();
                    }).detach();
                } catch (const std::system_error&) {
                    sd_.reset();  // no thread: shut down on this one
                    task.reset();
                }
            }
        }
        std::error_code ec;
        if (!task) {
            Released nogil;  // waits for callbacks and joins threads
            b.rt().shutdown(ec);
            nogil.restore();
        } else {
            for (;;) {
                bool done;
                {
                    Released nogil;
                    {
                        std::unique_lock<std::mutex> lk(task->m);
                        if (interruptible)
                            task->cv.wait_for(lk, kSlice, [&] { return task->done; });
                        else
                            task->cv.wait(lk, [&] { return task->done; });
                        done = task->done;
                        ec = task->ec;
                    }
                    nogil.restore();
                }
                if (done) break;
                if (PyErr_CheckSignals() != 0) throw py::error_already_set();
            }
        }
        if (ec) throw failure_of(ec);
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
        Released nogil;
        {
            std::unique_lock<std::mutex> lk(m_);
            if (closing_.exchange(true)) {
                cv_.wait(lk, [&] { return freed_; });
            } else {
                cv_.wait(lk, [&] { return busy_.load() == 0; });
                std::shared_ptr<ShutdownTask> task = sd_;
                std::unique_ptr<tw::Runtime> rt = std::move(rt_);
                lk.unlock();
                if (task) {  // a shutdown in the helper thread: it uses the runtime until done
                    std::unique_lock<std::mutex> tl(task->m);
                    task->cv.wait(tl, [&] { return task->done; });
                }
                rt.reset();  // shutdown (done) and free: may run release hooks of late starts
                lk.lock();
                freed_ = true;
                cv_.notify_all();
            }
        }
        nogil.restore();
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
        // Since 1.7 (issue 34): lateness by stage, the callbacks' duration,
        // saturation and memory (the C tw_stats fields of the same names).
        // A stage's four quantiles: <stage>_p50_ns, _p99_ns, _p999_ns, _max_ns.
        const auto stage = [&d](const char* name, tw::Duration p50, tw::Duration p99, tw::Duration p999,
                                tw::Duration max) {
            const std::string n(name);
            d[py::str(n + "_p50_ns")] = static_cast<std::uint64_t>(p50.count());
            d[py::str(n + "_p99_ns")] = static_cast<std::uint64_t>(p99.count());
            d[py::str(n + "_p999_ns")] = static_cast<std::uint64_t>(p999.count());
            d[py::str(n + "_max_ns")] = static_cast<std::uint64_t>(max.count());
        };
        stage("driver_lateness", st.driver_lateness_p50, st.driver_lateness_p99, st.driver_lateness_p999,
              st.driver_lateness_max);
        stage("wait_lateness", st.wait_lateness_p50, st.wait_lateness_p99, st.wait_lateness_p999,
              st.wait_lateness_max);
        stage("run_duration", st.run_duration_p50, st.run_duration_p99, st.run_duration_p999, st.run_duration_max);
        d["run_duration_samples"] = st.run_duration_samples;
        d["workers_busy"] = st.workers_busy;
        d["waiting_for_worker"] = st.waiting_for_worker;
        d["callbacks_running"] = st.callbacks_running;
        d["oldest_run_age_ns"] = static_cast<std::uint64_t>(st.oldest_run_age.count());
        d["slots"] = static_cast<std::uint64_t>(st.slots);
        d["resident_bytes"] = st.resident_bytes;
        return d;
    }
    std::string metrics() {
        Busy b(*this, true);
        return b.rt().metrics();
    }
    py::list stop_many(const std::vector<std::uint64_t>& ids) {
        Busy b(*this);
        std::vector<std::error_code> results(ids.size());
        std::error_code ec;
        b.rt().stop(std::span<const std::uint64_t>(ids), std::span<std::error_code>(results), ec);
        if (ec) throw failure_of(ec);
        return codes(results);
    }
    py::list reset_many(const std::vector<std::uint64_t>& ids, std::uint64_t delay_ns) {
        Busy b(*this);
        std::vector<std::error_code> results(ids.size());
        std::error_code ec;
        b.rt().reset(std::span<const std::uint64_t>(ids), tw::Duration(to_i64(delay_ns)),
                     std::span<std::error_code>(results), ec);
        if (ec) throw failure_of(ec);
        return codes(results);
    }

    tw::Runtime* native() const { return rt_.get(); }

private:
    static py::list codes(const std::vector<std::error_code>& results) {
        py::list out(results.size());
        for (std::size_t i = 0; i < results.size(); ++i) out[i] = py::int_(-results[i].value());
        return out;
    }

    std::unique_ptr<tw::Runtime> rt_;
    unsigned epoch_ = 0;
    std::atomic<int> busy_{0};
    std::atomic<bool> closing_{false};
    std::atomic<bool> shut_{false};  // shutdown() has returned
    std::mutex m_;
    std::condition_variable cv_;
    bool freed_ = false;
    std::shared_ptr<ShutdownTask> sd_;  // under m_: the shutdown run by a helper thread, once begun
};

// ---- delivery queues -------------------------------------------------------------------
// tickwheel/__init__.py counts the calls on a Queue that it makes through
// pybind11 and frees it (close) only when none is in flight; the object
// itself (its tickwheel::Queue) is freed when Python drops it, after close().
// The C starts (Fast.start_queued) keep the GIL and a reference to the object
// for the whole call, and refuse a queue whose close() has begun (closing_).
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
    // The close begins (tickwheel.Queue.close, before it waits for its calls).
    void mark_closing() { closing_.store(true); }
    // Returns 0 or a negative TW_* code (EDEADLK from inside its own callback:
    // nothing done).
    int close() {
        if (epoch_ != g_epoch.load()) return TW_EFORKED;
        closing_.store(true);
        std::error_code ec;
        Released nogil;  // waits for callbacks of it in progress on other threads
        q_->close(ec);
        nogil.restore();
        if (ec == tw::make_error_code(tw::errc::would_deadlock)) closing_.store(false);  // still usable
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
    bool closing() const { return closing_.load(std::memory_order_relaxed); }

private:
    std::unique_ptr<tw::Queue> q_;
    int fd_ = -1;
    unsigned epoch_ = 0;
    std::atomic<bool> closing_{false};
};

// ---- Fast: a Runtime's C entry points ---------------------------------------------------
// tickwheel.Runtime keeps one (its ``_fast``): the extension's Runtime object
// (a strong reference) and its C++ pointer, so that the hot paths reach the
// runtime without a pybind11 cast.
struct FastObject {
    PyObject_HEAD
    Runtime* native;
    PyObject* h;  // the extension's Runtime (pybind11), which owns *native
    bool manual;  // a manual-clock runtime: callbacks run on the caller's thread
    // The last queue (the extension's Queue object) a queued start used, and its pointer.
    PyObject* qh;
    Queue* q;
};
PyTypeObject* g_fast_type = nullptr;

// ---- TimerBase: the C part of tickwheel.Timer -------------------------------------------
struct TimerObject {
    PyObject_HEAD
    std::uint64_t id;
    std::uint64_t token;  // its _live key (0: unknown, e.g. a Timer made from an id)
    PyObject* fast;       // the runtime's FastObject
    PyObject* runtime;    // the tickwheel.Runtime
    PyObject* clock;      // a tickwheel.Clock
    PyObject* weakrefs;
};
PyTypeObject* g_timer_base = nullptr;

FastObject* fast_of(PyObject* o) { return reinterpret_cast<FastObject*>(o); }

// A new tickwheel.Timer (a new reference), or nullptr with an error set.
PyObject* make_timer(PyObject* fast, PyObject* runtime, std::uint64_t id, std::uint64_t token, PyObject* clock) {
    PyTypeObject* tp = g_timer_type != nullptr ? g_timer_type : g_timer_base;
    auto* t = reinterpret_cast<TimerObject*>(tp->tp_alloc(tp, 0));
    if (t == nullptr) return nullptr;
    t->id = id;
    t->token = token;
    Py_INCREF(fast);
    t->fast = fast;
    Py_INCREF(runtime);
    t->runtime = runtime;
    if (clock == nullptr) clock = g_clock_monotonic != nullptr ? g_clock_monotonic : Py_None;
    Py_INCREF(clock);
    t->clock = clock;
    return reinterpret_cast<PyObject*>(t);
}

// The core start of a Python timer. On success records `entry` in _live under
// a fresh token (after the core took the timer: a KeyboardInterrupt can no
// longer come between the two) and returns the Timer; on failure the core has
// destroyed the callable (its release finds no entry) and the error is raised.
PyObject* start_timer(FastObject* fast, PyObject* runtime, PyObject* entry, const tw::StartOptions& o,
                      PyObject* clock, const char* what) {
    const std::uint64_t token = g_next_token.fetch_add(1, std::memory_order_relaxed);
    std::uint64_t id;
    try {
        Runtime::Busy b(*fast->native);
        std::error_code ec;
        const tw::Timer t = b.rt().start(o, tw::detail::Callback(PyCallback(token)), ec);
        if (ec) return raise_failure(failure_of(ec), what);
        id = t.id();
    } catch (const Failure& f) {
        return raise_failure(f, what);
    }
    PyObject* key = PyLong_FromUnsignedLongLong(token);
    if (key == nullptr || PyDict_SetItem(g_live, key, entry) != 0) {
        Py_XDECREF(key);
        try {  // the timer would run nothing: take it back
            Runtime::Busy b(*fast->native);
            (void)b.rt().stop(id);
        } catch (const Failure&) {
        }
        return nullptr;
    }
    Py_DECREF(key);
    return make_timer(reinterpret_cast<PyObject*>(fast), runtime, id, token, clock);
}

PyObject* new_entry(PyObject* fn, PyObject* runtime, bool queued) {
    return PyTuple_Pack(3, fn, runtime, queued ? Py_True : Py_False);
}

// Fast.start(runtime, fn, delay_s): Runtime.start's common case -- a float
// delay in [0, 1e9) s, every option at its default -- or NotImplemented
// (the caller then takes the checked path, which raises the right error).
PyObject* Fast_start(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "start(runtime, fn, delay_s)");
        return nullptr;
    }
    PyObject* const runtime = args[0];
    PyObject* const fn = args[1];
    if (!PyFloat_CheckExact(args[2]) || !PyCallable_Check(fn)) Py_RETURN_NOTIMPLEMENTED;
    const double s = PyFloat_AS_DOUBLE(args[2]);
    if (!(s >= 0.0 && s < 1e9)) Py_RETURN_NOTIMPLEMENTED;
    FastObject* fast = fast_of(self);
    tw::StartOptions o;
    o.delay = tw::Duration(static_cast<std::int64_t>(std::nearbyint(s * 1e9)));  // round(), half to even
    PyObject* entry = new_entry(fn, runtime, fast->manual);
    if (entry == nullptr) return nullptr;
    PyObject* t = start_timer(fast, runtime, entry, o, nullptr, "start");
    Py_DECREF(entry);
    return t;
}

// The extension's Queue behind a pybind11 object (cached: the last one).
Queue* queue_of(FastObject* fast, PyObject* qh) {
    if (qh == fast->qh) return fast->q;
    Queue* q = py::handle(qh).cast<Queue*>();  // py::cast_error for anything else
    Py_INCREF(qh);
    Py_XSETREF(fast->qh, qh);
    fast->q = q;
    return q;
}

// Fast.start_queued(runtime, fn, deadline_ns, period_ns, queue): a timer
// bound to `queue` (the extension's Queue object) at an absolute monotonic
// deadline (tickwheel.asyncio's call_at/call_later/sleep).
PyObject* Fast_start_queued(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "start_queued(runtime, fn, deadline_ns, period_ns, queue)");
        return nullptr;
    }
    FastObject* fast = fast_of(self);
    PyObject* const runtime = args[0];
    PyObject* const fn = args[1];
    const unsigned long long deadline = PyLong_AsUnsignedLongLong(args[2]);
    if (deadline == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return nullptr;
    const unsigned long long period = PyLong_AsUnsignedLongLong(args[3]);
    if (period == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return nullptr;
    Queue* q;
    try {
        q = queue_of(fast, args[4]);
    } catch (const py::cast_error&) {
        PyErr_SetString(PyExc_TypeError, "start_queued: queue must be the extension's Queue");
        return nullptr;
    }
    if (q->closing()) return raise_failure({TW_ESHUTDOWN, "the Queue is closed"}, "start");
    tw::StartOptions o;
    o.deadline = tw::TimePoint(tw::Duration(to_i64(deadline == 0 ? 1 : deadline)));
    o.period = tw::Duration(to_i64(period));
    o.queue = q->native();
    PyObject* entry = new_entry(fn, runtime, true);
    if (entry == nullptr) return nullptr;
    PyObject* t = start_timer(fast, runtime, entry, o, nullptr, "start");
    Py_DECREF(entry);
    return t;
}

PyObject* Fast_new(PyTypeObject* type, PyObject* args, PyObject* kwds) {
    PyObject* h = nullptr;
    int manual = 0;
    static const char* kw[] = {"runtime", "manual", nullptr};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "Op", const_cast<char**>(kw), &h, &manual)) return nullptr;
    Runtime* native;
    try {
        native = py::handle(h).cast<Runtime*>();
    } catch (const py::cast_error&) {
        PyErr_SetString(PyExc_TypeError, "Fast(runtime): the extension's Runtime");
        return nullptr;
    }
    auto* f = reinterpret_cast<FastObject*>(type->tp_alloc(type, 0));
    if (f == nullptr) return nullptr;
    f->native = native;
    Py_INCREF(h);
    f->h = h;
    f->manual = manual != 0;
    f->qh = nullptr;
    f->q = nullptr;
    return reinterpret_cast<PyObject*>(f);
}

void Fast_dealloc(PyObject* self) {
    FastObject* f = fast_of(self);
    PyTypeObject* tp = Py_TYPE(self);
    Py_CLEAR(f->h);
    Py_CLEAR(f->qh);
    tp->tp_free(self);
    Py_DECREF(tp);
}

PyMethodDef g_fast_methods[] = {
    {"start", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(Fast_start)), METH_FASTCALL,
     "start(runtime, fn, delay_s) -> Timer | NotImplemented"},
    {"start_queued", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(Fast_start_queued)),
     METH_FASTCALL, "start_queued(runtime, fn, deadline_ns, period_ns, queue) -> Timer"},
    {nullptr, nullptr, 0, nullptr}};

PyMemberDef g_fast_members[] = {
    {const_cast<char*>("h"), kMemberObject, offsetof(FastObject, h), kMemberReadonly,
     const_cast<char*>("the extension's Runtime")},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot g_fast_slots[] = {
    {Py_tp_new, reinterpret_cast<void*>(Fast_new)},
    {Py_tp_dealloc, reinterpret_cast<void*>(Fast_dealloc)},
    {Py_tp_methods, g_fast_methods},
    {Py_tp_members, g_fast_members},
    {Py_tp_doc, const_cast<char*>("Fast(runtime, manual): a Runtime's C entry points (private).")},
    {0, nullptr}};

PyType_Spec g_fast_spec = {"tickwheel._tickwheel.Fast", sizeof(FastObject), 0, Py_TPFLAGS_DEFAULT,
                           g_fast_slots};

// ---- TimerBase's methods ----------------------------------------------------------------------
TimerObject* timer_of(PyObject* o) { return reinterpret_cast<TimerObject*>(o); }
Runtime* native_of(TimerObject* t) { return fast_of(t->fast)->native; }

PyObject* Timer_stop(PyObject* self, PyObject*) {
    TimerObject* t = timer_of(self);
    try {
        Runtime::Busy b(*native_of(t));
        if (b.rt().stop(t->id)) Py_RETURN_TRUE;
        Py_RETURN_FALSE;
    } catch (const Failure& f) {
        return raise_failure(f, "stop");
    }
}

PyObject* Timer_stop_sync(PyObject* self, PyObject*) {
    TimerObject* t = timer_of(self);
    bool stopped;
    try {
        if (t->token == 0) return PyBool_FromLong(native_of(t)->stop_sync(t->id));  // not interruptible
        Runtime::Busy b(*native_of(t));
        stopped = b.rt().stop(t->id);
    } catch (const Failure& f) {
        return raise_failure(f, "stop_sync");
    }
    // Its release is the end of its last run (or the stop itself, for a pending
    // timer); from its own callback, stop_sync does not wait for itself.
    if (!running_here(t->token) && !wait_released(t->token)) return nullptr;
    return PyBool_FromLong(stopped);
}

PyObject* Timer_bind(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
    // _bind(runtime, timer_id, clock, token): a Timer made from Python (an id).
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "_bind(runtime, timer_id, clock, token)");
        return nullptr;
    }
    PyObject* fast = PyObject_GetAttrString(args[0], "_fast");
    if (fast == nullptr) return nullptr;
    if (Py_TYPE(fast) != g_fast_type) {
        Py_DECREF(fast);
        PyErr_SetString(PyExc_TypeError, "Timer(runtime, ...): a tickwheel.Runtime");
        return nullptr;
    }
    const unsigned long long id = PyLong_AsUnsignedLongLong(args[1]);
    const unsigned long long token = id == static_cast<unsigned long long>(-1) && PyErr_Occurred()
                                         ? 0
                                         : PyLong_AsUnsignedLongLong(args[3]);
    if (PyErr_Occurred() != nullptr) {
        Py_DECREF(fast);
        return nullptr;
    }
    TimerObject* t = timer_of(self);
    t->id = id;
    t->token = token;
    Py_XSETREF(t->fast, fast);
    Py_INCREF(args[0]);
    Py_XSETREF(t->runtime, args[0]);
    Py_INCREF(args[2]);
    Py_XSETREF(t->clock, args[2]);
    Py_RETURN_NONE;
}

PyObject* Timer_get_h(PyObject* self, void*) {
    TimerObject* t = timer_of(self);
    if (t->fast == nullptr) Py_RETURN_NONE;
    PyObject* h = fast_of(t->fast)->h;
    Py_INCREF(h);
    return h;
}

int Timer_traverse(PyObject* self, visitproc visit, void* arg) {
    TimerObject* t = timer_of(self);
    Py_VISIT(t->fast);
    Py_VISIT(t->runtime);
    Py_VISIT(t->clock);
#if PY_VERSION_HEX >= 0x03090000
    Py_VISIT(Py_TYPE(self));
#endif
    return 0;
}

int Timer_clear(PyObject* self) {
    TimerObject* t = timer_of(self);
    Py_CLEAR(t->fast);
    Py_CLEAR(t->runtime);
    Py_CLEAR(t->clock);
    return 0;
}

void Timer_dealloc(PyObject* self) {
    PyTypeObject* tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (timer_of(self)->weakrefs != nullptr) PyObject_ClearWeakRefs(self);
    (void)Timer_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

PyObject* Timer_new(PyTypeObject* type, PyObject*, PyObject*) {
    auto* t = reinterpret_cast<TimerObject*>(type->tp_alloc(type, 0));
    return reinterpret_cast<PyObject*>(t);  // fields zeroed; _bind() fills them
}

PyMethodDef g_timer_methods[] = {
    {"stop", Timer_stop, METH_NOARGS,
     "stop() -> bool\n--\n\nCancels the timer without blocking. True iff this call prevented a run (a one-shot "
     "had not started; a periodic one will not start another run). False if it already ran its last run, is "
     "running it, or was stopped."},
    {"stop_sync", Timer_stop_sync, METH_NOARGS,
     "stop_sync() -> bool\n--\n\nAs stop(), and waits until the callback is not running (unless called from this "
     "timer's own callback): afterwards it never runs again and the callable has been released."},
    {"_bind", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(Timer_bind)), METH_FASTCALL,
     "_bind(runtime, timer_id, clock, token): fills a Timer made from Python."},
    {nullptr, nullptr, 0, nullptr}};

PyMemberDef g_timer_members[] = {
    {const_cast<char*>("id"), kMemberU64, offsetof(TimerObject, id), kMemberReadonly,
     const_cast<char*>("The timer's id (an int)")},
    {const_cast<char*>("_token"), kMemberU64, offsetof(TimerObject, token), kMemberReadonly, nullptr},
    {const_cast<char*>("_runtime"), kMemberObject, offsetof(TimerObject, runtime), kMemberReadonly, nullptr},
    {const_cast<char*>("_fast"), kMemberObject, offsetof(TimerObject, fast), kMemberReadonly, nullptr},
    {const_cast<char*>("clock"), kMemberObject, offsetof(TimerObject, clock), kMemberReadonly,
     const_cast<char*>("The Clock its delay and deadlines are on (\"monotonic\" for a Timer made from an id, "
                       "e.g. the one on_error gets).")},
#if PY_VERSION_HEX >= 0x03090000
    {const_cast<char*>("__weaklistoffset__"), kMemberSsize, offsetof(TimerObject, weakrefs),
     kMemberReadonly, nullptr},
#endif
    {nullptr, 0, 0, 0, nullptr}};

PyGetSetDef g_timer_getset[] = {
    {const_cast<char*>("_h"), Timer_get_h, nullptr, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyType_Slot g_timer_slots[] = {
    {Py_tp_new, reinterpret_cast<void*>(Timer_new)},
    {Py_tp_dealloc, reinterpret_cast<void*>(Timer_dealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(Timer_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(Timer_clear)},
    {Py_tp_methods, g_timer_methods},
    {Py_tp_members, g_timer_members},
    {Py_tp_getset, g_timer_getset},
    {Py_tp_doc, const_cast<char*>("The C part of tickwheel.Timer (private).")},
    {0, nullptr}};

PyType_Spec g_timer_spec = {"tickwheel._tickwheel.TimerBase", sizeof(TimerObject), 0,
                            Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, g_timer_slots};

// ---- the starts with every option (pybind11: not the hot path) -------------------------------
FastObject* checked_fast(py::handle fast) {
    if (Py_TYPE(fast.ptr()) != g_fast_type) throw py::type_error("a Fast object");
    return fast_of(fast.ptr());
}

py::object start_full(py::handle fast_h, py::handle runtime, py::handle fn, bool queued, std::uint64_t delay_ns,
                      std::uint64_t deadline_ns, std::uint64_t period_ns, int shard, py::handle queue,
                      std::uint32_t policy, std::uint32_t clock, std::uint64_t leeway_ns, std::uint64_t group,
                      py::handle clock_obj) {
    FastObject* fast = checked_fast(fast_h);
    tw::StartOptions o;
    if (deadline_ns != 0)
        o.deadline = tw::TimePoint(tw::Duration(to_i64(deadline_ns)));
    else
        o.delay = tw::Duration(to_i64(delay_ns));
    o.period = tw::Duration(to_i64(period_ns));
    o.shard = shard;
    o.policy = static_cast<tw::PeriodPolicy>(policy);
    o.clock = static_cast<tw::TimerClock>(clock);
    o.leeway = tw::Duration(to_i64(leeway_ns));
    o.group = group;
    if (!queue.is_none()) {
        Queue* q = queue.cast<Queue*>();
        if (q->closing()) {
            raise_failure({TW_ESHUTDOWN, "the Queue is closed"}, "start");
            throw py::error_already_set();
        }
        o.queue = q->native();
    }
    py::object entry = py::reinterpret_steal<py::object>(new_entry(fn.ptr(), runtime.ptr(), queued));
    if (!entry) throw py::error_already_set();
    PyObject* t = start_timer(fast, runtime.ptr(), entry.ptr(), o, clock_obj.ptr(), "start");
    if (t == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(t);
}

// One timer per delay (tw_timer_start_n): `fns` a callable or a list of them.
// Returns a list with, per delay, its Timer or None (not started: its
// callable released).
py::list start_many(py::handle fast_h, py::handle runtime, py::handle fns, bool queued,
                    const std::vector<std::uint64_t>& delays, std::uint64_t period_ns, int shard, py::handle queue,
                    std::uint32_t policy, std::uint32_t clock, std::uint64_t leeway_ns, std::uint64_t group,
                    py::handle clock_obj) {
    FastObject* fast = checked_fast(fast_h);
    const std::size_t n = delays.size();
    const bool one = PyCallable_Check(fns.ptr()) != 0;
    if (!one && (!PyList_CheckExact(fns.ptr()) || static_cast<std::size_t>(PyList_GET_SIZE(fns.ptr())) != n))
        throw failure_of(TW_EINVAL);
    tw::Queue* q = nullptr;
    if (!queue.is_none()) {
        Queue* qq = queue.cast<Queue*>();
        if (qq->closing()) throw Failure{TW_ESHUTDOWN, "the Queue is closed"};
        q = qq->native();
    }
    std::vector<py::object> entries(n);
    for (std::size_t i = 0; i < n; ++i) {
        PyObject* fn = one ? fns.ptr() : PyList_GET_ITEM(fns.ptr(), static_cast<Py_ssize_t>(i));
        entries[i] = py::reinterpret_steal<py::object>(new_entry(fn, runtime.ptr(), queued));
        if (!entries[i]) throw py::error_already_set();
    }
    std::vector<std::uint64_t> tokens(n);
    std::vector<tw::detail::Callback> cbs;
    cbs.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        tokens[i] = g_next_token.fetch_add(1, std::memory_order_relaxed);
        cbs.emplace_back(PyCallback(tokens[i]));  // released by ~vector if not taken
    }
    std::vector<tw::StartOptions> opts(n);
    for (std::size_t i = 0; i < n; ++i) {
        opts[i].delay = tw::Duration(to_i64(delays[i]));
        opts[i].period = tw::Duration(to_i64(period_ns));
        opts[i].shard = shard;
        opts[i].policy = static_cast<tw::PeriodPolicy>(policy);
        opts[i].clock = static_cast<tw::TimerClock>(clock);
        opts[i].leeway = tw::Duration(to_i64(leeway_ns));
        opts[i].group = group;
        opts[i].queue = q;
    }
    std::vector<tw::Timer> out(n);
    {
        Runtime::Busy b(*fast->native, true);  // after shutdown: every element fails (ids 0)
        std::error_code ec;
        b.rt().start(std::span<const tw::StartOptions>(opts), std::span<tw::detail::Callback>(cbs),
                     std::span<tw::Timer>(out), std::span<std::error_code>(), ec);
        if (ec && ec != tw::make_error_code(tw::errc::shutting_down)) throw failure_of(ec);
    }
    py::list timers(n);
    for (std::size_t i = 0; i < n; ++i) {
        if (out[i].id() == 0) {
            timers[i] = py::none();  // not started: the core released its callable
            continue;
        }
        py::object key = py::reinterpret_steal<py::object>(PyLong_FromUnsignedLongLong(tokens[i]));
        if (!key || PyDict_SetItem(g_live, key.ptr(), entries[i].ptr()) != 0) {
            for (std::size_t j = i; j < n; ++j)
                if (out[j].id() != 0) (void)fast->native->native()->stop(out[j].id());
            throw py::error_already_set();
        }
        PyObject* t = make_timer(fast_h.ptr(), runtime.ptr(), out[i].id(), tokens[i], clock_obj.ptr());
        if (t == nullptr) throw py::error_already_set();
        timers[i] = py::reinterpret_steal<py::object>(t);
    }
    return timers;
}

// Where tickwheel's atexit hook begins: no hook enters Python from now on;
// returns (GIL released meanwhile) once the hooks already inside have left.
void begin_exit() {
    g_exiting.store(true);
    {
        std::lock_guard<std::mutex> lk(g_rel_m);
        ++g_rel_gen;
    }
    g_rel_cv.notify_all();  // stop_sync() waits end: their releases may never come now
    if (g_hooks_in.load() == 0) return;
    Released nogil;
    {
        std::unique_lock<std::mutex> lk(g_exit_m);
        g_exit_cv.wait(lk, [] { return g_hooks_in.load() == 0; });
    }
    nogil.restore();
}

std::string library_path() {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&tw_version), &info) != 0 && info.dli_fname != nullptr)
        return info.dli_fname;
    return "";
}

PyObject* add_type(py::module_& m, PyType_Spec& spec, PyObject* base, const char* name) {
    PyObject* t = base != nullptr ? PyType_FromSpecWithBases(&spec, base) : PyType_FromSpec(&spec);
    if (t == nullptr) throw py::error_already_set();
#if PY_VERSION_HEX < 0x03090000
    if (&spec == &g_timer_spec) reinterpret_cast<PyTypeObject*>(t)->tp_weaklistoffset = offsetof(TimerObject, weakrefs);
#endif
    m.add_object(name, py::reinterpret_borrow<py::object>(t));
    return t;  // the module holds a reference too; this one is kept for the process's life
}

}  // namespace

#ifdef TICKWHEEL_PYTHON_ARC4RANDOM
// A wheel's extension links libstdc++ statically (bindings/python/CMakeLists.txt).
// Its std::random_device -- pulled in by libstdc++'s own std::string
// compatibility code, never called by tickwheel -- calls arc4random, which
// glibc has since 2.36 (GLIBC_2.36): the wheel's manylinux_2_34 tag does not
// allow it. This private definition (hidden: not exported, linked before
// libstdc++.a) takes its place: 32 random bits from getentropy (glibc 2.25).
extern "C" __attribute__((visibility("hidden"))) std::uint32_t arc4random(void) noexcept {
    std::uint32_t v = 0;
    while (getentropy(&v, sizeof v) != 0) {
    }
    return v;
}
#endif

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

    g_fast_type = reinterpret_cast<PyTypeObject*>(add_type(m, g_fast_spec, nullptr, "Fast"));
    g_timer_base = reinterpret_cast<PyTypeObject*>(add_type(m, g_timer_spec, nullptr, "TimerBase"));

    m.def("set_hooks", [](py::dict globals, py::handle timer_type, py::handle clock_monotonic) {
        if (g_globals != nullptr) throw failure_of(TW_EINVAL);  // once per process
        py::object release = globals["_release"];
        py::object live = globals["_live"];
        py::object raised = globals["_callback_raised"];
        py::object make_error = globals["_make_error"];
        if (!PyDict_CheckExact(live.ptr())) throw failure_of(TW_EINVAL);
        if (!PyType_Check(timer_type.ptr()) ||
            !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(timer_type.ptr()), g_timer_base))
            throw failure_of(TW_EINVAL);
        g_release = release.release().ptr();
        g_live = live.release().ptr();
        g_callback_raised = raised.release().ptr();
        g_make_error = make_error.release().ptr();
        g_globals = globals.release().ptr();
        g_release_name = py::str("_release").release().ptr();
        g_timer_type = reinterpret_cast<PyTypeObject*>(timer_type.inc_ref().ptr());
        g_clock_monotonic = clock_monotonic.inc_ref().ptr();
    });
    m.def("begin_exit", &begin_exit,
          "Where tickwheel's atexit hook begins: from now on no callback or release hook enters Python, and "
          "Runtime() raises; returns once the hooks in progress have left.");
    m.def("exiting", [] { return g_exiting.load(); }, "True once begin_exit() was called.");
    m.def("hook_depth", [] { return t_hook_depth; },
          "The callbacks and release hooks in progress on this thread (0 outside any).");
    m.def("gil_releases", [] { return g_gil_releases.load(); },
          "How many times this module released the GIL (for the tests).");
    m.def("version", [] { return tw_version(); });
    m.def("now_ns", [](int clock) { return tw_now_ns_clock(clock); });
    m.def("monotonic_ns", [] { return tw_now_ns(); });
    m.def("strerror", [](int code) { return std::string(tw_strerror(code)); });
    m.def("library_path", &library_path);
    m.def("start_full", &start_full);
    m.def("start_many", &start_many);
    m.attr("TW_MAX_DELAY_NS") = py::int_(static_cast<std::uint64_t>(TW_MAX_DELAY_NS));
#ifdef TICKWHEEL_PYTHON_STATIC
    // A wheel's extension: the library's objects are linked in (no libtickwheel.so.1).
    m.attr("STATIC") = true;
#else
    m.attr("STATIC") = false;
#endif

    py::class_<Runtime>(m, "Runtime")
        .def(py::init<unsigned, unsigned, std::uint64_t, std::uint64_t, bool, bool>())
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
        .def("stop_many", &Runtime::stop_many)
        .def("reset_many", &Runtime::reset_many);

    py::class_<Queue>(m, "Queue")
        .def(py::init<Runtime&>())
        .def("fd", &Queue::fd)
        .def("run_nowait", &Queue::run_nowait)
        .def("mark_closing", &Queue::mark_closing)
        .def("close", &Queue::close)
        .def("stats", &Queue::stats);
}
