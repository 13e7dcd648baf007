/* SPDX-License-Identifier: MIT */
/* What a script can rely on: observe failing loudly (an unreachable cluster,
 * refused credentials), the connection lost and back said on stderr, a closed
 * stdout ending observe; -w json events as docs/elector-events.schema.json
 * documents them (checked on every line), values as text and base64, stderr
 * lines with a time and a level (--log-format json), exit statuses (a taken
 * --http port: 1), --proclaim-stdin's latest line, --hex. Real etcd. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "elect_util.h"
#include "json_check.h"
#include "testlib.h"
#include "tool_util.h"

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The value of a JSON field in one line (parsed), as a string; NULL if absent. */
static char *field(const char *line, const char *name)
{
    char err[200];
    jv *v = json_parse(line, strlen(line), err, sizeof(err));
    ASSERT_NOT_NULL(v);
    const jv *f = json_get(v, name);
    char *r = NULL;
    if (f && f->t == J_STR)
        r = strdup(f->str);
    else if (f && f->t == J_NUM && asprintf(&r, "%.0f", f->num) < 0)
        r = NULL;
    json_free(v);
    return r;
}

static void assert_field(const char *line, const char *name, const char *want)
{
    char *v = field(line, name);
    if (!tl_streq(v, want)) tl_log("line: %s", line);
    ASSERT_STREQ(want, v);
    free(v);
}

/* ---------------------------------------------------------------- observe fails loudly
 */

TEST(observe_fails_within_the_dial_timeout_when_etcd_is_unreachable)
{
    char *out = NULL, *err = NULL;
    double t0 = tl_now();
    int rc = tool(&out, &err,
                  (const char *[]){"--endpoints", "127.0.0.1:1", "observe", "x",
                                   "--dial-timeout", "1s", "--fail-fast", NULL});
    double dt = tl_now() - t0;
    tl_log("refused: exit %d after %.2f s: %s", rc, dt, err);
    ASSERT_EQ(1, rc);
    ASSERT_LT(dt, 3.0);
    ASSERT_CONTAINS(err, "error elector: cannot observe: endpoint 127.0.0.1:1");
    ASSERT_CONTAINS(err, "check --endpoints");
    ASSERT_STREQ("", out);
    free(out);
    free(err);
    /* A member that accepts and never answers: the dial timeout (1 s) ends it. */
    int port;
    int ls = silent_listener(&port);
    char ep[64];
    snprintf(ep, sizeof(ep), "127.0.0.1:%d", port);
    t0 = tl_now();
    rc = tool(&out, &err,
              (const char *[]){"--endpoints", ep, "observe", "x", "--dial-timeout", "1s",
                               "--command-timeout", "1s", "--fail-fast", NULL});
    dt = tl_now() - t0;
    tl_log("silent: exit %d after %.2f s: %s", rc, dt, err);
    ASSERT_EQ(1, rc);
    ASSERT_LT(dt, 3.5);
    ASSERT_CONTAINS(err, "cannot observe");
    free(out);
    free(err);
    close(ls);
}

TEST(observe_fails_when_authentication_is_refused)
{
    eh_opts eo = {.members = 1, .auth = 1};
    eh_cluster *c = eh_start(&eo);
    ASSERT_NOT_NULL(c);
    char *out = NULL, *err = NULL;
    int rc = tool(&out, &err,
                  (const char *[]){"--endpoints", eh_endpoints(c), "observe", "x", NULL});
    tl_log("no credentials: exit %d: %s", rc, err);
    ASSERT_EQ(1, rc);
    ASSERT_CONTAINS(err,
                    "cannot observe: /etcdserverpb.KV/Range: etcdserver: user name is "
                    "empty");
    ASSERT_CONTAINS(err, "the cluster has authentication enabled: give --user");
    free(out);
    free(err);
    const char *env[] = {"ETCDCTL_USER=root:wrong", "PATH=/usr/bin:/bin", NULL};
    rc = tool_with_env(
        &out, &err, env,
        (const char *[]){"--endpoints", eh_endpoints(c), "observe", "x", NULL});
    tl_log("wrong password: exit %d: %s", rc, err);
    ASSERT_EQ(1, rc);
    ASSERT_CONTAINS(err, "authentication failed");
    ASSERT_CONTAINS(err, "(from $ETCDCTL_USER NAME:PASSWORD)");
    free(out);
    free(err);
    /* A user name and no password at all: the hint says where one goes. */
    const char *env0[] = {"PATH=/usr/bin:/bin", NULL};
    rc = tool_with_env(&out, &err, env0,
                       (const char *[]){"--endpoints", eh_endpoints(c), "--user", "root",
                                        "observe", "x", NULL});
    tl_log("no password: exit %d: %s", rc, err);
    ASSERT_EQ(1, rc);
    ASSERT_CONTAINS(err, "; no password was given: set $ELECTOR_PASSWORD (or "
                         "$ETCDCTL_PASSWORD) or use --password-file");
    free(out);
    free(err);
    /* A user whose role does not cover the election: the hint names the user and
     * the prefix it needs. */
    char user[256];
    snprintf(user, sizeof(user), "ETCDCTL_USER=%s:%s", EH_USER, EH_USER_PASSWORD);
    const char *env1[] = {user, "PATH=/usr/bin:/bin", NULL};
    rc = tool_with_env(
        &out, &err, env1,
        (const char *[]){"--endpoints", eh_endpoints(c), "observe", "elsewhere", NULL});
    tl_log("no permission: exit %d: %s", rc, err);
    ASSERT_EQ(1, rc);
    char want[512];
    snprintf(want, sizeof(want),
             "; the etcd user '%s' needs read/write permission on the prefix elsewhere/",
             EH_USER);
    ASSERT_CONTAINS(err, want);
    free(out);
    free(err);
    eh_stop(c);
}

