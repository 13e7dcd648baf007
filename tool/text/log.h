/* SPDX-License-Identifier: MIT */
/* The tool's messages on stderr: one line each, with an RFC 3339 time (UTC,
 * milliseconds) and a level, as text
 *
 *   2026-11-23T09:01:16.356Z info elector: elected: svc/694d8a1f (token 5)
 *
 * or, with --log-format json, as one JSON object per line (docs/
 * elector-log.schema.json):
 *
 *   {"time":"2026-11-23T09:01:16.356Z","level":"info","msg":"elected: ..."}
 *
 * Keys, values and texts from the server end up in these lines, so the message
 * is escaped (tool/text/escape.c) in both formats: no terminal escape sequences, no
 * forged second line. Usage errors found while parsing the command line come
 * before the format is known and are plain "elector: ..." lines. */
#ifndef ELECTOR_TOOL_LOG_H
#define ELECTOR_TOOL_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "options/opts.h"

void tool_log_setup(enum tool_log level, enum tool_logfmt fmt);

bool tool_log_enabled(enum tool_log level);

void tool_log(enum tool_log level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The line tool_log would write for msg at wall-clock time unix_ms (no newline),
 * into a malloc'd string: for tests. */
char *tool_log_format(enum tool_logfmt fmt, enum tool_log level, int64_t unix_ms,
                      const char *msg);

/* RFC 3339, UTC, milliseconds: "2026-11-23T09:01:16.356Z" (out: at least 32 bytes). */
void tool_rfc3339(int64_t unix_ms, char *out, size_t cap);

/* CLOCK_REALTIME in milliseconds. */
int64_t tool_wall_ms(void);

#endif
