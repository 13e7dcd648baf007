#include "opts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tool_parse_duration_ms(const char *s, int64_t *ms)
{
    /* A plain decimal number, then a unit: strtod alone would also take hex,
     * exponents, "inf" and "nan". */
    size_t n = s ? strspn(s, "0123456789.") : 0;
    char num[32];
    if (n == 0 || n >= sizeof(num)) return -1;
    memcpy(num, s, n);
    num[n] = 0;
    if (strchr(num, '.') != strrchr(num, '.') || !strcmp(num, ".")) return -1;
    double v = strtod(num, NULL);
    const char *unit = s + n;
    double mul;
    if (!*unit || !strcmp(unit, "s")) mul = 1000;
    else if (!strcmp(unit, "ms")) mul = 1;
    else if (!strcmp(unit, "m")) mul = 60000;
    else if (!strcmp(unit, "h")) mul = 3600000;
    else return -1;
    double r = v * mul;
    if (!isfinite(r) || r > 9.0e15) return -1;
    *ms = (int64_t)(r + 0.5); /* r >= 0: rounds to nearest without libm */
    return 0;
}

static const struct {
    const char *name;
    enum tool_cmd cmd;
} cmds[] = {{"campaign", CMD_CAMPAIGN}, {"observe", CMD_OBSERVE},
            {"leader", CMD_LEADER},     {"run", CMD_RUN}};

enum opt_id {
    O_ENDPOINTS, O_TTL, O_DIAL, O_CACERT, O_CERT, O_KEY, O_USER, O_PWFILE, O_LOG, O_WRITE,
    O_HTTP, O_VALUE, O_GRACE, O_PROCLAIM, O_RESTART, O_HELP, O_VERSION, O_EVENTS_FD
};

static const struct {
    const char *long_name;
    char short_name;
    bool takes_value;
    enum opt_id id;
} opts[] = {
    {"endpoints", 0, true, O_ENDPOINTS}, {"ttl", 0, true, O_TTL},
    {"dial-timeout", 0, true, O_DIAL},   {"cacert", 0, true, O_CACERT},
    {"cert", 0, true, O_CERT},           {"key", 0, true, O_KEY},
    {"user", 0, true, O_USER},           {"password-file", 0, true, O_PWFILE},
    {"log-level", 0, true, O_LOG},       {"write-out", 'w', true, O_WRITE},
    {"http", 0, true, O_HTTP},           {"value", 0, true, O_VALUE},
    {"grace", 0, true, O_GRACE},         {"proclaim-stdin", 0, false, O_PROCLAIM},
    {"restart", 0, false, O_RESTART},    {"help", 'h', false, O_HELP},
    {"version", 0, false, O_VERSION},    {"events-fd", 0, true, O_EVENTS_FD},
};

#define NOPTS (sizeof(opts) / sizeof(opts[0]))

static int usage_err(char *err, size_t cap, const char *fmt, const char *a)
{
    snprintf(err, cap, fmt, a);
    return EXIT_USAGE;
}

static int set_duration(const char *flag, const char *v, int64_t *out, char *err, size_t cap)
{
    if (tool_parse_duration_ms(v, out) == 0 && *out > 0) return 0;
    snprintf(err, cap, "%s: invalid duration '%.100s' (use e.g. 500ms, 10s, 1m)", flag, v);
    return EXIT_USAGE;
}

static int apply(tool_opts *o, enum opt_id id, const char *v, char *err, size_t cap)
{
    int64_t ms;
    switch (id) {
    case O_ENDPOINTS: o->endpoints = v; break;
    case O_TTL:
        if (set_duration("--ttl", v, &ms, err, cap)) return EXIT_USAGE;
        if (ms < 1000 || ms % 1000)
            return usage_err(err, cap, "--ttl: '%.100s' must be a whole number of seconds, at least 1s", v);
        o->ttl_s = ms / 1000;
        break;
    case O_DIAL: return set_duration("--dial-timeout", v, &o->dial_timeout_ms, err, cap);
    case O_GRACE:
        if (tool_parse_duration_ms(v, &o->grace_ms))
            return usage_err(err, cap, "--grace: invalid duration '%.100s' (use e.g. 500ms, 2s)", v);
        break;
    case O_CACERT: o->cacert = v; break;
    case O_CERT: o->cert = v; break;
    case O_KEY: o->key = v; break;
    case O_USER: o->user = v; break;
    case O_PWFILE: o->password_file = v; break;
    case O_HTTP: o->http = v; break;
    case O_VALUE: o->value = v; break;
    case O_LOG:
        if (!strcmp(v, "error")) o->log = LOG_ERROR;
        else if (!strcmp(v, "warn")) o->log = LOG_WARN;
        else if (!strcmp(v, "info")) o->log = LOG_INFO;
        else if (!strcmp(v, "debug")) o->log = LOG_DEBUG;
        else return usage_err(err, cap, "--log-level: '%.100s' is not one of error, warn, info, debug", v);
        break;
    case O_WRITE:
        if (!strcmp(v, "simple")) o->fmt = FMT_SIMPLE;
        else if (!strcmp(v, "json")) o->fmt = FMT_JSON;
        else return usage_err(err, cap, "--write-out: '%.100s' is not one of simple, json", v);
        break;
    case O_PROCLAIM: o->proclaim_stdin = true; break;
    case O_RESTART: o->restart = true; break;
    case O_HELP: o->help = true; break;
    case O_VERSION: o->version = true; break;
    case O_EVENTS_FD: {
        char *end;
        long fd = strtol(v, &end, 10);
        if (!*v || *end || fd < 1 || fd > 1000000)
            return usage_err(err, cap, "--events-fd: '%.100s' is not a file descriptor number", v);
        o->events_fd = (int)fd;
        break;
    }
    }
    return 0;
}

