/* SPDX-License-Identifier: MIT */
/* A client on its own thread (own_thread, "the driver": elector/etcd.h) against
 * real etcd, through the one API of etcd.h and election.h: calls from many
 * threads, callbacks that call back in, block, or free the client; fork; a
 * revoked lease; etcd down at start and for 2 x TTL; locks from 8 threads.
 * Also built under ThreadSanitizer (scripts/test.sh, build-tsan). */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "elector/election.h"
#include "elect_util.h"
#include "etcd_harness.h"
#include "testlib.h"

/* The defaults of a client's stall settings (eu_own_new, elect_util.h). */
static void stall_init(eu_stall *sc)
{
    sc->stall_ms = 1000;
    sc->on_stall = NULL;
    sc->ud = NULL;
}

static eh_cluster *start1(void)
{
    eh_opts o = {.members = 1};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    return c;
}

static elector_etcd *driver_on(const char *endpoints, const eu_stall *dc)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = endpoints;
    cfg.dial_timeout_ms = 1000;
    cfg.request_timeout_ms = 2000;
    elector_etcd *d = NULL;
    ASSERT_OK(eu_own_new(&cfg, dc, &d));
    ASSERT_NOT_NULL(d);
    return d;
}

static elector_session *session_on(elector_etcd *d, int ttl_s)
{
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = ttl_s;
    elector_session *s = elector_session_new(d, &sc, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_OK(elector_session_wait(s, 5000));
    return s;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* Event counters, written on the callback thread, read by the test. */
typedef struct counts {
    atomic_int elected, lost, resigned, failed, leader, no_leader;
    atomic_int last_reason;
    atomic_llong lost_at_ns;
} counts;

static void count_event(counts *c, const elector_event *ev)
{
    switch (ev->type) {
    case ELECTOR_EV_ELECTED:
        atomic_fetch_add(&c->elected, 1);
        break;
    case ELECTOR_EV_LOST:
        atomic_store(&c->last_reason, ev->reason);
        atomic_store(&c->lost_at_ns, elector_now_ns());
        atomic_fetch_add(&c->lost, 1);
        break;
    case ELECTOR_EV_RESIGNED:
        atomic_fetch_add(&c->resigned, 1);
        break;
    case ELECTOR_EV_FAILED:
        atomic_store(&c->last_reason, ev->reason);
        atomic_fetch_add(&c->failed, 1);
        break;
    case ELECTOR_EV_LEADER:
        atomic_fetch_add(&c->leader, 1);
        break;
    case ELECTOR_EV_NO_LEADER:
        atomic_fetch_add(&c->no_leader, 1);
        break;
    default:
        break;
    }
}

static void el_count(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el;
    count_event(ud, ev);
}

static void obs_count(elector_observer *o, const elector_event *ev, void *ud)
{
    (void)o;
    count_event(ud, ev);
}

static bool wait_int(atomic_int *v, int want, int ms)
{
    for (int i = 0; i < ms / 10; i++) {
        if (atomic_load(v) >= want) return true;
        sleep_ms(10);
    }
    return atomic_load(v) >= want;
}

/* elector_leader()'s answer: how many, the last code and token. */
typedef struct {
    atomic_int n;
    int rc;
    int64_t token;
    size_t value_len;
} lanswer;

static void leader_answer(elector_etcd *d, int rc, const elector_leader_info *info,
                          void *ud)
{
    (void)d;
    lanswer *a = ud;
    a->rc = rc;
    if (rc == 0) {
        a->token = info->token;
        a->value_len = info->value_len;
    }
    atomic_fetch_add(&a->n, 1);
}

typedef struct {
    atomic_int n;
    int rc;
} rv_answer;

static void revoke_answer(elector_etcd *d, int rc, void *ud)
{
    (void)d;
    rv_answer *a = ud;
    a->rc = rc;
    atomic_fetch_add(&a->n, 1);
}

typedef struct {
    atomic_int n;
    int rc;
    size_t nkv, value_len;
    int64_t deleted;
} kv_answer;

static void kv_answer_cb(elector_etcd *d, int rc, const elector_kv *kvs, size_t n,
                         int64_t deleted, void *ud)
{
    (void)d;
    kv_answer *a = ud;
    a->rc = rc;
    a->nkv = n;
    a->value_len = n ? kvs[0].value_len : 0;
    a->deleted = deleted;
    atomic_fetch_add(&a->n, 1);
}

TEST(campaign_leader_observe_guarded_resign_from_the_api)
{
    eh_cluster *c = start1();
    elector_etcd *d = driver_on(eh_endpoints(c), NULL);
    elector_session *s = session_on(d, 5);
    ASSERT(elector_session_alive(s));
    ASSERT(elector_session_lease(s) != 0);
    counts oc = {0}, ec = {0};
    elector_observer *o = elector_observe(d, "drv", obs_count, &oc);
    ASSERT_NOT_NULL(o);
    elector_election *el = elector_election_new(s, "drv", el_count, &ec);
    ASSERT_NOT_NULL(el);
    ASSERT(!elector_is_leader(el));
    ASSERT_OK(elector_campaign_sync(el, "v1", 2, 5000));
    ASSERT(elector_is_leader(el));
    ASSERT(elector_election_token(el) > 0);
    ASSERT(wait_int(&ec.elected, 1, 3000));
    ASSERT(wait_int(&oc.leader, 1, 3000));

    elector_leader_info li;
    ASSERT_OK(elector_leader_sync(d, "drv", 3000, &li));
    ASSERT_EQ(elector_election_token(el), li.token);
    ASSERT_EQ(2, (long long)li.value_len);
    elector_leader_free(&li);
    ASSERT_EQ(1, elector_leader_sync(d, "nobody-here", 3000, &li));
    lanswer la = {0}, lb = {0};
    ASSERT_OK(elector_leader(d, "drv", 3000, leader_answer, &la));
    ASSERT_OK(elector_leader(d, "nobody-here", 3000, leader_answer, &lb));
    ASSERT(wait_int(&la.n, 1, 5000));
    ASSERT(wait_int(&lb.n, 1, 5000));
    ASSERT_EQ(0, la.rc);
    ASSERT_EQ(elector_election_token(el), la.token);
    ASSERT_EQ(2, (long long)la.value_len);
    ASSERT_EQ(1, lb.rc);

    ASSERT_OK(elector_guarded_put_sync(el, "res", 3, "x", 1, 3000));
    char *out = NULL;
    ASSERT_OK(eh_etcdctl(c, &out, "get", "res", "--print-value-only", NULL));
    ASSERT_STREQ("x\n", out);
    free(out);

    ASSERT_OK(elector_resign_sync(el, 3000));
    ASSERT(!elector_is_leader(el));
    ASSERT(wait_int(&ec.resigned, 1, 3000));
    ASSERT(wait_int(&oc.no_leader, 1, 3000));
    ASSERT_EQ(ELECTOR_EINVAL, elector_resign_sync(el, 1000));
    ASSERT_EQ(ELECTOR_ENOTLEADER, elector_guarded_put_sync(el, "res", 3, "y", 1, 3000));
    elector_observer_free(o);
    elector_election_free(el);
    /* a key on the lease; after the close, a revoke of our own: once it is
     * answered, the lease and the key are gone */
    int64_t lease = elector_session_lease(s);
    ASSERT_OK(elector_kv_put_sync(d, "onlease", 7, "v", 1, lease, 0, 3000));
    elector_session_close(s);
    rv_answer ra = {0};
    ASSERT_OK(elector_lease_revoke(d, lease, 3000, revoke_answer, &ra));
    ASSERT(wait_int(&ra.n, 1, 5000));
    ASSERT_EQ(0, ra.rc);
    elector_kv *kvs = NULL;
    size_t nkv = 9;
    ASSERT_OK(elector_kv_get_sync(d, "onlease", 7, false, 3000, &kvs, &nkv));
    ASSERT_EQ(0, (long long)nkv);
    elector_kvs_free(kvs, nkv);
    /* again: etcd no longer knows it, which says the same */
    ASSERT_OK(elector_lease_revoke(d, lease, 3000, revoke_answer, &ra));
    ASSERT(wait_int(&ra.n, 2, 5000));
    ASSERT_EQ(0, ra.rc);
    /* the key operations without the wait */
    kv_answer ka = {0};
    ASSERT_OK(elector_kv_put(d, "async", 5, "v1", 2, 0, ELECTOR_KV_PUT_IF_ABSENT, 3000,
                             kv_answer_cb, &ka));
    ASSERT(wait_int(&ka.n, 1, 5000));
    ASSERT_EQ(0, ka.rc);
    ASSERT_OK(elector_kv_put(d, "async", 5, "v2", 2, 0, ELECTOR_KV_PUT_IF_ABSENT, 3000,
                             kv_answer_cb, &ka));
    ASSERT(wait_int(&ka.n, 2, 5000));
    ASSERT_EQ(1, ka.rc); /* exists: nothing written */
    ASSERT_OK(elector_kv_get(d, "asy", 3, true, 3000, kv_answer_cb, &ka));
    ASSERT(wait_int(&ka.n, 3, 5000));
    ASSERT_EQ(0, ka.rc);
    ASSERT_EQ(1, (long long)ka.nkv);
    ASSERT_EQ(2, (long long)ka.value_len);
    ASSERT_OK(elector_kv_delete(d, "async", 5, false, 3000, kv_answer_cb, &ka));
    ASSERT(wait_int(&ka.n, 4, 5000));
    ASSERT_EQ(0, ka.rc);
    ASSERT_EQ(1, (long long)ka.deleted);
    ASSERT_EQ(ELECTOR_EINVAL, elector_kv_get(d, "", 0, false, 3000, kv_answer_cb, &ka));
    ASSERT_EQ(ELECTOR_EINVAL, elector_kv_get(d, "k", 1, false, 3000, NULL, NULL));
    ASSERT_EQ(ELECTOR_EINVAL,
              elector_kv_put(d, "k", 1, "v", 1, 0, 8u, 3000, kv_answer_cb, &ka));
    ASSERT_EQ(ELECTOR_EINVAL, elector_lease_revoke(d, 0, 3000, revoke_answer, &ra));
    ASSERT_EQ(ELECTOR_EINVAL, elector_lease_revoke(d, lease, 3000, NULL, NULL));
    elector_etcd_free(d);
    eh_stop(c);
}

/* Callbacks call back into the API: resign from ELECTED, campaign again from
 * RESIGNED, a guarded write with its answer on the callback thread, free of
 * the election from its own callback, then elector_etcd_free() from a
 * callback. */
typedef struct reentry {
    elector_etcd *d;
    elector_session *s;
    atomic_int rounds, guarded_done, guarded_bad, freed, driver_freed;
    atomic_int sync_rc;
} reentry;

static void re_guarded(elector_election *el, int err, void *ud)
{
    (void)el;
    reentry *r = ud;
    /* Sent before the resign, on its own stream: etcd may apply the resign's
     * delete first, and then the write is refused (ENOTLEADER), as it must be
     * (resign ends the belief first, DESIGN). Anything else is wrong. */
    if (err != 0 && err != ELECTOR_ENOTLEADER) atomic_fetch_add(&r->guarded_bad, 1);
    atomic_fetch_add(&r->guarded_done, 1);
}

static void re_cb(elector_election *el, const elector_event *ev, void *ud)
{
    reentry *r = ud;
    if (ev->type == ELECTOR_EV_ELECTED) {
        /* A blocking call from a callback: the loop thread answers it. */
        atomic_store(&r->sync_rc, elector_guarded_put_sync(el, "re", 2, "1", 1, 3000));
        elector_guarded_put(el, "re2", 3, "2", 1, re_guarded, r);
        elector_resign(el);
    } else if (ev->type == ELECTOR_EV_RESIGNED) {
        if (atomic_fetch_add(&r->rounds, 1) + 1 < 3) {
            elector_campaign(el, "again", 5);
        } else {
            elector_election_free(el);
            atomic_store(&r->freed, 1);
        }
    }
}

static void obs_frees_driver(elector_observer *o, const elector_event *ev, void *ud)
{
    reentry *r = ud;
    if (ev->type == ELECTOR_EV_LEADER && atomic_load(&r->freed)) {
        elector_etcd_free(r->d);
        /* The driver's shutdown took the observer: its free does nothing. */
        elector_observer_free(o);
        atomic_store(&r->driver_freed, 1);
    }
}

TEST(callbacks_call_back_in_and_free_the_driver)
{
    eh_cluster *c = start1();
    reentry r = {0};
    r.d = driver_on(eh_endpoints(c), NULL);
    r.s = session_on(r.d, 5);
    elector_election *el = elector_election_new(r.s, "re", re_cb, &r);
    ASSERT_NOT_NULL(el);
    ASSERT_OK(elector_campaign(el, "first", 5));
    ASSERT(wait_int(&r.freed, 1, 10000));
    ASSERT_EQ(3, atomic_load(&r.rounds));
    ASSERT_OK(atomic_load(&r.sync_rc));
    ASSERT(wait_int(&r.guarded_done, 3, 3000));
    ASSERT_EQ(0, atomic_load(&r.guarded_bad));
    /* Someone else leads: the observer's LEADER event frees the driver. */
    elector_observer *o = elector_observe(r.d, "other", obs_frees_driver, &r);
    ASSERT_NOT_NULL(o);
    ASSERT_OK(eh_etcdctl(c, NULL, "put", "other/x", "y", NULL));
    ASSERT(wait_int(&r.driver_freed, 1, 10000));
    /* The lease went with the driver (revoked on the way out). */
    char *out = NULL;
    for (int i = 0; i < 50; i++) {
        free(out);
        out = NULL;
        ASSERT_OK(eh_etcdctl(c, &out, "lease", "list", NULL));
        if (!strstr(out, "found 1")) break;
        sleep_ms(100);
    }
    ASSERT(tl_contains(out, "found 0"));
    free(out);
    eh_stop(c);
}

/* A callback that blocks for 3 x TTL on a mutex that a user thread holds: the
 * lease lives on (keepalives run on the loop thread), the stall is reported,
 * leadership is kept. */
static atomic_int stall_reports;
static void on_stall(elector_etcd *d, int64_t ms, void *ud)
{
    (void)d, (void)ud;
    tl_log("stall reported: a callback has run for %lld ms", (long long)ms);
    atomic_fetch_add(&stall_reports, 1);
}

static pthread_mutex_t user_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int cb_blocked, cb_done;

static void blocking_cb(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el;
    count_event(ud, ev);
    if (ev->type == ELECTOR_EV_ELECTED) {
        atomic_store(&cb_blocked, 1);
        pthread_mutex_lock(&user_mu);
        pthread_mutex_unlock(&user_mu);
        atomic_store(&cb_done, 1);
    }
}

TEST_WITH_TIMEOUT(blocking_callback_does_not_lose_the_lease, 60)
{
    eh_cluster *c = start1();
    eu_stall dc;
    stall_init(&dc);
    dc.stall_ms = 500;
    dc.on_stall = on_stall;
    elector_etcd *d = driver_on(eh_endpoints(c), &dc);
    elector_session *s = session_on(d, 2);
    counts ec = {0};
    elector_election *el = elector_election_new(s, "blk", blocking_cb, &ec);
    pthread_mutex_lock(&user_mu); /* this thread holds it for 3 x TTL + */
    ASSERT_OK(elector_campaign_sync(el, "v", 1, 5000));
    ASSERT(wait_int(&cb_blocked, 1, 3000));
    /* The callback waits 6.5 s for the mutex, TTL 2 s: is_leader all along,
     * and the driver's calls work meanwhile (from this thread). */
    for (int i = 0; i < 65; i++) {
        ASSERT(elector_is_leader(el));
        if (i % 20 == 0) ASSERT_OK(elector_guarded_put_sync(el, "blk", 3, "v", 1, 3000));
        sleep_ms(100);
    }
    pthread_mutex_unlock(&user_mu);
    ASSERT(wait_int(&cb_done, 1, 3000));
    ASSERT(elector_is_leader(el));
    ASSERT_EQ(0, atomic_load(&ec.lost));
    ASSERT_EQ(1, atomic_load(&stall_reports));
    ASSERT_EQ(1, (long long)elector_etcd_stalls(d));
    elector_etcd_free(d);
    eh_stop(c);
}

/* `etcdctl lease revoke`: the leader hears at once (the watch on our key
 * sees it deleted); the session itself at its next keepalive (TTL/3). */
static atomic_llong session_lost_ns;
static atomic_int session_lost_reason;
static void sess_cb(elector_session *s, const elector_event *ev, void *ud)
{
    (void)s, (void)ud;
    if (ev->type == ELECTOR_EV_SESSION_LOST) {
        atomic_store(&session_lost_reason, ev->reason);
        atomic_store(&session_lost_ns, elector_now_ns());
    }
}

TEST(revoked_lease_is_noticed_within_one_keepalive_interval)
{
    eh_cluster *c = start1();
    elector_etcd *d = driver_on(eh_endpoints(c), NULL);
    const int ttl = 3;
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = ttl;
    elector_session *s = elector_session_new(d, &sc, sess_cb, NULL);
    ASSERT_OK(elector_session_wait(s, 5000));
    counts ec = {0};
    elector_election *el = elector_election_new(s, "rev", el_count, &ec);
    ASSERT_OK(elector_campaign_sync(el, "v", 1, 5000));
    char lease[32];
    snprintf(lease, sizeof(lease), "%llx", (unsigned long long)elector_session_lease(s));
    int64_t t0 = elector_now_ns();
    ASSERT_OK(eh_etcdctl(c, NULL, "lease", "revoke", lease, NULL));
    int64_t t1 = elector_now_ns();
    ASSERT(wait_int(&ec.lost, 1, 3 * ttl * 1000));
    for (int i = 0; i < 3 * ttl * 100 && !atomic_load(&session_lost_ns); i++)
        sleep_ms(10);
    ASSERT(atomic_load(&session_lost_ns) != 0);
    ASSERT_EQ(ELECTOR_ELEASE, atomic_load(&session_lost_reason));
    double lost_ms = (atomic_load(&ec.lost_at_ns) - t0) / 1e6;
    double sess_ms = (atomic_load(&session_lost_ns) - t1) / 1e6;
    tl_log("after `etcdctl lease revoke` (%.0f ms): leader LOST (%s) at %.0f ms, "
           "session lost (ELEASE) %.0f ms after it returned; keepalive interval %d ms",
           (t1 - t0) / 1e6, elector_err_name(atomic_load(&ec.last_reason)), lost_ms,
           sess_ms, ttl * 1000 / 3);
    printf("FIGURE revoked lease: LOST %.0f ms after the revoke started, session lost "
           "%.0f ms after it returned (keepalive interval %d ms)\n",
           lost_ms, sess_ms, ttl * 1000 / 3);
    /* One interval, with room for a busy machine. */
    ASSERT_LE(sess_ms, ttl * 1000 / 3 + 1500);
    ASSERT(!elector_is_leader(el));
    elector_etcd_free(d);
    eh_stop(c);
}

/* etcd down when the program starts: clear errors, no crash; once it is up, a
 * new session works. Then down for 2 x TTL while leading: LOST, and a new
 * session leads again afterwards. */
TEST_WITH_TIMEOUT(etcd_down_at_start_and_for_two_ttl, 90)
{
    eh_cluster *c = start1();
    ASSERT_OK(eh_member_stop(c, 0));
    elector_etcd *d = driver_on(eh_endpoints(c), NULL);
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = 2;
    elector_session *s = elector_session_new(d, &sc, NULL, NULL);
    ASSERT_NOT_NULL(s);
    int rc = elector_session_wait(s, 5000);
    tl_log("session wait with etcd down: %s", elector_err_name(rc));
    ASSERT(rc < 0);
    elector_leader_info li;
    rc = elector_leader_sync(d, "down", 1500, &li);
    ASSERT(rc < 0);
    elector_session_close(s);

    ASSERT_OK(eh_member_restart(c, 0));
    ASSERT_OK(eh_wait_healthy(c, 0, 10));
    s = session_on(d, 2);
    counts ec = {0};
    elector_election *el = elector_election_new(s, "down", el_count, &ec);
    ASSERT_OK(elector_campaign_sync(el, "v", 1, 5000));

    ASSERT_OK(eh_member_stop(c, 0));
    ASSERT(wait_int(&ec.lost, 1, 5000));
    ASSERT(!elector_is_leader(el));
    sleep_ms(4000); /* 2 x TTL down in all */
    ASSERT_OK(eh_member_restart(c, 0));
    ASSERT_OK(eh_wait_healthy(c, 0, 10));
    elector_election_free(el);
    elector_session_close(s);
    s = NULL;
    for (int i = 0; i < 20 && !s; i++) {
        elector_session *t = elector_session_new(d, &sc, NULL, NULL);
        if (elector_session_wait(t, 3000) == 0)
            s = t;
        else
            elector_session_close(t);
    }
    ASSERT_NOT_NULL(s);
    el = elector_election_new(s, "down", el_count, &ec);
    ASSERT_OK(elector_campaign_sync(el, "v", 1, 10000));
    ASSERT(elector_is_leader(el));
    elector_etcd_free(d);
    eh_stop(c);
}

/* fork() while leading: in the child every call says EFORKED and nothing is
 * sent; the parent keeps its lease and leadership after the child is gone. */
TEST(fork_while_leading)
{
    eh_cluster *c = start1();
    elector_etcd *d = driver_on(eh_endpoints(c), NULL);
    elector_session *s = session_on(d, 2);
    elector_election *el = elector_election_new(s, "fork", NULL, NULL);
    ASSERT_OK(elector_campaign_sync(el, "v", 1, 5000));
    elector_observer *o = elector_observe(d, "fork", NULL, NULL);
    ASSERT_NOT_NULL(o);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        int bad = 0;
        bad += elector_is_leader(el);
        bad += elector_resign(el) != ELECTOR_EFORKED;
        bad += elector_guarded_put_sync(el, "f", 1, "c", 1, 1000) != ELECTOR_EFORKED;
        bad += elector_campaign_sync(el, "c", 1, 1000) != ELECTOR_EFORKED;
        bad += elector_session_new(d, NULL, NULL, NULL) != NULL;
        elector_leader_info li;
        bad += elector_leader_sync(d, "fork", 1000, &li) != ELECTOR_EFORKED;
        bad += elector_session_lease(s) != 0;
        bad += elector_session_alive(s);
        bad += elector_election_token(el) != 0;
        bad += elector_etcd_stalls(d) != 0;
        bad += elector_etcd_in_callback(d);
        elector_observer_free(o);
        elector_election_free(el);
        elector_session_close(s);
        elector_etcd_free(d);
        _exit(bad);
    }
    int st = 0;
    ASSERT_EQ(pid, waitpid(pid, &st, 0));
    ASSERT(WIFEXITED(st));
    ASSERT_EQ(0, WEXITSTATUS(st));
    sleep_ms(3000); /* > TTL: the parent's keepalives went on */
    ASSERT(elector_is_leader(el));
    ASSERT_OK(elector_guarded_put_sync(el, "f", 1, "p", 1, 3000));
    char *out = NULL;
    ASSERT_OK(eh_etcdctl(c, &out, "get", "f", "--print-value-only", NULL));
    ASSERT_STREQ("p\n", out);
    free(out);
    elector_etcd_free(d);
    eh_stop(c);
}

/* ---- 8 threads ---- */

#define NTHREADS 8

typedef struct hammer {
    elector_etcd *d;
    elector_session *s[NTHREADS];
    const char *name;
    int rounds;
    atomic_int holders, max_holders, errors, done;
    atomic_long acquired;
} hammer;

typedef struct targ {
    hammer *h;
    int i;
} targ;

/* Each thread, its own session; the same election name; mixed calls. */
static void *mixed_thread(void *p)
{
    targ *a = p;
    hammer *h = a->h;
    counts oc = {0};
    for (int r = 0; r < h->rounds; r++) {
        elector_election *el = elector_election_new(h->s[a->i], h->name, NULL, NULL);
        if (!el) {
            atomic_fetch_add(&h->errors, 1);
            continue;
        }
        elector_observer *o = elector_observe(h->d, h->name, obs_count, &oc);
        elector_campaign(el, "m", 1);
        elector_leader_info li;
        if (elector_leader_sync(h->d, h->name, 3000, &li) == 0) elector_leader_free(&li);
        (void)elector_is_leader(el);
        if (r % 2) elector_resign(el);
        elector_observer_free(o);
        elector_election_free(el);
    }
    atomic_fetch_add(&h->done, 1);
    return NULL;
}

TEST_WITH_TIMEOUT(eight_threads_campaign_resign_leader_observe_free, 180)
{
    eh_cluster *c = start1();
    hammer h = {.name = "mix", .rounds = 20};
    h.d = driver_on(eh_endpoints(c), NULL);
    for (int i = 0; i < NTHREADS; i++)
        h.s[i] = session_on(h.d, 5);
    pthread_t th[NTHREADS];
    targ a[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        a[i] = (targ){&h, i};
        ASSERT_OK(pthread_create(&th[i], NULL, mixed_thread, &a[i]));
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    ASSERT_EQ(0, atomic_load(&h.errors));
    ASSERT_EQ(NTHREADS, atomic_load(&h.done));
    /* Still working afterwards. */
    elector_election *el = elector_election_new(h.s[0], "after", NULL, NULL);
    ASSERT_OK(elector_campaign_sync(el, "v", 1, 5000));
    elector_etcd_free(h.d);
    eh_stop(c);
}

/* A lock: campaign_sync to take it, resign_sync to give it back. */
static void *lock_thread(void *p)
{
    targ *a = p;
    hammer *h = a->h;
    elector_election *el = elector_election_new(h->s[a->i], h->name, NULL, NULL);
    for (int r = 0; r < h->rounds && el; r++) {
        int rc = elector_campaign_sync(el, "l", 1, 30000);
        if (rc) {
            if (atomic_fetch_add(&h->errors, 1) < 3)
                tl_log("campaign_sync: %s (%d)", elector_strerror(rc), rc);
            continue;
        }
        int n = atomic_fetch_add(&h->holders, 1) + 1;
        if (n > atomic_load(&h->max_holders)) atomic_store(&h->max_holders, n);
        atomic_fetch_add(&h->acquired, 1);
        atomic_fetch_sub(&h->holders, 1);
        if (elector_resign_sync(el, 30000)) atomic_fetch_add(&h->errors, 1);
    }
    if (!el) atomic_fetch_add(&h->errors, 1);
    elector_election_free(el);
    return NULL;
}

TEST_WITH_TIMEOUT(thousand_locks_from_eight_threads, 300)
{
    eh_cluster *c = start1();
    const char *env = getenv("DRIVER_LOCKS");
    int total = env ? atoi(env) : 1000;
    hammer h = {.name = "lock", .rounds = total / NTHREADS};
    h.d = driver_on(eh_endpoints(c), NULL);
    for (int i = 0; i < NTHREADS; i++)
        h.s[i] = session_on(h.d, 10);
    pthread_t th[NTHREADS];
    targ a[NTHREADS];
    int64_t t0 = elector_now_ns();
    for (int i = 0; i < NTHREADS; i++) {
        a[i] = (targ){&h, i};
        ASSERT_OK(pthread_create(&th[i], NULL, lock_thread, &a[i]));
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    double secs = (elector_now_ns() - t0) / 1e9;
    long n = atomic_load(&h.acquired);
    tl_log("%ld locks from %d threads in %.2f s: %.0f locks/s", n, NTHREADS, secs,
           n / secs);
    printf("FIGURE %ld locks from %d threads in %.2f s: %.0f locks/s\n", n, NTHREADS,
           secs, n / secs);
    ASSERT_EQ(0, atomic_load(&h.errors));
    ASSERT_EQ((long)h.rounds * NTHREADS, n);
    ASSERT_EQ(1, atomic_load(&h.max_holders));
    elector_etcd_free(h.d);
    eh_stop(c);
}

/* Shutdown from a thread that did not create the driver, while 4 threads wait
 * in campaign_sync (behind a leader) and one in resign-less guarded writes:
 * every waiter returns ECLOSED, everything joins, the leader's lease is
 * revoked on the way out. */
typedef struct waiter {
    elector_election *el;
    atomic_int rc, returned;
} waiter;

static void *campaign_waiter(void *p)
{
    waiter *w = p;
    atomic_store(&w->rc, elector_campaign_sync(w->el, "w", 1, -1));
    atomic_store(&w->returned, 1);
    return NULL;
}

static void *free_driver(void *p)
{
    elector_etcd_free(p);
    return NULL;
}

TEST(free_from_another_thread_ends_waiting_calls)
{
    eh_cluster *c = start1();
    elector_etcd *d = driver_on(eh_endpoints(c), NULL);
    elector_session *ls = session_on(d, 10);
    elector_election *leader = elector_election_new(ls, "wait", NULL, NULL);
    ASSERT_OK(elector_campaign_sync(leader, "L", 1, 5000));
    waiter w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].el = elector_election_new(session_on(d, 10), "wait", NULL, NULL);
        ASSERT_NOT_NULL(w[i].el);
        ASSERT_OK(pthread_create(&th[i], NULL, campaign_waiter, &w[i]));
    }
    sleep_ms(500);
    for (int i = 0; i < 4; i++)
        ASSERT_EQ(0, atomic_load(&w[i].returned));
    pthread_t f;
    ASSERT_OK(pthread_create(&f, NULL, free_driver, d));
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ASSERT_EQ(ELECTOR_ECLOSED, atomic_load(&w[i].rc));
    }
    pthread_join(f, NULL);
    char *out = NULL;
    ASSERT_OK(eh_etcdctl(c, &out, "lease", "list", NULL));
    ASSERT(tl_contains(out, "found 0"));
    free(out);
    eh_stop(c);
}

