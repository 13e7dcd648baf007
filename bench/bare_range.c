/* SPDX-License-Identifier: MIT */
/* bare_range — the floor for the client-overhead benchmark.
 *
 * N sequential unary etcd Range calls over one h2c connection (HTTP/2 with prior
 * knowledge), hand-rolled with nothing but plain sockets, nghttp2 and protobuf-c:
 * no libelector client code, only the generated etcd message types. This is what a
 * lean, single-purpose C implementation can reach; bench_range measures libelector
 * against it.
 *
 * Per call: pack the RangeRequest behind the 5-byte gRPC prefix, submit it, send all
 * pending nghttp2 output in one send() (HEADERS + DATA together), then poll() +
 * recv() + mem_recv() until the stream closes, send what nghttp2 owes (the PING ACK
 * that etcd's BDP ping asks for on every reply), check grpc-status 0 in the
 * trailers, unpack the RangeResponse. That is 2 send(), 1 poll(), 1 recv() per call
 * when the reply arrives in one segment.
 *
 *   bare_range --endpoint 127.0.0.1:2379 --n 2000 --warmup 200 --key bench-key
 *
 * prints one line:
 *   bench=bare calls=N us_mean=.. us_p50=.. us_p90=.. us_p99=.. us_max=.. total_ms=..
 *   cpu_us_per_call=.. rss_kb=.. threads=..
 * (latency per call from CLOCK_MONOTONIC; cpu = user+sys CPU of this process over
 * the measured calls, divided by N; VmRSS and Threads from /proc/self/status)
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <nghttp2/nghttp2.h>
#include <etcdserverpb/rpc.pb-c.h>
#include "range_common.h"

typedef struct conn {
    int fd;
    nghttp2_session *h2;
    const char *authority;
    /* the call in flight */
    int32_t sid;
    bool closed;
    uint32_t h2_err;
    int grpc_status; /* -1 until seen */
    const uint8_t *req;
    size_t req_len, req_off;
    uint8_t *resp; /* received DATA payload */
    size_t resp_len, resp_cap;
    /* outgoing bytes not yet accepted by the socket */
    uint8_t *wbuf;
    size_t wlen, wcap;
    uint8_t *reqbuf; /* framed request, reused */
    size_t reqbuf_cap;
} conn;

static void die(const char *what)
{
    fprintf(stderr, "bare_range: %s\n", what);
    exit(1);
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (!p) die("out of memory");
    return p;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- nghttp2 callbacks ---- */

static ssize_t read_body(nghttp2_session *s, int32_t sid, uint8_t *buf, size_t len,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    (void)s, (void)sid, (void)src;
    conn *c = ud;
    size_t n = c->req_len - c->req_off;
    if (n > len) n = len;
    memcpy(buf, c->req + c->req_off, n);
    c->req_off += n;
    if (c->req_off == c->req_len) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *ud)
{
    (void)s, (void)flags;
    conn *c = ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->hd.stream_id != c->sid) return 0;
    if (namelen == 11 && !memcmp(name, "grpc-status", 11)) {
        int v = 0;
        for (size_t i = 0; i < valuelen; i++) {
            if (value[i] < '0' || value[i] > '9') return 0;
            v = v * 10 + (value[i] - '0');
        }
        c->grpc_status = v;
    }
    return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t sid, const uint8_t *data,
                   size_t len, void *ud)
{
    (void)s, (void)flags;
    conn *c = ud;
    if (sid != c->sid) return 0;
    if (c->resp_len + len > c->resp_cap) {
        c->resp_cap = (c->resp_len + len) * 2;
        c->resp = xrealloc(c->resp, c->resp_cap);
    }
    memcpy(c->resp + c->resp_len, data, len);
    c->resp_len += len;
    return 0;
}

static int on_close(nghttp2_session *s, int32_t sid, uint32_t code, void *ud)
{
    (void)s;
    conn *c = ud;
    if (sid == c->sid) {
        c->closed = true;
        c->h2_err = code;
    }
    return 0;
}

