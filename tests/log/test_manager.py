"""LogManager: the flush policy decides when an append is durable and visible (the high watermark)."""

from __future__ import annotations

import asyncio
import errno
import math
import os
import threading

import pytest

from broker.config import Config
from broker.log import manager as manager_module
from broker.log import records
from broker.log.batch import validate_produce
from broker.log.manager import FLUSH_WORKERS, LogManager, StorageError

NOW = 1_700_000_000_000
_real_syncfs = manager_module._syncfs_call
#: group commits that sync the segments themselves (no journal: log.flush.journal=false); the
#: journal's group commit is tested in test_journal.py
SEGMENT_SYNC = {"log.flush.journal": "false"}


def manager(tmp_path, **conf) -> LogManager:
    c = Config({"log.dirs": str(tmp_path), **{k: str(v) for k, v in conf.items()}})
    return LogManager(tmp_path, c)


def append(m: LogManager, plog, value=b"v"):
    data = bytearray(records.simple_batch([value]))
    base = plog.append(data, validate_produce(data), NOW)
    return base, m.appended(plog)


async def test_never_is_visible_at_once(tmp_path):
    m = manager(tmp_path, **{"log.flush": "never"})
    m.open_topic("t", 1, {})
    plog = m.get("t", 0)
    base, fut = append(m, plog)
    assert fut is None and plog.high_watermark == 1
    await m.close()


@pytest.mark.parametrize("policy", ["always", "interval"])
async def test_visible_only_after_fsync(tmp_path, policy, monkeypatch):
    m = manager(tmp_path, **{"log.flush": policy}, **SEGMENT_SYNC)
    m.open_topic("t", 2, {})
    p0, p1 = m.get("t", 0), m.get("t", 1)
    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(fd), real(fd))[1])
    _, f0 = append(m, p0)
    _, f1 = append(m, p1)
    assert p0.high_watermark == 0 and p0.read(0, 1000) == b"", "unflushed data must not be visible"
    assert f0 is f1, "appends waiting for the same flush share it"
    await asyncio.wait_for(f0, 5)
    assert (p0.high_watermark, p1.high_watermark) == (1, 1)
    assert len(synced) == 2  # one fdatasync per dirty segment, in one flush
    assert p0.read(0, 1000) != b""
    await m.close()


async def test_group_commit_batches_many_appends_into_few_fsyncs(tmp_path, monkeypatch):
    m = manager(tmp_path, **{"log.flush": "interval", "log.flush.interval.ms": "20"})
    m.open_topic("t", 1, {})
    plog = m.get("t", 0)
    calls = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (calls.append(fd), real(fd))[1])
    futs = []
    for i in range(200):
        _, f = append(m, plog, b"%d" % i)
        futs.append(f)
        if i % 50 == 0:
            await asyncio.sleep(0)
    await asyncio.wait_for(asyncio.gather(*set(futs)), 5)
    assert plog.high_watermark == 200
    assert len(calls) < 20, f"{len(calls)} fsyncs for 200 appends"
    await m.close()


