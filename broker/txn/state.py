"""Transaction coordinator state: one ``TxnMetadata`` per transactional id, changed only by replay.

The states and their ids are Kafka's (TransactionState): Empty 0, Ongoing 1, PrepareCommit 2,
PrepareAbort 3, CompleteCommit 4, CompleteAbort 5, Dead 6, PrepareEpochFence 7. A record of the
``__transaction_state`` log holds a transactional id's whole state; replaying it replaces the
entry (a tombstone removes it), at start-up and after every append alike.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

from broker.coordinator.timers import Timers

from .records import PartitionsSchema, TransactionLogValue, TxnRecord

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
#: Kafka's TransactionMetadata.isEpochExhausted: an epoch this high gets a new producer id
EPOCH_EXHAUSTED = 32767 - 1


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka's DescribeTransactions/ListTransactions report."""
        return _NAMES[self]


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
COMPLETE = (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


@dataclass
class TxnMetadata:
    """A transactional id's state in the transaction coordinator."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    #: not in the log (Kafka keeps it in memory only): the epoch before the last bump, for KIP-360
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    #: the transaction version of the client's last transition (KIP-890): 2 when it ends its
    #: transactions with EndTxn v5 (the epoch bumped at every end), 0 for the classic protocol
    client_transaction_version: int = 0

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= EPOCH_EXHAUSTED

    def to_value(self) -> TransactionLogValue:
        parts = None
        if self.state != TxnState.EMPTY:
            by_topic: dict[str, list[int]] = {}
            for t, p in sorted(self.partitions):
                by_topic.setdefault(t, []).append(p)
            parts = [PartitionsSchema(topic=t, partition_ids=ps) for t, ps in by_topic.items()]
        return TransactionLogValue(
            producer_id=self.producer_id,
            previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.timeout_ms,
            transaction_status=int(self.state),
            transaction_partitions=parts,
            transaction_last_update_timestamp_ms=self.last_update_ms,
            transaction_start_timestamp_ms=self.start_ms,
            client_transaction_version=self.client_transaction_version,
        )

    def record(self, value_version: int = 0) -> TxnRecord:
        """The record of this state, its value at ``value_version`` (1 from transaction.version 1)."""
        return TxnRecord(self.transactional_id, self.to_value(), self.last_producer_epoch, value_version)

    def transit(self, **changes: object) -> TxnMetadata:
        """A copy with ``changes``: what an operation writes (replay makes it the state)."""
        new = TxnMetadata(**{**self.__dict__, "partitions": set(self.partitions)})
        for k, v in changes.items():
            setattr(new, k, v)
        return new


def from_value(transactional_id: str, v: TransactionLogValue) -> TxnMetadata:
    try:
        state = TxnState(v.transaction_status)
    except ValueError:
        raise ValueError(
            f"unknown transaction state {v.transaction_status} for {transactional_id!r}"
        ) from None
    parts = set()
    if state != TxnState.EMPTY and v.transaction_partitions:
        parts = {(ps.topic, p) for ps in v.transaction_partitions for p in ps.partition_ids}
    return TxnMetadata(
        transactional_id=transactional_id,
        producer_id=v.producer_id,
        producer_epoch=v.producer_epoch,
        timeout_ms=v.transaction_timeout_ms,
        state=state,
        partitions=parts,
        start_ms=v.transaction_start_timestamp_ms,
        last_update_ms=v.transaction_last_update_timestamp_ms,
        previous_producer_id=v.previous_producer_id,
        next_producer_id=v.next_producer_id,
        client_transaction_version=v.client_transaction_version,
    )


@dataclass
class TxnConfig:
    """The transaction coordinator's settings (the broker's transaction.* properties)."""

    max_timeout_ms: int = 900_000
    #: transactional.id.expiration.ms (Kafka's default: 7 days)
    id_expiration_ms: int = 604_800_000
    #: transaction.remove.expired.transaction.cleanup.interval.ms (Kafka's default: 1 hour)
    expiration_check_interval_ms: int = 3_600_000
    #: the finalized transaction.version (KIP-890): from 1 the log's values are written at version 1
    #: (flexible, with the previous/next producer ids and the client's transaction version)
    transaction_version: int = 2

    @property
    def log_value_version(self) -> int:
        return 1 if self.transaction_version >= 1 else 0


class TxnCoordinatorState:
    """Every transactional id's metadata, and what operations need besides it."""

    def __init__(self, config: TxnConfig, allocate_producer_id: Callable[[], int], timers: Timers):
        self.config = config
        self.allocate_producer_id = allocate_producer_id
        self.timers = timers
        #: called with a transactional id once an operation has left its transaction prepared
        #: (PrepareCommit/PrepareAbort): the facade writes the markers, then completes it
        self.on_prepared: Callable[[str], None] = lambda _tid: None
        self.txns: dict[str, TxnMetadata] = {}

    def replay(self, record: TxnRecord, offset: int = -1, timestamp: int = -1) -> None:
        tid = record.transactional_id
        if record.value is None:
            self.txns.pop(tid, None)
            return
        meta = from_value(tid, record.value)
        meta.last_producer_epoch = record.last_producer_epoch
        self.txns[tid] = meta

    def forget(self, tid: str) -> None:
        """Drop ``tid`` from memory (its coordinator moved; it is loaded again from the log)."""
        self.txns.pop(tid, None)

    def adopt(self, meta: TxnMetadata) -> None:
        """Take ``meta`` as loaded from the log by another state (a coordinator move)."""
        self.txns[meta.transactional_id] = meta
