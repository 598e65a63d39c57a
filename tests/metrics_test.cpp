// SPDX-License-Identifier: MIT OR Apache-2.0
// Runtime::metrics() and tw_runtime_metrics(): the Prometheus text
// exposition (format 0.0.4) of a runtime's counters, gauges and lateness
// histogram. Every text is checked with a strict line grammar
// (prometheus_text.hpp), and its values against tw_runtime_stats() /
// Runtime::stats() at quiescence after known numbers of timers started,
// fired, stopped and reset; then the snprintf-like sizing contract, bad
// arguments, a shut-down runtime, calls from a callback, a fork() child, and
// concurrent scrapes while timers run (for TSan).
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "prometheus_text.hpp"
#include "runtime/counters.hpp"
#include "runtime/metrics.hpp"
#include "test_support.hpp"
#include "tickwheel/runtime.hpp"
#include "tickwheel/tickwheel.h"

using namespace std::chrono_literals;
using tickwheel::Runtime;
using tw_test::wait_until;

namespace {

constexpr const char* kHist = "tickwheel_callback_lateness_seconds";

/// Parses one runtime's text strictly; every series must carry the
/// runtime label, with one value (`name`, if given), which is then dropped.
prom::Exposition parse_or_fail(const std::string& text, const char* name = nullptr) {
    prom::Exposition e;
    std::string error;
    const bool ok = prom::parse(text, e, error);
    EXPECT_TRUE(ok) << error << "\n---- text ----\n" << text;
    std::vector<std::string> runtimes;
    EXPECT_TRUE(prom::take_label(e, "runtime", runtimes, error)) << error;
    EXPECT_EQ(runtimes.size(), 1u);
    if (name != nullptr && !runtimes.empty()) {
        EXPECT_EQ(runtimes[0], name);
    }
    return e;
}

std::uint64_t u64(const prom::Exposition& e, const char* name, const std::map<std::string, std::string>& labels = {}) {
    const prom::Sample* s = e.sample(name, labels);
    EXPECT_NE(s, nullptr) << "no series " << name;
    if (s == nullptr) return ~std::uint64_t{0};
    // Integers are written as integers: compare them exactly, not as doubles.
    for (const char c : s->raw) EXPECT_TRUE(c >= '0' && c <= '9') << name << " = " << s->raw;
    return std::stoull(s->raw);
}

/// The C API's text, through the sizing call and an exact buffer.
/// A one-shard, one-worker C runtime named `name` (NULL: the library makes
/// one up); nullptr (and a test failure) if it could not be made.
tw_runtime* c_runtime_named(const char* name) {
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.shards = 1;
    cfg.workers = 1;
    cfg.name = name;
    tw_runtime* rt = nullptr;
    EXPECT_EQ(tw_runtime_create(&cfg, &rt), TW_OK);
    return rt;
}

std::string c_metrics(tw_runtime* rt) {
    const int n = tw_runtime_metrics(rt, nullptr, 0);
    EXPECT_GT(n, 0);
    if (n <= 0) return {};
    std::string buf(static_cast<std::size_t>(n) + 1024, '\x7f');
    const int m = tw_runtime_metrics(rt, buf.data(), buf.size());
    EXPECT_GE(m, 0);
    EXPECT_LT(static_cast<std::size_t>(m), buf.size());
    EXPECT_EQ(buf[static_cast<std::size_t>(m)], '\0');
    buf.resize(static_cast<std::size_t>(m));
    return buf;
}

tw_stats c_stats(tw_runtime* rt) {
    tw_stats st;
    std::memset(&st, 0, sizeof st);
    st.size = sizeof st;
    EXPECT_EQ(tw_runtime_stats(rt, &st), TW_OK);
    return st;
}

/// Every value the text shares with tw_stats / tw_runtime_shard_stats.
void expect_matches_stats(const prom::Exposition& e, tw_runtime* rt, const tw_stats& st) {
    EXPECT_EQ(u64(e, "tickwheel_timers_started_total"), st.started);
    EXPECT_EQ(u64(e, "tickwheel_timers_fired_total"), st.fired);
    EXPECT_EQ(u64(e, "tickwheel_timers_stopped_total"), st.stopped);
    EXPECT_EQ(u64(e, "tickwheel_timers_reset_total"), st.reset);
    EXPECT_EQ(u64(e, "tickwheel_timers_cancelled_at_shutdown_total"), st.cancelled_at_shutdown);
    EXPECT_EQ(u64(e, "tickwheel_callback_exceptions_total"), st.callback_exceptions);
    EXPECT_EQ(u64(e, "tickwheel_timers_live"), st.live);
    EXPECT_EQ(u64(e, "tickwheel_timers_pending"), st.pending);
    EXPECT_EQ(u64(e, "tickwheel_shards"), st.shards);
    EXPECT_EQ(u64(e, "tickwheel_workers"), st.workers);
    EXPECT_EQ(u64(e, "tickwheel_shut_down"), st.shut_down);
    EXPECT_DOUBLE_EQ(*e.value("tickwheel_resolution_seconds"), static_cast<double>(st.resolution_ns) / 1e9);
    EXPECT_EQ(u64(e, "tickwheel_callback_lateness_seconds_count"), st.lateness_samples);
    EXPECT_EQ(u64(e, "tickwheel_callback_lateness_seconds_bucket", {{"le", "+Inf"}}), st.lateness_samples);
    EXPECT_DOUBLE_EQ(*e.value("tickwheel_callback_lateness_max_seconds"),
                     static_cast<double>(st.lateness_max_ns) / 1e9);
    // The sum lies between count x smallest and count x largest lateness.
    const double sum = *e.value("tickwheel_callback_lateness_seconds_sum");
    EXPECT_GE(sum, 0.0);
    EXPECT_LE(sum, static_cast<double>(st.lateness_samples) * static_cast<double>(st.lateness_max_ns) / 1e9 * 1.000001);
    if (st.lateness_samples > 0 && st.lateness_max_ns > 0) {
        EXPECT_GT(sum, 0.0);
    }
    std::uint64_t inbox = 0;
    for (std::uint32_t i = 0; i < st.shards; ++i) {
        std::uint64_t pending = 0, in = 0;
        ASSERT_EQ(tw_runtime_shard_stats(rt, i, &pending, &in), TW_OK);
        const std::map<std::string, std::string> shard{{"shard", std::to_string(i)}};
        EXPECT_EQ(u64(e, "tickwheel_shard_pending", shard), pending) << "shard " << i;
        EXPECT_EQ(u64(e, "tickwheel_shard_inbox", shard), in) << "shard " << i;
        inbox += in;
    }
    EXPECT_EQ(inbox, st.inbox);
    EXPECT_EQ(e.value("tickwheel_shard_pending", {{"shard", std::to_string(st.shards)}}), std::nullopt);
    // Since 1.7: the stages (driver and wait have a sample per run, run one
    // per run that returned), the saturation gauges (idle at quiescence),
    // the memory gauges.
    EXPECT_EQ(u64(e, "tickwheel_callback_stage_seconds_count", {{"stage", "driver"}}), st.lateness_samples);
    EXPECT_EQ(u64(e, "tickwheel_callback_stage_seconds_count", {{"stage", "wait"}}), st.lateness_samples);
    EXPECT_EQ(u64(e, "tickwheel_callback_stage_seconds_count", {{"stage", "run"}}), st.run_duration_samples);
    EXPECT_EQ(u64(e, "tickwheel_workers_busy"), st.workers_busy);
    EXPECT_EQ(u64(e, "tickwheel_waiting_for_worker"), st.waiting_for_worker);
    EXPECT_EQ(u64(e, "tickwheel_callbacks_running"), st.callbacks_running);
    EXPECT_EQ(u64(e, "tickwheel_timer_slots"), st.slots);
    EXPECT_EQ(u64(e, "tickwheel_timer_resident_bytes"), st.resident_bytes);
    // driver + wait = lateness, run by run: their sums add up to its sum
    // (each sum is exact to the ns; the text prints it in decimal).
    const double driver_sum = *e.value("tickwheel_callback_stage_seconds_sum", {{"stage", "driver"}});
    const double wait_sum = *e.value("tickwheel_callback_stage_seconds_sum", {{"stage", "wait"}});
    EXPECT_NEAR(driver_sum + wait_sum, *e.value("tickwheel_callback_lateness_seconds_sum"), 1e-6);
}

std::atomic<int> g_fired{0};
void count_cb(void*, tw_timer) { g_fired.fetch_add(1); }

/// A runtime with `shards` shards and 2 workers.
tw_runtime* make_runtime(std::uint32_t shards) {
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.shards = shards;
    cfg.workers = 2;
    tw_runtime* rt = nullptr;
    EXPECT_EQ(tw_runtime_create(&cfg, &rt), TW_OK);
    return rt;
}

/// Waits until the shards have filed every request (inbox empty) and
/// `pending` timers are pending: the state a scrape is compared in.
[[nodiscard]] bool quiesce(tw_runtime* rt, std::uint64_t pending) {
    return wait_until([&] {
        const tw_stats st = c_stats(rt);
        return st.inbox == 0 && st.pending == pending && st.live >= pending;
    });
}

}  // namespace

