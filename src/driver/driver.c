/* SPDX-License-Identifier: MIT */
/* The driver (include/elector/driver.h, docs/DESIGN.md "The driver"): the loop
 * on a thread of its own, callbacks on another, calls from any thread.
 *
 * One mutex (d->mu) guards everything shared: the job queue, the callback
 * queue, the handles' published state. It is never held while core code or
 * user code runs. The loop thread alone touches core objects; user threads
 * queue jobs and wait on d->cv; core callbacks (on the loop thread) copy their
 * events into the callback queue, which the callback thread empties. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "elector/driver.h"

enum { H_SESSION, H_ELECTION, H_OBSERVER };

/* What every handle starts with. refs: the user's (until free), the core
 * object's (until the loop thread freed it), one per queued callback. */
struct dh {
    struct dh *next, *prev; /* d->handles, while the core object lives */
    elector_driver *d;
    int kind, refs;
    bool closed; /* the user let go: no more callbacks */
    bool attached;
};

struct elector_driver_session {
    struct dh h;
    elector_session *core;
    elector_session_config cfg;
    elector_driver_session_cb cb;
    void *ud;
    int phase; /* 0 granting, 1 alive, 2 over */
    int err;
    int64_t lease, deadline_ns;
};

struct elector_driver_election {
    struct dh h;
    elector_driver_session *s;
    elector_election *core;
    char *name;
    elector_driver_election_cb cb;
    void *ud;
    bool leader;
    int64_t token, deadline_ns;
    unsigned campaign_gen, resign_gen; /* bumped by each campaign / resign */
    int outcome;                       /* campaign: 1 elected, < 0 failed */
    bool resign_done;
};

struct elector_driver_observer {
    struct dh h;
    elector_observer *core;
    char *name;
    elector_driver_observe_cb cb;
    void *ud;
};

struct job {
    struct job *next;
    void (*fn)(elector_driver *d, struct job *j);
    bool done;
    int rc;
    void *a, *b;
    const void *p1, *p2;
    size_t n1, n2;
    void (*efn)(elector_etcd *, void *);
};

enum { I_EVENT, I_GUARDED };
struct item {
    struct item *next;
    struct dh *h;
    int kind;
    elector_event ev; /* pointers into the same allocation */
    elector_driver_guarded_cb gcb;
    void *gud;
    int err;
};

struct elector_driver {
    pid_t pid;
    pthread_mutex_t mu;
    pthread_cond_t cv;  /* jobs done, states changed */
    pthread_cond_t icv; /* callback queue, callback ended */
    pthread_t loop_th, cb_th;
    elector_etcd *etcd;
    elector_driver_config cfg;
    struct job *jobs, **jobs_tail;
    struct item *items, **items_tail;
    struct dh handles; /* list head */
    bool stop, loop_over, freeing, cb_frees;
    int calls; /* API calls under way in user threads */
    /* The callback under way: its handle, since when (deadline clock). */
    struct dh *cb_target;
    bool cb_busy, stall_reported;
    int64_t cb_start_ns;
    uint64_t stalls;
};

static bool forked(const elector_driver *d)
{
    return getpid() != d->pid;
}

static bool on_loop(const elector_driver *d)
{
    return pthread_equal(pthread_self(), d->loop_th);
}

static bool on_cb(const elector_driver *d)
{
    return pthread_equal(pthread_self(), d->cb_th);
}

static int64_t ms_now(void)
{
    return elector_now_ns() / 1000000;
}

