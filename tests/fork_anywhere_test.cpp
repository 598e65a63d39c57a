// SPDX-License-Identifier: MIT OR Apache-2.0
// fork() at any instant (issue 31, "fork at any instant"; src/runtime/fork.cpp
// lists every piece of process-wide state and its rule). The child of a
// fork taken at any schedule point of a runtime's creation and first start
// -- from the thread at that point, or from another thread while it is
// parked there -- creates a runtime, fires a timer within 1 s and exits 0;
// its fast clock ends calibrated (or off) rather than calibrating for ever.
// The parent waits for each child with a deadline and kills a hung one.
//
// The points: every test_hooks::schedule_point call (clock readings, parks,
// the windows of test_hooks.hpp, 'C' inside the fast clock's decision and
// at the end of its calibration, 'S' in a resync), plus one more this
// program adds: getenv("TICKWHEEL_TSC") (the interposed getenv() below),
// which the fast clock's decision calls -- at 069403a under the process-wide
// mutex that a child forked meanwhile inherited locked (bug 2), so that a
// fork there is forced on old code too. ctest runs this program a second
// time with TICKWHEEL_TSC=0 (the decision then reads only the environment).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "runtime/clock.hpp"
#include "runtime/counters.hpp"
#include "runtime/hazard.hpp"
#include "runtime/test_hooks.hpp"
#include "test_support.hpp"
#include "test_support/capi.hpp"
#include "test_support/fork_child.hpp"
#include "tickwheel/tickwheel.h"

extern char** environ;

using namespace std::chrono_literals;
namespace hooks = tickwheel::rt::test_hooks;
namespace fc = tickwheel::rt::fast_clock;

namespace {

// ---- the points -------------------------------------------------------------
// Where every point goes while a test is armed (see at_point below).
std::atomic<void (*)(char)> g_point{nullptr};

bool is_tickwheel_tsc(const char* name) noexcept {
    const char* want = "TICKWHEEL_TSC";
    std::size_t i = 0;
    for (; want[i] != '\0'; ++i)
        if (name[i] != want[i]) return false;
    return name[i] == '\0';
}

}  // namespace

// The process's getenv(): the library's (a static archive: its call binds
// here), and every shared library's that this program loads. A scan of the
// environment as glibc's own (no lock, no allocation, no call into a
// sanitizer's interceptors), plus the point 'g' for "TICKWHEEL_TSC".
extern "C" char* getenv(const char* name) noexcept {
    if (is_tickwheel_tsc(name)) {
        if (auto* f = g_point.load(std::memory_order_acquire)) f('g');
    }
    std::size_t n = 0;
    while (name[n] != '\0' && name[n] != '=') ++n;
    if (name[n] == '=') return nullptr;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
        const char* s = *e;
        std::size_t i = 0;
        while (i < n && s[i] == name[i]) ++i;
        if (i == n && s[i] == '=') return const_cast<char*>(s + n + 1);
    }
    return nullptr;
}

