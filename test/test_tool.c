/* SPDX-License-Identifier: MIT */
/* The elector command-line tool, run as a real process against real etcd:
 * every command's happy path and errors, `run` supervision (started only when
 * elected, stopped on loss, killed with elector, deadline kept while elector is
 * frozen), signals, exit statuses, JSON output, the HTTP endpoint, and interop
 * with etcdctl elect. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "elect_util.h"
#include "testlib.h"
#include "tool_util.h"

/* ---------------------------------------------------------------- usage */

TEST(help_and_version_succeed)
{
    char *out = NULL;
    ASSERT_EQ(0, tool(&out, NULL, (const char *[]){"--help", NULL}));
    ASSERT_CONTAINS(out, "Usage: elector");
    ASSERT_CONTAINS(out, "Exit status");
    free(out);
    ASSERT_EQ(0, tool(&out, NULL, (const char *[]){"--version", NULL}));
    ASSERT_CONTAINS(out, "elector ");
    free(out);
}

struct bad {
    const char *args[8];
    const char *says;
};

TEST(bad_usage_gives_one_clear_line_and_exit_2)
{
    static const struct bad cases[] = {
        {{"campaign", "x", "--bogus", NULL}, "unknown option '--bogus'"},
        {{"campaign", NULL}, "missing election NAME"},
        {{"campaign", "", NULL}, "must not be empty"},
        {{"dance", "x", NULL}, "unknown command 'dance'"},
        {{NULL}, "no command given"},
        {{"campaign", "x", "--ttl", "5x", NULL}, "--ttl: invalid duration '5x'"},
        {{"campaign", "x", "--dial-timeout", "-1s", NULL}, "invalid duration"},
        {{"campaign", "x", "--ttl", NULL}, "needs a value"},
        {{"run", "x", NULL}, "missing command after '--'"},
        {{"campaign", "x", "--endpoints", "nohost", NULL}, "endpoint 'nohost'"},
        {{"campaign", "x", "--endpoints", "h:99999", NULL}, "port from 1 to 65535"},
        {{"observe", "x", "--restart", NULL}, "only for `elector run`"},
        {{"campaign", "x", "--cert", "a.pem", NULL}, "--cert and --key go together"},
        {{"campaign", "x", "--cacert", "/nonexistent/ca.pem", NULL},
         "/nonexistent/ca.pem"},
        {{"leader", "x", "-w", "yaml", NULL}, "not one of simple, json"},
        {{"campaign", "x", "--ttl", "1.5s", NULL}, "whole number of seconds"},
        {{"campaign", "x", "--endpoints", "ftp://h:1", NULL}, "unsupported scheme"},
        {{"campaign", "x", "--endpoints", "a:1,,b:2", NULL},
         "empty or overlong endpoint"},
        {{"leader", "x", "--log-level", "loud", NULL},
         "not one of error, warn, info, debug"},
        {{"campaign", "x", "--password-file", "/nonexistent/pw", NULL},
         "/nonexistent/pw"},
        {{"campaign", "x", "--http", "nonsense:xx", "--endpoints", "127.0.0.1:1", NULL},
         "invalid HTTP address 'nonsense:xx'"},
        /* etcdctl's forms (issue 13) */
        {{"leader", "x", "--dial-timeout", "1m30", NULL}, "invalid duration '1m30'"},
        {{"--discovery-srv", "example.com", "--endpoints", "127.0.0.1:1", "leader", "x",
          NULL},
         "--endpoints and --discovery-srv both name the members"},
        {{"--auto-sync-interval", "-1s", "leader", "x", NULL},
         "--auto-sync-interval: invalid duration '-1s'"},
        {{"help", "dance", NULL}, "help: unknown command 'dance'"},
        {{"lock", NULL}, "missing lock NAME"},
        {{"lock", "L", "--", NULL}, "lock: missing command after '--'"},
        {{"lock", "L", "--value", "v", NULL}, "--value is only for campaign and run"},
        {{"leader", "x", "--user", "u:a", "--password", "b", NULL},
         "the password is given twice"},
        {{"leader", "x", "--user", ":pw", NULL}, "--user: the user name is empty"},
        {{"leader", "x", "--keepalive", "1s", NULL}, "ambiguous option '--keepalive'"},
        {{"leader", "x", "--log-format", "yaml", NULL}, "not one of text, json"},
        {{"campaign", "x", "v", "--value", "w", NULL}, "give the VALUE once"},
        {{"leader", "x", "--hex=maybe", NULL}, "--hex: 'maybe' is not a boolean"},
        {{"leader", "x", "-x", NULL}, "unknown option '-x'"},
        {{"campaign", "x", "--release-on-exit=maybe", NULL},
         "--release-on-exit: 'maybe' is not a boolean"},
        {{"observe", "x", "--release-on-exit=false", NULL},
         "--release-on-exit is for campaign and lock without a command"},
        {{"run", "x", "--release-on-exit=false", "--", "true", NULL},
         "--release-on-exit is for campaign and lock without a command"},
        {{"version", "x", NULL}, "unexpected argument 'x'"},
        {{"leader", "x", "--endpoints", "https://h:1,http://h:2",
          "--insecure-transport=false", NULL},
         "endpoint http://h:2 is cleartext, and TLS is required"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out = NULL, *err = NULL;
        int rc = tool(&out, &err, cases[i].args);
        tl_log("case %zu: exit %d: %s", i, rc, err ? err : "");
        ASSERT_EQ(2, rc);
        ASSERT_CONTAINS(err, cases[i].says);
        ASSERT_STREQ("", out);
        /* One line. */
        ASSERT(strchr(err, '\n') == err + strlen(err) - 1);
        free(out);
        free(err);
    }
}

TEST(unreachable_cluster_fails_within_the_dial_timeout)
{
    char *out = NULL, *err = NULL;
    double t0 = tl_now();
    int rc =
        tool(&out, &err,
             (const char *[]){"campaign", "x", "--endpoints", "127.0.0.1:1,127.0.0.1:2",
                              "--dial-timeout", "1s", "--fail-fast", NULL});
    double dt = tl_now() - t0;
    tl_log("exit %d after %.2f s: %s", rc, dt, err);
    ASSERT_EQ(1, rc);
    ASSERT_LT(dt, 3.0);
    ASSERT_CONTAINS(err, "127.0.0.1:");
    ASSERT_CONTAINS(err, "check --endpoints");
    free(out);
    free(err);
    rc = tool(&out, &err,
              (const char *[]){"leader", "x", "--endpoints", "127.0.0.1:1", NULL});
    ASSERT_EQ(1, rc);
    free(out);
    free(err);
}

/* ---------------------------------------------------------------- campaign, leader */

TEST(campaign_prints_key_and_value_then_resigns_on_sigterm)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    eu_child a;
    tool_bg(&a, (const char *[]){"--endpoints", eps, "campaign", "svc", "node-a", NULL});
    char key[256], line[256];
    ASSERT_OK(eu_child_expect(&a, "svc/", key, sizeof(key), 10000));
    ASSERT_OK(eu_child_expect(&a, "", line, sizeof(line), 2000));
    ASSERT_STREQ("node-a", line);

    char *out = NULL;
    ASSERT_EQ(
        0, tool(&out, NULL, (const char *[]){"leader", "svc", "--endpoints", eps, NULL}));
    char want[300];
    snprintf(want, sizeof(want), "%s\nnode-a\n", key);
    ASSERT_STREQ(want, out);
    free(out);

    kill(a.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&a, 10));
    /* Resigned and revoked: nobody leads, and no lease lingers. */
    ASSERT_EQ(
        4, tool(&out, NULL, (const char *[]){"leader", "svc", "--endpoints", eps, NULL}));
    free(out);
    ASSERT_OK(eh_etcdctl(c, &out, "lease", "list", NULL));
    ASSERT_CONTAINS(out, "found 0 leases");
    free(out);
    eh_stop(c);
}

