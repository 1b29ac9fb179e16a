"""broker/nodes.py without a broker: Java's String.hashCode, Kafka's coordinator slot and its
StripedReplicaPlacer for one rack; the transaction coordinator slots."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from broker.cluster import TopicRegistry
from broker.nodes import Nodes, StripedPlacer, coordinator_slot, java_string_hash, kafka_abs
from broker.protocol.errors import ErrorCode, KafkaError


@pytest.mark.parametrize("s, expected", [("", 0), ("a", 97), ("hello", 99162322), ("Aa", 2112), ("BB", 2112)])
def test_java_string_hash(s, expected):
    assert java_string_hash(s) == expected


def test_java_string_hash_overflows_like_java():
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE (a known Java example)
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert kafka_abs(-(1 << 31)) == 0
    assert coordinator_slot("polygenelubricants", 50) == 0
    # non-BMP characters hash as their UTF-16 surrogate pair
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00


def test_striped_placer_spreads_leaders_and_replicas():
    placer = StripedPlacer(random.Random(7))
    out = placer.place([1, 2, 3], [], 6, 3)
    assert all(sorted(r) == [1, 2, 3] for r in out)
    assert Counter(r[0] for r in out) == {1: 2, 2: 2, 3: 2}


def test_striped_placer_puts_fenced_brokers_last_and_checks_the_factor():
    placer = StripedPlacer(random.Random(1))
    for r in placer.place([1, 3], [2], 4, 3):
        assert r[-1] == 2 and r[0] in (1, 3)
    with pytest.raises(KafkaError) as e:
        placer.place([1], [], 1, 2)
    assert e.value.code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_transaction_slots_move_on_their_own_and_with_a_node_down(tmp_path):
    nodes = Nodes(1, 3, TopicRegistry(tmp_path), tmp_path, 5, 3, random.Random(7), txn_slot_count=4)
    group_moves: list[set[int]] = []
    txn_moves: list[set[int]] = []
    nodes.on_coordinators_moved.append(group_moves.append)
    nodes.on_txn_coordinators_moved.append(txn_moves.append)
    assert nodes.txn_slots.partitions == 4 and nodes.slots.partitions == 5
    slot = nodes.txn_slot_of("tx")
    old, new = nodes.move_txn_coordinator("tx", "next")
    assert (old, new) == (nodes.txn_slots.replicas[slot][0], nodes.txn_coordinator("tx")) and old != new
    assert txn_moves == [{slot}] and group_moves == []  # a transaction slot alone
    assert nodes.txn_coordinator_and_epoch("tx") == (new, 1)
    led = {s for s in range(4) if nodes.txn_slots.leaders[s] == new}
    nodes.node_down(new)
    assert txn_moves[-1] == led and all(nodes.txn_slots.leaders[s] != new for s in range(4))
    again = Nodes(1, 3, TopicRegistry(tmp_path), tmp_path, 5, 3, random.Random(1), txn_slot_count=9)
    assert again.txn_slots.leaders == nodes.txn_slots.leaders  # kept (a slot count change ignored)
    (tmp_path / "one").mkdir()
    single = Nodes(1, 1, TopicRegistry(tmp_path / "one"), tmp_path / "one", 5, 3)
    assert single.txn_slots is None and single.txn_coordinator("tx") == 1
