"""A seeded random simulation of classic-protocol clients against the coordinator.

Clients follow the protocol as a real consumer does (two-step join, leader assignment, SyncGroup,
heartbeats, rejoin on REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION, reset on UNKNOWN_MEMBER_ID, stop on
FENCED_INSTANCE_ID); the simulation disturbs them with joins (dynamic and static), leaves, crashes,
static restarts, clock jumps and coordinator restarts. After every step:

- a Stable group's assignment (one byte per partition, see context.assignment) gives no partition to
  two members, and the clients the coordinator would accept as current (member of the group, current
  generation) hold exactly that assignment, disjointly;
- a heartbeat or commit accepted by the coordinator comes from a current member of the current
  generation;
- the log replayed from scratch (an incremental shadow replay, equivalent to a restart) matches the
  last GroupMetadata record of every group (compaction safety), the live offsets, and every live group
  that is Stable or Empty;

and once the disturbances stop and the clients keep heartbeating/rejoining, every live client ends in
the same Stable generation, whose members are exactly the live clients, covering every partition,
and the group then stays put.

``COORD_SIM_SEED=<n>`` runs one seed (printed by any failure); ``COORD_SIM_RUNS`` / ``COORD_SIM_STEPS``
size the sweeps. ``test_simulation_with_metadata_changes`` also lets clients rejoin under the same
member id with another subscription or protocol preference (so the selected protocol changes across
generations): it fails while replay keeps stale member metadata (see test_restart.py).
"""

from __future__ import annotations

import os
import random
import uuid
from dataclasses import dataclass, field

import pytest

from broker.coordinator.classic.group import GroupState
from broker.coordinator.runtime import Slot
from broker.coordinator.state import CoordinatorState
from broker.coordinator.timers import ManualTimers
from broker.protocol.errors import ErrorCode as E

from .context import (
    START_MS,
    CoordinatorContext,
    assignment,
    decode_assignment,
    group_view,
    persisted_view,
    record_view,
    subscription,
)

RUNS = int(os.environ.get("COORD_SIM_RUNS", "200"))
STEPS = int(os.environ.get("COORD_SIM_STEPS", "150"))
GROUPS = ["sim-a", "sim-b"]
PARTITIONS = 6
INSTANCES = [f"inst-{i}" for i in range(4)]


class SimulationError(AssertionError):
    pass


@dataclass
class Client:
    name: str
    group: str
    instance: str | None
    version: int  # JoinGroup version; the others follow as a client of that vintage
    session_ms: int
    rebalance_ms: int
    topics: list[str]
    preference: list[str] = field(default_factory=lambda: ["range"])
    member_id: str = ""
    generation: int = -1
    previous: tuple[str, int] | None = None  # (member id, generation) before the latest join
    state: str = "new"  # new | joining | syncing | stable | dead | left
    join_slot: Slot | None = None
    sync_slot: Slot | None = None
    assigned: set[int] | None = None
    next_hb: int = 0
    log: list[str] = field(default_factory=list)

    @property
    def live(self) -> bool:
        return self.state not in ("dead", "left")

    @property
    def sync_version(self) -> int:
        return {3: 2, 4: 3, 5: 3, 6: 4}.get(self.version, 5)

    @property
    def hb_version(self) -> int:
        return {3: 2, 4: 2, 5: 3, 6: 4}.get(self.version, 4)

    protocol_name: str = "range"

    @property
    def protocols(self) -> list[tuple[str, bytes]]:
        return [(name, subscription(self.topics)) for name in self.preference]


