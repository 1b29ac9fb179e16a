"""broker/log/batch.py: header parsing, produce validation, batch iteration and offset assignment.

Batches come from broker.log.records.build_batch; the malformed ones are patched by hand (with the
CRC recomputed where the test is about something else than the CRC).
"""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from broker.log import batch as B
from broker.log.records import Record, build_batch, iter_records, simple_batch


def patch(buf: bytes, offset: int, fmt: str, value: int, fix_crc: bool = True) -> bytes:
    out = bytearray(buf)
    struct.pack_into(fmt, out, offset, value)
    if fix_crc:
        out[17:21] = crc32c(memoryview(out)[21:]).to_bytes(4, "big")
    return bytes(out)


def three_values(**kw) -> bytes:
    return simple_batch([b"a", b"b", b"c"], base_timestamp=1000, **kw)


def test_read_header_fields():
    buf = build_batch(
        [Record(0, 0, b"k", b"v"), Record(1, 5, None, b"w")],
        base_offset=42,
        base_timestamp=1000,
        producer_id=7,
        producer_epoch=3,
        base_sequence=11,
        transactional=True,
        partition_leader_epoch=9,
    )
    info = B.read_header(buf, 0)
    assert (info.position, info.size) == (0, len(buf))
    assert (info.base_offset, info.last_offset_delta, info.last_offset, info.next_offset) == (42, 1, 43, 44)
    assert (info.base_timestamp, info.max_timestamp) == (1000, 1005)
    assert (info.producer_id, info.producer_epoch, info.base_sequence) == (7, 3, 11)
    assert (info.records_count, info.partition_leader_epoch, info.last_sequence) == (2, 9, 12)
    assert info.is_transactional and not info.is_control and info.compression == 0
    B.check_crc(buf, info)


def test_last_sequence_wraps_and_none():
    info = B.read_header(simple_batch([b"a", b"b"], base_sequence=2**31 - 1), 0)
    assert info.last_sequence == 0
    assert B.read_header(simple_batch([b"a"]), 0).last_sequence == -1


def test_read_header_too_short():
    buf = three_values()
    with pytest.raises(B.InvalidBatch, match="too few"):
        B.read_header(buf[: B.HEADER_SIZE - 1], 0)
    with pytest.raises(B.InvalidBatch, match="too few"):
        B.read_header(buf, len(buf) - 10)


@pytest.mark.parametrize("magic,corrupt", [(0, False), (1, False), (3, True)])
def test_read_header_magic(magic, corrupt):
    with pytest.raises(B.InvalidBatch, match=f"magic {magic}") as e:
        B.read_header(patch(three_values(), 16, ">b", magic), 0)
    assert e.value.corrupt is corrupt


@pytest.mark.parametrize("length", [B.MIN_BATCH_LENGTH - 1, 0, -1])
def test_read_header_length_below_minimum(length):
    with pytest.raises(B.InvalidBatch, match="below the minimum") as e:
        B.read_header(patch(three_values(), 8, ">i", length, fix_crc=False), 0)
    assert e.value.corrupt


def test_read_header_length_past_end():
    buf = three_values()
    with pytest.raises(B.InvalidBatch, match="runs past the end"):
        B.read_header(buf[:-1], 0)
    with pytest.raises(B.InvalidBatch, match="runs past the end"):
        B.read_header(patch(buf, 8, ">i", len(buf), fix_crc=False), 0)


def test_minimum_length_empty_batch_parses():
    buf = build_batch([], base_timestamp=5)
    info = B.read_header(buf, 0)
    assert info.size == B.HEADER_SIZE and info.records_count == 0
    B.check_crc(buf, info)


def test_check_crc_mismatch():
    buf = bytearray(three_values())
    buf[-1] ^= 1
    with pytest.raises(B.InvalidBatch, match="CRC mismatch") as e:
        B.check_crc(buf, B.read_header(buf, 0))
    assert e.value.corrupt


def test_crc_ignores_base_offset_and_leader_epoch():
    buf = patch(three_values(), 0, ">q", 123456, fix_crc=False)
    buf = patch(buf, 12, ">i", 77, fix_crc=False)
    B.check_crc(buf, B.read_header(buf, 0))


def test_iter_batches_concatenated():
    parts = [
        simple_batch([b"x"] * n, base_offset=off, compression=codec, base_timestamp=1)
        for n, off, codec in [(1, 0, 0), (3, 1, 1), (2, 4, 3), (5, 6, 4)]
    ]
    buf = b"".join(parts)
    infos = B.iter_batches(buf)
    assert [i.position for i in infos] == [
        0,
        len(parts[0]),
        len(parts[0]) + len(parts[1]),
        len(buf) - len(parts[3]),
    ]
    assert [i.size for i in infos] == [len(p) for p in parts]
    assert [(i.base_offset, i.records_count, i.compression) for i in infos] == [
        (0, 1, 0),
        (1, 3, 1),
        (4, 2, 3),
        (6, 5, 4),
    ]
    assert B.iter_batches(b"") == []
    assert [B.batch_length_at(buf, i.position) for i in infos] == [(i.base_offset, i.size) for i in infos]


