"""Config entries as DescribeConfigs and CreateTopics (v5+) report them: value, source, type, synonyms.

Not a handler module (no ``API_KEY``): shared by ``create_topics``, ``describe_configs`` and
``incremental_alter_configs``.

A topic setting's value comes, by precedence, from the topic's override (DYNAMIC_TOPIC_CONFIG), a
broker property set explicitly in the broker config (STATIC_BROKER_CONFIG), or the built-in default
(DEFAULT_CONFIG); the synonyms list every one of these that exists, in that order, as Kafka does.
Broker settings are static: read-only, STATIC_BROKER_CONFIG when set explicitly, else DEFAULT_CONFIG.
The BROKER resource lists Kafka's own broker properties too (broker/kafka_broker_configs.tsv: Kafka
4.3's names, types and defaults), those this broker does not use with the value given in the config
or Kafka's default, documented as having no effect here; PASSWORD values are never shown.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from importlib import resources
from typing import Any

from broker.config import SETTINGS, Config
from broker.log.config import BROKER_SYNONYMS as TOPIC_BROKER_KEYS
from broker.log.config import TOPIC_SETTINGS, effective
from broker.protocol.errors import ErrorCode, KafkaError
from broker.security import authorizer as authz


class ResourceType(IntEnum):
    """Kafka's ConfigResource.Type codes."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(IntEnum):
    """Kafka's DescribeConfigsResponse.ConfigSource codes."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigType(IntEnum):
    """Kafka's ConfigDef.Type codes as DescribeConfigs v3+ reports them."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


#: Kafka's types of broker properties where the Python type does not tell (LONG, LIST).
BROKER_TYPES: dict[str, ConfigType] = {
    "log.roll.ms": ConfigType.LONG,
    "log.retention.ms": ConfigType.LONG,
    "log.retention.bytes": ConfigType.LONG,
    "log.retention.check.interval.ms": ConfigType.LONG,
    "log.flush.interval.ms": ConfigType.LONG,
    "connections.max.idle.ms": ConfigType.LONG,
    "log.cleanup.policy": ConfigType.LIST,
    "log.cleaner.backoff.ms": ConfigType.LONG,
    "log.cleaner.delete.retention.ms": ConfigType.LONG,
    "log.cleaner.min.cleanable.ratio": ConfigType.DOUBLE,
    "log.cleaner.min.compaction.lag.ms": ConfigType.LONG,
    "log.cleaner.max.compaction.lag.ms": ConfigType.LONG,
    "offsets.retention.check.interval.ms": ConfigType.LONG,
    "group.consumer.assignors": ConfigType.LIST,
    "sasl.enabled.mechanisms": ConfigType.LIST,
    "sasl.oauthbearer.expected.audience": ConfigType.LIST,
    "connections.max.reauth.ms": ConfigType.LONG,
    "offsets.topic.replication.factor": ConfigType.SHORT,
    "transaction.state.log.replication.factor": ConfigType.SHORT,
    "log.dir": ConfigType.LIST,
    "log.dirs": ConfigType.LIST,
    "listeners": ConfigType.LIST,
    "advertised.listeners": ConfigType.LIST,
    "controller.listener.names": ConfigType.LIST,
}

#: Broker properties whose default is null in Kafka: they never appear as a DEFAULT_CONFIG synonym
#: (retention.ms's default comes from log.retention.hours, segment.ms's from log.roll.hours).
NULL_DEFAULTS = frozenset({"log.retention.ms", "log.retention.minutes", "log.roll.ms", "log.roll.jitter.ms"})


def _type_of(value: Any) -> ConfigType:
    if isinstance(value, bool):
        return ConfigType.BOOLEAN
    if isinstance(value, int):
        return ConfigType.INT
    return ConfigType.STRING


def topic_type(name: str) -> ConfigType:
    setting = TOPIC_SETTINGS.get(name)
    return ConfigType[setting.kind] if setting is not None else ConfigType.UNKNOWN


