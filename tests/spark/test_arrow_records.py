"""The column-wise reader of the ``pykbroker`` source (``logdir.read_arrow``) against the record
decoder's reader (``logdir.read_columns``): the same rows and values for every codec, timestamp type,
null key or value, headers, record sizes, range bounds, chunk sizes, control batches and aborted
transactions; the same InvalidRecords for a damaged records section. Segment files only: no Spark,
no broker."""

from __future__ import annotations

import struct
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log.batch import HEADER_SIZE
from broker.log.control import marker_batch
from broker.log.records import InvalidRecords, Record, build_batch
from broker.spark import logdir
from broker.spark.source import pack

pytestmark = pytest.mark.unit

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def expected(cols: dict[str, list]) -> pa.Table:
    """read_columns' columns as the Arrow table read_arrow must give (timestamps ms -> us)."""
    arrays = []
    for f in logdir.ARROW_RECORDS:
        if f.name == "timestamp":
            arrays.append(pa.array([ms * 1000 for ms in cols["timestamp"]], pa.int64()).cast(f.type))
        else:
            arrays.append(pa.array(cols[f.name], f.type))
    return pa.Table.from_arrays(arrays, schema=logdir.ARROW_RECORDS)


def arrow(r: logdir.SegmentRange, **kwargs) -> pa.Table:
    batches = list(logdir.read_arrow(r, **kwargs))
    assert all(b.num_rows for b in batches)  # no empty batches
    return pa.Table.from_batches(batches, schema=logdir.ARROW_RECORDS)


def same(r: logdir.SegmentRange, verify_crc: bool = True, aborted=None, chunk_bytes: int = 1 << 20) -> int:
    want = expected(logdir.read_columns(r, verify_crc, aborted))
    got = arrow(r, verify_crc=verify_crc, aborted=aborted, chunk_bytes=chunk_bytes)
    assert got.equals(want), (got.slice(0, 5).to_pylist(), want.slice(0, 5).to_pylist())
    return got.num_rows


def segment(path: Path, batches: list[bytes]) -> tuple[str, int]:
    """Write ``batches`` (base offsets already set) as a segment file; its path and end offset."""
    path.write_bytes(b"".join(batches))
    end = 0
    for b in batches:
        base, _len = struct.unpack_from(">qi", b)
        end = base + struct.unpack_from(">i", b, 23)[0] + 1
    return str(path), end


# values above 8 KiB take a 3-byte record length
blob = st.none() | st.binary(max_size=40) | st.integers(8200, 9000).map(lambda n: b"x" * n)
headers = st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=6)), max_size=3)
record = st.tuples(blob, blob, headers, st.integers(-(2**40), 2**40))
batch = st.tuples(
    st.lists(record, min_size=1, max_size=12),
    st.sampled_from([0, 1, 2, 3, 4]),  # codec
    st.booleans(),  # LogAppendTime
    st.integers(0, 2**41),  # base timestamp
)


@SETTINGS
@given(st.lists(batch, min_size=1, max_size=6), st.data())
def test_same_rows_as_the_record_decoder(tmp_path, spec, data):
    out, base = [], 0
    for recs, codec, log_append, ts in spec:
        rs = [Record(i, d, k, v, h) for i, (k, v, h, d) in enumerate(recs)]
        out.append(build_batch(rs, base, ts, codec, timestamp_type=int(log_append)))
        base += len(rs)
    path, end = segment(tmp_path / "00000000000000000000.log", out)
    start = data.draw(st.integers(0, end - 1))
    stop = data.draw(st.integers(start + 1, end))
    chunk = data.draw(st.sampled_from([1, 300, 1 << 20]))  # a batch per chunk, a few, all
    assert same(logdir.SegmentRange("t", 3, path, start, stop), chunk_bytes=chunk) == stop - start


def test_transactions_markers_and_aborted_batches(tmp_path):
    def txn(pid: int, base: int, n: int) -> bytes:
        return build_batch([(b"k", f"{pid}-{i}".encode()) for i in range(n)], base, 1, producer_id=pid,
                           producer_epoch=0, base_sequence=0, transactional=True)  # fmt: skip

    def marker(pid: int, base: int, commit: bool) -> bytes:
        b = bytearray(marker_batch(pid, 0, commit, 5))
        b[:8] = struct.pack(">q", base)
        return bytes(b)

    batches = [
        build_batch([(None, b"plain")], 0, 1),
        txn(7, 1, 3),  # aborted
        txn(8, 4, 2),  # committed
        marker(7, 6, False),
        marker(8, 7, True),
        build_batch([(b"a", None), (None, b"b")], 8, 1),
    ]
    (tmp_path / "t-0").mkdir()
    path, end = segment(tmp_path / "t-0" / "00000000000000000000.log", batches)
    r = logdir.SegmentRange("t", 0, path, 0, end)
    aborted = logdir.transactions(tmp_path, ("t", 0), end).aborted
    assert aborted == ((7, 1, 6),)
    assert same(r) == 1 + 3 + 2 + 2  # markers are never records
    assert same(r, aborted=aborted) == 1 + 2 + 2
    assert same(logdir.SegmentRange("t", 0, path, 2, 8), aborted=aborted) == 2
    got = arrow(r, aborted=aborted)
    assert got.column("offset").to_pylist() == [0, 4, 5, 8, 9]
    assert got.column("key").to_pylist() == [None, b"k", b"k", b"a", None]
    assert got.column("value").to_pylist() == [b"plain", b"8-0", b"8-1", None, b"b"]


