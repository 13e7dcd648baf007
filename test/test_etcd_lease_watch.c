/* SPDX-License-Identifier: MIT */
/* The low-level client's leases (grant, TimeToLive, keepalive on the shared
 * stream, revoke, expiry) and watches (order, historic replay, prev_kv,
 * filters, several watches on one stream, cancel, compaction) against a real
 * single-member etcd. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "elector/etcd.h"
#include "etcd_harness.h"
#include "testlib.h"

/* ---------------------------------------------------------------- helpers */

static eh_cluster *start1(void)
{
    eh_opts o = {.members = 1};
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    return c;
}

static elector_etcd *client(const char *endpoints)
{
    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = endpoints;
    cfg.dial_timeout_ms = 2000;
    cfg.request_timeout_ms = 5000;
    elector_etcd *e = elector_etcd_new(&cfg);
    ASSERT_NOT_NULL(e);
    ASSERT_EQ(0, elector_etcd_err(e));
    return e;
}

static ProtobufCBinaryData str(const char *s)
{
    return (ProtobufCBinaryData){strlen(s), (uint8_t *)s};
}

static int bin_eq_str(ProtobufCBinaryData b, const char *s)
{
    return b.len == strlen(s) && memcmp(b.data, s, b.len) == 0;
}

static void free_msg(void *m)
{
    if (m) protobuf_c_message_free_unpacked(m, NULL);
}

/* Runs the client until pred(arg) holds or ms pass; returns pred's value. */
static bool pump_until(elector_etcd *e, int ms, bool (*pred)(void *), void *arg)
{
    double end = tl_now() + ms / 1e3;
    for (;;) {
        if (pred(arg)) return true;
        double left = end - tl_now();
        if (left <= 0) return pred(arg);
        ASSERT_OK(elector_etcd_run_once(e, (int64_t)(left * 1e3) + 1));
    }
}

static bool never(void *arg)
{
    (void)arg;
    return false;
}

/* Keeps the client serviced for ms (for waits on server-side time). */
static void pump_for(elector_etcd *e, int ms)
{
    pump_until(e, ms, never, NULL);
}

static int64_t put_lease(elector_etcd *e, const char *k, const char *v, int64_t lease)
{
    Etcdserverpb__PutRequest r = ETCDSERVERPB__PUT_REQUEST__INIT;
    r.key = str(k);
    r.value = str(v);
    r.lease = lease;
    ProtobufCMessage *m = NULL;
    int rc = elector_etcd_call_sync(e, ELECTOR_RPC_PUT, &r.base, NULL, &m);
    if (rc) tl_log("put %s: %s (%s)", k, elector_err_name(rc), elector_etcd_errstr(e));
    ASSERT_OK(rc);
    int64_t rev = ((Etcdserverpb__PutResponse *)m)->header->revision;
    free_msg(m);
    return rev;
}

static int64_t put(elector_etcd *e, const char *k, const char *v)
{
    return put_lease(e, k, v, 0);
}

static int64_t del(elector_etcd *e, const char *k)
{
    Etcdserverpb__DeleteRangeRequest r = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    r.key = str(k);
    ProtobufCMessage *m = NULL;
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_DELETE_RANGE, &r.base, NULL, &m));
    int64_t rev = ((Etcdserverpb__DeleteRangeResponse *)m)->header->revision;
    free_msg(m);
    return rev;
}

/* Number of keys in [k, k+"\0") i.e. whether k exists (0/1). */
static int64_t exists(elector_etcd *e, const char *k)
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

static int grant(elector_etcd *e, int64_t ttl, int64_t id, int64_t *got_id,
                 int64_t *got_ttl)
{
    Etcdserverpb__LeaseGrantRequest g = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
    g.ttl = ttl;
    g.id = id;
    ProtobufCMessage *m = NULL;
    int rc = elector_etcd_call_sync(e, ELECTOR_RPC_LEASE_GRANT, &g.base, NULL, &m);
    if (m) {
        Etcdserverpb__LeaseGrantResponse *r = (void *)m;
        if (got_id) *got_id = r->id;
        if (got_ttl) *got_ttl = r->ttl;
        ASSERT(r->error == NULL || r->error[0] == 0);
    }
    free_msg(m);
    return rc;
}

static int64_t grant_ok(elector_etcd *e, int64_t ttl)
{
    int64_t id = 0;
    ASSERT_OK(grant(e, ttl, 0, &id, NULL));
    ASSERT_NE(0, id);
    return id;
}

static int lease_revoke(elector_etcd *e, int64_t id)
{
    Etcdserverpb__LeaseRevokeRequest r = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
    r.id = id;
    return elector_etcd_call_sync(e, ELECTOR_RPC_LEASE_REVOKE, &r.base, NULL, NULL);
}

static Etcdserverpb__LeaseTimeToLiveResponse *ttl_of(elector_etcd *e, int64_t id,
                                                     int keys)
{
    Etcdserverpb__LeaseTimeToLiveRequest r =
        ETCDSERVERPB__LEASE_TIME_TO_LIVE_REQUEST__INIT;
    r.id = id;
    r.keys = keys;
    ProtobufCMessage *m = NULL;
    ASSERT_OK(
        elector_etcd_call_sync(e, ELECTOR_RPC_LEASE_TIME_TO_LIVE, &r.base, NULL, &m));
    return (void *)m;
}

/* ---- keepalive results */

typedef struct ka_res {
    int n;
    int err[16];
    int64_t lease[16], ttl[16];
} ka_res;

