/* SPDX-License-Identifier: MIT */
/* The option parser's corners (tool/options/): every message a mistyped
 * command line or variable gets, the values at their limits, what `--` and
 * NAME do for run and lock, the environment without a command line. Each case
 * asserts the exit status and the whole message, as a user would read it. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "options/opts.h"
#include "options/secret.h"
#include "testlib.h"

/* The environment of one parse: NAME=VALUE strings, NULL-terminated. */
static const char *const *g_env;

static const char *fake_getenv(const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; g_env && g_env[i]; i++)
        if (!strncmp(g_env[i], name, n) && g_env[i][n] == '=') return g_env[i] + n + 1;
    return NULL;
}

/* Parses args (after "elector") with env (NULL: no variables at all). */
static int parse_env(tool_opts *o, char *err, const char *const *env, const char **args)
{
    static char *argv[40]; /* o->argv points into it after we return */
    argv[0] = "elector";
    int n = 1;
    for (int i = 0; args[i]; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    g_env = env;
    return tool_parse_args_env(n, argv, fake_getenv, o, err, 300);
}

static int parse(tool_opts *o, char *err, const char **args)
{
    return parse_env(o, err, NULL, args);
}

#define ARGS(...) ((const char *[]){__VA_ARGS__, NULL})

/* One bad command line: EXIT_USAGE and exactly this message. */
#define BAD(msg, ...)                                                                    \
    do {                                                                                 \
        tool_opts o_;                                                                    \
        char e_[300];                                                                    \
        ASSERT_EQ(EXIT_USAGE, parse(&o_, e_, ARGS(__VA_ARGS__)));                        \
        ASSERT_STREQ(msg, e_);                                                           \
    } while (0)

TEST(arguments_help_and_version_do_not_take)
{
    BAD("unexpected argument 'more' (see elector --help)", "help", "run", "more");
    BAD("unexpected argument 'x' (see elector --help)", "version", "x");
    BAD("unexpected argument 'x' (see elector --help)", "observe", "N", "x");
    BAD("unexpected argument 'c' (see elector --help)", "campaign", "N", "V", "c");
    BAD("unexpected argument 'N' (see elector --help)", "timing", "N"); /* no NAME */
    BAD("unknown command 'elect' (commands: campaign, observe, leader, run, lock, "
        "switchover, timing, help, version)",
        "elect", "N");
    /* After `--` too: the command and NAME are positionals like any other. */
    BAD("unknown command 'x' (commands: campaign, observe, leader, run, lock, "
        "switchover, timing, help, version)",
        "--", "x");
    BAD("no command given (commands: campaign, observe, leader, run, lock, switchover, "
        "timing, help, version; see elector --help)",
        "--ttl", "3");
}

TEST(getopt_errors_name_the_option)
{
    BAD("option '--endpoints' needs a value", "leader", "N", "--endpoints");
    BAD("option '-w' needs a value", "leader", "N", "-w");
    BAD("option '--help' takes no value", "leader", "N", "--help=yes");
    BAD("unknown option '-q' (see elector --help)", "leader", "N", "-q");
    BAD("unknown option '--bogus=1' (see elector --help)", "leader", "N", "--bogus=1");
    /* A prefix of several options is ambiguous; of one, it is that option. */
    BAD("ambiguous option '--health' (see elector --help)", "run", "N", "--health", "x");
    BAD("ambiguous option '--insecure=1' (see elector --help)", "leader", "N",
        "--insecure=1");
    tool_opts o;
    char err[300];
    ASSERT_OK(parse(&o, err, ARGS("leader", "N", "--endp", "e:1")));
    ASSERT_STREQ("e:1", o.endpoints);
    BAD("unknown option '--=x' (see elector --help)", "leader", "N", "--=x");
}

TEST(run_and_lock_after_double_dash)
{
    tool_opts o;
    char err[300];
    /* `--` before NAME: NAME, then the command. */
    ASSERT_OK(parse(&o, err, ARGS("run", "--", "N", "cmd", "-x")));
    ASSERT_STREQ("N", o.name);
    ASSERT_STREQ("cmd", o.argv[0]);
    ASSERT_STREQ("-x", o.argv[1]);
    ASSERT(o.cmd_after_dashes);
    ASSERT_OK(parse(&o, err, ARGS("lock", "--", "L", "sh", "-c", "x")));
    ASSERT_STREQ("L", o.name);
    ASSERT_STREQ("sh", o.argv[0]);
    /* `--` and only NAME after it: a lock with `--` and no command. */
    BAD("lock: missing command after '--' (elector lock NAME -- CMD ARGS..., or no '--' "
        "to "
        "hold the lock)",
        "lock", "--", "L");
    BAD("run: missing command after '--' (elector run NAME -- CMD ARGS...)", "run", "--",
        "N");
    BAD("run: missing command after '--' (elector run NAME -- CMD ARGS...)", "run", "N",
        "--");
    BAD("run: missing command after '--' (elector run NAME -- CMD ARGS...)", "run", "N");
    /* Global options and `--` before the command's name. */
    ASSERT_OK(parse(&o, err, ARGS("--ttl", "4", "--", "campaign", "N", "V")));
    ASSERT_EQ(CMD_CAMPAIGN, o.cmd);
    ASSERT_STREQ("V", o.value);
    ASSERT_EQ(4, o.ttl_s);
    /* --grace's default: the supervisor's (-1) with a command, else 0. */
    ASSERT_OK(parse(&o, err, ARGS("lock", "L")));
    ASSERT_EQ(0, o.grace_ms);
}

TEST(names_must_not_be_empty)
{
    BAD("election NAME must not be empty", "campaign", "");
    BAD("lock NAME must not be empty", "lock", "");
    BAD("missing election NAME (see elector observe --help)", "observe");
    BAD("missing lock NAME (see elector lock --help)", "lock");
}

TEST(options_for_other_commands_are_refused)
{
    BAD("--proclaim-stdin is only for `elector campaign`", "observe", "N",
        "--proclaim-stdin");
    BAD("--proclaim-stdin is only for `elector campaign`", "run", "N", "--proclaim-stdin",
        "--", "x");
    BAD("--release-on-exit is for campaign and lock without a command (run's guard "
        "releases the lease itself)",
        "lock", "L", "--release-on-exit=false", "cmd");
    BAD("--release-on-exit is for campaign and lock without a command (run's guard "
        "releases the lease itself)",
        "observe", "N", "--release-on-exit");
    BAD("--events-fd is for `elector -w json run` (or lock with a command)", "-w", "json",
        "campaign", "N", "--events-fd", "3");
    BAD("--events-fd is for `elector -w json run` (or lock with a command)", "run", "N",
        "--events-fd", "3", "--", "x");
    BAD("--http is for campaign, run, lock and observe", "switchover", "N", "--to", "v",
        "--http", ":0");
    BAD("-n/--limit does not go with --restart or --http", "lock", "L", "-n", "2",
        "--restart", "x");
    BAD("-n/--limit does not go with --restart or --http", "lock", "L", "-n", "3",
        "--http", "127.0.0.1:0");
    BAD("--no-wait and --timeout exclude each other", "campaign", "N", "--no-wait",
        "--timeout", "1s");
    BAD("--fail-fast is for campaign, run, lock and observe (leader and switchover "
        "always "
        "fail fast)",
        "leader", "N", "--fail-fast");
    BAD("--value is only for campaign and run (a lock's value is empty, as etcdctl's)",
        "observe", "N", "--value", "v");
    BAD("--cert and --key go together", "leader", "N", "--cert", "c.pem");
    BAD("--cert and --key go together", "leader", "N", "--key", "k.pem");
    BAD("--restart, --grace, --grace-on-loss and --pid-namespace are only for `elector "
        "run` and `elector lock NAME CMD`",
        "campaign", "N", "--pid-namespace");
    BAD("--restart, --grace, --grace-on-loss and --pid-namespace are only for `elector "
        "run` and `elector lock NAME CMD`",
        "lock", "L", "--grace", "1s");
    tool_opts o;
    char err[300];
    /* The same in order: a semaphore of one may restart; observe may fail fast. */
    ASSERT_OK(parse(&o, err, ARGS("lock", "L", "-n", "1", "--restart", "x")));
    ASSERT_EQ(1, o.limit);
    ASSERT_OK(parse(&o, err, ARGS("observe", "N", "--fail-fast")));
    ASSERT(o.fail_fast);
    ASSERT_OK(parse(&o, err, ARGS("lock", "L", "--release-on-exit=false")));
    ASSERT(o.no_release);
    ASSERT_OK(parse(&o, err, ARGS("-w", "json", "lock", "L", "--events-fd", "7", "x")));
    ASSERT_EQ(7, o.events_fd);
}

/* run's (and lock CMD's) --grace is weighed against its TTL as `elector timing`
 * does: a grace that would stop the command between two renewals that succeed
 * is refused with timing's sentence; run's default always fits. */
TEST(run_refuses_a_grace_its_ttl_cannot_hold)
{
    tool_opts o;
    char err[300];
    ASSERT_EQ(
        EXIT_USAGE,
        parse(&o, err, ARGS("--ttl", "10s", "run", "N", "--grace", "20s", "--", "x")));
    ASSERT(!strncmp(err,
                    "--grace 20000ms: the guard would send SIGTERM to the command "
                    "between two renewals that succeed (the deadline is 9000ms after a "
                    "renewal, the next one is answered 3338ms after it): use --grace "
                    "below 5662ms or a longer --ttl",
                    200));
    /* the border: 9000 - 3333 - 5 (timing's --rtt) */
    ASSERT_OK(
        parse(&o, err, ARGS("--ttl", "10s", "run", "N", "--grace", "5661ms", "--", "x")));
    ASSERT_EQ(
        EXIT_USAGE,
        parse(&o, err, ARGS("--ttl", "10s", "run", "N", "--grace", "5662ms", "--", "x")));
    ASSERT_EQ(EXIT_USAGE,
              parse(&o, err, ARGS("--ttl", "3", "lock", "L", "--grace", "3s", "x")));
    for (int ttl = 1; ttl <= 60; ttl++) { /* the default grace, min(2s, TTL/4) */
        char t[8];
        snprintf(t, sizeof t, "%d", ttl);
        ASSERT_OK(parse(&o, err, ARGS("--ttl", t, "run", "N", "--", "x")));
    }
}

/* timing takes no NAME and no etcd; its own options are refused elsewhere, and
 * run's --grace, --grace-on-loss and --release-on-exit are its settings too. */
TEST(timing_options_are_for_timing_only)
{
    static const char *const own[][2] = {{"--margin", "1s"},
                                         {"--rtt", "1ms"},
                                         {"--election-timeout", "1s"},
                                         {"--drift", "1%"}};
    for (size_t i = 0; i < 4; i++) {
        BAD("--margin, --rtt, --election-timeout and --drift are only for `elector "
            "timing`",
            "campaign", "N", own[i][0], own[i][1]);
        BAD("--margin, --rtt, --election-timeout and --drift are only for `elector "
            "timing`",
            "run", "N", own[i][0], own[i][1], "--", "x");
    }
    tool_opts o;
    char err[300];
    ASSERT_OK(parse(&o, err, ARGS("timing")));
    ASSERT_EQ(CMD_TIMING, o.cmd);
    ASSERT_NULL(o.name);
    ASSERT_EQ(-1, o.grace_ms); /* run's default, min(2s, TTL/4) */
    ASSERT_EQ(0, o.margin_ms); /* the library's */
    ASSERT_EQ(5, o.rtt_ms);
    ASSERT_EQ(1000, o.election_timeout_ms);
    ASSERT(o.drift == 0);
    ASSERT(!o.no_release);
    ASSERT_OK(parse(&o, err,
                    ARGS("timing", "--ttl", "4s", "--grace", "500ms", "--grace-on-loss",
                         "--release-on-exit=false", "--margin", "700ms", "--rtt", "0",
                         "--election-timeout", "2500ms", "--drift", "0.25%")));
    ASSERT_EQ(4, o.ttl_s);
    ASSERT_EQ(500, o.grace_ms);
    ASSERT(o.grace_on_loss && o.no_release);
    ASSERT_EQ(700, o.margin_ms);
    ASSERT_EQ(0, o.rtt_ms);
    ASSERT_EQ(2500, o.election_timeout_ms);
    ASSERT(o.drift > 0.00249 && o.drift < 0.00251);
    ASSERT_OK(parse(&o, err, ARGS("timing", "--drift", ".01")));
    ASSERT(o.drift > 0.0099 && o.drift < 0.0101);
    ASSERT_OK(parse(&o, err, ARGS("timing", "--drift", "0")));
    ASSERT_OK(parse(&o, err, ARGS("timing", "--help")));
    ASSERT_EQ(CMD_TIMING, o.help_cmd);
    static const char *const bad_drift[] = {"2",   "100%", "-1%", "1e-3", "0x1",
                                            "inf", "%",    "",    "1%%",  "0.5 %"};
    for (size_t i = 0; i < sizeof(bad_drift) / sizeof(bad_drift[0]); i++) {
        char want[200];
        snprintf(want, sizeof(want),
                 "--drift: '%s' is not a fraction below 1 or a percentage below 100%% "
                 "(e.g. 0.005 or 0.5%%)",
                 bad_drift[i]);
        BAD(want, "timing", "--drift", bad_drift[i]);
    }
    BAD("--margin: invalid duration '0' (use e.g. 500ms, 10s, 1m30s, 1.5h)", "timing",
        "--margin", "0");
    BAD("unexpected argument 'N' (see elector --help)", "timing", "N");
    BAD("--http is for campaign, run, lock and observe", "timing", "--http", ":0");
    BAD("--restart, --grace, --grace-on-loss and --pid-namespace are only for `elector "
        "run` and `elector lock NAME CMD`",
        "timing", "--restart");
    BAD("--value is only for campaign and run (a lock's value is empty, as etcdctl's)",
        "timing", "--value", "v");
    BAD("--timeout is for campaign, run, lock (how long to wait) and switchover",
        "timing", "--timeout", "1s");
}

TEST(every_health_option_needs_the_command)
{
    static const char *const opt[][2] = {
        {"--health-interval", "1s"}, {"--health-timeout", "1s"},
        {"--health-retries", "2"},   {"--health-start-period", "1s"},
        {"--health-holdoff", "1s"},  {"--health-holdoff-max", "1m"}};
    for (size_t i = 0; i < sizeof(opt) / sizeof(opt[0]); i++) {
        tl_log("%s", opt[i][0]);
        BAD("--health-interval, --health-timeout, --health-retries, "
            "--health-start-period, "
            "--health-holdoff and --health-holdoff-max need --health-cmd",
            "campaign", "N", opt[i][0], opt[i][1]);
        BAD("--health-cmd and --health-* are for run and campaign", "lock", "L",
            opt[i][0], opt[i][1], "x");
    }
    tool_opts o;
    char err[300];
    /* --health-holdoff alone raises the bound with it; 0 turns hold-off off. */
    ASSERT_OK(
        parse(&o, err,
              ARGS("campaign", "N", "--health-cmd", "true", "--health-holdoff", "10m")));
    ASSERT_EQ(600000, o.health_holdoff_ms);
    ASSERT_EQ(600000, o.health_holdoff_max_ms);
    ASSERT_OK(parse(
        &o, err, ARGS("campaign", "N", "--health-cmd", "true", "--health-holdoff", "0")));
    ASSERT_EQ(0, o.health_holdoff_ms);
    ASSERT_EQ(300000, o.health_holdoff_max_ms);
}

TEST(values_at_their_limits)
{
    tool_opts o;
    char err[300];
    /* -n: 1 to 64. */
    ASSERT_OK(parse(&o, err, ARGS("lock", "L", "-n", "64")));
    ASSERT_EQ(64, o.limit);
    BAD("-n: '65' is not a number from 1 to 64", "lock", "L", "-n", "65");
    BAD("-n: '0' is not a number from 1 to 64", "lock", "L", "-n", "0");
    BAD("-n: '' is not a number from 1 to 64", "lock", "L", "-n", "");
    BAD("--limit: '2x' is not a number from 1 to 64", "lock", "L", "--limit=2x");
    /* --events-fd says what it wants. */
    BAD("--events-fd: '0' is not a file descriptor number", "-w", "json", "run", "N",
        "--events-fd", "0", "--", "x");
    BAD("--events-fd: 'err' is not a file descriptor number", "-w", "json", "run", "N",
        "--events-fd", "err", "--", "x");
    /* --ttl: whole seconds, at least one. */
    ASSERT_OK(parse(&o, err, ARGS("campaign", "N", "--ttl", "1s")));
    ASSERT_EQ(1, o.ttl_s);
    ASSERT_OK(parse(&o, err, ARGS("campaign", "N", "--ttl", "2m")));
    ASSERT_EQ(120, o.ttl_s);
    BAD("--ttl: '500ms' must be a whole number of seconds, at least 1s", "campaign", "N",
        "--ttl", "500ms");
    BAD("--ttl: '0' must be a whole number of seconds, at least 1s", "campaign", "N",
        "--ttl", "0");
    BAD("--ttl: invalid duration 'ten' (use e.g. 500ms, 10s, 1m)", "campaign", "N",
        "--ttl", "ten");
    /* The value once. */
    BAD("campaign: give the VALUE once (as an argument or --value)", "campaign", "N", "V",
        "--value", "W");
    /* Durations: 0 where it means "off", not where it must be positive. */
    ASSERT_OK(parse(&o, err, ARGS("leader", "N", "--auto-sync-interval", "0")));
    ASSERT_EQ(0, o.auto_sync_interval_ms);
    BAD("--dial-timeout: invalid duration '0' (use e.g. 500ms, 10s, 1m30s, 1.5h)",
        "leader", "N", "--dial-timeout", "0");
    ASSERT_OK(parse(&o, err, ARGS("leader", "N", "--dial-timeout", "1us")));
    ASSERT_EQ(1, o.dial_timeout_ms); /* rounded up, never 0 */
}

TEST(booleans_and_debug)
{
    tool_opts o;
    char err[300];
    ASSERT_OK(parse(&o, err, ARGS("leader", "N", "--debug")));
    ASSERT_EQ(LOG_DEBUG, o.log);
    ASSERT_OK(parse(&o, err, ARGS("leader", "N", "--debug=false")));
    ASSERT_EQ(LOG_INFO, o.log);
    BAD("--debug: 'maybe' is not a boolean (true or false)", "leader", "N",
        "--debug=maybe");
    /* --log-level decides when both are given, in either order. */
    ASSERT_OK(parse(&o, err, ARGS("leader", "N", "--log-level", "warn", "--debug")));
    ASSERT_EQ(LOG_WARN, o.log);
    ASSERT_OK(parse(&o, err, ARGS("leader", "N", "--debug", "--log-level", "error")));
    ASSERT_EQ(LOG_ERROR, o.log);
    BAD("--hex: 'yes' is not a boolean (true or false)", "leader", "N", "--hex=yes");
    BAD("--insecure-transport: 'no' is not a boolean (true or false)", "leader", "N",
        "--insecure-transport=no");
    ASSERT_OK(
        parse(&o, err, ARGS("leader", "N", "--insecure-discovery=false", "-d", "x.y")));
    ASSERT(o.srv_secure_only);
    BAD("--insecure-discovery: '2' is not a boolean (true or false)", "leader", "N",
        "--insecure-discovery=2");
    /* Every spelling Go accepts, and none other. */
    static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};
    for (int i = 0; i < 6; i++) {
        bool v = false;
        ASSERT_OK(tool_parse_bool(yes[i], &v));
        ASSERT(v);
        ASSERT_OK(tool_parse_bool(no[i], &v));
        ASSERT(!v);
    }
    bool v = true;
    ASSERT_EQ(-1, tool_parse_bool("yes", &v));
    ASSERT_EQ(-1, tool_parse_bool("", &v));
    ASSERT_EQ(-1, tool_parse_bool(NULL, &v));
    ASSERT(v); /* untouched */
}

