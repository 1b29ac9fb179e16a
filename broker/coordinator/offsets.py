"""OffsetCommit, OffsetFetch, OffsetDelete and offset expiry.

Commits from members are checked like Kafka's: FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS while the
group completes a rebalance, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION; a commit with generation -1 and
no member id (a "simple" commit from outside any group) is accepted only while the group is empty or
unknown. Each committed partition is one OffsetCommit record. Offsets of a group that has been empty
for ``offsets.retention.minutes`` expire (tombstones); so does the empty group itself once it has no
offsets left.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from operator import attrgetter
from struct import Struct
from typing import TYPE_CHECKING, Any

from broker.coordinator.generated.offset_commit_value import OffsetCommitValue
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.offset_commit import (
    RESPONSE_ENCODERS,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from broker.protocol.generated.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from broker.protocol.generated.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from broker.protocol.generated.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from broker.protocol.primitives import ZERO_UUID
from broker.protocol.primitives import new as _new

from .classic.group import ClassicGroup, GroupState
from .classic.join import schedule_session
from .records import OffsetCommitRecord
from .result import Result
from .timers import OFFSETS_EXPIRE

if TYPE_CHECKING:
    from .state import CoordinatorState, TopicLookup

log = logging.getLogger(__name__)


def _topics(st: CoordinatorState) -> TopicLookup:
    topics = st.topics
    assert topics is not None, "a state that runs operations has the broker's topics"
    return topics


def _commit_check(group: ClassicGroup | None, req: OffsetCommitRequest, version: int) -> ErrorCode:
    generation = req.generation_id_or_member_epoch if version >= 1 else -1
    member_id = req.member_id if version >= 1 else ""
    instance = req.group_instance_id if version >= 7 else None
    simple = generation < 0
    if group is None:
        return _NONE if simple else _ILLEGAL_GENERATION
    state = group.state
    if state is _DEAD:
        return _COORDINATOR_NOT_AVAILABLE
    if instance is not None:
        owner = group.static_member_id(instance)
        if owner is not None and owner != member_id:
            return _FENCED_INSTANCE_ID
    if simple and state is _EMPTY:
        return _NONE
    if member_id not in group.members:
        return _UNKNOWN_MEMBER_ID
    if generation != group.generation:
        return _ILLEGAL_GENERATION
    if state is _COMPLETING_REBALANCE:
        return _REBALANCE_IN_PROGRESS
    return _NONE


_NONE = ErrorCode.NONE
_ILLEGAL_GENERATION = ErrorCode.ILLEGAL_GENERATION
_COORDINATOR_NOT_AVAILABLE = ErrorCode.COORDINATOR_NOT_AVAILABLE
_FENCED_INSTANCE_ID = ErrorCode.FENCED_INSTANCE_ID
_UNKNOWN_MEMBER_ID = ErrorCode.UNKNOWN_MEMBER_ID
_REBALANCE_IN_PROGRESS = ErrorCode.REBALANCE_IN_PROGRESS
_DEAD = GroupState.DEAD
_EMPTY = GroupState.EMPTY
_COMPLETING_REBALANCE = GroupState.COMPLETING_REBALANCE


def _consumer_commit_check(group: Any, member_id: str, epoch: int, version: int) -> ErrorCode:
    """KIP-848 groups, as Kafka's ConsumerGroup.validateOffsetCommit: without a member epoch
    (admin, manual assignment) only while the group is empty; else the member must exist, a
    consumer-protocol member must use v9+, and the epoch must be the member's (a classic member's
    generation is its member epoch: ILLEGAL_GENERATION; otherwise STALE_MEMBER_EPOCH)."""
    if epoch < 0 and not group.members:
        return ErrorCode.NONE
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if member.classic is None and version < 9:
        return ErrorCode.UNSUPPORTED_VERSION
    if epoch != member.member_epoch:
        return ErrorCode.ILLEGAL_GENERATION if member.classic is not None else ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE


def _consumer_fetch_check(group: Any, member_id: str | None, epoch: int) -> ErrorCode:
    """KIP-848 groups, as Kafka's ConsumerGroup.validateOffsetFetch: a request without member id
    and epoch (admin clients, classic consumers) is always served; a member's must match."""
    if member_id is None and epoch < 0:
        return ErrorCode.NONE
    member = group.members.get(member_id or "")
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if epoch != member.member_epoch:
        return ErrorCode.ILLEGAL_GENERATION if member.classic is not None else ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE


