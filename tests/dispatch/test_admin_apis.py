"""CreateTopics, DeleteTopics and CreatePartitions at every version, through the broker's request
pipeline in-process (tests/dispatch/conftest.py: frames encoded and decoded as on the wire, no
socket), with the broker's state checked afterwards. The config APIs (DescribeConfigs,
IncrementalAlterConfigs) are in tests/server/test_admin_config_apis.py."""

from __future__ import annotations

import uuid

import orjson
import pytest

from broker.log.records import simple_batch
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.create_partitions import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from broker.protocol.generated.create_topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from broker.protocol.generated.delete_topics import DeleteTopicsRequest, DeleteTopicState
from broker.protocol.generated.metadata import MetadataRequest, MetadataRequestTopic
from broker.protocol.generated.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.protocol.primitives import ZERO_UUID
from tests.support.inprocess import InProcessClient

PRODUCE, METADATA, CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 0, 3, 19, 20, 37
ZERO = ZERO_UUID


def topic(name, partitions=1, rf=1, configs=None, assignments=None) -> CreatableTopic:
    return CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=rf,
        assignments=[CreatableReplicaAssignment(i, ids) for i, ids in (assignments or [])],
        configs=[CreatableTopicConfig(k, v) for k, v in (configs or {}).items()],
    )


def create(b, version, *topics, validate_only=False):
    with b.client() as c:
        return c.call(CREATE_TOPICS, version, CreateTopicsRequest(list(topics), 10000, validate_only)).topics


def produce(b, name, partition, values=(b"v",), version=9):
    """Produce one batch; the partition's response."""
    req = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(
                name=name, partition_data=[PartitionProduceData(partition, simple_batch(values))]
            )
        ],
    )
    with b.client() as c:
        return c.call(PRODUCE, version, req).responses[0].partition_responses[0]


def registry(b):
    return b.call(
        lambda: {t.name: (t.partitions, dict(t.configs), t.topic_id) for t in b.broker.topics.all()}
    )


def on_disk(b):
    """The topic registry file's view: name -> (partitions, configs)."""
    doc = orjson.loads((b.broker.config.data_dir / "topics.json").read_bytes())
    return {t["name"]: (t["partitions"], t["configs"]) for t in doc["topics"]}


# ------------------------------------------------------------------------------------ CreateTopics


@pytest.mark.parametrize("version", range(8))
def test_create_topics_every_version(node, version):
    (r,) = create(node, version, topic("orders", 3, configs={"retention.ms": "1000"}))
    assert (r.name, r.error_code) == ("orders", 0)
    partitions, configs, topic_id = registry(node)["orders"]
    assert (partitions, configs) == (3, {"retention.ms": "1000"})
    assert on_disk(node)["orders"] == (3, {"retention.ms": "1000"})
    assert [node.broker.logs.get("orders", p) is not None for p in range(4)] == [True, True, True, False]
    assert node.broker.logs.get("orders", 0).config.retention_ms == 1000
    if version >= 1:
        assert r.error_message is None
    if version >= 5:
        assert (r.num_partitions, r.replication_factor) == (3, 1)
        got = {c.name: (c.value, c.config_source, c.read_only, c.is_sensitive) for c in r.configs}
        assert got["retention.ms"] == ("1000", 1, False, False)
        assert got["segment.bytes"] == ("1073741824", 5, False, False)
        assert [c.name for c in r.configs] == sorted(got) and "cleanup.policy" in got
    assert r.topic_id == (topic_id if version >= 7 else ZERO)


@pytest.mark.parametrize("version", [0, 4, 7])
def test_create_topics_minus_one_uses_broker_defaults(node_factory, version):
    b = node_factory({"num.partitions": "4"})
    (r,) = create(b, version, topic("dflt", -1, -1))
    assert r.error_code == 0
    assert registry(b)["dflt"][0] == 4
    if version >= 5:
        assert (r.num_partitions, r.replication_factor) == (4, 1)


