"""The group-commit journal (log.flush.journal): its file format, torn tails and damage, the replay
plan, and the LogManager's use of it -- one fdatasync a group commit, the background sync that
rotates, syncs the segments, advances the checkpoint and deletes what it covered, and the start-up
replay after a crash that lost the segments' unsynced tails."""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.config import Config
from broker.log import journal as jmod
from broker.log import manager as manager_module
from broker.log import records
from broker.log.batch import validate_produce
from broker.log.journal import (
    APPEND,
    TRUNCATE,
    Entry,
    Journal,
    encode_entry,
    journal_files,
    plan,
    read_entries,
)
from broker.log.journal import (
    PREFIX as JOURNAL_PREFIX,
)
from broker.log.manager import CHECKPOINT, LogManager, StorageError, read_checkpoint

NOW = 1_700_000_000_000
TID = uuid.uuid4()


#: every group commit writes the journal, however few partitions it covers
EVERY_COMMIT = {"log.flush.journal.min.partitions": "1"}


def manager(tmp_path, topic_id: uuid.UUID | None = TID, **conf) -> LogManager:
    conf = {**EVERY_COMMIT, **conf}
    c = Config({"log.dirs": str(tmp_path), "log.flush": "interval", **{k: str(v) for k, v in conf.items()}})
    m = LogManager(tmp_path, c)
    m.topic_id_of = lambda _name: topic_id
    return m


def append(m: LogManager, plog, value: bytes = b"v", **batch):
    data = bytearray(records.simple_batch([value], **batch))
    base = plog.append(data, validate_produce(data), NOW)
    return base, m.appended(plog)


def values(plog) -> list[tuple[int, bytes]]:
    """(offset, value) of every record below the high watermark."""
    return [(r[0], r[3]) for r in records.iter_records(plog.read(0, 1 << 30))]


def crash(m: LogManager) -> None:
    """Stop as SIGKILL would: nothing closed cleanly, no checkpoint, no marker, no index written."""
    for plog in m.logs.values():
        if plog.opened:
            for seg in plog.segments:
                seg.close()
    if m.journal is not None:
        m.journal.close()
    for pool in (m._executor, m._flushers, m._syncer):
        pool.shutdown(wait=True)
    if m._syncfs_fd is not None:
        os.close(m._syncfs_fd)


def lose_segment_tails(tmp_path, topic: str = "t") -> int:
    """A power loss that kept none of the segments' unsynced bytes (the checkpoint says 0 of them)."""
    cut = 0
    for d in tmp_path.iterdir():
        if d.is_dir() and d.name.startswith(f"{topic}-"):
            for f in d.glob("*.log"):
                cut += f.stat().st_size
                f.write_bytes(b"")
    return cut


async def restart(tmp_path, topic_id: uuid.UUID | None = TID, partitions: int = 2, **conf) -> LogManager:
    m = manager(tmp_path, topic_id, **conf)
    m.open_topic("t", partitions, {})
    m.started()
    return m


# ---------------------------------------------------------------------------------- file format


def write_file(path, entries: list[list]) -> None:
    with open(path, "wb") as f:
        f.write(jmod.FILE_MAGIC)
        for bufs in entries:
            for b in bufs:
                f.write(b)


def test_entries_read_back_as_written(tmp_path):
    batch = records.simple_batch([b"a", b"b"], base_offset=7)
    path = tmp_path / jmod.file_name(1)
    write_file(
        path,
        [
            encode_entry(APPEND, TID.bytes, "tópico", 3, 7, batch),
            encode_entry(TRUNCATE, TID.bytes, "t", 0, 5),
        ],
    )
    entries, torn = read_entries(path)
    assert torn == 0
    assert entries == [
        Entry(APPEND, TID.bytes, "tópico", 3, 7, batch),
        Entry(TRUNCATE, TID.bytes, "t", 0, 5, b""),
    ]
    head = path.read_bytes()[8 : 8 + jmod.ENTRY.size]
    length, _crc, kind, offset, tid, partition, name_len = jmod.ENTRY.unpack(head)
    assert (length, kind, tid, partition, offset, name_len) == (
        jmod.ENTRY.size - 8 + len("tópico".encode()) + len(batch),
        APPEND,
        TID.bytes,
        3,
        7,
        len("tópico".encode()),
    )


