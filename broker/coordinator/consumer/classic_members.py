"""Classic members of a consumer group (KIP-848 online migration): JoinGroup, SyncGroup, Heartbeat
and LeaveGroup of a member that still speaks the classic protocol, each translated for that member
alone, as Apache Kafka 4.x does.

- JoinGroup updates its subscription and reconciles it (owned partitions from the embedded
  protocol, whose GenerationId (v2+) must be the member epoch or -1: ILLEGAL_GENERATION); the
  answer's generation is its member epoch.
- SyncGroup returns its assigned partitions (``current & target`` while it revokes) in the embedded
  protocol.
- Heartbeat answers REBALANCE_IN_PROGRESS when it must rejoin: its epoch is behind the group's, it
  is revoking, or the partitions it waits for are free.
- LeaveGroup removes it and bumps the group epoch (a classic LeaveGroup never downgrades the group).

Per member: the session timeout of its JoinGroup, a sync deadline after JoinGroup, a rejoin deadline
after a REBALANCE_IN_PROGRESS (both its rebalance timeout). The router (groups.py) sends classic
requests here when the group is a consumer group.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING
from uuid import UUID

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.heartbeat import HeartbeatRequest, HeartbeatResponse
from broker.protocol.generated.join_group import JoinGroupRequest, JoinGroupResponse
from broker.protocol.generated.leave_group import LeaveGroupRequest, LeaveGroupResponse, MemberResponse
from broker.protocol.generated.sync_group import SyncGroupRequest, SyncGroupResponse

from ..classic.responses import join_response, sync_error
from ..embedded import EmbeddedProtocolError, decode_subscription, encode_assignment, version_of
from ..result import Result
from ..timers import CONSUMER_REJOIN, CONSUMER_SYNC, Timers, consumer_key
from . import records as rec
from .group import ClassicMeta, ConsumerGroup, ConsumerMember
from .heartbeat import advance_group, cancel_timers, expire, reconcile_member, schedule_session
from .reconcile import MemberState

if TYPE_CHECKING:
    from ..state import CoordinatorState

log = logging.getLogger(__name__)

PROTOCOL_TYPE = "consumer"


def assignment_bytes(group: ConsumerGroup, member: ConsumerMember, subscription: bytes) -> bytes:
    """The member's assigned partitions as a ConsumerProtocolAssignment, at the version of the
    subscription it sent (0 when that is unreadable)."""
    names = {t: meta.name for t, meta in group.topics.items()}
    try:
        version = version_of(subscription)
    except EmbeddedProtocolError:
        version = 0
    return encode_assignment(
        {names[t]: ps for t, ps in member.progress.assigned.items() if t in names}, version
    )


def _classic_member(
    group: ConsumerGroup, member_id: str, instance_id: str | None
) -> tuple[ConsumerMember | None, ErrorCode]:
    """Kafka's validation of a classic request in a consumer group."""
    if instance_id is None:
        member = group.members.get(member_id)
    else:
        owner = group.static_members.get(instance_id)
        member = group.members.get(owner) if owner is not None else None
        if member is not None and member.member_id != member_id:
            return None, ErrorCode.FENCED_INSTANCE_ID
    if member is None or member.classic is None:
        return None, ErrorCode.UNKNOWN_MEMBER_ID
    return member, ErrorCode.NONE


def _must_rejoin(group: ConsumerGroup, member: ConsumerMember) -> bool:
    """A new target was installed since its epoch, or it is revoking, or everything it waits for
    has been released."""
    state = member.progress.state
    if member.member_epoch < group.group_epoch or state == MemberState.UNREVOKED_PARTITIONS:
        return True
    if state == MemberState.UNRELEASED_PARTITIONS:
        return not group.waiting_on_unreleased(member, group.target.get(member.member_id, {}))
    return False


def _arm_rejoin_deadline(
    st: CoordinatorState, group: ConsumerGroup, member: ConsumerMember, now: int
) -> None:
    key = consumer_key(CONSUMER_REJOIN, group.group_id, member.member_id)
    if st.timers.scheduled(key):
        return
    gid, mid = group.group_id, member.member_id
    st.timers.schedule(
        key, now + member.rebalance_timeout_ms, lambda t: expire(st, gid, mid, "did not rejoin", t)
    )


