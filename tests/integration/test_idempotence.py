"""Idempotent produce over the raw wire: InitProducerId, then batches with explicit producer id,
epoch and sequence numbers, built with broker.log.records and sent with our generated codecs.

What Kafka guarantees and these tests check: a retried batch (same producer id, epoch and sequence)
is stored once and acknowledged with the offsets of the first write; a gap in the sequence is
OUT_OF_ORDER_SEQUENCE_NUMBER (45); an epoch older than the producer's current one is
INVALID_PRODUCER_EPOCH (47); a new epoch restarts at sequence 0. Duplicate detection must survive a
clean restart and a SIGKILL of the broker process.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.log.records import build_batch, iter_records
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.fetch import FetchPartition, FetchRequest, FetchTopic
from broker.protocol.generated.init_producer_id import InitProducerIdRequest
from broker.protocol.generated.metadata import MetadataRequest, MetadataRequestTopic
from broker.protocol.generated.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from tests.support.wire import WireClient

TOPIC = "idem"
OUT_OF_ORDER = int(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
BAD_EPOCH = int(ErrorCode.INVALID_PRODUCER_EPOCH)


class Producer:
    """A hand-driven idempotent producer on one connection."""

    def __init__(self, client: WireClient, topic: str = TOPIC, version: int = 11, topic_id=None):
        self.c = client
        self.topic = topic
        self.version = version
        self.topic_id = topic_id

    def init(self) -> tuple[int, int]:
        resp = self.c.call(
            22,
            4,
            InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
            ),
        )
        assert resp.error_code == 0, resp
        assert resp.producer_id >= 0 and resp.producer_epoch == 0, resp
        return resp.producer_id, resp.producer_epoch

    def send(self, batch: bytes, partition: int = 0):
        td = TopicProduceData(name=self.topic, partition_data=[PartitionProduceData(partition, batch)])
        if self.version >= 13:
            td.topic_id = self.topic_id
        resp = self.c.call(0, self.version, ProduceRequest(None, -1, 10000, [td]))
        [t] = resp.responses
        [p] = t.partition_responses
        assert p.index == partition
        return p


def batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    return build_batch(
        [(b"k-" + v, v) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )


def values(tag: str, n: int) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(n)]


def fetch_all(client: WireClient, topic: str = TOPIC, partition: int = 0) -> tuple[int, list[tuple]]:
    """(high watermark, [(offset, value, producer id, epoch, base sequence)]) of the whole partition."""
    req = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 24,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[
                    FetchPartition(
                        partition=partition, fetch_offset=0, log_start_offset=-1, partition_max_bytes=1 << 24
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    resp = client.call(1, 11, req)
    [part] = resp.responses[0].partitions
    assert part.error_code == 0, part
    recs = [
        (off, v, info.producer_id, info.producer_epoch, info.base_sequence)
        for off, _, _, v, _, info in iter_records(part.records or b"")
    ]
    return part.high_watermark, recs


def create(broker, name: str = TOPIC, partitions: int = 1):
    return broker.call(broker.broker.create_topic, name, partitions)


# ---------------------------------------------------------------- in-process broker


@pytest.mark.parametrize("version", [3, 8, 11, 13])
def test_retried_batch_is_stored_once(broker, version):
    topic = create(broker)
    with WireClient(broker.port) as c:
        prod = Producer(c, version=version, topic_id=topic.topic_id)
        pid, epoch = prod.init()
        first = batch(pid, epoch, 0, values("a", 3))
        r1 = prod.send(first)
        r2 = prod.send(first)  # the retry of a batch whose ack was lost
        assert (r1.error_code, r1.base_offset) == (0, 0)
        assert (r2.error_code, r2.base_offset) == (0, 0)
        r3 = prod.send(batch(pid, epoch, 3, values("b", 2)))
        assert (r3.error_code, r3.base_offset) == (0, 3)
        hw, recs = fetch_all(c)
    assert hw == 5
    assert [(off, v) for off, v, *_ in recs] == list(enumerate(values("a", 3) + values("b", 2)))
    assert {(p, e) for _, _, p, e, _ in recs} == {(pid, epoch)}


def test_duplicate_of_an_older_cached_batch_gets_its_original_offsets(broker):
    create(broker)
    with WireClient(broker.port) as c:
        prod = Producer(c)
        pid, epoch = prod.init()
        sent = [batch(pid, epoch, 2 * i, values(f"b{i}", 2)) for i in range(6)]
        bases = [prod.send(b).base_offset for b in sent]
        assert bases == [0, 2, 4, 6, 8, 10]
        # Kafka remembers the last five batches of each producer: a retry of any of them is a duplicate
        for i in range(1, 6):
            r = prod.send(sent[i])
            assert (r.error_code, r.base_offset) == (0, bases[i]), i
        # the first batch has left the cache: its sequence is simply out of order now
        assert prod.send(sent[0]).error_code == OUT_OF_ORDER
        hw, recs = fetch_all(c)
    assert hw == 12
    assert [v for _, v, *_ in recs] == [v for i in range(6) for v in values(f"b{i}", 2)]


def test_sequence_gap_is_out_of_order(broker):
    create(broker)
    with WireClient(broker.port) as c:
        prod = Producer(c)
        pid, epoch = prod.init()
        assert prod.send(batch(pid, epoch, 0, values("a", 3))).error_code == 0
        gap = prod.send(batch(pid, epoch, 5, values("gap", 1)))
        assert gap.error_code == OUT_OF_ORDER, gap
        assert gap.base_offset == -1
        # overlapping but not identical to the stored batch: neither a duplicate nor in sequence
        assert prod.send(batch(pid, epoch, 1, values("x", 3))).error_code == OUT_OF_ORDER
        ok = prod.send(batch(pid, epoch, 3, values("b", 1)))
        assert (ok.error_code, ok.base_offset) == (0, 3)
        hw, recs = fetch_all(c)
    assert hw == 4
    assert [v for _, v, *_ in recs] == values("a", 3) + values("b", 1)


def test_producer_epochs(broker):
    create(broker)
    with WireClient(broker.port) as c:
        prod = Producer(c)
        pid, _ = prod.init()
        assert prod.send(batch(pid, 0, 0, values("e0", 2))).error_code == 0
        # a bumped epoch starts again at sequence 0
        r = prod.send(batch(pid, 1, 0, values("e1", 2)))
        assert (r.error_code, r.base_offset) == (0, 2)
        # the old epoch is fenced, whatever its sequence
        for seq in (0, 2):
            old = prod.send(batch(pid, 0, seq, values("stale", 1)))
            assert old.error_code == BAD_EPOCH, (seq, old)
        # a newer epoch must start at 0
        assert prod.send(batch(pid, 2, 5, values("e2", 1))).error_code == OUT_OF_ORDER
        r = prod.send(batch(pid, 1, 2, values("e1b", 1)))
        assert (r.error_code, r.base_offset) == (0, 4)
        hw, recs = fetch_all(c)
    assert hw == 5
    assert [(v, e) for _, v, _, e, _ in recs] == [
        (b"e0-0", 0),
        (b"e0-1", 0),
        (b"e1-0", 1),
        (b"e1-1", 1),
        (b"e1b-0", 1),
    ]


def test_producers_are_independent(broker):
    create(broker)
    with WireClient(broker.port) as c:
        prod = Producer(c)
        p1, _ = prod.init()
        p2, _ = prod.init()
        assert p1 != p2
        assert prod.send(batch(p1, 0, 0, values("p1", 2))).base_offset == 0
        assert prod.send(batch(p2, 0, 0, values("p2", 2))).base_offset == 2
        assert prod.send(batch(p1, 0, 0, values("p1", 2))).base_offset == 0  # duplicate of p1's
        assert prod.send(batch(p2, 0, 2, values("p2b", 1))).base_offset == 4
        assert prod.send(batch(p1, 0, 3, values("p1b", 1))).error_code == OUT_OF_ORDER
        hw, recs = fetch_all(c)
    assert hw == 5
    assert [(v, p) for _, v, p, _, _ in recs] == [
        (b"p1-0", p1),
        (b"p1-1", p1),
        (b"p2-0", p2),
        (b"p2-1", p2),
        (b"p2b-0", p2),
    ]


def test_duplicate_detection_survives_a_clean_restart(broker_factory, tmp_path):
    data = tmp_path / "restart"
    b1 = broker_factory(data_dir=data)
    create(b1)
    with WireClient(b1.port) as c:
        prod = Producer(c)
        pid, epoch = prod.init()
        sent = [batch(pid, epoch, 3 * i, values(f"r{i}", 3)) for i in range(3)]
        assert [prod.send(b).base_offset for b in sent] == [0, 3, 6]
    b1.stop()

    b2 = broker_factory(data_dir=data)
    with WireClient(b2.port) as c:
        prod = Producer(c)
        for i in (1, 2):
            r = prod.send(sent[i])
            assert (r.error_code, r.base_offset) == (0, 3 * i), i
        assert prod.send(batch(pid, epoch, 12, values("gap", 1))).error_code == OUT_OF_ORDER
        r = prod.send(batch(pid, epoch, 9, values("n", 1)))
        assert (r.error_code, r.base_offset) == (0, 9)
        new_pid, _ = prod.init()
        assert new_pid != pid, "producer ids must not repeat across restarts"
        hw, recs = fetch_all(c)
    assert hw == 10
    assert [v for _, v, *_ in recs] == values("r0", 3) + values("r1", 3) + values("r2", 3) + values("n", 1)


# ---------------------------------------------------------------- broker process killed with SIGKILL


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(data: Path) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    cmd = [sys.executable, "-m", "broker", "serve", "--port", str(port), "--data-dir", str(data)]
    cmd += ["--config", "log.flush=always", "--log-level", "warning"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"broker exited with {proc.returncode}: {proc.stderr.read().decode()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("broker did not start listening")


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)


def test_duplicate_detection_survives_sigkill(tmp_path):
    data = tmp_path / "killed"
    proc, port = _serve(data)
    try:
        with WireClient(port) as c:
            # the topic is auto-created by Metadata (num.partitions=1)
            md = c.call(
                3,
                12,
                MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=True),
            )
            assert md.topics[0].error_code == 0, md
            prod = Producer(c)
            pid, epoch = prod.init()
            sent = [batch(pid, epoch, 2 * i, values(f"k{i}", 2)) for i in range(4)]
            assert [prod.send(b).base_offset for b in sent] == [0, 2, 4, 6]
    finally:
        _kill(proc)
    # no clean shutdown: the producer state can only come back by replaying the log
    assert not list(data.glob("**/producer-state.json"))

    proc, port = _serve(data)
    try:
        with WireClient(port) as c:
            prod = Producer(c)
            for i in range(4):
                r = prod.send(sent[i])
                assert (r.error_code, r.base_offset) == (0, 2 * i), i
            assert prod.send(batch(pid, epoch, 9, values("gap", 1))).error_code == OUT_OF_ORDER
            r = prod.send(batch(pid, epoch, 8, values("next", 1)))
            assert (r.error_code, r.base_offset) == (0, 8)
            new_pid, _ = prod.init()
            assert new_pid != pid
            hw, recs = fetch_all(c)
    finally:
        _kill(proc)
    assert hw == 9
    assert [v for _, v, *_ in recs] == [v for i in range(4) for v in values(f"k{i}", 2)] + [b"next-0"]
    assert {(p, e) for _, _, p, e, _ in recs} == {(pid, epoch)}


def test_torn_last_batch_after_sigkill_can_be_sent_again(tmp_path):
    """A crash that leaves half of the last batch on disk: recovery drops it, and the producer's
    retry of that batch is appended as new (in sequence), not refused or answered as a duplicate."""
    data = tmp_path / "torn"
    proc, port = _serve(data)
    try:
        with WireClient(port) as c:
            md = c.call(
                3,
                12,
                MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=True),
            )
            assert md.topics[0].error_code == 0, md
            prod = Producer(c)
            pid, epoch = prod.init()
            sent = [batch(pid, epoch, 2 * i, values(f"t{i}", 2)) for i in range(3)]
            assert [prod.send(b).base_offset for b in sent] == [0, 2, 4]
    finally:
        _kill(proc)
    seg = data / f"{TOPIC}-0" / f"{0:020d}.log"
    size = seg.stat().st_size
    os.truncate(seg, size - len(sent[2]) // 2)  # half of the last batch never reached the disk

    proc, port = _serve(data)
    try:
        with WireClient(port) as c:
            prod = Producer(c)
            hw, recs = fetch_all(c)
            assert hw == 4, "recovery should keep exactly the two whole batches"
            r = prod.send(sent[1])
            assert (r.error_code, r.base_offset) == (0, 2)  # still a duplicate
            r = prod.send(sent[2])
            assert (r.error_code, r.base_offset) == (0, 4)  # appended again, same offsets
            r = prod.send(sent[2])
            assert (r.error_code, r.base_offset) == (0, 4)  # and now a duplicate
            hw, recs = fetch_all(c)
    finally:
        _kill(proc)
    assert hw == 6
    assert [v for _, v, *_ in recs] == [v for i in range(3) for v in values(f"t{i}", 2)]


def test_snapshot_from_clean_stop_plus_replay_after_sigkill(tmp_path):
    """A clean stop (SIGTERM) leaves a producer snapshot; more batches follow; then SIGKILL. The
    state after the second start combines the snapshot with a replay of the batches after it."""
    data = tmp_path / "mixed"
    proc, port = _serve(data)
    try:
        with WireClient(port) as c:
            md = c.call(
                3,
                12,
                MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=True),
            )
            assert md.topics[0].error_code == 0, md
            prod = Producer(c)
            pid, epoch = prod.init()
            other, _ = prod.init()
            sent = [batch(pid, epoch, 2 * i, values(f"s{i}", 2)) for i in range(5)]
            assert [prod.send(b).base_offset for b in sent[:3]] == [0, 2, 4]
            assert prod.send(batch(other, 0, 0, values("o", 1))).base_offset == 6
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    assert list(data.glob("**/producer-state.json")), "a clean stop should write the producer snapshot"

    proc, port = _serve(data)
    try:
        with WireClient(port) as c:
            prod = Producer(c)
            assert [prod.send(b).base_offset for b in sent[3:]] == [7, 9]
            assert prod.send(batch(other, 0, 1, values("o2", 1))).base_offset == 11
    finally:
        _kill(proc)

    proc, port = _serve(data)
    try:
        with WireClient(port) as c:
            prod = Producer(c)
            for b, base in zip(sent, [0, 2, 4, 7, 9], strict=True):
                r = prod.send(b)
                assert (r.error_code, r.base_offset) == (0, base)
            r = prod.send(batch(other, 0, 1, values("o2", 1)))
            assert (r.error_code, r.base_offset) == (0, 11)
            assert prod.send(batch(other, 0, 3, values("o3", 1))).error_code == OUT_OF_ORDER
            r = prod.send(batch(pid, epoch, 10, values("s5", 1)))
            assert (r.error_code, r.base_offset) == (0, 12)
            hw, recs = fetch_all(c)
    finally:
        _kill(proc)
    assert hw == 13
    assert [v for _, v, *_ in recs] == (
        values("s0", 2)
        + values("s1", 2)
        + values("s2", 2)
        + values("o", 1)
        + values("s3", 2)
        + values("s4", 2)
        + values("o2", 1)
        + values("s5", 1)
    )
