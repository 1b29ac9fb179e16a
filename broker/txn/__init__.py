"""The transaction coordinator: transactional ids, their producer ids and epochs, and their
transactions, persisted in the internal ``__transaction_state`` topic (Kafka's TransactionLogKey
and TransactionLogValue records, key-compacted by the log cleaner, replayed at start-up).

``TransactionCoordinator`` is the facade the dispatch handlers call (``Services.txns``). Each call
is one operation of the group coordinator's serial runtime (broker/coordinator/runtime.py:
records -> log -> replay -> responses) over ``TxnCoordinatorState`` (state.py); the operations
are in ops.py. When a transaction is prepared (EndTxn, a timeout, a fencing InitProducerId) the
facade waits for the PrepareCommit/PrepareAbort record to be durable, writes a control batch
(marker) to every partition of the transaction (markers.py), waits for them to be durable, then
writes CompleteCommit/CompleteAbort (without waiting for its fsync) -- Kafka's TransactionMarkerChannelManager, on one node. A
transaction the log leaves prepared at start-up is completed the same way.

On a multi-node cluster (broker/nodes.py) a transactional id is coordinated by the leader of its
transaction coordinator slot (``coordinator_of``). The request methods take the node the client
reached (``node``; None: an in-process caller, never refused) and answer NOT_COORDINATOR on any
other node, as Kafka's TransactionStateManager does for a partition it does not lead; an operation
whose coordinator moved while it waited for its record (or an EndTxn for its markers) is answered
NOT_COORDINATOR too. A move (``reload``) is Kafka's unload and load of the slot: the ids' timers
and marker writes stop, their state is read again from ``__transaction_state``, an ongoing
transaction keeps its timeout and a prepared one is completed by writing its markers again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker import features
from broker.coordinator.result import Result
from broker.coordinator.runtime import CoordinatorRuntime, LoopTimers, SystemClock
from broker.log.batch import iter_batches
from broker.protocol.errors import ErrorCode

from . import admin, markers, ops
from .records import from_batches
from .state import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, PREPARED, TxnConfig, TxnCoordinatorState, TxnState

if TYPE_CHECKING:
    from broker.config import Config
    from broker.topic_admin import TopicAdmin

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"
#: how long a marker write that failed (a disk error) waits before it is tried again
MARKER_RETRY_S = 1.0
NOT_COORDINATOR = int(ErrorCode.NOT_COORDINATOR)


def _single_node(_tid: str) -> tuple[int, int]:
    return -1, 0


class TransactionCoordinator:
    def __init__(self, config: Config, admin: TopicAdmin, clock: Any = None, groups: Any = None):
        """``groups``: the group coordinator, which applies the markers of transactional offset
        commits to ``__consumer_offsets``."""
        self.admin = admin
        self.logs = admin.logs
        self.config = config
        self.groups = groups
        clock = clock or SystemClock()
        #: the finalized transaction.version (broker/features.py): 2 serves KIP-890 part 2
        self.transaction_version: int = features.transaction_version(config)
        self.timers = LoopTimers(clock, lambda op: self.runtime.run_detached(op))
        self.state = TxnCoordinatorState(
            TxnConfig(
                max_timeout_ms=config["transaction.max.timeout.ms"],
                id_expiration_ms=config["transactional.id.expiration.ms"],
                expiration_check_interval_ms=config[
                    "transaction.remove.expired.transaction.cleanup.interval.ms"
                ],
                transaction_version=self.transaction_version,
            ),
            self.logs.allocate_producer_id,
            self.timers,
        )
        self.state.on_prepared = self._on_prepared
        self.runtime = CoordinatorRuntime(self.state, self.logs, None, clock)
        #: transactional id -> the task writing its markers and completing it
        self.completing: dict[str, asyncio.Future] = {}
        #: EndTxns waiting for a completion, woken by a move (which may concern them)
        self._move_waiters: set[asyncio.Future] = set()
        self.closed = False
        #: transactional id -> (coordinating node, its slot's leader epoch); set by the broker on a
        #: multi-node cluster (Nodes), else every id is this node's
        self.coordinator_of: Callable[[str], tuple[int, int]] = _single_node
        self.multi = False
        #: where markers go (broker/txn/markers.py): a partition's (leader, leader epoch)
        self.leader_of: Callable[[str, int], tuple[int, int]] | None = None

    # ------------------------------------------------------------------ lifecycle

    def load(self) -> None:
        """Replay ``__transaction_state`` (if it exists); arm the open transactions' timeouts and
        complete the prepared ones (once the event loop runs)."""
        plog = self.logs.get(TXN_TOPIC, 0)
        if plog is None:
            return
        self._use_log(plog)
        start = time.monotonic()
        n = _read_log(plog, self.state)
        self._arm(self.state.txns)
        log.info(
            "transaction coordinator loaded %d records (%d transactional ids) in %.0f ms",
            n,
            len(self.state.txns),
            (time.monotonic() - start) * 1000,
        )

    def _arm(self, tids: Any) -> None:
        """After a load: the open transactions' timeouts (from their start, as Kafka's), and the
        completion of the prepared ones."""
        now = self.runtime.clock.now_ms()
        for tid in tids:
            meta = self.state.txns.get(tid)
            if meta is None:
                continue
            if meta.state == TxnState.ONGOING:
                ops.arm_timeout(
                    self.state, tid, meta.producer_id, meta.producer_epoch, meta.start_ms + meta.timeout_ms
                )
            elif meta.state in PREPARED:
                self.timers.schedule(
                    f"txn-resume:{tid}", now, lambda _now, tid=tid: ops.resume(self.state, tid)
                )

    def reload(self, owns: Callable[[str], bool]) -> list[str]:
        """A transaction coordinator move of the ids ``owns`` selects (their slot has a new leader),
        as Kafka's unload on the old leader (removeTransactionsForTxnTopicPartition: pending marker
        writes dropped, waiting callers NOT_COORDINATOR) and load on the new one
        (loadTransactionsForTxnTopicPartition). Returns the transactional ids reloaded."""
        ids = {tid for tid in self.state.txns if owns(tid)}
        for tid in ids:
            self.timers.cancel(ops.timeout_key(tid))
            self.timers.cancel(f"txn-resume:{tid}")
            task = self.completing.pop(tid, None)
            if task is not None:
                task.cancel()
        for wake in self._move_waiters:  # an EndTxn waiting for a moved id: NOT_COORDINATOR
            if not wake.done():
                wake.set_result(None)
        plog = self.runtime.plog
        if plog is None:
            return sorted(ids)
        # the records of operations still waiting for their flush are part of the state already
        plog.mark_flushed(*plog.flush_target(), durable=False)
        fresh = TxnCoordinatorState(self.state.config, self.logs.allocate_producer_id, self.timers)
        _read_log(plog, fresh)
        for tid in ids:
            self.state.forget(tid)
        loaded = [tid for tid in fresh.txns if owns(tid)]
        for tid in loaded:
            self.state.adopt(fresh.txns[tid])
        self._arm(loaded)
        log.info("transaction coordinator moved: %d transactional ids reloaded", len(loaded))
        return sorted(ids | set(loaded))

    def close(self) -> None:
        self.closed = True
        self.timers.cancel_all()
        for task in self.completing.values():
            task.cancel()

    def _use_log(self, plog: Any) -> None:
        """From now on the coordinator writes to ``plog``; transactional ids expire (the periodic
        check runs once there is a transaction log, as Kafka's runs on its partitions)."""
        self.runtime.plog = plog
        self.logs.cleaner.register(plog, user=True)
        ops.arm_expiration(self.state, self.runtime.clock.now_ms())

    def ensure_log(self) -> None:
        """Create ``__transaction_state`` on first use, as Kafka does."""
        if self.runtime.plog is not None:
            return
        plog = self.logs.get(TXN_TOPIC, 0)
        if plog is None:
            segment_bytes = str(self.config["transaction.state.log.segment.bytes"])
            configs = {"cleanup.policy": "compact", "segment.bytes": segment_bytes}
            self.admin.create_topic(TXN_TOPIC, 1, configs, internal=True)
            plog = self.logs.get(TXN_TOPIC, 0)
        self._use_log(plog)

    def _run(self, op: Any) -> Any:
        self.ensure_log()
        return self.runtime.run(op)

    # ------------------------------------------------------------------ requests

    def refused(self, tid: str, node: int | None) -> bool:
        """Whether ``node`` (None: an in-process caller) does not coordinate ``tid``."""
        return node is not None and self.multi and self.coordinator_of(tid)[0] != node

    def _routed(self, tid: str, node: int | None, op: Any, refusal: Any) -> Any:
        """Run ``op`` if ``node`` coordinates ``tid`` (else ``refusal``); an answer that comes after
        the id's coordinator moved is ``refusal`` too (Kafka's coordinator epoch check)."""
        if self.refused(tid, node):
            return refusal
        before = self.coordinator_of(tid)
        out = self._run(op)
        if not (asyncio.isfuture(out) or asyncio.iscoroutine(out)) or node is None:
            return out

        async def later() -> Any:
            result = await out
            return refusal if self.coordinator_of(tid) != before else result

        return later()

    def init_producer_id(
        self, tid: str, timeout_ms: int, expected: tuple[int, int] | None, node: int | None = None
    ) -> Any:
        """(error code, producer id, epoch), or an awaitable of it."""
        op = lambda now: ops.init_producer_id(self.state, tid, timeout_ms, expected, now)  # noqa: E731
        if tid == "" or not 0 < timeout_ms <= self.state.config.max_timeout_ms:
            node = None  # Kafka checks these first: INVALID_REQUEST, INVALID_TRANSACTION_TIMEOUT
        return self._routed(tid, node, op, (NOT_COORDINATOR, NO_PRODUCER_ID, NO_PRODUCER_EPOCH))

    def add_partitions(
        self,
        tid: str,
        pid: int,
        epoch: int,
        partitions: list[tuple[str, int]],
        tv: int = 0,
        node: int | None = None,
    ) -> Any:
        """One error code for all ``partitions``, or an awaitable of it. ``tv`` 2: the implicit add
        of a Produce v12 or TxnOffsetCommit v5 (KIP-890 part 2)."""
        op = lambda now: ops.add_partitions(self.state, tid, pid, epoch, partitions, now, tv)  # noqa: E731
        return self._routed(tid, node if tid else None, op, NOT_COORDINATOR)

    def needs_add(self, tid: str | None, pid: int, epoch: int, partition: tuple[str, int]) -> bool:
        """Whether a TV2 transactional write to ``partition`` should add it first: transaction.version
        2 is finalized, and the producer is the transactional id's current one, without ``partition``
        in an open transaction (the add answers the other cases' errors, as verification does)."""
        if self.transaction_version < 2 or not tid:
            return False
        meta = self.state.txns.get(tid)
        return meta is not None and not (meta.state == TxnState.ONGOING and partition in meta.partitions)

    def verify(
        self, tid: str | None, pid: int, epoch: int, topic: str, partition: int, node: int | None = None
    ) -> ErrorCode:
        if tid and self.refused(tid, node):
            return ErrorCode.NOT_COORDINATOR
        return ops.verify(self.state, tid, pid, epoch, (topic, partition))

    async def end_txn(
        self, tid: str, pid: int, epoch: int, commit: bool, tv: int = 0, node: int | None = None
    ) -> tuple[int, int, int]:
        """EndTxn: answered once the markers are written and the transaction is complete (Kafka
        answers once it is prepared; a client never sees the difference but a later read). ``tv``
        2 (EndTxn v5): the epoch is bumped, and the answer names the next transaction's producer
        id and epoch. NOT_COORDINATOR when the id's coordinator moves before that."""
        refusal = (NOT_COORDINATOR, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        if tid and self.refused(tid, node):
            return refusal
        before = self.coordinator_of(tid)
        out = self._run(lambda now: ops.end_txn(self.state, tid, pid, epoch, commit, now, tv))
        if asyncio.isfuture(out) or asyncio.iscoroutine(out):
            out = await out
        moved = lambda: node is not None and bool(tid) and self.coordinator_of(tid) != before  # noqa: E731
        task = self.completing.get(tid)
        if out[0] == 0 and task is not None and not moved():
            wake = asyncio.get_running_loop().create_future()  # a move wakes it: NOT_COORDINATOR
            self._move_waiters.add(wake)
            try:
                await asyncio.wait([task, wake], return_when=asyncio.FIRST_COMPLETED)
            finally:
                self._move_waiters.discard(wake)
        return refusal if moved() else out

    def describe(self, tids: list[str], node: int | None = None) -> list[Any]:
        return [
            admin.not_coordinator(tid) if tid and self.refused(tid, node) else admin.describe(self.state, tid)
            for tid in tids
        ]

    def list_transactions(
        self,
        states: list[str],
        producer_ids: list[int],
        duration_ms: int,
        pattern: str | None,
        node: int | None = None,
    ) -> Any:
        """The transactional ids ``node`` coordinates (every one for None), filtered."""
        now = self.runtime.clock.now_ms()
        out = admin.list_transactions(self.state, states, producer_ids, duration_ms, pattern, now)
        if node is not None and self.multi:
            out.transaction_states = [
                s for s in out.transaction_states if not self.refused(s.transactional_id, node)
            ]
        return out

    # ------------------------------------------------------------------ markers and completion

    def _on_prepared(self, tid: str) -> None:
        if self.closed or tid in self.completing:
            return
        task = asyncio.ensure_future(self._complete(tid))
        self.completing[tid] = task
        task.add_done_callback(lambda t: self.completing.pop(tid) if self.completing.get(tid) is t else None)

    async def _complete(self, tid: str) -> None:
        meta = self.state.txns.get(tid)
        if meta is None or meta.state not in PREPARED:
            return
        pid, epoch = meta.producer_id, meta.producer_epoch
        commit = meta.state == TxnState.PREPARE_COMMIT
        partitions = sorted(meta.partitions)
        while not self.closed:
            try:
                fut = self.logs.appended(self.runtime.plog)  # the Prepare record is durable
                if fut is not None:
                    await asyncio.shield(fut)  # (shared: a move cancelling this task leaves it be)
                await markers.write(self.logs, self.groups, pid, epoch, commit, partitions, self.leader_of)
                # appended and replayed now; nobody waits for its fsync (a crash before it leaves
                # the transaction prepared, and start-up writes the markers again)
                self.runtime.run_detached(lambda now: ops.complete(self.state, tid, pid, epoch, now))
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a disk error: Kafka retries markers until they are written
                log.warning("transaction %r: writing markers failed (%s); retrying", tid, e)
                await asyncio.sleep(MARKER_RETRY_S)


def _read_log(plog: Any, state: TxnCoordinatorState) -> int:
    """Replay ``plog`` (up to its high watermark) into ``state``; returns the records read."""
    n = 0
    offset = plog.log_start_offset
    while offset < plog.high_watermark:
        data = plog.read(offset, 1 << 22)
        if not data:
            break
        for off, record in from_batches(data):
            if off >= offset:
                state.replay(record, off)
                n += 1
            offset = max(offset, off + 1)
        # a trailing control batch (none are written here) would not move the offset
        offset = max(offset, _next_offset(data))
    return n


def _next_offset(data: bytes) -> int:
    """The offset after the last batch of ``data`` (whole batches)."""
    last = -1
    for info in iter_batches(data, verify_crc=False):
        last = info.last_offset
    return last + 1


__all__ = ["TXN_TOPIC", "Result", "TransactionCoordinator"]
