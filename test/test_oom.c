/* SPDX-License-Identifier: MIT */
/* Allocation-failure injection (issue 23): one campaign and a failover against
 * a real single-member etcd, run once for every N with the Nth allocation of
 * the library failing (N = 1 .. the number of allocations the scenario makes).
 *
 * How: this program is linked with -Wl,--wrap=malloc,--wrap=calloc,
 * --wrap=realloc,--wrap=strdup (test/CMakeLists.txt), so every call to those
 * from the statically linked library (and the test's own objects) goes through
 * the wrappers below. They count, and fail the Nth call, only while `counting`
 * is set: during the scenario, never in the harness or in the checks.
 * Allocations made inside shared libraries (nghttp2, protobuf-c's default
 * allocator, libc's own) are not counted: only the library's own call sites.
 *
 * Each N runs in a forked child against the etcd the test started once. The
 * child checks, at every step, that the library believes nothing false: a
 * step that fails returns an error (or ends with a FAILED/LOST event), and
 * while elector_is_leader() is true our key is the leader key in etcd (read
 * through a client of its own, with counting off). The parent reports any
 * child that crashed, was killed by its timeout, exited non-zero (a sanitizer
 * report: ASan/UBSan abort, LeakSanitizer's exit code at exit) or saw a false
 * belief, with its N.
 *
 * Environment:
 *   ELECTOR_OOM_FULL=1   every N (20 to 40 s); default a sample of about 60 N
 *   ELECTOR_OOM_N=n      only that N (to debug one)
 *   ELECTOR_OOM_FROM=n   with ELECTOR_OOM_FULL: from that N on
 *   ELECTOR_OOM_RENEW=1  sessions of TTL 2 s, and 1.5 s of lease renewals
 *                        while B leads (each run 1.5 s longer: about 10 min)
 *   ELECTOR_OOM_VERBOSE=1  one line per N, and the waits that ran out
 *   ELECTOR_OOM_TRACE=1  the stack of the failing allocation (with _N)
 */
#include <errno.h>
#include <fcntl.h>
#include <execinfo.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "elector/election.h"
#include "elect_util.h"
#include "etcd_harness.h"
#include "testlib.h"

/* ---- the injector ------------------------------------------------------ */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);

/* Per thread: only the thread that turned it on counts (the driver's test
 * below counts on its loop thread alone; the other tests have one thread). */
static _Thread_local bool counting;
static long alloc_count; /* allocations seen while counting */
static long fail_at;     /* 0: none fails */
static long failed;      /* allocations made to fail */
static bool fail_all;    /* while counting: every allocation fails */

static bool inject(void)
{
    if (!counting) return false;
    alloc_count++;
    if (alloc_count == fail_at || fail_all) {
        failed++;
        if (getenv("ELECTOR_OOM_TRACE")) {
            /* Where the failing allocation is (addr2line -e test_oom -f -i). */
            void *bt[16];
            int n = backtrace(bt, 16);
            backtrace_symbols_fd(bt, n, 2);
        }
        return true;
    }
    return false;
}

void *__wrap_malloc(size_t n)
{
    if (inject()) return NULL;
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
    if (inject()) return NULL;
    return __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
    if (inject()) return NULL;
    return __real_realloc(p, n);
}

char *__wrap_strdup(const char *s)
{
    if (inject()) {
        errno = ENOMEM;
        return NULL;
    }
    return __real_strdup(s);
}

/* ---- the scenario (in the child) --------------------------------------- */

#define EXIT_BELIEF 10 /* a false belief: the child's exit status */

struct cand {
    const char *who;
    elector_etcd *etcd;
    elector_session *s;
    elector_election *el;
    int waiting, elected, ended; /* WAITING, ELECTED, FAILED/LOST/RESIGNED seen */
    int proclaimed;
    int64_t verified; /* the token last checked against etcd */
};

static const char *endpoints;
static char name[64];
static elector_etcd *verifier; /* made before counting starts */
static long run_n;
static long verified; /* leader beliefs checked against etcd */

static _Noreturn void belief(const struct cand *c, const char *what)
{
    fprintf(stderr, "test_oom: N=%ld: %s: false belief: %s\n", run_n, c->who, what);
    fflush(stderr);
    _exit(EXIT_BELIEF);
}

/* While c believes it leads, its key must be the leader key in etcd. */
static void check_belief(struct cand *c)
{
    if (!c->el || !elector_is_leader(c->el)) return;
    int64_t token = elector_election_token(c->el);
    if (token == c->verified) return;
    bool was = counting;
    counting = false;
    elector_leader_info li;
    int rc = elector_leader_sync(verifier, name, 5000, &li);
    if (rc == 1) belief(c, "leads, but etcd has no leader key");
    if (rc) {
        fprintf(stderr, "test_oom: N=%ld: verifier: %s\n", run_n, elector_strerror(rc));
        _exit(3);
    }
    size_t kl;
    const uint8_t *k = elector_election_key(c->el, &kl);
    if (li.token != token || li.key_len != kl || !k || memcmp(li.key, k, kl) != 0)
        belief(c, "leads, but the leader key in etcd is another");
    const elector_session *s = elector_election_session(c->el);
    if (!s || li.lease != elector_session_lease(s))
        belief(c, "leader key on another lease");
    elector_leader_free(&li);
    if (elector_is_leader(c->el)) c->verified = token;
    verified++;
    counting = was;
}

static void cand_cb(elector_election *el, const elector_event *ev, void *ud)
{
    struct cand *c = ud;
    /* A real etcd never breaks the protocol: an allocation of ours that failed
     * must not be reported as the server's fault. */
    if (ev->reason == ELECTOR_EPROTO) belief(c, "ELECTOR_EPROTO from a real etcd");
    switch (ev->type) {
    case ELECTOR_EV_WAITING:
        c->waiting++;
        break;
    case ELECTOR_EV_PROCLAIMED:
        c->proclaimed++;
        break;
    case ELECTOR_EV_ELECTED:
        c->elected++;
        if (!elector_is_leader(el)) belief(c, "ELECTED but is_leader() false");
        break;
    case ELECTOR_EV_FAILED:
    case ELECTOR_EV_LOST:
    case ELECTOR_EV_RESIGNED:
        c->ended++;
        if (elector_is_leader(el)) belief(c, "ended but is_leader() true");
        break;
    default:
        break;
    }
}

/* An error a step returned: never ELECTOR_EPROTO from a real etcd. */
static int step(struct cand *c, const char *what, int rc)
{
    if (rc == ELECTOR_EPROTO) {
        fprintf(stderr, "test_oom: N=%ld: %s: %s: ELECTOR_EPROTO from a real etcd\n",
                run_n, c->who, what);
        _exit(EXIT_BELIEF);
    }
    return rc;
}

static bool verbose;
static bool renew; /* ELECTOR_OOM_RENEW: TTL 2 s and 1.5 s of renewals */
static int stalls;

/* A wait that ran out: the library neither answered nor failed in time. */
static void stall(const char *what)
{
    stalls++;
    if (verbose) fprintf(stderr, "test_oom: N=%ld: no answer: %s\n", run_n, what);
}

static int obs_events;
static void obs_cb(elector_observer *o, const elector_event *ev, void *ud)
{
    (void)o, (void)ud;
    if (ev->reason == ELECTOR_EPROTO) {
        fprintf(stderr, "test_oom: N=%ld: observer: ELECTOR_EPROTO from a real etcd\n",
                run_n);
        _exit(EXIT_BELIEF);
    }
    obs_events++;
}

/* Pumps both clients for up to ms or until done(); checks beliefs each turn. */
static void pump(struct cand *a, struct cand *b, const char *what, int ms,
                 bool (*done)(void *), void *arg)
{
    int64_t end = elector_now_ns() + (int64_t)ms * 1000000;
    struct cand *cs[2] = {a, b};
    for (;;) {
        for (int i = 0; i < 2; i++)
            check_belief(cs[i]);
        if (done && done(arg)) return;
        int64_t left = (end - elector_now_ns()) / 1000000;
        if (left < 0) {
            if (done) stall(what);
            return;
        }
        struct pollfd pfd[2];
        elector_etcd *who[2];
        int n = 0;
        int64_t wait = left + 1;
        for (int i = 0; i < 2; i++) {
            if (!cs[i]->etcd) continue;
            int64_t t = elector_etcd_timeout(cs[i]->etcd);
            if (t >= 0 && t < wait) wait = t;
            pfd[n].fd = elector_etcd_fd(cs[i]->etcd);
            pfd[n].events = POLLIN;
            who[n++] = cs[i]->etcd;
        }
        if (wait > 20) wait = 20;
        poll(pfd, (nfds_t)n, (int)wait);
        for (int i = 0; i < n; i++)
            elector_etcd_process(who[i]);
    }
}

static bool has_settled(void *p)
{
    struct cand *c = p;
    return c->elected || c->ended;
}

static bool has_proclaimed(void *p)
{
    struct cand *c = p;
    return c->proclaimed || c->ended;
}

static bool has_queued(void *p)
{
    struct cand *c = p;
    return c->waiting || c->elected || c->ended;
}

static bool has_ended(void *p)
{
    struct cand *a = p;
    return a->ended > 0;
}

static elector_etcd *client(void)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = endpoints;
    cfg.dial_timeout_ms = 2000;
    cfg.request_timeout_ms = 3000;
    elector_etcd *e = elector_etcd_new(&cfg);
    if (e && elector_etcd_err(e)) {
        elector_etcd_free(e); /* a handle in error (e.g. ELECTOR_ENOMEM) */
        return NULL;
    }
    return e;
}

/* A candidate up to a granted session and an election handle; false if a step
 * failed (what it made is kept in c for the teardown). */
static bool cand_start(struct cand *c)
{
    if (!(c->etcd = client())) return false;
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = renew ? 2 : 5;
    if (!(c->s = elector_session_new(c->etcd, &sc, NULL, NULL))) return false;
    int rc = step(c, "session_wait", elector_session_wait(c->s, 5000));
    if (rc == ELECTOR_ETIMEDOUT) stall("session_wait");
    if (rc) return false;
    c->el = elector_election_new(c->s, name, cand_cb, c);
    return c->el != NULL;
}

static void cand_end(struct cand *c)
{
    if (c->el) elector_election_free(c->el);
    c->el = NULL;
    if (c->s) elector_session_close_sync(c->s, 2000);
    c->s = NULL;
    if (c->etcd) elector_etcd_free(c->etcd);
    c->etcd = NULL;
}

