/* SPDX-License-Identifier: MIT */
/* etcd's KV requests, built in place: compares, request ops and a one-compare
 * Txn (elector__txn), and the reading of a Txn reply's Range results. Nothing
 * is allocated; keys and values are borrowed. The election protocol composes
 * its requests from these (src/election/: each Txn beside the handler of
 * its answer). */
#include "etcd_internal.h"

void elector__cmp_create(Etcdserverpb__Compare *c, const uint8_t *key, size_t klen,
                         int64_t rev)
{
    etcdserverpb__compare__init(c);
    c->result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
    c->target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
    c->key.data = (uint8_t *)key;
    c->key.len = klen;
    c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
    c->create_revision = rev;
}

void elector__cmp_lease(Etcdserverpb__Compare *c, const uint8_t *key, size_t klen,
                        int64_t lease)
{
    elector__cmp_create(c, key, klen, 0);
    c->target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__LEASE;
    c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_LEASE;
    c->lease = lease;
}

void elector__op_range_key(Etcdserverpb__RequestOp *op, Etcdserverpb__RangeRequest *r,
                           const uint8_t *key, size_t klen)
{
    etcdserverpb__range_request__init(r);
    r->key.data = (uint8_t *)key;
    r->key.len = klen;
    etcdserverpb__request_op__init(op);
    op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    op->request_range = r;
}

void elector__op_put(Etcdserverpb__RequestOp *op, Etcdserverpb__PutRequest *put,
                     const uint8_t *key, size_t klen, const uint8_t *v, size_t vlen,
                     int64_t lease)
{
    etcdserverpb__put_request__init(put);
    put->key.data = (uint8_t *)key;
    put->key.len = klen;
    put->value.data = (uint8_t *)v;
    put->value.len = vlen;
    put->lease = lease;
    etcdserverpb__request_op__init(op);
    op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    op->request_put = put;
}

void elector__op_delete(Etcdserverpb__RequestOp *op, Etcdserverpb__DeleteRangeRequest *d,
                        const uint8_t *key, size_t klen)
{
    etcdserverpb__delete_range_request__init(d);
    d->key.data = (uint8_t *)key;
    d->key.len = klen;
    etcdserverpb__request_op__init(op);
    op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
    op->request_delete_range = d;
}

void elector__txn_init(elector__txn *t, size_t nsucc)
{
    etcdserverpb__txn_request__init(&t->txn);
    t->cmps[0] = &t->cmp;
    t->txn.n_compare = 1;
    t->txn.compare = t->cmps;
    for (size_t i = 0; i < nsucc; i++)
        t->ops[i] = &t->op[i];
    t->txn.n_success = nsucc;
    t->txn.success = t->ops;
}

void elector__leader_range(Etcdserverpb__RangeRequest *r, const elector__prefix *p)
{
    etcdserverpb__range_request__init(r);
    r->key.data = p->key;
    r->key.len = p->len;
    r->range_end.data = p->end;
    r->range_end.len = p->end_len;
    r->sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND;
    r->sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__CREATE;
    r->limit = 1;
}

const Etcdserverpb__RangeResponse *
elector__txn_range(elector_etcd *e, const Etcdserverpb__TxnResponse *r, size_t i)
{
    const Etcdserverpb__ResponseOp *op = i < r->n_responses ? r->responses[i] : NULL;
    if (op && op->response_case == ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE &&
        op->response_range)
        return op->response_range;
    elector__set_err(
        e, ELECTOR_EPROTO, "%s: malformed reply from %s: no Range result at %zu",
        elector_rpc_path(ELECTOR_RPC_TXN), elector__etcd_current_endpoint(e), i + 1);
    return NULL;
}
