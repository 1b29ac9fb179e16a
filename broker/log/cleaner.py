"""Key compaction of a partition log (Kafka's log cleaner), used for the coordinator's log.

A pass cleans the closed segments ``[start, end)`` (never the active segment, never anything at or
above the high-watermark segment): for every record key it keeps only the record with the highest
offset, and drops a tombstone (null value) once it is older than ``log.cleaner.delete.retention.ms``
-- by then every earlier record of its key is gone in the same pass. Records keep their offsets and
timestamps; the survivors of consecutive plain batches (no producer id, not control, not
transactional, uncompressed or not) are packed into new uncompressed batches of up to
``MERGE_RECORDS`` records, so the compacted log also replays with less per-batch work. Batches with
a producer id or the control/transactional bit are kept byte for byte (their records still count as
the latest of their keys, except a transaction's: TxnOffsetCommit records may be aborted, so the
record they would supersede stays). Records without a key cannot be compacted and are kept.

Crash safety -- SIGKILL at any instant leaves either the old segments or the new one:

1. (worker thread) the survivors are written to ``<start>-<end>.cleaned`` and fsynced;
2. (event loop) the log is checked to still start with the segments read, then (worker thread)
   the file is renamed to ``<start>-<end>.swap`` and the directory fsynced -- the commit point;
3. (worker thread) the old ``.log``/``.index`` files of bases in ``[start, end)`` are deleted, the
   swap file is renamed to ``<start>.log`` and the directory fsynced; meanwhile the event loop
   keeps reading the old segments through their open file descriptors;
4. (event loop) the new segment replaces the old ones in memory and their descriptors are closed.

At start-up (:func:`complete_swaps`) a ``.swap`` file is finished as in step 3 and a ``.cleaned``
file is deleted. The old segments are only read, through file descriptors of the worker's own.

User topics (``cleanup.policy=compact`` or ``compact,delete``) are cleaned as Kafka's LogCleaner
cleans them (:func:`filter_segments`, same crash-safe swap): the key -> latest offset map is built from
the dirty part only (from the cleaner checkpoint to the first uncleanable offset) and every batch of
the log is filtered on its own (MemoryRecords.filterTo) -- a batch keeps its base offset, last offset,
producer id, epoch, base sequence, timestamp type and codec; a batch nothing was removed from is kept
byte for byte; a batch left empty is dropped, unless it is the last batch of an active producer (its
last sequence) or the last batch of the cleaned range, which stay as empty batches (Kafka's
RETAIN_EMPTY). Records without a key are removed (Kafka counts them as invalid). Tombstones follow
KIP-534: the first pass that keeps one stamps its batch with a delete horizon (now +
``delete.retention.ms``, in the base timestamp, attribute bit 0x40); a later pass past the horizon
drops it. Transactions as Kafka's transaction-aware cleaner treats them (CleanedTransactions):
the range ends at the segment holding the last stable offset, so nothing of an undecided transaction
is cleaned; the batches of aborted transactions (the aborted-transaction index of the range says
which) are removed and never enter the key map; a commit or abort marker stays while a batch of its
transaction was read in the pass, then is stamped with a delete horizon like a tombstone and goes on
the first pass past it (an active producer's marker of its current epoch, with no data batch, stays
empty); the cleaned range's aborted-transaction index keeps the entries whose markers stay for a
batch, and is written beside the cleaned log (``.txncleaned``, then ``.txnswap``) and swapped with
it. A partition's next pass is picked as Kafka picks it: the filthiest log whose dirty ratio is
above ``min.cleanable.dirty.ratio``, or whose oldest dirty record is older than
``max.compaction.lag.ms``; segments with a record younger than ``min.compaction.lag.ms`` wait.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

from broker.log.crc import crc32c

from .batch import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER,
    HEADER_SIZE,
    LEADER_EPOCH,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    record_timestamp,
)
from .control import parse_marker
from .records import _ZZ, InvalidRecords, _read_varint, _varint, compress, decompress
from .segment import segment_name
from .txnindex import ENTRY, SUFFIX, AbortedTxn

log = logging.getLogger(__name__)

DELETE_HORIZON_MASK = 0x40  # KIP-534: the base timestamp is the batch's delete horizon
CLEANED = ".cleaned"
SWAP = ".swap"
#: the aborted-transaction index of a user topic's cleaned range, beside its .cleaned / .swap log
TXN_CLEANED = ".txncleaned"
TXN_SWAP = ".txnswap"
CHECKPOINT = "cleaner-offset-checkpoint"
MERGE_RECORDS = 4096
_READ = 8 << 20


class CleanCancelled(Exception):
    """The broker is shutting down; the pass left only a ``.cleaned`` file behind (deleted)."""


class CleanResult:
    """A cleaning pass's output: the offsets it covers, its .cleaned file and its counts (a plain
    class, not a dataclass: see broker.cluster.Topic)."""

    def __init__(self, start: int, end: int, path: Path) -> None:
        self.start = start
        self.end = end
        self.path = path  # the fsynced .cleaned file
        self.records_read = 0
        self.records_kept = 0
        self.tombstones_dropped = 0
        self.bytes_read = 0
        self.bytes_written = 0
        self.batches_written = 0
        self.keys = 0
        self.aborted_dropped = 0  # records of aborted transactions removed
        self.markers_dropped = 0  # transaction markers removed (past their delete horizon)
        #: user topics: the aborted transactions whose markers lie in ``[start, end)`` after the
        #: pass (Kafka's cleaned transaction index); None when the pass leaves the index alone
        self.aborted: list[AbortedTxn] | None = None


def range_name(start: int, end: int) -> str:
    return f"{segment_name(start)}-{segment_name(end)}"


def parse_range(name: str) -> tuple[int, int] | None:
    stem = name.split(".", 1)[0]
    a, sep, b = stem.partition("-")
    if not sep or not a.isdigit() or not b.isdigit():
        return None
    return int(a), int(b)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------
# reading


def _iter_batches(path: Path, cancel: threading.Event | None) -> Iterator[tuple[bytes, int]]:
    """(buffer, position) of every whole batch in the file, read in large chunks."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        file_pos = 0
        while file_pos < size:
            if cancel is not None and cancel.is_set():
                raise CleanCancelled(str(path))
            buf = os.pread(fd, _READ, file_pos)
            pos = 0
            while pos + HEADER_SIZE <= len(buf):
                total = int.from_bytes(buf[pos + 8 : pos + 12], "big", signed=True) + 12
                if pos + total > len(buf):
                    break
                yield buf, pos
                pos += total
            if pos == 0:  # a batch larger than the chunk
                total = int.from_bytes(buf[8:12], "big", signed=True) + 12
                if len(buf) < HEADER_SIZE or total <= 0 or file_pos + total > size:
                    raise ValueError(f"{path}: unreadable batch at byte {file_pos}")
                yield os.pread(fd, total, file_pos), 0
                pos = total
            file_pos += pos
    finally:
        os.close(fd)


