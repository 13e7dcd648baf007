/* SPDX-License-Identifier: MIT */
/* Client: one libelector client (elector_etcd), driven by its own thread
 * (own_thread=True: the sync API) or by the caller's loop (False: elector.aio,
 * which watches fd() and calls process()). Its hub state is woken on every
 * event of its handles (the sync API's on_lost dispatcher waits on it). */
#include "ext.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A strdup of a str option (file system encoding), NULL for None; *err on failure. */
static char *dup_opt(PyObject *o, const char *what, int *err)
{
    if (o == NULL || o == Py_None) return NULL;
    PyObject *b = NULL;
    if (PyUnicode_Check(o))
        b = PyUnicode_EncodeFSDefault(o);
    else if (PyBytes_Check(o)) {
        b = o;
        Py_INCREF(b);
    } else {
        PyErr_Format(PyExc_TypeError, "%s must be str or None", what);
        *err = 1;
        return NULL;
    }
    if (!b) {
        *err = 1;
        return NULL;
    }
    char *s = strdup(PyBytes_AS_STRING(b));
    Py_DECREF(b);
    if (!s) {
        PyErr_NoMemory();
        *err = 1;
    }
    return s;
}

/* The client of cfg, with the GIL released when it starts its threads; -1
 * with OSError((code, detail)) (rewrapped by the package) when it fails. */
static int client_open(ClientObject *self, const elector_etcd_config *cfg)
{
    self->own_thread = cfg->own_thread;
    elector_etcd *etcd = NULL;
    CLIENT_CALL(self, etcd = elector_etcd_new(cfg));
    if (!etcd) {
        PyErr_NoMemory();
        return -1;
    }
    int rc = elector_etcd_err(etcd);
    if (rc) {
        const char *detail = elector_etcd_errstr(etcd);
        PyObject *v = Py_BuildValue("(is)", rc, *detail ? detail : elector_strerror(rc));
        if (v) {
            PyErr_SetObject(PyExc_OSError, v);
            Py_DECREF(v);
        }
        CLIENT_CALL(self, elector_etcd_free(etcd));
        return -1;
    }
    self->hub = hstate_new(NULL);
    if (!self->hub) {
        CLIENT_CALL(self, elector_etcd_free(etcd));
        PyErr_NoMemory();
        return -1;
    }
    self->etcd = etcd;
    self->pid = getpid();
    return 0;
}

static int Client_init(ClientObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {
        "endpoints",  "user", "password",        "cacert",
        "cert",       "key",  "dial_timeout_ms", "request_timeout_ms",
        "own_thread", NULL};
    PyObject *o[6] = {NULL, Py_None, Py_None, Py_None, Py_None, Py_None};
    long long dial = 0, req = 0;
    int own = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOOOOLLp", kwlist, &o[0], &o[1], &o[2],
                                     &o[3], &o[4], &o[5], &dial, &req, &own))
        return -1;
    if (self->etcd) {
        PyErr_SetString(PyExc_RuntimeError, "already initialized");
        return -1;
    }
    static const char *what[6] = {"endpoints", "user", "password",
                                  "cacert",    "cert", "key"};
    char *s[6];
    int err = 0;
    for (int i = 0; i < 6; i++)
        s[i] = dup_opt(o[i], what[i], &err);
    if (!err) {
        elector_etcd_config cfg;
        elector_etcd_config_init(&cfg);
        cfg.endpoints = s[0];
        cfg.user = s[1];
        cfg.password = s[2];
        cfg.cacert = s[3];
        cfg.cert = s[4];
        cfg.key = s[5];
        if (dial > 0) cfg.dial_timeout_ms = dial;
        if (req > 0) cfg.request_timeout_ms = req;
        cfg.own_thread = own != 0;
        err = client_open(self, &cfg);
    }
    if (s[2]) explicit_bzero(s[2], strlen(s[2]));
    for (int i = 0; i < 6; i++)
        free(s[i]);
    return err ? -1 : 0;
}