static void scenario(void)
{
    struct cand a = {.who = "A"}, b = {.who = "B"};
    elector_observer *obs = NULL;
    counting = true;

    if (!cand_start(&a)) goto out;
    int rc = step(&a, "campaign_sync", elector_campaign_sync(a.el, "a", 1, 5000));
    if (rc == ELECTOR_ETIMEDOUT) stall("A campaign_sync");
    if (rc) {
        if (elector_is_leader(a.el)) belief(&a, "campaign failed, is_leader() true");
        goto out;
    }
    if (!elector_is_leader(a.el)) belief(&a, "campaign_sync 0, is_leader() false");
    check_belief(&a);

    if (!cand_start(&b)) goto out;
    obs = elector_observe(b.etcd, name, obs_cb, NULL);
    rc = step(&b, "campaign", elector_campaign(b.el, "b", 1));
    if (rc) {
        if (elector_is_leader(b.el)) belief(&b, "campaign refused, is_leader() true");
        goto out;
    }
    pump(&a, &b, "B waiting", 3000, has_queued, &b); /* B waits behind A */
    if (b.elected && a.ended == 0 && elector_is_leader(a.el))
        belief(&b, "elected while A leads");

    /* The failover: A resigns, B follows. */
    if (elector_resign(a.el) == 0 && elector_is_leader(a.el))
        belief(&a, "resigned, is_leader() true");
    pump(&a, &b, "B elected", 5000, has_settled, &b);
    pump(&a, &b, "A resigned", 2000, has_ended, &a);
    if (elector_is_leader(b.el)) {
        if (elector_proclaim(b.el, "b2", 2) == 0)
            pump(&a, &b, "B proclaimed", 3000, has_proclaimed, &b);
        /* Renewals of both leases on the keepalive streams (every TTL/3). */
        if (renew) pump(&a, &b, "renewals", 1500, NULL, NULL);
        char k[96];
        snprintf(k, sizeof(k), "%s-data", name);
        rc = step(&b, "guarded_put_sync",
                  elector_guarded_put_sync(b.el, k, strlen(k), "v", 1, 3000));
        if (rc == ELECTOR_ETIMEDOUT) stall("B guarded_put_sync");
        check_belief(&b);
        /* The second failover: A campaigns again, behind B; B's session is
         * closed (its lease revoked), A follows. */
        a.waiting = a.elected = a.ended = 0;
        bool again = step(&a, "campaign", elector_campaign(a.el, "a2", 2)) == 0;
        if (again) pump(&a, &b, "A waiting again", 3000, has_queued, &a);
        elector_session_close(b.s);
        b.s = NULL;
        if (elector_is_leader(b.el)) belief(&b, "session closed, is_leader() true");
        if (again) pump(&a, &b, "A elected again", 5000, has_settled, &a);
        pump(&a, &b, "B lost", 2000, has_ended, &b);
        if (elector_is_leader(a.el)) {
            rc = step(&a, "guarded_delete_sync",
                      elector_guarded_delete_sync(a.el, k, strlen(k), 3000));
            if (rc == ELECTOR_ETIMEDOUT) stall("A guarded_delete_sync");
        }
        elector_leader_info li;
        if (step(&a, "leader_sync", elector_leader_sync(a.etcd, name, 3000, &li)) == 0)
            elector_leader_free(&li);
    }
out:
    check_belief(&a);
    check_belief(&b);
    if (obs) elector_observer_free(obs);
    cand_end(&b);
    cand_end(&a);
    counting = false;
}

/* Runs the scenario with the Nth allocation failing (0: none) in a child.
 * Returns the child's wait status; *count = allocations it made. */
static int run_one(long n, long *count, long *checks, double *secs)
{
    int p[2];
    ASSERT_OK(pipe(p));
    double t0 = tl_now();
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        run_n = n;
        fail_at = n;
        verifier = client();
        if (!verifier) _exit(4);
        scenario();
        elector_etcd_free(verifier);
        long r[3] = {alloc_count, failed, verified + 1000 * obs_events};
        if (write(p[1], r, sizeof r) != (ssize_t)sizeof r) _exit(5);
        close(p[1]);
        exit(0); /* exit, not _exit: LeakSanitizer checks at exit */
    }
    close(p[1]);
    long r[3] = {-1, -1, -1};
    /* The child's cap: every blocking step has its own timeout (about 30 s
     * in all); a child still running after 60 s hangs. */
    struct pollfd pfd = {.fd = p[0], .events = POLLIN};
    int pr = poll(&pfd, 1, 60000);
    if (pr == 0) {
        kill(pid, SIGKILL);
        fprintf(stderr, "test_oom: N=%ld: hangs (killed after 60 s)\n", n);
    } else if (read(p[0], r, sizeof r) != (ssize_t)sizeof r) {
        r[0] = -1;
    }
    close(p[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    *count = r[0];
    *checks = r[2];
    *secs = tl_now() - t0;
    return pr == 0 ? -1 : st;
}

#if defined(__SANITIZE_ADDRESS__)
#define OOM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OOM_ASAN 1
#endif
#endif

#ifdef OOM_ASAN
/* The leak check can fail: a child that leaks exits non-zero (LeakSanitizer
 * runs at its exit()), unless ASAN_OPTIONS turned it off. */
static void check_leak_detection(void)
{
    const char *ao = getenv("ASAN_OPTIONS");
    if (ao && strstr(ao, "detect_leaks=0")) {
        tl_log("ASAN_OPTIONS has detect_leaks=0: leaks go unseen");
        return;
    }
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) dup2(fd, 2); /* the expected report */
        for (int i = 0; i < 8; i++) {
            char *p = malloc(1000);
            if (p) p[0] = 1;
            __asm__ volatile("" : : "r"(p) : "memory");
        }
        exit(0);
    }
    int st = 0;
    ASSERT_EQ(pid, waitpid(pid, &st, 0));
    ASSERT(!(WIFEXITED(st) && WEXITSTATUS(st) == 0));
}
#endif

static long env_long(const char *v, long dflt)
{
    const char *s = getenv(v);
    return s && *s ? strtol(s, NULL, 10) : dflt;
}

TEST_WITH_TIMEOUT(oom_campaign_failover, 7200)
{
#ifdef OOM_ASAN
    check_leak_detection();
#endif
    eh_opts o = {.members = 1};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    endpoints = eh_endpoints(c);
    verbose = env_long("ELECTOR_OOM_VERBOSE", 0) != 0;
    renew = env_long("ELECTOR_OOM_RENEW", 0) != 0;

    /* The baseline: nothing fails; how many allocations the scenario makes. */
    snprintf(name, sizeof(name), "oom-0");
    long total = 0, checks = 0;
    double secs;
    int st = run_one(0, &total, &checks, &secs);
    ASSERT_EQ(0, st);
    ASSERT_GT(total, 0);
    /* The checks ran: A's, B's and A's again leadership read back from etcd, and the
     * observer saw the leaders (else the scenario did not do its failover). */
    ASSERT_EQ(3, checks % 1000);
    ASSERT_GE(checks / 1000, 1);
    tl_log("baseline: %ld allocations, %.2f s", total, secs);

    long only = env_long("ELECTOR_OOM_N", 0);
    bool full = env_long("ELECTOR_OOM_FULL", 0) != 0;
    long step = full || only ? 1 : (total + 59) / 60;
    long first = only ? only : 1, last = only ? only : total;
    /* The sample starts at a different offset on each run of the test. */
    if (!full && !only && step > 1) first = 1 + (long)(tl_now_ns() / 1000) % step;
    if (full && env_long("ELECTOR_OOM_FROM", 0) > 0)
        first = env_long("ELECTOR_OOM_FROM", 0);
    int bad = 0, runs = 0;
    char bad_list[1024] = "";
    double t0 = tl_now();
    for (long n = first; n <= last; n += step) {
        snprintf(name, sizeof(name), "oom-%ld", n);
        long count = 0;
        st = run_one(n, &count, &checks, &secs);
        runs++;
        bool ok = st == 0 && count >= 0;
        if (verbose || !ok)
            tl_log("N=%ld: %s (status %d, %ld allocations, %.2f s)", n,
                   ok ? "ok" : "FAILED", st, count, secs);
        if (!ok) {
            bad++;
            size_t l = strlen(bad_list);
            snprintf(bad_list + l, sizeof(bad_list) - l, " %ld", n);
        }
    }
    tl_log("%d runs (N %ld..%ld step %ld) in %.1f s; %d failed:%s", runs, first, last,
           step, tl_now() - t0, bad, bad_list);
    eh_stop(c);
    ASSERT_EQ(0, bad);
}

/* A grant refused as a timeout is sent again after a pause; when that new grant
 * cannot even be sent (out of memory), the session ends with the error at once
 * instead of waiting, granting, forever (session.c grant_retry_fired). */
TEST_WITH_TIMEOUT(oom_grant_retry_that_cannot_be_sent_ends_the_session, 60)
{
    eh_opts o = {.members = 1};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    cfg.request_timeout_ms = 300;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    /* Connected first: a grant on a connection that cannot be made is not
     * retried (ECONNECT ends the session). */
    elector_session *first = elector_session_new(e, NULL, NULL, NULL);
    ASSERT_NOT_NULL(first);
    ASSERT_EQ(0, elector_session_wait(first, 10000));
    ASSERT_EQ(0, elector_session_close_sync(first, 5000));
    ASSERT_OK(eh_member_pause(c, 0));
    elector_session *s = elector_session_new(e, NULL, NULL, NULL);
    ASSERT_NOT_NULL(s);
    elector_session_stats st;
    double end = tl_now() + 10;
    do {
        elector_etcd_run_once(e, 20);
        elector_session_get_stats(s, &st);
    } while (st.grant_retries == 0 && tl_now() < end);
    ASSERT_EQ(1, (int)st.grant_retries); /* timed out; the retry's timer is armed */
    /* The library's next allocation fails: the retry's request. */
    alloc_count = 0;
    fail_at = 1;
    failed = 0;
    counting = true;
    int rc = elector_session_wait(s, 3000);
    counting = false;
    fail_at = 0;
    tl_log("grant retry out of memory: %s (%ld allocation failed)", elector_err_name(rc),
           failed);
    ASSERT_EQ(1, (int)failed);
    ASSERT_EQ(ELECTOR_ENOMEM, rc);
    ASSERT(!elector_session_alive(s));
    ASSERT_OK(eh_member_resume(c, 0));
    elector_session_close(s);
    elector_etcd_free(e);
    eh_stop(c);
}

static bool lease_listed(eh_cluster *c, int64_t lease)
{
    char hex[32], *out = NULL;
    snprintf(hex, sizeof(hex), "%llx", (long long)lease);
    if (eh_etcdctl(c, &out, "lease", "list", NULL)) return true;
    bool listed = strstr(out, hex) != NULL;
    free(out);
    return listed;
}

/* Runs e's loop until lease is no longer listed in etcd (at most 3 s; its TTL
 * is 30 s); true if it went. */
static bool revoked_soon(eh_cluster *c, elector_etcd *e, int64_t lease)
{
    for (int i = 0; i < 30; i++) {
        double end = tl_now() + 0.1;
        while (tl_now() < end)
            elector_etcd_run_once(e, 20);
        if (!lease_listed(c, lease)) return true;
    }
    return false;
}

