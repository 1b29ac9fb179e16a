"""KIP-848 consumer groups (group.protocol=consumer) with confluent-kafka, and the protocol's error
cases at the wire level with our own codec.

confluent-kafka 2.16 (librdkafka) speaks ConsumerGroupHeartbeat v1: it chooses its member id, and
the session timeout, heartbeat interval and assignor are the broker's (group.consumer.*). Members
run as separate processes (tests/support/groups.py) so that one can be SIGKILLed. Scenarios:

- three members on a 6-partition topic get disjoint, complete assignments, seen by the clients,
  by ConsumerGroupDescribe (confluent's AdminClient and our codec: group, members, epochs,
  current and target assignments); one closes and the other two take its partitions; one is
  killed and after the session timeout the survivor owns everything (server-side assignors
  "uniform", the default, and "range");
- a static member (group.instance.id) closed and restarted comes back with its epoch and
  assignment and nobody else's epoch changes; one that is killed is not replaced while its
  session lasts (UNRELEASED_INSTANCE_ID, as Kafka), then it is fenced and the rest rebalance;
- committed offsets: a new member resumes exactly where the last one committed, also after a
  broker restart on the same data directory;
- raw protocol: a live classic group's id cannot be used with ConsumerGroupHeartbeat
  (GROUP_ID_NOT_FOUND) and JoinGroup cannot join a live consumer group
  (INCONSISTENT_GROUP_PROTOCOL); UNSUPPORTED_ASSIGNOR; INVALID_REQUEST with Kafka's messages;
  FENCED_MEMBER_EPOCH.
"""

from __future__ import annotations

import struct
import time
import uuid
from pathlib import Path

import pytest

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.consumer_group_describe import ConsumerGroupDescribeRequest
from broker.protocol.generated.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatRequestTopicPartitions,
)
from broker.protocol.generated.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from tests.support.groups import (
    PARTITIONS,
    ConsumerGroupView,
    Member,
    MemberPool,
    consumed_everything,
    consumer_group_view,
    group_view,
    produce,
    resume_after_commit,
    wait_consumer_empty,
    wait_consumer_settled,
)
from tests.support.wire import WireClient

TOPIC = "orders"
GROUP = "g"
#: The members' session timeout and heartbeat interval are broker settings in KIP-848. A killed
#: member is noticed after SESSION_MS; a closed static member must be back within
#: STATIC_SESSION_MS, and a killed one is fenced after it.
SESSION_MS = 6000
STATIC_SESSION_MS = 10000
BROKER_CONFIG = {
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.heartbeat.interval.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}
HEARTBEAT, DESCRIBE, JOIN = 68, 69, 11
#: ConsumerProtocolSubscription v0: [TOPIC], no user data
SUBSCRIPTION = struct.pack(">hih", 0, 1, len(TOPIC)) + TOPIC.encode() + struct.pack(">i", -1)


def ck_member(pool: MemberPool, bt, name: str, **extra) -> Member:
    config = dict(
        client="confluent",
        protocol="consumer",
        bootstrap=bt.bootstrap,
        group=GROUP,
        topic=TOPIC,
        client_id=f"ck-{name}",
    )
    config.update(extra)
    return pool.python(name, **config)


def describe(bt, group: str = GROUP):
    """ConsumerGroupDescribe v1 with our codec: the described group."""
    with WireClient(bt.port) as c:
        [g] = c.call(DESCRIBE, 1, ConsumerGroupDescribeRequest([group], False)).groups
    return g


def parts(assignment) -> list[int]:
    return sorted(p for tp in assignment.topic_partitions for p in tp.partitions)


def check_described(bt, members: list[Member], assignor: str):
    """ConsumerGroupDescribe agrees with the clients and the broker: Stable, every member at the
    group epoch with its current assignment equal to its target and to what the client holds."""
    g = describe(bt)
    assert (g.error_code, g.group_id, g.group_state, g.assignor_name) == (0, GROUP, "Stable", assignor), g
    assert g.assignment_epoch == g.group_epoch
    by_id = {m.member_id: m for m in g.members}
    assert set(by_id) == {m.state["memberId"] for m in members}  # type: ignore[index]
    for m in members:
        d = by_id[m.state["memberId"]]  # type: ignore[index]
        assert d.member_epoch == g.group_epoch == m.state["generation"], (d, m.state)  # type: ignore[index]
        assert parts(d.assignment) == parts(d.target_assignment) == m.state["assignment"], d  # type: ignore[index]
        assert {tp.topic_name for tp in d.assignment.topic_partitions} <= {TOPIC}
        assert (d.client_id, d.client_host, d.subscribed_topic_names) == (
            f"ck-{m.name}",
            "/127.0.0.1",
            [TOPIC],
        )
        assert d.member_type == 1  # consumer protocol member
    return g


