# SPDX-License-Identifier: MIT OR Apache-2.0
"""tickwheel.asyncio -- tickwheel timers whose callbacks run on an asyncio event loop::

    import asyncio, tickwheel, tickwheel.asyncio as twa

    async def main(rt):
        h = twa.call_later(rt, 0.5, print, "half a second later")  # like loop.call_later
        if h.cancel():             # True iff this prevented the run: exact
            ...
        await twa.sleep(rt, 0.1)   # like asyncio.sleep
        async with twa.timeout(rt, 2.0):
            await something()      # cancelled after 2 s: raises TimeoutError

    with tickwheel.Runtime() as rt:
        asyncio.run(main(rt))

The callbacks run on the loop's thread, inside the loop, like the loop's own
call_later callbacks -- never on a worker thread, and no worker thread takes
the GIL for them. Under the hood each (runtime, loop) pair gets one delivery
Queue (``rt.queue()``), made on first use; the loop watches its fd with
``loop.add_reader``, and the reader runs up to ``BATCH`` due callbacks per
loop iteration (``Queue.run(BATCH, 0)``, which keeps the GIL across the
batch).

The functions must be called on the loop's thread (as the loop's own
call_later), inside a running loop, or with ``loop=`` a loop of this thread
that is not running yet. Times are on tickwheel's clock, ``tickwheel.now()``
= ``time.monotonic()``, which is also ``loop.time()`` for asyncio's own
loops. A callback's exception goes to ``loop.call_exception_handler``, except
KeyboardInterrupt and SystemExit, which propagate out of the loop, as for the
loop's own callbacks. Callbacks run in a copy of the caller's contextvars
context (or ``context=``).

Lifetime. The delivery of a (runtime, loop) pair ends -- its reader removed,
its queue closed, the handles still pending cancelled (their callbacks never
run) -- when the runtime is shut down or closed (``await sleep()`` calls then
raise TickwheelError ESHUTDOWN; a ``timeout()`` stops applying) or when the
loop is shut down by ``asyncio.run()`` / ``asyncio.Runner`` (which call
``loop.shutdown_asyncgens()`` before closing it), or by ``detach()``. A loop
closed otherwise ends it when the loop is garbage-collected. While it lasts it
keeps the runtime alive.
"""

from __future__ import annotations

# Absolute imports: inside this package the name "asyncio" is this module only
# as tickwheel.asyncio; ``import asyncio`` is the standard library's.
import asyncio as _asyncio
import contextvars as _contextvars
import datetime as _datetime
import math as _math
import numbers as _numbers
import os as _os
import threading as _threading
import time as _time
import weakref as _weakref
from typing import Any, Callable, Dict, Optional, Union

import tickwheel as _tw

__all__ = ["call_later", "call_at", "sleep", "timeout", "Timeout", "TimerHandle", "detach", "queue_stats",
           "BATCH"]

#: Most callbacks run per loop iteration (each iteration of the loop that finds
#: the queue's fd readable runs up to this many, then lets the loop's other
#: work run).
BATCH = 256

Seconds = Union[int, float, _datetime.timedelta]


def _seconds_to_ns(value: Seconds, what: str, call: str = "tickwheel.asyncio") -> int:
    """Seconds (or a timedelta) to ns, as the binding's start(), except that
    negative is 0 (asyncio's rule: at once). NaN and infinity raise
    InvalidArgumentError (a ValueError) naming ``what`` and the value given."""
    kind = type(value)
    if kind is int:
        ns = value * 1_000_000_000
    elif kind is float:
        if not _math.isfinite(value):
            raise _tw._invalid(call, "%s=%s is not a finite number of seconds" % (what, _tw._show(value)))
        # (beyond 1e18 s the product would overflow a float: far beyond any limit anyway)
        ns = round(value * 1_000_000_000) if abs(value) < 1e18 else int(value) * 1_000_000_000
    elif isinstance(value, _datetime.timedelta):
        ns = (value.days * 86400 + value.seconds) * 1_000_000_000 + value.microseconds * 1000
    elif isinstance(value, _numbers.Real):
        ns = round(value * 1_000_000_000)
    else:  # never value * 10**9 on anything: a str would be repeated 10**9 times
        raise TypeError("%s must be a number of seconds or a timedelta, not %s" % (what, kind.__name__))
    return ns if ns > 0 else 0


