"""Fetch (key 1) v4-18: v4 isolation level and last stable offset; v5 log start offset; v7 fetch
sessions (KIP-227); v9 current leader epoch; v11 rack / preferred replica; v12 flexible, diverging
epoch; v13 topic ids; v15 replica state (tagged); v16 node endpoints; v17 replica directory id;
v18 high watermark per partition (replicas only). Versions 0-3 (message formats 0/1) are not served.

On a node that is no replica of the partition (broker/nodes.py), or with a stale or future
``current_leader_epoch``: NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH
(dispatch/leadership.py), with the leader from v12 and its endpoint from v16 (KIP-951). A follower
replica serves a consumer's fetch from v11 (which carries client metadata, so Kafka reads it from
the local replica: ``FetchParams.fetchOnlyLeader``); before v11 a consumer's fetch needs the leader.

A fetch returns whole record batches up to the high watermark: at most ``partition_max_bytes`` per
partition and ``max_bytes`` in all, except that the first batch found is returned whole even when
larger (KIP-74). With fewer than ``min_bytes`` available the request waits, up to ``max_wait_ms``,
and is woken by appends (never by polling) and by leader changes: a partition it reads that this
node may no longer serve (or serves at another epoch) ends the wait with NOT_LEADER_OR_FOLLOWER (or
FENCED_LEADER_EPOCH) for it, as Kafka's DelayedFetch completes on a leader change. Fetch sessions
(v7+, KIP-227) are kept as Kafka keeps them (dispatch/fetch_session.py): a full fetch (epoch 0) opens
one, an incremental fetch lists only the partitions that changed and is answered with only those
whose answer changed. Every answer carries the last stable offset (LSO:
below it every transaction is decided); read_committed (isolation level 1) reads only up to it and
gets the aborted transactions of the range read (producer id, first offset), from the partition's
aborted-transaction index (broker/log/txnindex.py), which the consumer skips; read_uncommitted
reads up to the high watermark and gets null.
"""

from __future__ import annotations

import asyncio
import uuid

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.fetch import (
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
    SnapshotId,
)
from broker.quotas import user_of
from broker.security.authorizer import READ, TOPIC

from . import fetch_session, leadership
from .registry import RequestContext

API_KEY = 1
VERSIONS = (4, 18)
#: above every offset: no upper bound
_NO_OFFSET = 2**63 - 1
_UNSET = object()
_ZERO_UUID = uuid.UUID(int=0)
#: the first version whose clients wait out throttle_time_ms themselves (KIP-219)
CLIENT_THROTTLES = 8
#: the absent tagged fields of a partition's answer, shared by the answers that read records (the
#: generated constructor would build three objects per partition; nothing changes them in place)
_NO_DIVERGING = EpochEndOffset()
_NO_LEADER = LeaderIdAndEpoch()
_NO_SNAPSHOT = SnapshotId()


def handle(ctx: RequestContext, req: FetchRequest):
    v = ctx.api_version
    entries = [(ft.topic_id if v >= 13 else ft.topic, fp) for ft in req.topics for fp in ft.partitions]
    cache = ctx.services.fetch_sessions
    if v >= 7 and cache is not None:
        forgotten = [
            (t.topic_id if v >= 13 else t.topic, p) for t in req.forgotten_topics_data for p in t.partitions
        ]
        fctx = fetch_session.new_context(
            cache, v, req.session_id, req.session_epoch, entries, forgotten, ctx.node_id
        )
        if fctx.kind == "error":
            return FetchResponse(error_code=int(fctx.error), session_id=0, responses=[])
    elif v >= 7 and req.session_epoch not in (0, -1):
        # no session cache: every fetch is a full one (epochs 0 and -1), and a session named by
        # any other epoch does not exist
        return FetchResponse(error_code=int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND), session_id=0)
    else:
        fctx = fetch_session.FetchContext("sessionless", entries)
    quota = ctx.services.quotas.fetch
    if quota.enabled:
        return _with_quota(ctx, req, fctx, quota)
    read = _read(ctx, req, fctx.entries, fctx.cached)
    if read.total >= req.min_bytes or req.max_wait_ms <= 0 or not read.watch:
        return _respond(ctx, fctx, read)
    return _long_poll(ctx, req, fctx, read.watch)


