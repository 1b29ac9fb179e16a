/* broker.log._native: the produce hot path's record walk, compiled.

   check_records(section, count) walks the records section of an uncompressed (or already
   decompressed) v2 batch exactly as broker/log/streaming.py's _check_plain does and returns what it
   learns, (min timestamp delta, max timestamp delta, first timestamp delta, every attributes byte 0),
   or None when the section is malformed in any way. It never raises for malformed input and reads
   no byte outside the buffer: on None the caller runs the pure-Python walk, which raises the
   InvalidBatch (INVALID_RECORD) with Kafka's text. So this module decides only the accepted case,
   and tests/log/test_native.py checks that it accepts exactly what the Python walk accepts, with the
   same results.

   check_batch(records) does, for the records of one partition of a Produce request, what
   batch.py's validate_produce and streaming.validate_records do together in the usual case: the
   bytes are exactly one v2 batch (header sane, CRC-32C right, records count and last offset delta
   agreeing, not a control batch) whose records are uncompressed and well formed. It returns the
   batch's BatchInfo and RecordStats (the classes given once to bind(), built here with the same
   field values as the Python path's), or None for anything else (more than one batch, a compressed
   batch, any fault): the caller then takes the Python path, which accepts or raises as before. So
   one call replaces the header parse, the CRC call and the record walk of a partition.

   stamp_plain(records, now, before_max, after_max, base_offset, leader_epoch) is the whole of
   dispatch/produce.py's plain append before the write, for a batch without a producer id (no
   producer state to check): check_batch's checks, a CreateTime batch neither compressed nor
   transactional, its records' timestamps within message.timestamp.before/after.max.ms of now
   (validator.timestamps_within), then the bytes to append (a copy, or the request's own writable
   frame in place) with the records' max timestamp (and the CRC when that changed), the base offset
   and the leader epoch stamped (validator.set_max_timestamp, batch.assign_offset). It returns
   (data, next offset, max timestamp), or None with nothing changed for anything else: the caller
   then runs the Python checks, which take or refuse the batch as before (tests/dispatch/
   test_produce.py holds both paths to the same answers and stored bytes).

   syncfs(fd) is syncfs(2) with the GIL released, returning 0 or the errno (broker/log/manager.py
   raises the OSError): the same call as the manager's ctypes fallback, without importing ctypes at
   every start-up. Linux only (where syncfs exists); elsewhere the module has no syncfs.

   Built by `pip install -e .` (setup.py, an optional extension: without a compiler the install goes
   on and the broker uses the Python walk; PYKBROKER_NATIVE=0 disables it at run time). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>
#include <unistd.h>

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

/* CRC-32C (Castagnoli, reflected 0x82F63B78), as the crc32c package computes it: the SSE 4.2
   instruction where the processor has it, else a table.

   The arithmetic. A CRC register c (32 bits) stands for a polynomial over GF(2) of degree < 32, in
   reflected bit order: bit 31 is the coefficient of x^0 and bit 0 that of x^31. Feeding the
   register one zero bit multiplies it by x modulo P (the Castagnoli polynomial; 0x82F63B78 is P
   without its x^32 term, reflected): shift right by one (every x^i becomes x^(i+1)), and if the
   old bit 0 was set, its x^32 is reduced modulo P, i.e. replaced by P's lower terms (XOR
   0x82F63B78). Feeding it n zero bytes therefore multiplies it by x^(8n) mod P. And the update is
   linear ("+" is XOR): crc(c, A || B) = crc(c, A) * x^(8|B|) + crc(0, B), where crc(c, M) is the
   register after feeding M to the register c. The fast path uses exactly that (crc32c_hw). */
#define CRC32C_POLY 0x82F63B78u

/* a * x mod P */
static inline uint32_t
gf2_times_x(uint32_t a)
{
    return a & 1 ? (a >> 1) ^ CRC32C_POLY : a >> 1;
}

