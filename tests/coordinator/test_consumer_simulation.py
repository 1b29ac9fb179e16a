"""Seeded simulation of KIP-848 consumer groups with the real assignors.

Random joins, heartbeats, leaves, static leaves and rejoins, crashes (members that stop
heartbeating until their session expires), partitions added, coordinator restarts and clock jumps.
After every step: no partition is held by two members (assigned or pending revocation), and the
replayed log equals the live group. After the disturbances stop and every live member keeps
heartbeating, every member converges to the group epoch, Stable, and the members together own
every subscribed partition. Set CONSUMER_SIM_SEED to replay one seed.
"""

from __future__ import annotations

import os
import random
import uuid
from dataclasses import dataclass, field

import pytest

from broker.coordinator.consumer.assign import assign
from broker.coordinator.consumer.group import ConsumerGroupState
from broker.coordinator.consumer.reconcile import MemberState
from broker.protocol.errors import ErrorCode

from .test_consumer_heartbeat import Ctx, T, TopicInfo

RUNS = int(os.environ.get("CONSUMER_SIM_RUNS", "60"))
STEPS = int(os.environ.get("CONSUMER_SIM_STEPS", "120"))


@dataclass
class Client:
    member_id: str
    instance: str | None
    epoch: int = 0
    owned: set[int] = field(default_factory=set)
    live: bool = True  # heartbeating
    joined: bool = False


class Sim:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.ctx = Ctx(partitions=self.rng.randint(1, 12))
        self.ctx.assign = assign  # the real server-side assignor (uniform)
        self.clients: list[Client] = []
        self.trace: list[str] = []

    def hb(self, c: Client, epoch: int | None = None):
        e = c.epoch if epoch is None else epoch
        req_owned = None if e in (0, -1, -2) else set(c.owned)
        r = self.ctx.hb(
            c.member_id, e, owned=req_owned, instance=c.instance, subscribe=("t",) if e == 0 else None
        )
        r = self._apply(c, r, e)
        self.trace.append(
            f"t={self.ctx.clock.ms} {c.member_id}@{e} -> {ErrorCode(r.error_code).name} epoch {r.member_epoch}"
        )
        return r

    def _apply(self, c: Client, r, sent_epoch: int):
        if r.error_code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            c.epoch, c.owned, c.joined = 0, set(), False  # the client gives everything up and rejoins
        elif r.error_code == 0:
            if sent_epoch in (-1, -2):
                c.joined = False
                c.epoch = 0
                c.owned = set()
            else:
                c.joined = True
                c.epoch = r.member_epoch
                if r.assignment is not None:
                    c.owned = {p for tp in r.assignment.topic_partitions for p in tp.partitions}
        return r

    def step(self) -> None:
        rng = self.rng
        action = rng.choices(
            ["join", "hb", "hb", "hb", "leave", "static_leave", "crash", "grow", "restart", "jump"],
            [3, 10, 10, 10, 1, 1, 1, 1, 1, 2],
        )[0]
        live = [c for c in self.clients if c.live]
        if action == "join" or not live:
            static = rng.random() < 0.3
            idx = len(self.clients)
            c = Client(f"m{idx}-{uuid.UUID(int=rng.getrandbits(128))}", f"inst-{idx}" if static else None)
            self.clients.append(c)
            self.hb(c, 0)
        elif action == "hb":
            c = rng.choice(live)
            self.hb(c, 0 if not c.joined else None)
        elif action == "leave":
            c = rng.choice([c for c in live if c.joined] or live)
            if c.joined:
                self.hb(c, -1)
                c.live = False
        elif action == "static_leave":
            statics = [c for c in live if c.instance and c.joined]
            if statics:
                c = rng.choice(statics)
                self.hb(c, -2)
                # the same instance restarts under a new member id at once
                c.member_id = f"{c.member_id.split('-')[0]}r-{uuid.UUID(int=rng.getrandbits(128))}"
                self.hb(c, 0)
        elif action == "crash":
            c = rng.choice(live)
            c.live = False
            self.trace.append(f"{c.member_id} crashes")
        elif action == "grow":
            info = self.ctx.topics.registry.topics["t"]
            self.ctx.topics.registry.topics["t"] = TopicInfo(T, info.partitions + rng.randint(1, 3))
            self.trace.append("partitions added")
        elif action == "restart":
            self.ctx = self.ctx.restarted()
            self.trace.append("coordinator restart")
        elif action == "jump":
            self.advance(rng.choice([1000, 5000, 20000, 50000]))

    def advance(self, ms: int) -> None:
        self.ctx.advance(ms)
        self.trace.append(f"clock +{ms}")

    def check(self) -> None:
        group = self.ctx.state.consumer_groups.get("g")
        if group is None:
            return
        held: dict[int, str] = {}
        for m in group.members.values():
            mine = set(m.progress.assigned.get(T, ())) | set(m.progress.pending_revocation.get(T, ()))
            for p in mine:
                assert p not in held, f"partition {p} held by {held[p]} and {m.member_id}"
                held[p] = m.member_id
        replayed = self.ctx.restarted().state.consumer_groups.get("g")
        assert replayed is not None
        assert (replayed.group_epoch, replayed.assignment_epoch, replayed.target) == (
            group.group_epoch,
            group.assignment_epoch,
            group.target,
        )
        assert {k: v.progress for k, v in replayed.members.items()} == {
            k: v.progress for k, v in group.members.items()
        }

    def converge(self) -> None:
        live = [c for c in self.clients if c.live]
        self.advance(60000)  # the crashed expire; the live are then re-synced below
        for _ in range(12):
            for c in live:
                self.hb(c, 0 if not c.joined else None)
                self.check()
        group = self.ctx.state.consumer_groups["g"]
        assert group.state == ConsumerGroupState.STABLE, group.state
        assert set(group.members) == {c.member_id for c in live}
        for m in group.members.values():
            assert (m.member_epoch, m.progress.state) == (group.group_epoch, MemberState.STABLE)
        owned = [p for m in group.members.values() for p in m.progress.assigned.get(T, ())]
        if live:
            assert sorted(owned) == list(range(self.ctx.topics.registry.topics["t"].partitions))


def _run(seed: int) -> None:
    sim = Sim(seed)
    try:
        for _ in range(STEPS):
            sim.step()
            sim.check()
        sim.converge()
    except AssertionError as e:
        tail = "\n".join(sim.trace[-25:])
        pytest.fail(f"seed {seed}: {e}\nlast steps:\n{tail}")


def test_consumer_group_simulation():
    seeds = [int(os.environ["CONSUMER_SIM_SEED"])] if "CONSUMER_SIM_SEED" in os.environ else range(RUNS)
    for seed in seeds:
        _run(seed)
