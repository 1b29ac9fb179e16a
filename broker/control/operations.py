"""The control operations of one broker (:class:`Control`, ``broker.control``): fault rules, live
state, the cluster, clock, trace journal, invariants and rebalance report.

:class:`Control` holds the in-process operations (one per broker, ``broker.control``); the HTTP/JSON
API (http.py, ``--control-port``), the Python client (client.py, :class:`ControlClient`) and the CLI
(cli.py, ``pykbroker ctl``) expose the same operations. Every method runs on the broker's event
loop (``running_broker(...).control`` forwards calls there from the test's thread).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from broker.protocol.errors import KafkaError

from . import invariants, report, state, trace
from .clock import advance, clock_of, set_mode
from .faults import BadRule, FaultInjector, parse_rule

if TYPE_CHECKING:
    from broker.dispatch.services import Services
    from broker.server.pipeline import RequestPipeline

log = logging.getLogger(__name__)

__all__ = ["BadRule", "Control", "NotFound", "Refused"]


class NotFound(KeyError):
    """The named rule, group or connection does not exist (HTTP 404)."""

    def __init__(self, what: str):
        super().__init__(what)
        self.message = what


class Refused(ValueError):
    """A cluster operation the cluster cannot do (HTTP 409): the node is the last one, the target
    is not a live replica, the cluster has one node."""

    def __init__(self, message: str, code: str = ""):
        super().__init__(message)
        self.message = message
        self.code = code


def _node(value: int | str) -> int | str:
    """A target node: an id, or "next"."""
    if value == "next":
        return "next"
    try:
        return int(value)
    except (TypeError, ValueError):
        raise Refused(f'a node is an id or "next", not {value!r}') from None


class Control:
    """The control operations of one broker."""

    def __init__(self, services: Services, pipeline: RequestPipeline, connections: Iterable[Any]):
        """``pipeline``: the broker's request pipeline (its ``faults`` is set while rules exist);
        ``connections``: the live set of client connections."""
        self.services = services
        self.pipeline = pipeline
        self.connections_set = connections
        self.faults = FaultInjector(services.registry, services)
        self.faults.on_change = self._faults_changed

    def _faults_changed(self, any_rule: bool) -> None:
        self.pipeline.faults = self.faults if any_rule else None

    # ------------------------------------------------------------------ fault rules

    def add_rule(self, spec: Mapping[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
        """Add a fault rule (see broker.control.faults; a dict, keyword fields, or both) and return
        it with its id. Raises :class:`BadRule` (nothing added) when it is wrong."""
        merged = dict(spec or {})
        merged.update(fields)
        return self.faults.add(merged).to_json(self.services.registry)

    def add_rules(self, specs: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Add several rules at once: all of them, or none when one is wrong."""
        for spec in specs:
            parse_rule(spec, self.services.registry)
        return [self.add_rule(spec) for spec in specs]

    def rules(self) -> list[dict[str, Any]]:
        """The active rules, in evaluation order, with how often each fired."""
        return [r.to_json(self.services.registry) for r in self.faults.rules]

    def remove_rule(self, rule_id: int) -> dict[str, Any]:
        try:
            return self.faults.remove(int(rule_id)).to_json(self.services.registry)
        except (KeyError, ValueError):
            raise NotFound(f"no fault rule {rule_id}") from None

    def clear_rules(self) -> int:
        """Remove every rule; returns how many there were."""
        return self.faults.clear()

    # ------------------------------------------------------------------ live state

    def groups(self) -> list[dict[str, Any]]:
        return state.groups(self.services)

    def group(self, group_id: str) -> dict[str, Any]:
        g = state.group(self.services, group_id)
        if g is None:
            raise NotFound(f"no group {group_id!r}")
        return g

    def offsets(self, group_id: str) -> dict[str, Any]:
        o = state.offsets(self.services, group_id)
        if o is None:
            raise NotFound(f"no committed offsets for group {group_id!r}")
        return o

    def topics(self) -> list[dict[str, Any]]:
        return state.topics(self.services)

    def connections(self) -> list[dict[str, Any]]:
        return state.connections(list(self.connections_set))

    # ------------------------------------------------------------------ the cluster (broker/nodes.py)

    def cluster(self) -> dict[str, Any]:
        """The nodes (live or down, with their addresses), the controller, per topic each
        partition's leader, epoch, replicas and ISR, and the same of each group coordinator slot
        (``__consumer_offsets`` partition) and transaction coordinator slot (``__transaction_state``
        partition): empty lists on a single node, which coordinates everything."""
        nodes = self.services.nodes
        topics = {}
        for topic in self.services.topics.all():
            parts = []
            for p in range(topic.partitions):
                st = nodes.state(topic, p)
                parts.append(
                    {
                        "partition": p,
                        "leader": st.leader,
                        "epoch": st.leader_epoch,
                        "replicas": st.replicas,
                        "isr": st.isr,
                    }
                )
            topics[topic.name] = parts
        return {
            "nodes": [
                {
                    "id": n,
                    "live": nodes.is_live(n),
                    "addresses": [f"{h}:{p}" for h, p in nodes.addresses.get(n, {}).values()],
                }
                for n in nodes.ids
            ],
            "controller": nodes.controller(),
            "topics": topics,
            "coordinators": _slots(nodes, nodes.slots),
            "txn_coordinators": _slots(nodes, nodes.txn_slots),
        }

    def _cluster_op(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            out = fn(*args)
        except KafkaError as e:
            if e.code.name in ("UNKNOWN_TOPIC_OR_PARTITION",):
                raise NotFound(e.message or what) from None
            raise Refused(f"{what}: {e.message or e.code.name}", e.code.name) from None
        log.info("control: %s -> %s", what, out)
        return out

    def _journal(self, kind: str, details: dict[str, Any], groups: list[str] | None = None) -> None:
        """With tracing on, the operation is a line of the trace journal too."""
        journal = getattr(self.pipeline, "tracer", None)
        if journal is not None:
            journal.event(kind, details, groups)

    def move_leader(self, topic: str, partition: int, to: int | str = "next") -> dict[str, Any]:
        """Make node ``to`` (a live replica, or "next") the partition's leader; its epoch grows."""
        target = _node(to)
        old, new = self._cluster_op(
            f"move leader of {topic}-{partition} to {target}",
            self.services.nodes.move_leader,
            topic,
            int(partition),
            target,
        )
        t = self.services.topics.get(topic)
        return {
            "topic": topic,
            "partition": int(partition),
            "from": old,
            "to": new,
            "epoch": self.services.nodes.leader(t, int(partition))[1],
        }

    def shuffle_leaders(self) -> dict[str, Any]:
        """A random live replica leads each partition (another one where there is a choice)."""
        out = {"moved": self._cluster_op("shuffle every partition leader", self.services.nodes.shuffle)}
        self._journal("shuffle-leaders", out)
        return out

    def move_coordinator(self, group_id: str, to: int | str = "next") -> dict[str, Any]:
        """Move the coordinator of ``group_id`` (its coordinator slot: every group of the slot moves
        with it, as in Kafka). The old node answers NOT_COORDINATOR; the group is loaded again
        from the log on the new one."""
        nodes = self.services.nodes
        target = _node(to)
        old, new = self._cluster_op(
            f"move the coordinator of group {group_id!r} to {target}",
            nodes.move_coordinator,
            group_id,
            target,
        )
        out = {"group_id": group_id, "slot": nodes.slot_of(group_id), "from": old, "to": new}
        self._journal("move-coordinator", out, [group_id])
        return out

    def move_txn_coordinator(self, transactional_id: str, to: int | str = "next") -> dict[str, Any]:
        """Move the transaction coordinator of ``transactional_id`` (its ``__transaction_state``
        slot: every id of the slot moves with it, as in Kafka). The old node answers
        NOT_COORDINATOR; the ids are loaded again from the log on the new one, which completes
        their prepared transactions."""
        nodes = self.services.nodes
        target = _node(to)
        old, new = self._cluster_op(
            f"move the transaction coordinator of {transactional_id!r} to {target}",
            nodes.move_txn_coordinator,
            transactional_id,
            target,
        )
        out = {
            "transactional_id": transactional_id,
            "slot": nodes.txn_slot_of(transactional_id),
            "from": old,
            "to": new,
        }
        self._journal("move-txn-coordinator", out)
        return out

    def node_down(self, node: int) -> dict[str, Any]:
        """Take a node down: its listeners close, its connections drop, its leaderships and
        coordinators move to live replicas."""
        moved = self._cluster_op(f"node {node} down", self.services.nodes.node_down, int(node))
        out = {"node": int(node), "live": False, "leaders_moved": moved}
        self._journal("node-down", out)
        return out

    def node_up(self, node: int) -> dict[str, Any]:
        """Bring a node back: it listens again on its ports; partitions left without a leader that
        it replicates get it as leader."""
        elected = self._cluster_op(f"node {node} up", self.services.nodes.node_up, int(node))
        out = {"node": int(node), "live": True, "leaders_elected": elected}
        self._journal("node-up", out)
        return out

    def rolling_restart(self, pause_ms: int = 1000) -> Any:
        """Take each node down and bring it back, one after the other, ``pause_ms`` down each and
        between them (as a rolling restart of a real cluster). Returns at once: an awaitable of
        the nodes restarted (the HTTP route waits for it)."""
        if pause_ms < 0:
            raise Refused("pause_ms must be >= 0")
        if not self.services.nodes.multi:
            raise Refused("a rolling restart needs more than one node (cluster.nodes)")
        self._journal("rolling-restart", {"pause_ms": pause_ms})
        return asyncio.ensure_future(self._rolling_restart(pause_ms))

    async def _rolling_restart(self, pause_ms: int) -> list[int]:
        done = []
        for node in list(self.services.nodes.ids):
            self.node_down(node)
            await asyncio.sleep(pause_ms / 1000)
            self.node_up(node)
            done.append(node)
            await asyncio.sleep(pause_ms / 1000)
        return done

    # ------------------------------------------------------------------ virtual clock (clock.py)

    def clock(self) -> dict[str, Any]:
        """The broker clock: mode, now, pending timers."""
        return clock_of(self).describe()

    def set_clock_mode(self, mode: str) -> dict[str, Any]:
        """``"manual"`` (moves only on :meth:`advance`) or ``"system"``."""
        return set_mode(clock_of(self), {"mode": mode})

    def advance(self, ms: int | str) -> dict[str, Any]:
        """Move the manual clock ``ms`` milliseconds (or a duration such as ``"46s"``) ahead, firing
        every timer that falls due, in deadline order; returns the clock and what fired."""
        return advance(clock_of(self), {"ms": ms} if isinstance(ms, int) else {"duration": ms})

    # ------------------------------------------------------------------ trace journal (trace.py)

    def start_trace(self, path: str, **options: Any) -> dict[str, Any]:
        """Record every request and response in ``path`` (options: max_bytes, backups, groups, apis,
        clients)."""
        return trace.start(self, path, **options).describe()

    def stop_trace(self) -> dict[str, Any] | None:
        return trace.stop(self)

    # ------------------------------------------------------------------ invariants, rebalances

    def check_invariants(self, enabled: bool = True) -> dict[str, Any]:
        """Turn the invariant checker on (or off); returns its state and violations so far."""
        c = invariants.checker(self)
        c.enable() if enabled else c.disable()
        return c.describe()

    def violations(self) -> list[dict[str, Any]]:
        return invariants.checker(self).violations()

    def report_rebalances(self, enabled: bool = True) -> dict[str, Any]:
        r = report.reporter(self)
        r.enable() if enabled else r.disable()
        return r.report()

    def rebalances(self, group_id: str | None = None) -> dict[str, Any]:
        """Per group: rebalances, time rebalancing, partitions moved per rebalance."""
        return report.reporter(self).report(group_id)


def _slots(nodes: Any, slots: Any) -> list[dict[str, Any]]:
    """Each coordinator slot's leader, epoch, replicas and ISR ([] on a single node: no slots)."""
    if slots is None:
        return []
    out = []
    for p in range(slots.partitions):
        st = nodes.state(slots, p)
        out.append(
            {"slot": p, "leader": st.leader, "epoch": st.leader_epoch, "replicas": st.replicas, "isr": st.isr}
        )
    return out