# ---- the delivery of one (runtime, loop) pair ----------------------------------------------
_registry_lock = _threading.Lock()
# loop -> {runtime's _Native: _Delivery}; weak on the loop (a _Delivery holds it weakly too).
_registry: "_weakref.WeakKeyDictionary[Any, Dict[Any, _Delivery]]" = _weakref.WeakKeyDictionary()
_last: Optional["_Delivery"] = None  # the last one used: call_later's fast path


class _Delivery:
    """A queue of ``runtime`` and ``loop``'s reader on (a duplicate of) its fd."""

    __slots__ = ("runtime", "native", "loop_ref", "queue", "fd", "sleepers", "agen", "finalizer", "closed",
                 "start_queued", "qh", "__weakref__")

    def __init__(self, runtime: "_tw.Runtime", loop: "_asyncio.AbstractEventLoop"):
        self.closed = True  # until fully set up
        self.runtime = runtime
        self.native = runtime._native
        self.loop_ref = _weakref.ref(loop)
        self.sleepers: set = set()  # futures of sleep() calls in progress
        self.agen = None  # a weak reference to the async generator of _arm_close_hook
        self.queue = runtime.queue()
        # The extension's queued start (C) and the queue's extension object:
        # _schedule's hot path, without tickwheel.Runtime._start's checks
        # (they hold by construction: a Queue of this runtime, options valid).
        self.start_queued = runtime._fast.start_queued
        self.qh = self.queue._handle
        # The loop watches a duplicate of the queue's fd: Runtime.close() (from
        # any thread, also the loop's, between two iterations) frees the queue
        # and closes its fd, and an fd closed under the loop's selector could be
        # reused by the next add_reader. The duplicate keeps the eventfd open;
        # it stays readable for good once the runtime is shut down, so the
        # reader runs, learns that, and removes itself.
        self.fd = _os.dup(self.queue.fd())
        try:
            loop.add_reader(self.fd, self._on_readable)
        except BaseException:
            _os.close(self.fd)
            self.queue.close()
            raise
        self.closed = False
        # A loop closed without shutdown_asyncgens() and then dropped: end it then
        # (any thread; the selector is gone with the loop).
        self.finalizer = _weakref.finalize(loop, self._loop_gone)
        self.finalizer.atexit = False  # at exit tickwheel closes the runtimes (and their queues)
        if _get_running_loop() is loop:
            self._arm_close_hook()
        else:
            loop.call_soon(self._arm_close_hook)

    # -- the loop's side ----------------------------------------------------------------------
    def _on_readable(self, _keepalive=None) -> None:
        try:
            self.queue.run(BATCH, 0)
        except _tw.TickwheelError as exc:
            # ESHUTDOWN: the runtime is shut down or closed (or the queue was
            # closed). Anything else (ForkedError) ends it as well.
            self.close()
            if exc.code != _tw.TW_ESHUTDOWN:
                raise

    def _arm_close_hook(self) -> None:
        # asyncio.run(), asyncio.Runner (and so IsolatedAsyncioTestCase) call
        # loop.shutdown_asyncgens() before loop.close(): it closes every async
        # generator the loop saw start (its firstiter hook, installed while
        # the loop runs). One of ours, parked at its yield, ends the delivery
        # there, on the loop's thread, while the loop still runs.
        #
        # Only the loop may hold it (as an argument of the reader): the
        # generator holds the loop (its finalizer hook), so held by anything
        # that outlives the loop it would keep a closed loop alive for good.
        # Dropped with the reader -- by close(), or by a loop.close() not
        # preceded by shutdown_asyncgens() -- it is collected (the loop's
        # finalizer hook then closes it, which is a no-op here).
        if self.closed or self.agen is not None:
            return
        loop = self.loop_ref()
        if loop is None or loop.is_closed():
            return
        agen = self._until_loop_shutdown()
        try:
            agen.asend(None).send(None)
        except StopIteration:
            pass
        self.agen = _weakref.ref(agen)
        loop.add_reader(self.fd, self._on_readable, agen)

    async def _until_loop_shutdown(self):
        try:
            yield
        finally:
            self.close()

    # -- the end -----------------------------------------------------------------------------------
    def close(self) -> None:
        """On the loop's thread (or once the loop is gone). Idempotent."""
        if self.closed:
            return
        loop = self.loop_ref()
        if self.queue in _tw._running_stack():
            # From inside one of its callbacks (detach() there): the queue
            # cannot be closed inside its own run; right after it, then.
            if loop is not None and not loop.is_closed():
                loop.call_soon(self.close)
            return
        self.closed = True
        global _last
        if _last is self:
            _last = None
        self.finalizer.detach()
        agen, self.agen = (self.agen() if self.agen is not None else None), None
        if agen is not None and not agen.ag_running:
            # Finished here (its finally finds this closed): not left to the
            # loop's finalizer hook, which would schedule a task to close it.
            try:
                agen.aclose().send(None)
            except (StopIteration, RuntimeError):
                pass
        if loop is not None:
            with _registry_lock:
                per_loop = _registry.get(loop)
                if per_loop is not None and per_loop.get(self.native) is self:
                    del per_loop[self.native]
                    if not per_loop:
                        del _registry[loop]
            if not loop.is_closed():
                loop.remove_reader(self.fd)
        _os.close(self.fd)
        try:
            self.queue.close()  # cancels the pending handles; nothing once the runtime is shut down
        except _tw.TickwheelError:
            pass
        if loop is not None and not loop.is_closed():
            for fut in list(self.sleepers):
                if not fut.done():
                    fut.set_exception(_tw.TickwheelError(_tw.TW_ESHUTDOWN, "tickwheel.asyncio.sleep"))
        self.sleepers.clear()

    def _loop_gone(self) -> None:
        # A weakref finalizer: any thread, any point of the program.
        if self.closed:
            return
        self.closed = True
        global _last
        if _last is self:
            _last = None
        _os.close(self.fd)
        self.queue._close_from_finalizer()


