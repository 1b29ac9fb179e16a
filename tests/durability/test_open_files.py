"""10,000 partitions under the default soft limit of 1,024 open files: the broker keeps at most
``log.max.open.files`` segment files open (by default half the soft limit), so it creates, writes,
survives a SIGKILL with and serves 10 topics x 1,000 partitions without raising the limit."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TOPICS, PARTITIONS, LIMIT = 10, 1000, 1024


def _limit_open_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


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

    def output(self) -> str:
        return (self.tmp / f"broker-{self.starts - 1}.log").read_text()[-3000:]

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)


def test_ten_thousand_partitions_under_a_limit_of_1024_open_files(tmp_path):
    broker = Broker(tmp_path)
    try:
        bootstrap = broker.start()
        admin = AdminClient({"bootstrap.servers": bootstrap})
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
        during = broker.open_files()
        assert during < LIMIT // 2 + 64, f"{during} open files with 10,000 partitions"

        broker.kill()  # everything acknowledged survives, and the restart needs no more files
        bootstrap = broker.start()
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False})
        wanted = {(f"t{i}", p) for i in range(TOPICS) for p in range(0, PARTITIONS, 9)}
        consumer.assign([TopicPartition(t, p, 0) for t, p in sorted(wanted)])
        got: dict[tuple[str, int], bytes] = {}
        guard = time.monotonic() + 300
        while len(got) < len(wanted) and time.monotonic() < guard:
            msg = consumer.poll(1)
            if msg is not None and not msg.error():
                got[(msg.topic(), msg.partition())] = msg.value()
        consumer.close()
        assert got == {(t, p): b"%s-p%d" % (t.encode(), p) for t, p in wanted}
        assert broker.open_files() < LIMIT // 2 + 64
    finally:
        broker.kill()
