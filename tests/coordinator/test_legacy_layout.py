"""Data directories written before the coordinator records followed Kafka's layout still load.

Earlier versions wrote ConsumerGroupMemberMetadataValue with ServerAssignor before
RebalanceTimeoutMs and ConsumerGroupPartitionMetadataValue without PartitionMetadata, at the same
version 0 (broker/coordinator/layout.py). Here an in-process broker writes KIP-848 groups with those
legacy encoders swapped in (as the old code did, and without the layout file the old code never
wrote); the new broker then records the layout offset (the log's end), loads the groups intact,
appends Kafka's layout after it, reloads both after a restart and after compaction. The Spark
reader (broker/spark/coordinator_log.py) applies the same rule.
"""

from __future__ import annotations

import struct
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest

from broker.coordinator import OFFSETS_TOPIC
from broker.coordinator.consumer.records import MEMBER_METADATA, PARTITION_METADATA
from broker.coordinator.generated import legacy_consumer_group_member_metadata_value as legacy_mem_v
from broker.coordinator.generated import legacy_consumer_group_partition_metadata_value as legacy_part_v
from broker.coordinator.layout import (
    ALL_LEGACY,
    LAYOUT_FILE,
    LayoutError,
    read_kafka_layout_from,
    reader_kafka_layout_from,
)
from broker.coordinator.records import CoordinatorRecord, RecordError, decode_record
from broker.log import cleaner
from broker.log.records import iter_records
from broker.protocol.generated.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from broker.spark import coordinator_log
from tests.support.inprocess import InProcessBroker

from .test_compaction_replay import full_view

_new_value_bytes = CoordinatorRecord.value_bytes


def legacy_value_bytes(self: CoordinatorRecord) -> bytes | None:
    """CoordinatorRecord.value_bytes as earlier versions wrote the two values."""
    v = self.value
    if v is not None and self.type == MEMBER_METADATA:
        old = legacy_mem_v.LegacyConsumerGroupMemberMetadataValue(
            **{f: getattr(v, f) for f in legacy_mem_v.LegacyConsumerGroupMemberMetadataValue._fields}
        )
        return b"\x00\x00" + legacy_mem_v.encode_v0(old)
    if v is not None and self.type == PARTITION_METADATA:
        old = legacy_part_v.LegacyConsumerGroupPartitionMetadataValue(
            [legacy_part_v.TopicMetadata(t.topic_id, t.topic_name, t.num_partitions) for t in v.topics]
        )
        return b"\x00\x00" + legacy_part_v.encode_v0(old)
    return _new_value_bytes(self)


def open_broker(data_dir: Path) -> InProcessBroker:
    return InProcessBroker(data_dir, {"log.cleaner.enable": "false"})


class Members:
    """KIP-848 members heartbeating through the in-process broker's pipeline (API 68 v1)."""

    def __init__(self) -> None:
        self.epochs: dict[tuple[str, str], int] = {}

    def join(self, node: InProcessBroker, group: str, topics: list[str], assignor: str | None, timeout: int,
             rack: str | None = None) -> str:  # fmt: skip
        member = str(uuid.uuid4())
        req = ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=0, rack_id=rack, rebalance_timeout_ms=timeout,
            subscribed_topic_names=topics, server_assignor=assignor, topic_partitions=[],
        )  # fmt: skip
        self._send(node, group, member, req)
        return member

    def resubscribe(self, node: InProcessBroker, group: str, member: str, topics: list[str]) -> None:
        req = ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=self.epochs[group, member],
            subscribed_topic_names=topics,
        )  # fmt: skip
        self._send(node, group, member, req)

    def _send(self, node: InProcessBroker, group: str, member: str, req: Any) -> None:
        with node.client() as c:
            resp = c.call(68, 1, req)
        assert resp.error_code == 0, resp
        self.epochs[group, member] = resp.member_epoch


def coordinator_records(node: InProcessBroker) -> list[tuple[int, bytes, bytes | None]]:
    plog = node.broker.logs.get(OFFSETS_TOPIC, 0)
    out, offset = [], plog.log_start_offset
    while offset < plog.log_end_offset:
        data = plog.read(offset, 1 << 22)
        if not data:
            break
        for off, _ts, k, v, _h, info in iter_records(data):
            if not info.is_control and off >= offset:
                out.append((off, bytes(k), None if v is None else bytes(v)))
        offset = out[-1][0] + 1
    return out


def view(node: InProcessBroker) -> dict[str, Any]:
    return full_view(node.broker.groups.state)


