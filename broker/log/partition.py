"""One topic-partition's log: its segments, offsets, high watermark, producer state and readers.

Offsets: ``log_start_offset`` (first offset still stored) <= ``high_watermark`` (everything below it
is durable per the flush policy and visible to consumers) <= ``log_end_offset`` (next offset to
assign). Appends happen on the event-loop thread; the manager's flusher fsyncs in a worker thread
and then calls :meth:`mark_flushed`, which advances the high watermark and wakes waiting fetches.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from broker.protocol.errors import ErrorCode, KafkaError

from . import cleaner, streaming, txnindex
from .batch import (
    HEADER,
    HEADER_SIZE,
    LEADER_EPOCH,
    BatchInfo,
    InvalidBatch,
    assign_offset,
    assign_offsets,
    read_header,
)
from .config import LogConfig
from .control import parse_marker
from .producers import ProducerState
from .records import decode_batch
from .segment import SYSTEM_OPS, UNBOUNDED, FileOps, LogCorruption, OpenFiles, Segment, segment_name
from .streaming import EXPANSION_LIMIT

log = logging.getLogger(__name__)

PRODUCER_SNAPSHOT = "producer-state.json"

#: PartitionLog.state
UNOPENED, OPENING, OPEN, FAILED, DELETED = "unopened", "opening", "open", "failed", "deleted"


class PartitionLog:
    def __init__(
        self,
        directory: Path | str,
        topic: str,
        partition: int,
        config: LogConfig,
        recovery_point: int = 0,
        recover: bool = False,
        ops: FileOps = SYSTEM_OPS,
        log_start_offset: int = 0,
        files: OpenFiles = UNBOUNDED,
        defer: bool = False,
    ):
        """``defer``: read nothing now; the log opens on first use (``open``), trusting a clean
        shutdown: only for a log the caller knows was closed cleanly."""
        self.ops = ops
        self.files = files  # the open-file budget its segments share (log.max.open.files)
        self._dir = directory  # (a str made a Path when first needed: 10,000 at start-up add up)
        self.topic = topic
        self.partition = partition
        self.config = config
        self.waiters: set[asyncio.Future] = set()
        #: the epoch of the partition's leader, stamped on every batch appended (the broker keeps
        #: it current on a simulated cluster; a single node leads at epoch 0)
        self.leader_epoch = LEADER_EPOCH
        self.deleted = False
        #: ``serve --recover``: truncate at corruption (and report it) instead of refusing to start
        self.recover = recover
        self.keep_unflushed = False  # see discard_unflushed
        self.cleaning = False  # a log cleaner pass is reading the closed segments
        self._recovery_point = recovery_point
        self._checkpointed_start = log_start_offset
        #: called with the log once it is opened (a deferred open: see ``defer``)
        self.on_open: Callable[[PartitionLog], None] | None = None
        #: ``UNOPENED`` until the files are read (``defer``), ``FAILED`` if that failed, else ``OPEN``
        self.state = OPEN
        #: the group-commit journal's pending entries (``LogManager``, log.flush.journal): each
        #: append adds (log, base offset, data), a truncation (log, offset, None); None: no journal
        self.journal: list | None = None
        if defer:
            self.state = UNOPENED
            self.__class__ = DeferredPartitionLog  # (until it is open: see there)
            return
        self._open(clean=False)

    # ------------------------------------------------------------------ deferred opening

    @property
    def dir(self) -> Path:
        """The partition's directory."""
        d = self._dir
        if not isinstance(d, Path):
            d = self._dir = Path(d)
        return d

    @property
    def opened(self) -> bool:
        """Whether the log's files are open and its state (segments, offsets, producers) loaded."""
        return self.state == OPEN

    def open(self) -> None:
        """Open a deferred log now (its segments, indexes and producer snapshot), trusting what a
        clean shutdown wrote: an index whose recorded size matches its ``.log`` file is not checked
        against the records (Kafka does not recover a log after a clean shutdown either). A log that
        fails to open (corruption found, I/O error) is FAILED: every later use raises
        KAFKA_STORAGE_ERROR (``serve --recover`` opens every log at start-up and repairs it)."""
        if self.state != UNOPENED:
            return
        self.state = OPENING
        before = set(self.__dict__)
        try:
            self._open(clean=True)
        except (LogCorruption, OSError) as e:
            self.state = FAILED
            segments = self.__dict__.get("segments", [])
            for key in set(self.__dict__) - before:  # no half-loaded state: every use now fails
                del self.__dict__[key]
            self.error = str(e)
            log.error(
                "%s-%d: cannot open the log: %s (start with --recover to truncate at the damage)",
                self.topic,
                self.partition,
                e,
            )
            for seg in segments:
                seg.close()
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"{self.topic}-{self.partition}: cannot open the log: {e}"
            ) from e
        self.state = OPEN
        self.__class__ = PartitionLog  # every attribute is set: none needs the deferred log's hook
        if self.on_open is not None:
            self.on_open(self)

    def _open(self, clean: bool) -> None:
        directory = self.dir
        try:
            directory.mkdir(parents=True)
            new = True  # nothing on disk to load (topic creation: no listing of empty directories)
        except FileExistsError:
            new = False
        self.segments: list[Segment] = []
        self._bases: list[int] = []
        self.producers = ProducerState()
        #: aborted transactions (their markers), for read_committed fetches (txnindex.py)
        self.aborted = txnindex.AbortedIndex()
        #: (marker offset, first offset) of transactions ended but not yet below the high
        #: watermark: they still hold the last stable offset back, as in Kafka
        self._ending: list[tuple[int, int]] = []
        self._roll_jitter = self._new_jitter()
        #: the log start offset set by DeleteRecords (checkpointed by the manager); the first
        #: segment's base when that is higher (retention, or nothing deleted)
        self._start = 0
        self._snapshot_offset = -1  # the log end offset of the producer snapshot on disk
        self._snapshot_file = False  # whether a producer snapshot file exists (read at load)
        self._load(self._recovery_point, new, clean)
        # a checkpointed start past what survived recovery: the log starts at its end
        self._start = min(self._checkpointed_start, self.log_end_offset)

    # ------------------------------------------------------------------ loading and recovery

    def _load(self, recovery_point: int, new: bool = False, clean: bool = False) -> None:
        """Read the segments. ``clean``: the log was closed cleanly (``LogManager`` knows it from the
        clean-shutdown marker): a segment whose index matches its file is trusted, the last too."""
        bases = []
        if not new:
            names = os.listdir(self.dir)  # once: 10,000 partitions are 10,000 listings at start-up
            if cleaner.complete_swaps(self.dir, names):
                names = os.listdir(self.dir)
            bases = sorted(int(n[:-4]) for n in names if n.endswith(".log") and n[:-4].isdigit())
            for n in names:
                if n.endswith(".tmp"):
                    (self.dir / n).unlink()
        if not bases:
            bases = [0]
        for i, base in enumerate(bases):
            seg = Segment(self.dir, base, self.config.index_interval_bytes, self.ops, self.files)
            try:
                last = i == len(bases) - 1
                next_base = bases[i + 1] if not last else None
                below_recovery = next_base is not None and next_base <= recovery_point
                if clean and seg.load_index():
                    pass  # written at the clean close, of these very bytes: trust it
                elif below_recovery and seg.load_index():
                    pass  # flushed, closed cleanly, and its index matches: trust it
                elif below_recovery:
                    seg.recover(verify_crc=False, truncate_bad_tail=False)
                    seg.write_index()
                else:
                    indexed = last and seg.load_index()  # (the scan below checks every CRC anyway)
                    dropped = seg.recover(
                        verify_crc=True, truncate_bad_tail=last, durable_offset=recovery_point
                    )
                    if indexed and not dropped:
                        seg.index_matches()  # the .index on disk is of these bytes: no rewrite at close
                    if dropped:
                        log.warning(
                            "%s-%d: dropped %d bytes after offset %d during recovery",
                            self.topic,
                            self.partition,
                            dropped,
                            seg.next_offset,
                        )
                    if not last:
                        seg.write_index()
                if next_base is not None and seg.next_offset > next_base:
                    raise LogCorruption(
                        seg.path, seg.size, f"offsets run into the next segment {next_base}", next_base
                    )
            except LogCorruption as e:
                if not self.recover:
                    seg.close()
                    raise
                self._truncate_at(seg, e, bases[i + 1 :])
                self.segments.append(seg)
                break
            if seg.next_offset <= recovery_point:
                seg.synced_size = seg.size  # fsynced before the recovery point was written
            self.segments.append(seg)
        self._bases = [s.base_offset for s in self.segments]
        active = self.segments[-1]
        self.log_end_offset = active.next_offset
        # whatever survived recovery is on disk and consistent: it is all visible
        self.high_watermark = self.log_end_offset
        self.durable_offset = self.log_end_offset  # everything that survived recovery is on disk
        self._hw_segment = active
        self._hw_position = active.size
        self._rebuild_producers()

    def _truncate_at(self, seg: Segment, error: LogCorruption, later: list[int]) -> None:
        """``--recover``: cut ``seg`` at the corrupt batch, delete the segments after it, and report
        what was dropped (offsets, batches, records, bytes, files) as a warning."""
        first = seg.next_offset  # the first offset not kept
        batches, records, nbytes, last = _scan_headers(seg.path, error.position)
        files = [f"{seg.path.name} from byte {error.position}"]
        for base in later:
            path = self.dir / (segment_name(base) + ".log")
            b, r, n, end = _scan_headers(path, 0)
            batches, records, nbytes, last = batches + b, records + r, nbytes + n, max(last, end)
            files.append(path.name)
        seg.ops.truncate(seg.fd, error.position)
        seg.ops.fsync(seg.fd)
        seg.size = error.position
        seg.write_index()
        for base in later:
            for suffix in (".log", ".index"):
                (self.dir / (segment_name(base) + suffix)).unlink(missing_ok=True)
        cleaner.fsync_dir(self.dir)
        span = f"{first}-{last}" if last >= first else f"from {first}"
        log.warning(
            "%s-%d: --recover: truncated the log at %s byte %d (%s): dropped offsets %s "
            "(%d batches, %d records, %d bytes; files: %s)",
            self.topic,
            self.partition,
            seg.path,
            error.position,
            error.reason,
            span,
            batches,
            records,
            nbytes,
            ", ".join(files),
        )

    # ------------------------------------------------------------------ journal replay (manager.py)

    def replay_holds(self, base: int, data: bytes) -> bool:
        """Whether the log holds ``data`` (journaled batches from ``base``) byte for byte."""
        if base < self.log_start_offset or base >= self.log_end_offset:
            return False
        seg = self.segments[self._segment_index(base)]
        pos = seg.find(base, seg.size)
        return pos is not None and os.pread(seg.fd, len(data), pos) == data

    def replay_append(self, data: bytes) -> int:
        """Journal replay: append journaled batches exactly as they were written (offsets, epochs,
        timestamps), through the segment's own append (index) and the producer state and
        transaction index as an append keeps them; batches already below the log end are skipped.
        Returns the offsets added, or -1 when the batches do not continue the log (nothing added)."""
        batches = _batch_headers(data)
        end = self.log_end_offset
        i = 0
        while i < len(batches) and batches[i].next_offset <= end:
            i += 1
        if i == len(batches):
            return 0
        if batches[i].base_offset != end:
            return -1
        if i:
            data = data[batches[i].position :]
            batches = _batch_headers(data)
        active = self.segments[-1]
        if active.size > 0 and active.size + len(data) > self.config.segment_bytes:
            active = self.roll()
        next_offset = batches[-1].next_offset
        active.append(data, end, next_offset, max(b.max_timestamp for b in batches))
        self.log_end_offset = next_offset
        for b in batches:
            if b.producer_id >= 0:
                first = self.producers.record(b)
                if first is not None:
                    self._ended(bytearray(data), b, first, active)
        self.high_watermark = self.durable_offset = next_offset
        self._hw_segment = active
        self._hw_position = active.size
        return next_offset - end

    def replay_truncate(self, offset: int) -> int:
        """Journal replay of a truncation (``discard_unflushed``): cut the log back to ``offset`` (a
        batch boundary at or above the first segment's base), rebuilding the producer state and the
        transaction index as a load would. Returns the offsets dropped."""
        dropped = self.log_end_offset - offset
        if dropped <= 0 or offset < self.segments[0].base_offset:
            return 0
        i = self._segment_index(offset)
        seg = self.segments[i]
        for later in self.segments[i + 1 :]:
            later.delete()
        del self.segments[i + 1 :]
        self._bases = [s.base_offset for s in self.segments]
        pos = seg.find(offset, seg.size)
        seg.truncate_to(seg.size if pos is None else pos)
        self.log_end_offset = seg.next_offset
        self.high_watermark = self.durable_offset = self.log_end_offset
        self._hw_segment = seg
        self._hw_position = seg.size
        self._ending = []
        self._snapshot_offset = -1
        self.producers = ProducerState()
        self._rebuild_producers()
        return dropped

    def _rebuild_producers(self) -> None:
        start = self.log_start_offset
        snap = self.dir / PRODUCER_SNAPSHOT
        try:
            raw = snap.read_bytes()
        except FileNotFoundError:
            raw = None
        if raw is not None:
            self._snapshot_file = True
            try:
                doc = orjson.loads(raw)
                if self.log_start_offset <= doc["offset"] <= self.log_end_offset:
                    self.producers = ProducerState.from_json(doc["producers"])
                    self.producers.truncate_after(doc["offset"])
                    start = doc["offset"]
                    self._snapshot_offset = start
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                log.warning("%s: unreadable producer snapshot; rebuilding from the log", snap)
        # the aborted-transaction index: the files of the segments below the snapshot, then
        # rebuilt from the log with the producer state from there (and each file rewritten)
        self.aborted = txnindex.AbortedIndex()
        for seg in self.segments:
            if seg.txnindex_path.exists():
                for e in txnindex.read_file(seg.txnindex_path):
                    if e.last_offset < start:
                        self.aborted.add(e)
        for seg, info in self._iter_batches(start):
            first = self.producers.record(info)
            if first is not None and self._is_abort(seg, info):
                # the last stable offset then is not known any more: the transaction's start
                self.aborted.add(txnindex.AbortedTxn(info.producer_id, first, info.base_offset, first))
        if start < self.log_end_offset:
            for i, seg in enumerate(self.segments):
                end = (
                    self.segments[i + 1].base_offset
                    if i + 1 < len(self.segments)
                    else self.log_end_offset + 1
                )
                if end > start:
                    self._write_txnindex(seg, end)

    def _segment_end(self, seg: Segment) -> int:
        i = self.segments.index(seg)
        return self.segments[i + 1].base_offset if i + 1 < len(self.segments) else self.log_end_offset + 1

    def _write_txnindex(self, seg: Segment, end: int | None = None) -> None:
        entries = self.aborted.between(seg.base_offset, self._segment_end(seg) if end is None else end)
        if entries or seg.txnindex_path.exists():
            txnindex.write_file(seg.txnindex_path, entries)

    @staticmethod
    def _is_abort(seg: Segment, info: BatchInfo) -> bool:
        """Whether the control batch ``info`` of ``seg`` is an abort marker."""
        buf = os.pread(seg.fd, info.size, info.position)
        return _marker_kind(buf, 0) is False

    def iter_headers(self, from_offset: int) -> Iterator[BatchInfo]:
        """Batch headers (no CRC check) of every batch whose last offset >= ``from_offset``."""
        for _seg, info in self._iter_batches(from_offset):
            yield info

    def _iter_batches(self, from_offset: int) -> Iterator[tuple[Segment, BatchInfo]]:
        for seg in self.segments[self._segment_index(from_offset) :]:
            pos = seg.lookup(from_offset) if seg.base_offset <= from_offset else 0
            while pos + HEADER_SIZE <= seg.size:
                f = HEADER.unpack_from(os.pread(seg.fd, HEADER_SIZE, pos), 0)
                info = BatchInfo(
                    pos, f[1] + 12, f[0], f[6], f[5], f[7], f[8], f[9], f[10], f[11], f[12], f[2]
                )
                if info.last_offset >= from_offset:
                    yield seg, info
                pos += info.size

    def write_producer_snapshot(self) -> None:
        if self._snapshot_offset == self.log_end_offset:
            return  # the snapshot on disk is of this very log end (nothing appended or cut since)
        doc = {"offset": self.log_end_offset, "producers": self.producers.to_json()}
        tmp = self.dir / (PRODUCER_SNAPSHOT + ".tmp")
        tmp.write_bytes(orjson.dumps(doc))
        os.replace(tmp, self.dir / PRODUCER_SNAPSHOT)
        self._snapshot_offset = self.log_end_offset
        self._snapshot_file = True

    # ------------------------------------------------------------------ offsets

    @property
    def log_start_offset(self) -> int:
        base = self.segments[0].base_offset
        return self._start if self._start > base else base

    def advance_start(self, offset: int) -> bool:
        """DeleteRecords: make ``offset`` the log start offset when it is higher (records below it
        are no longer served; whole segments below it go, see :meth:`delete_below_start`).
        Returns whether it moved. Above the high watermark: OFFSET_OUT_OF_RANGE, as in Kafka."""
        self.check_start(offset)
        if offset <= self.log_start_offset:
            return False
        self._start = offset  # producer state is kept, as Kafka keeps it
        log.info("%s-%d: log start offset moved to %d (records deleted)", self.topic, self.partition, offset)
        return True

    def check_start(self, offset: int) -> None:
        """OFFSET_OUT_OF_RANGE when ``offset`` cannot become the log start offset (above the high
        watermark)."""
        if offset > self.high_watermark:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"Cannot increment the log start offset to {offset} of partition {self.topic}-"
                f"{self.partition} since it is larger than the high watermark {self.high_watermark}",
            )

    def delete_below_start(self) -> int:
        """Delete the whole segments below the log start offset (those whose successor starts at or
        below it), as Kafka's retention does for a start moved by DeleteRecords. Never the active
        segment nor the one holding the high watermark, and not while a cleaner pass reads the
        closed segments (the next retention check does it). Returns segments deleted."""
        if self.cleaning:
            return 0
        deleted = 0
        while len(self.segments) > 1 and self.segments[1].base_offset <= self._start:
            seg = self.segments[0]
            if seg is self._hw_segment:
                break
            self.segments.pop(0)
            self._bases.pop(0)
            seg.delete()
            deleted += 1
            log.info(
                "%s-%d: deleted segment %d (below the log start offset %d)",
                self.topic,
                self.partition,
                seg.base_offset,
                self._start,
            )
        return deleted

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def _segment_index(self, offset: int) -> int:
        return max(bisect_right(self._bases, offset) - 1, 0)

    # ------------------------------------------------------------------ appending

    def append(self, data: bytearray, batches: list[BatchInfo], now_ms: int) -> int:
        """Append validated batches (offsets are assigned here); returns the first assigned offset."""
        if len(batches) == 1:  # (a Produce request's: one batch)
            return self.append_batch(data, batches[0], now_ms)
        active = self._writable(len(data), now_ms)
        base = self.log_end_offset
        next_offset = assign_offsets(
            data, batches, base, now_ms if self.config.log_append_time else None, self.leader_epoch
        )
        active.append(data, base, next_offset, max(b.max_timestamp for b in batches))
        self.log_end_offset = next_offset
        if self.journal is not None:
            self.journal.append((self, base, data))
        for b in batches:
            first = self.producers.record(b)
            if first is not None:
                self._ended(data, b, first, active)
        return base

    def append_batch(self, data: bytearray, b: BatchInfo, now_ms: int) -> int:
        """:meth:`append` of the one validated batch ``b`` that ``data`` holds."""
        next_offset = assign_offset(
            data, b, self.log_end_offset, now_ms if self.config.log_append_time else None, self.leader_epoch
        )
        base = self.append_stamped(data, next_offset, b.max_timestamp, now_ms)
        if b.producer_id >= 0:  # (no producer state to keep for a batch without a producer id)
            first = self.producers.record(b)
            if first is not None:
                self._ended(data, b, first, self.segments[-1])
        return base

    def append_stamped(self, data: bytearray | memoryview, next_offset: int, max_ts: int, now_ms: int) -> int:
        """Append one validated batch already stamped with this log's end offset, leader epoch and
        its max timestamp ``max_ts`` (``assign_offset``, or streaming.native_stamp for a batch
        without a producer id); ``next_offset``: the offset after it. Returns its base offset. The
        producer state is the caller's (``append_batch``)."""
        active = self._writable(len(data), now_ms)
        base = self.log_end_offset
        active.append(data, base, next_offset, max_ts)
        self.log_end_offset = next_offset
        if self.journal is not None:
            self.journal.append((self, base, data))
        return base

    def _writable(self, size: int, now_ms: int) -> Segment:
        """The segment to append ``size`` bytes to: the active one, rolled first when they would
        take it past segment.bytes or it is older than ``roll_ms`` (less its jitter)."""
        active = self.segments[-1]
        written = active.size
        if written > 0 and (
            written + size > self.config.segment_bytes
            or (now_ms / 1000 - active.created) * 1000 >= self.roll_ms - self._roll_jitter
        ):
            return self.roll()
        return active

    def _ended(self, data: bytearray, b: BatchInfo, first: int, active: Segment) -> None:
        """A transaction marker was appended: the transaction holds the last stable offset back
        until the marker is below the high watermark; an abort goes to the aborted index."""
        hw = self.high_watermark
        if self._ending and self._ending[0][0] < hw:  # bounded by the markers not yet flushed
            self._ending = [(m, f) for m, f in self._ending if m >= hw]
        self._ending.append((b.base_offset, first))
        if _marker_kind(data, b.position) is False:
            entry = txnindex.AbortedTxn(b.producer_id, first, b.base_offset, self.last_stable_offset)
            self.aborted.add(entry)
            txnindex.append_file(active.txnindex_path, entry)

    @property
    def last_stable_offset(self) -> int:
        """Below it every transaction is decided (Kafka's LSO): the high watermark, or the first
        offset of the oldest transaction still open or whose marker is not yet below it."""
        hw = self.high_watermark
        if self._ending:
            self._ending = [(m, f) for m, f in self._ending if m >= hw]
        lso = hw
        for first in self.producers.ongoing.values():
            lso = min(lso, first)
        for _marker, first in self._ending:
            lso = min(lso, first)
        return lso

    @property
    def roll_ms(self) -> int:
        """The active segment's age limit: segment.ms, or max.compaction.lag.ms when smaller on a
        compacted topic (Kafka's LogConfig.maxSegmentMs). As in Kafka, the roll is checked on append:
        a topic nobody writes to keeps its last records in the active segment, uncleaned."""
        cfg = self.config
        if "compact" in cfg.cleanup_policy and cfg.max_compaction_lag_ms > 0:
            return min(cfg.segment_ms, cfg.max_compaction_lag_ms)
        return cfg.segment_ms

    def roll(self) -> Segment:
        """Close the active segment for writing (synced, index written) and start a new one."""
        old = self.active
        old.flush()
        old.write_index()
        self._write_txnindex(old)
        self.durable_offset = max(self.durable_offset, self.log_end_offset)
        seg = Segment(self.dir, self.log_end_offset, self.config.index_interval_bytes, self.ops, self.files)
        self.segments.append(seg)
        self._bases.append(seg.base_offset)
        self.write_producer_snapshot()
        self._roll_jitter = self._new_jitter()
        return seg

    def _new_jitter(self) -> int:
        """segment.jitter.ms: each new segment rolls up to this much earlier, at random (Kafka's
        LogConfig.randomSegmentJitter: uniform below min(segment.jitter.ms, segment.ms))."""
        jitter = self.config.segment_jitter_ms
        return random.randrange(min(jitter, self.config.segment_ms)) if jitter > 0 else 0

    def discard_unflushed(self) -> int:
        """After a failed fsync: cut the log back to the high watermark (the last successful flush),
        so the appends that fsync was to make durable are never served -- their producers get an
        error -- and the pages whose write-back failed are gone from the file. Producer state is
        rolled back with it, so an idempotent producer's retry is appended afresh. Returns the
        number of offsets dropped. The coordinator's log sets ``keep_unflushed`` instead: its
        in-memory state already holds those records, so they stay and become durable with the
        next fsync that succeeds."""
        hw = self.high_watermark
        dropped = self.log_end_offset - hw
        if dropped <= 0 or self.keep_unflushed:
            return 0
        seg = self._hw_segment
        while self.segments[-1] is not seg:  # segments rolled since the last flush
            self.segments.pop().delete()
            self._bases.pop()
        seg.truncate_to(self._hw_position)
        self.log_end_offset = hw
        self.durable_offset = min(self.durable_offset, hw)
        self.producers.truncate_after(hw)
        self.aborted.truncate(hw)
        self._ending = [(m, f) for m, f in self._ending if m < hw]
        self._write_txnindex(seg)
        if self.journal is not None:  # (a journal replay must not bring the dropped appends back)
            self.journal.append((self, hw, None))
        log.warning(
            "%s-%d: fsync failed; dropped the %d unflushed offsets from %d",
            self.topic,
            self.partition,
            dropped,
            hw,
        )
        return dropped

    def flush_target(self) -> tuple[int, Segment, int]:
        """What a flush starting now will make durable: (offset, segment, position)."""
        return self.log_end_offset, self.active, self.active.size

    def mark_flushed(self, offset: int, segment: Segment, position: int, durable: bool = True) -> None:
        """Make everything below ``offset`` visible (the high watermark); ``durable`` when it was
        fsynced (with log.flush=never it is visible without being durable)."""
        if durable and offset > self.durable_offset:
            self.durable_offset = offset
        if offset > self.high_watermark:
            self.high_watermark = offset
            self._hw_segment = segment
            self._hw_position = position
            self.wake()

    def wake(self) -> None:
        if not self.waiters:
            return
        waiters, self.waiters = self.waiters, set()
        for w in waiters:
            if not w.done():
                w.set_result(None)

    # ------------------------------------------------------------------ reading

    def read(self, offset: int, max_bytes: int, upto: int | None = None) -> bytes:
        """Record batches from the one holding ``offset`` up to the high watermark, or up to
        ``upto`` (a batch boundary below it: the last stable offset of a read_committed fetch)."""
        hw_seg, hw_pos = self._hw_segment, self._hw_position
        if upto is not None and upto < self.high_watermark:
            if offset >= upto:
                return b""
            j = self._segment_index(upto)
            seg = self.segments[j]
            pos = seg.find(upto, hw_pos if seg is hw_seg else seg.size)
            if pos is None:  # upto is where the next segment starts
                pos = seg.size
            hw_seg, hw_pos = seg, pos
        elif offset >= self.high_watermark:
            return b""
        i = self._segment_index(offset)
        while i < len(self.segments):
            seg = self.segments[i]
            limit = hw_pos if seg is hw_seg else seg.size
            pos = seg.find(offset, limit)
            if pos is not None:
                return seg.read(pos, max_bytes, limit)
            if seg is hw_seg:
                return b""
            i += 1
        return b""

    def header_at(self, offset: int) -> BatchInfo | None:
        """The header of the batch holding ``offset`` (or the first batch after it) below the high
        watermark, as ``read(offset, 1)`` would start, reading only its 61 header bytes; None past
        the high watermark. Its ``position`` is in the segment it was found in."""
        if offset >= self.high_watermark:
            return None
        hw_seg, hw_pos = self._hw_segment, self._hw_position
        i = self._segment_index(offset)
        while i < len(self.segments):
            seg = self.segments[i]
            limit = hw_pos if seg is hw_seg else seg.size
            found = seg.find_header(offset, limit)
            if found is not None:
                pos, f = found
                return BatchInfo(
                    pos, f[1] + 12, f[0], f[6], f[5], f[7], f[8], f[9], f[10], f[11], f[12], f[2]
                )
            if seg is hw_seg:
                return None
            i += 1
        return None

    def offset_for_timestamp(self, ts: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record below the high watermark with timestamp >= ts.

        Batch headers narrow it down to one batch (its max timestamp); only that batch's records are
        streamed, with bounded decompression, up to the record found."""
        for seg, info in self._iter_batches(self.log_start_offset):
            if info.base_offset >= self.high_watermark:
                return None
            if info.max_timestamp >= ts:
                limit = EXPANSION_LIMIT * self.config.max_message_bytes
                try:
                    found = streaming.offset_for_timestamp(
                        os.pread(seg.fd, info.size, info.position), ts, limit, self.log_start_offset
                    )
                except InvalidBatch:
                    # written before produce validated records, or beyond the expansion cap:
                    # answer at batch level
                    return max(info.base_offset, self.log_start_offset), info.max_timestamp
                if found is not None:
                    return found
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the log's largest timestamp, as Kafka
        3.8+ answers ListOffsets MAX_TIMESTAMP (KAFKA-16310): the first segment with the largest max
        timestamp, its first batch with that max timestamp, and in it the first record with that
        timestamp (every record of a LogAppendTime batch has it, so its first). None when the log is
        empty, when no record carries the batch's max timestamp, or when the record is not yet
        below the high watermark (Kafka answers offset -1 then, too)."""
        best = None
        for seg in self.segments:
            if seg.size > 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return None
        found = None
        for seg, info in self._iter_batches(best.base_offset):
            if seg is not best:
                break
            if info.max_timestamp == best.max_timestamp:
                found = info
                break
        if found is None:
            return None
        buf = os.pread(best.fd, found.size, found.position)
        info = read_header(buf, 0)
        try:
            for offset_delta, ts in streaming.record_timestamps(
                buf, info, EXPANSION_LIMIT * self.config.max_message_bytes
            ):
                if ts == info.max_timestamp:
                    offset = info.base_offset + offset_delta
                    return (offset, ts) if offset < self.high_watermark else None
        except InvalidBatch:
            # written before produce validated records, or beyond the streaming caps: batch level
            return (info.last_offset, info.max_timestamp) if info.last_offset < self.high_watermark else None
        return None

    # ------------------------------------------------------------------ retention and shutdown

    def apply_retention(self, now_ms: int) -> int:
        """Delete whole old segments past retention.ms / retention.bytes, and those below a log start
        offset moved by DeleteRecords (whatever the policy, as Kafka); returns segments deleted."""
        deleted = self._apply_retention(now_ms)
        if deleted:
            self.aborted.drop_below(self.segments[0].base_offset)
        return deleted

    def _apply_retention(self, now_ms: int) -> int:
        deleted = self.delete_below_start()
        if "delete" not in self.config.cleanup_policy or self.cleaning:
            return deleted
        total = self.size_bytes()
        while len(self.segments) > 1:
            seg = self.segments[0]
            expired = (
                self.config.retention_ms >= 0
                and seg.max_timestamp >= 0
                and (now_ms - seg.max_timestamp > self.config.retention_ms)
            )
            oversize = self.config.retention_bytes >= 0 and total - seg.size >= self.config.retention_bytes
            if not (expired or oversize):
                break
            if seg is self._hw_segment:
                break
            total -= seg.size
            self.segments.pop(0)
            self._bases.pop(0)
            seg.delete()
            deleted += 1
            log.info(
                "%s-%d: deleted segment %d (%s)",
                self.topic,
                self.partition,
                seg.base_offset,
                "retention.ms" if expired else "retention.bytes",
            )
        return deleted

    # ------------------------------------------------------------------ compaction (cleaner.py)

    def cleanable(self) -> tuple[int, int, list[Segment]]:
        """(start, end, segments) of what the cleaner may compact: the closed segments below the
        active one and below the segment the high watermark is in (all of them fsynced)."""
        stop = len(self.segments) - 1
        for i, seg in enumerate(self.segments):
            if seg is self._hw_segment:
                stop = min(stop, i)
        segs = self.segments[:stop]
        if not segs:
            return self.log_start_offset, self.log_start_offset, []
        return segs[0].base_offset, self.segments[stop].base_offset, segs

    def can_install(self, replaced: list[Segment]) -> bool:
        """Whether the log still starts with exactly the segments a cleaner pass read."""
        n = len(replaced)
        return not self.deleted and n < len(self.segments) and self.segments[:n] == replaced

    def adopt_cleaned(
        self, start: int, replaced: list[Segment], aborted: list[txnindex.AbortedTxn] | None = None
    ) -> None:
        """After the swap is finished on disk (``cleaner.finish_swap``): serve the compacted segment
        in place of ``replaced``, whose files are gone (their open descriptors kept them readable).
        ``aborted``: the aborted transactions the pass kept in its range (the rest lost every batch),
        in place of the index's entries there."""
        seg = Segment(self.dir, start, self.config.index_interval_bytes, self.ops, self.files)
        seg.recover(verify_crc=False, truncate_bad_tail=False)
        seg.write_index()
        for old in replaced:
            old.close()
            if old.base_offset != start:
                old.txnindex_path.unlink(missing_ok=True)
        if aborted is not None:
            self.aborted.replace(start, self.segments[len(replaced)].base_offset, aborted)
        self.segments[: len(replaced)] = [seg]
        self._bases = [s.base_offset for s in self.segments]
        self._write_txnindex(seg)

    def install_cleaned(self, result: cleaner.CleanResult, replaced: list[Segment]) -> bool:
        """All of a swap at once (tests, tools): False, with the output deleted, when the log changed."""
        if not self.can_install(replaced):
            result.path.unlink(missing_ok=True)
            return False
        cleaner.finish_swap(cleaner.commit_swap(result))
        self.adopt_cleaned(result.start, replaced, result.aborted)
        return True

    def close(self, sync: bool = True) -> None:
        """Write what the next open trusts (the active segment's index, the producer snapshot, the
        transaction index) and close the files. ``sync``: fsync the active segment first; the
        LogManager passes False and syncs the whole file system once (``syncfs``) after closing
        every log, where a stop of 10,000 partitions would otherwise be 10,000 fsyncs in a row."""
        if self.deleted or not self.opened:
            return  # an unopened log's files are as its clean close left them
        active = self.active
        try:
            if sync:
                active.flush()
            # A small log -- one segment whose index has one entry (position 0), so its next open
            # reads at most index.interval.bytes and a batch of it -- without producer state writes
            # neither an index nor a producer snapshot: that open scans it as cheaply as it would
            # read the two files, and a stop of 10,000 such partitions writes no 20,000 files. (An
            # empty one is its directory alone.) Files an earlier close wrote are kept current.
            small = len(self.segments) == 1 and len(active._idx_offsets) <= 1
            if not small or active.has_index_file():
                active.write_index()
            self._write_txnindex(active)
            if not (small and not self.producers.producers) or self._snapshot_file:
                self.write_producer_snapshot()
        finally:
            for seg in self.segments:
                seg.close()
            self.wake()

    def close_for_delete(self) -> None:
        self.deleted = True
        if not self.opened:
            self.state = DELETED  # never opened now (that would make its directory again)
            self.wake()
            return
        for seg in self.segments:
            seg.close()
        self.wake()


class DeferredPartitionLog(PartitionLog):
    """The class of a :class:`PartitionLog` built with ``defer`` while its files' state is not
    loaded: unopened (the first use of that state opens it, and it becomes a plain PartitionLog
    again), failed to open, or deleted unopened (every use of that state raises). Apart, so that
    an open log's attributes are read without a ``__getattr__`` hook on its class (a class with one
    has every attribute read go through the hook's slot, ~2.5x slower in CPython 3.11)."""

    def __getattr__(self, name: str) -> Any:
        # Only for attributes not set yet: those of the files' state while a deferred log is
        # unopened. The first use opens it; once open, no attribute is missing any more.
        state = self.__dict__.get("state")
        if state == UNOPENED and not name.startswith("__"):
            self.open()
            return getattr(self, name)
        if state == FAILED and not name.startswith("__"):
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR,
                f"{self.topic}-{self.partition}: the log could not be opened: {self.__dict__['error']}",
            )
        if state == DELETED and not name.startswith("__"):
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{self.topic}-{self.partition} was deleted"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


