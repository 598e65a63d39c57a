// SPDX-License-Identifier: MIT OR Apache-2.0
// Compiled (not run) as C++98 and as C++20 with -pedantic-errors
// (targets capi_header_cxx98/capi_header_cxx20 in capi/CMakeLists.txt): the C
// API header is usable from any C++, and its functions never throw.
#include <tickwheel/tickwheel.h>

#if __cplusplus >= 201103L
static_assert(noexcept(tw_now_ns()), "the C API never throws");
static_assert(noexcept(tw_timer_stop(nullptr, 0)), "the C API never throws");
#endif

namespace {
void cb(void*, tw_timer) {}
void rel(void*) {}
}  // namespace

int tw_header_cxx_compiles();
int tw_header_cxx_compiles() {
    tw_runtime* rt = 0;
    tw_config cfg;
    tw_config_init(&cfg);
    int rc = tw_runtime_create(&cfg, &rt);
    tw_timer_spec spec;
    tw_timer_spec_init(&spec);
    spec.callback = cb;
    spec.release = rel;
    tw_timer id = 0;
    rc |= tw_timer_start_ex(rt, &spec, &id);
    rc |= tw_timer_start(rt, TW_MAX_DELAY_NS, 0, cb, 0, &id);
    rc |= tw_runtime_destroy(rt);
    return rc + (tw_strerror(rc) != 0 ? 1 : 0);
}
