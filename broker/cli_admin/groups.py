"""``pykbroker groups list|describe|lag|reset-offsets|delete`` (as kafka-consumer-groups.sh)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import click

from broker.cli_admin.common import (
    AdminGroup,
    CommandError,
    admin_client,
    connection_options,
    emit_json,
    table,
)


@click.group(cls=AdminGroup)
def groups() -> None:
    """List, describe, delete consumer groups; show their lag; reset their offsets."""


@groups.command("list")
@connection_options
def list_groups(bootstrap: str, timeout: float, as_json: bool) -> None:
    """The groups of the cluster, with state and type where the broker reports them."""
    admin = admin_client(bootstrap, timeout)
    try:
        found = admin.list_groups()
    finally:
        admin.close()
    rows = sorted(
        (
            {
                "group": g["group_id"],
                "state": g.get("group_state") or None,
                "type": g.get("group_type") or None,
                "protocol_type": g.get("protocol_type") or None,
            }
            for g in found
        ),
        key=lambda r: r["group"],
    )
    if as_json:
        emit_json(rows)
    else:
        table(["GROUP", "STATE", "TYPE", "PROTOCOL-TYPE"], [tuple(r.values()) for r in rows])


def _assigned(member: dict[str, Any]) -> list[tuple[str, int]]:
    """The (topic, partition)s in a described member's assignment (decoded or as a dict)."""
    a = member.get("member_assignment")
    if not a:
        return []
    parts = a.get("assigned_partitions") if isinstance(a, dict) else getattr(a, "assigned_partitions", None)
    out = []
    for tp in parts or []:
        topic = tp["topic"] if isinstance(tp, dict) else tp[0] if isinstance(tp, tuple | list) else tp.topic
        partitions = (
            tp["partitions"]
            if isinstance(tp, dict)
            else tp[1]
            if isinstance(tp, tuple | list)
            else tp.partitions
        )
        out.extend((topic, p) for p in partitions)
    return out


def _consumer_group(bootstrap: str, group: str, timeout: float) -> dict[str, Any] | None:
    """A KIP-848 group as DescribeGroups would show it (None: not one, or the broker has no such API)."""
    from broker.cli_admin.wire import WireError, describe_consumer_group

    try:
        g = describe_consumer_group(bootstrap, group, timeout)
    except (WireError, OSError, KeyError, ValueError):
        return None
    return {
        "group_state": g.group_state,
        "protocol_type": "consumer",
        "protocol": g.assignor_name,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "assigned": [
                    (tp.topic_name, p) for tp in m.assignment.topic_partitions for p in tp.partitions
                ],
            }
            for m in g.members
        ],
    }


def _describe(admin: Any, group: str, bootstrap: str = "", timeout: float = 10.0) -> dict[str, Any]:
    """State, members and per-partition committed offsets, log-end offsets and lag of a group."""
    from kafka import errors as Errors
    from kafka.admin import OffsetSpec
    from kafka.structs import TopicPartition

    desc = admin.describe_groups([group])[group]
    state = desc.get("group_state") or desc.get("state")
    if desc.get("error") or state == "Dead":
        # not a classic group: a KIP-848 consumer group answers ConsumerGroupDescribe
        modern = _consumer_group(bootstrap, group, timeout)
        if modern is None:
            if desc.get("error"):
                raise CommandError(str(desc["error"]))
            raise CommandError(f"{Errors.GroupIdNotFoundError.message}: group {group!r} does not exist")
        desc = modern
        state = desc["group_state"]
    committed = admin.list_group_offsets(group)[group]
    owner: dict[tuple[str, int], dict[str, Any]] = {}
    members = []
    for m in desc.get("members", []):
        assigned = m["assigned"] if "assigned" in m else _assigned(m)
        info = {
            "member_id": m.get("member_id"),
            "group_instance_id": m.get("group_instance_id"),
            "client_id": m.get("client_id"),
            "host": m.get("client_host"),
            "partitions": [{"topic": t, "partition": p} for t, p in sorted(assigned)],
        }
        members.append(info)
        for tp in assigned:
            owner[tp] = info
    tps = {(tp.topic, tp.partition) for tp in committed} | set(owner)
    ends: dict[tuple[str, int], int] = {}
    if tps:
        latest = admin.list_partition_offsets({TopicPartition(t, p): OffsetSpec.LATEST for t, p in tps})
        ends = {(tp.topic, tp.partition): o.offset for tp, o in latest.items()}
    offsets = {(tp.topic, tp.partition): om.offset for tp, om in committed.items()}
    partitions = []
    for t, p in sorted(tps):
        current = offsets.get((t, p))
        if current is not None and current < 0:
            current = None
        end = ends.get((t, p))
        m = owner.get((t, p))
        partitions.append(
            {
                "topic": t,
                "partition": p,
                "current_offset": current,
                "log_end_offset": end,
                "lag": (end - current) if end is not None and current is not None else None,
                "member_id": m["member_id"] if m else None,
                "host": m["host"] if m else None,
                "client_id": m["client_id"] if m else None,
            }
        )
    return {
        "group": group,
        "state": state,
        "protocol_type": desc.get("protocol_type") or None,
        "protocol": desc.get("protocol_data") or desc.get("protocol") or None,
        "members": members,
        "partitions": partitions,
        "total_lag": sum(p["lag"] or 0 for p in partitions),
    }


