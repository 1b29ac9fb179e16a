/* broker.dispatch._offset_commit: the common OffsetCommit request of the flexible versions, decoded
   in C.

   common_request(frame, pos, version) does what broker/dispatch/offset_commit.py's _common_request
   does for versions 8 and 9 (topics by name): a request of one topic whose partitions all carry
   the empty metadata and no tagged field, every string and array at most 126 long (one-byte compact
   lengths). It returns (OffsetCommitRequest, position after it), built with the same field values
   as the Python parse (the classes given once to bind()), or None for anything else -- another
   version, another shape, a frame that ends early, a string that is not UTF-8 -- and then the
   caller runs the Python parse, which hands what it does not take to the generated decoder. It never
   raises for malformed input and reads no byte outside the frame, so this module decides only the
   accepted case; tests/dispatch/test_offset_commit_decoder.py holds it to the Python parse over
   every version and mutated frames.

   Built by `pip install -e .` (setup.py, an optional extension: without a compiler the install goes
   on and the broker uses the Python parse; PYKBROKER_NATIVE=0 disables it at run time). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <structmember.h>

#include "_slots.h"

/* bind(): the request, topic and partition classes (strong references), where each keeps its
   fields (slot offsets, as broker/coordinator/_replay.c reads a record's), and the zero UUID. A
   fresh object's slots are empty, so a field is stored there directly, not through setattr. */
enum { R_GROUP, R_GENERATION, R_MEMBER, R_INSTANCE, R_RETENTION, R_TOPICS, R_TAGGED, R_COUNT };
enum { T_NAME, T_ID, T_PARTITIONS, T_TAGGED, T_COUNT };
enum { P_INDEX, P_OFFSET, P_EPOCH, P_TIMESTAMP, P_METADATA, P_TAGGED, P_COUNT };
static const char *request_fields[R_COUNT] = {"group_id",          "generation_id_or_member_epoch",
                                              "member_id",         "group_instance_id",
                                              "retention_time_ms", "topics",
                                              "_unknown_tagged"};
static const char *topic_fields[T_COUNT] = {"name", "topic_id", "partitions", "_unknown_tagged"};
static const char *partition_fields[P_COUNT] = {"partition_index",  "committed_offset",   "committed_leader_epoch",
                                                "commit_timestamp", "committed_metadata", "_unknown_tagged"};
static PyTypeObject *request_cls, *topic_cls, *partition_cls;
static Py_ssize_t request_slots[R_COUNT], topic_slots[T_COUNT], partition_slots[P_COUNT];
static PyObject *zero_uuid;
static PyObject *minus_one, *empty_str;

/* A compact string of one length byte at *pos (0: null, allowed only with nullable; 1-127: 0-126
   bytes): the str (new reference), Py_None for null, or NULL with no error set where the Python
   parse would not take it (and NULL with an error set on MemoryError). */
static PyObject *
compact_string(const unsigned char *d, Py_ssize_t end, Py_ssize_t *pos, int nullable)
{
    if (*pos >= end)
        return NULL;
    int n = (int)d[*pos] - 1;
    *pos += 1;
    if (n > 126 || n < -1 || (n < 0 && !nullable) || *pos + n > end)
        return NULL;
    if (n < 0)
        Py_RETURN_NONE;
    PyObject *s = PyUnicode_DecodeUTF8((const char *)d + *pos, n, NULL);
    if (s == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            PyErr_Clear(); /* the Python parse hands it to the generated decoder, which names it */
        return NULL;
    }
    *pos += n;
    return s;
}

