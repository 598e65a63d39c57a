// SPDX-License-Identifier: MIT OR Apache-2.0
// Error details (issue 23): tw_last_error_message() after every kind of
// TW_EINVAL and the other errors with a detail, its thread-local and
// success-clears contract; C++ Error::what() carrying the same detail;
// tw_config.name / Config::name; and the manual clock's "now": a deadline
// computed the documented way (tw_runtime_now_ns(), Runtime::clock_now())
// is right on a real and on a manual runtime.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"
#include "tickwheel/runtime.hpp"
#include "tickwheel/tickwheel.h"

using namespace std::chrono_literals;
using tickwheel::Runtime;
using tw_test::wait_until;

namespace {

void nop(void*, tw_timer) {}
void count_cb(void* arg, tw_timer) { static_cast<std::atomic<int>*>(arg)->fetch_add(1); }

std::string last() { return tw_last_error_message(); }

/// `rc` is `code` and the message names `fn` and every one of `parts`.
::testing::AssertionResult fails_with(int rc, int code, const char* fn, std::initializer_list<const char*> parts) {
    const std::string m = last();
    if (rc != code) return ::testing::AssertionFailure() << "rc " << rc << " (want " << code << "), message \"" << m << '"';
    if (m.rfind(std::string(fn) + ": ", 0) != 0)
        return ::testing::AssertionFailure() << "message \"" << m << "\" does not start with \"" << fn << ": \"";
    for (const char* p : parts)
        if (m.find(p) == std::string::npos) return ::testing::AssertionFailure() << "message \"" << m << "\" lacks \"" << p << '"';
    return ::testing::AssertionSuccess();
}

struct CRuntime {
    explicit CRuntime(unsigned flags = 0, const char* name = nullptr, std::uint64_t max_timers = 0) {
        tw_config cfg;
        tw_config_init(&cfg);
        cfg.shards = 2;
        cfg.workers = 2;
        cfg.flags = flags;
        cfg.name = name;
        cfg.max_timers = max_timers;
        EXPECT_EQ(tw_runtime_create(&cfg, &rt), TW_OK) << tw_last_error_message();
    }
    ~CRuntime() {
        if (rt != nullptr) {
            EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
        }
    }
    CRuntime(const CRuntime&) = delete;
    CRuntime& operator=(const CRuntime&) = delete;
    tw_runtime* rt = nullptr;
};

}  // namespace

// ---- the C API: every TW_EINVAL has a detail ---------------------------------------------
TEST(LastErrorMessage, ThePinnedExampleAndTheDelayLimits) {
    CRuntime r;
    tw_timer id = 7;
    // The example: a delay above TW_MAX_DELAY_NS names the argument, its value and the limit.
    EXPECT_TRUE(fails_with(tw_timer_start(r.rt, TW_MAX_DELAY_NS + 1, 0, nop, nullptr, &id), TW_EINVAL, "tw_timer_start",
                           {"delay_ns 1152921504606846977", "is above TW_MAX_DELAY_NS (1152921504606846976)"}));
    EXPECT_EQ(id, 0u);
    EXPECT_TRUE(fails_with(tw_timer_start(r.rt, 1000, ~std::uint64_t{0}, nop, nullptr, &id), TW_EINVAL,
                           "tw_timer_start", {"period_ns 18446744073709551615", "TW_MAX_DELAY_NS"}));
    EXPECT_TRUE(fails_with(tw_timer_start(r.rt, 1000, 0, nullptr, nullptr, &id), TW_EINVAL, "tw_timer_start",
                           {"callback is NULL"}));
    EXPECT_TRUE(fails_with(tw_timer_start(r.rt, 1000, 0, nop, nullptr, nullptr), TW_EINVAL, "tw_timer_start",
                           {"out is NULL"}));
    EXPECT_TRUE(fails_with(tw_timer_start(nullptr, 1000, 0, nop, nullptr, &id), TW_EINVAL, "tw_timer_start",
                           {"rt is NULL"}));
    EXPECT_TRUE(fails_with(tw_timer_reset(r.rt, 1, TW_MAX_DELAY_NS + 5), TW_EINVAL, "tw_timer_reset",
                           {"delay_ns 1152921504606846981", "TW_MAX_DELAY_NS"}));
    EXPECT_TRUE(fails_with(tw_timer_reset_at(r.rt, 1, std::uint64_t{INT64_MAX} + 1), TW_EINVAL, "tw_timer_reset_at",
                           {"deadline_ns 9223372036854775808", "INT64_MAX"}));
    std::uint64_t ids[1] = {1};
    EXPECT_TRUE(fails_with(tw_timer_reset_n(r.rt, ids, 1, TW_MAX_DELAY_NS + 1, nullptr), TW_EINVAL,
                           "tw_timer_reset_n", {"delay_ns", "TW_MAX_DELAY_NS"}));
}

