# SPDX-License-Identifier: MIT OR Apache-2.0
# ctest demo_simulate: `demo --simulate HOURS` (the simulated server on a
# manual clock) exits 0, and its summary adds up -- checked here from the
# numbers, not from the demo's own verdict:
#   opened = closed + timed out + cancelled at shutdown, each of them > 0;
#   fired early 0, no re-arm after a timeout (callbacks run inside advance());
#   timer starts = opened + 1 (the live line's periodic timer), stops =
#   closed + 1 (its stop), fires = timed out + the live lines it printed (24);
# it finishes at least MIN_SPEEDUP times faster than real time; and a second
# run with the same seed prints the same summary (deterministic).
# Usage: cmake -DDEMO=<demo> [-DHOURS=1] [-DMIN_SPEEDUP=100] -P check_demo_simulate.cmake
# (HOURS: one that makes a whole number of seconds, e.g. 1 or 0.25.)
include(${CMAKE_CURRENT_LIST_DIR}/../capi/script_run.cmake)  # tw_fail_on_errors()
if(NOT DEFINED HOURS)
  set(HOURS 1)
endif()
if(NOT DEFINED MIN_SPEEDUP)
  set(MIN_SPEEDUP 100)
endif()

function(run_demo out_var)
  execute_process(COMMAND "${DEMO}" --simulate ${HOURS}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "demo --simulate ${HOURS}: exit code ${rc}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

# The first capture group of `regex` in `text`, or fail.
function(field out_var text regex)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "demo_simulate: no line matching '${regex}' in the output")
  endif()
  set(${out_var} "${CMAKE_MATCH_1}" PARENT_SCOPE)
endfunction()

run_demo(out)
field(opened "${out}" "\n  connections opened +([0-9]+)\n")
field(closed "${out}" "\n  closed gracefully \\(stop\\) +([0-9]+)\n")
field(timed_out "${out}" "\n  timed out \\(callback\\) +([0-9]+)\n")
field(at_shutdown "${out}" "\n  still open at shutdown +([0-9]+) ")
field(rearm_late "${out}" "\n  re-arms \\(reset\\) +[0-9]+, ([0-9]+) came after the timeout\n")
field(counters "${out}" "\n  timer starts/fires/stops +([0-9]+ / [0-9]+ / [0-9]+)\n")
string(REPLACE " / " ";" counters "${counters}")
list(GET counters 0 starts)
list(GET counters 1 fires)
list(GET counters 2 stops)
field(early "${out}" "\n  fired early +([0-9]+)\n")
field(sim_s "${out}" "\nsummary after [0-9.e+-]+ h \\(([0-9]+) s\\) of simulated time")
field(wall "${out}" "of simulated time, in ([0-9.]+) s of wall time")
string(REGEX MATCHALL "\n +[0-9]+:[0-9][0-9]:[0-9][0-9]\\.[0-9][0-9][0-9] " live_lines "${out}")
list(LENGTH live_lines lines)

set(errors "")
math(EXPR sum "${closed} + ${timed_out} + ${at_shutdown}")
if(NOT opened EQUAL sum)
  string(APPEND errors "  opened ${opened} != closed ${closed} + timed out ${timed_out} + at shutdown ${at_shutdown} (${sum})\n")
endif()
foreach(v opened closed timed_out at_shutdown)
  if(${v} EQUAL 0)
    string(APPEND errors "  ${v} is 0: the simulation did not exercise it\n")
  endif()
endforeach()
if(NOT early EQUAL 0)
  string(APPEND errors "  fired early ${early}\n")
endif()
if(NOT rearm_late EQUAL 0)
  string(APPEND errors "  ${rearm_late} re-arms came after the timeout (impossible on a manual clock)\n")
endif()
if(NOT lines EQUAL 24)
  string(APPEND errors "  ${lines} live lines, expected 24 (one per 1/24 of the run)\n")
endif()
math(EXPR want_starts "${opened} + 1")
math(EXPR want_stops "${closed} + 1")
math(EXPR want_fires "${timed_out} + ${lines}")
if(NOT starts EQUAL want_starts OR NOT stops EQUAL want_stops OR NOT fires EQUAL want_fires)
  string(APPEND errors "  starts/fires/stops ${starts}/${fires}/${stops}, expected ${want_starts}/${want_fires}/${want_stops}\n")
endif()
math(EXPR max_wall "${sim_s} / ${MIN_SPEEDUP}")
if(NOT wall LESS max_wall)
  string(APPEND errors "  ${wall} s of wall time for ${sim_s} s simulated: not ${MIN_SPEEDUP}x faster than real time\n")
endif()

# Same seed, same run: the summary (all but its first line, which has the wall time).
string(FIND "${out}" "\nsummary after" at)
string(SUBSTRING "${out}" ${at} -1 first)
string(REGEX REPLACE "^\nsummary after[^\n]*\n" "" first "${first}")
run_demo(again)
string(FIND "${again}" "\nsummary after" at)
string(SUBSTRING "${again}" ${at} -1 second)
string(REGEX REPLACE "^\nsummary after[^\n]*\n" "" second "${second}")
if(NOT first STREQUAL second)
  string(APPEND errors "  two runs with the same seed differ:\n${first}---\n${second}")
endif()

tw_fail_on_errors("${errors}" "demo_simulate")
message("demo_simulate: ok (${HOURS} h simulated in ${wall} s; opened ${opened} = ${closed} + ${timed_out} + ${at_shutdown})")
