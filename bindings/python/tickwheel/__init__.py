# SPDX-License-Identifier: MIT OR Apache-2.0
"""tickwheel -- Python binding of the tickwheel timer runtime (ctypes, no compiled code).

    import tickwheel

    with tickwheel.Runtime() as rt:
        t = rt.start(0.5, lambda: print("half a second later"))
        p = rt.start(0.1, tick, period_s=0.1)      # every 100 ms
        ...
        p.stop_sync()                                # no run in progress or to come

Callbacks run on the runtime's worker threads (not the thread that started
them); each run takes the GIL, like any Python thread. Runs of one timer never
overlap. An exception raised by a callback goes to the Runtime's ``on_error``
(default: printed to stderr with its traceback) and does not stop a periodic
timer.

The callable is kept alive by the binding until the C library's release hook
says the runtime is done with the timer (after its last run, when it is
stopped, or at close), then dropped. A start that fails drops it before
raising: the C library's hook did so on ESHUTDOWN, EAGAIN and ENOMEM, the
binding itself on EINVAL and EFORKED (the library rejected the call without
taking the callable). A Runtime stays alive while it has pending timers;
``close()`` it (or use ``with``) to cancel them. Runtimes still open at
interpreter exit are closed then.

fork(): a Runtime created before os.fork() (or a multiprocessing "fork"
start) has no threads in the child. There every call on it raises
ForkedError, none of its callbacks runs and none of its callables is
released (the child's copies are left alone); ``close()`` -- and so
``with``, garbage collection and the exit hook -- only frees the child's
copy of the C runtime, without waiting for anything. A Runtime created in
the child works normally; the parent's runtimes are unaffected
(tests/test_fork.py).

The shared library libtickwheel.so.1 is found, in this order, through the
environment variable TICKWHEEL_LIB (a path; when set, nothing else is tried),
the dynamic loader (LD_LIBRARY_PATH, the ldconfig cache, /lib, /usr/lib), then
pkg-config (``pkg-config --variable=libdir tickwheel``, honouring
PKG_CONFIG_PATH). A library whose tw_version() major differs from this
package's is refused. If none is usable, importing tickwheel raises ImportError
listing what was tried and why it failed. ``tickwheel.library_path`` is the
file loaded. (tickwheel/_loader.py has the details.)
"""

from __future__ import annotations

import atexit
import ctypes
import datetime
import itertools
import os
import sys
import threading
import traceback
from typing import Callable, Dict, Optional, Union

from . import _loader

#: The package's version: always the version of the C library it is released with
#: (pyproject.toml reads it from here; keep it equal to tickwheel.h's TW_VERSION).
__version__ = "1.2.0"

__all__ = [
    "Runtime",
    "Timer",
    "TickwheelError",
    "ForkedError",
    "now",
    "version",
    "library_path",
    "MAX_DELAY_S",
]

# ---- the C API's constants (include/tickwheel/tickwheel.h) --------------------
TW_OK = 0
TW_EINVAL = -22
TW_ENOMEM = -12
TW_ENOENT = -2
TW_EAGAIN = -11
TW_ESHUTDOWN = -108
TW_EDEADLK = -35
TW_EFORKED = -1001
TW_PIN_SHARDS = 0x1
TW_MAX_DELAY_NS = 1 << 60
_ABI_MAJOR = 1  # the N of libtickwheel.so.N this binding speaks
_VERSION_MAJOR = int(__version__.split(".")[0])  # tw_version()'s major must equal it

#: The longest delay or period accepted, in seconds (2**60 ns, about 36.5 years).
MAX_DELAY_S = TW_MAX_DELAY_NS / 1e9

Seconds = Union[int, float, datetime.timedelta]

_U64_MAX = (1 << 64) - 1


class _Config(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("shards", ctypes.c_uint32),
        ("workers", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("resolution_ns", ctypes.c_uint64),
        ("max_timers", ctypes.c_uint64),
    ]


_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint64)
_RELEASE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _Spec(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("shard", ctypes.c_int32),
        ("deadline_ns", ctypes.c_uint64),
        ("delay_ns", ctypes.c_uint64),
        ("period_ns", ctypes.c_uint64),
        ("callback", _CALLBACK),
        ("arg", ctypes.c_void_p),
        ("release", _RELEASE),
    ]


