"""The group coordinator: classic groups (JoinGroup/SyncGroup/Heartbeat/LeaveGroup), KIP-848
consumer groups (ConsumerGroupHeartbeat), online migration between the two, committed offsets and
group administration, persisted in the internal ``__consumer_offsets`` topic.

``GroupCoordinator`` is the facade the dispatch handlers call (through ``Services.groups``); each call
becomes one operation of the serial runtime (runtime.py: records -> log -> replay -> responses) over
the state (state.py). It is built from the broker's config and its topic administration
(broker/topic_admin.py, which creates ``__consumer_offsets`` and tells it about deleted topics), never
from the Broker itself. Layers,
top down (enforced by import-linter, pyproject.toml):

- groups.py, the router: decides once per request whether the group is classic, consumer, or a
  consumer group with classic members, and calls that family's operations; restores timers at
  start-up;
- migration.py (upgrade/downgrade conversions), offsets.py, admin.py;
- state.py: groups, offsets, services, and ``replay``;
- classic/ (the JoinGroup/SyncGroup protocol, rebalanced in memory as Kafka does) and consumer/
  (consumer groups, computed on copies and changed only by replay; classic_members.py);
- result.py and timers.py (Result, Clock/Timers and every timer key), records.py.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.generated.heartbeat import RESPONSE_ENCODERS as HB_ENCODERS
from broker.protocol.generated.heartbeat import HeartbeatResponse

from . import admin, groups, offsets
from .consumer import describe as cg_describe
from .group_configs import GroupConfigStore
from .journal import RebalanceJournal
from .layout import ensure_kafka_layout_from
from .loader import load as load_log
from .result import Result
from .runtime import CoordinatorRuntime, LoopTimers, SystemClock
from .state import ConsumerGroupConfig, GroupConfig
from .timers import ManualClock, ManualTimers

if TYPE_CHECKING:
    from broker.config import Config
    from broker.topic_admin import TopicAdmin

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"


class TopicLookup:
    """What offset operations need to know about topics, from the broker's topic registry."""

    def __init__(self, registry: Any):
        self.registry = registry

    def exists(self, name: str, partition: int) -> bool:
        t = self.registry.get(name)
        return t is not None and 0 <= partition < t.partitions

    def name_for_id(self, topic_id: uuid.UUID) -> str | None:
        t = self.registry.by_id(topic_id)
        return t.name if t is not None else None

    def id_for_name(self, name: str) -> uuid.UUID | None:
        t = self.registry.get(name)
        return t.topic_id if t is not None else None


class _LazyLog:
    """The coordinator partition, created on first write as Kafka creates __consumer_offsets."""

    def __init__(self, admin: TopicAdmin):
        self.admin = admin

    def get(self) -> Any:
        logs = self.admin.logs
        plog = logs.get(OFFSETS_TOPIC, 0)
        if plog is None:
            segment_bytes = str(self.admin.config["offsets.topic.segment.bytes"])
            configs = {"cleanup.policy": "compact", "segment.bytes": segment_bytes}
            self.admin.create_topic(OFFSETS_TOPIC, 1, configs, internal=True)
            plog = logs.get(OFFSETS_TOPIC, 0)
        logs.cleaner.register(plog)  # key compaction bounds the replay at start-up
        return plog


