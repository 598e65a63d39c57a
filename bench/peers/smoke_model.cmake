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
include("${CMAKE_CURRENT_LIST_DIR}/bench_sh_smoke.cmake")
tw_bench_sh_smoke(SCRIPT smoke_model.cmake MODE model TIMEOUT 100 NEEDS bench/model_bench
                  ENV MODEL_TIMERS=5000 MODEL_PENDING=20000 WRITES model.json figures.json)
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
