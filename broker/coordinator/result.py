"""What a coordinator operation returns: ``Result``.

An operation is a function ``op(now_ms) -> Result``; the runtime (runtime.py) appends its records,
replays them, runs its ``after`` steps, then releases its response and completions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .records import CoordinatorRecord


class Waiter(Protocol):
    """A parked request's answer: the subset of ``asyncio.Future`` operations use (tests use a Slot)."""

    def done(self) -> bool: ...
    def set_result(self, value: Any) -> None: ...
    def set_exception(self, error: BaseException) -> None: ...


@dataclass(slots=True)  # an operation makes one per request: slots make it three times cheaper
class Result:
    """What a coordinator operation produces: the response, the records to write, what follows."""

    response: Any = None
    records: list[CoordinatorRecord] = field(default_factory=list)
    #: (waiter of a parked request, its response) pairs to resolve with this operation
    completions: list[tuple[Waiter, Any]] = field(default_factory=list)
    #: steps on transient state (timers, an in-memory rebalance) once the records are replayed
    after: list[Callable[[int], None]] = field(default_factory=list)
    #: (producer id, epoch): ``records`` are a transaction's (TxnOffsetCommit), written as that
    #: producer's transactional batch and replayed as pending until its marker
    producer: tuple[int, int] | None = None
    #: (producer id, epoch, commit): write this transaction marker (no records)
    marker: tuple[int, int, bool] | None = None

    def merge(self, other: Result) -> Result:
        """Fold ``other`` into this result: its records, completions and after-steps follow this
        one's; the response stays this result's unless it has none. Returns self."""
        self.records += other.records
        self.completions += other.completions
        self.after += other.after
        if self.response is None:
            self.response = other.response
        return self


def apply(
    result: Result, base_offset: int, replay: Callable[[CoordinatorRecord, int, int], None], now: int
) -> None:
    """Once ``result.records`` are appended at ``base_offset``: replay them, then run the after-steps
    (the runtime and the test context both go through here)."""
    for i, record in enumerate(result.records):
        replay(record, base_offset + i, now)
    for step in result.after:
        step(now)


def complete(completions: list[tuple[Waiter, Any]]) -> None:
    """Answer the parked requests an operation resolved (those not already answered)."""
    for waiter, response in completions:
        if not waiter.done():
            waiter.set_result(response)


def fail(completions: list[tuple[Waiter, Any]], error: BaseException) -> None:
    for waiter, _response in completions:
        if not waiter.done():
            waiter.set_exception(error)