static void ka_cb(elector_etcd *e, int err, int64_t lease, int64_t ttl, void *ud)
{
    (void)e;
    ka_res *r = ud;
    if (r->n < 16) {
        r->err[r->n] = err;
        r->lease[r->n] = lease;
        r->ttl[r->n] = ttl;
    }
    r->n++;
}

static bool ka_has(void *arg)
{
    void **a = arg;
    return ((ka_res *)a[0])->n >= *(int *)a[1];
}

static void ka_wait(elector_etcd *e, ka_res *r, int n, int ms)
{
    void *arg[2] = {r, &n};
    if (!pump_until(e, ms, ka_has, arg))
        tl_log("keepalive: %d results, wanted %d", r->n, n);
    ASSERT_EQ(n, r->n);
}

/* Sends one keepalive and waits for its result; returns err, *ttl set. */
static int keepalive1(elector_etcd *e, int64_t lease, int64_t *ttl)
{
    ka_res r = {0};
    ASSERT_OK(elector_etcd_keepalive(e, lease, 3000, ka_cb, &r));
    ka_wait(e, &r, 1, 5000);
    ASSERT_EQ(lease, r.lease[0]);
    if (ttl) *ttl = r.ttl[0];
    return r.err[0];
}

/* ---- watch recorder */

#define WL_MAX 1024
typedef struct wev {
    int type; /* MVCCPB__EVENT__EVENT_TYPE__PUT / DELETE */
    char key[48], val[48], prev[48];
    bool has_prev;
    int64_t mod, create, version;
} wev;

typedef struct wlog {
    elector_watch *w;
    int created, responses;
    int err; /* the error that ended the watch, 0 while alive */
    bool ended;
    int64_t compact_revision;
    bool cancel_on_first; /* cancel the watch from inside its callback */
    int n;
    wev ev[WL_MAX];
} wlog;

static void copy_bin(char *dst, size_t cap, ProtobufCBinaryData b)
{
    snprintf(dst, cap, "%.*s", (int)b.len, (const char *)b.data);
}

static void watch_cb(elector_watch *w, int err, const Etcdserverpb__WatchResponse *r,
                     void *ud)
{
    wlog *l = ud;
    ASSERT(w == l->w || l->w == NULL);
    ASSERT(!l->ended); /* nothing after the end */
    l->responses++;
    if (err) {
        l->ended = true;
        l->err = err;
        if (r) l->compact_revision = r->compact_revision;
        return;
    }
    ASSERT_NOT_NULL(r);
    ASSERT_EQ(elector_watch_id(w), r->watch_id);
    if (r->created) l->created++;
    for (size_t i = 0; i < r->n_events; i++) {
        ASSERT(l->n < WL_MAX);
        wev *v = &l->ev[l->n++];
        const Mvccpb__Event *ev = r->events[i];
        v->type = ev->type;
        copy_bin(v->key, sizeof(v->key), ev->kv->key);
        copy_bin(v->val, sizeof(v->val), ev->kv->value);
        v->mod = ev->kv->mod_revision;
        v->create = ev->kv->create_revision;
        v->version = ev->kv->version;
        v->has_prev = ev->prev_kv != NULL;
        if (ev->prev_kv) copy_bin(v->prev, sizeof(v->prev), ev->prev_kv->value);
    }
    if (l->cancel_on_first && l->n > 0) {
        elector_watch_cancel(w);
        l->w = NULL;
        l->ended = true; /* no callback may follow */
    }
}

typedef struct wreq {
    const char *key;
    bool prefix;
    int64_t start_revision;
    bool prev_kv;
    int filter; /* -1 none, else the filter type */
} wreq;

static wlog *watch(elector_etcd *e, wreq q)
{
    static uint8_t end[64][64];
    static int nend;
    wlog *l = calloc(1, sizeof(*l));
    Etcdserverpb__WatchCreateRequest r = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    r.key = str(q.key);
    if (q.prefix) {
        uint8_t *b = end[nend++ % 64];
        r.range_end.data = b;
        r.range_end.len = elector_prefix_end((const uint8_t *)q.key, strlen(q.key), b);
    }
    r.start_revision = q.start_revision;
    r.prev_kv = q.prev_kv;
    Etcdserverpb__WatchCreateRequest__FilterType f =
        (Etcdserverpb__WatchCreateRequest__FilterType)q.filter;
    if (q.filter >= 0) {
        r.n_filters = 1;
        r.filters = &f;
    }
    l->w = elector_etcd_watch(e, &r, watch_cb, l);
    ASSERT_NOT_NULL(l->w);
    return l;
}

static bool wl_created(void *arg)
{
    wlog *l = arg;
    return l->created > 0 || l->ended;
}

static wlog *watch_created(elector_etcd *e, wreq q)
{
    wlog *l = watch(e, q);
    ASSERT(pump_until(e, 3000, wl_created, l));
    ASSERT_EQ(0, l->err);
    ASSERT_EQ(1, l->created);
    return l;
}

static bool wl_has(void *arg)
{
    void **a = arg;
    wlog *l = a[0];
    return l->n >= *(int *)a[1] || l->ended;
}

static void wl_wait(elector_etcd *e, wlog *l, int n, int ms)
{
    void *arg[2] = {l, &n};
    if (!pump_until(e, ms, wl_has, arg))
        tl_log("watch has %d events, wanted %d", l->n, n);
    ASSERT_EQ(0, l->err);
    ASSERT_GE(l->n, n);
}

static bool wl_ended(void *arg)
{
    return ((wlog *)arg)->ended;
}

