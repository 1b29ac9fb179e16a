"""The log cleaner on user topics (cleanup.policy=compact): Kafka's per-batch cleaning.

Each batch keeps its base and last offset, producer fields and codec; the latest record of every key
survives, keyless records do not; tombstones get a KIP-534 delete horizon on the first pass and go on
the first pass after it; empty batches stay for an active producer's last batch and the end of the
range; min/max compaction lag and the dirty ratio decide what is cleaned and when, filthiest first.
"""

from __future__ import annotations

import asyncio
import os
import random
from pathlib import Path

from broker.config import Config
from broker.log import cleaner
from broker.log.batch import iter_batches
from broker.log.config import LogConfig
from broker.log.partition import PartitionLog
from broker.log.records import iter_records

from .test_cleaner import DAY, T0, append, contents, seal


def open_log(directory: Path, recovery_point: int = 0, **configs: str) -> PartitionLog:
    overrides = {"cleanup.policy": "compact", "segment.bytes": "400", "delete.retention.ms": str(DAY)}
    overrides.update({k.replace("_", "."): v for k, v in configs.items()})
    return PartitionLog(directory, "u", 0, LogConfig.resolve({}, overrides), recovery_point)


def clean(plog: PartitionLog, now: int, checkpoint: int | None = None) -> cleaner.CleanResult | None:
    """One synchronous pass as LogCleaner.clean makes it; returns None when nothing is cleanable."""
    first_dirty = cleaner.read_checkpoint(plog.dir) if checkpoint is None else checkpoint
    todo = cleaner.to_clean(plog, first_dirty, now)
    if todo is None:
        return None
    result = cleaner.filter_work(plog, todo, now)()
    assert plog.install_cleaned(result, todo.segs)
    cleaner.write_checkpoint(plog.dir, todo.end)
    return result


