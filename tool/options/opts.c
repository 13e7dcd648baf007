/* SPDX-License-Identifier: MIT */
/* See opts.h. */
#define _GNU_SOURCE
#include "options/opts.h"

#include <ctype.h>
#include <getopt.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        /* [0-9]*(\.[0-9]*)? with at least one digit */
        uint64_t whole = 0;
        bool digits = false, overflow = false;
        while (isdigit((unsigned char)*p)) {
            if (whole > (max - 9) / 10)
                overflow = true;
            else
                whole = whole * 10 + (uint64_t)(*p - '0');
            digits = true;
            p++;
        }
        uint64_t frac = 0, scale = 1;
        if (*p == '.') {
            p++;
            while (isdigit((unsigned char)*p)) {
                /* Beyond 18 digits the fraction cannot matter at ns resolution. */
                if (scale < 1000000000000000000ULL) {
                    frac = frac * 10 + (uint64_t)(*p - '0');
                    scale *= 10;
                }
                digits = true;
                p++;
            }
        }
        if (!digits || overflow || (bare && *p)) return -1;
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

/* ---------------------------------------------------------------- the options */

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
    T_COUNT
};

#define OFF(field) offsetof(tool_opts, field)

static const struct optdef {
    const char *name;
    int has_arg;
    char shrt;
    int env;
    enum opt_type type;
    size_t off;       /* of the field in tool_opts */
    long min, max;    /* T_INT */
    const char *what; /* T_INT: what the value must be (NULL: a number from min to
                         max); T_CHOICE: the values, ", " between; T_DNS: the word */
} defs[O_COUNT] = {
    [O_ENDPOINTS] = {"endpoints", required_argument, 0, ENV_BOTH, T_STR, OFF(endpoints)},
    [O_USER] = {"user", required_argument, 0, ENV_BOTH, T_SETTING, OFF(user)},
    [O_PASSWORD] = {"password", required_argument, 0, ENV_BOTH, T_SETTING, OFF(password)},
    [O_PWFILE] = {"password-file", required_argument, 0, ENV_ELECTOR, T_SETTING,
                  OFF(password_file)},
    [O_CACERT] = {"cacert", required_argument, 0, ENV_BOTH, T_STR, OFF(cacert)},
    [O_CERT] = {"cert", required_argument, 0, ENV_BOTH, T_STR, OFF(cert)},
    [O_KEY] = {"key", required_argument, 0, ENV_BOTH, T_STR, OFF(key)},
    [O_SKIPVERIFY] = {"insecure-skip-tls-verify", optional_argument, 0, ENV_BOTH, T_BOOL,
                      OFF(insecure_skip_verify)},
    [O_INSECURE_TRANSPORT] = {"insecure-transport", optional_argument, 0, ENV_BOTH,
                              T_BOOL, OFF(insecure_transport)},
    [O_DIAL] = {"dial-timeout", required_argument, 0, ENV_BOTH, T_DUR,
                OFF(dial_timeout_ms)},
    [O_CMDTIMEOUT] = {"command-timeout", required_argument, 0, ENV_BOTH, T_DUR,
                      OFF(command_timeout_ms)},
    [O_KATIME] = {"keepalive-time", required_argument, 0, ENV_BOTH, T_DUR,
                  OFF(keepalive_time_ms)},
    [O_KATIMEOUT] = {"keepalive-timeout", required_argument, 0, ENV_BOTH, T_DUR,
                     OFF(keepalive_timeout_ms)},
    [O_WRITE] = {"write-out", required_argument, 'w', ENV_BOTH, T_CHOICE, OFF(fmt), 0, 0,
                 "simple, json"},
    [O_HEX] = {"hex", optional_argument, 0, ENV_BOTH, T_BOOL, OFF(hex)},
    [O_DEBUG] = {"debug", optional_argument, 0, ENV_BOTH, T_DEBUG, OFF(log)},
    [O_DISCOVERY_SRV] = {"discovery-srv", required_argument, 'd', ENV_BOTH, T_DNS,
                         OFF(discovery_srv), 0, 0, "domain"},
    [O_DISCOVERY_SRV_NAME] = {"discovery-srv-name", required_argument, 0, ENV_BOTH, T_DNS,
                              OFF(discovery_srv_name), 0, 0, "name"},
    [O_INSECURE_DISCOVERY] = {"insecure-discovery", optional_argument, 0, ENV_NONE, T_NOT,
                              OFF(srv_secure_only)},
    [O_TTL] = {"ttl", required_argument, 0, ENV_ELECTOR, T_TTL, OFF(ttl_s)},
    [O_LOG] = {"log-level", required_argument, 0, ENV_ELECTOR, T_CHOICE, OFF(log), 0, 0,
               "error, warn, info, debug"},
    [O_LOGFMT] = {"log-format", required_argument, 0, ENV_ELECTOR, T_CHOICE,
                  OFF(log_format), 0, 0, "text, json"},
    [O_HTTP] = {"http", required_argument, 0, ENV_NONE, T_STR, OFF(http)},
    [O_VALUE] = {"value", required_argument, 0, ENV_NONE, T_VALUE, OFF(value)},
    [O_GRACE] = {"grace", required_argument, 0, ENV_NONE, T_DUR0, OFF(grace_ms)},
    [O_PROCLAIM] = {"proclaim-stdin", no_argument, 0, ENV_NONE, T_BOOL,
                    OFF(proclaim_stdin)},
    [O_RESTART] = {"restart", no_argument, 0, ENV_NONE, T_BOOL, OFF(restart)},
    [O_PIDNS] = {"pid-namespace", no_argument, 0, ENV_NONE, T_BOOL, OFF(pid_ns)},
    [O_RELEASE] = {"release-on-exit", optional_argument, 0, ENV_ELECTOR, T_NOT,
                   OFF(no_release)},
    [O_GRACE_LOSS] = {"grace-on-loss", no_argument, 0, ENV_NONE, T_BOOL,
                      OFF(grace_on_loss)},
    [O_EVENTS_FD] = {"events-fd", required_argument, 0, ENV_NONE, T_INT, OFF(events_fd),
                     1, 1000000, "a file descriptor number"},
    [O_HEALTH_CMD] = {"health-cmd", required_argument, 0, ENV_NONE, T_SHELL,
                      OFF(health_cmd)},
    [O_HEALTH_INTERVAL] = {"health-interval", required_argument, 0, ENV_NONE, T_DUR,
                           OFF(health_interval_ms)},
    [O_HEALTH_TIMEOUT] = {"health-timeout", required_argument, 0, ENV_NONE, T_DUR,
                          OFF(health_timeout_ms)},
    [O_HEALTH_RETRIES] = {"health-retries", required_argument, 0, ENV_NONE, T_INT,
                          OFF(health_retries), 1, 1000000},
    [O_HEALTH_START] = {"health-start-period", required_argument, 0, ENV_NONE, T_DUR0,
                        OFF(health_start_ms)},
    [O_HEALTH_HOLDOFF] = {"health-holdoff", required_argument, 0, ENV_NONE, T_DUR0,
                          OFF(health_holdoff_ms)},
    [O_HEALTH_HOLDOFF_MAX] = {"health-holdoff-max", required_argument, 0, ENV_NONE,
                              T_DUR0, OFF(health_holdoff_max_ms)},
    [O_AUTO_SYNC] = {"auto-sync-interval", required_argument, 0, ENV_ELECTOR, T_DUR0,
                     OFF(auto_sync_interval_ms)},
    [O_TO] = {"to", required_argument, 0, ENV_NONE, T_STR, OFF(to)},
    [O_TIMEOUT] = {"timeout", required_argument, 0, ENV_NONE, T_DUR, OFF(timeout_ms)},
    [O_NOWAIT] = {"no-wait", optional_argument, 0, ENV_NONE, T_BOOL, OFF(no_wait)},
    [O_FAILFAST] = {"fail-fast", optional_argument, 0, ENV_ELECTOR, T_BOOL,
                    OFF(fail_fast)},
    [O_LIMIT] = {"limit", required_argument, 'n', ENV_NONE, T_INT, OFF(limit), 1, 64},
    [O_HELP] = {"help", no_argument, 'h', ENV_NONE, T_BOOL, OFF(help)},
    [O_VERSION] = {"version", no_argument, 0, ENV_NONE, T_BOOL, OFF(version)},
};