class Simulation:
    def __init__(self, seed: int, metadata_changes: bool = False):
        self.seed = seed
        self.metadata_changes = metadata_changes
        self.rng = random.Random(seed)
        delay = self.rng.choice([0, 1000, 3000])
        self.ctx = CoordinatorContext(
            topics={"t": PARTITIONS, "u": 2},
            initial_rebalance_delay_ms=delay,
            offsets_retention_ms=120_000,
            offsets_retention_check_interval_ms=20_000,
            new_id=seeded_ids(seed),
        )
        self.clients: list[Client] = []
        self.counter = 0
        self.trace: list[str] = []
        self.shadow = CoordinatorState(self.ctx.config, ManualTimers(self.ctx.clock))
        self.shadow_at = 0
        self.last_record: dict[str, object] = {}

    # ------------------------------------------------------------------ helpers

    def fail(self, message: str) -> None:
        tail = "\n  ".join(self.trace[-40:])
        raise SimulationError(f"seed {self.seed}: {message}\n  last steps:\n  {tail}")

    def note(self, text: str) -> None:
        self.trace.append(f"t={self.ctx.now - START_MS} {text}")

    def preference(self) -> list[str]:
        if not self.metadata_changes:
            return ["range"]
        return self.rng.sample(["range", "roundrobin"], 2)

    def live_clients(self, group: str | None = None) -> list[Client]:
        return [c for c in self.clients if c.live and (group is None or c.group == group)]

    def group_state(self, name: str):
        return self.ctx.state.groups.get(name)

    # ------------------------------------------------------------------ client protocol

    def new_client(self, static: bool) -> Client | None:
        instance = None
        if static:
            used = {c.instance for c in self.live_clients()}
            free = [i for i in INSTANCES if i not in used]
            if not free:
                return None
            instance = self.rng.choice(free)
        self.counter += 1
        client = Client(
            name=f"k{self.counter}",
            group=self.rng.choice(GROUPS),
            instance=instance,
            version=self.rng.randint(5, 9) if static else self.rng.randint(3, 9),
            session_ms=self.rng.choice([6_000, 10_000]),
            rebalance_ms=self.rng.choice([6_000, 12_000, 20_000]),
            topics=["t"],
            preference=self.preference(),
        )
        if instance is not None:  # a static instance keeps its group
            for c in self.clients:
                if c.instance == instance:
                    client.group = c.group
        self.clients.append(client)
        self.note(f"{client.name} starts ({client.group}, {instance}, v{client.version})")
        self.start_join(client)
        return client

    def start_join(self, c: Client) -> None:
        c.state, c.assigned = "joining", None
        slot, result = self.ctx.join(
            c.group,
            member_id=c.member_id,
            instance=c.instance,
            protocols=c.protocols,
            version=c.version,
            session_ms=c.session_ms,
            rebalance_ms=c.rebalance_ms,
            client_id=c.name,
        )
        if result.response is slot:
            c.join_slot = slot
        else:
            self.on_join(c, result.response)

    def on_join(self, c: Client, resp) -> None:
        err = resp.error_code
        self.note(f"{c.name} join -> {E(err).name} gen {resp.generation_id}")
        if err == E.NONE:
            if c.member_id and c.generation >= 0:
                c.previous = (c.member_id, c.generation)
            c.member_id, c.generation = resp.member_id, resp.generation_id
            c.protocol_name = resp.protocol_name
            plan = None
            if resp.leader == c.member_id and not resp.skip_assignment:
                ids = sorted(m.member_id for m in resp.members)
                if ids:
                    plan = {
                        mid: assignment(p for p in range(PARTITIONS) if p % len(ids) == i)
                        for i, mid in enumerate(ids)
                    }
            c.state = "syncing"
            slot, result = self.ctx.sync(
                c.group,
                c.generation,
                c.member_id,
                plan,
                instance=c.instance,
                version=c.sync_version,
                protocol_type="consumer" if c.sync_version >= 5 else None,
                protocol_name=c.protocol_name if c.sync_version >= 5 else None,
            )
            if result.response is slot:
                c.sync_slot = slot
            else:
                self.on_sync(c, result.response)
        elif err == E.MEMBER_ID_REQUIRED:
            c.member_id = resp.member_id
            self.start_join(c)
        elif err == E.UNKNOWN_MEMBER_ID:
            c.member_id, c.generation = "", -1
            self.start_join(c)
        elif err == E.REBALANCE_IN_PROGRESS:
            pass  # a superseded parked join; the newer one is pending
        elif err == E.FENCED_INSTANCE_ID:
            c.state = "dead"
        else:
            self.fail(f"{c.name}: unexpected JoinGroup error {E(err).name}")

    def on_sync(self, c: Client, resp) -> None:
        err = resp.error_code
        self.note(f"{c.name} sync -> {E(err).name}")
        if err == E.NONE:
            c.state, c.assigned = "stable", decode_assignment(resp.assignment)
            c.next_hb = self.ctx.now + c.session_ms // 4
        elif err in (E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION):
            self.start_join(c)
        elif err == E.UNKNOWN_MEMBER_ID:
            c.member_id, c.generation = "", -1
            self.start_join(c)
        elif err == E.FENCED_INSTANCE_ID:
            c.state = "dead"
        else:
            self.fail(f"{c.name}: unexpected SyncGroup error {E(err).name}")

    def stale_request(self, c: Client) -> None:
        """A delayed request from an earlier identity of a client (an old generation, or a process
        that crashed or was replaced): whatever the coordinator accepts must be current."""
        member_id, generation = (
            c.previous if (c.previous and self.rng.random() < 0.5) else (c.member_id, c.generation)
        )
        if not member_id:
            return
        instance = c.instance
        if self.rng.random() < 0.5:
            err = self.ctx.heartbeat(c.group, generation, member_id, instance, 4).error_code
            what = "heartbeat"
        else:
            result = self.ctx.commit(
                c.group, {("t", 0): 1}, generation, member_id, instance=instance, version=8
            )
            err = result.response.topics[0].partitions[0].error_code
            what = "commit"
        self.note(f"stale {what} of {c.name} ({member_id[:12]}, gen {generation}) -> {E(err).name}")
        g = self.group_state(c.group)
        simple_to_empty = what == "commit" and generation < 0 and (g is None or g.state == GroupState.EMPTY)
        if err == E.NONE and not simple_to_empty:  # see commit(): generation -1 into an empty group
            self.check_identity(c.group, member_id, generation, f"stale {what} of {c.name}", what == "commit")

    def heartbeat(self, c: Client) -> None:
        instance = c.instance if c.hb_version >= 3 else None
        err = self.ctx.heartbeat(c.group, c.generation, c.member_id, instance, c.hb_version).error_code
        if err == E.NONE:
            self.check_current(c, "heartbeat")
            c.next_hb = self.ctx.now + c.session_ms // 4
        elif err in (E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION):
            self.note(f"{c.name} heartbeat -> {E(err).name}")
            self.start_join(c)
        elif err == E.UNKNOWN_MEMBER_ID:
            self.note(f"{c.name} heartbeat -> UNKNOWN_MEMBER_ID")
            c.member_id, c.generation = "", -1
            self.start_join(c)
        elif err == E.FENCED_INSTANCE_ID:
            self.note(f"{c.name} heartbeat -> FENCED")
            c.state = "dead"
        else:
            self.fail(f"{c.name}: unexpected Heartbeat error {E(err).name}")

    def commit(self, c: Client) -> None:
        version = self.rng.randint(7, 9) if c.instance else self.rng.randint(1, 9)
        partition = self.rng.choice(sorted(c.assigned)) if c.assigned else 0
        result = self.ctx.commit(
            c.group,
            {("t", partition): self.rng.randint(0, 1000)},
            c.generation,
            c.member_id,
            instance=c.instance,
            version=version,
        )
        g_before = self.group_state(c.group)
        simple_to_empty = c.generation < 0 and (g_before is None or g_before.state == GroupState.EMPTY)
        err = result.response.topics[0].partitions[0].error_code
        allowed = (
            E.NONE,
            E.REBALANCE_IN_PROGRESS,
            E.ILLEGAL_GENERATION,
            E.UNKNOWN_MEMBER_ID,
            E.FENCED_INSTANCE_ID,
        )
        if err not in allowed:
            self.fail(f"{c.name}: unexpected OffsetCommit error {E(err).name}")
        if err == E.NONE and not simple_to_empty:
            # Kafka accepts a commit with generation -1 into an empty (or unknown) group whoever
            # sends it; any other accepted commit must come from a current member
            self.check_current(c, "commit", commit=True)

    def check_current(self, c: Client, what: str, commit: bool = False) -> None:
        self.check_identity(c.group, c.member_id, c.generation, f"{what} of {c.name}", commit)

    def check_identity(
        self, group: str, member_id: str, generation: int, what: str, commit: bool = False
    ) -> None:
        g = self.group_state(group)
        if g is None or member_id not in g.members or generation != g.generation:
            self.fail(f"{what} ({member_id}, gen {generation}) accepted but it is not current")
        accepting = {GroupState.STABLE, GroupState.PREPARING_REBALANCE}
        if not commit:
            accepting.add(GroupState.COMPLETING_REBALANCE)
        if g.state not in accepting:
            self.fail(f"{what} accepted in state {g.state.value}")

    def react(self, *_args) -> None:
        """Clients answer whatever parked requests were answered, until nothing moves."""
        moved = True
        while moved:
            moved = False
            for c in list(self.clients):
                if not c.live:
                    continue
                if c.join_slot is not None and c.join_slot.done():
                    slot, c.join_slot = c.join_slot, None
                    self.on_join(c, slot.value)
                    moved = True
                if c.live and c.sync_slot is not None and c.sync_slot.done():
                    slot, c.sync_slot = c.sync_slot, None
                    self.on_sync(c, slot.value)
                    moved = True

    def heartbeats_due(self) -> None:
        for c in list(self.clients):
            if c.state == "stable" and self.ctx.now >= c.next_hb:
                self.heartbeat(c)
        self.react()

    def tick(self, max_ms: int = 1000) -> None:
        self.ctx.advance(self.rng.randint(0, max_ms), after_each=self.react)
        self.react()
        self.heartbeats_due()

    # ------------------------------------------------------------------ disturbances

    def step(self) -> None:
        rng = self.rng
        live = self.live_clients()
        stable = [c for c in live if c.state == "stable"]
        action = rng.choices(
            [
                "tick",
                "join",
                "static",
                "leave",
                "crash",
                "restart_static",
                "jump",
                "restart",
                "commit",
                "rejoin",
                "stale",
            ],
            weights=[40, 6, 4, 4, 3, 3, 2, 2, 10, 4, 8],
        )[0]
        if action == "tick":
            self.tick()
        elif action == "join" and len(live) < 8:
            self.new_client(static=False)
        elif action == "static" and len(live) < 8:
            self.new_client(static=True)
        elif action == "leave" and live:
            c = rng.choice(live)
            version = rng.randint(3, 5) if (c.instance and rng.random() < 0.5) else rng.randint(0, 5)
            self.note(f"{c.name} leaves (v{version})")
            if version >= 3 and c.instance and rng.random() < 0.5:
                resp, _ = self.ctx.leave(c.group, members=[("", c.instance)], version=version)
            else:
                resp, _ = self.ctx.leave(c.group, member_id=c.member_id, version=version)
            codes = [resp.error_code] + [m.error_code for m in resp.members]
            if any(code not in (E.NONE, E.UNKNOWN_MEMBER_ID) for code in codes):
                self.fail(f"{c.name}: unexpected LeaveGroup errors {codes}")
            c.state = "left"
        elif action == "crash" and live:
            c = rng.choice(live)
            self.note(f"{c.name} crashes")
            c.state = "dead"
        elif action == "restart_static":
            statics = [c for c in live if c.instance]
            if statics:
                old = rng.choice(statics)
                self.note(f"{old.name} restarts as a new process")
                old.state = "dead"
                self.counter += 1
                new = Client(
                    name=f"k{self.counter}",
                    group=old.group,
                    instance=old.instance,
                    version=rng.randint(5, 9),
                    session_ms=old.session_ms,
                    rebalance_ms=old.rebalance_ms,
                    topics=list(old.topics),
                    preference=list(old.preference),
                )
                self.clients.append(new)
                self.start_join(new)
        elif action == "jump":
            ms = rng.randint(5_000, 40_000)
            self.note(f"clock jumps {ms} ms")
            self.ctx.advance(ms, after_each=self.react)
            self.react()
            self.heartbeats_due()
        elif action == "restart":
            self.note("coordinator restarts")
            self.ctx.restart()
            for c in live:  # connections drop: parked requests are retried as a new JoinGroup
                if c.join_slot is not None or c.sync_slot is not None:
                    c.join_slot = c.sync_slot = None
                    self.start_join(c)
        elif action == "stale":
            candidates = [c for c in self.clients if c.member_id or c.previous]
            if candidates:
                self.stale_request(rng.choice(candidates))
        elif action == "commit" and stable:
            self.commit(rng.choice(stable))
        elif action == "rejoin" and stable:
            c = rng.choice(stable)
            if self.metadata_changes and rng.random() < 0.5:
                if rng.random() < 0.5:
                    c.topics = ["t", "u"] if c.topics == ["t"] else ["t"]
                else:
                    c.preference = c.preference[::-1]
            self.note(f"{c.name} rejoins")
            self.start_join(c)
        self.react()

    # ------------------------------------------------------------------ invariants

    def sync_shadow(self) -> None:
        log = self.ctx.log
        for i in range(self.shadow_at, len(log)):
            record = log[i].decode()
            self.shadow.replay(record, i, log[i].timestamp)
            if record.type == 2:  # GroupMetadata
                self.last_record[record.key.group] = record.value
        self.shadow_at = len(log)

    def check(self) -> None:
        self.sync_shadow()
        live_view, shadow_view = persisted_view(self.ctx.state), persisted_view(self.shadow)
        if live_view["offsets"] != shadow_view["offsets"]:
            self.fail("replayed offsets differ from the live ones")
        for gid, value in self.last_record.items():
            replayed = self.shadow.groups.get(gid)
            if value is None:
                if replayed is not None and gid not in self.shadow.offsets:
                    self.fail(f"group {gid} is tombstoned but replay still has it")
                continue
            if replayed is None:
                self.fail(f"group {gid} has a record but replay lost it")
            if group_view(replayed) != record_view(value):
                self.fail(
                    f"replay of {gid} differs from its last record:\n{group_view(replayed)}\n{record_view(value)}"
                )
        for gid, g in self.ctx.state.groups.items():
            replayed = self.shadow.groups.get(gid)
            if g.state in (GroupState.STABLE, GroupState.EMPTY):
                if replayed is None:
                    if g.state is GroupState.STABLE or g.generation > 0:
                        self.fail(
                            f"live group {gid} ({g.state.value}, gen {g.generation}) was never persisted"
                        )
                elif group_view(g) != group_view(replayed):
                    self.fail(f"live {gid} differs from replay:\n{group_view(g)}\n{group_view(replayed)}")
            if g.state is GroupState.STABLE:
                self.check_assignment(gid, g)

    def check_assignment(self, gid: str, g) -> None:
        seen: dict[int, str] = {}
        for m in g.members.values():
            for p in decode_assignment(m.assignment):
                if p in seen:
                    self.fail(f"partition {p} of {gid} assigned to {seen[p]} and {m.member_id}")
                seen[p] = m.member_id
        current = [
            c
            for c in self.live_clients(gid)
            if c.state == "stable" and c.member_id in g.members and c.generation == g.generation
        ]
        for c in current:
            if c.assigned != decode_assignment(g.members[c.member_id].assignment):
                self.fail(
                    f"{c.name} holds {c.assigned}, the coordinator says {g.members[c.member_id].assignment!r}"
                )
        owners = [c.member_id for c in current]
        if len(owners) != len(set(owners)):
            self.fail(f"two live clients share a member id in {gid}: {owners}")

    def converged(self) -> bool:
        for gid in GROUPS:
            clients = self.live_clients(gid)
            g = self.group_state(gid)
            if not clients:
                if g is not None and (g.members or g.state is not GroupState.EMPTY):
                    return False
                continue
            if g is None or g.state is not GroupState.STABLE:
                return False
            if {c.member_id for c in clients} != set(g.members):
                return False
            if any(c.state != "stable" or c.generation != g.generation for c in clients):
                return False
        return True

    def check_final(self) -> None:
        for gid in GROUPS:
            clients = self.live_clients(gid)
            if not clients:
                continue
            owned = [p for c in clients for p in sorted(c.assigned or ())]
            if sorted(owned) != list(range(PARTITIONS)):
                self.fail(f"{gid}: partitions owned {sorted(owned)} by {[c.name for c in clients]}")

    # ------------------------------------------------------------------ run

    def run(self, steps: int) -> None:
        for _ in range(3):
            self.new_client(static=self.rng.random() < 0.4)
        for _ in range(steps):
            self.step()
            self.check()
        self.note("calm")
        deadline = self.ctx.now + 180_000
        while not self.converged():
            if self.ctx.now > deadline:
                states = [
                    (c.name, c.group, c.state, c.member_id[:12], c.generation) for c in self.live_clients()
                ]
                groups = {
                    gid: (g.state.value, g.generation, sorted(m[:12] for m in g.members))
                    for gid, g in self.ctx.state.groups.items()
                }
                self.fail(f"no convergence: clients {states}, groups {groups}")
            self.tick(500)
            self.check()
        self.check_final()
        settled = len(self.ctx.log)
        for _ in range(60):  # a converged group stays put while everybody heartbeats
            self.tick(500)
            self.check()
        # (tombstones of member-less groups are the periodic clean-up, not movement)
        extra = [r for r in self.ctx.records(settled) if r.type == 2 and r.value is not None]
        if extra or not self.converged():
            self.fail(f"the converged groups moved again: {len(extra)} new group records")


def seeds(runs: int) -> list[int]:
    if "COORD_SIM_SEED" in os.environ:
        return [int(os.environ["COORD_SIM_SEED"])]
    return list(range(runs))


def seeded_ids(seed: int):
    """Member ids (UUID strings) that follow the run's seed, so a seed replays exactly."""
    rng = random.Random(seed ^ 0x5EED)
    return lambda: str(uuid.UUID(int=rng.getrandbits(128), version=4))


def sweep(metadata_changes: bool, runs: int) -> None:
    failures = []
    chosen = seeds(runs)
    for seed in chosen:
        try:
            Simulation(seed, metadata_changes).run(STEPS)
        except SimulationError as e:
            failures.append(str(e))
        except Exception as e:  # a crash inside the coordinator
            failures.append(f"seed {seed}: {type(e).__name__}: {e}")
    if failures:
        pytest.fail(f"{len(failures)} of {len(chosen)} runs failed; first:\n{failures[0]}", pytrace=False)


def test_simulation():
    sweep(metadata_changes=False, runs=RUNS)


def test_simulation_with_metadata_changes():
    sweep(metadata_changes=True, runs=max(RUNS // 4, 1))
