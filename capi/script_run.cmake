# SPDX-License-Identifier: MIT OR Apache-2.0
# Shared by the ctest scripts (cmake -P) of capi/: run(cmd args...) runs a
# command, echoes it with its output, fails the test on a non-zero exit, and
# leaves its standard output in `run_out` in the caller's scope.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REPLACE ";" " " cmd "${ARGN}")
  message("$ ${cmd}\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${cmd}")
  endif()
  set(run_out "${out}" PARENT_SCOPE)
endfunction()
