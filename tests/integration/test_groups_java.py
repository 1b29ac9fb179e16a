"""Consumer groups (the classic protocol) with the Java consumer and Admin (kafka-clients 3.9).

Each member is one JVM running tests/java/GroupProbe.java (the same line protocol as the Python
members, see tests/support/groups.py), so a member can be SIGKILLed; the generation each member
reports comes from KafkaConsumer.groupMetadata(). Administration goes through the group commands of
tests/java/AdminProbe.java.
"""

from __future__ import annotations

from pathlib import Path

import pytest

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
from tests.support.java import Java, json_lines, require_java

pytestmark = [pytest.mark.java, pytest.mark.usefixtures("java_clients")]

BROKER_CONFIG = GROUP_CONFIG
TOPIC = "orders"
GROUP = "g"
RANGE = "org.apache.kafka.clients.consumer.RangeAssignor"
COOPERATIVE = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
#: kill detection waits for this; heartbeats every HEARTBEAT_MS keep live members well inside it
SESSION_MS = 2000
HEARTBEAT_MS = 200
#: static members must be restarted within their session timeout
STATIC_SESSION_MS = 10000


def java_member(pool: MemberPool, java: Java, bt, name: str, group: str = GROUP, **props):
    config = {
        "client.id": f"java-{name}",
        "session.timeout.ms": SESSION_MS,
        "heartbeat.interval.ms": HEARTBEAT_MS,
        "max.poll.interval.ms": 30000,
        "partition.assignment.strategy": RANGE,
    }
    config.update(props)
    return pool.java(java, name, bt.bootstrap, group, TOPIC, **config)


# ---------------------------------------------------------------------------------- rebalancing


@pytest.mark.parametrize("assignor", [RANGE, COOPERATIVE], ids=["range", "cooperative-sticky"])
def test_members_share_leave_join_and_die(bt, pool, assignor):
    java = require_java()
    views = lifecycle(
        bt,
        GROUP,
        TOPIC,
        lambda n: java_member(pool, java, bt, n, **{"partition.assignment.strategy": assignor}),
    )
    assert {v.protocol for v in views} == {"range" if assignor == RANGE else "cooperative-sticky"}


# ---------------------------------------------------------------------------------- committed offsets


@pytest.mark.parametrize("restart", [False, True], ids=["same-broker", "after-restart"])
def test_new_member_resumes_at_committed_offsets(broker_factory, tmp_path: Path, pool, restart):
    java = require_java()
    data = tmp_path / "resume"

    def start(b, name, limit):
        extra = {} if limit is None else {"probe.limit": limit}
        return java_member(pool, java, b, name, **extra)

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
    "role,how",
    [("newest", "kill"), ("follower", "kill"), ("leader", "close"), ("leader", "kill")],
    ids=lambda v: v,
)
def test_static_member_restart_keeps_generation(bt, pool, role, how):
    """The Java client sends JoinGroup v9: a returning static leader gets SkipAssignment and keeps
    the group's assignment; groupMetadata().generationId() of every member stays the same.

    Its subscription (ConsumerProtocolSubscription v3) carries the generation of the member's last
    join, so a restarted instance (generation -1) sends other bytes than its predecessor did unless
    that predecessor never rejoined ("newest")."""
    java = require_java()

    def start(name):
        return java_member(
            pool, java, bt, name, **{"group.instance.id": name, "session.timeout.ms": STATIC_SESSION_MS}
        )

    static_restart(bt, GROUP, TOPIC, start, role, how)


# ---------------------------------------------------------------------------------- administration


def admin(java: Java, bt, *commands: str) -> list[dict]:
    result = java.run("AdminProbe", [bt.bootstrap, *commands], timeout=60)
    lines = json_lines(result.stdout)
    assert [line["cmd"] for line in lines] == [c.split()[0] for c in commands], result
    failed = [line for line in lines if "error" in line]
    assert not failed, f"{failed}\nstderr:\n{result.stderr[-3000:]}"
    return lines