namespace {

void schedule_point_hook(char site) {
    if (auto* f = g_point.load(std::memory_order_acquire)) f(site);
}

/// How long a child may take before the parent calls it hung and kills it:
/// far above what a child needs (tens of ms; its own timer must fire within
/// 1 s of its start), so reaching it means a hang, not a slow machine.
constexpr auto kChildLimit = tw_test::kSanitized ? 30s : 10s;

// ---- the child ------------------------------------------------------------------
std::atomic<int> g_child_fired{0};
void child_cb(void*, tw_timer) { g_child_fired.fetch_add(1); }
std::atomic<int> g_parent_fired{0};
void parent_cb(void*, tw_timer) { g_parent_fired.fetch_add(1); }


/// What every child does, in its only thread (the one that forked, wherever
/// it was): a runtime, a timer that fires within 1 s of its start, and a
/// fast clock that ends its calibration (issue 31, S3): a start
/// kCalibrationNs after the decision ends it, so it is then kOn or kOff.
int child_body() {
    g_child_fired = 0;
    g_point.store(nullptr);
    hooks::schedule_point.store(nullptr);
    hooks::in_window.store(nullptr);
    const tw_config cfg = tw_test::capi::c_config(1, 2);
    tw_runtime* rt = nullptr;
    CHILD_CHECK(tw_runtime_create(&cfg, &rt) == TW_OK);
    const auto started = std::chrono::steady_clock::now();
    tw_timer id = 0;
    CHILD_CHECK(tw_timer_start(rt, 1'000'000, 0, child_cb, nullptr, &id) == TW_OK);
    while (g_child_fired.load() == 0 && std::chrono::steady_clock::now() - started < 1s)
        std::this_thread::sleep_for(200us);
    if (g_child_fired.load() == 0) {  // how late, or never (for the message)
        while (g_child_fired.load() == 0 && std::chrono::steady_clock::now() - started < 5s)
            std::this_thread::sleep_for(1ms);
        std::fprintf(stderr, "child: the timer %s\n",
                     g_child_fired.load() == 0
                         ? "never fired (5 s)"
                         : ("fired after " +
                            std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                               std::chrono::steady_clock::now() - started)
                                               .count()) +
                            " ms")
                               .c_str());
    }
    CHILD_CHECK(g_child_fired.load() == 1);  // within 1 s of its start
    // The calibration (if the decision started one) needs kCalibrationNs
    // from the decision, which this runtime's creation took at the latest.
    std::this_thread::sleep_for(std::chrono::nanoseconds(fc::kCalibrationNs) + 2ms);
    fc::testing::forget_thread();  // this start re-synchronises: it ends the calibration...
    CHILD_CHECK(tw_timer_start(rt, 1'000'000, 0, child_cb, nullptr, &id) == TW_OK);
    // ...unless its pair was not kept (a pair whose two TSC reads lie more
    // than ~1 us apart: the child's first touches of pages fault): the
    // next re-synchronisations do.
    for (int i = 0; i < 1000 && fc::mode() == fc::Mode::kCalibrating; ++i) {
        fc::testing::forget_thread();
        (void)fc::monotonic_upper_ns();
    }
    const fc::Mode m = fc::mode();
    if (m != fc::Mode::kOn && m != fc::Mode::kOff)
        std::fprintf(stderr, "child: the fast clock is in mode %d, not on or off%s\n", static_cast<int>(m),
                     m == fc::Mode::kCalibrating ? " (still calibrating after 1000 re-synchronisations)" : "");
    CHILD_CHECK(m == fc::Mode::kOn || m == fc::Mode::kOff);
    CHILD_CHECK(tw_runtime_destroy(rt) == TW_OK);
    return 0;
}

/// fork()s; the child runs child_body() and _exits with its result (no
/// atexit, no static destructor of the parent's state). Returns the pid.
pid_t fork_child() {
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) std::_Exit(child_body());
    return pid;
}

using tw_test::ChildResult;

/// Waits for `pid` at most kChildLimit; kills it (SIGKILL) after that.
ChildResult wait_child(pid_t pid) { return tw_test::wait_child(pid, std::chrono::steady_clock::now() + kChildLimit); }

// ---- forking at the n-th point ------------------------------------------------------
enum class Who { Self, Other };
/// Whose points are counted: the test's thread's (the creation's and the
/// first start's own, in program order) or every other thread's (the
/// runtime's shard driver and workers, in whatever order they come).
enum class Whose { Caller, Runtime };
thread_local bool t_caller = false;

