/* SPDX-License-Identifier: MIT */
/* Shared by the files of the driver (src/driver/), bottom to top:
 *   driver_cb.c      handles and the callback thread (events copied, delivered)
 *   driver.c         jobs for the loop thread, the loop, publishing, the driver
 *   driver_election.c  sessions and elections
 *   driver_ops.c     guarded writes, the leader query, observers
 *   driver_kv.c      plain key operations (put, get, delete)
 * One mutex (d->mu) guards everything shared (driver.c says how). */
#ifndef ELECTOR_DRIVER_PRIVATE_H
#define ELECTOR_DRIVER_PRIVATE_H

#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include "elector/driver.h"
#include "transport_internal.h"

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
    int helper; /* elector_session_helper() of the core, as last published */
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

/* I_CALL: the answer of an asynchronous call of the driver itself (no handle:
 * h is NULL); callfn(d, cud) delivers it, also while the queue is drained at
 * shutdown, so that each such call is answered exactly once. */
enum { I_EVENT, I_GUARDED, I_CALL };
struct item {
    struct item *next;
    struct dh *h;
    int kind;
    void (*callfn)(elector_driver *d, void *cud);
    void *cud;
    elector_event ev; /* pointers into the same allocation */
    elector_driver_guarded_cb gcb;
    void *gud;
    int err;
    char *detail; /* I_GUARDED: the failure's text (malloc'd) or NULL */
};

/* The state of a client that runs on its own thread (own_thread): the
 * client's owner (elector__etcd_owner()), made by elector_etcd_new(). */
struct elector_driver {
    pid_t pid;
    pthread_mutex_t mu;
    pthread_cond_t cv;  /* jobs done, states changed */
    pthread_cond_t icv; /* callback queue, callback ended */
    pthread_t loop_th, cb_th;
    elector_etcd *etcd;
    int64_t stall_ms;
    /* on_stall of elector_etcd_config, or of the deprecated
     * elector_driver_config (called with the driver). */
    void (*on_stall)(elector_etcd *etcd, int64_t running_ms, void *ud);
    void (*drv_on_stall)(elector_driver *d, int64_t running_ms, void *ud);
    void *stall_ud;
    /* The client's error as the loop thread last published it. */
    int err;
    char errstr[512];
    /* The application's notice callback, run on the callback thread. */
    elector_etcd_notice_cb notice_cb;
    void *notice_ud;
    struct job *jobs, **jobs_tail;
    struct item *items, **items_tail;
    struct dh handles; /* list head */
    bool stop, loop_over, freeing, cb_frees;
    int calls; /* API calls under way in user threads */
    /* Revokes of sessions the user closed, not answered yet (loop thread). */
    int revokes;
    /* The callback under way: its handle, since when (deadline clock). */
    struct dh *cb_target;
    /* elector_driver_cb_detail() of the callback under way: the callback
     * thread's alone (set, read and cleared there). */
    const char *cb_detail;
    bool cb_busy, stall_reported;
    int64_t cb_start_ns;
    uint64_t stalls;
};

static inline bool forked(const elector_driver *d)
{
    return getpid() != d->pid;
}

static inline bool on_loop(const elector_driver *d)
{
    return pthread_equal(pthread_self(), d->loop_th);
}

static inline bool on_cb(const elector_driver *d)
{
    return pthread_equal(pthread_self(), d->cb_th);
}

/* A copy of the client's detail text when err is the failure it describes (a
 * call's error, its text current: loop thread, in the call's callback); NULL
 * otherwise or out of memory. */
char *elector__drv_err_detail(elector_driver *d, int err);

static inline int64_t ms_now(void)
{
    return elector_now_ns() / 1000000;
}

/* Waits on cv until end_ms (< 0: no limit). mu held. */
static inline int cv_wait(elector_driver *d, pthread_cond_t *cv, int64_t end_ms)
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

static inline int64_t end_of(int64_t timeout_ms)
{
    return timeout_ms < 0 ? -1 : ms_now() + timeout_ms;
}

static inline bool past(int64_t end_ms)
{
    return end_ms >= 0 && ms_now() >= end_ms;
}

/* driver_cb.c: handles (mu held) and the callback thread */
void elector__drv_h_unref(struct dh *h);
void elector__drv_h_attach(elector_driver *d, struct dh *h);
void elector__drv_h_detach(struct dh *h);
/* Queues a copy of ev for h's callback. Loop thread. */
void elector__drv_queue_event(elector_driver *d, struct dh *h, const elector_event *ev);
/* Queues fn(d, ud) for the callback thread (an I_CALL item). Loop thread.
 * Returns false when out of memory (nothing queued). */
bool elector__drv_queue_call(elector_driver *d, void (*fn)(elector_driver *, void *),
                             void *ud);
void *elector__drv_cb_main(void *arg);
/* A copy of src[0..n-1] into *dst (malloc'd; the caller frees), its length in *len. */
int elector__drv_copy_bytes(uint8_t **dst, size_t *len, const uint8_t *src, size_t n);
/* Waits until no callback of h runs (unless we are that callback). mu held. */
void elector__drv_quiesce(elector_driver *d, struct dh *h);

/* driver.c: the threads of a client with own_thread */
/* Starts them for client e (new, usable): 0 or ELECTOR_ENOMEM/EUNAVAILABLE.
 * drv_on_stall: the deprecated elector_driver_config's hook, or NULL. */
int elector__drv_start(elector_etcd *e, const elector_etcd_config *cfg,
                       void (*drv_on_stall)(elector_driver *, int64_t, void *),
                       void *drv_ud);
/* elector_etcd_free() of such a client. */
void elector__drv_stop(elector_driver *d);
/* The client's driver, NULL when the caller's loop drives it. */
static inline elector_driver *elector__drv_of(const elector_etcd *e)
{
    return e ? elector__etcd_owner(e) : NULL;
}

/* driver.c: API calls and jobs */
/* Enters an API call: 0, or why not. mu taken on success. */
int elector__drv_enter(elector_driver *d);
void elector__drv_leave(elector_driver *d); /* mu held; released */
/* The same for a call on handle h, held for the call. */
int elector__drv_enter_h(elector_driver *d, struct dh *h);
void elector__drv_leave_h(elector_driver *d, struct dh *h); /* mu held; released */
/* Runs j on the loop thread and waits for it (mu held, kept). */
int elector__drv_run_job(elector_driver *d, struct job *j);

#endif
