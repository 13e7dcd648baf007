/* SPDX-License-Identifier: MIT */
/* Calls: unary calls and bidirectional streams, in one list per client. A call
 * waits in the list (QUEUED) until a connection is ready, runs on an HTTP/2
 * stream (ACTIVE), and ends (DONE); reply.c completes it. Calls are freed only
 * in elector__calls_reap(), after the loop's callbacks, never inside one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "transport_private.h"

static void count(call *c, int d)
{
    elector_etcd *e = c->etcd;
    if (c->state == CS_QUEUED)
        e->n_queued += d;
    else if (c->state == CS_ACTIVE && c->stream)
        e->n_active_streams += d;
    else if (c->state == CS_ACTIVE)
        e->n_active_unary += d;
}

void elector__call_set_state(call *c, enum call_state st)
{
    count(c, -1);
    c->state = st;
    count(c, +1);
    if (st == CS_DONE) {
        elector__timer_disarm(c->etcd, &c->deadline);
        elector__stream_set_awaiting(c, false);
    }
}

void elector__stream_set_awaiting(elector_stream *c, bool awaiting)
{
    if (awaiting && c->state == CS_DONE) return;
    if (c->awaiting == awaiting) return;
    c->awaiting = awaiting;
    c->etcd->n_awaiting += awaiting ? 1 : -1;
    elector__ping_rearm(c->etcd);
}

void elector__call_ready(call *c)
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

static void list_add(elector_etcd *e, call *c)
{
    c->next = e->calls;
    c->prev = NULL;
    if (e->calls) e->calls->prev = c;
    e->calls = c;
    count(c, +1);
}

static void list_del(elector_etcd *e, call *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        e->calls = c->next;
    if (c->next) c->next->prev = c->prev;
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

/* ---------------------------------------------------------------- the loop's side */

void elector__calls_submit(elector_etcd *e)
{
    /* Nothing waits: do not walk the list (all calls in flight are on it). */
    if (e->cstate != C_READY || e->draining || e->n_queued <= 0) return;
    bool need_auth = elector__auth_needed(e);
    if (need_auth && !e->authenticating) elector__auth_start(e);
    for (call *c = e->calls; c; c = c->next) {
        if (c->state != CS_QUEUED || c->user_closed) continue;
        if (need_auth && !c->is_auth) continue;
        elector__h2_submit(e, c);
    }
}

/* Every active call loses its HTTP/2 stream and ends; streams end too. */
void elector__calls_fail_active(elector_etcd *e, int err, const char *msg)
{
    for (call *c = e->calls; c; c = c->next) {
        if (c->state != CS_ACTIVE) continue;
        c->sid = 0;
        c->deferred = false;
        elector__call_end(c, err, msg);
    }
}

/* Fails calls still waiting for a connection: used when a whole round over the
 * endpoints failed, so callers hear "cannot connect" now, not at their deadline. */
void elector__calls_fail_queued(elector_etcd *e, int err, const char *msg)
{
    for (call *c = e->calls; c; c = c->next)
        if (c->state == CS_QUEUED && !c->user_closed) elector__call_end(c, err, msg);
}

/* Frees calls that are over: done unary calls, and closed streams once nghttp2
 * no longer refers to them. */
void elector__calls_reap(elector_etcd *e)
{
    call *c = e->calls, *next;
    for (; c; c = next) {
        next = c->next;
        bool over = c->stream ? (c->user_closed && c->sid == 0)
                              : (c->state == CS_DONE || (c->user_closed && c->sid == 0));
        if (!over || c->queued_ready) continue;
        list_del(e, c);
        elector__h2_forget(c);
        call_free(c);
    }
}

void elector__calls_free(elector_etcd *e)
{
    call *c, *next;
    for (c = e->calls; c; c = next) {
        next = c->next;
        call_free(c);
    }
    e->calls = NULL;
}

/* ---------------------------------------------------------------- deadlines */

static void deadline_fired(elector__timer *t, void *ud)
{
    (void)t;
    call *c = ud;
    elector_etcd *e = c->etcd;
    char msg[600];
    if (c->state == CS_ACTIVE) elector__h2_reset(c);
    if (c->state == CS_QUEUED && e->last_conn_msg[0])
        snprintf(msg, sizeof(msg),
                 "%s: no connection before the deadline (last error: %s)", c->rpc->path,
                 e->last_conn_msg);
    else
        snprintf(msg, sizeof(msg), "%s: no reply from %s within %lld ms", c->rpc->path,
                 elector__authority(e), (long long)c->timeout_ms);
    elector__call_end(c, ELECTOR_ETIMEDOUT, msg);
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
    c->rev_floor = e->seen_rev;
    c->rev_epoch = e->restores;
    return c;
}

