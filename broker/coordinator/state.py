"""The coordinator's state: every group (classic and consumer) and every committed offset, the
services operations need (timers, topics, assignors, per-group configs, member ids), and ``replay``
-- the code that applies records, used both live (after an append) and at start-up.

Where state changes:

- Committed offsets and consumer groups change only through ``replay``: their operations
  (offsets.py, admin.py, consumer/, migration.py) compute on copies and return records.
- Classic groups keep their rebalance in memory, as Kafka's classic groups do: JoinGroup and the
  join phase (classic/join.py) add and update members and bump the generation, protocol and leader
  in place; the GroupMetadata record written when the group becomes Stable or Empty (SyncGroup,
  classic/sync.py, or an empty join phase) persists that outcome, and its replay sets the same fields
  again (the record is the truth after a restart).
- Transient state (parked requests, pending members, timers) is never persisted.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Iterator, KeysView
from dataclasses import dataclass, field
from struct import Struct
from typing import Any, Protocol

from broker.coordinator.generated.group_metadata_key import GroupMetadataKey
from broker.coordinator.generated.group_metadata_value import GroupMetadataValue, MemberMetadata
from broker.coordinator.generated.offset_commit_key import OffsetCommitKey
from broker.coordinator.generated.offset_commit_value import DECODERS as _VALUE_DECODERS
from broker.coordinator.generated.offset_commit_value import OffsetCommitValue
from broker.protocol.primitives import to_uuid

from .classic.group import ClassicGroup, GroupState, Member
from .consumer import records as crec
from .consumer.assign import assign as server_assign
from .consumer.group import ClassicMeta, ConsumerGroup, ConsumerMember, TopicMeta
from .consumer.reconcile import MemberState, Progress
from .records import GROUP_METADATA, OFFSET_COMMIT, CoordinatorRecord, OffsetCommitRecord
from .result import Result
from .timers import Timers

log = logging.getLogger(__name__)

_V4_DECODE = _VALUE_DECODERS[4]
_replayed = ClassicGroup.replayed


@dataclass(frozen=True)
class GroupConfig:
    """The group coordinator's settings (the broker's group.* properties)."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000

    @classmethod
    def from_config(cls, c: Any) -> GroupConfig:
        return cls(
            min_session_timeout_ms=c["group.min.session.timeout.ms"],
            max_session_timeout_ms=c["group.max.session.timeout.ms"],
            initial_rebalance_delay_ms=c["group.initial.rebalance.delay.ms"],
            max_size=c["group.max.size"],
            offset_metadata_max_bytes=c["offset.metadata.max.bytes"],
            offsets_retention_ms=c["offsets.retention.minutes"] * 60000,
            offsets_retention_check_interval_ms=c["offsets.retention.check.interval.ms"],
        )


@dataclass(frozen=True)
class ConsumerGroupConfig:
    """KIP-848 consumer group settings (``group.consumer.*``)."""

    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")
    migration_policy: str = "bidirectional"

    @classmethod
    def from_config(cls, c: Any) -> ConsumerGroupConfig:
        return cls(
            session_timeout_ms=c["group.consumer.session.timeout.ms"],
            heartbeat_interval_ms=c["group.consumer.heartbeat.interval.ms"],
            max_size=c["group.consumer.max.size"],
            assignors=tuple(a.strip() for a in c["group.consumer.assignors"].split(",") if a.strip()),
            migration_policy=c["group.consumer.migration.policy"],
        )


@dataclass(slots=True)
class CommittedOffset:
    """A partition's committed offset in a group."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    topic_id: Any = None


#: an OffsetCommitValue v4 with empty metadata and a topic id, as the log holds it (version first)
_EMPTY_V4 = Struct(">hqiBq3s16s")
_TOPIC_ID_TAG = b"\x01\x00\x10"


def decode_committed(raw: bytes) -> CommittedOffset:
    """A committed offset kept as its OffsetCommitValue's bytes (version included), as replay stores
    it: a v4 value in Kafka's layout (the only one kept so, see ``PartitionOffsets``)."""
    if len(raw) == 42 and raw[14] == 1:
        _v, offset, epoch, _m, ts, tag, raw_id = _EMPTY_V4.unpack(raw)
        if tag == _TOPIC_ID_TAG:
            return CommittedOffset(offset, epoch, "", ts, to_uuid(raw_id))
    v, _ = _V4_DECODE(raw, 2)
    return CommittedOffset(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.topic_id)


