// SPDX-License-Identifier: MIT OR Apache-2.0
// tickwheel::Queue, the C++ face of a delivery queue (delivery_queue.hpp):
// a runtime pointer and a reference to the queue.
#include <cstdio>
#include <exception>
#include <limits>

#include "runtime/delivery_queue.hpp"
#include "runtime/runtime_core.hpp"
#include "tickwheel/runtime.hpp"

namespace tickwheel {

namespace {
constexpr std::size_t kQueueStatsSizeV1 = sizeof(QueueStats);  // the 1.2 layout: the minimum
static_assert(sizeof(Queue) == 2 * sizeof(void*), "Queue is two pointers in 1.x");
static_assert(rt::Extra::kMaxOwed == kBurstMaxOwed, "the documented cap of a BURST timer's owed runs");
}  // namespace

Queue::Queue(Runtime& rt) : rt_(&rt), impl_(rt.core_->create_queue()) {}

Queue::~Queue() {
    std::error_code ec;
    close(ec);
    if (ec) {
        std::fputs("tickwheel: a Queue was destroyed from inside one of its own callbacks (use close(), which "
                   "reports would_deadlock)\n",
                   stderr);
        std::terminate();
    }
    impl_->unref();
}

int Queue::fd() const noexcept { return impl_->fd(); }

void Queue::close(std::error_code& ec) noexcept {
    ec.clear();
    if (impl_->running_on_this_thread()) {
        ec = make_error_code(errc::would_deadlock);
        return;
    }
    // The runtime is gone (its destructor detached the queue) or belongs to
    // the parent of this fork() child: nothing to cancel here.
    if (impl_->forked()) return;
    if (!impl_->claim_destroy()) return;  // closed before
    if (rt::RuntimeCore* core = impl_->core()) core->destroy_queue(*impl_);
}

std::size_t Queue::run(std::size_t max, Duration timeout) {
    std::error_code ec;
    const std::size_t n = run(max, timeout, ec);
    if (ec) throw Error(ec);
    return n;
}

std::size_t Queue::run(std::size_t max, Duration timeout, std::error_code& ec) noexcept {
    ec.clear();
    if (max == 0) {
        ec = make_error_code(errc::invalid_argument);
        return 0;
    }
    if (impl_->forked()) {
        ec = make_error_code(errc::forked);
        return 0;
    }
    if (impl_->running_on_this_thread()) {
        ec = make_error_code(errc::would_deadlock);
        return 0;
    }
    const std::int64_t r = impl_->run(max, timeout.count());
    if (r < 0) {
        ec = make_error_code(static_cast<errc>(-r));
        return 0;
    }
    return static_cast<std::size_t>(r);
}

void Queue::stats_sized(QueueStats* out, std::size_t out_size) const noexcept {
    if (out == nullptr || out_size < kQueueStatsSizeV1) return;
    const rt::QueueCounters c = impl_->counters();
    QueueStats st;
    st.due = c.due;
    st.delivered = c.delivered;
    st.ran = c.ran;
    st.runners = c.runners;
    st.signal_p50 = Duration(c.signal.p50);
    st.signal_p99 = Duration(c.signal.p99);
    st.signal_p999 = Duration(c.signal.p999);
    st.signal_max = Duration(c.signal.max);
    st.signal_samples = c.signal.count;
    st.run_p50 = Duration(c.run.p50);
    st.run_p99 = Duration(c.run.p99);
    st.run_p999 = Duration(c.run.p999);
    st.run_max = Duration(c.run.max);
    st.run_samples = c.run.count;
    *out = st;  // a larger (newer) caller's extra fields keep their defaults
}

}  // namespace tickwheel
