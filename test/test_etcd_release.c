/* SPDX-License-Identifier: MIT */
/* The release helper (release_on_exit) against real etcd: a leader embedding the
 * library (test/release_owner.c) dies by SIGKILL, SIGSEGV or _exit() and the
 * successor, waiting behind it in this process, leads within milliseconds
 * although the TTL is 10 s; a normal close leaves no helper behind; a fork of
 * the owner that lives on does not hold the release back; the helper's
 * environment and command line hold no password. The handover figures are
 * printed (worst of 10 for SIGKILL: bench/RESULTS.md); the bound asserted is
 * loose (3 s, the box is busy), and still far below the TTL. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include "elect_util.h"
#include "etcd_harness.h"
#include "testlib.h"

/* 3 s; 8 s when the helper runs under valgrind (scripts/valgrind.sh sets
 * RELEASE_HELPER_WRAPPER), which starts it 10-30 times slower: still below the
 * TTL of 10 s, which the successor would otherwise wait for. */
static double bound_ms = 3000.0;
#define HANDOVER_BOUND_MS bound_ms

/* Helpers and forked children left behind by a failed assertion: killed at exit
 * (they are in sessions of their own, out of reach of the runner's cleanup). */
static pid_t strays[64];
static int nstrays;

static void kill_strays(void)
{
    for (int i = 0; i < nstrays; i++)
        if (strays[i] > 0) kill(strays[i], SIGKILL);
}

static void note_stray(pid_t p)
{
    if (p > 0 && nstrays < 64) strays[nstrays++] = p;
}

static void setup(void)
{
    static bool done;
    if (done) return;
    done = true;
    /* The helper outlives its owner for a moment: it comes to us then. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    const char *wrapper = getenv("RELEASE_HELPER_WRAPPER");
    setenv("ELECTOR_RELEASE_HELPER", wrapper && *wrapper ? wrapper : RELEASE_HELPER_BIN,
           1);
    if (wrapper && *wrapper) bound_ms = 8000.0;
    atexit(kill_strays);
    /* Under ASan a report must not pass for the helper's own exit 1 (a revoke
     * that failed): the helper inherits the sanitizers' options. */
    setenv("ASAN_OPTIONS", "exitcode=99", 0);
}

/* Whether the file holds needle (binary-safe: environ is NUL-separated). */
static int file_has(const char *path, const char *needle, int *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    *err = fd < 0 ? errno : 0;
    if (fd < 0) return -1;
    char buf[65536];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof(buf) && (r = read(fd, buf + n, sizeof(buf) - n)) > 0)
        n += (size_t)r;
    close(fd);
    return memmem(buf, n, needle, strlen(needle)) != NULL;
}

static ssize_t file_size(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char buf[4096];
    ssize_t n = 0, r;
    while ((r = read(fd, buf, sizeof(buf))) > 0)
        n += r;
    close(fd);
    return n;
}

typedef struct owner {
    eu_child ch;
    int in; /* its stdin */
    pid_t helper;
    char lease[32];
} owner;

/* Starts release_owner and waits until it leads. extra_env: NULL-ended. */
static int owner_start(owner *o, const char *endpoints, const char *name,
                       char *const *extra_env)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC)) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        for (char *const *e = extra_env; e && *e; e++)
            putenv(*e);
        execl(RELEASE_OWNER_BIN, "release_owner", endpoints, name, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    if (pid < 0) return -1;
    eu_child_wrap(&o->ch, pid, out[0]);
    o->in = in[1];
    char line[256];
    if (eu_child_expect(&o->ch, "elected ", line, sizeof(line), 30000)) return -1;
    int hp = 0;
    if (sscanf(line, "elected %d %31s", &hp, o->lease) != 2) return -1;
    o->helper = hp;
    note_stray(hp);
    return 0;
}

static void owner_say(owner *o, const char *cmd)
{
    ssize_t w = write(o->in, cmd, strlen(cmd));
    (void)w;
}

/* Reaps the owner; returns its wait status. */
static int owner_reap(owner *o)
{
    int st = 0;
    waitpid(o->ch.pid, &st, 0);
    close(o->in);
    close(o->ch.fd);
    return st;
}

/* Waits for the orphaned helper (our child now: we are a subreaper) and returns
 * its exit status, or -1 if it did not exit within 10 s. */
static int helper_reap(pid_t h)
{
    for (int i = 0; i < 1000; i++) {
        int st;
        pid_t w = waitpid(h, &st, WNOHANG);
        if (w == h) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (w < 0) return -1;
        tl_msleep(10);
    }
    kill(h, SIGKILL);
    waitpid(h, NULL, 0);
    return -1;
}

/* A successor waiting behind the owner's key. */
static eu_cand *successor(const char *endpoints, const char *name)
{
    eu_cand *c = eu_cand_new(endpoints, name, 10);
    if (!c) return NULL;
    if (elector_campaign(c->el, "next", 4) ||
        eu_wait_event(c, 0, ELECTOR_EV_WAITING, 10000) < 0) {
        eu_cand_free(c);
        return NULL;
    }
    return c;
}

/* Kills the owner the way `how` says, then measures until the successor leads.
 * Returns the handover in ms (-1: not within 12 s), and the owner's status. */
static double handover(owner *o, eu_cand *next, char how, int *status)
{
    int64_t t0 = tl_now_ns();
    if (how == 'k')
        kill(o->ch.pid, SIGKILL);
    else
        owner_say(o, how == 's' ? "s\n" : "x\n");
    int i = eu_wait_event(next, 0, ELECTOR_EV_ELECTED, 12000);
    int64_t t1 = tl_now_ns();
    *status = owner_reap(o);
    return i < 0 ? -1 : (double)(t1 - t0) / 1e6;
}

static void one_crash_env(eh_cluster *c, const char *name, char how, double *ms,
                          char *const *env)
{
    owner o;
    ASSERT_OK(owner_start(&o, eh_endpoints(c), name, env));
    ASSERT_GT(o.helper, 0);
    ASSERT_EQ(0, kill(o.helper, 0));
    eu_cand *next = successor(eh_endpoints(c), name);
    ASSERT_NOT_NULL(next);
    int st;
    *ms = handover(&o, next, how, &st);
    if (how == 'k') ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    if (how == 's') ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
    if (how == 'x') ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 3);
    ASSERT_GE(*ms, 0.0);
    ASSERT_LT(*ms, HANDOVER_BOUND_MS);
    /* The helper revoked and exited 0 (under ASan: without a report). */
    ASSERT_EQ(0, helper_reap(o.helper));
    eu_cand_free(next);
}