def test_a_torn_tail_ends_the_file_at_the_last_whole_entry(tmp_path):
    first = encode_entry(APPEND, TID.bytes, "t", 0, 0, records.simple_batch([b"x"]))
    second = encode_entry(APPEND, TID.bytes, "t", 0, 1, records.simple_batch([b"y"], base_offset=1))
    whole = jmod.FILE_MAGIC + b"".join(first) + b"".join(second)
    path = tmp_path / jmod.file_name(1)
    start = len(jmod.FILE_MAGIC) + sum(len(b) for b in first)
    for cut in range(start, len(whole)):
        path.write_bytes(whole[:cut])
        entries, torn = read_entries(path)
        assert [e.offset for e in entries] == [0], cut
        assert torn == cut - start


def test_a_damaged_entry_ends_the_file_there(tmp_path):
    bufs = [
        encode_entry(APPEND, TID.bytes, "t", 0, i, records.simple_batch([b"v%d" % i], base_offset=i))
        for i in range(3)
    ]
    whole = bytearray(jmod.FILE_MAGIC + b"".join(b"".join(b) for b in bufs))
    middle = len(jmod.FILE_MAGIC) + len(b"".join(bufs[0])) + 40
    whole[middle] ^= 0xFF
    path = tmp_path / jmod.file_name(1)
    path.write_bytes(bytes(whole))
    entries, torn = read_entries(path)
    assert [e.offset for e in entries] == [0] and torn > 0
    path.write_bytes(b"not a journal")
    assert read_entries(path) == ([], len(b"not a journal"))


def test_writes_go_through_writev_in_chunks_and_rotation_numbers_files(tmp_path):
    j = Journal(tmp_path)
    j.open()
    many = []
    for i in range(1500):  # more buffers than one writev takes
        many += encode_entry(APPEND, TID.bytes, "t", 0, i, records.simple_batch([b"%d" % i], base_offset=i))
    j.write(many)
    assert j.rotate() == 1 and j.seq == 2
    j.write(encode_entry(TRUNCATE, TID.bytes, "t", 0, 3))
    entries = list(jmod.iter_entries(tmp_path))
    assert [s for s, _e in entries] == [1] * 1500 + [2]
    assert [e.offset for _s, e in entries][:3] == [0, 1, 2]
    assert j.delete_through(1) == 1
    assert [s for s, _p in journal_files(tmp_path)] == [2]
    j.close()


def direct_journal(tmp_path) -> Journal:
    j = Journal(tmp_path)
    j.open()
    if not j.direct:
        j.close()
        pytest.skip(
            f"the file system of {tmp_path} refuses direct I/O (the buffered path is tested elsewhere)"
        )
    return j


def entries_of(n: int, start: int = 0, size: int = 1) -> list:
    """The buffers of ``n`` appends of one record each (offsets from ``start``, values ``size`` times
    their offset's digits)."""
    bufs = []
    for i in range(start, start + n):
        batch = records.simple_batch([b"%d" % i * size], base_offset=i, base_timestamp=NOW)
        bufs += encode_entry(APPEND, TID.bytes, "t", 0, i, batch)
    return bufs


def test_a_direct_journal_writes_whole_blocks_and_reads_back_every_entry(tmp_path):
    j = direct_journal(tmp_path)
    path = tmp_path / jmod.file_name(j.seq)
    assert j.empty and path.stat().st_size == jmod.BLOCK  # the magic, padded to a block
    j.write(entries_of(3))
    assert not j.empty and j.size == path.stat().st_size and j.size % jmod.BLOCK == 0
    j.write(entries_of(2, start=3))
    assert j.size == path.stat().st_size == 3 * jmod.BLOCK  # each commit starts a block
    entries, torn = read_entries(path)
    assert [e.offset for e in entries] == [0, 1, 2, 3, 4] and torn == 0
    assert entries[4].data == records.simple_batch([b"4"], base_offset=4, base_timestamp=NOW)
    j.close()


def entry_of_size(offset: int, size: int) -> list:
    """The buffers of one append at ``offset`` whose entry is exactly ``size`` bytes."""
    for n in range(max(0, size - 120), size):
        bufs = encode_entry(
            APPEND, TID.bytes, "t", 0, offset, records.simple_batch([b"x" * n], base_offset=offset)
        )
        if sum(len(b) for b in bufs) == size:
            return bufs
    raise AssertionError(f"no entry of {size} bytes")


