# SPDX-License-Identifier: MIT OR Apache-2.0
# Usage requirements of the two libraries, the same in the build tree
# (add_subdirectory, FetchContent) and in the installed CMake package:
#   tickwheel::tickwheel         libtickwheel.so.1    (target tickwheel_shared)
#   tickwheel::tickwheel_static  libtickwheel.a       (target tickwheel)
# Both carry the C API (tickwheel.h) and the C++ API (runtime.hpp, C++20).

# The name users write, as in the installed package: the shared library.
add_library(tickwheel::tickwheel ALIAS tickwheel_shared)

# C++ consumers compile with at least C++20 (runtime.hpp needs it). The
# installed targets always say so: a C-only project that imports them (C++
# not enabled) ignores it (capi_consumer_cmake's c_only). In the build tree,
# under a C-only top-level project (project(app C) + add_subdirectory), the
# consumer's directories know no C++ compiler and CMake would refuse the
# feature ("No known features for CXX compiler"): there, C++ programs of
# that project set their standard themselves (cmake_consumer_subdirectory).
get_directory_property(_tw_top_cxx DIRECTORY ${CMAKE_SOURCE_DIR} DEFINITION CMAKE_CXX_COMPILE_FEATURES)
if(PROJECT_IS_TOP_LEVEL OR _tw_top_cxx)
  set(_tw_cxx_feature cxx_std_20)
else()
  set(_tw_cxx_feature $<INSTALL_INTERFACE:cxx_std_20>)
endif()
target_compile_features(tickwheel INTERFACE ${_tw_cxx_feature})
target_compile_features(tickwheel_shared INTERFACE ${_tw_cxx_feature})

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