TEST(json_lines_carry_event_key_token_and_mono_ns)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    eu_child a, b;
    char line[1024];
    tool_bg(&a, (const char *[]){"--endpoints", eps, "-w", "json", "campaign", "j", "A",
                                 NULL});
    ASSERT_OK(eu_child_expect(&a, "{\"event\":\"elected\"", line, sizeof(line), 10000));
    ASSERT_CONTAINS(line, "\"name\":\"j\"");
    ASSERT_CONTAINS(line, "\"value\":\"A\"");
    ASSERT_CONTAINS(line, "\"token\":");
    ASSERT_CONTAINS(line, "\"mono_ns\":");
    tool_bg(&b, (const char *[]){"campaign", "j", "B", "-w", "json", "--endpoints", eps,
                                 NULL});
    ASSERT_OK(eu_child_expect(&b, "{\"event\":\"waiting\"", line, sizeof(line), 10000));
    kill(a.pid, SIGINT);
    ASSERT_OK(eu_child_expect(&a, "{\"event\":\"resigned\"", line, sizeof(line), 5000));
    ASSERT_EQ(0, tool_wait(&a, 10));
    ASSERT_OK(eu_child_expect(&b, "{\"event\":\"elected\"", line, sizeof(line), 5000));
    ASSERT_CONTAINS(line, "\"value\":\"B\"");
    kill(b.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&b, 10));
    eh_stop(c);
}

TEST(campaign_exits_3_when_leadership_is_lost)
{
    eh_cluster *c = start1();
    eu_child a;
    char key[256];
    tool_bg(&a, (const char *[]){"--endpoints", eh_endpoints(c), "campaign", "lost", "v",
                                 NULL});
    ASSERT_OK(eu_child_expect(&a, "lost/", key, sizeof(key), 10000));
    ASSERT_OK(eh_etcdctl(c, NULL, "del", key, NULL));
    ASSERT_EQ(3, tool_wait(&a, 10));
    eh_stop(c);
}