def rebalance_state(group: ConsumerGroup, member: ConsumerMember, timers: Timers) -> str:
    """The member's classic state as the KIP names it: PreparingRebalance (must rejoin),
    CompletingRebalance (joined, not yet synced) or Stable."""
    if timers.scheduled(consumer_key(CONSUMER_SYNC, group.group_id, member.member_id)):
        return "CompletingRebalance"
    return "PreparingRebalance" if _must_rejoin(group, member) else "Stable"


def join(
    st: CoordinatorState,
    group: ConsumerGroup,
    req: JoinGroupRequest,
    version: int,
    client_id: str,
    client_host: str,
    now: int,
) -> Result:
    """JoinGroup of a classic member into a consumer group."""
    gid = group.group_id
    mid = req.member_id
    unknown = not mid
    if unknown:
        mid = st.new_id()

    def err(code: ErrorCode) -> Result:
        return Result(join_response(version, code, req.member_id))

    cfg = st.consumer_config
    if len(group.members) >= cfg.max_size and (unknown or mid not in group.members):
        return err(ErrorCode.GROUP_MAX_SIZE_REACHED)
    protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
    if not group.supports_classic(req.protocol_type, {n for n, _ in protocols}):
        return err(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    instance = req.group_instance_id if version >= 5 else None
    if unknown and instance is None and version >= 4:
        log.info("consumer group %s: classic member without id; asking it to rejoin as %s", gid, mid)
        return Result(join_response(version, ErrorCode.MEMBER_ID_REQUIRED, mid))
    try:
        sub = decode_subscription(protocols[0][1])
    except EmbeddedProtocolError:
        return err(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    result = Result()
    records = result.records
    fresh = False  # a new member (bumps the epoch)
    rewrite = False  # its records must all be written (new or taking over a static identity)
    if instance is None:
        member = group.members.get(mid)
        if member is None:
            member, fresh, rewrite = ConsumerMember(member_id=mid), True, True
        elif member.classic is None:
            return err(ErrorCode.UNKNOWN_MEMBER_ID)
    else:
        owner = group.static_members.get(instance)
        if unknown:
            if owner is None:
                member, fresh, rewrite = ConsumerMember(member_id=mid, instance_id=instance), True, True
            else:
                # a static member restarting with a new id takes over its identity (KIP-345)
                old = group.members[owner]
                records.extend(rec.member_tombstones(gid, owner))
                records.append(rec.target_member(gid, mid, group.target.get(owner, {})))
                cancel_timers(st, gid, owner)
                member, rewrite = replace(old, member_id=mid), True
                log.info("consumer group %s: static member %s replaced %s with %s", gid, instance, owner, mid)
        else:
            if owner is None:
                return err(ErrorCode.UNKNOWN_MEMBER_ID)
            if owner != mid:
                return err(ErrorCode.FENCED_INSTANCE_ID)
            member = group.members[mid]
            if member.classic is None:
                return err(ErrorCode.UNKNOWN_MEMBER_ID)
    if not rewrite and sub.generation_id >= 0 and sub.generation_id != member.member_epoch:
        # the KIP's check: owned partitions (v2+) are from the generation the member names, which
        # must be its member epoch; a member that reset its generation (-1) is not held to it
        return err(ErrorCode.ILLEGAL_GENERATION)
    rebalance_timeout = (
        req.rebalance_timeout_ms if version >= 1 and req.rebalance_timeout_ms >= 0 else req.session_timeout_ms
    )
    updated = replace(
        member,
        instance_id=instance if instance is not None else member.instance_id,
        rack_id=sub.rack_id if sub.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=rebalance_timeout,
        server_assignor=None,
        subscribed_topic_names=sorted(set(sub.topics)),
        client_id=client_id,
        client_host=client_host,
        classic=ClassicMeta(req.session_timeout_ms, tuple(protocols)),
    )
    bump = fresh or (
        updated.subscribed_topic_names != member.subscribed_topic_names
        or updated.subscribed_topic_regex != member.subscribed_topic_regex
        or updated.rack_id != member.rack_id
    )
    if rewrite or updated != member:
        records.append(rec.member_metadata(gid, updated))
    assignment_epoch, target = advance_group(st, group, updated, bump, records)
    owned: dict[UUID, frozenset[int]] = {}
    topics = st.topics
    assert topics is not None, "a state that runs operations has the broker's topics"
    for tp in sub.owned_partitions or []:
        info = topics.registry.get(tp.topic)
        if info is not None and tp.partitions:
            owned[info.topic_id] = owned.get(info.topic_id, frozenset()) | frozenset(tp.partitions)
    progress = reconcile_member(st, group, updated, assignment_epoch, target, owned, now, records, rewrite)
    cancel_timers(st, gid, mid, (CONSUMER_REJOIN,))
    st.timers.schedule(
        consumer_key(CONSUMER_SYNC, gid, mid),
        now + rebalance_timeout,
        lambda t: _sync_timeout(st, gid, mid, t),
    )
    result.response = JoinGroupResponse(
        error_code=0,
        generation_id=progress.member_epoch,
        protocol_type=PROTOCOL_TYPE,
        protocol_name=protocols[0][0],
        leader="",
        skip_assignment=False,
        member_id=mid,
        members=[],
    )
    return result


def _sync_timeout(st: CoordinatorState, gid: str, member_id: str, now: int) -> Result:
    return expire(st, gid, member_id, "did not sync in time", now)


def sync(st: CoordinatorState, group: ConsumerGroup, req: SyncGroupRequest, version: int, now: int) -> Result:
    """SyncGroup of a classic member of a consumer group: its assignment, in the embedded protocol."""
    instance = req.group_instance_id if version >= 3 else None
    member, code = _classic_member(group, req.member_id, instance)
    if member is None:
        return Result(sync_error(version, code))
    meta = member.classic
    assert meta is not None
    if req.generation_id != member.member_epoch:
        return Result(sync_error(version, ErrorCode.ILLEGAL_GENERATION))
    if version >= 5 and (
        (req.protocol_type is not None and req.protocol_type != PROTOCOL_TYPE)
        or (req.protocol_name is not None and req.protocol_name != meta.protocol_name)
    ):
        return Result(sync_error(version, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
    if group.group_epoch > member.member_epoch and member.progress.state != MemberState.UNREVOKED_PARTITIONS:
        _arm_rejoin_deadline(st, group, member, now)
        return Result(sync_error(version, ErrorCode.REBALANCE_IN_PROGRESS))
    cancel_timers(st, group.group_id, member.member_id, (CONSUMER_SYNC,))
    schedule_session(st, group.group_id, member, now)
    assignment = assignment_bytes(group, member, meta.protocols[0][1])
    return Result(
        SyncGroupResponse(
            error_code=0, protocol_type=PROTOCOL_TYPE, protocol_name=meta.protocol_name, assignment=assignment
        )
    )


def heartbeat(
    st: CoordinatorState, group: ConsumerGroup, req: HeartbeatRequest, version: int, now: int
) -> Result:
    """Heartbeat of a classic member of a consumer group: REBALANCE_IN_PROGRESS when it must rejoin."""
    instance = req.group_instance_id if version >= 3 else None
    member, code = _classic_member(group, req.member_id, instance)
    if member is None:
        return Result(HeartbeatResponse(error_code=int(code)))
    if req.generation_id != member.member_epoch:
        return Result(HeartbeatResponse(error_code=int(ErrorCode.ILLEGAL_GENERATION)))
    schedule_session(st, group.group_id, member, now)
    if _must_rejoin(group, member):
        _arm_rejoin_deadline(st, group, member, now)
        return Result(HeartbeatResponse(error_code=int(ErrorCode.REBALANCE_IN_PROGRESS)))
    return Result(HeartbeatResponse(error_code=0))


def leave(
    st: CoordinatorState, group: ConsumerGroup, req: LeaveGroupRequest, version: int, now: int
) -> Result:
    """LeaveGroup of classic members of a consumer group: they are removed and the group epoch is
    bumped once (as Kafka: a classic LeaveGroup does not downgrade the group)."""
    gid = group.group_id
    if version < 3:
        identities = [(req.member_id, None)]
    else:
        identities = [(m.member_id, m.group_instance_id) for m in req.members]
    result = Result()
    answers = []
    removed: list[str] = []
    for member_id, instance_id in identities:
        member, code = _classic_member(group, member_id, instance_id)
        if member is not None and member.member_id in removed:
            member, code = None, ErrorCode.UNKNOWN_MEMBER_ID
        if member is not None:
            removed.append(member.member_id)
            result.records.extend(rec.member_tombstones(gid, member.member_id))
            cancel_timers(st, gid, member.member_id)
            log.info("consumer group %s: classic member %s leaves", gid, member.member_id)
        answers.append(MemberResponse(member_id, instance_id, int(code)))
    if removed:
        result.records.append(rec.group_epoch(gid, group.group_epoch + 1))
    if version < 3:
        result.response = LeaveGroupResponse(error_code=answers[0].error_code)
    else:
        result.response = LeaveGroupResponse(error_code=0, members=answers)
    return result
