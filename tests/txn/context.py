"""The transaction coordinator's test context: its operations on a manual clock and manual timers,
records appended to an in-memory log (encoded as in ``__transaction_state`` and decoded again for
replay, so the codec is on the path), and ``restart`` rebuilding the state from that log."""

from __future__ import annotations

from typing import Any

from broker.coordinator.result import Result, apply
from broker.coordinator.timers import ManualClock, ManualTimers
from broker.txn import ops
from broker.txn.records import decode, from_batches, to_batch
from broker.txn.state import TxnConfig, TxnCoordinatorState, TxnMetadata


class TxnContext:
    def __init__(
        self,
        max_timeout_ms: int = 900_000,
        log: list[bytes] | None = None,
        next_pid: int = 1000,
        transaction_version: int = 2,
    ):
        self.clock = ManualClock()
        self.timers = ManualTimers(self.clock)
        self.pids = iter(range(next_pid, next_pid + 10_000))
        self.state = TxnCoordinatorState(
            TxnConfig(max_timeout_ms=max_timeout_ms, transaction_version=transaction_version),
            lambda: next(self.pids),
            self.timers,
        )
        #: transactional ids whose transaction an operation left prepared (the facade's markers)
        self.prepared: list[str] = []
        self.state.on_prepared = self.prepared.append
        self.log: list[bytes] = [] if log is None else log
        self.offset = 0
        for batch in self.log:
            for off, rec in from_batches(batch):
                self.state.replay(rec, off)
                self.offset = off + 1

    def run(self, op: Any) -> Any:
        result: Result = op(self.clock.now_ms())
        if result.records:
            batch = bytearray(to_batch(result.records, self.clock.now_ms()))
            batch[0:8] = self.offset.to_bytes(8, "big")
            self.log.append(bytes(batch))
            decoded = [decode(r.key_bytes(), r.value_bytes()) for r in result.records]
            for d, r in zip(decoded, result.records, strict=True):
                d.last_producer_epoch = r.last_producer_epoch  # transient, as the live runtime keeps it
            result.records = decoded
            apply(result, self.offset, self.state.replay, self.clock.now_ms())
            self.offset += len(decoded)
        else:
            apply(result, self.offset, self.state.replay, self.clock.now_ms())
        return result.response

    # requests
    def init(self, tid: str, timeout_ms: int = 60_000, expected: tuple[int, int] | None = None) -> Any:
        return self.run(lambda now: ops.init_producer_id(self.state, tid, timeout_ms, expected, now))

    def add(self, tid: str, pid: int, epoch: int, *partitions: tuple[str, int]) -> int:
        return self.run(lambda now: ops.add_partitions(self.state, tid, pid, epoch, partitions, now))

    def add_v2(self, tid: str, pid: int, epoch: int, *partitions: tuple[str, int]) -> int:
        """The implicit add of a transactional Produce v12 (transaction version 2)."""
        return self.run(lambda now: ops.add_partitions(self.state, tid, pid, epoch, partitions, now, tv=2))

    def end(self, tid: str, pid: int, epoch: int, commit: bool, tv: int = 0) -> Any:
        return self.run(lambda now: ops.end_txn(self.state, tid, pid, epoch, commit, now, tv))

    def complete(self, tid: str) -> None:
        """What the facade does once the markers are written."""
        meta = self.state.txns[tid]
        self.run(lambda now: ops.complete(self.state, tid, meta.producer_id, meta.producer_epoch, now))
        self.prepared.remove(tid)

    def advance(self, ms: int) -> None:
        until = self.clock.ms + ms
        while (due := self.timers.pop_next_due(until)) is not None:
            self.run(due[1])
        self.clock.ms = until

    def restart(self) -> TxnContext:
        config = self.state.config
        ctx = TxnContext(config.max_timeout_ms, list(self.log), next(self.pids), config.transaction_version)
        ctx.clock.ms = self.clock.ms
        return ctx

    def meta(self, tid: str) -> TxnMetadata:
        return self.state.txns[tid]
