#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Workload 9, FFI overhead: tickwheel's start+stop pair through the C ABI
(libtickwheel.so.1) called from Python with ctypes, two ways:

  python-binding  the Python binding (bindings/python/tickwheel):
                  rt.start(delay_s, fn) + Timer.stop()
  python-ctypes   bare ctypes calls: tw_timer_start() + tw_timer_stop()
  python-binding-batch  the binding's batch calls (library 1.4), --batch
                  pairs at a time: rt.start_many(delays, fn) +
                  rt.stop_many(victims) (distinct victims per batch)
  python-binding-busy  with --busy-thread: the python-binding pairs while
                  another Python thread spins on the CPU (contention for
                  the GIL: a binding that releases the GIL around each call
                  hands it over at every call), --busy-ops pairs per rep

Same pair as workload 1 (preload --pending timers due in [1 s, 100 s];
each repetition: --ops pairs of start with a delay in [1 ms, 100 s] + stop a
random pending one; the clock runs until the shards' inboxes are empty).
Prints the same JSON lines as the C++ peers. Usage:

  TICKWHEEL_LIB=build/release/capi/libtickwheel.so.1 \\
    peer_python.py --binding build/release/python [--pending N] [--ops N] [--reps R]
"""

import argparse
import ctypes
import json
import os
import random
import resource
import statistics
import sys
import time


def cpu_ns():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return int((ru.ru_utime + ru.ru_stime) * 1e9)


def emit(workload, peer, params, metric, unit, samples):
    print(json.dumps({
        "workload": workload, "peer": peer, "params": params, "metric": metric, "unit": unit,
        "median": statistics.median(samples), "min": min(samples), "max": max(samples),
        "reps": len(samples), "samples": samples,
    }), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binding", required=True, help="directory holding the tickwheel package")
    ap.add_argument("--pending", type=int, default=100000)
    ap.add_argument("--ops", type=int, default=100000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--busy-thread", action="store_true",
                    help="also measure the binding's pairs beside a CPU-bound Python thread")
    ap.add_argument("--busy-ops", type=int, default=2000, help="pairs per rep beside the busy thread")
    ap.add_argument("--only", choices=["binding", "batch", "ctypes", "busy"], action="append",
                    help="measure only these (repeatable; default: all)")
    a = ap.parse_args()
    if a.busy_thread and a.only is None:
        a.only = ["binding", "batch", "ctypes", "busy"]
    only = set(a.only or ["binding", "batch", "ctypes"])
    sys.path.insert(0, a.binding)
    import tickwheel  # noqa: E402 -- the binding under test

    # The bare ctypes peer loads the library the binding uses (its own handle).
    lib = ctypes.CDLL(tickwheel.library_path)
    lib.tw_timer_start.restype = ctypes.c_int
    CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint64)
    lib.tw_timer_start.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, CALLBACK,
                                   ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)]
    rng = random.Random(a.seed)
    params = {"pending": a.pending, "ops": a.ops}

    def drain(rt):
        while rt.stats()["inbox"] != 0:
            time.sleep(20e-6)

    def noop():
        pass

    def measure(rt, peer, prepare, run, extra=None):
        """--reps timed passes (after one warm-up pass of --ops/10): prepare(ops) makes the
        pass's inputs untimed, run(inputs) does its pairs; the clock stops when the inboxes
        are empty. Emits the three metrics per pair."""
        walls, cpus, callers, threads = [], [], [], []
        for rep in range(a.reps + 1):
            ops = a.ops // 10 if rep == 0 else a.ops
            inputs = prepare(ops)
            c0, t0, h0 = cpu_ns(), time.perf_counter_ns(), time.thread_time_ns()
            run(inputs)
            tl, hl = time.perf_counter_ns(), time.thread_time_ns()
            drain(rt)
            t1, c1 = time.perf_counter_ns(), cpu_ns()
            if rep:
                walls.append((t1 - t0) / ops)
                cpus.append((c1 - c0) / ops)
                callers.append((tl - t0) / ops)
                threads.append((hl - h0) / ops)
        p = dict(params, **(extra or {}))
        emit("ffi", peer, p, "wall_ns_per_pair", "ns", walls)
        emit("ffi", peer, p, "cpu_ns_per_pair", "ns", cpus)
        emit("ffi", peer, p, "caller_ns_per_pair", "ns", callers)
        # the calling thread's own CPU time for the pairs (not the busy thread's, nor the drain's)
        emit("ffi", peer, p, "caller_cpu_ns_per_pair", "ns", threads)
        print("%s: %.0f ns/pair" % (peer, statistics.median(walls)), file=sys.stderr)

    def singles(ops):
        return [rng.uniform(1e-3, 100) for _ in range(ops)], [rng.randrange(a.pending) for _ in range(ops)]

    def churn(rt, pending):
        """A repetition's pairs through the binding, for singles' inputs: start one timer, stop a random
        pending one, which the new one replaces."""
        def run(inputs):
            start = rt.start
            for d, v in zip(*inputs):
                t = start(d, noop)
                pending[v].stop()
                pending[v] = t
        return run

    # ---- through the binding ----------------------------------------------------
    if "binding" in only:
      with tickwheel.Runtime() as rt:
        pending = [rt.start(rng.uniform(1, 100), noop) for _ in range(a.pending)]
        drain(rt)

        measure(rt, "python-binding", singles, churn(rt, pending))
        del pending

    # ---- through the binding, a CPU-bound Python thread beside it ---------------------------
    if "busy" in only:
        import threading
        busy = {"stop": False}

        def spin():
            x = 0
            while not busy["stop"]:
                x += 1
        with tickwheel.Runtime() as rt:
            pending = [rt.start(rng.uniform(1, 100), noop) for _ in range(a.pending)]
            drain(rt)
            th = threading.Thread(target=spin, daemon=True)
            th.start()
            ops_saved, a.ops = a.ops, a.busy_ops
            try:
                measure(rt, "python-binding-busy", singles, churn(rt, pending))
            finally:
                busy["stop"] = True
                th.join()
                a.ops = ops_saved
            del pending

    # ---- through the binding's batch calls ------------------------------------------------
    b = max(1, a.batch)
    if "batch" in only:
      with tickwheel.Runtime() as rt:
        pending = rt.start_many([rng.uniform(1, 100) for _ in range(a.pending)], noop)
        drain(rt)

        def batches(ops):
            delays = [rng.uniform(1e-3, 100) for _ in range(ops)]
            victims = []
            for i in range(0, ops, b):  # distinct within a batch (a batch stops each once)
                seen = set()
                for _ in range(min(b, ops - i)):
                    v = rng.randrange(a.pending)
                    while v in seen:
                        v = (v + 1) % a.pending
                    seen.add(v)
                    victims.append(v)
            return delays, victims

        def run_batch(inputs):
            delays, victims = inputs
            start_many, stop_many = rt.start_many, rt.stop_many
            for i in range(0, len(delays), b):
                fresh = start_many(delays[i:i + b], noop)
                vs = victims[i:i + b]
                stop_many([pending[v] for v in vs])
                for v, t in zip(vs, fresh):
                    pending[v] = t
        measure(rt, "python-binding-batch", batches, run_batch, {"batch": b})
        del pending

    # ---- bare ctypes ----------------------------------------------------------------
    class Cfg(ctypes.Structure):
        _fields_ = [("size", ctypes.c_uint32), ("shards", ctypes.c_uint32), ("workers", ctypes.c_uint32),
                    ("flags", ctypes.c_uint32), ("resolution_ns", ctypes.c_uint64), ("max_timers", ctypes.c_uint64)]

    class Bare:  # a runtime made through bare ctypes (tw_runtime_create), with what measure() reads
        def __init__(self):
            cfg = Cfg()
            lib.tw_config_init(ctypes.byref(cfg))
            h = ctypes.c_void_p()
            assert lib.tw_runtime_create(ctypes.byref(cfg), ctypes.byref(h)) == 0
            self.handle = h.value

        def stats(self):  # drain() does not wait for this runtime's inboxes (tw_stats unused here)
            return {"inbox": 0}

    lib.tw_runtime_destroy.argtypes = [ctypes.c_void_p]
    lib.tw_timer_stop.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
    if "ctypes" in only:
        rt = Bare()
        handle = rt.handle
        cb = CALLBACK(lambda arg, tid: None)
        out = ctypes.c_uint64(0)
        pout = ctypes.byref(out)
        tw_start, tw_stop = lib.tw_timer_start, lib.tw_timer_stop
        pending = []
        for _ in range(a.pending):
            tw_start(handle, int(rng.uniform(1, 100) * 1e9), 0, cb, None, pout)
            pending.append(out.value)
        drain(rt)

        def ints(ops):
            return [rng.randrange(1000000, 100000000000) for _ in range(ops)], \
                [rng.randrange(a.pending) for _ in range(ops)]

        def run_ctypes(inputs):
            for d, v in zip(*inputs):
                tw_start(handle, d, 0, cb, None, pout)
                tw_stop(handle, pending[v])
                pending[v] = out.value
        measure(rt, "python-ctypes", ints, run_ctypes)
        lib.tw_runtime_destroy(handle)  # the callbacks are ctypes' (no GIL needed to release them)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
