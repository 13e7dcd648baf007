/* SPDX-License-Identifier: MIT */
/* The connection: one TCP (or TLS) connection at a time to one endpoint of the
 * list. States walk IDLE -> CONNECTING -> TLS (https only) -> SETTINGS -> READY,
 * and back to IDLE when anything fails. The connection counts as up only once
 * the server's SETTINGS frame arrived (h2.c), so a member that accepts TCP but
 * is frozen (SIGSTOP) is caught by the dial timeout.
 *
 * Endpoints are tried in order. A connection that worked and broke moves to the
 * next endpoint at once; a whole round of failed endpoints backs off
 * exponentially with jitter and fails the calls still waiting, so "unreachable"
 * is reported in one dial timeout, not at each call's deadline. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include "transport_private.h"

const char *elector__etcd_current_endpoint(const elector_etcd *e)
{
    return e->cstate == C_READY ? elector__authority(e) : "";
}

uint64_t elector__conn_serial(const elector_etcd *e)
{
    return e->cstate == C_READY ? e->stats.connects : 0;
}

int elector__etcd_endpoint_info(const elector_etcd *e, int i, elector_endpoint_info *out)
{
    if (!e || i < 0 || i >= e->nep || !out) return ELECTOR_EINVAL;
    const elector__endpoint *ep = &e->eps[i];
    out->authority = ep->authority;
    out->host = ep->host;
    out->tls = ep->tls;
    out->loopback = elector__endpoint_loopback(ep->host);
    return 0;
}

void elector__set_interest(elector_etcd *e)
{
    if (e->fd < 0) return;
    uint32_t want = EPOLLIN | (e->want_write ? EPOLLOUT : 0);
    if (want == e->ep_events) return;
    struct epoll_event ev = {.events = want, .data.fd = e->fd};
    epoll_ctl(e->epfd, e->ep_events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, e->fd, &ev);
    e->ep_events = want;
}

/* ---------------------------------------------------------------- socket I/O */

/* > 0 bytes, 0 would block, < 0 error (the connection has failed). */
static ssize_t io_read(elector_etcd *e, uint8_t *buf, size_t len)
{
    if (e->ssl) {
        int err = 0;
        char why[400];
        ssize_t n = elector__tls_read(e, buf, len, &err, why, sizeof(why));
        if (n < 0) elector__conn_fail(e, err, "%s", why);
        return n;
    }
    ssize_t n = recv(e->fd, buf, len, 0);
    if (n > 0) return n;
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    if (n == 0)
        elector__conn_fail(e, ELECTOR_EUNAVAILABLE, "connection closed by the server");
    else
        elector__conn_fail(e, ELECTOR_EUNAVAILABLE, "read failed: %s", strerror(errno));
    return -1;
}

static ssize_t io_write(elector_etcd *e, const uint8_t *buf, size_t len)
{
    if (e->ssl) {
        int err = 0;
        char why[400];
        ssize_t n = elector__tls_write(e, buf, len, &err, why, sizeof(why));
        if (n < 0) elector__conn_fail(e, err, "%s", why);
        return n;
    }
    ssize_t n = send(e->fd, buf, len, MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno == EAGAIN || errno == EINTR) return 0;
    elector__conn_fail(e, ELECTOR_EUNAVAILABLE, "write failed: %s", strerror(errno));
    return -1;
}

/* The byte pump between the socket and nghttp2 (h2.c, which does no I/O).
 * Inward: what the socket has, a bounded number of reads per pass. */
static void pump_in(elector_etcd *e)
{
    uint8_t buf[16384];
    for (int i = 0; i < 64 && e->h2; i++) {
        ssize_t n = io_read(e, buf, sizeof(buf));
        if (n <= 0) return;
        char why[400];
        int err = elector__h2_input(e, buf, (size_t)n, why, sizeof(why));
        if (err) {
            elector__conn_fail(e, err, "%s", why);
            return;
        }
        if ((size_t)n < sizeof(buf) && !e->ssl) return; /* drained */
    }
}

