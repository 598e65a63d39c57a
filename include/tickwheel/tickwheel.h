/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/** @file
 * tickwheel/tickwheel.h -- the C API of the tickwheel timer runtime.
 *
 * This header is a stable contract: it compiles as C99, C11 and C++ (98 and
 * later), includes only `<stdint.h>` and `<stddef.h>`, and no C++ type, exception
 * or bool crosses it. Link with libtickwheel.so.1 (pkg-config tickwheel, or
 * CMake find_package(tickwheel CONFIG) -> tickwheel::tickwheel) or with the
 * static libtickwheel.a (tickwheel::tickwheel_static; needs a C++ link).
 *
 * The semantics are those of the C++ runtime (tickwheel/runtime.hpp):
 *
 * @anchor tw_contract
 *  * Thread safety. Every function may be called from any thread,
 *    concurrently, including from inside a callback -- except that
 *    tw_runtime_shutdown()/tw_runtime_destroy() fail with TW_EDEADLK when
 *    called from one of that runtime's callbacks or from any release hook.
 *  * Struct initialisers. tw_config_init() and tw_timer_spec_init() are
 *    inline functions of this header: they write the caller's sizeof, so a
 *    program built against this header never has bytes written past its
 *    struct by a newer library. (The library still exports them for
 *    programs built before; those write only the ABI-1 layout.)
 *  * Never early. A callback never starts before its deadline as read from
 *    its clock (tw_timer_spec.clock: CLOCK_MONOTONIC, tw_now_ns(), by
 *    default; CLOCK_BOOTTIME or CLOCK_REALTIME; a manual runtime's virtual
 *    clocks) by the caller of the start function.
 *    Deadlines are rounded UP to the runtime's resolution (default 1 ms); a
 *    timer fires about one tick plus scheduling noise after its deadline.
 *  * Progress (since 1.7). The runtime's own threads (the shards' drivers,
 *    the workers) never wait for a thread of yours, whatever its priority
 *    or state: a caller preempted, at nice 19 or SCHED_IDLE, stopped at a
 *    breakpoint or inside a signal handler, at any instruction of any
 *    function here, delays no other timer -- at most its own call in
 *    progress (a start not yet filed: its id was never returned). What
 *    does delay a timer: every worker busy in callbacks (with W workers, W
 *    blocking callbacks hold back every other callback: size
 *    tw_config.workers for them, or run blocking work from a delivery
 *    queue's thread), a delivery queue whose thread does not call
 *    tw_queue_run() (that queue's timers only), the runtime's threads
 *    starved of CPU. Only tw_runtime_shutdown()/tw_runtime_destroy() and
 *    tw_queue_destroy() wait for calls in progress. Two exceptions, both a
 *    resource a caller holds for a few instructions: a caller inside a stop
 *    or reset of a timer bound to a delivery queue holds that queue's lock
 *    (that queue's runs wait for it, no other timer does); a reset of a
 *    CLOCK_BOOTTIME/CLOCK_REALTIME timer waits while another reset of the
 *    same timer holds its deadline lock -- also a callback resetting its
 *    own timer, on a worker.
 *  * Callback context. Callbacks run on the runtime's worker threads (a
 *    oneTBB arena), never on the thread that started the timer -- or, for
 *    a timer started with a delivery queue (tw_timer_spec.queue), only on
 *    the thread that calls tw_queue_run() on it. Runs of one timer never
 *    overlap. Callbacks and release hooks must return normally:
 *    no longjmp out of them, and (if written in C++) no exception out of a
 *    release hook.
 *  * Stop. A one-shot timer ends in exactly one of three ways: its callback
 *    runs, or one tw_timer_stop()/tw_timer_stop_sync() returns TW_OK (the
 *    callback never runs), or the runtime is shut down while it is pending.
 *    A periodic timer runs until one stop call returns TW_OK or the runtime
 *    is shut down; a stop that lands during a run returns TW_OK and that run
 *    is the last (no run starts after the stop returns).
 *  * Release. A timer's release hook (tw_timer_spec.release), if not NULL,
 *    is called exactly once with its arg, when the runtime is done with the
 *    timer: after its last run (on the worker thread), inside the stop call
 *    that cancelled it (or, if a run was in progress, right after that run,
 *    on the worker), inside tw_runtime_shutdown()/tw_runtime_destroy() for
 *    timers still pending, or -- when tw_timer_start_ex() fails with
 *    TW_ESHUTDOWN, TW_EAGAIN or TW_ENOMEM -- before it returns. The rule for
 *    a start call, from its return code alone: TW_EINVAL and TW_EFORKED
 *    never call the hook (the call was rejected: arg is still the caller's);
 *    every other return calls it exactly once (before returning on failure,
 *    later on TW_OK). Free what the callback uses there.
 *  * Ids. A tw_timer is a 64-bit id with a 24-bit generation: an id whose
 *    timer fired, was stopped or whose slot was reused (any number of times,
 *    in any interleaving with the call) is "stale" and is answered
 *    TW_ENOENT, never acted on. 0 is never a valid id. A slot whose
 *    generation reaches 2^24 - 1 is retired rather than reused.
 *  * Fork. In a child process created by fork() the runtime's threads do
 *    not exist. Every function taking a runtime created before the fork
 *    returns TW_EFORKED in the child, except tw_runtime_destroy(), which
 *    frees it there without running any callback or release hook and
 *    returns TW_OK; no callback or hook of it ever runs in the child. A
 *    runtime created in the child works normally, whatever instant the
 *    parent forked at: with other threads inside any tickwheel function,
 *    the process's first tw_runtime_create() included (1.6.0 and earlier:
 *    a child forked then could hang in its own tw_runtime_create()). fork()
 *    from a signal handler is outside this (POSIX does not make fork()
 *    async-signal-safe). The parent is unaffected.
 *  * oneTBB. Callbacks run in a tbb::task_arena per runtime; the workers of
 *    all runtimes come from oneTBB's process-wide pool (tw_stats.workers).
 *    oneTBB is not fork-safe, so in a process descended through fork() from
 *    a process that had more than one thread at the fork, runtimes never
 *    use oneTBB: each runs its callbacks on up to `workers` threads of its
 *    own, started on demand, with the same guarantees (tw_stats.workers is
 *    then `workers`, or fewer once the system refused a thread).
 *  * Errors. Every function returning int returns TW_OK (0) or a negative
 *    TW_E* code; none aborts the process or lets an exception escape. When
 *    several checks fail, the code of the first one in the order documented
 *    at the function is returned. tw_last_error_message() (since 1.5) then
 *    names the argument, its value and the limit.
 *  * Lifetime. A runtime pointer is valid from a successful
 *    tw_runtime_create() until tw_runtime_destroy() returns TW_OK. After
 *    tw_runtime_shutdown() it stays valid (calls return TW_ESHUTDOWN);
 *    after tw_runtime_destroy() it is freed: using it then -- including a
 *    second tw_runtime_destroy() -- is undefined behaviour, exactly like
 *    using memory after free() (it may even name a new runtime that reused
 *    the address). Passing a pointer that never was a runtime is undefined
 *    too; only NULL is checked (TW_EINVAL).
 *
 * @anchor tw_abi_policy
 * ABI policy. The shared library's SONAME carries the ABI major version
 * (libtickwheel.so.1); only tw_* symbols are exported, with symbol version
 * TICKWHEEL_1 (later additions: TICKWHEEL_1.1 .. TICKWHEEL_1.5). Within one ABI major version: no function is removed or
 * changes its signature or meaning; error codes and flag values keep their
 * values; a struct with a leading `size` field only grows AT ITS END, the
 * caller stores sizeof(struct) in `size` (the *_init() functions do), and
 * the library reads/writes only the first `size` bytes: fields beyond an
 * older caller's size take their documented defaults, and a newer caller's
 * extra bytes are accepted by an older library only if they are all zero
 * (so a request it cannot honour fails with TW_EINVAL instead of being
 * silently ignored). Structs without a size field (none today) never change.
 */
#ifndef TICKWHEEL_TICKWHEEL_H
#define TICKWHEEL_TICKWHEEL_H

#include <stddef.h>
#include <stdint.h>

/* ---- version ------------------------------------------------------------ */
/** The major version of this header (see TW_VERSION). */
#define TW_VERSION_MAJOR 1
/** The minor version of this header (see TW_VERSION). */
#define TW_VERSION_MINOR 7
/** The patch version of this header (see TW_VERSION). */
#define TW_VERSION_PATCH 0
/** The version this header belongs to, encoded as tw_version() returns it. */
#define TW_VERSION ((TW_VERSION_MAJOR << 16) | (TW_VERSION_MINOR << 8) | TW_VERSION_PATCH)
/** The ABI major version: the N of the SONAME libtickwheel.so.N. */
#define TW_ABI_VERSION 1

