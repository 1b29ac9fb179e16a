/* broker/dispatch/_slots.h: what the compiled request parses (_offset_commit.c, _produce.c) share:
   filling a generated message class's slots directly, and reading the frame's big-endian integers
   and UTF-8 strings. Include after Python.h and structmember.h. */

#ifndef PYKBROKER_DISPATCH_SLOTS_H
#define PYKBROKER_DISPATCH_SLOTS_H

#include <stdint.h>

/* the slot offsets of ``fields`` in ``cls``; -1 (TypeError) if one is not an object slot of it */
static int
slot_offsets(PyTypeObject *cls, const char **fields, int count, Py_ssize_t *out)
{
    for (int f = 0; f < count; f++) {
        PyObject *d = PyDict_GetItemString(cls->tp_dict, fields[f]); /* borrowed */
        if (d == NULL || Py_TYPE(d) != &PyMemberDescr_Type ||
            ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
            PyErr_Format(PyExc_TypeError, "%s has no object slot %s", cls->tp_name, fields[f]);
            return -1;
        }
        out[f] = ((PyMemberDescrObject *)d)->d_member->offset;
    }
    return 0;
}

/* store ``value`` (a new reference, stolen) in the empty slot at ``offset`` of ``o``; -1 if NULL */
static inline int
put(PyObject *o, Py_ssize_t offset, PyObject *value)
{
    *(PyObject **)((char *)o + offset) = value;
    return value == NULL ? -1 : 0;
}

/* a fresh instance of ``cls`` with every slot empty (new reference), as the Python parses' ``new`` */
static inline PyObject *
new_object(PyTypeObject *cls)
{
    return cls->tp_alloc(cls, 0);
}

static inline int16_t
i16(const unsigned char *d)
{
    return (int16_t)(((uint16_t)d[0] << 8) | d[1]);
}

static inline int32_t
i32(const unsigned char *d)
{
    return (int32_t)(((uint32_t)d[0] << 24) | ((uint32_t)d[1] << 16) | ((uint32_t)d[2] << 8) | d[3]);
}

static inline int64_t
i64(const unsigned char *d)
{
    return (int64_t)(((uint64_t)(uint32_t)i32(d) << 32) | (uint32_t)i32(d + 4));
}

/* The UTF-8 string of the n bytes at d (new reference), or NULL with no error set where the Python
   parse would not take it (and NULL with an error set on MemoryError). */
static inline PyObject *
utf8(const unsigned char *d, Py_ssize_t n)
{
    PyObject *s = PyUnicode_DecodeUTF8((const char *)d, n, NULL);
    if (s == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
        PyErr_Clear(); /* the Python parse hands it to the generated decoder, which names it */
    return s;
}

/* The (frame, pos, version) arguments of a parse named ``name`` (a module function of a bound
   module: ``bound``); -1 with an error set when they are not that. */
static int
request_args(const char *name, int bound, PyObject *const *args, Py_ssize_t nargs, PyObject **frame,
             Py_ssize_t *pos, long *version)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "%s(frame, pos, version)", name);
        return -1;
    }
    if (!bound) {
        PyErr_Format(PyExc_RuntimeError, "%s before bind()", name);
        return -1;
    }
    *frame = args[0];
    *version = PyLong_AsLong(args[2]);
    *pos = PyLong_AsSsize_t(args[1]);
    return PyErr_Occurred() ? -1 : 0;
}

/* bind()'s common part: the request, topic and partition classes args[0..2] (the caller checked
   they are types), their slot offsets of ``fields``, each class kept (a strong reference) in *cls */
static int
bind_classes(PyObject *const *args, PyTypeObject **cls[3], const char **fields[3], const int count[3],
             Py_ssize_t *slots[3])
{
    for (int i = 0; i < 3; i++)
        if (slot_offsets((PyTypeObject *)args[i], fields[i], count[i], slots[i]) < 0)
            return -1;
    for (int i = 0; i < 3; i++)
        Py_XSETREF(*cls[i], (PyTypeObject *)Py_NewRef(args[i]));
    return 0;
}

#endif
