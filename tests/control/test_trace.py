"""The protocol trace journal (broker/control/trace.py).

- acceptance (issue 13, 5): a kafka-python two-member group traced with ``trace.file`` (filtered to
  the group) shows JoinGroup/SyncGroup/Heartbeat with the decoded member ids, subscriptions and
  assignments, and ``pykbroker trace --group`` prints the conversation;
- produced record batches are summarised (base offset, count, bytes, compression, producer
  id/epoch/sequence), never dumped; errors are listed by name; an API filter keeps the rest out;
- rotation at the size cap; the runtime switch over HTTP and its 400s; the fault hook.
"""

from __future__ import annotations

import asyncio
import struct
import time
from pathlib import Path

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from click.testing import CliRunner
from kafka import KafkaProducer

from broker.app import Broker
from broker.cli import main
from broker.config import Config
from broker.control import http_features, trace
from broker.dispatch.registry import ClientInfo
from broker.protocol.generated.api_versions import ApiVersionsRequest
from broker.server.pipeline import Close, RequestPipeline
from tests.support.groups import MemberPool, wait_settled
from tests.support.wire import request_bytes

TOPIC = "orders"
GROUP = "g"
PARTITIONS = 4


@pytest.fixture
def pool():
    p = MemberPool()
    yield p
    p.cleanup()


def _lines(path: Path) -> list[dict]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines() if x.strip()]


@pytest.mark.integration
def test_trace_of_a_kafka_python_group(broker_factory, pool, tmp_path: Path):
    journal = tmp_path / "trace.jsonl"
    bt = broker_factory(
        {
            "trace.file": str(journal),
            "trace.groups": GROUP,
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "1000",
        }
    )
    bt.call(bt.broker.create_topic, TOPIC, PARTITIONS)
    common = dict(
        client="kafka-python",
        bootstrap=bt.bootstrap,
        group=GROUP,
        topic=TOPIC,
        session_ms=6000,
        heartbeat_ms=200,
    )
    a = pool.python("a", client_id="kp-a", **common)
    b = pool.python("b", client_id="kp-b", **common)
    view = wait_settled(bt, GROUP, TOPIC, [a, b], partitions=PARTITIONS)
    ids = {a.state["memberId"], b.state["memberId"]}
    deadline = time.monotonic() + 30
    while {e["request"]["member_id"] for e in _lines(journal) if e["api"] == "Heartbeat"} != ids:
        assert time.monotonic() < deadline, "no heartbeat from both members"
        time.sleep(0.05)
    b.close()
    wait_settled(bt, GROUP, TOPIC, [a], partitions=PARTITIONS)
    lines = _lines(journal)
    assert all(GROUP in e["groups"] for e in lines)  # the filter
    apis = {e["api"] for e in lines}
    assert {"FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"} <= apis, apis
    assert "Fetch" not in apis and "Metadata" not in apis
    for e in lines:
        assert e["client_id"] in ("kp-a", "kp-b") and e["software"]["name"]
        assert e["latency_ms"] >= 0 and e["virtual_ms"] > 0 and e["conn"] and e["peer"]
    joins = [e for e in lines if e["api"] == "JoinGroup" and e["outcome"] == "response"]
    assert any(x["name"] == "MEMBER_ID_REQUIRED" for e in joins for x in e["errors"])
    leader_joins = [e for e in joins if e["response"]["members"]]
    assert leader_joins
    members = leader_joins[-1]["response"]["members"]
    assert {m["metadata"]["subscription"]["topics"][0] for m in members} == {TOPIC}
    syncs = [e for e in lines if e["api"] == "SyncGroup" and e["request"]["generation_id"] == view.generation]
    assigned = {
        a["member_id"]: a["assignment"]["assignment"][TOPIC]
        for e in syncs
        for a in e["request"]["assignments"]
    }
    assert set(assigned) == ids and sorted(p for ps in assigned.values() for p in ps) == list(
        range(PARTITIONS)
    )
    responses = {e["request"]["member_id"]: e["response"]["assignment"]["assignment"][TOPIC] for e in syncs}
    assert responses == assigned
    beats = [e for e in lines if e["api"] == "Heartbeat"]
    assert {e["request"]["member_id"] for e in beats} == ids

    res = CliRunner().invoke(main, ["trace", str(journal), "--group", GROUP])
    assert res.exit_code == 0, res.output
    out = res.output
    assert out.startswith(f"== group {GROUP}:")
    for member in ids:
        assert f"member_id={member!r}" in out
    assert "MEMBER_ID_REQUIRED" in out and f"{{{TOPIC}: " in out and "topics=" + TOPIC in out
    res = CliRunner().invoke(main, ["trace", str(journal), "--api", "SyncGroup", "--client", "kp-b"])
    assert res.exit_code == 0 and "SyncGroup" in res.output and "Heartbeat" not in res.output
    heads = [x for x in res.output.splitlines()[1:] if not x.startswith(" ")]
    assert heads and all(" kp-b " in x and " SyncGroup " in x for x in heads)


