/* SPDX-License-Identifier: MIT */
/* etcd's API as gRPC: the rpc table (each etcd method the client calls, its
 * gRPC path, its message types and whether it is a stream), message framing,
 * bounded protobuf decoding, the shape check of Txn replies, grpc-timeout
 * encoding, grpc-message decoding and the mapping of grpc-status plus etcd's
 * message text to elector error codes. All pure functions and data: the
 * transport feeds them bytes, the unit tests feed them edge cases. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "transport_private.h"

/* ---------------------------------------------------------------- the rpc table */

/* RPC(RANGE, "KV/Range", range, false): path /etcdserverpb.KV/Range, messages
 * Etcdserverpb__RangeRequest and Etcdserverpb__RangeResponse. */
#define RPC(id, path, msg, stream)                                                       \
    [ELECTOR_RPC_##id] = {"/etcdserverpb." path,                                         \
                          &etcdserverpb__##msg##_request__descriptor,                    \
                          &etcdserverpb__##msg##_response__descriptor, stream}
static const elector__rpc_desc rpcs[ELECTOR_RPC_COUNT_] = {
    RPC(RANGE, "KV/Range", range, false),
    RPC(PUT, "KV/Put", put, false),
    RPC(DELETE_RANGE, "KV/DeleteRange", delete_range, false),
    RPC(TXN, "KV/Txn", txn, false),
    RPC(COMPACT, "KV/Compact", compaction, false),
    RPC(LEASE_GRANT, "Lease/LeaseGrant", lease_grant, false),
    RPC(LEASE_REVOKE, "Lease/LeaseRevoke", lease_revoke, false),
    RPC(LEASE_TIME_TO_LIVE, "Lease/LeaseTimeToLive", lease_time_to_live, false),
    RPC(LEASE_KEEPALIVE, "Lease/LeaseKeepAlive", lease_keep_alive, true),
    RPC(WATCH, "Watch/Watch", watch, true),
    RPC(AUTHENTICATE, "Auth/Authenticate", authenticate, false),
    RPC(STATUS, "Maintenance/Status", status, false),
    RPC(MEMBER_LIST, "Cluster/MemberList", member_list, false),
};
#undef RPC

const elector__rpc_desc *elector__rpc(elector_rpc rpc)
{
    if ((unsigned)rpc >= ELECTOR_RPC_COUNT_) return NULL;
    return &rpcs[rpc];
}

const char *elector_rpc_name(elector_rpc rpc)
{
    const elector__rpc_desc *d = elector__rpc(rpc);
    return d ? strrchr(d->path, '/') + 1 : NULL;
}

const char *elector_rpc_path(elector_rpc rpc)
{
    const elector__rpc_desc *d = elector__rpc(rpc);
    return d ? d->path : NULL;
}

/* ---------------------------------------------------------------- framing */

int elector__grpc_frame(elector__buf *out, const ProtobufCMessage *msg)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    if (n > ELECTOR__GRPC_MAX_MSG) return ELECTOR_ETOOLARGE;
    int rc = elector__buf_reserve(out, 5 + n);
    if (rc) return rc;
    uint8_t *p = out->data + out->len;
    p[0] = 0; /* not compressed */
    p[1] = (uint8_t)(n >> 24);
    p[2] = (uint8_t)(n >> 16);
    p[3] = (uint8_t)(n >> 8);
    p[4] = (uint8_t)n;
    protobuf_c_message_pack(msg, p + 5);
    out->len += 5 + n;
    return 0;
}

int elector__grpc_next(const elector__buf *buf, const uint8_t **payload, size_t *len)
{
    size_t avail = elector__buf_avail(buf);
    if (avail < 5) return 0;
    const uint8_t *p = elector__buf_head(buf);
    /* We never ask for compression, so a compressed message is a broken peer. */
    if (p[0] != 0) return ELECTOR_EPROTO;
    uint32_t n = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
    if (n > ELECTOR__GRPC_MAX_MSG) return ELECTOR_EPROTO;
    if (avail - 5 < n) return 0;
    *payload = p + 5;
    *len = n;
    return 1;
}

/* ---------------------------------------------------------------- bounded decoding */