def _offsets_table(d: dict[str, Any], members: bool) -> None:
    cols = ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
    keys = ["topic", "partition", "current_offset", "log_end_offset", "lag"]
    if members:
        cols += ["CONSUMER-ID", "HOST", "CLIENT-ID"]
        keys += ["member_id", "host", "client_id"]
    table(cols, [[p[k] for k in keys] for p in d["partitions"]])


@groups.command()
@connection_options
@click.argument("group")
@click.option("--members", "show_members", is_flag=True, help="List the members instead of the partitions.")
def describe(bootstrap: str, timeout: float, as_json: bool, group: str, show_members: bool) -> None:
    """A group's state, members and partitions (committed offset, log end, lag, owner)."""
    admin = admin_client(bootstrap, timeout)
    try:
        d = _describe(admin, group, bootstrap, timeout)
    finally:
        admin.close()
    if as_json:
        emit_json(d)
        return
    click.echo(
        f"Group: {d['group']}  State: {d['state']}  Members: {len(d['members'])}  Lag: {d['total_lag']}"
    )
    if show_members:
        table(
            ["CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"],
            [
                (m["member_id"], m["group_instance_id"], m["host"], m["client_id"], len(m["partitions"]))
                for m in d["members"]
            ],
        )
    else:
        _offsets_table(d, members=True)


@groups.command()
@connection_options
@click.argument("group")
def lag(bootstrap: str, timeout: float, as_json: bool, group: str) -> None:
    """Per-partition lag of a group and its total."""
    admin = admin_client(bootstrap, timeout)
    try:
        d = _describe(admin, group, bootstrap, timeout)
    finally:
        admin.close()
    if as_json:
        emit_json({"group": group, "total_lag": d["total_lag"], "partitions": d["partitions"]})
        return
    _offsets_table(d, members=False)
    click.echo(f"Total lag: {d['total_lag']}")


def _parse_datetime(text: str) -> int:
    """ISO-8601 (``2026-01-02T03:04:05``, an offset or ``Z`` optional, local time if none) in ms."""
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as e:
        raise click.BadParameter(f"not an ISO-8601 date-time: {text!r}", param_hint="--to-datetime") from e
    if when.tzinfo is None:
        when = when.astimezone()
    return int(when.timestamp() * 1000)


def _selected_partitions(admin: Any, group: str, topics: tuple[str, ...], all_topics: bool) -> list[Any]:
    """TopicPartitions to reset: ``TOPIC`` (all its partitions) or ``TOPIC:0,1``; --all-topics: those
    the group has committed offsets for."""
    from kafka.structs import TopicPartition

    if all_topics:
        return sorted(admin.list_group_offsets(group)[group])
    out = []
    names = [t.partition(":")[0] for t in topics if ":" not in t]
    counts = {}
    if names:
        described = admin.describe_topics(names)
        for t in described:
            if t.get("error_code"):
                raise CommandError(f"unknown topic {t['name']!r}")
            counts[t["name"]] = len(t["partitions"])
    for spec in topics:
        name, sep, parts = spec.partition(":")
        if sep:
            try:
                out.extend(TopicPartition(name, int(p)) for p in parts.split(","))
            except ValueError as e:
                raise click.BadParameter(
                    f"expected TOPIC or TOPIC:P,P..., got {spec!r}", param_hint="--topic"
                ) from e
        else:
            out.extend(TopicPartition(name, p) for p in range(counts[name]))
    return sorted(set(out))