TEST(discovery_names_are_dns_names)
{
    tool_opts o;
    char err[300];
    BAD("--discovery-srv: '' is not a DNS domain (letters, digits, '.', '-', '_')",
        "leader", "N", "--discovery-srv", "");
    BAD("-d: 'a b' is not a DNS domain (letters, digits, '.', '-', '_')", "leader", "N",
        "-d", "a b");
    BAD("--discovery-srv-name: 'x/y' is not a DNS name (letters, digits, '.', '-', '_')",
        "leader", "N", "-d", "example.org", "--discovery-srv-name", "x/y");
    char longname[260];
    memset(longname, 'a', 201);
    longname[201] = 0;
    ASSERT_EQ(EXIT_USAGE, parse(&o, err, ARGS("leader", "N", "-d", longname)));
    ASSERT_CONTAINS(err, "is not a DNS domain");
    longname[200] = 0; /* 200 is the limit */
    ASSERT_OK(parse(&o, err, ARGS("leader", "N", "-d", longname)));
    ASSERT_STREQ(longname, o.discovery_srv);
    ASSERT_NULL(o.endpoints);
    BAD("--discovery-srv-name needs --discovery-srv DOMAIN", "leader", "N",
        "--discovery-srv-name", "x");
    BAD("--endpoints and --discovery-srv both name the members: give one", "leader", "N",
        "-d", "example.org", "--endpoints", "e:1");
}

