/* SPDX-License-Identifier: MIT */
/* The tool's pure parts: command-line parsing (durations, commands, options
 * anywhere, etcdctl's forms and variables), credentials, the -w json events and
 * log lines against their schemas (docs/elector-*.schema.json), the schema checker. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "json_check.h"
#include "text/log.h"
#include "options/help.h"
#include "options/opts.h"
#include "text/output.h"
#include "options/secret.h"
#include "app/srv.h"
#include "elector/etcd.h"
#include "supervise/internal.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <resolv.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testlib.h"

TEST(durations_accept_units_and_bare_seconds)
{
    int64_t ms;
    ASSERT_OK(tool_parse_duration_ms("500ms", &ms));
    ASSERT_EQ(500, ms);
    ASSERT_OK(tool_parse_duration_ms("10s", &ms));
    ASSERT_EQ(10000, ms);
    ASSERT_OK(tool_parse_duration_ms("1.5s", &ms));
    ASSERT_EQ(1500, ms);
    ASSERT_OK(tool_parse_duration_ms("2m", &ms));
    ASSERT_EQ(120000, ms);
    ASSERT_OK(tool_parse_duration_ms("1h", &ms));
    ASSERT_EQ(3600000, ms);
    ASSERT_OK(tool_parse_duration_ms("7", &ms));
    ASSERT_EQ(7000, ms);
    ASSERT_OK(tool_parse_duration_ms("0", &ms));
    ASSERT_EQ(0, ms);
}

TEST(durations_reject_garbage)
{
    static const char *bad[] = {"",
                                "-1s",
                                "+1s",
                                " 1s",
                                "5x",
                                "s",
                                "ms",
                                "1 s",
                                "1e400",
                                "nan",
                                "inf",
                                "1sec",
                                "99999999999999h",
                                "0x10"};
    int64_t ms;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tl_log("'%s'", bad[i]);
        ASSERT_EQ(-1, tool_parse_duration_ms(bad[i], &ms));
    }
    ASSERT_EQ(-1, tool_parse_duration_ms(NULL, &ms));
}

static int parse(tool_opts *o, char *err, const char **args)
{
    static char *argv[32]; /* o->argv points into it after we return */
    argv[0] = "elector";
    int n = 1;
    for (int i = 0; args[i]; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    return tool_parse_args(n, argv, o, err, 256);
}

TEST(global_options_before_or_after_the_command)
{
    tool_opts o;
    char err[256];
    ASSERT_OK(parse(&o, err,
                    (const char *[]){"--endpoints", "E", "--ttl", "2", "-w", "json",
                                     "campaign", "N", "V", NULL}));
    ASSERT_EQ(CMD_CAMPAIGN, o.cmd);
    ASSERT_STREQ("N", o.name);
    ASSERT_STREQ("V", o.value);
    ASSERT_STREQ("E", o.endpoints);
    ASSERT_EQ(2, o.ttl_s);
    ASSERT_EQ(FMT_JSON, o.fmt);
    ASSERT_OK(parse(&o, err,
                    (const char *[]){"campaign", "N", "--endpoints=E2", "--ttl=3s",
                                     "--write-out", "simple", NULL}));
    ASSERT_STREQ("E2", o.endpoints);
    ASSERT_EQ(3, o.ttl_s);
    ASSERT_EQ(FMT_SIMPLE, o.fmt);
}

TEST(run_takes_the_command_after_double_dash)
{
    tool_opts o;
    char err[256];
    ASSERT_OK(parse(&o, err,
                    (const char *[]){"run", "N", "--grace", "500ms", "--restart", "--",
                                     "cmd", "--endpoints", "x", NULL}));
    ASSERT_EQ(CMD_RUN, o.cmd);
    ASSERT_STREQ("cmd", o.argv[0]);
    ASSERT_STREQ("--endpoints", o.argv[1]); /* the command's own args stay its own */
    ASSERT_NULL(o.endpoints);
    ASSERT_EQ(500, o.grace_ms);
    ASSERT(o.restart);
    ASSERT(!o.grace_on_loss); /* an outside loss kills at once by default */
}

TEST(grace_on_loss_is_for_a_supervised_command_only)
{
    tool_opts o;
    char err[256];
    ASSERT_OK(parse(&o, err,
                    (const char *[]){"run", "N", "--grace-on-loss", "--", "cmd", NULL}));
    ASSERT(o.grace_on_loss);
    ASSERT_OK(
        parse(&o, err, (const char *[]){"lock", "L", "--grace-on-loss", "cmd", NULL}));
    ASSERT(o.grace_on_loss);
    ASSERT_EQ(EXIT_USAGE,
              parse(&o, err, (const char *[]){"lock", "L", "--grace-on-loss", NULL}));
    ASSERT_CONTAINS(err, "--grace-on-loss");
    ASSERT_EQ(EXIT_USAGE,
              parse(&o, err, (const char *[]){"campaign", "N", "--grace-on-loss", NULL}));
}

TEST(usage_errors_say_what_is_wrong)
{
    tool_opts o;
    char err[256];
    ASSERT_EQ(EXIT_USAGE,
              parse(&o, err, (const char *[]){"campaign", "N", "--ttl", "1.5s", NULL}));
    ASSERT_CONTAINS(err, "whole number of seconds");
    ASSERT_EQ(EXIT_USAGE,
              parse(&o, err, (const char *[]){"campaign", "N", "--restart=1", NULL}));
    ASSERT_CONTAINS(err, "takes no value");
    ASSERT_EQ(EXIT_USAGE,
              parse(&o, err, (const char *[]){"leader", "N", "--http", ":1", NULL}));
    ASSERT_EQ(EXIT_USAGE, parse(&o, err, (const char *[]){"leader", "N", "extra", NULL}));
    ASSERT_CONTAINS(err, "unexpected argument 'extra'");
    ASSERT_EQ(EXIT_USAGE,
              parse(&o, err, (const char *[]){"observe", "N", "--", "x", NULL}));
    ASSERT_EQ(
        EXIT_USAGE,
        parse(&o, err, (const char *[]){"campaign", "N", "--log-level", "loud", NULL}));
    ASSERT_OK(parse(&o, err, (const char *[]){"--help", NULL}));
    ASSERT(o.help);
}

/* --health-* and switchover: the texts of docs/BAD_INPUT.md, and the defaults. */
TEST(health_and_switchover_options_are_checked)
{
    static struct {
        const char *args[10];
        const char *msg;
    } bad[] = {
        {{"run", "N", "--health-interval", "0", "--health-cmd", "true", "--", "x"},
         "--health-interval: invalid duration '0' (use e.g. 500ms, 10s, 1m30s, 1.5h)"},
        {{"run", "N", "--health-timeout", "soon", "--health-cmd", "true", "--", "x"},
         "--health-timeout: invalid duration 'soon' (use e.g. 500ms, 10s, 1m30s, 1.5h)"},
        {{"run", "N", "--health-retries", "0", "--health-cmd", "true", "--", "x"},
         "--health-retries: '0' is not a number from 1 to 1000000"},
        {{"run", "N", "--health-cmd", "", "--", "x"},
         "--health-cmd: the command must not be empty"},
        {{"run", "N", "--health-retries", "2", "--", "x"},
         "--health-interval, --health-timeout, --health-retries, --health-start-period, "
         "--health-holdoff and --health-holdoff-max need --health-cmd"},
        {{"campaign", "N", "--health-holdoff", "1s"},
         "--health-interval, --health-timeout, --health-retries, --health-start-period, "
         "--health-holdoff and --health-holdoff-max need --health-cmd"},
        {{"campaign", "N", "--health-cmd", "true", "--health-holdoff", "1m",
          "--health-holdoff-max", "30s"},
         "--health-holdoff-max (30000ms) must not be less than --health-holdoff "
         "(60000ms)"},
        {{"campaign", "N", "--health-cmd", "true", "--health-holdoff", "-1s"},
         "--health-holdoff: invalid duration '-1s' (use e.g. 500ms, 10s, 1m30s, 1.5h)"},
        {{"observe", "N", "--health-cmd", "true"},
         "--health-cmd and --health-* are for run and campaign"},
        {{"switchover", "N"},
         "switchover: missing --to VALUE (the value of the candidate that is to lead)"},
        {{"switchover", "N", "--to", "v", "--timeout", "-1s"},
         "--timeout: invalid duration '-1s' (use e.g. 500ms, 10s, 1m30s, 1.5h)"},
        {{"campaign", "N", "--to", "v"}, "--to is for `elector switchover`"},
        {{"observe", "N", "--timeout", "1s"},
         "--timeout is for campaign, run, lock (how long to wait) and switchover"},
        {{"leader", "N", "--no-wait"}, "--no-wait is for campaign, run and lock"},
        {{"run", "N", "-n", "2", "--", "x"},
         "-n/--limit is for `elector lock` (a semaphore)"},
        {{"lock", "N", "-n", "0"}, "-n: '0' is not a number from 1 to 64"},
        {{"lock", "N", "--limit", "2", "--restart", "--", "x"},
         "-n/--limit does not go with --restart or --http"},
        {{"lock", "N", "--no-wait", "--timeout", "1s"},
         "--no-wait and --timeout exclude each other"},
        {{"leader", "N", "--fail-fast"},
         "--fail-fast is for campaign, run, lock and observe (leader and switchover "
         "always fail fast)"},
        {{"switchover"}, "missing election NAME (see elector switchover --help)"},
    };
    tool_opts o;
    char err[256];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ASSERT_EQ(EXIT_USAGE, parse(&o, err, bad[i].args));
        ASSERT_STREQ(bad[i].msg, err);
    }
    ASSERT_OK(parse(
        &o, err, (const char *[]){"run", "N", "--health-cmd", "true", "--", "x", NULL}));
    ASSERT_STREQ("true", o.health_cmd);
    ASSERT_EQ(10000, o.health_interval_ms);
    ASSERT_EQ(10000, o.health_timeout_ms);
    ASSERT_EQ(3, o.health_retries);
    ASSERT_EQ(0, o.health_start_ms);
    ASSERT_EQ(10000, o.health_holdoff_ms);
    ASSERT_EQ(300000, o.health_holdoff_max_ms);
    ASSERT_OK(parse(&o, err,
                    (const char *[]){"campaign", "N", "--health-cmd", "true",
                                     "--health-holdoff", "10m", NULL}));
    ASSERT_EQ(600000, o.health_holdoff_ms); /* the bound follows */
    ASSERT_EQ(600000, o.health_holdoff_max_ms);
    ASSERT_OK(parse(&o, err,
                    (const char *[]){"campaign", "N", "--health-cmd", "true",
                                     "--health-holdoff", "0", NULL}));
    ASSERT_EQ(0, o.health_holdoff_ms);
    ASSERT_OK(parse(&o, err,
                    (const char *[]){"campaign", "N", "--health-cmd", "true",
                                     "--health-start-period", "1m", "--health-retries",
                                     "5", NULL}));
    ASSERT_EQ(60000, o.health_start_ms);
    ASSERT_EQ(5, o.health_retries);
    ASSERT_OK(parse(&o, err, (const char *[]){"switchover", "N", "--to", "v", NULL}));
    ASSERT_EQ(CMD_SWITCHOVER, o.cmd);
    ASSERT_STREQ("v", o.to);
}

