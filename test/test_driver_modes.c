/* SPDX-License-Identifier: MIT */
/* One API, two ways to drive a client: what was the driver's alone now works
 * driven by the caller's loop too (elector_resign_sync, elector_leader, the
 * key operations, a lease's revoke, elector_etcd_exec), and a client with
 * own_thread refuses the loop's own calls and keeps a handle closed in its own
 * callback alive until that callback returns. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "elector/election.h"
#include "etcd_harness.h"
#include "testlib.h"

static elector_etcd *client_on(const char *endpoints, bool own_thread)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = endpoints;
    cfg.dial_timeout_ms = 1000;
    cfg.request_timeout_ms = 2000;
    cfg.own_thread = own_thread;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    ASSERT_OK(elector_etcd_err(e));
    return e;
}

/* Runs the caller's loop until *flag is set (at most ms). */
static bool loop_until(elector_etcd *e, const int *flag, int ms)
{
    int64_t end = elector_now_ns() + (int64_t)ms * 1000000;
    while (!*flag && elector_now_ns() < end)
        elector_etcd_run_once(e, 50);
    return *flag;
}

typedef struct answers {
    int n, rc;
    size_t kvs;
    int64_t deleted, token;
    pthread_t thread;
} answers;

static void kv_answer(elector_etcd *e, int rc, const elector_kv *kvs, size_t n,
                      int64_t deleted, void *ud)
{
    (void)e, (void)kvs;
    answers *a = ud;
    a->rc = rc;
    a->kvs = n;
    a->deleted = deleted;
    a->thread = pthread_self();
    a->n++;
}

static void leader_answer(elector_etcd *e, int rc, const elector_leader_info *info,
                          void *ud)
{
    (void)e;
    answers *a = ud;
    a->rc = rc;
    a->token = info ? info->token : 0;
    a->n++;
}

static void revoke_answer(elector_etcd *e, int rc, void *ud)
{
    (void)e;
    answers *a = ud;
    a->rc = rc;
    a->n++;
}

static void exec_here(elector_etcd *e, void *arg)
{
    (void)e;
    *(pthread_t *)arg = pthread_self();
}

TEST(keys_leader_revoke_and_exec_in_the_callers_loop)
{
    eh_opts o = {.members = 1};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    elector_etcd *e = client_on(eh_endpoints(c), false);
    ASSERT(elector_etcd_fd(e) >= 0);

    /* the _sync forms run the loop */
    ASSERT_OK(elector_kv_put_sync(e, "m/a", 3, "1", 1, 0, 0, 5000));
    ASSERT_EQ(
        1, elector_kv_put_sync(e, "m/a", 3, "2", 1, 0, ELECTOR_KV_PUT_IF_ABSENT, 5000));
    elector_kv *kvs = NULL;
    size_t n = 0;
    ASSERT_OK(elector_kv_get_sync(e, "m/", 2, true, 5000, &kvs, &n));
    ASSERT_EQ(1, n);
    ASSERT_EQ('1', kvs[0].value[0]);
    elector_kvs_free(kvs, n);

    /* the others answer from the loop, on this thread */
    answers a = {0};
    ASSERT_OK(elector_kv_get(e, "m/", 2, true, 5000, kv_answer, &a));
    ASSERT_EQ(0, a.n); /* not before the loop runs */
    ASSERT(loop_until(e, &a.n, 5000));
    ASSERT_OK(a.rc);
    ASSERT_EQ(1, a.kvs);
    ASSERT(pthread_equal(a.thread, pthread_self()));
    memset(&a, 0, sizeof(a));
    ASSERT_OK(elector_kv_delete(e, "m/", 2, true, 5000, kv_answer, &a));
    ASSERT(loop_until(e, &a.n, 5000));
    ASSERT_EQ(1, a.deleted);

    /* a leader, read both ways; then its session closed and the lease
     * revoked again: etcd no longer knows it, which is a success */
    elector_session *s = elector_session_new(e, NULL, NULL, NULL);
    ASSERT_NOT_NULL(s);
    ASSERT_OK(elector_session_wait(s, 5000));
    elector_election *el = elector_election_new(s, "modes", NULL, NULL);
    ASSERT_NOT_NULL(el);
    ASSERT_OK(elector_campaign_sync(el, "v", 1, 5000));
    memset(&a, 0, sizeof(a));
    ASSERT_OK(elector_leader(e, "modes", 5000, leader_answer, &a));
    ASSERT(loop_until(e, &a.n, 5000));
    ASSERT_OK(a.rc);
    ASSERT_EQ(elector_election_token(el), a.token);
    int64_t lease = elector_session_lease(s);
    elector_election_free(el);
    ASSERT_OK(elector_session_close_sync(s, 5000));
    memset(&a, 0, sizeof(a));
    ASSERT_OK(elector_lease_revoke(e, lease, 5000, revoke_answer, &a));
    ASSERT(loop_until(e, &a.n, 5000));
    ASSERT_OK(a.rc);

    /* exec runs at once, here; no threads, no stalls */
    pthread_t where;
    memset(&where, 0, sizeof(where));
    ASSERT_OK(elector_etcd_exec(e, exec_here, &where));
    ASSERT(pthread_equal(where, pthread_self()));
    ASSERT_EQ(0, (long long)elector_etcd_stalls(e));
    ASSERT(!elector_etcd_in_callback(e));
    elector_etcd_free(e);
    eh_stop(c);
}

