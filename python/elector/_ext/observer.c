/* SPDX-License-Identifier: MIT */
/* Observer: follows the leader of an election. Its callback queues a copy of
 * each event; pop() hands them to Python in order. */
#include "ext.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    HandleObject h; /* owner: the client */
    elector_observer *o;
} ObserverObject;

static void observe_cb(elector_observer *o, const elector_event *ev, void *ud)
{
    (void)o;
    hstate *h = ud;
    qev *e = calloc(1, sizeof(*e));
    if (!e) return;
    e->type = ev->type;
    e->reason = ev->reason;
    e->token = ev->token;
    e->lease = ev->lease;
    if (ev->key_len && (e->key = malloc(ev->key_len))) {
        memcpy(e->key, ev->key, ev->key_len);
        e->key_len = ev->key_len;
    }
    if (ev->value_len && (e->value = malloc(ev->value_len))) {
        memcpy(e->value, ev->value, ev->value_len);
        e->value_len = ev->value_len;
    }
    pthread_mutex_lock(&h->mu);
    if (h->tail)
        h->tail->next = e;
    else
        h->head = e;
    h->tail = e;
    hstate_wake(h);
    pthread_mutex_unlock(&h->mu);
}

static int Observer_init(ObserverObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"client", "name", NULL};
    ClientObject *c;
    const char *name;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!s", kwlist, &ClientType, &c, &name))
        return -1;
    if (!*name) {
        PyErr_SetString(PyExc_ValueError, "election name must not be empty");
        return -1;
    }
    if (handle_init(&self->h, c, (PyObject *)c)) return -1;
    hstate *st = self->h.st;
    CLIENT_CALL(c, self->o = elector_observe(c->etcd, name, observe_cb, st));
    if (!self->o) {
        PyErr_SetString(PyExc_MemoryError, "cannot create an observer");
        return -1;
    }
    return 0;
}

static void observer_free(ObserverObject *self)
{
    if (!self->o) return;
    elector_observer *o = self->o;
    self->o = NULL;
    if (handle_owns(&self->h)) CLIENT_CALL(self->h.client, elector_observer_free(o));
}

static void Observer_dealloc(ObserverObject *self)
{
    observer_free(self);
    handle_dealloc(&self->h);
}

static PyObject *Observer_close(ObserverObject *self, PyObject *unused)
{
    (void)unused;
    if (self->h.client && ext_forked(self->h.client->pid)) return NULL;
    observer_free(self);
    Py_RETURN_NONE;
}

/* The next event: (type, reason, key, value, token, lease), or None. */
static PyObject *Observer_pop(ObserverObject *self, PyObject *unused)
{
    (void)unused;
    if (!self->h.client) Py_RETURN_NONE;
    if (ext_forked(self->h.client->pid)) return NULL;
    hstate *st = self->h.st;
    pthread_mutex_lock(&st->mu);
    qev *e = st->head;
    if (e) {
        st->head = e->next;
        if (!e->next) st->tail = NULL;
    }
    pthread_mutex_unlock(&st->mu);
    if (!e) Py_RETURN_NONE;
    PyObject *r =
        Py_BuildValue("(iiy#y#LL)", e->type, e->reason, (const char *)e->key,
                      (Py_ssize_t)e->key_len, (const char *)e->value,
                      (Py_ssize_t)e->value_len, (long long)e->token, (long long)e->lease);
    free(e->key);
    free(e->value);
    free(e);
    return r;
}

static PyMethodDef Observer_methods[] = {
    {"close", (PyCFunction)Observer_close, METH_NOARGS, "Stops observing."},
    {"pop", (PyCFunction)Observer_pop, METH_NOARGS, "The next event or None."},
    {"add_waiter", (PyCFunction)Handle_add_waiter, METH_NOARGS, "A waiter eventfd."},
    {"remove_waiter", (PyCFunction)Handle_remove_waiter, METH_O, "Closes a waiter."},
    {NULL, NULL, 0, NULL}};

PyTypeObject ObserverType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "elector._elector.Observer",
    .tp_basicsize = sizeof(ObserverObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Follows the leader of an election.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Observer_init,
    .tp_dealloc = (destructor)Observer_dealloc,
    .tp_methods = Observer_methods,
};
