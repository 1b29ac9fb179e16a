"""Generated codecs: encode -> decode -> encode for every message at every version, and bad frames.

Bad-frame cases are built without trusting the encoder's layout knowledge: a field's length prefix
is located by encoding the message twice (field empty, field with one element/character) and
taking the first byte that differs.
"""

from __future__ import annotations

import struct
import tracemalloc
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from broker.protocol.primitives import DecodeError
from codegen.spec import FieldSpec, MessageSpec
from tests.support.values import all_specs, cases, class_for, codec, module_for, sample

BAD_FRAME_ERRORS = (DecodeError, struct.error, IndexError, UnicodeDecodeError, ValueError)
CASES = cases()
IDS = [f"{m.name}-v{v}" for m, v in CASES]
FLEXIBLE = [(m, v) for m, v in CASES if m.is_flexible(v)]


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_uvarint(b: bytes, p: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        byte = b[p]
        p += 1
        n |= (byte & 0x7F) << shift
        if byte < 0x80:
            return n, p
        shift += 7


# --------------------------------------------------------------------------------------- round trip


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize("m, v", CASES, ids=IDS)
def test_roundtrip(m: MessageSpec, v: int, nulls: bool) -> None:
    enc, dec = codec(m, v)
    obj = sample(m, v, nulls=nulls)
    data = enc(obj)
    assert isinstance(data, bytes)
    back, end = dec(data)
    assert end == len(data), f"{m.name} v{v}: decode stopped at {end} of {len(data)} bytes"
    assert back == obj
    assert enc(back) == data
    # decoding from an offset inside a larger buffer works the same way
    back2, end2 = dec(b"\x01\x02\x03" + data + b"\x04", 3)
    assert (back2, end2) == (obj, len(data) + 3)


def _has_records(s: Any, v: int) -> bool:
    return any(
        f.present(v)
        and (
            (f.type.kind == "var" and f.type.name == "records")
            or (f.struct is not None and _has_records(f.struct, v))
        )
        for f in s.fields
    )


RECORD_RESPONSES = [(m, v) for m, v in CASES if m.type == "response" and _has_records(m.root, v)]


def test_exactly_the_responses_with_records_have_part_encoders() -> None:
    """A response that carries record batches (Fetch) also has an encoder giving its parts, which the
    pipeline writes unjoined when the answer is large; no other message has one."""
    assert {m.name for m, _v in RECORD_RESPONSES} == {"FetchResponse"}
    for m in all_specs():
        if m.type != "response":  # (a request shares its response's module)
            continue
        parts = getattr(module_for(m), "RESPONSE_PART_ENCODERS", None)
        for v in m.versions:
            has = parts is not None and parts[v] is not None
            assert has == ((m, v) in RECORD_RESPONSES), f"{m.name} v{v}"


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize("m, v", RECORD_RESPONSES, ids=[f"{m.name}-v{v}" for m, v in RECORD_RESPONSES])
def test_part_encoders_give_the_bytes_of_the_encoder_and_the_records_uncopied(
    m: MessageSpec, v: int, nulls: bool
) -> None:
    enc, _dec = codec(m, v)
    parts_of = module_for(m).RESPONSE_PART_ENCODERS[v]
    obj = sample(m, v, nulls=nulls, big=not nulls)
    parts = parts_of(obj)
    assert type(parts) is list and all(type(p) is bytes or type(p) is memoryview for p in parts)
    assert b"".join(parts) == enc(obj)
    records = [p.records for t in obj.responses for p in t.partitions if p.records]
    assert records or nulls
    for r in records:  # the very objects read from the segments are among the parts
        assert any(part is r for part in parts)


def _big_cases() -> list[tuple[MessageSpec, int]]:
    out = []
    for m in all_specs():
        fv = m.flexible.intersect(m.valid)
        out += [(m, v) for v in sorted({m.valid.lo, m.valid.hi} | (set() if fv.empty else {fv.lo}))]
    return out


BIG = _big_cases()


@pytest.mark.parametrize("m, v", BIG, ids=[f"{m.name}-v{v}" for m, v in BIG])
def test_roundtrip_with_long_arrays(m: MessageSpec, v: int) -> None:
    """130-element arrays: two-byte compact counts and the run-time Struct path for fixed widths."""
    enc, dec = codec(m, v)
    obj = sample(m, v, nulls=False, big=True)
    data = enc(obj)
    back, end = dec(data)
    assert end == len(data)
    assert back == obj
    assert enc(back) == data


def _present(
    m: MessageSpec, v: int, obj: Any, s=None, path: str = ""
) -> Iterator[tuple[str, FieldSpec, Any]]:
    s = s or m.root
    for f in s.fields:
        if not f.present(v):
            continue
        value = getattr(obj, f.attr)
        yield path + f.name, f, value
        if f.struct is not None and value is not None:
            for item in value if isinstance(value, list) else [value]:
                yield from _present(m, v, item, f.struct, f"{path}{f.name}.")


@pytest.mark.parametrize("m, v", CASES, ids=IDS)
def test_samples_set_every_field_to_a_non_default_value(m: MessageSpec, v: int) -> None:
    """The round trip above is only as good as its samples."""
    values, nulls = sample(m, v, nulls=False), sample(m, v, nulls=True)
    for path, f, value in _present(m, v, values):
        default = getattr(class_for(m, _owner(m, path))(), f.attr)
        assert value is not None and value != default, f"{m.name} v{v} {path} = {value!r}"
        if f.type.kind == "array":
            assert len(value) == 2, path
    nullable = [(path, value) for path, f, value in _present(m, v, nulls) if v in f.nullable]
    assert all(value is None for _, value in nullable), nullable
    for f in m.root.fields:
        if not f.present(v):
            assert getattr(values, f.attr) == getattr(class_for(m, m.root)(), f.attr), f.name


def _owner(m: MessageSpec, path: str):
    """The struct spec that declares the field at ``path``."""
    s = m.root
    for name in path.split(".")[:-1]:
        s = next(f for f in s.fields if f.name == name).struct
    return s


# --------------------------------------------------------------------------------------- tagged fields


def _top_level_tagged(m: MessageSpec, v: int) -> list[FieldSpec]:
    return [f for f in m.root.fields if f.present(v) and f.is_tagged(v, True)]


@pytest.mark.parametrize("m, v", FLEXIBLE, ids=[f"{m.name}-v{v}" for m, v in FLEXIBLE])
def test_unknown_tagged_fields_survive_decode_and_encode(m: MessageSpec, v: int) -> None:
    enc, dec = codec(m, v)
    obj = sample(m, v, nulls=False)
    data = enc(obj)
    # The top-level tagged section is last; encoding without the known tagged fields finds its start.
    cls = class_for(m, m.root)
    bare = cls(**{a: getattr(obj, a) for a in cls._fields})
    for f in _top_level_tagged(m, v):
        setattr(bare, f.attr, getattr(cls(), f.attr))
    bare_data = enc(bare)
    assert bare_data.endswith(b"\x00")
    head = bare_data[:-1]
    assert data.startswith(head)
    section = data[len(head) :]
    count, p = read_uvarint(section, 0)
    assert count == len(_top_level_tagged(m, v))
    entries, tags = [], []
    for _ in range(count):
        start = p
        tag, p = read_uvarint(section, p)
        size, p = read_uvarint(section, p)
        p += size
        entries.append(section[start:p])
        tags.append(tag)
    assert p == len(section) and tags == sorted(tags) and all(t < 90 for t in tags)

    unknown = [(90, b"\x01\x02\x03"), (300, bytes(range(150)))]
    crafted = head + uvarint(count + 2) + b"".join(entries)
    crafted += b"".join(uvarint(t) + uvarint(len(d)) + d for t, d in unknown)
    back, end = dec(crafted)
    assert end == len(crafted)
    assert back == obj
    assert [(t, bytes(d)) for t, d in back._unknown_tagged] == unknown
    assert enc(back) == crafted


@pytest.mark.parametrize("m, v", FLEXIBLE, ids=[f"{m.name}-v{v}" for m, v in FLEXIBLE])
def test_bad_top_level_tagged_sections_are_rejected(m: MessageSpec, v: int) -> None:
    enc, dec = codec(m, v)
    cls = class_for(m, m.root)
    data = enc(cls())
    assert data.endswith(b"\x00")
    head = data[:-1]
    bad = {
        "count beyond the frame": head + uvarint(2**31),
        "size beyond the frame": head + b"\x01" + uvarint(90) + uvarint(1000) + b"xx",
        "tags out of order": head + b"\x02" + b"\x5b\x00" + b"\x5a\x00",
        "repeated tag": head + b"\x02" + b"\x5a\x00" + b"\x5a\x00",
    }
    for what, frame in bad.items():
        with pytest.raises(BAD_FRAME_ERRORS):
            dec(frame)
            pytest.fail(f"{m.name} v{v}: {what} decoded without error")


# --------------------------------------------------------------------------------------- truncation


def _truncation_cases() -> list[tuple[MessageSpec, int]]:
    out = []
    for m in all_specs():
        vs = {m.valid.lo, m.valid.hi}
        fv = m.flexible.intersect(m.valid)
        if not fv.empty:
            vs |= {fv.lo, max(fv.lo - 1, m.valid.lo)}
        out += [(m, v) for v in sorted(vs)]
    return out


TRUNCATION = _truncation_cases()


@pytest.mark.parametrize("m, v", TRUNCATION, ids=[f"{m.name}-v{v}" for m, v in TRUNCATION])
def test_every_truncated_prefix_is_rejected(m: MessageSpec, v: int) -> None:
    enc, dec = codec(m, v)
    for nulls in (False, True):
        data = enc(sample(m, v, nulls=nulls))
        for n in range(len(data)):
            try:
                dec(data[:n])
            except BAD_FRAME_ERRORS:
                continue
            pytest.fail(f"{m.name} v{v}: a {n}-byte prefix of a {len(data)}-byte frame decoded")


# --------------------------------------------------------------------------------------- length prefixes


def _length_fields(m: MessageSpec, v: int) -> Iterator[tuple[FieldSpec, ...]]:
    """Paths to every string/bytes/array field reachable without passing through a tagged field."""
    flex = m.is_flexible(v)

    def walk(s, prefix):
        for f in s.fields:
            if not f.present(v) or f.is_tagged(v, flex):
                continue
            if f.type.kind in ("var", "array"):
                yield prefix + (f,)
            if f.struct is not None:
                yield from walk(f.struct, prefix + (f,))

    yield from walk(m.root, ())


def _set(obj: Any, path: tuple[FieldSpec, ...], value: Any) -> None:
    for f in path[:-1]:
        obj = getattr(obj, f.attr)
        if isinstance(obj, list):
            obj = obj[0]
    setattr(obj, path[-1].attr, value)


def _get(obj: Any, path: tuple[FieldSpec, ...]) -> Any:
    for f in path:
        obj = obj[0] if isinstance(obj, list) else obj
        obj = getattr(obj, f.attr)
    return obj


def _one(m: MessageSpec, f: FieldSpec) -> Any:
    """A one-element (or one-character) value for a string/bytes/array field."""
    t = f.type
    if t.kind == "var":
        return "a" if t.name == "string" else b"a"
    el = t.element
    if el.kind == "struct":
        return [class_for(m, f.struct)()]
    return [{"string": "a", "bool": True, "uuid": uuid.UUID(int=1), "float64": 1.0}.get(el.name, 1)]


def _locate(m: MessageSpec, v: int, path: tuple[FieldSpec, ...], empty: Any, one: Any):
    """(frame with the field empty, offset of its length prefix, prefix width, compact?)."""
    enc, _ = codec(m, v)
    f = path[-1]
    obj = sample(m, v, nulls=False)
    _set(obj, path, one)
    with_one = enc(obj)
    _set(obj, path, empty)
    frame = enc(obj)
    i = next(i for i, (a, b) in enumerate(zip(frame, with_one, strict=False)) if a != b)
    compact = f.is_flexible(v, m.is_flexible(v))
    is_string = (f.type.kind == "var" and f.type.name == "string") or (
        isinstance(empty, list) and empty == [""]
    )
    width = 1 if compact else (2 if is_string else 4)
    off = i - (width - 1)
    assert frame[off : off + width] == (b"\x01" if compact else bytes(width)), (m.name, v, f.name)
    return frame, off, width, compact


LENGTH_CASES = [(m, v) for m, v in CASES if any(True for _ in _length_fields(m, v))]
LENGTH_IDS = [f"{m.name}-v{v}" for m, v in LENGTH_CASES]


@pytest.mark.parametrize("m, v", LENGTH_CASES, ids=LENGTH_IDS)
def test_null_length_is_rejected_unless_nullable(m: MessageSpec, v: int) -> None:
    enc, dec = codec(m, v)
    checked = 0
    for path in _length_fields(m, v):
        f = path[-1]
        empty = [] if f.type.kind == "array" else ("" if f.type.name == "string" else b"")
        frame, off, width, compact = _locate(m, v, path, empty, _one(m, f))
        crafted = frame[:off] + (b"\x00" if compact else b"\xff" * width) + frame[off + width :]
        where = f"{m.name} v{v} {'.'.join(x.name for x in path)}"
        if v in f.nullable:
            back, end = dec(crafted)
            assert end == len(crafted), where
            assert _get(back, path) is None, where
            assert enc(back) == crafted, where
        else:
            with pytest.raises(DecodeError, match=f"null in non-nullable field {f.name}\\b"):
                dec(crafted)
                pytest.fail(f"{where}: null decoded")
        checked += 1
        if f.type.kind == "array" and f.type.element.name == "string":
            frame, off, width, compact = _locate(m, v, path, [""], ["a"])
            crafted = frame[:off] + (b"\x00" if compact else b"\xff\xff") + frame[off + width :]
            with pytest.raises(DecodeError, match=f"null string inside {f.name}\\b"):
                dec(crafted)
                pytest.fail(f"{where}: null array element decoded")
    assert checked


@pytest.mark.parametrize("m, v", LENGTH_CASES, ids=LENGTH_IDS)
def test_lengths_beyond_the_frame_raise_before_allocating(m: MessageSpec, v: int) -> None:
    _, dec = codec(m, v)
    for path in _length_fields(m, v):
        f = path[-1]
        empty = [] if f.type.kind == "array" else ("" if f.type.name == "string" else b"")
        frame, off, width, compact = _locate(m, v, path, empty, _one(m, f))
        assert len(frame) < 0x7FFF
        huge = uvarint(2**31) if compact else (b"\x7f\xff" if width == 2 else b"\x7f\xff\xff\xff")
        crafted = frame[:off] + huge + frame[off + width :]
        tracemalloc.start()
        try:
            with pytest.raises(BAD_FRAME_ERRORS):
                dec(crafted)
                pytest.fail(f"{m.name} v{v} {f.name}: oversized length decoded")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 1_000_000, f"{m.name} v{v} {f.name}: {peak} bytes allocated before failing"


def test_array_count_beyond_the_frame_is_a_decode_error() -> None:
    """A struct array whose count exceeds the bytes left fails with a clear DecodeError."""
    m = next(m for m in all_specs() if m.name == "JoinGroupRequest")
    path = (next(f for f in m.root.fields if f.name == "Protocols"),)
    for v in (0, 6):
        frame, off, width, compact = _locate(m, v, path, [], _one(m, path[0]))
        huge = uvarint(2**31) if compact else b"\x7f\xff\xff\xff"
        with pytest.raises(DecodeError, match="Protocols count exceeds the frame"):
            codec(m, v)[1](frame[:off] + huge + frame[off + width :])


# --------------------------------------------------------------------------------------- KIP-848 v1 bytes


def test_consumer_group_heartbeat_v1_adds_the_regex_before_the_server_assignor() -> None:
    m = next(m for m in all_specs() if m.name == "ConsumerGroupHeartbeatRequest")
    (enc0, dec0), (enc1, _) = codec(m, 0), codec(m, 1)
    obj = sample(m, 1, nulls=False)
    obj.server_assignor = "ASSIGNOR-MARK"
    marker = b"\x0eASSIGNOR-MARK"
    for regex, wire in [("foo.*", b"\x06foo.*"), (None, b"\x00")]:
        obj.subscribed_topic_regex = regex
        v0, v1 = enc0(obj), enc1(obj)
        assert v0.count(marker) == 1
        i = v0.index(marker)
        assert v1 == v0[:i] + wire + v0[i:]
    back, end = dec0(v0)
    assert end == len(v0) and back.subscribed_topic_regex is None


def test_consumer_group_describe_v1_adds_member_type_after_target_assignment() -> None:
    m = next(m for m in all_specs() if m.name == "ConsumerGroupDescribeResponse")
    (enc0, dec0), (enc1, dec1) = codec(m, 0), codec(m, 1)
    obj = sample(m, 1, nulls=False)
    obj.groups = obj.groups[:1]
    members = obj.groups[0].members
    assert len(members) == 2
    members[0].member_type, members[1].member_type = 1, -1
    v0, v1 = enc0(obj), enc1(obj)
    assert len(v1) == len(v0) + 2
    rest, inserted = v1, []
    for _ in members:
        i = next(i for i, (a, b) in enumerate(zip(rest, v0, strict=False)) if a != b)
        assert rest[i + 1] == 0, "the member's tagged-field byte follows MemberType"
        inserted.append(rest[i])
        rest = rest[:i] + rest[i + 1 :]
    assert rest == v0 and inserted == [0x01, 0xFF]
    assert dec1(v1)[0] == obj
    assert [x.member_type for x in dec0(v0)[0].groups[0].members] == [-1, -1]
