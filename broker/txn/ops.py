"""Transaction coordinator operations: ``op(now_ms) -> Result``, as Kafka's TransactionCoordinator
decides them (handleInitProducerId, handleAddPartitionsToTransaction, endTransaction, the timeout
abort), on the group coordinator's runtime (broker/coordinator/runtime.py): an operation reads the
state, returns the record of the transition it makes and its response; only replay changes the
state. An operation that leaves a transaction prepared (PrepareCommit/PrepareAbort) calls the
state's ``on_prepared`` after replay: the facade then writes the markers and completes it.

Responses are ``(error code, producer id, producer epoch)`` for InitProducerId and EndTxn, an
error code for AddPartitionsToTxn/AddOffsetsToTxn.

Transaction version 2 (KIP-890 part 2) is decided per request, as Kafka decides it: EndTxn v5 bumps
the epoch at every end, and partitions a Produce v12 / TxnOffsetCommit v5 adds implicitly mark the
transaction as a TV2 client's (``client_transaction_version``), which is what tells an EndTxn retry
(the epoch before the bump) from a fenced producer. The fencing aborts (InitProducerId, timeout)
bump the epoch once and are TV0 transitions, as Kafka's PrepareEpochFence.
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.coordinator.result import Result
from broker.protocol.errors import ErrorCode

from .records import TxnRecord
from .state import (
    COMPLETE,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PREPARED,
    TxnCoordinatorState,
    TxnMetadata,
    TxnState,
)

MAX_EPOCH = 32767


def timeout_key(transactional_id: str) -> str:
    """The timer aborting an open transaction after its timeout."""
    return f"txn-timeout:{transactional_id}"


def arm_timeout(st: TxnCoordinatorState, tid: str, pid: int, epoch: int, deadline_ms: int) -> None:
    """Abort ``tid``'s transaction at ``deadline_ms`` if it is still the one open then."""
    st.timers.schedule(timeout_key(tid), deadline_ms, lambda now: abort_timed_out(st, tid, pid, epoch, now))


def _err(code: ErrorCode) -> Result:
    return Result(response=(int(code), NO_PRODUCER_ID, NO_PRODUCER_EPOCH))


def _prepared_after(st: TxnCoordinatorState, tid: str) -> list:
    def step(_now: int) -> None:
        st.timers.cancel(timeout_key(tid))
        st.on_prepared(tid)

    return [step]


