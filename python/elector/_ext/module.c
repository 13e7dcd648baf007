/* SPDX-License-Identifier: MIT */
/* elector._elector — the CPython extension under the `elector` package: its
 * functions, the ELECTOR_E* codes and the registration of the handle types
 * (ext.h says how they work). */
#include "ext.h"

#include <errno.h>
#include <string.h>
#include <time.h>

static PyObject *mod_strerror(PyObject *m, PyObject *arg)
{
    (void)m;
    long c = PyLong_AsLong(arg);
    if (c == -1 && PyErr_Occurred()) return NULL;
    return PyUnicode_FromString(elector_strerror((int)c));
}

static PyObject *mod_err_name(PyObject *m, PyObject *arg)
{
    (void)m;
    long c = PyLong_AsLong(arg);
    if (c == -1 && PyErr_Occurred()) return NULL;
    return PyUnicode_FromString(elector_err_name((int)c));
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

static PyObject *mod_set_fork_error(PyObject *m, PyObject *cls)
{
    (void)m;
    Py_XDECREF(ext_fork_error);
    Py_INCREF(cls);
    ext_fork_error = cls;
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
                                    "libelector's clients for the elector package.",
                                    -1,
                                    mod_methods,
                                    NULL,
                                    NULL,
                                    NULL,
                                    NULL};

static int add_types(PyObject *m)
{
    static PyTypeObject *types[] = {&ClientType,   &SessionType, &ElectionType,
                                    &ObserverType, &OpType,      &LeaderOpType,
                                    &KvOpType};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (PyType_Ready(types[i]) < 0) return -1;
        /* "elector._elector.Client" -> "Client" */
        const char *name = strrchr(types[i]->tp_name, '.') + 1;
        Py_INCREF(types[i]);
        if (PyModule_AddObject(m, name, (PyObject *)types[i]) < 0) {
            Py_DECREF(types[i]);
            return -1;
        }
    }
    return 0;
}

PyMODINIT_FUNC PyInit__elector(void);
PyMODINIT_FUNC PyInit__elector(void)
{
    PyObject *m = PyModule_Create(&moddef);
    if (!m) return NULL;
    if (add_types(m) < 0) {
        Py_DECREF(m);
        return NULL;
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
