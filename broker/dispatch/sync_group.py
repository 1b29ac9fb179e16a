"""SyncGroup (key 14) v0-5: v3 static instance id; v4 flexible; v5 protocol type/name checks.
The rules are in broker/coordinator/classic/sync.py."""

from __future__ import annotations

from typing import Any

from broker.coordinator.classic.responses import sync_error
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.sync_group import SyncGroupRequest
from broker.security.authorizer import GROUP, READ

from . import coordinating
from .registry import RequestContext

API_KEY = 14


def handle(ctx: RequestContext, req: SyncGroupRequest) -> Any:
    if ctx.api_version >= 5 and (req.protocol_type is None or req.protocol_name is None):
        # as Kafka's KafkaApis: mandatory since v5, refused before the group is looked at
        return sync_error(ctx.api_version, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    if not ctx.allowed(READ, GROUP, req.group_id):  # as Kafka: READ on the group
        return sync_error(ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coordinating.require(ctx, req.group_id)
    return ctx.services.groups.sync_group(ctx, req)
