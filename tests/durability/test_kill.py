"""Crash durability: SIGKILL the broker at random moments while a producer writes, then check that every
acknowledged record survived, at the offset it was acknowledged at.

The broker runs as a separate process (``python -m broker serve --config log.flush=interval`` with
``log.flush.interval.ms=50``, ten times the default, so that most kills land inside a group-commit
window; small segments so that crashes also land around segment rolls) on one data directory and
one port. (``log.flush=always`` is killed 50 times under mixed load with consumer groups in
test_kill_groups.py, which reuses this file's helpers.) A
confluent-kafka producer in the test process (acks=all) writes continuously, at a fixed rate, to a
2-partition topic (once more with 1,000 partitions, so that each group commit fsyncs many files and
each restart recovers them all); record ``seq`` goes to partition ``seq % 2`` and its value starts with ``seq``
(then random padding, so batches have varied sizes). The broker is killed with SIGKILL 20-300 ms
after it has acknowledged its first record since (re)starting (the client needs 0.1-1 s to reconnect
and get going again, so counting from the moment it listens would mostly kill an idle broker), and
restarted at once; the producer keeps producing throughout, and
retries whatever was in flight. After the last restart the producer is flushed, everything is read
back from the beginning with kafka-python (a different client, CRCs checked), the broker is stopped
cleanly and restarted once more, and the log must read back identically.

Checked in both producer modes:

* each partition holds offsets 0..end-1 without holes, and every record is one we produced (value
  byte-identical, in the partition it was sent to);
* every produced record was acknowledged (infinite retries, long timeout: the producer never gives
  up), and every acknowledged record is at its acknowledged (partition, offset);
* the broker's logs mention no corruption: the only recovery repairs allowed are truncations of a
  torn tail (a prefix of a write: "too few bytes" or "runs past the end"), and no errors at all.

``idempotent`` (enable.idempotence=true, 5 in flight): the broker must deduplicate the retries of
batches it wrote before a kill from producer state rebuilt from the log, so the log holds every
record exactly once, in produce order per partition. This is the precise check.

``plain`` (enable.idempotence=false, 1 in flight): a batch written before a kill but not
acknowledged is written again by the retry, so a record may legitimately appear more than once.
Asserted: the acknowledged copy is at the acknowledged offset, any other copy lies at a lower offset
in the same partition (a retry only ever follows the attempt it repeats), and the acknowledged copies
are in produce order (one request in flight, so retries cannot reorder).

What SIGKILL cannot show: it kills the process, not the machine, so the page cache survives and what
``write()`` handed to the kernel is read back after the restart whether or not it was fsynced. The
test proves acknowledgements never run ahead of the log and that recovery, offsets and the
producer-state rebuild are consistent after a crash at any moment; it cannot tell log.flush=always
from never (test_torn_tail.py injects the tails a power loss would leave).

``log.flush=interval`` acknowledges only after the group fsync that covers a write, so no
acknowledged record may be missing here either: the records a crash can take back are the
unacknowledged ones of the last window (test_power_loss.py cuts the files back to what was fsynced).

``DURABILITY_SEED`` fixes the seed (printed; random when unset), ``DURABILITY_KILLS`` the number of
kills per run (default 12).
"""

from __future__ import annotations

import logging
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from statistics import median

import pytest
from confluent_kafka import KafkaError, Producer

from tests.support.seeds import tell

TOPIC = "durable"
PARTITIONS = 2
KILLS = int(os.environ.get("DURABILITY_KILLS", "12"))
INTERVAL = {"log.flush": "interval", "log.flush.interval.ms": "50"}
KILL_DELAY = (0.020, 0.300)  # seconds from the first acknowledgement after a (re)start to SIGKILL
RATE = 10_000  # records/s offered by the producer
MAX_OUTSTANDING = 5_000  # produced but not yet reported; producing pauses above this
SEGMENT_BYTES = 256 * 1024
SEQ_DIGITS = 10

log = logging.getLogger(__name__)

