"""Consumer groups (the classic protocol) with kafka-python, aiokafka and confluent-kafka.

Members run as separate processes (tests/support/groups.py) so that one can be SIGKILLed: a crash
that sends no LeaveGroup and stops heartbeating. Scenarios:

- rebalancing: three members share a 6-partition topic (disjoint, complete, balanced), one closes
  and the other two take over, a new one joins and gets a share, one is killed and the survivors
  get its partitions after its session timeout (range and cooperative-sticky);
- committed offsets: a new member of the group resumes exactly where the last one committed, also
  after a broker restart on the same data directory;
- static membership (KIP-345): a static member closed or killed and restarted with the same
  instance id gets its old assignment back without a rebalance; the same for the static leader;
  with our own codec, the rejoining static leader's JoinGroup v9 answer (KIP-814);
- group administration with KafkaAdminClient and confluent-kafka's AdminClient.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest

from broker.protocol.generated.heartbeat import HeartbeatRequest
from broker.protocol.generated.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from broker.protocol.generated.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from tests.support.groups import (
    GROUP_CONFIG,
    PARTITIONS,
    MemberPool,
    group_view,
    lifecycle,
    produce,
    resume_after_commit,
    static_restart,
    wait_settled,
    wait_state,
)
from tests.support.wire import WireClient

BROKER_CONFIG = GROUP_CONFIG
TOPIC = "orders"
GROUP = "g"
#: kill detection waits for this; heartbeats every HEARTBEAT_MS keep live members well inside it
SESSION_MS = 2000
HEARTBEAT_MS = 200
#: static members must be restarted within their session timeout
STATIC_SESSION_MS = 10000


def python_member(pool: MemberPool, bt, client: str, name: str, **extra):
    config = dict(
        client=client,
        bootstrap=bt.bootstrap,
        group=GROUP,
        topic=TOPIC,
        client_id=f"{client}-{name}",
        session_ms=SESSION_MS,
        heartbeat_ms=HEARTBEAT_MS,
    )
    config.update(extra)
    return pool.python(name, **config)


# ---------------------------------------------------------------------------------- rebalancing


@pytest.mark.parametrize(
    "client,strategy",
    [
        ("kafka-python", "range"),
        ("kafka-python", "cooperative-sticky"),
        ("aiokafka", "range"),
        ("confluent", "range"),
        ("confluent", "cooperative-sticky"),
    ],
)
def test_members_share_leave_join_and_die(bt, pool, client, strategy):
    views = lifecycle(bt, GROUP, TOPIC, lambda n: python_member(pool, bt, client, n, strategy=strategy))
    assert {v.protocol for v in views} == {strategy}


# ---------------------------------------------------------------------------------- committed offsets


@pytest.mark.parametrize("restart", [False, True], ids=["same-broker", "after-restart"])
@pytest.mark.parametrize("client", ["kafka-python", "aiokafka", "confluent"])
def test_new_member_resumes_at_committed_offsets(broker_factory, tmp_path: Path, pool, client, restart):
    data = tmp_path / "resume"

    def start(b, name, limit):
        return python_member(pool, b, client, name, limit=limit)

    def restart_broker(b):
        b.stop()
        return broker_factory(GROUP_CONFIG, data_dir=data)

    resume_after_commit(
        lambda: broker_factory(GROUP_CONFIG, data_dir=data),
        restart_broker if restart else None,
        GROUP,
        TOPIC,
        start,
    )


# ---------------------------------------------------------------------------------- static membership


@pytest.mark.parametrize(
    "client,role,how",
    [
        ("kafka-python", "follower", "kill"),
        ("kafka-python", "leader", "close"),
        ("aiokafka", "follower", "close"),
        ("aiokafka", "leader", "kill"),
        ("confluent", "follower", "kill"),
        ("confluent", "leader", "close"),
        ("confluent", "leader", "kill"),
    ],
)
def test_static_member_restart_keeps_generation(bt, pool, client, role, how):
    def start(name):
        return python_member(
            pool, bt, client, name, strategy="range", instance_id=name, session_ms=STATIC_SESSION_MS
        )

    static_restart(bt, GROUP, TOPIC, start, role, how)


# ---------------------------------------------------------------------------------- raw protocol

JOIN, SYNC, HEARTBEAT = 11, 14, 12


def subscription(topic: str, owned: list[int] | None = None) -> bytes:
    """ConsumerProtocolSubscription: v0 (topics, no user data), or v1 with owned partitions."""
    t = topic.encode()
    body = struct.pack(">i", 1) + struct.pack(">h", len(t)) + t + struct.pack(">i", -1)
    if owned is None:
        return struct.pack(">h", 0) + body
    owned_part = struct.pack(">i", 1) + struct.pack(">h", len(t)) + t + struct.pack(">i", len(owned))
    owned_part += b"".join(struct.pack(">i", p) for p in owned)
    return struct.pack(">h", 1) + body + owned_part


def assignment(topic: str, partitions: list[int]) -> bytes:
    t = topic.encode()
    out = struct.pack(">hi", 0, 1) + struct.pack(">h", len(t)) + t + struct.pack(">i", len(partitions))
    return out + b"".join(struct.pack(">i", p) for p in partitions) + struct.pack(">i", -1)


def join_request(instance: str, member_id: str = "", metadata: bytes | None = None) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id="raw",
        session_timeout_ms=STATIC_SESSION_MS,
        rebalance_timeout_ms=STATIC_SESSION_MS,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=[
            JoinGroupRequestProtocol("range", metadata if metadata is not None else subscription(TOPIC))
        ],
        reason=None,
    )


def sync_request(member_id: str, instance: str, generation: int, assignments=()) -> SyncGroupRequest:
    return SyncGroupRequest(
        group_id="raw",
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[SyncGroupRequestAssignment(m, a) for m, a in assignments],
    )


def wait_view(bt, group: str, state: str, members: int, timeout: float = 10):
    """Wait until the broker has ``group`` in ``state`` with that many members."""
    deadline = time.monotonic() + timeout
    while (view := group_view(bt, group, TOPIC)) is None or (view.state, len(view.members)) != (
        state,
        members,
    ):
        assert time.monotonic() < deadline, f"group {group}: {view}"
        time.sleep(0.01)
    return view


def form_static_group(bt, metadata: dict[str, bytes]) -> tuple[dict, dict, dict, int]:
    """Three static members s1 (the leader), s2, s3 join one by one over raw connections, as the
    clients do; returns (connections, member ids, assignments, generation) once the group is Stable."""
    names = ["s1", "s2", "s3"]
    conns = {n: WireClient(bt.port) for n in names}
    ids: dict[str, str] = {}
    gen = 0
    for i, name in enumerate(names):
        joining = names[: i + 1]
        # the newcomer's JoinGroup starts a rebalance (it waits for the others); once the broker
        # has it, the known members rejoin with their ids
        conns[name].send(JOIN, 9, join_request(name, "", metadata[name]))
        if i:
            wait_view(bt, "raw", "PreparingRebalance", len(joining))
        for n in joining[:-1]:
            conns[n].send(JOIN, 9, join_request(n, ids[n], metadata[n]))
        answers = {n: conns[n].recv(JOIN, 9)[1] for n in joining}
        for n, r in answers.items():
            assert r.error_code == 0, (n, r)
            ids[n] = r.member_id
        gen = answers["s1"].generation_id
        assert answers["s1"].leader == ids["s1"]
    parts = {"s1": [0, 1], "s2": [2, 3], "s3": [4, 5]}
    assigned = {n: assignment(TOPIC, parts[n]) for n in names}
    for n in ["s2", "s3"]:
        conns[n].send(SYNC, 5, sync_request(ids[n], n, gen))
    conns["s1"].send(SYNC, 5, sync_request(ids["s1"], "s1", gen, [(ids[n], assigned[n]) for n in names]))
    for n in names:
        r = conns[n].recv(SYNC, 5)[1]
        assert (r.error_code, bytes(r.assignment)) == (0, assigned[n]), (n, r)
    view = group_view(bt, "raw", TOPIC)
    assert view is not None and view.state == "Stable" and view.generation == gen
    return conns, ids, assigned, gen


def test_raw_static_leader_rejoin_gets_skip_assignment(bt):
    """KIP-814: the static leader rejoining a Stable group with JoinGroup v9 and no member id gets
    SkipAssignment=true, a new member id that is also the leader id, and every member's metadata;
    its SyncGroup returns its old assignment; the old id is fenced; nobody else notices."""
    metadata = {n: subscription(TOPIC) for n in ("s1", "s2", "s3")}
    conns, ids, assigned, gen = form_static_group(bt, metadata)
    try:
        with WireClient(bt.port) as again:
            r = again.call(JOIN, 9, join_request("s1"))
            assert r.error_code == 0, r
            assert r.member_id not in ("", ids["s1"])
            assert (r.generation_id, r.leader, r.skip_assignment) == (gen, r.member_id, True)
            assert (r.protocol_type, r.protocol_name) == ("consumer", "range")
            new_ids = {**ids, "s1": r.member_id}
            assert sorted((m.member_id, m.group_instance_id, bytes(m.metadata)) for m in r.members) == sorted(
                (new_ids[n], n, metadata[n]) for n in new_ids
            )
            s = again.call(SYNC, 5, sync_request(r.member_id, "s1", gen))
            assert (s.error_code, bytes(s.assignment)) == (0, assigned["s1"])

            old = conns["s1"].call(HEARTBEAT, 4, HeartbeatRequest("raw", gen, ids["s1"], "s1"))
            assert old.error_code == 82, "the replaced member id must be FENCED_INSTANCE_ID"
            for n in ("s2", "s3"):
                hb = conns[n].call(HEARTBEAT, 4, HeartbeatRequest("raw", gen, ids[n], n))
                assert hb.error_code == 0, (n, hb)
            view = group_view(bt, "raw", TOPIC)
            assert (view.state, view.generation, view.leader) == ("Stable", gen, r.member_id)

            # a follower rejoining the same way is no leader: no metadata, no SkipAssignment
            with WireClient(bt.port) as f:
                r2 = f.call(JOIN, 9, join_request("s2"))
                assert (r2.error_code, r2.generation_id, r2.leader) == (0, gen, r.member_id)
                assert (r2.skip_assignment, r2.members) == (False, [])
    finally:
        for c in conns.values():
            c.close()


def test_raw_static_rejoin_with_new_metadata_keeps_generation(bt):
    """A restarted static member's subscription bytes usually differ from its predecessor's (no
    owned partitions yet; the Java client also sends its last generation). Kafka rebalances a Stable
    group on a static rejoin only if the group's selected protocol would change
    (GroupMetadataManager.updateStaticMemberThenRebalanceOrCompleteJoin); the protocol is the same
    here, so the answer must come at once, with the old generation."""
    metadata = {
        "s1": subscription(TOPIC, [0, 1]),
        "s2": subscription(TOPIC, [2, 3]),
        "s3": subscription(TOPIC, [4, 5]),
    }
    conns, ids, assigned, gen = form_static_group(bt, metadata)
    try:
        for name in ("s2", "s1"):  # a follower, then the leader
            with WireClient(bt.port) as again:
                again.send(JOIN, 9, join_request(name, metadata=subscription(TOPIC, [])))
                deadline = time.monotonic() + 10
                while (view := group_view(bt, "raw", TOPIC)).member_of(name) == ids[name]:
                    assert time.monotonic() < deadline, "the JoinGroup was not processed"
                    time.sleep(0.01)
                assert (view.state, view.generation) == ("Stable", gen), (
                    f"static {name} rejoining with new subscription bytes (same protocol 'range') "
                    f"started a rebalance: group {view.state} at generation {view.generation}"
                )
                r = again.recv(JOIN, 9)[1]
                assert (r.error_code, r.generation_id) == (0, gen), r
                assert r.skip_assignment == (name == "s1")
                ids[name] = r.member_id
                s = again.call(SYNC, 5, sync_request(r.member_id, name, gen))
                assert (s.error_code, bytes(s.assignment)) == (0, assigned[name])
    finally:
        for c in conns.values():
            c.close()


# ---------------------------------------------------------------------------------- administration


def _active_and_empty_groups(bt, pool, client: str):
    """Group "active": one live member that committed; group "idle": a member consumed 7 records,
    committed and closed (left), so it is Empty with offsets."""
    produce(bt, TOPIC, PARTITIONS, 10)
    active = python_member(pool, bt, client, "active", group="active", session_ms=STATIC_SESSION_MS)
    wait_settled(bt, "active", TOPIC, [active])
    active.wait_records(60)
    active.commit()
    idle = python_member(pool, bt, client, "idle", group="idle", limit=7, session_ms=STATIC_SESSION_MS)
    idle.wait_event("limit")
    idle_offsets = idle.commit()
    idle.close()
    return active, idle_offsets


def test_kafka_python_admin_groups(bt, pool):
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import GroupSubscribedToTopicError, NoError
    from kafka.structs import OffsetAndMetadata

    active, idle_offsets = _active_and_empty_groups(bt, pool, "kafka-python")
    admin = KafkaAdminClient(bootstrap_servers=bt.bootstrap, request_timeout_ms=10000)
    try:
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert set(listed) == {"active", "idle"}
        assert (listed["active"]["group_state"], listed["active"]["protocol_type"]) == ("Stable", "consumer")
        assert listed["idle"]["group_state"] == "Empty"

        described = admin.describe_groups(["active", "idle", "nope"])
        a = described["active"]
        assert (a["group_state"], a["protocol_type"], a["protocol_data"], a["error"]) == (
            "Stable",
            "consumer",
            "range",
            None,
        )
        [m] = a["members"]
        assert (m["member_id"], m["client_id"], m["client_host"]) == (
            active.state["memberId"],
            "kafka-python-active",
            "/127.0.0.1",
        )
        assert m["member_metadata"]["topics"] == [TOPIC]
        assert m["member_assignment"]["assigned_partitions"] == [
            {"topic": TOPIC, "partitions": list(range(6))}
        ]
        assert (described["idle"]["group_state"], described["idle"]["members"]) == ("Empty", [])
        assert described["nope"]["group_state"] == "Dead"
        assert "GroupIdNotFound" in described["nope"]["error"]

        offsets = admin.list_group_offsets({"active": None, "idle": None})
        assert {tp.partition: om.offset for tp, om in offsets["active"].items()} == dict.fromkeys(
            range(6), 10
        )
        assert {tp.partition: om.offset for tp, om in offsets["idle"].items()} == idle_offsets

        # offsets of a topic the live group subscribes to cannot be deleted; of the empty group they can
        tp0 = TopicPartition(TOPIC, 0)
        assert admin.delete_group_offsets("active", [tp0]) == {tp0: GroupSubscribedToTopicError}
        assert admin.delete_group_offsets("idle", [tp0]) == {tp0: NoError}
        assert admin.alter_group_offsets(
            "idle", {TopicPartition(TOPIC, 1): OffsetAndMetadata(5, "", -1)}
        ) == {TopicPartition(TOPIC, 1): NoError}
        left = admin.list_group_offsets({"idle": None})["idle"]
        assert {tp.partition: om.offset for tp, om in left.items()} == {
            **{p: o for p, o in idle_offsets.items() if p != 0},
            1: 5,
        }

        results = dict(admin.delete_groups(["active", "idle", "nope"]))
        assert {g: str(r) for g, r in results.items()} == {
            "active": "NonEmptyGroupError",
            "idle": "OK",
            "nope": "GroupIdNotFoundError",
        }, results
        assert [g["group_id"] for g in admin.list_groups()] == ["active"]
        assert admin.list_group_offsets({"idle": None}) == {"idle": {}}
        assert admin.describe_groups(["idle"])["idle"]["group_state"] == "Dead"
        # the live group and its offsets are untouched
        assert len(admin.list_group_offsets({"active": None})["active"]) == 6
    finally:
        admin.close()

    # once its last member leaves, the group can be deleted too
    active.close()
    wait_state(bt, "active", TOPIC, "Empty")
    admin = KafkaAdminClient(bootstrap_servers=bt.bootstrap, request_timeout_ms=10000)
    try:
        assert {g: str(r) for g, r in admin.delete_groups(["active"]).items()} == {"active": "OK"}
        assert admin.list_groups() == []
    finally:
        admin.close()
    assert bt.call(lambda: dict(bt.broker.groups.state.offsets)) == {}


def test_confluent_admin_groups(bt, pool):
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    active, idle_offsets = _active_and_empty_groups(bt, pool, "confluent")
    admin = AdminClient({"bootstrap.servers": bt.bootstrap})

    listed = admin.list_consumer_groups(request_timeout=10).result()
    assert listed.errors == []
    by_id = {g.group_id: g for g in listed.valid}
    assert set(by_id) == {"active", "idle"}
    assert (by_id["active"].state.name, by_id["active"].is_simple_consumer_group) == ("STABLE", False)
    assert by_id["idle"].state.name == "EMPTY"

    futures = admin.describe_consumer_groups(["active", "idle"], request_timeout=10)
    a = futures["active"].result()
    assert (a.state.name, a.partition_assignor, a.is_simple_consumer_group) == ("STABLE", "range", False)
    assert a.coordinator.id == 1
    [m] = a.members
    assert (m.member_id, m.client_id, m.host) == (active.state["memberId"], "confluent-active", "/127.0.0.1")
    assert sorted(tp.partition for tp in m.assignment.topic_partitions) == list(range(6))
    idle = futures["idle"].result()
    assert (idle.state.name, idle.members) == ("EMPTY", [])

    def offsets_of(group: str) -> dict[int, int]:
        f = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=10)
        return {tp.partition: tp.offset for tp in f[group].result().topic_partitions}

    assert offsets_of("active") == dict.fromkeys(range(6), 10)
    assert offsets_of("idle") == idle_offsets

    altered = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("idle", [TopicPartition(TOPIC, 2, 4)])], request_timeout=10
    )
    [tp] = altered["idle"].result().topic_partitions
    assert (tp.partition, tp.offset, tp.error) == (2, 4, None)
    assert offsets_of("idle") == {**idle_offsets, 2: 4}

    deleted = admin.delete_consumer_groups(["active", "idle", "nope"], request_timeout=10)
    assert deleted["idle"].result() is None
    with pytest.raises(KafkaException) as e:
        deleted["active"].result()
    assert e.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
    with pytest.raises(KafkaException) as e:
        deleted["nope"].result()
    assert e.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND

    listed = admin.list_consumer_groups(request_timeout=10).result()
    assert [g.group_id for g in listed.valid] == ["active"]
    assert offsets_of("idle") == {}
    assert offsets_of("active") == dict.fromkeys(range(6), 10)
    assert group_view(bt, "idle", TOPIC) is None


def test_emptied_consumer_group_keeps_its_protocol_type(bt, pool):
    """When its last member leaves, a group becomes Empty but stays a "consumer" group: Kafka resets
    only the protocol name (ClassicGroup.initNextGeneration), not the protocol type, so ListGroups
    and DescribeGroups still say "consumer" and admin clients do not call it a simple group."""
    from confluent_kafka.admin import AdminClient
    from kafka.admin import KafkaAdminClient

    member = python_member(pool, bt, "kafka-python", "m", session_ms=STATIC_SESSION_MS)
    wait_settled(bt, GROUP, TOPIC, [member])
    member.commit()
    member.close()
    wait_state(bt, GROUP, TOPIC, "Empty")

    admin = KafkaAdminClient(bootstrap_servers=bt.bootstrap, request_timeout_ms=10000)
    try:
        [listed] = admin.list_groups()
        described = admin.describe_groups([GROUP])[GROUP]
    finally:
        admin.close()
    ck_admin = AdminClient({"bootstrap.servers": bt.bootstrap})
    [ck_listed] = ck_admin.list_consumer_groups(request_timeout=10).result().valid
    del ck_admin  # its threads would keep reconnecting after the broker stops
    assert (listed["group_state"], described["group_state"], ck_listed.state.name) == (
        "Empty",
        "Empty",
        "EMPTY",
    )
    assert (listed["protocol_type"], described["protocol_type"], ck_listed.is_simple_consumer_group) == (
        "consumer",
        "consumer",
        False,
    )
