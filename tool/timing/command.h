/* SPDX-License-Identifier: MIT */
/* `elector timing`: the command, from the parsed options to the report
 * (budget.h does the arithmetic). No etcd, no NAME. */
#ifndef ELECTOR_TOOL_TIMING_COMMAND_H
#define ELECTOR_TOOL_TIMING_COMMAND_H

#include <stdio.h>
#include "options/opts.h"

/* Prints the timing budget of o's settings on out and returns EXIT_OK, or the
 * refusal ("elector: timing: ...") on err and returns EXIT_USAGE. */
int tool_timing_main(const tool_opts *o, FILE *out, FILE *err);

#endif
