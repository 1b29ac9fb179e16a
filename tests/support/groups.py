"""Consumer-group test support: group members as separate processes, the broker's view of a group,
and the check that a group has settled.

A member is a process we can SIGKILL (a real crash: no LeaveGroup, no more heartbeats). Python
members run this module (``python -m tests.support.groups CONFIG_JSON``) with kafka-python,
aiokafka or confluent-kafka; Java members run tests/java/GroupProbe.java. Both speak the same
line protocol. A confluent-kafka member with ``"protocol": "consumer"`` in its config joins a
KIP-848 consumer group (``group.protocol=consumer``, optional ``"remote_assignor"``); its
"generation" is then the member epoch, as is the Java member's with ``group.protocol=consumer``.
For those groups use :func:`consumer_group_view` and :func:`wait_consumer_settled`.

stdin, one command a line: ``commit`` (commit the position of every assigned partition, i.e.
exactly the records delivered so far), ``state`` (report the state now), ``close`` (close the
consumer -- a dynamic member leaves the group, a static one does not -- and exit). EOF is ``close``.

stdout, one JSON object a line, each with an ``event`` and ``ts`` (``time.monotonic()`` when it was
printed; the Java probe prints the same clock, so events of different processes can be ordered):

- ``state``: ``generation``, ``memberId``, ``assignment`` (sorted partitions of the topic); printed
  whenever one of them changes (and on ``state``)
- ``assigned`` / ``revoked`` / ``lost``: ``partitions``, from the rebalance listener
- ``records``: ``records`` as ``[partition, offset, key]`` in delivery order
- ``limit``: the member's record limit was reached; it delivers no more records
- ``committed``: ``offsets`` ``{"partition": offset}`` as committed
- ``closed``; ``error`` with ``message`` (then the member exits 1)
"""

from __future__ import annotations

import json
import os
import queue
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.support.reference import REPO_ROOT

SETTLE_TIMEOUT = 45.0


# ====================================================================================== test side


