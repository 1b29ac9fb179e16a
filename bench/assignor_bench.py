"""Server-side assignor benchmark (KIP-848 ``uniform`` and ``range``).

    python bench/assignor_bench.py [--runs 7] [--small-runs 301]

Times one ``assign`` call (inputs built beforehand), median of several runs, for:

(a) 100 members, 1 topic of 50 partitions;
(b) 1,000 members, 1,000 topics of 50 partitions each (50,000 partitions), all members subscribed
    to every topic (homogeneous). Members are given distinct but equal subscription sets of the
    same topic id objects, as a coordinator resolving names through one registry would build them.

each *initial* (no current assignment) and *incremental* (the members of the initial result, minus
the first member, with their current target assignments: one member left).

Bars, for the uniform assignor only: (a) 0.2 ms and (b) 200 ms, i.e. within 10x of Kafka's JMH
numbers (about 0.02 ms and 15-20 ms). The range assignor is timed too, without a bar.
Exit status 1 if a bar is missed.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from broker.coordinator.assignors import ASSIGNORS, MemberSpec, TopicInfo  # noqa: E402

SMALL_BAR_MS = 0.2
LARGE_BAR_MS = 200.0


def build(num_members: int, num_topics: int, partitions_per_topic: int):
    topic_ids = [uuid.UUID(int=(i + 1) * 0x9E3779B97F4A7C15 % (1 << 128)) for i in range(num_topics)]
    topics = {t: TopicInfo(f"topic-{i}", partitions_per_topic) for i, t in enumerate(topic_ids)}
    members = {
        f"member-{i:05d}": MemberSpec(rack_id=None, subscribed_topic_ids=frozenset(topic_ids))
        for i in range(num_members)
    }
    return members, topics


def after_leave(members, assignment):
    """The group after its first member left, each member carrying its current target."""
    gone = min(members)
    return {
        m: MemberSpec(spec.rack_id, spec.subscribed_topic_ids, assignment[m])
        for m, spec in members.items()
        if m != gone
    }


def median_ms(fn, runs: int) -> float:
    fn()  # warm up
    samples = []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1000.0)
    finally:
        if gc_was_enabled:
            gc.enable()
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7, help="runs of the large cases")
    parser.add_argument("--small-runs", type=int, default=301, help="runs of the small cases")
    args = parser.parse_args()

    cases = [
        ("100 members x 1 topic x 50 partitions", build(100, 1, 50), args.small_runs, SMALL_BAR_MS),
        (
            "1000 members x 1000 topics x 50000 partitions",
            build(1000, 1000, 50),
            args.runs,
            LARGE_BAR_MS,
        ),
    ]
    missed = False
    print(f"assignor bench (python {sys.version.split()[0]}), median of runs; bars are for uniform only")
    for assignor_name in ("uniform", "range"):
        assignor = ASSIGNORS[assignor_name]
        for label, (members, topics), runs, bar in cases:
            initial = assignor.assign(members, topics)
            incremental_members = after_leave(members, initial)
            for kind, group in (("initial", members), ("incremental", incremental_members)):
                ms = median_ms(lambda group=group: assignor.assign(group, topics), runs)
                if assignor_name == "uniform":
                    ok = ms <= bar
                    missed |= not ok
                    verdict = f"bar {bar:g} ms {'ok' if ok else 'MISSED'}"
                else:
                    verdict = "no bar"
                print(f"{assignor_name:8} {label:47} {kind:12} {ms:9.3f} ms  ({verdict}, {runs} runs)")
    print(
        "bars: 0.2 ms and 200 ms, within 10x of Kafka's JMH 0.02 ms and 15-20 ms; "
        + ("MISSED" if missed else "all met")
    )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
