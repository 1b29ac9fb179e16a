"""Transaction APIs through the request pipeline of an in-process broker (no sockets)."""

from __future__ import annotations

import asyncio

from broker.log.control import parse_marker
from broker.log.records import build_batch, iter_records
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.add_offsets_to_txn import AddOffsetsToTxnRequest
from broker.protocol.generated.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from broker.protocol.generated.describe_producers import DescribeProducersRequest, TopicRequest
from broker.protocol.generated.describe_transactions import DescribeTransactionsRequest
from broker.protocol.generated.end_txn import EndTxnRequest
from broker.protocol.generated.find_coordinator import FindCoordinatorRequest
from broker.protocol.generated.init_producer_id import InitProducerIdRequest
from broker.protocol.generated.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from broker.protocol.generated.list_transactions import ListTransactionsRequest
from broker.protocol.generated.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.generated.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from broker.protocol.generated.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.protocol.generated.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from tests.support.produce_consume import fetch_request

PRODUCE, FETCH, LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH, FIND, INIT = 0, 1, 2, 8, 9, 10, 22
ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
DESCRIBE_PRODUCERS, DESCRIBE_TXNS, LIST_TXNS = 61, 65, 66


def _init(c, tid, version=4, timeout=60_000, pid=-1, epoch=-1):
    return c.call(INIT, version, InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout,
                                                        producer_id=pid, producer_epoch=epoch))  # fmt: skip


def test_init_producer_id_with_a_transactional_id(node_factory, tmp_path):
    node = node_factory(data_dir=tmp_path / "d")
    with node.client() as c:
        first = _init(c, "tx-a", version=0)
        assert first.error_code == 0 and first.producer_epoch == 0
        again = _init(c, "tx-a", version=5)
        assert (again.error_code, again.producer_id, again.producer_epoch) == (0, first.producer_id, 1)
        other = _init(c, "tx-b")
        assert other.producer_id != first.producer_id
        assert _init(c, "tx-a", timeout=900_001).error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert _init(c, "", version=3).error_code == ErrorCode.INVALID_REQUEST
        # idempotent producers are unchanged
        assert _init(c, None).producer_epoch == 0
    plog = node.broker.logs.get("__transaction_state", 0)
    assert plog is not None and node.broker.topics.get("__transaction_state").internal
    node.stop()
    node = node_factory(data_dir=tmp_path / "d")
    with node.client() as c:
        after = _init(c, "tx-a", version=3, pid=first.producer_id, epoch=1)
        assert (after.error_code, after.producer_id, after.producer_epoch) == (0, first.producer_id, 2)
        # KIP-360 with a producer id the transactional id never had: fenced (INVALID_PRODUCER_EPOCH < v4)
        assert (
            _init(c, "tx-a", version=3, pid=999_999, epoch=0).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        )
        assert _init(c, "tx-a", version=4, pid=999_999, epoch=0).error_code == ErrorCode.PRODUCER_FENCED


def test_find_coordinator_for_a_transactional_id(node):
    with node.client() as c:
        resp = c.call(FIND, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=["tx-a"]))
        (coord,) = resp.coordinators
        assert coord.error_code == 0 and coord.node_id == node.broker.node_id


# ---------------------------------------------------------------------- the write path


def _produce(c, tid, topic, partition, pid, epoch, seq, values, transactional=True):
    batch = build_batch([(None, v) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        transactional=transactional)  # fmt: skip
    td = TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=partition, records=batch)])
    (t,) = c.call(PRODUCE, 9, ProduceRequest(tid, -1, 10_000, [td])).responses
    return t.partition_responses[0]


def _add(c, tid, pid, epoch, topic, *partitions, version=3):
    req = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic, partitions=list(partitions))],
    )  # fmt: skip
    (t,) = c.call(ADD_PARTITIONS, version, req).results_by_topic_v3_and_below
    return {r.partition_index: r.partition_error_code for r in t.results_by_partition}


def _end(c, tid, pid, epoch, commit, version=3):
    return c.call(END_TXN, version, EndTxnRequest(tid, pid, epoch, commit)).error_code


