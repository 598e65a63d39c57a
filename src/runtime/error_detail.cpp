// SPDX-License-Identifier: MIT OR Apache-2.0
// The per-thread error detail (error_detail.hpp) and tickwheel::Error's
// access to it (detail::take_error_detail, exported under TICKWHEEL_CXX_1.5).
#include "runtime/error_detail.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstring>

#include "runtime/per_thread.hpp"

namespace tickwheel {
namespace rt {
namespace {
/// This thread's last recorded detail: the errc value it belongs to (0:
/// none) and its text (per_thread.hpp: allocated on the thread's first
/// error, freed at its exit).
struct Detail {
    int code;
    char text[240];
};
thread_local PerThread<Detail> t_detail;
}  // namespace

void set_error_detail(errc e, const char* fmt, ...) noexcept {
    Detail* dp = t_detail.get(true);
    if (dp == nullptr) return;
    Detail& d = *dp;
    va_list ap;
    va_start(ap, fmt);
    const bool any = format_into(d.text, sizeof d.text, fmt, ap);
    va_end(ap);
    d.code = any ? static_cast<int>(e) : 0;
}

bool take_error_detail(int code, char* out, std::size_t cap) noexcept {
    if (cap > 0) out[0] = '\0';
    Detail* dp = t_detail.get(false);
    if (dp == nullptr) return false;
    Detail& d = *dp;
    if (d.code == 0 || d.code != code) return false;
    d.code = 0;
    if (cap > 0) {
        const std::size_t n = std::min(std::strlen(d.text), cap - 1);
        std::memcpy(out, d.text, n);
        out[n] = '\0';
    }
    return true;
}
}  // namespace rt

namespace detail {
std::string take_error_detail(const std::error_code& ec) {
    if (ec.category() != error_category()) return {};
    char buf[sizeof(rt::Detail::text)];
    if (!rt::take_error_detail(ec.value(), buf, sizeof buf)) return {};
    return buf;
}
}  // namespace detail
}  // namespace tickwheel
