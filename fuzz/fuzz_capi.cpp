// SPDX-License-Identifier: MIT OR Apache-2.0
// libFuzzer target: decodes its input into a sequence of C API calls against
// a real runtime -- including NULL pointers, zero/stale/random ids, huge
// delays, wrong struct sizes, shutdown and destroy in the middle -- and
// checks, besides "no crash, no sanitizer report, no hang", the accounting
// promises: every successful start's release hook runs exactly once, a
// start_ex rejected with TW_EINVAL never calls it, and any other failed
// start_ex calls it once before it returns.
//
// Delivery queues (since 1.2): queues are created and destroyed, timers
// started on one (spec.queue), on none, or on another runtime's queue
// (TW_EINVAL, hook not called), tw_queue_run() with random max and a zero or
// tiny timeout, tw_queue_fd() polled, tw_queue_get_stats() with fuzzed
// sizes. Checked besides: a queue-bound callback and its release hook run
// only on the thread calling tw_queue_run() / stop / destroy / shutdown (this
// one: the fuzzer's only thread), worker-bound callbacks never on it; from
// inside its own callback tw_queue_run() and tw_queue_destroy() of that queue
// are TW_EDEADLK; a readable fd means tw_queue_run() runs at least one (only
// this thread stops or runs a queue's timers); return codes as documented.
//
// Batches (since 1.4): tw_timer_start_n over specs of one stride (1.0, 1.2,
// 1.3 or a wider zero-padded layout, or garbage), with refused specs, other
// sizes and foreign queues in the middle; tw_timer_stop_n / tw_timer_reset_n
// over zero, random, stale, live and repeated ids. Checked besides: the count
// returned is the number of out[i] != 0 / of TW_OK results; an element that
// did not start has had its hook called at most once, before the call
// returned, and never again later; one that started is released exactly
// once (as every start_ex); a refused call (negative) called no hook; each
// result is a code the single call could return.
//
// Build: the `asan` preset (clang) builds it with -fsanitize=fuzzer,address,undefined.
// Run:   build/asan/fuzz/fuzz_capi build/asan/fuzz/corpus fuzz/corpus -max_total_time=600
// The runtime uses a 10 us tick and delays of at most a few ms, so timers
// really fire within an input ("fast clock").
#include <atomic>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>
#include <algorithm>

#include <poll.h>

#include "test_support/fuzz_input.hpp"
#include "tickwheel/tickwheel.h"

