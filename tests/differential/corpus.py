"""The protocol-level corpus: for each API, cases (lists of :class:`Step`) built for one version.

Every case uses fresh topic and group names (``Names``), so cases are independent of each other and
of their order. Set-up steps (creating a topic, producing records, joining a group) run on both
brokers at fixed versions with ``compare=False``; the steps that exercise the API under test run at
the version under test and are compared. Cases mix valid requests with non-default values and
invalid ones (unknown topics and groups, out-of-range partitions and offsets, absurd sizes and
timeouts, bad names, truncated frames and trailing bytes).
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from broker.log.records import Record, build_batch
from broker.protocol.generated.add_offsets_to_txn import AddOffsetsToTxnRequest
from broker.protocol.generated.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from broker.protocol.generated.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasRequestEntityData,
    AlterClientQuotasRequestEntryData,
    OpData,
)
from broker.protocol.generated.alter_configs import AlterableConfig as LegacyAlterable
from broker.protocol.generated.alter_configs import AlterConfigsRequest
from broker.protocol.generated.alter_configs import AlterConfigsResource as LegacyAlterResource
from broker.protocol.generated.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from broker.protocol.generated.alter_replica_log_dirs import (
    AlterReplicaLogDir,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirTopic,
)
from broker.protocol.generated.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from broker.protocol.generated.api_versions import ApiVersionsRequest
from broker.protocol.generated.consumer_group_describe import ConsumerGroupDescribeRequest
from broker.protocol.generated.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from broker.protocol.generated.create_partitions import CreatePartitionsRequest, CreatePartitionsTopic
from broker.protocol.generated.create_topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from broker.protocol.generated.delete_groups import DeleteGroupsRequest
from broker.protocol.generated.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from broker.protocol.generated.delete_topics import DeleteTopicsRequest, DeleteTopicState
from broker.protocol.generated.describe_client_quotas import ComponentData, DescribeClientQuotasRequest
from broker.protocol.generated.describe_cluster import DescribeClusterRequest
from broker.protocol.generated.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from broker.protocol.generated.describe_groups import DescribeGroupsRequest
from broker.protocol.generated.describe_log_dirs import DescribableLogDirTopic, DescribeLogDirsRequest
from broker.protocol.generated.describe_producers import DescribeProducersRequest
from broker.protocol.generated.describe_producers import TopicRequest as DPTopic
from broker.protocol.generated.describe_quorum import (
    DescribeQuorumRequest,
    DescribeQuorumRequestPartitionData,
    DescribeQuorumRequestTopicData,
)
from broker.protocol.generated.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsRequestCursor,
    TopicRequest,
)
from broker.protocol.generated.describe_transactions import DescribeTransactionsRequest
from broker.protocol.generated.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from broker.protocol.generated.elect_leaders import ElectLeadersRequest, TopicPartitions
from broker.protocol.generated.end_txn import EndTxnRequest
from broker.protocol.generated.fetch import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from broker.protocol.generated.find_coordinator import FindCoordinatorRequest
from broker.protocol.generated.heartbeat import HeartbeatRequest
from broker.protocol.generated.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from broker.protocol.generated.init_producer_id import InitProducerIdRequest
from broker.protocol.generated.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from broker.protocol.generated.leave_group import LeaveGroupRequest, MemberIdentity
from broker.protocol.generated.list_config_resources import ListConfigResourcesRequest
from broker.protocol.generated.list_groups import ListGroupsRequest
from broker.protocol.generated.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from broker.protocol.generated.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsTopics,
)
from broker.protocol.generated.list_transactions import ListTransactionsRequest
from broker.protocol.generated.metadata import MetadataRequest, MetadataRequestTopic
from broker.protocol.generated.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.generated.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from broker.protocol.generated.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from broker.protocol.generated.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from broker.protocol.generated.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.protocol.generated.sasl_authenticate import SaslAuthenticateRequest
from broker.protocol.generated.sasl_handshake import SaslHandshakeRequest
from broker.protocol.generated.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from broker.protocol.generated.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from broker.protocol.generated.update_features import FeatureUpdateKey, UpdateFeaturesRequest
from tests.differential.engine import Peer, Step, trailing, truncate

Case = tuple[str, list[Step]]
BASE_TS = 1_700_000_000_000  # record timestamps: fixed, so fetched batches are byte-identical
#: timestamps of the records of the transaction cases: the session's start. Kafka rolls a segment when
#: a batch's timestamp is log.roll.ms (7 days) past the segment's first (LogSegment.shouldRoll), and a
#: Fetch reads one segment: a marker (stamped now) after BASE_TS records would start a new segment
#: there, so a fetch from 0 would stop before it (a client fetches again; pykbroker does not roll)
NOW_TS = int(time.time()) * 1000
#: a consumer-protocol subscription (version 0, topics ["t"]) and assignment, as opaque bytes
SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"
SUBSCRIBED = "t"  # the one topic SUBSCRIPTION names
ASSIGNMENT = b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff"

_serial = itertools.count(1)


class Names:
    """Fresh topic and group names for one case (the same on both brokers)."""

    def __init__(self) -> None:
        self.n = next(_serial)

    def topic(self, tag: str = "t") -> str:
        return f"dt{self.n}-{tag}"

    def group(self, tag: str = "g") -> str:
        return f"dg{self.n}-{tag}"


# ===================================================================================== set-up steps


def batch(n: int = 3, *, headers: bool = True, ts: int = BASE_TS, **kw: Any) -> bytes:
    recs = [
        Record(i, i * 10, f"k{i}".encode(), f"value-{i}".encode(), [("h", b"x")] if headers else [])
        for i in range(n)
    ]
    return build_batch(recs, base_timestamp=ts, **kw)


def create(topic: str, partitions: int = 1, configs: dict[str, str] | None = None) -> Step:
    cfg = [CreatableTopicConfig(k, v) for k, v in (configs or {}).items()]
    req = CreateTopicsRequest([CreatableTopic(topic, partitions, 1, [], cfg)], 30000, False)
    return Step(19, 5, req, compare=False, settle=(topic,))


def produce(topic: str, partition: int = 0, n: int = 3, ts: int = BASE_TS) -> Step:
    req = ProduceRequest(
        None,
        -1,
        10000,
        [TopicProduceData(topic, partition_data=[PartitionProduceData(partition, batch(n, ts=ts))])],
    )
    return Step(0, 9, req, compare=False)


def produce_batch(topic: str, records: bytes, partition: int = 0) -> Step:
    """A set-up Produce of the given records (not compared)."""
    data = [TopicProduceData(topic, partition_data=[PartitionProduceData(partition, records)])]
    return Step(0, 9, ProduceRequest(None, -1, 10000, data), compare=False)


def commit(group: str, topic: str, offset: int = 2, partition: int = 0) -> Step:
    part = OffsetCommitRequestPartition(partition, offset, -1, -1, "meta")
    req = OffsetCommitRequest(group, -1, "", None, -1, [OffsetCommitRequestTopic(topic, partitions=[part])])
    return Step(8, 8, req, compare=False)


def _protocols() -> list[JoinGroupRequestProtocol]:
    return [JoinGroupRequestProtocol("range", SUBSCRIPTION), JoinGroupRequestProtocol("roundrobin", b"\x01")]


def _remember_join(resp: Any, mem: dict) -> None:
    if resp.member_id:
        mem["member"] = resp.member_id
    mem["generation"] = resp.generation_id


def join_steps(
    group: str, compare: bool = False, instance: str | None = None, version: int = 5
) -> list[Step]:
    """A lone member joins ``group`` (member id first when the version requires it)."""

    def body(p: Peer) -> JoinGroupRequest:
        return JoinGroupRequest(
            group, 10000, 20000, p.memory.get("member", ""), instance, "consumer", _protocols(), None
        )

    # (a broker that has just started may still be loading its coordinator: retried, as clients do)
    ready = lambda r: r.error_code not in RETRIABLE_COORDINATOR  # noqa: E731
    steps = [Step(11, version, body, compare=compare, remember=_remember_join, label="join", until=ready)]
    if version >= 4 and instance is None:
        steps.append(
            Step(11, version, body, compare=compare, remember=_remember_join, label="rejoin", until=ready)
        )
    return steps


def sync_step(group: str, compare: bool = False, version: int = 3) -> Step:
    def body(p: Peer) -> SyncGroupRequest:
        m = p.memory["member"]
        return SyncGroupRequest(
            group,
            p.memory["generation"],
            m,
            None,
            "consumer",
            "range",
            [SyncGroupRequestAssignment(m, ASSIGNMENT)],
        )

    return Step(14, version, body, compare=compare, label="sync")


def stable_group(group: str) -> list[Step]:
    return join_steps(group) + [sync_step(group)]


# ============================================================================================ cases


def produce_cases(v: int, n: Names) -> Iterator[Case]:
    t = n.topic()

    def req(
        topic: str, partition: int, records: bytes | None, acks: int = -1, timeout: int = 5000
    ) -> Callable:
        def body(p: Peer) -> ProduceRequest:
            tid = p.topic_id(topic) if v >= 13 else None
            data = TopicProduceData(topic, partition_data=[PartitionProduceData(partition, records)])
            if tid is not None:
                data.topic_id = tid
            return ProduceRequest(None, acks, timeout, [data])

        return body

    yield (
        "two partitions, headers",
        [
            create(t, 2),
            Step(0, v, req(t, 0, batch(4))),
            Step(0, v, req(t, 1, batch(1, headers=False), acks=1, timeout=1)),
        ],
    )
    yield "unknown topic", [Step(0, v, req(n.topic("missing"), 0, batch()))]
    yield "partition out of range", [create(t + "x"), Step(0, v, req(t + "x", 7, batch()))]
    yield "acks=2", [create(t + "a"), Step(0, v, req(t + "a", 0, batch(), acks=2))]
    corrupt = bytearray(batch())
    corrupt[-1] ^= 0xFF
    yield "corrupt batch (CRC)", [create(t + "c"), Step(0, v, req(t + "c", 0, bytes(corrupt)))]
    # (no "null records" case: Kafka 4.3 never answers a Produce whose records are null)
    yield "truncated frame", [create(t + "f"), Step(0, v, req(t + "f", 0, batch()), frame=truncate(3))]
    if v >= 3:
        yield "idempotent sequences", idempotent_steps(v, n, t + "i")
        # refusals after the partition is found: which carry the log start offset (v5+)
        yield (
            "timestamp too old",
            [
                create(t + "ts", 1, {"message.timestamp.before.max.ms": "3600000"}),
                Step(0, v, req(t + "ts", 0, batch())),
            ],
        )
        # record timestamps (base plus delta) past a long, on a topic whose bounds are a long's top:
        # Kafka's long arithmetic wraps the last one around; the batch is accepted, and its stored max
        # timestamp is the largest record timestamp as Kafka reads them (the fetch compares it)
        top = (1 << 63) - 1
        wraps = [Record(i, 10 * i, None, b"v", []) for i in range(3)]
        wraps_batch = build_batch(wraps, base_timestamp=top - 15, max_timestamp=top)
        bounds = {"message.timestamp.before.max.ms": str(top), "message.timestamp.after.max.ms": str(top)}
        yield (
            "record timestamps past a long",
            [
                create(t + "w", 1, bounds),
                Step(0, v, req(t + "w", 0, wraps_batch)),
                Step(1, 12, _fetch(12, t + "w", 0)),
            ],
        )
        # records at -5 and -3: accepted (before.max.ms is a long's top by default), and the stored
        # max timestamp is -1, where Kafka's maximum starts
        negative = build_batch(
            [Record(0, 0, None, b"v", []), Record(1, 2, None, b"v", [])], base_timestamp=-5
        )
        yield (
            "negative record timestamps",
            [create(t + "n"), Step(0, v, req(t + "n", 0, negative)), Step(1, 12, _fetch(12, t + "n", 0))],
        )
        keyless = build_batch([Record(0, 0, None, b"no key", [])], base_timestamp=BASE_TS)
        yield (
            "keyless record, compacted topic",
            [create(t + "k", 1, {"cleanup.policy": "compact"}), Step(0, v, req(t + "k", 0, keyless))],
        )
        two = batch(1) + batch(1, base_offset=1)
        yield "two batches in one partition", [create(t + "2"), Step(0, v, req(t + "2", 0, two))]
        yield (
            "transactional batch outside a transaction",
            [create(t + "x"), Step(0, v, req(t + "x", 0, batch(producer_id=4242, producer_epoch=0,
                                                              base_sequence=0, transactional=True)))],
        )  # fmt: skip


def idempotent_steps(v: int, n: Names, t: str) -> list[Step]:
    """An idempotent producer's batches: a first batch at sequence 5 (the partition has no state for
    the producer, as after retention or DeleteRecords removed its batches), the next in sequence, a
    retry of the first, a gap, the next in sequence again."""
    key = n.group("idem")

    def produce_seq(seq: int, count: int = 2) -> Step:
        def body(p: Peer) -> ProduceRequest:
            pid, epoch = pid_of(p, key)
            b = batch(count, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
            data = TopicProduceData(t, partition_data=[PartitionProduceData(0, b)])
            if v >= 13:
                data.topic_id = p.topic_id(t)
            return ProduceRequest(None, -1, 5000, [data])

        return Step(0, v, body, label=f"sequence {seq}")

    return [
        create(t),
        Step(22, 4, InitProducerIdRequest(None, 60000, -1, -1), compare=False, remember=_remember_pid(key)),
        produce_seq(5),
        produce_seq(7),
        produce_seq(5),
        produce_seq(12),
        produce_seq(9),
    ]


def _fetch(v: int, topic: str, offset: int, partition: int = 0, *, epoch: int = -1, **kw: Any) -> Callable:
    def body(p: Peer) -> FetchRequest:
        ft = FetchTopic(topic, partitions=[FetchPartition(partition, -1, offset, -1, -1, 65536)])
        if v >= 13:
            ft.topic_id = p.topic_id(topic)
        args = dict(
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=epoch,
            topics=[ft],
            forgotten_topics_data=[],
            rack_id="",
        )
        args.update(kw)
        return FetchRequest(**args)

    return body


def fetch_cases(v: int, n: Names) -> Iterator[Case]:
    t = n.topic()
    yield (
        "records from 0 and 1, read committed",
        [
            create(t, 2, {"cleanup.policy": "compact"}),
            produce(t, 0, 3),
            produce(t, 0, 2),
            Step(1, v, _fetch(v, t, 0)),
            Step(1, v, _fetch(v, t, 1, isolation_level=1)),
            Step(1, v, _fetch(v, t, 0, partition=1)),
        ],
    )
    t2 = n.topic("oor")
    yield (
        "offset out of range",
        [create(t2), produce(t2), Step(1, v, _fetch(v, t2, 100)), Step(1, v, _fetch(v, t2, -5))],
    )
    yield "unknown topic", [Step(1, v, _fetch(v, n.topic("missing"), 0))]
    t3 = n.topic("p")
    yield "partition out of range", [create(t3), Step(1, v, _fetch(v, t3, 0, partition=9))]
    if v >= 7:
        t4 = n.topic("sess")
        yield "session epoch 5 without a session", [create(t4), Step(1, v, _fetch(v, t4, 0, epoch=5))]
    t5 = n.topic("trunc")
    yield "truncated frame", [create(t5), Step(1, v, _fetch(v, t5, 0), frame=truncate(1))]
    if v >= 7:
        yield from fetch_session_cases(v, n)
    yield from lso_cases(v, n, 1)
    yield from fetch_limit_cases(v, n)


def _session_fetch(
    v: int,
    topic: str,
    offsets: dict[int, int],
    epoch: int,
    forget: tuple[int, ...] = (),
    session: int | None = None,
) -> Callable:
    """A Fetch in the fetch session the peer opened (``p.memory["session"]``; ``session``: this id
    instead), listing ``offsets`` ({partition: fetch offset}) and forgetting ``forget``."""

    def body(p: Peer) -> FetchRequest:
        tid = p.topic_id(topic) if v >= 13 else uuid.UUID(int=0)
        topics = []
        if offsets:
            parts = [FetchPartition(q, -1, o, -1, -1, 65536) for q, o in offsets.items()]
            topics.append(FetchTopic(topic, tid, parts))
        forgotten = [ForgottenTopic(topic, tid, list(forget))] if forget else []
        sid = p.memory.get("session", 0) if session is None else session
        return FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=sid,
                            session_epoch=epoch, topics=topics, forgotten_topics_data=forgotten,
                            rack_id="")  # fmt: skip

    return body


def _remember_session(resp: Any, mem: dict) -> None:
    mem["session"] = resp.session_id


def fetch_session_cases(v: int, n: Names) -> Iterator[Case]:
    """KIP-227: a full fetch opens a session; incremental fetches carry only what changed; forgotten
    partitions leave it; a wrong epoch or an unknown id is refused; epoch -1 closes it."""
    t = n.topic("fsess")
    yield (
        "fetch session: full, incremental, forgotten, bad epoch, closed",
        [
            create(t, 2),
            produce(t, 0, 3),
            Step(1, v, _session_fetch(v, t, {0: 0, 1: 0}, 0), remember=_remember_session, label="full"),
            Step(1, v, _session_fetch(v, t, {0: 3}, 1), label="incremental, nothing new"),
            produce(t, 1, 2),
            Step(1, v, _session_fetch(v, t, {}, 2), label="incremental, records in 1"),
            Step(1, v, _session_fetch(v, t, {1: 2}, 3), label="incremental, 1 advanced"),
            Step(1, v, _session_fetch(v, t, {}, 4, forget=(1,)), label="forget 1"),
            produce(t, 1, 1),
            produce(t, 0, 1),
            Step(1, v, _session_fetch(v, t, {}, 5), label="after forgetting: 0 only"),
            Step(1, v, _session_fetch(v, t, {}, 9), label="wrong epoch"),
            Step(1, v, _session_fetch(v, t, {}, 6), label="the expected epoch still continues"),
            Step(1, v, _session_fetch(v, t, {}, 6), label="the same epoch again"),
            Step(1, v, _session_fetch(v, t, {0: 4}, -1), label="final epoch closes it"),
            Step(1, v, _session_fetch(v, t, {}, 7), label="closed"),
            Step(1, v, _session_fetch(v, t, {}, 1, session=0), label="incremental without a session id"),
            Step(
                1, v, _session_fetch(v, t, {0: 4, 1: 3}, 0), remember=_remember_session, label="new session"
            ),
            Step(1, v, _session_fetch(v, t, {}, 1, forget=(0, 1)), label="forget every partition"),
            Step(1, v, _session_fetch(v, t, {}, 2), label="emptied session is closed"),
        ],
    )


def fetch_limit_cases(v: int, n: Names) -> Iterator[Case]:
    """Byte limits below the first batch, leader epochs, a diverging epoch, below the log start."""

    def fetch(topic: str, offset: int, *, max_bytes: int = 1 << 20, part_max: int = 65536,
              epoch: int = -1, last_epoch: int = -1) -> Callable:  # fmt: skip
        def body(p: Peer) -> FetchRequest:
            ft = FetchTopic(topic, partitions=[FetchPartition(0, epoch, offset, last_epoch, -1, part_max)])
            if v >= 13:
                ft.topic_id = p.topic_id(topic)
            return FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
                                session_id=0, session_epoch=-1, topics=[ft], forgotten_topics_data=[],
                                rack_id="")  # fmt: skip

        return body

    t = n.topic("lim")
    yield (
        "partition and request byte limits below the first batch",
        [
            create(t),
            produce(t, 0, 3),
            produce(t, 0, 3),
            Step(1, v, fetch(t, 0, part_max=10), label="partition max 10"),
            Step(1, v, fetch(t, 0, max_bytes=10), label="request max 10"),
            Step(1, v, fetch(t, 1, part_max=0), label="partition max 0"),
        ],
    )
    if v >= 9:
        t2 = n.topic("ep")
        yield (
            "current leader epoch ahead, behind",
            [
                create(t2),
                produce(t2, 0, 2),
                Step(1, v, fetch(t2, 0, epoch=7), label="epoch 7"),
                Step(1, v, fetch(t2, 0, epoch=0), label="epoch 0"),
            ],
        )
    if v >= 12:
        t3 = n.topic("div")
        yield (
            "last fetched epoch: ahead of the log, ending before the fetch offset, matching",
            [
                create(t3),
                produce(t3, 0, 4),
                Step(1, v, fetch(t3, 2, last_epoch=3), label="epoch 3"),
                Step(1, v, fetch(t3, 6, last_epoch=0), label="epoch 0 at offset 6"),
                Step(1, v, fetch(t3, 2, last_epoch=0), label="epoch 0 at offset 2"),
            ],
        )
    t4 = n.topic("ls")
    yield (
        "below the log start after DeleteRecords",
        [
            create(t4),
            produce(t4, 0, 5),
            Step(21, 2, DeleteRecordsRequest([DeleteRecordsTopic(t4, [DeleteRecordsPartition(0, 3)])], 5000),
                 compare=False),
            Step(1, v, fetch(t4, 1), label="below"),
            Step(1, v, fetch(t4, 3), label="at the log start"),
        ],
    )  # fmt: skip


def list_offsets_cases(v: int, n: Names) -> Iterator[Case]:
    t = n.topic()

    def req(topic: str, specs: list[tuple[int, int]], isolation: int = 0) -> ListOffsetsRequest:
        parts = [ListOffsetsPartition(p, -1, ts, 1) for p, ts in specs]
        return ListOffsetsRequest(-1, isolation, [ListOffsetsTopic(topic, parts)], 5000)

    specs = [(0, -2), (1, -1)]
    if v >= 7:
        specs.append((2, -3))
    yield (
        "earliest, latest, max timestamp",
        [create(t, 3), produce(t), produce(t, 1), produce(t, 2), Step(2, v, req(t, specs))],
    )
    yield "same partition twice", [create(t + "d"), Step(2, v, req(t + "d", [(0, -1), (0, -2)]))]
    if v >= 7:
        # record timestamps at -5 and -3 (the batch's max timestamp is -1), and past a long (the
        # second record's, at delta 20, wraps around; the third is at top - 5): MAX_TIMESTAMP and
        # the lookup by timestamp as Kafka reads them
        top = (1 << 63) - 1
        negative = build_batch(
            [Record(0, 0, None, b"v", []), Record(1, 2, None, b"v", [])], base_timestamp=-5
        )
        wraps = [Record(i, delta, None, b"v", []) for i, delta in enumerate((0, 20, 10))]
        wrapping = build_batch(wraps, base_timestamp=top - 15, max_timestamp=top)
        bounds = {"message.timestamp.before.max.ms": str(top), "message.timestamp.after.max.ms": str(top)}
        yield (
            "max timestamp and by timestamp, negative and wrapped-around record timestamps",
            [
                create(t + "neg"),
                produce_batch(t + "neg", negative),
                create(t + "wrap", 1, bounds),
                produce_batch(t + "wrap", wrapping),
                Step(2, v, req(t + "neg", [(0, -3)])),
                Step(2, v, req(t + "neg", [(0, -4)])),
                Step(2, v, req(t + "wrap", [(0, -3)])),
                Step(2, v, req(t + "wrap", [(0, top - 10)])),
                Step(2, v, req(t + "wrap", [(0, top - 1)])),
            ],
        )
    yield (
        "by timestamp",
        [
            create(t + "ts", 3),
            produce(t + "ts"),
            produce(t + "ts", 1),
            produce(t + "ts", 2),
            Step(2, v, req(t + "ts", [(0, BASE_TS + 10), (1, BASE_TS + 1000), (2, 0)], isolation=1)),
        ],
    )
    yield "unknown topic", [Step(2, v, req(n.topic("missing"), [(0, -1)]))]
    yield (
        "partition out of range, absurd timestamp",
        [create(t + "p"), Step(2, v, req(t + "p", [(5, -1), (0, -99)]))],
    )
    yield (
        "earliest local, latest tiered, earliest pending upload (at every version)",
        [
            create(t + "sp", 3),
            produce(t + "sp"),
            produce(t + "sp", 1),
            produce(t + "sp", 2),
            Step(2, v, req(t + "sp", [(0, -4), (1, -5), (2, -6)])),
        ],
    )
    yield (
        "special timestamps of later versions, unknown topic",
        [Step(2, v, req(n.topic("missing"), [(0, -6), (1, -1), (2, -3)]))],
    )
    yield from lso_cases(v, n, 2)


def metadata_cases(v: int, n: Names) -> Iterator[Case]:
    t = n.topic()

    def req(names: list[str] | None, auto: bool = False, ops: bool = False) -> MetadataRequest:
        topics = None if names is None else [MetadataRequestTopic(name=x) for x in names]
        return MetadataRequest(topics, auto, False, ops)

    yield (
        "existing topic, 3 partitions",
        [create(t, 3, {"retention.ms": "60000"}), Step(3, v, req([t], ops=True))],
    )
    yield "unknown topic, no auto-create", [Step(3, v, req([n.topic("missing")]))]
    if v >= 4:
        a = n.topic("auto")
        yield "auto-create", [Step(3, v, req([a], auto=True), settle=(a,)), Step(3, v, req([a]))]
    yield "invalid names", [Step(3, v, req(["bad/name", "..", "x" * 250]))]
    if v >= 1:  # (v0: an empty list asks for every topic, which differs: Kafka lists __consumer_offsets)
        yield "no topics", [Step(3, v, req([]))]
    if v >= 10:
        t2 = n.topic("id")

        def by_id(p: Peer) -> MetadataRequest:
            return MetadataRequest(
                [MetadataRequestTopic(topic_id=p.topic_id(t2), name=None)], False, False, False
            )

        yield "topic by id", [create(t2), Step(3, v, by_id)]
        unknown = uuid.UUID("00000000-0000-0000-0000-00000000abcd")
        yield (
            "unknown topic id",
            [
                Step(
                    3,
                    v,
                    MetadataRequest([MetadataRequestTopic(topic_id=unknown, name=None)], False, False, False),
                )
            ],
        )
    if v >= 4:
        yield "invalid names, auto-create", [Step(3, v, req(["bad/name", "", "sp ace"], auto=True))]
    t3 = n.topic("twice")
    yield "the same topic twice", [create(t3), Step(3, v, req([t3, t3]))]


def offset_commit_cases(v: int, n: Names) -> Iterator[Case]:
    t, g = n.topic(), n.group()

    def req(
        group: str,
        topic: str,
        offset: int = 5,
        meta: str | None = "m",
        gen: int = -1,
        member: str = "",
        partition: int = 0,
    ) -> Callable:
        def body(p: Peer) -> OffsetCommitRequest:
            part = OffsetCommitRequestPartition(partition, offset, 3, BASE_TS, meta)
            tp = OffsetCommitRequestTopic(topic, partitions=[part])
            if v >= 10:
                tp.topic_id = p.topic_id(topic)
            return OffsetCommitRequest(group, gen, member, None, 60000, [tp])

        return body

    yield (
        "standalone commit",
        [create(t, 2), Step(8, v, req(g, t)), Step(8, v, req(g, t, partition=1, meta=None))],
    )
    yield "unknown topic", [Step(8, v, req(n.group("u"), n.topic("missing")))]
    yield "metadata too large", [create(t + "m"), Step(8, v, req(n.group("m"), t + "m", meta="x" * 5000))]
    yield "empty group id", [create(t + "e"), Step(8, v, req("", t + "e"))]
    if v >= 1:
        yield (
            "generation 7 of an unknown group",
            [create(t + "g"), Step(8, v, req(n.group("g"), t + "g", gen=7, member="nobody"))],
        )
    g2 = n.group("stable")

    def member_commit(p: Peer) -> OffsetCommitRequest:
        body = req(g2, t + "s", gen=p.memory["generation"], member=p.memory["member"])(p)
        return body

    if v >= 1:
        yield (
            "member of a stable group",
            [
                create(t + "s"),
                *stable_group(g2),
                Step(8, v, member_commit),
                Step(8, v, req(g2, t + "s", gen=99, member="x")),
            ],
        )
    g3 = n.group("probe")

    def probe(gen_delta: int | None, member: str | None, **kw: Any) -> Callable:
        """A commit to the stable group ``g3``: its generation shifted by ``gen_delta`` (None: -1) and
        ``member`` (None: its member id)."""

        def body(p: Peer) -> OffsetCommitRequest:
            gen = -1 if gen_delta is None else p.memory["generation"] + gen_delta
            return req(g3, t + "p", gen=gen, member=p.memory["member"] if member is None else member, **kw)(p)

        return body

    if v >= 1:
        yield (
            "stable group: wrong member, old generation, no generation, negative offset",
            [
                create(t + "p"),
                *stable_group(g3),
                Step(8, v, probe(0, "someone-else"), label="wrong member"),
                Step(8, v, probe(-1, None), label="previous generation"),
                Step(8, v, probe(None, ""), label="generation -1, no member"),
                Step(8, v, probe(None, None), label="generation -1, the member"),
                Step(8, v, probe(0, None, offset=-1), label="offset -1"),
            ],
        )
    yield (
        "partition out of range, the same partition twice",
        [
            create(t + "r"),
            Step(8, v, req(n.group("r"), t + "r", partition=7)),
            Step(8, v, lambda p: _twice(req(n.group("r2"), t + "r")(p))),
        ],
    )


def _twice(r: OffsetCommitRequest) -> OffsetCommitRequest:
    """``r`` with its first partition listed twice (the second with another offset)."""
    first = r.topics[0].partitions[0]
    again = OffsetCommitRequestPartition(
        first.partition_index, first.committed_offset + 1, -1, BASE_TS, "again"
    )
    r.topics[0].partitions = [first, again]
    return r


def offset_fetch_cases(v: int, n: Names) -> Iterator[Case]:
    t, g = n.topic(), n.group()

    def req(group: str, topics: list[tuple[str, list[int]]] | None, stable: bool = False) -> Callable:
        def body(p: Peer) -> OffsetFetchRequest:
            if v >= 8:
                ts = None
                if topics is not None:
                    ts = []
                    for name, parts in topics:
                        x = OffsetFetchRequestTopics(name, partition_indexes=parts)
                        if v >= 10:
                            x.topic_id = p.topic_id(name)
                        ts.append(x)
                return OffsetFetchRequest(
                    groups=[OffsetFetchRequestGroup(group, None, -1, ts)], require_stable=stable
                )
            ts2 = None if topics is None else [OffsetFetchRequestTopic(name, parts) for name, parts in topics]
            return OffsetFetchRequest(group, ts2, require_stable=stable)

        return body

    yield (
        "committed and uncommitted partitions",
        [
            create(t, 3),
            commit(g, t, 4),
            commit(g, t, 9, partition=2),
            Step(9, v, req(g, [(t, [0, 1, 2, 7])])),
        ],
    )
    if v >= 2:
        yield "all topics", [create(t + "a"), commit(g + "a", t + "a"), Step(9, v, req(g + "a", None, True))]
    yield "unknown group and topic", [Step(9, v, req(n.group("u"), [(n.topic("missing"), [0])]))]
    yield "empty group id", [Step(9, v, req("", [(t, [0])]))]


def find_coordinator_cases(v: int, n: Names) -> Iterator[Case]:
    def req(keys: list[str], key_type: int = 0) -> FindCoordinatorRequest:
        if v >= 4:
            return FindCoordinatorRequest(key_type=key_type, coordinator_keys=keys)
        return FindCoordinatorRequest(keys[0], key_type)

    yield "group", [Step(10, v, req([n.group()]))]
    yield "empty group id", [Step(10, v, req([""]))]
    if v >= 1:
        yield "unknown key type", [Step(10, v, req([n.group()], key_type=9))]
    if v >= 4:
        yield "several groups", [Step(10, v, req([n.group("a"), n.group("b"), ""]))]
    if v >= 1:
        tid = n.group("txn")
        yield "transactional id", [txn_coordinator(n.group("warm")), Step(10, v, req([tid], key_type=1))]
        yield "empty transactional id", [txn_coordinator(n.group("warm")), Step(10, v, req([""], key_type=1))]
    if v >= 4:
        yield (
            "several transactional ids",
            [
                txn_coordinator(n.group("warm")),
                Step(10, v, req([n.group("a"), "", n.group("b")], key_type=1)),
            ],
        )


def join_group_cases(v: int, n: Names) -> Iterator[Case]:
    g = n.group()
    yield "lone member", join_steps(g, compare=True, version=v)
    if v >= 5:
        yield "static member", join_steps(n.group("static"), compare=True, instance="inst-1", version=v)

    def bad(group: str, session: int = 10000, member: str = "", ptype: str = "consumer") -> JoinGroupRequest:
        return JoinGroupRequest(group, session, 20000, member, None, ptype, _protocols(), "why")

    yield "session timeout 1 ms", [Step(11, v, bad(n.group("s"), session=1))]
    yield "session timeout absurd", [Step(11, v, bad(n.group("s2"), session=2_000_000_000))]
    yield "empty group id", [Step(11, v, bad(""))]
    g2 = n.group("x")
    yield (
        "unknown member id, other protocol type",
        [*stable_group(g2), Step(11, v, bad(g2, member="nobody")), Step(11, v, bad(g2, ptype="connect"))],
    )
    yield (
        "no protocols",
        [Step(11, v, JoinGroupRequest(n.group("np"), 10000, 20000, "", None, "consumer", []))],
    )
    if v >= 5:
        gr = n.group("restart")

        def old_member_heartbeat(p: Peer) -> HeartbeatRequest:
            return HeartbeatRequest(gr, p.memory["generation"], p.memory["first-member"], "inst-r")

        def keep_first(resp: Any, mem: dict) -> None:
            mem["first-member"] = mem.get("member", "")

        yield (
            "static member restarts: a join with its instance id and no member id replaces it",
            [
                *join_steps(gr, instance="inst-r"),
                sync_step(gr),
                Step(15, 5, DescribeGroupsRequest([gr], False), compare=False, remember=keep_first),
                Step(11, v, JoinGroupRequest(gr, 10000, 20000, "", "inst-r", "consumer", _protocols(), None),
                     remember=_remember_join, label="rejoin without member id"),
                Step(12, 4, old_member_heartbeat, label="the old member id"),
            ],
        )  # fmt: skip


def heartbeat_cases(v: int, n: Names) -> Iterator[Case]:
    g = n.group()

    def hb(gen_delta: int = 0, member: str | None = None) -> Callable:
        def body(p: Peer) -> HeartbeatRequest:
            return HeartbeatRequest(
                g, p.memory["generation"] + gen_delta, p.memory["member"] if member is None else member, None
            )

        return body

    yield (
        "stable member, wrong generation, unknown member",
        [*stable_group(g), Step(12, v, hb()), Step(12, v, hb(gen_delta=3)), Step(12, v, hb(member="nobody"))],
    )
    yield "unknown group", [Step(12, v, HeartbeatRequest(n.group("u"), 1, "m", None))]
    yield "empty group id", [Step(12, v, HeartbeatRequest("", 1, "m", None))]


def leave_group_cases(v: int, n: Names) -> Iterator[Case]:
    g = n.group()

    def leave(extra_unknown: bool = False) -> Callable:
        def body(p: Peer) -> LeaveGroupRequest:
            m = p.memory["member"]
            if v >= 3:
                members = [MemberIdentity(m, None, "done")]
                if extra_unknown:
                    members.append(MemberIdentity("nobody", None, None))
                return LeaveGroupRequest(g, members=members)
            return LeaveGroupRequest(g, m)

        return body

    yield (
        "member leaves",
        [
            *stable_group(g),
            Step(13, v, leave(extra_unknown=True)),
            Step(15, 5, DescribeGroupsRequest([g], False)),
        ],
    )
    yield (
        "unknown member",
        [
            *stable_group(g + "u"),
            Step(13, v, LeaveGroupRequest(g + "u", "nobody", [MemberIdentity("nobody", None, None)])),
        ],
    )
    yield (
        "unknown group",
        [Step(13, v, LeaveGroupRequest(n.group("u"), "m", [MemberIdentity("m", None, None)]))],
    )
    if v >= 3:
        gs = n.group("static")

        def static_leave(member: str | None) -> Callable:
            def body(p: Peer) -> LeaveGroupRequest:
                mid = p.memory["member"] if member is None else member
                return LeaveGroupRequest(gs, members=[MemberIdentity(mid, "inst-9", None)])

            return body

        yield (
            "static member: wrong member id for its instance, then by instance alone, then again",
            [
                *join_steps(gs, instance="inst-9"),
                sync_step(gs),
                Step(13, v, static_leave("someone-else"), label="wrong member id"),
                Step(13, v, static_leave(""), label="instance alone"),
                Step(13, v, static_leave(""), label="again"),
            ],
        )


def sync_group_cases(v: int, n: Names) -> Iterator[Case]:
    g = n.group()

    def sync(gen_delta: int = 0, member: str | None = None, pname: str = "range") -> Callable:
        def body(p: Peer) -> SyncGroupRequest:
            m = p.memory["member"] if member is None else member
            return SyncGroupRequest(
                g,
                p.memory["generation"] + gen_delta,
                m,
                None,
                "consumer",
                pname,
                [SyncGroupRequestAssignment(p.memory["member"], ASSIGNMENT)],
            )

        return body

    yield "leader assigns", [*join_steps(g), Step(14, v, sync()), Step(14, v, sync())]
    yield (
        "wrong generation, unknown member",
        [*join_steps(g + "b"), Step(14, v, sync(gen_delta=1)), Step(14, v, sync(member="nobody"))],
    )
    if v >= 5:
        yield "protocol name mismatch", [*join_steps(g + "p"), Step(14, v, sync(pname="roundrobin"))]
    yield "unknown group", [Step(14, v, SyncGroupRequest(n.group("u"), 1, "m", None, None, None, []))]


def describe_groups_cases(v: int, n: Names) -> Iterator[Case]:
    g = n.group()
    yield (
        "stable, unknown and empty ids",
        [*stable_group(g), Step(15, v, DescribeGroupsRequest([g, n.group("u"), ""], True))],
    )
    t = n.topic()
    yield (
        "offsets-only group",
        [create(t), commit(g + "o", t), Step(15, v, DescribeGroupsRequest([g + "o"], False))],
    )


def list_groups_cases(v: int, n: Names) -> Iterator[Case]:
    # v0-3 list every group of the broker, which depends on every earlier test: only filtered
    # listings (v4+) are compared.
    if v >= 4:
        yield (
            "filters that match nothing",
            [Step(16, v, ListGroupsRequest(["PreparingRebalance", "CompletingRebalance"], ["share"]))],
        )
        yield "unknown state", [Step(16, v, ListGroupsRequest(["NoSuchState"], []))]


def sasl_handshake_cases(v: int, n: Names) -> Iterator[Case]:
    # both brokers' differential listeners are PLAINTEXT: a handshake is out of place there
    yield "on a PLAINTEXT listener", [Step(17, v, SaslHandshakeRequest("PLAIN"))]


def sasl_authenticate_cases(v: int, n: Names) -> Iterator[Case]:
    yield "on a PLAINTEXT listener", [Step(36, v, SaslAuthenticateRequest(b"\x00alice\x00secret"))]


def api_versions_cases(v: int, n: Names) -> Iterator[Case]:
    yield "software name", [Step(18, v, ApiVersionsRequest("differential-test", "1.2.3"))]
    if v >= 3:
        yield "invalid software name", [Step(18, v, ApiVersionsRequest("bad name!", "1.0"))]
        yield "empty software name", [Step(18, v, ApiVersionsRequest("", ""))]


def create_topics_cases(v: int, n: Names) -> Iterator[Case]:
    def req(
        topics: list[CreatableTopic], validate: bool = False, timeout: int = 30000
    ) -> CreateTopicsRequest:
        return CreateTopicsRequest(topics, timeout, validate)

    t = n.topic()
    cfg = [CreatableTopicConfig("cleanup.policy", "compact"), CreatableTopicConfig("retention.ms", "3600000")]
    yield "configs", [Step(19, v, req([CreatableTopic(t, 3, 1, [], cfg)]), settle=(t,))]
    yield "validate only", [Step(19, v, req([CreatableTopic(n.topic("v"), 2, 1, [], [])], validate=True))]
    t2 = n.topic("dup")
    yield "already exists", [create(t2), Step(19, v, req([CreatableTopic(t2, 1, 1, [], [])]))]
    yield "invalid name", [Step(19, v, req([CreatableTopic("bad/name", 1, 1, [], [])]))]
    yield "zero partitions", [Step(19, v, req([CreatableTopic(n.topic("z"), 0, 1, [], [])]))]
    if v >= 4:
        t3 = n.topic("dflt")
        yield "broker defaults (-1)", [Step(19, v, req([CreatableTopic(t3, -1, -1, [], [])]), settle=(t3,))]
    yield "replication factor 3", [Step(19, v, req([CreatableTopic(n.topic("rf"), 1, 3, [], [])]))]
    yield (
        "unknown config",
        [
            Step(
                19,
                v,
                req([CreatableTopic(n.topic("c"), 1, 1, [], [CreatableTopicConfig("no.such.config", "1")])]),
            )
        ],
    )
    yield (
        "bad config value",
        [
            Step(
                19,
                v,
                req(
                    [CreatableTopic(n.topic("cv"), 1, 1, [], [CreatableTopicConfig("retention.ms", "soon")])]
                ),
            )
        ],
    )
    t4 = n.topic("asg")
    yield (
        "manual assignment",
        [
            Step(
                19,
                v,
                req(
                    [
                        CreatableTopic(
                            t4,
                            -1,
                            -1,
                            [CreatableReplicaAssignment(0, [1]), CreatableReplicaAssignment(1, [1])],
                            [],
                        )
                    ]
                ),
                settle=(t4,),
            )
        ],
    )
    t5 = n.topic("twice")
    yield (
        "same topic twice",
        [Step(19, v, req([CreatableTopic(t5, 1, 1, [], []), CreatableTopic(t5, 1, 1, [], [])]))],
    )
    yield (
        "absurd partition count",
        [Step(19, v, req([CreatableTopic(n.topic("big"), 2_000_000_000, 1, [], [])]))],
    )


def delete_topics_cases(v: int, n: Names) -> Iterator[Case]:
    t = n.topic()

    def req(names: list[str]) -> Callable:
        def body(p: Peer) -> DeleteTopicsRequest:
            if v >= 6:
                return DeleteTopicsRequest([DeleteTopicState(x, uuid.UUID(int=0)) for x in names], [], 30000)
            return DeleteTopicsRequest([], names, 30000)

        return body

    yield "existing and unknown", [create(t), Step(20, v, req([t, n.topic("missing")]))]
    if v >= 6:
        t2 = n.topic("id")

        def by_id(p: Peer) -> DeleteTopicsRequest:
            return DeleteTopicsRequest([DeleteTopicState(None, p.topic_id(t2))], [], 30000)

        yield (
            "by id, then again",
            [
                create(t2),
                Step(3, 12, MetadataRequest([MetadataRequestTopic(name=t2)], False), compare=False),
                Step(20, v, by_id),
            ],
        )
    yield "invalid name", [Step(20, v, req(["bad/name"]))]


def delete_records_cases(v: int, n: Names) -> Iterator[Case]:
    t = n.topic()

    def req(topic: str, partition: int, offset: int) -> DeleteRecordsRequest:
        return DeleteRecordsRequest(
            [DeleteRecordsTopic(topic, [DeleteRecordsPartition(partition, offset)])], 5000
        )

    def earliest(topic: str) -> ListOffsetsRequest:
        return ListOffsetsRequest(
            -1, 0, [ListOffsetsTopic(topic, [ListOffsetsPartition(0, -1, -2, 1)])], 5000
        )

    yield (
        "inside a batch, lower, then the high watermark",
        [
            create(t),
            produce(t, 0, 3),
            produce(t, 0, 3),
            Step(21, v, req(t, 0, 4)),
            Step(2, 7, earliest(t)),
            Step(1, 11, _fetch(11, t, 2)),
            Step(1, 11, _fetch(11, t, 4)),
            Step(21, v, req(t, 0, 1)),
            Step(21, v, req(t, 0, -1)),
        ],
    )
    yield (
        "above the high watermark, below -1",
        [
            create(t + "o"),
            produce(t + "o"),
            Step(21, v, req(t + "o", 0, 4)),
            Step(21, v, req(t + "o", 0, -2)),
        ],
    )
    yield (
        "unknown topic and partition",
        [
            create(t + "p"),
            Step(21, v, req(n.topic("missing"), 0, 0)),
            Step(21, v, req(t + "p", 3, 0)),
        ],
    )
    yield (
        "compacted topic",
        [create(t + "c", 1, {"cleanup.policy": "compact"}), Step(21, v, req(t + "c", 0, 0))],
    )


def init_producer_id_cases(v: int, n: Names) -> Iterator[Case]:
    yield "idempotent producer", [Step(22, v, InitProducerIdRequest(None, 60000, -1, -1))]
    yield "absurd transaction timeout (idempotent)", [Step(22, v, InitProducerIdRequest(None, -5, -1, -1))]
    if v >= 3:
        yield (
            "existing producer id without transactional id",
            [Step(22, v, InitProducerIdRequest(None, 60000, 12345, 3))],
        )
    tid, warm = n.group("txn"), txn_coordinator(n.group("warm"))
    yield (
        "transactional id, twice (fences)",
        [
            warm,
            txn_coordinator(tid),
            init_txn(tid, version=v, compare=True),
            init_txn(tid, version=v, compare=True, label="again"),
        ],
    )
    yield (
        "transaction timeouts",
        [
            warm,
            Step(22, v, InitProducerIdRequest(n.group("t0"), 0, -1, -1), label="0"),
            Step(22, v, InitProducerIdRequest(n.group("t1"), -1, -1, -1), label="-1"),
            Step(22, v, InitProducerIdRequest(n.group("t2"), 900_001, -1, -1), label="over the maximum"),
            Step(22, v, InitProducerIdRequest(n.group("t3"), 900_000, -1, -1), label="the maximum"),
        ],
    )
    yield "empty transactional id", [warm, Step(22, v, InitProducerIdRequest("", 60000, -1, -1))]
    tid2 = n.group("open")
    t = n.topic()
    yield (
        "open transaction: a new producer aborts it",
        [
            *open_txn(tid2, t),
            Step(22, v, InitProducerIdRequest(tid2, 60000, -1, -1), label="while open"),
            Step(
                22,
                v,
                InitProducerIdRequest(tid2, 60000, -1, -1),
                label="retried",
                until=lambda r: r.error_code != CONCURRENT_TRANSACTIONS,
            ),
            Step(65, 0, DescribeTransactionsRequest([tid2]), label="described"),
            Step(1, 12, _fetch(12, t, 0, isolation_level=1), label="read committed"),
        ],
    )
    if v >= 3:
        tid3 = n.group("kip360")

        def again(pid_delta: int = 0, epoch_delta: int = 0) -> Callable:
            def body(p: Peer) -> InitProducerIdRequest:
                return InitProducerIdRequest(tid3, 60000, *pid_of(p, tid3, pid_delta, epoch_delta))

            return body

        yield (
            "current producer id and epoch (KIP-360)",
            [
                *begin(tid3),
                Step(22, v, again(epoch_delta=1), label="epoch + 1"),
                Step(22, v, again(pid_delta=1), label="other producer id"),
                Step(22, v, again(), label="current", remember=_remember_pid(tid3)),
                Step(22, v, again(epoch_delta=-1), label="the epoch before"),
            ],
        )


def offset_for_leader_epoch_cases(v: int, n: Names) -> Iterator[Case]:
    t = n.topic()

    def req(topic: str, parts: list[tuple[int, int]]) -> OffsetForLeaderEpochRequest:
        ps = [OffsetForLeaderPartition(p, -1, e) for p, e in parts]
        return OffsetForLeaderEpochRequest(-1, [OffsetForLeaderTopic(topic, ps)])

    yield (
        "epochs 0 and 5, partition 9",
        [create(t), produce(t), Step(23, v, req(t, [(0, 0), (0, 5), (9, 0)]))],
    )
    yield "unknown topic", [Step(23, v, req(n.topic("missing"), [(0, 0)]))]


def describe_configs_cases(v: int, n: Names) -> Iterator[Case]:
    t = n.topic()

    def req(
        resources: list[tuple[int, str, list[str] | None]], synonyms: bool = False
    ) -> DescribeConfigsRequest:
        rs = [DescribeConfigsResource(rt, name, keys) for rt, name, keys in resources]
        return DescribeConfigsRequest(rs, synonyms, False)

    keys = ["cleanup.policy", "retention.ms", "max.message.bytes", "no.such.key"]
    yield (
        "topic keys",
        [create(t, 1, {"retention.ms": "123456"}), Step(32, v, req([(2, t, keys)], synonyms=True))],
    )
    yield "unknown topic", [Step(32, v, req([(2, n.topic("missing"), ["cleanup.policy"])]))]
    yield "broker keys", [Step(32, v, req([(4, "1", ["num.partitions", "auto.create.topics.enable"])]))]
    yield (
        "other broker, bad resource type",
        [Step(32, v, req([(4, "7", ["num.partitions"]), (99, "x", None)]))],
    )


def create_partitions_cases(v: int, n: Names) -> Iterator[Case]:
    t = n.topic()

    def req(topic: str, count: int, validate: bool = False) -> CreatePartitionsRequest:
        return CreatePartitionsRequest([CreatePartitionsTopic(topic, count, None)], 30000, validate)

    yield (
        "grow to 3, validate to 5",
        [create(t), Step(37, v, req(t, 3), settle=(t,)), Step(37, v, req(t, 5, True))],
    )
    yield (
        "shrink and same count",
        [create(t + "s", 2), Step(37, v, req(t + "s", 1)), Step(37, v, req(t + "s", 2))],
    )
    yield "unknown topic", [Step(37, v, req(n.topic("missing"), 2))]
    yield "absurd count", [create(t + "b"), Step(37, v, req(t + "b", 2_000_000_000))]


def delete_groups_cases(v: int, n: Names) -> Iterator[Case]:
    t, g = n.topic(), n.group()
    yield (
        "empty, unknown, non-empty",
        [
            create(t),
            commit(g, t),
            *stable_group(g + "s"),
            Step(42, v, DeleteGroupsRequest([g, n.group("u"), g + "s", ""])),
        ],
    )


def incremental_alter_configs_cases(v: int, n: Names) -> Iterator[Case]:
    t = n.topic()

    def req(rs: list[AlterConfigsResource], validate: bool = False) -> IncrementalAlterConfigsRequest:
        return IncrementalAlterConfigsRequest(rs, validate)

    yield (
        "set, delete, validate",
        [
            create(t),
            Step(
                44,
                v,
                req(
                    [
                        AlterConfigsResource(
                            2,
                            t,
                            [
                                AlterableConfig("retention.ms", 0, "7200000"),
                                AlterableConfig("cleanup.policy", 0, "compact"),
                            ],
                        )
                    ]
                ),
            ),
            Step(
                32,
                4,
                DescribeConfigsRequest([DescribeConfigsResource(2, t, ["retention.ms", "cleanup.policy"])]),
            ),
            Step(
                44,
                v,
                req([AlterConfigsResource(2, t, [AlterableConfig("retention.ms", 1, None)])], validate=True),
            ),
        ],
    )
    yield (
        "unknown config and topic",
        [
            create(t + "u"),
            Step(
                44,
                v,
                req(
                    [
                        AlterConfigsResource(2, t + "u", [AlterableConfig("no.such.config", 0, "1")]),
                        AlterConfigsResource(
                            2, n.topic("missing"), [AlterableConfig("retention.ms", 0, "1")]
                        ),
                    ]
                ),
            ),
        ],
    )
    yield (
        "bad value, bad operation",
        [
            create(t + "b"),
            Step(
                44, v, req([AlterConfigsResource(2, t + "b", [AlterableConfig("retention.ms", 0, "soon")])])
            ),
            Step(44, v, req([AlterConfigsResource(2, t + "b", [AlterableConfig("retention.ms", 9, "1")])])),
        ],
    )


def offset_delete_cases(v: int, n: Names) -> Iterator[Case]:
    t, g = n.topic(), n.group()

    def req(group: str, topic: str, parts: list[int]) -> OffsetDeleteRequest:
        return OffsetDeleteRequest(
            group, [OffsetDeleteRequestTopic(topic, [OffsetDeleteRequestPartition(p) for p in parts])]
        )

    yield "committed offset of an empty group", [create(t, 2), commit(g, t), Step(47, v, req(g, t, [0, 1]))]
    yield "unknown group", [Step(47, v, req(n.group("u"), t, [0]))]
    yield (
        "unknown topic",
        [create(t + "x"), commit(g + "x", t + "x"), Step(47, v, req(g + "x", n.topic("m"), [0]))],
    )
    gs = n.group("sub")

    def member_commit(topic: str) -> Callable:
        def body(p: Peer) -> OffsetCommitRequest:
            part = OffsetCommitRequestPartition(0, 1, -1, -1, None)
            return OffsetCommitRequest(gs, p.memory["generation"], p.memory["member"], None, -1,
                                       [OffsetCommitRequestTopic(topic, partitions=[part])])  # fmt: skip

        return body

    yield (
        "a stable group: its subscribed topic, then another",
        [
            create(SUBSCRIBED),
            create(t + "o"),
            *stable_group(gs),
            Step(8, 8, member_commit(SUBSCRIBED), compare=False),
            Step(8, 8, member_commit(t + "o"), compare=False),
            Step(47, v, req(gs, SUBSCRIBED, [0]), label="subscribed"),
            Step(47, v, req(gs, t + "o", [0]), label="not subscribed"),
        ],
    )


def describe_cluster_cases(v: int, n: Names) -> Iterator[Case]:
    yield "brokers", [Step(60, v, DescribeClusterRequest(True, 1, True))]
    if v >= 1:
        yield "controllers endpoint", [Step(60, v, DescribeClusterRequest(False, 2, False))]
        yield "unknown endpoint type", [Step(60, v, DescribeClusterRequest(False, 9, False))]


def consumer_group_heartbeat_cases(v: int, n: Names) -> Iterator[Case]:
    t, g = n.topic(), n.group()

    def hb(
        group: str,
        *,
        epoch: int = 0,
        topics: list[str] | None = None,
        assignor: str | None = None,
        member: str | None = None,
    ) -> Callable:
        def body(p: Peer) -> ConsumerGroupHeartbeatRequest:
            if v >= 1 and "cg-member" not in p.memory:  # KIP-1082: the client makes its member id
                p.memory["cg-member"] = str(uuid.uuid4())
            mid = p.memory.get("cg-member", "") if member is None else member
            return ConsumerGroupHeartbeatRequest(
                group, mid, epoch, None, None, 30000, topics, None, assignor, [] if epoch == 0 else None
            )

        return body

    def remember(resp: Any, mem: dict) -> None:
        if resp.member_id:
            mem["cg-member"] = resp.member_id

    yield (
        "join with the uniform assignor",
        [create(t, 2), Step(68, v, hb(g, topics=[t], assignor="uniform"), remember=remember)],
    )
    yield "unknown assignor", [create(t + "a"), Step(68, v, hb(g + "a", topics=[t + "a"], assignor="bogus"))]
    yield "join without subscription", [Step(68, v, hb(n.group("ns")))]
    yield (
        "unknown member, fenced epoch",
        [
            create(t + "f"),
            Step(68, v, hb(g + "f", topics=[t + "f"]), remember=remember),
            Step(68, v, hb(g + "f", epoch=5, member="not-a-member")),
            Step(68, v, hb(g + "f", epoch=7)),
        ],
    )
    yield "empty group id", [Step(68, v, hb("", topics=[t]))]

    def raw(group: str, *, regex: str | None = None, topics: list[str] | None = None,
            instance: str | None = None, rebalance: int = 30000, member: str | None = None,
            epoch: int = 0) -> Callable:  # fmt: skip
        def body(p: Peer) -> ConsumerGroupHeartbeatRequest:
            mid = str(uuid.uuid4()) if member is None else member
            if epoch != 0:
                mid = p.memory.get("cg-raw", mid)
            return ConsumerGroupHeartbeatRequest(
                group, mid, epoch, instance, None, rebalance, topics, regex, None, [] if epoch == 0 else None
            )

        return body

    def remember_raw(resp: Any, mem: dict) -> None:
        if resp.member_id:
            mem["cg-raw"] = resp.member_id

    yield (
        "regex subscriptions: valid, invalid, with names",
        [
            create(t + "r"),
            Step(68, v, raw(g + "r", regex=(t + "r").replace("-", ".") + ".*"), label="valid"),
            Step(68, v, raw(g + "r2", regex="[unclosed"), label="invalid"),
            Step(68, v, raw(g + "r3", regex=".*", topics=[t + "r"]), label="names and regex"),
        ],
    )
    yield (
        "joining with no rebalance timeout, with an empty member id",
        [
            create(t + "j"),
            Step(68, v, raw(g + "j", topics=[t + "j"], rebalance=-1), label="rebalance -1"),
            Step(68, v, raw(g + "j2", topics=[t + "j"], member=""), label="member ''"),
        ],
    )
    yield (
        "static member joins and leaves for a while",
        [
            create(t + "st"),
            Step(
                68, v, raw(g + "st", topics=[t + "st"], instance="i-1"), remember=remember_raw, label="join"
            ),
            Step(68, v, raw(g + "st", instance="i-1", epoch=-2), label="leave (-2)"),
        ],
    )
    yield (
        "leave",
        [
            create(t + "l"),
            Step(68, v, hb(g + "l", topics=[t + "l"]), remember=remember),
            Step(68, v, hb(g + "l", epoch=-1)),
        ],
    )


def consumer_group_describe_cases(v: int, n: Names) -> Iterator[Case]:
    g = n.group()
    yield (
        "unknown, classic, empty",
        [
            *stable_group(g + "c"),
            Step(69, v, ConsumerGroupDescribeRequest([n.group("u"), g + "c"], True)),
        ],
    )


def elect_leaders_cases(v: int, n: Names) -> Iterator[Case]:
    t = n.topic()

    def req(kind: int, parts: list[tuple[str, list[int]]] | None) -> ElectLeadersRequest:
        tps = None if parts is None else [TopicPartitions(x, ps) for x, ps in parts]
        return ElectLeadersRequest(kind, tps, 30000)

    yield (
        "preferred: not needed, unknown",
        [
            create(t, 2),
            Step(43, v, req(0, [(t, [0, 1, 5]), (n.topic("missing"), [0])])),
        ],
    )
    if v >= 1:
        yield "unclean", [create(t + "u"), Step(43, v, req(1, [(t + "u", [0])]))]


def alter_partition_reassignments_cases(v: int, n: Names) -> Iterator[Case]:
    t = n.topic()

    def req(parts: list[tuple[int, list[int] | None]], topic: str = t, allow: bool = True) -> Callable:
        def body(p: Peer) -> AlterPartitionReassignmentsRequest:
            rs = [
                ReassignablePartition(i, None if r is None else [p.node_id if x == 1 else x for x in r])
                for i, r in parts
            ]
            return AlterPartitionReassignmentsRequest(30000, allow, [ReassignableTopic(topic, rs)])

        return body

    yield (
        "the current replica, cancel, unknown partition",
        [
            create(t, 3),
            Step(45, v, req([(0, [1]), (1, None), (7, [1])])),
        ],
    )
    yield (
        "bad replica lists",
        [
            create(t + "b", 3),
            Step(45, v, req([(0, []), (1, [1, 1]), (2, [1, 4242])], t + "b")),
        ],
    )
    yield "unknown topic", [Step(45, v, req([(0, [1])], n.topic("missing")))]
    if v >= 1:
        yield (
            "replication factor change not allowed",
            [
                create(t + "r"),
                Step(45, v, req([(0, [1, 1])], t + "r", allow=False)),
            ],
        )


def list_partition_reassignments_cases(v: int, n: Names) -> Iterator[Case]:
    t = n.topic()
    yield (
        "all, named, unknown",
        [
            create(t, 2),
            Step(46, v, ListPartitionReassignmentsRequest(30000, None)),
            Step(
                46,
                v,
                ListPartitionReassignmentsRequest(
                    30000,
                    [
                        ListPartitionReassignmentsTopics(t, [0, 1]),
                        ListPartitionReassignmentsTopics(n.topic("missing"), [0]),
                    ],
                ),
            ),
        ],
    )


def describe_quorum_cases(v: int, n: Names) -> Iterator[Case]:
    def req(topics: list[tuple[str, list[int]]]) -> DescribeQuorumRequest:
        return DescribeQuorumRequest(
            [
                DescribeQuorumRequestTopicData(x, [DescribeQuorumRequestPartitionData(p) for p in ps])
                for x, ps in topics
            ]
        )

    yield "the metadata partition", [Step(55, v, req([("__cluster_metadata", [0])]))]
    yield (
        "another partition, another topic",
        [
            Step(55, v, req([("__cluster_metadata", [1])])),
            Step(55, v, req([("other", [0])])),
        ],
    )


def list_config_resources_cases(v: int, n: Names) -> Iterator[Case]:
    t = n.topic()
    if v == 0:
        yield "client metrics resources", [create(t), Step(74, v, ListConfigResourcesRequest())]
        return
    yield "client metrics, broker logger, broker", [Step(74, v, ListConfigResourcesRequest([16, 8, 4]))]
    yield "unsupported type", [Step(74, v, ListConfigResourcesRequest([2, 99]))]
    # every topic (an empty type list, or TOPIC) is not compared: the whole run's topics, in Kafka's hash
    # order (kafka-python's test in tests/integration/test_cluster_admin.py lists them)
    group = n.group()
    yield (
        "group with a config",
        [
            create(t),
            Step(
                44,
                1,
                IncrementalAlterConfigsRequest(
                    [
                        AlterConfigsResource(
                            32, group, [AlterableConfig("consumer.session.timeout.ms", 0, "50000")]
                        )
                    ],
                    False,
                ),
                compare=False,
            ),
            # Kafka applies the config through its metadata log a moment after answering: ask again
            # (up to 10 s) until the group is listed
            Step(
                74,
                v,
                ListConfigResourcesRequest([32, 16]),
                until=lambda r: any(c.resource_name == group for c in r.config_resources),
            ),
        ],
    )


def alter_configs_cases(v: int, n: Names) -> Iterator[Case]:
    t = n.topic()

    def req(
        rtype: int, name: str, configs: list[tuple[str, str | None]], validate: bool = False
    ) -> AlterConfigsRequest:
        return AlterConfigsRequest(
            [LegacyAlterResource(rtype, name, [LegacyAlterable(k, x) for k, x in configs])], validate
        )

    def described(topic: str) -> DescribeConfigsRequest:
        keys = ["retention.ms", "cleanup.policy", "max.message.bytes"]
        return DescribeConfigsRequest([DescribeConfigsResource(2, topic, keys)], False, False)

    yield (
        "replace a topic's overrides",
        [
            create(t, 1, {"retention.ms": "123456", "max.message.bytes": "2000"}),
            Step(33, v, req(2, t, [("cleanup.policy", "compact")])),
            Step(32, 1, described(t)),
            Step(33, v, req(2, t, [("retention.ms", "1000")], validate=True)),
            Step(32, 1, described(t)),
        ],
    )
    yield (
        "bad value, unknown key, unknown topic",
        [
            create(t + "b"),
            Step(33, v, req(2, t + "b", [("retention.ms", "abc")])),
            Step(33, v, req(2, t + "b", [("no.such.key", "1")])),
            Step(33, v, req(2, n.topic("missing"), [])),
        ],
    )
    yield (
        "duplicate key, null value",
        [
            create(t + "d"),
            Step(33, v, req(2, t + "d", [("retention.ms", "1"), ("retention.ms", "2")])),
            Step(33, v, req(2, t + "d", [("retention.ms", None)])),
        ],
    )
    yield (
        "broker and group resources",
        [
            Step(33, v, req(4, "1", [("log.retention.ms", "1000")], validate=True)),
            Step(33, v, req(32, n.group(), [("consumer.session.timeout.ms", "50000")], validate=True)),
        ],
    )


def update_features_cases(v: int, n: Names) -> Iterator[Case]:
    def req(*updates: tuple[str, int, int], validate: bool = False) -> UpdateFeaturesRequest:
        keys = [FeatureUpdateKey(f, level, kind != 1, kind) for f, level, kind in updates]
        return UpdateFeaturesRequest(30000, keys, validate)

    yield "the current level (no change)", [Step(57, v, req(("group.version", 1, 1)))]
    yield "unknown feature", [Step(57, v, req(("no.such.feature", 1, 1)))]
    yield "above the supported range", [Step(57, v, req(("group.version", 99, 1)))]
    yield "downgrade without saying so", [Step(57, v, req(("group.version", 0, 1), validate=True))]
    yield "a feature twice", [Step(57, v, req(("group.version", 1, 1), ("group.version", 1, 1)))]


def _alter_quotas(
    v: int,
    entity: list[tuple[str, str | None]],
    ops: list[tuple[str, float | None]],
    validate: bool = False,
    compare: bool = True,
) -> Step:
    return Step(
        49,
        v,
        AlterClientQuotasRequest(
            [
                AlterClientQuotasRequestEntryData(
                    [AlterClientQuotasRequestEntityData(t, x) for t, x in entity],
                    [OpData(k, 0.0 if x is None else x, x is None) for k, x in ops],
                )
            ],
            validate,
        ),
        compare=compare,
    )


def _describe_quotas(
    v: int, components: list[tuple[str, int, str | None]], strict: bool = False, found: bool | None = None
) -> Step:
    """``found``: right after an alteration, ask again until entries are there (True) or gone (False):
    Kafka's broker applies a quota change a moment after its controller commits it."""
    until = None if found is None else (lambda r: bool(r.entries) == found)
    return Step(
        48, v, DescribeClientQuotasRequest([ComponentData(*c) for c in components], strict), until=until
    )


