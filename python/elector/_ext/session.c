/* SPDX-License-Identifier: MIT */
/* Session: a lease kept alive by the client's loop (its own thread, or the
 * caller's). Its callback records the loss; close() and dealloc revoke the
 * lease with elector_session_close_async(), counted by Client.revokes() until
 * etcd answers; close_start() revokes it to an Op that says when etcd did. */
#include "ext.h"

#include <unistd.h>

static void session_cb(elector_session *s, const elector_event *ev, void *ud)
{
    (void)s;
    hstate *h = ud;
    pthread_mutex_lock(&h->mu);
    h->phase = PHASE_LOST;
    h->reason = ev->reason;
    hstate_set_detail(h, ev->detail);
    hstate_wake(h);
    pthread_mutex_unlock(&h->mu);
}

static int Session_init(SessionObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"client", "ttl", "release_on_exit", NULL};
    ClientObject *c;
    long long ttl = 10;
    int roe = 0; /* release_on_exit: off unless asked, as in C */
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|Lp", kwlist, &ClientType, &c, &ttl,
                                     &roe))
        return -1;
    if (handle_init(&self->h, c, (PyObject *)c)) return -1;
    elector_session_config cfg;
    elector_session_config_init(&cfg);
    cfg.ttl_s = ttl;
    cfg.release_on_exit = roe != 0;
    hstate *st = self->h.st;
    CLIENT_CALL(c, self->s = elector_session_new(c->etcd, &cfg, session_cb, st));
    if (!self->s) {
        PyErr_SetString(PyExc_MemoryError, "cannot create a session (client stopping?)");
        return -1;
    }
    return 0;
}

static void dropped_cb(int rc, void *ud)
{
    (void)rc;
    /* runs before the client is freed: the session holds it until then */
    atomic_fetch_sub(&((ClientObject *)ud)->revokes, 1);
}

/* Closes the session; Client.revokes() counts its revoke until etcd answers,
 * so that the client's close can wait for it too. */
static void session_close(SessionObject *self)
{
    if (!self->s) return;
    elector_session *s = self->s;
    self->s = NULL;
    if (!handle_owns(&self->h)) return;
    ClientObject *c = self->h.client;
    atomic_fetch_add(&c->revokes, 1);
    int rc;
    CLIENT_CALL(c, rc = elector_session_close_async(s, 0, dropped_cb, c));
    if (rc != 1) atomic_fetch_sub(&c->revokes, 1); /* no callback will come */
}

static void Session_dealloc(SessionObject *self)
{
    session_close(self);
    handle_dealloc(&self->h);
}

#define SESSION_CHECK(self)                                                              \
    do {                                                                                 \
        if (handle_check(&(self)->h, (self)->s != NULL, "session")) return NULL;         \
    } while (0)

static PyObject *Session_close(SessionObject *self, PyObject *unused)
{
    (void)unused;
    if (self->h.client && ext_forked(self->h.client->pid)) return NULL;
    session_close(self);
    Py_RETURN_NONE;
}

/* close_start(timeout_ms) -> an Op (the revoke was sent: its result is etcd's
 * answer, 0 once etcd no longer has the lease), 0 (nothing to revoke), or an
 * error code (not sent, or nobody will be told). Closes the session in every
 * case. */
static PyObject *Session_close_start(SessionObject *self, PyObject *arg)
{
    long long ms = PyLong_AsLongLong(arg);
    if (ms == -1 && PyErr_Occurred()) return NULL;
    if (self->h.client && ext_forked(self->h.client->pid)) return NULL;
    if (!self->s || !handle_owns(&self->h)) {
        session_close(self);
        return PyLong_FromLong(0);
    }
    ClientObject *c = self->h.client;
    OpObject *op = op_new(OP_WRITE, c->etcd);
    if (!op) {
        session_close(self);
        return NULL;
    }
    elector_session *s = self->s;
    self->s = NULL;
    int rc;
    CLIENT_CALL(c, rc = elector_session_close_async(s, ms, op_closed_cb, op->p));
    return op_started(op, rc == 1, rc);
}

/* 0 granted, ETIMEDOUT not yet, or the grant's error: never blocks. */
static PyObject *Session_poll(SessionObject *self, PyObject *unused)
{
    (void)unused;
    SESSION_CHECK(self);
    int rc;
    CLIENT_CALL(self->h.client, rc = elector_session_wait(self->s, 0));
    return PyLong_FromLong(rc);
}

static PyObject *Session_lease(SessionObject *self, PyObject *unused)
{
    (void)unused;
    SESSION_CHECK(self);
    return PyLong_FromLongLong(elector_session_lease(self->s));
}

static PyObject *Session_helper(SessionObject *self, PyObject *unused)
{
    (void)unused;
    SESSION_CHECK(self);
    return PyLong_FromLong(elector_session_helper(self->s));
}

static PyObject *Session_alive(SessionObject *self, PyObject *unused)
{
    (void)unused;
    SESSION_CHECK(self);
    return PyBool_FromLong(elector_session_alive(self->s));
}

/* (reason, detail) once lost (reason ESESSION when the event had none), else None. */
static PyObject *Session_lost(SessionObject *self, PyObject *unused)
{
    (void)unused;
    SESSION_CHECK(self);
    hstate *st = self->h.st;
    pthread_mutex_lock(&st->mu);
    PyObject *r = st->phase == PHASE_LOST
                      ? Py_BuildValue("(is)", st->reason ? st->reason : ELECTOR_ESESSION,
                                      st->detail)
                      : (Py_INCREF(Py_None), Py_None);
    pthread_mutex_unlock(&st->mu);
    return r;
}

static PyMethodDef Session_methods[] = {
    {"close", (PyCFunction)Session_close, METH_NOARGS,
     "Revokes the lease (counted by Client.revokes() until answered)."},
    {"close_start", (PyCFunction)Session_close_start, METH_O,
     "close_start(timeout_ms) -> Op (revoke sent: its result is etcd's answer), 0 "
     "(nothing to revoke) or an error code."},
    {"poll", (PyCFunction)Session_poll, METH_NOARGS,
     "0 granted, ETIMEDOUT not yet, or the grant's error code."},
    {"lease", (PyCFunction)Session_lease, METH_NOARGS, "Lease ID, 0 until granted."},
    {"helper", (PyCFunction)Session_helper, METH_NOARGS,
     "The release helper's pid; 0 (none asked for, or not now) or a negative code."},
    {"alive", (PyCFunction)Session_alive, METH_NOARGS, "Lease provably alive now."},
    {"lost", (PyCFunction)Session_lost, METH_NOARGS, "(reason, detail) once lost."},
    {"add_waiter", (PyCFunction)Handle_add_waiter, METH_NOARGS, "A waiter eventfd."},
    {"remove_waiter", (PyCFunction)Handle_remove_waiter, METH_O, "Closes a waiter."},
    {NULL, NULL, 0, NULL}};

PyTypeObject SessionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "elector._elector.Session",
    .tp_basicsize = sizeof(SessionObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A lease kept alive by the client's loop.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Session_init,
    .tp_dealloc = (destructor)Session_dealloc,
    .tp_methods = Session_methods,
};
