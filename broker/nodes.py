"""The simulated cluster (``cluster.nodes``): which nodes exist and are live, where each listens,
who leads each partition (with its leader epoch) and who coordinates each group.

Every node runs in this process over the same data directory and the same log of each partition:
a partition has one log whatever its replication factor, and its "replicas" are the nodes allowed
to lead it. The ISR is the live replicas (a replica never lags here). Leaders and epochs are kept
with the topic in ``topics.json`` (broker/cluster.py), so a restart keeps them. A topic written by
the single-node broker (no replica lists) has every partition on the first node, leader epoch 0.

Replica placement is Kafka's StripedReplicaPlacer for brokers in one rack: the brokers sorted,
a random starting offset, each partition starting one broker further, the live (unfenced) brokers
first; after as many partitions as live brokers the list is shuffled.

Group coordinators are Kafka's: a group hashes to a slot, ``abs(groupId.hashCode()) %
offsets.topic.num.partitions`` (Java's String.hashCode), and the slot's leader coordinates it. The
slots' replicas, leaders and epochs are kept in ``coordinators.json`` (written only by a multi-node
cluster); their log is the one ``__consumer_offsets`` partition the coordinator writes.

Transaction coordinators are mapped the same way with their own slots, Kafka's
``__transaction_state`` partitions: ``abs(transactionalId.hashCode()) %
transaction.state.log.num.partitions``, kept in ``txn-coordinators.json`` (also written only by a
multi-node cluster; a cluster directory written before it existed gets fresh slots on its next
start). Their log is the one ``__transaction_state`` partition the transaction coordinator writes.

The metadata quorum (DescribeQuorum) is every node, led by the controller. Its leader epoch, as
KRaft's, grows at each new election: when the controller changes (it goes down, or a lower node comes
back) and at each start of a multi-node cluster (KRaft's leader restarts resigned and a new election
follows: QuorumState.initialize). It is kept in ``quorum.json`` (written only by a multi-node
cluster). As KRaft's LeaderState, the leader of an epoch remembers when each voter last fetched from
it: a node that goes down keeps its last fetch time until the next election (whose leader has
heard from no one yet: -1 until a voter fetches).

A single node leads every partition at the leader epoch persisted with it (0 for a topic the
single-node broker wrote; a cluster's last epoch for a topic a cluster wrote), so the epochs in a log
never go backwards when a cluster's data directory is opened by one node.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

import orjson

from broker.cluster import Topic, TopicRegistry
from broker.datadir import write_durably
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.primitives import ZERO_UUID

log = logging.getLogger(__name__)

NO_LEADER = -1
SLOTS_FILE = "coordinators.json"
TXN_SLOTS_FILE = "txn-coordinators.json"
QUORUM_FILE = "quorum.json"
#: the quorum's leader epoch of a single node, and of a cluster's first election
FIRST_QUORUM_EPOCH = 1


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: Integer.MIN_VALUE maps to 0."""
    return 0 if n == -(1 << 31) else abs(n)


def coordinator_slot(key: str, slots: int) -> int:
    """The ``__consumer_offsets`` partition a group id hashes to (GroupCoordinatorService.partitionFor)."""
    return kafka_abs(java_string_hash(key)) % slots


class PartitionState(NamedTuple):
    """A partition's leadership as clients are told it (a tuple: built per partition per request)."""

    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]