@pytest.mark.integration
def test_records_are_summarised_and_apis_filtered(broker_factory, tmp_path: Path):
    journal = tmp_path / "t.jsonl"
    bt = broker_factory({"trace.file": str(journal), "trace.apis": "Produce"})
    bt.call(bt.broker.create_topic, TOPIC, 1)
    producer = KafkaProducer(
        bootstrap_servers=bt.bootstrap, enable_idempotence=True, compression_type="gzip", linger_ms=50
    )
    for i in range(5):
        producer.send(TOPIC, b"value-%d-" % i + b"z" * 500, partition=0)
    producer.flush()
    producer.close(timeout=5)
    lines = _lines(journal)
    assert {e["api"] for e in lines} == {"Produce"}
    batch = lines[0]["request"]["topic_data"][0]["partition_data"][0]["records"]
    (b,) = batch["batches"]
    assert b["count"] == 5 and b["compression"] == "gzip" and b["producer_id"] >= 0
    assert b["producer_epoch"] == 0 and b["base_sequence"] == 0 and b["bytes"] == batch["bytes"]
    assert b["bytes"] < 5 * 500  # compressed
    assert b"value-3" not in journal.read_bytes() and b"zzzz" not in journal.read_bytes()  # never dumped
    assert lines[0]["response"]["responses"][0]["partition_responses"][0]["base_offset"] == 0


def test_rotation_and_fault_hook(tmp_path: Path):
    class Client:
        peer, client_id, software_name, software_version = "127.0.0.1:1", "c", None, None

    j = trace.TraceJournal(tmp_path / "t", max_bytes=300, backups=2)
    for _ in range(20):
        j._write(b"x" * 100 + b"\n")
    j.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t", "t.1", "t.2"]
    assert all(p.stat().st_size <= 303 for p in tmp_path.iterdir())
    j = trace.TraceJournal(tmp_path / "u")
    client = Client()
    j.fault_fired(client, 7, {"id": 3, "action": "error"})
    assert j._faults[(id(client), 7)] == {"id": 3, "action": "error"}
    j.close()
    with pytest.raises(ValueError, match="bad client expression"):
        trace.TraceJournal(tmp_path / "v", clients="(")


class _Control:
    def __init__(self, broker):
        self.broker = broker


def test_routes(broker_factory, tmp_path: Path):
    bt = broker_factory()

    async def main_():
        app = web.Application()
        app.add_routes(http_features.trace_routes(_Control(bt.broker)))
        async with TestClient(TestServer(app)) as client:
            r = await client.get("/trace")
            assert await r.json() == {"enabled": False}
            r = await client.put("/trace", json={"file": str(tmp_path / "x"), "apis": ["Joingroup", "Nope"]})
            body = await r.json()
            assert r.status == 400 and "unknown API 'Nope'" in body["error"] and "JoinGroup" in body["error"]
            r = await client.put("/trace", json={"file": str(tmp_path / "x"), "colour": 1})
            assert r.status == 400 and "colour" in (await r.json())["error"]
            r = await client.get("/trace")
            assert await r.json() == {"enabled": False}  # nothing half-applied
            r = await client.put("/trace", json={"file": str(tmp_path / "x"), "apis": ["ApiVersions"]})
            assert (await r.json())["api_keys"] == [18]
            r = await client.delete("/trace")
            assert (await r.json())["was"]["file"] == str(tmp_path / "x")

    asyncio.run_coroutine_threadsafe(main_(), bt.loop).result(10)


@pytest.mark.server
async def test_odd_frames_are_recorded_without_failing(tmp_path: Path):
    # built inside the test's event loop, as tests/server/test_pipeline.py does
    broker = Broker(Config({"port": 0, "host": "127.0.0.1", "log.dirs": str(tmp_path / "data")}))
    try:
        pipeline = RequestPipeline(broker.registry, broker.services)
        journal = trace.TraceJournal(tmp_path / "t.jsonl", registry=broker.registry)
        pipeline.set_tracer(journal)
        client = ClientInfo(peer="test")
        v3 = request_bytes(18, 3, ApiVersionsRequest(), 1, "odd")[4:]
        too_new = v3[:2] + struct.pack(">h", 99) + v3[4:]
        assert type(pipeline.handle(too_new, client)) is bytes  # answered in v0 (KIP-511)
        unknown = struct.pack(">hhi", 999, 0, 2) + struct.pack(">h", 3) + b"odd"
        assert type(pipeline.handle(unknown, client)) is Close
        pipeline.set_tracer(None)
        journal.close()
        assert type(pipeline) is RequestPipeline
    finally:
        broker.close()
    lines = _lines(tmp_path / "t.jsonl")
    assert [(e["api_key"], e["outcome"]) for e in lines] == [(18, "response"), (999, "close")]
    assert (
        lines[0]["response"] == {"bytes": lines[0]["response"]["bytes"]}
        and "unknown API" in lines[1]["reason"]
    )
    assert journal.failures == 0
