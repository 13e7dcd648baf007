/* SPDX-License-Identifier: MIT */
/* The tool for operations, as a real process against real etcd: GET /leader on
 * every instance (a waiting candidate names the leader and follows a failover),
 * systemd's notifications read from a datagram socket the test owns, the
 * metrics for alerts through `promtool check metrics`, the example alert rules
 * through `promtool check rules` and `promtool test rules`, and the example
 * systemd unit through `systemd-analyze verify`. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "elect_util.h"
#include "json_check.h"
#include "testlib.h"
#include "tool_util.h"

#define EXAMPLES_DIR ELECTOR_DOCS_DIR "/../examples"

/* ---------------------------------------------------------------- helpers */

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

/* GET http://addr/path: the status code; the body (malloc'd) in *out. */
static int get(char **out, const char *addr, const char *path)
{
    char url[256], *body = NULL;
    snprintf(url, sizeof(url), "http://%s%s", addr, path);
    int rc =
        tl_run(&body, (const char *[]){"curl", "-s", "-w", "\n%{http_code}", url, NULL});
    char *nl = body ? strrchr(body, '\n') : NULL;
    if (rc != 0 || !nl) {
        free(body);
        *out = strdup("");
        return 0;
    }
    int code = atoi(nl + 1);
    *nl = 0;
    *out = body;
    return code;
}

/* Polls GET addr/leader until its body contains every needle (NULL-ended);
 * returns the body (malloc'd) or NULL after timeout_s. */
static char *wait_leader(const char *addr, double timeout_s, const char *const needles[])
{
    double end = tl_now() + timeout_s;
    char *body = NULL;
    do {
        free(body);
        body = NULL;
        if (get(&body, addr, "/leader") == 200) {
            bool all = true;
            for (int i = 0; needles[i]; i++)
                all = all && strstr(body, needles[i]);
            if (all) return body;
        }
        tl_msleep(100);
    } while (tl_now() < end);
    tl_log("GET %s/leader: %s", addr, body ? body : "(none)");
    free(body);
    return NULL;
}

static void promtool_metrics(const char *text)
{
    if (access("/usr/bin/promtool", X_OK) != 0) {
        tl_log("promtool not installed (scripts/deps.sh installs prometheus): skipped");
        return;
    }
    char *dir = tl_tmpdir("prom"), path[512], cmd[700], *o = NULL;
    snprintf(path, sizeof(path), "%s/metrics.txt", dir);
    FILE *f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    fputs(text, f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "promtool check metrics < %s 2>&1", path);
    int rc = tl_run(&o, (const char *[]){"sh", "-c", cmd, NULL});
    tl_log("promtool check metrics: exit %d %s", rc, o ? o : "");
    ASSERT_EQ(0, rc);
    free(o);
    free(dir);
}

/* ---------------------------------------------------------------- /leader */

/* Waits until the election's prefix holds n keys (candidates). */
static bool wait_candidates(eh_cluster *c, const char *prefix, int n)
{
    double end = tl_now() + 10;
    while (tl_now() < end) {
        char *out = NULL;
        int k = 0;
        if (eh_etcdctl(c, &out, "get", prefix, "--prefix", "--keys-only", NULL) == 0)
            for (char *p = out; (p = strstr(p, prefix)); p++)
                k++;
        free(out);
        if (k >= n) return true;
        tl_msleep(50);
    }
    return false;
}

