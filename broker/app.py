"""The composition root: a ``Broker`` wires config, cluster metadata, the API registry and the listener.

Usage::

    broker = Broker(Config({"port": 0, "log.dirs": "/tmp/x"}))
    await broker.start()  # broker.port is the bound port
    await broker.stop()

Start-up order: data directory identity, topic registry, API registry, then the listener.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import concurrent.futures
import logging
import os
import socket
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

import broker.control as control_plane
from broker import features
from broker.clock import BrokerClock
from broker.cluster import ClusterMeta, TopicRegistry
from broker.config import Config, Endpoint
from broker.datadir import DataDirLock
from broker.dispatch import build_registry
from broker.dispatch.fetch_session import FetchSessionCache
from broker.dispatch.services import Services
from broker.log.manager import LogManager, remove_tree
from broker.log.segment import SYSTEM_OPS, FileOps
from broker.nodes import Nodes
from broker.quotas import ClientQuotas
from broker.security.acl_store import AclStore
from broker.security.authorizer import Authorizer, parse_super_users
from broker.server import Listener
from broker.server.pipeline import RequestPipeline
from broker.topic_admin import TopicAdmin

if TYPE_CHECKING:
    from broker.control import Control
    from broker.control.http import ControlServer
    from broker.coordinator import GroupCoordinator
    from broker.txn import TransactionCoordinator

log = logging.getLogger(__name__)

#: Seconds a graceful shutdown waits for the requests already received to be answered.
SHUTDOWN_GRACE = 5.0


def redpanda_cluster_id(cluster_id: str) -> str:
    """The cluster id as Redpanda's Metadata gives it: ``redpanda.`` and its cluster UUID (ours is
    Kafka's base64 form of one; any other id is kept as it is after the prefix)."""
    try:
        raw = base64.urlsafe_b64decode(cluster_id + "==")
    except (binascii.Error, ValueError):
        raw = b""
    return f"redpanda.{uuid.UUID(bytes=raw)}" if len(raw) == 16 else f"redpanda.{cluster_id}"


def node_endpoints(endpoints: list[Endpoint], index: int) -> list[Endpoint]:
    """The listeners of the node at ``index`` (0: the first): each port, and each advertised port
    that is set, ``index`` higher (port 0 stays 0: every node gets its own free port)."""
    return [
        ep._replace(
            port=ep.port + index if ep.port else 0,
            advertised_port=ep.advertised_port + index if ep.advertised_port else 0,
        )
        for ep in endpoints
    ]


async def _call(fn: Callable[[], None]) -> None:
    fn()


