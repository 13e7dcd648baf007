/* SPDX-License-Identifier: MIT */
/* What a newcomer trips over (issue 25), as real processes against real etcd:
 * the exit status of a stop under a service manager, an interrupted wait,
 * --timeout and --no-wait, etcd unreachable at start (retries, --fail-fast),
 * a command checked before campaigning, TLS without OpenSSL 3. */
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

/* The keys under NAME/ (etcdctl get --prefix --keys-only), one per line. */
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

/* elector in the background, stderr to dir/NAME.err; returns that path. */
static const char *bg(eu_child *ch, const char *dir, const char *nm,
                      const char *const args[])
{
    static char paths[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(paths[k], sizeof(paths[k]), "%s/%s.err", dir, nm);
    tool_bg_opts o = {.err_path = paths[k], .in_fd = -1};
    tool_bg_ex(ch, &o, args);
    return paths[k];
}

/* Item 1: `systemctl stop` (SIGTERM) of a leading `run` is a success: the
 * command ended by the relayed SIGTERM (status 143) and elector exits 0, as the
 * man page says; a command that exits with a status of its own keeps it. No
 * systemd runs here: the example unit is checked by systemd-analyze in
 * test_tool_ops; this checks the status that systemd would see. */
TEST_WITH_TIMEOUT(run_stopped_by_sigterm_exits_0, 90)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    char *dir = tl_tmpdir("stop");
    eu_child a;
    const char *err =
        bg(&a, dir, "a",
           (const char *[]){"--endpoints", eps, "run", "svc", "--", "sleep", "60", NULL});
    ASSERT(wait_contains(err, "started sleep", 15));
    ASSERT_OK(kill(a.pid, SIGTERM));
    ASSERT_EQ(0, tool_wait(&a, 20));
    ASSERT(wait_contains(err, "stopped by Terminated as asked (status 143)", 1));
    /* SIGINT (^C) the same. */
    err =
        bg(&a, dir, "b",
           (const char *[]){"--endpoints", eps, "run", "svc", "--", "sleep", "60", NULL});
    ASSERT(wait_contains(err, "started sleep", 15));
    ASSERT_OK(kill(a.pid, SIGINT));
    ASSERT_EQ(0, tool_wait(&a, 20));
    /* A command that handles SIGTERM and exits 3: its own status. */
    err = bg(&a, dir, "c",
             (const char *[]){"--endpoints", eps, "run", "svc", "--", "sh", "-c",
                              "trap 'exit 9' TERM; while :; do sleep 0.1; done", NULL});
    ASSERT(wait_contains(err, "started sh", 15));
    tl_msleep(300); /* the trap is set */
    ASSERT_OK(kill(a.pid, SIGTERM));
    ASSERT_EQ(9, tool_wait(&a, 20));
    free(dir);
    eh_stop(c);
}

/* Item 2: interrupted while waiting for a lock held by another: nothing was
 * acquired or run, exit 1 (etcdctl lock's status) with a line that says so. A
 * standby of run stopped the same way exits 0 (a normal stop of a service). */
