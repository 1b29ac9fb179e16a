"""DescribeConfigs and IncrementalAlterConfigs at every version, over real TCP: values, sources,
types, synonyms, every error code, and that altered configs persist and take effect on the logs."""

from __future__ import annotations

import time

import pytest

from broker.config import SETTINGS
from broker.dispatch.config_entries import kafka_broker_configs
from broker.log.config import TOPIC_SETTINGS
from broker.log.records import simple_batch
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from broker.protocol.generated.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from broker.protocol.generated.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from tests.support.wire import WireClient

PRODUCE, DESCRIBE_CONFIGS, ALTER = 0, 32, 44
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DYNAMIC_TOPIC, STATIC_BROKER, DEFAULT = 1, 4, 5
BOOLEAN, STRING, INT, LONG, LIST = 1, 2, 3, 5, 7


def make_topic(b, name="t", partitions=1, configs=None):
    return b.call(b.broker.create_topic, name, partitions, configs or {})


def describe(b, *resources, version=4, synonyms=False, docs=False):
    req = DescribeConfigsRequest(
        resources=[DescribeConfigsResource(t, n, keys) for t, n, keys in resources],
        include_synonyms=synonyms,
        include_documentation=docs,
    )
    with WireClient(b.port) as c:
        return c.call(DESCRIBE_CONFIGS, version, req).results


def topic_configs(b, name="t", **kw):
    (r,) = describe(b, (TOPIC, name, None), **kw)
    assert r.error_code == 0, r
    return {e.name: e for e in r.configs}


def alter(b, *resources, version=1, validate_only=False):
    req = IncrementalAlterConfigsRequest(
        resources=[
            AlterConfigsResource(t, n, [AlterableConfig(k, op, v) for k, op, v in edits])
            for t, n, edits in resources
        ],
        validate_only=validate_only,
    )
    with WireClient(b.port) as c:
        return [
            (r.resource_type, r.resource_name, r.error_code, r.error_message)
            for r in c.call(ALTER, version, req).responses
        ]


def produce(b, name, values, partition=0, timestamp=None):
    batch = simple_batch(values, base_timestamp=timestamp)
    req = ProduceRequest(
        None, 1, 5000, [TopicProduceData(name=name, partition_data=[PartitionProduceData(partition, batch)])]
    )
    with WireClient(b.port) as c:
        return c.call(PRODUCE, 9, req).responses[0].partition_responses[0]


# ------------------------------------------------------------------------------------ DescribeConfigs


@pytest.mark.parametrize("version", range(5))
def test_describe_topic_every_version(broker, version):
    make_topic(broker, configs={"retention.ms": "1000", "cleanup.policy": "compact,delete"})
    got = topic_configs(broker, version=version, synonyms=True, docs=True)
    assert sorted(got) == sorted(TOPIC_SETTINGS)
    ret, seg, policy = got["retention.ms"], got["segment.bytes"], got["cleanup.policy"]
    assert (ret.value, seg.value, policy.value) == ("1000", "1073741824", "compact,delete")
    assert all(not e.read_only and not e.is_sensitive for e in got.values())
    if version == 0:
        assert (ret.is_default, seg.is_default) == (False, True)
    else:
        assert (ret.config_source, seg.config_source, policy.config_source) == (
            DYNAMIC_TOPIC,
            DEFAULT,
            DYNAMIC_TOPIC,
        )
        # log.retention.ms (retention.ms's first broker synonym) is unset: Kafka lists no broker
        # synonym after it, not even the log.retention.hours default
        assert [(s.name, s.value, s.source) for s in ret.synonyms] == [
            ("retention.ms", "1000", DYNAMIC_TOPIC)
        ]
        assert [(s.name, s.value, s.source) for s in seg.synonyms] == [
            ("log.segment.bytes", "1073741824", DEFAULT)
        ]
    if version >= 3:
        types = {n: e.config_type for n, e in got.items()}
        assert (types["retention.ms"], types["segment.bytes"], types["cleanup.policy"]) == (LONG, INT, LIST)
        assert (types["message.timestamp.type"], types["max.message.bytes"], types["segment.ms"]) == (
            STRING,
            INT,
            LONG,
        )
        assert {n: e.documentation for n, e in got.items()} == {n: s.doc for n, s in TOPIC_SETTINGS.items()}


