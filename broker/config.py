"""Broker configuration, keyed by Kafka's own property names.

Values come from (lowest to highest precedence) the defaults below, a ``.properties`` file, and
``--config key=value`` pairs. Unknown keys are kept and logged, as Kafka does, so a real
``server.properties`` can be reused.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

LONG_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class Setting:
    name: str
    type: type
    default: Any
    doc: str
    minimum: int | None = None
    choices: tuple[str, ...] | None = None
    maximum: int | None = None


_SETTINGS = [
    Setting("node.id", int, 1, "This broker's node id.", 0),
    Setting("host", str, "127.0.0.1", "Address to listen on."),
    Setting("port", int, 9092, "TCP port to listen on (0 picks a free one).", 0),
    Setting("advertised.host", str, "", "Host name given to clients in metadata (default: host)."),
    Setting("advertised.port", int, 0, "Port given to clients in metadata (default: the bound port).", 0),
    Setting("log.dirs", str, "./kafka-data", "Data directory."),
    Setting("auto.create.topics.enable", bool, True, "Create unknown topics named in Metadata requests."),
    Setting("num.partitions", int, 1, "Partitions of an auto-created topic.", 1),
    Setting("default.replication.factor", int, 1, "Replication factor reported for topics.", 1),
    Setting("socket.request.max.bytes", int, 104857600, "Largest request frame accepted.", 1),
    Setting("connections.max.idle.ms", int, 600000, "Close connections idle this long.", 1),
    Setting(
        "max.connections",
        int,
        2147483647,
        "Most open connections; at the limit new ones wait until one closes.",
        0,
    ),
    Setting(
        "max.connections.per.ip",
        int,
        2147483647,
        "Most connections from one address; more are closed at once.",
        0,
    ),
    Setting(
        "max.connections.per.ip.overrides",
        str,
        "",
        "Per-address limits overriding max.connections.per.ip: host:count,host:count.",
    ),
    Setting("broker.rack", str, "", "Rack id reported in metadata (empty: none)."),
    Setting(
        "log.flush",
        str,
        "interval",
        "When appends are fsynced: always (before each ack), interval (group commit), never.",
        choices=("always", "interval", "never"),
    ),
    Setting("log.flush.interval.ms", int, 5, "Group-commit window for log.flush=interval.", 0),
    Setting("log.segment.bytes", int, 1073741824, "Segment size before a roll.", 14),
    Setting("log.roll.ms", int, 604800000, "Roll the active segment after this age.", 1),
    Setting("log.retention.ms", int, 604800000, "Delete segments older than this (-1: never).", -1),
    Setting("log.retention.hours", int, 168, "Retention in hours (log.retention.ms wins when set).", -1),
    Setting("log.retention.bytes", int, -1, "Per-partition size limit (-1: none).", -1),
    Setting("log.retention.check.interval.ms", int, 300000, "How often retention runs.", 1),
    Setting("message.max.bytes", int, 1048588, "Largest record batch accepted.", 0),
    Setting(
        "log.message.timestamp.type",
        str,
        "CreateTime",
        "Record timestamps from producers (CreateTime) or the broker (LogAppendTime).",
        choices=("CreateTime", "LogAppendTime"),
    ),
    Setting(
        "log.cleanup.policy",
        str,
        "delete",
        "Default cleanup policy of topics.",
        choices=("delete", "compact", "delete,compact", "compact,delete"),
    ),
    Setting("log.index.interval.bytes", int, 4096, "Bytes between offset index entries.", 0),
    Setting("log.cleaner.enable", bool, True, "Compact the coordinator log in the background."),
    Setting("log.cleaner.backoff.ms", int, 15000, "How often the cleaner looks for a log to compact.", 1),
    Setting(
        "log.cleaner.min.cleanable.ratio",
        float,
        0.5,
        "Compact once this share of the closed segments' bytes is not yet compacted.",
        0,
    ),
    Setting(
        "log.cleaner.delete.retention.ms", int, 86400000, "Keep tombstones this long in a compacted log.", 0
    ),
    Setting("log.roll.hours", int, 168, "Segment roll age in hours (log.roll.ms wins when set).", 1),
    Setting("log.roll.jitter.ms", int, 0, "Random jitter subtracted from a new segment's roll age.", 0),
    Setting("log.roll.jitter.hours", int, 0, "Roll jitter in hours (log.roll.jitter.ms wins when set).", 0),
    Setting("log.retention.minutes", int, 10080, "Retention in minutes (log.retention.ms wins).", -1),
    Setting("log.index.size.max.bytes", int, 10485760, "Default segment.index.bytes (accepted).", 4),
    Setting("log.preallocate", bool, False, "Default preallocate (accepted; files grow as written)."),
    Setting("log.segment.delete.delay.ms", int, 60000, "Default file.delete.delay.ms (accepted).", 0),
    Setting(
        "log.flush.interval.messages",
        int,
        LONG_MAX,
        "Default flush.messages: with log.flush=never, fsync a partition after this many messages.",
        1,
    ),
    Setting(
        "log.flush.scheduler.interval.ms",
        int,
        LONG_MAX,
        "Default flush.ms: with log.flush=never, fsync when the oldest unflushed message is that old.",
        0,
    ),
    Setting(
        "log.cleaner.min.compaction.lag.ms", int, 0, "Default min.compaction.lag.ms of compacted topics.", 0
    ),
    Setting(
        "log.cleaner.max.compaction.lag.ms", int, LONG_MAX, "Default max.compaction.lag.ms of topics.", 1
    ),
    Setting("unclean.leader.election.enable", bool, False, "Default of topics (no effect: one replica)."),
    Setting(
        "compression.type",
        str,
        "producer",
        "Default codec of topics: producer (keep the producer's) or one the broker recompresses to.",
        choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    ),
    Setting("compression.gzip.level", int, -1, "gzip level of broker compression (-1, 1-9).", -1, maximum=9),
    Setting("compression.lz4.level", int, 9, "lz4 level of broker compression (1-17).", 1, maximum=17),
    Setting("compression.zstd.level", int, 3, "zstd level of broker compression.", -131072, maximum=22),
    Setting(
        "log.message.timestamp.before.max.ms",
        int,
        LONG_MAX,
        "CreateTime more than this before the broker's clock is refused (INVALID_TIMESTAMP).",
        0,
    ),
    Setting(
        "log.message.timestamp.after.max.ms",
        int,
        3600000,
        "CreateTime more than this after the broker's clock is refused (INVALID_TIMESTAMP).",
        0,
    ),
    Setting("log.local.retention.ms", int, -2, "Default local.retention.ms (tiered storage only).", -2),
    Setting("log.local.retention.bytes", int, -2, "Default local.retention.bytes (tiered storage only).", -2),
    Setting("log.message.downconversion.enable", bool, True, "Deprecated no-op (no down-conversion)."),
    Setting("offsets.topic.segment.bytes", int, 104857600, "Segment size of the __consumer_offsets log.", 14),
    Setting("min.insync.replicas", int, 1, "Reported default for topics (one replica always).", 1),
    Setting("group.min.session.timeout.ms", int, 6000, "Smallest session timeout a member may ask for.", 0),
    Setting("group.max.session.timeout.ms", int, 1800000, "Largest session timeout a member may ask for.", 0),
    Setting("group.initial.rebalance.delay.ms", int, 3000, "Wait for more members when a group forms.", 0),
    Setting("group.max.size", int, 2147483647, "Most members in one classic group.", 1),
    Setting("offset.metadata.max.bytes", int, 4096, "Largest metadata string kept with an offset.", 0),
    Setting("offsets.retention.minutes", int, 10080, "Keep offsets of an empty group this long.", 1),
    Setting("offsets.retention.check.interval.ms", int, 600000, "How often offsets expire.", 1),
    Setting("group.consumer.session.timeout.ms", int, 45000, "Session timeout of consumer-group members.", 1),
    Setting("group.consumer.heartbeat.interval.ms", int, 5000, "Heartbeat interval given to members.", 1),
    Setting("group.consumer.min.session.timeout.ms", int, 45000, "Smallest per-group session timeout.", 1),
    Setting("group.consumer.max.session.timeout.ms", int, 60000, "Largest per-group session timeout.", 1),
    Setting(
        "group.consumer.min.heartbeat.interval.ms", int, 5000, "Smallest per-group heartbeat interval.", 1
    ),
    Setting(
        "group.consumer.max.heartbeat.interval.ms", int, 15000, "Largest per-group heartbeat interval.", 1
    ),
    Setting("group.consumer.max.size", int, 2147483647, "Most members in one consumer group.", 1),
    Setting(
        "group.consumer.assignors", str, "uniform,range", "Server-side assignors; the first is the default."
    ),
    Setting(
        "group.consumer.migration.policy",
        str,
        "bidirectional",
        "Online conversion between classic and consumer groups: bidirectional, upgrade, downgrade, disabled.",
        choices=("bidirectional", "upgrade", "downgrade", "disabled"),
    ),
]
SETTINGS: dict[str, Setting] = {s.name: s for s in _SETTINGS}


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the key."""


