"""The coordinator runtime: runs group operations one at a time against the coordinator log.

An operation is a function ``op(now_ms) -> Result``. It reads the coordinator state, may change
transient state (parked requests, in-flight rebalances), and returns the records that persist its
outcome, its response, and completions for parked requests. The runtime then

1. appends the records to the coordinator log (``__consumer_offsets`` partition 0) -- if that fails,
   nothing is replayed and the caller gets NOT_COORDINATOR (retriable: the client looks the
   coordinator up again and retries), as Kafka maps a storage error on the coordinator's log;
2. replays them through ``Coordinator.replay`` (state.py), the same code start-up uses to rebuild
   the state (loader.py, with a fast path for offset commits, over a log the log cleaner keeps
   key-compacted: broker/log/cleaner.py), then runs the result's ``after`` steps;
3. releases the response and the completions once the records are durable per ``log.flush``; if
   the fsync fails they get NOT_COORDINATOR (as Kafka maps a storage error), and the records stay
   in the log (so the state matches it) to become durable with the next fsync that succeeds. The
   answer is then a future resolved by a callback on the log manager's group commit (a coroutine
   only for a parked request, whose response is itself a future); cancelling one request's answer
   never cancels the shared group commit.

Everything runs on the event-loop thread, so operations never interleave. Timers are keyed (every
key is built in timers.py) and a timer that fires is just another operation.

Operations arm and cancel timers while they run, before their records are appended, and a failed
append does not disarm them. That is deliberate: timers follow the transient state the operation
has already changed in memory (a classic group's rebalance, kept in memory as in Kafka, is not
rolled back either), and deferring them to ``after`` would leave such a group without its join or
sync deadline. Every timer operation re-checks the state when it fires (the member still exists,
the group is still the same object, in the same state or generation, with the same member epoch)
and does nothing otherwise, so a timer armed for records that were never appended is harmless.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from time import time as _time
from typing import Any, Protocol

from broker.log.batch import iter_batches
from broker.log.control import marker_batch
from broker.protocol.errors import ErrorCode, KafkaError

from .loader import load
from .records import CoordinatorRecord, to_batch
from .result import Result, apply, complete, fail
from .timers import Clock, ManualClock, ManualTimers, Timers

__all__ = ["Clock", "CoordinatorRuntime", "LoopTimers", "ManualClock", "ManualTimers", "Result", "Slot"]
__all__ += ["SystemClock", "Timers"]

log = logging.getLogger(__name__)

#: the most records one lingering batch holds (``run_lingering``): about 100 KB of OffsetCommit records
LINGER_MAX_RECORDS = 1000


class Coordinator(Protocol):
    def replay(self, record: CoordinatorRecord, offset: int, timestamp: int) -> None: ...


class SystemClock:
    def now_ms(self) -> int:
        return int(_time() * 1000)


class LoopTimers:
    """Keyed timers on the event loop; a fired timer runs its operation through the runtime.

    Pushing a deadline later (every heartbeat does, for the session timer) only records it: the
    armed loop timer, when it fires early, re-arms itself for the remainder. So the hot path is a
    dict store, not a cancel and a new loop timer.
    """

    def __init__(self, clock: Clock, run_detached: Callable[[Callable[[int], Result]], None]):
        self.clock = clock
        self.run_detached = run_detached  # the runtime's: a fired timer is an operation
        self.deadlines: dict[str, tuple[int, Callable[[int], Result]]] = {}
        self.handles: dict[str, tuple[int, asyncio.TimerHandle]] = {}  # key -> (armed for, handle)
        self.loop: asyncio.AbstractEventLoop | None = None
        #: a manual broker clock (broker/clock.py) fires the timers itself, in ``advance``
        self.manual = bool(getattr(clock, "manual", False))
        attach = getattr(clock, "attach", None)
        if attach is not None:
            attach(self)

    def schedule(self, key: str, deadline_ms: int, op: Callable[[int], Result]) -> None:
        self.deadlines[key] = (deadline_ms, op)
        armed = self.handles.get(key)
        if armed is not None and armed[0] <= deadline_ms:
            return  # fires first and re-arms for the rest
        if armed is not None:
            armed[1].cancel()
        self._arm(key, deadline_ms)

    def extend(self, key: str, deadline_ms: int) -> bool:
        """Move a scheduled timer's deadline later, keeping its operation; False if none is set."""
        entry = self.deadlines.get(key)
        if entry is None or deadline_ms < entry[0]:
            return False
        self.deadlines[key] = (deadline_ms, entry[1])
        return True

    def _arm(self, key: str, deadline_ms: int) -> None:
        if self.manual and deadline_ms > self.clock.now_ms():
            return  # the clock's advance() fires it
        if self.loop is None:
            self.loop = asyncio.get_event_loop()
        if self.manual:  # due already: fire it as soon as the loop is free
            self.handles[key] = (deadline_ms, self.loop.call_soon(self._fire, key))
            return
        delay = max(0.0, (deadline_ms - self.clock.now_ms()) / 1000)
        self.handles[key] = (deadline_ms, self.loop.call_later(delay, self._fire, key))

    def _fire(self, key: str) -> None:
        self.handles.pop(key, None)
        entry = self.deadlines.get(key)
        if entry is None:
            return
        deadline, op = entry
        if deadline > self.clock.now_ms():
            if not self.manual:
                self._arm(key, deadline)  # pushed later since it was armed
            return
        del self.deadlines[key]
        self.run_detached(op)

    def scheduled(self, key: str) -> bool:
        return key in self.deadlines

    # the broker clock's DeadlineSource (broker/clock.py): a manual clock fires timers itself

    def next_due(self) -> tuple[int, str] | None:
        if not self.deadlines:
            return None
        return min((d, k) for k, (d, _op) in self.deadlines.items())

    def fire(self, key: str) -> None:
        entry = self.deadlines.pop(key, None)
        if entry is not None:
            self.run_detached(entry[1])

    def pending(self) -> list[tuple[int, str]]:
        return sorted((d, k) for k, (d, _op) in self.deadlines.items())

    def on_mode(self, manual: bool) -> None:
        self.manual = manual
        for _deadline, h in self.handles.values():
            h.cancel()
        self.handles.clear()
        if not manual:
            for key, (deadline, _op) in self.deadlines.items():
                self._arm(key, deadline)

    def cancel(self, key: str) -> None:
        self.deadlines.pop(key, None)
        armed = self.handles.pop(key, None)
        if armed is not None:
            armed[1].cancel()

    def cancel_all(self) -> None:
        for _deadline, h in self.handles.values():
            h.cancel()
        self.handles.clear()
        self.deadlines.clear()


