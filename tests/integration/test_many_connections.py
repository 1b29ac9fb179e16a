"""Load: 1,000 concurrent connections held open while kafka-python produces and consumes."""

from __future__ import annotations

import resource
import socket

from broker.protocol.generated.api_versions import ApiVersionsRequest
from tests.support.process import free_port, serve_args
from tests.support.produce_consume import assert_round_trip, create, kp_consumer, kp_poll, kp_produce
from tests.support.wire import WireClient, request_bytes

HELD = 1000
N = 2000


def _raise_fd_limit(need: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= need, "cannot raise RLIMIT_NOFILE"


def test_thousand_idle_connections_while_clients_produce_and_consume(broker):
    # both ends of every connection live in this process (the broker runs on a thread here)
    _raise_fd_limit(2 * HELD + 512)
    held: list[WireClient] = []
    try:
        for i in range(HELD):
            c = WireClient(broker.port, timeout=30)
            assert c.call(18, 3, ApiVersionsRequest(f"held-{i}", "1")).error_code == 0
            held.append(c)
        assert broker.call(lambda: broker.broker.listener.count) >= HELD

        create(broker, "crowded", 3)
        acks = kp_produce(broker.bootstrap, "crowded", N)
        consumer = kp_consumer(broker.bootstrap)
        try:
            consumer.subscribe(["crowded"])
            consumed = kp_poll(consumer, N)
        finally:
            consumer.close()
        assert_round_trip(acks, consumed, N)

        # every held connection is still open and served: a request on each, all sent first
        for i, c in enumerate(held):
            c.send_raw(request_bytes(18, 3, ApiVersionsRequest("again", "1"), 1000 + i))
        for i, c in enumerate(held):
            corr, resp = c.recv(18, 3)
            assert corr == 1000 + i and resp.error_code == 0
    finally:
        for c in held:
            try:
                c.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()


def test_serve_lifts_a_low_open_files_limit(tmp_path):
    """``serve`` started with a soft RLIMIT_NOFILE of 256 still holds 400 connections."""
    _raise_fd_limit(1024)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    port = free_port()
    # the limit is lowered in the broker's process only: this test process may hold more than 256
    # descriptors already (session-wide brokers, JVMs and their pipes)
    proc = serve_args(
        ["--port", str(port), "--data-dir", str(tmp_path / "d")],
        port,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard)),
    )
    held: list[WireClient] = []
    try:
        for i in range(400):
            c = WireClient(port, timeout=30)
            held.append(c)
            assert c.call(18, 3, ApiVersionsRequest(f"c{i}", "1")).error_code == 0
    finally:
        for c in held:
            c.close()
        proc.terminate()
        assert proc.wait(timeout=30) == 0
