"""A released Apache Kafka broker as a test peer: single node, KRaft (broker + controller in one JVM).

``scripts/kafka.sh`` (run by ``scripts/setup.sh test``) caches the broker's jars in
``.reference/kafka-broker``; :meth:`RealKafka.available` says whether that cache is there. The
session-scoped ``real_kafka`` fixture in tests/conftest.py starts one broker per pytest session.

    kafka = RealKafka()
    bootstrap = kafka.start(tmp_dir)     # "127.0.0.1:<port>", ephemeral ports, data under tmp_dir
    ...
    kafka.stop()

Start-up: ``kafka.tools.StorageTool format --standalone`` (a fresh cluster id, one KRaft voter),
then ``kafka.Kafka server.properties``; ready once a Metadata request lists this broker (it is
registered and unfenced) and FindCoordinator finds the group coordinator (``__consumer_offsets``
created and loaded) and InitProducerId gives a producer id, within ``start_timeout`` seconds, else RealKafkaError with the log tail.

Test settings (:data:`TEST_SETTINGS`), chosen so that a one-node broker answers like the one-node
pykbroker the tests run beside it, with no waits:

- ``group.initial.rebalance.delay.ms=0``: the first classic JoinGroup completes without the 3 s
  delay meant for a rolling start of many consumers.
- ``offsets.topic.replication.factor=1``, ``transaction.state.log.replication.factor=1``,
  ``transaction.state.log.min.isr=1``, ``share.coordinator.state.topic.replication.factor=1``,
  ``share.coordinator.state.topic.min.isr=1``: the internal topics fit one broker.
- ``offsets.topic.num.partitions=1``, ``transaction.state.log.num.partitions=1``: one coordinator
  partition, created quickly (50 by default).
- ``num.partitions=1``, ``default.replication.factor=1``, ``auto.create.topics.enable=true``:
  Kafka's defaults, written out because the differential tests depend on them.
- ``group.consumer.assignment.interval.ms=0``, ``group.consumer.assignor.offload.enable=false``:
  Kafka 4.3 computes a KIP-848 target assignment at most once a second and off the coordinator
  thread; with these it computes it in the heartbeat that changed the group, as Kafka 3.7-4.2 and
  pykbroker do, so that scripted steps compare the assignments rather than the timing.
- ``log.dirs`` under the test's tmp dir, ``log.segment.bytes`` 16 MiB (1 GiB preallocated index
  files are avoided), ``log.flush.*`` at Kafka's defaults (no fsync per write).
- ``log.cleaner.backoff.ms=500``: the log cleaner looks for a dirty log twice a second, not every
  15 s, so a test of compaction (tests/differential/test_compaction_txn.py) waits for a cleaning
  pass a fraction of a second rather than up to 15 s. It changes only when a pass runs: active
  segments are never cleaned, so topics without ``segment.ms``/``segment.bytes`` small enough to roll
  read the same.
- ``log.retention.check.interval.ms`` and ``log.initial.task.delay.ms`` one day: the broker lives
  for the whole session, and many tests write records with fixed CreateTimes from 2023 (so that
  fetched batches are byte-identical); every 5 minutes (the default) Kafka deletes those as older
  than the 7-day retention, active segment included, and a later read in the same test finds the
  partition empty, its log start at its end. The first check comes ``log.initial.task.delay.ms``
  (30 s) after the start, not an interval: a test that wrote such records in the broker's first
  30 s lost them then (tests/spark/test_connector_vs_real_kafka.py, run alone). The delay also
  postpones Kafka's periodic flusher and checkpoint writers and the removal of deleted topics'
  files, none of which a test reads. Tests of time retention set their own topic's
  ``retention.ms`` and do not wait for it.
- Heap ``-Xmx384m``, serial GC, C1 only: small and fast to start on a loaded 2-core machine.
- Log4j2 at WARN into ``<tmp_dir>/logs/server.log`` (scripts/kafka-broker/log4j2.properties).
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import time
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = REPO_ROOT / ".reference" / "kafka-broker"
LOG4J_CONFIG = REPO_ROOT / "scripts" / "kafka-broker" / "log4j2.properties"
NODE_ID = 1

TEST_SETTINGS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "true",
    "log.segment.bytes": str(16 * 1024 * 1024),
    "log.retention.check.interval.ms": str(24 * 3600 * 1000),
    "log.initial.task.delay.ms": str(24 * 3600 * 1000),
    "log.cleaner.backoff.ms": "500",
    "group.consumer.assignment.interval.ms": "0",
    "group.consumer.assignor.offload.enable": "false",
}

JVM_OPTS = ["-Xmx384m", "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k"]


class RealKafkaError(RuntimeError):
    """The reference broker could not be formatted or did not come up."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def random_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (as kafka-storage makes);
    never one that starts with "-" (Kafka's Uuid.randomUuid avoids those too: kafka-storage's
    argument parser would take it for an option)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


