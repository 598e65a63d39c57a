# SPDX-License-Identifier: MIT OR Apache-2.0
# Builds the documentation site (docs/site) -- the CMake target `docs` and
# the ctest docs_site both run this script:
#   1. Doxygen over the public headers, XML only (the Doxyfile of the API
#      reference, with TYPEDEF_HIDES_STRUCT so that `typedef struct tw_x {...}
#      tw_x;` is one C declaration for Breathe), into OUT/doxygen/xml;
#   2. sphinx-build (MyST Markdown, Breathe, the furo theme) with warnings as
#      errors (-W --keep-going) into OUT/html.
#
#   cmake -DDOXYGEN=... -DDOXYFILE=<build>/docs/Doxyfile -DSPHINX_BUILD=...
#         -DSOURCE_DIR=<source root> -DOUT=<build>/docs/site -DVERSION=x.y.z
#         [-DSKIP_MISSING=ON] -P build_site.cmake
# With SKIP_MISSING (the ctest), a missing tool prints "TW-SKIP: ..." and
# succeeds; without it (the target) it fails with the package to install.
cmake_minimum_required(VERSION 3.25)

include(${CMAKE_CURRENT_LIST_DIR}/../capi/script_run.cmake)  # tw_require_exists()
set(_missing "")
if(NOT DOXYGEN OR NOT EXISTS "${DOXYGEN}")
  list(APPEND _missing "doxygen (apt-get install doxygen)")
endif()
if(NOT SPHINX_BUILD OR NOT EXISTS "${SPHINX_BUILD}")
  list(APPEND _missing "sphinx-build (apt-get install python3-sphinx python3-myst-parser python3-breathe furo)")
endif()
if(_missing)
  string(REPLACE ";" ", " _missing "${_missing}")
  if(SKIP_MISSING)
    message("TW-SKIP: the documentation site is not built: missing ${_missing}")
    return()
  endif()
  message(FATAL_ERROR "the documentation site needs ${_missing}")
endif()

file(REMOVE_RECURSE "${OUT}/doxygen")
file(MAKE_DIRECTORY "${OUT}/doxygen")
file(WRITE "${OUT}/doxygen/Doxyfile"
  "@INCLUDE = \"${DOXYFILE}\"\n"
  "OUTPUT_DIRECTORY = \"${OUT}/doxygen\"\n"
  "GENERATE_HTML = NO\n"
  "GENERATE_XML = YES\n"
  "TYPEDEF_HIDES_STRUCT = YES\n")
execute_process(COMMAND "${DOXYGEN}" "${OUT}/doxygen/Doxyfile" WORKING_DIRECTORY "${SOURCE_DIR}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "Doxygen (XML for the site) failed (exit ${rc}):\n${out}")
endif()

# Breathe 4.34 renders Doxygen's <ndash/> and <mdash/> (from "--" and "---"
# in the comments) as a literal "&#8212;": put the characters in their place.
file(GLOB _xml "${OUT}/doxygen/xml/*.xml")
foreach(f IN LISTS _xml)
  file(READ "${f}" x)
  string(FIND "${x}" "dash/>" at)
  if(NOT at EQUAL -1)
    string(REPLACE "<ndash/>" "–" x "${x}")
    string(REPLACE "<mdash/>" "—" x "${x}")
    file(WRITE "${f}" "${x}")
  endif()
endforeach()

# A fresh build each time: Sphinx's incremental build does not re-read pages
# whose Doxygen input changed, and would not repeat their warnings.
file(REMOVE_RECURSE "${OUT}/html" "${OUT}/doctrees")
execute_process(
  COMMAND "${CMAKE_COMMAND}" -E env "TW_DOXYGEN_XML=${OUT}/doxygen/xml" "TW_VERSION=${VERSION}"
          "PYTHONDONTWRITEBYTECODE=1"
          "${SPHINX_BUILD}" -W --keep-going -q -b html -d "${OUT}/doctrees"
          "${SOURCE_DIR}/docs/site" "${OUT}/html"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "sphinx-build failed (exit ${rc}); every warning is an error:\n${out}")
endif()
tw_require_exists("${OUT}/html/index.html" "sphinx-build wrote no ${OUT}/html/index.html")
message(STATUS "documentation site: ${OUT}/html/index.html (no warning)")