/* The byte-at-a-time table: crc_table[b] is the register b (its low byte only) fed 8 zero bits. */
static uint32_t crc_table[256];

static void
crc_table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = gf2_times_x(c);
        crc_table[i] = c;
    }
}

static uint32_t
crc32c_table(const unsigned char *d, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    while (n--)
        c = crc_table[(c ^ *d++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* a * b mod P: the sum of b * x^i over the coefficients x^i of a (x^0 is bit 31, see above) */
static uint32_t
gf2_multiply(uint32_t a, uint32_t b)
{
    uint32_t product = 0;
    for (uint32_t bit = 0x80000000u; bit; bit >>= 1) {
        if (a & bit)
            product ^= b;
        b = gf2_times_x(b);
    }
    return product;
}

/* x^n mod P, by squaring: x^n is the product of x^(2^k) over the bits k set in n */
static uint32_t
gf2_x_power(uint64_t n)
{
    uint32_t result = 0x80000000u, square = 0x40000000u; /* x^0 and x^1 */
    for (; n; n >>= 1) {
        if (n & 1)
            result = gf2_multiply(result, square);
        square = gf2_multiply(square, square);
    }
    return result;
}

/* "Feed the register L zero bytes" (multiply by x^(8L) mod P) as four tables: the operator is
   linear, so it is the XOR of its values on the register's four bytes taken one at a time;
   byte[k][b] is its value on the register b << 8k. Linear within a byte too: an entry is the XOR
   of the entries of its bits. The register with only bit 31 set is x^0, so the operator gives
   x^(8L) mod P itself on it; bit 30 is x^1, giving that times x; and so on down to bit 0. */
typedef struct {
    uint32_t byte[4][256];
} crc_shift;

static void
crc_shift_init(crc_shift *shift, size_t zero_bytes)
{
    uint32_t on_bit = gf2_x_power(8 * (uint64_t)zero_bytes); /* on bit 31 */
    for (int bit = 31; bit >= 0; bit--) {
        shift->byte[bit / 8][1u << (bit % 8)] = on_bit;
        on_bit = gf2_times_x(on_bit);
    }
    for (int k = 0; k < 4; k++) {
        shift->byte[k][0] = 0;
        for (uint32_t top = 2; top < 256; top <<= 1) /* the bytes whose highest bit is top */
            for (uint32_t b = 1; b < top; b++)
                shift->byte[k][top | b] = shift->byte[k][top] ^ shift->byte[k][b];
    }
}

static inline uint32_t
crc_shift_apply(const crc_shift *shift, uint32_t c)
{
    return shift->byte[0][c & 0xFF] ^ shift->byte[1][(c >> 8) & 0xFF] ^ shift->byte[2][(c >> 16) & 0xFF]
           ^ shift->byte[3][c >> 24];
}

/* The instruction crc32 (8 bytes) takes 3 cycles but a new one can start every cycle: one
   dependent chain runs at a third of the speed. So a long input is cut into blocks of three lanes
   of L bytes each, A B C, and the three lanes' chains run side by side in one loop, lane A from the
   register so far, B and C from 0; then, by the linearity above,
       crc(c, A || B || C) = (crc(c, A) * x^(8L) + crc(0, B)) * x^(8L) + crc(0, C)
   that is two applications of the shift table of L. The combine waits for lane A (two rounds of
   table loads in a row), so lanes are long where the input allows: lanes of 8 kB while at least
   three remain, then of 1 kB, 256 and 64 bytes, then the serial loop for the last < 192 bytes.
   Measured here (serially -> these lanes): 71 kB 6.4 -> 2.3 us (8 kB and 256-byte lanes only:
   2.5 us), 16 kB 1.47 -> 0.55 us, 700 bytes 63 -> 54 ns. A shift table is 4 kB, built once
   at import (about 65k instructions for the four). */
static const size_t lane_bytes[] = {8192, 1024, 256, 64};
#define LANE_SIZES (sizeof(lane_bytes) / sizeof(lane_bytes[0]))
static crc_shift lane_shift[LANE_SIZES];

static void
crc_lanes_init(void)
{
    for (size_t i = 0; i < LANE_SIZES; i++)
        crc_shift_init(&lane_shift[i], lane_bytes[i]);
}

static inline uint64_t
load64(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, 8); /* any alignment */
    return w;
}

/* The register c fed d[0..n) serially: 8 bytes at a time, then the last bytes one by one. */
__attribute__((target("sse4.2"))) static inline uint32_t
crc32c_hw_serial(uint64_t c, const unsigned char *d, size_t n)
{
    for (; n >= 8; d += 8, n -= 8)
        c = __builtin_ia32_crc32di(c, load64(d));
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *d++);
    return c32;
}

/* The register (from its start, all ones) fed d[0..n): the three-lane blocks of each lane size in
   turn, then the rest serially. Apart from crc32c_hw, so that a short input pays nothing for it. */
__attribute__((target("sse4.2"), noinline)) static uint32_t
crc32c_hw_lanes(const unsigned char *d, size_t n)
{
    uint64_t c = 0xFFFFFFFFu;
    for (size_t size = 0; size < LANE_SIZES; size++) {
        const size_t lane = lane_bytes[size];
        while (n >= 3 * lane) {
            uint64_t a = c, b = 0, e = 0;
            for (size_t i = 0; i < lane; i += 8) {
                a = __builtin_ia32_crc32di(a, load64(d + i));
                b = __builtin_ia32_crc32di(b, load64(d + lane + i));
                e = __builtin_ia32_crc32di(e, load64(d + 2 * lane + i));
            }
            const crc_shift *shift = &lane_shift[size];
            c = crc_shift_apply(shift, crc_shift_apply(shift, (uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)e;
            d += 3 * lane;
            n -= 3 * lane;
        }
    }
    return crc32c_hw_serial(c, d, n);
}

__attribute__((target("sse4.2"))) static uint32_t
crc32c_hw(const unsigned char *d, size_t n)
{
    uint32_t c = n >= 3 * lane_bytes[LANE_SIZES - 1] ? crc32c_hw_lanes(d, n) : crc32c_hw_serial(0xFFFFFFFFu, d, n);
    return c ^ 0xFFFFFFFFu;
}
static int have_hw_crc;
#define CRC32C(d, n) (have_hw_crc ? crc32c_hw(d, n) : crc32c_table(d, n))
#else
#define CRC32C(d, n) crc32c_table(d, n)
#endif

static inline int64_t
be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return (int64_t)v;
}

static inline int32_t
be32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

static inline int16_t
be16(const unsigned char *p)
{
    return (int16_t)((uint16_t)p[0] << 8 | p[1]);
}

#define HEADER_SIZE 61
#define LOG_OVERHEAD 12
#define MIN_BATCH_LENGTH (HEADER_SIZE - LOG_OVERHEAD)

/* The classes check_batch builds (batch.BatchInfo, streaming.RecordStats: slotted dataclasses),
   bound once by bind(): each object is allocated by its type and its slots filled in field order,
   as the dataclass __init__ fills them (neither class has a __post_init__), without running
   Python code. bind() refuses a class whose fields are not exactly object slots. */
#define BATCH_FIELDS 12
#define STATS_FIELDS 5

typedef struct {
    PyTypeObject *type;
    Py_ssize_t offsets[BATCH_FIELDS];
} bound_type;

static bound_type batch_type, stats_type;

static int
bind_type(bound_type *b, PyObject *cls, Py_ssize_t fields)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "bind() takes classes");
        return -1;
    }
    PyObject *slots = PyObject_GetAttrString(cls, "__slots__");
    if (slots == NULL) {
        PyErr_Format(PyExc_TypeError, "%R has no __slots__", cls);
        return -1;
    }
    PyObject *names = PySequence_Tuple(slots);
    Py_DECREF(slots);
    if (names == NULL)
        return -1;
    if (PyTuple_GET_SIZE(names) != fields) {
        Py_DECREF(names);
        PyErr_Format(PyExc_TypeError, "%R: expected %zd slots", cls, fields);
        return -1;
    }
    Py_ssize_t offsets[BATCH_FIELDS];
    for (Py_ssize_t i = 0; i < fields; i++) {
        PyObject *d = PyObject_GetAttr(cls, PyTuple_GET_ITEM(names, i));
        if (d == NULL) {
            Py_DECREF(names);
            return -1;
        }
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type) &&
                 ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX &&
                 !(((PyMemberDescrObject *)d)->d_member->flags & READONLY);
        if (ok)
            offsets[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
        if (!ok) {
            Py_DECREF(names);
            PyErr_Format(PyExc_TypeError, "%R: field %zd is not an object slot", cls, i);
            return -1;
        }
    }
    Py_DECREF(names);
    b->type = (PyTypeObject *)Py_NewRef(cls);
    memcpy(b->offsets, offsets, sizeof(offsets));
    return 0;
}

