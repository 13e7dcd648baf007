/* SPDX-License-Identifier: MIT */
/* Election: a campaign on a session. Its callback records the phase, the
 * token and lease once elected, the reason and detail of a loss; guarded
 * writes are answered to an Op. */
#include "ext.h"

typedef struct {
    HandleObject h; /* owner: the session */
    elector_election *el;
} ElectionObject;

static void election_cb(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el;
    hstate *h = ud;
    pthread_mutex_lock(&h->mu);
    switch (ev->type) {
    case ELECTOR_EV_ELECTED:
        h->phase = PHASE_LEADING;
        h->token = ev->token;
        h->lease = ev->lease;
        break;
    case ELECTOR_EV_LOST:
    case ELECTOR_EV_FAILED:
        h->phase = ev->type == ELECTOR_EV_LOST ? PHASE_LOST : PHASE_FAILED;
        h->reason = ev->reason;
        hstate_set_detail(h, ev->detail);
        break;
    case ELECTOR_EV_RESIGNED:
        h->phase = PHASE_RESIGNED;
        break;
    default:
        break;
    }
    hstate_wake(h);
    pthread_mutex_unlock(&h->mu);
}

static int Election_init(ElectionObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"session", "name", NULL};
    SessionObject *ses;
    const char *name;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!s", kwlist, &SessionType, &ses, &name))
        return -1;
    if (handle_check(&ses->h, ses->s != NULL, "session")) return -1;
    if (!*name) {
        PyErr_SetString(PyExc_ValueError, "election name must not be empty");
        return -1;
    }
    if (handle_init(&self->h, ses->h.client, (PyObject *)ses)) return -1;
    hstate *st = self->h.st;
    CLIENT_CALL(self->h.client,
                self->el = elector_election_new(ses->s, name, election_cb, st));
    if (!self->el) {
        PyErr_SetString(PyExc_MemoryError, "cannot create an election (session closed?)");
        return -1;
    }
    return 0;
}

/* The election is usable: the handle, its session's and the client's. */
static bool election_live(ElectionObject *self)
{
    return self->el && ((SessionObject *)self->h.owner)->s;
}

static void election_free(ElectionObject *self)
{
    if (!self->el) return;
    elector_election *el = self->el;
    self->el = NULL;
    if (handle_owns(&self->h)) CLIENT_CALL(self->h.client, elector_election_free(el));
}

static void Election_dealloc(ElectionObject *self)
{
    election_free(self);
    handle_dealloc(&self->h);
}

#define ELECTION_CHECK(self)                                                             \
    do {                                                                                 \
        if (handle_check(&(self)->h, election_live(self), "election")) return NULL;      \
    } while (0)

static PyObject *Election_free(ElectionObject *self, PyObject *unused)
{
    (void)unused;
    if (self->h.client && ext_forked(self->h.client->pid)) return NULL;
    election_free(self);
    Py_RETURN_NONE;
}

/* campaign(value) and proclaim(value): the call's code. */
static PyObject *election_send(ElectionObject *self, PyObject *arg, bool campaign)
{
    Py_buffer v;
    if (PyObject_GetBuffer(arg, &v, PyBUF_SIMPLE)) return NULL;
    if (handle_check(&self->h, election_live(self), "election")) {
        PyBuffer_Release(&v);
        return NULL;
    }
    hstate *st = self->h.st;
    int old = 0, rc;
    if (campaign) {
        pthread_mutex_lock(&st->mu);
        old = st->phase;
        st->phase = PHASE_CAMPAIGNING;
        st->reason = 0;
        st->detail[0] = 0;
        st->token = 0;
        pthread_mutex_unlock(&st->mu);
    }
    size_t len = (size_t)v.len;
    if (campaign)
        CLIENT_CALL(self->h.client, rc = elector_campaign(self->el, v.buf, len));
    else
        CLIENT_CALL(self->h.client, rc = elector_proclaim(self->el, v.buf, len));
    PyBuffer_Release(&v);
    if (rc && campaign) {
        pthread_mutex_lock(&st->mu);
        if (st->phase == PHASE_CAMPAIGNING) st->phase = old;
        pthread_mutex_unlock(&st->mu);
    }
    return PyLong_FromLong(rc);
}

