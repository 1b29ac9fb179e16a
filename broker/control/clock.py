"""Control API for the broker clock (broker/clock.py): read it, switch its mode, advance it.

Endpoints (served by the control listener; each returns JSON):

- ``GET /clock``: ``{"mode", "now_ms", "wall_ms", "pending": [{"deadline_ms", "key"}...]}``;
- ``PUT /clock`` ``{"mode": "manual"|"system"}``: switch (a manual clock starts at wall time);
- ``POST /clock/advance`` ``{"ms": 46000}`` (or ``{"duration": "46s"}``): move a manual clock,
  firing every deadline that falls due in deadline order; answers the clock and the fired timers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from broker.clock import MODES, BrokerClock

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)?\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, None: 1}


class BadRequest(ValueError):
    """A control request to refuse with 400 and this message."""


@dataclass(frozen=True)
class Target:
    """What the control routes of this package use of a broker, found from a control object that
    holds the ``Broker`` (``.broker``) or its handler services and request pipeline (``.services``,
    ``.pipeline``)."""

    groups: Any  # GroupCoordinator
    logs: Any  # LogManager
    clock: Any  # BrokerClock (the coordinator's clock)
    pipeline: Any  # RequestPipeline, None before the broker started

    @classmethod
    def of(cls, control: Any) -> Target:
        broker = getattr(control, "broker", None)
        if broker is None and hasattr(control, "listener"):
            broker = control  # the Broker itself
        holder = broker if broker is not None else getattr(control, "services", control)
        groups = holder.groups
        pipeline = getattr(control, "pipeline", None) or getattr(broker, "pipeline", None)
        if pipeline is None and broker is not None:
            pipeline = getattr(broker.listener, "_pipeline", None)
        clock = getattr(broker, "clock", None) or groups.runtime.clock
        return cls(groups, holder.logs, clock, pipeline)


def clock_of(control: Any) -> BrokerClock:
    """The broker clock behind a control object (``.clock``, or the broker's)."""
    clock = getattr(control, "clock", None)
    return clock if isinstance(clock, BrokerClock) else Target.of(control).clock


def parse_duration(value: Any) -> int:
    """Milliseconds from an int (ms) or a string such as ``"250ms"``, ``"46s"``, ``"2m"``, ``"1h"``."""
    if isinstance(value, bool):
        raise BadRequest(f"bad duration {value!r}: give milliseconds or a number with ms, s, m, h or d")
    if isinstance(value, int):
        if value < 0:
            raise BadRequest(f"bad duration {value}: must not be negative")
        return value
    if isinstance(value, str) and (m := _DURATION.match(value)):
        return int(m.group(1)) * _UNIT_MS[m.group(2)]
    raise BadRequest(f"bad duration {value!r}: give milliseconds or a number with ms, s, m, h or d")


def set_mode(clock: BrokerClock, body: Any) -> dict:
    mode = body.get("mode") if isinstance(body, dict) else None
    if mode not in MODES:
        raise BadRequest(f"unknown clock mode {mode!r}; valid: {', '.join(MODES)}")
    clock.set_mode(mode)
    return clock.describe()


def advance(clock: BrokerClock, body: Any) -> dict:
    if not isinstance(body, dict) or ("ms" not in body and "duration" not in body):
        raise BadRequest('give {"ms": N} or {"duration": "46s"}')
    ms = parse_duration(body["ms"] if "ms" in body else body["duration"])
    if not clock.manual:
        raise BadRequest('the clock is not manual; PUT /clock {"mode": "manual"} first (valid: manual)')
    fired = clock.advance(ms)
    out = clock.describe()
    out["fired"] = [{"key": k, "deadline_ms": d} for k, d in fired]
    return out