def _with_quota(ctx: RequestContext, req: FetchRequest, fctx, quota):
    """A consumer's fetch under a byte-rate quota, as Kafka's: ``max_bytes`` capped to what one
    quota window allows, the response's bytes recorded, and when that exceeds the quota an empty
    response (the bytes taken back) with the throttle time, the connection muted for as long."""
    user, client_id = user_of(ctx.client), ctx.client_id or ""
    cap = quota.max_in_window(user, client_id)
    if cap is not None and cap < req.max_bytes:
        req.max_bytes = cap
        req.min_bytes = min(req.min_bytes, cap)
    read = _read(ctx, req, fctx.entries, fctx.cached)
    if read.total >= req.min_bytes or req.max_wait_ms <= 0 or not read.watch:
        return _throttled(ctx, quota, user, client_id, fctx, read)
    return _poll_then_throttle(ctx, req, fctx, read.watch, quota, user, client_id)


async def _poll_then_throttle(ctx, req, fctx, watch, quota, user, client_id) -> FetchResponse:
    read = await _poll(ctx, req, fctx, watch)
    out = _throttled(ctx, quota, user, client_id, fctx, read)
    return await out if asyncio.iscoroutine(out) else out


def _throttled(ctx: RequestContext, quota, user: str, client_id: str, fctx, read: _Read):
    size = read.total
    throttle = quota.record(user, client_id, size)
    if not throttle:
        return _respond(ctx, fctx, read)
    quota.unrecord(user, client_id, size)
    # as Kafka's FetchContext.getThrottledResponse: no partitions, the session left as it was (an
    # incremental fetch keeps its session id; a full one creates none)
    error = 0
    session_id = 0
    if fctx.kind == "incremental":
        session_id = fctx.session.id
        if fctx.session.epoch != fctx.epoch:
            error = int(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    empty = FetchResponse(throttle_time_ms=throttle, error_code=error, session_id=session_id, responses=[])
    if ctx.api_version >= CLIENT_THROTTLES:
        ctx.client.mute_ms = throttle
        return empty
    # clients before v8 (KIP-219) do not wait out throttle_time_ms: the answer waits instead (the
    # connection handles nothing else meanwhile)
    return _after(throttle, empty)


async def _after(delay_ms: int, response: FetchResponse) -> FetchResponse:
    await asyncio.sleep(delay_ms / 1000)
    return response


async def _long_poll(ctx: RequestContext, req: FetchRequest, fctx, watch: list) -> FetchResponse:
    return _respond(ctx, fctx, await _poll(ctx, req, fctx, watch))


async def _poll(ctx: RequestContext, req: FetchRequest, fctx, logs: list) -> _Read:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + req.max_wait_ms / 1000
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        waiter = loop.create_future()
        for plog in logs:
            plog.waiters.add(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), remaining)
        except TimeoutError:
            break
        finally:
            for plog in logs:
                plog.waiters.discard(waiter)
        readable = len(logs)
        read = _read(ctx, req, fctx.entries, fctx.cached)
        logs = read.watch
        # as Kafka's DelayedFetch.tryComplete: enough bytes, or a partition that could be read is no
        # longer (this node lost its leadership, its epoch moved on: the answer says so at once)
        if read.total >= req.min_bytes or len(logs) < readable:
            return read
    return _read(ctx, req, fctx.entries, fctx.cached)


class _Read:
    """One pass over the partitions of a fetch: an answer per entry (``pds``), in runs of one topic
    (``runs``: name, topic id, index of its first answer), the bytes of records, the readable partitions' logs, and the
    leaders named in NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH answers."""

    __slots__ = ("runs", "pds", "total", "watch", "hinted")

    def __init__(self, runs: list, pds: list, total: int, watch: list, hinted: set):
        self.runs = runs
        self.pds = pds
        self.total = total
        self.watch = watch
        self.hinted = hinted