@dataclass
class GroupView:
    """The broker's view of a classic group (read on the broker's loop)."""

    state: str
    generation: int
    leader: str | None
    protocol: str | None
    #: member id -> (group instance id, assigned partitions of the topic)
    members: dict[str, tuple[str | None, list[int]]]

    def instance_of(self, member_id: str) -> str | None:
        return self.members[member_id][0]

    def member_of(self, instance_id: str) -> str:
        return next(m for m, (inst, _) in self.members.items() if inst == instance_id)


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    """ConsumerProtocolAssignment (any version): topic -> partitions. Empty bytes: nothing."""
    if not data:
        return {}
    pos = 2  # version
    (n,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out: dict[str, list[int]] = {}
    for _ in range(n):
        (ln,) = struct.unpack_from(">h", data, pos)
        topic = data[pos + 2 : pos + 2 + ln].decode()
        pos += 2 + ln
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out[topic] = sorted(struct.unpack_from(f">{count}i", data, pos))
        pos += 4 * count
    return out


def group_view(bt: Any, group_id: str, topic: str) -> GroupView | None:
    def read() -> GroupView | None:
        g = bt.broker.groups.state.groups.get(group_id)
        if g is None:
            return None
        members = {
            mid: (m.group_instance_id, decode_assignment(bytes(m.assignment)).get(topic, []))
            for mid, m in g.members.items()
        }
        return GroupView(g.state.value, g.generation, g.leader_id, g.protocol_name, members)

    return bt.call(read)


def wait_state(bt: Any, group: str, topic: str, state: str, timeout: float = 30) -> GroupView:
    """Wait until the broker has the group in ``state``."""
    deadline = time.monotonic() + timeout
    while (view := group_view(bt, group, topic)) is None or view.state != state:
        assert time.monotonic() < deadline, f"group {group} is not {state}: {view}"
        time.sleep(0.02)
    return view


def produce(bt: Any, topic: str, partitions: int, per_partition: int) -> dict[int, list[str]]:
    """Write ``per_partition`` records to each partition (key ``"p-i"``); partition -> keys."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bt.bootstrap, acks="all", linger_ms=2)
    try:
        futures = [
            producer.send(topic, key=f"{p}-{i}".encode(), value=b"v", partition=p)
            for i in range(per_partition)
            for p in range(partitions)
        ]
        producer.flush(30)
        for f in futures:
            f.get(30)
    finally:
        producer.close(timeout=5)
    return {p: [f"{p}-{i}" for i in range(per_partition)] for p in range(partitions)}


class Member:
    """One group member process; its stdout events are collected by a reader thread."""

    def __init__(self, name: str, cmd: list[str]):
        self.name = name
        self.cmd = cmd
        self.proc = subprocess.Popen(
            cmd,
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.events: list[dict] = []
        self.noise: list[str] = []
        self._stderr: list[str] = []
        self._cond = threading.Condition()
        self._eof = False
        threading.Thread(target=self._pump_out, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()

    def _pump_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            with self._cond:
                if line.startswith("{"):
                    self.events.append(json.loads(line))
                else:
                    self.noise.append(line)
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)

    # ------------------------------------------------------------------ reading

    def stderr_tail(self, n: int = 3000) -> str:
        return "".join(self._stderr)[-n:]

    def describe(self) -> str:
        return (
            f"member {self.name} (pid {self.proc.pid}, rc {self.proc.poll()}): "
            f"last events {self.events[-6:]}\nstderr tail:\n{self.stderr_tail()}"
        )

    @property
    def state(self) -> dict | None:
        with self._cond:
            return next((e for e in reversed(self.events) if e["event"] == "state"), None)

    def mark(self) -> int:
        """An index into the events; ``events_since(mark)`` gives what came after."""
        with self._cond:
            return len(self.events)

    def events_since(self, mark: int, kind: str | None = None) -> list[dict]:
        with self._cond:
            return [e for e in self.events[mark:] if kind is None or e["event"] == kind]

    def records(self, since: int = 0) -> list[tuple[int, int, str]]:
        return [tuple(r) for e in self.events_since(since, "records") for r in e["records"]]

    def wait_event(
        self, kind: str, pred: Callable[[dict], bool] = lambda e: True, since: int = 0, timeout: float = 30
    ) -> dict:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for e in self.events[since:]:
                    if e["event"] == "error":
                        raise AssertionError(f"{self.name} failed: {e}\n{self.describe()}")
                    if e["event"] == kind and pred(e):
                        return e
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    raise AssertionError(f"no {kind!r} event from {self.name}\n{self.describe()}")
                self._cond.wait(left)

    def wait_records(self, n: int, since: int = 0, timeout: float = 30) -> list[tuple[int, int, str]]:
        deadline = time.monotonic() + timeout
        while True:
            got = self.records(since)
            if len(got) >= n:
                return got
            if time.monotonic() > deadline or not self.alive:
                raise AssertionError(f"{self.name}: {len(got)} of {n} records\n{self.describe()}")
            with self._cond:
                self._cond.wait(0.1)

    # ------------------------------------------------------------------ driving

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def commit(self) -> dict[int, int]:
        mark = self.mark()
        self.send("commit")
        e = self.wait_event("committed", since=mark)
        return {int(p): off for p, off in e["offsets"].items()}

    def close(self, timeout: float = 30) -> None:
        """Close the consumer (KafkaConsumer.close() and its equivalents) and wait for the exit."""
        mark = self.mark()
        self.send("close")
        self.wait_event("closed", since=mark, timeout=timeout)
        rc = self.proc.wait(timeout)
        assert rc == 0, self.describe()

    def kill(self) -> None:
        """SIGKILL: the member vanishes without a word to the broker."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def cleanup(self) -> None:
        if self.alive:
            self.proc.kill()
            self.proc.wait(10)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass


class MemberPool:
    """Starts members and kills whatever is left at the end of the test."""

    def __init__(self) -> None:
        self.members: list[Member] = []

    def python(self, name: str, **config: Any) -> Member:
        return self._add(Member(name, [sys.executable, "-m", "tests.support.groups", json.dumps(config)]))

    def java(self, java: Any, name: str, bootstrap: str, group: str, topic: str, **props: Any) -> Member:
        args = [bootstrap, group, topic, *(f"{k}={v}" for k, v in props.items())]
        return self._add(Member(name, java.command("GroupProbe", args)))

    def _add(self, m: Member) -> Member:
        self.members.append(m)
        return m

    def cleanup(self) -> None:
        for m in self.members:
            m.cleanup()


def wait_settled(
    bt: Any,
    group: str,
    topic: str,
    members: list[Member],
    partitions: int = 6,
    timeout: float = SETTLE_TIMEOUT,
) -> GroupView:
    """Wait until the group is Stable with exactly ``members``, each reporting the broker's current
    generation and the assignment the broker holds for it, and the assignments are disjoint,
    complete (every partition) and balanced (sizes differ by at most one)."""
    deadline = time.monotonic() + timeout
    problem = ""
    while True:
        view = group_view(bt, group, topic)
        problem = _unsettled(view, members, partitions)
        if not problem:
            return view  # type: ignore[return-value]
        for m in members:
            if not m.alive:
                raise AssertionError(f"{m.name} exited\n{m.describe()}")
        if time.monotonic() > deadline:
            details = "\n".join(m.describe() for m in members)
            raise AssertionError(f"group {group} did not settle: {problem}\nbroker: {view}\n{details}")
        time.sleep(0.05)


def _unsettled(view: GroupView | None, members: list[Member], partitions: int) -> str:
    if view is None:
        return "no such group"
    if view.state != "Stable":
        return f"state {view.state}"
    states = {m.name: m.state for m in members}
    if any(s is None for s in states.values()):
        return "a member has not reported yet"
    ids = {s["memberId"] for s in states.values()}  # type: ignore[index]
    if ids != set(view.members) or len(ids) != len(members):
        return f"members {sorted(ids)} != broker's {sorted(view.members)}"
    for name, s in states.items():
        assert s is not None
        if s["generation"] is not None and s["generation"] != view.generation:
            return f"{name} at generation {s['generation']}, broker at {view.generation}"
        if s["assignment"] != view.members[s["memberId"]][1]:
            return f"{name} holds {s['assignment']}, broker assigned {view.members[s['memberId']][1]}"
    owned = [p for s in states.values() for p in s["assignment"]]  # type: ignore[index]
    if sorted(owned) != list(range(partitions)):
        return f"assignments not disjoint and complete: {sorted(owned)}"
    sizes = [len(s["assignment"]) for s in states.values()]  # type: ignore[index]
    if max(sizes) - min(sizes) > 1:
        return f"unbalanced: {sizes}"
    return ""


# ------------------------------------------------------------------------ KIP-848 consumer groups


@dataclass
class ConsumerGroupView:
    """The broker's view of a KIP-848 consumer group (read on the broker's loop)."""

    state: str
    group_epoch: int
    assignment_epoch: int
    #: member id -> (instance id, member epoch, partitions of the topic it owns now)
    members: dict[str, tuple[str | None, int, list[int]]]
    #: member id -> partitions of the topic in its target assignment
    target: dict[str, list[int]]

    def member_of(self, instance_id: str) -> str:
        return next(m for m, (inst, _, _) in self.members.items() if inst == instance_id)


def consumer_group_view(bt: Any, group_id: str, topic: str) -> ConsumerGroupView | None:
    def read() -> ConsumerGroupView | None:
        g = bt.broker.groups.state.consumer_groups.get(group_id)
        if g is None:
            return None
        ids = {tid for tid, meta in g.topics.items() if meta.name == topic}

        def of(parts: dict) -> list[int]:
            return sorted(p for tid, ps in parts.items() if tid in ids for p in ps)

        members = {mid: (m.instance_id, m.member_epoch, of(m.assigned)) for mid, m in g.members.items()}
        target = {mid: of(t) for mid, t in g.target.items()}
        return ConsumerGroupView(g.state.value, g.group_epoch, g.assignment_epoch, members, target)

    return bt.call(read)


def wait_consumer_settled(
    bt: Any,
    group: str,
    topic: str,
    members: list[Member],
    partitions: int = 6,
    timeout: float = SETTLE_TIMEOUT,
) -> ConsumerGroupView:
    """The KIP-848 counterpart of :func:`wait_settled`: the consumer group is Stable with exactly
    ``members``, each member's epoch is the assignment epoch, every member reports the member id
    and the partitions the broker holds for it, and the assignments are disjoint, complete and
    balanced."""
    deadline = time.monotonic() + timeout
    while True:
        view = consumer_group_view(bt, group, topic)
        problem = _consumer_unsettled(view, members, partitions)
        if not problem:
            return view  # type: ignore[return-value]
        for m in members:
            if not m.alive:
                raise AssertionError(f"{m.name} exited\n{m.describe()}")
        if time.monotonic() > deadline:
            details = "\n".join(m.describe() for m in members)
            raise AssertionError(
                f"consumer group {group} did not settle: {problem}\nbroker: {view}\n{details}"
            )
        time.sleep(0.05)


def _consumer_unsettled(view: ConsumerGroupView | None, members: list[Member], partitions: int) -> str:
    if view is None:
        return "no such group"
    if view.state != "Stable":
        return f"state {view.state}"
    states = {m.name: m.state for m in members}
    if any(s is None for s in states.values()):
        return "a member has not reported yet"
    ids = {s["memberId"] for s in states.values()}  # type: ignore[index]
    if ids != set(view.members) or len(ids) != len(members):
        return f"members {sorted(ids)} != broker's {sorted(view.members)}"
    for name, s in states.items():
        assert s is not None
        _, epoch, owned = view.members[s["memberId"]]
        if epoch != view.assignment_epoch:
            return f"{name} at epoch {epoch}, assignment epoch {view.assignment_epoch}"
        if s["generation"] is not None and s["generation"] != epoch:
            return f"{name} reports epoch {s['generation']}, broker has {epoch}"
        if s["assignment"] != owned:
            return f"{name} holds {s['assignment']}, broker assigned {owned}"
    owned_all = [p for s in states.values() for p in s["assignment"]]  # type: ignore[index]
    if sorted(owned_all) != list(range(partitions)):
        return f"assignments not disjoint and complete: {sorted(owned_all)}"
    sizes = [len(s["assignment"]) for s in states.values()]  # type: ignore[index]
    if max(sizes) - min(sizes) > 1:
        return f"unbalanced: {sizes}"
    return ""


def wait_consumer_empty(bt: Any, group: str, topic: str, timeout: float = 30) -> ConsumerGroupView:
    """Wait until the broker has the consumer group Empty (it exists, without members)."""
    deadline = time.monotonic() + timeout
    while (view := consumer_group_view(bt, group, topic)) is None or view.state != "Empty" or view.members:
        assert time.monotonic() < deadline, f"consumer group {group} is not Empty: {view}"
        time.sleep(0.02)
    return view


def assignments(members: list[Member]) -> dict[str, list[int]]:
    return {m.name: m.state["assignment"] for m in members}  # type: ignore[index]


# ========================================================================================= scenarios

#: Broker settings for group tests: no initial rebalance delay, short sessions allowed.
GROUP_CONFIG = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}
PARTITIONS = 6

