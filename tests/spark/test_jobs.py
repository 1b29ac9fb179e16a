"""The reference jobs against the fixture's known produce and commit history, and the CLI."""

from __future__ import annotations

from datetime import UTC

import orjson
import pytest
from click.testing import CliRunner

from broker.cli import main
from broker.spark import jobs
from tests.spark.fixture_log import EVENTS, LAGGER, REBALANCER


def test_lag_matches_the_known_history(spark, history, tmp_path):
    df = jobs.lag(spark, str(history.data_dir), str(tmp_path))
    got = [
        (r.partition, r.offset, r.log_end_offset, r.lag)
        for r in df.where(f"`group` = '{LAGGER}'").orderBy("commit_timestamp", "partition").collect()
    ]
    want = [(p, o, leo, max(leo - o, 0)) for p, o, leo in history.commits]
    assert sorted(got) == sorted(want)
    assert all(r.topic == EVENTS for r in df.collect())
    assert (tmp_path / "lag.png").stat().st_size > 5000
    assert spark.read.parquet(str(tmp_path / "lag.parquet")).count() == df.count()


def test_audit_finds_the_planted_backwards_commit(spark, history, tmp_path):
    df = jobs.audit(spark, str(history.data_dir), str(tmp_path))
    backwards = [
        (r.partition, r.previous_offset, r.offset) for r in df.where("finding = 'backwards'").collect()
    ]
    assert backwards == [history.backwards]
    unowned = [(r.group, r.partition, r.offset) for r in df.where("finding = 'unowned'").collect()]
    assert unowned == [(REBALANCER, 2, 7)]  # the member's own commit of events-0 is not flagged
    assert df.where("finding = 'ahead_of_log' or finding = 'gap'").count() == 0
    assert (tmp_path / "audit.png").exists()


def test_timeline_shows_the_planted_rebalances(spark, history, tmp_path):
    gens, summary = jobs.timeline(spark, str(history.data_dir), str(tmp_path))
    members = [r.members for r in gens.where(f"`group` = '{REBALANCER}'").orderBy("generation").collect()]
    # a alone, a and b, a alone after b left, empty after a left (kafka-python may rejoin alone
    # once more at start, and after b left: its own JoinGroups, each a generation of one member)
    two_at = members.index(2)
    assert members.count(2) == 1 and members[-1] == 0, members
    assert set(members[:two_at]) == {1} and set(members[two_at + 1 : -1]) == {1}, members
    s = summary.where(f"`group` = '{REBALANCER}'").collect()[0]
    assert s.rebalances == len(members) - 1 >= history.generations  # the group emptying is no rebalance
    two = gens.where(f"`group` = '{REBALANCER}' and members = 2").collect()[0]
    assert len(two.member_ids) == 2 and sorted(two.partitions) == [f"{EVENTS}-{p}" for p in range(3)]
    # a rebalance is timed from its first JoinGroup: the broker's rebalance journal has it
    journal = [
        orjson.loads(line) for line in (history.data_dir / "group-rebalances.jsonl").read_bytes().splitlines()
    ]
    started = min(
        e["join_started_ms"]
        for e in journal
        if e["group"] == REBALANCER and e["generation"] == two.generation
    )
    assert round(two.timestamp.replace(tzinfo=UTC).timestamp() * 1000) == started
    assert two.rebalance_ms == pytest.approx(
        two.settled.replace(tzinfo=UTC).timestamp() * 1000 - started, abs=1
    )
    assert (tmp_path / "timeline.png").stat().st_size > 5000


def test_cli_runs_a_job(spark, history, tmp_path):
    args = ["spark", "timeline", "--data-dir", str(history.data_dir), "--out", str(tmp_path)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    header, *rows = [line.split() for line in res.output.splitlines() if not line.startswith("->")]
    assert header == ["group", "protocol", "rebalances", "ms", "rebalancing", "max", "members"], res.output
    (row,) = [r for r in rows if r[0] == REBALANCER]
    assert row[1] == "classic" and int(row[2]) >= 3 and int(row[4]) == 2, res.output
    assert (tmp_path / "timeline.parquet").is_dir() and (tmp_path / "rebalances.parquet").is_dir()