/* ---- export macro --------------------------------------------------------- */
/** @def TW_API
 *  Marks a function the library exports: `__attribute__((visibility("default")))`
 *  with GCC and clang; `__declspec(dllexport)` while building the library and
 *  `__declspec(dllimport)` otherwise on Windows (empty there with TW_STATIC);
 *  empty elsewhere. Part of every tw_* declaration, not meant for applications. */
#if defined(_WIN32) || defined(__CYGWIN__)
#  if defined(TW_BUILDING_LIBRARY)
#    define TW_API __declspec(dllexport)
#  elif defined(TW_STATIC)
#    define TW_API
#  else
#    define TW_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__) && __GNUC__ >= 4
#  define TW_API __attribute__((visibility("default")))
#else
#  define TW_API
#endif

/** @def TW_NOEXCEPT
 *  `noexcept` in C++11 and later, `throw()` in C++98, empty in C: no tw_*
 *  function lets an exception escape (see "Errors" in the contract above). */
#if defined(__cplusplus) && __cplusplus >= 201103L
#  define TW_NOEXCEPT noexcept
#elif defined(__cplusplus)
#  define TW_NOEXCEPT throw()
#else
#  define TW_NOEXCEPT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- error codes (negated errno values, stable) --------------------------- */
/** Success. Every error code below is negative: a negated errno value (stable;
 *  see tw_strerror() for a description). */
#define TW_OK 0
#define TW_EINVAL (-22)     /**< invalid argument: NULL pointer, bad size, out-of-range value */
#define TW_ENOMEM (-12)     /**< out of memory (or threads / timer slots exhausted) */
#define TW_ENOENT (-2)      /**< no such pending timer: fired, stopped, stale, 0 or never existed */
#define TW_EAGAIN (-11)     /**< tw_config.max_timers timers are alive */
#define TW_ESHUTDOWN (-108) /**< the runtime is shut down (or shutting down) */
/** would deadlock: tw_runtime_shutdown()/tw_runtime_destroy() called from one of
 *  the runtime's callbacks or from a release hook; tw_queue_run()/tw_queue_destroy()
 *  called from inside one of that queue's own callbacks or release hooks;
 *  tw_runtime_advance() called from inside one of its runtime's callbacks */
#define TW_EDEADLK (-35)
#define TW_EFORKED (-1001)  /**< the runtime was created in the parent of this fork() child */

/** The longest delay, period or deadline distance accepted: 2^60 ns (about
 *  36.5 years). Longer ones are TW_EINVAL. */
#define TW_MAX_DELAY_NS (((uint64_t)1) << 60)

/** The most grid deadlines a TW_PERIOD_BURST timer owes (since 1.7): when
 *  a run finds more passed and not yet run, the oldest beyond this many
 *  are skipped and counted in tw_timer_info.missed; the catch-up serves
 *  the latest ones. */
#define TW_BURST_MAX_OWED 1000u

/* ---- types ----------------------------------------------------------------- */
/** An opaque runtime: shards (timing wheels + a driver thread each) and a
 *  pool of worker threads that run the callbacks. */
typedef struct tw_runtime tw_runtime;

/** A timer id. 0 is never a valid id. */
typedef uint64_t tw_timer;

/** An opaque delivery queue: the callbacks of the timers started with it
 *  run on the thread that calls tw_queue_run(), never on a worker (see
 *  "delivery queues" below). Since 1.2. */
typedef struct tw_queue tw_queue;

/** A timer callback: called on a worker thread with the arg given at start
 *  and the timer's id. May call any tw_* function except shutting down or
 *  destroying its own runtime. */
typedef void (*tw_callback)(void *arg, tw_timer id);

/** A release hook: called exactly once with the timer's arg when the runtime
 *  is done with the timer (see "Release" in the @ref tw_contract "contract"). */
typedef void (*tw_release)(void *arg);

/* ---- runtime ---------------------------------------------------------------- */
/** tw_config.flags: pin shard i's driver thread to CPU i % online CPUs. */
#define TW_PIN_SHARDS 0x1u
/** tw_config.flags (since 1.3): a manual clock, for tests. The runtime's
 *  three clocks stand still (starting at the machine's values at creation)
 *  until tw_runtime_advance() moves them; callbacks run inside
 *  tw_runtime_advance() on its caller's thread (or, for queue-bound timers,
 *  in tw_queue_run()); the runtime starts no driver thread. */
#define TW_CONFIG_MANUAL_CLOCK 0x2u

/** Runtime configuration. Initialise with tw_config_init(), then set fields. */
typedef struct tw_config {
    uint32_t size;          /**< sizeof(tw_config); set by tw_config_init() */
    uint32_t shards;        /**< 0 = one per online CPU; at most 256 */
    uint32_t workers;       /**< callback worker threads; 0 = one per online CPU; at most 4096 */
    uint32_t flags;         /**< TW_PIN_SHARDS, TW_CONFIG_MANUAL_CLOCK; unknown bits are TW_EINVAL */
    uint64_t resolution_ns; /**< the tick; 0 = 1 ms; else 1000 (1 us) .. 1000000000 (1 s) */
    uint64_t max_timers;    /**< live (started, not yet released) timers; 0 = unlimited */
    /** Since 1.5. The runtime's name: the `runtime="<name>"` label of every
        series of tw_runtime_metrics(), and the name error messages
        (tw_last_error_message()) give it. Copied at tw_runtime_create():
        the string need not outlive the call. NULL (default) = a name the
        runtime makes up, unique in the process: "tickwheel-1",
        "tickwheel-2", ... in creation order; an empty string "" is kept
        as it is (the label runtime="", since 1.7; 1.5 made a name up for it
        too). Any bytes: label values are escaped, and bytes that are not
        valid UTF-8 are each replaced by U+FFFD (since 1.7), so the
        exposition stays valid UTF-8 whatever the name holds; error
        messages show the bytes as given. Give two runtimes of one process
        different names, or their metrics collide. A caller built against an
        older header (a smaller size) gets the made-up name. */
    const char *name;
    /** Since 1.7. Free timer records (64 bytes each) every shard keeps
        resident when it gives memory back to the kernel after a peak: a
        shard whose free records exceed what its live timers need by more
        than this gives the surplus back (MADV_DONTNEED, whole 4 KiB pages
        of 64 free records) once it has been quiet for about 200 ms, from its
        own thread, never on a start or a stop. 0 (default) = 32767 (one
        2 MiB chunk per shard); UINT64_MAX = never give memory back (as
        before 1.7). A caller built against an older header gets the
        default. */
    uint64_t slot_reserve;
} tw_config;

/** Sets every field to its default (all zero) and size to sizeof(tw_config)
 *  as this header defines it. Does nothing if cfg is NULL. Inline (see
 *  "Struct initialisers" in the @ref tw_contract "contract"); any thread; O(sizeof). */
#ifndef TW_NO_INLINE_INIT
static inline void tw_config_init(tw_config *cfg) TW_NOEXCEPT {
    size_t i;
    if (cfg == NULL) return;
    for (i = 0; i < sizeof *cfg; ++i) ((unsigned char *)cfg)[i] = 0;
    cfg->size = (uint32_t)sizeof *cfg;
}
#else
TW_API void tw_config_init(tw_config *cfg) TW_NOEXCEPT;
#endif

/** Creates a runtime and starts its threads; cfg NULL = all defaults.
 *  Returns, checked in this order:
 *  @retval TW_EINVAL  out is NULL; cfg->size is below sizeof(tw_config) of ABI 1 (32),
 *              between it and the 1.5 size (40) or between that and the 1.7
 *              size (48), above that with a non-zero
 *              byte past the fields this library knows, or above 4096;
 *              unknown flags; shards > 256; workers > 4096; resolution_ns
 *              outside 1 us .. 1 s. (tw_last_error_message() names which.)
 *  @retval TW_ENOMEM  out of memory, or a thread could not be started.
 *  @retval TW_OK      *out holds the new runtime.
 *
 *  On failure *out (if out is not NULL) is set to NULL. Any thread; in a
 *  fork() child too, whatever instant the parent forked at (see "Fork"
 *  above). */
TW_API int tw_runtime_create(const tw_config *cfg, tw_runtime **out) TW_NOEXCEPT;

