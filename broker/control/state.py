"""Live state, read for the control API: groups, committed offsets, topics, connections.

Every function reads the broker's in-memory state on its event loop and returns plain JSON-able
values (dicts, lists, strings, numbers); nothing here changes anything.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from uuid import UUID

from broker.coordinator.classic.group import ClassicGroup
from broker.coordinator.consumer.group import ConsumerGroup, ConsumerMember

if TYPE_CHECKING:
    from broker.dispatch.services import Services


def _names(services: Services) -> dict[UUID, str]:
    return {t.topic_id: t.name for t in services.topics.all()}


def _assignment(a: Any, names: dict[UUID, str]) -> dict[str, list[int]]:
    """A KIP-848 assignment {topic id: partitions} as {topic name: sorted partitions}."""
    return {names.get(tid, str(tid)): sorted(ps) for tid, ps in sorted(a.items(), key=lambda kv: str(kv[0]))}


def _classic_assignment(raw: bytes) -> Any:
    """A consumer-protocol assignment (version, [(topic, [partitions])], user data) decoded, or
    the raw bytes as hex when it is not one."""
    if not raw:
        return {}
    try:
        pos = 2
        (n,) = _i32(raw, pos)
        pos += 4
        out: dict[str, list[int]] = {}
        for _ in range(n):
            (ln,) = _i16(raw, pos)
            pos += 2
            topic = raw[pos : pos + ln].decode()
            pos += ln
            (np,) = _i32(raw, pos)
            pos += 4
            parts = []
            for _ in range(np):
                (p,) = _i32(raw, pos)
                pos += 4
                parts.append(p)
            out[topic] = sorted(parts)
        return out
    except (IndexError, UnicodeDecodeError, ValueError):
        return {"raw": raw.hex()}


def _i32(b: bytes, pos: int) -> tuple[int]:
    if pos + 4 > len(b):
        raise ValueError("short")
    return (int.from_bytes(b[pos : pos + 4], "big", signed=True),)


def _i16(b: bytes, pos: int) -> tuple[int]:
    if pos + 2 > len(b):
        raise ValueError("short")
    return (int.from_bytes(b[pos : pos + 2], "big", signed=True),)


def _classic(g: ClassicGroup) -> dict[str, Any]:
    consumer = g.protocol_type == "consumer"
    return {
        "group_id": g.group_id,
        "type": "classic",
        "state": g.state.name,
        "generation": g.generation,
        "protocol_type": g.protocol_type,
        "protocol": g.protocol_name,
        "leader": g.leader_id,
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "session_timeout_ms": m.session_timeout_ms,
                "rebalance_timeout_ms": m.rebalance_timeout_ms,
                "protocols": m.protocol_names(),
                "assignment": _classic_assignment(m.assignment) if consumer else m.assignment.hex(),
            }
            for m in g.members.values()
        ],
    }


def _consumer_member(m: ConsumerMember, target: Any, names: dict[UUID, str]) -> dict[str, Any]:
    return {
        "member_id": m.member_id,
        "instance_id": m.instance_id,
        "rack_id": m.rack_id,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "member_epoch": m.member_epoch,
        "previous_member_epoch": m.progress.previous_member_epoch,
        "state": m.progress.state.name,
        "classic": m.classic is not None,
        "subscribed_topic_names": list(m.subscribed_topic_names),
        "subscribed_topic_regex": m.subscribed_topic_regex,
        "server_assignor": m.server_assignor,
        "assignment": _assignment(m.assigned, names),
        "pending_revocation": _assignment(m.progress.pending_revocation, names),
        "target_assignment": _assignment(target.get(m.member_id, {}), names),
    }


def _consumer(g: ConsumerGroup, names: dict[UUID, str]) -> dict[str, Any]:
    return {
        "group_id": g.group_id,
        "type": "consumer",
        "state": g.state.name,
        "group_epoch": g.group_epoch,
        "assignment_epoch": g.assignment_epoch,
        "members": [_consumer_member(m, g.target, names) for m in g.members.values()],
    }


def groups(services: Services) -> list[dict[str, Any]]:
    """Every group the coordinator holds, classic and consumer, by id."""
    st = services.groups.state
    names = _names(services)
    out = [_classic(g) for g in st.groups.values()]
    out += [_consumer(g, names) for g in st.consumer_groups.values() if not g.dead]
    return sorted(out, key=lambda g: g["group_id"])


def group(services: Services, group_id: str) -> dict[str, Any] | None:
    st = services.groups.state
    cg = st.consumer_groups.get(group_id)
    if cg is not None and not cg.dead:
        return _consumer(cg, _names(services))
    g = st.groups.get(group_id)
    return _classic(g) if g is not None else None


def offsets(services: Services, group_id: str) -> dict[str, Any] | None:
    """A group's committed offsets: {topic: {partition: {offset, leader_epoch, metadata, commit_timestamp}}}."""
    st = services.groups.state
    o = st.offsets.get(group_id)
    if o is None:
        return None
    return {
        topic: {
            str(p): {
                "offset": c.offset,
                "leader_epoch": c.leader_epoch,
                "metadata": c.metadata,
                "commit_timestamp": c.commit_timestamp,
            }
            for p, c in sorted(parts.items())
        }
        for topic, parts in sorted(o.by_topic.items())
        if parts
    }


def topics(services: Services) -> list[dict[str, Any]]:
    """Every topic with, per partition, log start offset, log end offset and high watermark."""
    out = []
    for t in sorted(services.topics.all(), key=lambda t: t.name):
        parts = []
        for p in range(t.partitions):
            plog = services.logs.get(t.name, p)
            if plog is None:
                continue
            parts.append(
                {
                    "partition": p,
                    "log_start_offset": plog.log_start_offset,
                    "log_end_offset": plog.log_end_offset,
                    "high_watermark": plog.high_watermark,
                }
            )
        out.append(
            {
                "name": t.name,
                "topic_id": str(t.topic_id),
                "internal": t.internal,
                "partitions": parts,
            }
        )
    return out


def connections(conns: Iterable[Any]) -> list[dict[str, Any]]:
    """The open client connections, by id."""
    now = time.time()
    out = []
    for c in conns:
        ci = c.client
        out.append(
            {
                "id": ci.connection_id,
                "peer": ci.peer,
                "listener": ci.listener,
                "node": ci.node_id,
                "client_id": ci.client_id,
                "client_software_name": ci.software_name,
                "client_software_version": ci.software_version,
                "open_seconds": round(now - getattr(c, "opened", now), 3),
            }
        )
    return sorted(out, key=lambda c: c["id"])
