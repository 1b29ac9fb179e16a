"""``pykbroker spark ...``: the reference jobs from the command line (needs the ``[spark]`` extra).

Each job reads either a data directory (``--data-dir``, offline, through the ``pykbroker`` source)
or a live broker (``--bootstrap-server``, through Spark's own Kafka connector, whose jars come from
``--kafka-jars``, ``$PYKBROKER_SPARK_KAFKA_JARS`` or ``scripts/spark-kafka.sh`` in a checkout)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click


def _session(
    master: str, kafka_jars: str | None, bootstrap: str | None, verbose: bool = False
):  # -> SparkSession
    try:
        from broker.spark.session import ConnectorMissing, kafka_connector_jars, local_session
    except ImportError as e:
        raise click.ClickException(
            f"the Spark jobs need the [spark] extra (pip install 'pykbroker[spark]'): {e}"
        ) from None
    jars: list[str] = []
    if bootstrap:
        try:
            jars = [j for j in kafka_jars.split(",") if j] if kafka_jars else kafka_connector_jars()
        except ConnectorMissing as e:
            raise click.ClickException(str(e)) from None
    return local_session(master=master, kafka_jars=jars, verbose=verbose)


def _source(data_dir: str | None, bootstrap: str | None):  # -> inputs.Source
    from broker.spark.inputs import Source

    if (data_dir is None) == (bootstrap is None):
        raise click.UsageError("give exactly one of --data-dir and --bootstrap-server")
    return Source(data_dir=data_dir, bootstrap=bootstrap)


def _inputs(f: Callable[..., Any]) -> Callable[..., Any]:
    """--data-dir | --bootstrap-server, --kafka-jars, --out, --master, --verbose."""
    f = click.option(
        "--verbose", is_flag=True, help="Spark's own console output (log lines, progress bars)."
    )(f)
    f = click.option("--master", default="local[2]", show_default=True, help="Spark master URL.")(f)
    f = click.option(
        "--out", required=True, type=click.Path(file_okay=False), help="Directory for Parquet and PNG."
    )(f)
    f = click.option(
        "--kafka-jars",
        default=None,
        help="Comma-separated jars of Spark's Kafka connector and its dependencies "
        "[default: $PYKBROKER_SPARK_KAFKA_JARS, else those scripts/spark-kafka.sh fetched].",
    )(f)
    f = click.option(
        "--bootstrap-server",
        "bootstrap",
        default=None,
        help="Read a live broker (host:port[,host:port]) through Spark's Kafka connector.",
    )(f)
    return click.option(
        "--data-dir",
        default=None,
        type=click.Path(exists=True, file_okay=False),
        help="Read a broker's data directory (offline).",
    )(f)


@click.group()
def spark() -> None:
    """Analyse a broker with Spark (its data directory, or any Kafka-compatible broker over the wire):
    lag, offset audit, rebalances, Parquet export."""


@spark.command()
@_inputs
def lag(
    data_dir: str | None, bootstrap: str | None, kafka_jars: str | None, out: str, master: str, verbose: bool
) -> None:
    """Consumer-lag history per group and partition (lag.parquet, lag.png)."""
    from broker.spark import jobs

    src = _source(data_dir, bootstrap)
    df = jobs.lag(_session(master, kafka_jars, bootstrap, verbose), src, out)
    rows = df.collect()
    per_group: dict[str, list] = {}
    for r in rows:
        per_group.setdefault(r["group"], []).append(r)
    table = []
    for group, rs in sorted(per_group.items()):
        last: dict[tuple, Any] = {}
        for r in sorted(rs, key=lambda r: r["log_offset"]):
            last[(r["topic"], r["partition"])] = r["lag"]
        table.append([group, len(rs), len(last), max(r["lag"] for r in rs), sum(last.values())])
    _print_table(["group", "commits", "partitions", "max lag", "lag now"], table)
    click.echo(f"-> {out}/lag.parquet, {out}/lag.png")


@spark.command()
@_inputs
def audit(
    data_dir: str | None, bootstrap: str | None, kafka_jars: str | None, out: str, master: str, verbose: bool
) -> None:
    """Backwards commits, commits from older generations, commits past the log end, gaps (audit.parquet)."""
    from broker.spark import jobs

    src = _source(data_dir, bootstrap)
    df = jobs.audit(_session(master, kafka_jars, bootstrap, verbose), src, out)
    counts = df.groupBy("group", "finding").count().orderBy("group", "finding").collect()
    if counts:
        _print_table(
            ["group", "finding", "commits"], [[r["group"], r["finding"], r["count"]] for r in counts]
        )
    else:
        click.echo("no findings")
    click.echo(f"-> {out}/audit.parquet, {out}/audit.png")


@spark.command()
@_inputs
def timeline(
    data_dir: str | None, bootstrap: str | None, kafka_jars: str | None, out: str, master: str, verbose: bool
) -> None:
    """Rebalance timeline per group (timeline.parquet, rebalances.parquet, timeline.png)."""
    from broker.spark import jobs

    src = _source(data_dir, bootstrap)
    _gens, summary = jobs.timeline(_session(master, kafka_jars, bootstrap, verbose), src, out)
    rows = [
        [r["group"], r["protocol"], r["rebalances"], f"{r['rebalancing_ms']:.0f}", r["max_members"]]
        for r in summary.collect()
    ]
    _print_table(["group", "protocol", "rebalances", "ms rebalancing", "max members"], rows)
    click.echo(f"-> {out}/timeline.parquet, {out}/timeline.png")


@spark.command()
@_inputs
@click.option("--topics", default=None, help="Comma-separated topics [default: all].")
def export(
    data_dir: str | None,
    bootstrap: str | None,
    kafka_jars: str | None,
    out: str,
    master: str,
    verbose: bool,
    topics: str | None,
) -> None:
    """Append the records written since the last run to OUT/records (Parquet, checkpointed)."""
    from broker.spark import jobs

    src = _source(data_dir, bootstrap)
    n = jobs.export(_session(master, kafka_jars, bootstrap, verbose), src, out, topics)
    click.echo(f"{n} new records -> {out}/records")


def _print_table(headers: list[str], rows: list[list[Any]]) -> None:
    """A plain text table: text columns left-aligned, numbers right-aligned."""
    cells = [headers] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    numeric = [
        all(str(row[i]).replace(".", "", 1).isdigit() for row in rows) and bool(rows)
        for i in range(len(headers))
    ]
    for row in cells:
        click.echo(
            "  ".join(
                c.rjust(w) if n else c.ljust(w) for c, w, n in zip(row, widths, numeric, strict=True)
            ).rstrip()
        )