def _batches(node, topic, partition):
    plog = node.broker.logs.get(topic, partition)
    data = plog.read(plog.log_start_offset, 1 << 30)
    out = []
    for off, _ts, key, value, _h, info in iter_records(data):
        out.append(("marker", parse_marker(key)) if info.is_control else ("data", value))
        assert info.producer_id >= 0 and info.is_transactional
        del off
    return out


def test_commit_and_abort_write_markers(node):
    node.broker.create_topic("t", 2, {})
    with node.client() as c:
        init = _init(c, "tx")
        pid, epoch = init.producer_id, init.producer_epoch
        # a transactional batch for a partition not in the transaction is refused
        assert _produce(c, "tx", "t", 0, pid, epoch, 0, [b"x"]).error_code == ErrorCode.INVALID_TXN_STATE
        assert _add(c, "tx", pid, epoch, "t", 0, 1) == {0: 0, 1: 0}
        assert _produce(c, "tx", "t", 0, pid, epoch, 0, [b"c0", b"c1"]).error_code == 0
        assert _produce(c, "tx", "t", 1, pid, epoch, 0, [b"c2"]).error_code == 0
        plog = node.broker.logs.get("t", 0)
        assert plog.producers.first_unstable_offset() == 0
        assert _end(c, "tx", pid, epoch, True) == 0
        assert plog.producers.first_unstable_offset() is None
        assert _batches(node, "t", 0) == [("data", b"c0"), ("data", b"c1"), ("marker", True)]
        assert _batches(node, "t", 1) == [("data", b"c2"), ("marker", True)]
        # the next transaction, aborted: sequences go on
        assert _add(c, "tx", pid, epoch, "t", 0) == {0: 0}
        assert _produce(c, "tx", "t", 0, pid, epoch, 2, [b"a0"]).error_code == 0
        assert _end(c, "tx", pid, epoch, False) == 0
        assert _batches(node, "t", 0)[-2:] == [("data", b"a0"), ("marker", False)]
        assert _batches(node, "t", 1) == [("data", b"c2"), ("marker", True)]  # only partitions added


def test_add_partitions_errors_as_kafka(node):
    node.broker.create_topic("t", 1, {})
    with node.client() as c:
        init = _init(c, "tx")
        pid, epoch = init.producer_id, init.producer_epoch
        assert _add(c, "tx", pid, epoch, "t", 0, 5) == {0: ErrorCode.OPERATION_NOT_ATTEMPTED,
                                                       5: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}  # fmt: skip
        assert _add(c, "tx", pid, epoch, "__consumer_offsets", 0) == {0: ErrorCode.TOPIC_AUTHORIZATION_FAILED}
        assert _add(c, "tx", pid, epoch + 1, "t", 0) == {0: ErrorCode.PRODUCER_FENCED}
        assert _add(c, "tx", pid, epoch + 1, "t", 0, version=1) == {0: ErrorCode.INVALID_PRODUCER_EPOCH}
        assert _add(c, "tx", pid + 1, epoch, "t", 0) == {0: ErrorCode.INVALID_PRODUCER_ID_MAPPING}
        # v4+: batched, and verify-only
        req = AddPartitionsToTxnRequest(transactions=[
            AddPartitionsToTxnTransaction("tx", pid, epoch, False, [AddPartitionsToTxnTopic("t", [0])]),
            AddPartitionsToTxnTransaction("other", 1, 0, True, [AddPartitionsToTxnTopic("t", [0])]),
        ])  # fmt: skip
        resp = c.call(ADD_PARTITIONS, 5, req)
        codes = {
            r.transactional_id: r.topic_results[0].results_by_partition[0].partition_error_code
            for r in resp.results_by_transaction
        }
        assert codes == {"tx": 0, "other": ErrorCode.INVALID_PRODUCER_ID_MAPPING}
        req = AddPartitionsToTxnRequest(transactions=[
            AddPartitionsToTxnTransaction("tx", pid, epoch, True, [AddPartitionsToTxnTopic("t", [0])]),
        ])  # fmt: skip
        (r,) = c.call(ADD_PARTITIONS, 4, req).results_by_transaction
        assert r.topic_results[0].results_by_partition[0].partition_error_code == 0  # it was added above


