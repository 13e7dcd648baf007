/* SPDX-License-Identifier: MIT */
/* libFuzzer targets for the receive path of the etcd client. One source, two
 * programs:
 *
 * fuzz_grpc_recv (default): the pure pieces, fast.
 *   Input: [0] separator byte, [1] parameter byte, [2..] data.
 *   - data is split at each separator byte into chunks, appended one by one to an
 *     elector__buf; after each append every complete gRPC message is taken off
 *     the front with elector__grpc_next and decoded as RangeResponse,
 *     WatchResponse, TxnResponse and LeaseKeepAliveResponse, by the bounded
 *     decoder (elector__decode, with a large and a tiny budget) and by
 *     protobuf-c; the bounded one must accept nothing protobuf-c refuses; what
 *     decodes is framed again with elector__grpc_frame and must read back whole;
 *   - data goes through elector__percent_decode (output capacity = parameter
 *     byte) and the result through elector__grpc_error with a status taken from
 *     the input;
 *   - elector__grpc_timeout on an int64 from the input.
 *
 * fuzz_grpc_engine (-DFUZZ_ENGINE): the real engine (src/transport/, src/etcd/lease.c,
 *   watch.c) reading a fuzzed server byte stream, no etcd needed. The process
 *   listens on 127.0.0.1:0; per input a client is created with calls in flight,
 *   connects there, gets the server's SETTINGS (so it is READY and has sent its
 *   requests: the first call on stream 1, the next on 3, ...), then the fuzz bytes
 *   as what the server says, chunk by chunk, with a few passes of
 *   elector_etcd_run_once(.., 0) after each chunk; then EOF or reset, and free.
 *   Input: [0] flags, [1] separator byte, [2..] server bytes split at the
 *   separator. flags: bit 0 Range, bit 1 Txn, bit 2 LeaseGrant, bit 3 Watch,
 *   bit 4 LeaseKeepAlive (none set: Range), bit 5 end with a TCP reset instead of
 *   EOF, bit 6 callbacks free things (cancel the watch on its first event,
 *   free the client from a unary callback), bit 7 log in as user "u": an
 *   Authenticate call goes first, alone on stream 1; the others are sent once it
 *   has succeeded.
 *   Calls are submitted in the reverse order of that list (the newest call is at
 *   the head of the client's list), so with only one bit set it is stream 1; the
 *   Watch and LeaseKeepAlive streams also carry their first request.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "transport_private.h"
#include <etcdserverpb/rpc.pb-c.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifndef FUZZ_ENGINE

static const ProtobufCMessageDescriptor *const descs[] = {
    &etcdserverpb__range_response__descriptor,
    &etcdserverpb__watch_response__descriptor,
    &etcdserverpb__txn_response__descriptor,
    &etcdserverpb__lease_keep_alive_response__descriptor,
};

static void decode_all(const uint8_t *p, size_t n)
{
    for (size_t d = 0; d < sizeof(descs) / sizeof(descs[0]); d++) {
        /* The bounded decoder (what the engine uses) accepts nothing that
         * protobuf-c refuses; with a small budget it fails cleanly. */
        int why = 0;
        ProtobufCMessage *b = elector__decode(descs[d], p, n, 64u << 20, &why);
        ProtobufCMessage *small = elector__decode(descs[d], p, n, 256, &why);
        if (small) protobuf_c_message_free_unpacked(small, NULL);
        ProtobufCMessage *m = why == ELECTOR__DEC_TOO_DEEP
                                  ? NULL /* protobuf-c would recurse without end */
                                  : protobuf_c_message_unpack(descs[d], NULL, n, p);
        if (b && !m) abort();
        if (b) protobuf_c_message_free_unpacked(b, NULL);
        if (!m) continue;
        /* What decodes can be framed again, and the frame reads back whole. */
        elector__buf out = {0};
        if (elector__grpc_frame(&out, m) == 0) {
            const uint8_t *q;
            size_t qn;
            if (elector__grpc_next(&out, &q, &qn) != 1) abort();
            if (qn + 5 != elector__buf_avail(&out)) abort();
            if (qn != protobuf_c_message_get_packed_size(m)) abort();
            /* Not required to decode again: protobuf-c 1.4.1 keeps an unknown
             * field with a non-minimal tag 0 ("80 00"), repacks it as "00" and
             * then refuses that. Its problem, and elector never repacks replies. */
            ProtobufCMessage *m2 = protobuf_c_message_unpack(descs[d], NULL, qn, q);
            if (m2) protobuf_c_message_free_unpacked(m2, NULL);
        }
        elector__buf_free(&out);
        protobuf_c_message_free_unpacked(m, NULL);
    }
}

