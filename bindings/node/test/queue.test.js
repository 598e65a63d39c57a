// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// Delivery through the runtime's tw_queue: callbacks run on the JavaScript
// thread inside tw_queue_run(), no worker thread waits for JavaScript, stop
// of a due timer is exact, close() is prompt, order and "never early" hold
// for many timers, nextTick/microtasks run between callbacks.
const test = require('node:test');
const assert = require('node:assert/strict');
const koffi = require('koffi');
const { Runtime } = require('..');
const { load } = require('..')._internal;

const { sleep, until } = require('./support');
const hr = () => process.hrtime.bigint();
const MS = 1_000_000n;

// Busy-waits (the event loop does not turn) until cond() or limitMs.
function spinUntil(cond, limitMs = 5000) {
  const end = hr() + BigInt(limitMs) * MS;
  while (!cond()) {
    if (hr() > end) return false;
  }
  return true;
}

// ---- raw C access for the worker test: a timer of the runtime's workers
// whose callback is libc's eventfd_write(int fd, eventfd_t value), called as
// callback(arg = fd, id): it runs on a worker with no JavaScript involved.
let raw = null;
function rawApi() {
  if (raw !== null) return raw;
  const libc = koffi.load('libc.so.6');
  const tw = koffi.load(load().path);
  const WorkerSpec = koffi.struct('tickwheel_test_worker_spec', {
    size: 'uint32_t', shard: 'int32_t', deadline_ns: 'uint64_t', delay_ns: 'uint64_t', period_ns: 'uint64_t',
    callback: 'void *', arg: 'uintptr_t', release: 'void *', queue: 'void *',
  });
  raw = {
    WorkerSpec,
    eventfd: libc.func('int eventfd(unsigned int, int)'),
    read: libc.func('long read(int, _Out_ uint8_t *, size_t)'),
    close: libc.func('int close(int)'),
    eventfdWrite: libc.func('void *dlsym(void *, const char *)')(null, 'eventfd_write'),
    start: tw.func('tw_timer_start_ex', 'int', ['void *', koffi.pointer(WorkerSpec), koffi.out(koffi.pointer('uint64_t'))]),
  };
  return raw;
}

// With callbacks delivered by a worker that waits for the JavaScript thread
// (the binding before delivery queues), the single worker would be held by
// the busy callback and the worker timer would fire only after it returned.
test('a worker timer fires on time while a callback of the same runtime busy-waits 200 ms', async () => {
  const r = rawApi();
  const rt = new Runtime({ shards: 1, workers: 1 });
  const efd = r.eventfd(0, 0o4000 | 0o2000000);
  assert.ok(efd >= 0);
  const buf = Buffer.alloc(8);
  let busyStart = 0n;
  let busyEnd = 0n;
  let workerFiredAt = 0n;
  let rc = null;
  // The busy JavaScript callback: it starts a timer of the workers (queue
  // NULL) 40 ms ahead, then busy-waits 200 ms watching the eventfd that
  // timer writes.
  rt.start(0, () => {
    busyStart = hr();
    const spec = {
      size: koffi.sizeof(r.WorkerSpec), shard: -1, deadline_ns: 0, delay_ns: 40n * MS, period_ns: 0,
      callback: r.eventfdWrite, arg: efd, release: null, queue: null,
    };
    rc = r.start(rt._ptr, spec, [0]);
    spinUntil(() => {
      if (workerFiredAt === 0n && r.read(efd, buf, 8) === 8) workerFiredAt = hr();
      return hr() - busyStart > 200n * MS;
    });
    busyEnd = hr();
  });
  await until(() => busyEnd !== 0n, 10000, 'the busy callback');
  await rt.close(); // cancels the worker timer if it has not fired (then efd is closed safely)
  r.close(efd);
  assert.equal(rc, 0);
  assert.notEqual(workerFiredAt, 0n, 'the worker timer did not fire while the JavaScript callback was busy');
  assert.ok(workerFiredAt - busyStart >= 40n * MS, 'never early');
  assert.ok(workerFiredAt < busyEnd);
  const st = rt.stats();
  assert.equal(st.fired, 2);
  assert.equal(st.queue.ran, 1, 'the JavaScript callback ran through the queue, the other on the worker');
});

test('stop() of a due timer whose callback has not run yet is exact', async () => {
  const rt = new Runtime({ workers: 1 });
  let ran = 0;
  const t = rt.start(0, () => { ran++; });
  // The event loop does not turn: the timer becomes due, its callback waits.
  assert.ok(spinUntil(() => rt.stats().queue.due === 1), 'the timer never became due');
  assert.equal(rt.liveTimers, 1);
  assert.equal(t.active, true);
  assert.equal(t.stop(), true);
  assert.equal(rt.liveTimers, 0, 'released inside stop()');
  assert.equal(t.active, false);
  let st = rt.stats();
  assert.equal(st.queue.due, 0);
  assert.equal(st.stopped, 1, 'the C library cancelled it');
  assert.equal(st.fired, 0);
  assert.equal(t.stop(), false);

  // reset() of a due timer re-arms it.
  let at = 0n;
  const r = rt.start(0, () => { at = hr(); });
  assert.ok(spinUntil(() => rt.stats().queue.due === 1));
  const t0 = hr();
  assert.equal(r.reset(40), true);
  assert.equal(rt.stats().queue.due, 0, 'taken back from the queue');
  await until(() => at !== 0n, 10000, 'the re-armed timer');
  assert.ok(at - t0 >= 40n * MS, `fired ${at - t0} ns after the reset`);

  await sleep(20);
  assert.equal(ran, 0);
  st = rt.stats();
  assert.equal(st.fired, 1);
  assert.equal(st.queue.ran, 1);
  assert.equal(st.reset, 1);
  await rt.close();
});