TEST(command_line_endpoints_beat_discovery_from_the_environment)
{
    tool_opts o;
    char err[300];
    const char *env[] = {"ETCDCTL_DISCOVERY_SRV=example.org", NULL};
    ASSERT_OK(parse_env(&o, err, env, ARGS("leader", "N", "--endpoints", "e:1")));
    ASSERT_NULL(o.discovery_srv);
    ASSERT_STREQ("e:1", o.endpoints);
    /* And the other way round: discovery on the command line, endpoints in the
     * environment. */
    const char *env2[] = {"ETCDCTL_ENDPOINTS=e:2", NULL};
    ASSERT_OK(parse_env(&o, err, env2, ARGS("leader", "N", "-d", "example.org")));
    ASSERT_STREQ("example.org", o.discovery_srv);
    ASSERT_NULL(o.endpoints);
    /* Both in the environment: discovery (etcdctl does the same). */
    const char *env3[] = {"ELECTOR_DISCOVERY_SRV=example.org", "ELECTOR_ENDPOINTS=e:3",
                          NULL};
    ASSERT_OK(parse_env(&o, err, env3, ARGS("leader", "N")));
    ASSERT_STREQ("example.org", o.discovery_srv);
    ASSERT_NULL(o.endpoints);
    ASSERT_STREQ("ELECTOR_ENDPOINTS ELECTOR_DISCOVERY_SRV", o.env_used);
    /* An empty variable is no request; on the command line it is an error. */
    const char *env4[] = {"ELECTOR_DISCOVERY_SRV_NAME=", NULL};
    ASSERT_OK(parse_env(&o, err, env4, ARGS("leader", "N")));
    ASSERT_NULL(o.discovery_srv_name);
}