@pytest.mark.parametrize("gap", [1, 2, 3])
@pytest.mark.parametrize("value", [10, 300, 70_000, 1 << 24])
def test_padding_shorter_than_a_length_field_does_not_end_the_file(tmp_path, gap, value):
    # A direct commit ending 1-3 bytes before a block boundary is padded with as many zeros; the
    # length field read there runs into the next commit's first entry (a value of 300 bytes makes
    # its length's third byte non-zero, 70,000 its second, 16 MB its first). Reading that as a torn
    # tail dropped every later entry of the file: acknowledged appends a replay never brought back.
    block = jmod.BLOCK
    first = b"".join(entry_of_size(0, block - gap))
    batch = records.simple_batch([b"y" * value], base_offset=1, base_timestamp=NOW)
    second = b"".join(encode_entry(APPEND, TID.bytes, "t", 0, 1, batch))
    whole = jmod.FILE_MAGIC + bytes(block - len(jmod.FILE_MAGIC)) + first + bytes(gap) + second
    path = tmp_path / jmod.file_name(1)
    path.write_bytes(whole + bytes(-len(whole) % block))
    entries, torn = read_entries(path)
    assert [e.offset for e in entries] == [0, 1] and torn == 0
    assert entries[1].data == batch
    # an entry of the same commit may start 1-3 bytes before the boundary: it is read as an entry
    third = b"".join(entry_of_size(2, 200))
    path.write_bytes(jmod.FILE_MAGIC + bytes(block - len(jmod.FILE_MAGIC)) + first + third + second)
    entries, torn = read_entries(path)
    assert [e.offset for e in entries] == [0, 2, 1] and torn == 0


def test_a_damaged_entry_at_a_block_boundary_ends_the_file_there(tmp_path):
    # a direct commit's first entry starts at a block boundary: damage there is the end of what the
    # file holds, like damage anywhere else (and no padding to skip: nothing before it to read past)
    j = direct_journal(tmp_path)
    j.write(entries_of(2, size=50))
    second = j.size  # the next commit starts at this block boundary
    j.write(entries_of(2, start=2, size=50))
    path = tmp_path / jmod.file_name(j.seq)
    j.close()
    whole = bytearray(path.read_bytes())
    for damaged in (jmod.BLOCK + 30, second + 30, second):  # crc or header of a commit's first entry
        content = bytearray(whole)
        content[damaged] ^= 0xFF
        path.write_bytes(bytes(content))
        entries, torn = read_entries(path)
        assert [e.offset for e in entries] == ([] if damaged < second else [0, 1]), damaged
        assert torn > 0


@pytest.fixture(scope="module")
def direct_file(tmp_path_factory) -> bytes:
    """The bytes of a direct journal file of four commits of three entries each."""
    d = tmp_path_factory.mktemp("direct")
    j = direct_journal(d)
    for start in range(0, 12, 3):
        j.write(entries_of(3, start=start, size=97))
    j.close()
    return (d / jmod.file_name(j.seq)).read_bytes()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    damage=st.lists(
        # (commit, byte of it, xor mask): each commit's ~600 bytes of entries start a block
        st.tuples(st.integers(1, 4), st.integers(0, 700), st.integers(1, 255)),
        min_size=1,
        max_size=4,
    )
)
def test_a_damaged_direct_file_reads_as_some_of_its_entries_in_order(tmp_path, direct_file, damage):
    # whatever bytes are damaged, the reader ends (no position is read twice) and returns only
    # entries that were written, in the order they were written
    path = tmp_path / jmod.file_name(1)
    path.write_bytes(direct_file)
    written, _ = read_entries(path)
    assert [e.offset for e in written] == list(range(12))
    content = bytearray(direct_file)
    for block, offset, mask in damage:
        content[block * jmod.BLOCK + offset] ^= mask
    path.write_bytes(bytes(content))
    entries, _torn = read_entries(path)
    offsets = [e.offset for e in entries]
    assert offsets == sorted(set(offsets)) and all(e in written for e in entries)


