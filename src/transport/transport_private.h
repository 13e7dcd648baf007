/* SPDX-License-Identifier: MIT */
/* Shared by the files of the transport layer (src/transport/) only. Top to
 * bottom; a file calls only files below it (scripts/check-layers.sh). The
 * lower ones call nothing above them: they record what happened in the handle
 * (a call on the ready list, e->conn_up_news, e->learner, e->ping_dead) and
 * engine.c reads it in its pass:
 *
 *   sync.c      blocking calls: a call, then the loop until its reply
 *   engine.c    the client handle, its epoll set and the process loop; it
 *               acts on what the pass recorded and re-arms the timers
 *   autosync.c  endpoints from MemberList; leaving a learner
 *   call.c      the call list, the public call and stream API; Auth.Authenticate
 *               and the token
 *   conn.c      sockets, the connection state machine, the byte pump between
 *               the socket (or TLS) and nghttp2; a failed connection fails
 *               its calls (reply.c)
 *   reply.c     a call's state; completing calls: status, decoding, delivery
 *   ping.c      the HTTP/2 PING policy
 *   tls_reload.c  the TLS files and the password file, re-read when changed
 *   h2.c        nghttp2 glue: bytes in, bytes out, no I/O; errors returned
 *   tls.c       TLS on the connection (OpenSSL, loaded by ssl_lazy.c; only
 *               tls.c and ssl_lazy.c include ssl_lazy.h, OpenSSL's headers);
 *               errors returned
 *   timer.c     the timer heap and the timerfd that wakes the loop
 *   grpc.c      the rpc table, gRPC framing and status mapping (pure)
 *   buf.c, endpoint.c, util.c   buffers, endpoint lists,
 *               clocks, errors (elector__set_err), notices, delays and jitter */
#ifndef ELECTOR_TRANSPORT_PRIVATE_H
#define ELECTOR_TRANSPORT_PRIVATE_H

#include <stdarg.h>
#include <sys/types.h>
#include <etcdserverpb/rpc.pb-c.h>
#include "transport_internal.h"

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
enum {
    ELECTOR__DEC_MALFORMED = 1,
    ELECTOR__DEC_TOO_DEEP,
    ELECTOR__DEC_OVER_BUDGET,
    ELECTOR__DEC_NOMEM /* malloc failed: our fault, not the reply's */
};

/* Checks the wire format of a message of type desc without decoding it: every
 * field well formed and messages nested at most ELECTOR__PB_MAX_DEPTH deep.
 * Returns 0 or an ELECTOR__DEC_* reason. Recursion is bounded by that depth. */
int elector__pb_check(const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t n);

/* Decodes a message of type desc after elector__pb_check(), letting protobuf-c
 * allocate at most `budget` bytes of heap (counted with malloc's own sizes, so
 * the figure is the real heap in use, temporary tables included). The result is
 * malloc'd as usual: free it with protobuf_c_message_free_unpacked(m, NULL).
 * NULL with *why set to an ELECTOR__DEC_* reason on failure. */
ProtobufCMessage *elector__decode(const ProtobufCMessageDescriptor *desc,
                                  const uint8_t *p, size_t n, size_t budget, int *why);

/* Checks that a Txn reply has the shape its request asked for: as many results
 * as the branch that ran has operations, each of the operation's kind (a Range
 * result where a Range was asked, ...), nested Txns likewise. Returns 0, or -1
 * with what is wrong in why (cap bytes). */
int elector__txn_shape_check(const Etcdserverpb__TxnRequest *req,
                             const Etcdserverpb__TxnResponse *resp, char *why,
                             size_t cap);

/* grpc-timeout header value for ms ("1500m", or in seconds once too long). */
void elector__grpc_timeout(int64_t ms, char out[16]);

/* Decodes a percent-encoded grpc-message into out (cap bytes, NUL terminated).
 * Invalid escapes are copied verbatim. */
void elector__percent_decode(const char *in, size_t len, char *out, size_t cap);

/* ---- endpoints (endpoint.c) ---- */
typedef struct elector__endpoint {
    char *host; /* without brackets */
    char *port;
    char *authority; /* host:port as given, for :authority and messages */
    bool tls;
} elector__endpoint;

/* Parses a comma list. Returns count (> 0) or ELECTOR_EINVAL with a message in
 * err (cap bytes). *out is malloc'd; free with elector__endpoints_free. */
int elector__endpoints_parse(const char *list, bool tls_default, elector__endpoint **out,
                             char *err, size_t cap);
void elector__endpoints_free(elector__endpoint *eps, int n);

/* host is in 127.0.0.0/8, ::1 (or v4-mapped 127/8) or "localhost". */
bool elector__endpoint_loopback(const char *host);

