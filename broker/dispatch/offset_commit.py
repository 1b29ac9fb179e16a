"""OffsetCommit (key 8) v0-10: v1 generation and member id (and a per-partition timestamp, v1
only); v2-4 retention time (ignored, as Kafka does since 2.1); v6 leader epoch; v7 instance id; v8
flexible; v9 member epochs for consumer groups; v10 topic ids. Rules: broker/coordinator/offsets.py."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import Any

from broker import native
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.offset_commit import REQUEST_DECODERS as GENERATED_DECODERS
from broker.protocol.generated.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from broker.protocol.primitives import ZERO_UUID, direct_decoder, new, short_topic
from broker.security.authorizer import GROUP, READ, TOPIC

from . import coordinating
from .registry import Deferred, RequestContext

try:  # broker/dispatch/_offset_commit.c, an optional extension (setup.py)
    from . import _offset_commit
except ImportError:  # not built (no compiler at install): the Python parse alone
    _offset_commit = None

API_KEY = 8

#: (the direct decoder) a partition of the common shape, whose metadata is the empty string: index,
#: offset, then v2-5 the metadata's int16 length 0; v6-7 the leader epoch and that length; v8+ the
#: leader epoch, the compact length 0 + 1 and no tagged fields
_PART_V2 = struct.Struct(">iqh")
_PART_V6 = struct.Struct(">iqih")
_PART_V8 = struct.Struct(">iqiBB")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def _partition(index: int, offset: int, epoch: int) -> OffsetCommitRequestPartition:
    """A partition of the common shape (metadata "", no timestamp, no tagged fields)."""
    o = new(OffsetCommitRequestPartition)
    o.partition_index = index
    o.committed_offset = offset
    o.committed_leader_epoch = epoch
    o.commit_timestamp = -1
    o.committed_metadata = ""
    o._unknown_tagged = None
    return o


def _common_request(b: bytes, p: int, v: int) -> tuple[OffsetCommitRequest, int] | None:
    """The request of one topic whose partitions all carry empty metadata (what the Java client,
    librdkafka and kafka-python commit), v2 and later, decoded directly from its fixed layout: the
    generated decoder's result for it, with fewer steps and the partitions read in one
    ``iter_unpack``. None for any other shape (more topics, no partition, metadata, tagged fields, a
    length that needs a longer varint than usual, a frame that ends early): the generated decoder
    decides those."""
    end = len(b)
    flexible = v >= 8
    # group id, generation, member id: int16 lengths, or compact (varint length + 1) from v8
    if flexible:
        n = b[p] - 1
        p += 1
        if n < 0 or n > 126 or p + n > end:
            return None
        group_id = b[p : p + n].decode()
        p += n
        generation = _I32.unpack_from(b, p)[0]
        n = b[p + 4] - 1
        p += 5
        if n < 0 or n > 126 or p + n > end:
            return None
        member_id = b[p : p + n].decode()
        p += n
        n = b[p] - 1  # the instance id: nullable
        p += 1
        if n > 126 or p + n > end:
            return None
        if n < 0:
            instance = None
        else:
            instance = b[p : p + n].decode()
            p += n
        if b[p] != 2:  # one topic
            return None
        topic = short_topic(b, p + 1, end, v >= 10)
        if topic is None:
            return None
        name, topic_id, p = topic
        count = b[p] - 1
        p += 1
        if count < 1 or count > 126:
            return None
        stop = p + 18 * count
        if stop + 2 > end or b[stop] or b[stop + 1]:  # the topic's and the request's tagged fields
            return None
        rows = _PART_V8.iter_unpack(b[p:stop])
        after = stop + 2
    else:
        n = _I16.unpack_from(b, p)[0]
        p += 2
        if n < 0 or p + n > end:
            return None
        group_id = b[p : p + n].decode()
        p += n
        generation = _I32.unpack_from(b, p)[0]
        n = _I16.unpack_from(b, p + 4)[0]
        p += 6
        if n < 0 or p + n > end:
            return None
        member_id = b[p : p + n].decode()
        p += n
        retention = -1
        if v < 5:
            retention = _I64.unpack_from(b, p)[0]
            p += 8
        instance = None
        if v >= 7:
            n = _I16.unpack_from(b, p)[0]
            p += 2
            if p + n > end:
                return None
            if n >= 0:
                instance = b[p : p + n].decode()
                p += n
        if _I32.unpack_from(b, p)[0] != 1:  # one topic
            return None
        n = _I16.unpack_from(b, p + 4)[0]
        p += 6
        if n < 0 or p + n > end:
            return None
        name = b[p : p + n].decode()
        p += n
        topic_id = ZERO_UUID
        count = _I32.unpack_from(b, p)[0]
        p += 4
        size = 18 if v >= 6 else 14
        stop = p + size * count
        if count < 1 or stop > end:
            return None
        rows = (_PART_V6 if v >= 6 else _PART_V2).iter_unpack(b[p:stop])
        after = stop
    parts = []
    add = parts.append
    if flexible:
        for index, offset, epoch, meta, tags in rows:
            if meta != 1 or tags:  # metadata other than "", or tagged fields
                return None
            add(_partition(index, offset, epoch))
    elif v >= 6:
        for index, offset, epoch, meta in rows:
            if meta:
                return None
            add(_partition(index, offset, epoch))
    else:
        for index, offset, meta in rows:
            if meta:
                return None
            add(_partition(index, offset, -1))
    t = new(OffsetCommitRequestTopic)
    t.name = name
    t.topic_id = topic_id
    t.partitions = parts
    t._unknown_tagged = None
    req = new(OffsetCommitRequest)
    req.group_id = group_id
    req.generation_id_or_member_epoch = generation
    req.member_id = member_id
    req.group_instance_id = instance
    req.retention_time_ms = -1 if flexible else retention
    req.topics = [t]
    req._unknown_tagged = None
    return req, after


#: the compiled ``_common_request`` of v8-9 (broker/dispatch/_offset_commit.c): the same request
#: where it takes one, None where the Python parse decides; None when the extension is not built or
#: ``PYKBROKER_NATIVE=0`` (tests/dispatch/test_offset_commit_decoder.py holds the two to one result)
native_common_request: Callable[[bytes, int, int], tuple[OffsetCommitRequest, int] | None] | None = None
if native.compiled(_offset_commit) is not None:
    _offset_commit.bind(
        OffsetCommitRequest, OffsetCommitRequestTopic, OffsetCommitRequestPartition, ZERO_UUID
    )
    native_common_request = _offset_commit.common_request

#: the versions the compiled parse takes (flexible, topics by name)
NATIVE_VERSIONS = range(8, 10)


def _decoder(v: int) -> Callable[[bytes, int], tuple[OffsetCommitRequest, int]]:
    if v < 2:  # v0-1 (no client of this decade sends them): the generated decoder alone
        return GENERATED_DECODERS[v]
    native = native_common_request if v in NATIVE_VERSIONS else None
    return direct_decoder(v, _common_request, GENERATED_DECODERS[v], native)


#: the request decoders the pipeline uses for OffsetCommit (broker/dispatch/registry.py): a request
#: of one topic whose partitions carry no metadata is parsed directly (``_common_request``), anything
#: else by the generated decoder; tests/dispatch/test_offset_commit_decoder.py holds the two to the
#: same result
REQUEST_DECODERS = tuple(_decoder(v) for v in range(len(GENERATED_DECODERS)))


_Future = asyncio.Future


def handle(ctx: RequestContext, req: OffsetCommitRequest) -> Any:
    services = ctx.services
    if services.authorizer is not None:
        return _handle_authorized(ctx, req)
    coordinating.require(ctx, req.group_id)
    # an answer committing everything may come encoded (bytes)
    result = services.groups.commit_offsets(ctx, req, True)
    if type(result) is _Future or asyncio.isfuture(result) or asyncio.iscoroutine(result):
        # the commit is applied; only its flush is awaited: the connection may go on meanwhile
        return Deferred(result)
    return result


def _handle_authorized(ctx: RequestContext, req: OffsetCommitRequest) -> Any:
    # as Kafka: READ on the group (else every partition fails), then READ on each topic: only the
    # authorized topics are committed, the others get TOPIC_AUTHORIZATION_FAILED
    if not ctx.allowed(READ, GROUP, req.group_id):
        return error_response(req, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    denied = []
    kept = []
    for t in req.topics:
        name = t.name if ctx.api_version < 10 else ctx.services.topics.name_of(t.topic_id)
        (kept if name is None or ctx.allowed(READ, TOPIC, name) else denied).append(t)
    if denied:
        req.topics = kept
        if not kept:
            return OffsetCommitResponse(throttle_time_ms=0, topics=_denied_topics(denied))
    coordinating.require(ctx, req.group_id)
    # without denied topics to add, an answer committing everything may come encoded (bytes)
    result = ctx.services.groups.commit_offsets(ctx, req, not denied)
    if denied and isinstance(result, OffsetCommitResponse):
        result.topics.extend(_denied_topics(denied))
        return result
    if asyncio.isfuture(result) or asyncio.iscoroutine(result):
        # the commit is applied; only its flush is awaited: the connection may go on meanwhile
        return Deferred(_with_denied(result, denied) if denied else result)
    return _with_denied(result, denied) if denied else result


def _denied_topics(denied: list) -> list[OffsetCommitResponseTopic]:
    code = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return [
        OffsetCommitResponseTopic(
            name=t.name,
            topic_id=t.topic_id,
            partitions=[OffsetCommitResponsePartition(p.partition_index, code) for p in t.partitions],
        )
        for t in denied
    ]


async def _with_denied(result: Any, denied: list) -> Any:
    response = await result
    response.topics.extend(_denied_topics(denied))
    return response


def error_response(req: OffsetCommitRequest, version: int, code: ErrorCode) -> OffsetCommitResponse:
    """Every partition of the request with ``code`` (e.g. NOT_COORDINATOR when the
    coordinator log cannot be written)."""
    topics = [
        OffsetCommitResponseTopic(
            name=t.name,
            topic_id=t.topic_id,
            partitions=[OffsetCommitResponsePartition(p.partition_index, int(code)) for p in t.partitions],
        )
        for t in req.topics
    ]
    return OffsetCommitResponse(throttle_time_ms=0, topics=topics)