/// Forks at a point of `whose` while armed: the `occurrence`-th (from 0)
/// point of site `at_site`, or, with `at_site` 0, the `occurrence`-th point
/// of any site; or, with `pred`, the first for which pred() is true.
/// Who::Self: the thread at the point forks (its child goes on from inside
/// the point). Who::Other: that thread parks at the point while a thread
/// outside the library forks, then goes on. Records the sites of `whose`
/// points it passed (`seen`).
struct Forker {
    static inline std::atomic<bool> armed{false};
    static inline std::atomic<int> count{0};  // points of `whose` so far
    static inline std::atomic<int> of_site[128];
    static inline std::atomic<char> at_site{0};
    static inline std::atomic<int> occurrence{-1};
    static inline std::atomic<bool (*)(char)> pred{nullptr};
    static inline std::atomic<Who> who{Who::Self};
    static inline std::atomic<Whose> whose{Whose::Caller};
    static inline std::atomic<pid_t> pid{-1};
    static inline std::atomic<char> site{0};  // where it forked (0: not yet)
    static inline std::atomic<char> seen[512];  // the sites of `whose` points, in order (the first 512)
    static inline std::atomic<int> request{0};  // Other: 1 = forker, please fork; 2 = forked
    static inline std::atomic<bool> quit{false};

    std::thread other;

    Forker() {
        quit = false;
        t_caller = true;
        other = std::thread([] {
            for (;;) {
                while (request.load() != 1) {
                    if (quit.load()) return;
                    std::this_thread::sleep_for(50us);
                }
                settle();
                pid = fork_child();
                request = 2;
            }
        });
        g_point.store(&at_point);
        hooks::schedule_point.store(&schedule_point_hook);
    }
    ~Forker() {
        armed = false;
        hooks::schedule_point.store(nullptr);
        g_point.store(nullptr);
        quit = true;
        if (request.load() == 1) request = 2;
        other.join();
        t_caller = false;
    }

    static void arm(char at, int occ, Who w, Whose ws, bool (*p)(char) = nullptr) {
        count = 0;
        for (auto& n : of_site) n = 0;
        at_site = at;
        occurrence = occ;
        pred = p;
        who = w;
        whose = ws;
        pid = -1;
        site = 0;
        request = 0;
        armed = true;
    }

    /// Under a sanitizer: its allocator (clang 14) is not fork-safe while
    /// other threads allocate (fork_test.cpp, SKIP_UNDER_SANITIZERS): give
    /// the threads that are not waiting for this one time to go quiet.
    static void settle() {
        if (tw_test::kSanitized) std::this_thread::sleep_for(30ms);
    }

    static void at_point(char s) {
        if (!armed.load(std::memory_order_relaxed)) return;
        if (t_caller != (whose.load(std::memory_order_relaxed) == Whose::Caller)) return;
        const int n = count.fetch_add(1);
        if (n < 512) seen[n] = s;
        const int k = of_site[static_cast<unsigned char>(s) & 127].fetch_add(1);
        if (auto* p = pred.load()) {
            if (site.load() != 0 || !p(s)) return;
        } else if (const char at = at_site.load(); at != 0 ? s != at || k != occurrence.load() : n != occurrence.load()) {
            return;
        }
        site = s;
        if (who.load() == Who::Self) {
            settle();
            pid = fork_child();
            return;
        }
        request = 1;
        while (request.load() != 2) std::this_thread::sleep_for(20us);
    }
};

/// One round: the process's first runtime (the fast clock reset to its
/// first state: the creation decides), a wait past kCalibrationNs (so that
/// the first start ends the calibration), the first start -- and the next
/// ones, as long as the calibration has not ended (a start whose pair was
/// refused, its two TSC reads more than ~1 us apart, does not end it: here
/// often the first after a fork, whose parent faults on its first write to
/// each page, copy-on-write) -- and their timers' runs; forked at point `n`
/// of `whose` by `who`. Returns the number of such points the round passed
/// through; `forked_at` the site of the fork (0: none), `child` how the
/// child ended.
std::string round_forked_at(char at, int occ, Who who, Whose whose, char& forked_at, ChildResult& child,
                            bool (*pred)(char) = nullptr) {
    fc::testing::reset();  // no other thread reads the clock: the last round's runtime is gone
    g_parent_fired = 0;
    Forker::arm(at, occ, who, whose, pred);
    tw_runtime* rt = tw_test::capi::create_runtime(tw_test::capi::c_config(1, 2));
    if (rt == nullptr) return {};
    std::this_thread::sleep_for(std::chrono::nanoseconds(fc::kCalibrationNs) + 2ms);
    int started = 0;
    do {
        tw_timer id = 0;
        EXPECT_EQ(tw_timer_start(rt, 1'000'000, 0, parent_cb, nullptr, &id), TW_OK);
        ++started;
    } while (fc::mode() == fc::Mode::kCalibrating && started < 100);
    EXPECT_TRUE(tw_test::wait_until([started] { return g_parent_fired.load() == started; }));
    Forker::armed = false;
    std::string seen;
    for (int i = 0; i < std::min(Forker::count.load(), 512); ++i) seen += Forker::seen[i].load();
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
    forked_at = Forker::site.load();
    const pid_t pid = Forker::pid.load();
    if (pid > 0) child = wait_child(pid);
    return seen;
}

