/* SPDX-License-Identifier: MIT */
/* Shared by the files of the driver (src/driver/), bottom to top:
 *   callback_thread.c      handles and the callback thread (events copied, delivered)
 *   loop_thread.c         jobs for the loop thread, the loop, publishing, the driver
 *   driver_election.c  sessions and elections
 *   driver_ops.c     guarded writes, the leader query, observers
 *   driver_kv.c      plain key operations (put, get, delete)
 * One mutex (d->mu) guards everything shared (loop_thread.c says how). */
#ifndef ELECTOR_DRIVER_PRIVATE_H
#define ELECTOR_DRIVER_PRIVATE_H

#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include "elector/election.h"
#include "election_internal.h"
#include "transport_internal.h"

enum { H_SESSION, H_ELECTION, H_OBSERVER };

typedef struct elector__drv elector__drv;

/* What every handle's record starts with: the state of a session, election or
 * observer of a client with own_thread, found from the handle (the core's
 * object, which the user holds) through its owner slot. refs: the user's
 * (until free), the core object's (until the loop thread freed it), one per
 * queued callback. */
struct dh {
    struct dh *next, *prev; /* d->handles, while the core object lives */
    elector__drv *d;
    void *user; /* the handle as the user has it: callbacks pass it */
    int kind, refs;
    bool closed; /* the user let go: no more callbacks */
    bool attached;
};

struct drv_session {
    struct dh h;
    elector_session *core;
    elector_session_cb cb;
    void *ud;
    int phase; /* 0 granting, 1 alive, 2 over */
    int err;
    int64_t lease, ttl, deadline_ns;
    int helper; /* elector_session_helper() of the core, as last published */
};

struct drv_election {
    struct dh h;
    elector_election *core;
    elector_election_cb cb, log;
    void *ud, *log_ud;
    bool leader;
    int64_t token, deadline_ns;
    uint8_t *key; /* elector_election_key()'s copy for other threads */
    size_t key_len;
    int outcome; /* campaign: 1 elected, < 0 failed */
    bool resign_done;
};

struct drv_observer {
    struct dh h;
    elector_observer *core;
    elector_observe_cb cb;
    void *ud;
};

struct job {
    struct job *next;
    void (*fn)(elector__drv *d, struct job *j);
    bool done;
    int rc;
    void *a, *b;
    const void *p1, *p2;
    void *out; /* a handle's new core object, for its maker (see attach_new) */
    size_t n1, n2;
    void (*efn)(elector_etcd *, void *);
    /* A close made from the handle's own callback (elector__drv_end_h):
     * on the heap, run once that callback has returned. */
    struct dh *wait_h;
};

/* I_CALL: the answer of an asynchronous call of the driver itself (no handle:
 * h is NULL); callfn(d, cud) delivers it, also while the queue is drained at
 * shutdown, so that each such call is answered exactly once. */
enum { I_EVENT, I_LOG, I_GUARDED, I_CALL };
struct item {
    struct item *next;
    struct dh *h;
    int kind;
    void (*callfn)(elector_etcd *e, void *cud);
    void *cud;
    elector_event ev; /* pointers into the same allocation */
    elector_guarded_cb gcb;
    void *gud;
    int err;
    char *detail; /* I_GUARDED: the failure's text (malloc'd) or NULL */
};

/* The state of a client that runs on its own thread (own_thread): the
 * client's owner (elector__etcd_owner()), made by elector_etcd_new(). */
struct elector__drv {
    pid_t pid;
    pthread_mutex_t mu;
    pthread_cond_t cv;  /* jobs done, states changed */
    pthread_cond_t icv; /* callback queue, callback ended */
    pthread_t loop_th, cb_th;
    elector_etcd *etcd;
    int64_t stall_ms;
    void (*on_stall)(elector_etcd *etcd, int64_t running_ms, void *ud);
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
    /* elector_etcd_errstr() in the callback under way, when it reports a
     * failed call: the callback thread's alone (set, read and cleared there). */
    const char *cb_detail;
    bool cb_busy, stall_reported;
    int64_t cb_start_ns;
    uint64_t stalls;
};

static inline bool forked(const elector__drv *d)
{
    return getpid() != d->pid;
}

static inline bool on_loop(const elector__drv *d)
{
    return pthread_equal(pthread_self(), d->loop_th);
}

static inline bool on_cb(const elector__drv *d)
{
    return pthread_equal(pthread_self(), d->cb_th);
}

/* A copy of the client's detail text when err is the failure it describes (a
 * call's error, its text current: loop thread, in the call's callback); NULL
 * otherwise or out of memory. */
char *elector__drv_err_detail(elector__drv *d, int err);

static inline int64_t ms_now(void)
{
    return elector_now_ns() / 1000000;
}

/* Waits on cv until end_ms (< 0: no limit). mu held. */
static inline int cv_wait(elector__drv *d, pthread_cond_t *cv, int64_t end_ms)
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

