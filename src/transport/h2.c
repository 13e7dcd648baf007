/* SPDX-License-Identifier: MIT */
/* nghttp2 glue, bytes in and bytes out: nghttp2 does no I/O, and neither does
 * this file. conn.c pumps: it feeds the bytes read (elector__h2_input) and
 * writes the output gathered (elector__h2_output). Its callbacks only record
 * what happened: a call with news goes on e's ready list, the server's first
 * SETTINGS sets e->conn_up_news (engine.c reads both after the pump); user
 * callbacks run from dispatch() (reply.c), which drains the list once
 * nghttp2 has returned, so a user may free anything from a callback. Errors
 * are returned, never acted on here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nghttp2/nghttp2.h>
#include "transport_private.h"

static ssize_t data_read_cb(nghttp2_session *s, int32_t sid, uint8_t *buf, size_t len,
                            uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    (void)src, (void)ud;
    /* The call as the stream knows it, not src->ptr: a call reset by us
     * (elector__h2_reset) may be freed before nghttp2 has sent the RST_STREAM
     * and dropped the stream, and must not be read then. */
    call *c = nghttp2_session_get_stream_user_data(s, sid);
    if (!c) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
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

void elector__h2_reset(call *c)
{
    elector_etcd *e = c->etcd;
    if (c->sid && e->h2) {
        nghttp2_submit_rst_stream(e->h2, 0, c->sid, NGHTTP2_CANCEL);
        nghttp2_session_set_stream_user_data(e->h2, c->sid, NULL);
    }
    c->sid = 0;
}

void elector__h2_forget(call *c)
{
    if (c->sid && c->etcd->h2)
        nghttp2_session_set_stream_user_data(c->etcd->h2, c->sid, NULL);
}

/* News for dispatch (reply.c), which drains e's ready list each pass. */
static void call_ready(call *c)
{
    elector_etcd *e = c->etcd;
    if (c->queued_ready) return;
    c->queued_ready = true;
    c->ready_next = NULL;
    if (e->ready_tail)
        e->ready_tail->ready_next = c;
    else
        e->ready_head = c;
    e->ready_tail = c;
}

/* The peer broke the protocol on call c: reset its stream, drop what it sent and
 * let dispatch() end the call with ELECTOR_EPROTO. */