_STAT_FIELDS = [
    "resolution_ns", "pending", "inbox", "live", "started", "fired", "stopped", "reset",
    "callback_exceptions", "cancelled_at_shutdown", "lateness_p50_ns", "lateness_p99_ns",
    "lateness_p999_ns", "lateness_max_ns", "lateness_samples",
]


class _Stats(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("shards", ctypes.c_uint32),
        ("workers", ctypes.c_uint32),
        ("shut_down", ctypes.c_uint32),
    ] + [(name, ctypes.c_uint64) for name in _STAT_FIELDS]


# ---- loading the library ------------------------------------------------------------
def _prepare(lib: ctypes.CDLL) -> None:
    # CDLL (not PyDLL): every call releases the GIL, so a call that waits for
    # a callback (tw_timer_stop_sync, tw_runtime_destroy) lets it take the GIL.
    # A missing function raises AttributeError: _loader refuses that library.
    rt_p = ctypes.c_void_p
    sig = {
        "tw_config_init": (None, [ctypes.POINTER(_Config)]),
        "tw_runtime_create": (ctypes.c_int, [ctypes.POINTER(_Config), ctypes.POINTER(rt_p)]),
        "tw_runtime_shutdown": (ctypes.c_int, [rt_p]),
        "tw_runtime_destroy": (ctypes.c_int, [rt_p]),
        "tw_timer_spec_init": (None, [ctypes.POINTER(_Spec)]),
        "tw_timer_start_ex": (ctypes.c_int, [rt_p, ctypes.POINTER(_Spec), ctypes.POINTER(ctypes.c_uint64)]),
        "tw_timer_stop": (ctypes.c_int, [rt_p, ctypes.c_uint64]),
        "tw_timer_stop_sync": (ctypes.c_int, [rt_p, ctypes.c_uint64]),
        "tw_timer_reset": (ctypes.c_int, [rt_p, ctypes.c_uint64, ctypes.c_uint64]),
        "tw_now_ns": (ctypes.c_uint64, []),
        "tw_runtime_stats": (ctypes.c_int, [rt_p, ctypes.POINTER(_Stats)]),
        "tw_runtime_metrics": (ctypes.c_int, [rt_p, ctypes.c_char_p, ctypes.c_size_t]),
        "tw_strerror": (ctypes.c_char_p, [ctypes.c_int]),
        "tw_version": (ctypes.c_uint32, []),
    }
    for name, (restype, argtypes) in sig.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


#: library_path: the library file loaded (TICKWHEEL_LIB's value when that was used).
_lib, library_path, _ = _loader.load(_ABI_MAJOR, _VERSION_MAJOR, _prepare)


def version() -> tuple:
    """The loaded library's version, as (major, minor, patch)."""
    v = _lib.tw_version()
    return (v >> 16, (v >> 8) & 0xFF, v & 0xFF)


def now() -> float:
    """The runtime's clock (CLOCK_MONOTONIC -- the same as time.monotonic()), in seconds."""
    return _lib.tw_now_ns() / 1e9


class TickwheelError(OSError):
    """A failed tickwheel call. ``code`` is the (negative) TW_* code, ``errno`` its errno
    (for TW_EFORKED, which is no errno value, ``errno`` is 1001)."""

    def __init__(self, code: int, what: str = "", text: Optional[str] = None):
        if text is None:
            text = _lib.tw_strerror(code).decode()
        super().__init__(-code, "%s: %s" % (what, text) if what else text)
        self.code = code

    def __reduce__(self):
        # Picklable, with its class and message: multiprocessing sends a
        # worker's exception to the parent (the default would call
        # cls(errno, strerror), which is not this constructor).
        return (_rebuild_error, (type(self), self.code, self.strerror), self.__dict__ or None)


def _rebuild_error(cls, code: int, message: str) -> TickwheelError:
    exc = cls.__new__(cls)
    TickwheelError.__init__(exc, code, "", message)
    return exc


class ForkedError(TickwheelError):
    """A call on a Runtime created before os.fork(), made in the fork child (TW_EFORKED).
    The runtime's threads do not exist in the child: create a new Runtime there."""

    def __init__(self, what: str = ""):
        super().__init__(TW_EFORKED, what, "the Runtime was created in the parent of this fork() "
                         "child (pid %d) and cannot be used here; create a new Runtime in the "
                         "child" % os.getpid())


def _error(rc: int, what: str) -> TickwheelError:
    return ForkedError(what) if rc == TW_EFORKED else TickwheelError(rc, what)


def _check(rc: int, what: str) -> None:
    if rc != TW_OK:
        raise _error(rc, what)