/* Once observing, a lost connection is said (warn) and so is its return
 * (info); observing goes on and sees what happened meanwhile. */
TEST_WITH_TIMEOUT(observe_reports_the_connection_lost_and_back, 90)
{
    eh_cluster *c = start1();
    char *dir = tl_tmpdir("obsconn"), errp[600];
    snprintf(errp, sizeof(errp), "%s/err", dir);
    eu_child obs;
    tool_bg_opts bo = {.err_path = errp, .in_fd = -1};
    tool_bg_ex(&obs, &bo,
               (const char *[]){"--endpoints", eh_endpoints(c), "observe", "oc", NULL});
    tl_msleep(500);
    ASSERT_OK(eh_member_kill(c, 0));
    ASSERT(wait_contains(errp, "warn elector: connection to 127.0.0.1:", 10));
    ASSERT(wait_contains(errp, " lost", 1));
    ASSERT_OK(eh_member_restart(c, 0));
    ASSERT(wait_contains(errp, "info elector: connected to 127.0.0.1:", 20));
    ASSERT(wait_contains(errp, " again after ", 1));
    eu_cand *x = eu_cand_new(eh_endpoints(c), "oc", 5);
    ASSERT_OK(elector_campaign_sync(x->el, "back", 4, 10000));
    char line[256];
    ASSERT_OK(eu_child_expect(&obs, "back", line, sizeof(line), 10000));
    char *err = check_file(errp);
    tl_log("observe's stderr:\n%s", err);
    free(err);
    kill(obs.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&obs, 10));
    eu_cand_free(x);
    free(dir);
    eh_stop(c);
}

/* What the client does on its own is said: TLS files that changed but no
 * longer load (found at the next connection) are an error line, and the
 * previous ones stay in use (observing goes on). */
TEST_WITH_TIMEOUT(tls_files_that_no_longer_load_are_said_and_the_old_kept, 60)
{
    eh_opts eo = {.members = 1, .tls = 1};
    eh_cluster *c = eh_start(&eo);
    ASSERT_NOT_NULL(c);
    char *dir = tl_tmpdir("tlsnotice"), errp[600], ca[600], cmd[1400];
    snprintf(errp, sizeof(errp), "%s/err", dir);
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", eh_cacert(c), ca);
    ASSERT_EQ(0, tl_run(NULL, (const char *[]){"sh", "-c", cmd, NULL}));
    eu_child obs;
    tool_bg_opts bo = {.err_path = errp, .in_fd = -1};
    tool_bg_ex(&obs, &bo,
               (const char *[]){"--endpoints", eh_endpoints(c), "--cacert", ca, "--cert",
                                eh_cert(c), "--key", eh_key(c), "observe", "tn", NULL});
    ASSERT(wait_contains(errp, "info elector: no leader", 10));
    FILE *f = fopen(ca, "w");
    ASSERT_NOT_NULL(f);
    fprintf(f, "not a certificate\n");
    fclose(f);
    ASSERT_OK(eh_member_kill(c, 0));
    ASSERT(wait_contains(errp, " lost", 10));
    ASSERT_OK(eh_member_restart(c, 0));
    ASSERT(wait_contains(errp,
                         "error elector: the TLS files changed but do not load, the "
                         "previous ones stay in use: ",
                         20));
    ASSERT(wait_contains(errp, "info elector: connected to ", 20));
    kill(obs.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&obs, 10));
    free(dir);
    eh_stop(c);
}

