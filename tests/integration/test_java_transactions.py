"""The Java client's transactions (tests/java/TxnProbe.java) against the broker: a transactional
producer commits and aborts; read_committed sees the committed records once and never an aborted
one, read_uncommitted sees both; consume-transform-produce with sendOffsetsToTransaction and the
consumer's group metadata, some transactions aborted; a second producer with the same
transactional id fences the first; the Admin's listTransactions, describeTransactions and
describeProducers.

Each runs on a broker with transaction.version 2 (the default: the 4.x client then uses KIP-890
part 2, Produce v12 without AddPartitionsToTxn, TxnOffsetCommit v5 without AddOffsetsToTxn, EndTxn
v5 bumping the epoch at every end; 3.9 does not) and with transaction.version 0 (the classic
protocol for both); the coordinator's state after the run says which protocol the client spoke."""

from __future__ import annotations

import pytest

from tests.support.java import json_lines, require_java

pytestmark = [pytest.mark.java, pytest.mark.usefixtures("java_clients")]


@pytest.fixture(params=[2, 0], ids=lambda v: f"tv{v}")
def broker(request, broker_factory):
    """A broker finalizing transaction.version at the parameter's level."""
    b = broker_factory({"transaction.version": str(request.param)})
    b.transaction_version = request.param
    return b


def _uses_tv2(broker, java_clients: str) -> bool:
    """Whether the client is expected to speak KIP-890 part 2 with this broker."""
    return broker.transaction_version == 2 and java_clients != "3.9"


def _txn_state(broker, tid: str):
    return broker.call(lambda: broker.broker.txns.state.txns[tid].transit())


def _run(broker, *commands, timeout=180):
    result = require_java().run("TxnProbe", [broker.bootstrap, *commands], timeout=timeout)
    lines = json_lines(result.stdout)
    failed = [line for line in lines if "error" in line]
    assert result.returncode == 0 and not failed, f"{failed}\nstderr:\n{result.stderr[-4000:]}"
    return lines


def test_java_commit_abort_and_isolation(broker, java_clients):
    broker.call(broker.broker.create_topic, "jtx", 3)
    txn, committed, uncommitted = _run(
        broker, "txn jtx j-tx 12 4", "read jtx read_committed", "read jtx read_uncommitted"
    )
    assert len(txn["aborted"]) == 15 and len(txn["committed"]) == 45
    assert sorted(committed["values"]) == sorted(txn["committed"])  # each once, no aborted one
    assert sorted(uncommitted["values"]) == sorted(txn["committed"] + txn["aborted"])
    # per transaction: 2, 2 and 1 records and one marker per partition
    assert committed["end"] == uncommitted["end"] == {"0": 36, "1": 36, "2": 24}
    # 12 transactions: with TV2 each end bumped the epoch (EndTxn v5), else none did
    meta = _txn_state(broker, "j-tx")
    if _uses_tv2(broker, java_clients):
        assert (meta.producer_epoch, meta.client_transaction_version) == (12, 2)
    else:
        assert (meta.producer_epoch, meta.client_transaction_version) == (0, 0)


def test_java_consume_transform_produce(broker, java_clients):
    for topic in ("jin", "jout"):
        broker.call(broker.broker.create_topic, topic, 2)
    _run(broker, "txn jin seed 20 1000")  # 100 committed input records
    (ctp,) = _run(broker, "ctp jin jout jgroup ctp-tx 100")
    assert ctp["aborts"] >= 1
    (out,) = _run(broker, "read jout read_committed")
    inputs = [f"t{k}-{i}" for k in range(20) for i in range(5)]
    assert sorted(out["values"]) == sorted(v.upper() for v in inputs)  # exactly once
    # the offset after the last input record read: per seed transaction 3 and 2 records and a
    # marker per partition, the last marker not consumed
    assert ctp["committedOffsets"] == {"0": 20 * 4 - 1, "1": 20 * 3 - 1}
    assert (_txn_state(broker, "ctp-tx").producer_epoch > 0) == _uses_tv2(broker, java_clients)


def test_java_fencing_and_admin(broker):
    broker.call(broker.broker.create_topic, "jf", 1)
    fence, admin = _run(broker, "fence jf j-shared", "admin j-shared jf")
    assert fence["fenced"] in ("ProducerFencedException", "InvalidProducerEpochException"), fence
    (read,) = _run(broker, "read jf read_committed")
    assert read["values"] == ["winner"]
    assert {"j-shared"} <= {t["id"] for t in admin["listed"]}
    desc = admin["described"]
    assert desc["state"] in ("CompleteCommit", "COMPLETE_COMMIT") and desc["partitions"] == []
    pids = {p["producerId"] for p in admin["producers"]}
    assert desc["producerId"] in pids and all(p["txnStartOffset"] == -1 for p in admin["producers"])