@pytest.mark.parametrize("gap,size", [(1, 400), (2, 70_000), (3, 400)])
def test_a_direct_commit_ending_just_before_a_block_boundary_keeps_the_next_commit(tmp_path, gap, size):
    j = direct_journal(tmp_path)
    j.write(entry_of_size(0, jmod.BLOCK - gap))
    j.write(entries_of(3, start=1, size=size))
    j.write(entries_of(1, start=4))
    entries, torn = read_entries(tmp_path / jmod.file_name(j.seq))
    assert [e.offset for e in entries] == [0, 1, 2, 3, 4] and torn == 0
    j.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    commits=st.lists(
        st.tuples(st.lists(st.integers(0, 3000), max_size=4), st.integers(0, 8)), min_size=1, max_size=6
    )
)
def test_direct_commits_ending_anywhere_in_a_block_read_back_whole(tmp_path_factory, commits):
    # each commit: appends of random value sizes, then one sized to end it ``gap`` bytes before a
    # block boundary (0: on it); every entry of every commit must read back, in order
    j = direct_journal(tmp_path_factory.mktemp("j"))
    offset = 0
    for sizes, gap in commits:
        bufs = []
        for n in sizes:
            batch = records.simple_batch([b"v" * n], base_offset=offset, base_timestamp=NOW)
            bufs += encode_entry(APPEND, TID.bytes, "t", 0, offset, batch)
            offset += 1
        filler = -(sum(len(b) for b in bufs) + gap) % jmod.BLOCK
        bufs += entry_of_size(offset, filler if filler >= 200 else filler + jmod.BLOCK)
        offset += 1
        j.write(bufs)
    entries, torn = read_entries(j.directory / jmod.file_name(j.seq))
    j.close()
    assert [e.offset for e in entries] == list(range(offset)) and torn == 0


def test_a_direct_commit_larger_than_the_buffer_is_written_in_parts(tmp_path, monkeypatch):
    monkeypatch.setattr(jmod, "STAGE_BYTES", 2 * jmod.BLOCK)
    j = direct_journal(tmp_path)
    j.write(entries_of(40, size=300))  # ~12 KB of entries, each about 300 bytes: parts cut entries
    j.write(entries_of(1, start=40))  # a small commit after a large one: no stale bytes after it
    entries, torn = read_entries(tmp_path / jmod.file_name(j.seq))
    assert [e.offset for e in entries] == list(range(41)) and torn == 0
    assert entries[39].data == records.simple_batch([b"39" * 300], base_offset=39, base_timestamp=NOW)
    j.close()


def test_a_torn_direct_commit_ends_the_file_at_the_last_whole_entry(tmp_path):
    j = direct_journal(tmp_path)
    j.write(entries_of(1))
    j.write(entries_of(30, start=1, size=400))
    path = tmp_path / jmod.file_name(j.seq)
    j.close()
    whole = path.read_bytes()
    # a crash in the second commit's write: one of its blocks never reached the disk (reads as zeros)
    torn = whole[: 3 * jmod.BLOCK] + bytes(jmod.BLOCK) + whole[4 * jmod.BLOCK :]
    path.write_bytes(torn)
    entries, tail = read_entries(path)
    offsets = [e.offset for e in entries]
    assert offsets == list(range(len(offsets))) and 1 < len(offsets) < 31 and tail > 0


def test_a_file_system_refusing_direct_io_gets_buffered_files(tmp_path, monkeypatch):
    real_open = os.open

    def no_direct(path, flags, *a):
        if flags & os.O_DIRECT:
            raise OSError(22, "Invalid argument")
        return real_open(path, flags, *a)

    monkeypatch.setattr(os, "open", no_direct)
    j = Journal(tmp_path)
    j.open()
    assert not j.direct and j.empty and j.size == len(jmod.FILE_MAGIC)
    j.write(entries_of(2))
    assert [e.offset for _s, e in jmod.iter_entries(tmp_path)] == [0, 1]
    j.close()


def test_direct_writes_refused_after_the_open_fall_back_without_losing_the_commit(tmp_path, monkeypatch):
    j = direct_journal(tmp_path)
    first = j.seq
    j.write(entries_of(1))
    real_pwrite = os.pwrite

    def refusing(fd, data, at):
        if fd == j.fd and at > 0:
            raise OSError(22, "Invalid argument")
        return real_pwrite(fd, data, at)

    monkeypatch.setattr(os, "pwrite", refusing)
    j.write(entries_of(2, start=1))  # the commit goes to a new, buffered file
    assert not j.direct and j.seq == first + 1
    j.write(entries_of(1, start=3))
    assert [(s, e.offset) for s, e in jmod.iter_entries(tmp_path)] == [
        (first, 0),
        (first + 1, 1),
        (first + 1, 2),
        (first + 1, 3),
    ]
    j.close()


