/* SPDX-License-Identifier: MIT */
/* The low-level client against faults of real 3-member etcd clusters: the
 * connected member killed, frozen (SIGSTOP) or shut down cleanly (GOAWAY),
 * quorum lost and regained, and clusters that cannot be reached at all.
 *
 * The endpoint list always starts with the member that will be faulted, so
 * the client connects to it first (checked with elector_etcd_current_endpoint).
 * Timings are logged with tl_log for the report. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <nghttp2/nghttp2.h>
#include "elector/etcd.h"
#include "transport_internal.h" /* elector__grpc_error: the status mapping */
#include "etcd_harness.h"
#include "testlib.h"

/* ---------------------------------------------------------------- helpers */

static eh_cluster *start3(void)
{
    eh_opts o = {.members = 3};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    ASSERT_GE(eh_wait_leader(c, 10), 0);
    return c;
}

/* Index of a member that is not the leader. */
static int follower(eh_cluster *c)
{
    int l = eh_wait_leader(c, 10);
    ASSERT_GE(l, 0);
    return (l + 1) % 3;
}

/* "first,other,other": member `first` leads the list. */
static const char *endpoints_first(eh_cluster *c, int first, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s", eh_endpoint(c, first));
    for (int i = 0; i < eh_members(c); i++)
        if (i != first) n += snprintf(buf + n, cap - (size_t)n, ",%s", eh_endpoint(c, i));
    return buf;
}

static elector_etcd *client_ex(const char *endpoints, int64_t dial_ms, int64_t req_ms,
                               int64_t ka_time_ms, int64_t ka_idle_ms,
                               int64_t ka_timeout_ms)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = endpoints;
    cfg.dial_timeout_ms = dial_ms;
    cfg.request_timeout_ms = req_ms;
    cfg.keepalive_time_ms = ka_time_ms;
    cfg.keepalive_idle_ms = ka_idle_ms;
    cfg.keepalive_timeout_ms = ka_timeout_ms;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    ASSERT_EQ(0, elector_etcd_err(e));
    return e;
}

static elector_etcd *client(const char *endpoints)
{
    return client_ex(endpoints, 1000, 5000, 500, 1000, 1000);
}

static ProtobufCBinaryData str(const char *s)
{
    return (ProtobufCBinaryData){strlen(s), (uint8_t *)s};
}

static void free_msg(void *m)
{
    if (m) protobuf_c_message_free_unpacked(m, NULL);
}

/* Pumps several clients in one poll loop until pred(arg) or ms pass. */
static bool pump_many(elector_etcd **es, int n, int ms, bool (*pred)(void *), void *arg)
{
    double end = tl_now() + ms / 1e3;
    for (;;) {
        if (pred && pred(arg)) return true;
        double left = end - tl_now();
        if (left <= 0) return pred ? pred(arg) : false;
        int64_t t = (int64_t)(left * 1e3) + 1;
        struct pollfd p[8];
        for (int i = 0; i < n; i++) {
            int64_t ti = elector_etcd_timeout(es[i]);
            if (ti >= 0 && ti < t) t = ti;
            p[i] = (struct pollfd){.fd = elector_etcd_fd(es[i]), .events = POLLIN};
        }
        poll(p, (nfds_t)n, (int)t);
        for (int i = 0; i < n; i++)
            ASSERT_OK(elector_etcd_process(es[i]));
    }
}

static bool pump_until(elector_etcd *e, int ms, bool (*pred)(void *), void *arg)
{
    return pump_many(&e, 1, ms, pred, arg);
}

/* ---- async calls */

typedef struct res {
    bool done;
    int err;
    int64_t rev;
    double at; /* tl_now() at completion */
    char errstr[512];
    char endpoint[64]; /* connected endpoint when it completed */
} res;

static void res_cb(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    res *r = ud;
    r->done = true;
    r->err = err;
    r->at = tl_now();
    snprintf(r->errstr, sizeof(r->errstr), "%s", err ? elector_etcd_errstr(e) : "");
    snprintf(r->endpoint, sizeof(r->endpoint), "%s", elector_etcd_current_endpoint(e));
    if (m && m->descriptor == &etcdserverpb__put_response__descriptor)
        r->rev = ((const Etcdserverpb__PutResponse *)m)->header->revision;
}

static bool res_done(void *arg)
{
    return ((res *)arg)->done;
}

static void put_async(elector_etcd *e, const char *k, const char *v,
                      const elector_call_opts *o, res *r)
{
    memset(r, 0, sizeof(*r));
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key = str(k);
    p.value = str(v);
    ASSERT_OK(elector_etcd_call(e, ELECTOR_RPC_PUT, &p.base, o, res_cb, r));
}

/* A put, waited for; returns its error (r filled). */
static int put_wait(elector_etcd *e, const char *k, const char *v,
                    const elector_call_opts *o, res *r)
{
    put_async(e, k, v, o, r);
    ASSERT(pump_until(e, 15000, res_done, r));
    return r->err;
}

/* Unary calls of one rpc handed to the connection so far (client stats). */
static uint64_t puts_sent(elector_etcd *e)
{
    elector_etcd_stats st;
    elector_etcd_get_stats(e, &st);
    return st.requests[ELECTOR_RPC_PUT];
}

typedef struct sent_ctx {
    elector_etcd *e;
    elector_rpc rpc;
    uint64_t before;
} sent_ctx;

static bool put_sent(void *a)
{
    sent_ctx *s = a;
    return puts_sent(s->e) > s->before;
}

static void put_ok(elector_etcd *e, const char *k, const char *v)
{
    res r;
    int rc = put_wait(e, k, v, NULL, &r);
    if (rc) tl_log("put %s: %s: %s", k, elector_err_name(rc), r.errstr);
    ASSERT_OK(rc);
}

static int64_t count_key(elector_etcd *e, const char *k)
{
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key = str(k);
    r.count_only = 1;
    ProtobufCMessage *m = NULL;
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_RANGE, &r.base, NULL, &m));
    int64_t n = ((Etcdserverpb__RangeResponse *)m)->count;
    free_msg(m);
    return n;
}

/* ---- leases kept alive by the test loop */