static PyObject *
common_request(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *frame;
    Py_ssize_t pos;
    long version;
    if (request_args("common_request", request_cls != NULL, args, nargs, &frame, &pos, &version) < 0)
        return NULL;
    if (!PyBytes_CheckExact(frame) || version < 8 || version > 9)
        Py_RETURN_NONE;
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(frame);
    Py_ssize_t end = PyBytes_GET_SIZE(frame);
    if (pos < 0 || pos > end)
        Py_RETURN_NONE;

    PyObject *group = NULL, *member = NULL, *instance = NULL, *name = NULL;
    PyObject *parts = NULL, *req = NULL, *topic = NULL, *topics = NULL, *out = NULL;

    /* group id, generation, member id, instance id (nullable), one topic by name */
    if ((group = compact_string(d, end, &pos, 0)) == NULL)
        goto refuse;
    if (pos + 4 > end)
        goto refuse;
    int32_t generation = i32(d + pos);
    pos += 4;
    if ((member = compact_string(d, end, &pos, 0)) == NULL)
        goto refuse;
    if ((instance = compact_string(d, end, &pos, 1)) == NULL)
        goto refuse;
    if (pos >= end || d[pos] != 2) /* one topic */
        goto refuse;
    pos += 1;
    if ((name = compact_string(d, end, &pos, 0)) == NULL)
        goto refuse;
    if (pos >= end)
        goto refuse;
    int count = (int)d[pos] - 1;
    pos += 1;
    if (count < 1 || count > 126)
        goto refuse;
    /* each partition: index, offset, leader epoch, metadata "" (compact length 1), no tagged fields */
    Py_ssize_t stop = pos + 18 * (Py_ssize_t)count;
    if (stop + 2 > end || d[stop] || d[stop + 1]) /* the topic's and the request's tagged fields */
        goto refuse;
    for (Py_ssize_t q = pos + 16; q < stop; q += 18)
        if (d[q] != 1 || d[q + 1])
            goto refuse;

    if ((parts = PyList_New(count)) == NULL)
        goto fail;
    for (int i = 0; i < count; i++, pos += 18) {
        PyObject *p = new_object(partition_cls);
        if (p == NULL)
            goto fail;
        PyList_SET_ITEM(parts, i, p);
        const Py_ssize_t *o = partition_slots;
        if (put(p, o[P_INDEX], PyLong_FromLong(i32(d + pos))) < 0 ||
            put(p, o[P_OFFSET], PyLong_FromLongLong(i64(d + pos + 4))) < 0 ||
            put(p, o[P_EPOCH], PyLong_FromLong(i32(d + pos + 12))) < 0)
            goto fail;
        put(p, o[P_TIMESTAMP], Py_NewRef(minus_one));
        put(p, o[P_METADATA], Py_NewRef(empty_str));
        put(p, o[P_TAGGED], Py_NewRef(Py_None));
    }
    if ((topics = PyList_New(1)) == NULL || (topic = new_object(topic_cls)) == NULL)
        goto fail;
    put(topic, topic_slots[T_NAME], name);
    put(topic, topic_slots[T_ID], Py_NewRef(zero_uuid));
    put(topic, topic_slots[T_PARTITIONS], parts);
    put(topic, topic_slots[T_TAGGED], Py_NewRef(Py_None));
    name = parts = NULL; /* (the topic holds them) */
    PyList_SET_ITEM(topics, 0, topic);
    topic = NULL; /* (the list holds it) */
    if ((req = new_object(request_cls)) == NULL)
        goto fail;
    const Py_ssize_t *o = request_slots;
    put(req, o[R_GROUP], group);
    put(req, o[R_MEMBER], member);
    put(req, o[R_INSTANCE], instance);
    put(req, o[R_RETENTION], Py_NewRef(minus_one));
    put(req, o[R_TOPICS], topics);
    put(req, o[R_TAGGED], Py_NewRef(Py_None));
    group = member = instance = topics = NULL; /* (the request holds them) */
    if (put(req, o[R_GENERATION], PyLong_FromLong(generation)) < 0)
        goto fail;
    out = Py_BuildValue("(On)", req, stop + 2);
    goto fail; /* (releases the references; out is the result) */

refuse:
    if (PyErr_Occurred())
        goto fail; /* a MemoryError */
    out = Py_NewRef(Py_None);
fail:
    Py_XDECREF(group);
    Py_XDECREF(member);
    Py_XDECREF(instance);
    Py_XDECREF(name);
    Py_XDECREF(parts);
    Py_XDECREF(topic);
    Py_XDECREF(topics);
    Py_XDECREF(req);
    return out;
}

static PyObject *
bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyType_Check(args[0]) || !PyType_Check(args[1]) || !PyType_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "bind(OffsetCommitRequest, OffsetCommitRequestTopic, OffsetCommitRequestPartition, zero uuid)");
        return NULL;
    }
    PyTypeObject **cls[3] = {&request_cls, &topic_cls, &partition_cls};
    const char **fields[3] = {request_fields, topic_fields, partition_fields};
    const int count[3] = {R_COUNT, T_COUNT, P_COUNT};
    Py_ssize_t *slots[3] = {request_slots, topic_slots, partition_slots};
    if (bind_classes(args, cls, fields, count, slots) < 0)
        return NULL;
    Py_XSETREF(zero_uuid, Py_NewRef(args[3]));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"common_request", (PyCFunction)(void (*)(void))common_request, METH_FASTCALL,
     "common_request(frame, pos, version) -> (OffsetCommitRequest, end) for the common v8-9 request, else None"},
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL,
     "bind(OffsetCommitRequest, OffsetCommitRequestTopic, OffsetCommitRequestPartition, zero uuid)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "broker.dispatch._offset_commit",
    "The common OffsetCommit request of the flexible versions, decoded in C.", -1, methods,
};

PyMODINIT_FUNC
PyInit__offset_commit(void)
{
    if ((minus_one = PyLong_FromLong(-1)) == NULL || (empty_str = PyUnicode_FromString("")) == NULL)
        return NULL;
    return PyModule_Create(&module);
}
