// SPDX-License-Identifier: MIT OR Apache-2.0
// The sizes of the released layouts of the 1.x C++ ABI's structs (see
// runtime.hpp, "LINKING AND THE C++ ABI"): an exported function that takes
// a caller's sizeof accepts exactly these. Shared by the ABI shims of
// runtime.cpp (read_config, write_stats, and the layout asserts) and of
// start.cpp (read_start_options, which start() inlines); a new size is added
// here, with its field in the shim's list.
#pragma once

#include <cstddef>

namespace tickwheel {

inline constexpr std::size_t kConfigSizeV1 = 64;
inline constexpr std::size_t kConfigSizeV13 = 72;   // 1.3 appended `manual_clock` (+ padding)
inline constexpr std::size_t kConfigSizeV15 = 104;  // 1.5 appended `name`
inline constexpr std::size_t kConfigSizeV17 = 112;  // 1.7 appended `slot_reserve`
inline constexpr std::size_t kStartOptionsSizeV1 = 32;
inline constexpr std::size_t kStartOptionsSizeV12 = 40;  // 1.2 appended `queue`
inline constexpr std::size_t kStartOptionsSizeV13 = 64;  // 1.3 appended `leeway`, `group`, `clock`, `reserved`
inline constexpr std::size_t kTimerInfoSizeV13 = 64;
inline constexpr std::size_t kStatsSizeV1 = 152;
inline constexpr std::size_t kStatsSizeV17 = 296;  // 1.7 appended the stages, saturation and memory

}  // namespace tickwheel
