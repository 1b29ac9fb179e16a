"""``to_batch``'s compiled encoding of its common OffsetCommit records (broker/coordinator/_replay.c
``commit_records``, records.py ``native_commit_records``) against its Python encoding: the same batch
bytes, the same ``raw`` value bytes left on each record, and the same exception for a record neither
can encode, over generated record lists that mix the common record with every record the compiled
walk hands back to Python (metadata, no topic id, a str subclass, a bad field, a key record, the
transaction coordinator's records), long groups and more than 4,096 records."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from broker.coordinator import records as records_mod
from broker.coordinator.generated.offset_commit_key import OffsetCommitKey
from broker.coordinator.generated.offset_commit_value import OffsetCommitValue
from broker.coordinator.records import OFFSET_COMMIT, CoordinatorRecord, OffsetCommitRecord, to_batch
from broker.log.batch import iter_batches
from broker.log.records import iter_records
from broker.protocol.primitives import ZERO_UUID

needs_native = pytest.mark.skipif(
    records_mod.native_commit_records is None, reason="broker/coordinator/_replay.c is not built"
)

TIDS = [uuid.uuid4() for _ in range(3)]


class Str(str):
    pass


def common(rng: random.Random, group: str, topic: str) -> OffsetCommitRecord:
    return OffsetCommitRecord(
        group,
        topic,
        rng.randrange(0, 2**31),
        rng.choice([0, 1, 2**40, 2**63 - 1, -1]),
        rng.choice([-1, 0, 7, 2**31 - 1]),
        "",
        rng.choice([0, 1_700_000_000_000, -1]),
        rng.choice(TIDS),
    )


def odd(rng: random.Random, group: str, topic: str) -> Any:
    """A record the compiled walk does not take (Python encodes it, or raises for it)."""
    r = common(rng, group, topic)
    kind = rng.randrange(9)
    if kind == 0:
        r.metadata = rng.choice(["m", "é" * 70, "x" * 300])
    elif kind == 1:
        r.topic_id = ZERO_UUID
    elif kind == 2:
        r.group = Str(group)
    elif kind == 3:
        r.metadata = Str("")
    elif kind == 4:
        r.partition = True  # an int subclass: Python packs it as 1
    elif kind == 5:
        value = OffsetCommitValue(5, -1, rng.choice(["", "meta"]), 3, rng.choice(TIDS))
        return CoordinatorRecord(OFFSET_COMMIT, OffsetCommitKey(group, topic, 3), value)
    elif kind == 6:
        return CoordinatorRecord(OFFSET_COMMIT, OffsetCommitKey(group, topic, 4), None)  # a tombstone
    elif kind == 7:
        r.offset = 2**63  # out of int64: struct.error from Python
    else:
        r.topic_id = uuid.UUID(int=1)
    return r


def build(seed: int, n: int) -> list[Any]:
    rng = random.Random(seed)
    groups = ["g", "group-" + "x" * rng.randrange(0, 200), "grüppe", ""]
    topics = ["t", "topic-" + "y" * rng.randrange(0, 60), "tópico"]
    out = []
    for _ in range(n):
        g, t = rng.choice(groups), rng.choice(topics)
        out.append(odd(rng, g, t) if rng.random() < 0.05 else common(rng, g, t))
    return out


def encode(records: list[Any], native: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list]:
    with monkeypatch.context() as m:
        if not native:
            m.setattr(records_mod, "native_commit_records", None)
        try:
            out: Any = to_batch(records, 1_700_000_000_123)
        except Exception as e:
            out = (type(e), str(e))
    return out, [getattr(r, "raw", None) for r in records]


@needs_native
@pytest.mark.parametrize("seed", range(40))
def test_same_bytes_and_raw(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    n = random.Random(seed).choice([1, 2, 10, 63, 64, 65, 500, 1000])
    assert encode(build(seed, n), True, monkeypatch) == encode(build(seed, n), False, monkeypatch)


@needs_native
def test_more_than_4096_records(monkeypatch: pytest.MonkeyPatch) -> None:
    make = lambda: [common(random.Random(i), "g", "t") for i in range(5000)]  # noqa: E731
    native, python = encode(make(), True, monkeypatch), encode(make(), False, monkeypatch)
    assert native == python
    (batch,) = iter_batches(native[0])
    assert batch.records_count == 5000


@needs_native
def test_common_records_read_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the compiled walk writes is a batch whose records decode to the records' fields."""
    recs = [common(random.Random(i), "group", "topic") for i in range(20)]
    data, raws = encode(recs, True, monkeypatch)
    got = list(iter_records(data))
    assert len(got) == 20
    for (_off, _ts, key, value, _h, _info), r, raw in zip(got, recs, raws, strict=True):
        assert value == raw
        k = records_mod.decode_record(key, value)
        assert (k.key.group, k.key.topic, k.key.partition) == ("group", "topic", r.partition)
        assert (k.value.offset, k.value.leader_epoch, k.value.metadata) == (r.offset, r.leader_epoch, "")
        assert (k.value.commit_timestamp, k.value.topic_id) == (r.commit_timestamp, r.topic_id)


@needs_native
def test_stops_at_the_first_record_it_does_not_take() -> None:
    recs = [common(random.Random(i), "g", "t") for i in range(3)]
    recs[1].metadata = "m"
    section, n = records_mod.native_commit_records(recs, OffsetCommitRecord, uuid.UUID)
    assert n == 1 and recs[0].raw is not None and recs[2].raw is None
    assert records_mod.native_commit_records([], OffsetCommitRecord, uuid.UUID) == (b"", 0)
