"""Kafka Streams (the newest 4.x release, scripts/clients.sh) as an application-level client: the word
count in tests/java-streams/WordCountApp.java against the broker.

processing.guarantee=at_least_once, and exactly_once_v2 (transactions: the output read with
read_committed). Streams creates its internal topics (the repartition
topic and the compacted changelog of the count store) through CreateTopics with its own configs; the
test checks they exist with those configs, that the counts in the output topic are right, that they
keep counting as more input arrives, and that a second instance with an empty state directory
restores the store from the changelog and resumes at the committed offsets.
"""

from __future__ import annotations

import json
import struct
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.support.java import JavaSession, require_java

pytestmark = pytest.mark.java

APP = "wc"
INPUT, OUTPUT = "wc-in", "wc-out"
LINES_1 = ["the quick brown fox", "jumps over the lazy dog", "The dog barks", "a fox, a dog; THE end"]
LINES_2 = ["the fox returns", "dog dog dog"]
LINES_3 = ["end of the story"]


def words(lines: list[str]) -> Counter:
    return Counter(w for line in lines for w in line.lower().replace(",", " ").replace(";", " ").split())


def produce(bt, lines: list[str]) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bt.bootstrap)
    try:
        for i, line in enumerate(lines):
            producer.send(INPUT, key=f"line-{i}".encode(), value=line.encode())
        producer.flush(30)
    finally:
        producer.close()


class Output:
    """The output topic read from the start by one kafka-python consumer: latest count per word."""

    def __init__(self, bt, isolation_level: str = "read_uncommitted"):
        from kafka import KafkaConsumer

        self.consumer = KafkaConsumer(
            OUTPUT,
            bootstrap_servers=bt.bootstrap,
            group_id=None,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            isolation_level=isolation_level,
        )
        self.latest: dict[str, int] = {}
        self.updates = 0

    def wait_for(self, expected: Counter, timeout: float = 90) -> dict[str, int]:
        deadline = time.monotonic() + timeout
        while self.latest != dict(expected) and time.monotonic() < deadline:
            for recs in self.consumer.poll(timeout_ms=300).values():
                for r in recs:
                    self.latest[r.key.decode()] = struct.unpack(">q", r.value)[0]
                    self.updates += 1
        assert self.latest == dict(expected)
        return self.latest

    def close(self) -> None:
        self.consumer.close()


def committed_offsets(bt) -> dict[tuple[str, int], int]:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bt.bootstrap)
    try:
        return {
            (tp.topic, tp.partition): om.offset
            for tp, om in admin.list_group_offsets({APP: None})[APP].items()
        }
    finally:
        admin.close()


def start_app(java, bt, state_dir: Path, *overrides: str) -> JavaSession:
    app = java.session(
        "WordCountApp", [bt.bootstrap, APP, INPUT, OUTPUT, str(state_dir), *overrides], timeout=120
    )
    deadline = time.monotonic() + 120
    while True:
        line = app.next_line(max(1.0, deadline - time.monotonic()))
        assert line is not None, f"WordCountApp exited:\n{app.stderr[-4000:]}"
        if not line.startswith("{"):
            continue
        event = json.loads(line)
        assert "error" not in event, f"{event}\n{app.stderr[-4000:]}"
        if event.get("state") == "RUNNING":
            return app


def stop_app(app: JavaSession) -> None:
    result = app.close()
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert not [e for e in events if "error" in e], f"{events}\n{result.stderr[-4000:]}"
    assert result.returncode == 0 and {"closed": True} in events, result


def test_word_count(bt, tmp_path: Path):
    java = require_java("streams")
    bt.call(bt.broker.create_topic, INPUT, 2)
    bt.call(bt.broker.create_topic, OUTPUT, 2)
    produce(bt, LINES_1)
    out = Output(bt)
    try:
        app = start_app(java, bt, tmp_path / "state-1")
        try:
            out.wait_for(words(LINES_1))
            produce(bt, LINES_2)
            out.wait_for(words(LINES_1 + LINES_2))
        finally:
            stop_app(app)

        # the internal topics, created by Streams through CreateTopics with the configs it asks for
        topics = bt.call(lambda: {t.name: (t.partitions, dict(t.configs)) for t in bt.broker.topics.all()})
        internal = {
            name: cfg
            for name, cfg in topics.items()
            if name.startswith(f"{APP}-") and name not in (INPUT, OUTPUT)
        }
        assert internal == {
            f"{APP}-words-repartition": (
                2,
                {
                    "cleanup.policy": "delete",
                    "retention.ms": "-1",
                    "segment.bytes": "52428800",
                    "message.timestamp.type": "CreateTime",
                },
            ),
            f"{APP}-counts-changelog": (
                2,
                {"cleanup.policy": "compact", "message.timestamp.type": "CreateTime"},
            ),
        }, internal
        # the application's group committed every input record and every repartitioned word
        committed = committed_offsets(bt)
        assert sum(o for (t, _), o in committed.items() if t == INPUT) == len(LINES_1 + LINES_2), committed
        n_words = sum(words(LINES_1 + LINES_2).values())
        assert sum(o for (t, _), o in committed.items() if t.endswith("-repartition")) == n_words, committed

        # a new instance with an empty state directory restores the counts from the changelog and
        # resumes at the committed input offsets (no line counted twice)
        app = start_app(java, bt, tmp_path / "state-2")
        try:
            produce(bt, LINES_3)
            out.wait_for(words(LINES_1 + LINES_2 + LINES_3))
        finally:
            stop_app(app)
    finally:
        out.close()


def test_word_count_exactly_once_v2(bt, tmp_path: Path):
    """processing.guarantee=exactly_once_v2: Streams' transactional producer commits the counts and
    the input offsets together; a read_committed reader sees the right counts, and a restarted
    instance resumes at the committed offsets."""
    java = require_java("streams")
    bt.call(bt.broker.create_topic, INPUT, 2)
    bt.call(bt.broker.create_topic, OUTPUT, 2)
    produce(bt, LINES_1)
    out = Output(bt, "read_committed")
    eos = "processing.guarantee=exactly_once_v2"
    try:
        app = start_app(java, bt, tmp_path / "state-1", eos)
        try:
            out.wait_for(words(LINES_1))
        finally:
            stop_app(app)
        committed = committed_offsets(bt)
        # every input line (produced without a transaction: no markers in the input topic)
        assert sum(o for (t, _), o in committed.items() if t == INPUT) == len(LINES_1), committed
        app = start_app(java, bt, tmp_path / "state-2", eos)
        try:
            produce(bt, LINES_2)
            out.wait_for(words(LINES_1 + LINES_2))
        finally:
            stop_app(app)
    finally:
        out.close()