/* T_CHOICE stores an index through an int: the enums must be int-sized. */
_Static_assert(sizeof(enum tool_fmt) == sizeof(int) &&
                   sizeof(enum tool_log) == sizeof(int) &&
                   sizeof(enum tool_logfmt) == sizeof(int),
               "T_CHOICE fields are int-sized enums");

#define LONG_BASE 256 /* getopt_long's val for option i: LONG_BASE + i */

static const struct {
    const char *name;
    enum tool_cmd cmd;
} cmds[] = {{"campaign", CMD_CAMPAIGN}, {"observe", CMD_OBSERVE},
            {"leader", CMD_LEADER},     {"run", CMD_RUN},
            {"lock", CMD_LOCK},         {"switchover", CMD_SWITCHOVER},
            {"help", CMD_HELP},         {"version", CMD_VERSION}};

#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))
#define CMD_LIST "campaign, observe, leader, run, lock, switchover, help, version"

const char *tool_cmd_name(enum tool_cmd c)
{
    for (size_t k = 0; k < NCMDS; k++)
        if (cmds[k].cmd == c) return cmds[k].name;
    return NULL;
}

static enum tool_cmd find_cmd(const char *s)
{
    for (size_t k = 0; k < NCMDS; k++)
        if (!strcmp(s, cmds[k].name)) return cmds[k].cmd;
    return CMD_NONE;
}