def broker_type(name: str) -> ConfigType:
    """A broker property's type: the type of the topic setting it supplies, else by its Python type."""
    if name in BROKER_TYPES:
        return BROKER_TYPES[name]
    if name in TOPIC_BROKER_KEYS and TOPIC_BROKER_KEYS[name][1] == 1:  # not log.roll.hours and the like
        return topic_type(TOPIC_BROKER_KEYS[name][0])
    return _type_of(SETTINGS[name].default)


def is_list(name: str) -> bool:
    """Whether ``name`` is a topic setting of type LIST (the only ones APPEND/SUBTRACT apply to)."""
    return name in TOPIC_SETTINGS and topic_type(name) == ConfigType.LIST


def fmt(value: Any) -> str | None:
    """A config value in Kafka's text form (booleans lower-case, lists comma-separated -- an empty
    list is "" -- and empty strings as null)."""
    if isinstance(value, list):
        return ",".join(value)
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass
class Entry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    config_type: ConfigType
    doc: str
    #: (name, value, source), highest precedence first; the first one supplies the value
    synonyms: list[tuple[str, str | None, ConfigSource]] = field(default_factory=list)

    @property
    def is_default(self) -> bool:
        """DescribeConfigs v0's flag: not set on the resource itself (topic override / broker config)."""
        return self.source not in (ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.STATIC_BROKER_CONFIG)


def topic_entries(config: Config, overrides: Mapping[str, str]) -> list[Entry]:
    """Every topic setting of a topic with these overrides, sorted by name."""
    values = effective(config.log_defaults(), overrides)
    out = []
    for name in sorted(TOPIC_SETTINGS):
        setting = TOPIC_SETTINGS[name]
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        if name in overrides:
            synonyms.append((name, fmt(overrides[name]), ConfigSource.DYNAMIC_TOPIC_CONFIG))
        keys = [key for key, _factor in setting.synonyms if key in SETTINGS]
        broker: list[tuple[str, str | None, ConfigSource]] = []
        for key in keys:
            if key in config.explicit:
                broker.append((key, fmt(config[key]), ConfigSource.STATIC_BROKER_CONFIG))
        for key in keys:
            if key not in NULL_DEFAULTS:
                broker.append((key, fmt(SETTINGS[key].default), ConfigSource.DEFAULT_CONFIG))
        # As Kafka (ConfigHelper.configSynonyms): the broker synonyms start at the setting's first
        # broker synonym, so with log.retention.ms unset retention.ms lists no log.retention.hours
        # default (and one set only in hours is not listed either).
        while broker and broker[0][0] != setting.synonyms[0][0]:
            broker.pop(0)
        synonyms += broker
        out.append(
            Entry(
                name=name,
                value=fmt(values[name]),
                source=synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG,
                read_only=False,
                config_type=topic_type(name),
                doc=setting.doc,
                synonyms=synonyms,
            )
        )
    return out


#: Broker settings whose values are secrets: described as Kafka describes its PASSWORD settings
#: (type PASSWORD, value null, is_sensitive).
SENSITIVE = frozenset(
    {
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.certificates",
        "sasl.users",
    }
)


def broker_entries(config: Config) -> list[Entry]:
    """Every broker setting with its current value, sorted by name; all read-only (static)."""
    out = []
    for name in sorted(SETTINGS):
        setting = SETTINGS[name]
        if name in SENSITIVE:
            source = (
                ConfigSource.STATIC_BROKER_CONFIG if name in config.explicit else ConfigSource.DEFAULT_CONFIG
            )
            out.append(
                Entry(name, None, source, True, ConfigType.PASSWORD, setting.doc, [(name, None, source)])
            )
            continue
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        if name in config.explicit:
            synonyms.append((name, fmt(config[name]), ConfigSource.STATIC_BROKER_CONFIG))
        synonyms.append((name, fmt(setting.default), ConfigSource.DEFAULT_CONFIG))
        out.append(
            Entry(
                name=name,
                value=fmt(config[name]),
                source=synonyms[0][2],
                read_only=True,
                config_type=broker_type(name),
                doc=setting.doc,
                synonyms=synonyms,
            )
        )
    out += kafka_only_entries(config)
    out.sort(key=lambda e: e.name)
    return out


