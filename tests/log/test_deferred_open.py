"""Restart after a clean stop: the clean-shutdown marker lets the next start defer opening every log
it checkpointed until first use (or the background opener); without it every log is recovered at
start-up. Whatever is deferred answers as it would have opened eagerly."""

from __future__ import annotations

import errno
import os

import pytest

from broker.config import Config
from broker.log import manager as manager_module
from broker.log import records
from broker.log.batch import validate_produce
from broker.log.manager import CHECKPOINT, CLEAN_SHUTDOWN, LogManager, read_checkpoint
from broker.log.partition import FAILED, UNOPENED, DeferredPartitionLog, PartitionLog
from broker.log.segment import FileOps, LogCorruption
from broker.protocol.errors import ErrorCode, KafkaError

NOW = 1_700_000_000_000


def manager(tmp_path, **conf) -> LogManager:
    c = Config({"log.dirs": str(tmp_path), **{k: str(v) for k, v in conf.items()}})
    return LogManager(tmp_path, c)


async def append(m: LogManager, plog, *values: bytes) -> int:
    data = bytearray(records.simple_batch(list(values)))
    base = plog.append(data, validate_produce(data), NOW)
    fut = m.appended(plog)
    if fut is not None:
        await fut
    return base


def values(plog, offset: int = 0) -> list[bytes]:
    return [r[3] for r in records.iter_records(plog.read(offset, 1 << 20)) if r[0] >= offset]


async def filled(tmp_path, counts=(3, 1, 0)) -> None:
    """A topic ``t`` with ``counts[i]`` records in partition i, stopped cleanly."""
    m = manager(tmp_path)
    m.open_topic("t", len(counts), {})
    for p, n in enumerate(counts):
        for i in range(n):
            await append(m, m.get("t", p), b"%d-%d" % (p, i))
    await m.close()


async def test_clean_stop_writes_the_marker_and_the_next_start_defers_every_log(tmp_path):
    await filled(tmp_path)
    assert (tmp_path / CLEAN_SHUTDOWN).exists()
    m = manager(tmp_path)
    assert not (tmp_path / CLEAN_SHUTDOWN).exists(), "removed at start: a crash from now is not clean"
    assert m.defer_open
    m.open_topic("t", 3, {})
    m.started()
    plogs = [m.get("t", p) for p in range(3)]
    assert [p.state for p in plogs] == [UNOPENED] * 3
    assert m.files.opened == 0, "no segment file is opened at start-up"
    # first use opens: offsets, records and appends are what an eager open gives
    assert (plogs[0].log_start_offset, plogs[0].high_watermark, plogs[0].log_end_offset) == (0, 3, 3)
    assert plogs[0].opened and not plogs[1].opened
    assert values(plogs[0]) == [b"0-0", b"0-1", b"0-2"]
    assert await append(m, plogs[1], b"1-1") == 1
    assert values(plogs[1]) == [b"1-0", b"1-1"]
    assert plogs[2].read(0, 1000) == b"" and plogs[2].log_end_offset == 0
    await m.close()
    m = manager(tmp_path)
    m.open_topic("t", 3, {})
    # the attribute hook that opens a deferred log is on its class until then, not on an open log's
    plog = m.get("t", 0)
    assert type(plog) is DeferredPartitionLog and isinstance(plog, PartitionLog)
    assert plog.log_end_offset == 3
    assert type(plog) is PartitionLog and not hasattr(PartitionLog, "__getattr__")
    await m.close()
    m = manager(tmp_path)
    m.open_topic("t", 3, {})
    assert [m.get("t", p).log_end_offset for p in range(3)] == [3, 2, 0]
    assert values(m.get("t", 1)) == [b"1-0", b"1-1"]
    await m.close()


async def test_a_crash_after_a_clean_start_recovers_every_log_at_the_next_start(tmp_path):
    await filled(tmp_path)
    m = manager(tmp_path)
    m.open_topic("t", 3, {})
    m.started()
    await append(m, m.get("t", 0), b"after")  # fsynced (log.flush=interval), then "SIGKILL": no close
    m2 = manager(tmp_path)
    assert not m2.defer_open
    m2.open_topic("t", 3, {})
    assert all(m2.get("t", p).opened for p in range(3)), "recovered at start-up, not deferred"
    assert values(m2.get("t", 0)) == [b"0-0", b"0-1", b"0-2", b"after"]
    await m2.close()
    await m.close()