def test_a_legacy_data_directory_loads_appends_kafkas_layout_and_survives_restart_and_compaction(
    tmp_path, monkeypatch
):
    data = tmp_path / "data"
    members = Members()
    # -- the old broker: legacy value layouts, no layout file
    with monkeypatch.context() as m:
        m.setattr(CoordinatorRecord, "value_bytes", legacy_value_bytes)
        node = open_broker(data)
        node.broker.create_topic("orders", 4)
        node.broker.create_topic("payments", 2)
        a = members.join(node, "cg-a", ["orders"], "uniform", 45_001, rack="r1")
        members.join(node, "cg-a", ["orders", "payments"], None, 45_002)
        members.join(node, "cg-b", ["payments"], "range", 45_003)
        members.resubscribe(node, "cg-a", a, ["orders", "payments"])
        old_view = view(node)
        node.stop()
    (data / LAYOUT_FILE).unlink()
    assert old_view["consumer_groups"]["cg-a"]["members"][a]["server_assignor"] == "uniform"

    # -- the new broker: records the offset, loads the legacy records as they were meant
    node = open_broker(data)
    legacy_end = node.broker.logs.get(OFFSETS_TOPIC, 0).log_end_offset
    assert legacy_end > 0 and read_kafka_layout_from(data) == legacy_end
    assert view(node) == old_view
    # new records after it, in Kafka's layout: a member with an assignor, a new subscription
    node.broker.create_topic("refunds", 1)
    c = members.join(node, "cg-b", ["payments", "refunds"], "uniform", 45_004, rack="r2")
    members.resubscribe(node, "cg-a", a, ["orders", "refunds"])
    mid_view = view(node)
    assert mid_view["consumer_groups"]["cg-b"]["members"][c]["rebalance_timeout_ms"] == 45_004

    records = coordinator_records(node)
    kinds = {(off >= legacy_end, int.from_bytes(k[:2], "big")) for off, k, v in records if v}
    assert {(False, MEMBER_METADATA), (True, MEMBER_METADATA)} <= kinds
    assert {(False, PARTITION_METADATA), (True, PARTITION_METADATA)} <= kinds
    for off, k, v in records:
        rtype = int.from_bytes(k[:2], "big")
        if v is None or rtype not in (MEMBER_METADATA, PARTITION_METADATA):
            continue
        legacy = off < legacy_end
        rec = decode_record(k, v, legacy)
        # the bytes are in the layout the offset says: read as the other layout they are not the same
        try:
            other = decode_record(k, v, not legacy).value
        except (RecordError, ValueError, IndexError, struct.error):
            other = None
        assert other != rec.value, off
        if not legacy:
            assert v == _new_value_bytes(rec)  # Kafka's layout, byte for byte
    node.stop()

    # -- a restart reads both layouts
    node = open_broker(data)
    assert read_kafka_layout_from(data) == legacy_end
    assert view(node) == mid_view
    # -- so does the Spark reader of the data directory
    spark_values = {off: r.value for off, _ts, r in coordinator_log.iter_coordinator_records(data)}
    for off, k, v in records:
        assert spark_values[off] == decode_record(k, v, off < legacy_end).value

    # -- compaction keeps the offsets, so the rule still holds after it
    plog = node.broker.logs.get(OFFSETS_TOPIC, 0)
    plog.roll()  # and one more record, so the high watermark moves into the new segment
    members.resubscribe(node, "cg-b", c, ["refunds"])
    end_view = view(node)
    result = cleaner.clean_partition(plog, int(time.time() * 1000), 10**12)
    assert result is not None and result.records_read > result.records_kept
    kept = coordinator_records(node)
    assert len(kept) < len(records)
    assert any(off < legacy_end and int.from_bytes(k[:2], "big") == MEMBER_METADATA for off, k, _v in kept)
    node.stop()
    node = open_broker(data)
    assert view(node) == end_view
    node.stop()


def test_a_new_data_directory_is_kafkas_layout_from_offset_zero(tmp_path):
    node = open_broker(tmp_path / "d")
    try:
        # a new data directory's coordinator loads on first use (broker.app), marking it then:
        # before any record of it can be appended
        assert read_kafka_layout_from(tmp_path / "d") is None
        node.broker.groups  # noqa: B018
        assert read_kafka_layout_from(tmp_path / "d") == 0
        node.broker.create_topic("orders", 1)
        Members().join(node, "cg", ["orders"], "uniform", 30_000)
        assert node.broker.logs.get(OFFSETS_TOPIC, 0).log_end_offset > 0
    finally:
        node.stop()
    node = open_broker(tmp_path / "d")  # a restart keeps 0: nothing there is legacy
    node.stop()
    assert orjson.loads((tmp_path / "d" / LAYOUT_FILE).read_bytes()) == {"kafka_layout_from": 0}


def test_readers_treat_a_directory_without_the_file_as_legacy_and_reject_a_bad_file(tmp_path):
    assert reader_kafka_layout_from(tmp_path) == ALL_LEGACY
    (tmp_path / LAYOUT_FILE).write_bytes(b'{"kafka_layout_from": -3}')
    with pytest.raises(LayoutError):
        read_kafka_layout_from(tmp_path)