static void wl_free(wlog *l)
{
    if (l->w) elector_watch_cancel(l->w);
    free(l);
}

/* A value of etcd's Prometheus metrics (HTTP/1.1 GET /metrics on the client
 * port), -1 if absent. */
static double metric(eh_cluster *c, int i, const char *name)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons(eh_client_port(c, i))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_OK(connect(fd, (struct sockaddr *)&a, sizeof(a)));
    const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    ASSERT_EQ((long long)sizeof(req) - 1, (long long)write(fd, req, sizeof(req) - 1));
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap + 1);
    ssize_t n;
    while (len < cap && (n = read(fd, buf + len, cap - len)) > 0)
        len += (size_t)n;
    close(fd);
    buf[len] = 0;
    double v = -1;
    size_t nl = strlen(name);
    for (char *p = buf; (p = strstr(p, name)); p += nl)
        if ((p == buf || p[-1] == '\n') && p[nl] == ' ') {
            v = strtod(p + nl + 1, NULL);
            break;
        }
    free(buf);
    return v;
}

/* ---------------------------------------------------------------- streams */

/* A message queued on a stream that is already open (a second watch, a second
 * keepalive) must go out on the next pass of the loop: elector_etcd_timeout()
 * has to say "now" rather than sleep until some unrelated timer. */
TEST(message_on_an_open_stream_is_sent_without_waiting_for_another_event)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    wlog *a = watch_created(e, (wreq){.key = "s/a", .filter = -1});
    double t0 = tl_now();
    wlog *b = watch(e, (wreq){.key = "s/b", .filter = -1});
    ASSERT_EQ(0, elector_etcd_timeout(e)); /* output is pending */
    bool ok = pump_until(e, 2000, wl_created, b);
    tl_log("second watch created after %.0f ms", (tl_now() - t0) * 1e3);
    ASSERT(ok);
    ASSERT_LT(tl_now() - t0, 0.5);

    int64_t id = grant_ok(e, 10);
    ASSERT_OK(keepalive1(e, id, NULL)); /* opens the keepalive stream */
    t0 = tl_now();
    ka_res r = {0};
    ASSERT_OK(elector_etcd_keepalive(e, id, 3000, ka_cb, &r));
    ka_wait(e, &r, 1, 3000);
    tl_log("second keepalive answered after %.0f ms", (tl_now() - t0) * 1e3);
    ASSERT_OK(r.err[0]);
    ASSERT_LT(tl_now() - t0, 0.5);
    wl_free(a);
    wl_free(b);
    elector_etcd_free(e);
    eh_stop(c);
}

/* ---------------------------------------------------------------- leases */

TEST(lease_grant_time_to_live_and_attached_keys)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    int64_t id = 0, ttl = 0;
    ASSERT_OK(grant(e, 10, 0, &id, &ttl));
    ASSERT_NE(0, id);
    ASSERT_GE(ttl, 10);
    put_lease(e, "l/a", "1", id);
    put_lease(e, "l/b", "2", id);

    Etcdserverpb__LeaseTimeToLiveResponse *t = ttl_of(e, id, 1);
    ASSERT_EQ(id, t->id);
    ASSERT_EQ(ttl, t->grantedttl);
    ASSERT_GT(t->ttl, 0);
    ASSERT_LE(t->ttl, ttl);
    ASSERT_EQ(2, (long long)t->n_keys);
    int seen = 0;
    for (size_t i = 0; i < t->n_keys; i++)
        seen |= bin_eq_str(t->keys[i], "l/a") ? 1 : bin_eq_str(t->keys[i], "l/b") ? 2 : 4;
    ASSERT_EQ(3, seen);
    free_msg(t);

    /* A TTL below etcd's minimum (1.5 x election timeout = 1.5 s) is raised. */
    int64_t id2 = 0;
    ASSERT_OK(grant(e, 1, 0, &id2, &ttl));
    tl_log("asked TTL 1, granted %lld", (long long)ttl);
    ASSERT_GE(ttl, 1);

    /* A caller-chosen ID is kept; the same ID again is refused. */
    int64_t mine = 0x0a0b0c0d0e;
    ASSERT_OK(grant(e, 10, mine, &id2, NULL));
    ASSERT_EQ(mine, id2);
    int rc = grant(e, 10, mine, NULL, NULL);
    tl_log("duplicate lease id: %s: %s", elector_err_name(rc), elector_etcd_errstr(e));
    ASSERT_NE(0, rc);
    ASSERT_CONTAINS(elector_etcd_errstr(e), "lease already exists");

    /* An unknown lease has TTL -1 (not an error). */
    t = ttl_of(e, 0x7777, 0);
    ASSERT_EQ(-1, t->ttl);
    free_msg(t);
    elector_etcd_free(e);
    eh_stop(c);
}

