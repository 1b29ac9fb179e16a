"""The Java client's transactions (tests/java/TxnProbe.java) against the broker: a transactional
producer commits and aborts; read_committed sees the committed records once and never an aborted
one, read_uncommitted sees both; consume-transform-produce with sendOffsetsToTransaction and the
consumer's group metadata, some transactions aborted; a second producer with the same
transactional id fences the first; the Admin's listTransactions, describeTransactions and
describeProducers."""

from __future__ import annotations

import pytest

from tests.support.java import json_lines, require_java

pytestmark = [pytest.mark.java, pytest.mark.usefixtures("java_clients")]


def _run(broker, *commands, timeout=180):
    result = require_java().run("TxnProbe", [broker.bootstrap, *commands], timeout=timeout)
    lines = json_lines(result.stdout)
    failed = [line for line in lines if "error" in line]
    assert result.returncode == 0 and not failed, f"{failed}\nstderr:\n{result.stderr[-4000:]}"
    return lines


def test_java_commit_abort_and_isolation(broker):
    broker.call(broker.broker.create_topic, "jtx", 3)
    txn, committed, uncommitted = _run(
        broker, "txn jtx j-tx 12 4", "read jtx read_committed", "read jtx read_uncommitted"
    )
    assert len(txn["aborted"]) == 15 and len(txn["committed"]) == 45
    assert sorted(committed["values"]) == sorted(txn["committed"])  # each once, no aborted one
    assert sorted(uncommitted["values"]) == sorted(txn["committed"] + txn["aborted"])
    # per transaction: 2, 2 and 1 records and one marker per partition
    assert committed["end"] == uncommitted["end"] == {"0": 36, "1": 36, "2": 24}


def test_java_consume_transform_produce(broker):
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