static void never_closed(int rc, void *ud)
{
    (void)rc;
    ++*(int *)ud;
}

/* Closing a session without memory for the wait: the call says ENOMEM, the
 * session is closed all the same and its lease still revoked (the revoke needs
 * no allocation of the closing call's own). */
TEST_WITH_TIMEOUT(oom_close_without_memory_still_revokes, 60)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1});
    ASSERT_NOT_NULL(c);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = 30;
    for (int sync = 0; sync < 2; sync++) {
        elector_session *s = elector_session_new(e, &sc, NULL, NULL);
        ASSERT_NOT_NULL(s);
        ASSERT_EQ(0, elector_session_wait(s, 10000));
        int64_t lease = elector_session_lease(s);
        ASSERT(lease_listed(c, lease));
        int calls = 0;
        alloc_count = 0;
        fail_at = 1;
        failed = 0;
        counting = true;
        int rc = sync ? elector_session_close_sync(s, 3000)
                      : elector_session_close_async(s, 3000, never_closed, &calls);
        counting = false;
        fail_at = 0;
        tl_log("close_%s out of memory: %s", sync ? "sync" : "async",
               elector_err_name(rc));
        ASSERT_EQ(1, (int)failed);
        if (sync) {
            /* revoked before it returns: nothing left queued for the loop */
            ASSERT_EQ(0, rc);
            ASSERT(!lease_listed(c, lease));
        } else {
            ASSERT_EQ(ELECTOR_ENOMEM, rc);
            ASSERT(revoked_soon(c, e, lease));
        }
        ASSERT_EQ(0, calls); /* the callback of a call that failed never runs */
    }
    elector_etcd_free(e);
    eh_stop(c);
}

/* own_thread: elector_session_close() with no memory on the calling thread,
 * the client freed right after: the free must wait for the close's revoke as
 * for any other (it cancels what is still pending), so the lease is gone, not
 * left to its TTL. The revoke of a close nobody is told of is counted with no
 * record to allocate (before: a record that could not be made left the revoke
 * uncounted, and the lease alive in 3-4 runs of 5). close_async without memory
 * for its record falls back to that close. */
TEST_WITH_TIMEOUT(oom_own_thread_close_without_record_then_free_revokes, 60)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1});
    ASSERT_NOT_NULL(c);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = 30;
    for (int i = 0; i < 5; i++) {
        elector_etcd *e = NULL;
        ASSERT_OK(eu_own_new(&cfg, NULL, &e));
        elector_session *s = elector_session_new(e, &sc, NULL, NULL);
        ASSERT_NOT_NULL(s);
        ASSERT_EQ(0, elector_session_wait(s, 10000));
        int64_t lease = elector_session_lease(s);
        ASSERT(lease_listed(c, lease));
        failed = 0;
        fail_all = true;
        counting = true; /* this thread's allocations alone */
        elector_session_close(s);
        counting = false;
        fail_all = false;
        elector_etcd_free(e);
        bool listed = lease_listed(c, lease);
        tl_log("run %d: %ld allocations failed in the close; lease %s after the free", i,
               failed, listed ? "STILL THERE" : "gone");
        ASSERT(!listed);
    }
    eh_stop(c);
}

/* close_sync whose revoke call cannot be queued (out of memory at each of its
 * first allocations, in turn): the lease is revoked before it returns, so a
 * client freed right after loses nothing. */
TEST_WITH_TIMEOUT(oom_close_sync_revokes_before_the_client_is_freed, 60)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1});
    ASSERT_NOT_NULL(c);
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = 30;
    for (int n = 1; n <= 8; n++) {
        elector_etcd_config cfg;
        elector_etcd_config_init(&cfg);
        cfg.endpoints = eh_endpoints(c);
        elector_etcd *e = elector_etcd_new(&cfg);
        ASSERT_NOT_NULL(e);
        elector_session *s = elector_session_new(e, &sc, NULL, NULL);
        ASSERT_NOT_NULL(s);
        ASSERT_EQ(0, elector_session_wait(s, 10000));
        int64_t lease = elector_session_lease(s);
        alloc_count = 0;
        fail_at = n;
        failed = 0;
        counting = true;
        int rc = elector_session_close_sync(s, 3000);
        counting = false;
        fail_at = 0;
        tl_log("close_sync, allocation %d failing (%d failed): %s", n, (int)failed,
               elector_err_name(rc));
        elector_etcd_free(e); /* at once: a revoke still queued would be lost */
        ASSERT_EQ(0, rc);
        ASSERT(!lease_listed(c, lease));
    }
    eh_stop(c);
}

/* ---- the driver's calls without memory --------------------------------- */

/* In a child, a driver with a session on etcd; then, on the loop thread (in
 * elector_etcd_exec, so that the calls run inline and their jobs' own
 * allocations are counted too, and no other work of the loop interleaves),
 * the non-blocking calls, the Nth allocation failing. Each call must succeed
 * or fail cleanly (NULL, ENOMEM); every answer that is promised must come;
 * then the driver is freed (LeakSanitizer checks at exit). */
typedef struct drv_oom {
    elector_etcd *d;
    elector_session *s;
    elector_election *el;
    elector_observer *o;
    int rc_campaign, rc_leader, rc_put, rc_get, rc_revoke;
    long n;
} drv_oom;

static atomic_int drv_answers, drv_enomem; /* answers; those with ENOMEM */

static void drv_leader_cb(elector_etcd *d, int rc, const elector_leader_info *i, void *ud)
{
    (void)d, (void)i, (void)ud;
    atomic_fetch_add(&drv_enomem, rc == ELECTOR_ENOMEM);
    atomic_fetch_add(&drv_answers, 1);
}

static void drv_kv_cb(elector_etcd *d, int rc, const elector_kv *kvs, size_t n,
                      int64_t deleted, void *ud)
{
    (void)d, (void)kvs, (void)n, (void)deleted, (void)ud;
    atomic_fetch_add(&drv_enomem, rc == ELECTOR_ENOMEM);
    atomic_fetch_add(&drv_answers, 1);
}

static void drv_revoke_cb(elector_etcd *d, int rc, void *ud)
{
    (void)d, (void)ud;
    atomic_fetch_add(&drv_enomem, rc == ELECTOR_ENOMEM);
    atomic_fetch_add(&drv_answers, 1);
}

static bool clean(int rc)
{
    return rc == 0 || rc == ELECTOR_ENOMEM;
}

static void drv_calls(elector_etcd *etcd, void *arg)
{
    (void)etcd;
    drv_oom *x = arg;
    alloc_count = 0;
    failed = 0;
    fail_at = x->n;
    counting = true;
    x->el = elector_election_new(x->s, "oomdrv", NULL, NULL);
    x->rc_campaign = x->el ? elector_campaign(x->el, "v", 1) : 0;
    x->o = elector_observe(x->d, "oomdrv", NULL, NULL);
    x->rc_leader = elector_leader(x->d, "oomdrv", 3000, drv_leader_cb, NULL);
    x->rc_put = elector_kv_put(x->d, "oomdrv-p", 8, "v", 1, 0, 0, 3000, drv_kv_cb, NULL);
    x->rc_get = elector_kv_get(x->d, "oomdrv-", 7, true, 3000, drv_kv_cb, NULL);
    x->rc_revoke = elector_lease_revoke(x->d, 12345, 3000, drv_revoke_cb, NULL);
    counting = false;
    fail_at = 0;
}

static int drv_run_one(long n, long *count, long *seen)
{
    int p[2];
    ASSERT_OK(pipe(p));
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        elector_etcd_config cfg;
        elector_etcd_config_init(&cfg);
        cfg.endpoints = endpoints;
        cfg.own_thread = true;
        drv_oom x = {.n = n};
        x.d = elector_etcd_new(&cfg);
        if (!x.d || elector_etcd_err(x.d)) _exit(20);
        x.s = elector_session_new(x.d, NULL, NULL, NULL);
        if (!x.s || elector_session_wait(x.s, 5000)) _exit(21);
        if (elector_etcd_exec(x.d, drv_calls, &x)) _exit(22);
        int promised =
            (x.rc_leader == 0) + (x.rc_put == 0) + (x.rc_get == 0) + (x.rc_revoke == 0);
        if (!clean(x.rc_campaign) || !clean(x.rc_leader) || !clean(x.rc_put) ||
            !clean(x.rc_get) || !clean(x.rc_revoke)) {
            fprintf(stderr,
                    "test_oom: driver N=%ld: a call failed otherwise: %d %d %d %d %d\n",
                    n, x.rc_campaign, x.rc_leader, x.rc_put, x.rc_get, x.rc_revoke);
            _exit(23);
        }
        for (int i = 0; i < 500 && atomic_load(&drv_answers) < promised; i++)
            usleep(10000);
        if (atomic_load(&drv_answers) != promised) {
            fprintf(stderr, "test_oom: driver N=%ld: %d answers of %d\n", n,
                    atomic_load(&drv_answers), promised);
            _exit(24);
        }
        if (x.o) elector_observer_free(x.o);
        if (x.el) elector_election_free(x.el);
        elector_session_close(x.s);
        elector_etcd_free(x.d);
        /* Seen by the caller: a call refused or an answer with ENOMEM. */
        bool saw = !x.el || !x.o || x.rc_campaign || x.rc_leader || x.rc_put ||
                   x.rc_get || x.rc_revoke || atomic_load(&drv_enomem);
        long r[2] = {alloc_count, failed * 10 + saw};
        if (write(p[1], r, sizeof r) != (ssize_t)sizeof r) _exit(25);
        close(p[1]);
        exit(0); /* LeakSanitizer checks at exit */
    }
    close(p[1]);
    long r[2] = {-1, -1};
    struct pollfd pfd = {.fd = p[0], .events = POLLIN};
    int pr = poll(&pfd, 1, 30000);
    if (pr == 0) {
        kill(pid, SIGKILL);
        fprintf(stderr, "test_oom: driver N=%ld: hangs (killed after 30 s)\n", n);
    } else if (read(p[0], r, sizeof r) != (ssize_t)sizeof r) {
        r[0] = r[1] = -1;
    }
    close(p[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    *count = r[0];
    *seen = r[1];
    return pr == 0 ? -1 : st;
}

TEST_WITH_TIMEOUT(oom_driver_calls_fail_cleanly, 300)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1});
    ASSERT_NOT_NULL(c);
    endpoints = eh_endpoints(c);
    long total = 0, seen = 0, visible = 0;
    int st = drv_run_one(0, &total, &seen);
    ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    tl_log("driver calls: %ld allocations without failures", total);
    ASSERT_GT(total, 5);
    double t0 = tl_now();
    int bad = 0;
    for (long n = 1; n <= total; n++) {
        long cnt;
        st = drv_run_one(n, &cnt, &seen);
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) || seen / 10 != 1) {
            fprintf(stderr, "test_oom: driver N=%ld: status 0x%x, failed %ld\n", n, st,
                    seen / 10);
            bad++;
        }
        visible += seen % 10;
    }
    tl_log("driver calls: N = 1..%ld in %.1f s, %d bad, %ld failures seen by the caller",
           total, tl_now() - t0, bad, visible);
    ASSERT_EQ(0, bad);
    ASSERT_GE(visible, total / 2); /* the rest: events lost (said on stderr) */
    eh_stop(c);
}

