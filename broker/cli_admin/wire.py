"""A small blocking client on the project's generated codecs, for the requests kafka-python does
not offer: ConsumerGroupDescribe (KIP-848 groups) and the FindCoordinator that precedes it."""

from __future__ import annotations

import socket
import struct
from typing import Any

from broker.protocol.generated import APIS, codec, request_header
from broker.protocol.generated.consumer_group_describe import ConsumerGroupDescribeRequest
from broker.protocol.generated.find_coordinator import FindCoordinatorRequest
from broker.protocol.generated.request_header import RequestHeader
from broker.protocol.primitives import read_uvarint

FIND_COORDINATOR, CONSUMER_GROUP_DESCRIBE = 10, 69


class WireError(Exception):
    """The broker answered with an error code (``code``), or not as the protocol says."""

    def __init__(self, message: str, code: int = -1):
        super().__init__(message)
        self.code = code


def call(host: str, port: int, api_key: int, version: int, body: Any, timeout: float = 10.0) -> Any:
    """Send one request on a new connection and return the decoded response."""
    hdr = RequestHeader(api_key, version, 1, "pykbroker-cli")
    flexible = APIS[api_key].is_flexible(version)
    head = request_header.encode_v2(hdr) if flexible else request_header.encode_v1(hdr)
    payload = head + codec(api_key).REQUEST_ENCODERS[version](body)
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", _read(sock, 4))[0]
        frame = _read(sock, size)
    if struct.unpack_from(">i", frame)[0] != 1:
        raise WireError("response with another correlation id")
    pos = 4
    if flexible:  # response header v1: tagged fields
        count, pos = read_uvarint(frame, pos)
        for _ in range(count):
            _tag, pos = read_uvarint(frame, pos)
            n, pos = read_uvarint(frame, pos)
            pos += n
    response, _end = codec(api_key).RESPONSE_DECODERS[version](frame, pos)
    return response


def _read(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        buf += chunk
    return buf


def _host_port(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    return host.strip("[]"), int(port)


def describe_consumer_group(bootstrap: str, group: str, timeout: float = 10.0) -> Any:
    """The ConsumerGroupDescribe v0 answer for a KIP-848 group, from its coordinator."""
    host, port = _host_port(bootstrap)
    found = call(host, port, FIND_COORDINATOR, 3, FindCoordinatorRequest(key=group, key_type=0), timeout)
    if found.error_code:
        raise WireError(f"FindCoordinator: error {found.error_code}", found.error_code)
    resp = call(
        found.host,
        found.port,
        CONSUMER_GROUP_DESCRIBE,
        0,
        ConsumerGroupDescribeRequest(group_ids=[group]),
        timeout,
    )
    (described,) = resp.groups
    if described.error_code:
        raise WireError(described.error_message or f"error {described.error_code}", described.error_code)
    return described