/* `elector observe x | head -1` returns once head has its line: the closed pipe
 * ends observe quietly (exit 0), without waiting for another leader change. */
TEST(observe_ends_quietly_when_stdout_is_closed)
{
    eh_cluster *c = start1();
    eu_cand *x = eu_cand_new(eh_endpoints(c), "hd", 5);
    ASSERT_OK(elector_campaign_sync(x->el, "first", 5, 10000));
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "%s --endpoints %s observe hd | head -1; echo \"rc=${PIPESTATUS[0]}\"",
             ELECTOR_BIN, eh_endpoints(c));
    char *out = NULL, *err = NULL;
    tl_run_opts o = {.err = &err, .timeout_s = 20};
    double t0 = tl_now();
    int rc = tl_run_ex(&out, (const char *[]){"bash", "-c", cmd, NULL}, &o);
    double dt = tl_now() - t0;
    tl_log("observe | head -1: %.2f s: %s / %s", dt, out, err);
    ASSERT_EQ(0, rc);
    ASSERT_LT(dt, 5.0);
    ASSERT_CONTAINS(out, "hd/");
    ASSERT_CONTAINS(out, "rc=0");
    ASSERT(!strstr(err, "error"));
    free(out);
    free(err);
    eu_cand_free(x);
    eh_stop(c);
}

/* etcd down when observe starts: it says so and retries with backoff (without
 * --fail-fast), then observes once etcd is back, and says that too. */
TEST_WITH_TIMEOUT(observe_retries_until_etcd_is_reachable, 60)
{
    eh_cluster *c = start1();
    ASSERT_OK(eh_member_stop(c, 0));
    char *dir = tl_tmpdir("obsretry"), errp[600];
    snprintf(errp, sizeof(errp), "%s/err", dir);
    eu_child obs;
    tool_bg_opts bo = {.err_path = errp, .in_fd = -1};
    tool_bg_ex(&obs, &bo,
               (const char *[]){"--endpoints", eh_endpoints(c), "--dial-timeout", "1s",
                                "observe", "or", NULL});
    ASSERT(wait_contains(errp,
                         "warn elector: cannot observe (cannot connect to etcd): etcd "
                         "unreachable; retrying in ",
                         10));
    ASSERT(wait_contains(errp, "(attempt 1; --fail-fast to exit instead)", 1));
    ASSERT_OK(eh_member_restart(c, 0));
    ASSERT(wait_contains(errp, "info elector: etcd reached: observing or", 30));
    eu_cand *x = eu_cand_new(eh_endpoints(c), "or", 5);
    ASSERT_OK(elector_campaign_sync(x->el, "up", 2, 10000));
    char line[256];
    ASSERT_OK(eu_child_expect(&obs, "up", line, sizeof(line), 10000));
    kill(obs.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&obs, 10));
    eu_cand_free(x);
    free(dir);
    eh_stop(c);
}

/* A stdout that takes no more (a full disk: /dev/full) is an error, said, exit 1:
 * observe when it writes the leader, leader when it prints it. */
TEST(a_failed_write_to_stdout_is_an_error)
{
    eh_cluster *c = start1();
    eu_cand *x = eu_cand_new(eh_endpoints(c), "full", 5);
    ASSERT_OK(elector_campaign_sync(x->el, "v", 1, 10000));
    const char *cmds[] = {"observe", "leader"};
    for (int i = 0; i < 2; i++) {
        char cmd[1024];
        snprintf(cmd, sizeof(cmd), "exec %s --endpoints %s %s full >/dev/full",
                 ELECTOR_BIN, eh_endpoints(c), cmds[i]);
        char *out = NULL, *err = NULL;
        tl_run_opts o = {.err = &err, .timeout_s = 20};
        int rc = tl_run_ex(&out, (const char *[]){"sh", "-c", cmd, NULL}, &o);
        tl_log("%s >/dev/full: exit %d: %s", cmds[i], rc, err);
        ASSERT_EQ(1, rc);
        ASSERT_CONTAINS(err,
                        "error elector: cannot write to stdout: No space left on device");
        free(out);
        free(err);
    }
    eu_cand_free(x);
    eh_stop(c);
}

