# SPDX-License-Identifier: MIT OR Apache-2.0
"""tickwheel -- Python binding of the tickwheel timer runtime (a compiled
extension, tickwheel._tickwheel: pybind11 over the C++ API of
libtickwheel.so.1).

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

Delivery queues run callbacks on a thread of the program's instead: a timer
started with ``queue=q`` (``q = rt.queue()``) runs only inside ``q.run()``,
on the thread calling it -- e.g. a select/poll loop watching ``q.fd()`` --,
and no worker thread takes the GIL for it; stop stays exact. For asyncio,
``tickwheel.asyncio`` does this on the loop (``call_later``, ``sleep``,
``timeout``). See Queue.

Timer model (library 1.3): ``start(..., policy="skip"|"delay"|"burst",
leeway=seconds, group=int)`` chooses what a periodic timer does when a run
overruns its period, how late a callback may run (never early), and a group
tag; ``rt.query(timer)`` (a TimerInfo: state, next deadline, run counters),
``rt.reset_at(timer, deadline)`` on the timer's clock and
``rt.stop_group(group, sync=False)`` go with it.

Clocks and a manual clock (library 1.3): ``start(..., clock="boottime")``
(or "realtime", default "monotonic") puts a timer's delay and deadline on
that clock; ``tickwheel.now(clock)`` / ``now_ns(clock)`` read the machine's.
``Runtime(manual_clock=True)`` is a runtime for tests whose clocks stand
still until ``rt.advance(seconds)`` moves them: the callbacks that fall due
run inside advance(), on the calling thread, in deadline order, and
``rt.now(clock)`` reads its virtual time -- a 30 s timeout is tested in
microseconds (examples/test_idle_timeout_example.py).

Batches (library 1.4): ``rt.start_many(delays, fn)``, ``rt.stop_many(timers)``
and ``rt.reset_many(timers, delay_s)`` start, stop or re-arm a whole list with
one call into the library, each element as the single call would; the FFI
cost is paid once per list instead of once per timer (README, "Batches").

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

Clocks: ``tickwheel.now(clock)`` is the MACHINE's clock; compute deadlines
from ``rt.now(clock)``, the runtime's own (virtual on a manual runtime):
``t.reset_at(rt.now() + 2.0)``.

Errors: TickwheelError (an OSError with the TW_* ``code``) carries the
library's text (tickwheel::Error::what(), with the argument and the limit
where the library names them); the library's EINVAL is
InvalidArgumentError, both a TickwheelError and a ValueError. bool is not a
number of seconds (TypeError). A positive period below 1 ns counts as 1 ns
(one tick once rounded up), never a one-shot.

The GIL is kept across every call but the waiting ones (stop_sync,
stop_group(sync=True), advance, shutdown, close, Queue.close), which release
it while they wait; callbacks and release hooks take it on the thread that
runs them.

The library. A wheel (scripts/build-wheel.sh, or pip install of the sdist)
carries the library's code inside the compiled extension, with oneTBB's
libtbb.so.12 beside it (RUNPATH $ORIGIN): nothing else is loaded, and
``tickwheel.library_path`` is the extension's file. Built against an
installed library (``pip install bindings/python``, or a CMake build's
staged copy), the extension needs libtickwheel.so.1, found by the dynamic
loader when it is imported: the prefix a from-source build recorded,
LD_LIBRARY_PATH, the ldconfig cache. TICKWHEEL_LIB (a path) is loaded first
when set (nothing else is tried; the extension binds to it), and when the
loader finds none, pkg-config's libdir (``pkg-config --variable=libdir
tickwheel``, honouring PKG_CONFIG_PATH). A library whose tw_version() major
differs from this package's is refused. If none is usable, importing
tickwheel raises ImportError listing what was tried and why it failed.
``tickwheel.library_path`` is the file in use.
(tickwheel/_loader.py has the details.)
"""

from __future__ import annotations

import atexit
import dataclasses
import datetime
import enum
import functools
import math
import numbers
import os
import select
import sys
import threading
import time
import traceback
from typing import Callable, Dict, Optional, Union

from . import _loader

#: The package's version: always the version of the C library it is released with
#: (pyproject.toml reads it from here; keep it equal to tickwheel.h's TW_VERSION).
__version__ = "1.7.0"

