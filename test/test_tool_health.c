/* SPDX-License-Identifier: MIT */
/* Operations against real etcd: health-driven step-down (--health-cmd) and
 * `elector switchover`. Every candidate runs a job that appends "start V NS" and
 * "stop V NS" (wall clock) to one activity log; the log is checked for overlap:
 * at no instant may two jobs run. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testlib.h"
#include "tool_util.h"

/* ---------------------------------------------------------------- helpers */

typedef struct cand {
    pid_t pid; /* elector, leader of a process group of its own */
    char val[16];
    char err[512];
} cand;

static char *path_in(const char *dir, const char *name)
{
    static char p[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof(p[k]), "%s/%s", dir, name);
    return p[k];
}

/* The job: logs start, and stop on SIGTERM (after `slow` seconds of cleanup). */
static void write_job(const char *dir, const char *slow)
{
    FILE *f = fopen(path_in(dir, "job.sh"), "w");
    ASSERT_NOT_NULL(f);
    fprintf(f,
            "echo \"start $1 $(date +%%s%%N)\" >> %s/activity\n"
            "trap 'sleep %s; echo \"stop $1 $(date +%%s%%N)\" >> %s/activity; exit 0' "
            "TERM\n"
            "while :; do sleep 0.05; done\n",
            dir, slow, dir);
    fclose(f);
}

/* Starts `elector run NAME --value V [extra...] -- sh job.sh V` in its own
 * process group, stdout to /dev/null, stderr to DIR/V.err. */
/* Every candidate started, killed (with its group) if a test fails midway; a
 * guard left alone stops its job by the deadline and exits. */
static pid_t g_started[16];
static int g_nstarted;

static void kill_started(void)
{
    for (int i = 0; i < g_nstarted; i++)
        if (g_started[i] > 0) kill(-g_started[i], SIGKILL);
}

