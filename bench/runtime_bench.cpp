// SPDX-License-Identifier: MIT OR Apache-2.0
// Caller-side costs of the runtime's operations, with N timers pending.
//
//   RuntimeStartStop/N  one iteration = start one timer (random delay in
//                       [1 ms, 100 s]) + stop a random pending one.
//   RuntimeStart/N      start only (timers due in [30 s, 60 s]).
//   RuntimeStop/N       stop only (of timers started outside the timing).
//   RuntimeResetLater/N reset a random pending timer to [30 s, 60 s] from now
//                       (the keepalive pattern).
// N timers are preloaded with deadlines uniform in [1 s, 100 s]. Wall time on
// the calling thread; the shards work concurrently on the other core(s).
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "tickwheel/runtime.hpp"

using namespace std::chrono;
using tickwheel::Runtime;

namespace {

struct Fixture {
    Runtime rt;
    std::vector<std::uint64_t> pending;
    std::mt19937_64 rng{42};
    explicit Fixture(std::size_t n) {
        std::uniform_int_distribution<std::int64_t> preload(1000, 100000);
        pending.reserve(n);
        for (std::size_t i = 0; i < n; ++i)
            pending.push_back(rt.start(milliseconds(preload(rng)), [] {}).id());
    }
};

void RuntimeStartStop(benchmark::State& state) {
    Fixture f(static_cast<std::size_t>(state.range(0)));
    std::uniform_int_distribution<std::int64_t> delay(1, 100000);
    for (auto _ : state) {
        const std::uint64_t id = f.rt.start(milliseconds(delay(f.rng)), [] {}).id();
        const std::size_t victim = f.rng() % f.pending.size();
        benchmark::DoNotOptimize(f.rt.stop(f.pending[victim]));
        f.pending[victim] = id;
    }
}
BENCHMARK(RuntimeStartStop)->Arg(1000)->Arg(1000000)->Unit(benchmark::kNanosecond)->UseRealTime();

constexpr int kBatch = 10000;

void RuntimeStart(benchmark::State& state) {
    Fixture f(static_cast<std::size_t>(state.range(0)));
    std::uniform_int_distribution<std::int64_t> delay(30000, 60000);
    std::vector<std::uint64_t> ids(kBatch);
    for (auto _ : state) {
        for (auto& id : ids) id = f.rt.start(milliseconds(delay(f.rng)), [] {}).id();
        state.PauseTiming();
        for (auto id : ids) f.rt.stop(id);
        state.ResumeTiming();
    }
    state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(RuntimeStart)->Arg(1000000)->Unit(benchmark::kMicrosecond)->UseRealTime();

void RuntimeStop(benchmark::State& state) {
    Fixture f(static_cast<std::size_t>(state.range(0)));
    std::uniform_int_distribution<std::int64_t> delay(30000, 60000);
    std::vector<std::uint64_t> ids(kBatch);
    for (auto _ : state) {
        state.PauseTiming();
        for (auto& id : ids) id = f.rt.start(milliseconds(delay(f.rng)), [] {}).id();
        state.ResumeTiming();
        for (auto id : ids) benchmark::DoNotOptimize(f.rt.stop(id));
    }
    state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(RuntimeStop)->Arg(1000000)->Unit(benchmark::kMicrosecond)->UseRealTime();

void RuntimeResetLater(benchmark::State& state) {
    Fixture f(static_cast<std::size_t>(state.range(0)));
    std::uniform_int_distribution<std::int64_t> later(30000, 60000);
    for (auto _ : state)
        benchmark::DoNotOptimize(f.rt.reset(f.pending[f.rng() % f.pending.size()], milliseconds(later(f.rng))));
}
BENCHMARK(RuntimeResetLater)->Arg(1000000)->Unit(benchmark::kNanosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