/* An instance of b's class with its slots set to values (references stolen, NULL-safe). */
static PyObject *
build(bound_type *b, PyObject **values, Py_ssize_t fields)
{
    PyObject *o = NULL;
    for (Py_ssize_t i = 0; i < fields; i++)
        if (values[i] == NULL)
            goto fail;
    o = b->type->tp_alloc(b->type, 0);
    if (o == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < fields; i++)
        *(PyObject **)((char *)o + b->offsets[i]) = values[i];
    return o;
fail:
    for (Py_ssize_t i = 0; i < fields; i++)
        Py_XDECREF(values[i]);
    return NULL;
}

static PyObject *
bind(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "bind(BatchInfo, RecordStats) takes 2 arguments");
        return NULL;
    }
    bound_type batch = {NULL, {0}}, stats = {NULL, {0}};
    if (bind_type(&batch, args[0], BATCH_FIELDS) || bind_type(&stats, args[1], STATS_FIELDS)) {
        Py_XDECREF(batch.type);
        return NULL; /* both or neither: the classes bound before stay */
    }
    Py_XDECREF(batch_type.type);
    Py_XDECREF(stats_type.type);
    batch_type = batch;
    stats_type = stats;
    Py_RETURN_NONE;
}

/* What check_batch learns of one batch. */
typedef struct {
    int16_t attributes;
    int32_t last_delta, count;
    int64_t lo, hi, first; /* timestamp deltas: least, greatest, the first record's */
    int plain;             /* every record's attributes byte 0 */
} one_batch;

