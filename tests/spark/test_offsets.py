"""Offset specs and the per-trigger cap (plain Python), and the broker's independence from pyspark."""

from __future__ import annotations

import subprocess
import sys

import pytest

from broker.spark import offsets as ofs


def test_parse_and_resolve_like_sparks_kafka_source():
    spec = ofs.parse_spec('{"t":{"0":23,"1":-2,"2":-1}}', "earliest")
    assert [ofs.resolve(spec, ("t", p), 5, 50) for p in range(4)] == [23, 5, 50, 5]
    assert ofs.resolve(ofs.parse_spec(None, "latest"), ("t", 0), 5, 50) == 50
    with pytest.raises(ValueError, match="neither 'earliest', 'latest' nor JSON"):
        ofs.parse_spec("yesterday", "earliest")
    assert ofs.from_json(ofs.to_json({("t", 1): 3, ("u", 0): 4})) == {("t", 1): 3, ("u", 0): 4}


def test_cap_shares_the_limit_in_proportion_and_exactly():
    start = {("t", 0): 0, ("t", 1): 10, ("t", 2): 7}
    latest = {("t", 0): 100, ("t", 1): 10, ("t", 2): 57}
    assert ofs.cap(start, latest, None) == latest
    ends = ofs.cap(start, latest, 70)
    assert sum(ends[tp] - start[tp] for tp in ends) == 70
    assert ends[("t", 1)] == 10 and ends[("t", 0)] - 0 > ends[("t", 2)] - 7
    assert all(start[tp] <= ends[tp] <= latest[tp] for tp in ends)
    assert ofs.cap(start, latest, 1000) == latest
    with pytest.raises(ValueError):
        ofs.max_per_trigger({"maxOffsetsPerTrigger": "0"})
    assert ofs.max_per_trigger({"maxRecordsPerTrigger": "9"}) == 9


def test_the_broker_never_imports_pyspark():
    code = "import sys, broker.app, broker.cli; sys.exit('pyspark' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0