class CoordinatorRuntime:
    """Binds a coordinator to its log partition, a clock and the event loop."""

    def __init__(self, coordinator: Coordinator, logs: Any, plog: Any, clock: Clock | None = None):
        self.coordinator = coordinator
        self.logs = logs  # LogManager: flush policy
        self.plog = plog  # PartitionLog of the coordinator partition
        self.clock = clock or SystemClock()
        #: called as ``observer(op, now_ms)`` after every operation has changed the state (the
        #: control plane's invariant checker and rebalance report); empty unless they are enabled
        self.observers: list[Callable[[Callable[[int], Result], int], None]] = []
        #: commits run this event-loop turn, not yet appended (``run_lingering``): (result, the
        #: future of its answer, the operation's time), and all their records in order
        self._lingering: list[tuple[Result, asyncio.Future, int]] = []
        self._linger_records: list[Any] = []
        #: whether a lingering commit has ``after`` steps (then ``drain`` replays commit by commit)
        self._linger_after = False

    @property
    def plog(self) -> Any:
        return self._plog

    @plog.setter
    def plog(self, plog: Any) -> None:
        # The state replays records as they are appended, before they are durable: after a failed
        # fsync the log must keep them (they become durable with the next fsync that succeeds) or
        # the state would hold records the log has lost.
        if plog is not None:
            plog.keep_unflushed = True
        self._plog = plog

    def load(self, kafka_layout_from: int = 0) -> int:
        """Replay the whole coordinator log (start-up); returns the number of records replayed. The
        members' timers are the router's to restore afterwards (groups.py). Records below
        ``kafka_layout_from`` have an earlier pykbroker's layout (layout.py)."""
        return load(self.plog, self.coordinator, kafka_layout_from=kafka_layout_from)

    def run(self, op: Callable[[int], Result]) -> Any:
        """Run ``op`` now; returns its response, or an awaitable of it when records must be flushed."""
        if self._lingering:  # the operations before this one are in the log and the state first
            self.drain()
        now = self.clock.now_ms()
        return self._finish(op, op(now), now)

    def run_lingering(self, op: Callable[[int], Result], linger: bool = True) -> Any:
        """Run an OffsetCommit operation whose records may share one batch with the other commits
        of this event-loop turn: returns its response, or a future of it. The records join the
        lingering batch (``drain``: appended at the end of the turn, then replayed, then answered
        once durable, as Kafka's coordinator runtime batches the records of many writes into one
        batch, ``group.coordinator.append.linger.ms``); every other operation (``run``) drains the
        batch before it runs, so it sees the commits in the state as if each had been appended on
        its own. Only for operations that read no committed offset and whose records change
        nothing but committed offsets of an existing group (the caller says so with ``linger``),
        and only when the answer waits for a flush anyway (not with ``log.flush=never``, nor
        while observers watch every operation)."""
        loop = asyncio._get_running_loop()
        if not linger or loop is None or self.observers or getattr(self.logs, "policy", None) == "never":
            return self.run(op)
        now = self.clock.now_ms()
        result = op(now)
        if not result.records:
            complete(result.completions)
            return result.response
        if (
            result.marker is not None
            or result.producer is not None
            or isinstance(result.response, asyncio.Future)
        ):
            if self._lingering:
                self.drain()
            return self._finish(op, result, now)
        out = loop.create_future()
        lingering = self._lingering
        if not lingering:
            loop.call_soon(self.drain)
        lingering.append((result, out, now))
        if result.after:
            self._linger_after = True
        records = self._linger_records
        records += result.records
        if len(records) >= LINGER_MAX_RECORDS:
            self.drain()
        return out

    def drain(self) -> None:
        """Append the lingering commits' records as one batch, replay them, and answer each commit
        once the batch is durable (NOT_COORDINATOR for all of them if the append or its fsync
        fails; nothing is replayed after a failed append)."""
        pending = self._lingering
        if not pending:
            return
        records = self._linger_records
        after = self._linger_after
        self._lingering = []
        self._linger_records = []
        self._linger_after = False
        now = self.clock.now_ms()
        try:
            data = bytearray(to_batch(records, now))
            base = self.plog.append(data, iter_batches(data, verify_crc=False), now)
        except OSError as e:
            log.error("coordinator log append failed: %s", e)
            error = KafkaError(ErrorCode.NOT_COORDINATOR, f"coordinator log append failed: {e}")
            for result, out, _now in pending:
                fail(result.completions, error)
                if not out.done():
                    out.set_exception(error)
            return
        replay_commits = getattr(self.coordinator, "replay_commits", None)
        if replay_commits is not None and not after:
            # the commits' records in one pass (a commit's timestamp is not replayed: its records'
            # own commit times are in them)
            replay_commits(records, base, now)
        else:
            replay = self.coordinator.replay
            offset = base
            for result, _out, op_now in pending:
                for record in result.records:
                    replay(record, offset, op_now)
                    offset += 1
                for step in result.after:
                    step(op_now)
        fut = self.logs.appended(self.plog)
        if fut is None:
            _answer(None, pending)
        else:
            fut.add_done_callback(lambda f: _answer(f, pending))

    def _finish(self, op: Callable[[int], Result], result: Result, now: int) -> Any:
        """Append ``result``'s records, replay them and answer (``run`` after the operation)."""
        if not result.records and result.marker is None:
            complete(result.completions)
            if self.observers:
                self._observe(op, now)
            return result.response
        try:
            if result.marker is not None:
                pid, epoch, commit = result.marker
                data = bytearray(marker_batch(pid, epoch, commit, now))
            else:
                data = bytearray(to_batch(result.records, now, result.producer))
            # a batch we just built: its headers are read back without re-checking the CRC
            base = self.plog.append(data, iter_batches(data, verify_crc=False), now)
        except OSError as e:
            log.error("coordinator log append failed: %s", e)
            error = KafkaError(ErrorCode.NOT_COORDINATOR, f"coordinator log append failed: {e}")
            fail(result.completions, error)
            raise error from e
        if result.marker is not None:
            self.coordinator.replay_marker(result.marker[0], result.marker[2])  # type: ignore[attr-defined]
            apply(result, base, self.coordinator.replay, now)
        elif result.producer is not None:
            pid = result.producer[0]
            txn_replay = self.coordinator.replay_transactional  # type: ignore[attr-defined]
            apply(result, base, lambda rec, off, ts: txn_replay(pid, rec, off, ts), now)
        else:
            apply(result, base, self.coordinator.replay, now)
        if self.observers:
            self._observe(op, now)
        fut = self.logs.appended(self.plog)
        if fut is None:
            complete(result.completions)
            return result.response
        if isinstance(result.response, asyncio.Future):  # a parked request
            return self._after_flush(fut, result)
        return self._when_durable(fut, result)

    def _observe(self, op: Callable[[int], Result], now: int) -> None:
        for observer in list(self.observers):
            try:
                observer(op, now)
            except Exception:
                log.exception("coordinator observer %r failed", observer)

    def _when_durable(self, flushed: asyncio.Future, result: Result) -> asyncio.Future:
        """A future of the response, resolved by a callback once ``flushed`` (the log manager's group
        commit, shared by every append it covers) is done: what ``_after_flush`` does for a response
        that is not itself a future, without a coroutine and a task per request. Cancelling the
        returned future (its connection closed) leaves ``flushed`` alone."""
        out = asyncio.get_running_loop().create_future()

        def done(f: asyncio.Future) -> None:
            if out.cancelled():
                return
            if f.cancelled():
                out.cancel()
                return
            e = f.exception()
            if isinstance(e, KafkaError):
                error = _not_coordinator(e)
                fail(result.completions, error)
                out.set_exception(error)
            elif e is not None:
                out.set_exception(e)
            else:
                complete(result.completions)
                out.set_result(result.response)

        flushed.add_done_callback(done)
        return out

    async def _after_flush(self, fut: asyncio.Future, result: Result) -> Any:
        try:
            # shielded: the group commit's future is shared, a cancelled request must not cancel it
            await asyncio.shield(fut)
        except KafkaError as e:
            error = _not_coordinator(e)
            fail(result.completions, error)
            raise error from e
        complete(result.completions)
        response = result.response
        if isinstance(response, asyncio.Future):  # a parked request, completed just above or later
            return await response
        return response

    def run_detached(self, op: Callable[[int], Result]) -> None:
        """Run a timer's operation; its own response (if any) goes nowhere."""
        try:
            out = self.run(op)
        except KafkaError as e:
            log.warning("timer operation failed: %s", e)
            return
        if asyncio.iscoroutine(out) or asyncio.isfuture(out):
            task = asyncio.ensure_future(out)
            task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)


