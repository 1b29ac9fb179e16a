"""The log cleaner on compacted user topics with transactions (Kafka's transaction-aware LogCleaner).

Records of aborted transactions go (found through the aborted-transaction index of the range) and
never supersede a committed value; nothing at or above the last stable offset is cleaned (the range
ends at the segment holding it); a commit or abort marker stays while a batch of its transaction is
in the log, then gets a KIP-534 delete horizon and goes on the first pass past it; an active
producer's last batch (or, with no data batch, its marker) stays, empty, so its sequence and epoch
survive a rebuild of producer state; the cleaned range's .txnindex keeps only the aborted
transactions that still have batches, on disk as in memory, across a restart.
"""

from __future__ import annotations

import os
import random

import pytest

from broker.log import cleaner, txnindex
from broker.log.batch import CONTROL_MASK, TRANSACTIONAL_MASK, iter_batches, validate_produce
from broker.log.control import marker_batch, parse_marker
from broker.log.partition import PartitionLog
from broker.log.records import build_batch

from .test_cleaner import DAY, T0, append, seal
from .test_cleaner_user import clean, open_log

P1, P2, P3 = 1001, 1002, 1003


class Producer:
    """A transactional producer's appends: sequence numbers per producer, epoch 0 unless bumped."""

    def __init__(self, plog: PartitionLog, pid: int, epoch: int = 0):
        self.plog, self.pid, self.epoch, self.seq = plog, pid, epoch, 0

    def send(self, *records: tuple[bytes, bytes | None], ts: int = T0) -> int:
        base = self.plog.log_end_offset
        append(
            self.plog,
            [(k, v, ts) for k, v in records],
            producer_id=self.pid,
            producer_epoch=self.epoch,
            base_sequence=self.seq,
            transactional=True,
        )
        self.seq += len(records)
        return base

    def end(self, commit: bool, ts: int = T0, epoch: int | None = None) -> int:
        """The coordinator's marker (``epoch``: a bumped one, KIP-890); decided once flushed (seal)."""
        if epoch is not None:
            self.epoch, self.seq = epoch, 0
        base = self.plog.log_end_offset
        data = bytearray(marker_batch(self.pid, self.epoch, commit, ts))
        self.plog.append(data, iter_batches(data, verify_crc=False), ts)
        return base


def plain(plog: PartitionLog, key: bytes, value: bytes | None, ts: int = T0) -> int:
    base = plog.log_end_offset
    append(plog, [(key, value, ts)])
    return base


def batches(plog: PartitionLog) -> list[tuple[int, int, int, str]]:
    """(base offset, last offset, records, kind) of every batch: kind is "C"/"A" (commit/abort
    marker), "c" (an emptied control batch), "t" (transactional data) or "d" (other data)."""
    out = []
    for seg, info in plog._iter_batches(plog.log_start_offset):
        buf = os.pread(seg.fd, info.size, info.position)
        if info.attributes & CONTROL_MASK:
            keys = [k for _o, _t, k, _tb, _r in cleaner._records(buf, 0, False)]
            kind = "c" if not keys else {True: "C", False: "A"}[parse_marker(keys[0])]
        else:
            kind = "t" if info.attributes & TRANSACTIONAL_MASK else "d"
        out.append((info.base_offset, info.last_offset, info.records_count, kind))
    return out


