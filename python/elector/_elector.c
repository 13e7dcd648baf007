/* SPDX-License-Identifier: MIT */
/* elector._elector — the CPython extension under the `elector` package.
 *
 * A thin layer over libelector's clients with own_thread (include/elector/etcd.h,
 * "the driver"): the client's loop thread keeps the leases alive without ever
 * taking the GIL; its callback thread runs the C callbacks below, which only record the
 * event in a C structure (under a pthread mutex, never the GIL) and wake the eventfds
 * that Python registered ("waiters"). Python waits on those fds with the select module
 * (so gevent and eventlet make the wait cooperative, and Ctrl-C interrupts it) and then
 * reads the recorded state. Every call into the driver runs with the GIL released.
 *
 * fork(): each object remembers the creating process; in a child every method
 * raises the registered fork error before touching a mutex (the driver's threads
 * may have held one at the fork), and deallocation forgets the handles (sends
 * nothing, frees nothing the parent owns).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "elector/election.h"
#include "elector/error.h"

static PyObject *fork_error; /* set by elector/__init__.py */

/* ------------------------------------------------------------ waiters */

/* What a handle's callbacks record, and the eventfds they wake. */
typedef struct qev {
    struct qev *next;
    int type;
    int reason;
    int64_t token, lease;
    size_t key_len, value_len;
    uint8_t *key, *value;
} qev;

typedef struct hstate {
    pthread_mutex_t mu;
    int *fds;
    size_t nfds, cap;
    struct hstate *hub; /* the driver's: woken on every event */
    /* sessions and elections */
    int phase; /* election: 0 idle, 1 campaigning, 2 leading, 3 lost, 4 failed,
                  5 resigned; session: 3 lost */
    int reason;
    char detail[256];
    int64_t token, lease;
    uint64_t events;
    /* observers */
    qev *head, *tail;
} hstate;

static hstate *hstate_new(hstate *hub)
{
    hstate *h = calloc(1, sizeof(*h));
    if (!h) return NULL;
    pthread_mutex_init(&h->mu, NULL);
    h->hub = hub;
    return h;
}

static void hstate_free(hstate *h)
{
    if (!h) return;
    for (size_t i = 0; i < h->nfds; i++)
        close(h->fds[i]);
    free(h->fds);
    for (qev *e = h->head, *n; e; e = n) {
        n = e->next;
        free(e->key);
        free(e->value);
        free(e);
    }
    pthread_mutex_destroy(&h->mu);
    free(h);
}

static void wake_locked(hstate *h)
{
    uint64_t one = 1;
    for (size_t i = 0; i < h->nfds; i++) {
        ssize_t r = write(h->fds[i], &one, sizeof(one));
        (void)r; /* EAGAIN: the counter is already non-zero */
    }
}

/* Called with h->mu held, after recording: wakes h's waiters and the hub's. */
static void wake(hstate *h)
{
    h->events++;
    wake_locked(h);
    if (h->hub && h->hub != h) {
        pthread_mutex_lock(&h->hub->mu);
        h->hub->events++;
        wake_locked(h->hub);
        pthread_mutex_unlock(&h->hub->mu);
    }
}

static PyObject *add_waiter(hstate *h)
{
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) return PyErr_SetFromErrno(PyExc_OSError);
    pthread_mutex_lock(&h->mu);
    if (h->nfds == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 4;
        int *n = realloc(h->fds, cap * sizeof(*n));
        if (!n) {
            pthread_mutex_unlock(&h->mu);
            close(fd);
            return PyErr_NoMemory();
        }
        h->fds = n;
        h->cap = cap;
    }
    h->fds[h->nfds++] = fd;
    pthread_mutex_unlock(&h->mu);
    return PyLong_FromLong(fd);
}

static PyObject *remove_waiter(hstate *h, PyObject *arg)
{
    long fd = PyLong_AsLong(arg);
    if (fd == -1 && PyErr_Occurred()) return NULL;
    bool found = false;
    pthread_mutex_lock(&h->mu);
    for (size_t i = 0; i < h->nfds; i++) {
        if (h->fds[i] == (int)fd) {
            h->fds[i] = h->fds[--h->nfds];
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&h->mu);
    if (!found) {
        PyErr_SetString(PyExc_ValueError, "not a waiter of this handle");
        return NULL;
    }
    close((int)fd);
    Py_RETURN_NONE;
}

static int forked_check(pid_t pid)
{
    if (getpid() == pid) return 0;
    PyErr_SetString(fork_error ? fork_error : PyExc_RuntimeError,
                    "elector object used in a forked child: the parent's sessions and "
                    "leases belong to the parent; create a new Client in the child");
    return -1;
}

/* ------------------------------------------------------------ Driver */

typedef struct {
    PyObject_HEAD elector_etcd *d;
    hstate *hub;
    pid_t pid;
    bool closed;
} DriverObject;

static PyTypeObject DriverType;

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

static int Driver_init(DriverObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"endpoints", "user", "password",        "cacert",
                             "cert",      "key",  "dial_timeout_ms", "request_timeout_ms",
                             NULL};
    PyObject *ep, *user = Py_None, *pw = Py_None, *ca = Py_None, *cert = Py_None,
                  *key = Py_None;
    long long dial = 0, req = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOOOOLL", kwlist, &ep, &user, &pw, &ca,
                                     &cert, &key, &dial, &req))
        return -1;
    if (self->d) {
        PyErr_SetString(PyExc_RuntimeError, "already initialized");
        return -1;
    }
    int err = 0;
    char *s_ep = dup_opt(ep, "endpoints", &err);
    char *s_user = dup_opt(user, "user", &err);
    char *s_pw = dup_opt(pw, "password", &err);
    char *s_ca = dup_opt(ca, "cacert", &err);
    char *s_cert = dup_opt(cert, "cert", &err);
    char *s_key = dup_opt(key, "key", &err);
    int rc = 0;
    if (!err) {
        elector_etcd_config cfg;
        elector_etcd_config_init(&cfg);
        cfg.endpoints = s_ep;
        cfg.user = s_user;
        cfg.password = s_pw;
        cfg.cacert = s_ca;
        cfg.cert = s_cert;
        cfg.key = s_key;
        if (dial > 0) cfg.dial_timeout_ms = dial;
        if (req > 0) cfg.request_timeout_ms = req;
        cfg.own_thread = true;
        elector_etcd *d = NULL;
        Py_BEGIN_ALLOW_THREADS d = elector_etcd_new(&cfg);
        rc = d ? elector_etcd_err(d) : ELECTOR_ENOMEM;
        if (rc) {
            elector_etcd_free(d);
            d = NULL;
        }
        Py_END_ALLOW_THREADS if (rc == 0)
        {
            self->d = d;
            self->pid = getpid();
            self->hub = hstate_new(NULL);
            if (!self->hub) {
                PyErr_NoMemory();
                err = 1;
            }
        }
    }
    if (s_pw) explicit_bzero(s_pw, strlen(s_pw));
    free(s_ep);
    free(s_user);
    free(s_pw);
    free(s_ca);
    free(s_cert);
    free(s_key);
    if (err) return -1;
    if (rc) {
        PyObject *v = Py_BuildValue("(is)", rc, elector_strerror(rc));
        if (v) {
            PyErr_SetObject(PyExc_OSError, v); /* rewrapped by the package */
            Py_DECREF(v);
        }
        return -1;
    }
    return 0;
}

static void driver_close(DriverObject *self)
{
    if (self->closed || !self->d) return;
    self->closed = true;
    elector_etcd *d = self->d;
    if (getpid() != self->pid) {
        elector_etcd_free(d); /* in a child: only forgets it */
        return;
    }
    Py_BEGIN_ALLOW_THREADS elector_etcd_free(d);
    Py_END_ALLOW_THREADS
}

