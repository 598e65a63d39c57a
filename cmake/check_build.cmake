# SPDX-License-Identifier: MIT OR Apache-2.0
# ctests cmake_library_only, cmake_consumer_subdirectory and
# cmake_consumer_fetchcontent (registered and described in
# cmake/TickwheelBuildTests.cmake). Each configures and builds in WORK/<mode>
# with GoogleTest and Google Benchmark hidden (CMAKE_DISABLE_FIND_PACKAGE_*),
# as on a machine without them.
# Arguments: MODE SOURCE_DIR WORK GENERATOR MAKE_PROGRAM CC CXX LIBDIR MANDIR
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/../capi/script_run.cmake)  # run()

set(hide -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON)
set(tools -G "${GENERATOR}" "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}" "-DCMAKE_C_COMPILER=${CC}"
          "-DCMAKE_CXX_COMPILER=${CXX}")

# Every regular file (and symlink) under dir, relative to it.
function(files_under dir outvar)
  file(GLOB_RECURSE found LIST_DIRECTORIES false RELATIVE "${dir}" "${dir}/*")
  set(${outvar} "${found}" PARENT_SCOPE)
endfunction()

if(MODE STREQUAL "library_only")
  set(bin "${WORK}/library-only")
  set(prefix "${WORK}/library-only-prefix")
  file(REMOVE_RECURSE "${bin}" "${prefix}")
  # 1. No TICKWHEEL_* option given: configure, build, install, uninstall.
  run("${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${bin}" ${tools} ${hide} "-DCMAKE_INSTALL_PREFIX=${prefix}")
  foreach(want "GoogleTest not found [^\n]*TICKWHEEL_BUILD_TESTS is OFF"
               "Google Benchmark not found [^\n]*TICKWHEEL_BUILD_BENCH is OFF")
    if(NOT run_out MATCHES "${want}")
      message(FATAL_ERROR "the configure output does not say '${want}'")
    endif()
  endforeach()
  file(STRINGS "${bin}/CMakeCache.txt" cache REGEX "^(TICKWHEEL_[A-Z_]+|CMAKE_BUILD_TYPE):")
  message(STATUS "cache: ${cache}")
  foreach(want "TICKWHEEL_WERROR:BOOL=OFF" "TICKWHEEL_BUILD_EXAMPLES:BOOL=ON" "TICKWHEEL_BUILD_STRESS:BOOL=ON"
               "TICKWHEEL_INSTALL:BOOL=ON" "CMAKE_BUILD_TYPE:STRING=Release")
    if(NOT want IN_LIST cache)
      message(FATAL_ERROR "a plain configure should give ${want}: ${cache}")
    endif()
  endforeach()
  foreach(unwanted "TICKWHEEL_BUILD_TESTS:BOOL=ON" "TICKWHEEL_BUILD_BENCH:BOOL=ON")
    if(unwanted IN_LIST cache)
      message(FATAL_ERROR "${unwanted} without GoogleTest / Google Benchmark")
    endif()
  endforeach()
  run("${CMAKE_COMMAND}" --build "${bin}")
  file(READ "${bin}/compile_commands.json" commands)
  if(commands MATCHES "-Werror" OR NOT commands MATCHES "-Wall")
    message(FATAL_ERROR "a plain build compiles with -Werror (or without -Wall): ${bin}/compile_commands.json")
  endif()
  foreach(f "capi/libtickwheel.so.1" "src/libtickwheel.a")
    if(NOT EXISTS "${bin}/${f}")
      message(FATAL_ERROR "the plain build made no ${f}")
    endif()
  endforeach()
  run("${CMAKE_COMMAND}" --install "${bin}")
  files_under("${prefix}" installed)
  list(LENGTH installed n_installed)
  set(expect include/tickwheel/tickwheel.h include/tickwheel/runtime.hpp ${LIBDIR}/libtickwheel.a
      ${LIBDIR}/libtickwheel.so ${LIBDIR}/libtickwheel.so.1 ${LIBDIR}/cmake/tickwheel/tickwheelConfig.cmake
      ${LIBDIR}/pkgconfig/tickwheel.pc ${LIBDIR}/pkgconfig/tickwheel-static.pc)
  file(STRINGS "${bin}/CMakeCache.txt" man REGEX "^TICKWHEEL_BUILD_MAN:BOOL=ON")
  if(man)
    list(APPEND expect ${MANDIR}/man3/tickwheel.h.3 ${MANDIR}/man3/tw_timer_start.3)
  endif()
  foreach(f IN LISTS expect)
    if(NOT f IN_LIST installed)
      message(FATAL_ERROR "cmake --install did not install ${f}: ${installed}")
    endif()
  endforeach()
  run("${CMAKE_COMMAND}" --build "${bin}" --target uninstall)
  files_under("${prefix}" left)
  if(left)
    message(FATAL_ERROR "the uninstall target left files behind in ${prefix}: ${left}")
  endif()
  foreach(d include/tickwheel ${LIBDIR}/cmake/tickwheel)
    if(EXISTS "${prefix}/${d}")
      message(FATAL_ERROR "the uninstall target left the directory ${prefix}/${d}")
    endif()
  endforeach()
  message(STATUS "OK: plain configure + build (no GoogleTest, no Google Benchmark, no -Werror), "
                 "install (${n_installed} files), uninstall (none left)")

  # 2. An option that needs a missing framework, set ON: the error names it.
  foreach(pair "TICKWHEEL_BUILD_TESTS;GoogleTest" "TICKWHEEL_BUILD_BENCH;Google Benchmark")
    list(GET pair 0 option)
    list(GET pair 1 what)
    set(nbin "${WORK}/library-only-${option}")
    file(REMOVE_RECURSE "${nbin}")
    execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${nbin}" ${tools} ${hide} -D${option}=ON
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    file(REMOVE_RECURSE "${nbin}")
    if(rc EQUAL 0)
      message(FATAL_ERROR "-D${option}=ON without ${what} configured")
    endif()
    string(REGEX REPLACE "[ \n]+" " " err "${err}")  # CMake wraps the message
    if(NOT err MATCHES "${option} is ON but ${what} was not found" OR NOT err MATCHES "-D${option}=OFF")
      message(FATAL_ERROR "-D${option}=ON without ${what}: the error does not name the option:\n${err}")
    endif()
    message(STATUS "OK: -D${option}=ON without ${what} stops configuration naming -D${option}=OFF")
  endforeach()

