/* broker.log._native: the produce hot path's record walk, compiled.

   check_records(section, count) walks the records section of an uncompressed (or already
   decompressed) v2 batch exactly as broker/log/streaming.py's _check_plain does and returns what it
   learns, (min timestamp delta, max timestamp delta, first timestamp delta, every attributes byte 0),
   or None when the section is malformed in any way. It never raises for malformed input and reads
   no byte outside the buffer: on None the caller runs the pure-Python walk, which raises the
   InvalidBatch (INVALID_RECORD) with Kafka's text. So this module decides only the accepted case,
   and tests/log/test_native.py checks that it accepts exactly what the Python walk accepts, with the
   same results.

   Built by `pip install -e .` (setup.py, an optional extension: without a compiler the install goes
   on and the broker uses the Python walk; PYKBROKER_NATIVE=0 disables it at run time). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "_varint.h"

/* The walk of _check_plain; 0 and the facts, or -1 for a section it refuses. */
static int
walk(const unsigned char *d, int64_t n, int64_t count, int64_t *lo_out, int64_t *hi_out,
     int64_t *first_out, int *plain_out)
{
    int64_t pos = 0, lo = 0, hi = 0, first = 0, v;
    unsigned int attrs = 0;
    if (count > 0 && count > n / 7) /* the smallest record takes 7 bytes */
        return -1;
    for (int64_t i = 0; i < count; i++) {
        if (read_varint(d, n, &pos, 5, &v))
            return -1;
        int64_t end = pos + v;
        if (v < 6 || end > n)
            return -1;
        attrs |= d[pos++];
        if (read_varint(d, n, &pos, 10, &v))
            return -1;
        if (i == 0)
            first = lo = hi = v;
        else if (v > hi)
            hi = v;
        else if (v < lo)
            lo = v;
        if (read_varint(d, n, &pos, 5, &v) || v != i) /* offset deltas run 0, 1, 2, ... */
            return -1;
        for (int field = 0; field < 2; field++) { /* key, then value: length -1 is null */
            if (read_varint(d, n, &pos, 5, &v) || v < -1)
                return -1;
            if (v > 0)
                pos += v;
            if (pos >= end)
                return -1;
        }
        int64_t headers;
        if (read_varint(d, n, &pos, 5, &headers) || headers < 0 || headers * 2 > end - pos)
            return -1;
        for (int64_t h = 0; h < headers; h++) {
            if (read_varint(d, n, &pos, 5, &v) || v < 0 || pos + v > end)
                return -1; /* header key */
            pos += v;
            if (read_varint(d, n, &pos, 5, &v) || v < -1 || pos + v > end)
                return -1; /* header value */
            if (v > 0)
                pos += v;
        }
        if (pos != end)
            return -1;
    }
    if (pos != n)
        return -1;
    *lo_out = lo;
    *hi_out = hi;
    *first_out = first;
    *plain_out = attrs == 0;
    return 0;
}

static PyObject *
check_records(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "check_records(section, count) takes 2 arguments");
        return NULL;
    }
    long long count = PyLong_AsLongLong(args[1]);
    if (count == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    int64_t lo, hi, first;
    int plain, rc;
    /* the GIL is kept: the walk takes microseconds, and giving it up would hand it to the flush
       thread for up to a switch interval */
    rc = walk((const unsigned char *)view.buf, (int64_t)view.len, (int64_t)count, &lo, &hi, &first, &plain);
    PyBuffer_Release(&view);
    if (rc)
        Py_RETURN_NONE;
    return Py_BuildValue("(LLLO)", (long long)lo, (long long)hi, (long long)first,
                         plain ? Py_True : Py_False);
}

static PyMethodDef methods[] = {
    {"check_records", (PyCFunction)(void (*)(void))check_records, METH_FASTCALL,
     "check_records(section, count) -> (min ts delta, max ts delta, first ts delta, attributes all 0)"
     " or None when the records section is malformed"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "broker.log._native", "The produce hot path's record walk, compiled.", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    return PyModule_Create(&module);
}
