"""DeleteRecords in the log layer: the log start offset moves inside a segment, whole segments below it
go, timestamp lookups skip what is below it, and the start survives a restart (its checkpoint)."""

from __future__ import annotations

import pytest

from broker.config import Config
from broker.log import records
from broker.log.batch import validate_produce
from broker.log.manager import START_CHECKPOINT, LogManager
from broker.protocol.errors import ErrorCode, KafkaError
from broker.spark import logdir

NOW = 1_700_000_000_000


def manager(tmp_path) -> LogManager:
    return LogManager(tmp_path, Config({"log.dirs": str(tmp_path), "log.flush": "never"}))


def append(m: LogManager, plog, values: list[bytes], ts: int = NOW) -> int:
    data = bytearray(records.simple_batch(values, base_timestamp=ts))
    base = plog.append(data, validate_produce(data), NOW)
    m.appended(plog)
    return base


def offsets_read(plog, offset: int) -> list[int]:
    return [off for off, *_ in records.iter_records(plog.read(offset, 1 << 20)) if off >= offset]


async def test_start_moves_inside_a_segment_and_survives_a_restart(tmp_path):
    m = manager(tmp_path)
    m.open_topic("t", 1, {"segment.bytes": "200"})
    plog = m.get("t", 0)
    for i in range(10):
        append(m, plog, [b"%03d" % i, b"x" * 40], ts=NOW + i)
    bases = [s.base_offset for s in plog.segments]
    assert len(bases) > 3 and plog.high_watermark == 20
    target = bases[2] + 1  # inside the third segment
    assert m.delete_records(plog, target) == target
    assert plog.log_start_offset == target
    assert [s.base_offset for s in plog.segments] == bases[2:], "whole segments below the start go"
    # a timestamp before everything answers the first record at or after the start
    assert plog.offset_for_timestamp(0)[0] == target
    # a lower offset does not move it back
    assert m.delete_records(plog, 3) == target
    await m.close()

    again = manager(tmp_path)
    assert (tmp_path / START_CHECKPOINT).exists()
    again.open_topic("t", 1, {"segment.bytes": "200"})
    reopened = again.get("t", 0)
    assert reopened.log_start_offset == target
    assert offsets_read(reopened, target)[0] == target
    await again.close()

    # the offline data-directory reader (the Spark source) starts where the broker does
    assert logdir.log_start_offset(tmp_path, "t", 0) == target
    assert logdir.plan(tmp_path, ("t", 0), 0, 20, fail_on_data_loss=False)[0].start == target
    with pytest.raises(logdir.DataLossError):
        logdir.plan(tmp_path, ("t", 0), target - 1, 20)
    assert logdir.plan(tmp_path, ("t", 0), target, 20)[0].start == target


async def test_above_the_high_watermark_is_out_of_range(tmp_path):
    m = manager(tmp_path)
    m.open_topic("t", 1, {})
    plog = m.get("t", 0)
    append(m, plog, [b"a", b"b"])
    with pytest.raises(KafkaError) as e:
        m.delete_records(plog, 3)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert m.delete_records(plog, 2) == 2  # up to the high watermark: everything
    assert plog.read(2, 1000) == b""
    assert append(m, plog, [b"c"]) == 2
    assert offsets_read(plog, 2) == [2]
    await m.close()


async def test_deleting_the_topic_forgets_its_start(tmp_path):
    m = manager(tmp_path)
    m.open_topic("t", 1, {})
    plog = m.get("t", 0)
    append(m, plog, [b"a", b"b", b"c"])
    m.delete_records(plog, 2)
    m.delete_topic("t")
    m.open_topic("t", 1, {})
    assert m.get("t", 0).log_start_offset == 0
    await m.close()
    again = manager(tmp_path)
    again.open_topic("t", 1, {})
    assert again.get("t", 0).log_start_offset == 0
    await again.close()