static PyObject *Election_campaign(ElectionObject *self, PyObject *arg)
{
    return election_send(self, arg, true);
}

static PyObject *Election_proclaim(ElectionObject *self, PyObject *arg)
{
    return election_send(self, arg, false);
}

static PyObject *Election_resign(ElectionObject *self, PyObject *unused)
{
    (void)unused;
    ELECTION_CHECK(self);
    int rc;
    CLIENT_CALL(self->h.client, rc = elector_resign(self->el));
    return PyLong_FromLong(rc);
}

static PyObject *Election_state(ElectionObject *self, PyObject *unused)
{
    (void)unused;
    ELECTION_CHECK(self);
    hstate *st = self->h.st;
    pthread_mutex_lock(&st->mu);
    PyObject *r =
        Py_BuildValue("(iisLLK)", st->phase, st->reason, st->detail, (long long)st->token,
                      (long long)st->lease, (unsigned long long)st->events);
    pthread_mutex_unlock(&st->mu);
    return r;
}

static PyObject *Election_is_leader(ElectionObject *self, PyObject *unused)
{
    (void)unused;
    ELECTION_CHECK(self);
    return PyBool_FromLong(elector_is_leader(self->el));
}

/* guarded(key, value or None) -> Op, or an error code (nothing sent). */
static PyObject *Election_guarded(ElectionObject *self, PyObject *args)
{
    Py_buffer k, v = {0};
    PyObject *vo;
    if (!PyArg_ParseTuple(args, "y*O", &k, &vo)) return NULL;
    bool del = vo == Py_None;
    if (!del && PyObject_GetBuffer(vo, &v, PyBUF_SIMPLE)) {
        PyBuffer_Release(&k);
        return NULL;
    }
    PyObject *r = NULL;
    ClientObject *c = self->h.client;
    OpObject *op = handle_check(&self->h, election_live(self), "election")
                       ? NULL
                       : op_new(OP_WRITE, c->etcd);
    if (op) {
        int rc;
        if (del)
            CLIENT_CALL(c, rc = elector_guarded_delete(self->el, k.buf, (size_t)k.len,
                                                       op_write_cb, op->p));
        else
            CLIENT_CALL(c, rc = elector_guarded_put(self->el, k.buf, (size_t)k.len, v.buf,
                                                    (size_t)v.len, op_write_cb, op->p));
        r = op_started(op, rc == 0, rc);
    }
    PyBuffer_Release(&k);
    if (!del) PyBuffer_Release(&v);
    return r;
}

static PyMethodDef Election_methods[] = {
    {"free", (PyCFunction)Election_free, METH_NOARGS, "Resigns if needed and frees."},
    {"campaign", (PyCFunction)Election_campaign, METH_O, "Starts campaigning: code."},
    {"resign", (PyCFunction)Election_resign, METH_NOARGS, "Resigns: code."},
    {"proclaim", (PyCFunction)Election_proclaim, METH_O, "Proclaims: code."},
    {"state", (PyCFunction)Election_state, METH_NOARGS,
     "(phase, reason, detail, token, lease, events)."},
    {"is_leader", (PyCFunction)Election_is_leader, METH_NOARGS, "Deadline check."},
    {"guarded", (PyCFunction)Election_guarded, METH_VARARGS,
     "guarded(key, value or None) -> Op or error code."},
    {"add_waiter", (PyCFunction)Handle_add_waiter, METH_NOARGS, "A waiter eventfd."},
    {"remove_waiter", (PyCFunction)Handle_remove_waiter, METH_O, "Closes a waiter."},
    {NULL, NULL, 0, NULL}};

PyTypeObject ElectionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "elector._elector.Election",
    .tp_basicsize = sizeof(ElectionObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An election handle on a session.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Election_init,
    .tp_dealloc = (destructor)Election_dealloc,
    .tp_methods = Election_methods,
};
