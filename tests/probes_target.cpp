// SPDX-License-Identifier: MIT OR Apache-2.0
// A program for the probes' test (check_probes.sh, ctest probes_bpftrace):
// for `seconds`, it fires every probe of libtickwheel.so.1 -- starts (one
// by one and in batches), stops, resets, expiries handed to the workers and
// delivered to a queue, runs, some of them slow (probes.hpp) -- until the
// tracer has seen them. Linked against the shared library, as an
// application is.
#include <tickwheel/runtime.hpp>

#include "test_support/batch.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

using namespace std::chrono;

namespace {
// The function the starters' script must name (a call site of the library).
[[gnu::noinline]] tickwheel::Timer start_a_timeout(tickwheel::Runtime& rt, int i) {
    return rt.start(milliseconds(1 + i % 5), [i] {
        if (i % 40 == 0) std::this_thread::sleep_for(milliseconds(12));  // a slow callback
    });
}
}  // namespace

int main(int argc, char** argv) {
    const double seconds = argc > 1 ? std::atof(argv[1]) : 5.0;
    tickwheel::Config cfg;
    cfg.shards = 2;
    cfg.workers = 2;
    cfg.name = "probes-target";
    tickwheel::Runtime rt(cfg);
    tickwheel::Queue q(rt);
    tickwheel::StartOptions on_queue;
    on_queue.delay = milliseconds(1);
    on_queue.queue = &q;
    const auto until = steady_clock::now() + duration<double>(seconds);
    long i = 0;
    while (steady_clock::now() < until) {
        const tickwheel::Timer t = start_a_timeout(rt, static_cast<int>(i));
        rt.stop(rt.start(hours(1), [] {}));
        if (i % 7 == 0) rt.reset(t.id(), milliseconds(2));
        if (i % 50 == 0) {
            rt.start(on_queue, [] {});
            std::vector<tickwheel::Timer> out;
            std::vector<std::error_code> results;
            (void)tw_test::start_batch(rt, 4, milliseconds(3), out, results);
        }
        q.run(8);
        ++i;
        std::this_thread::sleep_for(microseconds(200));
    }
    std::printf("probes_target: %ld rounds\n", i);
    return 0;
}
