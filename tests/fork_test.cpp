// SPDX-License-Identifier: MIT OR Apache-2.0
// fork() with a runtime alive (issue 9, bug 6). In the child, the parent's
// runtime has no threads: every call on it must fail with TW_EFORKED
// (errc::forked), no callback or release hook of it may run there,
// destroying it must only free memory, and a runtime created in the child
// must work. The parent is unaffected. Each check runs in a real child
// process; the child reports through its exit status and a pipe.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "test_support.hpp"
#include "tickwheel/runtime.hpp"
#include "tickwheel/tickwheel.h"

using namespace std::chrono_literals;
using tw_test::wait_until;

namespace {

std::atomic<int> g_fired{0};
std::atomic<int> g_released{0};
int g_report_fd = -1;  // in the child: where hooks and callbacks would say they ran

void count_cb(void*, tw_timer) {
    g_fired.fetch_add(1);
    if (g_report_fd >= 0) (void)!write(g_report_fd, "C", 1);
}
void count_release(void*) {
    g_released.fetch_add(1);
    if (g_report_fd >= 0) (void)!write(g_report_fd, "R", 1);
}

/// Runs `child` in a fork()ed child whose exit status is child()'s return
/// value (0 = all checks passed) and returns {status, what the child's
/// hooks/callbacks wrote}.
template <class F>
std::pair<int, std::string> in_child(F child) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        g_report_fd = fds[1];
        const int rc = child();
        close(fds[1]);
        std::_Exit(rc);  // no atexit, no static destructors of the parent's state
    }
    close(fds[1]);
    std::string said;
    char buf[64];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) said.append(buf, static_cast<std::size_t>(n));
    close(fds[0]);
    int status = 0;
    EXPECT_EQ(waitpid(pid, &status, 0), pid);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), said};
}

#define CHILD_CHECK(cond)                                                              \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            std::fprintf(stderr, "child: check failed at line %d: %s\n", __LINE__, #cond); \
            return __LINE__;                                                           \
        }                                                                              \
    } while (0)

}  // namespace

TEST(Fork, ChildGetsEforkedFromEveryCallAndDestroyRunsNoHook) {
    g_fired = 0;
    g_released = 0;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.shards = 2;
    cfg.workers = 2;
    tw_runtime* rt = nullptr;
    ASSERT_EQ(tw_runtime_create(&cfg, &rt), TW_OK);
    // Pending timers with hooks (due during the child's life, so a wrongly
    // running runtime in the child would fire them), one periodic.
    tw_timer ids[8];
    for (int i = 0; i < 8; ++i) {
        tw_timer_spec s;
        tw_timer_spec_init(&s);
        s.delay_ns = 200'000'000;  // 200 ms
        s.period_ns = i == 0 ? 50'000'000 : 0;
        s.callback = count_cb;
        s.release = count_release;
        ASSERT_EQ(tw_timer_start_ex(rt, &s, &ids[i]), TW_OK);
    }
    const auto [status, said] = in_child([&]() -> int {
        tw_timer out = 7;
        CHILD_CHECK(tw_timer_start(rt, 1000, 0, count_cb, nullptr, &out) == TW_EFORKED);
        CHILD_CHECK(out == 0);
        tw_timer_spec s;
        tw_timer_spec_init(&s);
        s.callback = count_cb;
        s.release = count_release;
        CHILD_CHECK(tw_timer_start_ex(rt, &s, &out) == TW_EFORKED);  // and its hook is not called
        CHILD_CHECK(tw_timer_stop(rt, ids[1]) == TW_EFORKED);
        CHILD_CHECK(tw_timer_stop_sync(rt, ids[2]) == TW_EFORKED);
        CHILD_CHECK(tw_timer_reset(rt, ids[3], 1000) == TW_EFORKED);
        tw_stats st;
        st.size = sizeof st;
        CHILD_CHECK(tw_runtime_stats(rt, &st) == TW_EFORKED);
        std::uint64_t pending = 0;
        CHILD_CHECK(tw_runtime_shard_stats(rt, 0, &pending, nullptr) == TW_EFORKED);
        CHILD_CHECK(tw_runtime_shutdown(rt) == TW_EFORKED);
        CHILD_CHECK(tw_strerror(TW_EFORKED) != std::string("unknown error"));
        // Past every deadline of the parent's timers: nothing of them runs here.
        std::this_thread::sleep_for(400ms);
        CHILD_CHECK(tw_runtime_destroy(rt) == TW_OK);
        CHILD_CHECK(g_fired.load() == 0);
        CHILD_CHECK(g_released.load() == 0);
        // A runtime created in the child works.
        tw_runtime* mine = nullptr;
        CHILD_CHECK(tw_runtime_create(&cfg, &mine) == TW_OK);
        static std::atomic<int> fired_here{0};
        CHILD_CHECK(tw_timer_start(
                        mine, 1'000'000, 0, [](void*, tw_timer) { fired_here.fetch_add(1); }, nullptr, &out) ==
                    TW_OK);
        CHILD_CHECK(wait_until([] { return fired_here.load() == 1; }));
        CHILD_CHECK(tw_runtime_destroy(mine) == TW_OK);
        return 0;
    });
    EXPECT_EQ(status, 0) << "the child's check at that line failed";
    EXPECT_EQ(said, "") << "a callback (C) or release hook (R) of the parent's runtime ran in the child";
    // The parent is unaffected: its timers fire, every hook runs once.
    EXPECT_TRUE(wait_until([] { return g_fired.load() >= 8; }));
    EXPECT_EQ(tw_timer_stop(rt, ids[0]), TW_OK);  // the periodic one
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
    EXPECT_EQ(g_released.load(), 8);
}

