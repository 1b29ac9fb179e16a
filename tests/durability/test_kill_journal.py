"""The group-commit journal (``log.flush.journal``) across SIGKILL, with the segments' unsynced tails
lost as a power loss would lose them.

The broker runs as a process (``log.flush=interval``) with the journal on and the background sync
of the segments set far beyond the test (``log.flush.journal.sync.ms``) and every group commit
journaled (``log.flush.journal.min.partitions=1``), so every acknowledgement rests on the journal's
fdatasync alone. An idempotent confluent-kafka producer writes into 1,000
partitions and a consumer commits offsets of a group (``__consumer_offsets`` goes through the same
group commit); the broker is SIGKILLed under that load. Then each partition's ``.log`` file is cut
to a random length at or above what the recovery checkpoint says is on disk (a power loss keeps
what was synced plus perhaps a prefix of the rest; a SIGKILL alone would keep everything in the
page cache), so what the restart finds of every acknowledged record beyond that is the journal's
replay. Two lives: the second kill comes after a replay has synced the segments, and cuts only above
the recovery points that replay wrote. Every acknowledged record must be read back at the offset it
was acknowledged with, no record twice, and every acknowledged offset commit must be there.
"""

from __future__ import annotations

import random
import struct
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from tests.support.seeds import tell

from .test_kill import INTERVAL, BrokerProcess, Load, _seed, check_log, read_back

TOPIC = "journaled"
PARTITIONS = 1000
GROUP = "journal-group"
COMMITTED_PARTITIONS = 20
CHECKPOINT = "recovery-point-offset-checkpoint"
JOURNAL = {
    **INTERVAL,
    "num.partitions": str(PARTITIONS),
    "log.flush.journal": "true",
    # every group commit journals, however few partitions it covers (a commit of fewer than the
    # default 32 fsyncs its segments, which this test's cuts above the checkpoint could not model)
    "log.flush.journal.min.partitions": "1",
    "log.flush.journal.sync.ms": "3600000",
    "log.flush.journal.bytes": str(1 << 40),
}
#: base offset (8), length (4), ..., last offset delta at byte 23
BATCH = struct.Struct(">qi")


def recovery_points(data: Path) -> dict[str, int]:
    """Partition directory name -> the recovery point the checkpoint claims on disk (none before the
    broker first wrote it: a kill within its first seconds leaves nothing claimed)."""
    path = data / CHECKPOINT
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()[2:]
    return {f"{t}-{p}": int(o) for t, p, o in (line.split() for line in lines)}


def position_of(content: bytes, offset: int) -> int:
    """The byte position where the batches at or above ``offset`` start (batch headers walked)."""
    pos = 0
    while pos + 61 <= len(content):
        base, length = BATCH.unpack_from(content, pos)
        last = base + struct.unpack_from(">i", content, pos + 23)[0]
        if last >= offset:
            return pos
        pos += length + 12
    return min(pos, len(content))


def lose_unsynced_tails(data: Path, rng: random.Random) -> tuple[int, int]:
    """Cut every partition's last ``.log`` file to a random length at or above its recovery point's
    position; returns (files cut, bytes dropped)."""
    points = recovery_points(data)
    files = dropped = 0
    for d in data.iterdir():
        if not d.is_dir():
            continue
        logs = sorted(d.glob("*.log"))
        if not logs:
            continue
        last = logs[-1]
        content = last.read_bytes()
        keep = position_of(content, points.get(d.name, 0))  # (not listed yet: nothing synced)
        cut = rng.randrange(keep, len(content) + 1)
        if cut < len(content):
            last.write_bytes(content[:cut])
            files += 1
            dropped += len(content) - cut
    return files, dropped


class Committer:
    """Commits offsets of GROUP on a few partitions, synchronously: each returned commit is acked."""

    def __init__(self, bootstrap: str):
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False}
        )
        self.acked: dict[int, int] = {}
        self.n = 0

    def commit(self) -> None:
        self.n += 1
        tps = [TopicPartition(TOPIC, p, self.n * 10 + p) for p in range(COMMITTED_PARTITIONS)]
        try:
            self.consumer.commit(offsets=tps, asynchronous=False)
        except Exception:
            return  # not acknowledged (the broker is down or restarting)
        for tp in tps:
            self.acked[tp.partition] = tp.offset

    def committed(self) -> dict[int, int]:
        tps = [TopicPartition(TOPIC, p) for p in range(COMMITTED_PARTITIONS)]
        return {tp.partition: tp.offset for tp in self.consumer.committed(tps, timeout=60)}

    def close(self) -> None:
        self.consumer.close()


def _start(broker: BrokerProcess, load: Load | None) -> float:
    broker.spawn()
    t0 = time.monotonic()
    while not broker.listening():
        assert time.monotonic() - t0 < 60, "broker did not start listening within 60 s"
        if load is not None:
            load.pump(0.005)
        else:
            time.sleep(0.01)
    return time.monotonic() - t0


def test_acknowledged_records_and_commits_survive_sigkill_and_lost_segment_tails(request, tmp_path):
    seed = _seed()
    print(f"\nDURABILITY_SEED={seed} (journal, {PARTITIONS} partitions, segment tails cut after SIGKILL)")
    rng = random.Random(seed)
    (tmp_path / "logs").mkdir()
    data = tmp_path / "data"
    broker = BrokerProcess(data, tmp_path / "logs", JOURNAL)
    broker.configs["log.segment.bytes"] = str(1 << 30)  # (no roll: a roll fsyncs the segment)
    try:
        load = Load(broker.bootstrap, True, rng, topic=TOPIC, partitions=PARTITIONS)
        _start(broker, load)
        committer = Committer(broker.bootstrap)
        cuts = []
        for _life in range(2):
            before = len(load.acks)
            t0 = time.monotonic()
            while len(load.acks) < before + 2000:
                assert time.monotonic() - t0 < 60, "the producer did not get 2,000 acknowledgements in 60 s"
                load.pump(0.05)
                committer.commit()
            load.pump(rng.uniform(0.02, 0.3))
            broker.kill()
            cuts.append(lose_unsynced_tails(data, rng))
            _start(broker, load)
        assert cuts[0][0] > 0, "nothing was cut: the test would not exercise the journal"
        load.finish(120)
        log_ = read_back(broker.bootstrap, topic=TOPIC, partitions=PARTITIONS)
        stats = check_log(load, log_, True)
        committed = committer.committed()
        for p, offset in committer.acked.items():
            assert committed[p] >= offset, (
                f"acknowledged commit {offset} of partition {p} lost: {committed[p]}"
            )
        committer.close()
        assert broker.terminate() == 0, broker.logs[-1].read_text()[-3000:]
        replays = [
            line
            for path in broker.logs
            for line in path.read_text().splitlines()
            if "journal replay:" in line
        ]
        print(
            f"seed {seed}: {len(load.values)} records acknowledged, {len(committer.acked)} partitions' commits, "
            f"cut (files, bytes) per kill {cuts}, {stats}"
        )
        for line in replays:
            print("  " + line)
        assert len(replays) == 2, "each restart after a kill replays the journal"
    except BaseException:
        tell(f"{request.node.nodeid} failed with DURABILITY_SEED={seed}; broker logs in {tmp_path / 'logs'}")
        raise
    finally:
        broker.cleanup()
