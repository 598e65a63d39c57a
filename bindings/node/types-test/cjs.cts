// SPDX-License-Identifier: MIT OR Apache-2.0
// A CommonJS consumer (module nodenext, .cts, @types/node present),
// type-checked by ctest capi_node_types: the "exports" map's require
// condition (index.d.ts, promises.d.ts).
import { Runtime, type Timer } from 'tickwheel';
import tw = require('tickwheel');
import { sleep } from 'tickwheel/promises';

export async function main(): Promise<void> {
  const rt = new Runtime({ shards: 1 });
  const t: Timer = rt.start(10, () => {});
  const again: tw.Runtime = new tw.Runtime();
  const v: string = await sleep(1, 'v');
  console.log(t.id, v, tw.version());
  await again.close();
  await rt.close();
}
