"""JoinGroup and the join phase of a classic rebalance.

- v4+: a member without an id is told MEMBER_ID_REQUIRED with a generated id and must rejoin with it
  (KIP-394); static members (v5+, KIP-345) skip that and are recognised by their instance id.
- A rebalance waits for every known member to rejoin, up to the largest rebalance timeout, then
  drops the members that did not; a group coming out of Empty first waits
  ``group.initial.rebalance.delay.ms``, extended while new members keep arriving, up to the
  rebalance timeout.
- On completion the generation is bumped, a protocol is chosen by the members' votes, and every
  parked JoinGroup is answered; only the leader gets the members' metadata.
- A static leader that rejoins a Stable group with unchanged metadata gets SkipAssignment=true
  (v9, KIP-814) with the members' metadata, and keeps the current assignment.

Rebalance progress (the states PreparingRebalance and CompletingRebalance, the generation bump) is
kept in memory as Kafka does; the stable outcome is persisted by SyncGroup (see sync.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.join_group import JoinGroupRequest, JoinGroupResponse, JoinGroupResponseMember

from ..records import CoordinatorRecord
from ..result import Result
from ..timers import join_key, pending_key, session_key, sync_key
from .group import ClassicGroup, GroupState, Member
from .responses import join_response, sync_error

if TYPE_CHECKING:
    from ..state import CoordinatorState

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------- responses


def _members_for_leader(group: ClassicGroup) -> list[JoinGroupResponseMember]:
    return [
        JoinGroupResponseMember(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
        for m in group.members.values()
    ]


def _answer(group: ClassicGroup, member: Member, version: int, skip: bool = False) -> JoinGroupResponse:
    leader = member.member_id == group.leader_id
    members = _members_for_leader(group) if leader else []
    return join_response(version, ErrorCode.NONE, member.member_id, group, members, skip)


# ---------------------------------------------------------------------- timers


def schedule_session(st: CoordinatorState, group: ClassicGroup, member: Member, now: int) -> None:
    key = member.session_key(group.group_id)
    st.timers.schedule(
        key, now + member.session_timeout_ms, lambda t: session_expired(st, group, member.member_id, t)
    )


def cancel_member_timers(st: CoordinatorState, group: ClassicGroup, member_id: str) -> None:
    st.timers.cancel(session_key(group.group_id, member_id))


def session_expired(st: CoordinatorState, group: ClassicGroup, member_id: str, now: int) -> Result:
    member = group.members.get(member_id)
    if member is None or st.groups.get(group.group_id) is not group:
        return Result()
    if member.awaiting_join or member.awaiting_sync:
        schedule_session(st, group, member, now)  # a parked member is alive (Kafka's keep-alive)
        return Result()
    log.info("group %s: member %s expired after %d ms", group.group_id, member_id, member.session_timeout_ms)
    return remove_member_and_rebalance(st, group, member_id, now, "session timeout")


def pending_expired(st: CoordinatorState, group: ClassicGroup, member_id: str, now: int) -> Result:
    if member_id in group.pending_members:
        group.pending_members.discard(member_id)
        return maybe_complete_join(st, group, now)
    return Result()


# ---------------------------------------------------------------------- rebalance


def prepare_rebalance(st: CoordinatorState, group: ClassicGroup, now: int, reason: str) -> Result:
    """Enter PreparingRebalance (parked SyncGroups get REBALANCE_IN_PROGRESS) and arm the join timer."""
    result = Result()
    if group.is_in(GroupState.COMPLETING_REBALANCE):
        for m in group.members.values():
            if m.sync is not None:
                result.completions.append((m.sync[0], sync_error(m.sync[1], ErrorCode.REBALANCE_IN_PROGRESS)))
                m.sync = None
    st.timers.cancel(sync_key(group.group_id))
    group.pending_sync.clear()
    initial = group.is_in(GroupState.EMPTY)
    group.transition(GroupState.PREPARING_REBALANCE, now)
    log.info("group %s: preparing to rebalance generation %d (%s)", group.group_id, group.generation, reason)
    if st.journal is not None:
        st.journal(group.group_id, group.generation + 1, now)
    key = join_key(group.group_id)
    if initial:
        delay = st.config.initial_rebalance_delay_ms
        group.initial_delay_phase = True
        group.new_member_added = False
        group.initial_delay_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
        st.timers.schedule(key, now + delay, lambda t: join_timer(st, group, t))
    else:
        group.initial_delay_phase = False
        st.timers.schedule(key, now + group.rebalance_timeout_ms(), lambda t: join_timer(st, group, t))
        more = maybe_complete_join(st, group, now)  # everyone may already be waiting (Kafka)
        result.merge(more)
    return result


def join_timer(st: CoordinatorState, group: ClassicGroup, now: int) -> Result:
    if not group.is_in(GroupState.PREPARING_REBALANCE) or st.groups.get(group.group_id) is not group:
        return Result()
    if group.initial_delay_phase and group.new_member_added and group.initial_delay_remaining_ms > 0:
        delay = min(st.config.initial_rebalance_delay_ms, group.initial_delay_remaining_ms)
        group.initial_delay_remaining_ms -= delay
        group.new_member_added = False
        st.timers.schedule(join_key(group.group_id), now + delay, lambda t: join_timer(st, group, t))
        return Result()
    return complete_join(st, group, now)


def maybe_complete_join(st: CoordinatorState, group: ClassicGroup, now: int) -> Result:
    if group.is_in(GroupState.PREPARING_REBALANCE) and not group.initial_delay_phase and group.all_joined():
        return complete_join(st, group, now)
    return Result()


def complete_join(st: CoordinatorState, group: ClassicGroup, now: int) -> Result:
    """End the join phase: drop members that did not rejoin, bump the generation, answer everyone."""
    st.timers.cancel(join_key(group.group_id))
    result = Result()
    for m in group.not_yet_rejoined():
        if m.group_instance_id is not None:
            continue  # static members stay until their session times out (KIP-345)
        log.info("group %s: removing member %s, which did not rejoin in time", group.group_id, m.member_id)
        cancel_member_timers(st, group, m.member_id)
        group.remove(m.member_id)
    joined = [m for m in group.members.values() if m.awaiting_join]
    if group.members and not joined:
        # only static members that have not rejoined are left: wait for them a while longer
        st.timers.schedule(
            join_key(group.group_id), now + group.rebalance_timeout_ms(), lambda t: join_timer(st, group, t)
        )
        return result
    group.initial_delay_phase = False
    group.generation += 1
    if not group.members:
        group.protocol_name = None  # the protocol type stays, as in Kafka
        group.leader_id = None
        group.transition(GroupState.EMPTY, now)
        result.records.append(st.group_record(group))
        log.info("group %s: generation %d is empty", group.group_id, group.generation)
        return result
    group.protocol_name = group.select_protocol()
    if group.leader_id not in group.members or not group.members[group.leader_id].awaiting_join:
        group.leader_id = joined[0].member_id
    group.transition(GroupState.COMPLETING_REBALANCE, now)
    group.pending_sync = set(group.members)
    for m in group.members.values():
        if m.join is not None:
            waiter, version = m.join
            result.completions.append((waiter, _answer(group, m, version)))
            m.join = None
        m.is_new = False
        schedule_session(st, group, m, now)
    st.timers.schedule(
        sync_key(group.group_id),
        now + group.rebalance_timeout_ms(),
        lambda t: sync_timeout(st, group, group.generation, t),
    )
    log.info(
        "group %s: generation %d with %d members, protocol %s, leader %s",
        group.group_id,
        group.generation,
        len(group.members),
        group.protocol_name,
        group.leader_id,
    )
    return result


def sync_timeout(st: CoordinatorState, group: ClassicGroup, generation: int, now: int) -> Result:
    """Members that did not SyncGroup within the rebalance timeout are removed (Kafka 3.x), even
    once the leader's assignment made the group Stable."""
    if not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE) or group.generation != generation:
        return Result()
    if not group.pending_sync:
        return Result()
    for member_id in list(group.pending_sync):
        log.info("group %s: member %s did not sync in time", group.group_id, member_id)
        cancel_member_timers(st, group, member_id)
        group.remove(member_id)
    return prepare_rebalance(st, group, now, "members failed to sync")


