"""ConsumerGroupDescribe (KIP-848): members, epochs, subscriptions, current and target assignments."""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import UUID

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.consumer_group_describe import (
    Assignment,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedGroup,
    Member,
    TopicPartitions,
)

from .heartbeat import _select_assignor

if TYPE_CHECKING:
    from ..state import CoordinatorState

CLASSIC_MEMBER = 0
CONSUMER_MEMBER = 1


def _assignment(parts: dict[UUID, frozenset[int]], names: dict[UUID, str]) -> Assignment:
    return Assignment(
        [
            TopicPartitions(t, names.get(t, ""), sorted(ps))
            for t, ps in sorted(parts.items(), key=lambda kv: names.get(kv[0], ""))
            if ps
        ]
    )


def describe(
    st: CoordinatorState, req: ConsumerGroupDescribeRequest, version: int, ops: int
) -> ConsumerGroupDescribeResponse:
    out = []
    for gid in req.group_ids:
        group = st.consumer_groups.get(gid)
        if group is None:
            msg = f"Group {gid} is not a consumer group." if gid in st.groups else f"Group {gid} not found."
            # as Kafka: no authorized operations with an error
            out.append(
                DescribedGroup(int(ErrorCode.GROUP_ID_NOT_FOUND), msg, gid, "", 0, 0, "", [], -(2**31))
            )
            continue
        names = {t: m.name for t, m in group.topics.items()}
        members = [
            Member(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
                # as Kafka: a member without a regex describes it as the empty string
                subscribed_topic_regex=m.subscribed_topic_regex or "",
                assignment=_assignment(m.assigned, names),
                target_assignment=_assignment(group.target.get(m.member_id, {}), names),
                member_type=CONSUMER_MEMBER if m.classic is None else CLASSIC_MEMBER,
            )
            for m in group.members.values()
        ]
        out.append(
            DescribedGroup(
                error_code=0,
                error_message=None,
                group_id=gid,
                group_state=group.state.value,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=_select_assignor(list(st.consumer_config.assignors), group.members),
                members=members,
                authorized_operations=ops,
            )
        )
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=out)