static void framing(const uint8_t *data, size_t size, uint8_t sep)
{
    elector__buf b = {0};
    size_t start = 0;
    bool broken = false;
    for (size_t i = 0; i <= size && !broken; i++) {
        if (i < size && data[i] != sep) continue;
        /* Each chunk on its own heap copy, as a socket read would hand it over. */
        size_t n = i - start;
        uint8_t *chunk = malloc(n ? n : 1);
        if (!chunk) abort();
        memcpy(chunk, data + start, n);
        start = i + 1;
        if (elector__buf_append(&b, chunk, n)) abort();
        free(chunk);
        for (;;) {
            const uint8_t *p = NULL;
            size_t len = 0;
            int rc = elector__grpc_next(&b, &p, &len);
            if (rc == 0) break;
            if (rc != 1) {
                if (rc != ELECTOR_EPROTO) abort();
                broken = true; /* the engine drops the stream here */
                break;
            }
            if (len > ELECTOR__GRPC_MAX_MSG || len + 5 > elector__buf_avail(&b)) abort();
            decode_all(p, len);
            elector__buf_consume(&b, 5 + len);
            if (b.off > b.len || b.len > b.cap) abort();
        }
    }
    elector__buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    uint8_t sep = data[0], param = data[1];
    data += 2;
    size -= 2;

    framing(data, size, sep);

    /* grpc-message as it arrives in a header value: not NUL-terminated. */
    char *in = malloc(size ? size : 1);
    char *out = malloc(param ? param : 1);
    if (!in || !out) abort();
    memcpy(in, data, size);
    elector__percent_decode(in, size, out, param);
    const char *msg = NULL;
    if (param) {
        if (strnlen(out, param) >= param) abort(); /* NUL within cap */
        msg = out;
    }
    int status = (int)(int8_t)(size ? data[0] : 0);
    if (param & 1) status &= 0x1f;
    int err = elector__grpc_error(status, msg);
    if ((status == 0) != (err == 0) || err > 0) abort();
    if (elector__grpc_error(status, NULL) > 0) abort();
    free(in);
    free(out);

    if (size >= 8) {
        int64_t ms;
        memcpy(&ms, data, sizeof(ms));
        char t[16];
        memset(t, 'x', sizeof(t));
        elector__grpc_timeout(ms, t);
        size_t tl = strnlen(t, sizeof(t));
        /* At most 8 digits and a unit. */
        if (tl >= sizeof(t) || tl < 2 || tl > 9) abort();
        if (t[tl - 1] != 'm' && t[tl - 1] != 'S') abort();
        for (size_t k = 0; k + 1 < tl; k++)
            if (t[k] < '0' || t[k] > '9') abort();
    }
    return 0;
}

#else /* FUZZ_ENGINE */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

enum {
    F_RANGE = 1,
    F_TXN = 2,
    F_GRANT = 4,
    F_WATCH = 8,
    F_KEEPALIVE = 16,
    F_RESET = 32,
    F_FREE_IN_CB = 64,
    F_AUTH = 128
};

static int lfd = -1;
static char endpoint[64];
static bool verbose; /* FUZZ_ENGINE_VERBOSE=1: one line per input on stderr */

