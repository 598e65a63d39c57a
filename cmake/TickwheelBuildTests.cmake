# SPDX-License-Identifier: MIT OR Apache-2.0
# Tests of the build itself (TICKWHEEL_BUILD_TESTS only):
#   cxx20_header_guard          each C++ header, compiled as C++17 and as C,
#                               fails with exactly one error: its #error
#                               naming C++20 (not a wall of template errors)
#   cmake_library_only          a plain configure of this source tree with
#                               GoogleTest and Google Benchmark hidden and
#                               every TICKWHEEL_* option at its default:
#                               configures, builds (no -Werror), installs,
#                               uninstalls (nothing left); and the same with
#                               TICKWHEEL_BUILD_TESTS / _BENCH ON fails
#                               naming the option to turn off
#   cmake_consumer_subdirectory tests/capi_consumer/subproject, a C-only
#                               project(app C), add_subdirectory(tickwheel):
#                               consumer.c with tickwheel::tickwheel and with
#                               tickwheel::tickwheel_static, built and run
#   cmake_consumer_fetchcontent the same project as C and C++ with
#                               FetchContent (SOURCE_DIR: no network):
#                               consumer.c and consumer.cpp (no
#                               CXX_STANDARD of its own: the targets carry
#                               cxx_std_20), shared and static, built and run
# (The installed package's consumers, C-only among them: capi_consumer_cmake
# and capi_consumer_pkgconfig; the Debian packages': debian_packages.)
# The three builds recompile the library: like debian_packages, they run in
# g++ Release builds only, one at a time (RUN_SERIAL), never beside the
# timing-sensitive tests.
add_test(NAME cxx20_header_guard
  COMMAND ${CMAKE_COMMAND} -DCXX=${CMAKE_CXX_COMPILER} -DCC=${CMAKE_C_COMPILER}
          -DINCLUDE=${PROJECT_SOURCE_DIR}/include -DWORK=${PROJECT_BINARY_DIR}/cxx20-guard
          -P ${PROJECT_SOURCE_DIR}/cmake/check_cxx20_guard.cmake)
set_tests_properties(cxx20_header_guard PROPERTIES LABELS build TIMEOUT 120)

if(NOT (CMAKE_BUILD_TYPE STREQUAL "Release" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU"
        AND TICKWHEEL_SANITIZE STREQUAL ""))
  return()
endif()
set(_tw_build_args
  -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DWORK=${PROJECT_BINARY_DIR}/build-test
  -DGENERATOR=${CMAKE_GENERATOR} -DMAKE_PROGRAM=${CMAKE_MAKE_PROGRAM}
  -DCC=${CMAKE_C_COMPILER} -DCXX=${CMAKE_CXX_COMPILER} -DLIBDIR=${CMAKE_INSTALL_LIBDIR}
  -DMANDIR=${CMAKE_INSTALL_MANDIR})
foreach(_mode library_only subdirectory fetchcontent)
  if(_mode STREQUAL "library_only")
    set(_name cmake_library_only)
  else()
    set(_name cmake_consumer_${_mode})
  endif()
  add_test(NAME ${_name}
    COMMAND ${CMAKE_COMMAND} ${_tw_build_args} -DMODE=${_mode} -P ${PROJECT_SOURCE_DIR}/cmake/check_build.cmake)
  set_tests_properties(${_name} PROPERTIES
    LABELS build TIMEOUT 1200 RUN_SERIAL TRUE PROCESSORS 2 SKIP_REGULAR_EXPRESSION "TW-SKIP:")
endforeach()