/* elector_resign_sync(), both ways: 0 once RESIGNED came; EINVAL when idle.
 * The log (elector_election_set_log) sees ELECTED and RESIGNED: from the loop,
 * or on the callback thread. */
static atomic_int resigned, logged, logged_in_cb;
static elector_etcd *log_client;

static void log_beliefs(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el, (void)ud;
    if (ev->type != ELECTOR_EV_ELECTED && ev->type != ELECTOR_EV_RESIGNED) return;
    atomic_fetch_add(&logged, 1);
    atomic_fetch_add(&logged_in_cb, elector_etcd_in_callback(log_client));
}

static void count_resigned(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el, (void)ud;
    if (ev->type == ELECTOR_EV_RESIGNED) atomic_fetch_add(&resigned, 1);
}

TEST(resign_sync_both_ways)
{
    eh_opts o = {.members = 1};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    for (int own = 0; own <= 1; own++) {
        atomic_store(&resigned, 0);
        atomic_store(&logged, 0);
        atomic_store(&logged_in_cb, 0);
        elector_etcd *e = client_on(eh_endpoints(c), own);
        log_client = e;
        elector_session *s = elector_session_new(e, NULL, NULL, NULL);
        ASSERT_NOT_NULL(s);
        ASSERT_OK(elector_session_wait(s, 5000));
        elector_election *el = elector_election_new(s, "rs", count_resigned, NULL);
        ASSERT_NOT_NULL(el);
        ASSERT_EQ(ELECTOR_EINVAL, elector_resign_sync(el, 1000)); /* idle */
        elector_election_set_log(el, log_beliefs, NULL);
        ASSERT_OK(elector_campaign_sync(el, "v", 1, 5000));
        ASSERT(elector_is_leader(el));
        ASSERT_OK(elector_resign_sync(el, 5000));
        ASSERT(!elector_is_leader(el));
        if (!own) ASSERT_EQ(1, atomic_load(&resigned)); /* delivered by the loop */
        elector_leader_info li;
        ASSERT_EQ(1, elector_leader_sync(e, "rs", 5000, &li)); /* the key is gone */
        for (int i = 0; i < 500 && atomic_load(&logged) < 2; i++) {
            struct timespec t = {0, 10000000};
            nanosleep(&t, NULL);
        }
        ASSERT_EQ(2, atomic_load(&logged));
        ASSERT_EQ(own ? 2 : 0, atomic_load(&logged_in_cb));
        elector_election_free(el);
        elector_session_close(s);
        elector_etcd_free(e);
    }
    eh_stop(c);
}

/* own_thread: the loop is the client's; what reads the client answers from
 * any thread. No etcd: port 1. */
TEST(own_thread_refuses_the_loops_calls)
{
    elector_etcd *e = client_on("127.0.0.1:1", true);
    ASSERT_EQ(-1, elector_etcd_fd(e));
    ASSERT_EQ(-1, elector_etcd_timeout(e));
    ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_process(e));
    ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_run_once(e, 10));
    ASSERT_STREQ("", elector_etcd_errstr(e));
    ASSERT_STREQ("", elector_etcd_current_endpoint(e));
    elector_endpoint_info info;
    ASSERT_OK(elector_etcd_endpoint_info(e, 0, &info));
    ASSERT_STREQ("127.0.0.1:1", info.authority);
    ASSERT_EQ(1, info.loopback);
    ASSERT_EQ(ELECTOR_EINVAL, elector_etcd_endpoint_info(e, 1, &info));
    elector_etcd_stats st;
    elector_etcd_get_stats(e, &st);
    ASSERT_EQ(0, (long long)st.connects);
    ASSERT(!elector_etcd_in_callback(e));
    elector_etcd_free(e);
}

/* own_thread: a session closed in its own callback (SESSION_LOST: the grant
 * refused, port 1) lives until the callback returns; the calls it makes after
 * the close are refused. */
static atomic_int closed_wait_rc, closed_done;

static void close_in_own_callback(elector_session *s, const elector_event *ev, void *ud)
{
    (void)ud;
    if (ev->type != ELECTOR_EV_SESSION_LOST) return;
    elector_session_close(s);
    atomic_store(&closed_wait_rc, elector_session_wait(s, 10));
    ASSERT_EQ(0, elector_session_lease(s));
    ASSERT(!elector_session_alive(s));
    ASSERT_NULL(elector_election_new(s, "x", NULL, NULL));
    atomic_store(&closed_done, 1);
}