def commit(
    st: CoordinatorState, req: OffsetCommitRequest, version: int, now: int, encoded: bool = False
) -> Result:
    """OffsetCommit: one record per committed partition. With ``encoded``, an answer with every
    partition committed is the response body already encoded (the same bytes the response object
    encodes to, kept per request shape: ``_ok_body``); any other answer is a response object."""
    topics = _topics(st)
    group_id = req.group_id
    group = st.groups.get(group_id)
    cgroup = st.consumer_groups.get(group_id)
    # The empty group id is a group like any other here, as in Kafka (kept for pre-0.9 clients that
    # committed offsets without a group); only null is refused, and it cannot be decoded.
    if cgroup is not None:
        epoch = req.generation_id_or_member_epoch if version >= 1 else -1
        code = _consumer_commit_check(cgroup, req.member_id if version >= 1 else "", epoch, version)
    else:
        code = _commit_check(group, req, version)
    result = Result()
    records = result.records
    add = records.append
    ok = code is _NONE
    #: (topic's position, id of a partition of it) -> its error code, for the partitions not committed
    failed: dict[tuple[int, int], int] = {}
    max_metadata = st.config.offset_metadata_max_bytes
    leader_epochs = version >= 6
    for pos, t in enumerate(req.topics):
        name = t.name if version < 10 else topics.name_for_id(t.topic_id)
        if ok and name is not None:
            # looked up once per topic: its partition count, and its id as Kafka writes it in the value
            info = topics.registry.get(name)
            count = info.partitions if info is not None else 0
            stored_id = (info.topic_id if info is not None else None) or ZERO_UUID
            for p in t.partitions:
                index = p.partition_index
                metadata = p.committed_metadata
                if not 0 <= index < count:
                    failed[pos, id(p)] = _UNKNOWN_TOPIC_OR_PARTITION
                elif (
                    metadata is not None
                    and len(metadata) * 4 > max_metadata
                    and len(metadata.encode()) > max_metadata
                ):
                    failed[pos, id(p)] = _OFFSET_METADATA_TOO_LARGE
                else:
                    # OffsetCommitRecord(group_id, name, index, ...) without its __init__ call
                    r = _new(OffsetCommitRecord)
                    r.group = group_id
                    r.topic = name
                    r.partition = index
                    r.offset = p.committed_offset
                    r.leader_epoch = p.committed_leader_epoch if leader_epochs else -1
                    r.metadata = metadata or ""
                    r.commit_timestamp = now
                    r.topic_id = stored_id
                    r.raw = None
                    add(r)
        else:
            pcode = int(code) if not ok else _UNKNOWN_TOPIC_ID
            for p in t.partitions:
                failed[pos, id(p)] = pcode
    if ok and group is not None:
        member = group.members.get(req.member_id)
        if member is not None:  # a commit is a heartbeat too
            if not st.timers.extend(member.session_key(group.group_id), now + member.session_timeout_ms):
                schedule_session(st, group, member, now)
    if not failed and encoded:
        result.response = _ok_body(req, version)
        return result
    result.response = OffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            OffsetCommitResponseTopic(
                name=t.name,
                topic_id=t.topic_id,
                partitions=[
                    OffsetCommitResponsePartition(p.partition_index, failed.get((pos, id(p)), 0))
                    for p in t.partitions
                ],
            )
            for pos, t in enumerate(req.topics)
        ],
    )
    return result


#: (version, each topic's name or id and partition indexes) -> the encoded all-committed answer
_OK_BODIES: dict[tuple, bytes] = {}
_INDEX = attrgetter("partition_index")


