"""DeleteTopics (key 20) v0-6: v1 throttle time; v4 flexible; v5 per-topic error messages; v6 topics
named or identified by id (name-or-id entries instead of the name list), results carry the topic id.

A deleted topic's partition logs are closed and removed from disk and its registry entry is removed
and persisted; the name can be reused at once, and the new topic gets a new id. Errors per entry, as
Kafka's controller gives them: unknown name UNKNOWN_TOPIC_OR_PARTITION, unknown id UNKNOWN_TOPIC_ID;
INVALID_REQUEST for an entry with neither or both of name and id, a name or id given twice (one
result, nothing deleted), or a name whose topic is also named by id in the same request (the
result is for the name; the id entry gets none, as in Kafka). Internal topics (``__consumer_offsets``,
where the group coordinator keeps its log open) are not deleted: INVALID_REQUEST.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.generated.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from broker.protocol.primitives import ZERO_UUID
from broker.security.authorizer import CLUSTER, CLUSTER_NAME, DELETE, DESCRIBE, TOPIC

from .registry import RequestContext

API_KEY = 20

log = logging.getLogger(__name__)

UNKNOWN_NAME = "This server does not host this topic-partition."
UNKNOWN_ID = "This server does not host this topic ID."


def _result(
    name: str | None, topic_id: uuid.UUID, code: ErrorCode = ErrorCode.NONE, message: str | None = None
) -> DeletableTopicResult:
    return DeletableTopicResult(name=name, topic_id=topic_id, error_code=int(code), error_message=message)


def _entries(ctx: RequestContext, req: DeleteTopicsRequest) -> list[tuple[str | None, uuid.UUID]]:
    if ctx.api_version < 6:
        return [(name, ZERO_UUID) for name in req.topic_names]
    return [(t.name, t.topic_id) for t in req.topics]


#: Kafka's message of TOPIC_AUTHORIZATION_FAILED
DENIED = "Topic authorization failed."


def handle(ctx: RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    registry = ctx.services.topics
    entries = _entries(ctx, req)
    names = Counter(n for n, i in entries if n is not None and i == ZERO_UUID)
    ids = Counter(i for n, i in entries if n is None and i != ZERO_UUID)
    # a name whose topic is also given by id: neither is deleted
    conflicts = set()
    for name, count in names.items():
        topic = registry.get(name)
        if count == 1 and topic is not None and ids.get(topic.topic_id) == 1:
            conflicts.add(topic.topic_id)
    results: list[DeletableTopicResult] = []
    reported: set = set()
    # as Kafka: DELETE on the cluster allows everything; else DESCRIBE (a name) and DELETE (the topic)
    # on each topic, a name not describable being refused before its existence is checked
    cluster_delete = ctx.services.authorizer is None or ctx.allowed(DELETE, CLUSTER, CLUSTER_NAME)
    for name, topic_id in entries:
        if name is None and topic_id == ZERO_UUID:
            results.append(
                _result(
                    None, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified."
                )
            )
        elif name is not None and topic_id != ZERO_UUID:
            results.append(
                _result(
                    name,
                    topic_id,
                    ErrorCode.INVALID_REQUEST,
                    "You may not specify both topic name and topic id.",
                )
            )
        elif name is not None and names[name] > 1:
            if ("name", name) not in reported:
                reported.add(("name", name))
                results.append(_result(name, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
        elif name is None and ids[topic_id] > 1:
            if ("id", topic_id) not in reported:
                reported.add(("id", topic_id))
                results.append(_result(None, topic_id, ErrorCode.INVALID_REQUEST, "Duplicate topic id."))
        elif name is None and topic_id in conflicts:
            continue  # answered under the name
        elif name is None:
            topic = registry.by_id(topic_id)
            if topic is None:
                results.append(_result(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, UNKNOWN_ID))
            elif not cluster_delete and not ctx.allowed(DELETE, TOPIC, topic.name):
                shown = topic.name if ctx.allowed(DESCRIBE, TOPIC, topic.name) else None
                results.append(_result(shown, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED, DENIED))
            else:
                results.append(_delete(ctx, topic.name, topic_id))
        else:
            topic = registry.get(name)
            if not cluster_delete and not ctx.allowed(DESCRIBE, TOPIC, name):
                results.append(_result(name, ZERO_UUID, ErrorCode.TOPIC_AUTHORIZATION_FAILED, DENIED))
            elif topic is None:
                results.append(_result(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_NAME))
            elif not cluster_delete and not ctx.allowed(DELETE, TOPIC, name):
                results.append(_result(name, ZERO_UUID, ErrorCode.TOPIC_AUTHORIZATION_FAILED, DENIED))
            elif topic.topic_id in conflicts:
                results.append(
                    _result(
                        name,
                        topic.topic_id,
                        ErrorCode.INVALID_REQUEST,
                        "The provided topic name maps to an ID that was already supplied.",
                    )
                )
            else:
                results.append(_delete(ctx, name, topic.topic_id))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


def _delete(ctx: RequestContext, name: str, topic_id: uuid.UUID) -> DeletableTopicResult:
    try:
        ctx.services.admin.delete_topic(name)
    except KafkaError as e:
        return _result(name, topic_id, e.code, e.message)
    except OSError as e:
        log.error("deleting topic %s failed: %s", name, e)
        return _result(name, topic_id, ErrorCode.KAFKA_STORAGE_ERROR, f"cannot remove the topic's logs: {e}")
    return _result(name, topic_id)


def error_response(req: DeleteTopicsRequest, version: int, code: ErrorCode) -> DeleteTopicsResponse:
    if version < 6:
        results = [_result(name, ZERO_UUID, code) for name in req.topic_names]
    else:
        results = [_result(t.name, t.topic_id, code) for t in req.topics]
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)
