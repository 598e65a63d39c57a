// SPDX-License-Identifier: MIT OR Apache-2.0
// As bare.mts, from a CommonJS consumer (.cts): no @types/node, no DOM lib.
import tw = require('tickwheel');
import promises = require('tickwheel/promises');

export async function main(): Promise<void> {
  const rt = new tw.Runtime({ manualClock: true });
  rt.start(1, () => {});
  rt.advance(1);
  await promises.sleep(1);
  await rt.close();
}
