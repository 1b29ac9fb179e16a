"""ConsumerGroupDescribe (key 69) v0-1 (KIP-848): v1 adds each member's type (KIP-1099).
The rules are in broker/coordinator/consumer/describe.py."""

from __future__ import annotations

from typing import Any

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.consumer_group_describe import ConsumerGroupDescribeRequest, DescribedGroup
from broker.security.authorizer import DESCRIBE, GROUP, TOPIC

from . import acl
from .registry import RequestContext

API_KEY = 69


def handle(ctx: RequestContext, req: ConsumerGroupDescribeRequest) -> Any:
    ops = acl.GROUP_OPS if req.include_authorized_operations else acl.NOT_REQUESTED
    response = ctx.services.groups.consumer_group_describe(ctx, req, ops)
    if ctx.services.authorizer is None:
        return response
    # as Kafka: DESCRIBE on each group, and its own authorized operations
    for i, g in enumerate(response.groups):
        if not ctx.allowed(DESCRIBE, GROUP, g.group_id):
            response.groups[i] = DescribedGroup(
                error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED),
                error_message=None,
                group_id=g.group_id,
                group_state="",
                group_epoch=0,
                assignment_epoch=0,
                assignor_name="",
                members=[],
                authorized_operations=acl.NOT_REQUESTED,
            )
        elif req.include_authorized_operations and g.error_code == 0:
            g.authorized_operations = ctx.authorized_operations(GROUP, g.group_id, acl.GROUP_OPS)
    # as Kafka 4.3: a group whose members' assignments (current or target) hold a topic the principal
    # may not describe is not described
    for i, g in enumerate(response.groups):
        if g.error_code == 0 and any(not ctx.allowed(DESCRIBE, TOPIC, name) for name in _assigned_topics(g)):
            response.groups[i] = DescribedGroup(
                error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                error_message=HIDDEN_TOPICS,
                group_id=g.group_id,
                group_state="",
                group_epoch=0,
                assignment_epoch=0,
                assignor_name="",
                members=[],
                authorized_operations=acl.NOT_REQUESTED,
            )
    return response


HIDDEN_TOPICS = "The group has described topic(s) that the client is not authorized to describe."


def _assigned_topics(g: DescribedGroup) -> set[str]:
    return {
        tp.topic_name
        for m in g.members
        for a in (m.assignment, m.target_assignment)
        if a is not None
        for tp in a.topic_partitions
    }
