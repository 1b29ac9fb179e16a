"""Transaction coordinators on a simulated multi-node cluster (broker/nodes.py, broker/txn): a
transactional id is coordinated by the leader of its ``__transaction_state`` slot, other nodes
answer NOT_COORDINATOR, a move reloads the ids from the log and completes what was prepared, and
markers wait for a partition without a live leader."""

from __future__ import annotations

import asyncio

import orjson

from broker.nodes import TXN_SLOTS_FILE
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.add_offsets_to_txn import AddOffsetsToTxnRequest
from broker.protocol.generated.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from broker.protocol.generated.describe_transactions import DescribeTransactionsRequest
from broker.protocol.generated.end_txn import EndTxnRequest
from broker.protocol.generated.find_coordinator import FindCoordinatorRequest
from broker.protocol.generated.list_transactions import ListTransactionsRequest
from tests.dispatch.test_cluster_nodes import create, java_hash
from tests.dispatch.test_transactions import _add, _batches, _end, _init, _produce
from tests.support.inprocess import InProcessClient

FIND, END_TXN, ADD_PARTITIONS, ADD_OFFSETS, DESCRIBE_TXNS, LIST_TXNS = 10, 26, 24, 25, 65, 66


def ids_by_coordinator(b, count=60):
    """Transactional ids keyed by the node coordinating them."""
    out: dict[int, list[str]] = {}
    for i in range(count):
        tid = f"tx-{i}"
        out.setdefault(b.broker.nodes.txn_coordinator(tid), []).append(tid)
    return out


def _describe(c, *tids):
    resp = c.call(DESCRIBE_TXNS, 0, DescribeTransactionsRequest(transactional_ids=list(tids)))
    return {s.transactional_id: (s.error_code, s.transaction_state) for s in resp.transaction_states}


def _listed(c):
    resp = c.call(LIST_TXNS, 1, ListTransactionsRequest(state_filters=[], producer_id_filters=[]))
    return {s.transactional_id for s in resp.transaction_states}


def _leader(b, topic, partition):
    return b.broker.nodes.leader(b.broker.topics.get(topic), partition)[0]


def test_find_coordinator_maps_transactional_ids_to_their_own_slots(node_factory, tmp_path):
    b = node_factory({"cluster.nodes": 3, "transaction.state.log.num.partitions": 7}, tmp_path / "d")
    nodes = b.broker.nodes
    assert nodes.txn_slot_of("tx-0") == abs(java_hash("tx-0")) % 7  # Kafka's partitionFor
    assert nodes.slot_of("tx-0") == abs(java_hash("tx-0")) % 50  # the group slots are another map
    doc = orjson.loads((tmp_path / "d" / TXN_SLOTS_FILE).read_bytes())
    assert len(doc["replicas"]) == 7 and all(sorted(r) == [1, 2, 3] for r in doc["replicas"])
    by_node = ids_by_coordinator(b)
    assert set(by_node) == {1, 2, 3}
    for node, tids in by_node.items():
        for asked in (1, 2, 3):
            with b.client(asked) as c:
                one = c.call(FIND, 3, FindCoordinatorRequest(key=tids[0], key_type=1))
                many = c.call(FIND, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=tids[:3]))
            assert (one.error_code, one.node_id, one.port) == (0, node, 9000 + node)
            assert [(k.node_id, k.error_code) for k in many.coordinators] == [(node, 0)] * len(tids[:3])
    # a transactional id's coordinator is not its group namesake's
    differs = [
        t for tids in by_node.values() for t in tids if nodes.txn_coordinator(t) != nodes.coordinator(t)
    ]
    assert differs
    b.stop()
    again = node_factory({"cluster.nodes": 3, "transaction.state.log.num.partitions": 7}, tmp_path / "d")
    assert again.broker.nodes.txn_slots.leaders == doc["leaders"]  # kept across restarts


