"""OffsetCommit CPU benchmark: process CPU time per OffsetCommit v9 request through the whole
in-process request path (``RequestPipeline.handle``: decode, handler, coordinator operation,
record batch, log append, replay; then the flush and ``RequestPipeline.complete``: encode).

    python bench/commit_cpu_bench.py [--partitions 1,10] [--requests 20000] [--rounds 3] [--profile]
                                     [--baseline-root DIR]

No sockets: a broker in this process (``log.flush=interval``, temp data dir), ``--groups`` groups
committing as simple (generation -1) committers, ``--batch`` requests handed to the pipeline
before their flush is awaited (as a connection with requests in flight would). Measured in process
CPU time (``time.process_time``, the flush thread included), best of ``--rounds``; every answer is
checked to be error 0. ``--baseline-root DIR`` (another checkout, e.g. the base commit's worktree)
runs the same measurement in a fresh process of that checkout after each of ours, alternating, and
prints the ratio of the bests (``--profile`` prints cProfile's top entries of one round instead).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from broker.app import Broker
from broker.config import Config
from broker.dispatch.registry import ClientInfo
from broker.protocol.generated import offset_commit, request_header
from broker.protocol.generated.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.generated.request_header import RequestHeader
from broker.server import new_event_loop
from broker.server.pipeline import Pending

TOPIC = "bench"
VERSION = 9


def frames(groups: int, width: int, nparts: int) -> list[bytes]:
    out = []
    for g in range(groups):
        header = RequestHeader(
            request_api_key=8, request_api_version=VERSION, correlation_id=g, client_id="bench"
        )
        req = OffsetCommitRequest(
            group_id=f"group-{g}",
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                OffsetCommitRequestTopic(
                    name=TOPIC,
                    partitions=[
                        OffsetCommitRequestPartition(
                            partition_index=(g + k) % nparts,
                            committed_offset=1000 + g,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        )
                        for k in range(width)
                    ],
                )
            ],
        )
        out.append(request_header.encode_v2(header) + offset_commit.REQUEST_ENCODERS[VERSION](req))
    return out


async def one_round(pipeline: object, reqs: list[bytes], total: int, batch: int, client: ClientInfo) -> int:
    done = 0
    n = len(reqs)
    while done < total:
        pending = []
        for i in range(batch):
            out = pipeline.handle(reqs[(done + i) % n], client)
            if type(out) is Pending:
                pending.append(out)
            elif type(out) is not bytes:
                raise SystemExit(f"unexpected outcome {out!r}")
        for p in pending:
            result = await p.awaitable
            frame = pipeline.complete(p, result)
            if type(frame) is not bytes:
                raise SystemExit(f"unexpected outcome {frame!r}")
        done += batch
    return done


def check(frame: bytes) -> None:
    # response header v1 (flexible): correlation id, no tags; then throttle, topics...
    resp, _ = offset_commit.RESPONSE_DECODERS[VERSION](frame, 5)
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code:
                raise SystemExit(f"commit answered error {p.error_code}")


async def run(args: argparse.Namespace, width: int) -> float:
    with tempfile.TemporaryDirectory(prefix="commit-cpu-bench-") as d:
        broker = Broker(Config({"port": 0, "log.dirs": d, "log.flush": "interval"}))
        await broker.start()
        try:
            broker.admin.create_topic(TOPIC, args.nparts)
            pipeline = broker.pipeline
            client = ClientInfo(peer="bench")
            reqs = frames(args.groups, width, args.nparts)
            for f in reqs:  # each group's first commit, checked
                out = pipeline.handle(f, client)
                if type(out) is Pending:
                    out = pipeline.complete(out, await out.awaitable)
                check(out[4:] if type(out) is bytes else out)
            gc.freeze()  # as ``pykbroker serve`` does after start-up (broker/cli.py)
            gc_time = [0.0, 0]

            def gc_cb(phase: str, info: dict) -> None:
                if phase == "start":
                    gc_time[1] = time.perf_counter_ns()
                else:
                    gc_time[0] += (time.perf_counter_ns() - gc_time[1]) / 1e9

            gc.callbacks.append(gc_cb)
            best = float("inf")
            for r in range(args.rounds):
                prof = cProfile.Profile() if args.profile and r == args.rounds - 1 else None
                start = time.process_time()
                if prof:
                    prof.enable()
                n = await one_round(pipeline, reqs, args.requests, args.batch, client)
                if prof:
                    prof.disable()
                    pstats.Stats(prof).sort_stats("tottime").print_stats(25)
                    continue
                best = min(best, (time.process_time() - start) / n)
            gc.callbacks.remove(gc_cb)
            if args.gc:
                print(f"  garbage collector: {gc_time[0]:.3f} s over all rounds")
            return best
        finally:
            await broker.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", default="1,10", help="partitions per request (comma-separated)")
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--nparts", type=int, default=10, help="partitions of the topic")
    ap.add_argument("--batch", type=int, default=100, help="requests handled before their flush is awaited")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--gc", action="store_true", help="print the time the garbage collector took")
    ap.add_argument(
        "--baseline-root", type=Path, help="another checkout measured too, alternating, for ratios"
    )
    ap.add_argument("--width-only", type=int, help=argparse.SUPPRESS)  # one width in this process
    args = ap.parse_args()
    widths = [args.width_only] if args.width_only else [int(w) for w in args.partitions.split(",")]
    if args.baseline_root is not None and not args.profile:
        compare(args, widths)
        return
    for width in widths:
        loop = new_event_loop()
        try:
            best = loop.run_until_complete(run(args, width))
        finally:
            loop.close()
        print(
            f"{width} partition(s)/request: {best * 1e6:.1f} us CPU per request, "
            f"{best * 1e6 / width:.2f} us per partition (best of {args.rounds} x {args.requests:,})"
        )


def measure_in(root: Path, args: argparse.Namespace, width: int) -> float:
    """us CPU per request of one width, measured by a fresh process of this script on ``root``'s
    broker (one round per process: the alternation is the rounds)."""
    cmd = [sys.executable, __file__, "--width-only", str(width), "--rounds", "1", "--requests", str(args.requests),
           "--groups", str(args.groups), "--nparts", str(args.nparts), "--batch", str(args.batch)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    m = re.search(r"([0-9.]+) us CPU per request", out)
    if m is None:
        raise SystemExit(f"no measurement from {root}: {out}")
    return float(m.group(1))


def compare(args: argparse.Namespace, widths: list[int]) -> None:
    """This checkout and ``--baseline-root``, alternating per round, best of ``--rounds`` each."""
    ours_root = Path(__file__).resolve().parent.parent
    for width in widths:
        ours, base = [], []
        for _ in range(args.rounds):
            ours.append(measure_in(ours_root, args, width))
            base.append(measure_in(args.baseline_root, args, width))
        o, b = min(ours), min(base)
        print(
            f"{width} partition(s)/request: ours {o:.1f} us CPU per request ({o / width:.2f} per partition), "
            f"baseline {b:.1f} us ({b / width:.2f}); {b / o:.2f}x less CPU "
            f"(best of {args.rounds} alternating x {args.requests:,})"
        )


if __name__ == "__main__":
    main()