static void one_crash(eh_cluster *c, const char *name, char how, double *ms)
{
    one_crash_env(c, name, how, ms, NULL);
}

TEST_WITH_TIMEOUT(release_sigkill_ten_times, 300)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){0});
    ASSERT_NOT_NULL(c);
    double worst = 0, sum = 0;
    for (int i = 0; i < 10; i++) {
        double ms;
        one_crash(c, "release-kill", 'k', &ms);
        tl_log("SIGKILL round %d: the successor leads %.1f ms after the kill (TTL 10 s)",
               i + 1, ms);
        if (ms > worst) worst = ms;
        sum += ms;
    }
    printf("release_on_exit handover after SIGKILL, TTL 10 s: mean %.1f ms, worst of 10 "
           "%.1f ms\n",
           sum / 10, worst);
    eh_stop(c);
}

TEST_WITH_TIMEOUT(release_sigsegv_and_exit, 120)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){0});
    ASSERT_NOT_NULL(c);
    double ms;
    one_crash(c, "release-segv", 's', &ms);
    printf("release_on_exit handover after SIGSEGV: %.1f ms\n", ms);
    one_crash(c, "release-exit", 'x', &ms);
    printf("release_on_exit handover after _exit(3): %.1f ms\n", ms);
    eh_stop(c);
}

/* Without the helper the successor waits for the TTL: what the tests above
 * would see if the helper did nothing. */
TEST_WITH_TIMEOUT(release_off_waits_for_ttl, 120)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){0});
    ASSERT_NOT_NULL(c);
    owner o;
    char *env[] = {"RO_NO_RELEASE=1", NULL};
    ASSERT_OK(owner_start(&o, eh_endpoints(c), "release-off", env));
    ASSERT_EQ(0, o.helper);
    eu_cand *next = successor(eh_endpoints(c), "release-off");
    ASSERT_NOT_NULL(next);
    kill(o.ch.pid, SIGKILL);
    owner_reap(&o);
    ASSERT_LT(eu_wait_event(next, 0, ELECTOR_EV_ELECTED, 2000), 0);
    eu_cand_free(next);
    eh_stop(c);
}

TEST_WITH_TIMEOUT(release_close_leaves_no_helper, 120)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){0});
    ASSERT_NOT_NULL(c);
    owner o;
    ASSERT_OK(owner_start(&o, eh_endpoints(c), "release-close", NULL));
    ASSERT_GT(o.helper, 0);
    char path[64];
    int err;
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)o.helper);
    /* Read while the helper is between two execs (scripts/valgrind.sh runs
     * it through a shell and valgrind's launcher), cmdline is empty: wait. */
    for (int i = 0; i < 100 && file_has(path, "elector-release", &err) == 0; i++)
        usleep(20000);
    ASSERT_EQ(1, file_has(path, "elector-release", &err));
    /* Its footprint once settled (orders read, client made), for the record
     * (bench/RESULTS.md). */
    tl_msleep(200);
    char line0[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)o.helper);
    FILE *sf = fopen(path, "r");
    while (sf && fgets(line0, sizeof(line0), sf))
        if (!strncmp(line0, "VmRSS:", 6) || !strncmp(line0, "RssAnon:", 8) ||
            !strncmp(line0, "Threads:", 8))
            printf("release helper %s", line0);
    if (sf) fclose(sf);
    owner_say(&o, "c\n");
    char line[128];
    ASSERT_OK(eu_child_expect(&o.ch, "closed ", line, sizeof(line), 10000));
    ASSERT_STREQ("closed 0 0", line);
    /* The owner still runs, and its helper is gone: exited and reaped (not
     * even a zombie). */
    ASSERT_EQ(0, kill(o.ch.pid, 0));
    ASSERT_EQ(-1, kill(o.helper, 0));
    ASSERT_EQ(ESRCH, errno);
    owner_say(&o, "q\n");
    int st = owner_reap(&o);
    ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    eh_stop(c);
}

TEST_WITH_TIMEOUT(release_fork_then_owner_dies, 120)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){0});
    ASSERT_NOT_NULL(c);
    owner o;
    ASSERT_OK(owner_start(&o, eh_endpoints(c), "release-fork", NULL));
    owner_say(&o, "f\n");
    char line[128];
    ASSERT_OK(eu_child_expect(&o.ch, "child ", line, sizeof(line), 10000));
    pid_t forked = atoi(line + 6);
    ASSERT_GT(forked, 0);
    note_stray(forked);
    eu_cand *next = successor(eh_endpoints(c), "release-fork");
    ASSERT_NOT_NULL(next);
    int st;
    double ms = handover(&o, next, 'k', &st);
    printf("release_on_exit handover after SIGKILL, a forked child living on: %.1f ms\n",
           ms);
    /* The forked child still holds the helper's socket, and lives. */
    ASSERT_EQ(0, kill(forked, 0));
    ASSERT_GE(ms, 0.0);
    ASSERT_LT(ms, HANDOVER_BOUND_MS);
    ASSERT_EQ(0, helper_reap(o.helper));
    kill(forked, SIGKILL);
    waitpid(forked, NULL, 0);
    eu_cand_free(next);
    eh_stop(c);
}