/* callback_thread.c: handles (mu held) and the callback thread */
void elector__drv_h_unref(struct dh *h);
void elector__drv_h_attach_new(elector__drv *d, struct dh *h, void *core, struct job *j);
void elector__drv_h_detach(struct dh *h);
/* Queues a copy of ev for h's callback (I_EVENT), or its log (I_LOG: an
 * election's elector_election_set_log()). Loop thread. */
void elector__drv_queue_event(elector__drv *d, struct dh *h, int kind,
                              const elector_event *ev);
/* Queues fn(e, ud) for the callback thread (an I_CALL item). Loop thread.
 * Returns false when out of memory (nothing queued). Once the client is
 * freed, e is passed as it was, not to be called. */
bool elector__drv_queue_call(elector__drv *d, void (*fn)(elector_etcd *, void *),
                             void *ud);
/* The answer of an asynchronous call of client e: fn(e, ud) on the callback
 * thread (own_thread: queued), or at once (the caller's loop: we are in its
 * elector_etcd_process()). False when out of memory (nothing queued). */
bool elector__drv_answer(elector_etcd *e, void (*fn)(elector_etcd *, void *), void *ud);
void *elector__drv_cb_main(void *arg);
/* A copy of src[0..n-1] into *dst (malloc'd; the caller frees), its length in *len. */
int elector__drv_copy_bytes(uint8_t **dst, size_t *len, const uint8_t *src, size_t n);
/* Waits until no callback of h runs (unless we are that callback). mu held. */
void elector__drv_quiesce(elector__drv *d, struct dh *h);

/* loop_thread.c: the threads of a client with own_thread */
/* Starts them for client e (new, usable): 0 or ELECTOR_ENOMEM/EUNAVAILABLE. */
int elector__drv_start(elector_etcd *e, const elector_etcd_config *cfg);
/* elector_etcd_free() of such a client. */
void elector__drv_stop(elector__drv *d);
/* The client's driver, NULL when the caller's loop drives it. */
static inline elector__drv *elector__drv_of(const elector_etcd *e)
{
    return e ? elector__etcd_owner(e) : NULL;
}

/* The record of a handle of a client with own_thread, NULL for one driven by
 * the caller's loop. */
static inline struct drv_session *drv_session_of(const elector_session *s)
{
    return s ? elector__session_owner(s) : NULL;
}

static inline struct drv_election *drv_election_of(const elector_election *el)
{
    return el ? elector__election_owner(el) : NULL;
}

static inline struct drv_observer *drv_observer_of(const elector_observer *o)
{
    return o ? elector__observer_owner(o) : NULL;
}

/* The driver of a client with own_thread when called from another thread than
 * its loop thread; NULL otherwise (call the core). */
static inline elector__drv *remote_drv(const elector_etcd *e)
{
    elector__drv *d = elector__drv_of(e);
    return d && !on_loop(d) ? d : NULL;
}

/* loop_thread.c: API calls and jobs */
/* Enters an API call: 0, or why not. mu taken on success. */
int elector__drv_enter(elector__drv *d);
void elector__drv_leave(elector__drv *d); /* mu held; released */
/* The same for a call on handle h, held for the call. */
int elector__drv_enter_h(elector__drv *d, struct dh *h);
void elector__drv_leave_h(elector__drv *d, struct dh *h); /* mu held; released */
/* Runs j on the loop thread and waits for it (mu held, kept). */
int elector__drv_run_job(elector__drv *d, struct job *j);
/* An API call that is one job (mu not held): enters the call (on handle h:
 * held for it), runs j on the loop thread, waits for it and leaves. Returns
 * why the call could not enter, else j's rc. */
int elector__drv_call(elector__drv *d, struct job *j);
int elector__drv_call_h(elector__drv *d, struct dh *h, struct job *j);
/* The wait of a blocking API call for what the loop thread does (mu held):
 * on d->cv until done(arg) (0), the client stops (ELECTOR_ECLOSED) or end_ms
 * passes (ELECTOR_ETIMEDOUT; end_ms < 0: no end), asked in that order. */
int elector__drv_wait(elector__drv *d, bool (*done)(const void *arg), const void *arg,
                      int64_t end_ms);
/* The free or close of handle h from any thread (mu not held): marks h
 * closed, runs j on the loop thread (j->fn ends the core object and detaches
 * h) and drops the user's reference. Returns j's rc; ELECTOR_ECLOSED when the
 * client is stopping (its end takes h; j does not run), ELECTOR_EFORKED in a
 * forked child (nothing done: the parent's client owns h). From h's own callback
 * the core object must live until that callback returns: j->fn then runs on
 * the loop thread after it, with j->a only (wait_h set, nothing else of j),
 * and 0 is returned. */
int elector__drv_end_h(elector__drv *d, struct dh *h, struct job *j);

#endif