/* ---------------------------------------------------------------- the JSON contract */

TEST(json_events_keep_their_documented_contract)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    long before = json_checked_total();
    eu_child a, b, obs;
    char la[2048], lb[2048], lo[2048];
    /* Two values that the old output could not tell apart: the byte 0xff and
     * U+00FF ("ÿ", two bytes in UTF-8). */
    tool_bg(&obs,
            (const char *[]){"--endpoints", eps, "-w", "json", "observe", "j", NULL});
    ASSERT_OK(eu_child_expect(&obs, "{\"event\":\"no_leader\"", lo, sizeof(lo), 10000));
    tool_bg(&a, (const char *[]){"--endpoints", eps, "-w", "json", "campaign", "j",
                                 "\xff", NULL});
    ASSERT_OK(eu_child_expect(&a, "{\"event\":\"elected\"", la, sizeof(la), 10000));
    ASSERT(!strstr(la, "\"value\":"));
    assert_field(la, "value_base64", "/w==");
    char *akey = field(la, "key"), *alease = field(la, "lease"),
         *atoken = field(la, "token");
    char want[300];
    snprintf(want, sizeof(want), "j/%s", alease); /* the lease is the key's */
    ASSERT_STREQ(want, akey);
    /* unix_ms: the wall clock of the event. */
    char *ums = field(la, "unix_ms");
    ASSERT_LT(llabs(atoll(ums) - wall_ms()), 10000);
    free(ums);
    ASSERT_OK(eu_child_expect(&obs, "{\"event\":\"leader\"", lo, sizeof(lo), 5000));
    assert_field(lo, "key", akey);
    assert_field(lo, "value_base64", "/w==");
    assert_field(lo, "token", atoken);

    tool_bg(&b, (const char *[]){"--endpoints", eps, "-w", "json", "campaign", "j",
                                 "\xc3\xbf", NULL});
    ASSERT_OK(eu_child_expect(&b, "{\"event\":\"waiting\"", lb, sizeof(lb), 10000));
    /* waiting: key and lease are ours, predecessor the key ahead. */
    char *bkey = field(lb, "key"), *blease = field(lb, "lease");
    snprintf(want, sizeof(want), "j/%s", blease);
    ASSERT_STREQ(want, bkey);
    ASSERT(strcmp(bkey, akey) != 0);
    assert_field(lb, "predecessor", akey);
    assert_field(lb, "value", "\xc3\xbf");
    assert_field(lb, "value_base64", "w78=");

    /* leader -w json: the same fields. */
    char *out = NULL;
    ASSERT_EQ(
        0, tool(&out, NULL,
                (const char *[]){"leader", "j", "-w", "json", "--endpoints", eps, NULL}));
    assert_field(out, "event", "leader");
    assert_field(out, "key", akey);
    free(out);

    /* lost: our key deleted. */
    ASSERT_OK(eh_etcdctl(c, NULL, "del", akey, NULL));
    ASSERT_OK(eu_child_expect(&a, "{\"event\":\"lost\"", la, sizeof(la), 10000));
    assert_field(la, "key", akey);
    assert_field(la, "error", "ENOTLEADER");
    ASSERT_EQ(3, tool_wait(&a, 10));
    ASSERT_OK(eu_child_expect(&b, "{\"event\":\"elected\"", lb, sizeof(lb), 10000));
    assert_field(lb, "key", bkey);
    ASSERT_OK(eu_child_expect(&obs, "{\"event\":\"leader\"", lo, sizeof(lo), 5000));
    assert_field(lo, "value", "\xc3\xbf");
    kill(b.pid, SIGTERM);
    ASSERT_OK(eu_child_expect(&b, "{\"event\":\"resigned\"", lb, sizeof(lb), 5000));
    assert_field(lb, "key", bkey);
    ASSERT_EQ(0, tool_wait(&b, 10));
    ASSERT_OK(eu_child_expect(&obs, "{\"event\":\"no_leader\"", lo, sizeof(lo), 5000));
    kill(obs.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&obs, 10));

    /* failed: etcd unreachable. */
    char *err = NULL;
    ASSERT_EQ(1, tool(&out, &err,
                      (const char *[]){"-w", "json", "campaign", "j", "--endpoints",
                                       "127.0.0.1:1", "--dial-timeout", "1s",
                                       "--fail-fast", NULL}));
    assert_field(out, "event", "failed");
    assert_field(out, "error", "ECONNECT");
    free(out);
    free(err);
    free(akey);
    free(alease);
    free(atoken);
    free(bkey);
    free(blease);
    tl_log("%ld JSON lines checked against the schema", json_checked_total() - before);
    ASSERT_GE(json_checked_total() - before, 10);
    eh_stop(c);
}