def test_a_fenced_producer_cannot_write_nor_end(node):
    node.broker.create_topic("t", 1, {})
    with node.client() as c:
        first = _init(c, "tx")
        pid, epoch = first.producer_id, first.producer_epoch
        _add(c, "tx", pid, epoch, "t", 0)
        assert _produce(c, "tx", "t", 0, pid, epoch, 0, [b"zombie"]).error_code == 0
        # a second producer with the same transactional id: the open transaction is aborted first
        assert _init(c, "tx").error_code == ErrorCode.CONCURRENT_TRANSACTIONS
        node.loop.run_until_complete(node.broker.txns.completing["tx"])
        second = _init(c, "tx")
        assert (second.error_code, second.producer_id, second.producer_epoch) == (0, pid, epoch + 2)
        assert _batches(node, "t", 0) == [("data", b"zombie"), ("marker", False)]
        assert (
            _produce(c, "tx", "t", 0, pid, epoch, 1, [b"late"]).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        )
        assert _end(c, "tx", pid, epoch, True) == ErrorCode.PRODUCER_FENCED
        assert _end(c, "tx", pid, epoch, True, version=1) == ErrorCode.INVALID_PRODUCER_EPOCH


def _txn_commit(c, tid, pid, epoch, group, topic, offset, version=3, generation=-1, member=""):
    req = TxnOffsetCommitRequest(
        transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch, generation_id=generation,
        member_id=member, group_instance_id=None,
        topics=[TxnOffsetCommitRequestTopic(topic, [TxnOffsetCommitRequestPartition(0, offset, -1, "m")])],
    )  # fmt: skip
    (t,) = c.call(TXN_OFFSET_COMMIT, version, req).topics
    return t.partitions[0].error_code


def _committed(c, group, topic, require_stable=False):
    req = OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequestTopic(topic, [0])],
                             require_stable=require_stable)  # fmt: skip
    p = c.call(OFFSET_FETCH, 7, req).topics[0].partitions[0]
    return p.error_code or p.committed_offset


def test_transactional_offset_commits(node_factory, tmp_path):
    node = node_factory(data_dir=tmp_path / "d")
    node.broker.create_topic("in", 1, {})
    with node.client() as c:
        init = _init(c, "tx")
        pid, epoch = init.producer_id, init.producer_epoch
        # __consumer_offsets not added yet: the commit is refused
        assert _txn_commit(c, "tx", pid, epoch, "g", "in", 5) == ErrorCode.INVALID_TXN_STATE
        add = c.call(ADD_OFFSETS, 3, AddOffsetsToTxnRequest("tx", pid, epoch, "g"))
        assert add.error_code == 0
        assert _txn_commit(c, "tx", pid, epoch, "g", "in", 5) == 0
        assert (
            _txn_commit(c, "tx", pid, epoch, "g", "in", 5, generation=3, member="m")
            == ErrorCode.ILLEGAL_GENERATION
        )
        assert _txn_commit(c, "tx", pid, epoch + 1, "g", "in", 5) == ErrorCode.INVALID_PRODUCER_EPOCH
        assert _committed(c, "g", "in") == -1  # pending: not visible
        assert _committed(c, "g", "in", require_stable=True) == ErrorCode.UNSTABLE_OFFSET_COMMIT
    node.stop()  # a restart while the transaction is open keeps the offsets pending
    node = node_factory(data_dir=tmp_path / "d")
    with node.client() as c:
        assert _committed(c, "g", "in", require_stable=True) == ErrorCode.UNSTABLE_OFFSET_COMMIT
        assert _end(c, "tx", pid, epoch, True) == 0
        assert _committed(c, "g", "in", require_stable=True) == 5
        # an aborted transaction's offsets are dropped
        assert c.call(ADD_OFFSETS, 3, AddOffsetsToTxnRequest("tx", pid, epoch, "g")).error_code == 0
        assert _txn_commit(c, "tx", pid, epoch, "g", "in", 9) == 0
        assert _end(c, "tx", pid, epoch, False) == 0
        assert _committed(c, "g", "in", require_stable=True) == 5
    node.stop()
    node = node_factory(data_dir=tmp_path / "d")
    with node.client() as c:
        assert _committed(c, "g", "in", require_stable=True) == 5


