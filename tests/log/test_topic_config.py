"""Topic configs (broker/log/config.py): every setting Kafka 4.x defines, with Kafka's types, ranges
and error texts; broker defaults through synonyms; cross-setting checks; the resolved LogConfig."""

from __future__ import annotations

import pytest

from broker.config import Config
from broker.log.config import (
    LONG_MAX,
    TIERED_STORAGE_DISABLED,
    TOPIC_SETTINGS,
    LogConfig,
    canonical,
    effective,
    parse_topic_config,
    validate_topic_configs,
)
from broker.protocol.errors import ErrorCode, KafkaError

#: the topic configs of Kafka 4.x's LogConfig
KAFKA_TOPIC_CONFIGS = {
    "cleanup.policy": "LIST",
    "compression.gzip.level": "INT",
    "compression.lz4.level": "INT",
    "compression.type": "STRING",
    "compression.zstd.level": "INT",
    "delete.retention.ms": "LONG",
    "file.delete.delay.ms": "LONG",
    "flush.messages": "LONG",
    "flush.ms": "LONG",
    "follower.replication.throttled.replicas": "LIST",
    "index.interval.bytes": "INT",
    "leader.replication.throttled.replicas": "LIST",
    "local.retention.bytes": "LONG",
    "local.retention.ms": "LONG",
    "max.compaction.lag.ms": "LONG",
    "max.message.bytes": "INT",
    "message.timestamp.after.max.ms": "LONG",
    "message.timestamp.before.max.ms": "LONG",
    "message.timestamp.type": "STRING",
    "min.cleanable.dirty.ratio": "DOUBLE",
    "min.compaction.lag.ms": "LONG",
    "min.insync.replicas": "INT",
    "preallocate": "BOOLEAN",
    "remote.log.copy.disable": "BOOLEAN",
    "remote.log.delete.on.disable": "BOOLEAN",
    "remote.storage.enable": "BOOLEAN",
    "retention.bytes": "LONG",
    "retention.ms": "LONG",
    "segment.bytes": "INT",
    "segment.index.bytes": "INT",
    "segment.jitter.ms": "LONG",
    "segment.ms": "LONG",
    "unclean.leader.election.enable": "BOOLEAN",
}


def refused(name: str, value: str | None) -> str:
    with pytest.raises(KafkaError) as e:
        parse_topic_config(name, value)
    assert e.value.code == ErrorCode.INVALID_CONFIG
    return e.value.message


def test_every_kafka_topic_config_with_its_type():
    assert {n: s.kind for n, s in TOPIC_SETTINGS.items()} == KAFKA_TOPIC_CONFIGS


def test_unknown_names_and_null_values_keep_kafkas_errors():
    assert refused("compression.codec", "lz4") == "Unknown topic config name: compression.codec"
    assert refused("message.format.version", "3.0") == "Unknown topic config name: message.format.version"
    assert "compression.type" in refused("compression.type", None)


