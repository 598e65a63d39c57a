# SPDX-License-Identifier: MIT OR Apache-2.0
# Runs Doxygen with docs/Doxyfile.man.in's configuration (DOXYFILE), then
# tidies its man3 output in OUT/man3 (cmake/TickwheelMan.cmake):
#  * keeps only the name links of the API (tw_*, TW_*): Doxygen's MAN_LINKS
#    also writes one per struct field (arg.3, flags.3, size.3, ...), names
#    that would clash with other packages' pages;
#  * turns each kept link (a file holding ".so man3/<page>") into a relative
#    symlink, which `man -l`, man's search and dpkg all follow;
#  * escapes text lines that begin with "'" (troff's no-break control
#    character: a '\n' in a comment starts such a line);
#  * adds tickwheel.3 -> tickwheel.h.3.
# Usage: cmake -DDOXYGEN=... -DDOXYFILE=... -DOUT=... -P tickwheel_man.cmake
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE "${OUT}/man3")
file(REMOVE "${OUT}/man3.stamp")
execute_process(COMMAND "${DOXYGEN}" "${DOXYFILE}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "doxygen ${DOXYFILE} failed (${rc})")
endif()
set(dir "${OUT}/man3")
if(NOT EXISTS "${dir}/tickwheel.h.3")
  message(FATAL_ERROR "doxygen wrote no ${dir}/tickwheel.h.3")
endif()
file(GLOB pages RELATIVE "${dir}" "${dir}/*.3")
set(kept 0)
foreach(p IN LISTS pages)
  file(STRINGS "${dir}/${p}" first LIMIT_COUNT 1)
  if(first MATCHES "^\\.so man3/(.+)$")
    set(target "${CMAKE_MATCH_1}")
    file(REMOVE "${dir}/${p}")
    if(p MATCHES "^(tw_|TW_)" AND EXISTS "${dir}/${target}")
      file(CREATE_LINK "${target}" "${dir}/${p}" SYMBOLIC)
      math(EXPR kept "${kept} + 1")
    endif()
  else()
    file(READ "${dir}/${p}" text)
    string(REGEX REPLACE "\n'" "\n\\\\&'" text "${text}")
    file(WRITE "${dir}/${p}" "${text}")
  endif()
endforeach()
file(CREATE_LINK "tickwheel.h.3" "${dir}/tickwheel.3" SYMBOLIC)
file(TOUCH "${OUT}/man3.stamp")
message(STATUS "man pages: ${dir} (${kept} name links)")