# ---------------------------------------------------------------------- the read path


def _fetch(c, topic, isolation, offset=0):
    req = fetch_request(topic, min_bytes=0, max_wait_ms=0, fetch_offset=offset)
    req.isolation_level = isolation
    return c.call(FETCH, 11, req).responses[0].partitions[0]


def _latest(c, topic, isolation):
    req = ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[
        ListOffsetsTopic(name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)])])  # fmt: skip
    return c.call(LIST_OFFSETS, 5, req).topics[0].partitions[0].offset


def test_read_committed_stops_at_the_lso_and_gets_aborted_transactions(node):
    node.broker.create_topic("t", 1, {})
    with node.client() as c:
        init = _init(c, "tx")
        pid, epoch = init.producer_id, init.producer_epoch
        _add(c, "tx", pid, epoch, "t", 0)
        _produce(c, "tx", "t", 0, pid, epoch, 0, [b"a0", b"a1"])
        node.loop.run_until_complete(asyncio.sleep(0.05))  # the group commit
        open_ = _fetch(c, "t", 1)
        assert (open_.high_watermark, open_.last_stable_offset, open_.records) == (2, 0, b"")
        assert open_.aborted_transactions == []
        assert _fetch(c, "t", 0).last_stable_offset == 0 and len(_fetch(c, "t", 0).records) > 0
        assert (_latest(c, "t", 1), _latest(c, "t", 0)) == (0, 2)
        assert _end(c, "tx", pid, epoch, False) == 0
        done = _fetch(c, "t", 1)
        assert (done.high_watermark, done.last_stable_offset) == (3, 3)
        assert [(a.producer_id, a.first_offset) for a in done.aborted_transactions] == [(pid, 0)]
        assert done.records  # the aborted batch and its marker: the consumer drops them
        assert _fetch(c, "t", 0).aborted_transactions is None
        assert _fetch(c, "t", 1, offset=3).aborted_transactions == []
        assert _latest(c, "t", 1) == 3


# ---------------------------------------------------------------------- admin


def test_describe_list_transactions_and_producers(node):
    node.broker.create_topic("t", 2, {})
    with node.client() as c:
        a = _init(c, "tx-a")
        b = _init(c, "tx-b")
        _add(c, "tx-a", a.producer_id, a.producer_epoch, "t", 1, 0)
        _produce(c, "tx-a", "t", 1, a.producer_id, a.producer_epoch, 0, [b"x", b"y"])
        (da, db, missing, empty) = c.call(
            DESCRIBE_TXNS, 0, DescribeTransactionsRequest(transactional_ids=["tx-a", "tx-b", "nope", ""])
        ).transaction_states
        assert (da.error_code, da.transaction_state, da.producer_id, da.producer_epoch) == (
            0, "Ongoing", a.producer_id, a.producer_epoch)  # fmt: skip
        assert [(t.topic, t.partitions) for t in da.topics] == [("t", [0, 1])]
        assert da.transaction_timeout_ms == 60_000 and da.transaction_start_time_ms > 0
        assert (db.transaction_state, db.topics) == ("Empty", [])
        assert missing.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        assert empty.error_code == ErrorCode.INVALID_REQUEST

        def listed(version=2, **kw):
            resp = c.call(LIST_TXNS, version, ListTransactionsRequest(**kw))
            return (
                resp.error_code,
                sorted(s.transactional_id for s in resp.transaction_states),
                resp.unknown_state_filters,
            )

        assert listed() == (0, ["tx-a", "tx-b"], [])
        assert listed(state_filters=["Ongoing", "Bogus"]) == (0, ["tx-a"], ["Bogus"])
        assert listed(producer_id_filters=[b.producer_id]) == (0, ["tx-b"], [])
        assert listed(transactional_id_pattern="tx-.") == (0, ["tx-a", "tx-b"], [])
        assert listed(transactional_id_pattern="b") == (0, [], [])  # a full match, as Kafka
        assert listed(transactional_id_pattern="(")[0] == ErrorCode.INVALID_REGULAR_EXPRESSION
        # an open transaction younger than the duration is left out; an Empty one (start -1) is
        # not, as Kafka's listTransactionStates compares now - start with the duration
        assert listed(version=1, duration_filter=3_600_000) == (0, ["tx-b"], [])

        req = DescribeProducersRequest(topics=[TopicRequest(name="t", partition_indexes=[1, 0, 9])])
        (t,) = c.call(DESCRIBE_PRODUCERS, 0, req).topics
        p1, p0, p9 = t.partitions
        (prod,) = p1.active_producers
        assert (prod.producer_id, prod.producer_epoch, prod.last_sequence, prod.current_txn_start_offset) == (
            a.producer_id, a.producer_epoch, 1, 0)  # fmt: skip
        assert prod.coordinator_epoch == -1 and p0.active_producers == []
        assert p9.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert _end(c, "tx-a", a.producer_id, a.producer_epoch, True) == 0
        (prod,) = c.call(DESCRIBE_PRODUCERS, 0, req).topics[0].partitions[0].active_producers
        assert (prod.current_txn_start_offset, prod.coordinator_epoch) == (-1, 0)