/** Shuts the runtime down without freeing it: from now on every function
 *  taking this runtime returns TW_ESHUTDOWN (except tw_runtime_stats(),
 *  which still reports the final counters, tw_runtime_shutdown() itself,
 *  which returns TW_OK again, and tw_runtime_destroy(), which frees it).
 *  Timers still pending are cancelled and their release hooks run on this
 *  thread; callbacks in progress are waited for; all threads are joined.
 *  Concurrent callers all wait for the end. In this order (since 1.5):
 *  starts and tw_queue_create() calls in flight end (later ones fail with
 *  TW_ESHUTDOWN; a queue such a create returned is closed by this call);
 *  every delivery queue is closed -- threads waiting in tw_queue_run(), a
 *  callback on a worker, of another queue or of a tw_runtime_advance()
 *  among them, return TW_ESHUTDOWN -- before anything is waited for; an
 *  advance in progress stops before its next callback; then workers and
 *  callbacks in progress in tw_queue_run() are waited for; then the pending
 *  timers are cancelled. So a callback waiting in tw_queue_run(q, n, -1)
 *  never keeps shutdown from returning. Returns:
 *  @retval TW_EINVAL   rt is NULL.
 *  @retval TW_EFORKED  in a fork() child of the process that created rt: nothing done.
 *  @retval TW_EDEADLK  called from one of this runtime's callbacks, or from inside a
 *               release hook (of any runtime: hooks run inside stop calls,
 *               shutdown, or on a worker right after a run, where shutting
 *               down would deadlock or free memory in use): nothing done.
 *  @retval TW_OK       shut down (now, or already before). */
TW_API int tw_runtime_shutdown(tw_runtime *rt) TW_NOEXCEPT;

/** tw_runtime_shutdown(), then frees the runtime. In a fork() child of the
 *  process that created rt it only frees it: no callback or release hook
 *  runs, no thread is joined (they do not exist there), and it returns
 *  TW_OK. Destroying a runtime twice is undefined (see "Lifetime"). Returns:
 *  @retval TW_EINVAL   rt is NULL.
 *  @retval TW_EDEADLK  as tw_runtime_shutdown(): nothing done, rt stays valid
 *               (destroy it later from another thread).
 *  @retval TW_OK       freed: rt must not be used again (undefined behaviour, like
 *               free()); in particular no other thread may be inside a call
 *               on rt, nor call it later. */
TW_API int tw_runtime_destroy(tw_runtime *rt) TW_NOEXCEPT;

/* ---- timers -------------------------------------------------------------------- */
/** Starts a timer: first run delay_ns from now (a CLOCK_MONOTONIC reading
 *  taken during the call -- where the kernel clocks on the TSC, an upper
 *  bound of it, at most ~3 us above: never below, so never early; see
 *  "Which clock" in the guide, TICKWHEEL_TSC=0 turns it off), rounded up
 *  to the tick; then, if period_ns > 0, every
 *  period_ns (fixed rate: runs at first + k * period, rounded up to the
 *  tick; overrun periods are skipped, never run in a burst). delay_ns 0
 *  fires as soon as possible. O(1), lock-free. Returns, in this order:
 *  @retval TW_EINVAL     rt, cb or out is NULL;
 *                 delay_ns > TW_MAX_DELAY_NS; period_ns > TW_MAX_DELAY_NS.
 *  @retval TW_EFORKED    in a fork() child of the process that created rt.
 *  @retval TW_ESHUTDOWN  the runtime is shut down or shutting down.
 *  @retval TW_EAGAIN     max_timers timers are alive.
 *  @retval TW_ENOMEM     out of memory or of timer slots.
 *  @retval TW_OK         *out holds the new timer's id (never 0).
 *
 *  On failure *out (if out is not NULL) is set to 0. */
TW_API int tw_timer_start(tw_runtime *rt, uint64_t delay_ns, uint64_t period_ns, tw_callback cb,
                          void *arg, tw_timer *out) TW_NOEXCEPT;

/** Everything a timer can be started with. Initialise with
 *  tw_timer_spec_init(), then set fields. */
typedef struct tw_timer_spec {
    uint32_t size;        /**< sizeof(tw_timer_spec); set by tw_timer_spec_init() */
    int32_t shard;        /**< shard hint: -1 (default) = the calling thread's own
                             shard, given to each thread round-robin on its
                             first start; >= 0: that shard, modulo the count */
    uint64_t deadline_ns; /**< absolute deadline of the first run, in ns on the
                             timer's clock (`clock`: by default CLOCK_MONOTONIC,
                             tw_now_ns()); a past one fires at once;
                             0 (default) = use delay_ns instead. A
                             CLOCK_MONOTONIC deadline (up to
                             TW_MAX_DELAY_NS) costs the start no clock
                             read: prefer it where the caller has "now"
                             already (one read for many starts) */
    uint64_t delay_ns;    /**< first run this long from now, if deadline_ns == 0
                             (the start reads CLOCK_MONOTONIC once -- for a
                             monotonic timer an upper bound of it, as in
                             tw_timer_start()) */
    uint64_t period_ns;   /**< 0 = one-shot (default); else the period (see period_policy) */
    tw_callback callback; /**< required */
    void *arg;            /**< passed to callback and release */
    tw_release release;   /**< NULL = none; see "Release" in the @ref tw_contract "contract" */
    /** Since 1.2. NULL (default) = the callback runs on the runtime's
        workers; else a queue of this runtime (tw_queue_create()): the
        callback, and after its last run the release hook, run only inside
        tw_queue_run() of that queue, on the thread calling it. */
    tw_queue *queue;
    /** Since 1.3. A periodic timer's policy when a run overruns its period
        (ignored for a one-shot): TW_PERIOD_SKIP (0, default), TW_PERIOD_DELAY
        or TW_PERIOD_BURST; any other value is TW_EINVAL. */
    uint32_t period_policy;
    /** Since 1.3. The clock deadline_ns, delay_ns and tw_timer_reset_at()
        deadlines are on, and "never early" is judged against:
        TW_CLOCK_MONOTONIC (0, default), TW_CLOCK_BOOTTIME or
        TW_CLOCK_REALTIME (see tw_now_ns_clock()); any other value is
        TW_EINVAL. */
    int32_t clock;
    /** Since 1.3. How late the callback may run: it runs in [deadline,
        deadline + leeway_ns + the usual lateness], never before the
        deadline. Timers whose windows overlap share a wheel slot and a
        wake-up (the deadline is rounded up to the coarsest aligned tick
        boundary inside the window; a leeway under one tick does nothing).
        0 (default) = exact to the tick; at most TW_MAX_DELAY_NS. */
    uint64_t leeway_ns;
    /** Since 1.3. The timer's group for tw_group_stop(); 0 (default) = none. */
    uint64_t group;
} tw_timer_spec;

/** @name Period policies (tw_timer_spec.period_policy, since 1.3)
 *  @{ */
/** Fixed rate (default): runs at first + k * period; a grid deadline that
 *  passes while a run is in progress (or while a due run has not started)
 *  is skipped and counted in tw_timer_info.missed. */
#define TW_PERIOD_SKIP 0u
/** Fixed delay: the next deadline is the end of this run plus the period. */
#define TW_PERIOD_DELAY 1u
/** Fixed rate with catch-up: grid deadlines that passed during a run are
 *  run after it, back to back (never overlapping), until caught up. What
 *  bounds a burst: it owes at most TW_BURST_MAX_OWED deadlines when a run
 *  looks (older ones are skipped and counted in tw_timer_info.missed); on
 *  the workers it runs on one worker until caught up -- a callback slower
 *  than its period never catches up and keeps that worker (use
 *  TW_PERIOD_SKIP); on a delivery queue each catch-up run counts against
 *  tw_queue_run()'s max, and the runs past it stay owed (the timer stays
 *  due) for the next call (since 1.7). */
#define TW_PERIOD_BURST 2u
/** @} */

/** Sets every field to its default (shard -1, others 0/NULL) and size to
 *  sizeof(tw_timer_spec) as this header defines it. Does nothing if spec is
 *  NULL. Inline (see "Struct initialisers" in the @ref tw_contract "contract");
 *  any thread; O(sizeof). */
#ifndef TW_NO_INLINE_INIT
static inline void tw_timer_spec_init(tw_timer_spec *spec) TW_NOEXCEPT {
    size_t i;
    if (spec == NULL) return;
    for (i = 0; i < sizeof *spec; ++i) ((unsigned char *)spec)[i] = 0;
    spec->size = (uint32_t)sizeof *spec;
    spec->shard = -1;
}
#else
TW_API void tw_timer_spec_init(tw_timer_spec *spec) TW_NOEXCEPT;
#endif

/** Starts the timer `spec` describes (spec->size: the size of this header's
 *  struct or of an earlier release's, 56 (1.0) or 64 (1.2); fields past the
 *  caller's size take their defaults). The release hook rule, from the
 *  return code alone: on TW_EINVAL or TW_EFORKED spec->release is NOT
 *  called (the call was rejected, arg is still the caller's); on any other
 *  return it is called exactly once -- before returning on failure, later
 *  (see "Release" in the @ref tw_contract "contract") on TW_OK. Returns, in this order:
 *  @retval TW_EINVAL     spec is NULL, or spec->size is invalid (as for tw_config);
 *                 rt, out or spec->callback is NULL; shard < -1;
 *                 spec->queue belongs to another runtime;
 *                 deadline_ns > INT64_MAX or more than TW_MAX_DELAY_NS in
 *                 the future; delay_ns or period_ns > TW_MAX_DELAY_NS;
 *                 period_policy or clock unknown; leeway_ns >
 *                 TW_MAX_DELAY_NS.
 *  @retval TW_EFORKED    in a fork() child of the process that created rt.
 *  @retval TW_ESHUTDOWN  as tw_timer_start() (hook called); or (since 1.5)
 *                 spec->queue's tw_queue_destroy() began while this start
 *                 was in flight (hook called; see tw_queue_destroy()).
 *  @retval TW_EAGAIN     as tw_timer_start() (hook called).
 *  @retval TW_ENOMEM     as tw_timer_start() (hook called).
 *  @retval TW_OK         *out holds the new timer's id.
 *
 *  On failure *out (if out is not NULL) is set to 0. */
