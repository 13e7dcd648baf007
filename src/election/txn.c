/* SPDX-License-Identifier: MIT */
/* The requests of the election protocol (docs/DESIGN.md, "Elections"): each a
 * Txn guarded by one compare on our key, made of the KV pieces of
 * src/etcd/kv.c. They fill an elector__txn in place (it points into itself:
 * build it where it is sent from) and borrow keys and values. */
#include "election_private.h"

void elector__txn_campaign(elector__txn *t, const uint8_t *key, size_t klen,
                           const uint8_t *value, size_t vlen, int64_t lease)
{
    elector__cmp_create(&t->cmp, key, klen, 0);
    elector__op_put(&t->op[0], &t->put, key, klen, value, vlen, lease);
    elector__op_range_key(&t->op[1], &t->range, key, klen);
    elector__txn_init(t, 1);
    /* Failure: the same Put (value updated, create revision kept), then the
     * Range that reads our create revision. */
    t->txn.n_failure = 2;
    t->txn.failure = t->ops;
    t->ops[1] = &t->op[1];
}

void elector__txn_check(elector__txn *t, const uint8_t *key, size_t klen, int64_t rev,
                        const elector__prefix *p)
{
    elector__cmp_create(&t->cmp, key, klen, rev);
    elector__leader_range(&t->range, p);
    t->range.sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__DESCEND;
    t->range.max_create_revision = rev - 1;
    etcdserverpb__request_op__init(&t->op[0]);
    t->op[0].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    t->op[0].request_range = &t->range;
    elector__txn_init(t, 1);
}

void elector__txn_check_serializable(elector__txn *t, const uint8_t *key, size_t klen,
                                     int64_t rev, const elector__prefix *p)
{
    elector__txn_check(t, key, klen, rev, p);
    t->range.serializable = true;
}

void elector__txn_proclaim(elector__txn *t, const uint8_t *key, size_t klen, int64_t rev,
                           const uint8_t *value, size_t vlen, int64_t lease)
{
    elector__cmp_create(&t->cmp, key, klen, rev);
    elector__op_put(&t->op[0], &t->put, key, klen, value, vlen, lease);
    elector__txn_init(t, 1);
}

void elector__txn_delete(elector__txn *t, const uint8_t *key, size_t klen, int64_t rev,
                         int64_t lease)
{
    if (rev)
        elector__cmp_create(&t->cmp, key, klen, rev);
    else
        elector__cmp_lease(&t->cmp, key, klen, lease);
    elector__op_delete(&t->op[0], &t->del, key, klen);
    elector__txn_init(t, 1);
}
