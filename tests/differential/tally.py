"""Per-API counts of the differential tests, printed at the end of the session
(tests/differential/conftest.py): steps compared, steps whose answers differed after normalising,
and how many of those were fully covered by tests/differential/allowed.py."""

from __future__ import annotations

from collections import Counter

#: (layer, API name) -> count, for kind in ("compared", "different", "allowed")
COMPARED: Counter[tuple[str, str]] = Counter()
DIFFERENT: Counter[tuple[str, str]] = Counter()
ALLOWED: Counter[tuple[str, str]] = Counter()
#: allowed-difference rules that matched at least once (by reason), for the summary
RULES_USED: Counter[str] = Counter()
_COUNTERS = {"compared": COMPARED, "different": DIFFERENT, "allowed": ALLOWED, "rules_used": RULES_USED}


def record(layer: str, api: str, different: bool, allowed: bool) -> None:
    COMPARED[(layer, api)] += 1
    if different:
        DIFFERENT[(layer, api)] += 1
        if allowed:
            ALLOWED[(layer, api)] += 1


def export() -> dict[str, list[list]]:
    """The counts as plain lists, for an xdist worker to send to the controller (tests/conftest.py)."""
    return {
        name: [[*key, n] if isinstance(key, tuple) else [key, n] for key, n in counter.items()]
        for name, counter in _COUNTERS.items()
    }


def merge(data: dict[str, list[list]]) -> None:
    """Add counts exported by :func:`export` (another process's) to this process's."""
    for name, rows in data.items():
        counter = _COUNTERS[name]
        for *key, n in rows:
            counter[tuple(key) if len(key) > 1 else key[0]] += n


def summary() -> list[str]:
    if not COMPARED:
        return []
    keys = sorted(COMPARED)
    width = max(len(f"{lay} {api}") for lay, api in keys)
    lines = [f"{'layer API':<{width}}  {'compared':>8}  {'differ':>6}  {'allowed':>7}  {'unexplained':>11}"]
    for k in keys:
        c, d, a = COMPARED[k], DIFFERENT[k], ALLOWED[k]
        lines.append(f"{k[0] + ' ' + k[1]:<{width}}  {c:>8}  {d:>6}  {a:>7}  {d - a:>11}")
    c, d, a = sum(COMPARED.values()), sum(DIFFERENT.values()), sum(ALLOWED.values())
    lines.append(f"{'total':<{width}}  {c:>8}  {d:>6}  {a:>7}  {d - a:>11}")
    if RULES_USED:
        lines.append("allowed differences used (fields):")
        for reason, n in RULES_USED.most_common():
            lines.append(f"  {n:>5}  {reason}")
    return lines
