"""The rebalance journal (broker/coordinator/journal.py): each classic rebalance's start -- the
first JoinGroup, which Kafka's group record does not carry -- as one JSON line per rebalance."""

from __future__ import annotations

import orjson

from broker.coordinator.journal import FILE, RebalanceJournal
from tests.coordinator.context import CoordinatorContext


def test_each_rebalance_start_is_told_with_the_generation_it_forms():
    c = CoordinatorContext()
    told: list[tuple[str, int, int]] = []
    c.state.journal = lambda group, generation, now: told.append((group, generation, now))
    c.stable_group("g", 1)
    assert [(g, gen) for g, gen, _ in told] == [("g", 1)]
    c.advance(250)
    c.stable_group("g", 1)  # a second member: the group rebalances into generation 2
    assert [(g, gen) for g, gen, _ in told] == [("g", 1), ("g", 2)]
    assert told[1][2] - told[0][2] >= 250  # the coordinator clock's time of each start


def test_the_journal_file_and_its_rotation(tmp_path):
    journal = RebalanceJournal(tmp_path, max_bytes=120)
    for generation in range(1, 6):
        journal("orders", generation, 1_000 + generation)
    journal.close()
    lines = [
        orjson.loads(x)
        for p in (tmp_path / f"{FILE}.1", tmp_path / FILE)
        for x in p.read_bytes().splitlines()
    ]
    assert [e["generation"] for e in lines] == [1, 2, 3, 4, 5][-len(lines) :] and len(lines) >= 2
    assert lines[-1] == {"group": "orders", "generation": 5, "join_started_ms": 1005}
    assert (tmp_path / FILE).stat().st_size <= 120