/* elector_election_new failing at each of its allocations returns NULL and
 * keeps nothing: with LeakSanitizer (the ASan build) a leak fails the test
 * (found by scripts/mutate.sh: campaign.c, the prefix not freed when the
 * client's table of names cannot grow, survived). The name is free again:
 * the object made once memory returns campaigns and is elected. */
TEST_WITH_TIMEOUT(oom_election_new_keeps_nothing, 60)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1});
    ASSERT_NOT_NULL(c);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    elector_session *s = elector_session_new(e, NULL, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_EQ(0, elector_session_wait(s, 10000));
    elector_election *el = NULL;
    long n;
    for (n = 1; n < 50 && !el; n++) {
        alloc_count = 0;
        fail_at = n;
        failed = 0;
        counting = true;
        el = elector_election_new(s, "oom-new", NULL, NULL);
        counting = false;
        fail_at = 0;
        if (failed) ASSERT_NULL(el);
    }
    tl_log("elector_election_new: %ld allocations", n - 2);
    ASSERT_NOT_NULL(el);
    ASSERT_GE(n - 2, 4); /* the election, its name, its prefix, the table of names */
    ASSERT_EQ(0, elector_campaign_sync(el, "v", 1, 5000));
    ASSERT(elector_is_leader(el));
    elector_election_free(el);
    ASSERT_EQ(0, elector_session_close_sync(s, 3000));
    elector_etcd_free(e);
    eh_stop(c);
}

struct counts {
    int elected, lost, resigned, failed;
};

static void count_events(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el;
    struct counts *k = ud;
    k->elected += ev->type == ELECTOR_EV_ELECTED;
    k->lost += ev->type == ELECTOR_EV_LOST;
    k->resigned += ev->type == ELECTOR_EV_RESIGNED;
    k->failed += ev->type == ELECTOR_EV_FAILED;
}

/* A resign whose delete cannot be sent (no memory) retries it from a timer
 * 50 ms later; a campaign started at once takes over: it stops that timer.
 * The key was never deleted, so the new campaign finds it and leads with its
 * create revision; the old resign's retry, had it fired, would delete that
 * very key (guarded by the same revision) under the new leader (found by
 * scripts/mutate.sh: campaign.c, the new campaign not stopping the retry). */
TEST_WITH_TIMEOUT(oom_resign_unsent_then_campaign_keeps_the_key, 60)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1});
    ASSERT_NOT_NULL(c);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    elector_session *s = elector_session_new(e, NULL, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_EQ(0, elector_session_wait(s, 10000));
    struct counts k = {0};
    elector_election *el = elector_election_new(s, "oom-resign", count_events, &k);
    ASSERT_NOT_NULL(el);
    ASSERT_EQ(0, elector_campaign_sync(el, "a", 1, 5000));
    int64_t token = elector_election_token(el);
    failed = 0;
    fail_all = true;
    counting = true;
    int rc = elector_resign(el);
    counting = false;
    fail_all = false;
    ASSERT_EQ(0, rc);
    ASSERT_GE(failed, 1);
    ASSERT(!elector_is_leader(el));
    ASSERT_EQ(0, elector_campaign_sync(el, "b", 1, 5000));
    ASSERT_EQ(token, elector_election_token(el)); /* the same key: it was not deleted */
    double end = tl_now() + 0.5;
    while (tl_now() < end)
        elector_etcd_run_once(e, 20);
    ASSERT(elector_is_leader(el));
    ASSERT_EQ(0, k.lost + k.resigned + k.failed);
    elector_leader_info li;
    ASSERT_EQ(0, elector_leader_sync(e, "oom-resign", 3000, &li));
    ASSERT_EQ(token, li.token);
    elector_leader_free(&li);
    elector_election_free(el);
    ASSERT_EQ(0, elector_session_close_sync(s, 3000));
    elector_etcd_free(e);
    eh_stop(c);
}

/* A resign survives the failure of any one of its allocations: RESIGNED comes
 * (the delete not sent is retried 50 ms later) and our key is gone. Found by
 * scripts/mutate.sh: delete.c, a delete whose send failed reported as sent,
 * survived; the resign then waited for an answer that never came. */
TEST_WITH_TIMEOUT(oom_resign_at_each_allocation_still_deletes_the_key, 60)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1});
    ASSERT_NOT_NULL(c);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    elector_session *s = elector_session_new(e, NULL, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_EQ(0, elector_session_wait(s, 10000));
    struct counts k = {0};
    elector_election *el = elector_election_new(s, "oom-resign-n", count_events, &k);
    ASSERT_NOT_NULL(el);
    long n;
    for (n = 1; n < 100; n++) {
        ASSERT_EQ(0, elector_campaign_sync(el, "a", 1, 5000));
        int resigned = k.resigned;
        alloc_count = 0;
        fail_at = n;
        failed = 0;
        counting = true;
        int rc = elector_resign(el);
        counting = false;
        fail_at = 0;
        ASSERT_EQ(0, rc);
        double end = tl_now() + 3;
        while (k.resigned == resigned && tl_now() < end)
            elector_etcd_run_once(e, 20);
        if (k.resigned == resigned) tl_log("N=%ld: no RESIGNED within 3 s", n);
        ASSERT_EQ(resigned + 1, k.resigned);
        elector_leader_info li;
        ASSERT_EQ(1, elector_leader_sync(e, "oom-resign-n", 3000, &li));
        if (!failed) break;
    }
    tl_log("elector_resign: %ld allocations", n - 1);
    ASSERT_GE(n - 1, 1);
    ASSERT_EQ(0, k.lost + k.failed);
    elector_election_free(el);
    ASSERT_EQ(0, elector_session_close_sync(s, 3000));
    elector_etcd_free(e);
    eh_stop(c);
}

/* ---- the driver's answers without memory ------------------------------- */

/* As oom_driver_calls_fail_cleanly, but the count goes on on the loop thread
 * after the calls, while their answers and the events come in: the Nth
 * allocation of the calls or of their answers fails (the copies of keys and
 * values, the callback queue's items). Each call succeeds or fails with
 * ENOMEM; each promised answer comes once, or its loss is said on stderr
 * ("... answer is lost"); nothing hangs, crashes or leaks (ASan build). */
typedef struct drv_ans {
    elector_etcd *d;
    elector_session *s, *s2;
    elector_election *el;
    elector_observer *o;
    int rc[5]; /* leader, get, put, revoke, guarded */
    long n;
    char name[32], prefix[48]; /* of each N's own: an earlier one's lease may live on */
} drv_ans;

static atomic_int ans_events;
/* What ans_calls makes (set before the fork): a session, an observer, then
 * the leader read, get, put, revoke, guarded write. One call at a time makes
 * the order of the allocations the same in every run; all of them at once
 * mixes the answers. */
enum { A_SESSION = 1, A_OBSERVE = 2, A_CALLS = 3 };
static unsigned ans_mask;
static long ans_seq; /* a name of each run's own: an earlier one's lease may live on */

static void ans_guarded_cb(elector_election *el, int err, void *ud)
{
    (void)el, (void)ud;
    atomic_fetch_add(&drv_enomem, err == ELECTOR_ENOMEM);
    atomic_fetch_add(&drv_answers, 1);
}

static void ans_obs_cb(elector_observer *o, const elector_event *ev, void *ud)
{
    (void)o, (void)ev, (void)ud;
    atomic_fetch_add(&ans_events, 1);
}

static void ans_calls(elector_etcd *etcd, void *arg)
{
    (void)etcd;
    drv_ans *x = arg;
    alloc_count = 0;
    failed = 0;
    fail_at = x->n;
    counting = true; /* on this (the loop) thread until ans_stop */
    unsigned m = ans_mask;
    for (int i = 0; i < 5; i++)
        x->rc[i] = 1; /* not made */
    if (m & A_SESSION) x->s2 = elector_session_new(x->d, NULL, NULL, NULL);
    if (m & A_OBSERVE) x->o = elector_observe(x->d, x->name, ans_obs_cb, NULL);
    if (m & (1u << A_CALLS))
        x->rc[0] = elector_leader(x->d, x->name, 3000, drv_leader_cb, NULL);
    if (m & (2u << A_CALLS))
        x->rc[1] = elector_kv_get(x->d, x->prefix, strlen(x->prefix), true, 3000,
                                  drv_kv_cb, NULL);
    if (m & (4u << A_CALLS))
        x->rc[2] =
            elector_kv_put(x->d, "oomans-p", 8, "v", 1, 0, 0, 3000, drv_kv_cb, NULL);
    if (m & (8u << A_CALLS))
        x->rc[3] = elector_lease_revoke(x->d, 12345, 3000, drv_revoke_cb, NULL);
    if (m & (16u << A_CALLS))
        x->rc[4] =
            elector_guarded_put(x->el, "oomans-g", 8, "v", 1, ans_guarded_cb, NULL);
}

static void ans_stop(elector_etcd *etcd, void *arg)
{
    (void)etcd, (void)arg;
    counting = false;
    fail_at = 0;
}

/* How many times the child's stderr (fd) says what. */
static int said_in(int fd, const char *what)
{
    char buf[8192];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = 0;
    int k = 0;
    for (char *p = buf; (p = strstr(p, what)) != NULL; p++)
        k++;
    return k;
}