TEST_WITH_TIMEOUT(waiting_candidates_name_the_leader_and_follow_a_failover, 120)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    char ha[64], hb[64], hc[64], ho[64], key_a[256], key_b[256], want[300];
    snprintf(ha, sizeof(ha), "127.0.0.1:%d", free_port());
    snprintf(hb, sizeof(hb), "127.0.0.1:%d", free_port());
    snprintf(hc, sizeof(hc), "127.0.0.1:%d", free_port());
    snprintf(ho, sizeof(ho), "127.0.0.1:%d", free_port());
    eu_child a, b, cc, o;
    tool_bg(&a, (const char *[]){"--endpoints", eps, "--http", ha, "--ttl", "2s",
                                 "campaign", "fo", "A", NULL});
    ASSERT_OK(eu_child_expect(&a, "fo/", key_a, sizeof(key_a), 10000));
    char *sp = strchr(key_a, ' ');
    if (sp) *sp = 0; /* "KEY VALUE" on one line? the key alone */
    tl_log("A leads as %s", key_a);
    /* A's TTL times the failover; B and C hold longer ones, so that a busy
     * machine's slow fsync (a keepalive unanswered for 1.5 s) cannot cost B
     * its leadership before its metrics are read (seen once in CI beside a
     * coverage build). */
    tool_bg(&b, (const char *[]){"--endpoints", eps, "--http", hb, "--ttl", "6s",
                                 "campaign", "fo", "B", NULL});
    ASSERT(wait_candidates(c, "fo/", 2)); /* B is next in line, then C */
    tool_bg(&cc, (const char *[]){"--endpoints", eps, "--http", hc, "--ttl", "6s",
                                  "campaign", "fo", "C", NULL});
    ASSERT(wait_candidates(c, "fo/", 3));
    tool_bg(&o,
            (const char *[]){"--endpoints", eps, "--http", ho, "observe", "fo", NULL});

    /* The waiting candidates and the observer name A, with A's key. */
    snprintf(want, sizeof(want), "\"key\":\"%s\"", key_a);
    const char *const names_a[] = {want, "\"value\":\"A\"", "\"is_leader\":false",
                                   "\"since_kind\":\"first_seen\"", NULL};
    char *body = wait_leader(hb, 10, names_a);
    ASSERT_NOT_NULL(body);
    tl_log("B: %s", body);
    ASSERT_CONTAINS(body, "\"leader\":true,");
    ASSERT_CONTAINS(body, "\"has_leader\":true}"); /* issue 25: the clearer name */
    ASSERT_CONTAINS(body, "\"token\":");
    free(body);
    ASSERT_NOT_NULL(body = wait_leader(hc, 10, names_a));
    free(body);
    ASSERT_NOT_NULL(body = wait_leader(ho, 10, names_a));
    free(body);
    const char *const a_itself[] = {want, "\"is_leader\":true",
                                    "\"since_kind\":\"elected\"", NULL};
    ASSERT_NOT_NULL(body = wait_leader(ha, 5, a_itself));
    free(body);
    /* Load balancers still see the leader alone. */
    ASSERT_EQ(200, get(&body, ha, "/healthz?leader=1"));
    free(body);
    ASSERT_EQ(503, get(&body, hb, "/healthz?leader=1"));
    free(body);
    ASSERT_EQ(200, get(&body, hb, "/healthz"));
    free(body);

    /* A dies without resigning: B (next in line) takes over when A's lease
     * expires; C and the observer follow. */
    eu_child_kill(&a);
    ASSERT_OK(eu_child_expect(&b, "fo/", key_b, sizeof(key_b), 15000));
    sp = strchr(key_b, ' ');
    if (sp) *sp = 0;
    tl_log("B leads as %s", key_b);
    snprintf(want, sizeof(want), "\"key\":\"%s\"", key_b);
    const char *const b_itself[] = {want, "\"value\":\"B\"", "\"is_leader\":true",
                                    "\"since_kind\":\"elected\"", NULL};
    ASSERT_NOT_NULL(body = wait_leader(hb, 5, b_itself));
    free(body);
    const char *const names_b[] = {want, "\"value\":\"B\"", "\"is_leader\":false",
                                   "\"since_kind\":\"change\"", NULL};
    ASSERT_NOT_NULL(body = wait_leader(hc, 5, names_b));
    tl_log("C after the failover: %s", body);
    free(body);
    ASSERT_NOT_NULL(body = wait_leader(ho, 5, names_b));
    free(body);
    ASSERT_EQ(200, get(&body, hb, "/healthz?leader=1"));
    free(body);
    ASSERT_EQ(503, get(&body, hc, "/healthz?leader=1"));
    free(body);

    /* C's metrics: one change seen, B's token, and the format promtool wants. */
    ASSERT_EQ(200, get(&body, hc, "/metrics"));
    ASSERT_CONTAINS(body, "elector_leader_changes_total{name=\"fo\"} 1\n");
    ASSERT_CONTAINS(body, "elector_is_leader{name=\"fo\"} 0\n");
    ASSERT_CONTAINS(body, "elector_build_info{version=\"");
    ASSERT_NULL(strstr(body, "elector_leader_token{name=\"fo\"} 0\n"));
    ASSERT_NULL(strstr(body, "elector_leader_since_seconds{name=\"fo\"} 0.000\n"));
    ASSERT_CONTAINS(body, "\nprocess_open_fds ");
    ASSERT_CONTAINS(body, "\nprocess_resident_memory_bytes ");
    promtool_metrics(body);
    free(body);
    ASSERT_EQ(200, get(&body, hb, "/metrics"));
    ASSERT_CONTAINS(body, "elector_is_leader{name=\"fo\"} 1\n");
    promtool_metrics(body);
    free(body);

    kill(b.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&b, 10));
    kill(cc.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&cc, 10));
    kill(o.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&o, 10));
    eh_stop(c);
}

