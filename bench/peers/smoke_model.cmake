# SPDX-License-Identifier: MIT OR Apache-2.0
# Smoke run of `scripts/bench.sh model` (ctest bench_model_smoke): the script
# on bench/model_bench as built in BUILD_DIR, at tiny sizes (5,000 timers for
# the wake-ups, 20,000 pending for stop_group, query and advance), so that
# model_bench's output and what scripts/figures.py --collect parses of it
# cannot drift apart. It must exit 0 and write model.json and a figures.json
# with every figure the guides quote (the wake-ups with and without leeway,
# none early; stop_group at 1 and 1,000; query at 1,000; advance). Not a
# timed test: the figures are not checked.
#   cmake -DSOURCE_DIR=<repo> -DBUILD_DIR=<build> -DOUT=<dir> -P smoke_model.cmake
cmake_minimum_required(VERSION 3.20)  # string(JSON)
foreach(v SOURCE_DIR BUILD_DIR OUT)
  if(NOT ${v})
    message(FATAL_ERROR "smoke_model.cmake: -D${v}=... is required")
  endif()
endforeach()
find_program(_bash bash)
if(NOT _bash)
  message(STATUS "TW-SKIP: bash not found")
  return()
endif()
if(NOT EXISTS "${BUILD_DIR}/bench/model_bench")
  message(STATUS "TW-SKIP: ${BUILD_DIR}/bench/model_bench not built")
  return()
endif()
file(REMOVE_RECURSE "${OUT}")
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env BENCH_NO_BUILD=1 "BENCH_BUILD_DIR=${BUILD_DIR}" "BENCH_OUT=${OUT}"
          MODEL_TIMERS=5000 MODEL_PENDING=20000 ${_bash} "${SOURCE_DIR}/scripts/bench.sh" model --quick
  WORKING_DIRECTORY "${SOURCE_DIR}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 100)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "scripts/bench.sh model: exit status '${rc}'\nstdout:\n${out}\nstderr:\n${err}")
endif()
foreach(f model.json figures.json)
  if(NOT EXISTS "${OUT}/${f}")
    message(FATAL_ERROR "scripts/bench.sh model wrote no ${f} in ${OUT}\nstderr:\n${err}")
  endif()
endforeach()
file(READ "${OUT}/figures.json" doc)
foreach(key model.wakeups.leeway0 model.wakeups.leeway10 model.wakeups.early model.group.1 model.group.1.us
            model.group.1.first_us model.group.1k model.group.pending model.query.1k model.advance)
  string(JSON value ERROR_VARIABLE e GET "${doc}" figures ${key} value)
  if(e)
    message(FATAL_ERROR "figures.json of the model run has no ${key} (${e})\nmodel_bench said:\n${out}\n${err}")
  endif()
  if(key STREQUAL "model.wakeups.early" AND NOT value EQUAL 0)
    message(FATAL_ERROR "model_bench wakeups: ${value} callbacks ran before their deadline")
  endif()
endforeach()
message(STATUS "bench.sh model: model.json and figures.json with every figure the guides quote, none early")
