"""broker.log._native (broker/log/_native.c), the compiled record walk of produce validation, against
the pure-Python walk it replaces (streaming._check_plain): for every section, the C walk accepts
exactly what the Python walk accepts, with the same facts, and refuses (None; the Python walk then
raises INVALID_RECORD with its text) everything else. Checked on hand-made edge cases, on records
built field by field from arbitrary (also overlong and out-of-range) varints, and on mutations of
valid sections. Also: the extension is built wherever a C compiler is, and PYKBROKER_NATIVE=0 turns
it off (the suite runs tests/log with it off too: scripts/test.sh)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log import batch as B
from broker.log import manager, validator
from broker.log import records as R
from broker.log import streaming as S
from broker.log.crc import crc32c
from broker.log.records import Record
from tests.log.test_crc import VECTORS
from tests.support.native import native_enabled, require_built, unset_with_native_0

try:
    from broker.log import _native
except ImportError:
    _native = None

needs_native = pytest.mark.skipif(_native is None, reason="broker.log._native is not built")


def python_walk(data: bytes, count: int) -> tuple | None:
    try:
        s = S._check_plain(bytes(data), count)
    except B.InvalidBatch as e:
        assert not e.corrupt  # malformed records are INVALID_RECORD
        return None
    return (s.min_ts_delta, s.max_ts_delta, s.first_ts_delta, s.plain_attributes)


def same(data: bytes, count: int) -> tuple | None:
    """Both walks' answer on ``data``, asserted equal (also for a bytearray and a memoryview slice)."""
    expected = python_walk(data, count)
    assert _native.check_records(data, count) == expected, (data.hex(), count)
    assert _native.check_records(bytearray(data), count) == expected
    padded = b"\xff" + bytes(data) + b"\xff"
    assert _native.check_records(memoryview(padded)[1:-1], count) == expected
    return expected


def raw_varint(u: int, pad: int = 0) -> bytes:
    """``u`` (unsigned, any size) as 7-bit groups, with ``pad`` needless continuation bytes."""
    out = bytearray()
    while True:
        out.append(u & 0x7F)
        u >>= 7
        if not u:
            break
    out.extend(b"\x00" * pad)
    for i in range(len(out) - 1):
        out[i] |= 0x80
    return bytes(out)


def varint(v: int, pad: int = 0) -> bytes:
    """``v`` zigzag-encoded (any size, so also beyond a long)."""
    return raw_varint(v << 1 if v >= 0 else ((-v) << 1) - 1, pad)


def section(records: list[Record]) -> bytes:
    return R.encode_records(records)


# ---------------------------------------------------------------------------------------------
# the build


def test_the_extension_is_built_where_a_compiler_is():
    require_built(_native, "broker/log/_native.c")
    if native_enabled():
        assert S.native_check is _native.check_records


def test_pykbroker_native_0_turns_it_off():
    assert unset_with_native_0("broker.log.streaming", "native_check")


# ---------------------------------------------------------------------------------------------
# hand-made cases


@needs_native
def test_valid_sections_give_the_same_facts():
    recs = [
        Record(0, 0, None, b"v"),
        Record(1, 300, b"k" * 200, None),
        Record(2, -5, b"", b"x" * 70_000, [("h", b"1"), ("empty", None), ("", b"")]),
        Record(3, (1 << 63) - 1, b"k", b"v"),
        Record(4, -(1 << 63), None, None),
    ]
    for n in range(len(recs) + 1):
        assert same(section(recs[:n]), n) is not None
    many = section([Record(i, i % 7 - 3, b"key%d" % i, b"value" * (i % 50)) for i in range(3000)])
    assert same(many, 3000) == (-3, 3, -3, True)
    assert same(b"", 0) == (0, 0, 0, True)


@needs_native
def test_attributes_are_noted():
    body = b"\x05" + varint(0) + varint(0) + varint(-1) + varint(1) + b"v" + varint(0)
    assert same(varint(len(body)) + body, 1) == (0, 0, 0, False)


