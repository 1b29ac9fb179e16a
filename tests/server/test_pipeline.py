"""The request pipeline without sockets: frames in, outcomes out (broker/server/pipeline.py).

The connection (test_connection.py) only moves bytes; what a frame means is decided here, so these
cases run with no event loop and no network."""

from __future__ import annotations

import struct

import pytest

from broker.app import Broker
from broker.config import Config
from broker.dispatch import build_registry
from broker.dispatch.registry import ClientInfo, CloseConnection
from broker.log.records import simple_batch
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.framing import LARGE_BODY, response_frame
from broker.protocol.generated import codec
from broker.protocol.generated.api_versions import ApiVersionsRequest
from broker.protocol.generated.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from broker.protocol.generated.fetch import (
    FetchableTopicResponse,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    PartitionData,
)
from broker.protocol.generated.find_coordinator import FindCoordinatorRequest
from broker.protocol.generated.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from broker.protocol.generated.list_groups import ListGroupsRequest
from broker.protocol.generated.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from broker.protocol.generated.metadata import MetadataRequest, MetadataRequestTopic
from broker.protocol.generated.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from broker.protocol.generated.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.server.pipeline import Close, Pending, RequestPipeline, encode
from tests.support.wire import request_bytes


@pytest.fixture
async def pipeline(tmp_path):
    # built inside the test's event loop: the coordinator's timers and the group commit run on it
    broker = Broker(
        Config(
            {"port": 0, "host": "127.0.0.1", "log.dirs": str(tmp_path), "group.initial.rebalance.delay.ms": 0}
        )
    )
    try:
        yield RequestPipeline(broker.registry, broker.services)
    finally:
        broker.close()


def _frame(api_key: int, version: int, body, correlation_id: int = 7, client_id: str = "pipe") -> bytes:
    return request_bytes(api_key, version, body, correlation_id, client_id)[4:]  # without the size


def _response(out: bytes, api_key: int, version: int, flexible_header: bool):
    (size, correlation_id) = struct.unpack_from(">ii", out, 0)
    assert size == len(out) - 4
    pos = 8 + (1 if flexible_header else 0)  # an empty tagged-field section
    resp, end = codec(api_key).RESPONSE_DECODERS[version](out, pos)
    assert end == len(out)
    return correlation_id, resp


def test_api_versions_is_answered_with_the_registry_ranges(pipeline):
    client = ClientInfo(peer="test")
    out = pipeline.handle(_frame(18, 3, ApiVersionsRequest("tester", "1.0")), client)
    assert type(out) is bytes
    correlation_id, resp = _response(out, 18, 3, flexible_header=False)  # ApiVersions: header v0
    assert correlation_id == 7 and resp.error_code == 0
    assert {(k.api_key, k.min_version, k.max_version) for k in resp.api_keys} == set(
        pipeline.registry.ranges()
    )
    assert client.client_id == "pipe"


def test_an_unsupported_api_versions_version_gets_the_v0_answer(pipeline):
    frame = bytearray(_frame(18, 3, ApiVersionsRequest()))
    frame[2:4] = struct.pack(">h", 99)  # a version from the future
    out = pipeline.handle(bytes(frame), ClientInfo(peer="test"))
    correlation_id, resp = _response(out, 18, 0, flexible_header=False)
    assert correlation_id == 7 and resp.error_code == ErrorCode.UNSUPPORTED_VERSION
    # as Kafka (KIP-511): only ApiVersions' own range, the versions the client should retry with
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(18, 0, 4)]


@pytest.mark.parametrize(
    "frame, reason",
    [
        (b"\x00\x12", "too short for a request header"),
        (struct.pack(">hhi", 999, 0, 1) + b"\x00\x00", "unknown API key 999"),
        (struct.pack(">hhi", 3, 99, 1) + b"\x00\x00", "unsupported Metadata version 99"),
    ],
)
def test_frames_that_cannot_be_served_close_the_connection(pipeline, frame, reason):
    out = pipeline.handle(frame, ClientInfo(peer="test"))
    assert type(out) is Close and reason in out.reason


def test_an_undecodable_request_closes_and_names_the_client_id(pipeline):
    client = ClientInfo(peer="test")
    frame = _frame(3, 9, MetadataRequest(topics=None), client_id="broken-client")
    out = pipeline.handle(frame[:-3], client)  # truncated body
    assert type(out) is Close and "cannot decode Metadata v9" in out.reason
    assert client.client_id == "broken-client"


