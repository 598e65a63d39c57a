#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# ctest capi_node_pack: the npm package as users get it.
#
#   check_pack.sh --source <repo> --lib <libtickwheel.so.1> --work <dir> --version <x.y.z>
#
# 1. scripts/build-npm.sh packs <work>/dist/tickwheel-<version>.tgz around
#    the built library (checks the tarball: its files, nothing else, the
#    prebuilt library's RUNPATH $ORIGIN);
# 2. `npm install`s the tarball into a fresh app folder in a temp dir, in a
#    clean environment (no LD_LIBRARY_PATH, TICKWHEEL_LIB, NODE_PATH; pkg-config
#    pointed at an empty folder): koffi comes from the npm registry through
#    the npm cache (--prefer-offline, so reruns are cheap);
# 3. runs a program there that loads the package, checks that the library and
#    oneTBB were loaded from the installed prebuilds folder (nothing of the
#    build tree or the system's libtbb), and starts, stops and fires timers
#    (callbacks, a periodic timer, stop, the promise API, TypeScript-free).
#
# Prints "TW-SKIP: ..." (ctest then reports the test skipped) when node or npm
# is missing or the npm registry cannot be reached; every other failure fails.
set -euo pipefail

source_dir="" lib="" work="" version=""
while (($#)); do
  case "$1" in
    --source) source_dir=$2; shift 2 ;;
    --lib) lib=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --version) version=$2; shift 2 ;;
    *) echo "check_pack: unknown argument $1" >&2; exit 2 ;;
  esac
done
for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "TW-SKIP: $tool not found"
    exit 0
  fi
done

pkg_version=$(node -p "require('$source_dir/bindings/node/package.json').version")
if [[ "$pkg_version" != "$version" ]]; then
  echo "check_pack: bindings/node/package.json has version $pkg_version, the project $version: keep them equal" >&2
  exit 1
fi
rm -rf "$work"
mkdir -p "$work"
"$source_dir/scripts/build-npm.sh" --lib "$lib" --work "$work/stage" --dist "$work/dist"
tgz="$work/dist/tickwheel-$version.tgz"
[[ -f "$tgz" ]] || { echo "check_pack: $tgz was not written" >&2; exit 1; }

# ---- the tarball: exactly these files ---------------------------------------------
want="package/LICENSE-APACHE
package/LICENSE-MIT
package/README.md
package/index.d.mts
package/index.d.ts
package/index.js
package/index.mjs
package/package.json
package/prebuilds/linux-x64/libtbb.so.12
package/prebuilds/linux-x64/libtickwheel.so.1
package/promises.d.mts
package/promises.d.ts
package/promises.js
package/promises.mjs"
have=$(tar -tzf "$tgz" | sort)
if [[ "$have" != "$want" ]]; then
  echo "check_pack: the tarball's files differ from the expected list:" >&2
  diff <(echo "$want") <(echo "$have") >&2 || true
  exit 1
fi
kib=$(du -k "$tgz" | cut -f1)
if ((kib > 2048)); then
  echo "check_pack: the tarball is $kib KiB (more than 2 MiB: unstripped libraries?)" >&2
  exit 1
fi
echo "check_pack: $tgz: $kib KiB, $(echo "$have" | wc -l) files"

# ---- a fresh app folder, a clean environment ------------------------------------------
app=$(mktemp -d "${TMPDIR:-/tmp}/tickwheel-npm-app.XXXXXX")
trap 'rm -rf "$app"' EXIT
mkdir "$app/empty"
printf '{ "name": "tickwheel-pack-test-app", "version": "1.0.0", "private": true }\n' > "$app/package.json"
# Only what node and npm need: no LD_LIBRARY_PATH, TICKWHEEL_LIB, NODE_PATH,
# PKG_CONFIG_PATH of the caller; pkg-config sees an empty folder only.
clean=(env -i "HOME=$HOME" "PATH=$PATH" "LANG=C.UTF-8" "TMPDIR=${TMPDIR:-/tmp}"
       "PKG_CONFIG_PATH=$app/empty" "PKG_CONFIG_LIBDIR=$app/empty")
for v in npm_config_cache npm_config_registry npm_config_userconfig HTTPS_PROXY HTTP_PROXY NO_PROXY https_proxy http_proxy no_proxy; do
  if [[ -n "${!v:-}" ]]; then clean+=("$v=${!v}"); fi
done

