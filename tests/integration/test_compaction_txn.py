"""Transactions on a compacted topic with confluent-kafka: a transactional producer commits some keys
and aborts others, a second one leaves its transaction open; cleaner passes (forced, one at a time)
remove the aborted records, keep each key's latest committed value, leave everything from the open
transaction's segment on untouched, and drop the abort marker once its transaction has nothing left
and ``delete.retention.ms`` has passed. read_uncommitted and read_committed consumers see what
Kafka shows after its cleaner: no aborted record, the latest committed values, the open
transaction's records only read_uncommitted. The producers go on afterwards (their state survives
the cleaning) and a restart reads the same.

``segment.ms=1`` rolls the active segment on nearly every append, so each transaction's batches and
markers land in closed segments the cleaner may take.
"""

from __future__ import annotations

import asyncio
import os

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from confluent_kafka import Producer  # noqa: E402

from broker.log import cleaner  # noqa: E402
from broker.log.batch import CONTROL_MASK  # noqa: E402
from broker.log.control import parse_marker  # noqa: E402
from tests.support.transactions import read_isolated  # noqa: E402

TIMEOUT = 60.0
TOPIC = "ledger"
CONFIGS = {"cleanup.policy": "compact", "segment.ms": "1", "delete.retention.ms": "0"}


def _txn_producer(b, tid: str) -> Producer:
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(TIMEOUT)
    return p


def _write(p: Producer, records: dict[str, str]) -> None:
    for k, v in records.items():
        p.produce(TOPIC, key=k.encode(), value=v.encode(), partition=0)
    assert p.flush(TIMEOUT) == 0


def _plain(b, key: str) -> None:
    p = Producer({"bootstrap.servers": b.bootstrap})
    p.produce(TOPIC, key=key.encode(), value=b"plain", partition=0)
    assert p.flush(TIMEOUT) == 0


def _read(b, isolation: str) -> list[tuple[int, str, str]]:
    """(offset, key, value) of every record ``isolation`` shows, read to the partition's end."""
    return [(o, k.decode(), v) for _p, o, k, v in read_isolated(b.bootstrap, TOPIC, 1, isolation, TIMEOUT)]


def _latest(records: list[tuple[int, str, str]]) -> dict[str, str]:
    return {k: v for _o, k, v in records}


def _clean(b) -> None:
    """One cleaner pass over the partition, now (the broker's own LogCleaner.clean, on its loop)."""
    plog = b.call(lambda: b.broker.logs.get(TOPIC, 0))
    asyncio.run_coroutine_threadsafe(b.broker.logs.cleaner.clean(plog), b.loop).result(TIMEOUT)


def _markers(b) -> list[tuple[int, bool | None, int]]:
    """(offset, commit?, records) of every control batch in the log, read through open descriptors."""

    def read():
        plog = b.broker.logs.get(TOPIC, 0)
        out = []
        for seg, info in plog._iter_batches(plog.log_start_offset):
            if info.attributes & CONTROL_MASK:
                buf = os.pread(seg.fd, info.size, info.position)
                keys = [k for _o, _t, k, _tb, _r in cleaner._records(buf, 0, False)]
                out.append((info.base_offset, parse_marker(keys[0]) if keys else None, len(keys)))
        return out

    return b.call(read)


def test_aborted_records_go_committed_values_stay_open_transaction_untouched(broker_factory, tmp_path):
    data = tmp_path / "data"
    b = broker_factory({"log.cleaner.enable": "false"}, data)
    b.call(b.broker.create_topic, TOPIC, 1, CONFIGS)
    t1 = _txn_producer(b, "ledger-tx")
    t1.begin_transaction()
    _write(t1, {f"k{i}": f"A-{i}" for i in range(10)})
    t1.commit_transaction(TIMEOUT)
    t1.begin_transaction()
    _write(t1, {**{f"k{i}": f"B-{i}" for i in range(5)}, **{f"bx{i}": f"B-{i}" for i in range(5)}})
    t1.abort_transaction(TIMEOUT)
    t1.begin_transaction()
    _write(t1, {f"k{i}": f"C-{i}" for i in range(5, 10)})
    t1.commit_transaction(TIMEOUT)
    _plain(b, "p0")
    t2 = _txn_producer(b, "ledger-open")
    t2.begin_transaction()
    _write(t2, {"k0": "O-0", "o1": "O-1"})  # left open
    _plain(b, "p1")

    before = _read(b, "read_uncommitted")
    aborted = {o for o, _k, v in before if v.startswith("B-")}
    assert len(aborted) == 10
    open_first = min(o for o, _k, v in before if v.startswith("O-"))
    committed = {
        **{f"k{i}": f"A-{i}" for i in range(5)},
        **{f"k{i}": f"C-{i}" for i in range(5, 10)},
        "p0": "plain",
    }
    assert _latest(_read(b, "read_committed")) == committed

    _clean(b)
    # the range ends at the open transaction's segment: nothing of it (nor after it) was touched
    end = b.call(lambda: cleaner.read_checkpoint(b.broker.logs.get(TOPIC, 0).dir))
    assert 0 < end <= open_first
    assert b.call(lambda: b.broker.logs.get(TOPIC, 0).last_stable_offset) == open_first
    after = _read(b, "read_uncommitted")
    assert not {o for o, _k, _v in after} & aborted
    assert [r for r in after if r[0] >= end] == [r for r in before if r[0] >= end]
    # below the range's end each key once, its latest committed value
    cleaned = [r for r in after if r[0] < end]
    assert len({k for _o, k, _v in cleaned}) == len(cleaned)
    assert _latest(cleaned) == committed
    assert _latest(_read(b, "read_committed")) == committed
    # the abort marker stays while its transaction had batches in the pass; then it has a delete
    # horizon (delete.retention.ms=0: now), and the next pass removes it
    kinds = [k for _o, k, _n in _markers(b)]
    assert kinds == [True, False, True]
    assert b.call(lambda: [e.producer_id for e in b.broker.logs.get(TOPIC, 0).aborted.entries]) != []
    _clean(b)
    assert b.call(lambda: b.broker.logs.get(TOPIC, 0).aborted.entries) == []
    _clean(b)
    assert [k for _o, k, _n in _markers(b)] == [True, True]
    assert _latest(_read(b, "read_committed")) == committed

    # the open transaction commits: its k0 supersedes A's at the next pass; both readers agree
    t2.commit_transaction(TIMEOUT)
    _plain(b, "p2")
    _clean(b)
    want = {**committed, "k0": "O-0", "o1": "O-1", "p1": "plain", "p2": "plain"}
    for isolation in ("read_uncommitted", "read_committed"):
        records = _read(b, isolation)
        assert _latest(records) == want, isolation
    # the producers go on: their epochs and sequences were kept through the cleaning
    t1.begin_transaction()
    _write(t1, {"k1": "D-1"})
    t1.commit_transaction(TIMEOUT)
    want["k1"] = "D-1"
    assert _latest(_read(b, "read_committed")) == want
    b.stop()
    again = broker_factory({"log.cleaner.enable": "false"}, data)
    for isolation in ("read_uncommitted", "read_committed"):
        assert _latest(_read(again, isolation)) == want, isolation
    t3 = _txn_producer(again, "ledger-tx")  # fences the old t1 and goes on after the restart
    t3.begin_transaction()
    _write(t3, {"k2": "E-2"})
    t3.commit_transaction(TIMEOUT)
    assert _latest(_read(again, "read_committed"))["k2"] == "E-2"
