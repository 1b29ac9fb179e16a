"""DeleteRecords (key 21) over the wire, every version: low watermarks, Kafka's per-partition errors,
and what the other APIs see afterwards (ListOffsets EARLIEST, Fetch below the start), before and after
a restart."""

from __future__ import annotations

import pytest

from broker.log.batch import validate_produce
from broker.log.records import simple_batch
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from broker.protocol.generated.fetch import FetchPartition, FetchRequest, FetchTopic
from broker.protocol.generated.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from tests.support.wire import WireClient

DELETE_RECORDS, FETCH, LIST_OFFSETS = 21, 1, 2


def fill(broker, topic: str, n: int, partitions: int = 1, configs: dict | None = None) -> None:
    broker.call(broker.broker.create_topic, topic, partitions, configs or {})
    plog = broker.broker.logs.get(topic, 0)

    def write() -> None:
        for i in range(n):
            data = bytearray(simple_batch([b"v%d" % i]))
            plog.append(data, validate_produce(data), 0)
        plog.mark_flushed(*plog.flush_target())

    broker.call(write)


def delete(broker, version: int, *topics: tuple[str, list[tuple[int, int]]]) -> dict:
    req = DeleteRecordsRequest(
        topics=[
            DeleteRecordsTopic(name, [DeleteRecordsPartition(p, o) for p, o in parts])
            for name, parts in topics
        ],
        timeout_ms=5000,
    )
    with WireClient(broker.port) as c:
        resp = c.call(DELETE_RECORDS, version, req)
    return {
        (t.name, p.partition_index): (p.error_code, p.low_watermark)
        for t in resp.topics
        for p in t.partitions
    }


def earliest(broker, topic: str) -> int:
    req = ListOffsetsRequest(-1, 0, [ListOffsetsTopic(topic, [ListOffsetsPartition(0, -1, -2, 1)])], 10000)
    with WireClient(broker.port) as c:
        (p,) = c.call(LIST_OFFSETS, 7, req).topics[0].partitions
    assert p.error_code == 0
    return p.offset


def fetch(broker, topic: str, offset: int):
    req = FetchRequest(
        max_wait_ms=0,
        topics=[
            FetchTopic(
                topic=topic, partitions=[FetchPartition(0, fetch_offset=offset, partition_max_bytes=1 << 20)]
            )
        ],
    )
    with WireClient(broker.port) as c:
        (p,) = c.call(FETCH, 11, req).responses[0].partitions
    return p


@pytest.mark.parametrize("version", [0, 1, 2])
def test_moves_the_log_start_offset(broker, version):
    fill(broker, "t", 10)
    assert delete(broker, version, ("t", [(0, 4)])) == {("t", 0): (0, 4)}
    assert earliest(broker, "t") == 4
    below = fetch(broker, "t", 3)
    # as Kafka 4.x answers a consumer without tiered storage (ReplicaManager.createLogReadResult(e)):
    # the error without offsets; the client then asks ListOffsets for the start
    assert (below.error_code, below.log_start_offset, below.high_watermark) == (
        ErrorCode.OFFSET_OUT_OF_RANGE,
        -1,
        -1,
    )
    at = fetch(broker, "t", 4)
    assert at.error_code == 0 and at.log_start_offset == 4 and at.records
    # lower than the start: nothing changes, the current start is the answer
    assert delete(broker, version, ("t", [(0, 2)])) == {("t", 0): (0, 4)}
    # -1: up to the high watermark
    assert delete(broker, version, ("t", [(0, -1)])) == {("t", 0): (0, 10)}
    assert earliest(broker, "t") == 10


def test_errors_as_kafka_answers_them(broker):
    fill(broker, "t", 5, partitions=2)
    fill(broker, "compacted", 1, configs={"cleanup.policy": "compact"})
    fill(broker, "both", 3, configs={"cleanup.policy": "compact,delete"})
    broker.call(broker.broker.create_topic, "__consumer_offsets", 1, {}, True)
    out = delete(
        broker,
        2,
        ("t", [(0, 6), (1, -2), (2, 0)]),
        ("nope", [(0, 0)]),
        ("compacted", [(0, 0)]),
        ("both", [(0, 2)]),
        ("__consumer_offsets", [(0, 0)]),
    )
    assert out == {
        ("t", 0): (ErrorCode.OFFSET_OUT_OF_RANGE, -1),  # above the high watermark (5)
        ("t", 1): (ErrorCode.OFFSET_OUT_OF_RANGE, -1),  # below -1
        ("t", 2): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
        ("nope", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
        ("compacted", 0): (ErrorCode.POLICY_VIOLATION, -1),
        ("both", 0): (0, 2),
        ("__consumer_offsets", 0): (ErrorCode.INVALID_TOPIC_EXCEPTION, -1),
    }
    assert earliest(broker, "t") == 0


def test_a_partition_named_twice_is_answered_once_for_the_last_offset(broker):
    fill(broker, "t", 5)
    assert delete(broker, 1, ("t", [(0, 1)]), ("t", [(0, 3)])) == {("t", 0): (0, 3)}


def test_the_start_survives_a_restart(broker_factory, tmp_path):
    data = tmp_path / "d"
    b = broker_factory(data_dir=data)
    fill(b, "t", 10)
    assert delete(b, 2, ("t", [(0, 7)])) == {("t", 0): (0, 7)}
    b.stop()
    again = broker_factory(data_dir=data)
    assert earliest(again, "t") == 7
    assert fetch(again, "t", 6).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
