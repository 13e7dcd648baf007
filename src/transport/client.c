/* The etcd client engine: one TCP or TLS connection at a time to one endpoint of
 * the list, HTTP/2 through nghttp2 (which does no I/O: we feed it bytes), gRPC
 * unary calls and bidirectional streams on top.
 *
 * Connection states walk IDLE -> CONNECTING -> TLS (https only) -> SETTINGS ->
 * READY, and back to IDLE (possibly after a backoff) when anything fails. The
 * connection counts as up only once the server's SETTINGS frame arrived, so a
 * member that accepts TCP but is frozen (SIGSTOP) is caught by the dial timeout.
 *
 * User callbacks never run inside nghttp2 callbacks: those only record what
 * happened on a call and put it on the ready queue, which dispatch() drains once
 * nghttp2 has returned. Calls are freed only in reap(), outside any callback. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <nghttp2/nghttp2.h>
#include "transport_internal.h"
#include "ssl_lazy.h"

enum conn_state { C_IDLE, C_CONNECTING, C_TLS, C_SETTINGS, C_READY };
enum call_state { CS_QUEUED, CS_ACTIVE, CS_DONE };

struct elector_stream {
    struct elector_stream *next, *prev; /* all live calls of the client */
    struct elector_stream *ready_next;  /* ready queue link */
    elector_etcd *etcd;
    const elector__rpc_desc *rpc;
    elector_rpc rpc_id;
    enum call_state state;
    int32_t sid;
    int64_t deadline_ms; /* unary only; 0 = none */
    int64_t timeout_ms;
    bool stream, require_leader, is_auth, auth_retried;
    bool queued_ready;   /* on the ready queue */
    bool user_closed;    /* stream closed by its owner: no more callbacks */
    bool net_closed;     /* nghttp2 closed the HTTP/2 stream */
    bool deferred;       /* data provider is waiting for bytes */
    bool ended;          /* final callback delivered (or owed none) */
    uint32_t h2_error;
    elector__buf out; /* framed request bytes; out.off = bytes handed to nghttp2 */
    elector__buf in;  /* received DATA, split into gRPC messages */
    /* Every message prefix is checked as DATA arrives: rx_next is the stream
     * offset of the next prefix, rx_total the bytes received so far. */
    uint64_t rx_total, rx_next;
    unsigned rx_msgs;
    int rx_err;       /* the peer broke the protocol: the call ends with it */
    char rx_msg[320];
    int http_status;
    int grpc_status; /* -1 until the trailers (or a trailers-only reply) arrive */
    char grpc_msg[256];
    elector_etcd_cb ucb;
    elector_stream_cb scb;
    void *ud;
};
typedef struct elector_stream call;

struct elector_etcd {
    elector_etcd_config cfg;
    char *s_endpoints, *s_cacert, *s_cert, *s_key, *s_user, *s_password;
    elector__endpoint *eps;
    int nep, ep;
    int epfd, evfd, tfd, fd;
    int64_t wake_ms; /* when tfd is armed to fire (INT64_MAX: not armed) */
    uint32_t ep_events;
    SSL_CTX *ssl_ctx;
    SSL *ssl;
    nghttp2_session *h2;
    enum conn_state cstate;
    int64_t dial_deadline_ms, retry_at_ms;
    bool draining;    /* GOAWAY received: no new streams here */
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
    int err, init_err; /* init_err: the handle is unusable (bad config) */
    char errstr[512];
    int cb_depth;
    bool free_pending;
    uint32_t rnd;
    struct elector__ka_state *ka;
    struct elector__watch_state *watch;
    elector__timer *timers; /* sorted by due time */
    elector_etcd_stats stats;
};

static void conn_fail(elector_etcd *e, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

struct sync_ctx {
    bool done;
    int err;
    ProtobufCMessage *resp;
};
static void sync_cb(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud);

/* ---------------------------------------------------------------- errors, misc */

int elector__set_err(elector_etcd *e, int err, const char *fmt, ...)
{
    e->err = err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->errstr, sizeof(e->errstr), fmt, ap);
    va_end(ap);
    return err;
}

int elector_etcd_err(const elector_etcd *e)
{
    return e ? e->err : ELECTOR_ENOMEM;
}

const char *elector_etcd_errstr(const elector_etcd *e)
{
    return e ? e->errstr : "out of memory";
}

int elector_etcd_fd(const elector_etcd *e)
{
    return e->epfd;
}

const char *elector_etcd_current_endpoint(const elector_etcd *e)
{
    return e->cstate == C_READY ? e->eps[e->ep].authority : "";
}

static bool is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6) ||
               (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
    return strcasecmp(host, "localhost") == 0 || strcasecmp(host, "localhost.") == 0;
}

int elector_etcd_endpoint_info(const elector_etcd *e, int i, elector_endpoint_info *out)
{
    if (!e || i < 0 || i >= e->nep || !out) return ELECTOR_EINVAL;
    const elector__endpoint *ep = &e->eps[i];
    out->authority = ep->authority;
    out->host = ep->host;
    out->tls = ep->tls;
    out->loopback = is_loopback(ep->host);
    return 0;
}

struct elector__ka_state **elector__etcd_ka(elector_etcd *e)
{
    return &e->ka;
}

struct elector__watch_state **elector__etcd_watch(elector_etcd *e)
{
    return &e->watch;
}

/* The auth token is a credential: wiped, not just freed. */
void elector__drop_token(elector_etcd *e)
{
    if (e->token) explicit_bzero(e->token, strlen(e->token));
    free(e->token);
    e->token = NULL;
}

void elector__enter_cb(elector_etcd *e)
{
    e->cb_depth++;
}

bool elector__leave_cb(elector_etcd *e)
{
    e->cb_depth--;
    return e->free_pending;
}

static uint32_t next_rnd(elector_etcd *e)
{
    /* xorshift32: jitter only, no need for quality. */
    uint32_t x = e->rnd;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return e->rnd = x;
}

/* ---------------------------------------------------------------- timers */

/* Arms the timerfd (CLOCK_BOOTTIME, absolute) at due_ms, so that the client's fd
 * becomes readable when something is due. poll() and epoll_wait() timeouts run
 * on CLOCK_MONOTONIC, which stops while the host is suspended: after a resume
 * they would wake up to a whole timeout late on the deadline clock. The timerfd
 * fires on time. INT64_MAX disarms it. */
static void arm_wake(elector_etcd *e, int64_t due_ms)
{
    if (e->tfd < 0 || due_ms == e->wake_ms) return;
    struct itimerspec its = {{0, 0}, {0, 0}};
    if (due_ms != INT64_MAX) {
        if (due_ms < 1) due_ms = 1; /* 0 would disarm */
        its.it_value.tv_sec = due_ms / 1000;
        its.it_value.tv_nsec = (due_ms % 1000) * 1000000;
    }
    if (timerfd_settime(e->tfd, TFD_TIMER_ABSTIME, &its, NULL) == 0) e->wake_ms = due_ms;
}

