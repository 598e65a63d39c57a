// SPDX-License-Identifier: MIT OR Apache-2.0
// Runtime::metrics(): the Prometheus text exposition (format 0.0.4) of a
// runtime's counters, gauges and lateness histogram. See metrics.hpp.
#include "runtime/metrics.hpp"

#include <charconv>
#include <string_view>

#include "runtime/delivery_queue.hpp"
#include "runtime/error_detail.hpp"
#include "runtime/runtime_core.hpp"
#include "tickwheel/runtime.hpp"
#include "tickwheel/tickwheel.h"

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

    static std::string number(std::uint64_t v) {
        char buf[24];
        const auto r = std::to_chars(buf, buf + sizeof buf, v);
        return std::string(buf, r.ptr);
    }

private:
    std::string& out_;
};

std::string seconds_of_ns(std::uint64_t ns) { return format_seconds(ns / kNsPerS, ns % kNsPerS); }

/// One runtime's snapshot with its `runtime="..."` label text.
struct Source {
    const MetricsSnapshot* s;
    std::string label;  // runtime="<escaped name>"
};

/// `base` plus `,key="value"` (value needs no escaping: numbers, "+Inf").
std::string with(const std::string& base, std::string_view key, std::string_view value) {
    std::string l = base;
    l += ',';
    l += key;
    l += "=\"";
    l += value;
    l += '"';
    return l;
}

/// A family: its header once, then every source's samples (`each` writes
/// one source's).
template <class Each>
void family(Writer& w, const std::vector<Source>& src, std::string_view name, std::string_view type,
            std::string_view help, Each&& each) {
    w.family(name, type, help);
    for (const Source& x : src) each(*x.s, x.label);
}

/// A family of one sample per runtime; `value(s)` is a number or a string.
template <class Value>
void single(Writer& w, const std::vector<Source>& src, std::string_view name, std::string_view type,
            std::string_view help, Value&& value) {
    family(w, src, name, type, help,
           [&](const MetricsSnapshot& s, const std::string& l) { w.sample(name, l, value(s)); });
}

/// One gauge per shard, labelled {runtime="...",shard="i"}.
void per_shard(Writer& w, const std::vector<Source>& src, std::string_view name, std::string_view help,
               std::vector<std::uint64_t> MetricsSnapshot::*values) {
    family(w, src, name, "gauge", help, [&](const MetricsSnapshot& s, const std::string& l) {
        const std::vector<std::uint64_t>& v = s.*values;
        for (std::size_t i = 0; i < v.size(); ++i) w.sample(name, with(l, "shard", Writer::number(i)), v[i]);
    });
}

/// One sample per live queue, labelled {runtime="...",queue="slot"}; no
/// family at all while no runtime has a queue (a family has samples).
template <class Value>
void per_queue(Writer& w, const std::vector<Source>& src, std::string_view name, std::string_view type,
               std::string_view help, Value&& value) {
    bool any = false;
    for (const Source& x : src) any = any || !x.s->queues.empty();
    if (!any) return;
    family(w, src, name, type, help, [&](const MetricsSnapshot& s, const std::string& l) {
        for (const QueueSnapshot& q : s.queues) w.sample(name, with(l, "queue", Writer::number(q.slot)), value(q));
    });
}

/// The samples of one histogram (its `le` buckets, cumulative, `_sum` and
/// `_count`) with the label text `l`.
void histogram_samples(Writer& w, std::string_view name, const std::string& l, const LatencyHistogram::Export& h) {
    const std::string bucket = std::string(name) + "_bucket";
    std::uint64_t cumulative = 0;
    for (unsigned i = 0; i < LatencyHistogram::kExportBounds; ++i) {
        cumulative += h.bucket[i];
        w.sample(bucket, with(l, "le", seconds_of_ns(LatencyHistogram::kExportBoundsNs[i])), cumulative);
    }
    cumulative += h.bucket[LatencyHistogram::kExportBounds];
    w.sample(bucket, with(l, "le", "+Inf"), cumulative);  // == the count: the buckets' sum
    w.sample(std::string(name) + "_sum", l, format_seconds(h.sum_s, h.sum_ns));
    w.sample(std::string(name) + "_count", l, cumulative);
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

namespace {
/// The length of the valid UTF-8 sequence (RFC 3629: no overlong forms, no
/// surrogates, nothing above U+10FFFF) that starts `v` at `i`, or 0.
std::size_t utf8_sequence(std::string_view v, std::size_t i) noexcept {
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(v[k]); };
    const unsigned char c = b(i);
    if (c < 0x80) return 1;
    std::size_t n;
    unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;  // overlong
        if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;  // overlong
        if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
        return 0;  // a continuation byte, C0, C1, F5..FF
    }
    if (i + n > v.size() || b(i + 1) < lo || b(i + 1) > hi) return 0;
    for (std::size_t k = 2; k < n; ++k)
        if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
    return n;
}
}  // namespace

