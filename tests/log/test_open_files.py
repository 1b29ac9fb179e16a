"""The open-file budget (``log.max.open.files``, broker/log/segment.py OpenFiles): segments close
their files for room, least recently used first, and re-open them when used, so many partitions run
under a small limit with every read and write landing in the right file."""

from __future__ import annotations

import os
import threading

from broker.log import records
from broker.log.batch import validate_produce
from broker.log.cleaner import clean_partition
from broker.log.partition import PartitionLog
from broker.log.segment import OpenFiles

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
    # the group commit's fsync runs in a worker thread: it opens the file without closing others
    worker = threading.Thread(target=a.segments[0].flush)
    worker.start()
    worker.join()
    assert a.segments[0]._pins == 0 and len(files) == 3  # over the limit until the loop's next open
    assert a.segments[0].synced_size == a.segments[0].size
    files.acquire(b.segments[0])
    assert len(files) == 2
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
