"""The coordinator failure points of the design documents with real clients, where what the client
does is observable (the wire-level and state-machine forms: tests/server/test_cluster_failover.py,
tests/coordinator/test_failover.py).

(a) The coordinator moves while a JoinGroup is parked. The 0.9 consumer design: the old coordinator
    answers NOT_COORDINATOR, the member rediscovers the coordinator (FindCoordinator) and joins
    there; the new coordinator, which loaded the group from the log (the persisted generation and
    its member), completes the rebalance once every member has rejoined. Here: member A is settled
    and then stopped (SIGSTOP, so the rebalance waits for it), member B joins and is parked, the
    coordinator moves, then A resumes: it finds its coordinator gone (NOT_COORDINATOR on its
    heartbeat), rediscovers it and rejoins; both settle in the next generation. Each client's
    requests are read back from the trace journal.
(d) The SyncGroup answer of one member is lost (a fault rule drops it) after the assignment is
    persisted, and the coordinator moves. The new coordinator has the generation with both members;
    the member without its answer waits for it until its request times out (the connection stays
    up, as when Kafka moves a coordinator partition's leadership), and by then its session at the
    new coordinator has expired: it rejoins at the old node (NOT_COORDINATOR), rediscovers the
    coordinator, is UNKNOWN_MEMBER_ID there and joins afresh; the group settles in a later
    generation with both members. (Session and rebalance timeouts are short here for that.)
"""

from __future__ import annotations

import json
import signal
import time

import pytest

from tests.support.groups import GROUP_CONFIG, MemberPool, group_view, wait_settled

TOPIC = "events"
PARTITIONS = 6
GIVE_UP_S = 90
CLIENTS = ["confluent", "kafka-python"]


@pytest.fixture
def pool():
    p = MemberPool()
    yield p
    p.cleanup()


def start(broker_factory, tmp_path):
    bt = broker_factory({**GROUP_CONFIG, "cluster.nodes": 3})
    bt.call(bt.broker.create_topic, TOPIC, PARTITIONS, None, False, False, 3)
    journal = tmp_path / "trace.jsonl"
    bt.control.start_trace(str(journal))
    return bt, journal


def member(pool, bt, client: str, name: str, group: str, session_ms: int = 30000, **cfg):
    boot = ",".join(f"{h}:{p}" for h, p in bt.broker.addresses())
    return pool.python(
        name,
        client=client,
        bootstrap=boot,
        group=group,
        topic=TOPIC,
        client_id=name,
        session_ms=session_ms,
        heartbeat_ms=300,
        **cfg,
    )


def requests_of(journal, client_id: str) -> list[tuple[str, list[str]]]:
    """(api, error names) of every request the client sent, in order."""
    out = []
    for line in journal.read_text().splitlines():
        e = json.loads(line)
        if e.get("client_id") == client_id and "api" in e:
            out.append((e["api"], [x["name"] for x in e.get("errors") or []]))
    return out


def compact(requests: list[tuple[str, list[str]]]) -> str:
    """The group requests of a client, errors in brackets, repeats counted (for the report)."""
    out: list[list] = []
    for api, errors in requests:
        if api in ("Fetch", "Metadata", "ApiVersions", "ListOffsets", "OffsetForLeaderEpoch"):
            continue
        text = api + (f"[{','.join(errors)}]" if errors else "")
        if out and out[-1][0] == text:
            out[-1][1] += 1
        else:
            out.append([text, 1])
    return " ".join(t if n == 1 else f"{t}x{n}" for t, n in out)


@pytest.mark.parametrize("client", CLIENTS)
def test_a_parked_join_is_answered_not_coordinator_and_the_client_rejoins_at_the_new_one(
    broker_factory, tmp_path, pool, client
):
    bt, journal = start(broker_factory, tmp_path)
    group = f"a-{client}"
    a = member(pool, bt, client, f"{client}-a", group)
    settled = wait_settled(bt, group, TOPIC, [a], PARTITIONS, timeout=GIVE_UP_S)
    a.proc.send_signal(signal.SIGSTOP)
    try:
        b = member(pool, bt, client, f"{client}-b", group)
        deadline = time.monotonic() + GIVE_UP_S  # loop guard: B's JoinGroup is parked
        while True:
            view = group_view(bt, group, TOPIC)
            if view is not None and view.state == "PreparingRebalance" and len(view.members) == 2:
                break
            assert time.monotonic() < deadline and b.alive, f"B never parked: {view}\n{b.describe()}"
            time.sleep(0.02)
        moved = bt.control.move_coordinator(group)
        assert moved["from"] != moved["to"]
        # the new coordinator has the persisted generation and its one member, and B's join again
        deadline = time.monotonic() + GIVE_UP_S
        while not any(
            api == "JoinGroup" and "NOT_COORDINATOR" in errors for api, errors in requests_of(journal, b.name)
        ):
            assert time.monotonic() < deadline, requests_of(journal, b.name)
            time.sleep(0.05)
    finally:
        a.proc.send_signal(signal.SIGCONT)
    view = wait_settled(bt, group, TOPIC, [a, b], PARTITIONS, timeout=GIVE_UP_S)
    assert view.generation > settled.generation
    # B: its parked JoinGroup answered NOT_COORDINATOR, then it looked the coordinator up and joined
    b_requests = requests_of(journal, b.name)
    refused = next(
        i for i, (api, errors) in enumerate(b_requests) if api == "JoinGroup" and "NOT_COORDINATOR" in errors
    )
    after = [api for api, _ in b_requests[refused + 1 :]]
    assert "FindCoordinator" in after and "JoinGroup" in after[after.index("FindCoordinator") :], b_requests
    # A: stopped through the move; back, it is told NOT_COORDINATOR, rediscovers and rejoins
    a_after = requests_of(journal, a.name)
    told = next(i for i, (_api, errors) in enumerate(a_after) if "NOT_COORDINATOR" in errors)
    rest = [api for api, _ in a_after[told + 1 :]]
    assert "FindCoordinator" in rest and "JoinGroup" in rest[rest.index("FindCoordinator") :], a_after
    a.close()
    b.close()