static bool varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v)
{
    uint64_t r = 0;
    for (unsigned shift = 0; shift < 70 && *i < n; shift += 7) {
        uint8_t b = p[(*i)++];
        if (shift < 64) r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false; /* truncated, or longer than 10 bytes */
}

static int pb_walk(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t n,
                   int depth)
{
    if (depth > ELECTOR__PB_MAX_DEPTH) return ELECTOR__DEC_TOO_DEEP;
    size_t i = 0;
    while (i < n) {
        uint64_t tag, v;
        if (!varint(p, n, &i, &tag) || tag >> 3 == 0) return ELECTOR__DEC_MALFORMED;
        switch (tag & 7) {
        case 0:
            if (!varint(p, n, &i, &v)) return ELECTOR__DEC_MALFORMED;
            break;
        case 1:
            if (n - i < 8) return ELECTOR__DEC_MALFORMED;
            i += 8;
            break;
        case 5:
            if (n - i < 4) return ELECTOR__DEC_MALFORMED;
            i += 4;
            break;
        case 2: {
            if (!varint(p, n, &i, &v) || v > n - i) return ELECTOR__DEC_MALFORMED;
            uint64_t num = tag >> 3;
            const ProtobufCFieldDescriptor *f =
                num <= UINT32_MAX
                    ? protobuf_c_message_descriptor_get_field(d, (unsigned)num)
                    : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                int rc = pb_walk(f->descriptor, p + i, (size_t)v, depth + 1);
                if (rc) return rc;
            }
            i += (size_t)v;
            break;
        }
        default: /* groups (3, 4) are not proto3; 6 and 7 do not exist */
            return ELECTOR__DEC_MALFORMED;
        }
    }
    return 0;
}

int elector__pb_check(const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t n)
{
    return pb_walk(desc, p, n, 0);
}

/* protobuf-c's allocator hook with a budget. Blocks come from malloc, so the
 * decoded message may be freed with the default allocator later. */
struct budget {
    ProtobufCAllocator a;
    size_t used, cap;
    bool over, nomem;
};

static size_t block_size(void *p)
{
    return malloc_usable_size(p) + 2 * sizeof(size_t); /* + malloc's header */
}

static void *budget_alloc(void *ud, size_t n)
{
    struct budget *b = ud;
    if (n > b->cap - b->used) {
        b->over = true;
        return NULL;
    }
    void *p = malloc(n ? n : 1);
    if (!p) {
        b->nomem = true;
        return NULL;
    }
    size_t sz = block_size(p);
    if (sz > b->cap - b->used) {
        free(p);
        b->over = true;
        return NULL;
    }
    b->used += sz;
    return p;
}

static void budget_free(void *ud, void *p)
{
    struct budget *b = ud;
    if (!p) return;
    size_t sz = block_size(p);
    b->used = sz < b->used ? b->used - sz : 0;
    free(p);
}

ProtobufCMessage *elector__decode(const ProtobufCMessageDescriptor *desc,
                                  const uint8_t *p, size_t n, size_t budget, int *why)
{
    int rc = elector__pb_check(desc, p, n);
    if (rc) {
        *why = rc;
        return NULL;
    }
    struct budget b = {.a = {budget_alloc, budget_free, NULL}, .cap = budget};
    b.a.allocator_data = &b;
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, &b.a, n, p);
    if (!m)
        *why = b.nomem  ? ELECTOR__DEC_NOMEM
               : b.over ? ELECTOR__DEC_OVER_BUDGET
                        : ELECTOR__DEC_MALFORMED;
    return m;
}

/* ---------------------------------------------------------------- Txn shape */

static const char *op_kind(int c)
{
    switch (c) {
    case 1:
        return "a Range";
    case 2:
        return "a Put";
    case 3:
        return "a DeleteRange";
    case 4:
        return "a Txn";
    default:
        return "nothing";
    }
}