def data_offsets(plog: PartitionLog) -> list[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of every data record, as read_uncommitted shows them."""
    out = []
    for seg, info in plog._iter_batches(plog.log_start_offset):
        if info.attributes & CONTROL_MASK:
            continue
        buf = os.pread(seg.fd, info.size, info.position)
        for off, _ts, k, _tomb, raw in cleaner._records(buf, 0, True):
            out.append((off, k, _value(raw)))
    return out


def _value(raw: bytes) -> bytes | None:
    """The value of a raw record (attributes + key/value/headers bytes from cleaner._records)."""
    pos = 1
    key_len, pos = cleaner._varint_at(raw, pos)
    pos += max(key_len, 0)
    value_len, pos = cleaner._varint_at(raw, pos)
    return None if value_len < 0 else raw[pos : pos + value_len]


def index(plog: PartitionLog) -> list[tuple[int, int, int]]:
    return [(e.producer_id, e.first_offset, e.last_offset) for e in plog.aborted.entries]


def index_on_disk(plog: PartitionLog) -> list[tuple[int, int, int]]:
    return [
        (e.producer_id, e.first_offset, e.last_offset)
        for f in sorted(plog.dir.glob("*" + txnindex.SUFFIX))
        for e in txnindex.read_file(f)
    ]


def committed_view(plog: PartitionLog) -> dict[bytes, bytes]:
    """Each live key's value as a read_committed consumer reading from the start sees it: up to the
    last stable offset, skipping the batches of the aborted transactions the index lists (from their
    first offset until their producer's abort marker), tombstones deleting."""
    lso = plog.last_stable_offset
    pending = sorted(plog.aborted.overlapping(plog.log_start_offset, lso), key=lambda e: e.first_offset)
    aborting: set[int] = set()
    view: dict[bytes, bytes] = {}
    for seg, info in plog._iter_batches(plog.log_start_offset):
        if info.base_offset >= lso:
            break
        while pending and pending[0].first_offset <= info.last_offset:
            aborting.add(pending.pop(0).producer_id)
        buf = os.pread(seg.fd, info.size, info.position)
        if info.attributes & CONTROL_MASK:
            keys = [k for _o, _t, k, _tb, _r in cleaner._records(buf, 0, False)]
            if keys and parse_marker(keys[0]) is False:
                aborting.discard(info.producer_id)
            continue
        if info.attributes & TRANSACTIONAL_MASK and info.producer_id in aborting:
            continue
        for _off, _ts, k, tomb, raw in cleaner._records(buf, 0, True):
            if tomb:
                view.pop(k, None)
            else:
                view[k] = _value(raw)
    return view


def reopen(plog: PartitionLog, snapshot: bool = True) -> PartitionLog:
    """Close and open again; without ``snapshot`` producer state and the index past the .txnindex
    files are rebuilt from the (cleaned) log."""
    leo = plog.log_end_offset
    plog.close()
    if not snapshot:
        (plog.dir / "producer-state.json").unlink()
    return open_log(plog.dir, recovery_point=leo, segment_bytes=str(plog.config.segment_bytes))


def test_a_commit_marker_stays_while_its_batches_do_then_goes_after_its_delete_horizon(tmp_path):
    plog = open_log(tmp_path / "p", segment_bytes="100000")
    p = Producer(plog, P1)
    p.send((b"1", b"a"))  # 0
    p.send((b"2", b"a"), (b"3", b"a"))  # 1-2
    p.end(True)  # 3
    p.send((b"2", b"b"))  # 4
    p.end(True)  # 5
    seal(plog)
    clean(plog, T0 + 10)
    # the first commit's transaction keeps records (1 at 0, 3 at 2): its marker stays
    assert batches(plog) == [(0, 0, 1, "t"), (1, 2, 1, "t"), (3, 3, 1, "C"), (4, 4, 1, "t"), (5, 5, 1, "C")]
    p.send((b"1", b"c"), (b"3", b"c"))  # 6-7
    p.end(True)  # 8
    seal(plog)
    clean(plog, T0 + 20)
    # the first transaction's batches go now, but were read in this pass: its marker stays
    assert [(b, k) for b, _l, _n, k in batches(plog)] == [(3, "C"), (4, "t"), (5, "C"), (6, "t"), (8, "C")]
    assert batches(plog)[0][2] == 1
    marker = next(i for i in plog.iter_headers(3) if i.base_offset == 3)
    assert not marker.attributes & cleaner.DELETE_HORIZON_MASK
    # nothing of it is read any more: the marker gets its delete horizon (base timestamp) and stays
    clean(plog, T0 + 30)
    marker = next(i for i in plog.iter_headers(3) if i.base_offset == 3)
    assert marker.attributes & cleaner.DELETE_HORIZON_MASK and marker.base_timestamp == T0 + 30 + DAY
    assert marker.records_count == 1
    clean(plog, T0 + 30 + DAY - 1)  # before the horizon: still there
    assert batches(plog)[0][:3] == (3, 3, 1)
    result = clean(plog, T0 + 30 + DAY)
    assert result.markers_dropped == 1
    assert [(b, k) for b, _l, _n, k in batches(plog)] == [(4, "t"), (5, "C"), (6, "t"), (8, "C")]
    assert committed_view(plog) == {b"1": b"c", b"2": b"b", b"3": b"c"}


def test_aborted_records_go_their_marker_and_index_entry_stay_until_no_batch_is_left(tmp_path):
    plog = open_log(tmp_path / "p", segment_bytes="100000")
    p = Producer(plog, P1)
    plain(plog, b"k", b"committed")  # 0
    p.send((b"k", b"aborted"), (b"j", b"aborted"))  # 1-2
    p.end(False)  # 3
    p.send((b"x", b"1"))  # 4
    p.send((b"x", b"2"))  # 5
    p.end(True)  # 6
    seal(plog)
    assert index(plog) == [(P1, 1, 3)]
    result = clean(plog, T0 + 10)
    assert result.aborted_dropped == 2
    # the aborted records are gone and never superseded k's committed value; the abort marker stays
    # while a batch of its transaction was read in the pass, and so does its index entry
    assert batches(plog) == [(0, 0, 1, "d"), (3, 3, 1, "A"), (5, 5, 1, "t"), (6, 6, 1, "C")]
    assert data_offsets(plog) == [(0, b"k", b"committed"), (5, b"x", b"2")]
    assert index(plog) == index_on_disk(plog) == [(P1, 1, 3)]
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in result.aborted] == [(P1, 1, 3)]
    # next pass: nothing of the transaction is left, so its entry goes and its marker gets a horizon
    clean(plog, T0 + 20)
    assert index(plog) == index_on_disk(plog) == []
    assert not list(plog.dir.glob("*" + txnindex.SUFFIX))
    assert batches(plog)[1] == (3, 3, 1, "A")
    clean(plog, T0 + 20 + DAY)
    assert batches(plog) == [(0, 0, 1, "d"), (5, 5, 1, "t"), (6, 6, 1, "C")]
    assert committed_view(plog) == {b"k": b"committed", b"x": b"2"}
    again = reopen(plog, snapshot=False)
    assert index(again) == [] and committed_view(again) == {b"k": b"committed", b"x": b"2"}
    again.close()


def test_an_aborted_last_batch_of_a_producer_stays_empty_with_its_marker_and_entry(tmp_path):
    plog = open_log(tmp_path / "p", segment_bytes="100000")
    p = Producer(plog, P1, epoch=4)
    p.send((b"k", b"v"))  # 0
    p.end(True)  # 1
    p.send((b"k", b"w"), (b"j", b"w"))  # 2-3, sequences 1-2
    p.end(False)  # 4
    plain(plog, b"z", b"1")  # 5
    seal(plog)
    for now in (T0 + 10, T0 + 20, T0 + 10 * DAY):
        clean(plog, now)
        # kept empty: the producer's last sequence; its abort marker (the batch is read every pass)
        assert batches(plog) == [
            (0, 0, 1, "t"),
            (1, 1, 1, "C"),
            (2, 3, 0, "t"),
            (4, 4, 1, "A"),
            (5, 5, 1, "d"),
        ]
        assert index(plog) == index_on_disk(plog) == [(P1, 2, 4)]
    empty = next(i for i in plog.iter_headers(2) if i.base_offset == 2)
    assert (empty.producer_id, empty.producer_epoch, empty.base_sequence, empty.last_sequence) == (
        P1,
        4,
        1,
        2,
    )
    assert committed_view(plog) == {b"k": b"v", b"z": b"1"}
    # producer state rebuilt from the cleaned log: a retry of the aborted batch is a duplicate
    again = reopen(plog, snapshot=False)
    entry = again.producers.producers[P1]
    assert (entry.epoch, entry.last_seq) == (4, 2)
    retry = bytearray(build_batch([(b"k", b"w"), (b"j", b"w")], base_timestamp=T0, producer_id=P1,
                                  producer_epoch=4, base_sequence=1, transactional=True))  # fmt: skip
    dup = again.producers.check(validate_produce(retry)[0])
    assert dup is not None and (dup.base_offset, dup.last_offset) == (2, 3)
    assert index(again) == [(P1, 2, 4)]
    # once the producer writes again, the empty batch goes; then the marker, after its horizon
    q = Producer(again, P1, epoch=4)
    q.seq = 3
    q.send((b"y", b"1"))  # 6
    q.end(True)  # 7
    seal(again)
    clean(again, T0 + 11 * DAY)
    # the empty batch went in this pass, so its marker and entry stay one more
    assert [(b, k) for b, _l, _n, k in batches(again)] == [
        (0, "t"),
        (1, "C"),
        (4, "A"),
        (5, "d"),
        (6, "t"),
        (7, "C"),
    ]
    assert index(again) == index_on_disk(again) == [(P1, 2, 4)]
    clean(again, T0 + 11 * DAY)
    assert index(again) == index_on_disk(again) == []
    clean(again, T0 + 12 * DAY)
    assert [(b, k) for b, _l, _n, k in batches(again)] == [(0, "t"), (1, "C"), (5, "d"), (6, "t"), (7, "C")]
    again.close()


def test_a_marker_of_a_bumped_epoch_with_no_data_stays_empty_for_fencing(tmp_path):
    plog = open_log(tmp_path / "p", segment_bytes="100000")
    p = Producer(plog, P1)
    p.send((b"k", b"v"))  # 0
    p.end(False, epoch=1)  # 1: KIP-890, the marker bumps the epoch; no data batch of epoch 1
    plain(plog, b"k", b"w")  # 2
    seal(plog)
    clean(plog, T0)
    clean(plog, T0)  # the marker has nothing left: horizon
    clean(plog, T0 + DAY)  # past it: the marker's record goes, its batch stays (the epoch)
    assert batches(plog) == [(1, 1, 0, "c"), (2, 2, 1, "d")]
    again = reopen(plog, snapshot=False)
    assert again.producers.producers[P1].epoch == 1
    clean(again, T0 + 2 * DAY)  # an emptied control batch is not touched again
    assert batches(again) == [(1, 1, 0, "c"), (2, 2, 1, "d")]
    # the producer writes in its new epoch: its empty marker is no longer needed and goes
    q = Producer(again, P1, epoch=1)
    q.send((b"j", b"1"))  # 3
    q.end(True)  # 4
    seal(again)
    clean(again, T0 + 2 * DAY)
    assert batches(again) == [(2, 2, 1, "d"), (3, 3, 1, "t"), (4, 4, 1, "C")]
    again.close()


def test_nothing_at_or_above_the_last_stable_offset_is_cleaned(tmp_path):
    plog = open_log(tmp_path / "p", segment_bytes="100000")
    p1, p2 = Producer(plog, P1), Producer(plog, P2)
    p1.send((b"k", b"v1"))  # 0
    p1.end(True)  # 1
    seal(plog)
    p2.send((b"k", b"open"), (b"t", b"open"))  # 2-3: left open
    plain(plog, b"k", b"v3")  # 4
    plain(plog, b"t", None)  # 5
    seal(plog)
    plain(plog, b"k", b"v6")  # 6
    seal(plog)
    assert plog.last_stable_offset == 2
    todo = cleaner.to_clean(plog, 0, T0 + 10 * DAY)
    assert (todo.start, todo.end) == (0, 2)
    before = batches(plog)
    clean(plog, T0 + 10 * DAY)
    # the range ends where the open transaction's segment starts: k's value at 0 stays
    assert batches(plog) == before
    assert cleaner.read_checkpoint(plog.dir) == 2
    p2.end(False)  # 7: the open transaction aborts
    seal(plog)
    assert plog.last_stable_offset == plog.high_watermark
    clean(plog, T0 + 10 * DAY)
    # k's latest is 6; the aborted batch (P2's last: kept empty) was read, so its marker stays;
    # P1's superseded batch stays empty (its last), with its commit marker; t's tombstone stays
    assert [(b, n, k) for b, _l, n, k in batches(plog)] == [
        (0, 0, "t"), (1, 1, "C"), (2, 0, "t"), (5, 1, "d"), (6, 1, "d"), (7, 1, "A"),
    ]  # fmt: skip
    assert committed_view(plog) == {b"k": b"v6"}
    assert index(plog) == index_on_disk(plog) == [(P2, 2, 7)]


def test_the_lso_in_the_first_segment_leaves_nothing_to_clean(tmp_path):
    plog = open_log(tmp_path / "p", segment_bytes="100000")
    Producer(plog, P1).send((b"k", b"v"))
    plain(plog, b"k", b"w")
    seal(plog)
    plain(plog, b"k", b"x")
    seal(plog)
    assert cleaner.to_clean(plog, 0, T0 + DAY) is None


def test_tombstones_in_a_transaction_follow_the_delete_horizon(tmp_path):
    plog = open_log(tmp_path / "p", segment_bytes="100000")
    p = Producer(plog, P1)
    p.send((b"k", b"v"), (b"j", b"v"))  # 0-1
    p.send((b"k", None))  # 2
    p.end(True)  # 3
    seal(plog)
    clean(plog, T0 + 10)
    tomb = next(i for i in plog.iter_headers(2) if i.base_offset == 2)
    assert tomb.attributes & cleaner.DELETE_HORIZON_MASK and tomb.base_timestamp == T0 + 10 + DAY
    assert tomb.attributes & TRANSACTIONAL_MASK and tomb.records_count == 1
    assert committed_view(plog) == {b"j": b"v"}
    clean(plog, T0 + 10 + DAY)
    # the tombstone went; its batch is the producer's last (kept empty), so the marker stays too
    assert batches(plog) == [(0, 1, 1, "t"), (2, 2, 0, "t"), (3, 3, 1, "C")]
    assert committed_view(plog) == {b"j": b"v"}


def test_transactions_spanning_segments_and_the_index_of_the_cleaned_range(tmp_path):
    """An aborted transaction whose marker lies beyond the range: its batches in the range go, its
    entry stays in the marker's segment's index; interleaved producers' batches are told apart."""
    plog = open_log(tmp_path / "p", segment_bytes="100000")
    p1, p2, p3 = Producer(plog, P1), Producer(plog, P2), Producer(plog, P3)
    p1.send((b"a", b"1-aborted"))  # 0
    p2.send((b"a", b"2"))  # 1
    p3.send((b"b", b"3-aborted"))  # 2
    p2.end(True)  # 3
    seal(plog)
    p1.send((b"c", b"1-aborted"))  # 4
    p3.end(False)  # 5
    p1.end(False)  # 6
    p1.send((b"d", b"1"))  # 7
    p1.end(True)  # 8
    p3.send((b"e", b"3"))  # 9
    p3.end(True)  # 10
    seal(plog)
    plain(plog, b"z", b"z")  # 11
    seal(plog)
    assert index(plog) == [(P3, 2, 5), (P1, 0, 6)]
    before = committed_view(plog)
    # only the first segment: P1's and P3's aborted batches there go; their markers are beyond it
    todo = cleaner.to_clean(plog, 0, T0)
    result = cleaner.filter_work(plog, cleaner.ToClean(0, 4, todo.segs[:1], 0, 1.0, False, 0), T0)()
    assert plog.install_cleaned(result, todo.segs[:1])
    cleaner.write_checkpoint(plog.dir, 4)
    assert result.aborted is None  # no marker in the range: the index is left as it was
    assert [(b, k) for b, _l, _n, k in batches(plog)][:2] == [(1, "t"), (3, "C")]
    assert index(plog) == index_on_disk(plog) == [(P3, 2, 5), (P1, 0, 6)]
    assert committed_view(plog) == before
    # the whole log: P1's batch at 4 goes; both abort markers saw batches of theirs in this pass
    clean(plog, T0)
    assert [(b, k) for b, _l, _n, k in batches(plog)] == [
        (1, "t"), (3, "C"), (5, "A"), (6, "A"), (7, "t"), (8, "C"), (9, "t"), (10, "C"), (11, "d"),
    ]  # fmt: skip
    assert index(plog) == index_on_disk(plog) == [(P1, 0, 6)]  # P3's range [2, 5] had no batch left
    assert committed_view(plog) == before
    clean(plog, T0)
    clean(plog, T0 + DAY)
    assert [(b, k) for b, _l, _n, k in batches(plog)] == [
        (1, "t"),
        (3, "C"),
        (7, "t"),
        (8, "C"),
        (9, "t"),
        (10, "C"),
        (11, "d"),
    ]
    assert index(plog) == index_on_disk(plog) == []
    assert committed_view(plog) == before == {b"a": b"2", b"d": b"1", b"e": b"3", b"z": b"z"}


@pytest.mark.parametrize("seed", range(8))
def test_random_interleaved_transactions_keep_the_read_committed_view(tmp_path, seed):
    """Random histories of three transactional producers (commits, aborts, tombstones, one left
    open at times) and plain writes; after every pass (the clock jumping past delete.retention.ms
    now and then) a read_committed reader sees the same live keys, no aborted record is left
    below the last stable offset, and a reopen (with and without the producer snapshot) rebuilds
    the same producer sequences and the same index, on disk as in memory."""
    rng = random.Random(seed)
    plog = open_log(tmp_path / "p", segment_bytes=str(rng.choice([300, 800, 100_000])))
    producers = [Producer(plog, pid) for pid in (P1, P2, P3)]
    open_txn: dict[int, list[int]] = {}  # pid -> offsets written in its open transaction
    aborted_offsets: set[int] = set()
    now = T0

    def key() -> bytes:
        return f"k{rng.randrange(10)}".encode()

    for _round in range(4):
        for _ in range(rng.randint(10, 30)):
            now += rng.randint(0, 1000)
            r = rng.random()
            p = rng.choice(producers)
            if r < 0.45:
                recs = [
                    (key(), None if rng.random() < 0.15 else f"{p.pid}-{now}".encode())
                    for _ in range(rng.randint(1, 3))
                ]
                base = p.send(*recs, ts=now)
                open_txn.setdefault(p.pid, []).extend(range(base, base + len(recs)))
            elif r < 0.7 and p.pid in open_txn:
                commit = rng.random() < 0.6
                if not commit:
                    aborted_offsets.update(open_txn[p.pid])
                del open_txn[p.pid]
                p.end(commit, ts=now)
            else:
                plain(plog, key(), None if rng.random() < 0.1 else f"plain-{now}".encode(), ts=now)
            if rng.random() < 0.1 and plog.active.size:
                seal(plog)
        if plog.active.size:
            seal(plog)
        before = committed_view(plog)
        lso_before = plog.last_stable_offset
        above = [b for b in batches(plog) if b[0] >= lso_before]
        for _ in range(2):
            now += rng.choice([0, 1, DAY, 2 * DAY])
            clean(plog, now)
            assert committed_view(plog) == before
            assert [b for b in batches(plog) if b[0] >= lso_before] == above
            left = {off for off, _k, _v in data_offsets(plog)}
            assert not {o for o in aborted_offsets if o < cleaner.read_checkpoint(plog.dir)} & left
            assert index(plog) == index_on_disk(plog)
        seqs = {pid: (e.epoch, e.last_seq) for pid, e in plog.producers.producers.items()}
        ongoing = dict(plog.producers.ongoing)
        want_index = index(plog)
        plog = reopen(plog, snapshot=rng.random() < 0.5)
        for p in producers:
            p.plog = plog
        assert {pid: (e.epoch, e.last_seq) for pid, e in plog.producers.producers.items()} == seqs
        assert plog.producers.ongoing == ongoing
        # rebuilt past the snapshot: entries of transactions left with no batch may come back, or
        # start at the first batch left (harmless: nothing of theirs is left to skip); none is lost
        assert {(pid, last) for pid, _f, last in want_index} <= {(pid, last) for pid, _f, last in index(plog)}
        assert committed_view(plog) == before
    plog.close()


TXN_STEPS = [
    "cleaned-written",
    "txnindex-committed",
    "swap-committed",
    "old-files-deleted",
    "txnindex-renamed",
    "renamed",
]


@pytest.mark.parametrize("step", TXN_STEPS)
def test_a_crash_at_any_step_leaves_the_old_log_and_index_or_the_new_ones(tmp_path, step):
    """SIGKILL between any two file operations of a pass that changes the index: after the restart
    the log and its .txnindex are both the old ones or both the new ones, never a mix."""
    directory = tmp_path / "p"
    plog = open_log(directory, segment_bytes="250")
    p1, p2 = Producer(plog, P1), Producer(plog, P2)
    p1.send((b"a", b"x" * 60))  # 0: goes; P1 writes again later
    p2.send((b"b", b"y" * 60))  # 1: P2's last batch: stays, empty
    p1.end(False)  # 2
    p2.end(False)  # 3
    p1.send((b"c", b"1"))  # 4
    p1.end(True)  # 5
    plain(plog, b"d", b"1")  # 6
    seal(plog)
    assert len(plog.segments) > 3
    clean(plog, T0)  # both transactions had batches in this pass: both markers and entries stay
    old_index = [(P1, 0, 2), (P2, 1, 3)]
    assert index(plog) == index_on_disk(plog) == old_index
    view = committed_view(plog)
    # the next pass: P1's aborted transaction has nothing left (entry dropped, marker gets a horizon)
    todo = cleaner.to_clean(plog, cleaner.read_checkpoint(plog.dir), T0 + 1)
    result = cleaner.filter_work(plog, todo, T0 + 1)()
    name = cleaner.range_name(todo.start, todo.end)
    if step != "cleaned-written":
        os.replace(directory / (name + cleaner.TXN_CLEANED), directory / (name + cleaner.TXN_SWAP))
    if step not in ("cleaned-written", "txnindex-committed"):
        os.replace(result.path, directory / (name + cleaner.SWAP))
    if step in ("old-files-deleted", "txnindex-renamed"):
        for p in directory.iterdir():
            if p.suffix in (".log", ".index", txnindex.SUFFIX) and todo.start <= int(p.stem) < todo.end:
                p.unlink()
    if step == "txnindex-renamed":
        os.replace(
            directory / (name + cleaner.TXN_SWAP),
            directory / (cleaner.segment_name(todo.start) + ".txnindex"),
        )
    if step == "renamed":
        cleaner.finish_swap(directory / (name + cleaner.SWAP))
    leo = plog.log_end_offset
    for seg in plog.segments:  # the process dies: nothing more is written
        seg.close()
    again = open_log(directory, recovery_point=leo, segment_bytes="250")
    marker = next(i for i in again.iter_headers(2) if i.base_offset == 2)
    new = step not in ("cleaned-written", "txnindex-committed")
    assert bool(marker.attributes & cleaner.DELETE_HORIZON_MASK) == new
    assert index(again) == index_on_disk(again) == ([(P2, 1, 3)] if new else old_index)
    assert committed_view(again) == view
    assert not [
        p.name for p in directory.iterdir() if p.suffix in (".cleaned", ".swap", ".txncleaned", ".txnswap")
    ]
    again.close()
