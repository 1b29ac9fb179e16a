"""Per-topic log configuration: every topic config Kafka 4.x defines (its LogConfig), with Kafka's
types, defaults, validators and error messages, the broker properties that supply the defaults
(ServerTopicConfigSynonyms), and the resolved :class:`LogConfig` a partition log runs with.

Validation follows Kafka's ConfigDef: a value is parsed by its type (INT and LONG as Java parses
them, BOOLEAN case-insensitively, LIST split on commas), then checked by the setting's validator;
a failure is INVALID_CONFIG with Kafka's text, ``Invalid value <v> for configuration <name>:
<reason>``. Unknown names are ``Unknown topic config name: <name>``. Cross-setting checks
(:func:`validate_topic_configs`) run on the merged broker defaults and topic overrides, as Kafka's
``LogConfig.validate`` does: ``min.compaction.lag.ms`` may not exceed ``max.compaction.lag.ms``,
and ``remote.storage.enable=true`` is refused because this broker has no tiered storage.

What each setting does on this single-node broker is listed in the README ("Topic configs").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from broker.protocol.errors import ErrorCode, KafkaError

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1
# The values' syntax, compiled by the first value parsed (re keeps the compiled pattern): no start-up
# parses a topic setting, and compiling the three at import cost ~0.15 ms of every start.
_INTEGER = r"[+-]?[0-9]+"
_DOUBLE = r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)"
_COMMA = r"\s*,\s*"

#: topic compression.type values (Kafka's BrokerCompressionType, in its order) and their batch codecs
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
#: KIP-390 levels: (min, max, default) as Kafka's CompressionType defines them; gzip also takes -1
GZIP_LEVELS = (1, 9, -1)
LZ4_LEVELS = (1, 17, 9)
ZSTD_LEVELS = (-131072, 22, 3)

TIERED_STORAGE_DISABLED = (
    "Tiered Storage functionality is disabled in the broker. "
    "Topic cannot be configured with remote log storage."
)


class ConfigValueError(ValueError):
    """A value that does not parse or validate; ``shown`` is the value as Kafka prints it."""

    def __init__(self, reason: str, shown: Any = None):
        super().__init__(reason)
        self.shown = shown


# ---------------------------------------------------------------------------------------------
# types (ConfigDef.parseType)


def _java_int(bits: int) -> Callable[[str], int]:
    bound = (1 << (bits - 1)) - 1
    kind = "INT" if bits == 32 else "LONG"

    def parse(s: str) -> int:
        t = str(s).strip()
        # more than 19 significant digits is out of range before int() (which refuses > 4300 digits)
        if (
            not re.fullmatch(_INTEGER, t)
            or len(t.lstrip("+-").lstrip("0")) > 19
            or not -bound - 1 <= int(t) <= bound
        ):
            raise ConfigValueError(f"Not a number of type {kind}")
        return int(t)

    return parse


def _double(s: str) -> float:
    t = str(s).strip()
    if not re.fullmatch(_DOUBLE, t):
        raise ConfigValueError("Not a number of type DOUBLE")
    return float(t.rstrip("fFdD"))


def _boolean(s: str) -> bool:
    t = str(s).strip().lower()
    if t not in ("true", "false"):
        raise ConfigValueError("Expected value to be either true or false")
    return t == "true"


def _string(s: str) -> str:
    return str(s).strip()


def _list(s: str) -> list[str]:
    t = str(s).strip()
    return [] if not t else re.split(_COMMA, t)


PARSERS: dict[str, Callable[[str], Any]] = {
    "INT": _java_int(32),
    "LONG": _java_int(64),
    "DOUBLE": _double,
    "BOOLEAN": _boolean,
    "STRING": _string,
    "LIST": _list,
}


# ---------------------------------------------------------------------------------------------
# validators (ConfigDef.Range, ValidString, ValidList, ...): raise ConfigValueError


def _fmt_num(v: Any) -> str:
    return str(v)


def at_least(low: int) -> Callable[[Any], None]:
    def check(v: Any) -> None:
        if v < low:
            raise ConfigValueError(f"Value must be at least {low}", v)

    return check


def between(low: int, high: int) -> Callable[[Any], None]:
    def check(v: Any) -> None:
        if v < low:
            raise ConfigValueError(f"Value must be at least {low}", v)
        if v > high:
            raise ConfigValueError(f"Value must be no more than {high}", v)

    return check


def one_of(*allowed: str) -> Callable[[Any], None]:
    def check(v: Any) -> None:
        if v not in allowed:
            raise ConfigValueError(f"String must be one of: {', '.join(allowed)}", v)

    return check


def each_one_of(*allowed: str) -> Callable[[Any], None]:
    def check(values: list[str]) -> None:
        for v in values:
            one_of(*allowed)(v)

    return check


def gzip_level(v: int) -> None:
    low, high, default = GZIP_LEVELS
    if v > high or (v < low and v != default):
        raise ConfigValueError(f"Value must be between {low} and {high} or equal to {default}", v)


def throttled_replicas(values: list[str]) -> None:
    """Kafka's ThrottledReplicaListValidator: ``*`` alone, or ``partition:broker`` pairs."""
    if values == ["*"] or not values:
        return
    if any(not re.fullmatch(r"[0-9]+:[0-9]+", v.strip()) for v in values):
        raise ConfigValueError(
            "Must be the wildcard '*' or a list of 'partitionId:brokerId' pairs "
            "(for example 0:1,1:2); each broker id must be an integer",
            ",".join(values),
        )


