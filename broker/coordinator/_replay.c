/* broker.coordinator._replay: the start-up replay's walk of the coordinator log's records, compiled.

   scan(section, pos, stop, count, base, min_offset, put_offsets, put_empty_group, unpack[, targets]) walks at
   most `count` records of an uncompressed records section, section[pos:stop], of a batch whose base
   offset is `base`, and applies the two kinds of record that make up nearly all of a compacted
   __consumer_offsets, exactly as the Python fast paths of broker/coordinator/loader.py read them:

   - OffsetCommit records (key type 1) whose value is a v4 in Kafka's layout (version 4, offset,
     leader epoch, a compact metadata string of under 127 bytes, commit timestamp, the topic id as
     tagged field 0): the records of one group and topic in a row are a run, handed over undecoded as
     put_offsets(group, topic, the run's partitions and values packed as bytes (pack_run), unpack);
     unpack(records) (below) turns them into {partition: the last value's bytes} when the state
     first reads them
     (state.PartitionOffsets);
   - GroupMetadata records (key type 2) whose value is a v4 without members (an Empty group):
     put_empty_group(group, protocol type, generation, protocol, leader, state timestamp), the
     arguments of CoordinatorState.replay_empty_group.

   With a 10th argument `targets` (CoordinatorState.native_targets(): the state's dicts and classes),
   the two commonest cases are applied here instead of through the callbacks, making the objects
   those make: a new group's Empty GroupMetadata record makes its ClassicGroup as
   ClassicGroup.replayed does (object.__new__, the fields set in order and the mark of its
   containers left to first use), and a run of a group without offsets yet makes its Offsets({topic:
   PartitionOffsets.packed(records, unpack)}) and lists the group (replay_offsets); anything else
   (an existing group, a group's second topic) still goes through the callbacks.

   Records whose offset is below `min_offset` (a batch the read position starts inside of) are
   skipped (a negative offset delta stops it). It stops at the first record it does not take: any other record type, a tombstone, any
   other value version or layout, headers, a string that is not UTF-8, a varint out of range, a
   malformed or truncated record. It never raises for the data and reads no byte outside
   section[pos:stop]: the caller replays the record it stopped at with the Python code (which raises
   InvalidRecords for a malformed one) and calls scan again after it. An exception raised by a
   callback is raised by scan. Returns (records consumed, the position after them, records applied).

   Built by `pip install -e .` (setup.py, an optional extension: without a compiler the install goes
   on and the loader uses its Python walk; PYKBROKER_NATIVE=0 disables it at run time).
   tests/coordinator/test_replay_native.py holds the two walks to identical replayed state. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../log/_varint.h"

static inline int32_t
be32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3]);
}

static inline int64_t
be64(const unsigned char *p)
{
    return (int64_t)((uint64_t)(uint32_t)be32(p) << 32 | (uint32_t)be32(p + 4));
}

/* 1 when s[0:n] is UTF-8 as Python's strict codec takes it, else 0 (an error is cleared). */
static int
utf8_ok(const unsigned char *s, int64_t n)
{
    int64_t i;
    for (i = 0; i < n; i++)
        if (s[i] >= 0x80)
            break;
    if (i == n)
        return 1;
    PyObject *u = PyUnicode_DecodeUTF8((const char *)s, (Py_ssize_t)n, NULL);
    if (u == NULL) {
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(u);
    return 1;
}

/* A compact string of under 127 bytes at v[*p] (length + 1 in one byte; 0 is null when nullable)
   -> a new str, Py_None (new reference) for null, or NULL (no error set) when it does not decode. */
static PyObject *
compact_string(const unsigned char *v, int64_t n, int64_t *p, int nullable)
{
    if (*p >= n)
        return NULL;
    int len = (int)v[*p] - 1;
    if (len >= 0x7F || (len < 0 && !nullable))
        return NULL;
    if (len < 0) {
        *p += 1;
        Py_RETURN_NONE;
    }
    if (*p + 1 + len > n)
        return NULL;
    PyObject *s = PyUnicode_DecodeUTF8((const char *)v + *p + 1, len, NULL);
    if (s == NULL) {
        PyErr_Clear();
        return NULL;
    }
    *p += 1 + len;
    return s;
}

/* The fields of an Empty group's GroupMetadata record as loader._apply_empty_group reads them: a
   new 6-tuple, NULL with no error set when the record is not one, NULL with an error set on memory
   failure. */
static PyObject *
empty_group(const unsigned char *k, int64_t kn, const unsigned char *v, int64_t vn)
{
    if (vn < 17 || v[0] != 0 || v[1] != 4 || kn < 4 || k[2] >= 0x80 || ((k[2] << 8) | k[3]) + 4 != kn)
        return NULL;
    int64_t p = 2;
    PyObject *protocol_type = NULL, *protocol = NULL, *leader = NULL, *group = NULL;
    protocol_type = compact_string(v, vn, &p, 0);
    if (protocol_type == NULL || p + 4 > vn)
        goto no;
    int32_t generation = be32(v + p);
    p += 4;
    if ((protocol = compact_string(v, vn, &p, 1)) == NULL)
        goto no;
    if ((leader = compact_string(v, vn, &p, 1)) == NULL)
        goto no;
    if (p + 10 != vn || v[p + 8] != 1 || v[p + 9] != 0) /* the timestamp, no members, no tags */
        goto no;
    int64_t timestamp = be64(v + p);
    group = PyUnicode_DecodeUTF8((const char *)k + 4, (Py_ssize_t)(kn - 4), NULL);
    if (group == NULL) {
        PyErr_Clear();
        goto no;
    }
    PyObject *gen = PyLong_FromLong(generation), *ts = PyLong_FromLongLong(timestamp);
    if (gen == NULL || ts == NULL) {
        Py_XDECREF(gen);
        Py_XDECREF(ts);
        goto no;
    }
    PyObject *t = PyTuple_New(6);
    if (t == NULL) {
        Py_DECREF(gen);
        Py_DECREF(ts);
        goto no;
    }
    PyTuple_SET_ITEM(t, 0, group);
    PyTuple_SET_ITEM(t, 1, protocol_type);
    PyTuple_SET_ITEM(t, 2, gen);
    PyTuple_SET_ITEM(t, 3, protocol);
    PyTuple_SET_ITEM(t, 4, leader);
    PyTuple_SET_ITEM(t, 5, ts);
    return t;
no:
    Py_XDECREF(protocol_type);
    Py_XDECREF(protocol);
    Py_XDECREF(leader);
    Py_XDECREF(group);
    return NULL;
}

/* 1 when v[0:n] is an OffsetCommitValue v4 the Python fast path keeps as bytes (loader's
   _OffsetDecoder.apply): metadata of under 127 bytes, valid UTF-8, the topic id as the one tagged
   field. */
static int
offset_value_ok(const unsigned char *v, int64_t n)
{
    if (n < 42 || v[0] != 0 || v[1] != 4 || v[14] >= 0x80 || v[14] == 0)
        return 0;
    int64_t end = 15 + v[14] - 1;
    if (end + 27 != n)
        return 0;
    if (v[end + 8] != 1 || v[end + 9] != 0 || v[end + 10] != 16)
        return 0;
    return end == 15 || utf8_ok(v + 15, end - 15);
}

/* The last topic name decoded by a scan, kept for the next key of the same topic (a topic's name
   is one str for all its groups' runs). */
struct topic_cache {
    const unsigned char *raw;
    int64_t len;
    PyObject *name;
};

/* The group and topic of an OffsetCommit key as loader's _OffsetDecoder._names decodes them; 0, or
   -1 when the key does not add up or a name is not UTF-8. New references in *group and *topic. */
static int
offset_key(const unsigned char *k, int64_t kn, PyObject **group, PyObject **topic, struct topic_cache *tc)
{
    if (kn < 10 || k[2] >= 0x80)
        return -1;
    int64_t p = 4 + ((k[2] << 8) | k[3]);
    if (p + 6 > kn || k[p] >= 0x80 || p + 6 + ((k[p] << 8) | k[p + 1]) != kn)
        return -1;
    const unsigned char *t = k + p + 2;
    int64_t tn = kn - p - 6;
    if (tc->name != NULL && tc->len == tn && memcmp(tc->raw, t, (size_t)tn) == 0) {
        *topic = tc->name;
        Py_INCREF(*topic);
    } else {
        *topic = PyUnicode_DecodeUTF8((const char *)t, (Py_ssize_t)tn, NULL);
        if (*topic == NULL) {
            PyErr_Clear();
            return -1;
        }
        Py_XSETREF(tc->name, Py_NewRef(*topic));
        tc->raw = t;
        tc->len = tn;
    }
    *group = PyUnicode_DecodeUTF8((const char *)k + 4, (Py_ssize_t)(p - 4), NULL);
    if (*group == NULL) {
        PyErr_Clear();
        Py_CLEAR(*topic);
        return -1;
    }
    return 0;
}

/* The state a scan given `targets` makes its objects in directly (CoordinatorState.native_targets):
   groups, consumer_groups and offsets (its dicts), ClassicGroup and GroupState.EMPTY, Offsets and
   PartitionOffsets. Borrowed references, valid for the scan. */
struct targets {
    PyObject *groups, *consumer_groups, *offsets, *group_cls, *empty, *offsets_cls, *parts_cls;
};

/* Attribute names, interned once (module init). */
static PyObject *s_group_id, *s_state, *s_generation, *s_protocol_type, *s_protocol_name, *s_leader_id,
    *s_state_timestamp, *s_no_members_yet, *s_by_topic, *s_raw, *s_records, *s_unpack, *s_empty_tuple;

/* object.__new__(cls): a new instance, no __init__ run. */
static PyObject *
new_instance(PyObject *cls)
{
    return PyBaseObject_Type.tp_new((PyTypeObject *)cls, s_empty_tuple, NULL);
}

/* groups[group] = an Empty group with these fields, made as ClassicGroup.replayed makes it (the
   fields set in its order, the containers left to first use); 0, or -1 with an error set. */
static int
make_group(struct targets *t, PyObject *group, PyObject *protocol_type, PyObject *generation,
           PyObject *protocol, PyObject *leader, PyObject *timestamp)
{
    PyObject *g = new_instance(t->group_cls);
    if (g == NULL)
        return -1;
    int rc = -1;
    if (PyObject_SetAttr(g, s_group_id, group) == 0 && PyObject_SetAttr(g, s_state, t->empty) == 0 &&
        PyObject_SetAttr(g, s_generation, generation) == 0 &&
        PyObject_SetAttr(g, s_protocol_type, protocol_type) == 0 &&
        PyObject_SetAttr(g, s_protocol_name, protocol) == 0 && PyObject_SetAttr(g, s_leader_id, leader) == 0 &&
        PyObject_SetAttr(g, s_state_timestamp, timestamp) == 0 &&
        PyObject_SetAttr(g, s_no_members_yet, Py_True) == 0)
        rc = PyDict_SetItem(t->groups, group, g);
    Py_DECREF(g);
    return rc;
}

/* CoordinatorState.replay_offsets for a group without offsets yet, done here: offsets[group] =
   Offsets({topic: PartitionOffsets.packed(records, unpack)}), and the group listed (an Empty group
   with the defaults) unless a classic or consumer group of that id is. 1 when done, 0 when the
   group has offsets already (the callback's case), -1 with an error set. */
static int
put_offsets_direct(struct targets *t, PyObject *group, PyObject *topic, PyObject *records, PyObject *unpack)
{
    int has = PyDict_Contains(t->offsets, group);
    if (has != 0)
        return has < 0 ? -1 : 0;
    PyObject *parts = new_instance(t->parts_cls);
    if (parts == NULL)
        return -1;
    PyObject *by_topic = NULL, *off = NULL;
    int rc = -1;
    if (PyObject_SetAttr(parts, s_raw, Py_None) || PyObject_SetAttr(parts, s_records, records) ||
        PyObject_SetAttr(parts, s_unpack, unpack))
        goto done;
    if ((by_topic = PyDict_New()) == NULL || PyDict_SetItem(by_topic, topic, parts))
        goto done;
    if ((off = new_instance(t->offsets_cls)) == NULL || PyObject_SetAttr(off, s_by_topic, by_topic) ||
        PyDict_SetItem(t->offsets, group, off))
        goto done;
    int listed = PyDict_Contains(t->groups, group);
    if (listed == 0)
        listed = PyDict_Contains(t->consumer_groups, group);
    if (listed < 0)
        goto done;
    if (listed == 0) {
        PyObject *zero = PyLong_FromLong(0), *minus = PyLong_FromLong(-1);
        if (zero != NULL && minus != NULL)
            rc = make_group(t, group, Py_None, zero, Py_None, Py_None, minus) ? -1 : 1;
        Py_XDECREF(zero);
        Py_XDECREF(minus);
    } else {
        rc = 1;
    }
done:
    Py_DECREF(parts);
    Py_XDECREF(by_topic);
    Py_XDECREF(off);
    return rc;
}

/* The run of offsets gathered so far: its records, section[start:end], of one group and topic. */
struct run {
    int64_t start, end;
    PyObject *group, *topic;
    const unsigned char *key; /* its first record's key minus the partition */
    int64_t key_len;
};

/* put(group, topic, the run's records, unpack) for a run gathered; 0, or -1 with an error set. */
/* A run's records as handed over, packed: per record in log order its partition (4 bytes, big
   endian), its value's length (1 byte: a value scan takes is under 256 bytes) and the value. Half
   the bytes of the records themselves (the key, the record's framing are not kept): the packed
   runs are most of the memory a restart touches. A new bytes object, NULL with an error set. */
static PyObject *
pack_run(struct run *r, const unsigned char *d)
{
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(r->end - r->start));
    if (out == NULL)
        return NULL;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out), *w = o;
    int64_t pos = r->start;
    while (pos < r->end) { /* records scan took: every field checked already */
        int64_t p = pos, v = 0, length = 0, key_len = 0, value_len = 0;
        read_varint(d, r->end, &p, 5, &length);
        int64_t end = p + length;
        p += 1;
        read_varint(d, end, &p, 10, &v);
        read_varint(d, end, &p, 5, &v);
        read_varint(d, end, &p, 5, &key_len);
        memcpy(w, d + p + key_len - 4, 4);
        p += key_len;
        read_varint(d, end, &p, 5, &value_len);
        w[4] = (unsigned char)value_len;
        memcpy(w + 5, d + p, (size_t)value_len);
        w += 5 + value_len;
        pos = end;
    }
    if (_PyBytes_Resize(&out, (Py_ssize_t)(w - o)) < 0)
        return NULL;
    return out;
}