TEST_WITH_TIMEOUT(interrupted_while_waiting, 90)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    char *dir = tl_tmpdir("intr");
    eu_child h, w;
    char line[256];
    tool_bg(&h, (const char *[]){"--endpoints", eps, "lock", "L2", NULL});
    ASSERT_OK(eu_child_expect(&h, "L2/", line, sizeof(line), 15000));
    const char *err =
        bg(&w, dir, "w",
           (const char *[]){"--endpoints", eps, "lock", "L2", "--", "echo", "ran", NULL});
    ASSERT(wait_contains(err, "waiting behind L2/", 15));
    ASSERT_OK(kill(w.pid, SIGTERM));
    ASSERT_EQ(1, tool_wait(&w, 20));
    ASSERT(
        wait_contains(err, "interrupted while waiting for the lock L2: not acquired", 1));
    ASSERT_NE(0, eu_child_expect(&w, "ran", line, sizeof(line), 100));
    /* lock without a command: the same. */
    err = bg(&w, dir, "w2", (const char *[]){"--endpoints", eps, "lock", "L2", NULL});
    ASSERT(wait_contains(err, "waiting behind L2/", 15));
    ASSERT_OK(kill(w.pid, SIGINT));
    ASSERT_EQ(1, tool_wait(&w, 20));
    ASSERT_EQ(1, count_keys(eps, "L2")); /* only the holder's */
    /* run: a standby stopped exits 0. */
    eu_child r1, r2;
    const char *e1 =
        bg(&r1, dir, "r1",
           (const char *[]){"--endpoints", eps, "run", "R", "--", "sleep", "60", NULL});
    ASSERT(wait_contains(e1, "started sleep", 15));
    const char *e2 =
        bg(&r2, dir, "r2",
           (const char *[]){"--endpoints", eps, "run", "R", "--", "sleep", "60", NULL});
    ASSERT(wait_contains(e2, "waiting behind R/", 15));
    ASSERT_OK(kill(r2.pid, SIGTERM));
    ASSERT_EQ(0, tool_wait(&r2, 20));
    ASSERT(wait_contains(e2, "never elected for R", 1));
    ASSERT_OK(kill(r1.pid, SIGTERM));
    ASSERT_EQ(0, tool_wait(&r1, 20));
    ASSERT_OK(kill(h.pid, SIGTERM));
    ASSERT_EQ(0, tool_wait(&h, 20));
    free(dir);
    eh_stop(c);
}

/* Item 3: --timeout and --no-wait give up with exit 6 and leave no key; with
 * the lock free, --no-wait takes it. */
TEST_WITH_TIMEOUT(timeout_and_no_wait, 90)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    eu_child h;
    char line[256];
    tool_bg(&h, (const char *[]){"--endpoints", eps, "lock", "nightly", NULL});
    ASSERT_OK(eu_child_expect(&h, "nightly/", line, sizeof(line), 15000));
    char *out = NULL, *err = NULL;
    double t0 = tl_now();
    ASSERT_EQ(6, tool(&out, &err,
                      (const char *[]){"--endpoints", eps, "lock", "nightly", "--timeout",
                                       "1s", "--", "echo", "ran", NULL}));
    tl_log("--timeout 1s: gave up after %.2f s", tl_now() - t0);
    ASSERT_STREQ("", out);
    ASSERT_CONTAINS(err, "lock nightly not acquired: --timeout 1s passed");
    free(out);
    free(err);
    ASSERT_EQ(1, count_keys(eps, "nightly"));
    ASSERT_EQ(6, tool(&out, &err,
                      (const char *[]){"--endpoints", eps, "lock", "nightly", "--no-wait",
                                       "--", "echo", "ran", NULL}));
    ASSERT_STREQ("", out);
    ASSERT_CONTAINS(err, "--no-wait: another holds it");
    free(out);
    free(err);
    ASSERT_EQ(6, tool(&out, &err,
                      (const char *[]){"--endpoints", eps, "campaign", "nightly",
                                       "--timeout", "500ms", NULL}));
    ASSERT_CONTAINS(err, "not elected for nightly");
    free(out);
    free(err);
    ASSERT_EQ(1, count_keys(eps, "nightly"));
    ASSERT_OK(kill(h.pid, SIGTERM));
    ASSERT_EQ(0, tool_wait(&h, 20));
    ASSERT_EQ(0, count_keys(eps, "nightly"));
    ASSERT_EQ(0, tool(&out, &err,
                      (const char *[]){"--endpoints", eps, "lock", "nightly", "--no-wait",
                                       "--", "echo", "ran", NULL}));
    ASSERT_STREQ("ran\n", out);
    free(out);
    free(err);
    /* Usage: not for leader; not both. */
    ASSERT_EQ(
        2, tool(NULL, &err,
                (const char *[]){"--endpoints", eps, "leader", "x", "--no-wait", NULL}));
    free(err);
    ASSERT_EQ(2, tool(NULL, &err,
                      (const char *[]){"--endpoints", eps, "lock", "x", "--no-wait",
                                       "--timeout", "1s", NULL}));
    free(err);
    eh_stop(c);
}

/* Item 4: etcd unreachable at start: run retries with backoff and says so (a
 * log line, the metric); --fail-fast exits 1 at once; leader fails fast. */
