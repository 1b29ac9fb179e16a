"""Read a broker data directory without a broker and without Spark: topics, partitions, segments,
durable offsets, records, and the coordinator's records as rows. The Spark sources plan and read
with these functions; they are plain Python so they can be tested and benchmarked on their own.

What is readable is bounded by what the broker has *durably* written: the recovery-point checkpoint
(``recovery-point-offset-checkpoint``, rewritten every few seconds and at shutdown) names, per
partition, the offset below which everything was fsynced. Bytes past it (a write in flight, a torn
tail that recovery would cut off) are never read.
"""

from __future__ import annotations

import gc
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from broker.log.batch import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER,
    HEADER_SIZE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchInfo,
    check_crc,
    read_header,
    record_timestamp,
)
from broker.log.control import parse_marker
from broker.log.manager import CHECKPOINT, START_CHECKPOINT, read_checkpoint
from broker.log.records import InvalidRecords, decode_batch, decode_records, decompress

OFFSETS_TOPIC = "__consumer_offsets"
#: ``kafka.isolation.level`` values, as Kafka's consumer takes them
READ_UNCOMMITTED, READ_COMMITTED = "read_uncommitted", "read_committed"
ISOLATION_LEVELS = (READ_UNCOMMITTED, READ_COMMITTED)


class DataLossError(RuntimeError):
    """Offsets a reader needed are gone (retention deleted their segment)."""


@dataclass(frozen=True, slots=True)
class SegmentRange:
    """One input split: offsets [start, end) of one segment file of one topic-partition."""

    topic: str
    partition: int
    path: str
    start: int
    end: int


def topics(data_dir: str | Path) -> dict[str, dict]:
    """name -> {"id": uuid, "partitions": n, "internal": bool} from the topic registry."""
    path = Path(data_dir) / "topics.json"
    if not path.exists():
        return {}
    doc = orjson.loads(path.read_bytes())
    return {
        t["name"]: {
            "id": uuid.UUID(t["id"]),
            "partitions": t["partitions"],
            "internal": t.get("internal", False),
        }
        for t in doc["topics"]
    }


def durable_offsets(data_dir: str | Path) -> dict[tuple[str, int], int]:
    """(topic, partition) -> offset below which the broker has fsynced everything."""
    return read_checkpoint(Path(data_dir) / CHECKPOINT)


def partition_dir(data_dir: str | Path, topic: str, partition: int) -> Path:
    return Path(data_dir) / f"{topic}-{partition}"


def segment_bases(data_dir: str | Path, topic: str, partition: int) -> list[int]:
    d = partition_dir(data_dir, topic, partition)
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return []
    return sorted(int(n[:-4]) for n in names if n.endswith(".log") and n[:-4].isdigit())


def segment_path(data_dir: str | Path, topic: str, partition: int, base: int) -> str:
    return str(partition_dir(data_dir, topic, partition) / f"{base:020d}.log")


def select_topics(data_dir: str | Path, subscribe: str | None, include_internal: bool = False) -> list[str]:
    """Topics named in ``subscribe`` (comma-separated; all non-internal topics when None)."""
    known = topics(data_dir)
    if subscribe is None:
        return sorted(n for n, t in known.items() if include_internal or not t["internal"])
    names = [n.strip() for n in subscribe.split(",") if n.strip()]
    missing = [n for n in names if n not in known and n != OFFSETS_TOPIC]
    if missing:
        raise ValueError(f"unknown topic(s) {missing} in {data_dir} (known: {sorted(known)})")
    return names


def partitions_of(data_dir: str | Path, topic_names: list[str]) -> list[tuple[str, int]]:
    known = topics(data_dir)
    out = []
    for name in topic_names:
        if name == OFFSETS_TOPIC and name not in known:
            out.append((name, 0))
        else:
            out += [(name, p) for p in range(known[name]["partitions"])]
    return out