async def test_a_join_is_pending_and_completes_to_its_response(pipeline):
    logs = pipeline.services.logs
    logs.start()  # the join's group record is appended, and the join answered, at a group commit
    try:
        await _join_and_complete(pipeline)
    finally:
        await logs.close()


async def _join_and_complete(pipeline):
    join = JoinGroupRequest(
        group_id="g",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id="",
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol("range", b"")],
    )
    out = pipeline.handle(_frame(11, 4, join), ClientInfo(peer="test"))
    # v4 with no member id: MEMBER_ID_REQUIRED at once, as Kafka (KIP-394)
    correlation_id, resp = _response(out, 11, 4, flexible_header=False)
    assert resp.error_code == ErrorCode.MEMBER_ID_REQUIRED and resp.member_id
    out = pipeline.handle(_frame(11, 4, _with(join, member_id=resp.member_id)), ClientInfo(peer="test"))
    assert type(out) is Pending and not out.deferred  # parks the connection until the group forms
    result = await out.awaitable  # the only member: the group forms after the initial delay
    correlation_id, resp2 = _response(pipeline.complete(out, result), 11, 4, flexible_header=False)
    assert correlation_id == 7 and resp2.error_code == 0
    assert resp2.generation_id == 1 and resp2.leader == resp2.member_id == resp.member_id


def test_completing_with_an_error_answers_its_code_or_closes(pipeline):
    client = ClientInfo(peer="test")
    api = pipeline.registry.get(11)
    request = JoinGroupRequest(group_id="g", member_id="m", protocol_type="consumer", protocols=[])
    pending = Pending(None, False, api, 4, request, 9, client)
    out = pipeline.complete(pending, exc=KafkaError(ErrorCode.NOT_COORDINATOR, "moved"))
    correlation_id, resp = _response(out, 11, 4, flexible_header=False)
    assert (correlation_id, resp.error_code) == (9, ErrorCode.NOT_COORDINATOR)
    out = pipeline.complete(pending, exc=CloseConnection("bye"))
    assert type(out) is Close and out.reason == "bye"
    deferred = Pending(None, True, api, 4, request, 9, client)
    assert type(pipeline.complete(deferred, result=None)) is Close  # a deferred answer may not be empty
    assert pipeline.complete(pending, result=None) is None  # nothing to answer


def _with(message, **changes):
    fields = {name: getattr(message, name) for name in message._fields}
    fields.update(changes)
    return type(message)(**fields)


class _Passthrough:
    """A fault injector with no rule: the pipeline's general path (``call`` + ``outcome``), which
    fault rules take, with nothing applied."""

    def intercept(self, pipeline, api, version, request, correlation_id, client):
        response = pipeline.call(api, version, request, correlation_id, client)
        return pipeline.outcome(api, version, request, correlation_id, client, response)


def _read_only_frames() -> list[tuple[str, bytes]]:
    """Requests that change nothing, at several versions, valid and refused."""
    offsets = [ListOffsetsTopic("t", [ListOffsetsPartition(0, -1, -1), ListOffsetsPartition(9, -1, -2)])]
    cases = [
        ("ApiVersions v3", _frame(18, 3, ApiVersionsRequest("parity", "1.0"))),
        ("ApiVersions v0", _frame(18, 0, ApiVersionsRequest())),
        ("Metadata all", _frame(3, 12, MetadataRequest(topics=None))),
        ("Metadata unknown", _frame(3, 12, MetadataRequest([MetadataRequestTopic(name="nope")], False))),
        ("Metadata v1", _frame(3, 1, MetadataRequest(topics=[MetadataRequestTopic(name="t")]))),
        ("ListOffsets", _frame(2, 7, ListOffsetsRequest(-1, 0, offsets))),
        (
            "DescribeConfigs topic",
            _frame(32, 4, DescribeConfigsRequest([DescribeConfigsResource(2, "t", None)], True, True)),
        ),
        (
            "DescribeConfigs bad",
            _frame(32, 1, DescribeConfigsRequest([DescribeConfigsResource(9, "x", None)])),
        ),
        ("FindCoordinator", _frame(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=["g", ""]))),
        ("ListGroups", _frame(16, 4, ListGroupsRequest(["Stable"]))),
        ("OffsetFetch", _frame(9, 7, OffsetFetchRequest("g", [OffsetFetchRequestTopic("t", [0, 5])]))),
        ("truncated", _frame(3, 12, MetadataRequest(topics=None))[:-2]),
        (
            "unknown API",
            _frame(18, 3, ApiVersionsRequest())[:0] + struct.pack(">hhi", 999, 0, 1) + b"\x00\x00",
        ),
    ]
    return cases


