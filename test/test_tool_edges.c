/* SPDX-License-Identifier: MIT */
/* The elector tool at the edges of its main loop, as a process: settings that
 * fail before etcd is asked (a closed --events-fd, DNS discovery that finds
 * nothing), the debug line of the settings, --no-wait for campaign and run,
 * the release helper named in the debug log, a ^C while the resign of a
 * waiting campaign hangs on a stopped etcd, lock -n N and observe with etcd
 * away, switchover requests that are no requests or go to a foreign target,
 * systemd's STATUS= for a long key. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
#include "testlib.h"
#include "tool_util.h"

static int count_keys(const char *eps, const char *name)
{
    char prefix[128];
    snprintf(prefix, sizeof(prefix), "%s/", name);
    char *out = NULL;
    ASSERT_EQ(0, tl_run(&out, (const char *[]){"etcdctl", "--endpoints", eps, "get",
                                               "--prefix", prefix, "--keys-only", NULL}));
    int n = 0;
    for (char *line = out; line && *line;) {
        char *nl = strchr(line, '\n');
        if (!strncmp(line, prefix, strlen(prefix))) n++;
        line = nl ? nl + 1 : NULL;
    }
    free(out);
    return n;
}

/* ---------------------------------------------------------------- no etcd */

TEST(events_fd_that_is_not_open_is_refused_before_campaigning)
{
    char *out = NULL, *err = NULL;
    ASSERT_EQ(2,
              tool(&out, &err,
                   (const char *[]){"-w", "json", "run", "N", "--events-fd", "99",
                                    "--endpoints", "127.0.0.1:1", "--", "true", NULL}));
    ASSERT_STREQ("", out);
    ASSERT_CONTAINS(err, " error elector: --events-fd 99: Bad file descriptor\n");
    ASSERT(!strstr(err, "campaign"));
    free(out);
    free(err);
}

TEST(debug_log_says_the_settings_and_where_the_password_came_from)
{
    char *out = NULL, *err = NULL;
    const char *env[] = {"ELECTOR_PASSWORD=secret", "ETCDCTL_DIAL_TIMEOUT=300ms", NULL};
    ASSERT_EQ(1, tool_with_env(&out, &err, env,
                               (const char *[]){"--debug", "--user", "u", "leader", "N",
                                                "--endpoints", "127.0.0.1:1", NULL}));
    ASSERT_CONTAINS(err, " debug elector: elector ");
    ASSERT_CONTAINS(err,
                    ": endpoints 127.0.0.1:1, dial timeout 300 ms, request timeout ");
    ASSERT_CONTAINS(err, "TTL 10 s, user u (password from $ELECTOR_PASSWORD)\n");
    ASSERT_CONTAINS(err, " debug elector: from the environment: ELECTOR_PASSWORD "
                         "ETCDCTL_DIAL_TIMEOUT\n");
    ASSERT(!strstr(err, "secret"));
    free(out);
    free(err);
    /* Without --endpoints: etcd's default address is named. */
    ASSERT_EQ(1, tool_with_env(&out, &err, (const char *[]){NULL},
                               (const char *[]){"--debug", "--ttl", "7", "leader", "N",
                                                "--dial-timeout", "200ms", "--endpoints",
                                                "127.0.0.1:1", NULL}));
    ASSERT_CONTAINS(err, "TTL 7 s, user (none)\n");
    free(out);
    free(err);
}

/* DNS discovery in a network namespace of its own (only a loopback that is
 * down): no DNS server is reachable, the lookup fails at once, exit 1. */
TEST(discovery_that_finds_no_records_exits_1)
{
    if (tl_run(NULL, (const char *[]){"unshare", "--net", "true", NULL}) != 0)
        tl_skip("cannot make a network namespace here (unshare --net)");
    char *out = NULL, *err = NULL;
    tl_run_opts ro = {.merge_stderr = 1};
    int rc = tl_run_ex(&out,
                       (const char *[]){"unshare", "--net", ELECTOR_BIN, "-d",
                                        "elector-test.invalid", "leader", "N", NULL},
                       &ro);
    tl_log("exit %d: %s", rc, out);
    ASSERT_EQ(1, rc);
    ASSERT_CONTAINS(out, " error elector: --discovery-srv elector-test.invalid: no SRV "
                         "records for the members of elector-test.invalid "
                         "(_etcd-client-ssl._tcp.elector-test.invalid: ");
    ASSERT_CONTAINS(out, "; _etcd-client._tcp.elector-test.invalid: ");
    free(out);
    free(err);
}