// ---- the grammar checker itself: it must reject what the format forbids -------------
TEST(MetricsGrammar, CheckerAcceptsAValidExpositionAndRejectsEachViolation) {
    const std::string good =
        "# HELP a_total Things.\n# TYPE a_total counter\na_total 3\n"
        "# HELP g A gauge with \\\\ and \\n escapes.\n# TYPE g gauge\ng{shard=\"0\"} 1.5\ng{shard=\"1\",x=\"q\\\"\"} -2e-3\n"
        "# HELP h Hist.\n# TYPE h histogram\nh_bucket{le=\"0.5\"} 1\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 2\n"
        "h_sum 0.75\nh_count 2\n";
    prom::Exposition e;
    std::string error;
    ASSERT_TRUE(prom::parse(good, e, error)) << error;
    EXPECT_EQ(e.families.size(), 3u);
    EXPECT_EQ(*e.value("g", {{"shard", "1"}, {"x", "q\""}}), -2e-3);

    const char* const bad[] = {
        "# TYPE a_total counter\na_total 3\n",                                     // no HELP
        "# HELP a_total x\na_total 3\n",                                           // no TYPE
        "# HELP a_total x\n# TYPE a_total counter\n# TYPE a_total counter\na_total 1\n",  // two TYPEs
        "# HELP a_total x\n# HELP a_total x\n# TYPE a_total counter\na_total 1\n",  // two HELPs
        "# HELP a x\n# TYPE a counter\na 1\n",                                      // counter without _total
        "# HELP a_total x\n# TYPE a_total counter\na_total -1\n",                   // negative counter
        "# HELP g x\n# TYPE g gauge\ng 1\ng 2\n",                                   // duplicate series
        "# HELP g x\n# TYPE g gauge\ng 1 1700000000000\n",                          // timestamp
        "# HELP g x\n# TYPE g gauge\ng 1",                                          // no final newline
        "# HELP g x\n# TYPE g gauge\n\ng 1\n",                                      // empty line
        "# HELP g x\n# TYPE g gauge\n# a comment\ng 1\n",                           // other comment
        "# HELP g x\n# TYPE g gauge\ng one\n",                                      // bad value
        "# HELP g x\n# TYPE g gauge\ng{1a=\"0\"} 1\n",                              // bad label name
        "# HELP g x\n# TYPE g gauge\ng{a=\"\\t\"} 1\n",                             // bad escape
        "# HELP 1g x\n# TYPE 1g gauge\n1g 1\n",                                     // bad metric name
        "# HELP g x\n# TYPE g summary\ng 1\n",                                      // type not allowed here
        "# HELP g x\n# TYPE g gauge\ng 1\n# HELP k x\n# TYPE k gauge\nk 1\ng{a=\"1\"} 2\n",  // family split
        "# HELP g x\n# TYPE g gauge\ng 1\n# HELP g y\n",                            // HELP after samples
        // histograms: not cumulative; +Inf != _count; no +Inf; le not increasing
        "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
        "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n",
        "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"2\"} 2\nh_sum 1\nh_count 2\n",
        ("# HELP h x\n# TYPE h histogram\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\n"
         "h_sum 1\nh_count 1\n"),
        "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n",  // no _sum
        "# HELP h x\n# TYPE h histogram\nh 1\n",                                // no suffix
        "# HELP g x\n# TYPE g gauge\ng{a=\"\xff\"} 1\n",                        // not UTF-8 (issue 34)
        "# HELP g x\n# TYPE g gauge\ng{a=\"\xc3\"} 1\n",                        // a cut sequence
        "# HELP g x\n# TYPE g gauge\ng{a=\"\xc0\xaf\"} 1\n",                   // an overlong form
        "# HELP g x\n# TYPE g gauge\ng{a=\"\xed\xa0\x80\"} 1\n",               // a surrogate
    };
    for (const char* text : bad) EXPECT_FALSE(prom::parse(text, e, error)) << "accepted:\n" << text;
}

