"""Every coordinator record type survives key/value framing, the log batch, and decoding."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.coordinator.generated import RECORD_TYPES
from broker.coordinator.generated import consumer_group_current_member_assignment_value as cur
from broker.coordinator.generated import consumer_group_member_metadata_value as mem
from broker.coordinator.generated import consumer_group_partition_metadata_value as pmeta
from broker.coordinator.generated import consumer_group_target_assignment_member_value as tmem
from broker.coordinator.generated import group_metadata_value as gmv
from broker.coordinator.generated.offset_commit_key import OffsetCommitKey
from broker.coordinator.generated.offset_commit_value import OffsetCommitValue
from broker.coordinator.records import (
    _RECORD_HEADS,
    _ZIGZAG,
    OFFSET_COMMIT,
    CoordinatorRecord,
    OffsetCommitRecord,
    RecordError,
    decode_record,
    from_batches,
    to_batch,
)
from broker.coordinator.state import CommittedOffset, decode_committed
from broker.log.records import Record as LogRecord
from broker.log.records import _varint, build_batch
from broker.protocol.primitives import ZERO_UUID

from .context import CoordinatorContext

T1, T2 = uuid.UUID(int=7), uuid.uuid4()


def key(rtype: int, *values):
    cls = next(
        v
        for k, v in vars(RECORD_TYPES[rtype].key_codec()).items()
        if k.endswith("Key") and isinstance(v, type)
    )
    return cls(*values)


def value(rtype: int, **fields):
    mod = RECORD_TYPES[rtype].value_codec()
    cls = next(v for k, v in vars(mod).items() if k.endswith("Value") and isinstance(v, type))
    return cls(**fields)


SAMPLES = [
    CoordinatorRecord(
        1,
        key(1, "g", "t", 3),
        value(1, offset=42, leader_epoch=5, metadata="m", commit_timestamp=9, topic_id=T1),
    ),
    CoordinatorRecord(
        2,
        key(2, "g"),
        value(
            2,
            protocol_type="consumer",
            generation=4,
            protocol="range",
            leader="m1",
            current_state_timestamp=77,
            members=[gmv.MemberMetadata("m1", "i1", "c", "/h", 300, 45000, b"sub", b"asg")],
        ),
    ),
    CoordinatorRecord(3, key(3, "cg"), value(3, epoch=12)),
    CoordinatorRecord(
        4, key(4, "cg"), value(4, topics=[pmeta.TopicMetadata(T1, "t", 6), pmeta.TopicMetadata(T2, "u", 1)])
    ),
    CoordinatorRecord(
        5,
        key(5, "cg", "m1"),
        value(
            5,
            instance_id="i",
            rack_id=None,
            client_id="c",
            client_host="/h",
            subscribed_topic_names=["t", "u"],
            subscribed_topic_regex="a.*",
            server_assignor="uniform",
            rebalance_timeout_ms=300000,
        ),
    ),
    CoordinatorRecord(6, key(6, "cg"), value(6, assignment_epoch=12)),
    CoordinatorRecord(
        7, key(7, "cg", "m1"), value(7, topic_partitions=[tmem.TopicPartitions(T1, [0, 2, 4])])
    ),
    CoordinatorRecord(
        8,
        key(8, "cg", "m1"),
        value(
            8,
            member_epoch=12,
            previous_member_epoch=11,
            state=1,
            assigned_partitions=[cur.TopicPartitions(T1, [0, 2])],
            partitions_pending_revocation=[cur.TopicPartitions(T2, [0])],
        ),
    ),
]


def test_every_record_type_has_a_sample():
    assert sorted({r.type for r in SAMPLES}) == sorted(RECORD_TYPES)


@pytest.mark.parametrize("record", SAMPLES, ids=lambda r: RECORD_TYPES[r.type].name)
def test_record_round_trips_through_key_value_bytes(record):
    back = decode_record(record.key_bytes(), record.value_bytes())
    assert (back.type, back.key, back.value) == (record.type, record.key, record.value)
    tomb = CoordinatorRecord(record.type, record.key, None)
    assert decode_record(tomb.key_bytes(), tomb.value_bytes()).value is None


def test_records_round_trip_through_a_log_batch():
    decoded = from_batches(to_batch(SAMPLES, 1000))
    assert [(o, r.type, r.key, r.value) for o, _ts, r in decoded] == [
        (i, r.type, r.key, r.value) for i, r in enumerate(SAMPLES)
    ]


def test_unknown_type_and_version_are_refused():
    with pytest.raises(RecordError):
        decode_record(b"\x00\x63" + b"\x00\x01g", None)
    good = SAMPLES[2]
    with pytest.raises(RecordError):
        decode_record(good.key_bytes(), b"\x00\x09" + good.value_bytes()[2:])
    assert isinstance(mem.ConsumerGroupMemberMetadataValue().subscribed_topic_names, list)


@pytest.mark.parametrize("record", SAMPLES, ids=lambda r: RECORD_TYPES[r.type].name)
def test_a_truncated_record_is_a_record_error(record):
    key, value = record.key_bytes(), record.value_bytes()
    for cut in range(2, len(key)):
        with pytest.raises(RecordError):
            decode_record(key[:cut], value)
    for cut in range(2, len(value)):
        try:
            decode_record(key, value[:cut])
        except RecordError:
            continue
        # a prefix may be a complete record (trailing tagged fields are optional); never another error


@settings(max_examples=300, deadline=None)
@given(
    rtype=st.sampled_from(sorted(RECORD_TYPES)),
    key=st.binary(max_size=40),
    value=st.none() | st.binary(max_size=60),
)
def test_arbitrary_bytes_decode_or_raise_record_error(rtype, key, value):
    try:
        decode_record(rtype.to_bytes(2, "big") + key, value)
    except RecordError:
        pass


#: an OffsetCommit record as Apache Kafka 4.3.0 wrote it into __consumer_offsets (group "g", topic
#: "kc", partition 0, offset 5, no leader epoch, empty metadata): the topic id is tagged field 0
KAFKA_COMMIT_KEY = bytes.fromhex("000100016700026b6300000000")
KAFKA_COMMIT_VALUE = bytes.fromhex(
    "0004" "0000000000000005" "ffffffff" "01" "000001a20a7f4f15" "01" "00" "10" "374c4fab4a6942b0913b91ea827fb7e8"
)  # fmt: skip


def test_offset_commit_value_is_kafkas_byte_for_byte():
    rec = decode_record(KAFKA_COMMIT_KEY, KAFKA_COMMIT_VALUE)
    assert (rec.key.group, rec.key.topic, rec.key.partition) == ("g", "kc", 0)
    v = rec.value
    assert (v.offset, v.leader_epoch, v.metadata) == (5, -1, "")
    assert v.commit_timestamp == 0x1A20A7F4F15
    assert v.topic_id == uuid.UUID("374c4fab-4a69-42b0-913b-91ea827fb7e8")
    assert CoordinatorRecord(1, rec.key, v).value_bytes() == KAFKA_COMMIT_VALUE
    # without a topic id, Kafka leaves the tagged field out
    v.topic_id = uuid.UUID(int=0)
    assert CoordinatorRecord(1, rec.key, v).value_bytes() == KAFKA_COMMIT_VALUE[:23] + b"\x00"


@pytest.mark.parametrize("metadata", ["", "m", "x" * 300])
def test_offset_commits_in_the_earlier_layout_still_load(metadata):
    """Before it followed Kafka this broker wrote the topic id as a plain field; such data directories
    still load, and the record is written back in Kafka's layout."""
    rec = decode_record(KAFKA_COMMIT_KEY, KAFKA_COMMIT_VALUE)
    raw = metadata.encode()
    n = len(raw) + 1
    length = bytes([n]) if n < 0x80 else bytes([(n & 0x7F) | 0x80, n >> 7])
    old = (
        KAFKA_COMMIT_VALUE[:14]
        + length
        + raw
        + KAFKA_COMMIT_VALUE[15:23]
        + rec.value.topic_id.bytes
        + b"\x00"
    )
    back = decode_record(KAFKA_COMMIT_KEY, old).value
    assert (back.offset, back.leader_epoch, back.metadata, back.commit_timestamp, back.topic_id) == (
        5, -1, metadata, rec.value.commit_timestamp, rec.value.topic_id
    )  # fmt: skip
    rewritten = CoordinatorRecord(1, rec.key, back).value_bytes()
    assert rewritten == KAFKA_COMMIT_VALUE[:14] + length + raw + KAFKA_COMMIT_VALUE[15:]


