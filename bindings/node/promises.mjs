// SPDX-License-Identifier: MIT OR Apache-2.0
// import { setTimeout, setInterval, sleep } from 'tickwheel/promises': the
// ES module face of promises.js (the same functions, on the same runtime).
import promises from './promises.js';

export const { setTimeout, setInterval, sleep } = promises;
export default promises;
