"""InitProducerId (key 22) v0-5: v1-2 change nothing on the wire (v2 is flexible); v3 lets a producer
name its current id and epoch (KIP-360); v4-5 change error handling only. v6 (KIP-939 two-phase-commit
fields) is in the schema but not advertised, as Kafka 4.3 does not advertise it.

Idempotent producers (no transactional id) get a fresh producer id with epoch 0 every time, as
Kafka does; ids come from a block persisted in the data directory, so they never repeat across
restarts. A transactional id goes to the transaction coordinator (broker/txn): a new id gets a
producer id, a known one its epoch bumped (fencing the previous producer, whose open transaction is
aborted first: CONCURRENT_TRANSACTIONS until that is done), with Kafka's KIP-360 recovery when
the producer names its id and epoch. Clients before v4 get INVALID_PRODUCER_EPOCH for
PRODUCER_FENCED, as Kafka answers them. On a multi-node cluster a node that does not coordinate the
transactional id answers NOT_COORDINATOR (after Kafka's INVALID_REQUEST and
INVALID_TRANSACTION_TIMEOUT checks).
"""

from __future__ import annotations

from typing import Any

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from broker.security.authorizer import CLUSTER, CLUSTER_NAME, IDEMPOTENT_WRITE, TOPIC, TRANSACTIONAL_ID, WRITE

from .registry import RequestContext

API_KEY = 22
VERSIONS = (0, 5)


def _response(version: int, out: tuple[int, int, int]) -> InitProducerIdResponse:
    code, pid, epoch = out
    if code == ErrorCode.PRODUCER_FENCED and version < 4:
        code = int(ErrorCode.INVALID_PRODUCER_EPOCH)
    return InitProducerIdResponse(error_code=code, producer_id=pid, producer_epoch=epoch)


def handle(ctx: RequestContext, req: InitProducerIdRequest) -> Any:
    # as Kafka: WRITE on the transactional id; an idempotent producer needs IDEMPOTENT_WRITE on the
    # cluster or WRITE on some topic
    if req.transactional_id is not None and not ctx.allowed(WRITE, TRANSACTIONAL_ID, req.transactional_id):
        return InitProducerIdResponse(
            error_code=int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), producer_id=-1, producer_epoch=-1
        )
    if (
        req.transactional_id is None
        and not ctx.allowed(IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME)
        and not ctx.allowed_on_any(WRITE, TOPIC)
    ):
        return InitProducerIdResponse(
            error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), producer_id=-1, producer_epoch=-1
        )
    if req.transactional_id is None:
        pid = ctx.services.logs.allocate_producer_id()
        return InitProducerIdResponse(error_code=0, producer_id=pid, producer_epoch=0)
    expected = None
    if ctx.api_version >= 3 and req.producer_id != -1:
        expected = (req.producer_id, req.producer_epoch)
    version = ctx.api_version
    out = ctx.services.txns.init_producer_id(
        req.transactional_id, req.transaction_timeout_ms, expected, node=ctx.node_id
    )
    if isinstance(out, tuple):
        return _response(version, out)

    async def later() -> InitProducerIdResponse:
        return _response(version, await out)

    return later()
