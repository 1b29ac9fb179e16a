"""Our coordinator records are Kafka's, byte for byte: every record type, encoded by our codecs with a
non-default value in every field, is read by the Kafka broker's own generated record classes
(kafka-group-coordinator 4.x, tests/java-broker/CoordinatorRecordsProbe.java), which must consume
every byte, see the values we wrote (through Kafka's JSON converters), and serialise them back to the
same bytes -- which our decoders then read back to the same values. The consumer's embedded
protocol (ConsumerProtocolSubscription/Assignment, all versions) is checked the same way against
kafka-clients' classes.

The legacy layouts (what earlier pykbroker versions wrote, broker/coordinator/layout.py) are not
Kafka's: the last test shows the probe tells them apart, so this test would have caught them.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path
from typing import Any

import pytest

from broker.coordinator.generated import RECORD_TYPES
from broker.coordinator.generated import consumer_group_current_member_assignment_key as cur_k
from broker.coordinator.generated import consumer_group_current_member_assignment_value as cur_v
from broker.coordinator.generated import consumer_group_member_metadata_key as mem_k
from broker.coordinator.generated import consumer_group_member_metadata_value as mem_v
from broker.coordinator.generated import consumer_group_metadata_key as meta_k
from broker.coordinator.generated import consumer_group_metadata_value as meta_v
from broker.coordinator.generated import consumer_group_partition_metadata_key as part_k
from broker.coordinator.generated import consumer_group_partition_metadata_value as part_v
from broker.coordinator.generated import consumer_group_target_assignment_member_key as tmem_k
from broker.coordinator.generated import consumer_group_target_assignment_member_value as tmem_v
from broker.coordinator.generated import consumer_group_target_assignment_metadata_key as tmeta_k
from broker.coordinator.generated import consumer_group_target_assignment_metadata_value as tmeta_v
from broker.coordinator.generated import consumer_protocol_assignment as cpa
from broker.coordinator.generated import consumer_protocol_subscription as cps
from broker.coordinator.generated import group_metadata_key as gm_k
from broker.coordinator.generated import group_metadata_value as gm_v
from broker.coordinator.generated import legacy_consumer_group_member_metadata_value as legacy_mem_v
from broker.coordinator.generated import legacy_consumer_group_partition_metadata_value as legacy_part_v
from broker.coordinator.generated import offset_commit_key as oc_k
from broker.coordinator.generated import offset_commit_value as oc_v
from broker.coordinator.records import CoordinatorRecord, decode_record
from broker.protocol.primitives import Message
from tests.support.java import json_lines, require_java

from .test_compaction_replay import random_history

pytestmark = pytest.mark.java

T1 = uuid.UUID("8f1c3a52-41a5-4b7e-9d0e-1f2a3b4c5d6e")
T2 = uuid.UUID("0a0b0c0d-0e0f-4011-8213-141516171819")
SUB = bytes(range(7))
ASG = bytes(range(200, 211))


def _member(**over: Any) -> mem_v.ConsumerGroupMemberMetadataValue:
    fields: dict[str, Any] = dict(
        instance_id="inst-1",
        rack_id="rack-a",
        client_id="client-1",
        client_host="/10.1.2.3",
        subscribed_topic_names=["orders", "payments"],
        subscribed_topic_regex="ord.*",
        rebalance_timeout_ms=45_678,
        server_assignor="uniform",
        classic_member_metadata=mem_v.ClassicMemberMetadata(
            session_timeout_ms=12_345,
            supported_protocols=[mem_v.ClassicProtocol("range", SUB), mem_v.ClassicProtocol("sticky", ASG)],
        ),
    )
    fields.update(over)
    return mem_v.ConsumerGroupMemberMetadataValue(**fields)


def _partitions(racks: bool) -> part_v.ConsumerGroupPartitionMetadataValue:
    pm = [part_v.PartitionMetadata(0, ["r1", "r2"]), part_v.PartitionMetadata(1, [])] if racks else []
    return part_v.ConsumerGroupPartitionMetadataValue(
        [part_v.TopicMetadata(T1, "orders", 6, pm), part_v.TopicMetadata(T2, "payments", 2, [])]
    )


def _group_metadata(v: int) -> gm_v.GroupMetadataValue:
    """Non-default values in every field of version ``v`` (the others at their defaults)."""
    rebalance = (300_001, 300_002) if v >= 1 else (-1, -1)
    return gm_v.GroupMetadataValue(
        protocol_type="consumer",
        generation=17,
        protocol="cooperative-sticky",
        leader="m-1",
        current_state_timestamp=1_700_000_000_123 if v >= 2 else -1,
        members=[
            gm_v.MemberMetadata(
                "m-1", "inst-1" if v >= 3 else None, "client-1", "/10.1.2.3", rebalance[0], 45_001, SUB, ASG
            ),
            gm_v.MemberMetadata("m-2", None, "client-2", "/10.1.2.4", rebalance[1], 45_002, b"", b"\x00"),
        ],
    )


#: (name, type id, key, value, value version); every value field differs from its default
CASES: list[tuple[str, int, Message, Message | None, int]] = [
    *[
        (
            f"OffsetCommit-v{v}",
            1,
            oc_k.OffsetCommitKey("group-1", "orders", 5),
            oc_v.OffsetCommitValue(
                offset=123_456_789_012,
                leader_epoch=7 if v >= 3 else -1,
                metadata="meta \u00e9",
                commit_timestamp=1_700_000_000_456,
                expire_timestamp=1_700_000_999_000 if v == 1 else -1,
                topic_id=T1 if v >= 4 else uuid.UUID(int=0),
            ),
            v,
        )
        for v in range(5)
    ],
    ("OffsetCommit-tombstone", 1, oc_k.OffsetCommitKey("group-1", "orders", 5), None, 0),
    *[(f"GroupMetadata-v{v}", 2, gm_k.GroupMetadataKey("group-1"), _group_metadata(v), v) for v in range(5)],
    ("GroupMetadata-tombstone", 2, gm_k.GroupMetadataKey("group-1"), None, 0),
    (
        "ConsumerGroupMetadata",
        3,
        meta_k.ConsumerGroupMetadataKey("cg-1"),
        meta_v.ConsumerGroupMetadataValue(epoch=42, metadata_hash=-8_765_432_101_234),
        0,
    ),
    (
        "ConsumerGroupMetadata-no-hash",
        3,
        meta_k.ConsumerGroupMetadataKey("cg-1"),
        meta_v.ConsumerGroupMetadataValue(42),
        0,
    ),
    (
        "ConsumerGroupPartitionMetadata",
        4,
        part_k.ConsumerGroupPartitionMetadataKey("cg-1"),
        _partitions(False),
        0,
    ),
    (
        "ConsumerGroupPartitionMetadata-racks",
        4,
        part_k.ConsumerGroupPartitionMetadataKey("cg-1"),
        _partitions(True),
        0,
    ),
    ("ConsumerGroupMemberMetadata", 5, mem_k.ConsumerGroupMemberMetadataKey("cg-1", "m-1"), _member(), 0),
    (
        "ConsumerGroupMemberMetadata-nulls",
        5,
        mem_k.ConsumerGroupMemberMetadataKey("cg-1", "m-2"),
        _member(
            instance_id=None,
            rack_id=None,
            subscribed_topic_regex=None,
            server_assignor=None,
            classic_member_metadata=None,
        ),  # fmt: skip
        0,
    ),
    (
        "ConsumerGroupTargetAssignmentMetadata",
        6,
        tmeta_k.ConsumerGroupTargetAssignmentMetadataKey("cg-1"),
        tmeta_v.ConsumerGroupTargetAssignmentMetadataValue(
            assignment_epoch=41, assignment_timestamp=1_700_000_000_789
        ),
        0,
    ),
    (
        "ConsumerGroupTargetAssignmentMember",
        7,
        tmem_k.ConsumerGroupTargetAssignmentMemberKey("cg-1", "m-1"),
        tmem_v.ConsumerGroupTargetAssignmentMemberValue(
            [tmem_v.TopicPartitions(T1, [0, 2, 4]), tmem_v.TopicPartitions(T2, [1])]
        ),
        0,
    ),
    (
        "ConsumerGroupCurrentMemberAssignment",
        8,
        cur_k.ConsumerGroupCurrentMemberAssignmentKey("cg-1", "m-1"),
        cur_v.ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=40,
            previous_member_epoch=39,
            state=2,
            assigned_partitions=[cur_v.TopicPartitions(T1, [0, 2], [38, 40]), cur_v.TopicPartitions(T2, [1])],
            partitions_pending_revocation=[cur_v.TopicPartitions(T2, [0], [12])],
        ),
        0,
    ),
    (
        "ConsumerGroupCurrentMemberAssignment-tombstone",
        8,
        cur_k.ConsumerGroupCurrentMemberAssignmentKey("cg-1", "m-1"),
        None,
        0,
    ),
]


#: fields of a value that its latest version (the one the broker writes) no longer has
NOT_IN_LATEST = {1: {"expireTimestamp"}}
#: cases with tagged fields at their defaults, which Kafka's JSON converters leave out
TAGGED_AT_DEFAULT = {"ConsumerGroupMetadata-no-hash", "ConsumerGroupMemberMetadata-nulls"}


def _value_bytes(rtype: int, value: Message | None, version: int) -> bytes | None:
    if value is None:
        return None
    return version.to_bytes(2, "big") + RECORD_TYPES[rtype].value_codec().ENCODERS[version](value)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def kafka_json(v: Any) -> Any:
    """Our value as Kafka's JSON converters write it (uuids as Kafka's base64 ids, bytes as base64)."""
    if isinstance(v, Message):
        return {_camel(f): kafka_json(getattr(v, f)) for f in v._fields}
    if isinstance(v, list):
        return [kafka_json(e) for e in v]
    if isinstance(v, uuid.UUID):
        return base64.urlsafe_b64encode(v.bytes).decode().rstrip("=")
    if isinstance(v, bytes | bytearray):
        return base64.b64encode(v).decode()
    return v


def assert_fields_match(kafka: Any, ours: Any, path: str) -> None:
    """Every field Kafka shows (in structs at any depth) is one of ours and holds our value; fields
    of ours that this version lacks are not compared."""
    if isinstance(kafka, dict):
        assert isinstance(ours, dict) and set(kafka) <= set(ours), (
            f"{path}: fields we lack: {set(kafka) - set(ours)}"
        )
        for field, v in kafka.items():
            assert_fields_match(v, ours[field], f"{path}.{field}")
    elif isinstance(kafka, list):
        assert isinstance(ours, list) and len(kafka) == len(ours), f"{path}: {kafka!r} != {ours!r}"
        for i, (a, b) in enumerate(zip(kafka, ours, strict=True)):
            assert_fields_match(a, b, f"{path}[{i}]")
    else:
        assert kafka == ours, f"{path}: Kafka read {kafka!r}, we wrote {ours!r}"


def probe(tmp_path: Path, rows: list[tuple[Any, bytes | None]], mode: tuple[str, ...] = ()) -> list[dict]:
    java = require_java("broker")
    src = tmp_path / "records.tsv"
    src.write_text(
        "".join(f"{k if isinstance(k, str) else k.hex()}\t{'-' if v is None else v.hex()}\n" for k, v in rows)
    )
    res = java.run("CoordinatorRecordsProbe", [*mode, str(src)])
    assert res.returncode == 0, res.stderr
    out = json_lines(res.stdout)
    assert len(out) == len(rows), res.stdout + res.stderr
    return out


def test_every_record_type_and_value_version_is_covered():
    assert {c[1] for c in CASES} == set(RECORD_TYPES)
    for rtype, rt in RECORD_TYPES.items():
        versions = {c[4] for c in CASES if c[1] == rtype and c[3] is not None}
        assert versions == set(range(len(rt.value_codec().ENCODERS))), rt.name


def test_kafka_reads_our_records_and_writes_the_same_bytes(tmp_path):
    rows = [
        (CoordinatorRecord(rtype, key, None).key_bytes(), _value_bytes(rtype, value, version))
        for _name, rtype, key, value, version in CASES
    ]
    for (name, rtype, key, value, version), (kb, vb), got in zip(
        CASES, rows, probe(tmp_path, rows), strict=True
    ):
        assert "error" not in got, f"{name}: Kafka cannot read our bytes: {got['error']}"
        assert got["type"] == rtype
        assert got["key"] == kafka_json(key), name
        assert bytes.fromhex(got["key_hex"]) == kb, name
        if value is None:
            assert got["value"] is None
            continue
        assert got["version"] == version
        # every field Kafka has in this version holds the value we wrote
        ours = kafka_json(value)
        assert_fields_match(got["value"], ours, name)
        # Kafka writes what it read to exactly our bytes, and our decoder reads those back
        assert bytes.fromhex(got["value_hex"]) == vb, name
        back = decode_record(bytes.fromhex(got["key_hex"]), bytes.fromhex(got["value_hex"]))
        assert (back.type, back.key, back.value) == (rtype, key, value), name
        if (
            version == RECORD_TYPES[rtype].value_version and name not in TAGGED_AT_DEFAULT
        ):  # Kafka has all ours
            expected = set(ours) - NOT_IN_LATEST.get(rtype, set())
            assert set(got["value"]) == expected, (
                f"{name}: fields Kafka lacks: {expected - set(got['value'])}"
            )


def test_kafka_rejects_or_misreads_the_legacy_layouts(tmp_path):
    """What earlier versions wrote is not Kafka's layout (layout.py keeps reading it)."""
    member = _member(classic_member_metadata=None)
    legacy_member = legacy_mem_v.LegacyConsumerGroupMemberMetadataValue(
        **{f: getattr(member, f) for f in legacy_mem_v.LegacyConsumerGroupMemberMetadataValue._fields}
    )
    parts = _partitions(False)
    legacy_parts = legacy_part_v.LegacyConsumerGroupPartitionMetadataValue(
        [legacy_part_v.TopicMetadata(t.topic_id, t.topic_name, t.num_partitions) for t in parts.topics]
    )
    cases = [
        (
            5,
            mem_k.ConsumerGroupMemberMetadataKey("cg-1", "m-1"),
            member,
            legacy_mem_v.encode_v0(legacy_member),
        ),
        (4, part_k.ConsumerGroupPartitionMetadataKey("cg-1"), parts, legacy_part_v.encode_v0(legacy_parts)),
    ]
    rows = [(CoordinatorRecord(t, k, None).key_bytes(), b"\x00\x00" + raw) for t, k, _v, raw in cases]
    for (rtype, _k, value, raw), got in zip(cases, probe(tmp_path, rows), strict=True):
        assert "error" in got or got["value"] != kafka_json(value)
        # and ours, told the record is legacy, reads the intended value
        assert (
            decode_record(rows[0][0] if rtype == 5 else rows[1][0], b"\x00\x00" + raw, legacy=True).value
            == value
        )


