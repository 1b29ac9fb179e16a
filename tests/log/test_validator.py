"""broker/log/validator.py and the record-exact MAX_TIMESTAMP lookup: recompression for every codec
pair, what a rebuilt batch keeps (producer id, epoch, sequence, transactional flag, records,
timestamps), LogAppendTime, KIP-937 timestamp checks, and PartitionLog.max_timestamp_offset."""

from __future__ import annotations

import pytest

from broker.log import records, validator
from broker.log.batch import (
    COMPRESSION_MASK,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    InvalidBatch,
    check_crc,
    iter_batches,
    validate_produce,
)
from broker.log.config import LONG_MAX, LogConfig
from broker.log.partition import PartitionLog
from broker.log.streaming import DEFAULT_LIMIT, validate_records

NOW = 1_700_000_000_000
CODECS = [0, 1, 2, 3, 4]


def batch(codec: int = 0, deltas=(0, 300, 100), base_ts: int = NOW - 1000, **kw) -> bytearray:
    recs = [
        records.Record(i, d, f"k{i}".encode(), f"value-{i}".encode() * 20, [("h", b"x"), ("n", None)])
        for i, d in enumerate(deltas)
    ]
    return bytearray(records.build_batch(recs, base_timestamp=base_ts, compression=codec, **kw))


def decoded(buf) -> list[tuple]:
    return [(o, ts, k, v, h) for o, ts, k, v, h, _info in records.iter_records(bytes(buf))]


def rebuild(buf: bytearray, target: int, level: int | None = None):
    (info,) = validate_produce(buf)
    stats = validate_records(buf, info, DEFAULT_LIMIT, keep=True)
    return validator.rebuild(buf, info, stats, target, level, DEFAULT_LIMIT)


@pytest.mark.parametrize("source", CODECS)
@pytest.mark.parametrize("target", CODECS)
def test_every_codec_pair_keeps_the_records(source, target):
    original = batch(source)
    (info,) = validate_produce(original)
    assert validator.needs_rebuild(info, target) == (source != target)
    assert not validator.needs_rebuild(info, None)  # compression.type=producer
    out, header = rebuild(original, target)
    (again,) = iter_batches(out)  # CRC checked
    assert again.compression == header.compression == target
    assert decoded(out) == decoded(original)
    assert (header.base_timestamp, header.max_timestamp) == (NOW - 1000, NOW - 700)
    assert header.records_count == 3 and header.last_offset_delta == 2


@pytest.mark.parametrize("target", [1, 3, 4])
def test_levels_change_the_bytes_not_the_records(target):
    data = batch(0, deltas=range(50))
    low = {1: 1, 3: 1, 4: 1}[target]
    high = {1: 9, 3: 17, 4: 19}[target]
    a, _ = rebuild(data, target, low)
    b, _ = rebuild(data, target, high)
    assert decoded(a) == decoded(b) == decoded(data)


def test_idempotent_and_transactional_fields_survive():
    original = batch(1, producer_id=42, producer_epoch=3, base_sequence=17, transactional=True)
    out, header = rebuild(original, 3)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 17)
    assert header.attributes & TRANSACTIONAL_MASK
    assert header.attributes & COMPRESSION_MASK == 3
    check_crc(out, header)


def test_records_are_rewritten_as_kafkas_builder_writes_them():
    # first record not at delta 0, non-zero record attributes: timestamps become relative to the
    # first record (Kafka's base timestamp) and attributes 0
    recs = [records.Record(i, 50 + 10 * i, None, b"v", [], attributes=1) for i in range(3)]
    original = bytearray(records.build_batch(recs, base_timestamp=NOW, compression=0, max_timestamp=NOW + 70))
    out, header = rebuild(original, 4)
    assert header.base_timestamp == NOW + 50 and header.max_timestamp == NOW + 70
    _info, got = records.decode_batch(out)
    assert [(r.timestamp_delta, r.attributes) for r in got] == [(0, 0), (10, 0), (20, 0)]
    assert [ts for _o, ts, *_ in records.iter_records(bytes(out))] == [NOW + 50, NOW + 60, NOW + 70]


def test_log_append_time_topic_stamps_a_rebuilt_batch(tmp_path):
    cfg = LogConfig.resolve({}, {"message.timestamp.type": "LogAppendTime", "compression.type": "lz4"})
    plog = PartitionLog(tmp_path / "p", "t", 0, cfg)
    out, header = rebuild(batch(1), cfg.compression)
    plog.append(out, [header], NOW + 5)
    plog.mark_flushed(*plog.flush_target())
    (info,) = iter_batches(plog.read(0, 1 << 20))
    assert info.attributes & TIMESTAMP_TYPE_MASK and info.compression == 3
    assert info.max_timestamp == NOW + 5
    assert {ts for _o, ts, *_ in records.iter_records(plog.read(0, 1 << 20))} == {NOW + 5}
    assert plog.max_timestamp_offset() == (0, NOW + 5)  # every record has it: the batch's first
    plog.close()


