/* SPDX-License-Identifier: MIT */
/* `elector timing`'s arithmetic (tool/timing/budget.c) without etcd: the
 * figures for the defaults, each refusal and the numbers it names. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "timing/budget.h"
#include "testlib.h"

static tool_timing_in defaults(int64_t ttl_ms)
{
    return (tool_timing_in){.ttl_ms = ttl_ms,
                            .grace_ms = -1,
                            .rtt_ms = 5,
                            .election_timeout_ms = 1000,
                            .release = true};
}

TEST(default_ttl_gives_the_documented_figures)
{
    tool_timing_in in = defaults(10000);
    tool_timing_out o;
    char err[512] = "";
    ASSERT_OK(tool_timing_budget(&in, &o, err, sizeof err));
    ASSERT_EQ(1000, o.margin_ms); /* max(TTL/10, 200 ms) */
    ASSERT_EQ(2000, o.grace_ms);  /* min(2 s, TTL/4) */
    ASSERT_EQ(3333, o.renew_every_ms);
    ASSERT_EQ(9000, o.believe_ms);
    ASSERT_EQ(15, o.crash_helper_ms);
    ASSERT_EQ(10510, o.expiry_ms); /* TTL + 500 ms scan + 2 round trips */
    ASSERT_EQ(13510, o.raft_change_ms);
    ASSERT_EQ(1000, o.gap_ms);
    ASSERT(o.drift_max > 0.0999 && o.drift_max < 0.1001);
    ASSERT_EQ(9000 - 3333 - 250 - 5, o.outage_ms);
    ASSERT_EQ(9000 - 3333 - 250 - 5 - 2000, o.outage_cmd_ms);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ASSERT_NOT_NULL(f);
    tool_timing_report(&in, &o, f);
    fclose(f);
    tl_log("%s", text);
    ASSERT_CONTAINS(text, "about 15ms (the release helper");
    ASSERT_CONTAINS(text, "crash without the release helper     10.51s");
    ASSERT_CONTAINS(text, "clock drift tolerated                10.00% slow");
    ASSERT_CONTAINS(text, "leadership kept                      5.41s");
    free(text);
}

TEST(short_ttl_keeps_the_200ms_margin_and_a_quarter_ttl_grace)
{
    tool_timing_in in = defaults(2000);
    tool_timing_out o;
    char err[512] = "";
    ASSERT_OK(tool_timing_budget(&in, &o, err, sizeof err));
    ASSERT_EQ(200, o.margin_ms);
    ASSERT_EQ(500, o.grace_ms);
    ASSERT_EQ(1800 - 666 - 250 - 5, o.outage_ms);
}

TEST(drift_beyond_the_margin_is_refused)
{
    tool_timing_in in = defaults(10000);
    tool_timing_out o;
    char err[512] = "";
    in.drift = 0.05; /* within 10 % */
    ASSERT_OK(tool_timing_budget(&in, &o, err, sizeof err));
    ASSERT(o.gap_ms > 500 && o.gap_ms < 600); /* 10 s - 9 s / 0.95 */
    in.drift = 0.11;
    ASSERT_EQ(-1, tool_timing_budget(&in, &o, err, sizeof err));
    tl_log("%s", err);
    ASSERT_CONTAINS(err, "could not stop the command before another may lead");
    ASSERT_CONTAINS(err, "covers up to 10.00%");
}

TEST(grace_that_would_stop_the_command_between_healthy_renewals_is_refused)
{
    tool_timing_in in = defaults(3000);
    tool_timing_out o;
    char err[512] = "";
    /* The deadline is 2.7 s after a renewal's send, the next renewal is
     * answered 1 s + 5 ms after it: SIGTERM at 2.7 s - grace must come later. */
    in.grace_ms = 1700;
    ASSERT_EQ(-1, tool_timing_budget(&in, &o, err, sizeof err));
    tl_log("%s", err);
    ASSERT_CONTAINS(err, "--grace 1700ms");
    ASSERT_CONTAINS(err, "below 1695ms");
    in.grace_ms = 1695;
    ASSERT_EQ(-1, tool_timing_budget(&in, &o, err, sizeof err));
    in.grace_ms = 1694;
    ASSERT_OK(tool_timing_budget(&in, &o, err, sizeof err));
    in.grace_ms = 1500;
    ASSERT_OK(tool_timing_budget(&in, &o, err, sizeof err));
}