class StripedPlacer:
    """Kafka's StripedReplicaPlacer, for brokers that share one rack (or none)."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def place(self, unfenced: list[int], fenced: list[int], partitions: int, rf: int) -> list[list[int]]:
        if rf <= 0:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR, "Invalid replication factor: must be positive"
            )
        if rf > len(unfenced) + len(fenced):
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"The target replication factor of {rf} cannot be reached because only "
                f"{len(unfenced) + len(fenced)} broker(s) are registered.",
            )
        if not unfenced:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "All brokers are currently fenced.")
        live, down = sorted(unfenced), sorted(fenced)
        live_off = self.rng.randrange(len(live))
        down_off = self.rng.randrange(len(down)) if down else 0
        out = []
        for i in range(partitions):
            if i and i % len(live) == 0 and len(live) > 1:  # Kafka's RackList.shuffle at each epoch wrap
                self.rng.shuffle(live)
                self.rng.shuffle(down)
            live_off = (live_off + 1) % len(live)
            if down:
                down_off = (down_off + 1) % len(down)
            order = [live[(live_off + k) % len(live)] for k in range(len(live))]
            order += [down[(down_off + k) % len(down)] for k in range(len(down))]
            out.append(order[:rf])
        return out


class Nodes:
    """The cluster's nodes and leadership. Changes go through its methods, which persist them and
    tell :attr:`on_coordinator_moved` about every coordinator slot whose leader changed."""

    def __init__(
        self,
        first_id: int,
        count: int,
        topics: TopicRegistry,
        data_dir: Path,
        slot_count: int = 50,
        slot_rf: int = 3,
        rng: random.Random | None = None,
        txn_slot_count: int = 50,
        txn_slot_rf: int = 3,
        clock: Callable[[], float] = time.time,
    ):
        self.ids: list[int] = list(range(first_id, first_id + count))
        #: whether there are several nodes (the node ids are fixed when built; every request of
        #: some APIs reads this, as a plain attribute rather than a property)
        self.multi = count > 1
        self.live: set[int] = set(self.ids)
        self.topics = topics
        self.rng = rng or random.Random()
        self.placer = StripedPlacer(self.rng)
        #: node id -> listener name -> (host, port) advertised to clients (set by the broker)
        self.addresses: dict[int, dict[str, tuple[str, int]]] = {}
        #: called with the coordinator slots whose leader changed, once per operation
        self.on_coordinators_moved: list[Callable[[set[int]], None]] = []
        self._moved_slots: set[int] = set()
        #: called with the transaction coordinator slots whose leader changed, once per operation
        self.on_txn_coordinators_moved: list[Callable[[set[int]], None]] = []
        self._moved_txn_slots: set[int] = set()
        #: called with the node id when a node goes down / comes back (the broker's listeners)
        self.on_node_down: list[Callable[[int], None]] = []
        self.on_node_up: list[Callable[[int], None]] = []
        #: called with (topic name, partition) when a topic partition's leader or epoch changes
        self.on_leader_changed: list[Callable[[str, int], None]] = []
        self._slots_path = data_dir / SLOTS_FILE
        self._txn_slots_path = data_dir / TXN_SLOTS_FILE
        self.slots: Topic | None = None
        self.txn_slots: Topic | None = None
        #: wall clock (seconds) of the quorum's fetch times (injectable for tests)
        self.clock = clock
        self._quorum_path = data_dir / QUORUM_FILE
        #: the metadata quorum's leader epoch (a new election: +1)
        self.quorum_epoch = FIRST_QUORUM_EPOCH
        #: voter -> its last fetch (ms) from this epoch's leader, for the voters now down
        self._last_fetch: dict[int, int] = {}
        if count > 1:
            self.slots = self._load_slots(slot_count, slot_rf)
            self.txn_slots = self._load_txn_slots(txn_slot_count, txn_slot_rf)
            self._load_quorum()

    # ------------------------------------------------------------------ nodes

    @property
    def first(self) -> int:
        return self.ids[0]

    def is_live(self, node: int) -> bool:
        return node in self.live

    def live_ids(self) -> list[int]:
        return [n for n in self.ids if n in self.live]

    def controller(self) -> int:
        """The lowest live node (-1 with none)."""
        return next(iter(self.live_ids()), NO_LEADER)

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # ------------------------------------------------------------------ metadata quorum

    def _load_quorum(self) -> None:
        """A start is a new election: the persisted epoch + 1 (the first: 1)."""
        if self._quorum_path.exists():
            self.quorum_epoch = int(orjson.loads(self._quorum_path.read_bytes())["leader_epoch"]) + 1
        self._save_quorum()

    def _save_quorum(self) -> None:
        doc = {"version": 1, "leader_epoch": self.quorum_epoch, "leader": self.controller()}
        write_durably(self._quorum_path, orjson.dumps(doc, option=orjson.OPT_INDENT_2))

    def _elect_if_controller_changed(self, before: int) -> None:
        """A new controller is a new quorum election: a new epoch whose leader has had no fetch."""
        if self.multi and self.controller() != before:
            self.quorum_epoch += 1
            self._last_fetch.clear()
            self._save_quorum()
            log.info("quorum: leader %d -> %d, epoch %d", before, self.controller(), self.quorum_epoch)

    def voter_last_fetch(self, node: int) -> int:
        """When ``node`` last fetched from the quorum leader (ms): now while it is live, else its
        last fetch in this epoch (-1: none, it went down before this epoch's election)."""
        if node in self.live:
            return self.now_ms()
        return self._last_fetch.get(node, -1)

    def address(self, node: int, listener: str) -> tuple[str, int] | None:
        """What clients of ``listener`` are told to use for ``node`` (None: not known yet)."""
        by_listener = self.addresses.get(node)
        if not by_listener:
            return None
        return by_listener.get(listener) or next(iter(by_listener.values()))

    def check_node(self, node: int) -> None:
        if node not in self.ids:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"there is no node {node} (nodes: {self.ids})")

    # ------------------------------------------------------------------ partitions

    @staticmethod
    def persisted_epoch(topic: Topic, partition: int) -> int:
        """The partition's leader epoch as kept with its topic (0: none kept)."""
        epochs = topic.leader_epochs
        return epochs[partition] if epochs is not None and partition < len(epochs) else 0

    def state(self, topic: Topic, partition: int) -> PartitionState:
        if not self.multi:  # one node leads everything at the persisted epoch (replica lists kept)
            epoch = self.persisted_epoch(topic, partition)
            return PartitionState(self.first, epoch, [self.first], [self.first], [])
        if topic.replicas is None:
            replicas = [self.first]
            leader = self.first if self.first in self.live else NO_LEADER
            epoch = 0
        else:
            replicas = topic.replicas[partition]
            leader = topic.leaders[partition]  # type: ignore[index]
            epoch = topic.leader_epochs[partition]  # type: ignore[index]
        isr = [r for r in replicas if r in self.live]
        offline = [r for r in replicas if r not in self.live]
        return PartitionState(leader, epoch, list(replicas), isr, offline)

    def leader(self, topic: Topic, partition: int) -> tuple[int, int]:
        """(leader, leader epoch) of a partition; leader -1 when no replica is live."""
        if not self.multi:
            return self.first, self.persisted_epoch(topic, partition)
        if topic.replicas is None:
            return (self.first if self.first in self.live else NO_LEADER), 0
        return topic.leaders[partition], topic.leader_epochs[partition]  # type: ignore[index]

    def check_replication_factor(self, rf: int) -> None:
        if rf < 1 or rf > len(self.ids):
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} "
                f"cannot be reached because only {len(self.ids)} broker(s) are registered.",
            )

    def assign(self, partitions: int, rf: int) -> list[list[int]] | None:
        """Replica lists for ``partitions`` new partitions (None on a single node: the topic keeps
        the single-node form)."""
        self.check_replication_factor(rf)
        if not self.multi:
            return None
        live = self.live_ids()
        return self.placer.place(live, [n for n in self.ids if n not in self.live], partitions, rf)

    def check_assignment(self, broker_ids: Iterable[int]) -> None:
        """A manual assignment's replicas: known nodes, none twice (INVALID_REPLICA_ASSIGNMENT)."""
        ids = list(broker_ids)
        if not ids:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment is empty."
            )
        if len(set(ids)) != len(ids):
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker(s) {ids} more than once.",
            )
        unknown = [i for i in ids if i not in self.ids]
        if unknown:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {unknown[0]}, but no such broker is registered.",
            )

    def materialize(self, topic: Topic) -> None:
        """Give a single-node topic explicit replica lists (every partition on the first node)."""
        if topic.replicas is None:
            topic.replicas = [[self.first] for _ in range(topic.partitions)]
            live = self.first in self.live
            topic.leaders = [self.first if live else NO_LEADER] * topic.partitions
            topic.leader_epochs = [0] * topic.partitions

    def first_live_leader(self, replicas: list[int]) -> int:
        return next((r for r in replicas if r in self.live), NO_LEADER)

    def _all(self) -> list[Topic]:
        out = list(self.topics.all())
        if self.slots is not None:
            out.append(self.slots)
        if self.txn_slots is not None:
            out.append(self.txn_slots)
        return out

    def _save(self, topic: Topic) -> None:
        if topic is self.slots:
            self._save_slots()
        elif topic is self.txn_slots:
            self._save_txn_slots()
        else:
            self.topics.save()

    def _save_all(self) -> None:
        self.topics.save()
        if self.slots is not None:
            self._save_slots()
        if self.txn_slots is not None:
            self._save_txn_slots()

    def _set_leader(self, topic: Topic, partition: int, leader: int, why: str) -> None:
        self.materialize(topic)
        assert topic.leaders is not None and topic.leader_epochs is not None
        old = topic.leaders[partition]
        topic.leaders[partition] = leader
        topic.leader_epochs[partition] += 1
        log.info(
            "%s-%d: leader %d -> %d, epoch %d (%s)",
            {id(self.slots): "coordinator slot", id(self.txn_slots): "transaction coordinator slot"}.get(
                id(topic), topic.name
            ),
            partition,
            old,
            leader,
            topic.leader_epochs[partition],
            why,
        )
        if topic is self.slots and old != leader:
            self._moved_slots.add(partition)
        elif topic is self.txn_slots:
            if old != leader:
                self._moved_txn_slots.add(partition)
        elif topic is not self.slots:
            self._leader_changed(topic.name, partition)

    def _leader_changed(self, topic_name: str, partition: int) -> None:
        """Tell whoever waits on the partition (a parked Fetch) that its leader changed."""
        for callback in self.on_leader_changed:
            callback(topic_name, partition)

    def _notify(self) -> None:
        """Tell the coordinators which slots moved in the operation that just ended."""
        moved, self._moved_slots = self._moved_slots, set()
        if moved:
            for callback in self.on_coordinators_moved:
                callback(moved)
        moved, self._moved_txn_slots = self._moved_txn_slots, set()
        if moved:
            for callback in self.on_txn_coordinators_moved:
                callback(moved)

    def move_leader(self, topic_name: str, partition: int, target: int | str = "next") -> tuple[int, int]:
        """Make ``target`` (a live replica, or "next": the next live replica after the leader in
        replica order) the partition's leader, bumping its epoch; returns (old, new) leader."""
        topic = self.topics.get(topic_name)
        if topic is None or not 0 <= partition < topic.partitions:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {topic_name}-{partition}")
        return self._move(topic, partition, target, "moved on command")

    def _move(self, topic: Topic, partition: int, target: int | str, why: str) -> tuple[int, int]:
        state = self.state(topic, partition)
        if target == "next":
            if not state.isr:
                raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, "no live replica to lead it")
            reps = state.replicas
            start = reps.index(state.leader) + 1 if state.leader in reps else 0
            target = next(r for k in range(len(reps)) if (r := reps[(start + k) % len(reps)]) in self.live)
        assert isinstance(target, int)
        if target not in state.replicas:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"node {target} is not a replica (replicas {state.replicas})",
            )
        if target not in self.live:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"node {target} is down")
        self._set_leader(topic, partition, target, why)
        self._save(topic)
        self._notify()
        return state.leader, target

    def elect(self, topic: Topic, partition: int, unclean: bool = False) -> ErrorCode:
        """ElectLeaders: the preferred replica (the first) leads again when it is live; unclean:
        a leaderless partition gets its first live replica. Kafka's answers otherwise."""
        state = self.state(topic, partition)
        if unclean:
            if state.leader != NO_LEADER:
                return ErrorCode.ELECTION_NOT_NEEDED
            if not state.isr:
                return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
            target = state.isr[0]
        else:
            target = state.replicas[0]
            if state.leader == target:
                return ErrorCode.ELECTION_NOT_NEEDED
            if target not in self.live:
                return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        self._set_leader(topic, partition, target, "elected")
        self.topics.save()
        return ErrorCode.NONE

    def reassign(self, topic: Topic, partition: int, replicas: list[int]) -> None:
        """AlterPartitionReassignments: the partition's replicas become ``replicas`` at once (one
        log: nothing to copy); a leader that is not among them hands over to the first live one."""
        self.materialize(topic)
        assert topic.replicas is not None and topic.leaders is not None
        topic.replicas[partition] = list(replicas)
        if topic.leaders[partition] not in replicas:
            self._set_leader(topic, partition, self.first_live_leader(replicas), "reassigned")
        self.topics.save()

    def shuffle(self) -> int:
        """A random live replica leads each partition of every topic (another one than now where
        there is a choice), each change bumping the epoch; returns how many moved."""
        moved = 0
        for topic in self.topics.all():
            for p in range(topic.partitions):
                state = self.state(topic, p)
                choices = [r for r in state.isr if r != state.leader]
                if choices:
                    self._set_leader(topic, p, self.rng.choice(choices), "shuffled")
                    moved += 1
        self.topics.save()
        return moved

    # ------------------------------------------------------------------ coordinators

    def _load_slots(self, count: int, rf: int) -> Topic:
        return self._load_slot_file(self._slots_path, "__consumer_offsets", count, rf)

    def _load_txn_slots(self, count: int, rf: int) -> Topic:
        return self._load_slot_file(self._txn_slots_path, "__transaction_state", count, rf)

    def _load_slot_file(self, path: Path, name: str, count: int, rf: int) -> Topic:
        slots = Topic(name, ZERO_UUID, count, internal=True)
        if path.exists():
            doc = orjson.loads(path.read_bytes())
            slots.partitions = len(doc["replicas"])  # a group keeps its slot across config changes
            slots.replicas, slots.leaders, slots.leader_epochs = (
                doc["replicas"],
                doc["leaders"],
                doc["leader_epochs"],
            )
            return slots
        rf = min(rf, len(self.ids))
        slots.replicas = self.placer.place(self.ids, [], count, rf)
        slots.leaders = [r[0] for r in slots.replicas]
        slots.leader_epochs = [0] * count
        _write_slots(path, slots)
        return slots

    def _save_slots(self) -> None:
        assert self.slots is not None
        _write_slots(self._slots_path, self.slots)

    def _save_txn_slots(self) -> None:
        assert self.txn_slots is not None
        _write_slots(self._txn_slots_path, self.txn_slots)

    def slot_of(self, key: str) -> int:
        return coordinator_slot(key, self.slots.partitions) if self.slots is not None else 0

    def coordinator(self, key: str) -> int:
        """The node coordinating group ``key`` (-1: its slot has no live replica)."""
        if self.slots is None:
            return self.first if self.first in self.live else NO_LEADER
        return self.slots.leaders[self.slot_of(key)]  # type: ignore[index]

    def coordinator_of_slot(self, slot: int) -> int:
        return self.slots.leaders[slot] if self.slots is not None else self.first  # type: ignore[index]

    def move_coordinator(self, key: str, target: int | str = "next") -> tuple[int, int]:
        """Move the coordinator of group ``key`` (the leader of its slot, so every group of that
        slot moves with it, as in Kafka); returns (old, new) node."""
        if self.slots is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "a single-node cluster has one coordinator")
        return self._move(self.slots, self.slot_of(key), target, f"coordinator of group {key!r} moved")

    def txn_slot_of(self, transactional_id: str) -> int:
        """The ``__transaction_state`` partition a transactional id hashes to (Kafka's
        TransactionStateManager.partitionFor)."""
        if self.txn_slots is None:
            return 0
        return coordinator_slot(transactional_id, self.txn_slots.partitions)

    def txn_coordinator(self, transactional_id: str) -> int:
        """The node coordinating ``transactional_id`` (-1: its slot has no live replica)."""
        if self.txn_slots is None:
            return self.first if self.first in self.live else NO_LEADER
        return self.txn_slots.leaders[self.txn_slot_of(transactional_id)]  # type: ignore[index]

    def txn_coordinator_and_epoch(self, transactional_id: str) -> tuple[int, int]:
        """(coordinating node, leader epoch of its slot): the epoch changes at every move."""
        if self.txn_slots is None:
            return self.txn_coordinator(transactional_id), 0
        slot = self.txn_slot_of(transactional_id)
        return self.txn_slots.leaders[slot], self.txn_slots.leader_epochs[slot]  # type: ignore[index]

    def move_txn_coordinator(self, transactional_id: str, target: int | str = "next") -> tuple[int, int]:
        """Move the transaction coordinator of ``transactional_id`` (the leader of its slot: every
        transactional id of the slot moves with it, as in Kafka); returns (old, new) node."""
        if self.txn_slots is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "a single-node cluster has one coordinator")
        slot = self.txn_slot_of(transactional_id)
        why = f"transaction coordinator of {transactional_id!r} moved"
        return self._move(self.txn_slots, slot, target, why)

    # ------------------------------------------------------------------ node down / up

    def node_down(self, node: int) -> int:
        """Take ``node`` down: each partition and coordinator slot it leads moves to its next live
        replica (none: no leader), epoch bumped; returns how many leaderships moved."""
        self.check_node(node)
        if node not in self.live:
            return 0
        if len(self.live) == 1:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"node {node} is the last live node")
        controller = self.controller()
        self._last_fetch[node] = self.now_ms()  # its last fetch: it was live until now
        self.live.discard(node)
        self._elect_if_controller_changed(controller)
        moved = 0
        for topic in self._all():
            for p in range(topic.partitions):
                state = self.state(topic, p)
                if state.leader == node:
                    self._set_leader(topic, p, self.first_live_leader(state.replicas), f"node {node} down")
                    moved += 1
        self._save_all()
        self._notify()
        for callback in self.on_node_down:
            callback(node)
        return moved

    def node_up(self, node: int) -> int:
        """Bring ``node`` back: partitions left without a leader that it replicates get it back as
        leader (epoch bumped); returns how many."""
        self.check_node(node)
        if node in self.live:
            return 0
        controller = self.controller()
        self.live.add(node)
        self._last_fetch.pop(node, None)
        self._elect_if_controller_changed(controller)
        elected = 0
        for topic in self._all():
            for p in range(topic.partitions):
                state = self.state(topic, p)
                if state.leader == NO_LEADER and node in state.replicas:
                    self._set_leader(topic, p, node, f"node {node} up")
                    elected += 1
        self._save_all()
        self._notify()
        for callback in self.on_node_up:
            callback(node)
        return elected


def _write_slots(path: Path, slots: Topic) -> None:
    doc = {
        "version": 1,
        "replicas": slots.replicas,
        "leaders": slots.leaders,
        "leader_epochs": slots.leader_epochs,
    }
    write_durably(path, orjson.dumps(doc, option=orjson.OPT_INDENT_2))
