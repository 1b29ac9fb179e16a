"""broker.log.streaming: produce-time record validation and the timestamp lookup, both streaming
with bounded decompression."""

from __future__ import annotations

import struct

import cramjam
import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log import batch as B
from broker.log import records as R
from broker.log.records import Record
from broker.log.streaming import (
    CHUNK,
    MAX_STREAMED_RECORDS,
    WINDOW,
    decompressed_chunks,
    offset_for_timestamp,
    validate_records,
)

CODECS = [0, 1, 2, 3, 4]
LIMIT = 1 << 20


def raw_batch(section: bytes, count: int, compression: int = 0, base_timestamp: int = 0) -> bytes:
    """A v2 batch around a hand-made records section, with a correct CRC."""
    head = (0, B.HEADER_SIZE - B.LOG_OVERHEAD + len(section), -1, 2, 0, compression, count - 1)
    head += (base_timestamp, base_timestamp, -1, -1, -1, count)
    buf = bytearray(B.HEADER.pack(*head)) + section
    buf[17:21] = crc32c(memoryview(buf)[21:]).to_bytes(4, "big")
    return bytes(buf)


def check(buf: bytes, limit: int = LIMIT) -> None:
    validate_records(buf, B.read_header(buf, 0), limit)


def record(body: bytes) -> bytes:
    return R._varint(len(body)) + body


@pytest.mark.parametrize("codec", CODECS)
def test_valid_batches_pass(codec):
    recs = [
        Record(0, 0, None, b"v"),
        Record(1, 300, b"k" * 200, None),
        Record(2, -5, b"", b"x" * 70_000, [("h", b"1"), ("empty", None), ("", b"")]),
    ]
    check(R.build_batch(recs, compression=codec))
    many = [(b"key%d" % i, b"value" * (i % 50)) for i in range(2000)]
    check(R.build_batch(many, compression=codec))


@pytest.mark.parametrize("codec", CODECS)
def test_offset_deltas_must_run_from_zero(codec):
    recs = [Record(1, 0, None, b"a"), Record(0, 0, None, b"b")]
    with pytest.raises(B.InvalidBatch, match="offset delta 1, not 0") as e:
        check(R.build_batch(recs, compression=codec))
    assert not e.value.corrupt  # INVALID_RECORD
    gap = [Record(0, 0, None, b"a"), Record(2, 0, None, b"b")]
    with pytest.raises(B.InvalidBatch, match="offset delta 2, not 1"):
        check(R.build_batch(gap, compression=codec))


@pytest.mark.parametrize("codec", CODECS)
def test_record_count_must_match(codec):
    section = R.encode_records([Record(0, 0, None, b"a"), Record(1, 0, None, b"b")])
    for count, match in ((3, "truncated|cannot hold"), (1, "left after")):
        buf = raw_batch(R.compress(codec, section), count, codec)
        with pytest.raises(B.InvalidBatch, match=match) as e:
            check(buf)
        assert not e.value.corrupt