def test_direct_io_can_be_turned_off(tmp_path):
    m = manager(tmp_path, **{"log.flush.journal.direct": "false"})
    assert not m.journal_direct
    j = Journal(tmp_path, direct=False)
    j.open()
    assert not j.direct and j.size == len(jmod.FILE_MAGIC)
    j.close()


# ---------------------------------------------------------------------------------- replay plan


def span(base: int, n: int, tag: bytes = b"") -> Entry:
    batches = b"".join(records.simple_batch([tag + b"%d" % i], base_offset=base + i) for i in range(n))
    return Entry(APPEND, TID.bytes, "t", 0, base, batches)


def test_plan_applies_truncations_to_what_came_before_them_only():
    a, t, b = span(0, 10), Entry(TRUNCATE, TID.bytes, "t", 0, 5, b""), span(5, 3, b"new")
    floor, spans = plan([a, t, b])
    assert floor == 5
    assert [(s[0], s[1]) for s in spans] == [(0, 5), (5, 8)]
    assert spans[0][2] == a.data[: len(spans[0][2])] and len(jmod.batch_ends(spans[0][2])) == 5
    assert spans[1][2] == b.data
    # written again after a failed write (same offsets): the later copy is the one kept
    again = span(2, 2, b"again")
    floor, spans = plan([span(0, 2), span(2, 2, b"old"), again])
    assert floor is None and [(s[0], s[1], s[2]) for s in spans][1] == (2, 4, again.data)


# ---------------------------------------------------------------------------------- the manager


async def test_a_group_commit_is_one_fdatasync_of_the_journal_and_syncs_no_segment(tmp_path, monkeypatch):
    m = manager(tmp_path)
    m.open_topic("t", 50, {})
    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(fd), real(fd))[1])
    futs = {append(m, m.get("t", p), b"%d" % p)[1] for p in range(50)}
    await asyncio.wait_for(asyncio.gather(*futs), 10)
    assert len(synced) == 1 and synced[0] == m.journal.fd
    for p in range(50):
        plog = m.get("t", p)
        assert plog.high_watermark == 1 and plog.active.synced_size == 0
    # the checkpoint claims only what the segments hold synced: nothing yet
    m.write_checkpoint()
    assert set(read_checkpoint(tmp_path / CHECKPOINT).values()) == {0}
    await m.close()
    assert journal_files(tmp_path) == []  # a clean stop synced the segments: nothing to replay


async def test_the_background_sync_rotates_syncs_checkpoints_and_deletes_what_it_covered(tmp_path):
    m = manager(tmp_path)
    m.open_topic("t", 2, {})
    for i in range(3):
        await append(m, m.get("t", i % 2), b"%d" % i)[1]
    first = m.journal.seq
    assert await m.sync_journal()
    assert [s for s, _p in journal_files(tmp_path)] == [first + 1]
    assert read_checkpoint(tmp_path / CHECKPOINT) == {("t", 0): 2, ("t", 1): 1}
    await append(m, m.get("t", 1), b"late")[1]
    assert read_checkpoint(tmp_path / CHECKPOINT) == {("t", 0): 2, ("t", 1): 1}
    await m.close()


async def test_the_background_sync_writes_the_checkpoint_off_the_event_loop(tmp_path, monkeypatch):
    m = manager(tmp_path)
    m.open_topic("t", 1, {})
    await append(m, m.get("t", 0), b"a")[1]
    loop_thread = threading.get_ident()
    writers = []
    real = manager_module._atomic_write
    monkeypatch.setattr(
        manager_module,
        "_atomic_write",
        lambda path, data: (writers.append(threading.get_ident()), real(path, data)),
    )
    assert await m.sync_journal()
    assert read_checkpoint(tmp_path / CHECKPOINT) == {("t", 0): 1}
    assert writers and loop_thread not in writers
    await m.close()


async def test_an_older_checkpoint_written_late_never_replaces_a_newer_one(tmp_path):
    # the background sync took its rows (naming topic "gone"), then the topic was deleted and that
    # snapshot written on the loop; the sync's write, coming last, must not bring "gone" back
    m = manager(tmp_path)
    m.open_topic("t", 1, {})
    m.open_topic("gone", 1, {})
    await append(m, m.get("t", 0), b"a")[1]
    await append(m, m.get("gone", 0), b"b")[1]
    older = m._checkpoint_rows()
    seq = m._checkpoint_seq
    assert [r[0] for r in older] == ["t", "gone"]
    m.delete_topic("gone")  # writes its own snapshot
    assert list(read_checkpoint(tmp_path / CHECKPOINT)) == [("t", 0)]
    m._store_checkpoint(seq, older)
    assert list(read_checkpoint(tmp_path / CHECKPOINT)) == [("t", 0)]
    # and a failed write is retried by the next snapshot, even with the same rows
    m._checkpointed = None
    rows = m._checkpoint_rows()
    assert [r[:2] for r in rows] == [("t", 0)]
    assert m._checkpoint_rows() is None  # (taken: the same rows are not written twice)
    await m.close()


