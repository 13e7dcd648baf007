/* SPDX-License-Identifier: MIT */
/* Plain key operations and a lease's revoke (elector/etcd.h), this layer's
 * own in both modes: driven by the caller's loop, the calls are sent at once
 * and answered from its elector_etcd_process() (the _sync forms run it);
 * with own_thread, jobs on the loop thread (loop_thread.c), answered on the
 * callback thread or waited for by the calling thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "driver_private.h"
#include "etcd_internal.h"

/* ---------------------------------------------------------------- keys */

/* Plain key operations (put, put if absent, get, delete; by key or by prefix)
 * as asynchronous calls on the loop thread, with the leader read's waiting
 * scheme: the waiter's state is on the heap, abandoned when the driver stops,
 * freed by the answer. */
enum { KV_PUT, KV_PUT_IF_ABSENT, KV_GET, KV_GET_PREFIX, KV_DELETE, KV_DELETE_PREFIX };

struct kctx {
    elector__drv *d; /* NULL: the caller's loop */
    bool done, abandoned;
    int rc;
    int op;
    int64_t lease, timeout_ms;
    elector_kv *kvs;
    size_t n;
    int64_t deleted;
    elector_kv_cb cb; /* the asynchronous forms' */
    void *ud;
};

void elector_kvs_free(elector_kv *kvs, size_t n)
{
    if (!kvs) return;
    for (size_t i = 0; i < n; i++) {
        free(kvs[i].key);
        free(kvs[i].value);
    }
    free(kvs);
}

static int copy_kvs(struct kctx *k, Mvccpb__KeyValue *const *src, size_t n)
{
    k->kvs = calloc(n ? n : 1, sizeof(*k->kvs));
    if (!k->kvs) return ELECTOR_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        elector_kv *o = &k->kvs[i];
        const Mvccpb__KeyValue *kv = src[i];
        if (elector__drv_copy_bytes(&o->key, &o->key_len, kv->key.data, kv->key.len) ||
            elector__drv_copy_bytes(&o->value, &o->value_len, kv->value.data,
                                    kv->value.len)) {
            elector_kvs_free(k->kvs, i + 1);
            k->kvs = NULL;
            return ELECTOR_ENOMEM;
        }
        o->create_revision = kv->create_revision;
        o->mod_revision = kv->mod_revision;
        o->lease = kv->lease;
    }
    k->n = n;
    return 0;
}

/* The asynchronous forms' answer (the callback thread, or the caller's loop). */
static void kv_deliver(elector_etcd *e, void *ud)
{
    struct kctx *k = ud;
    k->cb(e, k->rc, k->rc == 0 ? k->kvs : NULL, k->rc == 0 ? k->n : 0, k->deleted, k->ud);
    elector_kvs_free(k->kvs, k->n);
    free(k);
}

static int kv_result(struct kctx *k, const ProtobufCMessage *m)
{
    switch (k->op) {
    case KV_PUT_IF_ABSENT:
        return ((const Etcdserverpb__TxnResponse *)(const void *)m)->succeeded ? 0 : 1;
    case KV_GET:
    case KV_GET_PREFIX: {
        const Etcdserverpb__RangeResponse *r = (const void *)m;
        return copy_kvs(k, r->kvs, r->n_kvs);
    }
    case KV_DELETE:
    case KV_DELETE_PREFIX:
        k->deleted =
            ((const Etcdserverpb__DeleteRangeResponse *)(const void *)m)->deleted;
        return 0;
    default:
        return 0;
    }
}

static void kv_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    struct kctx *k = ud;
    int rc = err ? err : kv_result(k, m);
    elector__drv *d = k->d;
    if (k->cb) {
        k->rc = rc;
        if (!elector__drv_answer(e, kv_deliver, k)) {
            fprintf(stderr, "elector: out of memory, a key operation's answer is lost\n");
            elector_kvs_free(k->kvs, k->n);
            free(k);
        }
        return;
    }
    if (d) pthread_mutex_lock(&d->mu);
    if (k->abandoned) {
        elector_kvs_free(k->kvs, k->n);
        free(k);
    } else {
        k->rc = rc;
        k->done = true;
        if (d) pthread_cond_broadcast(&d->cv);
    }
    if (d) pthread_mutex_unlock(&d->mu);
}

/* Txn: if CreateRevision(key) == 0, the put. */
static int put_if_absent(elector_etcd *e, struct kctx *k, Etcdserverpb__PutRequest *put,
                         const elector_call_opts *opts)
{
    elector__txn t;
    elector__cmp_create(&t.cmp, put->key.data, put->key.len, 0);
    elector__op_put(&t.op[0], &t.put, put->key.data, put->key.len, put->value.data,
                    put->value.len, put->lease);
    elector__txn_init(&t, 1);
    return elector_etcd_call(e, ELECTOR_RPC_TXN, &t.txn.base, opts, kv_done, k);
}

/* The bytes of one operation, as the caller gave them. */
struct kv_args {
    const void *key, *value;
    size_t key_len, value_len;
};

