"""Spark Python data source ``pykbroker`` over a broker's data directory.

    spark.read.format("pykbroker").option("path", data_dir).load()                       # records
    spark.read.format("pykbroker").option("path", data_dir).option("view", "offsets").load()
    spark.readStream.format("pykbroker").option("path", data_dir).option("subscribe", "t").load()

The ``records`` view has exactly the columns and types of Spark's Kafka source, so a job written
against it runs unchanged on ``format("kafka")`` against a real cluster. The offset ranges to read
(per segment file) are packed, in order, into ``minPartitions`` input partitions (default: the CPUs)
of about equal offsets, more when one would exceed ``maxRecordsPerPartition``; each worker yields
Arrow batches built column-wise (:func:`logdir.read_arrow`). Streaming is bounded by what the broker
has durably written."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Sequence
from typing import TypeVar

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from . import coordinator_log, logdir
from . import offsets as ofs

RECORDS_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key:string,value:binary>>"
)
ARROW_RECORDS = logdir.ARROW_RECORDS
VIEWS = ("records", "offsets", "groups")
T = TypeVar("T")
#: offsets per input partition at most, unless the option maxRecordsPerPartition says otherwise
MAX_RECORDS_PER_PARTITION = 2_000_000


Aborted = tuple[tuple[int, int, int], ...] | None


class _Split(InputPartition):
    """One input partition: consecutive offset ranges (of one or more topic-partitions), each with
    its partition's aborted transactions under read_committed (else None)."""

    def __init__(self, ranges: list[tuple[logdir.SegmentRange, Aborted]]):
        super().__init__(len(ranges))
        self.ranges = ranges


def _read_splits(split: _Split, verify_crc: bool) -> Iterator[pa.RecordBatch]:
    for r, aborted in split.ranges:
        yield from logdir.read_arrow(r, verify_crc, aborted)


def _options(options: dict) -> tuple[str, str]:
    path = options.get("path") or options.get("dataDir")
    if not path:
        raise ValueError("option 'path' (the broker's data directory) is required")
    view = options.get("view", "records")
    if view not in VIEWS:
        raise ValueError(f"view {view!r} is not one of {VIEWS}")
    return path, view


class BrokerLogDataSource(DataSource):
    """Options: ``path`` (data directory), ``view`` (records | offsets | groups), and for records
    ``subscribe`` (comma-separated topics; default all), ``startingOffsets``, ``endingOffsets``,
    ``maxOffsetsPerTrigger`` / ``maxRecordsPerTrigger``, ``minPartitions`` (default: the CPUs),
    ``maxRecordsPerPartition`` (default 2,000,000), ``failOnDataLoss`` (default true),
    ``verifyCrc`` (default true), ``kafka.isolation.level`` (read_uncommitted, the default of Spark's
    Kafka source, or read_committed: up to the last stable offset, without aborted transactions)."""

    @classmethod
    def name(cls) -> str:
        return "pykbroker"

    def schema(self) -> str:
        _path, view = _options(self.options)
        return {
            "records": RECORDS_SCHEMA,
            "offsets": coordinator_log.OFFSETS_SCHEMA,
            "groups": coordinator_log.GROUPS_SCHEMA,
        }[view]

    def reader(self, schema: StructType) -> DataSourceReader:
        path, view = _options(self.options)
        if view == "records":
            return RecordsBatchReader(path, self.options)
        return CoordinatorReader(path, view)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        path, view = _options(self.options)
        if view != "records":
            raise ValueError(f"view {view!r} is batch only; stream the 'records' view")
        return RecordsStreamReader(path, self.options)


def _flag(options: dict, name: str, default: bool) -> bool:
    v = options.get(name)
    return default if v is None else str(v).lower() == "true"