@pytest.mark.parametrize(
    "body, match",
    [
        (b"\x00\x00\x00\x01\x01\x00\x00", "declares 7 bytes"),  # one field byte too many
        (b"\x00\x00\x00\x01", "bad length|declares|cannot hold"),  # length 4 < 6
        (b"\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x00\x01\x01\x00", "longer than 10"),  # 11-byte ts
        (b"\x00\x00\xff\xff\xff\xff\xff\x01\x01\x01\x00", "longer than 5|offset delta"),  # 6-byte delta
        (b"\x00\x00\x00\x03\x01\x00", "bad key length"),  # key length -2
        (b"\x00\x00\x00\x01\x05\x00", "bad value length"),  # value length -3
        (b"\x00\x00\x00\x01\x01\x01", "header count"),  # header count -1
        (b"\x00\x00\x00\x01\x01\x02\x01\x00\x00", "header key length"),  # header key length -1
        (b"\x00\x00\x00\x01\x40\x00", "value|past"),  # value length 32 in a 6-byte record
    ],
)
@pytest.mark.parametrize("codec", CODECS)
def test_malformed_records_are_invalid(body, match, codec):
    section = record(body)
    with pytest.raises(B.InvalidBatch, match=match) as e:
        check(raw_batch(R.compress(codec, section), 1, codec))
    assert not e.value.corrupt


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_undecodable_streams_are_corrupt(codec):
    good = R.compress(codec, R.encode_records([Record(0, 0, None, b"a" * 1000)]))
    for section in (b"garbage" * 5, good[: len(good) // 2]):
        with pytest.raises(B.InvalidBatch) as e:
            check(raw_batch(section, 1, codec))
        if section.startswith(b"garbage"):
            assert e.value.corrupt  # CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_expansion_is_capped(codec):
    buf = R.build_batch([(None, bytes(4 << 20))], compression=codec)
    check(buf, limit=5 << 20)
    with pytest.raises(B.InvalidBatch, match="more than|beyond") as e:
        check(buf, limit=1 << 20)
    assert not e.value.corrupt


def test_a_snappy_block_declaring_a_huge_size_is_refused_before_decompressing():
    # a raw snappy stream's preamble is its uncompressed length: claim 2 GiB
    section = R._XERIAL_HEADER + struct.pack(">i", 6) + b"\x80\x80\x80\x80\x08\x00"
    with pytest.raises(B.InvalidBatch, match="declares"):
        check(raw_batch(section, 1, 2))


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_chunks_are_bounded(codec):
    data = bytes(range(256)) * 4096 + bytes(3 << 20)
    chunks = list(decompressed_chunks(codec, R.compress(codec, data), 8 << 20))
    assert b"".join(chunks) == data
    limit = CHUNK if codec != 2 else 32 * 1024  # snappy: one xerial block at a time
    assert max(len(c) for c in chunks) <= limit


def test_gzip_members_are_concatenated():
    data = R.compress(1, b"abc") + R.compress(1, b"def")
    assert b"".join(decompressed_chunks(1, data, 100)) == b"abcdef"
    assert cramjam  # the codecs under test come from cramjam's encoders via R.compress


@settings(max_examples=150, deadline=None)
@given(
    deltas=st.lists(st.integers(-1000, 1000), min_size=1, max_size=30),
    codec=st.sampled_from(CODECS),
    target=st.integers(-1100, 1100),
    log_append=st.booleans(),
)
def test_offset_for_timestamp_matches_decoding(deltas, codec, target, log_append):
    recs = [Record(i, d, None, b"v%d" % i) for i, d in enumerate(deltas)]
    buf = R.build_batch(recs, base_offset=10, base_timestamp=0, compression=codec, timestamp_type=log_append)
    expected = None
    for offset, ts, *_rest in R.iter_records(buf):
        if ts >= target:
            expected = (offset, ts)
            break
    assert offset_for_timestamp(buf, target) == expected


@pytest.mark.parametrize("codec", [1, 3, 4])
def test_sections_beyond_the_window_are_streamed(codec):
    big = [Record(0, 0, b"k", bytes(WINDOW + 1000)), Record(1, 5, None, b"v", [("h", b"x")])]
    check(R.build_batch(big, compression=codec), limit=4 * WINDOW)
    bad = [Record(0, 0, b"k", bytes(WINDOW + 1000)), Record(2, 5, None, b"v")]
    with pytest.raises(B.InvalidBatch, match="offset delta 2, not 1"):
        check(R.build_batch(bad, compression=codec), limit=4 * WINDOW)
    # beyond the window, a batch may not hold more than MAX_STREAMED_RECORDS records
    many = R.build_batch(
        [(None, b"")] * (MAX_STREAMED_RECORDS + 1) + [(None, bytes(WINDOW))], compression=codec
    )
    with pytest.raises(B.InvalidBatch, match="at most") as e:
        check(many, limit=4 * WINDOW)
    assert not e.value.corrupt
    with pytest.raises(B.InvalidBatch, match="at most"):
        offset_for_timestamp(many, 0)
