/* gRPC message framing, grpc-timeout encoding, grpc-message decoding and the
 * mapping of grpc-status plus etcd's message text to elector error codes. All pure
 * functions: the transport feeds them bytes, the unit tests feed them edge cases. */
#include <stdio.h>
#include <string.h>
#include "internal.h"

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

void elector__grpc_timeout(int64_t ms, char out[16])
{
    if (ms < 1) ms = 1;
    /* The value may have at most 8 digits. */
    if (ms <= 99999999)
        snprintf(out, 16, "%lldm", (long long)ms);
    else
        snprintf(out, 16, "%lldS", (long long)(ms / 1000 > 99999999 ? 99999999 : ms / 1000));
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
        if (in[i] == '%' && i + 2 < len &&
            (hi = hexval(in[i + 1])) >= 0 && (lo = hexval(in[i + 2])) >= 0) {
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
    {"database space exceeded", ELECTOR_EGRPC},
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
    case 1: return ELECTOR_ECANCELED;
    case 4: return ELECTOR_ETIMEDOUT;
    case 7: return ELECTOR_EPERM;
    case 14: return ELECTOR_EUNAVAILABLE;
    case 16: return ELECTOR_ETOKEN;
    default: return ELECTOR_EGRPC;
    }
}
