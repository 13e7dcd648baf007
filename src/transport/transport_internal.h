/* Internal declarations shared by the files of libelector. Cross-file helpers use
 * the elector__ prefix; nothing here is part of the public API. */
#ifndef ELECTOR_TRANSPORT_INTERNAL_H
#define ELECTOR_TRANSPORT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include "elector/etcd.h"
#include <etcdserverpb/rpc.pb-c.h>

/* ---- growable byte buffer (buf.c) ---- */
typedef struct elector__buf {
    uint8_t *data;
    size_t len; /* bytes held */
    size_t off; /* bytes already consumed from the front */
    size_t cap;
} elector__buf;

int elector__buf_reserve(elector__buf *b, size_t extra);
int elector__buf_append(elector__buf *b, const void *p, size_t n);
void elector__buf_consume(elector__buf *b, size_t n);
static inline size_t elector__buf_avail(const elector__buf *b)
{
    return b->len - b->off;
}
static inline const uint8_t *elector__buf_head(const elector__buf *b)
{
    return b->data + b->off;
}
void elector__buf_free(elector__buf *b);

/* ---- gRPC framing and status (grpc.c): pure functions, unit tested ---- */
#define ELECTOR__GRPC_MAX_MSG (64u * 1024u * 1024u)

/* Received messages: defaults and hard bounds of elector_etcd_config's limits. */
#define ELECTOR__RECV_MSG_DEFAULT (4u * 1024u * 1024u)
#define ELECTOR__DECODE_FACTOR 8u /* max_decode_bytes default: 8 x max_recv_msg_bytes */
/* Messages nested deeper than this are refused before protobuf-c (which recurses
 * without a limit) sees them. elector's deepest reply is 4 levels (TxnResponse >
 * ResponseOp > RangeResponse > KeyValue); each nested Txn adds 2. */
#define ELECTOR__PB_MAX_DEPTH 32

/* Appends the 5-byte prefix and the packed message. */
int elector__grpc_frame(elector__buf *out, const ProtobufCMessage *msg);

/* Looks at the front of buf: 1 and payload and len set when a whole message is there
 * (the caller consumes 5 + len), 0 when more bytes are needed, ELECTOR_EPROTO for
 * a compressed or oversized message. */
int elector__grpc_next(const elector__buf *buf, const uint8_t **payload, size_t *len);

/* Why elector__decode() refused a message. */
enum { ELECTOR__DEC_MALFORMED = 1, ELECTOR__DEC_TOO_DEEP, ELECTOR__DEC_OVER_BUDGET };

/* Checks the wire format of a message of type desc without decoding it: every
 * field well formed and messages nested at most ELECTOR__PB_MAX_DEPTH deep.
 * Returns 0 or an ELECTOR__DEC_* reason. Recursion is bounded by that depth. */
int elector__pb_check(const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t n);

/* Decodes a message of type desc after elector__pb_check(), letting protobuf-c
 * allocate at most `budget` bytes of heap (counted with malloc's own sizes, so
 * the figure is the real heap in use, temporary tables included). The result is
 * malloc'd as usual: free it with protobuf_c_message_free_unpacked(m, NULL).
 * NULL with *why set to an ELECTOR__DEC_* reason on failure. */
ProtobufCMessage *elector__decode(const ProtobufCMessageDescriptor *desc, const uint8_t *p,
                                  size_t n, size_t budget, int *why);

/* Checks that a Txn reply has the shape its request asked for: as many results
 * as the branch that ran has operations, each of the operation's kind (a Range
 * result where a Range was asked, ...), nested Txns likewise. Returns 0, or -1
 * with what is wrong in why (cap bytes). */
int elector__txn_shape_check(const Etcdserverpb__TxnRequest *req,
                             const Etcdserverpb__TxnResponse *resp, char *why, size_t cap);

/* grpc-timeout header value for ms ("1500m", or in seconds once too long). */
void elector__grpc_timeout(int64_t ms, char out[16]);