def remove_member_and_rebalance(
    st: CoordinatorState, group: ClassicGroup, member_id: str, now: int, reason: str
) -> Result:
    member = group.remove(member_id)
    cancel_member_timers(st, group, member_id)
    result = Result()
    if member is not None and member.join is not None:
        result.completions.append(
            (member.join[0], join_response(member.join[1], ErrorCode.UNKNOWN_MEMBER_ID, member_id))
        )
    if member is not None and member.sync is not None:
        result.completions.append((member.sync[0], sync_error(member.sync[1], ErrorCode.UNKNOWN_MEMBER_ID)))
    if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        more = prepare_rebalance(st, group, now, reason)
        result.merge(more)
    elif group.is_in(GroupState.PREPARING_REBALANCE):
        more = maybe_complete_join(st, group, now)
        result.merge(more)
    return result


# ---------------------------------------------------------------------- JoinGroup


def join_group(
    st: CoordinatorState,
    req: JoinGroupRequest,
    version: int,
    client_id: str,
    client_host: str,
    waiter: Any,
    now: int,
    prelude: Sequence[CoordinatorRecord] = (),
) -> Result:
    """The JoinGroup operation; ``waiter`` is resolved when a parked join completes. ``prelude``:
    records written first once the request is accepted (the router's tombstones of an empty consumer
    group this group replaces)."""
    gid = req.group_id
    mid = req.member_id
    err = lambda code: Result(join_response(version, code, mid))  # noqa: E731
    if not gid:
        return err(ErrorCode.INVALID_GROUP_ID)
    cfg = st.config
    if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
        return err(ErrorCode.INVALID_SESSION_TIMEOUT)
    rebalance_timeout = (
        req.rebalance_timeout_ms if version >= 1 and req.rebalance_timeout_ms >= 0 else req.session_timeout_ms
    )
    protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
    group = st.groups.get(gid)
    if group is None:
        if mid:
            return err(ErrorCode.UNKNOWN_MEMBER_ID)
        group = st.groups[gid] = ClassicGroup(gid)
    if group.is_in(GroupState.DEAD):
        return err(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not group.supports(req.protocol_type, protocols):
        return err(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    if version >= 8 and req.reason:
        log.info("group %s: member %s joins: %s", gid, mid or "(new)", req.reason)
    instance = req.group_instance_id if version >= 5 else None
    spec = dict(
        group_instance_id=instance,
        client_id=client_id,
        client_host=client_host,
        rebalance_timeout_ms=rebalance_timeout,
        session_timeout_ms=req.session_timeout_ms,
        protocol_type=req.protocol_type,
        protocols=protocols,
    )
    result = (
        _join_unknown(st, group, version, spec, waiter, now)
        if not mid
        else _join_known(st, group, mid, version, spec, waiter, now)
    )
    result.records[:0] = prelude
    return result


def _park(
    st: CoordinatorState, group: ClassicGroup, member: Member, version: int, waiter: Any, now: int
) -> Result:
    result = Result(response=waiter)
    if member.join is not None:
        old_waiter, old_version = member.join
        result.completions.append(
            (old_waiter, join_response(old_version, ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        )
    member.join = (waiter, version)
    more = maybe_complete_join(st, group, now)
    result.merge(more)
    return result


def _add_and_rebalance(
    st: CoordinatorState,
    group: ClassicGroup,
    member: Member,
    version: int,
    waiter: Any,
    now: int,
    reason: str,
) -> Result:
    member.is_new = True
    group.add(member)
    group.new_member_added = True
    schedule_session(st, group, member, now)
    result = Result()
    if not group.is_in(GroupState.PREPARING_REBALANCE):
        result = prepare_rebalance(st, group, now, reason)
    parked = _park(st, group, member, version, waiter, now)
    return result.merge(parked)


def _join_unknown(
    st: CoordinatorState, group: ClassicGroup, version: int, spec: dict, waiter: Any, now: int
) -> Result:
    instance = spec["group_instance_id"]
    new_id = f"{instance if instance is not None else spec['client_id']}-{st.new_id()}"
    if instance is not None:
        old_id = group.static_member_id(instance)
        if old_id is not None:
            return _replace_static(st, group, old_id, new_id, version, spec, waiter, now)
    if len(group.members) + len(group.pending_members) >= st.config.max_size:
        return Result(join_response(version, ErrorCode.GROUP_MAX_SIZE_REACHED, ""))
    if instance is None and version >= 4:
        group.pending_members.add(new_id)
        st.timers.schedule(
            pending_key(group.group_id, new_id),
            now + spec["session_timeout_ms"],
            lambda t: pending_expired(st, group, new_id, t),
        )
        return Result(join_response(version, ErrorCode.MEMBER_ID_REQUIRED, new_id))
    member = Member(member_id=new_id, **spec)
    return _add_and_rebalance(st, group, member, version, waiter, now, f"new member {new_id} joined")


def _replace_static(
    st: CoordinatorState,
    group: ClassicGroup,
    old_id: str,
    new_id: str,
    version: int,
    spec: dict,
    waiter: Any,
    now: int,
) -> Result:
    """A known static member rejoins with a fresh id: the new id replaces the old (KIP-345)."""
    old = group.members[old_id]
    result = Result()
    if old.join is not None:
        result.completions.append(
            (old.join[0], join_response(old.join[1], ErrorCode.FENCED_INSTANCE_ID, old_id))
        )
    if old.sync is not None:
        result.completions.append((old.sync[0], sync_error(old.sync[1], ErrorCode.FENCED_INSTANCE_ID)))
    cancel_member_timers(st, group, old_id)
    was_leader = group.leader_id == old_id
    group.remove(old_id)
    member = Member(member_id=new_id, assignment=old.assignment, **spec)
    group.add(member)
    if was_leader:
        group.leader_id = new_id
    group.pending_sync.discard(old_id)
    schedule_session(st, group, member, now)
    log.info(
        "group %s: static member %s replaced %s with %s",
        group.group_id,
        spec["group_instance_id"],
        old_id,
        new_id,
    )
    if group.is_in(GroupState.STABLE) and group.select_protocol() == group.protocol_name:
        # Kafka's rule: while the selected protocol stays the same, persist the new member id and
        # metadata and hand back the current assignment, without a rebalance.
        result.records.append(st.group_record(group))
        if was_leader and version >= 9:
            # KIP-814: the leader learns it leads, gets the members' metadata, and must not assign
            resp = join_response(version, ErrorCode.NONE, new_id, group, _members_for_leader(group), True)
        elif was_leader:
            # older clients would recompute an assignment that nobody applies: do not tell them
            resp = join_response(version, ErrorCode.NONE, new_id, group)
            resp.leader = old_id
        else:
            resp = join_response(version, ErrorCode.NONE, new_id, group)
        result.response = resp
        return result
    if group.is_in(GroupState.PREPARING_REBALANCE):
        parked = _park(st, group, member, version, waiter, now)
    else:
        more = prepare_rebalance(st, group, now, f"static member {spec['group_instance_id']} rejoined")
        result.merge(more)
        parked = _park(st, group, member, version, waiter, now)
    return result.merge(parked)


def _join_known(
    st: CoordinatorState, group: ClassicGroup, mid: str, version: int, spec: dict, waiter: Any, now: int
) -> Result:
    instance = spec["group_instance_id"]
    if mid in group.pending_members:
        group.pending_members.discard(mid)
        st.timers.cancel(pending_key(group.group_id, mid))
        member = Member(member_id=mid, **spec)
        return _add_and_rebalance(st, group, member, version, waiter, now, f"member {mid} joined")
    member = group.members.get(mid)
    static_owner = group.static_member_id(instance)
    if instance is not None and static_owner is not None and static_owner != mid:
        return Result(join_response(version, ErrorCode.FENCED_INSTANCE_ID, mid))
    if member is None or group.is_in(GroupState.EMPTY):
        return Result(join_response(version, ErrorCode.UNKNOWN_MEMBER_ID, mid))
    schedule_session(st, group, member, now)
    if group.is_in(GroupState.PREPARING_REBALANCE):
        _update(member, spec)
        return _park(st, group, member, version, waiter, now)
    if group.is_in(GroupState.COMPLETING_REBALANCE):
        if member.matches(spec["protocols"]):
            return Result(_answer(group, member, version))
        _update(member, spec)
        result = prepare_rebalance(st, group, now, f"member {mid} changed its metadata")
    else:  # STABLE
        if member.member_id != group.leader_id and member.matches(spec["protocols"]):
            return Result(_answer(group, member, version))
        _update(member, spec)
        result = prepare_rebalance(st, group, now, f"member {mid} rejoined")
    parked = _park(st, group, member, version, waiter, now)
    return result.merge(parked)


def _update(member: Member, spec: dict) -> None:
    member.protocols = spec["protocols"]
    member.rebalance_timeout_ms = spec["rebalance_timeout_ms"]
    member.session_timeout_ms = spec["session_timeout_ms"]
    member.client_id = spec["client_id"]
    member.client_host = spec["client_host"]