/* check_batch's checks of the n bytes at d: 0 with b filled in when they are exactly one valid
   uncompressed v2 batch (not a control batch), else -1. */
static int
check_one(const unsigned char *d, int64_t n, one_batch *b)
{
    if (n < HEADER_SIZE || d[16] != 2)
        return -1;
    int32_t batch_length = be32(d + 8);
    if (batch_length < MIN_BATCH_LENGTH || (int64_t)batch_length + LOG_OVERHEAD != n)
        return -1; /* malformed, or not exactly one batch */
    b->attributes = be16(d + 21);
    b->last_delta = be32(d + 23);
    b->count = be32(d + 57);
    if (b->count <= 0 || b->last_delta != b->count - 1 || b->attributes & 0x20 || b->attributes & 0x07)
        return -1; /* no records, deltas disagreeing, a control batch, or compressed */
    if ((uint32_t)be32(d + 17) != CRC32C(d + 21, (size_t)(n - 21)))
        return -1;
    if (walk(d + HEADER_SIZE, n - HEADER_SIZE, b->count, &b->lo, &b->hi, &b->first, &b->plain))
        return -1;
    return 0;
}

static PyObject *
check_batch(PyObject *Py_UNUSED(self), PyObject *arg)
{
    if (batch_type.type == NULL || stats_type.type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "check_batch before bind()");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *d = (const unsigned char *)view.buf;
    int64_t n = (int64_t)view.len;
    one_batch b;
    if (check_one(d, n, &b)) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    PyObject *header[BATCH_FIELDS] = {
        PyLong_FromLong(0),           PyLong_FromSsize_t((Py_ssize_t)n),  PyLong_FromLongLong(be64(d)),
        PyLong_FromLong(b.last_delta), PyLong_FromLong(b.attributes),     PyLong_FromLongLong(be64(d + 27)),
        PyLong_FromLongLong(be64(d + 35)), PyLong_FromLongLong(be64(d + 43)), PyLong_FromLong(be16(d + 51)),
        PyLong_FromLong(be32(d + 53)), PyLong_FromLong(b.count),           PyLong_FromLong(be32(d + 12)),
    };
    PyBuffer_Release(&view);
    PyObject *facts[STATS_FIELDS] = {
        PyLong_FromLongLong(b.lo), PyLong_FromLongLong(b.hi), PyLong_FromLongLong(b.first),
        Py_NewRef(b.plain ? Py_True : Py_False), Py_NewRef(Py_None),
    };
    PyObject *info = build(&batch_type, header, BATCH_FIELDS);
    PyObject *stats = build(&stats_type, facts, STATS_FIELDS);
    if (info == NULL || stats == NULL) {
        Py_XDECREF(info);
        Py_XDECREF(stats);
        return NULL;
    }
    PyObject *out = PyTuple_New(2);
    if (out == NULL) {
        Py_DECREF(info);
        Py_DECREF(stats);
        return NULL;
    }
    PyTuple_SET_ITEM(out, 0, info);
    PyTuple_SET_ITEM(out, 1, stats);
    return out;
}

