"""A rebalance report per group: how many rebalances, the time spent rebalancing, and the partitions
each rebalance moved (what it cost the application).

It watches the coordinator after every operation (the runtime's ``observers``) while enabled. A
rebalance starts when a group leaves Stable or Empty -- a classic group entering
PreparingRebalance (the first JoinGroup of a rebalance), a consumer group's epoch bump -- and ends
when the group is Stable again (every member synced, or at the assignment epoch owning its whole
target) or Empty; an epoch bump that settles within one operation (a consumer group's first member)
is a rebalance of no duration. Times are the broker clock's (virtual with ``clock=manual``). At the end the
ownership of every partition is compared with the one at the previous end: ``moved`` counts
partitions that changed owner or lost it, ``assigned`` partitions that had no owner before.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from broker.control.clock import Target
from broker.coordinator.classic.group import GroupState
from broker.coordinator.embedded import EmbeddedProtocolError, decode_assignment

from .invariants import op_name

#: rebalances kept per group (the oldest are dropped; the counters keep counting)
MAX_KEPT = 100


@dataclass
class Rebalance:
    started_ms: int
    started_by: str
    #: generation (classic) or group epoch (consumer) when it started and ended
    from_epoch: int
    to_epoch: int = -1
    ended_ms: int = -1
    duration_ms: int = -1
    members: int = 0
    moved: int = 0
    assigned: int = 0


@dataclass
class GroupReport:
    group_id: str
    type: str
    rebalances: int = 0
    rebalancing_ms: int = 0
    partitions_moved: int = 0
    current: Rebalance | None = None
    history: list[Rebalance] = field(default_factory=list)
    owners: dict[str, str] = field(default_factory=dict)  # "topic-p" -> member id at the last end
    epoch: int = 0  # generation or group epoch at the last operation (a new group: 0)

    def as_json(self) -> dict:
        out = asdict(self)
        del out["owners"], out["epoch"]
        return out


class RebalanceReport:
    def __init__(self, target: Target):
        self.target = target
        self.enabled = False
        self.groups: dict[str, GroupReport] = {}

    def enable(self) -> None:
        if not self.enabled:
            self.enabled = True
            self.target.groups.runtime.observers.append(self.after_operation)

    def disable(self) -> None:
        if self.enabled:
            self.enabled = False
            observers = self.target.groups.runtime.observers
            if self.after_operation in observers:
                observers.remove(self.after_operation)

    def report(self, group_id: str | None = None) -> dict:
        groups = self.groups if group_id is None else {k: v for k, v in self.groups.items() if k == group_id}
        return {"enabled": self.enabled, "groups": {k: v.as_json() for k, v in sorted(groups.items())}}

    # ------------------------------------------------------------------ watching

    def after_operation(self, op: Any, now: int) -> None:
        st = self.target.groups.state
        name = op_name(op)
        for gid, g in st.groups.items():
            settled = g.state in (GroupState.STABLE, GroupState.EMPTY, GroupState.DEAD)
            self._observe(gid, "classic", g.generation, settled, g.state is GroupState.STABLE, g, now, name)
        for gid, g in st.consumer_groups.items():
            state = g.state.value
            settled = state in ("Stable", "Empty", "Dead")
            self._observe(gid, "consumer", g.group_epoch, settled, state == "Stable", g, now, name)

    def _observe(
        self, gid: str, kind: str, epoch: int, settled: bool, stable: bool, g: Any, now: int, op: str
    ) -> None:
        r = self.groups.get(gid)
        if r is None or r.type != kind:
            r = self.groups[gid] = GroupReport(gid, kind)
        last, r.epoch = r.epoch, epoch
        if r.current is None:
            if settled and epoch == last:
                return
            # leaving Stable/Empty, or an epoch bump settled within one operation
            r.current = Rebalance(now, op, last)
        if not settled:
            return
        cur, r.current = r.current, None
        cur.ended_ms, cur.to_epoch = now, epoch
        cur.duration_ms = now - cur.started_ms
        owners = _owners(kind, g) if stable else {}
        cur.members = len(g.members)
        cur.moved = sum(1 for tp, m in r.owners.items() if owners.get(tp) != m)
        cur.assigned = sum(1 for tp in owners if tp not in r.owners)
        r.owners = owners
        r.rebalances += 1
        r.rebalancing_ms += cur.duration_ms
        r.partitions_moved += cur.moved
        r.history.append(cur)
        del r.history[:-MAX_KEPT]


def _owners(kind: str, g: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    if kind == "classic":
        for mid, m in g.members.items():
            try:
                parts = decode_assignment(m.assignment)
            except EmbeddedProtocolError:
                continue
            for topic, ps in parts.items():
                for p in ps:
                    out[f"{topic}-{p}"] = mid
        return out
    for mid, m in g.members.items():
        for tid, ps in m.progress.assigned.items():
            meta = g.topics.get(tid)
            topic = meta.name if meta is not None else str(tid)
            for p in ps:
                out[f"{topic}-{p}"] = mid
    return out


def reporter(control: Any) -> RebalanceReport:
    """The broker's rebalance report (created disabled on first use)."""
    target = Target.of(control)
    r = getattr(target.groups, "control_rebalance_report", None)  # one per broker, kept with its coordinator
    if r is None:
        r = RebalanceReport(target)
        target.groups.control_rebalance_report = r
    return r
