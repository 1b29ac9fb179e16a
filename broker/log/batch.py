"""Kafka record batches (magic v2): header parsing, validation and offset assignment, without parsing
the records inside.

Layout of the 61-byte header (big-endian)::

    0  baseOffset int64         23 lastOffsetDelta int32
    8  batchLength int32        27 baseTimestamp int64
    12 partitionLeaderEpoch     35 maxTimestamp int64
    16 magic int8               43 producerId int64
    17 crc uint32 (CRC-32C of   51 producerEpoch int16
       bytes 21..end)           53 baseSequence int32
    21 attributes int16         57 recordsCount int32; 61 the records

``batchLength`` counts the bytes after the length field itself (so a batch occupies
``12 + batchLength`` bytes). The CRC does not cover the base offset or the leader epoch, which is
why the broker can assign offsets by rewriting the first 8 bytes in place.
"""

from __future__ import annotations

from struct import Struct

from broker.log.crc import crc32c
from broker.slotted import Slotted

HEADER = Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49
_OFFSET = Struct(">q")
_LEN = Struct(">qi")
_MAXTS_ATTR = Struct(">h")
_EPOCH = Struct(">i")
_CRC = Struct(">I")
#: The partition leader epoch of a single node's batches (it is the only leader there has ever
#: been); on a simulated cluster the leader stamps its epoch (PartitionLog.leader_epoch).
LEADER_EPOCH = 0

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08  # 1 = LogAppendTime
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

NO_PRODUCER_ID = -1

#: the range of a Java long: Kafka's timestamps and offsets
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1


def java_long(x: int) -> int:
    """``x`` as Java's 64-bit arithmetic leaves it: wrapped around past a long's range."""
    if LONG_MIN <= x <= LONG_MAX:
        return x
    return ((x - LONG_MIN) % (1 << 64)) + LONG_MIN


def record_timestamp(base_timestamp: int, delta: int) -> int:
    """A record's timestamp as Kafka reads it: its batch's base timestamp plus its delta in a long
    (DefaultRecord.readFrom)."""
    return java_long(base_timestamp + delta)


class InvalidBatch(ValueError):
    """The bytes are not a valid v2 record batch. ``corrupt`` distinguishes CORRUPT_MESSAGE (bad CRC,
    bad length) from INVALID_RECORD (well-formed but not acceptable)."""

    def __init__(self, message: str, corrupt: bool = True):
        super().__init__(message)
        self.corrupt = corrupt


class BatchInfo(Slotted):
    """The header fields of one batch and where it sits in its buffer (not a dataclass: see
    broker.slotted)."""

    __slots__ = (
        "position",
        "size",
        "base_offset",
        "last_offset_delta",
        "attributes",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "records_count",
        "partition_leader_epoch",
    )

    def __init__(
        self,
        position: int,
        size: int,
        base_offset: int,
        last_offset_delta: int,
        attributes: int,
        base_timestamp: int,
        max_timestamp: int,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        records_count: int,
        partition_leader_epoch: int,
    ) -> None:
        self.position = position
        self.size = size  # whole batch, header included
        self.base_offset = base_offset
        self.last_offset_delta = last_offset_delta
        self.attributes = attributes
        self.base_timestamp = base_timestamp
        self.max_timestamp = max_timestamp
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.records_count = records_count
        self.partition_leader_epoch = partition_leader_epoch

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


def read_header(buf: bytes | memoryview, pos: int) -> BatchInfo:
    """Parse the header at ``pos`` (no CRC check); raises InvalidBatch if it cannot be a batch."""
    if len(buf) - pos < HEADER_SIZE:
        raise InvalidBatch(f"{len(buf) - pos} bytes at position {pos} are too few for a batch header")
    (
        base_offset,
        batch_length,
        leader_epoch,
        magic,
        _crc,
        attributes,
        last_offset_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) = HEADER.unpack_from(buf, pos)
    if magic != 2:
        raise InvalidBatch(f"record batch magic {magic} is not supported (only v2)", corrupt=magic > 2)
    if batch_length < MIN_BATCH_LENGTH:
        raise InvalidBatch(f"batch length {batch_length} is below the minimum {MIN_BATCH_LENGTH}")
    size = batch_length + LOG_OVERHEAD
    if size > len(buf) - pos:
        raise InvalidBatch(
            f"batch of {size} bytes at position {pos} runs past the end ({len(buf) - pos} left)"
        )
    return BatchInfo(
        pos,
        size,
        base_offset,
        last_offset_delta,
        attributes,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
        leader_epoch,
    )