TEST(keepalive_renews_and_reports_the_ttl_per_lease)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    int64_t a = grant_ok(e, 10), b = grant_ok(e, 20);
    int64_t ttl = 0;
    ASSERT_OK(keepalive1(e, a, &ttl));
    ASSERT_EQ(10, ttl);

    /* Several renewals in flight on the one stream, in a mixed order: each
     * answer goes to the request of its lease. */
    ka_res r = {0};
    int64_t order[5] = {b, a, b, b, a};
    for (int i = 0; i < 5; i++)
        ASSERT_OK(elector_etcd_keepalive(e, order[i], 3000, ka_cb, &r));
    ka_wait(e, &r, 5, 5000);
    for (int i = 0; i < 5; i++) {
        ASSERT_EQ(0, r.err[i]);
        ASSERT_EQ(r.lease[i] == a ? 10 : 20, r.ttl[i]);
    }
    int na = 0;
    for (int i = 0; i < 5; i++)
        na += r.lease[i] == a;
    ASSERT_EQ(2, na);

    /* A forgotten renewal never calls back; the others still do. */
    ka_res gone = {0}, kept = {0};
    ASSERT_OK(elector_etcd_keepalive(e, a, 3000, ka_cb, &gone));
    ASSERT_OK(elector_etcd_keepalive(e, b, 3000, ka_cb, &kept));
    elector_etcd_keepalive_forget(e, &gone);
    ka_wait(e, &kept, 1, 5000);
    ASSERT_EQ(0, kept.err[0]);
    ASSERT_EQ(0, gone.n);
    elector_etcd_free(e);
    eh_stop(c);
}

TEST(keepalive_holds_a_short_lease_beyond_its_ttl)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    int64_t id = 0, ttl = 0;
    ASSERT_OK(grant(e, 2, 0, &id, &ttl));
    put_lease(e, "kept", "x", id);
    double t0 = tl_now();
    /* Renew every 500 ms for 3 x the TTL. */
    while (tl_now() - t0 < 3.0 * (double)ttl) {
        int64_t got = 0;
        ASSERT_OK(keepalive1(e, id, &got));
        ASSERT_EQ(ttl, got);
        pump_for(e, 500);
    }
    ASSERT_EQ(1, exists(e, "kept"));
    Etcdserverpb__LeaseTimeToLiveResponse *t = ttl_of(e, id, 0);
    ASSERT_GT(t->ttl, 0);
    free_msg(t);
    elector_etcd_free(e);
    eh_stop(c);
}

TEST(keepalive_of_an_unknown_or_revoked_lease_gives_elease)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    int64_t ttl = 99;
    ASSERT_EQ(ELECTOR_ELEASE, keepalive1(e, 0x1234567, &ttl));
    ASSERT_EQ(0, ttl);
    int64_t id = grant_ok(e, 10);
    ASSERT_OK(keepalive1(e, id, NULL));
    ASSERT_OK(lease_revoke(e, id));
    ASSERT_EQ(ELECTOR_ELEASE, keepalive1(e, id, NULL));
    /* The stream is still good for live leases. */
    int64_t id2 = grant_ok(e, 10);
    ASSERT_OK(keepalive1(e, id2, &ttl));
    ASSERT_EQ(10, ttl);
    elector_etcd_free(e);
    eh_stop(c);
}

TEST(revoke_deletes_attached_keys_and_unknown_revoke_gives_elease)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    int64_t id = grant_ok(e, 30);
    put_lease(e, "rv/1", "a", id);
    put_lease(e, "rv/2", "b", id);
    put(e, "rv/3", "no lease");
    wlog *w = watch_created(e, (wreq){.key = "rv/", .prefix = true, .filter = -1});
    ASSERT_OK(lease_revoke(e, id));
    /* Both deletions are one revision, seen at once by a watcher. */
    wl_wait(e, w, 2, 3000);
    ASSERT_EQ(MVCCPB__EVENT__EVENT_TYPE__DELETE, w->ev[0].type);
    ASSERT_EQ(MVCCPB__EVENT__EVENT_TYPE__DELETE, w->ev[1].type);
    ASSERT_EQ(w->ev[0].mod, w->ev[1].mod);
    ASSERT_EQ(0, exists(e, "rv/1"));
    ASSERT_EQ(0, exists(e, "rv/2"));
    ASSERT_EQ(1, exists(e, "rv/3"));

    ASSERT_EQ(ELECTOR_ELEASE, lease_revoke(e, id));
    ASSERT_CONTAINS(elector_etcd_errstr(e), "lease not found");
    ASSERT_EQ(ELECTOR_ELEASE, lease_revoke(e, 0x42));
    /* Put with a revoked lease fails the same way. */
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key = str("rv/4");
    p.lease = id;
    ASSERT_EQ(ELECTOR_ELEASE,
              elector_etcd_call_sync(e, ELECTOR_RPC_PUT, &p.base, NULL, NULL));
    wl_free(w);
    elector_etcd_free(e);
    eh_stop(c);
}

/* elector_etcd_lease_revoke_sync (the guard's and the release helper's revoke):
 * a member that does not answer is waited for (and tried again) until the deadline given,
 * then the timeout is returned; once it answers, the lease is revoked (0), and a lease
 * already gone counts as revoked (0, not ELECTOR_ELEASE). */
TEST(revoke_sync_tries_until_its_deadline_then_revokes)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    int64_t id = grant_ok(e, 30);
    ASSERT_OK(eh_member_pause(c, 0));
    double t0 = tl_now();
    int rc = elector_etcd_lease_revoke_sync(e, id, elector_now_ns() + 800000000);
    double took = tl_now() - t0;
    ASSERT_OK(eh_member_resume(c, 0));
    tl_log("member paused: %s after %.2f s (deadline 0.8 s)", elector_err_name(rc), took);
    ASSERT_EQ(ELECTOR_ETIMEDOUT, rc);
    ASSERT_GE(took, 0.7); /* not given up before the deadline */
    ASSERT_EQ(0, elector_etcd_lease_revoke_sync(e, id, elector_now_ns() + 5000000000LL));
    int64_t ttl = 99;
    ASSERT_EQ(ELECTOR_ELEASE, keepalive1(e, id, &ttl)); /* revoked */
    ASSERT_EQ(0, elector_etcd_lease_revoke_sync(e, id, elector_now_ns() + 5000000000LL));
    elector_etcd_free(e);
    eh_stop(c);
}

