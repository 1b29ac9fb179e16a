"""ACLs with real clients: a broker with Kafka's StandardAuthorizer, principals from SASL PLAIN over
SASL_PLAINTEXT (``User:admin`` a super user, ``User:alice`` and ``User:bob`` governed by ACLs).

The admin clients (confluent-kafka, kafka-python, the Java Admin 3.9 and 4.x) create, describe and
delete ACLs; consumers and producers see what Kafka's clients see when an ACL refuses them."""

from __future__ import annotations

import uuid

import confluent_kafka
import pytest
from confluent_kafka import KafkaError as CKError
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KPResourceType
from kafka.errors import ClusterAuthorizationFailedError, NoError, TopicAuthorizationFailedError

from tests.support.java import json_lines, require_java

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
CONFIG = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.users": ",".join(f"{u}:{p}" for u, p in USERS.items()),
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
    "connection.failed.authentication.delay.ms": 0,
    "group.initial.rebalance.delay.ms": 0,
}


@pytest.fixture
def acl_broker(broker_factory):
    b = broker_factory(CONFIG)
    b.sasl = (
        f"127.0.0.1:{next(x.port for x in b.broker.listener.bound if x.endpoint.name == 'SASL_PLAINTEXT')}"
    )
    for topic in ("a", "b", "app-orders", "other"):
        b.call(b.broker.create_topic, topic, 1)
    return b


def ck_conf(b, user: str, **extra) -> dict:
    return {
        "bootstrap.servers": b.sasl,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
        **extra,
    }


def kp_conf(b, user: str) -> dict:
    return {
        "bootstrap_servers": b.sasl,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": user,
        "sasl_plain_password": USERS[user],
    }


def ck_acl(rtype, name, principal, op, perm=AclPermissionType.ALLOW, pattern=ResourcePatternType.LITERAL):
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


def create_acls(b, *bindings: AclBinding, user: str = "admin") -> None:
    admin = AdminClient(ck_conf(b, user))
    for f in admin.create_acls(list(bindings)).values():
        f.result(timeout=30)


def produce(b, user: str, topic: str, values: list[str]) -> list:
    """Delivery errors (None for each delivered record)."""
    p = confluent_kafka.Producer(ck_conf(b, user, **{"message.timeout.ms": 20000}))
    errors: list = []
    for v in values:
        p.produce(topic, v.encode(), on_delivery=lambda err, _msg: errors.append(err))
    p.flush(30)
    return errors


