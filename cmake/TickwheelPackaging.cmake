# SPDX-License-Identifier: MIT OR Apache-2.0
# Installation: headers, both libraries, a CMake package and a pkg-config file.
#
#   find_package(tickwheel CONFIG)  ->  tickwheel::tickwheel         libtickwheel.so.1 (C and C++ API)
#                                       tickwheel::tickwheel_static  libtickwheel.a (C and C++
#                                                                    API; brings oneTBB)
#   pkg-config tickwheel            ->  -I<includedir> -pthread / -L<libdir> -ltickwheel -pthread
#                                       (--static adds oneTBB, libstdc++, libm)
#   pkg-config tickwheel-static     ->  -I<includedir> -pthread / -L<libdir> -l:libtickwheel.a
#                                       -pthread -lstdc++ -lm -ltbb (a C or C++ program)
#   cmake --build <dir> --target uninstall   removes what `cmake --install <dir>` installed
#
# The shared library exports the C API (include/tickwheel/tickwheel.h,
# symbol version TICKWHEEL_1) and the C++ API's entry points
# (tickwheel/runtime.hpp, TICKWHEEL_CXX_1); see capi/tickwheel.map.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TICKWHEEL_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/tickwheel"
    CACHE STRING "Where to install tickwheel's CMake package files (relative to the prefix)")
mark_as_advanced(TICKWHEEL_INSTALL_CMAKEDIR)

install(TARGETS tickwheel tickwheel_shared
  EXPORT tickwheelTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT tickwheel_devel
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT tickwheel_runtime
          NAMELINK_COMPONENT tickwheel_devel
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/tickwheel
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT tickwheel_devel
  FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")

install(EXPORT tickwheelTargets
  NAMESPACE tickwheel::
  DESTINATION ${TICKWHEEL_INSTALL_CMAKEDIR}
  COMPONENT tickwheel_devel)
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/tickwheelConfig.cmake.in
  ${PROJECT_BINARY_DIR}/packaging/tickwheelConfig.cmake
  INSTALL_DESTINATION ${TICKWHEEL_INSTALL_CMAKEDIR})
# 0.x releases: only the same minor version is compatible; from 1.0 on the
# same major (the C ABI major is the SONAME's, libtickwheel.so.1).
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(_tw_compat SameMinorVersion)
else()
  set(_tw_compat SameMajorVersion)
endif()
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/packaging/tickwheelConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${_tw_compat})
install(FILES
  ${PROJECT_BINARY_DIR}/packaging/tickwheelConfig.cmake
  ${PROJECT_BINARY_DIR}/packaging/tickwheelConfigVersion.cmake
  DESTINATION ${TICKWHEEL_INSTALL_CMAKEDIR}
  COMPONENT tickwheel_devel)

# pkg-config. The .pc file locates the prefix relative to itself
# (${pcfiledir}), so `cmake --install --prefix <anywhere>` yields a working
# file; an absolute CMAKE_INSTALL_LIBDIR/INCLUDEDIR is used as is.
set(_tw_pc_dir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(TICKWHEEL_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(TICKWHEEL_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH _tw_up "/_tw_/${_tw_pc_dir}" "/_tw_")
  string(REGEX REPLACE "/$" "" _tw_up "${_tw_up}")
  set(TICKWHEEL_PC_PREFIX "\${pcfiledir}/${_tw_up}")
  set(TICKWHEEL_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(TICKWHEEL_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(TICKWHEEL_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/tickwheel.pc.in ${PROJECT_BINARY_DIR}/packaging/tickwheel.pc @ONLY)
# tickwheel-static.pc: the static library alone, everything it needs in Libs
# and Requires (so `pkg-config --libs` and `--static --libs` both work, for a
# C program too): -l:libtickwheel.a picks the archive over the .so next to
# it, then the C++ runtime (TickwheelTargets' TICKWHEEL_CXX_RUNTIME_LIBS).
set(TICKWHEEL_PC_CXX_RUNTIME "")
foreach(_lib IN LISTS TICKWHEEL_CXX_RUNTIME_LIBS)
  if(_lib MATCHES "^-" OR IS_ABSOLUTE "${_lib}")
    string(APPEND TICKWHEEL_PC_CXX_RUNTIME " ${_lib}")
  else()
    string(APPEND TICKWHEEL_PC_CXX_RUNTIME " -l${_lib}")
  endif()
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/cmake/tickwheel-static.pc.in
               ${PROJECT_BINARY_DIR}/packaging/tickwheel-static.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/packaging/tickwheel.pc ${PROJECT_BINARY_DIR}/packaging/tickwheel-static.pc
  DESTINATION ${_tw_pc_dir}
  COMPONENT tickwheel_devel)

# uninstall: removes every file listed in install_manifest.txt (written by
# the last `cmake --install` of this build tree), then the directories of
# tickwheel's own that are left empty. After a system install run ldconfig
# afterwards, as after the install. Only when tickwheel is the top-level
# project (a consumer's `uninstall` is its own).
if(PROJECT_IS_TOP_LEVEL AND NOT TARGET uninstall)
  add_custom_target(uninstall
    COMMAND ${CMAKE_COMMAND} -DMANIFEST=${PROJECT_BINARY_DIR}/install_manifest.txt
            -P ${PROJECT_SOURCE_DIR}/cmake/tickwheel_uninstall.cmake
    COMMENT "Removing the files listed in ${PROJECT_BINARY_DIR}/install_manifest.txt"
    VERBATIM)
endif()