/* Writes data to fd from a child process (a pipe takes 64 KiB before its
 * reader has read), after delay_ms, then closes it. */
static pid_t write_later(int fd, const char *data, size_t len, int delay_ms)
{
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        tl_msleep(delay_ms);
        size_t off = 0;
        while (off < len) {
            ssize_t n = write(fd, data + off, len - off);
            if (n <= 0) _exit(1);
            off += (size_t)n;
        }
        close(fd);
        _exit(0);
    }
    return pid;
}

/* elector is started by the test itself (not behind a shell pipeline): it is
 * stopped with SIGTERM and its exit checked, so it ends by itself and writes its
 * coverage counters (a process left to the test's cleanup dies by SIGKILL and
 * writes none: tool/candidate/proclaim.c counted nothing of these tests). */
TEST(proclaim_stdin_updates_the_value)
{
    eh_cluster *c = start1();
    int p[2];
    ASSERT_OK(pipe2(p, O_CLOEXEC));
    eu_child a;
    tool_bg_opts bo = {.in_fd = p[0]};
    tool_bg_ex(&a, &bo,
               (const char *[]){"--endpoints", eh_endpoints(c), "campaign", "pr", "first",
                                "--proclaim-stdin", NULL});
    close(p[0]);
    char line[256];
    ASSERT_OK(eu_child_expect(&a, "first", line, sizeof(line), 10000));
    ASSERT_EQ(7, (int)write(p[1], "second\n", 7));
    tl_msleep(500);
    ASSERT_EQ(6, (int)write(p[1], "third\n", 6));
    double end = tl_now() + 10;
    char *out = NULL;
    for (;;) {
        ASSERT_EQ(0, tool(&out, NULL,
                          (const char *[]){"leader", "pr", "--endpoints", eh_endpoints(c),
                                           NULL}));
        if (strstr(out, "\nthird\n")) break;
        free(out);
        out = NULL;
        ASSERT_LT(tl_now(), end);
        tl_msleep(100);
    }
    free(out);
    kill(a.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&a, 10));
    close(p[1]);
    eh_stop(c);
}

/* A line on stdin longer than the tool takes (8 MiB) is refused by the tool
 * itself ("not proclaimed", its tail skipped), the next line lands; the end
 * of stdin ends nothing: the leader stays. */
TEST(proclaim_stdin_skips_a_line_over_8_mib)
{
    eh_cluster *c = start1();
    char *dir = tl_tmpdir("huge"), errp[512];
    snprintf(errp, sizeof(errp), "%s/err", dir);
    int p[2];
    ASSERT_OK(pipe2(p, O_CLOEXEC));
    eu_child a;
    tool_bg_opts bo = {.err_path = errp, .in_fd = p[0]};
    tool_bg_ex(&a, &bo,
               (const char *[]){"--endpoints", eh_endpoints(c), "--debug", "--ttl", "3s",
                                "campaign", "huge", "v", "--proclaim-stdin", NULL});
    close(p[0]);
    size_t big = 9000000;
    char *data = malloc(big + 7);
    ASSERT_NOT_NULL(data);
    memset(data, 'x', big);
    memcpy(data + big, "\nsmall\n", 7);
    pid_t w = write_later(p[1], data, big + 7, 1000);
    close(p[1]); /* the writer's copy is the last: its end is stdin's end */
    free(data);
    double end = tl_now() + 20;
    char *out = NULL;
    for (;;) {
        int rc = tool(
            &out, NULL,
            (const char *[]){"leader", "huge", "--endpoints", eh_endpoints(c), NULL});
        ASSERT(rc == 0 || rc == 4);
        if (rc == 0 && strstr(out, "\nsmall\n")) break;
        free(out);
        ASSERT_LT(tl_now(), end);
        tl_msleep(100);
    }
    free(out);
    int st;
    ASSERT_EQ(w, waitpid(w, &st, 0));
    ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ASSERT(
        wait_contains(errp, "a line on stdin is longer than 8 MiB: not proclaimed", 5));
    ASSERT(wait_contains(errp, "end of stdin", 5));
    /* --debug says the lease's grant and each renewal (every TTL/3). */
    ASSERT(wait_contains(errp, "granted with a TTL of 3 s", 1));
    ASSERT(wait_contains(errp, "renewed: leadership provable for ", 5));
    tl_msleep(300);
    ASSERT_EQ(0, tool(&out, NULL,
                      (const char *[]){"leader", "huge", "--endpoints", eh_endpoints(c),
                                       NULL})); /* still leading after the end of stdin */
    free(out);
    kill(a.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&a, 10));
    free(dir);
    eh_stop(c);
}

/* ---------------------------------------------------------------- run */