class RealKafka:
    """One Apache Kafka broker process (see the module docstring)."""

    def __init__(
        self, cache: Path = CACHE_DIR, overrides: dict[str, str] | None = None, start_timeout: float = 60.0
    ) -> None:
        self.cache = cache
        self.overrides = dict(overrides or {})
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.controller_port = 0
        self.cluster_id = ""
        self.dir: Path | None = None

    # --------------------------------------------------------------------------------- queries

    @classmethod
    def available(cls, cache: Path = CACHE_DIR) -> bool:
        """Whether scripts/kafka.sh has filled the cache."""
        return any(cache.glob(".done-*")) and any(cache.glob("kafka_2.13-*.jar"))

    @classmethod
    def version(cls, cache: Path = CACHE_DIR) -> str:
        return (cache / "VERSION").read_text().strip()

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def node_id(self) -> int:
        return NODE_ID

    def log_tail(self, lines: int = 40) -> str:
        if self.dir is None:
            return ""
        parts = []
        for name in ("logs/server.log", "stdout.txt"):
            p = self.dir / name
            if p.exists():
                parts.append(f"--- {name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(parts)

    # ------------------------------------------------------------------------------- lifecycle

    def _java(self, main: str, *args: str) -> list[str]:
        assert self.dir is not None
        return [
            "java",
            *JVM_OPTS,
            f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
            f"-Dkafka.logs.dir={self.dir / 'logs'}",
            "-cp",
            f"{self.cache}/*",
            main,
            *args,
        ]

    def _write_properties(self) -> Path:
        assert self.dir is not None
        props = {
            "process.roles": "broker,controller",
            "node.id": str(NODE_ID),
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.dir / "data"),
            **TEST_SETTINGS,
            **self.overrides,
        }
        path = self.dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return path

    def start(self, tmp_dir: Path) -> str:
        """Format storage under ``tmp_dir`` and start the broker; returns the bootstrap address."""
        if not self.available(self.cache):
            raise RealKafkaError(f"no Kafka broker in {self.cache}: run scripts/kafka.sh")
        if self.proc is not None:
            raise RealKafkaError("already started")
        self.dir = Path(tmp_dir)
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        self.port, self.controller_port = _free_port(), _free_port()
        while self.controller_port == self.port:
            self.controller_port = _free_port()
        self.cluster_id = random_cluster_id()
        props = self._write_properties()
        fmt = subprocess.run(
            self._java(
                "kafka.tools.StorageTool", "format", "--standalone", "-t", self.cluster_id, "-c", str(props)
            ),
            capture_output=True,
            text=True,
            timeout=self.start_timeout,
        )
        if fmt.returncode != 0:
            raise RealKafkaError(f"kafka-storage format exited {fmt.returncode}:\n{fmt.stdout}\n{fmt.stderr}")
        out = open(self.dir / "stdout.txt", "wb")
        try:
            self.proc = subprocess.Popen(
                self._java("kafka.Kafka", str(props)),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            out.close()
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self.bootstrap

    def _wait_ready(self) -> None:
        from broker.protocol.generated.find_coordinator import FindCoordinatorRequest
        from broker.protocol.generated.init_producer_id import InitProducerIdRequest
        from broker.protocol.generated.metadata import MetadataRequest
        from tests.support.wire import WireClient

        deadline = time.monotonic() + self.start_timeout
        last: object = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RealKafkaError(f"Kafka exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with WireClient(self.port, timeout=5.0) as c:
                    resp = c.call(3, 12, MetadataRequest(topics=[], allow_auto_topic_creation=False))
                if any(b.node_id == NODE_ID for b in resp.brokers) and resp.controller_id == NODE_ID:
                    break
                last = resp
            except (OSError, ConnectionError, AssertionError) as e:
                last = e
            time.sleep(0.25)
        else:
            raise RealKafkaError(
                f"Kafka did not come up within {self.start_timeout:.0f} s (last: {last!r}):\n{self.log_tail()}"
            )
        # The group coordinator: the first FindCoordinator creates __consumer_offsets and answers
        # COORDINATOR_NOT_AVAILABLE until its partition is loaded; tests should not see that.
        while time.monotonic() < deadline:
            with WireClient(self.port, timeout=5.0) as c:
                resp = c.call(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=["warm-up"]))
            if resp.coordinators and resp.coordinators[0].error_code == 0:
                break
            last = resp
            time.sleep(0.1)
        else:
            raise RealKafkaError(
                f"Kafka's group coordinator did not load within {self.start_timeout:.0f} s: {last!r}"
            )
        # Producer ids: the first InitProducerId answers COORDINATOR_LOAD_IN_PROGRESS until the broker
        # has its first block of ids from the controller.
        while time.monotonic() < deadline:
            with WireClient(self.port, timeout=5.0) as c:
                resp = c.call(22, 4, InitProducerIdRequest(None, 60000, -1, -1))
            if resp.error_code == 0:
                return
            last = resp
            time.sleep(0.1)
        raise RealKafkaError(f"Kafka gave no producer id within {self.start_timeout:.0f} s: {last!r}")

    def stop(self) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after 15 s). Idempotent."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=10)

    def __enter__(self) -> RealKafka:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