TEST(LastErrorMessage, EverySpecFieldNamesItself) {
    CRuntime r;
    CRuntime other;
    tw_queue* q = nullptr;
    ASSERT_EQ(tw_queue_create(other.rt, &q), TW_OK);
    tw_timer id;
    auto spec = [] {
        tw_timer_spec s;
        tw_timer_spec_init(&s);
        s.callback = nop;
        s.delay_ns = 1000000;
        return s;
    };
    tw_timer_spec s = spec();
    s.period_policy = 9;
    EXPECT_TRUE(fails_with(tw_timer_start_ex(r.rt, &s, &id), TW_EINVAL, "tw_timer_start_ex", {"period_policy 9"}));
    s = spec();
    s.clock = 7;
    EXPECT_TRUE(fails_with(tw_timer_start_ex(r.rt, &s, &id), TW_EINVAL, "tw_timer_start_ex", {"clock 7"}));
    s = spec();
    s.shard = -2;
    EXPECT_TRUE(fails_with(tw_timer_start_ex(r.rt, &s, &id), TW_EINVAL, "tw_timer_start_ex", {"shard -2", "-1"}));
    s = spec();
    s.leeway_ns = TW_MAX_DELAY_NS + 1;
    EXPECT_TRUE(fails_with(tw_timer_start_ex(r.rt, &s, &id), TW_EINVAL, "tw_timer_start_ex", {"leeway_ns", "TW_MAX_DELAY_NS"}));
    s = spec();
    s.deadline_ns = tw_runtime_now_ns(r.rt, TW_CLOCK_MONOTONIC) + TW_MAX_DELAY_NS + 1000000000;
    EXPECT_TRUE(fails_with(tw_timer_start_ex(r.rt, &s, &id), TW_EINVAL, "tw_timer_start_ex",
                           {"deadline_ns", "after the runtime's clock", "TW_MAX_DELAY_NS"}));
    s = spec();
    s.queue = q;
    EXPECT_TRUE(fails_with(tw_timer_start_ex(r.rt, &s, &id), TW_EINVAL, "tw_timer_start_ex",
                           {"queue belongs to another runtime"}));
    s = spec();
    s.size = 60;  // between the 1.0 and 1.2 layouts: would cut a field
    EXPECT_TRUE(fails_with(tw_timer_start_ex(r.rt, &s, &id), TW_EINVAL, "tw_timer_start_ex", {"spec->size 60"}));
    struct {
        tw_timer_spec s;
        unsigned char tail[8];
    } big;
    big.s = spec();
    big.s.size = sizeof big;
    std::memset(big.tail, 0, sizeof big.tail);
    big.tail[3] = 1;
    EXPECT_TRUE(fails_with(tw_timer_start_ex(r.rt, &big.s, &id), TW_EINVAL, "tw_timer_start_ex",
                           {"is not zero", "this library"}));
    EXPECT_TRUE(fails_with(tw_timer_start_ex(r.rt, nullptr, &id), TW_EINVAL, "tw_timer_start_ex", {"spec is NULL"}));
    // The batch: the array's layout.
    tw_timer_spec specs[1] = {spec()};
    specs[0].size = 12;
    tw_timer out[1];
    EXPECT_TRUE(fails_with(tw_timer_start_n(r.rt, specs, 1, out), TW_EINVAL, "tw_timer_start_n", {"specs[0].size 12"}));
    EXPECT_TRUE(fails_with(tw_timer_start_n(r.rt, nullptr, 3, out), TW_EINVAL, "tw_timer_start_n", {"NULL while n is 3"}));
    EXPECT_TRUE(fails_with(tw_timer_stop_n(r.rt, nullptr, std::size_t{INT_MAX} + 1, nullptr), TW_EINVAL,
                           "tw_timer_stop_n", {"NULL while n is"}));
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
}

