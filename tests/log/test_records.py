"""broker/log/records.py: the record codec, the compression codecs and whole batches.

Real clients' bytes are the reference: kafka-python 3.0.12's DefaultRecordBatchBuilder and reader
(for the codecs whose Python libraries are installed: python-snappy, lz4, zstandard), and the Java
client's MemoryRecordsBuilder / MemoryRecords through tests/java/RecordsProbe.java, for every codec.
"""

from __future__ import annotations

import gzip
import json
import struct

import cramjam
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log import batch as B
from broker.log import records as R
from broker.log.records import InvalidRecords, Record
from broker.log.streaming import offset_for_timestamp

CODECS = [0, 1, 2, 3, 4]
BASE_TS = 1_700_000_000_000


def sample_records(n: int = 40) -> list[Record]:
    """Null, empty and plain keys and values, headers (null/empty values), negative timestamp
    deltas, and one 320 KB value so that every codec writes several blocks."""
    recs = []
    for i in range(n):
        key = None if i % 7 == 3 else (b"" if i % 11 == 5 else b"key-%d" % i)
        value = None if i % 13 == 4 else (b"value-%d " % i) * (i % 5 + 1)
        headers = [] if i % 3 else [(f"h{i}", b"x" * i), ("empty", b""), ("null", None)]
        recs.append(Record(i, (i * 37) % 500 - 100, key, value, headers))
    recs.append(Record(n, 9000, b"big", b"0123456789abcdef-" * 20000, [("k", b"v")]))
    return recs


def absolute(recs: list[Record], base_offset: int = 0, base_ts: int = BASE_TS) -> list[tuple]:
    return [
        (base_offset + r.offset_delta, base_ts + r.timestamp_delta, r.key, r.value, r.headers) for r in recs
    ]


def ours(buf: bytes) -> list[tuple]:
    return [(o, ts, k, v, h) for o, ts, k, v, h, _info in R.iter_records(buf)]


def rebody(buf: bytes, body: bytes, codec: int) -> bytes:
    """``buf`` (one batch) with its records section replaced, codec set and CRC recomputed."""
    out = bytearray(buf[: B.HEADER_SIZE]) + body
    struct.pack_into(">i", out, 8, len(out) - B.LOG_OVERHEAD)
    struct.pack_into(">h", out, 21, (struct.unpack_from(">h", out, 21)[0] & ~7) | codec)
    out[17:21] = crc32c(memoryview(out)[21:]).to_bytes(4, "big")
    return bytes(out)


# ------------------------------------------------------------------------------ round trips

headers_st = st.lists(
    st.tuples(
        st.text(st.characters(blacklist_categories=("Cs",)), max_size=8), st.none() | st.binary(max_size=8)
    ),
    max_size=3,
)
record_st = st.builds(
    Record,
    offset_delta=st.integers(-(2**31), 2**31 - 1),
    timestamp_delta=st.integers(-(2**63), 2**63 - 1),
    key=st.none() | st.binary(max_size=200),
    value=st.none() | st.binary(max_size=300),
    headers=headers_st,
    attributes=st.integers(-128, 127),
)


@given(st.lists(record_st, max_size=20))
def test_encode_decode_records_round_trip(recs):
    data = R.encode_records(recs)
    assert R.decode_records(data, len(recs)) == recs
    assert R.decode_records(memoryview(bytearray(data)), len(recs)) == recs


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(
    recs=st.lists(
        st.builds(
            Record,
            offset_delta=st.just(0),
            timestamp_delta=st.integers(-(10**9), 10**9),
            key=st.none() | st.binary(max_size=50),
            value=st.none() | st.binary(max_size=2000),
            headers=headers_st,
        ),
        min_size=1,
        max_size=12,
    ),
    base_offset=st.integers(0, 2**40),
)
def test_build_decode_batch_round_trip(codec, recs, base_offset):
    for i, r in enumerate(recs):
        r.offset_delta = i
    buf = R.build_batch(recs, base_offset=base_offset, base_timestamp=BASE_TS, compression=codec)
    info, got = R.decode_batch(buf)
    assert got == recs
    assert (info.compression, info.base_offset, info.records_count) == (codec, base_offset, len(recs))
    assert info.last_offset_delta == len(recs) - 1
    assert info.max_timestamp == BASE_TS + max(r.timestamp_delta for r in recs)
    assert info.size == len(buf)
    assert ours(buf) == absolute(recs, base_offset)
    B.validate_produce(buf)


