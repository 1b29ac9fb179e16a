"""Spark Python data source ``pykbroker`` over a broker's data directory.

    spark.read.format("pykbroker").option("path", data_dir).load()                       # records
    spark.read.format("pykbroker").option("path", data_dir).option("view", "offsets").load()
    spark.readStream.format("pykbroker").option("path", data_dir).option("subscribe", "t").load()

The ``records`` view has exactly the columns and types of Spark's Kafka source, so a job written
against it runs unchanged on ``format("kafka")`` against a real cluster. Each input partition is one
segment file's offset range. Streaming is bounded by what the broker has durably written.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

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


class _Split(InputPartition):
    def __init__(
        self, ranges: list[logdir.SegmentRange], aborted: tuple[tuple[int, int, int], ...] | None = None
    ):
        super().__init__(ranges)
        self.ranges = ranges
        #: read_committed: the aborted transactions of the split's partition (else None)
        self.aborted = aborted


def _read_splits(split: _Split, verify_crc: bool) -> Iterator[pa.RecordBatch]:
    for r in split.ranges:
        yield from logdir.read_arrow(r, verify_crc, getattr(split, "aborted", None))


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
    ``maxOffsetsPerTrigger`` / ``maxRecordsPerTrigger``, ``failOnDataLoss`` (default true),
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
        out = []
        durable = logdir.durable_offsets(self.path) if self.committed else {}
        for tp, hi in sorted(end.items()):
            lo = start[tp] if tp in start else self._earliest(tp)
            # read_committed: hi is at most the last stable offset at the readable end, so every
            # transaction with records below hi has its marker below that end (not always below hi,
            # which a limit per trigger may put inside a transaction)
            aborted = None
            if self.committed:
                aborted = self._transactions(tp, logdir.end_offset(self.path, tp, durable)).aborted
            out += [_Split([r], aborted) for r in logdir.plan(self.path, tp, lo, hi, self.fail_on_data_loss)]
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