static void die(const char *what)
{
    fprintf(stderr, "fuzz_grpc_engine: %s: %s\n", what, strerror(errno));
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    signal(SIGPIPE, SIG_IGN);
    verbose = getenv("FUZZ_ENGINE_VERBOSE") != NULL;
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (lfd < 0) die("socket");
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 64) ||
        getsockname(lfd, (struct sockaddr *)&a, &al))
        die("listen on 127.0.0.1");
    snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%d", ntohs(a.sin_port));
    return 0;
}

struct run {
    elector_etcd *e;
    uint8_t flags;
    elector_watch *w;
    bool freed; /* the client was freed from a callback */
    int unary_done, ka_done, watch_events;
};

static void unary_cb(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    struct run *r = ud;
    r->unary_done++;
    if ((err == 0) != (m != NULL)) abort(); /* documented contract */
    if (err > 0) abort();
    if (err) (void)strlen(elector_etcd_errstr(e));
    if (m && m->descriptor != &etcdserverpb__range_response__descriptor &&
        m->descriptor != &etcdserverpb__txn_response__descriptor &&
        m->descriptor != &etcdserverpb__lease_grant_response__descriptor)
        abort();
    /* Free from inside a callback (allowed by the API) on a successful reply. */
    if ((r->flags & F_FREE_IN_CB) && m && !r->freed) {
        r->freed = true;
        elector_etcd_free(e);
    }
}

static void watch_cb(elector_watch *w, int err, const Etcdserverpb__WatchResponse *resp,
                     void *ud)
{
    struct run *r = ud;
    r->watch_events++;
    if (err > 0) abort();
    if (err == 0 && !resp) abort();
    if (w != r->w) abort(); /* a callback for a watch we no longer have */
    if (err || (r->flags & F_FREE_IN_CB)) {
        elector_watch_cancel(w);
        r->w = NULL;
    }
}

static void ka_cb(elector_etcd *e, int err, int64_t lease, int64_t ttl, void *ud)
{
    (void)e;
    struct run *r = ud;
    r->ka_done++;
    if (err > 0 || lease != 0x1234) abort();
    if (err == 0 && ttl <= 0) abort();
}

static bool send_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && errno == EAGAIN) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            if (poll(&pf, 1, 1000) <= 0) return false;
            continue;
        }
        if (k <= 0) return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

static void drain(int fd)
{
    uint8_t junk[4096];
    while (recv(fd, junk, sizeof(junk), MSG_DONTWAIT) > 0) {
    }
}

static void drain_listener(void)
{
    int fd;
    while ((fd = accept(lfd, NULL, NULL)) >= 0) {
        struct linger l = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
        close(fd);
    }
}