TW_API int tw_timer_start_ex(tw_runtime *rt, const tw_timer_spec *spec, tw_timer *out) TW_NOEXCEPT;

/** Cancels a timer. Never blocks (no lock, no wait for a running callback).
 *  Returns, in this order:
 *  @retval TW_EINVAL     rt is NULL.
 *  @retval TW_EFORKED    in a fork() child of the process that created rt.
 *  @retval TW_ESHUTDOWN  the runtime is shut down.
 *  @retval TW_ENOENT     this call did not prevent a run: the timer already ran its
 *                 last run or is running it now, was already stopped, or id
 *                 is stale, random or 0.
 *  @retval TW_OK         cancelled: a one-shot timer had not started; a periodic
 *                 one will not start another run after this returns. If no
 *                 run is in progress the release hook has run inside this
 *                 call; otherwise it runs right after that run, on its
 *                 worker thread. */
TW_API int tw_timer_stop(tw_runtime *rt, tw_timer id) TW_NOEXCEPT;

/** As tw_timer_stop(), and in addition, when it returns, the callback is not
 *  running and will never run again, and the release hook has returned --
 *  whoever runs it: a worker after the last run, a concurrent stop call, or
 *  the runtime's shutdown --, so the caller may free what they use. Waits
 *  for a run or a release hook in progress (even if it then returns
 *  TW_ENOENT because that run was the last, or another call stopped it). Called from the
 *  same timer's callback it does not wait for itself. Two callbacks that
 *  stop_sync each other wait for each other forever: don't. Returns as
 *  tw_timer_stop(). */
TW_API int tw_timer_stop_sync(tw_runtime *rt, tw_timer id) TW_NOEXCEPT;

/** Re-arms a pending timer to fire delay_ns from now (a periodic timer: its
 *  next run then, then every period; "now" for a monotonic timer as in
 *  tw_timer_start(): never before the call). From a one-shot timer's own running
 *  callback it re-arms that timer. A boot-time or wall-clock timer's new
 *  deadline on its clock and its place in the wheel change together (a
 *  query, a run ending, a clock step never see one without the other);
 *  its clock is read inside the call, so a clock step during the call is
 *  followed. A stale id changes nothing: no timer's state or deadline
 *  (also not that of the timer now in its slot). Returns, in this order:
 *  @retval TW_EINVAL     rt is NULL; delay_ns > TW_MAX_DELAY_NS.
 *  @retval TW_EFORKED    in a fork() child of the process that created rt.
 *  @retval TW_ESHUTDOWN  the runtime is shut down or shutting down.
 *  @retval TW_ENOENT     the timer is not pending (fired, stopped, stale, 0).
 *  @retval TW_OK         re-armed. */
TW_API int tw_timer_reset(tw_runtime *rt, tw_timer id, uint64_t delay_ns) TW_NOEXCEPT;

/** As tw_timer_reset(), to the absolute deadline deadline_ns on the timer's
 *  clock (tw_timer_spec.clock; for the default, CLOCK_MONOTONIC, tw_now_ns()
 *  nanoseconds; a past one fires at once, rounded up to the tick). Since 1.3 (TICKWHEEL_1.3). Returns, in this order:
 *  @retval TW_EINVAL     rt is NULL; deadline_ns > INT64_MAX, or more than
 *                 TW_MAX_DELAY_NS in the future.
 *  @retval TW_EFORKED    in a fork() child of the process that created rt.
 *  @retval TW_ESHUTDOWN  the runtime is shut down or shutting down.
 *  @retval TW_ENOENT     the timer is not pending (fired, stopped, stale, 0).
 *  @retval TW_OK         re-armed. */
TW_API int tw_timer_reset_at(tw_runtime *rt, tw_timer id, uint64_t deadline_ns) TW_NOEXCEPT;

/* ---- batches (since 1.4, TICKWHEEL_1.4) --------------------------------------- */
/** @name Batches
 *  Start, stop or re-arm many timers in one call. Each acts as the single
 *  call (tw_timer_start_ex(), tw_timer_stop(), tw_timer_reset()) on every
 *  element, in order, with the same guarantees -- never early, stale ids
 *  answered TW_ENOENT and never acted on, every release hook exactly once
 *  by the rule of its element's code -- and a failing element never stops
 *  the batch. Each returns how many elements succeeded (>= 0); a negative
 *  return is an error of the call itself, checked in the order listed,
 *  before any element is acted on (no hook runs, no timer changes):
 *   - TW_EINVAL: rt is NULL; an array is NULL while n > 0; n > INT_MAX;
 *     (start) specs[0].size is not a valid tw_timer_spec size or not a
 *     multiple of 8; (reset) delay_ns > TW_MAX_DELAY_NS. Nothing is written.
 *   - TW_EFORKED: in a fork() child of the process that created rt (also
 *     for n == 0). out[i] (start) is set to 0 and results[i] (stop,
 *     reset) to TW_EFORKED.
 *  Otherwise n == 0 returns 0 (also with NULL arrays).
 *
 *  Any thread, also from callbacks and release hooks. What a batch saves
 *  against n single calls -- per call instead of per timer: the records of
 *  up to 64 elements are prefetched before the first locked instruction
 *  (their cache misses overlap instead of each waiting behind the previous
 *  CAS); one inbox message block and at most one wake-up per shard (per
 *  256 messages); one clock reading (start, reset); one update of each
 *  counter; (start) one registration in the shutdown guard, and free
 *  records popped several at a time. Measured in the README ("Batches").
 *  @{ */

/** Starts one timer per spec, as tw_timer_start_ex() would, in order: out[i]
 *  receives the new id, or 0 if spec i failed. The array's stride is
 *  specs[0].size: the specs are all of one layout (56 for 1.0, 64 for 1.2,
 *  sizeof(tw_timer_spec) for 1.3 and later, or larger with zeroed tails
 *  as for tw_timer_start_ex()). A spec whose own size field differs from
 *  specs[0].size is refused (out[i] = 0, TW_EINVAL: its hook is not
 *  called) and the batch goes on at the same stride. The release hook
 *  rule of each element is tw_timer_start_ex()'s: a spec refused with
 *  TW_EINVAL (or the whole call, with a negative return) never has its
 *  hook called; every other failing spec (TW_ESHUTDOWN, TW_EAGAIN,
 *  TW_ENOMEM) has its hook called exactly once before this call returns --
 *  after every spec was tried, in spec order; every started timer's later,
 *  as for tw_timer_start_ex(). Delays count from one CLOCK_MONOTONIC reading
 *  taken when the call begins (per clock used: boot-time and wall-clock
 *  specs read theirs once too), so no deadline is earlier than with n
 *  single calls made before it returned.
 *  @return the number of timers started (out[i] != 0), or TW_EINVAL /
 *          TW_EFORKED for the call (see "Batches" above). */
TW_API int tw_timer_start_n(tw_runtime *rt, const tw_timer_spec *specs, size_t n, tw_timer *out) TW_NOEXCEPT;

/** Stops every timer of ids[0..n), as tw_timer_stop() would, in order:
 *  results[i] (if results is not NULL) receives that call's code -- TW_OK,
 *  TW_ENOENT (0, random, stale or not pending), or TW_ESHUTDOWN (every
 *  element, when the runtime is shut down as the call begins; a shutdown
 *  that completes during the call cancels the later timers itself: they are
 *  TW_ENOENT). Each stopped timer's release hook runs as tw_timer_stop()'s
 *  does: inside this call, before the next element is stopped (or, if a run
 *  is in progress, right after that run on its worker); a
 *  tw_timer_stop_sync() of that element waiting for its hook returns as
 *  soon as the hook did, before the next element's hook runs (which may
 *  wait for it). Never blocks.
 *  @return the number of TW_OK elements, or TW_EINVAL / TW_EFORKED for the
 *          call (see "Batches" above). */
TW_API int tw_timer_stop_n(tw_runtime *rt, const tw_timer *ids, size_t n, int *results) TW_NOEXCEPT;

