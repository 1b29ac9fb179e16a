"""Incremental fetch sessions (KIP-227) through the Fetch handler in-process, as Kafka's FetchManager
answers them (FetchSession.scala), and the session cache's bounds and eviction."""

from __future__ import annotations

import random

import pytest

from broker.dispatch.fetch_session import (
    EVICTION_MS,
    CachedPartition,
    FetchSessionCache,
    next_epoch,
)
from broker.log.records import simple_batch
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.fetch import (
    FetchPartition,
    FetchRequest,
    FetchTopic,
    ForgottenTopic,
)
from broker.protocol.generated.produce import PartitionProduceData, ProduceRequest, TopicProduceData

FETCH = 1


def _produce(node, topic: str, partition: int, n: int = 1) -> None:
    body = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(partition, simple_batch([b"v"] * n))]
            )
        ],
    )
    with node.client() as c:
        resp = c.call(0, 9, body)
    assert resp.responses[0].partition_responses[0].error_code == 0


def _fetch(node, version, topics, *, session_id=0, epoch=0, forgotten=(), max_bytes=1 << 20, to=-1):
    """``topics``: {topic: {partition: offset}}; ``forgotten``: {topic: [partitions]}."""
    registry = node.broker.topics

    def key(name):
        return {"topic_id": registry.get(name).topic_id} if version >= 13 else {"topic": name}

    body = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=[
            FetchTopic(
                **key(t),
                partitions=[
                    FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20)
                    for p, o in parts.items()
                ],
            )
            for t, parts in topics.items()
        ],
        forgotten_topics_data=[
            ForgottenTopic(**key(t), partitions=list(ps)) for t, ps in dict(forgotten).items()
        ],
        rack_id="",
    )
    with node.client(to) as c:
        return c.call(FETCH, version, body)


def _parts(node, version, resp) -> dict[tuple[str, int], tuple[int, int, int]]:
    """(topic, partition) -> (error, high watermark, bytes of records) of an answer."""
    out = {}
    for t in resp.responses:
        name = t.topic if version < 13 else node.broker.topics.by_id(t.topic_id).name
        for p in t.partitions:
            out[(name, p.partition_index)] = (p.error_code, p.high_watermark, len(p.records or b""))
    return out


@pytest.mark.parametrize("version", [7, 12, 13, 16])
def test_full_then_incremental_answers_only_what_changed(node, version):
    node.broker.admin.create_topic("a", 3)
    node.broker.admin.create_topic("b", 1)
    _produce(node, "a", 0)
    full = _fetch(node, version, {"a": {0: 0, 1: 0, 2: 0}, "b": {0: 0}})
    assert full.error_code == 0 and full.session_id != 0
    assert _parts(node, version, full) == {
        ("a", 0): (0, 1, len(full.responses[0].partitions[0].records)),
        ("a", 1): (0, 0, 0),
        ("a", 2): (0, 0, 0),
        ("b", 0): (0, 0, 0),
    }
    sid = full.session_id
    # nothing changed: the partitions are left out of the request and of the answer
    quiet = _fetch(node, version, {"a": {0: 1}}, session_id=sid, epoch=1)
    assert (quiet.error_code, quiet.session_id, quiet.responses) == (0, sid, [])
    # a new record in b/0: only it is answered, though the request names none
    _produce(node, "b", 0, 2)
    more = _fetch(node, version, {}, session_id=sid, epoch=2)
    got = _parts(node, version, more)
    assert list(got) == [("b", 0)] and got[("b", 0)][:2] == (0, 2) and got[("b", 0)][2] > 0
    # read again from offset 2 (the client advanced it): the high watermark is the one last sent
    again = _fetch(node, version, {"b": {0: 2}}, session_id=sid, epoch=3)
    assert again.responses == []


@pytest.mark.parametrize("version", [7, 13])
def test_forgotten_partitions_leave_the_session_and_an_emptied_session_closes(node, version):
    node.broker.admin.create_topic("a", 2)
    full = _fetch(node, version, {"a": {0: 0, 1: 0}})
    sid = full.session_id
    gone = _fetch(node, version, {}, session_id=sid, epoch=1, forgotten={"a": [1]})
    assert (gone.error_code, gone.responses) == (0, [])
    _produce(node, "a", 1)
    _produce(node, "a", 0)
    # a/1 is no longer in the session: only a/0 is read
    after = _fetch(node, version, {}, session_id=sid, epoch=2)
    assert list(_parts(node, version, after)) == [("a", 0)]
    # forgetting the last partition closes the session: answered without one
    last = _fetch(node, version, {}, session_id=sid, epoch=3, forgotten={"a": [0]})
    assert (last.error_code, last.session_id, last.responses) == (0, 0, [])
    assert node.broker.services.fetch_sessions.get(sid) is None
    missing = _fetch(node, version, {}, session_id=sid, epoch=4)
    assert missing.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND and missing.session_id == 0


