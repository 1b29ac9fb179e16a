"""One segment of a partition log: a ``.log`` file of record batches and its sparse offset index.

Batches are stored exactly as produced, except for the base offset the broker assigns. The
segment's file name is its base offset (``00000000000000001234.log``). The index maps an offset to
a file position every ``index_interval`` bytes; it lives in memory, is written to ``.index`` when
the segment is rolled or the log is closed, and is rebuilt from the batch headers when the file is
missing or does not match the log.
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import struct
import sys
import threading
from array import array
from bisect import bisect_right
from collections import OrderedDict
from pathlib import Path

from broker.log.crc import crc32c

from .batch import HEADER, HEADER_SIZE

__all__ = ["HEADER_SIZE", "FileOps", "LogCorruption", "OpenFiles", "Segment", "segment_name"]

log = logging.getLogger(__name__)

INDEX_ENTRY = 16  # (offset int64, position int64) big-endian


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class LogCorruption(Exception):
    """Corruption that recovery must not silently repair (it is not at the unflushed tail)."""

    def __init__(self, path: Path, position: int, reason: str, offset: int | None = None):
        super().__init__(f"{path}: corrupt record batch at byte {position}: {reason}")
        self.path = path
        self.position = position
        self.reason = reason
        self.offset = offset  # the first offset that is not intact


class FileOps:
    """The system calls through which a segment writes, syncs and cuts back its ``.log`` file: the
    seam where tests inject disk faults (ENOSPC, EIO) by passing a subclass to the LogManager."""

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> int:
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        os.fdatasync(fd)

    def truncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)


SYSTEM_OPS = FileOps()

_FLAGS = os.O_RDWR | os.O_APPEND


class OpenFiles:
    """The open ``.log`` files of every segment, at most ``limit`` of them (``log.max.open.files``):
    a segment opens its file when it is used and the least recently used unpinned segment closes
    its own to make room (second chance: a segment used since the last sweep is passed over once).
    Kafka keeps every segment open; with thousands of partitions that needs a raised ulimit, this
    does not.

    Threads: only the event loop's thread (and start-up, before it runs) opens through ``acquire``,
    which may close other segments' files. The log cleaner keeps the segments it replaces open under
    ``pin``: pinned files are never closed for room. The fsync of a group commit (worker threads)
    borrows a segment's descriptor (``borrow``): the open one, pinned meanwhile, or, when the file
    was closed for room, a descriptor of its own that it closes after the fsync, so a commit that
    touches 10,000 partitions holds at most one extra file per fsync thread, never 10,000.
    Closing a file with unsynced pages loses nothing: the pages belong to the file (its inode stays
    in memory while they are dirty), and the group commit's fsync through a new descriptor writes
    them before the appends are acknowledged, and reports a write-back error that no descriptor
    has seen yet (Linux 4.13+: errseq).
    """

    def __init__(self, limit: int = 0):
        self.limit = limit  # 0: unbounded
        self._lock = threading.Lock()
        self._open: OrderedDict[Segment, None] = OrderedDict()
        self.opened = 0  # files opened (first opens and re-opens), for tests and benchmarks
        self.closed_for_room = 0

    def __len__(self) -> int:
        return len(self._open)

    def acquire(self, seg: Segment) -> int:
        """``seg``'s descriptor, opened now if it was closed for room (event-loop thread). (One
        record into each of 10,000 partitions under a bound of 512 is 10,000 re-opens, each closing
        another file: the open is inlined, the path a ``str``.)"""
        with self._lock:
            fd = seg._fd
            if fd is None:
                if seg.closed:  # never use a descriptor number that may have been reused
                    raise OSError(errno.EBADF, f"{seg.path} is closed")
                fd = seg._fd = os.open(seg._os_path, _FLAGS)
                self._open[seg] = None
                self.opened += 1
            if self.limit and len(self._open) > self.limit:
                self._make_room(seg)
            return fd

    def register(self, seg: Segment, fd: int) -> None:
        """A segment that opened (created) its file itself."""
        with self._lock:
            seg._fd = fd
            self._open[seg] = None
            self.opened += 1
            if self.limit and len(self._open) > self.limit:
                self._make_room(seg)

    def _open_locked(self, seg: Segment) -> int:
        if seg.closed:  # never use a descriptor number that may have been reused
            raise OSError(errno.EBADF, f"{seg.path} is closed")
        fd = os.open(seg._os_path, _FLAGS)
        seg._fd = fd
        self._open[seg] = None
        self.opened += 1
        return fd

    def _make_room(self, keep: Segment) -> None:
        files = self._open
        limit = self.limit
        pop = files.popitem
        for _ in range(2 * len(files)):
            if len(files) <= limit:
                return
            seg = pop(last=False)[0]  # the least recently opened (or passed over)
            if seg is keep or seg._pins or seg._used:
                seg._used = False
                files[seg] = None  # (to the end: passed over once)
                continue
            fd, seg._fd = seg._fd, None
            if fd is not None:
                os.close(fd)
            self.closed_for_room += 1

    def borrow(self, seg: Segment) -> tuple[int, bool]:
        """A descriptor of ``seg``'s file for a worker thread's fsync, and whether it is the
        borrower's own (opened now, without taking a place in the budget: close it after use with
        ``give_back``). An open file is pinned until ``give_back``."""
        with self._lock:
            fd = seg._fd
            if fd is not None:
                seg._pins += 1
                return fd, False
            if seg.closed:
                raise OSError(errno.EBADF, f"{seg.path} is closed")
        return os.open(seg._os_path, _FLAGS), True

    def give_back(self, seg: Segment, fd: int, own: bool) -> None:
        if own:
            os.close(fd)
        else:
            with self._lock:
                seg._pins -= 1

    def pin(self, seg: Segment) -> int:
        """Keep ``seg``'s file open until ``unpin``; any thread. Returns its descriptor."""
        with self._lock:
            seg._pins += 1
            fd = seg._fd
            if fd is None:
                try:
                    fd = self._open_locked(seg)
                except OSError:
                    seg._pins -= 1
                    raise
            return fd

    def unpin(self, seg: Segment) -> None:
        with self._lock:
            seg._pins -= 1

    def forget(self, seg: Segment) -> int | None:
        """The segment is closed for good: its descriptor, to close, if it had one open."""
        with self._lock:
            self._open.pop(seg, None)
            fd, seg._fd = seg._fd, None
            return fd