/* lock -n N with etcd unreachable: each slot's session fails, one line says
 * so (not one per slot); --fail-fast exits 1, else it retries until stopped
 * (a lock not taken: exit 1). systemd's socket is set: a semaphore follows no
 * leader. */
TEST(semaphore_with_etcd_unreachable_says_it_once)
{
    char *out = NULL, *err = NULL;
    const char *env[] = {"NOTIFY_SOCKET=@elector-test-edges-none", NULL};
    ASSERT_EQ(1, tool_with_env(&out, &err, env,
                               (const char *[]){"lock", "L", "-n", "3", "--fail-fast",
                                                "--endpoints", "127.0.0.1:1", NULL}));
    ASSERT_STREQ("", out);
    const char *line = " error elector: cannot start a session: cannot grant lease: "
                       "endpoint 127.0.0.1:1: connect: Connection refused";
    const char *first = strstr(err, line);
    ASSERT_NOT_NULL(first);
    ASSERT_NULL(strstr(first + 1, line));
    free(out);
    free(err);

    char *dir = tl_tmpdir("semfail"), errp[512];
    snprintf(errp, sizeof(errp), "%s/err", dir);
    eu_child w;
    tool_bg_ex(
        &w, &(tool_bg_opts){.err_path = errp, .in_fd = -1},
        (const char *[]){"lock", "L", "-n", "2", "--endpoints", "127.0.0.1:1", NULL});
    ASSERT(wait_contains(errp, "etcd unreachable; retrying in ", 10));
    ASSERT_OK(kill(w.pid, SIGTERM));
    ASSERT_EQ(1, tool_wait(&w, 10));
    char *text = slurp(errp);
    const char *one = "(attempt 1; --fail-fast to exit instead)\n";
    first = strstr(text, one);
    ASSERT_NOT_NULL(first);
    ASSERT_NULL(strstr(first + 1, one)); /* one line for both slots */
    ASSERT_CONTAINS(text, " error elector: interrupted while waiting for the lock L: not "
                          "acquired (exit 1)\n");
    free(dir);
}

/* observe with etcd unreachable at start retries with backoff, attempt after
 * attempt; before its first answer a stop signal just ends it (the default
 * action: nothing to resign). */
TEST(observe_retries_while_etcd_is_unreachable)
{
    char *dir = tl_tmpdir("obsretry"), errp[512];
    snprintf(errp, sizeof(errp), "%s/err", dir);
    eu_child w;
    tool_bg_ex(&w, &(tool_bg_opts){.err_path = errp, .in_fd = -1},
               (const char *[]){"observe", "N", "--endpoints", "127.0.0.1:1", NULL});
    ASSERT(wait_contains(errp,
                         " warn elector: cannot observe (cannot connect to etcd): etcd "
                         "unreachable; retrying in ",
                         10));
    ASSERT(wait_contains(errp, "s (attempt 2; --fail-fast to exit instead)\n", 10));
    ASSERT_OK(kill(w.pid, SIGTERM));
    ASSERT_EQ(128 + SIGTERM, tool_wait(&w, 10));
    free(dir);
}

/* ---------------------------------------------------------------- etcd */

/* --no-wait of campaign and run (lock's is test_tool_newcomer's): exit 6, the
 * reason, no key left, run's command not started. The holder runs with
 * --debug and the release helper: the log names the helper's pid. */
