"""Bounded, streaming reads of the records inside a v2 batch: validating a produced batch down to its
records, and finding the first record at or after a timestamp, without ever holding a whole
decompressed batch in memory.

A compressed records section is decompressed in chunks of at most ``CHUNK`` bytes (xerial snappy
blocks are decompressed one block at a time, after checking the size the block declares). Produce
validation collects up to ``WINDOW`` (8 MiB) of them and checks the records in memory with the fast
inlined parser; a larger section -- and every timestamp lookup -- walks the records through a small
window over the chunks instead: key, value and header bytes are skipped, never copied. The total
decompressed size is capped (``limit``, 64 x max.message.bytes), so a tiny "decompression bomb"
costs at most ``limit`` bytes of decompression work; and a section beyond WINDOW may hold at most
``MAX_STREAMED_RECORDS`` records, which bounds the CPU of the slow path.

What :func:`validate_records` checks, as Kafka's broker does before it appends a client's batch:

* every record is well formed: varints of at most 5 (10 for the timestamp delta) bytes, key and
  value lengths >= -1, header counts and key lengths >= 0, and the record's fields fill exactly the
  length it declares;
* the batch holds exactly ``recordsCount`` records and nothing after them;
* offset deltas run 0, 1, 2, ... -- the broker assigns offsets by rewriting the base offset in
  place, so a batch with any other deltas would put records at offsets the producer did not mean
  (Kafka rebuilds such batches; this broker refuses them with INVALID_RECORD).

Malformed records are INVALID_RECORD (Kafka's InvalidRecordException); a compressed stream that does
not decompress is CORRUPT_MESSAGE.

The in-memory walk is the produce path's per-record cost, so it runs compiled when the package's
install built ``broker/log/_native.c`` (setup.py, an optional extension): the C walk decides only
that a section is well formed, and returns the same facts; for any section it refuses, the Python
walk (:func:`_check_plain`, always here) runs and raises the error with its text. Without the
extension (no compiler at install), or with ``PYKBROKER_NATIVE=0`` in the environment, the Python
walk does it all. tests/log/test_native.py holds the two to the same answers.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Iterator

from broker import native
from broker.slotted import Slotted

from . import codec_libs
from .batch import (
    COMPRESSION_MASK,
    COMPRESSION_NAMES,
    HEADER_SIZE,
    TIMESTAMP_TYPE_MASK,
    BatchInfo,
    InvalidBatch,
    read_header,
    record_timestamp,
)
from .records import _XERIAL_MAGIC, _ZZ, InvalidRecords, _read_varint

try:
    from . import _native
except ImportError:  # not built (no C compiler at install): the Python walk does it all
    _native = None

#: ``check_records(section, count)``: the compiled walk of :func:`_check_plain`, returning its
#: facts (min, max and first timestamp delta, attributes all 0) or None for a section it refuses;
#: None when the extension is not built or ``PYKBROKER_NATIVE=0``
native_check = native.compiled(_native.check_records if _native is not None else None)

#: ``check_batch(records)``: the header, CRC and record walk of exactly one valid uncompressed
#: batch in one compiled call, giving its BatchInfo and RecordStats (see :func:`validate_one`);
#: None as ``native_check``
native_batch = native.compiled(_native.check_batch if _native is not None else None)

#: ``stamp_plain(records, now, before_max, after_max, base_offset, leader_epoch)``: a batch without
#: a producer id checked and stamped for its log in one compiled call (dispatch/produce.py's
#: ``_append_plain``: the extension's comment says what it does), or None to take the Python
#: checks; None as ``native_check``
native_stamp = native.compiled(_native.stamp_plain if _native is not None else None)

CHUNK = 64 * 1024
#: a compressed section may expand to at most this many times the topic's max.message.bytes
EXPANSION_LIMIT = 64
#: the cap where no topic config applies: 64 times Kafka's default max.message.bytes
DEFAULT_LIMIT = EXPANSION_LIMIT * 1048588
#: a compressed section up to this size is validated in memory (fast); beyond it, streamed
WINDOW = 8 << 20
#: streaming costs ~3 us per record: a section beyond WINDOW may hold at most this many records
#: (so >80 bytes per record on average), bounding the CPU one request can take
MAX_STREAMED_RECORDS = 100_000

_BLOCK_HEADER = 4


def _invalid(message: str) -> InvalidBatch:
    return InvalidBatch(message, corrupt=False)


# ---------------------------------------------------------------------------------------------
# bounded decompression


def _gzip_chunks(data: bytes) -> Iterator[bytes]:
    if not data:
        raise InvalidRecords("empty gzip stream")
    while data:  # one gzip member after the other, as Java's GZIPInputStream reads them
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        pending = data
        while not d.eof:
            out = d.decompress(pending, CHUNK)
            pending = d.unconsumed_tail
            if out:
                yield out
            elif not pending:
                raise InvalidRecords("truncated gzip stream")
        data = d.unused_data


def _zstd_chunks(data: bytes) -> Iterator[bytes]:
    reader = codec_libs.zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
    while True:
        out = reader.read(CHUNK)
        if not out:
            return
        yield out


def _lz4_chunks(data: bytes) -> Iterator[bytes]:
    while data:
        d = codec_libs.lz4_frame.LZ4FrameDecompressor()
        out = d.decompress(data, max_length=CHUNK)
        while True:
            if out:
                yield out
            if d.eof:
                break
            if d.needs_input:
                raise InvalidRecords("truncated lz4 frame")
            out = d.decompress(b"", max_length=CHUNK)
        data = d.unused_data


def _snappy_block(block: bytes, budget: int) -> bytes:
    size = codec_libs.cramjam.snappy.decompress_raw_len(block)
    if size > budget:
        raise _invalid(f"a snappy block declares {size} bytes, beyond the {budget} still allowed")
    return bytes(codec_libs.cramjam.snappy.decompress_raw(block))


def _snappy_chunks(data: bytes, limit: int) -> Iterator[bytes]:
    if not data.startswith(_XERIAL_MAGIC):
        yield _snappy_block(data, limit)
        return
    if len(data) < 16:
        raise InvalidRecords("truncated xerial snappy header")
    pos, n, budget = 16, len(data), limit
    while pos < n:
        if n - pos < _BLOCK_HEADER:
            raise InvalidRecords("truncated xerial snappy block length")
        size = int.from_bytes(data[pos : pos + 4], "big", signed=True)
        pos += 4
        if size < 0 or size > n - pos:
            raise InvalidRecords(f"xerial snappy block of {size} bytes runs past the end")
        out = _snappy_block(data[pos : pos + size], budget)
        budget -= len(out)
        pos += size
        yield out


def decompressed_chunks(codec: int, data: bytes, limit: int) -> Iterator[bytes]:
    """The decompressed records section in chunks, raising InvalidRecords when the stream is
    malformed and InvalidBatch (INVALID_RECORD) once it exceeds ``limit`` bytes."""
    if codec == 2:
        gen = _snappy_chunks(data, limit)
    elif codec == 1:
        gen = _gzip_chunks(data)
    elif codec == 3:
        gen = _lz4_chunks(data)
    elif codec == 4:
        gen = _zstd_chunks(data)
    else:
        raise InvalidRecords(f"unknown compression codec {codec}")
    total = 0
    try:
        for chunk in gen:
            total += len(chunk)
            if total > limit:
                raise _invalid(f"the records decompress to more than {limit} bytes")
            yield chunk
    except InvalidBatch:
        raise
    except (
        codec_libs.cramjam.DecompressionError,
        codec_libs.zstandard.ZstdError,
        RuntimeError,
        zlib.error,
        ValueError,
    ) as e:
        raise InvalidRecords(f"cannot decompress the {COMPRESSION_NAMES[codec]} records: {e}") from None


# ---------------------------------------------------------------------------------------------
# a forward-only window over chunks


class _Stream:
    """Reads varints and skips bytes across chunk boundaries; ``consumed`` counts bytes read."""

    __slots__ = ("_chunks", "buf", "pos", "_base")

    def __init__(self, chunks: Iterator[bytes]):
        self._chunks = chunks
        self.buf = b""
        self.pos = 0
        self._base = 0  # stream offset of buf[0]

    @property
    def consumed(self) -> int:
        return self._base + self.pos

    def _more(self) -> bool:
        chunk = next(self._chunks, None)
        if chunk is None:
            return False
        self._base += self.pos
        self.buf = self.buf[self.pos :] + chunk
        self.pos = 0
        return True

    def at_end(self) -> bool:
        while self.pos >= len(self.buf):
            if not self._more():
                return True
        return False

    def byte(self) -> int:
        if self.pos >= len(self.buf) and self.at_end():
            raise _invalid("the records section is truncated")
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def varint(self, max_bytes: int) -> int:
        while len(self.buf) - self.pos < max_bytes and self._more():
            pass
        try:
            value, self.pos = _read_varint(self.buf, self.pos, max_bytes)
        except IndexError:
            raise _invalid("the records section is truncated") from None
        except InvalidRecords as e:
            raise _invalid(str(e)) from None
        return value

    def skip(self, n: int) -> None:
        avail = len(self.buf) - self.pos
        while n > avail:
            n -= avail
            self.pos = len(self.buf)
            if not self._more():
                raise _invalid("the records section is truncated")
            avail = len(self.buf)
        self.pos += n


def _scan(stream: _Stream, count: int) -> Iterator[tuple[int, int]]:
    """Walk ``count`` records, checking their structure; yields (offset delta, timestamp delta)."""
    for i in range(count):
        length = stream.varint(5)
        start = stream.consumed
        if length < 6:
            raise _invalid(f"record {i} declares a length of {length} bytes")
        end = start + length
        stream.byte()  # attributes (unused in v2)
        ts_delta = stream.varint(10)
        offset_delta = stream.varint(5)
        for what in ("key", "value"):
            size = stream.varint(5)
            if size < -1 or stream.consumed + size > end:
                raise _invalid(f"record {i} has a bad {what} length {size}")
            if size > 0:
                stream.skip(size)
        headers = stream.varint(5)
        if headers < 0 or headers * 2 > end - stream.consumed:
            raise _invalid(f"record {i} has a bad header count {headers}")
        for _ in range(headers):
            size = stream.varint(5)
            if size < 0 or stream.consumed + size > end:
                raise _invalid(f"record {i} has a bad header key length {size}")
            stream.skip(size)
            size = stream.varint(5)
            if size < -1 or stream.consumed + size > end:
                raise _invalid(f"record {i} has a bad header value length {size}")
            if size > 0:
                stream.skip(size)
        if stream.consumed != end:
            raise _invalid(
                f"record {i} declares {length} bytes but its fields take {stream.consumed - start}"
            )
        yield offset_delta, ts_delta


def _section_stream(buf: bytes | memoryview, info: BatchInfo, limit: int) -> _Stream:
    section = bytes(memoryview(buf)[info.position + HEADER_SIZE : info.position + info.size])
    codec = info.attributes & COMPRESSION_MASK
    if codec == 0:
        return _Stream(iter((section,)))
    return _Stream(decompressed_chunks(codec, section, limit))


# ---------------------------------------------------------------------------------------------
# produce validation


class RecordStats(Slotted):
    """What validation learnt about a batch's records: the smallest and largest timestamp delta,
    the first record's delta, and whether every record's attributes byte is 0. ``section`` is the
    decompressed records section when the caller asked to keep it and it fit the window. (Not a
    dataclass: see broker.slotted.)"""

    __slots__ = ("min_ts_delta", "max_ts_delta", "first_ts_delta", "plain_attributes", "section")

    def __init__(
        self,
        min_ts_delta: int,
        max_ts_delta: int,
        first_ts_delta: int,
        plain_attributes: bool,
        section: bytes | None = None,
    ) -> None:
        self.min_ts_delta = min_ts_delta
        self.max_ts_delta = max_ts_delta
        self.first_ts_delta = first_ts_delta
        self.plain_attributes = plain_attributes
        self.section = section


if native_batch is not None:
    _native.bind(BatchInfo, RecordStats)  # the classes check_batch builds


def validate_records(buf: bytes | memoryview, info: BatchInfo, limit: int, keep: bool = False) -> RecordStats:
    """Check the records of the (CRC-checked) batch ``info`` in ``buf``: raises InvalidBatch
    (INVALID_RECORD when ``corrupt`` is false, else CORRUPT_MESSAGE). ``limit`` caps the
    decompressed size of a compressed batch. With ``keep``, the decompressed section of a
    compressed batch that fits the window comes back in ``section`` (for recompression)."""
    view = memoryview(buf)[info.position + HEADER_SIZE : info.position + info.size]
    codec = info.attributes & COMPRESSION_MASK
    if not codec:
        facts = native_check(view, info.records_count) if native_check is not None else None
        if facts is not None:  # well formed: no copy of the section unless asked for
            stats = RecordStats(*facts)
            stats.section = bytes(view) if keep else None
            return stats
        section = bytes(view)  # the Python walk indexes bytes faster than a memoryview
        stats = _check_plain(section, info.records_count)
        stats.section = section if keep else None
        return stats
    section = bytes(view)
    chunks = decompressed_chunks(codec, section, limit)
    head = bytearray()
    for chunk in chunks:
        head += chunk
        if len(head) > WINDOW:
            break
    else:  # the usual case: the whole section fits the window
        stats = check_section(head, info.records_count)
        stats.section = bytes(head) if keep else None
        return stats
    _check_streamable(info)
    stream = _Stream(itertools.chain((bytes(head),), chunks))
    del head
    lo, hi, first = 1 << 63, -(1 << 63), 0
    for expected, (offset_delta, ts_delta) in enumerate(_scan(stream, info.records_count)):
        if offset_delta != expected:
            raise _invalid(f"record {expected} has offset delta {offset_delta}, not {expected}")
        lo, hi = min(lo, ts_delta), max(hi, ts_delta)
        if expected == 0:
            first = ts_delta
    if not stream.at_end():
        raise _invalid(f"bytes left after the {info.records_count} records the batch declares")
    return RecordStats(lo, hi, first, False)  # attributes not tracked here: a rebuild decodes the records


def validate_one(records: bytes | memoryview, keep: bool = False) -> tuple[BatchInfo, RecordStats] | None:
    """What ``validate_produce`` and then ``validate_records`` give for the records of one
    partition of a Produce request, in one compiled call, when they are exactly one valid
    uncompressed v2 batch: its header and its records' facts (``keep``: with the section, as
    ``validate_records`` keeps it). None in every other case (the extension not built or turned
    off, several batches, a compressed batch, anything invalid): the caller then runs those two,
    which accept or raise as they always do. tests/log/test_native.py holds the two to the same
    answers."""
    if native_batch is None:
        return None
    one = native_batch(records)
    if one is not None and keep:
        one[1].section = bytes(memoryview(records)[HEADER_SIZE:])
    return one


def record_timestamps(
    buf: bytes | memoryview, info: BatchInfo, limit: int = DEFAULT_LIMIT
) -> Iterator[tuple[int, int]]:
    """(offset delta, timestamp) of every record of a batch, streamed (a LogAppendTime batch gives
    each record its max timestamp; a CreateTime one's wrap around a long as Kafka's do)."""
    log_append = info.attributes & TIMESTAMP_TYPE_MASK
    if info.attributes & COMPRESSION_MASK:
        _check_streamable(info)
    for offset_delta, ts_delta in _scan(_section_stream(buf, info, limit), info.records_count):
        yield (
            offset_delta,
            info.max_timestamp if log_append else record_timestamp(info.base_timestamp, ts_delta),
        )


def _check_streamable(info: BatchInfo) -> None:
    if info.records_count > MAX_STREAMED_RECORDS:
        raise _invalid(
            f"{info.records_count} records decompressing to more than {WINDOW} bytes (at most "
            f"{MAX_STREAMED_RECORDS} records are accepted in a batch that large)"
        )


def check_section(data: bytes | bytearray, count: int) -> RecordStats:
    """The records section ``data`` of ``count`` records checked in memory (:func:`_check_plain`),
    by the compiled walk when there is one."""
    if native_check is not None:
        facts = native_check(data, count)
        if facts is not None:
            return RecordStats(*facts)
    return _check_plain(data, count)


def _check_plain(data: bytes | bytearray, count: int) -> RecordStats:
    """:func:`validate_records` for an uncompressed section: the same checks, inlined for speed
    (the produce hot path), with no copies of keys or values."""
    n = len(data)
    if count * 7 > n:  # the smallest record takes 7 bytes
        raise _invalid(f"{n} bytes cannot hold {count} records")
    zz = _ZZ
    rv = _read_varint
    pos = 0
    i = 0
    attrs = 0
    first = _first_ts_delta(data) if count else 0
    lo = hi = first
    try:
        while i < count:
            # each varint: one byte from a table, two bytes inline, longer ones in _read_varint
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
                raise _invalid(f"record {i} declares a bad length {length}")
            # attributes (0 from every client; noted, as a rebuilt batch writes 0), then the
            # timestamp delta: a varlong of at most 10 bytes
            attrs |= data[pos]
            pos += 1
            b = data[pos]
            if b < 0x80:
                td = zz[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                td = (z >> 1) ^ -(z & 1)
                pos += 2
            else:
                try:
                    td, pos = rv(data, pos, 10)
                except InvalidRecords:
                    raise _invalid(f"record {i} has a timestamp delta longer than 10 bytes") from None
            if td > hi:
                hi = td
            elif td < lo:
                lo = td
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
            if od != i:
                raise _invalid(f"record {i} has offset delta {od}, not {i}")
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
            if size > 0:
                pos += size
            elif size < -1:
                raise _invalid(f"record {i} has a bad key length {size}")
            if pos >= end:
                raise _invalid(f"record {i}'s key runs past the record")
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
            if size > 0:
                pos += size
            elif size < -1:
                raise _invalid(f"record {i} has a bad value length {size}")
            if pos >= end:
                raise _invalid(f"record {i}'s value runs past the record")
            if data[pos] == 0:
                pos += 1
            else:
                pos = _check_headers(data, pos, end, i)
            if pos != end:
                raise _invalid(f"record {i} declares {length} bytes but its fields end at {pos - end:+d}")
            i += 1
    except IndexError:
        raise _invalid("the records section is truncated") from None
    except InvalidRecords as e:  # a varint that is too long or out of range
        raise _invalid(str(e)) from None
    if pos != n:
        raise _invalid(f"{n - pos} bytes left after the {count} records the batch declares")
    return RecordStats(lo, hi, first, attrs == 0)


def _first_ts_delta(data: bytes | bytearray) -> int:
    """The first record's timestamp delta (length varint, attributes byte, then the delta); 0 when
    the section is too malformed to tell (the full check reports it)."""
    try:
        pos = _read_varint(data, 0, 5)[1] + 1
        return _read_varint(data, pos, 10)[0]
    except (IndexError, InvalidRecords):
        return 0


def _check_headers(data: bytes, pos: int, end: int, i: int) -> int:
    count, pos = _read_varint(data, pos, 5)
    if count < 0 or count * 2 > end - pos:
        raise _invalid(f"record {i} has a bad header count {count}")
    for _ in range(count):
        size, pos = _read_varint(data, pos, 5)
        if size < 0 or pos + size > end:
            raise _invalid(f"record {i} has a bad header key length {size}")
        size, pos = _read_varint(data, pos + size, 5)
        if size < -1 or pos + size > end:
            raise _invalid(f"record {i} has a bad header value length {size}")
        pos += max(size, 0)
    return pos


# ---------------------------------------------------------------------------------------------
# timestamp lookup


def offset_for_timestamp(
    buf: bytes | memoryview, timestamp: int, limit: int = DEFAULT_LIMIT, min_offset: int = 0
) -> tuple[int, int] | None:
    """``(offset, timestamp)`` of the first record in ``buf`` (whole batches, CRCs not checked)
    whose timestamp is at least ``timestamp``, or None. Only batches whose max timestamp can hold
    one are read, and their records are streamed up to the one found (``limit`` caps how far a
    compressed batch is decompressed). A LogAppendTime batch gives every record its max timestamp.
    Records below ``min_offset`` (the log start offset, inside its batch) are skipped.
    Raises InvalidBatch for a compressed batch of more than MAX_STREAMED_RECORDS records."""
    pos, end = 0, len(buf)
    while pos < end:
        info = read_header(buf, pos)
        if info.max_timestamp >= timestamp:
            if info.attributes & COMPRESSION_MASK:
                _check_streamable(info)
            log_append = info.attributes & TIMESTAMP_TYPE_MASK
            for offset_delta, ts_delta in _scan(_section_stream(buf, info, limit), info.records_count):
                if info.base_offset + offset_delta < min_offset:
                    continue
                if log_append:
                    return info.base_offset + offset_delta, info.max_timestamp
                ts = record_timestamp(info.base_timestamp, ts_delta)
                if ts >= timestamp:
                    return info.base_offset + offset_delta, ts
        pos += info.size
    return None
