// SPDX-License-Identifier: MIT OR Apache-2.0
// The classic hand-written timer service: one std::mutex, an ordered
// std::map keyed by (deadline, sequence) holding std::function callbacks,
// and worker thread(s) sleeping on a std::condition_variable until the
// earliest deadline. The key is the caller's handle: stop = erase(key),
// O(log n); re-arm = extract + re-key + insert (no allocation). A start that
// becomes the earliest deadline notifies a worker.
//
// --workers N worker threads (default 1, the classic design; workload 8
// uses 2, like tickwheel's arena).
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "driver.hpp"

using namespace twb;

namespace {

class TimerService {
public:
    struct Key {
        std::int64_t deadline;  // steady_clock ns
        std::uint64_t seq;
        bool operator<(const Key& o) const { return deadline != o.deadline ? deadline < o.deadline : seq < o.seq; }
    };

    ~TimerService() { stop_workers(); }

    void spawn(int n) {
        stopping_ = false;
        for (int i = 0; i < n; ++i) workers_.emplace_back([this] { work(); });
    }
    void stop_workers() {
        {
            std::lock_guard<std::mutex> lk(m_);
            stopping_ = true;
        }
        cv_.notify_all();
        for (auto& t : workers_) t.join();
        workers_.clear();
    }

    template <class F>
    Key start_at(std::int64_t deadline, F&& f) {
        std::unique_lock<std::mutex> lk(m_);
        const Key k{deadline, ++seq_};
        const auto it = q_.emplace(k, std::forward<F>(f)).first;
        const bool first = it == q_.begin();
        lk.unlock();
        if (first) cv_.notify_one();
        return k;
    }
    template <class F>
    Key start(std::int64_t delay, F&& f) {
        return start_at(now_ns() + delay, std::forward<F>(f));
    }
    bool stop(const Key& k) {
        std::lock_guard<std::mutex> lk(m_);
        return q_.erase(k) != 0;
    }
    bool reset(Key& k, std::int64_t delay) {
        const std::int64_t d = now_ns() + delay;
        std::unique_lock<std::mutex> lk(m_);
        auto nh = q_.extract(k);
        if (nh.empty()) return false;
        nh.key() = Key{d, ++seq_};
        k = nh.key();
        const bool first = q_.insert(std::move(nh)).position == q_.begin();
        lk.unlock();
        if (first) cv_.notify_one();
        return true;
    }

private:
    void work() {
        std::unique_lock<std::mutex> lk(m_);
        while (!stopping_) {
            if (q_.empty()) {
                cv_.wait(lk);
                continue;
            }
            auto it = q_.begin();
            if (it->first.deadline > now_ns()) {
                cv_.wait_until(lk, Clock::time_point(ns(it->first.deadline)));
                continue;
            }
            std::function<void()> fn = std::move(it->second);
            q_.erase(it);
            lk.unlock();
            fn();
            lk.lock();
        }
    }

    std::mutex m_;
    std::condition_variable cv_;
    std::map<Key, std::function<void()>> q_;
    std::uint64_t seq_ = 0;
    bool stopping_ = false;
    std::vector<std::thread> workers_;
};

struct MutexPeer : PacedPeer {
    static constexpr bool kThreadSafe = true;
    static constexpr bool kHasDriver = true;
    using H = TimerService::Key;
    struct Local {
        explicit Local(MutexPeer&) {}
    };

    int nworkers;
    TimerService svc;

    explicit MutexPeer(const Opts& o) : nworkers(std::max(1, o.workers)) {
        if (o.workload != "expiry") svc.spawn(nworkers);
    }
    std::string name() const { return nworkers == 1 ? "mutex-map" : nworkers == 2 ? "mutex-map-2w" : "mutex-map-Nw"; }

    H start(Local&, std::int64_t d) {
        return svc.start(d, [] {});
    }
    bool stop(Local&, H k) { return svc.stop(k); }
    bool rearm(Local&, H& k, std::int64_t d) { return svc.reset(k, d); }
    void finish(Local&) {}
    void drain() {}
    void before_rep() {}

    template <class F>
    void start_cb(Local&, std::int64_t d, F&& f) {
        svc.start(d, std::forward<F>(f));
    }
    void start_slow(Local&) { arm_slow(now_ns() + 10 * kMs); }
    void arm_slow(std::int64_t at) {
        svc.start_at(at, [this, at] {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            std::int64_t n = at + 10 * kMs;
            while (n <= now_ns()) n += 10 * kMs;
            arm_slow(n);
        });
    }

    // Expiry: n timers loaded while no worker runs; after the window has
    // passed the worker(s) start and deliver the backlog.
    ExpiryCtx ctx;
    Sample expiry_rep(Local&, long n, const Opts& o) {
        ctx.reset(n);
        std::mt19937_64 rng(o.seed);
        const std::int64_t t_load = now_ns();
        ExpiryCtx* c = &ctx;
        for (long i = 0; i < n; ++i)
            svc.start_at(t_load + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(o.window_ms * kMs)), [c] {
                c->delivered();
            });
        const std::int64_t t_loaded = now_ns();
        sleep_until_ns(t_load + (o.window_ms + 2) * kMs);
        const std::int64_t t0 = now_ns();
        svc.spawn(nworkers);
        while (ctx.last.load() == 0) sleep_until_ns(now_ns() + 200 * kUs);
        svc.stop_workers();
        return expiry_sample(n, t0, ctx.last.load(), t_load, t_loaded);
    }
};

}  // namespace

int main(int argc, char** argv) { return run_main<MutexPeer>(argc, argv); }
