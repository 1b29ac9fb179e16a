"""The Java Admin client (kafka-clients 3.9) against the broker, through tests/java/AdminProbe.java.

Each test starts one JVM; results come back as one JSON line per command. ``require_java()`` is
called in the test body (not a fixture) so that a missing JDK or jar makes the test fail, never
skip or error.
"""

from __future__ import annotations

import os

import pytest

from broker.cluster import kafka_uuid_str
from tests.integration.test_delete_records import produce
from tests.support.java import Java, JavaResult, json_lines, require_java

pytestmark = [pytest.mark.java, pytest.mark.usefixtures("java_clients")]


def probe(java: Java, broker, *commands: str) -> tuple[JavaResult, list[dict]]:
    result = java.run("AdminProbe", [broker.bootstrap, *commands], timeout=60)
    lines = json_lines(result.stdout)
    assert [line["cmd"] for line in lines] == [c.split()[0] for c in commands], result
    return result, lines


def ok(result: JavaResult, lines: list[dict]) -> list[dict]:
    failed = [line for line in lines if "error" in line]
    assert result.returncode == 0 and not failed, f"{failed}\nstderr:\n{result.stderr}"
    return lines


def create(broker, name: str, partitions: int) -> str:
    """Create a topic on the broker's loop; its id in Kafka's textual form."""
    topic = broker.call(broker.broker.create_topic, name, partitions)
    return kafka_uuid_str(topic.topic_id)


def test_describe_cluster(broker):
    java = require_java()
    [cluster] = ok(*probe(java, broker, "cluster"))
    node = {"id": 1, "host": "127.0.0.1", "port": broker.port, "rack": None}
    assert cluster == {
        "cmd": "cluster",
        "clusterId": broker.broker.cluster_id,
        "controller": node,
        "nodes": [node],
    }


def test_list_topics_sees_created_topics(broker):
    java = require_java()
    with java.session("AdminProbe", [broker.bootstrap]) as s:
        before = s.request("topics")
        t1 = create(broker, "t1", 3)
        t2 = create(broker, "t2", 1)
        after = s.request("topics")
    assert s.result is not None and s.result.returncode == 0, s.result
    assert before == {"cmd": "topics", "names": [], "listings": []}
    assert after == {
        "cmd": "topics",
        "names": ["t1", "t2"],
        "listings": [
            {"name": "t1", "topicId": t1, "internal": False},
            {"name": "t2", "topicId": t2, "internal": False},
        ],
    }


def test_describe_topics(broker):
    java = require_java()
    t1 = create(broker, "t1", 3)
    t2 = create(broker, "t2", 1)
    [described] = ok(*probe(java, broker, "describe-topics t1,t2"))

    def partitions(n: int) -> list[dict]:
        return [{"partition": p, "leader": 1, "replicas": [1], "isr": [1]} for p in range(n)]

    assert described == {
        "cmd": "describe-topics",
        "topics": [
            {"name": "t1", "topicId": t1, "internal": False, "partitions": partitions(3)},
            {"name": "t2", "topicId": t2, "internal": False, "partitions": partitions(1)},
        ],
    }


def test_describe_unknown_topic_fails(broker):
    java = require_java()
    create(broker, "t1", 1)
    result, lines = probe(java, broker, "describe-topics nope", "describe-topics t1,nope2", "topics")
    assert result.returncode == 1, result
    unknown = "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"
    assert [(line.get("error"), line.get("message")) for line in lines[:2]] == [
        (unknown, "This server does not host this topic-partition."),
    ] * 2
    # Admin sends Metadata with allowAutoTopicCreation=false: describing must not create the topic.
    assert lines[2]["names"] == ["t1"], result
    assert broker.call(lambda: sorted(t.name for t in broker.broker.topics.all())) == ["t1"]


def test_find_coordinator_every_version(broker):
    """FindCoordinator through the client's own request/response classes (Admin has no such call)."""
    java = require_java()
    [found] = ok(*probe(java, broker, "coordinator g1"))
    assert found == {
        "cmd": "coordinator",
        "versions": [
            {
                "version": v,
                "key": "g1" if v >= 4 else None,
                "error": "NONE",
                "nodeId": 1,
                "host": "127.0.0.1",
                "port": broker.port,
            }
            for v in range(7)
        ],
    }