/* run (with the job), or campaign when campaign is set. */
static void start_elector(cand *c, const char *dir, const char *ep, const char *name,
                          const char *val, const char *const extra[], bool campaign)
{
    snprintf(c->val, sizeof(c->val), "%s", val);
    snprintf(c->err, sizeof(c->err), "%s/%s.err", dir, val);
    const char *argv[48] = {ELECTOR_BIN, "--endpoints", ep, "--ttl", "5", "-w", "json"};
    int n = 7;
    argv[n++] = campaign ? "campaign" : "run";
    argv[n++] = name;
    argv[n++] = "--value";
    argv[n++] = val;
    if (!campaign) {
        argv[n++] = "--grace";
        argv[n++] = "2s";
    }
    for (int i = 0; extra && extra[i]; i++)
        argv[n++] = extra[i];
    if (!campaign) {
        argv[n++] = "--";
        argv[n++] = "sh";
        argv[n++] = path_in(dir, "job.sh");
        argv[n++] = val;
    }
    argv[n] = NULL;
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        setpgid(0, 0);
        int in = open("/dev/null", O_RDWR);
        int e = open(c->err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(in, 0);
        dup2(in, 1);
        dup2(e, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    setpgid(pid, pid);
    c->pid = pid;
    if (!g_nstarted) atexit(kill_started);
    if (g_nstarted < 16) g_started[g_nstarted++] = pid;
}

static void start_cand(cand *c, const char *dir, const char *ep, const char *name,
                       const char *val, const char *const extra[])
{
    start_elector(c, dir, ep, name, val, extra, false);
}

/* The last max bytes of a candidate's stderr, for the log of a failing test. */
static void print_tail(const char *path, long max)
{
    FILE *f = fopen(path, "r");
    if (!f) return;
    if (fseek(f, 0, SEEK_END) == 0 && ftell(f) > max)
        fseek(f, -max, SEEK_END);
    else
        rewind(f);
    char line[1024];
    while (fgets(line, sizeof(line), f))
        fputs(line, stderr);
    fclose(f);
}

static void stop_cand(cand *c)
{
    if (c->pid <= 0) return;
    kill(c->pid, SIGCONT);
    int st = tl_reap(c->pid, SIGTERM, 15); /* SIGKILL after 15 s */
    c->pid = 0;
    if (!WIFEXITED(st) || WEXITSTATUS(st)) {
        tl_log("%s: status %d; its end:", c->err, st);
        print_tail(c->err, 4000);
    }
    ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* resigned; a sanitizer is quiet */
    free(check_file(c->err)); /* its JSON events against the schema */
}

/* With auth: "--user=root:PASSWORD" for the etcdctl of order() and count(). */
static char g_ctl_user[128];

/* etcdctl with --endpoints ep (and g_ctl_user), then args. */
static int ctl(char **out, const char *ep, const char *const args[])
{
    const char *argv[24] = {"etcdctl", "--endpoints", ep};
    int n = 3;
    if (*g_ctl_user) argv[n++] = g_ctl_user;
    for (int i = 0; args[i] && n < 23; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return tl_run(out, argv);
}

/* etcdctl's view: the values of NAME/ in create order, space separated. */
static char *order(const char *ep, const char *name)
{
    char prefix[128];
    snprintf(prefix, sizeof(prefix), "%s/", name);
    char *out = NULL;
    int rc = ctl(&out, ep,
                 (const char *[]){"get", "--prefix", prefix, "--print-value-only",
                                  "--sort-by=CREATE", "--order=ASCEND", NULL});
    ASSERT_EQ(0, rc);
    for (char *p = out; p && *p; p++)
        if (*p == '\n') *p = ' ';
    size_t n = out ? strlen(out) : 0;
    while (n && out[n - 1] == ' ')
        out[--n] = 0;
    return out;
}

/* Stops the candidates from the back of the line to the leader, so that
 * nobody is elected while they go. */
static void stop_all(cand *cs, int n, const char *ep, const char *name)
{
    char *o = order(ep, name);
    for (int i = 0; i < n; i++) /* those out of the line first */
        if (cs[i].pid && !strstr(o, cs[i].val)) stop_cand(&cs[i]);
    for (char *p = o + strlen(o); p >= o; p--) {
        if (p > o && p[-1] != ' ') continue;
        for (int i = 0; i < n; i++)
            if (cs[i].pid && !strncmp(p, cs[i].val, strlen(cs[i].val))) stop_cand(&cs[i]);
    }
    free(o);
}

/* How many keys start with prefix. */
static int count(const char *ep, const char *prefix)
{
    char *out = NULL;
    int rc =
        ctl(&out, ep, (const char *[]){"get", "--prefix", prefix, "--keys-only", NULL});
    ASSERT_EQ(0, rc);
    int n = 0;
    for (char *p = out; p && *p;) {
        char *nl = strchr(p, '\n');
        if (nl != p) n++; /* a key, then an empty line */
        if (!nl) break;
        p = nl + 1;
    }
    free(out);
    return n;
}

static bool wait_order(const char *ep, const char *name, const char *want, double s)
{
    double end = tl_now() + s;
    for (;;) {
        char *o = order(ep, name);
        bool yes = tl_streq(o, want);
        if (yes || tl_now() > end) tl_log("order of %s: '%s' (want '%s')", name, o, want);
        free(o);
        if (yes) return true;
        if (tl_now() > end) return false;
        tl_msleep(50);
    }
}

/* Waits until n candidates are in line and each has its member key. */
static void wait_ready(const char *ep, const char *name, int n)
{
    char mp[128], p[128];
    snprintf(mp, sizeof(mp), "__elector/candidates/%s/", name);
    snprintf(p, sizeof(p), "%s/", name);
    double end = tl_now() + 15;
    while (count(ep, p) != n || count(ep, mp) != n) {
        ASSERT(tl_now() < end);
        tl_msleep(50);
    }
}

/* The activity log never shows two jobs running at once; returns the number of
 * starts, and the value of the job that runs at the end in *last (or ""). */
static int check_activity(const char *dir, char *last, size_t cap)
{
    FILE *f = fopen(path_in(dir, "activity"), "r");
    ASSERT_NOT_NULL(f);
    struct ev {
        char what[8], who[16];
        long long t;
    } ev[256];
    int n = 0;
    while (n < 256 && fscanf(f, "%7s %15s %lld", ev[n].what, ev[n].who, &ev[n].t) == 3)
        n++;
    fclose(f);
    /* By time: the appends of different jobs may interleave. */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && ev[j].t < ev[j - 1].t; j--) {
            struct ev x = ev[j];
            ev[j] = ev[j - 1];
            ev[j - 1] = x;
        }
    char running[16] = "";
    int starts = 0;
    for (int i = 0; i < n; i++) {
        tl_log("  %s %s %lld", ev[i].what, ev[i].who, ev[i].t);
        if (!strcmp(ev[i].what, "start")) {
            if (*running) tl_log("OVERLAP: %s starts while %s runs", ev[i].who, running);
            ASSERT(!*running);
            snprintf(running, sizeof(running), "%s", ev[i].who);
            starts++;
        } else {
            ASSERT_STREQ(running, ev[i].who);
            running[0] = 0;
        }
    }
    snprintf(last, cap, "%s", running);
    return starts;
}

static int switchover(char **out, char **err, const char *ep, const char *name,
                      const char *to, const char *timeout)
{
    return tool(out, err,
                (const char *[]){"--endpoints", ep, "switchover", name, "--to", to,
                                 "--timeout", timeout, NULL});
}

static void no_request(const char *ep, const char *name)
{
    char rk[128];
    snprintf(rk, sizeof(rk), "__elector/switchover/%s", name);
    ASSERT_EQ(0, count(ep, rk));
}

/* ---------------------------------------------------------------- health */

/* The leader's check fails: its command is stopped before the successor's
 * starts; it stays out of the queue while unhealthy, re-joins at the back once
 * a check passes, and leads again when the other one becomes unhealthy. */
TEST_WITH_TIMEOUT(health_failing_leader_steps_down_and_rejoins_when_healthy, 120)
{
    eh_cluster *c = start1();
    const char *ep = eh_endpoints(c);
    char *dir = tl_tmpdir("health");
    write_job(dir, "0.5"); /* a job slow to stop: a successor too early shows */
    cand a, b;
    char cmd_a[600], cmd_b[600];
    snprintf(cmd_a, sizeof(cmd_a), "test -e %s/ok-a", dir);
    snprintf(cmd_b, sizeof(cmd_b), "test -e %s/ok-b", dir);
    close(open(path_in(dir, "ok-a"), O_CREAT | O_WRONLY, 0600));
    close(open(path_in(dir, "ok-b"), O_CREAT | O_WRONLY, 0600));
    start_cand(&a, dir, ep, "hl", "a",
               (const char *[]){"--health-cmd", cmd_a, "--health-interval", "200ms",
                                "--health-retries", "2", "--health-holdoff", "1s", NULL});
    ASSERT(wait_contains(path_in(dir, "activity"), "start a", 15));
    start_cand(&b, dir, ep, "hl", "b",
               (const char *[]){"--health-cmd", cmd_b, "--health-interval", "200ms",
                                "--health-retries", "2", "--health-holdoff", "1s", NULL});
    ASSERT(wait_order(ep, "hl", "a b", 15));

    unlink(path_in(dir, "ok-a"));
    ASSERT(wait_contains(path_in(dir, "activity"), "start b", 15));
    ASSERT(wait_contains(path_in(dir, "activity"), "stop a", 5));
    char last[16];
    ASSERT_EQ(2, check_activity(dir, last, sizeof(last))); /* a stopped before b began */
    ASSERT_STREQ("b", last);
    ASSERT(wait_contains(a.err, "\"event\":\"unhealthy\"", 5));
    ASSERT(wait_order(ep, "hl", "b", 5)); /* a is out of the queue */
    tl_msleep(1000);
    ASSERT(wait_order(ep, "hl", "b", 0)); /* and stays out while unhealthy */

    close(open(path_in(dir, "ok-a"), O_CREAT | O_WRONLY, 0600));
    ASSERT(wait_order(ep, "hl", "b a", 10)); /* back, at the end of the line */
    ASSERT(wait_contains(a.err, "\"event\":\"healthy\"", 5));

    unlink(path_in(dir, "ok-b"));
    double end = tl_now() + 15;
    while (check_activity(dir, last, sizeof(last)) < 3 || strcmp(last, "a")) {
        ASSERT(tl_now() < end);
        tl_msleep(100);
    }
    ASSERT_EQ(3, check_activity(dir, last, sizeof(last))); /* a, b, a */
    ASSERT_STREQ("a", last);
    stop_cand(&b);
    stop_cand(&a);
    check_activity(dir, last, sizeof(last));
    ASSERT_STREQ("", last);
    free(dir);
    eh_stop(c);
}

/* A waiting candidate whose check fails leaves the line (the leader is not
 * disturbed) and joins it again once a check passes. */
TEST_WITH_TIMEOUT(health_failing_waiter_leaves_the_line_and_comes_back, 60)
{
    eh_cluster *c = start1();
    const char *ep = eh_endpoints(c);
    char *dir = tl_tmpdir("hwait");
    write_job(dir, "0");
    cand a, b;
    char cmd_b[600];
    snprintf(cmd_b, sizeof(cmd_b), "test -e %s/ok-b", dir);
    close(open(path_in(dir, "ok-b"), O_CREAT | O_WRONLY, 0600));
    start_cand(&a, dir, ep, "hw", "a", NULL);
    ASSERT(wait_order(ep, "hw", "a", 15));
    start_cand(&b, dir, ep, "hw", "b",
               (const char *[]){"--health-cmd", cmd_b, "--health-interval", "200ms",
                                "--health-retries", "2", NULL});
    ASSERT(wait_order(ep, "hw", "a b", 15));
    unlink(path_in(dir, "ok-b"));
    ASSERT(wait_order(ep, "hw", "a", 10));
    ASSERT(wait_contains(b.err, "\"event\":\"unhealthy\"", 1));
    close(open(path_in(dir, "ok-b"), O_CREAT | O_WRONLY, 0600));
    ASSERT(wait_order(ep, "hw", "a b", 10));
    char last[16];
    ASSERT_EQ(1, check_activity(dir, last, sizeof(last))); /* a never stopped */
    ASSERT_STREQ("a", last);
    stop_cand(&b);
    stop_cand(&a);
    free(dir);
    eh_stop(c);
}

/* A check that hangs is a failure at --health-timeout, and its process group
 * (the shell and what it started) is killed each time. */
TEST_WITH_TIMEOUT(health_hung_check_fails_at_its_timeout_and_is_killed, 60)
{
    eh_cluster *c = start1();
    const char *ep = eh_endpoints(c);
    char *dir = tl_tmpdir("hhung");
    write_job(dir, "0");
    cand a;
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "echo $$ >> %s/check-pids; sleep 100", dir);
    start_cand(&a, dir, ep, "hh", "a",
               (const char *[]){"--health-cmd", cmd, "--health-interval", "300ms",
                                "--health-timeout", "200ms", "--health-retries", "2",
                                NULL});
    ASSERT(wait_contains(a.err, "\"event\":\"unhealthy\"", 15));
    ASSERT(wait_contains(a.err, "timed out after 200 ms", 1));
    ASSERT(wait_contains(path_in(dir, "activity"), "stop a", 10));
    ASSERT(wait_order(ep, "hh", "", 5));
    /* Every check's shell is gone (killed at its timeout), but the running one. */
    tl_msleep(400);
    FILE *f = fopen(path_in(dir, "check-pids"), "r");
    ASSERT_NOT_NULL(f);
    long p;
    int alive = 0, n = 0;
    while (fscanf(f, "%ld", &p) == 1) {
        n++;
        alive += kill((pid_t)p, 0) == 0;
    }
    fclose(f);
    tl_log("%d checks ran, %d still running", n, alive);
    ASSERT_GE(n, 2);
    ASSERT_LE(alive, 1);
    /* elector killed outright: the running check does not outlive it. */
    kill(a.pid, SIGKILL);
    tl_reap(a.pid, SIGKILL, 5);
    a.pid = 0;
    tl_msleep(300);
    f = fopen(path_in(dir, "check-pids"), "r");
    ASSERT_NOT_NULL(f);
    alive = 0;
    while (fscanf(f, "%ld", &p) == 1)
        alive += kill((pid_t)p, 0) == 0;
    fclose(f);
    ASSERT_EQ(0, alive);
    free(dir);
    eh_stop(c);
}

/* The processes whose command line is "sleep SECS" (exactly), killed when
 * kill_them is set (a failed run leaves none behind). */
static int count_sleeps(const char *secs, bool kill_them)
{
    char want[64];
    int wl = snprintf(want, sizeof(want), "sleep%c%s%c", 0, secs, 0);
    DIR *d = opendir("/proc");
    ASSERT_NOT_NULL(d);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d))) {
        char *end, path[300], buf[64];
        long pid = strtol(de->d_name, &end, 10);
        if (*end || pid <= 0) continue;
        snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t k = read(fd, buf, sizeof(buf));
        close(fd);
        if (k != wl || memcmp(buf, want, (size_t)wl)) continue;
        n++;
        if (kill_them) kill((pid_t)pid, SIGKILL);
    }
    closedir(d);
    return n;
}