def _scan_headers(path: Path, position: int) -> tuple[int, int, int, int]:
    """[batches, records, bytes, last offset] from ``position`` to the end of a segment file: bytes
    counts all of it, batches and records only the batches whose headers still parse."""
    data = path.read_bytes()[position:]
    batches = records = 0
    last = -1
    pos = 0
    while pos + HEADER_SIZE <= len(data):
        f = HEADER.unpack_from(data, pos)
        base, length, magic, last_delta, count = f[0], f[1], f[3], f[6], f[12]
        if magic != 2 or length < HEADER_SIZE - 12 or pos + length + 12 > len(data) or base < last:
            break
        batches += 1
        records += max(count, 0)
        last = max(last, base + last_delta)
        pos += length + 12
    return batches, records, len(data), last


def _batch_headers(data: bytes) -> list[BatchInfo]:
    """The headers of the whole batches in ``data`` (positions in ``data``)."""
    out = []
    pos = 0
    while pos + HEADER_SIZE <= len(data):
        f = HEADER.unpack_from(data, pos)
        info = BatchInfo(pos, f[1] + 12, f[0], f[6], f[5], f[7], f[8], f[9], f[10], f[11], f[12], f[2])
        if pos + info.size > len(data):
            break
        out.append(info)
        pos += info.size
    return out


