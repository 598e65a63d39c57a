# SPDX-License-Identifier: MIT OR Apache-2.0
# ctest demo_metrics: `demo --metrics` (a short run) exits 0 and the text after
# its "# tickwheel metrics" line passes metrics_check (the strict grammar of
# tests/prometheus_text.hpp, and values of a runtime that ran and shut down).
# Usage: cmake -DDEMO=<demo> -DCHECK=<metrics_check> -P check_demo_metrics.cmake
# 20000 connections per thread: each is touched only every ~100 ms or more,
# so idle timeouts (100-1000 ms) fire within the 1 s run, loaded or not (with
# 500 they were re-armed every ~2 ms and none fired: fired 0 failed the check).
execute_process(COMMAND "${DEMO}" --metrics 1 2 20000
                COMMAND "${CHECK}"
                RESULTS_VARIABLE rcs OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rcs STREQUAL "0;0")
  message(FATAL_ERROR "demo --metrics | metrics_check: exit codes ${rcs} (demo;check)")
endif()