@needs_native
@pytest.mark.parametrize(
    "body",
    [
        b"\x00\x00\x00\x01\x01\x00\x00",
        b"\x00\x00\x00\x01",
        b"\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x00\x01\x01\x00",
        b"\x00\x00\xff\xff\xff\xff\xff\x01\x01\x01\x00",
        b"\x00\x00\x00\x03\x01\x00",
        b"\x00\x00\x00\x01\x05\x00",
        b"\x00\x00\x00\x01\x01\x01",
        b"\x00\x00\x00\x01\x01\x02\x01\x00\x00",
        b"\x00\x00\x00\x01\x40\x00",
    ],
)
def test_malformed_records_are_refused_by_both(body):
    assert same(varint(len(body)) + body, 1) is None
    assert same(varint(len(body)) + body, 0) is None
    assert same(varint(len(body)) + body, 2) is None


@needs_native
@pytest.mark.parametrize(
    "ts",
    [(1 << 63) - 1, -(1 << 63), 1 << 63, -(1 << 63) - 1, 1 << 64, (1 << 69) - 1, 0],
)
@pytest.mark.parametrize("pad", [0, 1, 3])
def test_timestamp_deltas_at_the_edges_of_a_long(ts, pad):
    body = b"\x00" + varint(ts, pad) + varint(0) + varint(-1) + varint(1) + b"v" + varint(0)
    ok = -(1 << 63) <= ts < (1 << 63) and len(varint(ts, pad)) <= 10
    assert (same(varint(len(body)) + body, 1) is not None) == ok


@needs_native
@pytest.mark.parametrize("size", [(1 << 31) - 1, -(1 << 31), 1 << 31, -(1 << 31) - 1, 1 << 34])
def test_lengths_at_the_edges_of_an_int(size):
    body = b"\x00\x00\x00" + varint(size) + varint(1) + b"v" + varint(0)
    assert same(varint(len(body)) + body, 1) is None
    body = b"\x00\x00\x00" + varint(-1) + varint(1) + b"v" + varint(1) + varint(size) + b"\x00"
    assert same(varint(len(body)) + body, 1) is None


@needs_native
def test_counts_out_of_range_are_refused():
    good = section([Record(0, 0, None, b"a"), Record(1, 0, None, b"b")])
    for count in (-(1 << 62), -1, 1, 3, 1 << 31, 1 << 62):
        assert same(good, count) is None
    with pytest.raises(OverflowError):  # counts come from an int32 header field; never this
        _native.check_records(good, 1 << 64)


# ---------------------------------------------------------------------------------------------
# generated sections


def _field_varint(draw, value: int) -> bytes:
    return varint(value, draw(st.sampled_from([0, 0, 0, 0, 1, 4])))


@st.composite
def raw_record(draw, index: int) -> bytes:
    """One record built field by field: mostly well formed, sometimes not in one or more fields."""
    small = st.integers(-3, 40)
    wild = st.one_of(small, st.integers(-(1 << 70), 1 << 70))
    out = bytearray([draw(st.sampled_from([0, 0, 0, 1, 0x80, 0xFF]))])
    out += _field_varint(draw, draw(st.one_of(st.integers(-(1 << 40), 1 << 40), wild)))  # ts delta
    out += _field_varint(draw, draw(st.sampled_from([index] * 6 + [index + 1, -1, 1 << 31])))
    for _ in range(2):  # key, value
        n = draw(small)
        out += _field_varint(draw, n)
        out += bytes(max(0, min(n, 40) + draw(st.sampled_from([0] * 8 + [-1, 1]))))
    headers = draw(st.sampled_from([0, 0, 0, 1, 2, -1, 1 << 20]))
    out += _field_varint(draw, headers)
    for _ in range(max(0, min(headers, 3))):
        for _ in range(2):  # header key, header value
            n = draw(small)
            out += _field_varint(draw, n)
            out += bytes(max(0, min(n, 40)))
    length = len(out) + draw(st.sampled_from([0] * 10 + [-1, 1, -3, 5, 1 << 31]))
    return varint(length, draw(st.sampled_from([0, 0, 0, 2]))) + bytes(out)