async def test_fsync_failure_fails_the_waiters_and_keeps_data_invisible(tmp_path, monkeypatch):
    m = manager(tmp_path, **{"log.flush": "always"})
    m.open_topic("t", 1, {})
    plog = m.get("t", 0)

    def eio(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", eio)
    _, fut = append(m, plog)
    with pytest.raises(StorageError):
        await asyncio.wait_for(fut, 5)
    assert plog.high_watermark == 0
    monkeypatch.undo()
    await m.close()


async def test_a_group_commit_fsyncs_its_files_on_several_threads(tmp_path, monkeypatch):
    monkeypatch.setattr(manager_module, "SYNCFS_MIN_FILES", 1000)  # the per-file path
    m = manager(tmp_path, **{"log.flush": "interval"}, **SEGMENT_SYNC)
    m.open_topic("t", 100, {})
    logs = [m.get("t", p) for p in range(100)]
    threads: dict[int, str] = {}
    real = os.fdatasync
    monkeypatch.setattr(
        os, "fdatasync", lambda fd: (threads.__setitem__(fd, threading.current_thread().name), real(fd))[1]
    )
    futs = {append(m, plog)[1] for plog in logs}
    assert len(futs) == 1, "one group commit for every partition"
    await asyncio.wait_for(futs.pop(), 5)
    assert [plog.high_watermark for plog in logs] == [1] * 100
    assert len(threads) == 100, "each partition's segment fsynced once"
    assert len(set(threads.values())) > 1, "spread over the flush threads"
    await m.close()


async def test_one_failed_fsync_of_a_group_commit_fails_all_its_appends(tmp_path, monkeypatch):
    """Every other share of the commit runs to its end, then the failure fails every append of the commit
    and cuts it from its log (none becomes visible, not even those whose own fsync succeeded)."""
    monkeypatch.setattr(manager_module, "SYNCFS_MIN_FILES", 1000)  # the per-file path
    m = manager(tmp_path, **{"log.flush": "interval"}, **SEGMENT_SYNC)
    m.open_topic("t", 50, {})
    logs = [m.get("t", p) for p in range(50)]
    bad = logs[17].active.fd
    synced: list[int] = []
    real = os.fdatasync

    def fdatasync(fd):
        if fd == bad:
            raise OSError(5, "Input/output error")
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    futs = {append(m, plog)[1] for plog in logs}
    with pytest.raises(StorageError):
        await asyncio.wait_for(futs.pop(), 5)
    # a share stops at its failure; every other share fsynced all of its files
    assert len(synced) >= 50 - math.ceil(50 / FLUSH_WORKERS), "the other shares finished their files"
    assert [plog.high_watermark for plog in logs] == [0] * 50
    assert [plog.log_end_offset for plog in logs] == [0] * 50, "cut from every log"
    monkeypatch.undo()
    _, fut = append(m, logs[17])
    await asyncio.wait_for(fut, 5)  # the disk is back: appends succeed again
    assert logs[17].high_watermark == 1
    await m.close()


async def test_waiters_are_woken_by_the_high_watermark(tmp_path):
    m = manager(tmp_path, **{"log.flush": "always"})
    m.open_topic("t", 1, {})
    plog = m.get("t", 0)
    waiter = asyncio.get_running_loop().create_future()
    plog.waiters.add(waiter)
    _, fut = append(m, plog)
    await asyncio.wait_for(waiter, 5)
    assert plog.high_watermark == 1
    await m.close()


async def test_checkpoint_and_producer_ids_persist(tmp_path):
    m = manager(tmp_path)
    m.open_topic("t", 1, {})
    _, fut = append(m, m.get("t", 0))
    await fut
    pids = [m.allocate_producer_id() for _ in range(3)]
    await m.close()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text().splitlines()[2] == "t 0 1"
    m2 = manager(tmp_path)
    assert m2.recovery_points[("t", 0)] == 1
    assert m2.allocate_producer_id() > max(pids), "producer ids never repeat across restarts"
    await m2.close()


async def test_delete_topic_removes_its_directories(tmp_path):
    m = manager(tmp_path)
    m.open_topic("gone", 2, {})
    assert (tmp_path / "gone-0").is_dir()
    m.delete_topic("gone")
    assert m.get("gone", 0) is None
    assert not any(p.name.startswith("gone-") for p in tmp_path.iterdir())
    await m.close()


async def test_first_group_commit_starts_at_once_on_a_clock_near_zero(tmp_path):
    """A monotonic clock counts from boot: on a machine up for less than log.flush.interval.ms, a
    first flush scheduled 'one interval after the last one at 0' would wait for the uptime to pass
    the interval. The first flush never waits; the next one waits for the window."""
    clock = [0.002]  # two milliseconds after boot
    c = Config({"log.dirs": str(tmp_path), "log.flush": "interval", "log.flush.interval.ms": "3600000"})
    m = LogManager(tmp_path, c, clock=lambda: clock[0])
    m.open_topic("t", 1, {})
    plog = m.get("t", 0)
    loop = asyncio.get_running_loop()
    _, first = append(m, plog)
    assert m._scheduled is not None and m._scheduled.when() <= loop.time(), "first flush must not wait"
    await asyncio.wait_for(first, 5)
    assert plog.high_watermark == 1
    clock[0] = 1.0  # a second later: still inside the one-hour window of the first flush
    _, second = append(m, plog)
    assert m._scheduled is not None
    assert m._scheduled.when() - loop.time() > 3590, "the next flush waits for the interval"
    assert plog.high_watermark == 1 and not second.done()
    await m.close()  # closing flushes what is pending
    assert plog.high_watermark == 2


async def _until(condition, seconds: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "hang guard"
        await asyncio.sleep(0.01)


async def test_never_with_flush_messages_fsyncs_every_n_messages(tmp_path, monkeypatch):
    m = manager(tmp_path, **{"log.flush": "never"})
    m.open_topic("t", 1, {"flush.messages": "3"})
    m.open_topic("u", 1, {})
    plog, other = m.get("t", 0), m.get("u", 0)
    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(fd), real(fd))[1])
    for _ in range(2):
        assert append(m, plog)[1] is None and append(m, other)[1] is None
    await asyncio.sleep(0.05)
    assert synced == [] and plog.durable_offset == 0  # two messages: below flush.messages
    append(m, plog)
    await _until(lambda: plog.durable_offset == 3)
    assert synced == [plog.active.fd] and other.durable_offset == 0  # only the topic that asked
    await m.close()