def _subscription(v: int) -> cps.ConsumerProtocolSubscription:
    """Non-default values in every field of version ``v`` (the others at their defaults)."""
    return cps.ConsumerProtocolSubscription(
        topics=["orders", "payments"],
        user_data=ASG,
        owned_partitions=[cps.TopicPartition("orders", [0, 3]), cps.TopicPartition("payments", [1])]
        if v >= 1
        else [],
        generation_id=23 if v >= 2 else -1,
        rack_id="rack-b" if v >= 3 else None,
    )


EMBEDDED = [
    *[("ConsumerProtocolSubscription", cps, _subscription(v), v) for v in range(4)],
    ("ConsumerProtocolSubscription", cps, cps.ConsumerProtocolSubscription(topics=["t"], user_data=None), 3),
    *[
        (
            "ConsumerProtocolAssignment",
            cpa,
            cpa.ConsumerProtocolAssignment(
                [cpa.TopicPartition("orders", [2, 1]), cpa.TopicPartition("x", [])], SUB
            ),
            v,
        )
        for v in range(4)
    ],  # fmt: skip
    ("ConsumerProtocolAssignment", cpa, cpa.ConsumerProtocolAssignment([], None), 0),
]


def test_the_consumer_embedded_protocol_is_kafkas(tmp_path):
    """The subscription and assignment bytes the coordinator reads and builds for classic members
    (and keeps in GroupMetadata records) are kafka-clients' ConsumerProtocol messages, every version."""
    rows = [
        (name, version.to_bytes(2, "big") + mod.ENCODERS[version](value))
        for name, mod, value, version in EMBEDDED
    ]
    for (name, mod, value, version), (_n, raw), got in zip(
        EMBEDDED, rows, probe(tmp_path, rows, ("embedded",)), strict=True
    ):
        assert "error" not in got, f"{name} v{version}: Kafka cannot read our bytes: {got['error']}"
        assert got["version"] == version
        assert_fields_match(got["value"], kafka_json(value), f"{name} v{version}")
        assert bytes.fromhex(got["value_hex"]) == raw, f"{name} v{version}"
        back, end = mod.DECODERS[version](raw, 2)
        assert back == value and end == len(raw)


def test_kafka_reads_every_record_the_coordinator_writes(tmp_path):
    """The records real operations write (random histories of classic and KIP-848 groups, commits,
    deletions, expiry: test_compaction_replay.py) are all read by Kafka's classes to the same bytes."""
    rows = [(e.key, e.value) for seed in range(3) for e in random_history(seed).log]
    types = {int.from_bytes(k[:2], "big") for k, _v in rows}
    assert types == set(RECORD_TYPES), types
    for (k, v), got in zip(rows, probe(tmp_path, rows), strict=True):
        assert "error" not in got, f"{k.hex()} {v and v.hex()}: {got['error']}"
        assert bytes.fromhex(got["key_hex"]) == k
        assert (v is None and got["value"] is None) or bytes.fromhex(got["value_hex"]) == v