/* Parses one option at argv[*i]; advances *i past its value. */
static int parse_opt(tool_opts *o, int argc, char **argv, int *i, char *err, size_t cap)
{
    const char *a = argv[*i], *val = NULL;
    size_t k;
    bool is_long = a[1] == '-';
    const char *nm = a + (is_long ? 2 : 1);
    size_t nlen = strcspn(nm, "=");
    for (k = 0; k < NOPTS; k++) {
        if (is_long ? (strlen(opts[k].long_name) == nlen && !strncmp(opts[k].long_name, nm, nlen))
                    : (opts[k].short_name && nm[0] == opts[k].short_name && nlen == 1))
            break;
    }
    if (k == NOPTS) return usage_err(err, cap, "unknown option '%.100s' (see elector --help)", a);
    if (nm[nlen] == '=') {
        if (!opts[k].takes_value)
            return usage_err(err, cap, "option '%.100s' takes no value", a);
        val = nm + nlen + 1;
    } else if (opts[k].takes_value) {
        if (*i + 1 >= argc) return usage_err(err, cap, "option '%.100s' needs a value", a);
        val = argv[++*i];
    }
    return apply(o, opts[k].id, val, err, cap);
}

static int positional(tool_opts *o, const char *a, int *npos, char *err, size_t cap)
{
    if (o->cmd == CMD_NONE) {
        for (size_t k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++)
            if (!strcmp(a, cmds[k].name)) o->cmd = cmds[k].cmd;
        if (o->cmd == CMD_NONE)
            return usage_err(err, cap,
                             "unknown command '%.100s' (commands: campaign, observe, leader, run)", a);
        return 0;
    }
    if (*npos == 0) o->name = a;
    else if (*npos == 1 && o->cmd == CMD_CAMPAIGN) o->value = a;
    else return usage_err(err, cap, "unexpected argument '%.100s' (see elector --help)", a);
    (*npos)++;
    return 0;
}

static int check(tool_opts *o, char *err, size_t cap)
{
    if (o->help || o->version) return 0;
    if (o->cmd == CMD_NONE)
        return usage_err(err, cap, "%sno command given (commands: campaign, observe, leader, run; "
                                   "see elector --help)", "");
    if (!o->name) return usage_err(err, cap, "%smissing election NAME (see elector --help)", "");
    if (!*o->name) return usage_err(err, cap, "%selection NAME must not be empty", "");
    if (o->cmd == CMD_RUN && (!o->argv || !o->argv[0]))
        return usage_err(err, cap, "%srun: missing command after '--' (elector run NAME -- CMD ARGS...)", "");
    if (o->cmd != CMD_RUN && o->argv)
        return usage_err(err, cap, "%s'--' COMMAND is only for `elector run`", "");
    if (o->proclaim_stdin && o->cmd != CMD_CAMPAIGN)
        return usage_err(err, cap, "%s--proclaim-stdin is only for `elector campaign`", "");
    if ((o->restart || o->grace_ms >= 0) && o->cmd != CMD_RUN)
        return usage_err(err, cap, "%s--restart and --grace are only for `elector run`", "");
    if (o->events_fd > 0 && (o->cmd != CMD_RUN || o->fmt != FMT_JSON))
        return usage_err(err, cap, "%s--events-fd is for `elector -w json run`", "");
    if (o->http && o->cmd == CMD_LEADER)
        return usage_err(err, cap, "%s--http is for campaign, run and observe", "");
    if (o->value && o->cmd != CMD_CAMPAIGN && o->cmd != CMD_RUN)
        return usage_err(err, cap, "%sa VALUE is only for campaign and run", "");
    if ((o->cert == NULL) != (o->key == NULL))
        return usage_err(err, cap, "%s--cert and --key go together", "");
    return 0;
}

int tool_parse_args(int argc, char **argv, tool_opts *o, char *err, size_t cap)
{
    memset(o, 0, sizeof(*o));
    o->log = LOG_INFO;
    o->grace_ms = -1;
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rc;
        if (!strcmp(a, "--")) {
            o->argv = argv + i + 1;
            break;
        }
        if (a[0] == '-' && a[1]) rc = parse_opt(o, argc, argv, &i, err, cap);
        else rc = positional(o, a, &npos, err, cap);
        if (rc) return rc;
    }
    int rc = check(o, err, cap);
    if (o->grace_ms < 0 && o->cmd != CMD_RUN) o->grace_ms = 0;
    return rc;
}