static void rx_violation(call *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void rx_violation(call *c, const char *fmt, ...)
{
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(c->rx_msg, sizeof(c->rx_msg), "%s: %s from %s; stream reset", c->rpc->path,
             what, elector__authority(c->etcd));
    c->rx_err = ELECTOR_EPROTO;
    elector__h2_reset(c);
    elector__buf_free(&c->in);
    call_ready(c);
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
        uint32_t n =
            (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
        if (!c->stream && c->rx_msgs > 0)
            rx_violation(c, "a second message in a unary reply");
        else if (p[0] != 0)
            rx_violation(c, "compressed message (flag %u), never asked for", p[0]);
        else if (n > e->cfg.max_recv_msg_bytes)
            rx_violation(c,
                         "message of %lu bytes exceeds the limit of %zu bytes "
                         "(max_recv_msg_bytes)",
                         (unsigned long)n, e->cfg.max_recv_msg_bytes);
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
    if (c->stream && !c->rx_err) call_ready(c);
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
    call_ready(c);
    return 0;
}

/* The server ended stream sid (END_STREAM: its trailers, in gRPC) while our side
 * is still open. A streaming call (Watch, LeaseKeepAlive) always has its side
 * open: we never end our requests. nghttp2 reports a stream closed only once
 * both sides are, so without this the call would wait for its deadline, and a
 * stream without one (a watch) forever. gRPC's "early server closure": the
 * server should then reset the stream (grpc-go does) and so should the client,
 * "because the remote behavior cannot be guaranteed" (a proxy may not reset;
 * RFC 9113 8.1 makes the server's reset optional). The call is over: its
 * status is the one received. We reset the stream with NO_ERROR and detach the
 * call at once, as elector__h2_reset() does, so it ends in this pass whatever
 * happens to the reset frame. Not for a unary call: its request always ends
 * by itself (data_read_cb never defers one), which closes the stream; its
 * reply is taken once nghttp2 reports the stream closed, as before. */
static void remote_ended(nghttp2_session *s, int32_t sid)
{
    call *c = call_of(s, sid);
    if (!c || !c->stream || nghttp2_session_get_stream_local_close(s, sid) != 0) return;
    nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, sid, NGHTTP2_NO_ERROR);
    nghttp2_session_set_stream_user_data(s, sid, NULL);
    c->sid = 0;
    c->net_closed = true;
    c->h2_error = NGHTTP2_NO_ERROR;
    call_ready(c);
}

static int on_frame_cb(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    elector_etcd *e = ud;
    e->last_recv_ms = e->now_ms;
    switch (f->hd.type) {
    case NGHTTP2_SETTINGS:
        if (!(f->hd.flags & NGHTTP2_FLAG_ACK) && e->cstate == C_SETTINGS) {
            e->cstate = C_READY;
            e->stats.connects++;
            e->round_failures = 0;
            e->backoffs = 0;
            e->conn_up_news = true; /* engine.c reads it after the pump */
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
        if (f->hd.flags & NGHTTP2_FLAG_END_STREAM) remote_ended(s, f->hd.stream_id);
        break;
    }
    return 0;
}

/* We send GOAWAY only when nghttp2 ends the connection over the peer's error
 * (the client never ends a session itself): from then on nothing more is
 * read, and the connection is failed at once (elector__h2_output) instead of
 * waiting for the dial or PING timeout. */
static int on_send_cb(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    (void)s;
    elector_etcd *e = ud;
    if (f->hd.type == NGHTTP2_GOAWAY && f->goaway.error_code != NGHTTP2_NO_ERROR)
        snprintf(e->h2_broken, sizeof(e->h2_broken), "%s%s%.*s",
                 nghttp2_http2_strerror(f->goaway.error_code),
                 f->goaway.opaque_data_len ? ": " : "", (int)f->goaway.opaque_data_len,
                 f->goaway.opaque_data_len ? (const char *)f->goaway.opaque_data : "");
    return 0;
}

int elector__h2_start(elector_etcd *e)
{
    nghttp2_session_callbacks *cbs;
    if (nghttp2_session_callbacks_new(&cbs)) return ELECTOR_ENOMEM;
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header_cb);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_cb);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_close_cb);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_cb);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_send_cb);
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
    e->h2_broken[0] = 0;
    e->cstate = C_SETTINGS;
    return 0;
}

void elector__h2_free(elector_etcd *e)
{
    if (e->h2) nghttp2_session_del(e->h2);
    e->h2 = NULL;
}

bool elector__h2_want_write(const elector_etcd *e)
{
    return e->h2 && nghttp2_session_want_write(e->h2);
}

void elector__h2_ping(elector_etcd *e)
{
    nghttp2_submit_ping(e->h2, NGHTTP2_FLAG_NONE, NULL);
}

void elector__h2_resume(call *c)
{
    if (c->state == CS_ACTIVE && c->deferred && c->sid && c->etcd->h2) {
        c->deferred = false;
        nghttp2_session_resume_data(c->etcd->h2, c->sid);
    }
}

bool elector__h2_refused(const call *c)
{
    return c->h2_error == NGHTTP2_REFUSED_STREAM;
}

bool elector__h2_cancelled(const call *c)
{
    return c->h2_error == NGHTTP2_CANCEL;
}

const char *elector__h2_strerror(uint32_t code)
{
    return nghttp2_http2_strerror(code);
}

#define NV(n, v, vl)                                                                     \
    {                                                                                    \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vl), NGHTTP2_NV_FLAG_NONE        \
    }

