// SPDX-License-Identifier: MIT OR Apache-2.0
// Which shard should start() pick? Measures aggregate start+stop pairs per
// second from P producer threads, each keeping `pending` timers alive and
// stopping a random one of its own per start, under three placements:
//   default    no hint: the runtime's default (a sticky shard per thread)
//   cpu        the calling CPU's shard (hint = sched_getcpu())
//   thread     a fixed shard per producer thread (hint = thread index)
//   roundrobin every start goes to the next shard (hint = counter++)
//   one        every timer on shard 0
//   shard_choice [producers=2] [pairs per producer=1000000] [pending per producer=50000]
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "tickwheel/runtime.hpp"

using namespace std::chrono;

int main(int argc, char** argv) {
    const int producers = argc > 1 ? std::atoi(argv[1]) : 2;
    const long pairs = argc > 2 ? std::atol(argv[2]) : 1000000;
    const long pending = argc > 3 ? std::atol(argv[3]) : 50000;
    const char* modes[] = {"default", "thread", "roundrobin", "one", "cpu"};
    for (int rep = 0; rep < 3; ++rep) {
        for (int mode = 0; mode < 5; ++mode) {
            tickwheel::Runtime rt;
            std::atomic<unsigned> rr{0};
            std::atomic<int> ready{0};
            std::atomic<bool> go{false};
            std::vector<std::thread> threads;
            std::vector<double> secs(static_cast<std::size_t>(producers));
            for (int p = 0; p < producers; ++p) {
                threads.emplace_back([&, p] {
                    std::mt19937_64 rng(static_cast<unsigned>(p) + 1);
                    std::uniform_int_distribution<long> delay(1000, 100000);
                    auto opts = [&] {
                        tickwheel::StartOptions o;
                        o.delay = milliseconds(delay(rng));
                        if (mode == 1) o.shard = p;
                        if (mode == 2) o.shard = static_cast<int>(rr.fetch_add(1, std::memory_order_relaxed) & 0xFF);
                        if (mode == 3) o.shard = 0;
                        if (mode == 4) o.shard = sched_getcpu();
                        return o;
                    };
                    std::vector<std::uint64_t> mine;
                    for (long i = 0; i < pending; ++i) mine.push_back(rt.start(opts(), [] {}).id());
                    ready++;
                    while (!go.load()) std::this_thread::yield();
                    const auto t0 = steady_clock::now();
                    for (long i = 0; i < pairs; ++i) {
                        const std::uint64_t id = rt.start(opts(), [] {}).id();
                        const std::size_t v = rng() % mine.size();
                        rt.stop(mine[v]);
                        mine[v] = id;
                    }
                    secs[static_cast<std::size_t>(p)] = duration<double>(steady_clock::now() - t0).count();
                });
            }
            while (ready.load() < producers) std::this_thread::yield();
            go = true;
            for (auto& t : threads) t.join();
            double worst = 0;
            for (double s : secs) worst = s > worst ? s : worst;
            std::printf("rep %d %-10s producers=%d pairs/s=%.2fM\n", rep, modes[mode], producers,
                        static_cast<double>(pairs) * producers / worst / 1e6);
        }
    }
}