static inline void
put_be64(unsigned char *p, int64_t v)
{
    uint64_t u = (uint64_t)v;
    for (int i = 7; i >= 0; i--, u >>= 8)
        p[i] = (unsigned char)u;
}

static inline void
put_be32(unsigned char *p, int32_t v)
{
    uint32_t u = (uint32_t)v;
    p[0] = (unsigned char)(u >> 24);
    p[1] = (unsigned char)(u >> 16);
    p[2] = (unsigned char)(u >> 8);
    p[3] = (unsigned char)u;
}

/* The attribute bits stamp_plain leaves to the caller: a codec, LogAppendTime, transactional,
   control (produce.py's _NOT_PLAIN). */
#define NOT_PLAIN 0x3f

static PyObject *
stamp_plain(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "stamp_plain(records, now, before_max, after_max, base_offset, leader_epoch)");
        return NULL;
    }
    int64_t v[5];
    for (int i = 0; i < 5; i++) {
        v[i] = PyLong_AsLongLong(args[i + 1]);
        if (v[i] == -1 && PyErr_Occurred())
            return NULL;
    }
    int64_t now = v[0], before_max = v[1], after_max = v[2], base_offset = v[3], epoch = v[4];
    if (epoch < INT32_MIN || epoch > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "leader_epoch out of the int32 range");
        return NULL;
    }
    PyObject *records = args[0];
    /* a writable view (the request's own frame: framing.FrameReader) is stamped in place, anything
       else copied first, as produce._writable does */
    int in_place = PyMemoryView_Check(records) && !PyMemoryView_GET_BUFFER(records)->readonly;
    Py_buffer view;
    if (PyObject_GetBuffer(records, &view, in_place ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *d = (const unsigned char *)view.buf;
    int64_t n = (int64_t)view.len;
    one_batch b;
    int64_t min_ts, max_ts, next_offset;
    if (check_one(d, n, &b) || b.attributes & NOT_PLAIN || be64(d + 43) >= 0 /* a producer id */
        || __builtin_add_overflow(be64(d + 27), b.lo, &min_ts)
        || __builtin_add_overflow(be64(d + 27), b.hi, &max_ts)
        || __builtin_add_overflow(base_offset, (int64_t)b.last_delta + 1, &next_offset)) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE; /* the caller's checks decide (and answer) */
    }
    /* message.timestamp.before.max.ms / after.max.ms (validator.timestamps_within); a timestamp past
       a long wraps around in Kafka: refused here, the caller's checks do that */
    int64_t early, late;
    if (__builtin_sub_overflow(now, min_ts, &early) || __builtin_sub_overflow(max_ts, now, &late) ||
        early > before_max || late > after_max) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    if (max_ts < -1)
        max_ts = -1; /* Kafka's maximum starts at NO_TIMESTAMP (validator.max_record_timestamp) */
    PyObject *data;
    unsigned char *w;
    if (in_place) {
        data = Py_NewRef(records);
        w = (unsigned char *)view.buf;
    } else {
        data = PyByteArray_FromStringAndSize((const char *)d, (Py_ssize_t)n);
        if (data == NULL) {
            PyBuffer_Release(&view);
            return NULL;
        }
        w = (unsigned char *)PyByteArray_AS_STRING(data);
    }
    /* the records' max timestamp, as Kafka overwrites the producer's (validator.set_max_timestamp:
       the CRC, which covers it, only when it changes), then the base offset and the leader epoch
       (batch.assign_offset: both before the CRC's range) */
    if (be64(w + 35) != max_ts) {
        put_be64(w + 35, max_ts);
        put_be32(w + 17, (int32_t)CRC32C(w + 21, (size_t)(n - 21)));
    }
    put_be64(w, base_offset);
    put_be32(w + 12, (int32_t)epoch);
    PyBuffer_Release(&view);
    PyObject *out = Py_BuildValue("(NLL)", data, (long long)next_offset, (long long)max_ts);
    return out;
}