class PartitionOffsets:
    """The committed offsets of one group in one topic: partition -> CommittedOffset, a mapping.

    Replay stores an offset as the bytes of the OffsetCommitValue it was written with (loader.py
    slices them out of the log, ``to_batch`` leaves them on the record it encoded) in ``raw``, the
    dict underneath; the first read decodes them into a CommittedOffset, kept in their place. So a
    commit and a restart make no object per committed partition beyond those bytes. ``raw`` values
    are CommittedOffset or bytes of a v4 value in Kafka's layout, nothing else.

    The start-up loader's compiled walk hands over a group and topic's offsets as the bytes of their
    OffsetCommit records, undecoded, with the function that reads them (``packed``): ``raw`` is made
    from them on its first use, so a restart makes one object per group and topic until the group's
    offsets are read (OffsetFetch, expiry, describe, a commit)."""

    __slots__ = ("_raw", "_records", "_unpack")

    def __init__(self, items: Any = ()) -> None:
        self._raw: dict[int, CommittedOffset | bytes] | None = dict(items) if items else {}
        self._records: bytes | None = None
        self._unpack: Callable[[bytes], dict[int, bytes]] | None = None

    @classmethod
    def adopt(cls, raw: dict[int, CommittedOffset | bytes]) -> PartitionOffsets:
        """A PartitionOffsets whose dict is ``raw`` itself (not a copy)."""
        parts = cls.__new__(cls)
        parts._raw, parts._records, parts._unpack = raw, None, None
        return parts

    @classmethod
    def packed(cls, records: bytes, unpack: Callable[[bytes], dict[int, bytes]]) -> PartitionOffsets:
        """The offsets of ``records``, OffsetCommit records of this group and topic in log order:
        ``unpack(records)`` is partition -> the last v4 value's bytes, called on first use."""
        parts = cls.__new__(cls)
        parts._raw, parts._records, parts._unpack = None, records, unpack
        return parts

    @property
    def raw(self) -> dict[int, CommittedOffset | bytes]:
        """partition -> CommittedOffset or a v4 value's bytes (made from packed records on first use)."""
        raw = self._raw
        if raw is None:
            raw = self._raw = self._unpack(self._records)  # type: ignore[misc,arg-type]
            self._records = self._unpack = None
        return raw

    def get(self, partition: int, default: Any = None) -> Any:
        c = self.raw.get(partition)
        if c is None:
            return default
        if type(c) is bytes:
            c = self.raw[partition] = decode_committed(c)
        return c

    def __getitem__(self, partition: int) -> CommittedOffset:
        c = self.raw[partition]
        if type(c) is bytes:
            c = self.raw[partition] = decode_committed(c)
        return c  # type: ignore[return-value]

    def __setitem__(self, partition: int, committed: CommittedOffset) -> None:
        self.raw[partition] = committed

    def __contains__(self, partition: object) -> bool:
        return partition in self.raw

    def __iter__(self) -> Iterator[int]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)

    def keys(self) -> KeysView[int]:
        return self.raw.keys()

    def items(self) -> list[tuple[int, CommittedOffset]]:
        raw = self.raw
        for p, c in raw.items():
            if type(c) is bytes:
                raw[p] = decode_committed(c)  # a value replaced, no key added: safe while iterating
        return list(raw.items())  # type: ignore[arg-type]

    def values(self) -> list[CommittedOffset]:
        return [c for _p, c in self.items()]

    def pop(self, partition: int, default: Any = None) -> Any:
        c = self.raw.pop(partition, None)
        if c is None:
            return default
        return decode_committed(c) if type(c) is bytes else c

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PartitionOffsets):
            return self.items() == other.items()
        if isinstance(other, dict):
            return dict(self.items()) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PartitionOffsets({dict(self.items())!r})"


