"""CreatePartitions (key 37) v0-3: v0 validate_only and per-topic error messages; v1 no change on the
wire; v2 flexible; v3 no change on the wire (THROTTLING_QUOTA_EXCEEDED in Kafka, never here).

Topics only grow: ``count`` is the total wanted afterwards. Per topic, in Kafka's order: a topic
named twice in one request (INVALID_REQUEST, one result, nothing changed); unknown topic
(UNKNOWN_TOPIC_OR_PARTITION); a count that is not an increase (INVALID_PARTITIONS); assignments,
when given, must number exactly the new partitions and place each one's single replica on this node
(INVALID_REPLICA_ASSIGNMENT); more than 10000 new partitions at once is a POLICY_VIOLATION. The new
partitions' logs open at once and the count is persisted in the topic registry; validate_only checks
everything and changes nothing.
"""

from __future__ import annotations

import logging
from collections import Counter

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.generated.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
)
from broker.security.authorizer import ALTER, TOPIC

from .create_topics import MAX_PARTITIONS, check_partition_count, check_replicas
from .registry import RequestContext

API_KEY = 37

log = logging.getLogger(__name__)


def _result(
    name: str, code: ErrorCode = ErrorCode.NONE, message: str | None = None
) -> CreatePartitionsTopicResult:
    return CreatePartitionsTopicResult(name=name, error_code=int(code), error_message=message)


def _grow(ctx: RequestContext, t: CreatePartitionsTopic, validate_only: bool) -> None:
    services = ctx.services
    topic = services.admin.create_partitions(
        t.name, t.count, validate_only=True
    )  # unknown topic, not an increase
    additional = t.count - topic.partitions
    if t.assignments is not None:
        if len(t.assignments) != additional:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Attempted to add {additional} additional partition(s), but only {len(t.assignments)} "
                "assignment(s) were specified.",
            )
        for a in t.assignments:
            check_replicas(a.broker_ids, services.nodes.ids)
    check_partition_count(additional)
    if not validate_only:
        manual = [list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None
        services.admin.create_partitions(t.name, t.count, replicas=manual)


def handle(ctx: RequestContext, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
    # the cap on new partitions is for the whole request, as in Kafka's controller
    added = 0
    for t in req.topics:
        current = ctx.services.topics.get(t.name)
        added += max(t.count - (current.partitions if current is not None else 0), 0)
    if added > MAX_PARTITIONS:
        message = (
            f"Unable to perform excessively large batch operation ({added} partitions; "
            f"at most {MAX_PARTITIONS} per request)."
        )
        return CreatePartitionsResponse(
            throttle_time_ms=0,
            results=[_result(t.name, ErrorCode.POLICY_VIOLATION, message) for t in req.topics],
        )
    counts = Counter(t.name for t in req.topics)
    reported: set[str] = set()
    results: list[CreatePartitionsTopicResult] = []
    for t in req.topics:
        if counts[t.name] > 1:
            if t.name not in reported:
                reported.add(t.name)
                results.append(_result(t.name, ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
            continue
        if not ctx.allowed(ALTER, TOPIC, t.name):  # as Kafka's controller
            results.append(_result(t.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        try:
            _grow(ctx, t, req.validate_only)
        except KafkaError as e:
            results.append(_result(t.name, e.code, e.message))
        except OSError as e:
            log.error("adding partitions to %s failed: %s", t.name, e)
            results.append(
                _result(t.name, ErrorCode.KAFKA_STORAGE_ERROR, f"cannot open the new partitions: {e}")
            )
        else:
            results.append(_result(t.name))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


def error_response(req: CreatePartitionsRequest, version: int, code: ErrorCode) -> CreatePartitionsResponse:
    return CreatePartitionsResponse(throttle_time_ms=0, results=[_result(t.name, code) for t in req.topics])
