"""Fetch CPU cost per partition: CPU time of one consumer Fetch of every partition (decode, handler,
segment reads, encode, response frame) through ``RequestPipeline.handle``, in process.

    python bench/fetch_cpu_bench.py [--partitions 1,100,1000] [--messages 200000] [--records 2000]
                                    [--rounds 5] [--isolation 1] [--profile N]
                                    [--broker-root DIR ...]

Each partition count gets a fresh data directory: ``--messages`` 100-byte records produced in
requests of ``--records`` records spread over the partitions (one v2 batch per partition per
request, as librdkafka batches them: with 1,000 partitions, 2 records a batch). Then the Fetch a
librdkafka consumer sends (v16, topic ids, ``fetch.max.bytes`` 50 MB, ``max.partition.fetch.bytes``
1 MB, read_committed by default) is handled ``--rounds`` times:

* full: every partition from offset 0 (what the consumer's first Fetch after assign() reads);
* empty: every partition at its high watermark, ``max_wait_ms`` 0 (the per-partition cost of a Fetch
  that finds nothing, as a consumer that has caught up sends every ``fetch.wait.max.ms``).

Measured in CPU time (``time.process_time``), best round; printed per Fetch and per MB of records.
``--broker-root DIR`` (repeatable) runs the same in a subprocess with ``PYTHONPATH=DIR`` (another
checkout, e.g. the main branch) and prints its ratio to this one from the same run. ``--profile N``:
cProfile of the full fetches, top N entries by own time, on stderr.
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

from broker.protocol.generated import fetch
from broker.protocol.generated.fetch import FetchPartition, FetchRequest, FetchTopic

FETCH_VERSION = 16  # what librdkafka 2.x sends


def fetch_frame(
    topic_id, offsets: list[int], isolation: int, max_wait_ms: int, session_id: int = 0, epoch: int = -1
) -> bytes:
    """The Fetch librdkafka sends (``offsets``: one per partition; empty: no topic listed, as an
    incremental fetch of a session whose partitions did not move)."""
    body = FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=52_428_800,
        isolation_level=isolation,
        session_id=session_id,
        session_epoch=epoch,
        topics=[
            FetchTopic(
                topic_id=topic_id,
                partitions=[
                    FetchPartition(
                        partition=p, current_leader_epoch=0, fetch_offset=o, partition_max_bytes=1_048_576
                    )
                    for p, o in enumerate(offsets)
                ],
            )
        ]
        if offsets
        else [],
        forgotten_topics_data=[],
        rack_id="",
    )
    return frame(1, FETCH_VERSION, fetch.REQUEST_ENCODERS[FETCH_VERSION](body))


async def measure(partitions: int, args: argparse.Namespace) -> dict[str, float]:
    async with filled_broker("fetch-cpu-bench-", "t", partitions, args.messages, args.records) as (
        broker,
        pipeline,
        client,
    ):
        topic = broker.services.topics.get("t")
        ends = [broker.services.logs.get("t", p).high_watermark for p in range(partitions)]
        full = fetch_frame(topic.topic_id, [0] * partitions, args.isolation, 500)
        empty = fetch_frame(topic.topic_id, ends, args.isolation, 0)
        result: dict[str, float] = {}
        profiler = cProfile.Profile(time.process_time) if args.profile else None
        for name, f in (("full", full), ("empty", empty)):
            best = float("inf")
            for _ in range(args.rounds):
                if profiler is not None and name == "full":
                    profiler.enable()
                start = time.process_time()
                out = pipeline.handle(f, client)
                best = min(best, time.process_time() - start)
                if profiler is not None:
                    profiler.disable()
                assert type(out) in (bytes, tuple), out  # a large answer, in parts
                if name == "full":
                    result["bytes"] = len(out) if type(out) is bytes else sum(map(len, out))
            result[name] = best
        result["incremental"] = incremental(pipeline, client, topic.topic_id, ends, args)
        if profiler is not None:
            print(f"# profile: {partitions} partitions, full fetch, {args.rounds} rounds", file=sys.stderr)
            pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(args.profile)
        return result


def incremental(pipeline, client, topic_id, ends: list[int], args: argparse.Namespace) -> float | None:
    """CPU of an incremental Fetch (KIP-227) of a session holding every partition at its high
    watermark, listing none (what a caught-up Java or kafka-python consumer sends); None when the
    broker declines sessions."""
    out = pipeline.handle(fetch_frame(topic_id, ends, args.isolation, 0, session_id=0, epoch=0), client)
    assert type(out) is bytes, out
    opened = fetch.RESPONSE_DECODERS[FETCH_VERSION](out, 9)[0]
    if opened.session_id == 0:
        return None
    best = float("inf")
    for epoch in range(1, args.rounds + 1):
        f = fetch_frame(topic_id, [], args.isolation, 0, session_id=opened.session_id, epoch=epoch)
        start = time.process_time()
        out = pipeline.handle(f, client)
        best = min(best, time.process_time() - start)
        assert type(out) is bytes, out
        answer = fetch.RESPONSE_DECODERS[FETCH_VERSION](out, 9)[0]
        assert answer.error_code == 0 and answer.responses == [], answer
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", default="1,100,1000")
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--records", type=int, default=2000, help="records per Produce request")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--isolation", type=int, default=1, choices=[0, 1], help="1: read_committed")
    ap.add_argument("--profile", type=int, default=0, help="print the top N of a cProfile")
    ap.add_argument(
        "--broker-root", type=Path, action="append", default=[], help="another checkout to compare"
    )
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.json:
        print(json.dumps(run_here(measure, args)))
        return
    child = [
        f"--partitions={args.partitions}",
        f"--messages={args.messages}",
        f"--records={args.records}",
        f"--rounds={args.rounds}",
        f"--isolation={args.isolation}",
    ]
    here = run_here(measure, args)
    others = {str(root): run_at(__file__, root.resolve(), child) for root in args.broker_root}
    print(
        f"Fetch v{FETCH_VERSION} of every partition, {args.messages:,} records of {len(VALUE)} B, "
        f"isolation {args.isolation}; CPU per Fetch, best of {args.rounds}"
    )
    cols = ["this"] + [f"{r} (this faster by)" for r in others]
    print(
        "| partitions | MB | "
        + " | ".join(f"full: {c}" for c in cols)
        + " | "
        + " | ".join(f"empty: {c}" for c in cols)
        + " |"
    )
    print("| --- " * (2 + 2 * len(cols)) + "|")
    for n, r in here.items():
        cells = [f"{n:,}", f"{r['bytes'] / 1e6:.1f}"]
        for kind in ("full", "empty"):
            cells.append(f"{r[kind] * 1e3:.2f} ms")
            for o in others.values():
                cells.append(f"{o[n][kind] * 1e3:.2f} ms ({o[n][kind] / r[kind]:.2f}x)")
        print("| " + " | ".join(cells) + " |")
    print()
    print(
        "Caught up, nothing new: an incremental Fetch of a session of every partition (KIP-227), against"
        " the empty full Fetch a client without a session sends"
    )
    print("| partitions | incremental: this | " + " | ".join(f"{c}" for c in cols) + " |")
    print("| --- " * (2 + len(cols)) + "|")
    for n, r in here.items():
        inc = r.get("incremental")
        cells = [f"{n:,}", "declined" if inc is None else f"{inc * 1e3:.3f} ms"]
        for o in [r, *others.values()]:
            theirs = o[n].get("incremental") if o is not r else None
            base = o[n]["empty"] if o is not r else r["empty"]
            best = theirs if theirs is not None else base
            what = "incremental" if theirs is not None else "empty full"
            ratio = f" ({best / inc:.2f}x)" if inc else ""
            cells.append(f"{what} {best * 1e3:.3f} ms{ratio}")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