/* Frees the client: its handles with it (elections resign, sessions revoke).
 * In a forked child a client with its own thread is only forgotten (the
 * library's rule); one of the caller's loop is not touched. */
static void client_close(ClientObject *self)
{
    if (self->closed || !self->etcd) return;
    self->closed = true;
    if (getpid() != self->pid && !self->own_thread) return;
    elector_etcd *etcd = self->etcd;
    CLIENT_CALL(self, elector_etcd_free(etcd));
}

static void Client_dealloc(ClientObject *self)
{
    client_close(self);
    if (self->hub && getpid() == self->pid) hstate_free(self->hub);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* 0 when the client is usable; else -1 with ForkError or ValueError. */
static int client_check(ClientObject *self)
{
    if (ext_forked(self->pid)) return -1;
    if (self->closed || !self->etcd) {
        PyErr_SetString(PyExc_ValueError, "client is closed");
        return -1;
    }
    return 0;
}

static PyObject *Client_close(ClientObject *self, PyObject *unused)
{
    (void)unused;
    client_close(self);
    Py_RETURN_NONE;
}

static PyObject *Client_add_waiter(ClientObject *self, PyObject *unused)
{
    (void)unused;
    if (client_check(self)) return NULL;
    return hstate_add_waiter(self->hub);
}

static PyObject *Client_remove_waiter(ClientObject *self, PyObject *fd)
{
    if (ext_forked(self->pid)) return NULL;
    return hstate_remove_waiter(self->hub, fd);
}

static PyObject *Client_fd(ClientObject *self, PyObject *unused)
{
    (void)unused;
    if (client_check(self)) return NULL;
    return PyLong_FromLong(elector_etcd_fd(self->etcd));
}

/* Runs what is due, then arms the fd's timer: the next due time in ms (-1). */
static PyObject *Client_process(ClientObject *self, PyObject *unused)
{
    (void)unused;
    if (client_check(self)) return NULL;
    elector_etcd_process(self->etcd);
    return PyLong_FromLongLong(elector_etcd_timeout(self->etcd));
}

static PyObject *Client_revokes(ClientObject *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromLong(atomic_load(&self->revokes));
}

static PyObject *Client_stalls(ClientObject *self, PyObject *unused)
{
    (void)unused;
    if (client_check(self)) return NULL;
    return PyLong_FromUnsignedLongLong(elector_etcd_stalls(self->etcd));
}

/* leader_start(name, timeout_ms) -> LeaderOp, or an error code (nothing sent). */
static PyObject *Client_leader_start(ClientObject *self, PyObject *args)
{
    const char *name;
    long long ms;
    if (!PyArg_ParseTuple(args, "sL", &name, &ms) || client_check(self)) return NULL;
    OpObject *op = op_new(OP_LEADER, self->etcd);
    if (!op) return NULL;
    int rc;
    CLIENT_CALL(self, rc = elector_leader(self->etcd, name, ms, op_leader_cb, op->p));
    return op_started(op, rc == 0, rc);
}

/* revoke_start(lease, timeout_ms) -> Op (its result: 0 once etcd no longer has
 * the lease), or an error code (nothing sent): a closed session's revoke made
 * again after it failed on the way. */
static PyObject *Client_revoke_start(ClientObject *self, PyObject *args)
{
    long long lease, ms;
    if (!PyArg_ParseTuple(args, "LL", &lease, &ms) || client_check(self)) return NULL;
    OpObject *op = op_new(OP_WRITE, self->etcd);
    if (!op) return NULL;
    int rc;
    CLIENT_CALL(self,
                rc = elector_lease_revoke(self->etcd, lease, ms, op_revoke_cb, op->p));
    return op_started(op, rc == 0, rc);
}

/* ------------------------------------------------------------ key operations */

/* Plain key operations (the tooz backend's groups), each ended by its own
 * deadline (timeout_ms <= 0: the request timeout): blocking (put, get,
 * delete), or answered to a KvOp (the _start forms). */
typedef struct {
    Py_buffer key, value;
    long long lease, ms;
    int flag; /* put: if_absent; get, delete: prefix */
} kv_args;

static int kv_parse(PyObject *args, bool put, kv_args *a)
{
    memset(a, 0, sizeof(*a));
    if (put)
        return PyArg_ParseTuple(args, "y*y*LpL", &a->key, &a->value, &a->lease, &a->flag,
                                &a->ms)
                   ? 0
                   : -1;
    return PyArg_ParseTuple(args, "y*pL", &a->key, &a->flag, &a->ms) ? 0 : -1;
}

static void kv_release(kv_args *a)
{
    PyBuffer_Release(&a->key);
    if (a->value.obj) PyBuffer_Release(&a->value);
}

static int put_send(ClientObject *c, kv_args *a, pending *p)
{
    int rc, flags = a->flag ? ELECTOR_KV_PUT_IF_ABSENT : 0;
    size_t kl = (size_t)a->key.len, vl = (size_t)a->value.len;
    if (p)
        CLIENT_CALL(c, rc = elector_kv_put(c->etcd, a->key.buf, kl, a->value.buf, vl,
                                           a->lease, flags, a->ms, op_kv_cb, p));
    else
        CLIENT_CALL(c, rc = elector_kv_put_sync(c->etcd, a->key.buf, kl, a->value.buf, vl,
                                                a->lease, flags, a->ms));
    return rc;
}

/* put(key, value, lease, if_absent, timeout_ms) -> 0 (written), 1 (if_absent
 * and the key exists), or an error code. */
static PyObject *Client_put(ClientObject *self, PyObject *args)
{
    kv_args a;
    if (kv_parse(args, true, &a)) return NULL;
    PyObject *r = client_check(self) ? NULL : PyLong_FromLong(put_send(self, &a, NULL));
    kv_release(&a);
    return r;
}

static PyObject *Client_get(ClientObject *self, PyObject *args)
{
    kv_args a;
    if (kv_parse(args, false, &a)) return NULL;
    PyObject *r = NULL;
    if (!client_check(self)) {
        elector_kv *kvs = NULL;
        size_t n = 0;
        int rc;
        CLIENT_CALL(self,
                    rc = elector_kv_get_sync(self->etcd, a.key.buf, (size_t)a.key.len,
                                             a.flag, a.ms, &kvs, &n));
        r = rc < 0 ? PyLong_FromLong(rc) : kvs_value(kvs, n);
        elector_kvs_free(kvs, n);
    }
    kv_release(&a);
    return r;
}

static PyObject *Client_delete(ClientObject *self, PyObject *args)
{
    kv_args a;
    if (kv_parse(args, false, &a)) return NULL;
    PyObject *r = NULL;
    if (!client_check(self)) {
        int64_t deleted = 0;
        int rc;
        CLIENT_CALL(self,
                    rc = elector_kv_delete_sync(self->etcd, a.key.buf, (size_t)a.key.len,
                                                a.flag, a.ms, &deleted));
        r = PyLong_FromLongLong(rc < 0 ? rc : (long long)deleted);
    }
    kv_release(&a);
    return r;
}

/* put_start/get_start/delete_start(...) as put/get/delete -> KvOp, or an
 * error code (nothing sent). */
static PyObject *kv_start(ClientObject *self, PyObject *args, int kind)
{
    kv_args a;
    if (kv_parse(args, kind == OP_KV_PUT, &a)) return NULL;
    PyObject *r = NULL;
    OpObject *op = client_check(self) ? NULL : op_new(kind, self->etcd);
    if (op) {
        const void *k = a.key.buf;
        size_t kl = (size_t)a.key.len;
        int rc;
        if (kind == OP_KV_PUT)
            rc = put_send(self, &a, op->p);
        else if (kind == OP_KV_GET)
            CLIENT_CALL(self, rc = elector_kv_get(self->etcd, k, kl, a.flag, a.ms,
                                                  op_kv_cb, op->p));
        else
            CLIENT_CALL(self, rc = elector_kv_delete(self->etcd, k, kl, a.flag, a.ms,
                                                     op_kv_cb, op->p));
        r = op_started(op, rc == 0, rc);
    }
    kv_release(&a);
    return r;
}

static PyObject *Client_put_start(ClientObject *self, PyObject *args)
{
    return kv_start(self, args, OP_KV_PUT);
}

static PyObject *Client_get_start(ClientObject *self, PyObject *args)
{
    return kv_start(self, args, OP_KV_GET);
}

static PyObject *Client_delete_start(ClientObject *self, PyObject *args)
{
    return kv_start(self, args, OP_KV_DELETE);
}

static PyMethodDef Client_methods[] = {
    {"close", (PyCFunction)Client_close, METH_NOARGS,
     "Frees the client and its handles (elections resign, sessions revoke)."},
    {"add_waiter", (PyCFunction)Client_add_waiter, METH_NOARGS,
     "An eventfd woken on every event of this client's handles."},
    {"remove_waiter", (PyCFunction)Client_remove_waiter, METH_O, "Closes a waiter fd."},
    {"fd", (PyCFunction)Client_fd, METH_NOARGS,
     "The caller's loop: the fd to watch for reading (-1 with own_thread)."},
    {"process", (PyCFunction)Client_process, METH_NOARGS,
     "The caller's loop: runs what is due; returns ms until the next due time (-1: "
     "none)."},
    {"revokes", (PyCFunction)Client_revokes, METH_NOARGS,
     "Revokes of closed sessions still waiting for etcd's answer."},
    {"stalls", (PyCFunction)Client_stalls, METH_NOARGS,
     "own_thread: callbacks that ran too long."},
    {"revoke_start", (PyCFunction)Client_revoke_start, METH_VARARGS,
     "revoke_start(lease, timeout_ms) -> Op (wait on its fd; 0: the lease is gone), or "
     "an error code."},
    {"leader_start", (PyCFunction)Client_leader_start, METH_VARARGS,
     "leader_start(name, timeout_ms) -> LeaderOp (wait on its fd), or an error code."},
    {"put", (PyCFunction)Client_put, METH_VARARGS,
     "put(key, value, lease, if_absent, timeout_ms) -> 0 (written), 1 (if_absent and "
     "the key exists), or an error code. lease 0: none."},
    {"get", (PyCFunction)Client_get, METH_VARARGS,
     "get(key, prefix, timeout_ms) -> [(key, value, create_revision, mod_revision, "
     "lease)] in key order, or an error code."},
    {"delete", (PyCFunction)Client_delete, METH_VARARGS,
     "delete(key, prefix, timeout_ms) -> how many keys were deleted (>= 0), or an "
     "error code (< 0)."},
    {"put_start", (PyCFunction)Client_put_start, METH_VARARGS,
     "put_start(...) as put() -> KvOp (wait on its fd), or an error code."},
    {"get_start", (PyCFunction)Client_get_start, METH_VARARGS,
     "get_start(...) as get() -> KvOp (wait on its fd), or an error code."},
    {"delete_start", (PyCFunction)Client_delete_start, METH_VARARGS,
     "delete_start(...) as delete() -> KvOp (wait on its fd), or an error code."},
    {NULL, NULL, 0, NULL}};

PyTypeObject ClientType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "elector._elector.Client",
    .tp_basicsize = sizeof(ClientObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "libelector's etcd client, driven by its own thread or by the caller's "
              "loop.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Client_init,
    .tp_dealloc = (destructor)Client_dealloc,
    .tp_methods = Client_methods,
};
