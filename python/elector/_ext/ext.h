/* SPDX-License-Identifier: MIT */
/* elector._elector's private header: one family of handle types over
 * libelector's one API, each usable with either way of driving a client.
 *
 * The mode is the client's, chosen when it is made (Client(own_thread=...)):
 * - own_thread (the sync API, the tooz backend): the client's loop thread keeps
 *   the leases alive without ever taking the GIL, its callback thread runs the
 *   callbacks; every call into libelector releases the GIL (CLIENT_CALL).
 * - the caller's loop (elector.aio): asyncio watches Client.fd() and calls
 *   Client.process(), inside which the callbacks run; calls keep the GIL, which
 *   keeps them on one thread at a time, as that mode asks.
 *
 * One callback ("trampoline") per kind serves both modes: it never runs Python
 * nor takes the GIL; it records the event in a C structure (hstate) under a
 * pthread mutex and wakes the eventfds that Python registered ("waiters"), so
 * the callback thread never waits for Python. Python waits on those fds with
 * select (gevent and eventlet make that cooperative, Ctrl-C interrupts it) or,
 * on the caller's loop, re-checks the recorded state after each process().
 *
 * Files: handle.c (the base: state, waiters, fork and closed checks), op.c (the
 * answers of asynchronous calls: Op, LeaderOp, KvOp), client.c, session.c,
 * election.c, observer.c, module.c (functions, codes, the types' registration).
 *
 * fork(): each handle knows its client's process; in a child every method
 * raises the registered fork error before touching a mutex (the client's
 * threads may have held one at the fork), and deallocation forgets the handles
 * (sends nothing, frees nothing the parent owns). */
#ifndef ELECTOR_PY_EXT_H
#define ELECTOR_PY_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "elector/election.h"
#include "elector/error.h"

/* ------------------------------------------------------------ handle.c */

/* An observer's event, queued for Observer.pop(). */
typedef struct qev {
    struct qev *next;
    int type;
    int reason;
    int64_t token, lease;
    size_t key_len, value_len;
    uint8_t *key, *value;
} qev;

/* What a handle's callbacks record, and the eventfds they wake. */
typedef struct hstate {
    pthread_mutex_t mu;
    int *fds;
    size_t nfds, cap;
    struct hstate *hub; /* the client's: woken on every event of its handles */
    /* sessions and elections */
    int phase; /* election: PHASE_*; session: PHASE_LOST once lost */
    int reason;
    char detail[256];
    int64_t token, lease;
    uint64_t events;
    /* observers */
    qev *head, *tail;
} hstate;

enum {
    PHASE_IDLE,
    PHASE_CAMPAIGNING,
    PHASE_LEADING,
    PHASE_LOST,
    PHASE_FAILED,
    PHASE_RESIGNED
};

hstate *hstate_new(hstate *hub);
void hstate_free(hstate *h);
/* With h->mu held, after recording: counts the event, wakes h's waiters and
 * the hub's. */
void hstate_wake(hstate *h);
void hstate_set_detail(hstate *h, const char *detail);

extern PyObject *ext_fork_error; /* set by elector/__init__.py */
/* 0 in the process that made the object; else -1 with the fork error set. */
int ext_forked(pid_t pid);

typedef struct {
    PyObject_HEAD elector_etcd *etcd;
    hstate *hub;
    pid_t pid;
    bool own_thread;
    bool closed;
    atomic_int revokes; /* of sessions closed without close_start(), unanswered */
} ClientObject;

/* Runs stmt with the GIL released when the client has its own thread (the
 * call may wait for the loop thread); driven by the caller's loop, with the GIL
 * held. */
#define CLIENT_CALL(c, stmt)                                                             \
    do {                                                                                 \
        PyThreadState *ts_ = (c)->own_thread ? PyEval_SaveThread() : NULL;               \
        stmt;                                                                            \
        if (ts_) PyEval_RestoreThread(ts_);                                              \
    } while (0)

/* The head of Session, Election and Observer: its client, the Python object it
 * keeps alive (the client, or the election's session) and its recorded state. */
typedef struct {
    PyObject_HEAD ClientObject *client;
    PyObject *owner;
    hstate *st;
} HandleObject;

/* Checks that client c is usable (made in this process, open) and ties h to it
 * and owner; -1 with a Python error. */
int handle_init(HandleObject *h, ClientObject *c, PyObject *owner);
/* 0 when h is usable: initialized, in this process and, unless what is NULL,
 * live (the C handle is there) with its client open; else -1 with a Python
 * error ("<what> is closed"). */
int handle_check(HandleObject *h, bool live, const char *what);
/* Whether the C handle is to be freed: its client is open and this is its
 * process (otherwise the client's free took it, or it is the parent's). */
bool handle_owns(const HandleObject *h);
/* Frees h's state (not in a child), drops the owner, frees the object. */
void handle_dealloc(HandleObject *h);
PyObject *Handle_add_waiter(HandleObject *h, PyObject *unused);
PyObject *Handle_remove_waiter(HandleObject *h, PyObject *fd);
PyObject *hstate_add_waiter(hstate *h);
PyObject *hstate_remove_waiter(hstate *h, PyObject *fd);

/* ------------------------------------------------------------ op.c */

/* An asynchronous call in flight: its callback records the answer and writes
 * the eventfd. Shared by the callback and the Python object (refcounted: the
 * last one frees it). */
enum { OP_WRITE, OP_LEADER, OP_KV_PUT, OP_KV_GET, OP_KV_DELETE };
typedef struct pending {
    atomic_int refs;
    atomic_int done;
    int fd;
    int kind;
    int rc;
    elector_etcd *etcd; /* for the failure's detail text */
    char detail[256];
    elector_leader_info info; /* OP_LEADER */
    elector_kv *kvs;          /* OP_KV_GET */
    size_t n;
    int64_t deleted; /* OP_KV_DELETE */
} pending;

typedef struct {
    PyObject_HEAD pending *p;
    pid_t pid;
} OpObject;

extern PyTypeObject OpType, LeaderOpType, KvOpType;

/* A new op of kind (OP_*) for a call of client etcd, with two references (the
 * object's and the callback's); NULL with a Python error. */
OpObject *op_new(int kind, elector_etcd *etcd);
/* The op when its call was sent (sent), else the code rc as an int (the
 * callback's reference dropped: no callback will come). */
PyObject *op_started(OpObject *op, bool sent, int rc);

void op_write_cb(elector_election *el, int rc, void *ud); /* guarded writes */
void op_closed_cb(int rc, void *ud);                      /* a session's revoke */
void op_revoke_cb(elector_etcd *d, int rc, void *ud);     /* a lease's revoke */
void op_leader_cb(elector_etcd *d, int rc, const elector_leader_info *info, void *ud);
void op_kv_cb(elector_etcd *d, int rc, const elector_kv *kvs, size_t n, int64_t deleted,
              void *ud);

/* A leader read's answer for Python: None (nobody leads), a code, (EBLOCKED,
 * key), or (key, value, token, lease). */
PyObject *leader_value(int rc, const elector_leader_info *info);
/* A get's keys: [(key, value, create_revision, mod_revision, lease)]. */
PyObject *kvs_value(const elector_kv *kvs, size_t n);

/* ------------------------------------------------------------ the types */

extern PyTypeObject ClientType, SessionType, ElectionType, ObserverType;

typedef struct {
    HandleObject h; /* owner: the client */
    elector_session *s;
} SessionObject;

#endif