/* ---------------------------------------------------------------- etcdctl's forms */

TEST(durations_take_go_syntax)
{
    static const struct {
        const char *s;
        int64_t ns;
    } ok[] = {
        {"1m30s", 90000000000LL},
        {"1.5h", 5400000000000LL},
        {"250ms", 250000000LL},
        {"300us", 300000LL},
        {"300\xc2\xb5s", 300000LL},
        {"300\xce\xbcs", 300000LL},
        {"42ns", 42},
        {"2h45m", 9900000000000LL},
        {"1h2m3s4ms5us6ns", 3723004005006LL},
        {".5s", 500000000LL},
        {"1.s", 1000000000LL},
        {"0", 0},
        {"2562047h", 2562047LL * 3600 * 1000000000},
        {"10", 10000000000LL},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        int64_t ns = -1;
        tl_log("'%s'", ok[i].s);
        ASSERT_OK(tool_parse_duration_ns(ok[i].s, &ns));
        ASSERT_EQ(ok[i].ns, ns);
    }
    static const char *bad[] = {"1m30",  "2562048h", "1.2.3",
                                ".",     "1x",       "h",
                                "1s-2s", "1 m",      "9223372036854775808ns",
                                "1.5.s", "-0"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t ns;
        tl_log("bad '%s'", bad[i]);
        ASSERT_EQ(-1, tool_parse_duration_ns(bad[i], &ns));
    }
    int64_t ms;
    ASSERT_OK(tool_parse_duration_ms("300us", &ms));
    ASSERT_EQ(1, ms); /* rounded up: never a zero timeout from a non-zero duration */
    ASSERT_OK(tool_parse_duration_ms("1m30s", &ms));
    ASSERT_EQ(90000, ms);
}

/* A fake environment for the parser. */
static const char *const *g_env;

static const char *fake_env(const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; g_env && g_env[i]; i++)
        if (!strncmp(g_env[i], name, n) && g_env[i][n] == '=') return g_env[i] + n + 1;
    return NULL;
}

