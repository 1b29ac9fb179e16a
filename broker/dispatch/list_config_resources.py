"""ListConfigResources (key 74) v0-1: v0 is KIP-714's ListClientMetricsResources (client metrics
subscriptions only); v1 (KIP-1142) lists the resources of the config resource types asked for.

This broker has no client metrics subscriptions, so v0 answers an empty list. v1, as Kafka 4.3:
an empty type list means every supported type; the types are answered from the highest code down:
GROUP (32) every group with a dynamic config, CLIENT_METRICS (16) nothing, BROKER_LOGGER (8) and
BROKER (4) this node's id, TOPIC (2) every topic (internal ones too; in name order here, in hash
order in Kafka); any other type
is UNSUPPORTED_VERSION for the whole request.
"""

from __future__ import annotations

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.generated.list_config_resources import (
    ConfigResource,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
)
from broker.security.authorizer import CLUSTER, CLUSTER_NAME, DESCRIBE_CONFIGS

from .registry import RequestContext

API_KEY = 74

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SUPPORTED = (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)


def handle(ctx: RequestContext, req: ListConfigResourcesRequest) -> ListConfigResourcesResponse:
    if not ctx.allowed(DESCRIBE_CONFIGS, CLUSTER, CLUSTER_NAME):  # as Kafka: DESCRIBE_CONFIGS on the cluster
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    if ctx.api_version == 0:
        return ListConfigResourcesResponse(throttle_time_ms=0, error_code=0, config_resources=[])
    types = list(req.resource_types) or list(SUPPORTED)
    if any(t not in SUPPORTED for t in types):
        return error_response(req, ctx.api_version, ErrorCode.UNSUPPORTED_VERSION)
    services = ctx.services
    out: list[ConfigResource] = []
    for t in sorted(set(types), reverse=True):
        if t == TOPIC:
            names = sorted(x.name for x in services.topics.all())
            out += [ConfigResource(resource_name=name, resource_type=TOPIC) for name in names]
        elif t in (BROKER, BROKER_LOGGER):
            out.append(ConfigResource(resource_name=str(services.node_id), resource_type=t))
        elif t == GROUP:
            overrides = services.groups.configs.overrides
            out += [ConfigResource(resource_name=g, resource_type=GROUP) for g, kv in overrides.items() if kv]
    return ListConfigResourcesResponse(throttle_time_ms=0, error_code=0, config_resources=out)


def error_response(
    req: ListConfigResourcesRequest, version: int, code: ErrorCode
) -> ListConfigResourcesResponse:
    return ListConfigResourcesResponse(throttle_time_ms=0, error_code=int(code), config_resources=[])
