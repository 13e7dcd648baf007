/* SPDX-License-Identifier: MIT */
/* --health-cmd's runner (tool/supervise/healthcheck.c) without etcd: Docker's state
 * machine, the start period, a hung check killed with its process group at its
 * timeout, and the state in /healthz's body and /metrics. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "supervise/healthcheck.h"
#include "supervise/supervise.h"
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

/* ---------------------------------------------------------------- issue 23
 * The checker's paths that a run of elector reaches only when something else
 * goes wrong: a reaper stopped or killed, reaped elsewhere, no process or
 * cgroup to be had, no shell. */

static long read_pid_file(const char *path, double timeout_s)
{
    double end = tl_now() + timeout_s;
    while (tl_now() < end) {
        FILE *f = fopen(path, "r");
        long p = 0;
        if (f) {
            if (fscanf(f, "%ld", &p) != 1) p = 0;
            fclose(f);
        }
        if (p > 0) return p;
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

static int in_child(int (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) _exit(fn(arg));
    int st;
    while (waitpid(p, &st, 0) < 0) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(health_state_names)
{
    ASSERT_STREQ("starting", tool_health_state_name(TOOL_HEALTH_STARTING));
    ASSERT_STREQ("healthy", tool_health_state_name(TOOL_HEALTH_HEALTHY));
    ASSERT_STREQ("unhealthy", tool_health_state_name(TOOL_HEALTH_UNHEALTHY));
    ASSERT_STREQ("none", tool_health_state_name((tool_health_state)99));
}

/* The option parser refuses --health-retries 0; a caller of the API that
 * passes 0 or less gets 1: the first failure makes it unhealthy. */
TEST(health_retries_below_one_count_as_one)
{
    int retries[] = {0, -3};
    for (int i = 0; i < 2; i++) {
        tool_health_spec sp = {.cmd = "exit 1",
                               .interval_ms = 5000,
                               .timeout_ms = 5000,
                               .retries = retries[i],
                               .start_ms = 0};
        tool_health *h = tool_health_new(&sp);
        ASSERT_NOT_NULL(h);
        ASSERT(run_until(h, TOOL_HEALTH_UNHEALTHY, 1, 5));
        ASSERT_EQ(1, tool_health_failures(h));
        tool_health_free(h);
    }
}

/* The checks' cgroup of an elector that was SIGKILLed stays behind; the next
 * checker removes it. A live elector's, and a name that is not one of ours,
 * stay. */
TEST(health_sweeps_the_check_cgroup_of_a_dead_elector)
{
    char base[4096], stale[4200], live[4200], other[4200];
    tool_cgroup_base(base, sizeof(base));
    pid_t dead = dead_pid();
    snprintf(stale, sizeof(stale), "%s/elector-health.%d.0", base, (int)dead);
    snprintf(other, sizeof(other), "%s/elector-health.%dx", base, (int)dead);
    snprintf(live, sizeof(live), "%s/elector-health.%d.999", base, (int)getpid());
    if (!*base || mkdir(stale, 0755)) tl_skip("no cgroup may be made here");
    ASSERT_OK(mkdir(live, 0755));
    ASSERT_OK(mkdir(other, 0755));
    tool_health_spec sp = {.cmd = "true", .interval_ms = 5000, .timeout_ms = 5000};
    tool_health *h = tool_health_new(&sp);
    bool swept = access(stale, F_OK) != 0;
    bool kept = access(live, F_OK) == 0 && access(other, F_OK) == 0;
    rmdir(stale);
    rmdir(live);
    rmdir(other);
    tool_health_free(h);
    ASSERT(swept);
    ASSERT(kept);
}

/* A reaper that never ends its check (SIGSTOPped) is killed 2 s past the
 * check's timeout; the check counts as failed ("killed by signal 9"), and what
 * the check left in its cgroup dies with it (also a process that left the
 * check's group: only the cgroup still holds it). */
TEST_WITH_TIMEOUT(health_stopped_reaper_is_killed_by_the_backstop, 30)
{
    char base[4096];
    tool_cgroup_base(base, sizeof(base));
    char *dir = tl_tmpdir("hc");
    char pidf[600], cmd[1400];
    snprintf(pidf, sizeof(pidf), "%s/pid", dir);
    snprintf(cmd, sizeof(cmd), "setsid sh -c 'echo $$ > %s; exec sleep 60' & sleep 60",
             pidf);
    tool_health_spec sp = {
        .cmd = cmd, .interval_ms = 60000, .timeout_ms = 100, .retries = 1, .start_ms = 0};
    tool_health *h = tool_health_new(&sp);
    ASSERT_NOT_NULL(h);
    tool_health_process(h);
    pid_t reaper = tool_health_pid(h);
    ASSERT_GT(reaper, 0);
    long escapee = read_pid_file(pidf, 5);
    ASSERT_GT(escapee, 0);
    ASSERT_OK(kill(reaper, SIGSTOP));
    double t0 = tl_now();
    ASSERT(run_until(h, TOOL_HEALTH_UNHEALTHY, 1, 10));
    tl_log("failed after %.0f ms", (tl_now() - t0) * 1000);
    ASSERT_STREQ("killed by signal 9", tool_health_last(h));
    tl_msleep(100);
    bool left = alive(escapee);
    if (left) kill((pid_t)escapee, SIGKILL);
    if (*base) ASSERT(!left); /* without a cgroup nothing holds it */
    tool_health_free(h);
    free(dir);
}

/* The reaper reaped by someone else (a dying guard's cleanup reaps every
 * child): the check counts as failed, "lost". */
TEST(health_reaper_reaped_elsewhere_is_a_lost_check)
{
    tool_health_spec sp = {
        .cmd = "sleep 60", .interval_ms = 60000, .timeout_ms = 60000, .retries = 1};
    tool_health *h = tool_health_new(&sp);
    ASSERT_NOT_NULL(h);
    tool_health_process(h);
    pid_t reaper = tool_health_pid(h);
    ASSERT_GT(reaper, 0);
    ASSERT_OK(kill(reaper, SIGKILL));
    ASSERT_EQ(reaper, waitpid(reaper, NULL, 0));
    ASSERT(tool_health_process(h)); /* starting -> unhealthy */
    ASSERT_STREQ("lost: No child processes", tool_health_last(h));
    ASSERT_EQ(TOOL_HEALTH_UNHEALTHY, tool_health_get_state(h));
    tool_health_free(h);
}

/* tool_health_free asks the reaper to stop (SIGTERM) and lets it end the
 * check: it kills every descendant of its own, also one that left the check's
 * group and its cgroup (a subreaper holds it). Killing the reaper at once
 * would leave that one running. */
TEST_WITH_TIMEOUT(health_free_lets_the_reaper_end_a_check_that_escaped, 30)
{
    char base[4096];
    tool_cgroup_base(base, sizeof(base));
    if (!*base) tl_skip("no cgroup here: nothing to escape from");
    char *dir = tl_tmpdir("hc");
    char pidf[600], esc[600], cmd[1400];
    snprintf(pidf, sizeof(pidf), "%s/pid", dir);
    snprintf(esc, sizeof(esc), "%s/esc.sh", dir);
    FILE *f = fopen(esc, "w");
    ASSERT_NOT_NULL(f);
    fprintf(f, "echo 0 > %s/cgroup.procs || exit 1\necho $$ > %s\nexec sleep 60\n", base,
            pidf);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "setsid sh %s & sleep 60", esc);
    tool_health_spec sp = {
        .cmd = cmd, .interval_ms = 60000, .timeout_ms = 60000, .retries = 1};
    tool_health *h = tool_health_new(&sp);
    ASSERT_NOT_NULL(h);
    tool_health_process(h);
    long escapee = read_pid_file(pidf, 5);
    ASSERT_GT(escapee, 0);
    tool_health_free(h);
    tl_msleep(100);
    bool left = alive(escapee);
    if (left) kill((pid_t)escapee, SIGKILL);
    ASSERT(!left);
    free(dir);
}

/* A reaper that does not stop when asked (SIGSTOPped) is killed 2 s later;
 * its check (PDEATHSIG) dies with it. */
TEST_WITH_TIMEOUT(health_free_kills_a_reaper_that_does_not_stop, 30)
{
    char *dir = tl_tmpdir("hc");
    char pidf[600], cmd[1400];
    snprintf(pidf, sizeof(pidf), "%s/pid", dir);
    snprintf(cmd, sizeof(cmd), "echo $$ > %s; exec sleep 60", pidf);
    tool_health_spec sp = {
        .cmd = cmd, .interval_ms = 60000, .timeout_ms = 60000, .retries = 1};
    tool_health *h = tool_health_new(&sp);
    ASSERT_NOT_NULL(h);
    tool_health_process(h);
    pid_t reaper = tool_health_pid(h);
    long shell = read_pid_file(pidf, 5);
    ASSERT_GT(shell, 0);
    ASSERT_OK(kill(reaper, SIGSTOP));
    double t0 = tl_now();
    tool_health_free(h);
    double took = tl_now() - t0;
    tl_log("tool_health_free took %.3f s", took);
    ASSERT_GE(took, 1.9); /* it waited for an orderly stop first */
    ASSERT(kill(reaper, 0) != 0 && errno == ESRCH); /* killed and reaped */
    tl_msleep(100);
    ASSERT(!alive(shell));
    free(dir);
}

static int check_result(const char *cmd, char *last, size_t cap)
{
    tool_health_spec sp = {
        .cmd = cmd, .interval_ms = 60000, .timeout_ms = 5000, .retries = 1};
    tool_health *h = tool_health_new(&sp);
    if (!h) return -1;
    for (int i = 0; i < 500 && tool_health_get_state(h) == TOOL_HEALTH_STARTING; i++) {
        tool_health_process(h);
        usleep(10000);
    }
    snprintf(last, cap, "%s", tool_health_last(h));
    int st = tool_health_get_state(h);
    tool_health_free(h);
    return st;
}

/* In a child: fd 0 a pipe holding "abc", fd 1 the file arg; a check that
 * reads its stdin and writes to its stdout. 0: healthy, and nothing written. */
static int stdio_check(void *arg)
{
    int p[2];
    if (pipe(p) || write(p[1], "abc\n", 4) != 4) return 10;
    close(p[1]);
    FILE *out = fopen(arg, "w");
    if (!out) return 11;
    if (dup2(p[0], 0) < 0 || dup2(fileno(out), 1) < 0) return 12;
    char last[128];
    int st = check_result("read x; echo \"got $x\"; test -z \"$x\"", last, sizeof(last));
    fflush(NULL);
    if (st != TOOL_HEALTH_HEALTHY) return 13;
    struct stat sb;
    if (stat(arg, &sb) || sb.st_size != 0) return 14;
    return 0;
}

/* A check's stdin and stdout are /dev/null: it reads nothing of elector's stdin
 * and writes nothing into elector's stdout, which `elector run` leaves to the
 * command (found by scripts/mutate.sh: healthcheck.c, either dup2 deleted or
 * made on the wrong descriptor, survived). */
TEST(health_check_has_dev_null_for_stdin_and_stdout)
{
    char *dir = tl_tmpdir("hstdio");
    char out[600];
    snprintf(out, sizeof(out), "%s/out", dir);
    ASSERT_EQ(0, in_child(stdio_check, out));
    tl_rmtree(dir);
    free(dir);
}

/* In a child with fd 0 closed: is a check in its cgroup? 0 yes, 1 no. */
static int closed_stdin_check(void *arg)
{
    (void)arg;
    close(0);
    char last[128];
    int st =
        check_result("grep -q /elector-health /proc/self/cgroup", last, sizeof(last));
    return st == TOOL_HEALTH_HEALTHY ? 0 : 1;
}

/* elector started with its stdin closed: the check's first descriptor may be
 * 0, and it still joins its cgroup (found by scripts/mutate.sh: healthcheck.c,
 * `fd >= 0` into `fd >= 1`, survived). */
TEST(health_check_joins_its_cgroup_with_stdin_closed)
{
    char base[4096];
    tool_cgroup_base(base, sizeof(base));
    if (!*base) tl_skip("no cgroup may be made here");
    ASSERT_EQ(0, in_child(closed_stdin_check, NULL));
}

static int no_fork(void *arg)
{
    (void)arg;
    char dir[512], last[128];
    if (tl_pids_cgroup(dir, sizeof(dir), 1)) return 77;
    if (check_result("true", last, sizeof(last)) != TOOL_HEALTH_UNHEALTHY) return 10;
    return strcmp(last, "cannot start: Resource temporarily unavailable") ? 11 : 0;
}

/* No process to be had (a pids cgroup at its limit): the check cannot start,
 * and that is a failure with the reason. */
TEST(health_check_that_cannot_start_fails)
{
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) _exit(no_fork(NULL));
    int st;
    waitpid(p, &st, 0);
    tl_pids_cgroup_remove(p);
    ASSERT(WIFEXITED(st));
    if (WEXITSTATUS(st) == 77) tl_skip("no pids cgroup here");
    ASSERT_EQ(0, WEXITSTATUS(st));
}

static int no_cgroup(void *arg)
{
    const char *nest = arg;
    char path[4300], last[128];
    snprintf(path, sizeof(path), "%s/cgroup.procs", nest);
    FILE *f = fopen(path, "w");
    if (!f || fputs("0\n", f) < 0 || fclose(f)) return 10;
    snprintf(path, sizeof(path), "%s/cgroup.max.descendants", nest);
    f = fopen(path, "w");
    if (!f || fputs("0\n", f) < 0 || fclose(f)) return 11;
    if (check_result("true", last, sizeof(last)) != TOOL_HEALTH_HEALTHY) return 12;
    if (strcmp(last, "exit status 0")) return 13;
    if (check_result("exit 4", last, sizeof(last)) != TOOL_HEALTH_UNHEALTHY) return 14;
    return strcmp(last, "exit status 4") ? 15 : 0;
}

/* Where no cgroup may be made for the checks (cgroup.max.descendants 0 here;
 * elsewhere a read-only hierarchy), they run without one, as before. */
TEST(health_checks_run_without_a_cgroup_when_none_may_be_made)
{
    char base[4096], nest[4200];
    tool_cgroup_base(base, sizeof(base));
    snprintf(nest, sizeof(nest), "%s/elector-test-nocg.%d", base, (int)getpid());
    if (!*base || mkdir(nest, 0755)) tl_skip("no cgroup may be made here");
    int rc = in_child(no_cgroup, nest);
    for (int i = 0; i < 50 && rmdir(nest); i++)
        tl_msleep(10);
    ASSERT_EQ(0, rc);
}

static int no_shell(void *arg)
{
    (void)arg;
    char last[128];
    if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
        mount("/dev/null", "/bin/sh", NULL, MS_BIND, NULL))
        return 77;
    if (check_result("true", last, sizeof(last)) != TOOL_HEALTH_UNHEALTHY) return 10;
    return strcmp(last, "exit status 127") ? 11 : 0;
}

/* No /bin/sh to run the check (hidden here in a mount namespace): exit
 * status 127, a failure, as a shell reports a missing command. */
TEST(health_check_without_a_shell_fails_with_127)
{
    int rc = in_child(no_shell, NULL);
    if (rc == 77) tl_skip("no mount namespace may be made here");
    ASSERT_EQ(0, rc);
}