namespace {

struct Input : tw_test::FuzzInput {
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
    tw_queue* q = nullptr;  // the queue it was started on (nullptr: the workers)
    std::uint8_t behaviour = 0;
    bool manual = false;  // rt has a manual clock: callbacks run inside tw_runtime_advance on the fuzzer's thread
};

std::atomic<long> g_bad{0};
std::thread::id g_main;  // the thread running the inputs (and every tw_queue_run)

// TW_FUZZ_TRACE=1: print each queue operation and its result (to see what a seed does).
const bool g_trace = std::getenv("TW_FUZZ_TRACE") != nullptr;
void trace(const char* op, long a, long r) {
    if (g_trace) std::fprintf(stderr, "  %-16s %ld -> %ld\n", op, a, r);
}

void bad(const char* what) {
    std::fprintf(stderr, "fuzz_capi: %s\n", what);
    g_bad++;
}

void on_fire(void* arg, tw_timer id) {
    auto* c = static_cast<Ctx*>(arg);
    c->runs++;
    const bool on_main = std::this_thread::get_id() == g_main;
    if (c->q != nullptr && !on_main) bad("a queue-bound callback ran off the thread calling tw_queue_run()");
    if (c->q == nullptr && on_main && !c->manual) bad("a worker-bound callback ran on the fuzzer's thread");
    if (c->q == nullptr && !on_main && c->manual) bad("a manual runtime's callback ran off the advancing thread");
    if (c->manual && tw_runtime_advance(c->rt, 1000) != TW_EDEADLK) bad("tw_runtime_advance from a callback: not TW_EDEADLK");
    if (c->q != nullptr) {
        switch (c->behaviour / 8 % 4) {
            case 1:
                if (tw_queue_run(c->q, 1, 0) != TW_EDEADLK) bad("tw_queue_run of its own queue from a callback: not TW_EDEADLK");
                break;
            case 2:
                if (tw_queue_destroy(c->q) != TW_EDEADLK) bad("tw_queue_destroy of its own queue from a callback: not TW_EDEADLK");
                break;
            default: break;
        }
    }
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
void on_release(void* arg) {
    auto* c = static_cast<Ctx*>(arg);
    // A queue-bound timer ends inside tw_queue_run, a stop, tw_queue_destroy
    // or the shutdown: all called on this thread only (callbacks act on their own ids only).
    if (c->q != nullptr && std::this_thread::get_id() != g_main) bad("a queue-bound release hook ran on a worker");
    c->released++;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    Input in{{data, size}};
    std::vector<Ctx*> ctxs;          // every context handed to a start_ex (owned here)
    std::vector<tw_timer> ids;       // ids we got (valid at some point)
    std::vector<tw_timer> qids;      // the queue-bound ones among them
    std::vector<Ctx*> must_release;  // contexts whose release hook must run exactly once
    // Contexts of batch elements that did not start, with the number of
    // release hooks they had when the call returned: never another one later.
    std::vector<std::pair<Ctx*, int>> released_once_before;
    g_main = std::this_thread::get_id();
    tw_runtime* rt = nullptr;
    bool shut = false;            // rt was shut down
    bool manual = false;          // rt has a manual clock (TW_CONFIG_MANUAL_CLOCK)
    std::vector<tw_queue*> qs;    // rt's live queues (tw_runtime_destroy destroys them)
    tw_runtime* other = nullptr;  // another runtime, with a queue: foreign to rt
    tw_queue* other_q = nullptr;
    auto destroy = [&] {
        if (rt == nullptr) return;
        if (tw_runtime_destroy(rt) != TW_OK) g_bad++;
        rt = nullptr;
        shut = false;
        manual = false;
        qs.clear();
    };
    auto destroy_other = [&] {
        if (other == nullptr) return;
        if (tw_runtime_destroy(other) != TW_OK) g_bad++;  // destroys other_q too
        other = nullptr;
        other_q = nullptr;
    };
    // A queue of rt, or NULL, or (where allowed) another runtime's.
    auto pick_queue = [&](bool foreign_ok) -> tw_queue* {
        const std::uint8_t k = in.u8();
        if (k % 8 == 0) return nullptr;
        if (foreign_ok && k % 8 == 1 && other_q != nullptr) return other_q;
        return qs.empty() ? nullptr : qs[k / 8 % qs.size()];
    };
    // A timer's context (owned by ctxs).
    auto new_ctx = [&]() -> Ctx* {
        auto* c = new Ctx;
        ctxs.push_back(c);
        c->rt = rt;
        c->behaviour = in.u8();
        c->manual = manual;
        return c;
    };
    // A spec's fields after its size, for context c (the order of the
    // bytes read is the seeds' format: see fuzz/make_capi_queue_seeds.py).
    auto read_spec = [&](tw_timer_spec& spec, Ctx* c) {
        spec.shard = static_cast<std::int32_t>(in.u8()) - 2;
        spec.deadline_ns = in.u8() % 4 == 0 ? tw_now_ns() + in.delay() : 0;
        spec.delay_ns = in.delay();
        spec.period_ns = in.u8() % 4 == 0 ? in.delay() : 0;
        spec.callback = in.u8() % 16 == 0 ? nullptr : on_fire;
        spec.arg = c;
        spec.release = on_release;
        // Mostly a queue of rt (when there is one), sometimes none or another runtime's.
        spec.queue = pick_queue(true);
        // 1.3: policy (3..7 unknown), reserved, leeway, group (0 = none).
        spec.period_policy = in.u8() % 8;
        spec.clock = in.u8() % 16 == 0 ? static_cast<std::int32_t>(in.u8()) - 64 : static_cast<std::int32_t>(in.u8() % 3);
        spec.leeway_ns = in.u8() % 4 == 0 ? in.delay() : 0;
        spec.group = in.u8() % 4;
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
        switch (in.u8() % 27) {
            case 0: {  // (re)create, with a fuzzed config
                destroy();
                alignas(8) unsigned char buf[Input::kBuf] = {};
                tw_config& cfg = *reinterpret_cast<tw_config*>(buf);
                tw_config_init(&cfg);
                cfg.size = in.size(sizeof cfg);
                cfg.shards = in.u8() % 3;
                cfg.workers = 1 + in.u8() % 2;
                const std::uint8_t fl = in.u8();
                cfg.flags = fl % 16 == 0 ? 0xFFu : (fl % 8 == 2 ? TW_CONFIG_MANUAL_CLOCK : 0u);
                cfg.resolution_ns = in.u8() % 4 == 0 ? in.u64() : 10'000;
                cfg.max_timers = in.u8() % 4 == 0 ? in.u8() : 0;
                tw_runtime* out = nullptr;
                const int r = tw_runtime_create(in.u8() % 8 == 0 ? nullptr : &cfg, in.u8() % 16 == 0 ? nullptr : &out);
                if (r == TW_OK) {
                    rt = out;
                    // (The config pointer may have been NULL: ask the runtime.
                    // Advancing a manual clock by 0 runs nothing yet.)
                    manual = tw_runtime_advance(rt, 0) >= 0;
                }
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
                Ctx* c = new_ctx();
                alignas(8) unsigned char buf[Input::kBuf] = {};
                tw_timer_spec& spec = *reinterpret_cast<tw_timer_spec*>(buf);
                tw_timer_spec_init(&spec);
                spec.size = in.size(sizeof spec);
                read_spec(spec, c);
                const bool foreign = spec.queue != nullptr && spec.queue == other_q;
                // The queue field is read only from a spec of the 1.2 size or larger.
                const bool has_queue = spec.size >= offsetof(tw_timer_spec, period_policy) && spec.size <= 4096;
                const bool bad_13 = spec.size >= sizeof spec && spec.size <= 4096 &&
                                    (spec.period_policy > TW_PERIOD_BURST || spec.clock < 0 || spec.clock > 2);
                c->q = has_queue ? spec.queue : nullptr;
                tw_timer id = 0;
                const bool pass_spec = in.u8() % 16 != 0;
                tw_runtime* srt = in.u8() % 16 == 0 ? nullptr : rt;
                const int r = tw_timer_start_ex(srt, pass_spec ? &spec : nullptr, in.u8() % 16 == 0 ? nullptr : &id);
                trace(foreign ? "start_ex(foreign)" : c->q != nullptr ? "start_ex(queue)" : "start_ex",
                      static_cast<long>(spec.delay_ns), r);
                if (foreign && has_queue && pass_spec && srt != nullptr && r != TW_EINVAL)
                    bad("start_ex with another runtime's queue: not TW_EINVAL");
                if (bad_13 && pass_spec && r != TW_EINVAL && r != TW_EFORKED)
                    bad("start_ex with an unknown policy or clock: not TW_EINVAL");
                if (r == TW_OK) {
                    ids.push_back(id);
                    if (c->q != nullptr) qids.push_back(id);
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
            case 8:
                if (tw_runtime_shutdown(rt) == TW_OK) shut = true;
                trace("shutdown", 0, shut);
                break;
            case 9: destroy(); break;  // destroy in the middle; later calls get rt == NULL
            case 10: {
                const char* s = tw_strerror(static_cast<int>(in.u64()));
                if (s == nullptr) g_bad++;
                break;
            }
            case 11: std::this_thread::sleep_for(std::chrono::microseconds(in.u8() * 20)); break;  // let timers fire
            case 12: {  // create a queue
                tw_queue* out = reinterpret_cast<tw_queue*>(&out);  // garbage: must come back NULL on failure
                tw_runtime* qrt = in.u8() % 8 == 0 ? nullptr : rt;
                const bool pass_out = in.u8() % 16 != 0;
                const int r = tw_queue_create(qrt, pass_out ? &out : nullptr);
                trace("queue_create", 0, r);
                if (qrt == nullptr || !pass_out) {
                    if (r != TW_EINVAL) bad("tw_queue_create(NULL): not TW_EINVAL");
                } else if (shut) {
                    if (r != TW_ESHUTDOWN) bad("tw_queue_create after shutdown: not TW_ESHUTDOWN");
                } else if (r != TW_OK && r != TW_ENOMEM) {
                    bad("tw_queue_create: unexpected code");
                }
                if (pass_out && (r == TW_OK) != (out != nullptr)) bad("tw_queue_create: *out wrong");
                if (r == TW_OK) qs.push_back(out);
                break;
            }
            case 13: {  // destroy a queue (its timers are cancelled, hooks here)
                if (qs.empty() || in.u8() % 8 == 0) {
                    if (tw_queue_destroy(nullptr) != TW_EINVAL) bad("tw_queue_destroy(NULL): not TW_EINVAL");
                    break;
                }
                const std::size_t k = in.u8() % qs.size();
                const int r = tw_queue_destroy(qs[k]);
                trace("queue_destroy", static_cast<long>(k), r);
                if (r != TW_OK) bad("tw_queue_destroy: not TW_OK");
                qs.erase(qs.begin() + static_cast<std::ptrdiff_t>(k));
                break;
            }
            case 14:
            case 15: {  // run a queue: random max, a zero or tiny timeout
                tw_queue* q = pick_queue(false);
                std::size_t max;
                switch (in.u8() % 4) {
                    case 0: max = 0; break;
                    case 1: max = 1; break;
                    case 2: max = SIZE_MAX; break;
                    default: max = in.u8(); break;
                }
                const std::int64_t timeout = in.u8() % 4 == 0 ? static_cast<std::int64_t>(in.u8()) * 1000 : 0;  // < 256 us
                const int r = tw_queue_run(q, max, timeout);
                trace("queue_run", static_cast<long>(max), r);
                if (q == nullptr || max == 0) {
                    if (r != TW_EINVAL) bad("tw_queue_run(NULL or max 0): not TW_EINVAL");
                } else if (shut) {
                    if (r != TW_ESHUTDOWN) bad("tw_queue_run after shutdown: not TW_ESHUTDOWN");
                } else if (r < 0 || static_cast<std::size_t>(r) > max) {
                    bad("tw_queue_run: unexpected result");
                }
                break;
            }
            case 16: {  // the fd: level-triggered "something is due"
                tw_queue* q = pick_queue(false);
                const int fd = tw_queue_fd(q);
                if (q == nullptr) {
                    if (fd >= 0) bad("tw_queue_fd(NULL) not negative");
                    break;
                }
                if (fd < 0) {
                    bad("tw_queue_fd: negative");
                    break;
                }
                pollfd p{fd, POLLIN, 0};
                if (::poll(&p, 1, in.u8() % 4 == 0 ? 1 : 0) == 1 && (p.revents & POLLIN) != 0) {
                    // Readable: something is due (only this thread runs or stops
                    // queue-bound timers, so it is still due), or shut down.
                    const int r = tw_queue_run(q, SIZE_MAX, 0);
                    trace("readable: run", fd, r);
                    if (shut ? r != TW_ESHUTDOWN : r < 1) bad("readable fd, but tw_queue_run ran nothing");
                } else {
                    trace("not readable", fd, 0);
                    if (shut) bad("fd of a shut-down runtime's queue not readable");
                }
                break;
            }
            case 17: {  // stats with fuzzed sizes
                alignas(8) unsigned char buf[Input::kBuf] = {};
                tw_queue_stats& st = *reinterpret_cast<tw_queue_stats*>(buf);
                const std::uint32_t sz = in.size(sizeof st);
                st.size = sz;
                tw_queue* q = pick_queue(true);
                const bool pass = in.u8() % 8 != 0;
                const int r = tw_queue_get_stats(q, pass ? &st : nullptr);
                trace("queue_get_stats", static_cast<long>(sz), r);
                const bool valid = q != nullptr && pass && sz >= sizeof st && sz <= 4096;
                if (r != (valid ? TW_OK : TW_EINVAL)) bad("tw_queue_get_stats: unexpected code");
                if (r == TW_OK && st.size != sizeof st) bad("tw_queue_get_stats: size not the bytes filled");
                break;
            }
            case 18: {  // another runtime, whose queue is foreign to rt
                if (other != nullptr && in.u8() % 4 == 0) {
                    destroy_other();
                    break;
                }
                if (other != nullptr) break;
                tw_config cfg;
                tw_config_init(&cfg);
                cfg.shards = 1;
                cfg.workers = 1;
                cfg.resolution_ns = 10'000;
                if (tw_runtime_create(&cfg, &other) != TW_OK) {
                    other = nullptr;
                    break;
                }
                if (tw_queue_create(other, &other_q) != TW_OK) bad("tw_queue_create on a fresh runtime failed");
                break;
            }
            case 20: {  // query, with fuzzed sizes
                alignas(8) unsigned char buf[Input::kBuf] = {};
                tw_timer_info& info = *reinterpret_cast<tw_timer_info*>(buf);
                tw_timer_info_init(&info);
                info.size = in.size(sizeof info);
                const int r = tw_timer_query(in.u8() % 8 == 0 ? nullptr : rt, pick_id(), in.u8() % 16 == 0 ? nullptr : &info);
                if (r == TW_OK && (info.state < TW_TIMER_PENDING || info.state > TW_TIMER_RUNNING || info.shard < 0 ||
                                   info.size != sizeof info))
                    bad("tw_timer_query: TW_OK with a state, shard or size out of range");
                if (r != TW_OK && r != TW_EINVAL && r != TW_ENOENT && r != TW_EFORKED) bad("tw_timer_query: unexpected code");
                break;
            }
            case 21: {  // absolute re-arm: past, near, far, out of range
                std::uint64_t d = 0;
                switch (in.u8() % 4) {
                    case 0: d = in.u64(); break;
                    case 1: d = tw_now_ns() - in.delay() / 2; break;
                    default: d = tw_now_ns() + in.delay(); break;
                }
                const int r = tw_timer_reset_at(in.u8() % 8 == 0 ? nullptr : rt, pick_id(), d);
                if (r == TW_OK && d > static_cast<std::uint64_t>(INT64_MAX)) bad("tw_timer_reset_at beyond INT64_MAX: TW_OK");
                break;
            }
            case 22: {  // group stop: a real group, 0, or garbage flags
                const std::uint64_t g = in.u8() % 5;
                const unsigned flags = in.u8() % 8 == 0 ? in.u8() : (in.u8() % 2 == 0 ? TW_SYNC : 0u);
                const std::int64_t n = tw_group_stop(in.u8() % 8 == 0 ? nullptr : rt, g, flags);
                if ((g == 0 || (flags & ~TW_SYNC) != 0) && n != TW_EINVAL) bad("tw_group_stop: bad group/flags not TW_EINVAL");
                if (n < 0 && n != TW_EINVAL && n != TW_EFORKED) bad("tw_group_stop: unexpected code");
                break;
            }
            case 23: {  // advance a manual clock (a real runtime: TW_EINVAL)
                std::uint64_t step = in.u8() % 4 == 0 ? in.delay() : in.u8() * 10'000ull;
                // A manual clock serves every deadline it passes, in order: an
                // advance of TW_MAX_DELAY_NS over a 20 us periodic timer is
                // 10^11 runs (a libFuzzer timeout, not a finding). Bounded to
                // 100 ms on a manual runtime; a real one still gets any step.
                if (manual && rt != nullptr && step > 100'000'000) step = 100'000'000;
                const int r = tw_runtime_advance(in.u8() % 16 == 0 ? nullptr : rt, step);
                trace("advance", static_cast<long>(step), r);
                if (rt != nullptr && !manual && !shut && r >= 0) bad("tw_runtime_advance on a real runtime: not an error");
                if (r < 0 && r != TW_EINVAL && r != TW_ESHUTDOWN && r != TW_EFORKED) bad("tw_runtime_advance: unexpected code");
                break;
            }
            case 24: {  // a batch of starts
                constexpr std::size_t kMax = 20;
                const std::size_t n = in.u8() % kMax;
                std::uint32_t stride;
                switch (in.u8() % 8) {
                    case 0: stride = 56; break;
                    case 1: stride = 64; break;
                    case 2: stride = 96; break;  // a newer caller's, zero-padded
                    case 3: stride = in.u8(); break;  // mostly invalid: the call's TW_EINVAL
                    default: stride = sizeof(tw_timer_spec); break;
                }
                alignas(8) unsigned char buf[kMax * 256] = {};
                std::vector<Ctx*> mine;
                std::vector<bool> must_refuse;
                for (std::size_t i = 0; i < n; ++i) {
                    Ctx* c = new_ctx();
                    mine.push_back(c);
                    tw_timer_spec spec;
                    tw_timer_spec_init(&spec);
                    spec.size = in.u8() % 16 == 0 ? in.size(stride) : stride;  // another size: refused
                    read_spec(spec, c);
                    const bool layout_ok = spec.size == stride && stride <= 256;
                    const bool has_queue = layout_ok && stride >= 64;
                    const bool has_13 = layout_ok && stride >= sizeof spec;  // the 1.3 fields are read
                    c->q = has_queue ? spec.queue : nullptr;
                    // What tw_timer_start_ex certainly refuses (a deadline's
                    // check depends on the clock: neither way asserted).
                    must_refuse.push_back(
                        layout_ok &&
                        (spec.callback == nullptr || spec.shard < -1 || spec.period_ns > TW_MAX_DELAY_NS ||
                         (spec.deadline_ns == 0 && spec.delay_ns > TW_MAX_DELAY_NS) ||
                         (has_queue && spec.queue != nullptr && spec.queue == other_q) ||
                         (has_13 && (spec.period_policy > TW_PERIOD_BURST || spec.clock < 0 || spec.clock > 2 ||
                                     spec.leeway_ns > TW_MAX_DELAY_NS))));
                    if (stride <= 256) std::memcpy(buf + i * stride, &spec, std::min<std::size_t>(stride, sizeof spec));
                }
                tw_timer out[kMax];
                for (tw_timer& o : out) o = 7;
                tw_runtime* srt = in.u8() % 16 == 0 ? nullptr : rt;
                const bool pass_specs = in.u8() % 16 != 0, pass_out = in.u8() % 16 != 0;
                const int r = tw_timer_start_n(srt, pass_specs ? reinterpret_cast<const tw_timer_spec*>(buf) : nullptr, n,
                                               pass_out ? out : nullptr);
                trace("start_n", static_cast<long>(n), r);
                if (r < 0) {
                    if (r != TW_EINVAL) bad("tw_timer_start_n: a negative code other than TW_EINVAL (no fork here)");
                    for (Ctx* c : mine)
                        if (c->released.load() != 0) bad("tw_timer_start_n refused, but a hook was called");
                    break;
                }
                if ((srt == nullptr || ((!pass_specs || !pass_out) && n != 0)) && r >= 0)
                    bad("tw_timer_start_n with a NULL argument: not TW_EINVAL");
                if (static_cast<std::size_t>(r) > n) bad("tw_timer_start_n: more started than given");
                int started = 0;
                for (std::size_t i = 0; i < n; ++i) {
                    Ctx* c = mine[i];
                    if (out[i] != 0) {
                        ++started;
                        ids.push_back(out[i]);
                        if (c->q != nullptr) qids.push_back(out[i]);
                        must_release.push_back(c);
                        if (must_refuse[i]) bad("tw_timer_start_n started a spec it must refuse");
                    } else {
                        const int now = c->released.load();
                        if (now > 1) bad("tw_timer_start_n: a failed element's hook ran twice");
                        if (must_refuse[i] && now != 0) bad("tw_timer_start_n: a refused (TW_EINVAL) element's hook ran");
                        released_once_before.emplace_back(c, now);
                    }
                }
                if (started != r) bad("tw_timer_start_n: the count is not the ids given");
                break;
            }
            case 25:
            case 26: {  // a batch of stops or re-arms
                constexpr std::size_t kMax = 24;
                const std::size_t n = in.u8() % kMax;
                tw_timer batch[kMax];
                for (std::size_t i = 0; i < n; ++i) batch[i] = i > 0 && in.u8() % 8 == 0 ? batch[i - 1] : pick_id();
                int results[kMax];
                for (int& x : results) x = 1;
                const bool want = in.u8() % 4 != 0;
                tw_runtime* brt = in.u8() % 16 == 0 ? nullptr : rt;
                const bool pass_ids = in.u8() % 16 != 0;
                const std::uint64_t delay = in.delay();
                const bool reset = in.u8() % 2 == 0;
                const int r = reset ? tw_timer_reset_n(brt, pass_ids ? batch : nullptr, n, delay, want ? results : nullptr)
                                    : tw_timer_stop_n(brt, pass_ids ? batch : nullptr, n, want ? results : nullptr);
                trace(reset ? "reset_n" : "stop_n", static_cast<long>(n), r);
                if (r < 0) {
                    if (r != TW_EINVAL && r != TW_EFORKED) bad("tw_timer_stop_n/reset_n: unexpected code");
                    if (r == TW_EINVAL && brt != nullptr && (pass_ids || n == 0) && !(reset && delay > TW_MAX_DELAY_NS))
                        bad("tw_timer_stop_n/reset_n: TW_EINVAL for good arguments");
                    break;
                }
                if (brt == nullptr || (!pass_ids && n != 0) || (reset && delay > TW_MAX_DELAY_NS))
                    bad("tw_timer_stop_n/reset_n: bad arguments not TW_EINVAL");
                if (static_cast<std::size_t>(r) > n) bad("tw_timer_stop_n/reset_n: more than given");
                if (want) {
                    int ok = 0;
                    for (std::size_t i = 0; i < n; ++i) {
                        ok += results[i] == TW_OK;
                        if (results[i] != TW_OK && results[i] != TW_ENOENT && results[i] != TW_ESHUTDOWN)
                            bad("tw_timer_stop_n/reset_n: a result no single call returns");
                        if (shut && results[i] != TW_ESHUTDOWN) bad("tw_timer_stop_n/reset_n after shutdown: not TW_ESHUTDOWN");
                    }
                    if (ok != r) bad("tw_timer_stop_n/reset_n: the count is not the TW_OK results");
                }
                break;
            }
            case 19: {  // stop, stop_sync or reset a queue-bound timer (often the last started: maybe due, not yet run)
                if (qids.empty()) break;
                const std::uint8_t k = in.u8();
                const tw_timer id = k % 2 == 0 ? qids.back() : qids[k / 2 % qids.size()];
                switch (in.u8() % 3) {
                    case 0: trace("stop", 0, tw_timer_stop(rt, id)); break;
                    case 1: trace("stop_sync", 0, tw_timer_stop_sync(rt, id)); break;
                    default: trace("reset", 0, tw_timer_reset(rt, id, in.delay())); break;
                }
                break;
            }
        }
    }
    // Some queues destroyed on their own first, then the rest with the runtime.
    if (!qs.empty() && (size % 2) == 0) {
        if (tw_queue_destroy(qs.back()) != TW_OK) bad("tw_queue_destroy at the end: not TW_OK");
        qs.pop_back();
    }
    destroy();
    destroy_other();
    // After destroy every successful start_ex has been released exactly once.
    for (Ctx* c : must_release)
        if (c->released.load() != 1) g_bad++;
    // A batch element that did not start: no hook after its call returned.
    for (const auto& [c, then] : released_once_before)
        if (c->released.load() != then) bad("a failed batch start's hook ran after the call returned");
    for (Ctx* c : ctxs) delete c;
    if (g_bad.load() != 0) {
        std::fprintf(stderr, "fuzz_capi: %ld contract violations\n", g_bad.load());
        std::abort();
    }
    return 0;
}
