/* SPDX-License-Identifier: MIT */
/* Elections (elector/election.h): driven by the caller's loop, the core's
 * functions (src/election/); with own_thread, each call is a job on the loop
 * thread (loop_thread.c), the core's events go to the callback thread
 * (callback_thread.c), and is_leader and the token come from what the loop thread
 * published. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "driver_private.h"

/* The core's events, on the loop thread. */
static void election_relay(elector_election *ce, const elector_event *ev, void *ud)
{
    struct drv_election *el = ud;
    elector__drv *d = el->h.d;
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
    el->leader = elector__is_leader(ce);
    el->token = elector__election_token(ce);
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    elector__drv_queue_event(d, &el->h, I_EVENT, ev);
}

static void election_new_job(elector__drv *d, struct job *j)
{
    struct drv_election *el = j->a;
    struct drv_session *s = j->b;
    if (!s->core) {
        j->rc = ELECTOR_ESESSION;
        return;
    }
    el->core = elector__election_new(s->core, j->p1, election_relay, el);
    if (!el->core) {
        j->rc = ELECTOR_ENOMEM;
        return;
    }
    elector__election_set_owner(el->core, el);
    elector__drv_h_attach_new(d, &el->h, el->core, j);
}

elector_election *elector_election_new(elector_session *cs, const char *name,
                                       elector_election_cb cb, void *ud)
{
    struct drv_session *s = drv_session_of(cs);
    if (!s) return elector__election_new(cs, name, cb, ud);
    if (!name || !*name) return NULL;
    struct drv_election *el = calloc(1, sizeof(*el));
    if (!el) return NULL;
    el->h = (struct dh){.d = s->h.d, .kind = H_ELECTION, .refs = 1};
    el->cb = cb;
    el->ud = ud;
    struct job j = {.fn = election_new_job, .a = el, .b = s, .p1 = name};
    if (elector__drv_call_h(s->h.d, &s->h, &j)) {
        free(el);
        return NULL;
    }
    return j.out;
}

static void election_free_job(elector__drv *d, struct job *j)
{
    struct drv_election *el = j->a;
    elector_election *ce = el->core;
    el->core = NULL;
    if (ce) elector__election_free(ce);
    pthread_mutex_lock(&d->mu);
    el->leader = false;
    elector__drv_h_detach(&el->h);
    pthread_mutex_unlock(&d->mu);
}

void elector_election_free(elector_election *ce)
{
    struct drv_election *el = drv_election_of(ce);
    if (!el) {
        elector__election_free(ce);
        return;
    }
    struct job j = {.fn = election_free_job, .a = el};
    elector__drv_end_h(el->h.d, &el->h, &j);
}

/* ---------------------------------------------------------------- operations */

static void campaign_job(elector__drv *d, struct job *j)
{
    struct drv_election *el = j->a;
    if (!el->core) {
        j->rc = ELECTOR_ECLOSED;
        return;
    }
    pthread_mutex_lock(&d->mu);
    el->outcome = 0;
    pthread_mutex_unlock(&d->mu);
    j->rc = elector__campaign(el->core, j->p1, j->n1);
}

static void proclaim_job(elector__drv *d, struct job *j)
{
    (void)d;
    struct drv_election *el = j->a;
    j->rc = el->core ? elector__proclaim(el->core, j->p1, j->n1) : ELECTOR_ECLOSED;
}

static void resign_job(elector__drv *d, struct job *j)
{
    struct drv_election *el = j->a;
    if (!el->core) {
        j->rc = ELECTOR_ECLOSED;
        return;
    }
    pthread_mutex_lock(&d->mu);
    el->resign_done = false;
    pthread_mutex_unlock(&d->mu);
    j->rc = elector__resign(el->core);
    pthread_mutex_lock(&d->mu);
    el->leader = elector__is_leader(el->core);
    pthread_mutex_unlock(&d->mu);
}

static int el_job(struct drv_election *el, void (*fn)(elector__drv *, struct job *),
                  const void *p, size_t n)
{
    struct job j = {.fn = fn, .a = el, .p1 = p, .n1 = n};
    return elector__drv_call_h(el->h.d, &el->h, &j);
}

int elector_campaign(elector_election *ce, const void *value, size_t len)
{
    if (!ce) return ELECTOR_EINVAL;
    struct drv_election *el = drv_election_of(ce);
    if (!el) return elector__campaign(ce, value, len);
    return el_job(el, campaign_job, value, len);
}

int elector_proclaim(elector_election *ce, const void *value, size_t len)
{
    struct drv_election *el = drv_election_of(ce);
    if (!el) return elector__proclaim(ce, value, len);
    return el_job(el, proclaim_job, value, len);
}

int elector_resign(elector_election *ce)
{
    if (!ce) return ELECTOR_EINVAL;
    struct drv_election *el = drv_election_of(ce);
    if (!el) return elector__resign(ce);
    return el_job(el, resign_job, NULL, 0);
}

/* The campaign has its outcome (published by the loop thread). */
static bool campaign_over(const void *arg)
{
    const struct drv_election *el = arg;
    return el->outcome != 0;
}

static bool resign_over(const void *arg)
{
    const struct drv_election *el = arg;
    return el->resign_done;
}

