"""PartitionLog and Segment without sockets: appends, reads, rolls, index, recovery, retention,
producer state. The flush policy and the high watermark are in test_manager.py."""

from __future__ import annotations

import os

import pytest

from broker.log import records
from broker.log.batch import InvalidBatch, iter_batches, read_header, validate_produce
from broker.log.config import LogConfig
from broker.log.partition import PartitionLog
from broker.log.producers import ProducerState
from broker.log.segment import LogCorruption
from broker.protocol.errors import ErrorCode, KafkaError

NOW = 1_700_000_000_000


def cfg(**over) -> LogConfig:
    base = dict(
        segment_bytes=1 << 30,
        segment_ms=1 << 40,
        retention_ms=-1,
        retention_bytes=-1,
        max_message_bytes=1 << 20,
        log_append_time=False,
        cleanup_policy="delete",
        index_interval_bytes=4096,
    )
    base.update(over)
    return LogConfig(**base)


def open_log(path, **over) -> PartitionLog:
    return PartitionLog(path, "t", 0, cfg(**over))


def append(plog: PartitionLog, values, ts=NOW, now=NOW, **kw) -> int:
    data = bytearray(
        records.simple_batch(
            [v if isinstance(v, bytes) else v.encode() for v in values], base_timestamp=ts, **kw
        )
    )
    base = plog.append(data, validate_produce(data), now)
    plog.mark_flushed(*plog.flush_target())
    return base


def values_from(plog: PartitionLog, offset: int = 0) -> list[tuple[int, bytes]]:
    out = []
    while offset < plog.high_watermark:
        data = plog.read(offset, 1 << 20)
        assert data, f"nothing read at {offset} below the high watermark {plog.high_watermark}"
        for off, _ts, _k, v, _h, _info in records.iter_records(data):
            if off >= offset:
                out.append((off, v))
        offset = out[-1][0] + 1
    return out


def test_offsets_are_assigned_and_read_back(tmp_path):
    plog = open_log(tmp_path / "p")
    assert append(plog, ["a", "b", "c"]) == 0
    assert append(plog, ["d"]) == 3
    assert plog.log_end_offset == plog.high_watermark == 4
    assert values_from(plog) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    # a read from the middle of a batch returns that whole batch (the client skips what it has)
    first = next(iter(records.iter_records(plog.read(1, 1 << 20))))
    assert first[0] == 0


def test_assigned_offsets_and_leader_epoch_keep_the_crc_valid(tmp_path):
    plog = open_log(tmp_path / "p")
    append(plog, ["x"] * 3)
    append(plog, ["y"] * 2)
    data = plog.read(0, 1 << 20)
    infos = iter_batches(data, verify_crc=True)
    assert [(b.base_offset, b.partition_leader_epoch) for b in infos] == [(0, 0), (3, 0)]


def test_log_append_time_rewrites_timestamps_with_a_valid_crc(tmp_path):
    plog = open_log(tmp_path / "p", log_append_time=True)
    append(plog, ["x", "y"], ts=5, now=NOW + 7)
    (info,) = iter_batches(plog.read(0, 1 << 20), verify_crc=True)
    assert info.max_timestamp == NOW + 7 and info.attributes & 0x08
    assert [r[1] for r in records.iter_records(plog.read(0, 1 << 20))] == [NOW + 7, NOW + 7]


def test_segments_roll_by_size_and_reads_cross_them(tmp_path):
    plog = open_log(tmp_path / "p", segment_bytes=300)
    for i in range(20):
        append(plog, [f"value-{i:03d}" * 3])
    assert len(plog.segments) > 3
    assert [s.base_offset for s in plog.segments] == sorted(s.base_offset for s in plog.segments)
    assert values_from(plog) == [(i, f"value-{i:03d}".encode() * 3) for i in range(20)]
    assert values_from(plog, 13)[0][0] == 13