static int
flush_run(struct run *r, const unsigned char *d, PyObject *put, PyObject *unpack, struct targets *t)
{
    if (r->group == NULL)
        return 0;
    int rc = -1;
    PyObject *records = pack_run(r, d);
    int direct = records == NULL || t == NULL ? 0 : put_offsets_direct(t, r->group, r->topic, records, unpack);
    if (direct) {
        rc = direct < 0 ? -1 : 0;
        Py_DECREF(records);
    } else if (records != NULL) {
        PyObject *args[4] = {r->group, r->topic, records, unpack};
        PyObject *res = PyObject_Vectorcall(put, args, 4, NULL);
        if (res != NULL) {
            rc = 0;
            Py_DECREF(res);
        }
        Py_DECREF(records);
    }
    Py_CLEAR(r->group);
    Py_CLEAR(r->topic);
    return rc;
}

static PyObject *
scan(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9 && nargs != 10) {
        PyErr_SetString(PyExc_TypeError,
                        "scan(section, pos, stop, count, base, min_offset, put_offsets, put_empty_group, "
                        "unpack[, targets]) takes 9 or 10 arguments");
        return NULL;
    }
    struct targets targets, *tp = NULL;
    if (nargs == 10 && args[9] != Py_None) {
        PyObject *a = args[9];
        if (!PyTuple_Check(a) || PyTuple_GET_SIZE(a) != 7 || !PyDict_CheckExact(PyTuple_GET_ITEM(a, 0)) ||
            !PyDict_CheckExact(PyTuple_GET_ITEM(a, 1)) || !PyDict_CheckExact(PyTuple_GET_ITEM(a, 2)) ||
            !PyType_Check(PyTuple_GET_ITEM(a, 3)) || !PyType_Check(PyTuple_GET_ITEM(a, 5)) ||
            !PyType_Check(PyTuple_GET_ITEM(a, 6))) {
            PyErr_SetString(PyExc_TypeError,
                            "targets: (groups, consumer_groups, offsets dicts, ClassicGroup, GroupState.EMPTY, "
                            "Offsets, PartitionOffsets)");
            return NULL;
        }
        targets.groups = PyTuple_GET_ITEM(a, 0);
        targets.consumer_groups = PyTuple_GET_ITEM(a, 1);
        targets.offsets = PyTuple_GET_ITEM(a, 2);
        targets.group_cls = PyTuple_GET_ITEM(a, 3);
        targets.empty = PyTuple_GET_ITEM(a, 4);
        targets.offsets_cls = PyTuple_GET_ITEM(a, 5);
        targets.parts_cls = PyTuple_GET_ITEM(a, 6);
        tp = &targets;
    }
    long long start = PyLong_AsLongLong(args[1]), stop = PyLong_AsLongLong(args[2]);
    long long count = PyLong_AsLongLong(args[3]), base = PyLong_AsLongLong(args[4]);
    long long min_offset = PyLong_AsLongLong(args[5]);
    PyObject *put = args[6], *put_group = args[7], *unpack = args[8];
    if (PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *d = (const unsigned char *)view.buf;
    int64_t n = stop < (long long)view.len ? (int64_t)stop : (int64_t)view.len;
    int64_t pos = start < 0 ? n : (int64_t)start;
    struct run run = {0, 0, NULL, NULL, NULL, -1};
    struct topic_cache topics = {NULL, 0, NULL};
    long long consumed = 0, applied = 0;
    while (consumed < count && pos < n) {
        int64_t p = pos, v, length, key_len, value_len;
        if (read_varint(d, n, &p, 5, &length) || length < 6 || p + length > n)
            break;
        int64_t end = p + length;
        p += 1; /* attributes */
        if (read_varint(d, end, &p, 10, &v)) /* timestamp delta */
            break;
        if (read_varint(d, end, &p, 5, &v)) /* offset delta */
            break;
        long long offset = base + v;
        if (read_varint(d, end, &p, 5, &key_len) || key_len < -1 || p + (key_len > 0 ? key_len : 0) > end)
            break;
        const unsigned char *key = d + p;
        if (key_len > 0)
            p += key_len;
        if (read_varint(d, end, &p, 5, &value_len) || value_len < -1 ||
            p + (value_len > 0 ? value_len : 0) > end)
            break;
        const unsigned char *value = d + p;
        if (value_len > 0)
            p += value_len;
        if (p + 1 != end || d[p] != 0) /* no headers, nothing after them */
            break;
        if (offset < min_offset) {
            if (base >= min_offset)
                break; /* a negative offset delta: the Python walk's (which takes or skips it as it does) */
            if (flush_run(&run, d, put, unpack, tp))
                goto fail;
            pos = end;
            consumed++;
            continue;
        }
        if (key_len < 2 || value_len <= 0 || key[0] != 0)
            break;
        if (key[1] == 1) {
            if (!offset_value_ok(value, value_len))
                break;
            if (run.group == NULL || key_len != run.key_len + 4 || memcmp(key, run.key, (size_t)run.key_len) != 0) {
                PyObject *group, *topic;
                if (offset_key(key, key_len, &group, &topic, &topics))
                    break;
                if (flush_run(&run, d, put, unpack, tp)) {
                    Py_DECREF(group);
                    Py_DECREF(topic);
                    goto fail;
                }
                run.group = group;
                run.topic = topic;
                run.start = pos;
                run.key = key;
                run.key_len = key_len - 4;
            }
            run.end = end;
        } else if (key[1] == 2) {
            PyObject *ev = empty_group(key, key_len, value, value_len);
            if (ev == NULL) {
                if (PyErr_Occurred())
                    goto fail;
                break;
            }
            if (flush_run(&run, d, put, unpack, tp)) {
                Py_DECREF(ev);
                goto fail;
            }
            int known = tp == NULL ? 1 : PyDict_Contains(tp->groups, PyTuple_GET_ITEM(ev, 0));
            if (known == 0) {
                /* a new group: made here, as replay_empty_group makes it (protocol type "" is None) */
                PyObject *pt = PyTuple_GET_ITEM(ev, 1);
                known = make_group(tp, PyTuple_GET_ITEM(ev, 0), PyUnicode_GET_LENGTH(pt) ? pt : Py_None,
                                   PyTuple_GET_ITEM(ev, 2), PyTuple_GET_ITEM(ev, 3), PyTuple_GET_ITEM(ev, 4),
                                   PyTuple_GET_ITEM(ev, 5));
                if (known < 0) {
                    Py_DECREF(ev);
                    goto fail;
                }
            } else if (known > 0) {
                PyObject *res = PyObject_Call(put_group, ev, NULL);
                if (res == NULL)
                    known = -1;
                Py_XDECREF(res);
            }
            Py_DECREF(ev);
            if (known < 0)
                goto fail;
        } else {
            break;
        }
        pos = end;
        consumed++;
        applied++;
    }
    if (flush_run(&run, d, put, unpack, tp))
        goto fail;
    Py_XDECREF(topics.name);
    PyBuffer_Release(&view);
    return Py_BuildValue("(LLL)", consumed, (long long)pos, applied);
fail:
    Py_CLEAR(run.group);
    Py_CLEAR(run.topic);
    Py_XDECREF(topics.name);
    PyBuffer_Release(&view);
    return NULL;
}