def log_start_offset(data_dir: str | Path, topic: str, partition: int) -> int:
    """The first offset still stored: the first segment's base, or the start DeleteRecords moved
    inside it (``log-start-offset-checkpoint``), whichever is higher."""
    bases = segment_bases(data_dir, topic, partition)
    first = bases[0] if bases else 0
    return max(first, read_checkpoint(Path(data_dir) / START_CHECKPOINT).get((topic, partition), 0))


def plan(
    data_dir: str | Path, tp: tuple[str, int], start: int, end: int, fail_on_data_loss: bool = True
) -> list[SegmentRange]:
    """Segment splits covering offsets [start, end) of one partition. When retention or DeleteRecords
    has deleted offsets at or after ``start``, raise DataLossError, or start at the first stored
    offset when ``fail_on_data_loss`` is False."""
    topic, partition = tp
    bases = segment_bases(data_dir, topic, partition)
    if start >= end:
        return []
    stored = log_start_offset(data_dir, topic, partition)
    if not bases or stored > start:
        first = stored if bases else end
        if fail_on_data_loss and first > start:
            raise DataLossError(
                f"{topic}-{partition}: offsets {start}..{min(first, end) - 1} are no longer stored "
                f"(the log now starts at {first}, earlier records were deleted by retention or DeleteRecords); "
                "set failOnDataLoss=false to skip them"
            )
        start = max(start, first)
    out = []
    for i, base in enumerate(bases):
        nxt = bases[i + 1] if i + 1 < len(bases) else None
        lo, hi = max(start, base), end if nxt is None else min(end, nxt)
        if lo < hi:
            out.append(SegmentRange(topic, partition, segment_path(data_dir, topic, partition, base), lo, hi))
    return out


@dataclass(frozen=True, slots=True)
class Transactions:
    """What a read_committed reader of one partition needs, up to an end offset."""

    #: the first offset of the oldest transaction still open at the end (Kafka's LSO), or the end
    last_stable_offset: int
    #: aborted transactions, in marker order: (producer id, first offset, offset of the abort marker)
    aborted: tuple[tuple[int, int, int], ...]


def transactions(data_dir: str | Path, tp: tuple[str, int], end: int) -> Transactions:
    """The transactions of ``tp`` below ``end``, from its batch headers and markers (a producer's
    transaction runs from its first transactional batch to its marker; only markers are decoded).
    Reads every batch header below ``end`` once."""
    topic, partition = tp
    ongoing: dict[int, int] = {}
    aborted: list[tuple[int, int, int]] = []
    for base in segment_bases(data_dir, topic, partition):
        if base >= end:
            break
        for buf, pos in iter_segment_batches(segment_path(data_dir, topic, partition, base), 0, end):
            h = HEADER.unpack_from(buf, pos)
            offset, attributes, pid = h[0], h[5], h[9]
            if pid < 0 or not attributes & TRANSACTIONAL_MASK:
                continue
            if attributes & CONTROL_MASK:
                first = ongoing.pop(pid, offset)
                _info, recs = decode_batch(buf, pos, verify_crc=False)
                if recs and parse_marker(recs[0].key) is False:
                    aborted.append((pid, first, offset))
            else:
                ongoing.setdefault(pid, offset)
    return Transactions(min([end, *ongoing.values()]), tuple(aborted))


def iter_segment_batches(path: str, start: int, end: int) -> Iterator[tuple[bytes, int]]:
    """(buffer, position) of each batch in the segment holding any offset in [start, end), read in
    large chunks (each batch is whole in its buffer)."""
    chunk = 4 << 20
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        pos = 0
        buf = b""
        buf_start = 0
        while pos + HEADER_SIZE <= size:
            rel = pos - buf_start
            if rel + HEADER_SIZE > len(buf):
                f.seek(pos)
                buf, buf_start, rel = f.read(chunk), pos, 0
            h = HEADER.unpack_from(buf, rel)
            base, length, last = h[0], h[1], h[0] + h[6]
            total = length + 12
            if base >= end or pos + total > size:
                return
            if rel + total > len(buf):
                f.seek(pos)
                buf, buf_start, rel = f.read(max(chunk, total)), pos, 0
                if len(buf) < total:
                    return
            if last >= start:
                yield buf, rel
            pos += total