# ---------------------------------------------------------------------------------- rebalancing


@pytest.mark.parametrize("assignor", [None, "range"], ids=["default-uniform", "range"])
def test_members_share_leave_and_die(bt, pool, assignor):
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType
    from confluent_kafka.admin import AdminClient

    expected_assignor = assignor or "uniform"
    expected = produce(bt, TOPIC, PARTITIONS, 10)
    extra = {"remote_assignor": assignor} if assignor else {}
    a, b, c = (ck_member(pool, bt, n, **extra) for n in "abc")
    view = wait_consumer_settled(bt, GROUP, TOPIC, [a, b, c])
    assert sorted(len(ps) for _, _, ps in view.members.values()) == [2, 2, 2]
    epochs = [check_described(bt, [a, b, c], expected_assignor).group_epoch]

    admin = AdminClient({"bootstrap.servers": bt.bootstrap})
    d = admin.describe_consumer_groups([GROUP], request_timeout=10)[GROUP].result()
    assert (d.type, d.state, d.partition_assignor, d.is_simple_consumer_group) == (
        ConsumerGroupType.CONSUMER,
        ConsumerGroupState.STABLE,
        expected_assignor,
        False,
    ), d
    described = {
        m.member_id: (
            m.client_id,
            sorted(tp.partition for tp in m.assignment.topic_partitions),
            sorted(tp.partition for tp in m.target_assignment.topic_partitions),
        )
        for m in d.members
    }
    assert described == {
        m.state["memberId"]: (f"ck-{m.name}", m.state["assignment"], m.state["assignment"]) for m in (a, b, c)
    }
    del admin

    freed = set(c.state["assignment"])  # type: ignore[index]
    c.close()
    wait_consumer_settled(bt, GROUP, TOPIC, [a, b])
    assert freed <= set(a.state["assignment"]) | set(b.state["assignment"])  # type: ignore[index]
    epochs.append(check_described(bt, [a, b], expected_assignor).group_epoch)

    b.kill()
    wait_consumer_settled(bt, GROUP, TOPIC, [a])  # after b's session timeout
    assert a.state["assignment"] == list(range(PARTITIONS))  # type: ignore[index]
    epochs.append(check_described(bt, [a], expected_assignor).group_epoch)
    assert epochs == sorted(set(epochs)), f"group epochs must increase: {epochs}"
    consumed_everything([a], expected)


# ---------------------------------------------------------------------------------- static membership


def static_group(bt, pool) -> dict[str, Member]:
    members = {}
    for name in ("s1", "s2", "s3"):
        members[name] = ck_member(pool, bt, name, instance_id=name)
    wait_consumer_settled(bt, GROUP, TOPIC, list(members.values()))
    return members


def wait_static_left(bt, member_id: str, timeout: float = 10) -> ConsumerGroupView:
    """Wait until the broker has ``member_id`` at epoch -2 (a static member that left)."""
    deadline = time.monotonic() + timeout
    while True:
        view = consumer_group_view(bt, GROUP, TOPIC)
        if view is not None and view.members.get(member_id, (None, None))[1] == -2:
            return view
        assert time.monotonic() < deadline, f"{member_id} did not leave with epoch -2: {view}"
        time.sleep(0.02)


def test_static_member_closed_and_restarted_keeps_everyone_s_epoch(static_bt, pool):
    """A static member that closes leaves with epoch -2: the group keeps its identity and assignment
    for the session timeout; the same instance id coming back takes it over (new member id, old
    epoch and partitions) without a new group epoch, so nobody else's epoch changes."""
    bt = static_bt
    members = static_group(bt, pool)
    before = describe(bt)
    old_id = members["s2"].state["memberId"]  # type: ignore[index]
    held = members["s2"].state["assignment"]  # type: ignore[index]
    others = [members["s1"], members["s3"]]
    marks = {m.name: m.mark() for m in others}

    members["s2"].close()
    left = wait_static_left(bt, old_id)
    assert left.members[old_id][2] == held, "a static member that left keeps its assignment"
    members["s2"] = ck_member(pool, bt, "s2", instance_id="s2")
    view = wait_consumer_settled(bt, GROUP, TOPIC, list(members.values()))

    after = describe(bt)
    new_id = view.member_of("s2")
    assert new_id != old_id
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    epochs_before = {m.instance_id: m.member_epoch for m in before.members}
    assert {m.instance_id: m.member_epoch for m in after.members} == epochs_before
    assert members["s2"].state["assignment"] == held  # type: ignore[index]
    for m in others:
        seen = [e for e in m.events_since(marks[m.name]) if e["event"] != "state"]
        assert seen == [], f"{m.name} saw {seen} while static member s2 restarted"
        m.commit()  # their epochs are still good for OffsetCommit
    check_described(bt, list(members.values()), "uniform")


