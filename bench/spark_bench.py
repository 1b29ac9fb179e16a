"""Spark log-source benchmark: records/s of the ``pykbroker`` source on local[2] against a plain
single-process Python read of the same segments with the same decoder, measured in the same run.

    python bench/spark_bench.py [--records 1000000] [--size 100] [--partitions 4] [--rounds 3]
                                [--compression none|lz4|zstd|gzip|snappy] [--profile]
                                [--jvm-options=-XX:+UseParallelGC]

The data directory is written by the real broker (in-process, ``segment.bytes`` 16 MiB) from a
confluent-kafka producer. Then, best of ``--rounds`` each:

* plain: ``logdir.read_columns`` over every segment split, one after another (one core): the record
  decoder's records/s per core (bar: >= 300k);
* columns: ``logdir.read_arrow`` (what the source's workers run: the column-wise decoder, to Arrow
  batches) over the same splits, one after another (one core);
* spark: ``spark.read.format("pykbroker")...agg(count, sum(length(value)))`` on local[2] (2 Python
  workers decode in parallel, then Arrow to the JVM, which turns the batches into rows);
* export: the Parquet export job (readStream -> writeStream, AvailableNow, checkpointed), once, on a
  fresh output directory.

Printed: the rates, spark/plain and spark/columns, the export time, and with ``--profile`` the top
entries of a cProfile of the one-core column-wise read. Exit status 1 when the decoder misses the bar.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from broker.spark import logdir
from broker.testing import running_broker

TOPIC = "bench"


def build(data_dir: Path, records: int, size: int, partitions: int, compression: str) -> None:
    with running_broker(data_dir, {"log.segment.bytes": 16 << 20}) as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        admin.create_topics([NewTopic(TOPIC, partitions, 1)])
        admin.close()
        p = Producer(
            {
                "bootstrap.servers": b.bootstrap,
                "linger.ms": 20,
                "batch.size": 1000000,
                "compression.type": compression,
                "queue.buffering.max.messages": 1000000,
            }
        )
        value = b"x" * size
        for i in range(records):
            while True:
                try:
                    p.produce(TOPIC, value=value, key=str(i).encode(), partition=i % partitions)
                    break
                except BufferError:
                    p.poll(0.05)
        assert p.flush(120) == 0


def splits(data_dir: Path) -> list[logdir.SegmentRange]:
    durable = logdir.durable_offsets(data_dir)
    out = []
    for tp in logdir.partitions_of(data_dir, [TOPIC]):
        start, end = logdir.log_start_offset(data_dir, *tp), logdir.end_offset(data_dir, tp, durable)
        out += logdir.plan(data_dir, tp, start, end)
    return out


def plain_read(data_dir: Path) -> int:
    return sum(len(logdir.read_columns(split)["offset"]) for split in splits(data_dir))


def columns_read(data_dir: Path) -> int:
    return sum(b.num_rows for split in splits(data_dir) for b in logdir.read_arrow(split))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--compression", default="none")
    ap.add_argument("--profile", action="store_true", help="print the top of a profile of the columns read")
    ap.add_argument(
        "--jvm-options",
        help="the driver's JVM options instead of local_session's quick-start ones (C1 only, serial GC), "
        "e.g. to measure the JVM's share with its optimising compiler",
    )
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="spark-bench-"))
    try:
        return run(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(args: argparse.Namespace, tmp: Path) -> int:
    data = tmp / "data"
    t0 = time.perf_counter()
    build(data, args.records, args.size, args.partitions, args.compression)
    segs = sum(len(logdir.segment_bases(data, TOPIC, p)) for p in range(args.partitions))
    print(f"data: {args.records} records of {args.size} B, {args.partitions} partitions, {segs} segments, "
          f"{args.compression}, written in {time.perf_counter() - t0:.1f} s")  # fmt: skip

    from pyspark.sql import functions as F

    from broker.spark import jobs
    from broker.spark.session import local_session

    conf = {} if args.jvm_options is None else {"spark.driver.extraJavaOptions": args.jvm_options}
    spark = local_session(app="spark-bench", **conf)
    plain, columns, sparked = [], [], []
    for _ in range(args.rounds):
        t = time.perf_counter()
        n = plain_read(data)
        plain.append(time.perf_counter() - t)
        assert n == args.records, n
        t = time.perf_counter()
        n = columns_read(data)
        columns.append(time.perf_counter() - t)
        assert n == args.records, n
        df = spark.read.format("pykbroker").option("path", str(data)).option("subscribe", TOPIC).load()
        t = time.perf_counter()
        row = df.agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("b")).first()
        sparked.append(time.perf_counter() - t)
        assert row.n == args.records and row.b == args.records * args.size, row
    t = time.perf_counter()
    exported = jobs.export(spark, str(data), str(tmp / "export"), TOPIC)
    export_s = time.perf_counter() - t
    assert exported == args.records
    spark.stop()
    p_rate, s_rate = args.records / min(plain), args.records / min(sparked)
    c_rate = args.records / min(columns)
    print(f"plain Python read (1 core):  {p_rate:12,.0f} records/s  (read_columns, best of {args.rounds})")
    print(f"columns read (1 core):       {c_rate:12,.0f} records/s  (read_arrow, best of {args.rounds})")
    print(f"Spark pykbroker (local[2]):  {s_rate:12,.0f} records/s  (best of {args.rounds})")
    print(f"spark/plain ratio:           {s_rate / p_rate:12.2f}")
    print(f"spark/columns ratio:         {s_rate / c_rate:12.2f}")
    print(f"Parquet export (AvailableNow, checkpointed): {export_s:.1f} s for {exported} records")
    print(f"cpus: {os.cpu_count()}")
    if args.profile:
        prof = cProfile.Profile()
        prof.runcall(columns_read, data)
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(10)
        print(out.getvalue())
    ok = p_rate >= 300_000
    print(f"decoder >= 300k records/s per core: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
