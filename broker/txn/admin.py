"""DescribeTransactions and ListTransactions on the coordinator's state, as Kafka's
TransactionCoordinator.handleDescribeTransactions and TransactionStateManager.listTransactionStates
answer them (read-only: no records)."""

from __future__ import annotations

from broker.patterns import PatternError, compile_re2
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.describe_transactions import TopicData
from broker.protocol.generated.describe_transactions import TransactionState as DescribedState
from broker.protocol.generated.list_transactions import ListTransactionsResponse
from broker.protocol.generated.list_transactions import TransactionState as ListedState

from .state import TxnCoordinatorState, TxnState

_BY_NAME = {s.kafka_name: s for s in TxnState}


def not_coordinator(tid: str) -> DescribedState:
    """A transactional id this node does not coordinate (another node leads its slot)."""
    return DescribedState(error_code=int(ErrorCode.NOT_COORDINATOR), transactional_id=tid)


def describe(st: TxnCoordinatorState, tid: str) -> DescribedState:
    if not tid:
        return DescribedState(error_code=int(ErrorCode.INVALID_REQUEST), transactional_id=tid)
    meta = st.txns.get(tid)
    if meta is None or meta.state == TxnState.DEAD:
        return DescribedState(error_code=int(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND), transactional_id=tid)
    topics: dict[str, list[int]] = {}
    for t, p in sorted(meta.partitions):
        topics.setdefault(t, []).append(p)
    return DescribedState(
        error_code=0,
        transactional_id=tid,
        transaction_state=meta.state.kafka_name,
        transaction_timeout_ms=meta.timeout_ms,
        transaction_start_time_ms=meta.start_ms,
        producer_id=meta.producer_id,
        producer_epoch=meta.producer_epoch,
        topics=[TopicData(topic=t, partitions=ps) for t, ps in topics.items()],
    )


def list_transactions(
    st: TxnCoordinatorState,
    states: list[str],
    producer_ids: list[int],
    duration_ms: int,
    pattern: str | None,
    now: int,
) -> ListTransactionsResponse:
    unknown = [s for s in states if s not in _BY_NAME]
    wanted = {_BY_NAME[s] for s in states if s in _BY_NAME}
    regex = None
    if pattern:
        try:
            regex = compile_re2(pattern)
        except PatternError:
            return ListTransactionsResponse(error_code=int(ErrorCode.INVALID_REGULAR_EXPRESSION))
    out = []
    for tid, meta in st.txns.items():
        if meta.state == TxnState.DEAD:
            continue
        if producer_ids and meta.producer_id not in producer_ids:
            continue
        if states and meta.state not in wanted:
            continue
        if duration_ms >= 0 and now - meta.start_ms <= duration_ms:
            continue
        if regex is not None and not regex.fullmatch(tid):
            continue
        out.append(
            ListedState(
                transactional_id=tid, producer_id=meta.producer_id, transaction_state=meta.state.kafka_name
            )
        )
    return ListTransactionsResponse(error_code=0, unknown_state_filters=unknown, transaction_states=out)