TEST(run_starts_the_command_only_when_elected_with_its_environment)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    char *dir = tl_tmpdir("run");
    char file[512], script[2048];
    snprintf(file, sizeof(file), "%s/started", dir);
    snprintf(
        script, sizeof(script),
        "echo \"$ELECTOR_NAME $ELECTOR_TOKEN $ELECTOR_LEASE $ELECTOR_KEY\" > %s.tmp; "
        "mv %s.tmp %s; exec sleep 60",
        file, file, file);
    eu_child a, b;
    char key[256];
    tool_bg(&a, (const char *[]){"--endpoints", eps, "campaign", "r", "A", NULL});
    ASSERT_OK(eu_child_expect(&a, "r/", key, sizeof(key), 10000));
    tool_bg(&b, (const char *[]){"--endpoints", eps, "run", "r", "--value", "B", "--",
                                 "sh", "-c", script, NULL});
    tl_msleep(1000);
    ASSERT(!file_exists(file)); /* not while a leads */
    kill(a.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&a, 10));
    ASSERT(wait_file(file, 5));
    char name[64], lease[64], bkey[256];
    long long token = 0;
    ASSERT_EQ(4, sscanf(slurp(file), "%63s %lld %63s %255s", name, &token, lease, bkey));
    ASSERT_STREQ("r", name);
    char want[128];
    snprintf(want, sizeof(want), "r/%s", lease);
    ASSERT_STREQ(want, bkey);
    elector_etcd *e = eu_client(eps);
    elector_leader_info li;
    ASSERT_OK(elector_leader_sync(e, "r", 3000, &li));
    ASSERT_EQ(li.token, token);
    elector_leader_free(&li);
    elector_etcd_free(e);
    kill(b.pid, SIGTERM);
    /* sleep died of the forwarded SIGTERM (143): a stop that was asked for, 0 */
    ASSERT_EQ(0, tool_wait(&b, 10));
    free(dir);
    eh_stop(c);
}

TEST(run_passes_on_the_exit_status_and_resigns)
{
    eh_cluster *c = start1();
    char *out = NULL;
    int rc = tool(&out, NULL,
                  (const char *[]){"--endpoints", eh_endpoints(c), "run", "ex", "--",
                                   "sh", "-c", "exit 7", NULL});
    ASSERT_EQ(7, rc);
    free(out);
    ASSERT_EQ(
        4, tool(&out, NULL,
                (const char *[]){"leader", "ex", "--endpoints", eh_endpoints(c), NULL}));
    free(out);
    rc = tool(&out, NULL,
              (const char *[]){"--endpoints", eh_endpoints(c), "run", "ex", "--",
                               "/nonexistent/cmd", NULL});
    ASSERT_EQ(127, rc);
    free(out);
    eh_stop(c);
}

/* A command that records its pid and, on SIGTERM, that it was asked to stop. */

/* The key deleted from outside: a successor may lead already, so the command
 * is SIGKILLed at once (no SIGTERM); with --grace-on-loss it is asked politely
 * first, as for a deadline. */
TEST(run_stops_the_command_when_leadership_is_lost)
{
    eh_cluster *c = start1();
    for (int graceful = 0; graceful < 2; graceful++) {
        char *dir = tl_tmpdir("loss");
        char script[1024], term[512];
        stoppable(script, sizeof(script), dir);
        snprintf(term, sizeof(term), "%s/term", dir);
        eu_child b;
        const char *args[12] = {"--endpoints", eh_endpoints(c), "run", "loss"};
        int n = 4;
        if (graceful) args[n++] = "--grace-on-loss";
        args[n++] = "--";
        args[n++] = "sh";
        args[n++] = "-c";
        args[n++] = script;
        tool_bg(&b, args);
        pid_t cmd = read_pid(dir);
        char *out = NULL;
        ASSERT_EQ(0,
                  eh_etcdctl(c, &out, "get", "--prefix", "--keys-only", "loss/", NULL));
        out[strcspn(out, "\n")] = 0;
        ASSERT_OK(eh_etcdctl(c, NULL, "del", out, NULL));
        free(out);
        ASSERT_EQ(3, tool_wait(&b, 10));
        ASSERT_EQ(graceful, file_exists(term)); /* asked politely first, or killed */
        ASSERT(!pid_alive(cmd));
        free(dir);
    }
    eh_stop(c);
}

TEST(run_command_dies_when_elector_is_sigkilled)
{
    eh_cluster *c = start1();
    char *dir = tl_tmpdir("kill");
    char script[1024];
    stoppable(script, sizeof(script), dir);
    eu_child b;
    tool_bg(&b, (const char *[]){"--endpoints", eh_endpoints(c), "--ttl", "5", "run", "k",
                                 "--grace", "1s", "--", "sh", "-c", script, NULL});
    pid_t cmd = read_pid(dir);
    kill(b.pid, SIGKILL);
    tool_wait(&b, 5);
    double end = tl_now() + 3;
    while (pid_alive(cmd) && tl_now() < end)
        tl_msleep(20);
    ASSERT(!pid_alive(cmd));
    free(dir);
    eh_stop(c);
}

