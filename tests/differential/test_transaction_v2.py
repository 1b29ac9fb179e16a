"""Transaction version 2 (KIP-890 part 2) against Apache Kafka: one scripted transactional producer
run on both brokers, comparing what it observes step by step -- error codes, producer ids and
epochs relative to InitProducerId's (KIP-890's bumps), whether the producer id changed, the
markers' epochs -- so that the bump at every EndTxn v5, retries of an end, Produce v12's implicit
add, TxnOffsetCommit v5's and the fencing of an ended transaction's epoch are Kafka's. Kafka answers
EndTxn once the transaction is prepared: each step after an end first waits for both brokers'
transaction to be complete (DescribeTransactions)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from broker.log.records import build_batch, iter_records
from broker.protocol.generated.api_versions import ApiVersionsRequest
from broker.protocol.generated.create_topics import CreatableTopic, CreateTopicsRequest
from broker.protocol.generated.describe_transactions import DescribeTransactionsRequest
from broker.protocol.generated.end_txn import EndTxnRequest
from broker.protocol.generated.fetch import FetchPartition, FetchRequest, FetchTopic
from broker.protocol.generated.find_coordinator import FindCoordinatorRequest
from broker.protocol.generated.init_producer_id import InitProducerIdRequest
from broker.protocol.generated.metadata import MetadataRequest, MetadataRequestTopic
from broker.protocol.generated.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.protocol.generated.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from tests.differential.engine import Peer
from tests.support.wire import WireClient

FIND_COORDINATOR = 10
PRODUCE, FETCH, METADATA, TXN_OFFSET_COMMIT, INIT, END_TXN, DESCRIBE_TXNS = 0, 1, 3, 28, 22, 26, 65


class Run:
    """The script on one broker: ``log`` is what it observed."""

    def __init__(self, port: int, tid: str, topic: str):
        self.c = WireClient(port, timeout=30.0)
        self.tid, self.topic = tid, topic
        self.log: list[tuple] = []
        self.pid0 = self.epoch0 = -1
        self.seq: dict[int, int] = {}

    def note(self, *what: Any) -> None:
        self.log.append(what)

    def rel(self, pid: int, epoch: int) -> tuple:
        """A producer id and epoch as the script compares them: new id or not, epoch offset."""
        if pid == -1:
            return ("none", epoch)
        return ("same id" if pid == self.pid0 else "new id", epoch - self.epoch0 if epoch >= 0 else epoch)

    def init(self) -> None:
        # Kafka creates and loads __transaction_state on the first FindCoordinator: until then
        # COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR, which clients retry
        for _ in range(200):
            find = self.c.call(
                FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=[self.tid])
            )
            if find.coordinators[0].error_code == 0:
                break
            time.sleep(0.1)
        for _ in range(200):
            resp = self.c.call(INIT, 5, InitProducerIdRequest(self.tid, 60_000, -1, -1))
            if resp.error_code not in (14, 15, 16, 51):  # load in progress, not available, not coordinator
                break
            time.sleep(0.1)
        self.pid0, self.epoch0 = resp.producer_id, resp.producer_epoch
        self.note("init", resp.error_code)

    def produce(self, version: int, partition: int, epoch_delta: int, label: str) -> None:
        seq = self.seq.get((partition, epoch_delta), 0)
        batch = build_batch([(None, label.encode())], producer_id=self.pid0, producer_epoch=self.epoch0 + epoch_delta,
                            base_sequence=seq, transactional=True)  # fmt: skip
        td = TopicProduceData(self.topic, partition_data=[PartitionProduceData(partition, batch)])
        # Kafka: NOT_ENOUGH_REPLICAS (CONCURRENT_TRANSACTIONS) while a marker is pending; and
        # NOT_LEADER_OR_FOLLOWER from its produce-time verification (AddPartitionsToTxnManager) for the
        # first unadded batch when other transactions ran in the session before (the corpus of
        # test_protocol.py): both retriable, and retried by clients
        for _ in range(50):
            p = self.c.call(PRODUCE, version, ProduceRequest(self.tid, -1, 10_000, [td])).responses[0]
            code = p.partition_responses[0].error_code
            if code not in (6, 19):
                break
            time.sleep(0.1)
        if code == 0:
            self.seq[(partition, epoch_delta)] = seq + 1
        self.note(f"produce v{version} {label}", code)

    def end(self, commit: bool, epoch_delta: int, label: str, pid: int | None = None) -> None:
        req = EndTxnRequest(self.tid, self.pid0 if pid is None else pid, self.epoch0 + epoch_delta, commit)
        resp = self.c.call(END_TXN, 5, req)
        self.note(f"end {label}", resp.error_code, self.rel(resp.producer_id, resp.producer_epoch))
        self.settle()

    def settle(self) -> None:
        """Wait until the transaction is no longer prepared (Kafka completes it after answering)."""
        for _ in range(100):
            state = self.c.call(DESCRIBE_TXNS, 0, DescribeTransactionsRequest([self.tid])).transaction_states[
                0
            ]
            if state.transaction_state not in ("PrepareCommit", "PrepareAbort"):
                return
            time.sleep(0.05)

    def describe(self) -> None:
        state = self.c.call(DESCRIBE_TXNS, 0, DescribeTransactionsRequest([self.tid])).transaction_states[0]
        parts = sorted((t.topic == self.topic, p) for t in state.topics for p in t.partitions)
        self.note("describe", state.error_code, state.transaction_state,
                  self.rel(state.producer_id, state.producer_epoch), parts)  # fmt: skip

    def txn_offset_commit(self, epoch_delta: int, version: int = 5) -> None:
        req = TxnOffsetCommitRequest(
            transactional_id=self.tid, group_id=self.tid + "-g", producer_id=self.pid0,
            producer_epoch=self.epoch0 + epoch_delta, generation_id=-1, member_id="", group_instance_id=None,
            topics=[TxnOffsetCommitRequestTopic(self.topic, [TxnOffsetCommitRequestPartition(0, 1, -1, "")])],
        )  # fmt: skip
        for _ in range(50):
            code = self.c.call(TXN_OFFSET_COMMIT, version, req).topics[0].partitions[0].error_code
            if code not in (15, 51):  # COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS: retriable
                break
            time.sleep(0.1)
        self.note(f"txn offset commit v{version}", code)

    def markers(self, partition: int) -> None:
        fp = FetchPartition(partition=partition, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                            log_start_offset=-1, partition_max_bytes=1 << 20)  # fmt: skip
        req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                           session_id=0, session_epoch=-1, topics=[FetchTopic(topic=self.topic, partitions=[fp])],
                           forgotten_topics_data=[], rack_id="")  # fmt: skip
        data = self.c.call(FETCH, 12, req).responses[0].partitions[0].records or b""
        seen = []
        for _o, _t, _k, value, _h, info in iter_records(bytes(data)):
            seen.append(("marker" if info.is_control else value.decode(), info.producer_epoch - self.epoch0))
        self.note(f"partition {partition}", seen)


def _script(r: Run) -> None:
    r.init()
    r.produce(9, 1, 0, "v9 not added")
    r.produce(11, 1, 0, "v11 not added")  # a TV2 client never sends v11 in a transaction
    r.txn_offset_commit(0, version=3)  # the offsets partition not added (AddOffsetsToTxn)
    r.txn_offset_commit(0, version=4)
    r.produce(12, 0, 0, "c0")  # added by the produce itself
    r.describe()
    r.end(True, 0, "commit")
    r.describe()
    r.end(True, 0, "commit again (a retry)")
    r.end(False, 0, "abort at the old epoch")
    r.produce(12, 0, 0, "late (old epoch)")
    r.produce(12, 0, 1, "a0")
    r.txn_offset_commit(1)
    r.describe()
    r.end(False, 1, "abort")
    r.end(True, 2, "commit with nothing added")
    r.end(False, 2, "abort with nothing added")
    r.describe()
    r.end(False, 2, "abort at the epoch before that")
    r.markers(0)
    r.markers(1)


def test_transaction_version_2_as_kafka(peers: tuple[Peer, Peer]) -> None:
    ours, theirs = peers
    tid, topic = f"tv2-{uuid.uuid4().hex[:8]}", f"tv2-{uuid.uuid4().hex[:8]}"
    logs = []
    for peer in (ours, theirs):
        r = Run(peer.port, tid, topic)
        try:
            features = r.c.call(18, 3, ApiVersionsRequest("differential", "1")).finalized_features
            assert {f.name: f.max_version_level for f in features}.get("transaction.version") == 2, peer.name
            r.c.call(19, 5, CreateTopicsRequest([CreatableTopic(topic, 2, 1, [], [])], 30_000, False))
            for _ in range(100):  # the new topic's leader known
                meta = r.c.call(
                    METADATA, 12, MetadataRequest([MetadataRequestTopic(name=topic)], False, False, False)
                )
                if meta.topics[0].error_code == 0 and meta.topics[0].partitions:
                    break
                time.sleep(0.05)
            _script(r)
        finally:
            r.c.close()
        logs.append(r.log)
    diffs = [(i, a, b) for i, (a, b) in enumerate(zip(*logs, strict=True)) if a != b]
    assert not diffs, "\n".join(f"step {i}: pykbroker {a} / kafka {b}" for i, a, b in diffs)
