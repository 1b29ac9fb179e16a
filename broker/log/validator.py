"""What Kafka's LogValidator does to a client's batch after its records were checked
(``streaming.validate_records``) and before offsets are assigned: timestamp validation (KIP-937),
keys on compacted topics, and broker-side recompression to the topic's ``compression.type``.

Keys: a topic whose cleanup.policy includes ``compact`` refuses records without a key
(INVALID_RECORD, one record error each, Kafka's texts).

Timestamps: on a CreateTime topic every record whose timestamp is not -1 must lie within
[now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]; a batch that claims
LogAppendTime is refused on a LogAppendTime topic (and on a CreateTime topic when its max timestamp
is -1). Errors are INVALID_TIMESTAMP with one record error per offending record, Kafka's texts.
The batch header's max timestamp is set to the largest record timestamp, as Kafka sets it.

Recompression, exactly when Kafka rebuilds a batch (``validateMessagesAndAssignOffsetsCompressed``):
when the topic's codec (anything but ``producer``) differs from the batch's. The rebuilt batch keeps
the records (keys, values, headers, timestamps), the producer id, epoch, base sequence and the
transactional flag; it gets the topic's codec (at the topic's KIP-390 level), record attributes 0,
the first record's timestamp as base timestamp, and a new CRC. Offsets and LogAppendTime are then
assigned as for any batch. A batch of the topic's codec is stored as it came, whatever level the
producer used. The rebuilt batch must still fit max.message.bytes (MESSAGE_TOO_LARGE otherwise).
"""

from __future__ import annotations

from struct import Struct

from broker.log.crc import crc32c

from . import codec_libs
from . import records as _records
from .batch import (
    COMPRESSION_MASK,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    LONG_MAX,
    LONG_MIN,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchInfo,
    InvalidBatch,
    java_long,
    read_header,
)
from .streaming import RecordStats, record_timestamps

NO_TIMESTAMP = -1
_MAXTS = Struct(">q")


def timestamp_errors(
    buf: bytes | memoryview,
    info: BatchInfo,
    stats: RecordStats,
    now: int,
    before_max_ms: int,
    after_max_ms: int,
    log_append_topic: bool,
) -> list[tuple[int, str]]:
    """(record index, message) of every record Kafka refuses with INVALID_TIMESTAMP; [] if none."""
    batch_log_append = bool(info.attributes & TIMESTAMP_TYPE_MASK)
    if not batch_log_append:
        if log_append_topic:
            return []
        if timestamps_within(info, stats, now, before_max_ms, after_max_ms):
            return []  # the usual case: no record is out of range
    errors: list[tuple[int, str]] = []
    for index, (offset_delta, ts) in enumerate(record_timestamps(buf, info)):
        # (``ts`` wraps around a long as Kafka's record timestamp does, and so does Kafka's check:
        # LogValidator.validateTimestamp)
        if not log_append_topic and ts != NO_TIMESTAMP:
            diff = java_long(now - ts)
            if diff > before_max_ms or java_long(-diff) > after_max_ms:
                errors.append(
                    (
                        index,
                        f"Timestamp {ts} of message with offset {info.base_offset + offset_delta} is out of "
                        f"range. The timestamp should be within [{java_long(now - before_max_ms)}, "
                        f"{java_long(now + after_max_ms)}]",
                    )
                )
        elif batch_log_append:
            errors.append(
                (
                    index,
                    f"Invalid timestamp type in message at offset {info.base_offset + offset_delta}. "
                    "Producer should not set timestamp type to LogAppendTime.",
                )
            )
    return errors


def timestamps_within(
    info: BatchInfo, stats: RecordStats, now: int, before_max_ms: int, after_max_ms: int
) -> bool:
    """Whether every record of a CreateTime batch has a timestamp within the bounds
    (message.timestamp.before/after.max.ms around ``now``): ``timestamp_errors``' usual case."""
    base = info.base_timestamp
    lo, hi = base + stats.min_ts_delta, base + stats.max_ts_delta
    # (a timestamp past a long wraps around in Kafka's arithmetic: ``timestamp_errors`` decides)
    return LONG_MIN <= lo and hi <= LONG_MAX and now - lo <= before_max_ms and hi - now <= after_max_ms


def keyless_record_errors(buf: bytes | memoryview, info: BatchInfo, topic: str, partition: int) -> list:
    """A compacted topic takes only records with a key (LogValidator.validateKey): (record index,
    message) of each record without one."""
    section = memoryview(buf)[info.position + HEADER_SIZE : info.position + info.size]
    data = _records.decompress(info.attributes & COMPRESSION_MASK, section)  # validated: size capped
    message = f"Compacted topic cannot accept message without key in topic partition {topic}-{partition}"
    errors = []
    pos = 0
    for index in range(info.records_count):  # only the key length of each record is read
        length, pos = _records._read_varint(data, pos, 5)
        end = pos + length
        _ts, p = _records._read_varint(data, pos + 1, 10)
        _od, p = _records._read_varint(data, p, 5)
        key_length, p = _records._read_varint(data, p, 5)
        if key_length < 0:
            errors.append((index, message))
        pos = end
    return errors


