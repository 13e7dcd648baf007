/* SPDX-License-Identifier: MIT */
/* --health-cmd's runner (tool/supervise/healthcheck.c) without etcd: Docker's state
 * machine, the start period, a hung check killed with its process group at its
 * timeout, and the state in /healthz's body and /metrics. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "supervise/healthcheck.h"
#include "ops/http.h"
#include "testlib.h"

/* A live process (not a zombie: an orphan of the check may be reparented to
 * this test, a subreaper, and wait there to be reaped). */
static bool alive(long pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return p && p[1] && p[2] != 'Z' && p[2] != 'X';
}

/* Runs the checker until pred holds or timeout_s passes. */
static bool run_until(tool_health *h, tool_health_state want, int failures,
                      double timeout_s)
{
    double end = tl_now() + timeout_s;
    while (tl_now() < end) {
        tool_health_process(h);
        if (tool_health_get_state(h) == want && tool_health_failures(h) >= failures)
            return true;
        int64_t t = tool_health_timeout(h);
        tl_msleep(t > 20 ? 20 : (int)t + 1);
    }
    return false;
}

TEST(health_passes_then_fails_retries_times_then_passes_again)
{
    char *dir = tl_tmpdir("hc");
    char ok[600], cmd[700];
    snprintf(ok, sizeof(ok), "%s/ok", dir);
    snprintf(cmd, sizeof(cmd), "test -e %s", ok);
    FILE *f = fopen(ok, "w");
    ASSERT_NOT_NULL(f);
    fclose(f);
    tool_health_spec sp = {
        .cmd = cmd, .interval_ms = 50, .timeout_ms = 2000, .retries = 3, .start_ms = 0};
    tool_health *h = tool_health_new(&sp);
    ASSERT_NOT_NULL(h);
    ASSERT_EQ(TOOL_HEALTH_STARTING, tool_health_get_state(h));
    ASSERT(run_until(h, TOOL_HEALTH_HEALTHY, 0, 5));
    ASSERT_STREQ("exit status 0", tool_health_last(h));
    unlink(ok);
    ASSERT(run_until(h, TOOL_HEALTH_HEALTHY, 2, 5)); /* two failures: still healthy */
    ASSERT(run_until(h, TOOL_HEALTH_UNHEALTHY, 3, 5));
    ASSERT_STREQ("exit status 1", tool_health_last(h));
    f = fopen(ok, "w");
    fclose(f);
    ASSERT(run_until(h, TOOL_HEALTH_HEALTHY, 0, 5));
    ASSERT_EQ(0, tool_health_failures(h));
    tool_health_free(h);
    tl_rmtree(dir);
    free(dir);
}

TEST(health_failures_in_the_start_period_do_not_count)
{
    tool_health_spec sp = {.cmd = "exit 3",
                           .interval_ms = 30,
                           .timeout_ms = 2000,
                           .retries = 1,
                           .start_ms = 600};
    tool_health *h = tool_health_new(&sp);
    ASSERT_NOT_NULL(h);
    double t0 = tl_now();
    ASSERT(run_until(h, TOOL_HEALTH_UNHEALTHY, 1, 5));
    double took = tl_now() - t0;
    tl_log("unhealthy after %.0f ms (start period 600 ms)", took * 1000);
    ASSERT_GE(took, 0.55);
    ASSERT_STREQ("exit status 3", tool_health_last(h));
    tool_health_free(h);
}

TEST(health_hung_check_is_a_failure_and_its_group_is_killed)
{
    char *dir = tl_tmpdir("hc");
    char pids[600], cmd[1400];
    snprintf(pids, sizeof(pids), "%s/pids", dir);
    /* The shell and a background child of it, both in the check's group. */
    snprintf(cmd, sizeof(cmd), "sleep 60 & echo $! >> %s; echo $$ >> %s; wait", pids,
             pids);
    tool_health_spec sp = {
        .cmd = cmd, .interval_ms = 5000, .timeout_ms = 200, .retries = 1, .start_ms = 0};
    tool_health *h = tool_health_new(&sp);
    ASSERT_NOT_NULL(h);
    double t0 = tl_now();
    ASSERT(run_until(h, TOOL_HEALTH_UNHEALTHY, 1, 5));
    tl_log("failed after %.0f ms", (tl_now() - t0) * 1000);
    ASSERT_STREQ("timed out after 200 ms", tool_health_last(h));
    tl_msleep(100);
    FILE *f = fopen(pids, "r");
    ASSERT_NOT_NULL(f);
    long p;
    int n = 0;
    while (fscanf(f, "%ld", &p) == 1) {
        n++;
        ASSERT(!alive(p)); /* gone */
    }
    fclose(f);
    ASSERT_EQ(2, n);
    tool_health_free(h);
    tl_rmtree(dir);
    free(dir);
}

TEST(health_free_kills_a_running_check)
{
    char *dir = tl_tmpdir("hc");
    char pids[600], cmd[1400];
    snprintf(pids, sizeof(pids), "%s/pids", dir);
    snprintf(cmd, sizeof(cmd), "echo $$ >> %s; sleep 60", pids);
    tool_health_spec sp = {.cmd = cmd,
                           .interval_ms = 5000,
                           .timeout_ms = 60000,
                           .retries = 1,
                           .start_ms = 0};
    tool_health *h = tool_health_new(&sp);
    ASSERT_NOT_NULL(h);
    tool_health_process(h);
    ASSERT_GT(tool_health_pid(h), 0);
    double end = tl_now() + 5;
    while (access(pids, F_OK) != 0 && tl_now() < end)
        tl_msleep(10);
    tl_msleep(50);
    tool_health_free(h);
    tl_msleep(50);
    FILE *f = fopen(pids, "r");
    ASSERT_NOT_NULL(f);
    long p;
    ASSERT_EQ(1, fscanf(f, "%ld", &p));
    fclose(f);
    ASSERT(!alive(p));
    tl_rmtree(dir);
    free(dir);
}

TEST(health_state_in_healthz_body_and_metrics)
{
    elector_etcd_stats st;
    memset(&st, 0, sizeof(st));
    tool_view v = {.name = "x", .session_healthy = true, .etcd = &st};
    char *m = tool_metrics_render(&v);
    ASSERT_NOT_NULL(m);
    ASSERT(!strstr(m, "elector_health")); /* no --health-cmd: no family */
    free(m);
    v.health = "unhealthy";
    v.health_failures = 3;
    m = tool_metrics_render(&v);
    ASSERT_CONTAINS(m, "# TYPE elector_health_status gauge\n");
    ASSERT_CONTAINS(m, "elector_health_status{state=\"unhealthy\"} 1\n");
    ASSERT_CONTAINS(m, "elector_health_status{state=\"healthy\"} 0\n");
    ASSERT_CONTAINS(m, "elector_health_failures 3\n");
    free(m);
    char *b = tool_healthz_body(&v);
    ASSERT_STREQ("ok\nhealth: unhealthy (3 failures)\n", b);
    free(b);
    v.health = "healthy";
    v.health_failures = 0;
    v.session_healthy = false;
    b = tool_healthz_body(&v);
    ASSERT_STREQ("unhealthy\nhealth: healthy\n", b);
    free(b);
}
