"""Broker configuration, keyed by Kafka's own property names.

Values come from (lowest to highest precedence) the defaults below, a ``.properties`` file, and
``--config key=value`` pairs. Unknown keys are kept and logged, as Kafka does, so a real
``server.properties`` can be reused.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

from broker.log.config import TOPIC_SETTINGS  # the topic settings name their broker synonyms
from broker.personas import PERSONAS  # the Kafka releases kafka.version can name

log = logging.getLogger(__name__)

LONG_MAX = (1 << 63) - 1


# Setting, Endpoint (and the other immutable records every start-up defines, which point here: the
# listener's ListenerSecurity and Bound, LogConfig, the handlers' Services, the log's AbortedTxn and
# CachedBatch...) are NamedTuples, not frozen dataclasses: a dataclass compiles its generated methods
# at import (~4.7M instructions each, a NamedTuple ~0.8M), a cost every broker start pays
# (bench/startup_bench.py).
class Setting(NamedTuple):
    name: str
    type: type
    default: Any
    doc: str
    minimum: int | None = None
    choices: tuple[str, ...] | None = None
    maximum: int | None = None


_SETTINGS = [
    Setting("node.id", int, 1, "This broker's node id.", 0),
    Setting("broker.id", int, -1, "Kafka's older name of node.id (used when node.id is not set).", -1),
    Setting("host", str, "127.0.0.1", "Address to listen on."),
    Setting("port", int, 9092, "TCP port to listen on (0 picks a free one).", 0, maximum=65535),
    Setting("advertised.host", str, "", "Host name given to clients in metadata (default: host)."),
    Setting(
        "advertised.port",
        int,
        0,
        "Port given to clients in metadata (default: the bound port).",
        0,
        maximum=65535,
    ),
    Setting(
        "listeners",
        str,
        "",
        "Kafka's listener list, NAME://host:port,... (wins over host/port when set).",
    ),
    Setting(
        "advertised.listeners",
        str,
        "",
        "Addresses given to clients per listener, NAME://host:port,... (default: listeners).",
    ),
    Setting(
        "listener.security.protocol.map",
        str,
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "Security protocol of each listener name, NAME:PROTOCOL,...",
    ),
    Setting(
        "controller.listener.names",
        str,
        "",
        "KRaft controller listeners: not opened here (this broker has no controller quorum).",
    ),
    Setting("ssl.keystore.type", str, "PEM", "Key store format of TLS listeners (PEM only)."),
    Setting("ssl.keystore.location", str, "", "PEM file with the TLS private key and certificate chain."),
    Setting("ssl.keystore.password", str, "", "Password of the key in ssl.keystore.location (PEM)."),
    Setting("ssl.key.password", str, "", "Password of the TLS private key (PEM)."),
    Setting("ssl.keystore.certificate.chain", str, "", "The TLS certificate chain as PEM text."),
    Setting("ssl.keystore.key", str, "", "The TLS private key as PEM text."),
    Setting("ssl.truststore.type", str, "PEM", "Trust store format (PEM only)."),
    Setting(
        "ssl.truststore.location", str, "", "PEM file of the CAs client certificates are checked against."
    ),
    Setting("ssl.truststore.certificates", str, "", "The trusted CAs as PEM text."),
    Setting(
        "ssl.client.auth",
        str,
        "none",
        "Client certificates on TLS listeners: none, requested or required (mTLS).",
        choices=("none", "requested", "required"),
    ),
    Setting(
        "ssl.principal.mapping.rules",
        str,
        "DEFAULT",
        "Client certificate subject -> principal name: RULE:pattern/replacement/[LU],...,DEFAULT.",
    ),
    Setting(
        "sasl.enabled.mechanisms",
        str,
        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "SASL mechanisms of SASL listeners (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER).",
    ),
    Setting("sasl.users", str, "", "SASL users of every mechanism: name:password,name:password."),
    Setting(
        "connections.max.reauth.ms",
        int,
        0,
        "SASL session lifetime: clients re-authenticate within it or are disconnected (0: no limit).",
        0,
    ),
    Setting(
        "sasl.oauthbearer.jwks.endpoint.url",
        str,
        "",
        "OAUTHBEARER: file:// path of a JWKS that signed tokens are verified against (unset: unsecured JWS).",
    ),
    Setting(
        "sasl.oauthbearer.expected.audience",
        str,
        "",
        "OAUTHBEARER (JWKS): accepted audiences, comma-separated.",
    ),
    Setting("sasl.oauthbearer.expected.issuer", str, "", "OAUTHBEARER (JWKS): the required issuer."),
    Setting(
        "sasl.oauthbearer.sub.claim.name", str, "sub", "OAUTHBEARER (JWKS): the claim holding the principal."
    ),
    Setting(
        "sasl.oauthbearer.scope.claim.name", str, "scope", "OAUTHBEARER (JWKS): the claim holding the scope."
    ),
    Setting("sasl.oauthbearer.clock.skew.seconds", int, 30, "OAUTHBEARER (JWKS): allowed clock skew.", 0),
    Setting(
        "authorizer.class.name",
        str,
        "",
        "Authorization by ACLs: org.apache.kafka.metadata.authorizer.StandardAuthorizer (or acl); "
        "empty: every client may do everything.",
        choices=("", "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "acl"),
    ),
    Setting("super.users", str, "", "Principals allowed everything by the authorizer: User:a;User:b."),
    Setting(
        "allow.everyone.if.no.acl.found",
        bool,
        False,
        "With an authorizer: allow an action on a resource no ACL applies to.",
    ),
    Setting(
        "connection.failed.authentication.delay.ms",
        int,
        100,
        "Delay before answering and closing a failed authentication.",
        0,
    ),
    Setting("log.dirs", str, "./kafka-data", "Data directory (one)."),
    Setting("log.dir", str, "/tmp/kafka-logs", "Data directory when log.dirs is not set (as Kafka)."),
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
    Setting(
        "log.flush.journal",
        bool,
        True,
        "With log.flush=always or interval: a group commit makes its appends durable with one "
        "fdatasync of the group-commit journal; segments are synced in the background.",
    ),
    Setting(
        "log.flush.journal.min.partitions",
        int,
        2,
        "With log.flush.journal: a group commit of at least this many partitions writes the journal; "
        "one of fewer fsyncs their segments directly.",
        1,
    ),
    Setting(
        "log.flush.journal.direct",
        bool,
        True,
        "With log.flush.journal: write the journal with direct I/O (O_DIRECT, in whole 4 KiB blocks) "
        "where the file system takes it, else through the page cache.",
    ),
    Setting(
        "log.flush.journal.sync.ms",
        int,
        2000,
        "With log.flush.journal: how often the background sync syncs the segments, writes the "
        "recovery checkpoint and deletes the journal files it covered.",
        1,
    ),
    Setting(
        "log.flush.journal.bytes",
        int,
        64 * 1024 * 1024,
        "With log.flush.journal: a journal file this large starts a background sync at once.",
        1,
    ),
    Setting(
        "log.max.open.files",
        int,
        0,
        "Most segment files open at once, least recently used closed first (0: half the soft "
        "RLIMIT_NOFILE the broker was started with, before serve raises it for connections; at "
        "least 64).",
        0,
    ),
    Setting("log.segment.bytes", int, 1073741824, "Segment size before a roll.", 14),
    Setting("log.roll.ms", int, 604800000, "Roll the active segment after this age.", 1),
    Setting("log.retention.ms", int, 604800000, "Delete segments older than this (-1: never).", -1),
    Setting("log.retention.hours", int, 168, "Retention in hours (log.retention.ms wins when set).", -1),
    Setting("log.retention.bytes", int, -1, "Per-partition size limit (-1: none).", -1),
    Setting("log.retention.check.interval.ms", int, 300000, "How often retention runs.", 1),
    Setting(
        "producer.id.expiration.ms",
        int,
        86400000,
        "A partition forgets an idempotent producer this long after its last batch's timestamp "
        "(not while its transaction is open); it may then write at any sequence.",
        1,
    ),
    Setting(
        "producer.id.expiration.check.interval.ms",
        int,
        600000,
        "How often partitions forget expired producers.",
        1,
    ),
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
    Setting(
        "log.cleaner.enable", bool, True, "Run the log cleaner (compacted topics and the coordinator log)."
    ),
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
    Setting("offsets.topic.segment.bytes", int, 104857600, "Segment size of the __consumer_offsets log.", 14),
    Setting(
        "offsets.topic.num.partitions",
        int,
        50,
        "Coordinator slots groups hash to (abs(hashCode(group)) % this); with cluster.nodes > 1 each "
        "slot's leader is the group's coordinator.",
        1,
    ),
    Setting(
        "offsets.topic.replication.factor",
        int,
        3,
        "Replicas of each coordinator slot (at most cluster.nodes).",
        1,
        maximum=32767,
    ),
    Setting(
        "cluster.nodes",
        int,
        1,
        "Simulated nodes in this process (ids node.id .. node.id+N-1; listener ports port .. port+N-1).",
        1,
        maximum=64,
    ),
    Setting(
        "transaction.max.timeout.ms", int, 900000, "Largest transaction.timeout.ms a producer may ask for.", 1
    ),
    Setting(
        "transaction.version",
        int,
        2,
        "The finalized level of Kafka's transaction.version feature (KIP-890; Kafka sets it with "
        "kafka-storage format --feature): 2 clients bump the epoch at every EndTxn and add partitions "
        "with their Produce, 1 the transaction log's flexible records only, 0 neither. Capped at 0 "
        "when kafka.version names a release without EndTxn v5 (3.9) or persona is redpanda.",
        0,
        maximum=2,
    ),
    Setting(
        "transaction.state.log.segment.bytes",
        int,
        104857600,
        "Segment size of the __transaction_state log.",
        14,
    ),
    Setting(
        "transaction.state.log.num.partitions",
        int,
        50,
        "Transaction coordinator slots transactional ids hash to (abs(hashCode(id)) % this); with "
        "cluster.nodes > 1 each slot's leader is the id's transaction coordinator.",
        1,
    ),
    Setting(
        "transaction.state.log.replication.factor",
        int,
        3,
        "Replicas of each transaction coordinator slot (at most cluster.nodes).",
        1,
        maximum=32767,
    ),
    Setting(
        "transactional.id.expiration.ms",
        int,
        604800000,
        "A transactional id with no transaction in progress, unused this long, expires.",
        1,
    ),
    Setting(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        int,
        3600000,
        "How often expired transactional ids are removed.",
        1,
    ),
    Setting("min.insync.replicas", int, 1, "Reported default for topics (one replica always).", 1),
    Setting(
        "control.port",
        int,
        -1,
        "Port of the control API (HTTP/JSON); -1: off, 0: any free.",
        -1,
        maximum=65535,
    ),
    Setting("control.host", str, "127.0.0.1", "Address the control API listens on."),
    Setting("control.token", str, "", "Bearer token the control API requires (empty: none)."),
    Setting("group.min.session.timeout.ms", int, 6000, "Smallest session timeout a member may ask for.", 0),
    Setting("group.max.session.timeout.ms", int, 1800000, "Largest session timeout a member may ask for.", 0),
    Setting("group.initial.rebalance.delay.ms", int, 3000, "Wait for more members when a group forms.", 0),
    Setting("group.max.size", int, 2147483647, "Most members in one classic group.", 1),
    Setting("max.request.partition.size.limit", int, 2000, "Most partitions per DescribeTopicPartitions.", 1),
    Setting(
        "max.incremental.fetch.session.cache.slots",
        int,
        1000,
        "Most incremental fetch sessions (KIP-227) kept at once.",
        0,
    ),
    Setting("quota.window.num", int, 11, "Samples a client quota's rate is measured over.", 1),
    Setting("quota.window.size.seconds", int, 1, "Length of each client quota sample.", 1),
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
    Setting("trace.file", str, "", "Write the protocol trace journal to this file (empty: off; see README)."),
    Setting("trace.max.bytes", int, 104857600, "Size at which the trace journal is rotated.", 1),
    Setting("trace.backups", int, 3, "Rotated trace journals kept (FILE.1 ... FILE.N).", 0),
    Setting("trace.groups", str, "", "Trace only requests naming these groups (comma-separated)."),
    Setting("trace.apis", str, "", "Trace only these APIs (comma-separated names or keys)."),
    Setting("trace.clients", str, "", "Trace only clients whose id matches this regular expression."),
    Setting(
        "clock",
        str,
        "system",
        "Clock of broker-side deadlines (sessions, rebalances, retention): system, or manual "
        "(moves only when advanced through the control API; see README).",
        choices=("system", "manual"),
    ),
    Setting(
        "kafka.version",
        str,
        "",
        "Act as this Apache Kafka release's broker: advertise and serve only the APIs and versions it "
        "does (broker/personas.py); empty: everything this broker implements.",
        choices=("", *PERSONAS),
    ),
    Setting(
        "persona",
        str,
        "",
        "Act as another Kafka-compatible broker: redpanda (the APIs and versions Redpanda's broker "
        "advertises, broker/personas_redpanda.py, and its observable defaults); empty: Apache Kafka "
        "(see kafka.version).",
        choices=("", "redpanda"),
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
    if setting.name in ("listeners", "advertised.listeners"):
        parse_listeners(setting.name, value)
    if setting.name == "listener.security.protocol.map":
        parse_protocol_map(value)
    if setting.name == "log.dirs" and len([d for d in value.split(",") if d.strip()]) > 1:
        raise ConfigError(
            f"log.dirs: this broker keeps its data in one directory, got {len(value.split(','))} "
            f"({value}); give one directory"
        )
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
    """Typed view over the merged properties: ``config["num.partitions"]`` -> int.

    A key this broker does not use is kept in ``unknown``: when it is one of Kafka's own broker
    properties (a KRaft file's ``process.roles``, ``num.network.threads``, ...) it is accepted with
    no effect and listed once at INFO; anything else is a WARNING naming the closest known property,
    since it is most likely a typo."""

    def __init__(self, values: Mapping[str, Any] | None = None):
        self._values: dict[str, Any] = {s.name: s.default for s in _SETTINGS}
        self.explicit: set[str] = set()
        self.unknown: dict[str, str] = {}
        #: ``listener.name.<listener>.<property>`` overrides, as given
        self.listener_props: dict[str, str] = {}
        for key, raw in (values or {}).items():
            self.set(key, raw)
        if "broker.id" in self.explicit and self["broker.id"] >= 0:
            if "node.id" not in self.explicit:
                self._values["node.id"] = self["broker.id"]
            elif self["node.id"] != self["broker.id"]:
                raise ConfigError(
                    f"broker.id ({self['broker.id']}) and node.id ({self['node.id']}) must match"
                )
        if self["persona"] == "redpanda":
            if self["kafka.version"]:
                raise ConfigError("persona: redpanda cannot also act as Apache Kafka (kafka.version is set)")
            if "auto.create.topics.enable" not in self.explicit:
                self._values["auto.create.topics.enable"] = False  # Redpanda's auto_create_topics_enabled
        self.endpoints()  # the listener settings must agree with each other
        self._report_unknown()

    def set(self, key: str, raw: Any) -> None:
        setting = SETTINGS.get(key)
        if setting is None and key.startswith("listener.name."):
            self.listener_props[key] = str(raw)
            return
        if setting is None:
            self.unknown[key] = str(raw)
            return
        self._values[key] = _coerce(setting, raw)
        self.explicit.add(key)

    def _report_unknown(self) -> None:
        no_effect = sorted(k for k in self.unknown if k in kafka_broker_properties())
        if no_effect:
            log.info("Kafka properties accepted, no effect here: %s", ", ".join(no_effect))
        for key in self.unknown:
            if key not in kafka_broker_properties():
                log.warning("unknown config %s=%s ignored%s", key, self.unknown[key], _did_you_mean(key))

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def log_defaults(self) -> dict[str, Any]:
        """Broker-level defaults of topic configs, keyed by the topic setting's first broker synonym
        (``log.retention.ms`` for retention.ms), resolved as Kafka resolves them: the first synonym
        set explicitly wins (log.retention.ms, then .minutes, then .hours), converted to the
        setting's unit; with none set, the first synonym's default."""
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

    def listener_prop(self, listener: str, key: str) -> str:
        """``key`` for ``listener``: ``listener.name.<listener, lower case>.<key>`` when set, else the
        broker-wide value ("" when neither is set), as Kafka resolves per-listener settings."""
        override = self.listener_props.get(f"listener.name.{listener.lower()}.{key}")
        if override is not None:
            return override
        if key in SETTINGS:
            return str(self[key])
        return self.unknown.get(key, "")

    @property
    def data_dir(self) -> Path:
        """``log.dirs``, else ``log.dir`` when only that is set (Kafka's precedence), else the default."""
        if "log.dir" in self.explicit and "log.dirs" not in self.explicit:
            return Path(self["log.dir"].strip())
        return Path(self["log.dirs"].strip().rstrip(","))

    def endpoints(self) -> list[Endpoint]:
        """The listeners to open, with the address each one gives clients. Kafka's precedence:
        ``listeners`` wins over ``host``/``port``, ``advertised.listeners`` over
        ``advertised.host``/``advertised.port``; a listener missing from ``advertised.listeners``
        (or with none set) advertises its own address. Controller listeners are not opened.
        Raises ConfigError when the settings do not agree (as Kafka refuses to start)."""
        protocols = parse_protocol_map(self["listener.security.protocol.map"])
        controllers = {n.strip().upper() for n in self["controller.listener.names"].split(",") if n.strip()}
        if "listeners" in self.explicit and self["listeners"].strip():
            listeners = parse_listeners("listeners", self["listeners"])
        else:
            listeners = [("PLAINTEXT", self["host"], self["port"])]
        advertised: dict[str, tuple[str, int]] = {}
        if "advertised.listeners" in self.explicit and self["advertised.listeners"].strip():
            names = {name for name, _h, _p in listeners}
            for name, host, port in parse_listeners("advertised.listeners", self["advertised.listeners"]):
                if name not in names:
                    raise ConfigError(
                        f"advertised.listeners: listener {name} is not one of the listeners "
                        f"({', '.join(sorted(names))})"
                    )
                if host in ("0.0.0.0", "::"):
                    raise ConfigError(
                        f"advertised.listeners cannot use the nonroutable meta-address {host}. "
                        "Use a routable IP address."
                    )
                advertised[name] = (host, port)
        out = []
        for name, host, port in listeners:
            if name in controllers:
                log.info(
                    "controller listener %s://%s:%d not opened: this broker has no KRaft quorum",
                    name,
                    host,
                    port,
                )
                continue
            protocol = protocols.get(name)
            if protocol is None:
                if name not in SECURITY_PROTOCOLS:
                    raise ConfigError(
                        f"listeners: no security protocol defined for listener {name} "
                        "(add it to listener.security.protocol.map)"
                    )
                protocol = name
            if name in advertised:
                adv_host, adv_port = advertised[name]
            elif "listeners" in self.explicit and self["listeners"].strip():
                if host in ("0.0.0.0", "::"):
                    raise ConfigError(
                        f"advertised.listeners cannot use the nonroutable meta-address {host} "
                        f"(listener {name} listens on {host} and advertised.listeners does not name it). "
                        "Set advertised.listeners to a routable address."
                    )
                adv_host, adv_port = host, port
            else:  # the host/port shorthand, with advertised.host/advertised.port
                adv_host = self["advertised.host"] or host
                adv_port = self["advertised.port"] or port
            out.append(Endpoint(name, host, port, adv_host, adv_port, protocol))
        if not out:
            raise ConfigError("listeners: no listener left to open besides the controller listeners")
        return out


def parse_properties(text: str) -> dict[str, str]:
    """A ``.properties`` file as Java's ``Properties.load`` reads it (Kafka reads server.properties
    so): ``#``/``!`` comment lines; the key ends at the first unescaped ``=``, ``:`` or white space,
    then white space and one ``=`` or ``:`` may follow; a line ending in an odd number of
    backslashes continues on the next one (its leading white space dropped); escapes ``\\t``,
    ``\\n``, ``\\r``, ``\\f``, ``\\uXXXX``, and ``\\x`` for any other character x. A key
    alone has the empty value; a later key replaces an earlier one."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue  # a comment line never continues, whatever it ends with
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        if _continues(line):
            line = line[:-1]  # a continuation at the end of the file
        key, value = _split_property(line)
        out[_unescape(key)] = _unescape(value)
    return out


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_property(line: str) -> tuple[str, str]:
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":") and (i >= n or line[i] in " \t\f=:"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 >= len(s):
            out.append(c)
            i += 1
            continue
        nxt = s[i + 1]
        if nxt == "u":
            digits = s[i + 2 : i + 6]
            try:
                out.append(chr(int(digits, 16)))
            except ValueError:
                raise ConfigError(f"malformed \\uxxxx escape in {s!r}") from None
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def parse_pairs(pairs: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in pairs:
        if "=" not in p:
            raise ConfigError(f"--config expects key=value, got {p!r}")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class Endpoint(NamedTuple):
    """One listener: where it listens and what address clients are told. Port 0 picks a free port;
    an advertised port of 0 means the bound port."""

    name: str
    host: str
    port: int
    advertised_host: str
    advertised_port: int
    #: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    security_protocol: str = "PLAINTEXT"

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def parse_listeners(key: str, text: str) -> list[tuple[str, str, int]]:
    """``NAME://host:port,...`` as Kafka reads ``listeners``: the name is case-insensitive
    (normalised to upper case), an empty host means every interface, an IPv6 host is bracketed.
    Names and ports must differ between listeners (port 0 excepted)."""
    out: list[tuple[str, str, int]] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, address = item.partition("://")
        host, colon, port_text = address.rpartition(":")
        if not sep or not name or not colon or not port_text.lstrip("-").isdigit():
            raise ConfigError(f"{key}: expected NAME://host:port, got {item!r}")
        port = int(port_text)
        if not 0 <= port <= 65535:
            raise ConfigError(f"{key}: port {port} of {item!r} is out of range 0-65535")
        out.append((name.strip().upper(), host.strip().strip("[]"), port))
    if not out:
        raise ConfigError(f"{key}: no listener given")
    names = [n for n, _h, _p in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"{key}: each listener must have a different name, got {text!r}")
    ports = [p for _n, _h, p in out if p]
    if key == "listeners" and len(set(ports)) != len(ports):
        raise ConfigError(f"{key}: each listener must have a different port, got {text!r}")
    return out


def parse_protocol_map(text: str) -> dict[str, str]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL,...``."""
    out: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"listener.security.protocol.map: expected NAME:PROTOCOL with PROTOCOL one of "
                f"{', '.join(SECURITY_PROTOCOLS)}, got {item!r}"
            )
        out[name.strip().upper()] = protocol
    return out


@functools.cache
def kafka_broker_properties() -> frozenset[str]:
    """The broker property names Kafka itself defines (see kafka_broker_properties.txt)."""
    data = _pkgutil().get_data("broker", "kafka_broker_properties.txt")
    assert data is not None  # the package's own loader reads files
    text = data.decode()
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


def _pkgutil() -> ModuleType:
    """pkgutil, imported on first use: only a configuration with unknown settings needs the list of
    Kafka's own (~0.4 ms of every start otherwise). pkgutil, not importlib.resources: the same package
    data for a fraction of the import time."""
    return importlib.import_module("pkgutil")


def _difflib() -> ModuleType:
    """difflib, imported on first use: only an unknown setting's error message needs it."""
    return importlib.import_module("difflib")


def _did_you_mean(key: str) -> str:
    known = [*SETTINGS, *kafka_broker_properties()]
    close = _difflib().get_close_matches(key, known, n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""
