"""Is the node a client reached the coordinator of a group? On a multi-node cluster
(broker/nodes.py) a group's coordinator is the leader of the coordinator slot its id hashes to, as
in Kafka; every group API sent to another node gets NOT_COORDINATOR (for the requests naming
several groups, each group not coordinated here), and ListGroups lists the groups this node
coordinates. On one node it coordinates every group and nothing changes.
"""

from __future__ import annotations

from broker.protocol.errors import ErrorCode, KafkaError

from .registry import RequestContext


def refused(ctx: RequestContext, group_id: str) -> bool:
    """True when the node the client reached does not coordinate ``group_id``."""
    nodes = ctx.services.nodes
    return nodes.multi and nodes.coordinator(group_id) != ctx.node_id


def require(ctx: RequestContext, group_id: str) -> None:
    """NOT_COORDINATOR (the handler's error response) unless this node coordinates the group."""
    if refused(ctx, group_id):
        raise KafkaError(ErrorCode.NOT_COORDINATOR, f"this node does not coordinate group {group_id!r}")
