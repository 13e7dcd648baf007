/* SPDX-License-Identifier: MIT */
/* Calls: unary calls and bidirectional streams, in one list per client. A call
 * waits in the list (QUEUED) until a connection is ready, runs on an HTTP/2
 * stream (ACTIVE), and ends (DONE); reply.c keeps its state and completes it. Calls are
 * freed only in elector__calls_reap(), after the loop's callbacks, never inside one.
 *
 * Authentication is the first call of a connection: with a user configured,
 * each connection sends Auth.Authenticate before anything else, and every
 * request carries the token it returns. The password and the token are
 * credentials: wiped, not just freed. (It lives here because the call list
 * decides when to send it, and it is itself a call.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "transport_private.h"

static void list_add(elector_etcd *e, call *c)
{
    c->next = e->calls;
    c->prev = NULL;
    if (e->calls) e->calls->prev = c;
    e->calls = c;
    elector__call_count(c, +1);
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

static bool auth_needed(const elector_etcd *e);
static void auth_start(elector_etcd *e);

/* ---------------------------------------------------------------- the loop's side */

void elector__calls_submit(elector_etcd *e)
{
    /* Nothing waits: do not walk the list (all calls in flight are on it). */
    if (e->cstate != C_READY || e->draining || e->learner || e->n_queued <= 0) return;
    bool need_auth = auth_needed(e);
    if (need_auth && !e->authenticating && !e->auth_timer.armed) auth_start(e);
    for (call *c = e->calls; c; c = c->next) {
        if (c->state != CS_QUEUED || c->user_closed) continue;
        if (need_auth && !c->is_auth) continue;
        char why[300];
        int rc = elector__h2_submit(e, c, why, sizeof(why));
        if (rc == ELECTOR_EUNAVAILABLE) { /* c stays queued for the next connection */
            elector__conn_fail(e, rc, "%s", why);
            return;
        }
        if (rc) {
            elector__call_end(c, rc, why);
            continue;
        }
        elector__call_set_state(c, CS_ACTIVE);
        if (!c->stream) e->stats.requests[c->rpc_id]++;
    }
}

bool elector__calls_sendable(const elector_etcd *e)
{
    if (e->cstate != C_READY || e->draining || e->learner || e->n_queued <= 0)
        return false;
    return !auth_needed(e) || (!e->authenticating && !e->auth_timer.armed);
}

/* Every active call loses its HTTP/2 stream and ends; streams end too. */
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

/* ---------------------------------------------------------------- authentication */

static bool auth_needed(const elector_etcd *e)
{
    return e->s_user && !e->token;
}

static void auth_retry_fired(elector__timer *t, void *ud)
{
    (void)t, (void)ud; /* the pass that runs it sends the next Authenticate */
}

static void auth_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)ud;
    e->authenticating = false;
    if (err == 0) {
        e->auth_failures = 0;
        const Etcdserverpb__AuthenticateResponse *r = (const void *)m;
        elector__drop_token(e);
        e->token = elector__strdup(r->token ? r->token : "");
        /* The reply is freed after this callback: wipe its copy too. */
        if (r->token) explicit_bzero(r->token, strlen(r->token));
        return;
    }
    /* Wrong credentials will not heal by waiting: fail what waits on them now.
     * Other failures (no leader, too many requests, connection lost) leave the
     * queue waiting: the next Authenticate goes out after a backoff, on this
     * connection or the next. Before, at once: thousands a second to a member
     * that said "no leader" or "too many requests". */
    if (err != ELECTOR_EAUTH && err != ELECTOR_EPERM && err != ELECTOR_EGRPC) {
        e->auth_failures++;
        int64_t d = elector__backoff_ms(e->auth_failures, e->cfg.backoff_min_ms,
                                        e->cfg.backoff_max_ms, elector__next_rnd(e));
        elector__timer_arm(e, &e->auth_timer, e->now_ms + d, auth_retry_fired, e);
        return;
    }
    char msg[600];
    snprintf(msg, sizeof(msg), "authentication as '%s' failed: %s", e->s_user, e->errstr);
    elector__calls_fail_queued(e, ELECTOR_EAUTH, msg);
}

static void auth_start(elector_etcd *e)
{
    /* The password file is being written: the Authenticate waits for it (a
     * partial first line would fail, and count as wrong credentials). */
    int settle_ms = elector__password_refresh(e); /* tls_reload.c */
    if (settle_ms > 0) {
        elector__timer_arm(e, &e->auth_timer, e->now_ms + settle_ms, auth_retry_fired, e);
        return;
    }
    Etcdserverpb__AuthenticateRequest req = ETCDSERVERPB__AUTHENTICATE_REQUEST__INIT;
    req.name = e->s_user;
    req.password = e->s_password;
    e->authenticating = true;
    call *c;
    if (elector__call_start(e, ELECTOR_RPC_AUTHENTICATE, &req.base, NULL, auth_done, NULL,
                            &c)) {
        e->authenticating = false;
        return;
    }
    c->is_auth = true;
}

/* ---------------------------------------------------------------- restores (reply.c
 * notes them) */

static void probe_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e, (void)err, (void)m, (void)ud; /* note_history saw the reply */
}

/* A new connection after replies were seen: a linearizable read shows at once
 * whether the cluster's revision went back (a restore restarts the members,
 * so it always comes with a new connection). Its errors do not matter. */
void elector__restore_probe(elector_etcd *e)
{
    if (!e->seen_rev) return;
    static const uint8_t key[1] = {0};
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key = (ProtobufCBinaryData){1, (uint8_t *)key};
    r.count_only = true;
    r.limit = 1;
    elector_etcd_call(e, ELECTOR_RPC_RANGE, &r.base, NULL, probe_done, NULL);
}
