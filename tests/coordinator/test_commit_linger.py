"""The runtime's lingering batch of offset commits (runtime.py ``run_lingering`` / ``drain``): the
commits of one event-loop turn are appended as one batch at the end of the turn, replayed in order at
their own offsets, and answered once that batch is durable; every other operation drains the batch
first, so it sees the commits as if each had been appended alone. The batch holds the same records,
byte for byte, as the commits' own batches would."""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest

from broker.coordinator.classic.group import ClassicGroup
from broker.coordinator.generated.offset_commit_key import OffsetCommitKey
from broker.coordinator.generated.offset_commit_value import OffsetCommitValue
from broker.coordinator.records import OFFSET_COMMIT, CoordinatorRecord, OffsetCommitRecord, to_batch
from broker.coordinator.result import Result
from broker.coordinator.runtime import LINGER_MAX_RECORDS, CoordinatorRuntime, ManualClock
from broker.coordinator.state import CoordinatorState, PartitionOffsets
from broker.log.batch import iter_batches
from broker.log.manager import StorageError
from broker.log.records import iter_records
from broker.protocol.errors import ErrorCode, KafkaError
from tests.coordinator.context import FakeLogs, Replayed
from tests.coordinator.test_loader_runs import new_state
from tests.coordinator.test_replay_native import exact_view


class FakeLog:
    keep_unflushed = False

    def __init__(self, fail: bool = False) -> None:
        self.end = 0
        self.batches: list[bytes] = []
        self.fail = fail

    def append(self, data: bytearray, batches, now_ms: int) -> int:
        if self.fail:
            raise OSError(28, "No space left on device")
        base = self.end
        self.end += sum(b.records_count for b in batches)
        self.batches.append(bytes(data))
        return base


def record(partition: int, now: int) -> CoordinatorRecord:
    value = OffsetCommitValue(100 + partition, -1, "", now)
    return CoordinatorRecord(OFFSET_COMMIT, OffsetCommitKey("g", "t", partition), value)


def commit_op(partitions: list[int], response: object):
    def op(now: int) -> Result:
        return Result(response=response, records=[record(p, now) for p in partitions])

    return op


def runtime(fail: bool = False) -> tuple[CoordinatorRuntime, FakeLogs, Replayed, FakeLog]:
    logs, state, plog = FakeLogs(), Replayed(), FakeLog(fail)
    return CoordinatorRuntime(state, logs, plog, ManualClock(1000)), logs, state, plog


def keys_of(batch: bytes) -> list[tuple[int, bytes, bytes]]:
    return [(off, k, v) for off, _ts, k, v, _h, _info in iter_records(batch)]


async def test_the_commits_of_one_turn_are_one_batch_replayed_in_order_then_answered():
    rt, logs, state, plog = runtime()
    answers = [rt.run_lingering(commit_op([0, 1], "a")), rt.run_lingering(commit_op([2], "b"))]
    assert plog.batches == [] and state.records == []  # nothing written or replayed before the turn ends
    await asyncio.sleep(0)
    assert len(plog.batches) == 1
    assert state.records == [(0, 0), (1, 1), (2, 2)]
    assert not any(a.done() for a in answers)  # answered once durable
    logs.flush.set_result(None)
    assert [await a for a in answers] == ["a", "b"]
    # the same records, byte for byte, as one batch of the three commits' records
    alone = to_batch([record(p, 1000) for p in (0, 1, 2)], 1000)
    assert keys_of(plog.batches[0]) == keys_of(alone)


async def test_another_operation_drains_the_lingering_commits_first():
    rt, logs, state, plog = runtime()
    first = rt.run_lingering(commit_op([0], "first"))
    second = rt.run(commit_op([5], "other"))  # e.g. a JoinGroup: the state it reads holds the commit
    assert state.records == [(0, 0), (5, 1)]
    assert len(plog.batches) == 2
    await asyncio.sleep(0)
    assert len(plog.batches) == 2  # nothing left to drain
    logs.flush.set_result(None)
    assert await first == "first" and await second == "other"


async def test_without_linger_a_commit_is_appended_at_once():
    rt, logs, state, plog = runtime()
    answer = rt.run_lingering(commit_op([3], "new group"), linger=False)
    assert state.records == [(3, 0)] and len(plog.batches) == 1
    logs.flush.set_result(None)
    assert await answer == "new group"


async def test_a_commit_without_records_is_answered_at_once():
    rt, _logs, state, plog = runtime()
    assert rt.run_lingering(commit_op([], "refused")) == "refused"
    await asyncio.sleep(0)
    assert plog.batches == [] and state.records == []