std::string escape_label_value(std::string_view v) {
    std::string out;
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size();) {
        const char c = v[i];
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '"') {
            out += "\\\"";
        } else if (c == '\n') {
            out += "\\n";
        } else if (const std::size_t n = utf8_sequence(v, i); n != 0) {
            out.append(v.substr(i, n));
            i += n;
            continue;
        } else {
            // Not UTF-8 (issue 34): the text format requires it. Each such
            // byte becomes U+FFFD, the replacement character.
            out += "\xEF\xBF\xBD";
        }
        ++i;
    }
    return out;
}

MetricsSnapshot take_metrics_snapshot(const RuntimeCore& core) {
    MetricsSnapshot s;
    s.name = core.config.name;
    s.shards = static_cast<std::uint32_t>(core.shards.size());
    s.workers = core.dispatcher->concurrency();
    s.shut_down = core.shut_down.load(std::memory_order_acquire);
    s.resolution_ns = static_cast<std::uint64_t>(core.config.resolution.count());
    s.pending_per_shard.reserve(core.shards.size());
    s.inbox_per_shard.reserve(core.shards.size());
    for (const auto& sh : core.shards) {
        s.pending_per_shard.push_back(sh->pending());
        s.inbox_per_shard.push_back(sh->inbox_size());
        s.slots += sh->table().resident_slots();
        s.resident_bytes += sh->table().resident_bytes();
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
    s.stage[kStageDriver] = core.driver_lateness.export_snapshot();
    s.stage[kStageWait] = core.wait_lateness.export_snapshot();
    s.stage[kStageRun] = core.run_duration.export_snapshot();
    const Saturation sat = core.saturation();
    s.workers_busy = sat.workers_busy;
    s.waiting_for_worker = sat.waiting_for_worker;
    s.callbacks_running = sat.callbacks_running;
    s.oldest_run_age_ns = sat.oldest_run_age_ns;
    if (core.queues.in_use()) {
        core.queues.for_each([&](const DeliveryQueue& q) {
            if (q.destroyed()) return;
            const QueueCounters qc = q.counters();
            QueueSnapshot x;
            x.slot = q.slot();
            x.due = qc.due;
            x.delivered = qc.delivered;
            x.ran = qc.ran;
            x.runners = qc.runners;
            x.signal_p99_ns = qc.signal.p99;
            x.signal_max_ns = qc.signal.max;
            x.run_p99_ns = qc.run.p99;
            x.run_max_ns = qc.run.max;
            for (unsigned k = 0; k < kStageCount; ++k) x.stage[k] = qc.stage[k];
            s.queues.push_back(x);
        });
    }
    return s;
}

std::string format_metrics(const MetricsSnapshot* const* snaps, std::size_t n) {
    if (n == 0) return {};  // no runtime: no family (a family without samples is not written)
    std::vector<Source> src;
    src.reserve(n);
    std::size_t shards = 0, queues = 0;
    for (std::size_t i = 0; i < n; ++i) {
        src.push_back({snaps[i], "runtime=\"" + escape_label_value(snaps[i]->name) + '"'});
        shards += snaps[i]->pending_per_shard.size();
        queues += snaps[i]->queues.size();
    }
    std::string out;
    out.reserve(5120 * n + 200 * shards + 800 * queues);
    Writer w(out);
    using S = const MetricsSnapshot&;

    // ---- build ----
    family(w, src, "tickwheel_build_info", "gauge", "The tickwheel library's version (label version; always 1).",
           [&](S, const std::string& l) {
               const std::string version = Writer::number(TW_VERSION_MAJOR) + '.' + Writer::number(TW_VERSION_MINOR) +
                                           '.' + Writer::number(TW_VERSION_PATCH);
               w.sample("tickwheel_build_info", with(l, "version", version), std::uint64_t{1});
           });
    // ---- counters ----
    single(w, src, "tickwheel_timers_started_total", "counter", "Timers started.", [](S s) { return s.started; });
    single(w, src, "tickwheel_timers_fired_total", "counter", "Callback runs (a periodic timer counts each run).",
           [](S s) { return s.fired; });
    single(w, src, "tickwheel_timers_stopped_total", "counter",
           "Stop calls that cancelled a timer (C++ stop() returned true, C TW_OK).", [](S s) { return s.stopped; });
    single(w, src, "tickwheel_timers_reset_total", "counter", "Reset calls that re-armed a pending timer.",
           [](S s) { return s.reset; });
    single(w, src, "tickwheel_timers_cancelled_at_shutdown_total", "counter",
           "Timers still pending when the runtime was shut down.", [](S s) { return s.cancelled_at_shutdown; });
    single(w, src, "tickwheel_callback_exceptions_total", "counter",
           "Exceptions raised by callbacks and release hooks: C++ exceptions the runtime caught, "
           "and those a binding (Python, Node.js, Rust panics) or the application counted "
           "(tw_runtime_count_callback_exception).",
           [](S s) { return s.callback_exceptions; });

    // ---- gauges ----
    single(w, src, "tickwheel_timers_live", "gauge", "Timers started and not yet released.", [](S s) { return s.live; });
    single(w, src, "tickwheel_timers_pending", "gauge", "Timers filed in the shards' wheels (all shards).", [](S s) {
        std::uint64_t pending = 0;
        for (const std::uint64_t v : s.pending_per_shard) pending += v;
        return pending;
    });
    single(w, src, "tickwheel_timer_slots", "gauge",
           "Timer records resident, 64 bytes each: those allocated, less those given back to the kernel "
           "after a peak.",
           [](S s) { return s.slots; });
    single(w, src, "tickwheel_timer_resident_bytes", "gauge",
           "Bytes of timer records and their side arrays resident (an upper bound).",
           [](S s) { return s.resident_bytes; });
    per_shard(w, src, "tickwheel_shard_pending", "Timers filed in the shard's wheel.",
              &MetricsSnapshot::pending_per_shard);
    per_shard(w, src, "tickwheel_shard_inbox", "Requests queued to the shard (approximate).",
              &MetricsSnapshot::inbox_per_shard);
    single(w, src, "tickwheel_shards", "gauge", "Shards (timing wheels, one driver thread each).",
           [](S s) { return std::uint64_t{s.shards}; });
    single(w, src, "tickwheel_workers", "gauge", "Callbacks that can run at once.",
           [](S s) { return std::uint64_t{s.workers}; });
    single(w, src, "tickwheel_resolution_seconds", "gauge", "The tick: deadlines are rounded up to it.",
           [](S s) { return seconds_of_ns(s.resolution_ns); });
    single(w, src, "tickwheel_shut_down", "gauge", "1 once the runtime is shut down, else 0.",
           [](S s) { return std::uint64_t{s.shut_down ? 1u : 0u}; });
    single(w, src, "tickwheel_workers_busy", "gauge", "Callbacks running now on the runtime's workers.",
           [](S s) { return s.workers_busy; });
    single(w, src, "tickwheel_waiting_for_worker", "gauge",
           "Due timers handed to the workers that no worker has taken yet.",
           [](S s) { return s.waiting_for_worker; });
    single(w, src, "tickwheel_callbacks_running", "gauge",
           "Callbacks running now on any thread (workers, delivery queues' run calls, an advance).",
           [](S s) { return s.callbacks_running; });
    single(w, src, "tickwheel_oldest_callback_age_seconds", "gauge",
           "How long the longest-running callback now has been running (0: none).",
           [](S s) { return seconds_of_ns(s.oldest_run_age_ns); });
    single(w, src, "tickwheel_callback_lateness_max_seconds", "gauge",
           "The largest callback lateness seen since the runtime was created.",
           [](S s) { return seconds_of_ns(s.lateness.max); });

    // ---- the lateness histogram ----
    constexpr std::string_view kHist = "tickwheel_callback_lateness_seconds";
    family(w, src, kHist, "histogram", "Callback start minus the timer's deadline (rounded up to the tick).",
           [&](S s, const std::string& l) { histogram_samples(w, kHist, l, s.lateness); });
    // ---- lateness by stage, and the callbacks' duration (since 1.7) ----
    constexpr std::string_view kStages = "tickwheel_callback_stage_seconds";
    family(w, src, kStages, "histogram",
           "A callback's lateness by stage -- driver: deadline to its shard's hand-over; wait: hand-over to the "
           "callback's start (driver + wait = lateness) -- and run: the callback's duration.",
           [&](S s, const std::string& l) {
               for (unsigned k = 0; k < kStageCount; ++k)
                   histogram_samples(w, kStages, with(l, "stage", kStageNames[k]), s.stage[k]);
           });

    // ---- delivery queues (since 1.5) ----
    using Q = const QueueSnapshot&;
    per_queue(w, src, "tickwheel_queue_due", "gauge", "Callbacks due on the delivery queue and not yet run.",
              [](Q q) { return q.due; });
    per_queue(w, src, "tickwheel_queue_runners", "gauge", "Threads inside the delivery queue's run call.",
              [](Q q) { return q.runners; });
    per_queue(w, src, "tickwheel_queue_delivered_total", "counter",
              "Due timers handed to the delivery queue (a stop or reset may take one back).",
              [](Q q) { return q.delivered; });
    per_queue(w, src, "tickwheel_queue_ran_total", "counter", "Callbacks run by the delivery queue's run call.",
              [](Q q) { return q.ran; });
    per_queue(w, src, "tickwheel_queue_signal_lateness_p99_seconds", "gauge",
              "Deadline to the queue's fd becoming readable: 99th percentile.",
              [](Q q) { return seconds_of_ns(q.signal_p99_ns); });
    per_queue(w, src, "tickwheel_queue_signal_lateness_max_seconds", "gauge",
              "Deadline to the queue's fd becoming readable: the largest.",
              [](Q q) { return seconds_of_ns(q.signal_max_ns); });
    per_queue(w, src, "tickwheel_queue_run_lateness_p99_seconds", "gauge",
              "Deadline to the callback's start on the queue's thread: 99th percentile.",
              [](Q q) { return seconds_of_ns(q.run_p99_ns); });
    per_queue(w, src, "tickwheel_queue_run_lateness_max_seconds", "gauge",
              "Deadline to the callback's start on the queue's thread: the largest.",
              [](Q q) { return seconds_of_ns(q.run_max_ns); });
    // The queues' runs by stage (since 1.7): wait is delivery to the start
    // of the callback in the queue's run call.
    constexpr std::string_view kQueueStages = "tickwheel_queue_callback_stage_seconds";
    bool any_queue = false;
    for (const Source& x : src) any_queue = any_queue || !x.s->queues.empty();
    if (any_queue)
        family(w, src, kQueueStages, "histogram",
               "A delivery queue's callbacks by stage -- driver: deadline to the delivery; wait: delivery to the "
               "callback's start in the queue's run call -- and run: the callback's duration.",
               [&](S s, const std::string& l) {
                   for (const QueueSnapshot& q : s.queues)
                       for (unsigned k = 0; k < kStageCount; ++k)
                           histogram_samples(w, kQueueStages,
                                             with(with(l, "queue", Writer::number(q.slot)), "stage", kStageNames[k]),
                                             q.stage[k]);
               });
    return out;
}

}  // namespace rt

