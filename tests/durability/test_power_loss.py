"""Power loss, simulated: what survives a machine crash is what was fsynced (plus, perhaps, a prefix of
what was not). The broker runs in-process with a FileOps (``broker.log.segment``) that records, for
every log file, the size it had when an fsync of it began and then succeeded; at random moments
under load (an idempotent producer, acks=all, and offset commits) the test builds a crash image of
the data directory -- every ``.log`` file cut to its fsynced size, plus a random prefix of the
unsynced rest (a torn tail) -- starts a second broker on the image and checks that every record
acknowledged before the image was taken is there at its offset, and every acknowledged offset
commit too.

For ``log.flush=always`` and ``log.flush=interval`` (``log.flush.interval.ms=20``) this is the
promise that the loss window holds no acknowledged write: ``interval`` acknowledges only after the
group fsync that covers a write, so a power loss can take back only the writes of the current
window, none of which was acknowledged. (``never`` makes no such promise and is not tested here.)

Order of the snapshot: the recovery checkpoint is copied first, then the acknowledgements are read,
then the files, then the fsynced sizes: everything acknowledged (or checkpointed) before was fsynced
before, so it is inside the image. ``DURABILITY_SEED`` fixes the seed (printed).
"""

from __future__ import annotations

import os
import random
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from broker.log.records import iter_records
from broker.log.segment import FileOps
from broker.protocol.generated.fetch import FetchPartition, FetchRequest, FetchTopic
from broker.protocol.generated.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.generated.offset_fetch import OffsetFetchRequest
from broker.testing import BrokerThread, running_broker
from tests.support.wire import WireClient

from .test_kill import _seed

TOPIC = "powerless"
PARTITIONS = 2
IMAGES = 6
FETCH, OFFSET_COMMIT, OFFSET_FETCH = 1, 8, 9
CHECKPOINT = "recovery-point-offset-checkpoint"


