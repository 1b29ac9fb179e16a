"""Incremental fetch sessions (KIP-227), as Kafka's FetchManager keeps them (FetchSession.scala).

A Fetch (v7+) names a session id and an epoch:

* epoch 0 (full, new session): a session of that id is closed; the request lists every partition
  it fetches and the answer carries them all, with a new session id when the cache has room
  (``max.incremental.fetch.session.cache.slots``, Kafka's default 1,000) or can evict one; else
  session id 0 (the client goes on with full fetches);
* epoch -1 (full, final): a session of that id is closed, no new one is created (session id 0);
* any other epoch (incremental): the session must exist (else FETCH_SESSION_ID_NOT_FOUND), its
  epoch must be the one expected (else INVALID_FETCH_SESSION_EPOCH) and it must use topic ids
  exactly when the request version does (v13+; else FETCH_SESSION_TOPIC_ID_ERROR). The request's
  partitions are added to the session or update it (fetch offset, max bytes, leader epoch), its
  forgotten topics' partitions leave it; a session left empty is closed and the fetch answered
  without one. The fetch then reads every partition of the session, and the answer carries only
  those with records, an error, a diverging epoch, or a high watermark or log start offset other
  than the session last sent (a partition that returned records moves to the end of the session, so
  that ``max_bytes`` does not starve the ones after it).

Eviction, as Kafka's FetchSessionCacheShard: when the cache is full, a session unused for 120 s
goes first; else the smallest session created more than 120 s ago, only if the new one has more
partitions. (Kafka splits the cache into 8 shards, each with an eighth of the slots, to spread
lock contention; this broker's one event loop keeps one cache with every slot.)
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import Any

from broker.protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
#: Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
EVICTION_MS = 120_000
_MAX_INT = 2**31 - 1

#: one partition of a fetch: (topic key, the request's FetchPartition); the topic key is the topic id
#: from v13, the name before
Entry = tuple[Any, Any]


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: -1 stays -1, the largest int wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_INT else epoch + 1


class CachedPartition:
    """A partition of a session: the request's parameters last sent for it (``req``, a
    FetchPartition) and what the last answer told the client (high watermark, log start offset)."""

    __slots__ = ("topic", "req", "high_watermark", "log_start_offset")

    def __init__(self, topic: Any, req: Any, high_watermark: int = -1, log_start_offset: int = -1):
        self.topic = topic
        self.req = req
        self.high_watermark = high_watermark
        self.log_start_offset = log_start_offset

    def must_respond(self, pd: Any) -> bool:
        """Kafka's CachedPartition.maybeUpdateResponseData (updating): is the partition's answer
        in the incremental response?"""
        respond = bool(pd.records)
        if self.high_watermark != pd.high_watermark:
            respond = True
            self.high_watermark = pd.high_watermark
        if self.log_start_offset != pd.log_start_offset:
            respond = True
            self.log_start_offset = pd.log_start_offset
        if pd.preferred_read_replica != -1:
            respond = True
        if pd.error_code:
            self.high_watermark = -1
            respond = True
        if pd.diverging_epoch.epoch != -1 or pd.diverging_epoch.end_offset != -1:
            respond = True
        return respond


class FetchSession:
    __slots__ = (
        "id",
        "node",
        "uses_topic_ids",
        "partitions",
        "created_ms",
        "last_used_ms",
        "epoch",
        "cached_size",
        "evictable",
    )

    def __init__(self, session_id: int, uses_topic_ids: bool, partitions: dict, now: int, node: int = -1):
        self.id = session_id
        #: the node (cluster.nodes) whose fetch opened it: sessions are each broker's own
        self.node = node
        self.uses_topic_ids = uses_topic_ids
        #: (topic key, partition) -> CachedPartition, in fetch order
        self.partitions: dict[tuple[Any, int], CachedPartition] = partitions
        self.created_ms = now
        self.last_used_ms = now
        self.epoch = next_epoch(INITIAL_EPOCH)
        #: size at the last touch (Kafka's cachedSize: the eviction key)
        self.cached_size = len(partitions)
        #: created more than EVICTION_MS before the last touch (Kafka's evictableByAll)
        self.evictable = False

    def update(self, entries: Iterable[Entry], forgotten: Iterable[tuple[Any, int]]) -> None:
        parts = self.partitions
        for topic, fp in entries:
            cached = parts.get((topic, fp.partition))
            if cached is None:
                parts[(topic, fp.partition)] = CachedPartition(topic, fp)
            else:
                cached.req = fp
        for key in forgotten:
            parts.pop(key, None)

    def entries(self) -> list[Entry]:
        return [(c.topic, c.req) for c in self.partitions.values()]


class FetchSessionCache:
    """The broker's fetch sessions, at most ``max_entries`` (0: none is ever created)."""

    def __init__(
        self,
        max_entries: int,
        now_ms: Callable[[], int],
        eviction_ms: int = EVICTION_MS,
        rng: random.Random | None = None,
    ):
        self.max_entries = max_entries
        self.now_ms = now_ms
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self._rng = rng or random.Random()

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def touch(self, session: FetchSession, now: int) -> None:
        session.last_used_ms = now
        session.cached_size = len(session.partitions)
        session.evictable = now - session.created_ms > self.eviction_ms

    def maybe_create(self, uses_topic_ids: bool, partitions: dict, node: int = -1) -> int:
        """A new session of these partitions: its id, or 0 when the cache is full and nothing may
        be evicted for it."""
        now = self.now_ms()
        if len(self.sessions) >= self.max_entries and not self._try_evict(len(partitions), now):
            return INVALID_SESSION_ID
        session_id = self._new_id()
        session = FetchSession(session_id, uses_topic_ids, partitions, now, node)
        self.sessions[session_id] = session
        self.touch(session, now)
        return session_id

    def _new_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, _MAX_INT - 1)
            if session_id not in self.sessions:
                return session_id

    def _try_evict(self, size: int, now: int) -> bool:
        if not self.sessions:
            return False
        stale = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - stale.last_used_ms > self.eviction_ms:
            del self.sessions[stale.id]
            return True
        evictable = [s for s in self.sessions.values() if s.evictable]
        if not evictable:
            return False
        smallest = min(evictable, key=lambda s: (s.cached_size, s.id))
        # Kafka compares (privileged, size, id) with the new session's (privileged, size, 0): only a
        # strictly larger new session evicts
        if size <= smallest.cached_size:
            return False
        del self.sessions[smallest.id]
        return True