def test_a_single_node_writes_no_slot_file_and_a_cluster_directory_from_before_gets_one(
    node_factory, tmp_path
):
    one = node_factory(data_dir=tmp_path / "single")
    with one.client() as c:
        assert _init(c, "tx").error_code == 0
    assert not (tmp_path / "single" / TXN_SLOTS_FILE).exists()
    one.stop()
    # a cluster directory written before transaction slots existed: coordinators.json only
    old = node_factory({"cluster.nodes": 3}, tmp_path / "old")
    old.stop()
    (tmp_path / "old" / TXN_SLOTS_FILE).unlink()
    again = node_factory({"cluster.nodes": 3}, tmp_path / "old")
    assert (tmp_path / "old" / TXN_SLOTS_FILE).exists()
    tid = ids_by_coordinator(again)[2][0]
    with again.client(2) as c:
        assert _init(c, tid).error_code == 0


def test_transaction_apis_on_another_node_get_not_coordinator(node_factory):
    b = node_factory({"cluster.nodes": 3})
    by_node = ids_by_coordinator(b)
    mine, other = by_node[1][0], by_node[2][0]
    create(b, "t", partitions=1, rf=3)
    leader = _leader(b, "t", 0)
    with b.client(2) as c:
        assert _init(c, mine).error_code == ErrorCode.NOT_COORDINATOR
        # Kafka checks the timeout before the coordinator
        assert _init(c, mine, timeout=900_001).error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        o = _init(c, other)
        assert o.error_code == 0
    with b.client(1) as c:
        init = _init(c, mine)
        pid, epoch = init.producer_id, init.producer_epoch
        assert init.error_code == 0
        assert _add(c, mine, pid, epoch, "t", 0) == {0: 0}
        assert _add(c, other, o.producer_id, o.producer_epoch, "t", 0) == {0: ErrorCode.NOT_COORDINATOR}
        offsets = AddOffsetsToTxnRequest(other, o.producer_id, o.producer_epoch, "g")
        assert c.call(ADD_OFFSETS, 3, offsets).error_code == ErrorCode.NOT_COORDINATOR
        assert _end(c, other, o.producer_id, o.producer_epoch, True) == ErrorCode.NOT_COORDINATOR
        # batched (v4+, as brokers verify): each transaction on its own
        batched = AddPartitionsToTxnRequest(
            transactions=[
                AddPartitionsToTxnTransaction(mine, pid, epoch, True, [AddPartitionsToTxnTopic("t", [0])]),
                AddPartitionsToTxnTransaction(
                    other, o.producer_id, o.producer_epoch, True, [AddPartitionsToTxnTopic("t", [0])]
                ),
            ]
        )
        results = c.call(ADD_PARTITIONS, 4, batched).results_by_transaction
        codes = {r.transactional_id: r.topic_results[0].results_by_partition[0].partition_error_code
                 for r in results}  # fmt: skip
        assert codes == {mine: 0, other: ErrorCode.NOT_COORDINATOR}
        assert _describe(c, mine, other) == {
            mine: (0, "Ongoing"),
            other: (ErrorCode.NOT_COORDINATOR, ""),
        }
        assert mine in _listed(c) and other not in _listed(c)
    with b.client(2) as c:
        assert other in _listed(c) and mine not in _listed(c)
    with b.client(leader) as c:
        assert _produce(c, mine, "t", 0, pid, epoch, 0, [b"a"]).error_code == 0
    with b.client(1) as c:
        assert _end(c, mine, pid, epoch, True) == 0
    assert _batches(b, "t", 0) == [("data", b"a"), ("marker", True)]


