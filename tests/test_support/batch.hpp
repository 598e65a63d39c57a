// SPDX-License-Identifier: MIT OR Apache-2.0
// A batch start through the C++ API's span form (Runtime::start of a span of
// StartOptions): `n` no-op timers due after `delay`, for tests and test
// programs that drive the batch paths (probes_test, probes_target).
#pragma once

#include <tickwheel/runtime.hpp>

#include <cstddef>
#include <span>
#include <system_error>
#include <vector>

namespace tw_test {

/// Starts `n` no-op timers due after `delay` with one call; `out` and
/// `results` get one entry each. Returns how many started.
inline std::size_t start_batch(tickwheel::Runtime& rt, std::size_t n, tickwheel::Duration delay,
                               std::vector<tickwheel::Timer>& out, std::vector<std::error_code>& results) {
    std::vector<tickwheel::StartOptions> opts(n);
    for (auto& o : opts) o.delay = delay;
    std::vector<tickwheel::detail::Callback> cbs;
    for (std::size_t k = 0; k < n; ++k) cbs.emplace_back([] {});
    out.assign(n, tickwheel::Timer());
    results.assign(n, std::error_code());
    std::error_code ec;
    return rt.start(std::span<const tickwheel::StartOptions>(opts), std::span<tickwheel::detail::Callback>(cbs),
                    std::span<tickwheel::Timer>(out), std::span<std::error_code>(results), ec);
}

}  // namespace tw_test
