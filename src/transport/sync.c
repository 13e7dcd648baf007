/* SPDX-License-Identifier: MIT */
/* Blocking calls: start a call, then run the loop (engine.c) until its reply
 * came; and the loop that runs until a condition holds, which every _sync
 * call above waits in. Above the engine: the only file of the transport
 * besides the engine that runs the loop. */
#include "transport_private.h"

struct sync_ctx {
    bool done;
    int err;
    ProtobufCMessage *resp;
};

int elector__etcd_run_until(elector_etcd *e, bool (*done)(const void *arg),
                            const void *arg, int64_t timeout_ms)
{
    int64_t end = elector__now_ms() + timeout_ms;
    while (!done(arg)) {
        int64_t left = end - elector__now_ms();
        if (timeout_ms >= 0 && left <= 0) return ELECTOR_ETIMEDOUT;
        int rc = elector__etcd_run_once(e, timeout_ms >= 0 ? left : -1);
        if (rc) return rc;
    }
    return 0;
}

static bool sync_done(const void *arg)
{
    const struct sync_ctx *s = arg;
    return s->done;
}

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
    /* Send now rather than after a first pass through the loop; any failure
     * is reported through sync_cb, which is ours. */
    elector__etcd_send_now(e);
    rc = elector__etcd_run_until(e, sync_done, &s, -1);
    if (rc) return rc;
    if (resp)
        *resp = s.resp;
    else if (s.resp)
        protobuf_c_message_free_unpacked(s.resp, NULL);
    return s.err;
}
