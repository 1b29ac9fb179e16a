"""The log cleaner (broker/log/cleaner.py): key compaction of closed segments.

What a pass keeps (the latest record of every key, tombstones until delete retention, records
without a key, producer batches byte for byte), that offsets, timestamps and CRCs survive it, that a
crash at every step between its file operations leaves the old or the new log and never a mix, and
that a running broker compacts its coordinator log by itself and restarts from it with the same
committed offsets.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from broker.log import cleaner
from broker.log.batch import iter_batches
from broker.log.config import LogConfig
from broker.log.partition import PartitionLog
from broker.log.records import Record, build_batch, iter_records
from broker.protocol.generated.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.generated.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from tests.support.wire import WireClient

T0 = 1_700_000_000_000
DAY = 86_400_000


def open_log(directory: Path, segment_bytes: int = 400, recovery_point: int = 0) -> PartitionLog:
    config = LogConfig.resolve({}, {"segment.bytes": str(segment_bytes), "cleanup.policy": "compact"})
    return PartitionLog(directory, "c", 0, config, recovery_point)


def append(plog: PartitionLog, records: list[tuple[bytes | None, bytes | None, int]], **batch: int) -> None:
    """One batch of (key, value, timestamp) records."""
    base_ts = records[0][2]
    data = bytearray(
        build_batch(
            [Record(i, ts - base_ts, k, v) for i, (k, v, ts) in enumerate(records)],
            base_timestamp=base_ts,
            **batch,
        )
    )
    plog.append(data, iter_batches(data, verify_crc=False), base_ts)


def seal(plog: PartitionLog) -> None:
    """Roll and make everything visible: all records are in closed, cleanable segments."""
    plog.roll()
    plog.mark_flushed(*plog.flush_target())


def contents(plog: PartitionLog) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Every record below the high watermark, CRCs checked: (offset, timestamp, key, value)."""
    out = []
    offset = plog.log_start_offset
    while offset < plog.high_watermark:
        data = plog.read(offset, 1 << 20)
        if not data:
            break
        for off, ts, k, v, _h, _info in iter_records(data, verify_crc=True):
            if off >= offset:
                out.append((off, ts, None if k is None else bytes(k), None if v is None else bytes(v)))
                offset = off + 1
    return out


def compacted(records, now: int, retention: int, pinned: frozenset = frozenset()):
    """The model: the latest record of each key; tombstones older than retention dropped."""
    latest = {k: off for off, _ts, k, _v in records if k is not None}
    return [
        (off, ts, k, v)
        for off, ts, k, v in records
        if k is None or (latest[k] == off and not (v is None and ts < now - retention and k not in pinned))
    ]