@pytest.mark.parametrize("codec", CODECS)
def test_build_batch_header_fields(codec):
    buf = R.build_batch(
        sample_records(),
        base_offset=7,
        base_timestamp=BASE_TS,
        compression=codec,
        producer_id=99,
        producer_epoch=4,
        base_sequence=1000,
        transactional=True,
        partition_leader_epoch=3,
    )
    info = B.read_header(buf, 0)
    B.check_crc(buf, info)
    assert (info.producer_id, info.producer_epoch, info.base_sequence) == (99, 4, 1000)
    assert (info.partition_leader_epoch, info.records_count, info.last_offset_delta) == (3, 41, 40)
    assert info.is_transactional and not info.is_control and info.compression == codec
    assert not info.attributes & B.TIMESTAMP_TYPE_MASK
    assert info.max_timestamp == BASE_TS + 9000
    assert struct.unpack_from(">i", buf, 8)[0] == len(buf) - 12


def test_build_batch_forms_and_options():
    a = R.build_batch([(b"k", b"v"), (None, b"w", [("h", None)])], base_timestamp=5)
    b = R.simple_batch([b"v", b"w"], keys=[b"k", None], base_timestamp=5)
    assert R.decode_batch(a)[1] == [Record(0, 0, b"k", b"v"), Record(1, 0, None, b"w", [("h", None)])]
    assert R.decode_batch(b)[1] == [Record(0, 0, b"k", b"v"), Record(1, 0, None, b"w")]
    info = B.read_header(
        R.build_batch([(None, b"v")], timestamp_type=1, max_timestamp=77, base_timestamp=5), 0
    )
    assert info.attributes & B.TIMESTAMP_TYPE_MASK and info.max_timestamp == 77
    empty = R.build_batch([], base_timestamp=5)
    assert R.decode_batch(empty)[1] == [] and len(empty) == B.HEADER_SIZE
    with pytest.raises(ValueError):
        R.simple_batch([b"a"], keys=[])
    with pytest.raises(ValueError):
        R.build_batch([(None, b"a")], compression=5)
    with pytest.raises(ValueError):
        R.encode_records([Record(2**31, 0)])


def test_iter_records_over_batches_and_log_append_time():
    one = R.simple_batch([b"a", b"b"], base_offset=10, base_timestamp=100)
    two = R.build_batch(
        [Record(0, 0, None, b"c"), Record(1, 50, None, b"d")], base_offset=12, base_timestamp=200
    )
    three = R.build_batch(
        [(None, b"e")], base_offset=14, base_timestamp=1, timestamp_type=1, max_timestamp=999
    )
    got = [(o, ts, v, info.base_offset) for o, ts, _k, v, _h, info in R.iter_records(one + two + three)]
    assert got == [
        (10, 100, b"a", 10),
        (11, 100, b"b", 10),
        (12, 200, b"c", 12),
        (13, 250, b"d", 12),
        (14, 999, b"e", 14),
    ]
    assert list(R.iter_records(b"")) == []


def test_offset_for_timestamp():
    buf = b"".join(
        [
            R.build_batch(
                [Record(0, 0, None, b"a"), Record(1, 30, None, b"b")], base_offset=0, base_timestamp=100
            ),
            R.build_batch(
                [Record(0, 20, None, b"c"), Record(1, 5, None, b"d")], base_offset=2, base_timestamp=200
            ),
            R.build_batch(
                [(None, b"e")], base_offset=4, base_timestamp=1, timestamp_type=1, max_timestamp=500
            ),
        ]
    )
    assert offset_for_timestamp(buf, 0) == (0, 100)
    assert offset_for_timestamp(buf, 101) == (1, 130)
    assert offset_for_timestamp(buf, 131) == (2, 220)
    assert offset_for_timestamp(buf, 206) == (2, 220)
    assert offset_for_timestamp(buf, 221) == (4, 500)
    assert offset_for_timestamp(buf, 501) is None