TEST_WITH_TIMEOUT(unreachable_at_start_retries_unless_fail_fast, 90)
{
    char *dir = tl_tmpdir("unreach");
    eu_child r;
    const char *err = bg(&r, dir, "r",
                         (const char *[]){"--endpoints", "127.0.0.1:1", "--http",
                                          "127.0.0.1:0", "run", "x", "--", "true", NULL});
    ASSERT(wait_contains(err, "etcd unreachable; retrying in", 10));
    ASSERT(wait_contains(err, "(attempt 2; --fail-fast to exit instead)", 10));
    /* The metric counts them. */
    char *log = check_file(err);
    const char *at = log ? strstr(log, "on http://") : NULL;
    ASSERT_NOT_NULL(at);
    char url[128];
    snprintf(url, sizeof(url), "http://%.*s/metrics", (int)strcspn(at + 10, " \n"),
             at + 10);
    free(log);
    char *m = NULL;
    ASSERT_EQ(0, tl_run(&m, (const char *[]){"curl", "-s", url, NULL}));
    const char *v = m ? strstr(m, "\nelector_start_retries_total ") : NULL;
    ASSERT_NOT_NULL(v);
    ASSERT_GE(atoi(v + strlen("\nelector_start_retries_total ")), 2);
    free(m);
    ASSERT_OK(kill(r.pid, SIGTERM));
    ASSERT_EQ(0, tool_wait(&r, 20)); /* a standby stopped: never elected */
    char *out = NULL, *e = NULL;
    ASSERT_EQ(1, tool(&out, &e,
                      (const char *[]){"--endpoints", "127.0.0.1:1", "--fail-fast", "run",
                                       "x", "--", "true", NULL}));
    ASSERT_CONTAINS(e, "cannot start a session");
    free(out);
    free(e);
    ASSERT_EQ(1,
              tool(&out, &e,
                   (const char *[]){"--endpoints", "127.0.0.1:1", "leader", "x", NULL}));
    free(out);
    free(e);
    ASSERT_EQ(2, tool(&out, &e,
                      (const char *[]){"--endpoints", "127.0.0.1:1", "--fail-fast",
                                       "leader", "x", NULL}));
    free(out);
    free(e);
    /* etcd comes up later: the retrying elector is elected. */
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    ASSERT_OK(eh_member_stop(c, 0));
    err = bg(&r, dir, "late",
             (const char *[]){"--endpoints", eps, "--dial-timeout", "1s", "run", "late",
                              "--", "sleep", "60", NULL});
    ASSERT(wait_contains(err, "etcd unreachable; retrying in", 15));
    ASSERT_OK(eh_member_restart(c, 0));
    ASSERT(wait_contains(err, "started sleep", 60));
    ASSERT(wait_contains(err, "etcd reached after", 1));
    ASSERT_OK(kill(r.pid, SIGTERM));
    ASSERT_EQ(0, tool_wait(&r, 20));
    free(dir);
    eh_stop(c);
}

/* Item 6: a command that cannot be found or run is found before campaigning:
 * exit 127 (126), nobody was elected. */
TEST_WITH_TIMEOUT(run_checks_the_command_before_campaigning, 60)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    char *out = NULL, *err = NULL;
    ASSERT_EQ(127, tool(&out, &err,
                        (const char *[]){"--endpoints", eps, "run", "svc", "--",
                                         "/nonexistent/cmd", NULL}));
    ASSERT_CONTAINS(err, "cannot run /nonexistent/cmd: No such file or directory "
                         "(checked before campaigning)");
    ASSERT(!strstr(err, "elected"));
    free(out);
    free(err);
    ASSERT_EQ(127, tool(&out, &err,
                        (const char *[]){"--endpoints", eps, "lock", "svc", "--",
                                         "no-such-command-here", NULL}));
    ASSERT_CONTAINS(err, "command not found in $PATH");
    free(out);
    free(err);
    ASSERT_EQ(126, tool(&out, &err,
                        (const char *[]){"--endpoints", eps, "run", "svc", "--", "/tmp",
                                         NULL}));
    free(out);
    free(err);
    ASSERT_EQ(0, count_keys(eps, "svc"));
    eh_stop(c);
}

/* Item 7: usage errors are log lines like every other error (one format); the
 * TTL etcd raised is said; README's install says ldconfig and works without
 * sudo; deps.sh has a build-only mode. */
