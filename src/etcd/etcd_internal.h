/* SPDX-License-Identifier: MIT */
/* What the etcd layer (src/etcd/) offers the layer above it (src/election/),
 * beside the public API of <elector/etcd.h> (watches, keepalives): key helpers
 * and KV request builders.
 * It passes on the transport's facilities (timers, the rule of callbacks and
 * freeing, errors, delays), which the layer above uses through this header. */
#ifndef ELECTOR_ETCD_INTERNAL_H
#define ELECTOR_ETCD_INTERNAL_H

#include "transport_internal.h"

/* The key prefix "NAME/" of a name, and the range end that selects every key
 * under it; one allocation, computed once. */
typedef struct elector__prefix {
    uint8_t *key;
    size_t len;
    uint8_t *end;
    size_t end_len;
} elector__prefix;

/* Returns 0 or ELECTOR_ENOMEM. */
int elector__prefix_init(elector__prefix *p, const char *name);
void elector__prefix_free(elector__prefix *p);

/* What a watcher does once its watch ended with err (the callback's error): a
 * broken or compacted watch never counts as news, the watcher reads the
 * current state again. */
enum elector__watch_next {
    ELECTOR__WATCH_GIVE_UP, /* EPROTO: a server that broke the protocol will not heal */
    ELECTOR__WATCH_REREAD,  /* ECOMPACTED: read again now, watch from there */
    ELECTOR__WATCH_RETRY    /* anything else: read again after a pause */
};
enum elector__watch_next elector__watch_next(int err);

/* ---- KV requests (kv.c) ----
 * Each fills caller-owned structures (no allocation); keys and values are
 * borrowed. */

/* Storage for one Txn: one compare, up to two operations. */
typedef struct elector__txn {
    Etcdserverpb__TxnRequest txn;
    Etcdserverpb__Compare cmp, *cmps[1];
    Etcdserverpb__RequestOp op[2], *ops[2];
    Etcdserverpb__PutRequest put;
    Etcdserverpb__RangeRequest range;
    Etcdserverpb__DeleteRangeRequest del;
} elector__txn;

/* The Txn of t: its one compare (t->cmp, filled by the caller) and nsucc
 * success ops from t->op. */
void elector__txn_init(elector__txn *t, size_t nsucc);
/* The compares CreateRevision(key) == rev and Lease(key) == lease. */
void elector__cmp_create(Etcdserverpb__Compare *c, const uint8_t *key, size_t klen,
                         int64_t rev);
void elector__cmp_lease(Etcdserverpb__Compare *c, const uint8_t *key, size_t klen,
                        int64_t lease);
/* The ops Put(key, v, lease), Range(key) and Delete(key). */
void elector__op_put(Etcdserverpb__RequestOp *op, Etcdserverpb__PutRequest *put,
                     const uint8_t *key, size_t klen, const uint8_t *v, size_t vlen,
                     int64_t lease);
void elector__op_range_key(Etcdserverpb__RequestOp *op, Etcdserverpb__RangeRequest *r,
                           const uint8_t *key, size_t klen);
void elector__op_delete(Etcdserverpb__RequestOp *op, Etcdserverpb__DeleteRangeRequest *d,
                        const uint8_t *key, size_t klen);
/* The leader of prefix p: the lowest create revision under it. */
void elector__leader_range(Etcdserverpb__RangeRequest *r, const elector__prefix *p);

/* The Range result at position i of a Txn reply, or NULL (with an EPROTO detail
 * on the client) when the server put anything else there. */
const Etcdserverpb__RangeResponse *
elector__txn_range(elector_etcd *e, const Etcdserverpb__TxnResponse *r, size_t i);

#endif