@dataclass
class Offsets:
    """Committed offsets of one group: topic -> partition -> CommittedOffset."""

    by_topic: dict[str, PartitionOffsets] = field(default_factory=dict)

    def get(self, topic: str, partition: int) -> CommittedOffset | None:
        return self.by_topic.get(topic, {}).get(partition)

    def __len__(self) -> int:
        return sum(len(p) for p in self.by_topic.values())


# ---------------------------------------------------------------------- services


class TopicInfo(Protocol):
    name: str
    topic_id: uuid.UUID
    partitions: int


class TopicRegistryView(Protocol):
    def get(self, name: str) -> TopicInfo | None: ...
    def all(self) -> Iterable[TopicInfo]: ...


class TopicLookup(Protocol):
    """What operations need to know about the broker's topics (the facade's TopicLookup)."""

    registry: TopicRegistryView

    def exists(self, name: str, partition: int) -> bool: ...
    def name_for_id(self, topic_id: uuid.UUID) -> str | None: ...
    def id_for_name(self, name: str) -> uuid.UUID | None: ...


class GroupConfigLookup(Protocol):
    """Per-group config overrides (GroupConfigStore): the value in force for a group."""

    def value(self, group_id: str, name: str) -> int: ...


#: a server-side assignor run: (assignor name, group, members, subscribed topics) -> target
Assign = Callable[[str, ConsumerGroup, dict[str, ConsumerMember], dict[uuid.UUID, TopicMeta]], dict]
#: removing a consumer group member may convert the group back to a classic one (migration.py):
#: (state, group, leaving member id, result to add the records to, now) -> True when it did
Downgrade = Callable[["CoordinatorState", ConsumerGroup, str, Result, int], bool]


def _rebalance_timeout(m: Any) -> int:
    """A GroupMetadataValue member's rebalance timeout; v0 records lack it (-1): the session timeout,
    as Kafka loads them."""
    return m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout


def random_id() -> str:
    """Member ids in production: a random UUID, as Kafka's."""
    return str(uuid.uuid4())