/* ---- the rpc table (grpc.c) ---- */
typedef struct elector__rpc_desc {
    const char *path;
    const ProtobufCMessageDescriptor *req;
    const ProtobufCMessageDescriptor *resp;
    bool stream;
} elector__rpc_desc;
const elector__rpc_desc *elector__rpc(elector_rpc rpc);

/* ---- the client ---- */

/* Connection states: IDLE -> CONNECTING -> TLS (https only) -> SETTINGS -> READY,
 * and back to IDLE (possibly after a backoff) when anything fails. */
enum conn_state { C_IDLE, C_CONNECTING, C_TLS, C_SETTINGS, C_READY };

/* A unary call or a stream: QUEUED (waiting for a connection) -> ACTIVE (on an
 * HTTP/2 stream) -> DONE; a unary call the server never processed goes back to
 * QUEUED. */
enum call_state { CS_QUEUED, CS_ACTIVE, CS_DONE };

typedef struct elector_stream call;
struct elector_stream {
    call *next, *prev; /* all live calls of the client */
    call *ready_next;  /* ready queue link */
    elector_etcd *etcd;
    const elector__rpc_desc *rpc;
    elector_rpc rpc_id;
    /* The highest revision seen (and the restore count) when the call was made:
     * its reply may not show less (restore detection, reply.c). Replies to
     * calls in flight together may arrive in any order, so a call is held
     * only to what was seen before it was made. */
    int64_t rev_floor;
    uint64_t rev_epoch;
    enum call_state state; /* changed only by elector__call_set_state() */
    int32_t sid;
    elector__timer deadline; /* unary only */
    int64_t timeout_ms;
    bool stream, require_leader, is_auth, auth_retried;
    bool refused_retried; /* sent again once after REFUSED_STREAM (reply.c) */
    bool take_reply;      /* the callback owns the decoded reply (call_sync) */
    bool awaiting;        /* a reply is awaited on this stream (ping policy) */
    bool queued_ready;    /* on the ready queue */
    bool user_closed;     /* stream closed by its owner: no more callbacks */
    bool net_closed;      /* nghttp2 closed the HTTP/2 stream */
    bool deferred;        /* data provider is waiting for bytes */
    bool ended;           /* final callback delivered (or owed none) */
    uint32_t h2_error;
    elector__buf out; /* framed request bytes; out.off = bytes handed to nghttp2 */
    elector__buf in;  /* received DATA, split into gRPC messages */
    /* Every message prefix is checked as DATA arrives: rx_next is the stream
     * offset of the next prefix, rx_total the bytes received so far. */
    uint64_t rx_total, rx_next;
    unsigned rx_msgs;
    int rx_err; /* the peer broke the protocol: the call ends with it */
    char rx_msg[320];
    int http_status;
    int grpc_status; /* -1 until the trailers (or a trailers-only reply) arrive */
    char grpc_msg[256];
    elector_etcd_cb ucb;
    elector_stream_cb scb;
    void *ud;
};

typedef struct elector__timers {
    elector__timer *min;
    unsigned n;
    uint64_t seq;
} elector__timers;

/* OpenSSL's types, without its headers (only tls.c and ssl_lazy.c see those). */
typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;
typedef struct nghttp2_session nghttp2_session;

