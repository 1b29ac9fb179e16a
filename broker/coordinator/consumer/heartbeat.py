"""ConsumerGroupHeartbeat (KIP-848): join, heartbeat, leave, and the group-epoch / target-assignment /
reconciliation cycle, as one coordinator operation.

Order of work for one heartbeat, as in Kafka's GroupMetadataManager:
1. validate the request (INVALID_REQUEST with Kafka's messages, UNSUPPORTED_ASSIGNOR);
2. find or create the group and the member (epoch 0 joins, -1 leaves, -2 static leave); fence
   stale epochs (FENCED_MEMBER_EPOCH), except the lost-response case: the previous epoch with
   owned partitions inside the current assignment;
3. fold the request's changes into the member; a subscription, assignor or rack change, a member
   joining or leaving, or changed partition metadata bumps the group epoch;
4. when the group epoch is ahead of the target assignment, compute a new one with the group's
   server-side assignor and write only what changed;
5. reconcile the member one step towards its target (reconcile.py) and answer with its epoch and,
   when it changed, its assignment.

Everything is computed on local copies and returned as records; replay applies them.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING
from uuid import UUID

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.consumer_group_heartbeat import (
    Assignment,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeatResponseTopicPartitions,
)

from ..result import Result
from ..timers import (
    CONSUMER_REJOIN,
    CONSUMER_REVOKE,
    CONSUMER_SESSION,
    CONSUMER_SYNC,
    CONSUMER_TIMER_KINDS,
    consumer_key,
)
from . import records as rec
from .group import STATIC_LEFT_EPOCH, ConsumerGroup, ConsumerMember, TopicMeta
from .reconcile import MemberState, Progress, reconcile, subset
from .regex import InvalidRegex, compile_pattern, matching

if TYPE_CHECKING:
    from ..state import CoordinatorState

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1


class HeartbeatError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None):
        super().__init__(message or code.name)
        self.code = code
        self.message = message


def _error(code: ErrorCode, message: str | None = None) -> Result:
    return Result(
        ConsumerGroupHeartbeatResponse(
            error_code=int(code),
            error_message=message,
            member_id=None,
            member_epoch=0,  # Kafka's error response leaves the schema default
            heartbeat_interval_ms=0,
            assignment=None,
        )
    )


def validate(req: ConsumerGroupHeartbeatRequest, version: int, assignors: Sequence[str]) -> None:
    def bad(msg: str) -> HeartbeatError:
        return HeartbeatError(ErrorCode.INVALID_REQUEST, msg)

    epoch = req.member_epoch
    if (version >= 1 or epoch > 0 or epoch == LEAVE_EPOCH) and not req.member_id:
        raise bad("MemberId can't be empty.")
    if not req.group_id:
        raise bad("GroupId can't be empty.")
    if req.instance_id is not None and not req.instance_id:
        raise bad("InstanceId can't be empty.")
    if req.rack_id is not None and not req.rack_id:
        raise bad("RackId can't be empty.")
    if epoch == 0:
        if req.rebalance_timeout_ms == -1:
            raise bad("RebalanceTimeoutMs must be provided in first request.")
        if req.topic_partitions is None or req.topic_partitions:
            raise bad("TopicPartitions must be empty when (re-)joining.")
        regex = req.subscribed_topic_regex if version >= 1 else None
        if req.subscribed_topic_names is None and regex is None:
            raise bad("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    elif epoch == STATIC_LEFT_EPOCH:
        if req.instance_id is None:
            raise bad("InstanceId can't be null.")
    elif epoch < STATIC_LEFT_EPOCH:
        raise bad("MemberEpoch is invalid.")
    if version >= 1 and req.subscribed_topic_regex is not None:
        try:
            compile_pattern(req.subscribed_topic_regex)
        except InvalidRegex as e:
            raise HeartbeatError(ErrorCode.INVALID_REGULAR_EXPRESSION, str(e)) from None
    if req.server_assignor is not None and req.server_assignor not in assignors:
        raise HeartbeatError(
            ErrorCode.UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: {', '.join(assignors)}.",
        )


def _owned(req: ConsumerGroupHeartbeatRequest) -> dict[UUID, frozenset[int]] | None:
    if req.topic_partitions is None:
        return None
    return {tp.topic_id: frozenset(tp.partitions) for tp in req.topic_partitions if tp.partitions}


def _response_assignment(a: dict[UUID, frozenset[int]]) -> Assignment:
    return Assignment(
        topic_partitions=[
            ConsumerGroupHeartbeatResponseTopicPartitions(t, sorted(ps)) for t, ps in sorted(a.items()) if ps
        ]
    )


def invalid(st: CoordinatorState, req: ConsumerGroupHeartbeatRequest, version: int) -> Result | None:
    """The error answer of a request that fails validation (step 1), else None."""
    try:
        validate(req, version, st.consumer_config.assignors)
    except HeartbeatError as e:
        return _error(e.code, e.message)
    return None


def not_a_consumer_group(group_id: str) -> Result:
    """The answer to a heartbeat for a classic group that is not (or cannot be) upgraded."""
    return _error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")


def heartbeat(
    st: CoordinatorState,
    req: ConsumerGroupHeartbeatRequest,
    version: int,
    client_id: str,
    client_host: str,
    now: int,
    group: ConsumerGroup | None = None,
    result: Result | None = None,
) -> Result:
    """A validated heartbeat (``invalid``) for a consumer group: ``group`` (with the records that
    created it in ``result``: an upgrade), or else the group of that id, created by an epoch-0 join
    (replacing an empty classic group of that id)."""
    result = result if result is not None else Result()
    if group is None:
        gid = req.group_id
        group = st.consumer_groups.get(gid)
        if group is None:
            if req.member_epoch != 0:
                return _error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
            group = ConsumerGroup(gid)  # persisted by the records below
            if gid in st.groups:  # an empty classic group becomes a consumer group
                result.records.append(st.group_tombstone(gid))
    try:
        return _heartbeat(st, group, req, version, client_id, client_host, now, result)
    except HeartbeatError as e:
        return _error(e.code, e.message)


def _heartbeat(
    st: CoordinatorState,
    group: ConsumerGroup,
    req: ConsumerGroupHeartbeatRequest,
    version: int,
    client_id: str,
    client_host: str,
    now: int,
    result: Result,
) -> Result:
    epoch = req.member_epoch
    records = result.records
    owned = _owned(req)  # what the member says it still holds (None: not said)
    bump = False
    member: ConsumerMember | None
    # ---------------------------------------------------------------- the member
    if epoch == 0:
        member, replaced = _join(st, group, req, now, records)
        bump = not replaced
    else:
        member = group.members.get(req.member_id)
        if member is None:
            raise HeartbeatError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {req.member_id} is not a member of group {group.group_id}.",
            )
        if member.classic is not None:
            raise HeartbeatError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {req.member_id} uses the classic protocol; it must join with epoch 0.",
            )
        if req.instance_id is not None and member.instance_id != req.instance_id:
            raise HeartbeatError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Instance {req.instance_id} does not match member {req.member_id}.",
            )
        if epoch == LEAVE_EPOCH or epoch == STATIC_LEFT_EPOCH:
            return _leave(st, group, member, epoch, now, result)
        if member.member_epoch == STATIC_LEFT_EPOCH:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member.member_id} left the group.")
        if epoch != member.member_epoch:
            lost_response = (
                epoch == member.progress.previous_member_epoch
                and owned is not None
                and subset(owned, member.assigned)
            )
            if not lost_response:
                # as in Kafka 4.x, nothing is written: the member must rejoin with epoch 0 (which
                # resets it) or its session expires
                raise HeartbeatError(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    f"The member epoch {epoch} does not match the expected epoch {member.member_epoch}.",
                )
    # ---------------------------------------------------------------- its metadata
    updated = replace(
        member,
        client_id=client_id,
        client_host=client_host,
        rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms
        if req.rebalance_timeout_ms != -1
        else member.rebalance_timeout_ms,
        subscribed_topic_names=sorted(set(req.subscribed_topic_names))
        if req.subscribed_topic_names is not None
        else member.subscribed_topic_names,
        subscribed_topic_regex=req.subscribed_topic_regex
        if (version >= 1 and req.subscribed_topic_regex is not None)
        else member.subscribed_topic_regex,
        server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
    )
    if (
        updated.subscribed_topic_names != member.subscribed_topic_names
        or updated.subscribed_topic_regex != member.subscribed_topic_regex
        or updated.server_assignor != member.server_assignor
        or updated.rack_id != member.rack_id
    ):
        bump = True
    if epoch == 0 or updated != member:
        records.append(rec.member_metadata(group.group_id, updated))
    assignment_epoch, target = advance_group(st, group, updated, bump, records)
    before = updated.progress
    progress = reconcile_member(st, group, updated, assignment_epoch, target, owned, now, records, epoch == 0)
    send = (
        epoch == 0
        or progress.assigned != before.assigned
        or (owned is not None and owned != progress.assigned and progress.state == MemberState.STABLE)
    )
    result.response = ConsumerGroupHeartbeatResponse(
        error_code=0,
        error_message=None,
        member_id=updated.member_id,
        member_epoch=progress.member_epoch,
        heartbeat_interval_ms=st.consumer_heartbeat_interval_ms(group.group_id),
        assignment=_response_assignment(progress.assigned) if send else None,
    )
    return result


def advance_group(
    st: CoordinatorState,
    group: ConsumerGroup,
    updated: ConsumerMember,
    bump: bool,
    records: list,
) -> tuple[int, dict[str, dict[UUID, frozenset[int]]]]:
    """After a member changed (``bump``: its subscription did, or it joined): refresh the group's
    partition metadata, bump the group epoch, and compute a new target assignment when the epoch
    moved past it. Returns the assignment epoch and the target."""
    cfg = st.consumer_config
    topics = st.topics
    assert topics is not None, "a state that runs operations has the broker's topics"
    gid = group.group_id
    members = dict(group.members)
    members[updated.member_id] = updated
    subscribed = set()
    all_names = None
    for m in members.values():
        subscribed.update(m.subscribed_topic_names)
        if m.subscribed_topic_regex:
            if all_names is None:
                all_names = sorted(t.name for t in topics.registry.all())
            subscribed.update(matching(m.subscribed_topic_regex, all_names))
    new_topics = {}
    for name in sorted(subscribed):
        info = topics.registry.get(name)
        if info is not None:
            new_topics[info.topic_id] = TopicMeta(name, info.partitions)
    if new_topics != group.topics:
        records.append(rec.partition_metadata(gid, new_topics))
        bump = True
    group_epoch = group.group_epoch + 1 if bump else group.group_epoch
    if bump:
        records.append(rec.group_epoch(gid, group_epoch))
    target = group.target
    assignment_epoch = group.assignment_epoch
    if group_epoch > assignment_epoch:
        assignor = _select_assignor(cfg.assignors, members)
        new_target = st.assign(assignor, group, members, new_topics)
        for mid, parts in new_target.items():
            if target.get(mid) != parts:
                records.append(rec.target_member(gid, mid, parts))
        target = new_target
        assignment_epoch = group_epoch
        records.append(rec.target_epoch(gid, assignment_epoch))
    return assignment_epoch, target


def reconcile_member(
    st: CoordinatorState,
    group: ConsumerGroup,
    member: ConsumerMember,
    assignment_epoch: int,
    target: dict[str, dict[UUID, frozenset[int]]],
    owned: dict[UUID, frozenset[int]] | None,
    now: int,
    records: list,
    always_write: bool = False,
) -> Progress:
    """Move the member one step towards its target (reconcile.py), record the step, re-arm its
    session and revocation timers."""

    def held_by_other(t: UUID, p: int) -> bool:
        owner = group.owner_of(t, p)
        return owner is not None and owner != member.member_id

    before = member.progress
    progress = reconcile(before, assignment_epoch, target.get(member.member_id, {}), owned, held_by_other)
    if progress != before or always_write:
        records.append(rec.current_assignment(group.group_id, member.member_id, progress))
    _timers(st, group.group_id, member, before, progress, now)
    return progress


def _select_assignor(assignors: list[str], members: dict[str, ConsumerMember]) -> str:
    """The most common assignor the members asked for, else the first configured (KIP-848)."""
    asked = Counter(m.server_assignor for m in members.values() if m.server_assignor)
    if not asked:
        return assignors[0]
    top = max(asked.values())
    return min(
        (a for a, n in asked.items() if n == top), key=lambda a: assignors.index(a) if a in assignors else 99
    )


def _join(st, group: ConsumerGroup, req, now: int, records: list) -> tuple[ConsumerMember, bool]:
    """A member joining with epoch 0: a static member taking over its old identity (no epoch bump),
    or a new member."""
    cfg = st.consumer_config
    if req.instance_id is not None:
        old_id = group.static_members.get(req.instance_id)
        if old_id is not None:
            old = group.members[old_id]
            if old.member_epoch != STATIC_LEFT_EPOCH and old_id != req.member_id:
                raise HeartbeatError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {old_id} with instance id {req.instance_id} is present in group {group.group_id}.",
                )
            new_id = req.member_id or st.new_id()
            if new_id != old_id:
                records.extend(rec.member_tombstones(group.group_id, old_id))
                records.append(rec.target_member(group.group_id, new_id, group.target.get(old_id, {})))
            restored = replace(old.progress, member_epoch=old.progress.previous_member_epoch)
            st.timers.cancel(consumer_key(CONSUMER_SESSION, group.group_id, old_id))
            return replace(old, member_id=new_id, progress=restored), True
    member_id = req.member_id or st.new_id()
    existing = group.members.get(member_id)
    if existing is None and len([m for m in group.members.values()]) >= cfg.max_size:
        raise HeartbeatError(
            ErrorCode.GROUP_MAX_SIZE_REACHED,
            f"The consumer group has reached its maximum capacity of {cfg.max_size} members.",
        )
    if existing is not None and existing.classic is not None:
        # a classic member switching protocols under its own id: same member, same epoch and
        # partitions, now heartbeating (its epoch-0 answer carries its whole assignment)
        cancel_timers(st, group.group_id, member_id, (CONSUMER_REJOIN, CONSUMER_SYNC))
        return replace(existing, classic=None), True
    if existing is not None:
        # rejoining with the same id after being fenced or losing state: start over
        return replace(existing, progress=Progress(0, 0, MemberState.STABLE)), False
    return ConsumerMember(member_id=member_id, instance_id=req.instance_id), False


def _leave(st, group: ConsumerGroup, member: ConsumerMember, epoch: int, now: int, result: Result) -> Result:
    gid = group.group_id
    if epoch == STATIC_LEFT_EPOCH and member.instance_id is not None:
        # keep the identity and assignment for a restart within the session timeout
        left = replace(
            member.progress, member_epoch=STATIC_LEFT_EPOCH, previous_member_epoch=member.member_epoch
        )
        result.records.append(rec.current_assignment(gid, member.member_id, left))
        cancel_timers(st, gid, member.member_id, (CONSUMER_REVOKE,))
        schedule_session(st, gid, member, now)
    else:
        _remove(st, group, member.member_id, result, now)
    result.response = ConsumerGroupHeartbeatResponse(
        error_code=0, member_id=member.member_id, member_epoch=epoch, heartbeat_interval_ms=0, assignment=None
    )
    log.info("consumer group %s: member %s leaves (epoch %d)", gid, member.member_id, epoch)
    return result


def _remove(st, group: ConsumerGroup, member_id: str, result: Result, now: int) -> None:
    """Remove a member and bump the group epoch (the next heartbeat computes a new target); when
    only classic members would remain, the group may go back to being a classic group instead
    (``st.downgrade``, migration.py)."""
    if st.downgrade is not None and st.downgrade(st, group, member_id, result, now):
        return
    gid = group.group_id
    result.records.extend(rec.member_tombstones(gid, member_id))
    result.records.append(rec.group_epoch(gid, group.group_epoch + 1))
    cancel_timers(st, gid, member_id)


def session_timeout_ms(st, gid: str, member: ConsumerMember | None) -> int:
    """A classic member keeps the session timeout of its JoinGroup; others get the group's."""
    if member is not None and member.classic is not None:
        return member.classic.session_timeout_ms
    return st.consumer_session_timeout_ms(gid)


