"""Topic administration through real admin clients: kafka-python's KafkaAdminClient, confluent-kafka's
AdminClient (librdkafka) and the Java Admin (tests/java/AdminProbe.java). Every test checks the
broker's own state afterwards, not only what the client reports."""

from __future__ import annotations

import uuid

import pytest

from broker.cluster import kafka_uuid_str
from broker.log.config import TOPIC_SETTINGS
from tests.support.java import require_java

TIMEOUT_MS = 10000


def state(b) -> dict[str, tuple[int, dict[str, str]]]:
    return b.call(lambda: {t.name: (t.partitions, dict(t.configs)) for t in b.broker.topics.all()})


def open_partitions(b, name: str) -> list[int]:
    return b.call(lambda: sorted(p for (t, p) in b.broker.logs.logs if t == name))


# ---------------------------------------------------------------- kafka-python


@pytest.fixture
def kp(broker):
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_MS)
    yield admin
    admin.close()


def test_kafka_python_creates_and_deletes_topics(kp, broker):
    from kafka.admin import NewTopic
    from kafka.errors import (
        InvalidReplicationFactorError,
        TopicAlreadyExistsError,
        UnknownTopicOrPartitionError,
    )

    result = kp.create_topics(
        [NewTopic("kp-a", 3, 1, topic_configs={"retention.ms": "1000"}), NewTopic("kp-b", -1, -1)]
    )
    by_name = {t["name"]: t for t in result["topics"]}
    assert {n: t["error_code"] for n, t in by_name.items()} == {"kp-a": 0, "kp-b": 0}
    assert by_name["kp-a"]["configs"]["retention.ms"]["value"] == "1000"
    assert by_name["kp-a"]["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert state(broker) == {"kp-a": (3, {"retention.ms": "1000"}), "kp-b": (1, {})}
    assert open_partitions(broker, "kp-a") == [0, 1, 2]

    dry = kp.create_topics({"kp-dry": {"num_partitions": 2, "replication_factor": 1}}, validate_only=True)
    assert dry["topics"][0]["error_code"] == 0 and "kp-dry" not in state(broker)
    with pytest.raises(TopicAlreadyExistsError):
        kp.create_topics([NewTopic("kp-a", 1, 1)])
    with pytest.raises(InvalidReplicationFactorError):
        kp.create_topics([NewTopic("kp-c", 1, 3)])
    assert sorted(state(broker)) == ["kp-a", "kp-b"]

    old_id = broker.broker.topics.get("kp-a").topic_id
    deleted = kp.delete_topics(["kp-a"])
    assert [(t["name"], t["error_code"]) for t in deleted["topics"]] == [("kp-a", 0)]
    assert list(state(broker)) == ["kp-b"] and open_partitions(broker, "kp-a") == []
    with pytest.raises(UnknownTopicOrPartitionError):
        kp.delete_topics(["kp-a"])
    kp.create_topics([NewTopic("kp-a", 1, 1)])
    assert broker.broker.topics.get("kp-a").topic_id != old_id


def test_kafka_python_creates_partitions(kp, broker):
    from kafka.errors import InvalidPartitionsError

    kp.create_topics({"kp-grow": {"num_partitions": 1, "replication_factor": 1}})
    response = kp.create_partitions({"kp-grow": 4})
    assert [(r.name, r.error_code) for r in response.results] == [("kp-grow", 0)]
    assert state(broker)["kp-grow"][0] == 4 and open_partitions(broker, "kp-grow") == [0, 1, 2, 3]
    with pytest.raises(InvalidPartitionsError):
        kp.create_partitions({"kp-grow": 2})
    kp.create_partitions({"kp-grow": 6}, validate_only=True)
    assert state(broker)["kp-grow"][0] == 4
    assert sorted(p["partition_index"] for p in kp.describe_topics(["kp-grow"])[0]["partitions"]) == [
        0,
        1,
        2,
        3,
    ]


def test_kafka_python_describes_and_alters_configs(kp, broker):
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

    kp.create_topics(
        {"kp-cfg": {"num_partitions": 1, "replication_factor": 1, "configs": {"retention.ms": "1000"}}}
    )
    topic = ConfigResource(ConfigResourceType.TOPIC, "kp-cfg")
    modified = kp.describe_configs([topic])["topic"]["kp-cfg"]
    assert list(modified) == ["retention.ms"] and modified["retention.ms"]["value"] == "1000"
    everything = kp.describe_configs([topic], include_synonyms=True, config_filter="all")["topic"]["kp-cfg"]
    assert sorted(everything) == sorted(TOPIC_SETTINGS)
    assert everything["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    assert everything["retention.ms"]["synonyms"][0]["source"] == "DYNAMIC_TOPIC_CONFIG"

    edits = {"retention.ms": "2000", "cleanup.policy": (AlterConfigOp.APPEND, "compact")}
    result = kp.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "kp-cfg", configs=edits)], incremental=True
    )
    assert result == {"topic": {"kp-cfg": "OK"}}
    assert state(broker)["kp-cfg"][1] == {"retention.ms": "2000", "cleanup.policy": "delete,compact"}
    assert broker.broker.logs.get("kp-cfg", 0).config.retention_ms == 2000

    kp.reset_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-cfg", configs=["retention.ms"])])
    assert state(broker)["kp-cfg"][1] == {"cleanup.policy": "delete,compact"}
    assert broker.broker.logs.get("kp-cfg", 0).config.retention_ms == 604800000

    bad = ConfigResource(ConfigResourceType.TOPIC, "kp-cfg", configs={"retention.ms": "never"})
    outcome = kp.alter_configs([bad], incremental=True)["topic"]["kp-cfg"]
    assert "InvalidConfigurationError" in outcome and "retention.ms" in outcome
    assert state(broker)["kp-cfg"][1] == {"cleanup.policy": "delete,compact"}

    broker_cfg = kp.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")], config_filter="all")
    entries = broker_cfg["broker"]["1"]
    assert entries["num.partitions"]["value"] == "1" and entries["num.partitions"]["read_only"] is True


