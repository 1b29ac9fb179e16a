"""Log cleaner throughput on a compacted user topic, against a plain sequential read of the same
segments, measured in the same run.

    python bench/compaction_bench.py [--updates 200000] [--keys 1000] [--tombstones 100] [--size 100]
                                     [--segment-bytes 1048576] [--compression none] [--rounds 3]
                                     [--transactions 0]

The topic (``cleanup.policy=compact``, one partition) is written by confluent-kafka through the real
broker (in-process, cleaner off); with ``--transactions N`` by a transactional producer instead, N
updates per transaction, every 3rd transaction aborted (its records are removed by the pass). Then, on a fresh copy of the partition each round, best of
``--rounds``:

* baseline: every segment read once front to back with the cleaner's own batch reader and record
  parser (what any pass must at least do: one read, every record parsed);
* clean: one whole cleaner pass as the broker runs it (``cleaner.to_clean`` + ``filter_segments``
  building the key map and writing the survivors, fsync, the crash-safe swap and install).

Printed: records/s and MB/s (of the segments read) of both, and clean/baseline. A pass reads the
dirty part twice (map, then filter), so about 0.5 is the ceiling of the ratio without a faster parser.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer

from broker.log import cleaner
from broker.log.config import LogConfig
from broker.log.partition import PartitionLog
from broker.testing import running_broker

TOPIC = "table"


def build(data_dir: Path, args: argparse.Namespace) -> dict[str, str]:
    configs = {"cleanup.policy": "compact", "segment.bytes": str(args.segment_bytes)}
    with running_broker(data_dir, {"log.cleaner.enable": "false", "log.flush": "never"}) as b:
        b.call(b.broker.create_topic, TOPIC, 1, configs)
        p = Producer(
            {
                "bootstrap.servers": b.bootstrap,
                "linger.ms": 20,
                "compression.type": args.compression,
                "queue.buffering.max.messages": 1000000,
            }
        )
        pad = b"x" * max(args.size - 20, 0)
        n = args.transactions
        if n:
            p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20, "transactional.id": "bench",
                          "compression.type": args.compression, "queue.buffering.max.messages": 1000000})  # fmt: skip
            p.init_transactions(60)
        for i in range(args.updates):
            if n and i % n == 0:
                p.begin_transaction()
            key = f"key-{i % args.keys:06d}".encode()
            while True:
                try:
                    p.produce(TOPIC, key=key, value=b"%d|" % i + pad, partition=0)
                    break
                except BufferError:
                    p.poll(0.01)
            if n and (i % n == n - 1 or i == args.updates - 1):
                if (i // n) % 3 == 2:
                    p.flush(60)  # written, then aborted (abort_transaction purges what is unsent)
                    p.abort_transaction(60)
                else:
                    p.commit_transaction(60)
        if n:
            p.begin_transaction()
        for i in range(args.tombstones):
            p.produce(
                TOPIC, key=f"key-{i * (args.keys // args.tombstones):06d}".encode(), value=None, partition=0
            )
        if n:
            p.commit_transaction(60)
        assert p.flush(120) == 0
    return configs


def open_log(directory: Path, configs: dict[str, str]) -> PartitionLog:
    plog = PartitionLog(directory, TOPIC, 0, LogConfig.resolve({}, configs), recovery_point=1 << 62)
    plog.roll()  # everything written is now in closed segments
    plog.mark_flushed(*plog.flush_target())
    return plog


def baseline(plog: PartitionLog) -> tuple[float, int, int]:
    """Seconds, records and bytes of one sequential parse of every closed segment."""
    _start, _end, segs = plog.cleanable()
    records = size = 0
    begun = time.perf_counter()
    for seg in segs:
        for buf, pos in cleaner._iter_batches(seg.path, None):
            size += int.from_bytes(buf[pos + 8 : pos + 12], "big") + 12
            for _r in cleaner._records(buf, pos, False):
                records += 1
    return time.perf_counter() - begun, records, size


def one_pass(plog: PartitionLog) -> tuple[float, cleaner.CleanResult]:
    begun = time.perf_counter()
    now = int(time.time() * 1000)
    todo = cleaner.to_clean(plog, 0, now)
    result = cleaner.filter_work(plog, todo, now)()
    assert plog.install_cleaned(result, todo.segs)
    return time.perf_counter() - begun, result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--updates", type=int, default=200_000)
    ap.add_argument("--keys", type=int, default=1_000)
    ap.add_argument("--tombstones", type=int, default=100)
    ap.add_argument("--size", type=int, default=100, help="value bytes")
    ap.add_argument("--segment-bytes", type=int, default=1 << 20)
    ap.add_argument("--compression", default="none")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--transactions", type=int, default=0, help="updates per transaction (0: none)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="compaction-bench-"))
    try:
        t0 = time.perf_counter()
        configs = build(tmp / "data", args)
        source = tmp / "data" / f"{TOPIC}-0"
        print(
            f"wrote {args.updates} updates + {args.tombstones} tombstones in {time.perf_counter() - t0:.1f} s"
        )
        best_base = best_clean = None
        for r in range(args.rounds):
            work = tmp / f"round{r}"
            shutil.copytree(source, work)
            plog = open_log(work, configs)
            base = baseline(plog)
            if best_base is None or base[0] < best_base[0]:
                best_base = base
            seconds, result = one_pass(plog)
            if best_clean is None or seconds < best_clean[0]:
                best_clean = (seconds, result)
            plog.close()
            shutil.rmtree(work)
        b_s, b_records, b_bytes = best_base
        c_s, res = best_clean
        mb = 1 << 20
        print(f"segments: {b_bytes / mb:.1f} MiB, {b_records} records, compression {args.compression}")
        print(f"baseline sequential parse: {b_records / b_s:,.0f} records/s, {b_bytes / mb / b_s:.1f} MB/s")
        print(
            f"cleaner pass: {res.records_read / c_s:,.0f} records/s, {res.bytes_read / mb / c_s:.1f} MB/s "
            f"({c_s:.2f} s; kept {res.records_kept} records, {res.bytes_written / 1024:.0f} KiB)"
        )
        print(f"clean/baseline: {(res.records_read / c_s) / (b_records / b_s):.2f}")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
