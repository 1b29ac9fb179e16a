"""Exactly-once across broker crashes, with the Java client 3.9: a consume-transform-produce
application (tests/java/EosLoopProbe.java: a read_committed consumer in a classic group, a
transactional producer, sendOffsetsToTransaction with the consumer's groupMetadata()) turns 10,000
input records into output records, in transactions of at most ``MAX_POLL`` records, every 7th
transaction aborted on purpose (the application seeks back to the committed offsets and processes
that input again), while the broker (a separate process, ``log.flush=interval`` as test_kill.py) is
SIGKILLed twice: once the application has committed a third of the input and again at two thirds,
each time after a random delay of up to ``KILL_DELAY`` s so that the kill lands anywhere in a
transaction, and restarted after ``DOWN`` s of absence. The application survives as a real one
does: it aborts, or replaces its producer (whose initTransactions lets the coordinator complete or
abort what the old one left), and rewinds to the committed offsets.

Checked after a final clean restart, with another client (confluent-kafka): a read_committed reader
of the output sees every input record exactly once (output values name their input record), in
its input partition; the group's committed offsets equal the input's end offsets; read_uncommitted
sees the aborted attempts too (so read_committed did filter); the broker logs report no corruption
other than torn tails.

``DURABILITY_SEED`` fixes the seed of the kill delays (printed); ``EOS_RECORDS`` the input size;
``EOS_JAVA_CLIENT=4`` runs the loop with the kafka-clients 4.x jars instead (KIP-890 part 2: Produce
v12, TxnOffsetCommit v5, EndTxn v5 bumping the epoch at every end).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.durability.test_kill import INTERVAL, BrokerProcess, _seed, check_broker_logs
from tests.durability.test_kill_transactions import _wait_listening
from tests.support.java import require_java
from tests.support.transactions import read_isolated

pytestmark = pytest.mark.java

RECORDS = int(os.environ.get("EOS_RECORDS", "10000"))
CLIENT = os.environ.get("EOS_JAVA_CLIENT", "3.9")
PARTS = 3
ABORT_EVERY = 7
MAX_POLL = 80
KILL_DELAY = (0.0, 0.3)
#: seconds the broker stays dead before each restart: the first absence is shorter than the
#: producer's timeouts (the clients retry through it), the second longer (the application sees its
#: transaction time out and replaces the producer)
DOWN = (1.0, 6.0)
IN, OUT, GROUP, TID = "eos-in", "eos-out", "eos-app", "eos-app-tx"
T = 60.0  # client timeouts: hang guards only


def _seed_input(bootstrap: str) -> dict[int, int]:
    """RECORDS records ``in-{i}`` (key ``k{i}``) to partition ``i % PARTS``; returns end offsets."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, PARTS, 1) for t in (IN, OUT)]).values():
        f.result(T)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(RECORDS):
        p.produce(IN, key=f"k{i}", value=f"in-{i}", partition=i % PARTS)
        if i % 1000 == 999:
            p.poll(0)
    assert p.flush(T) == 0
    return {q: len(range(q, RECORDS, PARTS)) for q in range(PARTS)}


def _read(bootstrap: str, isolation: str) -> list[tuple[int, str]]:
    """(partition, value) of every record of OUT, with the given isolation level."""
    return [(q, v) for q, _o, _k, v in read_isolated(bootstrap, OUT, PARTS, isolation, T)]


def _committed(bootstrap: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        return {
            tp.partition: tp.offset for tp in c.committed([TopicPartition(IN, q) for q in range(PARTS)], T)
        }
    finally:
        c.close()


def _input_id(value: str) -> int:
    """``out-in-{i}@{txn}`` -> i"""
    assert value.startswith("out-in-"), value
    return int(value[len("out-in-") :].split("@")[0])


def test_java_eos_loop_survives_two_kills(tmp_path: Path):
    seed = _seed()
    print(f"DURABILITY_SEED={seed}")
    rng = random.Random(seed)
    java = require_java(CLIENT)
    b = BrokerProcess(tmp_path / "data", tmp_path, {**INTERVAL, "num.partitions": str(PARTS)})
    b.spawn()
    _wait_listening(b)
    events: list[dict] = []
    kills: list[int] = []  # input records committed when each kill was decided
    try:
        end = _seed_input(b.bootstrap)
        thresholds = [RECORDS // 3, 2 * RECORDS // 3]
        started = time.monotonic()
        args = [b.bootstrap, IN, OUT, GROUP, TID, str(ABORT_EVERY), str(MAX_POLL), "300"]
        with java.session("EosLoopProbe", args, timeout=120) as s:
            while True:
                line = s.next_line()
                if line is None:
                    break
                if not line.startswith("{"):
                    continue
                ev = json.loads(line)
                events.append(ev)
                if ev["event"] in ("done", "fatal"):
                    break
                if ev["event"] == "progress" and thresholds and ev["committed"] >= thresholds[0]:
                    thresholds.pop(0)
                    kills.append(ev["committed"])
                    time.sleep(rng.uniform(*KILL_DELAY))
                    b.kill()
                    time.sleep(DOWN[len(kills) - 1])
                    b.spawn()
                    _wait_listening(b)
            result = s.close()
        elapsed = time.monotonic() - started
        assert result.returncode == 0 and events and events[-1]["event"] == "done", (
            f"{events[-3:]}\nstderr:\n{result.stderr[-4000:]}"
        )
        done = events[-1]
        failures = [e for e in events if e["event"] == "failure"]
        assert len(kills) == 2, kills
        assert b.terminate() == 0
        b.spawn()
        _wait_listening(b)
        committed_view = _read(b.bootstrap, "read_committed")
        everything = _read(b.bootstrap, "read_uncommitted")
        group_offsets = _committed(b.bootstrap)
    finally:
        b.cleanup()
        (tmp_path / "events.json").write_text(json.dumps(events))  # the probe's events, for a post-mortem
    check_broker_logs(b.logs)

    ids = Counter(_input_id(v) for _, v in committed_view)
    missing = [i for i in range(RECORDS) if i not in ids]
    twice = {i: n for i, n in ids.items() if n > 1}
    assert not missing and not twice and set(ids) == set(range(RECORDS)), (
        f"missing {len(missing)} {missing[:10]}, more than once {len(twice)} {list(twice.items())[:10]}"
    )
    assert all(q == _input_id(v) % PARTS for q, v in committed_view)
    assert group_offsets == end, (group_offsets, end)
    assert {int(q): o for q, o in done["committedOffsets"].items()} == end
    # the aborted attempts are in the log: read_committed left them out
    assert len(everything) > len(committed_view) and Counter(everything) >= Counter(committed_view)
    print(
        f"{elapsed:.1f}s: {done['transactions']} transactions, {done['commits']} committed, "
        f"{done['plannedAborts']} aborted on purpose, {len(failures)} failures "
        f"({Counter((f['stage'], f['error']) for f in failures)}), {done['producers']} producers; "
        f"kills at {kills} committed input records; {len(everything) - len(committed_view)} aborted output records"
    )
