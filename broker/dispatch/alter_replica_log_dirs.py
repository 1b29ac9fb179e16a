"""AlterReplicaLogDirs (key 34) v0-2: v1 no change on the wire (v0 is gone from Kafka 4.0, served here
for 3.x clients); v2 flexible.

As Kafka's ReplicaManager.alterReplicaLogDirs on a broker with one log directory. The request maps
each partition to a destination (a partition named under several directories: the last one). Per
partition, in Kafka's order: a topic name too long for the future log's directory name
(``<topic>-<partition>.<32 hex>-future`` over 255 bytes) is INVALID_TOPIC_EXCEPTION; a destination
that is not the configured log directory's absolute path is LOG_DIR_NOT_FOUND; a partition that does
not exist is UNKNOWN_TOPIC_OR_PARTITION (REPLICA_NOT_AVAILABLE is for a replica on another broker,
which a one-node cluster never has); otherwise the replica already lives in the destination
and nothing moves (NONE).
"""

from __future__ import annotations

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.generated.alter_replica_log_dirs import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopicResult,
)
from broker.security.authorizer import ALTER, CLUSTER, CLUSTER_NAME

from .describe_log_dirs import log_dir
from .registry import RequestContext

API_KEY = 34

#: ".", 32 hex digits and "-future": what Kafka appends to "<topic>-<partition>" for a future log
FUTURE_SUFFIX_LEN = 1 + 32 + len("-future")


def _check(ctx: RequestContext, topic: str, partition: int, path: str) -> ErrorCode:
    if len(f"{topic}-{partition}".encode()) + FUTURE_SUFFIX_LEN > 255:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    if path != log_dir(ctx):
        return ErrorCode.LOG_DIR_NOT_FOUND
    if ctx.services.logs.get(topic, partition) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return ErrorCode.NONE


def handle(ctx: RequestContext, req: AlterReplicaLogDirsRequest) -> AlterReplicaLogDirsResponse:
    if not ctx.allowed(ALTER, CLUSTER, CLUSTER_NAME):  # as Kafka: ALTER on the cluster
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    wanted: dict[str, dict[int, str]] = {}
    for d in req.dirs:
        for t in d.topics:
            parts = wanted.setdefault(t.name, {})
            for p in t.partitions:
                parts.pop(p, None)  # keep the order of the last mention
                parts[p] = d.path
    results = [
        AlterReplicaLogDirTopicResult(
            topic_name=topic,
            partitions=[
                AlterReplicaLogDirPartitionResult(
                    partition_index=p, error_code=int(_check(ctx, topic, p, path))
                )
                for p, path in parts.items()
            ],
        )
        for topic, parts in wanted.items()
    ]
    return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=results)


def error_response(
    req: AlterReplicaLogDirsRequest, version: int, code: ErrorCode
) -> AlterReplicaLogDirsResponse:
    results = [
        AlterReplicaLogDirTopicResult(
            topic_name=t.name,
            partitions=[
                AlterReplicaLogDirPartitionResult(partition_index=p, error_code=int(code))
                for p in t.partitions
            ],
        )
        for d in req.dirs
        for t in d.topics
    ]
    return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=results)
