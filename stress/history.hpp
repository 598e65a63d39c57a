// SPDX-License-Identifier: MIT OR Apache-2.0
// tw_stress history: the record of one run (every call and return, every
// callback run and release hook) and the checker that holds it against a
// sequential model of the C API's contract (history_check.cpp). The driver
// that produces the record is history_run.cpp; usage is at the top of it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stress::history {

/// What the run mixes (--features, a comma list of these names or "all").
enum Feature : unsigned {
    kFBoottime = 1u << 0,  // timers on CLOCK_BOOTTIME
    kFRealtime = 1u << 1,  // timers on CLOCK_REALTIME
    kFSteps = 1u << 2,     // wall-clock steps (test_hooks::realtime_shift_ns) while timers run
    kFPeriodic = 1u << 3,  // fixed-rate periodic timers (TW_PERIOD_SKIP, TW_PERIOD_BURST)
    kFDelay = 1u << 4,     // TW_PERIOD_DELAY timers; their callbacks reset themselves
    kFGroups = 1u << 5,    // groups and tw_group_stop (with and without TW_SYNC)
    kFRearm = 1u << 6,     // one-shot callbacks that re-arm themselves (also grouped ones)
    kFQueues = 1u << 7,    // delivery queues, each run by its own thread
    kFBatch = 1u << 8,     // tw_timer_start_n / stop_n / reset_n
    kFStale = 1u << 9,     // calls on stale ids (of released timers)
    kFNest = 1u << 10,     // at the end a callback waits in tw_queue_run(q, 1, -1) while the runtime shuts down
    kFQcreate = 1u << 11,  // at the end queues are created while the runtime shuts down
    kFQwait = 1u << 12,    // queue runners also wait in tw_queue_run(q, n, -1) (else a timeout <= 5 ms)
    kFQdestroy = 1u << 14, // a start bound to a queue in flight while tw_queue_destroy(q) runs, then a queue in its slot
    // Not in "all": group stops from producer 0 only (two group stops of one
    // group at once were found to let a timer run after the second returned;
    // fixed: GroupIndex::claim).
    kFGroupStopsOneThread = 1u << 13,
    // A quarter of the wall-clock timers due in 2 .. 8 s (with steps): such a
    // timer must follow every later step (found with it: the clock-step
    // index's compaction dropped the entry of a start still in flight;
    // fixed: GroupIndex::live).
    kFFar = 1u << 15,
    // Issue 31: faults on the callers (history_run.cpp says how each is made).
    kFFreeze = 1u << 16,   // one producer parked for good at a schedule point it passes (a frozen caller)
    kFLowPrio = 1u << 17,  // one producer at nice 19 or SCHED_IDLE, pinned beside a spinning thread
    kFFork = 1u << 18,     // fork() at a schedule point of a producer; the child creates a runtime and fires a timer
    kFQuery = 1u << 19,    // tw_timer_query on live and stale ids, its answer checked against the model
    kFQuiet = 1u << 20,    // quiet phases: the load pauses, fast periodic timers are stopped, single short starts probe a sparse wheel
    kFResets = 1u << 22,   // a one-shot reset later just as it comes due, then at once to 0 (the claim's re-file: issue 31's bug 3)
    // Not in "all": the spinner of lowprio beside a producer at normal priority
    // (what the spinner alone costs the runtime's threads: the slack's measure).
    kFSpin = 1u << 21,
    kFAll = ((1u << 13) - 1) | kFQdestroy | kFFar | kFFreeze | kFLowPrio | kFFork | kFQuery | kFQuiet | kFResets,
};
/// Parses "all", "none", "a,b,-c" (names as listed in history_run.cpp); false on an unknown name.
bool parse_features(const std::string& s, unsigned& out);
std::string feature_names(unsigned f);

enum Kind : std::uint8_t {
    kStart,      // t0/t1 call/return; arg: delay (ns) or absolute deadline (flag kAbs); result: TW_OK or the error
    kStop,       // flags kSync for stop_sync
    kReset,      // arg: delay, or deadline (kAbs)
    kGroupStop,  // arg: group; result: the count (or error); kSync
    kRun,        // a callback: t0 entry, t1 its last instruction; own0/own1 the raw own clock there
    kRelease,    // a release hook: t0 entry, t1 its last instruction
    kShift,      // test_hooks::realtime_shift_ns set: arg new value, own0 old value
    kShutdown,   // tw_runtime_shutdown
    kNested,     // a callback's tw_queue_run(q, 1, -1) (nest): result
    kQueueLeft,  // a queue created while shutting down (qcreate): result of tw_queue_run(q,1,0) after shutdown
    kQuery,      // tw_timer_query: result; q_* the answer (TW_OK); own0/own1 the raw own clock around it
};

enum Flag : std::uint8_t {
    kAbs = 1,    // arg is an absolute deadline on the timer's clock
    kSync = 2,   // stop_sync / TW_SYNC
    kStaleId = 4,  // the id is of a timer whose release hook already ran
    kInCb = 8,   // called from inside this timer's own callback
    kInBatch = 16, // an element of a batch call (t0/t1 are the whole call's)
    kOpen = 32,    // in flight for ever: the call never returned (its thread froze or hung); t1, own1 = kNever, result unknown
};
constexpr std::int64_t kNever = INT64_MAX / 4;

