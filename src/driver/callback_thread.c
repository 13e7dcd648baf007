/* SPDX-License-Identifier: MIT */
/* The driver's handles and its callback thread: core callbacks (on the loop
 * thread) copy their events into the callback queue, which the callback
 * thread empties, calling the user's callbacks with no lock held. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "driver_private.h"

/* ---------------------------------------------------------------- handles */

void elector__drv_h_unref(struct dh *h) /* mu held */
{
    if (--h->refs > 0) return;
    if (h->kind == H_ELECTION) free(((struct drv_election *)h)->key);
    free(h);
}

static void h_attach(elector__drv *d, struct dh *h) /* mu held */
{
    h->attached = true;
    h->refs++;
    h->next = d->handles.next;
    h->prev = &d->handles;
    d->handles.next->prev = h;
    d->handles.next = h;
}

/* A new handle, on the loop thread as its job made it: attached at once (the
 * loop may deliver its first event, and a callback close it, before its maker
 * runs again), its core object handed to the maker through the job, which then
 * no longer touches the record (a close may already have freed it). */
void elector__drv_h_attach_new(elector__drv *d, struct dh *h, void *core, struct job *j)
{
    h->user = core;
    j->out = core;
    pthread_mutex_lock(&d->mu);
    h_attach(d, h);
    pthread_mutex_unlock(&d->mu);
}

void elector__drv_h_detach(struct dh *h) /* mu held */
{
    if (!h->attached) return;
    h->attached = false;
    h->prev->next = h->next;
    h->next->prev = h->prev;
    elector__drv_h_unref(h);
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

/* A copy of src[0..n-1] the caller frees (malloc'd, never NULL on success). */
int elector__drv_copy_bytes(uint8_t **dst, size_t *len, const uint8_t *src, size_t n)
{
    *dst = malloc(n ? n : 1);
    if (!*dst) return ELECTOR_ENOMEM;
    if (n) memcpy(*dst, src, n);
    *len = n;
    return 0;
}

/* Queues a copy of ev for h's callback. Loop thread. */
void elector__drv_queue_event(elector__drv *d, struct dh *h, int kind,
                              const elector_event *ev)
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
    it->kind = kind;
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

bool elector__drv_queue_call(elector__drv *d, void (*fn)(elector_etcd *, void *),
                             void *ud)
{
    struct item *it = calloc(1, sizeof(*it));
    if (!it) return false;
    it->kind = I_CALL;
    it->callfn = fn;
    it->cud = ud;
    pthread_mutex_lock(&d->mu);
    *d->items_tail = it;
    d->items_tail = &it->next;
    pthread_cond_broadcast(&d->icv);
    pthread_mutex_unlock(&d->mu);
    return true;
}

bool elector__drv_answer(elector_etcd *e, void (*fn)(elector_etcd *, void *), void *ud)
{
    elector__drv *d = elector__drv_of(e);
    if (d) return elector__drv_queue_call(d, fn, ud);
    fn(e, ud);
    return true;
}

/* Calls the user's callback for it (callback thread, mu not held). */
static void deliver(elector__drv *d, struct item *it)
{
    struct dh *h = it->h;
    if (it->kind == I_CALL) {
        it->callfn(d->etcd, it->cud);
    } else if (it->kind == I_GUARDED) {
        d->cb_detail = it->detail;
        it->gcb(h->user, it->err, it->gud);
        d->cb_detail = NULL;
    } else if (h->kind == H_SESSION) {
        struct drv_session *s = (void *)h;
        if (s->cb) s->cb(h->user, &it->ev, s->ud);
    } else if (h->kind == H_ELECTION) {
        struct drv_election *el = (void *)h;
        if (it->kind == I_LOG) {
            /* set by elector_election_set_log() from any thread, under mu */
            pthread_mutex_lock(&d->mu);
            elector_election_cb log = el->log;
            void *log_ud = el->log_ud;
            pthread_mutex_unlock(&d->mu);
            if (log) log(h->user, &it->ev, log_ud);
        } else if (el->cb) {
            el->cb(h->user, &it->ev, el->ud);
        }
    } else {
        struct drv_observer *o = (void *)h;
        if (o->cb) o->cb(h->user, &it->ev, o->ud);
    }
}

/* Under mu: a callback for h starts now. */
static void cb_begin(elector__drv *d, struct dh *h)
{
    d->cb_target = h;
    d->cb_busy = true;
    d->stall_reported = false;
    d->cb_start_ns = elector_now_ns();
    /* The loop may be asleep for up to a second: it rounds every 100 ms only
     * while it knows a callback runs (to see a stall). With stop unset the
     * client is not freed yet (the loop frees it only after it saw stop). */
    if (!d->stop) elector_etcd_wakeup(d->etcd);
}

/* The loop is over: nothing more will be queued. What is left is answered
 * (the calls: ECANCELED) or dropped (events). mu held. */
static void drain(elector__drv *d)
{
    while (d->items) {
        struct item *it = d->items;
        d->items = it->next;
        if (it->kind == I_CALL) {
            pthread_mutex_unlock(&d->mu);
            it->callfn(d->etcd, it->cud);
            pthread_mutex_lock(&d->mu);
        } else {
            elector__drv_h_unref(it->h);
        }
        free(it->detail);
        free(it);
    }
    d->items_tail = &d->items;
}

/* elector_etcd_free() was called from a callback: this thread is the last one
 * to know the driver. */
static void release(elector__drv *d)
{
    pthread_join(d->loop_th, NULL);
    pthread_mutex_lock(&d->mu);
    while (d->calls > 0)
        pthread_cond_wait(&d->cv, &d->mu);
    pthread_mutex_unlock(&d->mu);
    pthread_detach(pthread_self());
    pthread_cond_destroy(&d->cv);
    pthread_cond_destroy(&d->icv);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

void *elector__drv_cb_main(void *arg)
{
    elector__drv *d = arg;
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
        bool event = it->kind == I_EVENT || it->kind == I_LOG;
        bool call = !event || (!h->closed && !d->loop_over && !d->cb_frees);
        if (call) {
            cb_begin(d, h);
            pthread_mutex_unlock(&d->mu);
            deliver(d, it);
            pthread_mutex_lock(&d->mu);
            d->cb_target = NULL;
            d->cb_busy = false;
            pthread_cond_broadcast(&d->icv);
        }
        if (h) elector__drv_h_unref(h);
        free(it->detail);
        free(it);
    }
    drain(d);
    bool frees = d->cb_frees;
    pthread_mutex_unlock(&d->mu);
    if (frees) release(d);
    return NULL;
}

/* Waits until no callback of h runs (unless we are that callback). mu held. */
void elector__drv_quiesce(elector__drv *d, struct dh *h)
{
    if (on_cb(d)) return;
    while (d->cb_busy && d->cb_target == h)
        pthread_cond_wait(&d->icv, &d->mu);
}
