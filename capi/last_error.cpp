// SPDX-License-Identifier: MIT OR Apache-2.0
// tw_last_error_message(): this thread's message, and the cold half of
// capi_impl.hpp's status() -- composing "<tw_function>: <detail>" after an
// error, clearing after a success. (Apart from exports.cpp, which must see
// nothing but tickwheel.h: see there.)
//
// The detail is what the C layer recorded for that code during the call
// (set_detail), else what the C++ runtime recorded for it (core_detail),
// else the code's tw_strerror() text; TW_ENOENT (an answer, not a mistake)
// has none and takes the success path.
//
// The success path must stay cheap: a thread-local access from a shared
// library is a call to __tls_get_addr (~3 ns; measured on tw_timer_stop of a
// stale id: 7.9 -> 11.6 ns minimum with one per call). So status() reads
// g_messages_set, the number of threads whose message (or a recorded
// detail) is set -- a relaxed load of a read-mostly word on its own cache
// line -- and touches the thread-local state only when it is not zero. A
// thread always sees its own increment (coherence: same thread, same
// location), so a thread with a message set always clears it at its next
// success; meanwhile the other threads pay the thread-local access. A
// thread that exits with a message set gives its count back (the
// thread-local's destructor).
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <new>
#include <initializer_list>

#include <pthread.h>

#include "capi_impl.hpp"
#include "runtime/per_thread.hpp"

namespace tickwheel::capi {

MessageCount g_messages_set{0};

namespace {
struct LastError {
    bool set = false;        // message or detail not empty: counted in g_messages_set
    int code = 0;            // the code `detail` was recorded for; 0: none
    char detail[232] = {};   // set_detail()'s text
    char message[280] = {};  // tw_last_error_message()
    void mark() noexcept {
        if (!set) {
            set = true;
            __atomic_fetch_add(&g_messages_set.n, 1u, __ATOMIC_RELAXED);
        }
    }
    void clear() noexcept {
        if (!set) return;
        code = 0;
        detail[0] = '\0';
        message[0] = '\0';
        set = false;
        __atomic_fetch_sub(&g_messages_set.n, 1u, __ATOMIC_RELAXED);
    }
    LastError() = default;
    LastError(const LastError&) = delete;
    LastError& operator=(const LastError&) = delete;
    ~LastError() { clear(); }
};
// Allocated on the thread's first error and freed (cleared) at its exit
// (runtime/per_thread.hpp).
thread_local rt::PerThread<LastError> t_last;
/// This thread's record; created if `create` (nullptr: none yet, or no
/// memory for it: the error code is returned without a message).
LastError* this_thread_error(bool create) noexcept { return t_last.get(create); }
}  // namespace

namespace {
// fork.cpp, rule 8: in a fork() child, only the forking thread's message can
// still be set (the other threads are gone, their counts with them).
void messages_in_child() noexcept {
    const LastError* e = t_last.get(false);
    __atomic_store_n(&g_messages_set.n, e != nullptr && e->set ? 1u : 0u, __ATOMIC_RELAXED);
}
[[maybe_unused]] const int registered_fork_handler = pthread_atfork(nullptr, nullptr, messages_in_child);
}  // namespace

void compose_error(int rc, const char* fn) noexcept {
    LastError* ep = this_thread_error(true);
    if (ep == nullptr) return;
    LastError& e = *ep;
    char core[240];
    const char* detail = nullptr;
    if (e.code == rc && e.detail[0] != '\0')
        detail = e.detail;
    else if (core_detail(rc, core, sizeof core))
        detail = core;
    else
        detail = error_text(rc);
    // "<fn>: <detail>", cut to the buffer.
    std::size_t at = 0;
    for (const char* part : {fn, ": ", detail})
        for (; *part != '\0' && at + 1 < sizeof e.message; ++part) e.message[at++] = *part;
    e.message[at] = '\0';
    e.code = 0;
    e.detail[0] = '\0';
    e.mark();
}

void clear_error() noexcept {
    if (LastError* e = this_thread_error(false)) e->clear();
}

const char* last_error_message() noexcept {
    const LastError* e = this_thread_error(false);
    return e != nullptr ? e->message : "";
}

void set_detail(int code, const char* fmt, ...) noexcept {
    LastError* ep = this_thread_error(true);
    if (ep == nullptr) return;
    LastError& e = *ep;
    va_list ap;
    va_start(ap, fmt);
    (void)rt::format_into(e.detail, sizeof e.detail, fmt, ap);
    va_end(ap);
    e.code = code;
    e.mark();
}

}  // namespace tickwheel::capi