typedef struct keeper {
    int64_t id;
    bool pending;
    double next_at;
    int ok, failed, lost; /* renewals: answered, unknown, ELEASE */
    int last_err;
} keeper;

static void keeper_cb(elector_etcd *e, int err, int64_t lease, int64_t ttl, void *ud)
{
    (void)e, (void)lease, (void)ttl;
    keeper *k = ud;
    k->pending = false;
    k->last_err = err;
    if (!err)
        k->ok++;
    else if (err == ELECTOR_ELEASE)
        k->lost++;
    else
        k->failed++;
    /* After a failed renewal, retry soon; else once per second. */
    k->next_at = tl_now() + (err ? 0.2 : 1.0);
}

static void keeper_tick(elector_etcd *e, keeper *k)
{
    if (k->pending || tl_now() < k->next_at) return;
    k->pending = true;
    ASSERT_OK(elector_etcd_keepalive(e, k->id, 2000, keeper_cb, k));
}

typedef struct drive_ctx {
    elector_etcd *e;
    keeper *k;
    bool (*pred)(void *);
    void *arg;
} drive_ctx;

static bool drive_pred(void *p)
{
    drive_ctx *d = p;
    keeper_tick(d->e, d->k);
    return d->pred ? d->pred(d->arg) : false;
}

/* Pumps e, renewing k's lease, until pred(arg) (or ms pass). The loop wakes
 * at least every 100 ms to send due renewals. */
static bool drive(elector_etcd *e, keeper *k, int ms, bool (*pred)(void *), void *arg)
{
    drive_ctx d = {e, k, pred, arg};
    double end = tl_now() + ms / 1e3;
    while (tl_now() < end) {
        int slice = (int)((end - tl_now()) * 1e3);
        if (slice > 100) slice = 100;
        if (slice < 1) slice = 1;
        if (pump_until(e, slice, drive_pred, &d)) return true;
    }
    return drive_pred(&d);
}

static int64_t grant(elector_etcd *e, int64_t ttl)
{
    Etcdserverpb__LeaseGrantRequest g = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
    g.ttl = ttl;
    ProtobufCMessage *m = NULL;
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_LEASE_GRANT, &g.base, NULL, &m));
    int64_t id = ((Etcdserverpb__LeaseGrantResponse *)m)->id;
    free_msg(m);
    return id;
}

static int64_t lease_ttl(elector_etcd *e, int64_t id)
{
    Etcdserverpb__LeaseTimeToLiveRequest r =
        ETCDSERVERPB__LEASE_TIME_TO_LIVE_REQUEST__INIT;
    r.id = id;
    ProtobufCMessage *m = NULL;
    ASSERT_OK(
        elector_etcd_call_sync(e, ELECTOR_RPC_LEASE_TIME_TO_LIVE, &r.base, NULL, &m));
    int64_t t = ((Etcdserverpb__LeaseTimeToLiveResponse *)m)->ttl;
    free_msg(m);
    return t;
}

static void put_lease(elector_etcd *e, const char *k, int64_t lease)
{
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key = str(k);
    p.value = str("leased");
    p.lease = lease;
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_PUT, &p.base, NULL, NULL));
}

/* ---- watch */

typedef struct wstate {
    elector_etcd *e;
    elector_watch *w;
    bool created, ended;
    int err, events;
    double ended_at;
    char errstr[512];
} wstate;

static void wcb(elector_watch *w, int err, const Etcdserverpb__WatchResponse *r, void *ud)
{
    (void)w;
    wstate *s = ud;
    if (err) {
        s->ended = true;
        s->err = err;
        s->ended_at = tl_now();
        snprintf(s->errstr, sizeof(s->errstr), "%s", elector_etcd_errstr(s->e));
        return;
    }
    if (r->created) s->created = true;
    s->events += (int)r->n_events;
}

static bool w_created(void *a)
{
    wstate *s = a;
    return s->created || s->ended;
}

static bool w_ended(void *a)
{
    return ((wstate *)a)->ended;
}

static bool w_event(void *a)
{
    return ((wstate *)a)->events > 0 || ((wstate *)a)->ended;
}

static void watch_start(elector_etcd *e, const char *key, wstate *s)
{
    memset(s, 0, sizeof(*s));
    s->e = e;
    Etcdserverpb__WatchCreateRequest r = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    r.key = str(key);
    s->w = elector_etcd_watch(e, &r, wcb, s);
    ASSERT_NOT_NULL(s->w);
    ASSERT(pump_until(e, 5000, w_created, s));
    ASSERT(s->created);
}

/* ---------------------------------------------------------------- SIGKILL */

TEST(killed_member_fails_only_the_in_flight_call_then_calls_move_on)
{
    eh_cluster *c = start3();
    int v = follower(c);
    char eps[256];
    elector_etcd *e = client(endpoints_first(c, v, eps, sizeof(eps)));
    put_ok(e, "warm", "x");
    ASSERT_STREQ(eh_endpoint(c, v), elector_etcd_current_endpoint(e));
    keeper k = {.id = grant(e, 5)};
    put_lease(e, "fo/leased", k.id);
    ASSERT(!drive(e, &k, 300, NULL, NULL));
    ASSERT_EQ(1, k.ok);

    /* Freeze the member so that the next put is surely in flight (sent, not
     * answered), then kill it. */
    ASSERT_OK(eh_member_pause(c, v));
    res a;
    sent_ctx sc = {e, ELECTOR_RPC_PUT, puts_sent(e)};
    put_async(e, "fo/a", "1", NULL, &a);
    ASSERT(pump_until(e, 2000, put_sent, &sc)); /* handed to the socket */
    ASSERT(!a.done);
    double t_kill = tl_now();
    ASSERT_OK(eh_member_kill(c, v));
    ASSERT(drive(e, &k, 5000, res_done, &a));
    tl_log("in-flight put ended %.0f ms after SIGKILL: %s: %s", (a.at - t_kill) * 1e3,
           elector_err_name(a.err), a.errstr);
    ASSERT_EQ(ELECTOR_EUNAVAILABLE, a.err);
    ASSERT_CONTAINS(a.errstr, eh_endpoint(c, v));
    ASSERT_LT(a.at - t_kill, 1.0);

    /* Every later call succeeds, on another member. */
    res b;
    ASSERT_OK(put_wait(e, "fo/b", "2", NULL, &b));
    tl_log("next put succeeded %.0f ms after SIGKILL on %s", (b.at - t_kill) * 1e3,
           b.endpoint);
    ASSERT_LT(b.at - t_kill, 2.0);
    ASSERT(strcmp(b.endpoint, eh_endpoint(c, v)) != 0);
    ASSERT(b.endpoint[0] != 0);
    for (int i = 0; i < 20; i++) {
        char key[16];
        snprintf(key, sizeof(key), "fo/c%d", i);
        ASSERT_OK(put_wait(e, key, "3", NULL, &b));
    }
    /* The lease, renewed across the switch, is alive with its key. */
    int before = k.ok;
    ASSERT(!drive(e, &k, 2500, NULL, NULL));
    tl_log("renewals: %d ok, %d unknown, %d lost", k.ok, k.failed, k.lost);
    ASSERT_GT(k.ok, before);
    ASSERT_EQ(0, k.lost);
    ASSERT_GT(lease_ttl(e, k.id), 0);
    ASSERT_EQ(1, count_key(e, "fo/leased"));
    elector_etcd_free(e);
    eh_stop(c);
}