TEST(environment_errors_name_the_variable)
{
    tool_opts o;
    char err[300];
    const char *env[] = {"ELECTOR_DEBUG=sure", NULL};
    ASSERT_EQ(EXIT_USAGE, parse_env(&o, err, env, ARGS("leader", "N")));
    ASSERT_STREQ("$ELECTOR_DEBUG: 'sure' is not a boolean (true or false)", err);
    const char *env2[] = {"ETCDCTL_DEBUG=true", "ELECTOR_LOG_LEVEL=warn", NULL};
    ASSERT_OK(parse_env(&o, err, env2, ARGS("leader", "N")));
    ASSERT_EQ(LOG_WARN, o.log);
    const char *env3[] = {"ELECTOR_TTL=1.5s", NULL};
    ASSERT_EQ(EXIT_USAGE, parse_env(&o, err, env3, ARGS("leader", "N")));
    ASSERT_STREQ("$ELECTOR_TTL: '1.5s' must be a whole number of seconds, at least 1s",
                 err);
    /* Options without a variable are not read from one. */
    const char *env4[] = {"ELECTOR_LIMIT=5", "ELECTOR_HTTP=:1", "ELECTOR_TIMEOUT=x",
                          NULL};
    ASSERT_OK(parse_env(&o, err, env4, ARGS("lock", "L")));
    ASSERT_EQ(0, o.limit);
    ASSERT_NULL(o.http);
    ASSERT_STREQ("", o.env_used);
    /* Variables are no command line: those for other commands are not errors. */
    const char *env5[] = {"ELECTOR_FAIL_FAST=1", "ELECTOR_RELEASE_ON_EXIT=false", NULL};
    ASSERT_OK(parse_env(&o, err, env5, ARGS("leader", "N")));
    ASSERT(o.fail_fast);
    /* Without an environment at all, nothing is read. */
    static char *argv[] = {"elector", "leader", "N", NULL};
    setenv("ELECTOR_ENDPOINTS", "from-env:1", 1);
    ASSERT_OK(tool_parse_args_env(3, argv, NULL, &o, err, sizeof(err)));
    ASSERT_NULL(o.endpoints);
    ASSERT_OK(tool_parse_args(3, argv, &o, err, sizeof(err)));
    ASSERT_STREQ("from-env:1", o.endpoints);
    unsetenv("ELECTOR_ENDPOINTS");
    /* No room for a message: the status still says it. */
    static char *bad[] = {"elector", "leader", NULL};
    ASSERT_EQ(EXIT_USAGE, tool_parse_args_env(2, bad, NULL, &o, err, 0));
}

