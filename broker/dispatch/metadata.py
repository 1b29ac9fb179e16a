"""Metadata (key 3) v0-13: v1 null topics means all (v0: empty means all) and adds the controller;
v2 cluster id; v4 allow_auto_topic_creation; v5 offline replicas; v7 leader epoch; v8-10 cluster
authorized operations; v8+ topic authorized operations; v9 flexible; v10 topic ids; v12 lookup by
topic id (null name); v13 top-level error code.

Brokers are the live nodes (broker/nodes.py: one unless ``cluster.nodes``), each at the address of
the listener the client used; partitions report their leader, epoch, replicas, ISR (the live
replicas) and offline replicas, LEADER_NOT_AVAILABLE when none is live. Unknown topics are created when both the broker
(``auto.create.topics.enable``) and the request (v4+) allow it, with ``num.partitions`` partitions.
"""

from __future__ import annotations

import logging
from weakref import WeakKeyDictionary

from broker.cluster import Topic, TopicRegistry, validate_topic_name
from broker.coordinator import OFFSETS_TOPIC
from broker.nodes import Nodes
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.generated.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from broker.protocol.primitives import ZERO_UUID
from broker.security.authorizer import CLUSTER, CLUSTER_NAME, CREATE, DESCRIBE, TOPIC

from . import acl
from .registry import RequestContext

API_KEY = 3

log = logging.getLogger(__name__)


def node_address(ctx: RequestContext, node: int) -> tuple[str, int]:
    """The address of ``node`` for clients of the listener this one reached."""
    b = ctx.services
    return b.nodes.address(node, ctx.client.listener) or b.advertised_address(ctx.client.listener)


def broker_entries(ctx: RequestContext) -> list[MetadataResponseBroker]:
    """Every live node, at the address of the listener the client used."""
    rack = ctx.services.rack
    out = []
    for node in ctx.services.nodes.live_ids():
        host, port = node_address(ctx, node)
        out.append(MetadataResponseBroker(node_id=node, host=host, port=port, rack=rack))
    return out


#: per broker (its Nodes), topic name -> (layout, the topic's partition entries): on a single node
#: every partition is led by the node at its persisted epoch (0, or a cluster's last: it never
#: changes on one node), so the entries change only with the topic's layout (id, partition count,
#: the node), and are built once per layout, not per request
_SINGLE_NODE_ENTRIES: WeakKeyDictionary[Nodes, dict[str, tuple[tuple, list[MetadataResponsePartition]]]] = (
    WeakKeyDictionary()
)


def partition_entries(nodes: Nodes, topics: TopicRegistry, topic: Topic) -> list[MetadataResponsePartition]:
    """The topic's partitions as Metadata reports them (the list is shared: never change it)."""
    if nodes.multi:
        out = []
        for i in range(topic.partitions):
            st = nodes.state(topic, i)
            out.append(
                MetadataResponsePartition(
                    error_code=0 if st.leader >= 0 else int(ErrorCode.LEADER_NOT_AVAILABLE),
                    partition_index=i,
                    leader_id=st.leader,
                    leader_epoch=st.leader_epoch,
                    replica_nodes=st.replicas,
                    isr_nodes=st.isr,
                    offline_replicas=st.offline,
                )
            )
        return out
    # one node leads everything at the persisted epoch (Nodes.state), whatever the replica lists say
    first = nodes.first
    layout = (topic.topic_id, topic.partitions, first)
    cache = _SINGLE_NODE_ENTRIES.get(nodes)
    if cache is None:
        cache = _SINGLE_NODE_ENTRIES[nodes] = {}
    hit = cache.get(topic.name)
    if hit is not None and hit[0] == layout:
        return hit[1]
    if hit is None and len(cache) >= 16:  # forget deleted topics' entries
        for name in [n for n in cache if topics.get(n) is None]:
            del cache[name]
    only, none = [first], []  # shared by every entry: the encoder only reads them
    entries = [
        MetadataResponsePartition(
            error_code=0,
            partition_index=i,
            leader_id=first,
            leader_epoch=nodes.persisted_epoch(topic, i),
            replica_nodes=only,
            isr_nodes=only,
            offline_replicas=none,
        )
        for i in range(topic.partitions)
    ]
    cache[topic.name] = (layout, entries)
    return entries