def alter_client_quotas_cases(v: int, n: Names) -> Iterator[Case]:
    c, u = f"dq{n.n}-c", f"dq{n.n}-u"
    yield (
        "set, describe, remove",
        [
            _alter_quotas(
                v, [("client-id", c)], [("producer_byte_rate", 1024.0), ("consumer_byte_rate", 2048.0)]
            ),
            _describe_quotas(1, [("client-id", 0, c)], strict=True, found=True),
            _alter_quotas(
                v, [("client-id", c)], [("producer_byte_rate", None), ("consumer_byte_rate", None)]
            ),
            _describe_quotas(1, [("client-id", 0, c)], strict=True, found=False),
        ],
    )
    yield (
        "validate only",
        [
            _alter_quotas(
                v, [("user", u), ("client-id", None)], [("request_percentage", 12.5)], validate=True
            ),
            _describe_quotas(1, [("user", 0, u)]),
        ],
    )
    yield (
        "unknown key, zero, fraction, too large",
        [
            _alter_quotas(v, [("client-id", c)], [("no_such_quota", 1.0)]),
            _alter_quotas(v, [("client-id", c)], [("producer_byte_rate", 0.0)]),
            _alter_quotas(v, [("client-id", c)], [("producer_byte_rate", 10.5)]),
            _alter_quotas(v, [("ip", "127.0.0.9")], [("connection_creation_rate", 1e12)]),
            _describe_quotas(1, [("client-id", 0, c)]),
        ],
    )
    yield (
        "bad entities",
        [
            _alter_quotas(v, [], [("producer_byte_rate", 1.0)]),
            _alter_quotas(v, [("group", "g")], [("producer_byte_rate", 1.0)]),
            _alter_quotas(v, [("user", "")], [("producer_byte_rate", 1.0)]),
            _alter_quotas(v, [("ip", "127.0.0.9"), ("user", u)], [("connection_creation_rate", 1.0)]),
            _alter_quotas(v, [("ip", "127.0.0.9")], [("producer_byte_rate", 1.0)]),
            _alter_quotas(v, [("client-id", c)], [("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)]),
        ],
    )


def describe_client_quotas_cases(v: int, n: Names) -> Iterator[Case]:
    c, u = f"dq{n.n}-c", f"dq{n.n}-u"
    yield (
        "exact, strict, default, any",
        [
            _alter_quotas(
                1, [("user", u), ("client-id", c)], [("producer_byte_rate", 4096.0)], compare=False
            ),
            _describe_quotas(v, [("client-id", 0, c)], found=True),
            _describe_quotas(v, [("client-id", 0, c)], strict=True),
            _describe_quotas(v, [("client-id", 0, c), ("user", 0, u)], strict=True),
            _describe_quotas(v, [("client-id", 0, c), ("user", 2, None)], strict=True),
            _describe_quotas(v, [("client-id", 0, c), ("user", 1, None)]),
            _alter_quotas(1, [("user", u), ("client-id", c)], [("producer_byte_rate", None)], compare=False),
        ],
    )
    yield (
        "bad filters",
        [
            _describe_quotas(v, [("", 0, "x")]),
            _describe_quotas(v, [("group", 2, None)]),
            _describe_quotas(v, [("user", 0, None)]),
            _describe_quotas(v, [("user", 1, "x")]),
            _describe_quotas(v, [("user", 2, "x")]),
            _describe_quotas(v, [("user", 9, None)]),
            _describe_quotas(v, [("user", 2, None), ("user", 1, None)]),
            _describe_quotas(v, [("ip", 2, None), ("client-id", 2, None)]),
        ],
    )


#: a fixed salt and salted password (any bytes do: the broker derives the keys from them)
_SALT, _SALTED = b"differential-salt", bytes(range(32))


def _upsert(name: str, mechanism: int = 1, iterations: int = 4096) -> ScramCredentialUpsertion:
    return ScramCredentialUpsertion(name, mechanism, iterations, _SALT, _SALTED)


def _alter_scram(
    v: int,
    deletions: list[tuple[str, int]] = (),
    upsertions: list[ScramCredentialUpsertion] = (),
    compare: bool = True,
) -> Step:
    return Step(
        51,
        v,
        AlterUserScramCredentialsRequest(
            [ScramCredentialDeletion(n, m) for n, m in deletions], list(upsertions)
        ),
        compare=compare,
    )


def _describe_scram(v: int, users: list[str] | None, found: bool | None = None, iterations: int = 0) -> Step:
    """``found``: after an alteration, ask again until the first user's credentials are there (True;
    with ``iterations``, the first one salted that many times) or gone (False): Kafka's broker sees a
    change once its controller's record reaches it."""

    def until(r: Any) -> bool:
        first = r.results[0]
        if not found:
            return first.error_code != 0
        return first.error_code == 0 and (
            not iterations or first.credential_infos[0].iterations == iterations
        )

    if found is None:
        until = None  # type: ignore[assignment]
    return Step(
        50,
        v,
        DescribeUserScramCredentialsRequest(None if users is None else [UserName(u) for u in users]),
        until=until,
    )


def alter_user_scram_credentials_cases(v: int, n: Names) -> Iterator[Case]:
    u = f"scram{n.n}-u"
    # one mechanism at a time: Kafka lists a user's mechanisms in the order of a hash map keyed by
    # enum constants (identity hash codes), which differs from run to run
    yield (
        "upsert, describe, replace, delete",
        [
            _alter_scram(v, upsertions=[_upsert(u, 1)]),
            _describe_scram(0, [u], found=True),
            _alter_scram(v, upsertions=[_upsert(u, 1, 8192)]),
            _describe_scram(0, [u], found=True, iterations=8192),
            _alter_scram(v, deletions=[(u, 1)]),
            _describe_scram(0, [u], found=False),
            _alter_scram(v, upsertions=[_upsert(u, 2, 16384)]),
            _describe_scram(0, [u], found=True),
            _alter_scram(v, deletions=[(u, 2)]),
            _describe_scram(0, [u], found=False),
        ],
    )
    yield (
        "refused: unknown credential, empty name, unknown mechanism, iterations",
        [
            _alter_scram(v, deletions=[(u + "-missing", 1)]),
            _alter_scram(v, deletions=[("", 1)]),
            _alter_scram(v, upsertions=[_upsert("", 1)]),
            _alter_scram(v, upsertions=[_upsert(u + "-m", 0)]),
            _alter_scram(v, upsertions=[_upsert(u + "-m", 3)]),
            _alter_scram(v, deletions=[(u + "-m", 9)]),
            _alter_scram(v, upsertions=[_upsert(u + "-i", 1, 4095)]),
            _alter_scram(v, upsertions=[_upsert(u + "-i", 2, 16385)]),
            _alter_scram(v, upsertions=[_upsert(u + "-i", 2, -1)]),
        ],
    )
    yield (
        "one user twice in a request",
        [
            _alter_scram(v, upsertions=[_upsert(u + "-d", 1), _upsert(u + "-d", 2)]),
            _alter_scram(v, deletions=[(u + "-d", 1)], upsertions=[_upsert(u + "-d", 2)]),
            _alter_scram(v, deletions=[(u + "-d", 1), (u + "-d", 1)]),
            _describe_scram(0, [u + "-d"]),
        ],
    )
    yield "empty request", [_alter_scram(v)]


def describe_user_scram_credentials_cases(v: int, n: Names) -> Iterator[Case]:
    u = f"scramd{n.n}-u"
    yield (
        "a user, unknown users, a user twice",
        [
            _alter_scram(0, upsertions=[_upsert(u, 2, 10000)], compare=False),
            _describe_scram(v, [u], found=True),
            _describe_scram(v, [u + "-missing"]),
            _describe_scram(v, [u, u]),
            _describe_scram(v, [""]),
            _alter_scram(0, deletions=[(u, 2)], compare=False),
            _describe_scram(v, [u], found=False),
        ],
    )


def _remember_log_dir(resp: Any, mem: dict) -> None:
    mem["log_dir"] = resp.results[0].log_dir


def alter_replica_log_dirs_cases(v: int, n: Names) -> Iterator[Case]:
    t = n.topic()

    def req(p: Peer) -> AlterReplicaLogDirsRequest:
        return AlterReplicaLogDirsRequest(
            [
                AlterReplicaLogDir(
                    p.memory["log_dir"],
                    [AlterReplicaLogDirTopic(t, [0, 4]), AlterReplicaLogDirTopic(n.topic("missing"), [0])],
                ),
                AlterReplicaLogDir("/no/such/dir", [AlterReplicaLogDirTopic(t, [1])]),
            ]
        )

    yield (
        "its own directory, unknown partitions, another directory",
        [
            create(t, 2),
            Step(35, 4, DescribeLogDirsRequest(None), compare=False, remember=_remember_log_dir),
            Step(34, v, req),
        ],
    )
    yield (
        "topic name too long for a future log",
        [
            create("L" * 230),
            Step(
                34,
                v,
                AlterReplicaLogDirsRequest(
                    [AlterReplicaLogDir("/no/such/dir", [AlterReplicaLogDirTopic("L" * 230, [0])])]
                ),
            ),
        ],
    )


def describe_log_dirs_cases(v: int, n: Names) -> Iterator[Case]:
    t = n.topic()

    def req(parts: list[tuple[str, list[int]]]) -> DescribeLogDirsRequest:
        return DescribeLogDirsRequest([DescribableLogDirTopic(x, ps) for x, ps in parts])

    yield (
        "sizes of two partitions, unknown ones left out",
        [
            create(t, 3),
            produce(t, 0, 3),
            produce(t, 0, 2),
            produce(t, 1),
            Step(35, v, req([(t, [0, 1, 2, 9]), (n.topic("missing"), [0])])),
        ],
    )
    yield "nothing asked", [Step(35, v, req([]))]


def describe_topic_partitions_cases(v: int, n: Names) -> Iterator[Case]:
    a, b = n.topic("a"), n.topic("b")

    def req(
        names: list[str], limit: int, cursor: tuple[str, int] | None = None
    ) -> DescribeTopicPartitionsRequest:
        c = DescribeTopicPartitionsRequestCursor(*cursor) if cursor is not None else None
        return DescribeTopicPartitionsRequest([TopicRequest(x) for x in names], limit, c)

    yield (
        "pages of two",
        [
            create(a, 3),
            create(b, 1),
            Step(75, v, req([b, a], 2)),
            Step(75, v, req([a, b], 2, (a, 2))),
            Step(75, v, req([a, b], 1, (b, 0))),
        ],
    )
    yield (
        "unknown and invalid names",
        [create(a + "u"), Step(75, v, req([a + "u", n.topic("missing"), "bad/name"], 10))],
    )
    yield (
        "cursor not among the topics, negative partition, past the end",
        [
            create(a + "c", 2),
            Step(75, v, req([a + "c"], 10, (n.topic("zz"), 0))),
            Step(75, v, req([a + "c"], 10, (a + "c", -1))),
            Step(75, v, req([a + "c"], 10, (a + "c", 7))),
        ],
    )
    yield "limit zero", [create(a + "z", 2), Step(75, v, req([a + "z"], 0))]


# ===================================================================================== transactions
#
# A transactional producer on each broker: its producer id and epoch differ between the brokers, so
# the steps read them from ``peer.memory`` (``pid:<tid>``, ``epoch:<tid>``, remembered from the
# InitProducerId answer). Set-up runs at the versions of a TV1 client (EndTxn v3: no epoch bump; the
# TV2 flow is tests/differential/test_transaction_v2.py). Kafka completes a transaction (writes its
# markers) after answering EndTxn, and creates __transaction_state on the first FindCoordinator for a
# transactional id: barriers (``until``) wait for both, so the brokers are compared in the same state.

RETRIABLE_COORDINATOR = (14, 15, 16)  # load in progress, not available, not coordinator
CONCURRENT_TRANSACTIONS = 51


def txn_coordinator(tid: str) -> Step:
    """FindCoordinator for ``tid`` until it is found (Kafka creates and loads __transaction_state)."""
    req = FindCoordinatorRequest(key_type=1, coordinator_keys=[tid])
    return Step(10, 4, req, compare=False, until=lambda r: r.coordinators[0].error_code == 0)


def _remember_pid(tid: str) -> Callable[[Any, dict], None]:
    def remember(resp: Any, mem: dict) -> None:
        if resp.error_code == 0:
            mem[f"pid:{tid}"], mem[f"epoch:{tid}"] = resp.producer_id, resp.producer_epoch

    return remember


def init_txn(
    tid: str, timeout: int = 60000, version: int = 4, compare: bool = False, label: str = "init"
) -> Step:
    """InitProducerId for ``tid`` (after its coordinator is found), remembering the id and epoch."""
    return Step(
        22,
        version,
        InitProducerIdRequest(tid, timeout, -1, -1),
        compare=compare,
        label=label,
        remember=_remember_pid(tid),
        until=lambda r: r.error_code not in (*RETRIABLE_COORDINATOR, CONCURRENT_TRANSACTIONS),
    )


def begin(tid: str, timeout: int = 60000) -> list[Step]:
    return [txn_coordinator(tid), init_txn(tid, timeout)]


def pid_of(p: Peer, tid: str, pid_delta: int = 0, epoch_delta: int = 0) -> tuple[int, int]:
    """``tid``'s producer id and epoch on ``p`` (12345 / 0 if it has none), shifted by the deltas."""
    return p.memory.get(f"pid:{tid}", 12345) + pid_delta, p.memory.get(f"epoch:{tid}", 0) + epoch_delta


def add_partitions(
    tid: str,
    topic: str,
    parts: list[int],
    version: int = 3,
    *,
    compare: bool = False,
    epoch_delta: int = 0,
    pid_delta: int = 0,
) -> Step:
    def body(p: Peer) -> AddPartitionsToTxnRequest:
        pid, epoch = pid_of(p, tid, pid_delta, epoch_delta)
        topics = [AddPartitionsToTxnTopic(topic, parts)]
        if version >= 4:
            return AddPartitionsToTxnRequest([AddPartitionsToTxnTransaction(tid, pid, epoch, False, topics)])
        return AddPartitionsToTxnRequest(None, tid, pid, epoch, topics)

    return Step(
        24,
        version,
        body,
        compare=compare,
        until=None if compare else lambda r: _add_codes(r) != {CONCURRENT_TRANSACTIONS},
    )


def _add_codes(resp: Any) -> set[int]:
    results = (
        [resp.results_by_transaction[0].topic_results]
        if resp.results_by_transaction
        else [resp.results_by_topic_v3_and_below]
    )
    return {p.partition_error_code for rs in results for t in rs for p in t.results_by_partition}


def txn_produce(
    tid: str,
    topic: str,
    partition: int = 0,
    n: int = 3,
    *,
    compare: bool = False,
    epoch_delta: int = 0,
    version: int = 9,
) -> Step:
    """A transactional batch of ``n`` records from ``tid``'s producer (sequences counted per peer)."""
    key = f"seq:{tid}:{topic}:{partition}"

    def body(p: Peer) -> ProduceRequest:
        pid, epoch = pid_of(p, tid, 0, epoch_delta)
        seq = p.memory.get(key, 0)
        b = batch(n, ts=NOW_TS, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)
        return ProduceRequest(
            tid, -1, 10000, [TopicProduceData(topic, partition_data=[PartitionProduceData(partition, b)])]
        )

    def remember(resp: Any, mem: dict) -> None:
        if resp.responses[0].partition_responses[0].error_code == 0:
            mem[key] = mem.get(key, 0) + n

    return Step(0, version, body, compare=compare, remember=remember)


def _settled(resp: Any) -> bool:
    return resp.transaction_states[0].transaction_state not in ("PrepareCommit", "PrepareAbort")


def settle(tid: str) -> Step:
    """Until ``tid``'s transaction is no longer prepared (its markers written)."""
    return Step(65, 0, DescribeTransactionsRequest([tid]), compare=False, until=_settled)


def end_txn(
    tid: str,
    commit: bool,
    version: int = 3,
    *,
    compare: bool = False,
    epoch_delta: int = 0,
    pid_delta: int = 0,
    label: str = "",
) -> list[Step]:
    def body(p: Peer) -> EndTxnRequest:
        return EndTxnRequest(tid, *pid_of(p, tid, pid_delta, epoch_delta), commit)

    return [
        Step(26, version, body, compare=compare, label=label or ("commit" if commit else "abort")),
        settle(tid),
    ]


def add_offsets(
    tid: str, group: str, version: int = 3, *, compare: bool = False, epoch_delta: int = 0, pid_delta: int = 0
) -> Step:
    def body(p: Peer) -> AddOffsetsToTxnRequest:
        return AddOffsetsToTxnRequest(tid, *pid_of(p, tid, pid_delta, epoch_delta), group)

    return Step(25, version, body, compare=compare)


def open_txn(tid: str, topic: str, partitions: int = 1, n: int = 3) -> list[Step]:
    """Set-up: ``topic`` created, ``tid``'s producer initialised, partition 0 added and ``n`` records
    written to it in an open transaction."""
    return [
        create(topic, partitions),
        *begin(tid),
        add_partitions(tid, topic, [0]),
        txn_produce(tid, topic, 0, n),
    ]


def _offsets(topic: str, isolation: int, v: int = 7) -> Step:
    parts = [ListOffsetsPartition(0, -1, -1, 1), ListOffsetsPartition(1, -1, -2, 1)]
    return Step(
        2,
        v,
        ListOffsetsRequest(-1, isolation, [ListOffsetsTopic(topic, parts)], 5000),
        label=f"isolation {isolation}",
    )


def add_partitions_to_txn_cases(v: int, n: Names) -> Iterator[Case]:
    t, tid = n.topic(), n.group("txn")
    yield (
        "add, add again, unknown partition and topic",
        [
            create(t, 2),
            *begin(tid),
            add_partitions(tid, t, [0, 1], v, compare=True),
            add_partitions(tid, t, [0], v, compare=True),
            add_partitions(tid, t, [1, 7], v, compare=True),
            add_partitions(tid, n.topic("missing"), [0], v, compare=True),
        ],
    )
    yield (
        "unknown transactional id",
        [create(t + "u"), add_partitions(n.group("none"), t + "u", [0], v, compare=True)],
    )
    tid2 = n.group("epoch")
    yield (
        "wrong epoch, wrong producer id",
        [
            create(t + "e"),
            *begin(tid2),
            add_partitions(tid2, t + "e", [0], v, compare=True, epoch_delta=1),
            add_partitions(tid2, t + "e", [0], v, compare=True, epoch_delta=-1),
            add_partitions(tid2, t + "e", [0], v, compare=True, pid_delta=1),
        ],
    )
    tid3 = n.group("fenced")
    yield (
        "fenced by a second producer",
        [
            create(t + "f"),
            *begin(tid3),
            Step(
                22,
                4,
                lambda p: InitProducerIdRequest(tid3, 60000, -1, -1),
                compare=False,
                until=lambda r: r.error_code == 0,
            ),
            add_partitions(tid3, t + "f", [0], v, compare=True),
        ],
    )
    if v >= 4:
        tid4, tid5 = n.group("b1"), n.group("b2")

        def batched(verify: bool) -> Callable:
            def body(p: Peer) -> AddPartitionsToTxnRequest:
                return AddPartitionsToTxnRequest(
                    [
                        AddPartitionsToTxnTransaction(
                            x, *pid_of(p, x), verify, [AddPartitionsToTxnTopic(t + "b", [0, 1])]
                        )
                        for x in (tid4, tid5, n.group("b3"))
                    ]
                )

            return body

        yield (
            "batched, verify only",
            [
                create(t + "b", 2),
                *begin(tid4),
                *begin(tid5),
                add_partitions(tid4, t + "b", [0]),
                Step(24, v, batched(True), label="verify only"),
                Step(24, v, batched(False), label="add"),
                Step(24, v, batched(True), label="verify after add"),
            ],
        )


def add_offsets_to_txn_cases(v: int, n: Names) -> Iterator[Case]:
    tid, g = n.group("txn"), n.group()
    yield (
        "add offsets, again, then commit",
        [
            *begin(tid),
            add_offsets(tid, g, v, compare=True),
            add_offsets(tid, g, v, compare=True),
            *end_txn(tid, True, compare=True),
            Step(65, 0, DescribeTransactionsRequest([tid]), label="described"),
        ],
    )
    yield "unknown transactional id", [add_offsets(n.group("none"), g, v, compare=True)]
    tid2 = n.group("epoch")
    yield (
        "wrong epoch, wrong producer id, empty group",
        [
            *begin(tid2),
            add_offsets(tid2, g, v, compare=True, epoch_delta=1),
            add_offsets(tid2, g, v, compare=True, pid_delta=1),
            add_offsets(tid2, "", v, compare=True),
        ],
    )


def end_txn_cases(v: int, n: Names) -> Iterator[Case]:
    t, tid = n.topic(), n.group("txn")
    bump = 1 if v >= 5 else 0  # EndTxn v5 (KIP-890) bumps the epoch: the next transaction's
    yield (
        "commit, commit again, abort, nothing to commit",
        [
            *open_txn(tid, t),
            *end_txn(tid, True, v, compare=True),
            *end_txn(tid, True, v, compare=True, label="commit again (a retry)"),
            *end_txn(tid, False, v, compare=True, label="abort after commit"),
            *end_txn(tid, True, v, compare=True, epoch_delta=bump, label="commit, nothing added"),
        ],
    )
    tid2 = n.group("abort")
    yield (
        "abort, then the records",
        [
            *open_txn(tid2, t + "a", 2),
            *end_txn(tid2, False, v, compare=True),
            _offsets(t + "a", 1),
            _offsets(t + "a", 0),
            Step(1, 12, _fetch(12, t + "a", 0, isolation_level=1), label="read committed"),
        ],
    )
    yield "unknown transactional id", [*end_txn(n.group("none"), True, v, compare=True)]
    tid3 = n.group("epoch")
    yield (
        "wrong epoch, wrong producer id",
        [
            *open_txn(tid3, t + "e"),
            *end_txn(tid3, True, v, compare=True, epoch_delta=1),
            *end_txn(tid3, True, v, compare=True, epoch_delta=-1),
            *end_txn(tid3, False, v, compare=True, pid_delta=1),
        ],
    )
    tid4 = n.group("fenced")
    yield (
        "fenced: a second producer aborts the open transaction",
        [
            *open_txn(tid4, t + "f"),
            Step(
                22,
                4,
                InitProducerIdRequest(tid4, 60000, -1, -1),
                compare=False,
                until=lambda r: r.error_code == 0,
            ),  # (CONCURRENT_TRANSACTIONS while it aborts)
            *end_txn(tid4, True, v, compare=True),
            Step(65, 0, DescribeTransactionsRequest([tid4]), label="described"),
        ],
    )


def txn_offset_commit_cases(v: int, n: Names) -> Iterator[Case]:
    t, tid, g = n.topic(), n.group("txn"), n.group()

    def req(
        group: str,
        offset: int = 5,
        *,
        topic: str = t,
        gen: int = -1,
        member: str = "",
        epoch_delta: int = 0,
        tx: str = tid,
        partitions: tuple[int, ...] = (0,),
    ) -> Callable:
        def body(p: Peer) -> TxnOffsetCommitRequest:
            parts = [TxnOffsetCommitRequestPartition(i, offset, -1, "m") for i in partitions]
            return TxnOffsetCommitRequest(
                tx,
                group,
                *pid_of(p, tx, 0, epoch_delta),
                gen,
                member,
                None,
                [TxnOffsetCommitRequestTopic(topic, parts)],
            )

        return body

    def fetch_offsets(group: str) -> Step:
        body = OffsetFetchRequest(
            groups=[OffsetFetchRequestGroup(group, None, -1, None)], require_stable=True
        )
        return Step(9, 8, body, label="offsets")

    yield (
        "commit in a transaction, then end it",
        [
            create(t, 2),
            *begin(tid),
            add_offsets(tid, g),
            Step(28, v, req(g, partitions=(0, 1))),
            Step(
                9,
                8,
                OffsetFetchRequest(groups=[OffsetFetchRequestGroup(g, None, -1, None)], require_stable=True),
                label="pending",
            ),
            *end_txn(tid, True),
            fetch_offsets(g),
        ],
    )
    tid2, g2 = n.group("abort"), n.group("a")
    yield (
        "aborted: the offsets are not committed",
        [
            create(t + "a"),
            *begin(tid2),
            add_offsets(tid2, g2),
            Step(28, v, req(g2, topic=t + "a", tx=tid2)),
            *end_txn(tid2, False),
            fetch_offsets(g2),
        ],
    )
    tid3, g3 = n.group("bad"), n.group("b")
    yield (
        "wrong epoch, unknown member, generation",
        [
            create(t + "b"),
            *begin(tid3),
            add_offsets(tid3, g3),
            Step(28, v, req(g3, topic=t + "b", tx=tid3, epoch_delta=1), label="epoch + 1"),
            *(
                [Step(28, v, req(g3, topic=t + "b", tx=tid3, gen=5, member="nobody"), label="member")]
                if v >= 3
                else []
            ),
            Step(28, v, req(g3, topic=n.topic("missing"), tx=tid3), label="unknown topic"),
        ],
    )
    yield (
        "unknown transactional id",
        [create(t + "u"), Step(28, v, req(n.group("u"), topic=t + "u", tx=n.group("none")))],
    )


def describe_transactions_cases(v: int, n: Names) -> Iterator[Case]:
    t, tid = n.topic(), n.group("txn")
    described = Step(65, v, DescribeTransactionsRequest([tid]))
    yield (
        "empty, ongoing, committed, unknown",
        [
            create(t, 2),
            *begin(tid),
            described,
            add_partitions(tid, t, [0, 1]),
            txn_produce(tid, t, 1),
            described,
            *end_txn(tid, True),
            Step(65, v, DescribeTransactionsRequest([tid, n.group("none"), ""])),
        ],
    )


def list_transactions_cases(v: int, n: Names) -> Iterator[Case]:
    t, tid, tid2 = n.topic(), n.group("txn"), n.group("empty")

    def req(
        states: list[str], *, both: bool = True, duration: int = -1, pattern: str | None = None
    ) -> Callable:
        def body(p: Peer) -> ListTransactionsRequest:
            pids = [pid_of(p, x)[0] for x in ((tid, tid2) if both else (tid,))]
            return ListTransactionsRequest(states, pids, duration, pattern)

        return body

    steps = [
        *open_txn(tid, t),
        *begin(tid2),
        Step(66, v, req([])),
        Step(66, v, req(["Ongoing"])),
        Step(66, v, req(["Empty", "Bogus", "CompleteCommit"])),
    ]
    if v >= 1:
        steps += [
            Step(66, v, req([], duration=0), label="duration 0"),
            Step(66, v, req([], duration=3_600_000), label="duration an hour"),
        ]
    if v >= 2:
        steps += [
            Step(66, v, req([], pattern=f"{tid}.*"), label="pattern"),
            Step(66, v, req([], pattern="(unclosed"), label="bad pattern"),
        ]
    steps += [*end_txn(tid, False), Step(66, v, req(["CompleteAbort", "Ongoing"]))]
    yield "by producer id and state", steps


def describe_producers_cases(v: int, n: Names) -> Iterator[Case]:
    t, tid = n.topic(), n.group("txn")
    req = Step(61, v, DescribeProducersRequest([DPTopic(t, [0, 1, 5])]))
    yield (
        "transactional producer, open then committed",
        [
            *open_txn(tid, t, 2),
            req,
            *end_txn(tid, True),
            req,
        ],
    )
    yield (
        "plain producer, unknown topic",
        [
            create(t + "p"),
            produce(t + "p"),
            Step(61, v, DescribeProducersRequest([DPTopic(t + "p", [0]), DPTopic(n.topic("missing"), [0])])),
        ],
    )


def lso_cases(v: int, n: Names, api: int) -> Iterator[Case]:
    """The last stable offset and high watermark during an open, a committed and an aborted
    transaction: ListOffsets (both isolation levels) or Fetch (read_committed's aborted_transactions)."""
    t, tid = n.topic("lso"), n.group("lso")

    def look(label: str) -> list[Step]:
        if api == 2:

            def req(isolation: int) -> ListOffsetsRequest:
                parts = [ListOffsetsPartition(0, -1, -1, 1)] + (
                    [ListOffsetsPartition(1, -1, -1, 1)] if v >= 1 else []
                )
                return ListOffsetsRequest(-1, isolation, [ListOffsetsTopic(t, parts)], 5000)

            if v < 2:
                return [Step(2, v, req(0), label=label)]
            return [
                Step(2, v, req(0), label=f"{label}, uncommitted"),
                Step(2, v, req(1), label=f"{label}, committed"),
            ]
        return [
            Step(1, v, _fetch(v, t, 0, isolation_level=0), label=f"{label}, uncommitted"),
            Step(1, v, _fetch(v, t, 0, isolation_level=1), label=f"{label}, committed"),
        ]

    yield (
        "open, aborted, committed transaction",
        [
            create(t, 2),
            *begin(tid),
            produce(t, 0, 2, ts=NOW_TS),
            add_partitions(tid, t, [0, 1]),
            txn_produce(tid, t, 0, 3),
            produce(t, 0, 1, ts=NOW_TS),
            txn_produce(tid, t, 1, 2),
            *look("open"),
            *end_txn(tid, False),
            *look("aborted"),
            add_partitions(tid, t, [0]),
            txn_produce(tid, t, 0, 2),
            *look("open again"),
            *end_txn(tid, True),
            produce(t, 0, 1, ts=NOW_TS),
            *look("committed"),
        ],
    )


#: API key -> case builder (version, names) for every API the corpus covers.
BUILDERS: dict[int, Callable[[int, Names], Iterator[Case]]] = {
    0: produce_cases,
    1: fetch_cases,
    2: list_offsets_cases,
    3: metadata_cases,
    8: offset_commit_cases,
    9: offset_fetch_cases,
    10: find_coordinator_cases,
    11: join_group_cases,
    12: heartbeat_cases,
    13: leave_group_cases,
    14: sync_group_cases,
    15: describe_groups_cases,
    16: list_groups_cases,
    17: sasl_handshake_cases,
    18: api_versions_cases,
    19: create_topics_cases,
    20: delete_topics_cases,
    21: delete_records_cases,
    22: init_producer_id_cases,
    23: offset_for_leader_epoch_cases,
    32: describe_configs_cases,
    33: alter_configs_cases,
    34: alter_replica_log_dirs_cases,
    35: describe_log_dirs_cases,
    36: sasl_authenticate_cases,
    37: create_partitions_cases,
    42: delete_groups_cases,
    43: elect_leaders_cases,
    44: incremental_alter_configs_cases,
    45: alter_partition_reassignments_cases,
    46: list_partition_reassignments_cases,
    47: offset_delete_cases,
    48: describe_client_quotas_cases,
    49: alter_client_quotas_cases,
    50: describe_user_scram_credentials_cases,
    51: alter_user_scram_credentials_cases,
    55: describe_quorum_cases,
    57: update_features_cases,
    60: describe_cluster_cases,
    68: consumer_group_heartbeat_cases,
    69: consumer_group_describe_cases,
    74: list_config_resources_cases,
    75: describe_topic_partitions_cases,
    24: add_partitions_to_txn_cases,
    25: add_offsets_to_txn_cases,
    26: end_txn_cases,
    28: txn_offset_commit_cases,
    61: describe_producers_cases,
    65: describe_transactions_cases,
    66: list_transactions_cases,
}


def generic_cases(api: int, v: int) -> Iterator[Case]:
    """Bad lengths for every API: the first compared step of the API's first case, truncated by one
    byte, and followed by trailing bytes (each with its own fresh names and set-up)."""
    for variant, frame in (
        ("truncated by one byte", truncate(1)),
        ("trailing bytes", trailing(b"\x00\x01\x02")),
    ):
        for _name, steps in BUILDERS[api](v, Names()):
            first = next(
                (i for i, s in enumerate(steps) if s.compare and s.api == api and s.frame is None), None
            )
            if first is not None:
                s = steps[first]
                setup = [x for x in steps[:first] if not x.compare]
                yield variant, [*setup, Step(api, v, s.body, frame=frame, remember=s.remember)]
                break
