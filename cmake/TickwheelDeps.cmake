# SPDX-License-Identifier: MIT OR Apache-2.0
# Finds tickwheel's dependencies. Every one comes from a Debian 12 package; a
# missing one stops configuration with the package to install (or run
# scripts/setup.sh as root, which installs them all).

function(tickwheel_missing what package)
  message(FATAL_ERROR
    "tickwheel: ${what} not found. Install the Debian package '${package}' "
    "(sudo apt-get install ${package}) or run scripts/setup.sh as root.")
endfunction()

# --- oneTBB ----------------------------------------------------------------
# ThreadSanitizer builds need a oneTBB that is itself built with
# -fsanitize=thread: Debian's libtbb.so is not instrumented, so TSan cannot
# see TBB's hand-off of a task from the submitting thread to the worker and
# reports false races inside TBB's headers. scripts/build-tbb-tsan.sh builds
# Debian's own oneTBB source package that way into a cache outside the tree;
# here we look for it.
if(TICKWHEEL_SANITIZE STREQUAL "thread" AND NOT TBB_DIR)
  if(DEFINED ENV{TICKWHEEL_CACHE})
    set(_tw_cache "$ENV{TICKWHEEL_CACHE}")
  elseif(DEFINED ENV{XDG_CACHE_HOME})
    set(_tw_cache "$ENV{XDG_CACHE_HOME}/tickwheel")
  else()
    set(_tw_cache "$ENV{HOME}/.cache/tickwheel")
  endif()
  file(GLOB _tw_tbb_configs "${_tw_cache}/onetbb-tsan-*/lib*/cmake/TBB/TBBConfig.cmake")
  if(NOT _tw_tbb_configs)
    message(FATAL_ERROR
      "tickwheel: the tsan preset needs oneTBB built with ThreadSanitizer "
      "(Debian's libtbb.so is not instrumented and makes TSan report false races). "
      "Run scripts/build-tbb-tsan.sh (as root the first time), or pass -DTBB_DIR=...")
  endif()
  list(GET _tw_tbb_configs 0 _tw_cfg)
  get_filename_component(_tw_dir "${_tw_cfg}" DIRECTORY)
  set(TBB_DIR "${_tw_dir}" CACHE PATH "oneTBB built with -fsanitize=thread" FORCE)
endif()
find_package(TBB CONFIG QUIET)
if(NOT TBB_FOUND)
  tickwheel_missing("oneTBB (TBBConfig.cmake)" "libtbb-dev")
endif()
message(STATUS "tickwheel: oneTBB ${TBB_VERSION} from ${TBB_DIR}")

# --- moodycamel ConcurrentQueue ---------------------------------------------
find_path(TICKWHEEL_CONCURRENTQUEUE_INCLUDE_DIR concurrentqueue.h
  PATH_SUFFIXES concurrentqueue concurrentqueue/moodycamel)
if(NOT TICKWHEEL_CONCURRENTQUEUE_INCLUDE_DIR)
  tickwheel_missing("moodycamel concurrentqueue.h" "libconcurrentqueue-dev")
endif()
add_library(tickwheel_concurrentqueue INTERFACE)
target_include_directories(tickwheel_concurrentqueue SYSTEM INTERFACE ${TICKWHEEL_CONCURRENTQUEUE_INCLUDE_DIR})

find_package(Threads REQUIRED)

# --- test and bench frameworks ----------------------------------------------
# TICKWHEEL_BUILD_TESTS and TICKWHEEL_BUILD_BENCH default ON when tickwheel
# is the top-level project AND GoogleTest / Google Benchmark is found, so a
# plain `cmake -B build` builds the library on a machine without them (and
# says what it left out). Set an option ON and its package becomes required:
# a missing one stops configuration naming the option to turn off. A default
# decided here is not cached: install the package, re-run cmake, and the
# option turns on.
#   tickwheel_framework_option(<option> <package> <what> <debian package> <doc>)
macro(tickwheel_framework_option option package what debian doc)
  if(DEFINED CACHE{${option}})
    option(${option} "${doc}" OFF)  # the value given stays; this adds the type and help text
    if(${option})
      find_package(${package} CONFIG QUIET)
      if(NOT ${package}_FOUND)
        message(FATAL_ERROR
          "tickwheel: ${option} is ON but ${what} was not found. Install the Debian package "
          "'${debian}' (sudo apt-get install ${debian}, or scripts/setup.sh --test as root), "
          "or configure with -D${option}=OFF (the library needs only oneTBB and moodycamel).")
      endif()
    endif()
  elseif(PROJECT_IS_TOP_LEVEL)
    find_package(${package} CONFIG QUIET)
    if(${package}_FOUND)
      option(${option} "${doc}" ON)
    else()
      set(${option} OFF)
      message(STATUS "tickwheel: ${what} not found ('${debian}'): ${option} is OFF "
                     "(-D${option}=ON requires it)")
    endif()
  else()
    option(${option} "${doc}" OFF)
  endif()
endmacro()
tickwheel_framework_option(TICKWHEEL_BUILD_TESTS GTest "GoogleTest" libgtest-dev
  "Build the test suite: GoogleTest programs, C API checks, consumer and packaging tests, fuzzers")
tickwheel_framework_option(TICKWHEEL_BUILD_BENCH benchmark "Google Benchmark" libbenchmark-dev
  "Build the benchmark programs")
