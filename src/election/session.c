/* SPDX-License-Identifier: MIT */
/* Sessions: a lease, kept alive every TTL/3, and the validity deadline that says
 * until when we can prove it alive. States: GRANTING -> ALIVE -> DEAD (lease gone
 * or unprovable), or CLOSED by the owner from any state.
 *
 * A session tells what depends on it (elections) through a list of listeners
 * (session_view.c); it knows nothing else of them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "session_private.h"

static void note_rtt(elector_session *s, int64_t rtt_ns)
{
    int i = 0;
    while (i < ELECTOR_RTT_BUCKETS - 1 && rtt_ns > elector_rtt_bounds_us[i] * 1000)
        i++;
    s->stats.rtt_buckets[i]++;
    s->stats.rtt_count++;
    s->stats.rtt_sum_ns += rtt_ns;
    s->stats.last_rtt_ns = rtt_ns;
}

static int64_t margin_ns(const elector_session *s)
{
    int64_t m = s->cfg.margin_ms;
    if (m <= 0) {
        m = s->ttl_s * 100; /* a tenth of the TTL, in ms */
        if (m < 200) m = 200;
    }
    return m * 1000000;
}

static void deadline_fired(elector__timer *t, void *ud);
static void renew_fired(elector__timer *t, void *ud);

/* Arms the loss timer a millisecond before the deadline, so that LOST is never
 * delivered after it. */
static void arm_deadline(elector_session *s)
{
    int64_t due = s->deadline_ns / 1000000 - 1;
    elector__timer_arm(s->etcd, &s->deadline_timer, due, deadline_fired, s);
}

/* The session is over: tell elections, then the owner; let the lease go. */
static void session_die(elector_session *s, int reason, const char *detail)
{
    if (s->state == ELECTOR__S_DEAD || s->state == ELECTOR__S_CLOSED) return;
    int64_t end_ns = s->deadline_ns;
    s->state = ELECTOR__S_DEAD;
    elector__timer_disarm(s->etcd, &s->renew_timer);
    elector__timer_disarm(s->etcd, &s->deadline_timer);
    elector_etcd_keepalive_forget(s->etcd, s);
    s->ka_in_flight = false;
    /* A lease we can no longer prove alive may still hold our keys: revoke it so
     * the next candidate need not wait for the TTL; unless the owner releases
     * it (after reaping what acted on our leadership), or etcd says it is gone. */
    if (reason == ELECTOR_ELEASE) s->revoke_owed = false;
    if (s->revoke_owed && !s->cfg.manual_release) {
        s->revoke_owed = false;
        elector__session_revoke(s->etcd, s->lease);
    }
    /* Nothing left for the helper to release. */
    if (!s->revoke_owed) elector__release_stop(&s->rel, s->etcd);
    elector__hold(&s->life);
    elector__session_notify_ended(s, reason, detail, end_ns);
    if (s->cb && s->state == ELECTOR__S_DEAD) {
        elector_event ev = {.type = ELECTOR_EV_SESSION_LOST,
                            .reason = reason,
                            .detail = detail,
                            .lease = s->lease,
                            .mono_ns = elector__mono_ns()};
        s->cb(s, &ev, s->ud);
    }
    elector__session_unhold(s);
}

/* The validity deadline has passed: the session is over, whatever comes later. */
static void expire(elector_session *s)
{
    char detail[160];
    snprintf(detail, sizeof(detail),
             "lease %llx not renewed in time: validity deadline passed (%s)",
             (unsigned long long)s->lease,
             s->last_err ? elector_strerror(s->last_err) : "no reply");
    session_die(s, ELECTOR_ESESSION, detail);
}

static void deadline_fired(elector__timer *t, void *ud)
{
    (void)t;
    expire(ud);
}

static void extend(elector_session *s, int64_t t_send_ns, int64_t ttl)
{
    /* etcd counts the TTL from when it received the request, which is after we
     * sent it: t_send + ttl is a lower bound of the expiry. */
    int64_t d = t_send_ns + ttl * 1000000000 - margin_ns(s);
    if (d > s->deadline_ns) s->deadline_ns = d;
    s->ttl_s = ttl;
    arm_deadline(s);
    int64_t every_ms = ttl * 1000 / 3;
    elector__timer_arm(s->etcd, &s->renew_timer, t_send_ns / 1000000 + every_ms,
                       renew_fired, s);
}