def _marker_kind(buf: bytes | bytearray, pos: int) -> bool | None:
    """The control batch at ``pos``: True for a commit marker, False for an abort, else None."""
    try:
        _info, records = decode_batch(buf, pos, verify_crc=False)
    except Exception:
        return None
    return parse_marker(records[0].key) if records else None


def now_ms() -> int:
    return int(time.time() * 1000)


#: what a group commit makes durable, per log: (log, offset, segment, position), as ``flush_target``
FlushTarget = tuple[PartitionLog, int, Segment, int]


def flush_targets(plogs: Iterable[PartitionLog]) -> list[FlushTarget]:
    """``flush_target`` of every log not deleted, in one pass (a group commit of one record into
    each of thousands of partitions: one tuple a log, no call per log)."""
    out = []
    for plog in plogs:
        if not plog.deleted:
            seg = plog.segments[-1]
            out.append((plog, plog.log_end_offset, seg, seg.size))
    return out


def mark_all_flushed(targets: list[FlushTarget], synced: bool = True) -> None:
    """After the fsync (or syncfs) of ``targets`` succeeded: ``mark_flushed`` of each log not deleted
    since, and each segment's synced size (what that sync covered), in one pass. ``synced`` False:
    the appends are durable in the group-commit journal, not in the segments (not synced yet)."""
    for plog, offset, seg, position in targets:
        if plog.deleted:
            continue
        if synced and position > seg.synced_size:
            seg.synced_size = position
        if offset > plog.durable_offset:
            plog.durable_offset = offset
        if offset > plog.high_watermark:
            plog.high_watermark = offset
            plog._hw_segment = seg
            plog._hw_position = position
            if plog.waiters:
                plog.wake()