/** Re-arms every timer of ids[0..n) to fire delay_ns from now, as
 *  tw_timer_reset() would, in order, "now" being one CLOCK_MONOTONIC
 *  reading taken when the call begins (for a boot-time or wall-clock timer,
 *  a reading of its clock taken for that element, as tw_timer_reset()
 *  does; 1.4 read it once per call): never early. results[i] (if results is not
 *  NULL) receives that call's code: TW_OK, TW_ENOENT, or TW_ESHUTDOWN (the
 *  runtime is shut down or shutting down). A delay_ns above
 *  TW_MAX_DELAY_NS is TW_EINVAL for the whole call (nothing re-armed,
 *  nothing written), not per element.
 *  @return the number of TW_OK elements, or TW_EINVAL / TW_EFORKED for the
 *          call (see "Batches" above). */
TW_API int tw_timer_reset_n(tw_runtime *rt, const tw_timer *ids, size_t n, uint64_t delay_ns,
                            int *results) TW_NOEXCEPT;
/** @} */

/* ---- query ------------------------------------------------------------------- */
/** @name Timer states (tw_timer_info.state, since 1.3)
 *  @{ */
#define TW_TIMER_PENDING 1 /**< waiting for its deadline */
#define TW_TIMER_DUE 2     /**< its deadline has passed; the callback has not started yet */
#define TW_TIMER_RUNNING 3 /**< its callback is running now */
/** @} */

/** What tw_timer_query() tells about a live timer. Since 1.3. Initialise
 *  with tw_timer_info_init(). */
typedef struct tw_timer_info {
    uint32_t size;        /**< in: sizeof(tw_timer_info) (tw_timer_info_init sets it);
                             out: the bytes filled (the library's size, capped by the caller's) */
    int32_t state;        /**< TW_TIMER_PENDING, TW_TIMER_DUE or TW_TIMER_RUNNING */
    int32_t shard;        /**< the shard it lives on (below tw_stats.shards) */
    int32_t clock;        /**< the timer's clock (TW_CLOCK_*): the one deadline_ns is on */
    /** The next deadline on the timer's clock (ns; rounded up to the resolution,
        exact for a TW_CLOCK_BOOTTIME or TW_CLOCK_REALTIME timer),
        without the leeway; 0 if none is set: a one-shot whose callback is
        running (unless it re-armed itself), a TW_PERIOD_DELAY timer until
        its run ends. For a due or running fixed-rate timer: the next grid
        deadline it is filed for -- the one after the deadline being served,
        or, while a TW_PERIOD_BURST timer runs deadlines it owes back to
        back, the one after all of them. */
    uint64_t deadline_ns;
    uint64_t period_ns;   /**< 0 for a one-shot; rounded up to the resolution */
    uint64_t leeway_ns;   /**< as started */
    uint64_t group;       /**< as started; 0 = none */
    uint64_t runs;        /**< runs started so far, the one in progress included */
    /** Grid deadlines skipped so far (TW_PERIOD_SKIP; TW_PERIOD_BURST: the
        owed ones beyond TW_BURST_MAX_OWED, since 1.7; 0 for
        TW_PERIOD_DELAY): runs + missed - 1 is the index, from 0, of the
        grid deadline the current (or last) run serves. */
    uint64_t missed;
} tw_timer_info;

/** Sets every field to 0 and size to sizeof(tw_timer_info) as this header
 *  defines it. Does nothing if info is NULL. Inline; any thread. */
static inline void tw_timer_info_init(tw_timer_info *info) TW_NOEXCEPT {
    size_t i;
    if (info == NULL) return;
    for (i = 0; i < sizeof *info; ++i) ((unsigned char *)info)[i] = 0;
    info->size = (uint32_t)sizeof *info;
}

/** Reads a live timer's state, next deadline, period, leeway, group and run
 *  counters into *out. From inside the timer's own callback it reports
 *  TW_TIMER_RUNNING with runs and missed current (the skips before this
 *  run already counted), so a callback knows what it missed. The state and
 *  the deadline are of one moment: a reset that lands during the call is
 *  either wholly in the answer or not at all (since 1.7; before, a boot-time
 *  or wall-clock timer could show the old state with the new deadline).
 *  Never blocks; lock-free (a few atomic loads and a clock read, read again
 *  a bounded number of times while a reset moves them); any thread. Since 1.3
 *  (TICKWHEEL_1.3). Returns, in this order:
 *  @retval TW_EINVAL     rt or out is NULL; out->size < 64 or > 4096.
 *  @retval TW_EFORKED    in a fork() child of the process that created rt.
 *  @retval TW_ENOENT     id is stale, 0, random, or its timer was released
 *                 (fired its last run, stopped, cancelled by shutdown).
 *  @retval TW_OK         *out filled (bytes past the library's size zeroed). */
TW_API int tw_timer_query(tw_runtime *rt, tw_timer id, tw_timer_info *out) TW_NOEXCEPT;

/* ---- groups ------------------------------------------------------------------ */
/** tw_group_stop() flag: also wait as tw_timer_stop_sync() does. */
#define TW_SYNC 1u

/** Stops every live timer started with tw_timer_spec.group == group, as
 *  tw_timer_stop() called on each (with TW_SYNC in flags: as
 *  tw_timer_stop_sync(), which also waits for a running callback of the
 *  group and its release hook; a running periodic timer counts as stopped,
 *  a running one-shot -- already on its last run -- does not; if its
 *  callback re-arms it, the re-armed timer stays in its group, for a later
 *  call). A timer whose start returned before this call began is stopped;
 *  one started concurrently with it is either stopped or left for a later
 *  call, never lost. Two group stops of one group at once: each returns
 *  only once every timer it must stop is stopped (a later call also stops
 *  what an earlier one took and has not reached yet; each timer is counted
 *  by one of them); neither waits for the other. Cost: O(shards + the group's timers): per-shard indexes, one short
 *  lock per shard, never a scan of all timers. Any thread, also from a
 *  callback (with TW_SYNC it does not wait for its own timer). Since 1.3
 *  (TICKWHEEL_1.3). Returns:
 *  @retval TW_EINVAL     rt is NULL; group is 0; flags has a bit other than TW_SYNC.
 *  @retval TW_EFORKED    in a fork() child of the process that created rt.
 *  @retval >=0           how many timers it stopped (how many of those
 *                 tw_timer_stop() calls would have returned TW_OK); 0 after
 *                 shutdown. */
TW_API int64_t tw_group_stop(tw_runtime *rt, uint64_t group, unsigned flags) TW_NOEXCEPT;

/* ---- delivery queues ------------------------------------------------------------ */
/** @name Delivery queues (since 1.2, symbol version TICKWHEEL_1.2)
 *  A timer started with tw_timer_spec.queue = q runs its callback -- and,
 *  after its last run, its release hook -- only inside tw_queue_run(q, ...),
 *  on the thread that calls it: an epoll/poll loop (tw_queue_fd()), a
 *  libuv or asyncio loop, any thread of the program's. Every other rule
 *  holds unchanged: never early (against the caller's CLOCK_MONOTONIC),
 *  runs of one timer never overlap (a periodic one skips missed periods
 *  as on the workers), and stop is exact: tw_timer_stop() of a timer that
 *  is due (the fd is readable) but not yet run returns TW_OK, its callback
 *  never runs and its release hook runs once, inside the stop call.
 *  tw_timer_stop_sync() from another thread waits for a run in progress on
 *  the queue's thread; from inside its own callback it does not wait.
 *  tw_timer_reset() of a due, not-yet-run timer re-arms it (it leaves the
 *  queue). A runtime may have several queues (up to 8191 at once), a
 *  process several runtimes.
 *  @{ */

/** Creates a delivery queue of rt, with its eventfd. Any thread; O(1).
 *  Returns, in this order:
 *  @retval TW_EINVAL     rt or out is NULL.
 *  @retval TW_EFORKED    in a fork() child of the process that created rt.
 *  @retval TW_ESHUTDOWN  the runtime is shut down or shutting down.
 *  @retval TW_ENOMEM     out of memory, of file descriptors (EMFILE/ENFILE)
 *                 or of queue slots (8191 alive).
 *  @retval TW_OK         *out holds the queue.
 *  On failure *out (if out is not NULL) is set to NULL. Ordered against
 *  tw_runtime_shutdown() like a start (since 1.5): a create that races a
 *  shutdown either fails with TW_ESHUTDOWN or returns a queue that the
 *  shutdown closes (its fd readable for good, tw_queue_run() TW_ESHUTDOWN). */
TW_API int tw_queue_create(tw_runtime *rt, tw_queue **out) TW_NOEXCEPT;

/** The queue's Linux eventfd. While q is open it polls readable
 *  (POLLIN/EPOLLIN) iff at least one callback of q is due and not yet run
 *  (tw_queue_stats.due > 0): level-triggered as poll()/epoll see it
 *  (without EPOLLET) -- not readable for an empty queue, before the first
 *  deadline, or once tw_queue_run() ran everything due (a stop or reset
 *  that takes back the last due timer also clears it; a TW_PERIOD_BURST
 *  timer whose catch-up a run left owed, past its max, keeps it readable);
 *  with EPOLLET each batch of newly due timers is a new edge. Once the
 *  runtime is shut down (q is closed) it stays readable for good, while
 *  tw_queue_stats.due is 0, so a loop polling it calls tw_queue_run() and
 *  gets TW_ESHUTDOWN. Owned by q: never read, write or
 *  close it; it is closed by tw_queue_destroy() / tw_runtime_destroy().
 *  Any thread; O(1). Returns the fd (>= 0), or TW_EINVAL (negative) for
 *  q NULL. */
