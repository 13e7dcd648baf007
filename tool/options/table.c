/* SPDX-License-Identifier: MIT */
/* The options: each one's name, letter, variables, and how its value is applied
 * ({type, offset} and one small handler per type). See table.h. */
#include "options/table.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct optdef tool_optdefs[O_COUNT] = {
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
    [O_MARGIN] = {"margin", required_argument, 0, ENV_NONE, T_DUR, OFF(margin_ms)},
    [O_RTT] = {"rtt", required_argument, 0, ENV_NONE, T_DUR0, OFF(rtt_ms)},
    [O_ELECTION_TIMEOUT] = {"election-timeout", required_argument, 0, ENV_NONE, T_DUR,
                            OFF(election_timeout_ms)},
    [O_DRIFT] = {"drift", required_argument, 0, ENV_NONE, T_RATIO, OFF(drift)},
    [O_HELP] = {"help", no_argument, 'h', ENV_NONE, T_BOOL, OFF(help)},
    [O_VERSION] = {"version", no_argument, 0, ENV_NONE, T_BOOL, OFF(version)},
};

/* T_CHOICE stores an index through an int: the enums must be int-sized. */
_Static_assert(sizeof(enum tool_fmt) == sizeof(int) &&
                   sizeof(enum tool_log) == sizeof(int) &&
                   sizeof(enum tool_logfmt) == sizeof(int),
               "T_CHOICE fields are int-sized enums");

int tool_usage_err(char *err, size_t cap, const char *fmt, ...)
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
    return tool_usage_err(
        err, cap, "%s: invalid duration '%.100s' (use e.g. 500ms, 10s, 1m30s, 1.5h)",
        s->from, s->value);
}

static int set_bool(const tool_setting *s, bool *out, char *err, size_t cap)
{
    if (!s->value) { /* --flag without =VALUE */
        *out = true;
        return 0;
    }
    if (tool_parse_bool(s->value, out) == 0) return 0;
    return tool_usage_err(err, cap, "%s: '%.100s' is not a boolean (true or false)",
                          s->from, s->value);
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
        return tool_usage_err(err, cap, "%s: '%.100s' is not %s", s->from, v, d->what);
    return tool_usage_err(err, cap, "%s: '%.100s' is not a number from %ld to %ld",
                          s->from, v, d->min, d->max);
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
    return tool_usage_err(err, cap, "%s: '%.100s' is not one of %s", s->from, v, d->what);
}

static int h_ttl(tool_opts *o, const struct optdef *d, void *f, const tool_setting *s,
                 char *err, size_t cap)
{
    (void)o, (void)d;
    int64_t ns;
    if (tool_parse_duration_ns(s->value, &ns))
        return tool_usage_err(err, cap,
                              "%s: invalid duration '%.100s' (use e.g. 500ms, 10s, 1m)",
                              s->from, s->value);
    if (ns < 1000000000 || ns % 1000000000)
        return tool_usage_err(
            err, cap, "%s: '%.100s' must be a whole number of seconds, at least 1s",
            s->from, s->value);
    *(int64_t *)f = ns / 1000000000;
    return 0;
}

static int h_value(tool_opts *o, const struct optdef *d, void *f, const tool_setting *s,
                   char *err, size_t cap)
{
    (void)o, (void)d;
    if (*(const char **)f) /* campaign NAME VALUE --value V */
        return tool_usage_err(
            err, cap, "campaign: give the VALUE once (as an argument or --value)");
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
        return tool_usage_err(
            err, cap, "%s: '%.100s' is not a DNS %s (letters, digits, '.', '-', '_')",
            s->from, v ? v : "", d->what);
    *(const char **)f = v;
    return 0;
}

static int h_shell(tool_opts *o, const struct optdef *d, void *f, const tool_setting *s,
                   char *err, size_t cap)
{
    (void)o, (void)d;
    if (!*s->value)
        return tool_usage_err(err, cap, "%s: the command must not be empty", s->from);
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

static int h_ratio(tool_opts *o, const struct optdef *d, void *f, const tool_setting *s,
                   char *err, size_t cap)
{
    (void)o, (void)d;
    const char *v = s->value;
    /* Digits and a point, then '%' or nothing: no sign, exponent, hex or "inf". */
    size_t n = strspn(v, "0123456789.");
    bool pct = v[n] == '%';
    char *end;
    double x = n ? strtod(v, &end) / (pct ? 100 : 1) : -1;
    if (n && end == v + n && !v[n + pct] && x < 1) {
        *(double *)f = x;
        return 0;
    }
    return tool_usage_err(err, cap,
                          "%s: '%.100s' is not a fraction below 1 or a percentage "
                          "below 100%% (e.g. 0.005 or 0.5%%)",
                          s->from, v);
}

static const opt_fn handlers[T_COUNT] = {
    [T_STR] = h_str,     [T_SETTING] = h_setting, [T_BOOL] = h_bool,
    [T_NOT] = h_not,     [T_DUR] = h_dur,         [T_DUR0] = h_dur,
    [T_INT] = h_int,     [T_CHOICE] = h_choice,   [T_TTL] = h_ttl,
    [T_VALUE] = h_value, [T_DNS] = h_dns,         [T_SHELL] = h_shell,
    [T_DEBUG] = h_debug, [T_RATIO] = h_ratio,
};

int tool_opt_apply(tool_opts *o, int id, const tool_setting *s, char *err, size_t cap)
{
    const struct optdef *d = &tool_optdefs[id];
    return handlers[d->type](o, d, (char *)o + d->off, s, err, cap);
}
