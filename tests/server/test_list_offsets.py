"""ListOffsets (key 2) over the wire: the special timestamps as Kafka 4.x answers them without tiered
storage, MAX_TIMESTAMP record-exact, and timestamps >= 0."""

from __future__ import annotations

import time

import pytest

from broker.log.batch import validate_produce
from broker.log.records import Record, build_batch
from broker.protocol.generated.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from tests.support.wire import WireClient

LIST_OFFSETS = 2


def request(*timestamps: int, partition: int = 0) -> ListOffsetsRequest:
    parts = [ListOffsetsPartition(partition, -1, ts, 1) for ts in timestamps]
    return ListOffsetsRequest(-1, 0, [ListOffsetsTopic("t", parts)], 10000)


def answers(broker, version: int, *timestamps: int) -> list[tuple[int, int, int, int]]:
    out = []
    with WireClient(broker.port) as c:
        for ts in timestamps:  # one partition per request: a request may name a partition once
            resp = c.call(LIST_OFFSETS, version, request(ts))
            (p,) = resp.topics[0].partitions
            out.append((p.error_code, p.offset, p.timestamp, p.leader_epoch))
    return out


@pytest.fixture
def filled(broker):
    """Topic t: a gzip batch at base+100, base+400, base+200, then an uncompressed one at base+300."""
    base = int(time.time() * 1000) - 60_000
    broker.call(broker.broker.create_topic, "t", 1)
    plog = broker.broker.logs.get("t", 0)

    def write() -> None:
        for recs, codec in (([(0, 100), (1, 400), (2, 200)], 1), ([(0, 300)], 0)):
            records = [Record(o, d, None, b"v" * 50, []) for o, d in recs]
            data = bytearray(build_batch(records, base_timestamp=base, compression=codec))
            plog.append(data, validate_produce(data), base)
        plog.mark_flushed(*plog.flush_target())

    broker.call(write)
    return base


def test_special_timestamps_without_tiered_storage(broker, filled):
    base = filled
    assert answers(broker, 11, -1, -2, -3, -4, -5, -6) == [
        (0, 4, -1, 0),  # latest: the high watermark
        (0, 0, -1, 0),  # earliest
        (0, 1, base + 400, 0),  # max timestamp: the record inside the gzip batch
        (0, 0, -1, 0),  # earliest local = earliest
        (0, -1, -1, -1),  # latest tiered: nothing tiered
        (0, -1, -1, -1),  # earliest pending upload: no remote storage
    ]


def test_timestamps_find_the_first_record_at_or_after(broker, filled):
    base = filled
    assert answers(broker, 7, base + 150, base + 250, base + 301, base + 400, base + 401) == [
        (0, 1, base + 400, 0),
        (0, 1, base + 400, 0),
        (0, 1, base + 400, 0),
        (0, 1, base + 400, 0),
        (0, -1, -1, -1),
    ]
    assert answers(broker, 7, base + 300)[0][:3] == (0, 1, base + 400)  # first in offset order


def test_max_timestamp_of_an_empty_log(broker):
    broker.call(broker.broker.create_topic, "t", 1)
    assert answers(broker, 9, -3, -5) == [(0, -1, -1, -1), (0, -1, -1, -1)]