# ---------------------------------------------------------------- confluent-kafka (librdkafka)


@pytest.fixture
def ck(broker):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": TIMEOUT_MS})


def test_confluent_creates_and_deletes_topics(ck, broker):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    futures = ck.create_topics(
        [NewTopic("ck-a", 2, 1, config={"max.message.bytes": "5000"}), NewTopic("ck-dry", 3, 1)],
        validate_only=False,
        request_timeout=10,
    )
    # (the returned dict is the client's own future map: read it, never pop from it)
    assert [f.result(timeout=10) for f in futures.values()] == [None, None]
    assert state(broker) == {"ck-a": (2, {"max.message.bytes": "5000"}), "ck-dry": (3, {})}

    dry = ck.create_topics([NewTopic("ck-b", 2, 1)], validate_only=True, request_timeout=10)
    assert dry["ck-b"].result(timeout=10) is None and "ck-b" not in state(broker)

    with pytest.raises(KafkaException) as e:
        ck.create_topics([NewTopic("ck-a", 1, 1)], request_timeout=10)["ck-a"].result(timeout=10)
    assert e.value.args[0].name() == "TOPIC_ALREADY_EXISTS"
    with pytest.raises(KafkaException) as e:
        ck.create_topics([NewTopic("ck-c", 1, 1, config={"retention.ms": "x"})], request_timeout=10)[
            "ck-c"
        ].result(timeout=10)
    assert e.value.args[0].name() == "INVALID_CONFIG"

    ck.delete_topics(["ck-a", "ck-dry"], request_timeout=10)["ck-a"].result(timeout=10)
    assert state(broker) == {}
    with pytest.raises(KafkaException) as e:
        ck.delete_topics(["ck-a"], request_timeout=10)["ck-a"].result(timeout=10)
    assert e.value.args[0].name() == "UNKNOWN_TOPIC_OR_PART"


def test_confluent_creates_partitions(ck, broker):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewPartitions, NewTopic

    ck.create_topics([NewTopic("ck-grow", 1, 1)], request_timeout=10)["ck-grow"].result(timeout=10)
    ck.create_partitions([NewPartitions("ck-grow", 3)], request_timeout=10)["ck-grow"].result(timeout=10)
    assert state(broker)["ck-grow"][0] == 3 and open_partitions(broker, "ck-grow") == [0, 1, 2]
    ck.create_partitions([NewPartitions("ck-grow", 5)], validate_only=True, request_timeout=10)[
        "ck-grow"
    ].result(timeout=10)
    assert state(broker)["ck-grow"][0] == 3
    with pytest.raises(KafkaException) as e:
        ck.create_partitions([NewPartitions("ck-grow", 2)], request_timeout=10)["ck-grow"].result(timeout=10)
    assert e.value.args[0].name() == "INVALID_PARTITIONS"
    md = ck.list_topics("ck-grow", timeout=10)
    assert sorted(md.topics["ck-grow"].partitions) == [0, 1, 2]