static int parse_env(tool_opts *o, char *err, const char *const *env, const char **args)
{
    static char *argv[32];
    argv[0] = "elector";
    int n = 1;
    for (int i = 0; args[i]; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    g_env = env;
    return tool_parse_args_env(n, argv, fake_env, o, err, 256);
}

TEST(options_take_every_getopt_form)
{
    tool_opts o;
    char err[256];
    ASSERT_OK(parse(&o, err, (const char *[]){"-wjson", "leader", "N", NULL}));
    ASSERT_EQ(FMT_JSON, o.fmt);
    ASSERT_OK(parse(
        &o, err,
        (const char *[]){"leader", "-w", "json", "N", "--dial-timeout=1m30s", NULL}));
    ASSERT_EQ(FMT_JSON, o.fmt);
    ASSERT_EQ(90000, o.dial_timeout_ms);
    ASSERT_STREQ("N", o.name);
    ASSERT_OK(parse(&o, err,
                    (const char *[]){"--hex", "--insecure-skip-tls-verify=true",
                                     "observe", "N", "--debug", NULL}));
    ASSERT(o.hex);
    ASSERT(o.insecure_skip_verify);
    ASSERT_EQ(LOG_DEBUG, o.log);
    ASSERT_OK(parse(&o, err,
                    (const char *[]){"--hex=false", "--insecure-transport=false",
                                     "observe", "N", NULL}));
    ASSERT(!o.hex);
    ASSERT(!o.insecure_transport);
    /* --debug and --log-level: the level decides. */
    ASSERT_OK(
        parse(&o, err,
              (const char *[]){"--log-level", "warn", "--debug", "leader", "N", NULL}));
    ASSERT_EQ(LOG_WARN, o.log);
    ASSERT_EQ(EXIT_USAGE,
              parse(&o, err, (const char *[]){"--hex=maybe", "leader", "N", NULL}));
    ASSERT_CONTAINS(err, "--hex: 'maybe' is not a boolean");
    ASSERT_EQ(EXIT_USAGE, parse(&o, err, (const char *[]){"leader", "N", "-x", NULL}));
    ASSERT_CONTAINS(err, "unknown option '-x'");
    ASSERT_EQ(EXIT_USAGE, parse(&o, err, (const char *[]){"leader", "N", "-w", NULL}));
    ASSERT_CONTAINS(err, "needs a value");
    /* DNS discovery instead of --endpoints; both on the command line: refused. */
    ASSERT_OK(parse(&o, err,
                    (const char *[]){"-d", "example.com", "--discovery-srv-name", "east",
                                     "--insecure-discovery=false", "leader", "N", NULL}));
    ASSERT_STREQ("example.com", o.discovery_srv);
    ASSERT_STREQ("east", o.discovery_srv_name);
    ASSERT(o.srv_secure_only);
    ASSERT_EQ(EXIT_USAGE,
              parse(&o, err,
                    (const char *[]){"--discovery-srv", "example.com", "--endpoints",
                                     "127.0.0.1:2379", "leader", "N", NULL}));
    ASSERT_CONTAINS(err, "--endpoints and --discovery-srv both name the members");
    ASSERT_EQ(EXIT_USAGE, parse(&o, err,
                                (const char *[]){"--discovery-srv", "exa mple.com",
                                                 "leader", "N", NULL}));
    ASSERT_CONTAINS(err, "is not a DNS domain");
    ASSERT_EQ(EXIT_USAGE,
              parse(&o, err,
                    (const char *[]){"--discovery-srv-name", "x", "leader", "N", NULL}));
    ASSERT_CONTAINS(err, "--discovery-srv-name needs --discovery-srv");
    /* --auto-sync-interval: a duration, 0 for off. */
    ASSERT_OK(parse(
        &o, err, (const char *[]){"--auto-sync-interval", "30s", "leader", "N", NULL}));
    ASSERT_EQ(30000, o.auto_sync_interval_ms);
    ASSERT_OK(
        parse(&o, err, (const char *[]){"--auto-sync-interval=0", "leader", "N", NULL}));
    ASSERT_EQ(0, o.auto_sync_interval_ms);
    ASSERT_EQ(EXIT_USAGE, parse(&o, err,
                                (const char *[]){"--auto-sync-interval", "-1s", "leader",
                                                 "N", NULL}));
    ASSERT_CONTAINS(err, "--auto-sync-interval: invalid duration '-1s'");
    ASSERT_EQ(EXIT_USAGE,
              parse(&o, err, (const char *[]){"--keepalive", "1s", "leader", "N", NULL}));
    ASSERT_CONTAINS(err, "ambiguous option '--keepalive'");
}

TEST(help_and_version_as_commands_and_flags)
{
    tool_opts o;
    char err[256];
    ASSERT_OK(parse(&o, err, (const char *[]){"help", NULL}));
    ASSERT_EQ(CMD_HELP, o.cmd);
    ASSERT_EQ(CMD_NONE, o.help_cmd);
    ASSERT_OK(parse(&o, err, (const char *[]){"help", "lock", NULL}));
    ASSERT_EQ(CMD_LOCK, o.help_cmd);
    ASSERT_OK(parse(&o, err, (const char *[]){"run", "--help", NULL}));
    ASSERT(o.help);
    ASSERT_EQ(CMD_RUN, o.help_cmd);
    ASSERT_OK(parse(&o, err, (const char *[]){"version", NULL}));
    ASSERT_EQ(CMD_VERSION, o.cmd);
    ASSERT_EQ(EXIT_USAGE, parse(&o, err, (const char *[]){"help", "dance", NULL}));
    ASSERT_CONTAINS(err, "help: unknown command 'dance'");
    ASSERT_EQ(EXIT_USAGE, parse(&o, err, (const char *[]){"version", "x", NULL}));
}

TEST(lock_takes_an_optional_command)
{
    tool_opts o;
    char err[256];
    ASSERT_OK(parse(&o, err, (const char *[]){"lock", "L", NULL}));
    ASSERT_EQ(CMD_LOCK, o.cmd);
    ASSERT_NULL(o.argv);
    ASSERT_OK(
        parse(&o, err, (const char *[]){"lock", "L", "echo", "-n", "--ttl", "x", NULL}));
    ASSERT_STREQ("echo", o.argv[0]);
    ASSERT_STREQ("--ttl", o.argv[2]); /* the command's own */
    ASSERT_EQ(0, o.ttl_s);
    ASSERT_EQ(-1, o.grace_ms); /* the supervisor's default follows */
    ASSERT_OK(parse(&o, err,
                    (const char *[]){"--ttl", "5", "lock", "--grace", "1s", "L", "--",
                                     "sh", "-c", "x", NULL}));
    ASSERT_STREQ("sh", o.argv[0]);
    ASSERT(o.cmd_after_dashes);
    ASSERT_EQ(5, o.ttl_s);
    ASSERT_EQ(1000, o.grace_ms);
    ASSERT_EQ(EXIT_USAGE, parse(&o, err, (const char *[]){"lock", "L", "--", NULL}));
    ASSERT_CONTAINS(err, "lock: missing command after '--'");
    ASSERT_EQ(EXIT_USAGE,
              parse(&o, err, (const char *[]){"lock", "L", "--restart", NULL}));
    ASSERT_EQ(EXIT_USAGE,
              parse(&o, err, (const char *[]){"lock", "L", "--value", "v", NULL}));
    ASSERT_EQ(EXIT_USAGE, parse(&o, err, (const char *[]){"lock", NULL}));
    ASSERT_CONTAINS(err, "missing lock NAME");
    /* run: the command without `--` too; its options stay its own. */
    ASSERT_OK(
        parse(&o, err, (const char *[]){"run", "N", "./job", "--value", "x", NULL}));
    ASSERT_STREQ("./job", o.argv[0]);
    ASSERT_NULL(o.value);
}

TEST(environment_fills_what_the_command_line_leaves)
{
    tool_opts o;
    char err[256];
    const char *env[] = {"ETCDCTL_ENDPOINTS=ctl:1",
                         "ETCDCTL_DIAL_TIMEOUT=1m30s",
                         "ETCDCTL_USER=root:pw",
                         "ETCDCTL_INSECURE_SKIP_TLS_VERIFY=true",
                         "ETCDCTL_COMMAND_TIMEOUT=3s",
                         "ELECTOR_TTL=7s",
                         "ETCDCTL_HEX=1",
                         NULL};
    ASSERT_OK(parse_env(&o, err, env, (const char *[]){"leader", "N", NULL}));
    ASSERT_STREQ("ctl:1", o.endpoints);
    ASSERT_EQ(90000, o.dial_timeout_ms);
    ASSERT_EQ(3000, o.command_timeout_ms);
    ASSERT_STREQ("root:pw", o.user.value);
    ASSERT_EQ(ORIGIN_ETCDCTL, o.user.origin);
    ASSERT_STREQ("$ETCDCTL_USER", o.user.from);
    ASSERT(o.insecure_skip_verify);
    ASSERT(o.hex);
    ASSERT_EQ(7, o.ttl_s);
    ASSERT_CONTAINS(o.env_used, "ETCDCTL_DIAL_TIMEOUT");
    /* ELECTOR_ wins over ETCDCTL_; the command line over both. */
    const char *env2[] = {"ETCDCTL_ENDPOINTS=ctl:1", "ELECTOR_ENDPOINTS=el:1",
                          "ELECTOR_DIAL_TIMEOUT=2s", "ETCDCTL_DIAL_TIMEOUT=9s", NULL};
    ASSERT_OK(parse_env(&o, err, env2, (const char *[]){"leader", "N", NULL}));
    ASSERT_STREQ("el:1", o.endpoints);
    ASSERT_EQ(2000, o.dial_timeout_ms);
    ASSERT_OK(parse_env(&o, err, env2,
                        (const char *[]){"leader", "N", "--endpoints", "cli:1", NULL}));
    ASSERT_STREQ("cli:1", o.endpoints);
    /* A bad variable is named. */
    const char *env3[] = {"ETCDCTL_DIAL_TIMEOUT=soon", NULL};
    ASSERT_EQ(EXIT_USAGE,
              parse_env(&o, err, env3, (const char *[]){"leader", "N", NULL}));
    ASSERT_STREQ(
        "$ETCDCTL_DIAL_TIMEOUT: invalid duration 'soon' (use e.g. 500ms, 10s, 1m30s, "
        "1.5h)",
        err);
    const char *env4[] = {"ETCDCTL_WRITE_OUT=table", NULL};
    ASSERT_EQ(EXIT_USAGE,
              parse_env(&o, err, env4, (const char *[]){"leader", "N", NULL}));
    ASSERT_CONTAINS(err, "$ETCDCTL_WRITE_OUT: 'table' is not one of simple, json");
    /* An empty discovery variable (etcdctl's default) is no request for it. */
    const char *env5[] = {"ETCDCTL_DISCOVERY_SRV=", NULL};
    ASSERT_OK(parse_env(&o, err, env5, (const char *[]){"leader", "N", NULL}));
}

/* ---------------------------------------------------------------- credentials */

static int creds(tool_creds *c, char *err, char *warn, const char *const *env,
                 const char **args)
{
    tool_opts o;
    if (parse_env(&o, err, env, args)) return -1;
    return tool_creds_resolve(&o, c, err, 400, warn, 600);
}

TEST(credentials_as_etcdctl_takes_them)
{
    tool_creds c;
    char err[400], warn[600];
    /* --user NAME:PASSWORD: accepted, with a warning (ps shows it). */
    ASSERT_OK(creds(&c, err, warn, NULL,
                    (const char *[]){"--user", "root:pw", "leader", "N", NULL}));
    ASSERT_STREQ("root", c.user);
    ASSERT_STREQ("pw", c.password);
    ASSERT(c.on_argv);
    ASSERT_CONTAINS(warn, "visible to other users");
    tool_creds_free(&c);
    /* ETCDCTL_USER=NAME:PASSWORD */
    const char *e1[] = {"ETCDCTL_USER=root:p:w", NULL};
    ASSERT_OK(creds(&c, err, warn, e1, (const char *[]){"leader", "N", NULL}));
    ASSERT_STREQ("root", c.user);
    ASSERT_STREQ("p:w", c.password); /* split at the first ':' */
    ASSERT_STREQ("$ETCDCTL_USER NAME:PASSWORD", c.from);
    ASSERT_STREQ("", warn);
    tool_creds_free(&c);
    /* ETCDCTL_USER + ETCDCTL_PASSWORD; ELECTOR_PASSWORD wins over ETCDCTL_PASSWORD. */
    const char *e2[] = {"ETCDCTL_USER=root", "ETCDCTL_PASSWORD=ctl", NULL};
    ASSERT_OK(creds(&c, err, warn, e2, (const char *[]){"leader", "N", NULL}));
    ASSERT_STREQ("ctl", c.password);
    ASSERT_STREQ("$ETCDCTL_PASSWORD", c.from);
    tool_creds_free(&c);
    const char *e3[] = {"ETCDCTL_USER=root:ctl", "ELECTOR_PASSWORD=el", NULL};
    ASSERT_OK(creds(&c, err, warn, e3, (const char *[]){"leader", "N", NULL}));
    ASSERT_STREQ("root", c.user);
    ASSERT_STREQ("el", c.password);
    tool_creds_free(&c);
    /* The command line wins over variables. */
    ASSERT_OK(creds(&c, err, warn, e3,
                    (const char *[]){"--user", "u:cli", "leader", "N", NULL}));
    ASSERT_STREQ("u", c.user);
    ASSERT_STREQ("cli", c.password);
    tool_creds_free(&c);
    /* Two passwords at one level: an error naming both. */
    ASSERT_EQ(EXIT_USAGE, creds(&c, err, warn, NULL,
                                (const char *[]){"--user", "u:a", "--password", "b",
                                                 "leader", "N", NULL}));
    ASSERT_STREQ(
        "the password is given twice, by --password and by --user NAME:PASSWORD: "
        "give it once",
        err);
    const char *e4[] = {"ELECTOR_USER=u:a", "ELECTOR_PASSWORD=b", NULL};
    ASSERT_EQ(EXIT_USAGE,
              creds(&c, err, warn, e4, (const char *[]){"leader", "N", NULL}));
    ASSERT_EQ(EXIT_USAGE, creds(&c, err, warn, NULL,
                                (const char *[]){"--user", ":pw", "leader", "N", NULL}));
    ASSERT_STREQ("--user: the user name is empty", err);
    /* No user, no authentication (an empty ETCDCTL_USER is etcdctl's default). */
    const char *e5[] = {"ETCDCTL_USER=", NULL};
    ASSERT_OK(creds(&c, err, warn, e5, (const char *[]){"leader", "N", NULL}));
    ASSERT_NULL(c.user);
    tool_creds_free(&c);
}

TEST(scrub_removes_every_password_from_environment_and_argv)
{
    setenv("ELECTOR_PASSWORD", "e1", 1);
    setenv("ETCDCTL_PASSWORD", "e2", 1);
    setenv("ETCDCTL_USER", "root:e3", 1);
    setenv("ELECTOR_USER", "plain", 1);
    char *v1 = getenv("ETCDCTL_PASSWORD"), *v2 = getenv("ETCDCTL_USER");
    char a1[] = "--user=root:argvpw", a2[] = "--password", a3[] = "pw2";
    char *argv[] = {"elector", a1, a2, a3, "leader", "N", NULL};
    tool_opts o;
    char err[256];
    ASSERT_OK(tool_parse_args(6, argv, &o, err, sizeof(err)));
    tool_creds_scrub(&o, argv);
    ASSERT_NULL(getenv("ELECTOR_PASSWORD"));
    ASSERT_NULL(getenv("ETCDCTL_PASSWORD"));
    ASSERT_NULL(getenv("ETCDCTL_USER"));
    ASSERT_STREQ("plain", getenv("ELECTOR_USER")); /* no password in it: kept */
    ASSERT_EQ(0, v1[0]);
    ASSERT_EQ(0, v2[0]); /* wiped where it lay */
    ASSERT_STREQ("--user=root:", a1);
    ASSERT_EQ(0, a3[0]);
    unsetenv("ELECTOR_USER");
}

/* ---------------------------------------------------------------- events, logs */

static void check_json(const char *line)
{
    char err[400];
    int rc = json_check_line(line, strlen(line), err, sizeof(err));
    if (rc) tl_log("%s: %s", line, err);
    ASSERT_OK(rc);
}

static void check_json_fails(const char *line, const char *why)
{
    char err[400];
    ASSERT_EQ(-1, json_check_line(line, strlen(line), err, sizeof(err)));
    tl_log("refused as it should: %s", err);
    ASSERT_CONTAINS(err, why);
}

TEST(event_values_are_text_and_base64)
{
    /* 0xff and "\u00ff" (U+00FF, two bytes in UTF-8) used to print the same. */
    tool_event_out e = {.event = "leader",
                        .name = "n",
                        .key = (const uint8_t *)"n/1",
                        .key_len = 3,
                        .value = (const uint8_t *)"\xff",
                        .value_len = 1,
                        .token = 5,
                        .lease = 1,
                        .mono_ns = 1,
                        .unix_ms = 2};
    char *a = tool_event_json(&e);
    ASSERT_STREQ("{\"event\":\"leader\",\"name\":\"n\",\"key\":\"n/1\",\"key_base64\":"
                 "\"bi8x\",\"lease\":\"1\",\"token\":5,\"value_base64\":\"/w==\","
                 "\"mono_ns\":1,\"unix_ms\":2}",
                 a);
    check_json(a);
    e.value = (const uint8_t *)"\xc3\xbf";
    e.value_len = 2;
    char *b = tool_event_json(&e);
    ASSERT_CONTAINS(b, "\"value\":\"\xc3\xbf\",\"value_base64\":\"w78=\"");
    check_json(b);
    free(a);
    free(b);
    /* Every event kind, as the tool fills them. */
    tool_event_out w = {.event = "waiting",
                        .name = "n",
                        .key = (const uint8_t *)"n/2",
                        .key_len = 3,
                        .value = (const uint8_t *)"",
                        .predecessor = (const uint8_t *)"n/1",
                        .predecessor_len = 3,
                        .token = 9,
                        .lease = 2,
                        .mono_ns = 1,
                        .unix_ms = 2};
    char *c = tool_event_json(&w);
    check_json(c);
    free(c);
    tool_event_out f = {.event = "failed",
                        .name = "n",
                        .error = "ECONNECT",
                        .reason = "refused",
                        .mono_ns = 1,
                        .unix_ms = 2};
    c = tool_event_json(&f);
    check_json(c);
    free(c);
    tool_event_out pf = {.event = "proclaim_failed",
                         .name = "n",
                         .key = (const uint8_t *)"n/2",
                         .key_len = 3,
                         .value = (const uint8_t *)"old",
                         .value_len = 3,
                         .token = 9,
                         .lease = 2,
                         .error = "ETOOLARGE",
                         .reason = "too large",
                         .mono_ns = 1,
                         .unix_ms = 2};
    c = tool_event_json(&pf);
    check_json(c);
    free(c);
    check_json("{\"event\":\"no_leader\",\"name\":\"n\",\"mono_ns\":1,\"unix_ms\":2}");
}

TEST(schema_checker_refuses_what_the_contract_excludes)
{
    check_json_fails(
        "{\"event\":\"proclaimed\",\"name\":\"n\",\"key\":\"n/1\",\"key_base64\":"
        "\"bi8x\",\"lease\":\"1\",\"token\":5,\"value_base64\":\"\",\"error\":"
        "\"ETOOLARGE\",\"reason\":\"x\",\"mono_ns\":1,\"unix_ms\":2}",
        "oneOf");
    check_json_fails(
        "{\"event\":\"leader\",\"name\":\"n\",\"key\":\"n/1\",\"key_base64\":\"bi8x\","
        "\"lease\":\"1\",\"token\":5,\"value_base64\":\"/w==\",\"value\":\"x\","
        "\"mono_ns\":1,\"unix_ms\":2}",
        "\"value\" must be there exactly when value_base64 is UTF-8");
    check_json_fails("{\"event\":\"leader\",\"name\":\"n\",\"key_base64\":\"bi8x\","
                     "\"lease\":\"0x1\",\"token\":5,\"value_base64\":\"\",\"mono_ns\":1,"
                     "\"unix_ms\":2}",
                     "does not match");
    check_json_fails("{\"event\":\"elected\",\"name\":\"n\",\"mono_ns\":1,\"unix_ms\":2,"
                     "\"extra\":1}",
                     "not allowed");
    check_json_fails("{\"event\":\"dance\",\"name\":\"n\",\"mono_ns\":1,\"unix_ms\":2}",
                     "not in enum");
    check_json_fails(
        "{\"event\":\"no_leader\",\"name\":\"n\",\"mono_ns\":1.5,\"unix_ms\":2}",
        "wrong type");
    check_json_fails("{\"time\":\"yesterday\",\"level\":\"info\",\"msg\":\"x\"}",
                     "does not match");
    check_json_fails("{\"event\":\"no_leader\",\"name\":\"n\",\"name\":\"m\"}",
                     "duplicate");
}

TEST(log_lines_carry_time_and_level)
{
    char *t =
        tool_log_format(LOGFMT_TEXT, LOG_WARN, 1795424910897LL, "bad \x1b[31m\nthing");
    ASSERT_STREQ("2026-11-23T09:08:30.897Z warn elector: bad \\x1b[31m\\nthing", t);
    free(t);
    char *j = tool_log_format(LOGFMT_JSON, LOG_INFO, 1795424910897LL, "say \"hi\"\t\xff");
    ASSERT_STREQ("{\"time\":\"2026-11-23T09:08:30.897Z\",\"level\":\"info\",\"msg\":"
                 "\"say \\\"hi\\\"\\\\t\\\\xff\"}",
                 j);
    check_json(j);
    free(j);
}

/* A message longer than tool_log's stack buffer (2 KiB) is written whole, on one
 * line, not cut at the buffer's size. */
TEST(log_writes_a_long_message_whole)
{
    char *dir = tl_tmpdir("longlog"), path[512];
    snprintf(path, sizeof(path), "%s/err", dir);
    fflush(stderr);
    int saved = dup(2);
    ASSERT(saved >= 0);
    FILE *f = fopen(path, "w+");
    ASSERT_NOT_NULL(f);
    ASSERT(dup2(fileno(f), 2) == 2);
    char *msg = malloc(5001);
    ASSERT_NOT_NULL(msg);
    memset(msg, 'm', 5000);
    msg[4999] = 'Z'; /* the last byte shows nothing was cut */
    msg[5000] = 0;
    tool_log_setup(LOG_INFO, LOGFMT_TEXT);
    tool_log(LOG_WARN, "long: %s.", msg);
    tool_log(LOG_DEBUG, "not enabled: %s", msg);
    fflush(stderr);
    ASSERT(dup2(saved, 2) == 2);
    close(saved);
    rewind(f);
    char *got = malloc(8192);
    ASSERT_NOT_NULL(got);
    size_t n = fread(got, 1, 8191, f);
    got[n] = 0;
    fclose(f);
    ASSERT(strstr(got, " warn elector: long: mmm") != NULL);
    char *nl = strchr(got, '\n');
    ASSERT_NOT_NULL(nl);
    ASSERT_EQ((size_t)(nl - got) + 1, n); /* one line: the debug one is not written */
    ASSERT(nl - got > 5000);
    ASSERT(!memcmp(nl - 3, "mZ.", 3));
    free(got);
    free(msg);
    free(dir);
}

/* `COMMAND --help` is COMMAND's help for every command, version and help too;
 * `help help` is help's (as `help lock` is lock's). */
TEST(help_of_version_and_help_is_their_own)
{
    tool_opts o;
    char err[256];
    ASSERT_OK(parse(&o, err, (const char *[]){"version", "--help", NULL}));
    ASSERT_EQ(CMD_VERSION, o.help_cmd);
    ASSERT_OK(parse(&o, err, (const char *[]){"help", "--help", NULL}));
    ASSERT_EQ(CMD_HELP, o.help_cmd);
    ASSERT_OK(parse(&o, err, (const char *[]){"help", "help", NULL}));
    ASSERT_EQ(CMD_HELP, o.help_cmd);
    ASSERT_OK(parse(&o, err, (const char *[]){"help", "--help", "lock", NULL}));
    ASSERT_EQ(CMD_LOCK, o.help_cmd);
    ASSERT_OK(parse(&o, err, (const char *[]){"--help", NULL}));
    ASSERT_EQ(CMD_NONE, o.help_cmd);
    ASSERT(strstr(tool_help(CMD_VERSION), "Usage: elector version\n") != NULL);
    ASSERT(strstr(tool_help(CMD_HELP), "Usage: elector help [COMMAND]\n") != NULL);
    ASSERT(strstr(tool_help(CMD_NONE), "Usage: elector [OPTIONS] COMMAND") != NULL);
}

TEST(base64_encodes_and_decodes)
{
    static const char *const cases[][2] = {{"", ""},
                                           {"f", "Zg=="},
                                           {"fo", "Zm8="},
                                           {"foo", "Zm9v"},
                                           {"foob", "Zm9vYg=="},
                                           {"fooba", "Zm9vYmE="},
                                           {"foobar", "Zm9vYmFy"}};
    for (size_t i = 0; i < 7; i++) {
        char *b = tool_base64(cases[i][0], strlen(cases[i][0]));
        ASSERT_STREQ(cases[i][1], b);
        size_t n;
        unsigned char *d = json_b64_decode(b, &n);
        ASSERT_EQ(strlen(cases[i][0]), n);
        ASSERT(!memcmp(d, cases[i][0], n));
        free(d);
        free(b);
    }
}

/* ---------------------------------------------------------------- documentation */

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "r");
    ASSERT_NOT_NULL(f);
    char *buf = NULL;
    size_t len = 0, k;
    char tmp[8192];
    while ((k = fread(tmp, 1, sizeof(tmp), f)) > 0) {
        buf = realloc(buf, len + k + 1);
        memcpy(buf + len, tmp, k);
        len += k;
        buf[len] = 0;
    }
    fclose(f);
    return buf;
}