def test_max_bytes_returns_whole_batches_but_at_least_one(tmp_path):
    plog = open_log(tmp_path / "p")
    for _ in range(5):
        append(plog, ["v" * 200])
    one = plog.read(0, 10)  # smaller than a batch: still one whole batch
    assert len(iter_batches(one)) == 1
    two = plog.read(0, len(one) * 2 + 5)
    assert len(iter_batches(two)) == 2


def _whole_batches(data: bytes, max_bytes: int) -> bytes:
    """The expected read: the longest run of whole batches from the start within ``max_bytes``, or
    the first batch when it alone is larger (KIP-74), by a plain walk over every header."""
    end = 0
    while end + 12 <= len(data):
        length = int.from_bytes(data[end + 8 : end + 12], "big") + 12
        if end + length > max_bytes:
            break
        end += length
    return data[:end] if end else data[: int.from_bytes(data[8:12], "big") + 12]


@pytest.mark.parametrize("interval", [1, 150, 4096])
@pytest.mark.parametrize("reopen", [False, True])
def test_a_read_cut_by_max_bytes_ends_at_the_last_whole_batch(tmp_path, interval, reopen):
    # batches of varied sizes; the cut is found from the index (an entry every ``interval`` bytes),
    # so it must be the same as a walk over every header, from any start and for any max_bytes
    plog = open_log(tmp_path / "p", index_interval_bytes=interval)
    for i in range(40):
        append(plog, ["v" * (1 + 37 * (i % 7))] * (1 + i % 3))
    if reopen:  # the index read back from its file
        plog.close()
        plog = open_log(tmp_path / "p", index_interval_bytes=interval)
    everything = plog.read(0, 1 << 20)
    starts = [b.base_offset for b in iter_batches(everything)]
    assert len(starts) == 40
    for start in starts[::3]:
        rest = plog.read(start, 1 << 20)
        for max_bytes in [1, 60, 61, 200, 333, 1000, 2048, len(rest) - 1, len(rest), len(rest) + 1]:
            got = plog.read(start, max_bytes)
            assert got == _whole_batches(rest, max_bytes), (start, max_bytes)


def test_reopen_restores_offsets_index_and_data(tmp_path):
    plog = open_log(tmp_path / "p", segment_bytes=400, index_interval_bytes=100)
    for i in range(30):
        append(plog, [f"r{i}"])
    plog.close()
    again = open_log(tmp_path / "p", segment_bytes=400, index_interval_bytes=100)
    assert again.log_end_offset == again.high_watermark == 30
    assert values_from(again, 17)[0] == (17, b"r17")
    assert append(again, ["next"]) == 30


def test_missing_index_is_rebuilt(tmp_path):
    plog = open_log(tmp_path / "p", segment_bytes=300)
    for i in range(12):
        append(plog, [f"m{i}" * 10])
    plog.close()
    for idx in (tmp_path / "p").glob("*.index"):
        idx.unlink()
    again = open_log(tmp_path / "p", segment_bytes=300)
    assert values_from(again) == [(i, f"m{i}".encode() * 10) for i in range(12)]


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda raw: raw[: len(raw) - 7], id="torn-final-batch"),
        pytest.param(lambda raw: raw[:-1] + bytes([raw[-1] ^ 0x01]), id="bit-flip-in-last-batch"),
        pytest.param(lambda raw: raw + bytes(4096), id="zero-filled-tail"),
        pytest.param(
            lambda raw: raw + b"\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x01\x00", id="length-past-eof"
        ),
    ],
)
def test_bad_tail_is_truncated_on_open(tmp_path, damage, caplog):
    plog = open_log(tmp_path / "p")
    append(plog, ["keep-1", "keep-2"])
    append(plog, ["last"])
    plog.close()
    seg = tmp_path / "p" / f"{0:020d}.log"
    raw = seg.read_bytes()
    seg.write_bytes(damage(raw))
    again = open_log(tmp_path / "p")
    expected_end = 3 if len(damage(raw)) > len(raw) else 2
    assert again.log_end_offset == expected_end
    assert [v for _o, v in values_from(again)][:2] == [b"keep-1", b"keep-2"]
    assert "truncating" in caplog.text
    assert append(again, ["after"]) == expected_end


