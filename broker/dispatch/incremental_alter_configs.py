"""IncrementalAlterConfigs (key 44) v0-1: per-key SET (0), DELETE (1), APPEND (2) and SUBTRACT (3)
edits (KIP-339) and validate_only; v1 flexible.

Each resource is answered on its own. First the request's shape, as Kafka checks it: a resource
given twice (INVALID_REQUEST, one result, nothing changed), a key given twice in one resource, a
null value for anything but DELETE, an unknown operation (all INVALID_REQUEST). Then by type:

* TOPIC (2): SET replaces the override, DELETE drops it (back to the broker default; deleting a key
  that is not overridden does nothing), APPEND / SUBTRACT add or remove comma-separated items of a
  LIST setting (cleanup.policy), starting from its current value; on any other setting they are
  INVALID_CONFIG. The resulting overrides are validated (INVALID_CONFIG with the reason), persisted
  in the topic registry and applied to the topic's open logs at once. A bad name is
  INVALID_TOPIC_EXCEPTION, an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
* BROKER (4): INVALID_REQUEST. Kafka has dynamic broker configs; this broker's settings are static.
* GROUP (32): SET/DELETE of consumer.session.timeout.ms and consumer.heartbeat.interval.ms within
  the broker's group.consumer.min/max bounds (INVALID_CONFIG otherwise), persisted.
* anything else: INVALID_REQUEST.

validate_only runs every check and changes nothing.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from enum import IntEnum

from broker.cluster import validate_topic_name
from broker.coordinator.group_configs import GROUP_SETTINGS
from broker.log.config import effective
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.generated.incremental_alter_configs import (
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from broker.security.authorizer import ALTER_CONFIGS

from .config_entries import (
    REPEATED,
    ResourceType,
    check_broker_name,
    config_denied,
    fmt,
    is_list,
    repeated_resources,
)
from .registry import RequestContext

API_KEY = 44

log = logging.getLogger(__name__)


class Op(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def _check_shape(r: AlterConfigsResource) -> None:
    names = Counter(c.name for c in r.configs)
    if any(n > 1 for n in names.values()):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [c.name for c in r.configs if c.value is None and c.config_operation != Op.DELETE]
    if nulls:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}")
    for c in r.configs:
        if c.config_operation not in Op._value2member_map_:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Unknown config operation {c.config_operation} for {c.name}"
            )


def _items(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _alter_topic(ctx: RequestContext, r: AlterConfigsResource, validate_only: bool) -> None:
    name = r.resource_name
    validate_topic_name(name)
    services = ctx.services
    topic = services.topics.get(name)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    configs = dict(topic.configs)
    for c in r.configs:
        op = Op(c.config_operation)
        if op == Op.SET:
            configs[c.name] = c.value
        elif op == Op.DELETE:
            configs.pop(c.name, None)
        else:
            if not is_list(c.name):
                raise KafkaError(
                    ErrorCode.INVALID_CONFIG, f"Can't {op.name} to key {c.name} because its type is not LIST."
                )
            current = configs.get(c.name)
            if current is None:
                current = fmt(effective(services.config.log_defaults(), {})[c.name]) or ""
            items = _items(current)
            operand = _items(c.value)
            if op == Op.APPEND:
                items += [x for x in dict.fromkeys(operand) if x not in items]
            else:
                items = [x for x in items if x not in operand]
            configs[c.name] = ",".join(items)
    services.admin.alter_topic_configs(name, configs, validate_only=validate_only)


def _alter_broker(ctx: RequestContext, r: AlterConfigsResource, validate_only: bool) -> None:
    check_broker_name(ctx.services.node_id, r.resource_name)
    raise KafkaError(
        ErrorCode.INVALID_REQUEST,
        "this broker does not support dynamic broker configs: its settings are static "
        "(set them with --config or --config-file at start-up)",
    )


def _alter_group(ctx: RequestContext, r: AlterConfigsResource, validate_only: bool) -> None:
    """SET / DELETE of the group settings, validated against the broker's bounds and persisted."""
    if not r.resource_name:
        raise KafkaError(ErrorCode.INVALID_GROUP_ID, "group id can't be empty")
    store = ctx.services.groups.configs
    configs = dict(store.overrides.get(r.resource_name, {}))
    for c in r.configs:
        op = Op(c.config_operation)
        if op == Op.SET:
            store.validate(c.name, c.value)
            configs[c.name] = c.value
        elif op == Op.DELETE:
            if c.name not in GROUP_SETTINGS:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {c.name}")
            configs.pop(c.name, None)
        else:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG, f"Can't {op.name} to key {c.name} because its type is not LIST."
            )
    if not validate_only:
        store.replace(r.resource_name, configs)


ALTERERS: dict[int, Callable[[RequestContext, AlterConfigsResource, bool], None]] = {
    ResourceType.TOPIC: _alter_topic,
    ResourceType.BROKER: _alter_broker,
    ResourceType.GROUP: _alter_group,
}


def _result(
    r: AlterConfigsResource, code: ErrorCode = ErrorCode.NONE, message: str | None = None
) -> AlterConfigsResourceResponse:
    return AlterConfigsResourceResponse(
        error_code=int(code),
        error_message=message,
        resource_type=r.resource_type,
        resource_name=r.resource_name,
    )


def _alter(ctx: RequestContext, r: AlterConfigsResource, validate_only: bool) -> AlterConfigsResourceResponse:
    try:
        _check_shape(r)
        alter = ALTERERS.get(r.resource_type)
        if alter is None:
            try:
                kind = ResourceType(r.resource_type).name
            except ValueError:
                kind = str(r.resource_type)
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {kind}")
        alter(ctx, r, validate_only)
    except KafkaError as e:
        return _result(r, e.code, e.message)
    except OSError as e:
        log.error("altering configs of %s failed: %s", r.resource_name, e)
        return _result(r, ErrorCode.KAFKA_STORAGE_ERROR, f"cannot persist the configs: {e}")
    return _result(r)


def handle(ctx: RequestContext, req: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    repeated = repeated_resources(req.resources)
    results: list[AlterConfigsResourceResponse] = []
    for r in req.resources:
        refuse = repeated(r)
        if refuse is not False:
            if refuse:
                results.append(_result(r, ErrorCode.INVALID_REQUEST, REPEATED))
            continue
        denied = config_denied(ctx, r.resource_type, r.resource_name, ALTER_CONFIGS)
        if denied is not None:  # as Kafka: ALTER_CONFIGS, no message
            results.append(_result(r, denied))
            continue
        results.append(_alter(ctx, r, req.validate_only))
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=results)


def error_response(
    req: IncrementalAlterConfigsRequest, version: int, code: ErrorCode
) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(
        throttle_time_ms=0, responses=[_result(r, code) for r in req.resources]
    )