/* ---------------------------------------------------------------- systemd */

/* A datagram socket at path, as systemd's notification socket. */
static int notify_socket(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    ASSERT_LT(strlen(path), sizeof(a.sun_path));
    strcpy(a.sun_path, path);
    ASSERT_OK(bind(fd, (struct sockaddr *)&a, sizeof(a)));
    return fd;
}

/* The next message (static buffer) within ms, or NULL. */
static const char *next_msg(int fd, int ms)
{
    static char buf[2048];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0) return NULL;
    ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
    if (n < 0) return NULL;
    buf[n] = 0;
    return buf;
}

/* Reads messages until one contains needle (skipping others; WATCHDOG=1 ones
 * counted in *pings if set, READY=1 ones in *readies); returns it or NULL. */
static const char *expect_msg(int fd, const char *needle, int ms, int *pings,
                              int *readies)
{
    double end = tl_now() + ms / 1000.0;
    const char *m;
    while (tl_now() < end && (m = next_msg(fd, (int)((end - tl_now()) * 1000) + 1))) {
        if (strcmp(m, "WATCHDOG=1") == 0) {
            if (pings) ++*pings;
        } else {
            tl_log("notify: %s", m);
        }
        if (readies && strstr(m, "READY=1")) ++*readies;
        if (strstr(m, needle)) return m;
    }
    return NULL;
}

TEST_WITH_TIMEOUT(sd_notify_ready_status_watchdog_and_stopping, 120)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    char *dir = tl_tmpdir("notify"), path[512], opath[512], envfile[600], key_l[256];
    snprintf(path, sizeof(path), "%s/n.sock", dir);
    snprintf(opath, sizeof(opath), "%s/o.sock", dir);
    snprintf(envfile, sizeof(envfile), "%s/env", dir);
    int fd = notify_socket(path), ofd = notify_socket(opath);

    eu_child l, n, o;
    tool_bg(&l, (const char *[]){"--endpoints", eps, "campaign", "nt", "L", NULL});
    ASSERT_OK(eu_child_expect(&l, "nt/", key_l, sizeof(key_l), 10000));
    char *sp = strchr(key_l, ' ');
    if (sp) *sp = 0;

    /* `run` under a fake systemd: WATCHDOG_USEC 200 ms, so a ping every 100 ms;
     * its command records its environment. */
    char ns[600], wd[64], script[2000];
    snprintf(ns, sizeof(ns), "NOTIFY_SOCKET=%s", path);
    snprintf(wd, sizeof(wd), "WATCHDOG_USEC=200000");
    snprintf(
        script, sizeof(script),
        "trap 'exit 0' TERM; env > %s.tmp; mv %s.tmp %s; while :; do sleep 0.1; done",
        envfile, envfile, envfile);
    const char *set[] = {ns, wd, NULL};
    tool_bg_opts bo = {.set = set, .in_fd = -1};
    tool_bg_ex(&n, &bo,
               (const char *[]){"--endpoints", eps, "run", "nt", "--", "sh", "-c", script,
                                NULL});
    int pings = 0, readies = 0;
    char want[300];
    snprintf(want, sizeof(want), "STATUS=waiting behind the leader %s (token ", key_l);
    const char *m = expect_msg(fd, "READY=1", 10000, &pings, &readies);
    ASSERT_NOT_NULL(m);
    ASSERT_CONTAINS(m, want); /* READY and the status in one message */
    ASSERT_CONTAINS(m, ") for nt");
    /* The watchdog: about 10 pings a second; at least 3 in 2 s is plenty. */
    int before = pings;
    ASSERT_NULL(expect_msg(fd, "never sent", 2000, &pings, &readies));
    tl_log("WATCHDOG=1 messages in 2 s: %d", pings - before);
    ASSERT_GE(pings - before, 3);

    /* L resigns: N leads and says so. */
    kill(l.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&l, 10));
    m = expect_msg(fd, "STATUS=leading nt since ", 10000, &pings, &readies);
    ASSERT_NOT_NULL(m);
    ASSERT_CONTAINS(m, " as nt/");
    ASSERT_CONTAINS(m, " (token ");
    ASSERT_NULL(strstr(m, "READY=1"));
    /* The command does not inherit systemd's variables. */
    ASSERT(wait_file(envfile, 10));
    const char *env = slurp(envfile);
    ASSERT_CONTAINS(env, "ELECTOR_KEY=nt/");
    ASSERT_NULL(strstr(env, "NOTIFY_SOCKET"));
    ASSERT_NULL(strstr(env, "WATCHDOG_USEC"));

    /* An observer: READY at once, with the leader in its status. */
    snprintf(ns, sizeof(ns), "NOTIFY_SOCKET=%s", opath);
    const char *oset[] = {ns, NULL};
    tool_bg_opts oo = {.set = oset, .in_fd = -1};
    tool_bg_ex(&o, &oo, (const char *[]){"--endpoints", eps, "observe", "nt", NULL});
    m = expect_msg(ofd, "READY=1", 10000, NULL, NULL);
    ASSERT_NOT_NULL(m);
    ASSERT_CONTAINS(m, "STATUS=observing nt: leader nt/");
    kill(o.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&o, 10));
    ASSERT_NOT_NULL(expect_msg(ofd, "STOPPING=1", 5000, NULL, NULL));

    /* systemctl stop: STOPPING=1, then the command stops and N resigns. */
    kill(n.pid, SIGTERM);
    ASSERT_NOT_NULL(expect_msg(fd, "STOPPING=1", 10000, &pings, &readies));
    ASSERT_EQ(0, tool_wait(&n, 15));
    ASSERT_EQ(1, readies); /* READY=1 once */
    close(fd);
    close(ofd);
    free(dir);
    eh_stop(c);
}