# A recovery warning of segment.py: "<file>: truncating N bytes of torn or corrupt tail at byte P (reason)".
TRUNCATION = re.compile(r"truncating (\d+) bytes of torn or corrupt tail at byte (\d+) \((.*)\)\s*$")
# A process kill leaves a prefix of a write behind, never changed bytes: only these reasons are torn tails.
TORN_REASONS = ("trailing bytes are too few for a batch", "runs past the end of the file")
DROPPED = re.compile(r"dropped \d+ bytes after offset \d+ during recovery\s*$")
SUSPICIOUS = re.compile(
    r"corrupt|crc|magic|backwards|unreadable|traceback|exception|\bERROR\b|CRITICAL|failed", re.I
)
#: a topic or member id (22 characters of base64url) is left out before SUSPICIOUS looks at a line:
#: a random id may spell "crc" or "failed"
RANDOM_ID = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{22}(?![A-Za-z0-9_-])")


def _seed() -> int:
    raw = os.environ.get("DURABILITY_SEED")
    return int(raw) if raw else random.SystemRandom().randrange(2**32)


def _port_below_ephemeral_range() -> int:
    """A free port below the kernel's ephemeral range: while the broker is down, a client's connect
    to it could otherwise be given that very port as its source port (a TCP self-connect) and keep
    the broker from binding it again."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(min(20000, low - 1000), low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range")


class BrokerProcess:
    """``python -m broker serve`` on a fixed data dir and port; each start logs to its own file."""

    def __init__(self, data_dir: Path, log_dir: Path, configs: dict[str, str] | None = None):
        self.data_dir = data_dir
        self.log_dir = log_dir
        self.configs = {
            "log.flush": "always",
            "num.partitions": str(PARTITIONS),
            "log.segment.bytes": str(SEGMENT_BYTES),
            **(configs or {}),
        }
        self.port = _port_below_ephemeral_range()
        self.proc: subprocess.Popen | None = None
        self.logs: list[Path] = []

    def spawn(self) -> None:
        path = self.log_dir / f"broker-{len(self.logs):03d}.log"
        self.logs.append(path)
        with open(path, "wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "broker",
                    "serve",
                    "--port",
                    str(self.port),
                    "--data-dir",
                    str(self.data_dir),
                    *(arg for k, v in self.configs.items() for arg in ("--config", f"{k}={v}")),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def listening(self) -> bool:
        assert self.proc is not None
        rc = self.proc.poll()
        if rc is not None:
            raise AssertionError(f"broker exited with status {rc}:\n{self.logs[-1].read_text()[-3000:]}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            return True
        except OSError:
            return False

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(20)

    def cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


class Load:
    """The producer: record ``seq`` goes to partition ``seq % partitions``; values start with ``seq``."""

    def __init__(
        self,
        bootstrap: str,
        idempotent: bool,
        rng: random.Random,
        topic: str = TOPIC,
        rate: int = RATE,
        partitions: int = PARTITIONS,
    ):
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.rng = rng
        self.values: list[bytes] = []
        self.acks: dict[int, tuple[int, int]] = {}
        self.failed: dict[int, str] = {}
        self.fatal: list[str] = []
        self.errors: Counter[str] = Counter()
        self._due = time.monotonic()
        conf = {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": idempotent,
            "linger.ms": 2,
            "compression.type": "none",
            "message.timeout.ms": 120_000,
            "reconnect.backoff.ms": 10,
            "reconnect.backoff.max.ms": 100,
            "retry.backoff.ms": 10,
            "retry.backoff.max.ms": 100,
            "error_cb": self._error,
            "logger": logging.getLogger("durability.rdkafka"),
        }
        if not idempotent:
            conf["max.in.flight.requests.per.connection"] = 1
        self.producer = Producer(conf)

    def _error(self, err: KafkaError) -> None:
        self.errors[err.name()] += 1
        if err.fatal():
            self.fatal.append(str(err))

    def _delivered(self, err: KafkaError | None, msg) -> None:
        seq = int(msg.value()[:SEQ_DIGITS])
        if err is None:
            self.acks[seq] = (msg.partition(), msg.offset())
        else:
            self.failed[seq] = str(err)

    @property
    def outstanding(self) -> int:
        return len(self.values) - len(self.acks) - len(self.failed)

    def pump(self, seconds: float) -> None:
        """Produce at RATE records/s (fewer while MAX_OUTSTANDING are unreported) for ``seconds``."""
        end = time.monotonic() + seconds
        while True:
            now = time.monotonic()
            if now >= end:
                break
            if now - self._due > 0.05:  # behind (blocked, or not called): no burst beyond 50 ms' worth
                self._due = now - 0.05
            n = min(int((now - self._due) * self.rate), MAX_OUTSTANDING - self.outstanding, 200)
            if n <= 0:
                self.producer.poll(min(0.002, end - now))
                continue
            self._due += n / self.rate
            for _ in range(n):
                seq = len(self.values)
                value = b"%0*d:" % (SEQ_DIGITS, seq) + self.rng.randbytes(self.rng.randrange(0, 200))
                self.values.append(value)
                self.producer.produce(
                    self.topic, value, partition=seq % self.partitions, on_delivery=self._delivered
                )
            self.producer.poll(0)
            assert not self.fatal, f"fatal producer error: {self.fatal}"

    def finish(self, timeout: float) -> None:
        left = self.producer.flush(timeout)
        assert not self.fatal, f"fatal producer error: {self.fatal}"
        assert left == 0 and self.outstanding == 0, (
            f"{left} records still queued, {self.outstanding} unreported after {timeout} s"
        )


def read_back(
    bootstrap: str, topic: str = TOPIC, partitions: int = PARTITIONS
) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of every partition, (offset, value), from the log start to the end offset."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        check_crcs=True,
        max_partition_fetch_bytes=4 << 20,
        fetch_max_bytes=16 << 20,
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        start = consumer.beginning_offsets(tps)
        end = consumer.end_offsets(tps)
        assert all(start[tp] == 0 for tp in tps), f"log start offsets moved: {start}"
        out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < end[tp] for tp in tps):
            assert time.monotonic() < deadline, "reading back took more than 60 s"
            for tp, msgs in consumer.poll(timeout_ms=500, max_records=20_000).items():
                out[tp.partition].extend((m.offset, m.value) for m in msgs)
        for tp in tps:
            assert len(out[tp.partition]) == end[tp], f"{tp}: read {len(out[tp.partition])} of {end[tp]}"
        return out
    finally:
        consumer.close()


def check_broker_logs(paths: list[Path]) -> list[str]:
    """Fail on any corruption other than a torn tail, and on any error; returns the truncation lines."""
    truncations = []
    bad = []
    for path in paths:
        for line in path.read_text(errors="replace").splitlines():
            m = TRUNCATION.search(line)
            if m:
                if any(r in m.group(3) for r in TORN_REASONS):
                    truncations.append(f"{path.name}: {line}")
                else:
                    bad.append(f"{path.name}: {line}")
            elif DROPPED.search(line):
                continue
            elif SUSPICIOUS.search(RANDOM_ID.sub("<id>", line)):
                bad.append(f"{path.name}: {line}")
    assert not bad, "broker logs report corruption or errors:\n" + "\n".join(bad[:30])
    return truncations


def check_log(load: Load, log_: dict[int, list[tuple[int, bytes]]], idempotent: bool) -> dict[str, int]:
    values = load.values
    partitions = load.partitions
    assert not load.failed, f"{len(load.failed)} records failed: {list(load.failed.items())[:5]}"
    assert len(load.acks) == len(values)
    where: dict[int, list[tuple[int, int]]] = {}  # seq -> [(partition, offset)] of its copies
    for p, recs in log_.items():
        offsets = [o for o, _v in recs]
        assert offsets == list(range(len(recs))), f"partition {p}: offsets are not 0..{len(recs) - 1}"
        for offset, value in recs:
            seq = int(value[:SEQ_DIGITS])
            assert seq < len(values) and value == values[seq], f"{p}@{offset}: a record we never produced"
            assert seq % partitions == p, (
                f"{p}@{offset}: record {seq} belongs in partition {seq % partitions}"
            )
            where.setdefault(seq, []).append((p, offset))
    for seq, (p, offset) in load.acks.items():
        assert p == seq % partitions, f"record {seq} acknowledged on partition {p}"
        assert offset < len(log_[p]) and log_[p][offset][1] == values[seq], (
            f"acknowledged record {seq} is missing from {p}@{offset}"
            + (f"; it is at {where[seq]}" if seq in where else "; it is nowhere in the log")
        )
    for p in range(partitions):
        acked = sorted((off, seq) for seq, (pp, off) in load.acks.items() if pp == p)
        seqs = [seq for _off, seq in acked]
        assert seqs == sorted(seqs), f"partition {p}: acknowledged records are out of produce order"
    dups = {seq: copies for seq, copies in where.items() if len(copies) > 1}
    if idempotent:
        assert not dups, f"{len(dups)} records written more than once, e.g. {list(dups.items())[:5]}"
        for p, recs in log_.items():
            seqs = [int(v[:SEQ_DIGITS]) for _o, v in recs]
            assert seqs == sorted(seqs), f"partition {p}: records are out of produce order"
    else:
        for seq, copies in dups.items():
            acked = load.acks[seq]
            extra = [c for c in copies if c != acked]
            assert all(o < acked[1] for _p, o in extra), (
                f"record {seq}, acknowledged at {acked}, has a copy after it: {copies}"
            )
    return {"duplicated records": len(dups), "extra copies": sum(len(c) - 1 for c in dups.values())}


@pytest.mark.parametrize(
    ("idempotent", "partitions", "kills"),
    [(True, PARTITIONS, KILLS), (False, PARTITIONS, KILLS), (True, 1000, max(1, KILLS // 3))],
    ids=["idempotent", "plain", "idempotent-1000-partitions"],
)
def test_acknowledged_records_survive_sigkill_with_interval_flush(
    request, tmp_path, idempotent, partitions, kills
):
    """With 1,000 partitions every group commit fsyncs many files, and a restart recovers them all."""
    seed = _seed()
    mode = "idempotent" if idempotent else "plain"
    print(f"\nDURABILITY_SEED={seed} ({mode}, {partitions} partitions, log.flush=interval, {kills} kills)")
    rng = random.Random(seed)
    (tmp_path / "logs").mkdir()
    broker = BrokerProcess(
        tmp_path / "data", tmp_path / "logs", {**INTERVAL, "num.partitions": str(partitions)}
    )
    started = time.monotonic()
    try:
        load = Load(broker.bootstrap, idempotent, rng, partitions=partitions)
        startup: list[float] = []
        acked_per_life: list[int] = []
        resume: list[float] = []  # listening -> first acknowledgement
        in_flight: list[int] = []  # records produced but unreported at each kill
        for life in range(kills + 1):
            broker.spawn()
            t0 = time.monotonic()
            while not broker.listening():
                assert time.monotonic() - t0 < 30, "broker did not start listening within 30 s"
                load.pump(0.005)
            startup.append(time.monotonic() - t0)
            if life == kills:
                break
            # the kill delay counts from this broker's first acknowledgement: the client takes 0.1-1 s
            # to reconnect, and a kill before that would find the broker idle
            before = len(load.acks)
            t0 = time.monotonic()
            while len(load.acks) == before:
                assert time.monotonic() - t0 < 20, "the producer did not resume within 20 s"
                load.pump(0.002)
            resume.append(time.monotonic() - t0)
            load.pump(rng.uniform(*KILL_DELAY))
            in_flight.append(load.outstanding)
            broker.kill()
            acked_per_life.append(len(load.acks) - before)
        load.finish(60)
        crash_time = time.monotonic() - started
        log_ = read_back(broker.bootstrap, partitions=partitions)
        stats = check_log(load, log_, idempotent)

        # a clean stop and start must change nothing (recovery points, indexes and snapshots trusted)
        assert broker.terminate() == 0, broker.logs[-1].read_text()[-3000:]
        broker.spawn()
        t0 = time.monotonic()
        while not broker.listening():
            assert time.monotonic() - t0 < 30, "broker did not start listening within 30 s"
            time.sleep(0.01)
        assert read_back(broker.bootstrap, partitions=partitions) == log_, (
            "the log changed across a clean restart"
        )
        assert broker.terminate() == 0

        truncations = check_broker_logs(broker.logs)
        print(
            f"{mode}, {partitions} partitions: seed {seed}, {kills} kills in {crash_time:.1f} s, {len(load.values)} records "
            f"produced and acknowledged, partition sizes {[len(r) for r in log_.values()][:10]}, {stats}, "
            f"acks per life min {min(acked_per_life)} / median {median(acked_per_life)}, "
            f"unreported records at the kills min {min(in_flight)} / median {median(in_flight)}, "
            f"start-up median {median(startup) * 1000:.0f} ms, "
            f"producer resumed after median {median(resume) * 1000:.0f} / max {max(resume) * 1000:.0f} ms, "
            f"torn-tail truncations {len(truncations)}, producer errors {dict(load.errors)}"
        )
        for line in truncations:
            print("  " + line)
    except BaseException:
        tell(f"{request.node.nodeid} failed with DURABILITY_SEED={seed}; broker logs in {tmp_path / 'logs'}")
        raise
    finally:
        broker.cleanup()