TEST(lease_without_keepalive_expires_and_its_key_vanishes)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    int64_t id = 0, ttl = 0;
    double t0 = tl_now();
    ASSERT_OK(grant(e, 2, 0, &id, &ttl));
    ASSERT_EQ(2, ttl);
    put_lease(e, "exp", "x", id);
    wlog *w = watch_created(
        e, (wreq){.key = "exp",
                  .filter = ETCDSERVERPB__WATCH_CREATE_REQUEST__FILTER_TYPE__NOPUT});
    wl_wait(e, w, 1, 8000);
    double dt = tl_now() - t0;
    tl_log("lease with TTL 2 expired after %.2f s", dt);
    ASSERT_EQ(MVCCPB__EVENT__EVENT_TYPE__DELETE, w->ev[0].type);
    ASSERT_STREQ("exp", w->ev[0].key);
    ASSERT_GE(dt, 1.9);
    ASSERT_LT(dt, 5.0);
    ASSERT_EQ(0, exists(e, "exp"));
    Etcdserverpb__LeaseTimeToLiveResponse *t = ttl_of(e, id, 0);
    ASSERT_EQ(-1, t->ttl);
    free_msg(t);
    ASSERT_EQ(ELECTOR_ELEASE, keepalive1(e, id, NULL));
    wl_free(w);
    elector_etcd_free(e);
    eh_stop(c);
}

/* ---------------------------------------------------------------- watches */

typedef struct put_rec {
    int done, err;
    int64_t rev;
} put_rec;

static void put_rec_cb(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e;
    put_rec *p = ud;
    p->done = 1;
    p->err = err;
    if (m) p->rev = ((const Etcdserverpb__PutResponse *)m)->header->revision;
}

typedef struct all_done {
    put_rec *p;
    int n;
} all_done;

static bool puts_done(void *arg)
{
    all_done *a = arg;
    for (int i = 0; i < a->n; i++)
        if (!a->p[i].done) return false;
    return true;
}

TEST(watch_delivers_many_events_in_revision_order)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    wlog *w = watch_created(e, (wreq){.key = "o/", .prefix = true, .filter = -1});
    enum { N = 300 };
    /* All puts in flight at once: etcd decides their order; the watch must
     * report exactly that order (by the revisions the puts returned). */
    put_rec *p = calloc(N, sizeof(*p));
    char vals[N][8];
    for (int i = 0; i < N; i++) {
        char k[16];
        snprintf(k, sizeof(k), "o/%d", i % 7);
        snprintf(vals[i], sizeof(vals[i]), "%d", i);
        Etcdserverpb__PutRequest r = ETCDSERVERPB__PUT_REQUEST__INIT;
        r.key = str(k);
        r.value = str(vals[i]);
        ASSERT_OK(
            elector_etcd_call(e, ELECTOR_RPC_PUT, &r.base, NULL, put_rec_cb, &p[i]));
    }
    all_done ad = {p, N};
    ASSERT(pump_until(e, 10000, puts_done, &ad));
    wl_wait(e, w, N, 10000);
    ASSERT_EQ(N, w->n);
    int64_t first = INT64_MAX;
    for (int i = 0; i < N; i++) {
        ASSERT_OK(p[i].err);
        if (p[i].rev < first) first = p[i].rev;
    }
    for (int i = 0; i < N; i++) {
        /* The event at position rev - first is put i. */
        int64_t pos = p[i].rev - first;
        ASSERT(pos >= 0 && pos < N);
        ASSERT_STREQ(vals[i], w->ev[pos].val);
        ASSERT_EQ(p[i].rev, w->ev[pos].mod);
    }
    for (int i = 1; i < N; i++)
        ASSERT_EQ(w->ev[i - 1].mod + 1, w->ev[i].mod);
    tl_log("%d events in %d responses", w->n, w->responses);
    free(p);
    wl_free(w);
    elector_etcd_free(e);
    eh_stop(c);
}

TEST(watch_from_a_start_revision_replays_history)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    int64_t r1 = put(e, "h", "v1");
    put(e, "other", "-");
    int64_t r2 = put(e, "h", "v2");
    int64_t r3 = del(e, "h");
    int64_t r4 = put(e, "h", "v3");

    wlog *w = watch(e, (wreq){.key = "h", .start_revision = r1, .filter = -1});
    wl_wait(e, w, 4, 3000);
    ASSERT_EQ(1, w->created);
    ASSERT_EQ(4, w->n);
    const int64_t revs[4] = {r1, r2, r3, r4};
    const char *vals[4] = {"v1", "v2", "", "v3"};
    for (int i = 0; i < 4; i++) {
        ASSERT_EQ(revs[i], w->ev[i].mod);
        ASSERT_STREQ(vals[i], w->ev[i].val);
        ASSERT_EQ(i == 2 ? MVCCPB__EVENT__EVENT_TYPE__DELETE
                         : MVCCPB__EVENT__EVENT_TYPE__PUT,
                  w->ev[i].type);
    }
    ASSERT_EQ(1, w->ev[3].version); /* re-created */
    ASSERT_EQ(r4, w->ev[3].create);

    /* From the middle of history; then live events continue the sequence. */
    wlog *w2 = watch(e, (wreq){.key = "h", .start_revision = r2 + 1, .filter = -1});
    wl_wait(e, w2, 2, 3000);
    ASSERT_EQ(r3, w2->ev[0].mod);
    int64_t r5 = put(e, "h", "v4");
    wl_wait(e, w2, 3, 3000);
    ASSERT_EQ(r5, w2->ev[2].mod);
    ASSERT_STREQ("v4", w2->ev[2].val);
    wl_wait(e, w, 5, 3000);
    ASSERT_EQ(r5, w->ev[4].mod);
    wl_free(w);
    wl_free(w2);
    elector_etcd_free(e);
    eh_stop(c);
}