def check_crc(buf: bytes | memoryview, info: BatchInfo) -> None:
    stored = _CRC.unpack_from(buf, info.position + 17)[0]
    actual = crc32c(memoryview(buf)[info.position + 21 : info.position + info.size])
    if stored != actual:
        raise InvalidBatch(
            f"CRC mismatch in the batch at position {info.position}: {stored:#x} != {actual:#x}"
        )


def iter_batches(buf: bytes | memoryview, verify_crc: bool = True) -> list[BatchInfo]:
    """Every batch in ``buf``, which must hold whole batches only."""
    out = []
    pos = 0
    end = len(buf)
    while pos < end:
        info = read_header(buf, pos)
        if verify_crc:
            check_crc(buf, info)
        out.append(info)
        pos += info.size
    return out


def validate_produce(buf: bytes | memoryview) -> list[BatchInfo]:
    """Validate the records of one partition in a Produce request, as Kafka does for v2 batches."""
    if len(buf) == 0:
        raise InvalidBatch("produce request carries no record batch", corrupt=False)
    batches = iter_batches(buf)
    for b in batches:
        if b.records_count <= 0:
            raise InvalidBatch(
                f"batch at position {b.position} holds {b.records_count} records", corrupt=False
            )
        if b.last_offset_delta != b.records_count - 1:
            raise InvalidBatch(
                f"batch at position {b.position}: lastOffsetDelta {b.last_offset_delta} does not match "
                f"{b.records_count} records",
                corrupt=False,
            )
        if b.is_control:
            raise InvalidBatch("clients may not write control batches", corrupt=False)
        if b.compression > 4:
            raise InvalidBatch(f"unknown compression codec {b.compression}", corrupt=False)
    return batches


def assign_offsets(
    buf: bytearray,
    batches: list[BatchInfo],
    first_offset: int,
    log_append_time: int | None = None,
    leader_epoch: int = LEADER_EPOCH,
) -> int:
    """Rewrite each batch's base offset and partition leader epoch (neither is under the CRC: the
    leader stamps its epoch, as Kafka's LogValidator does) and, for LogAppendTime topics, its
    timestamp type and max timestamp (recomputing the CRC). Returns the next offset after the last
    batch."""
    offset = first_offset
    for b in batches:
        offset = assign_offset(buf, b, offset, log_append_time, leader_epoch)
    return offset


def assign_offset(
    buf: bytearray, b: BatchInfo, offset: int, log_append_time: int | None, leader_epoch: int
) -> int:
    """``assign_offsets`` for one batch (a Produce request's): its base offset ``offset``; the next
    offset after it."""
    _OFFSET.pack_into(buf, b.position, offset)
    _EPOCH.pack_into(buf, b.position + 12, leader_epoch)
    b.base_offset = offset
    b.partition_leader_epoch = leader_epoch
    if log_append_time is not None:
        attrs = b.attributes | TIMESTAMP_TYPE_MASK
        _MAXTS_ATTR.pack_into(buf, b.position + 21, attrs)
        _OFFSET.pack_into(buf, b.position + 35, log_append_time)
        b.attributes = attrs
        b.max_timestamp = log_append_time
        crc = crc32c(memoryview(buf)[b.position + 21 : b.position + b.size])
        buf[b.position + 17 : b.position + 21] = crc.to_bytes(4, "big")
    return offset + b.last_offset_delta + 1


def batch_length_at(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """(base offset, total size) of the batch at ``pos`` from its first 12 bytes."""
    base, length = _LEN.unpack_from(buf, pos)
    return base, length + LOG_OVERHEAD