TEST(call_made_after_an_unnoticed_kill_goes_to_another_member)
{
    eh_cluster *c = start3();
    int v = follower(c);
    char eps[256];
    elector_etcd *e = client(endpoints_first(c, v, eps, sizeof(eps)));
    put_ok(e, "warm", "x");
    ASSERT_STREQ(eh_endpoint(c, v), elector_etcd_current_endpoint(e));
    /* Kill while the client is not looking; the next call must not fail: it
     * was never sent to the dead member. */
    double t0 = tl_now();
    ASSERT_OK(eh_member_kill(c, v));
    res r;
    int rc = put_wait(e, "after-kill", "y", NULL, &r);
    tl_log("put after unnoticed SIGKILL: %s after %.0f ms on %s %s", elector_err_name(rc),
           (r.at - t0) * 1e3, r.endpoint, r.errstr);
    ASSERT_OK(rc);
    ASSERT(strcmp(r.endpoint, eh_endpoint(c, v)) != 0);
    ASSERT_LT(r.at - t0, 2.0);
    elector_etcd_free(e);
    eh_stop(c);
}

TEST(killed_leader_lease_kept_alive_survives_the_switch)
{
    eh_cluster *c = start3();
    int v = eh_wait_leader(c, 10);
    ASSERT_GE(v, 0);
    char eps[256];
    elector_etcd *e = client(endpoints_first(c, v, eps, sizeof(eps)));
    put_ok(e, "warm", "x");
    ASSERT_STREQ(eh_endpoint(c, v), elector_etcd_current_endpoint(e));
    keeper k = {.id = grant(e, 5)};
    put_lease(e, "ld/leased", k.id);
    ASSERT(!drive(e, &k, 1200, NULL, NULL));

    double t_kill = tl_now();
    ASSERT_OK(eh_member_kill(c, v));
    /* Puts one after another until one succeeds, the lease renewed meanwhile.
     * Failures here are etcd's leader election (no leader, proposal dropped,
     * timeout) plus at most one EUNAVAILABLE from the broken connection. */
    int unavailable = 0, other = 0;
    res r;
    elector_call_opts short_dl = {.timeout_ms = 2000};
    for (;;) {
        put_async(e, "ld/x", "1", &short_dl, &r);
        ASSERT(drive(e, &k, 15000, res_done, &r));
        if (!r.err) break;
        tl_log("put at +%.0f ms: %s: %s", (r.at - t_kill) * 1e3, elector_err_name(r.err),
               r.errstr);
        if (r.err == ELECTOR_EUNAVAILABLE)
            unavailable++;
        else
            other++;
        ASSERT_LT(tl_now() - t_kill, 12.0);
    }
    int nl = eh_wait_leader(c, 10);
    tl_log("after leader SIGKILL: first put success +%.0f ms on %s (%d EUNAVAILABLE, %d "
           "other "
           "failures); new leader m%d",
           (r.at - t_kill) * 1e3, r.endpoint, unavailable, other, nl);
    ASSERT_LE(unavailable, 1);
    ASSERT(strcmp(r.endpoint, eh_endpoint(c, v)) != 0);
    ASSERT(!drive(e, &k, 2500, NULL, NULL));
    tl_log("renewals: %d ok, %d unknown, %d lost", k.ok, k.failed, k.lost);
    ASSERT_EQ(0, k.lost);
    ASSERT_GT(lease_ttl(e, k.id), 0);
    ASSERT_EQ(1, count_key(e, "ld/leased"));
    elector_etcd_free(e);
    eh_stop(c);
}

/* ---------------------------------------------------------------- SIGSTOP */