/* elector_etcd_exec() runs fn on the loop thread (not the caller's, not the
 * callback thread) and returns once it did; elector_etcd_in_callback() is
 * true on the callback thread only; a callback past stall_ms without an
 * on_stall hook is reported on stderr and counted. The driver is made with
 * the client's defaults (NULL configuration) first: nothing is sent by it. */
static pthread_t exec_thread;
static atomic_int exec_ran, in_cb_seen, in_cb_elected;
static elector_etcd *cb_driver;

static void exec_fn(elector_etcd *etcd, void *arg)
{
    exec_thread = pthread_self();
    /* own_thread: the loop is the client's, its fd is refused, also here */
    atomic_store(&exec_ran, elector_etcd_fd(etcd) == -1 && arg == &exec_ran ? 1 : -1);
}

static void where_cb(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el, (void)ud;
    if (ev->type != ELECTOR_EV_ELECTED) return;
    atomic_store(&in_cb_seen, elector_etcd_in_callback(cb_driver) ? 1 : -1);
    sleep_ms(200); /* past stall_ms: reported on stderr */
    atomic_store(&in_cb_elected, 1);
}

TEST(exec_runs_on_the_loop_thread_and_in_callback_tells_the_callback_thread)
{
    elector_etcd *d = NULL;
    ASSERT_OK(eu_own_new(NULL, NULL, &d));
    ASSERT_OK(elector_etcd_exec(d, exec_fn, &exec_ran));
    ASSERT_EQ(1, atomic_load(&exec_ran));
    ASSERT(!pthread_equal(exec_thread, pthread_self()));
    ASSERT(!elector_etcd_in_callback(d));
    elector_etcd_free(d);

    eh_cluster *c = start1();
    eu_stall dc;
    stall_init(&dc);
    dc.stall_ms = 50;
    d = driver_on(eh_endpoints(c), &dc);
    cb_driver = d;
    elector_session *s = session_on(d, 5);
    elector_election *el = elector_election_new(s, "where", where_cb, NULL);
    ASSERT_NOT_NULL(el);
    ASSERT_OK(elector_campaign(el, "v", 1));
    ASSERT(wait_int(&in_cb_elected, 1, 5000));
    ASSERT_EQ(1, atomic_load(&in_cb_seen));
    ASSERT(!elector_etcd_in_callback(d));
    ASSERT_EQ(1, (long long)elector_etcd_stalls(d));
    atomic_store(&exec_ran, 0);
    ASSERT_OK(elector_etcd_exec(d, exec_fn, &exec_ran));
    ASSERT_EQ(1, atomic_load(&exec_ran));
    elector_etcd_free(d);
    eh_stop(c);
}

