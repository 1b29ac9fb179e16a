"""The trace journal names the fault rule that fired on a request (with broker.control.faults: the
fault injector reports each firing to ``pipeline.tracer.fault_fired``). Skipped without it."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from kafka import KafkaProducer

pytest.importorskip("broker.control.faults")


@pytest.mark.integration
def test_trace_names_the_fault_rule_that_fired(broker_factory, tmp_path: Path):
    journal = tmp_path / "t.jsonl"
    bt = broker_factory({"trace.file": str(journal), "trace.apis": "Produce"})
    bt.call(bt.broker.create_topic, "t", 1)
    bt.control.add_rule(api="Produce", error="NOT_LEADER_OR_FOLLOWER", times=1)
    producer = KafkaProducer(bootstrap_servers=bt.bootstrap, retries=5)
    producer.send("t", b"x", partition=0).get(10)
    producer.close(timeout=5)
    first, retry = (orjson.loads(x) for x in journal.read_bytes().splitlines())
    assert first["fault"]["rule"] == 1 and first["fault"]["action"] == {"error": "NOT_LEADER_OR_FOLLOWER"}
    assert [e["name"] for e in first["errors"]] == ["NOT_LEADER_OR_FOLLOWER"]
    assert retry["fault"] is None and retry["errors"] == []