/* What the parse collects before it is applied. */
struct raw {
    tool_setting set[O_COUNT];
};

static int usage_err(char *err, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int usage_err(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return EXIT_USAGE;
}

/* ---------------------------------------------------------------- applying */

/* A handler: applies setting s of option d to the field at f (in o). */
typedef int (*opt_fn)(tool_opts *o, const struct optdef *d, void *f,
                      const tool_setting *s, char *err, size_t cap);

static int set_duration(const tool_setting *s, int64_t *out, bool zero_ok, char *err,
                        size_t cap)
{
    if (tool_parse_duration_ms(s->value, out) == 0 && (zero_ok || *out > 0)) return 0;
    return usage_err(err, cap,
                     "%s: invalid duration '%.100s' (use e.g. 500ms, 10s, 1m30s, 1.5h)",
                     s->from, s->value);
}

static int set_bool(const tool_setting *s, bool *out, char *err, size_t cap)
{
    if (!s->value) { /* --flag without =VALUE */
        *out = true;
        return 0;
    }
    if (tool_parse_bool(s->value, out) == 0) return 0;
    return usage_err(err, cap, "%s: '%.100s' is not a boolean (true or false)", s->from,
                     s->value);
}

static int h_str(tool_opts *o, const struct optdef *d, void *f, const tool_setting *s,
                 char *err, size_t cap)
{
    (void)o, (void)d, (void)err, (void)cap;
    *(const char **)f = s->value;
    return 0;
}

static int h_setting(tool_opts *o, const struct optdef *d, void *f, const tool_setting *s,
                     char *err, size_t cap)
{
    (void)o, (void)d, (void)err, (void)cap;
    *(tool_setting *)f = *s;
    return 0;
}

static int h_bool(tool_opts *o, const struct optdef *d, void *f, const tool_setting *s,
                  char *err, size_t cap)
{
    (void)o, (void)d;
    return set_bool(s, f, err, cap);
}

static int h_not(tool_opts *o, const struct optdef *d, void *f, const tool_setting *s,
                 char *err, size_t cap)
{
    (void)o, (void)d;
    bool b;
    if (set_bool(s, &b, err, cap)) return EXIT_USAGE;
    *(bool *)f = !b;
    return 0;
}

static int h_dur(tool_opts *o, const struct optdef *d, void *f, const tool_setting *s,
                 char *err, size_t cap)
{
    (void)o;
    return set_duration(s, f, d->type == T_DUR0, err, cap);
}

static int h_int(tool_opts *o, const struct optdef *d, void *f, const tool_setting *s,
                 char *err, size_t cap)
{
    (void)o;
    const char *v = s->value;
    char *end;
    long n = strtol(v, &end, 10);
    if (*v && !*end && n >= d->min && n <= d->max) {
        *(int *)f = (int)n;
        return 0;
    }
    if (d->what)
        return usage_err(err, cap, "%s: '%.100s' is not %s", s->from, v, d->what);
    return usage_err(err, cap, "%s: '%.100s' is not a number from %ld to %ld", s->from, v,
                     d->min, d->max);
}

static int h_choice(tool_opts *o, const struct optdef *d, void *f, const tool_setting *s,
                    char *err, size_t cap)
{
    (void)o;
    const char *v = s->value;
    size_t n = strlen(v);
    int k = 0;
    for (const char *p = d->what; *p; k++) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncmp(p, v, n)) {
            *(int *)f = k;
            return 0;
        }
        p += len;
        p += strspn(p, ", ");
    }
    return usage_err(err, cap, "%s: '%.100s' is not one of %s", s->from, v, d->what);
}