TEST(a_session_closed_in_its_own_callback_refuses_calls)
{
    elector_etcd *e = client_on("127.0.0.1:1", true);
    elector_session *s = elector_session_new(e, NULL, close_in_own_callback, NULL);
    ASSERT_NOT_NULL(s);
    for (int i = 0; i < 1000 && !atomic_load(&closed_done); i++) {
        struct timespec t = {0, 10000000};
        nanosleep(&t, NULL);
    }
    ASSERT_EQ(1, atomic_load(&closed_done));
    ASSERT_EQ(ELECTOR_ECLOSED, atomic_load(&closed_wait_rc));
    elector_etcd_free(e);
}

/* elector_session_close_sync() whose revoke fails on the way (etcd down: the
 * connection refused) makes it again until its time is up, both ways: once
 * etcd is back the lease is gone when close_sync returns 0. */
struct closer {
    elector_session *s;
    int rc;
    double ms;
};

static void *close_from_thread(void *arg)
{
    struct closer *k = arg;
    int64_t t0 = elector_now_ns();
    k->rc = elector_session_close_sync(k->s, 10000);
    k->ms = (double)(elector_now_ns() - t0) / 1e6;
    return NULL;
}

/* A lone member, a client on it and a granted session (TTL 60 s). */
struct lone {
    eh_cluster *c;
    elector_etcd *e;
    elector_session *s;
};

static struct lone lone_session(bool own_thread)
{
    struct lone l = {.c = eh_start(&(eh_opts){.members = 1})};
    ASSERT_NOT_NULL(l.c);
    l.e = client_on(eh_endpoints(l.c), own_thread);
    elector_session_config sc;
    elector_session_config_init(&sc);
    sc.ttl_s = 60;
    l.s = elector_session_new(l.e, &sc, NULL, NULL);
    ASSERT_NOT_NULL(l.s);
    ASSERT_OK(elector_session_wait(l.s, 5000));
    return l;
}

static void close_sync_across_a_restart(bool own_thread)
{
    struct lone l = lone_session(own_thread);
    eh_cluster *c = l.c;
    elector_etcd *e = l.e;
    elector_session *s = l.s;
    int64_t lease = elector_session_lease(s);
    ASSERT(lease > 0);
    ASSERT_OK(eh_member_kill(c, 0));
    /* The restart is made from this thread: a member dies with the thread
     * that started it. */
    struct closer k = {.s = s};
    pthread_t th;
    ASSERT_OK(pthread_create(&th, NULL, close_from_thread, &k));
    tl_msleep(800);
    ASSERT_OK(eh_member_restart(c, 0));
    ASSERT_OK(eh_wait_healthy(c, 0, 10));
    pthread_join(th, NULL);
    tl_log("%s: close_sync across a restart: %s after %.0f ms",
           own_thread ? "own_thread" : "caller's loop", elector_strerror(k.rc), k.ms);
    ASSERT_OK(k.rc);
    char hex[32], *out = NULL;
    snprintf(hex, sizeof(hex), "%llx", (unsigned long long)lease);
    ASSERT_OK(eh_etcdctl(c, &out, "lease", "timetolive", hex, NULL));
    ASSERT_NOT_NULL(strstr(out, "already expired"));
    free(out);
    elector_etcd_free(e);
    eh_stop(c);
}

TEST_WITH_TIMEOUT(close_sync_revokes_again_after_a_failure_both_ways, 120)
{
    close_sync_across_a_restart(false);
    close_sync_across_a_restart(true);
}

/* own_thread: the client freed from another thread while a close_sync waits
 * for its revoke, or pauses between two revokes (etcd down, the revoke made
 * again every 100 ms). The free must wait for the closing thread and the close
 * end with ELECTOR_ECLOSED (or the revoke's ECANCELED), at once, not at its
 * timeout, and touch nothing freed (ASan, valgrind). */
static void client_freed_during_close_sync(int free_after_ms)
{
    struct lone l = lone_session(true);
    eh_cluster *c = l.c;
    elector_etcd *e = l.e;
    elector_session *s = l.s;
    ASSERT_OK(eh_member_kill(c, 0));
    struct closer k = {.s = s};
    pthread_t th;
    ASSERT_OK(pthread_create(&th, NULL, close_from_thread, &k));
    tl_msleep(free_after_ms);
    int64_t t0 = elector_now_ns();
    elector_etcd_free(e);
    double free_ms = (double)(elector_now_ns() - t0) / 1e6;
    pthread_join(th, NULL);
    tl_log("client freed %d ms into close_sync: the free took %.0f ms, close_sync %s "
           "after %.0f ms",
           free_after_ms, free_ms, elector_strerror(k.rc), k.ms);
    ASSERT(k.rc == ELECTOR_ECLOSED || k.rc == ELECTOR_ECANCELED);
    ASSERT(k.ms < 5000);
    eh_stop(c);
}

TEST_WITH_TIMEOUT(a_client_freed_during_close_sync_ends_the_close, 120)
{
    /* 50 ms: long after the closing thread entered close_sync (a free that
     * began first would be a use of a handle after the free, not allowed) */
    client_freed_during_close_sync(50);
    client_freed_during_close_sync(450);
    client_freed_during_close_sync(1250);
}
