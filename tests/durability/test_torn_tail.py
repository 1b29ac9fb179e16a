"""Recovery from damaged segment files: what a power loss can leave at the tail is truncated, anything else
stops the broker with LogCorruption naming the file and the byte position.

Each test runs an in-process broker (log.flush=always) on one data directory, writes record batches
with raw Produce requests, stops the broker, damages a segment file, starts a new broker on the same
directory and checks what it recovered, through Fetch (CRCs checked) and the partition log itself.

Which recovery path applies (PartitionLog._load): a segment whose successor starts at or below the
recovery point (``recovery-point-offset-checkpoint``; a clean stop writes every partition's log end
offset there) is trusted as flushed: its ``.index`` is loaded when it matches the file size, else its
headers are rescanned without CRC checks, and a bad header raises LogCorruption. Any other non-last
segment is rescanned with CRC checks and a bad batch raises LogCorruption. The last segment is
rescanned with CRC checks and cut at the first bad batch, with a warning.

Scenarios: (a) half of a valid batch appended to the last segment, (b) a bit flipped in the last
batch, (c) 4 KiB of zeros appended -- each truncated back to the end of the last good batch, earlier
records intact, new appends continuing at the right offset; (d) a batch damaged in a non-last
segment (topic with segment.bytes=2000), above and below the recovery point.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from broker.log import records
from broker.log.batch import InvalidBatch, batch_length_at, iter_batches
from broker.log.segment import LogCorruption
from broker.protocol.generated.fetch import FetchPartition, FetchRequest, FetchTopic
from broker.protocol.generated.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from tests.support.wire import WireClient

CHECKPOINT = "recovery-point-offset-checkpoint"
CONFIG = {"log.flush": "always"}


# ---------------------------------------------------------------------------------------- helpers


def start(broker_factory, data: Path):
    return broker_factory(CONFIG, data)


def produce(b, topic: str, values: list[bytes]) -> int:
    """One batch of ``values`` (acks=-1, Produce v9); returns its base offset."""
    req = ProduceRequest(
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(
                name=topic,
                partition_data=[PartitionProduceData(index=0, records=records.simple_batch(values))],
            )
        ],
    )
    with WireClient(b.port) as c:
        resp = c.call(0, 9, req)
    p = resp.responses[0].partition_responses[0]
    assert p.error_code == 0, p.error_message
    return p.base_offset


def fetch(b, topic: str, offset: int) -> tuple[int, bytes]:
    """(high watermark, record bytes) of one Fetch v12 at ``offset``."""
    req = FetchRequest(
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 24,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 24)],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    with WireClient(b.port) as c:
        resp = c.call(1, 12, req)
    p = resp.responses[0].partitions[0]
    assert p.error_code == 0, f"fetch {topic} at {offset}: error {p.error_code}"
    return p.high_watermark, bytes(p.records or b"")


def read_all(b, topic: str, skip: range = range(0)) -> list[tuple[int, bytes]]:
    """Every record (offset, value) below the high watermark, CRCs checked, stepping over the batch
    whose base offset is in ``skip`` (a damaged one)."""
    out: list[tuple[int, bytes]] = []
    offset = 0
    while True:
        if offset in skip:
            offset = skip.stop
        hw, data = fetch(b, topic, offset)
        if offset >= hw:
            return out
        assert data, f"{topic}: nothing fetched at {offset} below the high watermark {hw}"
        pos = 0
        while pos < len(data):
            base, size = batch_length_at(data, pos)
            chunk, pos = data[pos : pos + size], pos + size
            if base in skip:
                offset = base
                break
            for off, _ts, _key, value, _headers, _info in records.iter_records(chunk, verify_crc=True):
                if off >= offset:
                    out.append((off, value))
                    offset = off + 1


def log_end(b, topic: str) -> tuple[int, int]:
    """(log end offset, high watermark) of partition 0, from the broker's own log."""
    return b.call(lambda: (lambda p: (p.log_end_offset, p.high_watermark))(b.broker.logs.get(topic, 0)))


def values(tag: str, n: int, size: int = 8) -> list[bytes]:
    return [f"{tag}-{i}-".encode().ljust(size, b"x") for i in range(n)]


