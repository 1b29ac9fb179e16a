"""DescribeConfigs (key 32) v0-4: v0 is_default per entry; v1 include_synonyms and a config source
instead of is_default; v2 no change on the wire; v3 include_documentation and each entry's config
type; v4 flexible.

Resources, each answered on its own:

* TOPIC (2): every topic setting (broker.log.config.TOPIC_SETTINGS) with its effective value and
  source: DYNAMIC_TOPIC_CONFIG when the topic overrides it, STATIC_BROKER_CONFIG when the broker
  property behind it was set explicitly, else DEFAULT_CONFIG; never read-only or sensitive. A bad
  name is INVALID_TOPIC_EXCEPTION, an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
* BROKER (4), named "" or this node's id: every broker setting (broker.config.SETTINGS), read-only
  (they are static), STATIC_BROKER_CONFIG when set explicitly, else DEFAULT_CONFIG. Another id or a
  non-integer name is INVALID_REQUEST, as in Kafka.
* GROUP (32): the KIP-848 group settings (broker/coordinator/group_configs.py) with source
  GROUP_CONFIG when set on the group; groups need not exist, as in Kafka.
* anything else (BROKER_LOGGER, CLIENT_METRICS, unknown codes): INVALID_REQUEST.

``configuration_keys`` null or empty means every key (as in Kafka); unknown keys are left out.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.cluster import validate_topic_name
from broker.coordinator.group_configs import GROUP_SETTINGS
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.generated.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from broker.security.authorizer import DESCRIBE_CONFIGS

from .config_entries import (
    AUTHORIZATION_MESSAGES,
    ConfigSource,
    ConfigType,
    Entry,
    ResourceType,
    broker_entries,
    check_broker_name,
    config_denied,
    topic_entries,
)
from .registry import RequestContext

API_KEY = 32


def _describe_topic(ctx: RequestContext, name: str) -> list[Entry]:
    validate_topic_name(name)
    topic = ctx.services.topics.get(name)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    return topic_entries(ctx.services.config, topic.configs)


def _describe_broker(ctx: RequestContext, name: str) -> list[Entry]:
    check_broker_name(ctx.services.node_id, name)
    return broker_entries(ctx.services.config)


def _describe_group(ctx: RequestContext, name: str) -> list[Entry]:
    """The group's configs: GROUP_CONFIG when set on the group, else the broker's value."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_GROUP_ID, "group id can't be empty")
    store = ctx.services.groups.configs
    out = []
    for setting in GROUP_SETTINGS.values():
        override = store.overrides.get(name, {}).get(setting.name)
        if override is not None:
            source = ConfigSource.GROUP_CONFIG
        elif setting.broker_key in ctx.services.config.explicit:
            source = ConfigSource.STATIC_BROKER_CONFIG
        else:
            source = ConfigSource.DEFAULT_CONFIG
        value = str(store.value(name, setting.name))
        out.append(
            Entry(
                setting.name,
                value,
                source,
                False,
                ConfigType.INT,
                setting.doc,
                [(setting.name, value, source)],
            )
        )
    return out


DESCRIBERS: dict[int, Callable[[RequestContext, str], list[Entry]]] = {
    ResourceType.TOPIC: _describe_topic,
    ResourceType.BROKER: _describe_broker,
    ResourceType.GROUP: _describe_group,
}


def _entry(e: Entry, synonyms: bool, docs: bool) -> DescribeConfigsResourceResult:
    return DescribeConfigsResourceResult(
        name=e.name,
        value=e.value,
        read_only=e.read_only,
        is_default=e.is_default,
        config_source=int(e.source),
        is_sensitive=e.config_type == ConfigType.PASSWORD,
        synonyms=[DescribeConfigsSynonym(name=n, value=v, source=int(s)) for n, v, s in e.synonyms]
        if synonyms
        else [],
        config_type=int(e.config_type),
        documentation=e.doc if docs else None,
    )


def _describe(
    ctx: RequestContext, r: DescribeConfigsResource, synonyms: bool, docs: bool
) -> DescribeConfigsResult:
    denied = config_denied(ctx, r.resource_type, r.resource_name, DESCRIBE_CONFIGS)
    if denied is not None:  # as Kafka: DESCRIBE_CONFIGS, with the error's own message
        return _error(r, denied, AUTHORIZATION_MESSAGES[denied])
    describer = DESCRIBERS.get(r.resource_type)
    try:
        if describer is None:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {_type_name(r.resource_type)}"
            )
        entries = describer(ctx, r.resource_name)
    except KafkaError as e:
        return _error(r, e.code, e.message)
    if r.configuration_keys:
        wanted = set(r.configuration_keys)
        entries = [e for e in entries if e.name in wanted]
    return DescribeConfigsResult(
        error_code=0,
        error_message=None,
        resource_type=r.resource_type,
        resource_name=r.resource_name,
        configs=[_entry(e, synonyms, docs) for e in entries],
    )


def _type_name(code: int) -> str:
    try:
        return ResourceType(code).name
    except ValueError:
        return str(code)


def _error(r: DescribeConfigsResource, code: ErrorCode, message: str | None) -> DescribeConfigsResult:
    return DescribeConfigsResult(
        error_code=int(code),
        error_message=message,
        resource_type=r.resource_type,
        resource_name=r.resource_name,
        configs=[],
    )


def handle(ctx: RequestContext, req: DescribeConfigsRequest) -> DescribeConfigsResponse:
    v = ctx.api_version
    synonyms = v >= 1 and req.include_synonyms
    docs = v >= 3 and req.include_documentation
    return DescribeConfigsResponse(
        throttle_time_ms=0, results=[_describe(ctx, r, synonyms, docs) for r in req.resources]
    )


def error_response(req: DescribeConfigsRequest, version: int, code: ErrorCode) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(throttle_time_ms=0, results=[_error(r, code, None) for r in req.resources])