static int shape(const Etcdserverpb__TxnRequest *req,
                 const Etcdserverpb__TxnResponse *resp, const char *where, char *why,
                 size_t cap)
{
    size_t nops = resp->succeeded ? req->n_success : req->n_failure;
    Etcdserverpb__RequestOp **ops = resp->succeeded ? req->success : req->failure;
    if (resp->n_responses != nops) {
        snprintf(why, cap, "%s%zu results for the %s branch of %zu operations", where,
                 resp->n_responses, resp->succeeded ? "success" : "failure", nops);
        return -1;
    }
    for (size_t i = 0; i < nops; i++) {
        const Etcdserverpb__ResponseOp *r = resp->responses[i];
        /* The oneof cases carry the field numbers, the same on both sides. */
        int want = (int)ops[i]->request_case, got = (int)r->response_case;
        const void *sub = got == 1   ? (const void *)r->response_range
                          : got == 2 ? (const void *)r->response_put
                          : got == 3 ? (const void *)r->response_delete_range
                          : got == 4 ? (const void *)r->response_txn
                                     : NULL;
        if (want != got || !sub) {
            if (sub)
                snprintf(why, cap, "%sresult %zu is %s result where %s was asked", where,
                         i + 1, op_kind(got), op_kind(want));
            else
                snprintf(why, cap, "%sresult %zu is empty where %s was asked", where,
                         i + 1, op_kind(want));
            return -1;
        }
        if (want == 4) {
            char inner[64];
            snprintf(inner, sizeof(inner), "%sin the Txn at %zu: ", where, i + 1);
            if (shape(ops[i]->request_txn, r->response_txn, inner, why, cap)) return -1;
        }
    }
    return 0;
}

int elector__txn_shape_check(const Etcdserverpb__TxnRequest *req,
                             const Etcdserverpb__TxnResponse *resp, char *why, size_t cap)
{
    return shape(req, resp, "", why, cap);
}

/* ---------------------------------------------------------------- grpc-timeout */

void elector__grpc_timeout(int64_t ms, char out[16])
{
    if (ms < 1) ms = 1;
    /* The value may have at most 8 digits. */
    if (ms <= 99999999)
        snprintf(out, 16, "%lldm", (long long)ms);
    else
        snprintf(out, 16, "%lldS",
                 (long long)(ms / 1000 > 99999999 ? 99999999 : ms / 1000));
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

void elector__percent_decode(const char *in, size_t len, char *out, size_t cap)
{
    size_t o = 0;
    if (cap == 0) return;
    for (size_t i = 0; i < len && o + 1 < cap; i++) {
        int hi, lo;
        if (in[i] == '%' && i + 2 < len && (hi = hexval(in[i + 1])) >= 0 &&
            (lo = hexval(in[i + 2])) >= 0) {
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            out[o++] = in[i];
        }
    }
    out[o] = 0;
}

/* etcd's own messages, matched as substrings because etcd prefixes them
 * ("etcdserver: ", "rpc error: ") differently across versions. */
static const struct {
    const char *text;
    int err;
} etcd_msgs[] = {
    {"no leader", ELECTOR_ENOLEADER},
    {"required revision has been compacted", ELECTOR_ECOMPACTED},
    {"required revision is a future revision", ELECTOR_EFUTUREREV},
    {"requested lease not found", ELECTOR_ELEASE},
    {"invalid auth token", ELECTOR_ETOKEN},
    {"authentication failed", ELECTOR_EAUTH},
    {"user name is empty", ELECTOR_EAUTH},
    {"user name not found", ELECTOR_EAUTH},
    {"authentication is not enabled", ELECTOR_EAUTH},
    {"permission denied", ELECTOR_EPERM},
    {"request is too large", ELECTOR_ETOOLARGE},
    {"larger than max", ELECTOR_ETOOLARGE},
    {"too many requests", ELECTOR_EUNAVAILABLE},
    {"database space exceeded", ELECTOR_ENOSPACE}, /* NOSPACE alarm */
    {"corrupt cluster", ELECTOR_EALARM},           /* CORRUPT alarm */
    {"request timed out", ELECTOR_ETIMEDOUT},
    {"context deadline exceeded", ELECTOR_ETIMEDOUT}, /* grpc-timeout ran out in etcd */
    {"leader changed", ELECTOR_EUNAVAILABLE},
};

int elector__grpc_error(int status, const char *message)
{
    if (status == 0) return 0;
    for (size_t i = 0; message && i < sizeof(etcd_msgs) / sizeof(etcd_msgs[0]); i++)
        if (strstr(message, etcd_msgs[i].text)) return etcd_msgs[i].err;
    switch (status) {
    case 1:
        return ELECTOR_ECANCELED;
    case 4:
        return ELECTOR_ETIMEDOUT;
    case 7:
        return ELECTOR_EPERM;
    case 14:
        return ELECTOR_EUNAVAILABLE;
    case 16:
        return ELECTOR_ETOKEN;
    default:
        return ELECTOR_EGRPC;
    }
}
