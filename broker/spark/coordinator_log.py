"""The coordinator's records in ``__consumer_offsets`` as rows: every committed offset (the
``offsets`` view) and every membership and assignment change of every group (the ``groups`` view).

The log is replayed in order, as the broker does at start-up, so each row can carry the state it
happened in: a commit carries the generation (classic) or group epoch (KIP-848) in effect when it
was written, and a group row says whether a member joined, stayed, left, or was reassigned.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from struct import Struct

from broker.coordinator.generated import BY_NAME
from broker.coordinator.records import RecordError, decode_record
from broker.log.records import InvalidRecords

from . import logdir

_I16 = Struct(">h")
_I32 = Struct(">i")

OFFSET_COMMIT = BY_NAME["OffsetCommit"].id
GROUP_METADATA = BY_NAME["GroupMetadata"].id
CG_METADATA = BY_NAME["ConsumerGroupMetadata"].id
CG_MEMBER = BY_NAME["ConsumerGroupMemberMetadata"].id
CG_CURRENT = BY_NAME["ConsumerGroupCurrentMemberAssignment"].id

OFFSETS_SCHEMA = (
    "group string, topic string, partition int, offset long, leader_epoch int, metadata string, "
    "commit_timestamp timestamp, generation int, protocol string, deleted boolean, log_offset long"
)
GROUPS_SCHEMA = (
    "group string, protocol string, timestamp timestamp, log_offset long, generation int, event string, "
    "member_id string, instance_id string, client_id string, member_epoch int, members int, "
    "assignment array<struct<topic:string,partition:int>>"
)


def decode_consumer_assignment(data: bytes | None) -> list[tuple[str, int]]:
    """The partitions of a ConsumerProtocolAssignment (the classic consumer's embedded protocol);
    an empty list for empty or undecodable bytes (another protocol type)."""
    if not data or len(data) < 6:
        return []
    try:
        pos = 2  # version: every version starts with the same partitions array
        (n_topics,) = _I32.unpack_from(data, pos)
        pos += 4
        out = []
        for _ in range(max(n_topics, 0)):
            (n,) = _I16.unpack_from(data, pos)
            topic = data[pos + 2 : pos + 2 + n].decode()
            pos += 2 + n
            (count,) = _I32.unpack_from(data, pos)
            pos += 4
            for _ in range(max(count, 0)):
                out.append((topic, _I32.unpack_from(data, pos)[0]))
                pos += 4
        return sorted(out)
    except (struct.error, UnicodeDecodeError, IndexError):
        return []


def iter_coordinator_records(data_dir: str | Path) -> Iterator[tuple[int, int, object]]:
    """(log offset, timestamp ms, CoordinatorRecord) of the durable coordinator log, in order."""
    tp = (logdir.OFFSETS_TOPIC, 0)
    end = logdir.end_offset(data_dir, tp, logdir.durable_offsets(data_dir))
    start = logdir.log_start_offset(data_dir, *tp)
    for split in logdir.plan(data_dir, tp, start, end, fail_on_data_loss=False):
        cols = logdir.read_columns(split)
        for off, ts, k, v in zip(cols["offset"], cols["timestamp"], cols["key"], cols["value"], strict=True):
            try:
                yield off, ts, decode_record(k, v)
            except (RecordError, InvalidRecords, ValueError):
                continue  # a record type this reader does not know: skipped, as the broker would fail


def replay(data_dir: str | Path) -> tuple[list[tuple], list[tuple]]:
    """(offsets rows, groups rows) in the order of OFFSETS_SCHEMA and GROUPS_SCHEMA, with epoch-ms
    timestamps (the Spark sources convert them)."""
    topic_names = {t["id"]: name for name, t in logdir.topics(data_dir).items()}
    offsets: list[tuple] = []
    groups: list[tuple] = []
    generation: dict[str, int] = {}
    protocol: dict[str, str] = {}
    classic_members: dict[str, dict[str, tuple]] = {}
    cg_members: dict[str, dict[str, tuple]] = {}  # group -> member -> (instance, client)
    for off, ts, rec in iter_coordinator_records(data_dir):
        t, k, v = rec.type, rec.key, rec.value
        if t == OFFSET_COMMIT:
            g = k.group
            if v is None:
                offsets.append(
                    (
                        g,
                        k.topic,
                        k.partition,
                        None,
                        None,
                        None,
                        ts,
                        generation.get(g),
                        protocol.get(g),
                        True,
                        off,
                    )
                )
            else:
                offsets.append(
                    (g, k.topic, k.partition, v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                     generation.get(g), protocol.get(g), False, off)
                )  # fmt: skip
        elif t == GROUP_METADATA:
            g = k.group
            protocol[g] = "classic"
            before = classic_members.get(g, {})
            if v is None:
                for mid, (inst, client) in before.items():
                    groups.append(
                        (g, "classic", ts, off, generation.get(g), "leave", mid, inst, client, None, 0, [])
                    )
                groups.append(
                    (g, "classic", ts, off, generation.get(g), "deleted", None, None, None, None, 0, [])
                )
                classic_members.pop(g, None)
                continue
            generation[g] = v.generation
            now = {m.member_id: (m.group_instance_id, m.client_id) for m in v.members}
            n = len(now)
            for mid, (inst, client) in before.items():
                if mid not in now:
                    groups.append(
                        (g, "classic", ts, off, v.generation, "leave", mid, inst, client, v.generation, n, [])
                    )
            for m in v.members:
                event = "stay" if m.member_id in before else "join"
                assignment = [
                    {"topic": tp, "partition": p} for tp, p in decode_consumer_assignment(m.assignment)
                ]
                groups.append(
                    (g, "classic", ts, off, v.generation, event, m.member_id, m.group_instance_id, m.client_id,
                     v.generation, n, assignment)
                )  # fmt: skip
            if not v.members:
                groups.append((g, "classic", ts, off, v.generation, "empty", None, None, None, None, 0, []))
            classic_members[g] = now
        elif t == CG_METADATA:
            g = k.group_id
            protocol[g] = "consumer"
            members = cg_members.setdefault(g, {})
            if v is None:
                groups.append(
                    (g, "consumer", ts, off, generation.get(g), "deleted", None, None, None, None, 0, [])
                )
                cg_members.pop(g, None)
            else:
                generation[g] = v.epoch
                groups.append(
                    (g, "consumer", ts, off, v.epoch, "epoch", None, None, None, None, len(members), [])
                )
        elif t == CG_MEMBER:
            g, mid = k.group_id, k.member_id
            protocol[g] = "consumer"
            members = cg_members.setdefault(g, {})
            if v is None:
                inst, client = members.pop(mid, (None, None))
                groups.append(
                    (
                        g,
                        "consumer",
                        ts,
                        off,
                        generation.get(g),
                        "leave",
                        mid,
                        inst,
                        client,
                        None,
                        len(members),
                        [],
                    )
                )
            else:
                event = "update" if mid in members else "join"
                members[mid] = (v.instance_id, v.client_id)
                groups.append(
                    (g, "consumer", ts, off, generation.get(g), event, mid, v.instance_id, v.client_id, None,
                     len(members), [])
                )  # fmt: skip
        elif t == CG_CURRENT:
            g, mid = k.group_id, k.member_id
            members = cg_members.setdefault(g, {})
            if v is None:
                continue
            inst, client = members.get(mid, (None, None))
            assignment = sorted(
                (topic_names.get(tp.topic_id, str(tp.topic_id)), p)
                for tp in v.assigned_partitions
                for p in tp.partitions
            )
            groups.append(
                (g, "consumer", ts, off, generation.get(g), "assignment", mid, inst, client, v.member_epoch,
                 len(members), [{"topic": a, "partition": p} for a, p in assignment])
            )  # fmt: skip
    return offsets, groups