def test_corruption_in_an_earlier_segment_refuses_to_start(tmp_path):
    plog = open_log(tmp_path / "p", segment_bytes=250)
    for i in range(10):
        append(plog, [f"s{i}" * 20])
    assert len(plog.segments) >= 3
    plog.close()
    first = tmp_path / "p" / f"{0:020d}.log"
    raw = bytearray(first.read_bytes())
    raw[-3] ^= 0xFF  # inside the first segment's last batch: under the CRC
    first.write_bytes(bytes(raw))
    with pytest.raises(LogCorruption) as e:
        open_log(tmp_path / "p", segment_bytes=250)
    assert str(first) in str(e.value) and "byte" in str(e.value)


def test_segment_below_the_recovery_point_is_trusted_but_its_shape_is_checked(tmp_path):
    plog = open_log(tmp_path / "p", segment_bytes=250)
    for i in range(10):
        append(plog, [f"s{i}" * 20])
    plog.close()
    first = tmp_path / "p" / f"{0:020d}.log"
    os.truncate(first, first.stat().st_size - 10)  # a segment cut short in the middle of the log
    with pytest.raises(LogCorruption):
        PartitionLog(tmp_path / "p", "t", 0, cfg(segment_bytes=250), recovery_point=10)


def test_retention_by_bytes_and_time_deletes_whole_old_segments(tmp_path):
    plog = open_log(tmp_path / "p", segment_bytes=250)
    for i in range(12):
        append(plog, [f"old{i}" * 20], ts=NOW - 10_000_000)
    n_before = len(plog.segments)
    plog.config = cfg(segment_bytes=250, retention_bytes=600)
    assert plog.apply_retention(NOW) > 0
    assert plog.size_bytes() <= 600 + plog.segments[0].size
    assert plog.log_start_offset > 0 and len(plog.segments) < n_before
    start = plog.log_start_offset
    assert values_from(plog, start)[0][0] == start
    plog.config = cfg(segment_bytes=250, retention_ms=1000)
    plog.apply_retention(NOW)
    assert len(plog.segments) == 1, "the active segment is never deleted"
    assert plog.log_end_offset == 12


def test_a_producer_the_partition_does_not_know_may_start_at_any_sequence(tmp_path):
    """As Kafka's ProducerAppendInfo: no state for the producer (its batches removed by retention or
    DeleteRecords) accepts any first sequence; from then on its sequences must follow."""
    plog = open_log(tmp_path / "p")

    def info(seq: int, n: int = 2):
        data = bytearray(records.simple_batch([b"x"] * n, producer_id=9, producer_epoch=3, base_sequence=seq))
        return data, validate_produce(data)[0]

    data, first = info(5)
    assert plog.producers.check(first) is None
    plog.append(data, [first], NOW)
    _data, gap = info(9)
    with pytest.raises(KafkaError) as e:
        plog.producers.check(gap)
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    _data, retry = info(5)
    dup = plog.producers.check(retry)
    assert dup is not None and (dup.base_offset, dup.last_offset) == (0, 1)
    _data, following = info(7)
    assert plog.producers.check(following) is None


def test_producers_expire_after_their_last_write_unless_a_transaction_is_open():
    state = ProducerState()

    def write(pid: int, ts: int, transactional: bool = False) -> None:
        data = bytearray(
            records.simple_batch([b"x"], base_offset=pid, producer_id=pid, producer_epoch=0,
                                 base_sequence=0, base_timestamp=ts, transactional=transactional)
        )  # fmt: skip
        (info,) = validate_produce(data)
        state.record(info)

    write(1, NOW)
    write(2, NOW + 500)
    write(3, NOW, transactional=True)
    assert state.remove_expired(NOW + 999, 1000) == 0
    assert state.remove_expired(NOW + 1000, 1000) == 1 and sorted(state.producers) == [2, 3]
    again = ProducerState.from_json(state.to_json())
    assert again.producers[2].last_timestamp == NOW + 500
    assert again.remove_expired(NOW + 1_000_000, 1000) == 1 and sorted(again.producers) == [3]