TEST(LastErrorMessage, ConfigFieldsAndOtherCalls) {
    tw_runtime* rt = reinterpret_cast<tw_runtime*>(1);
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.resolution_ns = 10;
    EXPECT_TRUE(fails_with(tw_runtime_create(&cfg, &rt), TW_EINVAL, "tw_runtime_create",
                           {"resolution_ns 10", "1000 .. 1000000000"}));
    EXPECT_EQ(rt, nullptr);
    tw_config_init(&cfg);
    cfg.flags = 0x80;
    EXPECT_TRUE(fails_with(tw_runtime_create(&cfg, &rt), TW_EINVAL, "tw_runtime_create", {"flags 0x80", "0x80"}));
    tw_config_init(&cfg);
    cfg.shards = 300;
    EXPECT_TRUE(fails_with(tw_runtime_create(&cfg, &rt), TW_EINVAL, "tw_runtime_create", {"shards 300", "256"}));
    tw_config_init(&cfg);
    cfg.workers = 5000;
    EXPECT_TRUE(fails_with(tw_runtime_create(&cfg, &rt), TW_EINVAL, "tw_runtime_create", {"workers 5000", "4096"}));
    tw_config_init(&cfg);
    cfg.size = 36;  // inside `name`
    EXPECT_TRUE(fails_with(tw_runtime_create(&cfg, &rt), TW_EINVAL, "tw_runtime_create", {"cfg->size 36"}));
    EXPECT_TRUE(fails_with(tw_runtime_create(nullptr, nullptr), TW_EINVAL, "tw_runtime_create", {"out is NULL"}));

    CRuntime r;
    // advance on a runtime without a manual clock names the runtime and the flag.
    EXPECT_TRUE(fails_with(tw_runtime_advance(r.rt, 1000), TW_EINVAL, "tw_runtime_advance",
                           {"has no manual clock", "TW_CONFIG_MANUAL_CLOCK", "tickwheel-"}));
    CRuntime manual(TW_CONFIG_MANUAL_CLOCK);
    EXPECT_TRUE(fails_with(tw_runtime_advance(manual.rt, TW_MAX_DELAY_NS + 1), TW_EINVAL, "tw_runtime_advance",
                           {"ns 1152921504606846977", "TW_MAX_DELAY_NS"}));
    EXPECT_TRUE(fails_with(static_cast<int>(tw_group_stop(r.rt, 0, 0)), TW_EINVAL, "tw_group_stop", {"group 0"}));
    EXPECT_TRUE(fails_with(static_cast<int>(tw_group_stop(r.rt, 5, 0x4)), TW_EINVAL, "tw_group_stop",
                           {"flags 0x4", "TW_SYNC"}));
    tw_stats st;
    tw_stats_init(&st);
    st.size = 8;
    EXPECT_TRUE(fails_with(tw_runtime_stats(r.rt, &st), TW_EINVAL, "tw_runtime_stats", {"out->size 8"}));
    tw_timer_info info;
    tw_timer_info_init(&info);
    info.size = 5000;
    EXPECT_TRUE(fails_with(tw_timer_query(r.rt, 1, &info), TW_EINVAL, "tw_timer_query", {"out->size 5000"}));
    EXPECT_TRUE(fails_with(tw_runtime_shard_stats(r.rt, 9, nullptr, nullptr), TW_EINVAL, "tw_runtime_shard_stats",
                           {"shard 9", "(2)"}));
    EXPECT_TRUE(fails_with(tw_runtime_metrics(r.rt, nullptr, 5), TW_EINVAL, "tw_runtime_metrics", {"buf is NULL"}));
    tw_runtime* none[1] = {nullptr};
    EXPECT_TRUE(fails_with(tw_runtimes_metrics(none, 1, nullptr, 0), TW_EINVAL, "tw_runtimes_metrics", {"rts[0] is NULL"}));
    EXPECT_TRUE(fails_with(tw_queue_run(nullptr, 1, 0), TW_EINVAL, "tw_queue_run", {"q is NULL"}));
    tw_queue* q = nullptr;
    ASSERT_EQ(tw_queue_create(r.rt, &q), TW_OK);
    EXPECT_TRUE(fails_with(tw_queue_run(q, 0, 0), TW_EINVAL, "tw_queue_run", {"max is 0"}));
    tw_queue_stats qs;
    tw_queue_stats_init(&qs);
    qs.size = 4;
    EXPECT_TRUE(fails_with(tw_queue_get_stats(q, &qs), TW_EINVAL, "tw_queue_get_stats", {"out->size 4"}));
    EXPECT_TRUE(fails_with(tw_queue_fd(nullptr), TW_EINVAL, "tw_queue_fd", {"q is NULL"}));
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
}