def errors(buf, now=NOW, before=LONG_MAX, after=3600000, log_append_topic=False):
    (info,) = validate_produce(buf)
    stats = validate_records(buf, info, DEFAULT_LIMIT)
    return validator.timestamp_errors(buf, info, stats, now, before, after, log_append_topic)


@pytest.mark.parametrize("codec", CODECS)
def test_timestamps_out_of_range_are_refused_record_by_record(codec):
    assert errors(batch(codec)) == []
    # base NOW-1000 with deltas 0, 300, 100: before.max.ms=800 refuses records 0 (1000 ms old) and 2 (900)
    got = errors(batch(codec), before=800)
    within = f"The timestamp should be within [{NOW - 800}, {NOW + 3600000}]"
    assert got == [
        (0, f"Timestamp {NOW - 1000} of message with offset 0 is out of range. {within}"),
        (2, f"Timestamp {NOW - 900} of message with offset 2 is out of range. {within}"),
    ]
    # one hour and one ms ahead is refused by the 4.x default after.max.ms
    future = batch(codec, deltas=(0,), base_ts=NOW + 3600001)
    assert [i for i, _m in errors(future)] == [0]
    assert errors(batch(codec, deltas=(0,), base_ts=NOW + 3600000)) == []
    # the bounds print as Java's long arithmetic leaves them
    old = batch(codec, deltas=(0,), base_ts=NOW - 11)
    ((_i, message),) = errors(old, before=10, after=LONG_MAX)
    assert message.endswith(f"[{NOW - 10}, {NOW + LONG_MAX - (1 << 64)}]")


def test_record_timestamp_minus_one_is_not_checked():
    data = batch(0, deltas=(0,), base_ts=-1)
    assert errors(data, before=10) == []


def test_log_append_time_batches_from_producers():
    lat = batch(0, timestamp_type=1)
    # on a LogAppendTime topic: refused
    got = errors(lat, log_append_topic=True)
    assert [i for i, _m in got] == [0, 1, 2]
    assert got[0][1].endswith("Producer should not set timestamp type to LogAppendTime.")
    # on a CreateTime topic: checked by its (max) timestamp like any record
    assert errors(lat) == []
    # and CreateTime batches on a LogAppendTime topic are never refused for their timestamps
    assert errors(batch(0, base_ts=1), log_append_topic=True) == []


def test_max_timestamp_header_is_set_from_the_records():
    data = batch(0, max_timestamp=NOW + 999_999)  # a producer's wrong header
    (info,) = validate_produce(data)
    stats = validate_records(data, info, DEFAULT_LIMIT)
    validator.set_max_timestamp(data, info, stats)
    (again,) = iter_batches(data)  # CRC recomputed
    assert again.max_timestamp == NOW - 700


#: the largest and smallest long (Kafka's timestamps)
TOP, BOTTOM = LONG_MAX, -(1 << 63)


def past_a_long(codec: int = 0) -> bytearray:
    """Three records at TOP - 15, TOP - 5 and TOP + 5: the last one's timestamp (base plus delta)
    runs past a long, and Kafka's long arithmetic wraps it around to BOTTOM + 4."""
    return batch(codec, deltas=(0, 10, 20), base_ts=TOP - 15, max_timestamp=TOP)  # (a producer's header)


def test_timestamps_past_a_long_wrap_around_as_in_kafka():
    data = past_a_long()
    # Kafka 4.x's default after.max.ms (one hour): each record is refused, the wrapped one printed
    # as Kafka prints it (its long value)
    got = errors(data)
    assert [i for i, _m in got] == [0, 1, 2]
    assert got[2][1].startswith(f"Timestamp {BOTTOM + 4} of message with offset 2 is out of range.")
    # with the bounds at a long's top: accepted, as Kafka accepts them (now - (BOTTOM + 4) wraps
    # around to a negative difference, below before.max.ms; its negation is not above after.max.ms)
    assert errors(data, before=TOP, after=TOP) == []
    (info,) = validate_produce(data)
    stats = validate_records(data, info, DEFAULT_LIMIT)
    assert not validator.timestamps_within(info, stats, NOW, TOP, TOP)  # (the fast check defers)
    # and the batch's max timestamp is the largest record timestamp as Kafka reads them: TOP - 5
    validator.set_max_timestamp(data, info, stats)
    (again,) = iter_batches(data)  # CRC recomputed
    assert again.max_timestamp == info.max_timestamp == TOP - 5


