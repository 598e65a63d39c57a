// SPDX-License-Identifier: MIT OR Apache-2.0
// An ES module consumer (module nodenext, @types/node present), type-checked
// by ctest capi_node_types against the package installed from its tarball:
// the "exports" map's import condition (index.d.mts, promises.d.mts).
import tickwheel, { Runtime, Timer, TickwheelError, type RuntimeStats } from 'tickwheel';
import { sleep, setTimeout as delay, setInterval as every } from 'tickwheel/promises';
import promisesDefault from 'tickwheel/promises';

export async function main(): Promise<void> {
  await using rt = new Runtime({ shards: 1 });
  const t: Timer = rt.start(10, (timer) => { timer.query(); });
  const same: typeof tickwheel.Runtime = Runtime;
  void same;
  const a: string = await sleep(1, 'a');
  const b: number = await delay(1, 2, { signal: AbortSignal.timeout(1000) });
  const c: void = await promisesDefault.sleep(1);
  for await (const x of every(5, 'x')) { const s: string = x; void s; break; }
  rt.on('error', (err: unknown, timer: Timer) => { void err; void timer; });
  // A Runtime is an EventEmitter of node:events (the declarations list its methods).
  const emitter: Pick<import('node:events').EventEmitter, 'on' | 'once' | 'off' | 'emit' | 'listenerCount'> = rt;
  void emitter;
  const st: RuntimeStats = rt.stats();
  const n: number = st.callbackExceptions;
  try {
    rt.advance(1);
  } catch (err) {
    if (err instanceof TickwheelError) console.log(err.code, a, b, c, n, t.id);
  }
  // @ts-expect-error -- a delay is a number of milliseconds
  rt.start('5', () => {});
}