void elector__timer_disarm(elector_etcd *e, elector__timer *t)
{
    if (!t->armed) return;
    for (elector__timer **pp = &e->timers; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    t->armed = false;
}

void elector__timer_arm(elector_etcd *e, elector__timer *t, int64_t due_ms,
                        elector__timer_fn fn, void *ud)
{
    elector__timer_disarm(e, t);
    t->due_ms = due_ms;
    t->fn = fn;
    t->ud = ud;
    t->armed = true;
    elector__timer **pp = &e->timers;
    while (*pp && (*pp)->due_ms <= due_ms) pp = &(*pp)->next;
    t->next = *pp;
    *pp = t;
    if (due_ms < e->wake_ms) arm_wake(e, due_ms); /* loops that only poll the fd */
}

/* Runs due timers one at a time: a timer callback may arm or disarm others. */
static void run_timers(elector_etcd *e)
{
    elector__timer *t;
    while (!e->free_pending && (t = e->timers) && t->due_ms <= e->now_ms) {
        e->timers = t->next;
        t->armed = false;
        t->fn(t, t->ud);
    }
}

/* ---------------------------------------------------------------- config, new */

void elector_etcd_config_init(elector_etcd_config *c)
{
    memset(c, 0, sizeof(*c));
    c->endpoints = "127.0.0.1:2379";
    c->dial_timeout_ms = 5000;
    c->request_timeout_ms = 5000;
    c->keepalive_time_ms = 1000;
    c->keepalive_idle_ms = 10000;
    c->keepalive_timeout_ms = 2000;
    c->backoff_min_ms = 50;
    c->backoff_max_ms = 2000;
}

/* OpenSSL 3 has no reason string for system errors (a missing file): fall back
 * to the full error text. */
static const char *ssl_err_text(void)
{
    static char buf[256];
    unsigned long ec = ERR_get_error();
    const char *r = ec ? ERR_reason_error_string(ec) : NULL;
    if (r) return r;
    if (!ec) return "unknown error";
    ERR_error_string_n(ec, buf, sizeof(buf));
    return buf;
}

static int tls_setup(elector_etcd *e)
{
    char why[300];
    if (elector__ssl_load(why, sizeof(why))) return elector__set_err(e, ELECTOR_ETLS, "%s", why);
    e->ssl_ctx = SSL_CTX_new(TLS_client_method());
    if (!e->ssl_ctx) return elector__set_err(e, ELECTOR_ETLS, "cannot create TLS context");
    SSL_CTX_set_verify(e->ssl_ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_mode(e->ssl_ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                                     SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    static const unsigned char alpn[] = "\x02h2";
    /* SSL_CTX_set_alpn_protos returns 0 on success, unlike its neighbours. */
    if (SSL_CTX_set_min_proto_version(e->ssl_ctx, TLS1_2_VERSION) != 1 ||
        SSL_CTX_set_alpn_protos(e->ssl_ctx, alpn, sizeof(alpn) - 1) != 0)
        return elector__set_err(e, ELECTOR_ETLS, "cannot set up TLS (version, ALPN): %s",
                                ssl_err_text());
    int ok = e->s_cacert ? SSL_CTX_load_verify_locations(e->ssl_ctx, e->s_cacert, NULL)
                         : SSL_CTX_set_default_verify_paths(e->ssl_ctx);
    if (ok != 1)
        return elector__set_err(e, ELECTOR_EINVAL, "cannot load CA file '%s': %s",
                                e->s_cacert ? e->s_cacert : "(system)", ssl_err_text());
    if (e->s_cert && SSL_CTX_use_certificate_chain_file(e->ssl_ctx, e->s_cert) != 1)
        return elector__set_err(e, ELECTOR_EINVAL, "cannot load client certificate '%s': %s",
                                e->s_cert, ssl_err_text());
    const char *key = e->s_key ? e->s_key : e->s_cert;
    if (e->s_cert &&
        (SSL_CTX_use_PrivateKey_file(e->ssl_ctx, key, SSL_FILETYPE_PEM) != 1 ||
         SSL_CTX_check_private_key(e->ssl_ctx) != 1))
        return elector__set_err(e, ELECTOR_EINVAL,
                                "cannot use client key '%s' with certificate '%s': %s", key,
                                e->s_cert, ssl_err_text());
    return 0;
}

static int copy_config(elector_etcd *e, const elector_etcd_config *cfg)
{
    e->cfg = *cfg;
    e->s_endpoints = elector__strdup(cfg->endpoints ? cfg->endpoints : "127.0.0.1:2379");
    e->s_cacert = elector__strdup(cfg->cacert);
    e->s_cert = elector__strdup(cfg->cert);
    e->s_key = elector__strdup(cfg->key);
    e->s_user = elector__strdup(cfg->user);
    e->s_password = elector__strdup(cfg->password ? cfg->password : "");
    if (!e->s_endpoints || (cfg->cacert && !e->s_cacert) || (cfg->cert && !e->s_cert) ||
        (cfg->key && !e->s_key) || (cfg->user && !e->s_user) || !e->s_password)
        return ELECTOR_ENOMEM;
    if (e->cfg.dial_timeout_ms <= 0) e->cfg.dial_timeout_ms = 5000;
    if (e->cfg.request_timeout_ms <= 0) e->cfg.request_timeout_ms = 5000;
    if (e->cfg.keepalive_time_ms <= 0) e->cfg.keepalive_time_ms = 1000;
    if (e->cfg.keepalive_idle_ms <= 0) e->cfg.keepalive_idle_ms = 10000;
    if (e->cfg.keepalive_timeout_ms <= 0) e->cfg.keepalive_timeout_ms = 2000;
    if (e->cfg.backoff_min_ms <= 0) e->cfg.backoff_min_ms = 50;
    if (e->cfg.backoff_max_ms < e->cfg.backoff_min_ms) e->cfg.backoff_max_ms = 2000;
    if (e->cfg.max_recv_msg_bytes == 0) e->cfg.max_recv_msg_bytes = ELECTOR__RECV_MSG_DEFAULT;
    if (e->cfg.max_recv_msg_bytes > ELECTOR__GRPC_MAX_MSG)
        e->cfg.max_recv_msg_bytes = ELECTOR__GRPC_MAX_MSG;
    if (e->cfg.max_decode_bytes == 0)
        e->cfg.max_decode_bytes = e->cfg.max_recv_msg_bytes * ELECTOR__DECODE_FACTOR;
    return 0;
}

elector_etcd *elector_etcd_new(const elector_etcd_config *cfg)
{
    elector_etcd_config defaults;
    if (!cfg) {
        elector_etcd_config_init(&defaults);
        cfg = &defaults;
    }
    elector_etcd *e = calloc(1, sizeof(*e));
    if (!e) return NULL;
    e->fd = e->evfd = e->epfd = e->tfd = -1;
    e->wake_ms = INT64_MAX;
    e->rnd = (uint32_t)elector_now_ns() | 1u;
    if (copy_config(e, cfg)) {
        e->init_err = elector__set_err(e, ELECTOR_ENOMEM, "out of memory");
        return e;
    }
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    e->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    e->tfd = timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK | TFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = e->evfd};
    struct epoll_event tev = {.events = EPOLLIN, .data.fd = e->tfd};
    if (e->epfd < 0 || e->evfd < 0 || e->tfd < 0 ||
        epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->evfd, &ev) < 0 ||
        epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->tfd, &tev) < 0) {
        e->init_err = elector__set_err(e, ELECTOR_ENOMEM,
                                       "cannot create epoll/eventfd/timerfd: %s",
                                       strerror(errno));
        return e;
    }
    bool tls_default = e->s_cacert || e->s_cert;
    char msg[300];
    int n = elector__endpoints_parse(e->s_endpoints, tls_default, &e->eps, msg, sizeof(msg));
    if (n < 0) {
        e->init_err = elector__set_err(e, n, "%s", msg);
        return e;
    }
    e->nep = n;
    bool any_tls = false;
    for (int i = 0; i < n; i++) any_tls |= e->eps[i].tls;
    if (any_tls) e->init_err = tls_setup(e);
    return e;
}

/* ---------------------------------------------------------------- calls: list */

static void list_add(elector_etcd *e, call *c)
{
    c->next = e->calls;
    c->prev = NULL;
    if (e->calls) e->calls->prev = c;
    e->calls = c;
}

static void list_del(elector_etcd *e, call *c)
{
    if (c->prev) c->prev->next = c->next;
    else e->calls = c->next;
    if (c->next) c->next->prev = c->prev;
}

static void make_ready(elector_etcd *e, call *c)
{
    if (c->queued_ready) return;
    c->queued_ready = true;
    c->ready_next = NULL;
    if (e->ready_tail) e->ready_tail->ready_next = c;
    else e->ready_head = c;
    e->ready_tail = c;
}