TEST(frozen_member_is_detected_by_ping_timeout_and_calls_move_on)
{
    eh_cluster *c = start3();
    int v = follower(c);
    char eps[256];
    endpoints_first(c, v, eps, sizeof(eps));
    /* Client u makes a unary call (PING after keepalive_time 500 ms of
     * silence, ack within 1000 ms); client s holds only a watch (PING after
     * keepalive_idle 1000 ms). */
    elector_etcd *u = client(eps), *s = client(eps);
    elector_etcd *both[2] = {u, s};
    put_ok(u, "warm", "x");
    wstate w;
    watch_start(s, "frz", &w);
    ASSERT_STREQ(eh_endpoint(c, v), elector_etcd_current_endpoint(u));
    ASSERT_STREQ(eh_endpoint(c, v), elector_etcd_current_endpoint(s));

    double t_stop = tl_now();
    ASSERT_OK(eh_member_pause(c, v));
    res a;
    put_async(u, "frz", "1", NULL, &a);
    ASSERT(pump_many(both, 2, 8000, res_done, &a));
    tl_log("in-flight put on frozen member failed after %.0f ms: %s: %s",
           (a.at - t_stop) * 1e3, elector_err_name(a.err), a.errstr);
    ASSERT_EQ(ELECTOR_EUNAVAILABLE, a.err);
    ASSERT_CONTAINS(a.errstr, "PING");
    ASSERT_CONTAINS(a.errstr, eh_endpoint(c, v));
    ASSERT_LT(a.at - t_stop, 3.5);

    res b;
    ASSERT_OK(put_wait(u, "frz", "2", NULL, &b));
    tl_log("next put succeeded after %.0f ms on %s", (b.at - t_stop) * 1e3, b.endpoint);
    ASSERT(strcmp(b.endpoint, eh_endpoint(c, v)) != 0);
    ASSERT_LT(b.at - t_stop, 5.0);

    ASSERT(pump_many(both, 2, 8000, w_ended, &w));
    tl_log("idle watch on frozen member ended after %.0f ms: %s",
           (w.ended_at - t_stop) * 1e3, elector_err_name(w.err));
    ASSERT_EQ(ELECTOR_EUNAVAILABLE, w.err);
    ASSERT_LT(w.ended_at - t_stop, 5.0);
    /* A new watch works on another member and sees the next put. */
    elector_watch_cancel(w.w);
    watch_start(s, "frz", &w);
    ASSERT(strcmp(elector_etcd_current_endpoint(s), eh_endpoint(c, v)) != 0);
    ASSERT_OK(put_wait(u, "frz", "3", NULL, &b));
    ASSERT(pump_many(both, 2, 3000, w_event, &w));
    ASSERT_EQ(1, w.events);
    ASSERT_EQ(0, w.err);
    elector_watch_cancel(w.w);

    ASSERT_OK(eh_member_resume(c, v));
    elector_etcd_free(u);
    elector_etcd_free(s);
    eh_stop(c);
}

/* ---------------------------------------------------------------- clean stop */

/* etcd 3.4 on SIGTERM (eh_member_stop) closes its client connections at once:
 * no GOAWAY frame reaches the client (checked with a frame trace), and an RPC
 * it was executing fails ("processUnaryRPC failed to write status: transport
 * is closing" in its log). So a call in flight at that moment may fail with
 * EUNAVAILABLE; calls not yet sent must go to another member and succeed. The
 * GOAWAY handling itself is tested against a scripted server further down. */

/* Sends SIGTERM to member v without waiting, so the client can be pumped
 * meanwhile; eh_member_running() reaps it once it has exited. */
static void term_member(eh_cluster *c, int v)
{
    ASSERT_OK(kill(eh_pid(c, v), SIGTERM));
}

#define NPUTS 40
typedef struct burst {
    res r[NPUTS];
    double issued[NPUTS];
    int sent;
} burst;

static bool burst_done(void *a)
{
    burst *b = a;
    for (int i = 0; i < b->sent; i++)
        if (!b->r[i].done) return false;
    return b->sent == NPUTS;
}

/* One put every 25 ms while pumping, for NPUTS puts. */
static void burst_run(elector_etcd *e, burst *b, int ms_total)
{
    double end = tl_now() + ms_total / 1e3;
    double next = tl_now();
    while (!burst_done(b) && tl_now() < end) {
        if (b->sent < NPUTS && tl_now() >= next) {
            char k[16];
            snprintf(k, sizeof(k), "gw/%d", b->sent);
            b->issued[b->sent] = tl_now();
            put_async(e, k, "v", NULL, &b->r[b->sent]);
            b->sent++;
            next += 0.025;
        }
        pump_until(e, 5, NULL, NULL);
    }
}

/* Checks a burst: failures only EUNAVAILABLE, only for puts issued before the
 * first failure was reported (i.e. in flight when the connection broke), at
 * most 2 of them; returns the worst latency of a put. */
static double burst_check(eh_cluster *c, int v, burst *b, double t0)
{
    int fails = 0;
    double first_fail = 0, worst = 0, first_elsewhere = 0;
    for (int i = 0; i < NPUTS; i++) {
        res *r = &b->r[i];
        if (r->err) {
            fails++;
            tl_log("put %d (issued +%.0f ms) failed at +%.0f ms: %s: %s", i,
                   (b->issued[i] - t0) * 1e3, (r->at - t0) * 1e3,
                   elector_err_name(r->err), r->errstr);
            ASSERT_EQ(ELECTOR_EUNAVAILABLE, r->err);
            if (!first_fail || r->at < first_fail) first_fail = r->at;
        } else if (strcmp(r->endpoint, eh_endpoint(c, v)) && !first_elsewhere) {
            first_elsewhere = r->at;
        }
        if (r->at - b->issued[i] > worst) worst = r->at - b->issued[i];
    }
    for (int i = 0; i < NPUTS; i++)
        if (b->issued[i] > first_fail && first_fail) ASSERT_OK(b->r[i].err);
    tl_log("%d of %d puts failed (in flight at the close); first success elsewhere +%.0f "
           "ms; "
           "worst put latency %.0f ms",
           fails, NPUTS, (first_elsewhere - t0) * 1e3, worst * 1e3);
    ASSERT_LE(fails, 2);
    ASSERT_GT(first_elsewhere, 0);
    return worst;
}

TEST(clean_stop_fails_at_most_the_in_flight_call_and_the_rest_move_on)
{
    eh_cluster *c = start3();
    int v = follower(c);
    char eps[256];
    elector_etcd *e = client(endpoints_first(c, v, eps, sizeof(eps)));
    put_ok(e, "warm", "x");
    ASSERT_STREQ(eh_endpoint(c, v), elector_etcd_current_endpoint(e));

    double t0 = tl_now();
    term_member(c, v);
    burst b = {0};
    burst_run(e, &b, 15000);
    ASSERT(burst_done(&b));
    double worst = burst_check(c, v, &b, t0);
    ASSERT_LT(worst, 1.0);
    while (eh_member_running(c, v)) {
        ASSERT_LT(tl_now() - t0, 10.0);
        pump_until(e, 20, NULL, NULL);
    }
    tl_log("member exited %.0f ms after SIGTERM", (tl_now() - t0) * 1e3);
    elector_etcd_free(e);
    eh_stop(c);
}

/* 1 when the server sent something on this process's TCP connection to `port`
 * that the client has not read yet, or closed it (the socket found by its peer
 * address among our open descriptors; polled, not read); 0 when not; -1 when
 * there is no such connection. */
