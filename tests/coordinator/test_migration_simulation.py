"""Seeded simulation of online migration: classic and consumer-protocol clients join, leave, die and
flip protocol at random on one group (topic foo, 6 partitions), with the real server-side assignor
and a manual clock. ``MIGRATION_SIM_SEED`` replays one seed.

Invariants, checked after every operation:
- no partition is owned by two live clients at once (each client's own view: what its last
  answer gave it), nor held twice in the coordinator's consumer-group state;
- a member that stays in a consumer group never loses a partition that stays in its target;
- the state replayed from the log equals the live state.
At the end, with churn stopped and the survivors heartbeating, the group converges: stable, and
every partition owned by exactly one client.
"""

from __future__ import annotations

import os
import random

import pytest

from broker.coordinator.consumer.assign import assign as server_assign
from broker.coordinator.consumer.group import ConsumerGroupState
from broker.coordinator.embedded import decode_assignment, encode_assignment
from broker.coordinator.runtime import Slot
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.sync_group import SyncGroupRequestAssignment

from .test_consumer_heartbeat import T, parts
from .test_migration import MigCtx

ALL = set(range(6))


class Client:
    """One consumer process: ``classic`` (eager in a classic group, cooperative inside a consumer
    group, as a CooperativeSticky Java client behaves) or ``consumer`` (KIP-848)."""

    def __init__(self, name: str, protocol: str):
        self.name, self.protocol = name, protocol
        self.member_id = name if protocol == "consumer" else ""
        self.epoch = 0  # consumer: member epoch; classic: generation
        self.owned: set[int] = set()
        self.phase = "join"  # classic: join | joining | sync | syncing | stable
        self.slot = None
        self.leader = False
        self.members: list[str] = []

    # ------------------------------------------------------------------ one step of the client

    def tick(self, c: MigCtx) -> None:
        if self.protocol == "consumer":
            self._consumer_tick(c)
        else:
            self._classic_tick(c)

    def _consumer_tick(self, c: MigCtx) -> None:
        r = c.hb(self.member_id, self.epoch, owned=sorted(self.owned) if self.epoch else None)
        if r.error_code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            self.owned, self.epoch = set(), 0  # lose everything, rejoin
            return
        assert r.error_code == 0, (self.name, ErrorCode(r.error_code))
        self.epoch = r.member_epoch
        if r.assignment is not None:
            self.owned = parts(r) or set()

    def _classic_tick(self, c: MigCtx) -> None:
        in_consumer_group = "g" in c.state.consumer_groups
        if self.phase == "stable":
            code = c.cheartbeat(self.member_id, self.epoch)
            if code == 0:
                return
            if code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id, self.owned = "", set()
            elif code == ErrorCode.ILLEGAL_GENERATION:
                self.owned = set()
            elif not in_consumer_group:
                self.owned = set()  # eager: revoke everything before rejoining
            self.phase = "join"
            return
        if self.phase == "join":
            self.slot = c.cjoin(self.member_id, owned=sorted(self.owned))
            self.phase = "joining"
        if self.phase == "joining":
            r = self.slot.value if isinstance(self.slot, Slot) else self.slot
            if r is None:
                return  # parked in a classic rebalance
            if r.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id, self.phase = r.member_id, "join"
                return
            if r.error_code != 0:
                if r.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                self.owned, self.phase = set(), "join"
                return
            self.member_id, self.epoch = r.member_id, r.generation_id
            self.leader = r.leader == r.member_id
            self.members = [m.member_id for m in r.members]
            self.phase = "sync"
        if self.phase == "sync":
            assignments = []
            if self.leader:  # round robin, as a classic leader's assignor would
                ms = sorted(self.members)
                for m in ms:
                    mine = [p for p in sorted(ALL) if ms[p % len(ms)] == m]
                    assignments.append(SyncGroupRequestAssignment(m, encode_assignment({"foo": mine})))
            self.slot = c.csync(self.member_id, self.epoch, assignments=assignments)
            self.phase = "syncing"
        if self.phase == "syncing":
            r = self.slot.value if isinstance(self.slot, Slot) else self.slot
            if r is None:
                return
            if r.error_code != 0:
                if r.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                if r.error_code != ErrorCode.REBALANCE_IN_PROGRESS or "g" not in c.state.consumer_groups:
                    self.owned = set()
                self.phase = "join"
                return
            self.owned = set(decode_assignment(r.assignment).get("foo", []))
            self.phase = "stable"

    def leave(self, c: MigCtx) -> None:
        if self.protocol == "consumer":
            if self.epoch:
                c.hb(self.member_id, -1)
        elif self.member_id:
            c.cleave(self.member_id)
        self.owned = set()


