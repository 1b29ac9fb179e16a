"""Behaviour-level differential tests: scripted group scenarios run step by step against pykbroker
and Apache Kafka, each member on its own connection, comparing per step the error codes,
generations or epochs, states, leaders (member ids aliased in order of appearance: ``<member 1>``...)
and assignments. Classic groups (joins, syncs, heartbeats, leaves, static members, KIP-814, offsets)
and KIP-848 consumer groups (uniform and range assignors). Kafka is right unless
tests/differential/allowed.py gives a reason."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from broker.protocol.generated.consumer_group_describe import ConsumerGroupDescribeRequest
from broker.protocol.generated.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatRequestTopicPartitions,
)
from broker.protocol.generated.describe_groups import DescribeGroupsRequest
from broker.protocol.generated.heartbeat import HeartbeatRequest
from broker.protocol.generated.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from broker.protocol.generated.leave_group import LeaveGroupRequest, MemberIdentity
from broker.protocol.generated.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.generated.offset_fetch import OffsetFetchRequest, OffsetFetchRequestGroup
from broker.protocol.generated.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from tests.differential import tally
from tests.differential.allowed import allowed_by
from tests.differential.corpus import ASSIGNMENT, SUBSCRIPTION, Names, create
from tests.differential.engine import Peer, Step, api_name, run_case

# ============================================================================= classic group steps


def _remember(m: str) -> Callable[[Any, dict], None]:
    def f(resp: Any, mem: dict) -> None:
        if resp.member_id:
            mem[f"{m}.member"] = resp.member_id
        mem[f"{m}.gen"] = resp.generation_id
        if resp.error_code == 0:
            mem.setdefault("members", {})[m] = resp.member_id

    return f


def join(m: str, g: str, conn: int, v: int = 5, instance: str | None = None, mode: str = "call") -> Step:
    def body(p: Peer) -> JoinGroupRequest:
        protos = [JoinGroupRequestProtocol("range", SUBSCRIPTION)]
        return JoinGroupRequest(
            g, 10000, 30000, p.memory.get(f"{m}.member", ""), instance, "consumer", protos, None
        )

    return Step(11, v, body, remember=_remember(m), conn=conn, mode=mode, label=f"{m} joins")


def recv_join(m: str, conn: int, v: int = 5) -> Step:
    return Step(11, v, None, conn=conn, mode="recv", label=f"{m}'s join answered")


def sync(m: str, g: str, conn: int, v: int = 3, leader: bool = False) -> Step:
    def body(p: Peer) -> SyncGroupRequest:
        assignments = []
        if leader:
            assignments = [
                SyncGroupRequestAssignment(mid, ASSIGNMENT) for mid in p.memory.get("members", {}).values()
            ]
        return SyncGroupRequest(
            g, p.memory[f"{m}.gen"], p.memory[f"{m}.member"], None, "consumer", "range", assignments
        )

    return Step(14, v, body, conn=conn, label=f"{m} syncs")


def hb(m: str, g: str, conn: int, v: int = 3, member: str | None = None) -> Step:
    def body(p: Peer) -> HeartbeatRequest:
        return HeartbeatRequest(g, p.memory[f"{m}.gen"], member or p.memory[f"{m}.member"], None)

    return Step(12, v, body, conn=conn, label=f"{m} heartbeats")


def leave(m: str, g: str, conn: int, v: int = 4, instance: str | None = None) -> Step:
    def body(p: Peer) -> LeaveGroupRequest:
        mid = "" if instance else p.memory[f"{m}.member"]
        p.memory.get("members", {}).pop(m, None)
        return LeaveGroupRequest(g, members=[MemberIdentity(mid, instance, None)])

    return Step(13, v, body, conn=conn, label=f"{m} leaves")


def describe(g: str, until: str | None = None) -> Step:
    def state_is(resp: Any) -> bool:
        return resp.groups[0].group_state == until

    return Step(15, 5, DescribeGroupsRequest([g], False), label="describe", until=state_is if until else None)


def commit(m: str | None, g: str, t: str, offset: int, gen: int | None = None, v: int = 8) -> Step:
    def body(p: Peer) -> OffsetCommitRequest:
        generation = gen if gen is not None else (p.memory[f"{m}.gen"] if m else -1)
        member = p.memory[f"{m}.member"] if m else ""
        part = OffsetCommitRequestPartition(0, offset, -1, -1, "meta")
        return OffsetCommitRequest(
            g, generation, member, None, -1, [OffsetCommitRequestTopic(t, partitions=[part])]
        )

    return Step(8, v, body, label=f"commit {offset}")


def classic_two_members(n: Names) -> list[Step]:
    g = n.group()
    return [
        join("A", g, 0),
        join("A", g, 0),
        sync("A", g, 0, leader=True),
        join("B", g, 1),
        join("B", g, 1, mode="send"),
        describe(g, until="PreparingRebalance"),
        hb("A", g, 0),
        join("A", g, 0),
        recv_join("B", 1),
        sync("A", g, 0, leader=True),
        sync("B", g, 1),
        hb("A", g, 0),
        hb("B", g, 1),
        describe(g),
        leave("B", g, 1),
        hb("A", g, 0),
        join("A", g, 0),
        sync("A", g, 0, leader=True),
        describe(g),
        leave("A", g, 0),
        describe(g),
    ]


def classic_static_member(n: Names) -> list[Step]:
    g = n.group()
    return [
        join("S", g, 0, instance="i1"),
        sync("S", g, 0, leader=True),
        hb("S", g, 0),
        # a new process with the same instance id replaces the member (no rebalance)
        join("S2", g, 1, instance="i1"),
        hb("S", g, 0),
        sync("S2", g, 1, leader=True),
        hb("S2", g, 1),
        describe(g),
        leave("S2", g, 1, instance="i1"),
        describe(g),
    ]


def kip814_skip_assignment(n: Names) -> list[Step]:
    g = n.group()
    return [
        join("L", g, 0, v=9, instance="leader"),
        sync("L", g, 0, v=5, leader=True),
        join("L2", g, 1, v=9, instance="leader"),
        sync("L2", g, 1, v=5, leader=True),
        hb("L2", g, 1),
        describe(g),
    ]


def offsets_with_generations(n: Names) -> list[Step]:
    g, t = n.group(), n.topic()
    fetch = Step(9, 8, OffsetFetchRequest(groups=[OffsetFetchRequestGroup(g, None, -1, None)]), label="fetch")
    return [
        create(t),
        join("A", g, 0),
        join("A", g, 0),
        sync("A", g, 0, leader=True),
        commit("A", g, t, 5),
        commit("A", g, t, 6, gen=9),
        commit(None, g, t, 7),
        fetch,
        leave("A", g, 0),
        commit(None, g, t, 8),
        fetch,
        describe(g),
    ]


# ============================================================================ KIP-848 steps


def cg_hb(
    m: str,
    g: str,
    conn: int,
    topics: list[str] | None = None,
    assignor: str | None = None,
    leave: bool = False,
    v: int = 1,
) -> Step:
    """A KIP-848 heartbeat at v1, where the client names itself (KIP-1082): the same member ids on
    both brokers, so that assignors that order members by id give comparable assignments."""

    def body(p: Peer) -> ConsumerGroupHeartbeatRequest:
        p.memory.setdefault(f"{m}.member", str(uuid.uuid5(uuid.NAMESPACE_OID, f"{g}/{m}")))
        epoch = -1 if leave else p.memory.get(f"{m}.epoch", 0)
        owned = p.memory.get(f"{m}.owned")
        tps = None
        if epoch == 0:
            tps = []
        elif owned is not None:
            tps = [ConsumerGroupHeartbeatRequestTopicPartitions(tid, parts) for tid, parts in owned]
        return ConsumerGroupHeartbeatRequest(
            g,
            p.memory.get(f"{m}.member", ""),
            epoch,
            None,
            None,
            30000 if epoch == 0 else -1,
            topics if epoch == 0 else None,
            None,
            assignor if epoch == 0 else None,
            tps,
        )

    def remember(resp: Any, mem: dict) -> None:
        if resp.error_code:
            return
        if resp.member_id:
            mem[f"{m}.member"] = resp.member_id
        mem[f"{m}.epoch"] = resp.member_epoch
        if resp.assignment is not None:  # a client owns what it was given once it reconciles
            mem[f"{m}.owned"] = [
                (tp.topic_id, list(tp.partitions)) for tp in resp.assignment.topic_partitions
            ]

    return Step(68, v, body, remember=remember, conn=conn, label=f"{m} heartbeats")


def kip848(assignor: str) -> Callable[[Names], list[Step]]:
    def scenario(n: Names) -> list[Step]:
        g, t = n.group(), n.topic()
        cdesc = Step(69, 0, ConsumerGroupDescribeRequest([g], False), label="describe")
        return [
            create(t, 4),
            cg_hb("M1", g, 0, [t], assignor),
            cdesc,
            cg_hb("M1", g, 0),
            cg_hb("M2", g, 1, [t], assignor),
            cdesc,
            cg_hb("M1", g, 0),
            cg_hb("M1", g, 0),
            cg_hb("M2", g, 1),
            cg_hb("M2", g, 1),
            cdesc,
            cg_hb("M2", g, 1, leave=True),
            cdesc,
            cg_hb("M1", g, 0),
            cg_hb("M1", g, 0),
            cdesc,
        ]

    return scenario


SCENARIOS: dict[str, Callable[[Names], list[Step]]] = {
    "classic: two members, rebalance, leave": classic_two_members,
    "classic: static member replaced": classic_static_member,
    "classic: KIP-814 static leader rejoins": kip814_skip_assignment,
    "classic: offsets with generations": offsets_with_generations,
    "consumer: uniform assignor": kip848("uniform"),
    "consumer: range assignor": kip848("range"),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(name: str, peers: tuple[Peer, Peer]) -> None:
    ours, theirs = peers
    unexplained = []
    steps = SCENARIOS[name](Names())
    for r in run_case(name, steps, ours, theirs):
        if not r.compared:
            continue
        bad = []
        for d in r.differences:
            rule = allowed_by(api_name(r.api), r.version, name, d.path, d.ours, d.theirs)
            if rule is None:
                bad.append(d)
            else:
                tally.RULES_USED[f"{api_name(r.api)}: {rule.reason}"] += 1
        tally.record("behaviour", api_name(r.api), bool(r.differences), not bad)
        where = f"step {r.step} ({steps[r.step].label}, {api_name(r.api)} v{r.version})"
        unexplained += [f"{where}: {d}" for d in bad]
    assert not unexplained, f"{len(unexplained)} unexplained differences:\n" + "\n".join(unexplained)