/* unpack(records) -> {partition: value bytes}: a run of OffsetCommit records that scan took, as it
   handed them to put_offsets (pack_run), read again: the last value of each partition in the order
   of first appearance. ValueError for anything else (each value must be a v4 of 42 bytes or more). */
static PyObject *
unpack(PyObject *Py_UNUSED(self), PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *d = (const unsigned char *)view.buf;
    int64_t n = (int64_t)view.len, pos = 0;
    PyObject *out = PyDict_New();
    if (out == NULL)
        goto fail;
    while (pos < n) {
        if (pos + 5 > n)
            goto bad;
        int64_t value_len = d[pos + 4];
        const unsigned char *value = d + pos + 5;
        if (value_len < 42 || pos + 5 + value_len > n || value[0] != 0 || value[1] != 4)
            goto bad;
        PyObject *part = PyLong_FromLong(be32(d + pos));
        PyObject *raw = PyBytes_FromStringAndSize((const char *)value, (Py_ssize_t)value_len);
        int rc = part == NULL || raw == NULL ? -1 : PyDict_SetItem(out, part, raw);
        Py_XDECREF(part);
        Py_XDECREF(raw);
        if (rc)
            goto fail;
        pos += 5 + value_len;
    }
    PyBuffer_Release(&view);
    return out;
bad:
    PyErr_SetString(PyExc_ValueError, "not a run of OffsetCommit records that scan took");
fail:
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}