def test_create_topics_explicit_assignment(node):
    (r,) = create(node, 7, topic("placed", -1, -1, assignments=[(1, [1]), (0, [1]), (2, [1])]))
    assert (r.error_code, r.num_partitions, r.replication_factor) == (0, 3, 1)
    assert registry(node)["placed"][0] == 3


BAD_TOPICS = [
    (topic("t", 1, 3), ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor of 3 cannot be reached"),
    (topic("t", 1, 0), ErrorCode.INVALID_REPLICATION_FACTOR, "larger than 0"),
    (topic("t", 1, -2), ErrorCode.INVALID_REPLICATION_FACTOR, "larger than 0"),
    (topic("t", 0), ErrorCode.INVALID_PARTITIONS, "non-positive"),
    (topic("t", -5), ErrorCode.INVALID_PARTITIONS, "non-positive"),
    (topic("t", 10001), ErrorCode.POLICY_VIOLATION, "excessively large"),
    (topic("bad name"), ErrorCode.INVALID_TOPIC_EXCEPTION, "characters"),
    (topic(""), ErrorCode.INVALID_TOPIC_EXCEPTION, "empty"),
    (topic("x" * 250), ErrorCode.INVALID_TOPIC_EXCEPTION, "longer than 249"),
    (topic("t", configs={"no.such.config": "1"}), ErrorCode.INVALID_CONFIG, "no.such.config"),
    (topic("t", configs={"retention.ms": "soon"}), ErrorCode.INVALID_CONFIG, "retention.ms"),
    (topic("t", configs={"segment.bytes": "1"}), ErrorCode.INVALID_CONFIG, "at least 14"),
    (topic("t", configs={"cleanup.policy": None}), ErrorCode.INVALID_CONFIG, "Null value"),
    (
        topic("t", 1, 3, configs={"retention.ms": "x"}),
        ErrorCode.INVALID_CONFIG,
        "retention.ms",
    ),  # configs first
    (topic("t", -1, 1, assignments=[(0, [1])]), ErrorCode.INVALID_REQUEST, "replication factor"),
    (topic("t", 1, -1, assignments=[(0, [1])]), ErrorCode.INVALID_REQUEST, "numPartitions"),
    (topic("t", -1, -1, assignments=[(0, [2])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "broker 2"),
    (topic("t", -1, -1, assignments=[(0, [1, 1])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "more than once"),
    (topic("t", -1, -1, assignments=[(0, [])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "empty replica list"),
    (
        topic("t", -1, -1, assignments=[(0, [1]), (2, [1])]),
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "consecutive",
    ),
    (topic("t", -1, -1, assignments=[(0, [1]), (0, [1])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "multiple"),
]


@pytest.mark.parametrize(("spec", "code", "message"), BAD_TOPICS, ids=[c.name for _s, c, _m in BAD_TOPICS])
@pytest.mark.parametrize("version", [0, 1, 5, 7])
def test_create_topics_errors(node, version, spec, code, message):
    (r,) = create(node, version, spec)
    assert r.error_code == code
    if version >= 1:
        assert message in r.error_message
    if version >= 5:
        assert (r.num_partitions, r.replication_factor, r.configs) == (-1, -1, [])
    assert registry(node) == {}
    assert not list(node.broker.config.data_dir.glob(f"{spec.name}-*"))


def test_create_topics_existing_and_colliding(node):
    create(node, 7, topic("a.b"))
    exists, collides = create(node, 7, topic("a.b", 2), topic("a_b"))
    assert (exists.error_code, exists.error_message) == (
        ErrorCode.TOPIC_ALREADY_EXISTS,
        "topic 'a.b' already exists",
    )
    assert collides.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION and "collides" in collides.error_message
    assert list(registry(node)) == ["a.b"] and registry(node)["a.b"][0] == 1


def test_create_topics_duplicate_names_create_nothing_for_them(node):
    results = create(node, 7, topic("dup"), topic("ok"), topic("dup", 2))
    assert [(r.name, r.error_code, r.error_message) for r in results] == [
        ("dup", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
        ("ok", 0, None),
    ]
    assert list(registry(node)) == ["ok"]


@pytest.mark.parametrize("version", range(1, 8))
def test_create_topics_validate_only_creates_nothing(node, version):
    create(node, version, topic("exists"))
    ok, dup = create(
        node, version, topic("dry", 2, configs={"retention.ms": "5"}), topic("exists"), validate_only=True
    )
    assert (ok.error_code, dup.error_code) == (0, ErrorCode.TOPIC_ALREADY_EXISTS)
    assert ok.topic_id == ZERO
    if version >= 5:
        assert ok.num_partitions == 2
        assert {c.name: c.value for c in ok.configs}["retention.ms"] == "5"
    assert list(registry(node)) == ["exists"] and "dry" not in on_disk(node)
    assert not list(node.broker.config.data_dir.glob("dry-*"))
    assert node.broker.logs.get("dry", 0) is None


# ------------------------------------------------------------------------------------ DeleteTopics


def delete(b, version, names=(), ids=(), entries=None):
    if version >= 6:
        topics = entries or [DeleteTopicState(n, ZERO) for n in names] + [
            DeleteTopicState(None, i) for i in ids
        ]
        req = DeleteTopicsRequest(topics=topics, timeout_ms=5000)
    else:
        req = DeleteTopicsRequest(topic_names=list(names), timeout_ms=5000)
    with b.client() as c:
        return c.call(DELETE_TOPICS, version, req).responses


@pytest.mark.parametrize("version", range(7))
def test_delete_topics_every_version(node, version):
    create(node, 7, topic("gone", 2), topic("kept"))
    assert produce(node, "gone", 1).error_code == 0
    old_id = registry(node)["gone"][2]
    (r,) = delete(node, version, names=["gone"])
    assert (r.name, r.error_code) == ("gone", 0)
    if version >= 5:
        assert r.error_message is None
    if version >= 6:
        assert r.topic_id == old_id
    assert list(registry(node)) == ["kept"] and list(on_disk(node)) == ["kept"]
    assert node.broker.logs.get("gone", 0) is None and node.broker.logs.get("gone", 1) is None
    assert not list(node.broker.config.data_dir.glob("gone-*"))
    # recreate under the same name: a new id, empty logs
    (again,) = create(node, 7, topic("gone", 1))
    assert again.error_code == 0 and again.topic_id not in (old_id, ZERO)
    assert node.broker.logs.get("gone", 0).log_end_offset == 0
    assert produce(node, "gone", 0).base_offset == 0


@pytest.mark.parametrize("version", range(7))
def test_delete_unknown_topic(node, version):
    (r,) = delete(node, version, names=["nope"])
    assert (r.name, r.error_code) == ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if version >= 5:
        assert r.error_message == "This server does not host this topic-partition."


def test_delete_topics_by_id(node):
    create(node, 7, topic("by-id"))
    tid = registry(node)["by-id"][2]
    unknown = uuid.uuid4()
    found, missing = delete(node, 6, ids=[tid, unknown])
    assert (found.name, found.topic_id, found.error_code) == ("by-id", tid, 0)
    assert (missing.name, missing.topic_id, missing.error_code) == (None, unknown, ErrorCode.UNKNOWN_TOPIC_ID)
    assert registry(node) == {}


def test_delete_topics_v6_invalid_entries(node):
    create(node, 7, topic("a"), topic("b"), topic("c"))
    ids = {n: v[2] for n, v in registry(node).items()}
    entries = [
        DeleteTopicState(None, ZERO),
        DeleteTopicState("a", ids["a"]),
        DeleteTopicState("b", ZERO),
        DeleteTopicState("b", ZERO),
        DeleteTopicState(None, ids["c"]),
        DeleteTopicState(None, ids["c"]),
        DeleteTopicState(None, ids["a"]),
        DeleteTopicState("a", ZERO),
    ]
    got = [(r.name, r.topic_id, r.error_code, r.error_message) for r in delete(node, 6, entries=entries)]
    bad = ErrorCode.INVALID_REQUEST
    assert got == [
        (None, ZERO, bad, "Neither topic name nor id were specified."),
        ("a", ids["a"], bad, "You may not specify both topic name and topic id."),
        ("b", ZERO, bad, "Duplicate topic name."),
        (None, ids["c"], bad, "Duplicate topic id."),
        ("a", ids["a"], bad, "The provided topic name maps to an ID that was already supplied."),
    ]
    assert sorted(registry(node)) == ["a", "b", "c"]


def test_deleting_a_topic_drops_its_committed_offsets(node):
    from broker.protocol.generated.offset_commit import (
        OffsetCommitRequest,
        OffsetCommitRequestPartition,
        OffsetCommitRequestTopic,
    )
    from broker.protocol.generated.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic

    create(node, 7, topic("hooked", 2), topic("kept"))

    def committed(c: InProcessClient, name: str) -> list[int]:
        resp = c.call(9, 7, OffsetFetchRequest(group_id="g", topics=[OffsetFetchRequestTopic(name, [0])]))
        return [p.committed_offset for p in resp.topics[0].partitions]

    with node.client() as c:
        parts = [OffsetCommitRequestPartition(0, 42, committed_metadata="")]
        commit = OffsetCommitRequest(
            group_id="g",
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[
                OffsetCommitRequestTopic("hooked", partitions=parts),
                OffsetCommitRequestTopic("kept", partitions=parts),
            ],
        )
        assert all(p.error_code == 0 for t in c.call(8, 8, commit).topics for p in t.partitions)
        assert committed(c, "hooked") == [42] and committed(c, "kept") == [42]
        delete(node, 6, names=["hooked"])
        assert committed(c, "hooked") == [-1], "offsets of a deleted topic are dropped, as in Kafka"
        assert committed(c, "kept") == [42]
        create(node, 7, topic("hooked", 2))
        assert committed(c, "hooked") == [-1], "a recreated topic does not inherit old offsets"


def test_internal_topics(node):
    prohibited, offsets = create(node, 7, topic("__cluster_metadata"), topic("__consumer_offsets", 2))
    assert (prohibited.error_code, prohibited.error_message) == (
        ErrorCode.INVALID_REQUEST,
        "Creation of internal topic __cluster_metadata is prohibited.",
    )
    assert offsets.error_code == 0 and node.broker.topics.get("__consumer_offsets").internal
    (r,) = delete(node, 6, names=["__consumer_offsets"])
    assert (r.error_code, r.error_message) == (
        ErrorCode.INVALID_REQUEST,
        "__consumer_offsets is an internal topic and cannot be deleted",
    )
    assert list(registry(node)) == ["__consumer_offsets"]


def test_deletion_survives_restart(node_factory, tmp_path):
    data = tmp_path / "d"
    first = node_factory(data_dir=data)
    create(first, 7, topic("x"), topic("y", 2))
    delete(first, 6, names=["x"])
    first.stop()
    second = node_factory(data_dir=data)
    assert {n: v[0] for n, v in registry(second).items()} == {"y": 2}
    assert not list(data.glob("x-*"))


# ------------------------------------------------------------------------------------ CreatePartitions


def grow(b, version, *topics, validate_only=False):
    req = CreatePartitionsRequest(
        topics=[
            CreatePartitionsTopic(
                name, count, None if a is None else [CreatePartitionsAssignment(x) for x in a]
            )
            for name, count, a in topics
        ],
        timeout_ms=5000,
        validate_only=validate_only,
    )
    with b.client() as c:
        return c.call(CREATE_PARTITIONS, version, req).results


@pytest.mark.parametrize("version", range(4))
def test_create_partitions_every_version(node, version):
    create(node, 7, topic("grow", 1, configs={"max.message.bytes": "5000"}))
    (r,) = grow(node, version, ("grow", 3, None))
    assert (r.name, r.error_code, r.error_message) == ("grow", 0, None)
    assert registry(node)["grow"][0] == 3 and on_disk(node)["grow"][0] == 3
    assert node.broker.logs.get("grow", 2).config.max_message_bytes == 5000
    with node.client() as c:
        md = c.call(METADATA, 12, MetadataRequest(topics=[MetadataRequestTopic(name="grow")]))
    assert [p.partition_index for p in md.topics[0].partitions] == [0, 1, 2]
    for p in (1, 2):
        resp = produce(node, "grow", p, [b"a", b"b"])
        assert (resp.error_code, resp.base_offset) == (0, 0)
    assert produce(node, "grow", 3).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_create_partitions_with_assignments(node):
    create(node, 7, topic("placed"))
    (r,) = grow(node, 3, ("placed", 3, [[1], [1]]))
    assert r.error_code == 0 and registry(node)["placed"][0] == 3


@pytest.mark.parametrize("version", [0, 3])
def test_create_partitions_errors(node, version):
    create(node, 7, topic("t", 2), topic("u"))
    results = grow(
        node,
        version,
        ("nope", 2, None),
        ("t", 2, None),
        ("t", 5, None),
        ("u", 3, [[1]]),
        ("u", 3, None),
    )
    got = {(r.name, r.error_code) for r in results}
    assert got == {
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("t", ErrorCode.INVALID_REQUEST),
        ("u", ErrorCode.INVALID_REQUEST),
    }
    messages = [
        grow(node, version, ("t", 2, None))[0],
        grow(node, version, ("t", 1, None))[0],
        grow(node, version, ("u", 3, [[1]]))[0],
        grow(node, version, ("u", 2, [[2]]))[0],
        grow(node, version, ("u", 2, [[1, 1]]))[0],
        grow(node, version, ("u", 10002, None))[0],
    ]
    assert [(r.error_code, r.error_message) for r in messages] == [
        (ErrorCode.INVALID_PARTITIONS, "Topic already has 2 partition(s)."),
        (
            ErrorCode.INVALID_PARTITIONS,
            "The topic t currently has 2 partition(s); 1 would not be an increase.",
        ),
        (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
        ),
        (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes broker 2, but no such broker is registered "
            "(this cluster is the single broker 1).",
        ),
        (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes the broker 1 more than once.",
        ),
        (
            ErrorCode.POLICY_VIOLATION,
            "Unable to perform excessively large batch operation (10001 partitions; at most 10000 per request).",
        ),
    ]
    assert {n: v[0] for n, v in registry(node).items()} == {"t": 2, "u": 1}


def test_create_partitions_validate_only(node):
    create(node, 7, topic("dry"))
    ok, bad = grow(node, 3, ("dry", 4, None), ("nope", 2, None), validate_only=True)
    assert (ok.error_code, bad.error_code) == (0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert registry(node)["dry"][0] == 1 and node.broker.logs.get("dry", 1) is None
    assert not list(node.broker.config.data_dir.glob("dry-1"))


def test_partition_count_survives_restart(node_factory, tmp_path):
    data = tmp_path / "p"
    first = node_factory(data_dir=data)
    create(first, 7, topic("t"))
    grow(first, 3, ("t", 5, None))
    assert produce(first, "t", 4).error_code == 0
    first.stop()
    second = node_factory(data_dir=data)
    assert registry(second)["t"][0] == 5
    assert second.broker.logs.get("t", 4).log_end_offset == 1
    assert produce(second, "t", 4).base_offset == 1