def _get_running_loop():
    return _asyncio._get_running_loop()


def _delivery(runtime: "_tw.Runtime", loop) -> _Delivery:
    global _last
    d = _last
    if d is not None and d.runtime is runtime and d.loop_ref() is loop and not d.closed:
        return d
    if not isinstance(runtime, _tw.Runtime):
        raise TypeError("runtime must be a tickwheel.Runtime, not %s" % type(runtime).__name__)
    if loop.is_closed():
        raise RuntimeError("Event loop is closed")
    with _registry_lock:
        per_loop = _registry.get(loop)
        if per_loop is None:
            per_loop = _registry[loop] = {}
        d = per_loop.get(runtime._native)
    if d is None or d.closed:
        d = _Delivery(runtime, loop)  # raises TickwheelError (ESHUTDOWN) for a closed runtime
        with _registry_lock:
            per_loop[runtime._native] = d
    _last = d
    return d


_get_ident = _threading.get_ident


def _loop_of(loop):
    # Fast path: the loop of the last delivery used, if it runs in this thread.
    # asyncio's loops set _thread_id to the ident of the thread running them
    # (None when stopped), so this is exact for them; other loops take the
    # slow path. (get_running_loop() makes a getpid() system call each time.)
    if loop is None:
        d = _last
        if d is not None:
            last = d.loop_ref()
            if last is not None and getattr(last, "_thread_id", None) == _get_ident():
                return last
        return _asyncio.get_running_loop()  # RuntimeError outside a running loop
    if getattr(loop, "_thread_id", None) == _get_ident():
        return loop
    running = _get_running_loop()
    if running is not None and running is not loop:
        raise RuntimeError("loop= is not the loop running in this thread (tickwheel.asyncio is not "
                           "thread-safe, as the loop's own call_later: use loop.call_soon_threadsafe)")
    return loop