static void call_free(call *c)
{
    /* An Authenticate request holds the password, its reply the token. */
    if (c->is_auth && c->out.data) explicit_bzero(c->out.data, c->out.cap);
    if (c->is_auth && c->in.data) explicit_bzero(c->in.data, c->in.cap);
    elector__buf_free(&c->out);
    elector__buf_free(&c->in);
    free(c);
}

/* ---------------------------------------------------------------- nghttp2 glue */

static ssize_t data_read_cb(nghttp2_session *s, int32_t sid, uint8_t *buf, size_t len,
                            uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    (void)s, (void)sid, (void)ud;
    call *c = src->ptr;
    size_t n = elector__buf_avail(&c->out);
    if (n > len) n = len;
    if (n) memcpy(buf, elector__buf_head(&c->out), n);
    if (c->stream) {
        elector__buf_consume(&c->out, n);
    } else {
        c->out.off += n; /* keep the bytes: a refused unary call is sent again */
    }
    if (elector__buf_avail(&c->out) == 0) {
        if (!c->stream) {
            *flags |= NGHTTP2_DATA_FLAG_EOF;
        } else if (n == 0) {
            c->deferred = true;
            return NGHTTP2_ERR_DEFERRED;
        }
    }
    return (ssize_t)n;
}

static call *call_of(nghttp2_session *s, int32_t sid)
{
    return nghttp2_session_get_stream_user_data(s, sid);
}

static int on_header_cb(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
                        size_t namelen, const uint8_t *value, size_t valuelen,
                        uint8_t flags, void *ud)
{
    (void)flags, (void)ud;
    if (f->hd.type != NGHTTP2_HEADERS) return 0;
    call *c = call_of(s, f->hd.stream_id);
    if (!c) return 0;
    char v[32];
    size_t vn = valuelen < sizeof(v) - 1 ? valuelen : sizeof(v) - 1;
    memcpy(v, value, vn);
    v[vn] = 0;
    if (namelen == 7 && !memcmp(name, ":status", 7)) {
        c->http_status = atoi(v);
    } else if (namelen == 11 && !memcmp(name, "grpc-status", 11)) {
        c->grpc_status = atoi(v);
    } else if (namelen == 12 && !memcmp(name, "grpc-message", 12)) {
        elector__percent_decode((const char *)value, valuelen, c->grpc_msg,
                                sizeof(c->grpc_msg));
    }
    return 0;
}

/* The peer broke the protocol on call c: reset its stream, drop what it sent and
 * let dispatch() end the call with ELECTOR_EPROTO. From nghttp2 callbacks too. */
static void rx_violation(call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rx_violation(call *c, const char *fmt, ...)
{
    elector_etcd *e = c->etcd;
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(c->rx_msg, sizeof(c->rx_msg), "%s: %s from %s; stream reset", c->rpc->path, what,
             e->eps[e->ep].authority);
    c->rx_err = ELECTOR_EPROTO;
    if (c->sid && e->h2) {
        nghttp2_submit_rst_stream(e->h2, 0, c->sid, NGHTTP2_CANCEL);
        nghttp2_session_set_stream_user_data(e->h2, c->sid, NULL);
    }
    c->sid = 0;
    elector__buf_free(&c->in);
    make_ready(e, c);
}

/* Checks each gRPC message prefix as soon as its 5 bytes are in, before the
 * message itself is buffered: a peer announcing 4 GiB is stopped at once, and no
 * reply can make the client hold more than max_recv_msg_bytes + one read. */
static void rx_scan(call *c)
{
    const elector_etcd *e = c->etcd;
    while (!c->rx_err && c->rx_next + 5 <= c->rx_total) {
        /* Unconsumed bytes start at this stream offset; a prefix not yet
         * checked is never consumed, so it is in the buffer. */
        uint64_t base = c->rx_total - elector__buf_avail(&c->in);
        const uint8_t *p = elector__buf_head(&c->in) + (c->rx_next - base);
        uint32_t n = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
        if (!c->stream && c->rx_msgs > 0)
            rx_violation(c, "a second message in a unary reply");
        else if (p[0] != 0)
            rx_violation(c, "compressed message (flag %u), never asked for", p[0]);
        else if (n > e->cfg.max_recv_msg_bytes)
            rx_violation(c, "message of %lu bytes exceeds the limit of %zu bytes "
                         "(max_recv_msg_bytes)", (unsigned long)n, e->cfg.max_recv_msg_bytes);
        c->rx_msgs++;
        c->rx_next += 5 + (uint64_t)n;
    }
}

static int on_data_cb(nghttp2_session *s, uint8_t flags, int32_t sid, const uint8_t *data,
                      size_t len, void *ud)
{
    (void)flags, (void)ud;
    call *c = call_of(s, sid);
    if (!c || c->user_closed || c->rx_err) return 0;
    if (elector__buf_append(&c->in, data, len)) return NGHTTP2_ERR_CALLBACK_FAILURE;
    c->rx_total += len;
    rx_scan(c);
    if (c->stream && !c->rx_err) make_ready(c->etcd, c);
    return 0;
}

static int on_close_cb(nghttp2_session *s, int32_t sid, uint32_t code, void *ud)
{
    (void)ud;
    call *c = call_of(s, sid);
    if (!c) return 0;
    c->net_closed = true;
    c->h2_error = code;
    c->sid = 0;
    make_ready(c->etcd, c);
    return 0;
}

static int on_frame_cb(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    (void)s;
    elector_etcd *e = ud;
    e->last_recv_ms = e->now_ms;
    switch (f->hd.type) {
    case NGHTTP2_SETTINGS:
        if (!(f->hd.flags & NGHTTP2_FLAG_ACK) && e->cstate == C_SETTINGS) {
            e->cstate = C_READY;
            e->stats.connects++;
            e->round_failures = 0;
            e->backoffs = 0;
        }
        break;
    case NGHTTP2_PING:
        if (f->hd.flags & NGHTTP2_FLAG_ACK) e->ping_out = false;
        break;
    case NGHTTP2_GOAWAY:
        e->draining = true;
        break;
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA:
        e->data_since_ping = true;
        break;
    }
    return 0;
}

static int h2_start(elector_etcd *e)
{
    nghttp2_session_callbacks *cbs;
    if (nghttp2_session_callbacks_new(&cbs)) return ELECTOR_ENOMEM;
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header_cb);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_cb);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_close_cb);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_cb);
    int rc = nghttp2_session_client_new(&e->h2, cbs, e);
    nghttp2_session_callbacks_del(cbs);
    if (rc) return ELECTOR_ENOMEM;
    /* Large windows so a 1 MiB value does not wait on WINDOW_UPDATE round trips. */
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 4 << 20},
    };
    nghttp2_submit_settings(e->h2, NGHTTP2_FLAG_NONE, iv, 2);
    nghttp2_session_set_local_window_size(e->h2, NGHTTP2_FLAG_NONE, 0, 16 << 20);
    e->cstate = C_SETTINGS;
    return 0;
}

/* ---------------------------------------------------------------- socket I/O */

static void set_interest(elector_etcd *e)
{
    if (e->fd < 0) return;
    uint32_t want = EPOLLIN | (e->want_write ? EPOLLOUT : 0);
    if (want == e->ep_events) return;
    struct epoll_event ev = {.events = want, .data.fd = e->fd};
    epoll_ctl(e->epfd, e->ep_events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, e->fd, &ev);
    e->ep_events = want;
}