def test_a_transaction_left_prepared_is_completed_at_start_up(node_factory, tmp_path):
    """As after a crash between the PrepareCommit record and the markers: start-up writes the
    markers the prepared state implies, then CompleteCommit."""
    node = node_factory(data_dir=tmp_path / "d")
    node.broker.create_topic("t", 1, {})
    with node.client() as c:
        init = _init(c, "tx")
        pid, epoch = init.producer_id, init.producer_epoch
        _add(c, "tx", pid, epoch, "t", 0)
        _produce(c, "tx", "t", 0, pid, epoch, 0, [b"c0"])
        node.broker.txns.state.on_prepared = lambda tid: None  # the markers are never written
        assert _end(c, "tx", pid, epoch, True) == 0
        assert node.broker.txns.state.txns["tx"].state.kafka_name == "PrepareCommit"
        assert _batches(node, "t", 0) == [("data", b"c0")]
    node.stop()
    node = node_factory(data_dir=tmp_path / "d")
    assert node.broker.logs.get("t", 0).last_stable_offset == 0  # the transaction is still open here
    node.loop.run_until_complete(asyncio.sleep(0.05))  # the resume timer fires
    task = node.broker.txns.completing.get("tx")
    if task is not None:
        node.loop.run_until_complete(task)
    assert node.broker.txns.state.txns["tx"].state.kafka_name == "CompleteCommit"
    assert _batches(node, "t", 0) == [("data", b"c0"), ("marker", True)]
    with node.client() as c:
        done = _fetch(c, "t", 1)
        assert (done.last_stable_offset, done.aborted_transactions) == (2, [])


def test_a_newer_plain_commit_wins_over_a_transactions_commit(node_factory, tmp_path):
    """As Kafka: the offset committed last (by log position) is the one kept when the transaction's
    marker makes its pending offset visible, live and after a restart."""
    node = node_factory(data_dir=tmp_path / "d")
    node.broker.create_topic("in", 1, {})
    with node.client() as c:
        init = _init(c, "tx")
        pid, epoch = init.producer_id, init.producer_epoch
        assert c.call(ADD_OFFSETS, 3, AddOffsetsToTxnRequest("tx", pid, epoch, "g")).error_code == 0
        assert _txn_commit(c, "tx", pid, epoch, "g", "in", 5) == 0
        req = OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
            OffsetCommitRequestTopic(name="in", partitions=[OffsetCommitRequestPartition(0, 7, -1, "")])])  # fmt: skip
        assert c.call(OFFSET_COMMIT, 8, req).topics[0].partitions[0].error_code == 0
        assert _end(c, "tx", pid, epoch, True) == 0
        assert _committed(c, "g", "in", require_stable=True) == 7
    node.stop()
    node = node_factory(data_dir=tmp_path / "d")
    with node.client() as c:
        assert _committed(c, "g", "in", require_stable=True) == 7