TEST(watch_with_prev_kv_reports_the_previous_value)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    wlog *w = watch_created(e, (wreq){.key = "p", .prev_kv = true, .filter = -1});
    wlog *plain = watch_created(e, (wreq){.key = "p", .filter = -1});
    put(e, "p", "a");
    put(e, "p", "b");
    del(e, "p");
    wl_wait(e, w, 3, 3000);
    ASSERT(!w->ev[0].has_prev); /* created: nothing before */
    ASSERT(w->ev[1].has_prev);
    ASSERT_STREQ("a", w->ev[1].prev);
    ASSERT_STREQ("b", w->ev[1].val);
    ASSERT_EQ(MVCCPB__EVENT__EVENT_TYPE__DELETE, w->ev[2].type);
    ASSERT(w->ev[2].has_prev);
    ASSERT_STREQ("b", w->ev[2].prev);
    wl_wait(e, plain, 3, 3000);
    for (int i = 0; i < 3; i++)
        ASSERT(!plain->ev[i].has_prev);
    wl_free(w);
    wl_free(plain);
    elector_etcd_free(e);
    eh_stop(c);
}

TEST(watch_filters_noput_and_nodelete)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    wlog *noput = watch_created(
        e, (wreq){.key = "f/",
                  .prefix = true,
                  .filter = ETCDSERVERPB__WATCH_CREATE_REQUEST__FILTER_TYPE__NOPUT});
    wlog *nodel = watch_created(
        e, (wreq){.key = "f/",
                  .prefix = true,
                  .filter = ETCDSERVERPB__WATCH_CREATE_REQUEST__FILTER_TYPE__NODELETE});
    wlog *all = watch_created(e, (wreq){.key = "f/", .prefix = true, .filter = -1});
    for (int i = 0; i < 3; i++) {
        char k[8];
        snprintf(k, sizeof(k), "f/%d", i);
        put(e, k, "x");
        put(e, k, "y");
        del(e, k);
    }
    /* Each watch's last expected event is the final delete / final put:
     * events of one watch arrive in order, so everything before is there. */
    wl_wait(e, all, 9, 3000);
    wl_wait(e, noput, 3, 3000);
    wl_wait(e, nodel, 6, 3000);
    /* Give a wrongly delivered extra event the chance to show up: a sentinel
     * write seen by `all` comes after any event for earlier revisions. */
    put(e, "f/sentinel", "s");
    wl_wait(e, all, 10, 3000);
    wl_wait(e, nodel, 7, 3000);
    ASSERT_EQ(3, noput->n);
    for (int i = 0; i < noput->n; i++)
        ASSERT_EQ(MVCCPB__EVENT__EVENT_TYPE__DELETE, noput->ev[i].type);
    ASSERT_EQ(7, nodel->n);
    for (int i = 0; i < nodel->n; i++)
        ASSERT_EQ(MVCCPB__EVENT__EVENT_TYPE__PUT, nodel->ev[i].type);
    ASSERT_EQ(10, all->n);
    wl_free(noput);
    wl_free(nodel);
    wl_free(all);
    elector_etcd_free(e);
    eh_stop(c);
}

TEST(watches_on_one_stream_each_get_only_their_own_events)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    wlog *a = watch_created(e, (wreq){.key = "m/a", .filter = -1});
    wlog *b = watch_created(e, (wreq){.key = "m/b", .filter = -1});
    wlog *ab = watch_created(e, (wreq){.key = "m/", .prefix = true, .filter = -1});
    ASSERT_NE(elector_watch_id(a->w), elector_watch_id(b->w));
    ASSERT_NE(elector_watch_id(a->w), elector_watch_id(ab->w));
    /* One Watch stream carries all three (etcd's own count). */
    double streams = metric(c, 0, "etcd_debugging_mvcc_watch_stream_total");
    double watchers = metric(c, 0, "etcd_debugging_mvcc_watcher_total");
    tl_log("etcd reports %.0f watch streams, %.0f watchers", streams, watchers);
    ASSERT_EQ(1.0, streams);
    ASSERT_EQ(3.0, watchers);

    for (int i = 0; i < 5; i++) {
        char v[8];
        snprintf(v, sizeof(v), "%d", i);
        put(e, "m/a", v);
        put(e, "m/b", v);
        put(e, "m/b", v);
    }
    wl_wait(e, ab, 15, 3000);
    wl_wait(e, a, 5, 3000);
    wl_wait(e, b, 10, 3000);
    ASSERT_EQ(5, a->n);
    ASSERT_EQ(10, b->n);
    ASSERT_EQ(15, ab->n);
    for (int i = 0; i < a->n; i++)
        ASSERT_STREQ("m/a", a->ev[i].key);
    for (int i = 0; i < b->n; i++)
        ASSERT_STREQ("m/b", b->ev[i].key);
    wl_free(a);
    wl_free(b);
    wl_free(ab);
    elector_etcd_free(e);
    eh_stop(c);
}

