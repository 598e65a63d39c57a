# SPDX-License-Identifier: MIT OR Apache-2.0
# The `uninstall` target: cmake -DMANIFEST=<build>/install_manifest.txt -P tickwheel_uninstall.cmake
# Removes every file (or symlink) the last `cmake --install` of that build
# tree installed, then each directory of tickwheel's own (named tickwheel*,
# or include/tickwheel/detail) that is left empty. Shared directories
# (lib, include, share/man/man3, ...) stay. Files already gone are reported,
# not an error; a file that cannot be removed is.
cmake_minimum_required(VERSION 3.25)
if(NOT MANIFEST OR NOT EXISTS "${MANIFEST}")
  message(FATAL_ERROR "uninstall: ${MANIFEST} not found: nothing was installed from this build tree "
                      "(cmake --install writes it)")
endif()
file(STRINGS "${MANIFEST}" files)
set(dirs "")
set(removed 0)
foreach(f IN LISTS files)
  if(f STREQUAL "")
    continue()
  endif()
  if(EXISTS "${f}" OR IS_SYMLINK "${f}")
    message(STATUS "Uninstalling: ${f}")
    file(REMOVE "${f}")
    if(EXISTS "${f}" OR IS_SYMLINK "${f}")
      message(FATAL_ERROR "uninstall: could not remove ${f} (permissions? a system install needs sudo)")
    endif()
    math(EXPR removed "${removed} + 1")
  else()
    message(STATUS "Not installed (already gone): ${f}")
  endif()
  get_filename_component(d "${f}" DIRECTORY)
  list(APPEND dirs "${d}")
endforeach()
list(REMOVE_DUPLICATES dirs)
# Deepest first, so include/tickwheel/detail goes before include/tickwheel.
list(SORT dirs ORDER DESCENDING)
foreach(d IN LISTS dirs)
  while(IS_DIRECTORY "${d}")
    get_filename_component(name "${d}" NAME)
    if(NOT name MATCHES "^tickwheel" AND NOT d MATCHES "/tickwheel/detail$")
      break()
    endif()
    file(GLOB left "${d}/*" "${d}/.*")
    if(left)
      break()
    endif()
    message(STATUS "Removing empty directory: ${d}")
    file(REMOVE "${d}")
    file(REMOVE_RECURSE "${d}")  # an empty directory
    get_filename_component(d "${d}" DIRECTORY)
  endwhile()
endforeach()
message(STATUS "uninstall: removed ${removed} files listed in ${MANIFEST}")