@st.composite
def raw_section(draw) -> tuple[bytes, int]:
    n = draw(st.integers(0, 6))
    data = b"".join(draw(raw_record(i)) for i in range(n))
    count = n + draw(st.sampled_from([0] * 8 + [-1, 1]))
    return data, count


@needs_native
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_section())
def test_records_built_field_by_field(case):
    same(*case)


#: a few records (timestamp delta, key, value), then how to damage the encoding: byte flips
#: (position, value), a cut position and the kind of damage
MUTATIONS = (
    st.lists(
        st.tuples(
            st.integers(-(1 << 40), 1 << 40), st.binary(max_size=20) | st.none(), st.binary(max_size=20)
        ),
        min_size=1,
        max_size=8,
    ),
    st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=4),
    st.integers(0, 1 << 16),
    st.sampled_from(["flip", "truncate", "insert", "none"]),
)


def damage(data: bytearray, flips: list[tuple[int, int]], cut: int, how: str) -> None:
    """Apply one of MUTATIONS' kinds of damage to ``data`` in place."""
    if how == "flip":
        for at, value in flips:
            data[at % len(data)] = value
    elif how == "truncate":
        del data[cut % len(data) :]
    elif how == "insert":
        for at, value in flips:
            data.insert(at % (len(data) + 1), value)


@needs_native
@settings(max_examples=300, deadline=None)
@given(*MUTATIONS)
def test_mutated_valid_sections(recs, flips, cut, how):
    data = bytearray(section([Record(i, ts, k, v) for i, (ts, k, v) in enumerate(recs)]))
    damage(data, flips, cut, how)
    same(bytes(data), len(recs))


@needs_native
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.integers(-1, 6))
def test_arbitrary_bytes(data, count):
    same(data, count)


@needs_native
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_validate_records_gives_the_same_stats_either_way(keep, codec, monkeypatch):
    buf = R.build_batch([Record(i, 5 - i, b"k", b"v" * i) for i in range(50)], compression=codec)
    info = B.read_header(buf, 0)
    native = S.validate_records(buf, info, 1 << 20, keep=keep)
    monkeypatch.setattr(S, "native_check", None)
    python = S.validate_records(buf, info, 1 << 20, keep=keep)
    assert native == python
    assert (native.section is not None) == keep


# ---------------------------------------------------------------------------------------------
# check_batch: one partition's records (header, CRC, record walk) in one call (streaming.validate_one)


#: validate_one answers only with the extension on (PYKBROKER_NATIVE=0: always None, the Python path)
needs_batch = pytest.mark.skipif(S.native_batch is None, reason="check_batch is not built or turned off")


def python_one(buf: bytes, keep: bool = False) -> tuple | None:
    """What the Python path (validate_produce, then the Python record walk) accepts as exactly one
    uncompressed batch: (BatchInfo, RecordStats); None for anything else."""
    try:
        batches = B.validate_produce(buf)
    except B.InvalidBatch:
        return None
    if len(batches) != 1 or batches[0].compression:
        return None
    (info,) = batches
    try:
        stats = S._check_plain(bytes(buf[B.HEADER_SIZE : info.size]), info.records_count)
    except B.InvalidBatch:
        return None
    stats.section = bytes(buf[B.HEADER_SIZE : info.size]) if keep else None
    return info, stats


def same_one(buf: bytes, keep: bool = False) -> tuple | None:
    expected = python_one(buf, keep)
    for form in (bytes(buf), bytearray(buf), memoryview(b"\xff" + bytes(buf) + b"\xff")[1:-1]):
        assert S.validate_one(form, keep) == expected, bytes(buf).hex()
    return expected


def fix_crc(buf: bytearray) -> None:
    if len(buf) >= B.HEADER_SIZE:
        buf[17:21] = _native.crc32c(bytes(buf[21:])).to_bytes(4, "big")


