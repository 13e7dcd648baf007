/* Lease keepalives on one shared LeaseKeepAlive stream. Each request waits in a
 * FIFO; etcd answers a stream's requests in order, so a response settles the
 * oldest pending request for its lease ID. The stream requires a leader: a member
 * cut off from its cluster ends it instead of leaving renewals unanswered. */
#include <stdlib.h>
#include "transport_internal.h"

typedef struct ka_req {
    struct ka_req *next;
    int64_t lease, deadline_ms;
    elector_keepalive_cb cb;
    void *ud;
} ka_req;

struct elector__ka_state {
    elector_stream *s;
    ka_req *head, *tail;
};

static struct elector__ka_state *state(elector_etcd *e)
{
    struct elector__ka_state **p = elector__etcd_ka(e);
    if (!*p) *p = calloc(1, sizeof(**p));
    return *p;
}

static void unlink_req(struct elector__ka_state *st, ka_req *prev, ka_req *r)
{
    if (prev) prev->next = r->next;
    else st->head = r->next;
    if (st->tail == r) st->tail = prev;
}

/* Calls back and frees one request; returns true if the client is being freed. */
static bool settle(elector_etcd *e, ka_req *r, int err, int64_t ttl)
{
    elector__enter_cb(e);
    if (r->cb) r->cb(e, err, r->lease, ttl, r->ud);
    free(r);
    return elector__leave_cb(e);
}

static void on_msg(elector_stream *s, int err, const ProtobufCMessage *m, void *ud)
{
    elector_etcd *e = elector_stream_client(s);
    struct elector__ka_state *st = ud;
    if (err) {
        /* The stream is over: every pending renewal is unknown. */
        elector_stream_close(s);
        st->s = NULL;
        while (st->head) {
            ka_req *r = st->head;
            unlink_req(st, NULL, r);
            if (settle(e, r, err, 0)) return;
        }
        return;
    }
    const Etcdserverpb__LeaseKeepAliveResponse *resp = (const void *)m;
    ka_req *prev = NULL, *r = st->head;
    while (r && r->lease != resp->id) prev = r, r = r->next;
    if (!r) return; /* forgotten or timed out already */
    unlink_req(st, prev, r);
    if (resp->ttl <= 0) {
        elector__set_err(e, ELECTOR_ELEASE, "lease %llx has expired or was revoked",
                         (unsigned long long)resp->id);
        settle(e, r, ELECTOR_ELEASE, 0);
    } else {
        settle(e, r, 0, resp->ttl);
    }
}

int elector_etcd_keepalive(elector_etcd *e, int64_t lease, int64_t timeout_ms,
                           elector_keepalive_cb cb, void *ud)
{
    if (!e || !cb) return ELECTOR_EINVAL;
    struct elector__ka_state *st = state(e);
    if (!st) return ELECTOR_ENOMEM;
    if (!st->s) {
        elector_call_opts o = {.require_leader = 1};
        st->s = elector_etcd_stream_open(e, ELECTOR_RPC_LEASE_KEEPALIVE, &o, on_msg, st);
        if (!st->s) return elector_etcd_err(e);
    }
    ka_req *r = calloc(1, sizeof(*r));
    if (!r) return ELECTOR_ENOMEM;
    Etcdserverpb__LeaseKeepAliveRequest req = ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;
    req.id = lease;
    int rc = elector_stream_send(st->s, &req.base);
    if (rc) {
        free(r);
        return rc;
    }
    r->lease = lease;
    r->cb = cb;
    r->ud = ud;
    if (timeout_ms <= 0) timeout_ms = 5000;
    r->deadline_ms = elector__now_ms() + timeout_ms;
    if (st->tail) st->tail->next = r;
    else st->head = r;
    st->tail = r;
    return 0;
}

void elector_etcd_keepalive_forget(elector_etcd *e, void *ud)
{
    struct elector__ka_state *st = *elector__etcd_ka(e);
    for (ka_req *r = st ? st->head : NULL; r; r = r->next)
        if (r->ud == ud) r->cb = NULL;
}

int64_t elector__keepalive_next_deadline(elector_etcd *e)
{
    struct elector__ka_state *st = *elector__etcd_ka(e);
    int64_t t = INT64_MAX;
    for (ka_req *r = st ? st->head : NULL; r; r = r->next)
        if (r->deadline_ms < t) t = r->deadline_ms;
    return t;
}

void elector__keepalive_timers(elector_etcd *e, int64_t now_ms)
{
    struct elector__ka_state *st = *elector__etcd_ka(e);
    ka_req *prev = NULL, *r = st ? st->head : NULL;
    while (r) {
        if (r->deadline_ms > now_ms) {
            prev = r;
            r = r->next;
            continue;
        }
        ka_req *next = r->next;
        unlink_req(st, prev, r);
        elector__set_err(e, ELECTOR_ETIMEDOUT, "lease %llx: no keepalive reply in time",
                         (unsigned long long)r->lease);
        if (settle(e, r, ELECTOR_ETIMEDOUT, 0)) return;
        r = next;
    }
}

void elector__keepalive_free_all(elector_etcd *e)
{
    struct elector__ka_state **p = elector__etcd_ka(e);
    if (!*p) return;
    while ((*p)->head) {
        ka_req *r = (*p)->head;
        (*p)->head = r->next;
        free(r);
    }
    free(*p);
    *p = NULL;
}
