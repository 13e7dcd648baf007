/* SPDX-License-Identifier: MIT */
/* The client's public functions whose behaviour depends on how it is driven
 * (elector/etcd.h): by the caller's loop, they are the core's (internal names,
 * src/transport/); with own_thread, the driver (loop_thread.c) starts and stops the
 * threads, the loop's own functions are refused, and what reads the client's
 * state is answered from what the loop thread published or run there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "driver_private.h"

/* Texts handed to another thread than the loop thread: copies of its own. */
static _Thread_local char tl_text[3][512];

elector_etcd *elector_etcd_new(const elector_etcd_config *cfg)
{
    elector_etcd *e = elector__etcd_new(cfg);
    if (!e || !cfg || !cfg->own_thread || elector__etcd_err(e)) return e;
    int rc = elector__drv_start(e, cfg);
    if (rc)
        elector__etcd_unusable(e, rc,
                               rc == ELECTOR_ENOMEM
                                   ? "out of memory"
                                   : "own_thread: the client's threads cannot start");
    return e;
}

void elector_etcd_free(elector_etcd *e)
{
    elector__drv *d = elector__drv_of(e);
    if (d)
        elector__drv_stop(d);
    else
        elector__etcd_free(e);
}

int elector_etcd_err(const elector_etcd *e)
{
    elector__drv *d = remote_drv(e);
    if (!d) return elector__etcd_err(e);
    if (forked(d)) return ELECTOR_EFORKED;
    pthread_mutex_lock(&d->mu);
    int err = d->err;
    pthread_mutex_unlock(&d->mu);
    return err;
}

/* On the callback thread, in the callback of a call that failed, the text of
 * that failure (as the caller's loop has it in elector__etcd_errstr() then),
 * else ""; on other threads the client's, as last published. */
const char *elector_etcd_errstr(const elector_etcd *e)
{
    elector__drv *d = remote_drv(e);
    if (!d) return elector__etcd_errstr(e);
    if (forked(d)) return "the client belongs to the parent process (fork)";
    if (on_cb(d)) return d->cb_detail ? d->cb_detail : "";
    pthread_mutex_lock(&d->mu);
    snprintf(tl_text[0], sizeof(tl_text[0]), "%s", d->errstr);
    pthread_mutex_unlock(&d->mu);
    return tl_text[0];
}

int elector_etcd_fd(const elector_etcd *e)
{
    return elector__drv_of(e) ? -1 : elector__etcd_fd(e);
}

int64_t elector_etcd_timeout(elector_etcd *e)
{
    return elector__drv_of(e) ? -1 : elector__etcd_timeout(e);
}

int elector_etcd_process(elector_etcd *e)
{
    elector__drv *d = elector__drv_of(e);
    if (!d) return elector__etcd_process(e);
    return forked(d) ? ELECTOR_EFORKED : ELECTOR_EINVAL;
}

int elector_etcd_run_once(elector_etcd *e, int64_t max_ms)
{
    elector__drv *d = elector__drv_of(e);
    if (!d) return elector__etcd_run_once(e, max_ms);
    return forked(d) ? ELECTOR_EFORKED : ELECTOR_EINVAL;
}

/* ---------------------------------------------------------------- notices */

struct notice {
    elector__drv *d;
    int err;
    char msg[];
};

static void notice_deliver(elector_etcd *e, void *ud)
{
    (void)e;
    struct notice *n = ud;
    elector__drv *d = n->d;
    /* Read here: a notice queued before the callback changed goes to the new
     * one (or none), as in the caller's loop. */
    pthread_mutex_lock(&d->mu);
    elector_etcd_notice_cb cb = d->stop ? NULL : d->notice_cb;
    void *cud = d->notice_ud;
    pthread_mutex_unlock(&d->mu);
    if (cb) cb(d->etcd, n->err, n->msg, cud);
    free(n);
}

