# SPDX-License-Identifier: MIT OR Apache-2.0
# ctest capi_header_includes: tickwheel.h includes only <stdint.h> and <stddef.h>
# and mentions no C++-only or bool type outside its C++ guards.
# Usage: cmake -DHEADER=<tickwheel.h> -P check_header.cmake
file(STRINGS "${HEADER}" lines)
set(errors "")
foreach(line IN LISTS lines)
  if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*(.*)$")
    set(inc "${CMAKE_MATCH_1}")
    if(NOT inc MATCHES "^<(stdint|stddef)\\.h>")
      string(APPEND errors "  forbidden include: ${line}\n")
    endif()
  endif()
  # Declarations only (comments stripped): no bool / _Bool / C++ types.
  string(REGEX REPLACE "/\\*.*\\*/" "" code "${line}")
  string(REGEX REPLACE "^[ \t]*\\*.*" "" code "${code}")
  if(code MATCHES "(^|[^A-Za-z_])(bool|_Bool|std::|class|template|namespace)([^A-Za-z_]|$)")
    string(APPEND errors "  C++/bool in the interface: ${line}\n")
  endif()
endforeach()
if(errors)
  message(FATAL_ERROR "${HEADER}:\n${errors}")
endif()
message(STATUS "tickwheel.h: includes only <stdint.h>/<stddef.h>, no bool or C++ type")
