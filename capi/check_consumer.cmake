# SPDX-License-Identifier: MIT OR Apache-2.0
# ctest capi_install / capi_consumer_cmake / capi_consumer_pkgconfig:
#   MODE=install    cmake --install the build tree into PREFIX; check the
#                   files; `man -l` the installed man page of tw_timer_start
#                   (when the build made man pages).
#   MODE=cmake      build tests/capi_consumer against PREFIX with
#                   find_package(tickwheel CONFIG): consumer.c (C API) and
#                   consumer.cpp (C++ API, C++20 from the targets' cxx_std_20),
#                   each shared and static; then tests/capi_consumer/c_only,
#                   a C-only project(... C): consumer.c with both targets;
#                   run them all.
#   MODE=pkgconfig  the same four programs, compiled with the flags of
#                   `pkg-config --cflags --libs tickwheel` (shared) and of
#                   tickwheel-static.pc (static: `--libs` and `--static
#                   --libs`, no editing of the flags) from PREFIX; run them.
# `ldd` proves the shared programs load PREFIX's libtickwheel.so.N and the
# static ones no libtickwheel at all; the C++ shared program must bind
# tickwheel::Error's type information to the library's (TICKWHEEL_CXX_1).
cmake_policy(VERSION 3.25)

include(${CMAKE_CURRENT_LIST_DIR}/script_run.cmake)  # run()

# The program loads PREFIX's shared library (shared = TRUE), or no
# libtickwheel at all (static). A C++ shared program binds tickwheel::Error's
# typeinfo to the library's (symbol version TICKWHEEL_CXX_1).
function(check_linkage exe shared cxx)
  tw_ldd("${exe}" loads)
  if(loads STREQUAL "")
    return()  # no ldd
  endif()
  if(shared AND NOT loads MATCHES "${SONAME} => ${PREFIX}/${LIBDIR}/${SONAME}")
    message(FATAL_ERROR "${exe} does not load ${PREFIX}/${LIBDIR}/${SONAME}")
  endif()
  if(NOT shared AND loads MATCHES "libtickwheel")
    message(FATAL_ERROR "${exe} is linked statically but loads a libtickwheel")
  endif()
  if(shared AND cxx AND NM)
    # Undefined (U), or copied into the executable (a copy relocation: the
    # library then uses that copy too): either way the one bound to the
    # library's versioned symbol.
    run("${NM}" -D "${exe}")
    if(NOT run_out MATCHES "_ZTIN9tickwheel5ErrorE@TICKWHEEL_CXX_1")
      message(FATAL_ERROR "${exe} does not take tickwheel::Error's typeinfo from the library")
    endif()
  endif()
endfunction()

if(MODE STREQUAL "install")
  file(REMOVE_RECURSE "${PREFIX}")
  run("${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}")
  foreach(f "${INCLUDEDIR}/tickwheel/tickwheel.h" "${INCLUDEDIR}/tickwheel/runtime.hpp"
            "${LIBDIR}/libtickwheel.a" "${LIBDIR}/libtickwheel.so" "${LIBDIR}/${SONAME}"
            "${LIBDIR}/cmake/tickwheel/tickwheelConfig.cmake"
            "${LIBDIR}/cmake/tickwheel/tickwheelConfigVersion.cmake"
            "${LIBDIR}/cmake/tickwheel/tickwheelTargets.cmake"
            "${LIBDIR}/pkgconfig/tickwheel.pc" "${LIBDIR}/pkgconfig/tickwheel-static.pc")
    if(NOT EXISTS "${PREFIX}/${f}")
      message(FATAL_ERROR "not installed: ${PREFIX}/${f}")
    endif()
  endforeach()
  # The man pages (TICKWHEEL_BUILD_MAN: ON where doxygen was found).
  file(STRINGS "${BUILD_DIR}/CMakeCache.txt" man_on REGEX "^TICKWHEEL_BUILD_MAN:BOOL=ON$")
  if(man_on)
    set(mandir "${PREFIX}/share/man")
    set(page "${mandir}/man3/tw_timer_start.3")
    if(NOT IS_SYMLINK "${page}" OR NOT EXISTS "${mandir}/man3/tickwheel.h.3")
      message(FATAL_ERROR "man pages not installed: ${page} (a symlink to tickwheel.h.3)")
    endif()
    find_program(MAN man)
    if(MAN)
      tw_check_man_page("${MAN}" "${page}" "${mandir}" "" "installed in ${PREFIX}" "SYNOPSIS")
      run("${MAN}" -l "${mandir}/man3/tw_timer_spec.3")
      if(NOT run_out MATCHES "delay_ns")
        message(FATAL_ERROR "man -l tw_timer_spec.3 does not document delay_ns")
      endif()
      message(STATUS "OK: man -l ${page} shows tw_timer_start's documentation")
    else()
      message("(man not found: the installed man pages are not rendered; apt-get install man-db)")
    endif()
  endif()
  message(STATUS "OK: installed into ${PREFIX}")
  return()