class Sim:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.c = MigCtx(initial_rebalance_delay_ms=0)
        self.c.assign = server_assign
        self.clients: list[Client] = []
        self.n = 0
        self.prev: dict[str, tuple[set[int], set[int]]] = {}

    def new_client(self, protocol: str | None = None) -> None:
        self.n += 1
        self.clients.append(Client(f"m{self.n}", protocol or self.rng.choice(["classic", "consumer"])))

    def check(self) -> None:
        seen: dict[int, str] = {}
        for cl in self.clients:
            for p in cl.owned:
                assert p not in seen, f"partition {p} owned by {seen[p]} and {cl.name}"
                seen[p] = cl.name
        g = self.c.state.consumer_groups.get("g")
        now: dict[str, tuple[set[int], set[int]]] = {}
        if g is not None:
            held: dict[int, str] = {}
            for m in g.members.values():
                mine = set(m.assigned.get(T, ())) | set(m.progress.pending_revocation.get(T, ()))
                for p in mine:
                    assert p not in held, f"partition {p} held by {held[p]} and {m.member_id}"
                    held[p] = m.member_id
                now[m.member_id] = (set(m.assigned.get(T, ())), set(g.target.get(m.member_id, {}).get(T, ())))
            for mid, (assigned, target) in now.items():
                if mid in self.prev:
                    kept = self.prev[mid][0] & target
                    assert kept <= assigned, f"{mid} lost {kept - assigned}, still in its target"
        self.prev = now

    def step(self) -> None:
        live = self.clients
        roll = self.rng.random()
        if roll < 0.08 and len(live) < 5:
            self.new_client()
        elif roll < 0.13 and live:
            cl = self.rng.choice(live)
            cl.leave(self.c)
            live.remove(cl)
        elif roll < 0.18 and live:
            cl = self.rng.choice(live)  # roll the member to the other protocol
            cl.leave(self.c)
            live.remove(cl)
            self.new_client("consumer" if cl.protocol == "classic" else "classic")
        elif roll < 0.20 and live:
            cl = self.rng.choice(live)  # killed: no leave; its session expires
            live.remove(cl)
        elif roll < 0.30:
            self.c.advance(self.rng.choice([100, 500, 2000]))
        elif live:
            self.rng.choice(live).tick(self.c)
        self.check()

    def converge(self) -> None:
        if not self.clients:
            self.new_client()
        for _ in range(200):
            self.c.advance(300)
            for cl in list(self.clients):
                cl.tick(self.c)
            self.check()
        owned = sorted(p for cl in self.clients for p in cl.owned)
        assert owned == sorted(ALL), f"not every partition owned once: {owned}"
        g = self.c.state.consumer_groups.get("g")
        if g is not None:
            assert g.state == ConsumerGroupState.STABLE
            kinds = {"classic" if m.classic else "consumer" for m in g.members.values()}
            assert "consumer" in kinds or self.c.state.consumer_config.migration_policy != "bidirectional"
        else:
            assert self.c.state.groups["g"].state.value == "Stable"
            assert all(cl.protocol == "classic" for cl in self.clients)
        again = self.c.restarted()
        assert again.state.consumer_groups.keys() == self.c.state.consumer_groups.keys()
        if g is not None:
            assert again.members() == self.c.members() and again.targets() == self.c.targets()


def _run(seed: int, steps: int = 250) -> None:
    sim = Sim(seed)
    for _ in range(3):
        sim.new_client("classic")
    for _ in range(steps):
        sim.step()
    sim.converge()


def test_migration_simulation():
    seeds = [int(os.environ["MIGRATION_SIM_SEED"])] if "MIGRATION_SIM_SEED" in os.environ else range(40)
    for seed in seeds:
        try:
            _run(seed)
        except AssertionError as e:
            pytest.fail(f"seed {seed} (MIGRATION_SIM_SEED={seed}): {e}")