#: lengths past the short ones of the compiled CRC's three-lane blocks (lanes of 8 kB, 1 kB, 256 and 64
#: bytes: each block 3 * L; then 8 bytes at a time; then single bytes): 64 kB, 71 kB, 1 MB, a block less
#: or more a byte, every lane size's block with the longest serial tail, and lengths that are not
#: multiples of 8 or of 3 * 8
CRC_LARGE_LENGTHS = [
    65_536,
    71_000,
    71_003,
    1 << 20,
    (1 << 20) + 13,
    3 * 8192 - 1,
    3 * 8192 + 1,
    3 * 8192 + 3 * 1024 + 3 * 256 + 3 * 64 + 191,
    2 * 3 * 8192 + 3 * 1024 - 8,
    3 * 1024 + 3 * 256 - 5,
]


def crc_all_ways(data: bytes) -> None:
    """The compiled CRC of ``data`` is the package's, for bytes and for memoryview slices starting 1..7
    bytes into a buffer (every alignment of the 8-byte loads)."""
    expected = crc32c(data)
    assert _native.crc32c(data) == expected, len(data)
    for offset in range(1, 8):
        view = memoryview(bytes(offset) + data + b"\xff")[offset : offset + len(data)]
        assert _native.crc32c(view) == expected, (len(data), offset)


@needs_native
@pytest.mark.parametrize(("data", "expected"), VECTORS)
def test_crc32c_gives_the_rfc_3720_vectors(data, expected):
    assert _native.crc32c(data) == expected


@needs_native
def test_crc32c_is_the_packages_at_every_length_to_2100():
    data = os.urandom(2100)
    for n in range(2101):
        crc_all_ways(data[:n])


@needs_native
@pytest.mark.parametrize("n", CRC_LARGE_LENGTHS)
def test_crc32c_is_the_packages_at_large_lengths(n):
    crc_all_ways(os.urandom(n))
    crc_all_ways(bytes(n))  # all zero: each lane's register stays at its start for a while
    crc_all_ways(b"\xff" * n)