def test_static_member_killed_is_not_replaced_within_its_session(static_bt, pool):
    """A killed static member sends no -2: as in Kafka (GroupMetadataManager
    .throwIfInstanceIdIsUnreleased) its instance id stays taken until its session times out, so a
    new process with that id is refused with UNRELEASED_INSTANCE_ID (fatal in librdkafka) and the
    group does not change; after the session timeout the dead member is fenced and the survivors
    share everything, and the instance id can join again."""
    bt = static_bt
    members = static_group(bt, pool)
    before = describe(bt)
    members["s2"].kill()
    again = ck_member(pool, bt, "s2-again", instance_id="s2", client_id="ck-s2")
    refused = again.wait_event("warning", lambda e: "instance ID is still used" in e["message"])
    assert "_FATAL" in refused["message"], refused
    now = describe(bt)
    assert (now.group_epoch, {m.member_id: m.member_epoch for m in now.members}) == (
        before.group_epoch,
        {m.member_id: m.member_epoch for m in before.members},
    ), "the refused join must not change the group"
    again.kill()

    survivors = [members["s1"], members["s3"]]
    wait_consumer_settled(bt, GROUP, TOPIC, survivors)  # the session timeout fenced s2
    assert describe(bt).group_epoch > before.group_epoch
    members["s2"] = ck_member(pool, bt, "s2", instance_id="s2")
    wait_consumer_settled(bt, GROUP, TOPIC, list(members.values()))
    check_described(bt, list(members.values()), "uniform")


# ---------------------------------------------------------------------------------- committed offsets


@pytest.mark.parametrize("restart", [False, True], ids=["same-broker", "after-restart"])
def test_new_member_resumes_at_committed_offsets(broker_factory, tmp_path: Path, pool, restart):
    data = tmp_path / "resume"

    def start(b, name, limit):
        return ck_member(pool, b, name, limit=limit)

    def restart_broker(b):
        b.stop()
        return broker_factory(BROKER_CONFIG, data_dir=data)

    resume_after_commit(
        lambda: broker_factory(BROKER_CONFIG, data_dir=data),
        restart_broker if restart else None,
        GROUP,
        TOPIC,
        start,
        wait_empty=wait_consumer_empty,
    )


# ---------------------------------------------------------------------------------- raw protocol


def join_request(group: str = GROUP, member_id: str | None = None, **fields) -> ConsumerGroupHeartbeatRequest:
    """A v1 join (epoch 0) unless ``fields`` say otherwise."""
    values = dict(
        group_id=group,
        member_id=member_id if member_id is not None else str(uuid.uuid4()),
        member_epoch=0,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=[TOPIC],
        topic_partitions=[],
    )
    values.update(fields)
    return ConsumerGroupHeartbeatRequest(**values)


def owned(topic_id, partitions) -> list[ConsumerGroupHeartbeatRequestTopicPartitions]:
    return [ConsumerGroupHeartbeatRequestTopicPartitions(topic_id, sorted(partitions))]


def classic_join_request(group: str, member_id: str, protocol_type: str) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group,
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=SESSION_MS,
        member_id=member_id,
        group_instance_id=None,
        protocol_type=protocol_type,
        protocols=[JoinGroupRequestProtocol("range", SUBSCRIPTION)],
        reason=None,
    )


def classic_join(conn: WireClient, group: str, protocol_type: str) -> str:
    """A classic member joins ``group`` with JoinGroup v9 (two steps); its member id."""
    first = conn.call(JOIN, 9, classic_join_request(group, "", protocol_type))
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED, first
    joined = conn.call(JOIN, 9, classic_join_request(group, first.member_id, protocol_type))
    assert joined.error_code == 0, joined
    return joined.member_id


def test_heartbeat_on_a_live_classic_group_of_another_protocol_is_group_id_not_found(bt):
    """Kafka refuses a ConsumerGroupHeartbeat for a classic group that does not use the consumer
    embedded protocol ("connect") with GROUP_ID_NOT_FOUND, whatever the migration policy."""
    with WireClient(bt.port) as classic, WireClient(bt.port) as c:
        classic_join(classic, "classic", "connect")
        r = c.call(HEARTBEAT, 1, join_request("classic"))
        assert r.error_code == ErrorCode.GROUP_ID_NOT_FOUND, r
        assert "classic" in (r.error_message or ""), r
        view = group_view(bt, "classic", TOPIC)
        assert view is not None and len(view.members) == 1, view
        assert consumer_group_view(bt, "classic", TOPIC) is None
        d = describe(bt, "classic")
        assert d.error_code == ErrorCode.GROUP_ID_NOT_FOUND, d


