"""Sans-IO framing: split a byte stream into Kafka request frames, and build response frames.

A frame is a big-endian int32 size followed by that many bytes. ``FrameReader.feed`` returns every
complete frame the new bytes finish, and raises :class:`FrameError` on a size below zero or above
the cap (Kafka's ``socket.request.max.bytes``), after which the connection must be closed.
"""

from __future__ import annotations

from struct import Struct

_SIZE = Struct(">i")
#: api_key, api_version, correlation_id: the fixed start of every request header version.
REQUEST_PREFIX = Struct(">hhi")
_SIZE_CORR = Struct(">ii")


class FrameError(ValueError):
    """The stream cannot be framed; the connection must be closed."""


class FrameReader:
    __slots__ = ("max_size", "_buf")

    def __init__(self, max_size: int):
        self.max_size = max_size
        self._buf = b""

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buf + data if self._buf else data
        frames = []
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            size = _SIZE.unpack_from(buf, pos)[0]
            if size < 0 or size > self.max_size:
                self._buf = b""
                raise FrameError(f"frame size {size} outside 0..{self.max_size}")
            stop = pos + 4 + size
            if stop > end:
                break
            frames.append(buf[pos + 4 : stop])
            pos = stop
        self._buf = buf[pos:] if pos < end else b""
        return frames


def response_frame(correlation_id: int, flexible_header: bool, body: bytes) -> bytes:
    """Size prefix + response header (v1 if ``flexible_header`` else v0) + body."""
    if flexible_header:
        return _SIZE_CORR.pack(len(body) + 5, correlation_id) + b"\x00" + body
    return _SIZE_CORR.pack(len(body) + 4, correlation_id) + body
