"""kafka-python 3.0.12's message classes and value conversion between its objects and ours.

Fields are paired by schema position among the fields present at a version (kafka-python keeps
``_struct._fields`` in schema order). Its quirks handled here: ``bitfield`` fields (authorized
operations) hold a set of bit positions, with None for INT32_MIN; decoded bytes may be a memoryview
or bytearray; absent fields read back as the schema default.
"""

from __future__ import annotations

import importlib
import importlib.resources
import pkgutil
from functools import cache
from typing import Any

from codegen.spec import FieldSpec, MessageSpec, StructSpec

from .reference import strip_comments
from .values import class_for

#: (our attribute, kafka-python attribute) pairs that differ only in name.
RENAMES = {
    ("topic_authorized_operations", "authorized_operations"),
    ("cluster_authorized_operations", "authorized_operations"),
}
INT32_MIN = -(2**31)


@cache
def message_classes() -> dict[str, type]:
    """Message name -> kafka-python class, for every request, response and header it defines."""
    import kafka.protocol as kp
    from kafka.protocol.api_header import RequestHeader, ResponseHeader
    from kafka.protocol.api_message import ApiMessage

    found: dict[str, type] = {"RequestHeader": RequestHeader, "ResponseHeader": ResponseHeader}
    for info in pkgutil.walk_packages(kp.__path__, kp.__name__ + "."):
        mod = importlib.import_module(info.name)
        for obj in vars(mod).values():
            if (
                isinstance(obj, type)
                and issubclass(obj, ApiMessage)
                and getattr(obj, "_json", None)
                and obj._class_version is None
            ):
                name = obj._json["name"]
                assert found.get(name, obj) is obj, f"two kafka-python classes for {name}"
                found[name] = obj
    return found


@cache
def raw_schema(name: str) -> dict:
    """kafka-python's bundled JSON for a message, unpatched."""
    import json

    text = importlib.resources.files("kafka.protocol.schemas.resources").joinpath(name + ".json").read_text()
    return json.loads(strip_comments(text))


def kp_fields(kp_struct: Any, v: int) -> list[Any]:
    return [f for f in kp_struct._fields if f.for_version_q(v)]


def pair_fields(s: StructSpec, kp_struct: Any, v: int, where: str) -> list[tuple[FieldSpec, Any]]:
    ours = [f for f in s.fields if f.present(v)]
    theirs = kp_fields(kp_struct, v)
    names = [(f.attr, k.name) for f, k in zip(ours, theirs, strict=False)]
    assert len(ours) == len(theirs) and all(a == b or (a, b) in RENAMES for a, b in names), (
        f"{where} v{v}: fields do not pair up: ours {[f.attr for f in ours]}, "
        f"kafka-python {[k.name for k in theirs]}"
    )
    return list(zip(ours, theirs, strict=True))


def to_bits(value: int) -> set[int] | None:
    bits = {i for i in range(32) if (value & 0xFFFFFFFF) >> i & 1}
    return None if bits == {31} else bits


def from_bits(bits: set[int] | None) -> int:
    if bits is None:
        return INT32_MIN
    n = sum(1 << b for b in bits)
    return n - (1 << 32) if n & (1 << 31) else n


# ----------------------------------------------------------------------------------- ours -> theirs


def to_kp(m: MessageSpec, obj: Any, v: int, kp_cls: type) -> Any:
    """A kafka-python object holding the same values as our object ``obj`` at version ``v``."""
    kwargs = _kp_kwargs(m, m.root, obj, kp_cls._struct, v)
    if m.type == "header":
        return kp_cls(**kwargs)
    return kp_cls(version=v, **kwargs)


def _kp_kwargs(m: MessageSpec, s: StructSpec, obj: Any, kp_struct: Any, v: int) -> dict[str, Any]:
    return {
        kf.name: _to_kp_value(m, f, kf, getattr(obj, f.attr), v)
        for f, kf in pair_fields(s, kp_struct, v, s.name)
    }


def _to_kp_value(m: MessageSpec, f: FieldSpec, kf: Any, value: Any, v: int) -> Any:
    if kf._type_str == "bitfield":
        return to_bits(value)
    if value is None:
        return None
    if kf.is_struct_array():
        inner = kf.array_of
        return [inner.data_class(**_kp_kwargs(m, f.struct, x, inner, v)) for x in value]
    if kf.is_struct():
        return kf.data_class(**_kp_kwargs(m, f.struct, value, kf, v))
    if kf.is_array():
        return list(value)
    return value


# ----------------------------------------------------------------------------------- theirs -> ours


def from_kp(m: MessageSpec, kp_obj: Any, v: int) -> Any:
    """Our generated object holding the values of a decoded kafka-python object."""
    return _from_kp_struct(m, m.root, kp_obj, type(kp_obj)._struct, v)


def _from_kp_struct(m: MessageSpec, s: StructSpec, kp_obj: Any, kp_struct: Any, v: int) -> Any:
    kwargs = {}
    for f, kf in pair_fields(s, kp_struct, v, s.name):
        kwargs[f.attr] = _from_kp_value(m, f, kf, getattr(kp_obj, kf.name), v)
    return class_for(m, s)(**kwargs)


def _from_kp_value(m: MessageSpec, f: FieldSpec, kf: Any, value: Any, v: int) -> Any:
    if kf._type_str == "bitfield":
        return from_bits(value)
    if value is None:
        return None
    if kf.is_struct_array():
        return [_from_kp_struct(m, f.struct, x, kf.array_of, v) for x in value]
    if kf.is_struct():
        return _from_kp_struct(m, f.struct, value, kf, v)
    if kf.is_array():
        return [bytes(x) if isinstance(x, (memoryview, bytearray)) else x for x in value]
    if isinstance(value, (memoryview, bytearray)):
        return bytes(value)
    return value


def diff_paths(a: Any, b: Any, path: str = "") -> list[str]:
    """Paths at which two of our objects differ (for readable failures)."""
    if type(a) is not type(b) and not (
        isinstance(a, (bytes, memoryview)) and isinstance(b, (bytes, memoryview))
    ):
        return [f"{path or '<root>'}: {a!r} != {b!r}"]
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} != {len(b)} elements"]
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in diff_paths(x, y, f"{path}[{i}]")
        ]
    fields = getattr(a, "_fields", None)
    if fields is not None:
        return [
            d for name in fields for d in diff_paths(getattr(a, name), getattr(b, name), f"{path}.{name}")
        ]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]
