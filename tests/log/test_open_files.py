"""The open-file budget (``log.max.open.files``, broker/log/segment.py OpenFiles): segments close
their files for room, least recently used first, and re-open them when used, so many partitions run
under a small limit with every read and write landing in the right file."""

from __future__ import annotations

import asyncio
import errno
import os
import resource
import threading

import pytest

from broker.config import Config
from broker.log import records, segment
from broker.log.batch import validate_produce
from broker.log.cleaner import clean_partition
from broker.log.manager import LogManager, StorageError, open_files_limit
from broker.log.partition import PartitionLog
from broker.log.segment import FileOps, OpenFiles

from .test_partition_log import NOW, cfg, values_from


def open_fds(under) -> int:
    """The process's descriptors open on files under ``under``: the segments' and indexes' files.
    (Counting every descriptor would count other tests' sockets and threads closing meanwhile.)"""
    prefix, count = str(under), 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since the listing (the listing's own descriptor, for one)
            continue
        count += target.startswith(prefix)
    return count


def append(plog: PartitionLog, value: bytes, key: bytes | None = None, flush: bool = True) -> int:
    data = bytearray(records.simple_batch([value], base_timestamp=NOW, keys=[key] if key else None))
    base = plog.append(data, validate_produce(data), NOW)
    if flush:
        plog.segments[-1].flush()
    plog.mark_flushed(*plog.flush_target())
    return base


def test_many_partitions_stay_under_the_limit_and_read_back_what_was_written(tmp_path):
    files = OpenFiles(limit=8)
    assert open_fds(tmp_path) == 0
    logs = [PartitionLog(tmp_path / f"t-{p}", "t", p, cfg(segment_bytes=400), files=files) for p in range(40)]
    for round_ in range(12):  # enough to roll every log a few times
        for p, plog in enumerate(logs):
            assert append(plog, b"p%d-r%d" % (p, round_) * 8) == round_
            assert len(files) <= 8
            assert open_fds(tmp_path) <= 8
    assert all(len(plog.segments) > 2 for plog in logs)
    for p, plog in enumerate(logs):
        assert values_from(plog) == [(r, b"p%d-r%d" % (p, r) * 8) for r in range(12)]
    assert files.closed_for_room > 0 and len(files) <= 8
    for plog in logs:
        plog.close()
    assert open_fds(tmp_path) == 0 and len(files) == 0
    again = [
        PartitionLog(tmp_path / f"t-{p}", "t", p, cfg(segment_bytes=400), files=files) for p in range(40)
    ]
    assert [plog.log_end_offset for plog in again] == [12] * 40
    assert values_from(again[17])[-1] == (11, b"p17-r11" * 8)
    for plog in again:
        plog.close()


def test_a_pinned_segment_keeps_its_file_and_a_worker_fsync_reopens_a_closed_one(tmp_path):
    files = OpenFiles(limit=2)
    a, b, c = (PartitionLog(tmp_path / f"t-{p}", "t", p, cfg(), files=files) for p in range(3))
    append(a, b"a")
    seg_a = a.segments[0]
    seg_a.pin()
    append(b, b"b")
    append(c, b"c")
    assert seg_a._fd is not None  # pinned: never closed for room, even over the limit
    seg_a.unpin()
    append(b, b"b2")
    append(c, b"c2")
    assert seg_a._fd is None  # closed for room once unpinned
    # the group commit's fsync runs in a worker thread: it opens the file without closing others
    append(a, b"a2", flush=False)  # re-opened on the loop's thread
    files.acquire(b.segments[0])
    files.acquire(c.segments[0])
    assert a.segments[0]._fd is None
    # the group commit's fsync runs in a worker thread: it syncs through a descriptor of its own,
    # closed again after the fsync, and neither closes others nor takes a place in the budget
    worker = threading.Thread(target=a.segments[0].flush)
    worker.start()
    worker.join()
    assert a.segments[0]._pins == 0 and a.segments[0]._fd is None and len(files) == 2
    assert a.segments[0].synced_size == a.segments[0].size
    assert open_fds(tmp_path) == 2
    assert values_from(a) == [(0, b"a"), (1, b"a2")]
    for plog in (a, b, c):
        plog.close()
    assert len(files) == 0


def test_cleaning_a_log_under_a_tight_limit(tmp_path):
    files = OpenFiles(limit=3)
    plog = PartitionLog(
        tmp_path / "c-0", "c", 0, cfg(segment_bytes=300, cleanup_policy="compact"), files=files
    )
    others = [PartitionLog(tmp_path / f"o-{p}", "o", p, cfg(), files=files) for p in range(4)]
    for i in range(30):
        append(plog, b"v%d" % i, key=b"k%d" % (i % 3))
        append(others[i % 4], b"x")
    assert clean_partition(plog, NOW, 0) is not None
    kept = values_from(plog)
    assert kept[-3:] == [(27, b"v27"), (28, b"v28"), (29, b"v29")]
    assert len(files) <= 3
    for log_ in [plog, *others]:
        log_.close()


class RecordingOps(FileOps):
    """The system calls of the segments, recording each fsync's file (and failing those of
    ``failing``) -- to see which file a group commit made durable, and through which descriptor."""

    def __init__(self) -> None:
        self.synced: list[str] = []
        self.failing: set[str] = set()

    def fsync(self, fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        self.synced.append(path)
        if path in self.failing:
            raise OSError(errno.EIO, "injected write-back error")
        super().fsync(fd)


def produce(m: LogManager, plog: PartitionLog, value: bytes):
    data = bytearray(records.simple_batch([value], base_timestamp=NOW))
    plog.append(data, validate_produce(data), NOW)
    return m.appended(plog)


@pytest.mark.parametrize("policy", ["interval", "always"])
async def test_a_file_closed_for_room_with_unsynced_appends_is_fsynced_before_they_are_acknowledged(
    tmp_path, policy
):
    ops = RecordingOps()
    conf = {
        "log.dirs": str(tmp_path),
        "log.flush": policy,
        "log.max.open.files": "2",
        "log.flush.journal": "false",
    }
    m = LogManager(tmp_path, Config(conf), file_ops=ops)
    m.open_topic("t", 6, {})
    plogs = [m.get("t", p) for p in range(6)]
    futures = [produce(m, plog, b"v%d" % p) for p, plog in enumerate(plogs)]  # one commit window
    # six appends written, at most two of their files still open: four closed with unsynced pages
    assert all(plog.high_watermark == 0 for plog in plogs)
    assert sum(plog.active._fd is None for plog in plogs) >= 4 and len(m.files) <= 2
    await asyncio.gather(*futures)
    for plog in plogs:  # acknowledged: each file was fsynced, every byte of it, and is visible
        assert str(plog.active.path) in ops.synced
        assert plog.active.synced_size == plog.active.size and plog.high_watermark == 1
    assert len(m.files) <= 2 and open_fds(tmp_path) <= 2  # the fsyncs' own descriptors are closed
    await m.close()


async def test_a_failed_fsync_of_a_file_closed_for_room_fails_the_appends_it_held(tmp_path):
    ops = RecordingOps()
    conf = {
        "log.dirs": str(tmp_path),
        "log.flush": "interval",
        "log.max.open.files": "1",
        "log.flush.journal": "false",
    }
    m = LogManager(tmp_path, Config(conf), file_ops=ops)
    m.open_topic("t", 3, {})
    a, b, c = (m.get("t", p) for p in range(3))
    ops.failing.add(str(a.active.path))
    futures = [produce(m, plog, b"x") for plog in (a, b, c)]
    assert a.active._fd is None  # closed for room before the commit
    with pytest.raises(StorageError):
        await asyncio.gather(*futures)
    assert a.log_end_offset == 0 and a.high_watermark == 0  # cut, never served
    ops.failing.clear()
    await produce(m, a, b"again")
    assert values_from(a) == [(0, b"again")]
    await m.close()


def test_the_default_budget_is_half_the_soft_limit_the_process_started_with(monkeypatch):
    """``serve`` notes the soft limit it was started with before raising it to the hard limit for
    connections: the default log.max.open.files (0) is half of that one, not of the raised one."""
    monkeypatch.setattr(segment, "_starting_soft_limit", None)
    segment.note_starting_open_files_limit(1024)
    segment.note_starting_open_files_limit(1 << 20)  # (raised since: the first one noted counts)
    assert open_files_limit(0) == 512
    assert open_files_limit(100) == 100  # set explicitly
    monkeypatch.setattr(segment, "_starting_soft_limit", 90)
    assert open_files_limit(0) == 64
    monkeypatch.setattr(segment, "_starting_soft_limit", resource.RLIM_INFINITY)
    assert open_files_limit(0) == 0  # unbounded
    monkeypatch.setattr(segment, "_starting_soft_limit", None)  # not noted: the current soft limit
    assert open_files_limit(0) == max(64, resource.getrlimit(resource.RLIMIT_NOFILE)[0] // 2)