# ------------------------------------------------------------------------------ codecs


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
@pytest.mark.parametrize("size", [0, 1, 1000, 300_000])
def test_compress_round_trip(codec, size):
    data = bytes(range(256)) * (size // 256) + b"z" * (size % 256)
    assert R.decompress(codec, R.compress(codec, data)) == data
    assert R.decompress(codec, memoryview(R.compress(codec, data))) == data


def test_snappy_is_xerial_framed_in_32k_blocks():
    data = b"abcdefgh" * 10_000  # 80 KB: three blocks
    out = R.compress(2, data)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks = 16, []
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(out[pos + 4 : pos + 4 + n])))
        pos += 4 + n
    assert [len(b) for b in blocks] == [32768, 32768, 14464] and b"".join(blocks) == data


def test_snappy_raw_and_lz4_linked_blocks_are_accepted():
    recs = sample_records(10)
    plain = R.build_batch(recs, base_timestamp=BASE_TS)
    section = plain[B.HEADER_SIZE :]
    raw = rebody(plain, bytes(cramjam.snappy.compress_raw(section)), 2)
    linked = rebody(plain, bytes(cramjam.lz4.compress(section)), 3)  # cramjam's default links blocks
    assert linked[B.HEADER_SIZE + 4] & 0x20 == 0
    assert R.decode_batch(raw)[1] == recs and R.decode_batch(linked)[1] == recs


def test_lz4_frame_has_independent_blocks():
    out = R.compress(3, b"x" * 200_000)
    assert out[:4] == b"\x04\x22\x4d\x18"
    flg, bd = out[4], out[5]
    assert flg >> 6 == 1 and flg & 0x20, "the Java client rejects dependent (linked) LZ4 blocks"
    assert flg & 0x03 == 0 and bd == 0x40  # no reserved bits, 64 KB blocks