/* The key under prefix whose value is value (etcdctl's view), in out. */
static void key_of_value(eh_cluster *c, const char *prefix, const char *value, char *out,
                         size_t cap)
{
    char *kv = NULL;
    out[0] = 0;
    ASSERT_EQ(0, eh_etcdctl(c, &kv, "get", "--prefix", prefix, NULL));
    for (char *k = kv; k && *k;) { /* key, value, key, value ... */
        char *v = strchr(k, '\n');
        ASSERT_NOT_NULL(v);
        *v++ = 0;
        char *next = strchr(v, '\n');
        if (next) *next++ = 0;
        if (!strcmp(v, value)) snprintf(out, cap, "%s", k);
        k = next;
    }
    free(kv);
    ASSERT(out[0]);
}

/* STATUS= says what elector waits for: etcd unreachable at start (and its
 * retries), behind a candidate that is not the leader, an observer without a
 * leader; an elector that gives up (--fail-fast) still says STOPPING=1. */
TEST_WITH_TIMEOUT(sd_notify_status_says_what_is_awaited, 60)
{
    char *dir = tl_tmpdir("nstatus"), path[512], ns[600];
    snprintf(path, sizeof(path), "%s/n.sock", dir);
    snprintf(ns, sizeof(ns), "NOTIFY_SOCKET=%s", path);
    int fd = notify_socket(path);
    const char *set[] = {ns, NULL};
    tool_bg_opts bo = {.set = set, .in_fd = -1};
    eu_child u;
    tool_bg_ex(
        &u, &bo,
        (const char *[]){"--endpoints", "127.0.0.1:1", "campaign", "su", "U", NULL});
    const char *m = expect_msg(
        fd, "STATUS=etcd unreachable: retrying to campaign for su (1 failed attempt)",
        10000, NULL, NULL);
    ASSERT_NOT_NULL(m);
    ASSERT_NULL(strstr(m, "READY=1")); /* not ready before etcd is reached */
    ASSERT_NOT_NULL(expect_msg(
        fd, "STATUS=etcd unreachable: retrying to campaign for su (2 failed attempts)",
        10000, NULL, NULL));
    kill(u.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&u, 10));
    ASSERT_NOT_NULL(expect_msg(fd, "STOPPING=1", 5000, NULL, NULL));

    char *out = NULL, *err = NULL;
    ASSERT_EQ(1,
              tool_with_env(&out, &err, (const char *[]){ns, "PATH=/usr/bin:/bin", NULL},
                            (const char *[]){"--endpoints", "127.0.0.1:1", "--fail-fast",
                                             "campaign", "su", "U", NULL}));
    free(out);
    free(err);
    m = expect_msg(fd, "STOPPING=1", 5000, NULL, NULL);
    ASSERT_NOT_NULL(m);
    ASSERT_CONTAINS(m, "STATUS=stopping");
    /* Ended before its loop (run's command cannot be found): STOPPING=1 too. */
    ASSERT_EQ(127,
              tool_with_env(&out, &err, (const char *[]){ns, "PATH=/usr/bin:/bin", NULL},
                            (const char *[]){"--endpoints", "127.0.0.1:1", "run", "su",
                                             "--", "/nonexistent/cmd", NULL}));
    ASSERT_CONTAINS(err, "cannot run /nonexistent/cmd");
    free(out);
    free(err);
    m = expect_msg(fd, "STOPPING=1", 5000, NULL, NULL);
    ASSERT_NOT_NULL(m);
    ASSERT_STREQ("STOPPING=1\nSTATUS=stopping", m);

    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    eu_child o, a, b, w;
    tool_bg_ex(&o, &bo, (const char *[]){"--endpoints", eps, "observe", "su", NULL});
    m = expect_msg(fd, "READY=1", 10000, NULL, NULL);
    ASSERT_NOT_NULL(m);
    ASSERT_CONTAINS(m, "STATUS=observing su: no leader");
    kill(o.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&o, 10));
    ASSERT_NOT_NULL(expect_msg(fd, "STOPPING=1", 5000, NULL, NULL));

    char ka[256], kb[256];
    tool_bg(&a, (const char *[]){"--endpoints", eps, "campaign", "su", "A", NULL});
    ASSERT_OK(eu_child_expect(&a, "su/", ka, sizeof(ka), 10000));
    ka[strcspn(ka, " ")] = 0;
    tool_bg(&b, (const char *[]){"--endpoints", eps, "-w", "json", "campaign", "su", "B",
                                 NULL});
    ASSERT_OK(eu_child_expect(&b, "{\"event\":\"waiting\"", kb, sizeof(kb), 10000));
    char *bkey = NULL;
    {
        const char *k = strstr(kb, "\"key\":\"");
        ASSERT_NOT_NULL(k);
        k += 7;
        bkey = strndup(k, strcspn(k, "\""));
    }
    tool_bg_ex(&w, &bo,
               (const char *[]){"--endpoints", eps, "campaign", "su", "W", NULL});
    char want[600];
    snprintf(want, sizeof(want), "STATUS=waiting behind %s for su; leader %s (token ",
             bkey, ka);
    m = expect_msg(fd, want, 10000, NULL, NULL);
    ASSERT_NOT_NULL(m);
    /* W's key is deleted; W finds out when B, ahead of it, goes: it campaigns
     * again shortly, and says so. */
    char kw[256];
    key_of_value(c, "su/", "W", kw, sizeof(kw));
    ASSERT_EQ(0, eh_etcdctl(c, NULL, "del", kw, NULL));
    kill(b.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&b, 10));
    ASSERT_NOT_NULL(expect_msg(fd,
                               "STATUS=not campaigning: campaigning again for su shortly",
                               10000, NULL, NULL));
    snprintf(want, sizeof(want), "STATUS=waiting behind the leader %s (token ", ka);
    ASSERT_NOT_NULL(expect_msg(fd, want, 10000, NULL, NULL));
    kill(w.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&w, 10));
    kill(a.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&a, 10));
    free(bkey);
    close(fd);
    free(dir);
    eh_stop(c);
}