def _ok_body(req: OffsetCommitRequest, version: int) -> bytes:
    """The encoded answer of a commit with every partition committed, from the request's shape."""
    topics = req.topics
    if len(topics) == 1:  # the common shape: one topic, named up to v9 (a UUID hashes in Python)
        t = topics[0]
        parts = t.partitions
        indexes = parts[0].partition_index if len(parts) == 1 else tuple(map(_INDEX, parts))
        key: tuple = (version, t.topic_id if version >= 10 else t.name, indexes)
    else:
        key = (version, *[(t.name, t.topic_id, tuple(map(_INDEX, t.partitions))) for t in topics])
    body = _OK_BODIES.get(key)
    if body is None:
        response = OffsetCommitResponse(
            throttle_time_ms=0,
            topics=[
                OffsetCommitResponseTopic(
                    name=t.name,
                    topic_id=t.topic_id,
                    partitions=[OffsetCommitResponsePartition(p.partition_index, 0) for p in t.partitions],
                )
                for t in topics
            ],
        )
        body = RESPONSE_ENCODERS[version](response)
        if len(_OK_BODIES) >= 4096:  # bounded: the shapes committed now
            _OK_BODIES.clear()
        _OK_BODIES[key] = body
    return body


_UNKNOWN_TOPIC_ID = int(ErrorCode.UNKNOWN_TOPIC_ID)
_UNKNOWN_TOPIC_OR_PARTITION = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
_OFFSET_METADATA_TOO_LARGE = int(ErrorCode.OFFSET_METADATA_TOO_LARGE)


def _txn_commit_check(st: CoordinatorState, req: TxnOffsetCommitRequest, version: int) -> ErrorCode:
    """Kafka's validateTransactionalOffsetCommit (KIP-447 from v3: member id, generation, instance)."""
    generation = req.generation_id if version >= 3 else -1
    member_id = req.member_id if version >= 3 else ""
    instance = req.group_instance_id if version >= 3 else None
    cgroup = st.consumer_groups.get(req.group_id)
    if cgroup is not None:
        if generation < 0 and not cgroup.members:
            return ErrorCode.NONE
        member = cgroup.members.get(member_id)
        if generation < 0 and not member_id and instance is None:
            return ErrorCode.NONE  # older clients send no member: accepted, as Kafka does
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE if generation == member.member_epoch else ErrorCode.ILLEGAL_GENERATION
    group = st.groups.get(req.group_id)
    if group is None:
        return ErrorCode.NONE if generation < 0 else ErrorCode.ILLEGAL_GENERATION
    if group.is_in(GroupState.DEAD):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if generation < 0 and group.is_in(GroupState.EMPTY):
        return ErrorCode.NONE
    if generation >= 0 or member_id or instance is not None:
        if instance is not None:
            owner = group.static_member_id(instance)
            if owner is None or owner != member_id:
                return ErrorCode.UNKNOWN_MEMBER_ID if owner is None else ErrorCode.FENCED_INSTANCE_ID
        elif member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE


def txn_commit(st: CoordinatorState, req: TxnOffsetCommitRequest, version: int, now: int) -> Result:
    """TxnOffsetCommit: the offsets are written as the producer's transactional batch and stay
    pending (invisible to OffsetFetch) until the transaction's marker commits or drops them."""
    topics = _topics(st)
    code = _txn_commit_check(st, req, version)
    result = Result(producer=(req.producer_id, req.producer_epoch))
    out = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            pcode = code
            if pcode == ErrorCode.NONE:
                if not topics.exists(t.name, p.partition_index):
                    pcode = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif (
                    p.committed_metadata is not None
                    and len(p.committed_metadata.encode()) > st.config.offset_metadata_max_bytes
                ):
                    pcode = ErrorCode.OFFSET_METADATA_TOO_LARGE
            if pcode == ErrorCode.NONE:
                value = OffsetCommitValue(
                    offset=p.committed_offset,
                    leader_epoch=p.committed_leader_epoch if version >= 2 else -1,
                    metadata=p.committed_metadata or "",
                    commit_timestamp=now,
                    topic_id=topics.id_for_name(t.name) or ZERO_UUID,
                )
                result.records.append(st.offset_record(req.group_id, t.name, p.partition_index, value))
            parts.append(
                TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=int(pcode))
            )
        out.append(TxnOffsetCommitResponseTopic(name=t.name, partitions=parts))
    result.response = TxnOffsetCommitResponse(throttle_time_ms=0, topics=out)
    return result


