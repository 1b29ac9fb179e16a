"""``pykbroker ctl ...``: the control API from the command line (prints JSON).

    pykbroker ctl --url http://127.0.0.1:9644 fault add --api Produce --error NOT_LEADER_OR_FOLLOWER --times 3
    pykbroker ctl fault add --json '{"api": "Fetch", "delay_ms": 2000}'
    pykbroker ctl fault list | fault rm 1 | fault clear
    pykbroker ctl groups [GROUP] | offsets GROUP | topics | connections

``--url`` and ``--token`` default to the environment variables PYKBROKER_CONTROL_URL and
PYKBROKER_CONTROL_TOKEN.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from .client import ControlClient, ControlError


def _out(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, default=str))


def _client(ctx: click.Context) -> ControlClient:
    return ctx.obj


def _run(fn: Any, *args: Any, **kwargs: Any) -> None:
    try:
        _out(fn(*args, **kwargs))
    except ControlError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    except OSError as e:
        click.echo(f"error: cannot reach the control API: {e}", err=True)
        sys.exit(2)


@click.group()
@click.option(
    "--url",
    envvar="PYKBROKER_CONTROL_URL",
    default="http://127.0.0.1:9644",
    show_default=True,
    help="The control API (a broker started with --control-port).",
)
@click.option("--token", envvar="PYKBROKER_CONTROL_TOKEN", default=None, help="Its bearer token.")
@click.pass_context
def ctl(ctx: click.Context, url: str, token: str | None) -> None:
    """Control a running broker: fault rules, clock, trace journal, invariants, live state."""
    ctx.obj = ControlClient(url, token)


@ctl.group()
def fault() -> None:
    """Fault rules: make requests fail, wait, vanish or close their connection."""


@fault.command("add")
@click.option(
    "--json", "raw", default=None, help="The whole rule as JSON (options below are merged into it)."
)
@click.option("--api", default=None, help="API name or key, e.g. Produce.")
@click.option("--min-version", type=int, default=None)
@click.option("--max-version", type=int, default=None)
@click.option("--client-id", default=None, help="Regular expression on the client id.")
@click.option("--client-software-name", default=None)
@click.option("--client-software-version", default=None)
@click.option("--group", default=None)
@click.option("--topic", default=None)
@click.option("--partition", type=int, default=None)
@click.option("--connection", type=int, default=None, help="Connection id (see `ctl connections`).")
@click.option("--error", default=None, help="Answer with this Kafka error name instead of handling.")
@click.option("--errors", default=None, help="Comma-separated error names, answered in order.")
@click.option("--delay", "delay_ms", default=None, help="Delay the response: ms, or e.g. 2s.")
@click.option("--drop", is_flag=True, default=None, help="Handle, send no response.")
@click.option("--close", type=click.Choice(["before", "after"]), default=None, help="Close the connection.")
@click.option("--throttle", "throttle_ms", default=None, help="throttle_time_ms to answer with.")
@click.option("--times", type=int, default=None, help="Only the next N matching requests.")
@click.option("--probability", type=float, default=None)
@click.option("--seed", type=int, default=None)
@click.pass_context
def fault_add(ctx: click.Context, raw: str | None, **opts: Any) -> None:
    """Add a fault rule."""
    spec: dict[str, Any] = {}
    if raw:
        try:
            spec = json.loads(raw)
        except ValueError as e:
            raise click.BadParameter(f"not JSON: {e}", param_hint="--json") from e
    if opts.get("errors"):
        opts["errors"] = [e.strip() for e in opts["errors"].split(",") if e.strip()]
    for key in ("delay_ms", "throttle_ms"):
        v = opts.get(key)
        if isinstance(v, str) and v.isdigit():
            opts[key] = int(v)
    spec.update({k: v for k, v in opts.items() if v is not None})
    _run(_client(ctx).add_rule, spec)


@fault.command("list")
@click.pass_context
def fault_list(ctx: click.Context) -> None:
    """The active rules and how often each fired."""
    _run(_client(ctx).rules)


@fault.command("rm")
@click.argument("rule_id", type=int)
@click.pass_context
def fault_rm(ctx: click.Context, rule_id: int) -> None:
    """Remove one rule."""
    _run(_client(ctx).remove_rule, rule_id)


@fault.command("clear")
@click.pass_context
def fault_clear(ctx: click.Context) -> None:
    """Remove every rule."""
    _run(_client(ctx).clear_rules)


@ctl.command()
@click.argument("group_id", required=False)
@click.pass_context
def groups(ctx: click.Context, group_id: str | None) -> None:
    """Every group (or one): type, state, generation or epochs, members, assignments."""
    if group_id is None:
        _run(_client(ctx).groups)
    else:
        _run(_client(ctx).group, group_id)


@ctl.command()
@click.argument("group_id")
@click.pass_context
def offsets(ctx: click.Context, group_id: str) -> None:
    """A group's committed offsets."""
    _run(_client(ctx).offsets, group_id)


