// SPDX-License-Identifier: MIT OR Apache-2.0
// Type-checked (never run) by ctest capi_node_types: `tsc --noEmit -p .` with
// the package's index.d.ts and promises.d.ts installed as node_modules/tickwheel.
// Every @ts-expect-error line must be an error, or tsc fails.
import {
  Runtime, Timer, TickwheelError, AbortError, LibraryLoadError, errorCodes, clocks, now, promises,
  type TimerInfo, type TimerId, type TimerPromiseOptions, type RuntimeStats,
} from 'tickwheel';
import { setTimeout as sleep, setInterval as every } from 'tickwheel/promises';

async function main(): Promise<void> {
  const rt = new Runtime({ shards: 1, resolution: 1, manualClock: false });
  const t: Timer = rt.start(10, (timer: Timer) => { timer.query(); }, { clock: 'boottime', leeway: 1, group: 7 });
  const p: Timer = rt.startPeriodic(5, function (this: Timer) { this.stop(); }, { policy: 'delay' });
  const info: TimerInfo | null = t.query();
  const deadline: bigint | null = info === null ? null : info.deadline;
  void deadline;

  // per-timer ref()/unref(), chained like Node's Timeout
  const same: Timer = t.unref().ref();
  const refd: boolean = same.hasRef();
  void refd;

  // ids: a Timer, a BigInt, or a Number
  const ids: TimerId[] = [t.id, Number(p.id)];
  const stopped: boolean[] = rt.stopMany([t, ...ids]);
  const one: boolean = rt.stop(12345);
  rt.reset(t.id, 5);
  rt.resetAt(Number(t.id), rt.now(t.clock) + 30_000_000_000n);
  void stopped; void one;

  // the promise API: on the runtime and module-level
  const ac = new AbortController();
  const opts: TimerPromiseOptions = { signal: ac.signal, ref: false };
  const s: string = await rt.promises.setTimeout(5, 'v', opts);
  const n: number = await sleep(5, 42);
  const v: void = await promises.setTimeout(1);
  for await (const tick of every(10, 'tick', { signal: AbortSignal.timeout(100) })) {
    const str: string = tick;
    void str;
    break;
  }
  for await (const x of rt.promises.setInterval(10)) { void x; break; }
  void s; void n; void v;

  // clocks: the runtime's own clock and the machine's
  const virtual: bigint = rt.now('realtime');
  const machine: bigint = now(clocks.MONOTONIC);
  void virtual; void machine;

  // errors
  try {
    rt.advance(1);
  } catch (err) {
    if (err instanceof TickwheelError) {
      const detail: string = err.detail;
      const code: 'TW_EINVAL' | string = err.code;
      const errno: number = err.errno;
      void detail; void code; void errno;
    } else if (err instanceof AbortError) {
      const c: 'ABORT_ERR' = err.code;
      void c;
    } else if (err instanceof LibraryLoadError) {
      const tried: string[] = err.tried;
      void tried;
    }
  }
  const einval: -22 = errorCodes.TW_EINVAL;
  void einval;
  const stats: RuntimeStats = rt.stats();
  void stats.queue.ran;

  // @ts-expect-error -- an id is a BigInt or a Number, not a string
  rt.stop('1');
  // @ts-expect-error -- signal must be an AbortSignal
  await rt.promises.setTimeout(5, 1, { signal: 'no' });
  // @ts-expect-error -- ref is a boolean
  await sleep(5, 1, { ref: 1 });
  // @ts-expect-error -- no such clock
  rt.now('tai');
  // @ts-expect-error -- unref() returns the Timer, not a boolean
  const wrong: boolean = t.unref();
  void wrong;
  await rt.close();
}

void main;
