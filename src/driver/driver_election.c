/* SPDX-License-Identifier: MIT */
/* The driver's sessions and elections: each call is a job on the loop thread
 * (driver.c); the core's events go to the callback thread (driver_cb.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "driver_private.h"

/* ---------------------------------------------------------------- sessions */

static void session_cb(elector_session *cs, const elector_event *ev, void *ud)
{
    (void)cs;
    elector_driver_session *s = ud;
    elector_driver *d = s->h.d;
    pthread_mutex_lock(&d->mu);
    s->phase = 2;
    if (!s->err) s->err = ev->reason ? ev->reason : ELECTOR_ESESSION;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    elector__drv_queue_event(d, &s->h, ev);
}

static void session_new_job(elector_driver *d, struct job *j)
{
    elector_driver_session *s = j->a;
    s->core = elector_session_new(d->etcd, &s->cfg, session_cb, s);
    if (!s->core)
        j->rc = elector_etcd_err(d->etcd) ? elector_etcd_err(d->etcd) : ELECTOR_ENOMEM;
}

elector_driver_session *elector_driver_session_new(elector_driver *d,
                                                   const elector_session_config *cfg,
                                                   elector_driver_session_cb cb, void *ud)
{
    if (elector__drv_enter(d)) return NULL;
    elector_driver_session *s = calloc(1, sizeof(*s));
    if (!s) {
        elector__drv_leave(d);
        return NULL;
    }
    s->h.d = d;
    s->h.kind = H_SESSION;
    s->h.refs = 1;
    if (cfg)
        s->cfg = *cfg;
    else
        elector_session_config_init(&s->cfg);
    s->cb = cb;
    s->ud = ud;
    struct job j = {.fn = session_new_job, .a = s};
    if (elector__drv_run_job(d, &j)) {
        free(s);
        s = NULL;
    } else {
        elector__drv_h_attach(d, &s->h);
    }
    elector__drv_leave(d);
    return s;
}

int elector_driver_session_wait(elector_driver_session *s, int64_t timeout_ms)
{
    if (!s) return ELECTOR_EINVAL;
    elector_driver *d = s->h.d;
    int rc = elector__drv_enter_h(d, &s->h);
    if (rc) return rc;
    int64_t end = end_of(timeout_ms);
    while (s->phase == 0 && !d->stop && !past(end))
        cv_wait(d, &d->cv, end);
    rc = s->phase == 1   ? 0
         : s->phase == 2 ? s->err
         : d->stop       ? ELECTOR_ECLOSED
                         : ELECTOR_ETIMEDOUT;
    elector__drv_leave_h(d, &s->h);
    return rc;
}

/* A closed session's revoke answered (or ended by the client's end). Loop
 * thread. */
static void session_revoked(int rc, void *ud)
{
    (void)rc;
    elector_driver *d = ud;
    d->revokes--;
}

static void session_close_job(elector_driver *d, struct job *j)
{
    elector_driver_session *s = j->a;
    elector_session *cs = s->core;
    s->core = NULL;
    /* Counted: the driver's end waits for the answer (it would cancel it). */
    if (cs && elector_session_close_async(cs, 0, session_revoked, d) == 1) d->revokes++;
    pthread_mutex_lock(&d->mu);
    elector__drv_h_detach(&s->h);
    pthread_mutex_unlock(&d->mu);
}

void elector_driver_session_close(elector_driver_session *s)
{
    if (!s) return;
    elector_driver *d = s->h.d;
    if (forked(d)) return;
    pthread_mutex_lock(&d->mu);
    bool mine = !s->h.closed; /* else the driver's shutdown took it */
    s->h.closed = true;
    elector__drv_quiesce(d, &s->h);
    if (!d->stop) {
        d->calls++;
        struct job j = {.fn = session_close_job, .a = s};
        elector__drv_run_job(d, &j);
        d->calls--;
        if (d->calls == 0) pthread_cond_broadcast(&d->cv);
    }
    if (mine) elector__drv_h_unref(&s->h);
    pthread_mutex_unlock(&d->mu);
}

int elector_driver_session_helper(const elector_driver_session *s)
{
    if (!s || forked(s->h.d)) return 0;
    elector_driver *d = s->h.d;
    pthread_mutex_lock(&d->mu);
    int pid = s->helper;
    pthread_mutex_unlock(&d->mu);
    return pid;
}