def test_a_batch_of_negative_timestamps_gets_no_max_below_minus_one():
    """Kafka's max timestamp starts at NO_TIMESTAMP (-1): records at -5 and -3 leave it there."""
    data = batch(0, deltas=(0, 2), base_ts=-5)
    assert errors(data, before=TOP) == []
    (info,) = validate_produce(data)
    stats = validate_records(data, info, DEFAULT_LIMIT)
    validator.set_max_timestamp(data, info, stats)
    (again,) = iter_batches(data)
    assert again.max_timestamp == -1
    rebuilt, header = rebuild(data, 1)
    assert header.max_timestamp == -1


def test_a_recompression_refuses_timestamps_past_a_long():
    with pytest.raises(InvalidBatch, match="past the range of a long") as e:
        rebuild(past_a_long(), 1)
    assert not e.value.corrupt  # INVALID_RECORD, not CORRUPT_MESSAGE


# ------------------------------------------------------------------ MAX_TIMESTAMP (KAFKA-16310)


def open_log(tmp_path, **overrides) -> PartitionLog:
    return PartitionLog(tmp_path / "p", "t", 0, LogConfig.resolve({}, overrides))


def append(plog: PartitionLog, data: bytearray) -> None:
    plog.append(data, validate_produce(data), NOW)


@pytest.mark.parametrize("codec", CODECS)
def test_max_timestamp_is_record_exact_inside_the_batch(tmp_path, codec):
    plog = open_log(tmp_path)
    assert plog.max_timestamp_offset() is None
    base = NOW - 10_000
    append(plog, batch(codec, deltas=(100, 400, 200), base_ts=base, max_timestamp=base + 400))
    assert plog.max_timestamp_offset() is None  # not yet below the high watermark
    plog.mark_flushed(*plog.flush_target())
    assert plog.max_timestamp_offset() == (1, base + 400)
    plog.close()


def test_max_timestamp_ties_answer_the_first_record_of_the_first_batch(tmp_path):
    plog = open_log(tmp_path, **{"segment.bytes": "400"})
    append(plog, batch(0, deltas=(0, 50, 50)))  # offsets 0-2, max at 1
    append(plog, batch(0, deltas=(50, 0)))  # offsets 3-4, the same max
    append(plog, batch(0, deltas=(10,)))
    plog.mark_flushed(*plog.flush_target())
    assert len(plog.segments) > 1
    assert plog.max_timestamp_offset() == (1, NOW - 950)
    append(plog, batch(0, deltas=(0, 60)))  # a later, larger maximum in a later segment
    plog.mark_flushed(*plog.flush_target())
    assert plog.max_timestamp_offset() == (7, NOW - 940)
    plog.close()


def test_max_timestamp_survives_a_reopen_and_ignores_a_lying_header(tmp_path):
    plog = open_log(tmp_path)
    base = NOW - 10_000
    append(plog, batch(4, deltas=(100, 400, 200), base_ts=base, max_timestamp=base + 400))
    # a batch whose header claims a max timestamp no record has: Kafka finds no record, answers -1
    append(plog, batch(0, deltas=(0, 1), base_ts=base, max_timestamp=base + 5000))
    plog.mark_flushed(*plog.flush_target())
    assert plog.max_timestamp_offset() is None
    plog.close()
    again = open_log(tmp_path)
    assert again.max_timestamp_offset() is None
    append(again, batch(1, deltas=(0, 9000, 9000), base_ts=base))
    again.mark_flushed(*again.flush_target())
    assert again.max_timestamp_offset() == (6, base + 9000)
    again.close()


def test_compacted_topics_refuse_records_without_a_key():
    recs = [records.Record(0, 0, b"k", b"v", []), records.Record(1, 0, None, b"v", [])]
    data = bytearray(records.build_batch(recs, base_timestamp=NOW, compression=3))
    (info,) = validate_produce(data)
    message = "Compacted topic cannot accept message without key in topic partition t-0"
    got = validator.keyless_record_errors(data, info, "t", 0)
    assert got == [(1, message)]
    assert validator.record_errors_message(got) == (
        "One or more records have been rejected due to 1 record errors in total, and only showing the "
        f"first three errors at most: [RecordError(batchIndex=1, message='{message}')]"
    )
    assert validator.keyless_record_errors(batch(1), validate_produce(batch(1))[0], "t", 0) == []
