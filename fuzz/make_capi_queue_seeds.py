#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Writes the delivery-queue seeds of fuzz/fuzz_capi.cpp into fuzz/corpus/.

Each seed is a short, meaningful call sequence in the fuzzer's input format
(see LLVMFuzzerTestOneInput in fuzz_capi.cpp: one byte picks the operation,
byte % 27, then each operation reads its own bytes): timers on a queue
stopped and reset while due, a queue of another runtime in a spec, shutdown
with queue-bound timers pending, callbacks that run or destroy their own
queue or shut the runtime down, and tw_queue_get_stats with bad sizes. Any
bytes are a valid input; these only start the fuzzer where the interesting
states are.
Usage: fuzz/make_capi_queue_seeds.py [outdir]
"""
import os
import sys

# Operation codes (input byte % 27; the batch calls are 24-26).
CREATE, START_EX, STOP, SHUTDOWN, SLEEP = 0, 2, 4, 8, 11
Q_CREATE, Q_DESTROY, Q_RUN, Q_FD, Q_STATS, OTHER, Q_STOP = 12, 13, 14, 16, 17, 18, 19
QUERY, RESET_AT, GROUP_STOP, ADVANCE = 20, 21, 22, 23

RIGHT = 4  # Input::size(): the struct's own size
ONE = 1    # a byte that takes the ordinary branch of the `% 4/8/16 == 0` choices


def create(manual=False):
    # size, shards 1, workers 2, flags 0 (2: TW_CONFIG_MANUAL_CLOCK), resolution 10 us, no limit, cfg, out
    return [CREATE, RIGHT, 1, 1, 2 if manual else ONE, ONE, ONE, ONE, ONE]


def delay_zero():
    return [0]


def delay_us(us):  # Input::delay(): u8 * 20 us
    return [4, us // 20]


def start(behaviour, delay, queue_pick, period=None, policy=0, group=0):
    """start_ex; queue_pick: 0 = NULL, 1 = the other runtime's, 2 + 8 * i = rt's queue i.
    The 1.3 fields: policy, clock (choice, value: monotonic), leeway (none), group."""
    return ([START_EX, behaviour, RIGHT, ONE, ONE] + delay + ([0] + period if period else [ONE]) +
            [ONE, queue_pick, policy, ONE, 0, ONE, group, ONE, ONE, ONE])


def advance(us10):
    """tw_runtime_advance by us10 * 10 us."""
    return [ADVANCE, ONE, us10, ONE]


def q_create():
    return [Q_CREATE, ONE, ONE]


def q_destroy(i):
    return [Q_DESTROY, ONE, i]


def q_run(queue_pick, max_sel=2, timeout_us=None):
    """max_sel: 0 -> max 0, 1 -> 1, 2 -> SIZE_MAX."""
    return [Q_RUN, queue_pick, max_sel] + ([0, timeout_us] if timeout_us else [ONE])


def q_fd(queue_pick):
    return [Q_FD, queue_pick, ONE]


def q_stats(size_sel, queue_pick, extra=()):
    return [Q_STATS, size_sel, *extra, queue_pick, ONE]


def q_stop(last, op, delay=()):
    """op: 0 stop, 1 stop_sync, 2 reset; last: the last started queue-bound timer, else the first."""
    return [Q_STOP, 0 if last else 1, op, *delay]


def sleep(us):
    return [SLEEP, us // 20]


Q0, Q1, FOREIGN, NONE = 2, 10, 1, 0

SEEDS = {
    # Three timers due at once on a queue nobody runs yet; one stopped and one
    # reset while due; the fd polled (readable: a run must run one); destroy.
    "seed_queue_due_stop_reset": create() + q_create() + start(0, delay_zero(), Q0) * 3 + sleep(2000) +
    q_stop(True, 0) + q_stop(False, 2, delay_zero()) + q_fd(Q0) + sleep(1000) + q_run(Q0, 1) + q_fd(Q0) +
    q_stop(True, 1) + q_destroy(0),
    # Both due timers stopped before any run: the fd is not readable any more.
    "seed_queue_due_stop_all": create() + q_create() + start(0, delay_zero(), Q0) * 2 + sleep(2000) +
    q_stop(True, 0) + q_stop(False, 1) + q_fd(Q0) + q_run(Q0),
    # A spec naming another runtime's queue: TW_EINVAL, hook not called.
    "seed_queue_foreign": create() + q_create() + [OTHER] + start(0, delay_zero(), FOREIGN) +
    start(0, delay_us(100), Q0) + sleep(1000) + q_run(Q0, 2, 200) + q_stats(RIGHT, FOREIGN) +
    [OTHER, 0] + q_run(Q0),
    # Shutdown with queue-bound timers pending and due (one periodic): the
    # hooks run in the shutdown; run gives TW_ESHUTDOWN, the fd stays readable.
    "seed_queue_shutdown": create() + q_create() + q_create() + start(0, delay_us(200), Q0, delay_us(200)) +
    start(0, delay_zero(), Q1) + start(0, delay_us(5000), Q1) + sleep(1500) + q_run(Q0, 1) + [SHUTDOWN] +
    q_run(Q0) + q_fd(Q1) + q_create() + q_destroy(1) + q_run(Q0, 2, 50),
    # Callbacks on a queue that run it (EDEADLK), destroy it (EDEADLK), shut
    # the runtime down (EDEADLK), stop_sync or reset themselves.
    "seed_queue_callbacks": create() + q_create() + start(9, delay_zero(), Q0) + start(17, delay_zero(), Q0) +
    start(3, delay_zero(), Q0) + start(8, delay_us(100), Q0, delay_us(100)) + sleep(1000) + q_run(Q0) +
    sleep(500) + q_run(Q0) + q_run(Q0, 0) + q_run(NONE) + q_stop(True, 0),
    # tw_queue_get_stats with sizes 0, short, long (zero tail), random.
    # A manual clock: one-shots, a burst and a skip periodic timer, in groups;
    # advances run them on the fuzzer's thread (callbacks that stop, re-arm,
    # stop_sync themselves, or try to advance: TW_EDEADLK), a group stop.
    "seed_manual_clock": create(manual=True) + start(0, delay_us(100), NONE, group=1) +
    start(2, delay_us(200), NONE, delay_us(60), policy=2, group=1) + start(3, delay_us(60), NONE, delay_us(40)) +
    advance(50) + advance(200) + [GROUP_STOP, ONE, ONE, 0, ONE] + advance(100) + start(1, delay_zero(), NONE) +
    advance(1) + [SHUTDOWN] + advance(1),
    "seed_queue_stats_sizes": create() + q_create() + q_stats(0, Q0) + q_stats(1, Q0) + q_stats(2, Q0) +
    q_stats(3, Q0, [0, 0, 0, 0, 0, 0, 0x10, 0x00]) + q_stats(RIGHT, Q0) + q_stats(RIGHT, NONE) + q_fd(NONE) +
    q_destroy(0),
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        assert all(0 <= b < 256 for b in data), name
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes(data))
    print(f"wrote {len(SEEDS)} seeds to {out}")


if __name__ == "__main__":
    main()