@pytest.mark.parametrize("partitions", [2, manager_module.SYNCFS_MIN_FILES])
async def test_the_background_sync_fsyncs_a_few_segments_and_syncfs_many(tmp_path, monkeypatch, partitions):
    m = manager(tmp_path)
    m.open_topic("t", partitions, {})
    futs = {append(m, m.get("t", p), b"%d" % p)[1] for p in range(partitions)}
    await asyncio.gather(*futs)
    calls = {"syncfs": 0, "fsync_all": 0}
    real_syncfs, real_fsync_all = manager_module._syncfs, manager_module._fsync_all

    def counting_syncfs(fd, what):
        calls["syncfs"] += 1
        real_syncfs(fd, what)

    def counting_fsync_all(segments, pool=None):
        calls["fsync_all"] += 1
        assert len(segments) == partitions
        real_fsync_all(segments, pool)

    monkeypatch.setattr(manager_module, "_syncfs", counting_syncfs)
    monkeypatch.setattr(manager_module, "_fsync_all", counting_fsync_all)
    assert await m.sync_journal()
    many = partitions >= manager_module.SYNCFS_MIN_FILES
    assert calls == ({"syncfs": 1, "fsync_all": 0} if many else {"syncfs": 0, "fsync_all": 1})
    assert set(read_checkpoint(tmp_path / CHECKPOINT).values()) == {1}
    await m.close()


async def test_a_failed_background_sync_keeps_every_journal_file_until_a_restart_replays_them(
    tmp_path, monkeypatch
):
    m = manager(tmp_path)
    m.open_topic("t", 1, {})
    await append(m, m.get("t", 0))[1]

    def fail(*_args):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(manager_module, "_syncfs", fail)  # (a sync of many partitions)
    monkeypatch.setattr(manager_module, "_fsync_all", fail)  # (of a few, this one)
    assert not await m.sync_journal()
    assert len(journal_files(tmp_path)) == 2  # the covered one kept, and the new one
    assert read_checkpoint(tmp_path / CHECKPOINT).get(("t", 0), 0) == 0
    # the error was reported once: a later sync that "succeeds" may not hold the lost pages, so
    # nothing is deleted and no recovery point moves, not by later syncs nor by the stop
    monkeypatch.undo()
    await append(m, m.get("t", 0), b"later")[1]
    assert not await m.sync_journal()
    await m.close()
    assert len(journal_files(tmp_path)) == 2
    assert read_checkpoint(tmp_path / CHECKPOINT).get(("t", 0), 0) == 0
    assert not (tmp_path / manager_module.CLEAN_SHUTDOWN).exists()
    # the segments lost their unsynced bytes: the restart replays both appends from the journal
    assert lose_segment_tails(tmp_path) > 0
    m2 = await restart(tmp_path, partitions=1)
    assert [v for _o, v in values(m2.get("t", 0))] == [b"v", b"later"]
    assert journal_files(tmp_path) == []
    await m2.close()


async def test_a_commit_of_fewer_partitions_than_the_bound_syncs_its_segments_and_not_the_journal(
    tmp_path, monkeypatch
):
    m = manager(tmp_path, **{"log.flush.journal.min.partitions": "3"})
    m.open_topic("t", 3, {})
    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(fd), real(fd))[1])
    await asyncio.wait_for(asyncio.gather(append(m, m.get("t", 0))[1], append(m, m.get("t", 1))[1]), 10)
    assert m.journal is None and journal_files(tmp_path) == []
    assert sorted(synced) == sorted(m.get("t", p).active.fd for p in (0, 1))
    for p in (0, 1):  # synced in the segment: the checkpoint may claim it at once
        assert m.get("t", p).active.synced_size == m.get("t", p).active.size > 0
    m.write_checkpoint()
    assert read_checkpoint(tmp_path / CHECKPOINT) == {("t", 0): 1, ("t", 1): 1, ("t", 2): 0}
    synced.clear()
    await asyncio.wait_for(asyncio.gather(*(append(m, m.get("t", p))[1] for p in range(3))), 10)
    assert synced == [m.journal.fd]  # three partitions: the journal
    await m.close()


