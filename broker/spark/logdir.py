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

import orjson

from broker.log.batch import CONTROL_MASK, HEADER, HEADER_SIZE, TIMESTAMP_TYPE_MASK, TRANSACTIONAL_MASK
from broker.log.control import parse_marker
from broker.log.manager import CHECKPOINT, START_CHECKPOINT, read_checkpoint
from broker.log.records import decode_batch

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
            stamps += [bts + rec.timestamp_delta for rec in recs]
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
