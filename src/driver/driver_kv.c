/* SPDX-License-Identifier: MIT */
/* The driver's plain key operations: jobs on the loop thread (driver.c), the
 * answer waited for by the calling thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "driver_private.h"

/* ---------------------------------------------------------------- keys */

/* Plain key operations (put, put if absent, get, delete; by key or by prefix)
 * as asynchronous calls on the loop thread, with the leader read's waiting
 * scheme: the waiter's state is on the heap, abandoned when the driver stops,
 * freed by the answer. */
enum { KV_PUT, KV_PUT_IF_ABSENT, KV_GET, KV_GET_PREFIX, KV_DELETE, KV_DELETE_PREFIX };

struct kctx {
    elector_driver *d;
    bool done, abandoned;
    int rc;
    int op;
    int64_t lease, timeout_ms;
    elector_driver_kv *kvs;
    size_t n;
    int64_t deleted;
    elector_driver_kv_cb cb; /* the asynchronous forms' */
    void *ud;
};

void elector_driver_kvs_free(elector_driver_kv *kvs, size_t n)
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
        elector_driver_kv *o = &k->kvs[i];
        const Mvccpb__KeyValue *kv = src[i];
        if (elector__drv_copy_bytes(&o->key, &o->key_len, kv->key.data, kv->key.len) ||
            elector__drv_copy_bytes(&o->value, &o->value_len, kv->value.data,
                                    kv->value.len)) {
            elector_driver_kvs_free(k->kvs, i + 1);
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

/* The asynchronous forms' answer, on the callback thread. */
static void kv_deliver(elector_driver *d, void *ud)
{
    struct kctx *k = ud;
    k->cb(d, k->rc, k->rc == 0 ? k->kvs : NULL, k->rc == 0 ? k->n : 0, k->deleted, k->ud);
    elector_driver_kvs_free(k->kvs, k->n);
    free(k);
}

static void kv_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e;
    struct kctx *k = ud;
    int rc = err;
    if (!rc) {
        switch (k->op) {
        case KV_PUT_IF_ABSENT:
            rc = ((const Etcdserverpb__TxnResponse *)(const void *)m)->succeeded ? 0 : 1;
            break;
        case KV_GET:
        case KV_GET_PREFIX: {
            const Etcdserverpb__RangeResponse *r = (const void *)m;
            rc = copy_kvs(k, r->kvs, r->n_kvs);
            break;
        }
        case KV_DELETE:
        case KV_DELETE_PREFIX:
            k->deleted =
                ((const Etcdserverpb__DeleteRangeResponse *)(const void *)m)->deleted;
            break;
        default:
            break;
        }
    }
    elector_driver *d = k->d;
    if (k->cb) {
        k->rc = rc;
        if (!elector__drv_queue_call(d, kv_deliver, k)) {
            fprintf(stderr, "elector driver: out of memory, a key operation's answer is "
                            "lost\n");
            elector_driver_kvs_free(k->kvs, k->n);
            free(k);
        }
        return;
    }
    pthread_mutex_lock(&d->mu);
    if (k->abandoned) {
        elector_driver_kvs_free(k->kvs, k->n);
        free(k);
    } else {
        k->rc = rc;
        k->done = true;
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
}

/* Txn: if CreateRevision(key) == 0, the put. */
static int put_if_absent(elector_driver *d, struct kctx *k, Etcdserverpb__PutRequest *put,
                         const elector_call_opts *opts)
{
    Etcdserverpb__Compare c, *cs[1] = {&c};
    etcdserverpb__compare__init(&c);
    c.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
    c.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
    c.key = put->key;
    c.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
    c.create_revision = 0;
    Etcdserverpb__RequestOp op, *ops[1] = {&op};
    etcdserverpb__request_op__init(&op);
    op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    op.request_put = put;
    Etcdserverpb__TxnRequest t;
    etcdserverpb__txn_request__init(&t);
    t.n_compare = 1;
    t.compare = cs;
    t.n_success = 1;
    t.success = ops;
    return elector_etcd_call(d->etcd, ELECTOR_RPC_TXN, &t.base, opts, kv_done, k);
}

static void kv_job(elector_driver *d, struct job *j)
{
    struct kctx *k = j->a;
    size_t klen = j->n1;
    uint8_t *end = malloc(klen ? klen : 1);
    if (!end) {
        j->rc = ELECTOR_ENOMEM;
        return;
    }
    ProtobufCBinaryData key = {.data = (uint8_t *)j->p1, .len = klen};
    ProtobufCBinaryData range_end = {.data = NULL, .len = 0};
    if (k->op == KV_GET_PREFIX || k->op == KV_DELETE_PREFIX) {
        range_end.data = end;
        range_end.len = elector_prefix_end(key.data, klen, end);
    }
    elector_call_opts opts = {.timeout_ms = k->timeout_ms};
    Etcdserverpb__PutRequest put;
    etcdserverpb__put_request__init(&put);
    put.key = key;
    put.value.data = (uint8_t *)j->p2;
    put.value.len = j->n2;
    put.lease = k->lease;
    /* Requests are serialized by the call: they may go on return. */
    switch (k->op) {
    case KV_PUT:
        j->rc = elector_etcd_call(d->etcd, ELECTOR_RPC_PUT, &put.base, &opts, kv_done, k);
        break;
    case KV_PUT_IF_ABSENT:
        j->rc = put_if_absent(d, k, &put, &opts);
        break;
    case KV_GET:
    case KV_GET_PREFIX: {
        Etcdserverpb__RangeRequest rr;
        etcdserverpb__range_request__init(&rr);
        rr.key = key;
        rr.range_end = range_end;
        rr.sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND;
        rr.sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__KEY;
        j->rc =
            elector_etcd_call(d->etcd, ELECTOR_RPC_RANGE, &rr.base, &opts, kv_done, k);
        break;
    }
    default: {
        Etcdserverpb__DeleteRangeRequest dr;
        etcdserverpb__delete_range_request__init(&dr);
        dr.key = key;
        dr.range_end = range_end;
        j->rc = elector_etcd_call(d->etcd, ELECTOR_RPC_DELETE_RANGE, &dr.base, &opts,
                                  kv_done, k);
        break;
    }
    }
    free(end);
}

/* Sends one KV operation to the loop. With out, waits for the answer and
 * copies it there (the synchronous forms); without, the answer goes to cb on
 * the callback thread. */
static int kv_send(elector_driver *d, int op, const void *key, size_t key_len,
                   const void *value, size_t value_len, int64_t lease, int64_t timeout_ms,
                   elector_driver_kv_cb cb, void *ud, struct kctx *out)
{
    if (!key || key_len == 0 || (value_len && !value) || lease < 0 || (!out && !cb))
        return ELECTOR_EINVAL;
    int rc = elector__drv_enter(d);
    if (rc) return rc;
    struct kctx *k = calloc(1, sizeof(*k));
    if (!k) {
        elector__drv_leave(d);
        return ELECTOR_ENOMEM;
    }
    k->d = d;
    k->op = op;
    k->lease = lease;
    k->timeout_ms = timeout_ms < 0 ? 0 : timeout_ms; /* 0: the request timeout */
    k->cb = cb;
    k->ud = ud;
    struct job j = {
        .fn = kv_job, .a = k, .p1 = key, .n1 = key_len, .p2 = value, .n2 = value_len};
    rc = elector__drv_run_job(d, &j);
    if (rc) {
        free(k); /* not sent: no answer will come */
    } else if (out) {
        while (!k->done && !d->stop)
            pthread_cond_wait(&d->cv, &d->mu);
        if (k->done) {
            rc = k->rc;
            *out = *k;
            free(k);
        } else {
            rc = ELECTOR_ECLOSED;
            k->abandoned = true;
        }
    }
    elector__drv_leave(d);
    return rc;
}

static int kv_start(elector_driver *d, int op, const void *key, size_t key_len,
                    const void *value, size_t value_len, int64_t lease,
                    int64_t timeout_ms, elector_driver_kv_cb cb, void *ud)
{
    return kv_send(d, op, key, key_len, value, value_len, lease, timeout_ms, cb, ud,
                   NULL);
}

int elector_driver_put(elector_driver *d, const void *key, size_t key_len,
                       const void *value, size_t value_len, int64_t lease, unsigned flags,
                       int64_t timeout_ms, elector_driver_kv_cb cb, void *ud)
{
    if (flags & ~(unsigned)ELECTOR_DRIVER_PUT_IF_ABSENT) return ELECTOR_EINVAL;
    return kv_start(d, (flags & ELECTOR_DRIVER_PUT_IF_ABSENT) ? KV_PUT_IF_ABSENT : KV_PUT,
                    key, key_len, value, value_len, lease, timeout_ms, cb, ud);
}

int elector_driver_get(elector_driver *d, const void *key, size_t key_len, bool prefix,
                       int64_t timeout_ms, elector_driver_kv_cb cb, void *ud)
{
    return kv_start(d, prefix ? KV_GET_PREFIX : KV_GET, key, key_len, NULL, 0, 0,
                    timeout_ms, cb, ud);
}

int elector_driver_delete(elector_driver *d, const void *key, size_t key_len, bool prefix,
                          int64_t timeout_ms, elector_driver_kv_cb cb, void *ud)
{
    return kv_start(d, prefix ? KV_DELETE_PREFIX : KV_DELETE, key, key_len, NULL, 0, 0,
                    timeout_ms, cb, ud);
}

static int kv_op(elector_driver *d, int op, const void *key, size_t key_len,
                 const void *value, size_t value_len, int64_t lease, int64_t timeout_ms,
                 struct kctx *out)
{
    return kv_send(d, op, key, key_len, value, value_len, lease, timeout_ms, NULL, NULL,
                   out);
}

int elector_driver_put_sync(elector_driver *d, const void *key, size_t key_len,
                            const void *value, size_t value_len, int64_t lease,
                            unsigned flags, int64_t timeout_ms)
{
    if (flags & ~(unsigned)ELECTOR_DRIVER_PUT_IF_ABSENT) return ELECTOR_EINVAL;
    struct kctx k;
    return kv_op(d, (flags & ELECTOR_DRIVER_PUT_IF_ABSENT) ? KV_PUT_IF_ABSENT : KV_PUT,
                 key, key_len, value, value_len, lease, timeout_ms, &k);
}

int elector_driver_get_sync(elector_driver *d, const void *key, size_t key_len,
                            bool prefix, int64_t timeout_ms, elector_driver_kv **kvs,
                            size_t *n)
{
    if (!kvs || !n) return ELECTOR_EINVAL;
    *kvs = NULL;
    *n = 0;
    struct kctx k = {0};
    int rc = kv_op(d, prefix ? KV_GET_PREFIX : KV_GET, key, key_len, NULL, 0, 0,
                   timeout_ms, &k);
    if (rc) {
        elector_driver_kvs_free(k.kvs, k.n);
        return rc;
    }
    *kvs = k.kvs;
    *n = k.n;
    return 0;
}

int elector_driver_delete_sync(elector_driver *d, const void *key, size_t key_len,
                               bool prefix, int64_t timeout_ms, int64_t *deleted)
{
    struct kctx k = {0};
    int rc = kv_op(d, prefix ? KV_DELETE_PREFIX : KV_DELETE, key, key_len, NULL, 0, 0,
                   timeout_ms, &k);
    if (!rc && deleted) *deleted = k.deleted;
    return rc;
}

/* ---------------------------------------------------------------- revoke */

/* A LeaseRevoke of its own, answered on the callback thread: the answer (OK,
 * or etcd no longer knows the lease) tells the caller the lease is gone. */
struct rctx {
    elector_driver *d;
    int rc;
    elector_driver_revoke_cb cb;
    void *ud;
};

static void revoke_deliver(elector_driver *d, void *ud)
{
    struct rctx *r = ud;
    r->cb(d, r->rc, r->ud);
    free(r);
}

static void revoke_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e;
    (void)m;
    struct rctx *r = ud;
    r->rc = err == ELECTOR_ELEASE ? 0 : err;
    if (!elector__drv_queue_call(r->d, revoke_deliver, r)) {
        fprintf(stderr, "elector driver: out of memory, a revoke's answer is lost\n");
        free(r);
    }
}