TEST(one_format_and_what_is_said)
{
    char *out = NULL, *err = NULL;
    ASSERT_EQ(2, tool(&out, &err, (const char *[]){"lock", NULL}));
    ASSERT_CONTAINS(err, " error elector: missing lock NAME");
    ASSERT(strchr(err, '\n') == err + strlen(err) - 1);
    ASSERT(err[0] >= '0' && err[0] <= '9'); /* the time first, as every line */
    free(out);
    free(err);
    ASSERT_EQ(2, tool(&out, &err,
                      (const char *[]){"--http", "nonsense:xx", "campaign", "x", NULL}));
    ASSERT(err[0] >= '0' && err[0] <= '9');
    free(out);
    free(err);
    char *readme = NULL;
    ASSERT_EQ(0, tl_run(&readme,
                        (const char *[]){"cat", ELECTOR_DOCS_DIR "/../README.md", NULL}));
    const char *inst = strstr(readme, "sudo cmake --install build");
    ASSERT_NOT_NULL(inst);
    ASSERT_NOT_NULL(strstr(inst, "ldconfig"));
    ASSERT_NOT_NULL(strstr(inst, "As root (a container without `sudo`)"));
    ASSERT_NOT_NULL(strstr(readme, "libelector.so.1.1.0"));
    free(readme);
    char *deps = NULL;
    ASSERT_EQ(0, tl_run(&deps, (const char *[]){
                                   "cat", ELECTOR_DOCS_DIR "/../scripts/deps.sh", NULL}));
    const char *b = strstr(deps, "BUILD=("), *t = strstr(deps, "TEST=(");
    ASSERT(b && t && t > b);
    char build[512];
    snprintf(build, sizeof(build), "%.*s", (int)(t - b), b);
    ASSERT(!strstr(build, "etcd") && !strstr(build, "valgrind") &&
           !strstr(build, "prometheus"));
    free(deps);
}

TEST_WITH_TIMEOUT(ttl_raised_by_etcd_is_said, 60)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    char *dir = tl_tmpdir("ttl");
    eu_child a;
    char line[256];
    const char *err =
        bg(&a, dir, "a",
           (const char *[]){"--endpoints", eps, "--ttl", "1s", "campaign", "t", NULL});
    ASSERT_OK(eu_child_expect(&a, "t/", line, sizeof(line), 15000));
    ASSERT(wait_contains(err, "--ttl 1s: etcd granted a TTL of 2s instead", 5));
    ASSERT_OK(kill(a.pid, SIGTERM));
    ASSERT_EQ(0, tool_wait(&a, 20));
    free(dir);
    eh_stop(c);
}

/* Item 7: renewals stop (etcd frozen): the line that says the command is being
 * stopped comes before the line that says it is gone. */
TEST_WITH_TIMEOUT(deadline_stop_is_said_before_the_command_is_gone, 90)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    char *dir = tl_tmpdir("dl");
    eu_child a;
    const char *err = bg(&a, dir, "a",
                         (const char *[]){"--endpoints", eps, "--ttl", "3s", "--grace",
                                          "1s", "run", "dl", "--", "sleep", "60", NULL});
    ASSERT(wait_contains(err, "started sleep", 15));
    ASSERT_OK(eh_member_pause(c, 0));
    int rc = tool_wait(&a, 30);
    ASSERT_OK(eh_member_resume(c, 0));
    ASSERT_EQ(3, rc);
    char *s = check_file(err);
    ASSERT_NOT_NULL(s);
    tl_log("%s", s);
    const char *stop =
        strstr(s, "guard: stopping sleep: no lease renewal reached elector");
    const char *gone = strstr(s, "sleep and its descendants are gone");
    ASSERT_NOT_NULL(stop);
    ASSERT_NOT_NULL(gone);
    ASSERT(stop < gone);
    free(s);
    free(dir);
    eh_stop(c);
}

/* Item 3: lock -n N: up to N holders at once, on keys of elector's own; the
 * N+1st waits (--no-wait, --timeout: exit 6, no key left) until one leaves. */
