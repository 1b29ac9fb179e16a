/* broker.dispatch._produce: the Produce request of one topic and one partition (librdkafka's: one
   request per partition batch), decoded in C.

   one_partition_request(frame, pos, version) does what broker/dispatch/produce.py's
   _one_partition_request does for versions 3-13: a request of one topic (by name, from v13 by id)
   of one partition carrying records, and from v9 no tagged field and one-byte compact lengths for
   the transactional id and the topic name. It returns (ProduceRequest, position after it), built
   with the same field values as the Python parse (the classes given once to bind()): the records are
   a memoryview of the frame, as memoryview(frame)[start:stop] is (writable where the frame is a
   bytearray: the append stamps the batch in place). For anything else -- another version, another
   shape, a frame that ends early, a string that is not UTF-8, a frame that is neither bytes nor
   bytearray -- it returns None and the caller runs the Python parse, which hands what it does not
   take to the generated decoder. It never raises for malformed input and reads no byte outside the
   frame, so this module decides only the accepted case; tests/dispatch/test_produce_decoder.py
   holds it to the Python parse over every version and mutated frames.

   Built by `pip install -e .` (setup.py, an optional extension: without a compiler the install goes
   on and the broker uses the Python parse; PYKBROKER_NATIVE=0 disables it at run time). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <structmember.h>

#include "_slots.h"

/* bind(): the request, topic and partition classes (strong references), where each keeps its
   fields (slot offsets, as broker/dispatch/_offset_commit.c stores them), the zero UUID and the
   function that makes a topic id of 16 bytes (broker.protocol.primitives.to_uuid). A fresh object's
   slots are empty, so a field is stored there directly, not through setattr. */
enum { R_TID, R_ACKS, R_TIMEOUT, R_TOPICS, R_TAGGED, R_COUNT };
enum { T_NAME, T_ID, T_PARTITIONS, T_TAGGED, T_COUNT };
enum { P_INDEX, P_RECORDS, P_TAGGED, P_COUNT };
static const char *request_fields[R_COUNT] = {"transactional_id", "acks", "timeout_ms", "topic_data",
                                              "_unknown_tagged"};
static const char *topic_fields[T_COUNT] = {"name", "topic_id", "partition_data", "_unknown_tagged"};
static const char *partition_fields[P_COUNT] = {"index", "records", "_unknown_tagged"};
static PyTypeObject *request_cls, *topic_cls, *partition_cls;
static Py_ssize_t request_slots[R_COUNT], topic_slots[T_COUNT], partition_slots[P_COUNT];
static PyObject *zero_uuid, *to_uuid;
static PyObject *empty_str;

/* A compact string (v9+) of one length byte at *pos: 0 null (where nullable), 1-127 0-126 bytes;
   the str (new reference), Py_None for null, or NULL as utf8() says. */
static PyObject *
compact_string(const unsigned char *d, Py_ssize_t end, Py_ssize_t *pos, int nullable)
{
    if (*pos >= end)
        return NULL;
    Py_ssize_t n = (Py_ssize_t)d[*pos] - 1;
    *pos += 1;
    if (n > 126 || (n < 0 && !nullable) || *pos + n > end)
        return NULL;
    if (n < 0)
        Py_RETURN_NONE;
    *pos += n;
    return utf8(d + *pos - n, n);
}

