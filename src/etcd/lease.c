/* SPDX-License-Identifier: MIT */
/* Lease keepalives on shared LeaseKeepAlive streams ("lanes"). Each request
 * waits in its lane's FIFO; etcd answers a stream's requests in order, so a
 * response settles the oldest pending request for its lease ID in that lane. A
 * stream requires a leader: a member cut off from its cluster ends it instead of
 * leaving renewals unanswered.
 *
 * etcd serves one stream's renewals one after another, and on its leader each
 * first waits until everything committed so far is applied: with thousands of
 * sessions on one client and writes in flight, the last renewal of a burst on
 * one stream waited seconds (a session lost at 10,000 sessions during setup).
 * So a request goes to the first lane with fewer than LANE_DEPTH pending, a new
 * lane (stream) is opened when all are that deep, up to LANES_MAX; past that,
 * to the least loaded. One session, or a few hundred, use one stream.
 *
 * The transport knows nothing of this: the state is an ext of the client, the
 * requests' deadlines are one timer armed at or before the earliest of them,
 * and a stream is marked as awaiting a reply while requests are pending on it
 * (so the connection's PING policy watches it closely). */
#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include "etcd_internal.h"

/* A keepalive without a timeout of its own waits this long for its answer. */
#define KEEPALIVE_TIMEOUT_MS 5000
#define LANES_MAX 16
#define LANE_DEPTH 256

typedef struct ka_req {
    struct ka_req *next;
    int64_t lease, deadline_ms;
    bool token_retried; /* sent again once on a fresh stream after ETOKEN */
    elector_keepalive_cb cb;
    void *ud;
} ka_req;

struct ka_state;
typedef struct ka_lane {
    struct ka_state *st;
    elector_stream *s;
    ka_req *head, *tail;
    int pending;
} ka_lane;

typedef struct ka_state {
    elector__ext ext; /* first: the client's handle on this state */
    elector_etcd *etcd;
    ka_lane lanes[LANES_MAX];
    int nlanes; /* lanes ever used (their stream may be closed) */
    int pending;
    elector__timer timer; /* at or before the earliest deadline of the pending */
} ka_state;

static const char kind = 'K';

static void ka_free(elector__ext *x)
{
    ka_state *st = (ka_state *)x;
    /* Armed still when the client's free settled the renewals (settle stops
     * at a closed client before the timer is moved): out of the heap first. */
    if (st->etcd) elector__timer_disarm(st->etcd, &st->timer);
    for (int i = 0; i < st->nlanes; i++) {
        while (st->lanes[i].head) {
            ka_req *r = st->lanes[i].head;
            st->lanes[i].head = r->next;
            free(r);
        }
    }
    free(st);
}

static ka_state *state(elector_etcd *e)
{
    ka_state *st = (ka_state *)elector__ext_get(e, &kind, sizeof(*st), ka_free);
    if (st) st->etcd = e;
    return st;
}

static void deadline_fired(elector__timer *t, void *ud);

/* Arms the timer at the earliest deadline of all pending requests (or disarms
 * it). Walks them all: only when a deadline fires or a stream ends, never per
 * request or reply (10,000 sessions on one client renew together: a walk per
 * reply was quadratic). */
static void pending_changed(ka_state *st)
{
    int64_t t = INT64_MAX;
    for (int i = 0; i < st->nlanes; i++) {
        ka_lane *l = &st->lanes[i];
        for (ka_req *r = l->head; r; r = r->next)
            if (r->deadline_ms < t) t = r->deadline_ms;
        if (l->s) elector__stream_set_awaiting(l->s, l->head != NULL);
    }
    if (t == INT64_MAX)
        elector__timer_disarm(st->etcd, &st->timer);
    else if (!st->timer.armed || st->timer.due_ms != t)
        elector__timer_arm(st->etcd, &st->timer, t, deadline_fired, st);
}

/* One request joined a lane: the timer is due at its deadline if earlier. */
static void pending_added(ka_lane *l, const ka_req *r)
{
    ka_state *st = l->st;
    l->pending++;
    st->pending++;
    if (l->s) elector__stream_set_awaiting(l->s, true);
    if (!st->timer.armed || r->deadline_ms < st->timer.due_ms)
        elector__timer_arm(st->etcd, &st->timer, r->deadline_ms, deadline_fired, st);
}

/* One request left a lane: the timer stays (at worst it fires early, finds
 * nothing due and is armed again at the earliest deadline left) unless none is
 * left at all. */