TEST(durations_at_their_limits)
{
    int64_t ns;
    /* More than 18 fraction digits: the rest cannot matter. */
    ASSERT_OK(tool_parse_duration_ns("1.0000000000000000009s", &ns));
    ASSERT_EQ(1000000000, ns);
    ASSERT_OK(tool_parse_duration_ns("0.9999999999999999999s", &ns));
    ASSERT_EQ(999999999, ns);
    /* INT64_MAX ns is the largest: 9223372036.854775807 s. */
    ASSERT_OK(tool_parse_duration_ns("9223372036.854775807s", &ns));
    ASSERT_EQ(INT64_MAX, ns);
    ASSERT_EQ(-1, tool_parse_duration_ns("9223372036.854775808s", &ns));
    ASSERT_OK(tool_parse_duration_ns("9223372035s1s", &ns));
    ASSERT_EQ(9223372036000000000, ns);
    ASSERT_EQ(-1, tool_parse_duration_ns("9223372036s1s", &ns));
    ASSERT_EQ(-1, tool_parse_duration_ns("2562048h", &ns));
    ASSERT_OK(tool_parse_duration_ns("2562047h", &ns));
    ASSERT_EQ(-1, tool_parse_duration_ns("99999999999999999999ns", &ns));
    /* The micro signs, and units in any order. */
    ASSERT_OK(tool_parse_duration_ns("3\xc2\xb5s", &ns));
    ASSERT_EQ(3000, ns);
    ASSERT_OK(tool_parse_duration_ns("3\xce\xbcs2ns", &ns));
    ASSERT_EQ(3002, ns);
    ASSERT_OK(tool_parse_duration_ns("1s1h", &ns));
    ASSERT_EQ(3601000000000, ns);
    ASSERT_EQ(-1, tool_parse_duration_ns(".s", &ns));
    ASSERT_EQ(-1, tool_parse_duration_ns("1.2.3", &ns));
    ASSERT_OK(tool_parse_duration_ns(".5", &ns)); /* bare: seconds */
    ASSERT_EQ(500000000, ns);
}

