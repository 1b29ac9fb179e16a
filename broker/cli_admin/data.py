"""``pykbroker produce`` (stdin lines to a topic) and ``pykbroker consume`` (records to stdout)."""

from __future__ import annotations

import base64
import sys
import time
from typing import Any

import click
import orjson
from kafka import ConsumerRebalanceListener

from broker.cli_admin.common import (
    AdminCommand,
    CommandError,
    client_settings,
    connection_options,
    emit_json,
    parse_pairs,
)


@click.command(cls=AdminCommand)
@connection_options
@click.argument("topic")
@click.option(
    "--key-separator", "-K", default=None, help="Split each line into KEY<sep>VALUE at the first SEP."
)
@click.option(
    "--partition", "-p", type=click.IntRange(0), default=None, help="[default: the partitioner's choice]"
)
@click.option(
    "--header", "-H", "headers", multiple=True, metavar="KEY=VALUE", help="A header on every record."
)
@click.option("--acks", type=click.Choice(["0", "1", "all"]), default="all", show_default=True)
@click.option(
    "--compression",
    type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]),
    default="none",
    show_default=True,
)
def produce(
    bootstrap: str,
    timeout: float,
    as_json: bool,
    topic: str,
    key_separator: str | None,
    partition: int | None,
    headers: tuple[str, ...],
    acks: str,
    compression: str,
) -> None:
    """Produce one record per line of stdin (the line without its newline is the value)."""
    from kafka import KafkaProducer

    header_list = [(k, v.encode()) for k, v in parse_pairs(headers).items()]
    records: list[tuple[bytes | None, bytes]] = []
    stdin = sys.stdin.buffer
    sep = key_separator.encode() if key_separator is not None else None
    for n, raw in enumerate(stdin, 1):
        line = raw.rstrip(b"\r\n") if raw.endswith(b"\n") else raw
        if sep is None:
            records.append((None, line))
            continue
        key, found, value = line.partition(sep)
        if not found:
            raise CommandError(f"line {n} has no key separator {key_separator!r}")
        records.append((key, value))
    producer = KafkaProducer(
        **client_settings(bootstrap, timeout),
        acks=acks if acks == "all" else int(acks),
        compression_type=None if compression == "none" else compression,
        linger_ms=5,
        max_block_ms=int(timeout * 1000),
    )
    try:
        futures = [
            producer.send(topic, value=v, key=k, partition=partition, headers=header_list or None)
            for k, v in records
        ]
        producer.flush(timeout=timeout)
        metas = [f.get(timeout=timeout) for f in futures]
    finally:
        producer.close(timeout=timeout)
    last: dict[int, int] = {}
    for m in metas:
        if m is not None and m.offset is not None and m.offset >= 0:
            last[m.partition] = max(last.get(m.partition, -1), m.offset)
    if as_json:
        emit_json({"topic": topic, "count": len(records), "last_offsets": last})
    else:
        click.echo(f"Produced {len(records)} record(s) to {topic}.", err=True)


def _text(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", errors="backslashreplace")


def _json_bytes(b: bytes | None) -> Any:
    """Text if the bytes are UTF-8, else ``{"base64": ...}``."""
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(b).decode()}


def _write(out: Any, rec: Any, fmt: str, key_separator: str) -> None:
    if fmt == "value":
        out.write((rec.value or b"") + b"\n")
    elif fmt == "kv":
        out.write((rec.key or b"") + key_separator.encode() + (rec.value or b"") + b"\n")
    else:
        record = {
            "topic": rec.topic,
            "partition": rec.partition,
            "offset": rec.offset,
            "timestamp": rec.timestamp,
            "key": _json_bytes(rec.key),
            "value": _json_bytes(rec.value),
            "headers": [[k, _json_bytes(v)] for k, v in rec.headers or []],
        }
        out.write(orjson.dumps(record) + b"\n")


class _Joined(ConsumerRebalanceListener):
    """Notes that the group has given this member its assignment, empty or not."""

    def __init__(self) -> None:
        self.assigned = False

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.assigned = False

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.assigned = True