# ---- handles ---------------------------------------------------------------------------------
class TimerHandle:
    """A callback scheduled by call_later() / call_at() (asyncio.TimerHandle's
    counterpart). ``cancel()`` says whether it prevented the run."""

    __slots__ = ("_timer", "_when", "_callback", "_args", "_context", "_cancelled", "__weakref__")

    def __init__(self, when: float, callback: Callable[..., object], args: tuple,
                 context: Optional[_contextvars.Context]):
        self._timer: Optional[_tw.Timer] = None
        self._when = when
        self._callback = callback
        self._args = args
        self._context = context  # no reference to the loop: a pending timer must not keep it alive
        self._cancelled = False

    def _run(self) -> None:
        # Runs inside the queue's reader, on the loop's thread.
        callback = self._callback
        if callback is None:  # cancelled during this periodic run's own callback
            return
        try:
            if self._context is None:
                callback(*self._args)
            else:
                self._context.run(callback, *self._args)
        except (SystemExit, KeyboardInterrupt):
            raise  # re-raised by Queue.run() after its batch, then out of the loop
        except BaseException as exc:  # noqa: BLE001 -- the loop's rule for callbacks
            _asyncio.get_running_loop().call_exception_handler({  # the loop whose reader runs it
                "message": "Exception in callback %r of a tickwheel timer" % (callback,),
                "exception": exc,
                "handle": self,
            })

    def cancel(self) -> bool:
        """Cancels the timer (asyncio.TimerHandle.cancel). True iff this call
        prevented a run: a one-shot had not run (even if it was due and waiting
        for the loop), a periodic one will not run again. False if it already
        ran (or is running its last run), was cancelled before, or its runtime
        is shut down (which cancelled it). Never raises."""
        self._cancelled = True
        timer = self._timer
        if timer is None:
            return False
        try:
            stopped = timer.stop()
        except _tw.TickwheelError:  # the runtime is shut down (which cancelled it) or closed
            stopped = False
        if stopped:
            self._timer = None
            self._callback = None
            self._args = ()
        return stopped

    def cancelled(self) -> bool:
        """True once cancel() was called (as asyncio's: even if it returned False)."""
        return self._cancelled

    def when(self) -> float:
        """The deadline of the (first) run, on tickwheel's clock (tickwheel.now(),
        time.monotonic(), the loop's time() for asyncio's loops). The callback
        never starts before it."""
        return self._when

    @property
    def timer(self) -> Optional["_tw.Timer"]:
        """The underlying tickwheel.Timer (e.g. for reset()); None once cancel() stopped it."""
        return self._timer

    def __repr__(self):
        state = " cancelled" if self._cancelled else ""
        return "<tickwheel.asyncio.TimerHandle when=%f %r%s>" % (self._when, self._callback, state)


def call_at(runtime: "_tw.Runtime", when: float, callback: Callable[..., object], *args: Any,
            period: Seconds = 0, context: Optional[_contextvars.Context] = None,
            loop: Optional[_asyncio.AbstractEventLoop] = None) -> TimerHandle:
    """Schedules ``callback(*args)`` to run on the loop at ``when`` (seconds on
    tickwheel.now()'s clock; a past time runs as soon as possible), and then,
    with ``period`` > 0, every ``period`` seconds (fixed rate, missed periods
    skipped) until cancelled. ``runtime``'s timer is bound to the loop's
    delivery queue (made on first use). Returns a TimerHandle.

    Raises TypeError (bad runtime, callback or time), RuntimeError (no
    running loop, a closed loop, or ``loop=`` not this thread's),
    TickwheelError (ESHUTDOWN: the runtime is shut down or closed),
    InvalidArgumentError (a ValueError: ``when`` more than
    tickwheel.MAX_DELAY_S ahead, or not a finite number)."""
    loop = _loop_of(loop)
    if not callable(callback):
        raise TypeError("callback must be callable, not %s" % type(callback).__name__)
    if type(when) is float and _math.isfinite(when * 1e9):
        # Rounded up: the run never starts before ``when`` as a float either,
        # and when() returns ``when`` itself (as asyncio's).
        deadline_ns = max(1, _math.ceil(when * 1_000_000_000))
    else:
        deadline_ns = max(1, _seconds_to_ns(when, "when", "call_at"))
        when = deadline_ns / 1e9
    return _schedule(runtime, loop, deadline_ns, when, callback, args, period, context, "when", when)


