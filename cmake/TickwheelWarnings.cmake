# SPDX-License-Identifier: MIT OR Apache-2.0
# Warning and sanitizer flags, applied to every target of this project.
add_compile_options(-Wall -Wextra -Wshadow $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor>)
if(TICKWHEEL_WERROR)
  add_compile_options(-Werror)
endif()

if(TICKWHEEL_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=thread)
elseif(TICKWHEEL_SANITIZE STREQUAL "address")
  # AddressSanitizer (with LeakSanitizer, on by default on x86_64 Linux) and
  # UndefinedBehaviorSanitizer; any UB report aborts the test.
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=address,undefined)
elseif(NOT TICKWHEEL_SANITIZE STREQUAL "")
  message(FATAL_ERROR "TICKWHEEL_SANITIZE must be '', 'thread' or 'address'")
endif()