/* Sends k's operation on client e (the thread that drives it). */
static int kv_call(elector_etcd *e, struct kctx *k, const struct kv_args *a)
{
    uint8_t *end = malloc(a->key_len ? a->key_len : 1);
    if (!end) return ELECTOR_ENOMEM;
    ProtobufCBinaryData key = {.data = (uint8_t *)a->key, .len = a->key_len};
    ProtobufCBinaryData range_end = {.data = NULL, .len = 0};
    if (k->op == KV_GET_PREFIX || k->op == KV_DELETE_PREFIX) {
        range_end.data = end;
        range_end.len = elector_prefix_end(key.data, a->key_len, end);
    }
    elector_call_opts opts = {.timeout_ms = k->timeout_ms};
    Etcdserverpb__PutRequest put;
    etcdserverpb__put_request__init(&put);
    put.key = key;
    put.value.data = (uint8_t *)a->value;
    put.value.len = a->value_len;
    put.lease = k->lease;
    Etcdserverpb__RangeRequest rr;
    etcdserverpb__range_request__init(&rr);
    rr.key = key;
    rr.range_end = range_end;
    rr.sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND;
    rr.sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__KEY;
    Etcdserverpb__DeleteRangeRequest dr;
    etcdserverpb__delete_range_request__init(&dr);
    dr.key = key;
    dr.range_end = range_end;
    /* Requests are serialized by the call: they may go on return. */
    int rc;
    if (k->op == KV_PUT)
        rc = elector_etcd_call(e, ELECTOR_RPC_PUT, &put.base, &opts, kv_done, k);
    else if (k->op == KV_PUT_IF_ABSENT)
        rc = put_if_absent(e, k, &put, &opts);
    else if (k->op == KV_GET || k->op == KV_GET_PREFIX)
        rc = elector_etcd_call(e, ELECTOR_RPC_RANGE, &rr.base, &opts, kv_done, k);
    else
        rc = elector_etcd_call(e, ELECTOR_RPC_DELETE_RANGE, &dr.base, &opts, kv_done, k);
    free(end);
    return rc;
}

static void kv_job(elector__drv *d, struct job *j)
{
    j->rc = kv_call(d->etcd, j->a, j->b);
}

static bool kv_over(const void *arg)
{
    const struct kctx *k = arg;
    return k->done;
}

/* Waits for k's answer (own_thread: on d->cv, mu held; the caller's loop:
 * running it). Returns its rc, or ELECTOR_ECLOSED when the client stops
 * first (k is abandoned then, freed by the answer). */
static int kv_wait(elector_etcd *e, elector__drv *d, struct kctx *k)
{
    if (d) {
        elector__drv_wait(d, kv_over, k, -1);
    } else {
        /* The call ends by its own deadline; a client freed by a callback
         * meanwhile answers it (ECANCELED) before it goes. */
        while (!k->done)
            if (elector__etcd_run_once(e, -1) == ELECTOR_ECLOSED) break;
    }
    if (!k->done) {
        k->abandoned = true;
        return ELECTOR_ECLOSED;
    }
    return k->rc;
}

/* Sends one KV operation. With out, waits for the answer and copies it there
 * (the synchronous forms); without, the answer goes to cb. */
static int kv_send(elector_etcd *e, int op, const struct kv_args *a, int64_t lease,
                   int64_t timeout_ms, elector_kv_cb cb, void *ud, struct kctx *out)
{
    if (!e || !a->key || a->key_len == 0 || (a->value_len && !a->value) || lease < 0 ||
        (!out && !cb))
        return ELECTOR_EINVAL;
    elector__drv *d = remote_drv(e);
    int rc = d ? elector__drv_enter(d) : 0;
    if (rc) return rc;
    struct kctx *k = calloc(1, sizeof(*k));
    if (!k) {
        if (d) elector__drv_leave(d);
        return ELECTOR_ENOMEM;
    }
    k->d = d;
    k->op = op;
    k->lease = lease;
    k->timeout_ms = timeout_ms < 0 ? 0 : timeout_ms; /* 0: the request timeout */
    k->cb = cb;
    k->ud = ud;
    struct job j = {.fn = kv_job, .a = k, .b = (void *)a};
    rc = d ? elector__drv_run_job(d, &j) : kv_call(e, k, a);
    if (rc) {
        free(k); /* not sent: no answer will come */
    } else if (out) {
        rc = kv_wait(e, d, k);
        if (k->done) {
            *out = *k;
            free(k);
        }
    }
    if (d) elector__drv_leave(d);
    return rc;
}

int elector_kv_put(elector_etcd *e, const void *key, size_t key_len, const void *value,
                   size_t value_len, int64_t lease, unsigned flags, int64_t timeout_ms,
                   elector_kv_cb cb, void *ud)
{
    if (flags & ~(unsigned)ELECTOR_KV_PUT_IF_ABSENT) return ELECTOR_EINVAL;
    struct kv_args a = {key, value, key_len, value_len};
    return kv_send(e, (flags & ELECTOR_KV_PUT_IF_ABSENT) ? KV_PUT_IF_ABSENT : KV_PUT, &a,
                   lease, timeout_ms, cb, ud, NULL);
}