def headers(plog: PartitionLog) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, records, attributes) of every batch below the high watermark."""
    return [
        (i.base_offset, i.last_offset, i.records_count, i.attributes)
        for i in plog.iter_headers(plog.log_start_offset)
        if i.base_offset < plog.high_watermark
    ]


def latest_model(records, drop_tombstones: bool):
    latest = {k: off for off, _ts, k, _v in records if k is not None}
    return [
        r
        for r in records
        if r[2] is not None and latest[r[2]] == r[0] and not (drop_tombstones and r[3] is None)
    ]


def history(plog: PartitionLog, rng: random.Random, batches: int, keys: int = 12) -> None:
    ts = T0
    for _ in range(batches):
        recs = []
        for _ in range(rng.randint(1, 5)):
            ts += rng.randint(0, 1000)
            v = None if rng.random() < 0.2 else os.urandom(rng.randint(0, 30))
            recs.append((f"key-{rng.randrange(keys)}".encode(), v, ts))
        append(plog, recs, compression=rng.choice([0, 0, 1, 3, 4]))


def test_a_pass_keeps_offsets_and_batches_and_tombstones_go_after_the_horizon(tmp_path):
    for seed in range(4):
        rng = random.Random(seed)
        plog = open_log(tmp_path / f"p{seed}")
        history(plog, rng, 80)
        seal(plog)
        before = contents(plog)
        batches_before = {h[0]: h for h in headers(plog)}
        now = T0 + 10 * DAY
        result = clean(plog, now)
        assert result is not None and result.tombstones_dropped == 0
        assert contents(plog) == latest_model(before, drop_tombstones=False)
        # every surviving batch has its original base and last offset and codec; empty ones only at the end
        after = headers(plog)
        for base, last, count, attributes in after:
            orig = batches_before[base]
            assert (last, attributes & 0x37) == (orig[1], orig[3] & 0x37)
            assert count > 0 or last + 1 == plog.active.base_offset
            assert bool(attributes & cleaner.DELETE_HORIZON_MASK) == any(
                v is None for off, _ts, _k, v in contents(plog) if base <= off <= last
            )
        # before the horizon a second pass drops nothing; after it every tombstone goes
        assert clean(plog, now + DAY - 1, checkpoint=0).tombstones_dropped == 0
        assert contents(plog) == latest_model(before, drop_tombstones=False)
        kept = contents(plog)
        result = clean(plog, now + DAY, checkpoint=0)
        assert result.tombstones_dropped == sum(1 for r in kept if r[3] is None) > 0
        assert contents(plog) == latest_model(before, drop_tombstones=True)
        # a restart reads the same log and appends at the same offset
        expected, leo = contents(plog), plog.log_end_offset
        plog.close()
        again = open_log(tmp_path / f"p{seed}", recovery_point=leo)
        assert contents(again) == expected and again.log_end_offset == leo
        again.close()


def test_only_the_dirty_part_is_mapped_and_old_values_of_rewritten_keys_go(tmp_path):
    plog = open_log(tmp_path / "p")
    for i in range(40):
        append(plog, [(f"k{i % 5}".encode(), f"a{i}".encode(), T0 + i)])
    seal(plog)
    clean(plog, T0 + DAY)
    first_end = cleaner.read_checkpoint(plog.dir)
    assert [v for *_x, v in contents(plog)] == [f"a{i}".encode() for i in range(35, 40)]
    for i in range(3):  # only k0..k2 are written again
        append(plog, [(f"k{i}".encode(), f"b{i}".encode(), T0 + 100 + i)])
    seal(plog)
    todo = cleaner.to_clean(plog, first_end, T0 + DAY)
    assert todo.first_dirty == first_end and 0 < todo.ratio < 1
    clean(plog, T0 + DAY)
    assert sorted((k, v) for _o, _t, k, v in contents(plog)) == [
        (b"k0", b"b0"),
        (b"k1", b"b1"),
        (b"k2", b"b2"),
        (b"k3", b"a38"),
        (b"k4", b"a39"),
    ]


def test_keyless_records_are_removed(tmp_path):
    plog = open_log(tmp_path / "p", segment_bytes="100000")
    append(plog, [(None, b"x", T0), (b"a", b"1", T0), (None, b"y", T0)])
    append(plog, [(b"b", b"2", T0 + 1)])
    seal(plog)
    clean(plog, T0)
    assert [(o, k, v) for o, _t, k, v in contents(plog)] == [(1, b"a", b"1"), (3, b"b", b"2")]
    assert headers(plog)[0][:3] == (0, 2, 1)  # the batch keeps offsets 0-2 with one record left


def test_producer_batches_keep_their_fields_and_the_last_one_stays_even_when_empty(tmp_path):
    plog = open_log(tmp_path / "p", segment_bytes="100000")
    pid = dict(producer_id=7, producer_epoch=3)
    append(plog, [(b"a", b"1", T0), (b"b", b"1", T0)], base_sequence=0, **pid)  # offsets 0-1
    append(plog, [(b"a", b"2", T0 + 1), (b"c", b"1", T0 + 1)], base_sequence=2, **pid)  # 2-3
    append(plog, [(b"a", b"3", T0 + 2)], base_sequence=4, **pid)  # 4: the producer's last batch
    append(plog, [(b"a", b"4", T0 + 3)])  # 5: a plain batch supersedes it
    append(plog, [(b"c", b"2", T0 + 4)])  # 6
    seal(plog)
    clean(plog, T0 + 10)
    kept = [
        (i.base_offset, i.last_offset, i.records_count, i.producer_id, i.base_sequence, i.producer_epoch)
        for i in plog.iter_headers(0)
    ]
    assert kept == [
        (0, 1, 1, 7, 0, 3),  # b survives; the batch keeps its base sequence and offsets
        # 2-3 lost both records and is not the producer's last: gone
        (4, 4, 0, 7, 4, 3),  # empty, kept: the producer's last sequence (Kafka's RETAIN_EMPTY)
        (5, 5, 1, -1, -1, -1),
        (6, 6, 1, -1, -1, -1),
    ]
    # Fetch from inside the gap and from the empty batch go on to the next data
    raw = plog.read(2, 1 << 20)
    assert iter_batches(raw)[0].base_offset == 4
    assert [(o, bytes(k)) for o, _ts, k, _v, _h, _i in iter_records(raw, verify_crc=True)] == [
        (5, b"a"),
        (6, b"c"),
    ]
    # producer state rebuilt from the cleaned log knows the last sequence: a retry is a duplicate
    leo = plog.log_end_offset
    plog.close()
    (tmp_path / "p" / "producer-state.json").unlink()
    again = open_log(tmp_path / "p", recovery_point=leo, segment_bytes="100000")
    assert again.producers.producers[7].last_seq == 4 and again.producers.producers[7].epoch == 3
    again.close()


def test_the_last_batch_of_the_range_stays_empty_so_the_end_offset_survives(tmp_path):
    plog = open_log(tmp_path / "p", segment_bytes="100000")
    append(plog, [(b"a", b"1", T0)])
    append(plog, [(b"a", b"2", T0 + 1), (None, b"k", T0 + 1)])
    append(plog, [(None, b"z", T0 + 2)])  # only a keyless record: removed, but its batch ends the range
    seal(plog)
    clean(plog, T0 + 10)
    assert [(b, last, n) for b, last, n, _a in headers(plog)] == [(1, 2, 1), (3, 3, 0)]


def test_min_compaction_lag_keeps_young_segments_out_of_the_range(tmp_path):
    plog = open_log(tmp_path / "p", min_compaction_lag_ms=str(DAY))
    for i in range(30):
        append(plog, [(b"k", str(i).encode(), T0 + i * DAY // 10)])
    seal(plog)
    now = T0 + 30 * DAY // 10
    todo = cleaner.to_clean(plog, 0, now)
    assert todo.segs and all(s.max_timestamp <= now - DAY for s in todo.segs)
    young = plog.segments[len(todo.segs)]
    assert young.max_timestamp > now - DAY and todo.end == young.base_offset
    clean(plog, now)
    values = [int(v) for _o, _t, _k, v in contents(plog)]
    assert values[0] == young.base_offset - 1 and values[1:] == list(range(young.base_offset, 30))
    assert cleaner.to_clean(plog, 0, T0 + DAY // 2) is None  # every segment is younger than the lag
    plog.close()


def test_dirty_ratio_and_max_compaction_lag_decide_when(tmp_path):
    config = Config({"log.cleaner.enable": "false"})
    lc = cleaner.LogCleaner(config)
    plog = open_log(tmp_path / "p", min_cleanable_dirty_ratio="0.9", max_compaction_lag_ms=str(DAY))
    lc.register(plog, user=True)
    for i in range(40):
        append(plog, [(f"k{i % 4}".encode(), b"v" * 20, T0 + i)])
    seal(plog)
    assert lc.candidate(plog, T0 + 100) == 1.0  # all dirty: 1.0 > 0.9
    asyncio.run(lc.clean(plog))
    for i in range(12):
        append(plog, [(f"k{i % 4}".encode(), b"w" * 20, T0 + 1000 + i)])
    seal(plog)
    todo = cleaner.to_clean(plog, lc.first_dirty[id(plog)], T0 + 2000)
    assert 0 < todo.ratio < 0.9 and not todo.need_now
    assert lc.candidate(plog, T0 + 2000) is None
    # the oldest dirty record is older than max.compaction.lag.ms: due whatever the ratio
    assert lc.candidate(plog, T0 + 1000 + DAY + 1) == todo.ratio
    lc.unregister(plog)
    assert plog not in lc.partitions
    asyncio.run(lc.close())
    plog.close()


def test_filthiest_log_is_cleaned_first(tmp_path):
    config = Config({"log.cleaner.enable": "false"})
    order: list[str] = []

    class Recording(cleaner.LogCleaner):
        async def clean(self, plog):
            order.append(plog.dir.name)
            return await super().clean(plog)

    lc = Recording(config)
    logs = {}
    for name in ("low", "high", "mid"):
        plog = logs[name] = open_log(tmp_path / name, min_cleanable_dirty_ratio="0.1")
        for i in range(20):
            append(plog, [(f"k{i}".encode(), b"v" * 20, T0 + i)])
        seal(plog)
        lc.register(plog, user=True)
    asyncio.run(lc.clean_due())
    assert sorted(order) == ["high", "low", "mid"]
    order.clear()
    for name in ("low", "high", "mid"):  # dirty parts of different sizes after one clean pass each
        plog = logs[name]
        rewrites = {"low": 1, "high": 3, "mid": 2}[name]
        for _ in range(rewrites):
            for i in range(20):
                append(plog, [(f"k{i}".encode(), b"w" * 20, T0 + 100 + i)])
        seal(plog)
    asyncio.run(lc.clean_due())
    assert order == ["high", "mid", "low"]
    asyncio.run(lc.close())
    for plog in logs.values():
        plog.close()


def test_the_spark_log_source_reads_a_compacted_log_with_gaps_and_empty_batches(tmp_path):
    from broker.spark import logdir

    data = tmp_path / "data"
    plog = PartitionLog(
        data / "u-0",
        "u",
        0,
        LogConfig.resolve({}, {"cleanup.policy": "compact", "segment.bytes": "300"}),
    )
    pid = dict(producer_id=9, producer_epoch=0)
    for i in range(30):
        recs = [(f"k{i % 3}".encode(), f"v{i}".encode(), T0 + i), (f"u{i}".encode(), None, T0 + i)]
        if i % 2:
            append(plog, recs, base_sequence=i // 2 * 2, **pid)
        else:
            append(plog, recs)
    append(plog, [(b"k2", b"final", T0 + 50), (b"u29", b"final", T0 + 50)])  # empties the producer's last
    seal(plog)
    clean(plog, T0 + 100)
    expected = contents(plog)
    assert any(count == 0 for _b, _l, count, _a in headers(plog))  # the producer's last batch
    assert [o for o, *_r in expected] != list(range(len(expected)))  # gaps
    columns = {"offset": [], "key": [], "value": [], "timestamp": []}
    for r in logdir.plan(data, ("u", 0), 0, plog.high_watermark):
        got = logdir.read_columns(r)
        for name in columns:
            columns[name] += got[name]
    rows = zip(columns["offset"], columns["timestamp"], columns["key"], columns["value"], strict=True)
    assert list(rows) == expected
    plog.close()


def test_compacted_topics_roll_by_the_smaller_of_segment_ms_and_max_compaction_lag_on_append(tmp_path):
    """Kafka's LogConfig.maxSegmentMs; as in Kafka the age is checked on append only."""
    plog = open_log(tmp_path / "p", segment_bytes="1000000", segment_ms=str(DAY), max_compaction_lag_ms="50")
    assert plog.roll_ms == 50
    append(plog, [(b"a", b"1", T0)])
    plog.active.created = (T0 + 1) / 1000 - 0.06  # at the next append's time, 60 ms old
    assert len(plog.segments) == 1  # nothing rolls by itself
    append(plog, [(b"a", b"2", T0 + 1)])
    assert [s.base_offset for s in plog.segments] == [0, 1]
    plog.close()
    plain = PartitionLog(
        tmp_path / "d",
        "d",
        0,
        LogConfig.resolve({}, {"segment.ms": str(DAY), "max.compaction.lag.ms": "50"}),
    )
    assert plain.roll_ms == DAY  # cleanup.policy=delete: segment.ms alone
    plain.close()