/// Thread kinds (Event::tkind).
enum ThreadKind : std::uint8_t { kWorker = 0, kProducer, kRunner, kMain, kStepper };

struct Event {
    std::int64_t t0 = 0, t1 = 0;      // CLOCK_MONOTONIC ns
    std::int64_t own0 = 0, own1 = 0;  // the timer's clock, raw (no test shift), at t0 / t1
    std::int64_t arg = 0;
    std::uint64_t id = 0;
    std::uint32_t key = 0;  // the timer (TimerInfo index + 1); 0 = none
    std::int32_t result = 0;
    std::uint16_t thread = 0;  // thread ordinal
    std::uint8_t kind = 0;
    std::uint8_t flags = 0;
    std::uint8_t tkind = 0;  // ThreadKind of the recording thread
    std::uint8_t in_op = 0;  // 1 + Kind of the call this thread was inside (release hooks), 0 none
    std::int16_t queue = -1; // the queue whose tw_queue_run this thread was inside (-1 none)
    // kQuery with TW_OK: the answer.
    std::int8_t q_state = 0, q_clock = 0;
    std::uint32_t q_runs = 0, q_missed = 0;
    std::uint64_t q_deadline = 0, q_period = 0, q_leeway = 0, q_group = 0;
};

/// A delay the fuzzer injected (a sleep, a park, a yield that gave the CPU
/// away, a slow callback, a freeze), recorded by the thread it delayed
/// (per-thread buffers): the checker's timeliness bound counts those of the
/// runtime's own threads (Delay::kDriver .. kRunner), never a caller's.
struct Delay {
    enum Cls : std::uint8_t {
        kDriver = 0, kLibWorker, kRunnerThread,  // the runtime's own threads: counted
        kCaller,                                 // a caller's: never counted
        kMachine,  // not injected: a heartbeat thread of the harness woke this late (the machine's load; counted apart)
    };
    std::int64_t t0 = 0, t1 = 0;  // CLOCK_MONOTONIC ns (t1 = kNever: a freeze)
    std::uint8_t cls = kCaller;
    char site = 0;   // the schedule point (test_hooks.hpp), or 'C' a slow callback, 'N' a nested wait
    char what = 0;   // 'y' yield, 's' sleep, 'p' park, 'q' a queue-create sleep, 'c' callback, 'F' freeze
    std::uint16_t thread = 0;
};

/// What a timer was started as.
struct TimerInfo {
    int clock = 0;           // TW_CLOCK_*
    unsigned policy = 0;     // TW_PERIOD_*
    std::uint64_t period = 0;
    std::uint64_t leeway = 0;
    std::uint64_t group = 0;
    int queue = -1;          // index of its delivery queue, -1 = workers
    bool probe = false;      // a quiet phase's probe (the summary shows how late those ran)
};

struct Config {
    std::int64_t resolution_ns = 1'000'000;
    /// The machine's slack of the timeliness bound: a run must begin by the
    /// latest time it was due (deadline + tick + leeway) + the delays injected
    /// into the runtime's own threads meanwhile + this (history_check.cpp).
    std::int64_t slack_ns = 100'000'000;
    std::int64_t final_ns = 0;               // when the last operation returned (the final check's "now")
    bool complete = true;                    // false: shutdown did not return (a snapshot of the record: no end rules)
    std::vector<Delay> delays;               // every injected delay (the checker keeps the runtime threads' ones)
    bool summary = false;                    // print the timeliness margin measured (tw_stress history)
    std::int64_t boot_offset = 0;            // CLOCK_BOOTTIME - CLOCK_MONOTONIC
    std::int64_t real_offset = 0;            // raw CLOCK_REALTIME - CLOCK_MONOTONIC
};

/// Checks the history; prints each violation with the operations on the
/// offending timer's slot, and returns how many it found.
std::size_t check(const Config& cfg, const std::vector<TimerInfo>& timers, std::vector<Event> events,
                  unsigned max_reports = 4);

const char* kind_name(std::uint8_t k);

/// tw_stress history-selftest: the checker against small histories with
/// known violations, and correct ones. Returns the exit status.
int selftest();

/// tw_stress history: runs the load for `seconds`, shuts down, checks.
/// Returns the exit status (0 = no violation).
struct RunOptions {
    double seconds = 10;
    unsigned long seed = 1;
    unsigned threads = 3;
    unsigned features = kFAll;
    unsigned fuzz = 64;
    std::int64_t slack_ns = 0;
    char freeze_site = 0;    // --freeze-site C: freeze at this site (0: one the producer passed, by the seed)
    long quiet_ms = 0;       // --quiet-ms N: a quiet phase's length (0: 600 ms)
    bool sanitized = false;  // fork is off under the sanitizers (their allocators are not fork-safe)
};
int run(const RunOptions& o);

}  // namespace stress::history