static void pending_removed(ka_lane *l)
{
    ka_state *st = l->st;
    l->pending--;
    st->pending--;
    if (!l->head && l->s) elector__stream_set_awaiting(l->s, false);
    if (!st->pending) elector__timer_disarm(st->etcd, &st->timer);
}

static void unlink_req(ka_lane *l, ka_req *prev, ka_req *r)
{
    if (prev)
        prev->next = r->next;
    else
        l->head = r->next;
    if (l->tail == r) l->tail = prev;
}

/* Calls back and frees one request; returns true if the client is being freed. */
static bool settle(elector_etcd *e, ka_req *r, int err, int64_t ttl)
{
    elector__etcd_enter(e);
    if (r->cb) r->cb(e, err, r->lease, ttl, r->ud);
    free(r);
    return elector__etcd_leave(e);
}

static void on_msg(elector_stream *s, int err, const ProtobufCMessage *m, void *ud);

/* etcd (3.5) checks the token a LeaseKeepAlive stream is opened with: a stream
 * opened after the token expired ends with "invalid auth token" (the transport
 * has dropped the token by then). Each pending renewal goes out once more, on a
 * fresh stream that authenticates again. False if that is not possible (a
 * renewal already retried, or the new stream cannot be opened): the caller then
 * settles them with the error. */
static bool resend_on_fresh_stream(elector_etcd *e, ka_lane *l)
{
    for (ka_req *r = l->head; r; r = r->next)
        if (r->token_retried) return false;
    if (!l->head) return false;
    elector_call_opts o = {.require_leader = 1};
    l->s = elector_etcd_stream_open(e, ELECTOR_RPC_LEASE_KEEPALIVE, &o, on_msg, l);
    if (!l->s) return false;
    for (ka_req *r = l->head; r; r = r->next) {
        Etcdserverpb__LeaseKeepAliveRequest req =
            ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;
        req.id = r->lease;
        r->token_retried = true;
        if (elector_stream_send(l->s, &req.base)) {
            elector_stream_close(l->s);
            l->s = NULL;
            return false;
        }
    }
    pending_changed(l->st);
    return true;
}

static void on_msg(elector_stream *s, int err, const ProtobufCMessage *m, void *ud)
{
    elector_etcd *e = elector_stream_client(s);
    ka_lane *l = ud;
    ka_state *st = l->st;
    if (err) {
        /* The stream is over: every renewal pending on it is unknown. */
        elector_stream_close(s);
        l->s = NULL;
        if (err == ELECTOR_ETOKEN && resend_on_fresh_stream(e, l)) return;
        while (l->head) {
            ka_req *r = l->head;
            unlink_req(l, NULL, r);
            l->pending--;
            st->pending--;
            if (settle(e, r, err, 0)) return;
        }
        pending_changed(st);
        return;
    }
    const Etcdserverpb__LeaseKeepAliveResponse *resp = (const void *)m;
    ka_req *prev = NULL, *r = l->head;
    while (r && r->lease != resp->id)
        prev = r, r = r->next;
    if (!r) return; /* forgotten or timed out already */
    unlink_req(l, prev, r);
    pending_removed(l);
    if (resp->ttl <= 0) {
        elector__set_err(e, ELECTOR_ELEASE, "lease %llx has expired or was revoked",
                         (unsigned long long)resp->id);
        settle(e, r, ELECTOR_ELEASE, 0);
    } else {
        settle(e, r, 0, resp->ttl);
    }
}

/* Settles every request whose deadline has passed. */
static void deadline_fired(elector__timer *t, void *ud)
{
    (void)t;
    ka_state *st = ud;
    elector_etcd *e = st->etcd;
    int64_t now_ms = elector__now_ms();
    for (int i = 0; i < st->nlanes; i++) {
        ka_lane *l = &st->lanes[i];
        ka_req *prev = NULL, *r = l->head;
        while (r) {
            if (r->deadline_ms > now_ms) {
                prev = r;
                r = r->next;
                continue;
            }
            ka_req *next = r->next;
            unlink_req(l, prev, r);
            l->pending--;
            st->pending--;
            elector__set_err(e, ELECTOR_ETIMEDOUT,
                             "lease %llx: no keepalive reply in time",
                             (unsigned long long)r->lease);
            if (settle(e, r, ELECTOR_ETIMEDOUT, 0)) return;
            r = next;
        }
    }
    pending_changed(st);
}