@pytest.mark.parametrize("version", range(1, 5))
def test_describe_without_synonyms_or_docs(broker, version):
    make_topic(broker)
    got = topic_configs(broker, version=version)
    assert all(e.synonyms == [] for e in got.values())
    if version >= 3:
        assert all(e.documentation is None for e in got.values()) and got["retention.ms"].config_type == LONG


def test_describe_configuration_keys_filter(broker):
    make_topic(broker)
    some, empty = describe(
        broker, (TOPIC, "t", ["retention.ms", "no.such", "cleanup.policy"]), (TOPIC, "t", [])
    )
    assert sorted(e.name for e in some.configs) == ["cleanup.policy", "retention.ms"]
    assert len(empty.configs) == len(TOPIC_SETTINGS)  # empty means all, as in Kafka


def test_describe_static_broker_defaults(broker_factory):
    b = broker_factory(
        {"log.retention.ms": "5000", "message.max.bytes": "2000", "log.cleanup.policy": "compact"}
    )
    make_topic(b, configs={"max.message.bytes": "3000"})
    got = topic_configs(b, synonyms=True)
    assert (got["retention.ms"].value, got["retention.ms"].config_source) == ("5000", STATIC_BROKER)
    assert [(s.name, s.value, s.source) for s in got["retention.ms"].synonyms] == [
        ("log.retention.ms", "5000", STATIC_BROKER),
        ("log.retention.hours", "168", DEFAULT),
    ]
    assert (got["cleanup.policy"].value, got["cleanup.policy"].config_source) == ("compact", STATIC_BROKER)
    assert [(s.name, s.value, s.source) for s in got["max.message.bytes"].synonyms] == [
        ("max.message.bytes", "3000", DYNAMIC_TOPIC),
        ("message.max.bytes", "2000", STATIC_BROKER),
        ("message.max.bytes", "1048588", DEFAULT),
    ]


def test_describe_retention_hours(broker_factory):
    b = broker_factory({"log.retention.hours": "2"})
    make_topic(b)
    ret = topic_configs(b, synonyms=True)["retention.ms"]
    # The value follows log.retention.hours, but as Kafka (ConfigHelper.configSynonyms) the synonyms
    # start at the first broker synonym, log.retention.ms, which is unset: none listed, source default.
    assert (ret.value, ret.config_source) == ("7200000", DEFAULT)
    assert ret.synonyms == []


@pytest.mark.parametrize("version", range(5))
@pytest.mark.parametrize("name", ["1", ""])
def test_describe_broker(broker_factory, version, name):
    b = broker_factory({"num.partitions": "3"})
    (r,) = describe(b, (BROKER, name, None), version=version, synonyms=True, docs=True)
    assert (r.error_code, r.resource_type, r.resource_name) == (0, BROKER, name)
    got = {e.name: e for e in r.configs}
    # this broker's settings and every other broker property Kafka lists (no effect here)
    assert sorted(got) == sorted(set(SETTINGS) | set(kafka_broker_configs()))
    assert all(e.read_only for e in got.values())
    assert (got["num.partitions"].value, got["auto.create.topics.enable"].value) == ("3", "true")
    assert got["broker.rack"].value is None
    if version >= 1:
        assert (got["num.partitions"].config_source, got["auto.create.topics.enable"].config_source) == (
            STATIC_BROKER,
            DEFAULT,
        )
        assert [(s.name, s.value, s.source) for s in got["num.partitions"].synonyms] == [
            ("num.partitions", "3", STATIC_BROKER),
            ("num.partitions", "1", DEFAULT),
        ]
    else:
        assert (got["num.partitions"].is_default, got["auto.create.topics.enable"].is_default) == (
            False,
            True,
        )
    if version >= 3:
        types = {n: e.config_type for n, e in got.items()}
        assert (types["auto.create.topics.enable"], types["num.partitions"], types["log.retention.ms"]) == (
            BOOLEAN,
            INT,
            LONG,
        )
        assert (types["log.cleanup.policy"], types["log.dirs"]) == (LIST, LIST)  # as Kafka types them
        assert got["num.partitions"].documentation == SETTINGS["num.partitions"].doc


