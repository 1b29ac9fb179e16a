"""A minimal blocking Kafka client over a raw socket, built on our generated codecs.

For tests that need exact control of the bytes on the wire (bad frames, pipelining, versions).
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from broker.protocol.generated import APIS, codec, request_header
from broker.protocol.generated.request_header import RequestHeader


def request_bytes(
    api_key: int, version: int, body: Any, correlation_id: int = 1, client_id: str = "wire"
) -> bytes:
    """A complete frame (size prefix included) for ``body`` at ``version``."""
    info = APIS[api_key]
    hdr = RequestHeader(api_key, version, correlation_id, client_id)
    head = request_header.encode_v2(hdr) if info.is_flexible(version) else request_header.encode_v1(hdr)
    payload = head + codec(api_key).REQUEST_ENCODERS[version](body)
    return struct.pack(">i", len(payload)) + payload


class WireClient:
    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.next_id = 1

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, api_key: int, version: int, body: Any) -> int:
        cid = self.next_id
        self.next_id += 1
        self.send_raw(request_bytes(api_key, version, body, cid))
        return cid

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._read(4))[0]
        return self._read(size)

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            buf += chunk
        return buf

    def recv(self, api_key: int, version: int) -> tuple[int, Any]:
        """(correlation id, decoded response) of the next response frame."""
        frame = self.recv_frame()
        corr = struct.unpack_from(">i", frame, 0)[0]
        flexible_header = APIS[api_key].is_flexible(version) and api_key != 18
        pos = 4
        if flexible_header:
            assert frame[4] == 0, "unexpected tagged fields in the response header"
            pos = 5
        resp, end = codec(api_key).RESPONSE_DECODERS[version](frame, pos)
        assert end == len(frame), f"{len(frame) - end} trailing bytes in the response"
        return corr, resp

    def call(self, api_key: int, version: int, body: Any) -> Any:
        cid = self.send(api_key, version, body)
        corr, resp = self.recv(api_key, version)
        assert corr == cid
        return resp

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True once the broker has closed the connection (EOF or reset) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
        return data == b""
