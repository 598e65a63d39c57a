// SPDX-License-Identifier: MIT OR Apache-2.0
// Runtime::metrics(): the Prometheus text exposition (format 0.0.4) of a
// runtime's counters, gauges and lateness histogram. See metrics.hpp.
#include "runtime/metrics.hpp"

#include <charconv>
#include <string_view>

#include "runtime/runtime_core.hpp"
#include "tickwheel/runtime.hpp"

namespace tickwheel {

namespace rt {

namespace {

constexpr std::uint64_t kNsPerS = 1'000'000'000;

/// Appends the lines of the exposition to a string.
class Writer {
public:
    explicit Writer(std::string& out) : out_(out) {}

    /// The `# HELP` and `# TYPE` lines of a family. `help` must not contain
    /// a backslash or a newline (the format would need them escaped): all
    /// of ours are constants without.
    void family(std::string_view name, std::string_view type, std::string_view help) {
        out_ += "# HELP ";
        out_ += name;
        out_ += ' ';
        out_ += help;
        out_ += "\n# TYPE ";
        out_ += name;
        out_ += ' ';
        out_ += type;
        out_ += '\n';
    }
    /// A sample: `name{labels} value`. `labels` is the text between the
    /// braces (empty: no braces).
    void sample(std::string_view name, std::string_view labels, std::string_view value) {
        out_ += name;
        if (!labels.empty()) {
            out_ += '{';
            out_ += labels;
            out_ += '}';
        }
        out_ += ' ';
        out_ += value;
        out_ += '\n';
    }
    void sample(std::string_view name, std::string_view labels, std::uint64_t value) {
        sample(name, labels, number(value));
    }
    /// A family of one unlabelled sample.
    void single(std::string_view name, std::string_view type, std::string_view help, std::uint64_t value) {
        family(name, type, help);
        sample(name, {}, value);
    }
    void single(std::string_view name, std::string_view type, std::string_view help, std::string_view value) {
        family(name, type, help);
        sample(name, {}, value);
    }