/* Waits up to 5 s for the sleeps a and b to be gone (the reaper ends them
 * asynchronously after a SIGKILLed elector); returns how many were left, and
 * kills them. */
static int gone_or_killed(const char *a, const char *b)
{
    double end = tl_now() + 5;
    while (count_sleeps(a, false) + count_sleeps(b, false) && tl_now() < end)
        tl_msleep(20);
    return count_sleeps(a, true) + (strcmp(a, b) ? count_sleeps(b, true) : 0);
}

/* Issue 26, case 4: a check that starts a process in a session of its own
 * (setsid) and one that leaves one behind when it exits. Nothing a check
 * starts outlives the check (its timeout or its end) or elector (SIGTERM or
 * SIGKILL): the checks run in a cgroup of their own, under a reaper that is a
 * child subreaper. */
TEST_WITH_TIMEOUT(health_check_leaves_no_process_behind, 90)
{
    eh_cluster *c = start1();
    const char *ep = eh_endpoints(c);
    char *dir = tl_tmpdir("hleak");
    char s1[32], s2[32], s3[32], cmd[256];
    /* Durations of this run's own: the count sees no other test's sleeps. */
    int u = (int)(getpid() % 100000);
    snprintf(s1, sizeof(s1), "301.%05d", u);
    snprintf(s2, sizeof(s2), "302.%05d", u);
    snprintf(s3, sizeof(s3), "303.%05d", u);
    snprintf(cmd, sizeof(cmd), "setsid sleep %s & exec sleep %s", s1, s2);
    cand a;
    start_elector(&a, dir, ep, "hk", "a",
                  (const char *[]){"--health-cmd", cmd, "--health-interval", "300ms",
                                   "--health-timeout", "200ms", "--health-retries",
                                   "1000", NULL},
                  true);
    /* Three checks timed out: each one's processes are gone, the running
     * one's at most are there. */
    ASSERT(wait_contains(a.err, "(timed out after 200 ms): 3 of 1000", 20));
    int most = 0;
    for (int i = 0; i < 20; i++) {
        int n = count_sleeps(s1, false);
        if (n > most) most = n;
        tl_msleep(50);
    }
    tl_log("setsid'd processes of timed-out checks: at most %d at once", most);
    ASSERT_LE(most, 1);
    stop_cand(&a);
    int left = gone_or_killed(s1, s2);
    tl_log("after elector exited: %d left", left);
    ASSERT_EQ(0, left);

    /* A check that passes at once, leaving a daemon: gone with the check. */
    snprintf(cmd, sizeof(cmd), "setsid sleep %s & sleep 0.2", s3);
    start_elector(
        &a, dir, ep, "hk", "b",
        (const char *[]){"--health-cmd", cmd, "--health-interval", "300ms", NULL}, true);
    ASSERT(wait_contains(a.err, "elected", 15));
    tl_msleep(700); /* a few checks ran */
    most = 0;
    for (int i = 0; i < 20; i++) {
        int n = count_sleeps(s3, false);
        if (n > most) most = n;
        tl_msleep(50);
    }
    tl_log("daemons of passed checks: at most %d at once", most);
    ASSERT_LE(most, 1);
    /* elector killed outright while a check runs: nothing of it is left. */
    double end = tl_now() + 5;
    while (count_sleeps(s3, false) == 0 && tl_now() < end)
        tl_msleep(10);
    kill(a.pid, SIGKILL);
    tl_reap(a.pid, SIGKILL, 5);
    a.pid = 0;
    left = gone_or_killed(s3, s3);
    tl_log("after elector was killed: %d left", left);
    ASSERT_EQ(0, left);
    free(dir);
    eh_stop(c);
}