@pytest.mark.parametrize(("version", "rebalance"), [(0, 30_000), (1, 120_000), (4, 120_000)])
def test_a_group_metadata_member_without_a_rebalance_timeout_gets_its_session_timeout(version, rebalance):
    """v0 GroupMetadataValue records (very old Kafka) have no rebalance timeout: Kafka reads it as -1
    and gives the member its session timeout; so does replay."""
    value = gmv.GroupMetadataValue(
        protocol_type="consumer", generation=1, protocol="range", leader="m1", current_state_timestamp=-1,
        members=[gmv.MemberMetadata("m1", None, "c", "/h", 120_000, 30_000, b"", b"")],
    )  # fmt: skip
    raw = version.to_bytes(2, "big") + RECORD_TYPES[2].value_codec().ENCODERS[version](value)
    rec = decode_record(CoordinatorRecord(2, key(2, "g"), None).key_bytes(), raw)
    assert rec.value.members[0].rebalance_timeout == (-1 if version == 0 else 120_000)
    c = CoordinatorContext()
    c.state.replay(rec, 0, 1)
    assert c.state.groups["g"].members["m1"].rebalance_timeout_ms == rebalance


def _generic_batch(records, now_ms, producer=None):
    """What ``to_batch`` must equal: the log's general batch builder over the records' key and value
    bytes (the generated codecs)."""
    recs = [LogRecord(i, 0, r.key_bytes(), r.value_bytes(), []) for i, r in enumerate(records)]
    if producer is None:
        return build_batch(recs, base_timestamp=now_ms)
    pid, epoch = producer
    return build_batch(
        recs,
        base_timestamp=now_ms,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=-1,
        transactional=True,
    )