int elector_kv_get(elector_etcd *e, const void *key, size_t key_len, bool prefix,
                   int64_t timeout_ms, elector_kv_cb cb, void *ud)
{
    struct kv_args a = {key, NULL, key_len, 0};
    return kv_send(e, prefix ? KV_GET_PREFIX : KV_GET, &a, 0, timeout_ms, cb, ud, NULL);
}

int elector_kv_delete(elector_etcd *e, const void *key, size_t key_len, bool prefix,
                      int64_t timeout_ms, elector_kv_cb cb, void *ud)
{
    struct kv_args a = {key, NULL, key_len, 0};
    return kv_send(e, prefix ? KV_DELETE_PREFIX : KV_DELETE, &a, 0, timeout_ms, cb, ud,
                   NULL);
}

int elector_kv_put_sync(elector_etcd *e, const void *key, size_t key_len,
                        const void *value, size_t value_len, int64_t lease,
                        unsigned flags, int64_t timeout_ms)
{
    if (flags & ~(unsigned)ELECTOR_KV_PUT_IF_ABSENT) return ELECTOR_EINVAL;
    struct kv_args a = {key, value, key_len, value_len};
    struct kctx k;
    return kv_send(e, (flags & ELECTOR_KV_PUT_IF_ABSENT) ? KV_PUT_IF_ABSENT : KV_PUT, &a,
                   lease, timeout_ms, NULL, NULL, &k);
}

int elector_kv_get_sync(elector_etcd *e, const void *key, size_t key_len, bool prefix,
                        int64_t timeout_ms, elector_kv **kvs, size_t *n)
{
    if (!kvs || !n) return ELECTOR_EINVAL;
    *kvs = NULL;
    *n = 0;
    struct kv_args a = {key, NULL, key_len, 0};
    struct kctx k = {0};
    int rc =
        kv_send(e, prefix ? KV_GET_PREFIX : KV_GET, &a, 0, timeout_ms, NULL, NULL, &k);
    if (rc) {
        elector_kvs_free(k.kvs, k.n);
        return rc;
    }
    *kvs = k.kvs;
    *n = k.n;
    return 0;
}

int elector_kv_delete_sync(elector_etcd *e, const void *key, size_t key_len, bool prefix,
                           int64_t timeout_ms, int64_t *deleted)
{
    struct kv_args a = {key, NULL, key_len, 0};
    struct kctx k = {0};
    int rc = kv_send(e, prefix ? KV_DELETE_PREFIX : KV_DELETE, &a, 0, timeout_ms, NULL,
                     NULL, &k);
    if (!rc && deleted) *deleted = k.deleted;
    return rc;
}

/* ---------------------------------------------------------------- revoke */

/* A LeaseRevoke of its own: the answer (OK, or etcd no longer knows the
 * lease) tells the caller the lease is gone. */
struct rctx {
    int rc;
    elector_revoke_cb cb;
    void *ud;
};

static void revoke_deliver(elector_etcd *e, void *ud)
{
    struct rctx *r = ud;
    r->cb(e, r->rc, r->ud);
    free(r);
}

static void revoke_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)m;
    struct rctx *r = ud;
    r->rc = err == ELECTOR_ELEASE ? 0 : err;
    if (!elector__drv_answer(e, revoke_deliver, r)) {
        fprintf(stderr, "elector: out of memory, a revoke's answer is lost\n");
        free(r);
    }
}

static int revoke_call(elector_etcd *e, int64_t lease, int64_t timeout_ms, struct rctx *r)
{
    Etcdserverpb__LeaseRevokeRequest req = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
    req.id = lease;
    elector_call_opts opts = {.timeout_ms = timeout_ms < 0 ? 0 : timeout_ms,
                              .require_leader = 1};
    return elector_etcd_call(e, ELECTOR_RPC_LEASE_REVOKE, &req.base, &opts, revoke_done,
                             r);
}

static void revoke_job(elector__drv *d, struct job *j)
{
    j->rc = revoke_call(d->etcd, (int64_t)j->n1, (int64_t)j->n2, j->a);
}

int elector_lease_revoke(elector_etcd *e, int64_t lease, int64_t timeout_ms,
                         elector_revoke_cb cb, void *ud)
{
    if (!e || lease <= 0 || !cb) return ELECTOR_EINVAL;
    struct rctx *r = calloc(1, sizeof(*r));
    if (!r) return ELECTOR_ENOMEM;
    r->cb = cb;
    r->ud = ud;
    struct job j = {.fn = revoke_job,
                    .a = r,
                    .n1 = (size_t)lease,
                    .n2 = (size_t)(timeout_ms < 0 ? 0 : timeout_ms)};
    elector__drv *d = remote_drv(e);
    int rc = d ? elector__drv_call(d, &j) : revoke_call(e, lease, timeout_ms, r);
    if (rc) free(r); /* not sent: no answer will come */
    return rc;
}
