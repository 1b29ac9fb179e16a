/* The zigzag varint reader the compiled record walks share (broker/log/_native.c,
   broker/coordinator/_replay.c): the layout of Kafka's v2 records. */
#ifndef PYKBROKER_VARINT_H
#define PYKBROKER_VARINT_H

#include <stdint.h>

/* A zigzag varint of at most max_bytes bytes (5: int32, 10: int64) at *pos, as records.py's
   _read_varint reads it: the value must fit the type. Returns 0 and advances *pos, or -1. */
static inline int
read_varint(const unsigned char *d, int64_t n, int64_t *pos, int max_bytes, int64_t *out)
{
    int64_t p = *pos;
    if (p < n && d[p] < 0x80) { /* one byte: most fields of most records */
        unsigned int b = d[p];
        *out = (int64_t)(b >> 1) ^ -(int64_t)(b & 1);
        *pos = p + 1;
        return 0;
    }
    uint64_t result = 0;
    int shift = 0;
    int used = 0;
    for (;;) {
        if (p >= n)
            return -1;
        unsigned int b = d[p++];
        if (shift == 63 && (b & 0x7F) > 1)
            return -1; /* beyond 64 bits: out of range of a long */
        result |= (uint64_t)(b & 0x7F) << shift;
        used++;
        if (!(b & 0x80))
            break;
        if (used == max_bytes)
            return -1; /* longer than max_bytes */
        shift += 7;
    }
    int64_t value = (int64_t)((result >> 1) ^ (0 - (result & 1)));
    if (max_bytes == 5 && (value < INT32_MIN || value > INT32_MAX))
        return -1;
    *pos = p;
    *out = value;
    return 0;
}

#endif