StartMember = Callable[[str], Member]


def consumed_everything(members: list[Member], expected: dict[int, list[str]], timeout: float = 30) -> None:
    """Each member has delivered every record of the partitions it now owns."""
    deadline = time.monotonic() + timeout
    while True:
        missing = {}
        for m in members:
            owned = set(m.state["assignment"])  # type: ignore[index]
            got = {k for p, _, k in m.records() if p in owned}
            lacking = {k for p in owned for k in expected[p]} - got
            if lacking:
                missing[m.name] = sorted(lacking)[:5]
        if not missing:
            return
        if time.monotonic() > deadline:
            details = "\n".join(m.describe() for m in members)
            raise AssertionError(f"records of owned partitions not consumed: {missing}\n{details}")
        time.sleep(0.05)


def lifecycle(bt: Any, group: str, topic: str, start: StartMember) -> list[GroupView]:
    """Three members share the topic; one closes (leaves), the other two take everything; a new one
    joins and gets a share; one is SIGKILLed and after its session timeout the two survivors own
    every partition. Each step is checked with :func:`wait_settled`; returns the views."""
    expected = produce(bt, topic, PARTITIONS, 10)
    views = []
    a, b, c = start("a"), start("b"), start("c")
    views.append(wait_settled(bt, group, topic, [a, b, c]))
    assert sorted(map(len, assignments([a, b, c]).values())) == [2, 2, 2]

    c.close()
    views.append(wait_settled(bt, group, topic, [a, b]))
    assert sorted(map(len, assignments([a, b]).values())) == [3, 3]

    d = start("d")
    views.append(wait_settled(bt, group, topic, [a, b, d]))
    assert d.state["assignment"], "the new member got no partitions"  # type: ignore[index]

    lost = set(b.state["assignment"])  # type: ignore[index]
    b.kill()
    views.append(wait_settled(bt, group, topic, [a, d]))
    assert lost <= set(a.state["assignment"]) | set(d.state["assignment"])  # type: ignore[index]
    consumed_everything([a, d], expected)
    generations = [v.generation for v in views]
    assert generations == sorted(set(generations)), f"generations must increase: {generations}"
    return views


