"""Produce CPU cost per partition: CPU time per record for Produce requests of the same records spread
over 1 or many partitions, through ``RequestPipeline.handle`` (decode, handler, append, group commit,
encode), in process.

    python bench/produce_cpu_bench.py [--partitions 1,100,1000] [--records 2000] [--requests 200]
                                      [--flush interval] [--rounds 3]

Every request carries ``--records`` 100-byte records (one v2 batch per partition, as
librdkafka sends them: with 1,000 partitions, 2 records a batch). With ``log.flush=interval`` each
group of requests waits for its group commit as a client's in-flight requests do (16 in flight),
so the fsync threads' CPU is counted too. Measured in process CPU time (``time.process_time``, every
thread), which other processes on a shared machine disturb far less than a socket benchmark's
rate; the best round counts. Printed per record and as a ratio to the first partition count: the CPU
side of the issue's bar (produce at 1,000 partitions >= 0.8x the 1-partition rate).

To compare two checkouts, run it from each with ``PYTHONPATH`` set to that checkout.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time

from broker.app import Broker
from broker.config import Config
from broker.dispatch.registry import ClientInfo
from broker.log.records import simple_batch
from broker.protocol.generated import produce, request_header
from broker.protocol.generated.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.protocol.generated.request_header import RequestHeader
from broker.server import new_event_loop
from broker.server.pipeline import Pending, RequestPipeline

VERSION = 9  # what librdkafka 2.x sends
IN_FLIGHT = 16
VALUE = b"x" * 100


def frame_for(topic: str, partitions: int, records: int) -> bytes:
    per = max(1, records // partitions)
    batch = simple_batch([VALUE] * per)
    body = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(p, batch) for p in range(partitions)]
            )
        ],
    )
    header = RequestHeader(
        request_api_key=0, request_api_version=VERSION, correlation_id=7, client_id="bench"
    )
    return request_header.encode_v2(header) + produce.REQUEST_ENCODERS[VERSION](body)


async def measure(partitions: int, args: argparse.Namespace) -> float:
    with tempfile.TemporaryDirectory(prefix="produce-cpu-bench-") as d:
        broker = Broker(Config({"port": 0, "log.dirs": d, "log.flush": args.flush}), listen=False)
        broker.logs.start()
        try:
            pipeline = RequestPipeline(broker.registry, broker.services)
            broker.admin.create_topic("t", partitions)
            frame = frame_for("t", partitions, args.records)
            client = ClientInfo(peer="bench")
            per_request = max(1, args.records // partitions) * partitions
            best = float("inf")
            for _ in range(args.rounds):
                start = time.process_time()
                waiting: list = []
                for _ in range(args.requests):
                    out = pipeline.handle(frame, client)
                    if type(out) is Pending:
                        waiting.append(out)
                    else:
                        assert type(out) is bytes, out
                    if len(waiting) >= IN_FLIGHT:
                        for p, r in zip(
                            waiting, await asyncio.gather(*(p.awaitable for p in waiting)), strict=True
                        ):
                            pipeline.complete(p, r, None)
                        waiting = []
                for p, r in zip(waiting, await asyncio.gather(*(p.awaitable for p in waiting)), strict=True):
                    pipeline.complete(p, r, None)
                best = min(best, (time.process_time() - start) / (args.requests * per_request))
            return best
        finally:
            await broker.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", default="1,100,1000")
    ap.add_argument("--records", type=int, default=2000, help="records per request")
    ap.add_argument("--requests", type=int, default=200, help="requests per round")
    ap.add_argument("--flush", default="interval", choices=["always", "interval", "never"])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    counts = [int(x) for x in args.partitions.split(",")]
    loop = new_event_loop()
    try:
        results = [(n, loop.run_until_complete(measure(n, args))) for n in counts]
    finally:
        loop.close()
    base = results[0][1]
    print(
        f"log.flush={args.flush}, {args.records} records of {len(VALUE)} bytes per Produce v{VERSION} request"
    )
    print("| partitions | records per batch | CPU per record | records/s per CPU second | vs first |")
    print("| --- | --- | --- | --- | --- |")
    for n, cost in results:
        print(
            f"| {n:,} | {max(1, args.records // n)} | {cost * 1e6:.2f} us | {1 / cost:,.0f} | {base / cost:.2f}x |"
        )


if __name__ == "__main__":
    main()
