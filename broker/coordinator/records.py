"""Coordinator records: what the coordinator writes to its log and replays at start-up.

A record is ``(type id, key struct, value struct or None)``; ``None`` is a tombstone. In the log a
record is a Kafka record whose key is ``int16 type id + key`` and whose value is ``int16 value
version + value`` (empty for a tombstone), the layout of Kafka's ``__consumer_offsets``. The type ids
and codecs come from the generated table in ``broker/coordinator/generated``.
"""

from __future__ import annotations

from dataclasses import dataclass
from struct import Struct
from struct import error as StructError
from typing import Any
from uuid import UUID

from broker import native
from broker.coordinator.generated import BY_NAME, RECORD_TYPES
from broker.coordinator.generated import consumer_group_member_metadata_value as _mem_v
from broker.coordinator.generated import consumer_group_partition_metadata_value as _part_v
from broker.coordinator.generated import legacy_consumer_group_member_metadata_value as _legacy_mem_v
from broker.coordinator.generated import legacy_consumer_group_partition_metadata_value as _legacy_part_v
from broker.coordinator.generated.offset_commit_key import OffsetCommitKey
from broker.coordinator.generated.offset_commit_value import OffsetCommitValue
from broker.log.batch import HEADER, HEADER_SIZE, LOG_OVERHEAD, TRANSACTIONAL_MASK
from broker.log.crc import crc32c
from broker.log.records import _varint, iter_records
from broker.protocol.primitives import UV as _UV
from broker.protocol.primitives import ZERO_UUID, DecodeError, read_uvarint, to_uuid, uvarint

try:
    from ._replay import commit_records as _commit_records
except ImportError:  # not built (no C compiler at install): to_batch encodes every record in Python
    _commit_records = None

_I16 = Struct(">h")
_I32 = Struct(">i")
_I64 = Struct(">q")

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

# to_batch's direct encoding of OffsetCommit records (the generated codecs' layout, checked by
# tests/coordinator/test_records_codec.py): the key's type id; value v4's version, offset and leader
# epoch; its tagged fields, none or the topic id (count 1, tag 0, size 16); a record's attributes and
# timestamp delta (both 0), a null value, an empty header list
_OFFSET_COMMIT_TYPE = _I16.pack(OFFSET_COMMIT)
_OFFSET_VALUE_V4 = _CODECS[OFFSET_COMMIT][1] == 4
_V4_HEAD = Struct(">hqi")
_NO_TAGS = b"\x00"
_TOPIC_ID_TAG = b"\x01\x00\x10"
_ATTR_TS0 = b"\x00\x00"
_NULL = b"\x01"
_NO_HEADERS = b"\x00"
#: the common OffsetCommit record from its key's partition field on: partition, value length 42
#: (varint 0x54), value v4 with empty metadata (version, offset, leader epoch, length 0 + 1, commit
#: timestamp, the topic id as tagged field 0), no headers
_COMMON_TAIL = Struct(">iBhqiBq3s16sB")
#: an OffsetCommitValue v4 with empty metadata and a topic id, and its length's varint (42)
_EMPTY_V4 = Struct(">hqiBq3s16s")
_VALUE_42 = b"\x54"
#: (group, topic) -> an OffsetCommit key without its partition, and that with its length's varint
_KEY_HEADS: dict[tuple[str, str], tuple[bytes, bytes]] = {}


def _key_heads(group: str, topic: str) -> tuple[bytes, bytes]:
    heads = _KEY_HEADS.get((group, topic))
    if heads is None:
        g, t = group.encode(), topic.encode()
        prefix = _OFFSET_COMMIT_TYPE + _I16.pack(len(g)) + g + _I16.pack(len(t)) + t
        heads = (prefix, _varint(len(prefix) + 4) + prefix)
        if len(_KEY_HEADS) >= 65536:  # bounded: a cache of the groups and topics committing now
            _KEY_HEADS.clear()
        _KEY_HEADS[(group, topic)] = heads
    return heads


#: a batch header (broker/log/batch.py HEADER) up to its CRC, and after it
_HEADER_HEAD = Struct(">qiibI")
_HEADER_TAIL = Struct(">hiqqqhii")
assert _HEADER_HEAD.size + _HEADER_TAIL.size == HEADER.size == HEADER_SIZE

#: the varint of every value below 4096 (record lengths and offset deltas): zigzag 2n, one byte below
#: 64, else its low seven bits with the continuation bit and then n >> 6; built from that layout, not
#: by 4096 calls of _varint (1 ms less at every start; tests/coordinator/test_records_codec.py
#: compares the two)
_ZIGZAG = tuple(
    [bytes((z,)) for z in range(0, 128, 2)]
    + [bytes((lo, hi)) for hi in range(1, 64) for lo in range(0x80, 0x100, 2)]
)
#: a record's attributes and timestamp delta (0) and its offset delta, for every delta below 4096
_RECORD_HEADS = tuple(_ATTR_TS0 + z for z in _ZIGZAG)
assert _COMMON_TAIL.size == 48