def _plain(buf: bytes, pos: int) -> bool:
    """Whether the batch at ``pos`` may be rewritten (no producer id, not control/transactional)."""
    f = HEADER.unpack_from(buf, pos)
    attributes, producer_id = f[5], f[9]
    return not (attributes & (CONTROL_MASK | TRANSACTIONAL_MASK)) and producer_id < 0


def _varint_at(data: bytes, pos: int) -> tuple[int, int]:
    b = data[pos]
    if b < 0x80:
        return _ZZ[b], pos + 1
    return _read_varint(data, pos, 10)


def _records(buf: bytes, pos: int, raw: bool) -> Iterator[tuple[int, int, bytes | None, bool, bytes]]:
    """(offset, timestamp, key, tombstone?, attributes + key/value/headers bytes or b"") of every
    record of the batch at ``pos`` -- parsed in place, no per-record objects the garbage collector
    tracks (a pass over millions of records must not make it stop the event loop's thread)."""
    f = HEADER.unpack_from(buf, pos)
    base, attributes, base_ts, max_ts, count = f[0], f[5], f[7], f[8], f[12]
    section = buf[pos + HEADER_SIZE : pos + f[1] + 12]
    if attributes & COMPRESSION_MASK:
        section = decompress(attributes & COMPRESSION_MASK, section)
    append_time = attributes & TIMESTAMP_TYPE_MASK
    zz = _ZZ
    p = 0
    for _ in range(count):
        b = section[p]  # each varint: one byte from a table, longer ones in _varint_at
        if b < 0x80:
            length, q = zz[b], p + 1
        else:
            length, q = _varint_at(section, p)
        end = q + length
        b = section[q + 1]
        if b < 0x80:
            ts_delta, q = zz[b], q + 2
        else:
            ts_delta, q = _varint_at(section, q + 1)
        b = section[q]
        if b < 0x80:
            offset_delta, q = zz[b], q + 1
        else:
            offset_delta, q = _varint_at(section, q)
        rest = q
        b = section[q]
        if b < 0x80:
            key_len, q = zz[b], q + 1
        else:
            key_len, q = _varint_at(section, q)
        if key_len >= 0:
            key = section[q : q + key_len]
            q += key_len
        else:
            key = None
        value_len = section[q]
        if value_len < 0x80:
            value_len = zz[value_len]
        else:
            value_len = _varint_at(section, q)[0]
        if end > len(section) or key_len < -1 or value_len < -1:
            raise InvalidRecords(f"record at byte {p} of the batch at offset {base} is malformed")
        ts = max_ts if append_time else record_timestamp(base_ts, ts_delta)
        # the attributes byte starts the record's body, right after its length
        raw_record = section[end - length : end - length + 1] + section[rest:end] if raw else b""
        yield base + offset_delta, ts, key, value_len < 0, raw_record
        p = end