typedef struct {
    atomic_int n;
    int rc;
} guarded_answer;

static void guarded_answer_cb(elector_election *el, int err, void *ud)
{
    (void)el;
    guarded_answer *a = ud;
    a->rc = err;
    atomic_fetch_add(&a->n, 1);
}

/* A get_sync or a leader_sync of 30 s on another thread. */
typedef struct {
    elector_etcd *d;
    bool leader;
    int rc;
    atomic_int returned;
} sync_waiter;

static void *sync_wait_main(void *arg)
{
    sync_waiter *w = arg;
    if (w->leader) {
        elector_leader_info li;
        w->rc = elector_leader_sync(w->d, "pg", 30000, &li);
        if (!w->rc) elector_leader_free(&li);
    } else {
        elector_kv *kvs = NULL;
        size_t n = 0;
        w->rc = elector_kv_get_sync(w->d, "pg", 2, true, 30000, &kvs, &n);
        if (!w->rc) elector_kvs_free(kvs, n);
    }
    atomic_store(&w->returned, 1);
    return NULL;
}

/* Proclaim and the guarded delete through the driver (waited for and not), a
 * session made with the default configuration (NULL), and a guarded write that
 * etcd does not answer in time (the member frozen): ETIMEDOUT, and the
 * abandoned write's answer, when it comes, is dropped without harm; likewise
 * the answers of calls still waiting when the driver is freed. */
