# SPDX-License-Identifier: MIT OR Apache-2.0
# Shared by the ctest scripts (cmake -P) of capi/ and a few others
# (cmake/check_build.cmake, docs/build_site.cmake, examples/
# check_demo_simulate.cmake, bench/peers/smoke.cmake).
# run(cmd args...) runs a command, echoes it with its output, fails the test
# on a non-zero exit, and leaves its standard output in `run_out` in the
# caller's scope.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REPLACE ";" " " cmd "${ARGN}")
  message("$ ${cmd}\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${cmd}")
  endif()
  set(run_out "${out}" PARENT_SCOPE)
endfunction()

# tw_require_exists(<path> <message>): fails the test with <message> unless
# <path> exists.
function(tw_require_exists path why)
  if(NOT EXISTS "${path}")
    message(FATAL_ERROR "${why}")
  endif()
endfunction()

# tw_fail_on_errors(<errors> <what>): fails the test with "<what>:" and the
# collected <errors> (one line each) unless <errors> is empty.
function(tw_fail_on_errors errors what)
  if(errors)
    message(FATAL_ERROR "${what}:\n${errors}")
  endif()
endfunction()

# tw_check_man_page(<man> <page> <mandir> <gz> <from> [<want>...]): the
# installed page of tw_timer_start, rendered by <man> -l <page>, shows the
# header, tw_timer_start's prototype, TW_EINVAL and each extra <want>
# (regular expressions); and, as a user finds it (MANPATH=<mandir>),
# man -w tw_timer_start finds it (<gz>: the pages' suffix as a regular
# expression, "" or "[.]gz"). <from> names the pages in a failure.
function(tw_check_man_page man page mandir gz from)
  set(ENV{MANWIDTH} 100)
  run("${man}" -l "${page}")
  foreach(want "tickwheel/tickwheel[.]h" "int tw_timer_start [(]tw_runtime [*] rt, uint64_t delay_ns" "TW_EINVAL"
               ${ARGN})
    if(NOT run_out MATCHES "${want}")
      message(FATAL_ERROR "man -l ${page} (${from}) does not show '${want}'")
    endif()
  endforeach()
  set(ENV{MANPATH} "${mandir}")
  run("${man}" -w tw_timer_start)
  unset(ENV{MANPATH})
  if(NOT run_out MATCHES "/man3/(tw_timer_start|tickwheel[.]h)[.]3${gz}")
    message(FATAL_ERROR "man -w tw_timer_start does not find the page (${from})")
  endif()
endfunction()

# run_consumer(<exe> <expect>): runs a consumer program and fails the test
# unless what it prints matches <expect> (e.g. "consumer: OK").
function(run_consumer exe expect)
  run("${exe}")
  if(NOT run_out MATCHES "${expect}")
    message(FATAL_ERROR "${exe} did not report '${expect}'")
  endif()
endfunction()

# tw_ldd(<exe> <out>): <out> = what ldd says <exe> loads; without ldd, says
# that the linkage of <exe> is not checked, and <out> is empty.
function(tw_ldd exe out)
  find_program(LDD ldd)
  if(NOT LDD)
    message("(ldd not found: the linkage of ${exe} is not checked)")
    set(${out} "" PARENT_SCOPE)
    return()
  endif()
  run("${LDD}" "${exe}")
  set(${out} "${run_out}" PARENT_SCOPE)
endfunction()
