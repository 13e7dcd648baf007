/* SPDX-License-Identifier: MIT */
/* Sessions (elector/election.h): driven by the caller's loop, the core's
 * functions (src/election/); with own_thread, each call is a job on the loop
 * thread (loop_thread.c), the core's events go to the callback thread
 * (callback_thread.c), and the reads come from what the loop thread published. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "driver_private.h"

/* The core's SESSION_LOST, on the loop thread. */
static void session_relay(elector_session *cs, const elector_event *ev, void *ud)
{
    (void)cs;
    struct drv_session *s = ud;
    elector__drv *d = s->h.d;
    pthread_mutex_lock(&d->mu);
    s->phase = 2;
    if (!s->err) s->err = ev->reason ? ev->reason : ELECTOR_ESESSION;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    elector__drv_queue_event(d, &s->h, I_EVENT, ev);
}

static void session_new_job(elector__drv *d, struct job *j)
{
    struct drv_session *s = j->a;
    s->core = elector__session_new(d->etcd, j->p1, session_relay, s);
    if (!s->core) {
        j->rc = elector__etcd_err(d->etcd) ? elector__etcd_err(d->etcd) : ELECTOR_ENOMEM;
        return;
    }
    elector__session_set_owner(s->core, s);
    elector__drv_h_attach_new(d, &s->h, s->core, j);
}

elector_session *elector_session_new(elector_etcd *e, const elector_session_config *cfg,
                                     elector_session_cb cb, void *ud)
{
    if (!e) return NULL;
    elector__drv *d = elector__drv_of(e);
    if (!d) return elector__session_new(e, cfg, cb, ud);
    struct drv_session *s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    s->h = (struct dh){.d = d, .kind = H_SESSION, .refs = 1};
    s->cb = cb;
    s->ud = ud;
    struct job j = {.fn = session_new_job, .a = s, .p1 = cfg};
    if (elector__drv_call(d, &j)) {
        free(s);
        return NULL;
    }
    return j.out;
}

/* The lease is granted, or its grant failed (published by the loop thread). */
static bool grant_over(const void *arg)
{
    const struct drv_session *s = arg;
    return s->phase != 0;
}

int elector_session_wait(elector_session *cs, int64_t timeout_ms)
{
    if (!cs) return ELECTOR_EINVAL;
    struct drv_session *s = drv_session_of(cs);
    if (!s) return elector__session_wait(cs, timeout_ms);
    elector__drv *d = s->h.d;
    int rc = elector__drv_enter_h(d, &s->h);
    if (rc) return rc;
    rc = elector__drv_wait(d, grant_over, s, end_of(timeout_ms));
    if (!rc) rc = s->phase == 1 ? 0 : s->err;
    elector__drv_leave_h(d, &s->h);
    return rc;
}

/* ---------------------------------------------------------------- close */

/* How a close is told: elector_session_close_async()'s callback (on the
 * callback thread), elector_session_close_sync()'s waiter (abandoned at its
 * timeout, then freed by the answer), or nobody (elector_session_close()). */
struct closing {
    elector__drv *d;
    elector_session_closed_cb cb;
    void *ud;
    bool waited, done, abandoned;
    int rc;
    /* For the waiter: the lease, and the end of its time (ms_now() clock;
     * timeout_ms <= 0: the client's request timeout, as the core's). */
    int64_t lease, end_ms;
};

static struct closing *closing_new(elector__drv *d, elector_session_closed_cb cb,
                                   void *ud, bool waited)
{
    struct closing *c = calloc(1, sizeof(*c));
    if (!c) return NULL;
    c->d = d;
    c->cb = cb;
    c->ud = ud;
    c->waited = waited;
    return c;
}

static void closed_deliver(elector_etcd *e, void *ud)
{
    (void)e;
    struct closing *c = ud;
    c->cb(c->rc, c->ud);
    free(c);
}

/* The answer a waiter waits for (mu not held): told, or c freed when nobody
 * waits any longer. */
static void closing_done(struct closing *c, int rc)
{
    elector__drv *d = c->d;
    pthread_mutex_lock(&d->mu);
    c->rc = rc;
    c->done = true;
    bool gone = c->abandoned || !c->waited;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    if (gone) free(c);
}

/* The waiter's side (mu held): c's answer, or ECLOSED once the loop is over,
 * or ETIMEDOUT at end_ms; c is freed, or left to its answer. */
static int closing_wait(elector__drv *d, struct closing *c, int64_t end_ms)
{
    while (!c->done && !d->loop_over && !past(end_ms))
        cv_wait(d, &d->cv, end_ms);
    int rc = c->done ? c->rc : d->loop_over ? ELECTOR_ECLOSED : ELECTOR_ETIMEDOUT;
    if (c->done)
        free(c);
    else
        c->abandoned = true;
    return rc;
}

/* A closed session's revoke answered (or ended by the client's end). Loop
 * thread. */