int64_t elector_driver_session_lease(const elector_driver_session *s)
{
    if (!s || forked(s->h.d)) return 0;
    elector_driver *d = s->h.d;
    pthread_mutex_lock(&d->mu);
    int64_t l = s->lease;
    pthread_mutex_unlock(&d->mu);
    return l;
}

bool elector_driver_session_alive(const elector_driver_session *s)
{
    if (!s || forked(s->h.d)) return false;
    elector_driver *d = s->h.d;
    pthread_mutex_lock(&d->mu);
    bool alive = s->phase == 1 && elector_now_ns() < s->deadline_ns;
    pthread_mutex_unlock(&d->mu);
    return alive;
}

/* ---------------------------------------------------------------- elections */

static void election_cb(elector_election *ce, const elector_event *ev, void *ud)
{
    elector_driver_election *el = ud;
    elector_driver *d = el->h.d;
    pthread_mutex_lock(&d->mu);
    switch (ev->type) {
    case ELECTOR_EV_ELECTED:
        el->outcome = 1;
        break;
    case ELECTOR_EV_FAILED:
        el->outcome = ev->reason ? ev->reason : ELECTOR_ECANCELED;
        el->resign_done = true;
        break;
    case ELECTOR_EV_RESIGNED:
        el->resign_done = true;
        break;
    default:
        break;
    }
    el->leader = elector_is_leader(ce);
    el->token = elector_election_token(ce);
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    elector__drv_queue_event(d, &el->h, ev);
}

static void election_new_job(elector_driver *d, struct job *j)
{
    (void)d;
    elector_driver_election *el = j->a;
    elector_driver_session *s = el->s;
    if (!s->core) {
        j->rc = ELECTOR_ESESSION;
        return;
    }
    el->core = elector_election_new(s->core, el->name, election_cb, el);
    if (!el->core) j->rc = ELECTOR_ENOMEM;
}

elector_driver_election *elector_driver_election_new(elector_driver_session *s,
                                                     const char *name,
                                                     elector_driver_election_cb cb,
                                                     void *ud)
{
    if (!s || !name || !*name) return NULL;
    elector_driver *d = s->h.d;
    if (elector__drv_enter(d)) return NULL;
    elector_driver_election *el = calloc(1, sizeof(*el));
    char *n = strdup(name);
    if (!el || !n) {
        free(el);
        free(n);
        elector__drv_leave(d);
        return NULL;
    }
    el->h.d = d;
    el->h.kind = H_ELECTION;
    el->h.refs = 1;
    el->s = s;
    el->name = n;
    el->cb = cb;
    el->ud = ud;
    struct job j = {.fn = election_new_job, .a = el};
    if (elector__drv_run_job(d, &j)) {
        free(n);
        free(el);
        el = NULL;
    } else {
        elector__drv_h_attach(d, &el->h);
    }
    elector__drv_leave(d);
    return el;
}

static void election_free_job(elector_driver *d, struct job *j)
{
    elector_driver_election *el = j->a;
    elector_election *ce = el->core;
    el->core = NULL;
    if (ce) elector_election_free(ce);
    pthread_mutex_lock(&d->mu);
    el->leader = false;
    elector__drv_h_detach(&el->h);
    pthread_mutex_unlock(&d->mu);
}

void elector_driver_election_free(elector_driver_election *el)
{
    if (!el) return;
    elector_driver *d = el->h.d;
    if (forked(d)) return;
    pthread_mutex_lock(&d->mu);
    bool mine = !el->h.closed; /* else the driver's shutdown took it */
    el->h.closed = true;
    elector__drv_quiesce(d, &el->h);
    if (!d->stop) {
        d->calls++;
        struct job j = {.fn = election_free_job, .a = el};
        elector__drv_run_job(d, &j);
        d->calls--;
        if (d->calls == 0) pthread_cond_broadcast(&d->cv);
    }
    if (mine) elector__drv_h_unref(&el->h);
    pthread_mutex_unlock(&d->mu);
}

