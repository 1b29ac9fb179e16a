"""The on-disk formats of a data directory, declared with construct: Kafka's record batch (magic 2),
record and header, control records, the coordinator's record keys and values (Kafka's
``__consumer_offsets`` layout) and this broker's ``.index`` files.

These declarations are written from Kafka's format description, not from the broker's codecs, so
that ``pykbroker dump`` is an independent reading; tests/dump cross-checks the two.
"""

from __future__ import annotations

from construct import (
    Array,
    Bytes,
    Const,
    FocusedSeq,
    GreedyBytes,
    GreedyRange,
    If,
    Int8sb,
    Int16sb,
    Int32sb,
    Int32ub,
    Int64sb,
    Prefixed,
    PrefixedArray,
    StringEncoded,
    Struct,
    Switch,
    VarInt,
    ZigZag,
    this,
)

# -------------------------------------------------------------------------------- record batch v2

#: bytes of the batch after its length field that precede the records
BATCH_HEADER_AFTER_LENGTH = 49

RecordBatch = Struct(
    "base_offset" / Int64sb,
    "batch_length" / Int32sb,
    "partition_leader_epoch" / Int32sb,
    "magic" / Const(2, Int8sb),
    "crc" / Int32ub,  # CRC-32C of everything from attributes to the end
    "attributes" / Int16sb,  # bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control
    "last_offset_delta" / Int32sb,
    "base_timestamp" / Int64sb,
    "max_timestamp" / Int64sb,
    "producer_id" / Int64sb,
    "producer_epoch" / Int16sb,
    "base_sequence" / Int32sb,
    "records_count" / Int32sb,
    "records_data" / Bytes(this.batch_length - BATCH_HEADER_AFTER_LENGTH),  # compressed when codec != 0
)

#: the batches of a segment file, one after another
Segment = GreedyRange(RecordBatch)

#: zigzag-varint length, -1 for null, then the bytes
VarBytes = FocusedSeq("data", "length" / ZigZag, "data" / If(this.length >= 0, Bytes(this.length)))
VarString = FocusedSeq(
    "data", "length" / ZigZag, "data" / If(this.length >= 0, StringEncoded(Bytes(this.length), "utf8"))
)

Header = Struct("key" / VarString, "value" / VarBytes)

Record = Prefixed(
    ZigZag,
    Struct(
        "attributes" / Int8sb,
        "timestamp_delta" / ZigZag,
        "offset_delta" / ZigZag,
        "key" / VarBytes,
        "value" / VarBytes,
        "headers" / PrefixedArray(ZigZag, Header),
    ),
)


def records_of(count: int) -> Array:
    return Array(count, Record)


#: the key and value of a record in a control batch
ControlKey = Struct("version" / Int16sb, "type" / Int16sb)  # type 0 ABORT, 1 COMMIT
ControlValue = Struct("version" / Int16sb, "coordinator_epoch" / Int32sb)
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}

# -------------------------------------------------------------------------------- Kafka primitives

String = FocusedSeq("s", "n" / Int16sb, "s" / StringEncoded(Bytes(this.n), "utf8"))
NullableString = FocusedSeq("s", "n" / Int16sb, "s" / If(this.n >= 0, StringEncoded(Bytes(this.n), "utf8")))
KBytes = FocusedSeq("b", "n" / Int32sb, "b" / If(this.n >= 0, Bytes(this.n)))
# flexible versions: unsigned varint of length + 1 (0: null)
CompactString = FocusedSeq("s", "n" / VarInt, "s" / If(this.n > 0, StringEncoded(Bytes(this.n - 1), "utf8")))
CompactBytes = FocusedSeq("b", "n" / VarInt, "b" / If(this.n > 0, Bytes(this.n - 1)))
TaggedFields = PrefixedArray(VarInt, Struct("tag" / VarInt, "data" / Prefixed(VarInt, GreedyBytes)))


def CompactArray(element):  # noqa: N802 - named as a construct class
    return FocusedSeq("items", "n" / VarInt, "items" / If(this.n > 0, Array(this.n - 1, element)))


# -------------------------------------------------------------------------------- coordinator records