endif()

tw_require_exists("${PREFIX}/${LIBDIR}/${SONAME}" "nothing installed in ${PREFIX} (capi_install must run first)")

if(MODE STREQUAL "cmake")
  set(bin "${WORK}/consumer-cmake")
  file(REMOVE_RECURSE "${bin}")
  run("${CMAKE_COMMAND}" -S "${SOURCE}" -B "${bin}" -G "${GENERATOR}"
      "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}" "-DCMAKE_C_COMPILER=${CC}" "-DCMAKE_CXX_COMPILER=${CXX}"
      "-DCMAKE_PREFIX_PATH=${PREFIX}" -DCMAKE_BUILD_TYPE=Release)
  run("${CMAKE_COMMAND}" --build "${bin}")
  # All must have been linked against the installed libraries, not the build tree.
  run_consumer("${bin}/consumer_shared" "consumer: OK")
  run_consumer("${bin}/consumer_static" "consumer: OK")
  run_consumer("${bin}/consumer_cxx_shared" "consumer_cxx: OK")
  run_consumer("${bin}/consumer_cxx_static" "consumer_cxx: OK")
  check_linkage("${bin}/consumer_shared" TRUE FALSE)
  check_linkage("${bin}/consumer_static" FALSE FALSE)
  check_linkage("${bin}/consumer_cxx_shared" TRUE TRUE)
  check_linkage("${bin}/consumer_cxx_static" FALSE TRUE)
  # A C-only project: no C++ linker to pick, both targets still link.
  set(cbin "${WORK}/consumer-cmake-c-only")
  file(REMOVE_RECURSE "${cbin}")
  run("${CMAKE_COMMAND}" -S "${SOURCE}/c_only" -B "${cbin}" -G "${GENERATOR}"
      "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}" "-DCMAKE_C_COMPILER=${CC}"
      "-DCMAKE_PREFIX_PATH=${PREFIX}" -DCMAKE_BUILD_TYPE=Release)
  run("${CMAKE_COMMAND}" --build "${cbin}")
  run_consumer("${cbin}/consumer_c_only_shared" "consumer: OK")
  run_consumer("${cbin}/consumer_c_only_static" "consumer: OK")
  check_linkage("${cbin}/consumer_c_only_shared" TRUE FALSE)
  check_linkage("${cbin}/consumer_c_only_static" FALSE FALSE)
  message(STATUS "OK: find_package(tickwheel CONFIG) consumers (C and C++, shared and static; "
                 "a C-only project with both targets) built and ran")