/* The lane for one more request: the first open one not LANE_DEPTH deep, else a
 * new one, else the least loaded. */
static ka_lane *pick_lane(ka_state *st)
{
    ka_lane *best = NULL;
    for (int i = 0; i < st->nlanes; i++) {
        ka_lane *l = &st->lanes[i];
        if (!l->s) continue;
        if (l->pending < LANE_DEPTH) return l;
        if (!best || l->pending < best->pending) best = l;
    }
    for (int i = 0; i < LANES_MAX; i++) {
        ka_lane *l = &st->lanes[i];
        if (l->s) continue;
        if (i >= st->nlanes) st->nlanes = i + 1;
        l->st = st;
        elector_call_opts o = {.require_leader = 1};
        l->s = elector_etcd_stream_open(st->etcd, ELECTOR_RPC_LEASE_KEEPALIVE, &o, on_msg,
                                        l);
        if (l->s) return l;
        return best; /* NULL: the caller reports the client's error */
    }
    return best;
}

int elector_etcd_keepalive(elector_etcd *e, int64_t lease, int64_t timeout_ms,
                           elector_keepalive_cb cb, void *ud)
{
    if (!e || !cb) return ELECTOR_EINVAL;
    ka_state *st = state(e);
    if (!st) return ELECTOR_ENOMEM;
    ka_lane *l = pick_lane(st);
    if (!l) return elector__etcd_err(e);
    ka_req *r = calloc(1, sizeof(*r));
    if (!r) return ELECTOR_ENOMEM;
    Etcdserverpb__LeaseKeepAliveRequest req =
        ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;
    req.id = lease;
    int rc = elector_stream_send(l->s, &req.base);
    if (rc) {
        free(r);
        return rc;
    }
    r->lease = lease;
    r->cb = cb;
    r->ud = ud;
    if (timeout_ms <= 0) timeout_ms = KEEPALIVE_TIMEOUT_MS;
    r->deadline_ms = elector__now_ms() + timeout_ms;
    if (l->tail)
        l->tail->next = r;
    else
        l->head = r;
    l->tail = r;
    pending_added(l, r);
    return 0;
}

void elector_etcd_keepalive_forget(elector_etcd *e, void *ud)
{
    ka_state *st = (ka_state *)elector__ext_find(e, &kind);
    for (int i = 0; st && i < st->nlanes; i++)
        for (ka_req *r = st->lanes[i].head; r; r = r->next)
            if (r->ud == ud) r->cb = NULL;
}

/* ---------------------------------------------------------------- revoke */

/* Errors a later attempt may not see: the connection, the cluster's leader, a
 * deadline, etcd busy. The rest (EAUTH, EPERM, ETLS, EPROTO, ...) stay. */
static bool revoke_retryable(int err)
{
    return err == ELECTOR_ECONNECT || err == ELECTOR_EUNAVAILABLE ||
           err == ELECTOR_ETIMEDOUT || err == ELECTOR_ENOLEADER ||
           err == ELECTOR_ETOKEN || err == ELECTOR_EGRPC;
}

int elector_etcd_lease_revoke_sync(elector_etcd *e, int64_t lease, int64_t until_ns)
{
    if (!e) return ELECTOR_EINVAL;
    for (;;) {
        int64_t left_ms = (until_ns - elector_now_ns()) / 1000000;
        int64_t tmo = left_ms < 100 ? 100 : left_ms > 5000 ? 5000 : left_ms;
        Etcdserverpb__LeaseRevokeRequest req = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
        req.id = lease;
        elector_call_opts co = {.timeout_ms = tmo, .require_leader = 1};
        ProtobufCMessage *resp = NULL;
        int rc =
            elector_etcd_call_sync(e, ELECTOR_RPC_LEASE_REVOKE, &req.base, &co, &resp);
        if (resp) protobuf_c_message_free_unpacked(resp, NULL);
        if (!rc || rc == ELECTOR_ELEASE) return 0;
        if (!revoke_retryable(rc)) return rc;
        /* A pause before the next attempt, never past until_ns. */
        int64_t pause_ns = until_ns - elector_now_ns();
        if (pause_ns <= 0) return rc;
        if (pause_ns > 100000000) pause_ns = 100000000;
        struct timespec ts = {0, (long)pause_ns};
        while (nanosleep(&ts, &ts) && errno == EINTR) {
        }
    }
}