async def test_an_unclean_stop_opens_every_log_at_start(tmp_path):
    m = manager(tmp_path)
    m.open_topic("t", 2, {})
    await append(m, m.get("t", 0), b"x")
    m.write_checkpoint()  # the periodic checkpoint, then no clean close
    m2 = manager(tmp_path)
    m2.open_topic("t", 2, {})
    assert m2.get("t", 0).opened and m2.get("t", 0).log_end_offset == 1
    await m2.close()
    await m.close()


async def test_a_log_the_checkpoint_does_not_list_is_opened_at_start(tmp_path):
    await filled(tmp_path, (1,))
    m = manager(tmp_path)
    m.open_topic("t", 1, {})
    m.open_topic("u", 1, {})  # not in the clean stop's checkpoint: nothing proves it clean
    assert not m.get("t", 0).opened and m.get("u", 0).opened
    await m.close()


async def test_checkpoints_keep_what_unopened_logs_had(tmp_path):
    m = manager(tmp_path)
    m.open_topic("t", 2, {})
    for p in range(2):
        await append(m, m.get("t", p), b"a", b"b", b"c")
    m.delete_records(m.get("t", 0), 2)
    await m.close()
    m = manager(tmp_path)
    m.open_topic("t", 2, {})
    m.started()
    m.write_checkpoint()
    assert (tmp_path / CHECKPOINT).read_text().splitlines()[2:] == ["t 0 3", "t 1 3"]
    m.delete_records(m.get("t", 1), 1)  # rewrites the start checkpoint: t-0 is still unopened
    assert not m.get("t", 0).opened
    await m.close()
    m = manager(tmp_path)
    m.open_topic("t", 2, {})
    assert (m.get("t", 0).log_start_offset, m.get("t", 1).log_start_offset) == (2, 1)
    assert values(m.get("t", 0), 2) == [b"c"]
    await m.close()


async def test_a_deferred_log_that_cannot_be_opened_fails_its_uses_with_a_storage_error(tmp_path):
    await filled(tmp_path, (2, 1))
    seg = tmp_path / "t-0" / f"{0:020d}.log"
    st = seg.stat()
    raw = bytearray(seg.read_bytes())
    raw[70] ^= 0xFF  # a record byte of the first batch: its CRC no longer matches
    seg.write_bytes(bytes(raw))
    os.utime(seg, ns=(st.st_atime_ns, st.st_mtime_ns))  # bit rot: no write the marker can see
    # (a log this small has no index: its open reads, and checks, the records)
    assert not (tmp_path / "t-0" / f"{0:020d}.index").exists()
    m = manager(tmp_path)
    m.open_topic("t", 2, {})
    m.started()
    broken = m.get("t", 0)
    with pytest.raises(KafkaError) as e:
        _ = broken.log_end_offset
    assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert broken.state == FAILED
    with pytest.raises(KafkaError) as e:
        broken.read(0, 100)  # every later use fails too, without a half-loaded state
    assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert values(m.get("t", 1)) == [b"1-0"], "the other logs serve on"
    await m.open_deferred()  # the background opener passes over it
    m.write_checkpoint()
    assert "t 0 2" in (tmp_path / CHECKPOINT).read_text().splitlines()
    await m.close()
    # --recover opens every log at start-up and truncates at the damage
    r = LogManager(tmp_path, Config({"log.dirs": str(tmp_path)}), recover=True)
    r.open_topic("t", 2, {})
    assert r.get("t", 0).opened and r.get("t", 0).log_end_offset == 0
    await r.close()