TEST_WITH_TIMEOUT(run_command_is_gone_by_the_deadline_while_elector_is_frozen, 60)
{
    eh_cluster *c = start1();
    char *dir = tl_tmpdir("freeze");
    char script[1024], line[1024];
    stoppable(script, sizeof(script), dir);
    eu_child b;
    tool_bg(&b, (const char *[]){"--endpoints", eh_endpoints(c), "--ttl", "2", "-w",
                                 "json", "--events-fd", "1", "run", "fz", "--", "sh",
                                 "-c", script, NULL});
    ASSERT_OK(eu_child_expect(&b, "{\"event\":\"elected\"", line, sizeof(line), 10000));
    pid_t cmd = read_pid(dir);
    double t0 = tl_now();
    kill(b.pid, SIGSTOP);
    /* TTL 2 s: the deadline is at most 2 s after the last renewal. */
    while (pid_alive(cmd) && tl_now() - t0 < 5)
        tl_msleep(10);
    double gone = tl_now() - t0;
    tl_log("command gone %.2f s after elector froze", gone);
    ASSERT(!pid_alive(cmd));
    ASSERT_LT(gone, 2.2);
    /* Another candidate can take over once the lease has expired. */
    eu_cand *x = eu_cand_new(eh_endpoints(c), "fz", 5);
    ASSERT_OK(elector_campaign_sync(x->el, "x", 1, 10000));
    kill(b.pid, SIGCONT);
    ASSERT_EQ(3, tool_wait(&b, 10));
    eu_cand_free(x);
    free(dir);
    eh_stop(c);
}

TEST(run_forwards_sigterm_to_the_command_first)
{
    eh_cluster *c = start1();
    char *dir = tl_tmpdir("fwd");
    char script[1024], term[512];
    stoppable(script, sizeof(script), dir);
    snprintf(term, sizeof(term), "%s/term", dir);
    eu_child b;
    tool_bg(&b, (const char *[]){"--endpoints", eh_endpoints(c), "run", "fwd", "--", "sh",
                                 "-c", script, NULL});
    read_pid(dir);
    kill(b.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&b, 10)); /* the trap exits 0 */
    ASSERT(file_exists(term));
    char *out = NULL;
    ASSERT_EQ(
        4, tool(&out, NULL,
                (const char *[]){"leader", "fwd", "--endpoints", eh_endpoints(c), NULL}));
    free(out);
    free(dir);
    eh_stop(c);
}

/* ---------------------------------------------------------------- http */

static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    bind(s, (struct sockaddr *)&a, sizeof(a));
    getsockname(s, (struct sockaddr *)&a, &l);
    close(s);
    return ntohs(a.sin_port);
}

static int curl(char **out, const char *url)
{
    char *body = NULL;
    int rc =
        tl_run(&body, (const char *[]){"curl", "-s", "-w", "\n%{http_code}", url, NULL});
    ASSERT_EQ(0, rc);
    char *nl = strrchr(body, '\n');
    int code = atoi(nl + 1);
    *nl = 0;
    *out = body;
    return code;
}

TEST(http_endpoint_reports_leader_health_and_metrics)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    char addr_a[64], addr_b[64], url[128];
    snprintf(addr_a, sizeof(addr_a), "127.0.0.1:%d", free_port());
    snprintf(addr_b, sizeof(addr_b), "127.0.0.1:%d", free_port());
    eu_child a, b;
    char key[256], line[256];
    tool_bg(&a, (const char *[]){"--endpoints", eps, "--http", addr_a, "campaign", "h",
                                 "A", NULL});
    ASSERT_OK(eu_child_expect(&a, "h/", key, sizeof(key), 10000));
    tool_bg(&b, (const char *[]){"--endpoints", eps, "--http", addr_b, "campaign", "h",
                                 "B", NULL});
    tl_msleep(500);

    char *body;
    snprintf(url, sizeof(url), "http://%s/leader", addr_a);
    ASSERT_EQ(200, curl(&body, url));
    ASSERT_CONTAINS(body, "\"name\":\"h\"");
    ASSERT_CONTAINS(body, "\"value\":\"A\"");
    ASSERT_CONTAINS(body, key);
    free(body);
    snprintf(url, sizeof(url), "http://%s/healthz?leader=1", addr_a);
    ASSERT_EQ(200, curl(&body, url));
    free(body);
    snprintf(url, sizeof(url), "http://%s/healthz?leader=1", addr_b);
    ASSERT_EQ(503, curl(&body, url));
    free(body);
    snprintf(url, sizeof(url), "http://%s/healthz", addr_b);
    ASSERT_EQ(200, curl(&body, url));
    free(body);
    snprintf(url, sizeof(url), "http://%s/metrics", addr_a);
    ASSERT_EQ(200, curl(&body, url));
    ASSERT_CONTAINS(body, "elector_is_leader{name=\"h\"} 1");
    ASSERT_CONTAINS(body, "elector_keepalive_rtt_seconds_bucket");
    ASSERT_CONTAINS(body, "elector_etcd_requests_total{method=\"Txn\"}");
    /* promtool, where the prometheus package is installed, checks the format. */
    char *dir = tl_tmpdir("prom"), path[512];
    snprintf(path, sizeof(path), "%s/metrics.txt", dir);
    FILE *f = fopen(path, "w");
    fputs(body, f);
    fclose(f);
    free(body);
    if (access("/usr/bin/promtool", X_OK) == 0) {
        char cmd[600], *o = NULL;
        snprintf(cmd, sizeof(cmd), "promtool check metrics < %s", path);
        int prc = tl_run(&o, (const char *[]){"sh", "-c", cmd, NULL});
        tl_log("promtool: exit %d %s", prc, o ? o : "");
        ASSERT_EQ(0, prc);
        free(o);
    } else {
        tl_log("promtool not installed: format check skipped");
    }
    free(dir);
    kill(a.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&a, 10));
    (void)line;
    kill(b.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&b, 10));
    eh_stop(c);
}

