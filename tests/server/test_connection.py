"""The connection handler over real TCP: framing, ordering, bad input, idle close, isolation."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from broker.log.records import simple_batch
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.api_versions import ApiVersionsRequest, ApiVersionsResponse
from broker.protocol.generated.api_versions import decode_response_v0 as decode_api_versions_v0
from broker.protocol.generated.metadata import MetadataRequest
from broker.protocol.generated.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from tests.support.wire import WireClient, request_bytes

API_VERSIONS, METADATA, PRODUCE = 18, 3, 0


def _api_versions_ok(port: int) -> None:
    with WireClient(port) as c:
        resp = c.call(API_VERSIONS, 3, ApiVersionsRequest("probe", "1.0"))
        assert resp.error_code == 0


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_every_version_lists_the_registry(broker, version):
    with WireClient(broker.port) as c:
        resp = c.call(API_VERSIONS, version, ApiVersionsRequest("probe-client", "1.2.3"))
    assert resp.error_code == 0
    got = [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys]
    assert got == broker.broker.registry.ranges()
    assert (18, 0, 4) in got and (3, 0, 13) in got and (10, 0, 6) in got


def test_api_versions_too_new_gets_v0_error_with_its_own_range_and_stays_open(broker):
    """As Kafka (KIP-511, ApiVersionsRequest.getErrorResponse): only ApiVersions' range, so that the
    client retries at a version we serve and gets the full answer, features included."""
    # ApiVersions v9 (newer than we serve): header v2 (flexible) + an empty flexible body
    frame = struct.pack(">hhih", 18, 9, 42, 4) + b"wire" + b"\x00" + b"\x01\x01\x00"
    with WireClient(broker.port) as c:
        c.send_raw(struct.pack(">i", len(frame)) + frame)
        resp_frame = c.recv_frame()
        corr = struct.unpack_from(">i", resp_frame)[0]
        assert corr == 42
        resp, end = decode_api_versions_v0(resp_frame, 4)  # header v0, body v0
        assert end == len(resp_frame)
        assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(18, 0, 4)]
        # the client may now retry on the same connection
        again = c.call(API_VERSIONS, 4, ApiVersionsRequest("x", "1"))
        assert isinstance(again, ApiVersionsResponse) and again.error_code == 0
        assert [
            (k.api_key, k.min_version, k.max_version) for k in again.api_keys
        ] == broker.broker.registry.ranges()
        assert ("transaction.version", 2) in {(f.name, f.max_version_level) for f in again.finalized_features}


def test_client_software_name_is_validated(broker):
    with WireClient(broker.port) as c:
        resp = c.call(API_VERSIONS, 3, ApiVersionsRequest("bad name!", "1.0"))
        assert resp.error_code == ErrorCode.INVALID_REQUEST


def test_pipelined_requests_in_one_write_answer_in_order(broker):
    with WireClient(broker.port) as c:
        blob = b"".join(
            request_bytes(
                API_VERSIONS if i % 2 else METADATA,
                3 if i % 2 else 9,
                ApiVersionsRequest("p", "1") if i % 2 else MetadataRequest(topics=[]),
                100 + i,
            )
            for i in range(20)
        )
        c.send_raw(blob)
        for i in range(20):
            corr, resp = c.recv(API_VERSIONS if i % 2 else METADATA, 3 if i % 2 else 9)
            assert corr == 100 + i
            assert resp.error_code == 0


def test_frame_split_byte_by_byte(broker):
    with WireClient(broker.port) as c:
        data = request_bytes(API_VERSIONS, 3, ApiVersionsRequest("slow", "1"), correlation_id=5)
        for i in range(len(data)):
            c.send_raw(data[i : i + 1])
        corr, resp = c.recv(API_VERSIONS, 3)
        assert corr == 5 and resp.error_code == 0


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(struct.pack(">i", -1), id="negative-size"),
        pytest.param(struct.pack(">i", 2**31 - 1), id="size-above-cap"),
        pytest.param(struct.pack(">i", 3) + b"abc", id="too-short-for-header"),
        pytest.param(struct.pack(">ihhih", 10, 999, 0, 1, 0), id="unknown-api-key"),
        pytest.param(struct.pack(">ihhih", 10, 3, 99, 1, 0), id="unsupported-metadata-version"),
        pytest.param(struct.pack(">ihhih", 12, 3, 1, 1, 20) + b"ab", id="client-id-past-end"),
        pytest.param(
            struct.pack(">ihhih", 14, 3, 1, 1, 0) + struct.pack(">i", 5000), id="topic-count-past-end"
        ),
        pytest.param(struct.pack(">ihhih", 11, 3, 9, 1, 0) + b"\xff", id="flexible-header-truncated"),
        pytest.param(
            struct.pack(">ihhih", 16, 3, 1, 1, 0) + struct.pack(">ih", 1, 2) + b"\xff\xfe",
            id="invalid-utf8-topic",
        ),
    ],
)
def test_bad_frames_close_only_that_connection(broker, bad):
    with WireClient(broker.port) as bystander, WireClient(broker.port) as victim:
        assert bystander.call(API_VERSIONS, 3, ApiVersionsRequest("b", "1")).error_code == 0
        victim.send_raw(bad)
        assert victim.is_closed_by_peer()
        # the other connection is unaffected, and so are new ones
        assert bystander.call(API_VERSIONS, 3, ApiVersionsRequest("b", "1")).error_code == 0
    _api_versions_ok(broker.port)


def test_frame_cap_is_configurable(broker_factory):
    b = broker_factory({"socket.request.max.bytes": 1024})
    with WireClient(b.port) as c:
        c.send_raw(struct.pack(">i", 1025) + b"x" * 100)
        assert c.is_closed_by_peer()
    _api_versions_ok(b.port)


def test_idle_connections_are_closed(broker_factory):
    b = broker_factory({"connections.max.idle.ms": 150})
    with WireClient(b.port) as c:
        assert c.call(API_VERSIONS, 3, ApiVersionsRequest("i", "1")).error_code == 0
        assert c.is_closed_by_peer(timeout=10)


def test_active_connections_are_not_closed_as_idle(broker_factory):
    # the requests span 2.5 idle periods; a gap between two of them (50 ms apart) would have to
    # reach the whole idle period on a loaded machine before this could fail spuriously
    b = broker_factory({"connections.max.idle.ms": 1000})
    with WireClient(b.port) as c:
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            assert c.call(API_VERSIONS, 3, ApiVersionsRequest("a", "1")).error_code == 0
            time.sleep(0.05)


def test_client_that_disconnects_mid_frame_does_not_disturb_others(broker):
    s = socket.create_connection(("127.0.0.1", broker.port))
    s.sendall(struct.pack(">i", 100) + b"partial")
    s.close()
    _api_versions_ok(broker.port)


def test_handler_crash_becomes_unknown_server_error(broker, monkeypatch):
    api = broker.broker.registry.get(METADATA)

    def boom(ctx, req):
        raise RuntimeError("bug")

    monkeypatch.setattr(api, "handler", boom)
    with WireClient(broker.port) as c:
        resp = c.call(METADATA, 13, MetadataRequest(topics=[]))
        assert resp.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
        # the connection keeps working
        assert c.call(API_VERSIONS, 3, ApiVersionsRequest("a", "1")).error_code == 0


def test_many_pipelined_produces_wait_for_their_group_commits_and_answer_in_order(broker):
    """More produces than the old limit of 64 deferred answers, in one write, interleaved with
    requests answered at once: every one is answered, in request order, each produce with the next
    offset of its partition (they share group commits: the connection defers up to MAX_DEFERRED)."""
    broker.call(lambda: broker.broker.admin.create_topic("many-deferred", 3))
    n = 300

    def produce(i: int) -> ProduceRequest:
        data = [PartitionProduceData(i % 3, simple_batch([b"v%d" % i]))]
        return ProduceRequest(None, -1, 30_000, [TopicProduceData(name="many-deferred", partition_data=data)])

    with WireClient(broker.port, timeout=120) as c:
        blob = b"".join(
            request_bytes(API_VERSIONS, 3, ApiVersionsRequest("p", "1"), 1000 + i)
            if i % 10 == 9
            else request_bytes(PRODUCE, 9, produce(i), 1000 + i)
            for i in range(n)
        )
        c.send_raw(blob)
        next_offset = [0, 0, 0]
        for i in range(n):
            corr, resp = c.recv(API_VERSIONS if i % 10 == 9 else PRODUCE, 3 if i % 10 == 9 else 9)
            assert corr == 1000 + i
            if i % 10 != 9:
                (part,) = resp.responses[0].partition_responses
                assert (part.index, part.error_code, part.base_offset) == (i % 3, 0, next_offset[i % 3])
                next_offset[i % 3] += 1


def test_large_answers_are_written_in_order_among_small_and_deferred_ones(broker):
    """Fetch answers of at least framing.LARGE_BODY go out as header and body written apart
    (never joined): pipelined between answers written at once and produces deferred for their
    group commit, every answer arrives whole and in request order."""
    from broker.protocol.framing import LARGE_BODY
    from tests.support.produce_consume import fetch_request

    broker.call(lambda: broker.broker.admin.create_topic("large-answers", 1))
    value = b"x" * 1000
    with WireClient(broker.port, timeout=120) as c:
        for i in range(3):  # ~600 kB in partition 0
            batch = simple_batch([value + b"%d-%d" % (i, j) for j in range(200)])
            req = ProduceRequest(
                None,
                -1,
                30_000,
                [TopicProduceData(name="large-answers", partition_data=[PartitionProduceData(0, batch)])],
            )
            assert c.call(PRODUCE, 9, req).responses[0].partition_responses[0].error_code == 0
        whole = c.call(1, 12, fetch_request("large-answers", 1, 0)).responses[0].partitions[0].records
        assert len(whole) >= LARGE_BODY
        one = simple_batch([b"tail"])
        steps = [
            (1, 12, fetch_request("large-answers", 1, 0)),
            (API_VERSIONS, 3, ApiVersionsRequest("p", "1")),
            (
                PRODUCE,
                9,
                ProduceRequest(
                    None,
                    -1,
                    30_000,
                    [TopicProduceData(name="large-answers", partition_data=[PartitionProduceData(0, one)])],
                ),
            ),
            (1, 12, fetch_request("large-answers", 1, 0)),
            (METADATA, 9, MetadataRequest(topics=[])),
            (1, 12, fetch_request("large-answers", 1, 0)),
        ]
        c.send_raw(b"".join(request_bytes(api, v, body, 500 + i) for i, (api, v, body) in enumerate(steps)))
        for i, (api, v, _body) in enumerate(steps):
            corr, resp = c.recv(api, v)
            assert corr == 500 + i
            if api == 1:
                records = resp.responses[0].partitions[0].records
                # the answers after the produce may already hold its batch too
                assert records[: len(whole)] == whole
            else:
                assert (
                    resp.error_code == 0
                    if api != PRODUCE
                    else resp.responses[0].partition_responses[0].error_code == 0
                )
