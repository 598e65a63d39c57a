# SPDX-License-Identifier: MIT OR Apache-2.0
# ctest docs_doxygen / docs_doxygen_selftest (registered in docs/CMakeLists.txt).
#
# MODE=check: runs Doxygen with the project's Doxyfile (plus XML output) into
#   WORK_DIR and fails on any warning or non-zero exit -- an undocumented
#   public function, type, macro or member, a bad @command, a broken \ref --
#   and on an enum value without a comment (Doxygen 1.9.4, Debian 12's, does
#   not warn about those; 1.9.5+ has WARN_IF_UNDOC_ENUM_VAL), read from the XML.
#   Doxygen warns about undocumented globals only in a documented file (and
#   about namespace members only in a documented namespace), so the check also
#   requires each header's @file comment, a documented namespace tickwheel,
#   and every tw_* function and TW_* macro of tickwheel.h in the output.
# MODE=selftest: proves both checks can fail. Runs the same configuration over
#   a copy of tickwheel.h whose tw_timer_reset() has lost its doc comment
#   (Doxygen must fail and name it), and over a copy of runtime.hpp whose
#   errc::forked has lost its comment (the enum check must name it).
#
# Usage: cmake -DMODE=check|selftest -DDOXYGEN=... -DDOXYFILE=... -DSOURCE_DIR=... -DWORK_DIR=...
#              -P check_docs.cmake
# ctest marks the test skipped when the output says "TW-SKIP:" (SKIP_REGULAR_EXPRESSION).
cmake_minimum_required(VERSION 3.25)

if(NOT DOXYGEN)
  message("TW-SKIP: doxygen not found (apt-get install doxygen), the API reference is not checked")
  return()
endif()
foreach(v DOXYFILE SOURCE_DIR WORK_DIR MODE)
  if(NOT ${v})
    message(FATAL_ERROR "check_docs.cmake: -D${v}=... is required")
  endif()
endforeach()

# The text of a compound's own brief + detailed description in Doxygen's XML
# `xml` (indented 4 spaces, after its members' sections; tags and whitespace
# removed), in <out_var>.
function(compound_description xml out_var)
  set(text "")
  string(FIND "${xml}" "\n    <briefdescription>" at)
  if(NOT at EQUAL -1)
    string(SUBSTRING "${xml}" ${at} -1 text)
    string(REGEX REPLACE "\n    <(programlisting|location|listofallmembers)[ >].*$" "" text "${text}")
    string(REGEX REPLACE "<[^>]*>" "" text "${text}")
    string(STRIP "${text}" text)
  endif()
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()