#include "options/help.h"

/* Every option the parser takes is in the man page (OPTIONS), in the help and
 * in the bash completion; every variable in the man page (ENVIRONMENT). */
TEST(every_option_and_variable_is_documented)
{
    char *man = read_all(ELECTOR_DOCS_DIR "/elector.1");
    char *comp = read_all(ELECTOR_DOCS_DIR "/../tool/options/elector.bash-completion");
    static const enum tool_cmd cmds[] = {CMD_NONE,       CMD_CAMPAIGN, CMD_OBSERVE,
                                         CMD_LEADER,     CMD_RUN,      CMD_LOCK,
                                         CMD_SWITCHOVER, CMD_TIMING};
    const char *name;
    char shrt;
    int env, n = 0;
    for (int i = 0; (name = tool_option_name(i, &shrt, &env)); i++, n++) {
        char roff[96], plain[96], var[96];
        size_t k = (size_t)snprintf(roff, sizeof(roff), "\\-\\-");
        for (const char *p = name; *p; p++)
            k += (size_t)snprintf(roff + k, sizeof(roff) - k, *p == '-' ? "\\-" : "%c",
                                  *p);
        snprintf(plain, sizeof(plain), "--%s", name);
        tl_log("%s (env %d)", plain, env);
        ASSERT_CONTAINS(man, roff);
        {
            bool in_help = false;
            for (size_t c = 0; c < sizeof(cmds) / sizeof(cmds[0]); c++)
                in_help |= strstr(tool_help(cmds[c]), plain) != NULL;
            ASSERT(in_help);
            char quoted[100];
            snprintf(quoted, sizeof(quoted), "%s ", plain);
            ASSERT(strstr(comp, quoted) || strstr(comp, plain));
        }
        if (env) {
            snprintf(var, sizeof(var), "%s", env == 2 ? "ETCDCTL_" : "ELECTOR_");
            size_t v = strlen(var);
            for (const char *p = name; *p && v + 1 < sizeof(var); p++)
                var[v++] =
                    *p == '-' ? '_' : (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
            var[v] = 0;
            tl_log("  %s", var);
            ASSERT_CONTAINS(man, var);
        }
    }
    ASSERT_GT(n, 25);
    ASSERT_CONTAINS(man, ".SH ENVIRONMENT");
    ASSERT_CONTAINS(man, ".SH EXIT STATUS");
    ASSERT_CONTAINS(man, ".SS The prefix rule");
    free(man);
    free(comp);
}

/* The completion script, sourced by bash: commands, options, values. */
TEST(bash_completion_completes_commands_options_and_values)
{
    char script[2048];
    snprintf(script, sizeof(script),
             "source %s/../tool/options/elector.bash-completion\n"
             "t() { COMP_WORDS=(\"$@\"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); "
             "COMPREPLY=(); _elector; echo \"${COMPREPLY[*]}\"; }\n"
             "t elector l; t elector -w js; t elector campaign x --proc; "
             "t elector --log-format j; t elector run x --res; t elector help ob; "
             "t elector lock L --gr; t elector ti; t elector timing --dr; "
             "t elector help tim\n",
             ELECTOR_DOCS_DIR);
    char *out = NULL;
    ASSERT_EQ(0, tl_run(&out, (const char *[]){"bash", "-c", script, NULL}));
    ASSERT_STREQ("leader lock\njson\n--proclaim-stdin\njson\n--restart\nobserve\n--grace "
                 "--grace-on-loss\ntiming\n--drift\ntiming\n",
                 out);
    free(out);
}

/* ---- --discovery-srv: a canned DNS reply ---- */

typedef struct dnsbuf {
    unsigned char b[512];
    size_t n;
} dnsbuf;

static void put8(dnsbuf *d, unsigned v)
{
    d->b[d->n++] = (unsigned char)v;
}
static void put16(dnsbuf *d, unsigned v)
{
    put8(d, v >> 8);
    put8(d, v & 0xff);
}
static void put_label(dnsbuf *d, const char *l)
{
    put8(d, (unsigned)strlen(l));
    memcpy(d->b + d->n, l, strlen(l));
    d->n += strlen(l);
}

/* An SRV answer for the question's name (pointer 0xc00c), its target a label
 * then a pointer to "example.com" in the question (at offset 34); label NULL:
 * the root ("."). */
static void srv_answer(dnsbuf *d, unsigned prio, unsigned weight, unsigned port,
                       const char *label)
{
    put16(d, 0xc00c);
    put16(d, 33); /* SRV */
    put16(d, 1);  /* IN */
    put16(d, 0);
    put16(d, 300); /* TTL */
    put16(d, label ? 6 + 1 + (unsigned)strlen(label) + 2 : 7);
    put16(d, prio);
    put16(d, weight);
    put16(d, port);
    if (label) {
        put_label(d, label);
        put16(d, 0xc022);
    } else {
        put8(d, 0);
    }
}

static void srv_reply(dnsbuf *d, int answers)
{
    memset(d, 0, sizeof(*d));
    put16(d, 0x1234);
    put16(d, 0x8180); /* a reply, recursion available, no error */
    put16(d, 1);
    put16(d, (unsigned)answers);
    put16(d, 0);
    put16(d, 0);
    put_label(d, "_etcd-client-ssl"); /* offset 12 */
    put_label(d, "_tcp");             /* offset 29 */
    put_label(d, "example");          /* offset 34 */
    put_label(d, "com");
    put8(d, 0);
    put16(d, 33);
    put16(d, 1);
}

TEST(srv_reply_is_parsed_sorted_by_priority_then_weight)
{
    dnsbuf d;
    srv_reply(&d, 4);
    srv_answer(&d, 10, 5, 2379, "m1");
    srv_answer(&d, 0, 0, 2380, "m2");
    srv_answer(&d, 10, 50, 2381, "m3");
    srv_answer(&d, 0, 0, 2382, NULL); /* "." : no service, skipped */
    tool_srv s[8];
    char err[200] = "";
    int n = tool_srv_parse(d.b, d.n, s, 8, err, sizeof(err));
    if (n < 0) tl_log("%s", err);
    ASSERT_EQ(3, n);
    ASSERT_STREQ("m2.example.com", s[0].target);
    ASSERT_EQ(2380, s[0].port);
    ASSERT_STREQ("m3.example.com", s[1].target);
    ASSERT_EQ(2381, s[1].port);
    ASSERT_STREQ("m1.example.com", s[2].target);
    ASSERT_EQ(2379, s[2].port);
    ASSERT_EQ(10, s[2].priority);
    ASSERT_EQ(5, s[2].weight);
}

TEST(srv_reply_that_is_cut_short_or_points_outside_is_refused)
{
    dnsbuf d;
    srv_reply(&d, 2);
    srv_answer(&d, 1, 1, 2379, "m1");
    srv_answer(&d, 1, 1, 2380, "m2");
    tool_srv s[8];
    char err[200] = "";
    for (size_t cut = 1; cut < d.n; cut += 7) {
        err[0] = 0;
        ASSERT_EQ(-1, tool_srv_parse(d.b, d.n - cut, s, 8, err, sizeof(err)));
        ASSERT_CONTAINS(err, "malformed");
    }
    /* The target's pointer aimed past the end of the message. */
    d.b[d.n - 1] = 0xff;
    d.b[d.n - 2] = 0xc1;
    ASSERT_EQ(-1, tool_srv_parse(d.b, d.n, s, 8, err, sizeof(err)));
    ASSERT_CONTAINS(err, "malformed");
    /* No answers: none, not an error. */
    srv_reply(&d, 0);
    ASSERT_EQ(0, tool_srv_parse(d.b, d.n, s, 8, err, sizeof(err)));
}

/* A DNS responder on a loopback UDP port, in a child process: each query gets
 * its own header and question back with `many` SRV answers for names starting
 * "_etcd-client-ssl" and one for the others; with many < 0 an answer cut short
 * (malformed). Targets "mNN.example.com" (label + "example" "com"), ports
 * 2379 + i. Returns the child's pid; *port its port. */
static pid_t dns_responder(int many, unsigned short *port)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    ASSERT(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ASSERT_OK(bind(fd, (struct sockaddr *)&a, sizeof(a)));
    socklen_t al = sizeof(a);
    ASSERT_OK(getsockname(fd, (struct sockaddr *)&a, &al));
    *port = ntohs(a.sin_port);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid > 0) {
        close(fd);
        return pid;
    }
    for (;;) {
        unsigned char q[512], r[4000];
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        ssize_t n = recvfrom(fd, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
        if (n < 12) continue;
        /* the question: the name's labels, then type and class */
        size_t qend = 12;
        while (qend < (size_t)n && q[qend])
            qend += q[qend] + 1u;
        qend += 5;
        if (qend > (size_t)n) continue;
        bool ssl = q[12] == 16 && !memcmp(q + 13, "_etcd-client-ssl", 16);
        int answers = many < 0 ? 1 : ssl ? many : 1;
        size_t m = 0;
        memcpy(r, q, qend);
        m = qend;
        r[2] = 0x81, r[3] = 0x80; /* a reply, no error */
        r[6] = (unsigned char)(answers >> 8), r[7] = (unsigned char)answers;
        r[8] = r[9] = r[10] = r[11] = 0; /* no authority, no additional */
        for (int i = 0; i < answers && m + 40 < sizeof(r); i++) {
            char t[8];
            int tl = snprintf(t, sizeof(t), "m%02d", i);
            unsigned char rr[] = {0xc0,
                                  12,
                                  0,
                                  33,
                                  0,
                                  1,
                                  0,
                                  0,
                                  0,
                                  60,
                                  0,
                                  (unsigned char)(6 + 1 + tl + 9 + 4),
                                  0,
                                  (unsigned char)i,
                                  0,
                                  0, /* priority i, weight 0 */
                                  (unsigned char)((2379 + i) >> 8),
                                  (unsigned char)((2379 + i) & 0xff)};
            memcpy(r + m, rr, sizeof(rr));
            m += sizeof(rr);
            r[m++] = (unsigned char)tl;
            memcpy(r + m, t, (size_t)tl);
            m += (size_t)tl;
            static const unsigned char dom[] = {7,   'e', 'x', 'a', 'm', 'p', 'l',
                                                'e', 3,   'c', 'o', 'm', 0};
            memcpy(r + m, dom, sizeof(dom));
            m += sizeof(dom);
        }
        if (many < 0) m -= 9; /* the target cut short */
        sendto(fd, r, m, 0, (struct sockaddr *)&from, fl);
    }
}

static void use_resolver(unsigned short port)
{
    res_init();
    _res.nscount = 1;
    _res.nsaddr_list[0].sin_family = AF_INET;
    _res.nsaddr_list[0].sin_port = htons(port);
    _res.nsaddr_list[0].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    _res.retry = 1;
    _res.retrans = 2;
    _res.options |= RES_USE_EDNS0; /* the answers exceed 512 bytes */
}

/* --discovery-srv against a DNS server that answers: the secure records
 * first (sorted), then the plain one, as one endpoint list longer than its
 * first buffer; a malformed answer is an error naming the query. */
TEST(discovery_srv_builds_the_endpoint_list_from_the_records)
{
    unsigned short port;
    pid_t dns = dns_responder(40, &port);
    use_resolver(port);
    char err[600] = "", skipped[64] = "x";
    char *eps = tool_srv_endpoints("example.com", NULL, false, skipped, sizeof(skipped),
                                   err, sizeof(err));
    if (!eps) tl_log("%s", err);
    ASSERT_STREQ("", skipped);
    ASSERT_NOT_NULL(eps);
    tl_log("%zu bytes: %.80s...", strlen(eps), eps);
    ASSERT(
        !strncmp(eps, "https://m00.example.com:2379,https://m01.example.com:2380,", 58));
    ASSERT_CONTAINS(eps, ",https://m39.example.com:2418,http://m00.example.com:2379");
    ASSERT_GT((long)strlen(eps), 1024L);
    free(eps);
    eps = tool_srv_endpoints("example.com", "prod", true, skipped, sizeof(skipped), err,
                             sizeof(err));
    ASSERT_NOT_NULL(eps);
    ASSERT(!strstr(eps, "http://")); /* secure only; the plain one named, cut to fit */
    ASSERT_STREQ("http://m00.example.com:2379", skipped);
    free(eps);
    kill(dns, SIGKILL);
    waitpid(dns, NULL, 0);

    dns = dns_responder(-1, &port);
    use_resolver(port);
    ASSERT_NULL(tool_srv_endpoints("example.com", NULL, false, skipped, sizeof(skipped),
                                   err, sizeof(err)));
    tl_log("%s", err);
    ASSERT_CONTAINS(err, "_etcd-client-ssl._tcp.example.com: malformed");
    kill(dns, SIGKILL);
    waitpid(dns, NULL, 0);
}

TEST(discovery_srv_with_no_records_is_a_clear_error)
{
    char err[600] = "", skipped[64];
    /* The resolver asks a closed loopback port (no traffic leaves the host):
     * no answer, as for a domain without the records. */
    res_init();
    _res.nscount = 1;
    _res.nsaddr_list[0].sin_family = AF_INET;
    _res.nsaddr_list[0].sin_port = htons(1);
    _res.nsaddr_list[0].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    _res.retry = 1;
    _res.retrans = 1;
    char *eps = tool_srv_endpoints("elector-test.invalid", NULL, false, skipped,
                                   sizeof(skipped), err, sizeof(err));
    ASSERT_NULL(eps);
    ASSERT_CONTAINS(err, "no SRV records");
    ASSERT_CONTAINS(err, "_etcd-client-ssl._tcp.elector-test.invalid");
    ASSERT_CONTAINS(err, "_etcd-client._tcp.elector-test.invalid");
}

/* ---------------------------------------------------------------- supervision
 * tool/supervise/ called directly (issue 23: paths that `elector run` reaches
 * only on resource failures, or never on this kernel). Each test runs in a
 * forked process of its own (testlib), which may become a subreaper. */

/* Runs fn in a forked child (its resource limits, cgroup and cwd changes stay
 * there); returns its exit code, or -1 if it died by a signal. */
/* A child's exit status: RLIMIT_NOFILE could not be lowered. Only valgrind
 * refuses that (it keeps descriptors of its own above the limit): the test is
 * skipped there, never elsewhere. */
#define NOFILE_REFUSED 76

static int in_child(int (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) _exit(fn(arg));
    int st;
    while (waitpid(p, &st, 0) < 0) {
    }
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (rc == NOFILE_REFUSED) tl_skip("RLIMIT_NOFILE cannot be lowered here (valgrind?)");
    return rc;
}

/* Descriptors this process may still open. */
static int free_fds(void)
{
    int fds[256], n = 0;
    while (n < 256 && (fds[n] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
        n++;
    for (int i = 0; i < n; i++)
        close(fds[i]);
    return n;
}

TEST(check_cmd_searches_path_as_a_shell_does)
{
    char err[256] = "";
    ASSERT_EQ(127, tool_child_check_cmd("", err, sizeof(err)));
    ASSERT_CONTAINS(err, "No such file");
    char *dir = tl_tmpdir("path");
    ASSERT_OK(chdir(dir));
    FILE *f = fopen("prog", "w");
    ASSERT_NOT_NULL(f);
    fputs("#!/bin/sh\nexit 0\n", f);
    fclose(f);
    ASSERT_OK(chmod("prog", 0755));
    f = fopen("plain", "w");
    ASSERT_NOT_NULL(f);
    fclose(f);
    /* An empty entry of $PATH is the current directory. */
    setenv("PATH", "/nonexistent-elector-dir::/usr/bin", 1);
    ASSERT_EQ(0, tool_child_check_cmd("prog", err, sizeof(err)));
    ASSERT_EQ(126, tool_child_check_cmd("plain", err, sizeof(err)));
    ASSERT_CONTAINS(err, "Permission denied");
    /* A trailing empty entry too (execvp tries it: the check must agree). */
    setenv("PATH", "/nonexistent-elector-dir:", 1);
    ASSERT_EQ(0, tool_child_check_cmd("prog", err, sizeof(err)));
    setenv("PATH", ":", 1);
    ASSERT_EQ(0, tool_child_check_cmd("prog", err, sizeof(err)));
    setenv("PATH", "/nonexistent-elector-dir:/usr/bin", 1);
    ASSERT_EQ(127, tool_child_check_cmd("prog", err, sizeof(err)));
    ASSERT_STREQ("command not found in $PATH", err);
    /* A file as an entry of $PATH is skipped (ENOTDIR), as a missing one. */
    setenv("PATH", "/etc/passwd:/nonexistent-elector-dir:/bin:/usr/bin", 1);
    ASSERT_EQ(0, tool_child_check_cmd("sh", err, sizeof(err)));
    /* No $PATH, or an empty one: the default path. */
    unsetenv("PATH");
    ASSERT_EQ(0, tool_child_check_cmd("sh", err, sizeof(err)));
    setenv("PATH", "", 1);
    ASSERT_EQ(0, tool_child_check_cmd("sh", err, sizeof(err)));
    /* A path: as is. A directory and a device are not executable (126); a
     * missing file, or one below a file, is not found (127). */
    ASSERT_EQ(126, tool_child_check_cmd("/tmp", err, sizeof(err)));
    ASSERT_STREQ("Permission denied (a directory)", err);
    ASSERT_EQ(126, tool_child_check_cmd("/dev/null", err, sizeof(err)));
    ASSERT_STREQ("Permission denied", err);
    ASSERT_EQ(127, tool_child_check_cmd("/nonexistent-elector-dir/x", err, sizeof(err)));
    ASSERT_STREQ("No such file or directory", err);
    ASSERT_EQ(127, tool_child_check_cmd("/etc/passwd/x", err, sizeof(err)));
    ASSERT_STREQ("Not a directory", err);
    ASSERT_EQ(0, tool_child_check_cmd("/bin/sh", err, sizeof(err)));
    free(dir);
}

static void pause_child(int *pid)
{
    *pid = fork();
    if (*pid == 0) {
        pause();
        _exit(0);
    }
}

/* Kernels before 5.14 have no cgroup.kill: the members listed in cgroup.procs
 * are killed one by one. A plain directory with such a file stands in for
 * that cgroup. */
TEST(cgroup_kill_without_cgroup_kill_kills_every_member)
{
    char *dir = tl_tmpdir("oldcg");
    int a, b;
    pause_child(&a);
    pause_child(&b);
    char path[600];
    snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
    FILE *f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    fprintf(f, "%d\n%d\n", a, b);
    fclose(f);
    tool_cgroup_kill(dir);
    int st;
    ASSERT_EQ(a, waitpid(a, &st, 0));
    ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    ASSERT_EQ(b, waitpid(b, &st, 0));
    ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    /* No cgroup.procs either (the cgroup is gone): nothing to do. */
    ASSERT_OK(unlink(path));
    tool_cgroup_kill(dir);
    tool_cgroup_kill("");
    free(dir);
}

/* A cgroup whose last member is still exiting cannot be removed yet (EBUSY):
 * tool_cgroup_remove waits for it rather than leave the directory behind. */
TEST(cgroup_remove_waits_for_the_last_member_to_leave)
{
    char base[4096], cg[4200];
    tool_cgroup_base(base, sizeof(base));
    snprintf(cg, sizeof(cg), "%s/elector-test-rm.%d", base, (int)getpid());
    if (!*base || mkdir(cg, 0755) != 0) tl_skip("no cgroup may be made here");
    int go[2];
    ASSERT_OK(pipe(go));
    pid_t p = fork();
    if (p == 0) {
        char procs[4300];
        snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg);
        int fd = open(procs, O_WRONLY);
        if (fd < 0 || write(fd, "0\n", 2) != 2) _exit(1);
        close(fd);
        if (write(go[1], "x", 1) != 1) _exit(1);
        usleep(20000); /* well inside the 200 ms of retries, even on a busy machine */
        _exit(0);
    }
    char x;
    ASSERT_EQ(1, (int)read(go[0], &x, 1)); /* it is in the cgroup */
    tool_cgroup_remove(cg);
    bool gone = access(cg, F_OK) != 0;
    int st;
    waitpid(p, &st, 0);
    if (!gone) rmdir(cg);
    ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ASSERT(gone);
    /* A member that stays (a process stuck in uninterruptible sleep): the wait
     * is bounded, and the cgroup stays. */
    ASSERT_OK(mkdir(cg, 0755));
    p = fork();
    if (p == 0) {
        char procs[4300];
        snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg);
        int fd = open(procs, O_WRONLY);
        if (fd < 0 || write(fd, "0\n", 2) != 2) _exit(1);
        close(fd);
        if (write(go[1], "x", 1) != 1) _exit(1);
        pause();
        _exit(0);
    }
    ASSERT_EQ(1, (int)read(go[0], &x, 1));
    tool_cgroup_remove(cg);
    bool stays = access(cg, F_OK) == 0;
    kill(p, SIGKILL);
    waitpid(p, &st, 0);
    for (int i = 0; i < 50 && rmdir(cg) != 0; i++)
        tl_msleep(10);
    ASSERT(stays);
}

struct nofile {
    int spare; /* descriptors left free */
    char err[256];
};

static int start_without_fds(void *arg)
{
    struct nofile *nf = arg;
    struct rlimit rl = {64, 64};
    if (setrlimit(RLIMIT_NOFILE, &rl)) return NOFILE_REFUSED;
    int fds[64], n = 0;
    while (n < 64 && (fds[n] = open("/dev/null", O_RDONLY)) >= 0)
        n++;
    for (int i = 0; i < nf->spare; i++)
        close(fds[--n]);
    if (free_fds() != nf->spare) return 11;
    char *argv[] = {"true", NULL}, *env[] = {NULL};
    tool_child_spec sp = {.argv = argv, .env_add = env, .deadline_ns = INT64_MAX / 2};
    char err[256] = "";
    tool_child *c = tool_child_start(&sp, err, sizeof(err));
    if (c) return 12;
    if (!strstr(err, "pipe: Too many open files")) return 13;
    return free_fds() == nf->spare ? 0 : 14; /* a pipe it made is closed again */
}

/* Out of descriptors: tool_child_start fails with the reason and leaks none,
 * whether its first pipe fails (1 free) or its second (3 free). */
TEST(child_start_without_descriptors_fails_and_leaks_none)
{
    struct nofile a = {.spare = 1}, b = {.spare = 3};
    ASSERT_EQ(0, in_child(start_without_fds, &a));
    ASSERT_EQ(0, in_child(start_without_fds, &b));
}

/* As elector: SIGPIPE ignored (a message may reach a guard that just quit),
 * a subreaper that notes the children it has. */
static void child_setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    tool_child_init();
}