# ---------------------------------------------------------------------- transaction version 2


API_VERSIONS = 18


def _produce_v(c, version, tid, topic, partition, pid, epoch, seq, values):
    batch = build_batch([(None, v) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        transactional=True)  # fmt: skip
    td = TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=partition, records=batch)])
    (t,) = c.call(PRODUCE, version, ProduceRequest(tid, -1, 10_000, [td])).responses
    return t.partition_responses[0]


def _marker_epochs(node, topic, partition):
    plog = node.broker.logs.get(topic, partition)
    data = plog.read(plog.log_start_offset, 1 << 30)
    return [(parse_marker(key), info.producer_epoch) for _o, _t, key, _v, _h, info in iter_records(data)
            if info.is_control]  # fmt: skip


def _finalized(c):
    from broker.protocol.generated.api_versions import ApiVersionsRequest

    resp = c.call(API_VERSIONS, 3, ApiVersionsRequest("t", "1"))
    supported = {f.name: (f.min_version, f.max_version) for f in resp.supported_features}
    return supported["transaction.version"], {f.name: f.max_version_level for f in resp.finalized_features}


def test_tv2_produce_v12_adds_its_partition_and_end_v5_bumps_the_epoch(node):
    node.broker.create_topic("t", 2, {})
    with node.client() as c:
        assert _finalized(c) == (
            (0, 2),
            {"metadata.version": 30, "group.version": 1, "transaction.version": 2},
        )
        init = _init(c, "tx")
        pid, epoch = init.producer_id, init.producer_epoch
        # v11: the partition must have been added (a TV2 client never sends v11 in a transaction);
        # from v11 Kafka answers TRANSACTION_ABORTABLE (before: INVALID_TXN_STATE)
        v11 = _produce_v(c, 11, "tx", "t", 0, pid, epoch, 0, [b"x"])
        assert v11.error_code == ErrorCode.TRANSACTION_ABORTABLE
        # v12 adds it: no AddPartitionsToTxn
        assert _produce_v(c, 12, "tx", "t", 0, pid, epoch, 0, [b"c0"]).error_code == 0
        assert _produce_v(c, 12, "tx", "t", 1, pid, epoch, 0, [b"c1"]).error_code == 0
        assert _produce_v(c, 12, "tx", "t", 0, pid, epoch, 1, [b"c2"]).error_code == 0
        desc = c.call(DESCRIBE_TXNS, 0, DescribeTransactionsRequest(["tx"])).transaction_states[0]
        assert desc.transaction_state == "Ongoing" and sorted(
            p for t in desc.topics for p in t.partitions
        ) == [0, 1]
        end = c.call(END_TXN, 5, EndTxnRequest("tx", pid, epoch, True))
        assert (end.error_code, end.producer_id, end.producer_epoch) == (0, pid, epoch + 1)
        # the markers carry the bumped epoch
        assert _marker_epochs(node, "t", 0) == [(True, epoch + 1)]
        assert _marker_epochs(node, "t", 1) == [(True, epoch + 1)]
        # a retry of that end (its answer lost) gets the same answer; the old epoch is fenced
        again = c.call(END_TXN, 5, EndTxnRequest("tx", pid, epoch, True))
        assert (again.error_code, again.producer_id, again.producer_epoch) == (0, pid, epoch + 1)
        old = _produce_v(c, 12, "tx", "t", 0, pid, epoch, 2, [b"late"])
        assert old.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        # the next transaction: the new epoch from sequence 0, offsets through TxnOffsetCommit v5
        assert _produce_v(c, 12, "tx", "t", 0, pid, epoch + 1, 0, [b"a0"]).error_code == 0
        assert _txn_commit(c, "tx", pid, epoch + 1, "g", "t", 7, version=5) == 0
        assert _committed(c, "g", "t", require_stable=True) == ErrorCode.UNSTABLE_OFFSET_COMMIT
        end = c.call(END_TXN, 5, EndTxnRequest("tx", pid, epoch + 1, False))
        assert (end.error_code, end.producer_id, end.producer_epoch) == (0, pid, epoch + 2)
        assert _marker_epochs(node, "t", 0) == [(True, epoch + 1), (False, epoch + 2)]
        assert _committed(c, "g", "t", require_stable=True) == -1  # aborted: dropped
        # read_committed: the aborted transaction is named for the client to drop its records
        fetched = _fetch(c, "t", 1)
        aborted = [(a.producer_id, a.first_offset) for a in fetched.aborted_transactions]
        assert aborted == [(pid, 3)]  # c0, c2, the commit marker, then a0
        assert _latest(c, "t", 1) == _latest(c, "t", 0) == 5