/// Inside the end of the calibration: Mode::kFinishing, 4. (A number, so
/// that this program also builds against 069403a, where that step had no
/// state of its own and ran in kCalibrating, under the mutex: that counts
/// too.)
bool ending_calibration() {
    const int m = static_cast<int>(fc::mode());
    return m == 4 || m == static_cast<int>(fc::Mode::kCalibrating);
}

/// Whether the fast clock's decision starts a calibration here (the TSC
/// path is used: not with TICKWHEEL_TSC=0). Leaves it undecided.
bool calibrates() {
    fc::testing::reset();
    fc::prepare();
    const bool yes = fc::mode() == fc::Mode::kCalibrating;
    fc::testing::reset();
    return yes;
}

/// Forks at every point of `whose` (up to `max_points`), once by the thread
/// at the point and once by another thread. The caller's points are named
/// by site and occurrence (the 2nd 'C' is the end of the calibration
/// whatever came before it), from a first round that does not fork; a point
/// a round did not reach (a start whose pair was refused passes no 'C' or
/// 'S') is tried again, up to 3 rounds. The runtime's threads' points are
/// named by their index (their order varies from round to round). Returns
/// the sites forked at.
std::string sweep(Whose whose, int max_points) {
    int forks = 0, failed = 0, missed = 0;
    std::string sites, failures;
    const auto deadline = std::chrono::steady_clock::now() + (tw_test::kSanitized ? 80s : 40s);  // (ctest: 120 s)
    char none = 0;
    ChildResult unused;
    const std::string baseline = round_forked_at(0, -1, Who::Self, whose, none, unused);
    std::printf("%s, a round without a fork: %s\n", whose == Whose::Caller ? "the caller's points" : "the runtime's points",
                baseline.c_str());
    int of_site[128] = {};
    for (int n = 0; n < static_cast<int>(baseline.size()) && n < max_points; ++n) {
        const char at = whose == Whose::Caller ? baseline[static_cast<std::size_t>(n)] : 0;
        const int occ = whose == Whose::Caller ? of_site[static_cast<unsigned char>(at) & 127]++ : n;
        for (const Who who : {Who::Self, Who::Other}) {
            char site = 0;
            ChildResult child;
            for (int attempt = 0; attempt < 3 && site == 0; ++attempt)
                (void)round_forked_at(at, occ, who, whose, site, child);
            if (site == 0) {
                ++missed;
                continue;
            }
            ++forks;
            sites += site;
            if (child.hung || child.status != 0) {
                ++failed;
                failures += "\n  point " + std::to_string(n) + " '" + site + "' (#" + std::to_string(occ) + ") forked by " +
                            (who == Who::Self ? "the thread there" : "another thread") + ": " +
                            (child.hung ? std::string("hung (killed)") : "status " + std::to_string(child.status));
            }
        }
        if (std::chrono::steady_clock::now() > deadline) {
            ADD_FAILURE() << "the sweep took too long (" << forks << " forks)";
            break;
        }
        if (failed >= 3) break;  // failed already: do not spend minutes on more
    }
    std::printf("%s: %d forks at the sites %s (%d not reached in 3 rounds)\n",
                whose == Whose::Caller ? "the caller's points" : "the runtime's points", forks, sites.c_str(), missed);
    EXPECT_EQ(failed, 0) << "children that failed:" << failures;
    return sites;
}

}  // namespace

