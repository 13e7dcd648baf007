/* SPDX-License-Identifier: MIT */
/* See opts.h. */
#define _GNU_SOURCE
#include "options/table.h"

#include <ctype.h>
#include <getopt.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LONG_BASE 256 /* getopt_long's val for option i: LONG_BASE + i */

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
        if (r->set[i].origin != ORIGIN_NONE || tool_optdefs[i].env == ENV_NONE) continue;
        for (int k = 0; k < (tool_optdefs[i].env == ENV_BOTH ? 2 : 1); k++) {
            char name[64];
            env_name(name, sizeof(name), k ? "ETCDCTL_" : "ELECTOR_",
                     tool_optdefs[i].name);
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
        o->cmd = tool_cmd_find(a);
        if (o->cmd == CMD_NONE)
            return tool_usage_err(err, cap,
                                  "unknown command '%.100s' (commands: " CMD_LIST ")", a);
        return 0;
    }
    if (o->cmd == CMD_HELP && *npos == 0) {
        o->help_cmd = tool_cmd_find(a);
        if (o->help_cmd == CMD_NONE)
            return tool_usage_err(
                err, cap, "help: unknown command '%.100s' (commands: " CMD_LIST ")", a);
        (*npos)++;
        return 0;
    }
    if (o->cmd == CMD_HELP || o->cmd == CMD_VERSION || o->cmd == CMD_TIMING)
        return tool_usage_err(err, cap,
                              "unexpected argument '%.100s' (see elector --help)", a);
    if (*npos == 0)
        o->name = a;
    else if (*npos == 1 && o->cmd == CMD_CAMPAIGN)
        o->value = a;
    else if (o->cmd == CMD_RUN || o->cmd == CMD_LOCK)
        return 1;
    else
        return tool_usage_err(err, cap,
                              "unexpected argument '%.100s' (see elector --help)", a);
    (*npos)++;
    return 0;
}

/* ---------------------------------------------------------------- the parse */

/* A message for an option getopt did not take. */
static int bad_option(int argc, char **argv, int c, char *err, size_t cap)
{
    const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "";
    if (c == ':') {
        if (optopt >= LONG_BASE || !optopt)
            return tool_usage_err(err, cap, "option '%.100s' needs a value", arg);
        return tool_usage_err(err, cap, "option '-%c' needs a value", optopt);
    }
    if (optopt >= LONG_BASE)
        return tool_usage_err(err, cap, "option '--%s' takes no value",
                              tool_optdefs[optopt - LONG_BASE].name);
    if (optopt)
        return tool_usage_err(err, cap, "unknown option '-%c' (see elector --help)",
                              optopt);
    /* A long option: unknown, or an abbreviation of several. */
    const char *nm = arg + 2;
    size_t len = strcspn(nm, "=");
    int matches = 0;
    for (int i = 0; i < O_COUNT && !strncmp(arg, "--", 2); i++)
        if (len && !strncmp(tool_optdefs[i].name, nm, len)) matches++;
    if (matches > 1)
        return tool_usage_err(err, cap, "ambiguous option '%.100s' (see elector --help)",
                              arg);
    return tool_usage_err(err, cap, "unknown option '%.100s' (see elector --help)", arg);
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
        snprintf(s->from, sizeof(s->from), "-%c", tool_optdefs[id].shrt);
    else
        snprintf(s->from, sizeof(s->from), "--%s", tool_optdefs[id].name);
}

/* The defaults of what is not 0. */
static void defaults(tool_opts *o)
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
    o->rtt_ms = 5;
    o->election_timeout_ms = 1000; /* etcd's --election-timeout */
}

/* getopt_long's tables from tool_optdefs: shorts holds at least 16 bytes. */
static void getopt_tables(struct option *longopts, char *shorts)
{
    strcpy(shorts, "-:"); /* in order, positionals as 1; ':' for a missing value */
    size_t ns = 2;
    for (int i = 0; i < O_COUNT; i++) {
        longopts[i] = (struct option){tool_optdefs[i].name, tool_optdefs[i].has_arg, NULL,
                                      LONG_BASE + i};
        if (tool_optdefs[i].shrt) {
            shorts[ns++] = tool_optdefs[i].shrt;
            if (tool_optdefs[i].has_arg == required_argument) shorts[ns++] = ':';
        }
    }
    shorts[ns] = 0;
    longopts[O_COUNT] = (struct option){0};
}

