"""Coordinator records: what the coordinator writes to its log and replays at start-up.

A record is ``(type id, key struct, value struct or None)``; ``None`` is a tombstone. In the log a
record is a Kafka record whose key is ``int16 type id + key`` and whose value is ``int16 value
version + value`` (empty for a tombstone), the layout of Kafka's ``__consumer_offsets``. The type ids
and codecs come from the generated table in ``broker/coordinator/generated``.
"""

from __future__ import annotations

from dataclasses import dataclass
from struct import Struct
from typing import Any

from broker.coordinator.generated import BY_NAME, RECORD_TYPES
from broker.coordinator.generated import consumer_group_member_metadata_value as _mem_v
from broker.coordinator.generated import consumer_group_partition_metadata_value as _part_v
from broker.coordinator.generated import legacy_consumer_group_member_metadata_value as _legacy_mem_v
from broker.coordinator.generated import legacy_consumer_group_partition_metadata_value as _legacy_part_v
from broker.coordinator.generated.offset_commit_value import OffsetCommitValue
from broker.log.records import Record as LogRecord
from broker.log.records import build_batch, iter_records
from broker.protocol.primitives import DecodeError, read_uvarint, to_uuid

_I16 = Struct(">h")

#: type id -> (key encoder, value version, value encoders, key decoder, value decoders), resolved once
_CODECS = {
    rid: (
        rt.key_codec().ENCODERS[0],
        rt.value_version,
        rt.value_codec().ENCODERS,
        rt.key_codec().DECODERS[0],
        rt.value_codec().DECODERS,
    )
    for rid, rt in RECORD_TYPES.items()
}

OFFSET_COMMIT = BY_NAME["OffsetCommit"].id
GROUP_METADATA = BY_NAME["GroupMetadata"].id
_PARTITION_METADATA = BY_NAME["ConsumerGroupPartitionMetadata"].id
_MEMBER_METADATA = BY_NAME["ConsumerGroupMemberMetadata"].id


@dataclass(slots=True)
class CoordinatorRecord:
    type: int
    key: Any
    value: Any | None  # None: tombstone

    def key_bytes(self) -> bytes:
        return _I16.pack(self.type) + _CODECS[self.type][0](self.key)

    def value_bytes(self) -> bytes | None:
        if self.value is None:
            return None
        _ke, version, encoders, _kd, _vd = _CODECS[self.type]
        return _I16.pack(version) + encoders[version](self.value)


class RecordError(ValueError):
    """A coordinator record that cannot be decoded (unknown type or version, bad bytes)."""


def decode_record(key: bytes, value: bytes | None, legacy: bool = False) -> CoordinatorRecord:
    """One record of the coordinator log. ``legacy``: the record lies below the data directory's
    layout offset (broker/coordinator/layout.py), so its ConsumerGroupMemberMetadata and
    ConsumerGroupPartitionMetadata values have the layout earlier pykbroker versions wrote."""
    if key is None or len(key) < 2:
        raise RecordError("coordinator record without a key")
    rtype = _I16.unpack_from(key, 0)[0]
    codecs = _CODECS.get(rtype)
    if codecs is None:
        raise RecordError(f"unknown coordinator record type {rtype}")
    _ke, _vv, _ve, key_decoder, decoders = codecs
    k, _ = key_decoder(bytes(key), 2)
    if value is None or len(value) == 0:
        return CoordinatorRecord(rtype, k, None)
    version = _I16.unpack_from(value, 0)[0]
    if not 0 <= version < len(decoders) or decoders[version] is None:
        raise RecordError(f"{RECORD_TYPES[rtype].name} value version {version} is not known")
    if rtype == OFFSET_COMMIT and version == 4:
        legacy = _legacy_offset_commit_v4(value)
        if legacy is not None:
            return CoordinatorRecord(rtype, k, legacy)
    if legacy and rtype in _LEGACY_DECODERS:
        return CoordinatorRecord(rtype, k, _LEGACY_DECODERS[rtype](bytes(value)))
    v, _ = decoders[version](bytes(value), 2)
    return CoordinatorRecord(rtype, k, v)