class SyncTracker(FileOps):
    """Records the size each log file had when an fsync of it began, once that fsync succeeded."""

    def __init__(self) -> None:
        self.synced: dict[str, int] = {}
        self.lock = threading.Lock()

    def fsync(self, fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        size = os.fstat(fd).st_size
        super().fsync(fd)
        with self.lock:
            self.synced[path] = max(self.synced.get(path, 0), size)

    def truncate(self, fd: int, size: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        super().truncate(fd, size)
        with self.lock:
            if path in self.synced:
                self.synced[path] = min(self.synced[path], size)

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return dict(self.synced)


def crash_image(
    data: Path, image: Path, tracker: SyncTracker, rng: random.Random, checkpoint: bytes | None
) -> int:
    """Build the image; returns the number of unsynced bytes that were dropped.

    The broker keeps running while the image is built, so the fsynced sizes are read after the files
    (a size recorded later is only larger). Read before, they could be older than a file's content:
    a segment rolled meanwhile (fsynced whole, then the next one created) would be cut to its older
    synced size beside its successor, a state no power loss can leave, since a roll fsyncs the
    segment before the next one exists.
    """
    dropped = 0
    shutil.rmtree(image, ignore_errors=True)
    image.mkdir()
    logs: list[tuple[Path, Path, bytes]] = []

    def copy(src: Path, dst: Path) -> None:
        try:
            shutil.copy2(src, dst)
        except FileNotFoundError:
            pass  # a temporary file the running broker renamed or removed meanwhile

    for entry in data.iterdir():
        if entry.is_file() and entry.name != CHECKPOINT:
            copy(entry, image / entry.name)
        elif entry.is_dir():
            (image / entry.name).mkdir()
            for f in entry.iterdir():
                if f.suffix != ".log":
                    copy(f, image / entry.name / f.name)
                    continue
                try:
                    logs.append((f, image / entry.name / f.name, f.read_bytes()))
                except FileNotFoundError:
                    continue  # a segment deleted by retention or compaction meanwhile
    synced = tracker.snapshot()
    for src, dst, content in logs:
        keep = min(synced.get(str(src), 0), len(content))
        torn = rng.randrange(0, len(content) - keep + 1)
        dst.write_bytes(content[: keep + torn])
        dropped += len(content) - keep - torn
    if checkpoint is not None:
        (image / CHECKPOINT).write_bytes(checkpoint)
    return dropped


def fetch_all(port: int) -> dict[int, dict[int, bytes]]:
    out: dict[int, dict[int, bytes]] = {}
    with WireClient(port, timeout=10) as c:
        for p in range(PARTITIONS):
            got: dict[int, bytes] = {}
            while True:
                part = FetchPartition(p, -1, len(got), -1, -1, 4 << 20)
                req = FetchRequest(
                    max_wait_ms=0,
                    min_bytes=1,
                    max_bytes=8 << 20,
                    topics=[FetchTopic(TOPIC, partitions=[part])],
                )
                r = c.call(FETCH, 12, req).responses[0].partitions[0]
                assert r.error_code == 0, r
                new = {o: v for o, _ts, _k, v, _h, _i in iter_records(r.records or b"") if o >= len(got)}
                if not new:
                    break
                got.update(new)
            out[p] = got
    return out


def commit(port: int, offsets: dict[int, int]) -> bool:
    parts = [OffsetCommitRequestPartition(p, o) for p, o in offsets.items()]
    req = OffsetCommitRequest("g", -1, "", None, -1, [OffsetCommitRequestTopic(TOPIC, partitions=parts)])
    with WireClient(port, timeout=10) as c:
        r = c.call(OFFSET_COMMIT, 2, req)
    return all(p.error_code == 0 for p in r.topics[0].partitions)


def committed(port: int) -> dict[int, int]:
    with WireClient(port, timeout=10) as c:
        r = c.call(OFFSET_FETCH, 2, OffsetFetchRequest("g", None))
    return {p.partition_index: p.committed_offset for t in r.topics if t.name == TOPIC for p in t.partitions}


@pytest.mark.parametrize("flush", ["always", "interval"])
def test_acknowledged_writes_survive_a_simulated_power_loss(tmp_path, flush):
    seed = _seed()
    print(f"\nDURABILITY_SEED={seed} (log.flush={flush}, {IMAGES} power losses)")
    rng = random.Random(seed)
    tracker = SyncTracker()
    config = {
        "log.flush": flush,
        "log.flush.interval.ms": "20",
        "log.segment.bytes": str(64 << 10),
        "num.partitions": str(PARTITIONS),
    }
    bt = BrokerThread(tmp_path / "data", config, file_ops=tracker).start()
    acks: dict[int, tuple[int, int]] = {}  # seq -> (partition, offset)
    values: list[bytes] = []
    acked_commits: list[dict[int, int]] = []

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        acks[int(msg.value()[:10])] = (msg.partition(), msg.offset())

    producer = Producer(
        {"bootstrap.servers": bt.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 2}
    )
    stats = []
    try:
        for image_no in range(IMAGES):
            end = time.monotonic() + rng.uniform(0.2, 0.6)
            while time.monotonic() < end:
                for _ in range(rng.randrange(1, 200)):
                    seq = len(values)
                    values.append(b"%010d:" % seq + rng.randbytes(rng.randrange(0, 300)))
                    producer.produce(TOPIC, values[-1], partition=seq % PARTITIONS, on_delivery=delivered)
                producer.poll(0.002)
                tops: dict[int, int] = {}
                for p, o in list(acks.values()):
                    tops[p] = max(tops.get(p, 0), o + 1)
                if tops and rng.random() < 0.3 and commit(bt.port, tops):
                    acked_commits.append(tops)
            # the snapshot, in this order: checkpoint, acknowledgements, fsynced sizes
            cp = bt.config.data_dir / CHECKPOINT
            checkpoint = cp.read_bytes() if cp.exists() else None
            producer.poll(0)
            acked = dict(acks)
            last_commit = dict(acked_commits[-1]) if acked_commits else {}
            image = tmp_path / f"image-{image_no}"
            dropped = crash_image(bt.config.data_dir, image, tracker, rng, checkpoint)

            with running_broker(image, config) as restored:
                log = fetch_all(restored.port)
                offsets = committed(restored.port)
            missing = [(seq, p, o) for seq, (p, o) in acked.items() if log[p].get(o) != values[seq]]
            assert not missing, (
                f"image {image_no}: {len(missing)} acknowledged records lost, e.g. {missing[:5]}"
            )
            for p, o in last_commit.items():
                assert offsets.get(p, -1) >= o, (
                    f"image {image_no}: commit {last_commit} acknowledged, found {offsets}"
                )
            stats.append((len(acked), sum(len(v) for v in log.values()), dropped))
            shutil.rmtree(image)
        assert producer.flush(30) == 0
    finally:
        bt.stop()
    print(f"log.flush={flush}: (acknowledged, in the image, unsynced bytes dropped) per image: {stats}")
