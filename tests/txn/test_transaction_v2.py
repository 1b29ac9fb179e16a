"""Transaction version 2 (KIP-890 part 2) on the coordinator's state machine, as Kafka's
TransactionCoordinator.endTransaction and TransactionMetadata.prepareAbortOrCommit/prepareComplete
decide it: the implicit add of a Produce v12, the epoch bumped at every EndTxn v5 (the markers carry
the bumped epoch), the producer id rotated when the epoch is exhausted, retries of an end whose
answer was lost, and the TV2 fields of the transaction log value (v1)."""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.txn.records import decode, from_batches
from broker.txn.state import TxnState
from tests.txn.context import TxnContext

OK = 0


def _txn(ctx: TxnContext, tid: str = "app") -> tuple[int, int]:
    _, pid, epoch = ctx.init(tid)
    assert ctx.add_v2(tid, pid, epoch, ("t", 0)) == OK
    return pid, epoch


def test_end_v5_bumps_the_epoch_and_the_markers_carry_it():
    ctx = TxnContext()
    pid, epoch = _txn(ctx)
    assert ctx.meta("app").client_transaction_version == 2
    assert ctx.end("app", pid, epoch, True, tv=2) == (OK, pid, epoch + 1)
    meta = ctx.meta("app")
    # prepared with the bumped epoch: the facade writes the markers with meta's epoch
    assert (meta.state, meta.producer_epoch, meta.last_producer_epoch) == (
        TxnState.PREPARE_COMMIT,
        epoch + 1,
        epoch,
    )
    ctx.complete("app")
    assert (ctx.meta("app").state, ctx.meta("app").producer_epoch) == (TxnState.COMPLETE_COMMIT, epoch + 1)
    # the next transaction runs at the bumped epoch; the old epoch is fenced
    assert ctx.add_v2("app", pid, epoch, ("t", 1)) == ErrorCode.PRODUCER_FENCED
    assert ctx.add_v2("app", pid, epoch + 1, ("t", 1)) == OK
    assert ctx.end("app", pid, epoch + 1, False, tv=2) == (OK, pid, epoch + 2)
    ctx.complete("app")
    assert ctx.meta("app").state == TxnState.COMPLETE_ABORT


def test_a_retried_end_gets_the_same_answer_and_an_old_epoch_is_fenced():
    ctx = TxnContext()
    pid, epoch = _txn(ctx)
    ctx.end("app", pid, epoch, True, tv=2)
    # while prepared: the retry (the epoch before the bump) waits
    assert ctx.end("app", pid, epoch, True, tv=2)[0] == ErrorCode.CONCURRENT_TRANSACTIONS
    ctx.complete("app")
    n = len(ctx.log)
    assert ctx.end("app", pid, epoch, True, tv=2) == (OK, pid, epoch + 1)
    assert len(ctx.log) == n  # a retry writes nothing
    assert ctx.end("app", pid, epoch, False, tv=2)[0] == ErrorCode.INVALID_TXN_STATE
    assert ctx.end("app", pid, epoch - 1, True, tv=2)[0] == ErrorCode.PRODUCER_FENCED
    assert ctx.end("app", pid + 1, epoch + 1, True, tv=2)[0] == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    # the current epoch committing nothing is no transaction to commit
    assert ctx.end("app", pid, epoch + 1, True, tv=2)[0] == ErrorCode.INVALID_TXN_STATE


def test_aborting_with_nothing_added_bumps_the_epoch_too():
    ctx = TxnContext()
    pid, epoch = _txn(ctx)
    ctx.end("app", pid, epoch, True, tv=2)
    ctx.complete("app")
    # a TV2 client whose sends never reached a partition aborts at the current epoch
    assert ctx.end("app", pid, epoch + 1, False, tv=2) == (OK, pid, epoch + 2)
    meta = ctx.meta("app")
    assert (meta.state, meta.partitions) == (TxnState.PREPARE_ABORT, set())
    ctx.complete("app")
    assert ctx.end("app", pid, epoch + 1, False, tv=2) == (OK, pid, epoch + 2)  # its retry


def test_an_exhausted_epoch_rotates_the_producer_id_at_the_end():
    ctx = TxnContext()
    pid, _ = _txn(ctx)
    ctx.meta("app").producer_epoch = 32766  # as if bumped that often
    code, new_pid, new_epoch = ctx.end("app", pid, 32766, True, tv=2)
    assert code == OK and new_pid != pid and new_epoch == 0
    meta = ctx.meta("app")
    # the markers go out under the old id at its last epoch; the new id waits in next_producer_id
    assert (meta.producer_id, meta.producer_epoch, meta.next_producer_id) == (pid, 32767, new_pid)
    assert ctx.restart().meta("app").next_producer_id == new_pid
    ctx.complete("app")
    meta = ctx.meta("app")
    assert (meta.producer_id, meta.producer_epoch, meta.previous_producer_id) == (new_pid, 0, pid)
    assert (meta.next_producer_id, meta.state) == (-1, TxnState.COMPLETE_COMMIT)
    # the retry names the old id and its last epoch, and gets the new one
    assert ctx.end("app", pid, 32766, True, tv=2) == (OK, new_pid, 0)
    assert ctx.add_v2("app", new_pid, 0, ("t", 0)) == OK
    restarted = ctx.restart().meta("app")
    assert (restarted.producer_id, restarted.previous_producer_id) == (new_pid, pid)


def test_a_timeout_abort_fences_a_tv2_producer():
    ctx = TxnContext()
    pid, epoch = _txn(ctx)
    ctx.advance(60_000)
    meta = ctx.meta("app")
    assert (meta.state, meta.producer_epoch) == (TxnState.PREPARE_ABORT, epoch + 1)
    ctx.complete("app")
    # not an end's retry: the fence bumped the epoch, the producer's end is fenced
    assert ctx.end("app", pid, epoch, True, tv=2)[0] == ErrorCode.PRODUCER_FENCED
    assert ctx.end("app", pid, epoch, False, tv=2)[0] == ErrorCode.PRODUCER_FENCED
    assert ctx.add_v2("app", pid, epoch, ("t", 0)) == ErrorCode.PRODUCER_FENCED


def test_classic_end_does_not_bump():
    ctx = TxnContext()
    _, pid, epoch = ctx.init("app")
    assert ctx.add("app", pid, epoch, ("t", 0)) == OK
    assert ctx.meta("app").client_transaction_version == 0
    assert ctx.end("app", pid, epoch, True) == (OK, pid, epoch)
    ctx.complete("app")
    assert ctx.meta("app").producer_epoch == epoch
    assert ctx.end("app", pid, epoch, True) == (OK, pid, epoch)  # a retry
    assert ctx.end("app", pid, epoch, False)[0] == ErrorCode.INVALID_TXN_STATE  # nothing to abort


def test_log_value_v1_carries_the_tv2_fields():
    ctx = TxnContext()
    pid, epoch = _txn(ctx)
    ctx.end("app", pid, epoch, True, tv=2)
    (_off, rec), *_ = from_batches(ctx.log[-1])
    assert rec.value_version == 1
    value = rec.value_bytes()
    assert value[:2] == b"\x00\x01"
    again = decode(rec.key_bytes(), value).value
    assert again.client_transaction_version == 2 and again.producer_epoch == epoch + 1
    # transaction.version 0 writes value v0, which has none of them
    old = TxnContext(transaction_version=0)
    old.init("app")
    (_off, rec), *_ = from_batches(old.log[-1])
    assert rec.value_version == 0 and rec.value_bytes()[:2] == b"\x00\x00"