/* The pid the command wrote to path, waiting for it while polling c. */
static pid_t read_pid(tool_child *c, const char *path)
{
    for (int i = 0; i < 500; i++) {
        FILE *f = fopen(path, "r");
        int pid = 0;
        if (f) {
            if (fscanf(f, "%d", &pid) != 1) pid = 0;
            fclose(f);
        }
        if (pid > 0) return pid;
        int st;
        tool_child_cause why;
        if (tool_child_poll(c, &st, &why)) return -1;
        tl_msleep(10);
    }
    return -1;
}

static pid_t dead_pid(void)
{
    pid_t p = fork();
    if (p == 0) _exit(0);
    waitpid(p, NULL, 0);
    return p;
}

/* tool_child_free while the command runs (elector ending with it alive) stops
 * the command in order (SIGTERM: its trap runs) and its whole tree, and waits
 * for it: nothing of it is left; the descriptors it closes are its own (fd 0
 * stays). Also, the
 * cgroup a dead elector's guard left behind is swept when a guard starts; a
 * live one's stays. */
TEST_WITH_TIMEOUT(child_free_while_the_command_runs_ends_its_tree, 30)
{
    child_setup();
    char base[4096], stale[4200] = "", live[4200] = "";
    tool_cgroup_base(base, sizeof(base));
    if (*base) {
        snprintf(stale, sizeof(stale), "%s/elector-run.%d", base, (int)dead_pid());
        snprintf(live, sizeof(live), "%s/elector-run.%d", base, (int)getpid());
        if (mkdir(stale, 0755) || mkdir(live, 0755)) stale[0] = live[0] = 0;
    }
    if (fcntl(0, F_GETFD) < 0) ASSERT_EQ(0, open("/dev/null", O_RDONLY));
    char *dir = tl_tmpdir("free");
    char pidf[600], termf[600], script[1600];
    snprintf(pidf, sizeof(pidf), "%s/pid", dir);
    snprintf(termf, sizeof(termf), "%s/term", dir);
    snprintf(script, sizeof(script),
             "trap 'echo term > %s; exit 0' TERM; sleep 30 & echo $! > %s; wait", termf,
             pidf);
    char *argv[] = {"sh", "-c", script, NULL}, *env[] = {NULL};
    tool_child_spec sp = {.argv = argv,
                          .env_add = env,
                          .deadline_ns = elector_now_ns() + 60000000000LL,
                          .grace_ns = 300000000LL};
    char err[256];
    tool_child *c = tool_child_start(&sp, err, sizeof(err));
    ASSERT_NOT_NULL(c);
    bool swept = !*stale || access(stale, F_OK) != 0;
    bool kept = !*live || access(live, F_OK) == 0;
    if (*live) rmdir(live);
    if (*stale) rmdir(stale);
    pid_t sleeper = read_pid(c, pidf);
    ASSERT_GT(sleeper, 0);
    ASSERT_OK(kill(sleeper, 0));
    tool_child_free(c);
    ASSERT(kill(sleeper, 0) != 0 && errno == ESRCH);
    ASSERT(access(termf, F_OK) == 0); /* stopped in order, not killed at once */
    ASSERT(fcntl(0, F_GETFD) >= 0);
    ASSERT(swept);
    ASSERT(kept);
    free(dir);
}

