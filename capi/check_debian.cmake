# SPDX-License-Identifier: MIT OR Apache-2.0
# ctest debian_packages: build the Debian packages from a copy of the source
# tree and use them.
#   1. copy the working tree's files (git ls-files: tracked + untracked, not
#      ignored; no build directories) to WORK/tickwheel-<version>/
#   2. dpkg-buildpackage -b -us -uc there (debian/rules builds the library
#      only; DPKG_GENSYMBOLS_CHECK_LEVEL=2 also fails on tw_* symbols missing
#      from debian/libtickwheel1.symbols)
#   3. check the three .debs: contents, control fields, symbols/shlibs (the
#      man pages in libtickwheel-dev, the HTML reference and its doc-base
#      registration in libtickwheel-doc); dpkg -x them into WORK/root and
#      check SONAME, symlinks, headers, CMake package, .pc files; `man -l`
#      the unpacked tw_timer_start(3) page
#   4. build tests/capi_consumer against WORK/root/usr with CMake
#      (CMAKE_PREFIX_PATH; also tests/capi_consumer/c_only, a C-only
#      project linking both targets) and with pkg-config (tickwheel.pc, and
#      tickwheel-static.pc for a static C program); run the programs with
#      LD_LIBRARY_PATH=WORK/root/usr/lib/<multiarch>; ldd must show that
#      root's libtickwheel.so.1
#   5. lintian on the .changes (if installed): no errors or warnings
# Skips ("TW-SKIP:") when dpkg-buildpackage, debhelper or a build dependency
# is missing (scripts/setup.sh --test installs them).
#
# Arguments: SOURCE_DIR WORK CC CXX GENERATOR MAKE_PROGRAM PKG_CONFIG READELF
cmake_minimum_required(VERSION 3.25)

include(${CMAKE_CURRENT_LIST_DIR}/script_run.cmake)  # run()

function(must_exist path)
  if(NOT EXISTS "${path}" AND NOT IS_SYMLINK "${path}")
    message(FATAL_ERROR "missing: ${path}")
  endif()
endfunction()

# ---- tools ---------------------------------------------------------------------
foreach(tool dpkg-buildpackage dpkg-checkbuilddeps dpkg-parsechangelog dpkg-architecture dpkg-deb dpkg dh)
  string(MAKE_C_IDENTIFIER "${tool}" var)
  find_program(TOOL_${var} ${tool})
  if(NOT TOOL_${var})
    message("TW-SKIP: ${tool} not found (apt-get install dpkg-dev debhelper, or scripts/setup.sh --test)")
    return()
  endif()
endforeach()
find_program(GIT git)
find_program(LDD ldd)
find_program(LINTIAN lintian)
if(NOT READELF)
  find_program(READELF readelf)
endif()

run(${TOOL_dpkg_parsechangelog} -l "${SOURCE_DIR}/debian/changelog" -SVersion)
string(STRIP "${run_out}" version)               # 1.0.0-1
string(REGEX REPLACE "-[^-]*$" "" upstream "${version}")
run(${TOOL_dpkg_architecture} -qDEB_HOST_ARCH)
string(STRIP "${run_out}" arch)
run(${TOOL_dpkg_architecture} -qDEB_HOST_MULTIARCH)
string(STRIP "${run_out}" multiarch)

# ---- 1. copy the source tree -------------------------------------------------------
file(REMOVE_RECURSE "${WORK}")
set(src "${WORK}/tickwheel-${upstream}")
file(MAKE_DIRECTORY "${src}")
set(use_git FALSE)
if(GIT AND EXISTS "${SOURCE_DIR}/.git")
  execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" -c core.quotePath=false
                          ls-files --cached --others --exclude-standard
                  RESULT_VARIABLE rc OUTPUT_VARIABLE files ERROR_VARIABLE err)
  if(rc EQUAL 0)
    set(use_git TRUE)
  else()
    message("git ls-files failed (${err}): copying the directory instead")
  endif()