def test_a_move_reloads_the_ids_and_the_producer_continues_on_the_new_node(node_factory, tmp_path):
    b = node_factory({"cluster.nodes": 3}, tmp_path / "d")
    tid = ids_by_coordinator(b)[1][0]
    create(b, "t", partitions=1, rf=3)
    with b.client(1) as c:
        init = _init(c, tid)
        pid, epoch = init.producer_id, init.producer_epoch
        assert _add(c, tid, pid, epoch, "t", 0) == {0: 0}
    with b.client(_leader(b, "t", 0)) as c:
        assert _produce(c, tid, "t", 0, pid, epoch, 0, [b"a"]).error_code == 0
    started = b.broker.txns.state.txns[tid].start_ms
    assert b.broker.nodes.move_txn_coordinator(tid, 2) == (1, 2)
    # the ongoing transaction was loaded again with its start (its timeout counts from there)
    meta = b.broker.txns.state.txns[tid]
    assert (meta.state.name, meta.start_ms, meta.partitions) == ("ONGOING", started, {("t", 0)})
    assert f"txn-timeout:{tid}" in b.broker.txns.timers.deadlines
    with b.client(1) as c:
        assert _end(c, tid, pid, epoch, True) == ErrorCode.NOT_COORDINATOR
        assert _describe(c, tid) == {tid: (ErrorCode.NOT_COORDINATOR, "")}
        assert c.call(FIND, 3, FindCoordinatorRequest(key=tid, key_type=1)).node_id == 2
    with b.client(2) as c:
        assert _describe(c, tid) == {tid: (0, "Ongoing")}
        assert _end(c, tid, pid, epoch, True) == 0
    assert _batches(b, "t", 0) == [("data", b"a"), ("marker", True)]
    b.stop()
    again = node_factory({"cluster.nodes": 3}, tmp_path / "d")
    assert again.broker.nodes.txn_coordinator(tid) == 2
    with again.client(2) as c:
        assert _describe(c, tid) == {tid: (0, "CompleteCommit")}


def test_markers_wait_for_a_leader_and_a_move_hands_the_completion_over(node_factory):
    b = node_factory({"cluster.nodes": 3})
    tid = ids_by_coordinator(b)[1][0]
    create(b, "solo", assignments=[(0, [3])])  # one replica: no leader while node 3 is down
    with b.client(1) as c:
        init = _init(c, tid)
        pid, epoch = init.producer_id, init.producer_epoch
        assert _add(c, tid, pid, epoch, "solo", 0) == {0: 0}
    with b.client(3) as c:
        assert _produce(c, tid, "solo", 0, pid, epoch, 0, [b"a"]).error_code == 0
    b.broker.nodes.node_down(3)
    assert b.broker.nodes.txn_coordinator(tid) == 1
    end = b.start(END_TXN, 3, EndTxnRequest(tid, pid, epoch, True), InProcessClient(b, node=1).info)
    with b.client(1) as c:
        assert _describe(c, tid) == {tid: (0, "PrepareCommit")}  # the marker waits
    assert not end.done()
    b.broker.nodes.move_txn_coordinator(tid, 2)
    assert b.answer(end, END_TXN, 3).error_code == ErrorCode.NOT_COORDINATOR
    with b.client(2) as c:
        assert _describe(c, tid) == {tid: (0, "PrepareCommit")}
        assert _end(c, tid, pid, epoch, True) == ErrorCode.CONCURRENT_TRANSACTIONS
    b.broker.nodes.node_up(3)
    b.loop.run_until_complete(asyncio.wait(list(b.broker.txns.completing.values())))
    with b.client(2) as c:
        assert _describe(c, tid) == {tid: (0, "CompleteCommit")}
        assert _end(c, tid, pid, epoch, True) == 0  # the retry of the end the move interrupted
    assert _batches(b, "solo", 0) == [("data", b"a"), ("marker", True)]  # one marker, not two


def test_an_add_whose_coordinator_moves_in_flight_is_not_coordinator(node_factory):
    b = node_factory({"cluster.nodes": 3})
    tid = ids_by_coordinator(b)[1][0]
    create(b, "t", partitions=1, rf=3)
    with b.client(1) as c:
        init = _init(c, tid)
    pid, epoch = init.producer_id, init.producer_epoch
    req = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnTopic(name="t", partitions=[0])],
    )  # fmt: skip
    add = b.start(ADD_PARTITIONS, 3, req, InProcessClient(b, node=1).info)
    b.loop.run_until_complete(asyncio.sleep(0))  # its record is appended, waiting for the fsync
    assert not add.done()
    b.broker.nodes.move_txn_coordinator(tid, 2)
    (t,) = b.answer(add, ADD_PARTITIONS, 3).results_by_topic_v3_and_below
    assert t.results_by_partition[0].partition_error_code == ErrorCode.NOT_COORDINATOR
    with b.client(2) as c:  # the record was written: the new coordinator has it, the retry succeeds
        assert _describe(c, tid) == {tid: (0, "Ongoing")}
        assert _add(c, tid, pid, epoch, "t", 0) == {0: 0}