def test_compact_delete_retention_moves_the_log_start_past_the_checkpoint(tmp_path):
    plog = open_log(tmp_path / "p", cleanup_policy="compact,delete", retention_bytes="1000")
    for i in range(60):
        append(plog, [(f"k{i % 4}".encode(), b"v" * 20, T0 + i)])
    seal(plog)
    clean(plog, T0 + 100)
    for i in range(60):
        append(plog, [(f"j{i}".encode(), b"w" * 20, T0 + 200 + i)])
    seal(plog)
    checkpoint = cleaner.read_checkpoint(plog.dir)
    assert plog.apply_retention(T0 + 300) > 0 and plog.log_start_offset > checkpoint
    todo = cleaner.to_clean(plog, checkpoint, T0 + 300)
    assert todo.first_dirty == todo.start == plog.log_start_offset
    before = contents(plog)
    clean(plog, T0 + 300)
    assert contents(plog) == latest_model(before, drop_tombstones=False)
    plog.close()


def test_cleaned_batches_keep_their_partition_leader_epoch(tmp_path):
    """As Kafka's cleaner: a rebuilt or emptied batch keeps the epoch its leader stamped (a
    simulated cluster's leaders stamp theirs: PartitionLog.leader_epoch)."""
    plog = open_log(tmp_path / "p", segment_bytes="100000")
    for epoch, records in enumerate(
        [[(b"a", b"1", T0), (b"b", b"1", T0)], [(b"a", b"2", T0 + 1)], [(None, b"z", T0 + 2)]], start=3
    ):
        plog.leader_epoch = epoch
        append(plog, records)
    seal(plog)
    clean(plog, T0 + 10)
    got = [(i.base_offset, i.records_count, i.partition_leader_epoch) for i in plog.iter_headers(0)]
    assert got[:3] == [(0, 1, 3), (2, 1, 4), (3, 0, 5)]  # rebuilt (b kept), untouched, emptied