def read_columns(
    r: SegmentRange, verify_crc: bool = True, aborted: tuple[tuple[int, int, int], ...] | None = None
) -> dict[str, list]:
    """The records of ``r`` as columns in the layout of Spark's Kafka source (timestamps in ms).
    Control batches (transaction markers) are never records; with ``aborted`` (read_committed: the
    partition's aborted transactions, :func:`transactions`) the batches of aborted transactions
    are left out too, as a read_committed consumer leaves them out.

    The cyclic garbage collector is paused meanwhile: decoding allocates millions of small acyclic
    objects, and the collections they would trigger cost about a quarter of the time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _read_columns(r, verify_crc, aborted)
    finally:
        if enabled:
            gc.enable()


def _is_aborted(ranges: dict[int, list[tuple[int, int]]], pid: int, offset: int) -> bool:
    return any(first <= offset < marker for first, marker in ranges.get(pid, ()))


def _read_columns(
    r: SegmentRange, verify_crc: bool, aborted: tuple[tuple[int, int, int], ...] | None
) -> dict[str, list]:
    skip: dict[int, list[tuple[int, int]]] = {}
    for pid, first, marker in aborted or ():
        if first < r.end and marker >= r.start:
            skip.setdefault(pid, []).append((first, marker))
    keys: list = []
    values: list = []
    offsets: list = []
    stamps: list = []
    ts_types: list = []
    headers: list = []
    start, end = r.start, r.end
    for buf, pos in iter_segment_batches(r.path, start, end):
        info, recs = decode_batch(buf, pos, verify_crc)
        if info.attributes & CONTROL_MASK:
            continue
        if (
            skip
            and info.attributes & TRANSACTIONAL_MASK
            and _is_aborted(skip, info.producer_id, info.base_offset)
        ):
            continue
        base = info.base_offset
        log_append = info.attributes & TIMESTAMP_TYPE_MASK
        ts_type = 1 if log_append else 0
        bts = info.base_timestamp
        if not (base >= start and base + info.last_offset_delta < end):  # a batch straddling the range
            recs = [rec for rec in recs if start <= base + rec.offset_delta < end]
        n = len(recs)
        keys += [rec.key for rec in recs]
        values += [rec.value for rec in recs]
        offsets += [base + rec.offset_delta for rec in recs]
        if log_append:
            stamps += [info.max_timestamp] * n
        else:
            stamps += [record_timestamp(bts, rec.timestamp_delta) for rec in recs]
        ts_types += [ts_type] * n
        headers += [[{"key": k, "value": v} for k, v in rec.headers] if rec.headers else None for rec in recs]
    n = len(offsets)
    return {
        "key": keys,
        "value": values,
        "topic": [r.topic] * n,
        "partition": [r.partition] * n,
        "offset": offsets,
        "timestamp": stamps,
        "timestampType": ts_types,
        "headers": headers,
    }


def end_offset(data_dir: str | Path, tp: tuple[str, int], durable: dict[tuple[str, int], int]) -> int:
    """The readable end of a partition: its durable offset from the broker's checkpoint (0 when the
    broker has not checkpointed the partition yet), never below the first stored offset. Nothing at
    or past it is read, so this costs no scan of the (possibly large) active segment."""
    bases = segment_bases(data_dir, *tp)
    bound = durable.get(tp, 0)
    return max(bound, bases[0]) if bases else bound


# ---------------------------------------------------------------------------------------------
# column-wise reading: Arrow record batches without a Python object per record

#: the records of a segment range as Arrow columns, in the layout of Spark's Kafka source
ARROW_RECORDS = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
        ("headers", pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))),
    ]
)
#: decompressed records gathered into one Arrow batch (bounds a batch's memory, and lets Spark
#: convert one batch while the next is decoded)
ARROW_CHUNK_BYTES = 8 << 20
#: how far a record's length varint moves past the record: by the varint's first byte when it
#: is its only one, by its 14 bits when it has two
_STEP1 = tuple(1 + ((z >> 1) ^ -(z & 1)) for z in range(128))
_STEP2 = tuple(2 + ((z >> 1) ^ -(z & 1)) for z in range(1 << 14))


def read_arrow(
    r: SegmentRange,
    verify_crc: bool = True,
    aborted: tuple[tuple[int, int, int], ...] | None = None,
    chunk_bytes: int = ARROW_CHUNK_BYTES,
) -> Iterator[pa.RecordBatch]:
    """The records of ``r`` as Arrow batches of :data:`ARROW_RECORDS`: the rows and values of
    :func:`read_columns` (same control batches, aborted transactions and range bounds), with the
    timestamps as Arrow timestamps, one batch per ``chunk_bytes`` of decompressed records.

    Each batch header is read, its CRC checked and its records section decompressed as by
    :func:`broker.log.records.decode_batch`; the records are then decoded column-wise: only the chain
    of record lengths is walked in Python, every other field is read by numpy over all the records
    of the chunk at once, and keys and values are cut out of the decompressed bytes by Arrow. A
    malformed records section raises InvalidRecords with the record decoder's own message (it
    decodes the chunk's batches again to find it). Unlike :func:`read_columns`, the records of an
    aborted transaction's batches are skipped without being decoded, as a consumer skips them."""
    skip: dict[int, list[tuple[int, int]]] = {}
    for pid, first, marker in aborted or ():
        if first < r.end and marker >= r.start:
            skip.setdefault(pid, []).append((first, marker))
    chunk = _Chunk()
    for buf, pos in iter_segment_batches(r.path, r.start, r.end):
        info = read_header(buf, pos)
        if verify_crc:
            check_crc(buf, info)
        attributes = info.attributes
        codec = attributes & COMPRESSION_MASK
        section = memoryview(buf)[pos + HEADER_SIZE : pos + info.size]
        if attributes & CONTROL_MASK:  # a marker is no record, but a malformed one is an error
            decode_records(decompress(codec, section), info.records_count)
            continue
        if skip and attributes & TRANSACTIONAL_MASK and _is_aborted(skip, info.producer_id, info.base_offset):
            continue
        chunk.add(info, decompress(codec, section) if codec else bytes(section))
        if chunk.size >= chunk_bytes:
            yield from chunk.build(r)
            chunk = _Chunk()
    yield from chunk.build(r)