/* > 0 bytes, 0 would block, < 0 error (conn_fail already called). */
static ssize_t io_read(elector_etcd *e, uint8_t *buf, size_t len)
{
    if (e->ssl) {
        ERR_clear_error();
        errno = 0;
        int n = SSL_read(e->ssl, buf, (int)len);
        if (n > 0) return n;
        int se = SSL_get_error(e->ssl, n);
        if (se == SSL_ERROR_WANT_READ || se == SSL_ERROR_WANT_WRITE) return 0;
        if (se == SSL_ERROR_ZERO_RETURN || (se == SSL_ERROR_SYSCALL && n == 0))
            conn_fail(e, ELECTOR_EUNAVAILABLE, "connection closed by the server");
        else if (se == SSL_ERROR_SSL && e->cstate != C_READY) {
            /* An alert right after our side of the handshake: the server
             * refused us (TLS 1.3 checks the client certificate then). */
            const char *why = ERR_reason_error_string(ERR_peek_last_error());
            conn_fail(e, ELECTOR_ETLS, "TLS handshake refused by the server: %s",
                      why ? why : "alert");
        }
        else if (se == SSL_ERROR_SYSCALL && errno)
            conn_fail(e, ELECTOR_EUNAVAILABLE, "TLS read failed: %s", strerror(errno));
        else
            conn_fail(e, ELECTOR_EUNAVAILABLE, "TLS read failed: %s", ssl_err_text());
        return -1;
    }
    ssize_t n = recv(e->fd, buf, len, 0);
    if (n > 0) return n;
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    if (n == 0) conn_fail(e, ELECTOR_EUNAVAILABLE, "connection closed by the server");
    else conn_fail(e, ELECTOR_EUNAVAILABLE, "read failed: %s", strerror(errno));
    return -1;
}

