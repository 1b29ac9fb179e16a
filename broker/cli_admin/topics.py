"""``pykbroker topics list|describe|create|delete|alter-config``."""

from __future__ import annotations

from typing import Any

import click

from broker.cli_admin.common import (
    AdminGroup,
    CommandError,
    admin_client,
    connection_options,
    emit_json,
    one_line,
    parse_pairs,
    table,
)


@click.group(cls=AdminGroup)
def topics() -> None:
    """List, describe, create, delete topics and change their configuration."""


def _check_topic_errors(described: list[dict[str, Any]]) -> None:
    from kafka import errors as Errors

    for t in described:
        if t.get("error_code"):
            err = Errors.for_code(t["error_code"])
            raise CommandError(f"{err.message}: topic {t['name']!r}")


@topics.command("list")
@connection_options
@click.option("--internal/--no-internal", default=False, help="Include internal topics (__consumer_offsets).")
def list_topics(bootstrap: str, timeout: float, as_json: bool, internal: bool) -> None:
    """The topics of the cluster, with their partition counts."""
    admin = admin_client(bootstrap, timeout)
    try:
        described = admin.describe_topics()
    finally:
        admin.close()
    rows = sorted(
        (
            {"name": t["name"], "partitions": len(t["partitions"]), "internal": bool(t.get("is_internal"))}
            for t in described
            if internal or not t.get("is_internal")
        ),
        key=lambda r: r["name"],
    )
    if as_json:
        emit_json(rows)
    else:
        table(
            ["TOPIC", "PARTITIONS", "INTERNAL"],
            [(r["name"], r["partitions"], "yes" if r["internal"] else "") for r in rows],
        )


@topics.command()
@connection_options
@click.argument("names", nargs=-1, required=True)
def describe(bootstrap: str, timeout: float, as_json: bool, names: tuple[str, ...]) -> None:
    """Partitions (leader, replicas, in-sync replicas) and non-default configs of topics."""
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = admin_client(bootstrap, timeout)
    try:
        described = admin.describe_topics(list(names))
        _check_topic_errors(described)
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, n) for n in names])
    finally:
        admin.close()
    topic_configs = configs.get("topic", {})
    out = []
    for t in sorted(described, key=lambda t: t["name"]):
        cfg = topic_configs.get(t["name"], {})
        out.append(
            {
                "name": t["name"],
                "topic_id": str(t.get("topic_id") or ""),
                "internal": bool(t.get("is_internal")),
                "partitions": [
                    {
                        "partition": p["partition_index"],
                        "leader": p["leader_id"],
                        "replicas": list(p["replica_nodes"]),
                        "isr": list(p["isr_nodes"]),
                    }
                    for p in sorted(t["partitions"], key=lambda p: p["partition_index"])
                ],
                "configs": {k: (v.get("value") if isinstance(v, dict) else v) for k, v in cfg.items()},
            }
        )
    if as_json:
        emit_json(out)
        return
    for i, t in enumerate(out):
        if i:
            click.echo()
        conf = ",".join(f"{k}={v}" for k, v in sorted(t["configs"].items()))
        click.echo(
            f"Topic: {t['name']}  TopicId: {t['topic_id']}  PartitionCount: {len(t['partitions'])}  Configs: {conf}"
        )
        table(
            ["PARTITION", "LEADER", "REPLICAS", "ISR"],
            [
                (p["partition"], p["leader"], ",".join(map(str, p["replicas"])), ",".join(map(str, p["isr"])))
                for p in t["partitions"]
            ],
        )