TEST_WITH_TIMEOUT(proclaim_guarded_delete_default_session_and_a_write_timed_out, 60)
{
    eh_cluster *c = start1();
    elector_etcd *d = driver_on(eh_endpoints(c), NULL);
    elector_session *s = elector_session_new(d, NULL, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_OK(elector_session_wait(s, 5000));
    elector_election *el = elector_election_new(s, "pg", NULL, NULL);
    ASSERT_NOT_NULL(el);
    ASSERT_OK(elector_campaign_sync(el, "v1", 2, 5000));
    ASSERT_OK(elector_proclaim(el, "v2", 2));
    elector_leader_info li;
    int rc = 1;
    for (int i = 0; i < 100; i++) {
        rc = elector_leader_sync(d, "pg", 2000, &li);
        ASSERT_OK(rc);
        bool v2 = li.value_len == 2 && !memcmp(li.value, "v2", 2);
        elector_leader_free(&li);
        if (v2) break;
        rc = 1;
        sleep_ms(20);
    }
    ASSERT_OK(rc); /* the proclaimed value is the leader's */
    ASSERT_OK(elector_guarded_put_sync(el, "pg-k", 4, "x", 1, 3000));
    ASSERT_OK(elector_guarded_delete_sync(el, "pg-k", 4, 3000));
    char *out = NULL;
    ASSERT_OK(eh_etcdctl(c, &out, "get", "pg-k", NULL));
    ASSERT_STREQ("", out);
    free(out);
    /* The guarded delete without waiting: its callback says 0, the key is gone. */
    ASSERT_OK(elector_guarded_put_sync(el, "pg-k2", 5, "x", 1, 3000));
    guarded_answer ga = {0};
    ASSERT_OK(elector_guarded_delete(el, "pg-k2", 5, guarded_answer_cb, &ga));
    ASSERT(wait_int(&ga.n, 1, 5000));
    ASSERT_OK(ga.rc);
    ASSERT_OK(eh_etcdctl(c, &out, "get", "pg-k2", NULL));
    ASSERT_STREQ("", out);
    free(out);
    ASSERT_OK(eh_member_pause(c, 0));
    ASSERT_EQ(ELECTOR_ETIMEDOUT, elector_guarded_put_sync(el, "pg-k", 4, "y", 1, 200));
    ASSERT_OK(eh_member_resume(c, 0));
    sleep_ms(300); /* the abandoned write's answer arrives, or not: no harm */
    /* A read and a leader query that wait (the member frozen) when another
     * thread frees the driver: both return ECLOSED; their answers, which come
     * later (the client's end cancels them), are dropped without harm. */
    ASSERT_OK(eh_member_pause(c, 0));
    sync_waiter kv = {.d = d, .leader = false}, ld = {.d = d, .leader = true};
    pthread_t t1, t2;
    ASSERT_OK(pthread_create(&t1, NULL, sync_wait_main, &kv));
    ASSERT_OK(pthread_create(&t2, NULL, sync_wait_main, &ld));
    sleep_ms(300);
    ASSERT_EQ(0, atomic_load(&kv.returned) + atomic_load(&ld.returned));
    elector_etcd_free(d);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    ASSERT_EQ(ELECTOR_ECLOSED, kv.rc);
    ASSERT_EQ(ELECTOR_ECLOSED, ld.rc);
    ASSERT_OK(eh_member_resume(c, 0));
    eh_stop(c);
}

TEST(bad_input_gives_clear_errors)
{
    elector_etcd *d = NULL;
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "http://[::1";
    ASSERT_EQ(ELECTOR_EINVAL, eu_own_new(&cfg, NULL, &d));
    ASSERT_NULL(d);
    cfg.endpoints = "127.0.0.1:1";
    ASSERT_OK(eu_own_new(&cfg, NULL, &d));
    ASSERT_NULL(elector_observe(d, "", NULL, NULL));
    elector_leader_info li;
    ASSERT_EQ(ELECTOR_EINVAL, elector_leader_sync(d, "", 100, &li));
    lanswer la = {0};
    ASSERT_EQ(ELECTOR_EINVAL, elector_leader(d, "", 100, leader_answer, &la));
    ASSERT_EQ(ELECTOR_EINVAL, elector_leader(d, "x", 100, NULL, NULL));
    /* nobody answers on port 1: the read fails or the driver's stop cancels
     * it; either way its callback runs once, before elector_etcd_free()
     * returns */
    ASSERT_OK(elector_leader(d, "x", 60000, leader_answer, &la));
    ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_exec(d, NULL, NULL));
    ASSERT_EQ(ELECTOR_EINVAL, elector_campaign(NULL, "x", 1));
    ASSERT(!elector_is_leader(NULL));
    elector_etcd_free(d);
    ASSERT_EQ(1, atomic_load(&la.n));
    ASSERT(la.rc < 0);
    elector_etcd_free(NULL);
}

