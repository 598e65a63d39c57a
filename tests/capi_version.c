/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* ctest capi_version: prints the version the built library reports
 * (tw_version()) and the one this header says, for capi/check_version.cmake. */
#include <stdio.h>

#include <tickwheel/tickwheel.h>

int main(void) {
    const uint32_t v = tw_version();
    printf("library %u.%u.%u\n", (unsigned)(v >> 16), (unsigned)((v >> 8) & 0xffu), (unsigned)(v & 0xffu));
    printf("header %d.%d.%d\n", TW_VERSION_MAJOR, TW_VERSION_MINOR, TW_VERSION_PATCH);
    printf("abi %d\n", TW_ABI_VERSION);
    return 0;
}