TEST_WITH_TIMEOUT(no_wait_for_campaign_and_run_while_another_leads, 60)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    char *dir = tl_tmpdir("nowait"), errp[512], helper[600], line[256];
    snprintf(errp, sizeof(errp), "%s/holder.err", dir);
    snprintf(helper, sizeof(helper), "ELECTOR_RELEASE_HELPER=%s", RELEASE_HELPER_BIN);
    const char *set[] = {helper, NULL};
    eu_child h;
    tool_bg_ex(
        &h, &(tool_bg_opts){.err_path = errp, .set = set, .in_fd = -1},
        (const char *[]){"--endpoints", eps, "--debug", "campaign", "svc", "a", NULL});
    ASSERT_OK(eu_child_expect(&h, "svc/", line, sizeof(line), 15000));
    ASSERT(wait_contains(errp, " debug elector: release helper: pid ", 10));
    ASSERT(wait_contains(errp, " revokes the lease if elector dies\n", 1));

    char *out = NULL, *err = NULL;
    ASSERT_EQ(6, tool(&out, &err,
                      (const char *[]){"--endpoints", eps, "campaign", "svc", "b",
                                       "--no-wait", NULL}));
    ASSERT_STREQ("", out);
    ASSERT_CONTAINS(err, " error elector: not elected for svc (gave up): --no-wait: "
                         "another leads (exit 6)\n");
    free(out);
    free(err);
    ASSERT_EQ(6, tool(&out, &err,
                      (const char *[]){"--endpoints", eps, "run", "svc", "--no-wait",
                                       "--", "echo", "ran", NULL}));
    ASSERT_STREQ("", out);
    ASSERT_CONTAINS(err, "not elected for svc (gave up): --no-wait: another leads; not "
                         "started: echo (exit 6)\n");
    free(out);
    free(err);
    ASSERT_EQ(1, count_keys(eps, "svc"));
    ASSERT_OK(kill(h.pid, SIGTERM));
    ASSERT_EQ(0, tool_wait(&h, 20));
    ASSERT_EQ(0, count_keys(eps, "svc"));
    free(dir);
    eh_stop(c);
}

/* A waiting candidate is stopped (SIGTERM) while etcd is stopped: its resign
 * (the delete of its key) cannot complete; a ^C then ends elector at once
 * instead of after the request timeout (30 s here). */
TEST_WITH_TIMEOUT(second_interrupt_ends_a_resign_that_hangs, 60)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    char *dir = tl_tmpdir("twice"), errp[512], line[256];
    snprintf(errp, sizeof(errp), "%s/waiter.err", dir);
    eu_child h, w;
    tool_bg(&h, (const char *[]){"--endpoints", eps, "campaign", "svc", "a", NULL});
    ASSERT_OK(eu_child_expect(&h, "svc/", line, sizeof(line), 15000));
    tool_bg_ex(&w, &(tool_bg_opts){.err_path = errp, .in_fd = -1},
               (const char *[]){"--endpoints", eps, "--command-timeout", "30s",
                                "campaign", "svc", "b", NULL});
    ASSERT(wait_contains(errp, "waiting behind svc/", 15));
    ASSERT_OK(eh_member_pause(c, 0));
    ASSERT_OK(kill(w.pid, SIGTERM));
    ASSERT(wait_contains(
        errp, "interrupted while waiting: never elected for svc (exit 0)", 10));
    tl_msleep(300);
    ASSERT(pid_alive(w.pid)); /* the resign waits for etcd */
    double t0 = tl_now();
    ASSERT_OK(kill(w.pid, SIGINT));
    int rc = tool_wait(&w, 15);
    double dt = tl_now() - t0;
    tl_log("second ^C: exit %d after %.2f s", rc, dt);
    ASSERT_EQ(0, rc);
    ASSERT_LT(dt, 10.0); /* the session's close waits 2 s at most; 30 s without */
    ASSERT_OK(eh_member_resume(c, 0));
    eu_child_kill(&h);
    free(dir);
    eh_stop(c);
}

static void put_request(const char *eps, const char *value)
{
    ASSERT_EQ(0, tl_run(NULL, (const char *[]){"etcdctl", "--endpoints", eps, "put",
                                               "__elector/switchover/svc", value, NULL}));
}