TEST_WITH_TIMEOUT(release_auth_no_password_in_helper, 180)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){.auth = 1});
    ASSERT_NOT_NULL(c);
    char name[128], user[128], pass[128];
    snprintf(name, sizeof(name), "%srelease-auth", EH_USER_PREFIX);
    snprintf(user, sizeof(user), "RO_USER=%s", EH_USER);
    snprintf(pass, sizeof(pass), "RO_PASSWORD=%s", EH_USER_PASSWORD);
    char *env[] = {user, pass, NULL};
    owner o;
    ASSERT_OK(owner_start(&o, eh_endpoints(c), name, env));
    ASSERT_GT(o.helper, 0);
    char path[64];
    int err;
    /* The owner has the password in its environment (so the check below can
     * fail): the helper must not. */
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)o.ch.pid);
    ASSERT_EQ(1, file_has(path, EH_USER_PASSWORD, &err));
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)o.helper);
    ASSERT_EQ(0, file_has(path, EH_USER_PASSWORD, &err));
    ASSERT_EQ(0, file_has(path, "RO_PASSWORD", &err));
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)o.helper);
    ASSERT_EQ(0, file_has(path, EH_USER_PASSWORD, &err));
    /* Read while the helper is between two execs (scripts/valgrind.sh runs
     * it through a shell and valgrind's launcher), cmdline is empty: wait. */
    for (int i = 0; i < 100 && file_has(path, "elector-release", &err) == 0; i++) {
        if (i == 0)
            tl_log("helper's cmdline not yet its own: %zd bytes", file_size(path));
        usleep(20000);
    }
    ASSERT_EQ(1, file_has(path, "elector-release", &err));
    ASSERT_EQ(0, file_has(path, EH_USER_PASSWORD, &err));
    /* It authenticates as the owner did: the successor (with the same user)
     * leads soon after the owner's SIGKILL. */
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    cfg.user = EH_USER;
    cfg.password = EH_USER_PASSWORD;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    elector_session *s = elector_session_new(e, NULL, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_OK(elector_session_wait(s, 10000));
    elector_election *el = elector_election_new(s, name, NULL, NULL);
    ASSERT_NOT_NULL(el);
    ASSERT_EQ(ELECTOR_ETIMEDOUT, elector_campaign_sync(el, "next", 4, 300));
    int64_t t0 = tl_now_ns();
    kill(o.ch.pid, SIGKILL);
    int64_t deadline = tl_now_ns() + 12000000000LL;
    while (!elector_is_leader(el) && tl_now_ns() < deadline)
        elector_etcd_run_once(e, 50);
    double ms = (double)(tl_now_ns() - t0) / 1e6;
    printf("release_on_exit handover after SIGKILL, auth enabled: %.1f ms\n", ms);
    ASSERT(elector_is_leader(el));
    ASSERT_LT(ms, HANDOVER_BOUND_MS);
    owner_reap(&o);
    ASSERT_EQ(0, helper_reap(o.helper));
    elector_election_free(el);
    ASSERT_OK(elector_session_close_sync(s, 5000));
    elector_etcd_free(e);
    eh_stop(c);
}

/* TLS with client certificates: the helper gets the files' paths, reads them
 * when it starts, and revokes over TLS. */
TEST_WITH_TIMEOUT(release_over_tls, 120)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){.tls = 1});
    ASSERT_NOT_NULL(c);
    char ca[600], cert[600], key[600];
    snprintf(ca, sizeof(ca), "RO_CACERT=%s", eh_cacert(c));
    snprintf(cert, sizeof(cert), "RO_CERT=%s", eh_cert(c));
    snprintf(key, sizeof(key), "RO_KEY=%s", eh_key(c));
    char *env[] = {ca, cert, key, NULL};
    owner o;
    ASSERT_OK(owner_start(&o, eh_endpoints(c), "release-tls", env));
    ASSERT_GT(o.helper, 0);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    cfg.cacert = eh_cacert(c);
    cfg.cert = eh_cert(c);
    cfg.key = eh_key(c);
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    ASSERT_OK(elector_etcd_err(e));
    elector_session *s = elector_session_new(e, NULL, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_OK(elector_session_wait(s, 10000));
    elector_election *el = elector_election_new(s, "release-tls", NULL, NULL);
    ASSERT_NOT_NULL(el);
    ASSERT_EQ(ELECTOR_ETIMEDOUT, elector_campaign_sync(el, "next", 4, 300));
    int64_t t0 = tl_now_ns();
    kill(o.ch.pid, SIGKILL);
    int64_t deadline = tl_now_ns() + 12000000000LL;
    while (!elector_is_leader(el) && tl_now_ns() < deadline)
        elector_etcd_run_once(e, 50);
    double ms = (double)(tl_now_ns() - t0) / 1e6;
    printf(
        "release_on_exit handover after SIGKILL, TLS with client certificates: %.1f ms\n",
        ms);
    ASSERT(elector_is_leader(el));
    ASSERT_LT(ms, HANDOVER_BOUND_MS);
    owner_reap(&o);
    ASSERT_EQ(0, helper_reap(o.helper));
    elector_election_free(el);
    ASSERT_OK(elector_session_close_sync(s, 5000));
    elector_etcd_free(e);
    eh_stop(c);
}

/* The tool's campaign (no command, so no guard) has the helper on by default:
 * a SIGKILLed `elector campaign` hands over at once. */
TEST_WITH_TIMEOUT(release_tool_campaign_sigkill, 120)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){0});
    ASSERT_NOT_NULL(c);
    char eps[256];
    snprintf(eps, sizeof(eps), "--endpoints=%s", eh_endpoints(c));
    const char *argv[] = {ELECTOR_BIN,    eps,    "--debug", "campaign",
                          "release-tool", "tool", NULL};
    int fd = -1;
    pid_t pid = tl_spawn(argv, &fd);
    ASSERT_GT(pid, 0);
    eu_child ch;
    eu_child_wrap(&ch, pid, fd);
    char line[256];
    ASSERT_OK(eu_child_expect(&ch, "release-tool/", line, sizeof(line), 20000));
    eu_cand *next = successor(eh_endpoints(c), "release-tool");
    ASSERT_NOT_NULL(next);
    int64_t t0 = tl_now_ns();
    kill(pid, SIGKILL);
    int i = eu_wait_event(next, 0, ELECTOR_EV_ELECTED, 12000);
    double ms = (double)(tl_now_ns() - t0) / 1e6;
    waitpid(pid, NULL, 0);
    close(fd);
    printf("release_on_exit handover after SIGKILL of `elector campaign`: %.1f ms\n", ms);
    ASSERT_GE(i, 0);
    ASSERT_LT(ms, HANDOVER_BOUND_MS);
    eu_cand_free(next);
    eh_stop(c);
}

/* etcd down when the owner dies: the helper retries, and revokes once etcd is
 * back (etcd restarted extends its leases by their TTL, so without the revoke
 * the successor would wait 10 s more). */
TEST_WITH_TIMEOUT(release_helper_retries_until_etcd_is_back, 120)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){0});
    ASSERT_NOT_NULL(c);
    owner o;
    ASSERT_OK(owner_start(&o, eh_endpoints(c), "release-retry", NULL));
    ASSERT_GT(o.helper, 0);
    ASSERT_OK(eh_member_kill(c, 0));
    kill(o.ch.pid, SIGKILL);
    owner_reap(&o);
    tl_msleep(1500);                                /* the helper retries meanwhile */
    ASSERT_EQ(0, waitpid(o.helper, NULL, WNOHANG)); /* still at it */
    ASSERT_OK(eh_member_restart(c, 0));
    ASSERT_OK(eh_wait_healthy(c, 0, 20));
    int64_t t0 = tl_now_ns();
    eu_cand *next = eu_cand_new(eh_endpoints(c), "release-retry", 10);
    ASSERT_NOT_NULL(next);
    ASSERT_OK(elector_campaign(next->el, "next", 4));
    int i = eu_wait_event(next, 0, ELECTOR_EV_ELECTED, 15000);
    double ms = (double)(tl_now_ns() - t0) / 1e6;
    printf("etcd back after 1.5 s: the successor leads %.1f ms after the restart\n", ms);
    ASSERT_GE(i, 0);
    ASSERT_LT(ms, 8000.0);
    ASSERT_EQ(0, helper_reap(o.helper)); /* revoked */
    eu_cand_free(next);
    eh_stop(c);
}

