/* SPDX-License-Identifier: MIT */
/* The rpc table: each etcd method the client calls, its gRPC path, its message
 * types and whether it is a stream. */
#include <string.h>
#include "transport_private.h"

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
