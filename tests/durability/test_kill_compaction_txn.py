"""Crash durability of a compacted topic written by transactions: SIGKILL the broker at random moments
while a confluent-kafka transactional producer writes keyed records to a ``cleanup.policy=compact``
topic (every 3rd transaction aborted) and the log cleaner compacts it continuously (kills land
before, inside and after passes), restart, and check the cleaned log read back.

The broker (``python -m broker serve``, log.flush=always) has 4 KB segments, a cleaner that looks
every 5 ms, ``max.compaction.lag.ms=1`` (every dirty segment due at once) and
``delete.retention.ms=0`` (markers go as soon as their transaction has nothing left). Each
transaction ends ``committed``, ``aborted`` or ``unknown`` (a fatal error: a new producer's
InitProducerId aborts or completes what the old one left). After a final clean restart, read_committed
from the beginning shows, for every key, the value of its last committed transaction (or of a later
``unknown`` one), never a value of an aborted transaction; read_uncommitted shows no aborted record
below the cleaner's checkpoint (cleaned away); a new producer with the same transactional id goes
on; the broker logs show cleaner passes over the partition and no error.

``DURABILITY_SEED`` fixes the seed, ``DURABILITY_KILLS`` the number of kills (default 6),
``DURABILITY_TRANSACTIONS`` the least number of transactions (default 150; more run until the
last kill).
"""

from __future__ import annotations

import itertools
import os
import random
import threading
import time
from pathlib import Path

from confluent_kafka import Producer

from broker.log import cleaner
from tests.durability.test_kill_transactions import _wait_listening
from tests.support.transactions import one_transaction, read_isolated, retrying, transactional_producer

from .test_kill import BrokerProcess, _seed, check_broker_logs
from .test_kill_compaction import check_cleaner_logs

TOPIC = "txn-table"
KEYS = 40
RECORDS = 20  # per transaction
PAD = "x" * 300  # longer passes: more kills land inside one
TRANSACTIONS = int(os.environ.get("DURABILITY_TRANSACTIONS", "150"))
KILLS = int(os.environ.get("DURABILITY_KILLS", "6"))
T = 60.0  # hang guard only
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "4096",
    "max.compaction.lag.ms": "1",
    "delete.retention.ms": "0",
}
COMPACTING = {"log.cleaner.backoff.ms": "5", "log.flush": "always"}


def _producer(bootstrap: str) -> Producer:
    return transactional_producer(bootstrap, "table-tx", T)


def _read(bootstrap: str, isolation: str) -> list[tuple[int, str, str]]:
    """(offset, key, value) of every record ``isolation`` shows, from the beginning to the end."""
    return [(o, k.decode(), v) for _p, o, k, v in read_isolated(bootstrap, TOPIC, 1, isolation, T)]


def test_transactions_on_a_compacted_topic_survive_sigkill_during_cleaning(broker_factory, tmp_path: Path):
    seed = _seed()
    print(f"DURABILITY_SEED={seed}")
    rng = random.Random(seed)
    data = tmp_path / "data"
    b0 = broker_factory({}, data)
    b0.call(b0.broker.create_topic, TOPIC, 1, TOPIC_CONFIGS)
    b0.stop()

    b = BrokerProcess(data, tmp_path, COMPACTING)
    b.spawn()
    _wait_listening(b)
    stop = threading.Event()
    kills = []

    def killer() -> None:
        while not stop.is_set() and len(kills) < KILLS:
            if stop.wait(rng.uniform(0.3, 2.0)):
                return
            b.kill()
            kills.append(time.monotonic())
            b.spawn()
            _wait_listening(b)

    outcome: dict[int, str] = {}
    writes: dict[int, dict[str, str]] = {}  # transaction -> key -> value
    p = _producer(b.bootstrap)
    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 600  # hang guard only
        for k in itertools.count():
            if k >= TRANSACTIONS and (len(kills) >= KILLS or not thread.is_alive()):
                break
            assert time.monotonic() < deadline, f"{len(kills)} kills after {k} transactions"
            outcome[k] = "unknown"
            records = {f"k{rng.randrange(KEYS)}": f"t{k}-{i}-{PAD}" for i in range(RECORDS)}
            writes[k] = records

            def produce(p: Producer, records: dict[str, str] = records) -> None:
                for key, value in records.items():
                    p.produce(TOPIC, key=key.encode(), value=value.encode(), partition=0)

            result = one_transaction(p, produce, k % 3 == 2, T)
            if result is None:
                p = _producer(b.bootstrap)
            else:
                outcome[k] = result
    finally:
        stop.set()
        thread.join(60)
    p.flush(T)
    del p
    assert b.terminate() == 0
    b.spawn()
    _wait_listening(b)
    try:
        committed = _read(b.bootstrap, "read_committed")
        everything = _read(b.bootstrap, "read_uncommitted")
        checkpoint = cleaner.read_checkpoint(data / f"{TOPIC}-0")
        # the producer goes on after the kills and the cleaning
        p = _producer(b.bootstrap)
        p.begin_transaction()
        p.produce(TOPIC, key=b"after", value=b"restart", partition=0)
        retrying(p.commit_transaction, T)
        assert ("after", "restart") in [(k, v) for _o, k, v in _read(b.bootstrap, "read_committed")]
        del p
    finally:
        assert b.terminate() == 0
    check_broker_logs(b.logs)
    check_cleaner_logs(b.logs, f"{TOPIC}-0", KILLS)
    assert kills, "the broker was never killed"

    def txn_of(value: str) -> int:
        return int(value[1:].split("-")[0])

    # no record of an aborted transaction is visible read_committed
    assert not [v for _o, _k, v in committed if outcome[txn_of(v)] == "aborted"]
    # each key's value read_committed: its last committed transaction's, or a later unknown one's
    latest = {k: v for _o, k, v in committed}
    for key in {k for w in writes.values() for k in w}:
        last_committed = max(
            (t for t, w in writes.items() if key in w and outcome[t] == "committed"), default=None
        )
        got = latest.get(key)
        if last_committed is None:
            assert got is None or outcome[txn_of(got)] == "unknown", (key, got)
            continue
        assert got is not None, f"{key}: its committed value {writes[last_committed][key]} is gone"
        t = txn_of(got)
        assert t == last_committed or (t > last_committed and outcome[t] == "unknown"), (
            key,
            got,
            last_committed,
        )
        assert got == writes[t][key]
    # below the checkpoint the cleaner has run over everything: no aborted record is left there
    assert checkpoint > 0
    left = [(o, v) for o, _k, v in everything if o < checkpoint and outcome[txn_of(v)] == "aborted"]
    assert left == [], left[:10]
    print(
        f"{len(kills)} kills; outcomes {sorted((s, list(outcome.values()).count(s)) for s in set(outcome.values()))}"
    )