# Runs doxygen on the project's Doxyfile with `overrides` (a list of
# "TAG = value" lines) appended. Sets <prefix>_rc and <prefix>_out (stdout+stderr).
function(run_doxygen prefix dir overrides)
  file(REMOVE_RECURSE "${dir}")
  file(MAKE_DIRECTORY "${dir}")
  set(cfg "@INCLUDE = \"${DOXYFILE}\"\nOUTPUT_DIRECTORY = \"${dir}\"\n")
  foreach(line IN LISTS overrides)
    string(APPEND cfg "${line}\n")
  endforeach()
  file(WRITE "${dir}/Doxyfile" "${cfg}")
  execute_process(COMMAND "${DOXYGEN}" "${dir}/Doxyfile" WORKING_DIRECTORY "${SOURCE_DIR}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  set(${prefix}_rc "${rc}" PARENT_SCOPE)
  set(${prefix}_out "${out}" PARENT_SCOPE)
endfunction()

# The enum values in Doxygen's XML output (under xml_dir) that have neither a
# brief nor a detailed description, as "enum::value" in <out_var>.
function(undocumented_enum_values xml_dir out_var)
  set(missing "")
  file(GLOB xml_files "${xml_dir}/*.xml")
  foreach(f IN LISTS xml_files)
    file(READ "${f}" xml)
    while(TRUE)
      string(FIND "${xml}" "<enumvalue " start)
      if(start EQUAL -1)
        break()
      endif()
      string(SUBSTRING "${xml}" ${start} -1 xml)
      string(FIND "${xml}" "</enumvalue>" stop)
      if(stop EQUAL -1)
        break()
      endif()
      string(SUBSTRING "${xml}" 0 ${stop} value)
      string(SUBSTRING "${xml}" ${stop} -1 xml)
      string(REGEX MATCH "<name>([^<]*)</name>" _ "${value}")
      set(name "${CMAKE_MATCH_1}")
      # Text inside the descriptions, tags and whitespace removed.
      string(REGEX REPLACE "^.*<briefdescription>" "" text "${value}")
      string(REGEX REPLACE "<[^>]*>" "" text "${text}")
      string(STRIP "${text}" text)
      if(text STREQUAL "")
        get_filename_component(compound "${f}" NAME_WE)
        list(APPEND missing "${name} (${compound}.xml)")
      endif()
    endwhile()
  endforeach()
  set(${out_var} "${missing}" PARENT_SCOPE)
endfunction()

if(MODE STREQUAL "check")
  run_doxygen(doc "${WORK_DIR}/docs" "GENERATE_XML = YES")
  string(STRIP "${doc_out}" doc_out)
  if(NOT doc_rc EQUAL 0 OR NOT doc_out STREQUAL "")
    message(FATAL_ERROR "Doxygen failed (exit ${doc_rc}); every public item needs a doc comment "
                        "and no warning is allowed:\n${doc_out}")
  endif()
  undocumented_enum_values("${WORK_DIR}/docs/xml" missing)
  if(missing)
    string(REPLACE ";" "\n  " missing "${missing}")
    message(FATAL_ERROR "enum values without a doc comment (///< ...):\n  ${missing}")
  endif()
  if(NOT EXISTS "${WORK_DIR}/docs/html/index.html")
    message(FATAL_ERROR "Doxygen wrote no ${WORK_DIR}/docs/html/index.html")
  endif()
  # Each header's @file comment, and namespace tickwheel's: without them
  # Doxygen silently drops (and does not warn about) what they contain.
  set(problems "")
  file(GLOB headers RELATIVE "${SOURCE_DIR}/include/tickwheel"
       "${SOURCE_DIR}/include/tickwheel/*.h" "${SOURCE_DIR}/include/tickwheel/*.hpp")
  set(compounds namespacetickwheel)
  foreach(h IN LISTS headers)  # Doxygen's file names: runtime.hpp -> runtime_8hpp
    string(REPLACE "_" "__" h "${h}")
    string(REPLACE "." "_8" h "${h}")
    list(APPEND compounds "${h}")
  endforeach()
  foreach(compound IN LISTS compounds)
    set(f "${WORK_DIR}/docs/xml/${compound}.xml")
    if(NOT EXISTS "${f}")
      list(APPEND problems "${compound}.xml missing: is the header (or namespace) documented?")
      continue()
    endif()
    file(READ "${f}" xml)
    compound_description("${xml}" text)
    if(text STREQUAL "")
      list(APPEND problems "${compound}: no description (/// @file or a namespace comment)")
    endif()
  endforeach()
  # Every function and macro of the C API made it into the reference.
  file(READ "${SOURCE_DIR}/include/tickwheel/tickwheel.h" h)
  string(REGEX MATCHALL "\n(TW_API|static inline) [^\n(]*[ *]tw_[a-z0-9_]+\\(" fns "${h}")
  string(REGEX MATCHALL "\n#[ ]*define[ ]+TW_[A-Z0-9_]+" macros "${h}")
  set(names "")
  foreach(m IN LISTS fns macros)
    string(REGEX MATCH "(tw_[a-z0-9_]+|TW_[A-Z0-9_]+)[(]?$" _ "${m}")
    list(APPEND names "${CMAKE_MATCH_1}")
  endforeach()
  list(REMOVE_DUPLICATES names)
  if(EXISTS "${WORK_DIR}/docs/xml/tickwheel_8h.xml")
    file(READ "${WORK_DIR}/docs/xml/tickwheel_8h.xml" xml)
    foreach(n IN LISTS names)
      string(FIND "${xml}" "<name>${n}</name>" at)
      if(at EQUAL -1)
        list(APPEND problems "${n} (tickwheel.h) is not in the reference")
      endif()
    endforeach()
  endif()
  list(LENGTH names n_names)
  if(problems)
    string(REPLACE ";" "\n  " problems "${problems}")
    message(FATAL_ERROR "API reference incomplete:\n  ${problems}")
  endif()
  string(REPLACE ";" " " headers "${headers}")
  message(STATUS "API reference: no warning; every enum value documented; headers ${headers} and "
                 "namespace tickwheel described; ${n_names} tw_*/TW_* names of tickwheel.h present "
                 "(${WORK_DIR}/docs/html/index.html)")

elseif(MODE STREQUAL "selftest")
  set(copy "${WORK_DIR}/selftest-src/tickwheel")
  file(REMOVE_RECURSE "${WORK_DIR}/selftest-src")
  file(MAKE_DIRECTORY "${copy}")

  # 1. tickwheel.h without the doc comment of tw_timer_reset(): Doxygen must fail.
  file(READ "${SOURCE_DIR}/include/tickwheel/tickwheel.h" h)
  string(FIND "${h}" "TW_API int tw_timer_reset(" decl)
  if(decl EQUAL -1)
    message(FATAL_ERROR "selftest: tw_timer_reset() not found in tickwheel.h: update check_docs.cmake")
  endif()
  string(SUBSTRING "${h}" 0 ${decl} before)
  string(FIND "${before}" "/**" doc REVERSE)
  string(SUBSTRING "${h}" 0 ${doc} head)
  string(SUBSTRING "${h}" ${decl} -1 tail)
  file(WRITE "${copy}/tickwheel.h" "${head}${tail}")
  run_doxygen(h "${WORK_DIR}/selftest-h" "INPUT = \"${copy}/tickwheel.h\";GENERATE_HTML = NO;GENERATE_XML = YES")
  if(h_rc EQUAL 0 OR NOT h_out MATCHES "tw_timer_reset")
    message(FATAL_ERROR "selftest: Doxygen did not fail on an undocumented tw_timer_reset() "
                        "(exit ${h_rc}):\n${h_out}")
  endif()
  message(STATUS "selftest: an undocumented function fails Doxygen (exit ${h_rc}):\n${h_out}")

  # 2. runtime.hpp without the comment of errc::forked: the enum check must name it.
  file(READ "${SOURCE_DIR}/include/tickwheel/runtime.hpp" r)
  string(REGEX MATCH "\n( *forked = [0-9]+,)[^\n]*" line "${r}")
  if(NOT line)
    message(FATAL_ERROR "selftest: errc::forked not found in runtime.hpp: update check_docs.cmake")
  endif()
  string(REPLACE "${line}" "\n${CMAKE_MATCH_1}" r "${r}")
  file(WRITE "${copy}/runtime.hpp" "${r}")
  run_doxygen(r "${WORK_DIR}/selftest-r" "INPUT = \"${copy}/runtime.hpp\";GENERATE_HTML = NO;GENERATE_XML = YES")
  undocumented_enum_values("${WORK_DIR}/selftest-r/xml" missing)
  if(NOT missing MATCHES "forked")
    message(FATAL_ERROR "selftest: the enum check did not report errc::forked without a comment "
                        "(found: '${missing}'); Doxygen said:\n${r_out}")
  endif()
  message(STATUS "selftest: an undocumented enum value is reported: ${missing}")
else()
  message(FATAL_ERROR "check_docs.cmake: MODE must be check or selftest, not '${MODE}'")
endif()
