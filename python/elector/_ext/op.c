/* SPDX-License-Identifier: MIT */
/* The answers of asynchronous calls (ext.h, struct pending): a guarded write's
 * or a session's revoke (Op), a leader read (LeaderOp), a key operation
 * (KvOp). Their callbacks run on the client's callback thread (own_thread) or
 * inside Client.process(); each copies the answer, marks the op done and
 * writes its eventfd. The three types share the object and its fd and detail. */
#include "ext.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

static void pending_unref(pending *p)
{
    if (atomic_fetch_sub(&p->refs, 1) != 1) return;
    close(p->fd);
    elector_leader_free(&p->info);
    elector_kvs_free(p->kvs, p->n);
    free(p);
}

/* Whether the client's error text is this failure's: on the callback thread
 * (own_thread) it is, in the callback of a call that failed; on the caller's
 * loop, when the client's last error is this one. */
static bool failure_text(elector_etcd *etcd, int rc)
{
    if (rc >= 0 || !etcd) return false;
    if (elector_etcd_in_callback(etcd)) return true;
    return rc != ELECTOR_ENOTLEADER && elector_etcd_err(etcd) == rc;
}

/* The callback's end: the code, the failure's text ("endpoint H:P: connect:
 * ..."), the fd. */
static void pending_finish(pending *p, int rc)
{
    p->rc = rc;
    if (failure_text(p->etcd, rc))
        snprintf(p->detail, sizeof(p->detail), "%s", elector_etcd_errstr(p->etcd));
    atomic_store(&p->done, 1);
    uint64_t one = 1;
    ssize_t r = write(p->fd, &one, sizeof(one));
    (void)r;
    pending_unref(p);
}

void op_write_cb(elector_election *el, int rc, void *ud)
{
    (void)el;
    pending_finish(ud, rc);
}

void op_closed_cb(int rc, void *ud)
{
    pending_finish(ud, rc);
}

void op_revoke_cb(elector_etcd *d, int rc, void *ud)
{
    (void)d;
    pending_finish(ud, rc);
}

static uint8_t *copy_bytes(const uint8_t *b, size_t len)
{
    uint8_t *c = malloc(len ? len : 1);
    if (c && len) memcpy(c, b, len);
    return c;
}

void op_leader_cb(elector_etcd *d, int rc, const elector_leader_info *info, void *ud)
{
    (void)d;
    pending *p = ud;
    if ((rc == 0 || rc == ELECTOR_EBLOCKED) && info) {
        p->info = *info; /* scalars; the bytes are copied below */
        p->info.key = copy_bytes(info->key, info->key_len);
        p->info.value = copy_bytes(info->value, info->value_len);
        if (!p->info.key || !p->info.value) {
            elector_leader_free(&p->info);
            memset(&p->info, 0, sizeof(p->info));
            rc = ELECTOR_ENOMEM;
        }
    }
    pending_finish(p, rc);
}

void op_kv_cb(elector_etcd *d, int rc, const elector_kv *kvs, size_t n, int64_t deleted,
              void *ud)
{
    (void)d;
    pending *p = ud;
    p->deleted = deleted;
    if (rc == 0 && n) {
        p->kvs = calloc(n, sizeof(*p->kvs));
        for (size_t i = 0; p->kvs && i < n; i++) {
            elector_kv *o = &p->kvs[i];
            *o = kvs[i];
            o->key = copy_bytes(kvs[i].key, kvs[i].key_len);
            o->value = copy_bytes(kvs[i].value, kvs[i].value_len);
            if (!o->key || !o->value) {
                elector_kvs_free(p->kvs, i + 1);
                p->kvs = NULL;
            }
        }
        if (p->kvs)
            p->n = n;
        else
            rc = ELECTOR_ENOMEM;
    }
    pending_finish(p, rc);
}

PyObject *leader_value(int rc, const elector_leader_info *info)
{
    if (rc == 1) Py_RETURN_NONE;
    if (rc == ELECTOR_EBLOCKED) /* (code, the key without a lease) */
        return Py_BuildValue("(iy#)", rc, (const char *)info->key,
                             (Py_ssize_t)info->key_len);
    if (rc < 0) return PyLong_FromLong(rc);
    return Py_BuildValue("(y#y#LL)", (const char *)info->key, (Py_ssize_t)info->key_len,
                         (const char *)info->value, (Py_ssize_t)info->value_len,
                         (long long)info->token, (long long)info->lease);
}