// ---- the other errors ----------------------------------------------------------------------
TEST(LastErrorMessage, ShutdownLimitAndDeadlockNameTheirCase) {
    CRuntime r(0, "named \"one\"", 1);
    tw_timer a, b;
    ASSERT_EQ(tw_timer_start(r.rt, 3600000000000ull, 0, nop, nullptr, &a), TW_OK);
    EXPECT_TRUE(fails_with(tw_timer_start(r.rt, 1000, 0, nop, nullptr, &b), TW_EAGAIN, "tw_timer_start",
                           {"max_timers (1) timers are alive"}));
    ASSERT_EQ(tw_runtime_shutdown(r.rt), TW_OK);
    EXPECT_TRUE(fails_with(tw_timer_start(r.rt, 1000, 0, nop, nullptr, &b), TW_ESHUTDOWN, "tw_timer_start",
                           {"named \"one\"", "shut down"}));
    EXPECT_TRUE(fails_with(tw_timer_stop(r.rt, a), TW_ESHUTDOWN, "tw_timer_stop", {"shut down"}));

    // Shutdown, advance and a queue's run from inside callbacks: TW_EDEADLK with the case.
    CRuntime manual(TW_CONFIG_MANUAL_CLOCK);
    struct Seen {
        tw_runtime* rt = nullptr;
        tw_queue* q = nullptr;
        int shutdown_rc = 0, advance_rc = 0, run_rc = 0;
        std::string shutdown_msg, advance_msg, run_msg;
    } seen;
    seen.rt = manual.rt;
    ASSERT_EQ(tw_queue_create(manual.rt, &seen.q), TW_OK);
    tw_timer_spec s;
    tw_timer_spec_init(&s);
    s.delay_ns = 1000000;
    s.arg = &seen;
    s.callback = [](void* arg, tw_timer) {
        auto* x = static_cast<Seen*>(arg);
        x->shutdown_rc = tw_runtime_shutdown(x->rt);
        x->shutdown_msg = tw_last_error_message();
        x->advance_rc = tw_runtime_advance(x->rt, 1);
        x->advance_msg = tw_last_error_message();
    };
    tw_timer id;
    ASSERT_EQ(tw_timer_start_ex(manual.rt, &s, &id), TW_OK);
    s.queue = seen.q;
    s.callback = [](void* arg, tw_timer) {
        auto* x = static_cast<Seen*>(arg);
        x->run_rc = tw_queue_run(x->q, 1, 0);
        x->run_msg = tw_last_error_message();
    };
    ASSERT_EQ(tw_timer_start_ex(manual.rt, &s, &id), TW_OK);
    EXPECT_EQ(tw_runtime_advance(manual.rt, 2000000), 1);
    EXPECT_EQ(last(), "");  // the advance succeeded: its callbacks' errors are not the caller's
    EXPECT_EQ(tw_queue_run(seen.q, 4, 0), 1);
    EXPECT_EQ(seen.shutdown_rc, TW_EDEADLK);
    EXPECT_NE(seen.shutdown_msg.find("tw_runtime_shutdown: shutdown called from inside one of the runtime's callbacks"),
              std::string::npos)
        << seen.shutdown_msg;
    EXPECT_EQ(seen.advance_rc, TW_EDEADLK);
    EXPECT_NE(seen.advance_msg.find("tw_runtime_advance: advance called from inside"), std::string::npos)
        << seen.advance_msg;
    EXPECT_EQ(seen.run_rc, TW_EDEADLK);
    EXPECT_NE(seen.run_msg.find("tw_queue_run: called from inside one of the queue's own callbacks"), std::string::npos)
        << seen.run_msg;
    EXPECT_EQ(tw_queue_destroy(seen.q), TW_OK);
}