/* ---------------------------------------------------------------- commit_records

   commit_records(records, cls, uuid_cls) -> (section bytes, n): the records section of records[0:n]
   as records.py ``to_batch`` encodes it (the same bytes, offset deltas 0..n-1), for the leading
   records that are its common OffsetCommit record: an instance of exactly ``cls``
   (OffsetCommitRecord) whose group and topic are str (UTF-8 encodable, under 32,768 bytes),
   partition, offset, leader epoch and commit timestamp ints in their fields' ranges, metadata the
   empty str, and topic id an instance of exactly ``uuid_cls`` (uuid.UUID) other than the zero
   UUID. Each such record's ``raw`` is set to its value's bytes, as to_batch sets it. It stops at
   the first record that is anything else (n < len(records)): to_batch encodes the rest in Python
   (which raises what it raises for a bad field). The slots are read at their offsets in the
   object, found once from ``cls``'s member descriptors.
   tests/coordinator/test_records_native.py holds the two encoders to the same bytes. */

#include <structmember.h>

enum { F_GROUP, F_TOPIC, F_PARTITION, F_OFFSET, F_EPOCH, F_METADATA, F_TIMESTAMP, F_TOPIC_ID, F_RAW, F_COUNT };
static const char *commit_fields[F_COUNT] = {"group",           "topic",    "partition", "offset", "leader_epoch",
                                             "metadata",        "commit_timestamp", "topic_id", "raw"};
