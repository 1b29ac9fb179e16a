"""KIP-848 consumer groups (group.protocol=consumer) with the Java consumer and Admin (kafka-clients
3.9: ConsumerGroupHeartbeat v0, the broker makes member ids; ConsumerGroupDescribe v0).

Each member is one JVM running tests/java/GroupProbe.java with group.protocol=consumer (its
"generation" is then the member epoch from groupMetadata()), so a member can be SIGKILLed. The group
is checked three ways: by the clients' assignments, by Admin.describeConsumerGroups (which in 3.9
sends ConsumerGroupDescribe when the broker offers it: type CONSUMER and target assignments only
come from there), and by ConsumerGroupDescribe sent with the client's own request classes
(AdminProbe consumer-group-describe), for the epochs Admin 3.9 does not expose. Scenarios:

- three members on a 6-partition topic get disjoint, complete assignments; one closes and the
  other two take its partitions; one is killed and after the session timeout the survivor owns
  everything (group.remote.assignor uniform and range);
- a static member closed and restarted within the session timeout takes its identity back without
  anybody's epoch changing; a killed one is not replaced while its session lasts
  (UnreleasedInstanceIdException, as with Kafka), then it is fenced and the others rebalance;
- committed offsets: a new member resumes exactly where the last one committed, also after a
  broker restart on the same data directory.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.groups import (
    PARTITIONS,
    ConsumerGroupView,
    Member,
    MemberPool,
    consumed_everything,
    consumer_group_view,
    produce,
    resume_after_commit,
    wait_consumer_empty,
    wait_consumer_settled,
)
from tests.support.java import Java, json_lines, require_java

pytestmark = [pytest.mark.java, pytest.mark.usefixtures("java_clients")]

TOPIC = "orders"
GROUP = "g"
#: a killed member is noticed after SESSION_MS; a closed static member must be back within
#: STATIC_SESSION_MS (a JVM start) and a killed one is fenced after it
SESSION_MS = 6000
STATIC_SESSION_MS = 10000
BROKER_CONFIG = {
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.heartbeat.interval.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}


def java_member(pool: MemberPool, java: Java, bt, name: str, **props) -> Member:
    config = {"group.protocol": "consumer", "client.id": f"java-{name}"}
    config.update(props)
    return pool.java(java, name, bt.bootstrap, GROUP, TOPIC, **config)


def admin(java: Java, bt, *commands: str) -> list[dict]:
    result = java.run("AdminProbe", [bt.bootstrap, *commands], timeout=60)
    lines = json_lines(result.stdout)
    assert [line["cmd"] for line in lines] == [c.split()[0] for c in commands], result
    failed = [line for line in lines if "error" in line]
    assert not failed, f"{failed}\nstderr:\n{result.stderr[-3000:]}"
    return lines


def tp(p: int) -> str:
    return f"{TOPIC}-{p}"


def check_described(java: Java, bt, members: list[Member], assignor: str) -> dict:
    """Admin.describeConsumerGroups and ConsumerGroupDescribe agree with the clients: the group is
    Stable, a CONSUMER group with the assignor asked for; every member is at the group epoch, holds
    what its client holds and has it as its target. Returns the raw description."""
    described, raw = admin(java, bt, f"describe-groups {GROUP}", f"consumer-group-describe {GROUP}")
    clients = {m.state["memberId"]: m for m in members}  # type: ignore[index]

    d = described["groups"][GROUP]
    assert (d["state"], d["type"], d["simple"], d["assignor"], d["coordinator"]) == (
        "Stable",
        "Consumer",  # GroupType.CONSUMER.toString()
        False,
        assignor,
        1,
    ), d
    assert {m["memberId"] for m in d["members"]} == set(clients)
    for m in d["members"]:
        client = clients[m["memberId"]]
        held = [tp(p) for p in client.state["assignment"]]  # type: ignore[index]
        assert (m["clientId"], m["host"], m["assignment"], m.get("targetAssignment")) == (
            f"java-{client.name}",
            "/127.0.0.1",
            held,
            held,
        ), m

    assert raw["version"] == (0 if java.version == "3.9" else 1), raw  # the newest the client has
    g = raw["groups"][GROUP]
    assert (g["error"], g["state"], g["assignor"]) == ("NONE", "Stable", assignor), g
    assert g["assignmentEpoch"] == g["groupEpoch"]
    assert {m["memberId"] for m in g["members"]} == set(clients)
    for m in g["members"]:
        client = clients[m["memberId"]]
        held = [tp(p) for p in client.state["assignment"]]  # type: ignore[index]
        assert m["memberEpoch"] == g["groupEpoch"] == client.state["generation"], (m, client.state)  # type: ignore[index]
        assert (m["assignment"], m["targetAssignment"], m["subscribedTopicNames"]) == (held, held, [TOPIC]), m
        assert (m["clientId"], m["clientHost"]) == (f"java-{client.name}", "/127.0.0.1"), m
    return g


# ---------------------------------------------------------------------------------- rebalancing


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_members_share_leave_and_die(bt, pool, assignor):
    java = require_java()
    expected = produce(bt, TOPIC, PARTITIONS, 10)
    a, b, c = (java_member(pool, java, bt, n, **{"group.remote.assignor": assignor}) for n in "abc")
    view = wait_consumer_settled(bt, GROUP, TOPIC, [a, b, c])
    assert sorted(len(ps) for _, _, ps in view.members.values()) == [2, 2, 2]
    epochs = [check_described(java, bt, [a, b, c], assignor)["groupEpoch"]]

    freed = set(c.state["assignment"])  # type: ignore[index]
    c.close()
    wait_consumer_settled(bt, GROUP, TOPIC, [a, b])
    assert freed <= set(a.state["assignment"]) | set(b.state["assignment"])  # type: ignore[index]
    epochs.append(check_described(java, bt, [a, b], assignor)["groupEpoch"])

    b.kill()
    wait_consumer_settled(bt, GROUP, TOPIC, [a])  # after b's session timeout
    assert a.state["assignment"] == list(range(PARTITIONS))  # type: ignore[index]
    epochs.append(check_described(java, bt, [a], assignor)["groupEpoch"])
    assert epochs == sorted(set(epochs)), f"group epochs must increase: {epochs}"
    consumed_everything([a], expected)


# ---------------------------------------------------------------------------------- static membership


def static_group(java: Java, bt, pool) -> dict[str, Member]:
    members = {}
    for name in ("s1", "s2", "s3"):
        members[name] = java_member(pool, java, bt, name, **{"group.instance.id": name})
    wait_consumer_settled(bt, GROUP, TOPIC, list(members.values()))
    return members


def epochs_by_instance(raw: dict) -> dict[str, int]:
    return {m["instanceId"]: m["memberEpoch"] for m in raw["members"]}


def wait_static_left(bt, member_id: str, timeout: float = 15) -> ConsumerGroupView:
    deadline = time.monotonic() + timeout
    while True:
        view = consumer_group_view(bt, GROUP, TOPIC)
        if view is not None and view.members.get(member_id, (None, None))[1] == -2:
            return view
        assert time.monotonic() < deadline, f"{member_id} did not leave with epoch -2: {view}"
        time.sleep(0.02)


def test_static_member_closed_and_restarted_keeps_everyone_s_epoch(static_bt, pool):
    """KafkaConsumer.close() of a static member sends epoch -2; a new JVM with the same
    group.instance.id within the session timeout gets a new member id but the old epoch and
    assignment, and the group epoch and every other member's epoch stay as they were."""
    bt = static_bt
    java = require_java()
    members = static_group(java, bt, pool)
    before = check_described(java, bt, list(members.values()), "uniform")
    old_id = members["s2"].state["memberId"]  # type: ignore[index]
    held = members["s2"].state["assignment"]  # type: ignore[index]
    others = [members["s1"], members["s3"]]
    marks = {m.name: m.mark() for m in others}

    members["s2"].close()
    left = wait_static_left(bt, old_id)
    assert left.members[old_id][2] == held, "a static member that left keeps its assignment"
    members["s2"] = java_member(pool, java, bt, "s2", **{"group.instance.id": "s2"})
    view = wait_consumer_settled(bt, GROUP, TOPIC, list(members.values()))
    assert view.member_of("s2") != old_id
    assert members["s2"].state["assignment"] == held  # type: ignore[index]

    after = check_described(java, bt, list(members.values()), "uniform")
    assert (after["groupEpoch"], after["assignmentEpoch"]) == (
        before["groupEpoch"],
        before["assignmentEpoch"],
    )
    assert epochs_by_instance(after) == epochs_by_instance(before)
    for m in others:
        seen = [e for e in m.events_since(marks[m.name]) if e["event"] != "state"]
        assert seen == [], f"{m.name} saw {seen} while static member s2 restarted"
        m.commit()