static ssize_t io_write(elector_etcd *e, const uint8_t *buf, size_t len)
{
    if (e->ssl) {
        ERR_clear_error();
        errno = 0;
        int n = SSL_write(e->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
        if (n > 0) return n;
        int se = SSL_get_error(e->ssl, n);
        if (se == SSL_ERROR_WANT_READ || se == SSL_ERROR_WANT_WRITE) return 0;
        if (se == SSL_ERROR_SYSCALL && errno)
            conn_fail(e, ELECTOR_EUNAVAILABLE, "TLS write failed: %s", strerror(errno));
        else
            conn_fail(e, ELECTOR_EUNAVAILABLE, "TLS write failed: %s", ssl_err_text());
        return -1;
    }
    ssize_t n = send(e->fd, buf, len, MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno == EAGAIN || errno == EINTR) return 0;
    conn_fail(e, ELECTOR_EUNAVAILABLE, "write failed: %s", strerror(errno));
    return -1;
}

/* Hands nghttp2's output to the socket. nghttp2 returns one frame at a time;
 * gathering them first makes a request (HEADERS + DATA) one send(), not two. */
static void flush(elector_etcd *e)
{
    e->want_write = false;
    while (e->h2) {
        while (elector__buf_avail(&e->wbuf) < 65536) {
            const uint8_t *data;
            ssize_t len = nghttp2_session_mem_send(e->h2, &data);
            if (len < 0) {
                conn_fail(e, ELECTOR_EPROTO, "HTTP/2: %s", nghttp2_strerror((int)len));
                return;
            }
            if (len == 0) break;
            if (elector__buf_append(&e->wbuf, data, (size_t)len)) {
                conn_fail(e, ELECTOR_ENOMEM, "out of memory");
                return;
            }
        }
        if (!elector__buf_avail(&e->wbuf)) return;
        ssize_t n = io_write(e, elector__buf_head(&e->wbuf), elector__buf_avail(&e->wbuf));
        if (n < 0) return;
        if (n == 0) {
            e->want_write = true;
            return;
        }
        /* Sent bytes may hold a password or token: do not leave them behind. */
        explicit_bzero(e->wbuf.data + e->wbuf.off, (size_t)n);
        elector__buf_consume(&e->wbuf, (size_t)n);
    }
}

static void do_read(elector_etcd *e)
{
    uint8_t buf[16384];
    for (int i = 0; i < 64 && e->h2; i++) {
        ssize_t n = io_read(e, buf, sizeof(buf));
        if (n <= 0) return;
        ssize_t rc = nghttp2_session_mem_recv(e->h2, buf, (size_t)n);
        if (rc < 0) {
            conn_fail(e, ELECTOR_EPROTO, "HTTP/2: %s", nghttp2_strerror((int)rc));
            return;
        }
        if ((size_t)n < sizeof(buf) && !e->ssl) return; /* drained */
    }
}

/* ---------------------------------------------------------------- connection */

static void close_transport(elector_etcd *e)
{
    if (e->h2) nghttp2_session_del(e->h2);
    e->h2 = NULL;
    if (e->ssl) SSL_free(e->ssl);
    e->ssl = NULL;
    if (e->fd >= 0) {
        epoll_ctl(e->epfd, EPOLL_CTL_DEL, e->fd, NULL);
        close(e->fd);
    }
    e->fd = -1;
    e->ep_events = 0;
    e->want_write = false;
    e->draining = false;
    e->ping_out = false;
    e->authenticating = false;
    if (e->wbuf.data) explicit_bzero(e->wbuf.data, e->wbuf.cap);
    elector__buf_free(&e->wbuf);
}

static void end_call(call *c, int err, const char *msg);

/* Every active call loses its HTTP/2 stream: unary calls that the server never
 * saw (refused) go back to the queue, others fail; streams end. */
static void fail_active(elector_etcd *e, int err, const char *msg)
{
    for (call *c = e->calls; c; c = c->next) {
        if (c->state != CS_ACTIVE) continue;
        c->sid = 0;
        c->deferred = false;
        end_call(c, err, msg);
    }
}

/* Fails calls still waiting for a connection: used when a whole round over the
 * endpoints failed, so callers hear "cannot connect" now, not at their deadline. */
static void fail_queued(elector_etcd *e, int err, const char *msg)
{
    for (call *c = e->calls; c; c = c->next)
        if (c->state == CS_QUEUED && !c->user_closed) end_call(c, err, msg);
}

static void conn_fail(elector_etcd *e, int err, const char *fmt, ...)
{
    char msg[400], full[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(full, sizeof(full), "endpoint %s%s: %s", e->eps[e->ep].tls ? "https://" : "",
             e->eps[e->ep].authority, msg);
    bool was_ready = e->cstate == C_READY;
    if (was_ready) e->stats.disconnects++;
    close_transport(e);
    fail_active(e, was_ready ? ELECTOR_EUNAVAILABLE : err, full);
    e->cstate = C_IDLE;
    e->last_conn_err = err;
    snprintf(e->last_conn_msg, sizeof(e->last_conn_msg), "%s", full);
    e->ep = (e->ep + 1) % e->nep;
    if (was_ready) {
        /* A connection that worked: try the next member at once. */
        e->retry_at_ms = e->now_ms;
        e->round_failures = 0;
        return;
    }
    if (++e->round_failures >= e->nep) {
        e->round_failures = 0;
        e->backoffs++;
        fail_queued(e, err, full);
    }
    e->retry_at_ms = e->now_ms + elector__backoff_ms(e->backoffs, e->cfg.backoff_min_ms,
                                                     e->cfg.backoff_max_ms, next_rnd(e));
}

static bool have_demand(const elector_etcd *e)
{
    for (const call *c = e->calls; c; c = c->next)
        if (c->state != CS_DONE && !c->user_closed) return true;
    return false;
}

static void tls_start(elector_etcd *e)
{
    const elector__endpoint *ep = &e->eps[e->ep];
    e->ssl = SSL_new(e->ssl_ctx);
    BIO *bio = e->ssl ? elector__ssl_socket_bio(e->fd) : NULL;
    if (!bio) {
        conn_fail(e, ELECTOR_ETLS, "cannot create TLS session: out of memory");
        return;
    }
    SSL_set_bio(e->ssl, bio, bio); /* the SSL object owns it now */
    unsigned char tmp[16];
    bool is_ip = inet_pton(AF_INET, ep->host, tmp) == 1 || inet_pton(AF_INET6, ep->host, tmp) == 1;
    /* Without these the certificate is checked against the CA only, not against
     * the endpoint: any certificate of that CA would do. So a failure is fatal. */
    bool ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(e->ssl), ep->host) == 1
                    : SSL_set_tlsext_host_name(e->ssl, ep->host) == 1 &&
                          SSL_set1_host(e->ssl, ep->host) == 1;
    if (!ok) {
        conn_fail(e, ELECTOR_ETLS, "cannot set up the check of the server's %s '%s': %s",
                  is_ip ? "IP address" : "host name", ep->host, ssl_err_text());
        return;
    }
    e->cstate = C_TLS;
}

static void tls_step(elector_etcd *e)
{
    ERR_clear_error();
    int rc = SSL_connect(e->ssl);
    if (rc == 1) {
        /* gRPC needs HTTP/2; a server that did not agree to it in ALPN is not
         * an etcd gRPC endpoint (or is something in between). */
        const unsigned char *proto = NULL;
        unsigned int plen = 0;
        SSL_get0_alpn_selected(e->ssl, &proto, &plen);
        if (plen != 2 || memcmp(proto, "h2", 2) != 0) {
            char got[40];
            snprintf(got, sizeof(got), plen ? "'%.*s'" : "none", (int)(plen < 32 ? plen : 32),
                     proto ? (const char *)proto : "");
            conn_fail(e, ELECTOR_ETLS,
                      "TLS handshake: the server did not agree to HTTP/2 (ALPN h2; it chose %s)",
                      got);
            return;
        }
        if (h2_start(e)) conn_fail(e, ELECTOR_ENOMEM, "out of memory");
        return;
    }
    int se = SSL_get_error(e->ssl, rc);
    if (se == SSL_ERROR_WANT_READ) return;
    if (se == SSL_ERROR_WANT_WRITE) {
        e->want_write = true;
        return;
    }
    long vr = SSL_get_verify_result(e->ssl);
    unsigned long ec = ERR_get_error();
    if (vr != X509_V_OK)
        conn_fail(e, ELECTOR_ETLS, "TLS handshake failed: server certificate not trusted (%s)",
                  X509_verify_cert_error_string(vr));
    else
        conn_fail(e, ELECTOR_ETLS, "TLS handshake failed: %s",
                  ec ? ERR_reason_error_string(ec) : "connection closed during handshake");
}

static void connect_start(elector_etcd *e)
{
    const elector__endpoint *ep = &e->eps[e->ep];
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    e->dial_deadline_ms = e->now_ms + e->cfg.dial_timeout_ms;
    e->cstate = C_CONNECTING;
    int rc = getaddrinfo(ep->host, ep->port, &hints, &ai);
    if (rc) {
        conn_fail(e, ELECTOR_ECONNECT, "cannot resolve host: %s", gai_strerror(rc));
        return;
    }
    e->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (e->fd < 0) {
        freeaddrinfo(ai);
        conn_fail(e, ELECTOR_ECONNECT, "socket: %s", strerror(errno));
        return;
    }
    int one = 1;
    setsockopt(e->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    rc = connect(e->fd, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    if (rc < 0 && errno != EINPROGRESS) {
        conn_fail(e, ELECTOR_ECONNECT, "connect: %s", strerror(errno));
        return;
    }
    e->want_write = true; /* connect completion shows as writable */
    set_interest(e);
}

static void connect_finish(elector_etcd *e)
{
    int soerr = 0;
    socklen_t sl = sizeof(soerr);
    getsockopt(e->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
    if (soerr) {
        conn_fail(e, ELECTOR_ECONNECT, "connect: %s", strerror(soerr));
        return;
    }
    e->want_write = false;
    if (e->eps[e->ep].tls) {
        if (!e->ssl_ctx) {
            conn_fail(e, ELECTOR_ETLS, "TLS is not set up (see the earlier error)");
            return;
        }
        tls_start(e);
        if (e->ssl) tls_step(e);
    } else if (h2_start(e)) {
        conn_fail(e, ELECTOR_ENOMEM, "out of memory");
    }
}

/* ---------------------------------------------------------------- submitting */

#define NV(n, v, vl) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vl), NGHTTP2_NV_FLAG_NONE}

static void submit(elector_etcd *e, call *c)
{
    const elector__endpoint *ep = &e->eps[e->ep];
    char tmo[16];
    nghttp2_nv nv[9] = {
        NV(":method", "POST", 4),
        NV(":scheme", ep->tls ? "https" : "http", ep->tls ? 5u : 4u),
        NV(":path", c->rpc->path, strlen(c->rpc->path)),
        NV(":authority", ep->authority, strlen(ep->authority)),
        NV("content-type", "application/grpc", 16),
        NV("te", "trailers", 8),
    };
    size_t n = 6;
    if (c->deadline_ms) {
        elector__grpc_timeout(c->deadline_ms - e->now_ms, tmo);
        nv[n++] = (nghttp2_nv)NV("grpc-timeout", tmo, strlen(tmo));
    }
    if (e->token && !c->is_auth) nv[n++] = (nghttp2_nv)NV("token", e->token, strlen(e->token));
    if (c->require_leader) nv[n++] = (nghttp2_nv)NV("hasleader", "true", 4);
    nghttp2_data_provider dp = {.source.ptr = c, .read_callback = data_read_cb};
    int32_t sid = nghttp2_submit_request(e->h2, NULL, nv, n, &dp, c);
    if (sid < 0) {
        end_call(c, ELECTOR_EPROTO, nghttp2_strerror(sid));
        return;
    }
    c->sid = sid;
    c->state = CS_ACTIVE;
    if (!c->stream) e->stats.requests[c->rpc_id]++;
    c->net_closed = false;
    c->h2_error = 0;
    c->in.off = c->in.len = 0;
    c->rx_total = c->rx_next = 0;
    c->rx_msgs = 0;
    c->http_status = 0;
    c->grpc_status = -1;
    c->grpc_msg[0] = 0;
}

static void auth_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud);

static void start_auth(elector_etcd *e)
{
    Etcdserverpb__AuthenticateRequest req = ETCDSERVERPB__AUTHENTICATE_REQUEST__INIT;
    req.name = e->s_user;
    req.password = e->s_password;
    e->authenticating = true;
    if (elector_etcd_call(e, ELECTOR_RPC_AUTHENTICATE, &req.base, NULL, auth_done, NULL)) {
        e->authenticating = false;
        return;
    }
    e->calls->is_auth = true; /* just added at the head */
}

static void auth_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)ud;
    e->authenticating = false;
    if (err == 0) {
        const Etcdserverpb__AuthenticateResponse *r = (const void *)m;
        elector__drop_token(e);
        e->token = elector__strdup(r->token ? r->token : "");
        /* The reply is freed after this callback: wipe its copy too. */
        if (r->token) explicit_bzero(r->token, strlen(r->token));
        return;
    }
    /* Wrong credentials will not heal by waiting: fail what waits on them now.
     * Other failures (connection lost) leave the queue for the next connection,
     * which authenticates again. */
    if (err != ELECTOR_EAUTH && err != ELECTOR_EPERM && err != ELECTOR_EGRPC) return;
    char msg[600];
    snprintf(msg, sizeof(msg), "authentication as '%s' failed: %s", e->s_user, e->errstr);
    fail_queued(e, ELECTOR_EAUTH, msg);
}

static void submit_queued(elector_etcd *e)
{
    if (e->cstate != C_READY || e->draining) return;
    bool need_auth = e->s_user && !e->token;
    if (need_auth && !e->authenticating) start_auth(e);
    for (call *c = e->calls; c; c = c->next) {
        if (c->state != CS_QUEUED || c->user_closed) continue;
        if (need_auth && !c->is_auth) continue;
        submit(e, c);
    }
}

/* ---------------------------------------------------------------- completion */

static void end_call(call *c, int err, const char *msg)
{
    elector_etcd *e = c->etcd;
    c->state = CS_DONE;
    if (c->user_closed || c->ended) return;
    c->ended = true;
    if (err) e->stats.errors[c->rpc_id]++;
    e->cb_depth++;
    elector__set_err(e, err, "%s", msg);
    if (c->stream) c->scb(c, err, NULL, c->ud);
    else c->ucb(e, err, NULL, c->ud);
    e->cb_depth--;
}

static int status_err(call *c, char *msg, size_t cap)
{
    const char *ep = c->etcd->eps[c->etcd->ep].authority;
    if (c->grpc_status > 0) {
        snprintf(msg, cap, "%s: %s (grpc-status %d) from %s", c->rpc->path,
                 c->grpc_msg[0] ? c->grpc_msg : "error", c->grpc_status, ep);
        return elector__grpc_error(c->grpc_status, c->grpc_msg);
    }
    if (c->grpc_status < 0) {
        snprintf(msg, cap, "%s: stream reset by %s (HTTP/2 %s, status %d)", c->rpc->path, ep,
                 nghttp2_http2_strerror(c->h2_error), c->http_status);
        return ELECTOR_EUNAVAILABLE;
    }
    snprintf(msg, cap, "%s: stream ended by %s", c->rpc->path, ep);
    return ELECTOR_EUNAVAILABLE;
}

/* Decodes one message within the decode budget; NULL with a message in msg on
 * failure. */
static ProtobufCMessage *decode(call *c, const uint8_t *p, size_t n, char *msg, size_t cap)
{
    const elector_etcd *e = c->etcd;
    int why = 0;
    ProtobufCMessage *m = elector__decode(c->rpc->resp, p, n, e->cfg.max_decode_bytes, &why);
    if (m) return m;
    const char *ep = e->eps[e->ep].authority;
    if (why == ELECTOR__DEC_OVER_BUDGET)
        snprintf(msg, cap, "%s: a reply of %zu bytes from %s needs more than %zu bytes of "
                 "memory to decode (max_decode_bytes)", c->rpc->path, n, ep,
                 e->cfg.max_decode_bytes);
    else if (why == ELECTOR__DEC_TOO_DEEP)
        snprintf(msg, cap, "%s: a reply of %zu bytes from %s nests messages more than %d deep",
                 c->rpc->path, n, ep, ELECTOR__PB_MAX_DEPTH);
    else
        snprintf(msg, cap, "%s: undecodable reply (%zu bytes) from %s", c->rpc->path, n, ep);
    return NULL;
}

/* A reply of the right type can still be nonsense for the request: a Txn result
 * whose i-th entry is not of the kind the i-th operation asked for. Checked
 * here once, so no caller reads a oneof member that is not there. */
static int check_reply(call *c, const ProtobufCMessage *m, char *msg, size_t cap)
{
    if (c->rpc_id != ELECTOR_RPC_TXN) return 0;
    /* The request is still in c->out (unary calls keep it for a resend). */
    Etcdserverpb__TxnRequest *req =
        etcdserverpb__txn_request__unpack(NULL, c->out.len - 5, c->out.data + 5);
    if (!req) {
        snprintf(msg, cap, "%s: out of memory", c->rpc->path);
        return ELECTOR_ENOMEM;
    }
    char why[200];
    int rc = elector__txn_shape_check(req, (const Etcdserverpb__TxnResponse *)m, why,
                                      sizeof(why));
    etcdserverpb__txn_request__free_unpacked(req, NULL);
    if (!rc) return 0;
    snprintf(msg, cap, "%s: malformed reply from %s: %s", c->rpc->path,
             c->etcd->eps[c->etcd->ep].authority, why);
    return ELECTOR_EPROTO;
}

static void finish_unary(elector_etcd *e, call *c)
{
    char msg[512];
    const uint8_t *p;
    size_t n;
    if (c->grpc_status != 0) {
        int err = status_err(c, msg, sizeof(msg));
        if (c->h2_error == NGHTTP2_REFUSED_STREAM && c->grpc_status < 0) {
            c->state = CS_QUEUED; /* never processed (GOAWAY): safe to send again */
            c->out.off = 0;
            return;
        }
        if (err == ELECTOR_ETOKEN && e->s_user && !c->auth_retried && !c->is_auth) {
            /* The token expired: authenticate again and resend; etcd refused the
             * call before executing it. */
            c->auth_retried = true;
            elector__drop_token(e);
            c->state = CS_QUEUED;
            c->out.off = 0;
            return;
        }
        if (err == ELECTOR_ETOKEN) {
            elector__drop_token(e);
        }
        end_call(c, err, msg);
        return;
    }
    int rc = elector__grpc_next(&c->in, &p, &n);
    if (rc != 1 || elector__buf_avail(&c->in) != 5 + n) {
        snprintf(msg, sizeof(msg), "%s: reply from %s %s", c->rpc->path,
                 e->eps[e->ep].authority,
                 rc != 1 ? "without a whole message" : "with bytes after its message");
        end_call(c, ELECTOR_EPROTO, msg);
        return;
    }
    ProtobufCMessage *m = decode(c, p, n, msg, sizeof(msg));
    if (!m) {
        end_call(c, ELECTOR_EPROTO, msg);
        return;
    }
    if ((rc = check_reply(c, m, msg, sizeof(msg)))) {
        protobuf_c_message_free_unpacked(m, NULL);
        end_call(c, rc, msg);
        return;
    }
    c->state = CS_DONE;
    c->ended = true;
    e->err = 0;
    e->errstr[0] = 0;
    if (c->ucb == sync_cb) {
        /* The blocking caller keeps the decoded message: no copy. */
        struct sync_ctx *sc = c->ud;
        sc->done = true;
        sc->resp = m;
        return;
    }
    e->cb_depth++;
    c->ucb(e, 0, m, c->ud);
    e->cb_depth--;
    protobuf_c_message_free_unpacked(m, NULL);
}

static void deliver_stream(elector_etcd *e, call *c)
{
    char msg[512];
    const uint8_t *p;
    size_t n;
    int rc;
    while (!c->user_closed && !c->ended && (rc = elector__grpc_next(&c->in, &p, &n)) == 1) {
        ProtobufCMessage *m = decode(c, p, n, msg, sizeof(msg));
        elector__buf_consume(&c->in, 5 + n);
        if (!m) {
            if (c->sid && e->h2) {
                nghttp2_submit_rst_stream(e->h2, 0, c->sid, NGHTTP2_CANCEL);
                nghttp2_session_set_stream_user_data(e->h2, c->sid, NULL);
            }
            c->sid = 0;
            elector__buf_free(&c->in);
            end_call(c, ELECTOR_EPROTO, msg);
            return;
        }
        e->cb_depth++;
        c->scb(c, 0, m, c->ud);
        e->cb_depth--;
        protobuf_c_message_free_unpacked(m, NULL);
    }
    if (c->net_closed && !c->ended) {
        int err = status_err(c, msg, sizeof(msg));
        if (err == ELECTOR_ETOKEN) {
            elector__drop_token(e);
        }
        end_call(c, err, msg);
    }
}

static void dispatch(elector_etcd *e)
{
    call *c;
    while ((c = e->ready_head)) {
        e->ready_head = c->ready_next;
        if (!e->ready_head) e->ready_tail = NULL;
        c->queued_ready = false;
        if (c->user_closed || c->ended) continue;
        if (c->rx_err) end_call(c, c->rx_err, c->rx_msg);
        else if (c->stream) deliver_stream(e, c);
        else if (c->net_closed) finish_unary(e, c);
        if (e->free_pending) return;
    }
}

/* Frees calls that are over: done unary calls, and closed streams once nghttp2
 * no longer refers to them. */
static void reap(elector_etcd *e)
{
    call *c = e->calls, *next;
    for (; c; c = next) {
        next = c->next;
        bool over = c->stream ? (c->user_closed && c->sid == 0)
                              : (c->state == CS_DONE || (c->user_closed && c->sid == 0));
        if (!over || c->queued_ready) continue;
        list_del(e, c);
        if (c->sid && e->h2) nghttp2_session_set_stream_user_data(e->h2, c->sid, NULL);
        call_free(c);
    }
}

/* ---------------------------------------------------------------- timers */

static bool awaiting_reply(const elector_etcd *e)
{
    for (const call *c = e->calls; c; c = c->next)
        if (c->state == CS_ACTIVE && !c->stream) return true;
    return false;
}

static bool has_streams(const elector_etcd *e)
{
    for (const call *c = e->calls; c; c = c->next)
        if (c->state == CS_ACTIVE && c->stream) return true;
    return false;
}

/* When the next PING may go out; INT64_MAX if none is wanted. A PING goes out
 * after a stretch of silence, sooner while a reply is awaited. etcd's gRPC server
 * answers pings closer than its keepalive-min-time (5 s) with GOAWAY after a few
 * strikes unless it sent data in between, so we respect that spacing. */
static int64_t ping_due(elector_etcd *e, bool *fast)
{
    if (e->cstate != C_READY || e->ping_out) return INT64_MAX;
    *fast = awaiting_reply(e) || *fast;
    if (!*fast && !has_streams(e)) return INT64_MAX;
    int64_t due = e->last_recv_ms + (*fast ? e->cfg.keepalive_time_ms : e->cfg.keepalive_idle_ms);
    if (!e->data_since_ping && due < e->last_ping_ms + 5000) due = e->last_ping_ms + 5000;
    return due;
}

static void ping_timers(elector_etcd *e)
{
    if (e->cstate != C_READY) return;
    if (e->ping_out && e->now_ms >= e->last_ping_ms + e->cfg.keepalive_timeout_ms) {
        conn_fail(e, ELECTOR_EUNAVAILABLE, "no answer to PING within %lld ms",
                  (long long)e->cfg.keepalive_timeout_ms);
        return;
    }
    bool fast = e->ka && elector__keepalive_next_deadline(e) != INT64_MAX;
    if (e->now_ms >= ping_due(e, &fast)) {
        nghttp2_submit_ping(e->h2, NGHTTP2_FLAG_NONE, NULL);
        e->ping_out = true;
        e->last_ping_ms = e->now_ms;
        e->data_since_ping = false;
    }
}

static void call_timers(elector_etcd *e)
{
    char msg[600];
    for (call *c = e->calls; c; c = c->next) {
        if (!c->deadline_ms || c->state == CS_DONE || c->user_closed) continue;
        if (e->now_ms < c->deadline_ms) continue;
        if (c->state == CS_ACTIVE && c->sid && e->h2) {
            nghttp2_submit_rst_stream(e->h2, 0, c->sid, NGHTTP2_CANCEL);
            nghttp2_session_set_stream_user_data(e->h2, c->sid, NULL);
            c->sid = 0;
        }
        if (c->state == CS_QUEUED && e->last_conn_msg[0])
            snprintf(msg, sizeof(msg), "%s: no connection before the deadline (last error: %s)",
                     c->rpc->path, e->last_conn_msg);
        else
            snprintf(msg, sizeof(msg), "%s: no reply from %s within %lld ms", c->rpc->path,
                     e->eps[e->ep].authority, (long long)c->timeout_ms);
        end_call(c, ELECTOR_ETIMEDOUT, msg);
    }
}

static void conn_timers(elector_etcd *e)
{
    if ((e->cstate == C_CONNECTING || e->cstate == C_TLS || e->cstate == C_SETTINGS) &&
        e->now_ms >= e->dial_deadline_ms) {
        conn_fail(e, ELECTOR_ECONNECT, "no answer within the dial timeout (%lld ms)",
                  (long long)e->cfg.dial_timeout_ms);
    }
    if (e->cstate == C_IDLE && !e->init_err && e->now_ms >= e->retry_at_ms && have_demand(e))
        connect_start(e);
}

/* A connection that received GOAWAY takes no new streams. It is left once no
 * unary reply is awaited on it, and either no stream uses it or calls wait for
 * a connection (those streams then end with EUNAVAILABLE; their owners
 * re-create them on the next member). */
static bool drain_due(const elector_etcd *e)
{
    if (e->cstate != C_READY || !e->draining || awaiting_reply(e)) return false;
    if (!has_streams(e)) return true;
    for (const call *c = e->calls; c; c = c->next)
        if (c->state == CS_QUEUED && !c->user_closed) return true;
    return false;
}

/* When elector_etcd_process() must run next (absolute ms on the deadline clock;
 * INT64_MAX: nothing is due). */
static int64_t next_due(elector_etcd *e, int64_t now)
{
    int64_t t = INT64_MAX;
    for (call *c = e->calls; c; c = c->next)
        if (c->deadline_ms && c->state != CS_DONE && !c->user_closed && c->deadline_ms < t)
            t = c->deadline_ms;
    if (e->ready_head) t = now;
    if (e->timers && e->timers->due_ms < t) t = e->timers->due_ms;
    if (e->cstate == C_READY && !e->draining)
        for (call *c = e->calls; c && t > now; c = c->next)
            if (c->state == CS_QUEUED && !c->user_closed) t = now;
    if (drain_due(e)) t = now;
    /* Bytes queued outside the loop (a message sent on an open stream):
     * process now so that flush() hands them to the socket. */
    if (e->h2 && !e->want_write && nghttp2_session_want_write(e->h2)) t = now;
    if (e->cstate == C_IDLE && have_demand(e) && e->retry_at_ms < t) t = e->retry_at_ms;
    if (e->cstate != C_IDLE && e->cstate != C_READY && e->dial_deadline_ms < t)
        t = e->dial_deadline_ms;
    if (e->cstate == C_READY) {
        bool fast = e->ka && elector__keepalive_next_deadline(e) != INT64_MAX;
        int64_t p = e->ping_out ? e->last_ping_ms + e->cfg.keepalive_timeout_ms
                                : ping_due(e, &fast);
        if (p < t) t = p;
    }
    if (e->ka) {
        int64_t k = elector__keepalive_next_deadline(e);
        if (k < t) t = k;
    }
    return t;
}

int64_t elector_etcd_timeout(elector_etcd *e)
{
    int64_t now = elector__now_ms();
    e->now_ms = now;
    int64_t t = next_due(e, now);
    arm_wake(e, t);
    if (t == INT64_MAX) return -1;
    return t <= now ? 0 : t - now;
}

/* ---------------------------------------------------------------- process */

static void step_io(elector_etcd *e)
{
    switch (e->cstate) {
    case C_CONNECTING:
        if (e->writable || e->readable) connect_finish(e);
        break;
    case C_TLS:
        if (e->writable || e->readable) tls_step(e);
        break;
    case C_SETTINGS:
    case C_READY:
        if (e->readable) do_read(e);
        break;
    case C_IDLE:
        break;
    }
}

static void real_free(elector_etcd *e);

static int process_events(elector_etcd *e, struct epoll_event *evs, int nev)
{
    e->now_ms = elector__now_ms();
    e->readable = e->writable = false;
    for (int i = 0; i < nev; i++) {
        if (evs[i].data.fd == e->evfd) {
            uint64_t v;
            if (read(e->evfd, &v, sizeof(v)) < 0) { /* nothing to do */
            }
        } else if (evs[i].data.fd == e->tfd) {
            uint64_t v;
            if (read(e->tfd, &v, sizeof(v)) < 0) { /* not expired after all */
            }
            e->wake_ms = INT64_MAX; /* fired: re-armed below */
        } else if (evs[i].data.fd == e->fd) {
            e->readable = evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP);
            e->writable = evs[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP);
        }
    }
    e->cb_depth++;
    step_io(e);
    dispatch(e);
    /* After dispatch: completing the last reply or requeueing a refused call
     * there is what makes a draining connection ready to be left. */
    if (!e->free_pending && drain_due(e))
        conn_fail(e, ELECTOR_EUNAVAILABLE, "server is shutting down (GOAWAY)");
    if (!e->free_pending) call_timers(e);
    if (!e->free_pending && e->ka) elector__keepalive_timers(e, e->now_ms);
    if (!e->free_pending) run_timers(e);
    if (!e->free_pending) ping_timers(e);
    if (!e->free_pending) conn_timers(e);
    for (int round = 0; round < 4 && !e->free_pending; round++) {
        /* Callbacks may queue new calls: submit them in this same pass. */
        submit_queued(e);
        if (e->h2) flush(e);
        if (!e->ready_head) break;
        dispatch(e);
    }
    e->cb_depth--;
    if (e->free_pending && e->cb_depth == 0) {
        real_free(e);
        return ELECTOR_ECLOSED;
    }
    if (e->free_pending) return ELECTOR_ECLOSED;
    reap(e);
    set_interest(e);
    arm_wake(e, next_due(e, elector__now_ms()));
    return 0;
}

