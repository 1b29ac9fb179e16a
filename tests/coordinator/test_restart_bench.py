"""bench/restart_bench.py at a tiny scale: it builds, compacts and restarts, and the compacted restart
replays the same offsets as the uncompacted one (the benchmark itself checks that)."""

from __future__ import annotations

import pytest

from bench.restart_bench import main

pytestmark = pytest.mark.server  # the bench restarts a broker on a socket


def test_restart_bench_runs_at_a_tiny_scale(tmp_path, capsys):
    assert main(["--scale", "0.002", "--rounds", "3", "--runs", "1", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "generated 6,200 records (200 groups x 10 partitions x 3 rounds" in out
    assert "compaction: 6,200 records read, 2,200 kept" in out
    assert "compacted restart: 2,200 records replayed" in out
    assert "offsets identical: True" in out
