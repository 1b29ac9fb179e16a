"""Disk faults: ENOSPC / EIO on a log append (write) and on its fsync, for a data partition and for the
coordinator's log, injected through the LogManager's FileOps seam (``broker.log.segment.FileOps``)
in an in-process broker, and observed over the wire.

The broker's choice (documented in broker/log/manager.py): a single-directory dev broker does not
take the log directory offline as Kafka does; it keeps serving reads and answers writes with a
retriable error until the disk recovers:

* Produce gets KAFKA_STORAGE_ERROR; nothing of the failed append is ever fetched -- while the fault
  lasts, after it clears, and after a restart -- and the next append takes the offset the failed
  one would have had;
* OffsetCommit gets NOT_COORDINATOR (Kafka's mapping of a storage error on the coordinator's log;
  the client looks the coordinator up again and retries); a failed write leaves the committed offset as it
  was; after a failed fsync the commit's record stays in the coordinator log (the coordinator's
  state already holds it), and the state rebuilt from the log at restart equals the live one;
* Fetch, Metadata, ListOffsets and OffsetFetch keep working throughout.

Every test runs twice: with the group-commit journal (``log.flush.journal``, the default), whose
fdatasync is the one an acknowledgement waits for, so the fsync faults are injected into the journal
file (and, there being one journal for every log, fail every commit while they last); and without it
(``log.flush.journal=false``), where the fsync faults hit the partition's own segment file.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from broker.log.records import iter_records, simple_batch
from broker.log.segment import FileOps
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.create_topics import CreatableTopic, CreateTopicsRequest
from broker.protocol.generated.fetch import FetchPartition, FetchRequest, FetchTopic
from broker.protocol.generated.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from broker.protocol.generated.metadata import MetadataRequest, MetadataRequestTopic
from broker.protocol.generated.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.generated.offset_fetch import OffsetFetchRequest
from broker.protocol.generated.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.testing import BrokerThread
from tests.support.wire import WireClient

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, CREATE_TOPICS = 0, 1, 2, 3, 8, 9, 19
TOPIC = "faulty"
OFFSETS_LOG = "__consumer_offsets-0"
#: the group-commit journal's files (broker/log/journal.py)
JOURNAL_FILES = "/.journal-"


class FaultyOps(FileOps):
    """FileOps that fail chosen calls on files whose path contains ``target`` (or one of them).

    ``faults`` maps "write" / "fsync" / "truncate" to an errno (or to "short" for a write that
    writes half its bytes and returns the count, as a filling disk does)."""

    def __init__(self) -> None:
        self.faults: dict[str, Any] = {}
        self.target: tuple[str, ...] = ("",)
        self.hits: dict[str, int] = {}
        self._lock = threading.Lock()
        self.journal = False

    def _fault(self, op: str, fd: int) -> Any:
        with self._lock:
            fault = self.faults.get(op)
            if fault is None:
                return None
            path = os.readlink(f"/proc/self/fd/{fd}")
            if not any(t in path for t in self.target) or (JOURNAL_FILES in path and op != "fsync"):
                return None
            self.hits[op] = self.hits.get(op, 0) + 1
            return fault

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> int:
        fault = self._fault("write", fd)
        if fault == "short":
            return os.write(fd, memoryview(data)[: len(data) // 2])
        if fault is not None:
            if fault == errno.EIO:  # a failing device may have written part of it first
                os.write(fd, memoryview(data)[: len(data) // 3])
            raise OSError(fault, os.strerror(fault))
        return super().write(fd, data)

    def fsync(self, fd: int) -> None:
        fault = self._fault("fsync", fd)
        if fault is not None:
            raise OSError(fault, os.strerror(fault))
        super().fsync(fd)

    def truncate(self, fd: int, size: int) -> None:
        fault = self._fault("truncate", fd)
        if fault is not None:
            raise OSError(fault, os.strerror(fault))
        super().truncate(fd, size)

    def inject(self, target: str, **faults: Any) -> None:
        """Fail ``faults`` on ``target``'s files; with the journal, the fsync faults on the journal's
        files too (the fsync an acknowledgement waits for)."""
        targets = (target, JOURNAL_FILES) if self.journal else (target,)
        with self._lock:
            self.target, self.faults, self.hits = targets, dict(faults), {}

    def clear(self) -> None:
        with self._lock:
            self.faults = {}


@pytest.fixture(params=[True, False], ids=["journal", "segment-sync"])
def journal(request) -> bool:
    return request.param


@pytest.fixture
def ops(journal) -> FaultyOps:
    ops = FaultyOps()
    ops.journal = journal
    return ops


@pytest.fixture
def start(tmp_path, ops, journal) -> Iterator[Any]:
    started: list[BrokerThread] = []
    # (with the journal, every commit writes it: these tests' commits cover one partition or a few)
    configs = {
        "log.flush": "always",
        "log.flush.journal": str(journal).lower(),
        "log.flush.journal.min.partitions": "1",
    }

    def _start() -> BrokerThread:
        bt = BrokerThread(tmp_path / "data", configs, file_ops=ops).start()
        started.append(bt)
        return bt

    yield _start
    for bt in started:
        bt.stop()


def call(port: int, api_key: int, version: int, body: Any) -> Any:
    with WireClient(port, timeout=10) as c:
        return c.call(api_key, version, body)


def create(port: int) -> None:
    r = call(port, CREATE_TOPICS, 5, CreateTopicsRequest([CreatableTopic(TOPIC, 1, 1)], 5000, False))
    assert r.topics[0].error_code == 0, r


def produce(port: int, values: list[bytes]) -> Any:
    data = [TopicProduceData(TOPIC, partition_data=[PartitionProduceData(0, simple_batch(values))])]
    r = call(port, PRODUCE, 9, ProduceRequest(None, -1, 5000, data))
    return r.responses[0].partition_responses[0]


def fetch_values(port: int) -> list[tuple[int, bytes]]:
    """(offset, value) of every record up to the high watermark, reading on until the end."""
    out: list[tuple[int, bytes]] = []
    while True:
        part = FetchPartition(0, -1, len(out), -1, -1, 1 << 20)
        req = FetchRequest(
            max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[FetchTopic(TOPIC, partitions=[part])]
        )
        p = call(port, FETCH, 12, req).responses[0].partitions[0]
        assert p.error_code == 0, p
        got = [
            (off, value)
            for off, _ts, _k, value, _h, _info in iter_records(p.records or b"")
            if off >= len(out)
        ]
        if not got:
            assert len(out) == p.high_watermark, (out, p.high_watermark)
            return out
        out += got


def latest_offset(port: int) -> int:
    req = ListOffsetsRequest(-1, 0, [ListOffsetsTopic(TOPIC, [ListOffsetsPartition(0, -1, -1)])])
    p = call(port, LIST_OFFSETS, 7, req).topics[0].partitions[0]
    assert p.error_code == 0, p
    return p.offset


def metadata_ok(port: int) -> bool:
    md = call(port, METADATA, 12, MetadataRequest([MetadataRequestTopic(name=TOPIC)], False))
    return md.topics[0].error_code == 0 and len(md.topics[0].partitions) == 1


def commit(port: int, offset: int) -> int:
    parts = [OffsetCommitRequestPartition(0, offset)]
    req = OffsetCommitRequest("g", -1, "", None, -1, [OffsetCommitRequestTopic(TOPIC, partitions=parts)])
    return call(port, OFFSET_COMMIT, 2, req).topics[0].partitions[0].error_code


def committed(port: int) -> int:
    r = call(port, OFFSET_FETCH, 2, OffsetFetchRequest("g", None))
    assert r.error_code == 0, r
    offsets = {(t.name, p.partition_index): p.committed_offset for t in r.topics for p in t.partitions}
    return offsets.get((TOPIC, 0), -1)


def log_size(bt: BrokerThread) -> int:
    return bt.broker.logs.get(TOPIC, 0).size_bytes()


def file_size(bt: BrokerThread) -> int:
    return sum(p.stat().st_size for p in (bt.config.data_dir / f"{TOPIC}-0").glob("*.log"))


FAULTS = {
    "write ENOSPC": {"write": errno.ENOSPC},
    "write EIO (part written)": {"write": errno.EIO},
    "short write": {"write": "short"},
    "write EIO, truncate EIO": {"write": errno.EIO, "truncate": errno.EIO},
    "fsync EIO": {"fsync": errno.EIO},
    "fsync ENOSPC": {"fsync": errno.ENOSPC},
    "fsync EIO, truncate EIO": {"fsync": errno.EIO, "truncate": errno.EIO},
}


@pytest.mark.parametrize("faults", FAULTS.values(), ids=FAULTS.keys())
def test_produce_during_a_disk_fault(start, ops, faults):
    bt = start()
    create(bt.port)
    assert produce(bt.port, [b"a0", b"a1"]).base_offset == 0
    size = log_size(bt)

    ops.inject(f"{TOPIC}-0", **faults)
    for attempt in range(3):
        p = produce(bt.port, [b"lost%d" % attempt] * 3)
        assert p.error_code == ErrorCode.KAFKA_STORAGE_ERROR, p
        # reads go on, and never see the failed append
        assert fetch_values(bt.port) == [(0, b"a0"), (1, b"a1")]
        assert latest_offset(bt.port) == 2
        assert metadata_ok(bt.port)
        assert log_size(bt) == size
    assert ops.hits, "the fault was never hit"
    if "truncate" not in faults:
        assert file_size(bt) == size, "the failed append left bytes in the file"

    ops.clear()
    assert produce(bt.port, [b"b2"]).base_offset == 2  # where the failed appends would have gone
    expected = [(0, b"a0"), (1, b"a1"), (2, b"b2")]
    assert fetch_values(bt.port) == expected
    assert file_size(bt) == log_size(bt)
    bt.stop()

    bt = start()
    assert fetch_values(bt.port) == expected
    assert produce(bt.port, [b"c3"]).base_offset == 3


def test_idempotent_retry_after_a_failed_fsync_is_appended_once(start, ops):
    """The failed append is cut from the log and from the producer state, so the producer's retry
    of the same sequence is a new append, not a duplicate of something that was never served."""
    bt = start()
    create(bt.port)

    def idempotent(values: list[bytes], seq: int) -> Any:
        batch = simple_batch(values, producer_id=7, producer_epoch=0, base_sequence=seq)
        data = [TopicProduceData(TOPIC, partition_data=[PartitionProduceData(0, batch)])]
        return (
            call(bt.port, PRODUCE, 9, ProduceRequest(None, -1, 5000, data))
            .responses[0]
            .partition_responses[0]
        )

    assert idempotent([b"s0"], 0).base_offset == 0
    ops.inject(f"{TOPIC}-0", fsync=errno.EIO)
    assert idempotent([b"s1", b"s2"], 1).error_code == ErrorCode.KAFKA_STORAGE_ERROR
    ops.clear()
    p = idempotent([b"s1", b"s2"], 1)
    assert (p.error_code, p.base_offset) == (0, 1)
    assert idempotent([b"s1", b"s2"], 1).base_offset == 1  # now a duplicate: same offsets
    assert fetch_values(bt.port) == [(0, b"s0"), (1, b"s1"), (2, b"s2")]


@pytest.mark.parametrize("op", ["write", "fsync"])
def test_offset_commit_during_a_disk_fault(start, ops, op, journal):
    bt = start()
    create(bt.port)
    assert produce(bt.port, [b"a0"]).base_offset == 0
    assert commit(bt.port, 5) == 0

    ops.inject(OFFSETS_LOG, **{op: errno.EIO})
    assert commit(bt.port, 7) == ErrorCode.NOT_COORDINATOR
    assert ops.hits.get(op)
    live = committed(bt.port)
    if op == "write":
        assert live == 5  # nothing was appended, nothing replayed
    else:
        assert live == 7  # the record stays in the log, and the state matches it
    if journal and op == "fsync":  # the journal's failing fsync would fail the produce's commit too
        ops.clear()
    # data partitions and reads are unaffected
    assert produce(bt.port, [b"a1"]).base_offset == 1
    assert fetch_values(bt.port) == [(0, b"a0"), (1, b"a1")]
    assert committed(bt.port) == live

    ops.clear()
    assert commit(bt.port, 9) == 0
    assert committed(bt.port) == 9
    state = bt.broker.groups.state
    before = {g: dict(o.by_topic) for g, o in state.offsets.items()}
    bt.stop()

    bt = start()
    assert committed(bt.port) == 9
    after = {g: dict(o.by_topic) for g, o in bt.broker.groups.state.offsets.items()}
    assert repr(after) == repr(before), "the replayed coordinator state differs from the live one"