static int count_in(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0; /* not written yet */
    static char text[1 << 20];
    size_t len = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[len] = 0;
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* A request key with a value that is no request ("<token> <key>") is ignored
 * by the candidates; a request naming a key behind the leader asks nothing of
 * it; a target that is no elector candidate (`etcdctl elect`) can be handed
 * over to, but cannot confirm: exit 7. */
TEST_WITH_TIMEOUT(switchover_requests_malformed_and_to_a_foreign_target, 60)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    char *dir = tl_tmpdir("swedge"), errp[512], line[256];
    snprintf(errp, sizeof(errp), "%s/leader.err", dir);
    eu_child h;
    tool_bg_ex(
        &h, &(tool_bg_opts){.err_path = errp, .in_fd = -1},
        (const char *[]){"--endpoints", eps, "--debug", "campaign", "svc", "a", NULL});
    ASSERT_OK(eu_child_expect(&h, "svc/", line, sizeof(line), 15000));
    static const char *bad[] = {"abc", "0 svc/x", "12", "12x svc/x",
                                "99999999999999999999 svc/x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        put_request(eps, bad[i]);
    put_request(eps, "1 svc/old");
    ASSERT(wait_contains(
        errp, " info elector: switchover requested: to svc/old (token 1)\n", 10));
    ASSERT_EQ(1, count_in(errp, "switchover requested"));
    ASSERT_EQ(0, tl_run(NULL, (const char *[]){"etcdctl", "--endpoints", eps, "del",
                                               "__elector/switchover/svc", NULL}));
    ASSERT(wait_contains(errp, " debug elector: switchover request withdrawn\n", 10));
    ASSERT_EQ(0, count_in(errp, "resigning"));

    int fd;
    pid_t el = tl_spawn(
        (const char *[]){"etcdctl", "--endpoints", eps, "elect", "svc", "foreign", NULL},
        &fd);
    ASSERT_GT(el, 0);
    tl_msleep(500); /* its key behind ours */
    char *out = NULL, *err = NULL;
    int rc = tool(&out, &err,
                  (const char *[]){"--endpoints", eps, "--ttl", "5", "switchover", "svc",
                                   "--to", "foreign", "--timeout", "10s", NULL});
    tl_log("exit %d: %s", rc, err);
    ASSERT_EQ(7, rc);
    ASSERT_CONTAINS(err, " warn elector: switchover: the target svc/");
    ASSERT_CONTAINS(err, " takes no switchover requests (no key under "
                         "__elector/candidates/svc/): it cannot confirm that it took "
                         "over\n");
    ASSERT_CONTAINS(err, "'s key is first, but it takes no switchover requests");
    /* a, back in line, or nobody if the look came before its new key. */
    ASSERT_CONTAINS(err, "so its taking over cannot be confirmed; the next in line is ");
    ASSERT_STREQ("", out);
    free(out);
    free(err);
    ASSERT(wait_contains(errp, "switchover: the target is next in line: resigning", 10));
    /* The request is withdrawn: the old leader campaigns again, behind. */
    ASSERT(wait_contains(errp, "waiting behind svc/", 10));
    tl_reap(el, SIGKILL, 5); /* its key stays until its lease's TTL */
    close(fd);
    ASSERT_OK(kill(h.pid, SIGTERM));
    ASSERT_EQ(0, tool_wait(&h, 20));
    free(dir);
    eh_stop(c);
}

/* A datagram socket at path for $NOTIFY_SOCKET; 2 s receive timeout. */
static int notify_socket(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    ASSERT_LT(strlen(path), sizeof(a.sun_path));
    memcpy(a.sun_path, path, strlen(path) + 1);
    ASSERT_OK(bind(fd, (struct sockaddr *)&a, sizeof(a)));
    struct timeval tv = {.tv_sec = 2};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

/* systemd's STATUS= with an election name too long for it: the key is cut at
 * 100 bytes with "..."; -w json switchover to a leader whose value is empty
 * (a lock's): it leads already, the event says so with "value":"" (before:
 * memcmp on the value's NULL data, undefined; UBSan stopped elector, exit 1);
 * observe of a lock that passes to another holder: both keys printed. */
TEST_WITH_TIMEOUT(status_cuts_long_keys_and_json_leader_with_an_empty_value, 60)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    char *dir = tl_tmpdir("edgestat"), path[512], ns[600], name[130], line[512];
    snprintf(path, sizeof(path), "%s/notify.sock", dir);
    snprintf(ns, sizeof(ns), "NOTIFY_SOCKET=%s", path);
    int fd = notify_socket(path);
    memset(name, 'n', 120);
    name[120] = 0;
    const char *set[] = {ns, NULL};
    eu_child h, l;
    tool_bg_ex(&h, &(tool_bg_opts){.set = set, .in_fd = -1},
               (const char *[]){"--endpoints", eps, "campaign", name, "v", NULL});
    ASSERT_OK(eu_child_expect(&h, name, line, sizeof(line), 15000));
    char want[200];
    snprintf(want, sizeof(want), "STATUS=leading %s since ", name);
    char msg[1024] = "";
    double until = tl_now() + 10;
    while (!strstr(msg, want) && tl_now() < until) {
        ssize_t n = recv(fd, msg, sizeof(msg) - 1, 0);
        msg[n > 0 ? n : 0] = 0;
    }
    tl_log("%s", msg);
    ASSERT_CONTAINS(msg, want);
    const char *as = strstr(msg, " as ");
    ASSERT_NOT_NULL(as);
    ASSERT_EQ(0, strncmp(as + 4, name, 100)); /* 100 bytes of the key, then "..." */
    ASSERT_EQ(0, strncmp(as + 4 + 100, "... (token ", 11));
    ASSERT_OK(kill(h.pid, SIGTERM));
    ASSERT_EQ(0, tool_wait(&h, 20));
    close(fd);

    tool_bg(&l, (const char *[]){"--endpoints", eps, "lock", "L", NULL});
    ASSERT_OK(eu_child_expect(&l, "L/", line, sizeof(line), 15000));
    char *out = NULL, *err = NULL;
    int rc = tool(&out, &err,
                  (const char *[]){"--endpoints", eps, "-w", "json", "switchover", "L",
                                   "--to", "", NULL});
    tl_log("switchover L --to '': exit %d: %s", rc, err);
    ASSERT_EQ(0, rc);
    ASSERT_CONTAINS(out, "{\"event\":\"leader\",\"name\":\"L\",\"key\":\"L/");
    ASSERT_CONTAINS(out, ",\"value\":\"\",\"value_base64\":\"\",");
    ASSERT_CONTAINS(err,
                    "switchover: the candidate with the empty value already leads L\n");
    free(out);
    free(err);
    /* observe: the lock passes to another holder, a key of the same length
     * with the same empty value; both are printed (key, empty line). */
    eu_child ob, l2;
    tool_bg(&ob, (const char *[]){"--endpoints", eps, "observe", "L", NULL});
    ASSERT_OK(eu_child_expect(&ob, "L/", line, sizeof(line), 15000));
    char first[512];
    snprintf(first, sizeof(first), "%s", line);
    tool_bg(&l2, (const char *[]){"--endpoints", eps, "lock", "L", NULL});
    tl_msleep(300); /* waiting behind l */
    ASSERT_OK(kill(l.pid, SIGTERM));
    ASSERT_EQ(0, tool_wait(&l, 20));
    ASSERT_OK(eu_child_expect(&l2, "L/", line, sizeof(line), 15000));
    char second[512];
    snprintf(second, sizeof(second), "%s", line);
    ASSERT(strcmp(first, second) != 0);
    ASSERT_EQ(strlen(first), strlen(second));
    ASSERT_OK(eu_child_expect(&ob, second, line, sizeof(line), 15000));
    ASSERT_OK(kill(ob.pid, SIGTERM));
    ASSERT_EQ(0, tool_wait(&ob, 20));
    ASSERT_OK(kill(l2.pid, SIGTERM));
    ASSERT_EQ(0, tool_wait(&l2, 20));
    free(dir);
    eh_stop(c);
}

/* run --restart whose key is deleted from outside: the command is killed at
 * once (a successor may lead), and elector, not leading, campaigns again
 * after the pause instead of exiting 3; elected again, the command runs again. */
TEST_WITH_TIMEOUT(restart_after_an_outside_delete_campaigns_again, 60)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    char *dir = tl_tmpdir("rsdel"), errp[512], cmd[600];
    snprintf(errp, sizeof(errp), "%s/err", dir);
    snprintf(cmd, sizeof(cmd), "echo run >> %s/runs; exec sleep 100", dir);
    eu_child r;
    tool_bg_ex(&r, &(tool_bg_opts){.err_path = errp, .in_fd = -1},
               (const char *[]){"--endpoints", eps, "run", "rs", "--restart", "--", "sh",
                                "-c", cmd, NULL});
    ASSERT(wait_contains(errp, "elected: rs/", 15));
    char runs[600];
    snprintf(runs, sizeof(runs), "%s/runs", dir);
    ASSERT(wait_contains(runs, "run\n", 10));
    char *key = NULL;
    ASSERT_EQ(0, eh_etcdctl(c, &key, "get", "--prefix", "--keys-only", "rs/", NULL));
    key[strcspn(key, "\n")] = 0;
    ASSERT_OK(eh_etcdctl(c, NULL, "del", key, NULL));
    ASSERT(wait_contains(errp,
                         " warn elector: our key is gone: killing sh and its "
                         "descendants at once\n",
                         10));
    ASSERT(wait_contains(errp, " info elector: campaigning again in ", 10));
    ASSERT(wait_contains(runs, "run\nrun\n", 15)); /* elected again, started again */
    ASSERT(pid_alive(r.pid));
    ASSERT_OK(kill(r.pid, SIGTERM));
    ASSERT_EQ(0, tool_wait(&r, 20));
    free(key);
    free(dir);
    eh_stop(c);
}

