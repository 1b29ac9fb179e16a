"""The facade's Heartbeat fast path (``groups.heartbeat_fast``, answered with a pre-encoded body)
against the general path (``groups.heartbeat``): for every group state and every kind of request,
the same error code, the same timers (keys and deadlines) and the same group state afterwards.

Each case builds the same history twice (member ids from a seeded generator), sends the request to
one context the way the facade does (fast path, else the general path) and to the other through the
general path only, then compares.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable

import pytest

from broker.coordinator import groups
from broker.coordinator.embedded import encode_subscription
from broker.protocol.generated.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from broker.protocol.generated.heartbeat import HeartbeatRequest

from .context import CoordinatorContext, persisted_view

Setup = Callable[[CoordinatorContext], list[tuple[str, int, str | None]]]


def ids(seed: int = 7) -> Callable[[], str]:
    rng = random.Random(seed)
    return lambda: str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _stable(c: CoordinatorContext) -> list[tuple[str, int, str | None]]:
    return [(m.member_id, m.generation, None) for m in c.stable_group("g", 3)]


def _stable_static(c: CoordinatorContext) -> list[tuple[str, int, str | None]]:
    return [(m.member_id, m.generation, m.instance) for m in c.stable_group("g", 2, ["i0", "i1"])]


def _completing(c: CoordinatorContext) -> list[tuple[str, int, str | None]]:
    return [(m.member_id, m.generation, None) for m in c.join_round("g", 2)]


def _preparing(c: CoordinatorContext) -> list[tuple[str, int, str | None]]:
    members = c.stable_group("g", 2)
    c.join("g", member_id=members[0].member_id, client_id="c0")  # the leader rejoins: a rebalance
    return [(m.member_id, m.generation, None) for m in members]


def _empty(c: CoordinatorContext) -> list[tuple[str, int, str | None]]:
    members = c.stable_group("g", 1)
    c.leave("g", members[0].member_id)
    return [(m.member_id, m.generation, None) for m in members]


def _session_timer_gone(c: CoordinatorContext) -> list[tuple[str, int, str | None]]:
    members = _stable(c)
    c.timers.cancel(c.group("g").members[members[0][0]].session_key("g"))
    return members


def _consumer_group_with_classic_member(c: CoordinatorContext) -> list[tuple[str, int, str | None]]:
    req = ConsumerGroupHeartbeatRequest(
        group_id="g",
        member_id="n",
        member_epoch=0,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=["foo"],
        topic_partitions=[],
    )
    assert c.consumer_heartbeat(req).error_code == 0
    slot, result = c.join("g", protocols=[("range", encode_subscription(["foo"], {}, version=1))])
    joined = c.answer(slot, result)
    slot, result = c.join(
        "g", member_id=joined.member_id, protocols=[("range", encode_subscription(["foo"], {}, version=1))]
    )
    joined = c.answer(slot, result)
    assert joined.error_code == 0 and "g" in c.state.consumer_groups
    return [(joined.member_id, joined.generation_id, None)]


SETUPS: dict[str, Setup] = {
    "stable": _stable,
    "stable-static": _stable_static,
    "completing-rebalance": _completing,
    "preparing-rebalance": _preparing,
    "empty": _empty,
    "session-timer-not-armed": _session_timer_gone,
    "consumer-group-classic-member": _consumer_group_with_classic_member,
    "unknown-group": lambda c: [("nobody", 1, None)],
}


def requests(members: list[tuple[str, int, str | None]]) -> list[tuple[str, HeartbeatRequest, int]]:
    """Every member as it is, at the wrong generation, with a wrong or missing instance id; a
    stranger; each at versions 0-4 (instance ids are read from v3)."""
    out = []
    for version in range(5):
        for i, (mid, gen, instance) in enumerate(members):
            out.append((f"m{i}-v{version}", HeartbeatRequest("g", gen, mid, instance), version))
            out.append((f"m{i}-gen-v{version}", HeartbeatRequest("g", gen + 1, mid, instance), version))
            out.append((f"m{i}-inst-v{version}", HeartbeatRequest("g", gen, mid, "other"), version))
            if instance is not None:
                out.append((f"m{i}-noinst-v{version}", HeartbeatRequest("g", gen, mid, None), version))
        out.append((f"stranger-v{version}", HeartbeatRequest("g", members[0][1], "stranger", None), version))
    return out


def build(setup: Setup) -> tuple[CoordinatorContext, list[tuple[str, int, str | None]]]:
    c = CoordinatorContext(new_id=ids(), initial_rebalance_delay_ms=0)
    members = setup(c)
    c.clock.ms += 1234  # heartbeats come later than the history
    return c, members


def snapshot(c: CoordinatorContext) -> tuple:
    g = c.state.groups.get("g")
    classic = None if g is None else (g.state, g.generation, sorted(g.members), sorted(g.pending_sync))
    return c.timers.due(), classic, persisted_view(c.state)


def facade_path(c: CoordinatorContext, req: HeartbeatRequest, version: int) -> tuple[int, bool]:
    if groups.heartbeat_fast(c.state, req, version, c.clock.ms):
        return 0, True
    return c.run(lambda now: groups.heartbeat(c.state, req, version, now)).response.error_code, False


def general_path(c: CoordinatorContext, req: HeartbeatRequest, version: int) -> int:
    return c.run(lambda now: groups.heartbeat(c.state, req, version, now)).response.error_code


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_fast_path_answers_and_schedules_as_the_general_path(setup):
    _, members = build(SETUPS[setup])
    fast_taken = 0
    for name, req, version in requests(members):
        fast_ctx, _ = build(SETUPS[setup])
        general_ctx, _ = build(SETUPS[setup])
        assert snapshot(fast_ctx) == snapshot(general_ctx), "the two histories differ"
        code, fast = facade_path(fast_ctx, req, version)
        fast_taken += fast
        assert code == general_path(general_ctx, req, version), f"{setup}/{name}"
        assert snapshot(fast_ctx) == snapshot(general_ctx), f"{setup}/{name}: state or timers differ"
    # the fast path must actually be exercised where it applies, and only there
    if setup in ("stable", "stable-static", "session-timer-not-armed"):
        assert fast_taken > 0
    else:
        assert fast_taken == 0