@click.command(cls=AdminCommand)
@connection_options
@click.argument("topics", nargs=-1, required=True)
@click.option("--group", "-g", default=None, help="Consume as a member of this group (commits offsets).")
@click.option(
    "--partition",
    "-p",
    "partitions",
    multiple=True,
    type=click.IntRange(0),
    help="Read these partitions of the one TOPIC, without a group (repeatable).",
)
@click.option(
    "--from-beginning", is_flag=True, help="Start at the log start where there is no committed offset."
)
@click.option("--max-messages", "-n", type=click.IntRange(1), default=None, help="Stop after N records.")
@click.option(
    "--idle-timeout",
    type=click.FloatRange(0.0),
    default=None,
    help="Stop after this many seconds without a record [default: run until Ctrl-C]. With --group"
    " the clock starts once the group has assigned this member its partitions (none counts).",
)
@click.option(
    "--join-timeout",
    type=click.FloatRange(0.1),
    default=60.0,
    show_default=True,
    help="With --group and --idle-timeout: fail if the group has not assigned partitions in this many"
    " seconds.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["value", "kv", "json"]),
    default="value",
    show_default=True,
    help="value: the value per line; kv: KEY<sep>VALUE; json: one object per record.",
)
@click.option("--key-separator", default="\t", show_default="TAB", help="The separator of --format kv.")
@click.option(
    "--isolation-level", type=click.Choice(["read_uncommitted", "read_committed"]), default="read_uncommitted"
)
def consume(
    bootstrap: str,
    timeout: float,
    as_json: bool,
    topics: tuple[str, ...],
    group: str | None,
    partitions: tuple[int, ...],
    from_beginning: bool,
    max_messages: int | None,
    idle_timeout: float | None,
    join_timeout: float,
    fmt: str,
    key_separator: str,
    isolation_level: str,
) -> None:
    """Print records of TOPICS, from a group's position or from assigned partitions.

    Without --group and --partition every partition of TOPICS is read (no offsets committed)."""
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    if as_json:
        fmt = "json"
    if partitions and (group or len(topics) != 1):
        raise click.UsageError("--partition takes exactly one TOPIC and no --group")
    consumer = KafkaConsumer(
        **{**client_settings(bootstrap, timeout), "request_timeout_ms": max(int(timeout * 1000), 31000)},
        group_id=group,
        enable_auto_commit=group is not None,
        auto_offset_reset="earliest" if from_beginning else "latest",
        isolation_level=isolation_level,
    )
    count = 0
    out = sys.stdout.buffer
    joined = _Joined()
    started = time.monotonic()
    try:
        if group is not None:
            # the topics' metadata first: kafka-python 3.0.12 can lose the rejoin a leader starts when
            # partitions appear after its first join (a poll ending mid-join never collects it)
            for topic in topics:
                consumer.partitions_for_topic(topic)
            consumer.subscribe(list(topics), listener=joined)
        else:
            tps = []
            for topic in topics:
                known = consumer.partitions_for_topic(topic)
                if not known:
                    raise CommandError(f"unknown topic {topic!r}")
                wanted = partitions or tuple(sorted(known))
                missing = set(wanted) - known
                if missing:
                    raise CommandError(f"topic {topic!r} has no partition {min(missing)}")
                tps.extend(TopicPartition(topic, p) for p in wanted)
            consumer.assign(tps)
            if from_beginning:
                consumer.seek_to_beginning()
            else:
                consumer.seek_to_end()
        idle_since: float | None = None
        while max_messages is None or count < max_messages:
            batches = consumer.poll(
                timeout_ms=200, max_records=(max_messages - count) if max_messages else 500
            )
            now = time.monotonic()
            if not batches:
                # the idle clock starts once partitions are assigned (a group's join does not count,
                # but bounded by --join-timeout when the run is meant to end)
                if group is None or joined.assigned:
                    idle_since = idle_since if idle_since is not None else now
                    if idle_timeout is not None and now - idle_since >= idle_timeout:
                        break
                elif idle_timeout is not None and now - started >= join_timeout:
                    raise CommandError(
                        f"group {group!r} assigned no partitions within {join_timeout:g} s (--join-timeout)"
                    )
                continue
            idle_since = None
            for rec in sorted(
                (r for rs in batches.values() for r in rs), key=lambda r: (r.topic, r.partition, r.offset)
            ):
                _write(out, rec, fmt, key_separator)
                count += 1
            out.flush()
    except KeyboardInterrupt:
        pass
    finally:
        if group is not None and joined.assigned:
            try:
                consumer.commit()
            except Exception:  # nothing consumed, or the group moved on: the auto-commit covers it
                pass
        # a member still joining has nothing to commit: do not wait for its join to be answered
        consumer.close(autocommit=False, timeout_ms=None if group is None or joined.assigned else 1000)
    click.echo(f"Consumed {count} record(s).", err=True)