def consume_ck(b, user: str, topic: str, group: str, count: int):
    """(values read, the first error the consumer reported) reading ``count`` records at most."""
    c = confluent_kafka.Consumer(
        ck_conf(b, user, **{"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    )
    c.subscribe([topic])
    values, error = [], None
    try:
        for _ in range(200):
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                error = msg.error()
                break
            values.append(msg.value().decode())
            if len(values) == count:
                c.commit(asynchronous=False)
                break
    finally:
        c.close()
    return values, error


def test_reader_consumes_its_topic_and_is_refused_another(acl_broker):
    b = acl_broker
    assert produce(b, "admin", "a", ["1", "2", "3"]) == [None] * 3
    assert produce(b, "admin", "b", ["x"]) == [None]
    create_acls(
        b,
        ck_acl(ResourceType.TOPIC, "a", "User:alice", AclOperation.READ),
        ck_acl(ResourceType.GROUP, "g", "User:alice", AclOperation.READ),
    )
    values, error = consume_ck(b, "alice", "a", "g", 3)
    assert (values, error) == (["1", "2", "3"], None)
    values, error = consume_ck(b, "alice", "b", "g", 1)
    assert values == [] and error is not None and error.code() == CKError.TOPIC_AUTHORIZATION_FAILED
    # a group alice may not read: the coordinator refuses her
    values, error = consume_ck(b, "alice", "a", "h", 1)
    assert values == [] and error is not None and error.code() == CKError.GROUP_AUTHORIZATION_FAILED
    # kafka-python: reads "a", and gets its exception fetching "b" (which alice may describe, so
    # that it finds the partition's leader; subscribed to a topic it may not describe, it only logs
    # the Metadata error, as it does with Kafka)
    create_acls(b, ck_acl(ResourceType.TOPIC, "b", "User:alice", AclOperation.DESCRIBE))
    kc = KafkaConsumer(auto_offset_reset="earliest", consumer_timeout_ms=5000, **kp_conf(b, "alice"))
    try:
        kc.assign([TopicPartition("a", 0)])
        assert [m.value for m in kc] == [b"1", b"2", b"3"]
        kc.assign([TopicPartition("b", 0)])
        with pytest.raises(TopicAuthorizationFailedError):
            for _ in range(10):
                kc.poll(timeout_ms=1000)
    finally:
        kc.close()


def test_metadata_hides_topics_the_principal_may_not_describe(acl_broker):
    b = acl_broker
    create_acls(b, ck_acl(ResourceType.TOPIC, "a", "User:alice", AclOperation.READ))
    alice = AdminClient(ck_conf(b, "alice"))
    assert set(alice.list_topics(timeout=30).topics) == {"a"}
    admin = AdminClient(ck_conf(b, "admin"))
    assert {"a", "b", "app-orders", "other"} <= set(admin.list_topics(timeout=30).topics)
    bob = AdminClient(ck_conf(b, "bob"))
    assert set(bob.list_topics(timeout=30).topics) == set()
    # a named topic bob may not describe is refused, whether or not it exists
    for name in ("a", "nonexistent"):
        md = bob.list_topics(topic=name, timeout=30)
        assert md.topics[name].error.code() == CKError.TOPIC_AUTHORIZATION_FAILED


def test_producer_without_write_is_refused(acl_broker):
    b = acl_broker
    create_acls(b, ck_acl(ResourceType.TOPIC, "a", "User:bob", AclOperation.READ))
    errors = produce(b, "bob", "a", ["nope"])
    assert len(errors) == 1 and errors[0].code() == CKError.TOPIC_AUTHORIZATION_FAILED
    create_acls(b, ck_acl(ResourceType.TOPIC, "a", "User:bob", AclOperation.WRITE))
    assert produce(b, "bob", "a", ["yes"]) == [None]


def test_deny_beats_allow(acl_broker):
    b = acl_broker
    create_acls(
        b,
        ck_acl(ResourceType.TOPIC, "*", "User:*", AclOperation.ALL),
        ck_acl(ResourceType.TOPIC, "b", "User:bob", AclOperation.WRITE, AclPermissionType.DENY),
    )
    assert produce(b, "bob", "a", ["ok"]) == [None]
    errors = produce(b, "bob", "b", ["denied"])
    assert errors[0] is not None and errors[0].code() == CKError.TOPIC_AUTHORIZATION_FAILED
    assert produce(b, "alice", "b", ["ok"]) == [None]


def test_prefixed_acls(acl_broker):
    b = acl_broker
    create_acls(
        b,
        ck_acl(
            ResourceType.TOPIC, "app-", "User:alice", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED
        ),
    )
    assert produce(b, "alice", "app-orders", ["1"]) == [None]
    errors = produce(b, "alice", "other", ["2"])
    assert errors[0] is not None and errors[0].code() == CKError.TOPIC_AUTHORIZATION_FAILED


def test_create_topics_needs_create(acl_broker):
    b = acl_broker
    alice = AdminClient(ck_conf(b, "alice"))
    name = f"t-{uuid.uuid4().hex[:6]}"
    fut = alice.create_topics([confluent_kafka.admin.NewTopic(name, 1)])[name]
    with pytest.raises(confluent_kafka.KafkaException) as e:
        fut.result(timeout=30)
    assert e.value.args[0].code() == CKError.TOPIC_AUTHORIZATION_FAILED
    create_acls(
        b,
        ck_acl(
            ResourceType.TOPIC, "t-", "User:alice", AclOperation.CREATE, pattern=ResourcePatternType.PREFIXED
        ),
    )
    alice.create_topics([confluent_kafka.admin.NewTopic(name, 1)])[name].result(timeout=30)


def test_confluent_admin_creates_describes_and_deletes_acls(acl_broker):
    b = acl_broker
    admin = AdminClient(ck_conf(b, "admin"))
    bindings = [
        ck_acl(ResourceType.TOPIC, "a", "User:alice", AclOperation.READ),
        ck_acl(
            ResourceType.GROUP, "g-", "User:alice", AclOperation.READ, pattern=ResourcePatternType.PREFIXED
        ),
        ck_acl(
            ResourceType.BROKER, "kafka-cluster", "User:bob", AclOperation.DESCRIBE, AclPermissionType.DENY
        ),
    ]
    for f in admin.create_acls(bindings).values():
        assert f.result(timeout=30) is None
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    found = admin.describe_acls(everything).result(timeout=30)
    assert sorted(map(str, found)) == sorted(map(str, bindings))
    # MATCH: every ACL that applies to group g-1
    match = AclBindingFilter(
        ResourceType.GROUP,
        "g-1",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert list(map(str, admin.describe_acls(match).result(timeout=30))) == [str(bindings[1])]
    topics = AclBindingFilter(
        ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    (fut,) = admin.delete_acls([topics]).values()
    assert list(map(str, fut.result(timeout=30))) == [str(bindings[0])]
    assert sorted(map(str, admin.describe_acls(everything).result(timeout=30))) == sorted(
        map(str, bindings[1:])
    )
    # a user who may not alter the cluster cannot create ACLs
    alice = AdminClient(ck_conf(b, "alice"))
    (fut,) = alice.create_acls([ck_acl(ResourceType.TOPIC, "b", "User:alice", AclOperation.ALL)]).values()
    with pytest.raises(confluent_kafka.KafkaException) as e:
        fut.result(timeout=30)
    assert e.value.args[0].code() == CKError.CLUSTER_AUTHORIZATION_FAILED
    # invalid: the cluster resource has one name
    (fut,) = admin.create_acls(
        [ck_acl(ResourceType.BROKER, "other", "User:bob", AclOperation.ALTER)]
    ).values()
    with pytest.raises(confluent_kafka.KafkaException) as e:
        fut.result(timeout=30)
    assert e.value.args[0].code() == CKError.INVALID_REQUEST


def test_kafka_python_admin_acls(acl_broker):
    b = acl_broker
    admin = KafkaAdminClient(**kp_conf(b, "admin"))
    try:
        acl = ACL(
            principal="User:alice",
            host="*",
            operation=ACLOperation.WRITE,
            permission_type=ACLPermissionType.ALLOW,
            resource_pattern=ResourcePattern(KPResourceType.TOPIC, "app-", ACLResourcePatternType.PREFIXED),
        )
        result = admin.create_acls([acl])
        assert result["failed"] == [] and len(result["succeeded"]) == 1
        flt = ACLFilter(
            principal=None,
            host=None,
            operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(KPResourceType.TOPIC, None, ACLResourcePatternType.ANY),
        )
        acls, error = admin.describe_acls(flt)
        assert [(a.principal, a.operation, a.resource_pattern.resource_name) for a in acls] == [
            ("User:alice", ACLOperation.WRITE, "app-")
        ]
        assert produce(b, "alice", "app-orders", ["1"]) == [None]
        ((_f, deleted, error),) = admin.delete_acls([flt])
        assert error is NoError
        assert [a.resource_pattern.resource_name for a in deleted] == ["app-"]
        assert admin.describe_acls(flt)[0] == []
        # describing ACLs needs DESCRIBE on the cluster
        alice = KafkaAdminClient(**kp_conf(b, "alice"))
        try:
            with pytest.raises(ClusterAuthorizationFailedError):
                alice.describe_acls(flt)
        finally:
            alice.close()
    finally:
        admin.close()


def test_acls_survive_a_restart(broker_factory, tmp_path):
    data = tmp_path / "acl-data"
    b = broker_factory(CONFIG, data_dir=data)
    b.sasl = (
        f"127.0.0.1:{next(x.port for x in b.broker.listener.bound if x.endpoint.name == 'SASL_PLAINTEXT')}"
    )
    create_acls(b, ck_acl(ResourceType.TOPIC, "a", "User:alice", AclOperation.READ))
    b.stop()
    b2 = broker_factory(CONFIG, data_dir=data)
    b2.sasl = (
        f"127.0.0.1:{next(x.port for x in b2.broker.listener.bound if x.endpoint.name == 'SASL_PLAINTEXT')}"
    )
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    admin = AdminClient(ck_conf(b2, "admin"))
    found = admin.describe_acls(everything).result(timeout=30)
    assert list(map(str, found)) == [str(ck_acl(ResourceType.TOPIC, "a", "User:alice", AclOperation.READ))]


@pytest.mark.java
@pytest.mark.usefixtures("java_clients")
def test_java_admin_acls(acl_broker, tmp_path, monkeypatch):
    java = require_java()
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret";\n'
    )
    monkeypatch.setenv("PROBE_CLIENT_PROPERTIES", str(props))
    result = java.run(
        "AclProbe",
        [
            acl_broker.sasl,
            "create TOPIC a LITERAL User:alice * READ ALLOW",
            "create GROUP g PREFIXED User:* 10.0.0.1 READ DENY",
            "create CLUSTER other LITERAL User:bob * ALTER ALLOW",
            "describe",
            "delete GROUP - ANY",
            "describe",
        ],
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    created, created2, invalid, described, deleted, after = json_lines(result.stdout)
    assert created["ok"] and created2["ok"], (created, created2)
    assert invalid["error"] == "InvalidRequestException", invalid
    assert "The only valid name for the CLUSTER resource is kafka-cluster" in invalid["message"]
    assert described["acls"] == [
        "GROUP g PREFIXED User:* 10.0.0.1 READ DENY",
        "TOPIC a LITERAL User:alice * READ ALLOW",
    ]
    assert deleted["deleted"] == ["GROUP g PREFIXED User:* 10.0.0.1 READ DENY"]
    assert after["acls"] == ["TOPIC a LITERAL User:alice * READ ALLOW"]


def test_consumer_protocol_group_needs_describe_on_its_topics(acl_broker):
    """KIP-848: READ on the group, and DESCRIBE on every topic subscribed by name (Kafka 4.3)."""
    b = acl_broker
    assert produce(b, "admin", "a", ["1"]) == [None]
    create_acls(
        b,
        ck_acl(ResourceType.TOPIC, "a", "User:alice", AclOperation.READ),
        ck_acl(ResourceType.GROUP, "k", "User:alice", AclOperation.READ),
    )

    def consume(topic: str):
        c = confluent_kafka.Consumer(
            ck_conf(
                b, "alice", **{"group.id": "k", "group.protocol": "consumer", "auto.offset.reset": "earliest"}
            )
        )
        c.subscribe([topic])
        try:
            for _ in range(150):
                msg = c.poll(0.2)
                if msg is not None:
                    return msg.error().code() if msg.error() else msg.value()
            return None
        finally:
            c.close()

    assert consume("a") == b"1"
    assert consume("b") == CKError.TOPIC_AUTHORIZATION_FAILED
    # ConsumerGroupDescribe: a group assigned a topic bob may not describe is not described to him
    create_acls(b, ck_acl(ResourceType.GROUP, "k", "User:bob", AclOperation.DESCRIBE))
    member = confluent_kafka.Consumer(
        ck_conf(
            b, "alice", **{"group.id": "k", "group.protocol": "consumer", "auto.offset.reset": "earliest"}
        )
    )
    member.subscribe(["a"])
    try:
        for _ in range(150):  # until it holds its assignment
            member.poll(0.2)
            if member.assignment():
                break
        assert member.assignment()
        admin = AdminClient(ck_conf(b, "admin"))
        (fut,) = admin.describe_consumer_groups(["k"]).values()
        assert [m.assignment.topic_partitions[0].topic for m in fut.result(timeout=30).members] == ["a"]
        bob = AdminClient(ck_conf(b, "bob"))
        (fut,) = bob.describe_consumer_groups(["k"]).values()
        with pytest.raises(confluent_kafka.KafkaException) as e:
            fut.result(timeout=30)
        assert e.value.args[0].code() == CKError.TOPIC_AUTHORIZATION_FAILED
    finally:
        member.close()


def test_transactional_producer_needs_write_on_its_transactional_id(acl_broker):
    """confluent-kafka's transactional producer: DESCRIBE on its transactional id lets it find the
    coordinator, but without WRITE InitProducerId is refused (librdkafka reports a fatal
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED); with WRITE it commits; WRITE taken away before its next
    transaction, AddPartitionsToTxn is refused and the commit fails with the same fatal error."""
    b = acl_broker
    tid = "bob-tx"
    create_acls(
        b,
        ck_acl(ResourceType.TOPIC, "a", "User:bob", AclOperation.WRITE),
        ck_acl(ResourceType.TRANSACTIONAL_ID, tid, "User:bob", AclOperation.DESCRIBE),
    )
    conf = ck_conf(b, "bob", **{"transactional.id": tid, "transaction.timeout.ms": 60000})
    refused = confluent_kafka.Producer(conf)
    with pytest.raises(confluent_kafka.KafkaException) as e:
        refused.init_transactions(30)
    err = e.value.args[0]
    assert err.code() == CKError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED and err.fatal()
    del refused
    write_tid = ck_acl(ResourceType.TRANSACTIONAL_ID, tid, "User:bob", AclOperation.WRITE)
    create_acls(b, write_tid)
    p = confluent_kafka.Producer(conf)
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("a", b"committed")
    p.commit_transaction(30)
    # WRITE taken away: the next transaction cannot add its partition
    admin = AdminClient(ck_conf(b, "admin"))
    for f in admin.delete_acls([AclBindingFilter(
        ResourceType.TRANSACTIONAL_ID, tid, ResourcePatternType.LITERAL, "User:bob", "*",
        AclOperation.WRITE, AclPermissionType.ALLOW,
    )]).values():  # fmt: skip
        assert len(f.result(timeout=30)) == 1
    p.begin_transaction()
    p.produce("a", b"refused")
    with pytest.raises(confluent_kafka.KafkaException) as e:
        p.commit_transaction(30)
    err = e.value.args[0]
    assert err.code() == CKError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED and err.fatal()
    # read_committed sees the committed record; the refused one was never appended (one record and
    # its commit marker in the log)
    values, error = consume_ck(b, "admin", "a", "txn-reader", 1)
    assert (values, error) == (["committed"], None)
    c = confluent_kafka.Consumer(ck_conf(b, "admin", **{"group.id": "wm"}))
    try:
        assert c.get_watermark_offsets(confluent_kafka.TopicPartition("a", 0), timeout=30) == (0, 2)
    finally:
        c.close()
