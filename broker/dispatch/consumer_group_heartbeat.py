"""ConsumerGroupHeartbeat (key 68) v0-1 (KIP-848): v0 as in Kafka 3.7-3.9 (the coordinator makes
member ids); v1 (Kafka 4.0) adds SubscribedTopicRegex and lets the client choose its member id
(KIP-1082). The rules are in broker/coordinator/consumer/heartbeat.py."""

from __future__ import annotations

from typing import Any

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from broker.security.authorizer import DESCRIBE, GROUP, READ, TOPIC

from . import coordinating
from .registry import RequestContext

API_KEY = 68


def handle(ctx: RequestContext, req: ConsumerGroupHeartbeatRequest) -> Any:
    if ctx.services.authorizer is not None:
        # as Kafka: READ on the group, then DESCRIBE on every topic the member subscribes to by name
        if not ctx.allowed(READ, GROUP, req.group_id):
            return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
        names = req.subscribed_topic_names or ()
        denied = any(not ctx.allowed(DESCRIBE, TOPIC, n) for n in names)
        if denied:  # as Kafka 4.3: no message
            return _error(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
    coordinating.require(ctx, req.group_id)
    return ctx.services.groups.consumer_group_heartbeat(ctx, req)


def _error(code: ErrorCode, message: str | None) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0,
        error_code=int(code),
        error_message=message,
        member_id=None,
        member_epoch=0,
        heartbeat_interval_ms=0,
        assignment=None,
    )
