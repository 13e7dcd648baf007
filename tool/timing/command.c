/* SPDX-License-Identifier: MIT */
/* See command.h. */
#include "timing/command.h"

#include "timing/budget.h"

int tool_timing_main(const tool_opts *o, FILE *out, FILE *err)
{
    tool_timing_in in = {
        .ttl_ms = (o->ttl_s ? o->ttl_s : 10) * 1000,
        .margin_ms = o->margin_ms,
        .grace_ms = o->grace_ms, /* -1: run's default */
        .rtt_ms = o->rtt_ms,
        .election_timeout_ms = o->election_timeout_ms,
        .drift = o->drift,
        .release = !o->no_release,
        .grace_on_loss = o->grace_on_loss,
    };
    tool_timing_out fig;
    char why[512];
    if (tool_timing_budget(&in, &fig, why, sizeof why)) {
        fprintf(err, "elector: timing: %s\n", why);
        return EXIT_USAGE;
    }
    tool_timing_report(&in, &fig, out);
    return fflush(out) ? EXIT_ERROR : EXIT_OK;
}