/* Decodes a percent-encoded grpc-message in place-safe fashion into out (cap
 * bytes, NUL terminated). Invalid escapes are copied verbatim. */
void elector__percent_decode(const char *in, size_t len, char *out, size_t cap);

/* Maps grpc-status + decoded message to an elector error code (0 for status 0). */
int elector__grpc_error(int status, const char *message);

/* ---- endpoints (endpoint.c) ---- */
typedef struct elector__endpoint {
    char *host;      /* without brackets */
    char *port;
    char *authority; /* host:port as given, for :authority and messages */
    bool tls;
} elector__endpoint;

/* Parses a comma list. Returns count (> 0) or ELECTOR_EINVAL with a message in
 * err (cap bytes). *out is malloc'd; free with elector__endpoints_free. */
int elector__endpoints_parse(const char *list, bool tls_default, elector__endpoint **out,
                             char *err, size_t cap);
void elector__endpoints_free(elector__endpoint *eps, int n);

/* ---- backoff (backoff.c) ---- */
/* Delay before reconnect attempt after `failures` consecutive failed rounds:
 * 0 for none, else min(max, min_ms * 2^(failures-1)) scaled by a jitter factor in
 * [0.5, 1.0] taken from rnd (0 .. 2^32-1). */
int64_t elector__backoff_ms(int failures, int64_t min_ms, int64_t max_ms, uint32_t rnd);

/* ---- clocks ---- */
/* elector_now_ns() (public) is the deadline clock, CLOCK_BOOTTIME; every
 * deadline and timer of the library is on it (in ms: elector__now_ms()).
 * Events carry CLOCK_MONOTONIC instead (other processes compare them):
 * elector__mono_ns() now, elector__mono_of() for an instant of the deadline
 * clock (the two differ by the time the host spent suspended). */
int64_t elector__now_ms(void);
int64_t elector__mono_ns(void);
int64_t elector__mono_of(int64_t boot_ns);

/* ---- misc ---- */
char *elector__strdup(const char *s);

/* Descriptor table (rpc.c). */
typedef struct elector__rpc_desc {
    const char *path;
    const ProtobufCMessageDescriptor *req;
    const ProtobufCMessageDescriptor *resp;
    bool stream;
} elector__rpc_desc;
const elector__rpc_desc *elector__rpc(elector_rpc rpc);

/* Sets the handle's error code and detail text; returns err. */
int elector__set_err(elector_etcd *etcd, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Lease keepalive and watch multiplexers hook into the client (lease.c, watch.c). */
void elector__keepalive_free_all(elector_etcd *etcd);
void elector__watch_free_all(elector_etcd *etcd);
int64_t elector__keepalive_next_deadline(elector_etcd *etcd);
void elector__keepalive_timers(elector_etcd *etcd, int64_t now_ms);

/* Per-client slots for the multiplexers, owned by lease.c and watch.c. */
struct elector__ka_state;
struct elector__watch_state;
struct elector__ka_state **elector__etcd_ka(elector_etcd *etcd);
struct elector__watch_state **elector__etcd_watch(elector_etcd *etcd);

/* Timers of the layers above the transport (sessions), run by the same engine.
 * A timer is owned by its embedder; disarm it before freeing it. */
typedef struct elector__timer elector__timer;
typedef void (*elector__timer_fn)(elector__timer *t, void *ud);
struct elector__timer {
    elector__timer *next;
    int64_t due_ms;
    elector__timer_fn fn;
    void *ud;
    bool armed;
};
void elector__timer_arm(elector_etcd *etcd, elector__timer *t, int64_t due_ms,
                        elector__timer_fn fn, void *ud);
void elector__timer_disarm(elector_etcd *etcd, elector__timer *t);

/* Forgets the auth token, so the next request authenticates again (for streams
 * that etcd refuses because the token they were opened with expired). */
void elector__drop_token(elector_etcd *etcd);

/* Callback-depth guard for deferred frees. */
void elector__enter_cb(elector_etcd *etcd);
bool elector__leave_cb(elector_etcd *etcd); /* true if the handle must not be used */

#endif
