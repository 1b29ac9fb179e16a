"""The Java producer and consumer (kafka-clients 3.9) against the broker, through
tests/java/ProduceConsumeProbe.java.

The producer runs with its default settings, which in 3.x mean an idempotent producer with
acks=all: InitProducerId, sequence numbers per partition, up to 5 requests in flight. One JVM
produces 10,000 keyed records with known timestamps, reads them back with assign() +
seekToBeginning, and asks beginningOffsets / endOffsets / offsetsForTimes.
"""

from __future__ import annotations

import time
from collections import defaultdict

import pytest

from broker.log.journal import batch_ends
from broker.log.records import iter_records
from tests.support.java import json_lines, require_java
from tests.support.produce_consume import value_of as support_value_of

pytestmark = [pytest.mark.java, pytest.mark.usefixtures("java_clients")]

N = 10_000
PARTS = 4


def value_of(i: int) -> str:
    """The value ProduceConsumeProbe.java gives record i (the Python tests' value, as a string)."""
    return support_value_of(i).decode()


def test_java_producer_and_consumer_round_trip(broker):
    java = require_java()
    broker.call(broker.broker.create_topic, "jt", PARTS)
    base_ts = int(time.time() * 1000) - 60_000
    ks = [0, 1, 2500, 5000, 5001, 9999]
    stamps = [base_ts - 1000] + [base_ts + k for k in ks] + [base_ts + N]
    commands = [f"produce jt {N} {base_ts}", f"consume jt {N}", f"offsets jt {','.join(map(str, stamps))}"]
    result = java.run("ProduceConsumeProbe", [broker.bootstrap, *commands], timeout=120)
    lines = json_lines(result.stdout)
    assert [line["cmd"] for line in lines] == ["produce", "consume", "offsets"], result
    failed = [line for line in lines if "error" in line]
    assert result.returncode == 0 and not failed, f"{failed}\nstderr:\n{result.stderr[-4000:]}"
    produced, consumed, offsets = lines

    # the producer really was idempotent: one producer id holds sequence state on every partition
    assert (produced["idempotence"], produced["acksConfig"]) == (True, "-1")
    pids = broker.call(
        lambda: [set(broker.broker.logs.get("jt", p).producers.producers) for p in range(PARTS)]
    )
    assert all(len(s) == 1 for s in pids) and len(set().union(*pids)) == 1, pids

    # acks: per partition, offsets 0..n-1 in produce order
    acks = produced["acks"]
    assert len(acks) == N
    per_part: dict[int, list[tuple]] = defaultdict(list)
    for i, (p, off) in enumerate(acks):
        per_part[p].append((off, base_ts + i, str(i), value_of(i)))
    assert sorted(per_part) == list(range(PARTS))
    for p, recs in per_part.items():
        assert [r[0] for r in recs] == list(range(len(recs))), f"partition {p}"

    # consumed: exactly the acknowledged records, each partition in produce order
    records = consumed["records"]
    assert len(records) == N
    assert {(k, v) for *_, k, v in records} == {(str(i), value_of(i)) for i in range(N)}
    got: dict[int, list[tuple]] = defaultdict(list)
    for p, off, ts, k, v in records:
        got[p].append((off, ts, k, v))
    for p in range(PARTS):
        assert got[p] == per_part[p], f"partition {p}"

    # ListOffsets through the consumer
    counts = {str(p): len(per_part[p]) for p in range(PARTS)}
    assert offsets["beginning"] == {str(p): 0 for p in range(PARTS)}
    assert offsets["end"] == counts
    expected_for_times = []
    for ts in stamps:
        found = {}
        for p in range(PARTS):
            match = next(((off, t) for off, t, _, _ in per_part[p] if t >= ts), None)
            found[str(p)] = list(match) if match else None
        expected_for_times.append({"ts": ts, "found": found})
    assert offsets["forTimes"] == expected_for_times