static PyObject *
one_partition_request(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *frame;
    Py_ssize_t pos;
    long version;
    if (request_args("one_partition_request", request_cls != NULL, args, nargs, &frame, &pos, &version) < 0)
        return NULL;
    const unsigned char *d;
    Py_ssize_t end;
    if (PyBytes_CheckExact(frame)) {
        d = (const unsigned char *)PyBytes_AS_STRING(frame);
        end = PyBytes_GET_SIZE(frame);
    }
    else if (PyByteArray_CheckExact(frame)) {
        d = (const unsigned char *)PyByteArray_AS_STRING(frame);
        end = PyByteArray_GET_SIZE(frame);
    }
    else
        Py_RETURN_NONE;
    if (version < 3 || version > 13 || pos < 0 || pos > end)
        Py_RETURN_NONE;

    PyObject *tid = NULL, *name = NULL, *topic_id = NULL, *records = NULL;
    PyObject *part = NULL, *parts = NULL, *topic = NULL, *topics = NULL, *req = NULL, *out = NULL;
    int32_t acks, timeout, index;
    Py_ssize_t start, n;

    if (version < 9) {
        /* transactional id (int16 length, negative: null), acks, timeout, one topic, its name */
        if (pos + 2 > end)
            goto refuse;
        n = i16(d + pos);
        pos += 2;
        if (n < 0)
            tid = Py_NewRef(Py_None);
        else if (pos + n > end)
            goto refuse;
        else if ((tid = utf8(d + pos, n)) == NULL)
            goto refuse;
        else
            pos += n;
        if (pos + 12 > end)
            goto refuse;
        acks = i16(d + pos);
        timeout = i32(d + pos + 2);
        n = i16(d + pos + 10);
        if (i32(d + pos + 6) != 1 || n < 0)
            goto refuse;
        pos += 12;
        if (pos + n > end || (name = utf8(d + pos, n)) == NULL)
            goto refuse;
        pos += n;
        /* one partition: its index, the records' int32 length (negative: null, not this parse's) */
        if (pos + 12 > end)
            goto refuse;
        index = i32(d + pos + 4);
        n = i32(d + pos + 8);
        if (i32(d + pos) != 1 || n < 0)
            goto refuse;
        pos += 12;
        if (pos + n > end)
            goto refuse;
        start = pos;
        pos += n;
        topic_id = Py_NewRef(zero_uuid);
    }
    else {
        /* compact transactional id, acks, timeout, one topic by compact name or (v13) by id */
        if ((tid = compact_string(d, end, &pos, 1)) == NULL)
            goto refuse;
        if (pos + 7 > end || d[pos + 6] != 2)
            goto refuse;
        acks = i16(d + pos);
        timeout = i32(d + pos + 2);
        pos += 7;
        if (version >= 13) {
            if (pos + 16 > end)
                goto refuse;
            PyObject *raw = PyBytes_FromStringAndSize((const char *)d + pos, 16);
            if (raw == NULL)
                goto fail;
            topic_id = PyObject_CallOneArg(to_uuid, raw);
            Py_DECREF(raw);
            if (topic_id == NULL)
                goto fail;
            name = Py_NewRef(empty_str);
            pos += 16;
        }
        else {
            if ((name = compact_string(d, end, &pos, 0)) == NULL)
                goto refuse;
            topic_id = Py_NewRef(zero_uuid);
        }
        /* one partition: its index, the records' compact length (an unsigned varint of at most five
           bytes, as primitives.uvarint_tail reads it; 0, null, is not this parse's), then the
           tagged fields of the partition, the topic and the request: none */
        if (pos + 6 > end || d[pos] != 2)
            goto refuse;
        index = i32(d + pos + 1);
        pos += 5;
        uint64_t length = 0;
        for (int shift = 0;; shift += 7) {
            if (shift > 28 || pos >= end)
                goto refuse;
            unsigned char byte = d[pos++];
            length |= (uint64_t)(byte & 0x7F) << shift;
            if (byte < 0x80)
                break;
        }
        if (length == 0 || length - 1 > (uint64_t)(end - pos))
            goto refuse;
        n = (Py_ssize_t)(length - 1);
        if (pos + n + 3 > end || d[pos + n] || d[pos + n + 1] || d[pos + n + 2])
            goto refuse;
        start = pos;
        pos += n + 3;
    }

    /* the records: memoryview(frame)[start:start + n], as the Python parse makes them */
    PyObject *whole = PyMemoryView_FromObject(frame);
    if (whole == NULL)
        goto fail;
    records = PySequence_GetSlice(whole, start, start + n);
    Py_DECREF(whole);
    if (records == NULL || (part = new_object(partition_cls)) == NULL)
        goto fail;
    put(part, partition_slots[P_RECORDS], records);
    put(part, partition_slots[P_TAGGED], Py_NewRef(Py_None));
    records = NULL; /* (the partition holds them) */
    if (put(part, partition_slots[P_INDEX], PyLong_FromLong(index)) < 0)
        goto fail;
    if ((parts = PyList_New(1)) == NULL)
        goto fail;
    PyList_SET_ITEM(parts, 0, part);
    part = NULL; /* (the list holds it) */
    if ((topic = new_object(topic_cls)) == NULL)
        goto fail;
    put(topic, topic_slots[T_NAME], name);
    put(topic, topic_slots[T_ID], topic_id);
    put(topic, topic_slots[T_PARTITIONS], parts);
    put(topic, topic_slots[T_TAGGED], Py_NewRef(Py_None));
    name = topic_id = parts = NULL; /* (the topic holds them) */
    if ((topics = PyList_New(1)) == NULL)
        goto fail;
    PyList_SET_ITEM(topics, 0, topic);
    topic = NULL; /* (the list holds it) */
    if ((req = new_object(request_cls)) == NULL)
        goto fail;
    const Py_ssize_t *o = request_slots;
    put(req, o[R_TID], tid);
    put(req, o[R_TOPICS], topics);
    put(req, o[R_TAGGED], Py_NewRef(Py_None));
    tid = topics = NULL; /* (the request holds them) */
    if (put(req, o[R_ACKS], PyLong_FromLong(acks)) < 0 || put(req, o[R_TIMEOUT], PyLong_FromLong(timeout)) < 0)
        goto fail;
    out = Py_BuildValue("(On)", req, pos);
    goto fail; /* (releases the references; out is the result) */

refuse:
    if (PyErr_Occurred())
        goto fail; /* a MemoryError */
    out = Py_NewRef(Py_None);
fail:
    Py_XDECREF(tid);
    Py_XDECREF(name);
    Py_XDECREF(topic_id);
    Py_XDECREF(records);
    Py_XDECREF(part);
    Py_XDECREF(parts);
    Py_XDECREF(topic);
    Py_XDECREF(topics);
    Py_XDECREF(req);
    return out;
}