@dataclass(slots=True)
class CoordinatorRecord:
    """A coordinator log record: its type id, key and value structs (value None: a tombstone)."""

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


class OffsetCommitRecord:
    """One OffsetCommit record as OffsetCommit writes it: the key's and the value's fields in one
    object (a CoordinatorRecord would take three per committed partition). ``key`` and ``value``
    build the generated structs on demand, so it reads like a CoordinatorRecord; ``to_batch``
    encodes it directly and leaves the value's bytes in ``raw``, which replay keeps as the
    committed offset (state.py: decoded on first read)."""

    __slots__ = ("group", "topic", "partition", "offset", "leader_epoch", "metadata", "commit_timestamp")
    __slots__ += ("topic_id", "raw")
    type = OFFSET_COMMIT

    def __init__(
        self,
        group: str,
        topic: str,
        partition: int,
        offset: int,
        leader_epoch: int,
        metadata: str,
        commit_timestamp: int,
        topic_id: UUID,
    ) -> None:
        self.group = group
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.leader_epoch = leader_epoch
        self.metadata = metadata
        self.commit_timestamp = commit_timestamp
        self.topic_id = topic_id
        #: the value's bytes (version included) once ``to_batch`` has encoded them
        self.raw: bytes | None = None

    @property
    def key(self) -> OffsetCommitKey:
        return OffsetCommitKey(self.group, self.topic, self.partition)

    @property
    def value(self) -> OffsetCommitValue:
        return OffsetCommitValue(self.offset, self.leader_epoch, self.metadata, self.commit_timestamp, -1,
                                 self.topic_id)  # fmt: skip

    def key_bytes(self) -> bytes:
        return CoordinatorRecord(OFFSET_COMMIT, self.key, None).key_bytes()

    def value_bytes(self) -> bytes:
        return CoordinatorRecord(OFFSET_COMMIT, None, self.value).value_bytes()  # type: ignore[return-value]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (OffsetCommitRecord, CoordinatorRecord)):
            return (other.type, other.key, other.value) == (OFFSET_COMMIT, self.key, self.value)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"OffsetCommitRecord({self.key!r}, {self.value!r})"


class RecordError(ValueError):
    """A coordinator record that cannot be decoded (unknown type or version, bad bytes)."""


def decode_record(key: bytes, value: bytes | None, legacy: bool = False) -> CoordinatorRecord:
    """One record of the coordinator log. ``legacy``: the record lies below the data directory's
    layout offset (broker/coordinator/layout.py), so its ConsumerGroupMemberMetadata and
    ConsumerGroupPartitionMetadata values have the layout earlier pykbroker versions wrote.

    Raises RecordError for any record it cannot decode, truncated or malformed ones included."""
    try:
        return _decode_record(key, value, legacy)
    except (DecodeError, StructError, IndexError, UnicodeDecodeError) as e:
        raise RecordError(f"malformed coordinator record: {e}") from e


def _decode_record(key: bytes, value: bytes | None, legacy: bool) -> CoordinatorRecord:
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


#: ``commit_records(records, cls, uuid_cls) -> (section, n)``: ``to_batch``'s encoding of the leading
#: common OffsetCommit records, compiled (broker/coordinator/_replay.c); None when the extension is
#: not built or ``PYKBROKER_NATIVE=0`` (tests/coordinator/test_records_native.py: the same bytes)
native_commit_records = native.compiled(_commit_records)