def test_java_admin_groups(bt, pool):
    java = require_java()
    produce(bt, TOPIC, PARTITIONS, 10)
    active = java_member(
        pool, java, bt, "active", group="active", **{"session.timeout.ms": STATIC_SESSION_MS}
    )
    wait_settled(bt, "active", TOPIC, [active])
    active.wait_records(60)
    active.commit()
    idle = java_member(
        pool, java, bt, "idle", group="idle", **{"probe.limit": 7, "session.timeout.ms": STATIC_SESSION_MS}
    )
    idle.wait_event("limit")
    idle_offsets = idle.commit()
    idle.close()

    def tp(p: int) -> str:
        return f"{TOPIC}-{p}"

    listed, described, offsets_active, offsets_idle = admin(
        java,
        bt,
        "list-groups",
        "describe-groups active,idle,nope",
        "group-offsets active",
        "group-offsets idle",
    )
    groups = {g["groupId"]: g for g in listed["groups"]}
    assert set(groups) == {"active", "idle"}
    assert (groups["active"]["state"], groups["active"]["simple"]) == ("Stable", False)
    assert groups["idle"]["state"] == "Empty"

    a = described["groups"]["active"]
    assert (a["state"], a["simple"], a["assignor"], a["coordinator"]) == ("Stable", False, "range", 1)
    assert a["members"] == [
        {
            "memberId": active.state["memberId"],
            "instanceId": None,
            "clientId": "java-active",
            "host": "/127.0.0.1",
            "assignment": [tp(p) for p in range(PARTITIONS)],
        }
    ]
    assert (described["groups"]["idle"]["state"], described["groups"]["idle"]["members"]) == ("Empty", [])
    nope = described["groups"]["nope"]
    if java.version == "3.9":
        # DescribeGroups below v6 (the 3.9 client's newest) answers an unknown group as Dead, no error
        assert (nope["state"], nope["members"]) == ("Dead", []), nope
    else:
        # the 4.x Admin asks ConsumerGroupDescribe, then DescribeGroups v6: GROUP_ID_NOT_FOUND (KIP-1043)
        assert nope == {"error": "org.apache.kafka.common.errors.GroupIdNotFoundException"}, nope
    assert offsets_active["offsets"] == {tp(p): 10 for p in range(PARTITIONS)}
    assert offsets_idle["offsets"] == {tp(p): off for p, off in idle_offsets.items()}

    subscribed = "org.apache.kafka.common.errors.GroupSubscribedToTopicException"
    del_active, del_idle, altered, after = admin(
        java,
        bt,
        f"delete-group-offsets active {TOPIC}:0",
        f"delete-group-offsets idle {TOPIC}:0,{TOPIC}:1",
        f"alter-group-offsets idle {TOPIC}:2=4",
        "group-offsets idle",
    )
    assert (del_active["partitions"], del_active["all"]) == ({tp(0): subscribed}, subscribed)
    assert (del_idle["partitions"], del_idle["all"]) == ({tp(0): None, tp(1): None}, None)
    assert (altered["partitions"], altered["all"]) == ({tp(2): None}, None)
    expected_idle = {tp(p): off for p, off in idle_offsets.items() if p not in (0, 1)}
    assert after["offsets"] == {**expected_idle, tp(2): 4}

    deleted, listed, offsets_idle, offsets_active, described = admin(
        java,
        bt,
        "delete-groups active,idle,nope",
        "list-groups",
        "group-offsets idle",
        "group-offsets active",
        "describe-groups idle",
    )
    assert deleted["results"] == {
        "active": "org.apache.kafka.common.errors.GroupNotEmptyException",
        "idle": None,
        "nope": "org.apache.kafka.common.errors.GroupIdNotFoundException",
    }
    assert [g["groupId"] for g in listed["groups"]] == ["active"]
    assert offsets_idle["offsets"] == {}
    assert offsets_active["offsets"] == {tp(p): 10 for p in range(PARTITIONS)}
    if java.version == "3.9":
        assert (described["groups"]["idle"]["state"], described["groups"]["idle"]["members"]) == ("Dead", [])
    else:  # a deleted group is an unknown one (KIP-1043, as above)
        assert described["groups"]["idle"] == {
            "error": "org.apache.kafka.common.errors.GroupIdNotFoundException"
        }
    assert group_view(bt, "idle", TOPIC) is None

    active.close()
    wait_state(bt, "active", TOPIC, "Empty")
    deleted, listed = admin(java, bt, "delete-groups active", "list-groups")
    assert deleted["results"] == {"active": None}
    assert listed["groups"] == []
    assert bt.call(lambda: dict(bt.broker.groups.state.offsets)) == {}


def test_java_admin_emptied_group_is_still_a_consumer_group(bt, pool):
    """Kafka keeps an emptied group's protocol type ("consumer"): the Java Admin lists and describes
    it as a consumer group, not a simple one (isSimpleConsumerGroup is protocolType.isEmpty())."""
    java = require_java()
    member = java_member(pool, java, bt, "m", **{"session.timeout.ms": STATIC_SESSION_MS})
    wait_settled(bt, GROUP, TOPIC, [member])
    member.commit()
    member.close()
    wait_state(bt, GROUP, TOPIC, "Empty")
    listed, described = admin(java, bt, "list-groups", f"describe-groups {GROUP}")
    [g] = listed["groups"]
    d = described["groups"][GROUP]
    assert (g["state"], d["state"]) == ("Empty", "Empty")
    assert (g["simple"], d["simple"]) == (False, False), (g, d)
