"""Produce (key 0) v3-13: v3 carries exactly one v2 record batch per partition and a transactional
id; v5 log start offset; v8 per-batch record errors and an error message; v9 flexible; v10 current
leader (tagged); v13 topic ids instead of names. Versions 0-2 (message formats 0/1) are not served,
as in Kafka 4.

With acks=-1, a topic whose min.insync.replicas exceeds its ISR (the live replicas; one node: itself)
gets NOT_ENOUGH_REPLICAS, as Kafka answers when its ISR is too small. On a node that does not lead
the partition (a multi-node cluster, broker/nodes.py): NOT_LEADER_OR_FOLLOWER, with the new leader
and its endpoint from v10 (KIP-951). Each batch is checked (magic,
length, CRC-32C, record count, size against max.message.bytes), then its records (well formed,
offset deltas 0..n-1, decompressed with a cap: ``broker.log.streaming``) and their timestamps
(INVALID_TIMESTAMP outside message.timestamp.before/after.max.ms: ``broker.log.validator``), then
against the producer's sequence state when it is idempotent; it is recompressed when the topic's
compression.type names another codec, and appended with broker-assigned offsets. acks=1 and
acks=-1 are answered once the append is durable per ``log.flush``; acks=0 gets no answer, and an
error with acks=0 closes the connection so the producer notices, as Kafka does.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import struct
from collections.abc import Callable
from functools import lru_cache
from uuid import UUID

from broker import native
from broker.log import validator
from broker.log.batch import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchInfo,
    InvalidBatch,
    read_header,
    validate_produce,
)
from broker.log.manager import LogManager, StorageError
from broker.log.partition import PartitionLog
from broker.log.streaming import EXPANSION_LIMIT, native_stamp, validate_one, validate_records
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.generated.produce import REQUEST_DECODERS as GENERATED_DECODERS
from broker.protocol.generated.produce import (
    RESPONSE_DECODERS,
    RESPONSE_ENCODERS,
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceData,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
    TopicProduceResponse,
)
from broker.protocol.primitives import (
    ZERO_UUID,
    direct_decoder,
    new,
    short_topic,
    to_uuid,
    uvarint,
    uvarint_tail,
)
from broker.quotas import user_of
from broker.security.authorizer import TOPIC, TRANSACTIONAL_ID, WRITE

from . import leadership
from .registry import CloseConnection, Deferred, RequestContext

try:  # broker/dispatch/_produce.c, an optional extension (setup.py); named apart from ``_produce`` below
    from . import _produce as _compiled
except ImportError:  # not built (no compiler at install): the Python parse alone
    _compiled = None

API_KEY = 0
VERSIONS = (3, 13)
#: the first version whose clients wait out throttle_time_ms themselves (KIP-219)
CLIENT_THROTTLES = 6

log = logging.getLogger(__name__)


#: (the one-partition request decoder) transactional id length, acks and timeout, topic count
_HEAD_V3 = struct.Struct(">h")
_ACKS_V3 = struct.Struct(">hii")
_NAME_V3 = struct.Struct(">h")
_PART_V3 = struct.Struct(">iii")
_ACKS_V9 = struct.Struct(">hi")
_INT = struct.Struct(">i")


def _one_partition_request(b: bytes, p: int, v: int) -> tuple[ProduceRequest, int] | None:
    """The request of one topic and one partition carrying records (librdkafka's Produce) decoded
    directly from its fixed layout: the generated decoder's result for it, with fewer steps. None for
    any other shape (more topics or partitions, null records, tagged fields, a length that needs a
    longer varint than usual, a frame that ends early): the generated decoder decides those."""
    end = len(b)
    if v < 9:  # the transactional id: an int16 length, or a compact (varint length + 1) one below
        n = _HEAD_V3.unpack_from(b, p)[0]
        p += 2
    else:
        n = b[p] - 1
        p += 1
        if n > 126:
            return None
    if n < 0:
        tid = None
    elif p + n > end:
        return None
    else:
        tid = b[p : p + n].decode()
        p += n
    if v < 9:
        acks, timeout, topics = _ACKS_V3.unpack_from(b, p)
        n = _NAME_V3.unpack_from(b, p + 10)[0]
        p += 12
        if topics != 1 or n < 0 or p + n > end:
            return None
        name = b[p : p + n].decode()
        p += n
        partitions, index, n = _PART_V3.unpack_from(b, p)
        p += 12
        if partitions != 1 or n < 0 or p + n > end:
            return None
        records = memoryview(b)[p : p + n]
        p += n
        topic_id = ZERO_UUID
    else:
        acks, timeout = _ACKS_V9.unpack_from(b, p)
        p += 6
        if b[p] != 2:  # one topic
            return None
        topic = short_topic(b, p + 1, end, v >= 13)
        if topic is None:
            return None
        name, topic_id, p = topic
        if b[p] != 2:  # one partition
            return None
        index = _INT.unpack_from(b, p + 1)[0]
        p += 5
        n = b[p]
        p += 1
        if n > 127:
            n, p = uvarint_tail(b, p, n)
        n -= 1
        if n < 0 or p + n + 3 > end:
            return None
        records = memoryview(b)[p : p + n]
        p += n
        if b[p] or b[p + 1] or b[p + 2]:  # tagged fields: of the partition, the topic, the request
            return None
        p += 3
    pd = new(PartitionProduceData)
    pd.index = index
    pd.records = records
    pd._unknown_tagged = None
    td = new(TopicProduceData)
    td.name = name
    td.topic_id = topic_id
    td.partition_data = [pd]
    td._unknown_tagged = None
    o = new(ProduceRequest)
    o.transactional_id = tid
    o.acks = acks
    o.timeout_ms = timeout
    o.topic_data = [td]
    o._unknown_tagged = None
    return o, p


#: the compiled ``_one_partition_request`` (broker/dispatch/_produce.c): the same request where it
#: takes one, None where the Python parse decides; None when the extension is not built or
#: ``PYKBROKER_NATIVE=0`` (tests/dispatch/test_produce_decoder.py holds the two to one result)
native_one_partition_request: Callable[[bytes, int, int], tuple[ProduceRequest, int] | None] | None = None
if native.compiled(_compiled) is not None:
    _compiled.bind(ProduceRequest, TopicProduceData, PartitionProduceData, ZERO_UUID, to_uuid)
    native_one_partition_request = _compiled.one_partition_request


#: the request decoders the pipeline uses for Produce (broker/dispatch/registry.py): a request of one
#: partition is parsed directly (``_one_partition_request``, compiled where built), anything else by
#: the generated decoder;
#: tests/dispatch/test_produce_decoder.py holds the two to the same result
REQUEST_DECODERS = {
    v: direct_decoder(v, _one_partition_request, GENERATED_DECODERS[v], native_one_partition_request)
    for v in range(VERSIONS[0], VERSIONS[1] + 1)
}


def _error(
    index: int,
    code: ErrorCode,
    message: str | None = None,
    record_errors: list[tuple[int, str]] | None = None,
    log_start_offset: int = -1,
) -> PartitionProduceResponse:
    """A refused partition. ``log_start_offset``: the partition's, where Kafka's answer carries it
    (refusals once the log is found: producer state, record validation; not a corrupt batch)."""
    if record_errors is None:
        record_errors = [(0, message)] if code == ErrorCode.INVALID_RECORD else []
    return PartitionProduceResponse(
        index=index,
        error_code=int(code),
        base_offset=-1,
        log_append_time_ms=-1,
        log_start_offset=log_start_offset,
        error_message=message,
        record_errors=[BatchIndexAndErrorMessage(i, m) for i, m in record_errors],
    )


def _has_transactional_records(req: ProduceRequest) -> bool:
    """Whether the first batch of some partition is transactional (Kafka's
    RequestUtils.hasTransactionalRecords: magic 2, attributes bit 4)."""
    for td in req.topic_data:
        for pd in td.partition_data:
            r = pd.records
            if r is not None and len(r) >= HEADER_SIZE and r[16] == 2 and r[22] & TRANSACTIONAL_MASK:
                return True
    return False


def _refuse_all(req: ProduceRequest, code: ErrorCode) -> ProduceResponse:
    """Every partition of the request with ``code`` (Kafka's ProduceRequest.getErrorResponse)."""
    return ProduceResponse(
        responses=[
            TopicProduceResponse(
                name=td.name,
                topic_id=td.topic_id,
                partition_responses=[_error(pd.index, code) for pd in td.partition_data],
            )
            for td in req.topic_data
        ],
        throttle_time_ms=0,
    )


#: the first version whose transactional batches add their partition to the transaction (KIP-890
#: part 2, while transaction.version 2 is finalized: a TV2 client sends no AddPartitionsToTxn)
TV2_VERSION = 12


def handle(ctx: RequestContext, req: ProduceRequest):
    if ctx.api_version >= TV2_VERSION and req.transactional_id is not None:
        adding = _add_to_transaction(ctx, req)
        if adding:
            return _after_adding(adding, ctx, req)
    return _produce(ctx, req)


def _add_to_transaction(ctx: RequestContext, req: ProduceRequest) -> list:
    """The implicit AddPartitionsToTxn of a transactional Produce v12 (Kafka's ReplicaManager sends
    it to the coordinator before appending): the partitions of its transactional batches that are
    not yet in the producer's transaction are added to it, as its client transaction version 2.
    Only partitions that exist and that the request may write to (WRITE on the transactional id
    and the topic); the add's errors are what verification then answers. The awaitables of the
    coordinator's writes (none: nothing to wait for)."""
    services = ctx.services
    txns = services.txns
    tid = req.transactional_id
    if txns.transaction_version < 2 or not ctx.allowed(WRITE, TRANSACTIONAL_ID, tid):
        return []
    wanted: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for td in req.topic_data:
        topic = services.topics.by_id(td.topic_id) if ctx.api_version >= 13 else services.topics.get(td.name)
        if topic is None or topic.internal or topic.name.startswith("__"):
            continue
        if not ctx.allowed(WRITE, TOPIC, topic.name):
            continue
        for pd in td.partition_data:
            if pd.records is None or not 0 <= pd.index < topic.partitions:
                continue
            try:
                first = read_header(pd.records, 0)
            except InvalidBatch:  # not added: the append's validation answers it
                continue
            if not first.is_transactional:
                continue
            producer = (first.producer_id, first.producer_epoch)
            if txns.needs_add(tid, *producer, (topic.name, pd.index)):
                wanted.setdefault(producer, []).append((topic.name, pd.index))
    outs = [txns.add_partitions(tid, pid, epoch, parts, tv=2) for (pid, epoch), parts in wanted.items()]
    return [out for out in outs if not isinstance(out, int)]


async def _after_adding(adding: list, ctx: RequestContext, req: ProduceRequest):
    """The produce, once its partitions are in the transaction (the connection waits for it, so
    its next produce cannot overtake this one)."""
    for out in adding:
        await out
    response = _produce(ctx, req)
    if type(response) is Deferred:
        return await response.awaitable
    return response


def _produce(ctx: RequestContext, req: ProduceRequest):
    services = ctx.services
    acks = req.acks
    v = ctx.api_version
    topic_data = req.topic_data
    if (
        len(topic_data) == 1
        and len(topic_data[0].partition_data) == 1
        and (acks == -1 or acks == 1)
        and not services.nodes.multi
        and not services.quotas.produce.enabled
    ):
        out = _produce_one(ctx, req, topic_data[0], v)
        if out is not None:
            return out
    if _has_transactional_records(req) and (
        req.transactional_id is None or not ctx.allowed(WRITE, TRANSACTIONAL_ID, req.transactional_id)
    ):
        # as Kafka: transactional records need a transactional id in the request, and WRITE on it,
        # else every partition fails; with acks=0 the connection is closed
        if acks == 0:
            raise CloseConnection("a transactional produce request with acks=0 was not authorized")
        return _refuse_all(req, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    now = services.logs.now_ms()  # the broker clock (broker/clock.py)
    waits: list[asyncio.Future] = []
    #: (name, topic id, partitions): each partition's response object, or the tuple of an append
    #: (``_append``): a request of thousands of partitions builds no object for each success
    responses: list[tuple[str, UUID, list]] = []
    any_error = False
    objects = False  # whether some partition has a response object (a refusal, a duplicate, a hint)
    hinted: set[int] = set()  # leaders named in NOT_LEADER_OR_FOLLOWER answers
    # a single node leads every partition (leadership.check); simulated nodes may not
    multi = services.nodes.multi
    for td in req.topic_data:
        if v >= 13:
            topic = services.topics.by_id(td.topic_id)
            name = topic.name if topic is not None else None
        else:
            name = td.name
            topic = services.topics.get(name)
        # what refuses every partition of the topic, checked once per topic, in Kafka's order: WRITE
        # on the topic (before its existence), acks, existence, internal topics
        refuse: tuple[ErrorCode, str | None] | None = None
        if name is not None and not ctx.allowed(WRITE, TOPIC, name):
            refuse = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
        elif acks not in (0, 1, -1):
            refuse = (ErrorCode.INVALID_REQUIRED_ACKS, f"acks must be -1, 0 or 1, not {acks}")
        elif topic is None:
            refuse = (ErrorCode.UNKNOWN_TOPIC_ID if v >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
        elif topic.internal or topic.name.startswith("__"):
            # the coordinator's own log (and Kafka's other internal topics) take no client writes
            refuse = (ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic.name}")
        parts = []
        if refuse is not None:
            code, message = refuse
            parts = [_error(pd.index, code, message) for pd in td.partition_data]
            any_error = any_error or bool(parts)
            objects = True
        else:
            for pd in td.partition_data:
                index = pd.index
                if (
                    multi
                    and 0 <= index < topic.partitions
                    and (refused := leadership.check(ctx, topic, index))
                ):
                    resp = _error(index, refused)
                    if v >= 10:  # KIP-951: the new leader, and its endpoint below
                        leader, epoch = leadership.leader_hint(ctx, topic, index)
                        resp.current_leader = LeaderIdAndEpoch(leader, epoch)
                        hinted.add(leader)
                else:
                    resp = _append(ctx, name, index, pd.records, req.transactional_id, acks, now, waits)
                    if type(resp) is tuple:  # appended: (index, base, append time, start), no object
                        parts.append(resp)
                        continue
                objects = True
                if resp.error_code:
                    any_error = True
                parts.append(resp)
        responses.append((name or "", td.topic_id, parts))
    throttle = 0
    quota = services.quotas.produce
    if quota.enabled:  # the request's bytes count against the producer byte rate (acks=0 too)
        size = sum(len(pd.records or b"") for td in req.topic_data for pd in td.partition_data)
        throttle = quota.record(user_of(ctx.client), ctx.client_id or "", size)
        if throttle:
            ctx.client.mute_ms = throttle
    if acks == 0:
        if any_error:
            raise CloseConnection("a produce request with acks=0 failed")
        return None
    # Encoded now, while it is waited for: a request waiting for its group commit holds bytes (which
    # the collector does not track), not a tree of response objects (thousands of requests are in
    # flight with one record into each of thousands of partitions, and every object they hold
    # makes the collector's full passes over the partitions' own objects come sooner).
    if not objects:  # every partition appended: written without response objects
        body = _ok_many(v, responses, throttle)
    elif not hinted and len(responses) == 1 and len(responses[0][2]) == 1:
        body = _one_partition(v, _topic_response(responses[0]), throttle)
    else:
        response = ProduceResponse(
            responses=[_topic_response(t) for t in responses], throttle_time_ms=throttle
        )
        if hinted:
            response.node_endpoints = leadership.endpoints(ctx, NodeEndpoint, hinted)
        body = RESPONSE_ENCODERS[v](response)
    # clients before v6 (KIP-219) do not wait out throttle_time_ms: their answer waits instead
    delay_ms = throttle if v < CLIENT_THROTTLES else 0
    if not waits and not delay_ms:
        return body
    # the connection may go on appending this client's next requests while this one is flushed
    if not delay_ms:
        flush = waits[0]
        if all(w is flush for w in waits):  # every append of a request waits for the same group commit
            return Deferred(_when_durable(body, v, flush))
    return Deferred(_after_flush(body, v, waits, delay_ms))


def _produce_one(ctx: RequestContext, req: ProduceRequest, td, v: int):
    """The request of one partition of one topic (what librdkafka sends: one Produce request per
    partition batch), on a single node without quotas, with acks 1 or -1: appended and answered with
    fewer layers than the general loop of ``_produce`` (the same checks, in the same order: the same
    answer). None, before anything was appended, when it is not that case: a refusal of the whole
    topic or request is the general path's."""
    services = ctx.services
    topic = services.topics.by_id(td.topic_id) if v >= 13 else services.topics.get(td.name)
    if topic is None or topic.internal:
        return None
    name = topic.name
    if name.startswith("__") or (services.authorizer is not None and not ctx.allowed(WRITE, TOPIC, name)):
        return None
    (pd,) = td.partition_data
    records = pd.records
    tid = req.transactional_id
    if (
        records is not None
        and len(records) >= HEADER_SIZE
        and records[16] == 2
        and records[22] & TRANSACTIONAL_MASK
        and (tid is None or not ctx.allowed(WRITE, TRANSACTIONAL_ID, tid))
    ):
        return None  # refused whole (see _produce)
    index = pd.index
    waits: list[asyncio.Future] = []
    out = _append(ctx, name, index, records, tid, req.acks, services.logs.now_ms(), waits)
    if type(out) is tuple:
        body = _ok_one(v, name, td.topic_id, *out)
    else:
        body = _one_partition(
            v, TopicProduceResponse(name=name, topic_id=td.topic_id, partition_responses=[out]), 0
        )
    if not waits:
        return body
    return Deferred(_when_durable(body, v, waits[0]))


#: the success answer of one partition after its topic's head, and the response's end (throttle
#: time, tagged fields), per version: v3 index, error, base offset, log append time; v5 log start
#: offset; v8 no record errors, no error message; v9 flexible (compact arrays, tagged fields)
_OK_V3 = struct.Struct(">ihqqi")
_OK_V5 = struct.Struct(">ihqqqi")
_OK_V8 = struct.Struct(">ihqqqihi")
_OK_V9 = struct.Struct(">ihqqq4Bi1B")
_DEFAULT_LEADER = (-1, -1)


@lru_cache(maxsize=4096)
def _topic_head(v: int, name: str, topic_id: UUID | None) -> bytes:
    """The response's bytes before its only partition: one topic (named, or by id from v13) of one
    partition."""
    if v >= 13:
        return b"\x02" + topic_id.bytes + b"\x02"
    raw = name.encode()
    if v >= 9:
        return b"\x02" + uvarint(len(raw) + 1) + raw + b"\x02"
    return struct.pack(">ih", 1, len(raw)) + raw + struct.pack(">i", 1)


def _one_partition(v: int, topic: TopicProduceResponse, throttle: int) -> bytes:
    """The encoded response of a request for one partition: the generated encoder's bytes, written
    from a cached head and one struct when it succeeded (the common case; tests compare the two)."""
    (p,) = topic.partition_responses
    leader = p.current_leader
    if (
        p.error_code
        or p.record_errors
        or p.error_message is not None
        or (leader is not None and (leader.leader_id, leader.leader_epoch) != _DEFAULT_LEADER)
    ):
        return RESPONSE_ENCODERS[v](ProduceResponse(responses=[topic], throttle_time_ms=throttle))
    head = _topic_head(v, topic.name, topic.topic_id if v >= 13 else None)
    if v >= 9:
        tail = _OK_V9.pack(
            p.index, 0, p.base_offset, p.log_append_time_ms, p.log_start_offset, 1, 0, 0, 0, throttle, 0
        )
    elif v >= 8:
        tail = _OK_V8.pack(
            p.index, 0, p.base_offset, p.log_append_time_ms, p.log_start_offset, 0, -1, throttle
        )
    elif v >= 5:
        tail = _OK_V5.pack(p.index, 0, p.base_offset, p.log_append_time_ms, p.log_start_offset, throttle)
    else:
        tail = _OK_V3.pack(p.index, 0, p.base_offset, p.log_append_time_ms, throttle)
    return head + tail


def _ok_one(v: int, name: str, topic_id: UUID, index: int, base: int, append_time: int, start: int) -> bytes:
    """The encoded success answer of a request of one partition, without a throttle (what
    ``_one_partition`` writes for it, without building the response objects first)."""
    head = _topic_head(v, name, topic_id if v >= 13 else None)
    if v >= 9:
        return head + _OK_V9.pack(index, 0, base, append_time, start, 1, 0, 0, 0, 0, 0)
    if v >= 8:
        return head + _OK_V8.pack(index, 0, base, append_time, start, 0, -1, 0)
    if v >= 5:
        return head + _OK_V5.pack(index, 0, base, append_time, start, 0)
    return head + _OK_V3.pack(index, 0, base, append_time, 0)


#: one appended partition's answer in a request of many, per version (see ``_OK_V3``..``_OK_V9``),
#: and a topic's tail: v9+ the partition's (no record errors, null message, no tagged fields), the
#: topic's tagged fields
_ANSWER_V3 = struct.Struct(">ihqq")
_ANSWER_V5 = struct.Struct(">ihqqq")
_ANSWER_V8 = struct.Struct(">ihqqqih")
_ANSWER_V9 = struct.Struct(">ihqqq3B")
_COUNT = struct.Struct(">i")


def _ok_many(v: int, topics: list[tuple[str, UUID, list[tuple[int, int, int, int]]]], throttle: int) -> bytes:
    """The encoded answer of a request whose every partition was appended, from ``_append``'s
    tuples (partition, base offset, log append time, log start offset) per topic: the generated
    encoder's bytes for the same answer (tests compare the two), without a response object per
    partition."""
    out: list[bytes] = []
    add = out.append
    if v >= 9:
        add(uvarint(len(topics) + 1))
        pack = _ANSWER_V9.pack
        for name, topic_id, parts in topics:
            if v >= 13:
                add(topic_id.bytes)
            else:
                raw = name.encode()
                add(uvarint(len(raw) + 1))
                add(raw)
            add(uvarint(len(parts) + 1))
            for index, base, append_time, start in parts:
                add(pack(index, 0, base, append_time, start, 1, 0, 0))
            add(b"\x00")
        add(_COUNT.pack(throttle))
        add(b"\x00")
        return b"".join(out)
    add(_COUNT.pack(len(topics)))
    for name, _topic_id, parts in topics:
        raw = name.encode()
        add(_NAME_V3.pack(len(raw)))
        add(raw)
        add(_COUNT.pack(len(parts)))
        if v >= 8:
            pack = _ANSWER_V8.pack
            for index, base, append_time, start in parts:
                add(pack(index, 0, base, append_time, start, 0, -1))
        elif v >= 5:
            pack = _ANSWER_V5.pack
            for index, base, append_time, start in parts:
                add(pack(index, 0, base, append_time, start))
        else:
            pack = _ANSWER_V3.pack
            for index, base, append_time, _start in parts:
                add(pack(index, 0, base, append_time))
    add(_COUNT.pack(throttle))
    return b"".join(out)


def _topic_response(topic: tuple[str, UUID, list]) -> TopicProduceResponse:
    """One topic's answer as response objects (``_produce``'s tuples of appends made objects)."""
    name, topic_id, parts = topic
    return TopicProduceResponse(
        name=name,
        topic_id=topic_id,
        partition_responses=[
            PartitionProduceResponse(p[0], 0, p[1], p[2], p[3]) if type(p) is tuple else p for p in parts
        ],
    )


class _Waiting:
    """The requests waiting for one group commit (``flush``): their answer futures, encoded answers
    and versions (parallel lists), settled by one done-callback of ``flush`` (this object)."""

    __slots__ = ("flush", "outs", "bodies", "versions")

    def __init__(self, flush: asyncio.Future):
        self.flush = flush
        self.outs: list[asyncio.Future] = []
        self.bodies: list[bytes] = []
        self.versions: list[int] = []

    def __call__(self, flush: asyncio.Future) -> None:
        if flush.cancelled() or flush.exception() is not None:
            for out, body, version in zip(self.outs, self.bodies, self.versions, strict=True):
                _settle(body, version, out, flush)
            return
        for out, body in zip(self.outs, self.bodies, strict=True):  # durable: every answer as it is
            if not out.cancelled():
                out.set_result(body)


#: the requests waiting for the latest group commit a request waited for (the next ones join them)
_latest: _Waiting | None = None
#: the context of a group commit's callback (it reads no context variable): none copied for it
_NO_CONTEXT = contextvars.Context()


def _when_durable(body: bytes, version: int, flush: asyncio.Future) -> asyncio.Future:
    """A future of the encoded response ``body``, resolved once ``flush`` (the log manager's group
    commit, shared by every request it covers) is done: what ``_after_flush`` does, without a
    coroutine, a task, a gather and a shield per request, and with one callback per group commit
    rather than one per request (a waiting request holds one future, and the collector tracks no
    other object of it). Cancelling the returned future (its client went away) leaves ``flush`` to
    the other requests."""
    global _latest
    out = flush.get_loop().create_future()
    waiting = _latest
    if waiting is None or waiting.flush is not flush or flush.done():
        waiting = _latest = _Waiting(flush)
        flush.add_done_callback(waiting, context=_NO_CONTEXT)
    waiting.outs.append(out)
    waiting.bodies.append(body)
    waiting.versions.append(version)
    return out


def _settle(body: bytes, version: int, out: asyncio.Future, flush: asyncio.Future) -> None:
    if out.cancelled():
        return
    if flush.cancelled():
        out.cancel()
        return
    e = flush.exception()
    if isinstance(e, StorageError):
        body = _fail_unflushed(body, version, e)
    elif e is not None:
        out.set_exception(e)
        return
    out.set_result(body)


def _fail_unflushed(body: bytes, version: int, e: StorageError) -> bytes:
    """The encoded response ``body`` with KAFKA_STORAGE_ERROR for each of its appends, which did not
    become durable (decoded again: a failed fsync is rare)."""
    response, _end = RESPONSE_DECODERS[version](body)
    for t in response.responses:
        for p in t.partition_responses:
            if p.error_code == 0:
                p.error_code = int(ErrorCode.KAFKA_STORAGE_ERROR)
                p.error_message = e.message
                p.base_offset = -1
    return RESPONSE_ENCODERS[version](response)


async def _after_flush(body: bytes, version: int, waits: list[asyncio.Future], delay_ms: int = 0) -> bytes:
    if delay_ms:
        await asyncio.sleep(delay_ms / 1000)
    try:
        # shielded: the flush futures are shared by every request of the group commit, and this
        # request's task is cancelled when its client disconnects; the others still get answers
        await asyncio.gather(*(asyncio.shield(w) for w in set(waits)))
    except StorageError as e:
        body = _fail_unflushed(body, version, e)
    return body


#: the first version whose clients know TRANSACTION_ABORTABLE (KIP-890); older ones get INVALID_TXN_STATE
ABORTABLE_VERSION = 11
#: the transaction coordinator's verification errors as Kafka's ReplicaManager answers a produce
_VERIFY_ERRORS = {
    ErrorCode.TRANSACTION_ABORTABLE: (
        ErrorCode.INVALID_TXN_STATE,
        "Partition was not added to the transaction",
    ),
    ErrorCode.PRODUCER_FENCED: (ErrorCode.INVALID_PRODUCER_EPOCH, None),
    ErrorCode.CONCURRENT_TRANSACTIONS: (
        ErrorCode.NOT_ENOUGH_REPLICAS,
        "Unable to verify the partition has been added to the transaction. Underlying error: CONCURRENT_TRANSACTIONS",
    ),
}


def _verify_transaction(
    ctx: RequestContext, transactional_id: str | None, batch, topic: str, partition: int
) -> PartitionProduceResponse | None:
    """A transactional batch is appended only to a partition its transaction has added
    (AddPartitionsToTxn), from the producer's current epoch (Kafka's transaction verification)."""
    txns = ctx.services.txns
    if batch.producer_id < 0:
        return _error(partition, ErrorCode.INVALID_RECORD, "a transactional batch must carry a producer id")
    if transactional_id is None:  # (a request without one was refused whole: see _produce)
        return _error(partition, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    code = txns.verify(transactional_id, batch.producer_id, batch.producer_epoch, topic, partition)
    if code == ErrorCode.NONE:
        return None
    if code == ErrorCode.TRANSACTION_ABORTABLE and ctx.api_version >= ABORTABLE_VERSION:
        return _error(partition, code, "Partition was not added to the transaction")
    code, message = _VERIFY_ERRORS.get(code, (code, None))
    return _error(partition, code, message)


def _append(
    ctx: RequestContext,
    topic: str,
    partition: int,
    records: memoryview | bytes | None,
    transactional_id: str | None,
    acks: int,
    now: int,
    waits: list[asyncio.Future],
) -> PartitionProduceResponse | tuple[int, int, int]:
    """Validate and append the records of one partition; its refusal (or a duplicate's answer), or
    on success (partition, base offset, log append time or -1, log start offset); ``waits`` gets
    the group commit the append waits for."""
    logs = ctx.services.logs
    plog = logs.logs.get((topic, partition))
    if plog is None:
        return _error(partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    out = _append_plain(logs, plog, partition, records, acks, now, waits)
    if out is not None:
        return out
    size = len(records) if records is not None else 0
    if size == 0:
        return _error(partition, ErrorCode.INVALID_RECORD, "produce requests must carry a record batch")
    config = plog.config
    if acks == -1 and config.min_insync_replicas > 1:
        # the ISR is the live replicas, as Partition.appendRecordsToLeader checks it
        t = ctx.services.topics.get(topic)
        isr = ctx.services.nodes.state(t, partition).isr if t is not None else [ctx.node_id]
        if len(isr) < config.min_insync_replicas:
            return _error(
                partition,
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR Set({', '.join(map(str, isr))}) is insufficient to satisfy "
                f"the min.isr requirement of {config.min_insync_replicas} for partition {topic}-{partition}",
            )
    if size > config.max_message_bytes:
        return _error(
            partition,
            ErrorCode.MESSAGE_TOO_LARGE,
            f"{size} bytes exceed max.message.bytes={config.max_message_bytes}",
        )
    limit = EXPANSION_LIMIT * config.max_message_bytes
    # one compiled call for one valid uncompressed batch (the usual case), else the Python checks;
    # an uncompressed batch is rebuilt exactly when the topic names a codec (validator.needs_rebuild):
    # then its section is kept for the rebuild
    rebuild = bool(config.compression)
    one = validate_one(records, keep=rebuild)
    if one is not None:
        batch, stats = one
    else:
        try:
            batches = validate_produce(records)
        except InvalidBatch as e:
            return _error(
                partition, ErrorCode.CORRUPT_MESSAGE if e.corrupt else ErrorCode.INVALID_RECORD, str(e)
            )
        if len(batches) != 1:  # (Kafka's ProduceRequest.validateRecords: no record errors)
            return _error(
                partition,
                ErrorCode.INVALID_RECORD,
                f"expected exactly one record batch per partition, got {len(batches)}",
                [],
            )
        (batch,) = batches
        rebuild = validator.needs_rebuild(batch, config.compression)
        stats = None
    try:
        if stats is None:
            stats = validate_records(records, batch, limit, keep=rebuild)
        bad_timestamps = validator.timestamp_errors(
            records,
            batch,
            stats,
            now,
            config.timestamp_before_max_ms,
            config.timestamp_after_max_ms,
            config.log_append_time,
        )
    except InvalidBatch as e:
        return _error(partition, ErrorCode.CORRUPT_MESSAGE if e.corrupt else ErrorCode.INVALID_RECORD, str(e))
    if "compact" in config.cleanup_policy:
        # records already validated (and their decompressed size capped) above
        keyless = validator.keyless_record_errors(records, batch, topic, partition)
        if keyless:
            message = validator.record_errors_message(keyless)
            return _error(partition, ErrorCode.INVALID_RECORD, message, keyless, plog.log_start_offset)
    if bad_timestamps:
        return _error(
            partition,
            ErrorCode.INVALID_TIMESTAMP,
            "One or more records have been rejected due to invalid timestamp",
            bad_timestamps,
            plog.log_start_offset,
        )
    if batch.attributes & TRANSACTIONAL_MASK:
        refused = _verify_transaction(ctx, transactional_id, batch, topic, partition)
        if refused is not None:
            return refused
    try:
        duplicate = plog.producers.check(batch)
    except KafkaError as e:
        return _error(partition, e.code, e.message, log_start_offset=plog.log_start_offset)
    if duplicate is not None:
        # already written: answer with the offsets it got then (once it is durable, like the original)
        if duplicate.last_offset >= plog.high_watermark:
            fut = logs.appended(plog)
            if fut is not None:
                waits.append(fut)
        return PartitionProduceResponse(
            index=partition,
            error_code=0,
            base_offset=duplicate.base_offset,
            # as Kafka: the cached batch's timestamp, whatever the topic's timestamp type
            log_append_time_ms=duplicate.timestamp,
            log_start_offset=plog.log_start_offset,
        )
    if rebuild:
        try:
            data, rebuilt = validator.rebuild(
                records, batch, stats, config.compression, config.compression_level, limit
            )
        except InvalidBatch as e:  # records the rebuild must re-encode, with a header key not UTF-8
            return _error(partition, ErrorCode.INVALID_RECORD, str(e))
        if len(data) > config.max_message_bytes:
            return _error(
                partition,
                ErrorCode.MESSAGE_TOO_LARGE,
                f"Message batch size is {len(data)} bytes in append to partition {topic}-{partition} which "
                f"exceeds the maximum configured size of {config.max_message_bytes}.",
            )
        batch = rebuilt
    else:
        data = _writable(records)
        validator.set_max_timestamp(data, batch, stats)
    return _write(logs, plog, partition, data, batch, now, waits)


#: the attribute bits of a batch ``_append_plain`` leaves to ``_append``: a codec, LogAppendTime,
#: transactional (and control, which the validation refuses)
_NOT_PLAIN = COMPRESSION_MASK | TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK


def _append_plain(
    logs: LogManager,
    plog: PartitionLog,
    partition: int,
    records: memoryview | bytes | None,
    acks: int,
    now: int,
    waits: list[asyncio.Future],
) -> PartitionProduceResponse | tuple[int, int, int, int] | None:
    """``_append`` of its common case, in fewer steps: one valid uncompressed CreateTime batch, not
    transactional, with its timestamps in bounds and new to its producer's state (or without a
    producer id), into a partition that neither recompresses, compacts nor stamps LogAppendTime, and
    that needs no more in-sync replicas than itself (acks=-1), validated by the compiled check
    (``validate_one``); a batch without a producer id is checked and stamped for the log in one
    compiled call (``native_stamp``) when the extension is built. The same answer ``_append`` gives
    for it; None, with nothing done, for anything else, which ``_append`` then checks in full
    (tests/dispatch/test_produce.py holds the two to the same answers and stored bytes)."""
    config = plog.config
    if (
        records is None
        or len(records) < HEADER_SIZE
        or records[22] & _NOT_PLAIN  # (the attributes' low byte)
        or config.compression
        or config.log_append_time
        or (acks == -1 and config.min_insync_replicas > 1)
        or len(records) > config.max_message_bytes
        or "compact" in config.cleanup_policy
    ):
        return None
    if native_stamp is not None and records[43] & 0x80:  # no producer id (-1): no producer state
        stamped = native_stamp(
            records,
            now,
            config.timestamp_before_max_ms,
            config.timestamp_after_max_ms,
            plog.log_end_offset,
            plog.leader_epoch,
        )
        if stamped is not None:  # checked, and stamped with the offset the append takes
            return _write(logs, plog, partition, stamped[0], stamped, now, waits)
    one = validate_one(records)
    if one is None:
        return None
    batch, stats = one
    if not validator.timestamps_within(
        batch, stats, now, config.timestamp_before_max_ms, config.timestamp_after_max_ms
    ):
        return None
    if batch.producer_id >= 0:
        try:
            if plog.producers.check(batch) is not None:
                return None  # a duplicate
        except KafkaError:
            return None
    data = _writable(records)
    validator.set_max_timestamp(data, batch, stats)
    return _write(logs, plog, partition, data, batch, now, waits)


def _writable(records: memoryview | bytes) -> bytearray | memoryview:
    """The records to stamp and append: in place when they are a writable view of a frame this
    request owns (a large Produce frame is joined into a bytearray: framing.FrameReader), else a
    copy."""
    return records if type(records) is memoryview and not records.readonly else bytearray(records)


def _write(
    logs: LogManager,
    plog: PartitionLog,
    partition: int,
    data: bytearray | memoryview,
    batch: BatchInfo | tuple,
    now: int,
    waits: list[asyncio.Future],
) -> PartitionProduceResponse | tuple[int, int, int, int]:
    """Append the validated ``batch`` (``data``) to ``plog``: (partition, base offset, log append
    time or -1, log start offset), with the group commit it waits for in ``waits``; or
    KAFKA_STORAGE_ERROR when the write failed. ``batch`` is the batch's header, or what the
    compiled stamp answered for it (``native_stamp``: data, next offset, max timestamp)."""
    try:
        if type(batch) is tuple:
            base = plog.append_stamped(data, batch[1], batch[2], now)
        else:
            base = plog.append_batch(data, batch, now)
    except OSError as e:
        log.error("%s-%d: append failed: %s", plog.topic, partition, e)
        return _error(partition, ErrorCode.KAFKA_STORAGE_ERROR, f"append failed: {e}")
    fut = logs.appended(plog)
    if fut is not None:
        waits.append(fut)
    return (partition, base, now if plog.config.log_append_time else -1, plog.log_start_offset)
