# SPDX-License-Identifier: MIT OR Apache-2.0
# ctest capi_abi_check (MODE=check): compares the committed ABI baseline with the
# freshly built library -- abidiff, and the abidw dump itself: any difference
# fails. MODE=write regenerates the
# baseline (target abi-baseline). Skipped (ctest SKIP_REGULAR_EXPRESSION) where the binary differs
# from the one the baseline was taken of: sanitizer builds, build types other
# than Release, compilers other than g++, other architectures.
# Usage: cmake -DMODE=check|write -DABIDW=... -DABIDIFF=... -DLIB=... -DBASELINE=...
#              -DHEADER=.../tickwheel.h -DSUPPRESSIONS=.../abi.suppr -DSOURCE_DIR=... -DBUILD_TYPE=... -DSANITIZE=... -DCOMPILER=... -DARCH=... -P check_abi.cmake
# ctest marks the test skipped when the output says "TW-SKIP:" (SKIP_REGULAR_EXPRESSION).
macro(skip why)
  message("TW-SKIP: ${why}")
  return()
endmacro()

include(${CMAKE_CURRENT_LIST_DIR}/script_run.cmake)  # tw_require_exists()
if(NOT SANITIZE STREQUAL "")
  skip("sanitizer build (${SANITIZE}): the baseline is of the release build")
endif()
if(NOT BUILD_TYPE STREQUAL "Release" OR NOT COMPILER STREQUAL "GNU")
  skip("build type ${BUILD_TYPE} / compiler ${COMPILER}: the baseline is of the release preset (g++, Release)")
endif()
if(NOT ARCH STREQUAL "x86_64")
  skip("architecture ${ARCH}: the baseline is of x86_64 (LP64) -- add one per architecture")
endif()
if(NOT ABIDW OR NOT ABIDIFF)
  skip("abidw/abidiff not found: apt-get install abigail-tools")
endif()

# The ABI of libtickwheel.so.1: tickwheel.h (the C API, TICKWHEEL_1) and the
# C++ API's exported entry points (TICKWHEEL_CXX_1) with the types of
# runtime.hpp, timer.hpp and detail/callback.hpp they take. SUPPRESSIONS
# (capi/abi.suppr) drops the library's internal, oneTBB, moodycamel and
# standard library types from the description.
get_filename_component(include_dir "${HEADER}" DIRECTORY)
set(header_args --header-file "${HEADER}")
foreach(h runtime.hpp timer.hpp detail/callback.hpp)
  list(APPEND header_args --header-file "${include_dir}/${h}")
endforeach()
set(dump_args --no-corpus-path --no-comp-dir-path --no-show-locs
              --drop-undefined-syms --type-id-style hash ${header_args} --suppressions "${SUPPRESSIONS}")
# abidw of LIB into `out`, with the checkout's absolute path removed (the dump
# names the translation unit: keep it relative to the source tree).
function(dump out)
  execute_process(COMMAND "${ABIDW}" ${dump_args} "${LIB}" OUTPUT_VARIABLE xml RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "abidw ${LIB} failed (${rc})")
  endif()
  string(REPLACE " path='${SOURCE_DIR}/" " path='" xml "${xml}")
  # ccache with CCACHE_BASEDIR (as the helpers' builds use) compiles with paths
  # relative to the build directory: ../../capi/exports.cpp. Same file.
  string(REGEX REPLACE " path='(\\.\\./)+" " path='" xml "${xml}")
  file(WRITE "${out}" "${xml}")
endfunction()

if(MODE STREQUAL "write")
  dump("${BASELINE}")
  message(STATUS "wrote ${BASELINE}")
  return()
endif()

tw_require_exists("${BASELINE}" "no ABI baseline ${BASELINE}: build the abi-baseline target in the release preset")

# 1. abidiff: the semantic report. Any reported change fails.
#    --harmless: report even what abigail deems harmless; --fail-no-debug-info:
#    without the DWARF of exports.cpp only symbol names could be compared.
string(REPLACE "--header-file" "--header-file2" header2_args "${header_args}")
execute_process(COMMAND "${ABIDIFF}" ${header2_args} --suppressions "${SUPPRESSIONS}" --no-show-locs --harmless
                        --fail-no-debug-info "${BASELINE}" "${LIB}"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message("$ abidiff ${BASELINE} ${LIB}\nexit ${rc}\n${out}${err}")
set(failed "")
if(NOT rc EQUAL 0)
  set(failed "abidiff reports an ABI change (exit ${rc}: 1=error 2=usage 4=change 8=incompatible change)")
endif()

# 2. The dump itself: abidiff filters some changes on purpose (e.g. a field
#    appended to a struct used through pointers -- compatible under our growth
#    policy, but still a change the baseline must record). Any difference in
#    the abidw dump fails too. The dump's lines are compared as a sorted
#    multiset: abidw orders some sibling declarations (e.g. namespace std
#    before or after namespace tickwheel) differently when the same source
#    is built in another directory, while every declaration, member and
#    offset is its own line -- an added, removed, resized, moved or
#    reordered member still changes the set (each member line carries its
#    offset).
set(current "${CMAKE_CURRENT_BINARY_DIR}/libtickwheel.current.abi")
dump("${current}")
function(sorted_lines file out)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env LC_ALL=C sort "${file}"
                  OUTPUT_VARIABLE s RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "sort ${file} failed (${rc})")
  endif()
  set(${out} "${s}" PARENT_SCOPE)
endfunction()
sorted_lines("${BASELINE}" want)
sorted_lines("${current}" got)
if(NOT want STREQUAL got)
  find_program(DIFF diff)
  if(DIFF)
    execute_process(COMMAND "${DIFF}" -u "${BASELINE}" "${current}" OUTPUT_VARIABLE d)
    message("$ diff -u ${BASELINE} ${current}\n${d}")
  endif()
  list(APPEND failed "the abidw dump of the library differs from the baseline")
endif()

if(failed)
  string(REPLACE ";" "\n  " failed "${failed}")
  message(FATAL_ERROR "ABI check of ${LIB} failed:\n  ${failed}\n"
                      "If the change is intended and compatible (see the ABI policy in tickwheel.h), "
                      "regenerate the baseline in the same commit: "
                      "cmake --build --preset release --target abi-baseline")
endif()
message(STATUS "OK: ABI identical to ${BASELINE}")
