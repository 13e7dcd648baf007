/* SPDX-License-Identifier: MIT */
/* Many watches on one Watch stream. The client picks each watch_id itself (etcd
 * 3.4 accepts caller-chosen IDs), so responses map straight to their watch.
 *
 * Two complications:
 * - etcd answers a refused create (permission denied, bad token) with
 *   watch_id -1, not the ID asked for. Creates are answered in order per stream,
 *   so a FIFO of unanswered creates tells which watch a -1 answer belongs to.
 * - etcd checks each create against the auth token the stream was opened with.
 *   Once that token has expired, the stream refuses every new watch, while its
 *   existing watches go on. So a create refused for its token retires the
 *   stream (it keeps serving its watches and is closed when the last one goes)
 *   and is sent again on a fresh stream, opened after authenticating again.
 *
 * When a stream ends, each of its watches hears it once and is dead; the next
 * watch created opens a fresh stream. */
#include <stdlib.h>
#include <string.h>
#include "etcd_internal.h"

struct elector_watch {
    struct elector_watch *next, *prev; /* the state's list */
    struct elector_watch *hnext;       /* its bucket in the table by ID */
    elector_etcd *etcd;
    elector_stream *s; /* the stream it was created on */
    int64_t id;
    uint8_t *create; /* packed create request, kept until etcd confirms it */
    size_t create_len;
    bool created, resent;
    bool dead;     /* ended; no more callbacks */
    bool canceled; /* freed by its owner during a fan-out; release afterwards */
    elector_watch_cb cb;
    void *ud;
};

struct pending {
    elector_stream *s;
    int64_t id;
};

typedef struct watch_state {
    elector__ext ext;    /* first: the client's handle on this state */
    elector_stream *cur; /* where new watches go */
    elector_watch *list;
    /* The watches by ID (IDs are unique per client): a response finds its watch
     * without walking the list, which holds 100,000 of them at scale. */
    elector_watch **tab;
    size_t tab_cap, count;
    struct pending *pending; /* unanswered creates, oldest first: [head, n) */
    size_t head, n, cap;
    int64_t next_id;
    /* Held while callbacks run over the list: a watch canceled meanwhile is only
     * marked, and leaves the list when the last hold goes. */
    elector__life fanout;
} watch_state;

static const char kind = 'W';

static void on_msg(elector_stream *s, int err, const ProtobufCMessage *m, void *ud);

static void watch_free(elector_watch *w)
{
    free(w->create);
    free(w);
}

static void state_free(elector__ext *x)
{
    watch_state *st = (watch_state *)x;
    while (st->list) {
        elector_watch *w = st->list;
        st->list = w->next;
        watch_free(w);
    }
    free(st->tab);
    free(st->pending);
    free(st);
}

/* ---------------------------------------------------------------- list and table */

static size_t bucket(const watch_state *st, int64_t id)
{
    return (size_t)((uint64_t)id * 0x9E3779B97F4A7C15ull >> 20) & (st->tab_cap - 1);
}

/* Grows the table to keep chains short; false when out of memory. */
static bool tab_reserve(watch_state *st)
{
    if (st->count < st->tab_cap) return true;
    size_t cap = st->tab_cap ? 2 * st->tab_cap : 64;
    elector_watch **t = calloc(cap, sizeof(*t));
    if (!t) return false;
    elector_watch **old = st->tab;
    size_t ocap = st->tab_cap;
    st->tab = t;
    st->tab_cap = cap;
    for (size_t i = 0; i < ocap; i++) {
        for (elector_watch *w = old[i], *n; w; w = n) {
            n = w->hnext;
            size_t b = bucket(st, w->id);
            w->hnext = t[b];
            t[b] = w;
        }
    }
    free(old);
    return true;
}

static void link_watch(watch_state *st, elector_watch *w)
{
    w->prev = NULL;
    w->next = st->list;
    if (w->next) w->next->prev = w;
    st->list = w;
    size_t b = bucket(st, w->id);
    w->hnext = st->tab[b];
    st->tab[b] = w;
    st->count++;
}

static void unlink_watch(watch_state *st, elector_watch *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        st->list = w->next;
    if (w->next) w->next->prev = w->prev;
    elector_watch **pp = &st->tab[bucket(st, w->id)];
    while (*pp && *pp != w)
        pp = &(*pp)->hnext;
    if (*pp) *pp = w->hnext;
    st->count--;
}

static elector_watch *find_watch(const watch_state *st, int64_t id)
{
    if (!st->tab_cap) return NULL;
    elector_watch *w = st->tab[bucket(st, id)];
    while (w && w->id != id)
        w = w->hnext;
    return w;
}

static watch_state *state(elector_etcd *e)
{
    return (watch_state *)elector__ext_get(e, &kind, sizeof(watch_state), state_free);
}

/* After a fan-out: frees the watches canceled during it. */
static void purge_canceled(watch_state *st)
{
    for (elector_watch *w = st->list, *n; w; w = n) {
        n = w->next;
        if (w->canceled) {
            unlink_watch(st, w);
            watch_free(w);
        }
    }
}