/* A value etcd refuses is its own event, proclaim_failed, and leadership stays;
 * the next line is proclaimed. */
TEST(proclaim_failed_is_its_own_event)
{
    eh_cluster *c = start1();
    char *dir = tl_tmpdir("pf"), big[512], fifo[512];
    snprintf(big, sizeof(big), "%s/big", dir);
    snprintf(fifo, sizeof(fifo), "%s/in", dir);
    FILE *f = fopen(big, "w");
    for (int i = 0; i < 2 * 1024 * 1024; i++)
        fputc('x', f);
    fputc('\n', f);
    fclose(f);
    ASSERT_OK(mkfifo(fifo, 0600));
    int in = open(fifo, O_RDWR);
    eu_child a;
    char line[4096];
    tool_bg_opts bo = {.in_fd = in};
    tool_bg_ex(&a, &bo,
               (const char *[]){"--endpoints", eh_endpoints(c), "-w", "json", "campaign",
                                "pf", "v0", "--proclaim-stdin", NULL});
    ASSERT_OK(eu_child_expect(&a, "{\"event\":\"elected\"", line, sizeof(line), 10000));
    int w = open(fifo, O_WRONLY);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "cat %s > %s", big, fifo);
    ASSERT_EQ(0, tl_run(NULL, (const char *[]){"sh", "-c", cmd, NULL}));
    ASSERT_OK(
        eu_child_expect(&a, "{\"event\":\"proclaim_failed\"", line, sizeof(line), 10000));
    assert_field(line, "error", "ETOOLARGE");
    assert_field(line, "value", "v0"); /* what etcd still holds */
    ASSERT_EQ(5, (int)write(w, "next\n", 5));
    ASSERT_OK(
        eu_child_expect(&a, "{\"event\":\"proclaimed\"", line, sizeof(line), 10000));
    assert_field(line, "value", "next");
    close(w);
    close(in);
    kill(a.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&a, 10));
    free(dir);
    eh_stop(c);
}

/* --proclaim-stdin: lines read while waiting are not lost; once elected, the
 * latest is proclaimed (and only it). */
TEST(proclaim_stdin_proclaims_the_latest_line_once_elected)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    char *dir = tl_tmpdir("late"), fifo[512];
    snprintf(fifo, sizeof(fifo), "%s/in", dir);
    ASSERT_OK(mkfifo(fifo, 0600));
    int in = open(fifo, O_RDWR);
    eu_child a, b, obs;
    char line[1024];
    tool_bg(&a, (const char *[]){"--endpoints", eps, "campaign", "ps", "A", NULL});
    ASSERT_OK(eu_child_expect(&a, "ps/", line, sizeof(line), 10000));
    tool_bg(&obs,
            (const char *[]){"--endpoints", eps, "-w", "json", "observe", "ps", NULL});
    ASSERT_OK(eu_child_expect(&obs, "{\"event\":\"leader\"", line, sizeof(line), 10000));
    tool_bg_opts bo = {.in_fd = in};
    tool_bg_ex(&b, &bo,
               (const char *[]){"--endpoints", eps, "-w", "json", "campaign", "ps", "B",
                                "--proclaim-stdin", NULL});
    ASSERT_OK(eu_child_expect(&b, "{\"event\":\"waiting\"", line, sizeof(line), 10000));
    int w = open(fifo, O_WRONLY);
    ASSERT_EQ(9, (int)write(w, "l1\nl2\nl3\n", 9));
    tl_msleep(300);
    kill(a.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&a, 10));
    ASSERT_OK(eu_child_expect(&b, "{\"event\":\"elected\"", line, sizeof(line), 10000));
    assert_field(line, "value", "B");
    ASSERT_OK(
        eu_child_expect(&b, "{\"event\":\"proclaimed\"", line, sizeof(line), 10000));
    assert_field(line, "value", "l3");
    /* The observer saw B, then l3; never l1 or l2. */
    ASSERT_OK(eu_child_expect(&obs, "{\"event\":\"leader\"", line, sizeof(line), 5000));
    if (strstr(line, "\"value\":\"B\"")) /* B's election, then its proclaim */
        ASSERT_OK(
            eu_child_expect(&obs, "{\"event\":\"leader\"", line, sizeof(line), 5000));
    assert_field(line, "value", "l3");
    ASSERT_EQ(-1,
              eu_child_expect(&obs, "{\"event\":\"leader\"", line, sizeof(line), 500));
    close(w);
    close(in);
    kill(b.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&b, 10));
    kill(obs.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&obs, 10));
    free(dir);
    eh_stop(c);
}

