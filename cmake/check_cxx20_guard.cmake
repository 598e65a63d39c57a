# SPDX-License-Identifier: MIT OR Apache-2.0
# ctest cxx20_header_guard: every C++ header of include/tickwheel (*.hpp),
# included by a C++17 translation unit and by a C one, must fail with exactly
# one diagnostic, its own #error naming C++20 -- not a wall of template
# errors -- and compile cleanly as C++20.
# Arguments: CXX CC INCLUDE WORK
cmake_minimum_required(VERSION 3.25)
file(GLOB_RECURSE headers RELATIVE "${INCLUDE}" "${INCLUDE}/tickwheel/*.hpp")
if(NOT headers)
  message(FATAL_ERROR "no C++ headers under ${INCLUDE}/tickwheel")
endif()
file(MAKE_DIRECTORY "${WORK}")
foreach(h IN LISTS headers)
  string(MAKE_C_IDENTIFIER "${h}" id)
  file(WRITE "${WORK}/${id}.cpp" "#include <${h}>\nint main() { return 0; }\n")
  file(WRITE "${WORK}/${id}.c" "#include <${h}>\nint main(void) { return 0; }\n")
  foreach(variant "cxx17;${CXX};-std=c++17;${WORK}/${id}.cpp" "c11;${CC};-std=c11;${WORK}/${id}.c")
    list(GET variant 0 what)
    list(GET variant 1 compiler)
    list(GET variant 2 std)
    list(GET variant 3 src)
    execute_process(COMMAND "${compiler}" ${std} -fsyntax-only -I "${INCLUDE}" "${src}"
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    string(REPLACE ";" "," err "${err}")  # a list below
    string(REGEX MATCHALL ": (fatal )?error: [^\n]*" errors "${err}")
    list(LENGTH errors n)
    if(rc EQUAL 0 OR NOT n EQUAL 1 OR NOT err MATCHES "#error[^\n]*C\\+\\+20")
      message(FATAL_ERROR "${h} as ${what}: expected exactly one error, its #error naming C++20; got "
                          "${n} (exit ${rc}):\n${err}")
    endif()
    message(STATUS "${h} as ${what}: one error:${errors}")
  endforeach()
  execute_process(COMMAND "${CXX}" -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I "${INCLUDE}" "${WORK}/${id}.cpp"
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${h} does not compile as C++20:\n${err}")
  endif()
endforeach()
list(LENGTH headers n)
message(STATUS "OK: ${n} C++ headers stop below C++20 with one #error, and compile as C++20")