def _no_check(v: Any) -> None:
    return None


# ---------------------------------------------------------------------------------------------
# the settings


class TopicSetting(NamedTuple):  # not a dataclass: see broker.config.Setting
    """A topic-level setting: its Kafka name, type, default, check and broker synonyms."""

    name: str
    kind: str  # Kafka's ConfigDef type: INT, LONG, DOUBLE, BOOLEAN, STRING, LIST
    default: Any
    doc: str
    validate: Callable[[Any], None] = _no_check
    #: broker properties that supply the default, by precedence, with a factor to this unit
    #: (log.retention.hours -> ms: 3600000); the first is the one Kafka names as the synonym
    synonyms: tuple[tuple[str, int], ...] = ()

    @property
    def broker_key(self) -> str | None:
        return self.synonyms[0][0] if self.synonyms else None

    def parse(self, raw: str) -> Any:
        """The value of ``raw``: ConfigValueError when it does not parse or validate."""
        value = PARSERS[self.kind](raw)
        self.validate(value)
        return value


HOUR = 3600000
MINUTE = 60000


def _s(name: str, kind: str, default: Any, doc: str, validate=_no_check, *synonyms: Any) -> TopicSetting:
    syn = tuple(s if isinstance(s, tuple) else (s, 1) for s in synonyms)
    return TopicSetting(name, kind, default, doc, validate, syn)