async def test_a_full_batch_is_appended_without_waiting_for_the_turn_to_end():
    rt, logs, state, plog = runtime()
    per = 100
    answers = [rt.run_lingering(commit_op(list(range(per)), i)) for i in range(LINGER_MAX_RECORDS // per)]
    assert len(plog.batches) == 1 and len(state.records) == LINGER_MAX_RECORDS
    last = rt.run_lingering(commit_op([0], "next"))
    await asyncio.sleep(0)
    assert len(plog.batches) == 2 and state.records[-1] == (0, LINGER_MAX_RECORDS)
    logs.flush.set_result(None)
    assert [await a for a in answers] == list(range(LINGER_MAX_RECORDS // per))
    assert await last == "next"


async def test_a_failed_append_answers_not_coordinator_and_replays_nothing():
    rt, _logs, state, _plog = runtime(fail=True)
    parked = asyncio.get_running_loop().create_future()

    def op(now: int) -> Result:
        result = commit_op([0], "answer")(now)
        result.completions.append((parked, "parked answer"))
        return result

    answers = [rt.run_lingering(op), rt.run_lingering(commit_op([1], "b"))]
    await asyncio.sleep(0)
    assert state.records == []
    for a in answers:
        with pytest.raises(KafkaError) as e:
            await a
        assert e.value.code == ErrorCode.NOT_COORDINATOR
    with pytest.raises(KafkaError):
        await parked


async def test_a_failed_flush_answers_not_coordinator_and_a_cancelled_answer_leaves_the_rest():
    rt, logs, state, _plog = runtime()
    answers = [rt.run_lingering(commit_op([p], p)) for p in range(3)]
    await asyncio.sleep(0)
    answers[0].cancel()  # its connection closed
    logs.flush.set_exception(StorageError("fsync failed: EIO"))
    for a in answers[1:]:
        with pytest.raises(KafkaError) as e:
            await a
        assert e.value.code == ErrorCode.NOT_COORDINATOR
        assert isinstance(e.value.__cause__, StorageError)
    assert state.records == [(0, 0), (1, 1), (2, 2)]  # replayed: the records stay in the log


async def test_the_batch_is_one_well_formed_batch_with_consecutive_offset_deltas():
    rt, logs, _state, plog = runtime()
    for p in range(5):
        rt.run_lingering(commit_op([p], None))
    await asyncio.sleep(0)
    (batch,) = plog.batches
    (info,) = list(iter_batches(bytearray(batch)))
    assert info.records_count == 5
    assert [off for off, _k, _v in keys_of(batch)] == [0, 1, 2, 3, 4]
    logs.flush.set_result(None)


def test_without_an_event_loop_a_commit_runs_as_any_operation():
    class NoFlush(FakeLogs):
        def appended(self, plog):  # log.flush=never: durable at once
            return None

    state, plog = Replayed(), FakeLog()
    rt = CoordinatorRuntime(state, NoFlush(), plog, ManualClock(1000))
    assert rt.run_lingering(commit_op([1], "now")) == "now"
    assert state.records == [(1, 0)]


# ---------------------------------------------------------------------- replay of a drained batch


def _mixed_records(rng, n: int) -> list:
    """OffsetCommitRecords (as offsets.commit writes them) of a few groups and topics, in runs and
    interleaved, metadata or none, topic id or none, and now and then a tombstone."""
    out = []
    while len(out) < n:
        group, topic = rng.choice(["g", "h", "new", "other"]), rng.choice(["t", "u"])
        for _ in range(rng.choice([1, 1, 3, 10])):
            p = rng.randrange(6)
            if rng.random() < 0.05:
                out.append(CoordinatorRecord(OFFSET_COMMIT, OffsetCommitKey(group, topic, p), None))
                continue
            tid = rng.choice([uuid.UUID(int=0), uuid.UUID(int=5 << 64)])
            out.append(
                OffsetCommitRecord(
                    group,
                    topic,
                    p,
                    rng.randrange(1 << 40),
                    rng.choice([-1, 2]),
                    rng.choice(["", "", "meta"]),
                    1000 + len(out),
                    tid,
                )  # fmt: skip
            )
    return out


def _states(pending: bool) -> list[CoordinatorState]:
    states = []
    for _ in range(2):
        st = new_state()
        st.groups["g"] = ClassicGroup("g")
        st.groups["h"] = ClassicGroup("h")
        st.replay(record(0, 900))  # group "g", topic "t" has offsets
        st.offsets["g"].by_topic["u"] = PartitionOffsets()
        if pending:
            st.replay_transactional(7, record(3, 950), 0, 950)
        states.append(st)
    return states


@pytest.mark.parametrize("seed", range(12))
def test_a_drained_batch_replays_as_its_records_one_by_one(seed):
    """``CoordinatorState.replay_commits`` (what ``drain`` calls) leaves the state that replaying each
    record in order leaves: the same offsets, as the same bytes, in the same order, the same groups
    (an unknown group is made by its first commit), pending transactional offsets kept apart."""
    rng = random.Random(seed)
    records = _mixed_records(rng, 60)
    to_batch(records, 1000)  # leaves each OffsetCommitRecord's value bytes on it, as drain does
    one, bulk = _states(pending=seed % 3 == 0)
    for i, r in enumerate(records):
        one.replay(r, 100 + i, 1000)
    bulk.replay_commits(records, 100, 1000)
    assert exact_view(bulk) == exact_view(one)
    assert list(bulk.groups) == list(one.groups)