# (name, value, Kafka's message after "Invalid value V for configuration NAME: ")
BAD = [
    ("segment.bytes", "13", "13", "Value must be at least 14"),
    ("segment.bytes", "2147483648", "2147483648", "Not a number of type INT"),
    ("segment.bytes", "1_000", "1_000", "Not a number of type INT"),
    ("segment.ms", "0", "0", "Value must be at least 1"),
    ("segment.ms", "1.5", "1.5", "Not a number of type LONG"),
    ("segment.jitter.ms", "-1", "-1", "Value must be at least 0"),
    ("segment.index.bytes", "3", "3", "Value must be at least 4"),
    ("index.interval.bytes", "-1", "-1", "Value must be at least 0"),
    ("flush.messages", "0", "0", "Value must be at least 1"),
    ("flush.ms", "-1", "-1", "Value must be at least 0"),
    ("retention.ms", "-2", "-2", "Value must be at least -1"),
    ("retention.bytes", "x", "x", "Not a number of type LONG"),
    ("retention.bytes", "9223372036854775808", "9223372036854775808", "Not a number of type LONG"),
    ("local.retention.ms", "-3", "-3", "Value must be at least -2"),
    ("local.retention.bytes", "-3", "-3", "Value must be at least -2"),
    ("file.delete.delay.ms", "-1", "-1", "Value must be at least 0"),
    ("delete.retention.ms", "-1", "-1", "Value must be at least 0"),
    ("min.compaction.lag.ms", "-1", "-1", "Value must be at least 0"),
    ("max.compaction.lag.ms", "0", "0", "Value must be at least 1"),
    ("min.cleanable.dirty.ratio", "1.5", "1.5", "Value must be no more than 1"),
    ("min.cleanable.dirty.ratio", "-0.1", "-0.1", "Value must be at least 0"),
    ("min.cleanable.dirty.ratio", "half", "half", "Not a number of type DOUBLE"),
    ("max.message.bytes", "-1", "-1", "Value must be at least 0"),
    ("min.insync.replicas", "0", "0", "Value must be at least 1"),
    ("cleanup.policy", "compact,shred", "shred", "String must be one of: compact, delete"),
    ("cleanup.policy", "compact,", "", "String must be one of: compact, delete"),
    (
        "compression.type",
        "LZ4",
        "LZ4",
        "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
    ),
    (
        "compression.type",
        "none",
        "none",
        "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
    ),
    ("compression.gzip.level", "0", "0", "Value must be between 1 and 9 or equal to -1"),
    ("compression.gzip.level", "10", "10", "Value must be between 1 and 9 or equal to -1"),
    ("compression.gzip.level", "-2", "-2", "Value must be between 1 and 9 or equal to -1"),
    ("compression.lz4.level", "0", "0", "Value must be at least 1"),
    ("compression.lz4.level", "18", "18", "Value must be no more than 17"),
    ("compression.zstd.level", "23", "23", "Value must be no more than 22"),
    ("compression.zstd.level", "-131073", "-131073", "Value must be at least -131072"),
    (
        "message.timestamp.type",
        "createtime",
        "createtime",
        "String must be one of: CreateTime, LogAppendTime",
    ),
    ("message.timestamp.before.max.ms", "-1", "-1", "Value must be at least 0"),
    ("message.timestamp.after.max.ms", "-1", "-1", "Value must be at least 0"),
    ("preallocate", "yes", "yes", "Expected value to be either true or false"),
    ("unclean.leader.election.enable", "1", "1", "Expected value to be either true or false"),
    ("remote.storage.enable", "on", "on", "Expected value to be either true or false"),
]


@pytest.mark.parametrize(("name", "raw", "shown", "reason"), BAD, ids=[f"{b[0]}={b[1]}" for b in BAD])
def test_invalid_values_get_kafkas_messages(name, raw, shown, reason):
    assert refused(name, raw) == f"Invalid value {shown} for configuration {name}: {reason}"


GOOD = [
    ("segment.bytes", " 14 ", 14, "14"),
    ("segment.ms", "+100", 100, "100"),
    ("retention.ms", "-1", -1, "-1"),
    ("retention.bytes", "-5", -5, "-5"),  # no validator in Kafka: any long
    ("retention.bytes", str(LONG_MAX), LONG_MAX, str(LONG_MAX)),
    ("local.retention.ms", "-2", -2, "-2"),
    ("min.cleanable.dirty.ratio", "0", 0.0, "0.0"),
    ("min.cleanable.dirty.ratio", "1", 1.0, "1.0"),
    ("cleanup.policy", "compact , delete", ["compact", "delete"], "compact,delete"),
    ("cleanup.policy", "", [], ""),
    ("compression.type", "zstd", "zstd", "zstd"),
    ("compression.gzip.level", "-1", -1, "-1"),
    ("compression.gzip.level", "9", 9, "9"),
    ("compression.lz4.level", "17", 17, "17"),
    ("compression.zstd.level", "-131072", -131072, "-131072"),
    ("preallocate", "TRUE", True, "true"),
    ("message.timestamp.type", "LogAppendTime", "LogAppendTime", "LogAppendTime"),
    ("leader.replication.throttled.replicas", "*", ["*"], "*"),
    ("follower.replication.throttled.replicas", "0:1,1:1", ["0:1", "1:1"], "0:1,1:1"),
    ("remote.storage.enable", "false", False, "false"),
]


@pytest.mark.parametrize(("name", "raw", "value", "text"), GOOD, ids=[f"{g[0]}={g[1]}" for g in GOOD])
def test_valid_values_parse_and_canonicalize(name, raw, value, text):
    assert parse_topic_config(name, raw) == value
    assert canonical(name, raw) == text


def test_throttled_replicas_must_be_a_wildcard_or_pairs():
    assert refused("leader.replication.throttled.replicas", "0-1").startswith(
        "Invalid value 0-1 for configuration leader.replication.throttled.replicas: Must be the wildcard"
    )


def test_cross_setting_checks():
    validate_topic_configs({}, {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "10"})
    with pytest.raises(KafkaError) as e:
        validate_topic_configs({}, {"min.compaction.lag.ms": "11", "max.compaction.lag.ms": "10"})
    assert e.value.message == (
        "conflict topic config setting min.compaction.lag.ms (11) > max.compaction.lag.ms (10)"
    )
    # the broker default takes part too
    with pytest.raises(KafkaError):
        validate_topic_configs({"log.cleaner.max.compaction.lag.ms": 5}, {"min.compaction.lag.ms": "6"})
    with pytest.raises(KafkaError) as e:
        validate_topic_configs({}, {"remote.storage.enable": "true"})
    assert (e.value.code, e.value.message) == (ErrorCode.INVALID_CONFIG, TIERED_STORAGE_DISABLED)
    validate_topic_configs({}, {"remote.storage.enable": "false", "local.retention.ms": "-2"})