TEST(margin_that_outlasts_the_renewals_is_refused)
{
    tool_timing_in in = defaults(3000);
    tool_timing_out o;
    char err[512] = "";
    in.margin_ms = 2000; /* believe 1 s, renewals every 1 s: lapses */
    ASSERT_EQ(-1, tool_timing_budget(&in, &o, err, sizeof err));
    ASSERT_CONTAINS(err, "before the next renewal");
    in.margin_ms = 3000;
    ASSERT_EQ(-1, tool_timing_budget(&in, &o, err, sizeof err));
    ASSERT_CONTAINS(err, "leaves nothing");
    in = defaults(500);
    ASSERT_EQ(-1, tool_timing_budget(&in, &o, err, sizeof err));
    ASSERT_CONTAINS(err, "at least 1s");
}

TEST(grace_on_loss_names_its_overlap)
{
    tool_timing_in in = defaults(10000);
    in.grace_on_loss = true;
    in.release = false;
    tool_timing_out o;
    char err[512] = "";
    ASSERT_OK(tool_timing_budget(&in, &o, err, sizeof err));
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ASSERT_NOT_NULL(f);
    tool_timing_report(&in, &o, f);
    fclose(f);
    ASSERT_CONTAINS(text, "--grace-on-loss");
    ASSERT(!strstr(text, "the release helper revokes"));
    free(text);
}

/* ---------------------------------------------------------------- the command */

