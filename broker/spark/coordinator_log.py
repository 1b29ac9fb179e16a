"""The coordinator's records in ``__consumer_offsets`` as rows: every committed offset (the
``offsets`` view) and every membership and assignment change of every group (the ``groups`` view).

The log is replayed in order, as the broker does at start-up, so each row can carry the state it
happened in: a commit carries the generation (classic) or group epoch (KIP-848) in effect when it
was written, and a group row says whether a member joined, stayed, left, or was reassigned.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from broker.coordinator.consumer.records import CURRENT_ASSIGNMENT as CG_CURRENT
from broker.coordinator.consumer.records import GROUP_EPOCH as CG_METADATA
from broker.coordinator.consumer.records import MEMBER_METADATA as CG_MEMBER
from broker.coordinator.embedded import EmbeddedProtocolError, decode_assignment
from broker.coordinator.layout import reader_kafka_layout_from
from broker.coordinator.records import GROUP_METADATA, OFFSET_COMMIT, decode_record

from . import logdir

OFFSETS_SCHEMA = (
    "group string, topic string, partition int, offset long, leader_epoch int, metadata string, "
    "commit_timestamp timestamp, generation int, protocol string, owned boolean, deleted boolean, "
    "log_offset long"
)
GROUPS_SCHEMA = (
    "group string, protocol string, timestamp timestamp, log_offset long, generation int, event string, "
    "member_id string, instance_id string, client_id string, member_epoch int, members int, "
    "assignment array<struct<topic:string,partition:int>>, state_timestamp timestamp"
)
OFFSETS_COLUMNS = [c.split()[0] for c in OFFSETS_SCHEMA.split(", ")]
GROUPS_COLUMNS = [c.split()[0] for c in GROUPS_SCHEMA.split(", ")]
#: columns holding epoch milliseconds that the Spark source turns into timestamps
TIMESTAMP_COLUMNS = {"commit_timestamp", "timestamp", "state_timestamp"}


def with_datetimes(rows: Iterable[tuple], view: str) -> Iterator[tuple]:
    """Rows of the ``offsets`` or ``groups`` view with their epoch-ms columns as UTC datetimes (None
    for a negative or missing time), as Spark's timestamp columns take them."""
    from datetime import UTC, datetime

    names = OFFSETS_COLUMNS if view == "offsets" else GROUPS_COLUMNS
    stamps = [i for i, n in enumerate(names) if n in TIMESTAMP_COLUMNS]
    for row in rows:
        row = list(row)
        for i in stamps:
            ms = row[i]
            row[i] = datetime.fromtimestamp(ms / 1000, UTC) if ms is not None and ms >= 0 else None
        yield tuple(row)


def decode_consumer_assignment(data: bytes | None) -> list[tuple[str, int]]:
    """The partitions of a ConsumerProtocolAssignment (the classic consumer's embedded protocol);
    an empty list for empty or undecodable bytes (another protocol type)."""
    try:
        assignment = decode_assignment(data or b"")
    except EmbeddedProtocolError:
        return []
    return sorted((t, p) for t, ps in assignment.items() for p in ps)


def iter_coordinator_records(data_dir: str | Path) -> Iterator[tuple[int, int, object]]:
    """(log offset, timestamp ms, CoordinatorRecord) of the durable coordinator log, in order."""
    tp = (logdir.OFFSETS_TOPIC, 0)
    end = logdir.end_offset(data_dir, tp, logdir.durable_offsets(data_dir))
    start = logdir.log_start_offset(data_dir, *tp)
    kafka_layout_from = reader_kafka_layout_from(data_dir)  # below it, an earlier pykbroker's layout
    for split in logdir.plan(data_dir, tp, start, end, fail_on_data_loss=False):
        cols = logdir.read_columns(split)
        for off, ts, k, v in zip(cols["offset"], cols["timestamp"], cols["key"], cols["value"], strict=True):
            try:
                yield off, ts, decode_record(k, v, off < kafka_layout_from)
            except ValueError:
                continue  # a record type this reader does not know: skipped, as the broker would fail


def decode_records(
    items: Iterable[tuple[int, int, bytes | None, bytes | None]],
) -> Iterator[tuple[int, int, object]]:
    """(log offset, timestamp ms, CoordinatorRecord) of (offset, timestamp, key, value) read from a
    coordinator log over the wire, perhaps another broker's: records that do not decode here (unknown
    types, or layouts this broker does not share, see the README) are skipped. Values are decoded
    with Kafka's layouts: over the wire the data directory's layout offset (broker/coordinator/
    layout.py) is not known, so records an earlier pykbroker wrote in its legacy layouts may be
    misread or skipped."""
    for off, ts, k, v in items:
        if k is None:
            continue
        try:
            yield off, ts, decode_record(bytes(k), None if v is None else bytes(v))
        except (ValueError, struct.error, IndexError):
            continue


def replay(data_dir: str | Path) -> tuple[list[tuple], list[tuple]]:
    """:func:`replay_records` over a data directory's durable coordinator log."""
    topic_names = {t["id"]: name for name, t in logdir.topics(data_dir).items()}
    return replay_records(iter_coordinator_records(data_dir), topic_names)


