# SPDX-License-Identifier: MIT OR Apache-2.0
# ctest capi_nm_exports: libtickwheel.so exports exactly
#  * the tw_* functions the header declares (TW_API), under the version node
#    TICKWHEEL_1 -- or the later node (TICKWHEEL_1.1, ...) that the version
#    script MAP names them in --, and
#  * the C++ API's entry points listed in cxx_expected below (TW_CXX_API in
#    runtime.hpp), under the version node TICKWHEEL_CXX_1,
# and nothing else: no tickwheel::rt / tickwheel::capi internals, no standard
# library instantiations, nothing of oneTBB or moodycamel. The library's own
# calls to its exported functions are bound at link time (no PLT slot names
# a tickwheel symbol: -Bsymbolic-functions), and its SONAME is
# libtickwheel.so.<ABI major>.
# Usage: cmake -DLIB=... -DNM=... -DREADELF=... -DSONAME=... -DHEADER=... -DMAP=... -P check_exports.cmake

# The exported C++ symbols, demangled (constructor/destructor variants such
# as C1/C2 share one name). Adding one is an ABI change: add it here, under
# TICKWHEEL_CXX_1 (a 1.x minor release: a new node TICKWHEEL_CXX_1.y), and
# regenerate the ABI baseline.
set(cxx_expected
  "tickwheel::error_category()"
  "tickwheel::Error::~Error()"
  "typeinfo for tickwheel::Error"
  "typeinfo name for tickwheel::Error"
  "vtable for tickwheel::Error"
  "tickwheel::Runtime::Runtime(tickwheel::Config const*, unsigned long)"
  "tickwheel::Runtime::~Runtime()"
  "tickwheel::Runtime::start_sized(tickwheel::StartOptions const*, unsigned long, tickwheel::detail::Callback&&, std::error_code&)"
  "tickwheel::Runtime::stop(unsigned long)"
  "tickwheel::Runtime::stop_sync(unsigned long)"
  "tickwheel::Runtime::reset(unsigned long, std::chrono::duration<long, std::ratio<1l, 1000000000l> >)"
  "tickwheel::Runtime::reset(unsigned long, std::chrono::duration<long, std::ratio<1l, 1000000000l> >, std::error_code&)"
  "tickwheel::Runtime::shutdown()"
  "tickwheel::Runtime::shutdown(std::error_code&)"
  "tickwheel::Runtime::is_shut_down() const"
  "tickwheel::Runtime::is_forked() const"
  "tickwheel::Runtime::stats_sized(tickwheel::Stats*, unsigned long) const"
  "tickwheel::Runtime::metrics[abi:cxx11]() const"
  "tickwheel::Runtime::shard_count() const"
  "tickwheel::Runtime::worker_count() const"
  "tickwheel::Runtime::resolution() const"
  # 1.2 (TICKWHEEL_CXX_1.2): delivery queues
  "tickwheel::Queue::Queue(tickwheel::Runtime&)"
  "tickwheel::Queue::~Queue()"
  "tickwheel::Queue::fd() const"
  "tickwheel::Queue::run(unsigned long, std::chrono::duration<long, std::ratio<1l, 1000000000l> >)"
  "tickwheel::Queue::run(unsigned long, std::chrono::duration<long, std::ratio<1l, 1000000000l> >, std::error_code&)"
  "tickwheel::Queue::close(std::error_code&)"
  "tickwheel::Queue::stats_sized(tickwheel::QueueStats*, unsigned long) const"
)
# The C++ symbols of 1.3 (TICKWHEEL_CXX_1.3: the timer model and clocks),
# listed by exact name in the map, as they win over the Runtime::* pattern
# of TICKWHEEL_CXX_1 only that way.
set(cxx_13
  "tickwheel::Runtime::reset_at(unsigned long, std::chrono::time_point<std::chrono::_V2::steady_clock, std::chrono::duration<long, std::ratio<1l, 1000000000l> > >, std::error_code&)"
  "tickwheel::Runtime::stop_group(unsigned long, bool, std::error_code&)"
  "tickwheel::Runtime::query_sized(unsigned long, tickwheel::TimerInfo*, unsigned long) const"
  "tickwheel::Runtime::advance(std::chrono::duration<long, std::ratio<1l, 1000000000l> >, std::error_code&)"
  "tickwheel::Runtime::now(tickwheel::TimerClock) const"
  "tickwheel::Runtime::is_manual_clock() const")
list(APPEND cxx_expected ${cxx_13})
# 1.4 (TICKWHEEL_CXX_1.4: the entry points behind the batch calls), by exact name too.
set(cxx_14
  "tickwheel::Runtime::stop_n(unsigned long const*, unsigned long, std::error_code*, std::error_code&)"
  "tickwheel::Runtime::reset_n(unsigned long const*, unsigned long, std::chrono::duration<long, std::ratio<1l, 1000000000l> >, std::error_code*, std::error_code&)"
  "tickwheel::Runtime::start_n_sized(tickwheel::StartOptions const*, unsigned long, unsigned long, tickwheel::detail::Callback*, tickwheel::Timer*, std::error_code*, std::error_code&)")