    static std::string number(std::uint64_t v) {
        char buf[24];
        const auto r = std::to_chars(buf, buf + sizeof buf, v);
        return std::string(buf, r.ptr);
    }

private:
    std::string& out_;
};

std::string seconds_of_ns(std::uint64_t ns) { return format_seconds(ns / kNsPerS, ns % kNsPerS); }

/// One gauge per shard, labelled {shard="i"}.
void per_shard(Writer& w, std::string_view name, std::string_view help, const std::vector<std::uint64_t>& values) {
    w.family(name, "gauge", help);
    for (std::size_t i = 0; i < values.size(); ++i) {
        std::string labels = "shard=\"";
        labels += Writer::number(i);
        labels += '"';
        w.sample(name, labels, values[i]);
    }
}

}  // namespace

std::string format_seconds(std::uint64_t s, std::uint64_t ns) {
    std::string out = Writer::number(s);
    if (ns == 0) return out;
    char frac[10];
    for (int i = 8; i >= 0; --i) {
        frac[i] = static_cast<char>('0' + ns % 10);
        ns /= 10;
    }
    int len = 9;
    while (frac[len - 1] == '0') --len;  // ns != 0: some digit is not '0'
    out += '.';
    out.append(frac, static_cast<std::size_t>(len));
    return out;
}

MetricsSnapshot take_metrics_snapshot(const RuntimeCore& core) {
    MetricsSnapshot s;
    s.shards = static_cast<std::uint32_t>(core.shards.size());
    s.workers = core.dispatcher->concurrency();
    s.shut_down = core.shut_down.load(std::memory_order_acquire);
    s.resolution_ns = static_cast<std::uint64_t>(core.config.resolution.count());
    s.pending_per_shard.reserve(core.shards.size());
    s.inbox_per_shard.reserve(core.shards.size());
    for (const auto& sh : core.shards) {
        s.pending_per_shard.push_back(sh->pending());
        s.inbox_per_shard.push_back(sh->inbox_size());
        s.slots += sh->table().high_water();
    }
    const Counters& c = core.counters;
    // Released before started: a timer is released after it is counted as
    // started, so live = started - released is then never below the truth.
    const std::uint64_t released = c.sum(kReleased);
    s.started = c.sum(kStarted);
    s.live = s.started > released ? s.started - released : 0;
    s.fired = c.sum(kFired);
    s.stopped = c.sum(kStopped);
    s.reset = c.sum(kReset);
    s.callback_exceptions = c.sum(kCallbackExceptions);
    s.cancelled_at_shutdown = c.sum(kCancelledAtShutdown);
    s.lateness = core.lateness.export_snapshot();
    return s;
}

std::string format_metrics(const MetricsSnapshot& s) {
    std::string out;
    out.reserve(4096 + 160 * s.pending_per_shard.size());
    Writer w(out);

    // ---- counters ----
    w.single("tickwheel_timers_started_total", "counter", "Timers started.", s.started);
    w.single("tickwheel_timers_fired_total", "counter",
             "Callback runs (a periodic timer counts each run).", s.fired);
    w.single("tickwheel_timers_stopped_total", "counter",
             "Stop calls that cancelled a timer (C++ stop() returned true, C TW_OK).", s.stopped);
    w.single("tickwheel_timers_reset_total", "counter", "Reset calls that re-armed a pending timer.", s.reset);
    w.single("tickwheel_timers_cancelled_at_shutdown_total", "counter",
             "Timers still pending when the runtime was shut down.", s.cancelled_at_shutdown);
    w.single("tickwheel_callback_exceptions_total", "counter", "C++ exceptions thrown by callbacks.",
             s.callback_exceptions);

    // ---- gauges ----
    w.single("tickwheel_timers_live", "gauge", "Timers started and not yet released.", s.live);
    std::uint64_t pending = 0;
    for (const std::uint64_t n : s.pending_per_shard) pending += n;
    w.single("tickwheel_timers_pending", "gauge", "Timers filed in the shards' wheels (all shards).", pending);
    w.single("tickwheel_timer_slots", "gauge",
             "Timer records ever allocated, 64 bytes each: the memory high-water mark.", s.slots);
    per_shard(w, "tickwheel_shard_pending", "Timers filed in the shard's wheel.", s.pending_per_shard);
    per_shard(w, "tickwheel_shard_inbox", "Requests queued to the shard (approximate).", s.inbox_per_shard);
    w.single("tickwheel_shards", "gauge", "Shards (timing wheels, one driver thread each).", s.shards);
    w.single("tickwheel_workers", "gauge", "Callbacks that can run at once.", s.workers);
    w.single("tickwheel_resolution_seconds", "gauge", "The tick: deadlines are rounded up to it.",
             seconds_of_ns(s.resolution_ns));
    w.single("tickwheel_shut_down", "gauge", "1 once the runtime is shut down, else 0.", s.shut_down ? 1 : 0);
    w.single("tickwheel_callback_lateness_max_seconds", "gauge",
             "The largest callback lateness seen since the runtime was created.",
             seconds_of_ns(s.lateness.max));

    // ---- the lateness histogram ----
    constexpr std::string_view kHist = "tickwheel_callback_lateness_seconds";
    w.family(kHist, "histogram", "Callback start minus the timer's deadline (rounded up to the tick).");
    const std::string bucket = std::string(kHist) + "_bucket";
    std::uint64_t cumulative = 0;
    for (unsigned i = 0; i < LatencyHistogram::kExportBounds; ++i) {
        cumulative += s.lateness.bucket[i];
        w.sample(bucket, "le=\"" + seconds_of_ns(LatencyHistogram::kExportBoundsNs[i]) + '"', cumulative);
    }
    cumulative += s.lateness.bucket[LatencyHistogram::kExportBounds];
    w.sample(bucket, "le=\"+Inf\"", cumulative);  // == the count: the buckets' sum
    w.sample(std::string(kHist) + "_sum", {}, format_seconds(s.lateness.sum_s, s.lateness.sum_ns));
    w.sample(std::string(kHist) + "_count", {}, cumulative);
    return out;
}

}  // namespace rt

std::string Runtime::metrics() const {
    const rt::RuntimeCore& core = *core_;
    if (core.forked()) throw Error(errc::forked);
    return rt::format_metrics(rt::take_metrics_snapshot(core));
}

}  // namespace tickwheel