/* ---- I/O ---- */

/* Gathers everything nghttp2 wants to send and writes it with as few send()s as the
 * socket allows (normally one per call: HEADERS + DATA, plus any ACKs/updates). */
static void flush(conn *c)
{
    for (;;) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(c->h2, &data);
        if (n < 0) die(nghttp2_strerror((int)n));
        if (n == 0) break;
        if (c->wlen + (size_t)n > c->wcap) {
            c->wcap = (c->wlen + (size_t)n) * 2;
            c->wbuf = xrealloc(c->wbuf, c->wcap);
        }
        memcpy(c->wbuf + c->wlen, data, (size_t)n);
        c->wlen += (size_t)n;
    }
    size_t off = 0;
    while (off < c->wlen) {
        ssize_t n = send(c->fd, c->wbuf + off, c->wlen - off, MSG_NOSIGNAL);
        if (n > 0) {
            off += (size_t)n;
        } else if (n < 0 && errno == EAGAIN) {
            struct pollfd p = {.fd = c->fd, .events = POLLOUT};
            if (poll(&p, 1, -1) < 0 && errno != EINTR) die("poll");
        } else if (!(n < 0 && errno == EINTR)) {
            die("send failed");
        }
    }
    c->wlen = 0;
}

static void read_some(conn *c)
{
    uint8_t buf[16384];
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (poll(&p, 1, -1) < 0) {
        if (errno == EINTR) return;
        die("poll");
    }
    ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
    if (n == 0) die("connection closed by the server");
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) return;
        die("recv failed");
    }
    ssize_t rc = nghttp2_session_mem_recv(c->h2, buf, (size_t)n);
    if (rc < 0) die(nghttp2_strerror((int)rc));
}

static void conn_open(conn *c, const char *endpoint)
{
    memset(c, 0, sizeof(*c));
    c->authority = endpoint;
    const char *colon = strrchr(endpoint, ':');
    if (!colon) die("endpoint must be HOST:PORT");
    char host[256];
    size_t hl = (size_t)(colon - endpoint);
    if (hl >= sizeof(host)) die("host too long");
    memcpy(host, endpoint, hl);
    host[hl] = 0;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, colon + 1, &hints, &ai)) die("cannot resolve endpoint");
    c->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0 || connect(c->fd, ai->ai_addr, ai->ai_addrlen) < 0)
        die("cannot connect");
    freeaddrinfo(ai);
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    /* Blocking connect above; non-blocking from here on, waits are poll(). */
    int fl = fcntl(c->fd, F_GETFL);
    if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) < 0)
        die("cannot set O_NONBLOCK");

    nghttp2_session_callbacks *cbs;
    if (nghttp2_session_callbacks_new(&cbs)) die("out of memory");
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_close);
    if (nghttp2_session_client_new(&c->h2, cbs, c)) die("out of memory");
    nghttp2_session_callbacks_del(cbs);
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0}};
    nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, 1);
    flush(c); /* preface + SETTINGS; the server's SETTINGS is read with the first reply */
}

#define NV(n, v, vl)                                                                     \
    {                                                                                    \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vl), NGHTTP2_NV_FLAG_NONE        \
    }

/* One unary call. Returns the unpacked response (free with
 * protobuf_c_message_free_unpacked), dies on any failure. */