/* switchover in an election whose NAME is longer than 1 KiB: the leader checks
 * that the target is next in line and steps down (before: a fixed buffer of
 * 1024 bytes for the range end, the check silently skipped, the leader never
 * stepped down and the switchover timed out, exit 6). */
TEST_WITH_TIMEOUT(switchover_in_an_election_with_a_long_name, 60)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    char *name = malloc(1101), want[1200], line[2048];
    ASSERT_NOT_NULL(name);
    memset(name, 'w', 1100);
    name[1100] = 0;
    eu_child a, b;
    tool_bg(&a, (const char *[]){"--endpoints", eps, "campaign", name, "va", NULL});
    ASSERT_OK(eu_child_expect(&a, name, line, sizeof(line), 15000));
    tool_bg(&b, (const char *[]){"--endpoints", eps, "campaign", name, "vb", NULL});
    tl_msleep(500); /* b waits behind a */
    char *out = NULL, *err = NULL;
    double t0 = tl_now();
    int rc = tool(&out, &err,
                  (const char *[]){"--endpoints", eps, "switchover", name, "--to", "vb",
                                   "--timeout", "8s", NULL});
    tl_log("exit %d after %.1f s", rc, tl_now() - t0);
    ASSERT_EQ(0, rc);
    snprintf(want, sizeof(want), "%s/", name);
    ASSERT_EQ(0, strncmp(out, want, strlen(want)));
    ASSERT_CONTAINS(out, "\nvb\n");
    ASSERT_OK(eu_child_expect(&b, name, line, sizeof(line), 15000)); /* b elected */
    free(out);
    free(err);
    ASSERT_OK(kill(a.pid, SIGTERM));
    ASSERT_OK(kill(b.pid, SIGTERM));
    ASSERT_EQ(0, tool_wait(&a, 20));
    ASSERT_EQ(0, tool_wait(&b, 20));
    free(name);
    eh_stop(c);
}