static _Noreturn void ans_child(long n, int out)
{
    char path[] = "/tmp/elector-oom-ans-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) _exit(30);
    unlink(path);
    int err = dup(2);
    dup2(fd, 2);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = endpoints;
    drv_ans x = {.n = n};
    snprintf(x.name, sizeof x.name, "oomans%ld", ans_seq);
    snprintf(x.prefix, sizeof x.prefix, "oomans%ld-k/", ans_seq);
    size_t pl = strlen(x.prefix);
    char k1[64], k2[64];
    snprintf(k1, sizeof k1, "%s1", x.prefix);
    snprintf(k2, sizeof k2, "%s2", x.prefix);
    cfg.own_thread = true;
    x.d = elector_etcd_new(&cfg);
    if (!x.d || elector_etcd_err(x.d)) _exit(20);
    x.s = elector_session_new(x.d, NULL, NULL, NULL);
    if (!x.s || elector_session_wait(x.s, 5000)) _exit(21);
    x.el = elector_election_new(x.s, x.name, NULL, NULL);
    if (!x.el || elector_campaign_sync(x.el, "v", 1, 5000)) _exit(22);
    if (elector_kv_put_sync(x.d, k1, pl + 1, "a", 1, 0, 0, 3000) ||
        elector_kv_put_sync(x.d, k2, pl + 1, "", 0, 0, 0, 3000))
        _exit(23);
    if (elector_etcd_exec(x.d, ans_calls, &x)) _exit(24);
    int promised = 0;
    for (int i = 0; i < 5; i++) {
        if (x.rc[i] != 0 && x.rc[i] != ELECTOR_ENOMEM && x.rc[i] != 1) {
            dprintf(err, "test_oom: driver answers N=%ld: call %d: %d\n", n, i, x.rc[i]);
            _exit(25);
        }
        promised += x.rc[i] == 0;
    }
    /* The observer's first event (we lead), if it is there. */
    bool event = !x.o;
    for (int i = 0; i < 500; i++) {
        event = event || atomic_load(&ans_events) || said_in(fd, "event is lost");
        if (event &&
            atomic_load(&drv_answers) + said_in(fd, "answer is lost") >= promised)
            break;
        usleep(10000);
    }
    if (elector_etcd_exec(x.d, ans_stop, NULL)) _exit(26);
    int got = atomic_load(&drv_answers), lost = said_in(fd, "answer is lost");
    if (got + lost != promised) {
        dprintf(err, "test_oom: driver answers N=%ld: %d answers, %d lost, of %d\n", n,
                got, lost, promised);
        _exit(27);
    }
    if (x.o) elector_observer_free(x.o);
    if (x.s2) elector_session_close(x.s2);
    elector_election_free(x.el);
    elector_session_close(x.s);
    elector_etcd_free(x.d);
    long r[3] = {alloc_count, failed, lost};
    if (write(out, r, sizeof r) != (ssize_t)sizeof r) _exit(28);
    exit(0); /* LeakSanitizer checks at exit */
}

static int ans_run_one(long n, long r[3])
{
    int p[2];
    ASSERT_OK(pipe(p));
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        ans_child(n, p[1]);
    }
    close(p[1]);
    ans_seq++;
    r[0] = r[1] = r[2] = -1;
    struct pollfd pfd = {.fd = p[0], .events = POLLIN};
    int pr = poll(&pfd, 1, 30000);
    if (pr == 0) {
        kill(pid, SIGKILL);
        fprintf(stderr, "test_oom: driver answers N=%ld: hangs (killed after 30 s)\n", n);
    } else if (read(p[0], r, 3 * sizeof(long)) != (ssize_t)(3 * sizeof(long))) {
        r[0] = r[1] = r[2] = -1;
    }
    close(p[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return pr == 0 ? -1 : st;
}

/* One sweep: N = 1 .. the allocations of a run without failures. Returns the
 * runs that went wrong; *lost: the answers said lost. */
static int ans_sweep(unsigned mask, long *lost)
{
    ans_mask = mask;
    long r[3];
    int st = ans_run_one(0, r);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) || r[0] < 1) {
        fprintf(stderr, "test_oom: driver answers 0x%x: no run without failures\n", mask);
        return 1;
    }
    long total = r[0];
    double t0 = tl_now();
    int bad = 0;
    long said = 0;
    for (long n = 1; n <= total; n++) {
        st = ans_run_one(n, r);
        /* The count after the calls varies a little from run to run (a
         * keepalive more or less): an N past this run's end fails nothing. */
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) || r[1] > 1 ||
            (r[1] == 0 && r[0] >= n)) {
            fprintf(stderr,
                    "test_oom: driver answers 0x%x N=%ld: status 0x%x, failed %ld\n",
                    mask, n, st, r[1]);
            bad++;
        }
        said += r[2] > 0 ? r[2] : 0;
    }
    tl_log("driver answers 0x%x: N = 1..%ld in %.1f s, %d bad, %ld answers said lost",
           mask, total, tl_now() - t0, bad, said);
    *lost += said;
    return bad;
}

TEST_WITH_TIMEOUT(oom_driver_answers_fail_cleanly, 300)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1});
    ASSERT_NOT_NULL(c);
    endpoints = eh_endpoints(c);
    const unsigned masks[] = {0xff,          A_OBSERVE,     1u << A_CALLS,
                              2u << A_CALLS, 8u << A_CALLS, 16u << A_CALLS};
    int bad = 0;
    long lost = 0;
    for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++)
        bad += ans_sweep(masks[i], &lost);
    ASSERT_EQ(0, bad);
    ASSERT_GE(lost, 1); /* the callback queue's item failed at least once */
    /* Every child freed its election, closed its session, then freed its
     * driver: no leader key (oomansN/...) is left, the revokes were answered
     * before the client went. (A lease whose grant's answer could not be read
     * may be left: nobody knows it; it expires.) */
    char *out = NULL;
    ASSERT_OK(eh_etcdctl(c, &out, "get", "--prefix", "oomans", "--keys-only", NULL));
    int keys = 0;
    for (char *p = out; (p = strstr(p, "oomans")) != NULL; p++) {
        char *q = p + 6;
        while (*q >= '0' && *q <= '9')
            q++;
        if (*q == '/') {
            fprintf(stderr, "test_oom: driver answers: a leader key is left: %.40s\n", p);
            keys++;
        }
    }
    free(out);
    ASSERT_EQ(0, keys);
    eh_stop(c);
}

/* ---- the driver's start without memory or threads ---------------------- */

/* -Wl,--wrap=pthread_create (test/CMakeLists.txt): the library's threads. */
int __real_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *),
                          void *arg);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *),
                          void *arg);
static long thread_fail_at, thread_count; /* 0: none fails */

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *),
                          void *arg)
{
    if (thread_fail_at && ++thread_count == thread_fail_at) return EAGAIN;
    return __real_pthread_create(t, a, fn, arg);
}

static void start_exec(elector_etcd *etcd, void *arg)
{
    (void)etcd;
    *(int *)arg = 1;
}

/* elector_etcd_new() with own_thread, its Nth allocation failing: ENOMEM, no client,
 * nothing kept (LeakSanitizer in the ASan build); its first or second thread
 * not started: EUNAVAILABLE, the first thread joined. Then a driver starts
 * and runs a job. No etcd needed (nothing is sent). */
TEST_WITH_TIMEOUT(oom_driver_new_fails_cleanly, 60)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "127.0.0.1:1";
    elector_etcd *d = NULL;
    long n;
    int rc = -1;
    for (n = 1; n < 200; n++) {
        alloc_count = 0;
        failed = 0;
        fail_at = n;
        counting = true;
        rc = eu_own_new(&cfg, NULL, &d);
        counting = false;
        fail_at = 0;
        if (!failed) break;
        ASSERT_EQ(ELECTOR_ENOMEM, rc);
        ASSERT_NULL(d);
    }
    tl_log("elector_etcd_new (own_thread): %ld allocations", n - 1);
    ASSERT_OK(rc);
    ASSERT_GE(n - 1, 2); /* the driver, the client */
    elector_etcd_free(d);
    for (long t = 1; t <= 2; t++) {
        thread_count = 0;
        thread_fail_at = t;
        d = (elector_etcd *)&cfg;
        ASSERT_EQ(ELECTOR_EUNAVAILABLE, eu_own_new(&cfg, NULL, &d));
        ASSERT_NULL(d);
        ASSERT_EQ(t, thread_count);
    }
    thread_fail_at = 0;
    ASSERT_OK(eu_own_new(&cfg, NULL, &d));
    int ran = 0;
    ASSERT_OK(elector_etcd_exec(d, start_exec, &ran));
    ASSERT_EQ(1, ran);
    elector_etcd_free(d);
}

static void gt_answer(elector_election *el, int err, const Etcdserverpb__TxnResponse *r,
                      void *ud)
{
    (void)el, (void)r;
    int *res = ud;
    res[0]++;
    res[1] = err;
}

/* elector_guarded_txn failing at each of its allocations returns ENOMEM,
 * sends nothing and calls nobody; with memory it writes. An election freed
 * while no allocation succeeds cannot send the delete of its key (one
 * attempt, best effort): the key stays, with its lease, until the session's
 * close revokes it. */
TEST_WITH_TIMEOUT(oom_guarded_txn_and_free_without_memory, 60)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1});
    ASSERT_NOT_NULL(c);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    elector_session *s = elector_session_new(e, NULL, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_EQ(0, elector_session_wait(s, 10000));
    elector_election *el = elector_election_new(s, "oom-gt", NULL, NULL);
    ASSERT_NOT_NULL(el);
    ASSERT_EQ(0, elector_campaign_sync(el, "a", 1, 5000));
    int64_t token = elector_election_token(el);
    Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
    put.key.data = (uint8_t *)"oom-gt-res";
    put.key.len = 10;
    put.value.data = (uint8_t *)"w";
    put.value.len = 1;
    Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT, *ops[1] = {&op};
    op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    op.request_put = &put;
    Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;
    txn.n_success = 1;
    txn.success = ops;
    int res[2] = {0};
    long n;
    for (n = 1; n < 50; n++) {
        alloc_count = 0;
        fail_at = n;
        failed = 0;
        counting = true;
        int rc = elector_guarded_txn(el, &txn, gt_answer, res);
        counting = false;
        fail_at = 0;
        if (!failed) {
            ASSERT_EQ(0, rc);
            break;
        }
        ASSERT_EQ(ELECTOR_ENOMEM, rc);
    }
    tl_log("elector_guarded_txn: %ld allocations", n - 1);
    ASSERT_GE(n - 1, 3); /* the compares, the failure ops, the operation */
    double end = tl_now() + 3;
    while (!res[0] && tl_now() < end)
        elector_etcd_run_once(e, 20);
    ASSERT_EQ(1, res[0]); /* only the call that was sent answers */
    ASSERT_EQ(0, res[1]);
    failed = 0;
    fail_all = true;
    counting = true;
    elector_election_free(el);
    counting = false;
    fail_all = false;
    ASSERT_GE(failed, 1);
    end = tl_now() + 0.3;
    while (tl_now() < end)
        elector_etcd_run_once(e, 20);
    elector_leader_info li;
    ASSERT_EQ(0, elector_leader_sync(e, "oom-gt", 3000, &li));
    ASSERT_EQ(token, li.token);
    elector_leader_free(&li);
    ASSERT_EQ(0, elector_session_close_sync(s, 3000));
    ASSERT_EQ(1, elector_leader_sync(e, "oom-gt", 3000, &li));
    elector_etcd_free(e);
    eh_stop(c);
}

struct nomem {
    int resigned, failed, reason;
    char detail[160];
};

static void nomem_cb(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el;
    struct nomem *k = ud;
    if (ev->type != ELECTOR_EV_RESIGNED && ev->type != ELECTOR_EV_FAILED) return;
    k->resigned += ev->type == ELECTOR_EV_RESIGNED;
    k->failed += ev->type == ELECTOR_EV_FAILED;
    k->reason = ev->reason;
    snprintf(k->detail, sizeof(k->detail), "%s", ev->detail);
}

/* Runs e's loop for up to ms with every allocation failing (counting on),
 * until *what reaches 1. */
