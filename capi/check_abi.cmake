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
#    the abidw dump fails too, compared as a set of canonical lines, because
#    the same library built elsewhere (another directory, another order of
#    compilation) gives a dump that differs in three ways that say nothing
#    about the ABI:
#    - sibling declarations in another order (namespace std before or after
#      namespace tickwheel): each line stands alone, the lines are sorted;
#    - a declaration repeated under another translation unit's
#      <abi-instr> (a class of runtime.hpp described where runtime.cpp, or
#      exports.cpp, uses it): the <abi-instr> lines are dropped and the
#      lines compared as a set;
#    - hash type ids that collide get a suffix in the order abidw meets the
#      types: `int` was 95e97e5e and `long int` 95e97e5f in one build, the
#      other way round in another (a fresh clone failed capi_abi_check against
#      75dfd84's baseline on that). Every id of a named declaration (type-decl,
#      typedef-decl, class-decl, enum-decl, union-decl) is replaced by its
#      kind and name wherever it appears.
#    Each line is compared with the lines of the elements it sits in (its
#    class, the data member whose offset it gives): an added, removed,
#    resized, moved, retyped or reordered member changes the set.
set(current "${CMAKE_CURRENT_BINARY_DIR}/libtickwheel.current.abi")
dump("${current}")
function(canonical_lines file out)
  file(READ "${file}" xml)
  string(REGEX MATCHALL "<(type-decl|typedef-decl|class-decl|enum-decl|union-decl) name='[^']*'[^>]* id='[0-9a-f]+'"
         decls "${xml}")
  foreach(d IN LISTS decls)
    string(REGEX REPLACE "^<([a-z-]+) name='([^']*)'.* id='([0-9a-f]+)'$" "\\3" id "${d}")
    string(REGEX REPLACE "^<([a-z-]+) name='([^']*)'.* id='([0-9a-f]+)'$" "\\1:\\2" named "${d}")
    string(REPLACE "'${id}'" "'${named}'" xml "${xml}")
  endforeach()
  string(REGEX REPLACE "[ ]*<abi-instr [^\n]*\n" "" xml "${xml}")
  string(REGEX REPLACE "[ ]*</abi-instr>[^\n]*\n" "" xml "${xml}")
  # Each line with the elements it sits in: a <data-member>'s offset and the
  # <var-decl> under it (its name and type) are two lines, and a line alone
  # may also stand in another class ("> " joins the ancestors' lines).
  string(REPLACE ";" "@semicolon@" xml "${xml}")
  string(REPLACE "\n" ";" lines "${xml}")
  set(stack "")
  set(flat "")
  foreach(l IN LISTS lines)
    string(STRIP "${l}" l)
    if(l STREQUAL "")
      continue()
    endif()
    if(l MATCHES "^</")
      list(POP_BACK stack)
      continue()
    endif()
    string(JOIN " > " context ${stack})
    string(APPEND flat "${context} | ${l}\n")
    if(NOT l MATCHES "/>$")
      list(APPEND stack "${l}")
    endif()
  endforeach()
  set(tmp "${CMAKE_CURRENT_BINARY_DIR}/libtickwheel.canonical.tmp")
  file(WRITE "${tmp}" "${flat}")
  execute_process(COMMAND ${CMAKE_COMMAND} -E env LC_ALL=C sort -u "${tmp}"
                  OUTPUT_VARIABLE s RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "sort ${tmp} failed (${rc})")
  endif()
  file(REMOVE "${tmp}")
  set(${out} "${s}" PARENT_SCOPE)
endfunction()
canonical_lines("${BASELINE}" want)
canonical_lines("${current}" got)
if(NOT want STREQUAL got)
  set(want_file "${CMAKE_CURRENT_BINARY_DIR}/libtickwheel.baseline.canonical")
  set(got_file "${CMAKE_CURRENT_BINARY_DIR}/libtickwheel.current.canonical")
  file(WRITE "${want_file}" "${want}")
  file(WRITE "${got_file}" "${got}")
  find_program(DIFF diff)
  if(DIFF)
    execute_process(COMMAND "${DIFF}" -u "${want_file}" "${got_file}" OUTPUT_VARIABLE d)
    message("$ diff -u (canonical lines) ${want_file} ${got_file}\n${d}")
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