def _respond(ctx: RequestContext, fctx, read: _Read) -> FetchResponse:
    """The answer to a fetch from its read, as its session context has it (Kafka's
    FetchContext.updateAndGenerateResponseData)."""
    session_id = 0
    keep = None
    if fctx.kind == "full":
        session_id = fetch_session.full_session(ctx.services.fetch_sessions, fctx, read.pds, ctx.node_id)
    elif fctx.kind == "incremental":
        keep = fetch_session.incremental_keep(fctx, read.pds)
        if keep is None:
            return FetchResponse(
                error_code=int(ErrorCode.INVALID_FETCH_SESSION_EPOCH),
                session_id=fctx.session.id,
                responses=[],
            )
        session_id = fctx.session.id
    topics = []
    pds = read.pds
    runs = read.runs
    for r, (name, topic_id, i) in enumerate(runs):
        end = runs[r + 1][2] if r + 1 < len(runs) else len(pds)
        if keep is None:
            parts = pds[i:end]
        else:
            parts = [pds[j] for j in range(i, end) if keep[j]]
        if parts:
            topics.append(FetchableTopicResponse(topic=name or "", topic_id=topic_id, partitions=parts))
    response = FetchResponse(throttle_time_ms=0, error_code=0, session_id=session_id, responses=topics)
    if read.hinted and ctx.api_version >= 16:
        response.node_endpoints = leadership.endpoints(ctx, NodeEndpoint, read.hinted)
    return response