/* Keys under prefix, as etcdctl lists them. */
static int keys_under(const char *eps, const char *prefix)
{
    char *out = NULL;
    ASSERT_EQ(0, tl_run(&out, (const char *[]){"etcdctl", "--endpoints", eps, "get",
                                               "--prefix", prefix, "--keys-only", NULL}));
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

/* A switchover waits for a target that cannot confirm (stopped); etcd stops
 * answering for longer than the request's TTL: the request's lease is gone,
 * switchover says so and exits 1 instead of waiting out --timeout. */
TEST_WITH_TIMEOUT(switchover_whose_request_lease_is_lost_exits_1, 60)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    char *dir = tl_tmpdir("swlease"), errp[512], line[256];
    snprintf(errp, sizeof(errp), "%s/err", dir);
    eu_child a, b, s;
    tool_bg(&a, (const char *[]){"--endpoints", eps, "campaign", "sl", "v0", NULL});
    ASSERT_OK(eu_child_expect(&a, "sl/", line, sizeof(line), 15000));
    tool_bg(&b, (const char *[]){"--endpoints", eps, "campaign", "sl", "v1", NULL});
    double end = tl_now() + 15;
    while (keys_under(eps, "__elector/candidates/sl/") != 2) {
        ASSERT_LT(tl_now(), end);
        tl_msleep(50);
    }
    ASSERT_OK(kill(b.pid, SIGSTOP)); /* it will be first, and never confirm */
    tool_bg_ex(&s, &(tool_bg_opts){.err_path = errp, .in_fd = -1},
               (const char *[]){"--endpoints", eps, "--dial-timeout", "500ms",
                                "--command-timeout", "500ms", "--ttl", "2", "switchover",
                                "sl", "--to", "v1", "--timeout", "30s", NULL});
    ASSERT(wait_contains(errp, "is first in line; waiting for it to confirm", 10));
    ASSERT_OK(eh_member_pause(c, 0));
    bool said = wait_contains(
        errp, " error elector: switchover: the request's lease was lost\n", 15);
    ASSERT_OK(eh_member_resume(c, 0));
    ASSERT(said);
    ASSERT_EQ(1, tool_wait(&s, 15));
    ASSERT_OK(kill(b.pid, SIGCONT));
    ASSERT_OK(kill(a.pid, SIGTERM));
    ASSERT_OK(kill(b.pid, SIGTERM));
    ASSERT_EQ(0, tool_wait(&a, 20));
    ASSERT_EQ(0, tool_wait(&b, 20));
    free(dir);
    eh_stop(c);
}

