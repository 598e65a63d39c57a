// SPDX-License-Identifier: MIT OR Apache-2.0
'use strict';
// Where the library comes from: a copy of the package in a temp folder,
// with and without a prebuilds/<platform>-<arch> folder, run in child
// processes with TICKWHEEL_LIB unset. (capi_node_pack installs the real
// tarball; this checks the search order and the not-found error.)
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { runChild } = require('./support');

const PKG = path.join(__dirname, '..');
const LIB = process.env.TICKWHEEL_LIB;
const SONAME = 'libtickwheel.so.1';

function run(dir, env) {
  const clean = { ...process.env };
  for (const k of ['TICKWHEEL_LIB', 'LD_LIBRARY_PATH', 'PKG_CONFIG_PATH', 'PKG_CONFIG_LIBDIR', 'NODE_PATH']) delete clean[k];
  const script = path.join(dir, 'fixtures', 'child.js');
  return runChild(script, ['whichLibrary'], { env: { ...clean, ...env }, killAfterMs: 30000 })
    .then((r) => {
      if (r.status !== 0) throw new Error(`child exited ${r.status}: ${r.stderr}`);
      return JSON.parse(r.stdout);
    });
}

test('the prebuilds folder first, then the loader, pkg-config; the error names them all', { skip: !LIB && 'TICKWHEEL_LIB is not set' }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tickwheel-loader-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  for (const f of ['index.js', 'promises.js', 'package.json']) fs.copyFileSync(path.join(PKG, f), path.join(dir, f));
  fs.mkdirSync(path.join(dir, 'fixtures'));
  fs.copyFileSync(path.join(PKG, 'fixtures', 'child.js'), path.join(dir, 'fixtures', 'child.js'));
  const koffiModules = require.resolve.paths('koffi').find((p) => fs.existsSync(path.join(p, 'koffi')));
  fs.symlinkSync(koffiModules, path.join(dir, 'node_modules'));
  const pre = path.join(dir, 'prebuilds', `${process.platform}-${process.arch}`);
  fs.mkdirSync(pre, { recursive: true });
  const prebuilt = path.join(pre, SONAME);
  // A folder holding the library by its SONAME, for LD_LIBRARY_PATH.
  const ldDir = path.join(dir, 'ld');
  fs.mkdirSync(ldDir);
  fs.copyFileSync(fs.realpathSync(LIB), path.join(ldDir, SONAME));
  const empty = path.join(dir, 'empty');
  fs.mkdirSync(empty);
  const noPkgConfig = { PKG_CONFIG_PATH: empty, PKG_CONFIG_LIBDIR: empty };

  await t.test('a prebuild is found before LD_LIBRARY_PATH', async () => {
    fs.copyFileSync(fs.realpathSync(LIB), prebuilt);
    const r = await run(dir, { LD_LIBRARY_PATH: ldDir, ...noPkgConfig });
    assert.deepEqual(r, { path: prebuilt, fired: true });
  });

  await t.test('a prebuild that does not load: the loader is tried next', async () => {
    fs.writeFileSync(prebuilt, 'not an ELF file');
    const r = await run(dir, { LD_LIBRARY_PATH: ldDir, ...noPkgConfig });
    assert.deepEqual(r, { path: SONAME, fired: true });
  });

  await t.test('no prebuild: LD_LIBRARY_PATH', async () => {
    fs.rmSync(path.join(dir, 'prebuilds'), { recursive: true });
    const r = await run(dir, { LD_LIBRARY_PATH: ldDir, ...noPkgConfig });
    assert.deepEqual(r, { path: SONAME, fired: true });
  });

  await t.test('no prebuild, nothing on the loader\'s paths: pkg-config\'s libdir', async (st) => {
    const pc = path.join(dir, 'pc');
    fs.mkdirSync(pc);
    fs.writeFileSync(path.join(pc, 'tickwheel.pc'),
      `libdir=${ldDir}\nName: tickwheel\nDescription: test\nVersion: 1.0.0\nLibs: -L\${libdir} -ltickwheel\n`);
    const r = await run(dir, { PKG_CONFIG_PATH: pc, PKG_CONFIG_LIBDIR: empty });
    if (r.path === SONAME) {
      st.skip('a system libtickwheel is on the loader\'s paths: pkg-config is not reached');
      return;
    }
    if (r.isLoadError && /pkg-config is not on PATH/.test(r.message)) {
      st.skip('pkg-config is not installed');
      return;
    }
    assert.deepEqual(r, { path: path.join(ldDir, SONAME), fired: true });
  });

  await t.test('nothing anywhere: the error lists the prebuilds folder, the loader and pkg-config', async (st) => {
    const r = await run(dir, noPkgConfig);
    if (r.path !== undefined) {
      st.skip(`a system libtickwheel was found (${r.path}): the not-found error cannot be shown here`);
      return;
    }
    assert.equal(r.isLoadError, true);
    assert.equal(r.tried.length, 3);
    assert.match(r.tried[0], new RegExp(`${prebuilt.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} does not exist`));
    assert.match(r.tried[1], /dynamic loader \(LD_LIBRARY_PATH=<unset>/);
    assert.match(r.tried[2], /^pkg-config \(PKG_CONFIG_PATH=.*\): `pkg-config --variable=libdir tickwheel` failed/);
    for (const word of ['prebuilds', 'LD_LIBRARY_PATH', 'PKG_CONFIG_PATH', 'pkg-config', 'TICKWHEEL_LIB', 'ldconfig']) {
      assert.ok(r.message.includes(word), `the message names ${word}: ${r.message}`);
    }
  });
});
