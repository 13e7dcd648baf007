/* SPDX-License-Identifier: MIT */
/* The values of options that are more than a string: the command's name, Go's
 * durations and booleans, and the endpoint list made https:// (see opts.h). */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include "options/table.h"

/* ---------------------------------------------------------------- commands */

static const struct {
    const char *name;
    enum tool_cmd cmd;
} cmds[] = {
    {"campaign", CMD_CAMPAIGN}, {"observe", CMD_OBSERVE}, {"leader", CMD_LEADER},
    {"run", CMD_RUN},           {"lock", CMD_LOCK},       {"switchover", CMD_SWITCHOVER},
    {"timing", CMD_TIMING},     {"help", CMD_HELP},       {"version", CMD_VERSION}};

#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

const char *tool_cmd_name(enum tool_cmd c)
{
    for (size_t k = 0; k < NCMDS; k++)
        if (cmds[k].cmd == c) return cmds[k].name;
    return NULL;
}

enum tool_cmd tool_cmd_find(const char *s)
{
    for (size_t k = 0; k < NCMDS; k++)
        if (!strcmp(s, cmds[k].name)) return cmds[k].cmd;
    return CMD_NONE;
}

/* ---------------------------------------------------------------- durations */

/* One unit of Go's time.ParseDuration, in nanoseconds; 0 if unknown. *len is
 * how many bytes the unit took. */
static const struct {
    const char *name;
    int64_t ns;
} units[] = {
    {"ns", 1},
    {"us", 1000},
    {"\xc2\xb5s", 1000}, /* U+00B5 micro sign */
    {"\xce\xbcs", 1000}, /* U+03BC Greek mu */
    {"ms", 1000000},
    {"s", 1000000000},
    {"m", 60LL * 1000000000},
    {"h", 3600LL * 1000000000},
};

static int64_t unit_ns(const char *s, size_t *len)
{
    size_t n = 0;
    while (s[n] && !isdigit((unsigned char)s[n]) && s[n] != '.')
        n++;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strlen(units[i].name) == n && !strncmp(s, units[i].name, n)) {
            *len = n;
            return units[i].ns;
        }
    }
    return 0;
}

/* [0-9]*(\.[0-9]*)? with at least one digit, at *p (moved past it): the whole
 * part and the fraction frac/scale. 0, or -1 (no digit, overflow). */
static int number(const char **pp, uint64_t *whole, uint64_t *frac, uint64_t *scale)
{
    const uint64_t max = INT64_MAX;
    const char *p = *pp;
    bool digits = false, overflow = false;
    *whole = 0;
    while (isdigit((unsigned char)*p)) {
        if (*whole > (max - 9) / 10)
            overflow = true;
        else
            *whole = *whole * 10 + (uint64_t)(*p - '0');
        digits = true;
        p++;
    }
    *frac = 0;
    *scale = 1;
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p)) {
            /* Beyond 18 digits the fraction cannot matter at ns resolution. */
            if (*scale < 1000000000000000000ULL) {
                *frac = *frac * 10 + (uint64_t)(*p - '0');
                *scale *= 10;
            }
            digits = true;
            p++;
        }
    }
    *pp = p;
    return digits && !overflow ? 0 : -1;
}

int tool_parse_duration_ns(const char *s, int64_t *ns)
{
    if (!s || !*s) return -1;
    if (!strcmp(s, "0")) {
        *ns = 0;
        return 0;
    }
    /* A bare decimal number: seconds. */
    bool bare = !s[strspn(s, "0123456789.")];
    const uint64_t max = INT64_MAX;
    uint64_t total = 0;
    const char *p = s;
    while (*p) {
        uint64_t whole, frac, scale;
        if (number(&p, &whole, &frac, &scale) || (bare && *p)) return -1;
        int64_t unit;
        size_t ulen = 0;
        if (bare) {
            unit = 1000000000;
        } else {
            unit = unit_ns(p, &ulen);
            if (!unit) return -1;
        }
        p += ulen;
        if (whole > max / (uint64_t)unit) return -1;
        uint64_t v = whole * (uint64_t)unit;
        /* frac/scale of a unit, in ns: exact for every unit (at most 3.6e12 ns)
         * with at most 18 fraction digits, computed without overflow. */
        long double f = (long double)frac * (long double)unit / (long double)scale;
        uint64_t fv = (uint64_t)f;
        if (v > max - fv) return -1;
        v += fv;
        if (total > max - v) return -1;
        total += v;
    }
    *ns = (int64_t)total;
    return 0;
}

int tool_parse_duration_ms(const char *s, int64_t *ms)
{
    int64_t ns;
    if (tool_parse_duration_ns(s, &ns)) return -1;
    *ms = ns / 1000000 + (ns % 1000000 != 0);
    return 0;
}

static const char *const bool_yes[] = {"1", "t", "T", "TRUE", "true", "True"};
static const char *const bool_no[] = {"0", "f", "F", "FALSE", "false", "False"};

int tool_parse_bool(const char *s, bool *v)
{
    for (size_t i = 0; s && i < 6; i++) {
        if (!strcmp(s, bool_yes[i])) return *v = true, 0;
        if (!strcmp(s, bool_no[i])) return *v = false, 0;
    }
    return -1;
}