@topics.command()
@connection_options
@click.argument("name")
@click.option(
    "--partitions", "-p", type=click.IntRange(1), default=None, help="[default: the broker's num.partitions]"
)
@click.option(
    "--replication-factor", "-r", type=click.IntRange(1), default=None, help="[default: the broker's]"
)
@click.option(
    "--config", "-c", "pairs", multiple=True, metavar="KEY=VALUE", help="A topic config (repeatable)."
)
@click.option("--if-not-exists", is_flag=True, help="Succeed when the topic exists already.")
def create(
    bootstrap: str,
    timeout: float,
    as_json: bool,
    name: str,
    partitions: int | None,
    replication_factor: int | None,
    pairs: tuple[str, ...],
    if_not_exists: bool,
) -> None:
    """Create a topic."""
    from kafka import errors as Errors

    configs = parse_pairs(pairs)
    spec = {
        name: {
            "num_partitions": partitions or -1,
            "replication_factor": replication_factor or -1,
            "configs": configs,
        }
    }
    admin = admin_client(bootstrap, timeout)
    try:
        result = admin.create_topics(spec, timeout_ms=int(timeout * 1000), raise_errors=False)
    finally:
        admin.close()
    topic = result["topics"][0]
    created = True
    if topic["error_code"]:
        err = Errors.for_code(topic["error_code"])
        if err is Errors.TopicAlreadyExistsError and if_not_exists:
            created = False
        else:
            raise CommandError(f"{err.message}: {topic.get('error_message') or name}")
    if as_json:
        emit_json({"name": name, "created": created, "partitions": topic.get("num_partitions")})
    else:
        click.echo(f"Created topic {name}." if created else f"Topic {name} exists already.")


@topics.command()
@connection_options
@click.argument("names", nargs=-1, required=True)
@click.option("--if-exists", is_flag=True, help="Succeed when a topic does not exist.")
def delete(bootstrap: str, timeout: float, as_json: bool, names: tuple[str, ...], if_exists: bool) -> None:
    """Delete topics."""
    from kafka import errors as Errors

    admin = admin_client(bootstrap, timeout)
    try:
        result = admin.delete_topics(list(names), timeout_ms=int(timeout * 1000), raise_errors=False)
    finally:
        admin.close()
    out = []
    failures = []
    for r in result["responses"] if "responses" in result else result.get("topics", []):
        err = Errors.for_code(r["error_code"])
        if err is Errors.NoError:
            out.append({"name": r["name"], "deleted": True})
        elif err is Errors.UnknownTopicOrPartitionError and if_exists:
            out.append({"name": r["name"], "deleted": False})
        else:
            failures.append(f"{err.message}: topic {r['name']!r}")
    if as_json:
        emit_json(out)
    else:
        for r in out:
            click.echo(
                f"Deleted topic {r['name']}." if r["deleted"] else f"Topic {r['name']} does not exist."
            )
    if failures:
        raise CommandError("; ".join(failures))


@topics.command("alter-config")
@connection_options
@click.argument("name")
@click.option("--set", "-s", "sets", multiple=True, metavar="KEY=VALUE", help="Set a config (repeatable).")
@click.option(
    "--delete", "-d", "deletes", multiple=True, metavar="KEY", help="Back to the default (repeatable)."
)
@click.option("--dry-run", is_flag=True, help="Let the broker validate the change without applying it.")
def alter_config(
    bootstrap: str,
    timeout: float,
    as_json: bool,
    name: str,
    sets: tuple[str, ...],
    deletes: tuple[str, ...],
    dry_run: bool,
) -> None:
    """Change a topic's configuration (IncrementalAlterConfigs)."""
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

    if not sets and not deletes:
        raise click.UsageError("nothing to change: give --set KEY=VALUE and/or --delete KEY")
    changes: dict[str, Any] = {k: (AlterConfigOp.SET, v) for k, v in parse_pairs(sets).items()}
    changes.update({k: (AlterConfigOp.DELETE, None) for k in deletes})
    admin = admin_client(bootstrap, timeout)
    try:
        result = admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name, configs=changes)],
            validate_only=dry_run,
            raise_on_unknown=False,
            incremental=True,
        )
    finally:
        admin.close()
    outcome = result.get("topic", {}).get(name, "OK")
    if outcome != "OK":
        raise CommandError(f"{one_line(outcome)} (topic {name!r})")
    summary = {"name": name, "set": parse_pairs(sets), "deleted": list(deletes), "validate_only": dry_run}
    if as_json:
        emit_json(summary)
    else:
        verb = "Validated" if dry_run else "Altered"
        click.echo(f"{verb} configs of topic {name}.")
