"""AddPartitionsToTxn, EndTxn, verification and the timeout abort on the coordinator's state
machine (Kafka's TransactionCoordinator: handleAddPartitionsToTransaction, endTransaction,
handleVerifyPartitionsInTransaction, abortTimedOutTransactions)."""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.txn import ops
from broker.txn.state import TxnState
from tests.txn.context import TxnContext

OK = 0


def _open(ctx: TxnContext, tid: str = "app") -> tuple[int, int]:
    _, pid, epoch = ctx.init(tid)
    return pid, epoch


def test_add_partitions_starts_the_transaction_once():
    ctx = TxnContext()
    pid, epoch = _open(ctx)
    start = ctx.clock.ms
    assert ctx.add("app", pid, epoch, ("t", 0), ("t", 1)) == OK
    meta = ctx.meta("app")
    assert (meta.state, meta.partitions, meta.start_ms) == (TxnState.ONGOING, {("t", 0), ("t", 1)}, start)
    n = len(ctx.log)
    ctx.clock.ms += 10
    assert ctx.add("app", pid, epoch, ("t", 0)) == OK
    assert len(ctx.log) == n  # already in: nothing written
    assert ctx.add("app", pid, epoch, ("u", 0)) == OK
    assert ctx.meta("app").start_ms == start and ("u", 0) in ctx.meta("app").partitions
    assert ctx.restart().meta("app").partitions == {("t", 0), ("t", 1), ("u", 0)}


def test_add_partitions_errors():
    ctx = TxnContext()
    pid, epoch = _open(ctx)
    assert ctx.add("nope", pid, epoch, ("t", 0)) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert ctx.add("app", pid + 1, epoch, ("t", 0)) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert ctx.add("app", pid, epoch + 1, ("t", 0)) == ErrorCode.PRODUCER_FENCED
    assert ctx.add("", pid, epoch, ("t", 0)) == ErrorCode.INVALID_REQUEST


def test_commit_prepares_then_completes():
    ctx = TxnContext()
    pid, epoch = _open(ctx)
    ctx.add("app", pid, epoch, ("t", 0))
    assert ctx.end("app", pid, epoch, True) == (OK, pid, epoch)
    assert ctx.meta("app").state == TxnState.PREPARE_COMMIT and ctx.prepared == ["app"]
    # while prepared: the same end again waits, the other end is invalid, adding waits
    assert ctx.end("app", pid, epoch, True)[0] == ErrorCode.CONCURRENT_TRANSACTIONS
    assert ctx.end("app", pid, epoch, False)[0] == ErrorCode.INVALID_TXN_STATE
    assert ctx.add("app", pid, epoch, ("t", 1)) == ErrorCode.CONCURRENT_TRANSACTIONS
    # a restart in this state still knows the partitions the markers must go to
    assert ctx.restart().meta("app").partitions == {("t", 0)}
    ctx.complete("app")
    meta = ctx.meta("app")
    assert (meta.state, meta.partitions) == (TxnState.COMPLETE_COMMIT, set())
    assert ctx.end("app", pid, epoch, True) == (OK, pid, epoch)  # a retry after completion
    assert ctx.end("app", pid, epoch, False)[0] == ErrorCode.INVALID_TXN_STATE
    # the next transaction starts from CompleteCommit
    assert ctx.add("app", pid, epoch, ("t", 1)) == OK and ctx.meta("app").state == TxnState.ONGOING


def test_abort_and_end_errors():
    ctx = TxnContext()
    pid, epoch = _open(ctx)
    assert ctx.end("app", pid, epoch, False)[0] == ErrorCode.INVALID_TXN_STATE  # Empty
    ctx.add("app", pid, epoch, ("t", 0))
    assert ctx.end("app", pid, epoch - 1, False)[0] == ErrorCode.PRODUCER_FENCED
    assert ctx.end("app", pid + 7, epoch, False)[0] == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert ctx.end("app", pid, epoch, False) == (OK, pid, epoch)
    ctx.complete("app")
    assert ctx.meta("app").state == TxnState.COMPLETE_ABORT


