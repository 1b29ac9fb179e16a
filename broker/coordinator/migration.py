"""Online migration between classic and consumer groups (KIP-848, "Supporting Online Consumer
Group Upgrade"), as Apache Kafka 4.x does it.

- Upgrade: the first ConsumerGroupHeartbeat for a non-empty classic group whose members all use
  the consumer embedded protocol converts it in place (``upgrade``): the generation becomes the
  group epoch and the target assignment epoch, each member's assignment (decoded from its classic
  assignment bytes) becomes its current and target assignment at that epoch, so nobody loses a
  partition. The joining member is then handled as any consumer-protocol join.
- Classic members of a consumer group keep using JoinGroup/SyncGroup/Heartbeat/LeaveGroup, each
  translated for that member alone: consumer/classic_members.py.
- Downgrade: when the last consumer-protocol member leaves or is fenced and classic members remain
  (``maybe_downgrade``, the state's ``downgrade`` service: consumer groups reach it only through
  that function), the group becomes a classic group at generation = group epoch with each
  member's current assignment, and a rebalance starts.
- ``group.consumer.migration.policy`` (bidirectional | upgrade | downgrade | disabled) gates both
  conversions, with Kafka's answers when refused (GROUP_ID_NOT_FOUND for an upgrade; a refused
  downgrade leaves a consumer group of classic members).

Conversions are records (tombstones of one kind of group, the records of the other) in one batch,
so a restart replays either the old group or the new one.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING
from uuid import UUID

from broker.protocol.errors import ErrorCode

from .classic import join as classic_join
from .classic.group import ClassicGroup, Member
from .classic.responses import join_response, sync_error
from .consumer import heartbeat as cg
from .consumer import records as rec
from .consumer.classic_members import PROTOCOL_TYPE, assignment_bytes
from .consumer.group import ClassicMeta, ConsumerGroup, ConsumerMember, TopicMeta
from .consumer.reconcile import MemberState, Progress
from .embedded import EmbeddedProtocolError, decode_assignment, decode_subscription
from .result import Result
from .timers import join_key, pending_key, sync_key

if TYPE_CHECKING:
    from .state import CoordinatorState

log = logging.getLogger(__name__)

POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


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


def upgrade(st: CoordinatorState, classic: ClassicGroup, result: Result, now: int) -> ConsumerGroup:
    """Convert a live classic group; appends the conversion records to ``result`` and returns the
    consumer group they describe (not yet registered: replay does that)."""

    gid = classic.group_id
    generation = classic.generation
    topics = st.topics
    assert topics is not None, "a state that runs operations has the broker's topics"
    # parked requests of a rebalance in progress: the members rejoin, now into the consumer group
    for m in classic.members.values():
        if m.join is not None:
            result.completions.append(
                (
                    m.join[0],
                    join_response(m.join[1], ErrorCode.REBALANCE_IN_PROGRESS, m.member_id),
                )
            )
            m.join = None
        if m.sync is not None:
            result.completions.append((m.sync[0], sync_error(m.sync[1], ErrorCode.REBALANCE_IN_PROGRESS)))
            m.sync = None
        classic_join.cancel_member_timers(st, classic, m.member_id)
    for pending in classic.pending_members:
        st.timers.cancel(pending_key(gid, pending))
    st.timers.cancel(join_key(gid))
    st.timers.cancel(sync_key(gid))

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
        cm.assignment = assignment_bytes(
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