static ProtobufCMessage *unary(conn *c, const char *path, const ProtobufCMessage *req,
                               const ProtobufCMessageDescriptor *resp_desc)
{
    size_t n = protobuf_c_message_get_packed_size(req);
    if (5 + n > c->reqbuf_cap) {
        c->reqbuf_cap = 5 + n;
        c->reqbuf = xrealloc(c->reqbuf, c->reqbuf_cap);
    }
    uint8_t *p = c->reqbuf;
    p[0] = 0;
    p[1] = (uint8_t)(n >> 24);
    p[2] = (uint8_t)(n >> 16);
    p[3] = (uint8_t)(n >> 8);
    p[4] = (uint8_t)n;
    protobuf_c_message_pack(req, p + 5);
    c->req = p;
    c->req_len = 5 + n;
    c->req_off = 0;

    nghttp2_nv nv[] = {
        NV(":method", "POST", 4),
        NV(":scheme", "http", 4),
        NV(":path", path, strlen(path)),
        NV(":authority", c->authority, strlen(c->authority)),
        NV("content-type", "application/grpc", 16),
        NV("te", "trailers", 8),
    };
    nghttp2_data_provider dp = {.read_callback = read_body};
    c->closed = false;
    c->h2_err = 0;
    c->grpc_status = -1;
    c->resp_len = 0;
    c->sid =
        nghttp2_submit_request(c->h2, NULL, nv, sizeof(nv) / sizeof(nv[0]), &dp, NULL);
    if (c->sid < 0) die(nghttp2_strerror(c->sid));
    while (!c->closed) {
        flush(c);
        if (c->closed) break;
        read_some(c);
    }
    /* Send what the reply made nghttp2 owe (etcd's grpc-go server puts a BDP PING
     * before every reply) now, as any client must before it goes idle, rather than
     * piggybacking it on the next request. */
    flush(c);
    if (c->h2_err || c->grpc_status != 0) {
        fprintf(stderr, "bare_range: %s failed: h2 error %u, grpc-status %d\n", path,
                c->h2_err, c->grpc_status);
        exit(1);
    }
    if (c->resp_len < 5 || c->resp[0] != 0) die("bad gRPC reply framing");
    uint32_t m = (uint32_t)c->resp[1] << 24 | (uint32_t)c->resp[2] << 16 |
                 (uint32_t)c->resp[3] << 8 | c->resp[4];
    if (m != c->resp_len - 5) die("bad gRPC reply length");
    ProtobufCMessage *r = protobuf_c_message_unpack(resp_desc, NULL, m, c->resp + 5);
    if (!r) die("undecodable reply");
    return r;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: bare_range [--endpoint HOST:PORT] [--n N] [--warmup W] [--key K]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    bu_range_opts o = {.mode = NULL};
    if (!bu_range_args(argc, argv, &o)) usage();
    int n = o.n, warmup = o.warmup;

    conn c;
    conn_open(&c, o.endpoint);

    Etcdserverpb__PutRequest put;
    Etcdserverpb__RangeRequest req;
    bu_range_requests(o.key, &put, &req);
    protobuf_c_message_free_unpacked(unary(&c, "/etcdserverpb.KV/Put", &put.base,
                                           &etcdserverpb__put_response__descriptor),
                                     NULL);

    int64_t *lat = malloc(sizeof(int64_t) * (size_t)n);
    if (!lat) die("out of memory");
    int64_t t_start = 0, c_start = 0;
    for (int i = 0; i < warmup + n; i++) {
        if (i == warmup) {
            t_start = now_ns();
            c_start = bu_cpu_us();
        }
        int64_t t0 = now_ns();
        Etcdserverpb__RangeResponse *r = (Etcdserverpb__RangeResponse *)unary(
            &c, "/etcdserverpb.KV/Range", &req.base,
            &etcdserverpb__range_response__descriptor);
        if (r->n_kvs != 1) die("Range did not return exactly one kv");
        protobuf_c_message_free_unpacked(&r->base, NULL);
        int64_t t1 = now_ns();
        if (i >= warmup) lat[i - warmup] = t1 - t0;
    }
    int64_t total = now_ns() - t_start, cpu = bu_cpu_us() - c_start;
    bu_report_calls("bare", lat, n, total, cpu);

    nghttp2_session_del(c.h2);
    close(c.fd);
    free(c.wbuf);
    free(c.resp);
    free(c.reqbuf);
    free(lat);
    return 0;
}