static int check_msg(const elector__rpc_desc *d, const ProtobufCMessage *m)
{
    return m && m->descriptor == d->req ? 0 : ELECTOR_EINVAL;
}

int elector__call_start(elector_etcd *e, elector_rpc rpc, const ProtobufCMessage *req,
                        const elector_call_opts *opts, elector_etcd_cb cb, void *ud,
                        call **out)
{
    const elector__rpc_desc *d = elector__rpc(rpc);
    if (!e || e->life.closed) return ELECTOR_ECLOSED;
    if (!d || d->stream || !cb || check_msg(d, req))
        return elector__set_err(e, ELECTOR_EINVAL, "bad arguments to elector_etcd_call");
    if (e->init_err) return e->init_err;
    call *c = call_new(e, rpc, opts);
    if (!c) return elector__set_err(e, ELECTOR_ENOMEM, "out of memory");
    int rc = elector__grpc_frame(&c->out, req);
    if (rc) {
        call_free(c);
        return elector__set_err(e, rc, "%s: request of %zu bytes not sent: %s", d->path,
                                protobuf_c_message_get_packed_size(req),
                                elector_strerror(rc));
    }
    int64_t tmo =
        opts && opts->timeout_ms > 0 ? opts->timeout_ms : e->cfg.request_timeout_ms;
    c->timeout_ms = tmo;
    c->ucb = cb;
    c->ud = ud;
    list_add(e, c);
    elector__timer_set(e, &c->deadline, elector__now_ms() + tmo, deadline_fired, c);
    elector__conn_rearm(e);
    if (out) *out = c;
    return 0;
}

int elector_etcd_call(elector_etcd *e, elector_rpc rpc, const ProtobufCMessage *req,
                      const elector_call_opts *opts, elector_etcd_cb cb, void *ud)
{
    return elector__call_start(e, rpc, req, opts, cb, ud, NULL);
}

struct sync_ctx {
    bool done;
    int err;
    ProtobufCMessage *resp;
};

/* The call is started with take_reply: the reply is ours to keep. */
static void sync_cb(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e;
    struct sync_ctx *s = ud;
    s->done = true;
    s->err = err;
    s->resp = (ProtobufCMessage *)m;
}

int elector_etcd_call_sync(elector_etcd *e, elector_rpc rpc, const ProtobufCMessage *req,
                           const elector_call_opts *opts, ProtobufCMessage **resp)
{
    struct sync_ctx s = {0};
    if (resp) *resp = NULL;
    call *c;
    int rc = elector__call_start(e, rpc, req, opts, sync_cb, &s, &c);
    if (rc) return rc;
    c->take_reply = true;
    if (e->cstate == C_READY && !elector__held(&e->life)) {
        /* Send now rather than after a first pass through the loop; any failure
         * is reported through sync_cb, which is ours. */
        e->now_ms = elector__now_ms();
        elector__hold(&e->life);
        elector__calls_submit(e);
        if (e->h2) elector__h2_flush(e);
        elector__unhold(&e->life);
        elector__set_interest(e);
        elector__ping_rearm(e);
    }
    while (!s.done) {
        rc = elector_etcd_run_once(e, -1);
        if (rc) return rc;
    }
    if (resp)
        *resp = s.resp;
    else if (s.resp)
        protobuf_c_message_free_unpacked(s.resp, NULL);
    return s.err;
}

elector_stream *elector_etcd_stream_open(elector_etcd *e, elector_rpc rpc,
                                         const elector_call_opts *opts,
                                         elector_stream_cb cb, void *ud)
{
    const elector__rpc_desc *d = elector__rpc(rpc);
    if (!e || e->life.closed) return NULL;
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
    elector__conn_rearm(e);
    return c;
}

int elector_stream_send(elector_stream *c, const ProtobufCMessage *msg)
{
    if (c->ended || c->user_closed) return ELECTOR_ECLOSED;
    if (check_msg(c->rpc, msg)) return ELECTOR_EINVAL;
    int rc = elector__grpc_frame(&c->out, msg);
    if (rc) return rc;
    c->etcd->stats.requests[c->rpc_id]++;
    elector__h2_resume(c);
    return 0;
}

void elector_stream_close(elector_stream *c)
{
    if (!c || c->user_closed) return;
    c->user_closed = true;
    elector__h2_reset(c);
    elector__call_set_state(c, CS_DONE);
    elector__conn_rearm(c->etcd);
}

elector_etcd *elector_stream_client(const elector_stream *s)
{
    return s->etcd;
}
