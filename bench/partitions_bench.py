"""Cost per partition: create, metadata, produce, consume, stop, restart, memory, open files and disk at
1, 100, 1,000 and 10,000 partitions, one broker process per count, in one run.

    python bench/partitions_bench.py [--counts 1,100,1000,10000] [--messages 100000] [--topics-of 1000]
                                     [--restarts N] [--broker-root DIR ...] [--open-files-bound]

For each count N: a fresh data directory and ``python -m broker serve --port 0 --ready-file F``
(default settings: log.flush=interval); the partitions are topics of at most ``--topics-of``
partitions (10 topics x 1,000 for 10,000), created in one CreateTopics request (confluent-kafka's
AdminClient, timed to the last future). Then, with confluent-kafka:

* metadata: ``list_topics()`` of every topic (time);
* one-each: one record into each of the N partitions, time until the last is acknowledged (acks=all);
* produce: ``--messages`` 100-byte records round-robin over the partitions (acks=all, linger.ms=5),
  msgs/s from the first produce() to the flush;
* consume: every record back with one consumer assigned to every partition, msgs/s;
* RSS (VmRSS of the broker), open files (/proc/PID/fd), disk (du of the data directory);
* stop: SIGTERM to exit; restart: process start to the ready file (listening), then stop again;
  shown with its ratio to the first start of the same count (an empty data directory: the process's
  own start-up), and ``--restarts`` of them (the first after the bench's clean stop, each next after
  the previous restart's clean stop), the best shown;
* disk: du (blocks) of the data directory after the clean stop, and per partition in KiB.

With ``--broker-root`` (repeatable) each count is measured for the ``broker`` package of those
checkouts too (e.g. a ``git worktree`` of an earlier commit), one after the other for each count,
and a table is printed per checkout: before/after in one run. With ``--open-files-bound`` each count
is measured twice, one after the other: the broker started under ``ulimit -Sn 1024`` (so its default
``log.max.open.files`` is 512 segment files, closed and re-opened least recently used first), and
with the bound off (``log.max.open.files=1000000``); a table for each, and the ratios bound/off.

Printed as a table, with produce and consume as ratios to this run's 1-partition rates (issue's bar:
produce at 1,000 partitions >= 0.8x the 1-partition rate), under a line with the machine's CPU count
and load average before and after the run. Numbers from a shared machine vary; compare rows of one
run, not runs.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent
VALUE = b"x" * 100


#: ``--open-files-bound``: the soft RLIMIT_NOFILE of the bounded broker (the common shell default)
BOUND_SOFT_LIMIT = 1024


class Variant:
    """A broker to measure: a checkout, extra ``--config`` pairs, a soft RLIMIT_NOFILE to start with."""

    def __init__(self, label: str, root: Path, config: tuple[str, ...] = (), soft_limit: int | None = None):
        self.label, self.root, self.config, self.soft_limit = label, root, config, soft_limit

    def preexec(self) -> None:
        if self.soft_limit is not None:
            _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (self.soft_limit, hard))


class BrokerProcess:
    def __init__(self, data: Path, variant: Variant):
        self.data = data
        self.root = variant.root
        self.variant = variant
        self.proc: subprocess.Popen | None = None
        self.bootstrap = ""

    def start(self) -> float:
        ready = self.data.parent / "ready"
        ready.unlink(missing_ok=True)
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "broker", "serve", "--port", "0", "--data-dir", str(self.data)]
            + ["--ready-file", str(ready), "--log-level", "warning"]
            + [x for kv in self.variant.config for x in ("--config", kv)],
            cwd=self.root,
            env={**os.environ, "PYTHONPATH": str(self.root)},
            preexec_fn=self.variant.preexec,
        )
        while not ready.exists():
            if self.proc.poll() is not None:
                raise SystemExit(f"broker exited with status {self.proc.returncode}")
            time.sleep(0.005)
        elapsed = time.perf_counter() - t0
        self.bootstrap = ready.read_text().split()[0]
        return elapsed

    def stop(self) -> float:
        assert self.proc is not None
        t0 = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(600)
        return time.perf_counter() - t0

    def rss_mb(self) -> float:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def open_files(self) -> int:
        assert self.proc is not None
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))


def topics_for(n: int, per_topic: int) -> list[tuple[str, int]]:
    out, left, i = [], n, 0
    while left > 0:
        out.append((f"p{n}-{i}", min(per_topic, left)))
        left -= per_topic
        i += 1
    return out


def measure(
    n: int, messages: int, per_topic: int, work: Path, restarts_wanted: int, variant: Variant
) -> dict[str, float]:
    data = work / f"data-{n}"
    shutil.rmtree(data, ignore_errors=True)
    broker = BrokerProcess(data, variant)
    row: dict[str, float] = {"partitions": n}
    row["start"] = broker.start()
    try:
        topics = topics_for(n, per_topic)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 300_000})
        t0 = time.perf_counter()
        futures = admin.create_topics([NewTopic(t, p, 1) for t, p in topics], operation_timeout=300)
        for f in futures.values():
            f.result()
        row["create"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        md = admin.list_topics(timeout=120)
        row["metadata"] = time.perf_counter() - t0
        assert sum(len(md.topics[t].partitions) for t, _p in topics) == n
        parts = [(t, p) for t, count in topics for p in range(count)]

        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
        producer.produce(parts[0][0], VALUE, partition=0)  # connect and fetch metadata first
        producer.flush(60)
        t0 = time.perf_counter()
        for t, p in parts:
            producer.produce(t, VALUE, partition=p)
        assert producer.flush(300) == 0
        row["one_each"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        for i in range(messages):
            t, p = parts[i % n]
            while True:
                try:
                    producer.produce(t, VALUE, partition=p)
                    break
                except BufferError:
                    producer.poll(0.001)
        assert producer.flush(600) == 0
        row["produce"] = messages / (time.perf_counter() - t0)
        total = messages + n + 1

        consumer = Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": f"bench-{n}", "enable.auto.commit": False}
        )
        consumer.assign([TopicPartition(t, p, 0) for t, p in parts])
        got = 0
        t0 = time.perf_counter()
        while got < total:
            for m in consumer.consume(10_000, 1.0):
                if not m.error():
                    got += 1
        row["consume"] = got / (time.perf_counter() - t0)
        consumer.close()
        row["rss_mb"] = broker.rss_mb()
        row["open_files"] = broker.open_files()
    finally:
        row["stop"] = broker.stop()
    du = subprocess.run(["du", "-sk", str(data)], capture_output=True, text=True).stdout.split()[0]
    row["disk_mb"] = int(du) / 1024
    restarts = []
    for _ in range(max(1, restarts_wanted)):
        restarts.append(broker.start())
        broker.stop()
    row["restart"] = min(restarts)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--counts", default="1,100,1000,10000")
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--topics-of", type=int, default=1000)
    ap.add_argument("--restarts", type=int, default=1, help="restarts per count (the best is shown)")
    ap.add_argument(
        "--broker-root", action="append", default=[], type=Path, help="also measure this checkout"
    )
    ap.add_argument(
        "--open-files-bound",
        action="store_true",
        help=f"measure each checkout under ulimit -Sn {BOUND_SOFT_LIMIT} and with log.max.open.files off",
    )
    args = ap.parse_args()
    variants = []
    for root in [ROOT, *(r.resolve() for r in args.broker_root)]:
        if args.open_files_bound:
            variants.append(Variant(f"{root}, ulimit -Sn {BOUND_SOFT_LIMIT}", root, (), BOUND_SOFT_LIMIT))
            variants.append(Variant(f"{root}, bound off", root, ("log.max.open.files=1000000",)))
        else:
            variants.append(Variant(str(root), root))
    work = Path(tempfile.mkdtemp(prefix="partitions-bench-"))
    rows: dict[str, list[dict[str, float]]] = {v.label: [] for v in variants}
    load_before = os.getloadavg()
    try:
        for n in (int(c) for c in args.counts.split(",")):
            for v in variants:
                rows[v.label].append(measure(n, args.messages, args.topics_of, work, args.restarts, v))
                print(f"measured {n} partitions ({v.label})", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()
    print(
        f"# {args.messages} records of 100 bytes, acks=all, linger.ms=5 (confluent-kafka), log.flush=interval; "
        f"{os.cpu_count()} CPUs, load average (1/5/15 min) {' / '.join(f'{x:.1f}' for x in load_before)} "
        f"before, {' / '.join(f'{x:.1f}' for x in load_after)} after"
    )
    for v in variants:
        if len(variants) > 1:
            print(f"\n## {v.label}")
        print_table(rows[v.label])
    if args.open_files_bound:
        for bound, off in zip(variants[0::2], variants[1::2], strict=True):
            print(f"\n## {bound.label} / bound off (same run)")
            print("| partitions | one record each | produce msgs/s | consume msgs/s | stop | restart |")
            print("| ---: | ---: | ---: | ---: | ---: | ---: |")
            for a, b in zip(rows[bound.label], rows[off.label], strict=True):
                print(
                    f"| {a['partitions']:,.0f} | {a['one_each'] / b['one_each']:.2f}x "
                    f"| {a['produce'] / b['produce']:.2f}x | {a['consume'] / b['consume']:.2f}x "
                    f"| {a['stop'] / b['stop']:.2f}x | {a['restart'] / b['restart']:.2f}x |"
                )


def print_table(rows: list[dict[str, float]]) -> None:
    base = rows[0]
    print(
        "| partitions | create s | metadata s | one record each s | produce msgs/s (x first row) "
        "| consume msgs/s (x first row) | stop s | start s (empty) | restart s (x start) | RSS MB "
        "| open files | disk MB (KiB/partition) |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(
            f"| {r['partitions']:,.0f} | {r['create']:.2f} | {r['metadata']:.3f} | {r['one_each']:.2f} "
            f"| {r['produce']:,.0f} ({r['produce'] / base['produce']:.2f}x) "
            f"| {r['consume']:,.0f} ({r['consume'] / base['consume']:.2f}x) | {r['stop']:.2f} "
            f"| {r['start']:.2f} | {r['restart']:.2f} ({r['restart'] / r['start']:.2f}x) "
            f"| {r['rss_mb']:.0f} | {r['open_files']:.0f} "
            f"| {r['disk_mb']:.1f} ({r['disk_mb'] * 1024 / r['partitions']:.1f}) |"
        )


if __name__ == "__main__":
    main()