TEST(LastErrorMessage, AForkChildGetsEforkedWithADetail) {
    CRuntime r(0, "parent's");
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        tw_timer id;
        const int rc = tw_timer_start(r.rt, 1000, 0, nop, nullptr, &id);
        const std::string m = tw_last_error_message();
        const bool ok = rc == TW_EFORKED && m.find("tw_timer_start: the runtime \"parent's\" was created in the parent "
                                                   "of this fork() child") == 0;
        if (!ok) std::fprintf(stderr, "child: rc %d, message \"%s\"\n", rc, m.c_str());
        tw_runtime_destroy(r.rt);  // frees only
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// ---- the contract: "" after a success, per thread, never NULL, untouched by the others ----------
TEST(LastErrorMessage, ClearedBySuccessAndEnoentPerThreadAndNotByTheNonStatusFunctions) {
    CRuntime r;
    tw_timer id;
    ASSERT_NE(tw_last_error_message(), nullptr);
    ASSERT_EQ(tw_timer_start(r.rt, TW_MAX_DELAY_NS + 1, 0, nop, nullptr, &id), TW_EINVAL);
    const std::string before = last();
    ASSERT_FALSE(before.empty());
    // The functions without a status leave it alone (any order of evaluation works).
    (void)tw_strerror(TW_EINVAL);
    (void)tw_version();
    (void)tw_now_ns();
    (void)tw_now_ns_clock(TW_CLOCK_BOOTTIME);
    (void)tw_runtime_now_ns(r.rt, TW_CLOCK_MONOTONIC);
    tw_stats st;
    tw_stats_init(&st);
    EXPECT_EQ(last(), before);
    // Another thread has its own: empty at its start, its own error, ours untouched.
    std::string other_at_start, other_after;
    std::thread([&] {
        other_at_start = tw_last_error_message();
        tw_timer x;
        EXPECT_EQ(tw_timer_start(r.rt, 1000, 0, nullptr, nullptr, &x), TW_EINVAL);
        other_after = tw_last_error_message();
    }).join();
    EXPECT_EQ(other_at_start, "");
    EXPECT_EQ(other_after, "tw_timer_start: callback is NULL");
    EXPECT_EQ(last(), before);
    // A success clears it.
    ASSERT_EQ(tw_timer_start(r.rt, 3600000000000ull, 0, nop, nullptr, &id), TW_OK);
    EXPECT_EQ(last(), "");
    // TW_ENOENT is an answer, not a mistake: no detail, and the previous one is gone.
    ASSERT_EQ(tw_timer_start(r.rt, TW_MAX_DELAY_NS + 1, 0, nop, nullptr, &id), TW_EINVAL);
    EXPECT_EQ(tw_timer_stop(r.rt, 12345), TW_ENOENT);
    EXPECT_EQ(last(), "");
    // A batch with failed elements returns >= 0: a success.
    tw_timer_spec specs[2];
    tw_timer_spec_init(&specs[0]);
    specs[0].callback = nop;
    specs[0].delay_ns = 1000;
    specs[1] = specs[0];
    specs[1].callback = nullptr;  // refused alone
    tw_timer out[2];
    EXPECT_EQ(tw_timer_start_n(r.rt, specs, 2, out), 1);
    EXPECT_EQ(last(), "");
}

TEST(LastErrorMessage, ThreadsFailingAndSucceedingConcurrentlyEachSeeTheirOwn) {
    // Each thread's message is its own, whatever the others do meanwhile
    // (the process-wide count of threads with a message set is shared; the
    // text is not). Threads end with a message set: their count goes back.
    CRuntime r;
    tw_timer live;
    ASSERT_EQ(tw_timer_start(r.rt, 3600000000000ull, 0, nop, nullptr, &live), TW_OK);
    constexpr int kThreads = 4;
    const int rounds = tw_test::kSanitized ? 300 : 3000;
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            const std::uint64_t delay = TW_MAX_DELAY_NS + 1 + static_cast<std::uint64_t>(t);
            const std::string want = "delay_ns " + std::to_string(delay) + " is above";
            tw_timer_info info;
            tw_timer_info_init(&info);
            for (int i = 0; i < rounds; ++i) {
                tw_timer id;
                if (tw_timer_start(r.rt, delay, 0, nop, nullptr, &id) != TW_EINVAL ||
                    std::string(tw_last_error_message()).find(want) == std::string::npos)
                    bad.fetch_add(1);
                if (tw_timer_query(r.rt, live, &info) != TW_OK || tw_last_error_message()[0] != '\0') bad.fetch_add(1);
            }
            tw_timer id;
            (void)tw_timer_start(r.rt, delay, 0, nop, nullptr, &id);  // exits with its message set
        });
    for (auto& th : threads) th.join();
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(last(), "");
    ASSERT_EQ(tw_timer_start(r.rt, TW_MAX_DELAY_NS + 1, 0, nop, nullptr, &live), TW_EINVAL);
    EXPECT_FALSE(last().empty());
    tw_timer_info info;
    tw_timer_info_init(&info);
    EXPECT_EQ(tw_timer_query(r.rt, 1, &info), TW_ENOENT);
    EXPECT_EQ(last(), "");
}