/* Calls into the API from the loop thread (inside elector_etcd_exec) run
 * there at once instead of waiting for the loop (which would wait forever);
 * once the driver is being freed, calls are refused with ECLOSED. No etcd:
 * port 1 refuses every connection. */
static elector_etcd *inline_d;
static atomic_int inline_depth, inline_session_ok;

static void inner_exec(elector_etcd *etcd, void *arg)
{
    (void)etcd, (void)arg;
    atomic_store(&inline_depth, pthread_equal(pthread_self(), exec_thread) ? 2 : -2);
}

static void outer_exec(elector_etcd *etcd, void *arg)
{
    (void)etcd, (void)arg;
    exec_thread = pthread_self();
    /* Nested: the same thread, before this returns. */
    if (elector_etcd_exec(inline_d, inner_exec, NULL)) return;
    if (atomic_load(&inline_depth) != 2) return;
    elector_session *s = elector_session_new(inline_d, NULL, NULL, NULL);
    if (s) {
        elector_session_close(s);
        atomic_store(&inline_session_ok, 1);
    }
}

static atomic_int after_free_rc, after_free_null, freed_in_cb;

static void frees_then_calls(elector_etcd *d, int rc, const elector_leader_info *info,
                             void *ud)
{
    (void)rc, (void)info, (void)ud;
    elector_etcd_free(d); /* returns once the loop is over; d goes after this */
    atomic_store(&after_free_rc, elector_etcd_exec(d, exec_fn, NULL));
    atomic_store(&after_free_null, elector_session_new(d, NULL, NULL, NULL) == NULL &&
                                       elector_observe(d, "x", NULL, NULL) == NULL);
    elector_etcd_free(d); /* again: a no-op */
    atomic_store(&freed_in_cb, 1);
}