async def test_journaled_and_directly_synced_commits_of_one_log_replay_as_one_log(tmp_path):
    """Commits of one partition alternate between the journal and its own fsync; a crash then loses
    every byte the segments were not known to hold: the restart has every acknowledged record."""
    m = manager(tmp_path, **{"log.flush.journal.min.partitions": "2"})
    m.open_topic("t", 2, {})
    expected = []
    for i in range(6):
        if i % 2:  # both partitions in one commit: journaled
            futs = [append(m, m.get("t", p), b"j%d-%d" % (i, p))[1] for p in range(2)]
            expected.append(b"j%d-0" % i)
        else:  # partition 0 alone: its segment is fsynced
            futs = [append(m, m.get("t", 0), b"d%d" % i)[1]]
            expected.append(b"d%d" % i)
        await asyncio.wait_for(asyncio.gather(*futs), 10)
    assert [v for _o, v in values(m.get("t", 0))] == expected
    synced = {m.get("t", p).active.path: m.get("t", p).active.synced_size for p in range(2)}
    crash(m)
    for path, size in synced.items():  # the power loss keeps what was fsynced and nothing more
        with open(path, "r+b") as f:
            f.truncate(size)
    assert synced[m.get("t", 0).active.path] > 0 and synced[m.get("t", 1).active.path] == 0
    m2 = await restart(tmp_path, **{"log.flush.journal.min.partitions": "2"})
    assert [v for _o, v in values(m2.get("t", 0))] == expected
    assert [v for _o, v in values(m2.get("t", 1))] == [b"j1-1", b"j3-1", b"j5-1"]
    await m2.close()


async def test_a_crash_that_lost_every_unsynced_segment_byte_is_replayed_from_the_journal(tmp_path):
    m = manager(tmp_path)
    m.open_topic("t", 2, {})
    pid = 4000
    for i in range(6):  # an idempotent producer on partition 0, a plain one on partition 1
        if i % 2 == 0:
            await append(
                m, m.get("t", 0), b"p%d" % i, producer_id=pid, producer_epoch=0, base_sequence=i // 2
            )[1]
        else:
            await append(m, m.get("t", 1), b"q%d" % i)[1]
    expected = {p: values(m.get("t", p)) for p in range(2)}
    crash(m)
    assert lose_segment_tails(tmp_path) > 0
    m2 = await restart(tmp_path)
    assert {p: values(m2.get("t", p)) for p in range(2)} == expected
    plog = m2.get("t", 0)
    assert plog.producers.producers[pid].batches[-1].last_seq == 2  # producer state as appended
    assert journal_files(tmp_path) == []  # replayed, synced and deleted
    assert read_checkpoint(tmp_path / CHECKPOINT) == {("t", 0): 3, ("t", 1): 3}
    # a duplicate of the last batch is still recognised, and the log goes on
    _base, fut = append(m2, plog, b"p4", producer_id=pid, producer_epoch=0, base_sequence=3)
    await fut
    assert [v for _o, v in values(plog)] == [b"p0", b"p2", b"p4", b"p4"]
    await m2.close()


@pytest.mark.parametrize("gap", [1, 2])
async def test_a_commit_ending_just_before_a_block_boundary_does_not_hide_later_commits_from_replay(
    tmp_path, gap
):
    # direct I/O: the first commit ends ``gap`` bytes before a block boundary (padding shorter than
    # a length field), the next ones start at the boundary with entries of 256 bytes and more
    m = manager(tmp_path)
    m.open_topic("t", 1, {})
    plog = m.get("t", 0)
    head = jmod.ENTRY.size + len("t")  # an entry's bytes before its batch
    value = next(
        n for n in range(3000, 4096) if head + len(records.simple_batch([b"x" * n])) == jmod.BLOCK - gap
    )
    await append(m, plog, b"x" * value)[1]
    if not m.journal.direct:
        await m.close()
        pytest.skip(f"the file system of {tmp_path} refuses direct I/O")
    for i in range(3):
        await append(m, plog, b"%d" % i * (70_000 if gap == 2 else 300))[1]
    expected = values(plog)
    crash(m)
    assert lose_segment_tails(tmp_path) > 0
    m2 = await restart(tmp_path, partitions=1)
    assert values(m2.get("t", 0)) == expected
    await m2.close()