/* etcd never back: the helper retries until the lease would have expired (the
 * TTL, here 3 s), then exits 1 with a line on stderr. */
TEST_WITH_TIMEOUT(release_helper_gives_up_after_the_ttl, 120)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){0});
    ASSERT_NOT_NULL(c);
    owner o;
    char *env[] = {"RO_TTL=3", NULL};
    ASSERT_OK(owner_start(&o, eh_endpoints(c), "release-give-up", env));
    ASSERT_GT(o.helper, 0);
    ASSERT_OK(eh_member_kill(c, 0));
    int64_t t0 = tl_now_ns();
    kill(o.ch.pid, SIGKILL);
    owner_reap(&o);
    int st = helper_reap(o.helper);
    double s_ = (double)(tl_now_ns() - t0) / 1e9;
    printf("etcd down: the helper gave up after %.2f s (TTL 3 s), status %d\n", s_, st);
    ASSERT_EQ(1, st);
    ASSERT_GE(s_, 2.5); /* it did not give up at the first refusal */
    eh_stop(c);
}

/* Run by hand, the helper says what it is for and exits 2. */
TEST(release_helper_by_hand)
{
    setup();
    char *out = NULL, *errs = NULL;
    const char *argv[] = {RELEASE_HELPER_BIN, NULL};
    tl_run_opts ro = {.err = &errs};
    int st = tl_run_ex(&out, argv, &ro);
    ASSERT_EQ(2, st);
    ASSERT_CONTAINS(errs, "started by libelector");
    free(out);
    free(errs);
    const char *argv2[] = {RELEASE_HELPER_BIN, "--bogus", NULL};
    errs = NULL;
    ASSERT_EQ(2, tl_run_ex(&out, argv2, &ro));
    ASSERT_CONTAINS(errs, "usage");
    free(out);
    free(errs);
}

/* ---------------------------------------------------------------- the helper's orders */

/* Runs the helper as libelector would, but with orders of our own: fd 0 one end
 * of a socketpair (orders written, then the bytes of `after` one at a time,
 * then closed), fd 3 a pidfd of this process (quiet while we live) unless
 * no_fd3. Returns its exit status; its stderr in *errs. */
