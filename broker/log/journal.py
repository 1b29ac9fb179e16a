"""The group-commit journal (``log.flush.journal``): one append-only file whose single fdatasync makes
every partition's appends of a group commit durable, where syncing the segments themselves is one
fsync (or a syncfs of the file system) per touched file.

Files: ``.journal-<sequence, 20 digits>`` in the data directory, numbered from 1; appends go to the
newest. A background sync (``LogManager.sync_journal``) rotates to a new file, syncs the segments,
writes the recovery checkpoint and then deletes the files the sync covered, oldest first.

A file is the 8 bytes ``FILE_MAGIC`` followed by entries, each::

    length  uint32   bytes after the crc field
    crc     uint32   CRC-32C of those bytes
    kind    uint8    1: append, 2: truncate
    offset  int64    append: the base offset of its first batch; truncate: the new log end offset
    topic id 16 bytes (the topic's UUID; all zero when unknown)
    partition int32
    name length uint16, then the topic name (UTF-8)
    data    (append) the record batches exactly as written to the segment

all integers big-endian. Where an entry's length field is zero the rest of that ``BLOCK`` (4,096 bytes,
counted from the file's start) is padding: the next entry, if any, starts at the next block. Padding
of 1-3 bytes (a commit that ended that close to a block's end) is shorter than a length field: where
no whole entry starts there and those bytes are zero, the next entry starts at the next block. A reader
stops at the first entry that is incomplete or whose CRC does not match: the torn tail of a write that
was never acknowledged (its fdatasync had not returned).

Writes happen on the group commit's flush thread only, in the order the event loop took the entries
(one thread, first in first out). Where the file system takes direct I/O (``O_DIRECT``: ext4, XFS,
btrfs; not tmpfs) the file is written around the page cache: the magic padded to a block, then each
group commit's entries copied into an aligned buffer, zero-padded to whole blocks and written at the
file's block-aligned end, then fdatasync'd: less CPU than a buffered write and its write-back at
the fdatasync (1.0-1.4x in ``bench/journal_write_bench.py``), and the group commit is the broker's
most frequent fdatasync. Elsewhere (and with injected file ops) the entries go out with ``os.writev``
of the headers and the batches as the appends left them, unpadded. After a failed write or fdatasync
the file is abandoned (what the kernel kept of it is unknown) and the next write starts a new file;
the caller queues the failed entries again.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from .batch import HEADER, HEADER_SIZE
from .crc import crc32c
from .segment import SYSTEM_OPS, FileOps

log = logging.getLogger(__name__)

PREFIX = ".journal-"
FILE_MAGIC = b"PKBJRNL1"
#: length, crc, kind, offset, topic id, partition, name length
ENTRY = struct.Struct(">IIBq16siH")
_KIND_OFFSET = struct.Struct(">Bq")
_LENGTH_CRC = struct.Struct(">II")
APPEND, TRUNCATE = 1, 2
NO_TOPIC_ID = bytes(16)
#: most buffers one writev(2) takes (IOV_MAX on Linux)
IOV_MAX = 1024
#: the unit of direct I/O: offsets, lengths and the buffer's address are multiples of it (a multiple of
#: every logical block size in use: 512 and 4,096); a zero length field pads to the next one
BLOCK = 4096
#: the aligned buffer a direct write copies through (a group commit larger than it is written in parts)
STAGE_BYTES = 1 << 20
_LENGTH = struct.Struct(">I")


def file_name(seq: int) -> str:
    return f"{PREFIX}{seq:020d}"


def journal_files(directory: Path) -> list[tuple[int, Path]]:
    """(sequence, path) of every journal file in ``directory``, oldest first."""
    out = []
    for name in os.listdir(directory):
        if name.startswith(PREFIX) and name[len(PREFIX) :].isdigit():
            out.append((int(name[len(PREFIX) :]), directory / name))
    out.sort()
    return out


def partition_key(topic_id: bytes, topic: str, partition: int) -> bytes:
    """The bytes of an entry that name its partition (topic id, partition, name): the same for
    every entry of a log, so the writer makes them once a log."""
    name = topic.encode()
    return topic_id + struct.pack(">iH", partition, len(name)) + name


def encode_entry(
    kind: int, topic_id: bytes, topic: str, partition: int, offset: int, data: Any = b""
) -> list:
    """One entry as the buffers to write: [header, data] (an append) or [header] (a truncation)."""
    return encode_keyed(kind, offset, partition_key(topic_id, topic, partition), data)


def encode_keyed(kind: int, offset: int, key: bytes, data: Any = b"") -> list:
    """``encode_entry`` with the partition's ``partition_key`` bytes."""
    rest = _KIND_OFFSET.pack(kind, offset) + key
    if data:
        return [_LENGTH_CRC.pack(len(rest) + len(data), crc32c(data, crc32c(rest))) + rest, data]
    return [_LENGTH_CRC.pack(len(rest), crc32c(rest)) + rest]


