"""ConsumerGroupHeartbeat (key 68) v0-1 (KIP-848): v0 as in Kafka 3.7-3.9 (the coordinator makes
member ids); v1 (Kafka 4.0) adds SubscribedTopicRegex and lets the client choose its member id
(KIP-1082). The rules are in broker/coordinator/consumer/heartbeat.py."""

from __future__ import annotations

from typing import Any

from broker.protocol.generated.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest

from . import coordinating
from .registry import RequestContext

API_KEY = 68


def handle(ctx: RequestContext, req: ConsumerGroupHeartbeatRequest) -> Any:
    coordinating.require(ctx, req.group_id)
    return ctx.services.groups.consumer_group_heartbeat(ctx, req)