/* How many times s occurs in the file at path. */
static int occurrences(const char *path, const char *s)
{
    FILE *f = fopen(path, "r");
    ASSERT_NOT_NULL(f);
    char line[2048];
    int n = 0;
    while (fgets(line, sizeof(line), f))
        for (char *p = line; (p = strstr(p, s)); p += strlen(s))
            n++;
    fclose(f);
    return n;
}

/* Issue 26, case 5: two candidates whose check flips every 100 ms, one failure
 * enough (--health-retries 1). Without damping leadership changed about 60
 * times in 12 s; with a hold-off of 1 s (doubling), at most once per hold-off
 * period: a leader that stepped down stays out for the hold-off, and a new
 * leader survives one failure in its first interval. */
TEST_WITH_TIMEOUT(health_flapping_check_is_damped, 90)
{
    eh_cluster *c = start1();
    const char *ep = eh_endpoints(c);
    char *dir = tl_tmpdir("hflap");
    const char *chk = "test $(( $(date +%s%N) / 100000000 % 2 )) = 0";
    const char *opts[] = {"--health-cmd",
                          chk,
                          "--health-interval",
                          "70ms",
                          "--health-retries",
                          "1",
                          "--health-holdoff",
                          "1s",
                          "--log-level",
                          "info",
                          NULL};
    cand a, b;
    start_elector(&a, dir, ep, "hf", "a", opts, true);
    start_elector(&b, dir, ep, "hf", "b", opts, true);
    tl_msleep(12000);
    stop_cand(&a);
    stop_cand(&b);
    int elected = occurrences(a.err, "elector: elected: ") +
                  occurrences(b.err, "elector: elected: ");
    int holdoffs = occurrences(a.err, "out of the election for at least") +
                   occurrences(b.err, "out of the election for at least");
    int spared = occurrences(a.err, "one failure in the first interval is not enough") +
                 occurrences(b.err, "one failure in the first interval is not enough");
    tl_log("12 s of a check flipping every 100 ms: %d elections, %d hold-offs, %d new "
           "leaders spared a first failure",
           elected, holdoffs, spared);
    ASSERT_GE(elected, 1);
    ASSERT_GE(holdoffs, 1);
    ASSERT_LE(elected, 13); /* the first election, then one per 1 s period at most */
    free(dir);
    eh_stop(c);
}