def _not_coordinator(e: KafkaError) -> KafkaError:
    """A failed group commit (a storage error) as the coordinator answers it: NOT_COORDINATOR, so the
    client looks its coordinator up again, with the storage error as the cause."""
    error = KafkaError(ErrorCode.NOT_COORDINATOR, e.message)
    error.__cause__ = e
    return error


def _answer(flushed: asyncio.Future | None, pending: list[tuple[Result, asyncio.Future, int]]) -> None:
    """Answer the commits of one drained batch once ``flushed`` (the group commit) is done."""
    error: BaseException | None = None
    if flushed is not None:
        if flushed.cancelled():
            for _result, out, _now in pending:
                out.cancel()
            return
        e = flushed.exception()
        error = _not_coordinator(e) if isinstance(e, KafkaError) else e
    if error is not None:
        for result, out, _now in pending:
            fail(result.completions, error)
            if not out.done():
                out.set_exception(error)
        return
    for result, out, _now in pending:
        if result.completions:
            complete(result.completions)
        if not out.done():
            out.set_result(result.response)


class Slot:
    """A parked request's answer outside an event loop (for tests): the Future interface subset."""

    def __init__(self) -> None:
        self._done = False
        self.value: Any = None
        self.error: BaseException | None = None

    def done(self) -> bool:
        return self._done

    def set_result(self, value: Any) -> None:
        self._done, self.value = True, value

    def set_exception(self, error: BaseException) -> None:
        self._done, self.error = True, error

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value
