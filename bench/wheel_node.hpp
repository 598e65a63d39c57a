// SPDX-License-Identifier: MIT OR Apache-2.0
// The timer node both benchmarks of the bare wheel use (bench/wheel_bench.cpp
// and the "tickwheel-wheel" peer): an intrusive WheelNode carrying a
// callback and its argument, as a single-threaded event loop would embed it.
#pragma once

#include "tickwheel/wheel.hpp"

namespace twb_wheel {

struct Node : tickwheel::WheelNode {
    void (*fn)(void*) = nullptr;
    void* arg = nullptr;
};

}  // namespace twb_wheel