@needs_batch
@pytest.mark.parametrize("size", [71_000, 1 << 20])
def test_check_batch_accepts_a_long_batch_and_refuses_it_with_a_value_byte_changed(size):
    batch = R.simple_batch([os.urandom(1000) for _ in range(size // 1000)])
    assert same_one(batch) is not None
    n = len(batch)
    # bytes of a value in the first block's three lanes and its last, the 1 kB and 256-byte lanes'
    # blocks and the serial tail; each a CRC error only: with the CRC fixed up the batch is valid again
    for at in (100, 8192 + 100, 2 * 8192 + 100, 3 * 8192 - 30, n - 2000, n - 700, n - 300, n - 30, n - 2):
        buf = bytearray(batch)
        buf[at] ^= 0x10
        assert S.validate_one(bytes(buf)) is None, at
        assert python_one(bytes(buf)) is None, at
        fix_crc(buf)
        assert same_one(bytes(buf)) is not None, at


@needs_batch
def test_check_batch_accepts_what_the_python_path_accepts():
    batches = [
        R.simple_batch([b"v"]),
        R.simple_batch([b"v" * 100] * 5, producer_id=7, producer_epoch=3, base_sequence=41),
        R.simple_batch([None, b"", b"x" * 70_000], keys=[b"k", None, b""]),
        R.build_batch([Record(i, 5 - i, b"k", b"v" * i, [("h", b"1")]) for i in range(50)]),
        R.simple_batch([b"v"], producer_id=1, producer_epoch=0, base_sequence=0, transactional=True),
    ]
    for buf in batches:
        for keep in (False, True):
            assert same_one(buf, keep) is not None
    info, stats = S.validate_one(batches[1])
    assert (info.producer_id, info.producer_epoch, info.base_sequence, info.records_count) == (7, 3, 41, 5)
    assert type(info) is B.BatchInfo and type(stats) is S.RecordStats
    assert S.validate_one(batches[0])[1].section is None
    info.base_offset = 99  # the objects built in C are ordinary, mutable instances
    assert info.last_offset == 103 and info == B.BatchInfo(0, *[getattr(info, f) for f in info.__slots__[1:]])


@needs_native
def test_bind_refuses_classes_without_object_slots():
    class Plain:
        pass

    with pytest.raises(TypeError):
        _native.bind(Plain, S.RecordStats)
    with pytest.raises(TypeError):
        _native.bind(S.RecordStats, B.BatchInfo)  # a wrong number of fields
    _native.bind(B.BatchInfo, S.RecordStats)


@needs_batch
@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_check_batch_leaves_compressed_batches_and_several_batches_to_python(codec):
    compressed = R.build_batch([Record(i, 0, b"k", b"v") for i in range(5)], compression=codec)
    assert python_one(compressed) is None and S.validate_one(compressed) is None
    two = R.simple_batch([b"a"]) + R.simple_batch([b"b"])
    assert S.validate_one(two) is None
    assert len(B.validate_produce(two)) == 2


@needs_batch
@pytest.mark.parametrize(
    "field, at, value",
    [
        ("magic", 16, b"\x01"),
        ("control", 22, b"\x20"),
        ("count", 57, (0).to_bytes(4, "big")),
        ("last delta", 23, (5).to_bytes(4, "big")),
        ("length short", 8, (48).to_bytes(4, "big")),
        ("length long", 8, (10_000).to_bytes(4, "big")),
    ],
)
def test_check_batch_refuses_bad_headers(field, at, value):
    buf = bytearray(R.simple_batch([b"v"]))
    buf[at : at + len(value)] = value
    fix_crc(buf)
    assert same_one(bytes(buf)) is None, field


@needs_batch
def test_check_batch_refuses_a_wrong_crc_and_short_buffers():
    buf = bytearray(R.simple_batch([b"v"]))
    buf[-1] ^= 1
    assert same_one(bytes(buf)) is None
    for n in range(0, B.HEADER_SIZE + 1):
        assert same_one(bytes(buf[:n])) is None


@needs_batch
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    *MUTATIONS,
    st.booleans(),
    st.booleans(),
)
def test_check_batch_on_mutated_batches(recs, flips, cut, how, crc, keep):
    data = bytearray(R.build_batch([Record(i, ts, k, v) for i, (ts, k, v) in enumerate(recs)]))
    damage(data, flips, cut, how)
    if crc:  # past the CRC check, to the header's other fields and the records
        fix_crc(data)
    same_one(bytes(data), keep)


@needs_batch
@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=120))
def test_check_batch_on_arbitrary_bytes(data):
    buf = bytearray(data)
    fix_crc(buf)
    same_one(bytes(buf))