class Broker:
    def __init__(
        self, config: Config, recover: bool = False, file_ops: FileOps = SYSTEM_OPS, listen: bool = True
    ):
        """Open the listeners, lock the data directory, then load it (topics, logs, groups). The
        listeners come first so that a broker that cannot listen creates nothing on disk; they accept
        connections only from :meth:`start`. Raises ListenError, DataDirLocked or LogCorruption
        (and releases what it took). ``recover`` (``serve --recover``): a log damaged where start-up
        would refuse is truncated at the first bad batch instead, and what was dropped is logged.
        ``file_ops``: the system calls the logs write and sync through (tests inject disk faults).
        ``listen=False``: no socket at all (requests go through ``RequestPipeline(registry, services)``
        by hand: in-process handler tests); :meth:`start` binds then."""
        self.config = config
        self.node_id: int = config["node.id"]
        count = config["cluster.nodes"]
        endpoints = config.endpoints()
        if count == 1:
            self.listeners = [Listener(config, endpoints)]
        else:  # one listener set per node, ports offset by the node's index, one connection set
            shared: set = set()
            self.listeners = [
                Listener(config, node_endpoints(endpoints, k), self.node_id + k, shared) for k in range(count)
            ]
        #: the first node's listeners (all of a single-node broker's)
        self.listener = self.listeners[0]
        if listen:
            try:
                for listener in self.listeners:
                    listener.bind()
            except OSError:
                for listener in self.listeners:
                    listener.close()
                raise
        self.port: int = self.listener.port
        self.lock = DataDirLock(config.data_dir)
        try:
            self.lock.acquire()
            self._load(config, recover, file_ops)
        except BaseException:
            self.lock.release()
            for listener in self.listeners:
                listener.close()
            raise
        self.registry = build_registry(
            config["kafka.version"] or None, config["persona"] or None, features.transaction_version(config)
        )
        if config["persona"] == "redpanda":
            self.cluster_id = redpanda_cluster_id(self.cluster_id)
        self.rack: str | None = config["broker.rack"] or None
        #: listener name -> (host, port) given to clients connected to it
        self.advertised: dict[str, tuple[str, int]] = {}
        #: what request handlers may use (they never see this object)
        self.services = Services(
            node_id=self.node_id,
            cluster_id=self.cluster_id,
            rack=self.rack,
            config=config,
            topics=self.topics,
            logs=self.logs,
            admin=self.admin,
            load_groups=lambda: self.groups,
            registry=self.registry,
            advertised_address=self.advertised_address,
            quotas=self.quotas,
            scram=self.scram,
            nodes=self.nodes,
            authorizer=self.authorizer,
            acls=self.acls,
            load_txns=lambda: self.txns,
            fetch_sessions=FetchSessionCache(
                config["max.incremental.fetch.session.cache.slots"], self.logs.now_ms
            ),
        )
        self.pipeline = RequestPipeline(self.registry, self.services)
        self._control: Control | None = None  # see the control property
        self.control_server: ControlServer | None = None  # the control API's HTTP server
        self.control_port: int | None = None
        self._stopped = asyncio.Event()
        #: nodes whose listeners a node_down closed
        self._down: set[int] = set()

    def _load(self, config: Config, recover: bool, file_ops: FileOps) -> None:
        data_dir = config.data_dir
        #: every broker-side deadline runs on it (broker/clock.py; config ``clock``)
        self.clock = BrokerClock(config["clock"])
        self.cluster = ClusterMeta(data_dir, self.node_id)
        self.cluster_id = self.cluster.cluster_id
        self.topics = TopicRegistry(data_dir)
        #: node ids, live nodes, partition leaders and group coordinators (broker/nodes.py)
        self.nodes = Nodes(
            self.node_id,
            config["cluster.nodes"],
            self.topics,
            data_dir,
            config["offsets.topic.num.partitions"],
            config["offsets.topic.replication.factor"],
            txn_slot_count=config["transaction.state.log.num.partitions"],
            txn_slot_rf=config["transaction.state.log.replication.factor"],
        )
        self.nodes.on_node_down.append(self._node_down)
        self.nodes.on_node_up.append(self._node_up)
        for name in os.listdir(data_dir):  # (one listing: glob's matching costs ~10 us a partition)
            if name.endswith("-delete"):  # a topic deletion interrupted by a crash
                remove_tree(data_dir / name)
        self.logs = LogManager(data_dir, config, file_ops, recover=recover, time_ms=self.clock.now_ms)
        self.logs.topic_id_of = lambda name: t.topic_id if (t := self.topics.get(name)) else None
        self.clock.on_advance.append(self.logs.apply_retention)
        self.clock.on_advance.append(self.logs.expire_producers)
        for topic in self.topics.all():
            self.logs.open_topic(topic.name, topic.partitions, topic.configs)
        self.logs.started()  # --recover and deferred opening: only what was on disk at start-up
        self.admin = TopicAdmin(config, self.topics, self.logs, self.nodes)
        # topic administration for callers holding the broker (tests, benches, the control plane)
        self.create_topic = self.admin.create_topic
        self.delete_topic = self.admin.delete_topic
        self.create_partitions = self.admin.create_partitions
        self.alter_topic_configs = self.admin.alter_topic_configs
        # The coordinators (see the ``groups`` and ``txns`` properties): loaded here when the data
        # directory holds their logs (their groups, offsets and transactions are restored, members'
        # sessions and transactions' timeouts armed, and in-doubt transactions completed at once) or
        # on a simulated cluster; in a data directory without them (a fresh one) built on first use.
        self._groups: GroupCoordinator | None = None
        self._txns: TransactionCoordinator | None = None
        #: the event loop the broker runs on, once known (the coordinators' timers are armed on it)
        self._loop: asyncio.AbstractEventLoop | None = asyncio._get_running_loop()
        if self.nodes.multi or any(topic.internal for topic in self.topics.all()):
            self.txns  # noqa: B018 (loads the group coordinator, then the transaction coordinator)
        self.nodes.on_coordinators_moved.append(self._coordinators_moved)
        self.nodes.on_leader_changed.append(self._leader_changed)
        self._stamp_leader_epochs()
        self.nodes.on_txn_coordinators_moved.append(self._txn_coordinators_moved)
        self.quotas = ClientQuotas(data_dir, config["quota.window.num"], config["quota.window.size.seconds"])
        #: SCRAM credentials: sasl.users, then those set through AlterUserScramCredentials (data dir)
        self.scram = self.listener.scram
        self.scram.open(data_dir)
        #: ACL authorization (authorizer.class.name); None: off, everything allowed
        self.authorizer: Authorizer | None = None
        self.acls: AclStore | None = None
        if config["authorizer.class.name"]:
            self.authorizer = Authorizer(
                parse_super_users(config["super.users"]), config["allow.everyone.if.no.acl.found"]
            )
            self.acls = AclStore(data_dir, self.authorizer)

    @property
    def groups(self) -> GroupCoordinator:
        """The group coordinator (groups, offsets, group configs), built and loaded on first use
        when start-up did not load it: what a fresh data directory's broker never needs (a producer's,
        or a test that creates topics) costs neither its imports (about a fifth of start-up's) nor
        its construction; the first request that needs it pays them once (tens of ms)."""
        if self._groups is None:
            self._on_loop(self._load_groups)
        assert self._groups is not None
        return self._groups

    def _load_groups(self) -> None:
        # imported here, not at the top: the coordinator's modules are not imported at all until a
        # group, an offset or a group config is first used (see ``groups``)
        from broker.coordinator import GroupCoordinator  # noqa: PLC0415

        if self._groups is None:
            groups = GroupCoordinator(self.config, self.admin, self.clock)
            groups.load()
            self._groups = groups

    @property
    def txns(self) -> TransactionCoordinator:
        """The transaction coordinator (transactional ids, transactions, markers), built and loaded
        on first use like :attr:`groups` (with it: transactional offset commits go through it)."""
        if self._txns is None:
            self._on_loop(self._load_txns)
        assert self._txns is not None
        return self._txns

    def _load_txns(self) -> None:
        from broker.txn import TransactionCoordinator  # noqa: PLC0415 (see _load_groups)

        if self._txns is None:
            txns = TransactionCoordinator(self.config, self.admin, self.clock, self.groups)
            if self.nodes.multi:  # transactional ids are coordinated by their slot's leader
                txns.multi = True
                txns.coordinator_of = self.nodes.txn_coordinator_and_epoch
                txns.leader_of = self._partition_leader
            txns.load()
            self._txns = txns

    def _on_loop(self, load: Callable[[], None]) -> None:
        """Run ``load`` (a coordinator's construction and load, which arm its timers on the
        current event loop) on the broker's event loop: here; on the loop's own thread, waited for,
        when first used from another thread while the broker runs (a test peeking at its groups);
        or run on it now when it is not running."""
        loop = self._loop
        if loop is None or loop.is_closed() or asyncio._get_running_loop() is loop:
            load()
            return
        if not loop.is_running():  # (an in-process test broker between requests: its loop, here)
            loop.run_until_complete(_call(load))
            return
        done: concurrent.futures.Future[None] = concurrent.futures.Future()

        def run() -> None:
            try:
                load()
            except BaseException as e:  # handed to the waiting thread
                done.set_exception(e)
            else:
                done.set_result(None)

        loop.call_soon_threadsafe(run)
        done.result()

    @property
    def control(self) -> Control:
        """The test control plane (fault rules, live state; broker.control), created on first use;
        served over HTTP when control.port is set. A broker nobody controls never loads it."""
        if self._control is None:
            self._control = control_plane.Control(self.services, self.pipeline, self.listener.connections)
        return self._control

    @property
    def connections(self) -> set:
        """Every open client connection (the listener keeps them)."""
        return self.listener.connections

    def advertised_address(self, listener: str) -> tuple[str, int]:
        """The (host, port) clients connected to ``listener`` are told to use."""
        return self.advertised.get(listener) or next(iter(self.advertised.values()))

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self.config["control.port"] >= 0:  # first: a control port in use fails with nothing started
            # aiohttp (a fifth of the start-up imports) only when the control API is asked for
            from broker.control.http import ControlServer  # noqa: PLC0415

            self.control_server = ControlServer(
                self.control, self.config["control.host"], self.config["control.port"]
            )
            self.control_port = await self.control_server.start()
        self.logs.start()
        for listener in self.listeners:
            await listener.start(self.pipeline)
        self.port = self.listener.port
        if self.config["trace.file"]:
            control_plane.trace.start_from_config(self, self.config)
        for k, listener in enumerate(self.listeners):
            node = self.node_id + k
            addresses = self.nodes.addresses.setdefault(node, {})
            for b in listener.bound:
                ep = b.endpoint
                host = ep.advertised_host
                if host in ("0.0.0.0", "::", ""):
                    host = socket.getfqdn()
                addresses[ep.name] = (host, ep.advertised_port or b.port)
                log.info(
                    "broker %d of cluster %s listening on %s:%d (listener %s, advertised as %s:%d), data in %s",
                    node,
                    self.cluster_id,
                    ep.host or "0.0.0.0",
                    b.port,
                    ep.name,
                    *addresses[ep.name],
                    self.config.data_dir,
                )
        self.advertised.update(self.nodes.addresses[self.node_id])

    def addresses(self) -> list[tuple[str, int]]:
        """(host, port) of every listener of every node, node by node (the ready file's lines)."""
        return [a for listener in self.listeners for a in listener.addresses()]

    def _coordinators_moved(self, slots: set[int]) -> None:
        """Nodes: these coordinator slots have a new leader; their groups fail over."""
        slot_of = self.nodes.slot_of
        self.groups.reload_groups(lambda group_id: slot_of(group_id) in slots)

    def _leader_changed(self, topic: str, partition: int) -> None:
        """Nodes: a partition has a new leader (or epoch). Its log stamps the new epoch on what it
        appends from now on; Fetches parked on it are woken, to be answered NOT_LEADER_OR_FOLLOWER
        at once as Kafka's DelayedFetch completes on a leader change."""
        plog = self.logs.get(topic, partition)
        if plog is not None:
            t = self.topics.get(topic)
            if t is not None:
                plog.leader_epoch = self.nodes.leader(t, partition)[1]
            plog.wake()

    def _stamp_leader_epochs(self) -> None:
        """The logs stamp their partitions' persisted leader epochs (a single node too: a cluster's
        data directory keeps its epochs, never stamping a lower one than its log has)."""
        for topic in self.topics.all():
            if topic.leader_epochs is None and not self.nodes.multi:
                continue  # the single-node format: epoch 0, every log's default
            for p in range(topic.partitions):
                plog = self.logs.get(topic.name, p)
                if plog is not None:
                    plog.leader_epoch = self.nodes.leader(topic, p)[1]

    def _txn_coordinators_moved(self, slots: set[int]) -> None:
        """Nodes: these transaction coordinator slots have a new leader; their ids fail over."""
        slot_of = self.nodes.txn_slot_of
        self.txns.reload(lambda tid: slot_of(tid) in slots)

    def _partition_leader(self, topic_name: str, partition: int) -> tuple[int, int]:
        """(leader, leader epoch) of a partition (-1: no live leader, or no such partition)."""
        topic = self.topics.get(topic_name)
        if topic is None or not 0 <= partition < topic.partitions:
            return -1, -1
        return self.nodes.leader(topic, partition)

    def _node_down(self, node: int) -> None:
        """Nodes.node_down: the node's listeners close and its clients are disconnected."""
        listener = self.listeners[node - self.node_id]
        if listener.accepting:
            listener.go_down(f"node {node} went down")
            self._down.add(node)
            log.info("node %d is down: its listeners are closed", node)

    def _node_up(self, node: int) -> None:
        """Nodes.node_up: the node listens again on the same ports."""
        listener = self.listeners[node - self.node_id]
        if node in self._down:  # (a broker that never listened, e.g. in-process tests, stays so)
            self._down.discard(node)
            listener.start_now(self.pipeline)
            log.info("node %d is up: listening on %s", node, listener.addresses())

    def close(self) -> None:
        """Release a broker that was constructed but never started (or whose start failed): its
        listeners and the data directory lock. ``stop`` does this for a started broker."""
        for listener in self.listeners:
            listener.close()
        self.lock.release()

    async def stop(self, grace: float = SHUTDOWN_GRACE) -> None:
        """Graceful shutdown: stop accepting and reading requests, answer the ones already received
        (waiting at most ``grace`` seconds; produces waiting for a group commit get it now), close
        the connections (parked long polls and joins are cancelled), then flush and fsync the logs
        (the coordinator's included) and write their recovery checkpoint."""
        for listener in self.listeners:
            listener.stop_accepting()
        self.listener.stop_reading()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while (left := self.listener.unanswered()) and loop.time() < deadline:
            self.logs.flush_soon()
            await asyncio.sleep(0.005)
        if left:
            log.warning(
                "shutting down with requests of %d connection(s) unanswered after %.1f s", left, grace
            )
        await self.listener.stop()
        if self.control_server is not None:
            await self.control_server.stop()
        if self.pipeline.tracer is not None:  # the trace journal (trace.file, or the control API)
            control_plane.trace.stop(self)
        if self._groups is not None:
            self._groups.close()
        if self._txns is not None:
            self._txns.close()
        await self.logs.close()
        self.lock.release()
        self._stopped.set()
        log.info("broker stopped")

    async def wait_stopped(self) -> None:
        await self._stopped.wait()