static void run_without_memory(elector_etcd *e, int ms, const int *what)
{
    failed = 0;
    fail_all = true;
    counting = true;
    double end = tl_now() + ms / 1e3;
    while (tl_now() < end && *what < 1)
        elector_etcd_run_once(e, 10);
    counting = false;
    fail_all = false;
}

/* Without memory for as long as a resign retries (12 attempts 50 ms apart),
 * the resign gives up: RESIGNED with EUNAVAILABLE, "our key could not be
 * deleted", and the key is left to the lease (the session's close revokes
 * it). */
TEST_WITH_TIMEOUT(oom_resign_without_memory_gives_up_and_leaves_the_key, 60)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1});
    ASSERT_NOT_NULL(c);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    elector_session *s = elector_session_new(e, NULL, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_EQ(0, elector_session_wait(s, 10000));
    struct nomem k = {0};
    elector_election *el = elector_election_new(s, "oom-nomem", nomem_cb, &k);
    ASSERT_NOT_NULL(el);
    ASSERT_EQ(0, elector_campaign_sync(el, "a", 1, 5000));
    int64_t token = elector_election_token(el);
    failed = 0;
    fail_all = true;
    counting = true;
    int rc = elector_resign(el);
    counting = false;
    fail_all = false;
    ASSERT_EQ(0, rc);
    double t0 = tl_now();
    run_without_memory(e, 3000, &k.resigned);
    tl_log("resign without memory: %ld allocations failed, RESIGNED %d after %.0f ms: "
           "%s, %s",
           failed, k.resigned, (tl_now() - t0) * 1e3, elector_err_name(k.reason),
           k.detail);
    ASSERT_EQ(1, k.resigned);
    ASSERT_EQ(ELECTOR_EUNAVAILABLE, k.reason);
    ASSERT_STREQ("our key could not be deleted", k.detail);
    ASSERT_GE(failed, 12);
    ASSERT(!elector_is_leader(el));
    elector_leader_info li;
    ASSERT_EQ(0, elector_leader_sync(e, "oom-nomem", 3000, &li));
    ASSERT_EQ(token, li.token);
    elector_leader_free(&li);
    elector_election_free(el);
    ASSERT_EQ(0, elector_session_close_sync(s, 3000));
    ASSERT_EQ(1, elector_leader_sync(e, "oom-nomem", 3000, &li));
    elector_etcd_free(e);
    eh_stop(c);
}

/* A campaign Txn answered while no memory is left, after a resign that
 * overtook it: the delete of the key it made cannot be sent; the campaign
 * still ends with FAILED/ECANCELED and the key is left to the lease. */
TEST_WITH_TIMEOUT(oom_overtaken_campaign_answered_without_memory_leaves_the_key, 60)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1});
    ASSERT_NOT_NULL(c);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    elector_session *s = elector_session_new(e, NULL, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_EQ(0, elector_session_wait(s, 10000));
    struct nomem k = {0};
    elector_election *el = elector_election_new(s, "oom-overtaken", nomem_cb, &k);
    ASSERT_NOT_NULL(el);
    ASSERT_EQ(0, elector_campaign(el, "a", 1));
    ASSERT_EQ(0, elector_resign(el));
    /* With memory: the campaign Txn goes out, and FAILED comes (the loop's
     * first pass does both); the Txn's answer is read without memory. */
    double end = tl_now() + 3;
    while (!k.failed && tl_now() < end)
        elector_etcd_run_once(e, 10);
    ASSERT_EQ(1, k.failed);
    failed = 0;
    fail_all = true;
    counting = true;
    end = tl_now() + 0.3;
    while (tl_now() < end)
        elector_etcd_run_once(e, 10);
    counting = false;
    fail_all = false;
    end = tl_now() + 0.3;
    while (tl_now() < end)
        elector_etcd_run_once(e, 10);
    elector_etcd_stats st;
    elector_etcd_get_stats(e, &st);
    tl_log("overtaken campaign answered without memory: %ld allocations failed, %d Txns, "
           "FAILED %d (%s)",
           failed, (int)st.requests[ELECTOR_RPC_TXN], k.failed,
           elector_err_name(k.reason));
    ASSERT_EQ(1, k.failed);
    ASSERT_EQ(ELECTOR_ECANCELED, k.reason);
    ASSERT_EQ(1, (int)st.requests[ELECTOR_RPC_TXN]); /* no delete went out */
    elector_leader_info li;
    ASSERT_EQ(0, elector_leader_sync(e, "oom-overtaken", 3000, &li));
    elector_leader_free(&li);
    elector_election_free(el);
    ASSERT_EQ(0, elector_session_close_sync(s, 3000));
    ASSERT_EQ(1, elector_leader_sync(e, "oom-overtaken", 3000, &li));
    elector_etcd_free(e);
    eh_stop(c);
}

/* ---- auto-sync without memory ------------------------------------------ */

struct as_state {
    int inflight, answers, notices;
    char notice[400];
};

static void as_range_cb(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e, (void)m;
    struct as_state *a = ud;
    a->inflight = 0;
    a->answers += err == 0;
}

static void as_notice(elector_etcd *e, int err, const char *msg, void *ud)
{
    (void)e;
    struct as_state *a = ud;
    /* The auto-sync's notices only: a sync that could not be taken says why. */
    if (!strstr(msg, "auto-sync")) return;
    a->notices++;
    snprintf(a->notice, sizeof(a->notice), "%s (%s)", msg, elector_err_name(err));
}

static Etcdserverpb__RangeRequest as_req = {
    .base = PROTOBUF_C_MESSAGE_INIT(&etcdserverpb__range_request__descriptor),
    .key = {6, (uint8_t *)"oom-as"}};

static elector_etcd *as_client(int port, struct as_state *a)
{
    char ep[64];
    snprintf(ep, sizeof(ep), "localhost:%d", port);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = ep;
    cfg.auto_sync_interval_ms = 30;
    elector_etcd *e = elector_etcd_new(&cfg);
    if (e && !elector_etcd_err(e)) elector_etcd_set_notice(e, as_notice, a);
    return e;
}

/* Runs e until its endpoint list was synced once (at most 3 s), with a Range
 * every 100 ms (the connection is made for calls, not for a sync: a
 * connection lost is made again by the next call). */
static void as_run(elector_etcd *e, struct as_state *a)
{
    elector_etcd_stats st;
    double end = tl_now() + 3, next = 0;
    do {
        if (!a->inflight && tl_now() >= next &&
            elector_etcd_call(e, ELECTOR_RPC_RANGE, &as_req.base, NULL, as_range_cb, a) ==
                0)
            a->inflight = 1, next = tl_now() + 0.1;
        elector_etcd_run_once(e, 10);
        elector_etcd_get_stats(e, &st);
    } while (st.endpoint_syncs < 1 && tl_now() < end);
}

/* The endpoint list after the sync: the member's client URL, then the
 * endpoint in use (spelt otherwise: localhost) kept at the end. */
static bool as_synced(elector_etcd *e, int port)
{
    char want[2][64];
    snprintf(want[0], sizeof(want[0]), "127.0.0.1:%d", port);
    snprintf(want[1], sizeof(want[1]), "localhost:%d", port);
    elector_etcd_stats st;
    elector_etcd_get_stats(e, &st);
    elector_endpoint_info info;
    int n = 0;
    for (; elector_etcd_endpoint_info(e, n, &info) == 0; n++)
        if (n > 1 || strcmp(info.authority, want[n]) != 0) return false;
    return n == 2 && st.endpoint_syncs == 1;
}

/* A client with auto_sync_interval_ms on a one-member etcd, its endpoint
 * given as localhost (the member lists 127.0.0.1): elector_etcd_new() with
 * its Nth allocation failing gives no client or one in error ENOMEM; a client
 * whose Nth allocation from then on fails (the connection, a Range, the
 * MemberList call, its answer, the new list and the copy of the endpoint in
 * use) still syncs its list once (a sync that could not be taken says "out of
 * memory" and the next one takes it) and answers a Range after. */
TEST_WITH_TIMEOUT(oom_autosync_recovers, 600)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1});
    ASSERT_NOT_NULL(c);
    int port = eh_client_port(c, 0);
    struct as_state a = {0};
    long n;
    for (n = 1; n < 100; n++) {
        alloc_count = 0;
        fail_at = n;
        failed = 0;
        counting = true;
        elector_etcd *e = as_client(port, &a);
        counting = false;
        fail_at = 0;
        if (!failed) {
            ASSERT_NOT_NULL(e);
            ASSERT_EQ(0, elector_etcd_err(e));
            elector_etcd_free(e);
            break;
        }
        if (e) {
            ASSERT_EQ(ELECTOR_ENOMEM, elector_etcd_err(e));
            elector_etcd_free(e);
        }
    }
    long made = n - 1;
    /* The sync's sweep: N counted from the client's creation on. */
    long total = 0, bad = 0, notices = 0, runs = 0;
    double t0 = tl_now();
    /* Every N (about 30, 2 s: no sample). */
    long only = env_long("ELECTOR_OOM_N", 0);
    for (n = only; n < 400; n++) {
        a = (struct as_state){0};
        elector_etcd *e = as_client(port, &a);
        ASSERT_EQ(0, elector_etcd_err(e));
        alloc_count = 0;
        fail_at = n;
        failed = 0;
        counting = true;
        as_run(e, &a);
        counting = false;
        fail_at = 0;
        if (n == 0) total = alloc_count;
        bool ok = as_synced(e, port);
        if (ok) {
            /* It still answers. */
            double end = tl_now() + 3;
            int answers = a.answers;
            while (a.answers == answers && tl_now() < end) {
                if (!a.inflight && elector_etcd_call(e, ELECTOR_RPC_RANGE, &as_req.base,
                                                     NULL, as_range_cb, &a) == 0)
                    a.inflight = 1;
                elector_etcd_run_once(e, 10);
            }
            ok = a.answers > answers;
        }
        if (a.notices && !strstr(a.notice, "out of memory")) ok = false;
        notices += a.notices;
        runs++;
        if (!ok || env_long("ELECTOR_OOM_VERBOSE", 0)) {
            elector_etcd_stats st;
            elector_etcd_get_stats(e, &st);
            tl_log("auto-sync N=%ld: %s, %ld failed, notice: %s; %d connects, %d syncs, "
                   "%d answers, %d MemberList: %s",
                   n, ok ? "ok" : "FAILED", failed, a.notices ? a.notice : "none",
                   (int)st.connects, (int)st.endpoint_syncs, a.answers,
                   (int)st.requests[ELECTOR_RPC_MEMBER_LIST], elector_etcd_errstr(e));
        }
        bad += !ok;
        elector_etcd_free(e);
        if ((n > 0 && !failed) || only) break;
    }
    tl_log("auto-sync: elector_etcd_new %ld allocations; sync: %ld allocations, %ld runs "
           "in %.1f s, %ld bad, %ld notices",
           made, total, runs, tl_now() - t0, bad, notices);
    ASSERT_EQ(0, bad);
    ASSERT_GE(notices, 1); /* a sync refused for want of memory was told */
    eh_stop(c);
}