async def test_replay_skips_what_the_segments_hold_and_is_idempotent(tmp_path):
    m = manager(tmp_path)
    m.open_topic("t", 2, {})
    for i in range(4):
        await append(m, m.get("t", i % 2), b"%d" % i)[1]
    expected = {p: values(m.get("t", p)) for p in range(2)}
    crash(m)  # SIGKILL alone: the segments hold everything
    saved = {p.name: p.read_bytes() for _s, p in journal_files(tmp_path)}
    m2 = await restart(tmp_path)
    assert {p: values(m2.get("t", p)) for p in range(2)} == expected
    crash(m2)
    for name, content in saved.items():  # the same journal once more (a crash before its deletion)
        (tmp_path / name).write_bytes(content)
    m3 = await restart(tmp_path)
    assert {p: values(m3.get("t", p)) for p in range(2)} == expected
    await m3.close()


async def test_a_replay_that_finds_every_entry_held_syncs_the_segments_before_deleting_the_journal(
    tmp_path, monkeypatch
):
    """After a SIGKILL the segments may hold every journaled append in the page cache only: the
    replay changes nothing, yet the journal is their one durable copy until they are synced, so
    the data directory is synced before the journal files are deleted."""
    m = manager(tmp_path)
    m.open_topic("t", 2, {})
    for i in range(4):
        await append(m, m.get("t", i % 2), b"%d" % i)[1]
    crash(m)  # SIGKILL alone: the segments hold everything
    assert journal_files(tmp_path)
    order: list[str] = []
    real_syncfs, real_unlink = manager_module.syncfs, Path.unlink

    def counting_syncfs(directory):
        order.append("syncfs")
        real_syncfs(directory)

    def noting_unlink(path, missing_ok=False):
        if path.name.startswith(JOURNAL_PREFIX):
            order.append("delete journal")
        real_unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(manager_module, "syncfs", counting_syncfs)
    monkeypatch.setattr(Path, "unlink", noting_unlink)
    m2 = await restart(tmp_path)
    assert order and order[0] == "syncfs" and "delete journal" in order, order
    assert not journal_files(tmp_path)
    await m2.close()


async def test_a_failed_journal_fsync_fails_the_commit_and_replay_does_not_bring_it_back(
    tmp_path, monkeypatch
):
    m = manager(tmp_path)
    m.open_topic("t", 1, {})
    plog = m.get("t", 0)
    await append(m, plog, b"kept")[1]
    real = os.fdatasync
    journal_fd = m.journal.fd

    def eio(fd):
        if fd == journal_fd:
            os.write(fd, b"")  # (the entries were written; only the sync fails)
            raise OSError(5, "Input/output error")
        real(fd)

    monkeypatch.setattr(os, "fdatasync", eio)
    _base, fut = append(m, plog, b"failed")
    with pytest.raises(StorageError):
        await fut
    assert plog.log_end_offset == 1  # cut from the log
    monkeypatch.undo()
    await append(m, plog, b"after")[1]  # same offset 1, in a new journal file after the truncation
    assert m.journal.seq == 2  # the failed file is abandoned
    crash(m)
    lose_segment_tails(tmp_path)
    m2 = await restart(tmp_path, partitions=1)
    assert values(m2.get("t", 0)) == [(0, b"kept"), (1, b"after")]
    await m2.close()


async def test_entries_of_a_deleted_or_recreated_topic_are_ignored(tmp_path):
    m = manager(tmp_path)
    m.open_topic("t", 1, {})
    await append(m, m.get("t", 0), b"old")[1]
    crash(m)
    lose_segment_tails(tmp_path)
    m2 = await restart(tmp_path, topic_id=uuid.uuid4(), partitions=1)  # "t" is another topic now
    assert values(m2.get("t", 0)) == []
    assert journal_files(tmp_path) == []
    await m2.close()


async def test_the_journal_is_off_with_never_and_with_the_setting(tmp_path):
    for conf in ({"log.flush": "never"}, {"log.flush.journal": "false"}):
        d = tmp_path / next(iter(conf.values()))
        d.mkdir()
        m = manager(d, **conf)
        m.open_topic("t", 1, {})
        fut = append(m, m.get("t", 0))[1]
        if fut is not None:
            await fut
        assert m.journal is None and journal_files(d) == []
        await m.close()
