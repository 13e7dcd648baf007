/* SPDX-License-Identifier: MIT */
/* Ending a session: the owner's close (fire and forget, told by a callback, or
 * waited for), and the revoke of its lease, so that our keys go at once and
 * the next candidate need not wait for the TTL. The session's own end
 * (session.c, session_die) revokes through elector__session_revoke() too. */
#include <stdlib.h>
#include <unistd.h>
#include "session_private.h"

/* Sends a LeaseRevoke of lease (timeout_ms <= 0: the request timeout). */
static int send_revoke(elector_etcd *e, int64_t lease, int64_t timeout_ms,
                       elector_etcd_cb done, void *ud)
{
    Etcdserverpb__LeaseRevokeRequest req = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
    req.id = lease;
    elector_call_opts o = {.timeout_ms = timeout_ms > 0 ? timeout_ms : 0};
    return elector_etcd_call(e, ELECTOR_RPC_LEASE_REVOKE, &req.base, &o, done, ud);
}

static void revoke_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e, (void)err, (void)m, (void)ud; /* nobody waits */
}

void elector__session_revoke(elector_etcd *e, int64_t lease)
{
    send_revoke(e, lease, 0, revoke_done, NULL);
}

/* Marks the session closed; returns the lease that should be revoked (0 if
 * none): an alive session's, or a dead one's that was not revoked yet. */
static int64_t close_common(elector_session *s)
{
    int64_t lease = s->revoke_owed ? s->lease : 0;
    s->revoke_owed = false;
    /* Closed before the elections hear of it: a callback that closes the
     * session again (say, on LOST) finds it closed and does nothing. */
    s->state = ELECTOR__S_CLOSED;
    elector__timer_disarm(s->etcd, &s->renew_timer);
    elector__timer_disarm(s->etcd, &s->deadline_timer);
    elector_etcd_keepalive_forget(s->etcd, s);
    elector__release_stop(&s->rel, s->etcd); /* we revoke it ourselves */
    elector__session_notify_ended(s, ELECTOR_ECLOSED, "session closed", 0);
    elector__session_detach_all(s);
    return lease;
}

void elector__session_close(elector_session *s)
{
    if (!s || s->state == ELECTOR__S_CLOSED) return;
    int64_t lease = close_common(s);
    if (lease) elector__session_revoke(s->etcd, lease);
    if (elector__close(&s->life)) free(s);
}

struct closed_wait {
    elector_session_closed_cb cb;
    void *ud;
};

static void closed_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e, (void)m;
    struct closed_wait w = *(struct closed_wait *)ud;
    free(ud);
    w.cb(err == ELECTOR_ELEASE ? 0 : err, w.ud);
}

int elector__session_close_async(elector_session *s, int64_t timeout_ms,
                                 elector_session_closed_cb cb, void *ud)
{
    if (!cb) {
        elector__session_close(s);
        return 0;
    }
    if (!s || s->state == ELECTOR__S_CLOSED) return 0;
    elector_etcd *e = s->etcd;
    int64_t lease = close_common(s);
    if (elector__close(&s->life)) free(s);
    if (!lease) return 0;
    struct closed_wait *w = malloc(sizeof(*w));
    if (!w) {
        elector__session_revoke(e, lease); /* sent if it can be; nobody is told */
        return ELECTOR_ENOMEM;
    }
    *w = (struct closed_wait){cb, ud};
    int rc = send_revoke(e, lease, timeout_ms, closed_done, w);
    if (rc) free(w);
    return rc ? rc : 1;
}

/* elector_session_close_sync's wait, on the heap: a loop that ends early (the
 * client freed from a callback) leaves it to the revoke's answer to free, if
 * that answer has not come yet. (Freeing the client ends every call, the
 * revoke with it, before the loop returns: so far it always has.) */
struct sync_wait {
    bool done, abandoned;
    int rc;
};

static void sync_revoked(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e, (void)m;
    struct sync_wait *w = ud;
    if (w->abandoned) {
        free(w);
        return;
    }
    w->done = true;
    w->rc = err == ELECTOR_ELEASE ? 0 : err;
}

/* A revoke that could not be queued or failed on the way is made again by the
 * blocking one: the caller may free the client next, and our keys must go. */
int elector__session_close_sync(elector_session *s, int64_t timeout_ms)
{
    if (!s || s->state == ELECTOR__S_CLOSED) return 0;
    elector_etcd *e = s->etcd;
    elector_etcd_config c;
    elector__etcd_settings(e, &c);
    int64_t until =
        elector_now_ns() + (timeout_ms > 0 ? timeout_ms : c.request_timeout_ms) * 1000000;
    int helper = s->rel.pid;
    int64_t lease = close_common(s);
    if (elector__close(&s->life)) free(s);
    /* The helper (told to stop) is reaped by the loop: on return it is gone,
     * not a zombie, as the blocking close promises (2 s at most: SIGKILL). */
    while (helper > 0 && elector__release_reaping(e, helper))
        if (elector__etcd_run_once(e, 10)) return ELECTOR_ECLOSED;
    if (!lease) return 0;
    struct sync_wait *w = calloc(1, sizeof(*w));
    if (!w) return elector_etcd_lease_revoke_sync(e, lease, until);
    int rc = send_revoke(e, lease, timeout_ms, sync_revoked, w);
    if (rc) {
        free(w);
        return rc == ELECTOR_ENOMEM ? elector_etcd_lease_revoke_sync(e, lease, until)
                                    : rc;
    }
    while (!w->done) {
        rc = elector__etcd_run_once(e, -1);
        if (rc) {
            /* The revoke's answer has come (ECANCELED by the client's free):
             * nobody will free the wait but us. It was once left behind. */
            if (w->done)
                free(w);
            else
                w->abandoned = true;
            return rc;
        }
    }
    rc = w->rc;
    free(w);
    /* failed on the way, time left: again, as the blocking revoke retries */
    if (rc && rc != ELECTOR_ETIMEDOUT && rc != ELECTOR_ECANCELED &&
        elector_now_ns() < until)
        rc = elector_etcd_lease_revoke_sync(e, lease, until);
    return rc;
}