TEST(calls_from_the_loop_thread_run_inline_and_a_freed_driver_refuses_calls)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "127.0.0.1:1";
    cfg.dial_timeout_ms = 200;
    ASSERT_OK(eu_own_new(&cfg, NULL, &inline_d));
    ASSERT_OK(elector_etcd_exec(inline_d, outer_exec, NULL));
    ASSERT_EQ(2, atomic_load(&inline_depth));
    ASSERT_EQ(1, atomic_load(&inline_session_ok));

    /* Handles that are NULL: EINVAL, NULL, 0, false, or nothing done. */
    ASSERT_EQ(ELECTOR_EINVAL, elector_session_wait(NULL, 10));
    elector_session_close(NULL);
    ASSERT_EQ(0, elector_session_lease(NULL));
    ASSERT(!elector_session_alive(NULL));
    ASSERT_NULL(elector_election_new(NULL, "x", NULL, NULL));
    elector_election_free(NULL);
    ASSERT_EQ(ELECTOR_EINVAL, elector_campaign_sync(NULL, "x", 1, 10));
    ASSERT_EQ(ELECTOR_EINVAL, elector_resign_sync(NULL, 10));
    ASSERT_EQ(ELECTOR_EINVAL, elector_resign(NULL));
    /* one API: as elector_proclaim(NULL): we do not lead */
    ASSERT_EQ(ELECTOR_ENOTLEADER, elector_proclaim(NULL, "x", 1));
    ASSERT_EQ(0, elector_election_token(NULL));
    ASSERT_EQ(ELECTOR_EINVAL, elector_guarded_put(NULL, "k", 1, "v", 1, NULL, NULL));
    ASSERT_EQ(ELECTOR_EINVAL, elector_guarded_delete_sync(NULL, "k", 1, 10));
    elector_observer_free(NULL);
    ASSERT_EQ(0, (long long)elector_etcd_stalls(NULL));
    ASSERT(!elector_etcd_in_callback(NULL));
    elector_leader_info li;
    ASSERT_EQ(ELECTOR_EINVAL, elector_leader_sync(inline_d, "x", 10, NULL));
    ASSERT_EQ(ELECTOR_EINVAL, elector_leader_sync(NULL, "x", 10, &li));
    ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_exec(NULL, exec_fn, NULL));
    /* A session whose grant cannot be sent anywhere: an election on it is
     * made; an empty name is refused. */
    elector_session *s = elector_session_new(inline_d, NULL, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_NULL(elector_election_new(s, "", NULL, NULL));
    ASSERT_NULL(elector_election_new(s, NULL, NULL, NULL));
    elector_election *el = elector_election_new(s, "e", NULL, NULL);
    ASSERT_NOT_NULL(el);
    ASSERT_EQ(ELECTOR_EINVAL, elector_guarded_put(el, "k", 1, "v", 1, NULL, NULL));
    ASSERT(!elector_is_leader(el));

    /* Freed from a callback: later calls in it are refused. */
    ASSERT_OK(elector_leader(inline_d, "x", 5000, frees_then_calls, NULL));
    ASSERT(wait_int(&freed_in_cb, 1, 10000));
    ASSERT_EQ(ELECTOR_ECLOSED, atomic_load(&after_free_rc));
    ASSERT_EQ(1, atomic_load(&after_free_null));
}

/* Closing a handle whose callback is running waits until the callback has
 * returned: after the close the callback's data may be freed. No etcd: the
 * session's grant is refused (port 1), its SESSION_LOST is the callback. */
static atomic_int cb_entered, cb_left;

static void slow_session_cb(elector_session *s, const elector_event *ev, void *ud)
{
    (void)s, (void)ev, (void)ud;
    atomic_store(&cb_entered, 1);
    sleep_ms(300);
    atomic_store(&cb_left, 1);
}

TEST(closing_a_handle_waits_for_its_running_callback)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "127.0.0.1:1";
    cfg.dial_timeout_ms = 200;
    elector_etcd *d = NULL;
    ASSERT_OK(eu_own_new(&cfg, NULL, &d));
    elector_session *s = elector_session_new(d, NULL, slow_session_cb, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT(wait_int(&cb_entered, 1, 5000));
    elector_session_close(s);
    ASSERT_EQ(1, atomic_load(&cb_left));
    elector_etcd_free(d);
}

/* The session's SESSION_LOST (the grant refused: port 1) frees the driver;
 * then, in the same callback (the handle lives until it returns), every call
 * is refused with ECLOSED or NULL and the session's close does nothing more. */
static atomic_int lost_freed, lost_wait_rc, lost_el_null, lost_revoke_rc, lost_leader_rc,
    lost_put_rc, lost_alive, lost_lease;

static void lost_frees_driver(elector_session *s, const elector_event *ev, void *ud)
{
    elector_etcd *d = ud;
    if (ev->type != ELECTOR_EV_SESSION_LOST) return;
    elector_etcd_free(d);
    atomic_store(&lost_wait_rc, elector_session_wait(s, 10));
    atomic_store(&lost_el_null, elector_election_new(s, "x", NULL, NULL) == NULL);
    atomic_store(&lost_revoke_rc, elector_lease_revoke(d, 5, 100, revoke_answer, NULL));
    atomic_store(&lost_leader_rc, elector_leader(d, "x", 100, leader_answer, NULL));
    atomic_store(&lost_put_rc, elector_kv_put_sync(d, "k", 1, "v", 1, 0, 0, 100));
    atomic_store(&lost_alive, elector_session_alive(s));
    atomic_store(&lost_lease, (int)elector_session_lease(s));
    elector_session_close(s); /* the driver's shutdown took it: nothing */
    atomic_store(&lost_freed, 1);
}

TEST(calls_in_a_callback_after_it_freed_the_driver_are_refused)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "127.0.0.1:1";
    cfg.dial_timeout_ms = 200;
    elector_etcd *d = NULL;
    ASSERT_OK(eu_own_new(&cfg, NULL, &d));
    elector_session *s = elector_session_new(d, NULL, lost_frees_driver, d);
    ASSERT_NOT_NULL(s);
    ASSERT(wait_int(&lost_freed, 1, 10000));
    ASSERT_EQ(ELECTOR_ECLOSED, atomic_load(&lost_wait_rc));
    ASSERT_EQ(1, atomic_load(&lost_el_null));
    ASSERT_EQ(ELECTOR_ECLOSED, atomic_load(&lost_revoke_rc));
    ASSERT_EQ(ELECTOR_ECLOSED, atomic_load(&lost_leader_rc));
    ASSERT_EQ(ELECTOR_ECLOSED, atomic_load(&lost_put_rc));
    ASSERT_EQ(0, atomic_load(&lost_alive)); /* never granted */
    ASSERT_EQ(0, atomic_load(&lost_lease));
}

/* An election freed in its own callback (its last one): later calls on it in
 * that callback are refused with ECLOSED, it is no longer leader, and its key
 * is gone from etcd. Then a campaign that waits behind a leader past its
 * timeout; a leader whose value is empty; deletes and bad arguments; last, an
 * election's callback frees the driver and then its election. */
typedef struct selffree {
    atomic_int done, campaign, proclaim, resign, campaign_sync, resign_sync, gput_sync,
        gdel, leader;
    elector_etcd *d;
} selffree;