PyObject *kvs_value(const elector_kv *kvs, size_t n)
{
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        const elector_kv *kv = &kvs[i];
        PyObject *t =
            Py_BuildValue("(y#y#LLL)", (const char *)kv->key, (Py_ssize_t)kv->key_len,
                          (const char *)kv->value, (Py_ssize_t)kv->value_len,
                          (long long)kv->create_revision, (long long)kv->mod_revision,
                          (long long)kv->lease);
        if (!t) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

/* ------------------------------------------------------------ the objects */

OpObject *op_new(int kind, elector_etcd *etcd)
{
    PyTypeObject *type = kind == OP_WRITE    ? &OpType
                         : kind == OP_LEADER ? &LeaderOpType
                                             : &KvOpType;
    pending *p = calloc(1, sizeof(*p));
    if (!p) return (OpObject *)PyErr_NoMemory();
    p->kind = kind;
    p->etcd = etcd;
    p->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (p->fd < 0) {
        free(p);
        return (OpObject *)PyErr_SetFromErrno(PyExc_OSError);
    }
    atomic_init(&p->refs, 2);
    OpObject *op = PyObject_New(OpObject, type);
    if (!op) {
        close(p->fd);
        free(p);
        return NULL;
    }
    op->p = p;
    op->pid = getpid();
    return op;
}

PyObject *op_started(OpObject *op, bool sent, int rc)
{
    if (sent) return (PyObject *)op;
    atomic_fetch_sub(&op->p->refs, 1); /* no callback will come */
    Py_DECREF(op);
    return PyLong_FromLong(rc);
}

static void Op_dealloc(OpObject *self)
{
    if (self->p && getpid() == self->pid) pending_unref(self->p);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Op_fd(OpObject *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromLong(self->p->fd);
}

/* The failure's detail text once answered (the endpoint and the cause), or "". */
static PyObject *Op_detail(OpObject *self, PyObject *unused)
{
    (void)unused;
    const char *s = atomic_load(&self->p->done) ? self->p->detail : "";
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "backslashreplace");
}

/* An Op: None while pending, else the code. A LeaderOp or a KvOp: Ellipsis
 * while pending (a leader read's None says that nobody leads), else what
 * Client.leader_start's or the key operation's answer is. */
static PyObject *Op_result(OpObject *self, PyObject *unused)
{
    (void)unused;
    if (ext_forked(self->pid)) return NULL;
    pending *p = self->p;
    if (!atomic_load(&p->done)) {
        if (p->kind == OP_WRITE) Py_RETURN_NONE;
        Py_INCREF(Py_Ellipsis);
        return Py_Ellipsis;
    }
    switch (p->kind) {
    case OP_LEADER:
        return leader_value(p->rc, &p->info);
    case OP_KV_GET:
        return p->rc < 0 ? PyLong_FromLong(p->rc) : kvs_value(p->kvs, p->n);
    case OP_KV_DELETE:
        return PyLong_FromLongLong(p->rc < 0 ? p->rc : (long long)p->deleted);
    default:
        return PyLong_FromLong(p->rc);
    }
}

static PyMethodDef Op_methods[] = {
    {"fd", (PyCFunction)Op_fd, METH_NOARGS, "Readable once answered."},
    {"detail", (PyCFunction)Op_detail, METH_NOARGS,
     "The failure's detail text once answered (the endpoint and the cause), or ''."},
    {"result", (PyCFunction)Op_result, METH_NOARGS,
     "None (Op) or Ellipsis (LeaderOp, KvOp) while pending; else the answer."},
    {NULL, NULL, 0, NULL}};

/* The three types differ only in their name and what result() gives. */
/* clang-format off */
#define OP_TYPE(NAME, DOC)                                                              \
    {                                                                                   \
        PyVarObject_HEAD_INIT(NULL, 0)                                                  \
        .tp_name = "elector._elector." NAME,                                            \
        .tp_basicsize = sizeof(OpObject),                                               \
        .tp_flags = Py_TPFLAGS_DEFAULT,                                                 \
        .tp_doc = DOC,                                                                  \
        .tp_dealloc = (destructor)Op_dealloc,                                           \
        .tp_methods = Op_methods,                                                       \
    }
/* clang-format on */

PyTypeObject OpType = OP_TYPE("Op", "A guarded write or a session's revoke in flight.");
PyTypeObject LeaderOpType = OP_TYPE("LeaderOp", "A leader read in flight.");
PyTypeObject KvOpType = OP_TYPE("KvOp", "A key operation in flight.");