def test_gzip_and_zstd_streams_from_other_writers():
    section = R.encode_records(sample_records(5))
    assert R.decompress(1, gzip.compress(section, compresslevel=1)) == section
    c = cramjam.zstd.Compressor()  # streaming: no content size in the frame header
    c.compress(section)
    assert R.decompress(4, bytes(c.finish())) == section


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_corrupt_compressed_stream(codec):
    good = R.compress(codec, R.encode_records(sample_records(5)))
    for bad in (b"", b"garbage garbage garbage", good[: len(good) // 2], good[:8] + b"\xff" * 40):
        with pytest.raises(InvalidRecords):
            R.decompress(codec, bad)
    with pytest.raises(InvalidRecords):
        R.decode_batch(rebody(R.simple_batch([b"a"] * 3), b"not compressed at all, nope", codec))


def test_xerial_block_length_past_end():
    out = bytearray(R.compress(2, b"hello" * 100))
    struct.pack_into(">i", out, 16, 10_000)
    with pytest.raises(InvalidRecords, match="runs past"):
        R.decompress(2, bytes(out))
    with pytest.raises(InvalidRecords, match="block length"):
        R.decompress(2, R.compress(2, b"hello") + b"\0\0")


# ------------------------------------------------------------------------------ malformed input


def test_batch_crc_mismatch_and_truncation():
    buf = R.build_batch(sample_records(5), base_timestamp=BASE_TS, compression=3)
    bad = bytearray(buf)
    bad[-3] ^= 0x10
    with pytest.raises(B.InvalidBatch, match="CRC"):
        R.decode_batch(bytes(bad))
    with pytest.raises(B.InvalidBatch, match="past the end"):
        R.decode_batch(buf[:-1])
    with pytest.raises(B.InvalidBatch):
        list(R.iter_records(buf + buf[:70]))


def section_of(*recs: Record) -> bytes:
    return R.encode_records(list(recs))


@pytest.mark.parametrize(
    "data,count,match",
    [
        (b"\xff\xff\xff\xff\xff\x01" + b"\0" * 20, 1, "longer than 5"),  # 6-byte varint length
        (b"\x0e\x00" + b"\xff" * 11 + b"\x01" + b"\x00" * 10, 1, "longer than 10"),  # 11-byte varlong
        (b"\xfe\xff\xff\xff\x1f" + b"\0" * 10, 1, "out of range"),  # 2**31 in a varint
        (b"\x0c\x00\x00\x00\x03\x01\x00", 1, "negative key length"),  # key length -2
        (b"\x0c\x00\x00\x00\x01\x03\x00", 1, "negative value length"),  # value length -2
        (b"\x01\x00\x00\x00\x01\x01\x00", 1, "bad length"),  # record length -1
        (b"\x0a\x00\x00\x00\x01\x01\x00", 1, "bad length"),  # record length 5 < 6
        (b"\x40\x00\x00\x00\x01\x01\x00", 1, "bad length"),  # record length 32 > what is left
        (b"\x0c\x00\x00\x00\x01\x01\x7e", 1, "bad header count"),  # 63 headers in 0 bytes
        (b"\x0c\x00\x00\x00\x01\x01\x01", 1, "bad header count"),  # -1 headers
        (b"\x12\x00\x00\x00\x01\x01\x02\x02\xff\x01", 1, "not utf-8"),
        (b"\x12\x00\x00\x00\x01\x01\x02\x08\x61\x01", 1, "bad header key length"),
        (b"\x12\x00\x00\x00\x01\x01\x02\x02\x61\x10", 1, "bad header value length"),
        (b"\x0c\x00\x00\x00\x02X\x01\x00", 1, "fields"),  # 7 bytes of fields in a 6-byte record
        (b"\x0e\x00\x00\x00\x01\x01\x00\x00", 1, "fields"),  # a byte the fields do not cover
        (b"", 1, "cannot hold"),
        (b"\0" * 100, 2**31 - 1, "cannot hold"),
        (b"\0" * 10, -1, "cannot hold"),
    ],
)
def test_decode_records_rejects(data, count, match):
    with pytest.raises(InvalidRecords, match=match):
        R.decode_records(data, count)


def test_decode_records_count_mismatch():
    data = section_of(Record(0, 0, b"k", b"v"), Record(1, 0, None, None))
    assert len(R.decode_records(data, 2)) == 2
    with pytest.raises(InvalidRecords, match="left after 1 records"):
        R.decode_records(data, 1)
    with pytest.raises(InvalidRecords, match="bad length 6"):  # 6 bytes said, 5 left
        R.decode_records(data + b"\x0c\x00\x00\x00\x01\x01", 3)
    with pytest.raises(InvalidRecords, match="bad length"):
        R.decode_records(data[:-1], 2)
    with pytest.raises(InvalidRecords, match="truncated"):  # a varlong cut at the end of the section
        R.decode_records(data + b"\x0c\x00\x80\x80\x80\x80\x80", 3)


def test_bad_records_inside_a_valid_batch():
    plain = R.simple_batch([b"a", b"b"], base_timestamp=1)
    with pytest.raises(InvalidRecords):
        R.decode_batch(rebody(plain, plain[B.HEADER_SIZE :] + b"\0", 0))
    with pytest.raises(InvalidRecords):
        R.decode_batch(rebody(plain, b"\xff" * 20, 0))
    with pytest.raises(InvalidRecords):
        R.decode_batch(rebody(plain, R.compress(4, b"\xff" * 20), 4))
    assert isinstance(InvalidRecords("x"), ValueError) and InvalidRecords("x").corrupt


@settings(max_examples=300)
@given(st.binary(max_size=64), st.integers(-2, 20))
def test_decode_records_random_bytes_fail_cleanly(data, count):
    try:
        R.decode_records(data, count)
    except InvalidRecords:
        pass


@settings(max_examples=300)
@given(st.data())
def test_decode_records_mutated_sections_fail_cleanly(data):
    recs = data.draw(st.lists(record_st, min_size=1, max_size=4))
    section = bytearray(R.encode_records(recs))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(section) - 1))
        section[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(section)))
    try:
        R.decode_records(bytes(section[:cut]), len(recs))
    except InvalidRecords:
        pass


# ------------------------------------------------------------------------------ kafka-python


def kp_codec_or_skip(codec: int) -> None:
    from kafka import codec as kc

    have = {0: True, 1: True, 2: kc.has_snappy(), 3: kc.has_lz4(), 4: kc.has_zstd()}[codec]
    if not have:
        lib = {2: "python-snappy", 3: "lz4", 4: "zstandard"}[codec]
        pytest.skip(f"kafka-python needs {lib} for codec {codec}")


def kp_build(recs: list[Record], codec: int) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, batch_size=64 << 20)
    for r in recs:
        assert builder.append(r.offset_delta, BASE_TS + r.timestamp_delta, r.key, r.value, r.headers)
    return bytes(builder.build())


