"""TxnOffsetCommit (key 28) v0-5: v2 adds the leader epoch; v3 is flexible and adds the member id,
generation and instance id (KIP-447: checked as Kafka checks them); v4 changes error handling; v5
(KIP-890 part 2) also does what AddOffsetsToTxn did, when transaction.version 2 is finalized: the
group's ``__consumer_offsets`` partition is added to the transaction first (a TV2 client sends no
AddOffsetsToTxn).

The group's ``__consumer_offsets`` partition must be in the producer's transaction
(AddOffsetsToTxn), as Kafka's verification demands: otherwise TRANSACTION_ABORTABLE (v4+; before,
INVALID_TXN_STATE) for every partition, INVALID_PRODUCER_EPOCH for a fenced producer, the
coordinator's own error else. The
offsets stay pending (OffsetFetch does not show them; require_stable gets UNSTABLE_OFFSET_COMMIT)
until the transaction commits, and are dropped if it aborts.

Authorization as Kafka's KafkaApis: WRITE on the transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition), READ on the group (else
GROUP_AUTHORIZATION_FAILED for every partition), then READ on each topic: the topics refused get
TOPIC_AUTHORIZATION_FAILED and only the others are committed.
"""

from __future__ import annotations

from typing import Any

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from broker.security.authorizer import GROUP, READ, TOPIC, TRANSACTIONAL_ID, WRITE

from .registry import RequestContext

API_KEY = 28
OFFSETS_TOPIC = "__consumer_offsets"
#: the first version whose clients know TRANSACTION_ABORTABLE (KIP-890): older ones get INVALID_TXN_STATE
ABORTABLE_VERSION = 4
#: the first version that adds the offsets partition to the transaction itself (KIP-890 part 2)
TV2_VERSION = 5


def error_response(req: TxnOffsetCommitRequest, version: int, code: ErrorCode) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            TxnOffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=int(code))
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ],
    )


def handle(ctx: RequestContext, req: TxnOffsetCommitRequest) -> Any:
    v = ctx.api_version
    if not ctx.allowed(WRITE, TRANSACTIONAL_ID, req.transactional_id):
        return error_response(req, v, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.allowed(READ, GROUP, req.group_id):
        return error_response(req, v, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if ctx.services.authorizer is None:
        return _commit(ctx, req)
    allowed = {name for name in {t.name for t in req.topics} if ctx.allowed(READ, TOPIC, name)}
    denied = [t for t in req.topics if t.name not in allowed]
    if not denied:
        return _commit(ctx, req)
    refused = error_response(req, v, ErrorCode.TOPIC_AUTHORIZATION_FAILED).topics
    refused = [t for t in refused if t.name not in allowed]
    req.topics = [t for t in req.topics if t.name in allowed]
    if not req.topics:
        return TxnOffsetCommitResponse(throttle_time_ms=0, topics=refused)
    out = _commit(ctx, req)
    if isinstance(out, TxnOffsetCommitResponse):
        out.topics.extend(refused)
        return out

    async def later() -> TxnOffsetCommitResponse:
        response = await out
        response.topics.extend(refused)
        return response

    return later()


def _commit(ctx: RequestContext, req: TxnOffsetCommitRequest) -> Any:
    txns = ctx.services.txns
    tid, pid, epoch = req.transactional_id, req.producer_id, req.producer_epoch
    if ctx.api_version >= TV2_VERSION and txns.needs_add(tid, pid, epoch, (OFFSETS_TOPIC, 0)):
        ctx.services.groups.ensure_log()  # the partition must exist to be in a transaction
        added = txns.add_partitions(tid, pid, epoch, [(OFFSETS_TOPIC, 0)], tv=2)
        if not isinstance(added, int):  # (its error, if any, is verification's too)

            async def later() -> Any:
                await added
                out = _verified_commit(ctx, req)
                return await out if not isinstance(out, TxnOffsetCommitResponse) else out

            return later()
    return _verified_commit(ctx, req)


def _verified_commit(ctx: RequestContext, req: TxnOffsetCommitRequest) -> Any:
    v = ctx.api_version
    code = ctx.services.txns.verify(
        req.transactional_id, req.producer_id, req.producer_epoch, OFFSETS_TOPIC, 0
    )
    if code == ErrorCode.TRANSACTION_ABORTABLE and v < ABORTABLE_VERSION:
        code = ErrorCode.INVALID_TXN_STATE
    elif code == ErrorCode.PRODUCER_FENCED:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    if code:
        return error_response(req, v, code)
    return ctx.services.groups.txn_offset_commit(ctx, req)