def test_session_errors_and_closing(node):
    node.broker.admin.create_topic("a", 1)
    sid = _fetch(node, 12, {"a": {0: 0}}).session_id
    bad = _fetch(node, 12, {}, session_id=sid, epoch=5)
    assert (bad.error_code, bad.session_id, bad.responses) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, [])
    # an error does not move the session's epoch on: epoch 1 still continues it
    assert _fetch(node, 12, {}, session_id=sid, epoch=1).error_code == 0
    # a replayed request (same epoch again) is refused
    assert _fetch(node, 12, {}, session_id=sid, epoch=1).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    # topic ids from v13: a session opened without them cannot go on with them, and the other way
    wrong = _fetch(node, 13, {}, session_id=sid, epoch=2)
    assert wrong.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    sid13 = _fetch(node, 13, {"a": {0: 0}}).session_id
    assert (
        _fetch(node, 12, {}, session_id=sid13, epoch=1).error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    )
    # epoch -1 closes the session named and opens none; epoch 0 closes it and opens a new one
    final = _fetch(node, 12, {"a": {0: 0}}, session_id=sid, epoch=-1)
    assert (final.error_code, final.session_id) == (0, 0) and len(final.responses) == 1
    assert node.broker.services.fetch_sessions.get(sid) is None
    renewed = _fetch(node, 13, {"a": {0: 0}}, session_id=sid13, epoch=0)
    assert renewed.session_id not in (0, sid13) and node.broker.services.fetch_sessions.get(sid13) is None
    assert _fetch(node, 13, {}, session_id=0, epoch=3).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_a_moved_log_start_offset_is_answered_though_nothing_else_changed(node):
    node.broker.admin.create_topic("a", 2)
    _produce(node, "a", 0, 4)
    sid = _fetch(node, 12, {"a": {0: 4, 1: 0}}).session_id
    assert _fetch(node, 12, {}, session_id=sid, epoch=1).responses == []
    plog = node.broker.logs.get("a", 0)
    node.broker.logs.delete_records(plog, 2)
    moved = _fetch(node, 12, {}, session_id=sid, epoch=2)
    (part,) = moved.responses[0].partitions
    assert (part.partition_index, part.log_start_offset, part.high_watermark, part.records) == (0, 2, 4, b"")
    assert _fetch(node, 12, {}, session_id=sid, epoch=3).responses == []


def test_errors_are_always_answered_and_partitions_with_records_rotate(node):
    node.broker.admin.create_topic("a", 2)
    for p in (0, 1):
        _produce(node, "a", p, 3)
    sid = _fetch(node, 12, {"a": {0: 3, 1: 3}}).session_id
    # an offset out of range is answered every time it is asked
    for epoch in (1, 2):
        bad = _fetch(node, 12, {"a": {0: 99}} if epoch == 1 else {}, session_id=sid, epoch=epoch)
        assert _parts(node, 12, bad) == {("a", 0): (ErrorCode.OFFSET_OUT_OF_RANGE, -1, 0)}
    # a 1-byte request budget: the first partition read gets its batch; it then moves to the end
    first = _fetch(node, 12, {"a": {0: 0, 1: 0}}, session_id=sid, epoch=3, max_bytes=1)
    assert [(k, v[2] > 0) for k, v in _parts(node, 12, first).items()] == [(("a", 0), True)]
    second = _fetch(node, 12, {}, session_id=sid, epoch=4, max_bytes=1)
    assert [(k, v[2] > 0) for k, v in _parts(node, 12, second).items()] == [(("a", 1), True)]


def test_each_node_of_a_cluster_knows_only_its_own_sessions(node_factory):
    cluster = node_factory({"cluster.nodes": 2})
    cluster.broker.admin.create_topic("a", 2)
    sid = _fetch(cluster, 12, {"a": {0: 0, 1: 0}}, to=1).session_id
    assert sid != 0
    other = _fetch(cluster, 12, {}, session_id=sid, epoch=1, to=2)
    assert other.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    # nor does a full fetch to the other node close it
    _fetch(cluster, 12, {"a": {0: 0}}, session_id=sid, epoch=-1, to=2)
    assert _fetch(cluster, 12, {}, session_id=sid, epoch=1, to=1).error_code == 0


def test_no_session_below_v7_or_with_no_slots(node_factory):
    none = node_factory({"max.incremental.fetch.session.cache.slots": 0})
    none.broker.admin.create_topic("a", 1)
    assert _fetch(none, 12, {"a": {0: 0}}).session_id == 0
    assert len(none.broker.services.fetch_sessions) == 0


def test_the_cache_is_bounded_and_evicts_as_kafka_does():
    now = [0]
    cache = FetchSessionCache(2, lambda: now[0], rng=random.Random(1))

    def parts(n):
        return {(f"t{i}", 0): CachedPartition(f"t{i}", None) for i in range(n)}

    a = cache.maybe_create(False, parts(3))
    b = cache.maybe_create(False, parts(5))
    assert a and b and len(cache) == 2
    # full, nothing stale, nothing old enough to be evicted by size
    assert cache.maybe_create(False, parts(10)) == 0
    # past 120 s since they were created and last touched again: evictable by a larger session
    now[0] = EVICTION_MS + 1
    cache.touch(cache.get(a), now[0])
    cache.touch(cache.get(b), now[0])
    assert cache.maybe_create(False, parts(3)) == 0  # not larger than the smallest (3)
    c = cache.maybe_create(False, parts(4))
    assert c and cache.get(a) is None and cache.get(b) is not None
    # a session unused for more than 120 s goes first, whatever its size
    now[0] += EVICTION_MS + 1
    cache.touch(cache.get(c), now[0])
    d = cache.maybe_create(False, parts(1))
    assert d and cache.get(b) is None and cache.get(c) is not None


def test_next_epoch_wraps_as_kafka():
    assert [next_epoch(e) for e in (-1, 0, 1, 2**31 - 1)] == [-1, 1, 2, 1]
