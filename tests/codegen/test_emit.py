"""Emitter edge cases our served schemas do not reach, on synthetic schemas rendered in memory.

Covers every fixed-width array element type at sizes around the precompiled-Struct cut-off
(``codegen.emit.ARRAY_STRUCTS``) and the one-byte varint limit, ``[]uuid``, a field-level
``flexibleVersions: none`` inside a flexible message, a nullable struct, and a tag >= 128. Expected
bytes are written out by hand from the Kafka wire format.
"""

from __future__ import annotations

import json
import struct
import types
import uuid
from pathlib import Path

import pytest

from codegen.emit import ARRAY_STRUCTS
from codegen.generate import render_package


def _f(name: str, type_: str, versions: str = "0+", **extra: object) -> dict:
    return {"name": name, "type": type_, "versions": versions, "about": "x", **extra}


FIXED_ARRAYS = {
    "Bools": ("bool", "?", lambda i: i % 3 == 0),
    "Int8s": ("int8", "b", lambda i: (i % 256) - 128),
    "Int16s": ("int16", "h", lambda i: -(i * 257 % 32768)),
    "Uint16s": ("uint16", "H", lambda i: 65535 - i),
    "Int32s": ("int32", "i", lambda i: -(2**31) + i),
    "Uint32s": ("uint32", "I", lambda i: 2**32 - 1 - i),
    "Int64s": ("int64", "q", lambda i: -(2**63) + i),
    "Floats": ("float64", "d", lambda i: i / 4 - 7.5),
}
SCHEMAS = {
    "ArraysRequest": {
        "apiKey": 900,
        "type": "request",
        "name": "ArraysRequest",
        "validVersions": "0-1",
        "flexibleVersions": "1+",
        "fields": [_f(name, "[]" + t) for name, (t, _, _) in FIXED_ARRAYS.items()]
        + [_f("Strings", "[]string")],
    },
    "ArraysResponse": {
        "apiKey": 900,
        "type": "response",
        "name": "ArraysResponse",
        "validVersions": "0-1",
        "flexibleVersions": "1+",
        "fields": [_f("ErrorCode", "int16")],
    },
    "EdgeRequest": {
        "apiKey": 901,
        "type": "request",
        "name": "EdgeRequest",
        "validVersions": "0-1",
        "flexibleVersions": "1+",
        "fields": [
            _f("Text", "string", flexibleVersions="none"),
            _f("Owner", "Owner", nullableVersions="0+", default="null", fields=[_f("Name", "string")]),
            _f("Flag", "bool", "1+", taggedVersions="1+", tag=200, default="true"),
        ],
    },
    "EdgeResponse": {
        "apiKey": 901,
        "type": "response",
        "name": "EdgeResponse",
        "validVersions": "0-1",
        "flexibleVersions": "1+",
        "fields": [_f("Ids", "[]uuid")],
    },
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, types.ModuleType]:
    schema_dir = tmp_path_factory.mktemp("schemas")
    for name, doc in SCHEMAS.items():
        (schema_dir / f"{name}.json").write_text(json.dumps(doc))
    files = render_package(Path(schema_dir), "schemas")
    assert sorted(files) == ["__init__.py", "arrays.py", "edge.py"]
    out = {}
    for name in ("arrays", "edge"):
        mod = types.ModuleType(f"rendered_{name}")
        exec(compile(files[f"{name}.py"], f"{name}.py", "exec"), mod.__dict__)
        out[name] = mod
    return out


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def count(n: int, flexible: bool) -> bytes:
    return uvarint(n + 1) if flexible else struct.pack(">i", n)


SIZES = [0, 1, 2, ARRAY_STRUCTS - 1, ARRAY_STRUCTS, ARRAY_STRUCTS + 1, 127, 128, 300]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("v", [0, 1])
def test_fixed_width_arrays_at_every_size(rendered, v: int, n: int) -> None:
    mod = rendered["arrays"]
    values = {name: [gen(i) for i in range(n)] for name, (_, _, gen) in FIXED_ARRAYS.items()}
    strings = [f"é{i}" * (i % 5) for i in range(n)]
    obj = mod.ArraysRequest(**{k.lower(): x for k, x in values.items()}, strings=strings)
    expected = b"".join(
        count(n, v == 1) + struct.pack(f">{n}{code}", *values[name])
        for name, (_, code, _) in FIXED_ARRAYS.items()
    )
    expected += count(n, v == 1)
    for s in strings:
        raw = s.encode()
        expected += (uvarint(len(raw) + 1) if v == 1 else struct.pack(">h", len(raw))) + raw
    if v == 1:
        expected += b"\x00"
    data = mod.REQUEST_ENCODERS[v](obj)
    assert data == expected
    back, end = mod.REQUEST_DECODERS[v](data)
    assert end == len(data) and back == obj


def test_uuid_arrays(rendered) -> None:
    """[]uuid: 16 bytes per element after the count (no served schema has one yet)."""
    mod = rendered["edge"]
    failures = []
    for v in (0, 1):
        for n in (0, 1, 2, ARRAY_STRUCTS, 130):
            ids = [uuid.UUID(int=(i + 1) * 0x0101_0101_0101_0101) for i in range(n)]
            data = mod.RESPONSE_ENCODERS[v](mod.EdgeResponse(ids=ids))
            assert data == count(n, v == 1) + b"".join(u.bytes for u in ids) + (b"\x00" if v == 1 else b"")
            try:
                back, end = mod.RESPONSE_DECODERS[v](data)
            except Exception as e:
                failures.append(f"v{v}, {n} uuids: decode raised {type(e).__name__}: {e}")
                continue
            if (end, back.ids) != (len(data), ids):
                failures.append(
                    f"v{v}, {n} uuids: decoded {len(back.ids)} uuids ending at {end} of {len(data)}"
                )
    assert not failures, "EdgeResponse.Ids ([]uuid) does not decode:\n" + "\n".join(failures)


def test_field_flexible_none_nullable_struct_and_big_tag(rendered) -> None:
    mod = rendered["edge"]
    enc, dec = mod.REQUEST_ENCODERS, mod.REQUEST_DECODERS
    obj = mod.EdgeRequest(text="ab", owner=mod.Owner(name="xyz"), flag=False)
    expected = {
        # Text keeps its int16 length in flexible v1; Owner is a 1-byte marker then the struct.
        0: b"\x00\x02ab" + b"\x01" + b"\x00\x03xyz",
        1: b"\x00\x02ab" + b"\x01" + b"\x04xyz" + b"\x00" + b"\x01" + uvarint(200) + b"\x01\x00",
    }
    for v, want in expected.items():
        assert enc[v](obj) == want, v
        back, end = dec[v](want)
        assert end == len(want)
        assert back == (obj if v == 1 else mod.EdgeRequest(text="ab", owner=mod.Owner(name="xyz")))
    null_owner = mod.EdgeRequest(text="", owner=None)
    assert enc[1](null_owner) == b"\x00\x00" + b"\xff" + b"\x00"
    assert dec[1](b"\x00\x00\xff\x00") == (null_owner, 4)
