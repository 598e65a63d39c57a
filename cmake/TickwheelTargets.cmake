# SPDX-License-Identifier: MIT OR Apache-2.0
# Usage requirements of the two libraries, the same in the build tree
# (add_subdirectory, FetchContent) and in the installed CMake package:
#   tickwheel::tickwheel         libtickwheel.so.1    (target tickwheel_shared)
#   tickwheel::tickwheel_static  libtickwheel.a       (target tickwheel)
# Both carry the C API (tickwheel.h) and the C++ API (runtime.hpp, C++20).

# The name users write, as in the installed package: the shared library.
add_library(tickwheel::tickwheel ALIAS tickwheel_shared)

# C++ consumers compile with at least C++20 (runtime.hpp needs it). A C-only
# consumer is unaffected: CMake applies a cxx_std_* feature to C++ sources
# only (test cmake_consumer_c_only).
target_compile_features(tickwheel INTERFACE cxx_std_20)
target_compile_features(tickwheel_shared INTERFACE cxx_std_20)

# The static library is C++: a program linked by the C driver (a C-only
# project, `project(app C)`, has no C++ linker to choose) must also link the
# C++ runtime. These are the libraries the C++ driver adds over the C one
# (libstdc++ and libm with g++ or clang on Debian), added only when the
# consumer's link is not a C++ one.
set(_tw_cxx_runtime "")
foreach(_lib IN LISTS CMAKE_CXX_IMPLICIT_LINK_LIBRARIES)
  if(NOT _lib IN_LIST CMAKE_C_IMPLICIT_LINK_LIBRARIES AND NOT _lib IN_LIST _tw_cxx_runtime)
    list(APPEND _tw_cxx_runtime ${_lib})
  endif()
endforeach()
if(NOT _tw_cxx_runtime)
  set(_tw_cxx_runtime stdc++ m)  # the C++ implicit libraries were not detected
endif()
set(TICKWHEEL_CXX_RUNTIME_LIBS "${_tw_cxx_runtime}" CACHE INTERNAL
    "Libraries a C link of libtickwheel.a adds (the C++ runtime)")
target_link_libraries(tickwheel INTERFACE "$<$<NOT:$<LINK_LANGUAGE:CXX>>:${_tw_cxx_runtime}>")
