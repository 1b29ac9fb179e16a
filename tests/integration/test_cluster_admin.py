"""One-node cluster administration through the Python clients: kafka-python's describe_metadata_quorum,
elect_leaders, alter/list_partition_reassignments, and confluent-kafka's elect_leaders (its
AdminClient has no quorum or reassignment calls). The Java Admin (3.9, 4.x) covers all of them in
test_java_admin.py."""

from __future__ import annotations

import pytest


@pytest.fixture
def kp_admin(broker):
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    yield admin
    admin.close()


def test_kafka_python_quorum_elections_and_reassignments(kp_admin, broker):
    from kafka import TopicPartition
    from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError

    broker.call(broker.broker.create_topic, "re", 2)
    quorum = kp_admin.describe_metadata_quorum()
    [part] = quorum["topics"][0]["partitions"]
    assert quorum["topics"][0]["topic_name"] == "__cluster_metadata"
    assert (part["leader_id"], part["leader_epoch"]) == (1, 1)
    assert [v["replica_id"] for v in part["current_voters"]] == [1] and part["observers"] == []

    # ELECTION_NOT_NEEDED is what a one-node cluster answers; kafka-python does not raise it
    response = kp_admin.elect_leaders(0, {"re": [0, 1]})
    codes = {
        (r.topic, p.partition_id): p.error_code
        for r in response.replica_election_results
        for p in r.partition_result
    }
    assert codes == {("re", 0): 84, ("re", 1): 84}

    result = kp_admin.alter_partition_reassignments(
        {TopicPartition("re", 0): [1], TopicPartition("re", 1): [1, 2]}
    )
    assert result == {
        TopicPartition("re", 0): None,
        TopicPartition("re", 1): InvalidReplicationAssignmentError,
    }
    result = kp_admin.alter_partition_reassignments({TopicPartition("re", 1): None})
    assert result == {TopicPartition("re", 1): NoReassignmentInProgressError}
    assert kp_admin.list_partition_reassignments() == {}
    assert kp_admin.list_partition_reassignments({"re": [0, 1]}) == {}


def test_confluent_elect_leaders(broker):
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient

    broker.call(broker.broker.create_topic, "re", 2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    fut = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("re", 0), TopicPartition("re", 5)])
    results = fut.result(10)
    by_partition = {
        (tp.topic, tp.partition): (err.name() if err is not None else None) for tp, err in results.items()
    }
    assert by_partition == {("re", 0): "ELECTION_NOT_NEEDED", ("re", 5): "UNKNOWN_TOPIC_OR_PART"}
    unclean = admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("re", 1)]).result(10)
    assert {tp.partition: err.name() for tp, err in unclean.items()} == {1: "ELECTION_NOT_NEEDED"}


def test_kafka_python_lists_config_resources(kp_admin, broker):
    broker.call(broker.broker.create_topic, "b-topic", 1)
    broker.call(broker.broker.create_topic, "a-topic", 1)
    assert kp_admin.list_config_resources(["TOPIC"]) == {"topic": ["a-topic", "b-topic"]}
    assert kp_admin.list_config_resources(["CLIENT_METRICS"]) == {}  # no metrics subscriptions
    assert kp_admin.list_config_resources() == {
        "broker_logger": ["1"],
        "broker": ["1"],
        "topic": ["a-topic", "b-topic"],
    }


def test_kafka_python_features(kp_admin):
    features = kp_admin.describe_features()
    assert features["group.version"] == {"supported": (0, 1), "finalized": (1, 1), "finalized_epoch": 1}
    assert features["metadata.version"]["finalized"] == (30, 30)
    # KIP-890 part 2 served: finalized at 2 (the broker setting transaction.version)
    assert features["transaction.version"] == {"supported": (0, 2), "finalized": (2, 2), "finalized_epoch": 1}
    assert kp_admin.update_features({"group.version": 1}) == {"group.version": "OK"}


def _topic_overrides(broker, name: str) -> dict[str, str]:
    return broker.call(lambda: dict(broker.broker.topics.get(name).configs))


def test_legacy_alter_configs_replaces_the_overrides(kp_admin, broker):
    """AlterConfigs (33) through kafka-python (incremental=False) and confluent-kafka's legacy
    alter_configs: the request replaces a topic's whole override set. The Java Admin dropped
    alterConfigs in 4.0 (the differential tests compare the API with Kafka 4.3)."""
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.admin import ConfigResource as CkResource
    from kafka.admin import ConfigResource, ConfigResourceType

    broker.call(broker.broker.create_topic, "lc", 1, {"retention.ms": "123456", "max.message.bytes": "2000"})
    result = kp_admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "lc", configs={"cleanup.policy": "compact"})],
        incremental=False,
        raise_on_unknown=False,
    )
    # kafka-python re-sends the other overrides it finds (DescribeConfigs) so that none is lost
    assert result == {"topic": {"lc": "OK"}}
    assert _topic_overrides(broker, "lc") == {
        "cleanup.policy": "compact",
        "retention.ms": "123456",
        "max.message.bytes": "2000",
    }

    ck = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = ck.alter_configs([CkResource("topic", "lc", set_config={"retention.ms": "1000"})])
    [f] = futures.values()
    f.result(10)
    assert _topic_overrides(broker, "lc") == {"retention.ms": "1000"}
    [bad] = ck.alter_configs([CkResource("topic", "lc", set_config={"retention.ms": "soon"})]).values()
    with pytest.raises(Exception) as e:
        bad.result(10)
    assert "INVALID_CONFIG" in str(e.value)
    assert _topic_overrides(broker, "lc") == {"retention.ms": "1000"}