/* ---------------------------------------------------------------- interop */

TEST(tool_and_etcdctl_elect_share_an_election)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    int fd;
    pid_t ctl = tl_spawn(
        (const char *[]){"etcdctl", "--endpoints", eps, "elect", "mix", "ctl", NULL},
        &fd);
    eu_child ctl_ch, a, obs;
    eu_child_wrap(&ctl_ch, ctl, fd);
    char ctl_key[256], line[256];
    ASSERT_OK(eu_child_expect(&ctl_ch, "mix/", ctl_key, sizeof(ctl_key), 10000));
    tool_bg(&obs, (const char *[]){"--endpoints", eps, "observe", "mix", NULL});
    ASSERT_OK(eu_child_expect(&obs, "mix/", line, sizeof(line), 10000));
    ASSERT_STREQ(ctl_key, line);
    tool_bg(&a, (const char *[]){"--endpoints", eps, "campaign", "mix", "tool", NULL});
    ASSERT_EQ(-1, eu_child_expect(&a, "mix/", line, sizeof(line), 1000));
    kill(ctl, SIGINT);
    ASSERT_OK(eu_child_expect(&a, "mix/", line, sizeof(line), 5000));
    ASSERT_OK(eu_child_expect(&obs, "tool", line, sizeof(line), 5000));
    tl_reap(ctl, SIGKILL, 5);

    /* And etcdctl sees the tool's leader. */
    char *out = NULL;
    const char *argv[] = {"etcdctl", "--endpoints", eps, "elect", "-l", "mix", NULL};
    tl_run_opts o = {.timeout_s = 1.5};
    tl_run_ex(&out, argv, &o);
    ASSERT_CONTAINS(out, "\ntool\n");
    free(out);
    kill(a.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&a, 10));
    kill(obs.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&obs, 10));
    eh_stop(c);
}

/* ---------------------------------------------------------------- more bad input */

