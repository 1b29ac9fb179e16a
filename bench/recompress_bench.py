"""Recompression benchmark: what a topic's compression.type costs on the produce path, measured in
one run against the path that keeps the producer's batch.

    python bench/recompress_bench.py [--seconds 1.0] [--records 1000] [--value-bytes 512]

For each (producer codec -> topic codec) pair it builds one batch of ``--records`` JSON-like values
(what a producer sends), then times exactly the broker's per-batch work: without recompression
``validate_records`` + the timestamp check + ``set_max_timestamp`` (compression.type=producer, or the
topic's codec equals the batch's); with it the same checks keeping the decompressed section plus
``validator.rebuild`` (decompress, compress with the topic's codec at its default level, new header
and CRC). Throughput is MB of uncompressed records per second (the fastest call of three
alternating rounds);
the ratio is recompressing / keeping, for the same source batch.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.log import records, validator  # noqa: E402
from broker.log.batch import validate_produce  # noqa: E402
from broker.log.config import LONG_MAX  # noqa: E402
from broker.log.streaming import DEFAULT_LIMIT, validate_records  # noqa: E402

NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
PAIRS = [(1, 3), (1, 4), (3, 1), (3, 4), (2, 3), (4, 3), (0, 3), (0, 4), (1, 0)]


def make_batch(codec: int, count: int, value_bytes: int) -> tuple[bytearray, int]:
    now = int(time.time() * 1000)
    recs = []
    for i in range(count):
        doc = {"id": i, "user": f"user-{i % 97}", "event": ["click", "view", "buy"][i % 3], "ts": now + i}
        text = json.dumps(doc).encode()
        value = (text + b" " + b"x" * value_bytes)[:value_bytes]
        recs.append(records.Record(i, i, f"key-{i % 50}".encode(), value, []))
    raw = records.encode_records(recs)
    return bytearray(records.build_batch(recs, base_timestamp=now, compression=codec)), len(raw)


def keep(buf: bytearray, now: int) -> None:
    (info,) = validate_produce(buf)
    stats = validate_records(buf, info, DEFAULT_LIMIT)
    validator.timestamp_errors(buf, info, stats, now, LONG_MAX, 3600000, False)
    validator.set_max_timestamp(buf, info, stats)


def recompress(buf: bytearray, now: int, target: int) -> None:
    (info,) = validate_produce(buf)
    stats = validate_records(buf, info, DEFAULT_LIMIT, keep=True)
    validator.timestamp_errors(buf, info, stats, now, LONG_MAX, 3600000, False)
    validator.rebuild(buf, info, stats, target, None, DEFAULT_LIMIT)


def rate(fn, seconds: float, raw_bytes: int) -> float:
    """MB (10^6 bytes) of uncompressed records per second, from the fastest call within ``seconds``
    (the least disturbed by other processes on a shared machine)."""
    fn()  # warm up
    best, start = float("inf"), time.perf_counter()
    while time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return raw_bytes / best / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--value-bytes", type=int, default=512)
    args = ap.parse_args()
    now = int(time.time() * 1000)
    print(f"{args.records} records of {args.value_bytes} bytes per batch; MB/s of uncompressed records")
    head = f"{'producer -> topic':<18} {'keep MB/s':>10} {'recompress MB/s':>16} {'ratio':>7} {'ms/MB extra':>12}"
    print(head)
    for source, target in PAIRS:
        buf, raw = make_batch(source, args.records, args.value_bytes)
        base = conv = 0.0
        for _round in range(3):  # alternate, keep the best of each: the machine is shared
            base = max(base, rate(lambda b=buf: keep(bytearray(b), now), args.seconds / 3, raw))
            run = lambda b=buf, t=target: recompress(bytearray(b), now, t)  # noqa: E731
            conv = max(conv, rate(run, args.seconds / 3, raw))
        extra = 1000 / conv - 1000 / base
        pair = f"{NAMES[source]} -> {NAMES[target]}"
        print(f"{pair:<18} {base:>10.1f} {conv:>16.1f} {conv / base:>7.2f} {extra:>12.2f}")


if __name__ == "__main__":
    main()
