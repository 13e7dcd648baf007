/* SPDX-License-Identifier: MIT */
/* Guarded writes, the leader query and observers (elector/election.h): driven
 * by the caller's loop, the core's functions (src/election/); with
 * own_thread, jobs on the loop thread (loop_thread.c), results and events to the
 * callback thread (callback_thread.c). The asynchronous leader read is this
 * layer's own, in both modes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "driver_private.h"

/* ---------------------------------------------------------------- guarded writes */

/* What a guarded write's answer goes to: a user callback (async) or a waiter
 * (sync; abandoned at its timeout, then freed by whoever comes last). */
struct gctx {
    struct drv_election *el;
    elector_guarded_cb cb;
    void *ud;
    bool sync, done, abandoned;
    int err;
};

static void guarded_core_cb(elector_election *ce, int err, void *ud)
{
    (void)ce;
    struct gctx *g = ud;
    elector__drv *d = g->el->h.d;
    if (!g->sync) {
        struct item *it = calloc(1, sizeof(*it));
        pthread_mutex_lock(&d->mu);
        if (it) {
            it->kind = I_GUARDED;
            it->h = &g->el->h; /* its ref moves to the item */
            it->gcb = g->cb;
            it->gud = g->ud;
            it->err = err;
            it->detail = elector__drv_err_detail(d, err);
            *d->items_tail = it;
            d->items_tail = &it->next;
            pthread_cond_broadcast(&d->icv);
        } else {
            elector__drv_h_unref(&g->el->h);
        }
        pthread_mutex_unlock(&d->mu);
        if (!it)
            fprintf(stderr,
                    "elector driver: out of memory, a guarded write's answer is lost\n");
        free(g);
        return;
    }
    pthread_mutex_lock(&d->mu);
    elector__drv_h_unref(&g->el->h);
    if (g->abandoned) {
        free(g);
    } else {
        g->done = true;
        g->err = err;
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
}

static void guarded_job(elector__drv *d, struct job *j)
{
    struct gctx *g = j->b;
    struct drv_election *el = g->el;
    if (!el->core) {
        j->rc = ELECTOR_ECLOSED;
        return;
    }
    pthread_mutex_lock(&d->mu);
    el->h.refs++; /* until the answer */
    pthread_mutex_unlock(&d->mu);
    if (j->a)
        j->rc = elector__guarded_put(el->core, j->p1, j->n1, j->p2, j->n2,
                                     guarded_core_cb, g);
    else
        j->rc = elector__guarded_delete(el->core, j->p1, j->n1, guarded_core_cb, g);
    if (j->rc) {
        pthread_mutex_lock(&d->mu);
        elector__drv_h_unref(&el->h);
        pthread_mutex_unlock(&d->mu);
    }
}

static bool guarded_over(const void *arg)
{
    const struct gctx *g = arg;
    return g->done;
}

static int guarded(struct drv_election *el, bool put, const void *key, size_t klen,
                   const void *value, size_t vlen, elector_guarded_cb cb, void *ud,
                   bool sync, int64_t timeout_ms)
{
    if (!sync && !cb) return ELECTOR_EINVAL;
    elector__drv *d = el->h.d;
    int rc = elector__drv_enter_h(d, &el->h);
    if (rc) return rc;
    struct gctx *g = calloc(1, sizeof(*g));
    if (!g) {
        elector__drv_leave_h(d, &el->h);
        return ELECTOR_ENOMEM;
    }
    g->el = el;
    g->cb = cb;
    g->ud = ud;
    g->sync = sync;
    /* j.a marks a put (a put of an empty value has p2 NULL, n2 0). */
    struct job j = {.fn = guarded_job,
                    .a = put ? (void *)el : NULL,
                    .b = g,
                    .p1 = key,
                    .n1 = klen,
                    .p2 = value,
                    .n2 = vlen};
    rc = elector__drv_run_job(d, &j);
    if (rc) {
        free(g);
    } else if (sync) {
        rc = elector__drv_wait(d, guarded_over, g, end_of(timeout_ms));
        if (g->done) {
            rc = g->err;
            free(g);
        } else {
            g->abandoned = true;
        }
    }
    elector__drv_leave_h(d, &el->h);
    return rc;
}

int elector_guarded_put(elector_election *ce, const void *key, size_t key_len,
                        const void *value, size_t value_len, elector_guarded_cb cb,
                        void *ud)
{
    if (!ce) return ELECTOR_EINVAL;
    struct drv_election *el = drv_election_of(ce);
    if (!el) return elector__guarded_put(ce, key, key_len, value, value_len, cb, ud);
    return guarded(el, true, key, key_len, value, value_len, cb, ud, false, 0);
}

int elector_guarded_delete(elector_election *ce, const void *key, size_t key_len,
                           elector_guarded_cb cb, void *ud)
{
    if (!ce) return ELECTOR_EINVAL;
    struct drv_election *el = drv_election_of(ce);
    if (!el) return elector__guarded_delete(ce, key, key_len, cb, ud);
    return guarded(el, false, key, key_len, NULL, 0, cb, ud, false, 0);
}

int elector_guarded_put_sync(elector_election *ce, const void *key, size_t key_len,
                             const void *value, size_t value_len, int64_t timeout_ms)
{
    if (!ce) return ELECTOR_EINVAL;
    struct drv_election *el = drv_election_of(ce);
    if (!el)
        return elector__guarded_put_sync(ce, key, key_len, value, value_len, timeout_ms);
    return guarded(el, true, key, key_len, value, value_len, NULL, NULL, true,
                   timeout_ms);
}

int elector_guarded_delete_sync(elector_election *ce, const void *key, size_t key_len,
                                int64_t timeout_ms)
{
    if (!ce) return ELECTOR_EINVAL;
    struct drv_election *el = drv_election_of(ce);
    if (!el) return elector__guarded_delete_sync(ce, key, key_len, timeout_ms);
    return guarded(el, false, key, key_len, NULL, 0, NULL, NULL, true, timeout_ms);
}

/* In-tree: with own_thread, only on the loop thread (elector_etcd_exec()). */
int elector_guarded_txn(elector_election *ce, const Etcdserverpb__TxnRequest *txn,
                        elector_txn_cb cb, void *ud)
{
    if (!ce) return ELECTOR_EINVAL;
    struct drv_election *el = drv_election_of(ce);
    if (el && !on_loop(el->h.d)) return ELECTOR_EINVAL;
    return elector__guarded_txn(ce, txn, cb, ud);
}

/* ---------------------------------------------------------------- leader */

/* The leader read, without blocking the loop: the Range of
 * elector_leader_sync() (NAME/ sorted by create revision, limit 1) as an
 * asynchronous call. A waiter's state is on the heap: abandoned when the
 * client stops, freed by the answer (the client's free answers it with
 * ECANCELED). */
struct lctx {
    elector__drv *d; /* NULL: the caller's loop */
    bool done, abandoned;
    int rc;
    elector_leader_info info;
    elector_leader_cb cb; /* the asynchronous form's */
    void *ud;
    char *detail; /* own_thread, the asynchronous form's: the failure's text */
};

/* The asynchronous form's answer (the callback thread, or the caller's loop). */
static void leader_deliver(elector_etcd *e, void *ud)
{
    struct lctx *l = ud;
    bool filled = l->rc == 0 || l->rc == ELECTOR_EBLOCKED;
    if (l->d) l->d->cb_detail = l->detail;
    l->cb(e, l->rc, filled ? &l->info : NULL, l->ud);
    if (l->d) l->d->cb_detail = NULL;
    elector_leader_free(&l->info);
    free(l->detail);
    free(l);
}

static int leader_result(const ProtobufCMessage *m, elector_leader_info *info)
{
    const Etcdserverpb__RangeResponse *r = (const void *)m;
    info->revision = r->header ? r->header->revision : 0;
    if (r->n_kvs == 0) return 1;
    const Mvccpb__KeyValue *kv = r->kvs[0];
    if (elector__drv_copy_bytes(&info->key, &info->key_len, kv->key.data, kv->key.len) ||
        elector__drv_copy_bytes(&info->value, &info->value_len, kv->value.data,
                                kv->value.len)) {
        elector_leader_free(info);
        return ELECTOR_ENOMEM;
    }
    info->token = kv->create_revision;
    info->lease = kv->lease;
    /* as elector_leader_sync(): a key without a lease is no leader */
    return info->lease ? 0 : ELECTOR_EBLOCKED;
}

static void leader_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    struct lctx *l = ud;
    elector_leader_info info;
    memset(&info, 0, sizeof(info));
    int rc = err ? err : leader_result(m, &info);
    elector__drv *d = l->d;
    if (l->cb) {
        l->rc = rc;
        l->info = info;
        if (d) l->detail = elector__drv_err_detail(d, err);
        if (!elector__drv_answer(e, leader_deliver, l)) {
            fprintf(stderr, "elector: out of memory, a leader read's answer is lost\n");
            elector_leader_free(&l->info);
            free(l->detail);
            free(l);
        }
        return;
    }
    pthread_mutex_lock(&d->mu);
    if (l->abandoned) {
        elector_leader_free(&info);
        free(l);
    } else {
        l->rc = rc;
        l->info = info;
        l->done = true;
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
}

static int leader_call(elector_etcd *e, const char *name, int64_t timeout_ms,
                       struct lctx *l)
{
    size_t n = strlen(name);
    uint8_t *key = malloc(2 * (n + 1));
    if (!key) return ELECTOR_ENOMEM;
    memcpy(key, name, n);
    key[n] = '/';
    uint8_t *end = key + n + 1;
    Etcdserverpb__RangeRequest rr;
    etcdserverpb__range_request__init(&rr);
    rr.key.data = key;
    rr.key.len = n + 1;
    rr.range_end.data = end;
    rr.range_end.len = elector_prefix_end(key, n + 1, end);
    rr.sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND;
    rr.sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__CREATE;
    rr.limit = 1;
    /* The call's own deadline ends it; 0: the client's request timeout. */
    elector_call_opts opts = {.timeout_ms = timeout_ms < 0 ? 0 : timeout_ms};
    /* The request is serialized here: key may go at once. */
    int rc = elector_etcd_call(e, ELECTOR_RPC_RANGE, &rr.base, &opts, leader_done, l);
    free(key);
    return rc;
}

static void leader_job(elector__drv *d, struct job *j)
{
    j->rc = leader_call(d->etcd, j->p1, (int64_t)j->n1, j->a);
}

static bool leader_over(const void *arg)
{
    const struct lctx *l = arg;
    return l->done;
}

/* Sends one leader read to the loop thread. With info, waits for the answer
 * and copies it there; without, the answer goes to cb on the callback
 * thread. */
static int leader_send(elector__drv *d, const char *name, int64_t timeout_ms,
                       elector_leader_cb cb, void *ud, elector_leader_info *info)
{
    int rc = elector__drv_enter(d);
    if (rc) return rc;
    struct lctx *l = calloc(1, sizeof(*l));
    if (!l) {
        elector__drv_leave(d);
        return ELECTOR_ENOMEM;
    }
    l->d = d;
    l->cb = cb;
    l->ud = ud;
    struct job j = {.fn = leader_job,
                    .a = l,
                    .p1 = name,
                    .n1 = (size_t)(timeout_ms < 0 ? 0 : timeout_ms)};
    rc = elector__drv_run_job(d, &j);
    if (rc) {
        free(l); /* not sent: no answer will come */
    } else if (info) {
        rc = elector__drv_wait(d, leader_over, l, -1);
        if (l->done) {
            rc = l->rc;
            *info = l->info;
            free(l);
        } else {
            l->abandoned = true;
        }
    }
    elector__drv_leave(d);
    return rc;
}

int elector_leader_sync(elector_etcd *e, const char *name, int64_t timeout_ms,
                        elector_leader_info *info)
{
    if (!info) return ELECTOR_EINVAL;
    if (!e || !name || !*name) {
        memset(info, 0, sizeof(*info));
        return ELECTOR_EINVAL;
    }
    elector__drv *d = remote_drv(e);
    if (!d) return elector__leader_sync(e, name, timeout_ms, info);
    if (!info || !name || !*name) return ELECTOR_EINVAL;
    memset(info, 0, sizeof(*info));
    return leader_send(d, name, timeout_ms, NULL, NULL, info);
}

int elector_leader(elector_etcd *e, const char *name, int64_t timeout_ms,
                   elector_leader_cb cb, void *ud)
{
    if (!e || !name || !*name || !cb) return ELECTOR_EINVAL;
    elector__drv *d = remote_drv(e);
    if (d) return leader_send(d, name, timeout_ms, cb, ud, NULL);
    struct lctx *l = calloc(1, sizeof(*l));
    if (!l) return ELECTOR_ENOMEM;
    l->d = elector__drv_of(e); /* on the loop thread (exec): own_thread still */
    l->cb = cb;
    l->ud = ud;
    int rc = leader_call(e, name, timeout_ms, l);
    if (rc) free(l);
    return rc;
}

/* ---------------------------------------------------------------- observe */

static void observe_relay(elector_observer *co, const elector_event *ev, void *ud)
{
    (void)co;
    struct drv_observer *o = ud;
    elector__drv_queue_event(o->h.d, &o->h, I_EVENT, ev);
}

static void observe_job(elector__drv *d, struct job *j)
{
    struct drv_observer *o = j->a;
    o->core = elector__observe(d->etcd, j->p1, observe_relay, o);
    if (!o->core) {
        j->rc = ELECTOR_ENOMEM;
        return;
    }
    elector__observer_set_owner(o->core, o);
    elector__drv_h_attach_new(d, &o->h, o->core, j);
}

elector_observer *elector_observe(elector_etcd *e, const char *name,
                                  elector_observe_cb cb, void *ud)
{
    if (!e) return NULL;
    elector__drv *d = remote_drv(e);
    if (!d) return elector__observe(e, name, cb, ud);
    if (!name || !*name) return NULL;
    struct drv_observer *o = calloc(1, sizeof(*o));
    if (!o) return NULL;
    o->h = (struct dh){.d = d, .kind = H_OBSERVER, .refs = 1};
    o->cb = cb;
    o->ud = ud;
    struct job j = {.fn = observe_job, .a = o, .p1 = name};
    if (elector__drv_call(d, &j)) {
        free(o);
        return NULL;
    }
    return j.out;
}

static void observer_free_job(elector__drv *d, struct job *j)
{
    struct drv_observer *o = j->a;
    elector_observer *co = o->core;
    o->core = NULL;
    if (co) elector__observer_free(co);
    pthread_mutex_lock(&d->mu);
    elector__drv_h_detach(&o->h);
    pthread_mutex_unlock(&d->mu);
}

void elector_observer_free(elector_observer *co)
{
    struct drv_observer *o = drv_observer_of(co);
    if (!o) {
        elector__observer_free(co);
        return;
    }
    struct job j = {.fn = observer_free_job, .a = o};
    elector__drv_end_h(o->h.d, &o->h, &j);
}