def txn_marker(st: CoordinatorState, producer_id: int, epoch: int, commit: bool) -> Result:
    """A transaction's marker in the coordinator log (written by the transaction coordinator)."""
    return Result(marker=(producer_id, epoch, commit))


def fetch(st: CoordinatorState, req: OffsetFetchRequest, version: int) -> OffsetFetchResponse:
    topics = _topics(st)
    if version < 8:
        parts_cls = OffsetFetchResponsePartition
        topic_list = _fetch_group(
            st,
            req.group_id,
            req.topics,
            version,
            topics,
            parts_cls,
            OffsetFetchResponseTopic,
            stable=version >= 7 and req.require_stable,
        )
        return OffsetFetchResponse(throttle_time_ms=0, topics=topic_list, error_code=0)
    groups = []
    for g in req.groups:
        cgroup = st.consumer_groups.get(g.group_id)
        if version >= 9 and cgroup is not None and (g.member_id or g.member_epoch >= 0):
            code = _consumer_fetch_check(cgroup, g.member_id, g.member_epoch)
            if code:
                groups.append(OffsetFetchResponseGroup(g.group_id, [], int(code)))
                continue
        topic_list = _fetch_group(
            st,
            g.group_id,
            g.topics,
            version,
            topics,
            OffsetFetchResponsePartitions,
            OffsetFetchResponseTopics,
            stable=req.require_stable,
        )
        groups.append(OffsetFetchResponseGroup(g.group_id, topic_list, 0))
    return OffsetFetchResponse(throttle_time_ms=0, groups=groups)


def _fetch_group(
    st: CoordinatorState,
    group_id: str,
    wanted: Any,
    version: int,
    topics: TopicLookup,
    part_cls: Callable,
    topic_cls: Callable,
    stable: bool = False,
) -> list:
    """``stable`` (require_stable, v7+): a partition with a transactional commit still pending is
    UNSTABLE_OFFSET_COMMIT, as Kafka answers (the consumer retries)."""
    offsets = st.offsets.get(group_id)
    unstable = stable and bool(st.pending_txn)
    out = []
    if wanted is None:  # all committed offsets of the group
        for name, parts in sorted((offsets.by_topic if offsets else {}).items()):
            entries = [
                part_cls(i, -1, -1, "", int(ErrorCode.UNSTABLE_OFFSET_COMMIT))
                if unstable and st.has_pending_offset(group_id, name, i)
                else part_cls(i, c.offset, c.leader_epoch if version >= 5 else -1, c.metadata, 0)
                for i, c in sorted(parts.items())
            ]
            out.append(_topic(topic_cls, version, name, topics.id_for_name(name) or ZERO_UUID, entries))
        return out
    for t in wanted:
        name = t.name if version < 10 else topics.name_for_id(t.topic_id)
        entries = []
        for i in t.partition_indexes:
            c = offsets.get(name, i) if (offsets is not None and name is not None) else None
            if unstable and name is not None and st.has_pending_offset(group_id, name, i):
                entries.append(part_cls(i, -1, -1, "", int(ErrorCode.UNSTABLE_OFFSET_COMMIT)))
            elif c is None:
                code = ErrorCode.UNKNOWN_TOPIC_ID if (version >= 10 and name is None) else ErrorCode.NONE
                entries.append(part_cls(i, -1, -1, "", int(code)))
            else:
                entries.append(part_cls(i, c.offset, c.leader_epoch if version >= 5 else -1, c.metadata, 0))
        out.append(
            _topic(
                topic_cls, version, getattr(t, "name", name) or "", getattr(t, "topic_id", ZERO_UUID), entries
            )
        )
    return out


def _topic(topic_cls: Callable, version: int, name: str, topic_id: Any, entries: list) -> Any:
    if version >= 8:  # the v8+ topic struct also carries the topic id (v10)
        return topic_cls(name=name, topic_id=topic_id, partitions=entries)
    return topic_cls(name=name, partitions=entries)


_I16 = Struct(">h")
_I32 = Struct(">i")