def _to_ns(value: Seconds, what: str) -> int:
    if isinstance(value, datetime.timedelta):
        ns = (value.days * 86400 + value.seconds) * 10**9 + value.microseconds * 1000
    else:
        ns = round(value * 10**9)
    if ns < 0:
        raise ValueError("%s must not be negative: %r" % (what, value))
    return min(ns, _U64_MAX)  # the library answers TW_EINVAL beyond TW_MAX_DELAY_NS


# ---- callables kept alive until their release hook ---------------------------------
class _Entry:
    __slots__ = ("fn", "runtime")

    def __init__(self, fn: Callable[[], object], runtime: "Runtime"):
        self.fn = fn
        self.runtime = runtime  # the runtime stays alive while it has timers


_live: Dict[int, _Entry] = {}  # token (the C arg) -> entry
_tokens = itertools.count(1)  # next() is atomic under the GIL
_in_hook = threading.local()  # set while this thread runs a callback or release hook

# ctypes enters a callback on a thread Python did not create (a oneTBB worker)
# with PyGILState_Ensure, which creates a thread state for the call and
# deletes it afterwards. Creating one takes CPython's runtime lock without the
# GIL, and a fork() that catches it held deadlocks the child inside os.fork()
# itself on CPython before 3.11.10 / 3.12 (CPython gh-112275), e.g. a
# multiprocessing child started while timers fire. So the first hook a thread
# runs keeps its thread state for good (one more PyGILState_Ensure, never
# released): later hooks on it create none (and cost less). Python frees those
# thread states at exit, when no hook can run any more (_close_all).
_PyGILState_Ensure = ctypes.pythonapi.PyGILState_Ensure  # PyDLL: called with the GIL held
_PyGILState_Ensure.restype = ctypes.c_int
_PyGILState_Ensure.argtypes = []


def _enter_hook() -> None:
    depth = getattr(_in_hook, "depth", None)
    if depth is None:  # this thread's first hook (or a new thread state): keep it
        _PyGILState_Ensure()
        depth = 0
    _in_hook.depth = depth + 1


@_CALLBACK
def _on_fire(token, timer_id):
    entry = _live.get(token)
    if entry is None:  # cannot happen: the release hook comes after the last run
        return
    _enter_hook()
    try:
        entry.fn()
    except BaseException as exc:  # noqa: BLE001 -- nothing may unwind into C
        entry.runtime._report(exc, timer_id)
    finally:
        _in_hook.depth -= 1


def _release(token: int) -> None:
    """Drops the binding's reference to a timer's callable: the work of the release
    hook, also done by the binding itself when the C library did not take the arg."""
    entry = _live.pop(token, None)
    del entry  # may drop the last reference to the callable or the Runtime


@_RELEASE
def _on_release(token):
    _enter_hook()
    try:
        _release(token)
    except BaseException:  # noqa: BLE001
        pass
    finally:
        _in_hook.depth -= 1


# ---- Timer and Runtime --------------------------------------------------------------
class Timer:
    """A started timer. Its methods may be called from any thread, and from callbacks."""

    __slots__ = ("_runtime", "_native", "id", "__weakref__")

    def __init__(self, runtime: "Runtime", timer_id: int):
        self._runtime = runtime
        self._native = runtime._native  # calls go straight to it: one Python frame fewer
        self.id = timer_id

    def stop(self) -> bool:
        """Cancels the timer without blocking. True iff this call prevented a run
        (a one-shot had not started; a periodic one will not start another run).
        False if it already ran its last run, is running it, or was stopped."""
        return self._native.call("stop", _lib.tw_timer_stop, self.id) == TW_OK

    def stop_sync(self) -> bool:
        """As stop(), and waits until the callback is not running (unless called
        from this timer's own callback): afterwards it never runs again and
        the callable has been released."""
        return self._native.call("stop_sync", _lib.tw_timer_stop_sync, self.id) == TW_OK

    def reset(self, delay_s: Seconds) -> bool:
        """Re-arms the pending timer to fire ``delay_s`` from now (a periodic
        one: next run then, then every period). False if it is not pending."""
        ns = _to_ns(delay_s, "delay")
        return self._native.call("reset", _lib.tw_timer_reset, self.id, ns) == TW_OK

    @property
    def runtime(self) -> "Runtime":
        return self._runtime

    def __eq__(self, other):
        return isinstance(other, Timer) and other.id == self.id and other._runtime is self._runtime

    def __hash__(self):
        return hash(self.id)

    def __repr__(self):
        return "<tickwheel.Timer id=%#x>" % self.id