endif()
if(use_git)
  # git quotes a name with '"', '\\' or control characters; ';' separates CMake lists.
  if(files MATCHES ";" OR files MATCHES "(^|\n)\"")
    message(FATAL_ERROR "a file name in the source tree has ';', '\"', '\\' or a control character: "
                        "this copy cannot handle it")
  endif()
  string(REGEX REPLACE "\n$" "" files "${files}")
  string(REPLACE "\n" ";" files "${files}")
  set(dirs "")
  set(count 0)
  foreach(f IN LISTS files)
    # Never a build tree or dpkg-buildpackage's output left in the source root.
    if(f MATCHES "^(build|build-[^/]*|obj-[^/]*)/" OR f MATCHES "^debian/(tmp|\\.debhelper|libtickwheel[^/]*)/")
      continue()
    endif()
    if(NOT EXISTS "${SOURCE_DIR}/${f}" AND NOT IS_SYMLINK "${SOURCE_DIR}/${f}")
      continue()  # deleted in the working tree
    endif()
    get_filename_component(d "${f}" DIRECTORY)
    string(MAKE_C_IDENTIFIER "d_${d}" key)
    if(NOT DEFINED ${key})
      list(APPEND dirs "${d}")
    endif()
    list(APPEND ${key} "${SOURCE_DIR}/${f}")
    math(EXPR count "${count} + 1")
  endforeach()
  foreach(d IN LISTS dirs)
    string(MAKE_C_IDENTIFIER "d_${d}" key)
    file(COPY ${${key}} DESTINATION "${src}/${d}")
  endforeach()
  message(STATUS "copied ${count} files (git ls-files of the working tree) to ${src}")
else()
  file(COPY "${SOURCE_DIR}/" DESTINATION "${src}"
       REGEX "^${SOURCE_DIR}/(build|build-[^/]*|obj-[^/]*|\\.git|bindings/rust/target)$" EXCLUDE)
  message(STATUS "copied ${SOURCE_DIR} (not a git checkout) to ${src}")
endif()
must_exist("${src}/debian/rules")

# ---- 2. dpkg-buildpackage ------------------------------------------------------------
execute_process(COMMAND ${TOOL_dpkg_checkbuilddeps} WORKING_DIRECTORY "${src}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message("TW-SKIP: build dependencies of the Debian package missing:\n${out}${err}")
  return()
endif()

set(opts "$ENV{DEB_BUILD_OPTIONS}")
if(NOT opts MATCHES "parallel=")
  string(STRIP "${opts} parallel=2" opts)
endif()
set(log "${WORK}/dpkg-buildpackage.log")
message(STATUS "dpkg-buildpackage -b -us -uc in ${src} (DEB_BUILD_OPTIONS='${opts}'), log: ${log}")
string(TIMESTAMP t0 "%s")
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env "DEB_BUILD_OPTIONS=${opts}" DPKG_GENSYMBOLS_CHECK_LEVEL=2
          ${TOOL_dpkg_buildpackage} -b -us -uc
  WORKING_DIRECTORY "${src}" RESULT_VARIABLE rc OUTPUT_FILE "${log}" ERROR_FILE "${log}")
string(TIMESTAMP t1 "%s")
math(EXPR dt "${t1} - ${t0}")
file(READ "${log}" buildlog)
if(NOT rc EQUAL 0)
  string(LENGTH "${buildlog}" n)
  if(n GREATER 12000)
    math(EXPR from "${n} - 12000")
    string(SUBSTRING "${buildlog}" ${from} -1 buildlog)
    set(buildlog "[...]\n${buildlog}")
  endif()
  message("${buildlog}")
  if(buildlog MATCHES "new symbols appeared")
    message(FATAL_ERROR "dpkg-buildpackage failed: the library exports symbols that "
      "debian/libtickwheel1.symbols does not list (see the diff above: add each '+' line, "
      "with the Debian version of the first release exporting it)")
  endif()
  message(FATAL_ERROR "dpkg-buildpackage failed (${rc}) after ${dt} s; full log: ${log}")
endif()
string(REGEX MATCH "consumer: OK[^\n]*" smoke "${buildlog}")
if(NOT smoke AND NOT opts MATCHES "(^| )nocheck( |$)")
  message(FATAL_ERROR "dpkg-buildpackage passed, but its log lacks dh_auto_test's \"consumer: OK\" (${log})")
endif()
message(STATUS "dpkg-buildpackage done in ${dt} s; dh_auto_test smoke: ${smoke}")