TEST(a_malformed_notify_socket_is_a_warning_and_the_campaign_goes_on)
{
    eh_cluster *c = start1();
    char *dir = tl_tmpdir("badnotify"), errp[512], line[256];
    snprintf(errp, sizeof(errp), "%s/err", dir);
    const char *set[] = {"NOTIFY_SOCKET=relative/sock", NULL};
    tool_bg_opts bo = {.err_path = errp, .set = set, .in_fd = -1};
    eu_child ch;
    tool_bg_ex(
        &ch, &bo,
        (const char *[]){"--endpoints", eh_endpoints(c), "campaign", "bn", "V", NULL});
    ASSERT_OK(eu_child_expect(&ch, "bn/", line, sizeof(line), 10000)); /* elected */
    ASSERT(
        wait_contains(errp,
                      " warn elector: $NOTIFY_SOCKET 'relative/sock' is not an absolute "
                      "path or an abstract name (@NAME) that fits a unix socket address; "
                      "systemd is not told anything",
                      5));
    kill(ch.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&ch, 10));
    free(dir);
    eh_stop(c);
}

/* ---------------------------------------------------------------- examples */

TEST(example_unit_passes_systemd_analyze_verify)
{
    if (access("/usr/bin/systemd-analyze", X_OK) != 0) {
        tl_log("systemd-analyze not installed (scripts/deps.sh installs systemd): "
               "skipped");
        return;
    }
    /* The example with ExecStart on the elector just built (verify checks that
     * the program exists), and a copy with a mistake, which must be caught. */
    char *src = slurp(EXAMPLES_DIR "/systemd/elector-scheduler.service");
    ASSERT_CONTAINS(src, "ExecStart=/usr/local/bin/elector run ");
    char *dir = tl_tmpdir("unit"), good[512], bad[512];
    snprintf(good, sizeof(good), "%s/elector-scheduler.service", dir);
    snprintf(bad, sizeof(bad), "%s/elector-broken.service", dir);
    FILE *f = fopen(EXAMPLES_DIR "/systemd/elector-scheduler.service", "r");
    FILE *g = fopen(good, "w"), *h = fopen(bad, "w");
    ASSERT(f && g && h);
    char line[1024];
    while (fgets(line, sizeof(line), f)) {
        const char *p = line;
        char fixed[1200];
        if (strncmp(line, "ExecStart=/usr/local/bin/elector ", 33) == 0) {
            snprintf(fixed, sizeof(fixed), "ExecStart=%s %s", ELECTOR_BIN, line + 33);
            p = fixed;
        }
        fputs(p, g);
        fputs(strncmp(line, "WatchdogSec=", 12) == 0 ? "WatchdogSecs=30s\n" : p, h);
    }
    fclose(f);
    fclose(g);
    fclose(h);
    tl_run_opts ro = {.merge_stderr = 1};
    char *out = NULL;
    int rc =
        tl_run_ex(&out, (const char *[]){"systemd-analyze", "verify", good, NULL}, &ro);
    tl_log("systemd-analyze verify: exit %d: %s", rc, out);
    if (out && strstr(out, "System has not been booted with systemd")) {
        tl_log("systemd-analyze cannot run here: skipped");
        free(out);
        free(dir);
        return;
    }
    ASSERT_EQ(0, rc);
    /* Warnings (an unknown key, a bad value) name the file; none may. */
    ASSERT_NULL(strstr(out, "elector-scheduler.service"));
    free(out);
    out = NULL;
    rc = tl_run_ex(&out, (const char *[]){"systemd-analyze", "verify", bad, NULL}, &ro);
    tl_log("the broken copy: exit %d: %s", rc, out);
    ASSERT_CONTAINS(out, "elector-broken.service");
    ASSERT_CONTAINS(out, "WatchdogSecs");
    free(out);
    free(dir);
}

