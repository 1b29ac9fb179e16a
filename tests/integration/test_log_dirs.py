"""DescribeLogDirs (35) and AlterReplicaLogDirs (34) through kafka-python's admin client and over the
wire at every version. The Java Admin (3.9, 4.x) is in test_java_admin.py; confluent-kafka's
AdminClient exposes neither API."""

from __future__ import annotations

import os

import pytest

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.alter_replica_log_dirs import (
    AlterReplicaLogDir,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirTopic,
)
from broker.protocol.generated.describe_log_dirs import DescribableLogDirTopic, DescribeLogDirsRequest
from tests.integration.test_delete_records import produce
from tests.support.wire import WireClient


@pytest.fixture
def kp_admin(broker):
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    yield admin
    admin.close()


def test_kafka_python_describes_and_alters_log_dirs(kp_admin, broker):
    from kafka import TopicPartitionReplica
    from kafka.errors import LogDirNotFoundError, NoError, UnknownTopicOrPartitionError

    broker.call(broker.broker.create_topic, "dr", 2)
    broker.call(broker.broker.create_topic, "other", 1)
    produce(broker.bootstrap, 4)
    path = os.path.abspath(broker.broker.logs.data_dir)
    size = broker.call(lambda: broker.broker.logs.get("dr", 0).size_bytes())
    assert size > 0

    [answer] = kp_admin.describe_log_dirs({"dr": [0, 1, 7]})
    [d] = answer["log_dirs"]
    assert answer["broker"] == 1 and (d["error_code"], d["log_dir"]) == (0, path)
    assert d["topics"] == [
        {
            "name": "dr",
            "partitions": [
                {"partition_index": 0, "partition_size": size, "offset_lag": 0, "is_future_key": False},
                {"partition_index": 1, "partition_size": 0, "offset_lag": 0, "is_future_key": False},
            ],
        }
    ]
    assert 0 < d["usable_bytes"] <= d["total_bytes"]
    [everything] = kp_admin.describe_log_dirs()
    assert [t["name"] for t in everything["log_dirs"][0]["topics"]] == ["dr", "other"]

    result = kp_admin.alter_replica_log_dirs(
        {
            TopicPartitionReplica("dr", 0, 1): path,
            TopicPartitionReplica("dr", 1, 1): path + "/elsewhere",
            TopicPartitionReplica("nope", 0, 1): path,
        }
    )
    assert result == {
        TopicPartitionReplica("dr", 0, 1): NoError,
        TopicPartitionReplica("dr", 1, 1): LogDirNotFoundError,
        TopicPartitionReplica("nope", 0, 1): UnknownTopicOrPartitionError,
    }


@pytest.mark.parametrize("version", range(6))
def test_describe_log_dirs_every_version(broker, version):
    broker.call(broker.broker.create_topic, "t", 1)
    with WireClient(broker.port) as c:
        resp = c.call(35, version, DescribeLogDirsRequest([DescribableLogDirTopic("t", [0])]))
    [r] = resp.results
    assert r.log_dir == os.path.abspath(broker.broker.logs.data_dir)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in r.topics] == [("t", [0])]
    if version >= 4:
        assert r.total_bytes > 0 and r.usable_bytes >= 0
    if version >= 3:
        assert resp.error_code == 0


@pytest.mark.parametrize("version", range(3))
def test_alter_replica_log_dirs_every_version(broker, version):
    broker.call(broker.broker.create_topic, "t", 1)
    path = os.path.abspath(broker.broker.logs.data_dir)
    long_name = "x" * 249
    req = AlterReplicaLogDirsRequest(
        [
            AlterReplicaLogDir(
                path, [AlterReplicaLogDirTopic("t", [0, 3]), AlterReplicaLogDirTopic(long_name, [0])]
            ),
            AlterReplicaLogDir("relative/dir", [AlterReplicaLogDirTopic("t", [1])]),
        ]
    )
    with WireClient(broker.port) as c:
        resp = c.call(34, version, req)
    got = {(t.topic_name, p.partition_index): p.error_code for t in resp.results for p in t.partitions}
    assert got == {
        ("t", 0): 0,
        ("t", 3): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        (long_name, 0): ErrorCode.INVALID_TOPIC_EXCEPTION,
        ("t", 1): ErrorCode.LOG_DIR_NOT_FOUND,
    }