def test_verification():
    ctx = TxnContext()
    pid, epoch = _open(ctx)
    st = ctx.state
    assert ops.verify(st, "app", pid, epoch, ("t", 0)) == ErrorCode.TRANSACTION_ABORTABLE  # not added
    ctx.add("app", pid, epoch, ("t", 0))
    assert ops.verify(st, "app", pid, epoch, ("t", 0)) == ErrorCode.NONE
    assert ops.verify(st, "app", pid, epoch, ("t", 1)) == ErrorCode.TRANSACTION_ABORTABLE
    assert ops.verify(st, "app", pid, epoch - 1, ("t", 0)) == ErrorCode.PRODUCER_FENCED
    assert ops.verify(st, "other", pid, epoch, ("t", 0)) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    ctx.end("app", pid, epoch, True)
    assert ops.verify(st, "app", pid, epoch, ("t", 0)) == ErrorCode.CONCURRENT_TRANSACTIONS
    ctx.complete("app")
    assert ops.verify(st, "app", pid, epoch, ("t", 0)) == ErrorCode.TRANSACTION_ABORTABLE


def test_a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced():
    ctx = TxnContext()
    _, pid, epoch = ctx.init("app", timeout_ms=5_000)
    ctx.add("app", pid, epoch, ("t", 0))
    ctx.advance(4_999)
    assert ctx.meta("app").state == TxnState.ONGOING
    ctx.advance(1)
    meta = ctx.meta("app")
    assert (meta.state, meta.producer_epoch) == (TxnState.PREPARE_ABORT, epoch + 1)
    assert ctx.prepared == ["app"]
    ctx.complete("app")
    assert ctx.end("app", pid, epoch, True)[0] == ErrorCode.PRODUCER_FENCED
    assert ctx.init("app") == (OK, pid, epoch + 2)


def test_an_ended_transaction_is_not_aborted_by_its_old_timer():
    ctx = TxnContext()
    _, pid, epoch = ctx.init("app", timeout_ms=5_000)
    ctx.add("app", pid, epoch, ("t", 0))
    ctx.end("app", pid, epoch, True)
    ctx.complete("app")
    ctx.advance(2_000)
    ctx.add("app", pid, epoch, ("t", 0))  # a new transaction, started 2 s later
    ctx.advance(3_500)  # past the first one's deadline, not the second's
    assert ctx.meta("app").state == TxnState.ONGOING
    ctx.advance(1_500)
    assert ctx.meta("app").state == TxnState.PREPARE_ABORT


def test_timeout_is_rearmed_after_a_restart():
    ctx = TxnContext()
    _, pid, epoch = ctx.init("app", timeout_ms=5_000)
    ctx.add("app", pid, epoch, ("t", 0))
    again = ctx.restart()
    meta = again.meta("app")
    ops.arm_timeout(again.state, "app", pid, epoch, meta.start_ms + meta.timeout_ms)  # as load() does
    again.advance(5_000)
    assert again.meta("app").state == TxnState.PREPARE_ABORT


def test_idle_transactional_ids_expire():
    ctx = TxnContext()
    ctx.state.config.id_expiration_ms = 10_000
    ctx.state.config.expiration_check_interval_ms = 1_000
    ops.arm_expiration(ctx.state, ctx.clock.ms)
    _, pid, epoch = ctx.init("idle")
    _, pid2, epoch2 = ctx.init("busy")
    ctx.add("busy", pid2, epoch2, ("t", 0))  # a transaction in progress never expires
    ctx.advance(9_999)
    assert "idle" in ctx.state.txns
    ctx.advance(1)  # the check at 10 s: unused for the expiration time (Kafka's <=)
    assert "idle" not in ctx.state.txns and "busy" in ctx.state.txns
    assert "idle" not in ctx.restart().state.txns  # a tombstone
    code, new_pid, new_epoch = ctx.init("idle")
    assert code == OK and new_pid != pid and new_epoch == 0