/* --discovery-srv in a network and mount namespace of its own:
 * /etc/resolv.conf names a DNS responder on the namespace's loopback (Debian's
 * python3) that answers _etcd-client._tcp with localhost:1. elector runs with
 * the options in more (a string of words); its exit code and output are
 * returned (NULL: skipped). */
static char *discover_in_netns(const char *more, int *rc)
{
    if (tl_run(NULL, (const char *[]){"unshare", "--net", "--mount", "true", NULL}) !=
            0 ||
        access("/usr/bin/python3", X_OK) != 0 || access("/usr/sbin/ip", X_OK) != 0)
        tl_skip("needs unshare --net --mount, /usr/sbin/ip and /usr/bin/python3");
    char *dir = tl_tmpdir("srvok"), path[600], script[4096];
    snprintf(path, sizeof(path), "%s/resolv.conf", dir);
    FILE *f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    fputs("nameserver 127.0.0.1\noptions timeout:2 attempts:1\n", f);
    ASSERT_OK(fclose(f));
    snprintf(path, sizeof(path), "%s/dns.py", dir);
    f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    fputs("import socket, struct, sys\n"
          "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
          "s.bind(('127.0.0.1', 53))\n"
          "open(sys.argv[1], 'w').close()\n"
          "while True:\n"
          "    q, a = s.recvfrom(512)\n"
          "    i = 12\n"
          "    while q[i]:\n"
          "        i += q[i] + 1\n"
          "    hit = q[12] == 12 and q[13:25] == b'_etcd-client'\n"
          "    r = q[:2] + struct.pack('>HHHHH', 0x8180 if hit else 0x8183, 1,\n"
          "                            1 if hit else 0, 0, 0) + q[12:i + 5]\n"
          "    if hit:\n"
          "        rd = struct.pack('>HHH', 0, 0, 1) + b'\\x09localhost\\x00'\n"
          "        r += struct.pack('>HHHIH', 0xc00c, 33, 1, 60, len(rd)) + rd\n"
          "    s.sendto(r, a)\n",
          f);
    ASSERT_OK(fclose(f));
    snprintf(script, sizeof(script),
             "set -e; ip link set lo up; mount --bind %s/resolv.conf /etc/resolv.conf; "
             "/usr/bin/python3 %s/dns.py %s/ready & p=$!; "
             "i=0; while [ ! -e %s/ready ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); "
             "done; [ -e %s/ready ] || exit 77; "
             "set +e; %s -d example.test leader N --dial-timeout 300ms %s; rc=$?; "
             "kill $p; exit $rc",
             dir, dir, dir, dir, dir, ELECTOR_BIN, more);
    char *out = NULL;
    tl_run_opts ro = {.merge_stderr = 1};
    *rc = tl_run_ex(
        &out, (const char *[]){"unshare", "--net", "--mount", "sh", "-c", script, NULL},
        &ro);
    tl_log("%s: exit %d: %s", more, *rc, out);
    if (*rc == 77)
        tl_skip("the DNS responder could not listen on port 53 in the namespace");
    free(dir);
    return out;
}

/* --discovery-srv that finds a member: elector says the endpoints it found and
 * uses them (nothing listens there: exit 1). */