TW_API int tw_queue_fd(const tw_queue *q) TW_NOEXCEPT;

/** Runs up to max due callbacks of q on the calling thread, in deadline
 *  order (ties: the order they became due), and returns how many ran.
 *  max bounds the callbacks, whatever the timers: each run of a
 *  TW_PERIOD_BURST timer's catch-up counts as one, and those past max stay
 *  owed -- the timer stays due, the fd readable -- and run, in their
 *  deadline order, in the next calls (since 1.7; before, one due BURST
 *  timer ran every owed deadline inside one call, past max). Each callback
 *  gives one lateness sample (tw_queue_stats.run_*, tw_stats.lateness_*),
 *  measured from the deadline it serves.
 *  With none due it waits up to timeout_ns: 0 = not at all; > 0 = that
 *  long, any value up to INT64_MAX (the whole timeout if nothing becomes
 *  due; one that reaches past CLOCK_MONOTONIC's range, ~292 years from
 *  boot, waits as < 0 does; since 1.7: before, a timeout above about
 *  INT64_MAX - the clock's reading overflowed and returned 0 at once);
 *  < 0 = until one is due (also one started later by another thread) or
 *  the runtime shuts down.
 *  Once some are due it runs them (up to max) and returns without waiting
 *  for more. Several threads may run one queue at once (its callbacks then
 *  run on all of them; runs of one timer still never overlap). A callback
 *  may run another queue (nesting). Returns, in this order:
 *  @retval TW_EINVAL     q is NULL; max is 0. (A destroyed q is freed:
 *                 calling this on it is undefined; a thread already
 *                 waiting inside when it is destroyed gets TW_ESHUTDOWN.)
 *  @retval TW_EFORKED    in a fork() child of the process that created q.
 *  @retval TW_EDEADLK    called from inside one of q's own callbacks or
 *                 release hooks (at any depth of nesting).
 *  @retval TW_ESHUTDOWN  the runtime is shut down (or shut down while this
 *                 call waited, also from inside a callback of a worker, of
 *                 another queue or of an advance: shutdown closes every
 *                 queue before it waits for anything), or q was destroyed
 *                 while this call waited, and no callback ran.
 *  @retval >= 0          the number of callbacks run (at most INT_MAX).
 *  A timer reset while due and not yet run leaves the queue: only its run
 *  at the new deadline happens, in its place in deadline order, its
 *  lateness counted from that deadline (since 1.5; before, its old
 *  delivery could run it early in the order). */
TW_API int tw_queue_run(tw_queue *q, size_t max, int64_t timeout_ns) TW_NOEXCEPT;

/** Destroys q: every timer still bound to it is cancelled as by
 *  tw_timer_stop() (counted in tw_stats.stopped; release hooks run once,
 *  on the calling thread), callbacks of q in progress on other threads are
 *  waited for, threads waiting in tw_queue_run(q) return, and q and its fd
 *  are freed. No thread may start a timer on q, or enter tw_queue_run(q),
 *  once this is called; using q after it returned is undefined (like
 *  free()). A start on q already in flight when this is called (it read
 *  q before) is ordered against it (since 1.5): it either fails with
 *  TW_ESHUTDOWN (its release hook runs once, its callback never) or
 *  returns TW_OK with a timer this call waits for and cancels; its
 *  callback never runs in a queue created later in q's place. After tw_runtime_shutdown() it only frees q (the shutdown
 *  cancelled its timers); in a fork() child of the process that created q
 *  it frees it without running any hook. tw_runtime_destroy() destroys the
 *  queues still alive. Cost: O(timer slots of the runtime). Returns:
 *  @retval TW_EINVAL   q is NULL.
 *  @retval TW_EDEADLK  called from inside one of q's callbacks or release
 *               hooks: nothing done.
 *  @retval TW_OK       destroyed. */
TW_API int tw_queue_destroy(tw_queue *q) TW_NOEXCEPT;

/** A snapshot of a queue's counters (tw_queue_get_stats()). */
typedef struct tw_queue_stats {
    uint32_t size;       /**< in: sizeof(tw_queue_stats); out: bytes filled */
    uint32_t runners;    /**< threads inside tw_queue_run(q) now */
    /** timers due and not yet run now (a BURST timer owing several
        catch-up runs counts once). While q is open its fd is readable iff
        due > 0; once q is closed (the runtime shut down) due is 0 and the
        fd stays readable for good (see tw_queue_fd()). */
    uint64_t due;
    /** due timers handed to the queue (one per deadline that came due; a
        stop or reset may take one back before it runs) */
    uint64_t delivered;
    uint64_t ran;        /**< callbacks run by tw_queue_run() */
    /** @name Lateness
     *  From the deadline (rounded up to the tick) to the fd becoming
     *  readable (signal_*: the runtime's part) and to the callback's start
     *  (run_*: includes the time the program took to call tw_queue_run()),
     *  in ns; log-linear histograms as in tw_stats. */
    /** @{ */
    uint64_t signal_p50_ns;   /**< deadline to readable: median */
    uint64_t signal_p99_ns;   /**< deadline to readable: 99th percentile */
    uint64_t signal_p999_ns;  /**< deadline to readable: 99.9th percentile */
    uint64_t signal_max_ns;   /**< deadline to readable: the largest */
    uint64_t signal_samples;  /**< deliveries measured */
    uint64_t run_p50_ns;      /**< deadline to callback start: median */
    uint64_t run_p99_ns;      /**< deadline to callback start: 99th percentile */
    uint64_t run_p999_ns;     /**< deadline to callback start: 99.9th percentile */
    uint64_t run_max_ns;      /**< deadline to callback start: the largest */
    uint64_t run_samples;     /**< runs measured */
    /** @} */
} tw_queue_stats;

/** Sets every field to 0 and size to sizeof(tw_queue_stats) as this
 *  header defines it, ready for tw_queue_get_stats(). Does nothing if st
 *  is NULL. Inline; any thread. Since 1.5. */
static inline void tw_queue_stats_init(tw_queue_stats *st) TW_NOEXCEPT {
    size_t i;
    if (st == NULL) return;
    for (i = 0; i < sizeof *st; ++i) ((unsigned char *)st)[i] = 0;
    st->size = (uint32_t)sizeof *st;
}

/** Fills *out as tw_runtime_stats() does (set out->size first, e.g. with tw_queue_stats_init(); it comes
 *  back as the bytes filled). Any thread, also from a callback and after
 *  shutdown (final values). Returns TW_EINVAL (q or out NULL, out->size
 *  below the 1.2 size or above 4096), TW_EFORKED (in a fork() child), or
 *  TW_OK. */
TW_API int tw_queue_get_stats(tw_queue *q, tw_queue_stats *out) TW_NOEXCEPT;
/** @} */

/* ---- observation ---------------------------------------------------------------- */
/** The MACHINE's CLOCK_MONOTONIC in nanoseconds -- whatever the runtime:
 *  the scale of tw_timer_spec.deadline_ns, but not a manual runtime's
 *  virtual clock (TW_CONFIG_MANUAL_CLOCK), which it does not follow. To
 *  compute a deadline, read the runtime's own clock:
 *  `spec.deadline_ns = tw_runtime_now_ns(rt, TW_CLOCK_MONOTONIC) + 30000000000u;`
 *  is 30 s from now on a real and on a manual runtime, where
 *  `tw_now_ns() + 30 s` fires at the next tw_runtime_advance() of a manual
 *  one (its clocks stand still from creation). Any thread; a vDSO read. */
TW_API uint64_t tw_now_ns(void) TW_NOEXCEPT;

/* ---- clocks (since 1.3, TICKWHEEL_1.3) ---------------------------------------- */
/** @name Clocks (tw_timer_spec.clock, tw_now_ns_clock(), tw_runtime_now_ns())
 *  @{ */
/** CLOCK_MONOTONIC (default): stops while the machine is suspended, never jumps. */
#define TW_CLOCK_MONOTONIC 0
/** CLOCK_BOOTTIME: as monotonic, but counts the time the machine was
 *  suspended (a 30 s keepalive fires 30 s of real time later, asleep or not). */
#define TW_CLOCK_BOOTTIME 1
/** CLOCK_REALTIME, the wall clock: a timer follows clock changes -- set
 *  forward past its deadline it fires then; set back, it waits for the wall
 *  clock to reach its deadline again. A change is noticed within one pass of
 *  its shard (at most 100 ms), a resume from suspend likewise. */
#define TW_CLOCK_REALTIME 2
/** @} */