__all__ = [
    "Runtime",
    "Timer",
    "Queue",
    "TimerInfo",
    "TimerState",
    "PeriodPolicy",
    "PERIOD_SKIP",
    "PERIOD_DELAY",
    "PERIOD_BURST",
    "Clock",
    "CLOCK_MONOTONIC",
    "CLOCK_BOOTTIME",
    "CLOCK_REALTIME",
    "TickwheelError",
    "InvalidArgumentError",
    "ForkedError",
    "now",
    "now_ns",
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
TW_CLOCK_MONOTONIC = 0  # tw_timer_spec.clock, tw_now_ns_clock() (since 1.3)
TW_CLOCK_BOOTTIME = 1
TW_CLOCK_REALTIME = 2
TW_MAX_DELAY_NS = 1 << 60
TW_PERIOD_SKIP = 0  # tw_timer_spec.period_policy (since 1.3)
TW_PERIOD_DELAY = 1
TW_PERIOD_BURST = 2
TW_TIMER_PENDING = 1  # tw_timer_info.state (since 1.3)
TW_TIMER_DUE = 2
TW_TIMER_RUNNING = 3
_ABI_MAJOR = 1  # the N of libtickwheel.so.N this binding speaks
_VERSION_MAJOR = int(__version__.split(".")[0])  # tw_version()'s major must equal it

#: The longest delay or period accepted, in seconds (2**60 ns, about 36.5 years).
MAX_DELAY_S = TW_MAX_DELAY_NS / 1e9

Seconds = Union[int, float, datetime.timedelta]

_U64_MAX = (1 << 64) - 1
# start()'s defaults, compared by identity on its fast path (an explicit 0, -1,
# "skip" or "monotonic" is the same object in CPython; anything else takes the
# checked path).
_ZERO = 0
_MINUS_ONE = -1
_SKIP = "skip"
_MONOTONIC = "monotonic"


# ---- loading the extension (and, through it, libtickwheel.so.1) ------------------------
def _has_the_calls(lib) -> None:
    # A library the extension can bind to: 1.4's batch calls (the newest it uses).
    lib.tw_timer_start_n  # noqa: B018 -- AttributeError refuses the library


def _import_extension():
    """Imports tickwheel._tickwheel. A wheel's extension (``_ext.STATIC``)
    carries the library's code inside it: the library in use is the
    extension's file. Otherwise (a CMake build's staged copy, ``pip install
    bindings/python``) its libtickwheel.so.1 is found by the dynamic loader:
    TICKWHEEL_LIB when set (that file is loaded first, so the extension binds
    to it: same SONAME), else the extension's RUNPATH (the build tree, or the
    prefix a from-source build recorded), LD_LIBRARY_PATH, the ldconfig
    cache, /lib, /usr/lib; failing those, pkg-config's libdir. Returns (the
    module, the path of the library file it uses, the ctypes handle or None)."""
    def missing(e: ImportError) -> ImportError:
        return ImportError("tickwheel: the compiled extension tickwheel._tickwheel cannot be imported from %s "
                           "(%s). Install the package (scripts/build-wheel.sh, then pip install "
                           "dist/tickwheel-*.whl; or pip install bindings/python against an installed "
                           "libtickwheel), or use a CMake build's staged copy (PYTHONPATH=<build>/python)."
                           % (os.path.dirname(os.path.abspath(__file__)), e))

    if os.environ.get("TICKWHEEL_LIB"):
        # _loader.load opens the file (ctypes.CDLL: the only way to dlopen a
        # given path from Python) and checks its version: an ImportError says
        # what is wrong with it. The extension's DT_NEEDED then binds to it.
        lib, path, _ = _loader.load(_ABI_MAJOR, _VERSION_MAJOR, _has_the_calls)
        try:
            from . import _tickwheel as ext
        except ImportError as e:
            raise missing(e) from None
        if ext.STATIC:  # a wheel's extension carries the library: that one is in use
            return ext, ext.library_path(), None
        return ext, path, lib
    try:
        from . import _tickwheel as ext
    except ImportError as e:
        if _loader.soname(_ABI_MAJOR) not in str(e):
            raise missing(e) from None  # no extension (a source tree without a build), or a broken one
        # The loader does not know the library: the same search as TICKWHEEL_LIB's
        # absence always did (it ends with pkg-config), with its report.
        lib, path, _ = _loader.load(_ABI_MAJOR, _VERSION_MAJOR, _has_the_calls)
        try:
            from . import _tickwheel as ext
        except ImportError as e:
            raise missing(e) from None
        return ext, path, lib
    path = ext.library_path()
    major = ext.version() >> 16
    if major != _VERSION_MAJOR:
        raise ImportError("tickwheel: the C library %s is version %d.x; this binding needs major %d"
                          % (path, major, _VERSION_MAJOR))
    return ext, path, None


#: library_path: the library file in use (TICKWHEEL_LIB's value when that was used).
_ext, library_path, _lib = _import_extension()
_NativeError = _ext.Error  # raised by the extension: args (negative TW_* code, the core's message)


def version() -> tuple:
    """The loaded library's version, as (major, minor, patch)."""
    v = _ext.version()
    return (v >> 16, (v >> 8) & 0xFF, v & 0xFF)


def now(clock: Union[str, "Clock"] = "monotonic") -> float:
    """The MACHINE's clock ``clock`` in seconds: "monotonic" (the default, the
    clock of delays and deadlines -- the same as time.monotonic()),
    "boottime" (time.clock_gettime(time.CLOCK_BOOTTIME)) or "realtime" (the
    wall clock, time.time()); or a Clock.

    Not a runtime's clock: a manual runtime (``Runtime(manual_clock=True)``)
    has virtual clocks that only ``advance()`` moves, and a deadline for it
    computed from this function is wrong. Compute deadlines with
    ``rt.now(clock)``, which reads the runtime's own clock (the machine's for a
    real runtime, the same value as this function; the virtual one for a
    manual runtime): ``t.reset_at(rt.now() + 2.0)``."""
    if clock == "monotonic" and type(clock) is str:  # the common case, no lookup
        return _ext.monotonic_ns() / 1e9
    return _ext.now_ns(_clock_code(clock)) / 1e9


def now_ns(clock: Union[str, "Clock"] = "monotonic") -> int:
    """As now(), in integer nanoseconds (the scale of the C API): the machine's
    clock, not a manual runtime's (that is ``rt.now_ns(clock)``)."""
    return _ext.now_ns(_clock_code(clock))

class TickwheelError(OSError):
    """A failed tickwheel call. ``code`` is the (negative) TW_* code, ``errno`` its errno
    (for TW_EFORKED, which is no errno value, ``errno`` is 1001). The message is
    ``"<call>: <the library's text>"``; the library's text carries its detail
    where it gives one (the argument and the limit)."""

    def __init__(self, code: int, what: str = "", text: Optional[str] = None):
        if text is None:
            text = _ext.strerror(code)
        super().__init__(-code, "%s: %s" % (what, text) if what else text)
        self.code = code

    def __reduce__(self):
        # Picklable, with its class and message: multiprocessing sends a
        # worker's exception to the parent (the default would call
        # cls(errno, strerror), which is not this constructor).
        return (_rebuild_error, (type(self), self.code, self.strerror), self.__dict__ or None)


class InvalidArgumentError(TickwheelError, ValueError):
    """TW_EINVAL: the library refused an argument (a delay, period or deadline
    beyond MAX_DELAY_S, a resolution out of range, ``advance()`` on a runtime
    without a manual clock...). Both a TickwheelError (``code`` TW_EINVAL,
    ``errno`` 22) and a ValueError, as the binding's own checks of arguments
    raise; the message carries the library's detail."""


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


def _error(rc: int, what: str, text: Optional[str] = None) -> TickwheelError:
    if rc == TW_EFORKED:
        return ForkedError(what)
    return (InvalidArgumentError if rc == TW_EINVAL else TickwheelError)(rc, what, text)


def _native_error(e: BaseException, what: str) -> TickwheelError:
    """The TickwheelError for an extension's _tickwheel.Error: its code, and the
    library's message (tickwheel::Error::what(): with the detail where the
    library gives one)."""
    code, text = e.args
    return _error(code, what, text)


def _check(rc: int, what: str) -> None:
    if rc != TW_OK:
        raise _error(rc, what)


def _make_error(code: int, what: str, text: str) -> TickwheelError:
    # The extension's C calls raise what this returns (set_hooks registers it).
    return _error(code, what, text)


# ---- arguments: checked here, and refused in the caller's units ----------------------
# Every limit the library enforces on a number of seconds or a count is checked
# here first, so that the message names the argument as the caller wrote it
# (its name and value, in seconds) and the limit in the same units -- never a
# clamped value in ns or a C++ constant's name.
_MAX_DELAY_TEXT = "the maximum delay (about 36.5 years, %.1f s)" % MAX_DELAY_S
_INT64_MAX = (1 << 63) - 1
_MAX_SHARDS = 256  # Config::shards, tw_config.shards
_MAX_WORKERS = 4096  # Config::workers, tw_config.workers


def _show(value) -> str:
    """``value`` as the caller wrote it, for a message: floats with up to 12
    significant digits (1e12 is "1e+12"), the rest as repr()."""
    if type(value) is float:
        return "%.12g" % value
    return repr(value)


def _invalid(call: str, text: str) -> "InvalidArgumentError":
    return InvalidArgumentError(TW_EINVAL, call, text)


def _to_ns(value: Seconds, name: str, call: str, limit: Optional[int] = TW_MAX_DELAY_NS) -> int:
    """``value`` seconds (an int, a float or a timedelta) in ns. ``name`` is the
    parameter's name, ``call`` the public call's, for the messages. Raises
    TypeError for anything that is not a number of seconds (a bool is not),
    InvalidArgumentError (a ValueError) for NaN, infinity, a negative value
    and one above ``limit`` ns (the maximum delay by default; None: no limit)."""
    kind = type(value)
    if kind is int:
        ns = value * 10**9
    elif kind is bool:  # an int, but not a number of seconds: start(True, f) is a mistake
        raise TypeError("%s must be a number of seconds or a timedelta, not bool" % name)
    elif kind is float:
        if value != value:
            raise _invalid(call, "%s=nan is not a number of seconds" % name)
        if value in (math.inf, -math.inf):
            raise _invalid(call, "%s=%s is not a finite number of seconds" % (name, _show(value)))
        # (beyond 1e18 s the product would overflow a float: far beyond any limit anyway)
        ns = round(value * 10**9) if -1e18 < value < 1e18 else int(value) * 10**9
    elif isinstance(value, datetime.timedelta):
        ns = (value.days * 86400 + value.seconds) * 10**9 + value.microseconds * 1000
    elif isinstance(value, numbers.Real):  # Fraction, numpy's floats...
        try:
            ns = round(value * 10**9)
        except (ValueError, OverflowError):  # nan, inf of another float type
            raise _invalid(call, "%s=%s is not a finite number of seconds" % (name, _show(value))) from None
    else:  # never value * 10**9 on anything: a str would be repeated 10**9 times
        raise TypeError("%s must be a number of seconds or a timedelta, not %s" % (name, kind.__name__))
    if ns < 0:
        raise _invalid(call, "%s=%s is negative" % (name, _show(value)))
    if limit is not None and ns > limit:
        if limit == TW_MAX_DELAY_NS:
            raise _invalid(call, "%s=%s is above %s" % (name, _show(value), _MAX_DELAY_TEXT))
        raise _invalid(call, "%s=%s is above %s s" % (name, _show(value), _show(limit / 1e9)))
    return ns


def _deadline_ns(value: Seconds, name: str, call: str) -> int:
    """An absolute deadline (seconds on a clock) in ns: as _to_ns, up to the
    clocks' range (2**63 ns, about 292 years after their zero); "not more than
    the maximum delay after now" is the library's check (_far_deadline)."""
    ns = _to_ns(value, name, call, limit=None)
    if ns > _INT64_MAX:
        raise _invalid(call, "%s=%s is beyond the clocks' range (2**63 ns, about 292 years after their zero)"
                       % (name, _show(value)))
    return ns


def _far_deadline(e: BaseException, value: Seconds, deadline_ns: int, now_ns: Callable[[], int], name: str,
                  call: str) -> TickwheelError:
    """The error for the library's EINVAL of a start_at()/reset_at(): the
    deadline more than the maximum delay after now (its other arguments were
    checked before), in seconds; else the library's own words."""
    err = _native_error(e, call)
    if err.code == TW_EINVAL:
        try:
            now = now_ns()
        except TickwheelError:
            return err
        if deadline_ns - now > TW_MAX_DELAY_NS:
            return _invalid(call, "%s=%s is more than %s after now (%s s on the timer's clock)"
                            % (name, _show(value), _MAX_DELAY_TEXT, _show(now / 1e9)))
    return err


def _count(value, name: str, call: str, limit: int) -> int:
    """A count (shards, workers, max_timers...): an int in 0 .. ``limit``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s must be an int, not %s" % (name, type(value).__name__))
    value = int(value)
    if value < 0:
        raise _invalid(call, "%s=%d is negative" % (name, value))
    if value > limit:
        raise _invalid(call, "%s=%d is above %d, the most a Runtime takes" % (name, value, limit))
    return value


def _period_ns(value: Seconds, call: str) -> int:
    """A period in ns: as _to_ns, but a positive period below 1 ns (which rounds
    to 0, a one-shot) counts as 1 ns, which the runtime rounds up to its tick
    (as the Node binding does): never a silent one-shot."""
    ns = _to_ns(value, "period_s", call)
    if ns == 0 and not isinstance(value, datetime.timedelta) and value > 0:
        return 1
    return ns


def _shard(shard, call: str) -> int:
    if isinstance(shard, bool) or not isinstance(shard, numbers.Integral):
        raise TypeError("shard must be an int, not %s" % type(shard).__name__)
    if not -1 <= shard <= 0x7FFFFFFF:
        raise _invalid(call, "shard=%d is neither -1 (the calling thread's shard) nor a shard number "
                       "(0 .. 2**31 - 1, taken modulo the runtime's shards)" % shard)
    return int(shard)


# ---- the timer model (since 1.3): period policies, groups, query ---------------------
class PeriodPolicy(str, enum.Enum):
    """What a periodic timer does when a run overruns its period (``policy=`` of
    start()). A str enum: ``PeriodPolicy.DELAY == "delay"``.

    SKIP (the default): fixed rate, runs stay on the grid first + k * period; a
    grid deadline that passes while a run is in progress (or waits to start)
    is skipped and counted in TimerInfo.missed. DELAY: fixed delay, the next
    deadline is the end of the run plus the period (never a miss). BURST:
    fixed rate with catch-up, the grid deadlines that passed during a run are
    run after it, back to back (never overlapping), until caught up."""

    SKIP = "skip"
    DELAY = "delay"
    BURST = "burst"


PERIOD_SKIP = PeriodPolicy.SKIP
PERIOD_DELAY = PeriodPolicy.DELAY
PERIOD_BURST = PeriodPolicy.BURST
_POLICY_CODES = {PeriodPolicy.SKIP: TW_PERIOD_SKIP, PeriodPolicy.DELAY: TW_PERIOD_DELAY,
                 PeriodPolicy.BURST: TW_PERIOD_BURST}


def _policy_code(policy) -> int:
    if not isinstance(policy, str):  # PeriodPolicy is a str too
        raise TypeError("policy must be \"skip\", \"delay\" or \"burst\" (or a tickwheel.PeriodPolicy), "
                        "not %s" % type(policy).__name__)
    try:
        return _POLICY_CODES[PeriodPolicy(policy)]
    except ValueError:
        raise ValueError("unknown period policy %r: expected \"skip\", \"delay\" or \"burst\"" % (policy,)) from None


class Clock(str, enum.Enum):
    """The clock a timer's delay and deadline are on (``clock=`` of start() and
    start_at(); tw_timer_spec.clock), and the clock now() reads. A str enum:
    ``Clock.REALTIME == "realtime"``.

    MONOTONIC (the default): CLOCK_MONOTONIC, time.monotonic(); stops while
    the machine is suspended, never jumps. BOOTTIME: as monotonic, but counts
    the time the machine was suspended (a 30 s keepalive fires 30 s of real
    time later, asleep or not). REALTIME: the wall clock, time.time(); a
    timer follows changes of it -- set forward past its deadline it fires
    then; set back, it waits for the wall clock to reach its deadline again
    (noticed within 100 ms). Not time.CLOCK_* numbers (which differ): names."""

    MONOTONIC = "monotonic"
    BOOTTIME = "boottime"
    REALTIME = "realtime"


CLOCK_MONOTONIC = Clock.MONOTONIC
CLOCK_BOOTTIME = Clock.BOOTTIME
CLOCK_REALTIME = Clock.REALTIME
_CLOCK_CODES = {Clock.MONOTONIC: TW_CLOCK_MONOTONIC, Clock.BOOTTIME: TW_CLOCK_BOOTTIME,
                Clock.REALTIME: TW_CLOCK_REALTIME}
_CLOCK_BY_CODE = {code: clock for clock, code in _CLOCK_CODES.items()}


def _clock_code(clock) -> int:
    if not isinstance(clock, str):  # Clock is a str too; ints (time.CLOCK_* differ) are refused
        raise TypeError("clock must be \"monotonic\", \"boottime\" or \"realtime\" (or a tickwheel.Clock), "
                        "not %s" % type(clock).__name__)
    try:
        return _CLOCK_CODES[Clock(clock)]
    except ValueError:
        raise ValueError("unknown clock %r: expected \"monotonic\", \"boottime\" or \"realtime\""
                         % (clock,)) from None


def _group_id(group, what: str, allow_zero: bool, call: str = "") -> int:
    if isinstance(group, bool) or not isinstance(group, numbers.Integral):
        raise TypeError("%s must be an int, not %s" % (what, type(group).__name__))
    group = int(group)
    if group < (0 if allow_zero else 1) or group > _U64_MAX:
        raise _invalid(call or what, "%s=%d is not %s" % (what, group, "0 (none) or a group id (1 .. 2**64 - 1)"
                                                         if allow_zero else "a group id (1 .. 2**64 - 1)"))
    return group


class TimerState(str, enum.Enum):
    """TimerInfo.state, a str enum: ``TimerState.RUNNING == "running"``."""

    PENDING = "pending"  #: waiting for its deadline
    DUE = "due"  #: its deadline has passed, the callback has not started yet
    RUNNING = "running"  #: its callback is running now


_STATES = {TW_TIMER_PENDING: TimerState.PENDING, TW_TIMER_DUE: TimerState.DUE,
           TW_TIMER_RUNNING: TimerState.RUNNING}


@dataclasses.dataclass(frozen=True)
class TimerInfo:
    """What Runtime.query() tells about a live timer (tw_timer_info): a snapshot.

    ``deadline``: the next deadline in seconds on the timer's clock
    (tickwheel.now(clock); the default, "monotonic", is time.monotonic();
    on a manual runtime, its virtual clock: rt.now(clock)), rounded up to the resolution,
    without the leeway; None when none is set (a one-shot whose callback is
    running, a "delay" timer until its run ends). For a due or running
    fixed-rate timer it is the grid deadline after the one being served
    (while a "burst" timer runs the deadlines it owes: the grid deadline
    after the owed ones, the same for each of those runs).
    ``period`` (0.0 for a one-shot; rounded up to the resolution) and
    ``leeway`` are seconds; ``group`` is 0 for none; ``runs`` counts the runs
    started so far (the one in progress included); ``missed`` the grid
    deadlines skipped so far (policy "skip"; 0 for the others), so
    ``runs + missed - 1`` is the index of the grid deadline the current (or
    last) run serves."""

    state: TimerState
    shard: int
    deadline: Optional[float]
    period: float
    leeway: float
    group: int
    runs: int
    missed: int
    # Reads "now" on the timer's clock (of its runtime: virtual on a manual one).
    _now: Callable[[], float] = dataclasses.field(default=now, repr=False, compare=False)

    @property
    def remaining(self) -> Optional[float]:
        """Seconds from now to ``deadline`` (0.0 once it has passed), or None
        without a deadline. Reads the clock at each access: the timer's clock
        of its runtime (a manual runtime's virtual one) when queried through a
        Timer, the monotonic clock when queried by id."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - self._now())


def _info_from(raw: tuple, clock_now: Callable[[], float] = now) -> TimerInfo:
    # raw: the extension's (state, shard, clock, deadline_ns, period_ns, leeway_ns, group, runs, missed)
    state, shard, _clock, deadline_ns, period_ns, leeway_ns, group, runs, missed = raw
    return TimerInfo(
        state=_STATES.get(state, TimerState.PENDING),  # the library only reports the three
        shard=shard,
        deadline=deadline_ns / 1e9 if deadline_ns else None,
        period=period_ns / 1e9,
        leeway=leeway_ns / 1e9,
        group=group,
        runs=runs,
        missed=missed,
        _now=clock_now,
    )


# ---- callables kept alive until their release hook ---------------------------------
# _live: token -> entry, what the binding keeps per timer: (the callable; its
# Runtime, which stays alive while it has timers; queued: bound to a Queue, or
# of a manual runtime -- its runs happen on the caller's thread, inside
# Queue.run() or advance()). The extension makes the token and the entry, and
# files the entry once the library has taken the timer (in the same C call:
# nothing -- not a KeyboardInterrupt -- can come between); a start that fails
# files nothing.
_live: Dict[int, tuple] = {}
# Per thread, for Queue.run(): ``stack``, the Queues whose run() is in progress
# on this thread (innermost last: a callback may run another queue), and
# ``exc``, a KeyboardInterrupt or SystemExit raised by a callback of a queue,
# re-raised by the run() that ran it once the batch is done.
_running = threading.local()

# The extension enters a hook on any thread (a oneTBB worker, or the thread of
# an advance() or a Queue.run()) with the GIL taken, and keeps that thread's
# Python thread state after its first hook (see src/_tickwheel.cpp: none is
# created per hook, so a fork() never catches CPython's runtime lock held by a
# worker creating one, CPython gh-112275). Python frees those thread states at
# exit, when no hook can run any more (_close_all). A run calls the entry's
# callable there (an exception goes to _callback_raised and is counted in the
# runtime's callback_exceptions); the release pops the entry (_release's work,
# in C, unless _release was replaced). _ext.hook_depth() > 0 tells code that
# runs inside a hook (a finalizer dropping a Runtime) not to wait.
def _callback_raised(entry: tuple, timer_id: int, token: int, exc: BaseException) -> None:
    fn, runtime, queued = entry
    if isinstance(exc, (KeyboardInterrupt, SystemExit)) and queued and getattr(_running, "exc", None) is None:
        # On the thread of a Queue.run() or an advance() (the program's own
        # thread, often the main one, where Ctrl-C lands): re-raised by that
        # call once its batch is done, as an event loop does. On a worker: reported.
        _running.exc = exc
        return
    runtime._report(exc, timer_id, token)


def _release(token: int) -> None:
    """Drops the binding's reference to a timer's callable: the release hook (the
    core destroys the callable it was given exactly once: after the last run,
    inside the stop that cancelled it, at shutdown, or inside a start that
    failed)."""
    entry = _live.pop(token, None)
    del entry  # may drop the last reference to the callable or the Runtime


# ---- Timer and Runtime --------------------------------------------------------------
class Timer(_ext.TimerBase):
    """A started timer (Runtime.start() returns one). Its methods may be called
    from any thread, and from callbacks.

    ``stop()`` and ``stop_sync()`` come from the extension (its TimerBase: the
    hot path, without a Python frame); ``id`` is the timer's id (an int) and
    ``clock`` the Clock its delay and deadlines are on ("monotonic" for a
    Timer made from an id, e.g. the one on_error gets).

    ``stop_sync()`` waits with the GIL released, and Ctrl-C interrupts the
    wait as it interrupts ``threading.Event.wait()``: KeyboardInterrupt is
    raised; the timer is then stopped -- no new run starts -- but a run in
    progress may still be going on and its callable not yet released (call
    stop_sync() again to wait for that)."""

    __slots__ = ()

    def __init__(self, runtime: "Runtime", timer_id: int, clock: "Clock" = Clock.MONOTONIC, _token: int = 0):
        self._bind(runtime, timer_id, clock, _token)

    def reset(self, delay_s: Seconds) -> bool:
        """Re-arms the pending timer to fire ``delay_s`` from now (a periodic
        one: next run then, then every period). False if it is not pending."""
        ns = _to_ns(delay_s, "delay_s", "reset")
        try:
            return self._h.reset(self.id, ns)
        except _NativeError as e:
            raise _native_error(e, "reset") from None

    def reset_at(self, deadline_s: Seconds) -> bool:
        """Re-arms the pending timer to fire at the absolute ``deadline_s`` on the
        timer's clock (tickwheel.now(timer.clock); for the default,
        time.monotonic(); a past one fires at once). False if it is not
        pending. Same as ``runtime.reset_at(timer, deadline_s)``."""
        return self._runtime.reset_at(self, deadline_s)

    def query(self) -> Optional["TimerInfo"]:
        """The timer's state, next deadline and run counters (a TimerInfo), or
        None once it is released (ran its last run, stopped, closed). Same as
        ``runtime.query(timer)``."""
        runtime = self._runtime
        return _query(runtime._native, self.id, runtime._clock_reader(self.clock))

    @property
    def runtime(self) -> "Runtime":
        """The Runtime that started it."""
        return self._runtime

    def __eq__(self, other):
        return isinstance(other, Timer) and other.id == self.id and other._runtime is self._runtime

    def __hash__(self):
        return hash(self.id)

    def __repr__(self):
        return "<tickwheel.Timer id=%#x>" % self.id


_ext.set_hooks(globals(), Timer, Clock.MONOTONIC)


def _query(native: "_Native", timer_id: int, clock_now: Callable[[], float] = now) -> Optional[TimerInfo]:
    raw = native.call("query", _ext.Runtime.query, timer_id)
    if raw is None:
        return None
    return _info_from(raw, clock_now)


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

    def __init__(self, handle):
        self.handle = handle  # the extension's Runtime; None once destroyed
        self.cond = threading.Condition(threading.Lock())
        self.active = 0  # C calls in flight; the runtime is freed only when none is
        self.closing = False  # set by the first close(); later calls get ESHUTDOWN
        self.epoch = _fork_epoch  # created in this process iff equal to _fork_epoch
        self.busy_at_fork = False  # set in a fork child: a C call or close was in flight

    def call(self, what: str, fn, *args):
        """Calls fn(handle, *args) (an extension method) and returns its value; a
        failure is raised as TickwheelError (or a subclass) naming ``what``."""
        if self.epoch != _fork_epoch:
            raise ForkedError(what)
        # Counted inside the try: from 3.10 on, a signal handler (Ctrl-C) runs
        # only at a call or a backward jump, and there is none between the
        # count and ``entered`` -- a KeyboardInterrupt cannot leave it counted.
        entered = False
        try:
            with self.cond:
                if self.handle is None or self.closing:
                    raise TickwheelError(TW_ESHUTDOWN, what)
                self.active += 1
                entered = True
                handle = self.handle
            return fn(handle, *args)
        except _NativeError as e:
            raise _native_error(e, what) from None
        finally:
            if entered:
                self._leave()

    def _leave(self) -> None:
        with self.cond:
            self.active -= 1
            if self.active == 0 and self.closing:  # only close() waits for it, once closing
                self.cond.notify_all()

    call_rc = call

    def shutdown(self, interruptible: bool = True) -> None:
        """Shuts the C runtime down (see Runtime.shutdown). ``interruptible``: the
        wait for callbacks in progress ends at Ctrl-C (KeyboardInterrupt; the
        shutdown goes on in the extension's helper thread, and the next call
        waits for the rest)."""
        if self.epoch != _fork_epoch:
            raise ForkedError("shutdown")
        entered = False  # as in call()
        try:
            with self.cond:
                if self.handle is None or self.closing:
                    return  # close() shuts down before it frees
                self.active += 1
                entered = True
                handle = self.handle
            handle.shutdown(interruptible)  # the GIL is released while it waits for callbacks
        except _NativeError as e:
            raise _native_error(e, "shutdown") from None
        finally:
            if entered:
                self._leave()

    def close(self, interruptible: bool = True) -> None:
        """Shuts down, then frees the C runtime once no call is in flight. The first
        caller frees it; a concurrent one returns after it is freed. In a fork child,
        for a runtime of the parent: frees the child's copy only (_close_forked).
        ``interruptible``: Ctrl-C ends the waits (KeyboardInterrupt): the runtime
        is then shut down or shutting down, not freed; close() again frees it."""
        if self.epoch != _fork_epoch:
            self._close_forked()
            return
        self.shutdown(interruptible)  # raises EDEADLK from a callback of this runtime; calls in flight return at once
        with self.cond:
            while self.closing and self.handle is not None:  # another thread frees it
                self.cond.wait()
            if self.handle is None:
                return
            self.closing = True
            try:
                while self.active:
                    self.cond.wait()
            except BaseException:
                self.closing = False  # interrupted: not freed (close() again does it)
                self.cond.notify_all()
                raise
            handle = self.handle
        try:
            handle.destroy()  # waits (GIL released) for the extension's calls in flight, then frees
        finally:
            with self.cond:
                self.handle = None
                self.cond.notify_all()
            with _natives_lock:
                _natives.discard(self)

    def _close_forked(self) -> None:
        # In a fork child: no thread of this runtime exists here, so there is
        # nothing to shut down or wait for. destroy() frees the child's copy
        # without running any callback or release hook -- unless a parent
        # thread was inside a call on it (or freeing it) at the fork: that copy
        # may be mid-update, so it is left alone (the parent owns the original).
        with _natives_lock:  # a fresh lock in the child (_after_fork_in_child)
            handle, self.handle = self.handle, None
            _natives.discard(self)
        if handle is not None:
            if self.busy_at_fork:
                handle.forget()
            else:
                handle.destroy()  # only frees in a fork child


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


def _start_deferred(target, name: str) -> None:
    # Not a daemon: the interpreter waits for it, and so does _close_all. At
    # exit (from Python 3.12 on a thread cannot be started once the
    # interpreter shuts down: RuntimeError) the work is left to the exit hook,
    # _close_all, which closes every runtime and queue still open.
    th = threading.Thread(target=target, name=name, daemon=False)
    try:
        th.start()
    except RuntimeError:
        return
    with _natives_lock:  # appended only once started: _close_all may join it at any time
        _deferred.append(th)


def _close_in_background(native: _Native) -> None:
    _start_deferred(native.close, "tickwheel-destroy")


class Runtime:
    """A timer runtime: shards (timing wheels) and worker threads running callbacks.

    Runtime(shards=0, workers=0, resolution_s=None, max_timers=0, pin_shards=False, on_error=None,
            manual_clock=False)

    shards / workers: 0 = one per online CPU (at most 256 shards, 4096
    workers). resolution_s: the tick (default 1 ms; 1 us .. 1 s); deadlines
    are rounded up to it, never early. max_timers: live timers allowed (0 =
    unlimited). on_error(exc, timer): called on the worker thread when a
    callback raises (the exception is also counted in stats()'s
    ``callback_exceptions`` and the metric tickwheel_callback_exceptions_total).
    A count that is negative or above its limit, and a resolution outside
    its range, raise InvalidArgumentError (a ValueError) naming the argument
    and the value given ("workers=-1 is negative"); a non-int TypeError.

    Raises TickwheelError (ESHUTDOWN) once the interpreter is exiting and
    tickwheel's exit hook has run (e.g. in an atexit handler registered
    before ``import tickwheel``: it runs after tickwheel's own, which closed
    every Runtime; from then on no callback may run).

    manual_clock=True: a runtime for tests. Its three clocks stand still
    (starting at the machine's values) until ``advance(seconds)`` moves them;
    the callbacks that fall due run inside advance(), on the thread calling
    it, and nowhere else (no driver thread is started). ``now(clock)`` reads
    its virtual clocks::

        with tickwheel.Runtime(manual_clock=True) as rt:
            fired = []
            rt.start(30, lambda: fired.append(rt.now_ns()))
            t0 = rt.now_ns()
            rt.advance(29.999)        # nothing yet: returns 0
            rt.advance(0.001)         # runs the callback, here: returns 1
            assert fired == [t0 + 30 * 10**9]
    """

    def __init__(
        self,
        shards: int = 0,
        workers: int = 0,
        resolution_s: Optional[Seconds] = None,
        max_timers: int = 0,
        pin_shards: bool = False,
        on_error: Optional[Callable[[BaseException, Timer], None]] = None,
        manual_clock: bool = False,
    ):
        self._manual = bool(manual_clock)
        shards = _count(shards, "shards", "Runtime", _MAX_SHARDS)
        workers = _count(workers, "workers", "Runtime", _MAX_WORKERS)
        max_timers = _count(max_timers, "max_timers", "Runtime", _U64_MAX)
        resolution_ns = 0  # the library's default (1 ms)
        if resolution_s is not None:
            resolution_ns = _to_ns(resolution_s, "resolution_s", "Runtime", limit=None)
            if not 1000 <= resolution_ns <= 10**9:
                raise _invalid("Runtime", "resolution_s=%s is outside 1e-06 .. 1 s" % _show(resolution_s))
        try:
            handle = _ext.Runtime(shards, workers, resolution_ns, max_timers, bool(pin_shards), self._manual)
        except _NativeError as e:
            raise _native_error(e, "Runtime") from None
        native = _Native(handle)
        with _natives_lock:
            _natives.add(native)
        self._native = native
        self._h = handle  # the extension's runtime
        self._fast = _ext.Fast(handle, self._manual)  # its C entry points: the hot paths
        self._on_error = on_error

    # -- timers --------------------------------------------------------------------
    def start(self, delay_s: Seconds, fn: Callable[[], object], period_s: Seconds = 0, *,
              shard: int = -1, queue: Optional["Queue"] = None, policy: Union[str, PeriodPolicy] = "skip",
              leeway: Seconds = 0, group: int = 0, clock: Union[str, Clock] = "monotonic") -> Timer:
        """Calls ``fn()`` once, ``delay_s`` seconds from now; with ``period_s`` > 0,
        then every ``period_s`` seconds until stopped. Returns the Timer.

        Seconds are an int, a float or a timedelta (a bool raises TypeError);
        a negative, NaN or infinite one, or one beyond MAX_DELAY_S, raises
        InvalidArgumentError (a ValueError) naming the argument and the value
        given ("delay_s=1e+12 is above the maximum delay (about 36.5 years,
        1152921504.6 s)"). A positive ``period_s`` below 1 ns counts as 1
        ns, i.e. one tick once rounded up to the resolution (never a
        one-shot).

        ``policy`` (a periodic timer's, when a run overruns its period; see
        PeriodPolicy): "skip" (default; fixed rate, overrun grid deadlines are
        skipped and counted in TimerInfo.missed), "delay" (the next run one
        period after the end of this one) or "burst" (fixed rate, missed runs
        caught up back to back). Anything else raises ValueError (TypeError
        for a non-str).

        ``leeway`` (seconds, default 0): how late the callback may run; it
        runs in [deadline, deadline + leeway + the usual lateness], never
        before the deadline, and timers whose windows overlap share a
        wake-up. ``group`` (an int, 0 = none): a tag for stop_group().

        ``clock`` (see Clock): "monotonic" (default), "boottime" (counts
        time the machine was suspended) or "realtime" (the wall clock: the
        timer follows changes of it); the delay, start_at()'s deadline,
        reset_at() and query()'s deadline are on it, and "never early" is
        judged against it. Anything else raises ValueError (TypeError for a
        non-str).

        ``queue``: None (default) = ``fn`` runs on the runtime's worker threads;
        a Queue of this runtime (``rt.queue()``) = it runs only inside that
        queue's ``run()``, on the thread calling it. A Queue that is not one
        of this runtime's raises ValueError; a closed one TickwheelError
        (ESHUTDOWN); anything else TypeError."""
        if (period_s is _ZERO and shard is _MINUS_ONE and queue is None and leeway is _ZERO and group is _ZERO
                and policy is _SKIP and clock is _MONOTONIC):
            # The common case (every option at its default): the extension takes
            # a float delay in [0, 1e9) s and a callable itself (_to_ns()'s
            # arithmetic); anything else comes back NotImplemented, for the checks.
            t = self._fast.start(self, fn, delay_s)
            if t is not NotImplemented:
                return t
        return self._start(fn, 0, _to_ns(delay_s, "delay_s", "start"), _period_ns(period_s, "start"), shard, queue,
                           policy=policy, leeway=leeway, group=group, clock=clock)

    def start_at(self, deadline_s: float, fn: Callable[[], object], period_s: Seconds = 0, *,
                 shard: int = -1, queue: Optional["Queue"] = None, policy: Union[str, PeriodPolicy] = "skip",
                 leeway: Seconds = 0, group: int = 0, clock: Union[str, Clock] = "monotonic") -> Timer:
        """As start(), at an absolute deadline on the timer's clock (``clock``:
        rt.now(clock); for the default, "monotonic", tickwheel.now(), i.e.
        time.monotonic()). A past deadline fires at once."""
        deadline_ns = max(1, _deadline_ns(deadline_s, "deadline_s", "start_at"))
        try:
            return self._start(fn, deadline_ns, 0, _period_ns(period_s, "start_at"), shard, queue,
                               policy=policy, leeway=leeway, group=group, clock=clock, call="start_at")
        except InvalidArgumentError as e:
            code = _clock_code(clock)
            raise _far_deadline(_NativeError(e.code, e.strerror.partition(": ")[2]), deadline_s, deadline_ns,
                                lambda: self._h.now_ns(code), "deadline_s", "start_at") from None

    def query(self, timer: Union[Timer, int]) -> Optional[TimerInfo]:
        """What the runtime knows about a live timer (a Timer of this runtime or
        its id): a TimerInfo with its state ("pending", "due" or "running" --
        from inside its own callback, "running" with ``runs``/``missed``
        current), shard, next deadline (``remaining`` = seconds until it),
        period, leeway, group and run counters. None once the timer is
        released (it ran its last run, was stopped or cancelled) or for an id
        that is stale or was never one. Never blocks. Raises TickwheelError
        (ESHUTDOWN) once closed, ForkedError in a fork child; a Timer of
        another Runtime ValueError. The deadline is on the timer's clock;
        ``remaining`` reads that clock (this runtime's: virtual on a manual
        runtime) for a Timer, the monotonic one for an id."""
        clock = timer.clock if isinstance(timer, Timer) else Clock.MONOTONIC
        return _query(self._native, self._timer_id(timer, "query"), self._clock_reader(clock))

    def reset_at(self, timer: Union[Timer, int], deadline_s: Seconds) -> bool:
        """Re-arms a pending timer (a Timer of this runtime or its id) to fire at
        the absolute ``deadline_s`` on the timer's clock (rt.now(timer.clock);
        for the default, tickwheel.now(), i.e. time.monotonic(); a past one
        fires at once, never before it); a
        periodic one then runs every period from there. True if re-armed,
        False if the timer is not pending (fired, stopped, stale). A negative
        deadline raises ValueError; one beyond 2**63 ns or more than
        MAX_DELAY_S ahead TickwheelError (EINVAL)."""
        timer_id = self._timer_id(timer, "reset_at")
        ns = _deadline_ns(deadline_s, "deadline_s", "reset_at")
        try:
            return self._native.call("reset_at", _ext.Runtime.reset_at, timer_id, ns)
        except InvalidArgumentError as e:
            code = _CLOCK_CODES[timer.clock] if isinstance(timer, Timer) else TW_CLOCK_MONOTONIC
            raise _far_deadline(_NativeError(e.code, e.strerror.partition(": ")[2]), deadline_s, ns,
                                lambda: self._h.now_ns(code), "deadline_s", "reset_at") from None

    def stop_group(self, group: int, sync: bool = False) -> int:
        """Stops every live timer started with ``group=group``, as Timer.stop()
        on each, and returns how many it stopped (a one-shot already running
        its callback is not counted; a running periodic one is). With
        ``sync=True`` it also waits, as stop_sync() does, for the group's
        callbacks in progress and their releases (from inside a callback it
        does not wait for that callback's own timer). Timers started before
        the call are all stopped; one started concurrently is stopped or
        left, never lost. Cost: O(shards + the group's timers). Group 0 (no
        group) or beyond 2**64 - 1 raises ValueError, a non-int TypeError;
        0 is returned after shutdown(); TickwheelError (ESHUTDOWN) once
        closed, ForkedError in a fork child."""
        group = _group_id(group, "group", allow_zero=False, call="stop_group")
        return self._native.call("stop_group", _ext.Runtime.stop_group, group, bool(sync))

    def _timer_id(self, timer, what: str) -> int:
        if isinstance(timer, Timer):
            if timer._runtime is not self:
                raise ValueError("%s: the Timer belongs to another Runtime" % what)
            return timer.id
        if isinstance(timer, bool) or not isinstance(timer, numbers.Integral):
            raise TypeError("%s: expected a tickwheel.Timer or an int id, not %s" % (what, type(timer).__name__))
        if not 0 <= timer <= _U64_MAX:
            raise _invalid(what, "timer=%d is not a timer id (0 .. 2**64 - 1)" % timer)
        return int(timer)

    def queue(self) -> "Queue":
        """A new delivery queue of this runtime (tw_queue_create): timers started
        with ``queue=`` it run their callbacks only inside its ``run()``, on the
        thread calling it -- an event loop's (``q.fd()`` polls readable while
        one is due), or any thread of the program's. See Queue."""
        return Queue(self)

    def _start_options(self, queue, policy, leeway, group, clock, call: str) -> tuple:
        """start()'s options, checked: (policy code, clock code, leeway ns, group,
        the queue's extension object or None)."""
        policy_code = TW_PERIOD_SKIP if policy == "skip" else _policy_code(policy)
        clock_code = TW_CLOCK_MONOTONIC if clock == "monotonic" and type(clock) is str else _clock_code(clock)
        leeway_ns = 0 if leeway == 0 and type(leeway) is int else _to_ns(leeway, "leeway", call)
        group = 0 if group == 0 and type(group) is int else _group_id(group, "group", allow_zero=True, call=call)
        qh = None
        if queue is not None:
            if not isinstance(queue, Queue):
                raise TypeError("queue must be a tickwheel.Queue or None, not %s" % type(queue).__name__)
            if queue._native is not self._native:
                raise ValueError("queue belongs to another Runtime (a timer can only be bound to a "
                                 "Queue of the runtime that starts it)")
            if queue._native.epoch != _fork_epoch:
                raise ForkedError(call)
            qh = queue._handle
            if qh is None or queue._closing:
                raise TickwheelError(TW_ESHUTDOWN, call, "the Queue is closed")
        return policy_code, clock_code, leeway_ns, group, qh

    # -- batches (library 1.4) ---------------------------------------------------------
    def start_many(self, delays, fn, period_s: Seconds = 0, *, shard: int = -1, queue: Optional["Queue"] = None,
                   policy: Union[str, PeriodPolicy] = "skip", leeway: Seconds = 0, group: int = 0,
                   clock: Union[str, Clock] = "monotonic") -> list:
        """Starts one timer per delay of ``delays`` (seconds, as start()'s
        ``delay_s``) with one call into the library (tw_timer_start_n), each
        as start() would: ``fn`` is the callable of every timer, or a
        sequence of callables, one per delay; ``period_s`` and the keyword
        options apply to all of them. Returns a list with, for each delay,
        its Timer -- or None where the library could not start that one
        (the limit ``max_timers`` reached, out of memory, the runtime shut
        down, a delay beyond MAX_DELAY_S): its callable is released before
        this returns. Delays count from one clock reading taken as the call
        begins (never early). Bad arguments raise as start() does, before
        anything starts; TickwheelError (ESHUTDOWN) once closed, ForkedError
        in a fork child. Costs one FFI call for the whole list: see README
        ("Batches") for the saving per timer."""
        delays = list(delays)
        n = len(delays)
        if callable(fn):
            fns = None
        else:
            fns = list(fn)
            if len(fns) != n:
                raise ValueError("start_many: %d callables for %d delays" % (len(fns), n))
            for f in fns:
                if not callable(f):
                    raise TypeError("start_many: fn must be callable, or a sequence of callables")
        policy_code, clock_code, leeway_ns, group, qh = self._start_options(queue, policy, leeway, group, clock,
                                                                            "start_many")
        if all(type(d) is float and 0.0 <= d < 1e9 for d in delays):
            ns = [round(d * 10**9) for d in delays]  # _to_ns()'s arithmetic, without its checks per element
        else:
            # Beyond MAX_DELAY_S: that element is the library's to refuse (None).
            ns = [min(_to_ns(d, "delays[%d]" % i, "start_many", limit=None), _U64_MAX)
                  for i, d in enumerate(delays)]
        period_ns = _period_ns(period_s, "start_many")
        shard = _shard(shard, "start_many")
        if n == 0:
            self._native.call("start_many", lambda handle: 0)  # closed / forked: raises as for n > 0
            return []
        # The extension files each started element's callable in _live (a
        # refused one is released, and its element is None).
        try:
            return _ext.start_many(self._fast, self, fn if fns is None else fns, queue is not None or self._manual,
                                   ns, period_ns, shard, qh, policy_code, clock_code, leeway_ns, group,
                                   _CLOCK_BY_CODE[clock_code])
        except _NativeError as e:
            raise _native_error(e, "start_many") from None

    def _ids(self, timers, what: str) -> list:
        """The ids of ``timers`` (Timers of this runtime or ints)."""
        return [t.id if type(t) is Timer and t._runtime is self else self._timer_id(t, what) for t in timers]

    def _batch(self, what: str, fn, ids, *args) -> list:
        codes = self._native.call(what, fn, ids, *args)
        for r in codes:
            if r != TW_OK and r != TW_ENOENT:
                raise _error(r, what)  # TW_ESHUTDOWN: as Timer.stop() raises it
        return [r == TW_OK for r in codes]

    def stop_many(self, timers) -> list:
        """Stops every timer of ``timers`` (Timers of this runtime or ids), as
        Timer.stop() on each, in order, with one call into the library
        (Runtime::stop over a span): returns a list of bools, True where that
        stop prevented a run. Never blocks. Raises TickwheelError (ESHUTDOWN)
        after shutdown() or close(), ForkedError in a fork child."""
        return self._batch("stop_many", _ext.Runtime.stop_many, self._ids(timers, "stop_many"))

    def reset_many(self, timers, delay_s: Seconds) -> list:
        """Re-arms every timer of ``timers`` to fire ``delay_s`` from now, as
        Timer.reset() on each, in order, with one call (Runtime::reset over a
        span); "now" is one clock reading taken as the call begins (never
        early). Returns a list of bools, False where the timer was not
        pending. A delay beyond MAX_DELAY_S raises InvalidArgumentError (a
        TickwheelError EINVAL and a ValueError) and re-arms none; ESHUTDOWN
        and ForkedError as stop_many()."""
        ns = _to_ns(delay_s, "delay_s", "reset_many")
        return self._batch("reset_many", _ext.Runtime.reset_many, self._ids(timers, "reset_many"), ns)

    def _start(self, fn, deadline_ns: int, delay_ns: int, period_ns: int, shard: int,
               queue: Optional["Queue"] = None, *, policy="skip", leeway: Seconds = 0, group: int = 0,
               clock="monotonic", call: str = "start") -> Timer:
        if not callable(fn):
            raise TypeError("fn must be callable, not %s" % type(fn).__name__)
        policy_code, clock_code, leeway_ns, group, qh = self._start_options(queue, policy, leeway, group, clock, call)
        shard = _shard(shard, call)
        # The extension files the callable in _live once the library has the
        # timer, in the same C call: no KeyboardInterrupt between the two can
        # release the callable of a live timer. A failed start files nothing.
        try:
            return _ext.start_full(self._fast, self, fn, queue is not None or self._manual, delay_ns, deadline_ns,
                                   period_ns, shard, qh, policy_code, clock_code, leeway_ns, group,
                                   _CLOCK_BY_CODE[clock_code])
        except _NativeError as e:
            raise _native_error(e, call) from None

    # -- clocks ---------------------------------------------------------------------------
    @property
    def manual_clock(self) -> bool:
        """True for a runtime created with ``manual_clock=True``."""
        return self._manual

    def now_ns(self, clock: Union[str, Clock] = "monotonic") -> int:
        """The runtime's clock ``clock`` (see Clock) in integer nanoseconds: the
        machine's for a real runtime (as tickwheel.now_ns(clock)), the virtual
        one for a manual runtime. Works after shutdown(); raises
        TickwheelError (ESHUTDOWN) once closed, ForkedError in a fork child,
        ValueError for an unknown clock."""
        code = _clock_code(clock)
        return self._native.call("now", _ext.Runtime.now_ns, code)

    def now(self, clock: Union[str, Clock] = "monotonic") -> float:
        """As now_ns(), in seconds (a float: for exact arithmetic on a manual
        clock use now_ns())."""
        return self.now_ns(clock) / 1e9

    def _clock_reader(self, clock: Clock) -> Callable[[], float]:
        # "now" on a timer's clock for TimerInfo.remaining: the machine's for a
        # real runtime, this runtime's virtual one for a manual runtime.
        if not self._manual:
            return now if clock is Clock.MONOTONIC else functools.partial(now, clock)
        return functools.partial(self.now, clock)

    def advance(self, seconds: Seconds) -> int:
        """A manual runtime (``manual_clock=True``): moves its three clocks
        forward by exactly ``seconds`` (a number or a timedelta; rounded to
        the nanosecond) and runs, here on the calling thread, every callback
        that falls due, in deadline order (deadlines rounded up to the
        resolution; ties in start order), the clocks stepped to each deadline
        as it goes -- so ``rt.now()`` inside a callback is its deadline, and a
        timer that a callback starts (or re-arms) due inside the window runs
        in this call too. A periodic timer crossed k times: policy "skip"
        runs once with ``missed`` += k - 1 (judged at the end of the window;
        it stays on its grid), "burst" runs k times, "delay" as its runs fall.
        Timers bound to a Queue are delivered to it (``q.run()`` runs them).
        Returns the number of callbacks it ran; ``advance(0)`` runs what is
        due now.

        The GIL is released during the call and taken by each callback, so
        other threads may start, stop or reset timers meanwhile; concurrent
        advance() calls take turns. A callback's exception goes to on_error
        (as on a real runtime), except KeyboardInterrupt and SystemExit,
        which advance() re-raises once the window is done.

        Raises InvalidArgumentError (a TickwheelError with code TW_EINVAL and
        a ValueError) if ``seconds`` is negative or exceeds MAX_DELAY_S, or
        the runtime has no manual clock; TickwheelError TW_EDEADLK from
        inside one of this runtime's callbacks (nothing done), TW_ESHUTDOWN
        after shutdown()/close(); ForkedError in a fork child."""
        ns = _to_ns(seconds, "seconds", "advance")
        err = None
        try:
            n = self._native.call("advance", _ext.Runtime.advance, ns)  # the GIL is released inside
        except TickwheelError as e:
            err = e
        finally:
            exc = _running.__dict__.pop("exc", None)
        if exc is not None:
            raise exc
        if err is None:
            return n
        rc = err.code
        if rc == TW_EINVAL:
            if not self._manual:
                raise _error(rc, "advance", "the Runtime has no manual clock (create it with "
                             "tickwheel.Runtime(manual_clock=True))") from None
            raise _invalid("advance", "seconds=%s is above %s" % (_show(seconds), _MAX_DELAY_TEXT)) from None
        if rc == TW_EDEADLK:
            raise _error(rc, "advance", "called from inside one of this Runtime's own callbacks") from None
        raise err

    # -- lifecycle ---------------------------------------------------------------------
    def _call(self, what: str, fn, *args) -> int:
        """Calls fn(handle, *args); TW_OK and TW_ENOENT are returned, the rest raised."""
        return self._native.call(what, fn, *args)

    def shutdown(self) -> None:
        """Cancels pending timers (releasing their callables), waits for running
        callbacks, stops the threads. Afterwards timer calls raise TickwheelError
        (ESHUTDOWN). Raises TickwheelError(EDEADLK) from one of its callbacks.

        The wait for callbacks in progress releases the GIL, and Ctrl-C
        interrupts it as it interrupts ``threading.Event.wait()``
        (KeyboardInterrupt, within about 20 ms): the runtime is then shut
        down or shutting down -- no timer starts any more (ESHUTDOWN), the
        pending ones are cancelled -- and the callbacks still in progress
        finish in the background; shutdown() or close() again waits for the
        rest."""
        self._native.shutdown()

    def close(self) -> None:
        """shutdown(), then frees the runtime. Idempotent; safe to call from several
        threads at once (each returns once it is freed). Raises
        TickwheelError(EDEADLK) from one of its own callbacks (nothing done).

        Ctrl-C interrupts its wait for the callbacks in progress, as for
        shutdown() (also when ``with`` closes it): KeyboardInterrupt is
        raised, and the runtime is then shut down or shutting down but not
        yet freed; close() again (or the interpreter's exit) waits for the
        rest and frees it."""
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
        if _ext.hook_depth():
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
        """A snapshot of the runtime's counters (the C tw_stats fields). Since
        1.7 also where the lateness comes from -- ``driver_lateness_*_ns``
        (deadline to the shard's hand-over), ``wait_lateness_*_ns`` (to the
        callback's start; this binding's callbacks run on its loop thread, so
        a busy loop shows here) -- the callbacks' duration
        (``run_duration_*_ns``, ``run_duration_samples``), the saturation
        gauges (``workers_busy``, ``waiting_for_worker``, ``callbacks_running``,
        ``oldest_run_age_ns``) and the memory ones (``slots``,
        ``resident_bytes``)."""
        return self._native.call("stats", _ext.Runtime.stats)

    def metrics(self) -> str:
        """The runtime's counters, gauges and callback-lateness histogram in the
        Prometheus text exposition format 0.0.4 (tw_runtime_metrics): serve it as
        the body of a /metrics response with Content-Type
        "text/plain; version=0.0.4". Metric names start with ``tickwheel_``. Works
        from any thread, from callbacks, and after shutdown() (the final values);
        it never blocks the runtime. Raises TickwheelError (ESHUTDOWN) once
        closed, ForkedError in a fork child."""
        return self._native.call("metrics", _ext.Runtime.metrics)

    def _report(self, exc: BaseException, timer_id: int, token: int = 0) -> None:
        handler = self._on_error
        try:
            if handler is not None:
                handler(exc, Timer(self, timer_id, Clock.MONOTONIC, token))
            else:
                print("tickwheel: exception in the callback of timer %#x:" % timer_id, file=sys.stderr)
                traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
        except BaseException:  # noqa: BLE001
            pass

    def __repr__(self):
        return "<tickwheel.Runtime %s>" % ("closed" if self.closed else "open")


# ---- delivery queues -------------------------------------------------------------------
def _running_stack() -> list:
    try:
        return _running.stack
    except AttributeError:
        _running.stack = stack = []
        return stack


def _close_queue_in_background(queue: "Queue") -> None:
    _start_deferred(queue._close_quietly, "tickwheel-queue-close")  # (at exit: freed with its runtime)


class Queue:
    """A delivery queue (tw_queue): timers started with ``queue=`` it run their
    callbacks -- and release their callables -- only inside ``run()``, on the
    thread that calls it, never on a worker thread. Made by ``rt.queue()`` (or
    ``tickwheel.Queue(rt)``).

        q = rt.queue()
        t = rt.start(0.5, on_timeout, queue=q)
        ...
        select.select([q], [], [])   # q.fd() (also q.fileno()) polls readable while one is due
        q.run()                      # runs the due callbacks here, in deadline order

    Every rule of the runtime holds: never early, runs of one timer never
    overlap, and stop is exact -- ``t.stop()`` of a timer that is due (the fd
    is readable) but has not run yet returns True and its callback never
    runs; ``t.reset()`` of such a timer re-arms it.

    ``close()`` (also ``with``, and dropping the last reference) cancels the
    timers still bound to it (their callables are released on the calling
    thread) and frees it. Closing or shutting down the Runtime ends its
    queues too: run() then raises TickwheelError (ESHUTDOWN). A Queue keeps
    its Runtime alive. Methods may be called from any thread.
    """

    __slots__ = ("_runtime", "_native", "_handle", "_fd", "_active", "_closing", "_wake_r", "_wake_w",
                 "__weakref__")

    def __init__(self, runtime: "Runtime"):
        # Every slot first: __del__ must work whatever fails below.
        self._handle = None  # the extension's Queue; None once freed (by close or the runtime)
        self._active = 0  # calls on it in flight (under the runtime's _Native.cond)
        self._closing = False
        self._wake_r: Optional[int] = None  # a pipe that wakes run()s waiting in poll at close
        self._wake_w: Optional[int] = None
        self._fd = -1
        if not isinstance(runtime, Runtime):
            raise TypeError("Queue(runtime): a tickwheel.Runtime, not %s" % type(runtime).__name__)
        self._runtime = runtime  # the runtime stays alive while the queue is
        self._native = runtime._native
        handle = runtime._native.call("queue", _ext.Queue)
        self._fd = handle.fd()
        self._handle = handle

    # -- calls on the queue: counted, so that close() and Runtime.close() free it only once none is in flight
    def _enter(self, what: str):
        native = self._native
        if native.epoch != _fork_epoch:
            raise ForkedError(what)
        with native.cond:
            if native.handle is None or native.closing:
                raise TickwheelError(TW_ESHUTDOWN, what, "the Runtime is closed")
            if self._handle is None or self._closing:
                raise TickwheelError(TW_ESHUTDOWN, what, "the Queue is closed")
            native.active += 1
            self._active += 1
            return native.handle, self._handle

    def _leave(self) -> None:
        native = self._native
        with native.cond:
            native.active -= 1
            self._active -= 1
            # Only the close()s wait for these, once they set their flag.
            if (native.active == 0 and native.closing) or (self._active == 0 and self._closing):
                native.cond.notify_all()

    # -- the owner's side -------------------------------------------------------------------
    def fd(self) -> int:
        """The queue's file descriptor (a Linux eventfd): it polls readable
        (select/poll/epoll, asyncio's ``loop.add_reader``) while at least one
        callback of the queue is due and has not run -- level-triggered --, and
        for good once the runtime is shut down (run() then raises). Owned by the
        queue: never read, write or close it. Raises TickwheelError (ESHUTDOWN)
        once the queue or its runtime is closed."""
        if self._handle is None or self._closing or self._native.handle is None:
            raise TickwheelError(TW_ESHUTDOWN, "fd", "the Queue is closed")
        return self._fd

    fileno = fd  # so that select.select([q], ...) and selectors take the Queue itself

    def run(self, max: int = 64, timeout: Optional[Seconds] = 0) -> int:
        """Runs up to ``max`` due callbacks on this thread, in deadline order,
        and returns how many ran.

        ``timeout`` is how long to wait while none is due, as for
        ``select.select``: 0 (the default) = don't wait (what an event loop's
        reader wants); a number of seconds (or a timedelta) = at most that
        long; None = until one is due or the runtime shuts down. Negative
        raises ValueError. Once some are due it runs them and returns
        without waiting for more. The wait happens in Python with the GIL
        released, and Ctrl-C interrupts it.

        Raises TickwheelError with code TW_ESHUTDOWN when the runtime is shut
        down (or the queue closed, also by another thread while this call
        waited) and nothing ran; TickwheelError TW_EDEADLK from inside one of
        this queue's own callbacks (nothing done); ForkedError in a fork()
        child. A callback's exception goes to the Runtime's ``on_error``,
        except KeyboardInterrupt and SystemExit, which run() re-raises after
        the callbacks of its batch have run.
        """
        if isinstance(max, bool) or not isinstance(max, int):
            raise TypeError("max must be an int, not %s" % type(max).__name__)
        if max < 1:
            raise _invalid("run", "max=%d is below 1" % max)
        wait_ns = -1 if timeout is None else _to_ns(timeout, "timeout", "run", limit=None)
        stack = _running_stack()
        if self in stack:
            raise TickwheelError(TW_EDEADLK, "run", "called from inside one of this Queue's own callbacks")
        _, handle = self._enter("run")
        stack.append(self)
        try:
            n = handle.run_nowait(min(max, _U64_MAX))  # keeps the GIL: never waits
            if n == 0 and wait_ns != 0:
                n = self._wait_and_run(handle, max, wait_ns)
        finally:
            stack.pop()
            self._leave()
            exc = _running.__dict__.pop("exc", None)
        if exc is not None:
            raise exc
        if n < 0:
            raise _error(n, "run")
        return n

    def _wait_and_run(self, handle: int, max: int, wait_ns: int) -> int:
        # Waits in poll(), GIL released, never in C: close() (from another
        # thread) must be able to wake every waiter before it frees the queue,
        # and Ctrl-C must interrupt the wait.
        closed = TickwheelError(TW_ESHUTDOWN, "run", "the Queue was closed while run() waited")
        wake = self._wake_fd()
        if wake is None:
            raise closed  # close() began
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.register(wake, select.POLLIN)
        deadline = None if wait_ns < 0 else time.monotonic_ns() + wait_ns
        while True:
            if deadline is None:
                ms = None
            else:
                left = deadline - time.monotonic_ns()
                if left <= 0:
                    return 0
                ms = (left + 999_999) // 1_000_000  # rounded up: never short of the timeout
            events = poller.poll(ms)
            if any(fd == wake for fd, _ in events):
                raise closed
            if events:
                n = handle.run_nowait(min(max, _U64_MAX))
                if n != 0:
                    return n  # ran some, or TW_ESHUTDOWN
                # taken back by a stop or reset, or run by another thread: wait on

    def _wake_fd(self) -> Optional[int]:
        native = self._native
        with native.cond:
            if self._closing:
                return None
            if self._wake_r is None:
                self._wake_r, self._wake_w = os.pipe()
                os.set_blocking(self._wake_w, False)
            return self._wake_r

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Cancels the timers still bound to the queue (their callables are
        released on this thread; the stops are counted in the runtime's
        stats), wakes the run() calls waiting on it (they raise ESHUTDOWN),
        waits for those in progress, and frees it (tw_queue_destroy).
        Idempotent, any thread. Raises TickwheelError (EDEADLK) from inside
        one of its own callbacks (nothing done). After the runtime is closed
        it does nothing (the runtime freed it)."""
        if self in _running_stack():
            raise TickwheelError(TW_EDEADLK, "Queue.close", "called from inside one of this Queue's own callbacks")
        self._close(blocking=True)

    def _close_quietly(self) -> None:
        try:
            self._close(blocking=True)
        except Exception:  # noqa: BLE001 -- a background close has nobody to tell
            pass

    def _close(self, blocking: bool) -> None:
        native = self._native
        if native.epoch != _fork_epoch:
            # A fork() child: the runtime's _close_forked frees it with the runtime's copy.
            self._handle = None
            return
        cond = native.cond
        if not cond.acquire(blocking):
            # A finalizer that found the lock held (maybe by this very thread,
            # collected in the middle of a call): never wait here.
            _close_queue_in_background(self)
            return
        try:
            if self._handle is None:
                return
            if self._closing:  # another thread closes it: return once it is freed
                while self._handle is not None:
                    cond.wait()
                return
            self._closing = True
            self._handle.mark_closing()  # the extension's own starts refuse it from now on
            if self._wake_w is not None:
                try:
                    os.write(self._wake_w, b"\0")  # readable for good: every waiting run() wakes
                except BlockingIOError:
                    pass
            while self._active:
                cond.wait()
            if native.handle is None or native.closing:
                # The runtime is freed, or being freed by Runtime.close(): it
                # frees its queues (tw_runtime_destroy).
                self._forget()
                cond.notify_all()
                return
            native.active += 1
            handle = self._handle
        finally:
            cond.release()
        rc = TW_EINVAL
        try:
            rc = handle.close()  # the GIL is released while it waits for callbacks in progress
        finally:
            with cond:
                native.active -= 1
                if rc == TW_EDEADLK:  # inside a hook of its own (nothing done): still usable
                    self._closing = False
                else:
                    self._forget()
                cond.notify_all()
        _check(rc, "Queue.close")

    def _forget(self) -> None:  # under native.cond
        self._handle = None
        for fd in (self._wake_r, self._wake_w):
            if fd is not None:
                os.close(fd)
        self._wake_r = self._wake_w = None

    @property
    def closed(self) -> bool:
        """True once the queue, or its runtime, is closed."""
        return self._handle is None or self._closing or self._native.handle is None

    @property
    def runtime(self) -> "Runtime":
        return self._runtime

    def __enter__(self) -> "Queue":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None) is None:
            return
        self._close_from_finalizer()

    def _close_from_finalizer(self) -> None:
        # From __del__ or another finalizer (any thread, any point of a
        # program, maybe holding the runtime's lock). No run() of this queue
        # is in flight (each holds a reference to it): closing waits for
        # nothing of the binding's. Inside a callback or release hook (maybe
        # on a worker thread), or when the runtime's lock is held, it is
        # closed from another thread instead: never a wait here.
        try:
            if _ext.hook_depth():
                _close_queue_in_background(self)
            else:
                self._close(blocking=False)
        except Exception:  # noqa: BLE001 -- nothing may escape a finalizer
            pass

    # -- observation -------------------------------------------------------------------------
    def stats(self) -> dict:
        """A snapshot of the queue's counters (tw_queue_stats): ``due`` (callbacks
        due and not yet run now: the fd is readable iff > 0), ``delivered``,
        ``ran``, ``runners`` (threads inside run() now), and the lateness from
        the deadline to the fd becoming readable (``signal_*``) and to the
        callback's start (``run_*``) in ns. Works after the runtime's shutdown
        (final values); raises TickwheelError (ESHUTDOWN) once closed."""
        _, handle = self._enter("stats")
        try:
            return handle.stats()
        finally:
            self._leave()

    def __repr__(self):
        return "<tickwheel.Queue fd=%d %s>" % (self._fd, "closed" if self.closed else "open")


def _retry(fn, *args) -> None:
    # At exit: a KeyboardInterrupt (Ctrl-C again) does not cut a wait short.
    while True:
        try:
            fn(*args)
            return
        except KeyboardInterrupt:
            continue
        except Exception:  # noqa: BLE001 -- nobody to tell at exit
            return


def _close_natives() -> None:
    # Closes every C runtime still alive -- open ones, and ones being freed by
    # a background thread (close() waits for those) -- and joins the background
    # threads, including any started by a callback or release hook meanwhile.
    while True:
        with _natives_lock:
            natives = list(_natives)
            threads, _deferred[:] = list(_deferred), []
        if not natives and not threads:
            return
        for native in natives:
            _retry(native.close, False)
        for th in threads:
            _retry(th.join)


@atexit.register
def _close_all() -> None:
    # Runs after the interpreter has joined its non-daemon threads and before it
    # finalises (the atexit handlers registered before ``import tickwheel`` run
    # after it). Once it finalises, a thread that takes the GIL is ended by
    # CPython -- a worker would be ended inside the library's noexcept frames
    # (std::terminate). So: the runtimes still open are closed (the callbacks
    # in progress finish, the pending timers are cancelled and their callables
    # released, as by close()); then no callback or release hook may enter
    # Python any more (_ext.begin_exit() waits for those inside to leave; from
    # then on Runtime() raises), and a runtime made meanwhile (by a daemon
    # thread) is closed too, its hooks kept out of Python. Ctrl-C does not cut
    # it short.
    _close_natives()
    _retry(_ext.begin_exit)
    _close_natives()


def __getattr__(name: str):
    # ``tickwheel.asyncio`` after a plain ``import tickwheel``, imported on
    # first use (it imports the standard library's asyncio, which takes time).
    if name == "asyncio":
        import importlib
        return importlib.import_module(".asyncio", __name__)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
