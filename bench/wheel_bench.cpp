// SPDX-License-Identifier: MIT OR Apache-2.0
// Micro-benchmarks of the single-shard wheel used directly (no threads, no
// runtime around it): what the data structure itself costs.
//
//   WheelStartStop/N   N timers pending (deadlines uniform in [1 s, 100 s] at
//                      1 ms ticks); one iteration = insert one timer with a
//                      random delay in [1 ms, 100 s] + remove a random pending
//                      one. Reports ns per insert+remove pair.
//   WheelRearm/N       re-arm a random pending timer to [30 s, 60 s] later.
//   WheelExpire/N      N timers due over the next 1000 ticks; advance tick by
//                      tick and pop them all. Reports time per expired timer.
//   MemoryLatency      reference: one random 64-byte line of 64 MiB, loads
//                      dependent (a pointer chase) or independent.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tickwheel/wheel.hpp"
#include "wheel_node.hpp"

using tickwheel::tick_t;
using tickwheel::Wheel;
using tickwheel::WheelNode;

namespace {

using twb_wheel::Node;

constexpr tick_t kMs = 1;  // 1 ms ticks
constexpr tick_t kSec = 1000 * kMs;

void WheelStartStop(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    auto nodes = std::make_unique<Node[]>(n + 1);
    std::vector<Node*> pending(n);
    Wheel w(0);
    std::mt19937_64 rng(42);
    std::uniform_int_distribution<tick_t> preload(1 * kSec, 100 * kSec), delay(1 * kMs, 100 * kSec);
    for (std::size_t i = 0; i < n; ++i) {
        w.insert(&nodes[i], preload(rng));
        pending[i] = &nodes[i];
    }
    Node* spare = &nodes[n];
    for (auto _ : state) {
        w.insert(spare, delay(rng));                // start one
        const std::size_t victim = rng() % n;       // stop a random pending one
        Node* v = pending[victim];
        w.remove(v);
        pending[victim] = spare;
        spare = v;
    }
    benchmark::DoNotOptimize(w.size());
    state.counters["pending"] = static_cast<double>(w.size());
}
BENCHMARK(WheelStartStop)->Arg(1000)->Arg(100000)->Arg(1000000)->Arg(10000000)->Unit(benchmark::kNanosecond);

void WheelRearm(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    auto nodes = std::make_unique<Node[]>(n);
    Wheel w(0);
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<tick_t> preload(1 * kSec, 100 * kSec), later(30 * kSec, 60 * kSec);
    for (std::size_t i = 0; i < n; ++i) w.insert(&nodes[i], preload(rng));
    for (auto _ : state) w.rearm(&nodes[rng() % n], later(rng));
    benchmark::DoNotOptimize(w.size());
}
BENCHMARK(WheelRearm)->Arg(1000000)->Unit(benchmark::kNanosecond);

void WheelExpire(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    auto nodes = std::make_unique<Node[]>(n);
    std::mt19937_64 rng(9);
    std::size_t expired = 0;
    tick_t base = 0;
    Wheel w(0);
    for (auto _ : state) {
        state.PauseTiming();
        for (std::size_t i = 0; i < n; ++i) w.insert(&nodes[i], base + 1 + rng() % 1000);
        state.ResumeTiming();
        for (tick_t t = base + 1; t <= base + 1000; ++t) {
            w.advance(t);
            while (WheelNode* x = w.pop_expired()) {
                benchmark::DoNotOptimize(x);
                ++expired;
            }
        }
        base += 1000;
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(expired));
}
BENCHMARK(WheelExpire)->Arg(1000000)->Unit(benchmark::kMillisecond);

// One cascade burst: n nodes with deadlines in one level-2 slot (as at
// 100,000 timers/s with a 100 us tick, n ~ 41,000 per 410 ms slot), nodes
// scattered at random over 4 M records (320 MB, the caches flushed between
// runs by touching 64 MB), re-filed by the advance() that reaches the slot.
// The time of that advance() is what every timer coming due meanwhile waits.
void WheelCascade(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    struct Rec : Node {
        char pad[48];  // 80 bytes, like the runtime's record
    };
    constexpr std::size_t kPool = std::size_t{4} << 20;
    auto pool = std::make_unique<Rec[]>(kPool);
    std::vector<std::size_t> order(kPool);
    for (std::size_t i = 0; i < kPool; ++i) order[i] = i;
    std::mt19937_64 rng(11);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<char> flush(std::size_t{64} << 20);
    std::size_t next = 0;
    for (auto _ : state) {
        state.PauseTiming();
        Wheel w(0);
        for (std::size_t i = 0; i < n; ++i, next = (next + 1) % kPool) w.insert(&pool[order[next]], 4096 + rng() % 4096);
        for (std::size_t i = 0; i < flush.size(); i += 64) flush[i] = static_cast<char>(flush[i] + 1);
        benchmark::ClobberMemory();
        state.ResumeTiming();
        w.advance(4096);  // the level-2 slot [4096, 8192) cascades
        state.PauseTiming();
        w.advance(8192);
        while (w.pop_expired() != nullptr) {
        }
        state.ResumeTiming();
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n));
}
BENCHMARK(WheelCascade)->Arg(40000)->Unit(benchmark::kMicrosecond);

}  // namespace

// Reference for the runtime's figures: what one access to a random cold
// 64-byte line costs on this machine. A pointer chase through a random
// cyclic permutation of N lines (each load depends on the previous, so
// misses cannot overlap), and the same loads made independent (the CPU
// overlaps misses: what a loop without locked instructions gets). A
// thread-safe stop() or reset() of a random timer among a million does at
// least one such access in series with a locked instruction.
static void MemoryLatency(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    const bool dependent = state.range(1) != 0;
    struct alignas(64) Line {
        std::size_t next;
    };
    std::vector<Line> lines(n);
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    std::mt19937_64 rng(7);
    std::shuffle(order.begin(), order.end(), rng);
    for (std::size_t i = 0; i < n; ++i) lines[order[i]].next = order[(i + 1) % n];
    std::size_t p = order[0], sum = 0, k = 0;
    for (auto _ : state) {
        if (dependent) {
            p = lines[p].next;
        } else {
            sum += lines[order[k]].next;
            k = k + 1 == n ? 0 : k + 1;
        }
    }
    benchmark::DoNotOptimize(p);
    benchmark::DoNotOptimize(sum);
    state.SetLabel(std::to_string(n * 64 >> 20) + " MiB, " + (dependent ? "dependent" : "independent"));
}
BENCHMARK(MemoryLatency)->Args({1 << 20, 1})->Args({1 << 20, 0})->Unit(benchmark::kNanosecond);

BENCHMARK_MAIN();
