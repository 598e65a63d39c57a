// SPDX-License-Identifier: MIT OR Apache-2.0
// libFuzzer target: decodes its input into a sequence of C API calls against
// a real runtime -- including NULL pointers, zero/stale/random ids, huge
// delays, wrong struct sizes, shutdown and destroy in the middle -- and
// checks, besides "no crash, no sanitizer report, no hang", the accounting
// promises: every successful start's release hook runs exactly once, a
// start_ex rejected with TW_EINVAL never calls it, and any other failed
// start_ex calls it once before it returns.
//
// Build: the `asan` preset (clang) builds it with -fsanitize=fuzzer,address,undefined.
// Run:   build/asan/fuzz/fuzz_capi build/asan/fuzz/corpus fuzz/corpus -max_total_time=600
// The runtime uses a 10 us tick and delays of at most a few ms, so timers
// really fire within an input ("fast clock").
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <thread>
#include <vector>

#include "tickwheel/tickwheel.h"

namespace {

struct Input {
    const std::uint8_t* p;
    std::size_t n;
    bool empty() const { return n == 0; }
    std::uint8_t u8() {
        if (n == 0) return 0;
        --n;
        return *p++;
    }
    std::uint64_t u64() {
        std::uint64_t v = 0;
        for (int i = 0; i < 8; ++i) v = v << 8 | u8();
        return v;
    }
    // Mostly small values, sometimes anything (huge, MAX, beyond TW_MAX_DELAY_NS).
    std::uint64_t delay() {
        switch (u8() % 8) {
            case 0: return 0;
            case 1: return TW_MAX_DELAY_NS;
            case 2: return TW_MAX_DELAY_NS + 1;
            case 3: return u64();
            default: return static_cast<std::uint64_t>(u8()) * 20'000;  // 0 .. 5 ms
        }
    }
    // A struct's size field: right, short, longer (with a zero tail), or
    // anything up to kBuf (the buffers are that large, so the library may read
    // or write every byte the size claims).
    std::uint32_t size(std::uint32_t right) {
        switch (u8() % 8) {
            case 0: return 0;
            case 1: return right - 4;
            case 2: return right + 8;
            case 3: return static_cast<std::uint32_t>(u64() % kBuf);
            default: return right;
        }
    }
    static constexpr std::uint32_t kBuf = 4200;  // > the library's 4096 limit
};

// Per-timer context: counts its releases; callbacks may call the API.
struct Ctx {
    std::atomic<int> released{0};
    std::atomic<int> runs{0};
    tw_runtime* rt = nullptr;
    std::uint8_t behaviour = 0;
};

std::atomic<long> g_bad{0};

void on_fire(void* arg, tw_timer id) {
    auto* c = static_cast<Ctx*>(arg);
    c->runs++;
    switch (c->behaviour % 5) {
        case 1: tw_timer_stop(c->rt, id); break;
        case 2: tw_timer_reset(c->rt, id, 10'000); break;  // a one-shot re-arms itself
        case 3: tw_timer_stop_sync(c->rt, id); break;      // must not wait for itself
        case 4:
            if (tw_runtime_shutdown(c->rt) != TW_EDEADLK) g_bad++;  // from a callback: refused
            break;
        default: break;
    }
}
void on_release(void* arg) { static_cast<Ctx*>(arg)->released++; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    Input in{data, size};
    std::vector<Ctx*> ctxs;          // every context handed to a start_ex (owned here)
    std::vector<tw_timer> ids;       // ids we got (valid at some point)
    std::vector<Ctx*> must_release;  // contexts whose release hook must run exactly once
    tw_runtime* rt = nullptr;
    auto destroy = [&] {
        if (rt == nullptr) return;
        if (tw_runtime_destroy(rt) != TW_OK) g_bad++;
        rt = nullptr;
    };
    auto pick_id = [&]() -> tw_timer {
        switch (in.u8() % 4) {
            case 0: return 0;
            case 1: return in.u64();
            default: return ids.empty() ? in.u64() : ids[in.u8() % ids.size()];
        }
    };
    int ops = 0;
    while (!in.empty() && ops++ < 64) {
        switch (in.u8() % 12) {
            case 0: {  // (re)create, with a fuzzed config
                destroy();
                alignas(8) unsigned char buf[Input::kBuf] = {};
                tw_config& cfg = *reinterpret_cast<tw_config*>(buf);
                tw_config_init(&cfg);
                cfg.size = in.size(sizeof cfg);
                cfg.shards = in.u8() % 3;
                cfg.workers = 1 + in.u8() % 2;
                cfg.flags = in.u8() % 16 == 0 ? 0xFFu : 0;
                cfg.resolution_ns = in.u8() % 4 == 0 ? in.u64() : 10'000;
                cfg.max_timers = in.u8() % 4 == 0 ? in.u8() : 0;
                tw_runtime* out = nullptr;
                const int r = tw_runtime_create(in.u8() % 8 == 0 ? nullptr : &cfg, in.u8() % 16 == 0 ? nullptr : &out);
                if (r == TW_OK) rt = out;
                break;
            }
            case 1: {  // plain start (no release hook, no context)
                tw_timer id = 0;
                const int r = tw_timer_start(in.u8() % 8 == 0 ? nullptr : rt, in.delay(), in.u8() % 4 == 0 ? in.delay() : 0,
                                             in.u8() % 8 == 0 ? nullptr : +[](void*, tw_timer) {}, nullptr,
                                             in.u8() % 8 == 0 ? nullptr : &id);
                if (r == TW_OK) ids.push_back(id);
                break;
            }
            case 2:
            case 3: {  // start_ex with a context and a release hook
                auto* c = new Ctx;
                ctxs.push_back(c);
                c->rt = rt;
                c->behaviour = in.u8();
                alignas(8) unsigned char buf[Input::kBuf] = {};
                tw_timer_spec& spec = *reinterpret_cast<tw_timer_spec*>(buf);
                tw_timer_spec_init(&spec);
                spec.size = in.size(sizeof spec);
                spec.shard = static_cast<std::int32_t>(in.u8()) - 2;
                spec.deadline_ns = in.u8() % 4 == 0 ? tw_now_ns() + in.delay() : 0;
                spec.delay_ns = in.delay();
                spec.period_ns = in.u8() % 4 == 0 ? in.delay() : 0;
                spec.callback = in.u8() % 16 == 0 ? nullptr : on_fire;
                spec.arg = c;
                spec.release = on_release;
                tw_timer id = 0;
                const bool pass_spec = in.u8() % 16 != 0;
                const int r = tw_timer_start_ex(in.u8() % 16 == 0 ? nullptr : rt, pass_spec ? &spec : nullptr,
                                                in.u8() % 16 == 0 ? nullptr : &id);
                if (r == TW_OK) {
                    ids.push_back(id);
                    must_release.push_back(c);
                } else {
                    // The rule of tickwheel.h, from the return code alone:
                    // TW_EINVAL / TW_EFORKED never call the hook; every other
                    // failure calls it exactly once before returning.
                    const bool rejected = r == TW_EINVAL || r == TW_EFORKED;
                    if (c->released.load() != (rejected ? 0 : 1)) g_bad++;
                }
                break;
            }
            case 4: tw_timer_stop(in.u8() % 8 == 0 ? nullptr : rt, pick_id()); break;
            case 5: tw_timer_stop_sync(in.u8() % 8 == 0 ? nullptr : rt, pick_id()); break;
            case 6: tw_timer_reset(in.u8() % 8 == 0 ? nullptr : rt, pick_id(), in.delay()); break;
            case 7: {
                alignas(8) unsigned char buf[Input::kBuf] = {};
                tw_stats& st = *reinterpret_cast<tw_stats*>(buf);
                st.size = in.size(sizeof st);
                tw_runtime_stats(in.u8() % 8 == 0 ? nullptr : rt, in.u8() % 8 == 0 ? nullptr : &st);
                break;
            }
            case 8: tw_runtime_shutdown(rt); break;
            case 9: destroy(); break;  // destroy in the middle; later calls get rt == NULL
            case 10: {
                const char* s = tw_strerror(static_cast<int>(in.u64()));
                if (s == nullptr) g_bad++;
                break;
            }
            case 11: std::this_thread::sleep_for(std::chrono::microseconds(in.u8() * 20)); break;  // let timers fire
        }
    }
    destroy();
    // After destroy every successful start_ex has been released exactly once.
    for (Ctx* c : must_release)
        if (c->released.load() != 1) g_bad++;
    for (Ctx* c : ctxs) delete c;
    if (g_bad.load() != 0) {
        std::fprintf(stderr, "fuzz_capi: %ld contract violations\n", g_bad.load());
        std::abort();
    }
    return 0;
}