class _Native:
    """The C runtime behind a Runtime, and the bookkeeping that frees it safely.

    Kept apart from Runtime so that the module can close it at interpreter exit
    without holding (or resurrecting) the Runtime object: CPython clears weak
    references only after ``__del__`` has run, so a WeakSet of Runtimes could
    hand a Runtime that is being finalised on a worker thread to the exit hook.
    Every method may be called from any thread, concurrently.

    In a fork() child an inherited _Native (``epoch`` older than ``_fork_epoch``)
    never touches ``cond`` (a thread that no longer exists may hold it) nor
    calls C, except close(), which frees the child's copy (_close_forked).
    """

    __slots__ = ("handle", "cond", "active", "closing", "epoch", "busy_at_fork")

    def __init__(self, handle: int):
        self.handle: Optional[int] = handle  # None once tw_runtime_destroy returned
        self.cond = threading.Condition(threading.Lock())
        self.active = 0  # C calls in flight; the runtime is freed only when none is
        self.closing = False  # set by the first close(); later calls get ESHUTDOWN
        self.epoch = _fork_epoch  # created in this process iff equal to _fork_epoch
        self.busy_at_fork = False  # set in a fork child: a C call or close was in flight

    def call(self, what: str, fn, *args) -> int:
        """Calls fn(handle, *args); TW_OK and TW_ENOENT are returned, the rest raised."""
        if self.epoch != _fork_epoch:
            raise ForkedError(what)
        with self.cond:
            if self.handle is None or self.closing:
                raise TickwheelError(TW_ESHUTDOWN, what)
            self.active += 1
            handle = self.handle
        try:
            rc = fn(handle, *args)
        finally:
            with self.cond:
                self.active -= 1
                if self.active == 0:
                    self.cond.notify_all()
        if rc not in (TW_OK, TW_ENOENT):
            raise _error(rc, what)
        return rc

    def call_rc(self, what: str, fn, *args) -> int:
        """As call(), but returns every code C returned; raises only for a call
        refused before C (closed runtime, or the parent's runtime in a fork child)."""
        if self.epoch != _fork_epoch:
            raise ForkedError(what)
        with self.cond:
            if self.handle is None or self.closing:
                raise TickwheelError(TW_ESHUTDOWN, what)
            self.active += 1
            handle = self.handle
        try:
            return fn(handle, *args)
        finally:
            with self.cond:
                self.active -= 1
                if self.active == 0:
                    self.cond.notify_all()

    def shutdown(self) -> None:
        if self.epoch != _fork_epoch:
            raise ForkedError("shutdown")
        with self.cond:
            if self.handle is None or self.closing:
                return  # close() shuts down before it frees
            self.active += 1
            handle = self.handle
        try:
            rc = _lib.tw_runtime_shutdown(handle)
        finally:
            with self.cond:
                self.active -= 1
                if self.active == 0:
                    self.cond.notify_all()
        _check(rc, "shutdown")

    def close(self) -> None:
        """Shuts down, then frees the C runtime once no call is in flight. The first
        caller frees it; a concurrent one returns after it is freed. In a fork child,
        for a runtime of the parent: frees the child's copy only (_close_forked)."""
        if self.epoch != _fork_epoch:
            self._close_forked()
            return
        self.shutdown()  # raises EDEADLK from a callback of this runtime; calls in flight return at once
        with self.cond:
            if self.closing:
                while self.handle is not None:
                    self.cond.wait()
                return
            self.closing = True
            while self.active:
                self.cond.wait()
            handle = self.handle
        rc = _lib.tw_runtime_destroy(handle)
        with self.cond:
            self.handle = None
            self.cond.notify_all()
        with _natives_lock:
            _natives.discard(self)
        _check(rc, "close")

    def _close_forked(self) -> None:
        # In a fork child: no thread of this runtime exists here, so there is
        # nothing to shut down or wait for. tw_runtime_destroy frees the child's
        # copy without running any callback or release hook -- unless a parent
        # thread was inside a call on it (or freeing it) at the fork: that copy
        # may be mid-update, so it is left alone (the parent owns the original).
        with _natives_lock:  # a fresh lock in the child (_after_fork_in_child)
            handle, self.handle = self.handle, None
            _natives.discard(self)
        if handle is not None and not self.busy_at_fork:
            _lib.tw_runtime_destroy(handle)  # TW_OK: it only frees in a fork child