static int tool_env(char **out, char **err, const char *const env[],
                    const char *const args[])
{
    const char *argv[32] = {ELECTOR_BIN};
    int n = 1;
    for (int i = 0; args[i]; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    tl_run_opts o = {.err = err, .timeout_s = 30, .envp = env};
    return tl_run_ex(out, argv, &o);
}

TEST(wrong_ca_is_a_clear_error_within_the_dial_timeout)
{
    eh_opts eo = {.members = 1, .tls = 1};
    eh_cluster *c = eh_start(&eo);
    ASSERT_NOT_NULL(c);
    char *out = NULL, *err = NULL;
    double t0 = tl_now();
    int rc = tool(&out, &err,
                  (const char *[]){"leader", "x", "--endpoints", eh_endpoints(c),
                                   "--cacert", eh_wrong_cacert(c), "--cert", eh_cert(c),
                                   "--key", eh_key(c), "--dial-timeout", "2s", NULL});
    tl_log("exit %d after %.2f s: %s", rc, tl_now() - t0, err);
    ASSERT_EQ(1, rc);
    ASSERT_LT(tl_now() - t0, 3.0);
    ASSERT_CONTAINS(err, "not trusted");
    ASSERT_CONTAINS(err, "check --cacert");
    free(out);
    free(err);
    /* The right CA works. */
    rc = tool(&out, &err,
              (const char *[]){"leader", "x", "--endpoints", eh_endpoints(c), "--cacert",
                               eh_cacert(c), "--cert", eh_cert(c), "--key", eh_key(c),
                               NULL});
    ASSERT_EQ(4, rc);
    free(out);
    free(err);
    /* --insecure-transport=false: an endpoint without a scheme is https. With the
     * CA it works; without it (the system's CAs), the TLS handshake is what fails. */
    const char *eps = eh_endpoints(c);
    ASSERT(!strncmp(eps, "https://", 8));
    rc = tool(&out, &err,
              (const char *[]){"leader", "x", "--endpoints", eps + 8, "--cacert",
                               eh_cacert(c), "--cert", eh_cert(c), "--key", eh_key(c),
                               "--insecure-transport=false", NULL});
    ASSERT_EQ(4, rc);
    free(out);
    free(err);
    rc = tool(&out, &err,
              (const char *[]){"leader", "x", "--endpoints", eps + 8, "--dial-timeout",
                               "2s", "--insecure-transport=false", NULL});
    tl_log("no scheme, no CA, --insecure-transport=false: exit %d: %s", rc, err);
    ASSERT_EQ(1, rc);
    char want[300];
    snprintf(want, sizeof(want), "endpoint %s: TLS handshake failed", eps);
    ASSERT_CONTAINS(err, want);
    free(out);
    free(err);
    eh_stop(c);
}

TEST(wrong_password_is_a_clear_error_and_the_right_one_works)
{
    eh_opts eo = {.members = 1, .auth = 1};
    eh_cluster *c = eh_start(&eo);
    ASSERT_NOT_NULL(c);
    char *out = NULL, *err = NULL;
    const char *bad[] = {"ELECTOR_PASSWORD=wrong", "PATH=/usr/bin:/bin", NULL};
    int rc = tool_env(&out, &err, bad,
                      (const char *[]){"leader", "x", "--endpoints", eh_endpoints(c),
                                       "--user", "root", NULL});
    tl_log("exit %d: %s", rc, err);
    ASSERT_EQ(1, rc);
    ASSERT_CONTAINS(err, "authentication failed");
    ASSERT_CONTAINS(err, "ELECTOR_PASSWORD");
    free(out);
    free(err);
    char *dir = tl_tmpdir("pw"), path[512];
    snprintf(path, sizeof(path), "%s/pw", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "%s\n", EH_ROOT_PASSWORD);
    fclose(f);
    rc = tool(&out, &err,
              (const char *[]){"leader", "x", "--endpoints", eh_endpoints(c), "--user",
                               "root", "--password-file", path, NULL});
    ASSERT_EQ(4, rc);
    free(out);
    free(err);
    free(dir);
    eh_stop(c);
}

TEST(value_over_the_request_limit_is_refused_with_a_hint)
{
    eh_cluster *c = start1();
    char *dir = tl_tmpdir("big"), errp[512];
    snprintf(errp, sizeof(errp), "%s/err", dir);
    int p[2];
    ASSERT_OK(pipe2(p, O_CLOEXEC));
    eu_child a;
    tool_bg_opts bo = {.err_path = errp, .in_fd = p[0]};
    tool_bg_ex(&a, &bo,
               (const char *[]){"--endpoints", eh_endpoints(c), "campaign", "big", "v",
                                "--proclaim-stdin", NULL});
    close(p[0]);
    /* A 2 MiB line is refused by etcd, said with the hint; a small one then
     * lands (written after the refusal: a line waiting to be proclaimed is
     * replaced by the next). */
    size_t big = 2 * 1024 * 1024;
    char *data = malloc(big + 1);
    ASSERT_NOT_NULL(data);
    memset(data, 'x', big);
    data[big] = '\n';
    pid_t w = write_later(p[1], data, big + 1, 1000);
    free(data);
    ASSERT(wait_contains(errp, "error elector: proclaim failed: ", 10));
    ASSERT(wait_contains(errp,
                         "; the value is larger than etcd accepts (--max-request-bytes, "
                         "1.5 MiB by default)",
                         1));
    int st;
    ASSERT_EQ(w, waitpid(w, &st, 0));
    ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ASSERT_EQ(6, (int)write(p[1], "small\n", 6));
    double end = tl_now() + 10;
    char *out = NULL;
    for (;;) {
        int rc =
            tool(&out, NULL,
                 (const char *[]){"leader", "big", "--endpoints", eh_endpoints(c), NULL});
        ASSERT(rc == 0 || rc == 4); /* 4: not elected yet */
        if (rc == 0 && strstr(out, "\nsmall\n")) break;
        free(out);
        ASSERT_LT(tl_now(), end);
        tl_msleep(100);
    }
    free(out);
    kill(a.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&a, 10));
    close(p[1]);
    free(dir);
    eh_stop(c);
}

TEST(endpoints_come_from_the_environment)
{
    eh_cluster *c = start1();
    char env1[256];
    snprintf(env1, sizeof(env1), "ELECTOR_ENDPOINTS=%s", eh_endpoints(c));
    const char *env[] = {env1, NULL};
    char *out = NULL;
    ASSERT_EQ(4, tool_env(&out, NULL, env, (const char *[]){"leader", "envtest", NULL}));
    free(out);
    snprintf(env1, sizeof(env1), "ETCDCTL_ENDPOINTS=%s", eh_endpoints(c));
    ASSERT_EQ(4, tool_env(&out, NULL, env, (const char *[]){"leader", "envtest", NULL}));
    free(out);
    eh_stop(c);
}