static void selffree_cb(elector_election *el, const elector_event *ev, void *ud)
{
    selffree *f = ud;
    if (ev->type != ELECTOR_EV_ELECTED) return;
    if (f->d) elector_etcd_free(f->d); /* the last part: the driver first */
    elector_election_free(el);
    guarded_answer ga = {0};
    atomic_store(&f->campaign, elector_campaign(el, "x", 1));
    atomic_store(&f->proclaim, elector_proclaim(el, "x", 1));
    atomic_store(&f->resign, elector_resign(el));
    atomic_store(&f->campaign_sync, elector_campaign_sync(el, "x", 1, 100));
    atomic_store(&f->resign_sync, elector_resign_sync(el, 100));
    atomic_store(&f->gput_sync, elector_guarded_put_sync(el, "g", 1, "v", 1, 100));
    atomic_store(&f->gdel, elector_guarded_delete(el, "g", 1, guarded_answer_cb, &ga));
    atomic_store(&f->leader, elector_is_leader(el));
    atomic_store(&f->done, 1);
}

TEST(an_election_freed_in_its_own_callback_refuses_calls)
{
    eh_cluster *c = start1();
    elector_etcd *d = driver_on(eh_endpoints(c), NULL);
    elector_session *s = session_on(d, 5);
    selffree f = {0};
    elector_election *el = elector_election_new(s, "self", selffree_cb, &f);
    ASSERT_NOT_NULL(el);
    ASSERT_OK(elector_campaign(el, "v", 1));
    ASSERT(wait_int(&f.done, 1, 5000));
    ASSERT_EQ(ELECTOR_ECLOSED, atomic_load(&f.campaign));
    ASSERT_EQ(ELECTOR_ECLOSED, atomic_load(&f.proclaim));
    ASSERT_EQ(ELECTOR_ECLOSED, atomic_load(&f.resign));
    ASSERT_EQ(ELECTOR_ECLOSED, atomic_load(&f.campaign_sync));
    ASSERT_EQ(ELECTOR_ECLOSED, atomic_load(&f.resign_sync));
    ASSERT_EQ(ELECTOR_ECLOSED, atomic_load(&f.gput_sync));
    ASSERT_EQ(ELECTOR_ECLOSED, atomic_load(&f.gdel));
    ASSERT_EQ(0, atomic_load(&f.leader));
    /* resigned: the free (and its resign) is made once the callback has
     * returned, after f.done was set there, so the key goes soon, not at once
     * (under TSan a read could come before the resign's Delete) */
    elector_leader_info li;
    int lrc = 0;
    for (int i = 0; i < 300 && (lrc = elector_leader_sync(d, "self", 3000, &li)) == 0;
         i++) {
        elector_leader_free(&li);
        tl_msleep(10);
    }
    ASSERT_EQ(1, lrc);

    /* A leader with an empty value; a second campaign times out behind it. */
    elector_election *a = elector_election_new(s, "to", NULL, NULL);
    ASSERT_OK(elector_campaign_sync(a, "", 0, 5000));
    ASSERT_OK(elector_leader_sync(d, "to", 3000, &li));
    ASSERT_EQ(0, (long long)li.value_len);
    ASSERT_NOT_NULL(li.value);
    elector_leader_free(&li);
    elector_session *s2 = session_on(d, 5);
    elector_election *b = elector_election_new(s2, "to", NULL, NULL);
    ASSERT_EQ(ELECTOR_ETIMEDOUT, elector_campaign_sync(b, "b", 1, 300));
    ASSERT(!elector_is_leader(b));
    ASSERT(elector_is_leader(a));

    /* Deletes: without the count, and of a prefix without the wait. */
    ASSERT_OK(elector_kv_put_sync(d, "dp/a", 4, "1", 1, 0, 0, 3000));
    ASSERT_OK(elector_kv_put_sync(d, "dp/b", 4, "", 0, 0, 0, 3000));
    elector_kv *kvs = NULL;
    size_t n = 0;
    ASSERT_OK(elector_kv_get_sync(d, "dp/b", 4, false, 3000, &kvs, &n));
    ASSERT_EQ(1, (long long)n);
    ASSERT_EQ(0, (long long)kvs[0].value_len); /* an empty value */
    elector_kvs_free(kvs, n);
    ASSERT_OK(elector_kv_delete_sync(d, "dp/a", 4, false, 3000, NULL));
    kv_answer ka = {0};
    ASSERT_OK(elector_kv_delete(d, "dp/", 3, true, 3000, kv_answer_cb, &ka));
    ASSERT(wait_int(&ka.n, 1, 5000));
    ASSERT_EQ(0, ka.rc);
    ASSERT_EQ(1, (long long)ka.deleted); /* dp/b: dp/a went before */
    ASSERT_OK(elector_kv_get_sync(d, "dp/", 3, true, 3000, &kvs, &n));
    ASSERT_EQ(0, (long long)n);
    elector_kvs_free(kvs, n);
    /* Bad arguments: clear errors, nothing sent. */
    ASSERT_EQ(ELECTOR_EINVAL, elector_kv_get_sync(d, "k", 1, false, 100, NULL, &n));
    ASSERT_EQ(ELECTOR_EINVAL, elector_kv_get_sync(d, "k", 1, false, 100, &kvs, NULL));
    ASSERT_EQ(ELECTOR_EINVAL, elector_leader_sync(d, NULL, 100, &li));
    ASSERT_EQ(ELECTOR_EINVAL, elector_leader(d, NULL, 100, leader_answer, NULL));
    ASSERT_NULL(elector_observe(d, NULL, NULL, NULL));

    /* Last: b's ELECTED (a resigns) frees the driver, then b, in the callback.
     * The new b on a session of its own: on s2 it would share the old b's key
     * (NAME/lease), which the old b's free may still be deleting. */
    elector_election_free(b);
    selffree g = {.d = d};
    b = elector_election_new(session_on(d, 5), "to", selffree_cb, &g);
    ASSERT_OK(elector_campaign(b, "b", 1));
    /* b's ELECTED can come before a's delete is answered (the watch event and
     * the answer are two streams): then b's callback frees the client under
     * the wait, which says so (ECLOSED; seen once with the machine busy). */
    int rs = elector_resign_sync(a, 3000);
    ASSERT(rs == 0 || rs == ELECTOR_ECLOSED);
    ASSERT(wait_int(&g.done, 1, 10000));
    ASSERT_EQ(ELECTOR_ECLOSED, atomic_load(&g.campaign));
    ASSERT_EQ(ELECTOR_ECLOSED, atomic_load(&g.campaign_sync));
    ASSERT_EQ(ELECTOR_ECLOSED, atomic_load(&g.gput_sync));
    ASSERT_EQ(0, atomic_load(&g.leader));
    /* The driver's end revoked both leases. */
    char *out = NULL;
    ASSERT_OK(eh_etcdctl(c, &out, "lease", "list", NULL));
    ASSERT(tl_contains(out, "found 0"));
    free(out);
    eh_stop(c);
}

/* The member frozen: a grant and a resign that etcd does not answer end at
 * their timeouts (ETIMEDOUT), and the calls still waiting with no limit (a
 * session's grant, a guarded write) return ECLOSED when another thread frees
 * the driver. */
typedef struct frozen_waiter {
    elector_session *s;
    elector_election *el;
    bool resign;
    int rc;
    atomic_int returned;
} frozen_waiter;

static void *frozen_wait_main(void *arg)
{
    frozen_waiter *w = arg;
    if (w->s)
        w->rc = elector_session_wait(w->s, -1);
    else if (w->resign)
        w->rc = elector_resign_sync(w->el, -1);
    else
        w->rc = elector_guarded_put_sync(w->el, "fz", 2, "v", 1, -1);
    atomic_store(&w->returned, 1);
    return NULL;
}

