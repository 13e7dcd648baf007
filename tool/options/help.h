/* SPDX-License-Identifier: MIT */
/* The texts of `elector help [COMMAND]`, `elector --help` and `COMMAND --help`. */
#ifndef ELECTOR_TOOL_HELP_H
#define ELECTOR_TOOL_HELP_H

#include "options/opts.h"

/* The help of cmd (CMD_NONE, CMD_HELP: the general one). */
const char *tool_help(enum tool_cmd cmd);

#endif