/** The MACHINE's clock `clock` (TW_CLOCK_*) in nanoseconds; 0 for an unknown
 *  clock. Not a manual runtime's virtual clock: compute deadlines from
 *  tw_runtime_now_ns() (see tw_now_ns()). Any thread; a vDSO read. */
TW_API uint64_t tw_now_ns_clock(int clock) TW_NOEXCEPT;

/** Clock `clock` of runtime rt in nanoseconds: the machine's for a real
 *  runtime, the virtual one for a runtime created with
 *  TW_CONFIG_MANUAL_CLOCK. THE "now" to compute absolute deadlines from
 *  (tw_timer_spec.deadline_ns, tw_timer_reset_at()): right on either kind
 *  of runtime, e.g.
 *  `tw_timer_reset_at(rt, id, tw_runtime_now_ns(rt, TW_CLOCK_MONOTONIC) + 30000000000u)`.
 *  0 for NULL rt, an unknown clock, or in a fork() child. Any thread. */
TW_API uint64_t tw_runtime_now_ns(tw_runtime *rt, int clock) TW_NOEXCEPT;

/** A manual runtime (TW_CONFIG_MANUAL_CLOCK): moves its three clocks forward
 *  by exactly ns and runs, on the calling thread, every callback that falls
 *  due, in deadline order (deadlines are rounded up to the resolution; ties
 *  in start order), stepping the clocks to each deadline as it goes:
 *  timers that callbacks start (a deadline inside the window, even one
 *  already past, runs in this advance), stop or re-arm are honoured. A
 *  periodic timer crossed k times: TW_PERIOD_SKIP runs once with missed
 *  += k - 1 (judged against the end of the window; the next deadline stays
 *  on the grid), TW_PERIOD_BURST k times, TW_PERIOD_DELAY as its runs fall.
 *  The clocks stop where any reading plus twice TW_MAX_DELAY_NS still fits
 *  in an int64_t (the wall clock at 2^63 - 2^61 ns after 1970, in the year
 *  2189; the others as far on): an advance past it runs what falls due up
 *  to there and leaves the clocks there (since 1.7; before, they saturated at
 *  INT64_MAX and "now + delay" overflowed: a timer started then fired at
 *  once).
 *  Queue-bound timers are delivered to their queue (tw_queue_run() runs
 *  them). Returns when those callbacks have returned. One advance at a time
 *  (concurrent callers take turns); other threads may start, stop and reset
 *  meanwhile. Returns, in this order:
 *  @retval TW_EINVAL     rt is NULL; rt has no manual clock; ns > TW_MAX_DELAY_NS.
 *  @retval TW_EFORKED    in a fork() child of the process that created rt.
 *  @retval TW_ESHUTDOWN  the runtime is shut down or shutting down.
 *  @retval TW_EDEADLK    called from inside one of rt's callbacks (at any depth).
 *  @retval >=0           success: the number of callbacks it ran (capped at INT_MAX). */
TW_API int tw_runtime_advance(tw_runtime *rt, uint64_t ns) TW_NOEXCEPT;

/** A snapshot of a runtime's counters (totals since creation). */
typedef struct tw_stats {
    uint32_t size;                  /**< in: sizeof(tw_stats); out: bytes filled */
    uint32_t shards;                /**< shard count */
    uint32_t workers;               /**< callbacks that can run at once (see "oneTBB") */
    uint32_t shut_down;             /**< 1 once the runtime is shut down, else 0 */
    uint64_t resolution_ns;         /**< the tick */
    uint64_t pending;               /**< timers filed in the shards' wheels (sum) */
    uint64_t inbox;                 /**< requests queued to the shards (sum, approx.) */
    uint64_t live;                  /**< started and not yet released */
    /** timers started (start calls that returned TW_OK) */
    uint64_t started;
    uint64_t fired;                 /**< callback runs */
    uint64_t stopped;               /**< stop calls that returned TW_OK */
    uint64_t reset;                 /**< reset calls that returned TW_OK */
    uint64_t callback_exceptions;   /**< exceptions raised by callbacks: C++ ones the runtime caught, plus tw_runtime_count_callback_exception() */
    /** timers still pending when the runtime was shut down (cancelled by it) */
    uint64_t cancelled_at_shutdown;
    /** @name Lateness
     *  Callback start minus deadline, in ns; percentiles from a log-linear
     *  histogram (8 buckets per power of two, reported at the midpoint: at most 6.25% relative error). */
    /** @{ */
    uint64_t lateness_p50_ns;       /**< median (50th percentile) */
    uint64_t lateness_p99_ns;       /**< 99th percentile */
    /** 99.9th percentile */
    uint64_t lateness_p999_ns;
    /** the largest lateness seen */
    uint64_t lateness_max_ns;
    /** callback runs measured (the histogram's sample count) */
    uint64_t lateness_samples;
    /** @} */
    /** @name Lateness by stage (since 1.7)
     *  Where each run's lateness comes from, in two stages that add up to
     *  it -- driver: deadline (rounded up to the tick) to the moment the
     *  timer's shard handed it over, to the workers or to its delivery
     *  queue (a starved or sleeping shard driver); wait: handed over to the
     *  callback's start (every worker busy; for a queue's timer, the wait
     *  for tw_queue_run()) -- and the callbacks' duration (run), in ns;
     *  histograms as the lateness's. Every run counts once in each: driver
     *  and wait have lateness_samples samples, run has run_duration_samples
     *  (the runs that returned). A manual runtime's driver stage is 0. */
    /** @{ */
    uint64_t driver_lateness_p50_ns;  /**< driver stage: median */
    uint64_t driver_lateness_p99_ns;  /**< driver stage: 99th percentile */
    uint64_t driver_lateness_p999_ns; /**< driver stage: 99.9th percentile */
    uint64_t driver_lateness_max_ns;  /**< driver stage: the largest */
    uint64_t wait_lateness_p50_ns;    /**< wait stage: median */
    uint64_t wait_lateness_p99_ns;    /**< wait stage: 99th percentile */
    uint64_t wait_lateness_p999_ns;   /**< wait stage: 99.9th percentile */
    uint64_t wait_lateness_max_ns;    /**< wait stage: the largest */
    uint64_t run_duration_p50_ns;     /**< callback duration: median */
    uint64_t run_duration_p99_ns;     /**< callback duration: 99th percentile */
    uint64_t run_duration_p999_ns;    /**< callback duration: 99.9th percentile */
    uint64_t run_duration_max_ns;     /**< the longest callback */
    uint64_t run_duration_samples;    /**< callbacks that returned */
    /** @} */
    /** @name Saturation and memory (since 1.7): gauges, read now */
    /** @{ */
    uint64_t workers_busy;          /**< callbacks running now on the runtime's workers */
    uint64_t waiting_for_worker;    /**< due timers handed to the workers and not taken by one yet */
    /** callbacks running now on any thread (workers, tw_queue_run(), an
        advance; a callback running another's counts once) */
    uint64_t callbacks_running;
    /** how long the longest-running callback now has been running (0: none) */
    uint64_t oldest_run_age_ns;
    /** timer records resident now (64 bytes each): those ever allocated
        less those given back to the kernel after a peak */
    uint64_t slots;
    /** bytes of timer records and their side arrays resident now (an upper bound) */
    uint64_t resident_bytes;
    /** @} */
} tw_stats;

/** Sets every field to 0 and size to sizeof(tw_stats) as this header
 *  defines it, ready for tw_runtime_stats(). Does nothing if st is NULL.
 *  Inline (see "Struct initialisers" in the @ref tw_contract "contract");
 *  any thread. Since 1.5. */
static inline void tw_stats_init(tw_stats *st) TW_NOEXCEPT {
    size_t i;
    if (st == NULL) return;
    for (i = 0; i < sizeof *st; ++i) ((unsigned char *)st)[i] = 0;
    st->size = (uint32_t)sizeof *st;
}

/** Fills *out. Set out->size = sizeof(tw_stats) first (tw_stats_init()); on return it holds
 *  the number of bytes filled (min of the caller's and the library's size;
 *  bytes beyond that, up to the caller's size, are zeroed). Works after
 *  tw_runtime_shutdown() too (final counters). Returns, in this order:
 *  @retval TW_EINVAL  rt or out is NULL; out->size below
 *              sizeof(tw_stats) of ABI 1 or above 4096.
 *  @retval TW_EFORKED in a fork() child of the process that created rt.
 *  @retval TW_ENOMEM  out of memory.
 *  @retval TW_OK      filled. */
TW_API int tw_runtime_stats(tw_runtime *rt, tw_stats *out) TW_NOEXCEPT;

/** One shard's share of tw_stats.pending and .inbox. Either out pointer may
 *  be NULL. Returns TW_EINVAL (rt NULL, shard >= shard count), TW_EFORKED
 *  (in a fork() child), TW_ENOMEM, or TW_OK. Works after shutdown, like
 *  tw_runtime_stats. */
