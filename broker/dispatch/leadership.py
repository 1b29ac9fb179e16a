"""Is the node a client reached the leader of a partition? Kafka's checks of Produce, Fetch,
ListOffsets, OffsetForLeaderEpoch and DeleteRecords (``Partition.localLogWithEpochOrThrow``):

* a node that is not a replica of the partition: NOT_LEADER_OR_FOLLOWER (as Kafka answers for a
  partition it does not host but knows from its metadata);
* a ``current_leader_epoch`` (when not -1) below the partition's: FENCED_LEADER_EPOCH; above it:
  UNKNOWN_LEADER_EPOCH;
* a follower asked to lead: NOT_LEADER_OR_FOLLOWER, unless the request may be served by any replica
  (``require_leader`` false: a consumer's Fetch from v11, which carries client metadata, is read
  from a follower's log, Kafka's ``FetchParams.fetchOnlyLeader``; this cluster's replicas share one
  log, so a follower serves what the leader would).

On one node (``cluster.nodes`` = 1) the node leads every partition at its persisted epoch (0 unless
a cluster wrote the data directory: broker/nodes.py), so only the epoch checks apply (a topic the
single-node broker wrote: an epoch above 0 is UNKNOWN_LEADER_EPOCH, as before the cluster existed). ``leader_hint`` gives the
KIP-951 new-leader hint (leader id and epoch, and its endpoint) for the responses that carry it.
"""

from __future__ import annotations

from typing import Any

from broker.cluster import Topic
from broker.protocol.errors import ErrorCode

from .registry import RequestContext

NO_EPOCH = -1


def check(
    ctx: RequestContext,
    topic: Topic,
    partition: int,
    current_leader_epoch: int = NO_EPOCH,
    require_leader: bool = True,
) -> ErrorCode:
    """NONE when the node the client reached leads the partition (or, without ``require_leader``,
    is one of its replicas) at the epoch it names."""
    nodes = ctx.services.nodes
    node = ctx.node_id
    if not nodes.multi:
        epoch = nodes.persisted_epoch(topic, partition)
        if current_leader_epoch > epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        if 0 <= current_leader_epoch < epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.NONE
    state = nodes.state(topic, partition)
    if node not in state.replicas:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if current_leader_epoch != NO_EPOCH:
        if current_leader_epoch < state.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if current_leader_epoch > state.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
    if require_leader and state.leader != node:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return ErrorCode.NONE


def leader_hint(ctx: RequestContext, topic: Topic, partition: int) -> tuple[int, int]:
    """(leader id, leader epoch) a client is told after NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH
    ((-1, -1) when there is none)."""
    leader, epoch = ctx.services.nodes.leader(topic, partition)
    return (leader, epoch) if leader >= 0 else (-1, -1)


def endpoints(ctx: RequestContext, cls: Any, leaders: set[int]) -> list[Any]:
    """The KIP-951 ``node_endpoints`` of ``leaders``, at the address of the client's listener."""
    services = ctx.services
    out = []
    for node in sorted(leaders):
        address = services.nodes.address(node, ctx.client.listener)
        if node < 0 or address is None:
            continue
        host, port = address
        out.append(cls(node_id=node, host=host, port=port, rack=services.rack))
    return out


def current_epoch(ctx: RequestContext, topic: Topic, partition: int) -> int:
    return ctx.services.nodes.leader(topic, partition)[1]


def batch_at(plog: Any, offset: int) -> tuple[int, int, int] | None:
    """(base offset, last offset, partition leader epoch) of the batch holding ``offset`` (or the
    first after it), None past the readable end (the high watermark)."""
    h = plog.header_at(offset)  # the 61 header bytes, not the whole batch
    if h is None:
        return None
    return h.base_offset, h.base_offset + h.last_offset_delta, h.partition_leader_epoch


def epoch_at(ctx: RequestContext, topic: Topic, partition: int, plog: Any, offset: int) -> int:
    """The leader epoch of ``offset`` as Kafka's leader-epoch cache gives it (epochForOffset): the
    epoch stamped on its batch; past the last batch, the current leader's (which started there)."""
    batch = batch_at(plog, offset)
    return batch[2] if batch is not None else current_epoch(ctx, topic, partition)


def epoch_end(
    ctx: RequestContext, topic: Topic, partition: int, plog: Any, requested: int
) -> tuple[int, int]:
    """(epoch, end offset) of leader epoch ``requested`` in ``plog``'s log, as Kafka's
    endOffsetForEpoch (OffsetForLeaderEpoch, and a Fetch's last fetched epoch): (-1, -1) for an epoch
    after the current one, a negative one, or an empty log."""
    current = current_epoch(ctx, topic, partition)
    if not 0 <= requested <= current or plog.log_end_offset == 0:
        return -1, -1
    return end_offset_for(plog, requested, current)


def end_offset_for(plog: Any, requested: int, current: int) -> tuple[int, int]:
    """(epoch, end offset) of ``requested`` (0 <= requested <= current) in ``plog``'s log."""
    end = plog.log_end_offset
    if requested == current:
        return current, end
    lo, hi, first_later = plog.log_start_offset, min(end, plog.high_watermark), end
    while lo < hi:
        mid = (lo + hi) // 2
        batch = batch_at(plog, mid)
        if batch is None:
            hi = mid
        elif batch[2] > requested:
            first_later, hi = min(first_later, batch[0]), mid
        else:
            lo = batch[1] + 1
    before = batch_at(plog, first_later - 1) if first_later > plog.log_start_offset else None
    if before is None or before[0] >= first_later:
        return requested, first_later
    return before[2], first_later