static bool call_watch(elector_watch *w, int err, const Etcdserverpb__WatchResponse *r)
{
    elector_etcd *e = w->etcd;
    elector__etcd_enter(e);
    w->cb(w, err, r, w->ud);
    return elector__etcd_leave(e);
}

/* ---------------------------------------------------------------- pending creates */

static int pending_push(watch_state *st, elector_stream *s, int64_t id)
{
    if (st->n == st->cap && st->head > 0) {
        memmove(st->pending, st->pending + st->head,
                (st->n - st->head) * sizeof(*st->pending));
        st->n -= st->head;
        st->head = 0;
    }
    if (st->n == st->cap) {
        size_t cap = st->cap ? 2 * st->cap : 8;
        struct pending *p = realloc(st->pending, cap * sizeof(*p));
        if (!p) return ELECTOR_ENOMEM;
        st->pending = p;
        st->cap = cap;
    }
    st->pending[st->n++] = (struct pending){s, id};
    return 0;
}

static void pending_remove(watch_state *st, size_t i)
{
    if (i == st->head) {
        st->head++;
    } else {
        memmove(st->pending + i, st->pending + i + 1,
                (st->n - i - 1) * sizeof(*st->pending));
        st->n--;
    }
    if (st->head == st->n) st->head = st->n = 0;
}

/* The create that a "created" answer on stream s settles: the one with its ID,
 * or, for a -1 answer, the oldest on that stream. Returns the watch ID. */
static int64_t pending_settle(watch_state *st, elector_stream *s, int64_t id)
{
    for (size_t i = st->head; i < st->n; i++) {
        if (st->pending[i].s != s || (id != -1 && st->pending[i].id != id)) continue;
        id = st->pending[i].id;
        pending_remove(st, i);
        return id;
    }
    return id;
}

/* Forgets the creates of stream s, keeping the others in order. (It once
 * removed them one by one, walking down from the end: removing the head entry
 * could reset head and n to 0, and the walk then went on below the new end,
 * moving a negative number of entries: heap corruption when a stream with
 * several creates unanswered ended, issue 27.) */
static void pending_drop_stream(watch_state *st, elector_stream *s)
{
    size_t j = st->head;
    for (size_t i = st->head; i < st->n; i++)
        if (st->pending[i].s != s) st->pending[j++] = st->pending[i];
    st->n = j;
    if (st->head == st->n) st->head = st->n = 0;
}

/* ---------------------------------------------------------------- streams */

static bool stream_in_use(const watch_state *st, const elector_stream *s)
{
    for (const elector_watch *w = st->list; w; w = w->next)
        if (w->s == s && !w->dead && !w->canceled) return true;
    return false;
}

/* A retired stream is closed once its last watch is gone. */
static void maybe_close_retired(watch_state *st, elector_stream *s)
{
    if (s && s != st->cur && !stream_in_use(st, s)) {
        pending_drop_stream(st, s);
        elector_stream_close(s);
    }
}

static void stream_ended(watch_state *st, elector_stream *s, int err)
{
    if (st->cur == s) st->cur = NULL;
    pending_drop_stream(st, s);
    elector_stream_close(s);
    elector__hold(&st->fanout);
    for (elector_watch *w = st->list; w; w = w->next) {
        if (w->s != s || w->dead || w->canceled) continue;
        w->dead = true;
        w->s = NULL;
        if (call_watch(w, err, NULL)) break;
    }
    elector__unhold(&st->fanout);
    if (!elector__held(&st->fanout)) purge_canceled(st);
}

/* Sends w's create request on the current stream, opening one if needed. */
static int send_create(elector_etcd *e, watch_state *st, elector_watch *w)
{
    if (!st->cur) {
        elector_call_opts o = {.require_leader = 1};
        st->cur = elector_etcd_stream_open(e, ELECTOR_RPC_WATCH, &o, on_msg, st);
        if (!st->cur) return elector__etcd_err(e);
    }
    Etcdserverpb__WatchCreateRequest *cr =
        etcdserverpb__watch_create_request__unpack(NULL, w->create_len, w->create);
    if (!cr) return ELECTOR_ENOMEM;
    cr->watch_id = w->id;
    Etcdserverpb__WatchRequest req = ETCDSERVERPB__WATCH_REQUEST__INIT;
    req.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
    req.create_request = cr;
    int rc = pending_push(st, st->cur, w->id);
    if (!rc) rc = elector_stream_send(st->cur, &req.base);
    etcdserverpb__watch_create_request__free_unpacked(cr, NULL);
    if (rc) return rc;
    w->s = st->cur;
    return 0;
}

/* ---------------------------------------------------------------- responses */

