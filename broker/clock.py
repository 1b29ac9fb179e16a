"""The broker's clock for its own deadlines: system time, or a virtual clock moved by hand.

One :class:`BrokerClock` per broker drives every broker-side deadline: the group coordinator's
timers (classic session, join, sync and rebalance timeouts, the initial rebalance delay, KIP-848
session and revocation timeouts, offset expiry) and the logs' time (retention, time-based segment
rolls, LogAppendTime, the cleaner's compaction lags and tombstone retention). Waits that clients time themselves (Fetch max wait, produce and request
timeouts) never read it: they stay on the event loop's real time.

``clock=manual`` (or :meth:`BrokerClock.set_mode` at runtime) freezes it: :meth:`now_ms` stands
still until :meth:`advance` moves it, which fires every deadline that falls due, earliest first,
with the clock set to each deadline as it fires -- exactly as if that time had passed. Switching
back to ``system`` makes ``now_ms`` wall time again; deadlines keep their absolute values.

This module imports nothing of the broker: the coordinator and the logs depend on it, not the
other way round.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

MODES = ("system", "manual")

#: a fired deadline runs at most this many times per advance (a loop guard; never reached in practice)
MAX_FIRED_PER_ADVANCE = 1_000_000


class DeadlineSource(Protocol):
    """Something holding deadlines on the broker clock (the coordinator's timers)."""

    def next_due(self) -> tuple[int, str] | None:
        """The earliest (deadline_ms, key), or None."""
        ...

    def fire(self, key: str) -> None:
        """Run the timer ``key`` now (the clock reads its deadline)."""
        ...

    def on_mode(self, manual: bool) -> None:
        """The clock switched mode: stop or start real-time wakeups."""
        ...


class BrokerClock:
    """``now_ms()`` for every broker-side deadline; ``advance(ms)`` when manual."""

    __slots__ = ("_manual", "_virtual_ms", "sources", "on_advance", "fired")

    def __init__(self, mode: str = "system", start_ms: int | None = None):
        if mode not in MODES:
            raise ValueError(f"clock: must be one of {', '.join(MODES)}, got {mode!r}")
        self._manual = mode == "manual"
        self._virtual_ms = start_ms if start_ms is not None else _wall_ms()
        self.sources: list[DeadlineSource] = []
        #: called with the new time after every advance (log retention)
        self.on_advance: list[Callable[[int], None]] = []
        #: timers fired by advances so far (key, deadline), newest last (kept short)
        self.fired: list[tuple[str, int]] = []

    @property
    def mode(self) -> str:
        return "manual" if self._manual else "system"

    @property
    def manual(self) -> bool:
        return self._manual

    def now_ms(self) -> int:
        return self._virtual_ms if self._manual else int(time.time() * 1000)

    def attach(self, source: DeadlineSource) -> None:
        self.sources.append(source)

    def set_mode(self, mode: str) -> None:
        """Switch to ``system`` or ``manual``; a manual clock starts at the current wall time (or
        where it stood, if that is later: time never goes backwards)."""
        if mode not in MODES:
            raise ValueError(f"clock mode must be one of {', '.join(MODES)}, got {mode!r}")
        manual = mode == "manual"
        if manual == self._manual:
            return
        if manual:
            self._virtual_ms = max(self._virtual_ms, _wall_ms())
        self._manual = manual
        for s in self.sources:
            s.on_mode(manual)

    def advance(self, ms: int) -> list[tuple[str, int]]:
        """Move a manual clock ``ms`` forward, firing what falls due in deadline order; returns the
        (key, deadline) of each timer fired. Raises ValueError on a system clock or a negative
        ``ms``. Timers armed by a fired timer fire too when they fall due within the advance."""
        if not self._manual:
            raise ValueError("the clock is not manual (set clock=manual first)")
        if ms < 0:
            raise ValueError(f"cannot advance by a negative duration ({ms} ms)")
        target = self._virtual_ms + ms
        fired: list[tuple[str, int]] = []
        while len(fired) < MAX_FIRED_PER_ADVANCE:
            best: tuple[int, str, DeadlineSource] | None = None
            for s in self.sources:
                nd = s.next_due()
                if nd is not None and nd[0] <= target and (best is None or nd[:2] < best[:2]):
                    best = (nd[0], nd[1], s)
            if best is None:
                break
            deadline, key, source = best
            self._virtual_ms = max(self._virtual_ms, deadline)
            fired.append((key, deadline))
            source.fire(key)
        self._virtual_ms = target
        for hook in self.on_advance:
            hook(target)
        self.fired = (self.fired + fired)[-1000:]
        return fired

    def describe(self) -> dict:
        """The clock for the control API: mode, now, and the pending deadlines (earliest first)."""
        pending = []
        for s in self.sources:
            pending.extend(getattr(s, "pending", lambda: [])())
        pending.sort()
        return {
            "mode": self.mode,
            "now_ms": self.now_ms(),
            "wall_ms": _wall_ms(),
            "pending": [{"deadline_ms": d, "key": k} for d, k in pending],
        }


def _wall_ms() -> int:
    return int(time.time() * 1000)