def test_validate_one_is_off_with_pykbroker_native_0():
    code = "from broker.log import streaming as S; print(S.native_batch is None, S.validate_one(b'x' * 70))"
    env = {**os.environ, "PYKBROKER_NATIVE": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True None"


# ---------------------------------------------------------------------------------------------
# syncfs: the compiled call and the manager's ctypes fallback


def _closed_fd() -> int:
    fd = os.open(os.curdir, os.O_RDONLY)
    os.close(fd)
    return fd


@needs_native
def test_syncfs_compiled_and_through_ctypes_give_the_same_answers(tmp_path):
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        assert _native.syncfs(fd) == manager._libc_syncfs(fd) == 0
    finally:
        os.close(fd)
    bad = _closed_fd()
    assert _native.syncfs(bad) == manager._libc_syncfs(bad) == errno.EBADF
    with pytest.raises(TypeError):
        _native.syncfs("not a descriptor")


@pytest.mark.parametrize("call", ["compiled", "ctypes"])
def test_a_failed_syncfs_raises_oserror_naming_what_it_synced(monkeypatch, call):
    if call == "compiled":
        if _native is None:
            pytest.skip("broker.log._native is not built")
        monkeypatch.setattr(manager, "_syncfs_call", _native.syncfs)
    else:
        monkeypatch.setattr(manager, "_syncfs_call", manager._libc_syncfs)
    with pytest.raises(OSError) as failed:
        manager._syncfs(_closed_fd(), "the data directory")
    assert (failed.value.errno, failed.value.filename) == (errno.EBADF, "the data directory")
    assert str(failed.value.strerror).startswith("syncfs: ")


def test_the_manager_syncs_through_the_compiled_call_and_ctypes_with_pykbroker_native_0():
    """ctypes is imported only by the fallback (not at start-up: tests/test_startup.py)."""
    if _native is not None and native_enabled():
        assert manager._syncfs_call is _native.syncfs
    code = (
        "import sys; from broker.log import manager as m; "
        "print(m._syncfs_call is m._libc_syncfs, 'ctypes' in sys.modules)"
    )
    env = {**os.environ, "PYKBROKER_NATIVE": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]


# ---------------------------------------------------------------------------------------------
# stamp_plain: the plain append's checks and stamps in one call

#: stamp_plain answers only with the extension on (PYKBROKER_NATIVE=0: the Python steps do it all)
needs_stamp = pytest.mark.skipif(S.native_stamp is None, reason="stamp_plain is not built or turned off")

#: the attribute bits that leave a batch to the Python steps (produce._NOT_PLAIN)
NOT_PLAIN = B.COMPRESSION_MASK | B.TIMESTAMP_TYPE_MASK | B.TRANSACTIONAL_MASK | B.CONTROL_MASK


def python_stamp(buf: bytes, now: int, before: int, after: int, base: int, epoch: int) -> tuple | None:
    """What produce._append_plain's Python steps make of ``buf`` when it has no producer id: the
    bytes appended, the next offset and the max timestamp; None where they do not take it."""
    one = python_one(buf)
    if one is None:
        return None
    info, stats = one
    if info.attributes & NOT_PLAIN or info.producer_id >= 0:
        return None
    if not validator.timestamps_within(info, stats, now, before, after):
        return None
    data = bytearray(buf)
    validator.set_max_timestamp(data, info, stats)
    next_offset = B.assign_offset(data, info, base, None, epoch)
    return bytes(data), next_offset, info.max_timestamp


def same_stamp(buf: bytes, now: int, before: int, after: int, base: int = 0, epoch: int = 0) -> tuple | None:
    """stamp_plain's answer on ``buf`` in each form a request's records take is the Python steps'
    (``python_stamp``); a writable view is stamped in place, any other form is left as it was, and
    a refusal changes nothing."""
    expected = python_stamp(buf, now, before, after, base, epoch)
    frame = bytearray(b"\xff" + buf + b"\xff")
    forms = (buf, bytearray(buf), memoryview(bytes(frame))[1:-1], memoryview(frame)[1:-1])
    for form in forms:
        got = S.native_stamp(form, now, before, after, base, epoch)
        writable = type(form) is memoryview and not form.readonly
        if expected is None:
            assert got is None, buf.hex()
            assert bytes(form) == buf
            continue
        data, next_offset, max_ts = got
        assert (bytes(data), next_offset, max_ts) == expected, buf.hex()
        if writable:
            assert data is form  # the request's own frame, stamped in place
        else:
            assert type(data) is bytearray and bytes(form) == buf
    return expected


@needs_stamp
def test_stamp_plain_stamps_what_the_python_steps_stamp():
    now = 1_700_000_000_000
    plain = R.simple_batch([b"a", b"b", b"c"], base_timestamp=now)
    stamped = same_stamp(plain, now, 1000, 1000, base=700, epoch=3)
    assert stamped is not None
    head = B.read_header(stamped[0], 0)
    assert (head.base_offset, head.partition_leader_epoch, stamped[1:]) == (700, 3, (703, now))
    # a producer's wrong max timestamp: rewritten, with the CRC over it
    wrong = R.simple_batch([b"a"], base_timestamp=now, max_timestamp=5)
    data, _next, max_ts = same_stamp(wrong, now, 1000, 1000)
    B.check_crc(data, B.read_header(data, 0))
    assert max_ts == now
    # records at -5 and -3: the max timestamp stays at -1, where Kafka's maximum starts
    negative = R.build_batch([Record(0, 0, None, b"a"), Record(1, 2, None, b"b")], base_timestamp=-5)
    data, _next, max_ts = same_stamp(negative, now, (1 << 63) - 1, 1000)
    assert max_ts == B.read_header(data, 0).max_timestamp == -1


@needs_stamp
@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"producer_id": 5, "producer_epoch": 0, "base_sequence": 0}, "a producer id: its state is checked"),
        ({"compression": 1}, "compressed"),
        ({"timestamp_type": 1}, "LogAppendTime from the client"),
        ({"producer_id": 5, "producer_epoch": 0, "base_sequence": 0, "transactional": True}, "transactional"),
        ({"control": True}, "a control batch"),
        ({"base_timestamp": 1_700_000_000_000 - 1001}, "older than before.max.ms"),
        ({"base_timestamp": 1_700_000_000_000 + 1001}, "newer than after.max.ms"),
    ],
)
def test_stamp_plain_leaves_the_rest_to_the_python_steps(kwargs, why):
    kwargs.setdefault("base_timestamp", 1_700_000_000_000)
    buf = R.simple_batch([b"a", b"b"], **kwargs)
    assert same_stamp(buf, 1_700_000_000_000, 1000, 1000) is None, why
    # within the bounds at their edges
    edge = R.simple_batch([b"a"], base_timestamp=1_700_000_000_000 - 1000)
    assert same_stamp(edge, 1_700_000_000_000, 1000, 1000) is not None
    edge = R.simple_batch([b"a"], base_timestamp=1_700_000_000_000 + 1000)
    assert same_stamp(edge, 1_700_000_000_000, 1000, 1000) is not None


