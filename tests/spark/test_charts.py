"""The jobs' charts from plain rows (no Spark session): a panel per group, idle stretches cut out of
the time axis and marked, partition ownership coloured by member."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from broker.spark import charts

pytestmark = pytest.mark.unit  # matplotlib only, no Spark session

T0 = datetime(2026, 11, 24, 9, 0, 0)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_idle_gaps_are_shortened_and_remembered():
    axis = charts.TimeAxis([at(0), at(5), at(10), at(3 * 3600 + 10), at(3 * 3600 + 12)], cap=30)
    assert [axis(at(s)) for s in (0, 5, 10)] == [0, 5, 10]
    # three hours of nothing become 30 s on the axis, marked with their real length
    assert axis(at(3 * 3600 + 10)) == pytest.approx(40) and axis(at(3 * 3600 + 12)) == pytest.approx(42)
    assert axis.breaks == [(25.0, 3 * 3600)]
    assert charts._duration(3 * 3600) == "3h" and charts._duration(95) == "1m 35s"
    # a gap of at most the cap is kept as it was
    assert charts.TimeAxis([at(0), at(20)], cap=30).breaks == []


def test_lag_has_a_panel_per_group(tmp_path):
    rows = [
        dict(group=g, topic="t", partition=p, commit_timestamp=at(offset + i), lag=max(0, 10 - 3 * i))
        for g, offset in (("orders", 0), ("billing", 7200))
        for p in (0, 1)
        for i in range(5)
    ]
    assert charts.lag_panels(tmp_path / "lag.png", rows) == 2
    assert (tmp_path / "lag.png").stat().st_size > 10_000


def test_ownership_chart(tmp_path):
    gens = [
        dict(group="g", generation=1, timestamp=at(0), settled=at(1.2), owners=[("a", "t-0"), ("a", "t-1")]),
        dict(group="g", generation=2, timestamp=at(30), settled=at(31), owners=[("a", "t-0"), ("b", "t-1")]),
        dict(group="g", generation=3, timestamp=at(4000), settled=None, owners=[("b", "t-0"), ("b", "t-1")]),
        dict(group="h", generation=1, timestamp=at(50), settled=at(51), owners=[("c", "u-10"), ("c", "u-2")]),
    ]
    assert charts.ownership(tmp_path / "timeline.png", gens) == 2
    assert (tmp_path / "timeline.png").stat().st_size > 10_000
    assert sorted(["u-10", "u-2", "t-1"], key=charts._partition_key) == ["t-1", "u-2", "u-10"]


def test_empty_inputs_still_make_a_chart(tmp_path):
    assert charts.lag_panels(tmp_path / "lag.png", []) == 0
    assert charts.ownership(tmp_path / "t.png", []) == 0
    charts.findings(tmp_path / "a.png", {})
    assert all((tmp_path / n).exists() for n in ("lag.png", "t.png", "a.png"))