class GroupCoordinator:
    def __init__(self, config: Config, admin: TopicAdmin, clock: Any = None):
        """``admin``: topic administration (the registry and the logs behind it): the coordinator
        creates its internal topic through it and forgets a deleted topic's offsets when told."""
        self.logs = admin.logs
        self.data_dir = config.data_dir
        self.topics = TopicLookup(admin.topics)
        self.configs = GroupConfigStore(config.data_dir, config)
        admin.on_deleted.append(self.on_topic_deleted)
        clock = clock or SystemClock()
        self.timers = LoopTimers(clock, lambda op: self.runtime.run_detached(op))
        #: when each classic rebalance began (journal.py; read by the Spark timeline job)
        self.journal = RebalanceJournal(config.data_dir)
        self.state = groups.new_state(
            GroupConfig.from_config(config),
            self.timers,
            ConsumerGroupConfig.from_config(config),
            topics=self.topics,
            group_configs=self.configs,
            journal=self.journal,
        )
        self._log = _LazyLog(admin)
        self._kafka_layout_from = 0
        self._heartbeat_ok: dict[int, bytes] = {}
        self.runtime = CoordinatorRuntime(self.state, admin.logs, None, clock)

    # ------------------------------------------------------------------ lifecycle

    def load(self) -> None:
        """Replay the coordinator log (if the topic exists) and restart the members' timers."""
        plog = self.logs.get(OFFSETS_TOPIC, 0)
        # before any record can be appended: from where the log has Kafka's layouts (layout.py)
        kafka_layout_from = ensure_kafka_layout_from(
            self.data_dir, None if plog is None else plog.log_end_offset
        )
        self._kafka_layout_from = kafka_layout_from
        if plog is None:
            groups.restore_timers(self.state, self.runtime.clock.now_ms())
            return
        self.runtime.plog = plog
        self.logs.cleaner.register(plog)
        start = time.monotonic()
        n = self.runtime.load(kafka_layout_from)
        groups.restore_timers(self.state, self.runtime.clock.now_ms())
        log.info(
            "coordinator loaded %d records (%d groups, %d with offsets) in %.0f ms",
            n,
            len(self.state.groups),
            len(self.state.offsets),
            (time.monotonic() - start) * 1000,
        )

    def close(self) -> None:
        self.runtime.drain()
        self.timers.cancel_all()
        self.journal.close()

    def reload_groups(self, owns: Callable[[str], bool]) -> list[str]:
        """A coordinator failover of the groups ``owns`` selects (those whose coordinator moved on a
        multi-node cluster, broker/nodes.py), as Kafka unloads a coordinator partition on the old
        leader and loads it on the new one: their parked JoinGroups and SyncGroups are answered
        NOT_COORDINATOR, their timers cancelled and their in-memory state dropped, then they are
        loaded again from the coordinator log (the persisted generation, members, assignments,
        member epochs and offsets; a classic rebalance in progress is lost, as in Kafka) and their
        members get fresh session timers. Returns the group ids reloaded."""
        self.runtime.drain()  # the commits of this turn are in the log and the state first
        st = self.state
        ids = {g for g in (*st.groups, *st.consumer_groups, *st.offsets) if owns(g)}
        moved = KafkaError(ErrorCode.NOT_COORDINATOR, "the group's coordinator moved")
        for gid in ids:
            group = st.groups.get(gid)
            if group is None:
                continue
            for member in group.members.values():
                for parked in (member.join, member.sync):
                    if parked is not None and not parked[0].done():
                        parked[0].set_exception(moved)
                member.join = member.sync = None
        for key in list(self.timers.deadlines):
            rest = key.split(":", 1)[-1]
            if rest in ids or rest.rsplit(":", 1)[0] in ids:
                self.timers.cancel(key)
        for gid in ids:
            st.groups.pop(gid, None)
            st.consumer_groups.pop(gid, None)
            st.offsets.pop(gid, None)
        plog = self.runtime.plog
        if plog is None:
            return sorted(ids)
        # the records of operations still waiting for their group commit are part of the groups'
        # state already (their answers follow): the reload reads them too
        plog.mark_flushed(*plog.flush_target(), durable=False)
        fresh = groups.new_state(
            st.config,
            ManualTimers(ManualClock()),  # replay arms nothing; the members' timers come below
            st.consumer_config,
            topics=self.topics,
            group_configs=self.configs,
        )
        load_log(plog, fresh, kafka_layout_from=self._kafka_layout_from)
        loaded = set()
        for gid, g in fresh.groups.items():
            if owns(gid):
                st.groups[gid] = g
                loaded.add(gid)
        for gid, cg in fresh.consumer_groups.items():
            if owns(gid):
                st.consumer_groups[gid] = cg
                loaded.add(gid)
        for gid, o in fresh.offsets.items():
            if owns(gid):
                st.offsets[gid] = o
                loaded.add(gid)
        groups.restore_timers(st, self.runtime.clock.now_ms(), only=loaded)
        log.info("coordinator: %d group(s) unloaded and loaded again from the log", len(ids | loaded))
        return sorted(ids | loaded)

    # ------------------------------------------------------------------ operations

    def ensure_log(self) -> None:
        """Create the coordinator's log now (as Metadata for __consumer_offsets does in Kafka)."""
        if self.runtime.plog is None:
            self.runtime.plog = self._log.get()

    def _run(self, op: Any) -> Any:
        self.ensure_log()
        return self.runtime.run(op)

    def join_group(self, ctx: Any, req: Any) -> Any:
        waiter = asyncio.get_running_loop().create_future()
        host = ctx.client.peer.rsplit(":", 1)[0]
        client_id = ctx.client_id or ""
        return self._run(
            lambda now: groups.join_group(
                self.state, req, ctx.api_version, client_id, "/" + host, waiter, now
            )
        )

    def sync_group(self, ctx: Any, req: Any) -> Any:
        waiter = asyncio.get_running_loop().create_future()
        return self._run(lambda now: groups.sync_group(self.state, req, ctx.api_version, waiter, now))

    def heartbeat(self, ctx: Any, req: Any) -> Any:
        """Heartbeats write no records and complete nothing, so they skip the runtime; the common
        case (``groups.heartbeat_fast``) answers a pre-encoded body. Both give exactly what
        ``groups.heartbeat`` would (tests/coordinator/test_heartbeat_parity.py)."""
        version = ctx.api_version
        now = self.runtime.clock.now_ms()
        if groups.heartbeat_fast(self.state, req, version, now):
            body = self._heartbeat_ok.get(version)
            if body is None:
                body = self._heartbeat_ok[version] = HB_ENCODERS[version](HeartbeatResponse(error_code=0))
            return body
        return groups.heartbeat(self.state, req, version, now).response

    def leave_group(self, ctx: Any, req: Any) -> Any:
        return self._run(lambda now: groups.leave_group(self.state, req, ctx.api_version, now))

    def commit_offsets(self, ctx: Any, req: Any, encoded: bool = False) -> Any:
        """A commit's records may share a batch with the other commits of this event-loop turn
        (runtime.run_lingering): a commit reads no committed offset, and its records change only
        committed offsets when its group exists already (replay makes an unknown one). With
        ``encoded``, an answer committing every partition is the encoded response body."""
        self.ensure_log()
        st = self.state
        gid = req.group_id
        version = ctx.api_version
        return self.runtime.run_lingering(
            lambda now: offsets.commit(st, req, version, now, encoded),
            gid in st.groups or gid in st.consumer_groups,
        )

    def txn_offset_commit(self, ctx: Any, req: Any) -> Any:
        return self._run(lambda now: offsets.txn_commit(self.state, req, ctx.api_version, now))

    def txn_marker(self, producer_id: int, epoch: int, commit: bool) -> Any:
        """Write a transaction's marker to ``__consumer_offsets`` (its pending offsets become
        committed or are dropped); None, or an awaitable that completes once it is durable."""
        return self._run(lambda now: offsets.txn_marker(self.state, producer_id, epoch, commit))

    def fetch_offsets(self, ctx: Any, req: Any) -> Any:
        self.runtime.drain()  # the commits of this turn so far are read back
        return offsets.fetch(self.state, req, ctx.api_version)

    def delete_offsets(self, ctx: Any, req: Any) -> Any:
        return self._run(lambda now: offsets.delete(self.state, req))

    def on_topic_deleted(self, topic: str) -> None:
        """Drop every group's committed offsets of a deleted topic (tombstones), as Kafka does."""
        self.runtime.drain()
        if self.runtime.plog is None or not any(topic in o.by_topic for o in self.state.offsets.values()):
            return
        self.runtime.run_detached(lambda now: offsets.forget_topic(self.state, topic))

    def consumer_group_heartbeat(self, ctx: Any, req: Any) -> Any:
        host = "/" + ctx.client.peer.rsplit(":", 1)[0]
        return self._run(
            lambda now: groups.consumer_group_heartbeat(
                self.state, req, ctx.api_version, ctx.client_id or "", host, now
            )
        )

    def consumer_group_describe(self, ctx: Any, req: Any, authorized_ops: int) -> Any:
        return cg_describe.describe(self.state, req, ctx.api_version, authorized_ops)

    def describe_groups(self, ctx: Any, req: Any, authorized_ops: int) -> Any:
        return admin.describe(self.state, req, ctx.api_version, authorized_ops)

    def list_groups(self, ctx: Any, req: Any) -> Any:
        return admin.list_groups(self.state, req, ctx.api_version)

    def delete_groups(self, ctx: Any, req: Any) -> Any:
        return self._run(lambda now: admin.delete_groups(self.state, req))


__all__ = ["GroupCoordinator", "OFFSETS_TOPIC", "Result", "ErrorCode"]