/* ---------------------------------------------------------------- stderr */

TEST(stderr_lines_carry_a_time_and_a_level)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    char *out = NULL, *err = NULL;
    ASSERT_EQ(4, tool(&out, &err,
                      (const char *[]){"leader", "nobody", "--endpoints", eps, NULL}));
    regex_t re;
    ASSERT_OK(
        regcomp(&re,
                "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
                "info elector: no leader for nobody\n$",
                REG_EXTENDED | REG_NOSUB));
    tl_log("%s", err);
    ASSERT_OK(regexec(&re, err, 0, NULL, 0));
    regfree(&re);
    free(out);
    free(err);
    /* --log-format json (or ELECTOR_LOG_FORMAT): every line checked by the schema. */
    ASSERT_EQ(4, tool(&out, &err,
                      (const char *[]){"leader", "nobody", "--endpoints", eps,
                                       "--log-format", "json", NULL}));
    ASSERT_EQ(1, json_check_text(err));
    ASSERT_CONTAINS(err, "\"level\":\"info\",\"msg\":\"no leader for nobody\"}");
    free(out);
    free(err);
    char epv[300];
    snprintf(epv, sizeof(epv), "ELECTOR_ENDPOINTS=%s", eps);
    const char *env[] = {epv, "ELECTOR_LOG_FORMAT=json", "PATH=/usr/bin:/bin", NULL};
    ASSERT_EQ(
        0, tool_with_env(&out, &err, env,
                         (const char *[]){"--debug", "run", "lf", "--", "true", NULL}));
    int n = json_check_text(err);
    tl_log("run --debug --log-format json: %d lines:\n%s", n, err);
    ASSERT_GE(n, 8); /* config, connected, lease, campaigning, elected, started, ... */
    ASSERT_CONTAINS(err, "\"level\":\"debug\",\"msg\":\"lease ");
    ASSERT_CONTAINS(err, "\"level\":\"info\",\"msg\":\"elected: lf/");
    free(out);
    free(err);
    eh_stop(c);
}

/* ---------------------------------------------------------------- exit statuses */

TEST(http_port_taken_is_a_runtime_error)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    ASSERT_OK(bind(s, (struct sockaddr *)&a, sizeof(a)));
    ASSERT_OK(listen(s, 4));
    ASSERT_OK(getsockname(s, (struct sockaddr *)&a, &l));
    eh_cluster *c = start1();
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", ntohs(a.sin_port));
    char *out = NULL, *err = NULL;
    ASSERT_EQ(1, tool(&out, &err,
                      (const char *[]){"--endpoints", eh_endpoints(c), "--http", addr,
                                       "campaign", "hp", NULL}));
    tl_log("%s", err);
    ASSERT_CONTAINS(err, "error elector: --http: cannot listen on ");
    ASSERT_CONTAINS(err, "Address already in use");
    free(out);
    free(err);
    ASSERT_EQ(1, tool(&out, &err,
                      (const char *[]){"--endpoints", eh_endpoints(c), "--http", addr,
                                       "observe", "hp", NULL}));
    free(out);
    free(err);
    close(s);
    eh_stop(c);
}

TEST(hex_prints_bytes_as_etcdctl_does)
{
    eh_cluster *c = start1();
    eu_cand *x = eu_cand_new(eh_endpoints(c), "hx", 5);
    ASSERT_OK(elector_campaign_sync(x->el, "\x01v", 2, 10000));
    char *out = NULL;
    ASSERT_EQ(0, tool(&out, NULL,
                      (const char *[]){"--hex", "leader", "hx", "--endpoints",
                                       eh_endpoints(c), NULL}));
    tl_log("%s", out);
    ASSERT_CONTAINS(out, "\\x68\\x78\\x2f"); /* "hx/" */
    ASSERT_CONTAINS(out, "\n\\x01\\x76\n");
    free(out);
    eu_cand_free(x);
    eh_stop(c);
}