def call_later(runtime: "_tw.Runtime", delay: Seconds, callback: Callable[..., object], *args: Any,
               period: Seconds = 0, context: Optional[_contextvars.Context] = None,
               loop: Optional[_asyncio.AbstractEventLoop] = None) -> TimerHandle:
    """As call_at(), ``delay`` seconds from now (a number or a timedelta;
    negative = 0, as asyncio's). ``handle.when()`` is the deadline."""
    d = _last
    if (d is not None and loop is None and d.runtime is runtime and type(delay) is float and 0.0 <= delay < 1e9
            and period is _ZERO and not d.closed):
        lp = d.loop_ref()
        if lp is not None and getattr(lp, "_thread_id", None) == _get_ident():
            # The common case: a float delay on the last delivery's loop, running
            # in this thread. The same steps as below, without the calls.
            if not callable(callback):
                raise TypeError("callback must be callable, not %s" % type(callback).__name__)
            deadline_ns = _monotonic_ns() + round(delay * 1_000_000_000)
            handle = _new_handle(TimerHandle)
            handle._timer = None
            handle._when = deadline_ns / 1e9
            handle._callback = callback
            handle._args = args
            handle._context = _copy_context() if context is None else context
            handle._cancelled = False
            handle._timer = d.start_queued(runtime, handle._run, deadline_ns, 0, d.qh)
            return handle
    loop = _loop_of(loop)
    if not callable(callback):
        raise TypeError("callback must be callable, not %s" % type(callback).__name__)
    delay_ns = _seconds_to_ns(delay, "delay", "call_later")
    deadline_ns = _time.monotonic_ns() + delay_ns
    return _schedule(runtime, loop, deadline_ns, deadline_ns / 1e9, callback, args, period, context, "delay", delay)


_ZERO = 0  # call_later()'s default period, compared by identity on its fast path
_monotonic_ns = _time.monotonic_ns
_copy_context = _contextvars.copy_context
_new_handle = object.__new__


def _schedule(runtime, loop, deadline_ns: int, when: float, callback, args, period: Seconds,
              context, name: str = "when", value: Any = None) -> TimerHandle:
    call = "call_later" if name == "delay" else "call_at"
    d = _delivery(runtime, loop)
    period_ns = _seconds_to_ns(period, "period", call) if period else 0
    if period_ns > _tw.TW_MAX_DELAY_NS:
        raise _tw._invalid(call, "period=%s is above %s" % (_tw._show(period), _tw._MAX_DELAY_TEXT))
    if deadline_ns - _time.monotonic_ns() > _tw.TW_MAX_DELAY_NS:
        # (The library's own check, made here to say it in seconds.)
        raise _tw._invalid(call, ("%s=%s is above %s" if name == "delay" else "%s=%s is more than %s after now")
                           % (name, _tw._show(value), _tw._MAX_DELAY_TEXT))
    handle = TimerHandle(when, callback, args,
                         _contextvars.copy_context() if context is None else context)
    handle._timer = d.start_queued(runtime, handle._run, deadline_ns, period_ns, d.qh)
    return handle


# ---- awaitables ------------------------------------------------------------------------------
def _wake(fut: "_asyncio.Future", result: Any) -> None:
    if not fut.done():
        fut.set_result(result)


