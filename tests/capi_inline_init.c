/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* tw_config_init() and tw_timer_spec_init() are inline functions of
 * tickwheel.h (issue 9, bug 7): this C11 program is linked WITHOUT
 * libtickwheel (it fails to link where they are only exported symbols), and
 * checks that they fill exactly the caller's sizeof. */
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
    size_t i;
    memset(&a, 0xAB, sizeof a);
    memset(&b, 0xAB, sizeof b);
    tw_config_init(&a.cfg);
    tw_timer_spec_init(&b.spec);
    CHECK(a.cfg.size == sizeof(tw_config));
    CHECK(a.cfg.shards == 0 && a.cfg.workers == 0 && a.cfg.flags == 0);
    CHECK(a.cfg.resolution_ns == 0 && a.cfg.max_timers == 0);
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