/* ---------------------------------------------------------------- switchover */

static void start_line(cand *cs, int n, const char *dir, const char *ep, const char *name)
{
    static const char *vals[] = {"v0", "v1", "v2", "v3", "v4"};
    char want[64] = "";
    for (int i = 0; i < n; i++) {
        start_cand(&cs[i], dir, ep, name, vals[i], NULL);
        snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s%s", i ? " " : "",
                 vals[i]);
        ASSERT(wait_order(ep, name, want, 15));
    }
    wait_ready(ep, name, n);
}

/* Four candidates: target last, target next, target already leading, an unknown
 * target; each handover without overlap, the request gone after each. */
TEST_WITH_TIMEOUT(switchover_to_last_next_leading_and_unknown, 120)
{
    eh_cluster *c = start1();
    const char *ep = eh_endpoints(c);
    char *dir = tl_tmpdir("swo");
    write_job(dir, "0.5"); /* a job slow to stop: a successor too early shows */
    cand cs[4];
    start_line(cs, 4, dir, ep, "sw");
    char last[16];

    char *out = NULL, *err = NULL;
    ASSERT_EQ(0, switchover(&out, &err, ep, "sw", "v3", "20s")); /* last in line */
    ASSERT_CONTAINS(out, "v3");
    free(out);
    free(err);
    no_request(ep, "sw");
    char *o = order(ep, "sw");
    ASSERT(!strncmp(o, "v3 ", 3));
    free(o);
    ASSERT(wait_contains(path_in(dir, "activity"), "start v3", 5));
    ASSERT_EQ(2, check_activity(dir, last, sizeof(last)));
    ASSERT_STREQ("v3", last);

    /* The target next in line. */
    o = order(ep, "sw");
    char next[8];
    snprintf(next, sizeof(next), "%.2s", o + 3);
    free(o);
    ASSERT_EQ(0, switchover(&out, NULL, ep, "sw", next, "20s"));
    ASSERT_CONTAINS(out, next);
    free(out);
    no_request(ep, "sw");
    ASSERT(wait_contains(path_in(dir, "activity"), next, 5));
    ASSERT_EQ(3, check_activity(dir, last, sizeof(last)));
    ASSERT_STREQ(next, last);

    /* The target already leads: at once, nothing changes. */
    double t0 = tl_now();
    ASSERT_EQ(0, switchover(&out, &err, ep, "sw", next, "20s"));
    tl_log("already leading: %.0f ms", (tl_now() - t0) * 1000);
    ASSERT_CONTAINS(err, "already leads");
    free(out);
    free(err);
    no_request(ep, "sw");

    /* Unknown. */
    ASSERT_EQ(5, switchover(&out, &err, ep, "sw", "nobody", "20s"));
    ASSERT_CONTAINS(err, "no candidate of sw has the value 'nobody'");
    free(out);
    free(err);
    no_request(ep, "sw");
    tl_msleep(300);
    ASSERT_EQ(3, check_activity(dir, last, sizeof(last)));
    ASSERT_STREQ(next, last);

    stop_all(cs, 4, ep, "sw");
    ASSERT_EQ(3, check_activity(dir, last, sizeof(last)));
    ASSERT_STREQ("", last);
    free(dir);
    eh_stop(c);
}

/* An `etcdctl elect` candidate ahead of the target: refused, naming its key;
 * nothing moves and no request is left. */
TEST_WITH_TIMEOUT(switchover_refuses_a_foreign_candidate_ahead_of_the_target, 90)
{
    eh_cluster *c = start1();
    const char *ep = eh_endpoints(c);
    char *dir = tl_tmpdir("swf");
    write_job(dir, "0");
    cand cs[3];
    start_cand(&cs[0], dir, ep, "sf", "v0", NULL);
    ASSERT(wait_order(ep, "sf", "v0", 15));
    int fd;
    pid_t el = tl_spawn(
        (const char *[]){"etcdctl", "--endpoints", ep, "elect", "sf", "foreign", NULL},
        &fd);
    ASSERT_GT(el, 0);
    ASSERT(wait_order(ep, "sf", "v0 foreign", 15));
    start_cand(&cs[1], dir, ep, "sf", "v1", NULL);
    ASSERT(wait_order(ep, "sf", "v0 foreign v1", 15));
    start_cand(&cs[2], dir, ep, "sf", "v2", NULL);
    ASSERT(wait_order(ep, "sf", "v0 foreign v1 v2", 15));
    char *keys = NULL;
    ASSERT_EQ(0, tl_run(&keys, (const char *[]){"etcdctl", "--endpoints", ep, "get",
                                                "--prefix", "sf/", "--sort-by=CREATE",
                                                "--order=ASCEND", "--keys-only", NULL}));
    char fkey[64];
    ASSERT_EQ(1, sscanf(strchr(keys, '\n') + 2, "%63s", fkey)); /* the second key */
    free(keys);
    tl_log("the foreign key: %s", fkey);
    char *out = NULL, *err = NULL;
    ASSERT_EQ(5, switchover(&out, &err, ep, "sf", "v2", "10s"));
    ASSERT_CONTAINS(err, fkey);
    ASSERT_CONTAINS(err, "not an elector candidate");
    free(out);
    free(err);
    no_request(ep, "sf");
    /* A target ahead of the foreign candidate is fine. */
    ASSERT(wait_order(ep, "sf", "v0 foreign v1 v2", 1));
    tl_reap(el, SIGKILL, 5);
    close(fd);
    stop_all(cs, 3, ep, "sf");
    char last[16];
    ASSERT_EQ(1, check_activity(dir, last, sizeof(last)));
    free(dir);
    eh_stop(c);
}