_names = st.text(min_size=0, max_size=80)
_offset_values = st.builds(
    OffsetCommitValue,
    offset=st.integers(-(2**63), 2**63 - 1),
    leader_epoch=st.integers(-(2**31), 2**31 - 1),
    metadata=st.text(max_size=300),
    commit_timestamp=st.integers(-(2**63), 2**63 - 1),
    topic_id=st.sampled_from([ZERO_UUID, T1, T2]),
)
_offset_records = st.builds(
    CoordinatorRecord,
    st.just(OFFSET_COMMIT),
    st.builds(OffsetCommitKey, _names, _names, st.integers(-(2**31), 2**31 - 1)),
    st.none() | _offset_values,
)
_records = st.lists(_offset_records | st.sampled_from(SAMPLES), max_size=150)


@settings(max_examples=300, deadline=None)
@given(
    records=_records,
    now=st.integers(0, 2**62),
    producer=st.none() | st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**15 - 1)),
)
def test_to_batch_is_the_generic_batch_byte_for_byte(records, now, producer):
    assert to_batch(records, now, producer) == _generic_batch(records, now, producer)


def test_to_batchs_varint_tables_are_the_generic_varints():
    assert _ZIGZAG == tuple(_varint(n) for n in range(4096))
    assert _RECORD_HEADS == tuple(b"\x00\x00" + _varint(n) for n in range(4096))