static int helper_with_orders(const uint8_t *orders, size_t n, const char *after,
                              bool no_fd3, char **errs)
{
    int sv[2], pe[2];
    ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
    ASSERT_OK(pipe2(pe, O_CLOEXEC));
    int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
    ASSERT(self >= 0);
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        /* Above 3 first, so that the dup2s below cannot overwrite them. */
        int s = fcntl(sv[1], F_DUPFD, 10), p = fcntl(self, F_DUPFD, 10),
            e = fcntl(pe[1], F_DUPFD, 10);
        if (s < 0 || p < 0 || e < 0 || dup2(s, 0) < 0 || dup2(e, 2) < 0) _exit(120);
        if (no_fd3)
            close(3);
        else if (dup2(p, 3) < 0)
            _exit(120);
        close(s), close(p), close(e);
        execl(RELEASE_HELPER_BIN, "elector-release", (char *)NULL);
        _exit(127);
    }
    close(sv[1]);
    close(pe[1]);
    close(self);
    ASSERT_EQ((ssize_t)n, n ? write(sv[0], orders, n) : 0);
    for (int i = 0; after && after[i]; i++) {
        tl_msleep(50); /* one read each */
        ASSERT_EQ(1, write(sv[0], after + i, 1));
    }
    size_t len = 0;
    *errs = calloc(1, 1);
    char buf[512];
    ssize_t r;
    while ((r = read(pe[0], buf, sizeof(buf))) > 0) {
        *errs = realloc(*errs, len + (size_t)r + 1);
        memcpy(*errs + len, buf, (size_t)r);
        len += (size_t)r;
        (*errs)[len] = 0;
    }
    close(pe[0]);
    close(sv[0]);
    int st;
    ASSERT_EQ(pid, waitpid(pid, &st, 0));
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Orders as the library encodes them (src/election/release.c): "ELR2", the body's
 * length, 13 int64 (lease, TTL, the client's times and bounds, TLS only), 7
 * strings (endpoints, cacert, cert, key, user, password, password file) each
 * as a 4-byte length (0xffffffff: none) and its bytes. Returns the length. */
static size_t make_orders(uint8_t *buf, const char *const s[6])
{
    int64_t v[13] = {0x1234, 10, 1000, 1000, 0, 0, 0, 50, 500, 0, 0, 0, 0};
    size_t n = 8;
    memcpy(buf + n, v, sizeof(v));
    n += sizeof(v);
    for (int i = 0; i < 7; i++) {
        const char *str = i < 6 ? s[i] : NULL;
        uint32_t l = str ? (uint32_t)strlen(str) : UINT32_MAX;
        memcpy(buf + n, &l, 4);
        n += 4;
        if (str) memcpy(buf + n, str, l), n += l;
    }
    uint32_t body = (uint32_t)(n - 8);
    memcpy(buf, "ELR2", 4);
    memcpy(buf + 4, &body, 4);
    return n;
}

/* What the helper does with orders that are not what the library sends, or
 * without its pidfd: a message and exit 2, never a revoke attempt or a hang;
 * data that is not "D" is ignored until "D" comes. */
TEST(release_helper_refuses_bad_orders)
{
    setup();
    const char *port = "127.0.0.1:1"; /* nobody listens: a revoke would fail */
    uint8_t buf[1024];
    char *errs = NULL;

    /* A string longer than what is left of the body. */
    const char *const good[6] = {port, NULL, NULL, NULL, NULL, NULL};
    size_t n = make_orders(buf, good);
    uint32_t body = (uint32_t)(n - 8) - 3; /* cut into the endpoints */
    memcpy(buf + 4, &body, 4);
    ASSERT_EQ(2, helper_with_orders(buf, n - 3, NULL, false, &errs));
    ASSERT_CONTAINS(errs, "malformed orders");
    free(errs);

    /* A string with a NUL byte in it. */
    const char *const nul[6] = {"a\001b", NULL, NULL, NULL, NULL, NULL};
    n = make_orders(buf, nul);
    buf[8 + 104 + 4 + 1] = 0;
    ASSERT_EQ(2, helper_with_orders(buf, n, NULL, false, &errs));
    ASSERT_CONTAINS(errs, "malformed orders");
    free(errs);

    /* Bytes past the last string. */
    n = make_orders(buf, good);
    buf[n] = 'x';
    body = (uint32_t)(n + 1 - 8);
    memcpy(buf + 4, &body, 4);
    ASSERT_EQ(2, helper_with_orders(buf, n + 1, NULL, false, &errs));
    ASSERT_CONTAINS(errs, "malformed orders");
    free(errs);

    /* Settings the client refuses (a CA file that does not exist): the lease is
     * left to its TTL, and the message says so. */
    const char *const noca[6] = {port, "/nonexistent/elector-ca.pem", NULL, NULL, NULL,
                                 NULL};
    n = make_orders(buf, noca);
    ASSERT_EQ(2, helper_with_orders(buf, n, NULL, false, &errs));
    ASSERT_CONTAINS(errs, "lease 1234: cannot use the settings");
    ASSERT_CONTAINS(errs, "it ends by its TTL");
    free(errs);

    /* No pidfd on fd 3: refused before reading anything. */
    n = make_orders(buf, good);
    ASSERT_EQ(2, helper_with_orders(buf, n, NULL, true, &errs));
    ASSERT_CONTAINS(errs, "fd 0 or 3 is missing");
    free(errs);

    /* Good orders; bytes that are not "D" are ignored, "D" ends it at once: exit 0,
     * nothing said, nothing revoked (a revoke would fail: exit 1 with a message). */
    n = make_orders(buf, good);
    double t0 = tl_now();
    ASSERT_EQ(0, helper_with_orders(buf, n, "xyD", false, &errs));
    ASSERT_STREQ("", errs);
    /* Our end stays open until it exits: "D" ended it, not an EOF (which would
     * wait 2 s for the pidfd, then also exit 0). */
    ASSERT_LT(tl_now() - t0, 1.5);
    free(errs);
}

/* A helper that cannot be started (a file that is executable but no program:
 * posix_spawn fails with ENOEXEC): the session works, without a helper, and
 * says so (elector_session_helper() is an error, not a pid). */
TEST_WITH_TIMEOUT(release_helper_that_cannot_start_leaves_the_session_alive, 60)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){0});
    ASSERT_NOT_NULL(c);
    char path[] = "/tmp/elector-not-a-program-XXXXXX";
    int fd = mkstemp(path);
    ASSERT(fd >= 0);
    ASSERT_EQ(4, write(fd, "\x01\x02\x03\x04", 4));
    ASSERT_OK(fchmod(fd, 0755));
    close(fd);
    char *old = strdup(getenv("ELECTOR_RELEASE_HELPER"));
    setenv("ELECTOR_RELEASE_HELPER", path, 1);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.release_on_exit = true;
    elector_session *s = elector_session_new(e, &sc, NULL, NULL);
    ASSERT_NOT_NULL(s);
    int rc = elector_session_wait(s, 10000);
    setenv("ELECTOR_RELEASE_HELPER", old, 1);
    free(old);
    unlink(path);
    ASSERT_EQ(0, rc);
    ASSERT_EQ(ELECTOR_EINVAL, elector_session_helper(s));
    ASSERT(elector_session_alive(s));
    ASSERT_EQ(0, elector_session_close_sync(s, 5000));
    elector_etcd_free(e);
    eh_stop(c);
}

/* The helper's orders carry the client's settings, at most 64 KiB of them: a
 * client whose strings are longer (here a password of 70 KiB, sent to nobody:
 * no user is set) gets a session without a helper (ELECTOR_EINVAL), alive and
 * closed normally; one of 60 KiB still gets its helper. */
TEST_WITH_TIMEOUT(release_helper_orders_over_64_kib_are_refused, 60)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){0});
    ASSERT_NOT_NULL(c);
    const size_t sizes[] = {70 * 1024, 60 * 1024};
    for (int i = 0; i < 2; i++) {
        char *pw = malloc(sizes[i] + 1);
        ASSERT_NOT_NULL(pw);
        memset(pw, 'p', sizes[i]);
        pw[sizes[i]] = 0;
        elector_etcd_config cfg;
        elector_etcd_config_init(&cfg);
        cfg.endpoints = eh_endpoints(c);
        cfg.password = pw;
        elector_etcd *e = elector_etcd_new(&cfg);
        free(pw); /* the client keeps its own copy */
        ASSERT_NOT_NULL(e);
        elector_session_config sc;
        elector_session_config_init(&sc);
        sc.release_on_exit = true;
        elector_session *s = elector_session_new(e, &sc, NULL, NULL);
        ASSERT_NOT_NULL(s);
        ASSERT_EQ(0, elector_session_wait(s, 10000));
        int helper = elector_session_helper(s);
        tl_log("password of %zu bytes: helper %d", sizes[i], helper);
        if (i == 0)
            ASSERT_EQ(ELECTOR_EINVAL, helper);
        else
            ASSERT_GT(helper, 0);
        ASSERT(elector_session_alive(s));
        ASSERT_EQ(0, elector_session_close_sync(s, 5000));
        elector_etcd_free(e);
    }
    eh_stop(c);
}

/* An owner whose fd 0 is free when the helper starts: the helper's socket is
 * made at fd 0 and moved above 3 before the spawn (else its dup2 to 0 and the
 * pidfd's to 3 could overwrite each other): the helper still gets its orders
 * and revokes at the owner's death. */
TEST_WITH_TIMEOUT(release_owner_with_fd_0_free, 60)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){0});
    ASSERT_NOT_NULL(c);
    double ms;
    char *env[] = {"RO_LOW_FD=1", NULL};
    /* _exit(3): a death the coverage build still counts the owner's lines of. */
    one_crash_env(c, "release-lowfd", 'x', &ms, env);
    printf("fd 0 free at the spawn: _exit handover %.1f ms\n", ms);
    eh_stop(c);
}

/* No descriptor left for the helper's socket (RLIMIT_NOFILE reached): the
 * session works without a helper and says why (elector_session_helper() is
 * ELECTOR_ENOMEM: out of resources, not a pid). */