static PyObject *
crc32c_py(PyObject *Py_UNUSED(self), PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t c = CRC32C((const unsigned char *)view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(c);
}

#ifdef __linux__
static PyObject *
syncfs_py(PyObject *Py_UNUSED(self), PyObject *arg)
{
    int fd = PyObject_AsFileDescriptor(arg);
    if (fd < 0)
        return NULL;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS
    if (syncfs(fd) != 0)
        err = errno;
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(err);
}
#endif

static PyMethodDef methods[] = {
    {"check_batch", (PyCFunction)check_batch, METH_O,
     "check_batch(records) -> (BatchInfo, RecordStats) for exactly one valid uncompressed v2"
     " batch, else None (after bind)"},
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL,
     "bind(BatchInfo, RecordStats): the slotted classes check_batch builds"},
    {"stamp_plain", (PyCFunction)(void (*)(void))stamp_plain, METH_FASTCALL,
     "stamp_plain(records, now, before_max, after_max, base_offset, leader_epoch) -> (data, next"
     " offset, max timestamp) for one valid uncompressed CreateTime batch without a producer id whose"
     " timestamps are within the bounds, stamped for the log; else None, nothing changed"},
    {"crc32c", (PyCFunction)crc32c_py, METH_O, "crc32c(data) -> the CRC-32C check_batch computes"},
    {"check_records", (PyCFunction)(void (*)(void))check_records, METH_FASTCALL,
     "check_records(section, count) -> (min ts delta, max ts delta, first ts delta, attributes all 0)"
     " or None when the records section is malformed"},
#ifdef __linux__
    {"syncfs", (PyCFunction)syncfs_py, METH_O,
     "syncfs(fd) -> 0, or the errno of a failed syncfs(2) of fd's file system (GIL released)"},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "broker.log._native", "The produce hot path's record walk, compiled.", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    crc_table_init();
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    have_hw_crc = __builtin_cpu_supports("sse4.2");
    if (have_hw_crc)
        crc_lanes_init();
#endif
    return PyModule_Create(&module);
}