def test_heartbeat_on_a_live_classic_consumer_group_upgrades_it(bt):
    """A "consumer" classic group is upgraded online by the first ConsumerGroupHeartbeat join (Kafka
    4.x, group.consumer.migration.policy=bidirectional); a heartbeat that is not a join is refused."""
    with WireClient(bt.port) as classic, WireClient(bt.port) as c:
        member = classic_join(classic, "upgrading", "consumer")
        r = c.call(HEARTBEAT, 1, join_request("upgrading", member_epoch=3))
        assert r.error_code == ErrorCode.GROUP_ID_NOT_FOUND, r
        r0 = c.call(HEARTBEAT, 1, join_request("upgrading"))
        assert r0.error_code == 0, r0
        view = consumer_group_view(bt, "upgrading", TOPIC)
        assert view is not None and set(view.members) == {member, r0.member_id}, view
        assert group_view(bt, "upgrading", TOPIC) is None, "no classic group is left"


def test_join_group_on_a_live_consumer_group(bt):
    """JoinGroup for the id of a consumer group with members: a "connect" member gets
    INCONSISTENT_GROUP_PROTOCOL; a "consumer" classic member is admitted into the consumer group
    (Kafka 4.x online migration) and answered with its member epoch as the generation."""
    with WireClient(bt.port) as member, WireClient(bt.port) as classic:
        r = member.call(HEARTBEAT, 1, join_request())
        assert r.error_code == 0, r
        j = classic.call(JOIN, 9, classic_join_request(GROUP, "", "connect"))
        assert j.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL, j
        assert group_view(bt, GROUP, TOPIC) is None, "no classic group may appear"
        mid = classic_join(classic, GROUP, "consumer")
        assert group_view(bt, GROUP, TOPIC) is None, "still one consumer group"
        view = consumer_group_view(bt, GROUP, TOPIC)
        assert view is not None and set(view.members) == {r.member_id, mid}, view


def test_unsupported_assignor(bt):
    with WireClient(bt.port) as c:
        r = c.call(HEARTBEAT, 1, join_request(server_assignor="sticky"))
        assert (r.error_code, r.error_message) == (
            ErrorCode.UNSUPPORTED_ASSIGNOR,
            "ServerAssignor sticky is not supported. Supported assignors: uniform, range.",
        )
        assert consumer_group_view(bt, GROUP, TOPIC) is None, "a refused join creates no group"
        ok = c.call(HEARTBEAT, 1, join_request(server_assignor="range"))
        assert ok.error_code == 0, ok
        assert describe(bt).assignor_name == "range"


MEMBER = "5Jk3-KIP848-member-id"

INVALID = {
    # id: (version, request fields, message) as Kafka 4.x's throwIfConsumerGroupHeartbeatRequestIsInvalid
    "v1-no-member-id": (1, dict(member_id=""), "MemberId can't be empty."),
    "v1-no-member-id-no-group-id": (1, dict(member_id="", group_id=""), "MemberId can't be empty."),
    "v1-no-group-id": (1, dict(group_id=""), "GroupId can't be empty."),
    "v0-no-group-id": (0, dict(member_id="", group_id=""), "GroupId can't be empty."),
    "empty-instance-id": (1, dict(instance_id=""), "InstanceId can't be empty."),
    "empty-rack-id": (1, dict(rack_id=""), "RackId can't be empty."),
    "join-no-rebalance-timeout": (
        1,
        dict(rebalance_timeout_ms=-1),
        "RebalanceTimeoutMs must be provided in first request.",
    ),
    "join-null-owned": (1, dict(topic_partitions=None), "TopicPartitions must be empty when (re-)joining."),
    "join-owning": (
        1,
        dict(topic_partitions=owned(uuid.UUID(int=1), [0])),
        "TopicPartitions must be empty when (re-)joining.",
    ),
    # Kafka's wording differs between releases ("SubscribedTopicNames or SubscribedTopicRegex must
    # be set in first request." / "Either SubscribedTopicNames or SubscribedTopicRegex must be
    # non-null when (re-)joining."): the common part is checked
    "v1-join-no-subscription": (
        1,
        dict(subscribed_topic_names=None),
        "SubscribedTopicNames or SubscribedTopicRegex must be",
    ),
    "v0-join-no-subscription": (
        0,
        dict(member_id="", subscribed_topic_names=None),
        "SubscribedTopicNames or SubscribedTopicRegex must be",
    ),
    "static-leave-no-instance-id": (1, dict(member_epoch=-2), "InstanceId can't be null."),
    "epoch-below-minus-2": (1, dict(member_epoch=-3), "MemberEpoch is invalid."),
    "v0-heartbeat-no-member-id": (0, dict(member_id="", member_epoch=3), "MemberId can't be empty."),
    "v0-leave-no-member-id": (0, dict(member_id="", member_epoch=-1), "MemberId can't be empty."),
}