class CoordinatorState:
    def __init__(
        self,
        config: GroupConfig,
        timers: Timers,
        consumer_config: ConsumerGroupConfig | None = None,
        *,
        topics: TopicLookup | None = None,
        assign: Assign | None = None,
        group_configs: GroupConfigLookup | None = None,
        new_id: Callable[[], str] = random_id,
        downgrade: Downgrade | None = None,
        journal: Callable[[str, int, int], None] | None = None,
    ):
        self.config = config
        self.consumer_config = consumer_config or ConsumerGroupConfig()
        self.timers = timers
        self.groups: dict[str, ClassicGroup] = {}
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.offsets: dict[str, Offsets] = {}
        #: the broker's topics; None only for a state that is replayed, never operated on
        self.topics = topics
        #: the server-side assignor entry point of consumer groups (consumer/assign.py)
        self.assign: Assign = assign or server_assign
        #: per-group overrides (GroupConfigStore); None means broker defaults only
        self.group_configs = group_configs
        #: a fresh member id (a UUID string; tests inject a seeded one)
        self.new_id = new_id
        #: the one back edge from consumer groups to migration (groups.py passes migration's);
        #: None: consumer groups are never converted back
        self.downgrade = downgrade
        #: told (group id, the generation being formed, now) when a classic group starts a rebalance:
        #: the join phase's start, which Kafka's GroupMetadata record does not carry (a diagnostic
        #: side channel like the log, written by the facade; never read back by the coordinator)
        self.journal = journal
        #: producer id -> the offsets its open transaction committed (TxnOffsetCommit), not visible
        #: until its commit marker (Kafka's pendingTransactionalOffsets): (group, topic, partition)
        #: -> (the offset, the log offset of its record)
        self.pending_txn: dict[int, dict[tuple[str, str, int], tuple[CommittedOffset, int]]] = {}
        #: (group, topic, partition) -> log offset of the last plain commit written while a
        #: transaction had one pending for it: the newer of the two wins at the marker, as in Kafka
        self.plain_after_pending: dict[tuple[str, str, int], int] = {}

    def consumer_session_timeout_ms(self, group_id: str) -> int:
        if self.group_configs is not None:
            return self.group_configs.value(group_id, "consumer.session.timeout.ms")
        return self.consumer_config.session_timeout_ms

    def consumer_heartbeat_interval_ms(self, group_id: str) -> int:
        if self.group_configs is not None:
            return self.group_configs.value(group_id, "consumer.heartbeat.interval.ms")
        return self.consumer_config.heartbeat_interval_ms

    # ------------------------------------------------------------------ replay

    def replay(self, record: CoordinatorRecord, offset: int = -1, timestamp: int = -1) -> None:
        if type(record) is OffsetCommitRecord and not self.pending_txn:
            # what OffsetCommit writes (offsets.py): kept as the value's bytes to_batch encoded
            group_id = record.group
            group = self.offsets.get(group_id)
            parts = group.by_topic.get(record.topic) if group is not None else None
            if parts is None or (group_id not in self.groups and group_id not in self.consumer_groups):
                parts = self.offset_partitions(group_id, record.topic)
            else:
                parts = parts.raw
            raw = record.raw
            parts[record.partition] = (
                raw
                if raw is not None
                else CommittedOffset(
                    record.offset,
                    record.leader_epoch,
                    record.metadata,
                    record.commit_timestamp,
                    record.topic_id,
                )  # fmt: skip
            )
            return
        if record.type == OFFSET_COMMIT:
            value = record.value
            if value is not None and not self.pending_txn:
                # the common case, ``put_offset`` inlined: a commit is replayed once per partition
                key = record.key
                group_id = key.group
                group = self.offsets.get(group_id)
                parts = group.by_topic.get(key.topic) if group is not None else None
                if parts is not None and (group_id in self.groups or group_id in self.consumer_groups):
                    parts.raw[key.partition] = CommittedOffset(
                        value.offset,
                        value.leader_epoch,
                        value.metadata,
                        value.commit_timestamp,
                        value.topic_id,
                    )
                    return
            self._replay_offset(record.key, value, offset)
        elif record.type == GROUP_METADATA:
            self._replay_group(record.key, record.value, timestamp)
        elif record.type in crec.TYPES:
            self._replay_consumer(record)
        else:
            log.warning("skipping coordinator record of type %d at offset %d", record.type, offset)

    def replay_commits(self, records: list[Any], base_offset: int, timestamp: int) -> None:
        """Replay of a run of appended records (the commits a lingering batch holds, runtime.py
        ``drain``), the first at ``base_offset``: the same as ``replay`` of each in order, with
        OffsetCommitRecords that ``to_batch`` has encoded stored in bulk (their group and topic's
        offsets looked up once per run of the same group and topic, not per record)."""
        if self.pending_txn:  # a plain commit after a pending one is recorded per offset
            for i, record in enumerate(records):
                self.replay(record, base_offset + i, timestamp)
            return
        groups, consumer_groups, offsets = self.groups, self.consumer_groups, self.offsets
        group_id = topic = None
        parts: dict[int, CommittedOffset | bytes] = {}
        for i, record in enumerate(records):
            if type(record) is not OffsetCommitRecord or record.raw is None:
                self.replay(record, base_offset + i, timestamp)
                group_id = None  # (a record replayed another way may change any group)
                continue
            if record.group != group_id or record.topic != topic:
                group_id, topic = record.group, record.topic
                group = offsets.get(group_id)
                held = group.by_topic.get(topic) if group is not None else None
                if held is None or (group_id not in groups and group_id not in consumer_groups):
                    parts = self.offset_partitions(group_id, topic)
                else:
                    parts = held.raw
            parts[record.partition] = record.raw

    def replay_transactional(
        self, producer_id: int, record: CoordinatorRecord, offset: int = -1, timestamp: int = -1
    ) -> None:
        """A record of a producer's transactional batch (TxnOffsetCommit): pending until the marker."""
        if record.type != OFFSET_COMMIT or record.value is None:
            self.replay(record, offset, timestamp)
            return
        k, v = record.key, record.value
        pending = self.pending_txn.setdefault(producer_id, {})
        committed = CommittedOffset(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.topic_id)
        pending[(k.group, k.topic, k.partition)] = (committed, offset)

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        """A transaction marker: the producer's pending offsets become committed (unless a plain
        commit of the same partition was written after them: Kafka keeps the most recent), or are
        dropped."""
        pending = self.pending_txn.pop(producer_id, None)
        if not pending:
            return
        for key, (committed, record_offset) in pending.items():
            if commit and self.plain_after_pending.get(key, -1) < record_offset:
                self.put_offset(key[0], key[1], key[2], committed)
            if not any(key in p for p in self.pending_txn.values()):
                self.plain_after_pending.pop(key, None)

    def has_pending_offset(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether an open transaction has committed an offset of this partition (require_stable)."""
        key = (group_id, topic, partition)
        return any(key in p for p in self.pending_txn.values())

    def _replay_offset(self, key: OffsetCommitKey, value: OffsetCommitValue | None, offset: int = -1) -> None:
        if self.pending_txn and value is not None:
            k = (key.group, key.topic, key.partition)
            if any(k in p for p in self.pending_txn.values()):
                self.plain_after_pending[k] = offset
        if value is None:
            self.remove_offset(key.group, key.topic, key.partition)
            for pending in self.pending_txn.values():  # as Kafka: a tombstone drops pending ones too
                pending.pop((key.group, key.topic, key.partition), None)
            return
        self.put_offset(
            key.group,
            key.topic,
            key.partition,
            CommittedOffset(
                value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, value.topic_id
            ),
        )

    def put_offset(self, group_id: str, topic: str, partition: int, committed: CommittedOffset) -> None:
        """Replay of an OffsetCommit record."""
        self.offset_partitions(group_id, topic)[partition] = committed

    def offset_partitions(self, group_id: str, topic: str) -> dict[int, CommittedOffset | bytes]:
        """The committed offsets of ``group_id`` in ``topic`` by partition, for an OffsetCommit to be
        replayed into (the start-up fast path, loader.py, keeps it for the group's next records): the
        ``raw`` dict of its PartitionOffsets, whose values are CommittedOffset or a v4 value's bytes."""
        group = self.offsets.get(group_id)
        if group is None:
            parts = PartitionOffsets()
            self.offsets[group_id] = Offsets({topic: parts})
        else:
            parts = group.by_topic.get(topic)
            if parts is None:
                parts = group.by_topic[topic] = PartitionOffsets()
        # offsets alone keep a group listable (Empty), as in Kafka
        if group_id not in self.groups and group_id not in self.consumer_groups:
            self.groups[group_id] = _replayed(group_id)
        return parts.raw

    def replay_offsets(
        self,
        group_id: str,
        topic: str,
        records: bytes,
        unpack: Callable[[bytes], dict[int, bytes]],
    ) -> None:
        """Replay of a run of OffsetCommit records of one group and topic, as the start-up loader's
        compiled walk hands them over (loader.py): ``records`` their partitions and values in log order,
        packed (_replay.c's pack_run);
        ``unpack(records)`` is partition -> the last v4 value's bytes. The same as
        ``offset_partitions(group_id, topic).update(unpack(records))``; a group and topic without
        offsets yet keeps the records and unpacks them on first use (``PartitionOffsets.packed``)."""
        group = self.offsets.get(group_id)
        if group is None:
            self.offsets[group_id] = Offsets({topic: PartitionOffsets.packed(records, unpack)})
        else:
            parts = group.by_topic.get(topic)
            if parts is None:
                group.by_topic[topic] = PartitionOffsets.packed(records, unpack)
            else:
                parts.raw.update(unpack(records))
        # offsets alone keep a group listable (Empty), as in Kafka
        if group_id not in self.groups and group_id not in self.consumer_groups:
            self.groups[group_id] = _replayed(group_id)

    def native_targets(self) -> tuple | None:
        """What the start-up loader's compiled walk (loader.py, _replay.c's ``scan``) makes objects in
        directly instead of calling ``replay_empty_group`` for a new group's Empty GroupMetadata record
        and ``replay_offsets`` for a run of offsets of a group without offsets yet -- the same objects
        those two make (``ClassicGroup.replayed``, ``Offsets`` of a ``PartitionOffsets.packed``):
        (groups, consumer_groups, offsets, ClassicGroup, GroupState.EMPTY, Offsets, PartitionOffsets).
        None when either method is replaced (a subclass or an instance's own): the walk calls them."""
        cls = type(self)
        if (
            cls.replay_offsets is not CoordinatorState.replay_offsets
            or cls.replay_empty_group is not CoordinatorState.replay_empty_group
            or "replay_offsets" in vars(self)
            or "replay_empty_group" in vars(self)
        ):
            return None
        return (
            self.groups,
            self.consumer_groups,
            self.offsets,
            ClassicGroup,
            GroupState.EMPTY,
            Offsets,
            PartitionOffsets,
        )

    def remove_offset(self, group_id: str, topic: str, partition: int) -> None:
        """Replay of an OffsetCommit tombstone."""
        group = self.offsets.get(group_id)
        if group is not None:
            parts = group.by_topic.get(topic) or PartitionOffsets()
            parts.raw.pop(partition, None)
            if not parts:
                group.by_topic.pop(topic, None)
            if not group.by_topic:
                del self.offsets[group_id]

    def _replay_group(self, key: GroupMetadataKey, value: GroupMetadataValue | None, ts: int) -> None:
        if value is None:
            group = self.groups.pop(key.group, None)
            if group is not None:
                group.state = GroupState.DEAD
            return
        if not value.members:
            self.replay_empty_group(
                key.group,
                value.protocol_type,
                value.generation,
                value.protocol,
                value.leader,
                value.current_state_timestamp,
            )
            return
        group = self.groups.get(key.group)
        if group is None:
            group = self.groups[key.group] = ClassicGroup(key.group)
        group.generation = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        group.state_timestamp = value.current_state_timestamp
        wanted = {m.member_id for m in value.members}
        for member_id in [m for m in group.members if m not in wanted]:
            group.remove(member_id)
        for m in value.members:
            member = group.members.get(m.member_id)
            protocol = value.protocol or ""
            if member is None:
                member = Member(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=_rebalance_timeout(m),
                    session_timeout_ms=m.session_timeout,
                    protocol_type=value.protocol_type,
                    protocols=[(protocol, m.subscription)],
                )
                group.add(member)
            else:
                # the record is the truth for every persisted field of the member
                member.client_id, member.client_host = m.client_id, m.client_host
                member.rebalance_timeout_ms, member.session_timeout_ms = (
                    _rebalance_timeout(m),
                    m.session_timeout,
                )
                member.protocol_type = value.protocol_type
                others = [(n, md) for n, md in member.protocols if n != protocol]
                mine = [
                    (n, m.subscription if n == protocol else md)
                    for n, md in member.protocols
                    if n == protocol
                ]
                member.protocols = mine + others if mine else [(protocol, m.subscription)] + others
                if member.group_instance_id != m.group_instance_id:
                    if member.group_instance_id is not None:
                        group.static_members.pop(member.group_instance_id, None)
                    member.group_instance_id = m.group_instance_id
                    if m.group_instance_id is not None:
                        group.static_members[m.group_instance_id] = m.member_id
            member.assignment = m.assignment
        group.leader_id = value.leader
        group.state = GroupState.STABLE if value.members else GroupState.EMPTY

    def replay_empty_group(
        self,
        group_id: str,
        protocol_type: str,
        generation: int,
        protocol: str | None,
        leader: str | None,
        state_timestamp: int,
    ) -> None:
        """Replay of a GroupMetadata record without members (an Empty group): its fields, as
        ``_replay_group`` sets them (which calls this for such a record; the start-up loader calls it
        with the fields it read from the record's bytes)."""
        group = self.groups.get(group_id)
        if group is None:
            # a restart makes one per group: made with its fields and its containers left to first
            # use (ClassicGroup.replayed; test_replay_native checks it is the same group)
            self.groups[group_id] = _replayed(
                group_id, generation, protocol_type or None, protocol, leader, state_timestamp
            )
            return
        group.generation = generation
        group.protocol_type = protocol_type or None
        group.protocol_name = protocol
        group.leader_id = leader
        group.state_timestamp = state_timestamp
        if group.members:
            for member_id in list(group.members):
                group.remove(member_id)
            group.leader_id = leader
        group.state = GroupState.EMPTY

    def _replay_consumer(self, record: CoordinatorRecord) -> None:
        gid = record.key.group_id
        group = self.consumer_groups.get(gid)
        v = record.value
        t = record.type
        if group is None:
            if v is None:
                return
            group = self.consumer_groups[gid] = ConsumerGroup(gid)
            self.groups.pop(gid, None)  # an offsets-only classic entry gives way to the consumer group
        if t == crec.GROUP_EPOCH:
            if v is None:
                group.dead = True
                del self.consumer_groups[gid]
            else:
                group.group_epoch = v.epoch
        elif t == crec.PARTITION_METADATA:
            group.topics = (
                {} if v is None else {m.topic_id: TopicMeta(m.topic_name, m.num_partitions) for m in v.topics}
            )
        elif t == crec.TARGET_EPOCH:
            if v is not None:
                group.assignment_epoch = v.assignment_epoch
        elif t == crec.TARGET_MEMBER:
            mid = record.key.member_id
            if v is None:
                group.target.pop(mid, None)
            else:
                group.target[mid] = crec.to_assignment(v.topic_partitions)
        elif t == crec.MEMBER_METADATA:
            mid = record.key.member_id
            if v is None:
                group.remove_member(mid)
                return
            old = group.members.get(mid)
            group.put_member(
                ConsumerMember(
                    member_id=mid,
                    instance_id=v.instance_id,
                    rack_id=v.rack_id,
                    client_id=v.client_id,
                    client_host=v.client_host,
                    subscribed_topic_names=list(v.subscribed_topic_names),
                    subscribed_topic_regex=v.subscribed_topic_regex,
                    server_assignor=v.server_assignor,
                    rebalance_timeout_ms=v.rebalance_timeout_ms,
                    progress=old.progress if old is not None else Progress(0, 0, MemberState.STABLE),
                    classic=None
                    if v.classic_member_metadata is None
                    else ClassicMeta(
                        v.classic_member_metadata.session_timeout_ms,
                        tuple(
                            (p.name, bytes(p.metadata)) for p in v.classic_member_metadata.supported_protocols
                        ),
                    ),
                )
            )
        elif t == crec.CURRENT_ASSIGNMENT:
            if v is None:
                return
            member = group.members.get(record.key.member_id)
            if member is None:
                # a compacted log keeps only the member's last metadata record, which may come after
                # this one: the member exists from here on (as in Kafka), its metadata follows
                member = ConsumerMember(member_id=record.key.member_id)
                group.put_member(member)
            member.progress = Progress(
                v.member_epoch,
                v.previous_member_epoch,
                MemberState(v.state),
                crec.to_assignment(v.assigned_partitions),
                crec.to_assignment(v.partitions_pending_revocation),
            )

    # ------------------------------------------------------------------ record builders

    @staticmethod
    def group_record(group: ClassicGroup) -> CoordinatorRecord:
        members = [
            MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(group.protocol_name) if group.protocol_name else b"",
                assignment=m.assignment,
            )
            for m in group.members.values()
        ]
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=group.state_timestamp,
            members=members,
        )
        return CoordinatorRecord(GROUP_METADATA, GroupMetadataKey(group.group_id), value)

    @staticmethod
    def group_tombstone(group_id: str) -> CoordinatorRecord:
        """The classic group record's tombstone (its offsets are separate records and stay)."""
        return CoordinatorRecord(GROUP_METADATA, GroupMetadataKey(group_id), None)

    @staticmethod
    def offset_record(
        group_id: str, topic: str, partition: int, value: OffsetCommitValue | None
    ) -> CoordinatorRecord:
        return CoordinatorRecord(OFFSET_COMMIT, OffsetCommitKey(group_id, topic, partition), value)
