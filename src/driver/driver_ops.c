/* SPDX-License-Identifier: MIT */
/* The driver's guarded writes, leader query and observers: jobs on the loop
 * thread (driver.c), results and events to the callback thread (driver_cb.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "driver_private.h"

/* ---------------------------------------------------------------- guarded writes */

/* What a guarded write's answer goes to: a user callback (async) or a waiter
 * (sync; abandoned at its timeout, then freed by whoever comes last). */
struct gctx {
    elector_driver_election *el;
    elector_driver_guarded_cb cb;
    void *ud;
    bool sync, done, abandoned;
    int err;
};

static void guarded_core_cb(elector_election *ce, int err, void *ud)
{
    (void)ce;
    struct gctx *g = ud;
    elector_driver *d = g->el->h.d;
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

static void guarded_job(elector_driver *d, struct job *j)
{
    struct gctx *g = j->b;
    elector_driver_election *el = g->el;
    if (!el->core) {
        j->rc = ELECTOR_ECLOSED;
        return;
    }
    pthread_mutex_lock(&d->mu);
    el->h.refs++; /* until the answer */
    pthread_mutex_unlock(&d->mu);
    if (j->a)
        j->rc =
            elector_guarded_put(el->core, j->p1, j->n1, j->p2, j->n2, guarded_core_cb, g);
    else
        j->rc = elector_guarded_delete(el->core, j->p1, j->n1, guarded_core_cb, g);
    if (j->rc) {
        pthread_mutex_lock(&d->mu);
        elector__drv_h_unref(&el->h);
        pthread_mutex_unlock(&d->mu);
    }
}

static int guarded(elector_driver_election *el, bool put, const void *key, size_t klen,
                   const void *value, size_t vlen, elector_driver_guarded_cb cb, void *ud,
                   bool sync, int64_t timeout_ms)
{
    if (!el || (!sync && !cb)) return ELECTOR_EINVAL;
    elector_driver *d = el->h.d;
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
        int64_t end = end_of(timeout_ms);
        while (!g->done && !d->stop && !past(end))
            cv_wait(d, &d->cv, end);
        if (g->done) {
            rc = g->err;
            free(g);
        } else {
            rc = d->stop ? ELECTOR_ECLOSED : ELECTOR_ETIMEDOUT;
            g->abandoned = true;
        }
    }
    elector__drv_leave_h(d, &el->h);
    return rc;
}

int elector_driver_guarded_put(elector_driver_election *el, const void *key,
                               size_t key_len, const void *value, size_t value_len,
                               elector_driver_guarded_cb cb, void *ud)
{
    return guarded(el, true, key, key_len, value, value_len, cb, ud, false, 0);
}

int elector_driver_guarded_delete(elector_driver_election *el, const void *key,
                                  size_t key_len, elector_driver_guarded_cb cb, void *ud)
{
    return guarded(el, false, key, key_len, NULL, 0, cb, ud, false, 0);
}

int elector_driver_guarded_put_sync(elector_driver_election *el, const void *key,
                                    size_t key_len, const void *value, size_t value_len,
                                    int64_t timeout_ms)
{
    return guarded(el, true, key, key_len, value, value_len, NULL, NULL, true,
                   timeout_ms);
}

int elector_driver_guarded_delete_sync(elector_driver_election *el, const void *key,
                                       size_t key_len, int64_t timeout_ms)
{
    return guarded(el, false, key, key_len, NULL, 0, NULL, NULL, true, timeout_ms);
}

/* ---------------------------------------------------------------- leader, observe */

/* The leader read, without blocking the loop thread: the Range of
 * elector_leader_sync() (NAME/ sorted by create revision, limit 1) as an
 * asynchronous call. The waiter's state is on the heap: abandoned when the
 * driver stops, freed by the answer (the client's free answers it with
 * ECANCELED). */
struct lctx {
    elector_driver *d;
    bool done, abandoned;
    int rc;
    elector_leader_info info;
    elector_driver_leader_cb cb; /* the asynchronous form's */
    void *ud;
    char *detail; /* the asynchronous form's: the failure's text, or NULL */
};

/* The asynchronous form's answer, on the callback thread. */
static void leader_deliver(elector_driver *d, void *ud)
{
    struct lctx *l = ud;
    bool filled = l->rc == 0 || l->rc == ELECTOR_EBLOCKED;
    d->cb_detail = l->detail;
    l->cb(d, l->rc, filled ? &l->info : NULL, l->ud);
    d->cb_detail = NULL;
    elector_leader_free(&l->info);
    free(l->detail);
    free(l);
}

