"""ListOffsets CPU cost per request: CPU time of single-partition ListOffsets requests (decode,
handler, log lookups, encode, response frame) through ``RequestPipeline.handle``, in process.

    python bench/list_offsets_cpu_bench.py [--partitions 1,1000] [--messages 200000] [--records 2000]
                                           [--rounds 3] [--profile N] [--broker-root DIR ...]

Each partition count gets a fresh data directory: ``--messages`` 100-byte records produced in
requests of ``--records`` records spread over the partitions (one v2 batch per partition per
request, as fetch_cpu_bench.py). Then, for every partition, the single-partition ListOffsets a
librdkafka consumer sends (v7, read_committed, current leader epoch 0) is handled once per round for
each query: EARLIEST (-2), LATEST (-1) and a timestamp (0: the first record). A librdkafka consumer
of 1,000 partitions sends about 3,000 of them.

Measured in CPU time (``time.process_time``) over all partitions, best round, printed per request.
``--broker-root DIR`` (repeatable) runs the same with ``PYTHONPATH=DIR`` (another checkout, e.g.
the main branch) and prints its ratio to this one from the same run: each checkout runs in its own
subprocess, ``--repeat`` times in alternating order, best kept. ``--profile N``: only this checkout,
in process, with a cProfile of all queries (top N entries by own time, on stderr).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from inprocess import VALUE, filled_broker, frame, run_at, run_here

from broker.protocol.generated import list_offsets
from broker.protocol.generated.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic

LIST_OFFSETS_VERSION = 7  # what librdkafka 2.x sends
QUERIES = {"earliest": -2, "latest": -1, "timestamp": 0}


def list_offsets_frame(topic: str, partition: int, timestamp: int) -> bytes:
    body = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=1,
        topics=[
            ListOffsetsTopic(
                name=topic,
                partitions=[
                    ListOffsetsPartition(
                        partition_index=partition, current_leader_epoch=0, timestamp=timestamp
                    )
                ],
            )
        ],
    )
    return frame(2, LIST_OFFSETS_VERSION, list_offsets.REQUEST_ENCODERS[LIST_OFFSETS_VERSION](body))


async def measure(partitions: int, args: argparse.Namespace) -> dict[str, float]:
    async with filled_broker("list-offsets-cpu-bench-", "t", partitions, args.messages, args.records) as (
        broker,
        pipeline,
        client,
    ):
        # at least 1,000 requests a round, whatever the partition count
        frames = {
            name: [list_offsets_frame("t", p % partitions, ts) for p in range(max(partitions, 1000))]
            for name, ts in QUERIES.items()
        }
        result: dict[str, float] = {}
        profiler = cProfile.Profile(time.process_time) if args.profile else None
        for name, fs in frames.items():
            best = float("inf")
            for _ in range(args.rounds):
                if profiler is not None:
                    profiler.enable()
                start = time.process_time()
                for f in fs:
                    out = pipeline.handle(f, client)
                best = min(best, (time.process_time() - start) / len(fs))
                if profiler is not None:
                    profiler.disable()
                assert type(out) is bytes, out
            result[name] = best
        if profiler is not None:
            print(f"# profile: {partitions} partitions, {args.rounds} rounds", file=sys.stderr)
            pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(args.profile)
        return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", default="1,1000")
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--records", type=int, default=2000, help="records per Produce request")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=2, help="runs of each checkout, alternating")
    ap.add_argument("--profile", type=int, default=0, help="print the top N of a cProfile")
    ap.add_argument(
        "--broker-root", type=Path, action="append", default=[], help="another checkout to compare"
    )
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.json or args.profile:
        result = run_here(measure, args)
        if args.json:
            print(json.dumps(result))
        return
    child = [
        f"--partitions={args.partitions}",
        f"--messages={args.messages}",
        f"--records={args.records}",
        f"--rounds={args.rounds}",
    ]
    # every checkout in a subprocess, in alternating order, best of --repeat (the first run of a
    # loaded machine is often the slowest: no checkout always goes first)
    this = Path(__file__).resolve().parent.parent
    roots = [this, *(r.resolve() for r in args.broker_root)]
    best: dict[Path, dict[int, dict[str, float]]] = {}
    for rep in range(args.repeat):
        for root in roots if rep % 2 == 0 else roots[::-1]:
            got = run_at(__file__, root, child)
            if root not in best:
                best[root] = got
            else:
                for n, r in got.items():
                    best[root][n] = {k: min(v, best[root][n][k]) for k, v in r.items()}
    here = best[this]
    others = {str(root): best[root] for root in roots[1:]}
    print(
        f"ListOffsets v{LIST_OFFSETS_VERSION} of one partition, {args.messages:,} records of {len(VALUE)} B, "
        f"read_committed; CPU per request, best of {args.rounds}"
    )
    cols = ["this"] + [f"{r} (this faster by)" for r in others]
    print("| partitions | " + " | ".join(f"{q}: {c}" for q in QUERIES for c in cols) + " |")
    print("| --- " * (1 + len(QUERIES) * len(cols)) + "|")
    for n, r in here.items():
        cells = [f"{n:,}"]
        for kind in QUERIES:
            cells.append(f"{r[kind] * 1e6:.1f} us")
            for o in others.values():
                cells.append(f"{o[n][kind] * 1e6:.1f} us ({o[n][kind] / r[kind]:.2f}x)")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