int elector_campaign_sync(elector_election *ce, const void *value, size_t len,
                          int64_t timeout_ms)
{
    if (!ce) return ELECTOR_EINVAL;
    struct drv_election *el = drv_election_of(ce);
    if (!el) return elector__campaign_sync(ce, value, len, timeout_ms);
    elector__drv *d = el->h.d;
    int rc = elector__drv_enter_h(d, &el->h);
    if (rc) return rc;
    int64_t end = end_of(timeout_ms);
    struct job j = {.fn = campaign_job, .a = el, .p1 = value, .n1 = len};
    rc = elector__drv_run_job(d, &j);
    if (!rc) rc = elector__drv_wait(d, campaign_over, el, end);
    if (!rc) rc = el->outcome == 1 ? 0 : el->outcome;
    elector__drv_leave_h(d, &el->h);
    return rc;
}

int elector_resign_sync(elector_election *ce, int64_t timeout_ms)
{
    if (!ce) return ELECTOR_EINVAL;
    struct drv_election *el = drv_election_of(ce);
    if (!el) return elector__resign_sync(ce, timeout_ms);
    elector__drv *d = el->h.d;
    int rc = elector__drv_enter_h(d, &el->h);
    if (rc) return rc;
    int64_t end = end_of(timeout_ms);
    struct job j = {.fn = resign_job, .a = el};
    rc = elector__drv_run_job(d, &j);
    if (!rc) rc = elector__drv_wait(d, resign_over, el, end);
    elector__drv_leave_h(d, &el->h);
    return rc;
}

/* ---------------------------------------------------------------- reads */

bool elector_is_leader(const elector_election *ce)
{
    struct drv_election *el = drv_election_of(ce);
    if (!el) return elector__is_leader(ce);
    elector__drv *d = el->h.d;
    if (forked(d)) return false;
    pthread_mutex_lock(&d->mu);
    bool yes = el->leader && !el->h.closed && elector_now_ns() < el->deadline_ns;
    pthread_mutex_unlock(&d->mu);
    return yes;
}

int64_t elector_election_token(const elector_election *ce)
{
    if (!ce) return 0;
    struct drv_election *el = drv_election_of(ce);
    if (!el) return elector__election_token(ce);
    elector__drv *d = el->h.d;
    if (forked(d)) return 0;
    pthread_mutex_lock(&d->mu);
    int64_t t = el->token;
    pthread_mutex_unlock(&d->mu);
    return t;
}

/* What the loop thread reads for another thread: the key (copied into the
 * record), the session, the statistics. */
static void read_job(elector__drv *d, struct job *j)
{
    struct drv_election *el = j->a;
    if (!el->core) {
        j->rc = ELECTOR_ECLOSED;
        return;
    }
    if (j->b) elector__election_get_stats(el->core, j->b);
    j->p2 = elector__election_session(el->core);
    size_t n = 0;
    const uint8_t *key = elector__election_key(el->core, &n);
    uint8_t *copy = key ? malloc(n + 1) : NULL;
    if (copy) {
        memcpy(copy, key, n);
        copy[n] = 0;
    }
    pthread_mutex_lock(&d->mu);
    free(el->key);
    el->key = copy;
    el->key_len = copy ? n : 0;
    pthread_mutex_unlock(&d->mu);
}

static int read_el(struct drv_election *el, struct job *j)
{
    j->fn = read_job;
    j->a = el;
    return elector__drv_call_h(el->h.d, &el->h, j);
}

/* With own_thread: a copy, valid until the next call of this function on
 * the same election. */
const uint8_t *elector_election_key(const elector_election *ce, size_t *key_len)
{
    if (!ce) return NULL;
    struct drv_election *el = drv_election_of(ce);
    if (!el) return elector__election_key(ce, key_len);
    struct job j = {0};
    if (key_len) *key_len = 0;
    if (read_el(el, &j) || !el->key) return NULL;
    if (key_len) *key_len = el->key_len;
    return el->key;
}

elector_session *elector_election_session(const elector_election *ce)
{
    if (!ce) return NULL;
    struct drv_election *el = drv_election_of(ce);
    if (!el) return elector__election_session(ce);
    struct job j = {0};
    if (read_el(el, &j)) return NULL;
    return (elector_session *)j.p2;
}

void elector_election_get_stats(const elector_election *ce, elector_election_stats *out)
{
    if (!ce) return;
    struct drv_election *el = drv_election_of(ce);
    if (!el) {
        elector__election_get_stats(ce, out);
        return;
    }
    memset(out, 0, sizeof(*out));
    struct job j = {.b = out};
    read_el(el, &j);
}

/* ---------------------------------------------------------------- the log */

static void log_relay(elector_election *ce, const elector_event *ev, void *ud)
{
    (void)ce;
    struct drv_election *el = ud;
    elector__drv_queue_event(el->h.d, &el->h, I_LOG, ev);
}

static void set_log_job(elector__drv *d, struct job *j)
{
    (void)d;
    struct drv_election *el = j->a;
    if (el->core) elector__election_set_log(el->core, j->b ? log_relay : NULL, el);
}

void elector_election_set_log(elector_election *ce, elector_election_cb log, void *ud)
{
    if (!ce) return;
    struct drv_election *el = drv_election_of(ce);
    if (!el) {
        elector__election_set_log(ce, log, ud);
        return;
    }
    elector__drv *d = el->h.d;
    if (elector__drv_enter_h(d, &el->h)) return;
    el->log = log;
    el->log_ud = ud;
    struct job j = {.fn = set_log_job, .a = el, .b = log ? el : NULL};
    elector__drv_run_job(d, &j);
    elector__drv_leave_h(d, &el->h);
}