// Bug 2, as a user meets it: a thread is inside the process's first
// tw_runtime_create() -- in the fast clock's decision, reading
// TICKWHEEL_TSC -- when another thread forks (or it forks itself). The child
// creates a runtime and fires a timer. At 069403a its tw_runtime_create()
// never returned (the decision's mutex was copied locked): killed after
// kChildLimit, reported hung.
TEST(ForkAnywhere, ChildOfAForkWhileAThreadIsInsideTheFirstCreatesDecisionCreatesARuntime) {
    Forker forker;
    for (const Who who : {Who::Other, Who::Self}) {
        char site = 0;
        ChildResult child;
        (void)round_forked_at(0, -1, who, Whose::Caller, site, child, [](char s) { return s == 'g'; });
        ASSERT_EQ(site, 'g') << "the first tw_runtime_create() did not read TICKWHEEL_TSC";
        EXPECT_FALSE(child.hung) << (who == Who::Other ? "another thread" : "the deciding thread")
                                 << " forked while the fast clock decided: the child's tw_runtime_create() hung";
        EXPECT_EQ(child.status, 0) << "the child's check failed (status = the check's line % 200 + 1)";
    }
}

// S3: a fork while a thread ends the calibration (inside the first start
// kCalibrationNs after the decision: point 'C' while the mode is kFinishing).
// The child must end a calibration of its own. Old code ended it under the
// process-wide mutex (taken with try_lock), which stayed locked in the
// child: its calibration never ended, every start read the exact clock.
// 069403a has no point there, so this test fails there at its first
// ASSERT; with the point added inside the old lock (the revert check), the
// child reports "still calibrating".
TEST(ForkAnywhere, ChildOfAForkAtTheEndOfTheCalibrationEndsItsOwn) {
    if (!calibrates()) GTEST_SKIP() << "the TSC path is not used here (no calibration)";
    Forker forker;
    for (const Who who : {Who::Other, Who::Self}) {
        char site = 0;
        ChildResult child;
        // The first start's pair may be refused (its two TSC reads more than
        // ~1 us apart): then no calibration ends in that round. A few rounds.
        for (int attempt = 0; attempt < 5 && site == 0; ++attempt)
            (void)round_forked_at(0, -1, who, Whose::Caller, site, child,
                                  [](char s) { return s == 'C' && ending_calibration(); });
        ASSERT_EQ(site, 'C') << "no fork inside the end of the calibration";
        EXPECT_FALSE(child.hung) << "the child hung (killed)";
        EXPECT_EQ(child.status, 0) << "the child's check failed (status = the check's line % 200 + 1; its stderr "
                                      "says which: \"still calibrating\" is S3)";
    }
}

// The sweep, over the points the test's thread passes through itself: the
// creation's (clock readings 'm' 'k', the fast clock's decision 'C' and its
// getenv 'g', ...) and the first start's (its reading 'm', the end of the
// calibration 'C', the resync's 'S', the token 'T', ...), in program order.
TEST(ForkAnywhere, ChildCreatesARuntimeAfterAForkAtEveryPointOfTheFirstCreateAndStart) {
    Forker forker;
    // The first start's pair may be refused (its two TSC reads more than ~1
    // us apart: seen under TSan on a loaded machine), and then that sweep
    // passes no end of the calibration and no resync: up to three sweeps
    // (every child of each is checked) until one covers them.
    std::string sites;
    for (int attempt = 0; attempt < 3; ++attempt) {
        sites = sweep(Whose::Caller, 200);
        if (!calibrates() || (std::count(sites.begin(), sites.end(), 'C') >= 4 && sites.find('S') != std::string::npos))
            break;
    }
    EXPECT_GE(sites.size(), 10u) << "too few points to mean anything";
    // The decision ('C' and its getenv 'g', by each of the two) and, where
    // the TSC path is used, the end of the calibration ('C') and a resync
    // ('S').
    EXPECT_GE(std::count(sites.begin(), sites.end(), 'C'), 2);
    EXPECT_GE(std::count(sites.begin(), sites.end(), 'g'), 2);
    if (calibrates()) {
        EXPECT_GE(std::count(sites.begin(), sites.end(), 'C'), 4);
        EXPECT_NE(sites.find('S'), std::string::npos);
    }
}

