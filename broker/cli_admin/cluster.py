"""``pykbroker cluster describe``."""

from __future__ import annotations

import click

from broker.cli_admin.common import AdminGroup, admin_client, connection_options, emit_json, table


@click.group(cls=AdminGroup)
def cluster() -> None:
    """The cluster: id, controller, brokers."""


@cluster.command()
@connection_options
def describe(bootstrap: str, timeout: float, as_json: bool) -> None:
    """Cluster id, controller and brokers (DescribeCluster, or Metadata on older brokers)."""
    admin = admin_client(bootstrap, timeout)
    try:
        info = admin.describe_cluster()
    finally:
        admin.close()
    brokers = sorted(
        (
            {"id": b.get("broker_id"), "host": b.get("host"), "port": b.get("port"), "rack": b.get("rack")}
            for b in info.get("brokers", [])
        ),
        key=lambda b: b["id"],
    )
    out = {
        "cluster_id": info.get("cluster_id"),
        "controller_id": info.get("controller_id"),
        "brokers": brokers,
    }
    if as_json:
        emit_json(out)
        return
    click.echo(f"Cluster: {out['cluster_id']}  Controller: {out['controller_id']}")
    table(["BROKER", "HOST", "PORT", "RACK"], [(b["id"], b["host"], b["port"], b["rack"]) for b in brokers])