async def test_never_with_flush_ms_fsyncs_old_unflushed_messages(tmp_path):
    m = manager(tmp_path, **{"log.flush": "never"})
    m.start()
    m.open_topic("t", 1, {"flush.ms": "50"})
    plog = m.get("t", 0)
    append(m, plog)
    assert plog.durable_offset == 0 and plog.high_watermark == 1
    await _until(lambda: plog.durable_offset == 1)
    await m.close()


class _CountingSyncfs:
    """``manager._syncfs_call`` with its calls counted (and failing with EIO while ``fail`` is set)."""

    def __init__(self) -> None:
        self.calls = 0
        self.fail = False

    def __call__(self, fd: int) -> int:
        self.calls += 1
        if self.fail:
            return errno.EIO
        return _real_syncfs(fd)


async def test_a_group_commit_of_many_files_syncs_them_with_one_syncfs(tmp_path, monkeypatch):
    monkeypatch.setattr(manager_module, "SYNCFS_MIN_FILES", 8)
    syncfs = _CountingSyncfs()
    monkeypatch.setattr(manager_module, "_syncfs_call", syncfs)
    m = manager(tmp_path, **{"log.flush": "interval"}, **SEGMENT_SYNC)
    m.open_topic("t", 8, {})
    logs = [m.get("t", p) for p in range(8)]
    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(fd), real(fd))[1])
    futs = {append(m, plog)[1] for plog in logs}
    await asyncio.wait_for(futs.pop(), 5)
    assert [plog.high_watermark for plog in logs] == [1] * 8
    assert (syncfs.calls, synced) == (1, []), "one syncfs, no fsync per file"
    assert all(plog.active.synced_size == plog.active.size for plog in logs)
    # fewer files than that: an fsync each, as before
    futs = {append(m, plog)[1] for plog in logs[:7]}
    await asyncio.wait_for(futs.pop(), 5)
    assert (syncfs.calls, len(synced)) == (1, 7)
    await m.close()


async def test_a_failed_syncfs_fails_every_append_of_its_group_commit(tmp_path, monkeypatch):
    monkeypatch.setattr(manager_module, "SYNCFS_MIN_FILES", 8)
    syncfs = _CountingSyncfs()
    monkeypatch.setattr(manager_module, "_syncfs_call", syncfs)
    m = manager(tmp_path, **{"log.flush": "interval"}, **SEGMENT_SYNC)
    m.open_topic("t", 10, {})
    logs = [m.get("t", p) for p in range(10)]
    syncfs.fail = True
    futs = {append(m, plog)[1] for plog in logs}
    with pytest.raises(StorageError, match="syncfs"):
        await asyncio.wait_for(futs.pop(), 5)
    assert [plog.high_watermark for plog in logs] == [0] * 10
    assert [plog.log_end_offset for plog in logs] == [0] * 10, "cut from their logs"
    syncfs.fail = False
    futs = {append(m, plog)[1] for plog in logs}
    await asyncio.wait_for(futs.pop(), 5)
    assert [plog.high_watermark for plog in logs] == [1] * 10
    await m.close()


async def test_checkpoint_is_rewritten_only_when_a_recovery_point_moved(tmp_path):
    """The periodic checkpoint of 10,000 logs rewrites (and fsyncs, on the event loop) its file only
    when what it would write differs from what it last wrote."""
    m = manager(tmp_path, **SEGMENT_SYNC)
    m.open_topic("t", 3, {})
    path = tmp_path / "recovery-point-offset-checkpoint"
    m.write_checkpoint()
    first = os.stat(path).st_ino
    m.write_checkpoint()
    assert os.stat(path).st_ino == first, "nothing moved: the file is left as it is"
    _, fut = append(m, m.get("t", 1))
    await fut
    m.write_checkpoint()
    assert os.stat(path).st_ino != first
    assert path.read_text().splitlines()[2:] == ["t 0 0", "t 1 1", "t 2 0"]
    m.delete_topic("t")  # a log fewer: written again
    assert path.read_text().splitlines() == ["0", "0"]
    await m.close()