@pytest.mark.parametrize("version", [0, 4])
def test_describe_errors_per_resource(broker, version):
    make_topic(broker)
    results = describe(
        broker,
        (TOPIC, "nope", None),
        (TOPIC, "bad name", None),
        (BROKER, "2", None),
        (BROKER, "one", None),
        (BROKER_LOGGER, "1", None),
        (CLIENT_METRICS, "sub", None),
        (GROUP, "g", None),
        (99, "x", None),
        (TOPIC, "t", ["retention.ms"]),
        version=version,
    )
    got = [(r.resource_type, r.resource_name, r.error_code, r.error_message, len(r.configs)) for r in results]
    assert got == [
        (TOPIC, "nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist.", 0),
        (TOPIC, "bad name", ErrorCode.INVALID_TOPIC_EXCEPTION, got[1][3], 0),
        (
            BROKER,
            "2",
            ErrorCode.INVALID_REQUEST,
            "Unexpected broker id, expected 1 or empty string, but received 2",
            0,
        ),
        (BROKER, "one", ErrorCode.INVALID_REQUEST, "Broker id must be an integer, but it is: one", 0),
        (BROKER_LOGGER, "1", ErrorCode.INVALID_REQUEST, "Unsupported resource type: BROKER_LOGGER", 0),
        (CLIENT_METRICS, "sub", ErrorCode.INVALID_REQUEST, "Unsupported resource type: CLIENT_METRICS", 0),
        (GROUP, "g", 0, None, 2),
        (99, "x", ErrorCode.INVALID_REQUEST, "Unsupported resource type: 99", 0),
        (TOPIC, "t", 0, None, 1),
    ]
    assert "characters" in got[1][3]


# ------------------------------------------------------------------------------------ IncrementalAlterConfigs


@pytest.mark.parametrize("version", range(2))
def test_alter_set_and_delete_every_version(broker, version):
    make_topic(broker, partitions=2, configs={"segment.ms": "100000"})
    edits = [
        ("retention.ms", SET, "1000"),
        ("max.message.bytes", SET, " 2048 "),
        ("segment.ms", DELETE, None),
    ]
    assert alter(broker, (TOPIC, "t", edits), version=version) == [(TOPIC, "t", 0, None)]
    topic = broker.broker.topics.get("t")
    assert topic.configs == {"retention.ms": "1000", "max.message.bytes": "2048"}
    got = topic_configs(broker)
    assert (got["retention.ms"].value, got["retention.ms"].config_source) == ("1000", DYNAMIC_TOPIC)
    assert (got["segment.ms"].value, got["segment.ms"].config_source) == ("604800000", DEFAULT)
    for p in (0, 1):
        cfg = broker.broker.logs.get("t", p).config
        assert (cfg.retention_ms, cfg.max_message_bytes, cfg.segment_ms) == (1000, 2048, 604800000)
    # deleting a key that is not overridden changes nothing and is no error
    assert alter(broker, (TOPIC, "t", [("retention.bytes", DELETE, None)]), version=version)[0][2] == 0
    assert broker.broker.topics.get("t").configs == {"retention.ms": "1000", "max.message.bytes": "2048"}


def test_alter_append_and_subtract_lists(broker):
    make_topic(broker)
    assert alter(broker, (TOPIC, "t", [("cleanup.policy", APPEND, "compact")]))[0][2] == 0
    assert broker.broker.topics.get("t").configs == {"cleanup.policy": "delete,compact"}
    assert alter(broker, (TOPIC, "t", [("cleanup.policy", APPEND, "compact,delete")]))[0][2] == 0
    assert broker.broker.topics.get("t").configs == {"cleanup.policy": "delete,compact"}
    assert alter(broker, (TOPIC, "t", [("cleanup.policy", SUBTRACT, "delete")]))[0][2] == 0
    assert topic_configs(broker)["cleanup.policy"].value == "compact"
    assert broker.broker.logs.get("t", 0).config.cleanup_policy == "compact"
    (r,) = alter(broker, (TOPIC, "t", [("cleanup.policy", APPEND, "compact,shred")]))
    assert r[2:] == (
        ErrorCode.INVALID_CONFIG,
        "Invalid value shred for configuration cleanup.policy: String must be one of: compact, delete",
    )
    # Kafka 4.x takes an empty list (ValidList.in allows it): no cleanup at all
    assert alter(broker, (TOPIC, "t", [("cleanup.policy", SUBTRACT, "compact")]))[0][2] == 0
    assert broker.broker.logs.get("t", 0).config.cleanup_policy == ""
    assert alter(broker, (TOPIC, "t", [("cleanup.policy", APPEND, "compact")]))[0][2] == 0
    (r,) = alter(broker, (TOPIC, "t", [("retention.ms", APPEND, "5")]))
    assert r[2:] == (
        ErrorCode.INVALID_CONFIG,
        "Can't APPEND to key retention.ms because its type is not LIST.",
    )
    (r,) = alter(broker, (TOPIC, "t", [("segment.bytes", SUBTRACT, "5")]))
    assert r[2:] == (
        ErrorCode.INVALID_CONFIG,
        "Can't SUBTRACT to key segment.bytes because its type is not LIST.",
    )
    assert broker.broker.topics.get("t").configs == {"cleanup.policy": "compact"}