TEST(canceled_watch_gets_no_more_events)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    wlog *w = watch_created(e, (wreq){.key = "c", .filter = -1});
    wlog *sentinel = watch_created(e, (wreq){.key = "c", .filter = -1});
    wlog *self = watch_created(e, (wreq){.key = "c", .filter = -1});
    self->cancel_on_first = true; /* cancels itself inside its callback */
    put(e, "c", "1");
    wl_wait(e, w, 1, 3000);
    wl_wait(e, sentinel, 1, 3000);
    ASSERT(pump_until(e, 3000, wl_ended, self));
    ASSERT_EQ(1, self->n);

    elector_watch_cancel(w->w);
    w->w = NULL;
    /* etcd drops the watcher (its gauge goes 3 -> 1 once both cancels land). */
    double t0 = tl_now();
    while (metric(c, 0, "etcd_debugging_mvcc_watcher_total") != 1.0) {
        ASSERT_LT(tl_now() - t0, 3.0);
        pump_for(e, 20);
    }
    for (int i = 2; i <= 4; i++) {
        char v[4];
        snprintf(v, sizeof(v), "%d", i);
        put(e, "c", v);
    }
    wl_wait(e, sentinel, 4, 3000);
    ASSERT_EQ(1, w->n);
    ASSERT_EQ(1, self->n);
    /* A new watch after cancels works on the same stream. */
    wlog *again = watch_created(e, (wreq){.key = "c", .start_revision = 1, .filter = -1});
    wl_wait(e, again, 4, 3000);
    ASSERT_EQ(1.0, metric(c, 0, "etcd_debugging_mvcc_watch_stream_total"));
    wl_free(again);
    wl_free(w);
    wl_free(sentinel);
    free(self);
    /* A watch its owner never cancels: the client's free tells it once that
     * it ended (ECANCELED) and frees it (the ASan build's leak check). */
    wlog *left = watch_created(e, (wreq){.key = "c", .filter = -1});
    int before = left->responses;
    elector_etcd_free(e);
    ASSERT(left->ended);
    ASSERT_EQ(ELECTOR_ECANCELED, left->err);
    ASSERT_EQ(before + 1, left->responses);
    free(left);
    eh_stop(c);
}

struct many {
    elector_watch *w;
    int created, events, errs;
};

static void many_cb(elector_watch *w, int err, const Etcdserverpb__WatchResponse *r,
                    void *ud)
{
    struct many *m = ud;
    ASSERT(w == m->w);
    if (err) {
        m->errs++;
        return;
    }
    ASSERT_EQ(elector_watch_id(w), r->watch_id);
    m->created += r->created;
    m->events += (int)r->n_events;
}

struct many_all {
    struct many *m;
    int n, step; /* watches [0, n) by step */
    int created, events;
};

static bool many_done(void *arg)
{
    struct many_all *a = arg;
    for (int i = 0; i < a->n; i += a->step)
        if (a->m[i].created < a->created || a->m[i].events < a->events) return false;
    return true;
}

/* Many watches on one client (its table of watches by ID grows and chains
 * share buckets): two of every three canceled, oldest first (a watch is
 * unlinked from behind newer ones in its bucket). Each put then reaches
 * exactly the watches still there, each its own once; the canceled hear
 * nothing. */
TEST(many_watches_canceled_oldest_first_leave_the_others_intact)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    enum { N = 250 }; /* the table: 256 buckets, some shared */
    struct many *m = calloc(N, sizeof(*m));
    ASSERT_NOT_NULL(m);
    for (int i = 0; i < N; i++) {
        char k[16];
        snprintf(k, sizeof(k), "h/%d", i);
        Etcdserverpb__WatchCreateRequest r = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
        r.key = str(k);
        m[i].w = elector_etcd_watch(e, &r, many_cb, &m[i]);
        ASSERT_NOT_NULL(m[i].w);
    }
    struct many_all all = {m, N, 1, 1, 0};
    ASSERT(pump_until(e, 5000, many_done, &all));
    for (int i = 0; i < N; i++)
        if (i % 3) {
            elector_watch_cancel(m[i].w);
            m[i].w = NULL;
        }
    put_rec *p = calloc(N, sizeof(*p));
    for (int i = 0; i < N; i++) {
        char k[16];
        snprintf(k, sizeof(k), "h/%d", i);
        Etcdserverpb__PutRequest r = ETCDSERVERPB__PUT_REQUEST__INIT;
        r.key = str(k);
        r.value = str("v");
        ASSERT_OK(
            elector_etcd_call(e, ELECTOR_RPC_PUT, &r.base, NULL, put_rec_cb, &p[i]));
    }
    all_done ad = {p, N};
    ASSERT(pump_until(e, 10000, puts_done, &ad));
    all = (struct many_all){m, N, 3, 1, 1};
    ASSERT(pump_until(e, 5000, many_done, &all));
    pump_for(e, 200);
    for (int i = 0; i < N; i++) {
        ASSERT_EQ(0, m[i].errs);
        ASSERT_EQ(1, m[i].created);
        ASSERT_EQ(i % 3 ? 0 : 1, m[i].events);
    }
    for (int i = 0; i < N; i += 3)
        elector_watch_cancel(m[i].w);
    free(p);
    free(m);
    elector_etcd_free(e);
    eh_stop(c);
}

