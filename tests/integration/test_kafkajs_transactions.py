"""kafkajs transactions (tests/integration/js/kafkajs_txn.js) against the broker: a transactional
producer commits records to three partitions together with a consumer group's offsets
(sendOffsets), aborts a second transaction (records and offsets), commits a third; a read_committed
consumer (kafkajs' default isolation) sees exactly the committed records, a readUncommitted one the
aborted ones too, and the group's committed offset is the committed transaction's, not the aborted
one's. kafkajs speaks the classic protocol (AddPartitionsToTxn, EndTxn below v5) whatever the
broker's transaction.version."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KAFKAJS_DIR = REPO / ".reference" / "kafkajs"
PROBE = Path(__file__).parent / "js" / "kafkajs_txn.js"


def _run(broker, *args: str) -> dict:
    node = shutil.which("node")
    if node is None or not (KAFKAJS_DIR / "node_modules" / "kafkajs").is_dir():
        pytest.fail("kafkajs is not installed: run scripts/kafkajs.sh (scripts/setup.sh test does)")
    r = subprocess.run(
        [node, str(PROBE), broker.bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "KAFKAJS_DIR": str(KAFKAJS_DIR)},
    )
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    assert lines and r.returncode == 0, (r.stdout, r.stderr[-4000:])
    return json.loads(lines[-1])


def test_kafkajs_commit_abort_send_offsets_and_read_committed(broker_factory):
    # the two reading consumers each form a group: no initial rebalance delay to wait out
    broker = broker_factory({"group.initial.rebalance.delay.ms": "0"})
    broker.call(broker.broker.create_topic, "kjs-out", 3)
    broker.call(broker.broker.create_topic, "kjs-in", 1)
    out = _run(broker, "kjs-out", "kjs-in", "kjs-group", "kjs-tx")
    committed = [f"c{i}" for i in range(6)] + ["d0", "d1"]
    aborted = ["a0", "a1", "a2"]
    assert sorted(out["committed"]) == sorted(committed)  # each once, no aborted one
    assert sorted(out["uncommitted"]) == sorted(committed + aborted)
    assert out["offsets"] == {"0": 5}  # the aborted transaction's offset 9 was dropped