/* Waits on cv until end_ms (< 0: no limit). mu held. */
static int cv_wait(elector_driver *d, pthread_cond_t *cv, int64_t end_ms)
{
    if (end_ms < 0) return pthread_cond_wait(cv, &d->mu);
    /* The condvars run on CLOCK_MONOTONIC; the end is on the deadline clock: a
     * wait of the rest, woken often enough to recheck. */
    int64_t left = end_ms - ms_now();
    if (left <= 0) return ETIMEDOUT;
    if (left > 200) left = 200;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += left / 1000;
    ts.tv_nsec += (left % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(cv, &d->mu, &ts);
    return 0;
}

static int64_t end_of(int64_t timeout_ms)
{
    return timeout_ms < 0 ? -1 : ms_now() + timeout_ms;
}

static bool past(int64_t end_ms)
{
    return end_ms >= 0 && ms_now() >= end_ms;
}

/* ---------------------------------------------------------------- handles */

static void h_unref(struct dh *h) /* mu held */
{
    if (--h->refs > 0) return;
    if (h->kind == H_ELECTION)
        free(((elector_driver_election *)h)->name);
    else if (h->kind == H_OBSERVER)
        free(((elector_driver_observer *)h)->name);
    free(h);
}

static void h_attach(elector_driver *d, struct dh *h) /* mu held */
{
    h->attached = true;
    h->refs++;
    h->next = d->handles.next;
    h->prev = &d->handles;
    d->handles.next->prev = h;
    d->handles.next = h;
}

static void h_detach(struct dh *h) /* mu held */
{
    if (!h->attached) return;
    h->attached = false;
    h->prev->next = h->next;
    h->next->prev = h->prev;
    h_unref(h);
}

/* ---------------------------------------------------------------- jobs */

/* Enters an API call: 0, or why not. mu taken on success. */
static int enter(elector_driver *d)
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

static void leave(elector_driver *d) /* mu held; released */
{
    if (--d->calls == 0) pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

/* The same for a call on handle h, held for the call: a shutdown under way
 * frees the handle only after the call has left. */
static int enter_h(elector_driver *d, struct dh *h)
{
    int rc = enter(d);
    if (!rc) h->refs++;
    return rc;
}

static void leave_h(elector_driver *d, struct dh *h) /* mu held; released */
{
    h_unref(h);
    leave(d);
}

/* Runs j on the loop thread and waits for it (mu held, kept). Inline when
 * already there. */
static int run_job(elector_driver *d, struct job *j)
{
    j->done = false;
    j->rc = 0;
    if (on_loop(d)) {
        pthread_mutex_unlock(&d->mu);
        j->fn(d, j);
        pthread_mutex_lock(&d->mu);
        return j->rc;
    }
    j->next = NULL;
    *d->jobs_tail = j;
    d->jobs_tail = &j->next;
    elector_etcd_wakeup(d->etcd);
    while (!j->done)
        pthread_cond_wait(&d->cv, &d->mu);
    return j->rc;
}

static void run_jobs(elector_driver *d, bool closing)
{
    pthread_mutex_lock(&d->mu);
    while (d->jobs) {
        struct job *j = d->jobs;
        d->jobs = j->next;
        if (!d->jobs) d->jobs_tail = &d->jobs;
        pthread_mutex_unlock(&d->mu);
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

/* ---------------------------------------------------------------- callbacks */

static char *put_bytes(char **p, const void *src, size_t n)
{
    char *dst = *p;
    if (n) memcpy(dst, src, n);
    dst[n] = 0;
    *p += n + 1;
    return dst;
}

/* Queues a copy of ev for h's callback. Loop thread. */
static void queue_event(elector_driver *d, struct dh *h, const elector_event *ev)
{
    const char *detail = ev->detail ? ev->detail : "", *name = ev->name ? ev->name : "";
    size_t dl = strlen(detail), nl = strlen(name);
    struct item *it = malloc(sizeof(*it) + dl + nl + ev->key_len + ev->value_len + 4);
    if (!it) {
        fprintf(stderr, "elector driver: out of memory, a %s event is lost\n",
                elector_event_name(ev->type));
        return;
    }
    memset(it, 0, sizeof(*it));
    it->kind = I_EVENT;
    it->ev = *ev;
    char *p = (char *)(it + 1);
    it->ev.detail = put_bytes(&p, detail, dl);
    it->ev.name = put_bytes(&p, name, nl);
    it->ev.key = (const uint8_t *)put_bytes(&p, ev->key, ev->key ? ev->key_len : 0);
    it->ev.value =
        (const uint8_t *)put_bytes(&p, ev->value, ev->value ? ev->value_len : 0);
    if (!ev->key) it->ev.key_len = 0;
    if (!ev->value) it->ev.value_len = 0;
    it->h = h;
    pthread_mutex_lock(&d->mu);
    h->refs++;
    *d->items_tail = it;
    d->items_tail = &it->next;
    pthread_cond_broadcast(&d->icv);
    pthread_mutex_unlock(&d->mu);
}

static void *cb_main(void *arg)
{
    elector_driver *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        struct item *it = d->items;
        if (!it) {
            if (d->loop_over) break;
            pthread_cond_wait(&d->icv, &d->mu);
            continue;
        }
        d->items = it->next;
        if (!d->items) d->items_tail = &d->items;
        struct dh *h = it->h;
        bool call = it->kind == I_GUARDED || (!h->closed && !d->loop_over);
        if (call) {
            d->cb_target = h;
            d->cb_busy = true;
            d->stall_reported = false;
            d->cb_start_ns = elector_now_ns();
            pthread_mutex_unlock(&d->mu);
            if (it->kind == I_GUARDED) {
                it->gcb((elector_driver_election *)h, it->err, it->gud);
            } else if (h->kind == H_SESSION) {
                elector_driver_session *s = (void *)h;
                if (s->cb) s->cb(s, &it->ev, s->ud);
            } else if (h->kind == H_ELECTION) {
                elector_driver_election *el = (void *)h;
                if (el->cb) el->cb(el, &it->ev, el->ud);
            } else {
                elector_driver_observer *o = (void *)h;
                if (o->cb) o->cb(o, &it->ev, o->ud);
            }
            pthread_mutex_lock(&d->mu);
            d->cb_target = NULL;
            d->cb_busy = false;
            pthread_cond_broadcast(&d->icv);
        }
        h_unref(h);
        free(it);
    }
    /* Drained: nothing more will be queued (the loop is over). */
    while (d->items) {
        struct item *it = d->items;
        d->items = it->next;
        h_unref(it->h);
        free(it);
    }
    d->items_tail = &d->items;
    bool frees = d->cb_frees;
    pthread_mutex_unlock(&d->mu);
    if (frees) {
        /* elector_driver_free() was called from a callback: this thread is
         * the last one to know the driver. */
        pthread_detach(pthread_self());
        pthread_cond_destroy(&d->cv);
        pthread_cond_destroy(&d->icv);
        pthread_mutex_destroy(&d->mu);
        free(d);
    }
    return NULL;
}

/* Waits until no callback of h runs (unless we are that callback). mu held. */
static void quiesce(elector_driver *d, struct dh *h)
{
    if (on_cb(d)) return;
    while (d->cb_busy && d->cb_target == h)
        pthread_cond_wait(&d->icv, &d->mu);
}

/* ---------------------------------------------------------------- publishing */

/* After each round of the loop: the core's state, for other threads. */
static void publish(elector_driver *d)
{
    pthread_mutex_lock(&d->mu);
    for (struct dh *h = d->handles.next; h != &d->handles; h = h->next) {
        if (h->kind == H_SESSION) {
            elector_driver_session *s = (void *)h;
            if (!s->core) continue;
            s->lease = elector_session_lease(s->core);
            s->deadline_ns = elector_session_deadline_ns(s->core);
            if (s->phase == 0 && s->lease && s->deadline_ns) s->phase = 1;
        } else if (h->kind == H_ELECTION) {
            elector_driver_election *el = (void *)h;
            if (!el->core) continue;
            el->leader = elector_is_leader(el->core);
            el->token = elector_election_token(el->core);
            elector_session *cs = elector_election_session(el->core);
            el->deadline_ns = cs ? elector_session_deadline_ns(cs) : 0;
        }
    }
    /* A callback that blocks: reported once, from here. */
    bool stall = false;
    int64_t ran = 0;
    if (d->cb_busy && !d->stall_reported) {
        ran = (elector_now_ns() - d->cb_start_ns) / 1000000;
        if (ran > d->cfg.stall_ms) {
            d->stall_reported = stall = true;
            d->stalls++;
        }
    }
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    if (stall) {
        if (d->cfg.on_stall)
            d->cfg.on_stall(d, ran, d->cfg.ud);
        else
            fprintf(stderr,
                    "elector driver: a callback has run for %lld ms (stall_ms %lld); "
                    "keepalives go on, later callbacks wait\n",
                    (long long)ran, (long long)d->cfg.stall_ms);
    }
}

/* ---------------------------------------------------------------- the loop */

static void shutdown_all(elector_driver *d)
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
                    elector_driver_election *el = (void *)h;
                    elector_election_free(el->core);
                    el->core = NULL;
                } else if (want == H_OBSERVER) {
                    elector_driver_observer *o = (void *)h;
                    elector_observer_free(o->core);
                    o->core = NULL;
                } else {
                    elector_driver_session *s = (void *)h;
                    elector_session *cs = s->core;
                    s->core = NULL;
                    elector_session_close_sync(cs, 1000);
                }
                pthread_mutex_lock(&d->mu);
                /* A handle the user still holds: the driver takes its
                 * reference (the handle is dead with the driver). */
                if (!h->closed) {
                    h->closed = true;
                    h->refs--;
                }
                h_detach(h);
                /* The list may have changed meanwhile: start over. */
                next = d->handles.next;
            }
            h = next;
        }
        pthread_mutex_unlock(&d->mu);
    }
    elector_etcd_free(d->etcd);
}

