"""Crash safety under mixed load: SIGKILL the broker (``log.flush=always``) at least 50 times while
two producers and two consumer groups work against it, restarting it on the same data directory.

The load (helpers from test_kill.py, which has the producer-only suite and its notes on what SIGKILL
can and cannot show):

* an idempotent producer (5 in flight) on topic ``durable`` and a plain one (1 in flight, so
  retries may duplicate but never reorder) on topic ``plain``, both acks=all, 2 partitions each;
* a classic consumer group (confluent-kafka, ``group.protocol=classic``) and a KIP-848 consumer
  group (``group.protocol=consumer``), one member each, subscribed to ``durable``; each thread polls
  and commits what it consumed synchronously, and records every commit it sends and whether it was
  acknowledged. After a restart, a group's member is now and then closed and replaced by a new one,
  so groups rebalance (new generations and epochs) between kills too.

Checked after every kill, while the broker is down, on a copy of the coordinator's log replayed
in-process by the coordinator's own code (``CoordinatorRuntime.load``):

* committed offsets: for each group and partition, the replayed offset is the last acknowledged
  commit's, or the offset of a commit sent after it (in flight at the kill, or failed: it may have
  been applied) -- so never older than an acknowledged commit, and exactly it when nothing was in
  flight;
* the replayed state is internally consistent: offsets only for existing topics and partitions; a
  classic group's member assignments name existing partitions, none owned twice; a consumer group's
  assignment epoch <= group epoch, member epochs <= assignment epoch, target assignments only for
  members, naming existing partitions, none owned twice, and no partition held (assigned or being
  revoked) by two members;
* classic generations, consumer group epochs, assignment epochs and member epochs never go backwards
  from one kill to the next.

After every restart, the same committed-offset check against the live broker (OffsetFetch v8 over
the wire, racing the consumers: a commit acknowledged before the request must show, or a later one).
At the end: every acknowledged record of both producers is present, at its acknowledged offset, in
order (exactly once for the idempotent producer), read back with kafka-python -- see test_kill.py.

``DURABILITY_SEED`` fixes the seed (printed), ``DURABILITY_GROUP_KILLS`` the number of kills (default 50).
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from broker.cluster import TopicRegistry
from broker.config import Config
from broker.coordinator.runtime import CoordinatorRuntime, ManualClock, ManualTimers
from broker.coordinator.state import ConsumerGroupConfig, CoordinatorState, GroupConfig
from broker.log.config import LogConfig
from broker.log.partition import PartitionLog
from broker.protocol.generated.consumer_group_describe import ConsumerGroupDescribeRequest
from broker.protocol.generated.offset_fetch import OffsetFetchRequest, OffsetFetchRequestGroup
from tests.support.groups import decode_assignment
from tests.support.seeds import tell
from tests.support.wire import WireClient

from .test_kill import PARTITIONS, BrokerProcess, Load, _seed, check_broker_logs, check_log, read_back

KILLS = int(os.environ.get("DURABILITY_GROUP_KILLS", "50"))
KILL_DELAY = (0.050, 0.400)  # seconds from the first acknowledgement after a (re)start to SIGKILL
RATE = 1_500  # records/s offered by each producer (busy enough that every kill lands mid-write)
# a guard against a hang, not a timing check: members rejoin within a session timeout (6 s) and a
# rebalance on a quiet machine, but at load 8 a restart, replay and rejoin once took longer than 30 s
RESUME_TIMEOUT = 120.0
BOUNCE = 0.15  # chance per life that a group's member is replaced
BROKER_CONFIG = {
    # no initial rebalance delay: Kafka's default 3 s is longer than most of the broker's lives
    "group.initial.rebalance.delay.ms": "0",
    # a member whose leave was lost with a kill holds its partitions until its session expires: 6 s
    # (as for the classic member), not the default 45 s, so the new member gets them within
    # RESUME_TIMEOUT
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.heartbeat.interval.ms": "500",
}
GROUPS = {"classic-g": "classic", "kip848-g": "consumer"}
OFFSETS_DIR = "__consumer_offsets-0"
OFFSET_FETCH, CONSUMER_GROUP_DESCRIBE = 9, 69

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------- consumers


@dataclass
class Commit:
    partition: int
    offset: int
    life: int  # the broker's life when it was sent
    status: str = "sent"  # then "acked" or "failed"
    answer: str = ""  # the error, or the broker's life when it was acknowledged


@dataclass
class GroupMember:
    """One consumer of a group, in its own thread, committing synchronously what it consumed."""

    bootstrap: str
    group: str
    protocol: str
    topic: str
    commits: list[Commit] = field(default_factory=list)
    consumed: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    bounce: threading.Event = field(default_factory=threading.Event)  # close and rejoin as a new member
    incarnations: int = 0
    life: int = 0  # set by the test at each restart, for the diagnostics

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name=f"member-{self.group}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "group.protocol": self.protocol,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "reconnect.backoff.ms": 10,
            "reconnect.backoff.max.ms": 100,
            "retry.backoff.ms": 10,
            "retry.backoff.max.ms": 100,
            "logger": logging.getLogger(f"durability.{self.group}"),
        }
        if self.protocol == "classic":
            conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
        while not self.stop.is_set():  # one consumer per incarnation; ``bounce`` starts the next
            self.incarnations += 1
            consumer = Consumer(conf)
            consumer.subscribe([self.topic])
            try:
                while not self.stop.is_set() and not self.bounce.is_set():
                    msgs = consumer.consume(500, timeout=0.05)
                    ends: dict[int, int] = {}
                    for m in msgs:
                        if m.error() is None:
                            ends[m.partition()] = max(ends.get(m.partition(), 0), m.offset() + 1)
                            self.consumed += 1
                    if ends:
                        self._commit(consumer, ends)
            finally:
                consumer.close()  # leaves the group
                self.bounce.clear()

    def _commit(self, consumer: Consumer, ends: dict[int, int]) -> None:
        with self.lock:
            sent = [Commit(p, o, self.life) for p, o in sorted(ends.items())]
            self.commits += sent
        try:
            result = consumer.commit(
                offsets=[TopicPartition(self.topic, c.partition, c.offset) for c in sent], asynchronous=False
            )
            errors = {tp.partition: tp.error for tp in result or []}
        except KafkaException as e:
            errors = {c.partition: e for c in sent}
        with self.lock:
            for c in sent:
                error = errors.get(c.partition)
                c.status = "failed" if error is not None else "acked"
                c.answer = str(error) if error is not None else f"in life {self.life}"

    def last_acked(self, partition: int) -> int:
        """Index (among the partition's commits) of the last acknowledged commit so far, or -1."""
        with self.lock:
            commits = [c for c in self.commits if c.partition == partition]
            return max((i for i, c in enumerate(commits) if c.status == "acked"), default=-1)

    def allowed(self, partition: int, last: int) -> tuple[int, set[int]]:
        """(offset of commit ``last``, every offset the committed one may have): that commit's, or
        that of any commit sent after it (in flight, failed, or acknowledged since)."""
        with self.lock:
            commits = [c for c in self.commits if c.partition == partition]
        acked = commits[last].offset if last >= 0 else -1
        return acked, {acked} | {c.offset for c in commits[last + 1 :]}

    def finish(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(60)
            assert not self.thread.is_alive(), f"{self.group}: the consumer did not stop"


def check_commits(members: list[GroupMember], committed: dict[tuple[str, int], int], snapshot: dict) -> None:
    for m in members:
        for p in range(PARTITIONS):
            acked, allowed = m.allowed(p, snapshot[m.group, p])
            got = committed.get((m.group, p), -1)
            if got not in allowed:
                with m.lock:
                    recent = [c for c in m.commits if c.partition == p][-10:]
                raise AssertionError(
                    f"{m.group} partition {p}: committed offset {got}, but the last acknowledged commit was "
                    f"{acked} and only {sorted(allowed)} are possible; the last commits: {recent}"
                )


def snapshot_of(members: list[GroupMember]) -> dict[tuple[str, int], int]:
    """The last acknowledged commit of each group and partition, taken before the committed offsets
    are read (a commit acknowledged after that may or may not show)."""
    return {(m.group, p): m.last_acked(p) for m in members for p in range(PARTITIONS)}


def offset_fetch(port: int, topic: str) -> dict[tuple[str, int], int]:
    groups = [OffsetFetchRequestGroup(g, None, -1, None) for g in GROUPS]
    with WireClient(port, timeout=10) as c:
        r = c.call(OFFSET_FETCH, 8, OffsetFetchRequest(groups=groups, require_stable=False))
    out = {}
    for g in r.groups:
        assert g.error_code == 0, g
        for t in g.topics:
            for p in t.partitions:
                if t.name == topic and p.committed_offset >= 0:
                    out[g.group_id, p.partition_index] = p.committed_offset
    return out


def describe_consumer_group(port: int) -> Any:
    with WireClient(port, timeout=10) as c:
        return c.call(CONSUMER_GROUP_DESCRIBE, 0, ConsumerGroupDescribeRequest(["kip848-g"], False))


# ---------------------------------------------------------------------------------- replay


def replay(data_dir: Path, scratch: Path) -> tuple[CoordinatorState, TopicRegistry] | None:
    """The coordinator state rebuilt, with the coordinator's own replay, from a copy of its log."""
    src = data_dir / OFFSETS_DIR
    if not src.exists():
        return None
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(src, scratch / OFFSETS_DIR)
    config = Config({"log.dirs": str(scratch)})
    log_config = LogConfig.resolve(config.log_defaults(), {"cleanup.policy": "compact"})
    plog = PartitionLog(scratch / OFFSETS_DIR, "__consumer_offsets", 0, log_config)
    clock = ManualClock(int(time.time() * 1000))
    state = CoordinatorState(
        GroupConfig.from_config(config), ManualTimers(clock), ConsumerGroupConfig.from_config(config)
    )
    try:
        CoordinatorRuntime(state, None, plog, clock).load()
    finally:
        plog.close()
    return state, TopicRegistry(data_dir)


def check_consistent(state: CoordinatorState, registry: TopicRegistry) -> None:
    """The internal-consistency rules of the module docstring."""
    topics = {t.name: t.partitions for t in registry.all()}
    ids = {t.topic_id: t for t in registry.all()}

    def existing(topic: str, partition: int, where: str) -> None:
        assert topic in topics and 0 <= partition < topics[topic], (
            f"{where}: {topic}-{partition} does not exist"
        )

    for gid, offsets in state.offsets.items():
        for topic, parts in offsets.by_topic.items():
            for p in parts:
                existing(topic, p, f"offsets of {gid}")
    for gid, g in state.groups.items():
        owner: dict[tuple[str, int], str] = {}
        for mid, m in g.members.items():
            for topic, parts in decode_assignment(m.assignment).items():
                for p in parts:
                    existing(topic, p, f"classic group {gid} member {mid}")
                    assert (topic, p) not in owner, (
                        f"{gid}: {topic}-{p} assigned to {owner[topic, p]} and {mid}"
                    )
                    owner[topic, p] = mid
        assert g.leader_id is None or not g.members or g.leader_id in g.members, f"{gid}: leader not a member"
    for gid, g in state.consumer_groups.items():
        assert g.assignment_epoch <= g.group_epoch, (
            f"{gid}: assignment epoch {g.assignment_epoch} > {g.group_epoch}"
        )
        assert set(g.target) <= set(g.members), f"{gid}: target assignments of non-members"
        target: dict[tuple[Any, int], str] = {}
        held: dict[tuple[Any, int], str] = {}
        for mid, parts in g.target.items():
            for tid, ps in parts.items():
                for p in ps:
                    assert tid in ids and 0 <= p < ids[tid].partitions, (
                        f"{gid}: target {tid}-{p} does not exist"
                    )
                    assert (tid, p) not in target, (
                        f"{gid}: {tid}-{p} in the targets of {target[tid, p]} and {mid}"
                    )
                    target[tid, p] = mid
        for mid, m in g.members.items():
            assert m.member_epoch <= g.assignment_epoch, (
                f"{gid}: member {mid} epoch {m.member_epoch} > assignment epoch {g.assignment_epoch}"
            )
            for parts in (m.progress.assigned, m.progress.pending_revocation):
                for tid, ps in parts.items():
                    for p in ps:
                        assert tid in ids and 0 <= p < ids[tid].partitions, f"{gid}: {mid} holds {tid}-{p}"
                        assert (tid, p) not in held, f"{gid}: {tid}-{p} held by {held[tid, p]} and {mid}"
                        held[tid, p] = mid


class Epochs:
    """The highest generation / epochs seen so far; each new observation must not be lower."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def observe(self, state: CoordinatorState) -> None:
        now: dict[str, int] = {}
        for gid, g in state.groups.items():
            now[f"{gid} generation"] = g.generation
        for gid, g in state.consumer_groups.items():
            now[f"{gid} group epoch"] = g.group_epoch
            now[f"{gid} assignment epoch"] = g.assignment_epoch
            for mid, m in g.members.items():
                if m.member_epoch >= 0:
                    now[f"{gid} member {mid} epoch"] = m.member_epoch
        for key, value in now.items():
            before = self.seen.get(key, -1)
            assert value >= before, f"{key} went backwards: {before} -> {value}"
            self.seen[key] = value


# ---------------------------------------------------------------------------------- the test


def pump(loads: list[Load], seconds: float) -> None:
    end = time.monotonic() + seconds
    while True:
        for load in loads:
            load.pump(0.001)
        if time.monotonic() >= end:
            return


def progress(loads: list[Load], members: list[GroupMember]) -> tuple[int, ...]:
    """Acknowledged records per producer, then acknowledged commits per member."""
    return (*(len(load.acks) for load in loads), *(commit_counts(m).get("acked", 0) for m in members))


def wait_listening(broker: BrokerProcess, loads: list[Load]) -> float:
    t0 = time.monotonic()
    while not broker.listening():
        assert time.monotonic() - t0 < 30, "broker did not start listening within 30 s"
        pump(loads, 0.005)
    return time.monotonic() - t0


def test_acknowledged_records_and_commits_survive_sigkill_with_groups(request, tmp_path):
    seed = _seed()
    print(f"\nDURABILITY_SEED={seed} (mixed load with groups, {KILLS} kills)")
    rng = random.Random(seed)
    (tmp_path / "logs").mkdir()
    broker = BrokerProcess(tmp_path / "data", tmp_path / "logs", BROKER_CONFIG)
    scratch = tmp_path / "replay"
    members: list[GroupMember] = []
    started = time.monotonic()
    try:
        idem = Load(broker.bootstrap, True, rng, topic="durable", rate=RATE)
        plain = Load(broker.bootstrap, False, rng, topic="plain", rate=RATE)
        loads = [idem, plain]
        epochs = Epochs()
        replay_ms: list[float] = []
        acked_per_life: list[int] = []
        resume: list[float] = []
        for life in range(KILLS + 1):
            broker.spawn()
            for m in members:
                m.life = life
            wait_listening(broker, loads)
            for m in members:  # churn: now and then a member leaves and a new one joins (rebalances)
                if life > 0 and rng.random() < BOUNCE:
                    m.bounce.set()
            if life == 0:
                pump(loads, 0.3)  # the producers create the topics (auto-creation) before anyone subscribes
                members = [GroupMember(broker.bootstrap, g, proto, "durable") for g, proto in GROUPS.items()]
                for m in members:
                    m.start()
            else:
                snap = snapshot_of(members)
                check_commits(members, offset_fetch(broker.port, "durable"), snap)
            if life == KILLS:
                break
            # the kill delay counts from the moment every producer and every member has had something
            # acknowledged by this broker: kills land while all of them are busy
            before = progress(loads, members)
            t0 = time.monotonic()
            while not all(now > then for now, then in zip(progress(loads, members), before, strict=True)):
                assert time.monotonic() - t0 < RESUME_TIMEOUT, (
                    f"not everyone resumed within {RESUME_TIMEOUT} s: progress {before} -> "
                    f"{progress(loads, members)}; the broker's view of the consumer group: "
                    f"{describe_consumer_group(broker.port)}"
                )
                pump(loads, 0.002)
            resume.append(time.monotonic() - t0)
            pump(loads, rng.uniform(*KILL_DELAY))
            broker.kill()
            acked_per_life.append(len(idem.acks) + len(plain.acks) - before[0] - before[1])
            # the broker is down: nothing more is applied; replay a copy of the coordinator log
            t0 = time.monotonic()
            snap = snapshot_of(members)
            replayed = replay(broker.data_dir, scratch)
            if replayed is not None:
                state, registry = replayed
                check_consistent(state, registry)
                epochs.observe(state)
                committed = {
                    (g, p): c.offset
                    for g, o in state.offsets.items()
                    for p, c in o.by_topic.get("durable", {}).items()
                }
                check_commits(members, committed, snap)
            replay_ms.append((time.monotonic() - t0) * 1000)
        for m in members:
            m.finish()
        for load in loads:
            load.finish(60)
        crash_time = time.monotonic() - started
        stats = {}
        for load, idempotent in ((idem, True), (plain, False)):
            stats[load.topic] = check_log(load, read_back(broker.bootstrap, load.topic), idempotent)
        snap = snapshot_of(members)
        check_commits(members, offset_fetch(broker.port, "durable"), snap)
        assert broker.terminate() == 0, broker.logs[-1].read_text()[-3000:]
        replayed = replay(broker.data_dir, scratch)
        assert replayed is not None, "no coordinator log after the run"
        check_consistent(*replayed)
        epochs.observe(replayed[0])
        check_commits(
            members,
            {
                (g, p): c.offset
                for g, o in replayed[0].offsets.items()
                for p, c in o.by_topic.get("durable", {}).items()
            },
            snap,
        )
        check_broker_logs(broker.logs)
        commits = {m.group: commit_counts(m) for m in members}
        print(
            f"mixed: seed {seed}, {KILLS} kills in {crash_time:.1f} s; records acknowledged: idempotent "
            f"{len(idem.acks)}, plain {len(plain.acks)}; {stats}; acks per life median {median(acked_per_life)}; "
            f"commits {commits}; consumed {[m.consumed for m in members]}; "
            f"member incarnations {[m.incarnations for m in members]}; "
            f"everyone resumed after median {median(resume):.2f} / max {max(resume):.2f} s; "
            f"epochs { ({k: v for k, v in epochs.seen.items() if ' member ' not in k}) } "
            f"({sum(' member ' in k for k in epochs.seen)} consumer-group members seen); "
            f"replay check median {median(replay_ms):.0f} ms"
        )
        assert all(c.get("acked", 0) > KILLS // 5 for c in commits.values()), (
            f"too few acknowledged commits: {commits}"
        )
    except BaseException:
        tell(f"{request.node.nodeid} failed with DURABILITY_SEED={seed}; broker logs in {tmp_path / 'logs'}")
        raise
    finally:
        for m in members:
            m.stop.set()
        broker.cleanup()


def commit_counts(member: GroupMember) -> dict[str, int]:
    with member.lock:
        out: dict[str, int] = {}
        for c in member.commits:
            out[c.status] = out.get(c.status, 0) + 1
        return out