def static_restart(bt: Any, group: str, topic: str, start: StartMember, role: str, how: str) -> None:
    """Static members s1, s2, s3 (instance ids = names) join one at a time, so s1 is the leader, s2
    a follower that has rejoined since it first joined, s3 the newest member. The one named by
    ``role`` ("leader", "follower", "newest") is closed (a static member does not leave) or
    SIGKILLed (``how``) and restarted with the same instance id. The group keeps its generation and
    every member its assignment; the others see nothing (no revocation, no new generation, and
    their commits at the old generation are accepted)."""
    members: dict[str, Member] = {}
    for name in ("s1", "s2", "s3"):
        members[name] = start(name)
        view = wait_settled(bt, group, topic, list(members.values()))
    before = assignments(list(members.values()))
    target = {"leader": "s1", "follower": "s2", "newest": "s3"}[role]
    assert view.instance_of(view.leader) == "s1"  # type: ignore[arg-type]
    old_id = view.member_of(target)  # type: ignore[arg-type]
    others = [m for n, m in members.items() if n != target]
    marks = {m.name: m.mark() for m in others}

    if how == "kill":
        members[target].kill()
    else:
        members[target].close()
    members[target] = start(target)
    after = wait_settled(bt, group, topic, list(members.values()))

    new_id = after.member_of(target)  # type: ignore[arg-type]
    assert new_id != old_id, "the restarted member should have a new member id"
    assert after.generation == view.generation, (
        f"restarting static {role} {target} ({how}) started generation {after.generation} "
        f"(was {view.generation}); Kafka keeps the generation when the selected protocol is unchanged"
    )
    assert assignments(list(members.values())) == before
    if role == "leader":
        assert after.leader == new_id, "the restarted static leader stays the leader"
    for m in others:
        m.commit()  # accepted only at the group's current generation, outside a rebalance
        seen = [e for e in m.events_since(marks[m.name]) if e["event"] != "committed"]
        assert seen == [], f"{m.name} saw {seen} while static member {target} restarted"
    assert group_view(bt, group, topic).generation == view.generation  # type: ignore[union-attr]