def kp_read(buf: bytes) -> list[tuple]:
    from kafka.record.memory_records import MemoryRecords

    def b(x):
        return None if x is None else bytes(x)

    out = []
    records = MemoryRecords(buf)
    while (batch := records.next_batch()) is not None:
        assert batch.validate_crc()
        for r in batch:
            out.append((r.offset, r.timestamp, b(r.key), b(r.value), [(k, b(v)) for k, v in r.headers]))
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_we_read_kafka_python_batches(codec):
    kp_codec_or_skip(codec)
    recs = sample_records() + [Record(41, 3, b"k", b"v", [("\u00e9t\u00e9 \U0001f600", b"unicode key")])]
    buf = kp_build(recs, codec)
    info, got = R.decode_batch(buf)
    assert info.compression == codec  # kafka-python falls back to none when compression does not pay
    assert ours(buf) == absolute(recs)
    assert [(r.key, r.value, r.headers) for r in got] == [(r.key, r.value, r.headers) for r in recs]
    B.validate_produce(buf)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_our_batches(codec):
    kp_codec_or_skip(codec)
    recs = sample_records() + [Record(41, 3, b"k", b"v", [("\u00e9t\u00e9 \U0001f600", b"unicode key")])]
    one = R.build_batch(recs, base_offset=0, base_timestamp=BASE_TS, compression=codec)
    two = R.simple_batch([b"x" * 100] * 3, base_offset=42, base_timestamp=BASE_TS, compression=codec)
    assert kp_read(one + two) == absolute(recs) + [(42 + i, BASE_TS, None, b"x" * 100, []) for i in range(3)]
    if codec == 2:  # kafka-python's own xerial decoder, block by block
        from kafka.codec import snappy_decode

        assert snappy_decode(R.compress(2, b"q" * 100_000)) == b"q" * 100_000


# ------------------------------------------------------------------------------ the Java client


def records_file(recs: list[Record]) -> str:
    def h(x):
        return "-" if x is None else x.hex()

    lines = []
    for r in recs:
        headers = ",".join(f"{k}={h(v)}" for k, v in r.headers)
        lines.append(f"{r.offset_delta}\t{BASE_TS + r.timestamp_delta}\t{h(r.key)}\t{h(r.value)}\t{headers}")
    return "\n".join(lines) + "\n"


def java_rows(stdout: str) -> tuple[list[tuple], list[int], int]:
    def b(x):
        return None if x is None else bytes.fromhex(x)

    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    rows = [
        (d["offset"], d["timestamp"], b(d["key"]), b(d["value"]), [(k, b(v)) for k, v in d["headers"]])
        for d in lines[:-1]
    ]
    return rows, [d["compression"] for d in lines[:-1]], lines[-1]["batches"]


@pytest.mark.java
def test_we_read_java_batches(tmp_path):
    from tests.support.java import require_java

    java = require_java()
    recs = sample_records()
    (tmp_path / "in.tsv").write_text(records_file(recs))
    out = tmp_path / "java.bin"
    res = java.run("RecordsProbe", ["write", str(tmp_path / "in.tsv"), str(out), *map(str, CODECS)])
    assert res.returncode == 0, res.stderr
    buf = out.read_bytes()
    infos = B.validate_produce(buf)
    assert [i.compression for i in infos] == CODECS
    assert ours(buf) == absolute(recs) * len(CODECS)
    for info in infos:  # the Java client's base timestamp is its first record's
        got = R.decode_batch(buf, info.position)[1]
        assert [(r.offset_delta, r.key, r.value, r.headers) for r in got] == [
            (r.offset_delta, r.key, r.value, r.headers) for r in recs
        ]


@pytest.mark.java
def test_java_reads_our_batches(tmp_path):
    from tests.support.java import require_java

    java = require_java()
    recs = sample_records()
    buf = b"".join(R.build_batch(recs, base_timestamp=BASE_TS, compression=c) for c in CODECS)
    (tmp_path / "ours.bin").write_bytes(buf)
    res = java.run("RecordsProbe", ["read", str(tmp_path / "ours.bin")])
    assert res.returncode == 0, res.stderr
    rows, codecs, batches = java_rows(res.stdout)
    assert batches == len(CODECS)
    assert codecs == [c for c in CODECS for _ in recs]
    assert rows == absolute(recs) * len(CODECS)
