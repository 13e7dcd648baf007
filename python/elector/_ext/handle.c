/* SPDX-License-Identifier: MIT */
/* The handle base of elector._elector (ext.h): the state a handle's callbacks
 * record, the eventfds ("waiters") they wake, and the checks every method
 * makes first (made in this process, initialized, not closed). */
#include "ext.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

PyObject *ext_fork_error;

int ext_forked(pid_t pid)
{
    if (getpid() == pid) return 0;
    PyErr_SetString(ext_fork_error ? ext_fork_error : PyExc_RuntimeError,
                    "elector object used in a forked child: the parent's sessions and "
                    "leases belong to the parent; create a new Client in the child");
    return -1;
}

/* ------------------------------------------------------------ state */

hstate *hstate_new(hstate *hub)
{
    hstate *h = calloc(1, sizeof(*h));
    if (!h) return NULL;
    pthread_mutex_init(&h->mu, NULL);
    h->hub = hub;
    return h;
}

void hstate_free(hstate *h)
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

static void wake_fds(hstate *h)
{
    uint64_t one = 1;
    for (size_t i = 0; i < h->nfds; i++) {
        ssize_t r = write(h->fds[i], &one, sizeof(one));
        (void)r; /* EAGAIN: the counter is already non-zero */
    }
}

void hstate_wake(hstate *h)
{
    h->events++;
    wake_fds(h);
    if (h->hub && h->hub != h) {
        pthread_mutex_lock(&h->hub->mu);
        h->hub->events++;
        wake_fds(h->hub);
        pthread_mutex_unlock(&h->hub->mu);
    }
}

void hstate_set_detail(hstate *h, const char *detail)
{
    snprintf(h->detail, sizeof(h->detail), "%s", detail ? detail : "");
}

PyObject *hstate_add_waiter(hstate *h)
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

PyObject *hstate_remove_waiter(hstate *h, PyObject *arg)
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

/* ------------------------------------------------------------ the handle head */

int handle_init(HandleObject *h, ClientObject *c, PyObject *owner)
{
    if (ext_forked(c->pid)) return -1;
    if (c->closed || h->client) {
        PyErr_SetString(PyExc_ValueError,
                        h->client ? "already initialized" : "client is closed");
        return -1;
    }
    h->st = hstate_new(c->hub);
    if (!h->st) {
        PyErr_NoMemory();
        return -1;
    }
    Py_INCREF(c);
    Py_INCREF(owner);
    h->client = c;
    h->owner = owner;
    return 0;
}

int handle_check(HandleObject *h, bool live, const char *what)
{
    if (!h->client) {
        PyErr_SetString(PyExc_ValueError, "not initialized");
        return -1;
    }
    if (ext_forked(h->client->pid)) return -1;
    if (what && (!live || h->client->closed)) {
        PyErr_Format(PyExc_ValueError, "%s is closed", what);
        return -1;
    }
    return 0;
}

bool handle_owns(const HandleObject *h)
{
    return h->client && !h->client->closed && getpid() == h->client->pid;
}

void handle_dealloc(HandleObject *h)
{
    if (!h->client || getpid() == h->client->pid) hstate_free(h->st);
    Py_XDECREF(h->owner);
    Py_XDECREF(h->client);
    Py_TYPE(h)->tp_free((PyObject *)h);
}

PyObject *Handle_add_waiter(HandleObject *h, PyObject *unused)
{
    (void)unused;
    if (handle_check(h, true, NULL)) return NULL;
    return hstate_add_waiter(h->st);
}

PyObject *Handle_remove_waiter(HandleObject *h, PyObject *fd)
{
    if (handle_check(h, true, NULL)) return NULL;
    return hstate_remove_waiter(h->st, fd);
}