def resume_after_commit(
    bt_factory: Callable[[], Any],
    restart: Callable[[Any], Any] | None,
    group: str,
    topic: str,
    start: Callable[[Any, str, int | None], Member],
    wait_empty: Callable[[Any, str, str], Any] | None = None,
) -> None:
    """Member A delivers part of the topic, commits exactly what it delivered and closes; (the broker
    restarts on the same data directory;) member B of the same group starts exactly at the
    committed offsets: together they deliver every record once. ``wait_empty`` waits until the
    broker has the group without members (default: a classic group, :func:`wait_state` Empty)."""
    bt = bt_factory()
    bt.call(bt.broker.create_topic, topic, PARTITIONS)
    expected = produce(bt, topic, PARTITIONS, 50)
    total = sum(map(len, expected.values()))
    a = start(bt, "a", 110)
    a.wait_event("limit")
    committed = a.commit()
    a.close()
    first = a.records()
    assert len(first) == 110, first
    assert len({(p, o) for p, o, _ in first}) == 110, "A delivered a record twice"
    # what A committed is the position after what it delivered, per partition
    delivered_to = {p: max(o for q, o, _ in first if q == p) + 1 for p in {q for q, _, _ in first}}
    assert {p: off for p, off in committed.items() if p in delivered_to} == delivered_to
    assert all(off == 0 for p, off in committed.items() if p not in delivered_to), committed
    if restart is not None:
        bt = restart(bt)
    if wait_empty is None:
        view = wait_state(bt, group, topic, "Empty")
        assert not view.members, view
    else:
        wait_empty(bt, group, topic)
    fetched = bt.call(lambda: _committed(bt, group, topic))
    assert fetched == {p: off for p, off in committed.items()}, "the broker lost committed offsets"

    b = start(bt, "b", None)
    rest = b.wait_records(total - 110)
    starts = {}
    for p, o, _ in rest:
        starts.setdefault(p, o)
    assert starts == {p: committed.get(p, 0) for p in starts}, (
        f"B started at {starts}, the group committed {committed}"
    )
    both = [(p, o) for p, o, _ in first + rest]
    assert len(both) == len(set(both)), "a record was delivered twice"
    assert sorted(k for _, _, k in first + rest) == sorted(k for ks in expected.values() for k in ks)