_natives_lock = threading.Lock()
_natives: "set[_Native]" = set()  # every C runtime not yet freed
_deferred: list = []  # started threads freeing runtimes dropped inside a hook
_fork_epoch = 0  # bumped in each fork() child: _Natives of an older epoch are the parent's


def _after_fork_in_child() -> None:
    # The only thread of the child is the one that forked. Locks held by other
    # parent threads stay held forever here: take a new _natives_lock and never
    # touch an inherited _Native's cond. Threads in _deferred do not exist here;
    # the runtimes they were freeing are closed like any other inherited one.
    global _fork_epoch, _natives_lock
    _fork_epoch += 1
    _natives_lock = threading.Lock()
    _deferred.clear()
    for native in _natives:
        native.busy_at_fork = native.busy_at_fork or bool(native.active) or native.closing


os.register_at_fork(after_in_child=_after_fork_in_child)


def _close_in_background(native: _Native) -> None:
    # Not a daemon: the interpreter waits for it, and so does _close_all.
    th = threading.Thread(target=native.close, name="tickwheel-destroy", daemon=False)
    th.start()
    with _natives_lock:  # appended only once started: _close_all may join it at any time
        _deferred.append(th)


class Runtime:
    """A timer runtime: shards (timing wheels) and worker threads running callbacks.

    Runtime(shards=0, workers=0, resolution_s=None, max_timers=0, pin_shards=False, on_error=None)

    shards / workers: 0 = one per online CPU. resolution_s: the tick (default
    1 ms; 1 us .. 1 s); deadlines are rounded up to it, never early.
    max_timers: live timers allowed (0 = unlimited). on_error(exc, timer):
    called on the worker thread when a callback raises.
    """

    def __init__(
        self,
        shards: int = 0,
        workers: int = 0,
        resolution_s: Optional[Seconds] = None,
        max_timers: int = 0,
        pin_shards: bool = False,
        on_error: Optional[Callable[[BaseException, Timer], None]] = None,
    ):
        cfg = _Config()
        _lib.tw_config_init(ctypes.byref(cfg))
        cfg.shards = shards
        cfg.workers = workers
        if resolution_s is not None:
            cfg.resolution_ns = max(1, _to_ns(resolution_s, "resolution"))
        cfg.max_timers = max_timers
        cfg.flags = TW_PIN_SHARDS if pin_shards else 0
        handle = ctypes.c_void_p()
        _check(_lib.tw_runtime_create(ctypes.byref(cfg), ctypes.byref(handle)), "tw_runtime_create")
        native = _Native(handle.value)
        with _natives_lock:
            _natives.add(native)
        self._native = native
        self._on_error = on_error

    # -- timers --------------------------------------------------------------------
    def start(self, delay_s: Seconds, fn: Callable[[], object], period_s: Seconds = 0, *,
              shard: int = -1) -> Timer:
        """Calls ``fn()`` once, ``delay_s`` seconds from now; with ``period_s`` > 0,
        then every ``period_s`` seconds (fixed rate) until stopped. Returns the Timer."""
        return self._start(fn, 0, _to_ns(delay_s, "delay"), _to_ns(period_s, "period"), shard)

    def start_at(self, deadline_s: float, fn: Callable[[], object], period_s: Seconds = 0, *,
                 shard: int = -1) -> Timer:
        """As start(), at an absolute deadline on the runtime's clock
        (tickwheel.now(), i.e. time.monotonic()). A past deadline fires at once."""
        deadline_ns = _to_ns(deadline_s, "deadline")
        return self._start(fn, max(1, deadline_ns), 0, _to_ns(period_s, "period"), shard)

    def _start(self, fn, deadline_ns: int, delay_ns: int, period_ns: int, shard: int) -> Timer:
        if not callable(fn):
            raise TypeError("fn must be callable")
        token = next(_tokens)
        _live[token] = _Entry(fn, self)
        spec = _Spec()
        _lib.tw_timer_spec_init(ctypes.byref(spec))
        spec.shard = shard
        spec.deadline_ns = deadline_ns
        spec.delay_ns = delay_ns
        spec.period_ns = period_ns
        spec.callback = _on_fire
        spec.arg = token
        spec.release = _on_release
        out = ctypes.c_uint64(0)
        try:
            rc = self._native.call_rc("start", _lib.tw_timer_start_ex, ctypes.byref(spec), ctypes.byref(out))
        except BaseException:
            _release(token)  # refused before C (closed, forked runtime): nothing took it
            raise
        if rc != TW_OK:
            # The release rule, from the return code alone: on TW_EINVAL and
            # TW_EFORKED the library did not take the token, so it is released
            # here; on TW_ESHUTDOWN, TW_EAGAIN and TW_ENOMEM (every other code)
            # its hook has released it before the call returned.
            if rc in (TW_EINVAL, TW_EFORKED):
                _release(token)
            raise _error(rc, "start")
        return Timer(self, out.value)

    # -- lifecycle ---------------------------------------------------------------------
    def _call(self, what: str, fn, *args) -> int:
        """Calls fn(handle, *args); TW_OK and TW_ENOENT are returned, the rest raised."""
        return self._native.call(what, fn, *args)

    def shutdown(self) -> None:
        """Cancels pending timers (releasing their callables), waits for running
        callbacks, stops the threads. Afterwards timer calls raise TickwheelError
        (ESHUTDOWN). Raises TickwheelError(EDEADLK) from one of its callbacks."""
        self._native.shutdown()

    def close(self) -> None:
        """shutdown(), then frees the runtime. Idempotent; safe to call from several
        threads at once (each returns once it is freed). Raises
        TickwheelError(EDEADLK) from one of its own callbacks (nothing done)."""
        self._native.close()

    @property
    def closed(self) -> bool:
        return self._native.handle is None

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        native = getattr(self, "_native", None)  # absent if __init__ failed
        if native is None or native.handle is None:
            return
        if getattr(_in_hook, "depth", 0):
            # Dropped inside a callback or release hook of some runtime, where
            # closing one could deadlock (its own) or stall a worker: free it
            # from another thread, which _close_all waits for at exit.
            _close_in_background(native)
            return
        try:
            native.close()
        except Exception:  # noqa: BLE001 -- nothing may escape __del__
            pass

    # -- observation ----------------------------------------------------------------------
    def stats(self) -> dict:
        """A snapshot of the runtime's counters (the C tw_stats fields)."""
        st = _Stats()
        st.size = ctypes.sizeof(_Stats)
        self._native.call("stats", _lib.tw_runtime_stats, ctypes.byref(st))
        out = {"shards": st.shards, "workers": st.workers, "shut_down": bool(st.shut_down)}
        out.update((name, getattr(st, name)) for name in _STAT_FIELDS)
        return out

    def metrics(self) -> str:
        """The runtime's counters, gauges and callback-lateness histogram in the
        Prometheus text exposition format 0.0.4 (tw_runtime_metrics): serve it as
        the body of a /metrics response with Content-Type
        "text/plain; version=0.0.4". Metric names start with "tickwheel_". Works
        from any thread, from callbacks, and after shutdown() (the final values);
        it never blocks the runtime. Raises TickwheelError (ESHUTDOWN) once
        closed, ForkedError in a fork child."""
        size = 4096
        while True:
            buf = ctypes.create_string_buffer(size)
            n = self._native.call_rc("metrics", _lib.tw_runtime_metrics, buf, size)
            if n < 0:
                raise _error(n, "metrics")
            if n < size:
                return buf.raw[:n].decode("utf-8")
            size = n + 1024  # the text grew past the buffer (counters grow): again, with room

    def _report(self, exc: BaseException, timer_id: int) -> None:
        handler = self._on_error
        try:
            if handler is not None:
                handler(exc, Timer(self, timer_id))
            else:
                print("tickwheel: exception in the callback of timer %#x:" % timer_id, file=sys.stderr)
                traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
        except BaseException:  # noqa: BLE001
            pass

    def __repr__(self):
        return "<tickwheel.Runtime %s>" % ("closed" if self.closed else "open")


@atexit.register
def _close_all() -> None:
    # Runs after the interpreter has joined its non-daemon threads and before it
    # finalises: from then on no worker thread may call into Python (a thread that
    # did would be torn down mid-callback). So every C runtime still alive is closed
    # here -- open ones, and ones being freed by a background thread (close() waits
    # for those) -- and the background threads are joined, including any started by
    # a callback or release hook while we wait.
    while True:
        with _natives_lock:
            natives = list(_natives)
            threads, _deferred[:] = list(_deferred), []
        if not natives and not threads:
            return
        for native in natives:
            try:
                native.close()
            except Exception:  # noqa: BLE001
                pass
        for th in threads:
            th.join()