static int response_err(elector_etcd *e, const Etcdserverpb__WatchResponse *r, int64_t id)
{
    if (r->compact_revision) {
        elector__set_err(e, ELECTOR_ECOMPACTED,
                         "watch %lld: revision compacted, oldest available is %lld",
                         (long long)id, (long long)r->compact_revision);
        return ELECTOR_ECOMPACTED;
    }
    elector__set_err(
        e, ELECTOR_ECANCELED, "watch %lld canceled by etcd: %s", (long long)id,
        r->cancel_reason && *r->cancel_reason ? r->cancel_reason : "no reason");
    int mapped = elector__grpc_error(2, r->cancel_reason);
    return mapped == ELECTOR_EGRPC ? ELECTOR_ECANCELED : mapped;
}

/* A create refused because the stream's token expired: retire the stream and
 * send the create again on a fresh one. Returns false if that is not possible. */
static bool retry_on_fresh_stream(elector_etcd *e, watch_state *st, elector_watch *w)
{
    if (w->created || w->resent) return false;
    w->resent = true;
    elector_stream *old = w->s;
    if (st->cur == old) st->cur = NULL;
    elector__drop_token(e);
    if (send_create(e, st, w)) return false;
    maybe_close_retired(st, old);
    return true;
}

static void on_msg(elector_stream *s, int err, const ProtobufCMessage *m, void *ud)
{
    watch_state *st = ud;
    elector_etcd *e = elector_stream_client(s);
    if (err) {
        stream_ended(st, s, err);
        return;
    }
    const Etcdserverpb__WatchResponse *r = (const void *)m;
    int64_t id = r->created ? pending_settle(st, s, r->watch_id) : r->watch_id;
    elector_watch *w = find_watch(st, id);
    if (!w || w->s != s || w->dead || w->canceled) return;
    if (r->canceled) {
        int rc = response_err(e, r, w->id);
        if (rc == ELECTOR_ETOKEN && retry_on_fresh_stream(e, st, w)) return;
        w->dead = true;
        w->s = NULL;
        call_watch(w, rc, r);
        maybe_close_retired(st, s);
        return;
    }
    if (r->created && !w->created) {
        w->created = true;
        free(w->create);
        w->create = NULL;
    }
    call_watch(w, 0, r);
}

/* ---------------------------------------------------------------- public */

elector_watch *elector_etcd_watch(elector_etcd *e,
                                  const Etcdserverpb__WatchCreateRequest *in,
                                  elector_watch_cb cb, void *ud)
{
    watch_state *st = e && cb && in ? state(e) : NULL;
    if (!st) {
        if (e)
            elector__set_err(e, cb && in ? ELECTOR_ENOMEM : ELECTOR_EINVAL, "watch: %s",
                             cb && in ? "out of memory" : "bad arguments");
        return NULL;
    }
    elector_watch *w = calloc(1, sizeof(*w));
    if (w) {
        w->create_len = protobuf_c_message_get_packed_size(&in->base);
        w->create = malloc(w->create_len ? w->create_len : 1);
    }
    if (!w || !w->create) {
        if (w) watch_free(w);
        elector__set_err(e, ELECTOR_ENOMEM, "out of memory");
        return NULL;
    }
    protobuf_c_message_pack(&in->base, w->create);
    if (!tab_reserve(st)) {
        watch_free(w);
        elector__set_err(e, ELECTOR_ENOMEM, "out of memory");
        return NULL;
    }
    w->id = ++st->next_id;
    w->etcd = e;
    w->cb = cb;
    w->ud = ud;
    int rc = send_create(e, st, w);
    if (rc) {
        watch_free(w);
        elector__set_err(e, rc, "watch: cannot send create request");
        return NULL;
    }
    link_watch(st, w);
    return w;
}

void elector_watch_cancel(elector_watch *w)
{
    if (!w) return;
    watch_state *st = (watch_state *)elector__ext_find(w->etcd, &kind);
    elector_stream *s = w->s;
    if (!w->dead && s) {
        Etcdserverpb__WatchCancelRequest cr = ETCDSERVERPB__WATCH_CANCEL_REQUEST__INIT;
        cr.watch_id = w->id;
        Etcdserverpb__WatchRequest req = ETCDSERVERPB__WATCH_REQUEST__INIT;
        req.request_union_case =
            ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CANCEL_REQUEST;
        req.cancel_request = &cr;
        elector_stream_send(s, &req.base);
    }
    w->dead = true;
    w->canceled = true;
    w->s = NULL;
    maybe_close_retired(st, s);
    if (!elector__held(&st->fanout)) {
        /* Not during a fan-out over the list: it goes now. */
        unlink_watch(st, w);
        watch_free(w);
    }
}

enum elector__watch_next elector__watch_next(int err)
{
    if (err == ELECTOR_EPROTO) return ELECTOR__WATCH_GIVE_UP;
    return err == ELECTOR_ECOMPACTED ? ELECTOR__WATCH_REREAD : ELECTOR__WATCH_RETRY;
}

int64_t elector_watch_id(const elector_watch *w)
{
    return w->id;
}