int elector_etcd_process(elector_etcd *e)
{
    struct epoll_event evs[4];
    int n = epoll_wait(e->epfd, evs, 4, 0);
    return process_events(e, evs, n < 0 ? 0 : n);
}

int elector_etcd_run_once(elector_etcd *e, int64_t max_ms)
{
    int64_t t = elector_etcd_timeout(e);
    if (max_ms >= 0 && (t < 0 || t > max_ms)) t = max_ms;
    if (t > INT32_MAX) t = INT32_MAX;
    struct epoll_event evs[4];
    int n = epoll_wait(e->epfd, evs, 4, (int)t);
    return process_events(e, evs, n < 0 ? 0 : n);
}

void elector_etcd_wakeup(elector_etcd *e)
{
    uint64_t one = 1;
    if (write(e->evfd, &one, sizeof(one)) < 0) { /* counter full: already awake */
    }
}

/* ---------------------------------------------------------------- public calls */

static call *call_new(elector_etcd *e, elector_rpc rpc, const elector_call_opts *opts)
{
    const elector__rpc_desc *d = elector__rpc(rpc);
    call *c = calloc(1, sizeof(*c));
    if (!c) return NULL;
    c->etcd = e;
    c->rpc = d;
    c->rpc_id = rpc;
    c->stream = d->stream;
    c->grpc_status = -1;
    c->require_leader = opts && opts->require_leader;
    return c;
}