TEST_WITH_TIMEOUT(semaphore_holds_up_to_n, 90)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    eu_child h1, h2;
    char line[256];
    tool_bg(&h1, (const char *[]){"--endpoints", eps, "lock", "sem", "-n", "2", NULL});
    ASSERT_OK(
        eu_child_expect(&h1, "__elector/semaphore/sem/", line, sizeof(line), 15000));
    tool_bg(&h2,
            (const char *[]){"--endpoints", eps, "lock", "sem", "--limit", "2", NULL});
    ASSERT_OK(
        eu_child_expect(&h2, "__elector/semaphore/sem/", line, sizeof(line), 15000));
    /* Each holder keeps one slot: two keys. */
    ASSERT_EQ(2, count_keys(eps, "__elector/semaphore/sem/0") +
                     count_keys(eps, "__elector/semaphore/sem/1"));
    char *out = NULL, *err = NULL;
    ASSERT_EQ(6, tool(&out, &err,
                      (const char *[]){"--endpoints", eps, "lock", "sem", "-n", "2",
                                       "--no-wait", "--", "echo", "ran", NULL}));
    ASSERT_STREQ("", out);
    ASSERT_CONTAINS(err, "all 2 slots of sem are taken");
    free(out);
    free(err);
    ASSERT_EQ(6, tool(&out, &err,
                      (const char *[]){"--endpoints", eps, "lock", "sem", "-n", "2",
                                       "--timeout", "1s", "--", "echo", "ran", NULL}));
    ASSERT_STREQ("", out);
    free(out);
    free(err);
    ASSERT_EQ(2, count_keys(eps, "__elector/semaphore/sem/0") +
                     count_keys(eps, "__elector/semaphore/sem/1"));
    /* The plain lock of the same NAME is another thing: free. */
    ASSERT_EQ(0, tool(&out, &err,
                      (const char *[]){"--endpoints", eps, "lock", "sem", "--no-wait",
                                       "--", "echo", "plain", NULL}));
    ASSERT_STREQ("plain\n", out);
    free(out);
    free(err);
    /* A holder leaves: a third gets its slot. */
    ASSERT_OK(kill(h1.pid, SIGTERM));
    ASSERT_EQ(0, tool_wait(&h1, 20));
    ASSERT_EQ(0, tool(&out, &err,
                      (const char *[]){"--endpoints", eps, "lock", "sem", "-n", "2",
                                       "--timeout", "10s", "--", "sh", "-c",
                                       "echo \"$ETCD_LOCK_KEY\"", NULL}));
    ASSERT_CONTAINS(out, "__elector/semaphore/sem/");
    free(out);
    free(err);
    ASSERT_OK(kill(h2.pid, SIGTERM));
    ASSERT_EQ(0, tool_wait(&h2, 20));
    ASSERT_EQ(0, count_keys(eps, "__elector/semaphore/sem/0") +
                     count_keys(eps, "__elector/semaphore/sem/1"));
    ASSERT_EQ(2, tool(NULL, &err,
                      (const char *[]){"--endpoints", eps, "run", "x", "-n", "2", "--",
                                       "true", NULL}));
    free(err);
    eh_stop(c);
}

/* Item 7: observe (text) across quick switchovers prints each leader once: no
 * two consecutive key/value pairs are the same. */
