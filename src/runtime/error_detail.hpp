// SPDX-License-Identifier: MIT OR Apache-2.0
// The detail of the last error on this thread: which argument, which limit.
//
// A failure path of the C++ runtime records a short text (set_error_detail)
// next to the error code it returns; tickwheel::Error's constructor picks it
// up (detail::take_error_detail, runtime.hpp) so that what() names the
// argument and the limit, and the C API (capi/) prefixes it with the C
// function's name for tw_last_error_message(). Only failure paths write it:
// a success costs nothing here. The text names fields as both APIs do
// (delay, period, shards, max_timers, ...), without a function name.
#pragma once

#include <string>

#include "tickwheel/runtime.hpp"

namespace tickwheel::rt {

/// Records the detail of error `e` on this thread (printf format; the text
/// is cut at 239 bytes). Any thread; never allocates.
void set_error_detail(errc e, const char* fmt, ...) noexcept __attribute__((format(printf, 2, 3), cold));

/// Takes (and clears) this thread's recorded detail if it is of error code
/// `code` (an errc value); "" otherwise. Copies into `out` (cap > 0), always
/// NUL-terminated; returns true if there was one.
bool take_error_detail(int code, char* out, std::size_t cap) noexcept;

}  // namespace tickwheel::rt

namespace tickwheel::rt {
/// `ec` = forked, with its detail.
inline void set_forked(std::error_code& ec) noexcept {
    set_error_detail(errc::forked, "the runtime was created in the parent of this fork() child");
    ec = make_error_code(errc::forked);
}
}  // namespace tickwheel::rt

namespace tickwheel::rt {
/// The C API's tw_config.name "" (an empty string, not NULL): the runtime
/// constructed on this thread while a NameAsGiven lives keeps its empty
/// name instead of making one up (issue 34: only NULL gets a made-up name).
/// C++'s Config::name cannot tell "" from unset: empty there means "make
/// one up", as documented. (Here, beside the C API's other hidden helpers.)
class NameAsGiven {
public:
    NameAsGiven() noexcept;
    ~NameAsGiven();
    NameAsGiven(const NameAsGiven&) = delete;
    NameAsGiven& operator=(const NameAsGiven&) = delete;
    /// Whether one lives on this thread (the runtime's construction asks).
    static bool active() noexcept;
};
}  // namespace tickwheel::rt
