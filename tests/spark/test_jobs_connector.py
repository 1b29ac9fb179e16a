"""The reference jobs reading a live broker through Spark's Kafka connector (``--bootstrap-server``)
give what they give reading the same broker's data directory offline."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner
from kafka import KafkaProducer

from broker.cli import main
from broker.spark import jobs
from broker.spark.inputs import Source
from broker.testing import running_broker
from tests.spark import fixture_log
from tests.spark.fixture_log import APPENDED, COMPRESSED, EVENTS, REBALANCER


@pytest.fixture(scope="module")
def live(history, tmp_path_factory):
    """This broker serving a copy of the fixture's data directory."""
    d = tmp_path_factory.mktemp("live") / "data"
    shutil.copytree(history.data_dir, d)
    with running_broker(d, fixture_log.CONFIG) as b:
        yield b


def _rows(df, order: list[str]) -> list[tuple]:
    return [tuple(r) for r in df.orderBy(*order).collect()]


def test_lag_audit_and_timeline_over_the_wire_equal_the_offline_ones(spark, kafka_format, history, live,
                                                                      tmp_path):  # fmt: skip
    wire, offline = Source(bootstrap=live.bootstrap), str(history.data_dir)
    order = ["group", "topic", "partition", "log_offset"]
    lag_wire = jobs.lag(spark, wire, str(tmp_path / "w"))
    assert lag_wire.count() == len(history.commits) + 3  # lagger, rebalancer (2), kip848
    assert _rows(lag_wire, order) == _rows(jobs.lag_table(spark, offline), order)
    audit_order = ["group", "log_offset", "finding"]
    audit_wire = jobs.audit_table(spark, wire)
    assert _rows(audit_wire, audit_order) == _rows(jobs.audit_table(spark, offline), audit_order)
    assert [
        (r.partition, r.previous_offset, r.offset)
        for r in audit_wire.where("finding = 'backwards'").collect()
    ] == [history.backwards]
    gens_wire, summary_wire = jobs.timeline_tables(spark, wire)
    gens, summary = jobs.timeline_tables(spark, offline)
    # the same generations, members and ownership; only the data directory has the broker's
    # rebalance journal, so offline a classic rebalance starts at its first JoinGroup, over the
    # wire at the end of its join phase (never earlier)
    timing = ["timestamp", "rebalance_ms"]
    assert _rows(gens_wire.drop(*timing), ["group", "generation"]) == _rows(
        gens.drop(*timing), ["group", "generation"]
    )
    for w, o in zip(
        _rows(gens_wire, ["group", "generation"]), _rows(gens, ["group", "generation"]), strict=True
    ):
        assert o[3] <= w[3], (w, o)  # the start (column 3: timestamp) is earlier or the same offline
    assert _rows(summary_wire.drop("rebalancing_ms", "first"), ["group"]) == _rows(
        summary.drop("rebalancing_ms", "first"), ["group"]
    )
    assert summary_wire.where(f"`group` = '{REBALANCER}'").collect()[0].rebalances >= history.generations


def test_export_over_the_wire_appends_exactly_the_new_records(spark, kafka_format, history, live, tmp_path):
    out = tmp_path / "export"
    topics = f"{EVENTS},{COMPRESSED},{APPENDED}"
    first = jobs.export(spark, Source(bootstrap=live.bootstrap), str(out), topics)
    assert first == sum(history.produced.values())
    exported = spark.read.parquet(str(out / "records"))
    offline = (
        spark.read.format("pykbroker")
        .option("path", str(history.data_dir))
        .option("subscribe", topics)
        .load()
    )
    connector = spark.read.format(kafka_format).option("kafka.bootstrap.servers", live.bootstrap)
    assert (
        connector.option("subscribe", topics).option("includeHeaders", "true").load().schema == offline.schema
    )
    cols = (
        offline.columns
    )  # headers are null, not empty, for a record without any (as the connector has them)
    order = ["topic", "partition", "offset"]
    assert _rows(exported.select(*cols), order) == _rows(offline.select(*cols), order)
    p = KafkaProducer(bootstrap_servers=live.bootstrap)
    for i in range(6):
        p.send(EVENTS, key=b"new-%d" % i, value=b"n", partition=i % 3)
    p.flush()
    p.close()
    assert jobs.export(spark, Source(bootstrap=live.bootstrap), str(out), topics) == 6
    keys = [
        bytes(r.key) for r in spark.read.parquet(str(out / "records")).where("key like 'new-%'").collect()
    ]
    assert sorted(keys) == [b"new-%d" % i for i in range(6)]


def test_cli_reads_a_live_broker(spark, kafka_format, live, tmp_path):
    args = ["spark", "timeline", "--bootstrap-server", live.bootstrap, "--out", str(tmp_path)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    rows = [line.split() for line in res.output.splitlines()]
    assert [REBALANCER, "classic"] in [r[:2] for r in rows], res.output  # its row in the summary table
    both = [
        "spark",
        "lag",
        "--bootstrap-server",
        live.bootstrap,
        "--data-dir",
        str(tmp_path),
        "--out",
        str(tmp_path),
    ]
    res = CliRunner().invoke(main, both)
    assert res.exit_code == 2 and "exactly one of --data-dir and --bootstrap-server" in res.output