def test_to_batch_of_one_request_shares_group_and_topic_but_not_across_them():
    tid = uuid.uuid4()
    records = [
        CoordinatorRecord(
            OFFSET_COMMIT, OffsetCommitKey(g, t, p), OffsetCommitValue(p, -1, "", 5, topic_id=tid)
        )
        for g, t in (("g", "t"), ("g", "u"), ("h", "u"), ("h", "u"), ("g", "t"))
        for p in range(3)
    ]
    records.append(CoordinatorRecord(OFFSET_COMMIT, OffsetCommitKey("é" * 40, "t", 1), None))
    long_key = OffsetCommitKey("g" * 5000, "t" * 300, 2)  # a record longer than the varint table
    records.append(CoordinatorRecord(OFFSET_COMMIT, long_key, OffsetCommitValue(7, -1, "", 5, topic_id=tid)))
    odd = OffsetCommitValue(1, 2, "m", 3, topic_id=T1, _unknown_tagged=[(5, b"xy")])  # preserved tags
    records.append(CoordinatorRecord(OFFSET_COMMIT, OffsetCommitKey("g", "t", 9), odd))
    assert to_batch(records, 77) == _generic_batch(records, 77)
    decoded = from_batches(to_batch(records, 77))
    assert [(r.key, r.value) for _o, _ts, r in decoded] == [(r.key, r.value) for r in records]


class _OtherRecord:
    """A record of another coordinator on the same runtime (the transaction coordinator's): only
    its key and value bytes."""

    def __init__(self, key: bytes, value: bytes | None):
        self.key, self.value = key, value

    def key_bytes(self) -> bytes:
        return self.key

    def value_bytes(self) -> bytes | None:
        return self.value


def test_to_batch_takes_any_record_with_key_and_value_bytes():
    records = [_OtherRecord(b"\x00\x00tx", b"\x00\x01v"), SAMPLES[0], _OtherRecord(b"\x00\x01k", None)]
    assert to_batch(records, 5) == _generic_batch(records, 5)


_commit_records = st.builds(
    OffsetCommitRecord,
    _names,
    _names,
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.text(max_size=300),
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([ZERO_UUID, T1, T2]),
)


@settings(max_examples=300, deadline=None)
@given(records=st.lists(_commit_records | _offset_records | st.sampled_from(SAMPLES), max_size=150))
def test_offset_commit_records_batch_byte_for_byte_and_keep_their_value_bytes(records):
    """What OffsetCommit writes (OffsetCommitRecord) encodes as its key and value structs would, and
    the value bytes it keeps for replay are those of the generated codec; replayed, they decode to
    the committed offset the structs give."""
    assert to_batch(records, 5) == _generic_batch(records, 5)
    for r in records:
        if type(r) is OffsetCommitRecord:
            assert r.raw == r.value_bytes()
            v = r.value
            assert decode_committed(r.raw) == CommittedOffset(
                v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.topic_id
            )
            assert decode_record(r.key_bytes(), r.raw) == CoordinatorRecord(OFFSET_COMMIT, r.key, r.value)


def test_replayed_commits_are_kept_packed_and_read_as_committed_offsets():
    c = CoordinatorContext()
    live = c.state
    records = [OffsetCommitRecord("g", "t", p, 10 + p, 3, "m" if p == 2 else "", 99, T2) for p in range(4)]
    to_batch(records, 99)
    for r in records:
        live.replay(r, 0, 99)
    parts = live.offsets["g"].by_topic["t"]
    assert [type(parts.raw[p]) for p in range(4)] == [bytes] * 4
    assert parts.get(2) == CommittedOffset(12, 3, "m", 99, T2)
    assert type(parts.raw[2]) is CommittedOffset and type(parts.raw[0]) is bytes  # decoded once read
    assert parts == {p: CommittedOffset(10 + p, 3, "m" if p == 2 else "", 99, T2) for p in range(4)}
    assert sorted(parts) == [0, 1, 2, 3] and 3 in parts and len(parts) == 4
    assert parts.pop(0) == CommittedOffset(10, 3, "", 99, T2) and 0 not in parts
    # the same records replayed from their decoded form (no kept bytes) give equal state
    other = CoordinatorContext().state
    for r in records:
        other.replay(CoordinatorRecord(OFFSET_COMMIT, r.key, r.value), 0, 99)
    other.offsets["g"].by_topic["t"].pop(0)
    assert other.offsets["g"].by_topic == live.offsets["g"].by_topic
