/* SPDX-License-Identifier: MIT */
/* A call's state and its completion. nghttp2's callbacks (h2.c) put a call on
 * e's ready list; dispatch() drains it
 * once nghttp2 has returned: a stream's messages go to its callback one by one,
 * a unary call's status and single message end it. A call ends once
 * (elector__call_end); its callback may free anything, the call itself
 * included (reaped later). call.c, above, makes and submits calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "transport_private.h"

/* ---------------------------------------------------------------- a call's state */

void elector__call_count(call *c, int d)
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
    elector__call_count(c, -1);
    c->state = st;
    elector__call_count(c, +1);
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

void elector__drop_token(elector_etcd *e)
{
    if (e->token) explicit_bzero(e->token, strlen(e->token));
    free(e->token);
    e->token = NULL;
}

/* etcd refuses a request whose token expired before executing it: it may go
 * out again, once, after authenticating again. */
bool elector__auth_may_resend(const call *c, int err)
{
    return err == ELECTOR_ETOKEN && c->etcd->s_user && !c->auth_retried && !c->is_auth;
}

/* ---------------------------------------------------------------- completion */

void elector__call_end(call *c, int err, const char *msg)
{
    elector_etcd *e = c->etcd;
    elector__call_set_state(c, CS_DONE);
    if (c->user_closed || c->ended) return;
    c->ended = true;
    if (err) e->stats.errors[c->rpc_id]++;
    elector__hold(&e->life);
    elector__set_err(e, err, "%s", msg);
    if (c->stream)
        c->scb(c, err, NULL, c->ud);
    else
        c->ucb(e, err, NULL, c->ud);
    elector__unhold(&e->life); /* the loop holds it too: never the last hold */
}