def history(plog: PartitionLog, rng: random.Random, batches: int, keys: int = 12) -> None:
    ts = T0
    for _ in range(batches):
        recs = []
        for _ in range(rng.randint(1, 5)):
            ts += rng.randint(0, 3 * DAY // 40)
            k = None if rng.random() < 0.03 else f"key-{rng.randrange(keys)}".encode()
            v = None if rng.random() < 0.2 else os.urandom(rng.randint(0, 30))
            recs.append((k, v, ts))
        append(plog, recs)


@pytest.mark.parametrize("seed", range(6))
def test_a_pass_keeps_the_latest_record_of_every_key(tmp_path, seed):
    rng = random.Random(seed)
    plog = open_log(tmp_path / "p")
    history(plog, rng, 80)
    seal(plog)
    before = contents(plog)
    assert len(plog.segments) > 5
    now = before[-1][1] + 1
    result = cleaner.clean_partition(plog, now, DAY)
    want = compacted(before, now, DAY)
    assert result is not None
    assert (result.records_read, result.records_kept) == (len(before), len(want))
    assert result.tombstones_dropped == sum(1 for r in compacted(before, now, 10**15) if r not in want)
    assert contents(plog) == want
    assert [s.base_offset for s in plog.segments] == [0, before[-1][0] + 1]
    # appends go on at the same offsets, and a second pass over old and new keeps the model
    leo = plog.log_end_offset
    history(plog, rng, 30)
    seal(plog)
    assert contents(plog)[: len(want)] == want and contents(plog)[len(want)][0] == leo
    more = contents(plog)
    now = more[-1][1] + 1
    cleaner.clean_partition(plog, now, DAY)
    assert contents(plog) == compacted(more, now, DAY)
    # and that is what a restart finds
    expected = contents(plog)
    plog.close()
    again = open_log(tmp_path / "p", recovery_point=leo)
    assert contents(again) == expected
    again.close()


def test_the_active_segment_and_the_high_watermark_segment_are_never_cleaned(tmp_path):
    plog = open_log(tmp_path / "p")
    for i in range(30):
        append(plog, [(b"k", str(i).encode(), T0 + i)])
    plog.mark_flushed(*plog.flush_target())
    hw_segment = plog.active
    closed = plog.segments[:-1]
    plog.roll()  # the high watermark still points into the segment just rolled
    start, end, segs = plog.cleanable()
    assert segs == closed and end == hw_segment.base_offset
    cleaner.clean_partition(plog, T0 + 100, DAY)
    kept = contents(plog)
    assert kept[0][3] == str(hw_segment.base_offset - 1).encode()  # the latest in the cleaned range
    assert [r[3] for r in kept[1:]] == [str(i).encode() for i in range(hw_segment.base_offset, 30)]


def test_producer_batches_are_kept_byte_for_byte_and_pin_their_keys(tmp_path):
    plog = open_log(tmp_path / "p", segment_bytes=10**6)
    append(plog, [(b"a", b"old", T0), (b"b", b"x", T0)])
    append(
        plog,
        [(b"a", b"idempotent", T0 + 1), (b"c", b"1", T0 + 1)],
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
    )
    append(plog, [(b"a", None, T0 + 2), (b"c", b"2", T0 + 2), (None, b"no key", T0 + 2)])
    seal(plog)
    raw = plog.read(2, 1 << 20)
    producer_batch = raw[: iter_batches(raw, verify_crc=False)[0].size]
    cleaner.clean_partition(plog, T0 + 10 * DAY, DAY)  # every tombstone is past retention
    assert [(off, k, v) for off, _ts, k, v in contents(plog)] == [
        (1, b"b", b"x"),
        (2, b"a", b"idempotent"),  # superseded, but its batch is kept whole
        (3, b"c", b"1"),
        (4, b"a", None),  # an old tombstone, kept: an earlier record of its key is still there
        (5, b"c", b"2"),
        (6, None, b"no key"),
    ]
    assert producer_batch in plog.read(0, 1 << 20)


# ---------------------------------------------------------------------------------------------
# crash safety: SIGKILL between any two file operations of a pass


STEPS = ["cleaned-written", "swap-committed", "one-old-segment-deleted", "old-segments-deleted", "renamed"]


@pytest.mark.parametrize("step", STEPS)
def test_a_crash_at_any_step_leaves_the_old_or_the_new_log(tmp_path, step):
    directory = tmp_path / "p"
    plog = open_log(directory)
    history(plog, random.Random(1), 60, keys=5)
    seal(plog)
    before = contents(plog)
    now = before[-1][1] + 1
    after = compacted(before, now, DAY)
    start, end, segs = plog.cleanable()
    result = cleaner.clean_segments(directory, [s.path for s in segs], start, end, now, DAY)
    if step != "cleaned-written":
        swap = cleaner.commit_swap(result)
        old = sorted(directory.glob("*.log"))[:-1]
        if step == "one-old-segment-deleted":
            old[1].unlink()
        elif step == "old-segments-deleted":
            for p in old:
                p.unlink()
        elif step == "renamed":
            cleaner.finish_swap(swap)
    leo = plog.log_end_offset
    for seg in plog.segments:  # the process dies: nothing more is written
        seg.close()
    again = open_log(directory, recovery_point=leo)
    assert contents(again) == (before if step == "cleaned-written" else after)
    assert again.log_end_offset == leo
    assert not list(directory.glob("*.cleaned")) and not list(directory.glob("*.swap"))
    again.close()


def test_a_pass_that_finds_the_log_changed_installs_nothing(tmp_path):
    plog = open_log(tmp_path / "p")
    history(plog, random.Random(2), 40)
    seal(plog)
    before = contents(plog)
    start, end, segs = plog.cleanable()
    result = cleaner.clean_segments(plog.dir, [s.path for s in segs], start, end, T0 + 10 * DAY, DAY)
    assert not plog.install_cleaned(result, segs[1:])  # not the segments the log holds
    assert not result.path.exists() and contents(plog) == before


# ---------------------------------------------------------------------------------------------
# the coordinator log of a running broker


def commit(client: WireClient, group: str, topic: str, offsets: dict[int, int]) -> None:
    req = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            OffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_metadata="")
                    for p, o in offsets.items()
                ],
            )
        ],
    )
    resp = client.call(8, 8, req)
    assert all(p.error_code == 0 for t in resp.topics for p in t.partitions)