@needs_stamp
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    *MUTATIONS,
    st.booleans(),
    st.integers(0, 1 << 45),
    st.integers(-(1 << 40), 1 << 40),
    st.just((1 << 63) - 1) | st.integers(0, 1 << 43),  # Kafka's default after.max.ms, or less
    st.just((1 << 63) - 1) | st.integers(0, 1 << 43),
    st.integers(0, 1 << 62),
    st.integers(-(1 << 31), (1 << 31) - 1),
    st.booleans(),
    st.booleans(),
)
def test_stamp_plain_on_mutated_batches(
    recs, flips, cut, how, crc, base_ts, skew, before, after, base, epoch, wrong_max, damaged
):
    """Valid and damaged batches, their timestamps (deltas up to 2^40 either way from the base)
    ``skew`` ms from now, against bounds small and large: stamp_plain agrees with the Python steps
    on each (about half of these are taken, the rest refused)."""
    data = bytearray(
        R.build_batch(
            [Record(i, ts, k, v) for i, (ts, k, v) in enumerate(recs)],
            base_timestamp=base_ts,
            max_timestamp=5 if wrong_max else None,
        )
    )
    if damaged:
        damage(data, flips, cut, how)
        if crc:  # past the CRC check, to the header's other fields and the records
            fix_crc(data)
    same_stamp(bytes(data), base_ts + skew, before, after, base, epoch)


#: the largest timestamp (a long)
TOP = (1 << 63) - 1


@needs_stamp
@pytest.mark.parametrize(("base_timestamp", "taken"), [(TOP - 11, True), (TOP - 10, True), (TOP - 9, False)])
def test_stamp_plain_leaves_timestamps_past_a_long_to_the_python_steps(base_timestamp, taken):
    """Records whose deltas (0 and 10) take the base timestamp past a long: refused here (the
    Python steps' exact arithmetic decides), never wrapped around; up to the top, taken."""
    buf = bytearray(R.build_batch([Record(0, 0, None, b"a"), Record(1, 10, None, b"b")]))
    buf[27:35] = base_timestamp.to_bytes(8, "big")
    fix_crc(buf)
    got = S.native_stamp(bytes(buf), TOP, TOP, TOP, 0, 0)
    assert (got is not None) == taken
    if taken:
        assert got[2] == base_timestamp + 10


def test_native_stamp_is_off_with_pykbroker_native_0():
    code = "from broker.log import streaming as S; print(S.native_stamp is None)"
    env = {**os.environ, "PYKBROKER_NATIVE": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