class _BadRecord(Exception):
    def __init__(self, index: int):
        super().__init__(index)
        self.index = index


def _long_varint(data: bytes, pos: int) -> tuple[int, int]:
    """A varint of 3 to 5 bytes at ``pos`` (-1 when longer: the caller's record decoder reports it)."""
    z, shift = 0, 0
    for k in range(5):
        b = data[pos + k]
        z |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), pos + k + 1
    return -1, pos


class _Chunk:
    """The decompressed records sections of consecutive batches, and where each record lies in them."""

    def __init__(self) -> None:
        self.sections: list[bytes] = []
        self.section_at: list[int] = []
        self.infos: list[BatchInfo] = []
        self.size = 0
        #: per batch: the position of each record (of its length varint) in the batch's section
        self.heads: list[list[int]] = []
        #: after build(): the positions of every record and of its end in the joined sections
        self.at = self.ends = np.zeros(0, np.int64)

    def add(self, info: BatchInfo, data: bytes) -> None:
        """Walk the record lengths of one batch's records section (the one serial dependency; the
        lengths are checked afterwards, column-wise)."""
        count, n = info.records_count, len(data)
        if count < 0 or count * 7 > n:  # the smallest record takes 7 bytes
            decode_records(data, count)  # raises InvalidRecords with the record decoder's message
            raise InvalidRecords(f"{n} bytes cannot hold {count} records")
        one, two = _STEP1, _STEP2
        heads: list[int] = []
        push = heads.append
        pos = 0
        try:
            for _ in range(count):
                push(pos)
                b = data[pos]
                if b < 0x80:
                    pos += one[b]
                elif data[pos + 1] < 0x80:
                    pos += two[(b & 0x7F) | (data[pos + 1] << 7)]
                else:
                    length, pos = _long_varint(data, pos)
                    pos += length
        except IndexError:
            pos = -1
        if pos != n:  # a bad length, a truncated section, bytes left after the records
            decode_records(data, count)
            raise InvalidRecords(f"the records section of {n} bytes does not hold {count} records")
        self.heads.append(heads)
        self.sections.append(data)
        self.section_at.append(self.size)
        self.infos.append(info)
        self.size += n

    def build(self, r: SegmentRange) -> Iterator[pa.RecordBatch]:
        if not any(self.heads):
            return
        blob = b"".join(self.sections)
        buf = np.frombuffer(blob, np.uint8)
        heads = np.concatenate(
            [np.array(h, np.int64) + at for h, at in zip(self.heads, self.section_at, strict=True)]
        )
        n = len(heads)
        ends = np.empty(n, np.int64)  # a record ends where the next begins (sections are adjacent)
        ends[:-1] = heads[1:]
        ends[-1] = self.size
        self.at, self.ends = heads, ends
        try:
            length, starts = _varints(buf, heads, ends, 5)
            bad = (length < 6) | (starts + length != ends)
            if bad.any():
                self._raise(int(np.argmax(bad)))
            ts_delta, pos = _varints(buf, starts + 1, ends, 10)  # past the attributes byte
            off_delta, pos = _varints(buf, pos, ends, 5)
            key_len, key_at = _varints(buf, pos, ends, 5)
            value_len, value_at = _varints(buf, np.minimum(key_at + np.maximum(key_len, 0), ends), ends, 5)
            pos = np.minimum(value_at + np.maximum(value_len, 0), ends)
            header_count, pos = _varints(buf, pos, ends, 5)
        except _BadRecord as e:
            self._raise(e.index)
        bad = (key_len < -1) | (value_len < -1) | (header_count < 0) | ((header_count == 0) & (pos != ends))
        if bad.any():
            self._raise(int(np.argmax(bad)))
        nb = len(self.infos)
        counts = np.fromiter((i.records_count for i in self.infos), np.int64, nb)
        offsets = (
            np.repeat(np.fromiter((i.base_offset for i in self.infos), np.int64, nb), counts) + off_delta
        )
        log_append = np.fromiter((i.attributes & TIMESTAMP_TYPE_MASK for i in self.infos), np.int32, nb) != 0
        stamp = np.fromiter(
            (i.max_timestamp if i.attributes & TIMESTAMP_TYPE_MASK else i.base_timestamp for i in self.infos),
            np.int64,
            nb,
        )
        log_append = np.repeat(log_append, counts)
        stamps = np.repeat(stamp, counts) + np.where(log_append, 0, ts_delta)
        headers: list | None = None
        with_headers = np.flatnonzero(header_count != 0)
        if len(with_headers):
            headers = [None] * n
            for i in with_headers.tolist():
                headers[i] = self._headers(blob, i)
        # every record of a batch inside the range, those inside it of a batch straddling its bounds
        inside = np.fromiter(
            (i.base_offset >= r.start and i.base_offset + i.last_offset_delta < r.end for i in self.infos),
            np.bool_,
            nb,
        )
        keep = np.repeat(inside, counts) | ((offsets >= r.start) & (offsets < r.end))
        rows = None if keep.all() else np.flatnonzero(keep)
        if rows is not None and not len(rows):
            return
        if rows is not None:
            offsets, stamps, log_append = offsets[rows], stamps[rows], log_append[rows]
            if headers is not None:
                headers = [headers[i] for i in rows.tolist()]
        m = len(offsets)
        columns = [
            _binary(blob, key_at, key_len, rows),
            _binary(blob, value_at, value_len, rows),
            pa.repeat(pa.scalar(r.topic, pa.string()), m),
            pa.array(np.full(m, r.partition, np.int32)),
            pa.array(offsets),
            pc.multiply(pa.array(stamps), 1000).cast(ARROW_RECORDS.field("timestamp").type),
            pa.array(log_append.astype(np.int32)),
            pa.nulls(m, ARROW_RECORDS.field("headers").type)
            if headers is None
            else pa.array(headers, ARROW_RECORDS.field("headers").type),
        ]
        yield pa.RecordBatch.from_arrays(columns, schema=ARROW_RECORDS)

    def _raise(self, i: int) -> NoReturn:
        """Raise the record decoder's error for the first malformed batch (record ``i`` is in one)."""
        for data, info in zip(self.sections, self.infos, strict=True):
            decode_records(data, info.records_count)
        raise InvalidRecords(f"record {i} of the chunk is malformed")  # not reached: a batch raised

    def _headers(self, blob: bytes, i: int) -> list[dict] | None:
        """Record ``i``'s headers, decoded by the record decoder (records with headers are rare)."""
        try:
            (rec,) = decode_records(blob[self.at[i] : self.ends[i]], 1)
        except InvalidRecords:
            self._raise(i)
        return [{"key": k, "value": v} for k, v in rec.headers] if rec.headers else None