TEST(run_restart_campaigns_again_after_the_command_exits)
{
    eh_cluster *c = start1();
    char *dir = tl_tmpdir("restart"), script[1024], count[512];
    snprintf(count, sizeof(count), "%s/count", dir);
    /* Each run appends its token; exits at once. */
    snprintf(script, sizeof(script), "echo $ELECTOR_TOKEN >> %s; sleep 0.2", count);
    eu_child b;
    tool_bg(&b, (const char *[]){"--endpoints", eh_endpoints(c), "run", "rs", "--restart",
                                 "--", "sh", "-c", script, NULL});
    double end = tl_now() + 15;
    int lines = 0;
    long long last = 0, prev = 0;
    while (lines < 3 && tl_now() < end) {
        tl_msleep(100);
        FILE *f = fopen(count, "r");
        if (!f) continue;
        lines = 0;
        while (fscanf(f, "%lld", &last) == 1) {
            if (lines) ASSERT_GT(last, prev); /* a new leadership each time */
            prev = last;
            lines++;
        }
        fclose(f);
    }
    ASSERT_GE(lines, 3);
    kill(b.pid, SIGTERM);
    /* The command's status if it was running (SIGTERM forwarded), else 0. */
    int rc = tool_wait(&b, 10);
    ASSERT(rc == 0 || rc == 143);
    free(dir);
    eh_stop(c);
}

/* --auto-sync-interval: the endpoint given as "localhost:PORT" is replaced by
 * the member's own client URL (127.0.0.1:PORT), and the log says so. */
TEST(auto_sync_interval_takes_the_endpoints_from_the_member_list)
{
    eh_cluster *c = start1();
    char eps[64], err_path[600], want[128];
    snprintf(eps, sizeof(eps), "localhost:%d", eh_client_port(c, 0));
    char *d = tl_tmpdir("autosync");
    snprintf(err_path, sizeof(err_path), "%s/err", d);
    eu_child a;
    tool_bg_opts o = {.err_path = err_path, .in_fd = -1};
    tool_bg_ex(&a, &o,
               (const char *[]){"--endpoints", eps, "--auto-sync-interval", "200ms",
                                "campaign", "svc", "node-a", NULL});
    char key[256];
    ASSERT_OK(eu_child_expect(&a, "svc/", key, sizeof(key), 10000));
    snprintf(want, sizeof(want),
             "endpoints synced from the cluster's member list: 127.0.0.1:%d",
             eh_client_port(c, 0));
    ASSERT(wait_contains(err_path, want, 10));
    kill(a.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&a, 10));
    free(d);
    eh_stop(c);
}

/* ---------------------------------------------------------------- restores */

/* Reads obs's lines until one contains needle; 0, or -1 on timeout. */
static int expect_containing(eu_child *ch, const char *needle, int ms)
{
    char line[1024];
    double end = tl_now() + ms / 1000.0;
    while (tl_now() < end) {
        int left = (int)((end - tl_now()) * 1000) + 1;
        if (eu_child_expect(ch, "{", line, sizeof(line), left)) return -1;
        if (strstr(line, needle)) return 0;
    }
    return -1;
}

/* etcd restored from a snapshot (its revision goes back): `observe` reads the
 * leader again (a warning saying so) and keeps observing the new history.
 * Before, it read again forever and reported nothing more. */
TEST(observe_reads_the_leader_again_after_a_restore)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    eu_child obs, a, b;
    char err[600];
    snprintf(err, sizeof(err), "%s/observe.err", eh_dir(c));
    tool_bg_ex(
        &obs, &(tool_bg_opts){.err_path = err, .in_fd = -1},
        (const char *[]){"--endpoints", eps, "-w", "json", "observe", "rso", NULL});
    ASSERT_OK(expect_containing(&obs, "\"no_leader\"", 10000));
    char snap[600];
    snprintf(snap, sizeof(snap), "%s/snap.db", eh_dir(c));
    ASSERT_OK(eh_etcdctl(c, NULL, "snapshot", "save", snap, NULL));
    for (int i = 0; i < 10; i++)
        ASSERT_OK(eh_etcdctl(c, NULL, "put", "rso-noise", "x", NULL));
    tool_bg(&a, (const char *[]){"--endpoints", eps, "--ttl", "5s", "campaign", "rso",
                                 "A", NULL});
    ASSERT_OK(expect_containing(&obs, "\"value\":\"A\"", 10000));
    kill(a.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&a, 10));
    ASSERT_OK(expect_containing(&obs, "\"no_leader\"", 10000));
    ASSERT_OK(eh_member_restore(c, 0, snap, NULL));
    ASSERT(wait_contains(err, "restored from a snapshot?: leader read again", 20));
    tool_bg(&b, (const char *[]){"--endpoints", eps, "campaign", "rso", "B", NULL});
    ASSERT_OK(expect_containing(&obs, "\"value\":\"B\"", 10000));
    kill(b.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&b, 10));
    kill(obs.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&obs, 10));
    eh_stop(c);
}
