// SPDX-License-Identifier: MIT OR Apache-2.0
// Checks run in a fork()ed child, for the fork tests (fork_test,
// fork_anywhere_test): the child reports a failed check by its exit status
// (CHILD_CHECK: gtest's assertions do not work there), and the parent waits
// a bounded time for it -- a child still running then is killed (SIGKILL)
// and reported hung, so a hang fails the test instead of hanging the suite.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace tw_test {

/// In a child: fails the child when `cond` is false, returning a non-zero
/// exit status (the check's line % 200 + 1: an exit status is 8 bits).
#define CHILD_CHECK(cond)                                                                  \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            std::fprintf(stderr, "child: check failed at line %d: %s\n", __LINE__, #cond); \
            return __LINE__ % 200 + 1;                                                     \
        }                                                                                  \
    } while (0)

struct ChildResult {
    int status = -1;   // the child's exit status (128 + signal if killed; -1 if hung)
    std::string said;  // what the child wrote to the report pipe (in_child)
    bool hung = false;
};

/// Waits for the child `pid` until `end`, first reading what it writes to
/// `report_fd` (-1: none; closed here) so that it never blocks writing;
/// kills it (SIGKILL) and reports it hung at `end`.
inline ChildResult wait_child(pid_t pid, std::chrono::steady_clock::time_point end, int report_fd = -1) {
    ChildResult res;
    auto ms_left = [&] {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
        return static_cast<int>(std::max<long long>(0, left.count()));
    };
    if (report_fd >= 0) {
        char buf[64];
        for (;;) {
            pollfd p{report_fd, POLLIN, 0};
            const int r = poll(&p, 1, ms_left());
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;  // deadline (or error): see below
            const ssize_t n = read(report_fd, buf, sizeof buf);
            if (n <= 0) break;  // EOF: the child closed it (it is exiting)
            res.said.append(buf, static_cast<std::size_t>(n));
        }
        close(report_fd);
    }
    int status = 0;
    for (;;) {
        const pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) {
            ADD_FAILURE() << "waitpid";
            return res;
        }
        if (ms_left() == 0) {
            res.hung = true;
            kill(pid, SIGKILL);
            (void)waitpid(pid, &status, 0);
            return res;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    res.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return res;
}

/// The report pipe's writing end in an in_child() child (-1 elsewhere).
inline int g_report_fd = -1;

/// Runs `child` in a fork()ed child whose exit status is child()'s return
/// value (0 = all checks passed; no atexit, no static destructor of the
/// parent's state), waiting at most `limit` (wait_child). What the child
/// writes to g_report_fd comes back in ChildResult::said.
template <class F>
ChildResult in_child(F child, std::chrono::steady_clock::duration limit) {
    int fds[2];
    if (pipe(fds) != 0) {
        ADD_FAILURE() << "pipe";
        return {};
    }
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        g_report_fd = fds[1];
        const int rc = child();
        close(fds[1]);
        std::_Exit(rc);
    }
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        ADD_FAILURE() << "fork failed";
        return {};
    }
    return wait_child(pid, std::chrono::steady_clock::now() + limit, fds[0]);
}

}  // namespace tw_test