def _batch(offsets: list[int], timestamps: list[int], records: list[bytes]) -> bytes:
    """An uncompressed batch of raw records (attributes + key/value/headers) at their offsets and
    timestamps."""
    base, base_ts = offsets[0], timestamps[0]
    body = []
    for off, ts, rec in zip(offsets, timestamps, records, strict=True):
        head = rec[:1] + _varint(ts - base_ts) + _varint(off - base)
        body.append(_varint(len(head) + len(rec) - 1) + head + rec[1:])
    section = b"".join(body)
    max_ts = max(timestamps)
    header = HEADER.pack(
        base,
        HEADER_SIZE - 12 + len(section),
        LEADER_EPOCH,
        2,
        0,
        0,
        offsets[-1] - base,
        base_ts,
        max_ts,
        -1,
        -1,
        -1,
        len(records),
    )
    out = bytearray(header) + section
    out[17:21] = crc32c(memoryview(out)[21:]).to_bytes(4, "big")
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# one pass


def clean_segments(
    directory: Path,
    sources: list[Path],
    start: int,
    end: int,
    now_ms: int,
    delete_retention_ms: int,
    cancel: threading.Event | None = None,
) -> CleanResult:
    """Write the compacted survivors of ``sources`` (the segment files of ``[start, end)``, in
    order) to ``<start>-<end>.cleaned``, fsynced. Runs in a worker thread; changes nothing else."""
    result = CleanResult(start, end, directory / (range_name(start, end) + CLEANED))
    # pass 1: the offset of the latest record of every key
    latest: dict[bytes, int] = {}
    pinned: set[bytes] = set()  # keys with a record in a batch kept byte for byte
    for path in sources:
        for buf, pos in _iter_batches(path, cancel):
            cleanable = _plain(buf, pos)
            # a transaction's records (TxnOffsetCommit) may yet be aborted: they never replace an
            # earlier record of their key, which stays until a plain record does
            transactional = bool(buf[pos + 22] & TRANSACTIONAL_MASK)
            for off, _ts, key, _tomb, _raw in _records(buf, pos, False):
                if key is not None:
                    if not transactional:
                        latest[key] = off
                    if not cleanable:
                        pinned.add(key)
                result.records_read += 1
    result.keys = len(latest)
    horizon = now_ms - delete_retention_ms
    # pass 2: the survivors, packed into batches
    fd = os.open(result.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        offsets: list[int] = []
        timestamps: list[int] = []
        records: list[bytes] = []

        def flush() -> None:
            if offsets:
                _write(fd, _batch(offsets, timestamps, records), result)
                offsets.clear()
                timestamps.clear()
                records.clear()

        for path in sources:
            for buf, pos in _iter_batches(path, cancel):
                size = int.from_bytes(buf[pos + 8 : pos + 12], "big", signed=True) + 12
                result.bytes_read += size
                cleanable = _plain(buf, pos)
                if not cleanable:
                    flush()
                    _write(fd, buf[pos : pos + size], result)
                    result.records_kept += int.from_bytes(buf[pos + 57 : pos + 61], "big")
                    continue
                for off, ts, key, tombstone, raw in _records(buf, pos, True):
                    if key is not None and latest[key] != off:
                        continue
                    if tombstone and key is not None and ts < horizon and key not in pinned:
                        result.tombstones_dropped += 1
                        continue
                    offsets.append(off)
                    timestamps.append(ts)
                    records.append(raw)
                    result.records_kept += 1
                    if len(offsets) >= MERGE_RECORDS:
                        flush()
        flush()
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        result.path.unlink(missing_ok=True)
        raise
    os.close(fd)
    return result


def _write(fd: int, data: bytes, result: CleanResult) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
    result.bytes_written += len(data)
    result.batches_written += 1


# ---------------------------------------------------------------------------------------------
# user topics: Kafka's per-batch filter


def _header(
    base: int,
    last_delta: int,
    attributes: int,
    base_ts: int,
    max_ts: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    count: int,
    section: bytes,
    leader_epoch: int = LEADER_EPOCH,
) -> bytes:
    header = HEADER.pack(
        base,
        HEADER_SIZE - 12 + len(section),
        leader_epoch,
        2,
        0,
        attributes,
        last_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    out = bytearray(header) + section
    out[17:21] = crc32c(memoryview(out)[21:]).to_bytes(4, "big")
    return bytes(out)


def _rebuilt(buf: bytes, pos: int, kept: list[tuple[int, int, bytes]], horizon: int | None) -> bytes:
    """The batch at ``pos`` with only the ``kept`` (offset, timestamp, raw) records: same base and
    last offset, partition leader epoch, producer fields, timestamp type and codec
    (MemoryRecords.buildRetainedRecordsInto)."""
    f = HEADER.unpack_from(buf, pos)
    base, attributes, last_delta, max_ts = f[0], f[5], f[6], f[8]
    codec = attributes & COMPRESSION_MASK
    append_time = attributes & TIMESTAMP_TYPE_MASK
    if horizon is not None:
        base_ts = horizon
        attributes |= DELETE_HORIZON_MASK
    else:
        base_ts = kept[0][1]
    body = []
    for off, ts, rec in kept:
        head = rec[:1] + _varint(ts - base_ts) + _varint(off - base)
        body.append(_varint(len(head) + len(rec) - 1) + head + rec[1:])
    section = b"".join(body)
    if codec:
        section = compress(codec, section)
    if not append_time:
        max_ts = max(ts for _o, ts, _r in kept)
    return _header(
        base, last_delta, attributes, base_ts, max_ts, f[9], f[10], f[11], len(kept), section, f[2]
    )


def _empty(buf: bytes, pos: int) -> bytes:
    """The header of the batch at ``pos`` with no records, its partition leader epoch kept
    (DefaultRecordBatch.writeEmptyHeader)."""
    f = HEADER.unpack_from(buf, pos)
    attributes = f[5] & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK)
    return _header(f[0], f[6], attributes, f[8], f[8], f[9], f[10], f[11], 0, b"", f[2])


class CleanedTransactions:
    """What a pass knows of the transactions it walks through, in log order (Kafka's
    CleanedTransactionMetadata): which data batches belong to aborted transactions (removed), and
    which markers may go (a marker stays while a batch of its transaction is in the log).

    ``aborted``: the aborted-transaction index entries overlapping the range walked. A transaction
    becomes "ongoing aborted" for its producer once the walk reaches its first offset, until its
    abort marker; a transactional batch of that producer meanwhile is aborted. A transactional
    batch of any other producer belongs to a committed (or still undecided beyond the range)
    transaction. ``retained``: the entries whose abort marker is kept because a batch of the
    transaction was seen (the cleaned index)."""

    def __init__(self, aborted: list[AbortedTxn]):
        self._pending = sorted(aborted, key=lambda e: e.first_offset)
        self._next = 0
        self._aborting: dict[int, list] = {}  # producer id -> [entry, a batch of it was seen]
        self._committing: set[int] = set()
        self.retained: list[AbortedTxn] = []

    def _reach(self, offset: int) -> None:
        pending = self._pending
        while self._next < len(pending) and pending[self._next].first_offset <= offset:
            e = pending[self._next]
            self._next += 1
            self._aborting.setdefault(e.producer_id, [e, False])

    def on_batch(self, last_offset: int, producer_id: int) -> bool:
        """A transactional data batch was read; True if it belongs to an aborted transaction (may be
        discarded). Other data batches need not be reported: nothing depends on them, and the next
        batch reported reaches past them."""
        self._reach(last_offset)
        state = self._aborting.get(producer_id)
        if state is not None:
            state[1] = True
            return True
        self._committing.add(producer_id)
        return False

    def on_control(self, last_offset: int, producer_id: int, kind: bool | None, empty: bool) -> bool:
        """A control batch was read (``kind``: True commit, False abort, None another control
        record); True if nothing of its transaction was seen, so the marker may go once past its
        delete horizon. An empty control batch was emptied by an earlier pass: it may go."""
        self._reach(last_offset)
        if empty:
            return True
        if kind is False:
            state = self._aborting.pop(producer_id, None)
            if state is not None and state[1]:
                self.retained.append(state[0])
                return False
            return True
        if kind is True:
            if producer_id in self._committing:
                self._committing.discard(producer_id)
                return False
            return True
        return False


def _control_kind(buf: bytes, pos: int) -> tuple[bool | None, bool]:
    """(marker kind, empty?) of the control batch at ``pos``: its first record's key parsed."""
    for _off, _ts, key, _tomb, _raw in _records(buf, pos, False):
        return parse_marker(key), False
    return None, True


def active_producers(plog: Any) -> dict[int, tuple[int, int]]:
    """Producer id -> (last offset of its last data batch or -1, epoch) of every producer the log's
    state holds (Kafka's lastRecordsOfActiveProducers); read on the event loop."""
    return {
        pid: (e.batches[-1].last_offset if e.batches else -1, e.epoch)
        for pid, e in plog.producers.producers.items()
    }


def filter_work(
    plog: Any, todo: ToClean, now_ms: int, cancel: threading.Event | None = None
) -> Callable[[], CleanResult]:
    """On the event loop: the pass over ``todo`` for a worker thread, with what it needs of the log's
    state (active producers, aborted transactions of the range) captured now."""
    return functools.partial(
        filter_segments,
        plog.dir,
        [s.path for s in todo.segs],
        todo.start,
        todo.end,
        todo.first_dirty,
        now_ms,
        plog.config.delete_retention_ms,
        active_producers(plog),
        cancel,
        plog.aborted.overlapping(todo.start, todo.end),
    )


def filter_segments(
    directory: Path,
    sources: list[Path],
    start: int,
    end: int,
    first_dirty: int,
    now_ms: int,
    delete_retention_ms: int,
    producer_last: dict[int, tuple[int, int]] | None = None,
    cancel: threading.Event | None = None,
    aborted: list[AbortedTxn] | None = None,
) -> CleanResult:
    """Kafka's cleaning of the segment files ``sources`` (``[start, end)``, in order) into
    ``<start>-<end>.cleaned``, fsynced: the map from ``[first_dirty, end)``, each batch filtered on its
    own. ``producer_last``: producer id -> (last offset of its last data batch or -1, epoch): that
    batch (or, with no data batch, its marker of that epoch) is kept, maybe empty. ``aborted``: the
    aborted-transaction index entries overlapping ``[start, end)``; their batches are removed and the
    cleaned index (``result.aborted``) is written to ``<start>-<end>.txncleaned``, fsynced, when the
    range had any. Runs in a worker thread; changes nothing else."""
    result = CleanResult(start, end, directory / (range_name(start, end) + CLEANED))
    producer_last = producer_last or {}
    aborted = aborted or []
    # pass 1: the latest offset of every key written in the dirty part, aborted transactions aside
    latest: dict[bytes, int] = {}
    txns = CleanedTransactions([e for e in aborted if e.last_offset >= first_dirty])
    for i, path in enumerate(sources):
        next_base = int(sources[i + 1].stem) if i + 1 < len(sources) else end
        if next_base <= first_dirty:
            continue
        for buf, pos in _iter_batches(path, cancel):
            # (a plain batch needs no bookkeeping: the next transactional one reaches past it)
            if buf[pos + 22] & (CONTROL_MASK | TRANSACTIONAL_MASK):
                f = HEADER.unpack_from(buf, pos)
                last, producer_id = f[0] + f[6], f[9]
                if f[5] & CONTROL_MASK:
                    txns.on_control(last, producer_id, *_control_kind(buf, pos))
                    continue
                if txns.on_batch(last, producer_id):
                    continue
            for off, _ts, key, _tomb, _raw in _records(buf, pos, False):
                if key is not None and off >= first_dirty:
                    latest[key] = off
    result.keys = len(latest)
    ends = sorted(latest.values())
    # pass 2: every batch filtered
    txns = CleanedTransactions(aborted)
    fd = os.open(result.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for path in sources:
            for buf, pos in _iter_batches(path, cancel):
                f = HEADER.unpack_from(buf, pos)
                size, attributes, base_ts, last = f[1] + 12, f[5], f[7], f[0] + f[6]
                count = f[12]
                result.bytes_read += size
                result.records_read += count
                horizon = base_ts if attributes & DELETE_HORIZON_MASK else None
                if attributes & (CONTROL_MASK | TRANSACTIONAL_MASK):
                    control = attributes & CONTROL_MASK
                    if control:
                        discardable = txns.on_control(last, f[9], *_control_kind(buf, pos))
                        # a marker nothing of its transaction remains of goes at its delete horizon
                        discard = discardable and horizon is not None and horizon <= now_ms
                    else:
                        discard = txns.on_batch(last, f[9])
                    if discard:
                        if control:
                            result.markers_dropped += 1
                        else:
                            result.aborted_dropped += count
                        if _retain_empty(f, end, producer_last):
                            _write(fd, _empty(buf, pos), result)
                        continue
                    if control:  # kept whole, with a delete horizon once its transaction is empty
                        if count == 0:  # emptied by an earlier pass: kept only to stay empty
                            if _retain_empty(f, end, producer_last):
                                _write(fd, _empty(buf, pos), result)
                        elif discardable and horizon is None:
                            kept = [(off, ts, raw) for off, ts, _k, _t, raw in _records(buf, pos, True)]
                            _write(fd, _rebuilt(buf, pos, kept, now_ms + delete_retention_ms), result)
                        else:
                            _write(fd, buf[pos : pos + size], result)
                        result.records_kept += count
                        continue
                # a data batch (not of an aborted transaction)
                keep_tombstones = horizon is None or now_ms < horizon
                kept = []
                tombstones = False
                # in the dirty part every keyed record is in the map: a batch holding none of the
                # latest offsets loses all its records, and is not even parsed
                i = bisect_left(ends, f[0])
                superseded = f[0] >= first_dirty and (i == len(ends) or ends[i] > last)
                for off, ts, key, tombstone, raw in () if superseded else _records(buf, pos, True):
                    if key is None or latest.get(key, off) > off:
                        continue
                    if tombstone:
                        if not keep_tombstones:
                            result.tombstones_dropped += 1
                            continue
                        tombstones = True
                    kept.append((off, ts, raw))
                set_horizon = tombstones and horizon is None
                if kept and len(kept) == count and not set_horizon:
                    _write(fd, buf[pos : pos + size], result)
                elif kept:
                    if set_horizon:
                        horizon = now_ms + delete_retention_ms
                    _write(fd, _rebuilt(buf, pos, kept, horizon), result)
                elif _retain_empty(f, end, producer_last):
                    _write(fd, _empty(buf, pos), result)
                result.records_kept += len(kept)
        os.fsync(fd)
        if any(start <= e.last_offset < end for e in aborted):
            result.aborted = [e for e in txns.retained if start <= e.last_offset < end]
            _write_txnindex(directory / (range_name(start, end) + TXN_CLEANED), result.aborted)
    except BaseException:
        os.close(fd)
        result.path.unlink(missing_ok=True)
        (directory / (range_name(start, end) + TXN_CLEANED)).unlink(missing_ok=True)
        raise
    os.close(fd)
    return result


def _retain_empty(f: tuple, end: int, producer_last: dict[int, tuple[int, int]]) -> bool:
    """Whether the batch with header fields ``f`` stays, empty if nothing of it is kept (Kafka's
    RETAIN_EMPTY): the last batch of the range (its last offset), an active producer's last data
    batch (its last sequence) or, with no data batch, its marker of its current epoch (fencing)."""
    last, producer_id = f[0] + f[6], f[9]
    if last + 1 == end:
        return True
    if producer_id < 0:
        return False
    pl = producer_last.get(producer_id)
    if pl is None:
        return False
    if pl[0] >= 0:
        return last == pl[0]
    return bool(f[5] & CONTROL_MASK) and f[10] == pl[1]


def _write_txnindex(path: Path, entries: list[AbortedTxn]) -> None:
    """The cleaned range's aborted-transaction index in Kafka's .txnindex layout, fsynced."""
    data = b"".join(
        ENTRY.pack(0, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset) for e in entries
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------
# committing and recovering


def commit_swap(result: CleanResult) -> Path:
    """Step 2: the .cleaned file becomes the .swap file (durably); from here recovery finishes it.
    A cleaned aborted-transaction index becomes its .txnswap first: without the .swap it is
    uncommitted output (deleted at start-up), with it part of the swap."""
    name = range_name(result.start, result.end)
    txn = result.path.with_name(name + TXN_CLEANED)
    if txn.exists():
        os.replace(txn, txn.with_name(name + TXN_SWAP))
    swap = result.path.with_name(name + SWAP)
    os.replace(result.path, swap)
    fsync_dir(swap.parent)
    return swap


def finish_swap(swap: Path) -> Path:
    """Step 3: delete the segments the swap replaces and give it its segment name; returns it. With
    a .txnswap the replaced segments' .txnindex files go too and it becomes the new segment's (an
    empty one is just removed); it is renamed before the .swap, so a crash in between leaves a
    .swap with no .txnswap, whose finishing then leaves the new .txnindex alone."""
    rng = parse_range(swap.name)
    if rng is None:
        raise ValueError(f"{swap}: not a cleaner swap file")
    start, end = rng
    directory = swap.parent
    txn = swap.with_name(range_name(start, end) + TXN_SWAP)
    has_txn = txn.exists()
    doomed = list(directory.glob("*.log")) + list(directory.glob("*.index"))
    if has_txn:
        doomed += list(directory.glob("*" + SUFFIX))
    for p in doomed:
        if p.stem.isdigit() and start <= int(p.stem) < end:
            p.unlink()
    if has_txn:
        if txn.stat().st_size:
            os.replace(txn, directory / (segment_name(start) + SUFFIX))
        else:
            txn.unlink()
    target = directory / (segment_name(start) + ".log")
    os.replace(swap, target)
    fsync_dir(directory)
    return target


def complete_swaps(directory: Path, names: list[str] | None = None) -> bool:
    """At start-up: finish committed swaps, drop uncommitted cleaner output. ``names``: the
    directory's listing, when the caller has it. Returns whether the directory changed."""
    if names is None:
        names = os.listdir(directory)
    swaps = sorted(n for n in names if n.endswith(SWAP) and parse_range(n) is not None)
    committed = {n[: -len(SWAP)] for n in swaps}
    cleaned = sorted(
        n
        for n in names
        if n.endswith((CLEANED, TXN_CLEANED))
        or (n.endswith(TXN_SWAP) and n[: -len(TXN_SWAP)] not in committed)
    )
    for n in cleaned:
        log.info("%s: removing an unfinished cleaner output", directory / n)
        (directory / n).unlink()
    for n in swaps:
        log.info("%s: completing a log cleaner swap interrupted by a crash", directory / n)
        finish_swap(directory / n)
    return bool(cleaned or swaps)


def read_checkpoint(directory: Path) -> int:
    """The first offset not yet cleaned (0 when no pass has completed)."""
    try:
        return int((directory / CHECKPOINT).read_text().strip() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def write_checkpoint(directory: Path, offset: int) -> None:
    tmp = directory / (CHECKPOINT + ".tmp")
    tmp.write_text(f"{offset}\n")
    os.replace(tmp, directory / CHECKPOINT)


# ---------------------------------------------------------------------------------------------
# scheduling


def clean_partition(plog: Any, now_ms: int, delete_retention_ms: int) -> CleanResult | None:
    """One whole pass, synchronously (tests, benchmarks, tools): clean and install; None if there
    is nothing closed to clean."""
    start, end, segs = plog.cleanable()
    if not segs:
        return None
    result = clean_segments(plog.dir, [s.path for s in segs], start, end, now_ms, delete_retention_ms)
    if plog.install_cleaned(result, segs):
        write_checkpoint(plog.dir, end)
        return result
    return None


def _commit_and_finish(result: CleanResult) -> None:
    finish_swap(commit_swap(result))


class ToClean(NamedTuple):  # not a dataclass: see broker.config.Setting
    """What a pass over a user topic would clean (Kafka's LogToClean): ``segs`` = ``[start, end)``."""

    start: int
    end: int
    segs: list[Any]
    first_dirty: int
    ratio: float
    need_now: bool  # max.compaction.lag.ms is exceeded
    cleanable_bytes: int


def first_batch_timestamp(seg: Any) -> int:
    """The max timestamp of a segment's first batch (Kafka's getFirstBatchTimestampForSegments)."""
    if seg.size < HEADER_SIZE:
        return -1
    return HEADER.unpack_from(os.pread(seg.fd, HEADER_SIZE, 0), 0)[8]


def to_clean(plog: Any, checkpoint: int, now_ms: int) -> ToClean | None:
    """Kafka's LogCleanerManager.cleanableOffsets and LogToClean for one compacted user log."""
    cfg = plog.config
    start, end, segs = plog.cleanable()
    # never at or beyond the last stable offset: the range ends at the segment holding it (Kafka's
    # firstUncleanableOffset), so an open transaction's records and markers are left alone
    lso = plog.last_stable_offset
    if lso < end:
        for i, seg in enumerate(segs):
            nxt = segs[i + 1].base_offset if i + 1 < len(segs) else end
            if nxt > lso:
                end, segs = seg.base_offset, segs[:i]
                break
    first_dirty = checkpoint
    if first_dirty < plog.log_start_offset or first_dirty > plog.log_end_offset:
        first_dirty = plog.log_start_offset  # truncated or deleted below the checkpoint: all dirty
    if cfg.min_compaction_lag_ms > 0:  # no segment with a record younger than the lag
        for i, seg in enumerate(segs):
            nxt = segs[i + 1].base_offset if i + 1 < len(segs) else end
            if nxt > first_dirty and seg.max_timestamp > now_ms - cfg.min_compaction_lag_ms:
                end, segs = seg.base_offset, segs[:i]
                break
    if not segs:
        return None
    dirty = [s for i, s in enumerate(segs) if s.base_offset >= first_dirty]
    clean_bytes = sum(s.size for s in segs if s.base_offset < first_dirty)
    cleanable_bytes = sum(s.size for s in dirty)
    total = clean_bytes + cleanable_bytes
    if total == 0:
        return None
    stamps = [t for t in (first_batch_timestamp(s) for s in dirty) if t > 0]
    need_now = bool(stamps) and min(stamps) < now_ms - max(cfg.max_compaction_lag_ms, 0)
    return ToClean(start, end, segs, first_dirty, cleanable_bytes / total, need_now, cleanable_bytes)


class LogCleaner:
    """Compacts the registered partitions in a worker thread, one pass at a time.

    Every ``log.cleaner.backoff.ms`` it cleans, filthiest first (the highest dirty ratio), every
    partition that qualifies: the coordinator's log when its dirty ratio (bytes of closed segments not
    yet cleaned over bytes of all closed segments) is at least ``log.cleaner.min.cleanable.ratio``; a
    compacted user topic as Kafka's LogCleanerManager.grabFilthiestCompactedLog picks it (its ratio
    above ``min.cleanable.dirty.ratio``, or ``max.compaction.lag.ms`` exceeded with dirty bytes).
    Each pass is cleaned off the event loop and installed on it.
    """

    def __init__(self, config: Any):
        self.enabled: bool = config["log.cleaner.enable"]
        self.backoff_s: float = config["log.cleaner.backoff.ms"] / 1000
        self.min_ratio: float = config["log.cleaner.min.cleanable.ratio"]
        self.delete_retention_ms: int = config["log.cleaner.delete.retention.ms"]
        self.partitions: list[Any] = []
        self.first_dirty: dict[int, int] = {}
        self.user: set[int] = set()  # ids of user topics' logs (Kafka's per-batch cleaning)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="log-cleaner")
        self._cancel = threading.Event()
        self._task: asyncio.Task | None = None
        self._lock = asyncio.Lock()
        self.passes = 0
        #: the broker clock's ms (LogManager sets it): compaction lag and tombstone retention
        self.now_ms: Callable[[], int] = lambda: int(time.time() * 1000)

    def register(self, plog: Any, user: bool = False) -> None:
        """Compact ``plog`` from now on: ``user`` for a topic with cleanup.policy=compact (Kafka's
        cleaning), else the coordinator's log."""
        if user:
            self.user.add(id(plog))
        if any(p is plog for p in self.partitions):
            return
        self.partitions.append(plog)
        # a log truncated since (serve --recover) has nothing clean beyond its end
        self.first_dirty[id(plog)] = min(read_checkpoint(plog.dir), plog.log_end_offset)

    def unregister(self, plog: Any) -> None:
        """No more passes over ``plog`` (topic deleted, or its cleanup.policy no longer compacts); a
        pass running now installs nothing if the log was deleted, and otherwise completes."""
        self.partitions = [p for p in self.partitions if p is not plog]
        self.first_dirty.pop(id(plog), None)
        self.user.discard(id(plog))

    def dirty_ratio(self, plog: Any) -> float:
        _start, _end, segs = plog.cleanable()
        total = sum(s.size for s in segs)
        if total == 0:
            return 0.0
        first_dirty = self.first_dirty.get(id(plog), 0)
        return sum(s.size for s in segs if s.base_offset >= first_dirty) / total

    def candidate(self, plog: Any, now_ms: int) -> float | None:
        """The dirty ratio of ``plog`` if it is due for a pass now, else None."""
        if id(plog) not in self.user:
            ratio = self.dirty_ratio(plog)
            return ratio if ratio >= self.min_ratio else None
        todo = to_clean(plog, self.first_dirty.get(id(plog), 0), now_ms)
        if todo is None:
            return None
        if todo.need_now and todo.cleanable_bytes > 0:
            return todo.ratio
        return todo.ratio if todo.ratio > plog.config.min_cleanable_dirty_ratio else None

    def start(self) -> None:
        if self.enabled:
            self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.backoff_s)
            try:
                await self.clean_due()
            except CleanCancelled:
                return

    async def clean_due(self) -> int:
        """One round: every partition due for a pass, filthiest first; returns the passes made."""
        done: set[int] = set()
        while True:
            now = self.now_ms()
            best: tuple[float, Any] | None = None
            for plog in list(self.partitions):
                if plog.deleted:
                    self.unregister(plog)
                    continue
                if id(plog) in done:
                    continue
                ratio = self.candidate(plog, now)
                if ratio is not None and (best is None or ratio > best[0]):
                    best = (ratio, plog)
            if best is None:
                return len(done)
            plog = best[1]
            done.add(id(plog))
            try:
                await self.clean(plog)
            except CleanCancelled:
                raise
            except Exception:
                if not plog.deleted:
                    log.exception("%s-%d: log cleaner pass failed", plog.topic, plog.partition)

    async def clean(self, plog: Any) -> CleanResult | None:
        """One pass over ``plog``: heavy work in the worker thread, the swap on the event loop."""
        async with self._lock:
            now = self.now_ms()
            loop = asyncio.get_running_loop()
            if id(plog) in self.user:
                todo = to_clean(plog, self.first_dirty.get(id(plog), 0), now)
                if todo is None:
                    return None
                start, end, segs = todo.start, todo.end, todo.segs
                work = filter_work(plog, todo, now, self._cancel)
            else:
                start, end, segs = plog.cleanable()
                if not segs:
                    return None
                work = functools.partial(
                    clean_segments,
                    plog.dir,
                    [s.path for s in segs],
                    start,
                    end,
                    now,
                    self.delete_retention_ms,
                    self._cancel,
                )
            begun = time.monotonic()
            plog.cleaning = True  # retention (compact,delete) waits: it would delete what is read
            try:
                result = await loop.run_in_executor(self._executor, work)
                if self._cancel.is_set() or not plog.can_install(segs):
                    result.path.unlink(missing_ok=True)
                    return None
                # the file operations (renames, unlinks, directory fsyncs) off the loop too: until the
                # segments are swapped in memory the loop reads the old ones through open descriptors,
                # pinned so that none is closed for room (re-opened by name, it would be gone or be
                # the cleaned file)
                for seg in segs:
                    seg.pin()
                try:
                    await loop.run_in_executor(self._executor, _commit_and_finish, result)
                    plog.adopt_cleaned(start, segs, result.aborted)
                finally:
                    for seg in segs:
                        seg.unpin()
            finally:
                plog.cleaning = False
            write_checkpoint(plog.dir, end)
            self.first_dirty[id(plog)] = end
            self.passes += 1
            log.info(
                "%s-%d: cleaned offsets %d-%d in %.0f ms: %d records read, %d kept (%d keys), "
                "%d tombstones, %d aborted records and %d markers dropped, %d -> %d bytes",
                plog.topic,
                plog.partition,
                start,
                end,
                (time.monotonic() - begun) * 1000,
                result.records_read,
                result.records_kept,
                result.keys,
                result.tombstones_dropped,
                result.aborted_dropped,
                result.markers_dropped,
                result.bytes_read,
                result.bytes_written,
            )
            return result

    async def close(self) -> None:
        self._cancel.set()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        self._executor.shutdown(wait=True)