static void keepalive_done(elector_etcd *e, int err, int64_t lease, int64_t ttl, void *ud)
{
    (void)lease;
    elector_session *s = ud;
    s->ka_in_flight = false;
    if (s->state != ELECTOR__S_ALIVE) return;
    const char *why;
    if (elector__restores(e, &why) != s->restores) {
        /* etcd went back to an older revision: the lease and the keys may be
         * gone, or the fencing tokens handed out may be handed out again. */
        session_die(s, ELECTOR_ERESTORED, why);
        return;
    }
    if (err == ELECTOR_ELEASE || err == ELECTOR_EPROTO) {
        /* Gone, or a server that breaks the protocol: a retry cannot help. */
        session_die(s, err, elector__etcd_errstr(e));
        return;
    }
    if (elector_now_ns() >= s->deadline_ns) {
        /* Processed after the deadline (the process was stopped, or busy): the
         * answer may prove the lease alive a little longer, but the belief
         * ended at the deadline and elector__is_leader() may have said so.
         * It never comes back without a new campaign. */
        expire(s);
        return;
    }
    if (err) {
        /* Unknown outcome: try again soon; the deadline timer decides when to
         * give up. */
        s->last_err = err;
        s->stats.failures++;
        int64_t retry = elector__now_ms() + 250;
        elector__timer_arm(e, &s->renew_timer, retry, renew_fired, s);
        return;
    }
    s->last_err = 0;
    s->stats.renewals++;
    note_rtt(s, elector_now_ns() - s->ka_sent_ns);
    extend(s, s->ka_sent_ns, ttl);
    /* The helper follows the client's endpoints and password: within TTL/3. */
    elector__release_refresh(&s->rel, e);
}

static void renew_fired(elector__timer *t, void *ud)
{
    (void)t;
    elector_session *s = ud;
    if (s->state != ELECTOR__S_ALIVE || s->ka_in_flight) return;
    s->ka_sent_ns = elector_now_ns();
    if (s->ka_sent_ns >= s->deadline_ns) {
        expire(s); /* too late to renew: the loop ran after the deadline */
        return;
    }
    /* Waiting longer than the deadline for the answer is pointless. */
    int64_t tmo = (s->deadline_ns - s->ka_sent_ns) / 1000000;
    if (tmo < 100) tmo = 100;
    int rc = elector_etcd_keepalive(s->etcd, s->lease, tmo, keepalive_done, s);
    if (rc) {
        s->last_err = rc;
        elector__timer_arm(s->etcd, &s->renew_timer, elector__now_ms() + 250, renew_fired,
                           s);
        return;
    }
    s->ka_in_flight = true;
}

static void granted(elector_session *s, int64_t id, int64_t ttl)
{
    s->restores = elector__restores(s->etcd, NULL);
    s->lease = id;
    s->state = ELECTOR__S_ALIVE;
    s->revoke_owed = true;
    s->deadline_ns = 0;
    extend(s, s->ka_sent_ns, ttl);
    if (s->cfg.release_on_exit)
        elector__release_start(&s->rel, s->etcd, id, ttl, s->cfg.lease_id != 0);
    elector__session_notify(s, SW_READY, 0, NULL, 0);
}

/* A grant refused as ELECTOR_EUNAVAILABLE (etcd's "too many requests", the
 * leader changing, the connection lost under the request) or ELECTOR_ETIMEDOUT
 * (etcd's "request timed out" when it is overloaded, or no answer in time) is
 * sent again, with a jittered pause, for this long after the session was
 * created. Other errors (no connection at all, no leader) end the session as
 * before: the caller decides how long to wait for a cluster that is down. (A grant
 * applied but not answered leaves a lease nobody uses: it expires after its TTL.) */
#define GRANT_RETRY_MS 30000

static void grant_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud);
static void adopt_done(elector_etcd *e, int err, int64_t lease, int64_t ttl, void *ud);

/* A grant answered after the validity deadline it would have had (the process
 * or the machine stalled between sending it and reading the answer, or etcd
 * answered slower than the TTL): the lease may still live in etcd, since etcd
 * counts the TTL from when it received the request, but nothing proves it. It
 * is not reported ready on that answer: a keepalive sent now confirms it (or
 * finds it gone, and the lease is granted again), for up to GRANT_RETRY_MS. */
static void confirm_late_grant(elector_session *s, int64_t id)
{
    s->ka_sent_ns = elector_now_ns();
    int rc = elector_etcd_keepalive(s->etcd, id, 0, adopt_done, s);
    if (rc) {
        s->grant_err = rc;
        session_die(s, rc, elector__etcd_errstr(s->etcd));
        return;
    }
    s->ka_in_flight = true;
}

static int send_grant(elector_session *s)
{
    Etcdserverpb__LeaseGrantRequest req = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
    req.ttl = s->cfg.ttl_s;
    s->ka_sent_ns = elector_now_ns();
    int rc = elector_etcd_call(s->etcd, ELECTOR_RPC_LEASE_GRANT, &req.base, NULL,
                               grant_done, s);
    if (!rc) elector__hold(&s->life); /* until grant_done */
    return rc;
}

static void grant_retry_fired(elector__timer *t, void *ud)
{
    (void)t;
    elector_session *s = ud;
    if (s->state != ELECTOR__S_GRANTING) return;
    int rc = send_grant(s);
    if (rc) {
        s->grant_err = rc;
        session_die(s, rc, elector__etcd_errstr(s->etcd));
    }
}