// ---- tw_config.name and Config::name ---------------------------------------------------------------
TEST(RuntimeName, CopiedAtCreateMadeUpWhenNullOrOlderAndUniqueInTheProcess) {
    std::vector<char> buf(32);
    std::strcpy(buf.data(), "ephemeral");
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.shards = 1;
    cfg.workers = 1;
    cfg.name = buf.data();
    tw_runtime* named = nullptr;
    ASSERT_EQ(tw_runtime_create(&cfg, &named), TW_OK);
    std::strcpy(buf.data(), "overwritten");  // copied at create
    // An older caller's struct (the 1.0 size, no `name`): a made-up name.
    cfg.size = 32;
    cfg.name = reinterpret_cast<const char*>(0x1);  // past the caller's size: never read
    tw_runtime* old = nullptr;
    ASSERT_EQ(tw_runtime_create(&cfg, &old), TW_OK);
    tw_config_init(&cfg);
    tw_runtime* unnamed = nullptr;
    ASSERT_EQ(tw_runtime_create(&cfg, &unnamed), TW_OK);
    auto text = [](tw_runtime* rt) {
        std::string t(static_cast<std::size_t>(tw_runtime_metrics(rt, nullptr, 0)) + 1024, '\0');
        t.resize(static_cast<std::size_t>(tw_runtime_metrics(rt, t.data(), t.size())));
        return t;
    };
    EXPECT_NE(text(named).find("tickwheel_timers_live{runtime=\"ephemeral\"} 0\n"), std::string::npos);
    const std::string a = text(old), b = text(unnamed);
    const auto name_in = [](const std::string& t) {
        const std::size_t at = t.find("runtime=\"");
        return t.substr(at + 9, t.find('"', at + 9) - at - 9);
    };
    EXPECT_EQ(name_in(a).rfind("tickwheel-", 0), 0u) << name_in(a);
    EXPECT_EQ(name_in(b).rfind("tickwheel-", 0), 0u) << name_in(b);
    EXPECT_NE(name_in(a), name_in(b));
    // C++: Config::name, Runtime::name().
    tickwheel::Config c = tw_test::small_config(1, 1);
    c.name = "cxx";
    Runtime cxx(c);
    EXPECT_EQ(cxx.name(), "cxx");
    Runtime made(tw_test::small_config(1, 1));
    EXPECT_EQ(made.name().rfind("tickwheel-", 0), 0u);
    EXPECT_NE(made.name(), name_in(a));
    EXPECT_NE(made.name(), name_in(b));
    for (tw_runtime* rt : {named, old, unnamed}) EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
}

