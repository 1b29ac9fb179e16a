"""Kafka record batches (magic v2) down to the records: the record codec, the compression codecs,
and whole-batch building and decoding. Pure Python, no I/O.

One record inside a batch's records section (all varints zigzag-signed)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
    keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value
    headerCount varint | headers: keyLength varint, utf-8 key, valueLength varint (-1 = null), value

When the batch is compressed, the whole records section is the compressed stream. The codecs are
the ones Kafka clients put on the wire: 1 gzip, 2 snappy in the xerial framing of the Java client
(raw snappy is also accepted when decoding, as Java does), 3 the LZ4 frame format with independent
blocks (Java rejects linked blocks), 4 zstd.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterable, Iterator
from struct import Struct

from broker.log import batch as _batch
from broker.log import codec_libs
from broker.log.batch import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchInfo,
    InvalidBatch,
)
from broker.log.crc import crc32c
from broker.slotted import Slotted


class InvalidRecords(InvalidBatch):
    """The records of a batch (or their compressed stream) are malformed. A ValueError, and an
    InvalidBatch with ``corrupt=True`` (CORRUPT_MESSAGE)."""


class Record(Slotted):
    """One record of a batch, its offset and timestamp as deltas from the batch's (not a dataclass:
    see broker.slotted); ``headers`` None is no headers, an empty list."""

    __slots__ = ("offset_delta", "timestamp_delta", "key", "value", "headers", "attributes")

    def __init__(
        self,
        offset_delta: int,
        timestamp_delta: int,
        key: bytes | None = None,
        value: bytes | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
        attributes: int = 0,
    ) -> None:
        self.offset_delta = offset_delta
        self.timestamp_delta = timestamp_delta
        self.key = key
        self.value = value
        self.headers: list[tuple[str, bytes | None]] = [] if headers is None else headers
        self.attributes = attributes


# ---------------------------------------------------------------------------------------------
# varints

#: zigzag-decoded value of every single-byte varint (the fast path of the decoder).
_ZZ = tuple((b >> 1) ^ -(b & 1) for b in range(128))
#: encoded bytes of every zigzag value that fits one byte (-64..63).
_SMALL = {(z >> 1) ^ -(z & 1): bytes((z,)) for z in range(128)}


def _read_varint(data: bytes, pos: int, max_bytes: int) -> tuple[int, int]:
    """Slow path: a zigzag varint of up to ``max_bytes`` (5 for varint, 10 for varlong). An
    IndexError at the end of ``data`` is left to the caller."""
    start = pos
    b = data[pos]
    result = b & 0x7F
    shift = 7
    pos += 1
    while b > 0x7F:
        if pos - start == max_bytes:
            raise InvalidRecords(f"varint at byte {start} is longer than {max_bytes} bytes")
        b = data[pos]
        result |= (b & 0x7F) << shift
        shift += 7
        pos += 1
    value = (result >> 1) ^ -(result & 1)
    bound = 0x7FFFFFFF if max_bytes == 5 else 0x7FFFFFFFFFFFFFFF
    if not -bound - 1 <= value <= bound:
        raise InvalidRecords(f"varint at byte {start} is out of range: {value}")
    return value, pos


def _varint(value: int) -> bytes:
    b = _SMALL.get(value)
    if b is not None:
        return b
    z = (value << 1) ^ (value >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# records


def _blob(value: bytes | None) -> bytes:
    return b"\x01" if value is None else _varint(len(value)) + bytes(value)


def encode_records(records: Iterable[Record]) -> bytes:
    """The uncompressed records section for ``records``."""
    out: list[bytes] = []
    for r in records:
        if not (-(1 << 31) <= r.offset_delta < 1 << 31 and -(1 << 63) <= r.timestamp_delta < 1 << 63):
            raise ValueError(f"offset delta {r.offset_delta} or timestamp delta {r.timestamp_delta} too big")
        parts = [bytes((r.attributes & 0xFF,)), _varint(r.timestamp_delta), _varint(r.offset_delta)]
        parts += (_blob(r.key), _blob(r.value), _varint(len(r.headers)))
        for hkey, hval in r.headers:
            parts += (_blob(hkey.encode()), _blob(hval))
        body = b"".join(parts)
        out += (_varint(len(body)), body)
    return b"".join(out)


def decode_records(data: bytes | bytearray | memoryview, count: int) -> list[Record]:
    """Exactly ``count`` records from an uncompressed records section that holds nothing else."""
    if not isinstance(data, bytes):
        data = bytes(data)
    n = len(data)
    if count < 0 or count * 7 > n:  # the smallest record takes 7 bytes
        raise InvalidRecords(f"{n} bytes cannot hold {count} records")
    zz = _ZZ
    rv = _read_varint
    new = Record
    out: list[Record] = []
    append = out.append
    pos = 0
    try:
        for _ in range(count):
            # Each varint: one byte from a table, two bytes inline, longer ones in _read_varint.
            b = data[pos]
            if b < 0x80:
                length = zz[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                length = (z >> 1) ^ -(z & 1)
                pos += 2
            else:
                length, pos = rv(data, pos, 5)
            end = pos + length
            if length < 6 or end > n:
                raise InvalidRecords(f"record at byte {pos} has a bad length {length}")
            attributes = data[pos]
            if attributes > 0x7F:
                attributes -= 0x100
            pos += 1
            b = data[pos]
            if b < 0x80:
                ts = zz[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                ts = (z >> 1) ^ -(z & 1)
                pos += 2
            else:
                ts, pos = rv(data, pos, 10)
            b = data[pos]
            if b < 0x80:
                od = zz[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                od = (z >> 1) ^ -(z & 1)
                pos += 2
            else:
                od, pos = rv(data, pos, 5)
            b = data[pos]
            if b < 0x80:
                size = zz[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                size = (z >> 1) ^ -(z & 1)
                pos += 2
            else:
                size, pos = rv(data, pos, 5)
            if size >= 0:
                key = data[pos : pos + size]
                pos += size
            elif size == -1:
                key = None
            else:
                raise InvalidRecords(f"negative key length {size}")
            b = data[pos]
            if b < 0x80:
                size = zz[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                size = (z >> 1) ^ -(z & 1)
                pos += 2
            else:
                size, pos = rv(data, pos, 5)
            if size >= 0:
                value = data[pos : pos + size]
                pos += size
            elif size == -1:
                value = None
            else:
                raise InvalidRecords(f"negative value length {size}")
            if data[pos] == 0:
                headers = []
                pos += 1
            else:
                headers, pos = _read_headers(data, pos, end)
            if pos != end:
                raise InvalidRecords(f"record ending at byte {end} has {pos - end:+d} bytes of fields")
            append(new(od, ts, key, value, headers, attributes))
    except IndexError:
        raise InvalidRecords(f"records section of {n} bytes is truncated") from None
    if pos != n:
        raise InvalidRecords(f"{n - pos} bytes left after {count} records")
    return out


def _read_headers(data: bytes, pos: int, end: int) -> tuple[list[tuple[str, bytes | None]], int]:
    count, pos = _read_varint(data, pos, 5)
    if count < 0 or count * 2 > end - pos:
        raise InvalidRecords(f"bad header count {count}")
    headers = []
    for _ in range(count):
        size, pos = _read_varint(data, pos, 5)
        if size < 0 or pos + size > end:
            raise InvalidRecords(f"bad header key length {size}")
        try:
            hkey = data[pos : pos + size].decode()
        except UnicodeDecodeError as e:
            raise InvalidRecords(f"header key is not utf-8: {e}") from None
        size, pos = _read_varint(data, pos + size, 5)
        if size < -1 or pos + size > end:
            raise InvalidRecords(f"bad header value length {size}")
        headers.append((hkey, None if size == -1 else data[pos : pos + size]))
        pos += max(size, 0)
    return headers, pos


# ---------------------------------------------------------------------------------------------
# compression

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01"  # version 1, min compatible 1
_XERIAL_BLOCK = 32 * 1024  # the Java client's (snappy-java SnappyOutputStream) default block size
_BLOCK_LEN = Struct(">i")


def _xerial_encode(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER]
    view = memoryview(data)
    for i in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(codec_libs.cramjam.snappy.compress_raw(view[i : i + _XERIAL_BLOCK]))
        parts.append(_BLOCK_LEN.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decode(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(codec_libs.cramjam.snappy.decompress_raw(data))
    if len(data) < 16:
        raise InvalidRecords("truncated xerial snappy header")
    out = []
    pos, n = 16, len(data)
    while pos < n:
        if n - pos < 4:
            raise InvalidRecords("truncated xerial snappy block length")
        (size,) = _BLOCK_LEN.unpack_from(data, pos)
        pos += 4
        if size < 0 or size > n - pos:
            raise InvalidRecords(f"xerial snappy block of {size} bytes runs past the end")
        out.append(bytes(codec_libs.cramjam.snappy.decompress_raw(data[pos : pos + size])))
        pos += size
    return b"".join(out)


def _gzip_decode(data: bytes) -> bytes:
    if not data:  # gzip.decompress() takes zero members as an empty stream; Java does not
        raise InvalidRecords("empty gzip stream")
    return codec_libs.gzip.decompress(data)


def _lz4_encode(data: bytes) -> bytes:
    # Independent 64 KiB blocks with block checksums: what the Java client (which rejects linked
    # blocks) and librdkafka accept. cramjam.lz4.compress() would link the blocks.
    c = codec_libs.cramjam.lz4.Compressor(block_linked=False, content_checksum=False)
    c.compress(data)
    return bytes(c.finish())


_COMPRESS = {
    1: lambda d: codec_libs.gzip.compress(d, compresslevel=6, mtime=0),
    2: _xerial_encode,
    3: _lz4_encode,
    4: lambda d: bytes(codec_libs.cramjam.zstd.compress(d, 3)),
}
_DECOMPRESS = {
    1: _gzip_decode,
    2: _snappy_decode,
    3: lambda d: bytes(codec_libs.cramjam.lz4.decompress(d)),
    4: lambda d: bytes(codec_libs.cramjam.zstd.decompress(d)),
}


def compress(codec: int, data: bytes) -> bytes:
    """``data`` compressed with Kafka compression codec ``codec`` (0 returns it unchanged)."""
    if codec == 0:
        return bytes(data)
    try:
        fn = _COMPRESS[codec]
    except KeyError:
        raise ValueError(f"unknown compression codec {codec}") from None
    return fn(bytes(data))


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """The inverse of :func:`compress`; raises InvalidRecords on a malformed stream."""
    if codec == 0:
        return bytes(data)
    fn = _DECOMPRESS.get(codec)
    if fn is None:
        raise InvalidRecords(f"unknown compression codec {codec}")
    try:
        return fn(bytes(data))
    except InvalidRecords:
        raise
    except (codec_libs.cramjam.DecompressionError, OSError, EOFError, zlib.error, ValueError) as e:
        name = _batch.COMPRESSION_NAMES[codec]
        raise InvalidRecords(f"cannot decompress the {name} records: {e}") from None


# ---------------------------------------------------------------------------------------------
# batches


def build_batch(
    records: Iterable[Record | tuple],
    base_offset: int = 0,
    base_timestamp: int | None = None,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamp_type: int = 0,
    transactional: bool = False,
    partition_leader_epoch: int = -1,
    max_timestamp: int | None = None,
    control: bool = False,
) -> bytes:
    """A complete v2 batch. ``records`` holds Records or ``(key, value)`` / ``(key, value,
    headers)`` tuples (offset delta = position, timestamp delta 0). ``base_timestamp`` defaults to
    now; ``max_timestamp`` to the largest record timestamp."""
    recs = [r if isinstance(r, Record) else Record(i, 0, *r) for i, r in enumerate(records)]
    if base_timestamp is None:
        base_timestamp = int(time.time() * 1000)
    if max_timestamp is None:
        max_timestamp = base_timestamp + max((r.timestamp_delta for r in recs), default=0)
    if compression not in (0, 1, 2, 3, 4):
        raise ValueError(f"unknown compression codec {compression}")
    body = compress(compression, encode_records(recs))
    attributes = compression & COMPRESSION_MASK
    if timestamp_type:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK
    last_delta = recs[-1].offset_delta if recs else 0
    head = (base_offset, HEADER_SIZE - LOG_OVERHEAD + len(body), partition_leader_epoch, 2, 0, attributes)
    head += (last_delta, base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence)
    buf = bytearray(HEADER.pack(*head, len(recs))) + body
    buf[17:21] = crc32c(memoryview(buf)[21:]).to_bytes(4, "big")
    return bytes(buf)


def simple_batch(
    values: Iterable[bytes | None], keys: Iterable[bytes | None] | None = None, **kwargs
) -> bytes:
    """``build_batch`` for plain values (and optional keys of the same length)."""
    values = list(values)
    keys = [None] * len(values) if keys is None else list(keys)
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys for {len(values)} values")
    return build_batch(list(zip(keys, values, strict=True)), **kwargs)


def decode_batch(
    buf: bytes | bytearray | memoryview, pos: int = 0, verify_crc: bool = True
) -> tuple[BatchInfo, list[Record]]:
    """The header and the records of the batch at ``pos``, decompressing as needed."""
    info = _batch.read_header(buf, pos)
    if verify_crc:
        _batch.check_crc(buf, info)
    section = memoryview(buf)[pos + HEADER_SIZE : pos + info.size]
    codec = info.attributes & COMPRESSION_MASK
    data = decompress(codec, section) if codec else bytes(section)
    return info, decode_records(data, info.records_count)


def iter_records(
    buf: bytes | bytearray | memoryview, verify_crc: bool = True
) -> Iterator[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]], BatchInfo]]:
    """``(offset, timestamp, key, value, headers, batch info)`` for every record in ``buf``, which
    must hold whole batches only. Control batches are included (see ``info.is_control``); a
    LogAppendTime batch gives every record its max timestamp, as Kafka does."""
    pos, end = 0, len(buf)
    while pos < end:
        info, records = decode_batch(buf, pos, verify_crc)
        base, ts = info.base_offset, info.base_timestamp
        if info.attributes & TIMESTAMP_TYPE_MASK:
            for r in records:
                yield base + r.offset_delta, info.max_timestamp, r.key, r.value, r.headers, info
        else:
            for r in records:
                yield base + r.offset_delta, ts + r.timestamp_delta, r.key, r.value, r.headers, info
        pos += info.size