def _committed(bt: Any, group: str, topic: str) -> dict[int, int]:
    offsets = bt.broker.groups.state.offsets.get(group)
    if offsets is None:
        return {}
    return {p: c.offset for p, c in offsets.by_topic.get(topic, {}).items()}


# ===================================================================================== member side


def _emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, "ts": time.monotonic(), **fields}) + "\n")
    sys.stdout.flush()


def _commands() -> queue.Queue[str]:
    q: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in sys.stdin:
            if line.strip():
                q.put(line.strip())
        q.put("close")

    threading.Thread(target=read, daemon=True).start()
    return q


class _Tracker:
    """Prints ``state`` when (generation, member id, assignment) changes; counts delivered records."""

    def __init__(self, limit: int | None):
        self.last: tuple | None = None
        self.limit = limit
        self.delivered = 0

    def update(self, generation: int | None, member_id: str, assignment: list[int], force: bool = False):
        now = (generation, member_id, sorted(assignment))
        if force or now != self.last:
            self.last = now
            _emit("state", generation=generation, memberId=member_id, assignment=now[2])

    def budget(self) -> int:
        return 500 if self.limit is None else self.limit - self.delivered

    def deliver(self, records: list[list]) -> bool:
        """Report records; True when the limit has just been reached."""
        if records:
            self.delivered += len(records)
            _emit("records", records=records)
            if self.limit is not None and self.delivered >= self.limit:
                _emit("limit", count=self.delivered)
                return True
        return False