def test_confluent_describes_and_alters_configs(ck, broker):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic

    ck.create_topics([NewTopic("ck-cfg", 1, 1, config={"retention.ms": "1000"})], request_timeout=10)[
        "ck-cfg"
    ].result(timeout=10)
    res = ConfigResource("topic", "ck-cfg")
    (fut,) = ck.describe_configs([res], request_timeout=10).values()
    entries = fut.result(timeout=10)
    assert sorted(entries) == sorted(TOPIC_SETTINGS)
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == (
        "1000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
    )
    assert entries["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert entries["retention.ms"].is_read_only is False

    edits = [
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("max.message.bytes", "4096", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    ]
    (fut,) = ck.incremental_alter_configs(
        [ConfigResource("topic", "ck-cfg", incremental_configs=edits)]
    ).values()
    fut.result(timeout=10)
    assert state(broker)["ck-cfg"][1] == {"max.message.bytes": "4096", "cleanup.policy": "delete,compact"}
    assert broker.broker.logs.get("ck-cfg", 0).config.max_message_bytes == 4096

    bad = [ConfigEntry("segment.bytes", "1", incremental_operation=AlterConfigOpType.SET)]
    (fut,) = ck.incremental_alter_configs(
        [ConfigResource("topic", "ck-cfg", incremental_configs=bad)]
    ).values()
    with pytest.raises(KafkaException) as e:
        fut.result(timeout=10)
    assert e.value.args[0].name() == "INVALID_CONFIG"
    dry = [ConfigEntry("segment.bytes", "100000", incremental_operation=AlterConfigOpType.SET)]
    (fut,) = ck.incremental_alter_configs(
        [ConfigResource("topic", "ck-cfg", incremental_configs=dry)], validate_only=True
    ).values()
    fut.result(timeout=10)
    assert state(broker)["ck-cfg"][1] == {"max.message.bytes": "4096", "cleanup.policy": "delete,compact"}

    (fut,) = ck.describe_configs([ConfigResource("broker", "1")], request_timeout=10).values()
    broker_entries = fut.result(timeout=10)
    assert broker_entries["num.partitions"].is_read_only and broker_entries["num.partitions"].value == "1"


# ---------------------------------------------------------------- Java Admin


def _ok(line: dict) -> dict:
    assert "error" not in line, line
    return line


@pytest.mark.java
def test_java_admin_topic_lifecycle(broker):
    java = require_java()
    with java.session("AdminProbe", [broker.bootstrap]) as s:
        created = _ok(s.request("create j-a 3 retention.ms=1000 cleanup.policy=compact,delete"))
        after_create = state(broker)
        dry = _ok(s.request("create-dry j-dry 2"))
        after_dry = state(broker)
        exists = s.request("create j-a 1")
        bad_count = s.request("create j-bad 0")
        grown = _ok(s.request("partitions j-a 5"))
        after_grow = state(broker), open_partitions(broker, "j-a")
        shrink = s.request("partitions j-a 2")
        deleted = _ok(s.request("delete j-a"))
        after_delete = state(broker)
        again = _ok(s.request("create j-a 1"))
        by_id = _ok(s.request(f"delete-id {again['topicId']}"))
        unknown = s.request("delete j-a")
    assert s.result is not None and s.result.returncode == 1, s.result  # some commands fail on purpose

    topic_id = created["topicId"]
    assert (created["partitions"], created["replicationFactor"]) == (3, 1)
    assert created["configs"]["retention.ms"] == ["1000", "DYNAMIC_TOPIC_CONFIG"]
    assert created["configs"]["cleanup.policy"] == ["compact,delete", "DYNAMIC_TOPIC_CONFIG"]
    assert created["configs"]["segment.bytes"] == ["1073741824", "DEFAULT_CONFIG"]
    assert after_create == {"j-a": (3, {"retention.ms": "1000", "cleanup.policy": "compact,delete"})}
    assert (dry["partitions"], dry["topicId"]) == (2, kafka_uuid_str(uuid.UUID(int=0)))
    assert after_dry == after_create
    assert exists["error"] == "org.apache.kafka.common.errors.TopicExistsException"
    assert exists["message"] == "topic 'j-a' already exists"
    assert bad_count["error"] == "org.apache.kafka.common.errors.InvalidPartitionsException"
    assert grown["cmd"] == "partitions"
    assert after_grow == (
        {"j-a": (5, {"retention.ms": "1000", "cleanup.policy": "compact,delete"})},
        [0, 1, 2, 3, 4],
    )
    assert shrink["error"] == "org.apache.kafka.common.errors.InvalidPartitionsException"
    assert "would not be an increase" in shrink["message"]
    assert deleted["cmd"] == "delete" and after_delete == {}
    assert again["topicId"] != topic_id
    assert by_id["cmd"] == "delete-id" and state(broker) == {}
    assert unknown["error"] == "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"


@pytest.mark.java
def test_java_admin_configs(broker_factory):
    b = broker_factory({"log.retention.hours": "48"})
    java = require_java()
    with java.session("AdminProbe", [b.bootstrap]) as s:
        _ok(s.request("create j-cfg 1 max.message.bytes=3000"))
        before = _ok(s.request("configs j-cfg"))["entries"]
        _ok(s.request("alter j-cfg retention.ms=1000 cleanup.policy+=compact -max.message.bytes"))
        after = _ok(s.request("configs j-cfg"))["entries"]
        applied = state(b)["j-cfg"][1], b.broker.logs.get("j-cfg", 0).config
        subtract = _ok(s.request("alter j-cfg cleanup.policy-=delete"))
        bad = s.request("alter j-cfg segment.ms=-5")
        not_list = s.request("alter j-cfg retention.ms+=5")
        dry = _ok(s.request("alter-dry j-cfg retention.ms=5"))
        final = state(b)["j-cfg"][1]
        brokers = _ok(s.request("broker-configs 1"))["entries"]
        unknown = s.request("configs nope")
    assert s.result is not None and s.result.returncode == 1, s.result  # some commands fail on purpose

    assert sorted(before) == sorted(TOPIC_SETTINGS)
    assert before["max.message.bytes"]["value"] == "3000"
    assert before["max.message.bytes"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert before["max.message.bytes"]["synonyms"] == [
        ["max.message.bytes", "3000", "DYNAMIC_TOPIC_CONFIG"],
        ["message.max.bytes", "1048588", "DEFAULT_CONFIG"],
    ]
    ret = before["retention.ms"]
    # 48 h from log.retention.hours; the source is DEFAULT_CONFIG as Kafka reports it: its synonyms
    # start at log.retention.ms, which is not set (tests/server/test_admin_config_apis.py)
    assert (ret["value"], ret["source"], ret["type"], ret["readOnly"]) == (
        "172800000",
        "DEFAULT_CONFIG",
        "LONG",
        False,
    )
    assert ret["documentation"] == TOPIC_SETTINGS["retention.ms"].doc
    assert before["cleanup.policy"]["type"] == "LIST" and before["segment.bytes"]["type"] == "INT"

    assert (after["retention.ms"]["value"], after["retention.ms"]["source"]) == (
        "1000",
        "DYNAMIC_TOPIC_CONFIG",
    )
    assert (after["max.message.bytes"]["value"], after["max.message.bytes"]["source"]) == (
        "1048588",
        "DEFAULT_CONFIG",
    )
    assert after["cleanup.policy"]["value"] == "delete,compact"
    configs, log_config = applied
    assert configs == {"retention.ms": "1000", "cleanup.policy": "delete,compact"}
    assert (log_config.retention_ms, log_config.max_message_bytes, log_config.cleanup_policy) == (
        1000,
        1048588,
        "delete,compact",
    )
    assert subtract["cmd"] == "alter"
    assert bad["error"] == "org.apache.kafka.common.errors.InvalidConfigurationException"
    assert "segment.ms" in bad["message"]
    assert not_list["error"] == "org.apache.kafka.common.errors.InvalidConfigurationException"
    assert not_list["message"] == "Can't APPEND to key retention.ms because its type is not LIST."
    assert dry["cmd"] == "alter-dry"
    assert final == {"retention.ms": "1000", "cleanup.policy": "compact"}

    assert brokers["log.retention.hours"]["value"] == "48"
    assert brokers["log.retention.hours"]["source"] == "STATIC_BROKER_CONFIG"
    assert brokers["num.partitions"]["source"] == "DEFAULT_CONFIG"
    assert all(e["readOnly"] for e in brokers.values())
    assert unknown["error"] == "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"
    assert unknown["message"] == "The topic 'nope' does not exist."


def test_broker_configs_list_kafkas_properties_confluent_and_kafka_python(broker):
    """DescribeConfigs on the broker lists Kafka's properties this broker does not use too (read-only,
    Kafka's default), seen through confluent-kafka's and kafka-python's admin clients."""
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.admin import ConfigResource as CkResource
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    ck = AdminClient({"bootstrap.servers": broker.bootstrap})
    [future] = ck.describe_configs([CkResource(CkResource.Type.BROKER, "1")]).values()
    entries = future.result(10)
    io = entries["num.io.threads"]
    assert (io.value, io.is_read_only, io.is_default) == ("8", True, True)
    assert entries["ssl.key.password"].value is None and entries["ssl.key.password"].is_sensitive
    assert entries["num.partitions"].value == "1"

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        got = kp.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")], config_filter="all")
    finally:
        kp.close()
    assert got["broker"]["1"]["num.network.threads"]["value"] == "3"
    assert got["broker"]["1"]["num.network.threads"]["read_only"] is True