TEST(watch_from_a_compacted_revision_fails_with_ecompacted)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    int64_t r1 = put(e, "k", "1");
    put(e, "k", "2");
    int64_t r3 = put(e, "k", "3");
    int64_t r4 = put(e, "k", "4");
    Etcdserverpb__CompactionRequest cr = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
    cr.revision = r3;
    ASSERT_OK(elector_etcd_call_sync(e, ELECTOR_RPC_COMPACT, &cr.base, NULL, NULL));

    wlog *live = watch_created(e, (wreq){.key = "k", .filter = -1});
    wlog *w = watch(e, (wreq){.key = "k", .start_revision = r1, .filter = -1});
    ASSERT(pump_until(e, 3000, wl_ended, w));
    tl_log("watch from %lld: %s: %s (compact_revision %lld)", (long long)r1,
           elector_err_name(w->err), elector_etcd_errstr(e),
           (long long)w->compact_revision);
    ASSERT_EQ(ELECTOR_ECOMPACTED, w->err);
    ASSERT_EQ(r3, w->compact_revision);
    ASSERT_EQ(0, w->n);

    /* From the compaction point itself: history is there. */
    wlog *ok = watch(e, (wreq){.key = "k", .start_revision = r3, .filter = -1});
    wl_wait(e, ok, 2, 3000);
    ASSERT_EQ(r3, ok->ev[0].mod);
    ASSERT_EQ(r4, ok->ev[1].mod);
    /* The other watches on the stream are unaffected. */
    int64_t r5 = put(e, "k", "5");
    wl_wait(e, live, 1, 3000);
    ASSERT_EQ(r5, live->ev[0].mod);
    wl_wait(e, ok, 3, 3000);
    /* Canceling an ended watch only frees it. */
    wl_free(w);
    wl_free(ok);
    wl_free(live);
    elector_etcd_free(e);
    eh_stop(c);
}

/* ---------------------------------------------------------------- keepalive edges */

struct free_in_ka {
    elector_etcd *e;
    int calls;
    int err[4];
};

static void free_on_result(elector_etcd *e, int err, int64_t lease, int64_t ttl, void *ud)
{
    (void)e, (void)lease, (void)ttl;
    struct free_in_ka *f = ud;
    f->err[f->calls++ & 3] = err;
    elector_etcd *x = f->e;
    f->e = NULL;
    elector_etcd_free(x);
}

/* Two renewals time out together (the member paused): the first's callback
 * frees the client. The second is then told once, ECANCELED (the client's
 * end), not a timeout of a client that is gone; nothing else runs. */
TEST(client_freed_from_a_keepalive_timeout_callback)
{
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    int64_t id = grant_ok(e, 30);
    ASSERT_OK(keepalive1(e, id, NULL)); /* the stream is open */
    ASSERT_OK(eh_member_pause(c, 0));
    struct free_in_ka f = {.e = e};
    ASSERT_OK(elector_etcd_keepalive(e, id, 300, free_on_result, &f));
    ASSERT_OK(elector_etcd_keepalive(e, id, 300, free_on_result, &f));
    double end = tl_now() + 5;
    while (f.e && tl_now() < end)
        elector_etcd_run_once(e, 50);
    ASSERT_OK(eh_member_resume(c, 0));
    tl_log("client freed in a keepalive's callback: %d calls: %s, %s", f.calls,
           elector_err_name(f.err[0]), elector_err_name(f.err[1]));
    ASSERT(!f.e);
    ASSERT_EQ(2, f.calls);
    ASSERT_EQ(ELECTOR_ETIMEDOUT, f.err[0]);
    ASSERT_EQ(ELECTOR_ECANCELED, f.err[1]);
    eh_stop(c);
}

struct ka_count {
    int ok, other;
};

static void ka_counted(elector_etcd *e, int err, int64_t lease, int64_t ttl, void *ud)
{
    (void)e, (void)lease;
    struct ka_count *k = ud;
    if (!err && ttl > 0)
        k->ok++;
    else
        k->other++;
}

static bool ka_all(void *arg)
{
    const struct ka_count *k = arg;
    return k->ok + k->other >= 16 * 256 + 2;
}

/* 16 x 256 + 2 renewals asked at once: the 16 LeaseKeepAlive streams (lanes)
 * a client may open are each 256 deep, so the last two join the least loaded
 * lanes (the first, then the second) instead of opening a 17th stream; every
 * renewal is answered. */
TEST_WITH_TIMEOUT(renewals_past_every_lanes_depth_share_the_16_streams, 60)
{
    static const char streams[] =
        "grpc_server_started_total{grpc_method=\"LeaseKeepAlive\",grpc_service="
        "\"etcdserverpb.Lease\",grpc_type=\"bidi_stream\"}";
    eh_cluster *c = start1();
    elector_etcd *e = client(eh_endpoints(c));
    int64_t id = grant_ok(e, 30);
    double s0 = metric(c, 0, streams);
    if (s0 < 0) s0 = 0; /* no series before the first stream */
    struct ka_count k = {0};
    for (int i = 0; i < 16 * 256 + 2; i++)
        ASSERT_OK(elector_etcd_keepalive(e, id, 20000, ka_counted, &k));
    bool done = pump_until(e, 30000, ka_all, &k);
    double s1 = metric(c, 0, streams);
    tl_log("%d renewals at once: %d answered, %d not; %.0f LeaseKeepAlive streams",
           16 * 256 + 2, k.ok, k.other, s1 - s0);
    ASSERT(done);
    ASSERT_EQ(16 * 256 + 2, k.ok);
    ASSERT_EQ(16.0, s1 - s0);
    elector_etcd_free(e);
    eh_stop(c);
}