// ---- formatting ------------------------------------------------------------------------
TEST(MetricsFormat, SecondsAreExactDecimals) {
    using tickwheel::rt::format_seconds;
    EXPECT_EQ(format_seconds(0, 0), "0");
    EXPECT_EQ(format_seconds(0, 5'000), "0.000005");
    EXPECT_EQ(format_seconds(2, 500'000'000), "2.5");
    EXPECT_EQ(format_seconds(12, 345'001), "12.000345001");
    EXPECT_EQ(format_seconds(0, 1), "0.000000001");
    EXPECT_EQ(format_seconds(18446744073, 709'551'615), "18446744073.709551615");
}

TEST(MetricsFormat, HistogramBucketsCountValuesAtMostTheirBoundExactly) {
    // Values on, just above and between the bounds; the export buckets are
    // exact (le means <=), unlike the log-linear buckets behind them.
    tickwheel::rt::LatencyHistogram h;
    const std::uint64_t values[] = {0, 5'000, 5'001, 9'999, 1'000'000, 1'000'001, 10'000'000'000, 10'000'000'001,
                                    ~std::uint64_t{0} >> 1};
    for (const std::uint64_t v : values) h.record(v);
    const auto x = h.export_snapshot();
    EXPECT_EQ(x.count, std::size(values));
    EXPECT_EQ(x.count, h.summarize().count);

    tickwheel::rt::MetricsSnapshot s;
    s.shards = 1;
    s.pending_per_shard = {0};
    s.inbox_per_shard = {0};
    s.lateness = x;
    const prom::Exposition e = parse_or_fail(tickwheel::rt::format_metrics(s));
    auto le = [&](const char* bound) { return u64(e, "tickwheel_callback_lateness_seconds_bucket", {{"le", bound}}); };
    EXPECT_EQ(le("0.000005"), 2u);   // 0, 5000
    EXPECT_EQ(le("0.00001"), 4u);    // + 5001, 9999
    EXPECT_EQ(le("0.0005"), 4u);
    EXPECT_EQ(le("0.001"), 5u);      // + 1 ms
    EXPECT_EQ(le("0.0025"), 6u);     // + 1 ms + 1 ns
    EXPECT_EQ(le("5"), 6u);
    EXPECT_EQ(le("10"), 7u);         // + 10 s
    EXPECT_EQ(le("+Inf"), 9u);
    EXPECT_EQ(u64(e, "tickwheel_callback_lateness_seconds_count"), 9u);
    // The sum, exact to the nanosecond (as a double it would not be).
    EXPECT_EQ(e.sample("tickwheel_callback_lateness_seconds_sum")->raw, "9223372056.856795809");
    EXPECT_EQ(e.sample("tickwheel_callback_lateness_max_seconds")->raw, "9223372036.854775807");
    // Twenty bounds, 5 us .. 10 s, then +Inf.
    const prom::Family* f = e.family(kHist);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->type, "histogram");
    EXPECT_EQ(f->samples.size(), tickwheel::rt::LatencyHistogram::kExportBuckets + 2);
}

// The export bucket from the log-linear one (a table and a compare, on every
// record since 1.7) is the bound search's, at and around every bound.
TEST(MetricsFormat, ExportBucketFromTheLogLinearBucketIsTheBoundSearchs) {
    using H = tickwheel::rt::LatencyHistogram;
    std::vector<std::uint64_t> values = {0, 1, 7, 8, 9, 4999, 5000, 5001, ~std::uint64_t{0}};
    for (const std::uint64_t b : H::kExportBoundsNs)
        for (std::int64_t d = -300; d <= 300; ++d) values.push_back(b + static_cast<std::uint64_t>(d));
    for (std::uint64_t v = 1; v < (std::uint64_t{1} << 40); v = v * 3 / 2 + 1) values.push_back(v);
    for (const std::uint64_t v : values)
        ASSERT_EQ(H::export_bucket_of(v, H::bucket_of(v)), H::export_bucket_of(v)) << v;
}

TEST(MetricsFormat, FamiliesHaveThePinnedNamesAndTypes) {
    Runtime rt(tw_test::small_config(3, 2));
    const prom::Exposition e = parse_or_fail(rt.metrics());
    const std::pair<const char*, const char*> expected[] = {
        {"tickwheel_timers_started_total", "counter"}, {"tickwheel_timers_fired_total", "counter"},
        {"tickwheel_timers_stopped_total", "counter"}, {"tickwheel_timers_reset_total", "counter"},
        {"tickwheel_timers_live", "gauge"},            {"tickwheel_timers_pending", "gauge"},
        {"tickwheel_timer_slots", "gauge"},            {"tickwheel_shard_pending", "gauge"},
        {"tickwheel_shard_inbox", "gauge"},            {kHist, "histogram"},
        // since 1.7 (issue 34)
        {"tickwheel_callback_stage_seconds", "histogram"}, {"tickwheel_workers_busy", "gauge"},
        {"tickwheel_waiting_for_worker", "gauge"},     {"tickwheel_callbacks_running", "gauge"},
        {"tickwheel_oldest_callback_age_seconds", "gauge"}, {"tickwheel_timer_resident_bytes", "gauge"},
    };
    for (const auto& [name, type] : expected) {
        const prom::Family* f = e.family(name);
        ASSERT_NE(f, nullptr) << name;
        EXPECT_EQ(f->type, type) << name;
    }
    for (const prom::Family& f : e.families) EXPECT_EQ(f.name.rfind("tickwheel_", 0), 0u) << f.name;
    EXPECT_EQ(e.family("tickwheel_shard_pending")->samples.size(), 3u);
    EXPECT_EQ(e.family("tickwheel_shard_inbox")->samples.size(), 3u);
    // A fresh runtime: all zero, no samples yet.
    EXPECT_EQ(u64(e, "tickwheel_timers_started_total"), 0u);
    EXPECT_EQ(u64(e, "tickwheel_callback_lateness_seconds_count"), 0u);
    EXPECT_EQ(e.sample("tickwheel_callback_lateness_seconds_sum")->raw, "0");
    // One histogram per stage, each labelled stage="...".
    for (const char* stage : {"driver", "wait", "run"})
        EXPECT_EQ(u64(e, "tickwheel_callback_stage_seconds_count", {{"stage", stage}}), 0u) << stage;
    EXPECT_EQ(u64(e, "tickwheel_workers_busy"), 0u);
    EXPECT_EQ(u64(e, "tickwheel_waiting_for_worker"), 0u);
    EXPECT_EQ(u64(e, "tickwheel_callbacks_running"), 0u);
    EXPECT_EQ(e.sample("tickwheel_oldest_callback_age_seconds")->raw, "0");
}

// ---- values at quiescence ------------------------------------------------------------------
TEST(MetricsValues, MatchStatsAfterKnownStartsFiresStopsAndResets) {
    tw_runtime* rt = make_runtime(2);
    ASSERT_NE(rt, nullptr);
    g_fired = 0;
    constexpr int kFire = 40, kHold = 30, kStop = 12, kReset = 5;
    for (int i = 0; i < kFire; ++i) {
        tw_timer id = 0;
        ASSERT_EQ(tw_timer_start(rt, static_cast<std::uint64_t>(i % 4) * 1'000'000, 0, count_cb, nullptr, &id), TW_OK);
    }
    std::vector<tw_timer> held;
    for (int i = 0; i < kHold; ++i) {
        tw_timer_spec spec;
        tw_timer_spec_init(&spec);
        spec.shard = i % 2;
        spec.delay_ns = 3600ull * 1'000'000'000;  // an hour: pending for the test's life
        spec.callback = count_cb;
        tw_timer id = 0;
        ASSERT_EQ(tw_timer_start_ex(rt, &spec, &id), TW_OK);
        held.push_back(id);
    }
    for (int i = 0; i < kStop; ++i) ASSERT_EQ(tw_timer_stop(rt, held[static_cast<std::size_t>(i)]), TW_OK);
    for (int i = 0; i < kReset; ++i)
        ASSERT_EQ(tw_timer_reset(rt, held[static_cast<std::size_t>(kStop + i)], 7200ull * 1'000'000'000), TW_OK);
    ASSERT_TRUE(wait_until([] { return g_fired.load() == kFire; }));
    ASSERT_TRUE(wait_until([&] { return c_stats(rt).lateness_samples == kFire && c_stats(rt).fired == kFire; }));
    ASSERT_TRUE(quiesce(rt, kHold - kStop));

    const prom::Exposition e = parse_or_fail(c_metrics(rt));
    const tw_stats st = c_stats(rt);
    expect_matches_stats(e, rt, st);
    EXPECT_EQ(u64(e, "tickwheel_timers_started_total"), std::uint64_t{kFire + kHold});
    EXPECT_EQ(u64(e, "tickwheel_timers_fired_total"), std::uint64_t{kFire});
    EXPECT_EQ(u64(e, "tickwheel_timers_stopped_total"), std::uint64_t{kStop});
    EXPECT_EQ(u64(e, "tickwheel_timers_reset_total"), std::uint64_t{kReset});
    EXPECT_EQ(u64(e, "tickwheel_timers_live"), std::uint64_t{kHold - kStop});
    EXPECT_EQ(u64(e, "tickwheel_timers_pending"), std::uint64_t{kHold - kStop});
    EXPECT_EQ(u64(e, "tickwheel_shard_pending", {{"shard", "0"}}) + u64(e, "tickwheel_shard_pending", {{"shard", "1"}}),
              std::uint64_t{kHold - kStop});
    EXPECT_EQ(u64(e, "tickwheel_callback_lateness_seconds_count"), std::uint64_t{kFire});
    EXPECT_GE(u64(e, "tickwheel_timer_slots"), std::uint64_t{kHold - kStop});
    EXPECT_EQ(u64(e, "tickwheel_shut_down"), 0u);

    // The C++ text of the same runtime state is the same text.
    // (Runtime::metrics() is what tw_runtime_metrics() copies.)
    EXPECT_EQ(c_metrics(rt), c_metrics(rt));
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
}

TEST(MetricsValues, CxxMetricsMatchStatsAtQuiescence) {
    Runtime rt(tw_test::small_config(2, 2));
    std::atomic<int> fired{0};
    for (int i = 0; i < 25; ++i) rt.start(std::chrono::milliseconds(i % 3), [&] { fired.fetch_add(1); });
    auto far = rt.start(1h, [] {});
    ASSERT_TRUE(wait_until([&] { return fired.load() == 25 && rt.stats().lateness_samples == 25; }));
    ASSERT_TRUE(wait_until([&] {
        const auto st = rt.stats();
        return st.inbox_per_shard[0] + st.inbox_per_shard[1] == 0 && st.pending_per_shard[0] + st.pending_per_shard[1] == 1;
    }));
    const prom::Exposition e = parse_or_fail(rt.metrics());
    const tickwheel::Stats st = rt.stats();
    EXPECT_EQ(u64(e, "tickwheel_timers_started_total"), st.started);
    EXPECT_EQ(u64(e, "tickwheel_timers_fired_total"), st.fired);
    EXPECT_EQ(u64(e, "tickwheel_timers_live"), st.live);
    EXPECT_EQ(u64(e, "tickwheel_timer_slots"), st.slots);
    EXPECT_EQ(u64(e, "tickwheel_callback_lateness_seconds_count"), st.lateness_samples);
    EXPECT_EQ(u64(e, "tickwheel_shard_pending", {{"shard", "0"}}), st.pending_per_shard[0]);
    EXPECT_EQ(u64(e, "tickwheel_shard_pending", {{"shard", "1"}}), st.pending_per_shard[1]);
    EXPECT_DOUBLE_EQ(*e.value("tickwheel_callback_lateness_max_seconds"),
                     static_cast<double>(st.lateness_max.count()) / 1e9);
    EXPECT_TRUE(far.stop());
}

// ---- the snprintf-like buffer contract ---------------------------------------------------------
TEST(MetricsBuffer, SizingTruncationAndExactFit) {
    tw_runtime* rt = make_runtime(2);
    ASSERT_NE(rt, nullptr);
    // No timer: the text stays the same from call to call.
    const int n = tw_runtime_metrics(rt, nullptr, 0);
    ASSERT_GT(n, 100);
    const auto len = static_cast<std::size_t>(n);

    std::vector<char> buf(len + 8, 'x');
    // cap 1: an empty string, and still the full length; nothing else written.
    EXPECT_EQ(tw_runtime_metrics(rt, buf.data(), 1), n);
    EXPECT_EQ(buf[0], '\0');
    EXPECT_EQ(buf[1], 'x');

    // cap = len + 1: the whole text.
    std::fill(buf.begin(), buf.end(), 'x');
    EXPECT_EQ(tw_runtime_metrics(rt, buf.data(), len + 1), n);
    EXPECT_EQ(buf[len], '\0');
    EXPECT_EQ(buf[len + 1], 'x');
    const std::string full(buf.data());
    EXPECT_EQ(full.size(), len);
    EXPECT_EQ(full.back(), '\n');
    parse_or_fail(full);

    // cap = len: truncated by one byte, NUL-terminated, same return value.
    std::fill(buf.begin(), buf.end(), 'x');
    EXPECT_EQ(tw_runtime_metrics(rt, buf.data(), len), n);
    EXPECT_EQ(buf[len - 1], '\0');
    EXPECT_EQ(buf[len], 'x');
    EXPECT_EQ(std::string(buf.data()), full.substr(0, len - 1));

    // A small cap: a prefix.
    std::fill(buf.begin(), buf.end(), 'x');
    EXPECT_EQ(tw_runtime_metrics(rt, buf.data(), 10), n);
    EXPECT_EQ(std::string(buf.data()), full.substr(0, 9));
    EXPECT_EQ(buf[10], 'x');

    // cap 0 with a buffer: nothing written.
    buf[0] = 'x';
    EXPECT_EQ(tw_runtime_metrics(rt, buf.data(), 0), n);
    EXPECT_EQ(buf[0], 'x');

    // The C text is Runtime::metrics()'s, and a scrape changes no value.
    EXPECT_EQ(c_metrics(rt), full);
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
}

TEST(MetricsBuffer, BadArgumentsAreEinval) {
    char buf[16];
    std::memset(buf, 'x', sizeof buf);
    EXPECT_EQ(tw_runtime_metrics(nullptr, nullptr, 0), TW_EINVAL);
    EXPECT_EQ(tw_runtime_metrics(nullptr, buf, sizeof buf), TW_EINVAL);
    EXPECT_EQ(buf[0], '\0');  // an error leaves an empty string
    tw_runtime* rt = make_runtime(1);
    ASSERT_NE(rt, nullptr);
    EXPECT_EQ(tw_runtime_metrics(rt, nullptr, 1), TW_EINVAL);
    EXPECT_EQ(tw_runtime_metrics(rt, nullptr, 4096), TW_EINVAL);
    EXPECT_EQ(tw_runtime_metrics(rt, nullptr, static_cast<size_t>(-1)), TW_EINVAL);
    EXPECT_GT(tw_runtime_metrics(rt, nullptr, 0), 0);
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
}

// ---- shutdown, callbacks, fork ------------------------------------------------------------------
TEST(MetricsLifecycle, AShutDownRuntimeReportsItsFinalValues) {
    tw_runtime* rt = make_runtime(2);
    ASSERT_NE(rt, nullptr);
    g_fired = 0;
    for (int i = 0; i < 10; ++i) {
        tw_timer id = 0;
        ASSERT_EQ(tw_timer_start(rt, 0, 0, count_cb, nullptr, &id), TW_OK);
    }
    for (int i = 0; i < 7; ++i) {
        tw_timer id = 0;
        ASSERT_EQ(tw_timer_start(rt, 3600ull * 1'000'000'000, 0, count_cb, nullptr, &id), TW_OK);
    }
    ASSERT_TRUE(wait_until([&] { return c_stats(rt).lateness_samples == 10; }));
    ASSERT_EQ(tw_runtime_shutdown(rt), TW_OK);

    const std::string text = c_metrics(rt);
    const prom::Exposition e = parse_or_fail(text);
    const tw_stats st = c_stats(rt);
    EXPECT_EQ(st.shut_down, 1u);
    expect_matches_stats(e, rt, st);
    EXPECT_EQ(u64(e, "tickwheel_shut_down"), 1u);
    EXPECT_EQ(u64(e, "tickwheel_timers_cancelled_at_shutdown_total"), 7u);
    EXPECT_EQ(u64(e, "tickwheel_timers_fired_total"), 10u);
    EXPECT_EQ(u64(e, "tickwheel_timers_live"), 0u);
    EXPECT_EQ(u64(e, "tickwheel_callback_lateness_seconds_count"), 10u);
    // Final: nothing changes any more.
    EXPECT_EQ(c_metrics(rt), text);
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);

    Runtime cxx(tw_test::small_config(1, 1));
    cxx.start(1h, [] {});
    cxx.shutdown();
    const prom::Exposition c = parse_or_fail(cxx.metrics());
    EXPECT_EQ(u64(c, "tickwheel_timers_cancelled_at_shutdown_total"), 1u);
    EXPECT_EQ(u64(c, "tickwheel_shut_down"), 1u);
}

TEST(MetricsLifecycle, ScrapingFromACallbackAndAReleaseHookWorks) {
    Runtime rt(tw_test::small_config(2, 2));
    std::string from_callback, from_hook;
    std::atomic<bool> done{false};
    struct Hook {
        Runtime* rt;
        std::string* out;
        std::atomic<bool>* done;
        Hook(Runtime* r, std::string* o, std::atomic<bool>* d) : rt(r), out(o), done(d) {}
        Hook(Hook&& h) noexcept : rt(std::exchange(h.rt, nullptr)), out(h.out), done(h.done) {}
        ~Hook() {
            if (rt == nullptr) return;
            *out = rt->metrics();  // the release hook, on the worker after the run
            done->store(true);
        }
        void operator()() const {}
    };
    rt.start(0ms, [&] { from_callback = rt.metrics(); });
    rt.start(0ms, Hook(&rt, &from_hook, &done));
    ASSERT_TRUE(wait_until([&] { return done.load() && rt.stats().fired == 2; }));
    rt.shutdown();  // joins the workers: the strings are written
    parse_or_fail(from_callback);
    parse_or_fail(from_hook);
    EXPECT_NE(from_callback.find("tickwheel_timers_started_total"), std::string::npos);
}

TEST(MetricsLifecycle, AForkChildGetsEforked) {
    tw_runtime* rt = make_runtime(1);
    ASSERT_NE(rt, nullptr);
    Runtime cxx(tw_test::small_config(1, 1));
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
        char buf[8] = "x";
        int rc = 0;
        if (tw_runtime_metrics(rt, buf, sizeof buf) != TW_EFORKED || buf[0] != '\0') rc |= 1;
        if (tw_runtime_metrics(rt, nullptr, 0) != TW_EFORKED) rc |= 2;
        try {
            (void)cxx.metrics();
            rc |= 4;
        } catch (const tickwheel::Error& e) {
            if (e.code() != tickwheel::errc::forked) rc |= 8;
        } catch (...) {
            rc |= 16;
        }
        std::_Exit(rc);
    }
    ASSERT_GT(pid, 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    EXPECT_GT(tw_runtime_metrics(rt, nullptr, 0), 0);  // the parent is unaffected
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
}

// ---- concurrency (TSan) -------------------------------------------------------------------------
TEST(MetricsConcurrency, ScrapesFromSeveralThreadsWhileTimersRunAreEachWellFormed) {
    tw_runtime* rt = make_runtime(2);
    ASSERT_NE(rt, nullptr);
    std::atomic<bool> stop{false};
    std::atomic<long> scrapes{0};
    std::atomic<int> bad{0};
    std::string first_error;
    std::mutex error_mutex;

    // Timer traffic: periodic timers firing every tick, and a producer
    // starting, stopping and resetting one-shot timers.
    std::vector<tw_timer> periodic;
    for (int i = 0; i < 4; ++i) {
        tw_timer id = 0;
        ASSERT_EQ(tw_timer_start(rt, 1'000'000, 1'000'000, count_cb, nullptr, &id), TW_OK);
        periodic.push_back(id);
    }
    std::thread producer([&] {
        while (!stop.load()) {
            tw_timer a = 0, b = 0;
            if (tw_timer_start(rt, 500'000, 0, count_cb, nullptr, &a) != TW_OK) break;
            if (tw_timer_start(rt, 50'000'000, 0, count_cb, nullptr, &b) != TW_OK) break;
            (void)tw_timer_reset(rt, b, 60'000'000);
            (void)tw_timer_stop(rt, b);
            std::this_thread::sleep_for(200us);
        }
    });
    std::vector<std::thread> scrapers;
    for (int t = 0; t < 3; ++t) {
        scrapers.emplace_back([&, t] {
            double last_started = 0, last_count = 0;
            while (!stop.load()) {
                std::string text;
                if (t == 0) {
                    text = c_metrics(rt);  // the C sizing + copy path
                } else {
                    const int n = tw_runtime_metrics(rt, nullptr, 0);
                    std::vector<char> buf(static_cast<std::size_t>(n > 0 ? n : 0) + 512);
                    const int m = tw_runtime_metrics(rt, buf.data(), buf.size());
                    if (m < 0 || static_cast<std::size_t>(m) >= buf.size()) continue;  // grew too much: retry
                    text.assign(buf.data(), static_cast<std::size_t>(m));
                }
                prom::Exposition e;
                std::string error;
                bool ok = prom::parse(text, e, error);
                std::vector<std::string> names;
                ok = ok && prom::take_label(e, "runtime", names, error) && names.size() == 1;
                // Counters never go back, from one scrape to the next.
                const double started = e.value("tickwheel_timers_started_total").value_or(-1);
                const double count = e.value("tickwheel_callback_lateness_seconds_count").value_or(-1);
                if (ok && (started < last_started || count < last_count)) {
                    ok = false;
                    error = "a counter went back";
                }
                last_started = started;
                last_count = count;
                if (!ok) {
                    std::lock_guard<std::mutex> lk(error_mutex);
                    if (bad.fetch_add(1) == 0) first_error = error + "\n" + text;
                }
                scrapes.fetch_add(1);
            }
        });
    }
    std::this_thread::sleep_for(tw_test::kSanitized ? 1500ms : 500ms);
    stop = true;
    producer.join();
    for (auto& th : scrapers) th.join();
    EXPECT_EQ(bad.load(), 0) << first_error;
    EXPECT_GT(scrapes.load(), 3);
    for (const tw_timer id : periodic) EXPECT_EQ(tw_timer_stop_sync(rt, id), TW_OK);
    EXPECT_GT(c_stats(rt).fired, 0u);
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
}

// ---- 1.5: runtime names, queues, build info, several runtimes ----------------------------
TEST(MetricsLabels, LabelValuesAreEscapedAsTheFormatSays) {
    using tickwheel::rt::escape_label_value;
    EXPECT_EQ(escape_label_value("plain-1"), "plain-1");
    EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    EXPECT_EQ(escape_label_value(""), "");
}

// The review of 1.5's metrics (issue 34): a name that is not UTF-8 put its
// raw bytes into every runtime="..." label, and the text no longer decoded
// as UTF-8, which the format requires. Each such byte is now U+FFFD.
TEST(MetricsLabels, BytesThatAreNotUtf8BecomeTheReplacementCharacter) {
    using tickwheel::rt::escape_label_value;
    const std::string fffd = "\xEF\xBF\xBD";
    EXPECT_EQ(escape_label_value("cache-\xff\xfe"), "cache-" + fffd + fffd);
    EXPECT_EQ(escape_label_value("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e"),
              "\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e");  // valid: kept (e-acute, euro, G clef)
    EXPECT_EQ(escape_label_value("a\xc3"), "a" + fffd);                         // cut at the end
    EXPECT_EQ(escape_label_value("\xe2\x82x"), fffd + fffd + "x");               // cut in the middle
    EXPECT_EQ(escape_label_value("\xc0\xaf"), fffd + fffd);                      // overlong '/'
    EXPECT_EQ(escape_label_value("\xed\xa0\x80"), fffd + fffd + fffd);           // a surrogate
    EXPECT_EQ(escape_label_value("\xf4\x90\x80\x80"), fffd + fffd + fffd + fffd);  // above U+10FFFF
    EXPECT_EQ(escape_label_value("\x80\"\xff\n"), fffd + "\\\"" + fffd + "\\n");  // with escapes
    // Every byte value, alone and after each lead byte: the text is UTF-8.
    for (int a = 0; a < 256; ++a)
        for (int b = 0; b < 256; b += 15) {
            const std::string v{static_cast<char>(a), static_cast<char>(b), 'z'};
            const std::string out = escape_label_value(v);
            EXPECT_EQ(prom::detail::invalid_utf8_at(out), std::string_view::npos) << a << ' ' << b;
        }

    // Through both APIs: the exposition stays valid UTF-8 (the strict parser
    // checks it) and carries the replaced name.
    tw_runtime* rt = c_runtime_named("cache-\xff\xfe");
    ASSERT_NE(rt, nullptr);
    parse_or_fail(c_metrics(rt), ("cache-" + fffd + fffd).c_str());
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
    tickwheel::Config c = tw_test::small_config(1, 1);
    c.name = "x\xfe\"y";
    Runtime cxx(c);
    parse_or_fail(cxx.metrics(), ("x" + fffd + "\"y").c_str());
    EXPECT_EQ(cxx.name(), "x\xfe\"y");  // the name itself is kept as given
}

// Only NULL gets a made-up name (issue 34): 1.5 made one up for "" too. C++'s
// Config::name cannot tell "" from unset: empty there is "make one up".
TEST(MetricsLabels, AnEmptyCNameIsKeptAndOnlyNullGetsAMadeUpOne) {
    tw_runtime* rt = c_runtime_named("");
    ASSERT_NE(rt, nullptr);
    const std::string text = c_metrics(rt);
    EXPECT_NE(text.find("tickwheel_timers_started_total{runtime=\"\"} 0\n"), std::string::npos) << text;
    parse_or_fail(text, "");
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);

    rt = c_runtime_named(nullptr);
    ASSERT_NE(rt, nullptr);
    prom::Exposition e;
    std::string error;
    ASSERT_TRUE(prom::parse(c_metrics(rt), e, error)) << error;
    std::vector<std::string> names;
    ASSERT_TRUE(prom::take_label(e, "runtime", names, error)) << error;
    ASSERT_EQ(names.size(), 1u);
    EXPECT_EQ(names[0].rfind("tickwheel-", 0), 0u) << names[0];
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);

    // C++: empty is the documented "make one up"; the C API's "" above did
    // not leak into the next construction on this thread.
    Runtime cxx(tw_test::small_config(1, 1));
    EXPECT_EQ(cxx.name().rfind("tickwheel-", 0), 0u) << cxx.name();
}

TEST(MetricsLabels, EverySeriesCarriesTheRuntimesNameAndTheBuildInfoItsVersion) {
    tickwheel::Config c = tw_test::small_config(2, 1);
    c.name = "lib \"x\" \\ y\nz";
    Runtime rt(c);
    const std::string text = rt.metrics();
    EXPECT_NE(text.find("{runtime=\"lib \\\"x\\\" \\\\ y\\nz\""), std::string::npos) << text;
    prom::Exposition e = parse_or_fail(text, "lib \"x\" \\ y\nz");  // every series has it, read back exactly
    const std::string version = std::to_string(TW_VERSION_MAJOR) + '.' + std::to_string(TW_VERSION_MINOR) + '.' +
                                std::to_string(TW_VERSION_PATCH);
    EXPECT_EQ(u64(e, "tickwheel_build_info", {{"version", version}}), 1u);
    EXPECT_EQ(e.family("tickwheel_build_info")->type, "gauge");
    EXPECT_EQ(e.family("tickwheel_queue_due"), nullptr);  // no queue: no queue family
}

TEST(MetricsQueues, EachLiveQueueIsExportedByItsSlotAndLeavesWithIt) {
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.shards = 1;
    cfg.workers = 1;
    cfg.flags = TW_CONFIG_MANUAL_CLOCK;
    cfg.name = "q";
    tw_runtime* rt = nullptr;
    ASSERT_EQ(tw_runtime_create(&cfg, &rt), TW_OK);
    tw_queue* q[2] = {nullptr, nullptr};
    ASSERT_EQ(tw_queue_create(rt, &q[0]), TW_OK);
    ASSERT_EQ(tw_queue_create(rt, &q[1]), TW_OK);
    tw_timer_spec s;
    tw_timer_spec_init(&s);
    s.callback = count_cb;
    s.delay_ns = 1000000;  // 1 ms
    tw_timer id;
    for (int i = 0; i < 3; ++i) {
        s.queue = q[i == 2 ? 1 : 0];
        ASSERT_EQ(tw_timer_start_ex(rt, &s, &id), TW_OK);
    }
    s.queue = q[1];
    s.delay_ns = 3600000000000ull;  // an hour: stays pending
    ASSERT_EQ(tw_timer_start_ex(rt, &s, &id), TW_OK);
    ASSERT_EQ(tw_runtime_advance(rt, 2000000), 0);  // 2 ms: delivered to the queues, not run
    ASSERT_EQ(tw_queue_run(q[0], 1, 0), 1);         // q0: one of its two run, one still due
    ASSERT_EQ(tw_queue_run(q[1], 8, 0), 1);         // q1: its due one
    auto slot_label = [](const prom::Family* f, std::size_t i) { return f->samples.at(i).labels.at("queue"); };
    {
        const prom::Exposition e = parse_or_fail(c_metrics(rt), "q");
        const prom::Family* ran = e.family("tickwheel_queue_ran_total");
        ASSERT_NE(ran, nullptr);
        ASSERT_EQ(ran->samples.size(), 2u);
        EXPECT_EQ(ran->type, "counter");
        const std::string s0 = slot_label(ran, 0), s1 = slot_label(ran, 1);
        EXPECT_NE(s0, s1);
        EXPECT_EQ(u64(e, "tickwheel_queue_ran_total", {{"queue", s0}}), 1u);
        EXPECT_EQ(u64(e, "tickwheel_queue_ran_total", {{"queue", s1}}), 1u);
        EXPECT_EQ(u64(e, "tickwheel_queue_delivered_total", {{"queue", s0}}), 2u);
        EXPECT_EQ(u64(e, "tickwheel_queue_delivered_total", {{"queue", s1}}), 1u);
        EXPECT_EQ(u64(e, "tickwheel_queue_due", {{"queue", s0}}), 1u);
        EXPECT_EQ(u64(e, "tickwheel_queue_due", {{"queue", s1}}), 0u);
        EXPECT_EQ(u64(e, "tickwheel_queue_runners", {{"queue", s0}}), 0u);
        for (const char* f : {"tickwheel_queue_signal_lateness_p99_seconds", "tickwheel_queue_signal_lateness_max_seconds",
                              "tickwheel_queue_run_lateness_p99_seconds", "tickwheel_queue_run_lateness_max_seconds"}) {
            ASSERT_NE(e.family(f), nullptr) << f;
            EXPECT_EQ(e.family(f)->samples.size(), 2u) << f;
        }
        // The same numbers as tw_queue_get_stats().
        tw_queue_stats qs;
        tw_queue_stats_init(&qs);
        ASSERT_EQ(tw_queue_get_stats(q[0], &qs), TW_OK);
        EXPECT_EQ(qs.delivered, 2u);
        EXPECT_EQ(qs.ran, 1u);
        EXPECT_EQ(qs.due, 1u);
    }
    ASSERT_EQ(tw_queue_destroy(q[0]), TW_OK);
    {
        const prom::Exposition e = parse_or_fail(c_metrics(rt), "q");
        ASSERT_EQ(e.family("tickwheel_queue_ran_total")->samples.size(), 1u);  // the destroyed queue left
    }
    ASSERT_EQ(tw_queue_destroy(q[1]), TW_OK);
    EXPECT_EQ(parse_or_fail(c_metrics(rt), "q").family("tickwheel_queue_due"), nullptr);
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
}

TEST(MetricsCombined, SeveralRuntimesAreOneStrictExpositionWithEachFamilyOnce) {
    tickwheel::Config ca = tw_test::small_config(2, 1), cb = tw_test::small_config(1, 1);
    ca.name = "app";
    cb.name = "lib";
    Runtime a(ca), b(cb);
    std::atomic<int> fired{0};
    for (int i = 0; i < 3; ++i) a.start(1ms, [&] { fired.fetch_add(1); });
    b.start(1ms, [&] { fired.fetch_add(1); });
    ASSERT_TRUE(wait_until([&] { return fired.load() == 4 && a.stats().live == 0 && b.stats().live == 0; }));

    const Runtime* both[] = {&a, &b};
    const std::string text = Runtime::metrics(both);
    prom::Exposition all;
    std::string error;
    ASSERT_TRUE(prom::parse(text, all, error)) << error << "\n" << text;  // strict: each family's lines together, once
    // Each runtime's share is exactly its own text's samples.
    for (const auto& [rt, name] : {std::pair{&a, "app"}, std::pair{&b, "lib"}}) {
        prom::Exposition own = parse_or_fail(rt->metrics(), name);
        for (const prom::Family& f : own.families) {
            const prom::Family* g = all.family(f.name);
            ASSERT_NE(g, nullptr) << f.name;
            EXPECT_EQ(g->type, f.type);
            for (const prom::Sample& s : f.samples) {
                auto labels = s.labels;
                labels.emplace("runtime", name);
                const prom::Sample* t = all.sample(s.name, labels);
                ASSERT_NE(t, nullptr) << s.name;
                if (s.name.find("lateness") == std::string::npos) {
                    EXPECT_EQ(t->raw, s.raw) << s.name << " of " << name;
                }
            }
        }
    }
    // The C call writes the same text (at quiescence), with snprintf's contract.
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.shards = 1;
    cfg.workers = 1;
    tw_runtime* c[2] = {nullptr, nullptr};
    cfg.name = "c0";
    ASSERT_EQ(tw_runtime_create(&cfg, &c[0]), TW_OK);
    cfg.name = "c1";
    ASSERT_EQ(tw_runtime_create(&cfg, &c[1]), TW_OK);
    const int n = tw_runtimes_metrics(c, 2, nullptr, 0);
    ASSERT_GT(n, 0);
    std::string buf(static_cast<std::size_t>(n) + 1, '\x7f');
    ASSERT_EQ(tw_runtimes_metrics(c, 2, buf.data(), buf.size()), n);
    buf.resize(static_cast<std::size_t>(n));
    prom::Exposition ce;
    ASSERT_TRUE(prom::parse(buf, ce, error)) << error;
    std::vector<std::string> names;
    ASSERT_TRUE(prom::take_label(ce, "runtime", names, error)) << error;
    EXPECT_EQ(names, (std::vector<std::string>{"c0", "c1"}));
    char one = 'x';
    EXPECT_EQ(tw_runtimes_metrics(c, 2, &one, 1), n);
    EXPECT_EQ(one, '\0');
    EXPECT_EQ(tw_runtimes_metrics(c, 0, nullptr, 0), 0);  // no runtime: an empty text
    EXPECT_EQ(tw_runtimes_metrics(nullptr, 1, nullptr, 0), TW_EINVAL);
    // Two single texts concatenated repeat each family's HELP/TYPE: the strict
    // 0.0.4 reading refuses that (Prometheus and prometheus_client take it:
    // ctest metrics_prometheus_client); the combined text is the strict form.
    prom::Exposition cat;
    EXPECT_FALSE(prom::parse(a.metrics() + b.metrics(), cat, error));
    for (tw_runtime* rt : c) {
        EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
    }
}