static void revoke_job(elector_driver *d, struct job *j)
{
    Etcdserverpb__LeaseRevokeRequest req = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
    req.id = (int64_t)j->n1;
    elector_call_opts opts = {.timeout_ms = (int64_t)j->n2, .require_leader = 1};
    j->rc = elector_etcd_call(d->etcd, ELECTOR_RPC_LEASE_REVOKE, &req.base, &opts,
                              revoke_done, j->a);
}

int elector_driver_revoke(elector_driver *d, int64_t lease, int64_t timeout_ms,
                          elector_driver_revoke_cb cb, void *ud)
{
    if (lease <= 0 || !cb) return ELECTOR_EINVAL;
    int rc = elector__drv_enter(d);
    if (rc) return rc;
    struct rctx *r = calloc(1, sizeof(*r));
    if (!r) {
        elector__drv_leave(d);
        return ELECTOR_ENOMEM;
    }
    r->d = d;
    r->cb = cb;
    r->ud = ud;
    struct job j = {.fn = revoke_job,
                    .a = r,
                    .n1 = (size_t)lease,
                    .n2 = (size_t)(timeout_ms < 0 ? 0 : timeout_ms)};
    rc = elector__drv_run_job(d, &j);
    if (rc) free(r); /* not sent: no answer will come */
    elector__drv_leave(d);
    return rc;
}