class _RecordsBase:
    def __init__(self, path: str, options: dict):
        self.path = path
        self.subscribe = options.get("subscribe") or options.get("topics")
        self.fail_on_data_loss = _flag(options, "failOnDataLoss", True)
        self.verify_crc = _flag(options, "verifyCrc", True)
        level = str(options.get("kafka.isolation.level") or logdir.READ_UNCOMMITTED)
        if level not in logdir.ISOLATION_LEVELS:
            raise ValueError(f"kafka.isolation.level {level!r} is not one of {logdir.ISOLATION_LEVELS}")
        self.committed = level == logdir.READ_COMMITTED
        self._txns: dict[tuple[ofs.TP, int], logdir.Transactions] = {}
        #: input partitions: at least minPartitions, and enough for maxRecordsPerPartition offsets each
        self.min_partitions = int(options.get("minPartitions") or os.cpu_count() or 1)
        self.max_records_per_partition = int(
            options.get("maxRecordsPerPartition") or MAX_RECORDS_PER_PARTITION
        )
        if self.min_partitions < 1 or self.max_records_per_partition < 1:
            raise ValueError(
                f"minPartitions ({self.min_partitions}) and maxRecordsPerPartition "
                f"({self.max_records_per_partition}) must be at least 1"
            )

    def _transactions(self, tp: ofs.TP, end: int) -> logdir.Transactions:
        if (tp, end) not in self._txns:
            self._txns[tp, end] = logdir.transactions(self.path, tp, end)
        return self._txns[tp, end]

    def _tps(self) -> list[ofs.TP]:
        names = logdir.select_topics(self.path, self.subscribe)
        return logdir.partitions_of(self.path, names)

    def _latest(self) -> dict[ofs.TP, int]:
        durable = logdir.durable_offsets(self.path)
        ends = {tp: logdir.end_offset(self.path, tp, durable) for tp in self._tps()}
        if self.committed:  # read_committed ends at the last stable offset, as Kafka's consumer
            return {tp: self._transactions(tp, end).last_stable_offset for tp, end in ends.items()}
        return ends

    def _earliest(self, tp: ofs.TP) -> int:
        return logdir.log_start_offset(self.path, *tp)

    def _splits(self, start: dict[ofs.TP, int], end: dict[ofs.TP, int]) -> list[_Split]:
        ranges: list[tuple[logdir.SegmentRange, tuple[tuple[int, int, int], ...] | None]] = []
        durable = logdir.durable_offsets(self.path) if self.committed else {}
        for tp, hi in sorted(end.items()):
            lo = start[tp] if tp in start else self._earliest(tp)
            # read_committed: hi is at most the last stable offset at the readable end, so every
            # transaction with records below hi has its marker below that end (not always below hi,
            # which a limit per trigger may put inside a transaction)
            aborted = None
            if self.committed:
                aborted = self._transactions(tp, logdir.end_offset(self.path, tp, durable)).aborted
            ranges += [(r, aborted) for r in logdir.plan(self.path, tp, lo, hi, self.fail_on_data_loss)]
        total = sum(r.end - r.start for r, _ in ranges)
        count = max(self.min_partitions, -(-total // self.max_records_per_partition))
        return [_Split(part) for part in pack(ranges, count)]


def pack(
    ranges: list[tuple[logdir.SegmentRange, T]], count: int
) -> list[list[tuple[logdir.SegmentRange, T]]]:
    """``ranges`` (in order) packed into ``count`` input partitions of about equal offsets, in order:
    a range is cut where a partition's share ends, and a partition may hold several consecutive
    ranges (a Python worker's start and the task around it cost far more than reading one more
    segment, so Spark gets as many tasks as there are cores to keep busy, not one per segment; as
    Spark packs files into partitions). Never more partitions than offsets, never an empty one."""
    total = sum(r.end - r.start for r, _ in ranges)
    count = min(count, total)
    if count <= 0:
        return []
    bounds = [total * i // count for i in range(1, count + 1)]  # where each partition's share ends
    out: list[list[tuple[logdir.SegmentRange, T]]] = [[]]
    done = 0  # offsets packed so far
    for r, extra in ranges:
        start = r.start
        while start < r.end:
            room = bounds[len(out) - 1] - done
            end = min(r.end, start + room)
            out[-1].append((dataclasses.replace(r, start=start, end=end), extra))
            done += end - start
            start = end
            if done == bounds[len(out) - 1] and len(out) < count:
                out.append([])
    return out


class RecordsBatchReader(_RecordsBase, DataSourceReader):
    def __init__(self, path: str, options: dict):
        super().__init__(path, options)
        self.starting = ofs.parse_spec(options.get("startingOffsets"), "earliest")
        self.ending = ofs.parse_spec(options.get("endingOffsets"), "latest")
        if self.starting == "latest" or self.ending == "earliest":
            raise ValueError(
                "a batch query reads from startingOffsets (not 'latest') to endingOffsets (not 'earliest')"
            )

    def partitions(self) -> Sequence[InputPartition]:
        latest = self._latest()
        start, end = {}, {}
        for tp, hi in latest.items():
            lo = self._earliest(tp)
            start[tp] = ofs.resolve(self.starting, tp, lo, hi)
            end[tp] = min(ofs.resolve(self.ending, tp, lo, hi), hi)
        splits = self._splits(start, end)
        return splits or [_Split([])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read_splits(partition, self.verify_crc)


class RecordsStreamReader(_RecordsBase, DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, path: str, options: dict):
        super().__init__(path, options)
        self.starting = ofs.parse_spec(options.get("startingOffsets"), "latest")
        self.limit = ofs.max_per_trigger(options)
        self.target: dict[ofs.TP, int] | None = None

    def initialOffset(self) -> dict:
        latest = self._latest()
        return ofs.to_json(
            {tp: ofs.resolve(self.starting, tp, self._earliest(tp), hi) for tp, hi in latest.items()}
        )

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable() if self.limit is None else ReadMaxRows(self.limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._latest()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = ofs.from_json(start)
        latest = self.target if self.target is not None else self._latest()
        for tp in latest:  # partitions that appeared since the query started: from their beginning
            if tp not in begin:
                begin[tp] = self._earliest(tp)
        cap = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return ofs.to_json(ofs.cap(begin, latest, cap))

    def reportLatestOffset(self) -> dict:
        return ofs.to_json(self._latest())

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return self._splits(ofs.from_json(start), ofs.from_json(end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read_splits(partition, self.verify_crc)

    def commit(self, end: dict) -> None:
        pass


class CoordinatorReader(DataSourceReader):
    """The offsets or groups view: one input partition replaying ``__consumer_offsets`` in order."""

    def __init__(self, path: str, view: str):
        self.path = path
        self.view = view

    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        offsets, groups = coordinator_log.replay(self.path)
        yield from coordinator_log.with_datetimes(offsets if self.view == "offsets" else groups, self.view)