/* The leader is SIGKILLed while it steps down (its job takes a second to stop):
 * the guard stops the job and releases the lease; the target leads, without
 * overlap, and the switchover succeeds. */
TEST_WITH_TIMEOUT(switchover_survives_the_leader_dying_midway, 90)
{
    eh_cluster *c = start1();
    const char *ep = eh_endpoints(c);
    char *dir = tl_tmpdir("swd");
    write_job(dir, "1");
    cand cs[4];
    start_line(cs, 4, dir, ep, "sd");
    pid_t sw = fork();
    ASSERT(sw >= 0);
    if (sw == 0) {
        char *o = NULL, *e = NULL;
        int rc = switchover(&o, &e, ep, "sd", "v3", "30s");
        fputs(e ? e : "", stderr);
        _exit(rc);
    }
    ASSERT(wait_contains(cs[0].err, "the target is next in line", 15));
    ASSERT_OK(kill(-cs[0].pid, SIGKILL)); /* elector and its group; the guard lives */
    tl_reap(cs[0].pid, SIGKILL, 5);
    cs[0].pid = 0;
    int st;
    ASSERT_EQ(sw, waitpid(sw, &st, 0));
    ASSERT(WIFEXITED(st));
    ASSERT_EQ(0, WEXITSTATUS(st));
    no_request(ep, "sd");
    ASSERT(wait_contains(path_in(dir, "activity"), "start v3", 10));
    char last[16];
    ASSERT_EQ(2, check_activity(dir, last, sizeof(last)));
    ASSERT_STREQ("v3", last);
    char *o = order(ep, "sd");
    ASSERT(!strncmp(o, "v3 ", 3));
    free(o);
    stop_all(cs, 4, ep, "sd");
    ASSERT_EQ(2, check_activity(dir, last, sizeof(last)));
    ASSERT_STREQ("", last);
    free(dir);
    eh_stop(c);
}

/* A candidate ahead of the target cannot step back (SIGSTOP): the switchover
 * times out (exit 6) and withdraws its request; leadership stays. */
TEST_WITH_TIMEOUT(switchover_times_out_and_withdraws_the_request, 90)
{
    eh_cluster *c = start1();
    const char *ep = eh_endpoints(c);
    char *dir = tl_tmpdir("swt");
    write_job(dir, "0");
    cand cs[3];
    start_line(cs, 3, dir, ep, "st");
    ASSERT_OK(kill(cs[1].pid, SIGSTOP));
    char *out = NULL, *err = NULL;
    ASSERT_EQ(6, switchover(&out, &err, ep, "st", "v2", "2s"));
    ASSERT_CONTAINS(err, "does not lead after");
    free(out);
    free(err);
    no_request(ep, "st");
    ASSERT(wait_order(ep, "st", "v0 v1 v2", 1));
    kill(cs[1].pid, SIGCONT);
    char last[16];
    ASSERT_EQ(1, check_activity(dir, last, sizeof(last)));
    ASSERT_STREQ("v0", last);
    stop_all(cs, 3, ep, "st");
    ASSERT_EQ(1, check_activity(dir, last, sizeof(last)));
    free(dir);
    eh_stop(c);
}

/* Issue 26, case 6: the target's elector is stopped (SIGSTOP). The candidates
 * ahead step back and the leader hands over, so the target's key is first, but
 * its process never takes over: the switchover says so (exit 7, naming the
 * next in line), not "v2 leads" with exit 0. Without the stop, the target's
 * acknowledgement makes it exit 0. */
TEST_WITH_TIMEOUT(switchover_to_a_stopped_target_is_not_reported_done, 90)
{
    eh_cluster *c = start1();
    const char *ep = eh_endpoints(c);
    char *dir = tl_tmpdir("sws");
    write_job(dir, "0");
    cand cs[3];
    start_line(cs, 3, dir, ep, "ss");
    ASSERT_OK(kill(cs[2].pid, SIGSTOP));
    char *out = NULL, *err = NULL;
    double t0 = tl_now();
    int rc = switchover(&out, &err, ep, "ss", "v2", "20s");
    tl_log("switchover to a stopped target: exit %d after %.1f s", rc, tl_now() - t0);
    const char *m = strstr(err, "handed over;");
    tl_log("%s", m ? m : err);
    ASSERT_EQ(7, rc);
    ASSERT_CONTAINS(err, "handed over; v2 did not take over within");
    ASSERT_CONTAINS(err, "the next in line is v1");
    ASSERT(!strstr(out, "v2"));
    free(out);
    free(err);
    no_request(ep, "ss");
    kill(cs[2].pid, SIGCONT);
    ASSERT(wait_contains(path_in(dir, "activity"), "start v1", 10));
    char last[16];
    ASSERT_EQ(2, check_activity(dir, last, sizeof(last))); /* v0, then v1 */
    ASSERT_STREQ("v1", last);
    /* A live target confirms: exit 0. */
    ASSERT(wait_order(ep, "ss", "v1 v0 v2", 15));
    wait_ready(ep, "ss", 3);
    ASSERT_EQ(0, switchover(&out, &err, ep, "ss", "v2", "20s"));
    ASSERT_CONTAINS(err, "confirmed");
    ASSERT_CONTAINS(out, "v2");
    free(out);
    free(err);
    ASSERT(wait_contains(path_in(dir, "activity"), "start v2", 5));
    stop_all(cs, 3, ep, "ss");
    free(dir);
    eh_stop(c);
}

