// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// check_pack.sh: writes every ```js sample of an installed package's
// README.md as its own program (inside an async function: samples may
// await; an ES module sample as a .mjs file) into the app folder: node
// readme_samples.js <app> prints their paths.
const fs = require('node:fs');
const path = require('node:path');

const app = process.argv[2];
const readme = fs.readFileSync(path.join(app, 'node_modules', 'tickwheel', 'README.md'), 'utf8');
const samples = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);
if (samples.length < 3) throw new Error(`README.md: ${samples.length} js samples, expected at least 3`);
samples.forEach((code, i) => {
  // An ES module sample (top-level import) is written as it is, as .mjs
  // (top-level await works there).
  if (/^import\s/m.test(code)) {
    const file = path.join(app, `readme${i}.mjs`);
    fs.writeFileSync(file, code);
    console.log(file);
    return;
  }
  const file = path.join(app, `readme${i}.js`);
  fs.writeFileSync(file, `(async () => {\n${code}\n})().catch((err) => { console.error(err); process.exit(1); });\n`);
  console.log(file);
});
