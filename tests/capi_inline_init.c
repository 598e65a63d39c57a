/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* tw_config_init() and tw_timer_spec_init() are inline functions of
 * tickwheel.h (issue 9, bug 7), as tw_stats_init() and tw_queue_stats_init()
 * (1.5): this C11 program is linked WITHOUT libtickwheel (it fails to link
 * where they are only exported symbols), and checks that they fill exactly
 * the caller's sizeof. */
#include <stdio.h>
#include <string.h>

#include "tickwheel/tickwheel.h"

#define CHECK(c)                                              \
    do {                                                      \
        if (!(c)) {                                           \
            fprintf(stderr, "FAILED line %d: %s\n", __LINE__, #c); \
            return 1;                                         \
        }                                                     \
    } while (0)

int main(void) {
    struct {
        tw_config cfg;
        unsigned char canary[16];
    } a;
    struct {
        tw_timer_spec spec;
        unsigned char canary[16];
    } b;
    struct {
        tw_stats st;
        unsigned char canary[16];
    } c;
    struct {
        tw_queue_stats qs;
        unsigned char canary[16];
    } d;
    size_t i;
    memset(&c, 0xAB, sizeof c);
    memset(&d, 0xAB, sizeof d);
    tw_stats_init(&c.st);
    tw_queue_stats_init(&d.qs);
    CHECK(c.st.size == sizeof(tw_stats) && c.st.started == 0 && c.st.lateness_samples == 0 && c.st.shards == 0);
    CHECK(d.qs.size == sizeof(tw_queue_stats) && d.qs.due == 0 && d.qs.run_samples == 0 && d.qs.runners == 0);
    for (i = 0; i < sizeof c.canary; ++i) CHECK(c.canary[i] == 0xAB);
    for (i = 0; i < sizeof d.canary; ++i) CHECK(d.canary[i] == 0xAB);
    tw_stats_init(NULL);
    tw_queue_stats_init(NULL);
    memset(&a, 0xAB, sizeof a);
    memset(&b, 0xAB, sizeof b);
    tw_config_init(&a.cfg);
    tw_timer_spec_init(&b.spec);
    CHECK(a.cfg.size == sizeof(tw_config));
    CHECK(a.cfg.shards == 0 && a.cfg.workers == 0 && a.cfg.flags == 0);
    CHECK(a.cfg.resolution_ns == 0 && a.cfg.max_timers == 0 && a.cfg.name == NULL);
    CHECK(b.spec.size == sizeof(tw_timer_spec) && b.spec.shard == -1);
    CHECK(b.spec.callback == NULL && b.spec.release == NULL && b.spec.arg == NULL);
    CHECK(b.spec.delay_ns == 0 && b.spec.period_ns == 0 && b.spec.deadline_ns == 0);
    for (i = 0; i < sizeof a.canary; ++i) CHECK(a.canary[i] == 0xAB);
    for (i = 0; i < sizeof b.canary; ++i) CHECK(b.canary[i] == 0xAB);
    tw_config_init(NULL);
    tw_timer_spec_init(NULL);
    puts("1 passed, 0 failed");
    return 0;
}
