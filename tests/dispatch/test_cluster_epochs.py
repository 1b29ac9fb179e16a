"""Leader epochs in the log of a simulated cluster (``cluster.nodes``): the leader stamps its epoch
on every batch it appends (partitionLeaderEpoch, outside the CRC), and OffsetForLeaderEpoch answers
from the epochs in the log, as Kafka's LeaderEpochFileCache.endOffsetFor does."""

from __future__ import annotations

import pytest

from broker.log.batch import iter_batches
from broker.log.records import simple_batch
from broker.protocol.generated.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from broker.protocol.generated.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from broker.protocol.generated.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from broker.protocol.generated.produce import PartitionProduceData, ProduceRequest, TopicProduceData

PRODUCE, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH, DELETE_RECORDS = 0, 2, 23, 21
LATEST, EARLIEST = -1, -2
CONFIG = {"cluster.nodes": 3}


def produce(b, node: int) -> None:
    req = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(name="t", partition_data=[PartitionProduceData(0, simple_batch([b"v"]))])
        ],
    )
    with b.client(node) as c:
        assert c.call(PRODUCE, 10, req).responses[0].partition_responses[0].error_code == 0


def epochs_in_log(b) -> list[tuple[int, int]]:
    plog = b.broker.logs.get("t", 0)
    return [(info.base_offset, info.partition_leader_epoch) for info in iter_batches(plog.read(0, 1 << 20))]


def ofle(b, node: int, epoch: int) -> tuple[int, int]:
    req = OffsetForLeaderEpochRequest(
        replica_id=-1, topics=[OffsetForLeaderTopic("t", [OffsetForLeaderPartition(0, -1, epoch)])]
    )
    with b.client(node) as c:
        p = c.call(OFFSET_FOR_LEADER_EPOCH, 4, req).topics[0].partitions[0]
    assert p.error_code == 0
    return p.leader_epoch, p.end_offset


@pytest.fixture
def moved(node_factory, tmp_path):
    """Epoch 0 on node 1: offsets 0-1; epoch 1 on node 2: 2-3; epoch 2 on node 3: nothing;
    epoch 3 on node 1: 4."""
    b = node_factory(CONFIG, tmp_path / "data")
    b.broker.create_topic("t", 1, None, False, False, None, [[1, 2, 3]])
    nodes = b.broker.nodes
    produce(b, 1)
    produce(b, 1)
    nodes.move_leader("t", 0, 2)
    produce(b, 2)
    produce(b, 2)
    nodes.move_leader("t", 0, 3)
    nodes.move_leader("t", 0, 1)
    produce(b, 1)
    return b


def test_the_leader_stamps_its_epoch_on_each_batch(moved):
    assert epochs_in_log(moved) == [(0, 0), (1, 0), (2, 1), (3, 1), (4, 3)]


def test_offset_for_leader_epoch_answers_from_the_epochs_in_the_log(moved):
    assert ofle(moved, 1, 0) == (0, 2)  # epoch 0 ends where epoch 1's first batch starts
    assert ofle(moved, 1, 1) == (1, 4)
    assert ofle(moved, 1, 2) == (1, 4)  # no batch of epoch 2: the latest epoch below it, to epoch 3's start
    assert ofle(moved, 1, 3) == (3, 5)  # the current epoch: the log end
    assert ofle(moved, 1, 4) == (-1, -1)  # unknown


def test_a_restart_keeps_stamping_the_persisted_epoch(moved, node_factory, tmp_path):
    moved.stop()
    again = node_factory(CONFIG, tmp_path / "data")
    produce(again, 1)
    assert epochs_in_log(again)[-1] == (5, 3)
    again.broker.nodes.move_leader("t", 0, 2)
    produce(again, 2)
    assert epochs_in_log(again)[-1] == (6, 4)
    assert ofle(again, 2, 3) == (3, 6)


def list_offsets(b, node: int, timestamp: int) -> tuple[int, int]:
    req = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=[ListOffsetsTopic("t", [ListOffsetsPartition(0, -1, timestamp, 1)])],
    )
    with b.client(node) as c:
        p = c.call(LIST_OFFSETS, 7, req).topics[0].partitions[0]
    assert p.error_code == 0
    return p.offset, p.leader_epoch


def test_list_offsets_gives_the_epoch_of_the_offset_it_finds(moved):
    assert list_offsets(moved, 1, EARLIEST) == (0, 0)
    assert list_offsets(moved, 1, LATEST) == (5, 3)
    req = DeleteRecordsRequest([DeleteRecordsTopic("t", [DeleteRecordsPartition(0, 3)])], 1000)
    with moved.client(1) as c:
        assert c.call(DELETE_RECORDS, 2, req).topics[0].partitions[0].error_code == 0
    assert list_offsets(moved, 1, EARLIEST) == (3, 1)  # the batch of offset 3 was stamped by epoch 1