@pytest.mark.parametrize("client", CLIENTS)
def test_d_a_lost_sync_answer_then_a_move_and_the_member_rejoins(broker_factory, tmp_path, pool, client):
    bt, journal = start(broker_factory, tmp_path)
    group = f"d-{client}"
    short = {"session_ms": 6000, "max_poll_ms": 8000}
    a = member(pool, bt, client, f"{client}-a", group, **short)
    first = wait_settled(bt, group, TOPIC, [a], PARTITIONS, timeout=GIVE_UP_S)
    # B's join rebalances the group; the next SyncGroup answer B would get is dropped (the
    # assignment is persisted by then: the leader's SyncGroup completes the generation)
    rule = bt.control.add_rule(api="SyncGroup", client_id=f"{client}-b", drop=True, times=1)
    b = member(pool, bt, client, f"{client}-b", group, **short)
    deadline = time.monotonic() + GIVE_UP_S
    while not any(api == "SyncGroup" for api, _ in requests_of(journal, b.name)):
        assert time.monotonic() < deadline and b.alive, b.describe()
        time.sleep(0.05)
    moved = bt.control.move_coordinator(group)
    assert moved["from"] != moved["to"], rule
    view = wait_settled(bt, group, TOPIC, [a, b], PARTITIONS, timeout=GIVE_UP_S)
    assert view.generation > first.generation
    b_requests = requests_of(journal, b.name)
    synced = next(i for i, (api, _) in enumerate(b_requests) if api == "SyncGroup")
    after = [
        (api, errors) for api, errors in b_requests[synced + 1 :] if api in ("JoinGroup", "FindCoordinator")
    ]
    # it rediscovers the coordinator: after a JoinGroup the old node answers NOT_COORDINATOR, or
    # straight away (librdkafka does either, as its coordinator query timer falls), then takes its
    # place on the new coordinator: a JoinGroup, or its SyncGroup retried there (the generation it
    # joined moved with the group), the last of them answered without an error
    assert after and after[0] in (("JoinGroup", ["NOT_COORDINATOR"]), ("FindCoordinator", [])), b_requests
    assert ("FindCoordinator", []) in after, b_requests
    found = max(i for i, (api, errors) in enumerate(b_requests) if (api, errors) == ("FindCoordinator", []))
    rejoined = [(api, errors) for api, errors in b_requests[found + 1 :] if api in ("JoinGroup", "SyncGroup")]
    assert rejoined and rejoined[-1][1] == [], b_requests
    print(
        f"\n{client} B: {compact(requests_of(journal, b.name))}\n{client} A: {compact(requests_of(journal, a.name))}"
    )
    a.close()
    b.close()


def test_classic_member_of_a_consumer_group_through_a_coordinator_move(broker_factory, tmp_path, pool):
    """A KIP-848 group with a classic member (online migration: a confluent-kafka
    ``group.protocol=consumer`` member and a kafka-python classic one). Its classic member's
    requests are answered at once here (nothing parks), so a move leaves it nothing in flight: it
    is told NOT_COORDINATOR at the old node, rediscovers the coordinator and heartbeats on there;
    the group epoch and every member epoch stay as they were (the move rebalanced nobody)."""
    bt, journal = start(broker_factory, tmp_path)
    group = "mixed"
    boot = ",".join(f"{h}:{p}" for h, p in bt.broker.addresses())
    modern = pool.python(
        "ck-consumer",
        client="confluent",
        protocol="consumer",
        bootstrap=boot,
        group=group,
        topic=TOPIC,
        client_id="ck-consumer",
    )
    classic = member(pool, bt, "kafka-python", "kp-classic", group)

    def settled_epochs():
        try:
            g = bt.control.group(group)
        except KeyError:  # not there yet (NotFound)
            return None
        if g.get("type") != "consumer" or len(g["members"]) != 2:
            return None
        epochs = {m["client_id"]: m["member_epoch"] for m in g["members"]}
        owned = sorted(p for m in g["members"] for p in m["assignment"].get(TOPIC, []))
        if set(epochs.values()) != {g["group_epoch"]} or owned != list(range(PARTITIONS)):
            return None
        return g["group_epoch"], epochs

    deadline = time.monotonic() + GIVE_UP_S
    while (before := settled_epochs()) is None:
        assert time.monotonic() < deadline and modern.alive and classic.alive, (
            modern.describe(),
            classic.describe(),
        )
        time.sleep(0.1)
    mark = len(requests_of(journal, "kp-classic"))
    moved = bt.control.move_coordinator(group)
    assert moved["from"] != moved["to"]
    deadline = time.monotonic() + GIVE_UP_S
    while True:  # the classic member found its coordinator gone, looked it up, and heartbeats on
        seq = requests_of(journal, "kp-classic")[mark:]
        told = [i for i, (_api, errors) in enumerate(seq) if "NOT_COORDINATOR" in errors]
        if told and ("Heartbeat", []) in seq[told[0] + 1 :]:
            break
        assert time.monotonic() < deadline, seq
        time.sleep(0.1)
    assert "FindCoordinator" in [api for api, _ in seq[told[0] + 1 :]], seq
    assert settled_epochs() == before
    modern.close()
    classic.close()