def write(b, topic: str, batches: list[list[bytes]]) -> list[tuple[int, bytes]]:
    """Produce the batches; returns the (offset, value) pairs they were acknowledged at."""
    out = []
    for vals in batches:
        base = produce(b, topic, vals)
        out += [(base + i, v) for i, v in enumerate(vals)]
    return out


def segment_files(data: Path, topic: str) -> list[Path]:
    return sorted((data / f"{topic}-0").glob("*.log"))


def batches_in(path: Path):
    return iter_batches(path.read_bytes(), verify_crc=True)


def recovery_points(data: Path) -> dict[tuple[str, int], int]:
    lines = (data / CHECKPOINT).read_text().splitlines()
    assert lines[0] == "0" and int(lines[1]) == len(lines) - 2
    return {(t, int(p)): int(o) for t, p, o in (line.split() for line in lines[2:])}


def set_recovery_point(data: Path, topic: str, offset: int) -> None:
    """Rewrite the checkpoint as a crash before the last checkpoint would have left it."""
    points = recovery_points(data)
    points[(topic, 0)] = offset
    body = f"0\n{len(points)}\n" + "".join(f"{t} {p} {o}\n" for (t, p), o in points.items())
    (data / CHECKPOINT).write_text(body)


def flip_bit(path: Path, position: int, bit: int = 0) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)[0]
        f.seek(position)
        f.write(bytes([byte ^ (1 << bit)]))


