// SPDX-License-Identifier: MIT OR Apache-2.0
// USDT probes (issue 34): static tracepoints in libtickwheel for tracers
// that attach at run time (bpftrace, BCC, perf, SystemTap), from
// <sys/sdt.h> (Debian's systemtap-sdt-dev). Each probe is a `nop` and an
// ELF note (section .note.stapsdt: provider "tickwheel", the probe's name,
// where its arguments live); its arguments are computed only while a
// tracer is attached: every probe site is guarded by the probe's
// is-enabled semaphore (a 16-bit counter in section .probes that the
// tracer raises while attached), so an unattached probe costs one load and
// a never-taken branch. Built unless -DTICKWHEEL_PROBES=OFF (then every
// macro below is empty and the library carries no notes).
//
// The probes, their arguments (uint64 unless said) and where they fire:
//   start(name, id, shard, delay_ns, period_ns, caller)   a start returned an
//         id (on the caller's thread: its user stack names who starts
//         timers); a batch fires it per timer started; delay_ns is the
//         delay asked (absolute deadlines: their distance from now, 0 if
//         past); caller: the return address of the library's C++ entry
//         (Runtime::start is inline: the application's own function; a C
//         caller's: inside the C API)
//   stop(name, id, stopped)       stop()/stop_sync() returned (stopped 1: TW_OK)
//   reset(name, id, rearmed)      reset()/reset_at() returned (rearmed 1: TW_OK)
//   expire(name, shard, id, due_ns, pass_ns)   the shard's driver found
//         timer id due (per timer, at the pass that found it; due_ns its
//         deadline rounded up to the tick, pass_ns the pass's clock reading)
//   dispatch(name, shard, n, handed_ns)        the driver handed a batch of
//         n due timers to the workers
//   queue_deliver(name, queue, n, handed_ns)   the driver delivered n due
//         timers to delivery queue `queue` (its slot)
//   run_begin(name, id, shard, driver_ns, wait_ns, queue)   a callback starts:
//         its lateness's two stages (deadline -> handed over, handed over ->
//         now); queue: the delivery queue's slot, 0 on a worker
//   run_end(name, id, duration_ns, threw, invoker, first_word)   it
//         returned: its duration; threw 1 if it raised; invoker: the
//         address of its callable type's invoker (a C++ callable's names its
//         type; resolve with usym), first_word: the first word of the
//         callable (the C API's: its tw_callback)
// `name` is the runtime's name (const char *, NUL-terminated: str(arg0));
// an id's shard is its bits 32..39. At most 6 arguments a probe: bpftrace
// reads no more on x86-64.
// All times are CLOCK_MONOTONIC ns (a manual runtime's: its virtual clock).
// tools/*.bt are ready scripts; docs/site/guide/operations.md shows them.
#pragma once

#if defined(TICKWHEEL_PROBES) && TICKWHEEL_PROBES
// The semaphores: sdt.h names `tickwheel_<probe>_semaphore` in each note.
#define _SDT_HAS_SEMAPHORES 1
#define SDT_USE_VARIADIC 1
#include <sys/sdt.h>

#define TW_PROBE_SEMAPHORE(name) tickwheel_##name##_semaphore
#define TW_PROBE_DECLARE(name) \
    extern "C" __attribute__((visibility("hidden"))) volatile unsigned short TW_PROBE_SEMAPHORE(name)
TW_PROBE_DECLARE(start);
TW_PROBE_DECLARE(stop);
TW_PROBE_DECLARE(reset);
TW_PROBE_DECLARE(expire);
TW_PROBE_DECLARE(dispatch);
TW_PROBE_DECLARE(queue_deliver);
TW_PROBE_DECLARE(run_begin);
TW_PROBE_DECLARE(run_end);
#undef TW_PROBE_DECLARE

/// Whether a tracer is attached to probe `name` (one load of its semaphore).
#define TW_PROBE_ENABLED(name) __builtin_expect(TW_PROBE_SEMAPHORE(name) != 0, 0)
/// Fires probe `name` with its arguments (integers or pointers), which are
/// evaluated only while a tracer is attached.
#define TW_PROBE(name, ...)                                                     \
    do {                                                                        \
        if (TW_PROBE_ENABLED(name)) STAP_PROBEV(tickwheel, name, __VA_ARGS__); \
    } while (0)
namespace tickwheel::rt {
inline constexpr bool kProbes = true;
}
#else
namespace tickwheel::rt {
inline constexpr bool kProbes = false;
/// Names the arguments of a probe that is compiled out (never called): they
/// stay "used", and nothing is evaluated.
template <class... A>
inline void probe_args_unused(const A&...) noexcept {}
}  // namespace tickwheel::rt
#define TW_PROBE_ENABLED(name) false
#define TW_PROBE(name, ...)                                         \
    do {                                                            \
        if (false) ::tickwheel::rt::probe_args_unused(__VA_ARGS__); \
    } while (0)
#endif