_SETTINGS = [
    # segments
    _s("segment.bytes", "INT", 1073741824, "Segment size before a roll.", at_least(14), "log.segment.bytes"),
    _s(
        "segment.ms",
        "LONG",
        604800000,
        "Roll the active segment after this age.",
        at_least(1),
        "log.roll.ms",
        ("log.roll.hours", HOUR),
    ),
    _s(
        "segment.jitter.ms",
        "LONG",
        0,
        "Up to this much is subtracted at random from segment.ms for each new segment.",
        at_least(0),
        "log.roll.jitter.ms",
        ("log.roll.jitter.hours", HOUR),
    ),
    _s(
        "segment.index.bytes",
        "INT",
        10485760,
        "Size of a segment's offset index (accepted; this broker's sparse index is sized by its entries).",
        at_least(4),
        "log.index.size.max.bytes",
    ),
    _s(
        "index.interval.bytes",
        "INT",
        4096,
        "Bytes between offset index entries.",
        at_least(0),
        "log.index.interval.bytes",
    ),
    _s(
        "preallocate",
        "BOOLEAN",
        False,
        "Preallocate a new segment file to segment.bytes (accepted; files grow as written).",
        _no_check,
        "log.preallocate",
    ),
    _s(
        "file.delete.delay.ms",
        "LONG",
        60000,
        "Wait before deleting a file (accepted; readers keep deleted segments open, so they go at once).",
        at_least(0),
        "log.segment.delete.delay.ms",
    ),
    # durability
    _s(
        "flush.messages",
        "LONG",
        LONG_MAX,
        "With log.flush=never: fsync the partition once this many messages are unflushed.",
        at_least(1),
        "log.flush.interval.messages",
    ),
    _s(
        "flush.ms",
        "LONG",
        LONG_MAX,
        "With log.flush=never: fsync the partition when its oldest unflushed message is this old.",
        at_least(0),
        "log.flush.scheduler.interval.ms",
    ),
    _s(
        "min.insync.replicas",
        "INT",
        1,
        "acks=all produces fail with NOT_ENOUGH_REPLICAS when fewer replicas (here: one) are in sync.",
        at_least(1),
        "min.insync.replicas",
    ),
    _s(
        "unclean.leader.election.enable",
        "BOOLEAN",
        False,
        "Elect an out-of-sync replica as a last resort (no effect: one replica).",
        _no_check,
        "unclean.leader.election.enable",
    ),
    # retention
    _s(
        "retention.ms",
        "LONG",
        604800000,
        "Delete segments older than this (-1: keep forever).",
        at_least(-1),
        "log.retention.ms",
        ("log.retention.minutes", MINUTE),
        ("log.retention.hours", HOUR),
    ),
    _s(
        "retention.bytes",
        "LONG",
        -1,
        "Delete old segments beyond this size (-1: no limit).",
        _no_check,
        "log.retention.bytes",
    ),
    _s(
        "local.retention.ms",
        "LONG",
        -2,
        "Local retention with tiered storage (-2: retention.ms); without it, retention.ms applies.",
        at_least(-2),
        "log.local.retention.ms",
    ),
    _s(
        "local.retention.bytes",
        "LONG",
        -2,
        "Local retention with tiered storage (-2: retention.bytes); without it, retention.bytes applies.",
        at_least(-2),
        "log.local.retention.bytes",
    ),
    _s(
        "cleanup.policy",
        "LIST",
        "delete",
        "delete and/or compact.",
        each_one_of("compact", "delete"),
        "log.cleanup.policy",
    ),
    _s(
        "delete.retention.ms",
        "LONG",
        86400000,
        "Keep tombstones this long in a compacted log.",
        at_least(0),
        "log.cleaner.delete.retention.ms",
    ),
    _s(
        "min.compaction.lag.ms",
        "LONG",
        0,
        "A record stays uncompacted at least this long.",
        at_least(0),
        "log.cleaner.min.compaction.lag.ms",
    ),
    _s(
        "max.compaction.lag.ms",
        "LONG",
        LONG_MAX,
        "A record becomes eligible for compaction at most this long after it is written.",
        at_least(1),
        "log.cleaner.max.compaction.lag.ms",
    ),
    _s(
        "min.cleanable.dirty.ratio",
        "DOUBLE",
        0.5,
        "Compact once this share of the log is not yet compacted.",
        between(0, 1),
        "log.cleaner.min.cleanable.ratio",
    ),
    # messages
    _s(
        "max.message.bytes",
        "INT",
        1048588,
        "Largest record batch accepted.",
        at_least(0),
        "message.max.bytes",
    ),
    _s(
        "compression.type",
        "STRING",
        "producer",
        "Codec of stored batches: producer keeps the producer's; any other recompresses batches that differ.",
        one_of(*COMPRESSION_TYPES),
        "compression.type",
    ),
    _s(
        "compression.gzip.level",
        "INT",
        -1,
        "gzip level when the broker compresses (-1: zlib's default, 6).",
        gzip_level,
        "compression.gzip.level",
    ),
    _s(
        "compression.lz4.level",
        "INT",
        9,
        "lz4 level when the broker compresses (9: the fast compressor; others: LZ4 HC).",
        between(*LZ4_LEVELS[:2]),
        "compression.lz4.level",
    ),
    _s(
        "compression.zstd.level",
        "INT",
        3,
        "zstd level when the broker compresses.",
        between(*ZSTD_LEVELS[:2]),
        "compression.zstd.level",
    ),
    _s(
        "message.timestamp.type",
        "STRING",
        "CreateTime",
        "Timestamps from producers or the broker.",
        one_of("CreateTime", "LogAppendTime"),
        "log.message.timestamp.type",
    ),
    _s(
        "message.timestamp.before.max.ms",
        "LONG",
        LONG_MAX,
        "CreateTime more than this before the broker's clock is INVALID_TIMESTAMP.",
        at_least(0),
        "log.message.timestamp.before.max.ms",
    ),
    _s(
        "message.timestamp.after.max.ms",
        "LONG",
        3600000,
        "CreateTime more than this after the broker's clock is INVALID_TIMESTAMP.",
        at_least(0),
        "log.message.timestamp.after.max.ms",
    ),
    # replication and tiered storage (accepted; one node, no remote storage)
    _s(
        "leader.replication.throttled.replicas",
        "LIST",
        "",
        "Replicas throttled on the leader side (no effect: no replication).",
        throttled_replicas,
    ),
    _s(
        "follower.replication.throttled.replicas",
        "LIST",
        "",
        "Replicas throttled on the follower side (no effect: no replication).",
        throttled_replicas,
    ),
    _s("remote.storage.enable", "BOOLEAN", False, "Tiered storage (true is refused: not supported)."),
    _s("remote.log.copy.disable", "BOOLEAN", False, "Stop copying to tiered storage (no effect)."),
    _s("remote.log.delete.on.disable", "BOOLEAN", False, "Delete tiered data when disabled (no effect)."),
]
TOPIC_SETTINGS: dict[str, TopicSetting] = {s.name: s for s in _SETTINGS}
#: broker property -> the topic setting it supplies, and its factor (log.roll.hours -> segment.ms)
BROKER_SYNONYMS: dict[str, tuple[str, int]] = {
    key: (s.name, factor) for s in _SETTINGS for key, factor in s.synonyms
}


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def parse_topic_config(name: str, raw: str | None) -> Any:
    """Validate one topic config value; KafkaError(INVALID_CONFIG) with Kafka's message when it is bad."""
    setting = TOPIC_SETTINGS.get(name)
    if setting is None:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
    if raw is None:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {name}")
    try:
        return setting.parse(raw)
    except ConfigValueError as e:
        shown = raw if e.shown is None else _shown(e.shown)
        raise KafkaError(
            ErrorCode.INVALID_CONFIG, f"Invalid value {shown} for configuration {name}: {e}"
        ) from None