TEST(Fork, CxxChildGetsForkedAndDestructorRunsNothing) {
    std::atomic<int> released{0};
    struct Hook {
        std::atomic<int>* n;
        explicit Hook(std::atomic<int>* p) : n(p) {}
        Hook(Hook&& o) noexcept : n(std::exchange(o.n, nullptr)) {}
        ~Hook() {
            if (n != nullptr) {
                n->fetch_add(1);
                if (g_report_fd >= 0) (void)!write(g_report_fd, "R", 1);
            }
        }
        void operator()() const {
            if (g_report_fd >= 0) (void)!write(g_report_fd, "C", 1);
        }
    };
    auto* rt = new tickwheel::Runtime(tw_test::small_config());
    const tickwheel::Timer t = rt->start(tickwheel::StartOptions{{}, 1h}, Hook(&released));
    const auto [status, said] = in_child([&]() -> int {
        CHILD_CHECK(rt->is_forked());
        std::error_code ec;
        tickwheel::StartOptions o;
        o.delay = 1ms;
        const tickwheel::Timer u = rt->start(o, tickwheel::detail::Callback([] {}), ec);
        CHILD_CHECK(ec == tickwheel::errc::forked && !u);
        CHILD_CHECK(!rt->stop(t));
        CHILD_CHECK(!rt->stop_sync(t));
        CHILD_CHECK(!rt->reset(t.id(), 1ms, ec) && ec == tickwheel::errc::forked);
        rt->shutdown(ec);
        CHILD_CHECK(ec == tickwheel::errc::forked);
        bool threw = false;
        try {
            (void)rt->stats();
        } catch (const tickwheel::Error& e) {
            threw = e.code() == tickwheel::errc::forked;
        }
        CHILD_CHECK(threw);
        delete rt;  // frees memory only: no hook, no join
        return 0;
    });
    EXPECT_EQ(status, 0);
    EXPECT_EQ(said, "");
    EXPECT_FALSE(rt->is_forked());
    EXPECT_TRUE(rt->stop(t));
    EXPECT_EQ(released.load(), 1);
    delete rt;
}
