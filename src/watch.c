/* Many watches on one Watch stream. The client picks each watch_id itself (etcd
 * 3.4 accepts caller-chosen IDs), so responses map straight to their watch. When
 * the stream ends, every watch hears it once and is dead; the next watch created
 * opens a fresh stream. */
#include <stdlib.h>
#include <string.h>
#include "internal.h"

struct elector_watch {
    struct elector_watch *next;
    elector_etcd *etcd;
    int64_t id;
    bool dead;     /* ended; no more callbacks */
    bool canceled; /* freed by its owner during a fan-out; release afterwards */
    elector_watch_cb cb;
    void *ud;
};

struct elector__watch_state {
    elector_stream *s;
    elector_watch *list;
    int64_t next_id;
    int fanout; /* > 0 while callbacks run over the list */
};

static struct elector__watch_state *state(elector_etcd *e)
{
    struct elector__watch_state **p = elector__etcd_watch(e);
    if (!*p) *p = calloc(1, sizeof(**p));
    return *p;
}

static void unlink_watch(struct elector__watch_state *st, elector_watch *w)
{
    for (elector_watch **pp = &st->list; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            return;
        }
}

static void purge_canceled(struct elector__watch_state *st)
{
    elector_watch **pp = &st->list;
    while (*pp) {
        elector_watch *w = *pp;
        if (w->canceled) {
            *pp = w->next;
            free(w);
        } else {
            pp = &w->next;
        }
    }
}

static bool call_watch(elector_watch *w, int err, const Etcdserverpb__WatchResponse *r)
{
    elector_etcd *e = w->etcd;
    elector__enter_cb(e);
    w->cb(w, err, r, w->ud);
    return elector__leave_cb(e);
}

static void stream_ended(struct elector__watch_state *st, elector_etcd *e, int err)
{
    st->s = NULL;
    st->fanout++;
    for (elector_watch *w = st->list; w; w = w->next) {
        if (w->dead || w->canceled) continue;
        w->dead = true;
        if (call_watch(w, err, NULL)) break;
    }
    st->fanout--;
    (void)e;
    if (!st->fanout) purge_canceled(st);
}

static int response_err(elector_etcd *e, const Etcdserverpb__WatchResponse *r)
{
    if (r->compact_revision) {
        elector__set_err(e, ELECTOR_ECOMPACTED,
                         "watch %lld: revision compacted, oldest available is %lld",
                         (long long)r->watch_id, (long long)r->compact_revision);
        return ELECTOR_ECOMPACTED;
    }
    elector__set_err(e, ELECTOR_ECANCELED, "watch %lld canceled by etcd: %s",
                     (long long)r->watch_id,
                     r->cancel_reason && *r->cancel_reason ? r->cancel_reason : "no reason");
    return elector__grpc_error(2, r->cancel_reason) == ELECTOR_EGRPC
               ? ELECTOR_ECANCELED
               : elector__grpc_error(2, r->cancel_reason);
}

static void on_msg(elector_stream *s, int err, const ProtobufCMessage *m, void *ud)
{
    struct elector__watch_state *st = ud;
    elector_etcd *e = elector_stream_client(s);
    if (err) {
        elector_stream_close(s);
        stream_ended(st, e, err);
        return;
    }
    const Etcdserverpb__WatchResponse *r = (const void *)m;
    elector_watch *w = st->list;
    while (w && w->id != r->watch_id) w = w->next;
    if (!w || w->dead || w->canceled) return;
    if (r->canceled) {
        w->dead = true;
        int rc = response_err(e, r);
        call_watch(w, rc, r);
        return;
    }
    call_watch(w, 0, r);
}

static int send_req(struct elector__watch_state *st, Etcdserverpb__WatchRequest *req)
{
    return elector_stream_send(st->s, &req->base);
}

elector_watch *elector_etcd_watch(elector_etcd *e, const Etcdserverpb__WatchCreateRequest *in,
                                  elector_watch_cb cb, void *ud)
{
    struct elector__watch_state *st = e && cb && in ? state(e) : NULL;
    if (!st) {
        if (e) elector__set_err(e, cb && in ? ELECTOR_ENOMEM : ELECTOR_EINVAL, "watch: %s",
                                cb && in ? "out of memory" : "bad arguments");
        return NULL;
    }
    if (!st->s) {
        elector_call_opts o = {.require_leader = 1};
        st->s = elector_etcd_stream_open(e, ELECTOR_RPC_WATCH, &o, on_msg, st);
        if (!st->s) return NULL;
    }
    elector_watch *w = calloc(1, sizeof(*w));
    if (!w) {
        elector__set_err(e, ELECTOR_ENOMEM, "out of memory");
        return NULL;
    }
    Etcdserverpb__WatchCreateRequest cr = *in;
    cr.watch_id = w->id = ++st->next_id;
    Etcdserverpb__WatchRequest req = ETCDSERVERPB__WATCH_REQUEST__INIT;
    req.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
    req.create_request = &cr;
    int rc = send_req(st, &req);
    if (rc) {
        free(w);
        elector__set_err(e, rc, "watch: cannot send create request");
        return NULL;
    }
    w->etcd = e;
    w->cb = cb;
    w->ud = ud;
    w->next = st->list;
    st->list = w;
    return w;
}

void elector_watch_cancel(elector_watch *w)
{
    if (!w) return;
    struct elector__watch_state *st = *elector__etcd_watch(w->etcd);
    if (!w->dead && st->s) {
        Etcdserverpb__WatchCancelRequest cr = ETCDSERVERPB__WATCH_CANCEL_REQUEST__INIT;
        cr.watch_id = w->id;
        Etcdserverpb__WatchRequest req = ETCDSERVERPB__WATCH_REQUEST__INIT;
        req.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CANCEL_REQUEST;
        req.cancel_request = &cr;
        send_req(st, &req);
    }
    w->dead = true;
    if (st->fanout) {
        w->canceled = true;
        return;
    }
    unlink_watch(st, w);
    free(w);
}

int64_t elector_watch_id(const elector_watch *w)
{
    return w->id;
}

void elector__watch_free_all(elector_etcd *e)
{
    struct elector__watch_state **p = elector__etcd_watch(e);
    if (!*p) return;
    while ((*p)->list) {
        elector_watch *w = (*p)->list;
        (*p)->list = w->next;
        free(w);
    }
    free(*p);
    *p = NULL;
}