/* Runs the client for a few passes without waiting. */
static void spin(struct run *r, int passes)
{
    for (int i = 0; i < passes && !r->freed; i++)
        if (elector_etcd_run_once(r->e, 0) == ELECTOR_ECLOSED) r->freed = true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    struct run r = {.flags = data[0]};
    uint8_t sep = data[1];
    data += 2;
    size -= 2;
    if (!(r.flags & 31)) r.flags |= F_RANGE;

    elector_etcd_config cfg;
    elector_etcd_config_init(&cfg);
    cfg.endpoints = endpoint;
    /* No timer may fire during a run: the outcome depends on the bytes only. */
    cfg.dial_timeout_ms = 60000;
    cfg.request_timeout_ms = 60000;
    cfg.keepalive_time_ms = 60000;
    cfg.keepalive_idle_ms = 60000;
    cfg.keepalive_timeout_ms = 60000;
    cfg.backoff_min_ms = 60000;
    cfg.backoff_max_ms = 60000;
    if (r.flags & F_AUTH) {
        cfg.user = "u";
        cfg.password = "p";
    }
    r.e = elector_etcd_new(&cfg);
    if (!r.e || elector_etcd_err(r.e)) abort();

    if (r.flags & F_RANGE) {
        Etcdserverpb__RangeRequest q = ETCDSERVERPB__RANGE_REQUEST__INIT;
        q.key.data = (uint8_t *)"k";
        q.key.len = 1;
        if (elector_etcd_call(r.e, ELECTOR_RPC_RANGE, &q.base, NULL, unary_cb, &r))
            abort();
    }
    if (r.flags & F_TXN) {
        Etcdserverpb__TxnRequest q = ETCDSERVERPB__TXN_REQUEST__INIT;
        if (elector_etcd_call(r.e, ELECTOR_RPC_TXN, &q.base, NULL, unary_cb, &r)) abort();
    }
    if (r.flags & F_GRANT) {
        Etcdserverpb__LeaseGrantRequest q = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
        q.ttl = 10;
        if (elector_etcd_call(r.e, ELECTOR_RPC_LEASE_GRANT, &q.base, NULL, unary_cb, &r))
            abort();
    }
    if (r.flags & F_WATCH) {
        Etcdserverpb__WatchCreateRequest q = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
        q.key.data = (uint8_t *)"k";
        q.key.len = 1;
        r.w = elector_etcd_watch(r.e, &q, watch_cb, &r);
        if (!r.w) abort();
    }
    if (r.flags & F_KEEPALIVE) {
        if (elector_etcd_keepalive(r.e, 0x1234, 0, ka_cb, &r)) abort();
    }

    /* Connect: the first pass starts connect(), the next sees it complete and
     * sends the client preface. */
    int sfd = -1;
    for (int i = 0; i < 50 && sfd < 0; i++) {
        if (elector_etcd_run_once(r.e, 20) == ELECTOR_ECLOSED) abort();
        sfd = accept(lfd, NULL, NULL);
    }
    if (sfd < 0) die("client did not connect");
    int one = 1;
    setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    static const uint8_t settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
    if (!send_all(sfd, settings, sizeof(settings))) die("send SETTINGS");
    for (int i = 0; i < 50 && !elector_etcd_current_endpoint(r.e)[0]; i++)
        if (elector_etcd_run_once(r.e, 20) == ELECTOR_ECLOSED) abort();
    if (!elector_etcd_current_endpoint(r.e)[0]) die("client not READY after SETTINGS");

    /* The server's words, chunk by chunk. */
    size_t start = 0;
    for (size_t i = 0; i <= size && !r.freed; i++) {
        if (i < size && data[i] != sep) continue;
        if (i > start && !send_all(sfd, data + start, i - start)) break;
        start = i + 1;
        drain(sfd);
        spin(&r, 3);
    }

    /* The end of the connection: EOF (shutdown) or a reset. */
    if (!r.freed) {
        if (r.flags & F_RESET) {
            struct linger l = {1, 0};
            setsockopt(sfd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
            close(sfd);
            sfd = -1;
        } else {
            shutdown(sfd, SHUT_WR);
        }
        drain(sfd);
        spin(&r, 3);
    }
    if (verbose) {
        elector_etcd_stats st;
        if (!r.freed) elector_etcd_get_stats(r.e, &st);
        fprintf(stderr,
                "engine: flags %#x: unary callbacks %d, keepalive callbacks %d, watch "
                "callbacks %d, %s%s%s\n",
                r.flags, r.unary_done, r.ka_done, r.watch_events,
                r.freed ? "freed in a callback" : "last error: ",
                r.freed ? "" : elector_strerror(elector_etcd_err(r.e)),
                r.freed ? "" : (st.disconnects ? " (disconnected)" : ""));
    }
    if (!r.freed) elector_etcd_free(r.e);
    if (sfd >= 0) {
        struct linger l = {1, 0};
        setsockopt(sfd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
        close(sfd);
    }
    drain_listener(); /* reconnects the client made before it was freed */
    return 0;
}

#endif
