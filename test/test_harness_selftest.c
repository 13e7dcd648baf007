/* SPDX-License-Identifier: MIT */
/* Self-test of the test framework and the real-etcd harness. It talks to
 * etcd only through etcdctl (via the harness), never the elector library. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "etcd_harness.h"
#include "testlib.h"

/* Value of key, or NULL if etcdctl failed; caller frees. */
static char *get_value(eh_cluster *c, const eh_ctl_opts *o, const char *key)
{
    char *out = NULL;
    int rc = eh_etcdctl_opts(c, o, &out, "get", "--print-value-only", key, NULL);
    if (rc != 0) {
        free(out);
        return NULL;
    }
    return out;
}

static void assert_value(eh_cluster *c, const eh_ctl_opts *o, const char *key,
                         const char *want)
{
    char *v = get_value(c, o, key);
    ASSERT_STREQ(want, v);
    free(v);
}

/* 1 once pid is gone or a zombie (a zombie's reaper is the runner here). */
static int process_dead(pid_t pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL) return 1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *rp = strrchr(buf, ')');
    return rp != NULL && (rp[2] == 'Z' || rp[2] == 'X');
}

static int wait_dead(pid_t pid, double timeout_s)
{
    double deadline = tl_now() + timeout_s;
    while (!process_dead(pid)) {
        if (tl_now() >= deadline) return 0;
        tl_msleep(10);
    }
    return 1;
}

TEST(testlib_run_captures_stdout_and_exit_status)
{
    const char *const argv[] = {"sh", "-c", "echo out; echo err >&2; exit 3", NULL};
    char *out = NULL, *err = NULL;
    tl_run_opts o = {.err = &err};
    ASSERT_EQ(3, tl_run_ex(&out, argv, &o));
    ASSERT_STREQ("out\n", out);
    ASSERT_STREQ("err\n", err);
    free(out);
    free(err);
}

TEST(testlib_run_kills_a_command_past_its_timeout)
{
    const char *const argv[] = {"sleep", "10", NULL};
    tl_run_opts o = {.timeout_s = 0.2};
    double t0 = tl_now();
    ASSERT_EQ(-1, tl_run_ex(NULL, argv, &o));
    ASSERT_LT(tl_now() - t0, 2.0);
}

TEST(single_member_put_get_round_trip)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1});
    ASSERT_NOT_NULL(c);
    ASSERT_OK(eh_etcdctl(c, NULL, "put", "/k", "hello", NULL));
    assert_value(c, NULL, "/k", "hello\n");
    ASSERT_EQ(0, eh_leader(c));
    eh_stop(c);
}

TEST(three_members_elect_a_new_leader_after_the_leader_is_killed)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 3});
    ASSERT_NOT_NULL(c);
    int old = eh_wait_leader(c, 10);
    ASSERT_GE(old, 0);
    ASSERT_OK(eh_etcdctl(c, NULL, "put", "/before", "1", NULL));

    double t0 = tl_now();
    ASSERT_OK(eh_member_kill(c, old));
    ASSERT_EQ(0, eh_pid(c, old));
    int next = eh_wait_leader(c, 10);
    tl_log("new leader m%d after %.2fs", next, tl_now() - t0);
    ASSERT_GE(next, 0);
    ASSERT_NE(old, next);
    ASSERT_OK(eh_etcdctl(c, NULL, "put", "/after", "2", NULL));

    t0 = tl_now();
    ASSERT_OK(eh_member_restart(c, old));
    ASSERT_OK(eh_wait_healthy(c, old, 20));
    tl_log("m%d healthy again after %.2fs", old, tl_now() - t0);
    /* The restarted member caught up with what it missed. */
    eh_ctl_opts only_old = {.endpoints = eh_endpoint(c, old)};
    assert_value(c, &only_old, "/after", "2\n");
    eh_stop(c);
}

TEST(three_members_stay_writable_while_one_is_stopped_gracefully)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 3});
    ASSERT_NOT_NULL(c);
    int leader = eh_wait_leader(c, 10);
    ASSERT_GE(leader, 0);
    double t0 = tl_now();
    ASSERT_OK(eh_member_stop(c, leader)); /* SIGTERM: hands leadership over */
    tl_log("graceful stop of leader m%d took %.2fs", leader, tl_now() - t0);
    ASSERT_EQ(0, eh_member_running(c, leader));
    ASSERT_EQ(-1, eh_member_kill(c, leader)); /* not running any more */
    ASSERT_GE(eh_wait_leader(c, 10), 0);
    ASSERT_OK(eh_etcdctl(c, NULL, "put", "/k", "v", NULL));
    ASSERT_OK(eh_member_restart(c, leader));
    ASSERT_OK(eh_wait_healthy(c, -1, 20));
    eh_stop(c);
}

