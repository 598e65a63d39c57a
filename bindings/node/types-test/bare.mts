// SPDX-License-Identifier: MIT OR Apache-2.0
// The declarations compile with neither @types/node nor the DOM lib (lib
// es2022 alone, types: []): an ES module consumer that uses only the
// package (no console, no AbortSignal global). Type-checked, never run.
import { Runtime, Timer, type TimerInfo, type AbortSignalLike, now, clocks } from 'tickwheel';
import { sleep, setInterval } from 'tickwheel/promises';

// A signal of one's own (any object of that shape is accepted).
const signal: AbortSignalLike = {
  aborted: false,
  addEventListener() {},
  removeEventListener() {},
};

export async function main(): Promise<number> {
  const rt = new Runtime({ shards: 1, manualClock: true });
  const t: Timer = rt.start(10, (timer) => { timer.stop(); }, { clock: 'boottime', group: 3n });
  const info: TimerInfo | null = rt.query(t);
  rt.on('error', (err, timer) => { void err; void timer.id; });
  const v: number = await sleep(1, 7, { signal, ref: false });
  for await (const x of setInterval(5, 'x', { signal })) { void x; break; }
  const at: bigint = now(clocks.MONOTONIC);
  void info; void at;
  await rt.close();
  return v;
}
