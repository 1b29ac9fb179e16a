"""Online migration between classic and consumer groups (KIP-848, "Supporting Online Consumer
Group Upgrade"), as Apache Kafka 4.x does it.

- Upgrade: the first ConsumerGroupHeartbeat for a non-empty classic group whose members all use
  the consumer embedded protocol converts it in place (``upgrade``): the generation becomes the
  group epoch and the target assignment epoch, each member's assignment (decoded from its classic
  assignment bytes) becomes its current and target assignment at that epoch, so nobody loses a
  partition. The joining member is then handled as any consumer-protocol join.
- Classic members of a consumer group keep using JoinGroup/SyncGroup/Heartbeat/LeaveGroup, each
  translated for that member alone (``join``, ``sync``, ``heartbeat``, ``leave``): JoinGroup updates
  its subscription and reconciles it (owned partitions from the embedded protocol, whose
  GenerationId (v2+) must be the member epoch or -1: ILLEGAL_GENERATION); the answer's
  generation is its member epoch. SyncGroup returns its assigned partitions (``current & target``
  while it revokes) in the embedded protocol. Heartbeat answers REBALANCE_IN_PROGRESS when it must
  rejoin: its epoch is behind the group's, it is revoking, or the partitions it waits for are free.
  Per member: the session timeout of its JoinGroup, a sync deadline after JoinGroup, a rejoin
  deadline after a REBALANCE_IN_PROGRESS (both its rebalance timeout).
- Downgrade: when the last consumer-protocol member leaves or is fenced and classic members remain
  (``maybe_downgrade``), the group becomes a classic group at generation = group epoch with each
  member's current assignment, and a rebalance starts.
- ``group.consumer.migration.policy`` (bidirectional | upgrade | downgrade | disabled) gates both
  conversions, with Kafka's answers when refused (GROUP_ID_NOT_FOUND for an upgrade; a refused
  downgrade leaves a consumer group of classic members).

Conversions are records (tombstones of one kind of group, the records of the other) in one batch,
so a restart replays either the old group or the new one.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from uuid import UUID

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.heartbeat import HeartbeatResponse
from broker.protocol.generated.join_group import JoinGroupResponse
from broker.protocol.generated.leave_group import LeaveGroupResponse, MemberResponse
from broker.protocol.generated.sync_group import SyncGroupResponse

from .classic import join as classic_join
from .classic.group import ClassicGroup, Member
from .classic.sync import sync_error
from .consumer import heartbeat as cg
from .consumer import records as rec
from .consumer.group import ClassicMeta, ConsumerGroup, ConsumerMember, TopicMeta
from .consumer.reconcile import MemberState, Progress
from .embedded import (
    EmbeddedProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    version_of,
)
from .runtime import Result

if TYPE_CHECKING:
    from .state import CoordinatorState

log = logging.getLogger(__name__)

POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")
PROTOCOL_TYPE = "consumer"


def upgrade_enabled(st: CoordinatorState) -> bool:
    return st.consumer_config.migration_policy in ("bidirectional", "upgrade")


def downgrade_enabled(st: CoordinatorState) -> bool:
    return st.consumer_config.migration_policy in ("bidirectional", "downgrade")


# ---------------------------------------------------------------------- upgrade


def can_upgrade(st: CoordinatorState, classic: ClassicGroup) -> bool:
    """Kafka's checks: the policy allows it, every member speaks the consumer embedded protocol,
    and the group fits in a consumer group."""
    gid = classic.group_id
    if not upgrade_enabled(st):
        log.info("group %s: not upgraded to a consumer group: online upgrade is disabled", gid)
        return False
    if classic.protocol_type != PROTOCOL_TYPE:
        log.info("group %s: not upgraded: protocol type %r is not 'consumer'", gid, classic.protocol_type)
        return False
    try:
        for m in classic.members.values():
            for _name, metadata in m.protocols:
                decode_subscription(metadata)
    except EmbeddedProtocolError as e:
        log.info("group %s: not upgraded: %s", gid, e)
        return False
    if len(classic.members) > st.consumer_config.max_size:
        log.info("group %s: not upgraded: more members than group.consumer.max.size", gid)
        return False
    return True


def upgrade(
    st: CoordinatorState, classic: ClassicGroup, topics: Any, result: Result, now: int
) -> ConsumerGroup:
    """Convert a live classic group; appends the conversion records to ``result`` and returns the
    consumer group they describe (not yet registered: replay does that)."""

    gid = classic.group_id
    generation = classic.generation
    # parked requests of a rebalance in progress: the members rejoin, now into the consumer group
    for m in classic.members.values():
        if m.join is not None:
            result.completions.append(
                (
                    m.join[0],
                    classic_join.join_response(m.join[1], ErrorCode.REBALANCE_IN_PROGRESS, m.member_id),
                )
            )
            m.join = None
        if m.sync is not None:
            result.completions.append((m.sync[0], sync_error(m.sync[1], ErrorCode.REBALANCE_IN_PROGRESS)))
            m.sync = None
        classic_join.cancel_member_timers(st, classic, m.member_id)
    for pending in classic.pending_members:
        st.timers.cancel(f"pending:{gid}:{pending}")
    st.timers.cancel(f"join:{gid}")
    st.timers.cancel(f"sync:{gid}")

    group = ConsumerGroup(gid, group_epoch=generation, assignment_epoch=generation)
    taken: set[tuple[UUID, int]] = set()
    subscribed: set[str] = set()
    for m in classic.members.values():
        protocol = classic.protocol_name if classic.protocol_name in m.protocol_names() else m.protocols[0][0]
        sub = decode_subscription(m.metadata(protocol))
        assigned: dict[UUID, set[int]] = {}
        for topic, partitions in decode_assignment(m.assignment).items():
            info = topics.registry.get(topic)
            if info is None:
                continue
            for p in partitions:
                # a partition given twice by a faulty client-side assignor goes to its first owner
                if 0 <= p < info.partitions and (info.topic_id, p) not in taken:
                    taken.add((info.topic_id, p))
                    assigned.setdefault(info.topic_id, set()).add(p)
        frozen = {t: frozenset(ps) for t, ps in assigned.items()}
        subscribed.update(sub.topics)
        member = ConsumerMember(
            member_id=m.member_id,
            instance_id=m.group_instance_id,
            rack_id=sub.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=sorted(set(sub.topics)),
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            progress=Progress(generation, generation, MemberState.STABLE, frozen),
            classic=ClassicMeta(m.session_timeout_ms, tuple(m.protocols)),
        )
        group.put_member(member)
        group.target[m.member_id] = frozen
    for name in sorted(subscribed):
        info = topics.registry.get(name)
        if info is not None:
            group.topics[info.topic_id] = TopicMeta(name, info.partitions)

    records = result.records
    records.append(st.group_tombstone(gid))
    records.append(rec.group_epoch(gid, generation))
    records.append(rec.partition_metadata(gid, group.topics))
    for member in group.members.values():
        records.append(rec.member_metadata(gid, member))
        records.append(rec.target_member(gid, member.member_id, group.target[member.member_id]))
    records.append(rec.target_epoch(gid, generation))
    for member in group.members.values():
        records.append(rec.current_assignment(gid, member.member_id, member.progress))
    for member in group.members.values():
        cg.schedule_session(st, gid, member, now)
    log.info(
        "group %s: classic group at generation %d upgraded to a consumer group (%d members)",
        gid,
        generation,
        len(group.members),
    )
    return group


# ---------------------------------------------------------------------- downgrade


def maybe_downgrade(
    st: CoordinatorState, group: ConsumerGroup, leaving_id: str, result: Result, now: int
) -> bool:
    """When ``leaving_id`` leaves or is fenced and only classic members would remain, convert the
    group back to a classic group (records into ``result``) and start a rebalance once they are
    replayed. False when no downgrade applies; the caller removes the member as usual."""
    gid = group.group_id
    if leaving_id not in group.members or len(group.members) <= 1 or not group.all_classic_except(leaving_id):
        return False
    if not downgrade_enabled(st):
        log.info("group %s: not downgraded to a classic group: online downgrade is disabled", gid)
        return False
    if len(group.members) - 1 > st.config.max_size:
        log.info("group %s: not downgraded: more members than group.max.size", gid)
        return False
    classic = ClassicGroup(
        gid, generation=group.group_epoch, protocol_type=PROTOCOL_TYPE, state_timestamp=now
    )
    for m in group.members.values():
        if m.member_id == leaving_id:
            continue
        meta = m.classic
        assert meta is not None
        classic.add(
            Member(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=meta.session_timeout_ms,
                protocol_type=PROTOCOL_TYPE,
                protocols=list(meta.protocols),
            )
        )
    if not classic.candidate_protocols():
        log.info("group %s: not downgraded: its classic members share no protocol", gid)
        return False
    classic.protocol_name = classic.select_protocol()
    for cm in classic.members.values():
        cm.assignment = _assignment_bytes(
            group, group.members[cm.member_id], cm.metadata(classic.protocol_name)
        )
    for mid in group.members:
        result.records.extend(rec.member_tombstones(gid, mid))
        cg.cancel_timers(st, gid, mid)
    result.records.extend(rec.group_tombstones(gid))
    result.records.append(st.group_record(classic))
    result.after.append(lambda t: _start_classic_rebalance(st, gid, t))
    log.info(
        "group %s: consumer group at epoch %d downgraded to a classic group (%d members) as %s leaves",
        gid,
        group.group_epoch,
        len(classic.members),
        leaving_id,
    )
    return True


def _start_classic_rebalance(st: CoordinatorState, gid: str, now: int) -> None:
    classic = st.groups.get(gid)
    if classic is None or not classic.members:
        return
    for m in classic.members.values():
        classic_join.schedule_session(st, classic, m, now)
    classic_join.prepare_rebalance(st, classic, now, "downgraded from a consumer group")


# ---------------------------------------------------------------------- classic members


def _assignment_bytes(group: ConsumerGroup, member: ConsumerMember, subscription: bytes) -> bytes:
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
    key = f"cjoin:{group.group_id}:{member.member_id}"
    if st.timers.scheduled(key):
        return
    gid, mid = group.group_id, member.member_id
    st.timers.schedule(
        key, now + member.rebalance_timeout_ms, lambda t: cg.expire(st, gid, mid, "did not rejoin", t)
    )


def rebalance_state(group: ConsumerGroup, member: ConsumerMember, timers: Any) -> str:
    """The member's classic state as the KIP names it: PreparingRebalance (must rejoin),
    CompletingRebalance (joined, not yet synced) or Stable."""
    if timers.scheduled(f"csync:{group.group_id}:{member.member_id}"):
        return "CompletingRebalance"
    return "PreparingRebalance" if _must_rejoin(group, member) else "Stable"


def join(
    st: CoordinatorState,
    group: ConsumerGroup,
    req: Any,
    version: int,
    client_id: str,
    client_host: str,
    topics: Any,
    assign: Any,
    now: int,
) -> Result:
    """JoinGroup of a classic member into a consumer group."""
    gid = group.group_id
    mid = req.member_id
    unknown = not mid
    if unknown:
        mid = str(uuid.uuid4())

    def err(code: ErrorCode) -> Result:
        return Result(classic_join.join_response(version, code, req.member_id))

    cfg = st.consumer_config
    if len(group.members) >= cfg.max_size and (unknown or mid not in group.members):
        return err(ErrorCode.GROUP_MAX_SIZE_REACHED)
    protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
    if not group.supports_classic(req.protocol_type, {n for n, _ in protocols}):
        return err(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    instance = req.group_instance_id if version >= 5 else None
    if unknown and instance is None and version >= 4:
        log.info("consumer group %s: classic member without id; asking it to rejoin as %s", gid, mid)
        return Result(classic_join.join_response(version, ErrorCode.MEMBER_ID_REQUIRED, mid))
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
                cg.cancel_timers(st, gid, owner)
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
    assignment_epoch, target = cg.advance_group(st, group, updated, bump, topics, assign, records)
    owned: dict[UUID, frozenset[int]] = {}
    for tp in sub.owned_partitions or []:
        info = topics.registry.get(tp.topic)
        if info is not None and tp.partitions:
            owned[info.topic_id] = owned.get(info.topic_id, frozenset()) | frozenset(tp.partitions)
    progress = cg.reconcile_member(st, group, updated, assignment_epoch, target, owned, now, records, rewrite)
    cg.cancel_timers(st, gid, mid, ("cjoin",))
    st.timers.schedule(
        f"csync:{gid}:{mid}",
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
    return cg.expire(st, gid, member_id, "did not sync in time", now)


def sync(st: CoordinatorState, group: ConsumerGroup, req: Any, version: int, now: int) -> Result:
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
    cg.cancel_timers(st, group.group_id, member.member_id, ("csync",))
    cg.schedule_session(st, group.group_id, member, now)
    assignment = _assignment_bytes(group, member, meta.protocols[0][1])
    return Result(
        SyncGroupResponse(
            error_code=0, protocol_type=PROTOCOL_TYPE, protocol_name=meta.protocol_name, assignment=assignment
        )
    )


def heartbeat(st: CoordinatorState, group: ConsumerGroup, req: Any, version: int, now: int) -> Result:
    """Heartbeat of a classic member of a consumer group: REBALANCE_IN_PROGRESS when it must rejoin."""
    instance = req.group_instance_id if version >= 3 else None
    member, code = _classic_member(group, req.member_id, instance)
    if member is None:
        return Result(HeartbeatResponse(error_code=int(code)))
    if req.generation_id != member.member_epoch:
        return Result(HeartbeatResponse(error_code=int(ErrorCode.ILLEGAL_GENERATION)))
    cg.schedule_session(st, group.group_id, member, now)
    if _must_rejoin(group, member):
        _arm_rejoin_deadline(st, group, member, now)
        return Result(HeartbeatResponse(error_code=int(ErrorCode.REBALANCE_IN_PROGRESS)))
    return Result(HeartbeatResponse(error_code=0))


def leave(st: CoordinatorState, group: ConsumerGroup, req: Any, version: int, now: int) -> Result:
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
            cg.cancel_timers(st, gid, member.member_id)
            log.info("consumer group %s: classic member %s leaves", gid, member.member_id)
        answers.append(MemberResponse(member_id, instance_id, int(code)))
    if removed:
        result.records.append(rec.group_epoch(gid, group.group_epoch + 1))
    if version < 3:
        result.response = LeaveGroupResponse(error_code=answers[0].error_code)
    else:
        result.response = LeaveGroupResponse(error_code=0, members=answers)
    return result