def schedule_session(st, gid: str, member: ConsumerMember, now: int) -> None:
    """(Re)start the member's session timer; when it fires the member is fenced."""
    member_id = member.member_id
    st.timers.schedule(
        consumer_key(CONSUMER_SESSION, gid, member_id),
        now + session_timeout_ms(st, gid, member),
        lambda t: expire(st, gid, member_id, "session timeout", t),
    )


def cancel_timers(st, gid: str, member_id: str, kinds: tuple[str, ...] = CONSUMER_TIMER_KINDS) -> None:
    for kind in kinds:
        st.timers.cancel(consumer_key(kind, gid, member_id))


def _timers(st, gid: str, member: ConsumerMember, before: Progress, after: Progress, now: int) -> None:
    schedule_session(st, gid, member, now)
    key = consumer_key(CONSUMER_REVOKE, gid, member.member_id)
    if after.state == MemberState.UNREVOKED_PARTITIONS and before.state != MemberState.UNREVOKED_PARTITIONS:
        timeout = (
            member.rebalance_timeout_ms
            if member.rebalance_timeout_ms > 0
            else st.consumer_session_timeout_ms(gid)
        )
        st.timers.schedule(
            key,
            now + timeout,
            lambda t: expire(st, gid, member.member_id, "revocation timeout", t, after.member_epoch),
        )
    elif after.state != MemberState.UNREVOKED_PARTITIONS:
        st.timers.cancel(key)


def expire(st, gid: str, member_id: str, reason: str, now: int, epoch: int | None = None) -> Result:
    """A member's session or revocation timed out: fence it (tombstones, epoch bump)."""
    group = st.consumer_groups.get(gid)
    result = Result()
    member = group.members.get(member_id) if group is not None else None
    if member is None:
        return result
    if epoch is not None and (
        member.member_epoch != epoch or member.progress.state != MemberState.UNREVOKED_PARTITIONS
    ):
        return result
    log.info("consumer group %s: member %s removed (%s)", gid, member_id, reason)
    _remove(st, group, member_id, result, now)
    return result