static int check_msg(const elector__rpc_desc *d, const ProtobufCMessage *m)
{
    return m && m->descriptor == d->req ? 0 : ELECTOR_EINVAL;
}

int elector_etcd_call(elector_etcd *e, elector_rpc rpc, const ProtobufCMessage *req,
                      const elector_call_opts *opts, elector_etcd_cb cb, void *ud)
{
    const elector__rpc_desc *d = elector__rpc(rpc);
    if (!e || e->free_pending) return ELECTOR_ECLOSED;
    if (!d || d->stream || !cb || check_msg(d, req))
        return elector__set_err(e, ELECTOR_EINVAL, "bad arguments to elector_etcd_call");
    if (e->init_err) return e->init_err;
    call *c = call_new(e, rpc, opts);
    if (!c) return elector__set_err(e, ELECTOR_ENOMEM, "out of memory");
    int rc = elector__grpc_frame(&c->out, req);
    if (rc) {
        call_free(c);
        return elector__set_err(e, rc, "%s: request of %zu bytes not sent: %s", d->path,
                                protobuf_c_message_get_packed_size(req), elector_strerror(rc));
    }
    int64_t tmo = opts && opts->timeout_ms > 0 ? opts->timeout_ms : e->cfg.request_timeout_ms;
    c->deadline_ms = elector__now_ms() + tmo;
    c->timeout_ms = tmo;
    c->ucb = cb;
    c->ud = ud;
    list_add(e, c);
    return 0;
}