static PyTypeObject *commit_cls;       /* the class whose slot offsets are known (a strong reference) */
static Py_ssize_t commit_offsets[F_COUNT];
static PyObject *s_int;

static int
commit_slots(PyTypeObject *cls)
{
    if (cls == commit_cls)
        return 0;
    Py_ssize_t offsets[F_COUNT];
    for (int f = 0; f < F_COUNT; f++) {
        PyObject *d = PyDict_GetItemString(cls->tp_dict, commit_fields[f]); /* borrowed */
        if (d == NULL || Py_TYPE(d) != &PyMemberDescr_Type) {
            PyErr_Format(PyExc_TypeError, "%s has no slot %s", cls->tp_name, commit_fields[f]);
            return -1;
        }
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type != T_OBJECT_EX) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot", cls->tp_name, commit_fields[f]);
            return -1;
        }
        offsets[f] = m->offset;
    }
    memcpy(commit_offsets, offsets, sizeof(offsets));
    Py_INCREF(cls);
    Py_XSETREF(commit_cls, cls);
    return 0;
}

static inline PyObject *
slot(PyObject *o, int f)
{
    return *(PyObject **)((char *)o + commit_offsets[f]);
}

/* the zigzag varint of v >= 0 at out; returns its length */
static inline int
put_varint(unsigned char *out, uint64_t v)
{
    uint64_t z = v << 1;
    int n = 0;
    while (z >= 0x80) {
        out[n++] = (unsigned char)(z | 0x80);
        z >>= 7;
    }
    out[n++] = (unsigned char)z;
    return n;
}

