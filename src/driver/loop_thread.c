/* SPDX-License-Identifier: MIT */
/* The driver (own_thread, docs/DESIGN.md "One client, two ways to drive it"): the loop
 * on a thread of its own, callbacks on another, calls from any thread.
 *
 * One mutex (d->mu) guards everything shared: the job queue, the callback
 * queue, the handles' published state. It is never held while core code or
 * user code runs. The loop thread alone touches core objects; user threads
 * queue jobs and wait on d->cv; core callbacks (on the loop thread) copy their
 * events into the callback queue, which the callback thread empties. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "driver_private.h"

/* ---------------------------------------------------------------- jobs */

/* Enters an API call: 0, or why not. mu taken on success. */
int elector__drv_enter(elector__drv *d)
{
    if (!d) return ELECTOR_EINVAL;
    if (forked(d)) return ELECTOR_EFORKED;
    pthread_mutex_lock(&d->mu);
    if (d->stop) {
        pthread_mutex_unlock(&d->mu);
        return ELECTOR_ECLOSED;
    }
    d->calls++;
    return 0;
}

void elector__drv_leave(elector__drv *d) /* mu held; released */
{
    if (--d->calls == 0) pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

/* The same for a call on handle h, held for the call: a shutdown under way
 * frees the handle only after the call has left. */
int elector__drv_enter_h(elector__drv *d, struct dh *h)
{
    int rc = elector__drv_enter(d);
    if (rc) return rc;
    if (h->closed) { /* freed from its own callback, which still runs */
        elector__drv_leave(d);
        return ELECTOR_ECLOSED;
    }
    h->refs++;
    return 0;
}

void elector__drv_leave_h(elector__drv *d, struct dh *h) /* mu held; released */
{
    elector__drv_h_unref(h);
    elector__drv_leave(d);
}

static void queue_job(elector__drv *d, struct job *j) /* mu held */
{
    j->next = NULL;
    *d->jobs_tail = j;
    d->jobs_tail = &j->next;
}

/* Runs j on the loop thread and waits for it (mu held, kept). Inline when
 * already there. */
int elector__drv_run_job(elector__drv *d, struct job *j)
{
    j->done = false;
    j->rc = 0;
    if (on_loop(d)) {
        pthread_mutex_unlock(&d->mu);
        j->fn(d, j);
        pthread_mutex_lock(&d->mu);
        return j->rc;
    }
    queue_job(d, j);
    elector_etcd_wakeup(d->etcd);
    while (!j->done)
        pthread_cond_wait(&d->cv, &d->mu);
    return j->rc;
}

int elector__drv_call(elector__drv *d, struct job *j)
{
    int rc = elector__drv_enter(d);
    if (rc) return rc;
    rc = elector__drv_run_job(d, j);
    elector__drv_leave(d);
    return rc;
}

int elector__drv_wait(elector__drv *d, bool (*done)(const void *arg), const void *arg,
                      int64_t end_ms)
{
    while (!done(arg) && !d->stop && !past(end_ms))
        cv_wait(d, &d->cv, end_ms);
    return done(arg) ? 0 : d->stop ? ELECTOR_ECLOSED : ELECTOR_ETIMEDOUT;
}

int elector__drv_call_h(elector__drv *d, struct dh *h, struct job *j)
{
    int rc = elector__drv_enter_h(d, h);
    if (rc) return rc;
    rc = elector__drv_run_job(d, j);
    elector__drv_leave_h(d, h);
    return rc;
}

/* A free or close of h made from h's own callback (on_cb, cb_target h): the
 * core object must live until that callback returns, for the calls it makes
 * next (refused: h is closed). Queues fn(d, job with a) for the loop thread,
 * run once the callback has returned, and the user's reference of h dropped
 * after it (at the client's stop: only dropped). mu held. False when out of
 * memory (nothing queued). */
static bool defer_close(elector__drv *d, struct dh *h,
                        void (*fn)(elector__drv *, struct job *), void *a)
{
    struct job *j = calloc(1, sizeof(*j));
    if (!j) return false;
    j->fn = fn;
    j->a = a;
    j->wait_h = h;
    queue_job(d, j);
    elector_etcd_wakeup(d->etcd);
    return true;
}

int elector__drv_end_h(elector__drv *d, struct dh *h, struct job *j)
{
    if (forked(d)) return ELECTOR_EFORKED;
    pthread_mutex_lock(&d->mu);
    bool mine = !h->closed; /* else the client's end took it */
    h->closed = true;
    if (mine && !d->stop && on_cb(d) && d->cb_target == h &&
        defer_close(d, h, j->fn, j->a)) {
        pthread_mutex_unlock(&d->mu);
        return 0;
    }
    elector__drv_quiesce(d, h);
    int rc = ELECTOR_ECLOSED;
    if (!d->stop) {
        d->calls++;
        rc = elector__drv_run_job(d, j);
        d->calls--;
        if (d->calls == 0) pthread_cond_broadcast(&d->cv);
    }
    if (mine) elector__drv_h_unref(h);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

/* A deferred close (loop thread, mu not held): again next round while the
 * callback of its handle runs (the loop does not wait for user code). */
static void run_deferred(elector__drv *d, struct job *j, bool closing)
{
    pthread_mutex_lock(&d->mu);
    if (!closing && d->cb_busy && d->cb_target == j->wait_h) {
        queue_job(d, j);
        pthread_mutex_unlock(&d->mu);
        return;
    }
    pthread_mutex_unlock(&d->mu);
    if (!closing) j->fn(d, j); /* else the stop frees the core object */
    pthread_mutex_lock(&d->mu);
    elector__drv_h_unref(j->wait_h); /* the user's */
    pthread_mutex_unlock(&d->mu);
    free(j);
}

/* The jobs queued so far (those queued meanwhile: next round). */
static void run_jobs(elector__drv *d, bool closing)
{
    pthread_mutex_lock(&d->mu);
    struct job *list = d->jobs;
    d->jobs = NULL;
    d->jobs_tail = &d->jobs;
    while (list) {
        struct job *j = list;
        list = j->next;
        pthread_mutex_unlock(&d->mu);
        if (j->wait_h) {
            run_deferred(d, j, closing);
            pthread_mutex_lock(&d->mu);
            continue;
        }
        if (closing)
            j->rc = ELECTOR_ECLOSED;
        else
            j->fn(d, j);
        pthread_mutex_lock(&d->mu);
        j->done = true;
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
}

/* ---------------------------------------------------------------- publishing */

/* After each round of the loop: the core's state, for other threads. */
static void publish(elector__drv *d)
{
    pthread_mutex_lock(&d->mu);
    for (struct dh *h = d->handles.next; h != &d->handles; h = h->next) {
        if (h->kind == H_SESSION) {
            struct drv_session *s = (void *)h;
            if (!s->core) continue;
            s->lease = elector__session_lease(s->core);
            s->ttl = elector__session_ttl(s->core);
            s->deadline_ns = elector__session_deadline_ns(s->core);
            s->helper = elector__session_helper(s->core);
            if (s->phase == 0 && s->lease && s->deadline_ns) s->phase = 1;
        } else if (h->kind == H_ELECTION) {
            struct drv_election *el = (void *)h;
            if (!el->core) continue;
            el->leader = elector__is_leader(el->core);
            el->token = elector__election_token(el->core);
            elector_session *cs = elector__election_session(el->core);
            el->deadline_ns = cs ? elector__session_deadline_ns(cs) : 0;
        }
    }
    /* A callback that blocks: reported once, from here. */
    bool stall = false;
    int64_t ran = 0;
    if (d->cb_busy && !d->stall_reported) {
        ran = (elector_now_ns() - d->cb_start_ns) / 1000000;
        if (ran > d->stall_ms) {
            d->stall_reported = stall = true;
            d->stalls++;
        }
    }
    d->err = elector__etcd_err(d->etcd);
    snprintf(d->errstr, sizeof(d->errstr), "%s", elector__etcd_errstr(d->etcd));
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    if (!stall) return;
    if (d->on_stall)
        d->on_stall(d->etcd, ran, d->stall_ud);
    else
        fprintf(stderr,
                "elector: a callback has run for %lld ms (stall_ms %lld); "
                "keepalives go on, later callbacks wait\n",
                (long long)ran, (long long)d->stall_ms);
}

/* ---------------------------------------------------------------- the loop */

static void shutdown_all(elector__drv *d)
{
    /* Elections (resign: the deletes are sent), observers, then sessions
     * (revoke, waited for), then the client. */
    for (int pass = 0; pass < 3; pass++) {
        pthread_mutex_lock(&d->mu);
        struct dh *h = d->handles.next;
        while (h != &d->handles) {
            struct dh *next = h->next;
            int want = pass == 0 ? H_ELECTION : pass == 1 ? H_OBSERVER : H_SESSION;
            if (h->kind == want) {
                pthread_mutex_unlock(&d->mu);
                if (want == H_ELECTION) {
                    struct drv_election *el = (void *)h;
                    elector__election_free(el->core);
                    el->core = NULL;
                } else if (want == H_OBSERVER) {
                    struct drv_observer *o = (void *)h;
                    elector__observer_free(o->core);
                    o->core = NULL;
                } else {
                    struct drv_session *s = (void *)h;
                    elector_session *cs = s->core;
                    s->core = NULL;
                    elector__session_close_sync(cs, 1000);
                }
                pthread_mutex_lock(&d->mu);
                /* A handle the user still holds: the driver takes its
                 * reference (the handle is dead with the driver). */
                if (!h->closed) {
                    h->closed = true;
                    h->refs--;
                }
                elector__drv_h_detach(h);
                /* The list may have changed meanwhile: start over. */
                next = d->handles.next;
            }
            h = next;
        }
        pthread_mutex_unlock(&d->mu);
    }
    /* The revokes of sessions the user closed just before: answered (or 1 s)
     * before the client goes, which would cancel them (the lease would live
     * on for its TTL). */
    int64_t end = ms_now() + 1000;
    while (d->revokes > 0 && ms_now() < end)
        elector__etcd_run_once(d->etcd, 50);
    elector__etcd_free(d->etcd);
}

static void *loop_main(void *arg)
{
    elector__drv *d = arg;
    for (;;) {
        run_jobs(d, false);
        pthread_mutex_lock(&d->mu);
        bool stop = d->stop;
        bool cb = d->cb_busy;
        pthread_mutex_unlock(&d->mu);
        if (stop) break;
        int64_t t = elector__etcd_timeout(d->etcd);
        /* Rounds at least every 100 ms while a callback runs (to see a stall),
         * else every second (publish a deadline that moved). */
        int64_t cap = cb ? 100 : 1000;
        if (t < 0 || t > cap) t = cap;
        struct pollfd p = {.fd = elector__etcd_fd(d->etcd), .events = POLLIN};
        poll(&p, 1, (int)t);
        elector__etcd_process(d->etcd);
        publish(d);
    }
    run_jobs(d, true);
    /* Freed from a callback: the handles (the core's objects) live until it
     * returns, and calls from it are refused meanwhile (stop is set). */
    pthread_mutex_lock(&d->mu);
    while (d->cb_frees && d->cb_busy)
        pthread_cond_wait(&d->icv, &d->mu);
    pthread_mutex_unlock(&d->mu);
    shutdown_all(d);
    pthread_mutex_lock(&d->mu);
    d->loop_over = true;
    pthread_cond_broadcast(&d->icv);
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    run_jobs(d, true);
    return NULL;
}

/* ---------------------------------------------------------------- start, stop */

int elector__drv_start(elector_etcd *e, const elector_etcd_config *cfg)
{
    elector__drv *d = calloc(1, sizeof(*d));
    if (!d) return ELECTOR_ENOMEM;
    d->etcd = e;
    d->stall_ms = cfg->stall_ms > 0 ? cfg->stall_ms : 1000;
    d->on_stall = cfg->on_stall;
    d->stall_ud = cfg->stall_ud;
    d->pid = getpid();
    d->jobs_tail = &d->jobs;
    d->items_tail = &d->items;
    d->handles.next = d->handles.prev = &d->handles;
    pthread_mutex_init(&d->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&d->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&d->icv, NULL);
    /* The owner is set before the threads start (they find it there), and
     * the loop thread before any job can be queued: no job before return. */
    elector__etcd_set_owner(e, d);
    if (pthread_create(&d->cb_th, NULL, elector__drv_cb_main, d)) goto fail;
    if (pthread_create(&d->loop_th, NULL, loop_main, d)) {
        pthread_mutex_lock(&d->mu);
        d->loop_over = true;
        pthread_cond_broadcast(&d->icv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->cb_th, NULL);
        goto fail;
    }
    return 0;
fail:
    elector__etcd_set_owner(e, NULL);
    pthread_cond_destroy(&d->cv);
    pthread_cond_destroy(&d->icv);
    pthread_mutex_destroy(&d->mu);
    free(d);
    return ELECTOR_EUNAVAILABLE;
}

void elector__drv_stop(elector__drv *d)
{
    if (forked(d)) return;
    pthread_mutex_lock(&d->mu);
    if (d->freeing) {
        pthread_mutex_unlock(&d->mu);
        return;
    }
    d->freeing = d->stop = true;
    bool from_cb = on_cb(d);
    if (from_cb) d->cb_frees = true;
    pthread_cond_broadcast(&d->cv);
    /* Under mu: the loop thread frees the client only after it saw stop. */
    elector_etcd_wakeup(d->etcd);
    pthread_mutex_unlock(&d->mu);
    /* From on_stall or a job: the loop stops after this round; nobody joins
     * it (not supported beyond stopping). From a callback: the loop frees
     * everything once it returned, and the callback thread, the last to know
     * the driver, joins the loop thread and frees it (callback_thread.c). */
    if (on_loop(d) || from_cb) return;
    pthread_join(d->loop_th, NULL);
    pthread_mutex_lock(&d->mu);
    while (d->calls > 0)
        pthread_cond_wait(&d->cv, &d->mu);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->cb_th, NULL);
    pthread_cond_destroy(&d->cv);
    pthread_cond_destroy(&d->icv);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

static void exec_job(elector__drv *d, struct job *j)
{
    j->efn(d->etcd, j->a);
}

int elector_etcd_exec(elector_etcd *e, void (*fn)(elector_etcd *etcd, void *arg),
                      void *arg)
{
    if (!e || !fn) return ELECTOR_EINVAL;
    elector__drv *d = elector__drv_of(e);
    if (!d) {
        fn(e, arg);
        return 0;
    }
    int rc = elector__drv_enter(d);
    if (rc) return rc;
    struct job j = {.fn = exec_job, .efn = fn, .a = arg};
    rc = elector__drv_run_job(d, &j);
    elector__drv_leave(d);
    return rc;
}

uint64_t elector_etcd_stalls(const elector_etcd *e)
{
    elector__drv *d = elector__drv_of(e);
    if (!d || forked(d)) return 0;
    pthread_mutex_lock(&d->mu);
    uint64_t n = d->stalls;
    pthread_mutex_unlock(&d->mu);
    return n;
}

bool elector_etcd_in_callback(const elector_etcd *e)
{
    elector__drv *d = elector__drv_of(e);
    return d && !forked(d) && on_cb(d);
}

char *elector__drv_err_detail(elector__drv *d, int err)
{
    if (err >= 0 || err == ELECTOR_ENOTLEADER || elector__etcd_err(d->etcd) != err)
        return NULL;
    const char *s = elector__etcd_errstr(d->etcd);
    return s && *s ? strdup(s) : NULL;
}