test('close() is prompt; timers due but not yet run never run', async () => {
  const rt = new Runtime({ workers: 1 });
  let ran = 0;
  for (let i = 0; i < 100; i++) rt.start(0, () => { ran++; });
  for (let i = 0; i < 1000; i++) rt.start(10000 + i, () => { ran++; });
  rt.startPeriodic(1, () => { ran++; });
  assert.ok(spinUntil(() => rt.stats().queue.due >= 100), 'the timers never became due');
  const t0 = hr();
  const closing = rt.close();
  assert.equal(rt.liveTimers, 0, 'everything released inside close()');
  await closing;
  const ms = Number(hr() - t0) / 1e6;
  assert.ok(ms < 2000, `close() took ${ms} ms`);
  await sleep(20);
  assert.equal(ran, 0);
  const st = rt.stats();
  assert.equal(st.shutDown, true);
  assert.equal(st.fired, 0);
  assert.equal(st.queue.ran, 0);
  assert.equal(st.stopped, 1101);
  assert.equal(st.live, 0);
});

test('close() from a callback: the other due callbacks never run; it resolves once the callback returned', async () => {
  const rt = new Runtime({ workers: 1 });
  let ran = 0;
  let closing = null;
  let closedInside = null;
  for (let i = 0; i < 50; i++) {
    rt.start(0, () => {
      ran++;
      if (closing === null) {
        closing = rt.close();
        closedInside = rt.closed;
        assert.equal(rt.close(), closing);
      }
    });
  }
  assert.ok(spinUntil(() => rt.stats().queue.due === 50));
  await until(() => closing !== null, 10000, 'the closing callback');
  await closing;
  assert.equal(closedInside, true);
  assert.equal(ran, 1);
  assert.equal(rt.liveTimers, 0);
  const st = rt.stats();
  assert.equal(st.fired, 1);
  assert.equal(st.stopped, 49);
});

test('10,000 timers fire once each, in deadline order, none early', async () => {
  const n = 10000;
  const rt = new Runtime({ shards: 1, workers: 1 });
  const res = 1_000_000n; // the default resolution
  const delay = new Array(n);
  const startedFrom = new Array(n); // hr() before start()
  const startedTo = new Array(n); // hr() after it
  const firedAt = new Array(n).fill(0n);
  const order = [];
  let x = 12345;
  // 150..249 ms: each is in its shard's wheel long before its deadline.
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    delay[i] = 150 + (x % 100);
    startedFrom[i] = hr();
    rt.start(delay[i], () => {
      firedAt[i] = hr();
      order.push(i);
    });
    startedTo[i] = hr();
  }
  await until(() => order.length === n, 60000, `${n} timers`);
  await sleep(20);
  assert.equal(order.length, n);
  assert.equal(new Set(order).size, n, 'each once');
  for (let i = 0; i < n; i++) {
    assert.ok(firedAt[i] - startedFrom[i] >= BigInt(delay[i]) * MS, `timer ${i} was early`);
  }
  // Deadline order: the C deadline of i is in [from_i + d_i, to_i + d_i + res).
  for (let k = 1; k < n; k++) {
    const a = order[k - 1];
    const b = order[k];
    const aEarliest = startedFrom[a] + BigInt(delay[a]) * MS;
    const bLatest = startedTo[b] + BigInt(delay[b]) * MS + res;
    assert.ok(aEarliest < bLatest, `timer ${a} (deadline >= ${aEarliest}) ran before timer ${b} (deadline < ${bLatest})`);
  }
  const st = rt.stats();
  assert.equal(st.fired, n);
  assert.equal(st.queue.ran, n);
  assert.equal(st.queue.runSamples, n);
  assert.ok(st.queue.runP50Ns > 0);
  await rt.close();
});

test('process.nextTick() and promise reactions run between two callbacks due together', async () => {
  const rt = new Runtime({ shards: 1, workers: 1 });
  const seen = [];
  for (let k = 0; k < 5; k++) {
    let tick = false;
    let micro = false;
    // Same delay, started back to back: the same tick (most of the time),
    // delivered together; the order of the two is the start order.
    rt.start(5 + 10 * k, () => {
      process.nextTick(() => { tick = true; });
      Promise.resolve().then(() => { micro = true; });
    });
    rt.start(5 + 10 * k, () => { seen.push([tick, micro]); });
  }
  await until(() => seen.length === 5, 10000, 'the callbacks');
  for (const [tick, micro] of seen) {
    assert.equal(tick, true, 'a nextTick of the previous callback had not run');
    assert.equal(micro, true, 'a promise reaction of the previous callback had not run');
  }
  await rt.close();
});

test('no callback runs on a worker; the queue counters add up', async () => {
  const rt = new Runtime({ shards: 2, workers: 2 });
  let runs = 0;
  const p = rt.startPeriodic(1, () => { runs++; });
  for (let i = 0; i < 200; i++) rt.start(i % 20, () => { runs++; });
  await until(() => runs >= 210, 10000, 'the runs');
  p.stop();
  await until(() => rt.liveTimers === 0);
  const st = rt.stats();
  assert.equal(st.fired, runs);
  assert.equal(st.queue.ran, runs, 'every run went through the queue');
  assert.equal(st.queue.due, 0);
  assert.ok(st.queue.delivered >= runs);
  assert.equal(st.callbackExceptions, 0);
  await rt.close();
  assert.equal(rt.stats().queue.ran, runs, 'final counters after close()');
});