@ctl.command()
@click.pass_context
def topics(ctx: click.Context) -> None:
    """Topics with log start, log end and high watermark per partition."""
    _run(_client(ctx).topics)


@ctl.command()
@click.pass_context
def connections(ctx: click.Context) -> None:
    """Open client connections."""
    _run(_client(ctx).connections)


@ctl.command()
@click.option("--mode", type=click.Choice(["manual", "system"]), default=None, help="Switch the clock.")
@click.option("--advance", "by", default=None, help="Move the manual clock: milliseconds or e.g. 46s.")
@click.pass_context
def clock(ctx: click.Context, mode: str | None, by: str | None) -> None:
    """The broker clock; --mode manual|system switches it, --advance moves a manual one."""
    client = _client(ctx)
    if mode is not None:
        _run(client.set_clock_mode, mode)
    if by is not None:
        _run(client.advance, int(by) if by.isdigit() else by)
    if mode is None and by is None:
        _run(client.clock)


@ctl.command("trace")
@click.option(
    "--start", "path", default=None, help="Record every request in this file (on the broker's host)."
)
@click.option("--stop", is_flag=True, help="Stop recording.")
@click.pass_context
def trace_switch(ctx: click.Context, path: str | None, stop: bool) -> None:
    """The trace journal: its state, --start FILE or --stop (read it with `pykbroker trace FILE`)."""
    client = _client(ctx)
    if stop:
        _run(client.stop_trace)
    elif path is not None:
        _run(client.start_trace, path)
    else:
        _run(client.request, "GET", "/trace")


@ctl.command()
@click.option("--on/--off", "enabled", default=None, help="Turn the checker on or off.")
@click.pass_context
def invariants(ctx: click.Context, enabled: bool | None) -> None:
    """The invariant checker: state and violations; --on/--off switches it."""
    client = _client(ctx)
    if enabled is None:
        _run(client.request, "GET", "/invariants")
    else:
        _run(client.check_invariants, enabled)


@ctl.command()
@click.argument("group_id", required=False)
@click.option("--on/--off", "enabled", default=None, help="Turn the report on or off.")
@click.pass_context
def rebalances(ctx: click.Context, group_id: str | None, enabled: bool | None) -> None:
    """The rebalance report (per group: rebalances, time, partitions moved); --on/--off switches it."""
    client = _client(ctx)
    if enabled is not None:
        _run(client.report_rebalances, enabled)
    else:
        _run(client.rebalances, group_id)


@ctl.group()
def cluster() -> None:
    """The simulated cluster (serve --nodes N): leaders, coordinators, nodes down and up."""


@cluster.command("show")
@click.pass_context
def cluster_show(ctx: click.Context) -> None:
    _run(_client(ctx).cluster)


@cluster.command("move-leader")
@click.argument("topic")
@click.argument("partition", type=int)
@click.option("--to", default="next", show_default=True, help='A node id, or "next".')
@click.pass_context
def cluster_move_leader(ctx: click.Context, topic: str, partition: int, to: str) -> None:
    _run(_client(ctx).move_leader, topic, partition, int(to) if to.isdigit() else to)


@cluster.command("shuffle")
@click.pass_context
def cluster_shuffle(ctx: click.Context) -> None:
    _run(_client(ctx).shuffle_leaders)


@cluster.command("move-coordinator")
@click.argument("group_id", required=False)
@click.option("--to", default="next", show_default=True, help='A node id, or "next".')
@click.option(
    "--transactional-id", default=None, help="Move this transactional id's transaction coordinator instead."
)
@click.pass_context
def cluster_move_coordinator(
    ctx: click.Context, group_id: str | None, to: str, transactional_id: str | None
) -> None:
    if (group_id is None) == (transactional_id is None):
        raise click.UsageError("give a GROUP_ID or --transactional-id")
    target = int(to) if to.isdigit() else to
    _run(_client(ctx).move_coordinator, group_id, target, transactional_id=transactional_id)


@cluster.command("down")
@click.argument("node", type=int)
@click.pass_context
def cluster_down(ctx: click.Context, node: int) -> None:
    _run(_client(ctx).node_down, node)


@cluster.command("up")
@click.argument("node", type=int)
@click.pass_context
def cluster_up(ctx: click.Context, node: int) -> None:
    _run(_client(ctx).node_up, node)


@cluster.command("rolling-restart")
@click.option(
    "--pause-ms", type=int, default=1000, show_default=True, help="Down time of each node, and between nodes."
)
@click.pass_context
def cluster_rolling_restart(ctx: click.Context, pause_ms: int) -> None:
    _run(_client(ctx).rolling_restart, pause_ms)
