"""Restart benchmark: coordinator replay time before and after compaction of ``__consumer_offsets``.

    python bench/restart_bench.py [--scale 1.0] [--rounds 10] [--runs 3] [--dir D] [--baseline-root DIR]

1. Builds a data directory whose coordinator log holds ``rounds`` commits of every partition of
   every group: at scale 1, 100,000 groups x 10 partitions = 1,000,000 live offsets and 10 rounds =
   10,000,000 historical commits (plus one GroupMetadata record per group). The log is written
   with the broker's own record builders (``coordinator.records.to_batch``, one batch per group
   commit, as an OffsetCommit request makes) and ``PartitionLog.append``, not over the wire.
2. Restarts on it uncompacted: ``Broker(config)`` construction, which opens the logs and replays
   the coordinator log (best of ``--runs``; 1 run at scale >= 0.5, it is the slow case).
3. Compacts the closed segments once (``cleaner.clean_partition``), timed.
4. Restarts on the compacted log (best of ``--runs``), checks that the replayed offsets are
   identical to the uncompacted replay, and prints records/s replayed and the ratio between the
   two restarts. Decode alone (reading and decoding the records without applying them) is timed
   separately, so decode and apply can be told apart.
5. With ``--baseline-root`` (another checkout, e.g. ``git worktree add`` of the base commit): the
   compacted restart again in fresh processes of that checkout and of this one, alternating, best of
   ``--runs`` each (a warm-up broker first, so imports are not counted), and their ratio.

Bar (scale 1): the compacted restart under 2 s. Exit status 1 if it is missed at scale 1.

The loader walks the records in C where the install compiled broker/coordinator/_replay.c; run with
``PYKBROKER_NATIVE=0`` in the environment (the fresh processes inherit it) to measure the Python walk.
A restart keeps each group's offsets packed until they are first read: the in-process restarts here
read them all afterwards (to compare), outside the time measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from broker.app import Broker  # noqa: E402
from broker.config import Config  # noqa: E402
from broker.coordinator import OFFSETS_TOPIC  # noqa: E402
from broker.coordinator.generated.group_metadata_key import GroupMetadataKey  # noqa: E402
from broker.coordinator.generated.group_metadata_value import GroupMetadataValue  # noqa: E402
from broker.coordinator.generated.offset_commit_key import OffsetCommitKey  # noqa: E402
from broker.coordinator.generated.offset_commit_value import OffsetCommitValue  # noqa: E402
from broker.coordinator.records import GROUP_METADATA, OFFSET_COMMIT, CoordinatorRecord, to_batch  # noqa: E402
from broker.log import cleaner  # noqa: E402
from broker.log.batch import iter_batches  # noqa: E402
from broker.log.manager import LogManager  # noqa: E402
from broker.log.records import iter_records  # noqa: E402

BAR_S = 2.0
PARTITIONS = 10
TOPIC = "events"
START_MS = 1_700_000_000_000


def config(data: Path) -> Config:
    # the cleaner thread is not started (no event loop runs); compaction is called explicitly
    return Config({"log.dirs": str(data), "port": 0, "log.flush": "never"})


def close(broker: Broker) -> None:
    broker.groups.close()
    asyncio.get_event_loop().run_until_complete(broker.logs.close())
    broker.close()


def generate(data: Path, groups: int, rounds: int) -> int:
    """Write the coordinator log; returns the number of records written."""
    broker = Broker(config(data))
    broker.groups.ensure_log()
    plog = broker.logs.get(OFFSETS_TOPIC, 0)
    topic_id = uuid.uuid4()
    n = 0
    now = START_MS
    for g in range(groups):
        gid = f"group-{g:06d}"
        rec = CoordinatorRecord(
            GROUP_METADATA, GroupMetadataKey(gid), GroupMetadataValue(protocol_type="consumer")
        )
        data_ = bytearray(to_batch([rec], now))
        plog.append(data_, iter_batches(data_, verify_crc=False), now)
        n += 1
    for r in range(rounds):
        for g in range(groups):
            now += 1
            gid = f"group-{g:06d}"
            records = [
                CoordinatorRecord(
                    OFFSET_COMMIT,
                    OffsetCommitKey(gid, TOPIC, p),
                    OffsetCommitValue(
                        offset=r * 1000 + p,
                        leader_epoch=0,
                        metadata="",
                        commit_timestamp=now,
                        topic_id=topic_id,
                    ),
                )
                for p in range(PARTITIONS)
            ]
            data_ = bytearray(to_batch(records, now))
            plog.append(data_, iter_batches(data_, verify_crc=False), now)
            n += PARTITIONS
    plog.roll()  # everything written is in closed segments: all of it is cleanable
    close(broker)
    return n


def restart(data: Path) -> tuple[float, int, dict]:
    """(seconds, records replayed, offsets) of one in-process restart."""
    replayed: list[int] = []
    handler = _Capture(replayed)
    logger = logging.getLogger("broker.coordinator")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        start = time.perf_counter()
        broker = Broker(config(data))
        took = time.perf_counter() - start
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    offsets = {
        (g, t, p): c.offset
        for g, o in broker.groups.state.offsets.items()
        for t, ps in o.by_topic.items()
        for p, c in ps.items()
    }
    close(broker)
    return took, replayed[0] if replayed else 0, offsets


class _Capture(logging.Handler):
    def __init__(self, out: list[int]):
        super().__init__(logging.INFO)
        self.out = out

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("coordinator loaded"):
            self.out.append(int(record.args[0]))  # type: ignore[index]


#: run by ``restart_in`` in a fresh process of a checkout: one warm-up Broker on an empty data
#: directory (imports and their bytecode are not the replay), then the timed restart on ``data``
_RESTART_CHILD = """
import asyncio, json, logging, sys, tempfile, time
from broker.app import Broker
from broker.config import Config
loaded = []
class Capture(logging.Handler):
    def emit(self, record):
        if record.getMessage().startswith("coordinator loaded"):
            loaded.append(int(record.args[0]))
