// SPDX-License-Identifier: MIT OR Apache-2.0
// The per-thread error detail (error_detail.hpp) and tickwheel::Error's
// access to it (detail::take_error_detail, exported under TICKWHEEL_CXX_1.5).
#include "runtime/error_detail.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>

namespace tickwheel {
namespace rt {
namespace {
/// This thread's last recorded detail: the errc value it belongs to (0:
/// none) and its text. Allocated on the thread's first error and freed at
/// its exit: the library's thread-locals stay a few bytes (some are
/// initial-exec, so the whole block comes from glibc's small static TLS
/// surplus when the library is loaded by dlopen, as Python and Node do).
struct Detail {
    int code;
    char text[240];
};
struct DetailOwner {
    Detail* d = nullptr;
    ~DetailOwner() {
        delete d;
        d = nullptr;
    }
};
thread_local DetailOwner t_detail;
/// This thread's detail; created if `create` (nullptr: none yet, or no memory
/// for it: the error is reported without its detail).
Detail* this_thread_detail(bool create) noexcept {
    if (t_detail.d == nullptr && create) t_detail.d = new (std::nothrow) Detail{0, {}};
    return t_detail.d;
}
}  // namespace

void set_error_detail(errc e, const char* fmt, ...) noexcept {
    Detail* dp = this_thread_detail(true);
    if (dp == nullptr) return;
    Detail& d = *dp;
    va_list ap;
    va_start(ap, fmt);
    const int n = std::vsnprintf(d.text, sizeof d.text, fmt, ap);
    va_end(ap);
    if (n < 0) d.text[0] = '\0';
    d.code = d.text[0] != '\0' ? static_cast<int>(e) : 0;
}

bool take_error_detail(int code, char* out, std::size_t cap) noexcept {
    if (cap > 0) out[0] = '\0';
    Detail* dp = this_thread_detail(false);
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
