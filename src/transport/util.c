/* Small shared helpers: clocks, strings, errors, backoff, the rpc table. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "transport_internal.h"
#include <etcdserverpb/rpc.pb-c.h>

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The deadline clock. CLOCK_BOOTTIME, like CLOCK_MONOTONIC, ignores wall-clock
 * steps; unlike it, it keeps counting while the host is suspended, as etcd's
 * clock (on another host) does. */
int64_t elector_now_ns(void)
{
    return clock_ns(CLOCK_BOOTTIME);
}

int64_t elector__mono_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

int64_t elector__mono_of(int64_t boot_ns)
{
    int64_t mono = clock_ns(CLOCK_MONOTONIC);
    return boot_ns - (clock_ns(CLOCK_BOOTTIME) - mono);
}

int64_t elector__now_ms(void)
{
    return elector_now_ns() / 1000000;
}

char *elector__strdup(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

const char *elector_strerror(int err)
{
    switch (err) {
    case 0: return "success";
#define ELECTOR_ERR_STR_(name, value, text)                                              \
    case value: return text;
        ELECTOR_ERRNO_MAP(ELECTOR_ERR_STR_)
#undef ELECTOR_ERR_STR_
    }
    return "unknown error";
}

const char *elector_err_name(int err)
{
    switch (err) {
    case 0: return "OK";
#define ELECTOR_ERR_NAME_(name, value, text)                                             \
    case value: return #name;
        ELECTOR_ERRNO_MAP(ELECTOR_ERR_NAME_)
#undef ELECTOR_ERR_NAME_
    }
    return "UNKNOWN";
}

int64_t elector__backoff_ms(int failures, int64_t min_ms, int64_t max_ms, uint32_t rnd)
{
    if (failures <= 0) return 0;
    int64_t d = min_ms;
    for (int i = 1; i < failures && d < max_ms; i++) d = d > max_ms / 2 ? max_ms : d * 2;
    if (d > max_ms) d = max_ms;
    /* Jitter in [0.5, 1.0] spreads reconnecting clients apart. */
    return d / 2 + (int64_t)((long double)(d - d / 2) * rnd / UINT32_MAX);
}

size_t elector_prefix_end(const uint8_t *prefix, size_t len, uint8_t *out)
{
    if (len) memcpy(out, prefix, len);
    for (size_t i = len; i > 0; i--) {
        if (out[i - 1] < 0xff) {
            out[i - 1]++;
            return i;
        }
    }
    out[0] = 0;
    return 1;
}

#define RPC(path, req, resp, stream) {path, &req##__descriptor, &resp##__descriptor, stream}
static const elector__rpc_desc rpcs[ELECTOR_RPC_COUNT_] = {
    [ELECTOR_RPC_RANGE] = RPC("/etcdserverpb.KV/Range", etcdserverpb__range_request,
                              etcdserverpb__range_response, false),
    [ELECTOR_RPC_PUT] = RPC("/etcdserverpb.KV/Put", etcdserverpb__put_request,
                            etcdserverpb__put_response, false),
    [ELECTOR_RPC_DELETE_RANGE] =
        RPC("/etcdserverpb.KV/DeleteRange", etcdserverpb__delete_range_request,
            etcdserverpb__delete_range_response, false),
    [ELECTOR_RPC_TXN] = RPC("/etcdserverpb.KV/Txn", etcdserverpb__txn_request,
                            etcdserverpb__txn_response, false),
    [ELECTOR_RPC_COMPACT] = RPC("/etcdserverpb.KV/Compact", etcdserverpb__compaction_request,
                                etcdserverpb__compaction_response, false),
    [ELECTOR_RPC_LEASE_GRANT] =
        RPC("/etcdserverpb.Lease/LeaseGrant", etcdserverpb__lease_grant_request,
            etcdserverpb__lease_grant_response, false),
    [ELECTOR_RPC_LEASE_REVOKE] =
        RPC("/etcdserverpb.Lease/LeaseRevoke", etcdserverpb__lease_revoke_request,
            etcdserverpb__lease_revoke_response, false),
    [ELECTOR_RPC_LEASE_TIME_TO_LIVE] =
        RPC("/etcdserverpb.Lease/LeaseTimeToLive", etcdserverpb__lease_time_to_live_request,
            etcdserverpb__lease_time_to_live_response, false),
    [ELECTOR_RPC_LEASE_KEEPALIVE] =
        RPC("/etcdserverpb.Lease/LeaseKeepAlive", etcdserverpb__lease_keep_alive_request,
            etcdserverpb__lease_keep_alive_response, true),
    [ELECTOR_RPC_WATCH] = RPC("/etcdserverpb.Watch/Watch", etcdserverpb__watch_request,
                              etcdserverpb__watch_response, true),
    [ELECTOR_RPC_AUTHENTICATE] =
        RPC("/etcdserverpb.Auth/Authenticate", etcdserverpb__authenticate_request,
            etcdserverpb__authenticate_response, false),
    [ELECTOR_RPC_STATUS] = RPC("/etcdserverpb.Maintenance/Status", etcdserverpb__status_request,
                               etcdserverpb__status_response, false),
    [ELECTOR_RPC_MEMBER_LIST] =
        RPC("/etcdserverpb.Cluster/MemberList", etcdserverpb__member_list_request,
            etcdserverpb__member_list_response, false),
};

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