/* ---- the pacer without memory ------------------------------------------ */

#include "transport_private.h"

static int ext_count(const elector_etcd *e)
{
    int n = 0;
    for (const elector__ext *x = e->exts; x; x = x->next)
        n++;
    return n;
}

struct pc_run {
    elector_etcd *e;
    elector_session *s;
    elector_election *el;
    struct nomem k;
    int rc;        /* the campaign's */
    int exts[3];   /* the client's extensions (pacer, ...) made up to each phase */
    long count[3]; /* allocations of each phase */
    long failed;   /* allocations failed */
};

/* Runs e's loop until el leads or ended (at most 5 s). */
static void pc_settle(struct pc_run *r)
{
    double end = tl_now() + 5;
    while (!elector_is_leader(r->el) && !r->k.failed && tl_now() < end)
        elector_etcd_run_once(r->e, 10);
}

static void pc_phase(long n)
{
    alloc_count = 0;
    fail_at = n;
    counting = true;
}

/* A client, a session, an election (with memory); then in phases, each with
 * its nth allocation failing (0: none): [0] elector_campaign() (the Txn
 * sent), [1] the loop until it leads (the answer, the check, the watch),
 * [2] if it leads, a resign, run until RESIGNED. */
static void pc_run(eh_cluster *c, const long n[3], struct pc_run *r)
{
    *r = (struct pc_run){0};
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    r->e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(r->e);
    r->s = elector_session_new(r->e, NULL, NULL, NULL);
    ASSERT_NOT_NULL(r->s);
    ASSERT_EQ(0, elector_session_wait(r->s, 10000));
    r->el = elector_election_new(r->s, "oom-pacer", nomem_cb, &r->k);
    ASSERT_NOT_NULL(r->el);
    failed = 0;
    int exts = ext_count(r->e);
    pc_phase(n[0]);
    r->rc = elector_campaign(r->el, "v", 1);
    counting = false;
    r->count[0] = alloc_count;
    r->exts[0] = ext_count(r->e) - exts;
    if (!r->rc) {
        pc_phase(n[1]);
        pc_settle(r);
        counting = false;
        r->count[1] = alloc_count;
        if (r->k.failed) r->rc = r->k.reason;
    }
    r->exts[1] = ext_count(r->e) - exts;
    if (!r->rc) ASSERT(elector_is_leader(r->el));
    ASSERT(r->rc == 0 || r->rc == ELECTOR_ENOMEM);
    if (!r->rc) {
        pc_phase(n[2]);
        int rc = elector_resign(r->el);
        if (!rc) {
            double end = tl_now() + 3;
            while (!r->k.resigned && tl_now() < end)
                elector_etcd_run_once(r->e, 10);
        }
        counting = false;
        r->count[2] = alloc_count;
        ASSERT(rc == 0 || rc == ELECTOR_ENOMEM);
        if (rc == 0) ASSERT_EQ(1, r->k.resigned);
    }
    fail_at = 0;
    r->exts[2] = ext_count(r->e) - exts;
    r->failed = failed;
}

/* Checks what etcd holds after pc_run, then frees it all: while it leads,
 * its key is the leader key; after a resign that said 0, no key; after the
 * session's close, no key in any case. */
static void pc_check_and_free(struct pc_run *r)
{
    elector_leader_info li;
    if (elector_is_leader(r->el)) {
        ASSERT_EQ(0, elector_leader_sync(r->e, "oom-pacer", 3000, &li));
        ASSERT_EQ(elector_election_token(r->el), li.token);
        elector_leader_free(&li);
    } else if (r->k.resigned && r->k.reason == 0) {
        ASSERT_EQ(1, elector_leader_sync(r->e, "oom-pacer", 3000, &li));
    }
    elector_election_free(r->el);
    ASSERT_EQ(0, elector_session_close_sync(r->s, 3000));
    ASSERT_EQ(1, elector_leader_sync(r->e, "oom-pacer", 3000, &li));
    elector_etcd_free(r->e);
}

/* Sweeps phase `ph` (N = 1 .. its allocations, the earlier phases' n fixed);
 * returns the first N whose run led without the pacer made by then (0: none),
 * and *runs, *led the runs and those that led. */
static long pc_sweep(eh_cluster *c, long n[3], int ph, int *runs, int *led)
{
    long found = 0;
    struct pc_run r;
    for (n[ph] = 1; n[ph] < 100; n[ph]++) {
        pc_run(c, n, &r);
        (*runs)++;
        *led += r.rc == 0;
        if (env_long("ELECTOR_OOM_VERBOSE", 0))
            tl_log("pacer %ld/%ld/%ld: %s, %ld failed, extensions %d %d %d, %s", n[0],
                   n[1], n[2], elector_err_name(r.rc), r.failed, r.exts[0], r.exts[1],
                   r.exts[2], r.k.resigned ? elector_err_name(r.k.reason) : "-");
        /* Led without a pacer: none made by the campaign's send; by the
         * loop, one made by the resign's delete (the pacer) */
        if (!found && r.rc == 0 &&
            (ph == 0 ? r.exts[0] == 0 : ph == 1 && r.exts[1] < r.exts[2]))
            found = n[ph];
        bool more = r.count[ph] >= n[ph];
        pc_check_and_free(&r);
        if (!more) break;
    }
    long last = n[ph];
    n[ph] = 0;
    return ph == 2 ? last : found;
}

/* A campaign whose client could not make its pacer (out of memory, when its
 * Txn went and again when its check went) goes unpaced and leads; a resign
 * whose delete cannot make the pacer either goes unpaced too; one that can
 * makes it then. Every phase with its Nth allocation failing ends in a
 * leader (its key the leader key in etcd) or ELECTOR_ENOMEM, and a resign in
 * RESIGNED; after the session's close no key is left. */
TEST_WITH_TIMEOUT(oom_pacer_without_memory_goes_unpaced, 300)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1});
    ASSERT_NOT_NULL(c);
    double t0 = tl_now();
    int runs = 0, led = 0;
    long n[3] = {0, 0, 0};
    n[0] = pc_sweep(c, n, 0, &runs, &led); /* the campaign's pacer */
    ASSERT_GT(n[0], 0);
    n[1] = pc_sweep(c, n, 1, &runs, &led); /* the check's pacer */
    ASSERT_GT(n[1], 0);
    struct pc_run r;
    pc_run(c, n, &r);
    ASSERT_EQ(0, r.rc);
    ASSERT_LT(r.exts[1], r.exts[2]); /* led unpaced; the resign made the pacer */
    pc_check_and_free(&r);
    long resign = pc_sweep(c, n, 2, &runs, &led); /* the delete's pacer, ... */
    tl_log("pacer: campaign's N=%ld, check's N=%ld, resign's %ld allocations; %d runs "
           "(%d led) in %.1f s",
           n[0], n[1], resign, runs, led, tl_now() - t0);
    ASSERT_GE(resign, 2);
    eh_stop(c);
}

/* ---- a late grant's confirmation without memory ------------------------ */

#define LG_CLIENTS 32

/* A grant read after its validity deadline is confirmed by a keepalive
 * (session.c confirm_late_grant); when the lease is gone by then (ELEASE), a
 * new grant is sent. Here each of LG_CLIENTS clients reads its late grant
 * with its Nth allocation failing (N = 0: none; the loop stalled for all of
 * them at once: one wait): the session gets ready (its lease in etcd) or
 * ends with ELECTOR_ENOMEM; it never hangs or reports another error.
 *   gone 0: TTL 10 s, margin 9.5 s: the grant is late after 0.5 s, the lease
 *           lives: the keepalive confirms it.
 *   gone 1: TTL 1 s (etcd's minimum), the grant written while etcd is paused,
 *           read 3 s after etcd applied it: the lease expired; the keepalive
 *           finds it gone and the lease is granted again. */
static void late_grants(eh_cluster *c, int gone)
{
    elector_etcd *e[LG_CLIENTS];
    elector_session *s[LG_CLIENTS];
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    cfg.dial_timeout_ms = 20000;
    cfg.request_timeout_ms = 20000;
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = gone ? 1 : 10;
    sc.margin_ms = gone ? 0 : 9500;
    for (int i = 0; i < LG_CLIENTS; i++) {
        e[i] = elector_etcd_new(&cfg);
        ASSERT_NOT_NULL(e[i]);
        elector_leader_info li; /* connected first */
        ASSERT_EQ(1, elector_leader_sync(e[i], "oom-lg", 5000, &li));
    }
    if (gone) ASSERT_OK(eh_member_pause(c, 0));
    for (int i = 0; i < LG_CLIENTS; i++) {
        s[i] = elector_session_new(e[i], &sc, NULL, NULL);
        ASSERT_NOT_NULL(s[i]);
        if (gone) /* the grant written; etcd reads it when it resumes */
            for (int k = 0; k < 3; k++)
                elector_etcd_run_once(e[i], 1);
    }
    if (gone) ASSERT_OK(eh_member_resume(c, 0));
    tl_msleep(gone ? 3000 : 700);
    long total = -1;
    int ready = 0, enomem = 0, i;
    for (i = 0; i < LG_CLIENTS && (total < 0 || i <= total); i++) {
        alloc_count = 0;
        fail_at = i;
        failed = 0;
        counting = true;
        int rc = elector_session_wait(s[i], 5000);
        counting = false;
        fail_at = 0;
        elector_etcd_stats st;
        elector_etcd_get_stats(e[i], &st);
        elector_session_stats ss;
        elector_session_get_stats(s[i], &ss);
        if (i == 0) {
            total = alloc_count;
            tl_log("late grant%s: %ld allocations, %d keepalives, %d grants",
                   gone ? " (lease gone)" : "", total,
                   (int)st.requests[ELECTOR_RPC_LEASE_KEEPALIVE],
                   (int)st.requests[ELECTOR_RPC_LEASE_GRANT]);
            ASSERT_EQ(0, rc);
            /* confirmed (a renewal may follow on a slow machine) */
            ASSERT_GE((int)st.requests[ELECTOR_RPC_LEASE_KEEPALIVE], 1);
            ASSERT_EQ(1 + gone, (int)st.requests[ELECTOR_RPC_LEASE_GRANT]);
        }
        if (rc != 0 && rc != ELECTOR_ENOMEM)
            tl_log("late grant%s N=%d: %s (%s)", gone ? " (lease gone)" : "", i,
                   elector_err_name(rc), elector_etcd_errstr(e[i]));
        ASSERT(rc == 0 || rc == ELECTOR_ENOMEM);
        /* (a run may make fewer allocations than the first: a renewal less) */
        ASSERT(i == 0 || failed == 1 || alloc_count < i);
        if (rc == 0) ASSERT(lease_listed(c, elector_session_lease(s[i])));
        ready += rc == 0;
        enomem += rc == ELECTOR_ENOMEM;
    }
    ASSERT_LT(total, LG_CLIENTS); /* every N was run */
    tl_log("late grant%s: N = 0..%ld: %d ready, %d ENOMEM", gone ? " (lease gone)" : "",
           total, ready, enomem);
    ASSERT_GE(enomem, 1);
    for (i = 0; i < LG_CLIENTS; i++) {
        elector_session_close_sync(s[i], 3000);
        elector_etcd_free(e[i]);
    }
}