set +e
out=$(cd "$app" && timeout 240 "${clean[@]}" npm install --prefer-offline --no-audit --no-fund "$tgz" 2>&1)
rc=$?
set -e
if ((rc != 0)); then
  if ((rc == 124)) || grep -Eq 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|network|timed out' <<<"$out"; then
    echo "TW-SKIP: the npm registry is unreachable (npm install: $rc):"
    echo "$out"
    exit 0
  fi
  echo "check_pack: npm install of $tgz failed ($rc):" >&2
  echo "$out" >&2
  exit 1
fi
echo "$out"
[[ -d "$app/node_modules/koffi" ]] || { echo "check_pack: npm install did not bring koffi" >&2; exit 1; }

cat > "$app/main.js" <<'EOF'
'use strict';
// Loads the installed package and uses it: the library and oneTBB must come
// from its prebuilds folder, and timers must fire, stop and resolve.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const tw = require('tickwheel');
const { setTimeout: sleep } = require('tickwheel/promises');

const pre = path.join(__dirname, 'node_modules', 'tickwheel', 'prebuilds', 'linux-x64');
(async () => {
  const rt = new tw.Runtime({ shards: 1 });
  assert.equal(tw.libraryPath(), path.join(pre, 'libtickwheel.so.1'));
  const maps = fs.readFileSync('/proc/self/maps', 'utf8');
  const mapped = (name) => [...new Set(maps.split('\n').filter((l) => l.includes(name)).map((l) => l.slice(l.indexOf('/'))))];
  assert.deepEqual(mapped('libtbb.so'), [fs.realpathSync(path.join(pre, 'libtbb.so.12'))], 'oneTBB from the prebuilds folder');
  assert.deepEqual(mapped('libtickwheel.so'), [fs.realpathSync(path.join(pre, 'libtickwheel.so.1'))]);

  const t0 = process.hrtime.bigint();
  const fired = [];
  await new Promise((resolve) => {
    rt.start(20, () => fired.push(['once', process.hrtime.bigint() - t0]));
    const stopped = rt.start(30, () => fired.push(['stopped']));
    let runs = 0;
    const p = rt.startPeriodic(5, () => {
      if (++runs === 3) {
        p.stop();
        fired.push(['periodic', runs]);
      }
    });
    assert.equal(stopped.stop(), true);
    rt.start(60, resolve);
  });
  assert.deepEqual(fired.map((f) => f[0]).sort(), ['once', 'periodic']);
  assert.ok(fired.find((f) => f[0] === 'once')[1] >= 20_000_000n, 'never early');
  assert.equal(await sleep(10, 'slept'), 'slept');
  const ac = new AbortController();
  const aborted = sleep(10_000, null, { signal: ac.signal });
  ac.abort();
  await assert.rejects(aborted, { name: 'AbortError' });
  await rt.close();
  console.log(`ok: tickwheel ${tw.version()} from ${tw.libraryPath()}`);
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
EOF
(cd "$app" && timeout 60 "${clean[@]}" node main.js)

# The same package through import (the "exports" map's import condition):
# one instance with require(), tickwheel/promises with its named exports.
cat > "$app/main.mjs" <<'EOF'
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import tickwheel, { Runtime, version, libraryPath } from 'tickwheel';
import { sleep, setTimeout as delay, setInterval } from 'tickwheel/promises';
import promisesDefault from 'tickwheel/promises';

const require = createRequire(import.meta.url);
assert.equal(tickwheel, require('tickwheel'), 'import and require() give the one instance');
assert.equal(Runtime, require('tickwheel').Runtime);
assert.equal(promisesDefault, require('tickwheel/promises'));
assert.equal(sleep, delay, 'sleep is setTimeout');
assert.equal(require('tickwheel/package.json').name, 'tickwheel');
const rt = new Runtime({ shards: 1 });
assert.equal(await new Promise((resolve) => rt.start(5, () => resolve('fired'))), 'fired');
assert.equal(await sleep(2, 'slept'), 'slept');
let n = 0;
for await (const _ of setInterval(2)) if (++n === 2) break;
await rt.close();
console.log(`ok (import): tickwheel ${version()} from ${libraryPath()}`);
EOF
(cd "$app" && timeout 60 "${clean[@]}" node main.mjs)

# Every ```js sample of the installed README runs there too, each as its own
# program in the clean environment.
for f in $(node "$source_dir/bindings/node/readme_samples.js" "$app"); do
  if ! out=$(cd "$app" && timeout 30 "${clean[@]}" node "$f" 2>&1); then
    echo "check_pack: the README sample $(basename "$f") failed:" >&2
    cat "$f" >&2
    echo "$out" >&2
    exit 1
  fi
  echo "check_pack: $(basename "$f") ran: $(echo "$out" | tr '\n' ' ' | cut -c1-120)"
done