/* The core's notice, on the loop thread: a copy for the callback thread. */
static void notice_relay(elector_etcd *e, int err, const char *msg, void *ud)
{
    (void)e;
    elector__drv *d = ud;
    size_t len = strlen(msg);
    struct notice *n = malloc(sizeof(*n) + len + 1);
    if (!n) return;
    n->d = d;
    n->err = err;
    memcpy(n->msg, msg, len + 1);
    if (!elector__drv_queue_call(d, notice_deliver, n)) free(n);
}

static void set_notice_job(elector__drv *d, struct job *j)
{
    elector__etcd_set_notice(d->etcd, j->a ? notice_relay : NULL, d);
}

void elector_etcd_set_notice(elector_etcd *e, elector_etcd_notice_cb cb, void *ud)
{
    elector__drv *d = elector__drv_of(e);
    if (!d) {
        elector__etcd_set_notice(e, cb, ud);
        return;
    }
    if (elector__drv_enter(d)) return;
    d->notice_cb = cb;
    d->notice_ud = ud;
    struct job j = {.fn = set_notice_job, .a = cb ? d : NULL};
    elector__drv_run_job(d, &j);
    elector__drv_leave(d);
}

/* ---------------------------------------------------------------- reads */

struct read_job {
    int i, rc;
    elector_endpoint_info info;
    elector_etcd_stats stats;
    char authority[512], host[512]; /* copies, made on the loop thread */
};

static void endpoint_job(elector__drv *d, struct job *j)
{
    struct read_job *r = j->a;
    if (r->i < 0)
        r->info.authority = elector__etcd_current_endpoint(d->etcd);
    else
        r->rc = elector__etcd_endpoint_info(d->etcd, r->i, &r->info);
    if (r->rc) return;
    snprintf(r->authority, sizeof(r->authority), "%s",
             r->info.authority ? r->info.authority : "");
    snprintf(r->host, sizeof(r->host), "%s", r->info.host ? r->info.host : "");
}

/* Runs fn with r on the loop thread; false when the client is stopping or was
 * left by fork(). */
static bool read_on_loop(elector__drv *d, void (*fn)(elector__drv *, struct job *),
                         struct read_job *r)
{
    struct job j = {.fn = fn, .a = r};
    return !elector__drv_call(d, &j);
}

const char *elector_etcd_current_endpoint(const elector_etcd *e)
{
    elector__drv *d = remote_drv(e);
    if (!d) return elector__etcd_current_endpoint(e);
    struct read_job r = {.i = -1};
    if (!read_on_loop(d, endpoint_job, &r)) return "";
    memcpy(tl_text[1], r.authority, sizeof(r.authority));
    return tl_text[1];
}

int elector_etcd_endpoint_info(const elector_etcd *e, int i, elector_endpoint_info *out)
{
    elector__drv *d = remote_drv(e);
    if (!d) return elector__etcd_endpoint_info(e, i, out);
    struct read_job r = {.i = i};
    if (!read_on_loop(d, endpoint_job, &r))
        return forked(d) ? ELECTOR_EFORKED : ELECTOR_ECLOSED;
    if (r.rc) return r.rc;
    *out = r.info;
    memcpy(tl_text[1], r.authority, sizeof(r.authority));
    memcpy(tl_text[2], r.host, sizeof(r.host));
    out->authority = tl_text[1];
    out->host = tl_text[2];
    return 0;
}

static void stats_job(elector__drv *d, struct job *j)
{
    struct read_job *r = j->a;
    elector__etcd_get_stats(d->etcd, &r->stats);
}

void elector_etcd_get_stats(const elector_etcd *e, elector_etcd_stats *out)
{
    elector__drv *d = remote_drv(e);
    if (!d) {
        elector__etcd_get_stats(e, out);
        return;
    }
    struct read_job r;
    memset(&r, 0, sizeof(r));
    read_on_loop(d, stats_job, &r);
    *out = r.stats;
}