static int unread_from_port(int port)
{
    for (int fd = 3; fd < 1024; fd++) {
        struct sockaddr_in a;
        socklen_t al = sizeof(a);
        if (getpeername(fd, (struct sockaddr *)&a, &al) != 0 || a.sin_family != AF_INET ||
            ntohs(a.sin_port) != port)
            continue;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        return poll(&p, 1, 0) > 0 ? 1 : 0;
    }
    return -1;
}

TEST(calls_queued_during_a_clean_stop_are_sent_to_another_member)
{
    eh_cluster *c = start3();
    int v = follower(c);
    char eps[256];
    elector_etcd *e = client(endpoints_first(c, v, eps, sizeof(eps)));
    put_ok(e, "warm", "x");
    ASSERT_STREQ(eh_endpoint(c, v), elector_etcd_current_endpoint(e));
    /* Queued, not sent: the client is not pumped until the member's GOAWAY is
     * in its socket. (Waiting for the member to exit instead would wait on
     * the client: etcd 3.5's graceful stop lets each connection drain until
     * its client leaves or the request timeout, 5 s + 2 election timeouts,
     * passes; etcd 3.4 closes at once.) */
    res r[5];
    for (int i = 0; i < 5; i++) {
        char k[16];
        snprintf(k, sizeof(k), "q%d", i);
        put_async(e, k, "v", NULL, &r[i]);
    }
    double t0 = tl_now();
    term_member(c, v);
    int port = eh_client_port(c, v);
    while (unread_from_port(port) == 0) {
        ASSERT_LT(tl_now() - t0, 5.0);
        usleep(2000);
    }
    double t1 = tl_now();
    tl_log("GOAWAY (or close) from the member %.0f ms after SIGTERM", (t1 - t0) * 1e3);
    for (int i = 0; i < 5; i++) {
        ASSERT(pump_until(e, 5000, res_done, &r[i]));
        if (r[i].err)
            tl_log("queued put %d: %s: %s", i, elector_err_name(r[i].err), r[i].errstr);
        ASSERT_OK(r[i].err);
        ASSERT(strcmp(r[i].endpoint, eh_endpoint(c, v)) != 0);
    }
    tl_log("queued puts done %.0f ms after the GOAWAY, on %s", (tl_now() - t1) * 1e3,
           r[4].endpoint);
    /* The client left the drained connection: the member's stop completes. */
    while (eh_member_running(c, v)) {
        ASSERT_LT(tl_now() - t0, 10.0);
        pump_until(e, 20, NULL, NULL);
    }
    tl_log("member exited %.0f ms after SIGTERM", (tl_now() - t0) * 1e3);
    elector_etcd_free(e);
    eh_stop(c);
}

TEST(clean_stop_with_an_open_watch_ends_it_and_does_not_hold_up_calls)
{
    eh_cluster *c = start3();
    int v = follower(c);
    char eps[256];
    elector_etcd *e = client(endpoints_first(c, v, eps, sizeof(eps)));
    wstate w;
    watch_start(e, "gw-watch", &w);
    put_ok(e, "warm", "x");
    ASSERT_STREQ(eh_endpoint(c, v), elector_etcd_current_endpoint(e));

    double t0 = tl_now();
    term_member(c, v);
    burst b = {0};
    burst_run(e, &b, 15000);
    ASSERT(burst_done(&b));
    double worst = burst_check(c, v, &b, t0);
    ASSERT_LT(worst, 1.0);
    /* The watch on the stopped member has ended; its owner re-creates it. */
    ASSERT(pump_until(e, 10000, w_ended, &w));
    tl_log("watch ended +%.0f ms: %s: %s", (w.ended_at - t0) * 1e3,
           elector_err_name(w.err), w.errstr);
    ASSERT_EQ(ELECTOR_EUNAVAILABLE, w.err);
    elector_watch_cancel(w.w);
    watch_start(e, "gw-watch", &w);
    elector_watch_cancel(w.w);
    elector_etcd_free(e);
    eh_stop(c);
}

/* ---------------------------------------------------------------- GOAWAY */

/* A scripted HTTP/2 server (nghttp2, in this process, pumped together with
 * the client) standing in for a member that drains: it answers Put calls with
 * revision 4242 when told to, holds them otherwise, and sends GOAWAY on
 * command while keeping the connection open, as a gRPC server does while
 * in-flight calls finish. The endpoint list puts it before a real etcd. */

#define FS_MAX 64
typedef struct fake_srv {
    int lfd, cfd;
    char endpoint[32];
    nghttp2_session *h2;
    bool answer;          /* answer Put calls as soon as they are complete */
    int32_t done[FS_MAX]; /* streams whose request is complete, unanswered */
    int ndone;
    int requests, watch_streams, answered;
    struct fs_body {
        uint8_t buf[64];
        size_t len, off;
    } body[FS_MAX];
    int nbody;
} fake_srv;

static ssize_t fs_read_cb(nghttp2_session *s, int32_t sid, uint8_t *buf, size_t len,
                          uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    (void)ud;
    struct fs_body *b = src->ptr;
    size_t n = b->len - b->off < len ? b->len - b->off : len;
    memcpy(buf, b->buf + b->off, n);
    b->off += n;
    if (b->off == b->len) {
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        nghttp2_nv tr[] = {{(uint8_t *)"grpc-status", (uint8_t *)"0", 11, 1, 0}};
        nghttp2_submit_trailer(s, sid, tr, 1);
    }
    return (ssize_t)n;
}

static void fs_answer(fake_srv *f, int32_t sid)
{
    ASSERT(f->nbody < FS_MAX);
    struct fs_body *b = &f->body[f->nbody++];
    Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    h.revision = 4242;
    Etcdserverpb__PutResponse r = ETCDSERVERPB__PUT_RESPONSE__INIT;
    r.header = &h;
    size_t n = protobuf_c_message_get_packed_size(&r.base);
    b->buf[0] = 0;
    b->buf[1] = b->buf[2] = b->buf[3] = 0;
    b->buf[4] = (uint8_t)n;
    protobuf_c_message_pack(&r.base, b->buf + 5);
    b->len = 5 + n;
    nghttp2_nv hd[] = {
        {(uint8_t *)":status", (uint8_t *)"200", 7, 3, 0},
        {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, 0}};
    nghttp2_data_provider dp = {.source.ptr = b, .read_callback = fs_read_cb};
    ASSERT_OK(nghttp2_submit_response(f->h2, sid, hd, 2, &dp));
    f->answered++;
}

