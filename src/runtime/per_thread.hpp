// SPDX-License-Identifier: MIT OR Apache-2.0
// Per-thread error records, shared by the C++ runtime's error detail
// (error_detail.cpp) and the C API's last error message (capi/last_error.cpp):
// a record allocated on the thread's first need and freed at its exit, and
// printf into its fixed buffer. Only failure paths create or write one.
#pragma once

#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <new>

namespace tickwheel::rt {

/// Declared thread_local. The thread-local itself is one pointer: the
/// library's thread-locals stay a few bytes (some are initial-exec, so the
/// whole block comes from glibc's small static TLS surplus when the library
/// is loaded by dlopen, as Python and Node do). The record (a T, value-
/// initialised) is allocated on the thread's first need and destroyed at its
/// exit.
template <class T>
class PerThread {
public:
    constexpr PerThread() noexcept = default;
    PerThread(const PerThread&) = delete;
    PerThread& operator=(const PerThread&) = delete;
    ~PerThread() {
        delete p_;
        p_ = nullptr;
    }
    /// This thread's record; created if `create` (nullptr: none yet, or no
    /// memory for it: the error is reported without it).
    T* get(bool create) noexcept {
        if (p_ == nullptr && create) p_ = new (std::nothrow) T{};
        return p_;
    }

private:
    T* p_ = nullptr;
};

/// vsnprintf into `buf` (`cap` bytes, cut there); an encoding error leaves
/// "". Returns whether the text is not empty.
inline bool format_into(char* buf, std::size_t cap, const char* fmt, std::va_list ap) noexcept {
    const int n = std::vsnprintf(buf, cap, fmt, ap);
    if (n < 0) buf[0] = '\0';
    return buf[0] != '\0';
}

}  // namespace tickwheel::rt