static void session_revoked(int rc, void *ud)
{
    struct closing *c = ud;
    elector__drv *d = c->d;
    d->revokes--;
    if (c->cb) {
        c->rc = rc;
        if (!elector__drv_queue_call(d, closed_deliver, c)) free(c);
        return;
    }
    closing_done(c, rc);
}

/* The revoke of a close nobody is told of (elector_session_close(), or a
 * close deferred from the session's own callback) answered: only uncounted.
 * Needs no record, so it is counted even when memory ran out. Loop thread. */
static void session_revoked_quietly(int rc, void *ud)
{
    (void)rc;
    elector__drv *d = ud;
    d->revokes--;
}

static void session_close_job(elector__drv *d, struct job *j)
{
    struct drv_session *s = j->a;
    struct closing *c = j->wait_h ? NULL : j->b; /* deferred: nobody is told */
    elector_session *cs = s->core;
    s->core = NULL;
    if (c && c->waited && cs) {
        elector_etcd_config cfg;
        elector__etcd_settings(d->etcd, &cfg);
        c->lease = elector__session_lease(cs);
        c->end_ms = ms_now() + (j->n1 > 0 ? (int64_t)j->n1 : cfg.request_timeout_ms);
    }
    /* Counted: the client's end waits for the answer (it would cancel it). */
    j->rc = cs ? elector__session_close_async(
                     cs, (int64_t)j->n1, c ? session_revoked : session_revoked_quietly,
                     c ? (void *)c : (void *)d)
               : 0;
    if (j->rc == 1) d->revokes++; /* the answer uncounts it */
    pthread_mutex_lock(&d->mu);
    elector__drv_h_detach(&s->h);
    pthread_mutex_unlock(&d->mu);
}

/* Closes s from any thread with c told (see struct closing); c NULL: nobody.
 * Returns what elector_session_close_async() returned on the loop thread,
 * ELECTOR_ECLOSED when the client was stopping (the stop closes it). From the
 * session's own callback the close is made once that callback has returned,
 * and nobody is told (0). */
static int close_rec(struct drv_session *s, struct closing *c, int64_t timeout_ms)
{
    struct job j = {.fn = session_close_job,
                    .a = s,
                    .b = c,
                    .n1 = (size_t)(timeout_ms > 0 ? timeout_ms : 0)};
    return elector__drv_end_h(s->h.d, &s->h, &j);
}

void elector_session_close(elector_session *cs)
{
    struct drv_session *s = drv_session_of(cs);
    if (!s) {
        elector__session_close(cs);
        return;
    }
    close_rec(s, NULL, 0);
}

int elector_session_close_async(elector_session *cs, int64_t timeout_ms,
                                elector_session_closed_cb cb, void *ud)
{
    struct drv_session *s = drv_session_of(cs);
    if (!s) return elector__session_close_async(cs, timeout_ms, cb, ud);
    if (forked(s->h.d)) return ELECTOR_EFORKED;
    if (!cb) {
        elector_session_close(cs);
        return 0;
    }
    struct closing *c = closing_new(s->h.d, cb, ud, false);
    if (!c) {
        elector_session_close(cs); /* the revoke is still sent */
        return ELECTOR_ENOMEM;
    }
    int rc = close_rec(s, c, timeout_ms);
    if (rc != 1) free(c);
    return rc;
}

/* A revoke made again from the closing thread, waited on (a closing record
 * of its own): as elector_etcd_lease_revoke_sync() in the caller's loop, a
 * failure a later attempt may not see (the connection, the cluster's leader,
 * a deadline) is tried again after a pause, until end_ms. The answer is taken
 * on the loop thread (so a close_sync made from a callback does not wait for
 * its own thread); a wait given up at end_ms leaves the record to the answer,
 * which the client's end gives too (ECANCELED). */
static void revoked_again(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e, (void)m;
    closing_done(ud, err == ELECTOR_ELEASE ? 0 : err);
}

static void revoke_again_job(elector__drv *d, struct job *j)
{
    Etcdserverpb__LeaseRevokeRequest req = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
    req.id = (int64_t)j->n1;
    elector_call_opts opts = {.timeout_ms = (int64_t)j->n2, .require_leader = 1};
    j->rc = elector_etcd_call(d->etcd, ELECTOR_RPC_LEASE_REVOKE, &req.base, &opts,
                              revoked_again, j->a);
}

static bool revoke_retryable(int rc)
{
    return rc == ELECTOR_ECONNECT || rc == ELECTOR_EUNAVAILABLE ||
           rc == ELECTOR_ETIMEDOUT || rc == ELECTOR_ENOLEADER || rc == ELECTOR_ETOKEN ||
           rc == ELECTOR_EGRPC;
}

/* Makes the revoke again every 100 ms until it is answered, fails for good or
 * end_ms passes. mu held (released while waiting), and the caller holds a call
 * (d->calls): the client's free waits for it, and ends it (ELECTOR_ECLOSED). */
