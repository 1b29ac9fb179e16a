"""DescribeLogDirs (key 35) v0-5: v1 no change on the wire (v0 is gone from Kafka 4.0, served here for
3.x clients); v2 flexible; v3 top-level error code; v4 the volume's total and usable bytes; v5
whether the directory is cordoned.

As Kafka's ReplicaManager.describeLogDirs for this broker's one log directory (``log.dirs``, as an
absolute path): the partitions asked for (null topics: every partition, internal topics included)
that have a log here, grouped by topic (topics in name order, partitions in number order; partitions
that do not exist are left out, and so is a topic with none), each with the bytes of its segments
and an offset lag of 0 (the log end offset is never behind the high watermark on a leader). The
volume's total and usable bytes come from ``statvfs`` (a Java File's total and usable space). No
directory is cordoned; there are no future logs (AlterReplicaLogDirs has nowhere to move them).
"""

from __future__ import annotations

import logging
import os

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.generated.describe_log_dirs import (
    DescribeLogDirsPartition,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from broker.security.authorizer import CLUSTER, CLUSTER_NAME, DESCRIBE

from .registry import RequestContext

API_KEY = 35

log = logging.getLogger(__name__)


def log_dir(ctx: RequestContext) -> str:
    """The log directory as Kafka names it: the configured path made absolute."""
    return os.path.abspath(ctx.services.logs.data_dir)


def handle(ctx: RequestContext, req: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    if not ctx.allowed(DESCRIBE, CLUSTER, CLUSTER_NAME):  # as Kafka: DESCRIBE on the cluster
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    logs = ctx.services.logs
    if req.topics is None:
        wanted = set(logs.logs)
    else:
        wanted = {(t.topic, p) for t in req.topics for p in t.partitions}
    path = log_dir(ctx)
    by_topic: dict[str, list[DescribeLogDirsPartition]] = {}
    for (topic, partition), plog in sorted(logs.logs.items()):
        if (topic, partition) not in wanted or plog.deleted:
            continue
        by_topic.setdefault(topic, []).append(
            DescribeLogDirsPartition(
                partition_index=partition,
                partition_size=plog.size_bytes(),
                offset_lag=max(plog.high_watermark - plog.log_end_offset, 0),
                is_future_key=False,
            )
        )
    try:
        st = os.statvfs(path)
    except OSError as e:
        log.warning("cannot describe log directory %s: %s", path, e)
        result = DescribeLogDirsResult(error_code=int(ErrorCode.KAFKA_STORAGE_ERROR), log_dir=path, topics=[])
    else:
        result = DescribeLogDirsResult(
            error_code=0,
            log_dir=path,
            topics=[DescribeLogDirsTopic(name=t, partitions=parts) for t, parts in by_topic.items()],
            total_bytes=st.f_blocks * st.f_frsize,
            usable_bytes=st.f_bavail * st.f_frsize,
            is_cordoned=False,
        )
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=[result])


def error_response(req: DescribeLogDirsRequest, version: int, code: ErrorCode) -> DescribeLogDirsResponse:
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=int(code), results=[])
