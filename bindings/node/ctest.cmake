# SPDX-License-Identifier: MIT OR Apache-2.0
# ctest driver of the Node.js binding (capi_node in capi/CMakeLists.txt):
# copies the package into the build tree (node_modules never lands in the
# source tree), installs its locked dependencies with `npm ci` (skipped when
# the copy's lock is unchanged since the last install), then runs
# `node --test` with TICKWHEEL_LIB naming the freshly built library, then a
# smoke run of bench/peers/peer_node.js (scripts/bench.sh node).
#
#   cmake -DNODE=... -DNPM=... -DSOURCE=<bindings/node> -DWORK=<dir>
#         -DLIB=<libtickwheel.so> -DHEADER_VERSION=<x.y.z> -P ctest.cmake
#
# Prints "TW-SKIP: ..." (the test is then skipped) when node or npm is
# missing or the npm registry cannot be reached.
cmake_minimum_required(VERSION 3.16)

include("${CMAKE_CURRENT_LIST_DIR}/npm_setup.cmake")
tw_node_tools_or_skip()

# The binding refuses a library of another major version: keep them in step.
file(READ "${SOURCE}/package.json" _pkg)
string(REGEX MATCH "\"version\": *\"([0-9]+)\\.[0-9]+\\.[0-9]+" _m "${_pkg}")
set(_pkg_major "${CMAKE_MATCH_1}")
string(REGEX MATCH "^[0-9]+" _hdr_major "${HEADER_VERSION}")
if(NOT _pkg_major STREQUAL _hdr_major)
  message(FATAL_ERROR "bindings/node/package.json has major version '${_pkg_major}', tickwheel.h is "
                      "${HEADER_VERSION}: the binding loads only a library of its own major version; "
                      "keep them equal")
endif()

# A fresh copy of the package's files (stale tests removed), node_modules kept.
file(MAKE_DIRECTORY "${WORK}")
file(REMOVE_RECURSE "${WORK}/test" "${WORK}/fixtures")
file(COPY "${SOURCE}/package.json" "${SOURCE}/package-lock.json" "${SOURCE}/index.js" "${SOURCE}/promises.js"
          "${SOURCE}/index.mjs" "${SOURCE}/promises.mjs" "${SOURCE}/index.d.ts" "${SOURCE}/test" "${SOURCE}/fixtures"
     DESTINATION "${WORK}")

tw_npm_ci_once("${WORK}" "${SOURCE}/package-lock.json")

execute_process(
  COMMAND "${CMAKE_COMMAND}" -E env "TICKWHEEL_LIB=${LIB}" "${NODE}" --test
  WORKING_DIRECTORY "${WORK}"
  RESULT_VARIABLE _rc
  TIMEOUT 240)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "node --test failed (${_rc})")
endif()

# scripts/bench.sh node's program, tiny: a change of the binding must not
# break the benchmark unnoticed (it reaches into _internal.rawPairs).
execute_process(
  COMMAND "${CMAKE_COMMAND}" -E env "TICKWHEEL_LIB=${LIB}" "${NODE}" "${SOURCE}/../../bench/peers/peer_node.js"
          --binding "${WORK}" --ops 2000 --rounds 1 --warmup 0
  WORKING_DIRECTORY "${WORK}"
  RESULT_VARIABLE _rc
  TIMEOUT 120)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "bench/peers/peer_node.js (smoke run) failed (${_rc})")
endif()