list(APPEND cxx_expected ${cxx_14})
# 1.5 (TICKWHEEL_CXX_1.5: Error's detail, Runtime::name(), the metrics of
# several runtimes), by exact name too.
set(cxx_15
  "tickwheel::detail::take_error_detail[abi:cxx11](std::error_code const&)"
  "tickwheel::Runtime::name[abi:cxx11]() const"
  "tickwheel::Runtime::metrics[abi:cxx11](std::span<tickwheel::Runtime const* const, 18446744073709551615ul>)")
list(APPEND cxx_expected ${cxx_15})
# 1.6 (TICKWHEEL_CXX_1.6: a binding's caught exceptions counted), by exact name too.
set(cxx_16
  "tickwheel::Runtime::count_callback_exception() const")
list(APPEND cxx_expected ${cxx_16})

execute_process(COMMAND "${NM}" -D --defined-only "${LIB}" OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm -D --defined-only ${LIB} failed (${rc})")
endif()
string(REGEX REPLACE "\n$" "" out "${out}")
string(REPLACE "\n" ";" lines "${out}")

# Demangle every name with one c++filt run (one output line per argument).
set(names "")
foreach(line IN LISTS lines)
  string(REGEX REPLACE "^[0-9a-fA-F]+ [A-Za-z] ([^ @]+).*$" "\\1" name "${line}")
  list(APPEND names "${name}")
endforeach()
find_program(CXXFILT NAMES c++filt llvm-cxxfilt)
if(NOT CXXFILT)
  message(FATAL_ERROR "c++filt not found (binutils)")
endif()
execute_process(COMMAND "${CXXFILT}" ${names} OUTPUT_VARIABLE dout RESULT_VARIABLE rc)
string(REGEX REPLACE "\n$" "" dout "${dout}")
string(REPLACE "\n" ";" demangled_names "${dout}")
list(LENGTH lines n_lines)
list(LENGTH demangled_names n2)
if(NOT rc EQUAL 0 OR NOT n_lines EQUAL n2 OR n_lines EQUAL 0)
  message(FATAL_ERROR "c++filt failed (${rc}) or gave ${n2} names for ${n_lines} symbols")
endif()
message("nm -D --defined-only ${LIB}, demangled:")
math(EXPR last "${n_lines} - 1")
foreach(i RANGE ${last})
  list(GET lines ${i} line)
  list(GET demangled_names ${i} dname)
  message("  ${line}  ${dname}")
endforeach()

# The version script's C nodes, and the tw_* names listed in the later ones.
set(nodes TICKWHEEL_1 TICKWHEEL_CXX_1)
file(READ "${MAP}" map)
string(REPLACE ";" " " map "${map}")
string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" "" map "${map}")  # comments
string(REGEX MATCHALL "TICKWHEEL_(CXX_)?[0-9.]+[ \t\n]*{[^}]*}" blocks "${map}")
foreach(block IN LISTS blocks)
  string(REGEX MATCH "^TICKWHEEL_(CXX_)?[0-9.]+" node "${block}")
  list(APPEND nodes "${node}")
  if(NOT node STREQUAL "TICKWHEEL_1")
    string(REGEX MATCHALL "tw_[a-z0-9_]+" names "${block}")
    foreach(n IN LISTS names)
      set("node_of_${n}" "${node}")
    endforeach()
  endif()
endforeach()
list(REMOVE_DUPLICATES nodes)

set(exported "")      # tw_* functions
set(cxx_exported "")  # demangled C++ symbols
set(bad "")
foreach(i RANGE ${last})
  list(GET lines ${i} line)
  list(GET demangled_names ${i} dname)
  # "<address> <type> <name>[@@VERSION]"
  if(NOT line MATCHES "^[0-9a-fA-F]+ ([A-Za-z]) ([^ @]+)(@@?([^ ]+))?$")
    string(APPEND bad "  unparsed: ${line}\n")
    continue()
  endif()
  set(type "${CMAKE_MATCH_1}")
  set(name "${CMAKE_MATCH_2}")
  set(ver "${CMAKE_MATCH_4}")
  list(FIND nodes "${name}" node_index)
  if(type STREQUAL "A" AND node_index GREATER -1)
    continue()  # a version node itself (from capi/tickwheel.map)
  endif()
  if(name MATCHES "^tw_")
    set(want TICKWHEEL_1)
    if(DEFINED "node_of_${name}")
      set(want "${node_of_${name}}")
    endif()
    if(NOT type STREQUAL "T")
      string(APPEND bad "  tw_* symbol that is not a function: ${line}\n")
    elseif(NOT ver STREQUAL want)
      string(APPEND bad "  tw_* symbol without version ${want}: ${line}\n")
    else()
      list(APPEND exported "${name}")
    endif()
    continue()
  endif()
  list(FIND cxx_expected "${dname}" at)
  if(at LESS 0)
    if(dname MATCHES "tickwheel::(rt|capi)::")
      set(why "library internals")
    elseif(dname MATCHES "^(typeinfo |typeinfo name |vtable |VTT |guard variable )?(for )?(std|__gnu_cxx)::")
      set(why "a standard library instantiation")
    elseif(dname MATCHES "tbb|moodycamel")
      set(why "oneTBB/moodycamel")
    else()
      set(why "not an intended export")
    endif()
    string(APPEND bad "  ${why}: ${dname} (${line})\n")
    continue()
  endif()
  list(FIND cxx_13 "${dname}" at13)
  list(FIND cxx_14 "${dname}" at14)
  list(FIND cxx_15 "${dname}" at15)
  list(FIND cxx_16 "${dname}" at16)
  if(at16 GREATER -1)
    set(want TICKWHEEL_CXX_1.6)
  elseif(at15 GREATER -1)
    set(want TICKWHEEL_CXX_1.5)
  elseif(at14 GREATER -1)
    set(want TICKWHEEL_CXX_1.4)
  elseif(at13 GREATER -1)
    set(want TICKWHEEL_CXX_1.3)
  elseif(dname MATCHES "^tickwheel::Queue::")
    set(want TICKWHEEL_CXX_1.2)
  else()
    set(want TICKWHEEL_CXX_1)
  endif()
  if(NOT ver STREQUAL want)
    string(APPEND bad "  C++ symbol without version ${want}: ${dname} (${line})\n")
  elseif(dname MATCHES "^(typeinfo|vtable)" AND NOT type MATCHES "^[VRD]$")
    string(APPEND bad "  ${dname} is not an object: ${line}\n")
  elseif(NOT dname MATCHES "^(typeinfo|vtable)" AND NOT type MATCHES "^[TW]$")
    string(APPEND bad "  ${dname} is not a function: ${line}\n")
  else()
    list(APPEND cxx_exported "${dname}")
  endif()
endforeach()

# Every TW_API function of the header, and nothing else.
file(READ "${HEADER}" header)
string(REGEX MATCHALL "TW_API[^;(]*[ *](tw_[a-z0-9_]+)\\(" decls "${header}")
set(declared "")
foreach(d IN LISTS decls)
  string(REGEX MATCH "(tw_[a-z0-9_]+)\\($" m "${d}")
  list(APPEND declared "${CMAKE_MATCH_1}")
endforeach()
list(SORT declared)
list(SORT exported)
list(LENGTH declared n)
if(n LESS 15)
  string(APPEND bad "  found only ${n} TW_API declarations in ${HEADER}\n")
endif()
if(NOT declared STREQUAL exported)
  set(missing ${declared})
  list(REMOVE_ITEM missing ${exported})
  set(extra ${exported})
  list(REMOVE_ITEM extra ${declared})
  string(APPEND bad "  declared but not exported: ${missing}\n  exported but not declared: ${extra}\n")
endif()

# Every intended C++ export is there (the loop above refused the others).
list(REMOVE_DUPLICATES cxx_exported)
foreach(e IN LISTS cxx_expected)
  list(FIND cxx_exported "${e}" at)
  if(at LESS 0)
    string(APPEND bad "  C++ entry point not exported: ${e}\n")
  endif()
endforeach()

# No PLT slot for the library's own functions: its internal calls to what it
# exports (the C API calling Runtime::stop, ...) are direct calls.
execute_process(COMMAND "${READELF}" -r -W "${LIB}" OUTPUT_VARIABLE relocs RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf -r ${LIB} failed (${rc})")
endif()
string(REGEX MATCHALL "[^\n]*JUMP_SLOT[^\n]* (tw_|_ZN9tickwheel|_ZNK9tickwheel)[^\n]*" plt "${relocs}")
foreach(p IN LISTS plt)
  string(APPEND bad "  PLT slot for the library's own function (link with -Bsymbolic-functions): ${p}\n")
endforeach()

execute_process(COMMAND "${READELF}" -d "${LIB}" OUTPUT_VARIABLE dyn RESULT_VARIABLE rc)
if(NOT dyn MATCHES "\\(SONAME\\)[^\n]*\\[${SONAME}\\]")
  string(APPEND bad "  SONAME is not ${SONAME}:\n${dyn}\n")
endif()
if(NOT SONAME MATCHES "^libtickwheel\\.so\\.[0-9]+$")
  string(APPEND bad "  unexpected SONAME ${SONAME}\n")
endif()

if(bad)
  message(FATAL_ERROR "${LIB}:\n${bad}")
endif()
list(LENGTH exported n)
list(LENGTH cxx_exported ncxx)
message(STATUS "OK: ${n} tw_* functions (version nodes ${nodes}) and ${ncxx} C++ entry points "
               "(version TICKWHEEL_CXX_1) exported, nothing else; SONAME ${SONAME}")