def test_iter_batches_crc_and_trailing_garbage():
    good = three_values()
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    with pytest.raises(B.InvalidBatch, match="CRC"):
        B.iter_batches(good + bytes(bad))
    assert len(B.iter_batches(good + bytes(bad), verify_crc=False)) == 2
    with pytest.raises(B.InvalidBatch, match="too few"):
        B.iter_batches(good + b"\0" * 10)


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_validate_produce_accepts_built_batches(codec):
    buf = b"".join(
        simple_batch(
            [b"v%d" % i] * (i + 1),
            keys=[b"k"] * (i + 1),
            compression=codec,
            producer_id=5,
            producer_epoch=0,
            base_sequence=i,
        )
        for i in range(3)
    )
    infos = B.validate_produce(buf)
    assert [i.records_count for i in infos] == [1, 2, 3]
    assert all(i.compression == codec for i in infos)


def test_validate_produce_rejects_empty():
    with pytest.raises(B.InvalidBatch, match="no record batch") as e:
        B.validate_produce(b"")
    assert not e.value.corrupt


def test_validate_produce_rejects_control_batch():
    with pytest.raises(B.InvalidBatch, match="control") as e:
        B.validate_produce(
            build_batch([(b"\0\0\0\0", b"\0\0\0\0\0\0")], control=True, producer_id=1, producer_epoch=0)
        )
    assert not e.value.corrupt


def test_validate_produce_rejects_count_zero():
    with pytest.raises(B.InvalidBatch, match="holds 0 records") as e:
        B.validate_produce(build_batch([]))
    assert not e.value.corrupt


def test_validate_produce_rejects_count_mismatch():
    gap = build_batch([Record(0, 0, None, b"a"), Record(2, 0, None, b"b")])  # lastOffsetDelta 2, 2 records
    with pytest.raises(B.InvalidBatch, match="does not match") as e:
        B.validate_produce(gap)
    assert not e.value.corrupt
    with pytest.raises(B.InvalidBatch, match="does not match"):
        B.validate_produce(patch(three_values(), 57, ">i", 4))  # recordsCount 4 for delta 2


def test_validate_produce_rejects_unknown_codec():
    with pytest.raises(B.InvalidBatch, match="codec 5") as e:
        B.validate_produce(patch(three_values(), 21, ">h", 5))
    assert not e.value.corrupt


def test_validate_produce_rejects_bad_crc_as_corrupt():
    buf = bytearray(three_values())
    buf[30] ^= 1
    with pytest.raises(B.InvalidBatch, match="CRC") as e:
        B.validate_produce(bytes(buf))
    assert e.value.corrupt


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("append_time", [None, 1_700_000_000_123])
def test_assign_offsets_keeps_crc_valid(codec, append_time):
    parts = [
        simple_batch([b"a", b"b"], compression=codec, base_timestamp=10),
        simple_batch([b"c"] * 3, compression=codec, base_timestamp=20),
    ]
    buf = bytearray(b"".join(parts))
    infos = B.validate_produce(buf)
    assert B.assign_offsets(buf, infos, 100, log_append_time=append_time) == 105
    for info in infos:
        B.check_crc(buf, info)
    again = B.iter_batches(buf)
    assert [(i.base_offset, i.last_offset) for i in again] == [(100, 101), (102, 104)]
    got = [(o, ts, v) for o, ts, _k, v, _h, _i in iter_records(bytes(buf))]
    if append_time is None:
        assert got == [(100, 10, b"a"), (101, 10, b"b"), (102, 20, b"c"), (103, 20, b"c"), (104, 20, b"c")]
        assert all(not i.attributes & B.TIMESTAMP_TYPE_MASK for i in again)
    else:
        assert [ts for _o, ts, _v in got] == [append_time] * 5
        assert all(i.max_timestamp == append_time and i.attributes & B.TIMESTAMP_TYPE_MASK for i in again)
        assert [i.compression for i in again] == [codec, codec]


def test_record_timestamps_wrap_around_a_long_as_kafkas_do():
    from_top = B.LONG_MAX - 5
    assert B.record_timestamp(from_top, 5) == B.LONG_MAX
    assert B.record_timestamp(from_top, 6) == B.LONG_MIN
    assert B.record_timestamp(from_top, 10) == B.LONG_MIN + 4
    assert B.record_timestamp(B.LONG_MIN + 3, -4) == B.LONG_MAX
    assert B.record_timestamp(1_700_000_000_000, -7) == 1_699_999_999_993
