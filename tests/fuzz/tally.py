"""Fuzz cases counted per API, per layer ("decoder": the request decoders alone; "tcp": frames sent
through the connection handler; "semantic": well-formed requests with absurd values), printed in
pytest's terminal summary by tests/fuzz/conftest.py. A case is one frame whose first two bytes name
an API key we serve; other frames (random bytes, unknown keys) count under "(other)"."""

from __future__ import annotations

import struct
from collections import Counter

from broker.dispatch import build_registry

_NAMES = {key: api.name for key, api in build_registry().apis.items()}
LAYERS = ("decoder", "tcp", "semantic")
#: (layer, API name) -> frames
COUNTS: Counter[tuple[str, str]] = Counter()


def count(layer: str, frame: bytes) -> None:
    key = struct.unpack_from(">h", frame)[0] if len(frame) >= 2 else None
    COUNTS[(layer, _NAMES.get(key, "(other)"))] += 1


def export() -> list[list]:
    """The counts as plain lists, for an xdist worker to send to the controller (tests/conftest.py)."""
    return [[layer, name, n] for (layer, name), n in COUNTS.items()]


def merge(rows: list[list]) -> None:
    """Add counts exported by :func:`export` (another process's) to this process's."""
    for layer, name, n in rows:
        COUNTS[(layer, name)] += n


def summary() -> list[str]:
    """Table lines: one row per API (served ones in key order, then "(other)"), one column per layer."""
    if not COUNTS:
        return []
    names = [n for _k, n in sorted(_NAMES.items())] + ["(other)"]
    width = max(map(len, names))
    lines = [f"{'API':<{width}}  " + "  ".join(f"{layer:>9}" for layer in LAYERS)]
    for name in names:
        row = [COUNTS.get((layer, name), 0) for layer in LAYERS]
        lines.append(f"{name:<{width}}  " + "  ".join(f"{n:>9,}" for n in row))
    totals = [sum(n for (lay, _), n in COUNTS.items() if lay == layer) for layer in LAYERS]
    lines.append(f"{'total':<{width}}  " + "  ".join(f"{n:>9,}" for n in totals))
    return lines