TEST(names_of_commands_and_options)
{
    ASSERT_NULL(tool_cmd_name(CMD_NONE));
    ASSERT_STREQ("switchover", tool_cmd_name(CMD_SWITCHOVER));
    ASSERT_STREQ("version", tool_cmd_name(CMD_VERSION));
    ASSERT_NULL(tool_option_name(-1, NULL, NULL));
    int i = 0;
    while (tool_option_name(i, NULL, NULL))
        i++;
    ASSERT_GT(i, 40);
    char s = 1;
    int env = -1;
    ASSERT_NULL(tool_option_name(i, &s, &env));
    ASSERT_EQ(1, s); /* untouched past the last */
    ASSERT_STREQ("endpoints", tool_option_name(0, NULL, NULL));
    ASSERT_STREQ("endpoints", tool_option_name(0, &s, &env));
    ASSERT_EQ(0, s);
    ASSERT_EQ(2, env);
}

/* ---------------------------------------------------------------- --password-file */

static char *write_file(const char *dir, const char *name, const char *text, size_t n)
{
    static char path[600];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    ASSERT_EQ(n, fwrite(text, 1, n, f));
    ASSERT_OK(fclose(f));
    ASSERT_OK(chmod(path, 0600));
    return path;
}

TEST(password_file_first_line_at_its_limits)
{
    char *dir = tl_tmpdir("pwfile"), err[300], warn[300];
    /* The first line only, without its \r\n. */
    char *p = tool_password_read(write_file(dir, "crlf", "pw\r\nsecond\n", 11), err,
                                 sizeof(err), warn, sizeof(warn));
    ASSERT_STREQ("pw", p);
    ASSERT_STREQ("", err);
    ASSERT_STREQ("", warn);
    free(p);
    /* An empty first line is refused (as the library's re-read refuses it). */
    p = tool_password_read(write_file(dir, "empty", "", 0), err, sizeof(err), warn,
                           sizeof(warn));
    ASSERT_NULL(p);
    ASSERT_CONTAINS(err, "has an empty first line: no password in it");
    p = tool_password_read(write_file(dir, "emptyline", "\nsecond\n", 8), err,
                           sizeof(err), warn, sizeof(warn));
    ASSERT_NULL(p);
    ASSERT_CONTAINS(err, "has an empty first line: no password in it");
    /* A line longer than 4095 bytes: its first 4095 (bcrypt, etcd's hash, reads
     * 72). */
    char big[5000];
    memset(big, 'a', sizeof(big));
    p = tool_password_read(write_file(dir, "big", big, sizeof(big)), err, sizeof(err),
                           warn, sizeof(warn));
    ASSERT_NOT_NULL(p);
    ASSERT_EQ(4095, strlen(p));
    free(p);
    /* A directory: the read fails and says why. */
    p = tool_password_read(dir, err, sizeof(err), warn, sizeof(warn));
    ASSERT_NULL(p);
    ASSERT_CONTAINS(err, "cannot read --password-file ");
    ASSERT_CONTAINS(err, ": Is a directory");
    /* No room for messages: the result alone. */
    p = tool_password_read(write_file(dir, "wide", "pw\n", 3), err, 0, warn, 0);
    ASSERT_STREQ("pw", p);
    free(p);
    tool_opts o;
    ASSERT_OK(parse(&o, err, ARGS("leader", "N", "--user", "u:pw")));
    tool_creds c;
    ASSERT_OK(tool_creds_resolve(&o, &c, err, 0, warn, 0));
    ASSERT_STREQ("u", c.user);
    ASSERT_STREQ("pw", c.password);
    tool_creds_free(&c);
    free(dir);
}