def _varints(
    buf: np.ndarray, pos: np.ndarray, ends: np.ndarray, max_bytes: int
) -> tuple[np.ndarray, np.ndarray]:
    """The zigzag varints (varlongs for ``max_bytes`` 10) at ``pos``, and the positions after them.
    Raises _BadRecord (the first record's index) for one that runs past its record's end (``ends``),
    is longer than ``max_bytes`` or out of range."""
    last = len(buf) - 1
    z = np.zeros(len(pos), np.uint64)
    size = np.zeros(len(pos), np.int64)
    more = np.ones(len(pos), np.bool_)
    for i in range(max_bytes):
        byte = buf[np.minimum(pos + i, last)].astype(np.uint64)
        z |= np.where(more, (byte & np.uint64(0x7F)) << np.uint64(7 * i), np.uint64(0))
        size += more
        more &= byte > 0x7F
        if not more.any():
            break
    after = pos + size
    value = (z >> np.uint64(1)).astype(np.int64) ^ -(z & np.uint64(1)).astype(np.int64)
    bad = more | (after > ends)
    if max_bytes == 5:
        bad |= (size == 5) & ((z >> np.uint64(32)) != 0)
    elif size.max() == 10:  # the 10th byte of a varlong holds only its 64th bit
        bad |= (size == 10) & (buf[np.minimum(pos + 9, last)] > 1)
    if bad.any():
        raise _BadRecord(int(np.argmax(bad)))
    return value, after