async def sleep(runtime: "_tw.Runtime", delay: Seconds, result: Any = None) -> Any:
    """As asyncio.sleep(delay, result), on a tickwheel timer: returns ``result``
    after ``delay`` seconds (never earlier). Cancelling the awaiting task
    stops the timer. Raises TickwheelError (ESHUTDOWN) if the runtime shuts
    down meanwhile."""
    loop = _asyncio.get_running_loop()
    fut = loop.create_future()
    delay_ns = _seconds_to_ns(delay, "delay", "sleep")
    d = _delivery(runtime, loop)
    handle = TimerHandle(0.0, _wake, (fut, result), None)
    handle._timer = d.start_queued(runtime, handle._run, _time.monotonic_ns() + delay_ns, 0, d.queue._handle)
    d.sleepers.add(fut)
    try:
        return await fut
    finally:
        d.sleepers.discard(fut)
        handle.cancel()


class Timeout:
    """The async context manager of timeout(). ``expired()`` says whether it fired."""

    __slots__ = ("_runtime", "_delay", "_task", "_handle", "_expired", "_cancelling")

    def __init__(self, runtime: "_tw.Runtime", delay: Optional[Seconds]):
        if not isinstance(runtime, _tw.Runtime):
            raise TypeError("runtime must be a tickwheel.Runtime, not %s" % type(runtime).__name__)
        self._runtime = runtime
        self._delay = delay
        self._task = None
        self._handle: Optional[TimerHandle] = None
        self._expired = False
        self._cancelling = 0

    async def __aenter__(self) -> "Timeout":
        task = _asyncio.current_task()
        if task is None:
            raise RuntimeError("tickwheel.asyncio.timeout() must be used inside a task")
        self._task = task
        cancelling = getattr(task, "cancelling", None)  # Python 3.11+
        self._cancelling = cancelling() if cancelling is not None else 0
        if self._delay is not None:
            self._handle = call_later(self._runtime, self._delay, self._on_timeout, context=None)
        return self

    def _on_timeout(self) -> None:
        self._handle = None
        self._expired = True
        self._task.cancel()

    async def __aexit__(self, exc_type, exc, tb) -> None:
        if self._handle is not None:
            self._handle.cancel()  # exact: True means _on_timeout never runs
            self._handle = None
        if self._expired:
            uncancel = getattr(self._task, "uncancel", None)  # Python 3.11+
            left = uncancel() if uncancel is not None else 0
            if exc_type is _asyncio.CancelledError and left <= self._cancelling:
                raise _asyncio.TimeoutError() from exc
        return None

    def expired(self) -> bool:
        """True if the timeout fired (the body was cancelled)."""
        return self._expired


def timeout(runtime: "_tw.Runtime", delay: Optional[Seconds]) -> Timeout:
    """``async with timeout(rt, delay):`` -- as asyncio.timeout (3.11), on a
    tickwheel timer: the body is cancelled after ``delay`` seconds and the
    ``async with`` raises TimeoutError (asyncio.TimeoutError before 3.11).
    None = no timeout. Leaving the body in time stops the timer exactly: a
    timeout that was due but had not run yet never fires."""
    return Timeout(runtime, delay)


# ---- the delivery itself -----------------------------------------------------------------------
def detach(runtime: "_tw.Runtime", loop: Optional[_asyncio.AbstractEventLoop] = None) -> bool:
    """Ends the delivery of ``runtime``'s timers on ``loop`` (default: the
    running one) now: removes the reader, closes the queue, cancels the
    handles still pending (their callbacks never run; sleep() calls raise
    TickwheelError ESHUTDOWN). The next call_later() starts a new one. For a
    loop that is closed without asyncio.run(). True if there was one."""
    loop = _loop_of(loop)
    with _registry_lock:
        per_loop = _registry.get(loop)
        d = per_loop.get(runtime._native) if per_loop is not None else None
    if d is None or d.closed:
        return False
    d.close()
    return True


def queue_stats(runtime: "_tw.Runtime", loop: Optional[_asyncio.AbstractEventLoop] = None) -> Optional[dict]:
    """Queue.stats() of the delivery of ``runtime`` on ``loop`` (default: the
    running one), or None if there is none (yet, or any more)."""
    loop = _loop_of(loop)
    with _registry_lock:
        per_loop = _registry.get(loop)
        d = per_loop.get(runtime._native) if per_loop is not None else None
    if d is None or d.closed:
        return None
    return d.queue.stats()