#: the segments of logs opened without a LogManager (tools, tests): no limit
UNBOUNDED = OpenFiles()

#: the soft RLIMIT_NOFILE the process started with, noted by ``serve`` before it raises the limit
#: for its connections (broker/cli.py); None: not raised, the current soft limit is that one
_starting_soft_limit: int | None = None


def note_starting_open_files_limit(soft: int) -> None:
    """Remember the soft RLIMIT_NOFILE the process was started with (before it is raised): the
    default ``log.max.open.files`` is derived from it (``starting_open_files_limit``)."""
    global _starting_soft_limit
    if _starting_soft_limit is None:
        _starting_soft_limit = soft


def starting_open_files_limit() -> int:
    """The soft RLIMIT_NOFILE the process started with (``resource.RLIM_INFINITY`` if unlimited)."""
    if _starting_soft_limit is not None:
        return _starting_soft_limit
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class Segment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        index_interval: int = 4096,
        ops: FileOps = SYSTEM_OPS,
        files: OpenFiles = UNBOUNDED,
    ):
        self.ops = ops
        #: ``ops.write``, or ``os.write`` itself for the system calls (one Python call less per append)
        self._write = os.write if type(ops) is FileOps else ops.write
        self.files = files
        self.dir = directory
        self.base_offset = base_offset
        self.path = directory / (segment_name(base_offset) + ".log")
        self._os_path = os.fspath(self.path)  # (what a re-open after a close for room opens)
        self.index_path = directory / (segment_name(base_offset) + ".index")
        #: its aborted transactions (broker/log/txnindex.py), when it has any
        self.txnindex_path = directory / (segment_name(base_offset) + ".txnindex")
        self.index_interval = index_interval
        self._fd: int | None = None  # open while in ``files`` (see OpenFiles)
        self._pins = 0
        self._used = True
        self.closed = False
        fd = os.open(self._os_path, _FLAGS | os.O_CREAT, 0o644)
        st = os.fstat(fd)
        self.size = st.st_size
        self.created = st.st_mtime
        files.register(self, fd)
        self.next_offset = base_offset  # offset after the last batch
        self.max_timestamp = -1
        self._idx_offsets = array("q")
        self._idx_positions = array("q")
        self._bytes_since_index = 0
        self._durable_offset = 0  # below this offset, damage is corruption (set by recover)
        #: the file size the last successful fsync covered (the log sets it at load for a segment
        #: its recovery point covers): a flush with nothing new to sync is skipped
        self.synced_size = 0
        self._index_size = -1  # the size the .index file on disk describes (-1: none, or stale)
        #: whether a ``.index`` file exists (None: not known; ``load_index`` and ``write_index``
        #: learn it), so that a clean stop of 10,000 logs does not ask the file system each time
        self._index_file: bool | None = None
        self._torn = False  # bytes of a failed write may lie past ``size``

    # ------------------------------------------------------------------ loading

    def recover(self, verify_crc: bool, truncate_bad_tail: bool, durable_offset: int = 0) -> int:
        """Scan every batch header, rebuild the index and the segment's offsets; returns bytes dropped.

        A bad batch is truncated away when ``truncate_bad_tail`` (the last segment) and it lies at or
        beyond ``durable_offset`` (what was fsynced before the crash can only be corrupt, never torn);
        otherwise it raises LogCorruption naming the file and the byte position.
        """
        self._durable_offset = durable_offset
        self._index_size = -1
        self._idx_offsets = array("q")
        self._idx_positions = array("q")
        self._bytes_since_index = 0
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        size = self.size
        buf = b""
        buf_start = 0
        pos = 0
        while pos < size:
            if size - pos < HEADER_SIZE:
                return self._bad(
                    pos, f"{size - pos} trailing bytes are too few for a batch", truncate_bad_tail
                )
            if pos + HEADER_SIZE > buf_start + len(buf):
                buf, buf_start = os.pread(self.fd, 1 << 20, pos), pos
            rel = pos - buf_start
            (base, length, _epoch, magic, crc, _attrs, last_delta, _bts, max_ts) = HEADER.unpack_from(
                buf, rel
            )[:9]
            if magic != 2:
                return self._bad(pos, f"magic byte {magic} is not 2", truncate_bad_tail)
            total = length + 12
            if length < HEADER_SIZE - 12:
                return self._bad(pos, f"batch length {length} is below the minimum", truncate_bad_tail)
            if pos + total > size:
                return self._bad(
                    pos, f"batch of {total} bytes runs past the end of the file", truncate_bad_tail
                )
            if base < self.next_offset or last_delta < 0:
                return self._bad(
                    pos,
                    f"offset {base} goes backwards (expected at least {self.next_offset})",
                    truncate_bad_tail,
                )
            if verify_crc:
                if pos + total > buf_start + len(buf):
                    buf, buf_start = os.pread(self.fd, max(total, 1 << 20), pos), pos
                    rel = 0
                if crc32c(memoryview(buf)[rel + 21 : rel + total]) != crc:
                    return self._bad(pos, "CRC-32C mismatch", truncate_bad_tail)
            self._add_index(base, pos, total, force=not self._idx_offsets)
            self.next_offset = base + last_delta + 1
            if max_ts > self.max_timestamp:
                self.max_timestamp = max_ts
            pos += total
        return 0

    def _bad(self, pos: int, reason: str, truncate: bool) -> int:
        if not truncate or self.next_offset < self._durable_offset:
            raise LogCorruption(self.path, pos, reason, self.next_offset)
        dropped = self.size - pos
        log.warning(
            "%s: truncating %d bytes of torn or corrupt tail at byte %d (%s)", self.path, dropped, pos, reason
        )
        os.ftruncate(self.fd, pos)
        os.fsync(self.fd)
        self.size = pos
        self.synced_size = 0
        return dropped

    def load_index(self) -> bool:
        """Load ``.index`` if it matches this log file; False when it must be rebuilt."""
        try:
            raw = self.index_path.read_bytes()
        except FileNotFoundError:
            self._index_file = False
            return False
        self._index_file = True
        if len(raw) < 24 or (len(raw) - 24) % INDEX_ENTRY:
            return False
        size, next_offset, max_ts = struct.unpack_from(">qqq", raw, 0)
        if size != self.size:
            return False
        entries = array("q", raw[24:])
        if sys.byteorder == "little":
            entries.byteswap()
        offs, poss = entries[0::2], entries[1::2]
        if any(p >= self.size or p < 0 for p in poss) or list(offs) != sorted(offs):
            return False
        self._idx_offsets, self._idx_positions = offs, poss
        self._index_size = size
        self.next_offset, self.max_timestamp = next_offset, max_ts
        return True

    def index_matches(self) -> None:
        """The ``.index`` file describes the file as it is (it loaded, and a scan found the same
        bytes valid): ``write_index`` has nothing to do until the segment changes."""
        self._index_size = self.size

    def write_index(self) -> None:
        if self._index_size == self.size:
            return  # the file on disk already describes this content
        offsets, positions = self._idx_offsets, self._idx_positions
        if len(offsets) != len(positions):
            raise ValueError(f"{self.path}: {len(offsets)} index offsets but {len(positions)} positions")
        entries = array("q", bytes(16 * len(offsets)))  # (offset, position) pairs, interleaved
        entries[0::2] = offsets
        entries[1::2] = positions
        if sys.byteorder == "little":
            entries.byteswap()
        tmp = self.index_path.with_suffix(".index.tmp")
        tmp.write_bytes(
            struct.pack(">qqq", self.size, self.next_offset, self.max_timestamp) + entries.tobytes()
        )
        os.replace(tmp, self.index_path)
        self._index_size = self.size
        self._index_file = True

    def has_index_file(self) -> bool:
        """Whether a ``.index`` file exists (asked of the file system only when not known)."""
        if self._index_file is None:
            self._index_file = self.index_path.exists()
        return self._index_file

    # ------------------------------------------------------------------ writing

    def _add_index(self, offset: int, position: int, size: int, force: bool = False) -> None:
        if force or self._bytes_since_index >= self.index_interval:
            self._idx_offsets.append(offset)
            self._idx_positions.append(position)
            self._bytes_since_index = 0
        self._bytes_since_index += size

    def append(
        self, data: bytes | bytearray | memoryview, first_offset: int, next_offset: int, max_ts: int
    ) -> int:
        """Append whole batches; returns the position they start at."""
        if self.closed:  # never write through a file descriptor number that may have been reused
            raise OSError(9, f"{self.path} is closed")
        position = self.size
        if self._torn:  # a failed write left bytes past ``size`` that could not be cut off then
            self.ops.truncate(self.fd, position)
            self._torn = False
        size = len(data)
        self._used = True  # (the ``fd`` property, inlined below)
        try:
            fd = self._fd
            n = self._write(fd if fd is not None else self.files.acquire(self), data)
            if n != size:
                raise OSError(errno.ENOSPC, f"short write to {self.path}: {n} of {size} bytes")
        except OSError:
            # undo whatever part reached the file, so nothing half-written is ever read and the next
            # append (O_APPEND: at the end of the file) lands at ``size``
            self._torn = True
            try:
                self.ops.truncate(self.fd, position)
                self._torn = False
            except OSError as e:
                log.error("%s: cannot cut a failed write back to byte %d: %s", self.path, position, e)
            raise
        if not self._idx_offsets or self._bytes_since_index >= self.index_interval:  # (_add_index)
            self._idx_offsets.append(first_offset)
            self._idx_positions.append(position)
            self._bytes_since_index = 0
        self._bytes_since_index += size
        self.size = position + size
        self.next_offset = next_offset
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
        return position

    def truncate_to(self, position: int) -> None:
        """Forget every batch from ``position`` (a batch boundary) on and cut the file there; if the
        cut fails, the next append retries it before writing."""
        self.size = position
        self.synced_size = 0  # the cut itself is made durable by the next flush
        self._torn = True
        try:
            self.ops.truncate(self.fd, position)
            self._torn = False
        except OSError as e:
            log.error("%s: cannot truncate to byte %d: %s", self.path, position, e)
        self.recover(verify_crc=False, truncate_bad_tail=False)  # offsets, index, max timestamp

    # ------------------------------------------------------------------ reading

    def lookup(self, offset: int) -> int:
        """A file position at or before the batch holding ``offset``."""
        i = bisect_right(self._idx_offsets, offset) - 1
        return self._idx_positions[i] if i >= 0 else 0

    def find(self, offset: int, limit: int) -> int | None:
        """Position of the first batch whose last offset >= ``offset``, scanning headers below ``limit``."""
        offsets = self._idx_offsets
        i = bisect_right(offsets, offset) - 1
        pos = self._idx_positions[i] if i >= 0 else 0
        if i >= 0 and offsets[i] == offset:
            # an index entry is a batch start with that base offset: the batch holding ``offset``
            return pos if pos < limit else None
        while pos < limit:
            head = os.pread(self.fd, HEADER_SIZE, pos)
            base, length = HEADER.unpack_from(head, 0)[:2]
            last = base + HEADER.unpack_from(head, 0)[6]
            if last >= offset:
                return pos
            pos += length + 12
        return None

    def find_header(self, offset: int, limit: int) -> tuple[int, tuple] | None:
        """As ``find``, with the found batch's header fields (``HEADER``'s unpacked tuple), from the
        one read of its 61 header bytes."""
        pos = self.lookup(offset)
        fd = self.fd
        unpack = HEADER.unpack_from
        while pos < limit:
            f = unpack(os.pread(fd, HEADER_SIZE, pos), 0)
            if f[0] + f[6] >= offset:
                return pos, f
            pos += f[1] + 12
        return None

    def read(self, position: int, max_bytes: int, limit: int) -> bytes:
        """Whole batches from ``position`` (a batch start) up to ``limit`` (a batch end): at most
        ``max_bytes``, but always the first batch whole even when it is larger (KIP-74)."""
        if position >= limit or self.closed:
            return b""
        data = os.pread(self.fd, min(max_bytes, limit - position), position)
        if len(data) == limit - position:
            return data  # up to ``limit``, a batch end: whole batches, nothing to walk
        # cut at the last whole batch: walk the headers from the last indexed batch start in ``data``
        # (the index has one every index.interval.bytes), not from its first batch
        i = bisect_right(self._idx_positions, position + len(data)) - 1
        end = self._idx_positions[i] - position if i >= 0 and self._idx_positions[i] > position else 0
        while end + 12 <= len(data):
            length = int.from_bytes(data[end + 8 : end + 12], "big", signed=True) + 12
            if end + length > len(data):
                break
            end += length
        if end == 0:
            head = os.pread(self.fd, 12, position)
            length = int.from_bytes(head[8:12], "big", signed=True) + 12
            return os.pread(self.fd, length, position) if position + length <= limit else b""
        return data if end == len(data) else data[:end]

    @property
    def fd(self) -> int:
        """The ``.log`` file's descriptor, re-opened if it was closed for room (event-loop thread;
        use it at once, never keep the number: it may be closed by the next segment's open)."""
        self._used = True
        fd = self._fd
        return fd if fd is not None else self.files.acquire(self)

    def flush(self) -> None:
        """fsync the file unless nothing was written since the last fsync; any thread (the group
        commit's worker): through its open descriptor (kept open meanwhile), or when that was
        closed for room, through one opened for this fsync only."""
        target = self.size
        if target <= self.synced_size:
            return
        fd, own = self.files.borrow(self)
        try:
            self.ops.fsync(fd)
        finally:
            self.files.give_back(self, fd, own)
        if target > self.synced_size:
            self.synced_size = target

    def pin(self) -> None:
        """Keep the file open (and readable through its descriptor even once renamed or deleted)
        until ``unpin``: the log cleaner pins the segments it replaces until they are swapped out."""
        self.files.pin(self)

    def unpin(self) -> None:
        self.files.unpin(self)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            fd = self.files.forget(self)
            if fd is not None:
                os.close(fd)

    def delete(self) -> None:
        self.close()
        self._index_file = False
        for p in (self.path, self.index_path, self.txnindex_path):
            try:
                p.unlink()
            except FileNotFoundError:
                pass