TEST_WITH_TIMEOUT(release_helper_without_descriptors_leaves_the_session_alive, 60)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){0});
    ASSERT_NOT_NULL(c);
    owner o;
    char *env[] = {"RO_NOFILE=1", NULL};
    ASSERT_OK(owner_start(&o, eh_endpoints(c), "release-nofile", env));
    ASSERT_EQ(ELECTOR_ENOMEM, o.helper); /* and it was elected: the session works */
    owner_say(&o, "c\n");
    char line[256];
    ASSERT_OK(eu_child_expect(&o.ch, "closed ", line, sizeof(line), 10000));
    ASSERT_STREQ("closed 0 0", line); /* closed, the lease revoked: 0 */
    owner_say(&o, "q\n");
    int st = owner_reap(&o);
    ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    eh_stop(c);
}

/* A host program with a busy signal timer (a sampling profiler's, or a
 * runtime's) whose handler is installed without SA_RESTART: the loop's
 * epoll_wait, the spawn of the helper and the wait for it at the close are
 * interrupted over and over (EINTR). Five sessions with a helper each, all in
 * one process: each is granted, has its helper, closes with 0 (its lease
 * revoked), and its helper is gone (exited and reaped) when the close returns. */
static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
}

TEST_WITH_TIMEOUT(release_in_a_host_with_a_busy_signal_timer, 60)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){0});
    ASSERT_NOT_NULL(c);
    struct sigaction sa = {.sa_handler = on_alarm}, old;
    sigemptyset(&sa.sa_mask);
    ASSERT_OK(sigaction(SIGALRM, &sa, &old)); /* no SA_RESTART */
    struct itimerval every = {{0, 200}, {0, 200}}, off = {{0, 0}, {0, 0}};
    int fails = 0;
    pid_t helpers[5] = {0};
    int64_t revoked[5];
    ASSERT_OK(setitimer(ITIMER_REAL, &every, NULL));
    for (int i = 0; i < 5; i++) {
        elector_etcd_config cfg;
        elector_etcd_config_init(&cfg);
        cfg.endpoints = eh_endpoints(c);
        elector_etcd *e = elector_etcd_new(&cfg);
        elector_session_config sc;
        elector_session_config_init(&sc);
        sc.release_on_exit = true;
        elector_session *s = e ? elector_session_new(e, &sc, NULL, NULL) : NULL;
        if (!s || elector_session_wait(s, 10000) != 0) fails++;
        helpers[i] = s ? elector_session_helper(s) : -1;
        revoked[i] = s ? elector_session_lease(s) : 0;
        if (s && elector_session_close_sync(s, 5000) != 0) fails++;
        if (e) elector_etcd_free(e);
        if (helpers[i] > 0 && (kill(helpers[i], 0) == 0 || errno != ESRCH)) fails++;
    }
    ASSERT_OK(setitimer(ITIMER_REAL, &off, NULL));
    ASSERT_OK(sigaction(SIGALRM, &old, NULL));
    tl_log("%d signals handled during 5 sessions; %d failures", (int)alarms, fails);
    ASSERT_EQ(0, fails);
    ASSERT_GT(alarms, 10); /* coalesced while pending: fewer than the timer fired */
    for (int i = 0; i < 5; i++) {
        ASSERT_GT(helpers[i], 0);
        ASSERT_GT(revoked[i], 0);
    }
    /* The leases are gone (revoked at the close, not left to their TTL). */
    char *out = NULL;
    ASSERT_EQ(0, tl_run(&out, (const char *[]){"etcdctl", "--endpoints", eh_endpoints(c),
                                               "lease", "list", NULL}));
    for (int i = 0; i < 5; i++) {
        char hex[32];
        snprintf(hex, sizeof(hex), "%llx", (unsigned long long)revoked[i]);
        ASSERT(!strstr(out, hex));
    }
    free(out);
    eh_stop(c);
}

/* Where the helper is found (issue 35: a path fixed at configure time left it
 * off for the build tree and for `cmake --install --prefix`): beside the
 * program that uses the library without $ELECTOR_RELEASE_HELPER (this test,
 * in build/test/, finds build/lib/elector/); a wrong $ELECTOR_RELEASE_HELPER
 * is named in a notice; a program copied where no helper is near says every
 * place it tried and what to do, and leads without one. */
static void notice_to(elector_etcd *e, int err, const char *msg, void *ud)
{
    (void)e, (void)err;
    snprintf(ud, 1024, "%s", msg);
}

/* Runs a copy of release_owner (bin) with no $ELECTOR_RELEASE_HELPER until
 * it leads in election name, SIGKILLs it; into out, every notice it printed and its
 * "elected" line. */
static void far_owner(const char *bin, const char *endpoints, const char *name, char *out,
                      size_t cap)
{
    char *saved = strdup(getenv("ELECTOR_RELEASE_HELPER"));
    unsetenv("ELECTOR_RELEASE_HELPER");
    int pipefd[2];
    ASSERT_OK(pipe2(pipefd, O_CLOEXEC));
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], 1);
        execl(bin, "release_owner", endpoints, name, (char *)NULL);
        _exit(127);
    }
    close(pipefd[1]);
    setenv("ELECTOR_RELEASE_HELPER", saved, 1);
    free(saved);
    eu_child ch;
    eu_child_wrap(&ch, pid, pipefd[0]);
    size_t n = 0;
    out[0] = 0;
    char line[2048];
    while (!eu_child_expect(&ch, "", line, sizeof(line), 30000)) {
        int w = snprintf(out + n, cap - n, "%s\n", line);
        if (w > 0 && n + (size_t)w < cap) n += (size_t)w;
        if (!strncmp(line, "elected ", 8)) break;
    }
    tl_log("%s", out);
    int hp = 0;
    const char *el = strstr(out, "elected ");
    if (el && sscanf(el, "elected %d", &hp) == 1 && hp > 0) note_stray(hp);
    eu_child_kill(&ch);
}