async def test_a_log_written_since_the_clean_stop_is_recovered_at_start(tmp_path):
    """The marker lists each segment file's size and mtime: a file changed since (a tool, a damaged
    copy) is no longer proven clean, and start-up checks it as after a crash -- here it refuses."""
    await filled(tmp_path, (2, 1))
    seg = tmp_path / "t-0" / f"{0:020d}.log"
    raw = bytearray(seg.read_bytes())
    raw[70] ^= 0xFF
    seg.write_bytes(bytes(raw))
    m = manager(tmp_path)
    assert set(m.clean_logs) == {("t", 1)}
    with pytest.raises(LogCorruption):
        m.open_topic("t", 2, {})


async def test_deleting_an_unopened_topic_never_makes_its_directory_again(tmp_path):
    await filled(tmp_path, (1, 1))
    m = manager(tmp_path)
    m.open_topic("t", 2, {})
    m.started()
    plog = m.get("t", 0)
    m.delete_topic("t")
    assert not any(p.name.startswith("t-") for p in tmp_path.iterdir())
    with pytest.raises(KafkaError) as e:
        _ = plog.log_end_offset
    assert e.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert not (tmp_path / "t-0").exists()
    await m.close()


async def test_the_background_opener_opens_every_deferred_log(tmp_path):
    await filled(tmp_path, (2, 0, 1, 4))
    m = manager(tmp_path)
    m.open_topic("t", 4, {})
    m.started()
    assert len(m.unopened()) == 4
    await m.open_deferred()
    assert m.unopened() == []
    assert [m.get("t", p).log_end_offset for p in range(4)] == [2, 0, 1, 4]
    m.apply_retention()
    await m.close()


async def test_a_compacted_log_joins_the_cleaner_when_it_opens(tmp_path):
    m = manager(tmp_path)
    m.open_topic("c", 1, {"cleanup.policy": "compact"})
    await append(m, m.get("c", 0), b"v")
    await m.close()
    m = manager(tmp_path)
    m.open_topic("c", 1, {"cleanup.policy": "compact"})
    plog = m.get("c", 0)
    assert not any(p is plog for p in m.cleaner.partitions)
    plog.open()
    assert any(p is plog for p in m.cleaner.partitions)
    await m.close()


async def test_a_torn_tail_behind_a_clean_marker_is_still_cut(tmp_path):
    """The index written at the clean close no longer matches the file: the log is scanned."""
    await filled(tmp_path, (2,))
    seg = tmp_path / "t-0" / f"{0:020d}.log"
    with open(seg, "ab") as f:
        f.write(b"\x00" * 30)  # bytes a clean stop cannot have left
    m = manager(tmp_path)
    m.open_topic("t", 1, {})
    plog = m.get("t", 0)
    assert plog.log_end_offset == 2 and values(plog) == [b"0-0", b"0-1"]
    assert os.path.getsize(seg) == plog.active.size
    await m.close()


async def test_an_empty_partition_is_its_directory_and_an_empty_log_file(tmp_path):
    """No index nor producer snapshot for an empty log (Kafka trims its empty indexes to nothing at
    close too): on disk only the directory's own block. Nor for a small one without producer
    state (one segment, one index entry): its open scans it as cheaply as it reads the files."""
    await filled(tmp_path, (0, 1))
    assert sorted(os.listdir(tmp_path / "t-0")) == [f"{0:020d}.log"]
    assert sum(os.stat(tmp_path / "t-0" / n).st_blocks for n in os.listdir(tmp_path / "t-0")) == 0
    assert sorted(os.listdir(tmp_path / "t-1")) == [f"{0:020d}.log"]
    m = manager(tmp_path)
    m.open_topic("t", 2, {})
    assert not m.get("t", 0).opened and m.get("t", 0).log_end_offset == 0
    assert await append(m, m.get("t", 0), b"first") == 0
    await m.close()
    (tmp_path / CLEAN_SHUTDOWN).unlink()  # and opened at start-up, as after a crash
    m = manager(tmp_path)
    m.open_topic("t", 2, {})
    assert m.get("t", 0).opened and values(m.get("t", 0)) == [b"first"]
    await m.close()