/* ---------------------------------------------------------------- the prompt */

/* tool_password_prompt in a child on a new pseudo-terminal: ctty 1 makes it the
 * child's controlling terminal; typed is written once the prompt shows. Returns what the
 * prompt returned ("(null)" for NULL), in a static buffer. */
static const char *prompt_on_pty(int ctty, const char *typed)
{
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    ASSERT_GE(m, 0);
    ASSERT_OK(grantpt(m));
    ASSERT_OK(unlockpt(m));
    char sname[128];
    ASSERT_OK(ptsname_r(m, sname, sizeof(sname)));
    int pfd[2];
    ASSERT_OK(pipe(pfd));
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        close(pfd[0]);
        close(m); /* the parent's close alone hangs the terminal up */
        setsid(); /* no controlling terminal, unless the open below makes one */
        int s = open(sname, O_RDWR | (ctty ? 0 : O_NOCTTY));
        if (s < 0) _exit(3);
        dup2(s, 0);
        char *pw = tool_password_prompt("u");
        dprintf(pfd[1], "%s", pw ? pw : "(null)");
        _exit(0);
    }
    close(pfd[1]);
    if (ctty) {
        char buf[256];
        size_t n = 0;
        while (n < sizeof(buf) - 1) {
            ssize_t k = read(m, buf + n, sizeof(buf) - 1 - n);
            ASSERT_GT(k, 0);
            n += (size_t)k;
            buf[n] = 0;
            if (strstr(buf, "Password for u: ")) break;
        }
        ASSERT_EQ((ssize_t)strlen(typed), write(m, typed, strlen(typed)));
    }
    static char out[256];
    ssize_t k = read(pfd[0], out, sizeof(out) - 1);
    out[k > 0 ? k : 0] = 0;
    int st;
    ASSERT_EQ(pid, waitpid(pid, &st, 0));
    ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(pfd[0]);
    close(m);
    return out;
}

TEST(password_prompt_without_a_terminal_to_ask_on)
{
    /* stdin a terminal, but no controlling one: /dev/tty cannot be opened. */
    ASSERT_STREQ("(null)", prompt_on_pty(0, "x\n"));
    /* An empty line: no password (main warns). */
    ASSERT_STREQ("(null)", prompt_on_pty(1, "\n"));
    ASSERT_STREQ("pw", prompt_on_pty(1, "pw\r\n"));
    /* Not a terminal at all: not asked. */
    ASSERT_NULL(tool_password_prompt("u"));
    /* argv NULL: only the environment is scrubbed. */
    tool_opts o;
    char err[300];
    ASSERT_OK(parse(&o, err, ARGS("leader", "N", "--user", "u:pw")));
    setenv("ETCDCTL_PASSWORD", "x", 1);
    tool_creds_scrub(&o, NULL);
    ASSERT_NULL(getenv("ETCDCTL_PASSWORD"));
}
