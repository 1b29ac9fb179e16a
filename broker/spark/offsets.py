"""Offset bookkeeping of the data-directory source, with the option names and semantics of
Spark's Kafka source: ``startingOffsets`` / ``endingOffsets`` ("earliest", "latest", or JSON such as
``{"t":{"0":23,"1":-2}}`` where -2 is earliest and -1 latest) and ``maxOffsetsPerTrigger`` (also
spelled ``maxRecordsPerTrigger``). Offsets travel between Spark and the source as
``{"topic": {"partition": offset}}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

TP = tuple[str, int]
EARLIEST, LATEST = -2, -1


def parse_spec(spec: str | None, default: str) -> str | dict[TP, int]:
    """ "earliest", "latest", or {(topic, partition): offset} from an option value."""
    spec = (spec or default).strip()
    if spec in ("earliest", "latest"):
        return spec
    try:
        doc = json.loads(spec)
        return {(t, int(p)): int(o) for t, parts in doc.items() for p, o in parts.items()}
    except (ValueError, AttributeError, TypeError) as e:
        raise ValueError(
            f"offsets {spec!r} are neither 'earliest', 'latest' nor JSON like {{\"topic\":{{\"0\":23}}}}"
        ) from e


def resolve(spec: str | dict[TP, int], tp: TP, earliest: int, latest: int) -> int:
    if spec == "earliest":
        return earliest
    if spec == "latest":
        return latest
    assert isinstance(spec, dict)
    off = spec.get(tp, EARLIEST)
    return earliest if off == EARLIEST else latest if off == LATEST else off


def to_json(offsets: Mapping[TP, int]) -> dict:
    out: dict[str, dict[str, int]] = {}
    for (t, p), o in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = o
    return out


def from_json(doc: Mapping) -> dict[TP, int]:
    return {(t, int(p)): int(o) for t, parts in doc.items() for p, o in parts.items()}


def max_per_trigger(options: Mapping[str, str]) -> int | None:
    for name in ("maxOffsetsPerTrigger", "maxRecordsPerTrigger"):
        if options.get(name) is not None:
            n = int(options[name])
            if n <= 0:
                raise ValueError(f"{name} must be positive, not {n}")
            return n
    return None


def cap(start: Mapping[TP, int], latest: Mapping[TP, int], limit: int | None) -> dict[TP, int]:
    """The end offsets of the next micro-batch: ``latest``, or at most ``limit`` offsets beyond
    ``start`` in total, shared among partitions in proportion to what each has waiting (as Spark's
    Kafka source does)."""
    ends = {tp: max(latest[tp], start.get(tp, latest[tp])) for tp in latest}
    if limit is None:
        return ends
    waiting = {tp: ends[tp] - start.get(tp, ends[tp]) for tp in ends}
    total = sum(waiting.values())
    if total <= limit:
        return ends
    share = {tp: limit * n // total for tp, n in waiting.items()}
    spare = limit - sum(share.values())
    for tp in sorted(waiting, key=lambda t: waiting[t] - share[t], reverse=True):
        if spare == 0:
            break
        if share[tp] < waiting[tp]:
            share[tp] += 1
            spare -= 1
    return {tp: start.get(tp, ends[tp]) + share[tp] for tp in ends}
