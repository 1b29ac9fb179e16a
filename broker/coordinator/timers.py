"""The coordinator's clock and keyed timers, and every timer key.

Timers are keyed so that re-arming one replaces it; a timer that fires runs its operation through
the runtime like a request. ``LoopTimers`` (runtime.py) is the event-loop implementation;
``ManualClock``/``ManualTimers`` here are moved by hand in tests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from .result import Result

Op = Callable[[int], Result]


class Clock(Protocol):
    def now_ms(self) -> int: ...


class Timers(Protocol):
    def schedule(self, key: str, deadline_ms: int, op: Op) -> None: ...
    def extend(self, key: str, deadline_ms: int) -> bool: ...
    def cancel(self, key: str) -> None: ...
    def scheduled(self, key: str) -> bool: ...


# ---------------------------------------------------------------------- keys

#: offset retention check (offsets.py)
OFFSETS_EXPIRE = "offsets:expire"


def session_key(group_id: str, member_id: str) -> str:
    """A classic member's session."""
    return f"session:{group_id}:{member_id}"


def pending_key(group_id: str, member_id: str) -> str:
    """A classic member told MEMBER_ID_REQUIRED, until it rejoins with that id."""
    return f"pending:{group_id}:{member_id}"


def join_key(group_id: str) -> str:
    """A classic group's join phase (initial delay, then the rebalance timeout)."""
    return f"join:{group_id}"


def sync_key(group_id: str) -> str:
    """A classic group's deadline for every member's SyncGroup."""
    return f"sync:{group_id}"


#: the timers of a consumer group member: session, revocation, and (classic members of a consumer
#: group) the rejoin and sync deadlines
CONSUMER_SESSION, CONSUMER_REVOKE, CONSUMER_REJOIN, CONSUMER_SYNC = "csession", "crevoke", "cjoin", "csync"
CONSUMER_TIMER_KINDS = (CONSUMER_SESSION, CONSUMER_REVOKE, CONSUMER_REJOIN, CONSUMER_SYNC)


def consumer_key(kind: str, group_id: str, member_id: str) -> str:
    """One of a consumer group member's timers (``kind``: one of CONSUMER_TIMER_KINDS)."""
    return f"{kind}:{group_id}:{member_id}"


# ---------------------------------------------------------------------- manual (tests)


class ManualClock:
    """A clock tests move by hand."""

    def __init__(self, start_ms: int = 1_700_000_000_000):
        self.ms = start_ms

    def now_ms(self) -> int:
        return self.ms


class ManualTimers:
    """Keyed timers for tests: ``pop_next_due`` hands out what falls due, in deadline order."""

    def __init__(self, clock: ManualClock):
        self.clock = clock
        self.timers: dict[str, tuple[int, Op]] = {}

    def schedule(self, key: str, deadline_ms: int, op: Op) -> None:
        self.timers[key] = (deadline_ms, op)

    def cancel(self, key: str) -> None:
        self.timers.pop(key, None)

    def scheduled(self, key: str) -> bool:
        return key in self.timers

    def extend(self, key: str, deadline_ms: int) -> bool:
        entry = self.timers.get(key)
        if entry is None or deadline_ms < entry[0]:
            return False
        self.timers[key] = (deadline_ms, entry[1])
        return True

    def due(self) -> list[tuple[str, int]]:
        return sorted(((k, d) for k, (d, _op) in self.timers.items()), key=lambda kv: (kv[1], kv[0]))

    def pop_next_due(self, until_ms: int) -> tuple[str, Op] | None:
        due = [(d, k) for k, (d, _op) in self.timers.items() if d <= until_ms]
        if not due:
            return None
        d, k = min(due)
        _deadline, op = self.timers.pop(k)
        self.clock.ms = max(self.clock.ms, d)
        return k, op