struct elector_etcd {
    elector_etcd_config cfg;
    char *s_endpoints, *s_cacert, *s_cert, *s_key, *s_user, *s_password;
    char *s_password_file;
    elector__endpoint *eps;
    int nep, ep;
    int epfd, evfd, tfd, fd;
    int64_t wake_ms; /* when tfd is armed to fire (INT64_MAX: not armed); it may
                        be earlier than anything due (a spurious wake-up) */
    bool ev_posted;  /* the loop wrote evfd for work due now, not yet read */
    uint32_t ep_events;
    SSL_CTX *ssl_ctx;
    SSL *ssl;
    /* The endpoints given use TLS (or require_tls): no endpoint may ever be
     * cleartext (auto-sync skips http:// client URLs). */
    bool tls_only;
    uint64_t cleartext_told; /* the cleartext URLs auto-sync last named (a hash) */
    uint64_t settings_gen;   /* elector__settings_gen(): bumped by each change */
    /* Day-2 operations (tls_reload.c, autosync.c): what the TLS files were
     * when last loaded, the endpoint list kept from MemberList, notices. */
    struct elector__tls_files *tls_files;
    struct elector__autosync *autosync;
    elector_etcd_notice_cb notice_cb;
    void *notice_ud;
    void *owner; /* elector__etcd_owner() */
    nghttp2_session *h2;
    /* nghttp2 ended the connection itself (it sent GOAWAY with an error: the
     * server broke HTTP/2); what it said, for elector__h2_output to report. */
    char h2_broken[160];
    enum conn_state cstate;
    int64_t dial_deadline_ms, retry_at_ms;
    elector__timer dial_timer, retry_timer, ping_timer;
    bool draining; /* GOAWAY received: no new streams here */
    bool learner;  /* a learner refused a call: no new streams, left by a timer */
    /* Found during a pass by the files low in the transport, read by engine.c
     * after the pump, each dispatch and the timers (its conn_news()): the
     * server's SETTINGS came (h2.c), a PING went unanswered (ping.c). */
    bool conn_up_news, ping_dead;
    /* ... leave_timer (autosync.c), for the connection numbered leave_serial; here,
     * not in the lazily allocated autosync state, so that leaving a learner needs
     * no allocation (without one, the refused call would go back to it). */
    elector__timer leave_timer;
    uint64_t leave_serial;
    /* Authenticate failed for a passing reason (no leader, too many requests,
     * connection lost): the next one waits for auth_timer, backed off by
     * auth_failures (call.c). */
    elector__timer auth_timer;
    int auth_failures;
    bool want_write;
    bool readable, writable;
    elector__buf wbuf;
    int round_failures; /* endpoints failed since the last good connection */
    int backoffs;       /* failed rounds in a row */
    int last_conn_err;
    char last_conn_msg[512];
    char *token;
    bool authenticating;
    int64_t now_ms, last_recv_ms, last_ping_ms;
    bool ping_out, data_since_ping;
    call *calls;
    call *ready_head, *ready_tail;
    /* Calls by state, kept by elector__call_set_state(): what the loop needs to
     * know without walking the list. */
    int n_queued, n_active_unary, n_active_streams, n_awaiting;
    int err, init_err; /* init_err: the handle is unusable (bad config) */
    char errstr[512];
    elector__life life; /* holds: the loop and the callbacks it runs */
    uint32_t rnd;
    elector__ext *exts;
    elector__timers timers;
    elector_etcd_stats stats;
    /* What etcd's replies showed so far (restore detection, reply.c): the
     * highest revision of a reply that cannot be stale, the cluster ID, and
     * how many times either went wrong. */
    int64_t seen_rev;
    uint64_t seen_cluster;
    uint64_t restores;
    char restore_msg[256];
};

/* util.c */
uint32_t elector__next_rnd(elector_etcd *e);

/* engine.c */
/* Sends what is queued now, outside the loop's pass (a blocking call that
 * would otherwise wait for a first pass); nothing while a pass runs. */
void elector__etcd_send_now(elector_etcd *e);

/* timer.c */
/* elector__timer_arm() without moving the timerfd: for the transport's own
 * timers, armed where the end of the pass or elector__etcd_timeout() (which the
 * application calls before it waits) sets the timerfd anyway. Saves a
 * timerfd_settime() per call. */
void elector__timer_set(elector_etcd *e, elector__timer *t, int64_t due_ms,
                        elector__timer_fn fn, void *ud);
void elector__timers_run(elector_etcd *e);
int64_t elector__timers_next(const elector_etcd *e); /* INT64_MAX: none armed */
/* Makes the client's fd readable by due_ms: at once (the eventfd) when it is
 * due now, else the timerfd, moved only when due_ms is earlier than where it is
 * armed. It is never moved later: a timer that went away leaves a spurious
 * wake-up behind, which the pass that takes it re-arms from. Moving it on every
 * call (earlier at the call, later at its reply) cost two timerfd_settime() and a
 * wake-up per call: about 25 us of CPU per call in bench/run_range_bench.sh. */
void elector__wake_at(elector_etcd *e, int64_t due_ms);