/* tool_child_free with the guard SIGSTOPped: the stop it asks for is due grace
 * later and the guard does not act on it, so elector kills the tree and the
 * guard itself once the stop is overdue, not after the whole answer time. */
TEST_WITH_TIMEOUT(child_free_with_the_guard_stopped_takes_over, 30)
{
    child_setup();
    char *dir = tl_tmpdir("hung");
    char pidf[600], script[800];
    snprintf(pidf, sizeof(pidf), "%s/pid", dir);
    snprintf(script, sizeof(script), "echo $$ > %s; exec sleep 30", pidf);
    char *argv[] = {"sh", "-c", script, NULL}, *env[] = {NULL};
    tool_child_spec sp = {.argv = argv,
                          .env_add = env,
                          .deadline_ns = elector_now_ns() + 60000000000LL,
                          .grace_ns = 200000000LL,
                          .ping_ns = 10000000000LL,
                          .answer_ns = 20000000000LL};
    char err[256];
    tool_child *c = tool_child_start(&sp, err, sizeof(err));
    ASSERT_NOT_NULL(c);
    pid_t cmd = read_pid(c, pidf);
    ASSERT_GT(cmd, 0);
    pid_t guard = c->guard;
    ASSERT_OK(kill(guard, SIGSTOP));
    int64_t t0 = tl_now_ns();
    tool_child_free(c);
    double secs = (double)(tl_now_ns() - t0) / 1e9;
    tl_log("tool_child_free took %.3f s", secs);
    ASSERT(kill(cmd, 0) != 0 && errno == ESRCH);
    ASSERT(kill(guard, 0) != 0 && errno == ESRCH);
    ASSERT_LT(secs, 15.0); /* well before the 20 s answer time */
    free(dir);
}