def test_headers_timestamps_and_types(tmp_path):
    recs = [Record(0, 5, b"k", b"v", [("h", b"1"), ("n", None)]), Record(1, -3, None, b"w", [])]
    batches = [build_batch(recs, 0, 1000), build_batch(recs, 2, 2000, timestamp_type=1, max_timestamp=2500)]
    path, end = segment(tmp_path / "00000000000000000000.log", batches)
    got = arrow(logdir.SegmentRange("t", 1, path, 0, end)).to_pylist()
    assert [row["headers"] for row in got] == [
        [{"key": "h", "value": b"1"}, {"key": "n", "value": None}], None,
        [{"key": "h", "value": b"1"}, {"key": "n", "value": None}], None,
    ]  # fmt: skip
    stamps = [(row["timestamp"] - EPOCH) // timedelta(milliseconds=1) for row in got]
    assert stamps == [1005, 997, 2500, 2500]
    assert [row["timestampType"] for row in got] == [0, 0, 1, 1]
    assert {(row["topic"], row["partition"]) for row in got} == {("t", 1)}


def records_section(n: int) -> tuple[bytes, int]:
    recs = [Record(i, i, b"key%d" % i, b"v" * (i * 7), [("h", b"x")] if i % 3 == 0 else []) for i in range(n)]
    return build_batch(recs, 0, 1), len(recs)


@SETTINGS
@given(st.data())
def test_a_damaged_records_section_raises_the_record_decoders_error(tmp_path, data):
    good, _n = records_section(9)
    other = build_batch([(b"a", b"b")], 9, 1)
    damaged = bytearray(good)
    at = data.draw(st.integers(HEADER_SIZE, len(good) - 1))
    damaged[at] = data.draw(st.integers(0, 255).filter(lambda b: b != good[at]))
    path, end = segment(tmp_path / "00000000000000000000.log", [bytes(damaged), other])
    r = logdir.SegmentRange("t", 0, path, 0, end)
    try:
        logdir.read_columns(r, verify_crc=False)
    except InvalidRecords as e:
        want = str(e)
    else:
        want = None
    if want is None:
        same(r, verify_crc=False)
    else:
        with pytest.raises(InvalidRecords) as got:
            list(logdir.read_arrow(r, verify_crc=False))
        assert str(got.value) == want
    with pytest.raises(ValueError, match="CRC"):  # with the CRC checked, the damage is found first
        list(logdir.read_arrow(r))


def test_a_damaged_marker_is_an_error_as_in_the_record_decoder(tmp_path):
    m = bytearray(marker_batch(7, 0, False, 5))
    m[HEADER_SIZE] = 0x7F  # the marker record's length varint: -64
    path, end = segment(tmp_path / "00000000000000000000.log", [build_batch([(None, b"v")], 0, 1), bytes(m)])
    with pytest.raises(InvalidRecords) as want:
        logdir.read_columns(logdir.SegmentRange("t", 0, path, 0, 2), verify_crc=False)
    with pytest.raises(InvalidRecords) as got:
        list(logdir.read_arrow(logdir.SegmentRange("t", 0, path, 0, 2), verify_crc=False))
    assert str(got.value) == str(want.value)


def test_empty_and_compressed_ranges(tmp_path):
    path, end = segment(tmp_path / "00000000000000000000.log", [build_batch([(None, b"v")] * 5, 0, 1, 4)])
    assert list(logdir.read_arrow(logdir.SegmentRange("t", 0, path, 5, 9))) == []
    assert same(logdir.SegmentRange("t", 0, path, 1, 3)) == 2


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=8), st.integers(1, 20))
def test_pack_keeps_every_offset_in_order_in_count_equal_partitions(sizes, count):
    ranges, at = [], 0
    for i, size in enumerate(sizes):
        ranges.append((logdir.SegmentRange("t", i % 2, f"s{i}", at, at + size), i))
        at += size
    parts = pack(ranges, count)
    total = sum(sizes)
    assert len(parts) == min(count, total)
    assert all(parts)
    flat = [
        (r.topic, r.partition, r.path, o, extra)
        for part in parts
        for r, extra in part
        for o in range(r.start, r.end)
    ]
    want = [(r.topic, r.partition, r.path, o, extra) for r, extra in ranges for o in range(r.start, r.end)]
    assert flat == want
    shares = [sum(r.end - r.start for r, _ in part) for part in parts]
    assert max(shares, default=0) - min(shares, default=0) <= 1
