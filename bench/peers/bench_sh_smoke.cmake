# SPDX-License-Identifier: MIT OR Apache-2.0
# Shared by smoke_model.cmake and smoke_scaling.cmake: one smoke run of
# `scripts/bench.sh MODE --quick` on the programs already built in BUILD_DIR.
#   tw_bench_sh_smoke(SCRIPT <name> MODE <mode> TIMEOUT <s> [NEEDS <path>...]
#                     [ENV VAR=value...] WRITES <file>...)
# checks that -DSOURCE_DIR, -DBUILD_DIR and -DOUT were given (fatal if not);
# skips (TW-SKIP, returning from the calling script) without bash or when a
# program NEEDS names (relative to BUILD_DIR) is not built; empties OUT; runs
# the script with BENCH_NO_BUILD=1, BENCH_BUILD_DIR, BENCH_OUT and ENV; fails,
# with the script's output, on a non-zero exit status or a file of WRITES
# missing in OUT; and leaves the script's stdout and stderr in `out` and `err`.
# A macro, not a function, so that a skip returns from the calling script.
# tw_smoke_skip(<why>): the test is skipped (ctest's SKIP_REGULAR_EXPRESSION
# TW-SKIP:) with <why>, and the calling script returns.
macro(tw_smoke_skip why)
  message(STATUS "TW-SKIP: ${why}")
  return()
endmacro()

macro(tw_bench_sh_smoke)
  cmake_parse_arguments(_tbs "" "SCRIPT;MODE;TIMEOUT" "NEEDS;ENV;WRITES" ${ARGN})
  foreach(v SOURCE_DIR BUILD_DIR OUT)
    if(NOT ${v})
      message(FATAL_ERROR "${_tbs_SCRIPT}: -D${v}=... is required")
    endif()
  endforeach()
  find_program(_bash bash)
  if(NOT _bash)
    tw_smoke_skip("bash not found")
  endif()
  foreach(_need IN LISTS _tbs_NEEDS)
    if(NOT EXISTS "${BUILD_DIR}/${_need}")
      tw_smoke_skip("${BUILD_DIR}/${_need} not built")
    endif()
  endforeach()
  file(REMOVE_RECURSE "${OUT}")
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env BENCH_NO_BUILD=1 "BENCH_BUILD_DIR=${BUILD_DIR}" "BENCH_OUT=${OUT}" ${_tbs_ENV}
            ${_bash} "${SOURCE_DIR}/scripts/bench.sh" ${_tbs_MODE} --quick
    WORKING_DIRECTORY "${SOURCE_DIR}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${_tbs_TIMEOUT})
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "scripts/bench.sh ${_tbs_MODE}: exit status '${rc}'\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  foreach(_f IN LISTS _tbs_WRITES)
    if(NOT EXISTS "${OUT}/${_f}")
      message(FATAL_ERROR "scripts/bench.sh ${_tbs_MODE} wrote no ${_f} in ${OUT}\nstderr:\n${err}")
    endif()
  endforeach()
endmacro()