/* ---------------------------------------------------------------- switchover, auth */

/* An auth cluster with four users for election `name`, each with a role of its
 * own: "full" has readwrite on NAME/, on the prefix __elector/candidates/NAME/
 * and on the key __elector/switchover/NAME (what the docs say switchover
 * needs), "half" lacks the switchover key, "bare" has NAME/ only, "mute" has
 * NAME/ and may read the switchover key. order() and count() read as root. */
static const char SW_PW[] = "sw-pw-71";
static eh_cluster *start_auth(const char *name)
{
    eh_opts eo = {.members = 1, .auth = 1};
    eh_cluster *c = eh_start(&eo);
    ASSERT_NOT_NULL(c);
    snprintf(g_ctl_user, sizeof(g_ctl_user), "--user=root:%s", EH_ROOT_PASSWORD);
    char prefix[128], members[128], req[128], up[64];
    snprintf(prefix, sizeof(prefix), "%s/", name);
    snprintf(members, sizeof(members), "__elector/candidates/%s/", name);
    snprintf(req, sizeof(req), "__elector/switchover/%s", name);
    const char *users[] = {"full", "half", "bare", "mute"};
    for (int u = 0; u < 4; u++) {
        snprintf(up, sizeof(up), "%s:%s", users[u], SW_PW);
        ASSERT_EQ(0, eh_etcdctl(c, NULL, "role", "add", users[u], NULL));
        ASSERT_EQ(0, eh_etcdctl(c, NULL, "user", "add", up, NULL));
        ASSERT_EQ(0, eh_etcdctl(c, NULL, "user", "grant-role", users[u], users[u], NULL));
        ASSERT_EQ(0, eh_etcdctl(c, NULL, "role", "grant-permission", users[u],
                                "readwrite", "--prefix=true", prefix, NULL));
        if (u < 2)
            ASSERT_EQ(0, eh_etcdctl(c, NULL, "role", "grant-permission", users[u],
                                    "readwrite", "--prefix=true", members, NULL));
        if (u < 1)
            ASSERT_EQ(0, eh_etcdctl(c, NULL, "role", "grant-permission", users[u],
                                    "readwrite", req, NULL));
        if (u == 3)
            ASSERT_EQ(0, eh_etcdctl(c, NULL, "role", "grant-permission", users[u], "read",
                                    req, NULL));
    }
    return c;
}

static void start_as(cand *c, const char *dir, const char *ep, const char *name,
                     const char *val, const char *user)
{
    static char up[8][64];
    static int k;
    k = (k + 1) % 8;
    snprintf(up[k], sizeof(up[k]), "%s:%s", user, SW_PW);
    start_cand(c, dir, ep, name, val, (const char *[]){"--user", up[k], NULL});
}

static int switchover_as(char **out, char **err, const char *ep, const char *user,
                         const char *name, const char *to)
{
    char up[64];
    snprintf(up, sizeof(up), "%s:%s", user, SW_PW);
    double t0 = tl_now();
    int rc = tool(out, err,
                  (const char *[]){"--endpoints", ep, "--user", up, "switchover", name,
                                   "--to", to, "--timeout", "20s", NULL});
    const char *why = err && *err ? strstr(*err, "error elector") : NULL;
    tl_log("switchover by %s to %s: exit %d in %.0f ms%s%s", user, to, rc,
           (tl_now() - t0) * 1000, why ? ": " : "", why ? why : "");
    ASSERT_LT(tl_now() - t0, 10.0); /* an answer, never the timeout */
    return rc;
}

/* With the permissions the docs give (readwrite on NAME/, the prefix
 * __elector/candidates/NAME/ and the key __elector/switchover/NAME), a
 * switchover under etcd auth works as without. */
TEST_WITH_TIMEOUT(switchover_under_auth_with_the_documented_permissions, 90)
{
    eh_cluster *c = start_auth("sa");
    const char *ep = eh_endpoints(c);
    char *dir = tl_tmpdir("swa");
    write_job(dir, "0.3");
    cand cs[3];
    const char *vals[] = {"v0", "v1", "v2"}, *want[] = {"v0", "v0 v1", "v0 v1 v2"};
    for (int i = 0; i < 3; i++) {
        start_as(&cs[i], dir, ep, "sa", vals[i], "full");
        ASSERT(wait_order(ep, "sa", want[i], 15));
    }
    wait_ready(ep, "sa", 3);
    char *out = NULL, *err = NULL;
    ASSERT_EQ(0, switchover_as(&out, &err, ep, "full", "sa", "v2"));
    ASSERT_CONTAINS(out, "v2");
    free(out);
    free(err);
    no_request(ep, "sa");
    ASSERT(wait_contains(path_in(dir, "activity"), "start v2", 5));
    char last[16];
    ASSERT_EQ(2, check_activity(dir, last, sizeof(last)));
    ASSERT_STREQ("v2", last);
    for (int i = 0; i < 3; i++) /* no candidate complained */
        ASSERT(!strstr(slurp(cs[i].err), "permission denied"));
    stop_all(cs, 3, ep, "sa");
    ASSERT_EQ(2, check_activity(dir, last, sizeof(last)));
    ASSERT_STREQ("", last);
    free(dir);
    eh_stop(c);
}