static void *loop_main(void *arg)
{
    elector_driver *d = arg;
    for (;;) {
        run_jobs(d, false);
        pthread_mutex_lock(&d->mu);
        bool stop = d->stop;
        bool cb = d->cb_busy;
        pthread_mutex_unlock(&d->mu);
        if (stop) break;
        int64_t t = elector_etcd_timeout(d->etcd);
        /* Rounds at least every 100 ms while a callback runs (to see a stall),
         * else every second (publish a deadline that moved). */
        int64_t cap = cb ? 100 : 1000;
        if (t < 0 || t > cap) t = cap;
        struct pollfd p = {.fd = elector_etcd_fd(d->etcd), .events = POLLIN};
        poll(&p, 1, (int)t);
        elector_etcd_process(d->etcd);
        publish(d);
    }
    run_jobs(d, true);
    shutdown_all(d);
    pthread_mutex_lock(&d->mu);
    d->loop_over = true;
    pthread_cond_broadcast(&d->icv);
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    run_jobs(d, true);
    return NULL;
}

/* ---------------------------------------------------------------- driver */

void elector_driver_config_init(elector_driver_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->stall_ms = 1000;
}

int elector_driver_new(const elector_etcd_config *etcd_cfg,
                       const elector_driver_config *cfg, elector_driver **out)
{
    *out = NULL;
    elector_driver *d = calloc(1, sizeof(*d));
    if (!d) return ELECTOR_ENOMEM;
    if (cfg)
        d->cfg = *cfg;
    else
        elector_driver_config_init(&d->cfg);
    if (d->cfg.stall_ms <= 0) d->cfg.stall_ms = 1000;
    elector_etcd_config def;
    if (!etcd_cfg) {
        elector_etcd_config_init(&def);
        etcd_cfg = &def;
    }
    d->etcd = elector_etcd_new(etcd_cfg);
    if (!d->etcd) {
        free(d);
        return ELECTOR_ENOMEM;
    }
    int rc = elector_etcd_err(d->etcd);
    if (rc) {
        elector_etcd_free(d->etcd);
        free(d);
        return rc;
    }
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
    /* The loop thread is set before any job can be queued: no job before
     * return. */
    if (pthread_create(&d->cb_th, NULL, cb_main, d)) goto fail;
    if (pthread_create(&d->loop_th, NULL, loop_main, d)) {
        pthread_mutex_lock(&d->mu);
        d->loop_over = true;
        pthread_cond_broadcast(&d->icv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->cb_th, NULL);
        goto fail;
    }
    *out = d;
    return 0;
fail:
    pthread_cond_destroy(&d->cv);
    pthread_cond_destroy(&d->icv);
    pthread_mutex_destroy(&d->mu);
    elector_etcd_free(d->etcd);
    free(d);
    return ELECTOR_EUNAVAILABLE;
}

