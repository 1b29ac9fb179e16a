"""What each fault action does to a request in the pipeline (no sockets: frames in, outcomes out)."""

from __future__ import annotations

import asyncio
import contextlib
import struct

import pytest

from broker.app import Broker
from broker.config import Config
from broker.dispatch import build_registry
from broker.dispatch.registry import ClientInfo
from broker.log.records import build_batch
from broker.protocol.generated import codec
from broker.protocol.generated.api_versions import ApiVersionsRequest
from broker.protocol.generated.create_topics import CreatableTopic, CreateTopicsRequest
from broker.protocol.generated.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from broker.protocol.generated.metadata import MetadataRequest, MetadataRequestTopic
from broker.protocol.generated.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.generated.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.server.pipeline import Close, Pending
from tests.support.wire import request_bytes


@pytest.fixture
async def broker(tmp_path):
    b = Broker(
        Config(
            {"port": 0, "host": "127.0.0.1", "log.dirs": str(tmp_path), "group.initial.rebalance.delay.ms": 0}
        )
    )
    b.advertised["PLAINTEXT"] = ("127.0.0.1", 9092)
    b.logs.start()
    try:
        yield b
    finally:
        await b.logs.close()
        b.close()


def _frame(api_key: int, version: int, body, correlation_id: int = 7) -> bytes:
    return request_bytes(api_key, version, body, correlation_id, "faulty")[4:]


REGISTRY = build_registry()


def _response(out: bytes, api_key: int, version: int):
    flexible = REGISTRY.apis[api_key].plans[version][3]
    (size, _cid) = struct.unpack_from(">ii", out, 0)
    assert size == len(out) - 4
    resp, end = codec(api_key).RESPONSE_DECODERS[version](out, 8 + (1 if flexible else 0))
    assert end == len(out)
    return resp


def _create(name: str) -> bytes:
    return _frame(19, 5, CreateTopicsRequest(topics=[CreatableTopic(name, 1, 1)], timeout_ms=1000))


def _produce(topic: str = "t", acks: int = -1) -> bytes:
    batch = build_batch([(None, b"v")])
    req = ProduceRequest(
        acks=acks,
        timeout_ms=5000,
        topic_data=[TopicProduceData(name=topic, partition_data=[PartitionProduceData(0, batch)])],
    )
    return _frame(0, 9, req)


def client() -> ClientInfo:
    return ClientInfo(peer="test", connection_id=3)


async def _outcome(broker, out):
    """Run a Pending to its outcome as the connection does."""
    if type(out) is not Pending:
        return out
    try:
        result = await out.awaitable
    except Exception as e:
        return broker.pipeline.complete(out, None, e)
    return broker.pipeline.complete(out, result)


async def test_close_before_skips_the_handler_and_close_after_runs_it(broker):
    broker.control.add_rule(api="CreateTopics", close="before", times=1)
    out = broker.pipeline.handle(_create("a"), client())
    assert type(out) is Close and "fault rule 1" in out.reason
    assert broker.topics.get("a") is None
    broker.control.add_rule(api="CreateTopics", close="after", times=1)
    out = broker.pipeline.handle(_create("a"), client())
    assert type(out) is Close and broker.topics.get("a") is not None
    assert broker.pipeline.faults is None  # both rules used up


async def test_throttle_on_an_encoded_response_and_error_with_delay(broker):
    broker.control.add_rule(api="ApiVersions", throttle_ms=250, times=1)
    resp = _response(broker.pipeline.handle(_frame(18, 3, ApiVersionsRequest("x", "1")), client()), 18, 3)
    assert resp.throttle_time_ms == 250 and resp.error_code == 0
    broker.control.add_rule(api="Metadata", error="UNKNOWN_TOPIC_OR_PARTITION", delay_ms=20, times=1)
    out = broker.pipeline.handle(
        _frame(3, 9, MetadataRequest(topics=[MetadataRequestTopic(name="x")])), client()
    )
    assert type(out) is Pending and not out.deferred
    resp = _response(await _outcome(broker, out), 3, 9)
    assert [(t.name, t.error_code) for t in resp.topics] == [("x", 3)]
    assert broker.topics.get("x") is None  # not handled: no auto-creation


async def test_produce_delayed_and_throttled_stays_deferred_and_is_written(broker):
    broker.create_topic("t", 1)
    broker.control.add_rule(api="Produce", delay_ms=10, throttle_ms=100, times=1)
    out = broker.pipeline.handle(_produce(), client())
    assert type(out) is Pending and out.deferred
    resp = _response(await _outcome(broker, out), 0, 9)
    assert resp.throttle_time_ms == 100
    assert [(p.index, p.error_code, p.base_offset) for p in resp.responses[0].partition_responses] == [
        (0, 0, 0)
    ]


async def test_dropped_produce_is_written_and_not_answered(broker):
    broker.create_topic("t", 1)
    broker.control.add_rule(api="Produce", topic="t", drop=True, times=1)
    out = broker.pipeline.handle(_produce(), client())
    assert type(out) is Pending and not out.deferred  # waits for the write, then answers nothing
    assert await _outcome(broker, out) is None
    assert broker.logs.get("t", 0).high_watermark == 1


async def test_close_after_a_parked_join(broker):
    broker.control.add_rule(api="JoinGroup", group="g", close="after")
    join = JoinGroupRequest(
        group_id="g",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id="",
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol("range", b"")],
    )
    out = broker.pipeline.handle(_frame(11, 3, join), client())
    assert type(out) is Pending
    closed = await _outcome(broker, out)
    assert type(closed) is Close and "close after" in closed.reason
    assert len(broker.groups.state.groups["g"].members) == 1  # the join was handled


async def test_a_delayed_commit_is_durable_before_its_response(broker):
    broker.create_topic("t", 1)
    broker.control.add_rule(api="OffsetCommit", delay_ms="1m")
    commit = OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[OffsetCommitRequestTopic(name="t", partitions=[OffsetCommitRequestPartition(0, 42)])],
    )
    out = broker.pipeline.handle(_frame(8, 8, commit), client())
    assert type(out) is Pending
    task = asyncio.ensure_future(out.awaitable)
    for _ in range(500):  # the commit record is fsynced at the next group commit (a few ms)
        offsets_log = broker.logs.get("__consumer_offsets", 0)
        if offsets_log is not None and offsets_log.high_watermark >= 1:
            break
        await asyncio.sleep(0.01)
    assert offsets_log.high_watermark >= 1  # written and flushed
    assert broker.control.offsets("g")["t"]["0"]["offset"] == 42
    assert not task.done()  # the response still waits for its minute
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_an_error_on_a_produce_with_acks_0_closes_as_kafka_does(broker):
    broker.create_topic("t", 1)
    broker.control.add_rule(api="Produce", error="NOT_LEADER_OR_FOLLOWER", times=1)
    out = broker.pipeline.handle(_produce(acks=0), client())
    assert type(out) is Close and "acks=0" in out.reason
    broker.control.add_rule(api="Produce", delay_ms=5, times=1)
    assert (
        await _outcome(broker, broker.pipeline.handle(_produce(acks=0), client())) is None
    )  # written, no answer
    assert broker.logs.get("t", 0).log_end_offset == 1
