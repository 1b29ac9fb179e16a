"""Spark Python data source ``kafka-wire``: reads any Kafka-compatible broker over the Kafka
protocol, with the option names of Spark's Kafka source (``kafka.bootstrap.servers``,
``subscribe``, ``startingOffsets``, ``endingOffsets``, ``maxOffsetsPerTrigger``) and its schema.
One input partition per topic-partition offset range, read with assign + seek (kafka-python), so
no consumer group is involved and nothing is committed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from . import offsets as ofs
from .source import RECORDS_SCHEMA, columns_to_arrow


class BrokerUnavailable(RuntimeError):
    pass


def _consumer(bootstrap: str, timeout_ms: int):  # -> kafka.KafkaConsumer
    from kafka import KafkaConsumer
    from kafka.errors import KafkaConnectionError, KafkaTimeoutError

    try:
        return KafkaConsumer(
            bootstrap_servers=bootstrap.split(","),
            enable_auto_commit=False,
            group_id=None,
            request_timeout_ms=max(timeout_ms, 1000),
            bootstrap_timeout_ms=timeout_ms,
            reconnect_backoff_max_ms=500,
            consumer_timeout_ms=timeout_ms,
        )
    except (KafkaConnectionError, KafkaTimeoutError) as e:
        raise BrokerUnavailable(
            f"no Kafka broker answers at {bootstrap} within {timeout_ms} ms: {e!r}"
        ) from None


class _Range(InputPartition):
    def __init__(self, topic: str, partition: int, start: int, end: int):
        super().__init__((topic, partition, start, end))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end


class KafkaWireDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kafka-wire"

    def schema(self) -> str:
        return RECORDS_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return WireBatchReader(self.options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return WireStreamReader(self.options)


class _WireBase:
    def __init__(self, options: dict):
        self.bootstrap = options.get("kafka.bootstrap.servers")
        if not self.bootstrap:
            raise ValueError("option 'kafka.bootstrap.servers' is required")
        sub = options.get("subscribe")
        if not sub:
            raise ValueError("option 'subscribe' (comma-separated topics) is required")
        self.topics = [t.strip() for t in sub.split(",") if t.strip()]
        self.timeout_ms = int(options.get("kafka.request.timeout.ms", "5000"))
        self.poll_ms = int(options.get("kafkaConsumer.pollTimeoutMs", "10000"))

    def _bounds(self) -> tuple[dict[ofs.TP, int], dict[ofs.TP, int]]:
        from kafka import TopicPartition

        c = _consumer(self.bootstrap, self.timeout_ms)
        try:
            tps = []
            for t in self.topics:
                parts = c.partitions_for_topic(t)
                if not parts:
                    raise ValueError(f"topic {t!r} does not exist on {self.bootstrap}")
                tps += [TopicPartition(t, p) for p in sorted(parts)]
            lo = c.beginning_offsets(tps)
            hi = c.end_offsets(tps)
            return {(tp.topic, tp.partition): o for tp, o in lo.items()}, {
                (tp.topic, tp.partition): o for tp, o in hi.items()
            }
        finally:
            c.close()

    def read(self, partition: InputPartition) -> Iterator:
        r: _Range = partition  # type: ignore[assignment]
        if r.start >= r.end:
            return
        from kafka import TopicPartition

        c = _consumer(self.bootstrap, self.timeout_ms)
        try:
            tp = TopicPartition(r.topic, r.partition)
            c.assign([tp])
            c.seek(tp, r.start)
            cols: dict[str, list] = {
                k: [] for k in ("key", "value", "offset", "timestamp", "timestampType", "headers")
            }
            nxt = r.start
            while nxt < r.end:
                got = c.poll(timeout_ms=self.poll_ms).get(tp, [])
                if not got:
                    raise TimeoutError(
                        f"{r.topic}-{r.partition}: no records at offset {nxt} (wanted up to {r.end}) "
                        f"within {self.poll_ms} ms from {self.bootstrap}"
                    )
                for m in got:
                    if m.offset >= r.end:
                        break
                    if m.offset < r.start:
                        continue
                    cols["key"].append(m.key)
                    cols["value"].append(m.value)
                    cols["offset"].append(m.offset)
                    cols["timestamp"].append(m.timestamp)
                    cols["timestampType"].append(max(m.timestamp_type, 0))
                    cols["headers"].append([{"key": k, "value": v} for k, v in (m.headers or [])])
                nxt = got[-1].offset + 1
            n = len(cols["offset"])
            cols["topic"] = [r.topic] * n
            cols["partition"] = [r.partition] * n
            if n:
                yield columns_to_arrow(cols)
        finally:
            c.close()


class WireBatchReader(_WireBase, DataSourceReader):
    def __init__(self, options: dict):
        super().__init__(options)
        self.starting = ofs.parse_spec(options.get("startingOffsets"), "earliest")
        self.ending = ofs.parse_spec(options.get("endingOffsets"), "latest")

    def partitions(self) -> Sequence[InputPartition]:
        lo, hi = self._bounds()
        out = []
        for tp in sorted(hi):
            s = ofs.resolve(self.starting, tp, lo[tp], hi[tp])
            e = min(ofs.resolve(self.ending, tp, lo[tp], hi[tp]), hi[tp])
            if s < e:
                out.append(_Range(tp[0], tp[1], s, e))
        return out or [_Range("", 0, 0, 0)]


class WireStreamReader(_WireBase, DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict):
        super().__init__(options)
        self.starting = ofs.parse_spec(options.get("startingOffsets"), "latest")
        self.limit = ofs.max_per_trigger(options)
        self.target: dict[ofs.TP, int] | None = None

    def initialOffset(self) -> dict:
        lo, hi = self._bounds()
        return ofs.to_json({tp: ofs.resolve(self.starting, tp, lo[tp], hi[tp]) for tp in hi})

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable() if self.limit is None else ReadMaxRows(self.limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._bounds()[1]

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = ofs.from_json(start)
        if self.target is not None:
            latest = self.target
        else:
            lo, latest = self._bounds()
            for tp in latest:
                begin.setdefault(tp, lo[tp])
        cap = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return ofs.to_json(ofs.cap(begin, latest, cap))

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        s, e = ofs.from_json(start), ofs.from_json(end)
        return [_Range(t, p, s.get((t, p), 0), o) for (t, p), o in sorted(e.items()) if s.get((t, p), 0) < o]

    def commit(self, end: dict) -> None:
        pass