def fetch(client: WireClient, group: str, topic: str, partitions: int) -> dict[int, int]:
    req = OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequestTopic(topic, list(range(partitions)))])
    resp = client.call(9, 7, req)
    return {p.partition_index: p.committed_offset for t in resp.topics for p in t.partitions}


def test_a_running_broker_compacts_its_coordinator_log_and_restarts_from_it(broker_factory, tmp_path):
    data = tmp_path / "d"
    config = {
        "offsets.topic.segment.bytes": "3000",
        "log.cleaner.backoff.ms": "20",
        "log.flush": "always",
    }
    b = broker_factory(config, data)
    b.call(b.broker.create_topic, "t", 4)
    last: dict[str, dict[int, int]] = {}
    with WireClient(b.port) as client:
        for i in range(150):
            group = f"g{i % 3}"
            last[group] = {p: i * 10 + p for p in range(4)}
            commit(client, group, "t", last[group])
    deadline = time.monotonic() + 30  # hang guard
    while b.broker.logs.cleaner.passes == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert b.broker.logs.cleaner.passes > 0
    plog = b.broker.logs.get("__consumer_offsets", 0)
    assert plog.config.segment_bytes == 3000 and plog.config.cleanup_policy == "compact"
    with WireClient(b.port) as client:
        assert {g: fetch(client, g, "t", 4) for g in last} == last
    b.stop()

    b = broker_factory(config | {"log.cleaner.enable": "false"}, data)
    with WireClient(b.port) as client:
        assert {g: fetch(client, g, "t", 4) for g in last} == last
    replayed = b.call(lambda: len(b.broker.logs.get("__consumer_offsets", 0).read(0, 1 << 24)))
    assert replayed < 150 * 4 * 40  # far below the bytes of 600 uncompacted commit records
    b.stop()


def test_compressed_and_log_append_time_batches_are_compacted_with_their_timestamps(tmp_path):
    plog = open_log(tmp_path / "p", segment_bytes=10**6)
    append(plog, [(b"a", b"1", T0), (b"b", b"1", T0 + 5)], compression=1)
    append(plog, [(b"a", b"2", T0 + 7), (b"c", b"x" * 300, T0 + 8)], compression=4)
    append(plog, [(b"b", b"2", T0 + 9), (b"d", None, T0 + 9)], timestamp_type=1, max_timestamp=T0 + 50)
    seal(plog)
    before = contents(plog)
    assert [ts for _o, ts, _k, _v in before] == [T0, T0 + 5, T0 + 7, T0 + 8, T0 + 50, T0 + 50]
    cleaner.clean_partition(plog, T0 + 100, DAY)
    assert (
        contents(plog)
        == compacted(before, T0 + 100, DAY)
        == [
            (2, T0 + 7, b"a", b"2"),
            (3, T0 + 8, b"c", b"x" * 300),
            (4, T0 + 50, b"b", b"2"),
            (5, T0 + 50, b"d", None),
        ]
    )


def test_a_range_of_only_expired_tombstones_compacts_to_an_empty_segment(tmp_path):
    plog = open_log(tmp_path / "p")
    for i in range(20):
        append(plog, [(f"k{i % 4}".encode(), b"v", T0 + i)])
        append(plog, [(f"k{i % 4}".encode(), None, T0 + i)])
    seal(plog)
    leo = plog.log_end_offset
    result = cleaner.clean_partition(plog, T0 + 10 * DAY, DAY)
    assert result is not None and (result.records_kept, result.bytes_written) == (0, 0)
    assert contents(plog) == [] and plog.log_start_offset == 0 and plog.segments[0].size == 0
    append(plog, [(b"k0", b"new", T0 + 100)])
    plog.mark_flushed(*plog.flush_target())
    assert contents(plog) == [(leo, T0 + 100, b"k0", b"new")]
    plog.close()
    again = open_log(tmp_path / "p", recovery_point=leo + 1)
    assert contents(again) == [(leo, T0 + 100, b"k0", b"new")]
    again.close()