/* The connection failed (conn.c): the calls active on it fail. */
void elector__calls_fail_active(elector_etcd *e, int err, const char *msg)
{
    for (call *c = e->calls; c; c = c->next) {
        if (c->state != CS_ACTIVE) continue;
        /* A unary call whose stream the server already ended, its reply in and
         * waiting for dispatch(): the reply stands. (Over TLS the read that
         * brings the reply can be followed by the connection's end in the same
         * pass: before, the answered call then failed with EUNAVAILABLE.) */
        if (!c->stream && c->net_closed && c->queued_ready) continue;
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

/* A learner refused the call ("rpc not supported for learner"): true. The
 * connection is marked, so no call goes to it any more; engine.c arms the timer
 * that leaves it (autosync.c) once this pass's replies are dispatched. */
static bool learner_refusal(elector_etcd *e, const char *grpc_msg)
{
    if (!grpc_msg || !strstr(grpc_msg, "not supported for learner")) return false;
    if (e->cstate == C_READY && !e->learner) {
        e->learner = true;
        e->leave_serial = e->stats.connects;
    }
    return true;
}

/* The error of a call whose stream ended without a reply. A token refused by
 * etcd is dropped here, so the next request authenticates again. */
static int status_err(call *c, char *msg, size_t cap)
{
    const char *ep = elector__authority(c->etcd);
    int err = ELECTOR_EUNAVAILABLE;
    if (c->grpc_status > 0) {
        snprintf(msg, cap, "%s: %s (grpc-status %d) from %s", c->rpc->path,
                 c->grpc_msg[0] ? c->grpc_msg : "error", c->grpc_status, ep);
        err = elector__grpc_error(c->grpc_status, c->grpc_msg);
    } else if (c->grpc_status < 0 && elector__h2_cancelled(c) && c->deadline.armed &&
               c->deadline.due_ms <= elector__now_ms()) {
        /* The server's end of the grpc-timeout we sent (etcd 3.5 resets the
         * stream): our deadline, whichever of the two the loop saw first. */
        snprintf(msg, cap,
                 "%s: no reply from %s within %lld ms (the server cancelled the call at "
                 "its deadline)",
                 c->rpc->path, ep, (long long)c->timeout_ms);
        err = ELECTOR_ETIMEDOUT;
    } else if (c->grpc_status < 0) {
        snprintf(msg, cap, "%s: stream reset by %s (HTTP/2 %s, status %d)", c->rpc->path,
                 ep, elector__h2_strerror(c->h2_error), c->http_status);
    } else {
        snprintf(msg, cap, "%s: stream ended by %s", c->rpc->path, ep);
    }
    if (err == ELECTOR_ETOKEN) elector__drop_token(c->etcd);
    if (c->grpc_status > 0 && learner_refusal(c->etcd, c->grpc_msg))
        err = ELECTOR_EUNAVAILABLE; /* not executed; the next member will */
    return err;
}

/* Decodes one message within the decode budget; NULL with a message in msg and
 * the error in *err on failure: ELECTOR_EPROTO, or ELECTOR_ENOMEM when malloc
 * failed (the reply may be fine: not the server's fault). */
static ProtobufCMessage *decode(call *c, const uint8_t *p, size_t n, int *err, char *msg,
                                size_t cap)
{
    const elector_etcd *e = c->etcd;
    int why = 0;
    ProtobufCMessage *m =
        elector__decode(c->rpc->resp, p, n, e->cfg.max_decode_bytes, &why);
    if (m) return m;
    const char *ep = elector__authority(e);
    *err = why == ELECTOR__DEC_NOMEM ? ELECTOR_ENOMEM : ELECTOR_EPROTO;
    if (why == ELECTOR__DEC_NOMEM)
        snprintf(msg, cap, "%s: out of memory decoding a reply of %zu bytes from %s",
                 c->rpc->path, n, ep);
    else if (why == ELECTOR__DEC_OVER_BUDGET)
        snprintf(msg, cap,
                 "%s: a reply of %zu bytes from %s needs more than %zu bytes of "
                 "memory to decode (max_decode_bytes)",
                 c->rpc->path, n, ep, e->cfg.max_decode_bytes);
    else if (why == ELECTOR__DEC_TOO_DEEP)
        snprintf(msg, cap,
                 "%s: a reply of %zu bytes from %s nests messages more than %d deep",
                 c->rpc->path, n, ep, ELECTOR__PB_MAX_DEPTH);
    else
        snprintf(msg, cap, "%s: undecodable reply (%zu bytes) from %s", c->rpc->path, n,
                 ep);
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
             elector__authority(c->etcd), why);
    return ELECTOR_EPROTO;
}

/* The one message of a unary reply, decoded and checked; NULL with *err and
 * msg set when the reply is not what was asked for. */
static ProtobufCMessage *unary_reply(call *c, int *err, char *msg, size_t cap)
{
    const uint8_t *p;
    size_t n;
    int rc = elector__grpc_next(&c->in, &p, &n);
    *err = ELECTOR_EPROTO;
    if (rc != 1 || elector__buf_avail(&c->in) != 5 + n) {
        snprintf(msg, cap, "%s: reply from %s %s", c->rpc->path,
                 elector__authority(c->etcd),
                 rc != 1 ? "without a whole message" : "with bytes after its message");
        return NULL;
    }
    ProtobufCMessage *m = decode(c, p, n, err, msg, cap);
    if (m && (*err = check_reply(c, m, msg, cap))) {
        protobuf_c_message_free_unpacked(m, NULL);
        m = NULL;
    }
    return m;
}

/* A unary call that etcd did not execute may go out again: its stream was
 * refused before processing (GOAWAY, REFUSED_STREAM), or its token had expired
 * (once each: the next attempt authenticates again). A second refusal ends the
 * call (EUNAVAILABLE: its owner backs off), as grpc-go retries a refused
 * stream once: before, a server that refused every stream (at its
 * SETTINGS_MAX_CONCURRENT_STREAMS) got the call again at once, thousands of
 * times a second, until its deadline. */
static bool resend(call *c, int err)
{
    if (elector__h2_refused(c) && c->grpc_status < 0 && !c->refused_retried) {
        c->refused_retried = true; /* never processed */
    } else if (elector__auth_may_resend(c, err)) {
        c->auth_retried = true;
    } else if (c->grpc_status > 0 && strstr(c->grpc_msg, "not supported for learner")) {
        /* refused by a learner, never executed: the connection moves on */
    } else {
        return false;
    }
    elector__call_set_state(c, CS_QUEUED);
    c->out.off = 0;
    return true;
}

/* ---------------------------------------------------------------- restores */

/* The reply's ResponseHeader (every etcd reply has one, field "header"). */
static const Etcdserverpb__ResponseHeader *header_of(const ProtobufCMessage *m)
{
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(m->descriptor, "header");
    if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE ||
        f->descriptor != &etcdserverpb__response_header__descriptor)
        return NULL;
    return *(const Etcdserverpb__ResponseHeader *const *)((const char *)m + f->offset);
}

/* True when the reply's revision cannot be older than any the cluster showed
 * before: writes and linearizable reads. A serializable read (a Range, or a
 * Txn of serializable Ranges only, which etcd serves locally) may come from a
 * member that lags, and so may a stream's header (the answering member's). */
static bool ordered(const call *c)
{
    const uint8_t *p = c->out.data + 5;
    size_t n = c->out.len >= 5 ? c->out.len - 5 : 0;
    switch (c->rpc_id) {
    case ELECTOR_RPC_PUT:
    case ELECTOR_RPC_DELETE_RANGE:
    case ELECTOR_RPC_LEASE_GRANT:
    case ELECTOR_RPC_LEASE_REVOKE:
        return true;
    case ELECTOR_RPC_RANGE: {
        Etcdserverpb__RangeRequest *r = etcdserverpb__range_request__unpack(NULL, n, p);
        bool lin = r && !r->serializable;
        if (r) etcdserverpb__range_request__free_unpacked(r, NULL);
        return lin;
    }
    case ELECTOR_RPC_TXN: {
        Etcdserverpb__TxnRequest *t = etcdserverpb__txn_request__unpack(NULL, n, p);
        bool lin = false;
        for (size_t i = 0; t && i < t->n_success + t->n_failure; i++) {
            const Etcdserverpb__RequestOp *op =
                i < t->n_success ? t->success[i] : t->failure[i - t->n_success];
            if (op->request_case != ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE ||
                !op->request_range || !op->request_range->serializable)
                lin = true;
        }
        if (t) etcdserverpb__txn_request__free_unpacked(t, NULL);
        return lin;
    }
    default:
        return false;
    }
}

