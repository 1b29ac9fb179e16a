"""CreateTopics (key 19) v0-7: v1 validate_only and per-topic error messages; v2 throttle time; v4
lets partitions and replication factor be -1 for the broker defaults (KIP-464; accepted at every
version, as Kafka's broker does); v5 flexible, and the result carries the partition count,
replication factor and effective configs (KIP-525); v7 topic ids.

Checks per topic, in Kafka's order: a name given twice in one request (INVALID_REQUEST, one result
for the name, nothing created); the name (INVALID_TOPIC_EXCEPTION, also for a '.'/'_' collision);
existence (TOPIC_ALREADY_EXISTS); configs (INVALID_CONFIG: null or invalid values, unknown names);
then either an explicit assignment (partition count and replication factor must be -1:
INVALID_REQUEST; each partition once, 0-based and consecutive, with known nodes as its replicas,
none twice: INVALID_REPLICA_ASSIGNMENT) or the counts (INVALID_REPLICATION_FACTOR above the
cluster's node count, ``cluster.nodes``; -1 for ``default.replication.factor``; INVALID_PARTITIONS;
-1 partitions means ``num.partitions``). Replicas are placed by broker/nodes.py as Kafka places them. More than 10000 partitions at once is a POLICY_VIOLATION, as
Kafka's controller batch limit makes it. validate_only checks all of this and creates nothing (its
results carry the zero topic id: no topic exists). ``__cluster_metadata`` cannot be created
(INVALID_REQUEST); ``__consumer_offsets`` and ``__transaction_state`` are created as internal
topics, which DeleteTopics refuses (the group coordinator keeps its log open).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable

from broker.log.config import parse_topic_config
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.generated.create_topics import (
    CreatableTopic,
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from broker.security.authorizer import CLUSTER, CLUSTER_NAME, CREATE, DESCRIBE_CONFIGS, TOPIC

from .config_entries import topic_entries
from .registry import RequestContext

API_KEY = 19

#: Partitions one request may create for one topic (Kafka's controller caps a batch at 10000 records).
MAX_PARTITIONS = 10000
#: Topics Kafka treats as internal by name (reported as internal in Metadata, never deleted here).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
#: Kafka's KRaft metadata log: never a user topic.
METADATA_TOPIC = "__cluster_metadata"

log = logging.getLogger(__name__)


def check_replicas(broker_ids: Iterable[int], node_ids: int | Iterable[int]) -> None:
    """One partition's manual assignment: non-empty, no repeats, only brokers that exist
    (``node_ids``: the cluster's nodes, or the one node's id)."""
    known = [node_ids] if isinstance(node_ids, int) else list(node_ids)
    previous = None
    ids = sorted(broker_ids)
    if not ids:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    for b in ids:
        if b not in known:
            where = (
                f"this cluster is the single broker {known[0]}"
                if len(known) == 1
                else f"this cluster's brokers are {', '.join(map(str, known))}"
            )
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {b}, but no such broker is registered "
                f"({where}).",
            )
        if b == previous:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {b} more than once.",
            )
        previous = b


def check_partition_count(count: int) -> None:
    if count > MAX_PARTITIONS:
        raise KafkaError(
            ErrorCode.POLICY_VIOLATION,
            f"Unable to perform excessively large batch operation ({count} partitions; "
            f"at most {MAX_PARTITIONS} per request).",
        )


def _error(name: str, code: ErrorCode, message: str | None) -> CreatableTopicResult:
    return CreatableTopicResult(
        name=name,
        error_code=int(code),
        error_message=message,
        num_partitions=-1,
        replication_factor=-1,
        configs=[],
    )


def _partition_count(ctx: RequestContext, t: CreatableTopic) -> tuple[int, int, list[list[int]] | None]:
    """(partition count, replication factor, manual replica lists or None)."""
    nodes = ctx.services.nodes
    if t.assignments:
        if t.replication_factor != -1:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "A manual partition assignment was specified, but replication factor was not set to -1.",
            )
        if t.num_partitions != -1:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "A manual partition assignment was specified, but numPartitions was not set to -1.",
            )
        placed: dict[int, list[int]] = {}
        for a in t.assignments:
            if a.partition_index in placed:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Found multiple manual partition assignments for partition {a.partition_index}",
                )
            check_replicas(a.broker_ids, nodes.ids)
            placed[a.partition_index] = list(a.broker_ids)
        if set(placed) != set(range(len(placed))):
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "partitions should be a consecutive 0-based integer sequence",
            )
        replicas = [placed[i] for i in range(len(placed))]
        return len(placed), len(replicas[0]), replicas if nodes.multi else None
    if t.replication_factor < -1 or t.replication_factor == 0:
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    if t.num_partitions < -1 or t.num_partitions == 0:
        raise KafkaError(
            ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."
        )
    rf = t.replication_factor
    if rf == -1:
        rf = ctx.services.config["default.replication.factor"]
    nodes.check_replication_factor(rf)
    count = ctx.services.config["num.partitions"] if t.num_partitions == -1 else t.num_partitions
    return count, rf, None


def _create(ctx: RequestContext, t: CreatableTopic, validate_only: bool) -> CreatableTopicResult:
    services = ctx.services
    services.topics.check_new(t.name)
    nulls = [c.name for c in t.configs if c.value is None]
    if nulls:
        raise KafkaError(
            ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {','.join(nulls)}"
        )
    configs = {c.name: c.value for c in t.configs}
    for key, value in configs.items():  # config errors come before count errors, as in Kafka
        parse_topic_config(key, value)
    count, rf, replicas = _partition_count(ctx, t)
    check_partition_count(count)
    internal = t.name in INTERNAL_TOPICS
    topic = services.admin.create_topic(
        t.name,
        count,
        configs,
        internal=internal,
        validate_only=validate_only,
        replication_factor=rf,
        replicas=replicas,
    )
    return CreatableTopicResult(
        name=t.name,
        topic_id=topic.topic_id,
        error_code=0,
        error_message=None,
        num_partitions=count,
        replication_factor=rf,
        configs=[
            CreatableTopicConfigs(
                name=e.name,
                value=e.value,
                read_only=e.read_only,
                config_source=int(e.source),
                is_sensitive=False,
            )
            for e in topic_entries(services.config, topic.configs)
        ],
    )


def handle(ctx: RequestContext, req: CreateTopicsRequest) -> CreateTopicsResponse:
    validate_only = ctx.api_version >= 1 and req.validate_only
    # like Kafka's controller, the cap is on the whole request, not per topic
    default = ctx.services.config["num.partitions"]
    total = sum(
        len(t.assignments) or (default if t.num_partitions == -1 else max(t.num_partitions, 0))
        for t in req.topics
    )
    if total > MAX_PARTITIONS:
        message = (
            f"Unable to perform excessively large batch operation ({total} partitions; "
            f"at most {MAX_PARTITIONS} per request)."
        )
        return CreateTopicsResponse(
            throttle_time_ms=0,
            topics=[_error(t.name, ErrorCode.POLICY_VIOLATION, message) for t in req.topics],
        )
    counts = Counter(t.name for t in req.topics)
    # as Kafka: CREATE on the cluster, or on each topic; the configs are returned only with
    # DESCRIBE_CONFIGS on the topic
    authz = ctx.services.authorizer is not None
    cluster_create = not authz or ctx.allowed(CREATE, CLUSTER, CLUSTER_NAME)
    reported: set[str] = set()
    results: list[CreatableTopicResult] = []
    for t in req.topics:
        if counts[t.name] > 1:
            if t.name not in reported:
                reported.add(t.name)
                results.append(_error(t.name, ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
            continue
        if t.name == METADATA_TOPIC:
            message = f"Creation of internal topic {METADATA_TOPIC} is prohibited."
            results.append(_error(t.name, ErrorCode.INVALID_REQUEST, message))
            continue
        if not cluster_create and not ctx.allowed(CREATE, TOPIC, t.name):
            results.append(_error(t.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."))
            continue
        try:
            result = _create(ctx, t, validate_only)
            if authz and not ctx.allowed(DESCRIBE_CONFIGS, TOPIC, t.name):
                result.num_partitions = result.replication_factor = -1
                result.configs = []
                result.topic_config_error_code = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            results.append(result)
        except KafkaError as e:
            results.append(_error(t.name, e.code, e.message))
        except OSError as e:
            log.error("creating topic %s failed: %s", t.name, e)
            results.append(
                _error(t.name, ErrorCode.KAFKA_STORAGE_ERROR, f"cannot create the topic's logs: {e}")
            )
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


def error_response(req: CreateTopicsRequest, version: int, code: ErrorCode) -> CreateTopicsResponse:
    return CreateTopicsResponse(throttle_time_ms=0, topics=[_error(t.name, code, None) for t in req.topics])
