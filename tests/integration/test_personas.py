"""Clients against a broker acting as an older Kafka release (kafka.version 3.9 and 4.0): each client
negotiates down to that release's versions through ApiVersions and still passes the committed-offsets
scenario of the group suites (a member delivers part of a topic, commits and leaves; the next member
of the group resumes exactly there) -- kafka-python, confluent-kafka, aiokafka, and the Java client
3.9 and 4.x."""

from __future__ import annotations

import base64
import uuid

import pytest

from broker.personas import PERSONAS
from broker.personas_redpanda import REDPANDA
from broker.protocol.generated.api_versions import ApiVersionsRequest
from tests.support.groups import GROUP_CONFIG, MemberPool, resume_after_commit
from tests.support.java import json_lines, require_java
from tests.support.wire import WireClient

TOPIC = "orders"
GROUP = "g"
RELEASES = ("3.9", "4.0")


def persona_broker(broker_factory, release):
    b = broker_factory({**GROUP_CONFIG, "kafka.version": release})
    with WireClient(b.port) as c:  # it really is that release's answer
        fetch = next(k for k in c.call(18, 3, ApiVersionsRequest("t", "1")).api_keys if k.api_key == 1)
    assert fetch.max_version == min(PERSONAS[release][1][1], 18)
    return b


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("client", ["kafka-python", "confluent", "aiokafka"])
def test_python_clients_negotiate_down(broker_factory, pool: MemberPool, client, release):
    def start(b, name, limit):
        return pool.python(
            name, client=client, bootstrap=b.bootstrap, group=GROUP, topic=TOPIC, client_id=f"{client}-{name}",
            session_ms=6000, heartbeat_ms=200, limit=limit,
        )  # fmt: skip

    resume_after_commit(lambda: persona_broker(broker_factory, release), None, GROUP, TOPIC, start)


@pytest.mark.java
@pytest.mark.usefixtures("java_clients")
@pytest.mark.parametrize("release", RELEASES)
def test_the_java_client_negotiates_down(broker_factory, pool: MemberPool, release):
    java = require_java()

    def start(b, name, limit):
        extra = {} if limit is None else {"probe.limit": limit}
        props = {"client.id": f"java-{name}", "session.timeout.ms": 6000, "heartbeat.interval.ms": 200}
        return pool.java(java, name, b.bootstrap, GROUP, TOPIC, **props, **extra)

    resume_after_commit(lambda: persona_broker(broker_factory, release), None, GROUP, TOPIC, start)


def redpanda_broker(broker_factory):
    b = broker_factory({**GROUP_CONFIG, "persona": "redpanda"})
    with WireClient(b.port) as c:  # it really is Redpanda's answer
        keys = {k.api_key: k for k in c.call(18, 3, ApiVersionsRequest("t", "1")).api_keys}
    assert keys[1].max_version == REDPANDA[1][1] and 68 not in keys  # Fetch v11, no KIP-848
    return b


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_python_clients_against_the_redpanda_persona(broker_factory, pool: MemberPool, client):
    def start(b, name, limit):
        return pool.python(
            name, client=client, bootstrap=b.bootstrap, group=GROUP, topic=TOPIC, client_id=f"{client}-{name}",
            session_ms=6000, heartbeat_ms=200, limit=limit,
        )  # fmt: skip

    resume_after_commit(lambda: redpanda_broker(broker_factory), None, GROUP, TOPIC, start)


@pytest.mark.java
@pytest.mark.usefixtures("java_clients")
def test_the_java_client_against_the_redpanda_persona(broker_factory, pool: MemberPool):
    java = require_java()

    def start(b, name, limit):
        extra = {} if limit is None else {"probe.limit": limit}
        props = {"client.id": f"java-{name}", "session.timeout.ms": 6000, "heartbeat.interval.ms": 200}
        return pool.java(java, name, b.bootstrap, GROUP, TOPIC, **props, **extra)

    resume_after_commit(lambda: redpanda_broker(broker_factory), None, GROUP, TOPIC, start)


@pytest.mark.java
@pytest.mark.usefixtures("java_clients")
def test_java_admin_describe_cluster_falls_back_to_metadata_against_redpanda(broker_factory):
    # no DescribeCluster in Redpanda's ApiVersions: the Admin asks Metadata, and gets Redpanda's id
    b = redpanda_broker(broker_factory)
    rc, out, err = require_java().run("AdminProbe", [b.bootstrap, "cluster"])
    assert rc == 0, err
    (cluster,) = json_lines(out)
    assert (
        cluster["clusterId"]
        == f"redpanda.{uuid.UUID(bytes=base64.urlsafe_b64decode(b.broker.cluster.cluster_id + '=='))}"
    )
    assert cluster["controller"]["id"] == 1 and [n["id"] for n in cluster["nodes"]] == [1]
