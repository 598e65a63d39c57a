// SPDX-License-Identifier: MIT OR Apache-2.0
// The process-wide TBB parallelism registry (see tbb_parallelism.hpp).
#include "runtime/tbb_parallelism.hpp"

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>

namespace tickwheel::rt {

namespace {

using tbb::global_control;

class Registry {
public:
    void add(unsigned workers) {
        std::lock_guard<std::mutex> lock(tbb_control_mutex());
        set_value(leased_ + workers);  // may throw: then nothing changed
        leased_ += workers;
    }

    void remove(unsigned workers) noexcept {
        std::lock_guard<std::mutex> lock(tbb_control_mutex());
        leased_ -= workers;
        try {
            set_value(leased_);
        } catch (...) {
            // No memory for the smaller control: keep the larger one (it
            // only allows more than needed) until the next change.
        }
    }

private:
    // Makes tickwheel's control what `leased` workers need; none for 0.
    void set_value(std::size_t leased) {
        if (leased == 0) {
            control_.reset();
            value_ = 0;
            return;
        }
        // The process's limit before tickwheel's control exists: TBB's
        // default, or the application's own limit, which may be higher (an
        // application that raised it for its own arenas): never lowered.
        if (!control_) before_ = global_control::active_value(global_control::max_allowed_parallelism);
        const std::size_t value = std::max(leased + default_parallelism(), before_);
        if (value == value_) return;
        auto next = std::make_unique<global_control>(global_control::max_allowed_parallelism, value);
        // The new control is live before the old one goes: growing, the
        // smaller old value never outlives this; shrinking, there is no
        // moment without a tickwheel control (without one, TBB's default
        // could be below what the remaining runtimes need).
        control_.swap(next);
        value_ = value;
        next.reset();
    }

    // TBB's limit with no control at all: the application's thread plus the
    // default worker pool its own TBB work gets.
    static std::size_t default_parallelism() noexcept {
        return static_cast<std::size_t>(std::max(1, tbb::info::default_concurrency()));
    }

    std::size_t leased_ = 0;  // the live leases' workers, summed
    std::size_t value_ = 0;   // control_'s value, 0 if none
    std::size_t before_ = 0;  // the limit when control_ was created
    std::unique_ptr<global_control> control_;
};

Registry& registry() {
    // Never destroyed: a Runtime with static storage duration may be
    // destroyed after any other static object.
    static Registry* const r = new Registry;
    return *r;
}

}  // namespace

std::mutex& tbb_control_mutex() noexcept {
    static std::mutex* const m = new std::mutex;  // never destroyed, like the registry
    return *m;
}

ParallelismLease::ParallelismLease(unsigned workers) : workers_(workers) { registry().add(workers_); }

ParallelismLease::~ParallelismLease() { registry().remove(workers_); }

unsigned effective_workers(unsigned workers) noexcept {
    // Includes the application's lower limit, if any, and TBB's hard cap
    // on workers (at least 256) once its scheduler exists.
    const std::size_t limit = global_control::active_value(global_control::max_allowed_parallelism);
    const std::size_t pool = limit > 1 ? limit - 1 : 1;
    return static_cast<unsigned>(std::min<std::size_t>(workers, pool));
}

}  // namespace tickwheel::rt