TEST(discovery_that_finds_a_member_uses_it)
{
    int rc;
    char *out = discover_in_netns("", &rc);
    ASSERT_EQ(1, rc);
    ASSERT_CONTAINS(out, " info elector: --discovery-srv example.test: endpoints "
                         "http://localhost:1\n");
    ASSERT_CONTAINS(out, " error elector: cannot read the leader: endpoint localhost:1: "
                         "connect: Connection refused");
    free(out);
}

/* With TLS configured, DNS does not move the client to cleartext: the http
 * record is named as skipped and not used (before: used, and a password
 * would have gone out unencrypted). */
TEST(discovery_with_tls_configured_skips_cleartext_records)
{
    const char *tls_ways[] = {"--insecure-transport=false", "--cacert /nonexistent"};
    for (int i = 0; i < 2; i++) {
        int rc;
        char *out = discover_in_netns(tls_ways[i], &rc);
        ASSERT_EQ(1, rc);
        ASSERT_CONTAINS(out, " warn elector: --discovery-srv example.test: cleartext "
                             "records skipped (http://localhost:1): TLS is configured, "
                             "only https (_etcd-client-ssl) records are used\n");
        ASSERT_CONTAINS(out, " error elector: --discovery-srv example.test: no https "
                             "(_etcd-client-ssl) SRV records for the members of "
                             "example.test");
        ASSERT(!strstr(out, "connect"));
        free(out);
    }
}

/* Waits until needle occurs n times in the file at path. */
static bool wait_count(const char *path, const char *needle, int n, double timeout_s)
{
    double end = tl_now() + timeout_s;
    while (count_in(path, needle) < n) {
        if (tl_now() > end) return false;
        tl_msleep(20);
    }
    return true;
}

/* --health-holdoff: a leader that steps down for its health stays out for the
 * hold-off, doubled for a step-down soon after (capped at --health-holdoff-max),
 * and back to the base once it stayed healthy in the election for the max. */
TEST_WITH_TIMEOUT(health_holdoff_doubles_caps_and_resets, 60)
{
    eh_cluster *c = start1();
    const char *eps = eh_endpoints(c);
    char *dir = tl_tmpdir("holdoff"), errp[512], flag[512], check[600];
    snprintf(errp, sizeof(errp), "%s/err", dir);
    snprintf(flag, sizeof(flag), "%s/healthy", dir);
    snprintf(check, sizeof(check), "test -e %s", flag);
    FILE *f = fopen(flag, "w");
    ASSERT_NOT_NULL(f);
    fclose(f);
    eu_child a;
    tool_bg_ex(&a, &(tool_bg_opts){.err_path = errp, .in_fd = -1},
               (const char *[]){"--endpoints", eps, "campaign", "hz", "v", "--health-cmd",
                                check, "--health-interval", "100ms", "--health-retries",
                                "1", "--health-holdoff", "500ms", "--health-holdoff-max",
                                "800ms", NULL});
    const char *el = " info elector: elected: hz/";
    const char *out1 = "out of the election for at least 500 ms (health step-down 1 in a "
                       "row; --health-holdoff)\n";
    const char *out2 = "out of the election for at least 800 ms (health step-down 2 in a "
                       "row; --health-holdoff)\n";
    ASSERT(wait_count(errp, el, 1, 15));
    tl_msleep(300); /* past the first interval: one failure decides */
    ASSERT_OK(unlink(flag));
    ASSERT(wait_count(errp, out1, 1, 10));
    f = fopen(flag, "w");
    fclose(f);
    ASSERT(wait_count(errp, el, 2, 10));
    /* At once again (well within the max after the hold-off): it doubles,
     * 1000 ms, capped at 800 ms. */
    ASSERT_OK(unlink(flag));
    ASSERT(wait_count(errp, out2, 1, 10));
    f = fopen(flag, "w");
    fclose(f);
    ASSERT(wait_count(errp, el, 3, 10));
    /* Healthy in the election for longer than the max: the base again. */
    tl_msleep(1200);
    ASSERT_OK(unlink(flag));
    ASSERT(wait_count(errp, out1, 2, 10));
    ASSERT_EQ(1, count_in(errp, out2));
    ASSERT_OK(kill(a.pid, SIGTERM));
    ASSERT_EQ(0, tool_wait(&a, 20));
    free(dir);
    eh_stop(c);
}