static PyObject *
bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyType_Check(args[0]) || !PyType_Check(args[1]) || !PyType_Check(args[2]) ||
        !PyCallable_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "bind(ProduceRequest, TopicProduceData, PartitionProduceData, zero uuid, to_uuid)");
        return NULL;
    }
    PyTypeObject **cls[3] = {&request_cls, &topic_cls, &partition_cls};
    const char **fields[3] = {request_fields, topic_fields, partition_fields};
    const int count[3] = {R_COUNT, T_COUNT, P_COUNT};
    Py_ssize_t *slots[3] = {request_slots, topic_slots, partition_slots};
    if (bind_classes(args, cls, fields, count, slots) < 0)
        return NULL;
    Py_XSETREF(zero_uuid, Py_NewRef(args[3]));
    Py_XSETREF(to_uuid, Py_NewRef(args[4]));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"one_partition_request", (PyCFunction)(void (*)(void))one_partition_request, METH_FASTCALL,
     "one_partition_request(frame, pos, version) -> (ProduceRequest, end) for a request of one partition, "
     "else None"},
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL,
     "bind(ProduceRequest, TopicProduceData, PartitionProduceData, zero uuid, to_uuid)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "broker.dispatch._produce",
    "The Produce request of one topic and one partition, decoded in C.", -1, methods,
};

PyMODINIT_FUNC
PyInit__produce(void)
{
    if ((empty_str = PyUnicode_FromString("")) == NULL)
        return NULL;
    return PyModule_Create(&module);
}
