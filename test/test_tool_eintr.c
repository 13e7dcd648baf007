/* SPDX-License-Identifier: MIT */
/* Signals the program did not ask for: a host whose signal handlers are
 * installed without SA_RESTART (a profiler's timer, a runtime's own) makes
 * blocking calls fail with EINTR, and poll() and epoll_wait() fail so even with
 * it. With test/eintr.c preloaded, every other call of elector, its guard and
 * its release helper that could block fails with EINTR: a candidate SIGKILLed
 * is still revoked by its helper at once, the successor's command runs, a
 * candidate stopped with SIGTERM still stops its helper and withdraws, and
 * every exit status is the one without the injection. Not under the sanitizers
 * (their runtime must be the first library loaded). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "elect_util.h"
#include "testlib.h"
#include "tool_util.h"

/* The keys under NAME/ (etcdctl get --prefix --keys-only). */
static int count_keys(const char *eps, const char *name)
{
    char prefix[128];
    snprintf(prefix, sizeof(prefix), "%s/", name);
    char *out = NULL;
    int rc = tl_run(&out, (const char *[]){"etcdctl", "--endpoints", eps, "get",
                                           "--prefix", prefix, "--keys-only", NULL});
    ASSERT_EQ(0, rc);
    int n = 0;
    for (char *line = out; line && *line;) {
        char *nl = strchr(line, '\n');
        if (!strncmp(line, prefix, strlen(prefix))) n++;
        line = nl ? nl + 1 : NULL;
    }
    free(out);
    return n;
}

static void wait_keys(const char *eps, const char *name, int want)
{
    for (int i = 0; i < 200 && count_keys(eps, name) != want; i++)
        tl_msleep(50);
    ASSERT_EQ(want, count_keys(eps, name));
}

/* How many calls the process PID had failed, from the library's log; -1 if it
 * wrote no line (it did not exit normally). */
static long injected(const char *log, pid_t pid)
{
    FILE *f = fopen(log, "r");
    if (!f) return -1;
    int p;
    long n, found = -1;
    while (fscanf(f, "%d %ld", &p, &n) == 2)
        if (p == (int)pid) found = n;
    fclose(f);
    return found;
}

static long injected_total(const char *log, int *lines)
{
    FILE *f = fopen(log, "r");
    long total = 0, n;
    int p;
    *lines = 0;
    if (!f) return 0;
    while (fscanf(f, "%d %ld", &p, &n) == 2) {
        total += n;
        ++*lines;
    }
    fclose(f);
    return total;
}

TEST_WITH_TIMEOUT(every_blocking_call_interrupted_once_changes_no_outcome, 90)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    tl_skip("built with a sanitizer: its runtime must come before a preloaded library");
#endif
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    char *dir = tl_tmpdir("eintr");
    char log[512], helper[512], pre[600], logv[600], helperv[600], err[3][512];
    snprintf(log, sizeof(log), "%s/eintr.log", dir);
    snprintf(helper, sizeof(helper), "%s/helper.sh", dir);
    /* The helper gets no environment of ours (release.c): a wrapper preloads. */
    FILE *f = fopen(helper, "w");
    ASSERT_NOT_NULL(f);
    fprintf(f,
            "#!/bin/sh\nLD_PRELOAD='%s' ELECTOR_TEST_EINTR_LOG='%s' exec '%s' \"$@\"\n",
            EINTR_LIB, log, RELEASE_HELPER_BIN);
    fclose(f);
    ASSERT_EQ(0, chmod(helper, 0700));
    snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", EINTR_LIB);
    snprintf(logv, sizeof(logv), "ELECTOR_TEST_EINTR_LOG=%s", log);
    snprintf(helperv, sizeof(helperv), "ELECTOR_RELEASE_HELPER=%s", helper);
    const char *set[] = {pre, logv, helperv, NULL};
    for (int i = 0; i < 3; i++)
        snprintf(err[i], sizeof(err[i]), "%s/%c.err", dir, 'a' + i);
    char line[256];

    /* A leads (TTL 30 s: only its helper can hand over quickly), B runs a
     * command behind it, C campaigns behind B. */
    eu_child a, b, cc;
    tool_bg_ex(
        &a, &(tool_bg_opts){.err_path = err[0], .set = set, .in_fd = -1},
        (const char *[]){"--endpoints", eps, "--ttl", "30", "campaign", "ei", "a", NULL});
    ASSERT_OK(eu_child_expect(&a, "a", line, sizeof(line), 10000));
    tool_bg_ex(&b, &(tool_bg_opts){.err_path = err[1], .set = set, .in_fd = -1},
               (const char *[]){"--endpoints", eps, "--ttl", "30", "run", "ei", "--",
                                "/usr/bin/env", "-u", "LD_PRELOAD", "sh", "-c",
                                "echo led; exec sleep 60", NULL});
    wait_keys(eps, "ei", 2);
    tool_bg_ex(
        &cc, &(tool_bg_opts){.err_path = err[2], .set = set, .in_fd = -1},
        (const char *[]){"--endpoints", eps, "--ttl", "30", "campaign", "ei", "c", NULL});
    wait_keys(eps, "ei", 3);

    pid_t bpid = b.pid, cpid = cc.pid; /* tool_wait forgets them */
    /* A dies: its helper, every other call failing, revokes its lease at once. */
    double t0 = tl_now();
    ASSERT_OK(kill(a.pid, SIGKILL));
    ASSERT_OK(eu_child_expect(&b, "led", line, sizeof(line), 10000));
    tl_log("B's command ran %.0f ms after A's SIGKILL (TTL 30 s)",
           (tl_now() - t0) * 1000);
    ASSERT_LT(tl_now() - t0, 10.0);
    tool_wait(&a, 5);

    /* C, waiting, stopped: it withdraws, stops its helper, exits 0. */
    ASSERT_OK(kill(cc.pid, SIGTERM));
    ASSERT_EQ(0, tool_wait(&cc, 10));
    wait_keys(eps, "ei", 1);
    /* B, leading, stopped: the command ends by the relayed SIGTERM, B exits 0
     * (as without the injection: test_tool_newcomer), the key goes. */
    ASSERT_OK(kill(b.pid, SIGTERM));
    ASSERT_EQ(0, tool_wait(&b, 10));
    wait_keys(eps, "ei", 0);

    /* The injection happened, in B, C and the helpers (A was killed). */
    long nb = injected(log, bpid), nc = injected(log, cpid);
    int lines;
    long total = injected_total(log, &lines);
    tl_log("calls failed with EINTR: B %ld, C %ld; %d processes %ld in all", nb, nc,
           lines, total);
    ASSERT_GT(nb, 0);
    ASSERT_GT(nc, 0);
    ASSERT_GE(lines, 4); /* B, C, A's helper, C's helper */
    for (int i = 0; i < 3; i++) {
        char *e = check_file(err[i]);
        ASSERT_NOT_NULL(e);
        ASSERT(!strstr(e, "Interrupted system call"));
        free(e);
    }
    tl_rmtree(dir);
    free(dir);
    eh_stop(c);
}