TEST_WITH_TIMEOUT(release_helper_is_found_beside_the_library_or_said_where_not, 90)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){0});
    ASSERT_NOT_NULL(c);
    char *old = strdup(getenv("ELECTOR_RELEASE_HELPER"));
    const char *cases[] = {NULL, "/nonexistent/elector-release"};
    for (int i = 0; i < 2; i++) {
        if (cases[i])
            setenv("ELECTOR_RELEASE_HELPER", cases[i], 1);
        else
            unsetenv("ELECTOR_RELEASE_HELPER");
        elector_etcd_config cfg;
        elector_etcd_config_init(&cfg);
        cfg.endpoints = eh_endpoints(c);
        elector_etcd *e = elector_etcd_new(&cfg);
        char said[1024] = "";
        elector_etcd_set_notice(e, notice_to, said);
        elector_session_config sc;
        elector_session_config_init(&sc);
        sc.release_on_exit = true;
        elector_session *s = elector_session_new(e, &sc, NULL, NULL);
        ASSERT_OK(elector_session_wait(s, 10000));
        int pid = elector_session_helper(s);
        tl_log("ELECTOR_RELEASE_HELPER=%s: helper %d; notice: %s",
               cases[i] ? cases[i] : "(unset)", pid, said);
        if (!cases[i]) {
            ASSERT_GT(pid, 0);
            ASSERT_STREQ("", said);
        } else {
            ASSERT_EQ(ELECTOR_EINVAL, pid);
            ASSERT_CONTAINS(said, "no release helper at $ELECTOR_RELEASE_HELPER "
                                  "(/nonexistent/elector-release): No such file");
        }
        ASSERT_OK(elector_session_close_sync(s, 5000));
        elector_etcd_free(e);
    }

    setenv("ELECTOR_RELEASE_HELPER", old, 1);
    free(old);

    /* A copy of a program far from any helper. */
    char *dir = tl_tmpdir("far"), bin[600], line[2048], want[900];
    snprintf(bin, sizeof(bin), "%s/bin", dir);
    ASSERT_OK(mkdir(bin, 0755));
    strcat(bin, "/release_owner");
    ASSERT_EQ(0, tl_run(NULL, (const char *[]){"cp", RELEASE_OWNER_BIN, bin, NULL}));
    far_owner(bin, eh_endpoints(c), "far1", line, sizeof(line));
    snprintf(want, sizeof(want),
             "notice: no release helper (tried %s/bin/elector/elector-release, "
             "%s/bin/../lib/elector/elector-release, ",
             dir, dir);
    ASSERT_CONTAINS(line, want);
    ASSERT_CONTAINS(line, "): set ELECTOR_RELEASE_HELPER to the path of elector-release, "
                          "or install it with libelector");
    ASSERT_CONTAINS(line, "elected -1 "); /* ELECTOR_EINVAL: it leads without one */

    /* One put beside it in a directory others may write: not run. */
    char lib[700], helper[800];
    snprintf(lib, sizeof(lib), "%s/lib", dir);
    ASSERT_OK(mkdir(lib, 0755));
    strcat(lib, "/elector");
    ASSERT_OK(mkdir(lib, 0755));
    ASSERT_OK(chmod(lib, 0777));
    snprintf(helper, sizeof(helper), "%s/elector-release", lib);
    ASSERT_EQ(0, tl_run(NULL, (const char *[]){"cp", RELEASE_HELPER_BIN, helper, NULL}));
    far_owner(bin, eh_endpoints(c), "far2", line, sizeof(line));
    ASSERT_CONTAINS(line, "elected -1 ");
    ASSERT_OK(chmod(lib, 0755)); /* now it is found, beside the program */
    far_owner(bin, eh_endpoints(c), "far3", line, sizeof(line));
    ASSERT(!strstr(line, "notice: "));
    ASSERT(!strstr(line, "elected -1 "));
    free(dir);
    eh_stop(c);
}

/* ---------------------------------------------------------------- issue 36: the helper
 * follows the client; its stop never stalls the loop; adopted leases */

/* The password rotated (in etcd, and in the password file the owner reads)
 * after the helper started: the helper reads the file itself before it
 * authenticates, so a SIGKILL of the owner still hands over at once (before:
 * it authenticated with the password it was started with, failed, and the
 * successor waited for the TTL). */
TEST_WITH_TIMEOUT(release_helper_follows_a_rotated_password, 120)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){.auth = 1});
    ASSERT_NOT_NULL(c);
    char *dir = tl_tmpdir("rot"), pwfile[600], tmp[620], name[128], user[128], file[700];
    snprintf(pwfile, sizeof(pwfile), "%s/password", dir);
    FILE *f = fopen(pwfile, "w");
    ASSERT_NOT_NULL(f);
    fprintf(f, "%s\n", EH_USER_PASSWORD);
    fclose(f);
    ASSERT_OK(chmod(pwfile, 0600));
    snprintf(name, sizeof(name), "%srelease-rot", EH_USER_PREFIX);
    snprintf(user, sizeof(user), "RO_USER=%s", EH_USER);
    snprintf(file, sizeof(file), "RO_PASSWORD_FILE=%s", pwfile);
    char *env[] = {user, file, NULL};
    owner o;
    ASSERT_OK(owner_start(&o, eh_endpoints(c), name, env));
    ASSERT_GT(o.helper, 0);

    /* Rotated: in etcd (the user made again with its role), then the file. */
    char newpw[64], role[64];
    snprintf(newpw, sizeof(newpw), "%s:rotated-77", EH_USER);
    snprintf(role, sizeof(role), "%s-role", EH_USER);
    ASSERT_OK(eh_etcdctl(c, NULL, "user", "delete", EH_USER, NULL));
    ASSERT_OK(eh_etcdctl(c, NULL, "user", "add", newpw, NULL));
    ASSERT_OK(eh_etcdctl(c, NULL, "user", "grant-role", EH_USER, role, NULL));
    snprintf(tmp, sizeof(tmp), "%s.new", pwfile);
    f = fopen(tmp, "w");
    ASSERT_NOT_NULL(f);
    fprintf(f, "rotated-77\n");
    fclose(f);
    ASSERT_OK(rename(tmp, pwfile));

    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    cfg.user = EH_USER;
    cfg.password = "rotated-77";
    elector_etcd *e = elector_etcd_new(&cfg);
    elector_session *s = elector_session_new(e, NULL, NULL, NULL);
    ASSERT_OK(elector_session_wait(s, 10000));
    elector_election *el = elector_election_new(s, name, NULL, NULL);
    ASSERT_EQ(ELECTOR_ETIMEDOUT, elector_campaign_sync(el, "next", 4, 300));
    int64_t t0 = tl_now_ns();
    kill(o.ch.pid, SIGKILL);
    int64_t deadline = tl_now_ns() + 12000000000LL;
    while (!elector_is_leader(el) && tl_now_ns() < deadline)
        elector_etcd_run_once(e, 50);
    double ms = (double)(tl_now_ns() - t0) / 1e6;
    printf("password rotated, then SIGKILL: the next leads after %.1f ms\n", ms);
    ASSERT(elector_is_leader(el));
    ASSERT_LT(ms, HANDOVER_BOUND_MS);
    owner_reap(&o);
    ASSERT_EQ(0, helper_reap(o.helper));
    elector_election_free(el);
    ASSERT_OK(elector_session_close_sync(s, 5000));
    elector_etcd_free(e);
    free(dir);
    eh_stop(c);
}