TEST_WITH_TIMEOUT(oom_late_grant_confirmation_without_memory, 120)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1});
    ASSERT_NOT_NULL(c);
    double t0 = tl_now();
    late_grants(c, 0);
    late_grants(c, 1);
    tl_log("%.1f s", tl_now() - t0);
    eh_stop(c);
}

/* ---- a TLS client's creation without memory ---------------------------- */

/* elector_etcd_new() for a TLS etcd with its Nth allocation failing: no client
 * or one in error ELECTOR_ENOMEM (never a client that silently does not
 * follow its TLS files); without failures a client that reads. */
TEST_WITH_TIMEOUT(oom_tls_client_new_fails_cleanly, 120)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1, .tls = 1});
    ASSERT_NOT_NULL(c);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    cfg.cacert = eh_cacert(c);
    cfg.cert = eh_cert(c);
    cfg.key = eh_key(c);
    long n;
    int enomem = 0;
    for (n = 1; n < 200; n++) {
        alloc_count = 0;
        fail_at = n;
        failed = 0;
        counting = true;
        elector_etcd *e = elector_etcd_new(&cfg);
        counting = false;
        fail_at = 0;
        if (!failed) {
            ASSERT_NOT_NULL(e);
            ASSERT_EQ(0, elector_etcd_err(e));
            elector_leader_info li;
            ASSERT_EQ(1, elector_leader_sync(e, "oom-tls", 5000, &li));
            elector_etcd_free(e);
            break;
        }
        if (e) {
            if (elector_etcd_err(e) != ELECTOR_ENOMEM)
                tl_log("TLS client, allocation %ld failing: %s", n,
                       elector_err_name(elector_etcd_err(e)));
            ASSERT_EQ(ELECTOR_ENOMEM, elector_etcd_err(e));
            elector_etcd_free(e);
        }
        enomem++;
    }
    tl_log("TLS client: %ld allocations, each failing: ENOMEM", n - 1);
    ASSERT_EQ(n - 1, enomem);
    ASSERT_GE(n - 1, 5);
    eh_stop(c);
}

/* ---- a freed election's delete refused, its retry without memory -------- */

/* A freed leader's delete of its key fails on a transient error (etcd paused:
 * ETIMEDOUT) and is sent again (delete.c elector__stray_deleted); when the
 * retry's own state cannot be made (out of memory then), none goes and
 * nothing is kept. nomem 0: the retry goes (the control); 1: it does not;
 * the key goes with the lease in any case. */
TEST_WITH_TIMEOUT(oom_freed_leaders_delete_retry_without_memory, 60)
{
    eh_cluster *c = eh_start(&(eh_opts){.members = 1});
    ASSERT_NOT_NULL(c);
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = eh_endpoints(c);
    cfg.request_timeout_ms = 300;
    for (int nomem = 0; nomem < 2; nomem++) {
        elector_etcd *e = elector_etcd_new(&cfg);
        ASSERT_NOT_NULL(e);
        elector_session_config sc;
        elector_session_config_init(&sc);
        sc.ttl_s = 30;
        elector_session *s = elector_session_new(e, &sc, NULL, NULL);
        ASSERT_NOT_NULL(s);
        ASSERT_EQ(0, elector_session_wait(s, 10000));
        elector_election *el = elector_election_new(s, "oom-stray", NULL, NULL);
        ASSERT_NOT_NULL(el);
        ASSERT_EQ(0, elector_campaign_sync(el, "a", 1, 5000));
        elector_etcd_stats st;
        elector_etcd_get_stats(e, &st);
        uint64_t txns = st.requests[ELECTOR_RPC_TXN], errs = st.errors[ELECTOR_RPC_TXN];
        ASSERT_OK(eh_member_pause(c, 0));
        elector_election_free(el); /* its delete goes, unanswered */
        double out = tl_now() + 2;
        do {
            elector_etcd_run_once(e, 1);
            elector_etcd_get_stats(e, &st);
        } while (st.requests[ELECTOR_RPC_TXN] == txns && tl_now() < out);
        ASSERT_EQ(txns + 1, st.requests[ELECTOR_RPC_TXN]);
        failed = 0;
        fail_all = nomem;
        counting = true;
        double end = tl_now() + 3;
        do {
            elector_etcd_run_once(e, 10);
            elector_etcd_get_stats(e, &st);
        } while (st.errors[ELECTOR_RPC_TXN] == errs && tl_now() < end);
        counting = false;
        fail_all = false;
        long nf = failed;
        ASSERT_OK(eh_member_resume(c, 0));
        end = tl_now() + 0.5;
        while (tl_now() < end)
            elector_etcd_run_once(e, 10);
        elector_etcd_get_stats(e, &st);
        tl_log("freed leader's delete timed out%s: %d Txns after, %ld allocations failed",
               nomem ? " without memory" : "", (int)(st.requests[ELECTOR_RPC_TXN] - txns),
               nf);
        ASSERT_EQ(errs + 1, st.errors[ELECTOR_RPC_TXN]);
        if (nomem) {
            ASSERT_GE(nf, 1);
            ASSERT_EQ(txns + 1, st.requests[ELECTOR_RPC_TXN]); /* no retry */
        } else {
            ASSERT_GE(st.requests[ELECTOR_RPC_TXN], txns + 2); /* the retry */
        }
        elector_leader_info li;
        ASSERT_EQ(0, elector_session_close_sync(s, 3000));
        ASSERT_EQ(1, elector_leader_sync(e, "oom-stray", 3000, &li));
        elector_etcd_free(e);
    }
    eh_stop(c);
}

/* ---- a stream refused for its token, sent again without memory --------- */

#include "hostile_server.h"

struct tk_state {
    int calls[2], err[2]; /* the two renewals' callbacks */
    int ended, werr;      /* the watch's */
};

static void tk_ka_cb(elector_etcd *e, int err, int64_t lease, int64_t ttl, void *ud)
{
    (void)e, (void)ttl;
    struct tk_state *k = ud;
    int i = lease == 0x694d0002;
    k->calls[i]++;
    k->err[i] = err;
}

static void tk_watch_cb(elector_watch *w, int err, const Etcdserverpb__WatchResponse *r,
                        void *ud)
{
    (void)r;
    struct tk_state *k = ud;
    if (!err) return;
    k->ended++;
    k->werr = err;
    elector_watch_cancel(w);
}

/* One run against a fresh hostile server: two renewals (keepalive 1) or a
 * watch (0) whose stream is refused for its token, then sent again on a fresh
 * stream; the loop's Nth allocation from the refusal's read on fails. Each
 * renewal's callback / the watch's end must come once, within 5 s. Returns
 * the allocations counted; *bad set on a wrong outcome. */
static long tk_run(bool keepalive, long n, bool *bad, int *nomem)
{
    hs_server hs;
    hs_opts o = {.attack = keepalive ? HS_KEEPALIVE_TOKEN_ONCE : HS_WATCH_TOKEN};
    ASSERT_OK(hs_start(&hs, &o));
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = hs.endpoint;
    cfg.request_timeout_ms = 4000;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    struct tk_state k = {0};
    if (keepalive) {
        ASSERT_OK(elector_etcd_keepalive(e, 0x694d0001, 3000, tk_ka_cb, &k));
        ASSERT_OK(elector_etcd_keepalive(e, 0x694d0002, 3000, tk_ka_cb, &k));
    } else {
        Etcdserverpb__WatchCreateRequest q = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
        q.key.data = (uint8_t *)"e/";
        q.key.len = 2;
        ASSERT_NOT_NULL(elector_etcd_watch(e, &q, tk_watch_cb, &k));
    }
    alloc_count = 0;
    fail_at = n;
    failed = 0;
    counting = true;
    double end = tl_now() + 5;
    while ((keepalive ? k.calls[0] + k.calls[1] < 2 : !k.ended) && tl_now() < end)
        elector_etcd_run_once(e, 10);
    counting = false;
    fail_at = 0;
    long count = alloc_count;
    double drain = tl_now() + 0.1; /* nothing more comes */
    while (tl_now() < drain)
        elector_etcd_run_once(e, 10);
    bool ok;
    if (keepalive) {
        ok = k.calls[0] == 1 && k.calls[1] == 1;
        for (int i = 0; i < 2; i++)
            *nomem += k.err[i] == ELECTOR_ENOMEM;
        /* without failures both are renewed on the fresh stream */
        if (!n) ok = ok && !k.err[0] && !k.err[1];
    } else {
        /* a watch refused twice ends with ETOKEN; one that could not be sent
         * again ends with that error, or ENOMEM */
        ok = k.ended == 1 && k.werr != 0;
        *nomem += k.werr == ELECTOR_ENOMEM;
        if (!n) ok = ok && k.werr == ELECTOR_ETOKEN;
    }
    if (!ok || env_long("ELECTOR_OOM_VERBOSE", 0))
        tl_log("%s refused for its token, N=%ld: %s: calls %d %d (%s %s), watch ended %d "
               "(%s)",
               keepalive ? "renewals" : "watch", n, ok ? "ok" : "FAILED", k.calls[0],
               k.calls[1], elector_err_name(k.err[0]), elector_err_name(k.err[1]),
               k.ended, elector_err_name(k.werr));
    *bad = *bad || !ok;
    elector_etcd_free(e);
    hs_stop(&hs);
    return count;
}

/* Renewals whose LeaseKeepAlive stream ends with "invalid auth token" go out
 * once more on a fresh stream (lease.c resend_on_fresh_stream), and a watch
 * create refused so is sent again on a fresh stream (watch.c
 * retry_on_fresh_stream); with the Nth allocation failing, every renewal is
 * still answered once (renewed or an error) and the watch ends once. */
TEST_WITH_TIMEOUT(oom_token_refusal_resend_without_memory, 300)
{
    double t0 = tl_now();
    for (int keepalive = 1; keepalive >= 0; keepalive--) {
        bool bad = false;
        int nomem = 0;
        long total = tk_run(keepalive, 0, &bad, &nomem), n;
        ASSERT(!bad);
        for (n = 1; n <= total; n++)
            tk_run(keepalive, n, &bad, &nomem);
        tl_log("%s refused for its token: N = 1..%ld, %d said ENOMEM; %.1f s",
               keepalive ? "renewals" : "watch", total, nomem, tl_now() - t0);
        ASSERT(!bad);
        ASSERT_GE(total, 3);
    }
}