TEST_WITH_TIMEOUT(observe_prints_a_leader_once_across_quick_switchovers, 120)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    eu_child cand[3], obs;
    const char *vals[] = {"A", "B", "C"};
    char line[512];
    char *dir = tl_tmpdir("sw");
    const char *errs[3];
    for (int i = 0; i < 3; i++) {
        errs[i] =
            bg(&cand[i], dir, vals[i],
               (const char *[]){"--endpoints", eps, "campaign", "sw", vals[i], NULL});
        if (i == 0)
            ASSERT_OK(eu_child_expect(&cand[0], "sw/", line, sizeof(line), 15000));
    }
    tl_msleep(500); /* B and C wait */
    tool_bg(&obs, (const char *[]){"--endpoints", eps, "observe", "sw", NULL});
    ASSERT_OK(eu_child_expect(&obs, "sw/", line, sizeof(line), 15000));
    const char *order[] = {"B", "C", "A", "B"};
    for (int k = 0; k < 4; k++) {
        char *out = NULL, *err = NULL;
        int rc = tool(&out, &err,
                      (const char *[]){"--endpoints", eps, "switchover", "sw", "--to",
                                       order[k], "--timeout", "20s", NULL});
        tl_log("switchover to %s: exit %d", order[k], rc);
        ASSERT_EQ(0, rc);
        free(out);
        free(err);
    }
    tl_msleep(1000);
    /* Lines after the first key: value, key, value, ... */
    char prev[1100], key[512], val[512];
    ASSERT_OK(eu_child_expect(&obs, "", val, sizeof(val), 2000));
    snprintf(prev, sizeof(prev), "%s=%s", line, val);
    int pairs = 1;
    while (eu_child_expect(&obs, "", key, sizeof(key), 1000) == 0) {
        ASSERT_OK(eu_child_expect(&obs, "", val, sizeof(val), 2000));
        char cur[1100];
        snprintf(cur, sizeof(cur), "%s=%s", key, val);
        tl_log("observed %s", cur);
        ASSERT(strcmp(cur, prev) != 0);
        snprintf(prev, sizeof(prev), "%s", cur);
        pairs++;
    }
    tl_log("%d leaders observed", pairs);
    ASSERT_GE(pairs, 2); /* A first, B last; the brief ones in between may be missed */
    kill(obs.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&obs, 10));
    for (int i = 0; i < 3; i++) {
        kill(cand[i].pid, SIGTERM);
        tool_wait(&cand[i], 10);
    }
    /* A switchover's step-down is planned: info, not warn (item 7). */
    int info = 0;
    for (int i = 0; i < 3; i++) {
        char *e = check_file(errs[i]);
        ASSERT_NOT_NULL(e);
        ASSERT(!strstr(e, "warn elector: switchover: stepping back") &&
               !strstr(e, "warn elector: switchover: the target is next in line"));
        info += strstr(e, "info elector: switchover: ") != NULL;
        free(e);
    }
    ASSERT_GE(info, 1);
    free(dir);
    eh_stop(c);
}

/* A machine asked for TLS without OpenSSL 3 (Debian's libssl3; the library
 * loads it only when TLS is configured): the error says what to install, and
 * one whose libssl.so.3 is something else names the function it lacks. Both
 * exit 1 at start, before any connection (the endpoint is a closed port). The
 * stand-ins come first through LD_LIBRARY_PATH. */
TEST(tls_without_openssl_3_says_what_to_install)
{
    char *dir = tl_tmpdir("nossl");
    char other[512], none[512], p[600], ca[600];
    snprintf(other, sizeof(other), "%s/other", dir);
    snprintf(none, sizeof(none), "%s/none", dir);
    ASSERT_EQ(0, mkdir(other, 0700));
    ASSERT_EQ(0, mkdir(none, 0700));
    snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
    FILE *f = fopen(ca, "w");
    ASSERT_NOT_NULL(f);
    fputs("not read: OpenSSL is missing\n", f);
    fclose(f);
    const char *names[] = {"libssl.so.3", "libssl.so"};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof(p), "%s/%s", other, names[i]);
        ASSERT_EQ(0, symlink(NOSSL_LIB, p));
        snprintf(p, sizeof(p), "%s/%s", none, names[i]); /* not a library at all */
        f = fopen(p, "w");
        ASSERT_NOT_NULL(f);
        fputs("no ELF here\n", f);
        fclose(f);
    }
    const char *args[] = {"leader", "--endpoints", "https://127.0.0.1:1", "--cacert", ca,
                          "x",      NULL};
    char env[600];
    char *err = NULL;
    snprintf(env, sizeof(env), "LD_LIBRARY_PATH=%s", none);
    ASSERT_EQ(1, tool_with_env(NULL, &err, (const char *[]){env, NULL}, args));
    tl_log("%s", err);
    ASSERT_NOT_NULL(strstr(err, "TLS needs OpenSSL 3 (Debian: libssl3)"));
    free(err);
    err = NULL;
    snprintf(env, sizeof(env), "LD_LIBRARY_PATH=%s", other);
    ASSERT_EQ(1, tool_with_env(NULL, &err, (const char *[]){env, NULL}, args));
    tl_log("%s", err);
    ASSERT_NOT_NULL(strstr(err, "OpenSSL lacks TLS_client_method"));
    free(err);
    tl_rmtree(dir);
    free(dir);
}