static int fork_fails(void *arg)
{
    (void)arg;
    char dir[512];
    if (tl_pids_cgroup(dir, sizeof(dir), 1)) return 77;
    struct rlimit rl = {64, 64}; /* so that free_fds() counts them all */
    if (setrlimit(RLIMIT_NOFILE, &rl)) return NOFILE_REFUSED;
    char err[256] = "";
    if (tool_child_check_pid_ns(err, sizeof(err)) != -1) return 10;
    if (!strstr(err, "fork: Resource temporarily unavailable")) return 11;
    int before = free_fds();
    char *argv[] = {"true", NULL}, *env[] = {NULL};
    tool_child_spec sp = {.argv = argv, .env_add = env, .deadline_ns = INT64_MAX / 2};
    err[0] = 0;
    if (tool_child_start(&sp, err, sizeof(err))) return 12;
    if (!strstr(err, "fork: Resource temporarily unavailable")) return 13;
    return free_fds() == before ? 0 : 14;
}

static int guard_fork_fails(void *arg)
{
    (void)arg;
    char dir[512];
    if (tl_pids_cgroup(dir, sizeof(dir), 2)) return 77;
    signal(SIGPIPE, SIG_IGN);
    char *argv[] = {"true", NULL}, *env[] = {NULL};
    tool_child_spec sp = {
        .argv = argv, .env_add = env, .deadline_ns = elector_now_ns() + 60000000000LL};
    char err[256];
    tool_child *c = tool_child_start(&sp, err, sizeof(err));
    if (!c) return 10;
    int st = 0;
    tool_child_cause why = TOOL_CHILD_RUNNING;
    for (int i = 0; i < 1000 && !tool_child_poll(c, &st, &why); i++)
        usleep(10000);
    tool_child_free(c);
    if (why != TOOL_CHILD_EXITED) return 11;
    return st == 126 ? 0 : 12;
}

