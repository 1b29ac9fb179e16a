"""The router: every group request enters the coordinator's state here, which decides once whether
the group is a classic group, a consumer group (KIP-848), or a consumer group with classic members,
and calls exactly one family of operations:

- classic groups: classic/join.py, classic/sync.py;
- consumer groups: consumer/heartbeat.py (ConsumerGroupHeartbeat), including a classic group's
  conversion on the first consumer join (migration.upgrade);
- classic members of a consumer group: consumer/classic_members.py.

It also builds the state with its services (the downgrade back edge is migration's, passed in as a
function) and restores the members' timers after start-up. Offsets and group administration
(offsets.py, admin.py) work the same for every kind of group and are called directly.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any

from broker.protocol.generated.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from broker.protocol.generated.heartbeat import HeartbeatRequest
from broker.protocol.generated.join_group import JoinGroupRequest
from broker.protocol.generated.leave_group import LeaveGroupRequest
from broker.protocol.generated.sync_group import SyncGroupRequest

from . import migration, offsets
from .classic import join as classic_join
from .classic import sync as classic_sync
from .classic.group import GroupState
from .consumer import classic_members
from .consumer import heartbeat as consumer
from .consumer import records as crec
from .consumer.group import ConsumerGroup
from .result import Result
from .state import (
    Assign,
    ConsumerGroupConfig,
    CoordinatorState,
    GroupConfig,
    GroupConfigLookup,
    TopicLookup,
    random_id,
)
from .timers import Timers


class GroupKind(Enum):
    CLASSIC = "classic"
    CONSUMER = "consumer"
    CLASSIC_MEMBERS = "consumer group with classic members"


def new_state(
    config: GroupConfig,
    timers: Timers,
    consumer_config: ConsumerGroupConfig | None = None,
    *,
    topics: TopicLookup,
    assign: Assign | None = None,
    group_configs: GroupConfigLookup | None = None,
    new_id: Callable[[], str] = random_id,
    journal: Callable[[str, int, int], None] | None = None,
) -> CoordinatorState:
    """The coordinator state with its services; consumer groups downgrade through migration.py."""
    return CoordinatorState(
        config,
        timers,
        consumer_config,
        topics=topics,
        assign=assign,
        group_configs=group_configs,
        new_id=new_id,
        downgrade=migration.maybe_downgrade,
        journal=journal,
    )


def restore_timers(st: CoordinatorState, now: int, only: set[str] | None = None) -> None:
    """After start-up replay: every member gets a fresh session timer (fail-over: they keep going),
    and offset expiry is scheduled. ``only``: just these groups' members (a group loaded by a
    coordinator that took it over)."""
    for group in st.groups.values():
        # has_members first: a replayed Empty group's members' dict is not made for nothing
        if group.has_members and (only is None or group.group_id in only):
            for member in group.members.values():
                classic_join.schedule_session(st, group, member, now)
    if only is None:
        offsets.schedule_expiry(st, now)
    for cgroup in st.consumer_groups.values():
        if only is None or cgroup.group_id in only:
            for cmember in cgroup.members.values():
                consumer.schedule_session(st, cgroup.group_id, cmember, now)


# ---------------------------------------------------------------------- the decision


def classic_request_kind(st: CoordinatorState, group_id: str, joining: bool) -> GroupKind:
    """Which group a classic request (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) is for.

    JoinGroup goes to a consumer group only when it has members (an empty consumer group is
    replaced by a classic group: ``join_group``). The other requests go to a consumer group unless
    a classic group of that id is in memory (a JoinGroup refused before it wrote anything can leave
    an empty one next to an empty consumer group; that classic group answers).
    """
    cgroup = st.consumer_groups.get(group_id)
    if cgroup is None:
        return GroupKind.CLASSIC
    if joining:
        return GroupKind.CLASSIC_MEMBERS if cgroup.members else GroupKind.CLASSIC
    return GroupKind.CLASSIC if group_id in st.groups else GroupKind.CLASSIC_MEMBERS


def consumer_request_kind(st: CoordinatorState, group_id: str) -> GroupKind:
    """Which group a ConsumerGroupHeartbeat is for: a classic group with members (to be upgraded,
    or refused) or else a consumer group (an empty classic group is replaced by one)."""
    classic = st.groups.get(group_id)
    return GroupKind.CLASSIC if classic is not None and classic.members else GroupKind.CONSUMER


def _consumer_group(st: CoordinatorState, group_id: str) -> ConsumerGroup:
    return st.consumer_groups[group_id]


# ---------------------------------------------------------------------- classic requests


def join_group(
    st: CoordinatorState,
    req: JoinGroupRequest,
    version: int,
    client_id: str,
    client_host: str,
    waiter: Any,
    now: int,
) -> Result:
    gid = req.group_id
    if classic_request_kind(st, gid, joining=True) is GroupKind.CLASSIC_MEMBERS:
        return classic_members.join(st, _consumer_group(st, gid), req, version, client_id, client_host, now)
    # an empty consumer group of that id becomes a classic group: its tombstones come first
    prelude = crec.group_tombstones(gid) if gid in st.consumer_groups else ()
    return classic_join.join_group(st, req, version, client_id, client_host, waiter, now, prelude)


def sync_group(st: CoordinatorState, req: SyncGroupRequest, version: int, waiter: Any, now: int) -> Result:
    if classic_request_kind(st, req.group_id, joining=False) is GroupKind.CLASSIC_MEMBERS:
        return classic_members.sync(st, _consumer_group(st, req.group_id), req, version, now)
    return classic_sync.sync_group(st, req, version, waiter, now)


def heartbeat(st: CoordinatorState, req: HeartbeatRequest, version: int, now: int) -> Result:
    if classic_request_kind(st, req.group_id, joining=False) is GroupKind.CLASSIC_MEMBERS:
        return classic_members.heartbeat(st, _consumer_group(st, req.group_id), req, version, now)
    return classic_sync.heartbeat(st, req, version, now)


def heartbeat_fast(st: CoordinatorState, req: HeartbeatRequest, version: int, now: int) -> bool:
    """The common heartbeat (a known member of a Stable classic group at its generation, with its
    instance id if it has one): restart its session and return True, the caller answers error 0 --
    exactly what ``heartbeat`` would do. False: the request needs ``heartbeat``."""
    group = st.groups.get(req.group_id)
    if group is None or group.state is not GroupState.STABLE or req.generation_id != group.generation:
        return False
    member = group.members.get(req.member_id)
    instance = req.group_instance_id if version >= 3 else None
    if member is None or (instance is not None and group.static_members.get(instance) != req.member_id):
        return False
    if not st.timers.extend(member.session_key(group.group_id), now + member.session_timeout_ms):
        classic_join.schedule_session(st, group, member, now)
    return True


def leave_group(st: CoordinatorState, req: LeaveGroupRequest, version: int, now: int) -> Result:
    if classic_request_kind(st, req.group_id, joining=False) is GroupKind.CLASSIC_MEMBERS:
        return classic_members.leave(st, _consumer_group(st, req.group_id), req, version, now)
    return classic_sync.leave_group(st, req, version, now)


# ---------------------------------------------------------------------- consumer requests


def consumer_group_heartbeat(
    st: CoordinatorState,
    req: ConsumerGroupHeartbeatRequest,
    version: int,
    client_id: str,
    client_host: str,
    now: int,
) -> Result:
    invalid = consumer.invalid(st, req, version)
    if invalid is not None:
        return invalid
    if consumer_request_kind(st, req.group_id) is GroupKind.CLASSIC:
        classic = st.groups[req.group_id]
        if req.member_epoch != 0 or not migration.can_upgrade(st, classic):
            return consumer.not_a_consumer_group(req.group_id)
        result = Result()
        group = migration.upgrade(st, classic, result, now)  # online upgrade (KIP-848)
        return consumer.heartbeat(st, req, version, client_id, client_host, now, group, result)
    return consumer.heartbeat(st, req, version, client_id, client_host, now)
