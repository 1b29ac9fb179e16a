"""Produce CPU cost per partition: CPU time per record for Produce requests of the same records spread
over 1 or many partitions, through ``RequestPipeline.handle`` (decode, handler, append, group commit,
encode), in process.

    python bench/produce_cpu_bench.py [--partitions 1,100,1000] [--records 2000] [--requests 200]
                                      [--flush interval] [--rounds 3] [--one-each] [--profile N]

Every request carries ``--records`` 100-byte records (one v2 batch per partition, as
librdkafka sends them: with 1,000 partitions, 2 records a batch). With ``log.flush=interval`` each
group of requests waits for its group commit as a client's in-flight requests do (16 in flight),
so the fsync threads' CPU is counted too. Measured in process CPU time (``time.process_time``, every
thread), which other processes on a shared machine disturb far less than a socket benchmark's
rate; the best round counts. Printed per record and as a ratio to the first partition count: the CPU
side of the issue's bar (produce at 1,000 partitions >= 0.8x the 1-partition rate).

``--one-each``: what librdkafka sends to put one record into each partition (one Produce request per
partition, one record each; ``--batch N``: N records each, the shape librdkafka sends at 1,000
partitions with linger.ms=5 under load, measured at ~14-18 records a request): for each partition count N, rounds of max(N, ``--requests``) requests,
the i-th to partition i mod N, ``--in-flight`` of them (default: as many as a connection defers,
``MAX_DEFERRED``; 16 otherwise) waiting for their group commit together;
printed as CPU per request. ``--idempotent``: the batches carry a producer id and sequences (one idempotent producer, each
request's sequences following the last's), so producer state is kept and checked as for franz-go or
librdkafka (idempotent by default); one record into each of 10,000 partitions in one request:
``--partitions 10000 --records 10000 --requests 1 --idempotent``. ``--profile N``: cProfile of the measured rounds, its top N entries by
own CPU time (tottime, the event loop thread's) on stderr.

``--fresh``: every round writes into partitions nobody wrote to before (a topic created for the round,
outside the measured time; with ``--idempotent`` each partition's sequences start at 0), as a client
started against a new topic does (franz-go's one record into each of 10,000 partitions, peers_bench's
one-each phase; the round's topic is deleted after it): the first append's costs (a new producer entry, the handle cache cycling through
files under ``log.max.open.files``) are measured instead of a steady state's. ``--max-open-files N``
sets ``log.max.open.files`` (default: the broker's, half the soft limit: 512 under ``ulimit -Sn 1024``).

To compare two checkouts, run it from each with ``PYTHONPATH`` set to that checkout.

The collector runs with the thresholds ``serve`` sets (``broker.runtime.GC_THRESHOLD``; CPython's
700, 10, 10 for a checkout without them); ``--gc-threshold 700`` measures with CPython's.

``--gc``: the same workload (first partition count) with the collector as ``serve`` leaves it after
start-up (``gc.freeze()``: what start-up built is out of the generations) and without, alternating,
in one process; prints the time spent in collections per generation (``gc.callbacks``) and the CPU
per record of each.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import pstats
import sys
import tempfile
import time

import broker.runtime
from broker.app import Broker
from broker.config import Config
from broker.dispatch.registry import ClientInfo
from broker.log.records import simple_batch
from broker.protocol.generated import produce, request_header
from broker.protocol.generated.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.protocol.generated.request_header import RequestHeader
from broker.server import new_event_loop
from broker.server.connection import MAX_DEFERRED
from broker.server.pipeline import Pending, RequestPipeline

VERSION = 9  # what librdkafka 2.x sends
IN_FLIGHT = 16
VALUE = b"x" * 100
PRODUCER_ID = 1000  # --idempotent: what the batches carry (as an idempotent client's InitProducerId gives)


def frame_for(topic: str, partitions: int | list[int], records: int, sequence: int = -1) -> bytes:
    """A Produce request of ``records`` records spread over ``partitions`` (a count: 0..n-1);
    with ``sequence`` >= 0, idempotent batches of producer ``PRODUCER_ID`` (epoch 0) starting there."""
    indexes = range(partitions) if isinstance(partitions, int) else partitions
    per = max(1, records // len(indexes))
    if sequence >= 0:
        batch = simple_batch([VALUE] * per, producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=sequence)
    else:
        batch = simple_batch([VALUE] * per)
    body = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(p, batch) for p in indexes])
        ],
    )
    header = RequestHeader(
        request_api_key=0, request_api_version=VERSION, correlation_id=7, client_id="bench"
    )
    return request_header.encode_v2(header) + produce.REQUEST_ENCODERS[VERSION](body)


class GcTimer:
    """Time spent in collections, per generation, while installed (gc.callbacks)."""

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self.count = [0, 0, 0]
        self._t0 = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.seconds[info["generation"]] += time.perf_counter() - self._t0
            self.count[info["generation"]] += 1

    def __enter__(self) -> GcTimer:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


async def measure(partitions: int, args: argparse.Namespace, gc_frozen: bool | None = None) -> float:
    with tempfile.TemporaryDirectory(prefix="produce-cpu-bench-") as d:
        props = {"port": 0, "log.dirs": d, "log.flush": args.flush}
        if args.max_open_files:
            props["log.max.open.files"] = args.max_open_files
        broker = Broker(Config(props), listen=False)
        broker.logs.start()
        try:
            pipeline = RequestPipeline(broker.registry, broker.services)
            if args.fresh:  # a topic per round, created before it (see fresh_round)
                return await fresh_rounds(broker, pipeline, partitions, args, gc_frozen)
            broker.admin.create_topic("t", partitions)
            if args.one_each:  # one request per partition, one record each; cost per request
                frames = [frame_for("t", [p], args.batch) for p in range(partitions)]
                per_request = 1
                requests = max(partitions, args.requests)
            elif args.idempotent:  # each request's batches continue the producer's sequences
                per = max(1, args.records // partitions)
                requests = args.requests
                frames = [
                    frame_for("t", partitions, args.records, i * per) for i in range(requests * args.rounds)
                ]
                per_request = per * partitions
            else:
                frames = [frame_for("t", partitions, args.records)]
                per_request = max(1, args.records // partitions) * partitions
                requests = args.requests
            in_flight = args.in_flight or (MAX_DEFERRED if args.one_each else IN_FLIGHT)
            client = ClientInfo(peer="bench")
            best = float("inf")
            if gc_frozen is not None:  # --gc: as serve leaves it after start-up, or not
                gc.collect()
                if gc_frozen:
                    gc.freeze()
            profiler = cProfile.Profile(time.thread_time) if args.profile else None  # CPU, not wall
            for round_ in range(args.rounds):
                sent = round_ * requests if args.idempotent and not args.one_each else 0
                if profiler is not None:
                    profiler.enable()
                start = time.process_time()
                waiting: list = []
                for i in range(requests):
                    out = pipeline.handle(frames[(sent + i) % len(frames)], client)
                    if type(out) is Pending:
                        waiting.append(out)
                    else:
                        assert type(out) is bytes, out
                    if len(waiting) >= in_flight:
                        for p, r in zip(
                            waiting, await asyncio.gather(*(p.awaitable for p in waiting)), strict=True
                        ):
                            pipeline.complete(p, r, None)
                        waiting = []
                for p, r in zip(waiting, await asyncio.gather(*(p.awaitable for p in waiting)), strict=True):
                    pipeline.complete(p, r, None)
                best = min(best, (time.process_time() - start) / (requests * per_request))
                if profiler is not None:
                    profiler.disable()
            if not args.one_each:  # every record was appended (none refused: a bench of failures is no bench)
                want = args.rounds * requests * max(1, args.records // partitions)
                ends = {broker.logs.get("t", p).log_end_offset for p in range(partitions)}
                assert ends == {want}, f"log end offsets {sorted(ends)[:5]}, expected {want}"
            if profiler is not None:
                print(f"# profile: {partitions} partitions, {args.rounds} rounds", file=sys.stderr)
                pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(args.profile)
            return best
        finally:
            gc.unfreeze()
            await broker.stop()


async def fresh_rounds(
    broker: Broker,
    pipeline: RequestPipeline,
    partitions: int,
    args: argparse.Namespace,
    gc_frozen: bool | None,
) -> float:
    """--fresh: each round ``--requests`` requests of ``--records`` records over the ``partitions`` partitions of a
    topic created for the round (not measured), the first append into each; the best round's CPU
    per record (or per request with ``--one-each``)."""
    client = ClientInfo(peer="bench")
    best = float("inf")
    profiler = cProfile.Profile(time.thread_time) if args.profile else None
    in_flight = args.in_flight or (MAX_DEFERRED if args.one_each else IN_FLIGHT)
    for round_ in range(args.rounds):
        topic = f"fresh{round_}"
        broker.admin.create_topic(topic, partitions)
        if args.one_each:
            frames = [
                frame_for(topic, [p], args.batch, 0 if args.idempotent else -1) for p in range(partitions)
            ]
            per_request = 1
        else:
            per = max(1, args.records // partitions)
            frames = [
                frame_for(topic, partitions, args.records, i * per if args.idempotent else -1)
                for i in range(args.requests)
            ]
            per_request = per * partitions
        if gc_frozen is not None:
            gc.collect()
            if gc_frozen:
                gc.freeze()
        if profiler is not None:
            profiler.enable()
        collector = GcTimer().__enter__()
        start = time.process_time()
        handling = 0.0  # the event loop thread's CPU in the request path (decode, appends, answer)
        waiting: list = []
        for frame in frames:
            t0 = time.thread_time()
            out = pipeline.handle(frame, client)
            handling += time.thread_time() - t0
            if type(out) is Pending:
                waiting.append(out)
            else:
                assert type(out) is bytes, out
            if len(waiting) >= in_flight:
                for p, r in zip(waiting, await asyncio.gather(*(p.awaitable for p in waiting)), strict=True):
                    pipeline.complete(p, r, None)
                waiting = []
        for p, r in zip(waiting, await asyncio.gather(*(p.awaitable for p in waiting)), strict=True):
            pipeline.complete(p, r, None)
        cost = (time.process_time() - start) / (len(frames) * per_request)
        collector.__exit__()
        best = min(best, cost)
        if profiler is not None:
            profiler.disable()
        print(
            f"# {partitions} fresh partitions, round {round_ + 1}: {cost * 1e6:.2f} us, "
            f"request path {handling / (len(frames) * per_request) * 1e6:.2f} us "
            f"(collector {sum(collector.seconds) * 1e3:.0f} ms wall, collections {collector.count})",
            file=sys.stderr,
        )
        want = len(frames) * per_request // partitions
        ends = {broker.logs.get(topic, p).log_end_offset for p in range(partitions)}
        assert ends == {want}, f"log end offsets {sorted(ends)[:5]}, expected {want}"
        broker.admin.delete_topic(topic)  # (its files closed: the next round's open as many)
    if profiler is not None:
        print(f"# profile: {partitions} fresh partitions, {args.rounds} rounds", file=sys.stderr)
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(args.profile)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", default="1,100,1000")
    ap.add_argument("--records", type=int, default=2000, help="records per request")
    ap.add_argument("--requests", type=int, default=200, help="requests per round")
    ap.add_argument("--flush", default="interval", choices=["always", "interval", "never"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--one-each", action="store_true", help="one request of one record per partition")
    ap.add_argument(
        "--batch", type=int, default=1, help="--one-each: records in each request's batch (default 1)"
    )
    ap.add_argument(
        "--idempotent",
        action="store_true",
        help="batches of one idempotent producer, sequences continuing request after request "
        "(as franz-go and librdkafka send by default); not with --one-each",
    )
    ap.add_argument(
        "--fresh",
        action="store_true",
        help="every round into the partitions of a topic created for it (the first append into each)",
    )
    ap.add_argument(
        "--max-open-files", type=int, default=0, help="log.max.open.files (default: the broker's)"
    )
    ap.add_argument("--in-flight", type=int, default=0, help="requests per group commit wait")
    ap.add_argument("--profile", type=int, default=0, help="print the top N of a cProfile")
    ap.add_argument("--gc", action="store_true", help="GC time with and without gc.freeze() after start-up")
    ap.add_argument(
        "--gc-threshold",
        type=int,
        default=0,
        help="the collector's first threshold (default: serve's, broker.runtime.GC_THRESHOLD)",
    )
    args = ap.parse_args()
    serving = getattr(broker.runtime, "GC_THRESHOLD", (700, 10, 10))  # (a checkout without it: CPython's)
    gc.set_threshold(args.gc_threshold or serving[0], *serving[1:])
    counts = [int(x) for x in args.partitions.split(",")]
    loop = new_event_loop()
    if args.gc:
        try:
            gc_report(loop, counts[0], args)
        finally:
            loop.close()
        return
    try:
        results = [(n, loop.run_until_complete(measure(n, args))) for n in counts]
    finally:
        loop.close()
    base = results[0][1]
    if args.one_each:
        print(
            f"log.flush={args.flush}, one request of {args.batch} {len(VALUE)}-byte record(s) per partition "
            f"(v{VERSION})"
        )
        print("| partitions | CPU per request | requests/s per CPU second | vs first |")
        print("| --- | --- | --- | --- |")
        for n, cost in results:
            print(f"| {n:,} | {cost * 1e6:.1f} us | {1 / cost:,.0f} | {base / cost:.2f}x |")
        return
    print(
        f"log.flush={args.flush}, {args.records} records of {len(VALUE)} bytes per Produce v{VERSION} request"
    )
    print("| partitions | records per batch | CPU per record | records/s per CPU second | vs first |")
    print("| --- | --- | --- | --- | --- |")
    for n, cost in results:
        print(
            f"| {n:,} | {max(1, args.records // n)} | {cost * 1e6:.2f} us | {1 / cost:,.0f} | {base / cost:.2f}x |"
        )


def gc_report(loop: asyncio.AbstractEventLoop, partitions: int, args: argparse.Namespace) -> None:
    """--gc: the workload with and without gc.freeze(), alternating (three times each)."""
    runs: dict[bool, list[tuple[float, GcTimer]]] = {False: [], True: []}
    for _ in range(3):
        for frozen in (False, True):
            with GcTimer() as t:
                cost = loop.run_until_complete(measure(partitions, args, gc_frozen=frozen))
            runs[frozen].append((cost, t))
    print(
        f"{partitions} partition(s), {args.requests} requests x {args.rounds} rounds x 3 runs, "
        f"log.flush={args.flush}; objects tracked after start-up: {len(gc.get_objects()):,}"
    )
    print("| collector | GC ms gen0 / gen1 / gen2 (collections) | CPU per record (best) |")
    print("| --- | --- | --- |")
    for frozen in (False, True):
        secs = [sum(t.seconds[g] for _c, t in runs[frozen]) for g in range(3)]
        counts = [sum(t.count[g] for _c, t in runs[frozen]) for g in range(3)]
        parts = " / ".join(f"{s * 1000:.1f} ({c})" for s, c in zip(secs, counts, strict=True))
        best = min(c for c, _t in runs[frozen])
        print(
            f"| {'gc.freeze() after start-up' if frozen else 'not frozen'} | {parts} | {best * 1e6:.2f} us |"
        )


if __name__ == "__main__":
    main()