@pytest.mark.parametrize("version", range(2))
def test_alter_errors(broker, version):
    make_topic(broker, configs={"retention.ms": "77"})
    results = alter(
        broker,
        (TOPIC, "t", [("retention.ms", SET, "soon")]),
        (TOPIC, "nope", [("retention.ms", SET, "1")]),
        (TOPIC, "bad name", [("retention.ms", SET, "1")]),
        (BROKER, "1", [("num.partitions", SET, "3")]),
        (BROKER, "2", [("num.partitions", SET, "3")]),
        (GROUP, "g", [("consumer.session.timeout.ms", SET, "30000")]),
        (BROKER_LOGGER, "1", [("root", SET, "DEBUG")]),
        (TOPIC, "dup", []),
        (TOPIC, "dup", []),
        version=version,
    )
    by = {(t, n): (code, msg) for t, n, code, msg in results}
    assert len(results) == 8
    assert by[(TOPIC, "t")][0] == ErrorCode.INVALID_CONFIG and "retention.ms" in by[(TOPIC, "t")][1]
    assert by[(TOPIC, "nope")] == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist.")
    assert by[(TOPIC, "bad name")][0] == ErrorCode.INVALID_TOPIC_EXCEPTION
    code, msg = by[(BROKER, "1")]
    assert code == ErrorCode.INVALID_REQUEST and "dynamic broker configs" in msg and "static" in msg
    assert (
        by[(BROKER, "2")][0] == ErrorCode.INVALID_REQUEST and "Unexpected broker id" in by[(BROKER, "2")][1]
    )
    assert by[(GROUP, "g")] == (
        ErrorCode.INVALID_CONFIG,
        "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms 45000",
    )
    assert by[(BROKER_LOGGER, "1")] == (ErrorCode.INVALID_REQUEST, "Unsupported resource type: BROKER_LOGGER")
    assert by[(TOPIC, "dup")] == (ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
    assert broker.broker.topics.get("t").configs == {"retention.ms": "77"}


SHAPE_ERRORS = [
    ([("retention.ms", SET, "1"), ("retention.ms", DELETE, None)], "Error due to duplicate config keys"),
    (
        [("retention.ms", SET, None), ("cleanup.policy", APPEND, None)],
        "Null value not supported for : retention.ms, cleanup.policy",
    ),
    ([("retention.ms", 7, "1")], "Unknown config operation 7 for retention.ms"),
]


@pytest.mark.parametrize(("edits", "message"), SHAPE_ERRORS)
def test_alter_request_shape_errors(broker, edits, message):
    make_topic(broker)
    assert alter(broker, (TOPIC, "t", edits)) == [(TOPIC, "t", ErrorCode.INVALID_REQUEST, message)]
    assert broker.broker.topics.get("t").configs == {}


def test_alter_unknown_config_name(broker):
    make_topic(broker)
    (r,) = alter(broker, (TOPIC, "t", [("no.such.config", SET, "1")]))
    assert r[2] == ErrorCode.INVALID_CONFIG and "no.such.config" in r[3]


@pytest.mark.parametrize("version", range(2))
def test_alter_validate_only_changes_nothing(broker, version):
    make_topic(broker)
    ok, bad = alter(
        broker,
        (TOPIC, "t", [("max.message.bytes", SET, "10")]),
        (TOPIC, "nope", [("max.message.bytes", SET, "10")]),
        version=version,
        validate_only=True,
    )
    assert (ok[2], bad[2]) == (0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert broker.broker.topics.get("t").configs == {}
    assert broker.broker.logs.get("t", 0).config.max_message_bytes == 1048588
    assert produce(broker, "t", [b"x" * 100]).error_code == 0


def test_max_message_bytes_takes_effect_on_produce(broker):
    make_topic(broker)
    assert produce(broker, "t", [b"x" * 500]).error_code == 0
    assert alter(broker, (TOPIC, "t", [("max.message.bytes", SET, "200")]))[0][2] == 0
    resp = produce(broker, "t", [b"x" * 500])
    assert resp.error_code == ErrorCode.MESSAGE_TOO_LARGE and "max.message.bytes=200" in resp.error_message
    assert alter(broker, (TOPIC, "t", [("max.message.bytes", DELETE, None)]))[0][2] == 0
    assert produce(broker, "t", [b"x" * 500]).base_offset == 1


def test_retention_ms_takes_effect(broker):
    make_topic(broker, configs={"segment.bytes": "14"})  # every batch rolls a new segment
    old = int(time.time() * 1000) - 60_000
    for i in range(3):
        assert produce(broker, "t", [b"old%d" % i], timestamp=old).base_offset == i
    assert produce(broker, "t", [b"new"]).base_offset == 3
    plog = broker.broker.logs.get("t", 0)
    broker.call(broker.broker.logs.apply_retention)
    assert plog.log_start_offset == 0  # the 7-day default keeps everything
    assert alter(broker, (TOPIC, "t", [("retention.ms", SET, "30000")]))[0][2] == 0
    broker.call(broker.broker.logs.apply_retention)
    assert plog.log_start_offset == 3


def test_configs_persist_across_restart(broker_factory, tmp_path):
    data = tmp_path / "c"
    first = broker_factory(data_dir=data)
    make_topic(first)
    edits = [("max.message.bytes", SET, "300"), ("cleanup.policy", APPEND, "compact")]
    assert alter(first, (TOPIC, "t", edits))[0][2] == 0
    first.stop()
    second = broker_factory(data_dir=data)
    got = topic_configs(second)
    assert {
        n: (got[n].value, got[n].config_source)
        for n in ("max.message.bytes", "cleanup.policy", "retention.ms")
    } == {
        "max.message.bytes": ("300", DYNAMIC_TOPIC),
        "cleanup.policy": ("delete,compact", DYNAMIC_TOPIC),
        "retention.ms": ("604800000", DEFAULT),
    }
    assert second.broker.logs.get("t", 0).config.max_message_bytes == 300
    assert produce(second, "t", [b"y" * 400]).error_code == ErrorCode.MESSAGE_TOO_LARGE


def test_group_configs_are_set_described_bounded_and_persisted(broker_factory, tmp_path):
    data = tmp_path / "gc"
    b = broker_factory(data_dir=data)
    (before,) = describe(b, (GROUP, "orders", None))
    assert {c.name: (c.value, c.config_source) for c in before.configs} == {
        "consumer.heartbeat.interval.ms": ("5000", 5),
        "consumer.session.timeout.ms": ("45000", 5),
    }
    results = alter(
        b,
        (
            GROUP,
            "orders",
            [("consumer.session.timeout.ms", SET, "50000"), ("consumer.heartbeat.interval.ms", SET, "6000")],
        ),
    )
    assert [(r[2], r[3]) for r in results] == [(0, None)]
    results = alter(b, (GROUP, "orders", [("consumer.heartbeat.interval.ms", SET, "99999")]))
    assert (
        results[0][2] == ErrorCode.INVALID_CONFIG
        and "group.consumer.max.heartbeat.interval.ms 15000" in results[0][3]
    )
    assert b.broker.groups.state.consumer_session_timeout_ms("orders") == 50000
    b.stop()
    again = broker_factory(data_dir=data)
    (after,) = describe(again, (GROUP, "orders", None))
    assert {c.name: (c.value, c.config_source) for c in after.configs} == {
        "consumer.heartbeat.interval.ms": ("6000", 8),
        "consumer.session.timeout.ms": ("50000", 8),
    }
    alter(again, (GROUP, "orders", [("consumer.session.timeout.ms", DELETE, None)]))
    assert again.broker.groups.state.consumer_session_timeout_ms("orders") == 45000