def _coerce(setting: Setting, raw: Any) -> Any:
    if setting.type is bool:
        if isinstance(raw, bool):
            return raw
        s = str(raw).strip().lower()
        if s not in ("true", "false"):
            raise ConfigError(f"{setting.name}: expected true or false, got {raw!r}")
        return s == "true"
    try:
        value = setting.type(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{setting.name}: expected {setting.type.__name__}, got {raw!r}") from None
    if setting.minimum is not None and value < setting.minimum:
        raise ConfigError(f"{setting.name}: must be at least {setting.minimum}, got {value}")
    if setting.maximum is not None and value > setting.maximum:
        raise ConfigError(f"{setting.name}: must be at most {setting.maximum}, got {value}")
    if setting.name == "compression.gzip.level" and value == 0:
        raise ConfigError("compression.gzip.level: must be between 1 and 9 or equal to -1, got 0")
    if setting.choices is not None and isinstance(value, str) and value.lower() in setting.choices:
        value = value.lower()  # Kafka reads enumerated values case-insensitively
    if setting.choices is not None and value not in setting.choices:
        raise ConfigError(f"{setting.name}: must be one of {', '.join(setting.choices)}, got {value!r}")
    if setting.name == "max.connections.per.ip.overrides":
        parse_ip_overrides(value)
    return value


def parse_ip_overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: comma-separated ``host:count`` (host a name or an
    address; an IPv6 address may be bracketed). Raises ConfigError naming the bad entry."""
    out: dict[str, int] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host or not count.strip().isdigit():
            raise ConfigError(f"max.connections.per.ip.overrides: expected host:count, got {item!r}")
        out[host] = int(count)
    return out


class Config:
    """Typed view over the merged properties: ``config["num.partitions"]`` -> int."""

    def __init__(self, values: Mapping[str, Any] | None = None):
        self._values: dict[str, Any] = {s.name: s.default for s in _SETTINGS}
        self.explicit: set[str] = set()
        self.unknown: dict[str, str] = {}
        for key, raw in (values or {}).items():
            self.set(key, raw)

    def set(self, key: str, raw: Any) -> None:
        setting = SETTINGS.get(key)
        if setting is None:
            self.unknown[key] = str(raw)
            log.info("ignoring unknown config %s=%s", key, raw)
            return
        self._values[key] = _coerce(setting, raw)
        self.explicit.add(key)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def log_defaults(self) -> dict[str, Any]:
        """Broker-level defaults of topic configs, keyed by the topic setting's first broker synonym
        (``log.retention.ms`` for retention.ms), resolved as Kafka resolves them: the first synonym
        set explicitly wins (log.retention.ms, then .minutes, then .hours), converted to the
        setting's unit; with none set, the first synonym's default."""
        from broker.log.config import TOPIC_SETTINGS  # the topic settings name their broker synonyms

        out: dict[str, Any] = {}
        for setting in TOPIC_SETTINGS.values():
            known = [(k, f) for k, f in setting.synonyms if k in self._values]
            if not known:
                continue
            key, factor = next(((k, f) for k, f in known if k in self.explicit), known[0])
            value = self._values[key]
            if factor != 1 and isinstance(value, int):
                value = -1 if value < 0 else value * factor
            out[known[0][0]] = value
        return out

    @property
    def data_dir(self) -> Path:
        return Path(self["log.dirs"].split(",")[0])


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties`` subset: ``key=value`` or ``key: value`` lines, ``#``/``!`` comments."""
    out: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in s:
                k, v = s.split(sep, 1)
                out[k.strip()] = v.strip()
                break
        else:
            raise ConfigError(f"line {lineno}: expected key=value, got {line!r}")
    return out


def parse_pairs(pairs: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in pairs:
        if "=" not in p:
            raise ConfigError(f"--config expects key=value, got {p!r}")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out
