"""Produce/consume benchmark: confluent-kafka against our broker, against librdkafka's mock cluster
and against a released Apache Kafka broker, measured in the same run.

    python bench/produce_consume_bench.py [--messages 200000] [--size 100] [--partitions 1,8]
                                          [--rounds 3] [--flush interval] [--broker-config K=V]
                                          [--broker-root DIR] [--no-kafka]

Apache Kafka (``.reference/kafka-broker``, fetched by scripts/kafka.sh; left out with --no-kafka or
when absent) runs once for the whole run, single-node KRaft as tests/support/real_kafka.py starts it
(384 MB heap, serial GC, C1 only; Kafka's default flush policy: no fsync, the page cache only), and
gets each topic created beforehand with the partition count wanted. Its rates are printed beside
ours with the ratio ours/Kafka, for information (no bar).

For each partition count, our broker runs as a subprocess (``python -m broker serve --config
log.flush=interval``, a temp data dir, ``num.partitions`` set so the topic is auto-created with that
many partitions). The mock cluster is librdkafka's own in-memory broker, started inside this process by
a Producer created with ``test.mock.num.brokers=1``; its address comes from that producer's metadata
and the producer stays alive while the mock is used.

Against each server in turn, alternately ``--rounds`` times (the best run of each counts), on a new
topic every time:

* produce: one Producer (linger.ms=5, batch.size=1000000, compression none, acks=all, identical for
  both) sends ``--messages`` values of ``--size`` bytes, round-robin over the partitions; the clock runs
  from the first produce() until flush() returns, and every record must have been delivered without
  error;
* consume: one Consumer (queued.min.messages=1000000, otherwise defaults) assigns every partition at
  the beginning and reads until all records up to the high watermarks are in; the clock runs from
  assign() to the last record.

The mock auto-creates topics with a fixed partition count (4) and has no CreateTopics, so its
partitions are taken from as many auto-created topics as needed (1 partition: partition 0 of one
topic; 8: all of two). It also keeps only the last ~5 MB of each partition, so with one partition it
holds ~45,000 of the 200,000 records: its consume rate is over what it kept (printed).

Printed: msgs/s for each, our broker's CPU use during each phase, then ours/mock-produce for our
produce and our consume rates. Bar: each >= 0.8. Exit status 1 if any is missed. For reference the
mock's own consume/produce ratio and ours/mock consume are printed too.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition, libversion

ROOT = Path(__file__).resolve().parent.parent

BAR = 0.8
PRODUCER = {"linger.ms": 5, "batch.size": 1_000_000, "compression.type": "none", "acks": "all"}
CONSUME_WAIT = 1.0
# queued.min.messages: the whole run may sit in the client's fetch queue; at the default (100,000) a
# fast server fills it and librdkafka stops fetching for fetch.queue.backoff.ms (1 s). Same for both.
CONSUMER = {"enable.auto.commit": False, "enable.partition.eof": False, "queued.min.messages": 1_000_000}
# room for the whole run in the client's queue, so produce() never blocks: the same for both servers
QUEUE = {"queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 1 << 21}
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_cpu(pid: int | None) -> float:
    """user + system CPU seconds of ``pid`` so far (0 for None)."""
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


@dataclass
class Server:
    name: str
    bootstrap: str
    pid: int | None  # a separate process whose CPU is reported, or None (in this process)
    partitions_per_topic: int | None  # None: topics are created with the partitions we ask for
    create_topics: bool = False  # create each topic (CreateTopics) before producing to it

    def targets(self, topic: str, partitions: int) -> list[tuple[str, int]]:
        """(topic, partition) pairs making up ``partitions`` partitions."""
        if self.partitions_per_topic is None:
            return [(topic, p) for p in range(partitions)]
        per = self.partitions_per_topic
        return [(f"{topic}-{k}", p) for k in range(math.ceil(partitions / per)) for p in range(per)][
            :partitions
        ]


def wait_for_topics(client, topics: set[str], timeout: float = 30.0) -> dict[str, int]:
    """Metadata for each topic (auto-creating it), until every partition has a leader."""
    deadline = time.monotonic() + timeout
    out = {}
    for t in sorted(topics):
        while True:
            md = client.list_topics(t, timeout=5).topics.get(t)
            if (
                md is not None
                and md.error is None
                and md.partitions
                and all(p.leader >= 0 for p in md.partitions.values())
            ):
                out[t] = len(md.partitions)
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {t} has no leaders after {timeout} s: {md}")
            time.sleep(0.05)
    return out


def produce(server: Server, targets: list[tuple[str, int]], n: int, value: bytes) -> dict:
    delivered = 0
    errors: list[str] = []

    def on_delivery(err, _msg) -> None:
        nonlocal delivered
        if err is None:
            delivered += 1
        elif len(errors) < 5:
            errors.append(str(err))

    p = Producer({**PRODUCER, **QUEUE, "bootstrap.servers": server.bootstrap, "on_delivery": on_delivery})
    wait_for_topics(p, {t for t, _ in targets})
    k = len(targets)
    produce_ = p.produce
    poll = p.poll
    c0, w0 = proc_cpu(server.pid), time.perf_counter()
    for i in range(n):
        topic, part = targets[i % k]
        produce_(topic, value, partition=part)
        if not i % 1000:
            poll(0)
    left = p.flush(120)
    w1, c1 = time.perf_counter(), proc_cpu(server.pid)
    if left or delivered != n:
        raise RuntimeError(f"{server.name}: {delivered} of {n} delivered, {left} left; errors {errors}")
    return {"rate": n / (w1 - w0), "seconds": w1 - w0, "cpu": (c1 - c0) / (w1 - w0)}


def consume(server: Server, targets: list[tuple[str, int]], group: str) -> dict:
    c = Consumer({**CONSUMER, "bootstrap.servers": server.bootstrap, "group.id": group})
    try:
        tps = [TopicPartition(t, p) for t, p in targets]
        marks = [c.get_watermark_offsets(tp, timeout=10) for tp in tps]
        total = sum(high - low for low, high in marks)
        c0, w0 = proc_cpu(server.pid), time.perf_counter()
        c.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in targets])
        got = 0
        deadline = time.monotonic() + 120
        while got < total:
            # never ask for more than is left: consume() waits out its timeout for a short batch
            msgs = c.consume(min(10_000, total - got), CONSUME_WAIT)
            for m in msgs:
                if m.error() is not None:
                    raise KafkaException(m.error())
            got += len(msgs)
            if time.monotonic() > deadline:
                raise RuntimeError(f"{server.name}: read {got} of {total} records in 120 s")
        w1, c1 = time.perf_counter(), proc_cpu(server.pid)
        return {"rate": got / (w1 - w0), "seconds": w1 - w0, "cpu": (c1 - c0) / (w1 - w0), "count": got}
    finally:
        c.close()


def create_topic(server: Server, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30).values():
        fut.result(timeout=60)
    wait_for_topics(admin, {topic})


def start_broker(args, port: int, data_dir: Path, partitions: int, log_path: Path) -> subprocess.Popen:
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "broker",
                "serve",
                "--port",
                str(port),
                "--data-dir",
                str(data_dir),
                "--log-level",
                "warning",
                "--config",
                f"log.flush={args.flush}",
                "--config",
                f"num.partitions={partitions}",
                *(x for kv in args.broker_config for x in ("--config", kv)),
            ],
            cwd=args.broker_root,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 20
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited: {log_path.read_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def fmt(r: dict, with_cpu: bool) -> str:
    s = f"{r['rate']:11,.0f} msgs/s ({r['seconds']:.2f} s"
    if "count" in r:
        s += f", {r['count']:,} records"
    if with_cpu:
        s += f", broker CPU {r['cpu']:.0%}"
    return s + ")"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100, help="value bytes")
    ap.add_argument("--partitions", default="1,8", help="comma-separated partition counts")
    ap.add_argument("--rounds", type=int, default=3, help="alternate the servers this often; best counts")
    ap.add_argument("--flush", default="interval", choices=["always", "interval", "never"])
    ap.add_argument(
        "--broker-config", action="append", default=[], metavar="KEY=VALUE", help="more broker config"
    )
    ap.add_argument("--broker-root", type=Path, default=ROOT, help="checkout whose broker to run")
    ap.add_argument("--no-kafka", action="store_true", help="leave out the Apache Kafka peer")
    args = ap.parse_args()

    value = os.urandom(args.size)
    # the mock cluster lives inside this producer's librdkafka instance: keep it alive throughout
    mock_owner = Producer({"test.mock.num.brokers": 1, "log_level": 3})
    (mb,) = mock_owner.list_topics(timeout=10).brokers.values()
    probe = Producer({"bootstrap.servers": f"{mb.host}:{mb.port}"})
    per_topic = wait_for_topics(probe, {"probe"})["probe"]
    del probe
    mock = Server("mock", f"{mb.host}:{mb.port}", None, per_topic)

    tmp = tempfile.TemporaryDirectory(prefix="produce-consume-bench-")
    tmpdir = Path(tmp.name)
    settings = " ".join([f"log.flush={args.flush}", *args.broker_config])
    print(
        f"{args.messages:,} messages x {args.size} B, producer {PRODUCER}, best of {args.rounds}; "
        f"our broker: {settings}, subprocess; mock: librdkafka {libversion()[0]} "
        f"mock cluster in this process ({per_topic} partitions per auto-created topic); "
        f"{os.cpu_count()} CPUs"
    )
    kafka = None
    servers_extra: list[Server] = []
    if not args.no_kafka:
        sys.path.insert(0, str(ROOT))
        from tests.support.real_kafka import RealKafka

        if RealKafka.available():
            kafka = RealKafka()
            kafka.start(tmpdir / "kafka")
            assert kafka.proc is not None
            servers_extra.append(Server("kafka", kafka.bootstrap, kafka.proc.pid, None, create_topics=True))
            print(f"Apache Kafka {RealKafka.version()}: single node, KRaft, subprocess (no fsync)")
        else:
            print("Apache Kafka: not in .reference/kafka-broker (scripts/kafka.sh), left out")
    ok = True
    try:
        for partitions in [int(x) for x in args.partitions.split(",")]:
            port = free_port()
            proc = start_broker(
                args, port, tmpdir / f"data-{partitions}", partitions, tmpdir / f"broker-{partitions}.log"
            )
            ours = Server("ours", f"127.0.0.1:{port}", proc.pid, None)
            best: dict[tuple[str, str], dict] = {}
            try:
                for rnd in range(args.rounds):
                    for server in (ours, mock, *servers_extra):
                        topic = f"bench-{partitions}p-r{rnd}"
                        targets = server.targets(topic, partitions)
                        if server.create_topics:
                            create_topic(server, topic, partitions)
                        for phase, run in (
                            ("produce", lambda: produce(server, targets, args.messages, value)),
                            ("consume", lambda: consume(server, targets, f"g-{topic}")),
                        ):
                            r = run()
                            key = (server.name, phase)
                            if key not in best or r["rate"] > best[key]["rate"]:
                                best[key] = r
            finally:
                stop(proc)
            print(f"{partitions} partition(s):")
            for name in ("ours", "mock", *(x.name for x in servers_extra)):
                print(
                    f"  {name:5}  produce {fmt(best[(name, 'produce')], name != 'mock')}"
                    f"   consume {fmt(best[(name, 'consume')], name != 'mock')}"
                )
            mock_rate = best[("mock", "produce")]["rate"]
            rp = best[("ours", "produce")]["rate"] / mock_rate
            rc = best[("ours", "consume")]["rate"] / mock_rate
            mc = best[("mock", "consume")]["rate"] / mock_rate
            line_ok = rp >= BAR and rc >= BAR
            ok = ok and line_ok
            print(
                f"  ratio ours/mock-produce: produce {rp:.2f} {'ok' if rp >= BAR else 'MISS'}, "
                f"consume {rc:.2f} {'ok' if rc >= BAR else 'MISS'} (bar >={BAR}; "
                f"mock's own consume/produce {mc:.2f}, ours/mock consume "
                f"{best[('ours', 'consume')]['rate'] / best[('mock', 'consume')]['rate']:.2f})"
            )
            if kafka is not None:
                kp = best[("ours", "produce")]["rate"] / best[("kafka", "produce")]["rate"]
                kc = best[("ours", "consume")]["rate"] / best[("kafka", "consume")]["rate"]
                print(f"  ratio ours/Kafka: produce {kp:.2f}, consume {kc:.2f} (information)")
    finally:
        if kafka is not None:
            kafka.stop()
        tmp.cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