def test_tv2_end_v5_errors(node):
    node.broker.create_topic("t", 1, {})
    with node.client() as c:
        init = _init(c, "tx")
        pid, epoch = init.producer_id, init.producer_epoch
        assert _produce_v(c, 12, "tx", "t", 0, pid, epoch, 0, [b"c0"]).error_code == 0
        fenced = c.call(END_TXN, 5, EndTxnRequest("tx", pid, epoch + 3, True))
        assert (fenced.error_code, fenced.producer_id, fenced.producer_epoch) == (
            ErrorCode.PRODUCER_FENCED,
            -1,
            -1,
        )
        unknown = c.call(END_TXN, 5, EndTxnRequest("tx", pid + 1, epoch, True))
        assert unknown.error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        # a produce v12 for a topic that does not exist adds nothing
        assert (
            _produce_v(c, 12, "tx", "nope", 0, pid, epoch, 0, [b"x"]).error_code
            == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
        desc = c.call(DESCRIBE_TXNS, 0, DescribeTransactionsRequest(["tx"])).transaction_states[0]
        assert [t.topic for t in desc.topics] == ["t"]


def test_transaction_version_0_is_the_classic_protocol(node_factory):
    node = node_factory({"transaction.version": "0"})
    node.broker.create_topic("t", 1, {})
    with node.client() as c:
        assert _finalized(c) == ((0, 2), {"metadata.version": 30, "group.version": 1})
        init = _init(c, "tx")
        pid, epoch = init.producer_id, init.producer_epoch
        # no implicit add, whatever the version
        v12 = _produce_v(c, 12, "tx", "t", 0, pid, epoch, 0, [b"x"])
        assert v12.error_code == ErrorCode.TRANSACTION_ABORTABLE
        assert _txn_commit(c, "tx", pid, epoch, "g", "t", 1, version=5) == ErrorCode.TRANSACTION_ABORTABLE
        assert _txn_commit(c, "tx", pid, epoch, "g", "t", 1, version=3) == ErrorCode.INVALID_TXN_STATE
        assert _add(c, "tx", pid, epoch, "t", 0) == {0: 0}
        assert _produce_v(c, 12, "tx", "t", 0, pid, epoch, 0, [b"x"]).error_code == 0
        assert _end(c, "tx", pid, epoch, True, version=4) == 0
        assert _marker_epochs(node, "t", 0) == [(True, epoch)]
    # the transaction log's values are v0 at level 0
    plog = node.broker.logs.get("__transaction_state", 0)
    data = plog.read(0, 1 << 30)
    assert {v[:2] for _o, _t, _k, v, _h, _i in iter_records(data)} == {b"\x00\x00"}


def test_releases_without_tv2_finalize_level_0(node_factory):
    """kafka.version 3.9 advertises EndTxn v4, Produce v11 and TxnOffsetCommit v4 at most: its
    clients cannot speak KIP-890 part 2, so the coordinator and ApiVersions keep to level 0."""
    node = node_factory({"kafka.version": "3.9"})
    assert node.broker.txns.transaction_version == 0
    with node.client() as c:
        assert _finalized(c)[1].get("transaction.version") is None
    node = node_factory({"kafka.version": "4.3", "transaction.version": "1"})
    assert node.broker.txns.transaction_version == 1
    with node.client() as c:
        assert _finalized(c)[1]["transaction.version"] == 1
