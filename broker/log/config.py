"""Per-topic log configuration: Kafka's topic property names, their broker-level defaults, validation."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from broker.protocol.errors import ErrorCode, KafkaError


@dataclass(frozen=True)
class TopicSetting:
    name: str
    broker_key: str  # the broker property that supplies the default
    default: Any
    parse: Callable[[str], Any]
    doc: str
    check: Callable[[Any], bool] = lambda v: True
    rule: str = ""


def _int(s: str) -> int:
    return int(str(s).strip())


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(s: str) -> str:
        v = str(s).strip()
        if v not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return v

    return parse


def _ratio(s: str) -> float:
    return float(str(s).strip())


LONG_MAX = (1 << 63) - 1


def _policy(s: str) -> str:
    parts = [p.strip() for p in str(s).split(",") if p.strip()]
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise ValueError("must be delete, compact or delete,compact")
    return ",".join(parts)


TOPIC_SETTINGS: dict[str, TopicSetting] = {
    s.name: s
    for s in [
        TopicSetting(
            "segment.bytes",
            "log.segment.bytes",
            1073741824,
            _int,
            "Segment size before a roll.",
            lambda v: v >= 14,
            "at least 14",
        ),
        TopicSetting(
            "segment.ms",
            "log.roll.ms",
            604800000,
            _int,
            "Roll the active segment after this age.",
            lambda v: v >= 1,
            "at least 1",
        ),
        TopicSetting(
            "retention.ms",
            "log.retention.ms",
            604800000,
            _int,
            "Delete segments older than this (-1: keep forever).",
            lambda v: v >= -1,
            "-1 or more",
        ),
        TopicSetting(
            "retention.bytes",
            "log.retention.bytes",
            -1,
            _int,
            "Delete old segments beyond this size (-1: no limit).",
            lambda v: v >= -1,
            "-1 or more",
        ),
        TopicSetting(
            "max.message.bytes",
            "message.max.bytes",
            1048588,
            _int,
            "Largest record batch accepted.",
            lambda v: v >= 0,
            "0 or more",
        ),
        TopicSetting(
            "message.timestamp.type",
            "log.message.timestamp.type",
            "CreateTime",
            _choice("CreateTime", "LogAppendTime"),
            "Timestamps from producers or the broker.",
        ),
        TopicSetting("cleanup.policy", "log.cleanup.policy", "delete", _policy, "delete and/or compact."),
        TopicSetting(
            "delete.retention.ms",
            "log.cleaner.delete.retention.ms",
            86400000,
            _int,
            "Keep tombstones this long in a compacted log.",
            lambda v: v >= 0,
            "0 or more",
        ),
        TopicSetting(
            "min.compaction.lag.ms",
            "log.cleaner.min.compaction.lag.ms",
            0,
            _int,
            "A record stays uncompacted at least this long.",
            lambda v: v >= 0,
            "0 or more",
        ),
        TopicSetting(
            "max.compaction.lag.ms",
            "log.cleaner.max.compaction.lag.ms",
            LONG_MAX,
            _int,
            "A record becomes eligible for compaction at most this long after it is written.",
            lambda v: v >= 1,
            "at least 1",
        ),
        TopicSetting(
            "min.cleanable.dirty.ratio",
            "log.cleaner.min.cleanable.ratio",
            0.5,
            _ratio,
            "Compact once this share of the log is not yet compacted.",
            lambda v: 0 <= v <= 1,
            "between 0 and 1",
        ),
        TopicSetting(
            "index.interval.bytes",
            "log.index.interval.bytes",
            4096,
            _int,
            "Bytes between offset index entries.",
            lambda v: v >= 0,
            "0 or more",
        ),
        TopicSetting(
            "min.insync.replicas",
            "min.insync.replicas",
            1,
            _int,
            "Minimum in-sync replicas for acks=all (always met: one replica).",
            lambda v: v >= 1,
            "at least 1",
        ),
    ]
}


def parse_topic_config(name: str, raw: str | None) -> Any:
    """Validate one topic config value; KafkaError(INVALID_CONFIG) with a message when it is bad."""
    setting = TOPIC_SETTINGS.get(name)
    if setting is None:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"unknown topic config {name!r}")
    if raw is None:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name} needs a value")
    try:
        value = setting.parse(raw)
    except (ValueError, TypeError) as e:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"invalid value {raw!r} for {name}: {e}") from None
    if not setting.check(value):
        raise KafkaError(
            ErrorCode.INVALID_CONFIG, f"invalid value {raw!r} for {name}: must be {setting.rule}"
        )
    return value


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int
    segment_ms: int
    retention_ms: int
    retention_bytes: int
    max_message_bytes: int
    log_append_time: bool
    cleanup_policy: str
    index_interval_bytes: int
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5

    @classmethod
    def resolve(cls, broker_defaults: Mapping[str, Any], overrides: Mapping[str, str]) -> LogConfig:
        v = effective(broker_defaults, overrides)
        return cls(
            segment_bytes=v["segment.bytes"],
            segment_ms=v["segment.ms"],
            retention_ms=v["retention.ms"],
            retention_bytes=v["retention.bytes"],
            max_message_bytes=v["max.message.bytes"],
            log_append_time=v["message.timestamp.type"] == "LogAppendTime",
            cleanup_policy=v["cleanup.policy"],
            index_interval_bytes=v["index.interval.bytes"],
            delete_retention_ms=v["delete.retention.ms"],
            min_compaction_lag_ms=v["min.compaction.lag.ms"],
            max_compaction_lag_ms=v["max.compaction.lag.ms"],
            min_cleanable_dirty_ratio=v["min.cleanable.dirty.ratio"],
        )


def effective(broker_defaults: Mapping[str, Any], overrides: Mapping[str, str]) -> dict[str, Any]:
    """Every topic setting's value: the topic override, else the broker default, else Kafka's."""
    out: dict[str, Any] = {}
    for name, s in TOPIC_SETTINGS.items():
        if name in overrides:
            out[name] = s.parse(overrides[name])
        elif s.broker_key in broker_defaults:
            out[name] = s.parse(str(broker_defaults[s.broker_key]))
        else:
            out[name] = s.default
    return out