/* `elector timing ARGS...`: the exit status, stdout in *out, stderr in *err. */
static int timing(char **out, char **err, const char *const *args)
{
    const char *argv[24] = {ELECTOR_BIN, "timing"};
    int n = 2;
    for (int i = 0; args[i] && n < 23; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    tl_run_opts ro = {.err = err};
    return tl_run_ex(out, argv, &ro);
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

TEST(command_prints_the_report_for_the_defaults)
{
    char *out = NULL, *err = NULL;
    ASSERT_EQ(0, timing(&out, &err, (const char *const[]){NULL}));
    tl_log("%s", out);
    ASSERT_STREQ("", err);
    ASSERT_CONTAINS(out, "settings: --ttl 10.00s, margin 1.00s, renewals every 3.33s; "
                         "--grace 2.00s\n");
    ASSERT_CONTAINS(out, "assumed:  etcd round trip 5ms, etcd election timeout 1.00s, "
                         "clock drift 0%\n");
    ASSERT_CONTAINS(out, "about 15ms (the release helper revokes the lease)");
    ASSERT_CONTAINS(out, "freeze (SIGSTOP, VM paused)          10.51s");
    ASSERT_CONTAINS(out, "any of these with a new etcd leader  13.51s");
    ASSERT_CONTAINS(out, "has killed its command, 1.00s before etcd can expire");
    ASSERT_CONTAINS(out, "clock drift tolerated                10.00% slow");
    ASSERT_CONTAINS(out, "leadership kept                      5.41s\n");
    ASSERT_CONTAINS(out, "run's command not stopped            3.41s");
    ASSERT(!strstr(out, "--grace-on-loss"));
    free(out);
    free(err);
}

TEST(command_takes_the_settings_of_run_and_its_own)
{
    char *out = NULL, *err = NULL;
    ASSERT_EQ(0, timing(&out, &err,
                        ARGS("--ttl", "5s", "--grace", "1s", "--grace-on-loss",
                             "--release-on-exit=false", "--margin", "600ms", "--rtt",
                             "20ms", "--election-timeout", "2s", "--drift", "1%")));
    tl_log("%s", out);
    ASSERT_STREQ("", err);
    ASSERT_CONTAINS(out, "settings: --ttl 5.00s, margin 600ms, renewals every 1.67s; "
                         "--grace 1.00s\n");
    ASSERT_CONTAINS(out, "etcd round trip 20ms, etcd election timeout 2.00s, clock "
                         "drift 1%\n");
    ASSERT(!strstr(out, "the release helper revokes"));
    ASSERT_CONTAINS(out, "crash without the release helper     5.54s");
    ASSERT_CONTAINS(out, "any of these with a new etcd leader  11.54s");
    ASSERT_CONTAINS(out, "clock drift tolerated                12.00% slow");
    ASSERT_CONTAINS(out, "running up to 1.00s while another may lead");
    free(out);
    free(err);
    /* --drift as a fraction is the same as the percentage. */
    char *out2 = NULL;
    ASSERT_EQ(0, timing(&out, &err, ARGS("--drift", "0.005")));
    ASSERT_EQ(0, timing(&out2, NULL, ARGS("--drift=0.5%")));
    ASSERT_CONTAINS(out, "clock drift 0.5%\n");
    ASSERT_STREQ(out, out2);
    free(out);
    free(out2);
    free(err);
}

/* Each refusal: exit 2, nothing on stdout, the sentence on stderr. */
TEST(command_refuses_each_setting_with_its_sentence)
{
    static const struct {
        const char *args[6];
        const char *says;
    } cases[] = {
        {{"--drift", "11%"},
         "elector: timing: a clock 11.00% slow moves the leader's deadline past the "
         "earliest expiry of its lease: the guard could not stop the command before "
         "another may lead. The margin (1000ms of a 10s TTL) covers up to 10.00%: use a "
         "larger --margin\n"},
        {{"--ttl", "3s", "--grace", "1700ms"},
         "elector: timing: --grace 1700ms: the guard would send SIGTERM to the command "
         "between two renewals that succeed (the deadline is 2700ms after a renewal, the "
         "next one is answered 1005ms after it): use --grace below 1695ms or a longer "
         "--ttl\n"},
        {{"--ttl", "3s", "--margin", "2s"},
         "elector: timing: the belief (TTL - margin = 1000ms) would end before the next "
         "renewal (every TTL/3 = 1000ms) is answered: use a smaller --margin\n"},
        {{"--ttl", "3s", "--margin", "3s"},
         "elector: timing: a margin of 3000ms leaves nothing of a 3s TTL\n"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out = NULL, *err = NULL;
        ASSERT_EQ(2, timing(&out, &err, cases[i].args));
        tl_log("%s", err);
        ASSERT_STREQ("", out);
        ASSERT_STREQ(cases[i].says, err);
        free(out);
        free(err);
    }
}

/* Bad usage is the parser's: a log line, exit 2; no etcd is ever asked. */
TEST(command_usage_errors_and_help)
{
    char *out = NULL, *err = NULL;
    ASSERT_EQ(2, timing(&out, &err, ARGS("my-service")));
    ASSERT_CONTAINS(err, "unexpected argument 'my-service' (see elector --help)");
    free(out);
    free(err);
    ASSERT_EQ(2, timing(&out, &err, ARGS("--drift", "2")));
    ASSERT_CONTAINS(err, "--drift: '2' is not a fraction below 1 or a percentage below "
                         "100% (e.g. 0.005 or 0.5%)");
    free(out);
    free(err);
    ASSERT_EQ(2, timing(&out, &err, ARGS("--restart")));
    ASSERT_CONTAINS(err, "only for `elector run`");
    free(out);
    free(err);
    ASSERT_EQ(0, timing(&out, &err, ARGS("--help")));
    ASSERT_CONTAINS(out, "Usage: elector timing [--ttl D]");
    free(out);
    free(err);
    /* Unreachable endpoints change nothing: timing never connects. */
    ASSERT_EQ(0, timing(&out, &err, ARGS("--endpoints", "127.0.0.1:1", "--ttl", "4s")));
    ASSERT_CONTAINS(out, "settings: --ttl 4.00s");
    free(out);
    free(err);
}
