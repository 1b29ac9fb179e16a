"""The test context of the group coordinator, after Kafka's GroupMetadataManagerTestContext; every
coordinator test runs its operations through it.

The coordinator is a pure state machine: ``op(now_ms) -> Result(response, records, completions,
after)``. Requests go through the router (broker/coordinator/groups.py), as the facade sends them.
``CoordinatorContext.run`` plays the runtime's part without a log partition or an event loop, with
the runtime's own steps (``result.apply``, ``result.complete``): it appends the records to an
in-memory log (encoded as they would be in ``__consumer_offsets``), replays them (decoded again, so
the codec is on the path), runs the after-steps, and resolves the completions (``Slot``s stand in
for the futures of parked requests). Timers are ``ManualTimers`` moved by ``advance``; ``restart``
rebuilds the state from the log as a fail-over would (``restarted``: a second context doing that,
this one kept for comparison).
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from struct import pack
from typing import Any

from broker.coordinator import admin, groups, offsets
from broker.coordinator.classic.group import ClassicGroup, GroupState
from broker.coordinator.consumer.assign import assign as server_assign
from broker.coordinator.generated.group_metadata_key import GroupMetadataKey
from broker.coordinator.generated.group_metadata_value import GroupMetadataValue, MemberMetadata
from broker.coordinator.generated.offset_commit_key import OffsetCommitKey
from broker.coordinator.generated.offset_commit_value import OffsetCommitValue
from broker.coordinator.records import GROUP_METADATA, OFFSET_COMMIT, CoordinatorRecord, decode_record
from broker.coordinator.result import Result, apply, complete
from broker.coordinator.runtime import Slot
from broker.coordinator.state import Assign, ConsumerGroupConfig, CoordinatorState, GroupConfig, random_id
from broker.coordinator.timers import ManualClock, ManualTimers
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from broker.protocol.generated.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from broker.protocol.generated.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from broker.protocol.generated.heartbeat import HeartbeatRequest, HeartbeatResponse
from broker.protocol.generated.join_group import JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse
from broker.protocol.generated.leave_group import LeaveGroupRequest, LeaveGroupResponse, MemberIdentity
from broker.protocol.generated.list_groups import ListGroupsRequest, ListGroupsResponse
from broker.protocol.generated.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.generated.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
    OffsetDeleteResponse,
)
from broker.protocol.generated.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
    OffsetFetchResponse,
)
from broker.protocol.generated.sync_group import (
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    SyncGroupResponse,
)

START_MS = 1_700_000_000_000
CLIENT_HOST = "/127.0.0.1"
DEFAULT_TOPICS = {"foo": 3, "bar": 2, "baz": 1}

#: Defaults of the tests: short enough to move the clock by hand, distinct enough to tell apart.
SESSION_MS = 10_000
REBALANCE_MS = 30_000


# ---------------------------------------------------------------------- encodings


def subscription(topics: Iterable[str], user_data: bytes | None = None, version: int = 0) -> bytes:
    """A ConsumerProtocolSubscription v0: int16 version, [int16-length topic], nullable int32 bytes."""
    out = pack(">hi", version, len(list(topics)))
    for t in topics:
        raw = t.encode()
        out += pack(">h", len(raw)) + raw
    out += pack(">i", -1) if user_data is None else pack(">i", len(user_data)) + user_data
    return out


def assignment(partitions: Iterable[int]) -> bytes:
    """The simple assignment format of these tests: one byte per partition id."""
    return bytes(sorted(partitions))


def decode_assignment(data: bytes) -> set[int]:
    return set(data)


PROTOCOLS = [("range", subscription(["foo"]))]


# ---------------------------------------------------------------------- topics


@dataclass
class TopicInfo:
    topic_id: uuid.UUID
    partitions: int


@dataclass
class _Named:
    name: str


class Registry:
    """The broker's topic registry as the coordinator reads it: ``topics`` name -> TopicInfo."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicInfo] = {}

    def get(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def all(self) -> list[_Named]:
        return [_Named(n) for n in self.topics]


class FakeTopics:
    """The coordinator's TopicLookup over a registry, by default ``DEFAULT_TOPICS`` (name ->
    partition count) with name-derived ids."""

    def __init__(self, topics: dict[str, int] | None = None):
        self.registry = Registry()
        for name, n in (DEFAULT_TOPICS if topics is None else topics).items():
            self.registry.topics[name] = TopicInfo(uuid.uuid5(uuid.NAMESPACE_OID, name), n)

    @property
    def partitions(self) -> dict[str, int]:
        return {name: t.partitions for name, t in self.registry.topics.items()}

    @property
    def ids(self) -> dict[str, uuid.UUID]:
        return {name: t.topic_id for name, t in self.registry.topics.items()}

    def exists(self, name: str, partition: int) -> bool:
        t = self.registry.topics.get(name)
        return t is not None and 0 <= partition < t.partitions

    def name_for_id(self, topic_id: uuid.UUID) -> str | None:
        for name, t in self.registry.topics.items():
            if t.topic_id == topic_id:
                return name
        return None

    def id_for_name(self, name: str) -> uuid.UUID | None:
        t = self.registry.topics.get(name)
        return t.topic_id if t is not None else None


# ---------------------------------------------------------------------- log


@dataclass
class LogEntry:
    key: bytes
    value: bytes | None
    timestamp: int

    def decode(self) -> CoordinatorRecord:
        return decode_record(self.key, self.value)


# ---------------------------------------------------------------------- persisted view


def persisted_view(state: CoordinatorState) -> dict[str, Any]:
    """What a restart must reproduce: every group's generation, protocol, leader, members (with their
    instance ids, timeouts, subscription and assignment) and every committed offset.

    Groups that exist only in memory (Empty, generation 0, nothing written for them) are left out:
    Kafka does not persist them either.
    """
    groups = {}
    for gid, g in state.groups.items():
        if g.is_in(GroupState.EMPTY) and g.generation == 0 and gid not in state.offsets:
            continue
        groups[gid] = group_view(g)
    offs = {}
    for gid, o in state.offsets.items():
        offs[gid] = {
            (topic, p): (c.offset, c.leader_epoch, c.metadata, c.commit_timestamp, c.topic_id)
            for topic, parts in o.by_topic.items()
            for p, c in parts.items()
        }
    return {"groups": groups, "offsets": offs}


def group_view(g: ClassicGroup) -> dict[str, Any]:
    return {
        "state": g.state.value,
        "generation": g.generation,
        "protocol_type": g.protocol_type or "",
        "protocol_name": g.protocol_name,
        "leader": g.leader_id,
        "state_timestamp": g.state_timestamp,
        "members": {
            m.member_id: {
                "instance": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "rebalance_timeout": m.rebalance_timeout_ms,
                "session_timeout": m.session_timeout_ms,
                "subscription": _metadata_or_none(m, g.protocol_name),
                "assignment": m.assignment,
            }
            for m in g.members.values()
        },
    }


def record_view(value: GroupMetadataValue) -> dict[str, Any]:
    """The group a GroupMetadata record describes, in ``group_view`` form (compaction: the last
    record of a group alone must define it)."""
    return {
        "state": (GroupState.STABLE if value.members else GroupState.EMPTY).value,
        "generation": value.generation,
        "protocol_type": value.protocol_type or "",
        "protocol_name": value.protocol,
        "leader": value.leader,
        "state_timestamp": value.current_state_timestamp,
        "members": {
            m.member_id: {
                "instance": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "rebalance_timeout": m.rebalance_timeout,
                "session_timeout": m.session_timeout,
                "subscription": m.subscription if value.protocol else None,
                "assignment": m.assignment,
            }
            for m in value.members
        },
    }


def _metadata_or_none(m: Any, protocol: str | None) -> bytes | None:
    if protocol is None:
        return None
    try:
        return m.metadata(protocol)
    except KeyError:
        return b"<missing metadata for " + protocol.encode() + b">"


# ---------------------------------------------------------------------- expected records


def group_record(
    group_id: str,
    generation: int,
    members: list[MemberMetadata],
    protocol: str | None = "range",
    leader: str | None = None,
    protocol_type: str = "consumer",
    state_timestamp: int = -1,
) -> CoordinatorRecord:
    value = GroupMetadataValue(
        protocol_type=protocol_type,
        generation=generation,
        protocol=protocol,
        leader=leader,
        current_state_timestamp=state_timestamp,
        members=members,
    )
    return CoordinatorRecord(GROUP_METADATA, GroupMetadataKey(group_id), value)


def member_record(
    member_id: str,
    subscription: bytes = PROTOCOLS[0][1],
    assignment: bytes = b"",
    instance: str | None = None,
    client_id: str = "c",
    session_ms: int = SESSION_MS,
    rebalance_ms: int = REBALANCE_MS,
) -> MemberMetadata:
    return MemberMetadata(
        member_id=member_id,
        group_instance_id=instance,
        client_id=client_id,
        client_host=CLIENT_HOST,
        rebalance_timeout=rebalance_ms,
        session_timeout=session_ms,
        subscription=subscription,
        assignment=assignment,
    )


def group_tombstone(group_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(GROUP_METADATA, GroupMetadataKey(group_id), None)


def offset_record(
    group_id: str,
    topic: str,
    partition: int,
    offset: int,
    commit_ts: int,
    leader_epoch: int = -1,
    metadata: str = "",
    topic_id: uuid.UUID | None = None,
) -> CoordinatorRecord:
    value = OffsetCommitValue(
        offset=offset,
        leader_epoch=leader_epoch,
        metadata=metadata,
        commit_timestamp=commit_ts,
        topic_id=topic_id if topic_id is not None else uuid.uuid5(uuid.NAMESPACE_OID, topic),
    )
    return CoordinatorRecord(OFFSET_COMMIT, OffsetCommitKey(group_id, topic, partition), value)


def offset_tombstone(group_id: str, topic: str, partition: int) -> CoordinatorRecord:
    return CoordinatorRecord(OFFSET_COMMIT, OffsetCommitKey(group_id, topic, partition), None)


# ---------------------------------------------------------------------- members of a round


@dataclass
class JoinedMember:
    """A member's view after a completed join (and, after ``stable_group``, sync)."""

    member_id: str
    generation: int
    leader: str
    instance: str | None = None
    assignment: bytes = b""
    protocols: list[tuple[str, bytes]] = field(default_factory=lambda: list(PROTOCOLS))

    @property
    def is_leader(self) -> bool:
        return self.member_id == self.leader


# ---------------------------------------------------------------------- the context


class CoordinatorContext:
    def __init__(
        self,
        topics: dict[str, int] | None = None,
        start_ms: int = START_MS,
        consumer_config: ConsumerGroupConfig | None = None,
        assign: Assign = server_assign,
        new_id: Callable[[], str] = random_id,
        **config: Any,
    ):
        self.config = replace(GroupConfig(), **config)
        self.consumer_config = consumer_config or ConsumerGroupConfig()
        self.clock = ManualClock(start_ms)
        self._topics = FakeTopics(topics)
        #: the server-side assignor (tests may swap it at any time)
        self.assign = assign
        self.new_id = new_id
        self.log: list[LogEntry] = []
        self._new_state()
        groups.restore_timers(self.state, self.clock.ms)

    def _new_state(self) -> None:
        self.timers = ManualTimers(self.clock)
        self.state = groups.new_state(
            self.config,
            self.timers,
            self.consumer_config,
            topics=self._topics,
            assign=lambda *a: self.assign(*a),
            new_id=lambda: self.new_id(),
        )

    @property
    def topics(self) -> FakeTopics:
        return self._topics

    @topics.setter
    def topics(self, topics: FakeTopics) -> None:
        self._topics = self.state.topics = topics

    # ------------------------------------------------------------------ runtime

    @property
    def now(self) -> int:
        return self.clock.ms

    def run(self, op: Callable[[int], Result]) -> Result:
        """Run one operation as the runtime does: append its records, replay them, run its after
        steps, then complete the parked requests it answers."""
        now = self.clock.ms
        result = op(now)
        if result.records:  # as the runtime: nothing to append, nothing to replay or step
            base = len(self.log)
            for record in result.records:
                self.log.append(LogEntry(record.key_bytes(), record.value_bytes(), now))
            apply(result, base, self.replay, now)
        complete(result.completions)
        return result

    def replay(self, record: CoordinatorRecord, offset: int, timestamp: int) -> None:
        """Replay one appended record, as read back from the log."""
        self.state.replay(self.log[offset].decode(), offset, timestamp)

    def advance(self, ms: int, after_each: Callable[[str, Result], None] | None = None) -> list[str]:
        """Move the clock by ``ms``, firing the timers that fall due, in deadline order, as
        operations; returns the keys of the timers that fired."""
        target = self.clock.ms + ms
        fired = self.fire_until(target, after_each)
        self.clock.ms = target
        return fired

    def fire_until(self, target: int, after_each: Callable[[str, Result], None] | None = None) -> list[str]:
        """Fire every timer due by ``target`` in deadline order, the clock jumping to each deadline
        (it stays at the last one); returns the keys of the timers that fired."""
        fired = []
        while True:
            nxt = self.timers.pop_next_due(target)
            if nxt is None:
                break
            key, op = nxt
            result = self.run(op)
            fired.append(key)
            if after_each is not None:
                after_each(key, result)
        return fired

    def restore_timers(self) -> None:
        """What start-up does after the replay (groups.restore_timers)."""
        groups.restore_timers(self.state, self.clock.ms)

    def replayed_state(self) -> CoordinatorState:
        """A fresh state built from the log alone (with throwaway timers), as a restart would."""
        fresh = self.restarted()
        return fresh.state

    def restart(self) -> None:
        """Fail-over: a new coordinator replays the whole log; parked requests are lost."""
        self._new_state()
        for i, entry in enumerate(self.log):
            self.state.replay(entry.decode(), i, entry.timestamp)
        groups.restore_timers(self.state, self.clock.ms)

    def restarted(self) -> CoordinatorContext:
        """A second context that restarted from this one's log (same topics, assignor and time);
        this one is left as it was, to compare."""
        fresh = copy.copy(self)
        fresh.clock = ManualClock(self.clock.ms)
        fresh.log = list(self.log)
        fresh.restart()
        return fresh

    def records(self, start: int = 0) -> list[CoordinatorRecord]:
        """The log from ``start``, decoded."""
        return [e.decode() for e in self.log[start:]]

    def group(self, group_id: str) -> ClassicGroup:
        return self.state.groups[group_id]

    # ------------------------------------------------------------------ requests

    def join(
        self,
        group: str,
        member_id: str = "",
        instance: str | None = None,
        protocols: list[tuple[str, bytes]] | None = None,
        protocol_type: str = "consumer",
        version: int = 9,
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        client_id: str = "c",
        reason: str | None = None,
    ) -> tuple[Slot, Result]:
        slot = Slot()
        req = JoinGroupRequest(
            group_id=group,
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            member_id=member_id,
            group_instance_id=instance,
            protocol_type=protocol_type,
            protocols=[
                JoinGroupRequestProtocol(n, m) for n, m in (PROTOCOLS if protocols is None else protocols)
            ],
            reason=reason,
        )
        result = self.run(
            lambda now: groups.join_group(self.state, req, version, client_id, CLIENT_HOST, slot, now)
        )
        return slot, result

    def sync(
        self,
        group: str,
        generation: int,
        member_id: str,
        assignments: dict[str, bytes] | None = None,
        instance: str | None = None,
        version: int = 5,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> tuple[Slot, Result]:
        slot = Slot()
        req = SyncGroupRequest(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=[SyncGroupRequestAssignment(m, a) for m, a in (assignments or {}).items()],
        )
        result = self.run(lambda now: groups.sync_group(self.state, req, version, slot, now))
        return slot, result

    def heartbeat(
        self, group: str, generation: int, member_id: str, instance: str | None = None, version: int = 4
    ) -> HeartbeatResponse:
        req = HeartbeatRequest(group, generation, member_id, instance)
        return self.run(lambda now: groups.heartbeat(self.state, req, version, now)).response

    def leave(
        self,
        group: str,
        member_id: str = "",
        members: list[tuple[str, str | None]] | None = None,
        version: int = 5,
    ) -> tuple[LeaveGroupResponse, Result]:
        if version < 3:
            req = LeaveGroupRequest(group_id=group, member_id=member_id)
        else:
            idents = members if members is not None else [(member_id, None)]
            req = LeaveGroupRequest(group_id=group, members=[MemberIdentity(m, i) for m, i in idents])
        result = self.run(lambda now: groups.leave_group(self.state, req, version, now))
        return result.response, result

    def consumer_heartbeat(
        self, req: ConsumerGroupHeartbeatRequest, version: int = 1, client_id: str = "c", host: str = "/h"
    ) -> ConsumerGroupHeartbeatResponse:
        """ConsumerGroupHeartbeat through the router."""
        return self.run(
            lambda now: groups.consumer_group_heartbeat(self.state, req, version, client_id, host, now)
        ).response

    def commit(
        self,
        group: str,
        offsets_: dict[tuple[str, int], int],
        generation: int = -1,
        member_id: str = "",
        instance: str | None = None,
        version: int = 9,
        metadata: str | None = "",
        leader_epoch: int = -1,
        encoded: bool = False,
    ) -> Result:
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for (topic, p), off in offsets_.items():
            by_topic.setdefault(topic, []).append(
                OffsetCommitRequestPartition(
                    partition_index=p,
                    committed_offset=off,
                    committed_leader_epoch=leader_epoch,
                    committed_metadata=metadata,
                )
            )
        topics = [
            OffsetCommitRequestTopic(
                name=t if version < 10 else "",
                topic_id=self.topics.ids.get(t, uuid.UUID(int=7)) if version >= 10 else uuid.UUID(int=0),
                partitions=ps,
            )
            for t, ps in by_topic.items()
        ]
        req = OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            group_instance_id=instance,
            topics=topics,
        )
        return self.run(lambda now: offsets.commit(self.state, req, version, now, encoded))

    def fetch(
        self, group: str, topics: dict[str, list[int]] | None = None, version: int = 7
    ) -> OffsetFetchResponse:
        """OffsetFetch v0-7 for one group (``topics=None``: all of them, v2+)."""
        wanted = None if topics is None else [OffsetFetchRequestTopic(t, ps) for t, ps in topics.items()]
        req = OffsetFetchRequest(group_id=group, topics=wanted)
        return offsets.fetch(self.state, req, version)

    def fetch_groups(
        self, groups: dict[str, dict[str, list[int]] | None], version: int = 9
    ) -> OffsetFetchResponse:
        """OffsetFetch v8+ for several groups (v10: topics by id)."""
        req_groups = []
        for gid, topics in groups.items():
            wanted = None
            if topics is not None:
                wanted = [
                    OffsetFetchRequestTopics(
                        name=t if version < 10 else "",
                        topic_id=self.topics.ids.get(t, uuid.UUID(int=7))
                        if version >= 10
                        else uuid.UUID(int=0),
                        partition_indexes=ps,
                    )
                    for t, ps in topics.items()
                ]
            req_groups.append(OffsetFetchRequestGroup(group_id=gid, topics=wanted))
        req = OffsetFetchRequest(groups=req_groups)
        return offsets.fetch(self.state, req, version)

    def delete_offsets(self, group: str, topics: dict[str, list[int]]) -> tuple[OffsetDeleteResponse, Result]:
        req = OffsetDeleteRequest(
            group_id=group,
            topics=[
                OffsetDeleteRequestTopic(t, [OffsetDeleteRequestPartition(p) for p in ps])
                for t, ps in topics.items()
            ],
        )
        result = self.run(lambda now: offsets.delete(self.state, req))
        return result.response, result

    def describe(self, groups: list[str], version: int = 5, ops: int = -(2**31)) -> DescribeGroupsResponse:
        return admin.describe(self.state, DescribeGroupsRequest(groups=groups), version, ops)

    def list_groups(
        self, states: list[str] | None = None, types: list[str] | None = None, version: int = 5
    ) -> ListGroupsResponse:
        req = ListGroupsRequest(states_filter=states or [], types_filter=types or [])
        return admin.list_groups(self.state, req, version)

    def delete_groups(self, groups: list[str]) -> tuple[DeleteGroupsResponse, Result]:
        result = self.run(
            lambda now: admin.delete_groups(self.state, DeleteGroupsRequest(groups_names=groups))
        )
        return result.response, result

    # ------------------------------------------------------------------ rounds

    @staticmethod
    def answer(slot: Slot, result: Result) -> Any:
        """The response of a request: immediate, or the parked one once answered (else None)."""
        if result.response is slot:
            return slot.value if slot.done() else None
        return result.response

    def join_dynamic(self, group: str, version: int = 9, **kw: Any) -> tuple[Slot, Result]:
        """A new dynamic member joins as a v4+ client does: MEMBER_ID_REQUIRED, then rejoin with the id."""
        if version < 4:
            return self.join(group, version=version, **kw)
        _slot, first = self.join(group, version=version, **kw)
        assert first.response.error_code == ErrorCode.MEMBER_ID_REQUIRED, first.response
        return self.join(group, member_id=first.response.member_id, version=version, **kw)

    def settle(self, slots: list[Slot], max_ms: int | None = None, step_ms: int = 100) -> None:
        """Advance the clock in small steps until every slot is answered."""
        limit = self.clock.ms + (max_ms if max_ms is not None else 10 * REBALANCE_MS)
        while not all(s.done() for s in slots):
            assert self.clock.ms < limit, "parked requests still unanswered"
            self.advance(step_ms)

    def join_round(
        self,
        group: str,
        n: int,
        instances: list[str | None] | None = None,
        version: int = 9,
        **kw: Any,
    ) -> list[JoinedMember]:
        """``n`` new members join (two-step for dynamic v4+ members) and the join phase completes."""
        instances = instances or [None] * n
        pairs = []
        for i in range(n):
            if instances[i] is None:
                pairs.append(self.join_dynamic(group, version=version, client_id=f"c{i}", **kw))
            else:
                pairs.append(
                    self.join(group, instance=instances[i], version=version, client_id=f"c{i}", **kw)
                )
        slots = [s for s, _ in pairs]
        self.settle(slots)
        out = []
        for i, slot in enumerate(slots):
            resp: JoinGroupResponse = slot.value
            assert resp.error_code == 0, resp
            out.append(JoinedMember(resp.member_id, resp.generation_id, resp.leader, instances[i]))
        return out

    def sync_round(
        self, group: str, members: list[JoinedMember], partitions: int = 6, version: int = 5
    ) -> list[JoinedMember]:
        """Followers sync first (they park), then the leader with a round-robin assignment."""
        ids = sorted(m.member_id for m in members)
        plan = {
            mid: assignment(p for p in range(partitions) if p % len(ids) == i) for i, mid in enumerate(ids)
        }
        slots = []
        for m in sorted(members, key=lambda m: m.is_leader):
            assignments = plan if m.is_leader else None
            slot, result = self.sync(group, m.generation, m.member_id, assignments, m.instance, version)
            slots.append((m, slot, result))
        for m, slot, result in slots:
            resp: SyncGroupResponse = self.answer(slot, result)
            assert resp is not None and resp.error_code == 0, resp
            m.assignment = resp.assignment
        return members

    def stable_group(
        self, group: str, n: int, instances: list[str | None] | None = None, version: int = 9, **kw: Any
    ) -> list[JoinedMember]:
        """A full join + sync round for ``n`` new members; the group ends Stable."""
        members = self.sync_round(group, self.join_round(group, n, instances, version, **kw))
        assert self.group(group).is_in(GroupState.STABLE)
        return members

    def rejoin_all(
        self, group: str, members: list[JoinedMember], version: int = 9, **kw: Any
    ) -> list[JoinedMember]:
        """Every member rejoins with its id; returns their new view once the join phase completes."""
        pairs = [
            self.join(
                group,
                member_id=m.member_id,
                instance=m.instance,
                version=version,
                **{"client_id": m.member_id.split("-", 1)[0], **kw},
            )
            for m in members
        ]
        out = []
        for m, (slot, result) in zip(members, pairs, strict=True):
            resp = self.answer(slot, result)
            assert resp is not None and resp.error_code == 0, resp
            out.append(JoinedMember(resp.member_id, resp.generation_id, resp.leader, m.instance))
        return out


class FakeLogs:
    """The log manager's group commit (``log.flush=interval``): every append waits for the same future."""

    policy = "interval"

    def __init__(self) -> None:
        self.flush: asyncio.Future | None = None

    def appended(self, plog) -> asyncio.Future:
        if self.flush is None:
            self.flush = asyncio.get_running_loop().create_future()
        return self.flush


class Replayed:
    def __init__(self) -> None:
        self.records: list[tuple[int, int]] = []

    def replay(self, record, offset: int, timestamp: int) -> None:
        self.records.append((record.key.partition, offset))