static void leader_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e;
    struct lctx *l = ud;
    elector_leader_info info;
    memset(&info, 0, sizeof(info));
    int rc = err;
    if (!rc) {
        const Etcdserverpb__RangeResponse *r = (const void *)m;
        info.revision = r->header ? r->header->revision : 0;
        if (r->n_kvs == 0) {
            rc = 1;
        } else {
            const Mvccpb__KeyValue *kv = r->kvs[0];
            if (elector__drv_copy_bytes(&info.key, &info.key_len, kv->key.data,
                                        kv->key.len) ||
                elector__drv_copy_bytes(&info.value, &info.value_len, kv->value.data,
                                        kv->value.len))
                rc = ELECTOR_ENOMEM;
            info.token = kv->create_revision;
            info.lease = kv->lease;
        }
        if (rc < 0) elector_leader_free(&info);
        /* as elector_leader_sync(): a key without a lease is no leader */
        if (rc == 0 && !info.lease) rc = ELECTOR_EBLOCKED;
    }
    elector_driver *d = l->d;
    if (l->cb) {
        l->rc = rc;
        l->info = info;
        l->detail = elector__drv_err_detail(d, err);
        if (!elector__drv_queue_call(d, leader_deliver, l)) {
            fprintf(stderr,
                    "elector driver: out of memory, a leader read's answer is lost\n");
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

static void leader_job(elector_driver *d, struct job *j)
{
    const char *name = j->p1;
    size_t n = strlen(name);
    uint8_t *key = malloc(2 * (n + 1));
    if (!key) {
        j->rc = ELECTOR_ENOMEM;
        return;
    }
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
    elector_call_opts opts = {.timeout_ms = (int64_t)j->n1};
    /* The request is serialized here: key may go at once. */
    j->rc =
        elector_etcd_call(d->etcd, ELECTOR_RPC_RANGE, &rr.base, &opts, leader_done, j->a);
    free(key);
}

/* Sends one leader read to the loop. With info, waits for the answer and
 * copies it there; without, the answer goes to cb on the callback thread. */
static int leader_send(elector_driver *d, const char *name, int64_t timeout_ms,
                       elector_driver_leader_cb cb, void *ud, elector_leader_info *info)
{
    if (!name || !*name || (!info && !cb)) return ELECTOR_EINVAL;
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
    /* The call's own deadline ends it; 0: the client's request timeout. */
    struct job j = {.fn = leader_job,
                    .a = l,
                    .p1 = name,
                    .n1 = (size_t)(timeout_ms < 0 ? 0 : timeout_ms)};
    rc = elector__drv_run_job(d, &j);
    if (rc) {
        free(l); /* not sent: no answer will come */
    } else if (info) {
        while (!l->done && !d->stop)
            pthread_cond_wait(&d->cv, &d->mu);
        if (l->done) {
            rc = l->rc;
            *info = l->info;
            free(l);
        } else {
            rc = ELECTOR_ECLOSED;
            l->abandoned = true;
        }
    }
    elector__drv_leave(d);
    return rc;
}

int elector_driver_leader_sync(elector_driver *d, const char *name, int64_t timeout_ms,
                               elector_leader_info *info)
{
    if (!info) return ELECTOR_EINVAL;
    memset(info, 0, sizeof(*info));
    return leader_send(d, name, timeout_ms, NULL, NULL, info);
}

int elector_driver_leader(elector_driver *d, const char *name, int64_t timeout_ms,
                          elector_driver_leader_cb cb, void *ud)
{
    return leader_send(d, name, timeout_ms, cb, ud, NULL);
}

static void observe_cb(elector_observer *co, const elector_event *ev, void *ud)
{
    (void)co;
    elector_driver_observer *o = ud;
    elector__drv_queue_event(o->h.d, &o->h, ev);
}

static void observe_job(elector_driver *d, struct job *j)
{
    elector_driver_observer *o = j->a;
    o->core = elector_observe(d->etcd, o->name, observe_cb, o);
    if (!o->core) j->rc = ELECTOR_ENOMEM;
}

elector_driver_observer *elector_driver_observe(elector_driver *d, const char *name,
                                                elector_driver_observe_cb cb, void *ud)
{
    if (!name || !*name) return NULL;
    if (elector__drv_enter(d)) return NULL;
    elector_driver_observer *o = calloc(1, sizeof(*o));
    char *n = strdup(name);
    if (!o || !n) {
        free(o);
        free(n);
        elector__drv_leave(d);
        return NULL;
    }
    o->h.d = d;
    o->h.kind = H_OBSERVER;
    o->h.refs = 1;
    o->name = n;
    o->cb = cb;
    o->ud = ud;
    struct job j = {.fn = observe_job, .a = o};
    if (elector__drv_run_job(d, &j)) {
        free(n);
        free(o);
        o = NULL;
    } else {
        elector__drv_h_attach(d, &o->h);
    }
    elector__drv_leave(d);
    return o;
}

static void observer_free_job(elector_driver *d, struct job *j)
{
    elector_driver_observer *o = j->a;
    elector_observer *co = o->core;
    o->core = NULL;
    if (co) elector_observer_free(co);
    pthread_mutex_lock(&d->mu);
    elector__drv_h_detach(&o->h);
    pthread_mutex_unlock(&d->mu);
}

void elector_driver_observer_free(elector_driver_observer *o)
{
    if (!o) return;
    elector_driver *d = o->h.d;
    if (forked(d)) return;
    pthread_mutex_lock(&d->mu);
    bool mine = !o->h.closed; /* else the driver's shutdown took it */
    o->h.closed = true;
    elector__drv_quiesce(d, &o->h);
    if (!d->stop) {
        d->calls++;
        struct job j = {.fn = observer_free_job, .a = o};
        elector__drv_run_job(d, &j);
        d->calls--;
        if (d->calls == 0) pthread_cond_broadcast(&d->cv);
    }
    if (mine) elector__drv_h_unref(&o->h);
    pthread_mutex_unlock(&d->mu);
}
