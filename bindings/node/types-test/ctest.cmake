# SPDX-License-Identifier: MIT OR Apache-2.0
# ctest capi_node_types: type-checks the package's declarations (index.d.ts,
# promises.d.ts) as a TypeScript user gets them: typescript and @types/node
# (pinned by this folder's package-lock.json) are installed with `npm ci`
# into a copy in the build tree (skipped while the lock is unchanged), the
# package's files go to node_modules/tickwheel, and `tsc --noEmit -p .`
# compiles check.ts (its @ts-expect-error lines must be errors) and the
# README's ```ts sample.
#
#   cmake -DNODE=... -DNPM=... -DSOURCE=<bindings/node> -DWORK=<dir> -P ctest.cmake
#
# Prints "TW-SKIP: ..." when node or npm is missing or the npm registry
# cannot be reached.
cmake_minimum_required(VERSION 3.16)

foreach(_tool NODE NPM)
  if(NOT ${_tool} OR NOT EXISTS "${${_tool}}")
    message("TW-SKIP: node/npm not found (node: '${NODE}', npm: '${NPM}')")
    return()
  endif()
endforeach()

set(_t "${SOURCE}/types-test")
file(MAKE_DIRECTORY "${WORK}")
file(COPY "${_t}/package.json" "${_t}/package-lock.json" "${_t}/tsconfig.json" "${_t}/check.ts"
     DESTINATION "${WORK}")

set(_stamp "${WORK}/node_modules/.tickwheel-lock")
set(_fresh FALSE)
file(SHA256 "${_t}/package-lock.json" _want)
if(EXISTS "${_stamp}")
  file(READ "${_stamp}" _have)
  if(_want STREQUAL _have)
    set(_fresh TRUE)
  endif()
endif()
if(NOT _fresh)
  message("npm ci in ${WORK}")
  execute_process(
    COMMAND "${NPM}" ci --no-audit --no-fund --prefer-offline
    WORKING_DIRECTORY "${WORK}"
    RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out
    TIMEOUT 240)
  if(NOT _rc EQUAL 0)
    if(_out MATCHES "ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|network|timed out"
       OR _rc MATCHES "timeout")
      message("TW-SKIP: the npm registry is unreachable (npm ci: ${_rc}):\n${_out}")
      return()
    endif()
    message(FATAL_ERROR "npm ci failed (${_rc}):\n${_out}")
  endif()
  file(WRITE "${_stamp}" "${_want}")
endif()

# The README's TypeScript sample is compiled too (readme.ts, named in tsconfig.json).
file(READ "${SOURCE}/README.md" _readme)
string(REGEX MATCH "```ts\n([^`]*)```" _m "${_readme}")
if(NOT CMAKE_MATCH_1)
  message(FATAL_ERROR "bindings/node/README.md has no ```ts sample")
endif()
file(WRITE "${WORK}/readme.ts" "// From bindings/node/README.md (written by ctest.cmake)\n${CMAKE_MATCH_1}")

# The package as installed (its declarations and the files they sit beside).
file(REMOVE_RECURSE "${WORK}/node_modules/tickwheel")
file(COPY "${SOURCE}/package.json" "${SOURCE}/index.js" "${SOURCE}/index.d.ts" "${SOURCE}/promises.js"
          "${SOURCE}/promises.d.ts" DESTINATION "${WORK}/node_modules/tickwheel")

execute_process(
  COMMAND "${NODE}" "${WORK}/node_modules/typescript/bin/tsc" -p "${WORK}"
  WORKING_DIRECTORY "${WORK}"
  RESULT_VARIABLE _rc
  TIMEOUT 240)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "tsc found type errors in check.ts against index.d.ts/promises.d.ts (${_rc})")
endif()
message("tsc: check.ts type-checks against the package's declarations")
