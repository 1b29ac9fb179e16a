"""10,000 partitions under the default soft limit of 1,024 open files: the broker keeps at most
``log.max.open.files`` segment files open (by default half the soft limit it was started with, even
though ``serve`` then raises the soft limit to the hard one for connections), so it creates, writes,
survives a SIGKILL with and serves 10 topics x 1,000 partitions with its open descriptors
(/proc/PID/fd, sampled throughout) under 1,024."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TOPICS, PARTITIONS, LIMIT = 10, 1000, 1024
#: the segment files (half the limit), plus the process's own (listeners, epoll, pipes, the data
#: directory's lock, a few connections) and the fsync threads' short-lived descriptors
BOUND = LIMIT // 2 + 64


def _limit_open_files() -> None:
    # ``ulimit -Sn 1024``: the soft limit most shells start with, under a higher hard limit that
    # ``serve`` raises it to (for connections: the segment files stay bounded by the 1,024)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, hard))


class Broker:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> str:
        ready = self.tmp / f"ready-{self.starts}"
        log = open(self.tmp / f"broker-{self.starts}.log", "wb")  # noqa: SIM115 (the child's)
        self.starts += 1
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "broker", "serve", "--port", "0", "--data-dir", str(self.tmp / "data")]
            + ["--ready-file", str(ready), "--log-level", "warning"],
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_limit_open_files,
        )
        log.close()
        guard = time.monotonic() + 300  # hang guard, not a timing assertion
        while not ready.exists():
            assert self.proc.poll() is None, self.output()
            assert time.monotonic() < guard, "the broker never listened"
            time.sleep(0.05)
        return ready.read_text().split()[0]

    def open_files(self) -> int:
        assert self.proc is not None
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def sample_open_files(self) -> tuple[threading.Event, list[int]]:
        """Sample the process's open descriptors until the event is set: (event, samples)."""
        done, samples = threading.Event(), []

        def sample() -> None:
            while not done.wait(0.02):
                try:
                    samples.append(self.open_files())
                except OSError:  # the process is gone
                    return

        threading.Thread(target=sample, daemon=True).start()
        return done, samples

    def output(self) -> str:
        return (self.tmp / f"broker-{self.starts - 1}.log").read_text()[-3000:]

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)


def consume_all(bootstrap: str, group: str) -> dict[tuple[str, int], bytes]:
    """The first record of every partition, fetched by one consumer assigned to all 10,000."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.assign([TopicPartition(f"t{i}", p, 0) for i in range(TOPICS) for p in range(PARTITIONS)])
    got: dict[tuple[str, int], bytes] = {}
    guard = time.monotonic() + 300  # hang guard, not a timing assertion
    while len(got) < TOPICS * PARTITIONS and time.monotonic() < guard:
        for msg in consumer.consume(10_000, 1.0):
            if not msg.error():
                got.setdefault((msg.topic(), msg.partition()), msg.value())
    consumer.close()
    return got


def test_ten_thousand_partitions_under_a_limit_of_1024_open_files(tmp_path):
    broker = Broker(tmp_path)
    expected = {(f"t{i}", p): b"t%d-p%d" % (i, p) for i in range(TOPICS) for p in range(PARTITIONS)}
    try:
        bootstrap = broker.start()
        done, samples = broker.sample_open_files()
        admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000})
        topics = [NewTopic(f"t{i}", PARTITIONS, 1) for i in range(TOPICS)]
        for future in admin.create_topics(topics, operation_timeout=120, request_timeout=180).values():
            future.result()
        acked: list[tuple[str, int, int]] = []

        def delivered(err, msg) -> None:
            assert err is None, err
            acked.append((msg.topic(), msg.partition(), msg.offset()))

        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        for i in range(TOPICS):
            for p in range(PARTITIONS):
                producer.produce(f"t{i}", b"t%d-p%d" % (i, p), partition=p, on_delivery=delivered)
                producer.poll(0)
        assert producer.flush(300) == 0
        assert len(acked) == TOPICS * PARTITIONS and {o for _t, _p, o in acked} == {0}
        assert consume_all(bootstrap, "g1") == expected
        samples.append(broker.open_files())
        done.set()
        assert max(samples) < BOUND, f"{max(samples)} open files with 10,000 partitions"

        broker.kill()  # everything acknowledged survives, and recovering it needs no more files
        bootstrap = broker.start()
        done, samples = broker.sample_open_files()
        assert consume_all(bootstrap, "g2") == expected
        samples.append(broker.open_files())
        done.set()
        assert max(samples) < BOUND, f"{max(samples)} open files after recovering 10,000 partitions"
    finally:
        broker.kill()
