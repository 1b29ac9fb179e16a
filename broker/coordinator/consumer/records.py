"""Builders for the KIP-848 coordinator records of a consumer group (types 3-8)."""

from __future__ import annotations

from uuid import UUID

from broker.coordinator.generated import BY_NAME
from broker.coordinator.generated import consumer_group_current_member_assignment_key as cur_k
from broker.coordinator.generated import consumer_group_current_member_assignment_value as cur_v
from broker.coordinator.generated import consumer_group_member_metadata_key as mem_k
from broker.coordinator.generated import consumer_group_member_metadata_value as mem_v
from broker.coordinator.generated import consumer_group_metadata_key as meta_k
from broker.coordinator.generated import consumer_group_metadata_value as meta_v
from broker.coordinator.generated import consumer_group_partition_metadata_key as part_k
from broker.coordinator.generated import consumer_group_partition_metadata_value as part_v
from broker.coordinator.generated import consumer_group_target_assignment_member_key as tmem_k
from broker.coordinator.generated import consumer_group_target_assignment_member_value as tmem_v
from broker.coordinator.generated import consumer_group_target_assignment_metadata_key as tmeta_k
from broker.coordinator.generated import consumer_group_target_assignment_metadata_value as tmeta_v

from ..records import CoordinatorRecord
from .group import ConsumerMember, TopicMeta
from .reconcile import Progress

GROUP_EPOCH = BY_NAME["ConsumerGroupMetadata"].id
PARTITION_METADATA = BY_NAME["ConsumerGroupPartitionMetadata"].id
MEMBER_METADATA = BY_NAME["ConsumerGroupMemberMetadata"].id
TARGET_EPOCH = BY_NAME["ConsumerGroupTargetAssignmentMetadata"].id
TARGET_MEMBER = BY_NAME["ConsumerGroupTargetAssignmentMember"].id
CURRENT_ASSIGNMENT = BY_NAME["ConsumerGroupCurrentMemberAssignment"].id
TYPES = {GROUP_EPOCH, PARTITION_METADATA, MEMBER_METADATA, TARGET_EPOCH, TARGET_MEMBER, CURRENT_ASSIGNMENT}


def _tps(cls, a: dict[UUID, frozenset[int]]) -> list:
    return [cls(t, sorted(ps)) for t, ps in sorted(a.items()) if ps]


def group_epoch(gid: str, epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(
        GROUP_EPOCH, meta_k.ConsumerGroupMetadataKey(gid), meta_v.ConsumerGroupMetadataValue(epoch)
    )


def partition_metadata(gid: str, topics: dict[UUID, TopicMeta]) -> CoordinatorRecord:
    # PartitionMetadata (racks per partition) is deprecated in Kafka and written empty, as Kafka 4.0
    # did (Kafka 4.1+ writes no such record, only its tombstone: the group's metadata hash replaced it)
    value = part_v.ConsumerGroupPartitionMetadataValue(
        [part_v.TopicMetadata(t, m.name, m.partitions, []) for t, m in sorted(topics.items())]
    )
    return CoordinatorRecord(PARTITION_METADATA, part_k.ConsumerGroupPartitionMetadataKey(gid), value)


def member_metadata(gid: str, m: ConsumerMember) -> CoordinatorRecord:
    value = mem_v.ConsumerGroupMemberMetadataValue(
        instance_id=m.instance_id,
        rack_id=m.rack_id,
        client_id=m.client_id,
        client_host=m.client_host,
        subscribed_topic_names=list(m.subscribed_topic_names),
        subscribed_topic_regex=m.subscribed_topic_regex,
        server_assignor=m.server_assignor,
        rebalance_timeout_ms=m.rebalance_timeout_ms,
        classic_member_metadata=None
        if m.classic is None
        else mem_v.ClassicMemberMetadata(
            session_timeout_ms=m.classic.session_timeout_ms,
            supported_protocols=[mem_v.ClassicProtocol(n, md) for n, md in m.classic.protocols],
        ),
    )
    return CoordinatorRecord(MEMBER_METADATA, mem_k.ConsumerGroupMemberMetadataKey(gid, m.member_id), value)


def target_member(gid: str, member_id: str, parts: dict[UUID, frozenset[int]]) -> CoordinatorRecord:
    value = tmem_v.ConsumerGroupTargetAssignmentMemberValue(_tps(tmem_v.TopicPartitions, parts))
    return CoordinatorRecord(
        TARGET_MEMBER, tmem_k.ConsumerGroupTargetAssignmentMemberKey(gid, member_id), value
    )


def target_epoch(gid: str, epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(
        TARGET_EPOCH,
        tmeta_k.ConsumerGroupTargetAssignmentMetadataKey(gid),
        tmeta_v.ConsumerGroupTargetAssignmentMetadataValue(epoch),
    )


def current_assignment(gid: str, member_id: str, p: Progress) -> CoordinatorRecord:
    value = cur_v.ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=p.member_epoch,
        previous_member_epoch=p.previous_member_epoch,
        state=int(p.state),
        assigned_partitions=_tps(cur_v.TopicPartitions, p.assigned),
        partitions_pending_revocation=_tps(cur_v.TopicPartitions, p.pending_revocation),
    )
    return CoordinatorRecord(
        CURRENT_ASSIGNMENT, cur_k.ConsumerGroupCurrentMemberAssignmentKey(gid, member_id), value
    )


def member_tombstones(gid: str, member_id: str) -> list[CoordinatorRecord]:
    return [
        CoordinatorRecord(
            CURRENT_ASSIGNMENT, cur_k.ConsumerGroupCurrentMemberAssignmentKey(gid, member_id), None
        ),
        CoordinatorRecord(TARGET_MEMBER, tmem_k.ConsumerGroupTargetAssignmentMemberKey(gid, member_id), None),
        CoordinatorRecord(MEMBER_METADATA, mem_k.ConsumerGroupMemberMetadataKey(gid, member_id), None),
    ]


def group_tombstones(gid: str) -> list[CoordinatorRecord]:
    return [
        CoordinatorRecord(TARGET_EPOCH, tmeta_k.ConsumerGroupTargetAssignmentMetadataKey(gid), None),
        CoordinatorRecord(PARTITION_METADATA, part_k.ConsumerGroupPartitionMetadataKey(gid), None),
        CoordinatorRecord(GROUP_EPOCH, meta_k.ConsumerGroupMetadataKey(gid), None),
    ]


def to_assignment(tps: list) -> dict[UUID, frozenset[int]]:
    return {tp.topic_id: frozenset(tp.partitions) for tp in tps if tp.partitions}