/* Keeps the highest revision and the cluster ID replies showed; a reply that
 * contradicts them counts as a restore (the reply itself is delivered: it is
 * the cluster's answer, and what etcd applied stays applied). */
static void note_history(call *c, const ProtobufCMessage *m)
{
    elector_etcd *e = c->etcd;
    const Etcdserverpb__ResponseHeader *h = header_of(m);
    if (!h) return;
    const char *ep = elector__authority(e);
    bool ord = ordered(c);
    if (h->cluster_id && e->seen_cluster && h->cluster_id != e->seen_cluster) {
        snprintf(e->restore_msg, sizeof(e->restore_msg),
                 "etcd at %s has cluster ID %llx, %llx before: restored from a snapshot "
                 "(or another cluster)?",
                 ep, (unsigned long long)h->cluster_id,
                 (unsigned long long)e->seen_cluster);
        e->restores++;
        e->seen_cluster = h->cluster_id;
        e->seen_rev = ord ? h->revision : 0;
        return;
    }
    if (h->cluster_id) e->seen_cluster = h->cluster_id;
    if (!ord || h->revision <= 0) return;
    /* Linearizable: a reply may not show less than what was seen before its
     * call was made. (Against the highest revision seen so far it may: calls
     * in flight together are answered in any order.) A call made before a
     * restore was noticed is not counted again. */
    if (c->rev_epoch == e->restores && h->revision < c->rev_floor) {
        snprintf(e->restore_msg, sizeof(e->restore_msg),
                 "etcd's revision at %s is %lld, %lld was seen before: restored from a "
                 "snapshot?",
                 ep, (long long)h->revision, (long long)c->rev_floor);
        e->restores++;
        e->seen_rev = h->revision; /* the new history */
        return;
    }
    if (h->revision > e->seen_rev) e->seen_rev = h->revision;
}

uint64_t elector__restores(const elector_etcd *e, const char **msg)
{
    if (msg) *msg = e->restore_msg;
    return e->restores;
}

static void finish_unary(elector_etcd *e, call *c)
{
    char msg[512];
    int err;
    if (c->grpc_status != 0) {
        err = status_err(c, msg, sizeof(msg));
        if (!resend(c, err)) elector__call_end(c, err, msg);
        return;
    }
    ProtobufCMessage *m = unary_reply(c, &err, msg, sizeof(msg));
    if (!m) {
        elector__call_end(c, err, msg);
        return;
    }
    note_history(c, m);
    elector__call_set_state(c, CS_DONE);
    c->ended = true;
    e->err = 0;
    e->errstr[0] = 0;
    elector__hold(&e->life);
    c->ucb(e, 0, m, c->ud);
    elector__unhold(&e->life);
    if (!c->take_reply) protobuf_c_message_free_unpacked(m, NULL);
}

static void deliver_stream(elector_etcd *e, call *c)
{
    char msg[512];
    const uint8_t *p;
    size_t n;
    while (!c->user_closed && !c->ended && elector__grpc_next(&c->in, &p, &n) == 1) {
        int err = ELECTOR_EPROTO;
        ProtobufCMessage *m = decode(c, p, n, &err, msg, sizeof(msg));
        elector__buf_consume(&c->in, 5 + n);
        if (!m) {
            elector__h2_reset(c);
            elector__buf_free(&c->in);
            elector__call_end(c, err, msg);
            return;
        }
        elector__hold(&e->life);
        c->scb(c, 0, m, c->ud);
        elector__unhold(&e->life);
        protobuf_c_message_free_unpacked(m, NULL);
    }
    if (c->net_closed && !c->ended) {
        int err = status_err(c, msg, sizeof(msg));
        elector__call_end(c, err, msg);
    }
}

void elector__dispatch(elector_etcd *e)
{
    call *c;
    while ((c = e->ready_head)) {
        e->ready_head = c->ready_next;
        if (!e->ready_head) e->ready_tail = NULL;
        c->queued_ready = false;
        if (c->user_closed || c->ended) continue;
        if (c->rx_err)
            elector__call_end(c, c->rx_err, c->rx_msg);
        else if (c->stream)
            deliver_stream(e, c);
        else if (c->net_closed)
            finish_unary(e, c);
        if (e->life.closed) return;
    }
}