def config(data):
    return Config({"log.dirs": str(data), "port": 0, "log.flush": "never"})
def close(broker):
    broker.groups.close()
    asyncio.get_event_loop().run_until_complete(broker.logs.close())
    broker.close()
asyncio.set_event_loop(asyncio.new_event_loop())
with tempfile.TemporaryDirectory() as empty:
    close(Broker(config(empty)))
logger = logging.getLogger("broker.coordinator")
logger.addHandler(Capture())
logger.setLevel(logging.INFO)
start, cpu = time.perf_counter(), time.process_time()
broker = Broker(config(sys.argv[1]))
took, cpu = time.perf_counter() - start, time.process_time() - cpu
close(broker)
print(json.dumps({"seconds": took, "cpu": cpu, "records": loaded[0] if loaded else 0}))
"""


def restart_in(root: Path, data: Path) -> tuple[float, float, int]:
    """(seconds, CPU seconds, records replayed) of one restart by the broker of checkout ``root``, in
    a new process."""
    out = subprocess.run(
        [sys.executable, "-c", _RESTART_CHILD, str(data)],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        check=True,
    )
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    return doc["seconds"], doc["cpu"], doc["records"]


def decode_only(data: Path) -> tuple[float, int]:
    """Seconds to read and decode every record of the coordinator log, without applying them."""
    paths = sorted((data / f"{OFFSETS_TOPIC}-0").glob("*.log"))
    start = time.perf_counter()
    n = 0
    for path in paths:
        raw = path.read_bytes()
        for _rec in iter_records(raw, verify_crc=False):
            n += 1
    return time.perf_counter() - start, n


def log_bytes(data: Path) -> int:
    return sum(p.stat().st_size for p in (data / f"{OFFSETS_TOPIC}-0").glob("*.log"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of 100,000 groups [default 1]")
    ap.add_argument("--rounds", type=int, default=10, help="commits of every offset [default 10]")
    ap.add_argument("--runs", type=int, default=3, help="restarts on the compacted log (best of)")
    ap.add_argument("--dir", type=Path, default=None, help="work directory (kept) [default: a temp dir]")
    ap.add_argument(
        "--baseline-root",
        type=Path,
        default=None,
        help="another checkout: the compacted restart also runs in fresh processes of it and of this "
        "one, alternating (best of --runs each), and their ratio is printed",
    )
    args = ap.parse_args(argv)
    groups = max(1, int(100_000 * args.scale))
    work = args.dir or Path(tempfile.mkdtemp(prefix="restart-bench-"))
    data = work / "data"
    shutil.rmtree(data, ignore_errors=True)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # a Broker arms its timers on the current loop
    try:
        t = time.perf_counter()
        written = generate(data, groups, args.rounds)
        print(
            f"generated {written:,} records ({groups:,} groups x {PARTITIONS} partitions x {args.rounds} "
            f"rounds + group records), {log_bytes(data) / 2**20:.0f} MiB, in {time.perf_counter() - t:.1f} s"
        )
        slow_runs = 1 if args.scale >= 0.5 else args.runs
        full = min(restart(data) for _ in range(slow_runs))
        dec = min(decode_only(data) for _ in range(slow_runs))
        print(
            f"uncompacted restart: {full[1]:,} records replayed in {full[0]:.2f} s = {full[1] / full[0]:,.0f} records/s "
            f"(decode alone with the generic iter_records: {dec[0]:.2f} s = {dec[1] / dec[0]:,.0f} records/s)"
        )

        logs = LogManager(data, config(data))  # the log alone: no replay before compacting
        plog = logs.open_partition(OFFSETS_TOPIC, 0, {})
        t = time.perf_counter()
        result = cleaner.clean_partition(plog, START_MS + 10**9, 86_400_000)
        took = time.perf_counter() - t
        asyncio.get_event_loop().run_until_complete(logs.close())
        assert result is not None
        print(
            f"compaction: {result.records_read:,} records read, {result.records_kept:,} kept, "
            f"{result.bytes_read / 2**20:.0f} -> {result.bytes_written / 2**20:.1f} MiB in {took:.1f} s "
            f"({result.records_read / took:,.0f} records/s)"
        )

        compact = min(restart(data) for _ in range(args.runs))
        dec = min(decode_only(data) for _ in range(args.runs))
        same = compact[2] == full[2]
        print(
            f"compacted restart: {compact[1]:,} records replayed in {compact[0]:.3f} s = "
            f"{compact[1] / compact[0]:,.0f} records/s (generic iter_records decode alone {dec[0]:.3f} s); "
            f"{full[0] / compact[0]:.1f}x faster than uncompacted; offsets identical: {same}"
        )
        if args.baseline_root is not None:
            best = {"this": float("inf"), "baseline": float("inf")}
            best_cpu = dict(best)
            counts = {}
            for _ in range(args.runs):
                for name, root in (("baseline", args.baseline_root), ("this", ROOT)):
                    took, cpu, count = restart_in(root, data)
                    best[name] = min(best[name], took)
                    best_cpu[name] = min(best_cpu[name], cpu)
                    counts[name] = count
            # CPU seconds too: on a shared machine the wall clock also counts other processes' turns
            for what, b in (("wall", best), ("CPU", best_cpu)):
                print(
                    f"compacted restart in fresh processes, best of {args.runs}, {what} time: this checkout "
                    f"{counts['this']:,} records in {b['this']:.3f} s = {counts['this'] / b['this']:,.0f} "
                    f"records/s; baseline {args.baseline_root} {counts['baseline']:,} in {b['baseline']:.3f} s = "
                    f"{counts['baseline'] / b['baseline']:,.0f} records/s; ratio {b['baseline'] / b['this']:.2f}x"
                )
        if not same:
            return 1
        if args.scale >= 1 and compact[0] >= BAR_S:
            print(f"BAR MISSED: compacted restart {compact[0]:.2f} s >= {BAR_S} s")
            return 1
        return 0
    finally:
        asyncio.set_event_loop(None)
        loop.close()
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
