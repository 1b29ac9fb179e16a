"""How the coordinator runtime answers an operation whose records wait for the log's group commit
(broker/coordinator/runtime.py): a future resolved by a callback on the log manager's shared flush
future -- the response once it is durable, NOT_COORDINATOR when the fsync failed -- and, for a parked
request, a coroutine. Cancelling one request's answer (its connection closed) must not cancel the
shared flush, which every other request of the same group commit waits for."""

from __future__ import annotations

import asyncio

import pytest

from broker.coordinator.generated.offset_commit_key import OffsetCommitKey
from broker.coordinator.generated.offset_commit_value import OffsetCommitValue
from broker.coordinator.records import OFFSET_COMMIT, CoordinatorRecord
from broker.coordinator.result import Result
from broker.coordinator.runtime import CoordinatorRuntime, ManualClock
from broker.log.manager import StorageError
from broker.protocol.errors import ErrorCode, KafkaError
from tests.coordinator.context import FakeLogs, Replayed


class FakeLog:
    keep_unflushed = False

    def __init__(self) -> None:
        self.end = 0
        self.batches: list[bytes] = []

    def append(self, data: bytearray, batches, now_ms: int) -> int:
        base = self.end
        self.end += sum(b.records_count for b in batches)
        self.batches.append(bytes(data))
        return base


def commit_op(partition: int, response: object):
    def op(now: int) -> Result:
        value = OffsetCommitValue(partition, -1, "", now)
        rec = CoordinatorRecord(OFFSET_COMMIT, OffsetCommitKey("g", "t", partition), value)
        return Result(response=response, records=[rec])

    return op


def runtime() -> tuple[CoordinatorRuntime, FakeLogs, Replayed]:
    logs, state = FakeLogs(), Replayed()
    return CoordinatorRuntime(state, logs, FakeLog(), ManualClock(1000)), logs, state


async def test_answers_wait_for_the_shared_flush_and_a_cancelled_one_does_not_cancel_it():
    rt, logs, state = runtime()
    first = rt.run(commit_op(0, "first"))
    second = rt.run(commit_op(1, "second"))
    assert state.records == [(0, 0), (1, 1)]  # replayed at once, answered once durable
    assert asyncio.isfuture(first) and not first.done() and not second.done()
    first.cancel()  # the first request's connection closed
    await asyncio.sleep(0)
    assert not logs.flush.cancelled()
    logs.flush.set_result(None)
    assert await second == "second"


async def test_a_failed_flush_answers_not_coordinator_and_fails_the_completions():
    rt, logs, _state = runtime()
    parked = asyncio.get_running_loop().create_future()

    def op(now: int) -> Result:
        result = commit_op(0, "answer")(now)
        result.completions.append((parked, "parked answer"))
        return result

    answer = rt.run(op)
    logs.flush.set_exception(StorageError("fsync failed: EIO"))
    with pytest.raises(KafkaError) as e:
        await answer
    assert e.value.code == ErrorCode.NOT_COORDINATOR
    assert isinstance(e.value.__cause__, StorageError)
    with pytest.raises(KafkaError):
        await parked


async def test_a_parked_request_is_answered_by_its_own_future_after_the_flush():
    rt, logs, _state = runtime()
    parked = asyncio.get_running_loop().create_future()
    answer = rt.run(commit_op(0, parked))
    assert asyncio.iscoroutine(answer)
    task = asyncio.ensure_future(answer)
    await asyncio.sleep(0)
    other = rt.run(commit_op(1, "other"))
    task.cancel()  # the parked request's connection closed
    await asyncio.sleep(0)
    assert not logs.flush.cancelled()
    logs.flush.set_result(None)
    assert await other == "other"
