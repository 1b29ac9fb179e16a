"""The log side of transactions without sockets: producer state's open transactions, the last
stable offset, reads bounded by it, the aborted-transaction index and its .txnindex files
(Kafka's layout), rebuilt from the log when they are missing."""

from __future__ import annotations

from broker.log import cleaner, records, txnindex
from broker.log.batch import iter_batches, validate_produce
from broker.log.control import marker_batch
from broker.log.partition import PartitionLog
from tests.log.test_cleaner import DAY, T0, append, contents, seal
from tests.log.test_cleaner import open_log as open_compacted
from tests.log.test_partition_log import NOW, cfg

PID_A, PID_B = 100, 200


def open_log(path, **over) -> PartitionLog:
    return PartitionLog(path, "t", 0, cfg(**over))


def txn(plog: PartitionLog, pid: int, seq: int, *values: str, flush: bool = True) -> int:
    data = bytearray(records.simple_batch([v.encode() for v in values], base_timestamp=NOW, producer_id=pid,
                                          producer_epoch=0, base_sequence=seq, transactional=True))  # fmt: skip
    base = plog.append(data, validate_produce(data), NOW)
    if flush:
        plog.mark_flushed(*plog.flush_target())
    return base


def marker(plog: PartitionLog, pid: int, commit: bool, flush: bool = True) -> int:
    data = bytearray(marker_batch(pid, 0, commit, NOW))
    base = plog.append(data, iter_batches(data, verify_crc=False), NOW)
    if flush:
        plog.mark_flushed(*plog.flush_target())
    return base


def offsets_read(plog: PartitionLog, upto: int | None) -> list[int]:
    data = plog.read(0, 1 << 20, upto)
    return [off for off, *_ in records.iter_records(data)]


def test_last_stable_offset_follows_open_transactions(tmp_path):
    plog = open_log(tmp_path / "t-0")
    assert plog.last_stable_offset == 0
    txn(plog, PID_A, 0, "a0", "a1")  # offsets 0-1
    txn(plog, PID_B, 0, "b0")  # 2
    assert plog.high_watermark == 3 and plog.last_stable_offset == 0
    marker(plog, PID_A, True)  # 3
    assert plog.last_stable_offset == 2  # B is still open
    marker(plog, PID_B, False)  # 4
    assert plog.last_stable_offset == plog.high_watermark == 5
    assert offsets_read(plog, 2) == [0, 1]  # read_committed stops at the LSO
    assert offsets_read(plog, None) == [0, 1, 2, 3, 4]
    # only B's abort is in the index, with its first offset
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in plog.aborted.entries] == [(PID_B, 2, 4)]
    assert plog.aborted.overlapping(0, 5)[0].producer_id == PID_B
    assert plog.aborted.overlapping(5, 9) == []
    assert plog.aborted.overlapping(0, 2) == []  # a read ending before B's first offset


def test_a_marker_not_yet_flushed_holds_the_lso(tmp_path):
    plog = open_log(tmp_path / "t-0")
    txn(plog, PID_A, 0, "a0")
    marker(plog, PID_A, True, flush=False)
    assert plog.high_watermark == 1 and plog.last_stable_offset == 0
    plog.mark_flushed(*plog.flush_target())
    assert plog.last_stable_offset == 2


def test_txnindex_files_are_kafkas_and_rebuilt_when_missing(tmp_path):
    plog = open_log(tmp_path / "t-0", segment_bytes=200)
    txn(plog, PID_A, 0, "a" * 80)
    txn(plog, PID_B, 0, "b" * 80)
    marker(plog, PID_A, False)
    marker(plog, PID_B, False)
    txn(plog, PID_A, 1, "x" * 80)
    marker(plog, PID_A, True)
    want = [(e.producer_id, e.first_offset, e.last_offset) for e in plog.aborted.entries]
    assert want == [(PID_A, 0, 2), (PID_B, 1, 3)]
    plog.close()
    files = sorted((tmp_path / "t-0").glob("*.txnindex"))
    assert files and all(f.stat().st_size % 34 == 0 for f in files)
    on_disk = [(e.producer_id, e.first_offset, e.last_offset) for f in files for e in txnindex.read_file(f)]
    assert on_disk == want
    for f in files:
        f.unlink()
    (tmp_path / "t-0" / "producer-state.json").unlink()
    again = open_log(tmp_path / "t-0", segment_bytes=200)
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in again.aborted.entries] == want
    assert sorted((tmp_path / "t-0").glob("*.txnindex")) == files  # written again
    assert again.last_stable_offset == again.high_watermark


def test_an_open_transaction_survives_a_restart(tmp_path):
    plog = open_log(tmp_path / "t-0")
    txn(plog, PID_A, 0, "a0")
    plog.close()
    again = open_log(tmp_path / "t-0")
    assert again.last_stable_offset == 0 and again.producers.ongoing == {PID_A: 0}
    marker(again, PID_A, False)
    assert again.last_stable_offset == 2 and [e.first_offset for e in again.aborted.entries] == [0]


def test_coordinator_compaction_keeps_what_a_transactional_record_would_supersede(tmp_path):
    """A TxnOffsetCommit record may yet be aborted: the plain record of its key before it stays,
    and the transactional batch and its marker are kept byte for byte."""
    plog = open_compacted(tmp_path / "c", segment_bytes=10**6)
    append(plog, [(b"k", b"committed", T0), (b"other", b"1", T0)])
    append(
        plog,
        [(b"k", b"pending", T0 + 1)],
        producer_id=9,
        producer_epoch=0,
        base_sequence=-1,
        transactional=True,
    )
    data = bytearray(marker_batch(9, 0, False, T0 + 2))
    plog.append(data, iter_batches(data, verify_crc=False), T0 + 2)
    append(plog, [(b"other", b"2", T0 + 3)])
    seal(plog)
    cleaner.clean_partition(plog, T0 + 10 * DAY, DAY)
    kept = [(off, k, v) for off, _ts, k, v in contents(plog)]
    assert (0, b"k", b"committed") in kept and (2, b"k", b"pending") in kept
    assert (1, b"other", b"1") not in kept and (4, b"other", b"2") in kept
    assert 3 in [off for off, *_ in kept]  # the marker