def test_the_inline_hot_path_answers_as_the_general_path(pipeline):
    """``handle`` inlines ``call`` + ``outcome`` (the path fault rules take): the same frames get
    byte-identical outcomes either way."""
    pipeline.services.admin.create_topic("t", 2)
    for name, frame in _read_only_frames():
        pipeline.faults = None
        fast = pipeline.handle(frame, ClientInfo(peer="test"))
        pipeline.faults = _Passthrough()
        general = pipeline.handle(frame, ClientInfo(peer="test"))
        pipeline.faults = None
        if type(fast) is Close:
            assert type(general) is Close and general.reason == fast.reason, name
        else:
            assert type(fast) is bytes and fast == general, name


async def test_a_large_fetch_answer_is_its_parts_with_the_read_batches_unjoined(tmp_path):
    """A Fetch answer of at least framing.LARGE_BODY bytes is a tuple of the frame header and the
    encoder's parts, each batch read from a segment among them as it was read (no copy of the
    body); a small one is one bytes frame. Both decode to the same records."""
    broker = Broker(Config({"port": 0, "host": "127.0.0.1", "log.dirs": str(tmp_path)}))
    logs = broker.services.logs
    logs.start()
    try:
        broker.admin.create_topic("big", 2)
        pipeline = RequestPipeline(broker.registry, broker.services)
        value = b"v" * 1000
        for partition, count in ((0, 400), (1, 2)):  # ~400 kB in partition 0, 2 kB in partition 1
            batch = simple_batch([value] * count)
            req = ProduceRequest(
                None,
                -1,
                30_000,
                [TopicProduceData("big", partition_data=[PartitionProduceData(partition, batch)])],
            )
            out = pipeline.handle(_frame(0, 9, req), ClientInfo(peer="test"))
            assert type(out) is Pending
            frame = pipeline.complete(out, await out.awaitable)
            assert _response(frame, 0, 9, True)[1].responses[0].partition_responses[0].error_code == 0

        def fetch(partitions: list[int]) -> FetchRequest:
            parts = [
                FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20) for p in partitions
            ]
            return FetchRequest(
                max_wait_ms=0,
                min_bytes=1,
                max_bytes=50 << 20,
                topics=[FetchTopic(topic="big", partitions=parts)],
            )

        large = pipeline.handle(_frame(1, 12, fetch([0, 1])), ClientInfo(peer="test"))
        assert type(large) is tuple and len(large) > 2
        assert sum(map(len, large)) - 4 == struct.unpack_from(">i", large[0])[0]
        _corr, resp = _response(b"".join(large), 1, 12, True)
        records = [p.records for p in resp.responses[0].partitions]
        assert [len(r) for r in records] == [len(simple_batch([value] * n)) for n in (400, 2)]
        assert bytes(records[0]) in large and bytes(records[1]) in large  # each batch, unjoined
        small = pipeline.handle(_frame(1, 12, fetch([1])), ClientInfo(peer="test"))
        assert type(small) is bytes
        assert bytes(_response(small, 1, 12, True)[1].responses[0].partitions[0].records) == bytes(records[1])
    finally:
        await logs.close()
        broker.close()


def test_a_large_fetch_answer_of_tiny_parts_is_joined():
    """Thousands of partitions of a few records each: written as one joined frame (a writev of
    tens of thousands of tiny parts costs more than the join); large batches stay parts."""
    registry = build_registry()
    api = registry.get(1)

    def answer(partitions: int, record_bytes: int) -> FetchResponse:
        parts = [
            PartitionData(
                partition_index=p, high_watermark=1, last_stable_offset=1, records=bytes(record_bytes)
            )
            for p in range(partitions)
        ]
        return FetchResponse(responses=[FetchableTopicResponse(topic="t", partitions=parts)])

    for (partitions, record_bytes), kind in (((5_000, 60), bytes), ((4, 100_000), tuple)):
        out = encode(api, 12, 7, answer(partitions, record_bytes))
        assert type(out) is kind
        whole = out if type(out) is bytes else b"".join(out)
        assert len(whole) >= LARGE_BODY
        assert whole == response_frame(7, True, api.encoders[12](answer(partitions, record_bytes)))
