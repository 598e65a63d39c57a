#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Writes the seed corpus of fuzz/fuzz_wheel.cpp into fuzz/corpus_wheel/.

Each seed is a short, meaningful operation sequence in the fuzzer's input
format (see Fuzz::run, decode_deadline and decode_advance in fuzz_wheel.cpp):
timers on every level then a tickless driver to the end, timers around 2^48
epoch boundaries and on the overflow list, the end of time, slot-boundary
carries, a crowded slot, and some plain churn. Any bytes are a valid input;
these only start the fuzzer where the interesting states are.
Usage: fuzz/make_wheel_seeds.py [outdir]
"""
import os
import random
import struct
import sys

# Operation codes (input byte % 10 in Fuzz::run).
INSERT, REMOVE, REARM, ADVANCE, POP, POP_ALL, TICKLESS, CROWD = 0, 2, 3, 4, 6, 7, 8, 9


def u64(v):
    return list(struct.pack(">Q", v & (2**64 - 1)))


# Deadlines (decode_deadline).
def d_past(back):            return [0, back]
def d_near(ahead):           return [2, ahead - 1]            # now + ahead, 1 <= ahead <= 256
def d_boundary(level, k, delta):  return [4, level, k - 1, delta + 2]
def d_within(x, level):      return [5, (x - 1) >> 8, (x - 1) & 0xFF, level]
def d_epoch(k, delta):       return [6, k - 1, delta + 2]
def d_raw(v):                return [7] + u64(v)
def d_end(back):             return [8, back]
def d_same_as(i):            return [9, i]
def d_far(x):                return [10] + u64(x)


# Clock moves (decode_advance).
def a_plus1():               return [1]
def a_plus(x):               return [2, x]
def a_deadline(i, delta):    return [3, i, delta + 1]
def a_boundary(level, k, delta):  return [4, level, k - 1, delta + 1]
def a_epoch(k, delta):       return [5, k - 1, delta + 2]
def a_raw(v):                return [7] + u64(v)
def a_end():                 return [8, 0xFF]
def a_next_expiry():         return [9]


def insert(i, d):            return [INSERT, i] + d
def rearm(i, d):             return [REARM, i] + d
def remove(i):               return [REMOVE, i]
def advance(a):              return [ADVANCE] + a
def pop(n):                  return [POP, n - 1]
def pop_all():               return [POP_ALL]
def tickless(steps):         return [TICKLESS, steps - 1]
def crowd(d, first, n):      return [CROWD] + d + [first, n - 1]


def seeds():
    out = {}
    # Every level, then a tickless driver down through every cascade.
    s = [31, 0]  # pool 32, now = 0
    for i in range(32):
        s += insert(i, d_within(1 + i * 997 % 4000, i % 8))
    s += tickless(8) * 12
    out["levels_tickless"] = s

    # Just before epoch 1: timers on both sides of the boundary and beyond.
    s = [15, 2, 0, 9]  # pool 16, now = 2^48 - 10
    s += insert(0, d_near(5)) + insert(1, d_near(10)) + insert(2, d_epoch(1, 0)) + insert(3, d_epoch(1, 2))
    s += insert(4, d_epoch(2, -1)) + insert(5, d_far(12345)) + insert(6, d_far(2**50)) + insert(7, d_epoch(3, -2))
    s += remove(4) + advance(a_epoch(1, -1)) + pop_all() + advance(a_epoch(1, 0)) + pop_all()
    s += insert(4, d_epoch(1, 1)) + tickless(8) * 6 + advance(a_raw(2**52)) + pop_all()
    out["epoch_boundaries"] = s

    # The end of time: deadlines at kMax, a jump to kMax, inserts after it.
    s = [7, 3, 0x10, 0x00]  # pool 8, now = kMax - 4096
    s += insert(0, d_end(0)) + insert(1, d_end(3)) + insert(2, d_raw(2**64 - 100)) + insert(3, d_near(200))
    s += advance(a_deadline(3, 0)) + pop(1) + advance(a_end()) + pop_all()
    s += insert(4, d_end(0)) + insert(5, d_near(1)) + pop_all() + remove(4)
    out["end_of_time"] = s

    # Just before a carry into level 4: slot boundaries of every level.
    s = [23, 5, 3, 1]  # pool 24, now = 64^4 - 2
    for i in range(24):
        s += insert(i, d_boundary(i % 8, 1 + i % 4, i % 5 - 2))
    for level in range(8):
        s += advance(a_boundary(level, 1, 0)) + pop(2)
        s += rearm(level, d_boundary(level, 2, 1))
    s += tickless(8) * 8
    out["slot_boundaries"] = s

    # One crowded slot: many nodes on one deadline, removals, re-inserts.
    s = [63, 1, 0x12, 0x34]  # pool 64, now = 0x1234
    s += crowd(d_within(5000, 2), 0, 16) + crowd(d_within(5000, 2), 16, 16)
    s += insert(40, d_same_as(3)) + remove(5) + remove(17) + remove(40)
    s += advance(a_deadline(0, -1)) + pop_all() + advance(a_deadline(0, 0)) + pop(3) + pop_all()
    out["crowded_slot"] = s

    # Plain churn from a fixed PRNG.
    rng = random.Random(20261122)
    out["churn"] = [rng.randrange(256) for _ in range(1024)]
    return out


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus_wheel")
    os.makedirs(outdir, exist_ok=True)
    for name, data in seeds().items():
        assert all(0 <= b < 256 for b in data), name
        with open(os.path.join(outdir, "seed_" + name), "wb") as f:
            f.write(bytes(data))


if __name__ == "__main__":
    main()
