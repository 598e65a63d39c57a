// SPDX-License-Identifier: MIT OR Apache-2.0
// The USDT probes' is-enabled semaphores (probes.hpp): one 16-bit counter
// per probe in section .probes, where tracers find them through the probes'
// notes and raise them while attached.
#include "runtime/probes.hpp"

#if defined(TICKWHEEL_PROBES) && TICKWHEEL_PROBES
#define TW_PROBE_DEFINE(name) \
    __attribute__((visibility("hidden"), used, section(".probes"))) volatile unsigned short TW_PROBE_SEMAPHORE(name) = 0
extern "C" {
TW_PROBE_DEFINE(start);
TW_PROBE_DEFINE(stop);
TW_PROBE_DEFINE(reset);
TW_PROBE_DEFINE(expire);
TW_PROBE_DEFINE(dispatch);
TW_PROBE_DEFINE(queue_deliver);
TW_PROBE_DEFINE(run_begin);
TW_PROBE_DEFINE(run_end);
}
#endif