class Entry(NamedTuple):  # not a dataclass: see broker.config.Setting
    """One journal entry: an append to (or a truncation of) a partition's log."""

    kind: int
    topic_id: bytes
    topic: str
    partition: int
    offset: int
    data: bytes


def read_entries(path: Path) -> tuple[list[Entry], int]:
    """The entries of one journal file, and the bytes after the last whole one (a torn or damaged
    tail, ignored: never acknowledged). A file without the magic holds nothing."""
    data = path.read_bytes()
    entries: list[Entry] = []
    if not data.startswith(FILE_MAGIC):
        return entries, len(data)
    pos = len(FILE_MAGIC)
    view = memoryview(data)
    while pos + _LENGTH.size <= len(data):
        if _LENGTH.unpack_from(data, pos)[0] == 0:  # padding to the next block (a direct write's)
            pos = (pos // BLOCK + 1) * BLOCK
            continue
        found = _entry_at(data, view, pos)
        if found is None:
            # A direct commit that ended 1-3 bytes before a block boundary left padding shorter than
            # a length field: the length read here runs into the next commit's first entry (at the
            # boundary) and is not zero. Entries of one commit are contiguous, so one may also start
            # there: that reading was tried first, and failed its checks.
            gap = -pos % BLOCK
            if 0 < gap < _LENGTH.size and not any(view[pos : pos + gap]):
                pos += gap
                continue
            break
        entry, pos = found
        entries.append(entry)
    if len(data) % BLOCK == 0 and pos < len(data) and not any(view[pos:]):
        pos = len(data)  # a direct file's last padding, shorter than a length field
    return entries, max(0, len(data) - pos)


def _entry_at(data: bytes, view: memoryview, pos: int) -> tuple[Entry, int] | None:
    """The whole, undamaged entry at ``pos`` and the position after it, or None (incomplete, bad
    length, kind, CRC or name)."""
    if pos + ENTRY.size > len(data):
        return None
    length, crc, kind, offset, topic_id, partition, name_len = ENTRY.unpack_from(data, pos)
    end = pos + 8 + length
    if length < ENTRY.size - 8 + name_len or end > len(data) or kind not in (APPEND, TRUNCATE):
        return None
    if crc32c(view[pos + 8 : end]) != crc:
        return None
    name_end = pos + ENTRY.size + name_len
    try:
        topic = data[pos + ENTRY.size : name_end].decode()
    except UnicodeDecodeError:
        return None
    return Entry(kind, topic_id, topic, partition, offset, data[name_end:end]), end


def iter_entries(directory: Path) -> Iterator[tuple[int, Entry]]:
    """(sequence, entry) of every journal file, oldest file first, each up to its torn tail."""
    for seq, path in journal_files(directory):
        entries, torn = read_entries(path)
        if torn:
            log.warning("%s: ignoring %d bytes of torn or damaged tail (never acknowledged)", path, torn)
        for e in entries:
            yield seq, e


def _pwrite_all(fd: int, data: memoryview, at: int) -> None:
    """Write all of ``data`` at ``at`` (direct I/O: a short write ends on a block boundary)."""
    while len(data):
        n = os.pwrite(fd, data, at)
        if n <= 0:
            raise OSError(errno.EIO, f"journal write of {len(data)} bytes at {at} wrote {n}")
        data = data[n:]
        at += n


def _writev_all(fd: int, bufs: list) -> None:
    """Write every buffer, in order, however many writev(2) calls and short writes that takes."""
    i = 0
    n = len(bufs)
    while i < n:
        chunk = bufs[i : i + IOV_MAX]
        written = os.writev(fd, chunk)
        total = sum(len(b) for b in chunk)
        if written == total:
            i += len(chunk)
            continue
        # short write: finish the buffer it stopped in, then go on
        for b in chunk:
            if written >= len(b):
                written -= len(b)
                i += 1
                continue
            rest = memoryview(b)[written:]
            while len(rest):
                rest = rest[os.write(fd, rest) :]
            i += 1
            break


class Journal:
    """The journal files of one data directory: the writer of the newest (flush thread only, after
    ``open``) and their rotation and deletion."""

    def __init__(self, directory: Path, ops: FileOps = SYSTEM_OPS, direct: bool = True):
        self.directory = directory
        self.ops = ops
        self.fd: int | None = None
        self.seq = 0
        #: bytes in the current file
        self.size = 0
        self._header = len(FILE_MAGIC)  # the bytes before the first entry (a direct file's: a block)
        #: whether files are written with direct I/O (see the module docstring): asked for, with the
        #: system's file ops (injected ones see every write), until the file system refuses it
        self.direct = direct and type(ops) is FileOps
        #: the aligned buffer of direct writes (an anonymous mapping: page-aligned), made on first use
        self._stage: mmap.mmap | None = None
        self._dir_dirty = False  # a new file whose directory entry is not yet durable
        self._broken = False  # the last write or fdatasync failed: the next write starts a new file
        existing = journal_files(directory)
        self._last_existing = existing[-1][0] if existing else 0

    # ------------------------------------------------------------------ files

    def open(self) -> None:
        """Start a new file after every existing one."""
        self._new_file()

    def _new_file(self) -> None:
        seq = max(self._last_existing, self.seq) + 1
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        path = self.directory / file_name(seq)
        fd = self._open_direct(path) if self.direct else None
        if fd is not None:
            size = BLOCK
        else:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
            try:
                os.write(fd, FILE_MAGIC)
            except OSError:
                os.close(fd)
                raise
            size = len(FILE_MAGIC)
        self.fd = fd
        self.seq = seq
        self.size = self._header = size
        self._dir_dirty = True
        self._broken = False

    @property
    def empty(self) -> bool:
        """Whether the current file holds no entry (its magic only)."""
        return self.size <= self._header

    def rotate(self) -> int:
        """Start the next file (flush thread, between writes); returns the sequence of the one
        closed: everything in it and before it is covered once the segments are synced."""
        old = self.seq
        self._new_file()
        return old

    def delete_through(self, seq: int, everything: bool = False) -> int:
        """Delete this writer's files up to ``seq``, oldest first (their appends are in synced
        segments), not the one being written unless ``everything`` (a clean stop, after its sync);
        returns how many. Files an earlier run left are the start-up replay's to delete."""
        n = 0
        for s, path in journal_files(self.directory):
            if s > seq or (s == self.seq and not everything):
                break
            if s <= self._last_existing:
                continue
            path.unlink(missing_ok=True)
            n += 1
        if n:
            fd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        return n

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        stage, self._stage = self._stage, None
        if stage is not None:
            try:
                stage.close()
            except BufferError:  # a view of it outlives a failed write (its traceback): freed with it
                pass

    # ------------------------------------------------------------------ direct I/O

    def _open_direct(self, path: Path) -> int | None:
        """A new file opened for direct I/O with its first block written (the magic, zero-padded),
        or None where the file system refuses direct I/O (from then on every file is buffered)."""
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
            self.direct = False
            return None
        try:
            stage = self._staging()
            stage[: len(FILE_MAGIC)] = FILE_MAGIC
            stage[len(FILE_MAGIC) : BLOCK] = bytes(BLOCK - len(FILE_MAGIC))
            _pwrite_all(fd, memoryview(stage)[:BLOCK], 0)
        except OSError as e:
            os.close(fd)
            if e.errno != errno.EINVAL:
                raise
            self.direct = False
            return None
        return fd

    def _staging(self) -> mmap.mmap:
        if self._stage is None:
            self._stage = mmap.mmap(-1, STAGE_BYTES)
        return self._stage

    def _write_direct(self, fd: int, bufs: list, at: int) -> int:
        """Write ``bufs`` at the block-aligned ``at`` through the aligned buffer, a full buffer at a
        time, the last part zero-padded to a whole block; returns the file's new (aligned) size."""
        stage = self._staging()
        view = memoryview(stage)
        fill = 0
        for b in bufs:
            data = b if type(b) is memoryview else memoryview(b)
            n = len(data)
            taken = 0
            while taken < n:
                k = min(n - taken, STAGE_BYTES - fill)
                view[fill : fill + k] = data[taken : taken + k]
                fill += k
                taken += k
                if fill == STAGE_BYTES:
                    _pwrite_all(fd, view, at)
                    at += STAGE_BYTES
                    fill = 0
        if fill:
            end = -(-fill // BLOCK) * BLOCK
            view[fill:end] = bytes(end - fill)  # never a previous commit's bytes: they would parse
            _pwrite_all(fd, view[:end], at)
            at += end
        return at

    # ------------------------------------------------------------------ writing

    def write(self, bufs: list) -> None:
        """Append encoded entries and make them durable (one writev sequence, one fdatasync). On
        failure the file is abandoned: the next write starts a new one."""
        if self._broken or self.fd is None:
            self._new_file()
        fd = self.fd
        assert fd is not None
        try:
            if bufs and self.direct:
                try:
                    self.size = self._write_direct(fd, bufs, self.size)
                except OSError as e:
                    if e.errno != errno.EINVAL:
                        raise
                    # a file system that opened the file for direct I/O but refuses its writes: this
                    # file is abandoned (what it holds is replayed, the later copy winning) and the
                    # rest are written through the page cache
                    log.warning(
                        "%s: direct I/O refused (%s); writing through the page cache", self.directory, str(e)
                    )
                    self.direct = False
                    self._new_file()
                    fd = self.fd
                    assert fd is not None
                    _writev_all(fd, bufs)
                    self.size += sum(len(b) for b in bufs)
            elif bufs:
                if type(self.ops).write is FileOps.write:
                    _writev_all(fd, bufs)
                else:  # injected file ops (tests): one write through them
                    data = b"".join(bufs)
                    n = self.ops.write(fd, data)
                    if n != len(data):
                        raise OSError(28, f"short write to the journal: {n} of {len(data)} bytes")
                self.size += sum(len(b) for b in bufs)
            self.ops.fsync(fd)
            if self._dir_dirty:
                dfd = os.open(self.directory, os.O_RDONLY)
                try:
                    os.fsync(dfd)
                finally:
                    os.close(dfd)
                self._dir_dirty = False
        except OSError:
            self._broken = True
            raise


# ---------------------------------------------------------------------- replay plan

#: one journaled append as replay sees it: (base offset, next offset after it, the batches)
Span = tuple[int, int, bytes]


def batch_ends(data: bytes) -> list[tuple[int, int]]:
    """(byte end, next offset) of each whole batch in ``data``."""
    out = []
    pos = 0
    while pos + HEADER_SIZE <= len(data):
        f = HEADER.unpack_from(data, pos)
        end = pos + f[1] + 12
        if end > len(data):
            break
        out.append((end, f[0] + f[6] + 1))
        pos = end
    return out


def _cut(spans: list[Span], offset: int) -> list[Span]:
    """``spans`` without anything at or above ``offset`` (a span across it keeps its batches below)."""
    out = []
    for base, nxt, data in spans:
        if nxt <= offset:
            out.append((base, nxt, data))
        elif base < offset:
            kept = [(end, n) for end, n in batch_ends(data) if n <= offset]
            if kept:
                out.append((base, kept[-1][1], data[: kept[-1][0]]))
    return out


def plan(entries: list[Entry]) -> tuple[int | None, list[Span]]:
    """What one partition's journal entries (oldest first) say its log ends with: the lowest offset a
    journaled truncation cut it back to (None: none), and the appends that survive every later
    truncation, in offset order. Replay cuts the log there, then appends what it lacks of them."""
    floor: int | None = None
    spans: list[Span] = []
    for e in entries:
        if e.kind == TRUNCATE:
            floor = e.offset if floor is None else min(floor, e.offset)
            spans = _cut(spans, e.offset)
            continue
        ends = batch_ends(e.data)
        if not ends:
            continue
        if spans and e.offset < spans[-1][1]:  # written again (after a failed write): the later copy
            spans = _cut(spans, e.offset)
        spans.append((e.offset, ends[-1][1], e.data[: ends[-1][0]]))
    return floor, spans
