# SPDX-License-Identifier: MIT OR Apache-2.0
# What the Node.js binding's ctest drivers (ctest.cmake, types-test/ctest.cmake;
# registered by tickwheel_node_test in capi/CMakeLists.txt) share: include()d
# by a cmake -P script that was given NODE and NPM.
#
#   tw_node_tools_or_skip()        TW-SKIP (the script returns) when node or npm is missing
#   tw_npm(<dir> <npm args>...)    runs npm there; TW-SKIP when the registry is unreachable
#   tw_npm_ci_once(<dir> <lock>)   `npm ci` in <dir>, skipped while <lock> is unchanged
#                                  since the last install (stamped in node_modules)
#
# Macros, not functions: their return() ends the calling script.

macro(tw_node_tools_or_skip)
  foreach(_tool NODE NPM)
    if(NOT ${_tool} OR NOT EXISTS "${${_tool}}")
      message("TW-SKIP: node/npm not found (node: '${NODE}', npm: '${NPM}')")
      return()
    endif()
  endforeach()
endmacro()

set(_net_errors "ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|network|timed out")

macro(tw_npm DIR)
  execute_process(
    COMMAND "${NPM}" ${ARGN} --no-audit --no-fund --prefer-offline
    WORKING_DIRECTORY "${DIR}"
    RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out
    TIMEOUT 240)
  if(NOT _rc EQUAL 0)
    if(_out MATCHES "${_net_errors}" OR _rc MATCHES "timeout")
      message("TW-SKIP: the npm registry is unreachable (npm ${ARGN}: ${_rc}):\n${_out}")
      return()
    endif()
    message(FATAL_ERROR "npm ${ARGN} in ${DIR} failed (${_rc}):\n${_out}")
  endif()
endmacro()

macro(tw_npm_ci_once DIR LOCK)
  set(_stamp "${DIR}/node_modules/.tickwheel-lock")
  set(_fresh FALSE)
  file(SHA256 "${LOCK}" _want)
  if(EXISTS "${_stamp}")
    file(READ "${_stamp}" _have)
    if(_want STREQUAL _have)
      set(_fresh TRUE)
    endif()
  endif()
  if(NOT _fresh)
    message("npm ci in ${DIR}")
    tw_npm("${DIR}" ci)
    file(WRITE "${_stamp}" "${_want}")
  endif()
endmacro()
