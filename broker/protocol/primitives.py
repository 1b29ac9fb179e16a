"""Wire primitives shared by the generated codecs: varints, tagged-field sections, the message base.

Generated code inlines the common cases (one-byte varints, fixed-width runs packed with one
``struct.Struct``) and calls into this module only for the rare ones (multi-byte varints, tagged
fields it does not know). Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from struct import Struct
from struct import error as StructError
from typing import Any
from uuid import UUID

__all__ = [
    "DecodeError",
    "EncodeError",
    "Message",
    "ARRAYS",
    "UV",
    "ZERO_UUID",
    "MISSING",
    "uvarint_tail",
    "uvarint",
    "read_uvarint",
    "write_tagged",
    "read_unknown_tagged",
    "to_uuid",
]


class DecodeError(ValueError):
    """A frame does not parse as the message and version it claims to be."""


class EncodeError(ValueError):
    """A message holds a value its wire format cannot carry."""


#: ``UV[n]`` is the one-byte unsigned varint for ``n < 128``.
UV: tuple[bytes, ...] = tuple(bytes((i,)) for i in range(128))

#: ``ARRAYS[c][n]`` unpacks n big-endian elements of struct code ``c`` (n < 64).
ARRAYS: dict[str, tuple[Struct, ...]] = {
    c: tuple(Struct(f">{n}{c}") for n in range(64)) for c in ("?", "b", "h", "H", "i", "I", "q", "d")
}

ZERO_UUID = UUID(int=0)
_ZERO_UUID_BYTES = bytes(16)


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


#: Decoders build objects with ``new(cls)`` and store each slot directly: no constructor call.
new = object.__new__

#: Sentinel default for constructor arguments whose default is a fresh mutable value.
MISSING: Any = _Missing()


def to_uuid(raw: bytes | bytearray) -> UUID:
    """The UUID of 16 bytes of a frame: ``bytes``, or a ``bytearray`` slice of a Produce frame
    gathered from several reads (framing.FrameReader), which ``UUID`` itself refuses."""
    if raw == _ZERO_UUID_BYTES:
        return ZERO_UUID
    return UUID(bytes=raw if type(raw) is bytes else bytes(raw))


def short_topic(b: bytes, p: int, end: int, by_id: bool) -> tuple[str, UUID, int] | None:
    """(the direct decoders of flexible requests) a topic's reference at ``p``: its id (``by_id``,
    name "") or its compact name of at most 126 bytes (one-byte length, id zero); the name, the id
    and the position after it, or None for anything else (the generated decoder takes that)."""
    if by_id:
        return "", to_uuid(b[p : p + 16]), p + 16
    n = b[p] - 1
    p += 1
    if n < 0 or n > 126 or p + n > end:
        return None
    return b[p : p + n].decode(), ZERO_UUID, p + n


#: what a direct parse raises on a malformed frame (the generated decoder then names the error)
_DIRECT_PARSE_ERRORS = (IndexError, StructError, UnicodeDecodeError, ValueError)


def direct_decoder(
    v: int,
    direct: Callable[[bytes, int, int], tuple[Any, int] | None],
    generated: Callable[[bytes, int], tuple[Any, int]],
    native: Callable[[bytes, int, int], tuple[Any, int] | None] | None = None,
) -> Callable[[bytes, int], tuple[Any, int]]:
    """The request decoder of version ``v`` for a request whose common shape is parsed directly:
    ``native`` (its compiled parse; None where it is not built or turned off) and then ``direct``
    (its Python parse), each ``(frame, pos, v) -> (request, end)`` or None for a frame it does not
    take, and the generated decoder for every other frame (it names what is malformed)."""

    def decode(b: bytes, p: int = 0) -> tuple[Any, int]:
        if native is not None:
            out = native(b, p, v)
            if out is not None:
                return out
        try:
            out = direct(b, p, v)
        except _DIRECT_PARSE_ERRORS:
            out = None
        return out if out is not None else generated(b, p)

    decode.__name__ = decode.__qualname__ = f"decode_request_v{v}"
    return decode


def uvarint_tail(b: bytes, p: int, first: int) -> tuple[int, int]:
    """Finish an unsigned varint whose first byte (``first`` >= 128) sat just before ``p``."""
    result = first & 0x7F
    shift = 7
    while True:
        byte = b[p]
        p += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, p
        shift += 7
        if shift > 28:
            raise DecodeError("unsigned varint longer than 5 bytes")


def read_uvarint(b: bytes, p: int) -> tuple[int, int]:
    n = b[p]
    if n < 0x80:
        return n, p + 1
    return uvarint_tail(b, p + 1, n)


def uvarint(n: int) -> bytes:
    """Encode a non-negative int as an unsigned varint."""
    if n < 0x80:
        if n < 0:
            raise EncodeError(f"cannot encode {n} as an unsigned varint")
        return UV[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_unknown_tagged(b: bytes, p: int, count: int) -> tuple[list[tuple[int, bytes]], int]:
    """Read ``count`` tagged fields none of which the schema knows; keep them as (tag, bytes)."""
    if count > len(b) - p:
        raise DecodeError("tagged field count exceeds the frame")
    out = []
    last = -1
    for _ in range(count):
        tag, p = read_uvarint(b, p)
        size, p = read_uvarint(b, p)
        if tag <= last:
            raise DecodeError(f"tagged fields out of order: tag {tag} after {last}")
        last = tag
        end = p + size
        if end > len(b):
            raise DecodeError("tagged field runs past the end of the frame")
        out.append((tag, b[p:end]))
        p = end
    return out, p


def write_tagged(
    w: Callable[[bytes], Any],
    known: list[tuple[int, bytes]] | None,
    unknown: list[tuple[int, bytes]] | None,
) -> None:
    """Write a tagged-field section: known fields (already encoded) and preserved unknown ones."""
    if not unknown:
        fields = known or []
    elif not known:
        fields = unknown
    else:
        fields = sorted(known + list(unknown))
    w(uvarint(len(fields)))
    for tag, data in fields:
        w(uvarint(tag))
        w(uvarint(len(data)))
        w(data)


class Message:
    """Base of every generated struct: equality, repr and a dict view over the declared fields."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self._fields)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({inner})"

    def to_dict(self) -> dict[str, Any]:
        def conv(v: Any) -> Any:
            if isinstance(v, Message):
                return v.to_dict()
            if isinstance(v, list):
                return [conv(x) for x in v]
            return v

        return {f: conv(getattr(self, f)) for f in self._fields}