elseif(MODE STREQUAL "subdirectory" OR MODE STREQUAL "fetchcontent")
  set(bin "${WORK}/consumer-${MODE}")
  file(REMOVE_RECURSE "${bin}")
  if(MODE STREQUAL "subdirectory")
    set(langs C)  # a C-only project(): tickwheel enables C++ for itself
    set(programs consumer_c_shared consumer_c_static)
  else()
    set(langs "C,CXX")
    set(programs consumer_c_shared consumer_c_static consumer_cxx_shared consumer_cxx_static)
  endif()
  run("${CMAKE_COMMAND}" -S "${SOURCE_DIR}/tests/capi_consumer/subproject" -B "${bin}" ${tools} ${hide}
      -DCMAKE_BUILD_TYPE=Release "-DTW_HOW=${MODE}" "-DTW_SOURCE=${SOURCE_DIR}" "-DTW_LANGS=${langs}")
  run("${CMAKE_COMMAND}" --build "${bin}" --target ${programs})
  foreach(p IN LISTS programs)
    run("${bin}/${p}")
    if(NOT run_out MATCHES "consumer(_cxx)?: OK")
      message(FATAL_ERROR "${p} did not report OK")
    endif()
  endforeach()
  message(STATUS "OK: ${MODE} consumer (languages ${langs}): ${programs} built and ran")
else()
  message(FATAL_ERROR "unknown MODE ${MODE}")
endif()