/* The owner started with one member's endpoint, auto-sync learned the others,
 * and that member is gone: the helper was sent the list in use at the
 * session's next renewal, and revokes through the others after a SIGKILL
 * (before: it knew only the member it was started with, and the successor
 * waited for the TTL). */
TEST_WITH_TIMEOUT(release_helper_follows_the_endpoints_auto_sync_found, 120)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){.members = 3});
    ASSERT_NOT_NULL(c);
    char *env[] = {"RO_AUTOSYNC_MS=200", "RO_TTL=3", NULL};
    owner o;
    ASSERT_OK(owner_start(&o, eh_endpoint(c, 0), "release-sync", env));
    ASSERT_GT(o.helper, 0);
    char line[1024];
    ASSERT_OK(
        eu_child_expect(&o.ch, "notice: endpoints synced", line, sizeof(line), 5000));
    tl_log("%s", line);
    tl_msleep(1500); /* a renewal (every TTL/3 = 1 s) carries the list to the helper */
    ASSERT_OK(eh_member_stop(c, 0));
    eu_cand *next = successor(eh_endpoints(c), "release-sync");
    ASSERT_NOT_NULL(next);
    int st;
    double ms = handover(&o, next, 'k', &st);
    printf("the first member gone, then SIGKILL: the next leads after %.1f ms\n", ms);
    ASSERT_GE(ms, 0.0);
    ASSERT_LT(ms, HANDOVER_BOUND_MS);
    ASSERT_EQ(0, helper_reap(o.helper));
    eu_cand_free(next);
    eh_stop(c);
}

/* Two sessions on one client; one's helper is stopped (SIGSTOP) when the
 * session closes: the close returns at once, the other session's renewals
 * keep their period (TTL 3 s: one a second), and the stopped helper is
 * killed after 2 s and reaped by the loop (before: the close waited 2 s in
 * poll, and everything on the loop with it). */
TEST_WITH_TIMEOUT(release_stop_of_a_stopped_helper_stalls_no_other_session, 60)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){0});
    ASSERT_NOT_NULL(c);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    elector_etcd *e = elector_etcd_new(&cfg);
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = 3;
    elector_session *other = elector_session_new(e, &sc, NULL, NULL);
    sc.release_on_exit = true;
    elector_session *s = elector_session_new(e, &sc, NULL, NULL);
    ASSERT_OK(elector_session_wait(other, 10000));
    ASSERT_OK(elector_session_wait(s, 10000));
    int helper = elector_session_helper(s);
    ASSERT_GT(helper, 0);
    note_stray(helper);
    ASSERT_OK(kill(helper, SIGSTOP));
    elector_session_stats st0;
    elector_session_get_stats(other, &st0);
    double t0 = tl_now();
    elector_session_close(s);
    double in_close = tl_now() - t0;
    double gone_at = 0;
    uint64_t renewals = st0.renewals;
    double last = t0, worst_gap = 0;
    while (tl_now() - t0 < 3.5) {
        elector_etcd_run_once(e, 50);
        elector_session_stats st;
        elector_session_get_stats(other, &st);
        if (st.renewals != renewals) {
            renewals = st.renewals;
            if (tl_now() - last > worst_gap) worst_gap = tl_now() - last;
            last = tl_now();
        }
        if (!gone_at && kill(helper, 0) < 0 && errno == ESRCH) gone_at = tl_now() - t0;
    }
    tl_log("close: %.1f ms; the other session: %llu renewals in 3.5 s, worst gap %.2f s; "
           "the stopped helper reaped after %.2f s",
           in_close * 1e3, (unsigned long long)(renewals - st0.renewals), worst_gap,
           gone_at);
    ASSERT_LT(in_close, 0.05);
    ASSERT_GE(renewals - st0.renewals, 3);
    ASSERT_LT(worst_gap, 1.6);
    ASSERT_GE(gone_at, 1.9); /* given its 2 s */
    ASSERT_LT(gone_at, 3.0); /* then killed and reaped: no zombie */
    ASSERT(elector_session_alive(other));
    ASSERT_OK(elector_session_close_sync(other, 5000));
    elector_etcd_free(e);
    eh_stop(c);
}

static void adopted_notice(elector_etcd *e, int err, const char *msg, void *ud)
{
    (void)e, (void)err;
    snprintf(ud, 512, "%s", msg);
}

/* A session adopting a lease (lease_id) with release_on_exit starts no helper:
 * the lease may be another live process's, which the helper would revoke
 * under it when this one dies. elector_session_helper() says ELECTOR_EINVAL,
 * a notice says why, and the session works. */
TEST_WITH_TIMEOUT(release_on_exit_with_an_adopted_lease_starts_no_helper, 60)
{
    setup();
    eh_cluster *c = eh_start(&(eh_opts){0});
    ASSERT_NOT_NULL(c);
    char *out = NULL, id[32];
    ASSERT_OK(eh_etcdctl(c, &out, "lease", "grant", "30", NULL));
    ASSERT_EQ(1, sscanf(out, "lease %31s granted", id));
    free(out);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    elector_etcd *e = elector_etcd_new(&cfg);
    char said[512] = "";
    elector_etcd_set_notice(e, adopted_notice, said);
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.lease_id = (int64_t)strtoull(id, NULL, 16);
    sc.release_on_exit = true;
    elector_session *s = elector_session_new(e, &sc, NULL, NULL);
    ASSERT_OK(elector_session_wait(s, 10000));
    ASSERT_EQ(sc.lease_id, elector_session_lease(s));
    ASSERT_EQ(ELECTOR_EINVAL, elector_session_helper(s));
    tl_log("%s", said);
    ASSERT_CONTAINS(said, "adopted (lease_id): another process may use it");
    ASSERT(elector_session_alive(s));
    ASSERT_EQ(0, waitpid(-1, NULL, WNOHANG) > 0); /* no helper was spawned */
    ASSERT_OK(elector_session_close_sync(s, 5000));
    elector_etcd_free(e);
    eh_stop(c);
}