// ---- C++: Error::what() carries the detail -------------------------------------------------------
TEST(ErrorWhat, NamesTheArgumentAndTheLimit) {
    Runtime rt(tw_test::small_config(1, 1));
    auto what_of = [](auto&& f) -> std::string {
        try {
            f();
        } catch (const tickwheel::Error& e) {
            return e.what();
        }
        return "(no exception)";
    };
    const std::string neg = what_of([&] { rt.start(-1ms, [] {}); });
    EXPECT_NE(neg.find("delay -1000000 ns is negative"), std::string::npos) << neg;
    EXPECT_NE(neg.find(": invalid argument"), std::string::npos) << neg;
    const std::string big = what_of([&] { rt.start(tickwheel::kMaxDelay + 1ns, [] {}); });
    EXPECT_NE(big.find("delay 1152921504606846977 ns is above kMaxDelay (1152921504606846976 ns)"), std::string::npos)
        << big;
    const std::string zero = what_of([&] { rt.start_periodic(0ns, [] {}); });
    EXPECT_NE(zero.find("period 0 ns: a periodic timer needs a period >= 1 ns"), std::string::npos) << zero;
    const std::string adv = what_of([&] { rt.advance(1ms); });
    EXPECT_NE(adv.find("has no manual clock"), std::string::npos) << adv;
    const std::string res = what_of([] {
        tickwheel::Config c;
        c.resolution = 10ns;
        Runtime bad(c);
    });
    EXPECT_NE(res.find("resolution 10 ns is outside 1 us .. 1 s"), std::string::npos) << res;
    const std::string grp = what_of([&] { rt.stop_group(0); });
    EXPECT_NE(grp.find("group 0"), std::string::npos) << grp;
    tickwheel::Config lim = tw_test::small_config(1, 1);
    lim.max_timers = 1;
    Runtime limited(lim);
    limited.start(1h, [] {});
    const std::string full = what_of([&] { limited.start(1h, [] {}); });
    EXPECT_NE(full.find("max_timers (1) timers are alive: pending timer limit reached"), std::string::npos) << full;
    // The detail is taken once: an Error the program makes later is plain.
    std::error_code ec;
    rt.reset(1, -5ns, ec);
    ASSERT_EQ(ec, tickwheel::errc::invalid_argument);
    const tickwheel::Error first(ec);
    EXPECT_NE(std::string(first.what()).find("delay -5 ns"), std::string::npos) << first.what();
    EXPECT_STREQ(tickwheel::Error(ec).what(), "invalid argument");
    EXPECT_STREQ(tickwheel::Error(tickwheel::errc::not_found).what(), "no such pending timer");
    // Shutdown from a callback: would_deadlock, with the case.
    std::string from_cb;
    std::atomic<bool> done{false};
    rt.start(0ns, [&] {
        from_cb = what_of([&] { rt.shutdown(); });
        done = true;
    });
    ASSERT_TRUE(wait_until([&] { return done.load(); }));
    EXPECT_NE(from_cb.find("shutdown called from inside one of the runtime's callbacks"), std::string::npos) << from_cb;
    EXPECT_NE(from_cb.find("would deadlock"), std::string::npos) << from_cb;
}