def _binary(blob: bytes, at: np.ndarray, length: np.ndarray, rows: np.ndarray | None) -> pa.Array:
    """The byte strings ``blob[at:at+length]`` (null where length is -1), of ``rows`` or all: one
    Arrow array over the whole blob whose elements alternate between the fields and the bytes between
    them, from which Arrow takes every other element."""
    n = len(at)
    size = np.maximum(length, 0)
    bounds = np.empty(2 * n + 1, np.int64)
    bounds[0 : 2 * n : 2] = at
    bounds[1 : 2 * n : 2] = at + size
    bounds[2 * n] = at[-1] + size[-1]
    large = len(blob) >= 1 << 31
    whole = pa.Array.from_buffers(
        pa.large_binary() if large else pa.binary(),
        2 * n,
        [None, pa.py_buffer(bounds if large else bounds.astype(np.int32)), pa.py_buffer(blob)],
    )
    pick = np.arange(0, 2 * n, 2) if rows is None else rows * 2
    out = whole.take(pa.array(pick))
    if large:
        out = out.cast(pa.binary())
    nulls = length < 0
    if nulls.any():
        valid = ~(nulls if rows is None else nulls[rows])
        out = pc.if_else(pa.array(valid), out, pa.scalar(None, pa.binary()))
    return out