def _member_kafka_python(cfg: dict, commands: queue.Queue[str]) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.errors import UnknownBrokerIdError

    class BrokenAssignor(RangePartitionAssignor):
        """A deliberately broken assignor (tests/control/test_invariants.py): every member gets
        every partition."""

        name = "broken"

        @classmethod
        def assign(cls, cluster, members):
            out = super().assign(cluster, members)
            every: dict[str, set[int]] = {}
            for a in out.values():
                for tp in a.partitions():
                    every.setdefault(tp.topic, set()).add(tp.partition)
            everything = sorted((t, sorted(ps)) for t, ps in every.items())
            return {mid: type(a)(a.version, everything, b"") for mid, a in out.items()}

    assignors = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "cooperative-sticky": CooperativeStickyAssignor,
        "broken": BrokenAssignor,
    }
    tracker = _Tracker(cfg.get("limit"))
    consumer = KafkaConsumer(
        bootstrap_servers=cfg["bootstrap"],
        group_id=cfg["group"],
        group_instance_id=cfg.get("instance_id"),
        client_id=cfg.get("client_id", "kp-member"),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=cfg["session_ms"],
        heartbeat_interval_ms=cfg["heartbeat_ms"],
        max_poll_interval_ms=cfg.get("max_poll_ms", 30000),
        partition_assignment_strategy=[assignors[cfg.get("strategy", "range")]],
    )
    paused = False

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            _emit("revoked", partitions=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned):
            _emit("assigned", partitions=sorted(tp.partition for tp in assigned))
            if paused:
                consumer.pause(*assigned)

        def on_partitions_lost(self, lost):
            _emit("lost", partitions=sorted(tp.partition for tp in lost))

    consumer.subscribe(topics=[cfg["topic"]], listener=Listener())
    # kafka-python 3.0.12 can drop a rejoin that a metadata change started (a leader's first
    # assignment, made before its coordinator saw the topic's metadata, differs from the metadata
    # that arrives next) when poll() returns while that JoinGroup is in flight: its heartbeat never
    # restarts and the broker rightly expires it. Fetching the metadata and handing it to the
    # coordinator before the first join avoids that rejoin.
    consumer.partitions_for_topic(cfg["topic"])
    consumer._coordinator._handle_metadata_update(consumer._client.cluster)

    def report(force: bool = False) -> None:
        gen = consumer._coordinator._generation
        tracker.update(
            gen.generation_id, gen.member_id, [tp.partition for tp in consumer.assignment()], force
        )

    while True:
        while not commands.empty():
            cmd = commands.get()
            if cmd == "close":
                consumer.close(autocommit=False)
                _emit("closed")
                return
            if cmd == "commit":
                offsets = {tp: consumer.position(tp) for tp in consumer.assignment()}
                consumer.commit({tp: OffsetAndMetadata(off, "", -1) for tp, off in offsets.items()})
                _emit("committed", offsets={str(tp.partition): off for tp, off in offsets.items()})
            elif cmd == "state":
                report(force=True)
        try:
            polled = consumer.poll(timeout_ms=100, max_records=max(tracker.budget(), 1))
        except UnknownBrokerIdError as e:
            # kafka-python 3.0.12 takes a Fetch response's KIP-951 leader hint even for a node it
            # has no metadata for (it ignores node_endpoints), then its next poll() raises from
            # send_fetches and leaves that node marked as having a fetch in flight, so it is never
            # fetched from again. Opt-in (the multi-node cluster's acceptance): report it, unmark
            # the node, poll again (it has asked for the metadata that makes the node known).
            if not cfg.get("unknown_broker_workaround"):
                raise
            _emit("client-bug", message=f"{type(e).__name__}: {e}")
            consumer._fetcher._nodes_with_pending_fetch_requests.discard(e.args[0] if e.args else None)
            continue
        records = [[r.partition, r.offset, r.key.decode()] for recs in polled.values() for r in recs]
        if tracker.deliver(records):
            paused = True
            consumer.pause(*consumer.assignment())
        report()


def _member_aiokafka(cfg: dict, commands: queue.Queue[str]) -> None:
    import asyncio

    async def run() -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
        tracker = _Tracker(cfg.get("limit"))
        consumer = AIOKafkaConsumer(
            bootstrap_servers=cfg["bootstrap"],
            group_id=cfg["group"],
            group_instance_id=cfg.get("instance_id"),
            client_id=cfg.get("client_id", "aio-member"),
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=cfg["session_ms"],
            heartbeat_interval_ms=cfg["heartbeat_ms"],
            max_poll_interval_ms=cfg.get("max_poll_ms", 30000),
            partition_assignment_strategy=(assignors[cfg.get("strategy", "range")],),
        )
        paused = False

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                _emit("revoked", partitions=sorted(tp.partition for tp in revoked))

            def on_partitions_assigned(self, assigned):
                _emit("assigned", partitions=sorted(tp.partition for tp in assigned))
                if paused:
                    consumer.pause(*assigned)

        consumer.subscribe([cfg["topic"]], listener=Listener())
        await consumer.start()

        def report(force: bool = False) -> None:
            c = consumer._coordinator
            tracker.update(c.generation, c.member_id, [tp.partition for tp in consumer.assignment()], force)

        while True:
            while not commands.empty():
                cmd = commands.get()
                if cmd == "close":
                    await consumer.stop()
                    _emit("closed")
                    return
                if cmd == "commit":
                    offsets = {tp: await consumer.position(tp) for tp in consumer.assignment()}
                    await consumer.commit(offsets)
                    _emit("committed", offsets={str(tp.partition): off for tp, off in offsets.items()})
                elif cmd == "state":
                    report(force=True)
            polled = await consumer.getmany(timeout_ms=100, max_records=max(tracker.budget(), 1))
            records = [[r.partition, r.offset, r.key.decode()] for recs in polled.values() for r in recs]
            if tracker.deliver(records):
                paused = True
                consumer.pause(*consumer.assignment())
            report()

    asyncio.run(run())