static int fs_header_cb(nghttp2_session *s, const nghttp2_frame *fr, const uint8_t *name,
                        size_t nl, const uint8_t *value, size_t vl, uint8_t flags,
                        void *ud)
{
    (void)s, (void)flags;
    fake_srv *f = ud;
    if (nl == 5 && !memcmp(name, ":path", 5) && vl >= 6 &&
        !memcmp(value + vl - 6, "/Watch", 6))
        f->watch_streams++;
    (void)fr;
    return 0;
}

static int fs_frame_cb(nghttp2_session *s, const nghttp2_frame *fr, void *ud)
{
    (void)s;
    fake_srv *f = ud;
    if ((fr->hd.type == NGHTTP2_HEADERS || fr->hd.type == NGHTTP2_DATA) &&
        (fr->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        f->requests++;
        if (f->answer)
            fs_answer(f, fr->hd.stream_id);
        else
            f->done[f->ndone++] = fr->hd.stream_id;
    }
    return 0;
}

static void fs_flush(fake_srv *f)
{
    const uint8_t *d;
    ssize_t n;
    while (f->h2 && (n = nghttp2_session_mem_send(f->h2, &d)) > 0)
        for (ssize_t o = 0; o < n;) {
            ssize_t w = write(f->cfd, d + o, (size_t)(n - o));
            if (w <= 0) {
                ASSERT(w < 0);
                tl_msleep(1); /* loopback buffer full: the client drains it */
                continue;
            }
            o += w;
        }
}

static void fs_start(fake_srv *f)
{
    memset(f, 0, sizeof(*f));
    f->cfd = -1;
    f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_OK(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)));
    ASSERT_OK(listen(f->lfd, 4));
    socklen_t l = sizeof(a);
    ASSERT_OK(getsockname(f->lfd, (struct sockaddr *)&a, &l));
    snprintf(f->endpoint, sizeof(f->endpoint), "127.0.0.1:%d", ntohs(a.sin_port));
}

/* Accepts, reads and answers whatever is pending (non-blocking). */
static void fs_step(fake_srv *f)
{
    if (f->cfd < 0) {
        f->cfd = accept(f->lfd, NULL, NULL);
        if (f->cfd < 0) return;
        nghttp2_session_callbacks *cb;
        nghttp2_session_callbacks_new(&cb);
        nghttp2_session_callbacks_set_on_header_callback(cb, fs_header_cb);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cb, fs_frame_cb);
        ASSERT_OK(nghttp2_session_server_new(&f->h2, cb, f));
        nghttp2_session_callbacks_del(cb);
        nghttp2_submit_settings(f->h2, NGHTTP2_FLAG_NONE, NULL, 0);
        ASSERT_OK(fcntl(f->cfd, F_SETFL, O_NONBLOCK));
    }
    uint8_t buf[16384];
    ssize_t n;
    while ((n = read(f->cfd, buf, sizeof(buf))) > 0)
        ASSERT_EQ(n, nghttp2_session_mem_recv(f->h2, buf, (size_t)n));
    fs_flush(f);
}

static void fs_free(fake_srv *f)
{
    if (f->h2) nghttp2_session_del(f->h2);
    if (f->cfd >= 0) close(f->cfd);
    close(f->lfd);
}

/* Pumps the client and the scripted server until pred(arg) or ms pass. */
static bool pump_fs(elector_etcd *e, fake_srv *f, int ms, bool (*pred)(void *), void *arg)
{
    double end = tl_now() + ms / 1e3;
    for (;;) {
        fs_step(f);
        if (pred && pred(arg)) return true;
        double left = end - tl_now();
        if (left <= 0) return pred ? pred(arg) : false;
        int64_t t = (int64_t)(left * 1e3) + 1, te = elector_etcd_timeout(e);
        if (te >= 0 && te < t) t = te;
        struct pollfd p[2] = {{.fd = elector_etcd_fd(e), .events = POLLIN},
                              {.fd = f->cfd >= 0 ? f->cfd : f->lfd, .events = POLLIN}};
        poll(p, 2, (int)t);
        fs_step(f);
        ASSERT_OK(elector_etcd_process(e));
    }
}

static bool fs_has_requests(void *a)
{
    void **v = a;
    return ((fake_srv *)v[0])->requests >= *(int *)v[1];
}

static bool fs_has_watch(void *a)
{
    return ((fake_srv *)a)->watch_streams > 0;
}

TEST(goaway_refused_call_is_resent_to_the_next_member_without_failing)
{
    eh_opts o = {.members = 1};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    fake_srv f;
    fs_start(&f);
    char eps[128];
    snprintf(eps, sizeof(eps), "%s,%s", f.endpoint, eh_endpoint(c, 0));
    elector_etcd *e = client(eps);

    f.answer = true;
    res r1;
    put_async(e, "a", "1", NULL, &r1);
    ASSERT(pump_fs(e, &f, 3000, res_done, &r1));
    ASSERT_OK(r1.err);
    ASSERT_EQ(4242, r1.rev); /* answered by the scripted server */
    ASSERT_STREQ(f.endpoint, elector_etcd_current_endpoint(e));

    /* Two calls reach the server; it accepts the first and refuses the
     * second with GOAWAY(last_stream_id = first), holding the connection. */
    f.answer = false;
    res r2, r3;
    put_async(e, "b", "2", NULL, &r2);
    put_async(e, "c", "3", NULL, &r3);
    int want = 3;
    void *arg[2] = {&f, &want};
    ASSERT(pump_fs(e, &f, 3000, fs_has_requests, arg));
    ASSERT_EQ(2, f.ndone);
    int32_t first = f.done[0] < f.done[1] ? f.done[0] : f.done[1];
    double t0 = tl_now();
    ASSERT_OK(
        nghttp2_submit_goaway(f.h2, NGHTTP2_FLAG_NONE, first, NGHTTP2_NO_ERROR, NULL, 0));
    fs_flush(&f);
    /* A call made after the GOAWAY must not be sent here either. */
    pump_fs(e, &f, 50, NULL, NULL);
    res r4;
    put_async(e, "d", "4", NULL, &r4);
    pump_fs(e, &f, 100, NULL, NULL);
    fs_answer(&f, first); /* the accepted call completes normally */
    fs_flush(&f);
    res *rs[3] = {&r2, &r3, &r4};
    for (int i = 0; i < 3; i++) {
        bool ok = pump_fs(e, &f, 8000, res_done, rs[i]);
        tl_log("put %d: %s at +%.0f ms rev %lld via %s %s", i + 2,
               ok ? elector_err_name(rs[i]->err) : "(pending)", (rs[i]->at - t0) * 1e3,
               (long long)rs[i]->rev, rs[i]->endpoint, rs[i]->errstr);
        ASSERT(ok);
        ASSERT_OK(rs[i]->err);
    }
    /* The accepted one was answered by the draining server, the refused one
     * and the later one by etcd, promptly (not at their deadline). */
    ASSERT_EQ(2, f.answered);
    ASSERT((r2.rev == 4242) != (r3.rev == 4242));
    res *refused = r2.rev == 4242 ? &r3 : &r2;
    ASSERT_STREQ(eh_endpoint(c, 0), refused->endpoint);
    ASSERT_LT(refused->at - t0, 1.0);
    ASSERT_STREQ(eh_endpoint(c, 0), r4.endpoint);
    ASSERT(r4.rev != 4242);
    ASSERT_LT(r4.at - t0, 1.0);
    elector_etcd_free(e);
    fs_free(&f);
    eh_stop(c);
}

