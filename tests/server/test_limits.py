"""Connection limits and backpressure over real TCP: frame size, max.connections, per-IP limits,
bounded memory for clients that do not read, slow (slowloris) clients, idle timeout.

Server-side state is read through ``KafkaConnection.memory()`` and the listener's counters on the
broker's own loop (``BrokerThread.call``), never inferred from timings. Timeouts are hang guards.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from broker.protocol.framing import FrameReader
from broker.protocol.generated.api_versions import ApiVersionsRequest
from broker.protocol.generated.metadata import MetadataRequest
from broker.server import connection
from tests.support.wire import WireClient, request_bytes

API_VERSIONS, METADATA = 18, 3
GUARD = 20.0  # seconds: hang guard only


def _ok(port: int) -> None:
    with WireClient(port) as c:
        assert c.call(API_VERSIONS, 3, ApiVersionsRequest("probe", "1.0")).error_code == 0


def _wait_for(cond: Callable[[], Any], what: str, guard: float = GUARD) -> Any:
    deadline = time.monotonic() + guard
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.01)
    raise AssertionError(f"hang guard: still waiting for {what}")


def _conns(bt: Any) -> list:
    return bt.call(lambda: list(bt.broker.connections))


def _memory(bt: Any) -> list[dict[str, int]]:
    return bt.call(lambda: [c.memory() for c in bt.broker.connections])


# ---------------------------------------------------------------- framing


def test_frame_reader_gathers_a_large_frame_in_chunks_without_preallocating():
    reader = FrameReader(100 << 20)
    body = bytes(range(256)) * 4096  # 1 MiB
    stream = struct.pack(">i", len(body)) + body + struct.pack(">i", 3) + b"abc"
    frames: list[bytes] = []
    fed = 0
    for i in range(0, len(stream), 4096):
        chunk = stream[i : i + 4096]
        frames += reader.feed(chunk)
        fed += len(chunk)
        if not frames:
            assert reader.buffered == fed  # what arrived, no more
    assert frames == [body, b"abc"]
    assert reader.buffered == 0

    # a header claiming the whole 100 MiB cap, then a few bytes: memory follows the bytes
    reader = FrameReader(100 << 20)
    tracemalloc.start()
    try:
        assert reader.feed(struct.pack(">i", 100 << 20) + b"x" * 70_000) == []
        assert reader.feed(b"y" * 10) == []
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert reader.buffered == 4 + 70_010
    assert peak < 1 << 20


def test_partial_frame_claiming_the_maximum_holds_only_what_arrived(broker):
    with WireClient(broker.port) as big:
        big.send_raw(struct.pack(">i", 100 << 20) + b"z" * 10_000)  # exactly socket.request.max.bytes
        mem = _wait_for(
            lambda: [m for m in _memory(broker) if m["read"] == 10_004], "the partial frame to arrive"
        )
        assert len(mem) == 1
        _ok(broker.port)  # others are served meanwhile
        big.send_raw(struct.pack(">i", 5))  # still the same frame: the broker keeps waiting for it
        _ok(broker.port)
        assert [m["read"] for m in _memory(broker) if m["read"]] == [10_008]


def test_frame_one_byte_over_the_cap_closes_the_connection(broker_factory):
    b = broker_factory({"socket.request.max.bytes": 4096})
    with WireClient(b.port) as at_cap, WireClient(b.port) as over:
        over.send_raw(struct.pack(">i", 4097))
        assert over.is_closed_by_peer()
        # a request of exactly the cap (trailing padding after the body) is read and answered
        request = request_bytes(API_VERSIONS, 3, ApiVersionsRequest("a", "1"), 9)[4:]
        at_cap.send_raw(struct.pack(">i", 4096) + request + b"\x00" * (4096 - len(request)))
        corr, resp = at_cap.recv(API_VERSIONS, 3)
        assert corr == 9 and resp.error_code == 0
    _ok(b.port)


# ---------------------------------------------------------------- connection limits


def test_max_connections_per_ip_closes_extra_connections_at_once(broker_factory):
    b = broker_factory({"max.connections.per.ip": 3})
    clients = [WireClient(b.port) for _ in range(3)]
    try:
        for c in clients:
            assert c.call(API_VERSIONS, 3, ApiVersionsRequest("c", "1")).error_code == 0
        with WireClient(b.port) as extra:
            assert extra.is_closed_by_peer(timeout=GUARD)
        assert b.call(lambda: b.broker.listener.refused) == 1
        # the three are unaffected; closing one frees its slot
        for c in clients:
            assert c.call(API_VERSIONS, 3, ApiVersionsRequest("c", "1")).error_code == 0
        clients.pop().close()
        _wait_for(lambda: b.call(lambda: b.broker.listener.per_ip.get("127.0.0.1")) == 2, "the slot to free")
        _ok(b.port)
    finally:
        for c in clients:
            c.close()


def test_max_connections_per_ip_overrides(broker_factory):
    b = broker_factory({"max.connections.per.ip": 1, "max.connections.per.ip.overrides": "localhost:4"})
    clients = [WireClient(b.port) for _ in range(4)]
    try:
        for c in clients:
            assert c.call(API_VERSIONS, 3, ApiVersionsRequest("c", "1")).error_code == 0
        with WireClient(b.port) as extra:
            assert extra.is_closed_by_peer(timeout=GUARD)
    finally:
        for c in clients:
            c.close()


@pytest.mark.parametrize("bad", ["127.0.0.1", "127.0.0.1:x", ":3", "a:1,b"])
def test_bad_per_ip_overrides_are_config_errors(bad):
    from broker.config import Config, ConfigError

    with pytest.raises(ConfigError, match="max.connections.per.ip.overrides"):
        Config({"max.connections.per.ip.overrides": bad})


def test_max_connections_makes_new_clients_wait_for_a_free_slot(broker_factory):
    b = broker_factory({"max.connections": 2})
    first, second = WireClient(b.port), WireClient(b.port)
    try:
        for c in (first, second):
            assert c.call(API_VERSIONS, 3, ApiVersionsRequest("c", "1")).error_code == 0
        waiting = WireClient(b.port)  # TCP connects (the kernel's backlog) but is not accepted
        cid = waiting.send(API_VERSIONS, 3, ApiVersionsRequest("w", "1"))
        assert b.call(lambda: (b.broker.listener.count, len(b.broker.connections))) == (2, 2)
        waiting.sock.setblocking(False)
        with pytest.raises(BlockingIOError):
            waiting.sock.recv(1)  # nothing: its request is not read while the broker is full
        waiting.sock.setblocking(True)
        waiting.sock.settimeout(GUARD)
        first.close()  # a slot frees: the waiting client is accepted and answered
        corr, resp = waiting.recv(API_VERSIONS, 3)
        assert corr == cid and resp.error_code == 0
        assert second.call(API_VERSIONS, 3, ApiVersionsRequest("c", "1")).error_code == 0
        waiting.close()
    finally:
        first.close()
        second.close()


# ---------------------------------------------------------------- backpressure


def _flood(sock: socket.socket, frames: bytes, already: int, limit: int) -> int:
    """Send the repeating stream ``frames`` (``already`` bytes of it sent before) without reading,
    until the socket would block or ``limit`` bytes went; returns the bytes sent."""
    sock.setblocking(False)
    sent = 0
    block = frames * 64
    try:
        while sent < limit:
            pos = (already + sent) % len(frames)
            try:
                sent += sock.send(block[pos:])
            except BlockingIOError:
                break
    finally:
        sock.setblocking(True)
    return sent


def test_client_that_never_reads_is_paused_with_bounded_memory(broker):
    """Pipelined Metadata + ApiVersions requests, responses never read: the broker stops reading
    from that client once its output backs up, holding a bounded amount for it; others go on."""
    pair = request_bytes(METADATA, 12, MetadataRequest(topics=[]), 1) + request_bytes(
        API_VERSIONS, 3, ApiVersionsRequest("flood", "1"), 2
    )
    smallest = min(len(request_bytes(METADATA, 12, MetadataRequest(topics=[]), 1)), len(pair) // 2)
    with WireClient(broker.port) as flooder, WireClient(broker.port) as bystander:
        total = 0
        # send until the broker neither writes to us (its socket buffer is full) nor reads from us
        while not any(m["reading_paused"] and m["writing_paused"] for m in _memory(broker)):
            total += _flood(flooder.sock, pair, total, 1 << 20)
            assert total < 512 << 20, "the broker kept reading a client that reads nothing"
            time.sleep(0.01)
        total += _flood(flooder.sock, pair, total, 1 << 20)  # now the kernel buffers fill up too
        for _ in range(3):
            [mem] = [m for m in _memory(broker) if m["reading_paused"]]
            # beyond the limits: at most the frames of the one read that crossed them (256 KiB)
            assert mem["queued"] <= connection.MAX_QUEUED + (256 << 10) // smallest
            assert mem["queued_bytes"] <= connection.MAX_QUEUED_BYTES + (256 << 10)
            assert mem["write"] <= (64 << 10) + connection.MAX_OUT_BATCH + (64 << 10)
            assert mem["read"] < len(pair)
            assert bystander.call(API_VERSIONS, 3, ApiVersionsRequest("b", "1")).error_code == 0
            assert len(bystander.call(METADATA, 12, MetadataRequest(topics=[])).brokers) == 1

        # the flooder reads now: every request it sent is answered, in order, and reading resumes
        sent_pairs, partial = divmod(total, len(pair))
        assert sent_pairs > 1000
        flooder.sock.settimeout(GUARD)
        if partial:  # finish the half-sent pair (from a thread: the buffers are full until we read)
            sent_pairs += 1
            threading.Thread(target=flooder.send_raw, args=(pair[partial:],), daemon=True).start()
        for _ in range(sent_pairs):
            corr, md = flooder.recv(METADATA, 12)
            assert corr == 1 and len(md.brokers) == 1
            corr, av = flooder.recv(API_VERSIONS, 3)
            assert corr == 2 and av.error_code == 0
        assert flooder.call(API_VERSIONS, 3, ApiVersionsRequest("again", "1")).error_code == 0
        assert not any(m["reading_paused"] for m in _memory(broker))


def test_client_that_stopped_reading_is_closed_as_idle(broker_factory):
    b = broker_factory({"connections.max.idle.ms": 300})
    pair = request_bytes(API_VERSIONS, 3, ApiVersionsRequest("flood", "1"), 2)
    with WireClient(b.port) as flooder:
        _wait_for(lambda: _conns(b), "the connection to be accepted")
        total = 0
        deadline = time.monotonic() + GUARD
        while _conns(b):  # keeps sending (as far as the broker lets it), never reads
            assert time.monotonic() < deadline, "hang guard: a client that stopped reading stays open"
            try:
                total += _flood(flooder.sock, pair, total, 1 << 20)
            except OSError:  # reset by the broker
                break
            time.sleep(0.01)
        _wait_for(lambda: not _conns(b), "the connection to be closed")
        assert total > 1 << 20  # it was paused (not idle) before it was closed


# ---------------------------------------------------------------- slow clients, idle timeout


def test_slowloris_clients_do_not_delay_others(broker):
    """Fifty clients dribble a request a byte at a time; a normal client's round trips complete
    between their bytes, while every slow request is still incomplete. Then the slow ones finish
    and are answered too."""
    frame = request_bytes(API_VERSIONS, 3, ApiVersionsRequest("slowloris", "1.0"), 77)
    slow = [WireClient(broker.port) for _ in range(50)]
    try:
        with WireClient(broker.port) as normal:
            for i in range(len(frame) - 1):
                for s in slow:
                    s.send_raw(frame[i : i + 1])
                assert normal.call(API_VERSIONS, 3, ApiVersionsRequest("normal", "1")).error_code == 0
                assert normal.call(METADATA, 12, MetadataRequest(topics=[])).cluster_id
                time.sleep(0.01)
            partial = [m["read"] for m in _memory(broker) if m["read"]]
            assert partial == [len(frame) - 1] * 50
        for s in slow:
            s.send_raw(frame[-1:])
        for s in slow:
            corr, resp = s.recv(API_VERSIONS, 3)
            assert corr == 77 and resp.error_code == 0
    finally:
        for s in slow:
            s.close()


def test_slowloris_is_closed_as_idle_although_bytes_keep_coming(broker_factory):
    """connections.max.idle.ms counts from the last complete request: a client that never completes
    one is closed even while it sends a byte every 20 ms; a normal client is not."""
    b = broker_factory({"connections.max.idle.ms": 300})
    filler = struct.pack(">i", 1000)
    with WireClient(b.port) as slowloris, WireClient(b.port) as normal:
        closed = threading.Event()

        def dribble() -> None:
            data = filler + b"x" * 1000
            for i in range(len(data)):
                try:
                    slowloris.sock.sendall(data[i : i + 1])
                except OSError:
                    closed.set()
                    return
                time.sleep(0.02)

        t = threading.Thread(target=dribble, daemon=True)
        t.start()
        rounds = 0
        while t.is_alive():  # the normal client keeps working (and is not idle) meanwhile
            assert normal.call(API_VERSIONS, 3, ApiVersionsRequest("n", "1")).error_code == 0
            rounds += 1
            time.sleep(0.02)
        assert closed.is_set(), "the slow client was never closed"
        assert slowloris.is_closed_by_peer(timeout=GUARD)
        assert rounds > 0
        assert normal.call(API_VERSIONS, 3, ApiVersionsRequest("n", "1")).error_code == 0


def test_many_half_open_requests_are_all_released_on_disconnect(broker):
    clients = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(100)]
    for s in clients:
        s.sendall(struct.pack(">i", 50_000) + b"p" * 1000)
    _wait_for(lambda: len([m for m in _memory(broker) if m["read"] == 1004]) == 100, "100 partial frames")
    for s in clients:
        s.close()
    _wait_for(lambda: not _conns(broker), "the connections to go")
    assert broker.call(lambda: (broker.broker.listener.count, dict(broker.broker.listener.per_ip))) == (0, {})
    _ok(broker.port)


def test_refused_connections_leave_no_trace(broker_factory):
    b = broker_factory({"max.connections.per.ip": 1})
    with WireClient(b.port) as keep:
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", b.port))
            s.settimeout(GUARD)
            try:
                assert s.recv(1) == b""
            except ConnectionResetError:
                pass
            s.close()
        assert keep.call(API_VERSIONS, 3, ApiVersionsRequest("k", "1")).error_code == 0
        assert b.call(lambda: (b.broker.listener.count, b.broker.listener.refused)) == (1, 20)