class FetchContext:
    """How one Fetch is answered: ``kind`` is "sessionless", "full", "incremental" or "error"
    (``error``); ``entries`` the partitions to read, in order."""

    __slots__ = ("kind", "error", "entries", "cached", "session", "uses_topic_ids", "epoch")

    def __init__(
        self,
        kind: str,
        entries: list[Entry],
        error: ErrorCode = ErrorCode.NONE,
        session: FetchSession | None = None,
        uses_topic_ids: bool = False,
        epoch: int = FINAL_EPOCH,
    ):
        self.kind = kind
        self.entries = entries
        #: incremental: the session's partitions, one per entry (what the answer is compared with)
        self.cached: list[CachedPartition] | None = None
        self.error = error
        self.session = session
        self.uses_topic_ids = uses_topic_ids
        #: the session's epoch after this request (incremental): checked again when answering
        self.epoch = epoch

    def session_id(self) -> int:
        return self.session.id if self.session is not None else INVALID_SESSION_ID


def new_context(
    cache: FetchSessionCache,
    version: int,
    session_id: int,
    epoch: int,
    entries: list[Entry],
    forgotten: list[tuple[Any, int]],
    node: int = -1,
) -> FetchContext:
    """Kafka's FetchManager.newContext for a consumer's Fetch to ``node`` (each node of a
    simulated cluster knows only the sessions opened on it, as each Kafka broker)."""
    uses_topic_ids = version >= 13
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if session_id != INVALID_SESSION_ID:
            old = cache.get(session_id)
            if old is not None and old.node == node:
                cache.remove(session_id)
        kind = "sessionless" if epoch == FINAL_EPOCH else "full"
        return FetchContext(kind, entries, uses_topic_ids=uses_topic_ids)
    session = cache.get(session_id)
    if session is None or session.node != node:
        return FetchContext("error", [], ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    if session.epoch != epoch:
        return FetchContext("error", [], ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    if session.uses_topic_ids != uses_topic_ids:
        return FetchContext("error", [], ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
    session.update(entries, forgotten)
    if not session.partitions:
        cache.remove(session.id)
        return FetchContext("sessionless", entries, uses_topic_ids=uses_topic_ids)
    cache.touch(session, cache.now_ms())
    session.epoch = next_epoch(session.epoch)
    fctx = FetchContext(
        "incremental", session.entries(), session=session, uses_topic_ids=uses_topic_ids, epoch=session.epoch
    )
    fctx.cached = list(session.partitions.values())
    return fctx


def full_session(cache: FetchSessionCache, fctx: FetchContext, pds: list, node: int = -1) -> int:
    """A full fetch's answer (``pds``, one per entry): the new session's id, or 0."""
    partitions = {}
    for (topic, fp), pd in zip(fctx.entries, pds, strict=True):
        partitions[(topic, fp.partition)] = CachedPartition(topic, fp, pd.high_watermark, pd.log_start_offset)
    return cache.maybe_create(fctx.uses_topic_ids, partitions, node)


def incremental_keep(fctx: FetchContext, pds: list) -> list[bool] | None:
    """Which of an incremental fetch's answers (one per entry) go into the response, the session
    updated with what they tell the client; None when the session's epoch moved on meanwhile (a
    concurrent request of the same session: INVALID_FETCH_SESSION_EPOCH, as Kafka answers)."""
    session = fctx.session
    if session is None or session.epoch != fctx.epoch:
        return None
    parts = session.partitions
    keep = []
    for (topic, fp), pd in zip(fctx.entries, pds, strict=True):
        if pd is None:  # read unchanged (fetch._read): nothing to send, nothing to update
            keep.append(False)
            continue
        key = (topic, fp.partition)
        cached = parts.get(key)
        if cached is None:  # forgotten by a later request meanwhile
            keep.append(False)
            continue
        respond = cached.must_respond(pd)
        keep.append(respond)
        if respond and pd.records:
            del parts[key]  # to the end: the next fetch reads the others first
            parts[key] = cached
    return keep
