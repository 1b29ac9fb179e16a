"""Topic configs and ListOffsets through real clients: confluent-kafka (librdkafka), the Java Admin
(tests/java/AdminProbe.java) and kafka-python create and alter topics with every compression.type,
producers' batches are recompressed as Kafka recompresses them (checked on the batches a Fetch
returns), KIP-937 timestamp bounds, min.insync.replicas, tiered storage refused, and ListOffsets
MAX_TIMESTAMP answered record-exact (KAFKA-16310) to all three clients."""

from __future__ import annotations

import time

import pytest

from broker.log.batch import TIMESTAMP_TYPE_MASK, iter_batches
from broker.log.config import TIERED_STORAGE_DISABLED
from broker.log.records import iter_records
from tests.support.java import json_lines, require_java
from tests.support.produce_consume import fetch_request, value_of
from tests.support.wire import WireClient

FETCH = 1
TIMEOUT = 20.0
CODECS = ["uncompressed", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {"uncompressed": 0, "none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def admin(broker):
    """One confluent-kafka AdminClient per broker (its futures die with a collected client)."""
    from confluent_kafka.admin import AdminClient

    client = getattr(broker, "_confluent_admin", None)
    if client is None:
        client = broker._confluent_admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    return client


def create(broker, name: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import NewTopic

    futures = admin(broker).create_topics([NewTopic(name, 1, 1, config=configs)], request_timeout=TIMEOUT)
    futures[name].result(TIMEOUT)


def topic_config(broker, name: str) -> dict:
    from confluent_kafka.admin import ConfigResource, ResourceType

    resource = ConfigResource(ResourceType.TOPIC, name)
    (future,) = admin(broker).describe_configs([resource], request_timeout=TIMEOUT).values()
    return future.result(TIMEOUT)


def stored_batches(broker, topic: str) -> list:
    """The batches a Fetch from offset 0 returns: what consumers receive."""
    with WireClient(broker.port, timeout=TIMEOUT) as c:
        resp = c.call(FETCH, 12, fetch_request(topic, min_bytes=1, max_wait_ms=0))
    records = resp.responses[0].partitions[0].records or b""
    return list(iter_batches(records)), bytes(records)


def produce(broker, topic: str, values: list[bytes], timestamps: list[int] | None = None, **conf) -> list:
    """One flush of ``values`` (linger long enough to make one batch); the delivery errors."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 200, **conf})
    errors: list = []
    for i, v in enumerate(values):
        ts = timestamps[i] if timestamps else 0
        producer.produce(topic, value=v, partition=0, timestamp=ts, on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(TIMEOUT) == 0
    return errors


# ---------------------------------------------------------------- creating and altering


@pytest.mark.parametrize("codec", CODECS + ["producer"])
def test_confluent_creates_and_alters_compression_type(broker, codec):
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        ResourceType,
    )

    create(broker, "t", {"compression.type": codec})
    entry = topic_config(broker, "t")["compression.type"]
    assert (entry.value, entry.source) == (codec, ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert [(s.name, s.value) for s in entry.synonyms.values()][-1] == ("compression.type", "producer")
    other = "zstd" if codec != "zstd" else "lz4"
    resource = ConfigResource(
        ResourceType.TOPIC,
        "t",
        incremental_configs=[
            ConfigEntry("compression.type", other, incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("compression.zstd.level", "9", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    (future,) = admin(broker).incremental_alter_configs([resource]).values()
    future.result(TIMEOUT)
    got = topic_config(broker, "t")
    assert (got["compression.type"].value, got["compression.zstd.level"].value) == (other, "9")
    plog = broker.broker.logs.get("t", 0)
    assert plog.config.compression == CODEC_IDS[other]


def test_confluent_gets_kafkas_config_errors(broker):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    cases = {
        "a": (
            {"compression.type": "brotli"},
            "Invalid value brotli for configuration compression.type: "
            "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
        ),
        "b": (
            {"compression.lz4.level": "18"},
            "Invalid value 18 for configuration compression.lz4.level: Value must be no more than 17",
        ),
        "c": ({"compression.type.x": "gzip"}, "Unknown topic config name: compression.type.x"),
        "d": (
            {"remote.storage.enable": "true"},
            TIERED_STORAGE_DISABLED,
        ),
    }
    futures = admin(broker).create_topics(
        [NewTopic(name, 1, 1, config=cfg) for name, (cfg, _m) in cases.items()], request_timeout=TIMEOUT
    )
    for name, (_cfg, message) in cases.items():
        with pytest.raises(KafkaException) as e:
            futures[name].result(TIMEOUT)
        err = e.value.args[0]
        assert (err.name(), err.str()) == ("INVALID_CONFIG", message)
    assert broker.broker.topics.get("a") is None


def test_java_admin_creates_and_alters_every_codec(broker):
    java = require_java()
    commands = []
    for codec in CODECS:
        commands += [f"create j-{codec} 1 compression.type={codec} compression.gzip.level=5"]
    commands += ["alter j-lz4 compression.type=gzip compression.gzip.level=9", "configs j-lz4"]
    commands += ["create j-bad 1 compression.zstd.level=23"]
    result = java.run("AdminProbe", [broker.bootstrap, *commands], timeout=90)
    lines = json_lines(result.stdout)
    assert [line["cmd"] for line in lines] == [c.split()[0] for c in commands], result
    for codec, line in zip(CODECS, lines, strict=False):
        assert "error" not in line, line
        assert line["configs"]["compression.type"] == [codec, "DYNAMIC_TOPIC_CONFIG"]
        assert line["configs"]["compression.gzip.level"] == ["5", "DYNAMIC_TOPIC_CONFIG"]
        assert line["configs"]["compression.lz4.level"] == ["9", "DEFAULT_CONFIG"]
    alter, described, bad = lines[len(CODECS) :]
    assert "error" not in alter
    entry = described["entries"]["compression.type"]
    assert (entry["value"], entry["source"], entry["type"]) == ("gzip", "DYNAMIC_TOPIC_CONFIG", "STRING")
    assert entry["synonyms"] == [
        ["compression.type", "gzip", "DYNAMIC_TOPIC_CONFIG"],
        ["compression.type", "producer", "DEFAULT_CONFIG"],
    ]
    assert described["entries"]["compression.gzip.level"]["value"] == "9"
    assert described["entries"]["message.timestamp.after.max.ms"]["type"] == "LONG"
    assert bad["error"] == "org.apache.kafka.common.errors.InvalidConfigurationException"
    assert (
        bad["message"]
        == "Invalid value 23 for configuration compression.zstd.level: Value must be no more than 22"
    )
    assert broker.broker.logs.get("j-lz4", 0).config.compression == 1


# ---------------------------------------------------------------- recompression


@pytest.mark.parametrize(
    ("topic_codec", "producer_codec", "stored"),
    [
        ("lz4", "gzip", 3),
        ("lz4", "none", 3),
        ("producer", "gzip", 1),
        ("producer", "snappy", 2),
        ("uncompressed", "zstd", 0),
        ("zstd", "lz4", 4),
        ("gzip", "gzip", 1),
        ("snappy", "gzip", 2),
    ],
)
def test_producer_batches_are_stored_with_the_topic_codec(broker, topic_codec, producer_codec, stored):
    from confluent_kafka import Consumer

    create(broker, "t", {"compression.type": topic_codec})
    values = [(b"value-%d-" % i) * 30 for i in range(200)]
    assert produce(
        broker, "t", values, **{"compression.type": producer_codec, "enable.idempotence": True}
    ) == [None] * len(values)
    batches, raw = stored_batches(broker, "t")
    assert batches and {b.compression for b in batches} == {stored}
    assert all(b.producer_id >= 0 and b.base_sequence >= 0 for b in batches)  # idempotence kept
    assert [v for _o, _t, _k, v, _h, _i in iter_records(raw)] == values
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "g",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["t"])
    got: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    while len(got) < len(values) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert got == values


def test_log_append_time_topic_recompresses_and_stamps(broker):
    create(broker, "t", {"compression.type": "zstd", "message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    produce(broker, "t", [b"a" * 100, b"b" * 100], timestamps=[1000, 2000], **{"compression.type": "gzip"})
    (batch,), raw = stored_batches(broker, "t")
    assert batch.compression == 4 and batch.attributes & TIMESTAMP_TYPE_MASK
    assert batch.max_timestamp >= before
    assert {ts for _o, ts, *_ in iter_records(raw)} == {batch.max_timestamp}


# ---------------------------------------------------------------- timestamps and min.insync.replicas


def test_timestamps_outside_the_topic_bounds_are_refused(broker):
    from confluent_kafka import KafkaError

    create(broker, "t", {"message.timestamp.before.max.ms": "60000"})
    now = int(time.time() * 1000)
    errors = produce(broker, "t", [b"old"], timestamps=[now - 3_600_000], retries=0)
    assert [e.code() for e in errors] == [KafkaError.INVALID_TIMESTAMP]
    errors = produce(broker, "t", [b"future"], timestamps=[now + 2 * 3_600_000], retries=0)
    assert [e.code() for e in errors] == [KafkaError.INVALID_TIMESTAMP]  # 4.x default after.max.ms: 1 h
    assert produce(broker, "t", [b"now"], timestamps=[now]) == [None]
    assert broker.broker.logs.get("t", 0).log_end_offset == 1


def test_min_insync_replicas_above_one_refuses_acks_all(broker):
    from confluent_kafka import KafkaError

    create(broker, "t", {"min.insync.replicas": "2"})
    errors = produce(broker, "t", [b"x"], acks="all", retries=0, **{"enable.idempotence": False})
    assert [e.code() for e in errors] == [KafkaError.NOT_ENOUGH_REPLICAS]
    assert produce(broker, "t", [b"y"], acks=1, **{"enable.idempotence": False}) == [None]


# ---------------------------------------------------------------- ListOffsets MAX_TIMESTAMP


@pytest.fixture
def three_records(broker, request):
    """A topic holding one batch: timestamps base+100, base+400, base+200 (max at offset 1)."""
    codec, timestamp_type = request.param
    create(broker, "t", {"message.timestamp.type": timestamp_type})
    base = int(time.time() * 1000) - 60_000
    stamps = [base + 100, base + 400, base + 200]
    values = [letter * 300 for letter in (b"a", b"b", b"c")]  # compressible: librdkafka keeps the codec
    assert produce(broker, "t", values, timestamps=stamps, **{"compression.type": codec}) == [None] * 3
    (batch,), _raw = stored_batches(broker, "t")
    assert batch.records_count == 3 and batch.compression == CODEC_IDS[codec]
    if timestamp_type == "LogAppendTime":
        return 0, batch.max_timestamp  # every record has the append time: the batch's first
    return 1, base + 400


CASES = [("none", "CreateTime"), ("gzip", "CreateTime"), ("zstd", "CreateTime"), ("lz4", "LogAppendTime")]


@pytest.mark.parametrize("three_records", CASES, indirect=True, ids=["-".join(c) for c in CASES])
def test_max_timestamp_through_three_clients(broker, three_records):
    from confluent_kafka import TopicPartition as CTopicPartition
    from confluent_kafka.admin import OffsetSpec as COffsetSpec
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.admin import OffsetSpec as KOffsetSpec

    offset, timestamp = three_records
    # confluent-kafka
    tp = CTopicPartition("t", 0)
    (future,) = (
        admin(broker).list_offsets({tp: COffsetSpec.max_timestamp()}, request_timeout=TIMEOUT).values()
    )
    info = future.result(TIMEOUT)
    assert (info.offset, info.timestamp) == (offset, timestamp)
    # kafka-python
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        got = kp.list_partition_offsets({KTopicPartition("t", 0): KOffsetSpec.MAX_TIMESTAMP})
    finally:
        kp.close()
    (answer,) = got.values()
    assert (answer.offset, answer.timestamp) == (offset, timestamp)
    # the Java Admin
    java = require_java()
    specs = ["max-timestamp", "earliest-local", "latest-tiered", "latest", "earliest"]
    result = java.run("AdminProbe", [broker.bootstrap, *[f"list-offsets t:0 {s}" for s in specs]], timeout=60)
    lines = json_lines(result.stdout)
    assert result.returncode == 0, result
    assert [(line["offset"], line["timestamp"]) for line in lines] == [
        (offset, timestamp),
        (0, -1),  # earliest local: the log start, without tiered storage
        (-1, -1),  # latest tiered: nothing is tiered
        (3, -1),
        (0, -1),
    ]
    assert lines[0]["leaderEpoch"] == 0 and lines[2]["leaderEpoch"] is None


def test_java_and_kafka_python_consumers_read_recompressed_batches(broker):
    """The Java producer sends gzip (snappy to the gzip topic); the broker stores each topic's codec;
    the Java consumer and kafka-python read every record back, with its timestamp."""
    from kafka import KafkaConsumer, TopicPartition

    java = require_java()
    n = 300
    targets = {"lz4": "gzip", "snappy": "gzip", "zstd": "gzip", "gzip": "snappy", "uncompressed": "lz4"}
    for target in targets:
        create(broker, f"r-{target}", {"compression.type": target})
    base_ts = int(time.time() * 1000) - 60_000
    commands = [
        f"produce r-{t} {n} {base_ts} compression.type={src},linger.ms=20" for t, src in targets.items()
    ]
    commands += [f"consume r-{t} {n}" for t in targets]
    result = java.run("ProduceConsumeProbe", [broker.bootstrap, *commands], timeout=120)
    lines = json_lines(result.stdout)
    failed = [line for line in lines if "error" in line]
    assert result.returncode == 0 and len(lines) == len(commands) and not failed, (
        f"{failed}\nstderr:\n{result.stderr[-4000:]}"
    )
    expected = [[0, i, base_ts + i, str(i), value_of(i).decode()] for i in range(n)]
    for target, consumed in zip(targets, lines[len(targets) :], strict=True):
        assert consumed["records"] == expected, target
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        for target in targets:
            batches, _raw = stored_batches(broker, f"r-{target}")
            assert {b.compression for b in batches} == {CODEC_IDS[target]}, target
            tp = TopicPartition(f"r-{target}", 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            got: list = []
            deadline = time.monotonic() + TIMEOUT
            while len(got) < n and time.monotonic() < deadline:
                for recs in consumer.poll(timeout_ms=200).values():
                    got += [
                        [r.partition, r.offset, r.timestamp, r.key.decode(), r.value.decode()] for r in recs
                    ]
            assert got == expected, target
    finally:
        consumer.close()


def test_compacted_topic_refuses_records_without_a_key(broker):
    from confluent_kafka import KafkaError, Producer

    create(broker, "c", {"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "retries": 0})
    results: list = []
    producer.produce("c", key=b"k", value=b"kept", partition=0, on_delivery=lambda e, m: results.append(e))
    assert producer.flush(TIMEOUT) == 0
    producer.produce("c", value=b"no key", partition=0, on_delivery=lambda e, m: results.append(e))
    assert producer.flush(TIMEOUT) == 0
    assert results[0] is None and results[1].code() == KafkaError.INVALID_RECORD
    assert broker.broker.logs.get("c", 0).log_end_offset == 1
