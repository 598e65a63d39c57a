// SPDX-License-Identifier: MIT OR Apache-2.0
// import { Runtime } from 'tickwheel' (the package's "exports" map, "import"
// condition): the ES module face of index.js. It re-exports the one
// CommonJS instance, so require() and import share the library, the open
// runtimes and the exit hooks (no second copy of the package).
import tickwheel from './index.js';

export const {
  Runtime,
  Timer,
  TickwheelError,
  LibraryLoadError,
  AbortError,
  promises,
  errorCodes,
  periodPolicies,
  clocks,
  MAX_DELAY_MS,
  version,
  libraryPath,
  now,
} = tickwheel;
export default tickwheel;
