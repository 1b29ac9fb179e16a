"""InitProducerId with a transactional id, on the coordinator's state machine (Kafka's
TransactionCoordinator.handleInitProducerId and TransactionMetadata transitions)."""

from __future__ import annotations

from broker.log.records import iter_records
from broker.protocol.errors import ErrorCode
from broker.txn.state import TxnState
from tests.txn.context import TxnContext

OK = 0


def test_new_transactional_id_gets_a_producer_id_at_epoch_zero():
    ctx = TxnContext()
    code, pid, epoch = ctx.init("app-1")
    assert (code, epoch) == (OK, 0) and pid >= 0
    meta = ctx.meta("app-1")
    assert (meta.state, meta.producer_id, meta.producer_epoch, meta.timeout_ms) == (
        TxnState.EMPTY,
        pid,
        0,
        60_000,
    )


def test_each_init_bumps_the_epoch_and_keeps_the_producer_id():
    ctx = TxnContext()
    _, pid, _ = ctx.init("app")
    assert ctx.init("app", timeout_ms=30_000) == (OK, pid, 1)
    assert ctx.init("app") == (OK, pid, 2)
    assert ctx.meta("app").timeout_ms == 60_000


def test_timeout_bounds():
    ctx = TxnContext(max_timeout_ms=10_000)
    assert ctx.init("a", timeout_ms=10_001)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert ctx.init("a", timeout_ms=0)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert ctx.init("a", timeout_ms=-1)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert "a" not in ctx.state.txns  # nothing written
    assert ctx.init("a", timeout_ms=10_000)[0] == OK


def test_empty_transactional_id_is_invalid_request():
    assert TxnContext().init("")[0] == ErrorCode.INVALID_REQUEST


def test_state_survives_a_restart():
    ctx = TxnContext()
    _, pid, _ = ctx.init("app")
    ctx.init("app")
    again = ctx.restart()
    assert again.meta("app").producer_id == pid and again.meta("app").producer_epoch == 1
    assert again.init("app") == (OK, pid, 2)


def test_an_open_transaction_is_fenced_and_aborted_first():
    ctx = TxnContext()
    _, pid, epoch = ctx.init("app")
    assert ctx.add("app", pid, epoch, ("t", 0)) == OK
    code, _, _ = ctx.init("app")  # a second producer with the same transactional id
    assert code == ErrorCode.CONCURRENT_TRANSACTIONS
    meta = ctx.meta("app")
    assert (meta.state, meta.producer_epoch) == (TxnState.PREPARE_ABORT, epoch + 1)
    assert ctx.prepared == ["app"]
    # while the markers are being written the retry is told to wait again
    assert ctx.init("app")[0] == ErrorCode.CONCURRENT_TRANSACTIONS
    ctx.complete("app")
    assert ctx.meta("app").state == TxnState.COMPLETE_ABORT
    assert ctx.init("app") == (OK, pid, epoch + 2)
    # the fenced producer's requests now fail
    assert ctx.add("app", pid, epoch, ("t", 0)) == ErrorCode.PRODUCER_FENCED
    assert ctx.end("app", pid, epoch, True)[0] == ErrorCode.PRODUCER_FENCED


def test_kip360_recovery_with_the_current_producer_id_and_epoch():
    ctx = TxnContext()
    _, pid, epoch = ctx.init("app")
    assert ctx.init("app", expected=(pid, epoch)) == (OK, pid, epoch + 1)
    # a retry of that bump (its answer lost) gets the same epoch again
    assert ctx.init("app", expected=(pid, epoch)) == (OK, pid, epoch + 1)
    # an epoch that is neither the current nor the last one is fenced
    assert ctx.init("app", expected=(pid, epoch + 5))[0] == ErrorCode.PRODUCER_FENCED
    # another producer id is fenced
    assert ctx.init("app", expected=(pid + 1, 0))[0] == ErrorCode.PRODUCER_FENCED


def test_kip360_on_a_new_transactional_id_accepts_any_producer_id():
    ctx = TxnContext()
    code, pid, epoch = ctx.init("fresh", expected=(12345, 7))
    assert code == OK and epoch == 0 and pid != 12345


def test_exhausted_epoch_rotates_the_producer_id():
    ctx = TxnContext()
    _, pid, _ = ctx.init("app")
    meta = ctx.meta("app")
    meta.producer_epoch = 32766  # as if bumped that often
    code, new_pid, epoch = ctx.init("app")
    assert code == OK and new_pid != pid and epoch == 0
    # the previous producer id is a tagged field of value v1 (written from transaction.version 1)
    assert ctx.restart().meta("app").producer_id == new_pid
    assert ctx.restart().meta("app").previous_producer_id == pid


def test_records_are_kafkas_transaction_log_layout():
    ctx = TxnContext(transaction_version=0)
    _, pid, _ = ctx.init("app")
    (batch,) = ctx.log
    ((_off, _ts, key, value, _h, _info),) = list(iter_records(batch))
    # key: version 0, then the transactional id as an int16-length string
    assert key == b"\x00\x00" + b"\x00\x03app"
    # value v0: version, producer id, epoch, timeout, status, partitions (null when Empty), times
    assert value[:2] == b"\x00\x00"
    assert int.from_bytes(value[2:10], "big") == pid
    assert value[10:12] == b"\x00\x00" and int.from_bytes(value[12:16], "big") == 60_000
    assert value[16] == 0 and value[17:21] == b"\xff\xff\xff\xff"
    assert len(value) == 21 + 16