/* Without the __elector/ permissions: candidates keep their election but say
 * once which grant is missing, and do not announce themselves as taking
 * requests; requesters fail at once (no wait for --timeout) with a message
 * naming the key or prefix and the grant. A candidate that may write its member
 * key but not read the request (half) would otherwise be waited on in vain.
 * The leader's command and the successor's never overlap; no request is left. */
TEST_WITH_TIMEOUT(switchover_under_auth_without_the_elector_prefix_fails_clearly, 90)
{
    eh_cluster *c = start_auth("sa");
    const char *ep = eh_endpoints(c);
    char *dir = tl_tmpdir("swp");
    write_job(dir, "0.3");
    cand cs[5];
    const char *vals[] = {"v0", "v1", "v2", "v3", "v4"};
    const char *users[] = {"full", "half", "bare", "full", "mute"};
    const char *want[] = {"v0", "v0 v1", "v0 v1 v2", "v0 v1 v2 v3", "v0 v1 v2 v3 v4"};
    for (int i = 0; i < 5; i++) {
        start_as(&cs[i], dir, ep, "sa", vals[i], users[i]);
        ASSERT(wait_order(ep, "sa", want[i], 15));
    }
    /* Neither may read the request: neither writes its member key. */
    ASSERT(wait_contains(cs[1].err, "cannot read __elector/switchover/sa", 10));
    ASSERT(wait_contains(cs[2].err, "cannot read __elector/switchover/sa", 10));
    /* mute may read it, but not write its member key. */
    ASSERT(wait_contains(cs[4].err, "cannot write __elector/candidates/sa/", 10));
    for (int i = 1; i < 5; i++) {
        if (i == 3) continue;
        const char *e = slurp(cs[i].err);
        tl_log("%s: %s", vals[i],
               strstr(e, "warn elector") ? strstr(e, "warn elector") : e);
        ASSERT_CONTAINS(
            e, "etcdctl role grant-permission ROLE readwrite __elector/switchover/sa");
        ASSERT_CONTAINS(e, "leadership is not affected");
    }
    /* Only the two full candidates take requests. */
    double end = tl_now() + 10;
    while (count(ep, "__elector/candidates/sa/") != 2 && tl_now() < end)
        tl_msleep(50);
    ASSERT_EQ(2, count(ep, "__elector/candidates/sa/"));

    char *out = NULL, *err = NULL;
    /* bare may not read the candidates. */
    ASSERT_EQ(1, switchover_as(&out, &err, ep, "bare", "sa", "v3"));
    ASSERT_CONTAINS(err, "cannot read the candidates (__elector/candidates/sa/)");
    ASSERT_CONTAINS(err, "permission denied");
    ASSERT_CONTAINS(
        err, "grant-permission ROLE readwrite --prefix=true __elector/candidates/sa/");
    free(out);
    free(err);
    /* half may read them, not write the request. */
    ASSERT_EQ(1, switchover_as(&out, &err, ep, "half", "sa", "v1"));
    ASSERT_CONTAINS(err, "cannot write the request __elector/switchover/sa");
    ASSERT_CONTAINS(err, "grant-permission ROLE readwrite __elector/switchover/sa");
    free(out);
    free(err);
    no_request(ep, "sa");
    /* full may, but half's v1 ahead of v2 cannot be asked: refused at once. */
    ASSERT_EQ(5, switchover_as(&out, &err, ep, "full", "sa", "v2"));
    char *keys = NULL;
    ASSERT_EQ(0, ctl(&keys, ep,
                     (const char *[]){"get", "--prefix", "sa/", "--sort-by=CREATE",
                                      "--order=ASCEND", "--keys-only", NULL}));
    char k1[64];
    ASSERT_EQ(1, sscanf(strchr(keys, '\n') + 2, "%63s", k1)); /* v1's key */
    free(keys);
    ASSERT_CONTAINS(err, k1);
    ASSERT_CONTAINS(err, "may not write __elector/candidates/sa/ or read "
                         "__elector/switchover/sa");
    free(out);
    free(err);
    no_request(ep, "sa");
    ASSERT(wait_order(ep, "sa", "v0 v1 v2 v3 v4", 1)); /* nothing moved */
    char last[16];
    ASSERT_EQ(1, check_activity(dir, last, sizeof(last)));
    ASSERT_STREQ("v0", last);
    /* Only those ahead of the target need the grants to hand over to v1 (half),
     * but v1 has no member key, so it cannot confirm it took over: exit 7. */
    ASSERT_EQ(7, switchover_as(&out, &err, ep, "full", "sa", "v1"));
    ASSERT_CONTAINS(err, "its taking over cannot be confirmed");
    free(out);
    free(err);
    no_request(ep, "sa");
    ASSERT(wait_contains(path_in(dir, "activity"), "start v1", 5));
    ASSERT_EQ(2, check_activity(dir, last, sizeof(last)));
    ASSERT_STREQ("v1", last);
    stop_all(cs, 5, ep, "sa");
    ASSERT_EQ(2, check_activity(dir, last, sizeof(last)));
    ASSERT_STREQ("", last);
    free(dir);
    eh_stop(c);
}