def test_java_compressed_batches_read_by_python_clients(broker):
    """The Java producer with each compression codec (its own gzip/snappy/lz4/zstd libraries), read
    back by the Java consumer and by kafka-python."""
    from kafka import KafkaConsumer, TopicPartition

    java = require_java()
    codecs = ["gzip", "snappy", "lz4", "zstd"]
    n = 500
    for codec in codecs:
        broker.call(broker.broker.create_topic, f"jz-{codec}", 1)
    base_ts = int(time.time() * 1000) - 60_000
    commands = [f"produce jz-{c} {n} {base_ts} compression.type={c},linger.ms=20" for c in codecs]
    commands += [f"consume jz-{c} {n}" for c in codecs]
    result = java.run("ProduceConsumeProbe", [broker.bootstrap, *commands], timeout=120)
    lines = json_lines(result.stdout)
    failed = [line for line in lines if "error" in line]
    assert result.returncode == 0 and len(lines) == len(commands) and not failed, (
        f"{failed}\nstderr:\n{result.stderr[-4000:]}"
    )
    expected = [[0, i, base_ts + i, str(i), value_of(i)] for i in range(n)]
    for codec, produced, consumed in zip(codecs, lines[: len(codecs)], lines[len(codecs) :], strict=True):
        assert produced["acks"] == [[0, i] for i in range(n)], codec
        assert consumed["records"] == expected, codec

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        for c_id, codec in enumerate(codecs, start=1):
            topic = f"jz-{codec}"
            stored = broker.call(lambda t=topic: broker.broker.logs.get(t, 0).read(0, 1 << 30))
            assert {info.compression for *_, info in iter_records(stored)} == {c_id}, codec
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            got = []
            deadline = time.monotonic() + 30
            while len(got) < n and time.monotonic() < deadline:
                for recs in consumer.poll(timeout_ms=200).values():
                    got += [
                        [r.partition, r.offset, r.timestamp, r.key.decode(), r.value.decode()] for r in recs
                    ]
            assert got == expected, codec
    finally:
        consumer.close()


def test_java_produce_requests_larger_than_one_read(broker):
    """kafka-clients 4.x sends Produce v13 (topics by id); with large batches a request spans
    several socket reads, and the broker gathers it into one writable frame. Every record is
    acknowledged once, in order per partition, and reads back (a request over 64 kB used to close
    the connection: its topic id was decoded from that frame's bytearray)."""
    java = require_java()
    n, parts = 40_000, 4
    broker.call(broker.broker.create_topic, "jbig", parts)
    base_ts = int(time.time() * 1000) - 60_000
    settings = "linger.ms=200,batch.size=400000,max.request.size=4000000"
    commands = [f"produce jbig {n} {base_ts} {settings}", f"consume jbig {n}"]
    result = java.run("ProduceConsumeProbe", [broker.bootstrap, *commands], timeout=120)
    lines = json_lines(result.stdout)
    failed = [line for line in lines if "error" in line]
    assert result.returncode == 0 and len(lines) == 2 and not failed, (
        f"{failed}\nstderr:\n{result.stderr[-4000:]}"
    )
    produced, consumed = lines
    per_part: dict[int, list[int]] = defaultdict(list)
    for p, off in produced["acks"]:
        per_part[p].append(off)
    assert sorted(per_part) == list(range(parts))
    assert all(offs == list(range(len(offs))) for offs in per_part.values())
    assert sorted((r[3], r[4]) for r in consumed["records"]) == sorted(
        (str(i), value_of(i)) for i in range(n)
    )
    # the requests really were larger than one read: some stored batch alone exceeds 64 kB
    sizes = []
    for p in range(parts):
        ends = [
            end for end, _next in batch_ends(broker.call(broker.broker.logs.get("jbig", p).read, 0, 1 << 30))
        ]
        sizes += [b - a for a, b in zip([0, *ends], ends, strict=False)]
    assert max(sizes) > 64 * 1024, max(sizes)
