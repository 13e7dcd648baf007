/* SPDX-License-Identifier: MIT */
/* Private to options/: the table of the options (table.c), shared by the parse
 * (opts.c) and the checks of what goes together (check.c). */
#ifndef ELECTOR_TOOL_OPTIONS_TABLE_H
#define ELECTOR_TOOL_OPTIONS_TABLE_H

#include <getopt.h>
#include <stddef.h>
#include "options/opts.h"

/* The command named s (values.c); CMD_NONE if none. */
enum tool_cmd tool_cmd_find(const char *s);

/* The options, as indexes of tool_optdefs. */
enum opt_id {
    O_ENDPOINTS,
    O_USER,
    O_PASSWORD,
    O_PWFILE,
    O_CACERT,
    O_CERT,
    O_KEY,
    O_SKIPVERIFY,
    O_INSECURE_TRANSPORT,
    O_DIAL,
    O_CMDTIMEOUT,
    O_KATIME,
    O_KATIMEOUT,
    O_WRITE,
    O_HEX,
    O_DEBUG,
    O_DISCOVERY_SRV,
    O_DISCOVERY_SRV_NAME,
    O_INSECURE_DISCOVERY,
    O_TTL,
    O_LOG,
    O_LOGFMT,
    O_HTTP,
    O_VALUE,
    O_GRACE,
    O_PROCLAIM,
    O_RESTART,
    O_PIDNS,
    O_RELEASE,
    O_GRACE_LOSS,
    O_EVENTS_FD,
    O_HEALTH_CMD,
    O_HEALTH_INTERVAL,
    O_HEALTH_TIMEOUT,
    O_HEALTH_RETRIES,
    O_HEALTH_START,
    O_HEALTH_HOLDOFF,
    O_HEALTH_HOLDOFF_MAX,
    O_AUTO_SYNC,
    O_TO,
    O_TIMEOUT,
    O_NOWAIT,
    O_FAILFAST,
    O_LIMIT,
    O_MARGIN,
    O_RTT,
    O_ELECTION_TIMEOUT,
    O_DRIFT,
    O_HELP,
    O_VERSION,
    O_COUNT
};

/* Environment variables of an option. */
enum { ENV_NONE, ENV_ELECTOR, ENV_BOTH };

/* How an option's value is applied to tool_opts: one small handler per type,
 * chosen through the table below (the shape of curl's tool_getparam.c). */
enum opt_type {
    T_STR,     /* const char *: the value as given */
    T_SETTING, /* tool_setting: the value and where it came from (the secrets) */
    T_BOOL,    /* bool: --flag, --flag=true|false */
    T_NOT,     /* bool: the negation of the value (--release-on-exit=false) */
    T_DUR,     /* int64_t milliseconds: a duration above 0 */
    T_DUR0,    /* int64_t milliseconds: a duration, 0 allowed */
    T_INT,     /* int: a number from min to max */
    T_CHOICE,  /* an enum: the value's place in the list `what` */
    T_TTL,     /* int64_t seconds: a whole number of seconds, at least 1 */
    T_VALUE,   /* const char *: the campaign value, given once */
    T_DNS,     /* const char *: a DNS `what` (domain, name); an empty variable is unset */
    T_SHELL,   /* const char *: a shell command, not empty */
    T_DEBUG,   /* --debug: the log level to debug */
    T_RATIO,   /* double: a fraction below 1 (0.005) or a percentage below 100 (0.5%) */
    T_COUNT
};

#define OFF(field) offsetof(tool_opts, field)

struct optdef {
    const char *name;
    int has_arg;
    char shrt;
    int env;
    enum opt_type type;
    size_t off;       /* of the field in tool_opts */
    long min, max;    /* T_INT */
    const char *what; /* T_INT: what the value must be (NULL: a number from min to
                         max); T_CHOICE: the values, ", " between; T_DNS: the word */
};

extern const struct optdef tool_optdefs[O_COUNT];

/* What the parse collects before it is applied. */
struct raw {
    tool_setting set[O_COUNT];
};

#define CMD_LIST "campaign, observe, leader, run, lock, switchover, timing, help, version"

/* Writes the message to err and returns EXIT_USAGE. */
int tool_usage_err(char *err, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Applies setting s of option id to o through its handler: 0 or EXIT_USAGE. */
int tool_opt_apply(tool_opts *o, int id, const tool_setting *s, char *err, size_t cap);

/* What goes together, once every option is applied: 0 or EXIT_USAGE. */
int tool_opts_check(tool_opts *o, const struct raw *r, char *err, size_t cap);

#endif