set(rt_deb "${WORK}/libtickwheel1_${version}_${arch}.deb")
set(dev_deb "${WORK}/libtickwheel-dev_${version}_${arch}.deb")
set(doc_deb "${WORK}/libtickwheel-doc_${version}_all.deb")
set(changes "${WORK}/tickwheel_${version}_${arch}.changes")
must_exist("${rt_deb}")
must_exist("${dev_deb}")
must_exist("${doc_deb}")
must_exist("${changes}")

# ---- 3. the packages -------------------------------------------------------------------
set(libdir "usr/lib/${multiarch}")
# dpkg-deb -c: the non-directory entries of a package, one per list item.
function(deb_files deb outvar)
  run(${TOOL_dpkg_deb} -c "${deb}")
  string(REPLACE "\n" ";" lines "${run_out}")
  set(paths "")
  foreach(l IN LISTS lines)
    if(l MATCHES "^[-l][^ ]* .* \\./([^ ]+)( -> .*)?$")
      list(APPEND paths "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  set(${outvar} "${paths}" PARENT_SCOPE)
endfunction()

# libtickwheel1: the shared library, its documentation and lintian
# overrides, nothing else.
deb_files("${rt_deb}" rt_files)
foreach(f IN LISTS rt_files)
  if(NOT f MATCHES "^${libdir}/libtickwheel\\.so\\.1(\\.[0-9.]+)?$"
     AND NOT f MATCHES "^usr/share/(doc|lintian/overrides)/libtickwheel1(/|$)")
    message(FATAL_ERROR "libtickwheel1 must hold only libtickwheel.so.1*, not ${f}")
  endif()
endforeach()
foreach(f "${libdir}/libtickwheel.so.1" "usr/share/doc/libtickwheel1/copyright")
  if(NOT f IN_LIST rt_files)
    message(FATAL_ERROR "libtickwheel1 lacks ${f}: ${rt_files}")
  endif()
endforeach()

# libtickwheel-dev: headers, static library, .so symlink, CMake package, .pc.
deb_files("${dev_deb}" dev_files)
foreach(f IN LISTS dev_files)
  if(f MATCHES "\\.so\\.")
    message(FATAL_ERROR "libtickwheel-dev must not hold the runtime library ${f}")
  endif()
endforeach()
set(dev_expected
  usr/include/tickwheel/tickwheel.h usr/include/tickwheel/runtime.hpp
  ${libdir}/libtickwheel.a ${libdir}/libtickwheel.so
  ${libdir}/cmake/tickwheel/tickwheelConfig.cmake
  ${libdir}/cmake/tickwheel/tickwheelConfigVersion.cmake
  ${libdir}/cmake/tickwheel/tickwheelTargets.cmake
  ${libdir}/pkgconfig/tickwheel.pc ${libdir}/pkgconfig/tickwheel-static.pc
  usr/share/man/man3/tickwheel.h.3.gz usr/share/man/man3/tw_timer_start.3.gz
  usr/share/man/man3/tw_timer_spec.3.gz usr/share/man/man3/TW_EINVAL.3.gz
  usr/share/doc/libtickwheel-dev/copyright)
foreach(f IN LISTS dev_expected)
  if(NOT f IN_LIST dev_files)
    message(FATAL_ERROR "libtickwheel-dev lacks ${f}")
  endif()
endforeach()
# Only the API's names in man3 (Doxygen also links struct fields: arg.3, ...).
foreach(f IN LISTS dev_files)
  if(f MATCHES "^usr/share/man/" AND NOT f MATCHES "^usr/share/man/man3/(tw_|TW_|tickwheel)[^/]*\\.3\\.gz$")
    message(FATAL_ERROR "libtickwheel-dev: unexpected man page ${f}")
  endif()
endforeach()

# libtickwheel-doc: the HTML reference under /usr/share/doc/libtickwheel-doc/html,
# registered with doc-base; architecture-independent.
deb_files("${doc_deb}" doc_files)
set(n_html 0)
foreach(f IN LISTS doc_files)
  if(NOT f MATCHES "^usr/share/(doc/libtickwheel-doc/|doc-base/|lintian/overrides/libtickwheel-doc$)")
    message(FATAL_ERROR "libtickwheel-doc must hold only its documentation, not ${f}")
  endif()
  if(f MATCHES "^usr/share/doc/libtickwheel-doc/html/.*\\.html$")
    math(EXPR n_html "${n_html} + 1")
  endif()
endforeach()
foreach(f usr/share/doc/libtickwheel-doc/html/index.html usr/share/doc/libtickwheel-doc/copyright
          usr/share/doc-base/libtickwheel-doc.libtickwheel)
  if(NOT f IN_LIST doc_files)
    message(FATAL_ERROR "libtickwheel-doc lacks ${f}")
  endif()
endforeach()
if(n_html LESS 5)
  message(FATAL_ERROR "libtickwheel-doc holds only ${n_html} HTML pages")
endif()
run(${TOOL_dpkg_deb} -f "${doc_deb}" Architecture Section Multi-Arch)
if(NOT run_out MATCHES "Architecture: all" OR NOT run_out MATCHES "Section: doc" OR NOT run_out MATCHES "Multi-Arch: foreign")
  message(FATAL_ERROR "libtickwheel-doc: expected Architecture: all, Section: doc, Multi-Arch: foreign:\n${run_out}")
endif()
run(${TOOL_dpkg_deb} -f "${dev_deb}" Suggests)
if(NOT run_out MATCHES "libtickwheel-doc")
  message(FATAL_ERROR "libtickwheel-dev should suggest libtickwheel-doc")
endif()
message(STATUS "OK: libtickwheel-doc: ${n_html} HTML pages, index.html, doc-base registration")

run(${TOOL_dpkg_deb} -f "${dev_deb}" Depends)
set(dev_depends "${run_out}")
foreach(re "libtickwheel1 \\(= ${version}\\)" "libtbb-dev")
  if(NOT dev_depends MATCHES "(^|, )${re}(,|\n|$)")
    message(FATAL_ERROR "libtickwheel-dev's Depends lacks ${re}: ${dev_depends}")
  endif()
endforeach()
run(${TOOL_dpkg_deb} -f "${rt_deb}" Depends Multi-Arch)
if(NOT run_out MATCHES "libtbb12" OR NOT run_out MATCHES "Multi-Arch: same")
  message(FATAL_ERROR "libtickwheel1: expected a dependency on libtbb12 (dh_shlibdeps) and Multi-Arch: same")
endif()

# The symbols file (and shlibs) that dependent packages' dh_shlibdeps reads.
set(ctrl "${WORK}/libtickwheel1-control")
run(${TOOL_dpkg_deb} -e "${rt_deb}" "${ctrl}")
must_exist("${ctrl}/symbols")
must_exist("${ctrl}/shlibs")
file(READ "${ctrl}/symbols" symbols)
foreach(re "^libtickwheel\\.so\\.1 libtickwheel1 #MINVER#" "\n\\* Build-Depends-Package: libtickwheel-dev\n"
           "\n tw_runtime_create@TICKWHEEL_1 1\\.0\\.0\n" "\n tw_version@TICKWHEEL_1 1\\.0\\.0\n")
  if(NOT symbols MATCHES "${re}")
    message(FATAL_ERROR "the symbols file of libtickwheel1 does not match '${re}':\n${symbols}")
  endif()
endforeach()

# Unpack both into a scratch root.
set(root "${WORK}/root")
run(${TOOL_dpkg} -x "${rt_deb}" "${root}")
run(${TOOL_dpkg} -x "${dev_deb}" "${root}")
run(${TOOL_dpkg} -x "${doc_deb}" "${root}")
set(rootlib "${root}/${libdir}")
if(NOT IS_SYMLINK "${rootlib}/libtickwheel.so.1" OR NOT IS_SYMLINK "${rootlib}/libtickwheel.so")
  message(FATAL_ERROR "libtickwheel.so.1 and libtickwheel.so must be symlinks in ${rootlib}")
endif()
file(READ_SYMLINK "${rootlib}/libtickwheel.so" link)
if(NOT link STREQUAL "libtickwheel.so.1")
  message(FATAL_ERROR "libtickwheel.so -> ${link}, expected -> libtickwheel.so.1")
endif()
file(REAL_PATH "${rootlib}/libtickwheel.so" real)
must_exist("${real}")
if(READELF)
  run("${READELF}" -d "${real}")
  if(NOT run_out MATCHES "\\(SONAME\\)[^\n]*\\[libtickwheel\\.so\\.1\\]")
    message(FATAL_ERROR "SONAME of ${real} is not libtickwheel.so.1")
  endif()
  if(run_out MATCHES "\\((RPATH|RUNPATH)\\)")
    message(FATAL_ERROR "${real} carries an RPATH/RUNPATH")
  endif()
endif()

# The man pages as installed: tw_timer_start.3.gz -> tickwheel.h.3.gz
# (dh_installman/dh_compress turned the links into symlinks), rendered by man.
set(mandir "${root}/usr/share/man")
if(NOT IS_SYMLINK "${mandir}/man3/tw_timer_start.3.gz")
  message(FATAL_ERROR "${mandir}/man3/tw_timer_start.3.gz is not a symlink (to tickwheel.h.3.gz)")
endif()
find_program(MAN man)
if(MAN)
  tw_check_man_page("${MAN}" "${mandir}/man3/tw_timer_start.3.gz" "${mandir}" "[.]gz" "from libtickwheel-dev")
  message(STATUS "OK: man -l of libtickwheel-dev's tw_timer_start(3) shows its documentation")
else()
  message("man not found: the packaged man pages are not rendered (apt-get install man-db)")
endif()

# ---- 4. consumers against the scratch root ----------------------------------------------
set(consumer_src "${SOURCE_DIR}/tests/capi_consumer")
set(ENV{LD_LIBRARY_PATH} "${rootlib}")

function(check_loads_root exe)
  tw_ldd("${exe}" loads)
  string(FIND "${loads}" "libtickwheel.so.1 => ${rootlib}/libtickwheel.so.1 " pos)
  if(NOT loads STREQUAL "" AND pos EQUAL -1)
    message(FATAL_ERROR "${exe} does not load ${rootlib}/libtickwheel.so.1")
  endif()
endfunction()

# CMake: find_package(tickwheel CONFIG) from <root>/usr.
set(bin "${WORK}/consumer-cmake")
run("${CMAKE_COMMAND}" -S "${consumer_src}" -B "${bin}" -G "${GENERATOR}"
    "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}" "-DCMAKE_C_COMPILER=${CC}" "-DCMAKE_CXX_COMPILER=${CXX}"
    "-DCMAKE_PREFIX_PATH=${root}/usr" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_BUILD_TYPE=Release)
file(STRINGS "${bin}/CMakeCache.txt" found REGEX "^tickwheel_DIR:")
if(NOT found STREQUAL "tickwheel_DIR:PATH=${rootlib}/cmake/tickwheel")
  message(FATAL_ERROR "find_package found ${found}, not the package in ${rootlib}/cmake/tickwheel")
endif()
run("${CMAKE_COMMAND}" --build "${bin}")
file(GLOB programs LIST_DIRECTORIES false "${bin}/consumer*")
if(NOT "${bin}/consumer_shared" IN_LIST programs)
  message(FATAL_ERROR "the CMake consumer built no consumer_shared")
endif()
foreach(p IN LISTS programs)
  run_consumer("${p}" "OK")
endforeach()
check_loads_root("${bin}/consumer_shared")
message(STATUS "OK: CMake consumers (${programs}) built against ${root}/usr and ran")

# CMake, a C-only project (project(... C)): both targets, shared and static.
set(bin "${WORK}/consumer-cmake-c-only")
run("${CMAKE_COMMAND}" -S "${consumer_src}/c_only" -B "${bin}" -G "${GENERATOR}"
    "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}" "-DCMAKE_C_COMPILER=${CC}"
    "-DCMAKE_PREFIX_PATH=${root}/usr" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_BUILD_TYPE=Release)
run("${CMAKE_COMMAND}" --build "${bin}")
foreach(p consumer_c_only_shared consumer_c_only_static)
  run_consumer("${bin}/${p}" "consumer: OK")
endforeach()
check_loads_root("${bin}/consumer_c_only_shared")
message(STATUS "OK: a C-only CMake project linked tickwheel::tickwheel and tickwheel::tickwheel_static from ${root}/usr")

# pkg-config.
if(NOT PKG_CONFIG)
  message("pkg-config not found: the pkg-config consumer is not built (apt-get install pkg-config)")
else()
  set(ENV{PKG_CONFIG_PATH} "${rootlib}/pkgconfig")
  # As installed: a relocatable .pc (prefix=${pcfiledir}/../../..) resolves
  # to the scratch root, an absolute one says /usr.
  run("${PKG_CONFIG}" --print-errors --variable=prefix tickwheel)
  string(STRIP "${run_out}" pc_prefix)
  file(REAL_PATH "${pc_prefix}" pc_prefix_real)
  file(REAL_PATH "${root}/usr" root_usr)
  if(NOT pc_prefix STREQUAL "/usr" AND NOT pc_prefix_real STREQUAL root_usr)
    message(FATAL_ERROR "tickwheel.pc: prefix ${pc_prefix} is neither /usr nor relative to the .pc file")
  endif()
  set(pc "${PKG_CONFIG}" --print-errors "--define-variable=prefix=${root}/usr")
  run(${pc} --modversion tickwheel)
  run(${pc} --variable=libdir tickwheel)
  string(STRIP "${run_out}" pc_libdir)
  file(REAL_PATH "${pc_libdir}" pc_libdir)
  if(NOT pc_libdir STREQUAL rootlib)
    message(FATAL_ERROR "pkg-config libdir ${pc_libdir} is not ${rootlib}")
  endif()
  run(${pc} --cflags tickwheel)
  separate_arguments(cflags UNIX_COMMAND "${run_out}")
  run(${pc} --libs tickwheel)
  separate_arguments(libs UNIX_COMMAND "${run_out}")
  run(${pc} --static --libs tickwheel)  # needs tbb.pc (Requires.private)
  set(bin "${WORK}/consumer-pkgconfig")
  file(MAKE_DIRECTORY "${bin}")
  run("${CC}" -std=c11 -Wall -Wextra -Werror -pedantic-errors ${cflags}
      "${consumer_src}/consumer.c" -o "${bin}/consumer_c" ${libs})
  run_consumer("${bin}/consumer_c" "consumer: OK")  # the pkg-config C consumer
  check_loads_root("${bin}/consumer_c")
  if(EXISTS "${consumer_src}/consumer.cpp")
    run("${CXX}" -std=c++20 -Wall -Wextra -Werror ${cflags}
        "${consumer_src}/consumer.cpp" -o "${bin}/consumer_cxx" ${libs})
    run_consumer("${bin}/consumer_cxx" "OK")  # the pkg-config C++ consumer
    check_loads_root("${bin}/consumer_cxx")
    # The static library for a C program, flags as tickwheel-static.pc gives them.
    run(${pc} --cflags tickwheel-static)
    separate_arguments(static_cflags UNIX_COMMAND "${run_out}")
    run(${pc} --libs tickwheel-static)
    separate_arguments(static_libs UNIX_COMMAND "${run_out}")
    run("${CC}" -std=c11 -Wall -Wextra -Werror -pedantic-errors ${static_cflags}
        "${consumer_src}/consumer.c" -o "${bin}/consumer_c_static" ${static_libs})
    run_consumer("${bin}/consumer_c_static" "consumer: OK")  # the pkg-config (tickwheel-static) C consumer
    if(LDD)
      run("${LDD}" "${bin}/consumer_c_static")
      if(run_out MATCHES "libtickwheel")
        message(FATAL_ERROR "the tickwheel-static consumer loads a libtickwheel")
      endif()
    endif()
  else()
    message("tests/capi_consumer/consumer.cpp absent: the C++ consumer part is skipped")
  endif()
  message(STATUS "OK: pkg-config consumers built against ${root}/usr and ran")
endif()

# ---- 5. lintian -----------------------------------------------------------------------------
if(LINTIAN)
  run("${LINTIAN}" --fail-on error,warning "${changes}")
  message(STATUS "OK: lintian reports no errors or warnings")
else()
  message("lintian not found: the packages are not checked with it (apt-get install lintian)")
endif()
message(STATUS "OK: Debian packages ${version} built, installed into ${root} and used")