/* getopt is done (at `--` or the end): the arguments left are positionals; for
 * run/lock, the first one past NAME starts the command. before: optind before
 * the last getopt call. */
static int rest_positional(tool_opts *o, int argc, char **argv, int before, int *npos,
                           char *err, size_t cap)
{
    /* After `--`, the rest is positional: for run/lock, the command. */
    bool dashes = before < argc && optind == before + 1 && !strcmp(argv[before], "--");
    if (optind >= argc && !dashes) return 0;
    if ((o->cmd == CMD_RUN || o->cmd == CMD_LOCK) && o->name) {
        o->argv = argv + optind;
        o->cmd_after_dashes = dashes;
        return 0;
    }
    for (int i = optind; i < argc; i++) {
        int rc = positional(o, argv[i], npos, err, cap);
        if (rc == 1) {
            o->argv = argv + i;
            o->cmd_after_dashes = dashes;
            return 0;
        }
        if (rc) return rc;
    }
    if ((o->cmd == CMD_RUN || o->cmd == CMD_LOCK) && !o->argv && dashes)
        o->argv = argv + argc; /* `--` and nothing after it */
    return 0;
}

/* The command line read: the options as given into *r (applied later, after the
 * environment's), the positionals into o. 0 or the exit status. */
static int read_argv(int argc, char **argv, tool_opts *o, struct raw *r, char *err,
                     size_t cap)
{
    struct option longopts[O_COUNT + 1];
    char shorts[16];
    getopt_tables(longopts, shorts);
    int npos = 0;
    optind = 0; /* a fresh scan (glibc), also when called again */
    opterr = 0;
    for (;;) {
        int before = optind ? optind : 1;
        int c = getopt_long(argc, argv, shorts, longopts, NULL);
        if (c == -1) return rest_positional(o, argc, argv, before, &npos, err, cap);
        if (c == 1) {
            int rc = positional(o, optarg, &npos, err, cap);
            if (rc == 1) { /* the command of run/lock: the rest is its own */
                o->argv = argv + optind - 1;
                return 0;
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
                if (tool_optdefs[i].shrt == c) id = i;
        }
        if (id < 0) return tool_usage_err(err, cap, "unknown option '-%c'", c);
        record(r, id, c < LONG_BASE, argv);
    }
}

int tool_parse_args_env(int argc, char **argv, tool_getenv_fn env, tool_opts *o,
                        char *err, size_t cap)
{
    defaults(o);
    if (cap) err[0] = 0;
    struct raw r;
    memset(&r, 0, sizeof(r));
    int rc = read_argv(argc, argv, o, &r, err, cap);
    if (rc) return rc;
    from_env(&r, env, o);
    /* --debug first, so that --log-level, when both are given, decides. */
    if (r.set[O_DEBUG].origin && tool_opt_apply(o, O_DEBUG, &r.set[O_DEBUG], err, cap))
        return EXIT_USAGE;
    for (int i = 0; i < O_COUNT; i++) {
        if (i == O_DEBUG || !r.set[i].origin) continue;
        if (tool_opt_apply(o, i, &r.set[i], err, cap)) return EXIT_USAGE;
    }
    rc = tool_opts_check(o, &r, err, cap);
    /* --grace's default: the supervisor's (-1) with a command and for timing. */
    if (o->grace_ms < 0 && !(o->argv && o->argv[0]) && o->cmd != CMD_TIMING)
        o->grace_ms = 0;
    return rc;
}

const char *tool_option_name(int i, char *shrt, int *env)
{
    if (i < 0 || i >= O_COUNT) return NULL;
    if (shrt) *shrt = tool_optdefs[i].shrt;
    if (env) *env = tool_optdefs[i].env;
    return tool_optdefs[i].name;
}

static const char *real_getenv(const char *name)
{
    return getenv(name);
}

int tool_parse_args(int argc, char **argv, tool_opts *o, char *err, size_t cap)
{
    return tool_parse_args_env(argc, argv, real_getenv, o, err, cap);
}