/* Errors only: finish_unary hands a successful reply to the sync caller itself. */
static void sync_cb(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e, (void)m;
    struct sync_ctx *s = ud;
    s->done = true;
    s->err = err;
}

int elector_etcd_call_sync(elector_etcd *e, elector_rpc rpc, const ProtobufCMessage *req,
                           const elector_call_opts *opts, ProtobufCMessage **resp)
{
    struct sync_ctx s = {0};
    if (resp) *resp = NULL;
    int rc = elector_etcd_call(e, rpc, req, opts, sync_cb, &s);
    if (rc) return rc;
    if (e->cstate == C_READY && e->cb_depth == 0) {
        /* Send now rather than after a first pass through the loop; any failure
         * is reported through sync_cb, which is ours. */
        e->now_ms = elector__now_ms();
        e->cb_depth++;
        submit_queued(e);
        if (e->h2) flush(e);
        e->cb_depth--;
        set_interest(e);
    }
    while (!s.done) {
        rc = elector_etcd_run_once(e, -1);
        if (rc) return rc;
    }
    if (resp) *resp = s.resp;
    else if (s.resp) protobuf_c_message_free_unpacked(s.resp, NULL);
    return s.err;
}

elector_stream *elector_etcd_stream_open(elector_etcd *e, elector_rpc rpc,
                                         const elector_call_opts *opts, elector_stream_cb cb,
                                         void *ud)
{
    const elector__rpc_desc *d = elector__rpc(rpc);
    if (!e || e->free_pending) return NULL;
    if (e->init_err) return NULL;
    if (!d || !d->stream || !cb) {
        elector__set_err(e, ELECTOR_EINVAL, "bad arguments to elector_etcd_stream_open");
        return NULL;
    }
    call *c = call_new(e, rpc, opts);
    if (!c) {
        elector__set_err(e, ELECTOR_ENOMEM, "out of memory");
        return NULL;
    }
    c->scb = cb;
    c->ud = ud;
    list_add(e, c);
    return c;
}

int elector_stream_send(elector_stream *c, const ProtobufCMessage *msg)
{
    if (c->ended || c->user_closed) return ELECTOR_ECLOSED;
    if (check_msg(c->rpc, msg)) return ELECTOR_EINVAL;
    int rc = elector__grpc_frame(&c->out, msg);
    if (rc) return rc;
    c->etcd->stats.requests[c->rpc_id]++;
    if (c->state == CS_ACTIVE && c->deferred && c->sid && c->etcd->h2) {
        c->deferred = false;
        nghttp2_session_resume_data(c->etcd->h2, c->sid);
    }
    return 0;
}

void elector_stream_close(elector_stream *c)
{
    if (!c || c->user_closed) return;
    elector_etcd *e = c->etcd;
    c->user_closed = true;
    if (c->sid && e->h2) {
        nghttp2_submit_rst_stream(e->h2, 0, c->sid, NGHTTP2_CANCEL);
        nghttp2_session_set_stream_user_data(e->h2, c->sid, NULL);
        c->sid = 0;
    }
    c->state = CS_DONE;
}

void elector_etcd_get_stats(const elector_etcd *e, elector_etcd_stats *out)
{
    *out = e->stats;
}

elector_etcd *elector_stream_client(const elector_stream *s)
{
    return s->etcd;
}

/* ---------------------------------------------------------------- free */

static void real_free(elector_etcd *e)
{
    elector__watch_free_all(e);
    elector__keepalive_free_all(e);
    close_transport(e);
    call *c, *next;
    for (c = e->calls; c; c = next) {
        next = c->next;
        call_free(c);
    }
    elector__endpoints_free(e->eps, e->nep);
    if (e->ssl_ctx) SSL_CTX_free(e->ssl_ctx);
    if (e->evfd >= 0) close(e->evfd);
    if (e->tfd >= 0) close(e->tfd);
    if (e->epfd >= 0) close(e->epfd);
    free(e->s_endpoints);
    free(e->s_cacert);
    free(e->s_cert);
    free(e->s_key);
    free(e->s_user);
    if (e->s_password) explicit_bzero(e->s_password, strlen(e->s_password));
    free(e->s_password);
    elector__drop_token(e);
    free(e);
}

void elector_etcd_free(elector_etcd *e)
{
    if (!e || e->free_pending) return;
    e->free_pending = true;
    /* Pending calls learn that they will never complete. */
    e->cb_depth++;
    for (call *c = e->calls; c; c = c->next)
        if (c->state != CS_DONE && !c->user_closed)
            end_call(c, ELECTOR_ECANCELED, "client freed");
    e->cb_depth--;
    if (e->cb_depth == 0) real_free(e);
}