static int revoke_until(elector__drv *d, int64_t lease, int64_t end_ms, int rc)
{
    while (lease > 0 && revoke_retryable(rc) && !past(end_ms)) {
        int64_t pause_end = ms_now() + 100;
        if (pause_end > end_ms) pause_end = end_ms;
        while (!d->stop && !past(pause_end))
            cv_wait(d, &d->cv, pause_end);
        if (d->stop) return ELECTOR_ECLOSED;
        int64_t left = end_ms - ms_now();
        if (left <= 0) break;
        struct closing *w = closing_new(d, NULL, NULL, true);
        if (!w) return ELECTOR_ENOMEM;
        struct job j = {.fn = revoke_again_job,
                        .a = w,
                        .n1 = (size_t)lease,
                        .n2 = (size_t)(left < 100 ? 100 : left)};
        rc = elector__drv_run_job(d, &j);
        if (rc) {
            free(w); /* not sent: no answer will come */
            break;
        }
        rc = closing_wait(d, w, end_ms);
    }
    return rc;
}

int elector_session_close_sync(elector_session *cs, int64_t timeout_ms)
{
    struct drv_session *s = drv_session_of(cs);
    if (!s) return elector__session_close_sync(cs, timeout_ms);
    elector__drv *d = s->h.d;
    if (forked(d)) return ELECTOR_EFORKED;
    struct closing *c = closing_new(d, NULL, NULL, true);
    if (!c) {
        elector_session_close(cs);
        return ELECTOR_ENOMEM;
    }
    /* A call held from here to the end: a free of the client from another
     * thread meanwhile waits for this wait and the revokes made again, and
     * ends them (loop_over, stop). */
    pthread_mutex_lock(&d->mu);
    d->calls++;
    pthread_mutex_unlock(&d->mu);
    int rc = close_rec(s, c, timeout_ms);
    pthread_mutex_lock(&d->mu);
    if (rc != 1) {
        free(c);
        rc = rc < 0 ? rc : 0;
    } else {
        int64_t end = c->end_ms, lease = c->lease;
        rc = closing_wait(d, c, end);
        /* failed on the way, time left: again, as the core's close_sync does */
        if (rc && rc != ELECTOR_ETIMEDOUT && rc != ELECTOR_ECANCELED &&
            rc != ELECTOR_ECLOSED)
            rc = revoke_until(d, lease, end, rc);
    }
    elector__drv_leave(d);
    return rc;
}

/* ---------------------------------------------------------------- reads */

/* What the loop thread last published of s, read under the lock; all zero
 * in a forked child (its copy of the client has no loop thread). */
struct published {
    int helper, phase;
    int64_t lease, ttl, deadline_ns;
};

static struct published published(const struct drv_session *s)
{
    struct published p = {0};
    elector__drv *d = s->h.d;
    if (forked(d)) return p;
    pthread_mutex_lock(&d->mu);
    p = (struct published){.helper = s->helper,
                           .phase = s->phase,
                           .lease = s->lease,
                           .ttl = s->ttl,
                           .deadline_ns = s->deadline_ns};
    pthread_mutex_unlock(&d->mu);
    return p;
}

int elector_session_helper(const elector_session *cs)
{
    struct drv_session *s = drv_session_of(cs);
    if (!s) return cs ? elector__session_helper(cs) : 0;
    return published(s).helper;
}

int64_t elector_session_lease(const elector_session *cs)
{
    struct drv_session *s = drv_session_of(cs);
    if (!s) return cs ? elector__session_lease(cs) : 0;
    return published(s).lease;
}

int64_t elector_session_ttl(const elector_session *cs)
{
    struct drv_session *s = drv_session_of(cs);
    if (!s) return cs ? elector__session_ttl(cs) : 0;
    return published(s).ttl;
}

int64_t elector_session_deadline_ns(const elector_session *cs)
{
    struct drv_session *s = drv_session_of(cs);
    if (!s) return cs ? elector__session_deadline_ns(cs) : 0;
    struct published p = published(s);
    return p.phase == 1 ? p.deadline_ns : 0;
}

bool elector_session_alive(const elector_session *cs)
{
    struct drv_session *s = drv_session_of(cs);
    if (!s) return cs && elector__session_alive(cs);
    struct published p = published(s);
    return p.phase == 1 && elector_now_ns() < p.deadline_ns;
}

static void session_stats_job(elector__drv *d, struct job *j)
{
    (void)d;
    struct drv_session *s = j->a;
    if (s->core)
        elector__session_get_stats(s->core, j->b);
    else
        j->rc = ELECTOR_ECLOSED;
}

void elector_session_get_stats(const elector_session *cs, elector_session_stats *out)
{
    if (!cs) return;
    struct drv_session *s = drv_session_of(cs);
    if (!s) {
        elector__session_get_stats(cs, out);
        return;
    }
    memset(out, 0, sizeof(*out));
    struct job j = {.fn = session_stats_job, .a = s, .b = out};
    elector__drv_call_h(s->h.d, &s->h, &j);
}