def _read(ctx: RequestContext, req: FetchRequest, entries: list, cached: list | None = None) -> _Read:
    """One pass over the partitions of ``entries`` ((topic key, FetchPartition), in order).

    ``cached``: an incremental fetch's session partitions (one per entry); a partition without
    records whose high watermark and log start offset are the ones the session last sent gets no
    answer (None in ``pds``): the incremental response leaves it out (fetch_session.py)."""
    services = ctx.services
    v = ctx.api_version
    budget = req.max_bytes if v >= 3 else 0x7FFFFFFF
    committed = req.isolation_level == 1
    total = 0
    watch = []
    pds = []
    runs = []
    hinted: set[int] = set()
    key = _UNSET
    topic = name = topic_id = None
    denied = False
    logs_get = services.logs.get
    check = leadership.check
    # as Kafka (FetchParams.fetchOnlyLeader): a follower serves a consumer's fetch that carries client
    # metadata (v11+); a replica's fetch, and an older consumer's, need the leader
    follower = req.replica_state.replica_id if v >= 15 else req.replica_id
    leader_only = v < 11 or follower >= 0
    for i, (tkey, fp) in enumerate(entries):
        # the partitions of one request topic share its key object: ``is`` settles most of them
        if tkey is not key and (tkey != key or not runs):
            key = tkey
            if v >= 13:
                topic = services.topics.by_id(tkey)
                name = topic.name if topic is not None else None
                topic_id = tkey
            else:
                name = tkey
                topic = services.topics.get(name)
                topic_id = _ZERO_UUID
            # as Kafka: READ on the topic, checked before its existence
            denied = name is not None and not ctx.allowed(READ, TOPIC, name)
            runs.append((name, topic_id, i))
        if denied:
            pds.append(_partition_error(fp.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        plog = logs_get(name, fp.partition) if topic is not None else None
        if plog is None:
            code = (
                ErrorCode.UNKNOWN_TOPIC_ID
                if (v >= 13 and topic is None)
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            pds.append(_partition_error(fp.partition, code))
            continue
        refused = check(ctx, topic, fp.partition, fp.current_leader_epoch if v >= 9 else -1, leader_only)
        if refused:
            pd = _partition_error(fp.partition, refused, plog)
            if v >= 12 and refused in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH):
                leader, epoch = leadership.leader_hint(ctx, topic, fp.partition)
                pd.current_leader = LeaderIdAndEpoch(leader, epoch)
                hinted.add(leader)
            pds.append(pd)
            continue
        offset = fp.fetch_offset
        if v >= 12 and fp.last_fetched_epoch >= 0:
            # as Kafka's Partition.readRecords: the fetcher's last epoch must end in this log at
            # or after the fetch offset, else the answer says where the logs diverge
            epoch, end = leadership.epoch_end(ctx, topic, fp.partition, plog, fp.last_fetched_epoch)
            if epoch < 0 or end < 0 or offset < plog.log_start_offset:
                pds.append(_partition_error(fp.partition, ErrorCode.OFFSET_OUT_OF_RANGE, plog))
                continue
            if epoch < fp.last_fetched_epoch or end < offset:
                pds.append(
                    PartitionData(
                        partition_index=fp.partition,
                        error_code=0,
                        high_watermark=plog.high_watermark,
                        last_stable_offset=plog.last_stable_offset,
                        log_start_offset=plog.log_start_offset,
                        diverging_epoch=EpochEndOffset(epoch, end),
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=b"",
                    )
                )
                continue
        start = plog.log_start_offset
        if offset < start or offset > plog.log_end_offset:
            pds.append(_partition_error(fp.partition, ErrorCode.OFFSET_OUT_OF_RANGE, plog))
            continue
        limit = min(fp.partition_max_bytes, budget - total)
        records = b""
        lso = plog.last_stable_offset
        if limit > 0 or total == 0:
            records = plog.read(offset, max(limit, 1), lso if committed else None)
            if total > 0 and len(records) > limit:
                records = b""  # only the first batch of the response may exceed the limits
        total += len(records)
        watch.append(plog)  # any readable partition may bring the response up to min_bytes
        hw = plog.high_watermark
        if cached is not None and not records:
            c = cached[i]
            if c.high_watermark == hw and c.log_start_offset == start:
                pds.append(None)  # unchanged: left out of the incremental answer
                continue
        aborted = None
        if committed:
            # read_committed: the aborted transactions of the range read (Kafka's
            # collectAbortedTransactions, up to the end of the last batch returned); the end of
            # the range is found (a walk over the batches read) only when a marker lies after
            # the fetch offset
            aborted = []
            candidates = plog.aborted.overlapping(offset, _NO_OFFSET) if plog.aborted.entries else None
            if candidates:
                upper = _end_offset(records) if records else offset
                aborted = [
                    AbortedTransaction(producer_id=e.producer_id, first_offset=e.first_offset)
                    for e in candidates
                    if e.first_offset < upper
                ]
        pds.append(
            PartitionData(
                fp.partition, 0, hw, lso, start, _NO_DIVERGING, _NO_LEADER, _NO_SNAPSHOT, aborted, -1, records
            )
        )
    return _Read(runs, pds, total, watch, hinted)


def _end_offset(records: bytes) -> int:
    """The offset after the last batch of ``records`` (whole batches)."""
    pos, last = 0, -1
    while pos + 61 <= len(records):
        base = int.from_bytes(records[pos : pos + 8], "big", signed=True)
        last = base + int.from_bytes(records[pos + 23 : pos + 27], "big", signed=True)
        pos += 12 + int.from_bytes(records[pos + 8 : pos + 12], "big", signed=True)
    return last + 1


def _partition_error(index: int, code: ErrorCode, plog=None) -> PartitionData:
    return PartitionData(
        partition_index=index,
        error_code=int(code),
        # as Kafka's FetchResponse.partitionResponse(error): no offsets with an error
        high_watermark=-1,
        last_stable_offset=-1,
        log_start_offset=-1,
        # as Kafka: a partition refused before it is read (unknown) gets the field's default, an
        # empty list; one whose read failed (offset out of range, epoch) gets null
        aborted_transactions=None if plog is not None else [],
        preferred_read_replica=-1,
        records=b"",
    )
