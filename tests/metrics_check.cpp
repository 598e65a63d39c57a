// SPDX-License-Identifier: MIT OR Apache-2.0
// metrics_check: reads a program's output on stdin, takes the text after the
// line "# tickwheel metrics" (what `demo --metrics` prints before the
// Prometheus text) to the end, and checks it with the strict grammar of
// prometheus_text.hpp plus a few values of a runtime that ran timers and
// was shut down. Exit status 0 if it passes, 1 (with the reason) if not.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "prometheus_text.hpp"

int main() {
    const std::string all((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    const std::string marker = "# tickwheel metrics\n";
    const std::size_t at = all.find(marker);
    if (at == std::string::npos || (at != 0 && all[at - 1] != '\n')) {
        std::fprintf(stderr, "metrics_check: no line \"# tickwheel metrics\" in the input\n");
        return 1;
    }
    const std::string text = all.substr(at + marker.size());
    prom::Exposition e;
    std::string error;
    if (!prom::parse(text, e, error)) {
        std::fprintf(stderr, "metrics_check: %s\n---- text ----\n%s", error.c_str(), text.c_str());
        return 1;
    }
    // Every series carries the runtime's name (1.5): one runtime here.
    std::vector<std::string> runtimes;
    if (!prom::take_label(e, "runtime", runtimes, error) || runtimes.size() != 1) {
        std::fprintf(stderr, "metrics_check: %s (%zu runtime names)\n", error.c_str(), runtimes.size());
        return 1;
    }
    if (!e.value("tickwheel_build_info", {{"version", TICKWHEEL_VERSION}})) {
        std::fprintf(stderr, "metrics_check: no tickwheel_build_info{version=\"%s\"}\n", TICKWHEEL_VERSION);
        return 1;
    }
    auto need = [&](const char* name) {
        const auto v = e.value(name);
        if (!v) std::fprintf(stderr, "metrics_check: no %s\n", name);
        return v.value_or(-1);
    };
    const double started = need("tickwheel_timers_started_total");
    const double fired = need("tickwheel_timers_fired_total");
    const double count = need("tickwheel_callback_lateness_seconds_count");
    const double shut_down = need("tickwheel_shut_down");
    if (!(started > 0 && fired > 0)) {
        std::fprintf(stderr, "metrics_check: no timer started or fired (started %g, fired %g)\n", started, fired);
        return 1;
    }
    // After shutdown every run has finished: one lateness sample per run.
    if (shut_down == 1 && count != fired) {
        std::fprintf(stderr, "metrics_check: lateness _count %g != fired %g after shutdown\n", count, fired);
        return 1;
    }
    std::printf("metrics_check: OK, %zu families, %g timers started, %g fired\n", e.families.size(), started, fired);
    return 0;
}