def _legacy_member_metadata(value: bytes) -> Any:
    old, _ = _legacy_mem_v.decode_v0(value, 2)
    classic = old.classic_member_metadata
    return _mem_v.ConsumerGroupMemberMetadataValue(
        instance_id=old.instance_id,
        rack_id=old.rack_id,
        client_id=old.client_id,
        client_host=old.client_host,
        subscribed_topic_names=old.subscribed_topic_names,
        subscribed_topic_regex=old.subscribed_topic_regex,
        rebalance_timeout_ms=old.rebalance_timeout_ms,
        server_assignor=old.server_assignor,
        classic_member_metadata=None
        if classic is None
        else _mem_v.ClassicMemberMetadata(
            session_timeout_ms=classic.session_timeout_ms,
            supported_protocols=[
                _mem_v.ClassicProtocol(p.name, p.metadata) for p in classic.supported_protocols
            ],
        ),
    )


def _legacy_partition_metadata(value: bytes) -> Any:
    old, _ = _legacy_part_v.decode_v0(value, 2)
    return _part_v.ConsumerGroupPartitionMetadataValue(
        [_part_v.TopicMetadata(t.topic_id, t.topic_name, t.num_partitions, []) for t in old.topics]
    )


#: type id -> decoder of a whole value (version prefix included) in an earlier pykbroker's layout
_LEGACY_DECODERS = {
    _MEMBER_METADATA: _legacy_member_metadata,
    _PARTITION_METADATA: _legacy_partition_metadata,
}


_LEGACY_V4_TAIL = Struct(">q16s")


def _legacy_offset_commit_v4(value: bytes) -> Any:
    """An OffsetCommitValue v4 as this broker wrote it before it followed Kafka (the topic id a plain
    field after the commit timestamp, then no tagged fields): offset, leader epoch, compact
    metadata, commit timestamp, topic id, 0. None for any other layout. Kafka's layout (the topic
    id as tagged field 0, or absent) is never this long for the same metadata, so data directories
    written before the change still load."""
    if len(value) < 40:
        return None
    try:
        n, start = read_uvarint(value, 14)
    except (DecodeError, IndexError):
        return None
    end = start + n - 1
    if n == 0 or len(value) != end + 25 or value[-1] != 0:
        return None
    offset, epoch = Struct(">qi").unpack_from(value, 2)
    try:
        metadata = value[start:end].decode()
    except UnicodeDecodeError:
        return None
    ts, raw_id = _LEGACY_V4_TAIL.unpack_from(value, end)
    return OffsetCommitValue(offset=offset, leader_epoch=epoch, metadata=metadata, commit_timestamp=ts,
                             topic_id=to_uuid(raw_id))  # fmt: skip


def to_batch(records: list[CoordinatorRecord], now_ms: int, producer: tuple[int, int] | None = None) -> bytes:
    """One uncompressed record batch holding ``records`` (offsets are assigned by the log); with
    ``producer`` (id, epoch), that producer's transactional batch, as Kafka writes TxnOffsetCommit."""
    if producer is None:
        return build_batch(
            [LogRecord(i, 0, r.key_bytes(), r.value_bytes(), []) for i, r in enumerate(records)],
            base_timestamp=now_ms,
        )
    return build_batch(
        [LogRecord(i, 0, r.key_bytes(), r.value_bytes(), []) for i, r in enumerate(records)],
        base_timestamp=now_ms,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=-1,
        transactional=True,
    )


def from_batches(data: bytes) -> list[tuple[int, int, CoordinatorRecord]]:
    """(offset, timestamp, record) for every record in ``data`` (whole batches)."""
    return [
        (off, ts, decode_record(k, v))
        for off, ts, k, v, _h, info in iter_records(data)
        if not info.is_control
    ]