/* conn.c */
void elector__conn_fail(elector_etcd *e, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void elector__conn_io(elector_etcd *e);    /* advance on readiness of the socket */
void elector__conn_flush(elector_etcd *e); /* nghttp2's output to the socket */
void elector__conn_rearm(elector_etcd *e); /* dial, reconnect and ping timers */
bool elector__conn_drain_due(const elector_etcd *e);
void elector__conn_close(elector_etcd *e);
void elector__set_interest(elector_etcd *e);
static inline const char *elector__authority(const elector_etcd *e)
{
    return e->eps[e->ep].authority;
}

/* tls.c */
int elector__tls_setup(elector_etcd *e);
/* Each returns 0 or an error code, what went wrong in why (reads and writes:
 * > 0 bytes, 0 would block, -1 with *err); step: *done once the handshake is
 * complete (with ALPN h2). */
int elector__tls_start(elector_etcd *e, char *why, size_t cap);
int elector__tls_step(elector_etcd *e, bool *done, char *why, size_t cap);
ssize_t elector__tls_read(elector_etcd *e, uint8_t *buf, size_t len, int *err, char *why,
                          size_t cap);
ssize_t elector__tls_write(elector_etcd *e, const uint8_t *buf, size_t len, int *err,
                           char *why, size_t cap);
void elector__tls_free(elector_etcd *e);
void elector__tls_free_ctx(elector_etcd *e);
int elector__tls_ctx_build(elector_etcd *e, SSL_CTX **out, char *why, size_t cap);
void elector__tls_ctx_free(SSL_CTX *ctx);

/* tls_reload.c: the TLS files follow the disk. note() records what the files
 * are now (before the first load); refresh(), before each handshake, loads
 * them again when one changed (inode, size or mtime, through symlinks) and
 * keeps the previous context when the new files do not load. */
int elector__tls_files_note(elector_etcd *e); /* ELECTOR_ENOMEM, or 0 */
void elector__tls_refresh(elector_etcd *e);
void elector__tls_files_free(elector_etcd *e);
/* Before Auth.Authenticate: the password file read again when it changed.
 * Returns 0, or the ms to wait before asking again when the file is being
 * written (changed in the last 100 ms, or while it was read): a partial first
 * line is never used. */
int elector__password_refresh(elector_etcd *e);
/* 0 when every symlink on the way to path's file may be followed (owned by
 * this process's user, root, or its directory's owner), else ELECTOR_EINVAL
 * with why. */
int elector__file_trusted(const char *path, char *why, size_t cap);

/* autosync.c: endpoints from MemberList every auto_sync_interval_ms, and
 * members that are learners skipped. */
int elector__autosync_start(elector_etcd *e); /* ELECTOR_ENOMEM, or 0 */
void elector__autosync_free(elector_etcd *e);
/* A learner refused a call on the connection (reply.c set e->learner): a
 * timer due now leaves it for the next endpoint. */
void elector__learner_leave_arm(elector_etcd *e);
/* Replaces the endpoint list by urls[0..n-1] (the connection in use stays
 * until it ends). 0, or an error code with why set; an empty list is refused. */
int elector__endpoints_replace(elector_etcd *e, const char *const *urls, int n, char *why,
                               size_t cap);

/* ping.c */
void elector__ping_rearm(elector_etcd *e);

/* h2.c */
int elector__h2_start(elector_etcd *e);
void elector__h2_free(elector_etcd *e);
/* 0, or an error with why set: ELECTOR_EUNAVAILABLE when the connection must be
 * left (its stream IDs are used up), else the call's error. */
int elector__h2_submit(elector_etcd *e, call *c, char *why, size_t cap);
int elector__h2_output(elector_etcd *e, char *why, size_t cap);
int elector__h2_input(elector_etcd *e, const uint8_t *buf, size_t n, char *why,
                      size_t cap);
void elector__h2_reset(call *c);  /* RST_STREAM CANCEL; nghttp2 forgets c */
void elector__h2_forget(call *c); /* nghttp2 forgets c (no frame sent) */
void elector__h2_resume(call *c);
bool elector__h2_want_write(const elector_etcd *e);
void elector__h2_ping(elector_etcd *e);
bool elector__h2_refused(const call *c);   /* REFUSED_STREAM: never processed */
bool elector__h2_cancelled(const call *c); /* reset with CANCEL */
const char *elector__h2_strerror(uint32_t code);

/* call.c */
void elector__restore_probe(elector_etcd *e); /* a new connection: check for a restore */
void elector__calls_submit(elector_etcd *e);
/* Calls wait and the next pass can send one (not while they wait for an
 * Authenticate: in flight, or backed off). */
bool elector__calls_sendable(const elector_etcd *e);
void elector__calls_reap(elector_etcd *e);
void elector__calls_free(elector_etcd *e);
int elector__call_start(elector_etcd *e, elector_rpc rpc, const ProtobufCMessage *req,
                        const elector_call_opts *opts, elector_etcd_cb cb, void *ud,
                        call **out);

/* reply.c */
/* c counts (d = +1) or no longer counts (-1) in the client's tallies of its state. */
void elector__call_count(call *c, int d);
void elector__call_set_state(call *c, enum call_state st);
/* etcd refused the token: a request may go out again, once, after a new one. */
bool elector__auth_may_resend(const call *c, int err);
void elector__call_end(call *c, int err, const char *msg);
/* The calls active on the connection fail (it failed), or the calls waiting
 * for one (a whole round over the endpoints failed). */
void elector__calls_fail_active(elector_etcd *e, int err, const char *msg);
void elector__calls_fail_queued(elector_etcd *e, int err, const char *msg);
void elector__dispatch(elector_etcd *e);

#endif
