/* The tool's command-line parsing: durations, commands, options anywhere. */
#include <string.h>
#include "opts.h"
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
    static const char *bad[] = {"", "-1s", "+1s", " 1s", "5x", "s", "ms", "1 s", "1e400",
                                "nan", "inf", "1sec", "99999999999999h", "0x10"};
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
    for (int i = 0; args[i]; i++) argv[n++] = (char *)args[i];
    argv[n] = NULL;
    return tool_parse_args(n, argv, o, err, 256);
}

TEST(global_options_before_or_after_the_command)
{
    tool_opts o;
    char err[256];
    ASSERT_OK(parse(&o, err, (const char *[]){"--endpoints", "E", "--ttl", "2", "-w", "json",
                                              "campaign", "N", "V", NULL}));
    ASSERT_EQ(CMD_CAMPAIGN, o.cmd);
    ASSERT_STREQ("N", o.name);
    ASSERT_STREQ("V", o.value);
    ASSERT_STREQ("E", o.endpoints);
    ASSERT_EQ(2, o.ttl_s);
    ASSERT_EQ(FMT_JSON, o.fmt);
    ASSERT_OK(parse(&o, err, (const char *[]){"campaign", "N", "--endpoints=E2", "--ttl=3s",
                                              "--write-out", "simple", NULL}));
    ASSERT_STREQ("E2", o.endpoints);
    ASSERT_EQ(3, o.ttl_s);
    ASSERT_EQ(FMT_SIMPLE, o.fmt);
}

TEST(run_takes_the_command_after_double_dash)
{
    tool_opts o;
    char err[256];
    ASSERT_OK(parse(&o, err, (const char *[]){"run", "N", "--grace", "500ms", "--restart", "--",
                                              "cmd", "--endpoints", "x", NULL}));
    ASSERT_EQ(CMD_RUN, o.cmd);
    ASSERT_STREQ("cmd", o.argv[0]);
    ASSERT_STREQ("--endpoints", o.argv[1]); /* the command's own args stay its own */
    ASSERT_NULL(o.endpoints);
    ASSERT_EQ(500, o.grace_ms);
    ASSERT(o.restart);
}

TEST(usage_errors_say_what_is_wrong)
{
    tool_opts o;
    char err[256];
    ASSERT_EQ(EXIT_USAGE, parse(&o, err, (const char *[]){"campaign", "N", "--ttl", "1.5s", NULL}));
    ASSERT_CONTAINS(err, "whole number of seconds");
    ASSERT_EQ(EXIT_USAGE, parse(&o, err, (const char *[]){"campaign", "N", "--restart=1", NULL}));
    ASSERT_CONTAINS(err, "takes no value");
    ASSERT_EQ(EXIT_USAGE, parse(&o, err, (const char *[]){"leader", "N", "--http", ":1", NULL}));
    ASSERT_EQ(EXIT_USAGE, parse(&o, err, (const char *[]){"leader", "N", "extra", NULL}));
    ASSERT_CONTAINS(err, "unexpected argument 'extra'");
    ASSERT_EQ(EXIT_USAGE, parse(&o, err, (const char *[]){"observe", "N", "--", "x", NULL}));
    ASSERT_EQ(EXIT_USAGE, parse(&o, err, (const char *[]){"campaign", "N", "--log-level", "loud", NULL}));
    ASSERT_OK(parse(&o, err, (const char *[]){"--help", NULL}));
    ASSERT(o.help);
}
