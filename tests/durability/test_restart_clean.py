"""Restart after a clean stop with many partitions: the logs open on first use (or in the background)
instead of at start-up (broker/log/manager.py), and a real client sees exactly what it would after an
eager start -- offsets (ListOffsets), records (Fetch) and new appends -- including after a SIGKILL of
the broker that started so: that crash removes nothing acknowledged.

Each broker is a ``serve`` subprocess (log.flush=interval, the default) with confluent-kafka."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.log.manager import CLEAN_SHUTDOWN, MARKER_HEADER
from tests.support.process import free_port

TOPICS = {"left": 60, "right": 40}
TIMEOUT = 60.0  # hang guard only


class Served:
    def __init__(self, data: Path):
        self.port = free_port()
        ready = data.parent / "ready"
        ready.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "broker", "serve", "--port", str(self.port), "--data-dir", str(data)]
            + ["--ready-file", str(ready), "--config", "num.partitions=1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + TIMEOUT
        while not ready.exists():
            assert self.proc.poll() is None, "broker exited"
            assert time.monotonic() < deadline, "broker did not start"
            time.sleep(0.01)
        self.bootstrap = f"127.0.0.1:{self.port}"

    def stop(self, sig: int = signal.SIGTERM) -> None:
        self.proc.send_signal(sig)
        assert self.proc.wait(TIMEOUT) == (0 if sig == signal.SIGTERM else -sig)


def produce(bootstrap: str, records: dict[tuple[str, int], list[bytes]]) -> dict[tuple[str, int], list[int]]:
    """Produce (acks=all) and return the offsets the broker acknowledged, per partition."""
    acked: dict[tuple[str, int], list[int]] = {}

    def delivered(err, msg) -> None:
        assert err is None, err
        acked.setdefault((msg.topic(), msg.partition()), []).append(msg.offset())

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True})
    for (topic, partition), values in records.items():
        for v in values:
            p.produce(topic, v, partition=partition, on_delivery=delivered)
    assert p.flush(TIMEOUT) == 0
    return acked


def read_back(bootstrap: str) -> tuple[dict[tuple[str, int], tuple[int, int]], dict[tuple[str, int], list]]:
    """(low, high) watermarks of every partition (ListOffsets) and every record (offset, value)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False})
    try:
        marks = {
            (t, p): c.get_watermark_offsets(TopicPartition(t, p), timeout=TIMEOUT)
            for t, n in TOPICS.items()
            for p in range(n)
        }
        c.assign([TopicPartition(t, p, 0) for (t, p), (_lo, hi) in marks.items() if hi > 0])
        want = sum(hi for _lo, hi in marks.values())
        got: dict[tuple[str, int], list] = {}
        deadline = time.monotonic() + TIMEOUT
        n = 0
        while n < want and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                assert m.error() is None, m.error()
                got.setdefault((m.topic(), m.partition()), []).append((m.offset(), m.value()))
                n += 1
        return marks, got
    finally:
        c.close()


def test_a_clean_restart_serves_every_partition_as_before_and_survives_a_sigkill(tmp_path):
    data = tmp_path / "data"
    b = Served(data)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic(t, n, 1) for t, n in TOPICS.items()]).values():
        f.result(TIMEOUT)
    # partition p of each topic gets p % 3 records: some logs stay empty
    first = {
        (t, p): [b"%s-%d-%d" % (t.encode(), p, i) for i in range(p % 3)]
        for t, n in TOPICS.items()
        for p in range(n)
    }
    produce(b.bootstrap, first)
    b.stop()
    marker = (data / CLEAN_SHUTDOWN).read_text().splitlines()
    assert marker[0] == MARKER_HEADER
    listed = {(line.split()[0], int(line.split()[1])) for line in marker[1:]}
    assert listed >= set(first), "every partition is listed as the clean stop left it"

    b = Served(data)  # deferred: every user partition is listed in the marker, untouched since
    assert not (data / CLEAN_SHUTDOWN).exists()
    marks, got = read_back(b.bootstrap)
    assert marks == {k: (0, len(v)) for k, v in first.items()}
    assert got == {k: list(enumerate(v)) for k, v in first.items() if v}
    second = {k: [b"again-%d" % i for i in range(2)] for k in list(first)[::2]}
    acked = produce(b.bootstrap, second)
    assert acked == {k: [len(first[k]), len(first[k]) + 1] for k in second}
    b.stop(signal.SIGKILL)  # after a deferred start: the next start recovers every log

    b = Served(data)
    try:
        marks, got = read_back(b.bootstrap)
        want = {k: first[k] + second.get(k, []) for k in first}
        assert marks == {k: (0, len(v)) for k, v in want.items()}
        assert got == {k: list(enumerate(v)) for k, v in want.items() if v}
    finally:
        b.stop()