static void campaign_job(elector_driver *d, struct job *j)
{
    elector_driver_election *el = j->a;
    if (!el->core) {
        j->rc = ELECTOR_ECLOSED;
        return;
    }
    pthread_mutex_lock(&d->mu);
    el->outcome = 0;
    pthread_mutex_unlock(&d->mu);
    j->rc = elector_campaign(el->core, j->p1, j->n1);
}

static void proclaim_job(elector_driver *d, struct job *j)
{
    (void)d;
    elector_driver_election *el = j->a;
    j->rc = el->core ? elector_proclaim(el->core, j->p1, j->n1) : ELECTOR_ECLOSED;
}

static void resign_job(elector_driver *d, struct job *j)
{
    elector_driver_election *el = j->a;
    if (!el->core) {
        j->rc = ELECTOR_ECLOSED;
        return;
    }
    pthread_mutex_lock(&d->mu);
    el->resign_done = false;
    pthread_mutex_unlock(&d->mu);
    j->rc = elector_resign(el->core);
    pthread_mutex_lock(&d->mu);
    el->leader = elector_is_leader(el->core);
    pthread_mutex_unlock(&d->mu);
}

static int el_job(elector_driver_election *el, void (*fn)(elector_driver *, struct job *),
                  const void *p, size_t n)
{
    if (!el) return ELECTOR_EINVAL;
    elector_driver *d = el->h.d;
    int rc = elector__drv_enter_h(d, &el->h);
    if (rc) return rc;
    struct job j = {.fn = fn, .a = el, .p1 = p, .n1 = n};
    rc = elector__drv_run_job(d, &j);
    elector__drv_leave_h(d, &el->h);
    return rc;
}

int elector_driver_campaign(elector_driver_election *el, const void *value, size_t len)
{
    return el_job(el, campaign_job, value, len);
}

int elector_driver_proclaim(elector_driver_election *el, const void *value, size_t len)
{
    return el_job(el, proclaim_job, value, len);
}

int elector_driver_resign(elector_driver_election *el)
{
    return el_job(el, resign_job, NULL, 0);
}

int elector_driver_campaign_sync(elector_driver_election *el, const void *value,
                                 size_t len, int64_t timeout_ms)
{
    if (!el) return ELECTOR_EINVAL;
    elector_driver *d = el->h.d;
    int rc = elector__drv_enter_h(d, &el->h);
    if (rc) return rc;
    int64_t end = end_of(timeout_ms);
    struct job j = {.fn = campaign_job, .a = el, .p1 = value, .n1 = len};
    rc = elector__drv_run_job(d, &j);
    if (!rc) {
        while (el->outcome == 0 && !d->stop && !past(end))
            cv_wait(d, &d->cv, end);
        rc = el->outcome == 1  ? 0
             : el->outcome < 0 ? el->outcome
             : d->stop         ? ELECTOR_ECLOSED
                               : ELECTOR_ETIMEDOUT;
    }
    elector__drv_leave_h(d, &el->h);
    return rc;
}

int elector_driver_resign_sync(elector_driver_election *el, int64_t timeout_ms)
{
    if (!el) return ELECTOR_EINVAL;
    elector_driver *d = el->h.d;
    int rc = elector__drv_enter_h(d, &el->h);
    if (rc) return rc;
    int64_t end = end_of(timeout_ms);
    struct job j = {.fn = resign_job, .a = el};
    rc = elector__drv_run_job(d, &j);
    if (!rc) {
        while (!el->resign_done && !d->stop && !past(end))
            cv_wait(d, &d->cv, end);
        rc = el->resign_done ? 0 : d->stop ? ELECTOR_ECLOSED : ELECTOR_ETIMEDOUT;
    }
    elector__drv_leave_h(d, &el->h);
    return rc;
}

bool elector_driver_is_leader(const elector_driver_election *el)
{
    if (!el || forked(el->h.d)) return false;
    elector_driver *d = el->h.d;
    pthread_mutex_lock(&d->mu);
    bool yes = el->leader && !el->h.closed && elector_now_ns() < el->deadline_ns;
    pthread_mutex_unlock(&d->mu);
    return yes;
}

int64_t elector_driver_token(const elector_driver_election *el)
{
    if (!el || forked(el->h.d)) return 0;
    elector_driver *d = el->h.d;
    pthread_mutex_lock(&d->mu);
    int64_t t = el->token;
    pthread_mutex_unlock(&d->mu);
    return t;
}