@groups.command("reset-offsets")
@connection_options
@click.argument("group")
@click.option(
    "--topic",
    "-t",
    "topics",
    multiple=True,
    metavar="TOPIC[:P,P...]",
    help="Partitions to reset (repeatable).",
)
@click.option("--all-topics", is_flag=True, help="Every partition the group has committed offsets for.")
@click.option("--to-earliest", is_flag=True)
@click.option("--to-latest", is_flag=True)
@click.option("--to-offset", type=click.IntRange(0), default=None)
@click.option("--to-datetime", default=None, metavar="ISO-8601", help="First offset at or after this time.")
@click.option("--shift-by", type=int, default=None, help="Move the committed offsets by N (may be negative).")
@click.option("--execute", is_flag=True, help="Apply the plan (without it: a dry run that only prints it).")
@click.option("--dry-run", is_flag=True, help="Only print the plan (the default).")
def reset_offsets(
    bootstrap: str,
    timeout: float,
    as_json: bool,
    group: str,
    topics: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: str | None,
    shift_by: int | None,
    execute: bool,
    dry_run: bool,
) -> None:
    """Plan (and with --execute, commit) new offsets for a group with no active members.

    As kafka-consumer-groups.sh: every target is clamped to [log start, log end]."""
    from kafka import errors as Errors
    from kafka.admin import OffsetSpec, OffsetTimestamp
    from kafka.structs import OffsetAndMetadata

    chosen = [to_earliest, to_latest, to_offset is not None, to_datetime is not None, shift_by is not None]
    if sum(chosen) != 1:
        raise click.UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by"
        )
    if bool(topics) == all_topics:
        raise click.UsageError("give --topic TOPIC[:P,...] (repeatable) or --all-topics")
    if execute and dry_run:
        raise click.UsageError("--execute and --dry-run exclude each other")
    timestamp = _parse_datetime(to_datetime) if to_datetime is not None else None
    admin = admin_client(bootstrap, timeout)
    try:
        desc = admin.describe_groups([group])[group]
        state = desc.get("group_state") or desc.get("state")
        if execute and desc.get("members"):
            raise CommandError(
                f"group {group!r} is {state} with {len(desc['members'])} active member(s): "
                "stop its consumers before resetting its offsets"
            )
        tps = _selected_partitions(admin, group, topics, all_topics)
        if not tps:
            raise CommandError(f"no partitions to reset for group {group!r}")
        committed = admin.list_group_offsets({group: tps})[group]
        earliest = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST for tp in tps})
        latest = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in tps})
        by_time = (
            admin.list_partition_offsets({tp: OffsetTimestamp(timestamp) for tp in tps})
            if timestamp is not None
            else {}
        )
        plan = {}
        rows = []
        for tp in tps:
            lo, hi = earliest[tp].offset, latest[tp].offset
            cur_meta = committed.get(tp)
            current = cur_meta.offset if cur_meta is not None and cur_meta.offset >= 0 else None
            if to_earliest:
                target = lo
            elif to_latest:
                target = hi
            elif to_offset is not None:
                target = to_offset
            elif timestamp is not None:
                found = by_time[tp].offset
                target = hi if found < 0 else found
            else:
                assert shift_by is not None
                target = (current if current is not None else lo) + shift_by
            target = min(max(target, lo), hi)
            plan[tp] = OffsetAndMetadata(target, cur_meta.metadata if cur_meta else "", None)
            rows.append(
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "current_offset": current,
                    "new_offset": target,
                }
            )
        errors = []
        if execute:
            result = admin.alter_group_offsets(group, plan)
            for tp, err in result.items():
                if err is not Errors.NoError:
                    errors.append(f"{tp.topic}-{tp.partition}: {err.message}")
    finally:
        admin.close()
    if as_json:
        emit_json({"group": group, "executed": execute and not errors, "partitions": rows})
    else:
        table(
            ["TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
            [(r["topic"], r["partition"], r["current_offset"], r["new_offset"]) for r in rows],
        )
        if not execute:
            click.echo("Dry run: nothing committed (add --execute to apply).", err=True)
    if errors:
        raise CommandError("reset failed: " + "; ".join(errors))


@groups.command()
@connection_options
@click.argument("names", nargs=-1, required=True)
def delete(bootstrap: str, timeout: float, as_json: bool, names: tuple[str, ...]) -> None:
    """Delete groups (they must have no active members) and their committed offsets."""
    admin = admin_client(bootstrap, timeout)
    try:
        result = admin.delete_groups(list(names))
    finally:
        admin.close()
    out = [{"group": g, "result": r} for g, r in sorted(result.items())]
    if as_json:
        emit_json(out)
    else:
        for r in out:
            click.echo(
                f"Deleted group {r['group']}."
                if r["result"] == "OK"
                else f"Group {r['group']}: {r['result']}"
            )
    failed = [f"{r['group']}: {r['result']}" for r in out if r["result"] != "OK"]
    if failed:
        raise CommandError("; ".join(failed))