async def test_a_clean_stop_writes_the_index_and_snapshot_only_where_the_next_open_needs_them(tmp_path):
    """A small log without producers: neither file, and its deferred open (a scan of the one
    segment) answers as before the stop. A log whose index has more than one entry, or one with
    producer state (an idempotent producer's sequence), keeps both: its open reads them."""
    m = manager(tmp_path)
    m.open_topic("t", 3, {})
    small, big, idem = (m.get("t", p) for p in range(3))
    for i in range(3):
        await append(m, small, b"s%d" % i)
    for i in range(20):  # 20 x ~1 KiB: past index.interval.bytes, more than one index entry
        await append(m, big, b"b%d-" % i + b"x" * 1000)
    data = bytearray(
        records.simple_batch([b"i0"], producer_id=7, producer_epoch=0, base_sequence=0, base_timestamp=NOW)
    )
    idem.append(data, validate_produce(data), NOW)
    await m.appended(idem)
    before = [(p.log_end_offset, p.max_timestamp_offset(), p.producers.to_json()) for p in (small, big, idem)]
    await m.close()
    names = {p: sorted(os.listdir(tmp_path / f"t-{p}")) for p in range(3)}
    assert names[0] == [f"{0:020d}.log"]
    assert f"{0:020d}.index" in names[1] and "producer-state.json" in names[1]
    assert "producer-state.json" in names[2]
    m = manager(tmp_path)
    m.open_topic("t", 3, {})
    m.started()
    again = [m.get("t", p) for p in range(3)]
    assert not any(p.opened for p in again)
    after = [(p.log_end_offset, p.max_timestamp_offset(), p.producers.to_json()) for p in again]
    assert after == before
    assert values(again[0]) == [b"s0", b"s1", b"s2"]
    assert values(again[1], 19) == [b"b19-" + b"x" * 1000]
    assert await append(m, again[0], b"s3") == 3
    await m.close()


class CountingOps(FileOps):
    def __init__(self) -> None:
        self.fsyncs = 0

    def fsync(self, fd: int) -> None:
        self.fsyncs += 1
        super().fsync(fd)


async def test_a_clean_stop_syncs_once_for_every_log_not_once_per_file(tmp_path):
    """log.flush=never leaves every append unsynced: the stop makes them durable with one syncfs,
    not an fsync per segment, and only then checkpoints them; the next start trusts them all."""
    ops = CountingOps()
    m = LogManager(tmp_path, Config({"log.dirs": str(tmp_path), "log.flush": "never"}), file_ops=ops)
    m.open_topic("t", 50, {})
    for p in range(50):
        await append(m, m.get("t", p), b"%d" % p)
    assert read_checkpoint(tmp_path / CHECKPOINT).get(("t", 0), 0) == 0
    await m.close()
    assert ops.fsyncs == 0
    assert all(o == 1 for o in read_checkpoint(tmp_path / CHECKPOINT).values())
    m = manager(tmp_path)
    m.open_topic("t", 50, {})
    m.started()
    assert len(m.clean_logs) == 50 and not any(plog.opened for plog in m.logs.values())
    assert [values(m.get("t", p)) for p in range(50)] == [[b"%d" % p] for p in range(50)]
    await m.close()


async def test_a_stop_whose_sync_fails_claims_nothing_unsynced(tmp_path, monkeypatch):
    """The checkpoint and the clean-shutdown marker come after the syncfs: when it fails, neither
    claims the appends it was to make durable, and the next start recovers the logs."""
    m = LogManager(tmp_path, Config({"log.dirs": str(tmp_path), "log.flush": "never"}))
    m.open_topic("t", 3, {})
    for p in range(3):
        await append(m, m.get("t", p), b"x")

    def failing_syncfs(directory) -> None:
        raise OSError(errno.EIO, "injected write-back error", str(directory))

    monkeypatch.setattr(manager_module, "syncfs", failing_syncfs)
    with pytest.raises(OSError):
        await m.close()
    assert not (tmp_path / CLEAN_SHUTDOWN).exists()
    assert all(o == 0 for o in read_checkpoint(tmp_path / CHECKPOINT).values())
    monkeypatch.undo()
    m = manager(tmp_path)
    assert not m.defer_open
    m.open_topic("t", 3, {})
    assert all(m.get("t", p).opened and m.get("t", p).log_end_offset == 1 for p in range(3))
    await m.close()