OffsetCommitKey = Struct("group" / String, "topic" / String, "partition" / Int32sb)
GroupMetadataKey = Struct("group" / String)
#: keys of the KIP-848 record types 3-8: the group id, and the member id for the per-member ones
GroupKey = Struct("group" / String)
GroupMemberKey = Struct("group" / String, "member_id" / String)


def _offset_commit_value(v: int) -> Struct:
    flexible = v >= 4
    fields = ["offset" / Int64sb]
    if v >= 3:
        fields.append("leader_epoch" / Int32sb)
    fields.append("metadata" / (CompactString if flexible else String))
    fields.append("commit_timestamp" / Int64sb)
    if v == 1:
        fields.append("expire_timestamp" / Int64sb)
    if flexible:
        fields.append("tagged_fields" / TaggedFields)  # tag 0: the topic id (16 bytes)
    return Struct(*fields)


def _member(v: int) -> Struct:
    flexible = v >= 4
    s, ns, b = (CompactString, CompactString, CompactBytes) if flexible else (String, NullableString, KBytes)
    fields = ["member_id" / s]
    if v >= 3:
        fields.append("group_instance_id" / ns)
    fields += ["client_id" / s, "client_host" / s]
    if v >= 1:
        fields.append("rebalance_timeout" / Int32sb)
    fields += ["session_timeout" / Int32sb, "subscription" / b, "assignment" / b]
    if flexible:
        fields.append("tagged_fields" / TaggedFields)
    return Struct(*fields)


def _group_metadata_value(v: int) -> Struct:
    flexible = v >= 4
    s, ns = (CompactString, CompactString) if flexible else (String, NullableString)
    fields = ["protocol_type" / s, "generation" / Int32sb, "protocol" / ns, "leader" / ns]
    if v >= 2:
        fields.append("current_state_timestamp" / Int64sb)
    fields.append("members" / (CompactArray(_member(v)) if flexible else PrefixedArray(Int32sb, _member(v))))
    if flexible:
        fields.append("tagged_fields" / TaggedFields)
    return Struct(*fields)


OFFSET_COMMIT_TYPES = (0, 1)
GROUP_METADATA_TYPE = 2

#: key of a coordinator record: int16 record type, then that type's key
CoordinatorKey = Struct(
    "type" / Int16sb,
    "key"
    / Switch(
        this.type,
        {
            0: OffsetCommitKey,
            1: OffsetCommitKey,
            2: GroupMetadataKey,
            3: GroupKey,
            4: GroupKey,
            5: GroupMemberKey,
            6: GroupKey,
            7: GroupMemberKey,
            8: GroupMemberKey,
        },
        default=GreedyBytes,
    ),
)


def coordinator_value(record_type: int) -> Struct | None:
    """The value declaration of a record type (``None``: not declared here, the KIP-848 values,
    shown as bytes)."""
    if record_type in OFFSET_COMMIT_TYPES:
        cases = {v: _offset_commit_value(v) for v in range(5)}
    elif record_type == GROUP_METADATA_TYPE:
        cases = {v: _group_metadata_value(v) for v in range(5)}
    else:
        return None
    return Struct("version" / Int16sb, "value" / Switch(this.version, cases))


#: record type -> name (Kafka's numbering)
COORDINATOR_TYPES = {
    0: "OffsetCommit (v0 key)",
    1: "OffsetCommit",
    2: "GroupMetadata",
    3: "ConsumerGroupMetadata",
    4: "ConsumerGroupPartitionMetadata",
    5: "ConsumerGroupMemberMetadata",
    6: "ConsumerGroupTargetAssignmentMetadata",
    7: "ConsumerGroupTargetAssignmentMember",
    8: "ConsumerGroupCurrentMemberAssignment",
}

# -------------------------------------------------------------------------------- this broker's files

#: ``<base offset>.index``: the log size it matches, the next offset and max timestamp, then sparse
#: (offset, file position) entries
OffsetIndex = Struct(
    "log_size" / Int64sb,
    "next_offset" / Int64sb,
    "max_timestamp" / Int64sb,
    "entries" / GreedyRange(Struct("offset" / Int64sb, "position" / Int64sb)),
)
