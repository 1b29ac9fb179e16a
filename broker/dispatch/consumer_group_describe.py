"""ConsumerGroupDescribe (key 69) v0-1 (KIP-848): v1 adds each member's type (KIP-1099).
The rules are in broker/coordinator/consumer/describe.py."""

from __future__ import annotations

from typing import Any

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.consumer_group_describe import ConsumerGroupDescribeRequest, DescribedGroup
from broker.security.authorizer import DESCRIBE, GROUP, TOPIC

from . import acl, coordinating
from .registry import RequestContext
from .then import then

API_KEY = 69


def handle(ctx: RequestContext, req: ConsumerGroupDescribeRequest) -> Any:
    ops = acl.GROUP_OPS if req.include_authorized_operations else acl.NOT_REQUESTED
    away = {g for g in req.group_ids if coordinating.refused(ctx, g)}
    if not away and ctx.services.authorizer is None:
        return ctx.services.groups.consumer_group_describe(ctx, req, ops)
    return then(ctx.services.groups.consumer_group_describe(ctx, req, ops), lambda r: _fix(ctx, req, r, away))


def _fix(ctx: RequestContext, req: ConsumerGroupDescribeRequest, response: Any, away: set[str]) -> None:
    for i, g in enumerate(response.groups):
        # as Kafka: DESCRIBE on each group first, then its coordinator, and its own operations
        if not ctx.allowed(DESCRIBE, GROUP, g.group_id):
            response.groups[i] = _refused(g.group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
        elif g.group_id in away:
            ops = acl.GROUP_OPS if req.include_authorized_operations else acl.NOT_REQUESTED
            response.groups[i] = DescribedGroup(
                error_code=int(ErrorCode.NOT_COORDINATOR), group_id=g.group_id, authorized_operations=ops
            )
        elif ctx.services.authorizer is not None and req.include_authorized_operations and g.error_code == 0:
            g.authorized_operations = ctx.authorized_operations(GROUP, g.group_id, acl.GROUP_OPS)
    if ctx.services.authorizer is None:
        return
    # as Kafka 4.3: a group whose members' assignments (current or target) hold a topic the principal
    # may not describe is not described
    for i, g in enumerate(response.groups):
        if g.error_code == 0 and any(not ctx.allowed(DESCRIBE, TOPIC, name) for name in _assigned_topics(g)):
            response.groups[i] = _refused(g.group_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED, HIDDEN_TOPICS)


def _refused(group_id: str, code: ErrorCode, message: str | None) -> DescribedGroup:
    """A group that is not described to this principal (nothing about it is disclosed)."""
    return DescribedGroup(
        error_code=int(code),
        error_message=message,
        group_id=group_id,
        group_state="",
        group_epoch=0,
        assignment_epoch=0,
        assignor_name="",
        members=[],
        authorized_operations=acl.NOT_REQUESTED,
    )


HIDDEN_TOPICS = "The group has described topic(s) that the client is not authorized to describe."


def _assigned_topics(g: DescribedGroup) -> set[str]:
    return {
        tp.topic_name
        for m in g.members
        for a in (m.assignment, m.target_assignment)
        if a is not None
        for tp in a.topic_partitions
    }
