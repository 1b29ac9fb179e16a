"""Transactions on a compacted topic, pykbroker beside Apache Kafka (client-level, confluent-kafka
only): the same writes -- a transactional producer commits some keys, aborts others, a second one
leaves its transaction open, plain records around them -- then each broker's own log cleaner runs
(log.cleaner.backoff.ms 500 on both, tests/support/real_kafka.py; the waits are hang guards); what
read_uncommitted and read_committed consumers read from the beginning (offsets, keys, values) and the
watermarks must be the same on both once each has cleaned: aborted records gone, each key's latest
committed value kept at its offset, the open transaction's records untouched; then again after the
open transaction commits.

``segment.ms=1`` rolls a segment on nearly every append on both brokers, so everything below the
open transaction is in closed segments either cleaner takes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.differential import tally
from tests.support.transactions import read_isolated

GUARD = 180.0  # hang guard for one wait (the cleaners look every 0.5 s), never a timing assertion
CONFIGS = {
    "cleanup.policy": "compact",
    "segment.ms": "1",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "0",
}


@pytest.fixture(scope="module")
def bootstraps(our_broker: Any, real_kafka: Any) -> dict[str, str]:
    return {"pykbroker": our_broker.bootstrap, "kafka": real_kafka.bootstrap}


def _wait_for(what: str, check: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + GUARD
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def _read(bootstrap: str, topic: str, isolation: str) -> list[tuple[int, str, str]]:
    return [(o, k.decode(), v) for _p, o, k, v in read_isolated(bootstrap, topic, 1, isolation, 60)]


def _watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    """(last stable offset, high watermark) as read_committed and read_uncommitted consumers see them."""
    out = []
    for isolation in ("read_committed", "read_uncommitted"):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm", "isolation.level": isolation})
        try:
            out.append(c.get_watermark_offsets(TopicPartition(topic, 0), 60, cached=False)[1])
        finally:
            c.close()
    return out[0], out[1]


def _marker_written(bootstrap: str, topic: str, hw_before: int) -> bool:
    lso, hw = _watermarks(bootstrap, topic)
    return lso == hw > hw_before


def _txn_producer(bootstrap: str, tid: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(60)
    return p


def _write(p: Producer, topic: str, records: dict[str, str]) -> None:
    for k, v in records.items():
        p.produce(topic, key=k.encode(), value=v.encode(), partition=0)
    assert p.flush(60) == 0


def _cleaned(bootstrap: str, topic: str, superseded: set[str]) -> list | None:
    """The read_uncommitted records once no aborted (``B-``) nor ``superseded`` value is left."""
    records = _read(bootstrap, topic, "read_uncommitted")
    if any(v.startswith("B-") or v in superseded for _o, _k, v in records):
        return None
    return records


def scenario(bootstrap: str, suffix: str) -> dict:
    topic = f"ledger-{suffix}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=CONFIGS)], operation_timeout=30)[topic].result(60)
    _wait_for("the topic", lambda: topic in admin.list_topics(timeout=10).topics)
    plain = Producer({"bootstrap.servers": bootstrap})
    t1 = _txn_producer(bootstrap, f"ledger-tx-{suffix}")
    t1.begin_transaction()
    _write(t1, topic, {f"k{i}": f"A-{i}" for i in range(10)})
    t1.commit_transaction(60)
    t1.begin_transaction()
    _write(t1, topic, {**{f"k{i}": f"B-{i}" for i in range(5)}, **{f"bx{i}": f"B-{i}" for i in range(5)}})
    t1.abort_transaction(60)
    t1.begin_transaction()
    _write(t1, topic, {f"k{i}": f"C-{i}" for i in range(5, 10)})
    hw_c = _watermarks(bootstrap, topic)[1]
    t1.commit_transaction(60)
    # Kafka answers EndTxn once its prepare record is written and writes the markers after it: wait
    # for the marker (the LSO reaches a high watermark past it) so that p0 follows it on both brokers
    _wait_for("the commit marker", lambda: _marker_written(bootstrap, topic, hw_c))
    _write(plain, topic, {"p0": "plain"})
    t2 = _txn_producer(bootstrap, f"ledger-open-{suffix}")
    t2.begin_transaction()
    _write(t2, topic, {"k0": "O-0", "o1": "O-1"})  # left open
    _write(plain, topic, {"p1": "plain"})
    outcome: dict[str, Any] = {}
    superseded = {f"A-{i}" for i in range(5, 10)}
    outcome["open: read_uncommitted"] = _wait_for(
        "the cleaner", lambda: _cleaned(bootstrap, topic, superseded)
    )
    outcome["open: read_committed"] = _read(bootstrap, topic, "read_committed")
    outcome["open: lso, hw"] = _watermarks(bootstrap, topic)
    t2.commit_transaction(60)
    # the same wait for t2's marker, so that p2 follows it on both brokers
    hw_open = outcome["open: lso, hw"][1]
    _wait_for("the commit marker", lambda: _marker_written(bootstrap, topic, hw_open))
    _write(plain, topic, {"p2": "plain"})
    outcome["committed: read_uncommitted"] = _wait_for(
        "the cleaner", lambda: _cleaned(bootstrap, topic, superseded | {"A-0"})
    )
    outcome["committed: read_committed"] = _read(bootstrap, topic, "read_committed")
    outcome["committed: lso, hw"] = _watermarks(bootstrap, topic)
    return outcome


def test_transactions_on_a_compacted_topic_clean_as_kafka_cleans_them(bootstraps):
    outcomes = {}
    for b in ("pykbroker", "kafka"):
        try:
            outcomes[b] = scenario(bootstraps[b], f"{b}-{uuid.uuid4().hex[:6]}")
        except AssertionError as e:
            raise AssertionError(f"on {b}: {e}") from e
    ours, theirs = outcomes["pykbroker"], outcomes["kafka"]
    # right on its own terms: each key once below the open transaction, its latest committed value
    latest = {k: v for _o, k, v in theirs["committed: read_committed"]}
    assert latest == {
        **{f"k{i}": f"A-{i}" for i in range(1, 5)},
        **{f"k{i}": f"C-{i}" for i in range(5, 10)},
        "k0": "O-0",
        "o1": "O-1",
        "p0": "plain",
        "p1": "plain",
        "p2": "plain",
    }
    same = ours == theirs
    tally.record("client", "transactions on a compacted topic", not same, False)
    assert same, f"pykbroker {ours!r}\n  vs Kafka {theirs!r}"
