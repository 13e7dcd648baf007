/* SPDX-License-Identifier: MIT */
/* elector-release: the release helper of libelector's sessions with
 * release_on_exit (see elector/election.h). libelector spawns it; it is not
 * meant to be run by hand. Its logic lives in the library (src/election/
 * release.c), beside the side that spawns it, so that both speak the same
 * orders. */
#include <stdio.h>
#include <string.h>
#include "elector/etcd.h"

int main(int argc, char **argv)
{
    if (argc > 1) {
        if (!strcmp(argv[1], "--version")) {
            printf("elector-release %s\n", elector_version());
            return 0;
        }
        fprintf(stderr,
                "usage: elector-release (started by libelector for a session with "
                "release_on_exit; it takes no arguments)\n");
        return strcmp(argv[1], "--help") ? 2 : 0;
    }
    return elector_release_helper_main();
}