def test_broker_defaults_come_through_the_synonyms_in_kafkas_order():
    config = Config({"log.retention.hours": "2", "log.roll.hours": "3", "compression.type": "gzip"})
    v = effective(config.log_defaults(), {})
    assert (v["retention.ms"], v["segment.ms"], v["compression.type"]) == (2 * 3600000, 3 * 3600000, "gzip")
    config = Config({"log.retention.hours": "2", "log.retention.minutes": "5", "log.roll.ms": "7"})
    v = effective(config.log_defaults(), {})
    assert (v["retention.ms"], v["segment.ms"]) == (5 * 60000, 7)
    config = Config({"log.retention.ms": "9", "log.retention.minutes": "5"})
    assert effective(config.log_defaults(), {})["retention.ms"] == 9
    assert effective(Config({"log.retention.hours": "-1"}).log_defaults(), {})["retention.ms"] == -1
    # the topic override wins over all of them
    assert effective(config.log_defaults(), {"retention.ms": "1"})["retention.ms"] == 1


def test_defaults_are_kafkas():
    v = effective(Config().log_defaults(), {})
    assert v["compression.type"] == "producer"
    assert (v["compression.gzip.level"], v["compression.lz4.level"], v["compression.zstd.level"]) == (
        -1,
        9,
        3,
    )
    assert (v["message.timestamp.before.max.ms"], v["message.timestamp.after.max.ms"]) == (LONG_MAX, 3600000)
    assert (v["flush.messages"], v["flush.ms"], v["segment.jitter.ms"]) == (LONG_MAX, LONG_MAX, 0)
    assert (v["local.retention.ms"], v["local.retention.bytes"], v["remote.storage.enable"]) == (
        -2,
        -2,
        False,
    )
    assert v["cleanup.policy"] == ["delete"] and v["min.cleanable.dirty.ratio"] == 0.5


def test_resolved_log_config():
    cfg = LogConfig.resolve(
        {},
        {
            "compression.type": "zstd",
            "compression.zstd.level": "7",
            "compression.gzip.level": "2",
            "message.timestamp.after.max.ms": "10",
            "min.insync.replicas": "2",
            "cleanup.policy": "compact,delete",
        },
    )
    assert (cfg.compression, cfg.compression_level, cfg.timestamp_after_max_ms) == (4, 7, 10)
    assert (cfg.min_insync_replicas, cfg.cleanup_policy) == (2, "compact,delete")
    assert (
        LogConfig.resolve({}, {"compression.type": "gzip", "compression.gzip.level": "2"}).compression_level
        == 2
    )
    assert LogConfig.resolve({}, {"compression.type": "snappy"}).compression == 2
    assert LogConfig.resolve({}, {"compression.type": "uncompressed"}).compression == 0
    producer = LogConfig.resolve({}, {})
    assert (producer.compression, producer.compression_level) == (None, None)


def test_broker_compression_settings_are_validated():
    from broker.config import ConfigError

    for key, value in [
        ("compression.type", "brotli"),
        ("compression.gzip.level", "0"),
        ("compression.gzip.level", "10"),
        ("compression.lz4.level", "18"),
        ("compression.zstd.level", "23"),
        ("log.message.timestamp.after.max.ms", "-1"),
    ]:
        with pytest.raises(ConfigError):
            Config({key: value})
    assert Config({"compression.type": "LZ4"})["compression.type"] == "lz4"


def test_segment_jitter_rolls_segments_earlier(tmp_path, monkeypatch):
    from broker.log import partition as partition_module
    from broker.log import records
    from broker.log.batch import validate_produce

    picked: list[int] = []
    monkeypatch.setattr(partition_module.random, "randrange", lambda n: (picked.append(n), n - 1)[1])
    cfg = LogConfig.resolve({}, {"segment.ms": "10000", "segment.jitter.ms": "60000"})
    plog = partition_module.PartitionLog(tmp_path / "p", "t", 0, cfg)
    assert picked == [10000]  # below min(segment.jitter.ms, segment.ms)
    created_ms = int(plog.active.created * 1000)
    for i in range(2):
        data = bytearray(records.simple_batch([b"v"]))
        plog.append(data, validate_produce(data), created_ms + 2 + i)  # 2 ms old: past 10000 - 9999
    assert len(plog.segments) == 2
    plog.close()