#: the documentation of Kafka's broker properties this broker does not use
UNUSED_DOC = "One of Kafka's broker properties: accepted in the config, with no effect on this broker."


@functools.cache
def kafka_broker_configs() -> dict[str, tuple[ConfigType, str | None]]:
    """Kafka's broker properties: name -> (type, default or None), from kafka_broker_configs.tsv."""
    text = resources.files("broker").joinpath("kafka_broker_configs.tsv").read_text()
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, kind, default = line.split("\t")
        out[name] = (ConfigType[kind], None if default == "\\N" else default)
    return out


def kafka_only_entries(config: Config) -> list[Entry]:
    """Kafka's broker properties that are not this broker's settings: read-only, the value the config
    gives (STATIC_BROKER_CONFIG) or Kafka's default (DEFAULT_CONFIG)."""
    out = []
    for name, (kind, default) in kafka_broker_configs().items():
        if name in SETTINGS:
            continue
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        if name in config.unknown:
            synonyms.append((name, fmt(config.unknown[name]), ConfigSource.STATIC_BROKER_CONFIG))
        if default is not None:
            synonyms.append((name, default, ConfigSource.DEFAULT_CONFIG))
        if kind == ConfigType.PASSWORD:
            synonyms = [(n, None, s) for n, _v, s in synonyms]
        out.append(
            Entry(
                name=name,
                value=synonyms[0][1] if synonyms else None,
                source=synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG,
                read_only=True,
                config_type=kind,
                doc=UNUSED_DOC,
                synonyms=synonyms,
            )
        )
    return out


def check_broker_name(node_id: int, name: str) -> None:
    """A BROKER resource must name this node; "" (Kafka's cluster-wide default) is taken as this node
    too. INVALID_REQUEST otherwise, with Kafka's messages."""
    if name == "":
        return
    try:
        node = int(name)
    except ValueError:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
        ) from None
    if node != node_id:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {node_id} or empty string, but received {name}",
        )


def repeated_resources(resources: Iterable[Any]) -> Callable[[Any], bool | None]:
    """For the alter-configs APIs: a resource named more than once (same type and name) is refused,
    once, with INVALID_REQUEST "Each resource must appear at most once.", as Kafka does. The returned
    function tells, per resource in order: False (alter it), True (refuse it: the first time it is
    repeated), None (skip it: already refused)."""
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    refused: set[tuple[int, str]] = set()

    def check(r: Any) -> bool | None:
        key = (r.resource_type, r.resource_name)
        if counts[key] <= 1:
            return False
        if key in refused:
            return None
        refused.add(key)
        return True

    return check


#: the message of a resource named more than once in one request
REPEATED = "Each resource must appear at most once."


#: config resource type -> (ACL resource type, its name or None for the resource's own, the error)
_CONFIG_ACL = {
    ResourceType.TOPIC: (authz.TOPIC, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ResourceType.GROUP: (authz.GROUP, None, ErrorCode.GROUP_AUTHORIZATION_FAILED),
    ResourceType.BROKER: (authz.CLUSTER, authz.CLUSTER_NAME, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ResourceType.BROKER_LOGGER: (authz.CLUSTER, authz.CLUSTER_NAME, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ResourceType.CLIENT_METRICS: (authz.CLUSTER, authz.CLUSTER_NAME, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
}


def config_denied(ctx: Any, resource_type: int, name: str, op: int) -> ErrorCode | None:
    """The authorization error of ``op`` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config resource, as
    Kafka checks it (a topic or group on itself, brokers, loggers and client metrics on the
    cluster), or None when allowed (or of a type the handler refuses anyway)."""
    if ctx.services.authorizer is None:
        return None
    rule = _CONFIG_ACL.get(resource_type)
    if rule is None:
        return None
    acl_type, acl_name, code = rule
    return None if ctx.allowed(op, acl_type, acl_name or name) else code


#: Kafka's default messages of the authorization errors (DescribeConfigs answers with them)
AUTHORIZATION_MESSAGES = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
}
