"""Produce answers per topic and per partition: what refuses a whole topic (unknown, internal, acks)
is decided once per topic, and every partition of a request gets its own answer in request order."""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest

from broker.dispatch import produce
from broker.dispatch.produce import _after_flush, _ok_many, _ok_one, _one_partition, _when_durable
from broker.dispatch.registry import ClientInfo
from broker.log.batch import check_crc, read_header
from broker.log.manager import StorageError
from broker.log.records import Record, build_batch, simple_batch
from broker.log.streaming import native_batch
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.produce import (
    RESPONSE_DECODERS,
    RESPONSE_ENCODERS,
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    PartitionProduceData,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
    TopicProduceResponse,
)
from tests.support.wire import request_bytes

PRODUCE = 0


def _produce(node, topics: dict[str, list[int]], acks: int = -1, version: int = 9):
    batch = simple_batch([b"v"])
    body = ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(name=t, partition_data=[PartitionProduceData(p, batch) for p in parts])
            for t, parts in topics.items()
        ],
    )
    with node.client() as c:
        resp = c.call(PRODUCE, version, body)
    return {
        (t.name, p.index): (p.error_code, p.base_offset, p.error_message)
        for t in resp.responses
        for p in t.partition_responses
    }


def test_one_request_over_many_partitions_and_topics(node):
    node.broker.admin.create_topic("many", 300)
    node.broker.admin.create_topic("other", 2)
    node.broker.admin.create_topic("__internal", 1)  # a name of Kafka's internal topics: no client writes
    got = _produce(
        node,
        {"many": list(range(300)) + [300], "missing": [0, 1], "other": [1, 0], "__internal": [0]},
    )
    assert len(got) == 300 + 1 + 2 + 2 + 1
    for p in range(300):
        assert got[("many", p)] == (0, 0, None)
    assert got[("many", 300)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert [got[("missing", p)][0] for p in (0, 1)] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 2
    assert got[("other", 1)] == (0, 0, None) and got[("other", 0)] == (0, 0, None)
    code, _base, message = got[("__internal", 0)]
    assert (code, message) == (
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        "Cannot append to internal topic __internal",
    )
    again = _produce(node, {"many": [7, 299]})
    assert again[("many", 7)][:2] == (0, 1) and again[("many", 299)][:2] == (0, 1)


def test_invalid_acks_refuses_every_partition_and_appends_nothing(node):
    node.broker.admin.create_topic("t", 3)
    got = _produce(node, {"t": [0, 1, 2]}, acks=2)
    assert {k: v[:2] for k, v in got.items()} == {
        ("t", p): (ErrorCode.INVALID_REQUIRED_ACKS, -1) for p in range(3)
    }
    assert got[("t", 0)][2] == "acks must be -1, 0 or 1, not 2"
    assert [node.broker.logs.get("t", p).log_end_offset for p in range(3)] == [0, 0, 0]


async def test_a_request_cancelled_while_it_waits_leaves_the_shared_flush_to_the_others():
    """A client that disconnects cancels its own request's wait, never the group commit's flush
    future that other clients' requests wait on too."""
    flush = asyncio.get_running_loop().create_future()
    gone, staying = b"gone", b"staying"
    first = asyncio.ensure_future(_after_flush(gone, 9, [flush]))
    second = asyncio.ensure_future(_after_flush(staying, 9, [flush]))
    await asyncio.sleep(0)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert not flush.cancelled()
    flush.set_result(None)
    assert await second is staying


async def test_a_request_cancelled_while_it_waits_for_the_group_commit_leaves_it_to_the_others():
    """The same with the callback path every request takes when its appends share one group commit."""
    flush = asyncio.get_running_loop().create_future()
    gone, staying = b"gone", b"staying"
    first, second = _when_durable(gone, 9, flush), _when_durable(staying, 9, flush)
    first.cancel()
    assert not flush.cancelled()
    flush.set_result(None)
    assert await second is staying
    assert first.cancelled()


async def test_the_requests_of_each_group_commit_are_answered_when_it_is_done():
    """Requests waiting for different group commits (interleaved, or for one already done) are each
    answered with their own bytes when theirs is done, and only then."""
    loop = asyncio.get_running_loop()
    first, second = loop.create_future(), loop.create_future()
    a = _when_durable(b"a", 9, first)
    b = _when_durable(b"b", 9, second)
    c = _when_durable(b"c", 9, first)
    first.set_result(None)
    assert (await a, await c) == (b"a", b"c")
    assert not b.done()
    second.set_result(None)
    assert await b == b"b"
    assert await _when_durable(b"d", 9, first) == b"d"  # (first is done)


def _answer(*codes: int) -> ProduceResponse:
    return ProduceResponse(
        responses=[
            TopicProduceResponse(
                name="t",
                topic_id=uuid.UUID(int=7),
                partition_responses=[
                    PartitionProduceResponse(index=i, error_code=c, base_offset=7 if c == 0 else -1)
                    for i, c in enumerate(codes)
                ],
            )
        ]
    )


@pytest.mark.parametrize("wait", [_when_durable, lambda r, v, f: _after_flush(r, v, [f, f])])
@pytest.mark.parametrize("version", [3, 8, 9, 13])
async def test_a_failed_group_commit_fails_the_appends_it_covered_with_a_storage_error(wait, version):
    """The waiting request holds its encoded answer; a failed fsync turns its appends into errors."""
    flush = asyncio.get_running_loop().create_future()
    body = RESPONSE_ENCODERS[version](_answer(0, int(ErrorCode.INVALID_RECORD), 0))
    pending = asyncio.ensure_future(wait(body, version, flush))
    flush.set_exception(StorageError("fsync failed: EIO"))
    got, _end = RESPONSE_DECODERS[version](await pending)
    parts = got.responses[0].partition_responses
    assert [(p.error_code, p.base_offset) for p in parts] == [
        (ErrorCode.KAFKA_STORAGE_ERROR, -1),
        (ErrorCode.INVALID_RECORD, -1),  # refused before the append: its own error stays
        (ErrorCode.KAFKA_STORAGE_ERROR, -1),
    ]
    if version >= 8:  # (error messages from v8)
        assert parts[0].error_message == "fsync failed: EIO"


async def test_a_group_commit_failing_otherwise_fails_the_request():
    flush = asyncio.get_running_loop().create_future()
    pending = _when_durable(RESPONSE_ENCODERS[9](_answer(0)), 9, flush)
    flush.set_exception(RuntimeError("boom"))
    with pytest.raises(RuntimeError):
        await pending


@pytest.mark.parametrize("version", range(3, 14))
def test_the_one_partition_answer_is_what_the_generated_encoder_writes(version):
    """A request of one partition is answered from a cached topic head and one struct when it
    succeeded, and by the generated encoder otherwise: the bytes are the same either way."""
    rng = random.Random(version)
    cases = []
    for name in ("t", "topic-" + "x" * 200, "ünï"):
        for _ in range(20):
            ok = PartitionProduceResponse(
                index=rng.randrange(0, 1 << 31),
                error_code=0,
                base_offset=rng.randrange(0, 1 << 63),
                log_append_time_ms=rng.choice([-1, rng.randrange(0, 1 << 62)]),
                log_start_offset=rng.randrange(-1, 1 << 40),
            )
            cases.append((name, ok, rng.choice([0, rng.randrange(1, 1 << 31)])))
        refused = [
            PartitionProduceResponse(index=3, error_code=int(ErrorCode.NOT_LEADER_OR_FOLLOWER)),
            PartitionProduceResponse(
                index=1,
                error_code=int(ErrorCode.INVALID_RECORD),
                error_message="bad",
                record_errors=[BatchIndexAndErrorMessage(0, "bad")],
            ),
            PartitionProduceResponse(index=2, error_code=0, current_leader=LeaderIdAndEpoch(1, 4)),
        ]
        cases += [(name, p, 5) for p in refused]
    for name, p, throttle in cases:
        topic = TopicProduceResponse(name=name, topic_id=uuid.UUID(int=hash(name) & ((1 << 128) - 1)))
        topic.partition_responses = [p]
        want = RESPONSE_ENCODERS[version](ProduceResponse(responses=[topic], throttle_time_ms=throttle))
        assert _one_partition(version, topic, throttle) == want


@pytest.mark.parametrize("version", range(3, 14))
def test_the_fast_success_answer_is_what_the_generated_encoder_writes(version):
    """The one-partition fast path (``_produce_one``) writes its success answer without response
    objects: the bytes are the generated encoder's for the same answer."""
    rng = random.Random(100 + version)
    for name in ("t", "topic-" + "x" * 200, "ünï"):
        topic_id = uuid.UUID(int=rng.getrandbits(128))
        for _ in range(20):
            index = rng.randrange(0, 1 << 31)
            base = rng.randrange(0, 1 << 63)
            append_time = rng.choice([-1, rng.randrange(0, 1 << 62)])
            start = rng.randrange(-1, 1 << 40)
            topic = TopicProduceResponse(name=name, topic_id=topic_id)
            topic.partition_responses = [
                PartitionProduceResponse(
                    index=index,
                    error_code=0,
                    base_offset=base,
                    log_append_time_ms=append_time,
                    log_start_offset=start,
                )
            ]
            want = RESPONSE_ENCODERS[version](ProduceResponse(responses=[topic], throttle_time_ms=0))
            assert _ok_one(version, name, topic_id, index, base, append_time, start) == want


@pytest.mark.parametrize("version", range(3, 14))
def test_the_many_partition_success_answer_is_what_the_generated_encoder_writes(version):
    """A request whose every partition was appended is answered from the appends' tuples, without
    response objects (``_ok_many``): the bytes are the generated encoder's for the same answer, for
    any number of topics and partitions (none, one, hundreds: varint counts past one byte)."""
    rng = random.Random(200 + version)
    for shape in ([], [1], [3, 0, 2], [200], [1] * 130, [rng.randrange(1, 40) for _ in range(7)]):
        topics = []
        for i, count in enumerate(shape):
            name = rng.choice(["t", "topic-" + "x" * 200, "ünï"]) + str(i)
            parts = [
                (
                    rng.randrange(0, 1 << 31),
                    rng.randrange(0, 1 << 63),
                    rng.choice([-1, rng.randrange(0, 1 << 62)]),
                    rng.randrange(-1, 1 << 40),
                )
                for _ in range(count)
            ]
            topics.append((name, uuid.UUID(int=rng.getrandbits(128)), parts))
        throttle = rng.choice([0, rng.randrange(1, 1 << 31)])
        want = RESPONSE_ENCODERS[version](
            ProduceResponse(
                responses=[
                    TopicProduceResponse(
                        name=name,
                        topic_id=topic_id,
                        partition_responses=[
                            PartitionProduceResponse(
                                index=p, error_code=0, base_offset=b, log_append_time_ms=t, log_start_offset=s
                            )
                            for p, b, t, s in parts
                        ],
                    )
                    for name, topic_id, parts in topics
                ],
                throttle_time_ms=throttle,
            )
        )
        assert _ok_many(version, topics, throttle) == want


@pytest.mark.parametrize("version", [3, 9])
def test_a_writable_produce_frame_is_stamped_in_place_and_stored_as_a_copied_one(node, version):
    """A large Produce frame gathered from several reads is a bytearray (framing.FrameReader): the
    append stamps its batch in place (base offset, leader epoch, the records' max timestamp and the
    CRC over it) instead of copying it first. What is stored and answered is what the same request
    as bytes gets: two topics, one written from each kind of frame, end with the same bytes."""
    batch = build_batch(
        [(None, b"v" * 100)] * 700,
        base_timestamp=1_000,
        max_timestamp=5,  # a producer's wrong max
    )
    info = ClientInfo(peer="in-process")
    for topic, writable in (("as-bytes", False), ("as-bytearray", True)):
        node.broker.admin.create_topic(topic, 1)
        for i in range(2):  # the second lands at offset 700: a base offset to stamp
            body = ProduceRequest(
                transactional_id=None,
                acks=-1,
                timeout_ms=5000,
                topic_data=[TopicProduceData(name=topic, partition_data=[PartitionProduceData(0, batch)])],
            )
            frame = request_bytes(PRODUCE, version, body, 7, "c")[4:]
            sent = bytearray(frame) if writable else frame
            out = node.loop.run_until_complete(node._handle(sent, info))
            assert type(out) is bytes
            pos = 9 if version >= 9 else 8
            resp, _end = RESPONSE_DECODERS[version](out, pos)
            (p,) = resp.responses[0].partition_responses
            assert (p.error_code, p.base_offset) == (0, 700 * i)
        if writable:
            assert sent != frame  # stamped in place: its base offset (and max timestamp, CRC) changed
    stored = [node.broker.logs.get(t, 0).segments[-1].path.read_bytes() for t in ("as-bytes", "as-bytearray")]
    assert stored[0] == stored[1]
    assert len(stored[0]) == 2 * len(batch)
    for i in range(2):
        head = read_header(stored[1], i * len(batch))
        check_crc(stored[1], head)  # the CRC over the rewritten max timestamp
        assert (head.base_offset, head.max_timestamp) == (700 * i, 1_000)


def _plain_cases(now: int) -> list[tuple[str, dict[str, str], list[tuple[bytes | None, int]]]]:
    """(name, topic configs, requests of (records, acks) in order) for the fast path's test below:
    what ``_append_plain`` takes, and everything it leaves to the full checks."""

    def batch(n: int = 3, **kwargs) -> bytes:
        kwargs.setdefault("base_timestamp", now)
        return simple_batch([b"v%d" % i for i in range(n)], **kwargs)

    def pid(seq: int, epoch: int = 1, n: int = 3) -> bytes:
        return batch(n, producer_id=5, producer_epoch=epoch, base_sequence=seq)

    corrupt = bytearray(batch())
    corrupt[-1] ^= 1
    keyed = simple_batch([b"v"], keys=[b"k"], base_timestamp=now)
    return [
        ("plain", {}, [(batch(), -1), (batch(5), 1), (batch(1), -1)]),
        ("wrong-max-timestamp", {}, [(batch(max_timestamp=5), -1), (batch(max_timestamp=now + 9), 1)]),
        ("idempotent", {}, [(pid(0), -1), (pid(3), -1), (pid(3), -1), (pid(10), -1), (pid(6, 0), 1)]),
        ("new-epoch", {}, [(pid(0), -1), (pid(0, 2), -1), (pid(5, 3), -1)]),
        ("compressed", {}, [(batch(compression=1), -1), (batch(), -1)]),
        ("log-append-time", {"message.timestamp.type": "LogAppendTime"}, [(batch(), -1), (batch(), 1)]),
        ("client-log-append-time", {}, [(batch(timestamp_type=1), -1), (batch(), -1)]),
        ("old", {"message.timestamp.before.max.ms": "1000"}, [(batch(base_timestamp=5), -1), (batch(), -1)]),
        ("future", {"message.timestamp.after.max.ms": "1000"}, [(batch(base_timestamp=now + 60_000), -1)]),
        ("compacted", {"cleanup.policy": "compact"}, [(batch(), -1), (keyed, -1)]),
        ("recompressed", {"compression.type": "gzip"}, [(batch(), -1), (batch(), 1)]),
        ("min-isr", {"min.insync.replicas": "2"}, [(batch(), -1), (batch(), 1)]),
        ("too-large", {"max.message.bytes": "100"}, [(batch(20), -1), (batch(1), -1)]),
        ("corrupt", {}, [(bytes(corrupt), -1), (batch()[:-1], -1), (batch(), -1)]),
        ("empty", {}, [(None, -1), (b"", -1), (b"x" * 70, -1)]),
        ("two-batches", {}, [(batch() + batch(), -1)]),
        ("control", {}, [(batch(control=True), -1)]),
        (
            "transactional",
            {},
            [(batch(producer_id=6, producer_epoch=0, base_sequence=0, transactional=True), -1)],
        ),
    ]


@pytest.mark.parametrize("version", [3, 8, 9])
def test_the_plain_append_answers_and_stores_what_the_full_checks_do(node_factory, monkeypatch, version):
    """``_append_plain`` (one valid uncompressed CreateTime batch into a partition that neither
    recompresses, compacts nor stamps LogAppendTime) gives every request the answer and stores the
    bytes that the full checks of ``_append`` give and store: each case is produced into a topic as
    usual and into another with the plain path turned off, and the two agree; the refusals are
    still refused, and the plain path took the common cases."""
    node = node_factory({"clock": "manual"})  # one time for both topics (LogAppendTime stamps it)
    plain = produce._append_plain
    taken: list[tuple[str, int]] = []  # (case, request) the plain path appended
    stamped: list[tuple[str, int]] = []  # (case, request) it appended through the compiled stamp
    sent = [0]

    def spy(*args):
        out = plain(*args)
        if out is not None:
            taken.append((current, sent[0]))
        return out

    stamp = produce.native_stamp
    if stamp is not None:

        def stamp_spy(*args):
            out = stamp(*args)
            if out is not None:
                stamped.append((current, sent[0]))
            return out

        monkeypatch.setattr(produce, "native_stamp", stamp_spy)

    def answers(topic: str, requests: list[tuple[bytes | None, int]]) -> list[tuple]:
        out = []
        with node.client() as c:
            for sent[0], (records, acks) in enumerate(requests):
                body = ProduceRequest(
                    transactional_id=None,
                    acks=acks,
                    timeout_ms=5000,
                    topic_data=[
                        TopicProduceData(name=topic, partition_data=[PartitionProduceData(0, records)])
                    ],
                )
                (t,) = c.call(PRODUCE, version, body).responses
                (p,) = t.partition_responses
                # (the messages name the topic: the same name for both)
                message = p.error_message and p.error_message.replace(topic, "T")
                errors = [
                    (e.batch_index, e.batch_index_error_message.replace(topic, "T")) for e in p.record_errors
                ]
                out.append(
                    (
                        p.error_code,
                        message,
                        p.base_offset,
                        p.log_append_time_ms,
                        p.log_start_offset,
                        errors,
                    )
                )
        return out

    for current, configs, requests in _plain_cases(node.broker.clock.now_ms()):
        node.broker.admin.create_topic(f"{current}-fast", 1, configs)
        node.broker.admin.create_topic(f"{current}-full", 1, configs)
        monkeypatch.setattr(produce, "_append_plain", spy)
        fast = answers(f"{current}-fast", requests)
        monkeypatch.setattr(produce, "_append_plain", lambda *args: None)
        full = answers(f"{current}-full", requests)
        assert fast == full, current
        stored = [
            node.broker.logs.get(f"{current}-{path}", 0).segments[-1].path.read_bytes()
            for path in ("fast", "full")
        ]
        assert stored[0] == stored[1], current
    if native_batch is None:  # (the plain path takes only what the compiled check validated)
        assert taken == []
        return
    # the common cases only: not a duplicate, an out-of-order sequence, a refusal or what is rebuilt
    assert taken == [
        ("plain", 0),
        ("plain", 1),
        ("plain", 2),
        ("wrong-max-timestamp", 0),
        ("wrong-max-timestamp", 1),
        ("idempotent", 0),
        ("idempotent", 1),
        ("new-epoch", 0),
        ("new-epoch", 1),
        ("compressed", 1),
        ("client-log-append-time", 1),
        ("old", 1),
        ("min-isr", 1),
        ("too-large", 1),
        ("corrupt", 2),
    ]
    # of which the compiled stamp took every batch without a producer id
    if stamp is None:
        assert stamped == []
        return
    assert stamped == [case for case in taken if case[0] not in ("idempotent", "new-epoch")]


@pytest.mark.parametrize("version", [3, 9])
def test_record_timestamps_past_a_long_are_answered_as_kafka_answers_them(node, version):
    """Records whose timestamps (base plus delta) run past a long, on topics whose timestamp bounds
    are a long's top: Kafka wraps them around and accepts the batch, its max timestamp the largest
    record timestamp as Kafka reads them; a topic that recompresses refuses it (INVALID_RECORD).
    Never a handler failure that closes the connection."""
    top = (1 << 63) - 1
    # timestamp deltas 0, 10 and 20 on top - 15: the last record's runs past a long
    records = [Record(i, 10 * i, None, b"v", []) for i in range(3)]
    data = build_batch(records, base_timestamp=top - 15, max_timestamp=top)
    bounds = {"message.timestamp.before.max.ms": str(top), "message.timestamp.after.max.ms": str(top)}
    node.broker.admin.create_topic("wraps", 1, bounds)
    node.broker.admin.create_topic("wraps-gzip", 1, {**bounds, "compression.type": "gzip"})
    answers = {}
    with node.client() as c:
        for topic in ("wraps", "wraps-gzip"):
            body = ProduceRequest(
                transactional_id=None,
                acks=-1,
                timeout_ms=5000,
                topic_data=[
                    TopicProduceData(name=topic, partition_data=[PartitionProduceData(0, bytes(data))])
                ],
            )
            (t,) = c.call(PRODUCE, version, body).responses
            (answers[topic],) = t.partition_responses
    assert (answers["wraps"].error_code, answers["wraps"].base_offset) == (0, 0)
    assert answers["wraps-gzip"].error_code == ErrorCode.INVALID_RECORD
    stored = node.broker.logs.get("wraps", 0).segments[-1].path.read_bytes()
    head = read_header(stored, 0)
    check_crc(stored, head)
    assert head.max_timestamp == top - 5
    assert node.broker.logs.get("wraps-gzip", 0).log_end_offset == 0
