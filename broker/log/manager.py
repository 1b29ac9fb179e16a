"""All partition logs of the broker, and the flush policy that decides when an append is durable.

``log.flush``:

* ``always``   -- every append is fsynced before it is acknowledged (appends that arrive while an
  fsync runs share the next one);
* ``interval`` -- group commit: appends are acknowledged after the next fsync, which starts at most
  ``log.flush.interval.ms`` (5 ms) after the previous one started, so many appends share one fsync;
* ``never``    -- acknowledged at once; the OS writes the data back when it likes.

A failed write (ENOSPC, EIO) fails its Produce with KAFKA_STORAGE_ERROR and leaves nothing in the
file. A failed fsync fails every append not yet durable with KAFKA_STORAGE_ERROR and cuts those
appends from their logs (``PartitionLog.discard_unflushed``). Both are retriable: unlike Kafka, which
takes a failed log directory offline, this single-directory broker keeps serving reads and retries
writes, which succeed again once the disk does.

Restart after a clean stop: ``close`` writes the clean-shutdown marker (Kafka's
``.kafka_cleanshutdown``) once every log is closed, its files synced and the checkpoint written; a
broker starting on a directory that has it removes it (durably, before anything can change) and opens
no log at start-up: each partition the checkpoint lists opens on first use (produce, fetch, list
offsets...), trusting the indexes and producer snapshots its clean close wrote, and the rest open in
the background once the broker listens (``open_deferred``). Without the marker (a crash, SIGKILL, a
power loss) every log is recovered at start-up, as before the listener accepts anything.

The fsyncs run in worker threads (the files of one group commit spread over ``FLUSH_WORKERS`` of
them), so the event loop keeps serving reads and other appends. A group commit that touches at least
``SYNCFS_MIN_FILES`` files (one record into each of thousands of partitions) makes them durable with
one syncfs(2) of the data directory's file system instead: one call that writes back and waits for
every file, whose write-back errors since the broker started it reports (a descriptor of the data
directory held open for the broker's life, the file system's error sequence checked through it). Only
flushed data is visible to consumers (the high watermark), so a consumer never sees a record that a
crash could take back.

``log.flush.journal`` (the default, with ``always`` and ``interval``): a group commit does not sync
the segments. Each append also leaves an entry (its log, base offset and the very bytes appended:
a reference, no copy) in a list the group commit takes; the flush thread writes them to the
group-commit journal (journal.py) with one writev sequence and one fdatasync, and the commit is
acknowledged exactly as above once that returns. A background sync (every
``log.flush.journal.sync.ms``, or at once when the journal file passes ``log.flush.journal.bytes``)
rotates to a new journal file, syncs the segments (one syncfs for ``SYNCFS_MIN_FILES`` or more, else an
fsync of each), then advances each log's recovery
point to what it held at the rotation, writes the checkpoint and deletes the journal files that sync
covered; a failed sync keeps them for the next. The checkpoint therefore claims only what the
segments hold on disk. After a crash, start-up (``started``) recovers each log from its checkpoint
as before, then ``replay_journal`` replays the journal files into the logs they name: a truncation
entry (written after a failed commit cut its appends: ``discard_unflushed``) cuts the log back,
appends the log lacks are appended through its own path (index, producer state, transaction index),
those it holds are skipped, entries of a deleted or re-created topic (another topic id) are ignored,
and a torn tail ends a file (it was never acknowledged). The segments are synced (those it changed and
those that already held their entries, maybe in the page cache only) and the files deleted before
anything is served. A failed journal write or fdatasync fails the commit as a failed
fsync does; the next write starts a new journal file, with the failed entries first.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
import os
import resource
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from broker import native
from broker.protocol.errors import ErrorCode, KafkaError

from .cleaner import LogCleaner, fsync_dir
from .config import LONG_MAX, LogConfig
from .journal import (
    APPEND,
    NO_TOPIC_ID,
    TRUNCATE,
    Journal,
    encode_keyed,
    iter_entries,
    journal_files,
    partition_key,
    plan,
)
from .partition import UNOPENED, PartitionLog, flush_targets, mark_all_flushed, now_ms
from .segment import SYSTEM_OPS, FileOps, OpenFiles, Segment, segment_name, starting_open_files_limit

try:
    from . import _native
except ImportError:  # not built (no C compiler at install): syncfs through ctypes
    _native = None

log = logging.getLogger(__name__)

COORDINATOR_TOPIC = "__consumer_offsets"

CHECKPOINT = "recovery-point-offset-checkpoint"
#: log start offsets moved by DeleteRecords (Kafka's file name and format)
START_CHECKPOINT = "log-start-offset-checkpoint"
PRODUCER_ID_BLOCK = "producer-id-block"
#: written by a clean stop, removed by the next start (Kafka's name: CleanShutdownFileHandler); ours
#: lists each log's segment files as that stop left them: a header line, then one line a partition,
#: ``topic partition base:size:mtime_ns[,...]``
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
MARKER_HEADER = "pykbroker clean shutdown 1"
#: seconds the background opening of deferred logs runs before it lets the event loop serve others
OPEN_SLICE = 0.005
PRODUCER_ID_BLOCK_SIZE = 1000


class StorageError(KafkaError):
    def __init__(self, message: str):
        super().__init__(ErrorCode.KAFKA_STORAGE_ERROR, message)


#: threads that fsync the files of one group commit side by side (each takes every n-th file)
FLUSH_WORKERS = 32


def _fsync_each(segments: list[Segment]) -> None:
    for seg in segments:
        if not seg.closed:
            try:
                seg.flush()
            except OSError:
                if not seg.closed:  # closed meanwhile by a topic deletion: nothing to make durable
                    raise


def _fsync_all(segments: list[Segment], pool: ThreadPoolExecutor | None = None) -> None:
    """fsync every segment; with ``pool``, its threads share the files (the disk takes many fsyncs
    at once, and a thread that waits for the GIL after its fsync holds up only its own share).
    Raises the first failure, after every share has finished."""
    workers = min(len(segments), FLUSH_WORKERS) if pool is not None else 1
    if workers <= 1:
        _fsync_each(segments)
        return
    jobs = [pool.submit(_fsync_each, segments[i::workers]) for i in range(workers)]
    errors = [e for e in (job.exception() for job in jobs) if e is not None]
    if errors:
        raise errors[0]


#: a group commit of at least this many files syncs them with one syncfs(2) (``_syncfs_all``): measured
#: on ext4 (the shared 2-core machine), files of one new record each, fdatasync on 32 threads vs one
#: syncfs: 10,000 files ~0.7 s vs ~0.3 s, 1,000 ~40-80 ms vs ~20-50 ms, 32-128 files ~7-37 ms vs
#: ~8-27 ms; and one call instead of a job per thread and a GIL hand-off per file (a profile of one
#: record into each of 10,000 partitions, whose commits touch tens of files each: the thread pool's
#: submits, wake-ups and waits were a third of the broker's samples)
SYNCFS_MIN_FILES = 32


def _truncates(entries: list) -> bool:
    """Whether journal entries (log, offset, data) hold a truncation (data None)."""
    return any(e[2] is None for e in entries)


def _syncfs_all(fd: int) -> None:
    """Make every file of the data directory's file system durable with one syncfs(2) through ``fd``
    (the data directory's descriptor, open since the broker started: the error it reports is any
    write-back error of the file system since then, which fails the group commit as a failed fsync
    does). What it covered -- each segment's size when the group commit started, taken on the event
    loop before it -- is recorded on the event loop once it returns (``mark_all_flushed``): this
    thread walks no list of files while holding the GIL."""
    _syncfs(fd, "the data directory")


def open_files_limit(setting: int) -> int:
    """log.max.open.files: the setting, or with 0 half the soft limit on open files the process was
    started with (``ulimit -n``; ``serve`` raises it to the hard limit afterwards, for connections
    only), at least 64; unbounded if that limit is. The rest of the limit is for connections, the
    fsync threads' short-lived descriptors and everything else."""
    if setting > 0:
        return setting
    soft = starting_open_files_limit()
    if soft == resource.RLIM_INFINITY:
        return 0
    return max(64, soft // 2)


def remove_tree(path: Path) -> None:
    """Remove the directory ``path`` and everything in it, ignoring errors (a deleted topic's
    partition). shutil is imported on the first call: its import (bz2, lzma, fnmatch: ~2.5 ms) is not
    paid by a broker start that deletes nothing."""
    importlib.import_module("shutil").rmtree(path, ignore_errors=True)


@functools.cache
@functools.cache
def _libc() -> Any:
    """The C library through ctypes, imported and loaded once, on first use: only the syncfs
    fallback needs it (the import of ctypes is ~1 ms of every start-up otherwise)."""
    return importlib.import_module("ctypes").CDLL(None, use_errno=True)


def _libc_syncfs(fd: int) -> int:
    """syncfs(2) through ctypes: 0, or the errno of its failure. The fallback of the compiled
    ``_native.syncfs`` (not built, or ``PYKBROKER_NATIVE=0``), with the same answers."""
    if _libc().syncfs(fd) != 0:
        return importlib.import_module("ctypes").get_errno()
    return 0


#: ``syncfs(fd) -> 0 or errno``: broker/log/_native.c's (GIL released, as ctypes releases it), else
#: :func:`_libc_syncfs`
_syncfs_call: Callable[[int], int] = native.compiled(getattr(_native, "syncfs", None)) or _libc_syncfs


def _syncfs(fd: int, what: str) -> None:
    """syncfs(2) of the file system holding the open ``fd``; OSError if it reports a failure."""
    err = _syncfs_call(fd)
    if err:
        raise OSError(err, f"syncfs: {os.strerror(err)}", what)


def syncfs(directory: Path) -> None:
    """Write back everything of the file system holding ``directory`` (syncfs(2): one call for the
    indexes and snapshots of every log, where fsyncing each would be one call per file)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        _syncfs(fd, str(directory))
    finally:
        os.close(fd)


def take_clean_shutdown(data_dir: Path) -> str | None:
    """The clean-shutdown marker's text if the last stop was clean, else None. The marker is
    removed, durably, so that a crash from now on is never taken for a clean stop."""
    path = data_dir / CLEAN_SHUTDOWN
    try:
        text = path.read_text()
        path.unlink()
    except FileNotFoundError:
        return None
    fsync_dir(data_dir)
    return text


def _segment_specs(plog: PartitionLog, before_ns: int) -> str | None:
    """``base:size:mtime_ns`` of each segment file of a closed log, comma-separated; None when a file
    was written at or after ``before_ns`` (a later write could then leave its mtime unchanged)."""
    specs = []
    for seg in plog.segments:
        try:
            st = os.stat(seg.path)
        except OSError:
            return None
        if st.st_mtime_ns >= before_ns or st.st_size != seg.size:
            return None
        specs.append(f"{seg.base_offset}:{st.st_size}:{st.st_mtime_ns}")
    return ",".join(specs)


def verified_clean(data_dir: Path, text: str) -> dict[tuple[str, int], str]:
    """The logs of a clean-shutdown marker whose segment files are still as that stop left them
    (same files, sizes and modification times): (topic, partition) -> their specs. Anything written
    to a log since -- a tool, a damaged copy -- makes it recovered at start-up like after a crash."""
    lines = text.splitlines()
    if not lines or lines[0] != MARKER_HEADER:
        return {}
    out: dict[tuple[str, int], str] = {}
    base_dir = str(data_dir)
    for line in lines[1:]:
        try:
            topic, partition, specs = line.split(" ")
            directory = f"{base_dir}/{topic}-{partition}/"
            for spec in specs.split(","):
                base, size, mtime = spec.split(":")
                st = os.stat(directory + segment_name(int(base)) + ".log")
                if st.st_size != int(size) or st.st_mtime_ns != int(mtime):
                    break
            else:
                out[(topic, int(partition))] = specs
        except (ValueError, OSError):
            continue
    return out


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """(topic, partition) -> durable offset from a recovery-point checkpoint file (empty if none)."""
    out: dict[tuple[str, int], int] = {}
    if not path.exists():
        return out
    for line in path.read_text().splitlines()[2:]:
        parts = line.split()
        if len(parts) == 3:
            out[(parts[0], int(parts[1]))] = int(parts[2])
    return out


class LogManager:
    """``file_ops``: the system calls segments write and sync through (tests inject disk faults)."""

    def __init__(
        self,
        data_dir: Path,
        broker_config: Any,
        file_ops: FileOps = SYSTEM_OPS,
        recover: bool = False,
        clock: Callable[[], float] | None = None,
        time_ms: Callable[[], int] | None = None,
    ):
        self.file_ops = file_ops
        #: monotonic seconds for the group-commit window (default: the event loop's clock)
        self._clock = clock
        #: the broker clock's ms (broker/clock.py): retention, segment rolls, LogAppendTime
        self.now_ms: Callable[[], int] = time_ms or now_ms
        self.data_dir = data_dir
        self._dir_prefix = f"{data_dir}{os.sep}"
        #: ``serve --recover``: partitions opened at start-up truncate at corruption instead of refusing
        self.recover = recover
        self.broker_config = broker_config
        self.policy: str = broker_config["log.flush"]
        self.interval = broker_config["log.flush.interval.ms"] / 1000
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        self._dirty: set[PartitionLog] = set()
        self._next: asyncio.Future | None = None
        self._flushing = False
        self._scheduled: asyncio.TimerHandle | None = None
        #: when the last group commit started (monotonic seconds); None before the first, which
        #: starts at once -- a monotonic clock's zero is the machine's boot, not "long ago"
        self._last_flush_start: float | None = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="fsync")
        #: the threads a group commit's fsyncs are spread over (``_fsync_all``)
        self._flushers = ThreadPoolExecutor(FLUSH_WORKERS, thread_name_prefix="fsync-file")
        #: the data directory, open for syncfs(2) of large group commits (``_syncfs_all``); None with
        #: injected file ops (their faults and syncs are per file) or where it cannot be opened
        self._syncfs_fd: int | None = None
        if file_ops is SYSTEM_OPS:
            try:
                self._syncfs_fd = os.open(data_dir, os.O_RDONLY)
            except OSError:
                pass
        self._tasks: list[asyncio.Task] = []
        self.recovery_points = self._read_checkpoint()
        #: the rows the checkpoint file holds as this broker last wrote it (None: not written yet)
        self._checkpointed: list[tuple[str, int, int]] | None = None
        #: snapshots of the checkpoint taken (event loop) and the last written (under the lock)
        self._checkpoint_seq = self._checkpoint_stored = 0
        self._checkpoint_lock = threading.Lock()
        self.start_offsets = read_checkpoint(data_dir / START_CHECKPOINT)
        self.cleaner = LogCleaner(broker_config)
        self.cleaner.now_ms = self.now_ms
        #: log.flush=never: partitions with flush.messages / flush.ms and unflushed appends since when
        self._unflushed_since: dict[PartitionLog, float] = {}
        self._next_pid, self._pid_block_end = self._load_pid_block()
        marker = take_clean_shutdown(data_dir)  # (removed whatever happens next)
        #: the logs the last (clean) stop left that are still as it left them: with ``defer_open``,
        #: those the checkpoint lists open on first use; False once start-up has opened what was
        #: on disk (``started``), or with ``recover``
        self.clean_logs = verified_clean(data_dir, marker) if marker and not recover else {}
        self.defer_open = bool(self.clean_logs)
        #: every segment's open file, at most log.max.open.files of them
        self.files = OpenFiles(open_files_limit(broker_config["log.max.open.files"]))
        #: log.flush.journal (with always or interval): group commits fdatasync the journal; the
        #: segments are synced by the background sync (``sync_journal``)
        self.journaled: bool = self.policy != "never" and bool(broker_config["log.flush.journal"])
        #: a group commit of at least this many logs writes the journal (log.flush.journal.min.partitions);
        #: one of fewer fsyncs their active segments as without the journal (a log's older segments
        #: were synced when it rolled, so that covers every append of the log so far) and drops its
        #: entries: for a few files the journal would write the same bytes again for the same one
        #: fsync. A commit whose entries hold a truncation (after a failed fsync) always writes the
        #: journal, so that no replay brings the cut appends back.
        self.journal_min_logs: int = broker_config["log.flush.journal.min.partitions"]
        #: whether the journal is written with direct I/O where the file system takes it (journal.py)
        self.journal_direct: bool = bool(broker_config["log.flush.journal.direct"])
        self.journal: Journal | None = None
        #: entries appended since the last group commit took them, shared by every log (its
        #: ``journal``): (log, base offset, data) for an append, (log, offset, None) for a truncation
        self._pending: list = []
        #: per log, the offset below which its segments are known synced (the recovery point the
        #: checkpoint may claim): its log end when opened, advanced by each background sync
        self._sync_points: dict[PartitionLog, int] = {}
        #: logs appended to since the last background sync began
        self._unsynced: set[PartitionLog] = set()
        self._syncer = ThreadPoolExecutor(1, thread_name_prefix="journal-sync")
        self._syncing = False
        self._sync_task: asyncio.Task | None = None
        #: why a background sync failed, once one has: from then on the journal files are kept and
        #: the recovery points stay where they were (see ``sync_journal``)
        self._sync_failed: str | None = None
        self._journal_bytes: int = broker_config["log.flush.journal.bytes"]
        #: topic name -> its id's 16 bytes, as journal entries carry it (``topic_id_of``)
        self._topic_ids: dict[str, bytes] = {}
        #: per log, the bytes naming it in a journal entry (``journal.partition_key``; flush thread)
        self._journal_keys: dict[PartitionLog, bytes] = {}
        #: the topic id of a topic name (the broker sets it from its topic registry)
        self.topic_id_of: Callable[[str], uuid.UUID | None] = lambda _name: None

    # ------------------------------------------------------------------ topics

    def log_config(self, overrides: dict[str, str]) -> LogConfig:
        return LogConfig.resolve(self.broker_config.log_defaults(), overrides)

    def partition_dir(self, topic: str, partition: int) -> Path:
        return self.data_dir / f"{topic}-{partition}"

    def open_partition(
        self, topic: str, partition: int, configs: dict[str, str], config: LogConfig | None = None
    ) -> PartitionLog:
        """Open (or create) one partition's log; ``config``: the topic's resolved ``configs``, when
        the caller has it (the partitions of a topic share one)."""
        key = (topic, partition)
        defer = self.defer_open and key in self.clean_logs and key in self.recovery_points
        plog = PartitionLog(
            f"{self._dir_prefix}{topic}-{partition}" if defer else self.partition_dir(topic, partition),
            topic,
            partition,
            config or self.log_config(configs),
            self.recovery_points.get(key, 0),
            recover=self.recover,
            ops=self.file_ops,
            log_start_offset=self.start_offsets.get(key, 0),
            files=self.files,
            # a log the clean stop checkpointed is as that stop left it: opened on first use
            defer=defer,
        )
        self.logs[key] = plog
        if topic not in self._topic_ids:
            tid = self.topic_id_of(topic)
            self._topic_ids[topic] = tid.bytes if tid is not None else NO_TOPIC_ID
        if self.journaled:
            plog.journal = self._pending
        if plog.opened:
            self._opened(plog)
        else:
            plog.on_open = self._opened
        return plog

    def _opened(self, plog: PartitionLog) -> None:
        if self.journaled:
            self._sync_points[plog] = plog.log_end_offset
        if "compact" in plog.config.cleanup_policy and plog.topic != COORDINATOR_TOPIC:
            self.cleaner.register(plog, user=True)

    def started(self) -> None:
        """Start-up has opened (or deferred) every log on disk: later opens are of new partitions."""
        self.recover = False
        self.defer_open = False
        self.replay_journal()

    def unopened(self) -> list[PartitionLog]:
        """The deferred logs not opened yet."""
        return [plog for plog in self.logs.values() if not plog.opened and not plog.deleted]

    async def open_deferred(self) -> None:
        """Open every deferred log not used yet, a few at a time between the event loop's other
        work, so that retention and everything else sees every log soon after start-up."""
        loop = asyncio.get_running_loop()
        slice_end = loop.time() + OPEN_SLICE
        for plog in self.unopened():
            if plog.state == UNOPENED and not plog.deleted:
                try:
                    plog.open()
                except KafkaError:
                    pass  # logged; every use of that log fails with KAFKA_STORAGE_ERROR
            if loop.time() >= slice_end:
                await asyncio.sleep(0)
                slice_end = loop.time() + OPEN_SLICE

    def open_topic(self, topic: str, partitions: int, configs: dict[str, str], first: int = 0) -> None:
        config = self.log_config(configs)  # resolved once: the same for every partition
        for p in range(first, partitions):
            self.open_partition(topic, p, configs, config)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get((topic, partition))

    def reconfigure(self, topic: str, configs: dict[str, str]) -> None:
        cfg = self.log_config(configs)
        for (t, _p), plog in self.logs.items():
            if t == topic:
                plog.config = cfg
                if (
                    topic == COORDINATOR_TOPIC or not plog.opened
                ):  # (registered when it opens)  # compacted by the coordinator's own registration
                    continue
                if "compact" in cfg.cleanup_policy:
                    self.cleaner.register(plog, user=True)
                else:
                    self.cleaner.unregister(plog)

    def delete_topic(self, topic: str) -> None:
        """Close the topic's logs and remove their directories (renamed first, then deleted)."""
        for key in [k for k in self.logs if k[0] == topic]:
            plog = self.logs[key]
            suffix = f".{uuid.uuid4().hex}-delete"
            # like Kafka's logDeleteDirName: keep the whole name within the 255-byte limit
            doomed = plog.dir.with_name(plog.dir.name[: 255 - len(suffix)] + suffix)
            os.rename(plog.dir, doomed)  # only then is the partition gone from the manager
            del self.logs[key]
            self.cleaner.unregister(plog)
            self._dirty.discard(plog)
            self._unsynced.discard(plog)
            self._sync_points.pop(plog, None)
            self._journal_keys.pop(plog, None)
            self.recovery_points.pop(key, None)
            plog.close_for_delete()
            remove_tree(doomed)
        self._topic_ids.pop(topic, None)
        # a recreated topic must not inherit the old partitions' recovery points nor start offsets
        self.write_checkpoint()
        if any(t == topic for t, _p in self.start_offsets):
            self.write_start_checkpoint()

    # ------------------------------------------------------------------ durability

    def appended(self, plog: PartitionLog) -> asyncio.Future | None:
        """After an append: a future that completes once it is durable (None if it already is).

        With ``never``, the topic's flush.messages and flush.ms still ask for an fsync (in the
        background, nobody waits): once that many messages are unflushed, or by the periodic
        check when the oldest unflushed one is that old. With ``always`` and ``interval`` every
        append is fsynced before its acknowledgement, which is stricter than any flush.* value."""
        if self.policy == "never":
            plog.mark_flushed(*plog.flush_target(), durable=False)
            cfg = plog.config
            if cfg.flush_messages < LONG_MAX or cfg.flush_ms < LONG_MAX:
                self._unflushed_since.setdefault(plog, asyncio.get_running_loop().time())
                if plog.log_end_offset - plog.durable_offset >= cfg.flush_messages:
                    self._flush_in_background(plog)
            return None
        self._dirty.add(plog)
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
        if self._scheduled is None and not self._flushing:  # (else _schedule has nothing to do)
            self._schedule()
        return self._next

    def _flush_in_background(self, plog: PartitionLog) -> None:
        """An fsync of ``plog`` through the group-commit machinery that no request waits for."""
        self._unflushed_since.pop(plog, None)
        self._dirty.add(plog)
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
            self._next.add_done_callback(lambda f: f.cancelled() or f.exception())  # errors are logged
        self._schedule()

    def check_flush_ms(self) -> None:
        """log.flush=never: fsync the partitions whose oldest unflushed message is flush.ms old."""
        now = asyncio.get_running_loop().time()
        for plog, since in list(self._unflushed_since.items()):
            if plog.deleted:
                self._unflushed_since.pop(plog, None)
            elif (now - since) * 1000 >= plog.config.flush_ms:
                self._flush_in_background(plog)

    def flush_soon(self) -> None:
        """Start a group commit that is waiting for its interval now (at shutdown)."""
        if self._scheduled is not None:
            self._scheduled.cancel()
            self._scheduled = None
            self._start_flush()

    def _now(self) -> float:
        """Monotonic seconds for the group-commit window: the injected clock, else the loop's."""
        return self._clock() if self._clock is not None else asyncio.get_running_loop().time()

    def _schedule(self) -> None:
        if self._flushing or self._scheduled is not None or self._next is None:
            return
        loop = asyncio.get_running_loop()
        delay = 0.0
        if self.policy == "interval" and self._last_flush_start is not None:
            delay = max(0.0, self._last_flush_start + self.interval - self._now())
        self._scheduled = loop.call_later(delay, self._start_flush)

    def _start_flush(self) -> None:
        self._scheduled = None
        self._flushing = True
        loop = asyncio.get_running_loop()
        self._last_flush_start = self._now()
        fut, self._next = self._next, None
        dirty, self._dirty = self._dirty, set()
        # (a log's active segment is its own: one segment a log, none shared)
        targets = flush_targets(dirty)
        if self.journaled:
            self._unsynced |= dirty
            entries = self._pending[:]
            self._pending.clear()
        if self.journaled and (len(targets) >= self.journal_min_logs or _truncates(entries)):
            if self.journal is None:
                self.journal = Journal(self.data_dir, self.file_ops, direct=self.journal_direct)
            job = loop.run_in_executor(self._executor, self._journal_write, entries)
            job.add_done_callback(lambda j: self._flush_done(j, fut, targets, entries))
            return
        if self._syncfs_fd is not None and len(targets) >= SYNCFS_MIN_FILES:
            job = loop.run_in_executor(self._executor, _syncfs_all, self._syncfs_fd)
        else:
            segments = [seg for _plog, _offset, seg, _position in targets]
            job = loop.run_in_executor(self._executor, _fsync_all, segments, self._flushers)
        job.add_done_callback(lambda j: self._flush_done(j, fut, targets))

    def _journal_write(self, entries: list) -> None:
        """The flush thread's part of a journaled group commit: encode ``entries`` and write them
        to the journal with one writev sequence and one fdatasync."""
        journal = self.journal
        assert journal is not None
        bufs: list = []
        keys = self._journal_keys
        for plog, offset, data in entries:
            if plog.deleted:
                continue
            key = keys.get(plog)
            if key is None:
                tid = self._topic_ids.get(plog.topic, NO_TOPIC_ID)
                key = keys[plog] = partition_key(tid, plog.topic, plog.partition)
            if data is None:
                bufs += encode_keyed(TRUNCATE, offset, key)
            else:
                bufs += encode_keyed(APPEND, offset, key, data)
        journal.write(bufs)

    def _flush_done(
        self, job: asyncio.Future, fut: asyncio.Future, targets: list, entries: list | None = None
    ) -> None:
        self._flushing = False
        exc = job.exception()
        if exc is not None:
            if entries is not None:
                # written again, before everything appended since, into a new file (journal.py);
                # the truncations below follow them: a replay never brings the dropped appends back
                self._pending[:0] = entries
            # Whatever that fsync covered may never reach the disk (and a later fsync can succeed
            # without writing the pages whose write-back failed): every append not yet durable
            # fails -- those of this flush and those waiting for the next -- and is cut from its log.
            log.error("fsync failed: %s", exc)
            error = StorageError(f"fsync failed: {exc}")
            pending, self._next = self._next, None
            dirty, self._dirty = self._dirty, set()
            for plog in {t[0] for t in targets} | dirty:
                if not plog.deleted:
                    plog.discard_unflushed()
            for f in (fut, pending):
                if f is not None and not f.done():
                    f.set_exception(error)
        else:
            mark_all_flushed(targets, synced=entries is None)
            if entries is None and self.journaled:  # the segments themselves were synced
                points = self._sync_points
                for plog, offset, _seg, _position in targets:
                    if offset > points.get(plog, 0):
                        points[plog] = offset
            if not fut.done():
                fut.set_result(None)
            if entries is not None and self.journal is not None and self.journal.size >= self._journal_bytes:
                self._sync_soon()
        self._schedule()

    # ------------------------------------------------------------------ the journal

    def _sync_segments(self, segments: list[Segment]) -> None:
        """The background sync's thread: make the segments durable (one syncfs of the data
        directory's file system for many, else -- and with injected file ops -- an fsync of each:
        a few partitions' sync writes back no other program's files)."""
        if self._syncfs_fd is not None and len(segments) >= SYNCFS_MIN_FILES:
            _syncfs(self._syncfs_fd, "the data directory")
        else:
            _fsync_all(segments, self._flushers)

    def _sync_soon(self) -> None:
        """Start a background sync now unless one runs (the journal passed its size bound)."""
        if not self._syncing and (self._sync_task is None or self._sync_task.done()):
            self._sync_task = asyncio.get_running_loop().create_task(self.sync_journal())

    async def _periodic_sync(self, seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                await self.sync_journal()
            except Exception:
                log.exception("background sync of the segments failed")

    async def sync_journal(self) -> bool:
        """The background sync: rotate to a new journal file, sync the segments (everything
        appended before the rotation is in their page cache), then advance the logs' recovery
        points, write the checkpoint and delete the journal files the sync covered. After a failed
        sync none of that happens again in this process (``_sync_failed``). Returns whether it synced."""
        if self.journal is None or self._syncing or self._sync_failed is not None:
            return False
        if not self._unsynced and self.journal.empty:
            return True  # nothing appended since the last sync: no new file, nothing to delete
        self._syncing = True
        loop = asyncio.get_running_loop()
        unsynced, self._unsynced = self._unsynced, set()
        try:
            points = [(plog, plog.log_end_offset, plog.segments[-1]) for plog in unsynced if not plog.deleted]
            try:
                covered = await loop.run_in_executor(self._executor, self.journal.rotate)
                await loop.run_in_executor(self._syncer, self._sync_segments, [p[2] for p in points])
            except OSError as e:
                # The write-back error is reported once: a retried sync could succeed without the
                # pages it lost, and the journal is then the only copy of acknowledged appends. So
                # from now on nothing is deleted and no recovery point advances (Kafka takes such a
                # log directory offline); the next start recovers the segments from the old points
                # and replays every journal file into them. A clean stop is not marked clean.
                self._sync_failed = str(e)
                log.error(
                    "background sync of the segments failed: %s; the journal files are kept, and the "
                    "recovery points held, until a restart replays them",
                    e,
                )
                self._unsynced |= unsynced
                return False
            synced = self._sync_points
            for plog, offset, _seg in points:
                if offset > synced.get(plog, 0):
                    synced[plog] = offset
            try:
                # the rows on the event loop; their file (10,000 lines at 10,000 partitions) and its
                # fsync on the sync's thread, not stalling every connection meanwhile
                rows = self._checkpoint_rows()
                if rows is not None:
                    await loop.run_in_executor(
                        self._syncer, self._store_checkpoint, self._checkpoint_seq, rows
                    )
                await loop.run_in_executor(self._syncer, self.journal.delete_through, covered)
            except OSError as e:
                log.error("background sync: cannot write the checkpoint or delete the journal: %s", e)
                return False
            return True
        finally:
            self._syncing = False

    def replay_journal(self) -> int:
        """Start-up: replay the journal files a stop left (none after a clean stop) into the logs
        they name, oldest first, then sync the logs it touched, write the checkpoint and delete the
        files. Per partition (``journal.plan``): cut back to the lowest journaled truncation, then
        append the journaled batches the log lacks (through its own append path: index, producer
        state, transaction index), skipping those it holds; entries of a topic deleted since (or
        re-created: another topic id) are ignored. Returns the partitions changed."""
        files = journal_files(self.data_dir)
        if not files:
            return 0
        per: dict[tuple[str, int], list] = {}
        ignored = 0
        for _seq, e in iter_entries(self.data_dir):
            if self._topic_ids.get(e.topic) != e.topic_id:
                ignored += 1
                continue
            per.setdefault((e.topic, e.partition), []).append(e)
        touched = []  # the logs the replay changed
        named = []  # every open log the journal names
        appended = truncated = held = differ = gaps = 0
        for key, entries in per.items():
            plog = self.logs.get(key)
            if plog is None or plog.deleted:
                ignored += len(entries)
                continue
            try:
                plog.open()
            except KafkaError:
                pass  # logged
            if not plog.opened:  # FAILED: every use of it fails with KAFKA_STORAGE_ERROR
                continue
            floor, spans = plan(entries)
            changed = False
            if floor is not None and floor < plog.log_end_offset:
                truncated += plog.replay_truncate(floor)
                changed = True
            for base, nxt, data in spans:
                if nxt <= plog.log_end_offset:
                    if plog.replay_holds(base, data):
                        held += 1
                    else:
                        differ += 1
                    continue
                n = plog.replay_append(data)
                if n < 0:
                    log.warning(
                        "%s-%d: journal replay: offset %d does not continue the log (end %d); stopped",
                        key[0],
                        key[1],
                        base,
                        plog.log_end_offset,
                    )
                    gaps += 1
                    break
                appended += n
                changed = True
            named.append(plog)
            if changed:
                touched.append(plog)
        # Before the journal files go: the segments made durable, those the replay changed and
        # those that already held their entries alike -- after a SIGKILL the held bytes may be in
        # the page cache only, and the journal is then their one durable copy.
        if self.file_ops is SYSTEM_OPS:
            syncfs(self.data_dir)
        else:
            _fsync_each([plog.segments[-1] for plog in named])
        if touched and self.journaled:  # (a journal an earlier run left, replayed with the journal now off)
            for plog in touched:
                self._sync_points[plog] = plog.log_end_offset
        self.write_checkpoint()
        for _seq, path in files:
            path.unlink(missing_ok=True)
        fsync_dir(self.data_dir)
        log.info(
            "journal replay: %d files, %d partitions changed: %d offsets appended, %d truncated; "
            "%d appends already held (%d differing: compacted), %d entries ignored, %d gaps",
            len(files),
            len(touched),
            appended,
            truncated,
            held,
            differ,
            ignored,
            gaps,
        )
        return len(touched)

    # ------------------------------------------------------------------ checkpoints

    def _read_checkpoint(self) -> dict[tuple[str, int], int]:
        return read_checkpoint(self.data_dir / CHECKPOINT)

    def write_checkpoint(self) -> None:
        """Kafka's format: version, count, then 'topic partition offset' lines (written here, on
        the calling thread; the background sync writes it on its own thread: ``sync_journal``)."""
        rows = self._checkpoint_rows()
        if rows is not None:
            self._store_checkpoint(self._checkpoint_seq, rows)

    def _checkpoint_rows(self) -> list[tuple[str, int, int]] | None:
        """The recovery checkpoint's rows now (event loop), numbered (``_checkpoint_seq``) for
        ``_store_checkpoint``; None when the file already says this (no rewrite, no fsync)."""
        # the recovery point is what is known to be on disk: below it, damage is corruption, not a torn tail
        # (a log not opened since the clean stop: the recovery point that stop wrote)
        points = self.recovery_points
        # with the journal, what the segments hold: up to the last sync of each log's segments
        # (``_sync_points`` is empty without the journal, so the durable offset alone counts)
        synced = self._sync_points
        rows = [
            (
                t,
                p,
                min(plog.durable_offset, synced.get(plog, LONG_MAX))
                if plog.opened
                else points.get((t, p), 0),
            )
            for (t, p), plog in self.logs.items()
            if not plog.deleted
        ]
        self.recovery_points = {(t, p): o for t, p, o in rows}
        if rows == self._checkpointed:
            return None
        # taken as written: a later snapshot with the same rows is not written again (if this one
        # fails, ``_checkpointed`` is reset and the next one is)
        self._checkpointed = rows
        self._checkpoint_seq += 1
        return rows

    def _store_checkpoint(self, seq: int, rows: list[tuple[str, int, int]]) -> None:
        """Write snapshot ``seq`` (any thread) unless a later one is written already: a topic's
        deletion writes its snapshot on the event loop while the background sync may be writing an
        older one (which still names the deleted partitions) on its thread; the older one must not
        replace it."""
        with self._checkpoint_lock:
            if seq <= self._checkpoint_stored:
                return
            body = "0\n" + f"{len(rows)}\n" + "".join(f"{t} {p} {o}\n" for t, p, o in rows)
            try:
                _atomic_write(self.data_dir / CHECKPOINT, body.encode())
            except OSError:
                self._checkpointed = None
                raise
            self._checkpoint_stored = seq

    def write_start_checkpoint(self, moved: dict[tuple[str, int], int] | None = None) -> None:
        """The log start offsets of every partition whose start is inside its first segment (moved by
        DeleteRecords), with ``moved`` applied, in the recovery checkpoint's format; fsynced."""
        starts = {
            key: plog.log_start_offset
            for key, plog in self.logs.items()
            if plog.opened and not plog.deleted and plog.log_start_offset > plog.segments[0].base_offset
        }
        for key, plog in self.logs.items():  # not opened since the clean stop: as it was
            if not plog.opened and not plog.deleted and key in self.start_offsets:
                starts[key] = self.start_offsets[key]
        starts.update(moved or {})
        body = "0\n" + f"{len(starts)}\n" + "".join(f"{t} {p} {o}\n" for (t, p), o in starts.items())
        _atomic_write(self.data_dir / START_CHECKPOINT, body.encode())
        self.start_offsets = starts

    def delete_records(self, plog: PartitionLog, offset: int) -> int:
        """DeleteRecords on one partition: move its log start offset to ``offset`` (durably: the
        checkpoint is fsynced before the log serves the new start), then delete the whole segments
        below it. Returns the log start offset afterwards (the low watermark). OFFSET_OUT_OF_RANGE
        above the high watermark; KAFKA_STORAGE_ERROR when the checkpoint cannot be written."""
        plog.check_start(offset)
        if offset > plog.log_start_offset:
            try:
                self.write_start_checkpoint({(plog.topic, plog.partition): offset})
            except OSError as e:
                log.error("%s-%d: cannot write %s: %s", plog.topic, plog.partition, START_CHECKPOINT, e)
                raise StorageError(f"cannot record the new log start offset: {e}") from e
            plog.advance_start(offset)
            plog.delete_below_start()
        return plog.log_start_offset

    # ------------------------------------------------------------------ producer ids

    def _load_pid_block(self) -> tuple[int, int]:
        path = self.data_dir / PRODUCER_ID_BLOCK
        start = int(path.read_text().strip()) if path.exists() else 0
        return start, start  # the persisted block end is the first id not yet handed out

    def allocate_producer_id(self) -> int:
        if self._next_pid >= self._pid_block_end:
            self._pid_block_end = self._next_pid + PRODUCER_ID_BLOCK_SIZE
            _atomic_write(self.data_dir / PRODUCER_ID_BLOCK, str(self._pid_block_end).encode())
        pid = self._next_pid
        self._next_pid += 1
        return pid

    # ------------------------------------------------------------------ background work

    def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._periodic(5.0, self.write_checkpoint)))
        interval = self.broker_config["log.retention.check.interval.ms"] / 1000
        self._tasks.append(asyncio.create_task(self._periodic(interval, self.apply_retention)))
        interval = self.broker_config["producer.id.expiration.check.interval.ms"] / 1000
        self._tasks.append(asyncio.create_task(self._periodic(interval, self.expire_producers)))
        if self.policy == "never":
            self._tasks.append(asyncio.create_task(self._periodic(0.1, self.check_flush_ms)))
        if self.journaled:
            interval = self.broker_config["log.flush.journal.sync.ms"] / 1000
            self._tasks.append(asyncio.create_task(self._periodic_sync(interval)))
        if any(not plog.opened for plog in self.logs.values()):
            self._tasks.append(asyncio.create_task(self.open_deferred()))
        self.cleaner.start()

    async def _periodic(self, seconds: float, fn: Any) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                fn()
            except Exception:
                log.exception("periodic %s failed", getattr(fn, "__name__", fn))

    def apply_retention(self, now: int | None = None) -> None:
        """Apply retention at ``now`` (default: the broker clock's now; a manual clock's advance
        passes the time it moved to)."""
        if now is None:
            now = self.now_ms()
        for plog in list(self.logs.values()):
            if plog.opened:  # (the others are opening in the background: see open_deferred)
                plog.apply_retention(now)

    def expire_producers(self, now: int | None = None) -> int:
        """Forget producers idle for producer.id.expiration.ms in every open partition (default
        ``now``: the broker clock's); returns how many were forgotten."""
        if now is None:
            now = self.now_ms()
        expiration = self.broker_config["producer.id.expiration.ms"]
        return sum(
            plog.producers.remove_expired(now, expiration) for plog in list(self.logs.values()) if plog.opened
        )

    async def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        await self.cleaner.close()
        if self._scheduled is not None:
            self._scheduled.cancel()
            self._scheduled = None
        if self._sync_task is not None:
            self._sync_task.cancel()
        while self._flushing or self._syncing:
            await asyncio.sleep(0.001)
        closed = [plog for plog in self.logs.values() if plog.opened]
        for plog in closed:
            plog.close(sync=False)  # (synced below, all at once)
        # One syncfs makes everything the closes wrote durable -- the appends not synced yet (those
        # of log.flush=never, or in flight), indexes, producer snapshots, transaction indexes,
        # renames -- where an fsync per file made a stop of 10,000 partitions take seconds; only
        # then do the recovery points (the checkpoint) and the marker claim it.
        syncfs(self.data_dir)
        for plog in closed:
            plog.mark_flushed(*plog.flush_target())
            if self.journaled and self._sync_failed is None:
                self._sync_points[plog] = plog.log_end_offset
        if self._next is not None and not self._next.done():
            self._next.set_result(None)
        self.write_checkpoint()
        self._executor.shutdown(wait=True)
        self._flushers.shutdown(wait=True)
        self._syncer.shutdown(wait=True)
        if self.journal is not None:
            self.journal.close()
            if self._sync_failed is None:  # every append is in the synced segments now
                self.journal.delete_through(self.journal.seq, everything=True)
        if self._syncfs_fd is not None:
            os.close(self._syncfs_fd)
            self._syncfs_fd = None
        if self._sync_failed is None:
            self.write_clean_shutdown()

    def write_clean_shutdown(self) -> None:
        """After every log is closed and synced (``close``): write the marker listing every log's
        segment files (size, mtime), which lets the next start trust the logs still so without
        reading them. A log with a file written in the marker's own clock tick is left out
        (recovered at the next start): a write after the marker must change the mtime."""
        path = self.data_dir / CLEAN_SHUTDOWN
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(MARKER_HEADER.encode() + b"\n")
            f.flush()
            now_ns = os.fstat(f.fileno()).st_mtime_ns  # the file system's clock, as mtimes read
            rows = []
            for (topic, partition), plog in self.logs.items():
                if plog.deleted:
                    continue
                if plog.opened:
                    specs = _segment_specs(plog, now_ns)
                else:  # untouched since the last clean stop (or failed to open: then not listed)
                    specs = self.clean_logs.get((topic, partition)) if plog.state == UNOPENED else None
                if specs:
                    rows.append(f"{topic} {partition} {specs}\n")
            f.write("".join(rows).encode())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(self.data_dir)
