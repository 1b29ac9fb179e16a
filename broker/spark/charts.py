"""The reference jobs' charts, from plain rows (no Spark here): one panel per group (small multiples),
each on its own time axis, with long idle stretches shortened and marked, integer ticks, and the
rebalance timeline drawn as partition ownership over time (a bar per partition, coloured by the
member that owned it) with each rebalance marked.

Times are ``datetime`` objects; a panel's axis is seconds since its group's first event. Where
nothing happened for longer than ``IDLE_CAP`` seconds (and a tenth of the group's active time),
the axis skips the rest of that gap and a dashed line says how long it really was, so that a group
that rebalanced at 09:00 and again at 17:00 does not become two dots at the edges of the chart.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: never a window
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

#: seconds of an idle gap kept on the axis (the rest is cut out and marked)
IDLE_CAP = 30.0
PANEL_HEIGHT = 2.6
WIDTH = 11.0


class TimeAxis:
    """Maps the times of one group onto an axis of active seconds: gaps longer than the cap are
    shortened to it. ``breaks`` are (axis position, real length of the gap in seconds)."""

    def __init__(self, times: Iterable[datetime], cap: float = IDLE_CAP):
        ts = sorted({t.timestamp() for t in times})
        self.origin = ts[0] if ts else 0.0
        span = (ts[-1] - ts[0]) if ts else 0.0
        gaps = [b - a for a, b in zip(ts, ts[1:], strict=False)]
        busy = sum(g for g in gaps if g <= cap)
        self.cap = max(cap, 0.1 * busy) if span > cap else max(span, cap)
        self.known = ts
        self.positions: list[float] = []
        self.breaks: list[tuple[float, float]] = []
        x = 0.0
        for i, t in enumerate(ts):
            if i:
                gap = t - ts[i - 1]
                if gap > self.cap:
                    self.breaks.append((x + self.cap / 2, gap))
                    gap = self.cap
                x += gap
            self.positions.append(x)

    def __call__(self, t: datetime) -> float:
        """Axis position of ``t`` (between known times: linear, within the shortened gap)."""
        s = t.timestamp()
        ts, xs = self.known, self.positions
        if not ts:
            return 0.0
        i = bisect.bisect_right(ts, s)
        if i == 0:
            return xs[0] - (ts[0] - s)
        if i == len(ts):
            return xs[-1] + (s - ts[-1])
        a, b = ts[i - 1], ts[i]
        return xs[i - 1] + (s - a) / (b - a) * (xs[i] - xs[i - 1])

    @property
    def start(self) -> str:
        return (
            datetime.fromtimestamp(self.origin, UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if self.known else ""
        )


def _duration(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    d, h = divmod(h, 24)
    parts = (
        [f"{d}d"] * bool(d)
        + [f"{h}h"] * bool(h)
        + [f"{m}m"] * bool(m)
        + [f"{s}s"] * (not (d or h) and bool(s))
    )
    return " ".join(parts) or "0s"


def _mark_breaks(ax: Any, axis: TimeAxis) -> None:
    for x, gap in axis.breaks:
        ax.axvline(x, color="0.5", linestyle=(0, (2, 3)), linewidth=1)
        ax.annotate(
            f"{_duration(gap)} idle",
            (x, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(2, -10),
            textcoords="offset points",
            fontsize=7,
            color="0.35",
        )


def _figure(groups: Sequence[str], title: str) -> tuple[Any, list[Any]]:
    n = max(len(groups), 1)
    fig, axes = plt.subplots(n, 1, figsize=(WIDTH, 1.0 + PANEL_HEIGHT * n), squeeze=False)
    fig.suptitle(title if groups else f"{title}: nothing to show")
    return fig, [row[0] for row in axes]


def _save(fig: Any, path: Path) -> None:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _by_group(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["group"], []).append(r)
    return dict(sorted(out.items()))


def lag_panels(path: Path, rows: Iterable[Mapping[str, Any]]) -> int:
    """Lag at each commit, one panel per group, a step line per topic-partition. Rows: group,
    topic, partition, commit_timestamp, lag. Returns the number of panels."""
    groups = _by_group(rows)
    fig, axes = _figure(list(groups), "Consumer lag at each commit (records behind)")
    for ax, (group, rs) in zip(axes, groups.items(), strict=False):
        axis = TimeAxis(r["commit_timestamp"] for r in rs)
        series: dict[str, list[Mapping[str, Any]]] = {}
        for r in sorted(rs, key=lambda r: r["commit_timestamp"]):
            series.setdefault(f"{r['topic']}-{r['partition']}", []).append(r)
        for name, points in sorted(series.items()):
            ax.step([axis(p["commit_timestamp"]) for p in points], [p["lag"] for p in points], where="post",
                    marker=".", label=name)  # fmt: skip
        _mark_breaks(ax, axis)
        ax.set_title(f"group {group}", loc="left", fontsize=10)
        ax.set_xlabel(f"seconds since {axis.start}")
        ax.set_ylabel("lag")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0), ncol=1 + len(series) // 12)
    _save(fig, path)
    return len(groups)


def ownership(path: Path, generations: Iterable[Mapping[str, Any]]) -> int:
    """Who owned which partition when, one panel per group. Rows (one per group and generation or
    epoch): group, generation, timestamp (the rebalance began), settled (it ended; may be None),
    owners (a list of (member, partition) pairs). Each partition is a bar coloured by its owner in
    each generation; rebalances are shaded and labelled with the generation. Returns the panels."""
    groups = _by_group(generations)
    fig, axes = _figure(list(groups), "Partition ownership per group (shaded: rebalancing)")
    cmap = plt.get_cmap("tab20")
    for ax, (group, gens) in zip(axes, groups.items(), strict=False):
        gens = sorted(gens, key=lambda g: (g["timestamp"], g["generation"]))
        times = [g["timestamp"] for g in gens] + [g["settled"] for g in gens if g.get("settled")]
        axis = TimeAxis(times)
        end = max(axis(t) for t in times) if times else 0.0
        end += max(1.0, 0.05 * end)
        partitions = sorted({p for g in gens for _m, p in g.get("owners") or []}, key=_partition_key)
        row = {p: i for i, p in enumerate(partitions)}
        colours: dict[str, Any] = {}
        for i, g in enumerate(gens):
            x0 = axis(g["timestamp"])
            x1 = axis(gens[i + 1]["timestamp"]) if i + 1 < len(gens) else end
            for member, partition in g.get("owners") or []:
                colour = colours.setdefault(member, cmap(len(colours) % 20))
                ax.broken_barh([(x0, max(x1 - x0, 1e-3))], (row[partition] - 0.4, 0.8), facecolors=colour)
            settled = g.get("settled")
            if settled is not None:
                ax.axvspan(x0, axis(settled), color="0.85", zorder=0)
            ax.axvline(x0, color="0.3", linewidth=0.8)
            ax.annotate(f"g{g['generation']}", (x0, 1.0), xycoords=("data", "axes fraction"),
                        xytext=(2, 2), textcoords="offset points", fontsize=7)  # fmt: skip
        _mark_breaks(ax, axis)
        ax.set_xlim(0, end)
        ax.set_yticks(range(len(partitions)), partitions, fontsize=7)
        ax.set_ylim(-0.6, max(len(partitions), 1) - 0.4)
        count = f"{len(gens)} generation{'' if len(gens) == 1 else 's'}"
        ax.set_title(f"group {group}: {count}", loc="left", fontsize=10, pad=12)
        ax.set_xlabel(f"seconds since {axis.start}")
        handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colours.values()]
        if handles:
            ax.legend(handles, [_short(m) for m in colours], fontsize="x-small", title="member",
                      title_fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0))  # fmt: skip
    _save(fig, path)
    return len(groups)


def findings(path: Path, counts: Mapping[tuple[str, str], int]) -> None:
    """Audit findings per group (bars by finding)."""
    fig, ax = plt.subplots(figsize=(8, 4))
    labels = [f"{g}\n{k}" for g, k in sorted(counts)]
    ax.bar(labels, [counts[k] for k in sorted(counts)], color="tab:red")
    ax.set_title("Offset audit findings" if counts else "Offset audit findings: none")
    ax.set_ylabel("commits")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    _save(fig, path)


def _partition_key(p: str) -> tuple[str, int]:
    topic, _, n = p.rpartition("-")
    return (topic, int(n)) if n.isdigit() else (p, -1)


def _short(member: str) -> str:
    """A member id short enough for a legend (client id prefix and the id's first characters)."""
    return member if len(member) <= 18 else f"{member[:12]}…{member[-5:]}"