static int h_ttl(tool_opts *o, const struct optdef *d, void *f, const tool_setting *s,
                 char *err, size_t cap)
{
    (void)o, (void)d;
    int64_t ns;
    if (tool_parse_duration_ns(s->value, &ns))
        return usage_err(err, cap,
                         "%s: invalid duration '%.100s' (use e.g. 500ms, 10s, 1m)",
                         s->from, s->value);
    if (ns < 1000000000 || ns % 1000000000)
        return usage_err(err, cap,
                         "%s: '%.100s' must be a whole number of seconds, at least 1s",
                         s->from, s->value);
    *(int64_t *)f = ns / 1000000000;
    return 0;
}

static int h_value(tool_opts *o, const struct optdef *d, void *f, const tool_setting *s,
                   char *err, size_t cap)
{
    (void)o, (void)d;
    if (*(const char **)f) /* campaign NAME VALUE --value V */
        return usage_err(err, cap,
                         "campaign: give the VALUE once (as an argument or --value)");
    *(const char **)f = s->value;
    return 0;
}

static int h_dns(tool_opts *o, const struct optdef *d, void *f, const tool_setting *s,
                 char *err, size_t cap)
{
    (void)o;
    const char *v = s->value;
    if (v && !*v && s->origin != ORIGIN_ARGV) return 0; /* an empty variable */
    if (!v || !*v || strlen(v) > 200 ||
        strspn(v, "abcdefghijklmnopqrstuvwxyz"
                  "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                  "0123456789.-_") != strlen(v))
        return usage_err(err, cap,
                         "%s: '%.100s' is not a DNS %s (letters, digits, '.', '-', '_')",
                         s->from, v ? v : "", d->what);
    *(const char **)f = v;
    return 0;
}

static int h_shell(tool_opts *o, const struct optdef *d, void *f, const tool_setting *s,
                   char *err, size_t cap)
{
    (void)o, (void)d;
    if (!*s->value)
        return usage_err(err, cap, "%s: the command must not be empty", s->from);
    *(const char **)f = s->value;
    return 0;
}

static int h_debug(tool_opts *o, const struct optdef *d, void *f, const tool_setting *s,
                   char *err, size_t cap)
{
    (void)o, (void)d;
    bool b;
    if (set_bool(s, &b, err, cap)) return EXIT_USAGE;
    if (b) *(int *)f = LOG_DEBUG;
    return 0;
}

static const opt_fn handlers[T_COUNT] = {
    [T_STR] = h_str,     [T_SETTING] = h_setting, [T_BOOL] = h_bool,
    [T_NOT] = h_not,     [T_DUR] = h_dur,         [T_DUR0] = h_dur,
    [T_INT] = h_int,     [T_CHOICE] = h_choice,   [T_TTL] = h_ttl,
    [T_VALUE] = h_value, [T_DNS] = h_dns,         [T_SHELL] = h_shell,
    [T_DEBUG] = h_debug,
};

static int apply(tool_opts *o, int id, const tool_setting *s, char *err, size_t cap)
{
    const struct optdef *d = &defs[id];
    return handlers[d->type](o, d, (char *)o + d->off, s, err, cap);
}

/* ---------------------------------------------------------------- environment */

static void env_name(char *out, size_t cap, const char *prefix, const char *opt)
{
    size_t n = (size_t)snprintf(out, cap, "%s", prefix);
    for (const char *p = opt; *p && n + 1 < cap; p++)
        out[n++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    out[n] = 0;
}

static void note_env(tool_opts *o, const char *name)
{
    size_t n = strlen(o->env_used);
    snprintf(o->env_used + n, sizeof(o->env_used) - n, "%s%s", n ? " " : "", name);
}

/* Fills every option the command line left unset from ELECTOR_* or ETCDCTL_*. */
static void from_env(struct raw *r, tool_getenv_fn env, tool_opts *o)
{
    if (!env) return;
    for (int i = 0; i < O_COUNT; i++) {
        if (r->set[i].origin != ORIGIN_NONE || defs[i].env == ENV_NONE) continue;
        for (int k = 0; k < (defs[i].env == ENV_BOTH ? 2 : 1); k++) {
            char name[64];
            env_name(name, sizeof(name), k ? "ETCDCTL_" : "ELECTOR_", defs[i].name);
            const char *v = env(name);
            if (!v) continue;
            tool_setting *s = &r->set[i];
            s->value = v;
            s->origin = k ? ORIGIN_ETCDCTL : ORIGIN_ELECTOR;
            snprintf(s->from, sizeof(s->from), "$%s", name);
            note_env(o, name);
            break;
        }
    }
}

/* ---------------------------------------------------------------- positionals */

/* Returns 0, 1 when the argument starts the command of run/lock, or EXIT_USAGE. */
static int positional(tool_opts *o, const char *a, int *npos, char *err, size_t cap)
{
    if (o->cmd == CMD_NONE) {
        o->cmd = find_cmd(a);
        if (o->cmd == CMD_NONE)
            return usage_err(err, cap,
                             "unknown command '%.100s' (commands: " CMD_LIST ")", a);
        return 0;
    }
    if (o->cmd == CMD_HELP && *npos == 0) {
        o->help_cmd = find_cmd(a);
        if (o->help_cmd == CMD_NONE)
            return usage_err(
                err, cap, "help: unknown command '%.100s' (commands: " CMD_LIST ")", a);
        if (o->help_cmd == CMD_HELP) o->help_cmd = CMD_NONE;
        (*npos)++;
        return 0;
    }
    if (o->cmd == CMD_HELP || o->cmd == CMD_VERSION)
        return usage_err(err, cap, "unexpected argument '%.100s' (see elector --help)",
                         a);
    if (*npos == 0)
        o->name = a;
    else if (*npos == 1 && o->cmd == CMD_CAMPAIGN)
        o->value = a;
    else if (o->cmd == CMD_RUN || o->cmd == CMD_LOCK)
        return 1;
    else
        return usage_err(err, cap, "unexpected argument '%.100s' (see elector --help)",
                         a);
    (*npos)++;
    return 0;
}

/* ---------------------------------------------------------------- checks */

static int check(tool_opts *o, const struct raw *r, char *err, size_t cap)
{
    if (o->cmd == CMD_HELP || o->cmd == CMD_VERSION) return 0;
    if (o->help) {
        o->help_cmd = o->cmd;
        return 0;
    }
    if (o->version) return 0;
    if (o->cmd == CMD_NONE)
        return usage_err(err, cap,
                         "no command given (commands: " CMD_LIST "; see elector --help)");
    if (!o->name)
        return usage_err(err, cap, "missing %s NAME (see elector %s --help)",
                         o->cmd == CMD_LOCK ? "lock" : "election", tool_cmd_name(o->cmd));
    if (!*o->name)
        return usage_err(err, cap, "%s NAME must not be empty",
                         o->cmd == CMD_LOCK ? "lock" : "election");
    bool supervised = o->argv && o->argv[0];
    if (o->cmd == CMD_RUN && !supervised)
        return usage_err(
            err, cap,
            "run: missing command after '--' (elector run NAME -- CMD ARGS...)");
    if (o->argv && !o->argv[0] && o->cmd == CMD_LOCK)
        return usage_err(err, cap,
                         "lock: missing command after '--' (elector lock NAME -- "
                         "CMD ARGS..., or no '--' to hold the lock)");
    /* The command-specific options, as given on the command line. */
    bool given[O_COUNT];
    for (int i = 0; i < O_COUNT; i++)
        given[i] = r->set[i].origin == ORIGIN_ARGV;
    if (o->proclaim_stdin && o->cmd != CMD_CAMPAIGN)
        return usage_err(err, cap, "--proclaim-stdin is only for `elector campaign`");
    /* The members from DNS or from --endpoints: the command line beats the
     * environment; both on the command line is a mistake. */
    if (o->discovery_srv && given[O_ENDPOINTS] && given[O_DISCOVERY_SRV])
        return usage_err(
            err, cap, "--endpoints and --discovery-srv both name the members: give one");
    if (o->discovery_srv && given[O_ENDPOINTS])
        o->discovery_srv = NULL;
    else if (o->discovery_srv)
        o->endpoints = NULL;
    if (given[O_DISCOVERY_SRV_NAME] && !o->discovery_srv)
        return usage_err(err, cap, "--discovery-srv-name needs --discovery-srv DOMAIN");
    if ((given[O_RESTART] || given[O_GRACE] || given[O_PIDNS] || given[O_GRACE_LOSS]) &&
        !supervised)
        return usage_err(err, cap,
                         "--restart, --grace, --grace-on-loss and --pid-namespace are "
                         "only for `elector run` and `elector lock NAME CMD`");
    if (given[O_RELEASE] &&
        (supervised || (o->cmd != CMD_CAMPAIGN && o->cmd != CMD_LOCK)))
        return usage_err(err, cap,
                         "--release-on-exit is for campaign and lock without a command "
                         "(run's guard releases the lease itself)");
    if (given[O_EVENTS_FD] && (!supervised || o->fmt != FMT_JSON))
        return usage_err(err, cap,
                         "--events-fd is for `elector -w json run` (or lock with "
                         "a command)");
    if (given[O_HTTP] && (o->cmd == CMD_LEADER || o->cmd == CMD_SWITCHOVER))
        return usage_err(err, cap, "--http is for campaign, run, lock and observe");
    bool health_opt = given[O_HEALTH_INTERVAL] || given[O_HEALTH_TIMEOUT] ||
                      given[O_HEALTH_RETRIES] || given[O_HEALTH_START] ||
                      given[O_HEALTH_HOLDOFF] || given[O_HEALTH_HOLDOFF_MAX];
    if ((given[O_HEALTH_CMD] || health_opt) && o->cmd != CMD_RUN &&
        o->cmd != CMD_CAMPAIGN)
        return usage_err(err, cap,
                         "--health-cmd and --health-* are for run and campaign");
    if (health_opt && !o->health_cmd)
        return usage_err(err, cap,
                         "--health-interval, --health-timeout, --health-retries, "
                         "--health-start-period, --health-holdoff and "
                         "--health-holdoff-max need --health-cmd");
    /* Only --health-holdoff given: the bound follows it up if need be. */
    if (!given[O_HEALTH_HOLDOFF_MAX] && o->health_holdoff_max_ms < o->health_holdoff_ms)
        o->health_holdoff_max_ms = o->health_holdoff_ms;
    if (o->health_holdoff_max_ms < o->health_holdoff_ms)
        return usage_err(err, cap,
                         "--health-holdoff-max (%lldms) must not be less than "
                         "--health-holdoff (%lldms)",
                         (long long)o->health_holdoff_max_ms,
                         (long long)o->health_holdoff_ms);
    bool waits = o->cmd == CMD_CAMPAIGN || o->cmd == CMD_RUN || o->cmd == CMD_LOCK;
    if (given[O_TO] && o->cmd != CMD_SWITCHOVER)
        return usage_err(err, cap, "--to is for `elector switchover`");
    if (given[O_TIMEOUT] && o->cmd != CMD_SWITCHOVER && !waits)
        return usage_err(err, cap,
                         "--timeout is for campaign, run, lock (how long to wait) and "
                         "switchover");
    if (given[O_NOWAIT] && !waits)
        return usage_err(err, cap, "--no-wait is for campaign, run and lock");
    if (given[O_LIMIT] && o->cmd != CMD_LOCK)
        return usage_err(err, cap, "-n/--limit is for `elector lock` (a semaphore)");
    if (o->limit > 1 && (o->restart || o->http))
        return usage_err(err, cap, "-n/--limit does not go with --restart or --http");
    if (o->no_wait && given[O_TIMEOUT])
        return usage_err(err, cap, "--no-wait and --timeout exclude each other");
    if (given[O_FAILFAST] && !waits && o->cmd != CMD_OBSERVE)
        return usage_err(err, cap,
                         "--fail-fast is for campaign, run, lock and observe (leader and "
                         "switchover always fail fast)");
    if (o->cmd == CMD_SWITCHOVER && !o->to)
        return usage_err(err, cap,
                         "switchover: missing --to VALUE (the value of the candidate "
                         "that is to lead)");
    if (given[O_VALUE] && o->cmd != CMD_RUN && o->cmd != CMD_CAMPAIGN)
        return usage_err(err, cap,
                         "--value is only for campaign and run (a lock's value "
                         "is empty, as etcdctl's)");
    if ((o->cert == NULL) != (o->key == NULL))
        return usage_err(err, cap, "--cert and --key go together");
    return 0;
}

/* ---------------------------------------------------------------- the parse */

/* A message for an option getopt did not take. */
static int bad_option(int argc, char **argv, int c, char *err, size_t cap)
{
    const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "";
    if (c == ':') {
        if (optopt >= LONG_BASE || !optopt)
            return usage_err(err, cap, "option '%.100s' needs a value", arg);
        return usage_err(err, cap, "option '-%c' needs a value", optopt);
    }
    if (optopt >= LONG_BASE)
        return usage_err(err, cap, "option '--%s' takes no value",
                         defs[optopt - LONG_BASE].name);
    if (optopt)
        return usage_err(err, cap, "unknown option '-%c' (see elector --help)", optopt);
    /* A long option: unknown, or an abbreviation of several. */
    const char *nm = arg + 2;
    size_t len = strcspn(nm, "=");
    int matches = 0;
    for (int i = 0; i < O_COUNT && !strncmp(arg, "--", 2); i++)
        if (len && !strncmp(defs[i].name, nm, len)) matches++;
    if (matches > 1)
        return usage_err(err, cap, "ambiguous option '%.100s' (see elector --help)", arg);
    return usage_err(err, cap, "unknown option '%.100s' (see elector --help)", arg);
}

/* Records option id's value as given on the command line (as_short: typed as -w). */
static void record(struct raw *r, int id, bool as_short, char **argv)
{
    tool_setting *s = &r->set[id];
    s->value = optarg;
    s->origin = ORIGIN_ARGV;
    /* The value lies in the argument getopt just passed: "--user=V", "-wV" or
     * the separate "V" itself. */
    s->argi = optind - 1;
    s->argoff = optarg && optarg >= argv[s->argi] ? (size_t)(optarg - argv[s->argi]) : 0;
    if (as_short)
        snprintf(s->from, sizeof(s->from), "-%c", defs[id].shrt);
    else
        snprintf(s->from, sizeof(s->from), "--%s", defs[id].name);
}

int tool_parse_args_env(int argc, char **argv, tool_getenv_fn env, tool_opts *o,
                        char *err, size_t cap)
{
    memset(o, 0, sizeof(*o));
    o->log = LOG_INFO;
    o->grace_ms = -1;
    o->insecure_transport = true;
    o->health_interval_ms = 10000;
    o->health_timeout_ms = 10000;
    o->health_retries = 3;
    o->health_holdoff_ms = 10000;
    o->health_holdoff_max_ms = 300000;
    if (cap) err[0] = 0;
    struct option longopts[O_COUNT + 1];
    char shorts[16] = "-:"; /* in order, positionals as 1; ':' for a missing value */
    size_t ns = 2;
    for (int i = 0; i < O_COUNT; i++) {
        longopts[i] = (struct option){defs[i].name, defs[i].has_arg, NULL, LONG_BASE + i};
        if (defs[i].shrt) {
            shorts[ns++] = defs[i].shrt;
            if (defs[i].has_arg == required_argument) shorts[ns++] = ':';
        }
    }
    shorts[ns] = 0;
    longopts[O_COUNT] = (struct option){0};

    struct raw r;
    memset(&r, 0, sizeof(r));
    int npos = 0;
    optind = 0; /* a fresh scan (glibc), also when called again */
    opterr = 0;
    for (;;) {
        int before = optind ? optind : 1;
        int c = getopt_long(argc, argv, shorts, longopts, NULL);
        if (c == -1) {
            /* After `--`, the rest is positional: for run/lock, the command. */
            bool dashes =
                before < argc && optind == before + 1 && !strcmp(argv[before], "--");
            if (optind < argc || dashes) {
                if ((o->cmd == CMD_RUN || o->cmd == CMD_LOCK) && o->name) {
                    o->argv = argv + optind;
                    o->cmd_after_dashes = dashes;
                } else {
                    for (int i = optind; i < argc; i++) {
                        int rc = positional(o, argv[i], &npos, err, cap);
                        if (rc == 1) {
                            o->argv = argv + i;
                            o->cmd_after_dashes = dashes;
                            break;
                        }
                        if (rc) return rc;
                    }
                    if ((o->cmd == CMD_RUN || o->cmd == CMD_LOCK) && !o->argv && dashes)
                        o->argv = argv + argc; /* `--` and nothing after it */
                }
            }
            break;
        }
        if (c == 1) {
            int rc = positional(o, optarg, &npos, err, cap);
            if (rc == 1) { /* the command of run/lock: the rest is its own */
                o->argv = argv + optind - 1;
                break;
            }
            if (rc) return rc;
            continue;
        }
        if (c == '?' || c == ':') return bad_option(argc, argv, c, err, cap);
        int id = -1;
        if (c >= LONG_BASE) {
            id = c - LONG_BASE;
        } else {
            for (int i = 0; i < O_COUNT; i++)
                if (defs[i].shrt == c) id = i;
        }
        if (id < 0) return usage_err(err, cap, "unknown option '-%c'", c);
        record(&r, id, c < LONG_BASE, argv);
    }
    from_env(&r, env, o);
    /* --debug first, so that --log-level, when both are given, decides. */
    if (r.set[O_DEBUG].origin && apply(o, O_DEBUG, &r.set[O_DEBUG], err, cap))
        return EXIT_USAGE;
    for (int i = 0; i < O_COUNT; i++) {
        if (i == O_DEBUG || !r.set[i].origin) continue;
        if (apply(o, i, &r.set[i], err, cap)) return EXIT_USAGE;
    }
    int rc = check(o, &r, err, cap);
    if (o->grace_ms < 0 && !(o->argv && o->argv[0])) o->grace_ms = 0;
    return rc;
}

/* --insecure-transport=false: endpoints without a scheme use TLS. */
char *tool_endpoints_https(const char *eps)
{
    size_t n = strlen(eps), parts = 1;
    for (const char *p = eps; *p; p++)
        parts += *p == ',';
    char *out = malloc(n + parts * 8 + 1), *o = out;
    if (!out) return NULL;
    for (const char *p = eps;;) {
        size_t len = strcspn(p, ",");
        bool scheme = memmem(p, len, "://", 3) != NULL;
        if (!scheme && len) o = stpcpy(o, "https://");
        memcpy(o, p, len);
        o += len;
        if (!p[len]) break;
        *o++ = ',';
        p += len + 1;
    }
    *o = 0;
    return out;
}

const char *tool_option_name(int i, char *shrt, int *env)
{
    if (i < 0 || i >= O_COUNT) return NULL;
    if (shrt) *shrt = defs[i].shrt;
    if (env) *env = defs[i].env;
    return defs[i].name;
}

static const char *real_getenv(const char *name)
{
    return getenv(name);
}

int tool_parse_args(int argc, char **argv, tool_opts *o, char *err, size_t cap)
{
    return tool_parse_args_env(argc, argv, real_getenv, o, err, cap);
}