TEST(goaway_with_an_open_watch_does_not_hold_new_calls_until_their_deadline)
{
    eh_opts o = {.members = 1};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    fake_srv f;
    fs_start(&f);
    char eps[128];
    snprintf(eps, sizeof(eps), "%s,%s", f.endpoint, eh_endpoint(c, 0));
    elector_etcd *e = client(eps);
    f.answer = true;
    res r1;
    put_async(e, "a", "1", NULL, &r1);
    ASSERT(pump_fs(e, &f, 3000, res_done, &r1));
    ASSERT_OK(r1.err);

    /* A watch stream is open on the server (which never answers it). */
    wstate w = {.e = e};
    Etcdserverpb__WatchCreateRequest wr = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    wr.key = str("k");
    w.w = elector_etcd_watch(e, &wr, wcb, &w);
    ASSERT_NOT_NULL(w.w);
    ASSERT(pump_fs(e, &f, 3000, fs_has_watch, &f));

    /* The server drains: GOAWAY accepting every stream so far, connection
     * kept open (a gRPC server waits for open streams to finish). */
    double t0 = tl_now();
    ASSERT_OK(nghttp2_submit_goaway(f.h2, NGHTTP2_FLAG_NONE,
                                    nghttp2_session_get_last_proc_stream_id(f.h2),
                                    NGHTTP2_NO_ERROR, NULL, 0));
    fs_flush(&f);
    pump_fs(e, &f, 50, NULL, NULL);
    res r2;
    put_async(e, "b", "2", NULL, &r2);
    bool ok = pump_fs(e, &f, 8000, res_done, &r2);
    tl_log("put after GOAWAY with an open watch: %s at +%.0f ms via %s %s; watch %s (%s)",
           ok ? elector_err_name(r2.err) : "(pending)", (r2.at - t0) * 1e3, r2.endpoint,
           r2.errstr, w.ended ? "ended" : "alive", elector_err_name(w.err));
    ASSERT(ok);
    ASSERT_OK(r2.err);
    ASSERT_STREQ(eh_endpoint(c, 0), r2.endpoint);
    ASSERT_LT(r2.at - t0, 1.0);
    elector_watch_cancel(w.w);
    elector_etcd_free(e);
    fs_free(&f);
    eh_stop(c);
}

TEST(etcd_server_side_deadline_maps_to_etimedout)
{
    /* etcd 3.4 answers a call whose grpc-timeout expired on the server with
     * grpc-status 2 (Unknown) and this text (seen in the quorum test below:
     * its reply and the client's own deadline race). */
    ASSERT_EQ(ELECTOR_ETIMEDOUT, elector__grpc_error(2, "context deadline exceeded"));
}

/* ---------------------------------------------------------------- quorum */

typedef struct ka_res {
    bool done;
    int err;
    double at;
} ka_res;

static void ka_cb(elector_etcd *e, int err, int64_t id, int64_t ttl, void *ud)
{
    (void)e, (void)id, (void)ttl;
    ka_res *k = ud;
    k->done = true;
    k->err = err;
    k->at = tl_now();
}

static bool ka_done(void *ud)
{
    return ((ka_res *)ud)->done;
}