static inline void
put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static inline void
put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

/* an int field in [lo, hi] (exactly int: a subclass or another type is Python's to encode) */
static inline int
int_field(PyObject *v, int64_t lo, int64_t hi, int64_t *out)
{
    if (v == NULL || !PyLong_CheckExact(v))
        return -1;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return -1;
    }
    if (x < lo || x > hi)
        return -1;
    *out = (int64_t)x;
    return 0;
}

static PyObject *
commit_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyList_Check(args[0]) || !PyType_Check(args[1]) || !PyType_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "commit_records(records, cls, uuid_cls)");
        return NULL;
    }
    PyObject *records = args[0];
    PyTypeObject *cls = (PyTypeObject *)args[1], *uuid_cls = (PyTypeObject *)args[2];
    if (commit_slots(cls) < 0)
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(records);
    size_t cap = 4096, len = 0;
    unsigned char *buf = PyMem_Malloc(cap);
    if (buf == NULL)
        return PyErr_NoMemory();
    /* the key of the last group and topic (type, group, topic, without the partition), with its
       length's varint before it */
    unsigned char *key = NULL;
    size_t key_len = 0;
    PyObject *last_group = NULL, *last_topic = NULL, *last_tid = NULL; /* borrowed, held by records */
    unsigned char tid_bytes[16];
    Py_ssize_t i;
    for (i = 0; i < count; i++) {
        PyObject *r = PyList_GET_ITEM(records, i);
        if (Py_TYPE(r) != cls)
            break;
        PyObject *group = slot(r, F_GROUP), *topic = slot(r, F_TOPIC), *meta = slot(r, F_METADATA);
        PyObject *tid = slot(r, F_TOPIC_ID);
        if (group == NULL || topic == NULL || !PyUnicode_CheckExact(group) || !PyUnicode_CheckExact(topic))
            break;
        if (meta == NULL || !PyUnicode_CheckExact(meta) || PyUnicode_GET_LENGTH(meta) != 0)
            break;
        if (tid == NULL || Py_TYPE(tid) != uuid_cls)
            break;
        int64_t partition, offset, epoch, ts;
        if (int_field(slot(r, F_PARTITION), INT32_MIN, INT32_MAX, &partition) < 0 ||
            int_field(slot(r, F_OFFSET), INT64_MIN, INT64_MAX, &offset) < 0 ||
            int_field(slot(r, F_EPOCH), INT32_MIN, INT32_MAX, &epoch) < 0 ||
            int_field(slot(r, F_TIMESTAMP), INT64_MIN, INT64_MAX, &ts) < 0)
            break;
        if (tid != last_tid) {
            PyObject *n = PyObject_GetAttr(tid, s_int);
            if (n == NULL) {
                PyErr_Clear();
                break;
            }
            int zero = !PyLong_CheckExact(n) || _PyLong_Sign(n) == 0 ||
                       _PyLong_AsByteArray((PyLongObject *)n, tid_bytes, 16, 0, 0) < 0;
            Py_DECREF(n);
            if (zero) { /* the zero UUID (no topic id), or not a UUID's int: Python's */
                PyErr_Clear();
                break;
            }
            last_tid = tid;
        }
        if (key == NULL || (group != last_group && PyUnicode_Compare(group, last_group) != 0) ||
            (topic != last_topic && PyUnicode_Compare(topic, last_topic) != 0)) {
            Py_ssize_t gn, tn;
            const char *g = PyUnicode_AsUTF8AndSize(group, &gn);
            const char *t = g == NULL ? NULL : PyUnicode_AsUTF8AndSize(topic, &tn);
            if (t == NULL) {
                PyErr_Clear();
                break;
            }
            if (gn > 32767 || tn > 32767)
                break;
            size_t prefix = 2 + 2 + (size_t)gn + 2 + (size_t)tn;
            unsigned char *k = PyMem_Realloc(key, prefix + 10);
            if (k == NULL) {
                PyErr_NoMemory();
                goto error;
            }
            key = k;
            size_t p = (size_t)put_varint(key, prefix + 4);
            key[p] = 0;
            key[p + 1] = 1; /* the OffsetCommit key's type id */
            key[p + 2] = (unsigned char)(gn >> 8);
            key[p + 3] = (unsigned char)gn;
            memcpy(key + p + 4, g, (size_t)gn);
            p += 4 + (size_t)gn;
            key[p] = (unsigned char)(tn >> 8);
            key[p + 1] = (unsigned char)tn;
            memcpy(key + p + 2, t, (size_t)tn);
            key_len = p + 2 + (size_t)tn;
            last_group = group;
            last_topic = topic;
        }
        /* the record: its length, attributes 0, timestamp delta 0, offset delta i, the key (length,
           type, group, topic, partition), the value's length (42), the value, no headers */
        unsigned char head[12];
        head[0] = 0;
        head[1] = 0;
        int hn = 2 + put_varint(head + 2, (uint64_t)i);
        size_t body = (size_t)hn + key_len + 48;
        if (len + body + 10 > cap) {
            while (len + body + 10 > cap)
                cap *= 2;
            unsigned char *b = PyMem_Realloc(buf, cap);
            if (b == NULL) {
                PyErr_NoMemory();
                goto error;
            }
            buf = b;
        }
        unsigned char *o = buf + len;
        o += put_varint(o, body);
        memcpy(o, head, (size_t)hn);
        o += hn;
        memcpy(o, key, key_len);
        o += key_len;
        put32(o, (uint32_t)partition);
        o[4] = 0x54;
        unsigned char *value = o + 5;
        value[0] = 0;
        value[1] = 4;
        put64(value + 2, (uint64_t)offset);
        put32(value + 10, (uint32_t)epoch);
        value[14] = 1; /* metadata "" */
        put64(value + 15, (uint64_t)ts);
        value[23] = 1; /* one tagged field: tag 0, the topic id's 16 bytes */
        value[24] = 0;
        value[25] = 16;
        memcpy(value + 26, tid_bytes, 16);
        value[42] = 0; /* no headers */
        PyObject *raw = PyBytes_FromStringAndSize((const char *)value, 42);
        if (raw == NULL)
            goto error;
        PyObject **rp = (PyObject **)((char *)r + commit_offsets[F_RAW]);
        Py_XSETREF(*rp, raw);
        len = (size_t)(value + 43 - buf);
    }
    PyMem_Free(key);
    PyObject *section = PyBytes_FromStringAndSize((const char *)buf, (Py_ssize_t)len);
    PyMem_Free(buf);
    if (section == NULL)
        return NULL;
    PyObject *out = Py_BuildValue("(Nn)", section, i);
    return out;