def append_bytes(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def warnings_from(caplog, logger: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger and r.levelno == logging.WARNING]


# ---------------------------------------------------------------------------------------- (a)-(c)


def _written_log(broker_factory, data: Path) -> tuple[list[tuple[int, bytes]], Path]:
    """Four batches of one segment, written and cleanly stopped; returns the records and the file."""
    b = start(broker_factory, data)
    b.call(b.broker.create_topic, "t", 1)
    expected = write(b, "t", [values("a", 3), values("b", 1), values("c", 5, 40), values("d", 2)])
    assert log_end(b, "t") == (11, 11)
    b.stop()
    (seg,) = segment_files(data, "t")
    assert recovery_points(data)[("t", 0)] == 11
    return expected, seg


def _check_truncated_tail(
    broker_factory, data: Path, caplog, expected, seg: Path, good_size: int, reason: str
):
    """Restart: the file is cut back to ``good_size`` with both warnings, the records up to it read
    back unchanged, and appends continue after them -- also across one more restart."""
    dropped = seg.stat().st_size - good_size
    leo = expected[-1][0] + 1
    caplog.clear()
    caplog.set_level(logging.WARNING)
    b = start(broker_factory, data)
    assert log_end(b, "t") == (leo, leo)
    assert seg.stat().st_size == good_size
    (seg_warning,) = warnings_from(caplog, "broker.log.segment")
    assert seg_warning == (
        f"{seg}: truncating {dropped} bytes of torn or corrupt tail at byte {good_size} ({reason})"
    )
    assert warnings_from(caplog, "broker.log.partition") == [
        f"t-0: dropped {dropped} bytes after offset {leo} during recovery"
    ]
    assert read_all(b, "t") == expected
    more = write(b, "t", [values("e", 2), values("f", 1)])
    assert [o for o, _v in more] == [leo, leo + 1, leo + 2]
    b.stop()
    caplog.clear()
    b = start(broker_factory, data)
    assert read_all(b, "t") == expected + more
    assert log_end(b, "t") == (leo + 3, leo + 3)
    assert not warnings_from(caplog, "broker.log.segment")
    b.stop()


@pytest.mark.parametrize(
    "records_in_batch, reason",
    [
        (1, "{n} trailing bytes are too few for a batch"),  # half a 1-record batch: under a header
        (40, "batch of {total} bytes runs past the end of the file"),
    ],
    ids=["half-under-a-header", "half-with-header"],
)
def test_a_half_a_batch_appended_is_truncated(broker_factory, tmp_path, caplog, records_in_batch, reason):
    data = tmp_path / "d"
    expected, seg = _written_log(broker_factory, data)
    good_size = seg.stat().st_size
    whole = records.simple_batch(values("torn", records_in_batch, 20), base_offset=11)
    half = whole[: len(whole) // 2]
    append_bytes(seg, half)
    _check_truncated_tail(
        broker_factory, data, caplog, expected, seg, good_size, reason.format(n=len(half), total=len(whole))
    )


def test_b_bit_flipped_in_the_unflushed_last_batch_is_truncated(broker_factory, tmp_path, caplog):
    data = tmp_path / "d"
    expected, seg = _written_log(broker_factory, data)
    last = batches_in(seg)[-1]
    assert last.base_offset == 9
    flip_bit(seg, last.position + last.size - 3, 5)  # inside the last record's value
    # as a crash before the next checkpoint leaves it: the last batch is above the recovery point
    set_recovery_point(data, "t", last.base_offset)
    _check_truncated_tail(broker_factory, data, caplog, expected[:9], seg, last.position, "CRC-32C mismatch")


def test_c_zeros_appended_are_truncated(broker_factory, tmp_path, caplog):
    data = tmp_path / "d"
    expected, seg = _written_log(broker_factory, data)
    good_size = seg.stat().st_size
    append_bytes(seg, bytes(4096))
    _check_truncated_tail(broker_factory, data, caplog, expected, seg, good_size, "magic byte 0 is not 2")


def test_b_bit_flipped_below_the_recovery_point_is_not_truncated(broker_factory, tmp_path, caplog):
    """segment.py: LogCorruption is "corruption that recovery must not silently repair (it is not at
    the unflushed tail)". After a clean stop every batch is below the recovery point, so a flipped
    bit in the last segment is not a torn tail: start-up must refuse, as it does for a non-last
    segment, instead of dropping that batch and every acknowledged batch after it."""
    data = tmp_path / "d"
    expected, seg = _written_log(broker_factory, data)
    first = batches_in(seg)[0]
    flip_bit(seg, first.position + first.size - 3, 5)
    size = seg.stat().st_size
    caplog.set_level(logging.WARNING)
    try:
        b = start(broker_factory, data)
    except RuntimeError as e:
        cause = e.__cause__
        assert isinstance(cause, LogCorruption), repr(cause)
        assert (cause.path, cause.position) == (seg, first.position)
        assert seg.stat().st_size == size
        return
    leo = log_end(b, "t")
    raise AssertionError(
        f"started and recovered to {leo} from 11 (file {size} -> {seg.stat().st_size} bytes); "
        f"warnings: {warnings_from(caplog, 'broker.log.segment')}"
    )


# ---------------------------------------------------------------------------------------- (d)


def _segmented_log(broker_factory, data: Path) -> tuple[list[tuple[int, bytes]], list[Path]]:
    """A topic with segment.bytes=2000 and at least three segments, cleanly stopped."""
    b = start(broker_factory, data)
    b.call(b.broker.create_topic, "s", 1, {"segment.bytes": "2000"})
    expected = write(b, "s", [values(f"s{i}", 3, 150) for i in range(12)])
    b.stop()
    segs = segment_files(data, "s")
    assert len(segs) >= 3, segs
    assert len(batches_in(segs[0])) >= 3
    assert recovery_points(data)[("s", 0)] == expected[-1][0] + 1
    return expected, segs


def damage_segment(kind: str, seg: Path, batch) -> int:
    """Damage ``batch`` of ``seg`` (or the file's end); returns the byte position recovery should name."""
    if kind == "bit-flip":  # a bit of a record value: only a CRC check sees it
        flip_bit(seg, batch.position + batch.size - 5, 2)
        return batch.position
    if kind == "magic":  # the magic byte, 2 -> 0: a header check sees it
        flip_bit(seg, batch.position + 16, 1)
        return batch.position
    assert kind == "zeros"  # zeros after the last batch of a closed segment (changes its size)
    size = seg.stat().st_size
    append_bytes(seg, bytes(4096))
    return size


DAMAGE = ["bit-flip", "magic", "zeros"]
REASONS = {"bit-flip": "CRC-32C mismatch", "magic": "magic byte 0 is not 2", "zeros": "magic byte 0 is not 2"}


@pytest.mark.parametrize("damage", DAMAGE)
def test_d_damage_in_a_non_last_segment_above_the_recovery_point_refuses_to_start(
    broker_factory, tmp_path, damage
):
    """After a crash before the checkpoint covered it, a non-last segment is CRC-checked and any bad
    batch is corruption (a rolled segment was fsynced before the next one began): start-up raises
    LogCorruption naming the file and the byte position, and leaves the file alone."""
    data = tmp_path / "d"
    _expected, segs = _segmented_log(broker_factory, data)
    seg = segs[0]
    batch = batches_in(seg)[1]
    position = damage_segment(damage, seg, batch)
    size = seg.stat().st_size
    set_recovery_point(data, "s", 0)
    with pytest.raises(RuntimeError) as info:
        start(broker_factory, data)
    cause = info.value.__cause__
    assert isinstance(cause, LogCorruption), repr(cause)
    assert (cause.path, cause.position) == (seg, position)
    assert str(cause) == f"{seg}: corrupt record batch at byte {position}: {REASONS[damage]}"
    assert seg.stat().st_size == size


@pytest.mark.parametrize("index", ["index-kept", "index-deleted"])
@pytest.mark.parametrize("damage", DAMAGE)
def test_d_damage_in_a_non_last_segment_below_the_recovery_point(broker_factory, tmp_path, damage, index):
    """Below the recovery point a segment is trusted as flushed: with a matching .index it is not read
    at all, without one its headers are rescanned but CRCs are not checked. So a changed bit in a
    record goes unnoticed at start-up (the consumer's CRC check catches it), while a header that is
    no batch, or a size that no longer matches the index, raises LogCorruption as above."""
    data = tmp_path / "d"
    expected, segs = _segmented_log(broker_factory, data)
    seg = segs[0]
    batch = batches_in(seg)[1]
    position = damage_segment(damage, seg, batch)
    if index == "index-deleted":
        seg.with_suffix(".index").unlink()
    detected = damage == "zeros" or (damage == "magic" and index == "index-deleted")
    if detected:
        with pytest.raises(RuntimeError) as info:
            start(broker_factory, data)
        cause = info.value.__cause__
        assert isinstance(cause, LogCorruption), repr(cause)
        assert (cause.path, cause.position) == (seg, position)
        assert str(cause) == f"{seg}: corrupt record batch at byte {position}: {REASONS[damage]}"
        return
    b = start(broker_factory, data)
    leo = expected[-1][0] + 1
    assert log_end(b, "s") == (leo, leo)
    assert seg.with_suffix(".index").exists()
    # the damaged batch is served as stored; the client's CRC check is what catches it
    _hw, raw = fetch(b, "s", batch.base_offset)
    damaged = raw[: batch.size]
    assert len(damaged) == batch.size and damaged[:8] == batch.base_offset.to_bytes(8, "big")
    if damage == "bit-flip":
        with pytest.raises(InvalidBatch, match="CRC mismatch"):
            iter_batches(damaged, verify_crc=True)
    # every other batch, in every segment, reads back intact
    damaged_offsets = range(batch.base_offset, batch.base_offset + batch.last_offset_delta + 1)
    assert read_all(b, "s", skip=damaged_offsets) == [r for r in expected if r[0] not in damaged_offsets]
    new = values("new", 2)
    assert write(b, "s", [new]) == [(leo, new[0]), (leo + 1, new[1])]


def test_d_clean_restart_keeps_rolled_segments_as_they_are(broker_factory, tmp_path):
    """The premise of the 'below the recovery point' cases: after a clean stop every rolled segment
    has an index matching its size and the checkpoint holds the log end offset, so a restart loads
    them without rewriting anything."""
    data = tmp_path / "d"
    expected, segs = _segmented_log(broker_factory, data)
    rolled = segs[:-1] + [p.with_suffix(".index") for p in segs[:-1]]
    mtimes = {p: os.stat(p).st_mtime_ns for p in rolled}
    b = start(broker_factory, data)
    assert read_all(b, "s") == expected
    b.stop()
    assert {p: os.stat(p).st_mtime_ns for p in rolled} == mtimes