def topic_entry(ctx: RequestContext, topic: Topic, include_ops: bool) -> MetadataResponseTopic:
    ops = ctx.authorized_operations(TOPIC, topic.name, acl.TOPIC_OPS) if include_ops else acl.NOT_REQUESTED
    return MetadataResponseTopic(
        error_code=0,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=partition_entries(ctx.services.nodes, ctx.services.topics, topic),
        topic_authorized_operations=ops,
    )


def _error_topic(code: ErrorCode, name: str | None, topic_id=ZERO_UUID) -> MetadataResponseTopic:
    return MetadataResponseTopic(error_code=int(code), name=name, topic_id=topic_id, partitions=[])


def _invalid_request(req: MetadataRequest) -> MetadataResponse:
    topics = [_error_topic(ErrorCode.INVALID_REQUEST, rt.name or "", rt.topic_id) for rt in req.topics]
    return MetadataResponse(brokers=[], cluster_id=None, controller_id=-1, topics=topics)


def handle(ctx: RequestContext, req: MetadataRequest) -> MetadataResponse:
    v = ctx.api_version
    registry = ctx.services.topics
    include_ops = v >= 8 and req.include_topic_authorized_operations
    all_topics = req.topics is None or (v == 0 and not req.topics)
    out: list[MetadataResponseTopic] = []
    if all_topics:  # as Kafka: the topics the principal may not describe are left out
        out = [
            topic_entry(ctx, t, include_ops) for t in registry.all() if ctx.allowed(DESCRIBE, TOPIC, t.name)
        ]
    else:
        may_create = ctx.services.config["auto.create.topics.enable"] and (
            v < 4 or req.allow_auto_topic_creation
        )
        seen: set[str] = set()
        if v < 12 and any(rt.name is None or rt.topic_id != ZERO_UUID for rt in req.topics):
            # Lookups by topic id only exist from v12: Kafka rejects the whole request with
            # INVALID_REQUEST (its error response: every topic, no brokers, no cluster id).
            return _invalid_request(req)
        for rt in req.topics:
            name = rt.name
            if name is None:
                topic = registry.by_id(rt.topic_id)
                if topic is None:
                    out.append(_error_topic(ErrorCode.UNKNOWN_TOPIC_ID, None, rt.topic_id))
                    continue
                name = topic.name
                if not ctx.allowed(DESCRIBE, TOPIC, name):  # topic ids are not secret: the id is kept
                    out.append(_error_topic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, rt.topic_id))
                    continue
            if name in seen:
                continue
            seen.add(name)
            if not ctx.allowed(DESCRIBE, TOPIC, name):
                # as Kafka: the topic's existence is not disclosed
                out.append(_error_topic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name))
                continue
            topic = registry.get(name)
            if (
                topic is None
                and may_create
                and not ctx.allowed(CREATE, CLUSTER, CLUSTER_NAME)
                and not ctx.allowed(CREATE, TOPIC, name)
            ):
                out.append(_error_topic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name))
                continue
            if topic is None and may_create:
                try:
                    if name == OFFSETS_TOPIC:  # created as the coordinator's internal, compacted log
                        ctx.services.groups.ensure_log()
                        topic = registry.get(name)
                    else:
                        topic = ctx.services.admin.create_topic(name, ctx.services.config["num.partitions"])
                except KafkaError as e:
                    out.append(_error_topic(e.code, name))
                    continue
                except OSError as e:  # e.g. out of file descriptors or disk space
                    log.error("auto-creating topic %s failed: %s", name, e)
                    out.append(_error_topic(ErrorCode.KAFKA_STORAGE_ERROR, name))
                    continue
            if topic is None:
                try:  # as Kafka: a name that could never exist is INVALID_TOPIC_EXCEPTION
                    validate_topic_name(name)
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                except KafkaError as e:
                    code = e.code
                out.append(_error_topic(code, name))
                continue
            out.append(topic_entry(ctx, topic, include_ops))
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=broker_entries(ctx),
        cluster_id=ctx.services.cluster_id,
        controller_id=ctx.services.nodes.controller(),
        topics=out,
        cluster_authorized_operations=(
            _cluster_ops(ctx)
            if (8 <= v <= 10 and req.include_cluster_authorized_operations)
            else acl.NOT_REQUESTED
        ),
        error_code=0,
    )


def _cluster_ops(ctx: RequestContext) -> int:
    """As Kafka: the cluster's authorized operations only for a principal that may describe it, else 0."""
    if not ctx.allowed(DESCRIBE, CLUSTER, CLUSTER_NAME):
        return 0
    return ctx.authorized_operations(CLUSTER, CLUSTER_NAME, acl.CLUSTER_OPS)