def replay_records(
    records: Iterable[tuple[int, int, object]], topic_names: Mapping[uuid.UUID, str]
) -> tuple[list[tuple], list[tuple]]:
    """(offsets rows, groups rows) in the column order of OFFSETS_SCHEMA and GROUPS_SCHEMA, with
    timestamps in epoch ms (the Spark source converts them), from the coordinator log's records in
    order (per group: a group's records are all in one partition of ``__consumer_offsets``).
    ``topic_names`` maps topic ids (KIP-848 assignments) to names.

    A commit's ``generation`` is the group's generation (classic) or group epoch (KIP-848) in effect
    when it was written (the record itself does not carry it); ``owned`` says whether a member of
    that generation owned the partition (None for a group without members on record, such as one
    that only ever commits)."""
    offsets: list[tuple] = []
    groups: list[tuple] = []
    generation: dict[str, int] = {}
    protocol: dict[str, str] = {}
    members: dict[str, dict[str, tuple]] = {}  # group -> member id -> (instance id, client id)
    owners: dict[str, dict[str, set]] = {}  # group -> member id -> owned (topic, partition)

    def commit(**row: object) -> None:
        offsets.append(tuple(row.get(c) for c in OFFSETS_COLUMNS))

    def event(
        g: str, proto: str, ts: int, off: int, kind: str, mid: str | None = None, **row: object
    ) -> None:
        inst, client = members.get(g, {}).get(mid, (None, None)) if mid else (None, None)
        row = {"instance_id": inst, "client_id": client, **row}
        row.update(group=g, protocol=proto, timestamp=ts, log_offset=off, event=kind, member_id=mid)
        row.setdefault("generation", generation.get(g))
        row.setdefault("members", len(members.get(g, {})))
        row.setdefault("assignment", [])
        groups.append(tuple(row.get(c) for c in GROUPS_COLUMNS))

    for off, ts, rec in records:
        t, k, v = rec.type, rec.key, rec.value
        if t == OFFSET_COMMIT:
            g = k.group
            owned = None
            if g in owners and protocol.get(g):
                owned = any((k.topic, k.partition) in tps for tps in owners[g].values())
            common = dict(group=g, topic=k.topic, partition=k.partition, generation=generation.get(g))
            common.update(protocol=protocol.get(g), owned=owned, log_offset=off)
            if v is None:
                commit(**common, commit_timestamp=ts, deleted=True)
            else:
                commit(**common, offset=v.offset, leader_epoch=v.leader_epoch, metadata=v.metadata,
                       commit_timestamp=v.commit_timestamp, deleted=False)  # fmt: skip
        elif t == GROUP_METADATA:
            g = k.group
            protocol[g] = "classic"
            before = members.get(g, {})
            if v is None:
                for mid in list(before):
                    event(g, "classic", ts, off, "leave", mid, members=0)
                event(g, "classic", ts, off, "deleted", members=0)
                members.pop(g, None)
                owners.pop(g, None)
                continue
            generation[g] = v.generation
            now = {m.member_id: (m.group_instance_id, m.client_id) for m in v.members}
            for mid in before:
                if mid not in now:
                    event(g, "classic", ts, off, "leave", mid, members=len(now), member_epoch=v.generation)
            members[g] = now
            owners[g] = {}
            for m in v.members:
                assigned = decode_consumer_assignment(m.assignment)
                owners[g][m.member_id] = set(assigned)
                event(g, "classic", ts, off, "stay" if m.member_id in before else "join", m.member_id,
                      members=len(now), member_epoch=v.generation, state_timestamp=v.current_state_timestamp,
                      assignment=[{"topic": a, "partition": p} for a, p in assigned])  # fmt: skip
            if not v.members:
                event(g, "classic", ts, off, "empty", members=0, state_timestamp=v.current_state_timestamp)
        elif t == CG_METADATA:
            g = k.group_id
            protocol[g] = "consumer"
            if v is None:
                event(g, "consumer", ts, off, "deleted", members=0)
                members.pop(g, None)
                owners.pop(g, None)
            else:
                generation[g] = v.epoch
                event(g, "consumer", ts, off, "epoch")
        elif t == CG_MEMBER:
            g, mid = k.group_id, k.member_id
            protocol[g] = "consumer"
            group = members.setdefault(g, {})
            if v is None:
                event(g, "consumer", ts, off, "leave", mid, members=len(group) - (mid in group))
                group.pop(mid, None)
                owners.get(g, {}).pop(mid, None)
            else:
                kind = "update" if mid in group else "join"
                group[mid] = (v.instance_id, v.client_id)
                event(g, "consumer", ts, off, kind, mid)
        elif t == CG_CURRENT and v is not None:
            g, mid = k.group_id, k.member_id
            assigned = sorted(
                (topic_names.get(tp.topic_id, str(tp.topic_id)), p)
                for tp in v.assigned_partitions
                for p in tp.partitions
            )
            owners.setdefault(g, {})[mid] = set(assigned)
            event(g, "consumer", ts, off, "assignment", mid, member_epoch=v.member_epoch,
                  assignment=[{"topic": a, "partition": p} for a, p in assigned])  # fmt: skip
    return offsets, groups