def init_producer_id(
    st: TxnCoordinatorState, tid: str, timeout_ms: int, expected: tuple[int, int] | None, now: int
) -> Result:
    """InitProducerId with a transactional id; ``expected``: (producer id, epoch) given (KIP-360)."""
    if tid == "":
        return _err(ErrorCode.INVALID_REQUEST)
    if not 0 < timeout_ms <= st.config.max_timeout_ms:
        return _err(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
    meta = st.txns.get(tid)
    if meta is None:
        meta = TxnMetadata(tid, st.allocate_producer_id(), NO_PRODUCER_EPOCH, timeout_ms, TxnState.EMPTY)
        meta.last_update_ms = now
    if expected is not None and not (
        meta.producer_epoch == NO_PRODUCER_EPOCH
        or expected[0] == meta.producer_id
        or (expected[0] == meta.previous_producer_id and expected[1] >= MAX_EPOCH - 1)
    ):
        return _err(ErrorCode.PRODUCER_FENCED)
    if meta.state in PREPARED:
        return _err(ErrorCode.CONCURRENT_TRANSACTIONS)
    if meta.state == TxnState.ONGOING:
        # fence the producer (epoch + 1, never returned) and abort its transaction; the client
        # retries on CONCURRENT_TRANSACTIONS and gets a second bump once the abort completes
        if meta.producer_epoch >= MAX_EPOCH:
            return _err(ErrorCode.INVALID_PRODUCER_EPOCH)
        fenced = meta.transit(
            state=TxnState.PREPARE_ABORT,
            producer_epoch=meta.producer_epoch + 1,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            last_update_ms=now,
            client_transaction_version=0,  # the fence's own bump: no second one at the end
        )
        return Result(
            response=(int(ErrorCode.CONCURRENT_TRANSACTIONS), NO_PRODUCER_ID, NO_PRODUCER_EPOCH),
            records=[fenced.record(st.config.log_value_version)],
            after=_prepared_after(st, tid),
        )
    if meta.state not in (TxnState.EMPTY, *COMPLETE):
        return _err(ErrorCode.INVALID_TXN_STATE)  # Dead / PrepareEpochFence are never stored here
    if meta.epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
        new = meta.transit(
            producer_id=st.allocate_producer_id(),
            previous_producer_id=meta.producer_id,
            producer_epoch=0,
            last_producer_epoch=meta.producer_epoch if expected is not None else NO_PRODUCER_EPOCH,
        )
    elif expected is None:
        new = meta.transit(producer_epoch=meta.producer_epoch + 1, last_producer_epoch=NO_PRODUCER_EPOCH)
    elif meta.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == meta.producer_epoch:
        new = meta.transit(producer_epoch=meta.producer_epoch + 1, last_producer_epoch=meta.producer_epoch)
    elif expected[1] == meta.last_producer_epoch:
        new = meta.transit()  # a retry of the bump whose answer was lost: the same epoch again
    else:
        return _err(ErrorCode.PRODUCER_FENCED)
    new.state = TxnState.EMPTY
    new.client_transaction_version = 0  # as Kafka's prepareIncrementProducerEpoch
    new.timeout_ms = timeout_ms
    new.partitions = set()
    new.start_ms = -1
    new.last_update_ms = now
    return Result(
        response=(0, new.producer_id, new.producer_epoch), records=[new.record(st.config.log_value_version)]
    )


def _check_producer(meta: TxnMetadata | None, pid: int, epoch: int) -> ErrorCode:
    if meta is None or meta.producer_id != pid:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if meta.producer_epoch != epoch:
        return ErrorCode.PRODUCER_FENCED
    return ErrorCode.NONE


def add_partitions(
    st: TxnCoordinatorState,
    tid: str,
    pid: int,
    epoch: int,
    partitions: Iterable[tuple[str, int]],
    now: int,
    tv: int = 0,
) -> Result:
    """AddPartitionsToTxn (and AddOffsetsToTxn, with the offsets partition): one error code. ``tv``:
    the client's transaction version, 2 for the partitions a transactional Produce v12 or
    TxnOffsetCommit v5 adds implicitly (KIP-890 part 2); the transaction then ends with the epoch
    bumped."""
    if not tid:
        return Result(response=int(ErrorCode.INVALID_REQUEST))
    meta = st.txns.get(tid)
    code = _check_producer(meta, pid, epoch)
    if code:
        return Result(response=int(code))
    assert meta is not None
    if meta.state in PREPARED:
        return Result(response=int(ErrorCode.CONCURRENT_TRANSACTIONS))
    added = set(partitions)
    if meta.state == TxnState.ONGOING and added <= meta.partitions:
        return Result(response=0)
    start = now if meta.state in (TxnState.EMPTY, *COMPLETE) else meta.start_ms
    new = meta.transit(
        state=TxnState.ONGOING,
        partitions=meta.partitions | added,
        start_ms=start,
        last_update_ms=now,
        client_transaction_version=tv,
    )

    def arm(_now: int) -> None:
        arm_timeout(st, tid, new.producer_id, new.producer_epoch, start + new.timeout_ms)

    return Result(response=0, records=[new.record(st.config.log_value_version)], after=[arm])


def verify(
    st: TxnCoordinatorState, tid: str | None, pid: int, epoch: int, partition: tuple[str, int]
) -> ErrorCode:
    """Whether a transactional batch may be appended to ``partition`` (Kafka's verification,
    AddPartitionsToTxn v4+ VerifyOnly): TRANSACTION_ABORTABLE when it was not added."""
    if not tid:
        return ErrorCode.INVALID_REQUEST
    meta = st.txns.get(tid)
    code = _check_producer(meta, pid, epoch)
    if code:
        return code
    assert meta is not None
    if meta.state in PREPARED:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    if meta.state != TxnState.ONGOING or partition not in meta.partitions:
        return ErrorCode.TRANSACTION_ABORTABLE
    return ErrorCode.NONE


def end_txn(
    st: TxnCoordinatorState, tid: str, pid: int, epoch: int, commit: bool, now: int, tv: int = 0
) -> Result:
    """EndTxn from a client, as Kafka's endTransaction. ``tv`` 2 (EndTxn v5, KIP-890 part 2): the
    epoch is bumped at the end (the markers carry the bumped epoch), and when it is exhausted the
    transactional id gets a new producer id (``next_producer_id``, taken up on completion); the
    answer is the producer id and epoch of the next transaction. A retry of an end whose answer was
    lost names the epoch before the bump (or the old producer id after a rotation) and gets the
    same answer again. ``tv`` 0: the classic end, no bump."""
    if not tid:
        return _err(ErrorCode.INVALID_REQUEST)
    meta = st.txns.get(tid)
    if meta is None:
        return _err(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    state = meta.state
    v2 = meta.client_transaction_version >= 2  # the last transition was a TV2 client's
    retry_on_bump = v2 and meta.producer_epoch == epoch + 1
    retry_on_overflow = (
        v2 and meta.previous_producer_id == pid and epoch == MAX_EPOCH - 1 and meta.producer_epoch == 0
    )
    retry = retry_on_bump or retry_on_overflow
    if meta.producer_id != pid and not retry_on_overflow:
        return _err(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    if v2 and state in PREPARED:
        valid = retry_on_bump
    elif v2 and state in COMPLETE:
        # a retry, or (a TV2 client's abort of a transaction it started without reaching a
        # partition) the next end at the current epoch
        valid = retry or epoch == meta.producer_epoch
        retry = retry and epoch != meta.producer_epoch
    else:
        valid = epoch == meta.producer_epoch
        retry = state in COMPLETE  # TV0: the same epoch again is a retry
    if not valid:
        return _err(ErrorCode.PRODUCER_FENCED)
    done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
    prepared = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    if state == TxnState.ONGOING:
        return _prepare(st, meta, prepared, tv, now)
    if state == done and retry:
        return Result(response=(0, meta.producer_id, meta.producer_epoch))
    if state in PREPARED:
        return _err(ErrorCode.CONCURRENT_TRANSACTIONS if state == prepared else ErrorCode.INVALID_TXN_STATE)
    if not commit and tv >= 2 and not retry and state in (TxnState.EMPTY, *COMPLETE):
        # nothing was added (the client's sends failed before reaching a partition): an empty
        # transaction, aborted with the epoch bumped all the same
        return _prepare(st, meta, TxnState.PREPARE_ABORT, tv, now)
    return _err(ErrorCode.INVALID_TXN_STATE)


def _prepare(st: TxnCoordinatorState, meta: TxnMetadata, state: TxnState, tv: int, now: int) -> Result:
    """Ongoing (or, TV2 abort, nothing open) -> PrepareCommit/PrepareAbort (Kafka's
    prepareAbortOrCommit). Answered with the producer id and epoch the client goes on with."""
    if tv >= 2:
        next_pid = st.allocate_producer_id() if meta.epoch_exhausted else NO_PRODUCER_ID
        new = meta.transit(
            state=state,
            producer_epoch=min(meta.producer_epoch + 1, MAX_EPOCH),
            last_producer_epoch=meta.producer_epoch,
            next_producer_id=next_pid,
            last_update_ms=now,
            client_transaction_version=tv,
        )
        answer = (0, next_pid, 0) if next_pid != NO_PRODUCER_ID else (0, new.producer_id, new.producer_epoch)
    else:
        new = meta.transit(state=state, last_update_ms=now, client_transaction_version=tv)
        answer = (0, meta.producer_id, meta.producer_epoch)
    if meta.state != TxnState.ONGOING:
        new.partitions = set()
        new.start_ms = now
    return Result(
        response=answer,
        records=[new.record(st.config.log_value_version)],
        after=_prepared_after(st, meta.transactional_id),
    )


def abort_timed_out(st: TxnCoordinatorState, tid: str, pid: int, epoch: int, now: int) -> Result:
    """The timeout timer: a transaction still open past its timeout is aborted with the producer's
    epoch bumped (Kafka's abortTimedOutTransactions: fence, then abort), so the producer is fenced."""
    meta = st.txns.get(tid)
    if (
        meta is None
        or meta.state != TxnState.ONGOING
        or (meta.producer_id, meta.producer_epoch) != (pid, epoch)
    ):
        return Result()
    if now < meta.start_ms + meta.timeout_ms:  # (after-steps run only with records: arm it now)
        arm_timeout(st, tid, pid, epoch, meta.start_ms + meta.timeout_ms)
        return Result()
    bumped = epoch + 1 if epoch < MAX_EPOCH else epoch
    new = meta.transit(
        state=TxnState.PREPARE_ABORT,
        producer_epoch=bumped,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        last_update_ms=now,
        client_transaction_version=0,  # the fence's own bump: no second one, and no EndTxn retry
    )
    return Result(records=[new.record(st.config.log_value_version)], after=_prepared_after(st, tid))


def complete(st: TxnCoordinatorState, tid: str, pid: int, epoch: int, now: int) -> Result:
    """Once every marker is written: PrepareCommit -> CompleteCommit, PrepareAbort -> CompleteAbort."""
    meta = st.txns.get(tid)
    if meta is None or meta.state not in PREPARED or (meta.producer_id, meta.producer_epoch) != (pid, epoch):
        return Result()
    state = TxnState.COMPLETE_COMMIT if meta.state == TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
    new = meta.transit(state=state, partitions=set(), last_update_ms=now)
    if meta.next_producer_id != NO_PRODUCER_ID:
        # the epoch was exhausted at a TV2 end: the markers carried the old id's last epoch, and
        # the next transaction is the new id's, at epoch 0 (Kafka's prepareComplete)
        new.producer_id, new.producer_epoch = meta.next_producer_id, 0
        new.previous_producer_id = meta.producer_id
        new.next_producer_id = NO_PRODUCER_ID
    return Result(records=[new.record(st.config.log_value_version)])


def resume(st: TxnCoordinatorState, tid: str) -> Result:
    """At start-up: a transaction the log left prepared is completed (markers, then Complete*)."""
    meta = st.txns.get(tid)
    if meta is not None and meta.state in PREPARED:
        st.on_prepared(tid)  # nothing to write, so no after-steps: the runtime runs those after records
    return Result()


#: the periodic expiration of idle transactional ids
EXPIRE_KEY = "txn-expire"


def arm_expiration(st: TxnCoordinatorState, now: int) -> None:
    interval = st.config.expiration_check_interval_ms
    st.timers.schedule(EXPIRE_KEY, now + interval, lambda at: expire(st, at))


def expire(st: TxnCoordinatorState, now: int) -> Result:
    """Kafka's removeExpiredTransactionalIds: a transactional id with no transaction in progress
    (Empty, CompleteCommit, CompleteAbort) unused for ``transactional.id.expiration.ms`` is removed
    (a tombstone); its next InitProducerId starts afresh with a new producer id."""
    limit = now - st.config.id_expiration_ms
    expired = [
        TxnRecord(tid, None)
        for tid, meta in st.txns.items()
        if meta.state in (TxnState.EMPTY, *COMPLETE) and meta.last_update_ms <= limit
    ]
    arm_expiration(st, now)  # the next check (armed here: no after-steps without records)
    return Result(records=expired)