std::string Runtime::metrics() const {
    const rt::RuntimeCore& core = *core_;
    if (core.forked()) {
        rt::set_error_detail(errc::forked, "the runtime \"%s\" was created in the parent of this fork() child",
                             core.config.name.c_str());
        throw Error(errc::forked);
    }
    return rt::format_metrics(rt::take_metrics_snapshot(core));
}

std::string Runtime::metrics(std::span<const Runtime* const> runtimes) {
    std::vector<rt::MetricsSnapshot> snaps;
    snaps.reserve(runtimes.size());
    for (const Runtime* r : runtimes) {
        if (r == nullptr) throw Error(make_error_code(errc::invalid_argument), "metrics: a null Runtime pointer");
        const rt::RuntimeCore& core = *r->core_;
        if (core.forked()) {
            rt::set_error_detail(errc::forked, "the runtime \"%s\" was created in the parent of this fork() child",
                                 core.config.name.c_str());
            throw Error(errc::forked);
        }
        snaps.push_back(rt::take_metrics_snapshot(core));
    }
    std::vector<const rt::MetricsSnapshot*> ptrs;
    ptrs.reserve(snaps.size());
    for (const rt::MetricsSnapshot& s : snaps) ptrs.push_back(&s);
    return rt::format_metrics(ptrs.data(), ptrs.size());
}

const std::string& Runtime::name() const noexcept { return core_->config.name; }

void Runtime::count_callback_exception() const noexcept {
    rt::RuntimeCore& core = *core_;
    if (core.forked()) return;  // the parent's counters: not this process's to move
    core.counters.add(rt::kCallbackExceptions);
}

}  // namespace tickwheel
