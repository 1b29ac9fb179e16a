"""``pykbroker spark ...``: the reference jobs from the command line (needs the ``[spark]`` extra)."""

from __future__ import annotations

import click


def _session(master: str):  # -> SparkSession
    try:
        from broker.spark.session import local_session
    except ImportError as e:
        raise click.ClickException(
            f"the Spark jobs need the [spark] extra (pip install 'pykbroker[spark]'): {e}"
        ) from None
    return local_session(master=master)


_data_dir = click.option(
    "--data-dir",
    required=True,
    type=click.Path(exists=True, file_okay=False),
    help="The broker's data directory.",
)
_out = click.option(
    "--out", required=True, type=click.Path(file_okay=False), help="Directory for Parquet and PNG."
)
_master = click.option("--master", default="local[2]", show_default=True, help="Spark master URL.")


@click.group()
def spark() -> None:
    """Analyse a broker's data directory with Spark: lag, offset audit, rebalances, Parquet export."""


@spark.command()
@_data_dir
@_out
@_master
def lag(data_dir: str, out: str, master: str) -> None:
    """Consumer-lag history per group and partition (lag.parquet, lag.png)."""
    from broker.spark import jobs

    df = jobs.lag(_session(master), data_dir, out)
    click.echo(f"{df.count()} commits -> {out}/lag.parquet, {out}/lag.png")


@spark.command()
@_data_dir
@_out
@_master
def audit(data_dir: str, out: str, master: str) -> None:
    """Backwards commits, commits from older generations, commits past the log end, gaps (audit.parquet)."""
    from broker.spark import jobs

    df = jobs.audit(_session(master), data_dir, out)
    for r in df.groupBy("group", "finding").count().orderBy("group", "finding").collect():
        click.echo(f"{r['group']}: {r['count']} {r['finding']}")
    click.echo(f"-> {out}/audit.parquet, {out}/audit.png")


@spark.command()
@_data_dir
@_out
@_master
def timeline(data_dir: str, out: str, master: str) -> None:
    """Rebalance timeline per group (timeline.parquet, rebalances.parquet, timeline.png)."""
    from broker.spark import jobs

    _gens, summary = jobs.timeline(_session(master), data_dir, out)
    for r in summary.collect():
        click.echo(
            f"{r['group']} ({r['protocol']}): {r['rebalances']} rebalances, {r['rebalancing_ms']:.0f} ms rebalancing"
        )
    click.echo(f"-> {out}/timeline.parquet, {out}/timeline.png")


@spark.command()
@_data_dir
@_out
@_master
@click.option("--topics", default=None, help="Comma-separated topics [default: all].")
def export(data_dir: str, out: str, master: str, topics: str | None) -> None:
    """Append the records written since the last run to OUT/records (Parquet, checkpointed)."""
    from broker.spark import jobs

    n = jobs.export(_session(master), data_dir, out, topics)
    click.echo(f"{n} new records -> {out}/records")
