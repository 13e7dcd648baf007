/* SPDX-License-Identifier: MIT */
/* See log.h. */
#define _GNU_SOURCE
#include "text/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "text/escape.h"
#include "text/json.h"

/* The logger's settings: process-wide, set once by main() (the guard process
 * forked for `run` inherits them). */
static struct {
    enum tool_log level;
    enum tool_logfmt fmt;
} g_log = {LOG_INFO, LOGFMT_TEXT};

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void tool_log_setup(enum tool_log level, enum tool_logfmt fmt)
{
    g_log.level = level;
    g_log.fmt = fmt;
}

bool tool_log_enabled(enum tool_log level)
{
    return level <= g_log.level;
}

int64_t tool_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void tool_rfc3339(int64_t unix_ms, char *out, size_t cap)
{
    time_t t = (time_t)(unix_ms / 1000);
    struct tm tm;
    char ts[40];
    if (!gmtime_r(&t, &tm) || !strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm))
        snprintf(ts, sizeof(ts), "1970-01-01T00:00:00");
    snprintf(out, cap, "%s.%03dZ", ts, (int)(unix_ms % 1000));
}

char *tool_log_format(enum tool_logfmt fmt, enum tool_log level, int64_t unix_ms,
                      const char *msg)
{
    char ts[40];
    tool_rfc3339(unix_ms, ts, sizeof(ts));
    char *esc = tool_escape_dup(msg, strlen(msg));
    if (!esc) return NULL;
    const char *lv = level_names[level <= LOG_DEBUG ? level : LOG_DEBUG];
    char *line = NULL;
    if (fmt == LOGFMT_JSON) {
        size_t len = 0, cap = 128;
        line = malloc(cap);
        if (line)
            len = (size_t)snprintf(line, cap,
                                   "{\"time\":\"%s\",\"level\":\"%s\",\"msg\":", ts, lv);
        char *q = NULL;
        if (line &&
            tool_json_str(&line, &len, &cap, (const uint8_t *)esc, strlen(esc)) == 0)
            q = realloc(line, len + 2);
        if (q) {
            q[len] = '}';
            q[len + 1] = 0;
        } else {
            free(line);
        }
        line = q;
    } else if (asprintf(&line, "%s %s elector: %s", ts, lv, esc) < 0) {
        line = NULL;
    }
    free(esc);
    return line;
}

void tool_log(enum tool_log level, const char *fmt, ...)
{
    if (!tool_log_enabled(level)) return;
    char buf[2048], *msg = buf;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof(buf) && (msg = malloc((size_t)n + 1))) {
        va_start(ap, fmt);
        vsnprintf(msg, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    if (!msg) msg = buf; /* out of memory: the truncated line */
    char *line = tool_log_format(g_log.fmt, level, tool_wall_ms(), msg);
    /* One write per line, so lines of processes sharing stderr do not mix. */
    if (line) {
        size_t len = strlen(line);
        line[len] = '\n';
        fwrite(line, 1, len + 1, stderr);
        fflush(stderr);
    } else {
        fputs("elector: (out of memory)\n", stderr);
    }
    free(line);
    if (msg != buf) free(msg);
}