def test_static_member_killed_is_not_replaced_within_its_session(static_bt, pool):
    """A SIGKILLed static member sends no -2, so (as in Kafka) its instance id stays taken until its
    session times out: a new JVM with that id fails with UnreleasedInstanceIdException (fatal in
    the 3.9 client) and the group does not change. After the session timeout the dead member is
    fenced, the survivors share everything, and the instance id can join again."""
    bt = static_bt
    java = require_java()
    members = static_group(java, bt, pool)
    before = check_described(java, bt, list(members.values()), "uniform")
    members["s2"].kill()

    again = java_member(pool, java, bt, "s2-again", **{"group.instance.id": "s2", "client.id": "java-s2"})
    again.proc.wait(60)
    errors = [e for e in again.events if e["event"] == "error"]
    assert [e["class"] for e in errors] == ["org.apache.kafka.common.errors.UnreleasedInstanceIdException"], (
        again.describe()
    )
    [raw] = admin(java, bt, f"consumer-group-describe {GROUP}")
    now = raw["groups"][GROUP]
    assert (now["groupEpoch"], epochs_by_instance(now)) == (
        before["groupEpoch"],
        epochs_by_instance(before),
    ), "the refused join must not change the group"

    survivors = [members["s1"], members["s3"]]
    wait_consumer_settled(bt, GROUP, TOPIC, survivors)  # the session timeout fenced s2
    members["s2"] = java_member(pool, java, bt, "s2", **{"group.instance.id": "s2"})
    wait_consumer_settled(bt, GROUP, TOPIC, list(members.values()))
    assert check_described(java, bt, list(members.values()), "uniform")["groupEpoch"] > before["groupEpoch"]


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
        return broker_factory(BROKER_CONFIG, data_dir=data)

    resume_after_commit(
        lambda: broker_factory(BROKER_CONFIG, data_dir=data),
        restart_broker if restart else None,
        GROUP,
        TOPIC,
        start,
        wait_empty=wait_consumer_empty,
    )