/* nghttp2 refused to open a stream: why, and the error. A connection runs out
 * of stream IDs after 2^30 streams (RFC 9113 5.1.1: IDs are never reused); only
 * a new connection takes more, so the caller leaves this one (EUNAVAILABLE)
 * and the call waits for the next. */
static int submit_err(const call *c, int rc, char *why, size_t cap)
{
    if (rc == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE) {
        snprintf(why, cap, "HTTP/2 stream IDs used up on this connection (%s)",
                 nghttp2_strerror(rc));
        return ELECTOR_EUNAVAILABLE;
    }
    snprintf(why, cap, "%s: not sent: HTTP/2: %s", c->rpc->path, nghttp2_strerror(rc));
    return rc == NGHTTP2_ERR_NOMEM ? ELECTOR_ENOMEM : ELECTOR_EPROTO;
}

/* Opens c's HTTP/2 stream with the gRPC request headers; the data provider
 * hands it the framed request. 0, or an error with why set (submit_err). */
int elector__h2_submit(elector_etcd *e, call *c, char *why, size_t cap)
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
    if (c->deadline.armed) {
        elector__grpc_timeout(c->deadline.due_ms - e->now_ms, tmo);
        nv[n++] = (nghttp2_nv)NV("grpc-timeout", tmo, strlen(tmo));
    }
    if (e->token && !c->is_auth)
        nv[n++] = (nghttp2_nv)NV("token", e->token, strlen(e->token));
    if (c->require_leader) nv[n++] = (nghttp2_nv)NV("hasleader", "true", 4);
    nghttp2_data_provider dp = {.source.ptr = c, .read_callback = data_read_cb};
    int32_t sid = nghttp2_submit_request(e->h2, NULL, nv, n, &dp, c);
    if (sid < 0) return submit_err(c, sid, why, cap);
    c->sid = sid;
    c->net_closed = false;
    c->h2_error = 0;
    c->in.off = c->in.len = 0;
    c->rx_total = c->rx_next = 0;
    c->rx_msgs = 0;
    c->http_status = 0;
    c->grpc_status = -1;
    c->grpc_msg[0] = 0;
    return 0;
}

/* nghttp2's output into e->wbuf, up to 64 KiB waiting there: nghttp2 returns
 * one frame at a time, and gathering them makes a request (HEADERS + DATA) one
 * send(), not two. 0, or an error with why set (the connection is broken). */
int elector__h2_output(elector_etcd *e, char *why, size_t cap)
{
    while (e->h2 && elector__buf_avail(&e->wbuf) < 65536) {
        const uint8_t *data;
        ssize_t len = nghttp2_session_mem_send(e->h2, &data);
        if (len < 0) {
            snprintf(why, cap, "HTTP/2: %s", nghttp2_strerror((int)len));
            return len == NGHTTP2_ERR_NOMEM ? ELECTOR_ENOMEM : ELECTOR_EPROTO;
        }
        if (len == 0) break;
        if (elector__buf_append(&e->wbuf, data, (size_t)len)) {
            snprintf(why, cap, "out of memory");
            return ELECTOR_ENOMEM;
        }
    }
    if (e->h2_broken[0]) {
        snprintf(why, cap, "HTTP/2: the server broke the protocol (%s)", e->h2_broken);
        return ELECTOR_EPROTO;
    }
    return 0;
}

/* Hands n bytes read from the connection to nghttp2; its callbacks report what
 * they bring. 0, or an error with why set (the connection is broken). */
int elector__h2_input(elector_etcd *e, const uint8_t *buf, size_t n, char *why,
                      size_t cap)
{
    ssize_t rc = nghttp2_session_mem_recv(e->h2, buf, n);
    if (rc >= 0) return 0;
    snprintf(why, cap, "HTTP/2: %s", nghttp2_strerror((int)rc));
    return rc == NGHTTP2_ERR_NOMEM ? ELECTOR_ENOMEM : ELECTOR_EPROTO;
}