void elector_driver_free(elector_driver *d)
{
    if (!d || forked(d)) return;
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
    if (on_loop(d)) {
        /* From on_stall or a job: the loop stops after this round; nobody
         * joins it. Not supported beyond stopping. */
        return;
    }
    pthread_join(d->loop_th, NULL);
    pthread_mutex_lock(&d->mu);
    while (d->calls > 0)
        pthread_cond_wait(&d->cv, &d->mu);
    pthread_mutex_unlock(&d->mu);
    if (from_cb) return; /* the callback thread frees d when the callback returns */
    pthread_join(d->cb_th, NULL);
    pthread_cond_destroy(&d->cv);
    pthread_cond_destroy(&d->icv);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

static void exec_job(elector_driver *d, struct job *j)
{
    j->efn(d->etcd, j->a);
}

int elector_driver_exec(elector_driver *d, void (*fn)(elector_etcd *etcd, void *arg),
                        void *arg)
{
    if (!fn) return ELECTOR_EINVAL;
    int rc = enter(d);
    if (rc) return rc;
    struct job j = {.fn = exec_job, .efn = fn, .a = arg};
    rc = run_job(d, &j);
    leave(d);
    return rc;
}

uint64_t elector_driver_stalls(const elector_driver *d)
{
    if (!d || forked(d)) return 0;
    elector_driver *m = (elector_driver *)d;
    pthread_mutex_lock(&m->mu);
    uint64_t n = m->stalls;
    pthread_mutex_unlock(&m->mu);
    return n;
}

bool elector_driver_in_callback(const elector_driver *d)
{
    return d && !forked(d) && on_cb(d);
}

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
    queue_event(d, &s->h, ev);
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
    if (enter(d)) return NULL;
    elector_driver_session *s = calloc(1, sizeof(*s));
    if (!s) {
        leave(d);
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
    if (run_job(d, &j)) {
        free(s);
        s = NULL;
    } else {
        h_attach(d, &s->h);
    }
    leave(d);
    return s;
}

int elector_driver_session_wait(elector_driver_session *s, int64_t timeout_ms)
{
    if (!s) return ELECTOR_EINVAL;
    elector_driver *d = s->h.d;
    int rc = enter_h(d, &s->h);
    if (rc) return rc;
    int64_t end = end_of(timeout_ms);
    while (s->phase == 0 && !d->stop && !past(end))
        cv_wait(d, &d->cv, end);
    rc = s->phase == 1   ? 0
         : s->phase == 2 ? s->err
         : d->stop       ? ELECTOR_ECLOSED
                         : ELECTOR_ETIMEDOUT;
    leave_h(d, &s->h);
    return rc;
}

static void session_close_job(elector_driver *d, struct job *j)
{
    elector_driver_session *s = j->a;
    elector_session *cs = s->core;
    s->core = NULL;
    if (cs) elector_session_close(cs);
    pthread_mutex_lock(&d->mu);
    h_detach(&s->h);
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
    quiesce(d, &s->h);
    if (!d->stop) {
        d->calls++;
        struct job j = {.fn = session_close_job, .a = s};
        run_job(d, &j);
        d->calls--;
        if (d->calls == 0) pthread_cond_broadcast(&d->cv);
    }
    if (mine) h_unref(&s->h);
    pthread_mutex_unlock(&d->mu);
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
    queue_event(d, &el->h, ev);
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
    if (enter(d)) return NULL;
    elector_driver_election *el = calloc(1, sizeof(*el));
    char *n = strdup(name);
    if (!el || !n) {
        free(el);
        free(n);
        leave(d);
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
    if (run_job(d, &j)) {
        free(n);
        free(el);
        el = NULL;
    } else {
        h_attach(d, &el->h);
    }
    leave(d);
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
    h_detach(&el->h);
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
    quiesce(d, &el->h);
    if (!d->stop) {
        d->calls++;
        struct job j = {.fn = election_free_job, .a = el};
        run_job(d, &j);
        d->calls--;
        if (d->calls == 0) pthread_cond_broadcast(&d->cv);
    }
    if (mine) h_unref(&el->h);
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
    int rc = enter_h(d, &el->h);
    if (rc) return rc;
    struct job j = {.fn = fn, .a = el, .p1 = p, .n1 = n};
    rc = run_job(d, &j);
    leave_h(d, &el->h);
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
    int rc = enter_h(d, &el->h);
    if (rc) return rc;
    int64_t end = end_of(timeout_ms);
    struct job j = {.fn = campaign_job, .a = el, .p1 = value, .n1 = len};
    rc = run_job(d, &j);
    if (!rc) {
        while (el->outcome == 0 && !d->stop && !past(end))
            cv_wait(d, &d->cv, end);
        rc = el->outcome == 1  ? 0
             : el->outcome < 0 ? el->outcome
             : d->stop         ? ELECTOR_ECLOSED
                               : ELECTOR_ETIMEDOUT;
    }
    leave_h(d, &el->h);
    return rc;
}

int elector_driver_resign_sync(elector_driver_election *el, int64_t timeout_ms)
{
    if (!el) return ELECTOR_EINVAL;
    elector_driver *d = el->h.d;
    int rc = enter_h(d, &el->h);
    if (rc) return rc;
    int64_t end = end_of(timeout_ms);
    struct job j = {.fn = resign_job, .a = el};
    rc = run_job(d, &j);
    if (!rc) {
        while (!el->resign_done && !d->stop && !past(end))
            cv_wait(d, &d->cv, end);
        rc = el->resign_done ? 0 : d->stop ? ELECTOR_ECLOSED : ELECTOR_ETIMEDOUT;
    }
    leave_h(d, &el->h);
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

/* ---------------------------------------------------------------- guarded writes */

/* What a guarded write's answer goes to: a user callback (async) or a waiter
 * (sync; abandoned at its timeout, then freed by whoever comes last). */
struct gctx {
    elector_driver_election *el;
    elector_driver_guarded_cb cb;
    void *ud;
    bool sync, done, abandoned;
    int err;
};

static void guarded_core_cb(elector_election *ce, int err, void *ud)
{
    (void)ce;
    struct gctx *g = ud;
    elector_driver *d = g->el->h.d;
    if (!g->sync) {
        struct item *it = calloc(1, sizeof(*it));
        pthread_mutex_lock(&d->mu);
        if (it) {
            it->kind = I_GUARDED;
            it->h = &g->el->h; /* its ref moves to the item */
            it->gcb = g->cb;
            it->gud = g->ud;
            it->err = err;
            *d->items_tail = it;
            d->items_tail = &it->next;
            pthread_cond_broadcast(&d->icv);
        } else {
            h_unref(&g->el->h);
        }
        pthread_mutex_unlock(&d->mu);
        if (!it)
            fprintf(stderr,
                    "elector driver: out of memory, a guarded write's answer is lost\n");
        free(g);
        return;
    }
    pthread_mutex_lock(&d->mu);
    h_unref(&g->el->h);
    if (g->abandoned) {
        free(g);
    } else {
        g->done = true;
        g->err = err;
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
}

static void guarded_job(elector_driver *d, struct job *j)
{
    struct gctx *g = j->b;
    elector_driver_election *el = g->el;
    if (!el->core) {
        j->rc = ELECTOR_ECLOSED;
        return;
    }
    pthread_mutex_lock(&d->mu);
    el->h.refs++; /* until the answer */
    pthread_mutex_unlock(&d->mu);
    if (j->a)
        j->rc =
            elector_guarded_put(el->core, j->p1, j->n1, j->p2, j->n2, guarded_core_cb, g);
    else
        j->rc = elector_guarded_delete(el->core, j->p1, j->n1, guarded_core_cb, g);
    if (j->rc) {
        pthread_mutex_lock(&d->mu);
        h_unref(&el->h);
        pthread_mutex_unlock(&d->mu);
    }
}

static int guarded(elector_driver_election *el, bool put, const void *key, size_t klen,
                   const void *value, size_t vlen, elector_driver_guarded_cb cb, void *ud,
                   bool sync, int64_t timeout_ms)
{
    if (!el || (!sync && !cb)) return ELECTOR_EINVAL;
    elector_driver *d = el->h.d;
    int rc = enter_h(d, &el->h);
    if (rc) return rc;
    struct gctx *g = calloc(1, sizeof(*g));
    if (!g) {
        leave_h(d, &el->h);
        return ELECTOR_ENOMEM;
    }
    g->el = el;
    g->cb = cb;
    g->ud = ud;
    g->sync = sync;
    /* j.a marks a put (a put of an empty value has p2 NULL, n2 0). */
    struct job j = {.fn = guarded_job,
                    .a = put ? (void *)el : NULL,
                    .b = g,
                    .p1 = key,
                    .n1 = klen,
                    .p2 = value,
                    .n2 = vlen};
    rc = run_job(d, &j);
    if (rc) {
        free(g);
    } else if (sync) {
        int64_t end = end_of(timeout_ms);
        while (!g->done && !d->stop && !past(end))
            cv_wait(d, &d->cv, end);
        if (g->done) {
            rc = g->err;
            free(g);
        } else {
            rc = d->stop ? ELECTOR_ECLOSED : ELECTOR_ETIMEDOUT;
            g->abandoned = true;
        }
    }
    leave_h(d, &el->h);
    return rc;
}

int elector_driver_guarded_put(elector_driver_election *el, const void *key,
                               size_t key_len, const void *value, size_t value_len,
                               elector_driver_guarded_cb cb, void *ud)
{
    return guarded(el, true, key, key_len, value, value_len, cb, ud, false, 0);
}

int elector_driver_guarded_delete(elector_driver_election *el, const void *key,
                                  size_t key_len, elector_driver_guarded_cb cb, void *ud)
{
    return guarded(el, false, key, key_len, NULL, 0, cb, ud, false, 0);
}

int elector_driver_guarded_put_sync(elector_driver_election *el, const void *key,
                                    size_t key_len, const void *value, size_t value_len,
                                    int64_t timeout_ms)
{
    return guarded(el, true, key, key_len, value, value_len, NULL, NULL, true,
                   timeout_ms);
}

int elector_driver_guarded_delete_sync(elector_driver_election *el, const void *key,
                                       size_t key_len, int64_t timeout_ms)
{
    return guarded(el, false, key, key_len, NULL, 0, NULL, NULL, true, timeout_ms);
}

/* ---------------------------------------------------------------- leader, observe */

/* The leader read, without blocking the loop thread: the Range of
 * elector_leader_sync() (NAME/ sorted by create revision, limit 1) as an
 * asynchronous call. The waiter's state is on the heap: abandoned when the
 * driver stops, freed by the answer (the client's free answers it with
 * ECANCELED). */
struct lctx {
    elector_driver *d;
    bool done, abandoned;
    int rc;
    elector_leader_info info;
};

static int copy_bytes(uint8_t **dst, size_t *len, const uint8_t *src, size_t n)
{
    *dst = malloc(n ? n : 1);
    if (!*dst) return ELECTOR_ENOMEM;
    if (n) memcpy(*dst, src, n);
    *len = n;
    return 0;
}

static void leader_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e;
    struct lctx *l = ud;
    elector_leader_info info;
    memset(&info, 0, sizeof(info));
    int rc = err;
    if (!rc) {
        const Etcdserverpb__RangeResponse *r = (const void *)m;
        info.revision = r->header ? r->header->revision : 0;
        if (r->n_kvs == 0) {
            rc = 1;
        } else {
            const Mvccpb__KeyValue *kv = r->kvs[0];
            if (copy_bytes(&info.key, &info.key_len, kv->key.data, kv->key.len) ||
                copy_bytes(&info.value, &info.value_len, kv->value.data, kv->value.len))
                rc = ELECTOR_ENOMEM;
            info.token = kv->create_revision;
            info.lease = kv->lease;
        }
        if (rc < 0) elector_leader_free(&info);
    }
    elector_driver *d = l->d;
    pthread_mutex_lock(&d->mu);
    if (l->abandoned) {
        elector_leader_free(&info);
        free(l);
    } else {
        l->rc = rc;
        l->info = info;
        l->done = true;
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
}

static void leader_job(elector_driver *d, struct job *j)
{
    const char *name = j->p1;
    size_t n = strlen(name);
    uint8_t *key = malloc(2 * (n + 1));
    if (!key) {
        j->rc = ELECTOR_ENOMEM;
        return;
    }
    memcpy(key, name, n);
    key[n] = '/';
    uint8_t *end = key + n + 1;
    Etcdserverpb__RangeRequest rr;
    etcdserverpb__range_request__init(&rr);
    rr.key.data = key;
    rr.key.len = n + 1;
    rr.range_end.data = end;
    rr.range_end.len = elector_prefix_end(key, n + 1, end);
    rr.sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND;
    rr.sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__CREATE;
    rr.limit = 1;
    elector_call_opts opts = {.timeout_ms = (int64_t)j->n1};
    /* The request is serialized here: key may go at once. */
    j->rc =
        elector_etcd_call(d->etcd, ELECTOR_RPC_RANGE, &rr.base, &opts, leader_done, j->a);
    free(key);
}

int elector_driver_leader_sync(elector_driver *d, const char *name, int64_t timeout_ms,
                               elector_leader_info *info)
{
    if (!info) return ELECTOR_EINVAL;
    memset(info, 0, sizeof(*info));
    if (!name || !*name) return ELECTOR_EINVAL;
    int rc = enter(d);
    if (rc) return rc;
    struct lctx *l = calloc(1, sizeof(*l));
    if (!l) {
        leave(d);
        return ELECTOR_ENOMEM;
    }
    l->d = d;
    /* The call's own deadline ends it; 0: the client's request timeout. */
    struct job j = {.fn = leader_job,
                    .a = l,
                    .p1 = name,
                    .n1 = (size_t)(timeout_ms < 0 ? 0 : timeout_ms)};
    rc = run_job(d, &j);
    if (rc) {
        free(l);
    } else {
        while (!l->done && !d->stop)
            pthread_cond_wait(&d->cv, &d->mu);
        if (l->done) {
            rc = l->rc;
            *info = l->info;
            free(l);
        } else {
            rc = ELECTOR_ECLOSED;
            l->abandoned = true;
        }
    }
    leave(d);
    return rc;
}

static void observe_cb(elector_observer *co, const elector_event *ev, void *ud)
{
    (void)co;
    elector_driver_observer *o = ud;
    queue_event(o->h.d, &o->h, ev);
}

static void observe_job(elector_driver *d, struct job *j)
{
    elector_driver_observer *o = j->a;
    o->core = elector_observe(d->etcd, o->name, observe_cb, o);
    if (!o->core) j->rc = ELECTOR_ENOMEM;
}

elector_driver_observer *elector_driver_observe(elector_driver *d, const char *name,
                                                elector_driver_observe_cb cb, void *ud)
{
    if (!name || !*name) return NULL;
    if (enter(d)) return NULL;
    elector_driver_observer *o = calloc(1, sizeof(*o));
    char *n = strdup(name);
    if (!o || !n) {
        free(o);
        free(n);
        leave(d);
        return NULL;
    }
    o->h.d = d;
    o->h.kind = H_OBSERVER;
    o->h.refs = 1;
    o->name = n;
    o->cb = cb;
    o->ud = ud;
    struct job j = {.fn = observe_job, .a = o};
    if (run_job(d, &j)) {
        free(n);
        free(o);
        o = NULL;
    } else {
        h_attach(d, &o->h);
    }
    leave(d);
    return o;
}

static void observer_free_job(elector_driver *d, struct job *j)
{
    elector_driver_observer *o = j->a;
    elector_observer *co = o->core;
    o->core = NULL;
    if (co) elector_observer_free(co);
    pthread_mutex_lock(&d->mu);
    h_detach(&o->h);
    pthread_mutex_unlock(&d->mu);
}

void elector_driver_observer_free(elector_driver_observer *o)
{
    if (!o) return;
    elector_driver *d = o->h.d;
    if (forked(d)) return;
    pthread_mutex_lock(&d->mu);
    bool mine = !o->h.closed; /* else the driver's shutdown took it */
    o->h.closed = true;
    quiesce(d, &o->h);
    if (!d->stop) {
        d->calls++;
        struct job j = {.fn = observer_free_job, .a = o};
        run_job(d, &j);
        d->calls--;
        if (d->calls == 0) pthread_cond_broadcast(&d->cv);
    }
    if (mine) h_unref(&o->h);
    pthread_mutex_unlock(&d->mu);
}

/* ---------------------------------------------------------------- keys */

/* Plain key operations (put, put if absent, get, delete; by key or by prefix)
 * as asynchronous calls on the loop thread, with the leader read's waiting
 * scheme: the waiter's state is on the heap, abandoned when the driver stops,
 * freed by the answer. */
enum { KV_PUT, KV_PUT_IF_ABSENT, KV_GET, KV_GET_PREFIX, KV_DELETE, KV_DELETE_PREFIX };

struct kctx {
    elector_driver *d;
    bool done, abandoned;
    int rc;
    int op;
    int64_t lease, timeout_ms;
    elector_driver_kv *kvs;
    size_t n;
    int64_t deleted;
};

void elector_driver_kvs_free(elector_driver_kv *kvs, size_t n)
{
    if (!kvs) return;
    for (size_t i = 0; i < n; i++) {
        free(kvs[i].key);
        free(kvs[i].value);
    }
    free(kvs);
}

static int copy_kvs(struct kctx *k, Mvccpb__KeyValue *const *src, size_t n)
{
    k->kvs = calloc(n ? n : 1, sizeof(*k->kvs));
    if (!k->kvs) return ELECTOR_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        elector_driver_kv *o = &k->kvs[i];
        const Mvccpb__KeyValue *kv = src[i];
        if (copy_bytes(&o->key, &o->key_len, kv->key.data, kv->key.len) ||
            copy_bytes(&o->value, &o->value_len, kv->value.data, kv->value.len)) {
            elector_driver_kvs_free(k->kvs, i + 1);
            k->kvs = NULL;
            return ELECTOR_ENOMEM;
        }
        o->create_revision = kv->create_revision;
        o->mod_revision = kv->mod_revision;
        o->lease = kv->lease;
    }
    k->n = n;
    return 0;
}

static void kv_done(elector_etcd *e, int err, const ProtobufCMessage *m, void *ud)
{
    (void)e;
    struct kctx *k = ud;
    int rc = err;
    if (!rc) {
        switch (k->op) {
        case KV_PUT_IF_ABSENT:
            rc = ((const Etcdserverpb__TxnResponse *)(const void *)m)->succeeded ? 0 : 1;
            break;
        case KV_GET:
        case KV_GET_PREFIX: {
            const Etcdserverpb__RangeResponse *r = (const void *)m;
            rc = copy_kvs(k, r->kvs, r->n_kvs);
            break;
        }
        case KV_DELETE:
        case KV_DELETE_PREFIX:
            k->deleted =
                ((const Etcdserverpb__DeleteRangeResponse *)(const void *)m)->deleted;
            break;
        default:
            break;
        }
    }
    elector_driver *d = k->d;
    pthread_mutex_lock(&d->mu);
    if (k->abandoned) {
        elector_driver_kvs_free(k->kvs, k->n);
        free(k);
    } else {
        k->rc = rc;
        k->done = true;
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
}

static void kv_job(elector_driver *d, struct job *j)
{
    struct kctx *k = j->a;
    size_t klen = j->n1;
    uint8_t *end = malloc(klen ? klen : 1);
    if (!end) {
        j->rc = ELECTOR_ENOMEM;
        return;
    }
    ProtobufCBinaryData key = {.data = (uint8_t *)j->p1, .len = klen};
    ProtobufCBinaryData range_end = {.data = NULL, .len = 0};
    if (k->op == KV_GET_PREFIX || k->op == KV_DELETE_PREFIX) {
        range_end.data = end;
        range_end.len = elector_prefix_end(key.data, klen, end);
    }
    elector_call_opts opts = {.timeout_ms = k->timeout_ms};
    Etcdserverpb__PutRequest put;
    etcdserverpb__put_request__init(&put);
    put.key = key;
    put.value.data = (uint8_t *)j->p2;
    put.value.len = j->n2;
    put.lease = k->lease;
    /* Requests are serialized by the call: they may go on return. */
    switch (k->op) {
    case KV_PUT:
        j->rc = elector_etcd_call(d->etcd, ELECTOR_RPC_PUT, &put.base, &opts, kv_done, k);
        break;
    case KV_PUT_IF_ABSENT: {
        Etcdserverpb__Compare c, *cs[1] = {&c};
        etcdserverpb__compare__init(&c);
        c.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
        c.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
        c.key = key;
        c.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
        c.create_revision = 0;
        Etcdserverpb__RequestOp op, *ops[1] = {&op};
        etcdserverpb__request_op__init(&op);
        op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
        op.request_put = &put;
        Etcdserverpb__TxnRequest t;
        etcdserverpb__txn_request__init(&t);
        t.n_compare = 1;
        t.compare = cs;
        t.n_success = 1;
        t.success = ops;
        j->rc = elector_etcd_call(d->etcd, ELECTOR_RPC_TXN, &t.base, &opts, kv_done, k);
        break;
    }
    case KV_GET:
    case KV_GET_PREFIX: {
        Etcdserverpb__RangeRequest rr;
        etcdserverpb__range_request__init(&rr);
        rr.key = key;
        rr.range_end = range_end;
        rr.sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND;
        rr.sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__KEY;
        j->rc =
            elector_etcd_call(d->etcd, ELECTOR_RPC_RANGE, &rr.base, &opts, kv_done, k);
        break;
    }
    default: {
        Etcdserverpb__DeleteRangeRequest dr;
        etcdserverpb__delete_range_request__init(&dr);
        dr.key = key;
        dr.range_end = range_end;
        j->rc = elector_etcd_call(d->etcd, ELECTOR_RPC_DELETE_RANGE, &dr.base, &opts,
                                  kv_done, k);
        break;
    }
    }
    free(end);
}

static int kv_op(elector_driver *d, int op, const void *key, size_t key_len,
                 const void *value, size_t value_len, int64_t lease, int64_t timeout_ms,
                 struct kctx *out)
{
    if (!key || key_len == 0 || (value_len && !value) || lease < 0) return ELECTOR_EINVAL;
    int rc = enter(d);
    if (rc) return rc;
    struct kctx *k = calloc(1, sizeof(*k));
    if (!k) {
        leave(d);
        return ELECTOR_ENOMEM;
    }
    k->d = d;
    k->op = op;
    k->lease = lease;
    k->timeout_ms = timeout_ms < 0 ? 0 : timeout_ms; /* 0: the request timeout */
    struct job j = {
        .fn = kv_job, .a = k, .p1 = key, .n1 = key_len, .p2 = value, .n2 = value_len};
    rc = run_job(d, &j);
    if (rc) {
        free(k);
    } else {
        while (!k->done && !d->stop)
            pthread_cond_wait(&d->cv, &d->mu);
        if (k->done) {
            rc = k->rc;
            *out = *k;
            free(k);
        } else {
            rc = ELECTOR_ECLOSED;
            k->abandoned = true;
        }
    }
    leave(d);
    return rc;
}

int elector_driver_put_sync(elector_driver *d, const void *key, size_t key_len,
                            const void *value, size_t value_len, int64_t lease,
                            unsigned flags, int64_t timeout_ms)
{
    if (flags & ~(unsigned)ELECTOR_DRIVER_PUT_IF_ABSENT) return ELECTOR_EINVAL;
    struct kctx k;
    return kv_op(d, (flags & ELECTOR_DRIVER_PUT_IF_ABSENT) ? KV_PUT_IF_ABSENT : KV_PUT,
                 key, key_len, value, value_len, lease, timeout_ms, &k);
}

int elector_driver_get_sync(elector_driver *d, const void *key, size_t key_len,
                            bool prefix, int64_t timeout_ms, elector_driver_kv **kvs,
                            size_t *n)
{
    if (!kvs || !n) return ELECTOR_EINVAL;
    *kvs = NULL;
    *n = 0;
    struct kctx k = {0};
    int rc = kv_op(d, prefix ? KV_GET_PREFIX : KV_GET, key, key_len, NULL, 0, 0,
                   timeout_ms, &k);
    if (rc) {
        elector_driver_kvs_free(k.kvs, k.n);
        return rc;
    }
    *kvs = k.kvs;
    *n = k.n;
    return 0;
}

int elector_driver_delete_sync(elector_driver *d, const void *key, size_t key_len,
                               bool prefix, int64_t timeout_ms, int64_t *deleted)
{
    struct kctx k = {0};
    int rc = kv_op(d, prefix ? KV_DELETE_PREFIX : KV_DELETE, key, key_len, NULL, 0, 0,
                   timeout_ms, &k);
    if (!rc && deleted) *deleted = k.deleted;
    return rc;
}
