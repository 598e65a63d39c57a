# SPDX-License-Identifier: MIT OR Apache-2.0
# Smoke run of `scripts/bench.sh scaling` (ctest bench_scaling_smoke): the
# script itself, on the programs already built in BUILD_DIR, at tiny sizes
# (2 thread counts, 1 repetition, 5,000 pairs per producer, 20,000 timers per
# burst), so that the machinery -- the script, the peers' workload mt,
# bench/expiry_probe, scaling_report.py and its plots -- cannot rot. It must
# exit 0 and write scaling.json with tickwheel's figures for 1 and 2
# producers and one expiry run per (producers, workers), none early, and
# scaling.md. A peer that is not built (Boost.Asio, libevent) is skipped by
# the script, and named here; without gnuplot the plots are skipped, and
# named. Not a timed test: the figures are not checked.
#   cmake -DSOURCE_DIR=<repo> -DBUILD_DIR=<build> -DOUT=<dir> -P smoke_scaling.cmake
cmake_minimum_required(VERSION 3.20)  # string(JSON), IN_LIST
include("${CMAKE_CURRENT_LIST_DIR}/bench_sh_smoke.cmake")
tw_bench_sh_smoke(SCRIPT smoke_scaling.cmake MODE scaling TIMEOUT 120
                  ENV BENCH_THREADS=2 SCALING_REPS=1 SCALING_OPS=5000 SCALING_PENDING=2000 SCALING_TIMERS=20000
                  WRITES scaling.json scaling.md)
file(READ "${OUT}/scaling.json" doc)

# (a) tickwheel through the C ABI, 1 and 2 producers
string(JSON n_mt LENGTH "${doc}" mt)
set(_found "")
if(n_mt GREATER 0)
  math(EXPR last "${n_mt} - 1")
  foreach(i RANGE ${last})
    string(JSON peer GET "${doc}" mt ${i} peer)
    string(JSON metric GET "${doc}" mt ${i} metric)
    string(JSON threads GET "${doc}" mt ${i} params threads)
    string(JSON median GET "${doc}" mt ${i} median)
    if(metric STREQUAL "pairs_per_s")
      list(APPEND _found "${peer}/${threads}")
      message(STATUS "${peer}, ${threads} producer(s): ${median} pairs/s")
    endif()
  endforeach()
endif()
foreach(want tickwheel-capi/1 tickwheel-capi/2)
  if(NOT want IN_LIST _found)
    message(FATAL_ERROR "scaling.json: no pairs_per_s for ${want}\nstderr:\n${err}")
  endif()
endforeach()

# (b) expiry: producers {1, 2} x workers {1, 2}, one run each, never early
string(JSON skipped GET "${doc}" meta skipped)
string(JSON n_exp LENGTH "${doc}" expiry)
if(skipped MATCHES "expiry_probe not built")
  tw_smoke_skip("expiry_probe not built: the expiry part of the scaling workload was not run")
endif()
if(NOT n_exp EQUAL 4)
  message(FATAL_ERROR "scaling.json: ${n_exp} expiry configurations, expected 4 (producers 1, 2 x workers 1, 2)\nstderr:\n${err}")
endif()
math(EXPR last "${n_exp} - 1")
foreach(i RANGE ${last})
  string(JSON p GET "${doc}" expiry ${i} producers)
  string(JSON w GET "${doc}" expiry ${i} workers)
  string(JSON early GET "${doc}" expiry ${i} early)
  string(JSON cbs GET "${doc}" expiry ${i} callbacks_per_s median)
  if(NOT early EQUAL 0)
    message(FATAL_ERROR "expiry_probe: ${early} callbacks ran before their deadline (producers ${p}, workers ${w})")
  endif()
  message(STATUS "expiry, ${p} producer(s), ${w} worker(s): ${cbs} callbacks/s")
endforeach()

# what the script skipped, and the plots
if(NOT skipped STREQUAL "[]")
  message(STATUS "skipped by the script (not a failure): ${skipped}")
endif()
find_program(_gnuplot gnuplot)
foreach(png scaling_producers.png scaling_expiry.png scaling_expiry_cpu.png)
  if(NOT _gnuplot)
    message(STATUS "no ${png}: gnuplot not installed (Debian package gnuplot-nox)")
  elseif(NOT EXISTS "${OUT}/${png}")
    message(FATAL_ERROR "no ${png} in ${OUT} although gnuplot is installed\nstderr:\n${err}")
  endif()
endforeach()
message(STATUS "scripts/bench.sh scaling: OK")