def test_delete_records(broker):
    """Admin.deleteRecords: low watermarks, then listOffsets(earliest) agrees; above the high
    watermark is OffsetOutOfRangeException."""
    java = require_java()
    create(broker, "dr", 1)
    produce(broker.bootstrap, 6)
    result, lines = probe(
        java,
        broker,
        "delete-records dr:0 4",
        "list-offsets dr:0 earliest",
        "delete-records dr:0 2",
        "delete-records dr:0 7",
        "delete-records dr:0 -1",
        "list-offsets dr:0 earliest",
    )
    assert lines[0]["lowWatermark"] == 4
    assert lines[1]["offset"] == 4
    assert lines[2]["lowWatermark"] == 4  # a lower offset leaves the start where it is
    assert lines[3]["error"] == "org.apache.kafka.common.errors.OffsetOutOfRangeException", result
    assert lines[4]["lowWatermark"] == 6
    assert lines[5]["offset"] == 6


def test_describe_topics_in_pages(broker):
    """describeTopics with two partitions per response: the 4.x and 3.9 Admin page through
    DescribeTopicPartitions (KIP-966) with the cursor, and the answer is whole."""
    java = require_java()
    create(broker, "pa", 3)
    create(broker, "pb", 1)
    create(broker, "pc", 2)
    seen: list[tuple] = []
    api = broker.broker.registry.apis[75]
    real = api.handler

    def spy(ctx, req):
        seen.append(
            (
                tuple(t.name for t in req.topics),
                req.response_partition_limit,
                None if req.cursor is None else (req.cursor.topic_name, req.cursor.partition_index),
            )
        )
        return real(ctx, req)

    api.handler = spy
    try:
        [described] = ok(*probe(java, broker, "describe-topics-paged pa,pb,pc 2"))
    finally:
        api.handler = real

    def partitions(n: int) -> list[dict]:
        return [{"partition": p, "leader": 1, "replicas": [1], "isr": [1], "elr": []} for p in range(n)]

    ops = ["ALTER", "ALTER_CONFIGS", "CREATE", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "READ", "WRITE"]
    assert described["topics"] == [
        {"name": n, "internal": False, "operations": ops, "partitions": partitions(k)}
        for n, k in (("pa", 3), ("pb", 1), ("pc", 2))
    ]
    # pages of at most two partitions: pa 0-1 (next: pa 2), pa 2 and pb 0 (next: pc 0), then pc,
    # which the client asks for alone (a cursor at partition 0 names only the topics left)
    assert seen == [
        (("pa", "pb", "pc"), 2, None),
        (("pa", "pb", "pc"), 2, ("pa", 2)),
        (("pc",), 2, None),
    ]


def test_describe_and_alter_log_dirs(broker):
    """describeLogDirs: the one log directory with its volume's sizes and every replica's size;
    alterReplicaLogDirs into it succeeds (nothing moves), elsewhere LogDirNotFoundException."""
    java = require_java()
    create(broker, "dr", 2)
    produce(broker.bootstrap, 5)
    path = os.path.abspath(broker.broker.logs.data_dir)
    result, lines = probe(
        java, broker, "log-dirs", "alter-log-dir dr:0 " + path, "alter-log-dir dr:1 /nowhere"
    )
    [d] = lines[0]["dirs"]
    assert d["path"] == path and d["error"] is None
    st = os.statvfs(path)
    assert d["totalBytes"] == st.f_blocks * st.f_frsize and 0 < d["usableBytes"] <= d["totalBytes"]
    sizes = broker.call(lambda: {p: broker.broker.logs.get("dr", p).size_bytes() for p in (0, 1)})
    assert sizes[0] > 0 and sizes[1] == 0
    assert d["replicas"] == {f"dr-{p}": {"size": sizes[p], "offsetLag": 0, "future": False} for p in (0, 1)}
    assert "error" not in lines[1], result
    assert lines[2]["error"] == "org.apache.kafka.common.errors.LogDirNotFoundException", result


def test_quorum_elections_and_reassignments(broker):
    """describeMetadataQuorum: this node the leader and only voter; electLeaders: not needed for a
    partition led by its preferred (only) replica, unknown partitions; alterPartitionReassignments to
    the current replica succeeds, to a missing broker or as a cancellation fails as in Kafka;
    listPartitionReassignments lists nothing; describeCluster names this node the controller."""
    java = require_java()
    create(broker, "re", 2)
    result, lines = probe(
        java,
        broker,
        "quorum",
        "elect PREFERRED re:0,re:1,re:9",
        "elect UNCLEAN re:0",
        "reassign re:0 1",
        "reassign re:1 1,2",
        "reassign re:1 cancel",
        "list-reassignments",
        "cluster",
    )
    quorum = lines[0]
    assert (quorum["leaderId"], quorum["leaderEpoch"], quorum["observers"]) == (1, 1, 0), result
    [voter] = quorum["voters"]
    assert voter["replicaId"] == 1 and voter["lastFetchTimestamp"] > 0
    not_needed = "org.apache.kafka.common.errors.ElectionNotNeededException"
    unknown = "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"
    assert lines[1]["results"] == {"re-0": not_needed, "re-1": not_needed, "re-9": unknown}
    assert lines[2]["results"] == {"re-0": not_needed}
    assert "error" not in lines[3], result
    assert lines[4]["error"] == "org.apache.kafka.common.errors.InvalidReplicaAssignmentException"
    assert lines[5]["error"] == "org.apache.kafka.common.errors.NoReassignmentInProgressException"
    assert lines[6]["reassignments"] == 0
    assert lines[7]["controller"]["id"] == 1