static void grant_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    elector_session *s = ud;
    if (s->state == ELECTOR__S_GRANTING) {
        const Etcdserverpb__LeaseGrantResponse *r = (const void *)m;
        /* A reply that grants nothing says why itself (the client's error
         * text is not about it). */
        const char *why = elector__etcd_errstr(e);
        if (!err && r->error && *r->error) err = ELECTOR_EGRPC, why = r->error;
        if (!err && r->ttl <= 0)
            err = ELECTOR_ELEASE, why = "etcd answered TTL 0 (no lease)";
        if ((err == ELECTOR_EUNAVAILABLE || err == ELECTOR_ETIMEDOUT) &&
            elector__now_ms() - s->created_ms < GRANT_RETRY_MS) {
            s->stats.grant_retries++;
            int64_t d = elector__backoff_ms((int)s->stats.grant_retries, 50, 1600,
                                            elector__next_rnd(e));
            elector__timer_arm(e, &s->renew_timer, elector__now_ms() + d,
                               grant_retry_fired, s);
        } else if (err) {
            s->grant_err = err;
            char detail[600];
            snprintf(detail, sizeof(detail), "cannot grant lease: %s", why);
            session_die(s, err, detail);
        } else if (s->ka_sent_ns + r->ttl * 1000000000 - margin_ns(s) <=
                   elector_now_ns()) {
            confirm_late_grant(s, r->id);
        } else {
            granted(s, r->id, r->ttl);
        }
    }
    elector__session_unhold(s);
}

static void adopt_done(elector_etcd *e, int err, int64_t lease, int64_t ttl, void *ud)
{
    elector_session *s = ud;
    s->ka_in_flight = false;
    if (s->state != ELECTOR__S_GRANTING) return;
    if (!s->cfg.lease_id && elector__now_ms() - s->created_ms < GRANT_RETRY_MS) {
        /* The confirmation of a late grant: answered late again, or the lease
         * is gone already (ELEASE): try once more (a keepalive if it lives, a
         * new grant if not). */
        if (!err && s->ka_sent_ns + ttl * 1000000000 - margin_ns(s) <= elector_now_ns()) {
            confirm_late_grant(s, lease);
            return;
        }
        if (err == ELECTOR_ELEASE || err == ELECTOR_EUNAVAILABLE ||
            err == ELECTOR_ETIMEDOUT) {
            s->stats.grant_retries++;
            int rc = send_grant(s);
            if (rc) {
                s->grant_err = rc;
                session_die(s, rc, elector__etcd_errstr(e));
            }
            return;
        }
    }
    if (err) {
        s->grant_err = err;
        session_die(s, err, elector__etcd_errstr(e));
        return;
    }
    if (s->ka_sent_ns + ttl * 1000000000 - margin_ns(s) <= elector_now_ns()) {
        s->grant_err = ELECTOR_ETIMEDOUT;
        session_die(s, ELECTOR_ETIMEDOUT,
                    "the lease's keepalive was answered after its TTL: etcd (or this "
                    "process) is too slow for this TTL");
        return;
    }
    granted(s, lease, ttl);
}

elector_session *elector__session_new(elector_etcd *etcd,
                                      const elector_session_config *cfg,
                                      elector_session_cb cb, void *ud)
{
    if (!etcd || elector__etcd_err(etcd) == ELECTOR_ENOMEM) return NULL;
    elector_session *s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    s->etcd = etcd;
    elector_session_config_init(&s->cfg);
    if (cfg) s->cfg = *cfg;
    if (s->cfg.ttl_s <= 0) s->cfg.ttl_s = 10;
    s->ttl_s = s->cfg.ttl_s;
    s->cb = cb;
    s->ud = ud;
    elector__release_init(&s->rel);
    s->state = ELECTOR__S_GRANTING;
    s->ka_sent_ns = elector_now_ns();
    s->created_ms = elector__now_ms();
    int rc;
    if (s->cfg.lease_id) {
        rc = elector_etcd_keepalive(etcd, s->cfg.lease_id, 0, adopt_done, s);
        if (!rc) s->ka_in_flight = true;
    } else {
        rc = send_grant(s);
    }
    if (rc) {
        free(s);
        return NULL;
    }
    return s;
}

/* The lease is granted (or adopted), or its grant failed. */
static bool grant_over(const void *arg)
{
    const elector_session *s = arg;
    return s->state != ELECTOR__S_GRANTING;
}

int elector__session_wait(elector_session *s, int64_t timeout_ms)
{
    int rc = elector__etcd_run_until(s->etcd, grant_over, s, timeout_ms);
    if (rc) return rc;
    return s->state == ELECTOR__S_ALIVE
               ? 0
               : (s->grant_err ? s->grant_err : ELECTOR_ESESSION);
}