@pytest.mark.parametrize("version,fields,message", INVALID.values(), ids=INVALID.keys())
def test_invalid_request(bt, version, fields, message):
    """INVALID_REQUEST with Kafka's message; nothing is created."""
    fields = {"member_id": MEMBER, **fields}
    with WireClient(bt.port) as c:
        r = c.call(HEARTBEAT, version, join_request(**fields))
    assert r.error_code == ErrorCode.INVALID_REQUEST, r
    assert message in (r.error_message or ""), r.error_message
    assert consumer_group_view(bt, GROUP, TOPIC) is None


def two_members(c: WireClient):
    """Members A and B join; A gives up what the target takes from it and moves to epoch 2.
    Returns (A's id, B's id, topic id, A's partitions at epoch 2)."""
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    r = c.call(HEARTBEAT, 1, join_request(member_id=a))
    assert (r.error_code, r.member_epoch) == (0, 1), r
    [tp] = r.assignment.topic_partitions
    topic_id, everything = tp.topic_id, set(tp.partitions)
    assert everything == set(range(PARTITIONS))
    r = c.call(HEARTBEAT, 1, join_request(member_id=b))
    assert (r.error_code, r.member_epoch) == (0, 2), r
    r = c.call(
        HEARTBEAT, 1, join_request(member_id=a, member_epoch=1, topic_partitions=owned(topic_id, everything))
    )
    assert r.error_code == 0 and r.assignment is not None, r
    keep = set(parts(r.assignment))
    assert keep and keep < everything, r
    r = c.call(
        HEARTBEAT, 1, join_request(member_id=a, member_epoch=1, topic_partitions=owned(topic_id, keep))
    )
    assert (r.error_code, r.member_epoch) == (0, 2), r
    return a, b, topic_id, keep


def test_fenced_member_epoch(bt):
    """FENCED_MEMBER_EPOCH for an epoch ahead of the member's, and for its previous epoch when the
    partitions it says it owns are not part of its assignment; the previous epoch with owned
    partitions inside its assignment is accepted (a lost response)."""
    with WireClient(bt.port) as c:
        a, b, topic_id, keep = two_members(c)
        lost = c.call(
            HEARTBEAT, 1, join_request(member_id=a, member_epoch=1, topic_partitions=owned(topic_id, keep))
        )
        assert (lost.error_code, lost.member_epoch) == (0, 2), lost
        ahead = c.call(HEARTBEAT, 1, join_request(member_id=b, member_epoch=7, topic_partitions=None))
        assert ahead.error_code == ErrorCode.FENCED_MEMBER_EPOCH, ahead
        behind = c.call(
            HEARTBEAT,
            1,
            join_request(member_id=a, member_epoch=1, topic_partitions=owned(topic_id, range(PARTITIONS))),
        )
        assert behind.error_code == ErrorCode.FENCED_MEMBER_EPOCH, behind


def test_fenced_member_epoch_changes_nothing(bt):
    """In Kafka the epoch check throws before any record is produced
    (throwIfConsumerGroupMemberEpochIsInvalid): the fenced member stays in the group with its epoch
    and assignment until it rejoins with epoch 0 or its session times out, and the group epoch does
    not move, so the other members are not rebalanced by someone else's stale heartbeat."""
    with WireClient(bt.port) as c:
        a, b, topic_id, keep = two_members(c)
        before = describe(bt)
        r = c.call(HEARTBEAT, 1, join_request(member_id=b, member_epoch=7, topic_partitions=None))
        assert r.error_code == ErrorCode.FENCED_MEMBER_EPOCH, r
        after = describe(bt)
        assert (after.group_epoch, {m.member_id: m.member_epoch for m in after.members}) == (
            before.group_epoch,
            {m.member_id: m.member_epoch for m in before.members},
        ), "a FENCED_MEMBER_EPOCH answer must not change the group"