TEST(paused_member_stops_answering_until_resumed)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1});
    ASSERT_NOT_NULL(c);
    ASSERT_OK(eh_etcdctl(c, NULL, "put", "/k", "v", NULL));
    ASSERT_OK(eh_member_pause(c, 0));
    ASSERT_NE(0, eh_pid(c, 0)); /* paused is still running */
    char *err = NULL;
    eh_ctl_opts quick = {.err = &err};
    ASSERT_NE(0, eh_etcdctl_opts(c, &quick, NULL, "get", "/k", "--dial-timeout=1s",
                                 "--command-timeout=1s", NULL));
    free(err);
    ASSERT_OK(eh_member_resume(c, 0));
    ASSERT_OK(eh_wait_healthy(c, 0, 10));
    assert_value(c, NULL, "/k", "v\n");
    eh_stop(c);
}

TEST(tls_cluster_accepts_its_ca_and_rejects_a_wrong_one)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1, .tls = 1});
    ASSERT_NOT_NULL(c);
    ASSERT(strncmp(eh_endpoints(c), "https://127.0.0.1:", 18) == 0);
    ASSERT_NOT_NULL(eh_cacert(c));
    ASSERT_NOT_NULL(eh_cert(c));
    ASSERT_NOT_NULL(eh_key(c));
    ASSERT_OK(eh_etcdctl(c, NULL, "put", "/tls", "yes", NULL));
    assert_value(c, NULL, "/tls", "yes\n");

    char *err = NULL;
    eh_ctl_opts wrong = {.cacert = eh_wrong_cacert(c), .err = &err};
    ASSERT_NE(0, eh_etcdctl_opts(c, &wrong, NULL, "get", "/tls", "--dial-timeout=500ms",
                                 "--command-timeout=1s", NULL));
    free(err);
    /* --client-cert-auth: the right CA without a client cert is refused too. */
    eh_ctl_opts no_cert = {.no_client_cert = 1, .err = &err};
    ASSERT_NE(0, eh_etcdctl_opts(c, &no_cert, NULL, "get", "/tls", "--dial-timeout=500ms",
                                 "--command-timeout=1s", NULL));
    free(err);
    eh_stop(c);
}

TEST(auth_cluster_limits_the_user_to_its_prefix)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1, .auth = 1});
    ASSERT_NOT_NULL(c);
    ASSERT_OK(eh_etcdctl(c, NULL, "put", "/other", "root-was-here", NULL));

    char user[128], *err = NULL;
    snprintf(user, sizeof user, "%s:%s", EH_USER, EH_USER_PASSWORD);
    char *key = malloc(strlen(EH_USER_PREFIX) + 2);
    ASSERT_NOT_NULL(key);
    strcpy(key, EH_USER_PREFIX);
    strcat(key, "x");
    eh_ctl_opts alice = {.user = user, .err = &err};
    ASSERT_OK(eh_etcdctl_opts(c, &alice, NULL, "put", key, "mine", NULL));
    free(err);
    assert_value(c, &(eh_ctl_opts){.user = user}, key, "mine\n");
    ASSERT_NE(0, eh_etcdctl_opts(c, &alice, NULL, "put", "/other", "x", NULL));
    ASSERT_CONTAINS(err, "permission denied");
    free(err);

    snprintf(user, sizeof user, "%s:wrong-password", EH_USER);
    ASSERT_NE(0, eh_etcdctl_opts(c, &alice, NULL, "get", key, NULL));
    ASSERT_CONTAINS(err, "authentication failed");
    free(err);
    free(key);
    eh_stop(c);
}

/* A test that dies through exit(1) (failed ASSERT) must not leave etcd
 * behind: the harness's atexit handler kills and reaps the members. */
TEST(members_are_reaped_when_a_test_exits_without_eh_stop)
{
    int p[2];
    ASSERT_OK(pipe(p));
    fflush(NULL);
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        close(p[0]);
        eh_cluster *c = eh_start(&(eh_opts){.members = 1});
        pid_t member = c != NULL ? eh_pid(c, 0) : -1;
        ssize_t w = write(p[1], &member, sizeof member);
        (void)w;
        exit(1); /* no eh_stop */
    }
    close(p[1]);
    pid_t member = -1;
    ASSERT_EQ((ssize_t)sizeof member, read(p[0], &member, sizeof member));
    close(p[0]);
    ASSERT_GT(member, 0);
    int st;
    ASSERT_EQ(child, waitpid(child, &st, 0));
    /* Reaped by its parent before that exited: gone, not even a zombie. */
    ASSERT_EQ(-1, kill(member, 0));
    ASSERT_EQ(ESRCH, errno);
}

/* If the test process is SIGKILLed, PR_SET_PDEATHSIG takes its members down. */
TEST(members_die_with_the_process_that_started_them)
{
    int p[2];
    ASSERT_OK(pipe(p));
    fflush(NULL);
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        close(p[0]);
        eh_cluster *c = eh_start(&(eh_opts){.members = 1});
        pid_t member = c != NULL ? eh_pid(c, 0) : -1;
        ssize_t w = write(p[1], &member, sizeof member);
        (void)w;
        raise(SIGKILL);
    }
    close(p[1]);
    pid_t member = -1;
    ASSERT_EQ((ssize_t)sizeof member, read(p[0], &member, sizeof member));
    close(p[0]);
    ASSERT_GT(member, 0);
    int st;
    ASSERT_EQ(child, waitpid(child, &st, 0));
    ASSERT(wait_dead(member, 5));
}
