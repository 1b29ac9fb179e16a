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
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from broker import features
from broker.coordinator.result import Result
from broker.coordinator.runtime import CoordinatorRuntime, LoopTimers, SystemClock
from broker.log.batch import iter_batches
from broker.protocol.errors import ErrorCode

from . import admin, markers, ops
from .records import from_batches
from .state import PREPARED, TxnConfig, TxnCoordinatorState, TxnState

if TYPE_CHECKING:
    from broker.config import Config
    from broker.topic_admin import TopicAdmin

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"
#: how long a marker write that failed (a disk error) waits before it is tried again
MARKER_RETRY_S = 1.0


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
        self.closed = False

    # ------------------------------------------------------------------ lifecycle

    def load(self) -> None:
        """Replay ``__transaction_state`` (if it exists); arm the open transactions' timeouts and
        complete the prepared ones (once the event loop runs)."""
        plog = self.logs.get(TXN_TOPIC, 0)
        if plog is None:
            return
        self._use_log(plog)
        start = time.monotonic()
        n = 0
        offset = plog.log_start_offset
        while offset < plog.high_watermark:
            data = plog.read(offset, 1 << 22)
            if not data:
                break
            for off, record in from_batches(data):
                if off >= offset:
                    self.state.replay(record, off)
                    n += 1
                offset = max(offset, off + 1)
            # a trailing control batch (none are written here) would not move the offset
            offset = max(offset, _next_offset(data))
        now = self.runtime.clock.now_ms()
        for tid, meta in self.state.txns.items():
            if meta.state == TxnState.ONGOING:
                ops.arm_timeout(
                    self.state, tid, meta.producer_id, meta.producer_epoch, meta.start_ms + meta.timeout_ms
                )
            elif meta.state in PREPARED:
                self.timers.schedule(
                    f"txn-resume:{tid}", now, lambda _now, tid=tid: ops.resume(self.state, tid)
                )
        log.info(
            "transaction coordinator loaded %d records (%d transactional ids) in %.0f ms",
            n,
            len(self.state.txns),
            (time.monotonic() - start) * 1000,
        )

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

    def init_producer_id(self, tid: str, timeout_ms: int, expected: tuple[int, int] | None) -> Any:
        """(error code, producer id, epoch), or an awaitable of it."""
        return self._run(lambda now: ops.init_producer_id(self.state, tid, timeout_ms, expected, now))

    def add_partitions(
        self, tid: str, pid: int, epoch: int, partitions: list[tuple[str, int]], tv: int = 0
    ) -> Any:
        """One error code for all ``partitions``, or an awaitable of it. ``tv`` 2: the implicit add
        of a Produce v12 or TxnOffsetCommit v5 (KIP-890 part 2)."""
        return self._run(lambda now: ops.add_partitions(self.state, tid, pid, epoch, partitions, now, tv))

    def needs_add(self, tid: str | None, pid: int, epoch: int, partition: tuple[str, int]) -> bool:
        """Whether a TV2 transactional write to ``partition`` should add it first: transaction.version
        2 is finalized, and the producer is the transactional id's current one, without ``partition``
        in an open transaction (the add answers the other cases' errors, as verification does)."""
        if self.transaction_version < 2 or not tid:
            return False
        meta = self.state.txns.get(tid)
        return meta is not None and not (meta.state == TxnState.ONGOING and partition in meta.partitions)

    def transactional_id_of(self, producer_id: int) -> str | None:
        return self.state.by_producer.get(producer_id)

    def verify(self, tid: str | None, pid: int, epoch: int, topic: str, partition: int) -> ErrorCode:
        return ops.verify(self.state, tid, pid, epoch, (topic, partition))

    async def end_txn(
        self, tid: str, pid: int, epoch: int, commit: bool, tv: int = 0
    ) -> tuple[int, int, int]:
        """EndTxn: answered once the markers are written and the transaction is complete (Kafka
        answers once it is prepared; a client never sees the difference but a later read). ``tv``
        2 (EndTxn v5): the epoch is bumped, and the answer names the next transaction's producer
        id and epoch."""
        out = self._run(lambda now: ops.end_txn(self.state, tid, pid, epoch, commit, now, tv))
        if asyncio.isfuture(out) or asyncio.iscoroutine(out):
            out = await out
        task = self.completing.get(tid)
        if out[0] == 0 and task is not None:
            await asyncio.shield(task)
        return out

    def describe(self, tids: list[str]) -> list[Any]:
        return [admin.describe(self.state, tid) for tid in tids]

    def list_transactions(
        self, states: list[str], producer_ids: list[int], duration_ms: int, pattern: str | None
    ) -> Any:
        now = self.runtime.clock.now_ms()
        return admin.list_transactions(self.state, states, producer_ids, duration_ms, pattern, now)

    # ------------------------------------------------------------------ markers and completion

    def _on_prepared(self, tid: str) -> None:
        if self.closed or tid in self.completing:
            return
        task = asyncio.ensure_future(self._complete(tid))
        self.completing[tid] = task
        task.add_done_callback(lambda _t: self.completing.pop(tid, None))

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
                    await fut
                await markers.write(self.logs, self.groups, pid, epoch, commit, partitions)
                # appended and replayed now; nobody waits for its fsync (a crash before it leaves
                # the transaction prepared, and start-up writes the markers again)
                self.runtime.run_detached(lambda now: ops.complete(self.state, tid, pid, epoch, now))
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a disk error: Kafka retries markers until they are written
                log.warning("transaction %r: writing markers failed (%s); retrying", tid, e)
                await asyncio.sleep(MARKER_RETRY_S)


def _next_offset(data: bytes) -> int:
    """The offset after the last batch of ``data`` (whole batches)."""
    last = -1
    for info in iter_batches(data, verify_crc=False):
        last = info.last_offset
    return last + 1


__all__ = ["TXN_TOPIC", "Result", "TransactionCoordinator"]