def test_producer_state_detects_duplicates_and_survives_reopen(tmp_path):
    plog = open_log(tmp_path / "p")
    data = bytearray(records.simple_batch([b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0))
    (info,) = validate_produce(data)
    assert plog.producers.check(info) is None
    plog.append(data, [info], NOW)
    again_info = validate_produce(
        bytearray(records.simple_batch([b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0))
    )[0]
    dup = plog.producers.check(again_info)
    assert dup is not None and (dup.base_offset, dup.last_offset) == (0, 1)
    gap = validate_produce(
        bytearray(records.simple_batch([b"c"], producer_id=7, producer_epoch=0, base_sequence=5))
    )[0]
    with pytest.raises(KafkaError) as e:
        plog.producers.check(gap)
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    old = validate_produce(
        bytearray(records.simple_batch([b"c"], producer_id=7, producer_epoch=-1 + 0, base_sequence=2))
    )[0]
    plog.producers.producers[7].epoch = 1
    with pytest.raises(KafkaError) as e:
        plog.producers.check(old)
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    plog.producers.producers[7].epoch = 0
    plog.close()
    reopened = open_log(tmp_path / "p")
    dup = reopened.producers.check(again_info)
    assert dup is not None and dup.base_offset == 0
    # and without the snapshot, the state comes back from the log itself
    reopened.close()
    (tmp_path / "p" / "producer-state.json").unlink()
    rebuilt = open_log(tmp_path / "p")
    assert rebuilt.producers.check(again_info).base_offset == 0


def test_offset_for_timestamp_finds_the_first_record_at_or_after(tmp_path):
    plog = open_log(tmp_path / "p")
    recs = [records.Record(i, i * 10, None, f"v{i}".encode(), []) for i in range(5)]
    data = bytearray(records.build_batch(recs, base_timestamp=1000))
    plog.append(data, validate_produce(data), NOW)
    data = bytearray(records.build_batch([records.Record(0, 0, None, b"w", [])], base_timestamp=2000))
    plog.append(data, validate_produce(data), NOW)
    plog.mark_flushed(*plog.flush_target())
    assert plog.offset_for_timestamp(1000) == (0, 1000)
    assert plog.offset_for_timestamp(1025) == (3, 1030)
    assert plog.offset_for_timestamp(1041) == (5, 2000)
    assert plog.offset_for_timestamp(2001) is None
    assert plog.max_timestamp_offset() == (5, 2000)


def test_validate_produce_rejects_corruption(tmp_path):
    good = bytearray(records.simple_batch([b"x"]))
    bad = bytearray(good)
    bad[-1] ^= 1
    with pytest.raises(InvalidBatch) as e:
        validate_produce(bad)
    assert e.value.corrupt


def test_discard_unflushed_cuts_back_to_the_high_watermark_across_rolls(tmp_path):
    """What a failed fsync does: everything past the high watermark goes, segments rolled since
    included, with the producer state of the dropped batches; the next append takes their offsets."""
    plog = open_log(tmp_path / "p", segment_bytes=300)
    append(plog, ["a0", "a1"])
    hw, size = plog.high_watermark, plog.active.size
    first = plog.active
    for i in range(6):  # appended, never flushed: rolls more segments
        data = bytearray(records.simple_batch([b"x" * 100], producer_id=3, producer_epoch=0, base_sequence=i))
        plog.append(data, validate_produce(data), NOW)
    assert len(plog.segments) > 1 and plog.log_end_offset == hw + 6
    assert plog.discard_unflushed() == 6
    assert plog.segments == [first] and first.size == size and os.path.getsize(first.path) == size
    assert plog.log_end_offset == plog.high_watermark == hw and not plog.producers.producers
    assert sorted(p.name for p in (tmp_path / "p").glob("*.log")) == [first.path.name]
    assert append(plog, ["b"]) == hw
    assert values_from(plog) == [(0, b"a0"), (1, b"a1"), (2, b"b")]
    plog.keep_unflushed = True  # the coordinator's log keeps its tail
    data = bytearray(records.simple_batch([b"kept"]))
    plog.append(data, validate_produce(data), NOW)
    assert plog.discard_unflushed() == 0 and plog.log_end_offset == 4


def test_header_at_is_the_header_of_the_batch_a_read_starts_with(tmp_path):
    plog = open_log(tmp_path / "p", segment_bytes=300)
    for i in range(12):
        plog.leader_epoch = i // 4
        append(plog, [f"value-{i:03d}" * 3, b"second"])  # two records a batch: offsets 2i, 2i + 1
    assert len(plog.segments) > 3
    for offset in range(plog.high_watermark):
        h = plog.header_at(offset)
        first = read_header(plog.read(offset, 1), 0)
        assert (h.base_offset, h.last_offset, h.partition_leader_epoch, h.size) == (
            first.base_offset,
            first.last_offset,
            first.partition_leader_epoch,
            first.size,
        )
        assert (h.base_offset, h.partition_leader_epoch) == (offset - offset % 2, offset // 8)
    assert plog.header_at(plog.high_watermark) is None
    # written but not yet below the high watermark: not there either, as read gives nothing
    data = bytearray(records.simple_batch([b"unflushed"]))
    plog.append(data, validate_produce(data), NOW)
    assert plog.log_end_offset == plog.high_watermark + 1
    assert plog.header_at(plog.high_watermark) is None
    assert plog.read(plog.high_watermark, 1) == b""


@pytest.mark.parametrize("interval", [1, 150, 4096])
@pytest.mark.parametrize("reopen", [False, True])
def test_a_read_from_any_offset_starts_at_the_batch_holding_it(tmp_path, interval, reopen):
    # an offset that is an index entry's (a batch start the index names) is found without a walk;
    # every other offset by the walk from the entry before it: both must give what a plain walk over
    # every batch of the log gives, from the batch holding the offset to the end (or to ``upto``)
    plog = open_log(tmp_path / "p", segment_bytes=700, index_interval_bytes=interval)
    for i in range(30):
        append(plog, ["v" * (1 + 29 * (i % 5))] * (1 + i % 3))
    if reopen:  # the index read back from its file
        plog.close()
        plog = open_log(tmp_path / "p", segment_bytes=700, index_interval_bytes=interval)
    assert len(plog.segments) > 3
    batches = [
        (b.base_offset, b.last_offset)
        for s in plog.segments
        for b in iter_batches(s.read(0, 1 << 20, s.size))
    ]
    whole = b"".join(s.read(0, 1 << 20, s.size) for s in plog.segments)
    starts = {}
    pos = 0
    for b in iter_batches(whole):
        starts[b.base_offset] = pos
        pos += b.size
    assert len(batches) == 30
    for offset in range(plog.high_watermark):
        base, last = next((b, last) for b, last in batches if last >= offset)
        got = plog.read(offset, 1 << 20)
        head = read_header(got, 0)
        assert head.base_offset == base, offset
        # to the end of the batch's segment (a read does not cross segments)
        assert whole[starts[base] : starts[base] + len(got)] == got
        # ``upto`` (a read_committed fetch's last stable offset) is a batch boundary
        for upto in (base, last + 1, plog.high_watermark):
            bounded = plog.read(offset, 1 << 20, upto)
            if upto <= offset:
                assert bounded == b""
            else:
                assert read_header(bounded, 0).base_offset == base
                assert iter_batches(bounded)[-1].last_offset < upto
                assert bounded == got[: len(bounded)]
    assert plog.read(plog.high_watermark, 1 << 20) == b""