def subscribed_topics(group: ClassicGroup) -> set[str] | None:
    """Topics the members of a "consumer" group subscribe to (ConsumerProtocolSubscription), or None
    when the group uses another protocol type and its subscriptions cannot be known."""
    if group.protocol_type != "consumer" or group.protocol_name is None:
        return None
    topics: set[str] = set()
    for m in group.members.values():
        try:
            data = m.metadata(group.protocol_name)
            pos = 2  # version
            (count,) = _I32.unpack_from(data, pos)
            pos += 4
            for _ in range(count):
                (n,) = _I16.unpack_from(data, pos)
                topics.add(data[pos + 2 : pos + 2 + n].decode())
                pos += 2 + n
        except Exception:
            return None
    return topics


def delete(st: CoordinatorState, req: OffsetDeleteRequest) -> Result:
    topics = _topics(st)
    group = st.groups.get(req.group_id)
    if group is None or group.is_in(GroupState.DEAD):
        return Result(OffsetDeleteResponse(error_code=int(ErrorCode.GROUP_ID_NOT_FOUND), topics=[]))
    subscribed: set[str] | None = set()
    if not group.is_in(GroupState.EMPTY):
        subscribed = subscribed_topics(group)
        if subscribed is None:
            return Result(OffsetDeleteResponse(error_code=int(ErrorCode.NON_EMPTY_GROUP), topics=[]))
    result = Result()
    out = []
    offsets = st.offsets.get(req.group_id)
    for t in req.topics:
        parts = []
        for p in t.partitions:
            if t.name in subscribed:
                code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            elif not topics.exists(t.name, p.partition_index):
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                code = ErrorCode.NONE
                if offsets is not None and offsets.get(t.name, p.partition_index) is not None:
                    result.records.append(st.offset_record(req.group_id, t.name, p.partition_index, None))
            parts.append(OffsetDeleteResponsePartition(p.partition_index, int(code)))
        out.append(OffsetDeleteResponseTopic(t.name, parts))
    result.response = OffsetDeleteResponse(error_code=0, topics=out)
    return result


def expire(st: CoordinatorState, now: int) -> Result:
    """Offset retention as Kafka does it (KIP-211): an empty group's offsets expire once it has been
    empty for the retention period; a standalone group's (no protocol type) and a consumer group's
    offsets of topics it does not subscribe to expire by commit time. An empty group with no offsets
    left is deleted."""
    result = Result()
    retention = st.config.offsets_retention_ms
    for group_id, group in list(st.groups.items()):
        if group.is_in(GroupState.DEAD):
            continue
        offsets = st.offsets.get(group_id)
        expired: list[tuple[str, int]] = []
        if offsets is not None:
            by_commit_time = True
            keep: set[str] | None = set()
            if group.protocol_type is not None and group.is_in(GroupState.EMPTY):
                by_commit_time = False
            elif group.protocol_type is not None:
                keep = subscribed_topics(group) if group.is_in(GroupState.STABLE) else None
            if keep is not None:
                for topic, parts in offsets.by_topic.items():
                    if topic in keep:
                        continue
                    for partition, c in parts.items():
                        base = c.commit_timestamp if by_commit_time else group.state_timestamp
                        if base + retention <= now:
                            expired.append((topic, partition))
        for topic, partition in expired:
            result.records.append(st.offset_record(group_id, topic, partition, None))
        if expired:
            log.info("group %s: %d offsets expired", group_id, len(expired))
        left = (len(offsets) if offsets is not None else 0) - len(expired)
        if group.is_in(GroupState.EMPTY) and not group.members and left == 0:
            result.records.append(st.group_tombstone(group_id))
    schedule_expiry(st, now)
    return result


def forget_topic(st: CoordinatorState, topic: str) -> Result:
    result = Result()
    for group_id, offsets in st.offsets.items():
        for partition in offsets.by_topic.get(topic, {}):
            result.records.append(st.offset_record(group_id, topic, partition, None))
    return result


def schedule_expiry(st: CoordinatorState, now: int) -> None:
    st.timers.schedule(
        OFFSETS_EXPIRE, now + st.config.offsets_retention_check_interval_ms, lambda t: expire(st, t)
    )