def _confluent_generation(consumer: Any) -> int | None:
    """The generation in librdkafka's serialized group metadata ("CGMDv2:" + int32, host order)."""
    try:
        data = bytes(consumer.consumer_group_metadata())
    except Exception:
        return None
    if not data.startswith(b"CGMDv2:"):
        return None
    return struct.unpack_from("=i", data, 7)[0]


def _member_confluent(cfg: dict, commands: queue.Queue[str]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    conf = {
        "bootstrap.servers": cfg["bootstrap"],
        "group.id": cfg["group"],
        "client.id": cfg.get("client_id", "ck-member"),
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "max.poll.interval.ms": cfg.get("max_poll_ms", 30000),
    }
    if cfg.get("protocol") == "consumer":
        # KIP-848: the session timeout, heartbeat interval and assignor live on the broker; the
        # client may only name a server-side assignor (librdkafka refuses the classic settings)
        conf["group.protocol"] = "consumer"
        if cfg.get("remote_assignor"):
            conf["group.remote.assignor"] = cfg["remote_assignor"]
    else:
        conf["session.timeout.ms"] = cfg["session_ms"]
        conf["heartbeat.interval.ms"] = cfg["heartbeat_ms"]
        conf["partition.assignment.strategy"] = cfg.get("strategy", "range")
    if cfg.get("instance_id"):
        conf["group.instance.id"] = cfg["instance_id"]
    tracker = _Tracker(cfg.get("limit"))
    consumer = Consumer(conf)
    topic = cfg["topic"]

    def parts(ps: list) -> list[int]:
        return sorted(tp.partition for tp in ps)

    consumer.subscribe(
        [topic],
        on_assign=lambda c, ps: _emit("assigned", partitions=parts(ps)),
        on_revoke=lambda c, ps: _emit("revoked", partitions=parts(ps)),
        on_lost=lambda c, ps: _emit("lost", partitions=parts(ps)),
    )

    def report(force: bool = False) -> None:
        tracker.update(
            _confluent_generation(consumer), consumer.memberid() or "", parts(consumer.assignment()), force
        )

    limited = False
    while True:
        while not commands.empty():
            cmd = commands.get()
            if cmd == "close":
                consumer.close()
                _emit("closed")
                return
            if cmd == "commit":
                positions = consumer.position(consumer.assignment())
                offsets = {tp.partition: tp.offset for tp in positions if tp.offset >= 0}
                if offsets:
                    consumer.commit(
                        offsets=[TopicPartition(topic, p, off) for p, off in offsets.items()],
                        asynchronous=False,
                    )
                _emit("committed", offsets={str(p): off for p, off in offsets.items()})
            elif cmd == "state":
                report(force=True)
        if limited:
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:  # fetched before the pause: give it back
                consumer.seek(TopicPartition(topic, msg.partition(), msg.offset()))
            report()
            continue
        msgs = consumer.consume(num_messages=min(tracker.budget(), 500), timeout=0.1)
        records = []
        for m in msgs:
            if m.error() is not None:
                _emit("warning", message=str(m.error()))
                continue
            records.append([m.partition(), m.offset(), m.key().decode()])
        if tracker.deliver(records):
            limited = True
            consumer.pause(consumer.assignment())
        report()


def main(argv: list[str]) -> int:
    cfg = json.loads(argv[0])
    if cfg.get("log_level"):  # client library logs on stderr, for debugging a test
        import logging

        logging.basicConfig(
            level=cfg["log_level"], stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
        )
    commands = _commands()
    run = {"kafka-python": _member_kafka_python, "aiokafka": _member_aiokafka, "confluent": _member_confluent}
    try:
        run[cfg["client"]](cfg, commands)
    except BaseException as e:  # reported on stdout so the test shows it
        import traceback

        traceback.print_exc()
        _emit("error", message=f"{type(e).__name__}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