/* Outward: nghttp2's output, until it has no more or the socket would block. */
void elector__conn_flush(elector_etcd *e)
{
    e->want_write = false;
    while (e->h2) {
        char why[400];
        int err = elector__h2_output(e, why, sizeof(why));
        if (err) {
            elector__conn_fail(e, err, "%s", why);
            return;
        }
        if (!elector__buf_avail(&e->wbuf)) return;
        ssize_t n =
            io_write(e, elector__buf_head(&e->wbuf), elector__buf_avail(&e->wbuf));
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

/* ---------------------------------------------------------------- state machine */

void elector__conn_close(elector_etcd *e)
{
    elector__h2_free(e);
    elector__tls_free(e);
    if (e->fd >= 0) {
        epoll_ctl(e->epfd, EPOLL_CTL_DEL, e->fd, NULL);
        close(e->fd);
    }
    e->fd = -1;
    e->ep_events = 0;
    e->want_write = false;
    e->draining = false;
    e->learner = false;
    e->conn_up_news = false;
    e->ping_out = false;
    e->ping_dead = false;
    e->authenticating = false;
    if (e->wbuf.data) explicit_bzero(e->wbuf.data, e->wbuf.cap);
    elector__buf_free(&e->wbuf);
}

void elector__conn_fail(elector_etcd *e, int err, const char *fmt, ...)
{
    char msg[400], full[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(full, sizeof(full), "endpoint %s%s: %s", e->eps[e->ep].tls ? "https://" : "",
             elector__authority(e), msg);
    bool was_ready = e->cstate == C_READY;
    if (was_ready) e->stats.disconnects++;
    elector__conn_close(e);
    elector__calls_fail_active(e, was_ready ? ELECTOR_EUNAVAILABLE : err, full);
    e->cstate = C_IDLE;
    e->last_conn_err = err;
    snprintf(e->last_conn_msg, sizeof(e->last_conn_msg), "%s", full);
    e->ep = (e->ep + 1) % e->nep;
    if (was_ready) {
        /* A connection that worked: try the next member at once. */
        e->retry_at_ms = e->now_ms;
        e->round_failures = 0;
    } else {
        if (++e->round_failures >= e->nep) {
            e->round_failures = 0;
            e->backoffs++;
            elector__calls_fail_queued(e, err, full);
        }
        e->retry_at_ms =
            e->now_ms + elector__backoff_ms(e->backoffs, e->cfg.backoff_min_ms,
                                            e->cfg.backoff_max_ms, elector__next_rnd(e));
    }
    elector__conn_rearm(e);
    elector__timer_disarm(e, &e->ping_timer); /* no PING without a connection */
}

static void connect_start(elector_etcd *e)
{
    const elector__endpoint *ep = &e->eps[e->ep];
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    e->dial_deadline_ms = e->now_ms + e->cfg.dial_timeout_ms;
    e->cstate = C_CONNECTING;
    elector__conn_rearm(e);
    int rc = getaddrinfo(ep->host, ep->port, &hints, &ai);
    if (rc) {
        elector__conn_fail(e, ELECTOR_ECONNECT, "cannot resolve host: %s",
                           gai_strerror(rc));
        return;
    }
    e->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (e->fd < 0) {
        freeaddrinfo(ai);
        elector__conn_fail(e, ELECTOR_ECONNECT, "socket: %s", strerror(errno));
        return;
    }
    int one = 1;
    setsockopt(e->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    rc = connect(e->fd, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    if (rc < 0 && errno != EINPROGRESS) {
        elector__conn_fail(e, ELECTOR_ECONNECT, "connect: %s", strerror(errno));
        return;
    }
    e->want_write = true; /* connect completion shows as writable */
    elector__set_interest(e);
}

/* One step of the TLS handshake; once it is done, HTTP/2 starts. */
static void tls_step(elector_etcd *e)
{
    char why[400];
    bool done = false;
    int err = elector__tls_step(e, &done, why, sizeof(why));
    if (err)
        elector__conn_fail(e, err, "%s", why);
    else if (done && elector__h2_start(e))
        elector__conn_fail(e, ELECTOR_ENOMEM, "out of memory");
}

static void connect_finish(elector_etcd *e)
{
    int soerr = 0;
    socklen_t sl = sizeof(soerr);
    getsockopt(e->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
    if (soerr) {
        elector__conn_fail(e, ELECTOR_ECONNECT, "connect: %s", strerror(soerr));
        return;
    }
    e->want_write = false;
    if (e->eps[e->ep].tls) {
        if (!e->ssl_ctx) {
            elector__conn_fail(e, ELECTOR_ETLS,
                               "TLS is not set up (see the earlier error)");
            return;
        }
        elector__tls_refresh(e); /* the files changed: a new context (tls_reload.c) */
        char why[400];
        int err = elector__tls_start(e, why, sizeof(why));
        if (err) {
            elector__conn_fail(e, err, "%s", why);
            return;
        }
        tls_step(e);
    } else if (elector__h2_start(e)) {
        elector__conn_fail(e, ELECTOR_ENOMEM, "out of memory");
    }
}

void elector__conn_io(elector_etcd *e)
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
        if (e->readable) pump_in(e);
        break;
    case C_IDLE:
        break;
    }
}

/* A connection that received GOAWAY takes no new streams. It is left once no
 * unary reply is awaited on it, and either no stream uses it or calls wait for
 * a connection (those streams then end with EUNAVAILABLE; their owners
 * re-create them on the next member). */
bool elector__conn_drain_due(const elector_etcd *e)
{
    return e->cstate == C_READY && e->draining && e->n_active_unary == 0 &&
           (e->n_active_streams == 0 || e->n_queued > 0);
}

/* ---------------------------------------------------------------- timers */

static void dial_fired(elector__timer *t, void *ud)
{
    (void)t;
    elector_etcd *e = ud;
    elector__conn_fail(e, ELECTOR_ECONNECT, "no answer within the dial timeout (%lld ms)",
                       (long long)e->cfg.dial_timeout_ms);
}

static bool have_demand(const elector_etcd *e)
{
    return e->n_queued + e->n_active_unary + e->n_active_streams > 0;
}

static void retry_fired(elector__timer *t, void *ud)
{
    (void)t;
    elector_etcd *e = ud;
    if (e->cstate == C_IDLE && !e->init_err && have_demand(e)) connect_start(e);
}

/* The dial timeout runs while connecting; the reconnect timer while idle with
 * calls that need a connection (at once, or after the backoff). Called where
 * the state or the demand changes (the PING timer has its own). */
void elector__conn_rearm(elector_etcd *e)
{
    bool dialing = e->cstate != C_IDLE && e->cstate != C_READY;
    if (!dialing)
        elector__timer_disarm(e, &e->dial_timer);
    else if (!e->dial_timer.armed || e->dial_timer.due_ms != e->dial_deadline_ms)
        elector__timer_set(e, &e->dial_timer, e->dial_deadline_ms, dial_fired, e);
    if (e->cstate != C_IDLE || !have_demand(e))
        elector__timer_disarm(e, &e->retry_timer);
    else if (!e->retry_timer.armed || e->retry_timer.due_ms != e->retry_at_ms)
        elector__timer_set(e, &e->retry_timer, e->retry_at_ms, retry_fired, e);
}