static void Driver_dealloc(DriverObject *self)
{
    driver_close(self);
    if (self->hub && getpid() == self->pid) hstate_free(self->hub);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#define DRV_CHECK(self)                                                                  \
    do {                                                                                 \
        if (forked_check((self)->pid)) return NULL;                                      \
        if ((self)->closed || !(self)->d) {                                              \
            PyErr_SetString(PyExc_ValueError, "client is closed");                       \
            return NULL;                                                                 \
        }                                                                                \
    } while (0)

static PyObject *Driver_close(DriverObject *self, PyObject *unused)
{
    (void)unused;
    driver_close(self); /* in a forked child: only forgets the parent's driver */
    Py_RETURN_NONE;
}

static PyObject *Driver_add_waiter(DriverObject *self, PyObject *unused)
{
    (void)unused;
    DRV_CHECK(self);
    return add_waiter(self->hub);
}

static PyObject *Driver_remove_waiter(DriverObject *self, PyObject *fd)
{
    if (forked_check(self->pid)) return NULL;
    return remove_waiter(self->hub, fd);
}

static PyObject *Driver_leader(DriverObject *self, PyObject *args)
{
    const char *name;
    long long timeout_ms;
    if (!PyArg_ParseTuple(args, "sL", &name, &timeout_ms)) return NULL;
    DRV_CHECK(self);
    elector_leader_info info;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = elector_leader_sync(self->d, name, timeout_ms, &info);
    Py_END_ALLOW_THREADS if (rc == 1) Py_RETURN_NONE;
    if (rc == ELECTOR_EBLOCKED) {
        PyObject *b =
            Py_BuildValue("(iy#)", rc, (const char *)info.key, (Py_ssize_t)info.key_len);
        elector_leader_free(&info);
        return b;
    }
    if (rc < 0) return PyLong_FromLong(rc);
    PyObject *r =
        Py_BuildValue("(y#y#LL)", (const char *)info.key, (Py_ssize_t)info.key_len,
                      (const char *)info.value, (Py_ssize_t)info.value_len,
                      (long long)info.token, (long long)info.lease);
    elector_leader_free(&info);
    return r;
}

/* A leader read in flight (Driver.leader_start): the driver's callback copies
 * the answer and writes the eventfd; Python waits on the fd with select. Shared
 * by the callback and the LeaderOp; the last of the two frees it. */
typedef struct lop {
    atomic_int refs;
    int fd;
    atomic_int done;
    int rc;
    elector_leader_info info;
    char detail[256]; /* elector_etcd_errstr() of a failure */
} lop;

static void lop_unref(lop *l)
{
    if (atomic_fetch_sub(&l->refs, 1) == 1) {
        close(l->fd);
        elector_leader_free(&l->info);
        free(l);
    }
}

static void leader_cb(elector_etcd *d, int rc, const elector_leader_info *info, void *ud)
{
    lop *l = ud;
    l->rc = rc;
    snprintf(l->detail, sizeof(l->detail), "%s", elector_etcd_errstr(d));
    if ((rc == 0 || rc == ELECTOR_EBLOCKED) && info) {
        l->info = *info; /* scalars; the bytes are copied below */
        l->info.key = malloc(info->key_len ? info->key_len : 1);
        l->info.value = malloc(info->value_len ? info->value_len : 1);
        if (!l->info.key || !l->info.value) {
            free(l->info.key);
            free(l->info.value);
            memset(&l->info, 0, sizeof(l->info));
            l->rc = ELECTOR_ENOMEM;
        } else {
            if (info->key_len) memcpy(l->info.key, info->key, info->key_len);
            if (info->value_len) memcpy(l->info.value, info->value, info->value_len);
        }
    }
    atomic_store(&l->done, 1);
    uint64_t one = 1;
    ssize_t r = write(l->fd, &one, sizeof(one));
    (void)r;
    lop_unref(l);
}

typedef struct {
    PyObject_HEAD lop *l;
    pid_t pid;
} LeaderOpObject;

static void LeaderOp_dealloc(LeaderOpObject *self)
{
    if (self->l && getpid() == self->pid) lop_unref(self->l);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *LeaderOp_fd(LeaderOpObject *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromLong(self->l->fd);
}

/* ... -> Ellipsis while pending; else as Driver.leader: None, a code, a tuple. */
static PyObject *LeaderOp_result(LeaderOpObject *self, PyObject *unused)
{
    (void)unused;
    if (forked_check(self->pid)) return NULL;
    lop *l = self->l;
    if (!atomic_load(&l->done)) {
        Py_INCREF(Py_Ellipsis);
        return Py_Ellipsis;
    }
    if (l->rc == 1) Py_RETURN_NONE;
    if (l->rc == ELECTOR_EBLOCKED) /* (code, the key without a lease) */
        return Py_BuildValue("(iy#)", l->rc, (const char *)l->info.key,
                             (Py_ssize_t)l->info.key_len);
    if (l->rc < 0) return PyLong_FromLong(l->rc);
    return Py_BuildValue("(y#y#LL)", (const char *)l->info.key,
                         (Py_ssize_t)l->info.key_len, (const char *)l->info.value,
                         (Py_ssize_t)l->info.value_len, (long long)l->info.token,
                         (long long)l->info.lease);
}

/* The failure's detail text once answered ("endpoint H:P: connect: ..."), or "". */
static PyObject *LeaderOp_detail(LeaderOpObject *self, PyObject *unused)
{
    (void)unused;
    lop *l = self->l;
    const char *s = atomic_load(&l->done) ? l->detail : "";
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "backslashreplace");
}

static PyMethodDef LeaderOp_methods[] = {
    {"fd", (PyCFunction)LeaderOp_fd, METH_NOARGS, "Readable once answered."},
    {"detail", (PyCFunction)LeaderOp_detail, METH_NOARGS,
     "The failure's detail text once answered (the endpoint and the cause), or ''."},
    {"result", (PyCFunction)LeaderOp_result, METH_NOARGS,
     "Ellipsis while pending; else None (nobody leads), an error code, "
     "(EBLOCKED, key) for a key without a lease, or (key, value, token, lease)."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject LeaderOpType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "elector._elector.LeaderOp",
    .tp_basicsize = sizeof(LeaderOpObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A leader read in flight.",
    .tp_dealloc = (destructor)LeaderOp_dealloc,
    .tp_methods = LeaderOp_methods,
};

/* leader_start(name, timeout_ms) -> LeaderOp, or an error code (nothing sent). */
static PyObject *Driver_revoke_start(DriverObject *self, PyObject *args);

static PyObject *Driver_leader_start(DriverObject *self, PyObject *args)
{
    const char *name;
    long long timeout_ms;
    if (!PyArg_ParseTuple(args, "sL", &name, &timeout_ms)) return NULL;
    DRV_CHECK(self);
    lop *l = calloc(1, sizeof(*l));
    if (!l) return PyErr_NoMemory();
    l->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->fd < 0) {
        free(l);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    atomic_init(&l->refs, 2);
    LeaderOpObject *op = PyObject_New(LeaderOpObject, &LeaderOpType);
    if (!op) {
        close(l->fd);
        free(l);
        return NULL;
    }
    op->l = l;
    op->pid = getpid();
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = elector_leader(self->d, name, timeout_ms, leader_cb, l);
    Py_END_ALLOW_THREADS if (rc)
    {
        atomic_fetch_sub(&l->refs, 1); /* no callback will come */
        Py_DECREF(op);
        return PyLong_FromLong(rc);
    }
    return (PyObject *)op;
}

/* Plain key operations (tooz's groups): blocking in C without the GIL, each
 * ended by its own deadline (timeout_ms; <= 0: the request timeout). */
static PyObject *Driver_put(DriverObject *self, PyObject *args)
{
    const char *key, *value;
    Py_ssize_t klen, vlen;
    long long lease, timeout_ms;
    int if_absent;
    if (!PyArg_ParseTuple(args, "y#y#LpL", &key, &klen, &value, &vlen, &lease, &if_absent,
                          &timeout_ms))
        return NULL;
    DRV_CHECK(self);
    int rc;
    Py_BEGIN_ALLOW_THREADS rc =
        elector_kv_put_sync(self->d, key, (size_t)klen, value, (size_t)vlen, lease,
                            if_absent ? ELECTOR_KV_PUT_IF_ABSENT : 0, timeout_ms);
    Py_END_ALLOW_THREADS return PyLong_FromLong(rc);
}

static PyObject *Driver_get(DriverObject *self, PyObject *args)
{
    const char *key;
    Py_ssize_t klen;
    int prefix;
    long long timeout_ms;
    if (!PyArg_ParseTuple(args, "y#pL", &key, &klen, &prefix, &timeout_ms)) return NULL;
    DRV_CHECK(self);
    elector_kv *kvs = NULL;
    size_t n = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc =
        elector_kv_get_sync(self->d, key, (size_t)klen, prefix, timeout_ms, &kvs, &n);
    Py_END_ALLOW_THREADS if (rc < 0) return PyLong_FromLong(rc);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *t =
            Py_BuildValue("(y#y#LLL)", (const char *)kvs[i].key,
                          (Py_ssize_t)kvs[i].key_len, (const char *)kvs[i].value,
                          (Py_ssize_t)kvs[i].value_len, (long long)kvs[i].create_revision,
                          (long long)kvs[i].mod_revision, (long long)kvs[i].lease);
        if (!t) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    elector_kvs_free(kvs, n);
    return list;
}

static PyObject *Driver_delete(DriverObject *self, PyObject *args)
{
    const char *key;
    Py_ssize_t klen;
    int prefix;
    long long timeout_ms;
    if (!PyArg_ParseTuple(args, "y#pL", &key, &klen, &prefix, &timeout_ms)) return NULL;
    DRV_CHECK(self);
    int64_t deleted = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc =
        elector_kv_delete_sync(self->d, key, (size_t)klen, prefix, timeout_ms, &deleted);
    Py_END_ALLOW_THREADS if (rc < 0) return PyLong_FromLong(rc);
    return PyLong_FromLongLong((long long)deleted);
}

/* A key operation in flight (Driver.put_start/get_start/delete_start): the
 * driver's callback copies the answer and writes the eventfd. Shared by the
 * callback and the KvOp; the last of the two frees it. */
enum { KOP_PUT, KOP_GET, KOP_DELETE };
typedef struct kop {
    atomic_int refs;
    int fd;
    atomic_int done;
    int kind;
    int rc;
    elector_kv *kvs;
    size_t n;
    int64_t deleted;
} kop;

static void kop_unref(kop *k)
{
    if (atomic_fetch_sub(&k->refs, 1) == 1) {
        close(k->fd);
        elector_kvs_free(k->kvs, k->n);
        free(k);
    }
}

static void kv_cb(elector_etcd *d, int rc, const elector_kv *kvs, size_t n,
                  int64_t deleted, void *ud)
{
    (void)d;
    kop *k = ud;
    k->rc = rc;
    k->deleted = deleted;
    if (rc == 0 && n) {
        k->kvs = calloc(n, sizeof(*k->kvs));
        for (size_t i = 0; k->kvs && i < n; i++) {
            elector_kv *o = &k->kvs[i];
            *o = kvs[i];
            o->key = malloc(kvs[i].key_len ? kvs[i].key_len : 1);
            o->value = malloc(kvs[i].value_len ? kvs[i].value_len : 1);
            if (!o->key || !o->value) {
                elector_kvs_free(k->kvs, i + 1);
                k->kvs = NULL;
                break;
            }
            if (kvs[i].key_len) memcpy(o->key, kvs[i].key, kvs[i].key_len);
            if (kvs[i].value_len) memcpy(o->value, kvs[i].value, kvs[i].value_len);
        }
        if (k->kvs)
            k->n = n;
        else
            k->rc = ELECTOR_ENOMEM;
    }
    atomic_store(&k->done, 1);
    uint64_t one = 1;
    ssize_t r = write(k->fd, &one, sizeof(one));
    (void)r;
    kop_unref(k);
}

typedef struct {
    PyObject_HEAD kop *k;
    pid_t pid;
} KvOpObject;

static void KvOp_dealloc(KvOpObject *self)
{
    if (self->k && getpid() == self->pid) kop_unref(self->k);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *KvOp_fd(KvOpObject *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromLong(self->k->fd);
}

/* Ellipsis while pending; else what Driver.put/get/delete return. */
static PyObject *KvOp_result(KvOpObject *self, PyObject *unused)
{
    (void)unused;
    if (forked_check(self->pid)) return NULL;
    kop *k = self->k;
    if (!atomic_load(&k->done)) {
        Py_INCREF(Py_Ellipsis);
        return Py_Ellipsis;
    }
    if (k->rc < 0 || k->kind == KOP_PUT) return PyLong_FromLong(k->rc);
    if (k->kind == KOP_DELETE) return PyLong_FromLongLong((long long)k->deleted);
    PyObject *list = PyList_New((Py_ssize_t)k->n);
    for (size_t i = 0; list && i < k->n; i++) {
        const elector_kv *kv = &k->kvs[i];
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

static PyMethodDef KvOp_methods[] = {
    {"fd", (PyCFunction)KvOp_fd, METH_NOARGS, "Readable once answered."},
    {"result", (PyCFunction)KvOp_result, METH_NOARGS,
     "Ellipsis while pending; else what Driver.put, get or delete returns."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject KvOpType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "elector._elector.KvOp",
    .tp_basicsize = sizeof(KvOpObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A key operation in flight.",
    .tp_dealloc = (destructor)KvOp_dealloc,
    .tp_methods = KvOp_methods,
};

static KvOpObject *kvop_new(int kind)
{
    kop *k = calloc(1, sizeof(*k));
    if (!k) return (KvOpObject *)PyErr_NoMemory();
    k->kind = kind;
    k->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (k->fd < 0) {
        free(k);
        return (KvOpObject *)PyErr_SetFromErrno(PyExc_OSError);
    }
    atomic_init(&k->refs, 2);
    KvOpObject *op = PyObject_New(KvOpObject, &KvOpType);
    if (!op) {
        close(k->fd);
        free(k);
        return NULL;
    }
    op->k = k;
    op->pid = getpid();
    return op;
}

/* The op, or the code when nothing was sent (the op is dropped). */
static PyObject *kvop_started(KvOpObject *op, int rc)
{
    if (!rc) return (PyObject *)op;
    atomic_fetch_sub(&op->k->refs, 1); /* no callback will come */
    Py_DECREF(op);
    return PyLong_FromLong(rc);
}

static PyObject *Driver_put_start(DriverObject *self, PyObject *args)
{
    const char *key, *value;
    Py_ssize_t klen, vlen;
    long long lease, timeout_ms;
    int if_absent;
    if (!PyArg_ParseTuple(args, "y#y#LpL", &key, &klen, &value, &vlen, &lease, &if_absent,
                          &timeout_ms))
        return NULL;
    DRV_CHECK(self);
    KvOpObject *op = kvop_new(KOP_PUT);
    if (!op) return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = elector_kv_put(
        self->d, key, (size_t)klen, value, (size_t)vlen, lease,
        if_absent ? ELECTOR_KV_PUT_IF_ABSENT : 0, timeout_ms, kv_cb, op->k);
    Py_END_ALLOW_THREADS return kvop_started(op, rc);
}

static PyObject *Driver_get_start(DriverObject *self, PyObject *args)
{
    const char *key;
    Py_ssize_t klen;
    int prefix;
    long long timeout_ms;
    if (!PyArg_ParseTuple(args, "y#pL", &key, &klen, &prefix, &timeout_ms)) return NULL;
    DRV_CHECK(self);
    KvOpObject *op = kvop_new(KOP_GET);
    if (!op) return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc =
        elector_kv_get(self->d, key, (size_t)klen, prefix, timeout_ms, kv_cb, op->k);
    Py_END_ALLOW_THREADS return kvop_started(op, rc);
}

static PyObject *Driver_delete_start(DriverObject *self, PyObject *args)
{
    const char *key;
    Py_ssize_t klen;
    int prefix;
    long long timeout_ms;
    if (!PyArg_ParseTuple(args, "y#pL", &key, &klen, &prefix, &timeout_ms)) return NULL;
    DRV_CHECK(self);
    KvOpObject *op = kvop_new(KOP_DELETE);
    if (!op) return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc =
        elector_kv_delete(self->d, key, (size_t)klen, prefix, timeout_ms, kv_cb, op->k);
    Py_END_ALLOW_THREADS return kvop_started(op, rc);
}

static PyObject *Driver_stalls(DriverObject *self, PyObject *unused)
{
    (void)unused;
    DRV_CHECK(self);
    return PyLong_FromUnsignedLongLong(elector_etcd_stalls(self->d));
}

static PyMethodDef Driver_methods[] = {
    {"close", (PyCFunction)Driver_close, METH_NOARGS, "Stops the driver, frees all."},
    {"add_waiter", (PyCFunction)Driver_add_waiter, METH_NOARGS,
     "An eventfd woken on every event of this driver's handles."},
    {"remove_waiter", (PyCFunction)Driver_remove_waiter, METH_O, "Closes a waiter fd."},
    {"leader", (PyCFunction)Driver_leader, METH_VARARGS,
     "leader(name, timeout_ms) -> (key, value, token, lease), None, or an error code."},
    {"leader_start", (PyCFunction)Driver_leader_start, METH_VARARGS,
     "leader_start(name, timeout_ms) -> LeaderOp (wait on its fd), or an error code."},
    {"revoke_start", (PyCFunction)Driver_revoke_start, METH_VARARGS,
     "revoke_start(lease, timeout_ms) -> Op (0 once etcd no longer has the lease), or "
     "an error code."},
    {"put", (PyCFunction)Driver_put, METH_VARARGS,
     "put(key, value, lease, if_absent, timeout_ms) -> 0 (written), 1 (if_absent and the "
     "key exists), or an error code. lease 0: none."},
    {"get", (PyCFunction)Driver_get, METH_VARARGS,
     "get(key, prefix, timeout_ms) -> [(key, value, create_revision, mod_revision, "
     "lease)] "
     "in key order, or an error code."},
    {"delete", (PyCFunction)Driver_delete, METH_VARARGS,
     "delete(key, prefix, timeout_ms) -> how many keys were deleted (>= 0), or an error "
     "code (< 0)."},
    {"put_start", (PyCFunction)Driver_put_start, METH_VARARGS,
     "put_start(...) as put() -> KvOp (wait on its fd), or an error code."},
    {"get_start", (PyCFunction)Driver_get_start, METH_VARARGS,
     "get_start(...) as get() -> KvOp (wait on its fd), or an error code."},
    {"delete_start", (PyCFunction)Driver_delete_start, METH_VARARGS,
     "delete_start(...) as delete() -> KvOp (wait on its fd), or an error code."},
    {"stalls", (PyCFunction)Driver_stalls, METH_NOARGS, "Callbacks that ran too long."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject DriverType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "elector._elector.Driver",
    .tp_basicsize = sizeof(DriverObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "libelector's threaded driver: one etcd client and its loop thread.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Driver_init,
    .tp_dealloc = (destructor)Driver_dealloc,
    .tp_methods = Driver_methods,
};

/* ------------------------------------------------------------ Session */

typedef struct {
    PyObject_HEAD DriverObject *drv;
    elector_session *s;
    hstate *st;
} SessionObject;

static void session_cb(elector_session *s, const elector_event *ev, void *ud)
{
    (void)s;
    hstate *h = ud;
    pthread_mutex_lock(&h->mu);
    h->phase = 3;
    h->reason = ev->reason;
    snprintf(h->detail, sizeof(h->detail), "%s", ev->detail ? ev->detail : "");
    wake(h);
    pthread_mutex_unlock(&h->mu);
}

static int Session_init(SessionObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"driver", "ttl", "release_on_exit", NULL};
    DriverObject *drv;
    long long ttl = 10;
    int roe = 0; /* release_on_exit: off unless asked, as in C */
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|Lp", kwlist, &DriverType, &drv, &ttl,
                                     &roe))
        return -1;
    if (forked_check(drv->pid)) return -1;
    if (drv->closed || self->s) {
        PyErr_SetString(PyExc_ValueError, "client is closed");
        return -1;
    }
    self->st = hstate_new(drv->hub);
    if (!self->st) {
        PyErr_NoMemory();
        return -1;
    }
    elector_session_config cfg;
    elector_session_config_init(&cfg);
    cfg.ttl_s = ttl;
    cfg.release_on_exit = roe != 0;
    elector_session *s;
    Py_BEGIN_ALLOW_THREADS s = elector_session_new(drv->d, &cfg, session_cb, self->st);
    Py_END_ALLOW_THREADS if (!s)
    {
        PyErr_SetString(PyExc_MemoryError, "cannot create a session (driver stopping?)");
        return -1;
    }
    Py_INCREF(drv);
    self->drv = drv;
    self->s = s;
    return 0;
}

static void session_close(SessionObject *self)
{
    if (!self->s) return;
    elector_session *s = self->s;
    self->s = NULL;
    if (self->drv->closed) return; /* freed with the driver */
    if (getpid() != self->drv->pid) return;
    Py_BEGIN_ALLOW_THREADS elector_session_close(s);
    Py_END_ALLOW_THREADS
}

static void Session_dealloc(SessionObject *self)
{
    if (self->drv) {
        bool child = getpid() != self->drv->pid;
        session_close(self);
        if (!child) hstate_free(self->st);
        Py_DECREF(self->drv);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#define SES_CHECK(self)                                                                  \
    do {                                                                                 \
        if (!(self)->drv) {                                                              \
            PyErr_SetString(PyExc_ValueError, "not initialized");                        \
            return NULL;                                                                 \
        }                                                                                \
        if (forked_check((self)->drv->pid)) return NULL;                                 \
        if (!(self)->s || (self)->drv->closed) {                                         \
            PyErr_SetString(PyExc_ValueError, "session is closed");                      \
            return NULL;                                                                 \
        }                                                                                \
    } while (0)

static PyObject *Session_close(SessionObject *self, PyObject *unused)
{
    (void)unused;
    if (self->drv && forked_check(self->drv->pid)) return NULL;
    if (self->drv) session_close(self);
    Py_RETURN_NONE;
}

/* 0 granted, ETIMEDOUT not yet, or the grant's error: never blocks. */
static PyObject *Session_poll(SessionObject *self, PyObject *unused)
{
    (void)unused;
    SES_CHECK(self);
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = elector_session_wait(self->s, 0);
    Py_END_ALLOW_THREADS return PyLong_FromLong(rc);
}

static PyObject *Session_lease(SessionObject *self, PyObject *unused)
{
    (void)unused;
    SES_CHECK(self);
    return PyLong_FromLongLong(elector_session_lease(self->s));
}

static PyObject *Session_helper(SessionObject *self, PyObject *unused)
{
    (void)unused;
    SES_CHECK(self);
    return PyLong_FromLong(elector_session_helper(self->s));
}

static PyObject *Session_alive(SessionObject *self, PyObject *unused)
{
    (void)unused;
    SES_CHECK(self);
    return PyBool_FromLong(elector_session_alive(self->s));
}

static PyObject *Session_lost(SessionObject *self, PyObject *unused)
{
    (void)unused;
    SES_CHECK(self);
    pthread_mutex_lock(&self->st->mu);
    PyObject *r = self->st->phase == 3
                      ? Py_BuildValue("(is)", self->st->reason, self->st->detail)
                      : (Py_INCREF(Py_None), Py_None);
    pthread_mutex_unlock(&self->st->mu);
    return r;
}

static PyObject *Session_add_waiter(SessionObject *self, PyObject *unused)
{
    (void)unused;
    SES_CHECK(self);
    return add_waiter(self->st);
}

static PyObject *Session_remove_waiter(SessionObject *self, PyObject *fd)
{
    if (!self->drv || forked_check(self->drv->pid)) return NULL;
    return remove_waiter(self->st, fd);
}

static PyMethodDef Session_methods[] = {
    {"close", (PyCFunction)Session_close, METH_NOARGS, "Revokes the lease."},
    {"poll", (PyCFunction)Session_poll, METH_NOARGS,
     "0 granted, ETIMEDOUT not yet, or the grant's error code."},
    {"lease", (PyCFunction)Session_lease, METH_NOARGS, "Lease ID, 0 until granted."},
    {"helper", (PyCFunction)Session_helper, METH_NOARGS,
     "The release helper's pid; 0 (none asked for, or not now) or a negative code."},
    {"alive", (PyCFunction)Session_alive, METH_NOARGS, "Lease provably alive now."},
    {"lost", (PyCFunction)Session_lost, METH_NOARGS, "(reason, detail) once lost."},
    {"add_waiter", (PyCFunction)Session_add_waiter, METH_NOARGS, "A waiter eventfd."},
    {"remove_waiter", (PyCFunction)Session_remove_waiter, METH_O, "Closes a waiter."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject SessionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "elector._elector.Session",
    .tp_basicsize = sizeof(SessionObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A lease kept alive by the driver's loop thread.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Session_init,
    .tp_dealloc = (destructor)Session_dealloc,
    .tp_methods = Session_methods,
};

/* ------------------------------------------------------------ Election */

typedef struct {
    PyObject_HEAD SessionObject *ses;
    elector_election *el;
    hstate *st;
} ElectionObject;

static void election_cb(elector_election *el, const elector_event *ev, void *ud)
{
    (void)el;
    hstate *h = ud;
    pthread_mutex_lock(&h->mu);
    switch (ev->type) {
    case ELECTOR_EV_ELECTED:
        h->phase = 2;
        h->token = ev->token;
        h->lease = ev->lease;
        break;
    case ELECTOR_EV_LOST:
        h->phase = 3;
        h->reason = ev->reason;
        snprintf(h->detail, sizeof(h->detail), "%s", ev->detail ? ev->detail : "");
        break;
    case ELECTOR_EV_FAILED:
        h->phase = 4;
        h->reason = ev->reason;
        snprintf(h->detail, sizeof(h->detail), "%s", ev->detail ? ev->detail : "");
        break;
    case ELECTOR_EV_RESIGNED:
        h->phase = 5;
        break;
    default:
        break;
    }
    wake(h);
    pthread_mutex_unlock(&h->mu);
}

static int Election_init(ElectionObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"session", "name", NULL};
    SessionObject *ses;
    const char *name;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!s", kwlist, &SessionType, &ses, &name))
        return -1;
    if (!ses->drv || forked_check(ses->drv->pid)) return -1;
    if (!ses->s || ses->drv->closed || self->el) {
        PyErr_SetString(PyExc_ValueError, "session is closed");
        return -1;
    }
    if (!*name) {
        PyErr_SetString(PyExc_ValueError, "election name must not be empty");
        return -1;
    }
    self->st = hstate_new(ses->drv->hub);
    if (!self->st) {
        PyErr_NoMemory();
        return -1;
    }
    elector_election *el;
    Py_BEGIN_ALLOW_THREADS el = elector_election_new(ses->s, name, election_cb, self->st);
    Py_END_ALLOW_THREADS if (!el)
    {
        PyErr_SetString(PyExc_MemoryError, "cannot create an election (session closed?)");
        return -1;
    }
    Py_INCREF(ses);
    self->ses = ses;
    self->el = el;
    return 0;
}

static bool el_dead(ElectionObject *self)
{
    return !self->el || !self->ses->s || self->ses->drv->closed;
}

static void election_free(ElectionObject *self)
{
    if (!self->el) return;
    elector_election *el = self->el;
    self->el = NULL;
    if (self->ses->drv->closed || getpid() != self->ses->drv->pid) return;
    Py_BEGIN_ALLOW_THREADS elector_election_free(el);
    Py_END_ALLOW_THREADS
}

static void Election_dealloc(ElectionObject *self)
{
    if (self->ses) {
        bool child = getpid() != self->ses->drv->pid;
        election_free(self);
        if (!child) hstate_free(self->st);
        Py_DECREF(self->ses);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#define EL_CHECK(self)                                                                   \
    do {                                                                                 \
        if (!(self)->ses) {                                                              \
            PyErr_SetString(PyExc_ValueError, "not initialized");                        \
            return NULL;                                                                 \
        }                                                                                \
        if (forked_check((self)->ses->drv->pid)) return NULL;                            \
        if (el_dead(self)) {                                                             \
            PyErr_SetString(PyExc_ValueError, "election is closed");                     \
            return NULL;                                                                 \
        }                                                                                \
    } while (0)

static PyObject *Election_free(ElectionObject *self, PyObject *unused)
{
    (void)unused;
    if (self->ses && forked_check(self->ses->drv->pid)) return NULL;
    if (self->ses) election_free(self);
    Py_RETURN_NONE;
}

static PyObject *Election_campaign(ElectionObject *self, PyObject *arg)
{
    Py_buffer v;
    if (PyObject_GetBuffer(arg, &v, PyBUF_SIMPLE)) return NULL;
    if (!self->ses || forked_check(self->ses->drv->pid) || el_dead(self)) {
        PyBuffer_Release(&v);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "election is closed");
        return NULL;
    }
    pthread_mutex_lock(&self->st->mu);
    int old = self->st->phase;
    self->st->phase = 1;
    self->st->reason = 0;
    self->st->detail[0] = 0;
    self->st->token = 0;
    pthread_mutex_unlock(&self->st->mu);
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = elector_campaign(self->el, v.buf, (size_t)v.len);
    Py_END_ALLOW_THREADS PyBuffer_Release(&v);
    if (rc) {
        pthread_mutex_lock(&self->st->mu);
        if (self->st->phase == 1) self->st->phase = old;
        pthread_mutex_unlock(&self->st->mu);
    }
    return PyLong_FromLong(rc);
}

static PyObject *Election_resign(ElectionObject *self, PyObject *unused)
{
    (void)unused;
    EL_CHECK(self);
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = elector_resign(self->el);
    Py_END_ALLOW_THREADS return PyLong_FromLong(rc);
}

static PyObject *Election_proclaim(ElectionObject *self, PyObject *arg)
{
    Py_buffer v;
    if (PyObject_GetBuffer(arg, &v, PyBUF_SIMPLE)) return NULL;
    if (!self->ses || forked_check(self->ses->drv->pid) || el_dead(self)) {
        PyBuffer_Release(&v);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "election is closed");
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = elector_proclaim(self->el, v.buf, (size_t)v.len);
    Py_END_ALLOW_THREADS PyBuffer_Release(&v);
    return PyLong_FromLong(rc);
}

static PyObject *Election_state(ElectionObject *self, PyObject *unused)
{
    (void)unused;
    EL_CHECK(self);
    pthread_mutex_lock(&self->st->mu);
    PyObject *r =
        Py_BuildValue("(iisLLK)", self->st->phase, self->st->reason, self->st->detail,
                      (long long)self->st->token, (long long)self->st->lease,
                      (unsigned long long)self->st->events);
    pthread_mutex_unlock(&self->st->mu);
    return r;
}

static PyObject *Election_is_leader(ElectionObject *self, PyObject *unused)
{
    (void)unused;
    EL_CHECK(self);
    return PyBool_FromLong(elector_is_leader(self->el));
}

static PyObject *Election_add_waiter(ElectionObject *self, PyObject *unused)
{
    (void)unused;
    EL_CHECK(self);
    return add_waiter(self->st);
}

static PyObject *Election_remove_waiter(ElectionObject *self, PyObject *fd)
{
    if (!self->ses || forked_check(self->ses->drv->pid)) return NULL;
    return remove_waiter(self->st, fd);
}

/* A guarded write in flight: its eventfd is written when etcd answered. Shared
 * by the callback and the Op object; the last of the two frees it. */
typedef struct gop {
    atomic_int refs;
    int fd;
    atomic_int done;
    int err;
    elector_etcd *drv;  /* the driver's write: its elector_etcd_errstr() */
    elector_etcd *etcd; /* the core's write: its elector_etcd_errstr() */
    char detail[256];   /* the failure's text, or "" */
} gop;

static void gop_unref(gop *g)
{
    if (atomic_fetch_sub(&g->refs, 1) == 1) {
        close(g->fd);
        free(g);
    }
}

static void guarded_cb(elector_election *el, int err, void *ud)
{
    (void)el;
    gop *g = ud;
    g->err = err;
    if (g->drv)
        snprintf(g->detail, sizeof(g->detail), "%s", elector_etcd_errstr(g->drv));
    else if (g->etcd && err < 0 && err != ELECTOR_ENOTLEADER &&
             elector_etcd_err(g->etcd) == err)
        snprintf(g->detail, sizeof(g->detail), "%s", elector_etcd_errstr(g->etcd));
    atomic_store(&g->done, 1);
    uint64_t one = 1;
    ssize_t r = write(g->fd, &one, sizeof(one));
    (void)r;
    gop_unref(g);
}

typedef struct {
    PyObject_HEAD gop *g;
    pid_t pid;
} OpObject;

static void Op_dealloc(OpObject *self)
{
    if (self->g && getpid() == self->pid) gop_unref(self->g);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Op_fd(OpObject *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromLong(self->g->fd);
}

static PyObject *Op_result(OpObject *self, PyObject *unused)
{
    (void)unused;
    if (!atomic_load(&self->g->done)) Py_RETURN_NONE;
    return PyLong_FromLong(self->g->err);
}

/* The failure's detail text once answered ("endpoint H:P: connect: ..."), or "". */
static PyObject *Op_detail(OpObject *self, PyObject *unused)
{
    (void)unused;
    const char *s = atomic_load(&self->g->done) ? self->g->detail : "";
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "backslashreplace");
}

static PyMethodDef Op_methods[] = {
    {"fd", (PyCFunction)Op_fd, METH_NOARGS, "Readable once answered."},
    {"detail", (PyCFunction)Op_detail, METH_NOARGS,
     "The failure's detail text once answered (the endpoint and the cause), or ''."},
    {"result", (PyCFunction)Op_result, METH_NOARGS, "None while pending, else the code."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject OpType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "elector._elector.Op",
    .tp_basicsize = sizeof(OpObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A guarded write in flight.",
    .tp_dealloc = (destructor)Op_dealloc,
    .tp_methods = Op_methods,
};

/* A guarded write's Op: its eventfd, two references (the Op's and the
 * callback's, which the caller drops if the write is not sent). NULL with a
 * Python error set. */
static OpObject *op_new(void)
{
    gop *g = calloc(1, sizeof(*g));
    if (!g) return (OpObject *)PyErr_NoMemory();
    g->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (g->fd < 0) {
        free(g);
        return (OpObject *)PyErr_SetFromErrno(PyExc_OSError);
    }
    atomic_init(&g->refs, 2);
    OpObject *op = PyObject_New(OpObject, &OpType);
    if (!op) {
        close(g->fd);
        free(g);
        return NULL;
    }
    op->g = g;
    op->pid = getpid();
    return op;
}

static void revoke_cb(elector_etcd *d, int err, void *ud)
{
    (void)d;
    gop *g = ud;
    g->err = err;
    atomic_store(&g->done, 1);
    uint64_t one = 1;
    ssize_t r = write(g->fd, &one, sizeof(one));
    (void)r;
    gop_unref(g);
}

/* Driver.revoke_start(lease, timeout_ms) -> Op, or an error code (nothing sent). */
static PyObject *Driver_revoke_start(DriverObject *self, PyObject *args)
{
    long long lease, timeout_ms;
    if (!PyArg_ParseTuple(args, "LL", &lease, &timeout_ms)) return NULL;
    DRV_CHECK(self);
    OpObject *op = op_new();
    if (!op) return NULL;
    gop *g = op->g;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc =
        elector_lease_revoke(self->d, lease, timeout_ms, revoke_cb, g);
    Py_END_ALLOW_THREADS if (rc)
    {
        atomic_fetch_sub(&g->refs, 1); /* no callback will come */
        Py_DECREF(op);
        return PyLong_FromLong(rc);
    }
    return (PyObject *)op;
}

/* put(key, value or None) -> Op, or an error code (nothing sent). */
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
    if (!self->ses || forked_check(self->ses->drv->pid) || el_dead(self)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "election is closed");
        goto out;
    }
    OpObject *op = op_new();
    if (!op) goto out;
    gop *g = op->g;
    g->drv = self->ses->drv->d;
    int rc;
    Py_BEGIN_ALLOW_THREADS if (del) rc =
        elector_guarded_delete(self->el, k.buf, (size_t)k.len, guarded_cb, g);
    else rc = elector_guarded_put(self->el, k.buf, (size_t)k.len, v.buf, (size_t)v.len,
                                  guarded_cb, g);
    Py_END_ALLOW_THREADS if (rc)
    {
        atomic_fetch_sub(&g->refs, 1); /* no callback will come */
        Py_DECREF(op);
        r = PyLong_FromLong(rc);
    }
    else r = (PyObject *)op;
out:
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
    {"add_waiter", (PyCFunction)Election_add_waiter, METH_NOARGS, "A waiter eventfd."},
    {"remove_waiter", (PyCFunction)Election_remove_waiter, METH_O, "Closes a waiter."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject ElectionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "elector._elector.Election",
    .tp_basicsize = sizeof(ElectionObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An election handle on a session.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Election_init,
    .tp_dealloc = (destructor)Election_dealloc,
    .tp_methods = Election_methods,
};

/* ------------------------------------------------------------ Observer */

typedef struct {
    PyObject_HEAD DriverObject *drv;
    elector_observer *o;
    hstate *st;
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
    if (ev->key_len) {
        e->key = malloc(ev->key_len);
        if (e->key) {
            memcpy(e->key, ev->key, ev->key_len);
            e->key_len = ev->key_len;
        }
    }
    if (ev->value_len) {
        e->value = malloc(ev->value_len);
        if (e->value) {
            memcpy(e->value, ev->value, ev->value_len);
            e->value_len = ev->value_len;
        }
    }
    pthread_mutex_lock(&h->mu);
    if (h->tail)
        h->tail->next = e;
    else
        h->head = e;
    h->tail = e;
    wake(h);
    pthread_mutex_unlock(&h->mu);
}

static int Observer_init(ObserverObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"driver", "name", NULL};
    DriverObject *drv;
    const char *name;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!s", kwlist, &DriverType, &drv, &name))
        return -1;
    if (forked_check(drv->pid)) return -1;
    if (drv->closed || self->o) {
        PyErr_SetString(PyExc_ValueError, "client is closed");
        return -1;
    }
    if (!*name) {
        PyErr_SetString(PyExc_ValueError, "election name must not be empty");
        return -1;
    }
    self->st = hstate_new(drv->hub);
    if (!self->st) {
        PyErr_NoMemory();
        return -1;
    }
    elector_observer *o;
    Py_BEGIN_ALLOW_THREADS o = elector_observe(drv->d, name, observe_cb, self->st);
    Py_END_ALLOW_THREADS if (!o)
    {
        PyErr_SetString(PyExc_MemoryError, "cannot create an observer");
        return -1;
    }
    Py_INCREF(drv);
    self->drv = drv;
    self->o = o;
    return 0;
}

static void observer_free(ObserverObject *self)
{
    if (!self->o) return;
    elector_observer *o = self->o;
    self->o = NULL;
    if (self->drv->closed || getpid() != self->drv->pid) return;
    Py_BEGIN_ALLOW_THREADS elector_observer_free(o);
    Py_END_ALLOW_THREADS
}

static void Observer_dealloc(ObserverObject *self)
{
    if (self->drv) {
        bool child = getpid() != self->drv->pid;
        observer_free(self);
        if (!child) hstate_free(self->st);
        Py_DECREF(self->drv);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Observer_close(ObserverObject *self, PyObject *unused)
{
    (void)unused;
    if (self->drv && forked_check(self->drv->pid)) return NULL;
    if (self->drv) observer_free(self);
    Py_RETURN_NONE;
}

/* The next event: (type, reason, key, value, token, lease), or None. */
static PyObject *Observer_pop(ObserverObject *self, PyObject *unused)
{
    (void)unused;
    if (!self->drv) Py_RETURN_NONE;
    if (forked_check(self->drv->pid)) return NULL;
    pthread_mutex_lock(&self->st->mu);
    qev *e = self->st->head;
    if (e) {
        self->st->head = e->next;
        if (!e->next) self->st->tail = NULL;
    }
    pthread_mutex_unlock(&self->st->mu);
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

static PyObject *Observer_add_waiter(ObserverObject *self, PyObject *unused)
{
    (void)unused;
    if (!self->drv || forked_check(self->drv->pid)) return NULL;
    return add_waiter(self->st);
}

static PyObject *Observer_remove_waiter(ObserverObject *self, PyObject *fd)
{
    if (!self->drv || forked_check(self->drv->pid)) return NULL;
    return remove_waiter(self->st, fd);
}

static PyMethodDef Observer_methods[] = {
    {"close", (PyCFunction)Observer_close, METH_NOARGS, "Stops observing."},
    {"pop", (PyCFunction)Observer_pop, METH_NOARGS, "The next event or None."},
    {"add_waiter", (PyCFunction)Observer_add_waiter, METH_NOARGS, "A waiter eventfd."},
    {"remove_waiter", (PyCFunction)Observer_remove_waiter, METH_O, "Closes a waiter."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject ObserverType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "elector._elector.Observer",
    .tp_basicsize = sizeof(ObserverObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Follows the leader of an election.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Observer_init,
    .tp_dealloc = (destructor)Observer_dealloc,
    .tp_methods = Observer_methods,
};

/* ------------------------------------------------------------ embedded (asyncio) */

/* The core API on the caller's event loop, for elector.aio: no thread. The
 * loop watches fd() for reading and calls process(); callbacks run inside
 * process(), with the GIL held, and only record into the hstate structures. */

typedef struct {
    PyObject_HEAD elector_etcd *etcd;
    pid_t pid;
    bool closed;
    int revokes; /* of sessions dropped without close_start(), unanswered */
} CoreObject;

static PyTypeObject CoreType;

static int Core_init(CoreObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"endpoints", "user", "password",        "cacert",
                             "cert",      "key",  "dial_timeout_ms", "request_timeout_ms",
                             NULL};
    PyObject *ep, *user = Py_None, *pw = Py_None, *ca = Py_None, *cert = Py_None,
                  *key = Py_None;
    long long dial = 0, req = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOOOOLL", kwlist, &ep, &user, &pw, &ca,
                                     &cert, &key, &dial, &req))
        return -1;
    if (self->etcd) {
        PyErr_SetString(PyExc_RuntimeError, "already initialized");
        return -1;
    }
    int err = 0;
    char *s_ep = dup_opt(ep, "endpoints", &err);
    char *s_user = dup_opt(user, "user", &err);
    char *s_pw = dup_opt(pw, "password", &err);
    char *s_ca = dup_opt(ca, "cacert", &err);
    char *s_cert = dup_opt(cert, "cert", &err);
    char *s_key = dup_opt(key, "key", &err);
    int rc = 0;
    if (!err) {
        elector_etcd_config cfg;
        elector_etcd_config_init(&cfg);
        cfg.endpoints = s_ep;
        cfg.user = s_user;
        cfg.password = s_pw;
        cfg.cacert = s_ca;
        cfg.cert = s_cert;
        cfg.key = s_key;
        if (dial > 0) cfg.dial_timeout_ms = dial;
        if (req > 0) cfg.request_timeout_ms = req;
        self->etcd = elector_etcd_new(&cfg);
        if (!self->etcd) {
            PyErr_NoMemory();
            err = 1;
        } else if ((rc = elector_etcd_err(self->etcd)) != 0) {
            PyObject *v = Py_BuildValue("(is)", rc, elector_etcd_errstr(self->etcd));
            if (v) {
                PyErr_SetObject(PyExc_OSError, v);
                Py_DECREF(v);
            }
            elector_etcd_free(self->etcd);
            self->etcd = NULL;
            err = 1;
        }
        self->pid = getpid();
    }
    if (s_pw) explicit_bzero(s_pw, strlen(s_pw));
    free(s_ep);
    free(s_user);
    free(s_pw);
    free(s_ca);
    free(s_cert);
    free(s_key);
    return err ? -1 : 0;
}

static void core_close(CoreObject *self)
{
    if (self->closed || !self->etcd) return;
    self->closed = true;
    if (getpid() != self->pid) return; /* the parent's: never touched */
    elector_etcd_free(self->etcd);
}

static void Core_dealloc(CoreObject *self)
{
    core_close(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#define CORE_CHECK(c)                                                                    \
    do {                                                                                 \
        if (forked_check((c)->pid)) return NULL;                                         \
        if ((c)->closed || !(c)->etcd) {                                                 \
            PyErr_SetString(PyExc_ValueError, "client is closed");                       \
            return NULL;                                                                 \
        }                                                                                \
    } while (0)

static PyObject *Core_close(CoreObject *self, PyObject *unused)
{
    (void)unused;
    core_close(self);
    Py_RETURN_NONE;
}

static PyObject *Core_revokes(CoreObject *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromLong(self->revokes);
}

static PyObject *Core_fd(CoreObject *self, PyObject *unused)
{
    (void)unused;
    CORE_CHECK(self);
    return PyLong_FromLong(elector_etcd_fd(self->etcd));
}

/* Runs what is due, then arms the fd's timer: the next due time in ms (-1). */
static PyObject *Core_process(CoreObject *self, PyObject *unused)
{
    (void)unused;
    CORE_CHECK(self);
    elector_etcd_process(self->etcd);
    return PyLong_FromLongLong(elector_etcd_timeout(self->etcd));
}

static PyMethodDef Core_methods[] = {
    {"close", (PyCFunction)Core_close, METH_NOARGS, "Frees the client."},
    {"fd", (PyCFunction)Core_fd, METH_NOARGS, "The fd to watch for reading."},
    {"revokes", (PyCFunction)Core_revokes, METH_NOARGS,
     "Revokes of closed sessions still waiting for etcd's answer."},
    {"process", (PyCFunction)Core_process, METH_NOARGS,
     "Runs what is due; returns ms until the next due time (-1: none)."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "elector._elector.Core",
    .tp_basicsize = sizeof(CoreObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "libelector's client on the caller's event loop (embedded mode).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Core_init,
    .tp_dealloc = (destructor)Core_dealloc,
    .tp_methods = Core_methods,
};

/* The answer to a session's close_start(): shared by the session object and
 * the library's callback, freed by the last of the two (loop thread only). */
typedef struct {
    int refs;
    bool done;
    int rc;
} core_closing;

static void core_closed_cb(int rc, void *ud)
{
    core_closing *c = ud;
    c->done = true;
    c->rc = rc;
    if (--c->refs == 0) free(c);
}

typedef struct {
    PyObject_HEAD CoreObject *core;
    elector_session *s;
    hstate *st;
    core_closing *closing; /* after close_start() */
} CoreSessionObject;

static void core_session_cb(elector_session *s, const elector_event *ev, void *ud)
{
    (void)s;
    hstate *h = ud;
    pthread_mutex_lock(&h->mu);
    h->phase = 3;
    h->reason = ev->reason;
    snprintf(h->detail, sizeof(h->detail), "%s", ev->detail ? ev->detail : "");
    h->events++;
    pthread_mutex_unlock(&h->mu);
}

static int CoreSession_init(CoreSessionObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"core", "ttl", "release_on_exit", NULL};
    CoreObject *core;
    long long ttl = 10;
    int roe = 0; /* release_on_exit: off unless asked, as in C */
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|Lp", kwlist, &CoreType, &core, &ttl,
                                     &roe))
        return -1;
    if (forked_check(core->pid)) return -1;
    if (core->closed || self->s) {
        PyErr_SetString(PyExc_ValueError, "client is closed");
        return -1;
    }
    self->st = hstate_new(NULL);
    if (!self->st) {
        PyErr_NoMemory();
        return -1;
    }
    elector_session_config cfg;
    elector_session_config_init(&cfg);
    cfg.ttl_s = ttl;
    cfg.release_on_exit = roe != 0;
    self->s = elector_session_new(core->etcd, &cfg, core_session_cb, self->st);
    if (!self->s) {
        PyErr_SetString(PyExc_MemoryError, "cannot create a session");
        return -1;
    }
    Py_INCREF(core);
    self->core = core;
    return 0;
}

static void core_dropped_cb(int rc, void *ud)
{
    (void)rc;
    ((CoreObject *)ud)->revokes--; /* runs before the client (and ud) is freed */
}

/* Closes the session; Core.revokes() counts its revoke until etcd answers, so
 * that the client's close can wait for it too. */
static void core_session_close(CoreSessionObject *self)
{
    if (!self->s) return;
    elector_session *s = self->s;
    self->s = NULL;
    if (self->core->closed || getpid() != self->core->pid) return;
    if (elector_session_close_async(s, 0, core_dropped_cb, self->core) == 1)
        self->core->revokes++;
}

static void CoreSession_dealloc(CoreSessionObject *self)
{
    if (self->closing && --self->closing->refs == 0) free(self->closing);
    if (self->core) {
        bool child = getpid() != self->core->pid;
        core_session_close(self);
        if (!child) hstate_free(self->st);
        Py_DECREF(self->core);
    } else {
        hstate_free(self->st);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#define CSES_CHECK(self)                                                                 \
    do {                                                                                 \
        if (!(self)->core) {                                                             \
            PyErr_SetString(PyExc_ValueError, "not initialized");                        \
            return NULL;                                                                 \
        }                                                                                \
        if (forked_check((self)->core->pid)) return NULL;                                \
        if (!(self)->s || (self)->core->closed) {                                        \
            PyErr_SetString(PyExc_ValueError, "session is closed");                      \
            return NULL;                                                                 \
        }                                                                                \
    } while (0)

static PyObject *CoreSession_close(CoreSessionObject *self, PyObject *unused)
{
    (void)unused;
    if (self->core && forked_check(self->core->pid)) return NULL;
    if (self->core) core_session_close(self);
    Py_RETURN_NONE;
}

/* close_start(timeout_ms) -> 1: the revoke was sent, close_result() tells when
 * etcd answered; 0: nothing to revoke; < 0: an ELECTOR_E* code (not sent, or
 * nobody will be told). Closes the session in every case. */
static PyObject *CoreSession_close_start(CoreSessionObject *self, PyObject *arg)
{
    long long ms = PyLong_AsLongLong(arg);
    if (ms == -1 && PyErr_Occurred()) return NULL;
    if (self->core && forked_check(self->core->pid)) return NULL;
    if (!self->core || !self->s || self->core->closed || self->closing) {
        if (self->core && self->s) core_session_close(self);
        return PyLong_FromLong(0);
    }
    core_closing *c = calloc(1, sizeof(*c));
    if (!c) {
        core_session_close(self);
        return PyLong_FromLong(ELECTOR_ENOMEM);
    }
    c->refs = 2;
    elector_session *sess = self->s;
    self->s = NULL;
    int rc = elector_session_close_async(sess, ms, core_closed_cb, c);
    if (rc != 1) {
        free(c);
        return PyLong_FromLong(rc);
    }
    self->closing = c;
    return PyLong_FromLong(1);
}

/* None while the revoke of close_start() is pending; then its code (0: etcd
 * no longer has the lease). */
static PyObject *CoreSession_close_result(CoreSessionObject *self, PyObject *unused)
{
    (void)unused;
    if (!self->closing) return PyLong_FromLong(0);
    if (!self->closing->done) Py_RETURN_NONE;
    return PyLong_FromLong(self->closing->rc);
}

/* (lease, alive, lost reason or 0, detail) */
static PyObject *CoreSession_state(CoreSessionObject *self, PyObject *unused)
{
    (void)unused;
    CSES_CHECK(self);
    return Py_BuildValue("(LNis)", (long long)elector_session_lease(self->s),
                         PyBool_FromLong(elector_session_alive(self->s)),
                         self->st->phase == 3
                             ? (self->st->reason ? self->st->reason : ELECTOR_ESESSION)
                             : 0,
                         self->st->detail);
}

static PyMethodDef CoreSession_methods[] = {
    {"close", (PyCFunction)CoreSession_close, METH_NOARGS, "Revokes the lease."},
    {"close_start", (PyCFunction)CoreSession_close_start, METH_O,
     "close_start(timeout_ms) -> 1 (revoke sent: see close_result), 0 (nothing to "
     "revoke) or an error code."},
    {"close_result", (PyCFunction)CoreSession_close_result, METH_NOARGS,
     "None while the revoke is pending, else its code."},
    {"state", (PyCFunction)CoreSession_state, METH_NOARGS,
     "(lease, alive, lost reason or 0, detail)."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject CoreSessionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "elector._elector.CoreSession",
    .tp_basicsize = sizeof(CoreSessionObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A session in embedded mode.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)CoreSession_init,
    .tp_dealloc = (destructor)CoreSession_dealloc,
    .tp_methods = CoreSession_methods,
};

typedef struct {
    PyObject_HEAD CoreSessionObject *ses;
    elector_election *el;
    hstate *st;
} CoreElectionObject;

static void core_election_cb(elector_election *el, const elector_event *ev, void *ud)
{
    election_cb(NULL, ev, ud);
    (void)el;
}

static void core_guarded_cb(elector_election *el, int err, void *ud)
{
    guarded_cb(NULL, err, ud);
    (void)el;
}

static int CoreElection_init(CoreElectionObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"session", "name", NULL};
    CoreSessionObject *ses;
    const char *name;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!s", kwlist, &CoreSessionType, &ses,
                                     &name))
        return -1;
    if (!ses->core || forked_check(ses->core->pid)) return -1;
    if (!ses->s || ses->core->closed || self->el) {
        PyErr_SetString(PyExc_ValueError, "session is closed");
        return -1;
    }
    if (!*name) {
        PyErr_SetString(PyExc_ValueError, "election name must not be empty");
        return -1;
    }
    self->st = hstate_new(NULL);
    if (!self->st) {
        PyErr_NoMemory();
        return -1;
    }
    self->el = elector_election_new(ses->s, name, core_election_cb, self->st);
    if (!self->el) {
        PyErr_NoMemory();
        return -1;
    }
    Py_INCREF(ses);
    self->ses = ses;
    return 0;
}

static bool cel_dead(CoreElectionObject *self)
{
    return !self->el || !self->ses->s || self->ses->core->closed;
}

static void core_election_free(CoreElectionObject *self)
{
    if (!self->el) return;
    elector_election *el = self->el;
    self->el = NULL;
    if (!self->ses->s || self->ses->core->closed || getpid() != self->ses->core->pid)
        return;
    elector_election_free(el);
}

static void CoreElection_dealloc(CoreElectionObject *self)
{
    if (self->ses) {
        bool child = getpid() != self->ses->core->pid;
        core_election_free(self);
        if (!child) hstate_free(self->st);
        Py_DECREF(self->ses);
    } else {
        hstate_free(self->st);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#define CEL_CHECK(self)                                                                  \
    do {                                                                                 \
        if (!(self)->ses) {                                                              \
            PyErr_SetString(PyExc_ValueError, "not initialized");                        \
            return NULL;                                                                 \
        }                                                                                \
        if (forked_check((self)->ses->core->pid)) return NULL;                           \
        if (cel_dead(self)) {                                                            \
            PyErr_SetString(PyExc_ValueError, "election is closed");                     \
            return NULL;                                                                 \
        }                                                                                \
    } while (0)

static PyObject *CoreElection_free(CoreElectionObject *self, PyObject *unused)
{
    (void)unused;
    if (self->ses && forked_check(self->ses->core->pid)) return NULL;
    if (self->ses) core_election_free(self);
    Py_RETURN_NONE;
}

static PyObject *CoreElection_campaign(CoreElectionObject *self, PyObject *arg)
{
    Py_buffer v;
    if (PyObject_GetBuffer(arg, &v, PyBUF_SIMPLE)) return NULL;
    if (!self->ses || forked_check(self->ses->core->pid) || cel_dead(self)) {
        PyBuffer_Release(&v);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "election is closed");
        return NULL;
    }
    int old = self->st->phase;
    self->st->phase = 1;
    self->st->reason = 0;
    self->st->detail[0] = 0;
    self->st->token = 0;
    int rc = elector_campaign(self->el, v.buf, (size_t)v.len);
    PyBuffer_Release(&v);
    if (rc && self->st->phase == 1) self->st->phase = old;
    return PyLong_FromLong(rc);
}

static PyObject *CoreElection_resign(CoreElectionObject *self, PyObject *unused)
{
    (void)unused;
    CEL_CHECK(self);
    return PyLong_FromLong(elector_resign(self->el));
}

static PyObject *CoreElection_state(CoreElectionObject *self, PyObject *unused)
{
    (void)unused;
    CEL_CHECK(self);
    return Py_BuildValue("(iisLLK)", self->st->phase, self->st->reason, self->st->detail,
                         (long long)self->st->token, (long long)self->st->lease,
                         (unsigned long long)self->st->events);
}

static PyObject *CoreElection_is_leader(CoreElectionObject *self, PyObject *unused)
{
    (void)unused;
    CEL_CHECK(self);
    return PyBool_FromLong(elector_is_leader(self->el));
}

static PyObject *CoreElection_guarded(CoreElectionObject *self, PyObject *args)
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
    if (!self->ses || forked_check(self->ses->core->pid) || cel_dead(self)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "election is closed");
        goto out;
    }
    OpObject *op = op_new();
    if (!op) goto out;
    gop *g = op->g;
    g->etcd = self->ses->core->etcd;
    int rc =
        del ? elector_guarded_delete(self->el, k.buf, (size_t)k.len, core_guarded_cb, g)
            : elector_guarded_put(self->el, k.buf, (size_t)k.len, v.buf, (size_t)v.len,
                                  core_guarded_cb, g);
    if (rc) {
        atomic_fetch_sub(&g->refs, 1);
        Py_DECREF(op);
        r = PyLong_FromLong(rc);
    } else {
        r = (PyObject *)op;
    }
out:
    PyBuffer_Release(&k);
    if (!del) PyBuffer_Release(&v);
    return r;
}

static PyMethodDef CoreElection_methods[] = {
    {"free", (PyCFunction)CoreElection_free, METH_NOARGS, "Resigns if needed and frees."},
    {"campaign", (PyCFunction)CoreElection_campaign, METH_O, "Starts campaigning."},
    {"resign", (PyCFunction)CoreElection_resign, METH_NOARGS, "Resigns."},
    {"state", (PyCFunction)CoreElection_state, METH_NOARGS,
     "(phase, reason, detail, token, lease, events)."},
    {"is_leader", (PyCFunction)CoreElection_is_leader, METH_NOARGS, "Deadline check."},
    {"guarded", (PyCFunction)CoreElection_guarded, METH_VARARGS,
     "guarded(key, value or None) -> Op or error code."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject CoreElectionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "elector._elector.CoreElection",
    .tp_basicsize = sizeof(CoreElectionObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An election in embedded mode.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)CoreElection_init,
    .tp_dealloc = (destructor)CoreElection_dealloc,
    .tp_methods = CoreElection_methods,
};

typedef struct {
    PyObject_HEAD CoreObject *core;
    elector_observer *o;
    hstate *st;
} CoreObserverObject;

static void core_observe_cb(elector_observer *o, const elector_event *ev, void *ud)
{
    (void)o;
    observe_cb(NULL, ev, ud);
}

static int CoreObserver_init(CoreObserverObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"core", "name", NULL};
    CoreObject *core;
    const char *name;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!s", kwlist, &CoreType, &core, &name))
        return -1;
    if (forked_check(core->pid)) return -1;
    if (core->closed || self->o) {
        PyErr_SetString(PyExc_ValueError, "client is closed");
        return -1;
    }
    if (!*name) {
        PyErr_SetString(PyExc_ValueError, "election name must not be empty");
        return -1;
    }
    self->st = hstate_new(NULL);
    if (!self->st) {
        PyErr_NoMemory();
        return -1;
    }
    self->o = elector_observe(core->etcd, name, core_observe_cb, self->st);
    if (!self->o) {
        PyErr_NoMemory();
        return -1;
    }
    Py_INCREF(core);
    self->core = core;
    return 0;
}

static void core_observer_free(CoreObserverObject *self)
{
    if (!self->o) return;
    elector_observer *o = self->o;
    self->o = NULL;
    if (self->core->closed || getpid() != self->core->pid) return;
    elector_observer_free(o);
}

static void CoreObserver_dealloc(CoreObserverObject *self)
{
    if (self->core) {
        bool child = getpid() != self->core->pid;
        core_observer_free(self);
        if (!child) hstate_free(self->st);
        Py_DECREF(self->core);
    } else {
        hstate_free(self->st);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *CoreObserver_close(CoreObserverObject *self, PyObject *unused)
{
    (void)unused;
    if (self->core && forked_check(self->core->pid)) return NULL;
    if (self->core) core_observer_free(self);
    Py_RETURN_NONE;
}

static PyObject *CoreObserver_pop(CoreObserverObject *self, PyObject *unused)
{
    (void)unused;
    if (!self->core) Py_RETURN_NONE;
    if (forked_check(self->core->pid)) return NULL;
    qev *e = self->st->head;
    if (!e) Py_RETURN_NONE;
    self->st->head = e->next;
    if (!e->next) self->st->tail = NULL;
    PyObject *r =
        Py_BuildValue("(iiy#y#LL)", e->type, e->reason, (const char *)e->key,
                      (Py_ssize_t)e->key_len, (const char *)e->value,
                      (Py_ssize_t)e->value_len, (long long)e->token, (long long)e->lease);
    free(e->key);
    free(e->value);
    free(e);
    return r;
}

static PyMethodDef CoreObserver_methods[] = {
    {"close", (PyCFunction)CoreObserver_close, METH_NOARGS, "Stops observing."},
    {"pop", (PyCFunction)CoreObserver_pop, METH_NOARGS, "The next event or None."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject CoreObserverType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "elector._elector.CoreObserver",
    .tp_basicsize = sizeof(CoreObserverObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An observer in embedded mode.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)CoreObserver_init,
    .tp_dealloc = (destructor)CoreObserver_dealloc,
    .tp_methods = CoreObserver_methods,
};

/* ------------------------------------------------------------ module */

static PyObject *mod_strerror(PyObject *m, PyObject *arg)
{
    (void)m;
    long c = PyLong_AsLong(arg);
    if (c == -1 && PyErr_Occurred()) return NULL;
    return PyUnicode_FromString(elector_strerror((int)c));
}

/* guarded_key_check(name, key) -> None, or why a guarded write may not go to
 * key (under the election's own prefix NAME/). */
static PyObject *mod_guarded_key_check(PyObject *m, PyObject *args)
{
    (void)m;
    const char *name;
    Py_buffer key;
    if (!PyArg_ParseTuple(args, "sy*", &name, &key)) return NULL;
    char why[600];
    int rc = elector_guarded_key_check(name, key.buf, (size_t)key.len, why, sizeof(why));
    PyBuffer_Release(&key);
    if (!rc) Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(why, (Py_ssize_t)strlen(why), "backslashreplace");
}

/* The running libelector's version ("MAJOR.MINOR.PATCH"): elector_version(). */
static PyObject *mod_version(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    return PyUnicode_FromString(elector_version());
}

static PyObject *mod_err_name(PyObject *m, PyObject *arg)
{
    (void)m;
    long c = PyLong_AsLong(arg);
    if (c == -1 && PyErr_Occurred()) return NULL;
    return PyUnicode_FromString(elector_err_name((int)c));
}

static PyObject *mod_set_fork_error(PyObject *m, PyObject *cls)
{
    (void)m;
    Py_XDECREF(fork_error);
    Py_INCREF(cls);
    fork_error = cls;
    Py_RETURN_NONE;
}

/* Holds the GIL for ms milliseconds without any Python code running: for the
 * tests ("keepalives never need the GIL"). */
static PyObject *mod_hold_gil(PyObject *m, PyObject *arg)
{
    (void)m;
    long ms = PyLong_AsLong(arg);
    if (ms == -1 && PyErr_Occurred()) return NULL;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
    Py_RETURN_NONE;
}

static PyMethodDef mod_methods[] = {
    {"strerror", mod_strerror, METH_O, "Text of an ELECTOR_E* code."},
    {"err_name", mod_err_name, METH_O, "Name of an ELECTOR_E* code."},
    {"version", mod_version, METH_NOARGS, "The running libelector's version."},
    {"guarded_key_check", mod_guarded_key_check, METH_VARARGS,
     "None, or why a guarded write of election NAME may not go to KEY."},
    {"_set_fork_error", mod_set_fork_error, METH_O, "Class raised in forked children."},
    {"_hold_gil", mod_hold_gil, METH_O, "Sleeps ms milliseconds holding the GIL."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT,
                                    "elector._elector",
                                    "libelector's driver for the elector package.",
                                    -1,
                                    mod_methods,
                                    NULL,
                                    NULL,
                                    NULL,
                                    NULL};

PyMODINIT_FUNC PyInit__elector(void);
PyMODINIT_FUNC PyInit__elector(void)
{
    PyTypeObject *types[] = {&DriverType,      &SessionType,      &ElectionType,
                             &OpType,          &ObserverType,     &CoreType,
                             &CoreSessionType, &CoreElectionType, &CoreObserverType,
                             &LeaderOpType,    &KvOpType};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (PyType_Ready(types[i]) < 0) return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (!m) return NULL;
    const char *names[] = {"Driver",       "Session",  "Election",    "Op",
                           "Observer",     "Core",     "CoreSession", "CoreElection",
                           "CoreObserver", "LeaderOp", "KvOp"};
    _Static_assert(sizeof(types) / sizeof(types[0]) == sizeof(names) / sizeof(names[0]),
                   "one name per type");
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        Py_INCREF(types[i]);
        if (PyModule_AddObject(m, names[i], (PyObject *)types[i]) < 0) {
            Py_DECREF(types[i]);
            Py_DECREF(m);
            return NULL;
        }
    }
#define ADD_CODE_(name, value, text)                                                     \
    if (PyModule_AddIntConstant(m, #name, value) < 0) {                                  \
        Py_DECREF(m);                                                                    \
        return NULL;                                                                     \
    }
    ELECTOR_ERRNO_MAP(ADD_CODE_)
#undef ADD_CODE_
    return m;
}