TEST_WITH_TIMEOUT(calls_etcd_does_not_answer_end_at_their_timeout_or_the_free, 60)
{
    eh_cluster *c = start1();
    elector_etcd *d = driver_on(eh_endpoints(c), NULL);
    elector_session *s = session_on(d, 5);
    elector_election *el = elector_election_new(s, "fz", NULL, NULL);
    ASSERT_OK(elector_campaign_sync(el, "v", 1, 5000));
    elector_session *s3 = session_on(d, 5);
    elector_election *el3 = elector_election_new(s3, "fz3", NULL, NULL);
    ASSERT_OK(elector_campaign_sync(el3, "v", 1, 5000));
    ASSERT_OK(eh_member_pause(c, 0));
    elector_session *s2 = elector_session_new(d, NULL, NULL, NULL);
    ASSERT_NOT_NULL(s2);
    ASSERT_EQ(ELECTOR_ETIMEDOUT, elector_session_wait(s2, 200));
    ASSERT(!elector_session_alive(s2)); /* not granted yet */
    frozen_waiter ws = {.s = s2}, wg = {.el = el}, wr = {.el = el3, .resign = true};
    pthread_t t1, t2, t3;
    ASSERT_OK(pthread_create(&t1, NULL, frozen_wait_main, &ws));
    ASSERT_OK(pthread_create(&t2, NULL, frozen_wait_main, &wg));
    ASSERT_OK(pthread_create(&t3, NULL, frozen_wait_main, &wr));
    sleep_ms(300);
    ASSERT_EQ(0, atomic_load(&ws.returned) + atomic_load(&wg.returned) +
                     atomic_load(&wr.returned));
    /* The resign's delete is not answered: not done in 200 ms (the belief
     * ends at once all the same). */
    ASSERT_EQ(ELECTOR_ETIMEDOUT, elector_resign_sync(el, 200));
    ASSERT(!elector_is_leader(el));
    /* The revokes of s3 and s are not answered either: the free waits for
     * them 1 s at most (the request timeout is 2 s). */
    elector_session_close(s3);
    elector_session_close(s);
    int64_t t0 = elector_now_ns();
    elector_etcd_free(d);
    double free_ms = (elector_now_ns() - t0) / 1e6;
    tl_log("free with etcd frozen: %.0f ms", free_ms);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    pthread_join(t3, NULL);
    ASSERT_EQ(ELECTOR_ECLOSED, ws.rc);
    ASSERT_EQ(ELECTOR_ECLOSED, wg.rc);
    ASSERT_EQ(ELECTOR_ECLOSED, wr.rc);
    ASSERT_GE(free_ms, 900); /* it waited for the revokes */
    ASSERT_OK(eh_member_resume(c, 0));
    eh_stop(c);
}

/* The documented order of the end, each handle freed before the driver: the
 * session's close sends the revoke, the driver's free right after must not
 * cancel it. The lease (with the leader key) is gone from etcd once the free
 * returned, not after its TTL. */
TEST(closing_the_session_then_freeing_the_driver_revokes_the_lease)
{
    eh_cluster *c = start1();
    for (int i = 0; i < 5; i++) {
        elector_etcd *d = driver_on(eh_endpoints(c), NULL);
        elector_session *s = session_on(d, 30);
        elector_election *el = elector_election_new(s, "order", NULL, NULL);
        ASSERT_OK(elector_campaign_sync(el, "v", 1, 5000));
        elector_election_free(el);
        elector_session_close(s);
        elector_etcd_free(d);
        char *out = NULL;
        ASSERT_OK(eh_etcdctl(c, &out, "lease", "list", NULL));
        if (!tl_contains(out, "found 0")) tl_log("round %d: %s", i, out);
        ASSERT(tl_contains(out, "found 0"));
        free(out);
        ASSERT_OK(eh_etcdctl(c, &out, "get", "--prefix", "order/", "--keys-only", NULL));
        ASSERT_STREQ("", out);
        free(out);
    }
    eh_stop(c);
}

/* stall_ms <= 0 means the default (1000 ms): an answer's callback of 300 ms is
 * no stall then (with stall_ms taken as 0 it would be). No etcd: port 1. */
static atomic_int slow_answered;

static void slow_answer(elector_etcd *d, int rc, const elector_leader_info *info,
                        void *ud)
{
    (void)d, (void)rc, (void)info, (void)ud;
    sleep_ms(300);
    atomic_store(&slow_answered, 1);
}

TEST(stall_ms_zero_is_the_default)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "127.0.0.1:1";
    cfg.dial_timeout_ms = 200;
    eu_stall dc;
    stall_init(&dc);
    dc.stall_ms = 0;
    dc.on_stall = on_stall;
    elector_etcd *d = NULL;
    ASSERT_OK(eu_own_new(&cfg, &dc, &d));
    ASSERT_OK(elector_leader(d, "x", 1000, slow_answer, NULL));
    ASSERT(wait_int(&slow_answered, 1, 5000));
    ASSERT_EQ(0, (long long)elector_etcd_stalls(d));
    ASSERT_EQ(0, atomic_load(&stall_reports));
    elector_etcd_free(d);
}

/* elector_etcd_errstr() on the callback thread: in a leader read's callback
 * that reports a failure to connect, the client's text of it (the endpoint and
 * the cause); "" before any call failed. No etcd: port 1. */
static char detail_seen[256];
static atomic_int detail_rc, detail_answered;

static void detail_answer(elector_etcd *d, int rc, const elector_leader_info *info,
                          void *ud)
{
    (void)info, (void)ud;
    snprintf(detail_seen, sizeof(detail_seen), "%s", elector_etcd_errstr(d));
    atomic_store(&detail_rc, rc);
    atomic_store(&detail_answered, 1);
}

TEST(cb_detail_names_the_endpoint_and_the_cause)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "127.0.0.1:1";
    cfg.dial_timeout_ms = 200;
    elector_etcd *d = NULL;
    ASSERT_OK(eu_own_new(&cfg, NULL, &d));
    ASSERT_STREQ("", elector_etcd_errstr(d));
    ASSERT_OK(elector_leader(d, "x", 3000, detail_answer, NULL));
    ASSERT(wait_int(&detail_answered, 1, 5000));
    ASSERT_EQ(ELECTOR_ECONNECT, atomic_load(&detail_rc));
    ASSERT_CONTAINS(detail_seen, "127.0.0.1:1");
    ASSERT_CONTAINS(detail_seen, "Connection refused");
    elector_etcd_free(d);
}

/* Handles freed by the user while elector_etcd_free() on another thread
 * waits for the loop (busy in a job): each free returns at once (the driver
 * is stopping), and the driver's end, which finds them closed, frees each
 * once (ASan: no double free, no leak). No etcd: port 1. */
static atomic_int job_blocked, job_release;

static void blocking_job(elector_etcd *etcd, void *arg)
{
    (void)etcd, (void)arg;
    atomic_store(&job_blocked, 1);
    while (!atomic_load(&job_release))
        sleep_ms(5);
}

static void *exec_blocking(void *arg)
{
    elector_etcd *d = arg;
    atomic_store(&exec_ran, elector_etcd_exec(d, blocking_job, NULL) == 0 ? 1 : -1);
    return NULL;
}

TEST(handles_freed_while_the_driver_is_being_freed)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = "127.0.0.1:1";
    cfg.dial_timeout_ms = 200;
    elector_etcd *d = NULL;
    ASSERT_OK(eu_own_new(&cfg, NULL, &d));
    elector_session *s = elector_session_new(d, NULL, NULL, NULL);
    elector_election *el = elector_election_new(s, "x", NULL, NULL);
    elector_observer *o = elector_observe(d, "x", NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_NOT_NULL(el);
    ASSERT_NOT_NULL(o);
    atomic_store(&exec_ran, 0);
    pthread_t te, tf;
    ASSERT_OK(pthread_create(&te, NULL, exec_blocking, d));
    ASSERT(wait_int(&job_blocked, 1, 5000));
    ASSERT_OK(pthread_create(&tf, NULL, free_driver, d));
    int rc = 0;
    for (int i = 0; i < 500 && rc != ELECTOR_ECLOSED; i++) {
        rc = elector_session_wait(s, 0); /* ECLOSED once the free began */
        if (rc != ELECTOR_ECLOSED) sleep_ms(10);
    }
    ASSERT_EQ(ELECTOR_ECLOSED, rc);
    elector_observer_free(o);
    elector_election_free(el);
    elector_session_close(s);
    atomic_store(&job_release, 1);
    pthread_join(te, NULL);
    pthread_join(tf, NULL);
    ASSERT_EQ(1, atomic_load(&exec_ran)); /* the job queued before the stop ran */
}