def test_list_client_metrics_resources(broker):
    """listClientMetricsResources (ListClientMetricsResources v0 from 3.9, ListConfigResources from
    4.x): a broker without client metrics subscriptions lists none."""
    java = require_java()
    [listed] = ok(*probe(java, broker, "client-metrics-resources"))
    assert listed["names"] == 0


def test_features(broker):
    """describeFeatures (ApiVersions v3+): what the broker serves in Kafka 4's feature terms;
    updateFeatures to the current level succeeds, anything else is InvalidUpdateVersionException."""
    java = require_java()
    result, lines = probe(
        java,
        broker,
        "features",
        "update-feature group.version 1 UPGRADE",
        "update-feature group.version 0 SAFE_DOWNGRADE",
        "update-feature no.such.feature 1 UPGRADE",
    )
    assert lines[0]["supported"] == {
        "group.version": [0, 1],
        "kraft.version": [0, 0],
        "metadata.version": [7, 30],
        "transaction.version": [0, 2],
    }, result
    assert lines[0]["finalized"] == {"group.version": 1, "metadata.version": 30, "transaction.version": 2}
    assert lines[0]["epoch"] == 1
    assert "error" not in lines[1], result
    invalid = "org.apache.kafka.common.errors.InvalidUpdateVersionException"
    assert lines[2]["error"] == invalid and lines[3]["error"] == invalid, result


def test_client_quotas(broker):
    """alterClientQuotas (set, validate-only, remove, Kafka's errors) and describeClientQuotas with
    exact, default and any-entity filters, strict or not."""
    java = require_java()
    result, lines = probe(
        java,
        broker,
        "alter-quotas client-id=app producer_byte_rate=1048576 consumer_byte_rate=2097152",
        "alter-quotas user=alice,client-id=<default> request_percentage=25.5",
        "alter-quotas-dry client-id=dry producer_byte_rate=1000",
        "alter-quotas ip=127.0.0.1 connection_creation_rate=10",
        "describe-quotas",
        "describe-quotas client-id=app",
        "describe-quotas-strict client-id=app",
        "describe-quotas user=*",
        "describe-quotas client-id=<default>",
        "alter-quotas client-id=app producer_byte_rate=",
        "describe-quotas-strict client-id=*",
        "alter-quotas client-id=app nonsense=1",
        "alter-quotas client-id=app producer_byte_rate=0.5",
        "describe-quotas ip=* user=*",
    )
    for line in lines[:4]:
        assert "error" not in line, result
    app = {"consumer_byte_rate": 2097152.0, "producer_byte_rate": 1048576.0}
    alice = {"request_percentage": 25.5}
    ip = {"connection_creation_rate": 10.0}
    assert lines[4]["entities"] == {
        "client-id=app": app,
        "client-id=<default>,user=alice": alice,
        "ip=127.0.0.1": ip,
    }
    assert lines[5]["entities"] == {"client-id=app": app}
    assert lines[6]["entities"] == {"client-id=app": app}
    assert lines[7]["entities"] == {"client-id=<default>,user=alice": alice}
    assert lines[8]["entities"] == {"client-id=<default>,user=alice": alice}
    assert "error" not in lines[9], result
    assert lines[10]["entities"] == {"client-id=app": {"consumer_byte_rate": 2097152.0}}
    assert lines[11]["error"] == "org.apache.kafka.common.errors.InvalidRequestException"
    assert lines[11]["message"] == "Invalid configuration key nonsense"
    assert lines[12]["error"] == "org.apache.kafka.common.errors.InvalidRequestException"
    assert lines[12]["message"] == "producer_byte_rate cannot be a fractional value."
    assert lines[13]["error"] == "org.apache.kafka.common.errors.InvalidRequestException"
    # durable: the broker's file holds what Describe answers
    assert (broker.broker.logs.data_dir / "client-quotas.json").exists()