error:
    PyMem_Free(key);
    PyMem_Free(buf);
    return NULL;
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL,
     "scan(section, pos, stop, count, base, min_offset, put_offsets, put_empty_group, unpack) -> "
     "(records consumed, position after them, records applied): the coordinator log's common records "
     "applied through the two callbacks, up to the first record it does not take"},
    {"unpack", (PyCFunction)unpack, METH_O,
     "unpack(records) -> {partition: value bytes} of a run of OffsetCommit records scan took"},
    {"commit_records", (PyCFunction)(void (*)(void))commit_records, METH_FASTCALL,
     "commit_records(records, cls, uuid_cls) -> (section, n): the records section of the leading "
     "common OffsetCommit records, as records.to_batch encodes them"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "broker.coordinator._replay",
    "The start-up replay's walk of the coordinator log's records, compiled.", -1, methods,
};

PyMODINIT_FUNC
PyInit__replay(void)
{
    static PyObject **names[] = {&s_group_id, &s_state, &s_generation, &s_protocol_type, &s_protocol_name,
                                 &s_leader_id, &s_state_timestamp, &s_no_members_yet, &s_by_topic, &s_raw, &s_records, &s_unpack};
    static const char *strs[] = {"group_id",  "state",    "generation", "protocol_type", "protocol_name", "leader_id",
                                 "state_timestamp", "_no_members_yet", "by_topic", "_raw", "_records", "_unpack"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (*names[i] == NULL && (*names[i] = PyUnicode_InternFromString(strs[i])) == NULL)
            return NULL;
    if (s_empty_tuple == NULL && (s_empty_tuple = PyTuple_New(0)) == NULL)
        return NULL;
    if (s_int == NULL && (s_int = PyUnicode_InternFromString("int")) == NULL)
        return NULL;
    return PyModule_Create(&module);
}