elseif(MODE STREQUAL "pkgconfig")
  if(NOT PKG_CONFIG)
    message("TW-SKIP: pkg-config not found (apt-get install pkg-config)")
    return()
  endif()
  set(ENV{PKG_CONFIG_PATH} "${PREFIX}/${LIBDIR}/pkgconfig")
  run("${PKG_CONFIG}" --print-errors --exists "tickwheel >= 1.0")
  run("${PKG_CONFIG}" --modversion tickwheel)
  run("${PKG_CONFIG}" --cflags tickwheel)
  separate_arguments(cflags UNIX_COMMAND "${run_out}")
  run("${PKG_CONFIG}" --libs tickwheel)
  separate_arguments(libs UNIX_COMMAND "${run_out}")
  # The static flavour: tickwheel-static.pc, used as is (no flag editing).
  # Its Libs and Requires are complete, so `--libs` and `--static --libs`
  # both link a C program: -l:libtickwheel.a, oneTBB, libstdc++, libm.
  run("${PKG_CONFIG}" --print-errors --static --libs tickwheel-static)
  separate_arguments(static_libs UNIX_COMMAND "${run_out}")
  run("${PKG_CONFIG}" --print-errors --libs tickwheel-static)
  separate_arguments(static_libs_plain UNIX_COMMAND "${run_out}")
  run("${PKG_CONFIG}" --print-errors --cflags tickwheel-static)
  separate_arguments(static_cflags UNIX_COMMAND "${run_out}")
  foreach(want "-l:libtickwheel.a" "-ltbb" "-lstdc++")
    if(NOT want IN_LIST static_libs OR NOT want IN_LIST static_libs_plain)
      message(FATAL_ERROR "pkg-config [--static] --libs tickwheel-static lacks ${want}")
    endif()
  endforeach()
  run("${PKG_CONFIG}" --modversion tickwheel-static)
  string(STRIP "${run_out}" static_version)
  run("${PKG_CONFIG}" --modversion tickwheel)
  string(STRIP "${run_out}" shared_version)
  if(NOT static_version STREQUAL shared_version)
    message(FATAL_ERROR "tickwheel-static.pc says ${static_version}, tickwheel.pc ${shared_version}")
  endif()
  run("${PKG_CONFIG}" --variable=libdir tickwheel)
  string(STRIP "${run_out}" libdir)
  file(REAL_PATH "${libdir}" libdir)
  file(REAL_PATH "${PREFIX}/${LIBDIR}" expected)
  if(NOT libdir STREQUAL expected)
    message(FATAL_ERROR "pkg-config libdir ${libdir} is not the install prefix's ${expected}")
  endif()
  set(bin "${WORK}/consumer-pkgconfig")
  file(REMOVE_RECURSE "${bin}")
  file(MAKE_DIRECTORY "${bin}")
  set(warn -Wall -Wextra -Werror -pedantic-errors)
  # C: shared, then static (a C link: tickwheel-static.pc brings libstdc++),
  # with `--static --libs` and with plain `--libs`.
  run("${CC}" -std=c11 ${warn} ${cflags} "${SOURCE}/consumer.c" -o "${bin}/consumer" ${libs} "-Wl,-rpath,${libdir}")
  run("${CC}" -std=c11 ${warn} ${static_cflags} "${SOURCE}/consumer.c" -o "${bin}/consumer_static" ${static_libs})
  run("${CC}" -std=c11 ${warn} ${static_cflags} "${SOURCE}/consumer.c" -o "${bin}/consumer_static_plain"
      ${static_libs_plain})
  # C++ (runtime.hpp needs C++20): shared, then static.
  run("${CXX}" -std=c++20 ${warn} ${cflags} "${SOURCE}/consumer.cpp" -o "${bin}/consumer_cxx" ${libs}
      "-Wl,-rpath,${libdir}")
  run("${CXX}" -std=c++20 ${warn} ${static_cflags} "${SOURCE}/consumer.cpp" -o "${bin}/consumer_cxx_static"
      ${static_libs})
  run_consumer("${bin}/consumer" "consumer: OK")
  run_consumer("${bin}/consumer_static" "consumer: OK")
  run_consumer("${bin}/consumer_static_plain" "consumer: OK")
  check_linkage("${bin}/consumer_static_plain" FALSE FALSE)
  run_consumer("${bin}/consumer_cxx" "consumer_cxx: OK")
  run_consumer("${bin}/consumer_cxx_static" "consumer_cxx: OK")
  check_linkage("${bin}/consumer" TRUE FALSE)
  check_linkage("${bin}/consumer_static" FALSE FALSE)
  check_linkage("${bin}/consumer_cxx" TRUE TRUE)
  check_linkage("${bin}/consumer_cxx_static" FALSE TRUE)
  message(STATUS "OK: pkg-config consumers (C and C++, shared and static) built and ran")
else()
  message(FATAL_ERROR "unknown MODE ${MODE}")
endif()
