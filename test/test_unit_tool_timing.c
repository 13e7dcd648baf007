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