static int in_pids_child(int (*fn)(void *))
{
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) _exit(fn(NULL));
    int st;
    while (waitpid(p, &st, 0) < 0) {
    }
    tl_pids_cgroup_remove(p); /* the guard, if any, may still be exiting */
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (rc == 77) tl_skip("no pids cgroup here");
    if (rc == NOFILE_REFUSED) tl_skip("RLIMIT_NOFILE cannot be lowered here (valgrind?)");
    return rc;
}

/* No process may be made (a pids cgroup at its limit): the PID-namespace check
 * and tool_child_start fail with the reason (and leak no descriptor); when the
 * guard itself cannot fork the command, the command counts as not runnable,
 * 126, as a shell's. */
TEST_WITH_TIMEOUT(fork_failures_are_reported, 30)
{
    child_setup();
    ASSERT_EQ(0, in_pids_child(fork_fails));
    ASSERT_EQ(0, in_pids_child(guard_fork_fails));
}

/* The guard takes the latest deadline only: an older one is ignored (the
 * command keeps running), and a later one that comes during a stop does not
 * postpone the stop's kill (a renewal that races with a stop must not keep a
 * command that ignores SIGTERM alive). */
TEST_WITH_TIMEOUT(deadlines_never_shorten_the_lease_nor_postpone_a_stop, 30)
{
    child_setup();
    char *dir = tl_tmpdir("dl");
    char pidf[600], script[800];
    snprintf(pidf, sizeof(pidf), "%s/pid", dir);
    snprintf(script, sizeof(script),
             "trap '' TERM; echo $$ > %s; while :; do sleep 0.05; done", pidf);
    char *argv[] = {"sh", "-c", script, NULL}, *env[] = {NULL};
    tool_child_spec sp = {.argv = argv,
                          .env_add = env,
                          .deadline_ns = elector_now_ns() + 60000000000LL,
                          .grace_ns = 100000000LL};
    char err[256];
    tool_child *c = tool_child_start(&sp, err, sizeof(err));
    ASSERT_NOT_NULL(c);
    pid_t cmd = read_pid(c, pidf);
    ASSERT_GT(cmd, 0);
    tool_child_deadline(c, elector_now_ns() + 200000000LL); /* older: ignored */
    int st = 0;
    tool_child_cause why = TOOL_CHILD_RUNNING;
    for (int i = 0; i < 80; i++) {
        ASSERT_EQ(0, tool_child_poll(c, &st, &why));
        tl_msleep(10);
    }
    ASSERT_OK(kill(cmd, 0));
    int64_t t0 = elector_now_ns();
    tool_child_stop(c, t0 + 300000000LL);
    tool_child_deadline(c, t0 + 120000000000LL); /* a renewal during the stop */
    int done = 0;
    for (int i = 0; i < 1000 && !done; i++) {
        done = tool_child_poll(c, &st, &why);
        if (!done) tl_msleep(10);
    }
    double secs = (double)(elector_now_ns() - t0) / 1e9;
    tl_log("stopped after %.3f s (kill due at 0.3 s)", secs);
    ASSERT(done);
    ASSERT_EQ(TOOL_CHILD_STOPPED, why);
    ASSERT_EQ(128 + SIGKILL, st);
    ASSERT_LT(secs, 8.0);
    tool_child_free(c);
    free(dir);
}

/* A guard that is slow to answer for less than the answer time (stopped for
 * 0.6 s here, answer time 5 s) and no stop or deadline due is not taken over:
 * the command runs on. (The 100 ms limit applies only once a stop or the
 * deadline is due.) */
TEST_WITH_TIMEOUT(guard_slow_for_less_than_the_answer_time_is_left_alone, 30)
{
    child_setup();
    char *dir = tl_tmpdir("slow");
    char pidf[600], script[800];
    snprintf(pidf, sizeof(pidf), "%s/pid", dir);
    snprintf(script, sizeof(script), "echo $$ > %s; exec sleep 30", pidf);
    char *argv[] = {"sh", "-c", script, NULL}, *env[] = {NULL};
    tool_child_spec sp = {.argv = argv,
                          .env_add = env,
                          .deadline_ns = elector_now_ns() + 60000000000LL,
                          .grace_ns = 100000000LL,
                          .ping_ns = 50000000LL,
                          .answer_ns = 5000000000LL};
    char err[256];
    tool_child *c = tool_child_start(&sp, err, sizeof(err));
    ASSERT_NOT_NULL(c);
    pid_t cmd = read_pid(c, pidf);
    ASSERT_GT(cmd, 0);
    ASSERT_OK(kill(c->guard, SIGSTOP));
    int st, done = 0;
    tool_child_cause why;
    for (int i = 0; i < 60 && !done; i++) {
        done = tool_child_poll(c, &st, &why);
        tl_msleep(10);
    }
    ASSERT_OK(kill(c->guard, SIGCONT));
    for (int i = 0; i < 30 && !done; i++) {
        done = tool_child_poll(c, &st, &why);
        tl_msleep(10);
    }
    ASSERT_EQ(0, done);
    ASSERT_OK(kill(cmd, 0));
    tool_child_free(c);
    ASSERT(kill(cmd, 0) != 0 && errno == ESRCH);
    free(dir);
}

/* A guard stopped (SIGSTOP) while nothing is due (no stop asked, the deadline a
 * minute away) is found out by the heartbeat alone: a ping unanswered for the
 * answer time (300 ms here) and elector kills the tree and the guard (found by
 * scripts/mutate.sh: maybe_ping never pinging survived, and such a guard was
 * noticed only at the next stop or the deadline). */
TEST_WITH_TIMEOUT(guard_stopped_while_nothing_is_due_is_found_by_the_heartbeat, 30)
{
    child_setup();
    char *dir = tl_tmpdir("idle");
    char pidf[600], script[800];
    snprintf(pidf, sizeof(pidf), "%s/pid", dir);
    snprintf(script, sizeof(script), "echo $$ > %s; exec sleep 30", pidf);
    char *argv[] = {"sh", "-c", script, NULL}, *env[] = {NULL};
    tool_child_spec sp = {.argv = argv,
                          .env_add = env,
                          .deadline_ns = elector_now_ns() + 60000000000LL,
                          .grace_ns = 100000000LL,
                          .ping_ns = 50000000LL,
                          .answer_ns = 300000000LL};
    char err[256];
    tool_child *c = tool_child_start(&sp, err, sizeof(err));
    ASSERT_NOT_NULL(c);
    pid_t cmd = read_pid(c, pidf);
    ASSERT_GT(cmd, 0);
    pid_t guard = c->guard;
    ASSERT_OK(kill(guard, SIGSTOP));
    int st = 0, done = 0;
    tool_child_cause why = TOOL_CHILD_EXITED;
    int64_t t0 = tl_now_ns();
    for (int i = 0; i < 500 && !done; i++) {
        done = tool_child_poll(c, &st, &why);
        if (!done) tl_msleep(10);
    }
    tl_log("taken over after %.0f ms", (double)(tl_now_ns() - t0) / 1e6);
    if (!done) kill(guard, SIGCONT);
    ASSERT(done);
    ASSERT_EQ(TOOL_CHILD_GUARD_HUNG, why);
    ASSERT(kill(cmd, 0) != 0 && errno == ESRCH);
    ASSERT(kill(guard, 0) != 0 && errno == ESRCH);
    tool_child_free(c);
    free(dir);
}

static void mark_released(void *ud)
{
    FILE *f = fopen(ud, "w");
    if (f) fclose(f);
}

/* The release hook runs in the guard only when nobody else can release:
 * not after tool_child_free (elector releases itself), but when elector
 * vanishes (EOF on the pipe) while a stop it asked for is under way. */
TEST_WITH_TIMEOUT(release_hook_runs_only_when_elector_cannot_release, 30)
{
    child_setup();
    char *dir = tl_tmpdir("rel");
    char mark[600], pidf[600], script[1600];
    snprintf(mark, sizeof(mark), "%s/released", dir);
    snprintf(pidf, sizeof(pidf), "%s/pid", dir);
    snprintf(script, sizeof(script),
             "trap '' TERM; echo $$ > %s; while :; do sleep 0.05; done", pidf);
    char *argv[] = {"sh", "-c", script, NULL}, *env[] = {NULL};
    tool_child_spec sp = {.argv = argv,
                          .env_add = env,
                          .deadline_ns = elector_now_ns() + 60000000000LL,
                          .grace_ns = 100000000LL,
                          .release = mark_released,
                          .ud = mark};
    char err[256];
    tool_child *c = tool_child_start(&sp, err, sizeof(err));
    ASSERT_NOT_NULL(c);
    ASSERT_GT(read_pid(c, pidf), 0);
    tool_child_free(c);
    ASSERT(access(mark, F_OK) != 0); /* elector releases: not the guard */
    unlink(pidf);
    c = tool_child_start(&sp, err, sizeof(err));
    ASSERT_NOT_NULL(c);
    pid_t cmd = read_pid(c, pidf);
    ASSERT_GT(cmd, 0);
    tool_child_stop(c, elector_now_ns() + 20000000000LL);
    close(c->fd); /* elector is gone: EOF */
    c->fd = -1;
    int st = 0, done = 0;
    tool_child_cause why;
    for (int i = 0; i < 1000 && !done; i++) {
        done = tool_child_poll(c, &st, &why);
        if (!done) tl_msleep(10);
    }
    ASSERT(done);
    ASSERT(kill(cmd, 0) != 0 && errno == ESRCH);
    ASSERT(access(mark, F_OK) == 0); /* nobody else could: the guard released */
    tool_child_free(c);
    free(dir);
}