TEST(example_alert_rules_pass_promtool)
{
    if (access("/usr/bin/promtool", X_OK) != 0) {
        tl_log("promtool not installed (scripts/deps.sh installs prometheus): skipped");
        return;
    }
    tl_run_opts ro = {.merge_stderr = 1};
    char *out = NULL;
    int rc =
        tl_run_ex(&out,
                  (const char *[]){"promtool", "check", "rules",
                                   EXAMPLES_DIR "/prometheus/elector-alerts.yml", NULL},
                  &ro);
    tl_log("promtool check rules: exit %d: %s", rc, out);
    ASSERT_EQ(0, rc);
    ASSERT_CONTAINS(out, "SUCCESS: 4 rules found");
    free(out);
    /* The rules fire when they should, against made-up series. */
    out = NULL;
    rc = tl_run_ex(&out,
                   (const char *[]){"promtool", "test", "rules",
                                    EXAMPLES_DIR "/prometheus/elector-alerts.test.yml",
                                    NULL},
                   &ro);
    tl_log("promtool test rules: exit %d: %s", rc, out);
    ASSERT_EQ(0, rc);
    ASSERT_CONTAINS(out, "SUCCESS");
    free(out);
}

/* --health-cmd with --http: /healthz says the check's state under the session's
 * status. */
