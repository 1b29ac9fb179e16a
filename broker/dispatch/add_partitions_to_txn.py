"""AddPartitionsToTxn (key 24) v0-5: v1-2 change nothing on the wire; v3 is flexible; v4 batches
several transactions and can only verify (KIP-890: Kafka's brokers send it to the coordinator
before appending a transactional batch); v5 may answer TRANSACTION_ABORTABLE.

As Kafka's KafkaApis: before v4 (clients) WRITE on the transactional id is needed (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition) and WRITE on each topic (internal topics
are never authorized for clients): those refused are TOPIC_AUTHORIZATION_FAILED, then unknown
partitions UNKNOWN_TOPIC_OR_PARTITION, and the others of that transaction OPERATION_NOT_ATTEMPTED.
v4+ comes from brokers: CLUSTER_ACTION on the cluster, else the whole request is
CLUSTER_AUTHORIZATION_FAILED (top-level, no transaction answered). Otherwise the coordinator's one error code applies to every
partition of the transaction (PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2); on a
multi-node cluster that is NOT_COORDINATOR for each transaction this node does not coordinate.
"""

from __future__ import annotations

import asyncio
from typing import Any

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)
from broker.security.authorizer import CLUSTER, CLUSTER_ACTION, CLUSTER_NAME, TOPIC, TRANSACTIONAL_ID, WRITE

from .registry import RequestContext

API_KEY = 24
INTERNAL = ("__consumer_offsets", "__transaction_state")


def _results(by_partition: dict[tuple[str, int], int]) -> list[AddPartitionsToTxnTopicResult]:
    topics: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (topic, p), code in by_partition.items():
        topics.setdefault(topic, []).append(
            AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code)
        )
    return [AddPartitionsToTxnTopicResult(name=t, results_by_partition=ps) for t, ps in topics.items()]


def _one(ctx: RequestContext, version: int, tid: str, pid: int, epoch: int, topics: Any, verify: bool) -> Any:
    """(transactional id, partition -> code) or an awaitable of it."""
    services = ctx.services
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    if version < 4 and not ctx.allowed(WRITE, TRANSACTIONAL_ID, tid):
        return tid, dict.fromkeys(wanted, int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    errors: dict[tuple[str, int], int] = {}
    if version < 4:  # clients: WRITE on each topic (one decision per topic); internal topics never
        names = {name for name, _p in wanted}
        refused = {n for n in names if n in INTERNAL or not ctx.allowed(WRITE, TOPIC, n)}
    else:
        refused = set()
    for name, p in wanted:
        topic = services.topics.get(name)
        if name in refused:
            errors[(name, p)] = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif topic is None or not 0 <= p < topic.partitions:
            errors[(name, p)] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if errors:
        return tid, {tp: errors.get(tp, int(ErrorCode.OPERATION_NOT_ATTEMPTED)) for tp in wanted}
    if verify:
        return tid, {tp: int(services.txns.verify(tid, pid, epoch, *tp, node=ctx.node_id)) for tp in wanted}

    def answer(code: int) -> tuple[str, dict]:
        if code == ErrorCode.PRODUCER_FENCED and version < 2:
            code = int(ErrorCode.INVALID_PRODUCER_EPOCH)
        return tid, dict.fromkeys(wanted, code)

    out = services.txns.add_partitions(tid, pid, epoch, wanted, node=ctx.node_id)
    if isinstance(out, int):
        return answer(out)

    async def later() -> tuple[str, dict]:
        return answer(await out)

    return later()


async def _gather(parts: list[Any]) -> list[Any]:
    return [await p if asyncio.iscoroutine(p) or asyncio.isfuture(p) else p for p in parts]


def handle(ctx: RequestContext, req: AddPartitionsToTxnRequest) -> Any:
    v = ctx.api_version
    if v < 4:
        one = _one(ctx, v, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                   req.v3_and_below_producer_epoch, req.v3_and_below_topics, False)  # fmt: skip

        def build3(res: tuple[str, dict]) -> AddPartitionsToTxnResponse:
            return AddPartitionsToTxnResponse(
                throttle_time_ms=0, results_by_topic_v3_and_below=_results(res[1])
            )

        if isinstance(one, tuple):
            return build3(one)

        async def later3() -> AddPartitionsToTxnResponse:
            return build3(await one)

        return later3()
    if not ctx.allowed(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME):
        return AddPartitionsToTxnResponse(
            throttle_time_ms=0,
            error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
            results_by_transaction=[],
        )
    parts = [
        _one(ctx, v, t.transactional_id, t.producer_id, t.producer_epoch, t.topics, t.verify_only)
        for t in req.transactions
    ]

    def build(results: list[tuple[str, dict]]) -> AddPartitionsToTxnResponse:
        return AddPartitionsToTxnResponse(
            throttle_time_ms=0,
            error_code=0,
            results_by_transaction=[
                AddPartitionsToTxnResult(transactional_id=tid, topic_results=_results(codes))
                for tid, codes in results
            ],
        )

    if all(isinstance(p, tuple) for p in parts):
        return build(parts)

    async def later() -> AddPartitionsToTxnResponse:
        return build(await _gather(parts))

    return later()