def canonical(name: str, raw: str | None) -> str:
    """A topic config value validated (KafkaError INVALID_CONFIG) in canonical text form."""
    value = parse_topic_config(name, raw)
    return _shown(value)


def effective(broker_defaults: Mapping[str, Any], overrides: Mapping[str, str]) -> dict[str, Any]:
    """Every topic setting's value: the topic override, else the broker default (keyed by the
    setting's first synonym, as ``Config.log_defaults`` gives them), else Kafka's default."""
    out: dict[str, Any] = {}
    for name, s in TOPIC_SETTINGS.items():
        if name in overrides:
            out[name] = s.parse(overrides[name])
        elif s.broker_key is not None and s.broker_key in broker_defaults:
            value = broker_defaults[s.broker_key]
            out[name] = s.parse(_shown(value)) if not isinstance(value, list) else value
        else:
            out[name] = s.parse(_shown(s.default))
    return out


def validate_topic_configs(broker_defaults: Mapping[str, Any], overrides: Mapping[str, str]) -> None:
    """Kafka's cross-setting checks on the merged configs (LogConfig.validate); each value must
    already be valid on its own."""
    for name, raw in overrides.items():
        parse_topic_config(name, raw)
    v = effective(broker_defaults, overrides)
    low, high = v["min.compaction.lag.ms"], v["max.compaction.lag.ms"]
    if low > high:
        raise KafkaError(
            ErrorCode.INVALID_CONFIG,
            f"conflict topic config setting min.compaction.lag.ms ({low}) > max.compaction.lag.ms ({high})",
        )
    if v["remote.storage.enable"]:
        raise KafkaError(ErrorCode.INVALID_CONFIG, TIERED_STORAGE_DISABLED)


class LogConfig(NamedTuple):
    """A partition log's effective settings, resolved from the topic's configs and the broker's."""

    segment_bytes: int
    segment_ms: int
    retention_ms: int
    retention_bytes: int
    max_message_bytes: int
    log_append_time: bool
    cleanup_policy: str
    index_interval_bytes: int
    #: the codec batches are stored with (0-4), or None for compression.type=producer
    compression: int | None = None
    #: the level of ``compression`` (None: the codec's default)
    compression_level: int | None = None
    timestamp_before_max_ms: int = LONG_MAX
    timestamp_after_max_ms: int = LONG_MAX
    min_insync_replicas: int = 1
    segment_jitter_ms: int = 0
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5

    @classmethod
    def resolve(cls, broker_defaults: Mapping[str, Any], overrides: Mapping[str, str]) -> LogConfig:
        v = effective(broker_defaults, overrides)
        ctype = v["compression.type"]
        codec = None if ctype == "producer" else CODECS[ctype]
        level = {
            1: v["compression.gzip.level"],
            3: v["compression.lz4.level"],
            4: v["compression.zstd.level"],
        }
        return cls(
            segment_bytes=v["segment.bytes"],
            segment_ms=v["segment.ms"],
            retention_ms=v["retention.ms"],
            retention_bytes=v["retention.bytes"],
            max_message_bytes=v["max.message.bytes"],
            log_append_time=v["message.timestamp.type"] == "LogAppendTime",
            cleanup_policy=",".join(v["cleanup.policy"]),
            index_interval_bytes=v["index.interval.bytes"],
            compression=codec,
            compression_level=level.get(codec) if codec is not None else None,
            timestamp_before_max_ms=v["message.timestamp.before.max.ms"],
            timestamp_after_max_ms=v["message.timestamp.after.max.ms"],
            min_insync_replicas=v["min.insync.replicas"],
            segment_jitter_ms=v["segment.jitter.ms"],
            flush_messages=v["flush.messages"],
            flush_ms=v["flush.ms"],
            delete_retention_ms=v["delete.retention.ms"],
            min_compaction_lag_ms=v["min.compaction.lag.ms"],
            max_compaction_lag_ms=v["max.compaction.lag.ms"],
            min_cleanable_dirty_ratio=v["min.cleanable.dirty.ratio"],
        )