// ---- the manual clock's "now": a deadline computed the documented way ---------------------------
// On a manual runtime the machine's clock runs on while the virtual one
// stands still, so a deadline from tw_now_ns()/Runtime::now() lands early
// in virtual time; the runtime-bound forms are right on both kinds.
TEST(ClockNow, CDeadlineFromTwRuntimeNowNsIsRightOnAManualRuntime) {
    CRuntime r(TW_CONFIG_MANUAL_CLOCK);
    std::this_thread::sleep_for(20ms);  // the machine's clock moves on; the virtual one does not
    std::atomic<int> fired{0};
    tw_timer_spec s;
    tw_timer_spec_init(&s);
    s.callback = count_cb;
    s.arg = &fired;
    s.deadline_ns = tw_runtime_now_ns(r.rt, TW_CLOCK_MONOTONIC) + 30000000000ull;  // the documented form: 30 s
    tw_timer id;
    ASSERT_EQ(tw_timer_start_ex(r.rt, &s, &id), TW_OK);
    EXPECT_EQ(tw_runtime_advance(r.rt, 1000000), 0);               // 1 ms: not yet
    EXPECT_EQ(tw_runtime_advance(r.rt, 29998000000ull), 0);        // 29.999 s: not yet
    EXPECT_EQ(fired.load(), 0);
    EXPECT_EQ(tw_runtime_advance(r.rt, 1000000), 1);               // 30 s: now
    EXPECT_EQ(fired.load(), 1);
    // The machine-clock form is what the docs warn about: on this runtime
    // it is ahead of the virtual clock by the time spent since creation.
    EXPECT_GT(tw_now_ns(), tw_runtime_now_ns(r.rt, TW_CLOCK_MONOTONIC) - 30000000000ull + 20000000ull);
}

TEST(ClockNow, CDeadlineFromTwRuntimeNowNsIsRightOnARealRuntime) {
    CRuntime r;
    std::atomic<int> fired{0};
    std::atomic<std::uint64_t> ran_at{0};
    struct Arg {
        std::atomic<int>* fired;
        std::atomic<std::uint64_t>* at;
    } arg{&fired, &ran_at};
    tw_timer_spec s;
    tw_timer_spec_init(&s);
    s.callback = [](void* a, tw_timer) {
        auto* x = static_cast<Arg*>(a);
        x->at->store(tw_now_ns());
        x->fired->fetch_add(1);
    };
    s.arg = &arg;
    const std::uint64_t deadline = tw_runtime_now_ns(r.rt, TW_CLOCK_MONOTONIC) + 20000000ull;  // 20 ms
    s.deadline_ns = deadline;
    tw_timer id;
    ASSERT_EQ(tw_timer_start_ex(r.rt, &s, &id), TW_OK);
    ASSERT_TRUE(wait_until([&] { return fired.load() == 1; }));
    EXPECT_GE(ran_at.load(), deadline);  // never early, on the machine's clock it is
}

TEST(ClockNow, CxxStartAtClockNowIsRightOnAManualAndOnARealRuntime) {
    {
        tickwheel::Config c = tw_test::small_config(1, 1);
        c.manual_clock = true;
        Runtime rt(c);
        std::this_thread::sleep_for(20ms);
        std::atomic<int> fired{0};
        rt.start_at(rt.clock_now() + 30s, [&] { fired.fetch_add(1); });  // the documented form
        EXPECT_EQ(rt.advance(1ms), 0u);
        EXPECT_EQ(rt.advance(30s - 2ms), 0u);
        EXPECT_EQ(fired.load(), 0);
        EXPECT_EQ(rt.advance(1ms), 1u);
        EXPECT_EQ(fired.load(), 1);
        // clock_now(c) is now(c) as a TimePoint, for every clock.
        for (const auto clk : {tickwheel::TimerClock::monotonic, tickwheel::TimerClock::boottime,
                               tickwheel::TimerClock::realtime})
            EXPECT_EQ(rt.clock_now(clk).time_since_epoch(), rt.now(clk));
        // The static machine clock is not this runtime's.
        EXPECT_GT(Runtime::now(), rt.clock_now() - 30s + 20ms);
    }
    {
        Runtime rt(tw_test::small_config(1, 1));
        std::atomic<int> fired{0};
        std::atomic<tickwheel::TimePoint::rep> ran_at{0};
        const tickwheel::TimePoint deadline = rt.clock_now() + 20ms;
        rt.start_at(deadline, [&] {
            ran_at = Runtime::now().time_since_epoch().count();
            fired.fetch_add(1);
        });
        ASSERT_TRUE(wait_until([&] { return fired.load() == 1; }));
        EXPECT_GE(ran_at.load(), deadline.time_since_epoch().count());
        const tickwheel::TimePoint own = rt.clock_now();
        const tickwheel::TimePoint machine = Runtime::now();
        EXPECT_LE(own, machine);  // a real runtime's clock is the machine's
        EXPECT_GT(own, machine - 10s);
    }
}