def record_errors_message(errors: list[tuple[int, str]]) -> str:
    """Kafka's InvalidRecordException text for record errors other than timestamps."""
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    return (
        f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
        f"showing the first three errors at most: [{shown}]"
    )


def max_record_timestamp(buf: bytes | bytearray | memoryview, info: BatchInfo, stats: RecordStats) -> int:
    """The max timestamp Kafka gives a CreateTime batch (LogValidator): the largest record
    timestamp, each the base timestamp plus its delta in a long (past a long it wraps around, read
    record by record then), and never below NO_TIMESTAMP (where Kafka's maximum starts)."""
    base = info.base_timestamp
    lo, hi = base + stats.min_ts_delta, base + stats.max_ts_delta
    if lo < LONG_MIN or hi > LONG_MAX:
        hi = max(ts for _delta, ts in record_timestamps(buf, info))
    return hi if hi > NO_TIMESTAMP else NO_TIMESTAMP


def set_max_timestamp(buf: bytearray, info: BatchInfo, stats: RecordStats) -> None:
    """Give a CreateTime batch the max timestamp of its records (Kafka overwrites the producer's:
    ``max_record_timestamp``), recomputing the CRC only when it changes."""
    if info.attributes & TIMESTAMP_TYPE_MASK:
        return
    actual = max_record_timestamp(buf, info, stats)
    if actual == info.max_timestamp:
        return
    _MAXTS.pack_into(buf, info.position + 35, actual)
    crc = crc32c(memoryview(buf)[info.position + 21 : info.position + info.size])
    buf[info.position + 17 : info.position + 21] = crc.to_bytes(4, "big")
    info.max_timestamp = actual


# ---------------------------------------------------------------------------------------------
# recompression


def compress(codec: int, data: bytes, level: int | None = None) -> bytes:
    """``data`` compressed with ``codec`` at a KIP-390 ``level`` (None: the codec's default), in the
    framing Kafka clients read (xerial snappy, LZ4 frames with independent blocks)."""
    if codec == 0:
        return data
    if codec == 1:
        return codec_libs.gzip.compress(data, compresslevel=6 if level in (None, -1) else level, mtime=0)
    if codec == 3:
        # Kafka uses lz4-java's fast compressor at the default level 9 and LZ4 HC at any other; the
        # frame as Kafka's Lz4BlockOutputStream writes it: 64 KiB independent blocks, no content size
        return codec_libs.lz4_frame.compress(
            data,
            compression_level=0 if level in (None, 9) else level,
            block_size=codec_libs.lz4_frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    if codec == 4:
        return bytes(codec_libs.cramjam.zstd.compress(data, level=3 if level is None else level))
    return _records.compress(codec, data)


def needs_rebuild(info: BatchInfo, target: int | None) -> bool:
    """Kafka rebuilds a batch exactly when the topic names a codec other than the batch's."""
    return target is not None and target != info.attributes & COMPRESSION_MASK


def rebuild(
    buf: bytes | memoryview, info: BatchInfo, stats: RecordStats, codec: int, level: int | None, limit: int
) -> tuple[bytearray, BatchInfo]:
    """The batch ``info`` rebuilt with ``codec``, and its header (base offset 0, assigned later).
    Records whose timestamps run past a long (accepted only with message.timestamp.after.max.ms or
    before.max.ms near a long's range) are refused (INVALID_RECORD) rather than re-encoded."""
    base = info.base_timestamp
    if base + stats.min_ts_delta < LONG_MIN or base + stats.max_ts_delta > LONG_MAX:
        raise InvalidBatch("record timestamps past the range of a long cannot be recompressed", corrupt=False)
    section = stats.section
    source = info.attributes & COMPRESSION_MASK
    if section is None:
        raw = memoryview(buf)[info.position + HEADER_SIZE : info.position + info.size]
        section = _records.decompress(source, raw)
        if len(section) > limit:  # validated before; a second guard costs nothing
            raise ValueError("decompressed records exceed the limit")
    first = stats.first_ts_delta
    if first != 0 or not stats.plain_attributes:
        # records as Kafka's builder writes them: attributes 0, timestamps relative to the first
        recs = _records.decode_records(section, info.records_count)
        for r in recs:
            r.timestamp_delta -= first
            r.attributes = 0
        section = _records.encode_records(recs)
    body = compress(codec, bytes(section), level)
    attributes = codec | (info.attributes & TRANSACTIONAL_MASK)
    base_ts = info.base_timestamp + first
    max_ts = max(info.base_timestamp + stats.max_ts_delta, NO_TIMESTAMP)  # (where Kafka's maximum starts)
    head = HEADER.pack(
        0,
        HEADER_SIZE - LOG_OVERHEAD + len(body),
        -1,
        2,
        0,
        attributes,
        info.records_count - 1,
        base_ts,
        max_ts,
        info.producer_id,
        info.producer_epoch,
        info.base_sequence,
        info.records_count,
    )
    out = bytearray(head) + body
    out[17:21] = crc32c(memoryview(out)[21:]).to_bytes(4, "big")
    return out, read_header(out, 0)