TEST(quorum_loss_ends_the_watch_and_fails_puts_until_members_return)
{
    eh_cluster *c = start3();
    int s = follower(c); /* the survivor */
    char eps[256];
    elector_etcd *e = client(endpoints_first(c, s, eps, sizeof(eps)));
    put_ok(e, "warm", "x");
    ASSERT_STREQ(eh_endpoint(c, s), elector_etcd_current_endpoint(e));
    int64_t lease = grant(e, 30);
    wstate w;
    watch_start(e, "q", &w);

    double t0 = tl_now();
    for (int i = 0; i < 3; i++)
        if (i != s) ASSERT_OK(eh_member_kill(c, i));
    ASSERT(pump_until(e, 15000, w_ended, &w));
    tl_log("quorum lost: watch ended after %.0f ms: %s: %s", (w.ended_at - t0) * 1e3,
           elector_err_name(w.err), elector_etcd_errstr(e));
    ASSERT(w.err == ELECTOR_ENOLEADER || w.err == ELECTOR_EUNAVAILABLE);
    ASSERT_LT(w.ended_at - t0, 10.0);
    elector_watch_cancel(w.w);

    /* A put that requires a leader fails at once; a plain one at a deadline. */
    elector_call_opts rl = {.timeout_ms = 3000, .require_leader = 1};
    res r;
    double t1 = tl_now();
    int rc = put_wait(e, "q", "1", &rl, &r);
    tl_log("require-leader put: %s after %.0f ms: %s", elector_err_name(rc),
           (r.at - t1) * 1e3, r.errstr);
    ASSERT_EQ(ELECTOR_ENOLEADER, rc);
    ASSERT_LT(r.at - t1, 1.0);
    elector_call_opts plain = {.timeout_ms = 2000};
    t1 = tl_now();
    rc = put_wait(e, "q", "2", &plain, &r);
    tl_log("plain put: %s after %.0f ms: %s", elector_err_name(rc), (r.at - t1) * 1e3,
           r.errstr);
    ASSERT(rc == ELECTOR_ETIMEDOUT || rc == ELECTOR_ENOLEADER);
    ASSERT_LT(r.at - t1, 2.5);
    /* A new watch is refused while there is no leader. */
    Etcdserverpb__WatchCreateRequest wr = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    wr.key = str("q");
    memset(&w, 0, sizeof(w));
    w.e = e;
    w.w = elector_etcd_watch(e, &wr, wcb, &w);
    ASSERT_NOT_NULL(w.w);
    ASSERT(pump_until(e, 5000, w_created, &w));
    tl_log("watch created without leader: %s (%s)", w.ended ? "refused" : "accepted",
           elector_err_name(w.err));
    ASSERT(w.ended);
    ASSERT_EQ(ELECTOR_ENOLEADER, w.err);
    elector_watch_cancel(w.w);
    /* So is a keepalive: its stream asks for a leader (found by
     * scripts/mutate.sh: lease.c, the stream opened without "hasleader",
     * survived; the renewal then waited for its timeout, 3 s, instead). */
    ka_res ka = {0};
    t1 = tl_now();
    ASSERT_OK(elector_etcd_keepalive(e, lease, 3000, ka_cb, &ka));
    ASSERT(pump_until(e, 5000, ka_done, &ka));
    tl_log("keepalive without leader: %s after %.0f ms", elector_err_name(ka.err),
           (ka.at - t1) * 1e3);
    ASSERT_EQ(ELECTOR_ENOLEADER, ka.err);
    ASSERT_LT(ka.at - t1, 2.0);

    /* The members return: calls work again. */
    double t2 = tl_now();
    for (int i = 0; i < 3; i++)
        if (i != s) ASSERT_OK(eh_member_restart(c, i));
    for (;;) {
        rc = put_wait(e, "q", "3", &rl, &r);
        if (!rc) break;
        ASSERT_LT(tl_now() - t2, 20.0);
        pump_until(e, 100, NULL, NULL);
    }
    tl_log("after restarting 2 members: put succeeds after %.0f ms", (r.at - t2) * 1e3);
    watch_start(e, "q", &w);
    ASSERT_OK(put_wait(e, "q", "4", NULL, &r));
    elector_watch_cancel(w.w);
    elector_etcd_free(e);
    eh_stop(c);
}

/* ---------------------------------------------------------------- unreachable */

/* A loopback port with nothing listening (bound, then closed). */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_OK(bind(fd, (struct sockaddr *)&a, sizeof(a)));
    socklen_t l = sizeof(a);
    ASSERT_OK(getsockname(fd, (struct sockaddr *)&a, &l));
    close(fd);
    return ntohs(a.sin_port);
}

TEST(unreachable_cluster_fails_fast_with_econnect_naming_the_endpoint)
{
    int p1 = closed_port(), p2 = closed_port();
    char eps[64], ep2[32];
    snprintf(eps, sizeof(eps), "127.0.0.1:%d,127.0.0.1:%d", p1, p2);
    snprintf(ep2, sizeof(ep2), "127.0.0.1:%d", p2);
    elector_etcd *e = client_ex(eps, 2000, 5000, 500, 1000, 1000);
    for (int i = 0; i < 3; i++) {
        res r;
        double t0 = tl_now();
        int rc = put_wait(e, "k", "v", NULL, &r);
        tl_log("call %d: %s after %.1f ms: %s", i, elector_err_name(rc),
               (r.at - t0) * 1e3, r.errstr);
        ASSERT_EQ(ELECTOR_ECONNECT, rc);
        ASSERT_LT(r.at - t0, 1.0);
        ASSERT_CONTAINS(r.errstr, "127.0.0.1:");
        ASSERT(strstr(r.errstr, ep2) || strstr(r.errstr, eps));
        ASSERT_CONTAINS(r.errstr, "refused");
    }
    /* A stream hears the same. */
    wstate w = {.e = e};
    Etcdserverpb__WatchCreateRequest wr = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    wr.key = str("k");
    double t0 = tl_now();
    w.w = elector_etcd_watch(e, &wr, wcb, &w);
    ASSERT_NOT_NULL(w.w);
    ASSERT(pump_until(e, 5000, w_ended, &w));
    tl_log("watch: %s after %.1f ms", elector_err_name(w.err), (w.ended_at - t0) * 1e3);
    ASSERT_EQ(ELECTOR_ECONNECT, w.err);
    elector_watch_cancel(w.w);
    elector_etcd_free(e);
}

TEST(listener_that_never_speaks_http2_is_abandoned_at_the_dial_timeout)
{
    /* Accepts TCP (the kernel completes the handshake) but never answers. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_OK(bind(fd, (struct sockaddr *)&a, sizeof(a)));
    ASSERT_OK(listen(fd, 8));
    socklen_t l = sizeof(a);
    ASSERT_OK(getsockname(fd, (struct sockaddr *)&a, &l));
    char eps[32];
    snprintf(eps, sizeof(eps), "127.0.0.1:%d", ntohs(a.sin_port));
    elector_etcd *e = client_ex(eps, 400, 5000, 500, 1000, 1000);
    res r;
    double t0 = tl_now();
    int rc = put_wait(e, "k", "v", NULL, &r);
    tl_log("silent listener: %s after %.0f ms: %s", elector_err_name(rc),
           (r.at - t0) * 1e3, r.errstr);
    ASSERT_EQ(ELECTOR_ECONNECT, rc);
    ASSERT_GE(r.at - t0, 0.35);
    ASSERT_LT(r.at - t0, 1.5);
    ASSERT_CONTAINS(r.errstr, eps);
    ASSERT_CONTAINS(r.errstr, "dial timeout");
    elector_etcd_free(e);
    close(fd);
}
