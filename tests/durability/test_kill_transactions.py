"""Crash durability of transactions: SIGKILL the broker at random moments while a confluent-kafka
transactional producer runs transactions of 5 records over 2 partitions (every 3rd aborted), restart
it at once, and check what a read_committed consumer sees afterwards.

The producer runs in the test process; a thread kills the broker (``log.flush=interval``, 50 ms
windows, as test_kill.py) 0.2-1.5 s after each restart and restarts it. Each transaction ends as:
``committed`` (commit_transaction returned), ``aborted`` (abort_transaction returned, planned or
after an abortable error), or ``unknown`` (a fatal error: the producer is replaced, and the new one's
InitProducerId aborts or finds completed whatever the old one left). Checked on the log read back
with read_committed after a final clean restart: every committed transaction's records are there
exactly once, no aborted transaction's record is, an unknown transaction is all or nothing, and
every record read belongs to a committed or unknown transaction; read_uncommitted sees a superset.
The broker logs report no corruption other than torn tails (test_kill.check_broker_logs).
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import Producer

from tests.durability.test_kill import INTERVAL, BrokerProcess, _seed, check_broker_logs
from tests.support.transactions import one_transaction, read_isolated, transactional_producer

TOPIC = "txn-durable"
PARTS = 2
TRANSACTIONS = int(os.environ.get("DURABILITY_TRANSACTIONS", "120"))
KILLS = int(os.environ.get("DURABILITY_KILLS", "6"))
T = 60.0


def _wait_listening(b: BrokerProcess) -> None:
    for _ in range(400):
        if b.listening():
            return
        time.sleep(0.05)
    raise AssertionError("broker did not listen")


def _producer(bootstrap: str) -> Producer:
    return transactional_producer(bootstrap, "durable-tx", T)


def _read(bootstrap: str, isolation: str) -> list[str]:
    return [v for _p, _o, _k, v in read_isolated(bootstrap, TOPIC, PARTS, isolation, T)]


def test_transactions_survive_sigkill(tmp_path: Path):
    rng = random.Random(_seed())
    b = BrokerProcess(tmp_path / "data", tmp_path, {**INTERVAL, "num.partitions": str(PARTS)})
    b.spawn()
    _wait_listening(b)
    stop = threading.Event()
    kills = []

    def killer() -> None:
        while not stop.is_set() and len(kills) < KILLS:
            if stop.wait(rng.uniform(0.2, 1.5)):
                return
            b.kill()
            kills.append(time.monotonic())
            b.spawn()
            _wait_listening(b)

    outcome: dict[int, str] = {}
    p = _producer(b.bootstrap)
    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        for k in range(TRANSACTIONS):
            outcome[k] = "unknown"

            def produce(p: Producer, k: int = k) -> None:
                for i in range(5):
                    p.produce(TOPIC, value=f"t{k}-{i}".encode(), partition=i % PARTS)

            result = one_transaction(p, produce, k % 3 == 2, T)
            if result is None:
                p = _producer(b.bootstrap)
            else:
                outcome[k] = result
    finally:
        stop.set()
        thread.join(30)
    p.flush(T)
    assert b.terminate() == 0
    b.spawn()
    _wait_listening(b)
    try:
        committed_view = Counter(_read(b.bootstrap, "read_committed"))
        everything = Counter(_read(b.bootstrap, "read_uncommitted"))
    finally:
        b.terminate()
    check_broker_logs(b.logs)
    assert kills, "the broker was never killed"
    by_txn: dict[int, Counter] = {}
    for value, n in committed_view.items():
        k = int(value[1:].split("-")[0])
        by_txn.setdefault(k, Counter())[value] = n
    for k, state in outcome.items():
        got = by_txn.get(k, Counter())
        want = {f"t{k}-{i}" for i in range(5)}
        if state == "committed":
            assert dict(got) == dict.fromkeys(want, 1), (k, state, got)
        elif state == "aborted":
            assert not got, (k, state, got)
        else:
            assert not got or dict(got) == dict.fromkeys(want, 1), (k, state, got)
    assert set(by_txn) <= set(outcome)
    assert all(everything[v] >= n for v, n in committed_view.items())
    print(f"{len(kills)} kills; outcomes {Counter(outcome.values())}")
