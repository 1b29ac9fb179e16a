"""Bridge from a consumer group to the server-side assignors (broker/coordinator/assignors)."""

from __future__ import annotations

from uuid import UUID

from broker.coordinator.assignors import MemberSpec, TopicInfo
from broker.coordinator.assignors import assign as run_assignor

from .group import ConsumerGroup, ConsumerMember, TopicMeta
from .regex import matching


def assign(
    assignor: str, group: ConsumerGroup, members: dict[str, ConsumerMember], topics: dict[UUID, TopicMeta]
) -> dict[str, dict[UUID, frozenset[int]]]:
    by_name = {meta.name: tid for tid, meta in topics.items()}
    names = sorted(by_name)

    def subscribed(m: ConsumerMember) -> frozenset[UUID]:
        wanted = {n for n in m.subscribed_topic_names if n in by_name}
        if m.subscribed_topic_regex:
            wanted.update(matching(m.subscribed_topic_regex, names))
        return frozenset(by_name[n] for n in wanted)

    specs = {
        mid: MemberSpec(
            rack_id=m.rack_id,
            subscribed_topic_ids=subscribed(m),
            assignment=group.target.get(mid, {}),
            instance_id=m.instance_id,
        )
        for mid, m in members.items()
    }
    infos = {tid: TopicInfo(meta.name, meta.partitions) for tid, meta in topics.items()}
    # static members that left with epoch -2 are included: their target waits for them to return
    return run_assignor(assignor, specs, infos)