TEST(healthz_shows_the_health_check)
{
    eh_cluster *c = start1();
    char addr[64], line[256];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", free_port());
    eu_child a;
    tool_bg(&a, (const char *[]){"--endpoints", eh_endpoints(c), "--http", addr,
                                 "campaign", "hz", "v", "--health-cmd", "true",
                                 "--health-interval", "200ms", NULL});
    ASSERT_OK(eu_child_expect(&a, "hz/", line, sizeof(line), 10000));
    char *body = NULL;
    double end = tl_now() + 10;
    for (;;) {
        ASSERT_EQ(200, get(&body, addr, "/healthz"));
        if (!strcmp(body, "ok\nhealth: healthy\n")) break;
        tl_log("/healthz: %s", body);
        free(body);
        ASSERT_LT(tl_now(), end);
        tl_msleep(100);
    }
    free(body);
    kill(a.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&a, 10));
    eh_stop(c);
}

/* ---------------------------------------------------------------- switchover */

/* Keys under prefix, as etcdctl counts them. */
static int count_keys(eh_cluster *c, const char *prefix)
{
    char *out = NULL;
    ASSERT_EQ(0, eh_etcdctl(c, &out, "get", "--prefix", prefix, "--keys-only", NULL));
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

static void wait_keys(eh_cluster *c, const char *prefix, int n)
{
    double end = tl_now() + 15;
    while (count_keys(c, prefix) != n) {
        ASSERT_LT(tl_now(), end);
        tl_msleep(50);
    }
}

/* switchover's answers besides a handover: the leader already leading in -w
 * json (as `leader -w json` prints it), a value two candidates share, a
 * request already under way (refused, the other one left alone), and a stop
 * signal while waiting for the target (the request withdrawn, exit 1). */
TEST_WITH_TIMEOUT(switchover_json_duplicates_a_request_under_way_and_a_signal, 90)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    eu_child a, b, d;
    char line[256];
    tool_bg(&a, (const char *[]){"--endpoints", eps, "campaign", "sx", "v0", NULL});
    ASSERT_OK(eu_child_expect(&a, "sx/", line, sizeof(line), 10000));
    tool_bg(&b, (const char *[]){"--endpoints", eps, "campaign", "sx", "v1", NULL});
    wait_keys(c, "sx/", 2);
    wait_keys(c, "__elector/candidates/sx/", 2);

    char *out = NULL, *err = NULL;
    ASSERT_EQ(0, tool(&out, &err,
                      (const char *[]){"--endpoints", eps, "-w", "json", "switchover",
                                       "sx", "--to", "v0", NULL}));
    ASSERT_CONTAINS(err, "switchover: v0 already leads sx");
    ASSERT(!strncmp(out, "{\"event\":\"leader\",\"name\":\"sx\",\"key\":\"sx/", 40));
    ASSERT_CONTAINS(out, "\"value\":\"v0\"");
    ASSERT_CONTAINS(out, "\"token\":");
    ASSERT_EQ(1, json_check_text(out)); /* the events' schema */
    free(out);
    free(err);

    tool_bg(&d, (const char *[]){"--endpoints", eps, "campaign", "sx", "v1", NULL});
    wait_keys(c, "sx/", 3);
    ASSERT_EQ(5, tool(&out, &err,
                      (const char *[]){"--endpoints", eps, "switchover", "sx", "--to",
                                       "v1", NULL}));
    ASSERT_CONTAINS(err, "switchover: 2 candidates of sx have the value 'v1': give each "
                         "candidate a value of its own (--value)");
    free(out);
    free(err);
    kill(d.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&d, 10));
    wait_keys(c, "sx/", 2);

    /* Another request is there (its target is no candidate: nobody moves). */
    ASSERT_EQ(0,
              eh_etcdctl(c, NULL, "put", "__elector/switchover/sx", "7 sx/other", NULL));
    ASSERT_EQ(5, tool(&out, &err,
                      (const char *[]){"--endpoints", eps, "switchover", "sx", "--to",
                                       "v1", NULL}));
    ASSERT_CONTAINS(err, "switchover: another switchover of sx is under way "
                         "(__elector/switchover/sx holds '7 sx/other'); try again when "
                         "it is over");
    free(out);
    free(err);
    ASSERT_EQ(1, count_keys(c, "__elector/switchover/sx")); /* not ours to remove */
    ASSERT_EQ(0, eh_etcdctl(c, NULL, "del", "__elector/switchover/sx", NULL));

    /* The target is stopped: v0 steps back, v1's key is first but v1 does not
     * confirm: at the deadline that is said (exit 7). SIGTERM ends a wait and
     * withdraws the request (exit 1). */
    ASSERT_OK(kill(b.pid, SIGSTOP));
    ASSERT_EQ(7, tool(&out, &err,
                      (const char *[]){"--endpoints", eps, "switchover", "sx", "--to",
                                       "v1", "--timeout", "1500ms", NULL}));
    ASSERT_CONTAINS(err, "switchover: handed over; v1 did not take over within ");
    ASSERT_CONTAINS(err, "(its key is first, but its process has not confirmed: stopped, "
                         "or cut off from etcd?); the next in line is v0 (sx/");
    free(out);
    free(err);
    ASSERT_EQ(0, count_keys(c, "__elector/switchover/sx"));
    eu_child s;
    char *dir = tl_tmpdir("swsig"), errp[512];
    snprintf(errp, sizeof(errp), "%s/err", dir);
    tool_bg_opts bo = {.err_path = errp, .in_fd = -1};
    /* Back to v0: v1, now first, is stopped and cannot step back. etcd not
     * answering for a while is said and the wait goes on. */
    tool_bg_ex(&s, &bo,
               (const char *[]){"--endpoints", eps, "--dial-timeout", "500ms",
                                "--command-timeout", "500ms", "switchover", "sx", "--to",
                                "v0", "--timeout", "30s", NULL});
    ASSERT(wait_contains(errp, "switchover: asking the candidates ahead of sx/", 10));
    ASSERT_OK(eh_member_pause(c, 0));
    bool said =
        wait_contains(errp, "warn elector: switchover: cannot read the election (", 10);
    ASSERT_OK(eh_member_resume(c, 0));
    ASSERT(said);
    ASSERT(wait_contains(errp, "); trying again", 1));
    tl_msleep(300);
    ASSERT(pid_alive(s.pid));
    kill(s.pid, SIGTERM);
    ASSERT_EQ(1, tool_wait(&s, 10));
    ASSERT(wait_contains(errp, "switchover: Terminated received: withdrawing the request",
                         1));
    ASSERT_EQ(0, count_keys(c, "__elector/switchover/sx"));

    /* The target's key goes while it waits behind the stopped v1: it left the
     * election, refused (exit 5). */
    tool_bg_ex(&s, &bo,
               (const char *[]){"--endpoints", eps, "switchover", "sx", "--to", "v0",
                                "--timeout", "30s", NULL});
    ASSERT(wait_contains(errp, "switchover: asking the candidates ahead of sx/", 10));
    char ka[128];
    key_of_value(c, "sx/", "v0", ka, sizeof(ka));
    ASSERT_EQ(0, eh_etcdctl(c, NULL, "del", ka, NULL));
    ASSERT_EQ(5, tool_wait(&s, 10));
    char want[256];
    snprintf(want, sizeof(want),
             "error elector: switchover: the target %s left the election", ka);
    ASSERT(wait_contains(errp, want, 1));
    ASSERT_EQ(0, count_keys(c, "__elector/switchover/sx"));
    ASSERT_OK(kill(b.pid, SIGCONT));
    kill(b.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&b, 10));
    /* v0 learns that its key is gone when the one ahead of it goes: a waiter
     * campaigns again, and is elected. */
    ASSERT_OK(eu_child_expect(&a, "sx/", line, sizeof(line), 10000));
    kill(a.pid, SIGTERM);
    ASSERT_EQ(0, tool_wait(&a, 10));
    free(dir);
    eh_stop(c);
    /* etcd unreachable: an error at once, with the hint. */
    ASSERT_EQ(1, tool(&out, &err,
                      (const char *[]){"--endpoints", "127.0.0.1:1", "switchover", "sx",
                                       "--to", "v1", NULL}));
    ASSERT_CONTAINS(err, "error elector: switchover: cannot read the election: ");
    ASSERT_CONTAINS(err, "; check --endpoints");
    free(out);
    free(err);
}