TW_API int tw_runtime_shard_stats(tw_runtime *rt, uint32_t shard, uint64_t *pending,
                                  uint64_t *inbox) TW_NOEXCEPT;

/** Writes the runtime's metrics -- counters, gauges and the callback-lateness
 *  histogram -- in the Prometheus text exposition format 0.0.4 (the body
 *  of a /metrics response, Content-Type "text/plain; version=0.0.4"):
 *  metric names prefixed "tickwheel_"; counters end in "_total"
 *  (tickwheel_timers_started_total, ..._fired_total, ..._stopped_total,
 *  ...); gauges for live and pending timers, timer slots, and per shard
 *  (tickwheel_shard_pending{shard="0"}, tickwheel_shard_inbox{...});
 *  the histogram tickwheel_callback_lateness_seconds with fixed buckets
 *  from 5 us to 10 s (exact counts), "_sum" in seconds and "_count" equal
 *  to tw_stats.lateness_samples; one "# HELP" and one "# TYPE" line before
 *  each family's samples; no timestamps; every line ends in '\n'.
 *
 *  Since 1.5: every series carries the label runtime="<name>" (first;
 *  tw_config.name or the made-up one, escaped as the format says:
 *  backslash, double quote and newline), so several runtimes in one
 *  process never emit the same series; each live delivery queue's
 *  statistics are exported, labelled queue="<n>" (n: the queue's slot,
 *  unique among the runtime's live queues): tickwheel_queue_due,
 *  tickwheel_queue_runners, tickwheel_queue_delivered_total,
 *  tickwheel_queue_ran_total and the p99 and max of its signal and run
 *  lateness (tickwheel_queue_{signal,run}_lateness_{p99,max}_seconds);
 *  and tickwheel_build_info{runtime="...",version="1.5.0"} 1. Since 1.7:
 *  the histogram family tickwheel_callback_stage_seconds{stage="driver"|
 *  "wait"|"run"} (the lateness's two stages and the callbacks' duration,
 *  as tw_stats has them) and tickwheel_queue_callback_stage_seconds{queue,
 *  stage} per live queue; the gauges tickwheel_workers_busy,
 *  tickwheel_waiting_for_worker, tickwheel_callbacks_running,
 *  tickwheel_oldest_callback_age_seconds and tickwheel_timer_resident_bytes
 *  (tickwheel_timer_slots counts the records resident); a name's bytes that
 *  are not valid UTF-8 are each replaced by U+FFFD in the label. Two
 *  runtimes' texts concatenated form one exposition that Prometheus and
 *  the prometheus_client parser accept (each text repeats the "# HELP" and
 *  "# TYPE" lines of its families, identically; the series stay distinct);
 *  for a text with each family once, use tw_runtimes_metrics().
 *
 *  Like snprintf(): writes at most cap - 1 bytes of the text and a
 *  terminating NUL into buf (nothing when cap is 0), and returns the
 *  length of the WHOLE text (without the NUL), whatever cap is: the text
 *  was truncated iff the result is >= cap. So buf NULL with cap 0 asks
 *  for the size, and cap 1 writes an empty string. The text grows as
 *  counters grow: between a sizing call and the real one allow some slack
 *  (say 1 KB), and retry while the result is >= cap.
 *
 *  Any thread, concurrently, also from inside a callback or a release
 *  hook, and after tw_runtime_shutdown() (the final values). It reads
 *  atomics: no lock of the runtime is taken (only oneTBB's brief internal
 *  one, for the worker count) and no shard or worker is blocked or
 *  delayed, so it can be scraped often. Each value is a
 *  recent one, not one linearizable snapshot; read at quiescence they
 *  equal tw_runtime_stats(). Cost: O(shards + queues) plus a fixed part;
 *  about 12 KB of text plus 120 bytes per shard and 8 KB per live
 *  delivery queue (each queue's counters are read under that queue's own
 *  brief lock), built in a heap-allocated buffer and then copied. Returns, in this order:
 *   TW_EINVAL   rt is NULL; buf is NULL and cap > 0.
 *   TW_EFORKED  in a fork() child of the process that created rt.
 *   TW_ENOMEM   out of memory, or the text is longer than INT_MAX bytes.
 *   >= 0        the length of the whole text.
 *  On an error, buf (if not NULL and cap > 0) holds an empty string.
 *  Since ABI 1.1 (symbol version TICKWHEEL_1.1). */
TW_API int tw_runtime_metrics(tw_runtime *rt, char *buf, size_t cap) TW_NOEXCEPT;

/** The metrics of n runtimes as ONE exposition: each family's "# HELP"
 *  and "# TYPE" lines once, then the samples of every runtime (in the
 *  order of rts, each labelled runtime="<its name>"), otherwise exactly as
 *  tw_runtime_metrics() writes them for one runtime, and with its buffer
 *  contract (snprintf-like: returns the whole length; retry while it is
 *  >= cap). For a /metrics endpoint of a process with several runtimes (a
 *  library's and the application's): give each once, with distinct names.
 *  Any thread, as tw_runtime_metrics(). Returns, in this order:
 *   TW_EINVAL   buf is NULL and cap > 0; rts is NULL and n > 0; an rts[i] is NULL.
 *   TW_EFORKED  in a fork() child of the process that created one of them.
 *   TW_ENOMEM   out of memory, or the text is longer than INT_MAX bytes.
 *   >= 0        the length of the whole text (n == 0: an empty text, 0).
 *  Since 1.5 (TICKWHEEL_1.5). */
TW_API int tw_runtimes_metrics(tw_runtime *const *rts, size_t n, char *buf, size_t cap) TW_NOEXCEPT;

/** Counts one exception (or error) that a callback or release hook raised
 *  where the runtime could not see it: a language binding's own catch (a
 *  Python exception, a JavaScript throw, a Rust panic), or a C
 *  application's wrapper that handles its own errors. Adds 1 to
 *  tw_stats.callback_exceptions and tickwheel_callback_exceptions_total,
 *  as a C++ exception escaping a callback does (the runtime counts those
 *  itself). Any thread, also from inside a callback or release hook,
 *  concurrently, and after tw_runtime_shutdown() (the final stats include
 *  it). Lock-free, O(1). Returns, in this order:
 *  @retval TW_EINVAL  rt is NULL.
 *  @retval TW_EFORKED in a fork() child of the process that created rt
 *                     (nothing counted).
 *  @retval TW_OK      counted (also after shutdown).
 *  Since 1.6 (TICKWHEEL_1.6). */
TW_API int tw_runtime_count_callback_exception(tw_runtime *rt) TW_NOEXCEPT;

/** A static, human-readable description of a TW_* code (TW_OK included);
 *  never NULL, also for unknown codes ("unknown error"). Does not touch
 *  tw_last_error_message(). */
TW_API const char *tw_strerror(int err) TW_NOEXCEPT;

/** The library's version: (major << 16) | (minor << 8) | patch. Compare with
 *  TW_VERSION to detect a header/library mismatch. */
TW_API uint32_t tw_version(void) TW_NOEXCEPT;

/** The detail of the most recent tw_* call on this thread that returned an
 *  error: names the function, the argument and the limit, e.g.
 *  "tw_timer_start: delay_ns 1152921504606846977 is above TW_MAX_DELAY_NS
 *  (1152921504606846976)", "tw_runtime_advance: the runtime \"tickwheel-1\"
 *  has no manual clock (...)", "tw_timer_start_ex: the runtime
 *  \"tickwheel-2\" is shut down". "" after a call that succeeded or whose
 *  error has no detail (TW_ENOENT: an answer, not a mistake). Never NULL;
 *  the text lives in thread-local storage, valid until the next tw_* call
 *  on this thread (copy it to keep it). Per thread: a callback's calls on a
 *  worker never change the caller's.
 *
 *  Which calls set it: every function returning a status (int, int64_t)
 *  sets it when it returns an error (negative) and clears it when it
 *  succeeds (>= 0; for a batch, also when some elements failed). The
 *  functions that return no status -- tw_last_error_message() itself,
 *  tw_strerror(), tw_version(), tw_now_ns(), tw_now_ns_clock(),
 *  tw_runtime_now_ns() and the *_init() helpers -- leave it alone, so
 *  `fprintf(stderr, "%s (%s)\n", tw_strerror(rc), tw_last_error_message())`
 *  works in either order of evaluation.
 *
 *  Every TW_EINVAL has a detail (which argument, its value, the limit);
 *  TW_ESHUTDOWN, TW_EFORKED and TW_EDEADLK name the runtime or the case;
 *  TW_EAGAIN the limit; TW_ENOMEM what ran out. The wording is for people
 *  and may change; test the return code, not the text. Cost: a success
 *  reads one thread-local byte (and clears the text only if it was set);
 *  an error formats the text. Any thread. Since 1.5 (TICKWHEEL_1.5). */
TW_API const char *tw_last_error_message(void) TW_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TICKWHEEL_TICKWHEEL_H */
