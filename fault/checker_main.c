/* SPDX-License-Identifier: MIT */
/* fault-checker: checks one scenario directory of a fault run (see checker.h).
 *
 *   fault-checker [--bound-ms MS] [--quiet] DIR...
 *
 * Prints every violation and a summary per directory; exit status 0 when no
 * safety or liveness violation was found, 1 otherwise, 2 on bad usage or an
 * unreadable directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checker.h"

int main(int argc, char **argv)
{
    fc_opts o = {0};
    int quiet = 0, bad = 0, status = 0, ndirs = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--bound-ms") && i + 1 < argc) {
            o.bound_ms = atoll(argv[++i]);
            continue;
        }
        if (!strcmp(argv[i], "--quiet")) {
            quiet = 1;
            continue;
        }
        if (argv[i][0] == '-') {
            fprintf(stderr, "usage: %s [--bound-ms MS] [--quiet] DIR...\n", argv[0]);
            return 2;
        }
        static fc_result r;
        ndirs++;
        int v = fc_check(argv[i], &o, &r, quiet ? NULL : stdout);
        if (v < 0) {
            bad = 1;
            continue;
        }
        printf("%s: %s: safety violations %d, liveness violations %d\n", argv[i],
               r.scenario, fc_safety(&r), r.liveness);
        if (v > 0) status = 1;
    }
    if (ndirs == 0) {
        fprintf(stderr, "usage: %s [--bound-ms MS] [--quiet] DIR...\n", argv[0]);
        return 2;
    }
    return bad ? 2 : status;
}
