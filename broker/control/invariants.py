"""An invariant checker for the group coordinator and the logs, run after every coordinator operation
while it is enabled (the runtime's ``observers``; broker/coordinator/runtime.py).

Checked, per group (a classic group's assignments once per Stable generation; a consumer group's
members at every operation -- a pass over its members' partitions):

- ``exclusive-ownership``: no partition owned by two members at once -- classic groups: within the
  assignment of one generation (checked when the group is Stable, every member synced); consumer
  groups: the members' current assignments plus the partitions they are still revoking;
- ``member-epoch``: no member epoch above its group epoch, nor an assignment epoch above it;
- ``monotonic``: a group's generation (classic) or group and assignment epochs (consumer) never go
  backwards (while the group exists; a deleted group starts again);
- ``high-watermark``: every partition's high watermark at or below its log end (the coordinator's
  partition after each operation; every partition on :meth:`InvariantChecker.check_logs`).

A violation is recorded with the operation that caused it (its name, the clock's time) and the
details; :meth:`InvariantChecker.violations` reads them, ``GET /invariants`` serves them, and
``broker.testing.BrokerThread(invariants=True)`` fails the test that caused one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from broker.control.clock import Target
from broker.coordinator.classic.group import GroupState
from broker.coordinator.embedded import EmbeddedProtocolError, decode_assignment

log = logging.getLogger(__name__)

#: violations kept (the oldest are dropped beyond this; ``dropped`` counts them)
MAX_VIOLATIONS = 1000


def op_name(op: Any) -> str:
    """A readable name of a coordinator operation (its function, without the closure noise)."""
    name = getattr(op, "__qualname__", None) or repr(op)
    return name.replace(".<locals>.<lambda>", "").replace(".<locals>.", ".")


class InvariantChecker:
    """Attach to a broker with :meth:`enable`; read :meth:`violations`."""

    def __init__(self, target: Target):
        self.target = target
        self.enabled = False
        self._violations: list[dict] = []
        self.dropped = 0
        self.checks = 0
        self._classic_checked: dict[str, int] = {}  # group -> generation whose assignment was checked
        self._classic_gen: dict[str, int] = {}
        self._consumer_epochs: dict[str, tuple[int, int]] = {}  # group -> (group, assignment epoch)

    # ------------------------------------------------------------------ switching

    def enable(self) -> None:
        if not self.enabled:
            self.enabled = True
            self.target.groups.runtime.observers.append(self.after_operation)
            self.check_logs("enable")

    def disable(self) -> None:
        if self.enabled:
            self.enabled = False
            observers = self.target.groups.runtime.observers
            if self.after_operation in observers:
                observers.remove(self.after_operation)

    # ------------------------------------------------------------------ results

    def violations(self) -> list[dict]:
        return list(self._violations)

    def clear(self) -> None:
        self._violations.clear()
        self.dropped = 0

    def describe(self) -> dict:
        return {
            "enabled": self.enabled,
            "checks": self.checks,
            "violations": self.violations(),
            "dropped": self.dropped,
        }

    def _violate(self, invariant: str, op: str, now: int, group: str | None, detail: str) -> None:
        v = {"invariant": invariant, "operation": op, "now_ms": now, "group": group, "detail": detail}
        log.error("invariant %s violated by %s (group %s): %s", invariant, op, group, detail)
        self._violations.append(v)
        if len(self._violations) > MAX_VIOLATIONS:
            del self._violations[0]
            self.dropped += 1

    # ------------------------------------------------------------------ checks

    def after_operation(self, op: Callable[[int], Any], now: int) -> None:
        self.checks += 1
        name = op_name(op)
        st = self.target.groups.state
        for gid in [g for g in self._classic_gen if g not in st.groups]:
            self._classic_gen.pop(gid, None)
            self._classic_checked.pop(gid, None)
        for gid in [g for g in self._consumer_epochs if g not in st.consumer_groups]:
            self._consumer_epochs.pop(gid, None)
        for gid, group in st.groups.items():
            self._check_classic(gid, group, name, now)
        for gid, group in st.consumer_groups.items():
            self._check_consumer(gid, group, name, now)
        plog = self.target.groups.runtime.plog
        if plog is not None:
            self._check_log("__consumer_offsets", 0, plog, name, now)

    def _check_classic(self, gid: str, group: Any, op: str, now: int) -> None:
        gen = group.generation
        last = self._classic_gen.get(gid)
        if last is not None and gen < last:
            self._violate("monotonic", op, now, gid, f"generation went back from {last} to {gen}")
        self._classic_gen[gid] = gen
        if group.state is not GroupState.STABLE or group.protocol_type != "consumer":
            return
        if self._classic_checked.get(gid) == gen:
            return
        self._classic_checked[gid] = gen
        owners: dict[tuple[str, int], str] = {}
        for mid, member in group.members.items():
            try:
                parts = decode_assignment(member.assignment)
            except EmbeddedProtocolError:
                continue  # not the consumer protocol's assignment: nothing to check
            for topic, ps in parts.items():
                for p in ps:
                    other = owners.setdefault((topic, p), mid)
                    if other != mid:
                        self._violate(
                            "exclusive-ownership",
                            op,
                            now,
                            gid,
                            f"{topic}-{p} assigned to {other} and {mid} in generation {gen}",
                        )

    def _check_consumer(self, gid: str, group: Any, op: str, now: int) -> None:
        epochs = (group.group_epoch, group.assignment_epoch)
        last = self._consumer_epochs.get(gid)
        if last is not None and (epochs[0] < last[0] or epochs[1] < last[1]):
            self._violate(
                "monotonic", op, now, gid, f"group/assignment epoch went back from {last} to {epochs}"
            )
        self._consumer_epochs[gid] = epochs
        if group.assignment_epoch > group.group_epoch:
            self._violate(
                "member-epoch",
                op,
                now,
                gid,
                f"assignment epoch {group.assignment_epoch} above group epoch {group.group_epoch}",
            )
        owners: dict[tuple[Any, int], str] = {}
        for mid, m in group.members.items():
            if m.member_epoch > group.group_epoch:
                self._violate(
                    "member-epoch",
                    op,
                    now,
                    gid,
                    f"member {mid} at epoch {m.member_epoch} above group epoch {group.group_epoch}",
                )
            for held in (m.progress.assigned, m.progress.pending_revocation):
                for tid, ps in held.items():
                    for p in ps:
                        other = owners.setdefault((tid, p), mid)
                        if other != mid:
                            meta = group.topics.get(tid)
                            topic = meta.name if meta is not None else str(tid)
                            self._violate(
                                "exclusive-ownership",
                                op,
                                now,
                                gid,
                                f"{topic}-{p} owned by {other} and {mid} at group epoch {group.group_epoch}",
                            )

    def _check_log(self, topic: str, partition: int, plog: Any, op: str, now: int) -> None:
        if plog.high_watermark > plog.log_end_offset:
            self._violate(
                "high-watermark",
                op,
                now,
                None,
                f"{topic}-{partition}: high watermark {plog.high_watermark} above log end {plog.log_end_offset}",
            )

    def check_logs(self, op: str = "check_logs") -> None:
        """Check every partition's high watermark against its log end now."""
        now = self.target.clock.now_ms()
        for (topic, partition), plog in list(self.target.logs.logs.items()):
            self._check_log(topic, partition, plog, op, now)


def checker(control: Any) -> InvariantChecker:
    """The invariant checker of a broker (the ``Broker``, or a control object: see ``Target``),
    created disabled on first use."""
    target = Target.of(control)
    c = getattr(target.groups, "control_invariants", None)  # one per broker, kept with its coordinator
    if c is None:
        c = InvariantChecker(target)
        target.groups.control_invariants = c
    return c
