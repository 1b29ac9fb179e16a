"""AlterConfigs (key 33) v0-2, the legacy non-incremental form of IncrementalAlterConfigs: v1 no
change on the wire; v2 flexible.

Each resource's configs are replaced as a whole: a TOPIC gets exactly the overrides given (every
other override goes back to the broker default), validated, persisted and applied as by
IncrementalAlterConfigs. A resource given twice is INVALID_REQUEST (one result), as is a key given
twice or a null value; a GROUP gets exactly the group settings given (each validated against the
broker's bounds, as IncrementalAlterConfigs), persisted; BROKER is INVALID_REQUEST (static settings;
Kafka would change them dynamically) and other resource types are INVALID_REQUEST. validate_only
checks everything and changes nothing.
"""

from __future__ import annotations

import logging
from collections import Counter

from broker.cluster import validate_topic_name
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.generated.alter_configs import (
    AlterConfigsRequest,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from broker.security.authorizer import ALTER_CONFIGS

from .config_entries import REPEATED, ResourceType, check_broker_name, config_denied, repeated_resources
from .registry import RequestContext

API_KEY = 33

log = logging.getLogger(__name__)


def _alter(ctx: RequestContext, r: AlterConfigsResource, validate_only: bool) -> None:
    if any(n > 1 for n in Counter(c.name for c in r.configs).values()):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [c.name for c in r.configs if c.value is None]
    if nulls:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}")
    if r.resource_type == ResourceType.TOPIC:
        validate_topic_name(r.resource_name)
        if ctx.services.topics.get(r.resource_name) is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{r.resource_name}' does not exist."
            )
        configs = {c.name: c.value for c in r.configs}
        ctx.services.admin.alter_topic_configs(r.resource_name, configs, validate_only=validate_only)
    elif r.resource_type == ResourceType.GROUP:
        if not r.resource_name:
            raise KafkaError(ErrorCode.INVALID_GROUP_ID, "group id can't be empty")
        store = ctx.services.groups.configs
        for c in r.configs:
            store.validate(c.name, c.value)
        if not validate_only:
            store.replace(r.resource_name, {c.name: c.value for c in r.configs})
    elif r.resource_type == ResourceType.BROKER:
        check_broker_name(ctx.services.node_id, r.resource_name)
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            "this broker does not support dynamic broker configs: its settings are static "
            "(set them with --config or --config-file at start-up)",
        )
    else:
        try:
            kind = ResourceType(r.resource_type).name
        except ValueError:
            kind = str(r.resource_type)
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {kind}")


def _result(r: AlterConfigsResource, code: ErrorCode = ErrorCode.NONE, message: str | None = None):
    return AlterConfigsResourceResponse(
        error_code=int(code),
        error_message=message,
        resource_type=r.resource_type,
        resource_name=r.resource_name,
    )


def handle(ctx: RequestContext, req: AlterConfigsRequest) -> AlterConfigsResponse:
    repeated = repeated_resources(req.resources)
    results = []
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
        try:
            _alter(ctx, r, req.validate_only)
        except KafkaError as e:
            results.append(_result(r, e.code, e.message))
        except OSError as e:
            log.error("altering configs of %s failed: %s", r.resource_name, e)
            results.append(_result(r, ErrorCode.KAFKA_STORAGE_ERROR, f"cannot persist the configs: {e}"))
        else:
            results.append(_result(r))
    return AlterConfigsResponse(throttle_time_ms=0, responses=results)


def error_response(req: AlterConfigsRequest, version: int, code: ErrorCode) -> AlterConfigsResponse:
    return AlterConfigsResponse(throttle_time_ms=0, responses=[_result(r, code) for r in req.resources])
