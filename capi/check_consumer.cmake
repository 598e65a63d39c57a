# ctest capi_install / capi_consumer_cmake / capi_consumer_pkgconfig:
#   MODE=install    cmake --install the build tree into PREFIX; check the files.
#   MODE=cmake      build tests/capi_consumer against PREFIX with
#                   find_package(tickwheel CONFIG) (shared + static), run it.
#   MODE=pkgconfig  compile tests/capi_consumer/consumer.c with the flags of
#                   `pkg-config --cflags --libs tickwheel` from PREFIX, run it.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REPLACE ";" " " cmd "${ARGN}")
  message("$ ${cmd}\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${cmd}")
  endif()
  set(run_out "${out}" PARENT_SCOPE)
endfunction()

if(MODE STREQUAL "install")
  file(REMOVE_RECURSE "${PREFIX}")
  run("${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}")
  foreach(f "${INCLUDEDIR}/tickwheel/tickwheel.h" "${INCLUDEDIR}/tickwheel/runtime.hpp"
            "${LIBDIR}/libtickwheel.a" "${LIBDIR}/libtickwheel.so" "${LIBDIR}/${SONAME}"
            "${LIBDIR}/cmake/tickwheel/tickwheelConfig.cmake"
            "${LIBDIR}/cmake/tickwheel/tickwheelConfigVersion.cmake"
            "${LIBDIR}/cmake/tickwheel/tickwheelTargets.cmake"
            "${LIBDIR}/pkgconfig/tickwheel.pc")
    if(NOT EXISTS "${PREFIX}/${f}")
      message(FATAL_ERROR "not installed: ${PREFIX}/${f}")
    endif()
  endforeach()
  message(STATUS "OK: installed into ${PREFIX}")
  return()
endif()

if(NOT EXISTS "${PREFIX}/${LIBDIR}/${SONAME}")
  message(FATAL_ERROR "nothing installed in ${PREFIX} (capi_install must run first)")
endif()

if(MODE STREQUAL "cmake")
  set(bin "${WORK}/consumer-cmake")
  file(REMOVE_RECURSE "${bin}")
  run("${CMAKE_COMMAND}" -S "${SOURCE}" -B "${bin}" -G "${GENERATOR}"
      "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}" "-DCMAKE_C_COMPILER=${CC}" "-DCMAKE_CXX_COMPILER=${CXX}"
      "-DCMAKE_PREFIX_PATH=${PREFIX}" -DCMAKE_BUILD_TYPE=Release)
  run("${CMAKE_COMMAND}" --build "${bin}")
  # Both must have been linked against the installed libraries, not the build tree.
  run("${bin}/consumer_shared")
  if(NOT run_out MATCHES "consumer: OK")
    message(FATAL_ERROR "consumer_shared did not report OK")
  endif()
  run("${bin}/consumer_static")
  if(NOT run_out MATCHES "consumer: OK")
    message(FATAL_ERROR "consumer_static did not report OK")
  endif()
  find_program(LDD ldd)
  if(LDD)
    run("${LDD}" "${bin}/consumer_shared")
    if(NOT run_out MATCHES "${PREFIX}/${LIBDIR}/${SONAME}")
      message(FATAL_ERROR "consumer_shared does not load ${PREFIX}/${LIBDIR}/${SONAME}")
    endif()
  endif()
  message(STATUS "OK: find_package(tickwheel CONFIG) consumer built and ran")
elseif(MODE STREQUAL "pkgconfig")
  if(NOT PKG_CONFIG)
    message("TW-SKIP: pkg-config not found (apt-get install pkg-config)")
    return()
  endif()
  set(ENV{PKG_CONFIG_PATH} "${PREFIX}/${LIBDIR}/pkgconfig")
  run("${PKG_CONFIG}" --print-errors --exists "tickwheel >= 0.2")
  run("${PKG_CONFIG}" --modversion tickwheel)
  run("${PKG_CONFIG}" --cflags tickwheel)
  separate_arguments(cflags UNIX_COMMAND "${run_out}")
  run("${PKG_CONFIG}" --libs tickwheel)
  separate_arguments(libs UNIX_COMMAND "${run_out}")
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
  run("${CC}" -std=c11 -Wall -Wextra -Werror -pedantic-errors ${cflags}
      "${SOURCE}/consumer.c" -o "${bin}/consumer" ${libs} "-Wl,-rpath,${libdir}")
  run("${bin}/consumer")
  if(NOT run_out MATCHES "consumer: OK")
    message(FATAL_ERROR "the pkg-config consumer did not report OK")
  endif()
  # The static flavour: pkg-config --static adds the private dependencies.
  run("${PKG_CONFIG}" --static --libs tickwheel)
  message(STATUS "OK: pkg-config consumer built and ran")
else()
  message(FATAL_ERROR "unknown MODE ${MODE}")
endif()
