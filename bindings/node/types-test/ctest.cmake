# SPDX-License-Identifier: MIT OR Apache-2.0
# ctest capi_node_types: type-checks the package's declarations as TypeScript
# users get them -- from the npm tarball (capi_node_pack's, a fixture), as
# `npm install` puts it into node_modules:
#
#  1. tsconfig.json: check.ts and the README's ```ts sample (readme.ts) with
#     module commonjs / moduleResolution node10 and @types/node (older
#     projects; check.ts's @ts-expect-error lines must be errors);
#  2. tsconfig.nodenext.json: an ES module consumer (esm.mts), a CommonJS one
#     (cjs.cts) and the README sample as an ES module (readme.mts), module
#     nodenext, @types/node present (the package's "exports" map);
#  3. tsconfig.bare.json, in a folder of its own where @types/node is not
#     installed at all: bare.mts and bare.cts with lib es2022 alone, no DOM
#     lib -- the declarations need nothing of Node's.
#
# typescript and @types/node (pinned by this folder's package-lock.json) are
# installed with `npm ci` into a copy in the build tree (skipped while the lock
# is unchanged); the tarball with `npm install --prefer-offline` (koffi from
# the npm cache).
#
#   cmake -DNODE=... -DNPM=... -DSOURCE=<bindings/node> -DWORK=<dir> -DTARBALL=<tgz> -P ctest.cmake
#
# Prints "TW-SKIP: ..." when node or npm is missing, the npm registry cannot
# be reached, or the tarball is missing because capi_node_pack was skipped.
cmake_minimum_required(VERSION 3.16)

include("${CMAKE_CURRENT_LIST_DIR}/../npm_setup.cmake")
tw_node_tools_or_skip()
if(NOT EXISTS "${TARBALL}")
  message("TW-SKIP: no npm tarball at ${TARBALL} (capi_node_pack, which makes it, was skipped or failed)")
  return()
endif()

set(_t "${SOURCE}/types-test")
file(MAKE_DIRECTORY "${WORK}")
file(GLOB _old "${WORK}/*.ts" "${WORK}/*.mts" "${WORK}/*.cts" "${WORK}/tsconfig*.json")
if(_old)
  file(REMOVE ${_old})
endif()
file(COPY "${_t}/package.json" "${_t}/package-lock.json" "${_t}/tsconfig.json" "${_t}/tsconfig.nodenext.json"
          "${_t}/check.ts" "${_t}/esm.mts" "${_t}/cjs.cts"
     DESTINATION "${WORK}")

tw_npm_ci_once("${WORK}" "${_t}/package-lock.json")

# The README's TypeScript sample, as a CommonJS-era file and as an ES module.
file(READ "${SOURCE}/README.md" _readme)
string(REGEX MATCH "```ts\n([^`]*)```" _m "${_readme}")
if(NOT CMAKE_MATCH_1)
  message(FATAL_ERROR "bindings/node/README.md has no ```ts sample")
endif()
file(WRITE "${WORK}/readme.ts" "// From bindings/node/README.md (written by ctest.cmake)\n${CMAKE_MATCH_1}")
file(WRITE "${WORK}/readme.mts" "// From bindings/node/README.md (written by ctest.cmake)\n${CMAKE_MATCH_1}")

# The package as installed from its tarball (npm install <tgz>, --no-save:
# the lock stays as it is).
file(REMOVE_RECURSE "${WORK}/node_modules/tickwheel")
tw_npm("${WORK}" install --no-save "${TARBALL}")

set(_tsc "${WORK}/node_modules/typescript/bin/tsc")
foreach(_cfg tsconfig.json tsconfig.nodenext.json)
  execute_process(
    COMMAND "${NODE}" "${_tsc}" -p "${WORK}/${_cfg}"
    WORKING_DIRECTORY "${WORK}"
    RESULT_VARIABLE _rc
    TIMEOUT 240)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "tsc -p ${_cfg}: type errors against the installed package's declarations (${_rc})")
  endif()
  message("tsc -p ${_cfg}: ok")
endforeach()

# 3: a folder of its own (not under WORK, whose node_modules has @types/node:
# TypeScript looks for node_modules in every parent folder).
set(_bare "${WORK}-bare")
file(REMOVE_RECURSE "${_bare}")
file(MAKE_DIRECTORY "${_bare}")
file(COPY "${_t}/tsconfig.bare.json" "${_t}/bare.mts" "${_t}/bare.cts" DESTINATION "${_bare}")
file(WRITE "${_bare}/package.json" "{ \"name\": \"tickwheel-types-bare\", \"version\": \"0.0.0\", \"private\": true }\n")
tw_npm("${_bare}" install "${TARBALL}")
if(EXISTS "${_bare}/node_modules/@types/node")
  message(FATAL_ERROR "${_bare}/node_modules/@types/node exists: the check without @types/node would prove nothing")
endif()
execute_process(
  COMMAND "${NODE}" "${_tsc}" -p "${_bare}/tsconfig.bare.json"
  WORKING_DIRECTORY "${_bare}"
  RESULT_VARIABLE _rc
  TIMEOUT 240)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "tsc -p tsconfig.bare.json: the declarations do not compile without @types/node (${_rc})")
endif()
message("tsc -p tsconfig.bare.json (no @types/node, lib es2022): ok")