def to_batch(records: list[Any], now_ms: int, producer: tuple[int, int] | None = None) -> bytes:
    """One uncompressed record batch holding ``records`` (offsets are assigned by the log); with
    ``producer`` (id, epoch), that producer's transactional batch, as Kafka writes TxnOffsetCommit.
    A record is a CoordinatorRecord or anything with ``key_bytes()`` and ``value_bytes()`` (the
    transaction coordinator's records, broker/txn/records.py, go through the same runtime).

    The same bytes as ``build_batch`` of ``key_bytes()`` / ``value_bytes()`` records with offset
    deltas 0.. and timestamp delta 0 (tests/coordinator/test_records_codec.py compares them), built
    here without per-record ``Record`` objects: an OffsetCommit record (nearly every record the
    coordinator writes) is encoded from its fields directly, its key's group and topic once per
    batch."""
    out: list[bytes] = []
    w = out.append
    zv = _ZIGZAG
    heads = _RECORD_HEADS
    # the group and topic of the key last encoded (None: none yet), its key's bytes without the
    # partition, those with the key length's varint, and that plus a common record's tail's length
    last_group: str | None = None
    last_topic: str | None = None
    prefix = key_head = b""
    key_tail_len = 0
    last_tid: Any = None
    tid_bytes = b""
    tid_zero = True
    pack_tail = _COMMON_TAIL.pack
    start = 0
    if native_commit_records is not None and type(records) is list and records:
        # the leading common OffsetCommit records (usually all of them), compiled: the same bytes
        section, start = native_commit_records(records, OffsetCommitRecord, UUID)
        w(section)
    for i, r in enumerate(records if not start else records[start:], start):
        value: bytes | None
        if type(r) is OffsetCommitRecord:
            if r.group != last_group or r.topic != last_topic:
                last_group, last_topic = r.group, r.topic
                prefix, key_head = _key_heads(last_group, last_topic)
                key_tail_len = len(key_head) + 48
            tid = r.topic_id
            if tid is not last_tid:
                last_tid, tid_bytes, tid_zero = tid, tid.bytes, tid == ZERO_UUID
            if r.metadata == "" and not tid_zero:
                # the common record: from its key's partition on in one pack, whose value part is
                # kept for replay; its length known without joining it first
                tail = pack_tail(r.partition, 0x54, 4, r.offset, r.leader_epoch, 1, r.commit_timestamp,
                                 _TOPIC_ID_TAG, tid_bytes, 0)  # fmt: skip
                r.raw = tail[5:47]
                head = heads[i] if i < 4096 else _ATTR_TS0 + _varint(i)
                n = len(head) + key_tail_len
                out += (zv[n] if n < 4096 else _varint(n), head, key_head, tail)
                continue
            meta = r.metadata.encode()
            n = len(meta) + 1
            value = r.raw = b"".join(
                (
                    _V4_HEAD.pack(4, r.offset, r.leader_epoch),
                    _UV[n] if n < 128 else uvarint(n),
                    meta,
                    _I64.pack(r.commit_timestamp),
                    _NO_TAGS if tid_zero else _TOPIC_ID_TAG + tid_bytes,
                )
            )
            key = prefix + _I32.pack(r.partition)
        elif type(r) is CoordinatorRecord and r.type == OFFSET_COMMIT:
            k = r.key
            if k.group != last_group or k.topic != last_topic:
                last_group, last_topic = k.group, k.topic
                g, t = k.group.encode(), k.topic.encode()
                prefix = _OFFSET_COMMIT_TYPE + _I16.pack(len(g)) + g + _I16.pack(len(t)) + t
                key_head = _varint(len(prefix) + 4) + prefix
                key_tail_len = len(key_head) + 48
            v = r.value
            if v is not None and _OFFSET_VALUE_V4 and not v._unknown_tagged and type(v.topic_id) is UUID:
                tid = v.topic_id
                if tid is not last_tid:  # UUID.__eq__ and .bytes are Python code: once per batch
                    last_tid, tid_bytes, tid_zero = tid, tid.bytes, tid == ZERO_UUID
                if v.metadata == "" and not tid_zero and i < 64:
                    # the common record, from its key's partition field on in one pack
                    tail = _COMMON_TAIL.pack(
                        k.partition,
                        0x54,
                        4,
                        v.offset,
                        v.leader_epoch,
                        1,
                        v.commit_timestamp,
                        _TOPIC_ID_TAG,
                        tid_bytes,
                        0,
                    )
                    body = b"".join((_ATTR_TS0, zv[i], key_head, tail))
                    n = len(body)
                    w(zv[n] if n < 4096 else _varint(n))
                    w(body)
                    continue
                meta = v.metadata.encode()
                n = len(meta) + 1
                value = b"".join(
                    (
                        _V4_HEAD.pack(4, v.offset, v.leader_epoch),
                        _UV[n] if n < 128 else uvarint(n),
                        meta,
                        _I64.pack(v.commit_timestamp),
                        _NO_TAGS if tid_zero else _TOPIC_ID_TAG + tid_bytes,
                    )
                )
            else:
                value = None if v is None else r.value_bytes()
            key = prefix + _I32.pack(k.partition)
        else:
            key = r.key_bytes()
            value = r.value_bytes()
        # the record: attributes 0, timestamp delta 0, offset delta i, key, value, no headers
        body = b"".join(
            (
                _ATTR_TS0,
                _varint(i),
                _varint(len(key)),
                key,
                _NULL if value is None else _varint(len(value)),
                b"" if value is None else value,
                _NO_HEADERS,
            )
        )
        w(_varint(len(body)))
        w(body)
    section = b"".join(out)
    count = len(records)
    if producer is None:
        attributes, pid, epoch = 0, -1, -1
    else:
        attributes, (pid, epoch) = TRANSACTIONAL_MASK, producer
    # the header after the CRC, the CRC over it and the records, then the header's start: one join
    tail = _HEADER_TAIL.pack(attributes, max(count - 1, 0), now_ms, now_ms, pid, epoch, -1, count)
    crc = crc32c(section, crc32c(tail))
    return b"".join(
        (_HEADER_HEAD.pack(0, HEADER_SIZE - LOG_OVERHEAD + len(section), -1, 2, crc), tail, section)
    )


def from_batches(data: bytes) -> list[tuple[int, int, CoordinatorRecord]]:
    """(offset, timestamp, record) for every record in ``data`` (whole batches)."""
    return [
        (off, ts, decode_record(k, v))
        for off, ts, k, v, _h, info in iter_records(data)
        if not info.is_control
    ]