// The same over the points the runtime's own threads pass through meanwhile
// (the shard's driver parking, waking, passing; the worker's run), the
// first 40 of them in whatever order they come.
TEST(ForkAnywhere, ChildCreatesARuntimeAfterAForkAtEveryPointOfTheRuntimesThreadsMeanwhile) {
    Forker forker;
    const std::string sites = sweep(Whose::Runtime, 40);
    EXPECT_GE(sites.size(), 10u) << "too few points to mean anything";
}

// Rules 2 and 3 of fork.cpp: a child frees what the threads it does not
// have held. In the parent: a thread parked inside a hazard scope on a
// record, and every stripe lease held by a live thread. The child must find
// the record not held (else the record -- or a new runtime's record at the
// same address -- would stay in quarantine for ever) and a lease for a new
// thread (else every thread of its runtimes would share one contended
// stripe). Without fork_detail::hazard_in_child() and stripes_in_child(),
// both checks fail.
TEST(ForkAnywhere, ChildFreesTheHazardSlotsAndStripeLeasesOfThreadsItDoesNotHave) {
    namespace rt = tickwheel::rt;
    static int record = 0;  // what the parked thread acts on (its address names it)
    std::atomic<bool> go{false};
    std::atomic<int> in_scope{0};
    std::thread acting([&] {
        rt::HazardScope scope(&record);
        in_scope = 1;
        while (!go.load()) std::this_thread::sleep_for(100us);
    });
    // Threads that lease a stripe each, until the leases run out.
    std::vector<std::thread> leasing;
    std::atomic<int> leased{0}, shared{0};
    while (shared.load() == 0 && leasing.size() < rt::kLeases + 8) {
        leasing.emplace_back([&] {
            (rt::this_thread_stripe() == rt::kShared ? shared : leased).fetch_add(1);
            while (!go.load()) std::this_thread::sleep_for(100us);
        });
        const std::size_t n = leasing.size();
        ASSERT_TRUE(tw_test::wait_until([&] { return static_cast<std::size_t>(leased + shared) == n; }));
    }
    ASSERT_TRUE(tw_test::wait_until([&] { return in_scope.load() == 1; }));
    rt::hazard_barrier();
    ASSERT_TRUE(rt::hazard_held(&record)) << "(the parked thread's scope)";
    ASSERT_GE(shared.load(), 1) << "every lease is held";
    Forker::settle();
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
        int rc = 0;
        rt::hazard_barrier();
        if (rt::hazard_held(&record)) {
            std::fprintf(stderr, "child: a record is held by a thread the child does not have\n");
            rc |= 1;
        }
        unsigned stripe = rt::kShared;
        std::thread t([&stripe] { stripe = rt::this_thread_stripe(); });
        t.join();
        if (stripe == rt::kShared) {
            std::fprintf(stderr, "child: no stripe lease for a new thread (all held by threads it does not have)\n");
            rc |= 2;
        }
        std::_Exit(rc);
    }
    ASSERT_GT(pid, 0);
    const ChildResult child = wait_child(pid);
    go = true;
    acting.join();
    for (auto& t : leasing) t.join();
    EXPECT_FALSE(child.hung);
    EXPECT_EQ(child.status, 0) << "1: a hazard slot of a thread gone still held; 2: no stripe lease left";
}
