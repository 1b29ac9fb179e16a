"""Sans-IO framing: split a byte stream into Kafka request frames, and build response frames.

A frame is a big-endian int32 size followed by that many bytes. ``FrameReader.feed`` returns every
complete frame the new bytes finish, and raises :class:`FrameError` on a size below zero or above
the cap (Kafka's ``socket.request.max.bytes``), after which the connection must be closed.
"""

from __future__ import annotations

from struct import Struct

from broker.protocol.primitives import DecodeError, read_unknown_tagged, uvarint_tail

_SIZE = Struct(">i")
#: api_key, api_version, correlation_id: the fixed start of every request header version.
REQUEST_PREFIX = Struct(">hhi")
_SIZE_CORR = Struct(">ii")
#: size, correlation id and the empty tagged-field section of a response header v1
_SIZE_CORR_TAGS = Struct(">iiB")
#: Incomplete frames larger than this are gathered as chunks instead of re-concatenated per read.
_CHUNKED = 64 << 10
#: joins the parts of a chunked Produce frame into one writable buffer
_PRODUCE_JOIN = bytearray().join


_INT16 = Struct(">h")


def peek_client_id(frame: bytes) -> str | None:
    """The client id of a request header (v1 and later), read without knowing the API: it follows
    the fixed prefix as an int16-length string in every header version, flexible ones included.
    None when absent or unreadable (used to name the client when a request cannot be decoded)."""
    try:
        (n,) = _INT16.unpack_from(frame, REQUEST_PREFIX.size)
    except Exception:
        return None
    start = REQUEST_PREFIX.size + 2
    if n < 0 or start + n > len(frame):
        return None
    return bytes(frame[start : start + n]).decode("utf-8", "replace")


def request_header_v1(frame: bytes) -> tuple[str | None, int]:
    """Request header v1 at the start of ``frame``: its client id and the position after it. What
    the generated ``request_header.decode_v1`` reads (the same checks, the same exceptions), without
    building a RequestHeader: the pipeline has the fixed prefix already and uses only the client id."""
    n = _INT16.unpack_from(frame, 8)[0]
    if n < 0:
        return None, 10
    client_id = frame[10 : 10 + n].decode()
    if 10 + n > len(frame):
        raise DecodeError("RequestHeader v1: frame ends inside the message")
    return client_id, 10 + n


def request_header_v2(frame: bytes) -> tuple[str | None, int]:
    """:func:`request_header_v1` for header v2 (flexible: a tagged-field section follows the
    client id, whose unknown fields are skipped as the generated ``decode_v2`` reads them)."""
    n = _INT16.unpack_from(frame, 8)[0]
    if n < 0:
        client_id = None
        p = 10
    else:
        client_id = frame[10 : 10 + n].decode()
        p = 10 + n
    tags = frame[p]
    p += 1
    if tags:
        if tags > 127:
            tags, p = uvarint_tail(frame, p, tags)
        p = read_unknown_tagged(frame, p, tags)[1]
    if p > len(frame):
        raise DecodeError("RequestHeader v2: frame ends inside the message")
    return client_id, p


class FrameError(ValueError):
    """The stream cannot be framed; the connection must be closed."""


class FrameReader:
    """Splits a stream into frames. A frame still arriving is kept as a list of chunks (views of the
    reads, without its size prefix), joined once complete into exactly the frame's bytes: memory
    grows with the bytes received (never preallocated from the size prefix) and a large frame
    arriving in many reads is copied once (a produce request of 2,000 records is ~230 KB in 4 reads),
    not once per read nor once more to cut it out of the joined reads. A frame is ``bytes``, except
    a Produce request's (API key 0): a ``bytearray`` that its handler owns, joined or cut out of a
    read by the one copy a frame costs anyway, in which the append stamps the record batches
    (dispatch/produce.py ``_append``) instead of copying them once more."""

    __slots__ = ("max_size", "_buf", "_parts", "_have", "_need")

    def __init__(self, max_size: int):
        self.max_size = max_size
        self._buf = b""
        #: views of the chunks of an incomplete frame whose size prefix is known (``_need`` bytes in
        #: all with the prefix, ``_have`` of them received)
        self._parts: list[bytes | memoryview] = []
        self._have = 0
        self._need = 0

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buf) + self._have

    def feed(self, data: bytes) -> list[bytes]:
        frames = []
        if self._parts:
            have = self._have + len(data)
            if have < self._need:
                self._parts.append(data)
                self._have = have
                return frames
            cut = len(data) - (have - self._need)  # the bytes of ``data`` that finish the frame
            parts = self._parts
            parts.append(data if cut == len(data) else memoryview(data)[:cut])
            # a Produce request (API key 0) is joined into a bytearray: the append stamps its
            # batches in place (base offset, leader epoch, max timestamp) instead of copying them
            first = parts[0]
            produce = len(first) >= 2 and first[0] == 0 and first[1] == 0
            frames.append(_PRODUCE_JOIN(parts) if produce else b"".join(parts))
            self._parts = []
            self._have = self._need = 0
            if cut == len(data):
                return frames
            data = data[cut:]
        buf = self._buf + data if self._buf else data
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            size = _SIZE.unpack_from(buf, pos)[0]
            if size < 0 or size > self.max_size:
                self._buf = b""
                raise FrameError(f"frame size {size} outside 0..{self.max_size}")
            stop = pos + 4 + size
            if stop > end:
                if size > _CHUNKED:
                    self._parts = [memoryview(buf)[pos + 4 :]]
                    self._have = end - pos
                    self._need = 4 + size
                    self._buf = b""
                    return frames
                break
            start = pos + 4
            # a Produce request (API key 0) is cut into a bytearray, as a joined one is (above): the
            # copy that cuts it out is the one its batches are stamped in
            if size >= 2 and buf[start] == 0 and buf[start + 1] == 0:
                frames.append(bytearray(memoryview(buf)[start:stop]))
            else:
                frames.append(buf[start:stop])
            pos = stop
        self._buf = buf[pos:] if pos < end else b""
        return frames


#: response bodies at least this large are framed as (header, body), written apart: prefixing the
#: header to the body would copy the body (a Fetch answer of many MB) once more
LARGE_BODY = 256 * 1024


def response_parts(correlation_id: int, flexible_header: bool, body: bytes) -> tuple[bytes, bytes]:
    """:func:`response_frame` as (size prefix + response header, body), for large bodies: the
    connection writes the two one after the other and never joins them."""
    return response_header(correlation_id, flexible_header, len(body)), body


def response_header(correlation_id: int, flexible_header: bool, body_size: int) -> bytes:
    """The size prefix and response header of a frame whose body has ``body_size`` bytes."""
    if flexible_header:
        return _SIZE_CORR.pack(body_size + 5, correlation_id) + b"\x00"
    return _SIZE_CORR.pack(body_size + 4, correlation_id)


def frame_size(frame: bytes | tuple) -> int:
    """The bytes of a response frame: ``bytes``, or a large one as a tuple of its parts."""
    return len(frame) if type(frame) is bytes else sum(map(len, frame))


def response_frame(correlation_id: int, flexible_header: bool, body: bytes) -> bytes:
    """Size prefix + response header (v1 if ``flexible_header`` else v0) + body."""
    if flexible_header:
        return _SIZE_CORR_TAGS.pack(len(body) + 5, correlation_id, 0) + body
    return _SIZE_CORR.pack(len(body) + 4, correlation_id) + body
